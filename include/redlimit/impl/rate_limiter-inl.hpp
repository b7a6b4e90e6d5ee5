#pragma once
// Bodies of redlimit/rate_limiter.hpp (see redlimit/detail/config.hpp: compiled once in src/redlimit.cpp, or inline
// with REDLIMIT_HEADER_ONLY).
#include <algorithm>
#include <atomic>
#include <memory>

#include "redlimit/detail/config.hpp"
#include "redlimit/detail/context.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/detail/script.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/rate_limiter.hpp"
#include "redlimit/transport/cluster_connection.hpp"
#include "redlimit/transport/connection_pool.hpp"
#include "redlimit/transport/memory_connection.hpp"
#include "redlimit/transport/sentinel_connection.hpp"
#include "redlimit/url.hpp"

namespace redlimit {

namespace rate_limiter_impl {

REDLIMIT_INLINE void check_options(const Options& o) {
  detail::check_prefix(o.prefix);
  if (o.connect_timeout.count() < 0) throw InvalidArgument("connect_timeout must not be negative");
  if (o.command_timeout.count() < 0) throw InvalidArgument("command_timeout must not be negative");
  if (o.breaker_threshold < 0) throw InvalidArgument("breaker_threshold must not be negative");
  if (o.breaker_threshold > 0 && o.breaker_cooldown.count() <= 0) {
    throw InvalidArgument("breaker_cooldown must be positive when the breaker is on");
  }
  if (o.shared_call_linger.count() < 0) throw InvalidArgument("shared_call_linger must not be negative");
  if (o.shared_call_linger > std::chrono::seconds(1)) throw InvalidArgument("shared_call_linger must be at most 1 s");
  if (o.command_timeout.count() > 0 && o.shared_call_linger >= o.command_timeout) {
    throw InvalidArgument("shared_call_linger must be shorter than command_timeout");
  }
}

// OnFailure::fallback decides with the in-memory twins of the scripts, on the limiter's clock.
REDLIMIT_INLINE std::shared_ptr<Connection> make_fallback(const std::shared_ptr<Clock>& clock) {
  return std::make_shared<MemoryConnection>(clock);
}

// Under OnFailure::raise, connect() fails now, not on the first decision, when Redis is unreachable
// or cannot serve. Under any other policy (`lazy`) the limiter starts during an outage — a service
// that chose to fail open must be able to start while Redis restarts — and its decisions follow
// the policy until Redis answers (Counters::answered then starts counting). A server that answers
// but refuses our AUTH or SELECT, or any reply that is not an outage, throws either way: that is
// configuration, not an outage.
REDLIMIT_INLINE void first_ping(Connection& conn, bool lazy) {
  Reply pong;
  try {
    pong = conn.command({"PING"});
  } catch (const AuthError&) {
    throw;
  } catch (const ConnectionError&) {
    if (lazy) return;
    throw;
  }
  if (!pong.is_error()) return;
  if (lazy && detail::is_outage_reply(pong.str)) return;
  if (detail::is_outage_reply(pong.str)) throw UnavailableError("PING: " + detail::printable(pong.str));
  throw ReplyError("PING failed: " + detail::printable(pong.str));
}

// The value of `field` in an INFO reply ("field:value" lines), or "".
REDLIMIT_INLINE std::string info_field(const std::string& info, std::string_view field) {
  const std::string key = std::string(field) + ":";
  std::size_t at = info.find(key);
  while (at != std::string::npos && at != 0 && info[at - 1] != '\n') at = info.find(key, at + 1);
  if (at == std::string::npos) return {};
  const std::size_t from = at + key.size(), to = info.find_first_of("\r\n", from);
  return info.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

// A server with a memory limit and an evicting policy (allkeys-*, and volatile-* too: every key we
// write has a TTL) drops subjects' state under memory pressure, and a dropped state admits a full
// quota again. Checked on every new server connection of the pool (the first, and each reconnect:
// the server may have restarted with another configuration, or the limiter started lazily during an
// outage) and said through the metrics sink once per change to an evicting policy, not once per
// connection. INFO is readable by most ACL users; a server that refuses it is left alone.
// The hook for ConnectionPool::on_connect (SentinelConnection::on_connect: every master's pool); empty
// without a metrics sink.
REDLIMIT_INLINE ConnectionPool::ConnectHook eviction_watch(const Options& options) {
  if (!options.metrics) return {};
  // 0: not known yet, 1: not evicting, 2: evicting (said). Shared by the pool's connections.
  auto said = std::make_shared<std::atomic<int>>(0);
  return [said, metrics = options.metrics](Connection& conn) {
    const Reply info = conn.command({"INFO", "memory"});
    if (info.is_error()) return;
    const std::string policy = info_field(info.str, "maxmemory_policy");
    const std::string limit = info_field(info.str, "maxmemory");
    if (policy.empty()) return;
    const bool evicting = policy != "noeviction" && !limit.empty() && limit != "0";
    if (said->exchange(evicting ? 2 : 1) == 2 || !evicting) return;
    metrics->on_warning(detail::message(
        "the server evicts keys under memory pressure (maxmemory {} bytes, maxmemory-policy {}): an evicted "
        "subject's state is forgotten and its quota admitted again; use noeviction or a dedicated Redis "
        "(docs/reliability.md)",
        detail::printable(limit), detail::printable(policy)));
  };
}

}  // namespace rate_limiter_impl

REDLIMIT_INLINE RateLimiter RateLimiter::connect(std::string_view url, Options options) {
  rate_limiter_impl::check_options(options);
  if (has_scheme(url, "redis-cluster://") || has_scheme(url, "rediss-cluster://")) {
    auto cluster = std::make_shared<ClusterConnection>(parse_cluster_url(url), options);
    return RateLimiter(std::move(cluster), std::move(options));
  }
  if (has_scheme(url, "redis-sentinel://") || has_scheme(url, "rediss-sentinel://")) {
    auto sentinel = std::make_shared<SentinelConnection>(parse_sentinel_url(url), options);
    sentinel->on_connect(rate_limiter_impl::eviction_watch(options));
    rate_limiter_impl::first_ping(*sentinel, options.on_failure != OnFailure::raise);  // finds the master
    return RateLimiter(std::move(sentinel), std::move(options));
  }
  Endpoint endpoint = parse_url(url);
  auto conn = std::make_shared<ConnectionPool>(std::move(endpoint), options.connect_timeout, options.command_timeout,
                                               options.pool);
  conn->on_connect(rate_limiter_impl::eviction_watch(options));  // first, so the first PING's connection is checked
  rate_limiter_impl::first_ping(*conn, options.on_failure != OnFailure::raise);
  return RateLimiter(std::move(conn), std::move(options));
}

REDLIMIT_INLINE RateLimiter RateLimiter::in_memory(Options options) {
  std::shared_ptr<Clock> clock = options.clock ? options.clock : std::shared_ptr<Clock>(SystemClock::instance());
  auto conn = std::make_shared<MemoryConnection>(std::move(clock));
  return RateLimiter(std::move(conn), std::move(options));
}

REDLIMIT_INLINE RateLimiter::RateLimiter(std::shared_ptr<Connection> connection, Options options) {
  rate_limiter_impl::check_options(options);
  if (!connection) throw InvalidArgument("connection must not be null");
  ctx_ = std::make_shared<detail::Context>();
  ctx_->connection = std::move(connection);
  ctx_->clock = options.clock ? options.clock : SystemClock::instance();
  if (options.breaker_threshold > 0) {
    ctx_->breakers = std::make_unique<detail::Breakers>(options.breaker_threshold, options.breaker_cooldown);
  }
  if (options.local_reject_cache) {
    ctx_->reject_cache = std::make_unique<detail::RejectCache>(options.local_reject_cache_size);
  }
  if (options.on_failure == OnFailure::fallback) ctx_->fallback = rate_limiter_impl::make_fallback(ctx_->clock);
  if (!options.redis_functions) ctx_->connection->set_script_path(ScriptPath::evalsha);
  ctx_->options = std::move(options);
}

REDLIMIT_INLINE void RateLimiter::attach_async(std::shared_ptr<AsyncConnection> async) {
  // An async connection to one server, over a cluster, would send every call to that node, which
  // answers MOVED for most keys: a cluster needs one that routes by slot (AsyncCluster).
  if (async && !ctx_->connection->scripts_span_slots() && !async->routes_by_slot()) {
    throw InvalidArgument(
        "attach_async: this limiter is over a Redis Cluster (redis-cluster://), and this async connection "
        "talks to one server; attach an AsyncCluster (redlimit/transport/async_cluster.hpp)");
  }
  if (async && !ctx_->options.redis_functions) async->set_script_path(ScriptPath::evalsha);
  // A server the limiter's connection found older than 7.0 (no Functions; scripts without their
  // shebang line) is the async connection's too: it starts there, rather than learn it again from a
  // refused FCALL and a refused shebang of its own.
  if (async && ctx_->connection->script_path_state().server_before_7()) {
    async->script_path_state().set_server_before_7();
    async->set_script_path(ScriptPath::evalsha);
  }
  if (async) async->share_routing(ctx_->connection);  // one slot map for both paths and the breakers
  std::lock_guard<std::mutex> lock(ctx_->mutex);
  ctx_->async = std::move(async);
}

REDLIMIT_INLINE Counters RateLimiter::counters() const { return ctx_->counters.snapshot(); }

REDLIMIT_INLINE Health RateLimiter::health() const {
  Health h;
  if (ctx_->breakers) {
    // A master replaced by a failover keeps its breaker, which no call consults any more: it is
    // left out, so that it does not hold the limiter's health at open or half-open for good.
    for (const auto& [shard, state] : ctx_->breakers->states(ctx_->clock->monotonic())) {
      if (!ctx_->connection->shard_serves(shard)) continue;
      h.breakers.emplace_back(shard, state);
      h.breaker = std::max(h.breaker, state);  // the worst: open > half-open > closed
    }
  }
  const int last = ctx_->last_source.load(std::memory_order_relaxed);
  if (last >= 0) {
    h.decided = true;
    h.last_source = static_cast<Source>(last);
  }
  h.scripts = ctx_->connection->script_path();
  std::lock_guard<std::mutex> lock(ctx_->mutex);
  if (ctx_->async) h.async_scripts = ctx_->async->script_path();
  return h;
}

REDLIMIT_INLINE FixedWindow RateLimiter::fixed_window(std::string resource, Limit limit) const {
  return FixedWindow(ctx_, std::move(resource), limit);
}

REDLIMIT_INLINE SlidingLog RateLimiter::sliding_log(std::string resource, Limit limit) const {
  return SlidingLog(ctx_, std::move(resource), limit);
}

REDLIMIT_INLINE SlidingWindow RateLimiter::sliding_window(std::string resource, Limit limit,
                                                          std::chrono::microseconds precision) const {
  if (precision.count() != 0) limit = limit.precision(precision);
  return SlidingWindow(ctx_, std::move(resource), limit);
}

REDLIMIT_INLINE TokenBucket RateLimiter::token_bucket(std::string resource, std::int64_t capacity,
                                                      std::int64_t refill_per_period,
                                                      std::chrono::microseconds period) const {
  return TokenBucket(ctx_, std::move(resource), capacity, refill_per_period, period);
}

REDLIMIT_INLINE LeakyBucket RateLimiter::leaky_bucket(std::string resource, std::int64_t capacity, Limit leak_rate,
                                                      LeakyMode mode) const {
  return LeakyBucket(ctx_, std::move(resource), capacity, leak_rate, mode);
}

REDLIMIT_INLINE Policy RateLimiter::policy(std::string resource, std::vector<Limit> limits) const {
  return Policy(ctx_, std::move(resource), std::move(limits));
}

REDLIMIT_INLINE const Options& RateLimiter::options() const { return ctx_->options; }

REDLIMIT_INLINE Clock& RateLimiter::clock() const { return *ctx_->clock; }

}  // namespace redlimit
