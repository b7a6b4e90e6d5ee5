#pragma once
// Concurrent consume() calls of one strategy from several threads, sent as shared script calls
// (Options::share_sync_calls).
//
// A pool already sends the commands of calls in flight at the same moment in one write; each one
// is still a script run of its own in Redis, with the FCALL's fixed cost and a reply of its own. A
// lane lets one shared call of a strategy be in flight at a time: a consume() that finds the lane
// idle sends its request at once; one that finds a call in flight queues, and when that call
// returns, the first caller to wake takes everything queued by then and sends it as one script
// call, which Redis decides one request after another, in the order they queued, exactly as a
// consume_many batch. Each caller gets its own decision. Under load the shared calls grow with the
// number of callers waiting; a call alone still goes at once.
//
// Each caller keeps its deadline: a shared call's deadline counts from its earliest caller's start
// (Connection::begin_call_at), and a caller still queued when its deadline passes leaves the queue
// and gets the failure policy's answer, having sent nothing. Nothing is replayed. A shared call
// stands or falls as a whole, as a consume_many batch does: a connection failure is every caller's
// (each request gets the failure policy), and so is an error reply, such as a key of another type
// under one request's state key.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "redlimit/decision.hpp"
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/script.hpp"

namespace redlimit::detail {

struct Context;
struct StrategySpec;

class SyncLane {
 public:
  // Decides one consume (checked: `call` is its script call, moved from) with the others queued
  // with it. Throws what consume() throws: the failure policy's error under OnFailure::raise, or an
  // error reply of the shared call.
  Decision consume(const std::shared_ptr<Context>& ctx, const std::shared_ptr<const StrategySpec>& spec,
                   ScriptCall& call, std::int64_t cost);

 private:
  struct Waiter {
    ScriptCall call;
    std::int64_t cost;
    std::chrono::steady_clock::time_point since;  // when its consume() began
    Decision decision;
    std::exception_ptr error;
    bool done = false;
  };
  // On the leader's thread, outside the lock: `group` as one decision path. Fills in each
  // waiter's decision or error; throws nothing.
  static void send(const std::shared_ptr<Context>& ctx, const std::shared_ptr<const StrategySpec>& spec,
                   const std::vector<Waiter*>& group);
  // A waiter whose deadline passed in the queue: the failure policy answers it (nothing was sent).
  static Decision expired(const std::shared_ptr<Context>& ctx, const std::shared_ptr<const StrategySpec>& spec,
                          Waiter& me);

  std::mutex mutex_;
  std::condition_variable ended_;  // a shared call ended: its callers are answered, the lane is idle
  std::vector<Waiter*> queue_;     // waiting for the next shared call, in arrival order
  bool busy_ = false;              // a shared call is in flight
};

}  // namespace redlimit::detail

// Header-only builds get the body from detail/decision_path.hpp, which it needs.
