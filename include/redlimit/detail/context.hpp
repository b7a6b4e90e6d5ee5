#pragma once
// What every strategy object shares with the RateLimiter that made it: the connection, the clock,
// the options, the failure machinery and the counters. Strategy objects hold it by shared_ptr, so
// they stay valid after the limiter is moved or destroyed.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "redlimit/detail/breaker.hpp"
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/reject_cache.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/options.hpp"
#include "redlimit/transport/async_connection.hpp"
#include "redlimit/transport/connection.hpp"

namespace redlimit::detail {

struct AtomicCounters {
  std::atomic<std::uint64_t> decisions{0}, allowed{0}, rejected{0}, shadow_rejected{0}, from_fallback{0},
      from_failure_policy{0}, errors{0}, breaker_short_circuits{0}, local_cache_hits{0}, answered{0},
      resent_by_slot{0};
  Counters snapshot() const;
};

struct Context {
  std::shared_ptr<Connection> connection;
  std::shared_ptr<Connection> fallback;    // OnFailure::fallback only
  std::shared_ptr<AsyncConnection> async;  // RateLimiter::attach_async; null = no async calls
  std::shared_ptr<Clock> clock;
  Options options;
  // A redisContext is not thread-safe: one caller at a time, unless the connection says otherwise.
  std::mutex mutex;
  // One circuit breaker per shard (Connection::node_of); null when options.breaker_threshold == 0.
  std::unique_ptr<Breakers> breakers;
  AtomicCounters counters;
  std::unique_ptr<RejectCache> reject_cache;  // null unless options.local_reject_cache
  // The Source of the latest decision, as an int; -1 before the first (RateLimiter::health()).
  std::atomic<int> last_source{-1};

  // ARGV[1] of every script: the client's time in microseconds, or "redis" for the script to read TIME.
  // Throws InvalidArgument for a client clock before 1970.
  std::string now_arg() const;
};

}  // namespace redlimit::detail

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/context-inl.hpp"
#endif
