#pragma once
// Body of redlimit/detail/sync_lane.hpp.
#include <algorithm>
#include <utility>

#include "redlimit/detail/decision_path.hpp"
#include "redlimit/detail/sync_lane.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

namespace sync_lane_impl {

// Set on a thread while it sends a shared call: a consume() made from inside that call (a metrics
// sink, a connect hook) goes alone rather than wait for the call it is part of.
inline thread_local bool sending = false;

}  // namespace sync_lane_impl

REDLIMIT_INLINE Decision SyncLane::consume(const std::shared_ptr<Context>& ctx,
                                           const std::shared_ptr<const StrategySpec>& spec, ScriptCall& call,
                                           std::int64_t cost) {
  Waiter me{std::move(call), cost, std::chrono::steady_clock::now(), Decision{}, nullptr, false};
  if (sync_lane_impl::sending) {
    send(ctx, spec, {&me});
  } else {
    const auto timeout = ctx->options.command_timeout;
    const auto deadline = me.since + timeout;
    bool past_deadline = false;  // and taken into the call in flight: wait for it
    std::unique_lock<std::mutex> lock(mutex_);
    queue_.push_back(&me);
    while (!me.done) {
      if (!busy_) {  // lead: send everything queued, this caller's request among it
        busy_ = true;
        std::vector<Waiter*> group;
        group.swap(queue_);
        lock.unlock();
        send(ctx, spec, group);
        lock.lock();
        for (Waiter* w : group) w->done = true;
        busy_ = false;
        ended_.notify_all();
      } else if (timeout.count() <= 0 || past_deadline) {
        ended_.wait(lock);
      } else if (ended_.wait_until(lock, deadline) == std::cv_status::timeout && !me.done) {
        const auto at = std::find(queue_.begin(), queue_.end(), &me);
        if (at != queue_.end()) {  // still queued: it leaves, having sent nothing
          queue_.erase(at);
          lock.unlock();
          return expired(ctx, spec, me);
        }
        // Taken into the call in flight, whose deadline is the earliest of its callers': wait for it.
        past_deadline = true;
      }
    }
  }
  if (me.error) std::rethrow_exception(me.error);
  return me.decision;
}

REDLIMIT_INLINE void SyncLane::send(const std::shared_ptr<Context>& ctx, const std::shared_ptr<const StrategySpec>& spec,
                                    const std::vector<Waiter*>& group) {
  struct Sending {
    bool was = sync_lane_impl::sending;
    Sending() { sync_lane_impl::sending = true; }
    ~Sending() { sync_lane_impl::sending = was; }
  } sending;
  try {
    DecisionPath path(ctx, spec, Operation::consume, *spec->script);
    path.reserve(group.size());
    auto since = group.front()->since;  // the earliest caller's start: the call's deadline counts from it
    for (Waiter* w : group) {
      since = std::min(since, w->since);
      path.add(std::move(w->call), w->cost);
    }
    path.since(since);
    const std::vector<Decision> ds = decide(path);
    for (std::size_t i = 0; i < group.size(); ++i) group[i]->decision = ds[i];
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    for (Waiter* w : group) w->error = error;
  }
}

REDLIMIT_INLINE Decision SyncLane::expired(const std::shared_ptr<Context>& ctx,
                                           const std::shared_ptr<const StrategySpec>& spec, Waiter& me) {
  DecisionPath path(ctx, spec, Operation::consume, *spec->script);
  path.since(me.since);
  path.add(std::move(me.call), me.cost);
  if (path.begin().empty()) return path.finish({}).front();  // answered without Redis after all
  return path.fail(TimeoutError("waited past the call's deadline for a shared script call")).front();
}

}  // namespace redlimit::detail
