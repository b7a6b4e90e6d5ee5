#pragma once
// Body of redlimit/detail/sync_lane.hpp.
#include <algorithm>
#include <utility>
#include <vector>

#include "redlimit/detail/decision_path.hpp"
#include "redlimit/detail/small_vector.hpp"
#include "redlimit/detail/sync_lane.hpp"

namespace redlimit::detail {

namespace sync_lane_impl {

// The thread is sending a lane's call (SyncLane::sending).
inline thread_local bool sending = false;

struct Sending {
  Sending() { sending = true; }
  ~Sending() { sending = false; }
  Sending(const Sending&) = delete;
  Sending& operator=(const Sending&) = delete;
};

}  // namespace sync_lane_impl

REDLIMIT_INLINE bool SyncLane::sending() { return sync_lane_impl::sending; }

REDLIMIT_INLINE bool SyncLane::takes(Context& ctx, const ScriptCall& call, std::int64_t cost) const {
  if (sending()) return false;
  if (!ctx.breakers && !ctx.reject_cache) return true;
  const auto now = ctx.clock->monotonic();  // the breakers' and the reject cache's time (clock.hpp)
  if (ctx.breakers && ctx.breakers->of(ctx.connection->node_of(call.keys[0])).state(now) != BreakerState::closed) {
    return false;
  }
  return !(ctx.reject_cache && ctx.reject_cache->lookup(call.keys[0], cost, now));
}

// Only the caller that can go next is woken, not every waiter: on a busy client core each needless
// wake-up is a context switch.
REDLIMIT_INLINE void SyncLane::wake_next(Shard& shard) const {
  if (!shard.queue.empty() && shard.flights < flights_) shard.queue.front()->wake.notify_one();
}

REDLIMIT_INLINE Decision SyncLane::consume(const std::shared_ptr<Context>& ctx,
                                           const std::shared_ptr<const StrategySpec>& spec, ScriptCall& call,
                                           std::int64_t cost) {
  Waiter me;
  me.call = &call;
  me.cost = cost;
  me.started = std::chrono::steady_clock::now();
  const std::size_t node = ctx->connection->node_of(call.keys[0]);  // 0 on one server
  std::unique_lock<std::mutex> lock(mutex_);
  Shard& shard = shards_[node];  // made on first use; never removed, so the reference stays good
  shard.queue.push_back(&me);
  if (shard.lingering != nullptr) shard.lingering->wake.notify_one();  // one more caller for it
  bool waited = false;
  while (!me.done) {
    // While a caller holds a call back (linger), a free flight is left alone: the callers that come
    // meanwhile join the held call, rather than send it at once with the two of them in it.
    if (!me.taken && shard.flights < flights_ && shard.lingering == nullptr) {
      if (linger(lock, shard, *ctx, *spec, me, waited)) continue;
      send(lock, shard, ctx, spec, me);  // carries `me` too, unless older calls fill it (per_call)
      continue;
    }
    // No timeout: a call on its way ends by its own deadline, which is earlier than ours. Woken
    // when done, or when first in the queue with a flight free.
    waited = true;
    me.wake.wait(lock);
  }
  lock.unlock();
  if (me.error) std::rethrow_exception(me.error);
  return me.decision;
}

// The flight is held while `me` waits, so no other caller sends meanwhile; the callers that queue
// wake it (consume). Busy: `me` waited for a flight, or the last call was shared; a caller on an idle
// lane goes at once, as without a linger. One caller of a shard holds a call back at a time, the
// first in its queue; with more flights, the callers that come meanwhile queue behind it all the
// same (consume). The wait ends by `me`'s deadline, its call's.
REDLIMIT_INLINE bool SyncLane::linger(std::unique_lock<std::mutex>& lock, Shard& shard, const Context& ctx,
                                      const StrategySpec& spec, Waiter& me, bool waited) {
  if (linger_.count() == 0 || me.lingered || !(waited || shard.last > 1)) return false;
  if (shard.lingering != nullptr || shard.queue.front() != &me) return false;
  const std::size_t want = std::min(std::max<std::size_t>(shard.last, 2), spec.per_call);
  if (shard.queue.size() >= want) return false;
  me.lingered = true;
  auto until = std::chrono::steady_clock::now() + linger_;
  if (ctx.options.command_timeout.count() > 0) until = std::min(until, me.started + ctx.options.command_timeout);
  ++shard.flights;
  shard.lingering = &me;
  me.wake.wait_until(lock, until, [&] { return me.taken || shard.queue.size() >= want; });
  shard.lingering = nullptr;
  --shard.flights;
  return true;
}

REDLIMIT_INLINE void SyncLane::send(std::unique_lock<std::mutex>& lock, Shard& shard,
                                    const std::shared_ptr<Context>& ctx,
                                    const std::shared_ptr<const StrategySpec>& spec, const Waiter& me) {
  SmallVector<Waiter*, 1> batch;  // a caller alone, the common case, in place (small_vector.hpp)
  while (!shard.queue.empty() && batch.size() < spec->per_call) {
    batch.push_back(shard.queue.front());
    shard.queue.pop_front();
    batch.back()->taken = true;
  }
  shard.last = batch.size();
  ++shard.flights;
  wake_next(shard);  // more than a call's worth queued and a flight still free
  lock.unlock();
  std::vector<Decision> ds;
  std::exception_ptr error;
  try {
    sync_lane_impl::Sending sending;
    // Decided at the time it is sent, as a call alone is: a queued caller's own reading of the
    // clock (ARGV[1]) is up to a round trip old.
    const bool restamp = batch.size() > 1 || batch.front() != &me;
    const std::string now = restamp ? ctx->now_arg() : std::string();
    DecisionPath path(ctx, spec, Operation::consume, *spec->script);
    path.count_each_request();  // each waiter's consume() is a call of its own
    path.reserve(batch.size());
    for (Waiter* w : batch) {
      if (restamp) w->call->args[0] = now;
      path.add(std::move(*w->call), w->cost, w->started);  // its latency counts its wait
    }
    ds = decide(path, batch.front()->started);
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  --shard.flights;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (error) {
      batch[i]->error = error;
    } else {
      batch[i]->decision = std::move(ds[i]);
    }
    batch[i]->done = true;
    batch[i]->wake.notify_one();  // under the lock: the waiter cannot return (and end) before this
  }
  wake_next(shard);
}

}  // namespace redlimit::detail
