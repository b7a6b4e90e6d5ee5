#pragma once
// Concurrent consume_async() calls of one strategy, sent as shared script calls
// (Options::share_script_calls).
//
// Over an AsyncConnection many calls are in flight at once, and Redis already reads them many at a
// time; what each one still costs is a script run of its own: the FCALL's fixed cost (the command,
// the clock, the parameters) and a reply of its own. A lane collects the calls made through a
// strategy until the event loop's next turn, then sends them as one call, which Redis decides one
// request after another, in the order they came, exactly as a consume_many batch; each caller's
// callback gets its own decision. A call made while none is waiting schedules that turn
// (AsyncConnection::post), so nothing waits longer than the loop takes to come round: one call
// alone goes alone, and calls made from callbacks (a service answering a request by starting the
// next) are merged with the others made in the same turn. A merged call of kSendEarlyFrom or more
// hands out its decisions in two halves and sends the calls the first half made before the second
// half runs (AsyncConnection::send_now): Redis decides them meanwhile, where otherwise Redis and
// the client would take turns.
//
// The merged call carries the deadline of its first caller, the earliest (each one's counts from its
// own consume_async, as before). Nothing is replayed. On a Redis Cluster a turn's calls are merged
// per master, each master's a call of its own whose callers hear as soon as its reply is in. A
// merged call stands or falls as a whole, as a consume_many batch does: a connection failure is
// every caller's (each request gets the failure policy), and so is an error reply (no valid input
// gets one: a key of another type under a request's key reads as no state, lua/epilogue.lua).
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "redlimit/decision.hpp"
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/script.hpp"
#include "redlimit/transport/async_connection.hpp"

namespace redlimit::detail {

struct Context;
struct StrategySpec;

class AsyncLane {
 public:
  using Done = std::function<void(const Decision&, std::exception_ptr)>;

  // Queues one consume (checked: `call` is its script call) for the loop's next turn, where it is
  // sent with every other call queued meanwhile on the same connection; `call` and `done` are moved
  // from. Returns false, taking neither, when the calls pending are another connection's (one was
  // attached meanwhile): the caller then sends this one alone.
  bool add(const std::shared_ptr<Context>& ctx, const std::shared_ptr<const StrategySpec>& spec,
           const std::shared_ptr<AsyncConnection>& conn, ScriptCall& call, std::int64_t cost, Done& done);

 private:
  struct Pending {
    ScriptCall call;
    std::int64_t cost;
    Done done;
    std::chrono::steady_clock::time_point started;  // when consume_async() queued it
  };
  // On the loop's thread: everything queued, as one decision path (detail/decision_path.hpp); on a
  // cluster, one per master (Connection::node_of), so that each master's callers are answered when
  // its reply is in: a stalled master holds up only its own subjects' callbacks.
  void flush(const std::shared_ptr<Context>& ctx, const std::shared_ptr<const StrategySpec>& spec);
  // One merged call of `batch` (in the order queued), its callbacks run when its reply is in.
  static void send(const std::shared_ptr<Context>& ctx, const std::shared_ptr<const StrategySpec>& spec,
                   std::shared_ptr<AsyncConnection> conn, AsyncConnection::Deadline deadline,
                   std::vector<Pending> batch);
  // A merged call of at least this many callers hands out its decisions in two halves, sending the
  // calls the first half made before the second half runs: small ones are not worth the extra call.
  static constexpr std::size_t kSendEarlyFrom = 16;

  std::mutex mutex_;
  std::vector<Pending> pending_;
  std::shared_ptr<AsyncConnection> conn_;  // where the pending calls go
  AsyncConnection::Deadline deadline_{};   // the first pending call's
};

}  // namespace redlimit::detail

// Header-only builds get the body from detail/decision_path.hpp, which it needs.
