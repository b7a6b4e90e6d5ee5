#include "redlimit/rate_limiter.hpp"

#include "redlimit/detail/context.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/transport/memory_connection.hpp"
#include "redlimit/transport/cluster_connection.hpp"
#include "redlimit/transport/connection_pool.hpp"
#include "redlimit/url.hpp"

namespace redlimit {

namespace {

void check_options(const Options& o) {
  detail::check_prefix(o.prefix);
  if (o.connect_timeout.count() < 0) throw InvalidArgument("connect_timeout must not be negative");
  if (o.command_timeout.count() < 0) throw InvalidArgument("command_timeout must not be negative");
  if (o.breaker_threshold < 0) throw InvalidArgument("breaker_threshold must not be negative");
  if (o.breaker_threshold > 0 && o.breaker_cooldown.count() <= 0) {
    throw InvalidArgument("breaker_cooldown must be positive when the breaker is on");
  }
}

// OnFailure::fallback decides with the in-memory twins of the scripts, on the limiter's clock.
std::shared_ptr<Connection> make_fallback(const std::shared_ptr<Clock>& clock) {
  return std::make_shared<MemoryConnection>(clock);
}

}  // namespace

RateLimiter RateLimiter::connect(std::string_view url, Options options) {
  check_options(options);
  if (url.substr(0, 16) == "redis-cluster://") {
    auto cluster = std::make_shared<ClusterConnection>(parse_cluster_url(url), options);
    return RateLimiter(std::move(cluster), std::move(options));
  }
  Endpoint endpoint = parse_url(url);
  auto conn = std::make_shared<ConnectionPool>(std::move(endpoint), options.connect_timeout, options.command_timeout,
                                               options.pool);
  // Fail now, not on the first decision, when the server is unreachable or refuses AUTH/SELECT.
  const Reply pong = conn->command({"PING"});
  if (pong.is_error()) throw ReplyError("PING failed: " + pong.str);
  return RateLimiter(std::move(conn), std::move(options));
}

RateLimiter RateLimiter::in_memory(Options options) {
  std::shared_ptr<Clock> clock = options.clock ? options.clock : std::shared_ptr<Clock>(SystemClock::instance());
  auto conn = std::make_shared<MemoryConnection>(std::move(clock));
  return RateLimiter(std::move(conn), std::move(options));
}

RateLimiter::RateLimiter(std::shared_ptr<Connection> connection, Options options) {
  check_options(options);
  if (!connection) throw InvalidArgument("connection must not be null");
  ctx_ = std::make_shared<detail::Context>();
  ctx_->connection = std::move(connection);
  ctx_->clock = options.clock ? options.clock : SystemClock::instance();
  if (options.breaker_threshold > 0) {
    ctx_->breaker = std::make_unique<detail::Breaker>(options.breaker_threshold, options.breaker_cooldown);
  }
  if (options.local_reject_cache) {
    ctx_->reject_cache = std::make_unique<detail::RejectCache>(options.local_reject_cache_size);
  }
  if (options.on_failure == OnFailure::fallback) ctx_->fallback = make_fallback(ctx_->clock);
  ctx_->options = std::move(options);
}

void RateLimiter::attach_async(std::shared_ptr<AsyncConnection> async) {
  std::lock_guard<std::mutex> lock(ctx_->mutex);
  ctx_->async = std::move(async);
}

Counters RateLimiter::counters() const { return ctx_->counters.snapshot(); }

FixedWindow RateLimiter::fixed_window(std::string resource, Limit limit) const {
  return FixedWindow(ctx_, std::move(resource), limit);
}

SlidingLog RateLimiter::sliding_log(std::string resource, Limit limit) const {
  return SlidingLog(ctx_, std::move(resource), limit);
}

SlidingWindow RateLimiter::sliding_window(std::string resource, Limit limit,
                                          std::chrono::microseconds precision) const {
  if (precision.count() != 0) limit = limit.precision(precision);
  return SlidingWindow(ctx_, std::move(resource), limit);
}

TokenBucket RateLimiter::token_bucket(std::string resource, std::int64_t capacity, std::int64_t refill_per_period,
                                      std::chrono::microseconds period) const {
  return TokenBucket(ctx_, std::move(resource), capacity, refill_per_period, period);
}

LeakyBucket RateLimiter::leaky_bucket(std::string resource, std::int64_t capacity, Limit leak_rate,
                                      LeakyMode mode) const {
  return LeakyBucket(ctx_, std::move(resource), capacity, leak_rate, mode);
}

Policy RateLimiter::policy(std::string resource, std::vector<Limit> limits) const {
  return Policy(ctx_, std::move(resource), std::move(limits));
}

const Options& RateLimiter::options() const { return ctx_->options; }

Clock& RateLimiter::clock() const { return *ctx_->clock; }

}  // namespace redlimit
