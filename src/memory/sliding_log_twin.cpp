// Twin of lua/sliding_log.lua: the sorted set is a UnitLog (store.hpp), kept in Redis's order.
#include "twins.hpp"

namespace redlimit::detail::memory {

SlidingLogTwin::SlidingLogTwin(const Call& c)
    : c_(c), limit_(c.num(4)), window_(c.num(5)), cutoff_(c.now - window_) {}

namespace {

// The key as a sorted set: nullptr when missing, WRONGTYPE when it holds anything else.
UnitLog* as_log(KeyRef& key) {
  Entry* e = key.get();
  if (e == nullptr) return nullptr;
  if (auto* log = std::get_if<UnitLog>(&e->state)) return log;
  wrong_type();
}

}  // namespace

Decided SlidingLogTwin::decide(KeyRef& key, std::int64_t cost) const {
  const std::int64_t now = c_.now;
  UnitLog* log = as_log(key);
  std::int64_t used = 0;
  if (c_.record || c_.refund) {
    if (log != nullptr) {
      log->remove_through(cutoff_);       // ZREMRANGEBYSCORE key -inf cutoff
      if (c_.refund) log->pop_max(cost);  // ZPOPMAX key cost
      if (log->empty()) {                 // Redis deletes an emptied sorted set
        key.erase();
        log = nullptr;
      }
    }
    used = log != nullptr ? static_cast<std::int64_t>(log->size()) : 0;  // ZCARD
  } else {
    used = log != nullptr ? static_cast<std::int64_t>(log->count_after(cutoff_)) : 0;  // ZCOUNT (cutoff +inf
  }

  const bool allowed = c_.refund || used + cost <= limit_;
  if (allowed && c_.record) {
    if (log == nullptr) log = &std::get<UnitLog>(key.create(UnitLog{}).state);
    std::int64_t seq = used;
    for (std::int64_t i = 0; i < cost; ++i) {
      do {
        seq = seq + 1;
      } while (!log->add_nx(now, seq));  // ZADD key NX now "<now>:<seq>"
    }
    used = used + cost;
  }

  Decided d;
  d.allowed = allowed ? 1 : 0;
  d.remaining = std::max<std::int64_t>(0, limit_ - used);  // a lowered limit: nothing left
  if (!allowed) {
    // ZREVRANGE key (limit - cost) (limit - cost) WITHSCORES; an empty answer makes the Lua fail.
    const std::optional<std::int64_t> score = log != nullptr ? log->rev_score(limit_ - cost) : std::nullopt;
    if (!score) throw ScriptError{"ERR attempt to perform arithmetic on a nil value (sliding_log retry_after)"};
    d.retry_after = *score + window_ - now;
  }
  if (used > 0) {
    d.reset_after = std::max<std::int64_t>(0, *log->rev_score(0) + window_ - now);  // ZREVRANGE key 0 0
    if (allowed && c_.record) key.expire_ms(now, ttl_ms(d.reset_after));
  }
  return d;
}

}  // namespace redlimit::detail::memory
