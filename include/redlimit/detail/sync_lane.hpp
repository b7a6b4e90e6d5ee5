#pragma once
// Concurrent consume() calls of one strategy, sent as shared script calls
// (Options::share_script_calls): the synchronous twin of detail/async_lane.hpp.
//
// A service calls consume() from many threads at once, and each call alone costs Redis a socket
// read, a script run and a reply of its own: under concurrency most of Redis's CPU per decision
// goes there (docs/performance.md, "Redis CPU per decision"). A lane lets at most `flights` script
// calls at a time be on their way per strategy and shard (Options::shared_call_flights); a call
// made while they are out waits its turn, and the next call to go takes every call queued by then
// (up to the strategy's StrategySpec::per_call), oldest first, as one script call, which Redis decides one
// request after another, in that order, exactly as a consume_many batch. Each caller gets its own
// decision. A call that finds a flight free goes at once: an idle service pays nothing for the
// lane, a busy one sends a few calls per round trip however many threads it has.
//
// Deadlines: a shared call's deadline is its oldest caller's (its start + command_timeout); the
// others started later, so none waits past its own. A caller queued behind the calls on their way
// waits at most until one of them ends, which is by that call's deadline, earlier than its own.
// A lane may also hold a call back for a moment (Options::shared_call_linger) so that more callers
// join it: while it is busy, the next call waits for as many callers as the last one carried (the
// threads that call in a loop, back), or a call's worth, or the linger's end, whichever is first;
// the callers that come meanwhile join it, though another flight be free.
// Nothing is replayed. Like a batch, a shared call stands or falls as a whole: a connection failure
// is every caller's (each gets the failure policy), and so is an error reply (no valid input gets
// one: a key of another type under a request's key reads as no state, lua/epilogue.lua). The time
// the requests are decided at is read when the call is sent.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "redlimit/decision.hpp"
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/script.hpp"

namespace redlimit::detail {

struct Context;
struct StrategySpec;

class SyncLane {
 public:
  // `flights`: script calls of a shard on their way at once (Options::shared_call_flights); 0 is 1.
  // `linger`: Options::shared_call_linger.
  SyncLane(std::size_t flights, std::chrono::microseconds linger)
      : flights_(flights > 0 ? flights : 1), linger_(linger) {}

  // Decides one consume (checked: `call` is its script call, moved from), sharing a script call with
  // the consume() calls of the same strategy in flight at the same moment. Throws what consume()
  // throws.
  Decision consume(const std::shared_ptr<Context>& ctx, const std::shared_ptr<const StrategySpec>& spec,
                   ScriptCall& call, std::int64_t cost);

  // False when the call is better made alone, now: when it will not need Redis, or when waiting
  // could outlast what it needs (the local reject cache answers it; its shard's circuit breaker is
  // not closed, so it is answered by the failure policy at once or is the probe; or this thread is
  // sending a lane's call, and a metrics sink called meanwhile consumes again).
  bool takes(Context& ctx, const ScriptCall& call, std::int64_t cost) const;

 private:
  struct Waiter {
    ScriptCall* call = nullptr;
    std::int64_t cost = 0;
    std::chrono::steady_clock::time_point started{};
    bool taken = false;  // in a call on its way: its outcome comes
    bool lingered = false;  // has held a call back once (linger): never twice
    bool done = false;
    Decision decision;
    std::exception_ptr error;
    std::condition_variable wake;  // notified under the lane's mutex
  };
  // True on a thread that is sending a lane's call.
  static bool sending();
  // The calls bound for one shard (Connection::node_of: one server is one shard, a cluster one per
  // master): a master that stalls holds up only its own subjects' calls, never another master's.
  struct Shard {
    std::deque<Waiter*> queue;
    std::size_t flights = 0;
    std::size_t last = 0;         // callers the shard's last call carried
    Waiter* lingering = nullptr;  // the caller holding a call back (linger), if any
  };
  // Whether `me`, first in the queue with a flight free, holds the call back for more callers
  // (linger_); if so, waits (the lock released meanwhile) and returns true: the caller looks again.
  bool linger(std::unique_lock<std::mutex>& lock, Shard& shard, const Context& ctx, const StrategySpec& spec,
              Waiter& me, bool waited);
  // Wakes the first caller queued for `shard` if a flight is free (with the lock held).
  void wake_next(Shard& shard) const;
  // Called with the lock held and a flight of `shard` free; returns with the lock held again and
  // every waiter it took done.
  void send(std::unique_lock<std::mutex>& lock, Shard& shard, const std::shared_ptr<Context>& ctx,
            const std::shared_ptr<const StrategySpec>& spec, const Waiter& me);

  const std::size_t flights_;  // script calls of a shard on their way at once (at least 1)
  const std::chrono::microseconds linger_;

  std::mutex mutex_;
  std::unordered_map<std::size_t, Shard> shards_;  // by node; a reference stays good across inserts
};

}  // namespace redlimit::detail

// Header-only builds get the body from detail/decision_path.hpp, which it needs.
