#pragma once
// The facade: owns the connection, the clock and the options, and hands out strategy objects.
//
//   auto limiter = redlimit::RateLimiter::connect("redis://127.0.0.1:6379/0");
//   auto api = limiter.sliding_window("api", redlimit::Limit::per_minute(100));
//   if (!api.consume("user-42").allowed) { /* 429 */ }
//
// Strategy objects are cheap to copy and share the limiter's connection; they stay valid after the
// limiter itself is destroyed. All calls are thread-safe: connect() opens a pool of connections
// (Options::pool), so threads do not wait for each other's round trips.
#include "redlimit/detail/config.hpp"
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/transport/async_connection.hpp"
#include "redlimit/transport/connection.hpp"
#include "redlimit/fixed_window.hpp"
#include "redlimit/health.hpp"
#include "redlimit/leaky_bucket.hpp"
#include "redlimit/limit.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/options.hpp"
#include "redlimit/policy.hpp"
#include "redlimit/sliding_log.hpp"
#include "redlimit/sliding_window.hpp"
#include "redlimit/token_bucket.hpp"

namespace redlimit {

namespace detail {
struct Context;
}

class RateLimiter {
 public:
  // Connects to redis://, rediss:// (a build with TLS), unix://, redis-cluster://, rediss-cluster://
  // (a build with TLS), redis-sentinel:// or rediss-sentinel:// (a build with TLS) (docs/connecting.md). Throws
  // InvalidArgument for a malformed URL or options; ConnectionError if the server is unreachable (under
  // OnFailure::raise); AuthError for refused credentials whatever the policy.
  static RateLimiter connect(std::string_view url, Options options = {});

  // Over any Connection (a mock in unit tests, a custom transport).
  explicit RateLimiter(std::shared_ptr<Connection> connection, Options options = {});

  // No Redis: the same strategies and policies on a process-local MemoryConnection, deciding exactly
  // as the Redis scripts do. Expiry follows options.clock (SystemClock when null). Thread-safe.
  static RateLimiter in_memory(Options options = {});

  FixedWindow fixed_window(std::string resource, Limit limit) const;
  SlidingLog sliding_log(std::string resource, Limit limit) const;
  // `precision` overrides limit.precision() when non-zero; it must divide the window.
  SlidingWindow sliding_window(std::string resource, Limit limit,
                               std::chrono::microseconds precision = std::chrono::microseconds{0}) const;
  TokenBucket token_bucket(std::string resource, std::int64_t capacity, std::int64_t refill_per_period,
                           std::chrono::microseconds period) const;
  LeakyBucket leaky_bucket(std::string resource, std::int64_t capacity, Limit leak_rate,
                           LeakyMode mode = LeakyMode::meter) const;

  // Several sliding-window limits, all-or-nothing: limiter.policy("api", parse_limits("10/s; 120/min")).
  Policy policy(std::string resource, std::vector<Limit> limits) const;

  // Enables Strategy::consume_async / consume_future on this limiter and the strategies it made
  // (before or after this call). Typically an AsyncRedis attached to the caller's event loop.
  // On a limiter over a Redis Cluster (a connection whose scripts_span_slots() is false, such as
  // redis-cluster://) the async connection must route by slot (AsyncCluster): another one throws
  // InvalidArgument, before any I/O.
  void attach_async(std::shared_ptr<AsyncConnection> async);

  const Options& options() const;
  // How often each outcome happened since this limiter was made (shared by its strategies).
  Counters counters() const;
  // The circuit breakers' states and the latest decision's source, read without touching Redis:
  // what a service's health endpoint shows.
  Health health() const;
  Clock& clock() const;

 private:
  std::shared_ptr<detail::Context> ctx_;
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/rate_limiter-inl.hpp"
#endif
