#include "redlimit/strategy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "redlimit/detail/context.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/script.hpp"
#include "redlimit/detail/scripted_strategy.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

namespace detail {

std::string Context::now_arg() const {
  if (options.time_source == TimeSource::redis) return "redis";
  return std::to_string(clock->now().count());
}

Counters AtomicCounters::snapshot() const {
  Counters c;
  c.decisions = decisions.load();
  c.allowed = allowed.load();
  c.rejected = rejected.load();
  c.shadow_rejected = shadow_rejected.load();
  c.from_fallback = from_fallback.load();
  c.from_failure_policy = from_failure_policy.load();
  c.errors = errors.load();
  c.breaker_short_circuits = breaker_short_circuits.load();
  c.local_cache_hits = local_cache_hits.load();
  return c;
}

bool Breaker::allow(std::chrono::microseconds now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!open_) return true;
  if (now < open_until_ || probing_) return false;
  probing_ = true;  // half-open: this caller probes, the others keep short-circuiting
  return true;
}

void Breaker::success() {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_ = 0;
  open_ = false;
  probing_ = false;
}

void Breaker::failure(std::chrono::microseconds now) {
  std::lock_guard<std::mutex> lock(mutex_);
  probing_ = false;
  if (++failures_ >= threshold_) {
    open_ = true;
    open_until_ = now + cooldown_;
  }
}

Decision decode_decision(const Reply& reply, const std::vector<std::int64_t>& limits) {
  if (reply.is_error()) throw ReplyError(fmt::format("error reply: {}", reply.str));
  if (reply.type != Reply::Type::array || (reply.elements.size() != 5 && reply.elements.size() != 6)) {
    throw ReplyError("a strategy script must return an array of 5 or 6 integers");
  }
  for (const auto& e : reply.elements) {
    if (e.type != Reply::Type::integer || e.integer < 0) {
      throw ReplyError("a strategy script must return non-negative integers");
    }
  }
  const auto& v = reply.elements;
  if (v[0].integer > 1) throw ReplyError("the allowed flag must be 0 or 1");
  std::size_t index = 0;
  if (v.size() == 6) {
    if (v[5].integer < 1 || static_cast<std::uint64_t>(v[5].integer) > limits.size()) {
      throw ReplyError(fmt::format("deciding limit {} is not in 1..{}", v[5].integer, limits.size()));
    }
    index = static_cast<std::size_t>(v[5].integer - 1);
  }
  if (limits.empty()) throw ReplyError("no limits to decode against");
  Decision d;
  d.allowed = v[0].integer == 1;
  d.limit = limits[index];
  d.remaining = v[1].integer;
  d.retry_after = std::chrono::microseconds{v[2].integer};
  d.reset_after = std::chrono::microseconds{v[3].integer};
  d.delay = std::chrono::microseconds{v[4].integer};
  d.limit_index = index;
  return d;
}

std::vector<Decision> decode_decisions(const Reply& reply, std::size_t n, const std::vector<std::int64_t>& limits) {
  if (n == 1) return {decode_decision(reply, limits)};
  if (reply.is_error()) throw ReplyError(fmt::format("error reply: {}", reply.str));
  const std::size_t total = reply.elements.size();
  if (reply.type != Reply::Type::array || total % n != 0 || (total / n != 5 && total / n != 6)) {
    throw ReplyError(
        fmt::format("a strategy script deciding {} requests must return {} or {} integers", n, 5 * n, 6 * n));
  }
  const std::size_t width = total / n;
  std::vector<Decision> out;
  out.reserve(n);
  Reply one;
  one.type = Reply::Type::array;
  one.elements.resize(width);
  for (std::size_t i = 0; i < n; ++i) {
    std::copy_n(reply.elements.begin() + static_cast<std::ptrdiff_t>(i * width), width, one.elements.begin());
    out.push_back(decode_decision(one, limits));
  }
  return out;
}

}  // namespace detail

Strategy::Strategy(std::shared_ptr<detail::Context> ctx, std::string resource, std::string kind,
                   const detail::Script& script, std::vector<std::int64_t> limits, std::vector<std::string> params)
    : ctx_(std::move(ctx)),
      resource_(std::move(resource)),
      kind_(std::move(kind)),
      script_(&script),
      limits_(std::move(limits)),
      params_(std::move(params)) {
  detail::check_resource(resource_);
}

std::string Strategy::key_for(std::string_view subject) const {
  detail::check_subject(subject);
  return detail::make_key(ctx_->options.prefix, resource_, subject, kind_);
}

std::string Strategy::block_key_for(std::string_view subject) const {
  detail::check_subject(subject);
  return detail::make_key(ctx_->options.prefix, resource_, subject, "blk");
}

void Strategy::check_cost(std::int64_t cost) const {
  const std::int64_t most = *std::min_element(limits_.begin(), limits_.end());
  if (cost < 1 || cost > most) {
    throw InvalidArgument(fmt::format("cost must be in [1, {}] for resource \"{}\", got {}", most, resource_, cost));
  }
}

Strategy::Call Strategy::prepare(std::string_view subject, std::int64_t cost, const char* mode,
                                 const std::vector<std::string>& params, const std::string* now) const {
  Call call;
  call.keys = {key_for(subject), block_key_for(subject)};  // checks the subject
  call.args.reserve(3 + params.size());
  call.args.push_back(now ? *now : ctx_->now_arg());
  call.args.push_back(std::to_string(cost));
  call.args.emplace_back(mode);
  call.args.insert(call.args.end(), params.begin(), params.end());
  return call;
}

// The round trip itself: one EVALSHA, or a pipeline of them; whatever came back NOSCRIPT (it did
// not run) is sent again with EVAL. Throws ConnectionError when the round trip as a whole failed;
// error replies are returned, one per call, for the caller to judge request by request.
std::vector<Reply> Strategy::round_trip(const detail::Script& script, std::vector<Call>& calls) const {
  detail::Context& ctx = *ctx_;
  std::unique_lock<std::mutex> lock(ctx.mutex, std::defer_lock);
  if (!ctx.connection->thread_safe()) lock.lock();
  std::vector<std::vector<std::string>> commands;
  commands.reserve(calls.size());
  for (const auto& c : calls) commands.push_back(detail::evalsha_command(script, c.keys, c.args));
  std::vector<Reply> replies;
  if (commands.size() == 1) {
    replies.push_back(ctx.connection->command(commands[0]));
  } else {
    replies = ctx.connection->pipeline(commands);
  }
  std::vector<std::size_t> again;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (detail::is_noscript(replies[i])) again.push_back(i);
  }
  if (!again.empty()) {
    commands.clear();
    for (std::size_t i : again) commands.push_back(detail::eval_command(script, calls[i].keys, calls[i].args));
    std::vector<Reply> second;
    if (commands.size() == 1) {
      second.push_back(ctx.connection->command(commands[0]));
    } else {
      second = ctx.connection->pipeline(commands);
    }
    for (std::size_t j = 0; j < again.size(); ++j) replies[again[j]] = std::move(second[j]);
  }
  return replies;
}

std::vector<Decision> Strategy::execute(Operation op, const detail::Script& script, std::vector<Call>& calls,
                                        const std::vector<std::int64_t>& costs) const {
  detail::Context& ctx = *ctx_;
  auto& c = ctx.counters;
  const auto started = std::chrono::steady_clock::now();
  const auto now = ctx.clock->now();
  const bool consuming = op == Operation::consume;
  std::vector<Decision> out(calls.size());

  // Requests the local reject cache can answer never leave the process.
  std::vector<std::size_t> pending;
  std::vector<Call> to_send;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (consuming && ctx.reject_cache) {
      if (auto wait = ctx.reject_cache->lookup(calls[i].keys[0], costs[i], now)) {
        Decision& d = out[i];
        d.limit = *std::min_element(limits_.begin(), limits_.end());
        d.retry_after = d.reset_after = *wait;
        d.source = Source::local_cache;
        ++c.local_cache_hits;
        continue;
      }
    }
    pending.push_back(i);
    to_send.push_back(std::move(calls[i]));
  }

  if (!to_send.empty()) {
    // One script call decides many requests (lua/epilogue.lua): the whole batch on a single
    // server, one call per hash slot on a cluster, at most kMaxPerCall requests each.
    std::vector<Call> script_calls;
    std::vector<std::vector<std::size_t>> members;  // indices into to_send, per script call
    group(to_send, script_calls, members);
    std::vector<Decision> decided(to_send.size());
    const auto failed = [&](const std::exception& e, std::size_t i) {
      ++c.errors;
      if (ctx.breaker) ctx.breaker->failure(ctx.clock->now());
      decided[i] = on_failure(e, script, to_send[i]);
    };
    try {
      if (ctx.breaker && !ctx.breaker->allow(now)) {
        ++c.breaker_short_circuits;
        const ConnectionError open("circuit breaker open: Redis failed repeatedly");
        for (std::size_t i = 0; i < to_send.size(); ++i) decided[i] = on_failure(open, script, to_send[i]);
      } else {
        std::vector<Reply> replies;
        try {
          replies = round_trip(script, script_calls);
        } catch (const ConnectionError& e) {  // includes TimeoutError: outcome unknown, never replayed
          ++c.errors;
          if (ctx.breaker) ctx.breaker->failure(ctx.clock->now());
          for (std::size_t i = 0; i < to_send.size(); ++i) decided[i] = on_failure(e, script, to_send[i]);
        }
        // Each reply is judged on its own: one call's outage reply does not undo another's decisions.
        bool healthy = false;
        for (std::size_t k = 0; k < replies.size(); ++k) {
          const auto& ids = members[k];
          try {
            detail::check_script_reply(script, replies[k]);
            const auto ds = detail::decode_decisions(replies[k], ids.size(), limits_);
            for (std::size_t j = 0; j < ids.size(); ++j) decided[ids[j]] = ds[j];
            healthy = true;
          } catch (const UnavailableError& e) {
            for (std::size_t i : ids) failed(e, i);
          }
        }
        if (healthy && ctx.breaker) ctx.breaker->success();
      }
    } catch (const std::exception& e) {
      report(op, nullptr, e.what(), std::chrono::steady_clock::now() - started);
      throw;
    }
    for (std::size_t j = 0; j < pending.size(); ++j) {
      out[pending[j]] = decided[j];
      learn(op, to_send[j].keys[0], costs[pending[j]], decided[j], now);
    }
  }

  const auto latency = std::chrono::steady_clock::now() - started;
  for (Decision& d : out) account(op, d, latency);
  return out;
}

void Strategy::group(const std::vector<Call>& calls, std::vector<Call>& out,
                     std::vector<std::vector<std::size_t>>& members) const {
  std::vector<std::vector<std::size_t>> groups;
  if (calls.size() == 1 || ctx_->connection->scripts_span_slots()) {
    groups.emplace_back(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) groups.back()[i] = i;
  } else {
    std::unordered_map<std::uint16_t, std::size_t> by_slot;  // slot -> index in groups
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const auto [it, added] = by_slot.emplace(detail::key_slot(calls[i].keys[0]), groups.size());
      if (added) groups.emplace_back();
      groups[it->second].push_back(i);
    }
  }
  for (const auto& g : groups) {
    for (std::size_t from = 0; from < g.size(); from += kMaxPerCall) {
      const std::size_t to = std::min(g.size(), from + kMaxPerCall);
      members.emplace_back(g.begin() + static_cast<std::ptrdiff_t>(from), g.begin() + static_cast<std::ptrdiff_t>(to));
      const Call& first = calls[g[from]];
      if (to - from == 1) {
        out.push_back(first);
        continue;
      }
      // KEYS: state and block marker of each request; ARGV: the first request's (its now, cost,
      // mode, the strategy's parameters), then the costs of the others (prologue.lua).
      Call merged;
      merged.keys.reserve(2 * (to - from));
      merged.args = first.args;
      merged.args.reserve(first.args.size() + (to - from - 1));
      for (std::size_t j = from; j < to; ++j) {
        const Call& c = calls[g[j]];
        merged.keys.insert(merged.keys.end(), c.keys.begin(), c.keys.end());
        if (j > from) merged.args.push_back(c.args[1]);
      }
      out.push_back(std::move(merged));
    }
  }
}

Decision Strategy::on_failure(const std::exception& error, const detail::Script& script, Call& call) const {
  const detail::Context& ctx = *ctx_;
  Decision d;
  d.limit = *std::min_element(limits_.begin(), limits_.end());
  switch (ctx.options.on_failure) {
    case OnFailure::raise:
      if (const auto* t = dynamic_cast<const TimeoutError*>(&error)) throw *t;
      if (const auto* u = dynamic_cast<const UnavailableError*>(&error)) throw *u;
      if (const auto* e = dynamic_cast<const ConnectionError*>(&error)) throw *e;
      throw ConnectionError(error.what());
    case OnFailure::fail_open:
      d.allowed = true;
      d.source = Source::failure_policy;
      return d;
    case OnFailure::fail_closed:
      d.allowed = false;
      d.retry_after = ctx.breaker ? ctx.breaker->cooldown() : std::chrono::seconds(1);
      d.source = Source::failure_policy;
      return d;
    case OnFailure::fallback:
      break;
  }
  // The fallback keeps its own state on the limiter's clock (Redis TIME is what just failed).
  if (ctx.options.time_source == TimeSource::redis) call.args[0] = std::to_string(ctx.clock->now().count());
  d = detail::decode_decision(detail::run_script(*ctx.fallback, script, call.keys, call.args), limits_);
  d.source = Source::fallback;
  return d;
}

void Strategy::learn(Operation op, const std::string& key, std::int64_t cost, const Decision& d,
                     std::chrono::microseconds now) const {
  detail::Context& ctx = *ctx_;
  if (!ctx.reject_cache || d.source != Source::primary) return;
  if (op == Operation::consume && !d.allowed && d.retry_after.count() > 0) {
    ctx.reject_cache->remember(key, cost, now + d.retry_after, now);
  } else if (op == Operation::refund) {
    ctx.reject_cache->forget(key);
  }
}

void Strategy::account(Operation op, Decision& d, std::chrono::nanoseconds latency) const {
  detail::Context& ctx = *ctx_;
  auto& c = ctx.counters;
  if (op == Operation::consume) {
    ++c.decisions;
    if (!d.allowed && ctx.options.shadow) {
      d.allowed = true;
      d.shadow_rejected = true;
      ++c.shadow_rejected;
    }
    ++(d.allowed ? c.allowed : c.rejected);
  }
  if (d.source == Source::fallback) ++c.from_fallback;
  if (d.source == Source::failure_policy) ++c.from_failure_policy;
  report(op, &d, {}, latency);
}

void Strategy::report(Operation op, const Decision* d, std::string_view error, std::chrono::nanoseconds latency) const {
  if (!ctx_->options.metrics) return;
  MetricsEvent e;
  e.resource = resource_;
  e.operation = op;
  e.decision = d;
  e.error = error;
  e.latency = latency;
  ctx_->options.metrics->on_event(e);
}

namespace {

const char* mode_of(Operation op) {
  switch (op) {
    case Operation::consume:
      return "1";
    case Operation::peek:
      return "0";
    case Operation::refund:
      return "2";
    default:
      return "3";  // block
  }
}

}  // namespace

Decision Strategy::run(Operation op, const detail::Script& script, std::string_view subject, std::int64_t cost,
                       const std::vector<std::string>& params) const {
  std::vector<Call> calls;
  calls.push_back(prepare(subject, cost, mode_of(op), params));
  return execute(op, script, calls, {cost}).front();
}

std::vector<Decision> Strategy::consume_many(const std::vector<Request>& requests) const {
  std::vector<Call> calls;
  std::vector<std::int64_t> costs;
  calls.reserve(requests.size());
  costs.reserve(requests.size());
  const std::string now = ctx_->now_arg();  // one now for the batch: its requests arrive together
  for (const auto& r : requests) {  // every request is checked before anything is sent
    check_cost(r.cost);
    calls.push_back(prepare(r.subject, r.cost, "1", params_, &now));
    costs.push_back(r.cost);
  }
  if (calls.empty()) return {};
  return execute(Operation::consume, *script_, calls, costs);
}

Decision Strategy::consume(std::string_view subject, std::int64_t cost) const {
  check_cost(cost);
  return run(Operation::consume, *script_, subject, cost, params_);
}

Decision Strategy::peek(std::string_view subject, std::int64_t cost) const {
  check_cost(cost);
  return run(Operation::peek, *script_, subject, cost, params_);
}

Decision Strategy::refund(std::string_view subject, std::int64_t cost) const {
  check_cost(cost);
  return run(Operation::refund, *script_, subject, cost, params_);
}

Decision Strategy::block(std::string_view subject, std::chrono::microseconds duration) const {
  if (duration.count() <= 0 || duration > std::chrono::hours(24 * 365 * 10)) {
    throw InvalidArgument(fmt::format("block duration must be in (0, 10 years], got {}us", duration.count()));
  }
  Decision d = run(Operation::block, detail::scripts::block(), subject, 1, {std::to_string(duration.count())});
  d.limit = *std::min_element(limits_.begin(), limits_.end());
  return d;
}

Decision Strategy::acquire(std::string_view subject, std::int64_t cost, std::chrono::microseconds max_wait) const {
  check_cost(cost);
  if (max_wait.count() < 0) throw InvalidArgument("max_wait must not be negative");
  Clock& clock = *ctx_->clock;
  const auto deadline = clock.now() + max_wait;
  while (true) {
    Decision d = consume(subject, cost);
    const auto left = deadline - clock.now();
    if (d.allowed) {
      if (d.delay.count() == 0) return d;
      if (d.delay > left) {
        // A shaper queued us too far back: give the place up rather than overstay max_wait.
        refund(subject, cost);
        d.allowed = false;
        d.retry_after = d.delay;
        return d;
      }
      clock.sleep_for(d.delay);
      return d;
    }
    if (d.retry_after > left) return d;
    clock.sleep_for(d.retry_after);
  }
}

void Strategy::reset(std::string_view subject) const {
  const std::vector<std::string> argv{"DEL", key_for(subject), block_key_for(subject)};
  const auto started = std::chrono::steady_clock::now();
  try {
    std::unique_lock<std::mutex> lock(ctx_->mutex, std::defer_lock);
    if (!ctx_->connection->thread_safe()) lock.lock();
    const Reply r = ctx_->connection->command(argv);
    if (r.is_error()) throw ReplyError(fmt::format("DEL failed: {}", r.str));
  } catch (const std::exception& e) {
    ++ctx_->counters.errors;
    report(Operation::reset, nullptr, e.what(), std::chrono::steady_clock::now() - started);
    throw;
  }
  if (ctx_->reject_cache) ctx_->reject_cache->forget(argv[1]);
  if (ctx_->fallback) ctx_->fallback->command(argv);  // the fallback must not keep a stale state either
  report(Operation::reset, nullptr, {}, std::chrono::steady_clock::now() - started);
}

}  // namespace redlimit
