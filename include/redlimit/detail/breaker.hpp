#pragma once
// Consecutive-failure circuit breaker: after `threshold` failures in a row the limiter stops sending
// to Redis for `cooldown` (the failure policy answers meanwhile); then one caller probes (half-open)
// and its outcome closes the breaker or opens it again. Its times are the clock's monotonic()
// readings (clock.hpp), never the wall time the decisions use.
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <utility>
#include <vector>

#include "redlimit/detail/config.hpp"
#include "redlimit/health.hpp"

namespace redlimit::detail {

class Breaker {
 public:
  Breaker(int threshold, std::chrono::microseconds cooldown) : threshold_(threshold), cooldown_(cooldown) {}
  // False while open: the caller must not touch Redis. After the cooldown one caller is let
  // through as a probe (half-open) until it reports.
  bool allow(std::chrono::microseconds now);
  void success();
  void failure(std::chrono::microseconds now);
  // A call ended with neither verdict (an error that says nothing of Redis's health): if it was the
  // probe, the next caller probes instead. Every way out of a probe calls one of these three, so
  // the breaker can never stay half-open with no probe in flight.
  void release();
  std::chrono::microseconds cooldown() const { return cooldown_; }
  int threshold() const { return threshold_; }
  // What allow(now) would find, without changing anything: for RateLimiter::health().
  BreakerState state(std::chrono::microseconds now) const;

 private:
  const int threshold_;
  const std::chrono::microseconds cooldown_;
  mutable std::mutex mutex_;
  int failures_ = 0;
  bool open_ = false;
  bool probing_ = false;
  std::chrono::microseconds open_until_{0};
};

// A limiter's breakers, one per shard (Connection::node_of): one Redis is one shard, so one breaker,
// exactly as before; on a cluster each master has its own, because one master down must not
// short-circuit the subjects the healthy masters serve. Made on first use; a cluster names at most
// one shard per node it has met, so their number is bounded by the nodes.
class Breakers {
 public:
  Breakers(int threshold, std::chrono::microseconds cooldown) : first_(threshold, cooldown) {}
  Breaker& of(std::size_t shard);
  std::chrono::microseconds cooldown() const { return first_.cooldown(); }
  // Every breaker made so far, by shard, shard 0 first (it always exists).
  std::vector<std::pair<std::size_t, BreakerState>> states(std::chrono::microseconds now) const;

 private:
  Breaker first_;  // shard 0: a single server's only one, reached without a lock or a lookup
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::unique_ptr<Breaker>> others_;
};

}  // namespace redlimit::detail

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/breaker-inl.hpp"
#endif
