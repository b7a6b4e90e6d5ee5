#pragma once
// Bodies of redlimit/detail/decision_path.hpp (see redlimit/detail/config.hpp).
#include <algorithm>
#include <unordered_map>
#include <utility>

#include "redlimit/detail/decision_path.hpp"
#include "redlimit/detail/decode.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

REDLIMIT_INLINE DecisionPath::DecisionPath(const std::shared_ptr<Context>& ctx,
                                           const std::shared_ptr<const StrategySpec>& spec, Operation op,
                                           const Script& script, bool keep_alive)
    : ctx_(ctx.get()), spec_(spec.get()), op_(op), script_(&script) {
  if (keep_alive) {
    ctx_owner_ = ctx;
    spec_owner_ = spec;
  }
}

REDLIMIT_INLINE void DecisionPath::reserve(std::size_t n) {
  requests_.reserve(n);
  costs_.reserve(n);
}

REDLIMIT_INLINE void DecisionPath::add(ScriptCall call, std::int64_t cost) {
  requests_.push_back(std::move(call));
  costs_.push_back(cost);
}

REDLIMIT_INLINE const std::vector<ScriptCall>& DecisionPath::begin() {
  Context& ctx = *ctx_;
  started_ = std::chrono::steady_clock::now();
  now_ = ctx.clock->now();
  out_.assign(requests_.size(), Decision{});
  // Requests the local reject cache can answer never leave the process.
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (op_ == Operation::consume && ctx.reject_cache) {
      if (const auto wait = ctx.reject_cache->lookup(requests_[i].keys[0], costs_[i], now_)) {
        Decision& d = out_[i];
        d.limit = spec_->least_limit;
        d.retry_after = d.reset_after = *wait;
        d.source = Source::local_cache;
        ++ctx.counters.local_cache_hits;
        continue;
      }
    }
    pending_.push_back(i);
  }
  if (pending_.empty()) return script_calls_;
  if (ctx.breaker && !ctx.breaker->allow(now_)) {
    ++ctx.counters.breaker_short_circuits;
    const ConnectionError open("circuit breaker open: Redis failed repeatedly");
    try {
      for (std::size_t p : pending_) out_[p] = on_failure(open, requests_[p]);
    } catch (const std::exception& e) {
      report_error(e);
      throw;
    }
    return script_calls_;  // empty: the failure policy answered
  }
  group();
  return script_calls_;
}

// One script call decides many requests (lua/epilogue.lua): the whole batch on a single server, one
// call per hash slot on a cluster, at most kMaxPerCall requests each. A call of one request is that
// request's own call.
REDLIMIT_INLINE void DecisionPath::group() {
  std::vector<std::vector<std::size_t>> groups;  // positions in pending_
  if (pending_.size() == 1) {  // the common case: the request's own call, moved rather than copied
    members_.push_back({0});
    script_calls_.push_back(std::move(requests_[pending_[0]]));
    alone_ = true;
    return;
  }
  if (ctx_->connection->scripts_span_slots()) {
    groups.emplace_back(pending_.size());
    for (std::size_t j = 0; j < pending_.size(); ++j) groups.back()[j] = j;
  } else {
    std::unordered_map<std::uint16_t, std::size_t> by_slot;  // slot -> index in groups
    for (std::size_t j = 0; j < pending_.size(); ++j) {
      const auto [it, added] = by_slot.emplace(key_slot(requests_[pending_[j]].keys[0]), groups.size());
      if (added) groups.emplace_back();
      groups[it->second].push_back(j);
    }
  }
  for (const auto& g : groups) {
    for (std::size_t from = 0; from < g.size(); from += kMaxPerCall) {
      const std::size_t to = std::min(g.size(), from + kMaxPerCall);
      members_.emplace_back(g.begin() + static_cast<std::ptrdiff_t>(from), g.begin() + static_cast<std::ptrdiff_t>(to));
      const ScriptCall& first = requests_[pending_[g[from]]];
      if (to - from == 1) {
        script_calls_.push_back(first);
        continue;
      }
      // KEYS: state and block marker of each request; ARGV: the first request's (its now, cost,
      // mode, the strategy's parameters), then the costs of the others (lua/prologue.lua).
      ScriptCall merged;
      merged.keys.reserve(2 * (to - from));
      merged.args = first.args;
      merged.args.reserve(first.args.size() + (to - from - 1));
      for (std::size_t j = from; j < to; ++j) {
        const ScriptCall& c = requests_[pending_[g[j]]];
        merged.keys.insert(merged.keys.end(), c.keys.begin(), c.keys.end());
        if (j > from) merged.args.push_back(c.args[1]);
      }
      script_calls_.push_back(std::move(merged));
    }
  }
}

REDLIMIT_INLINE std::vector<Decision> DecisionPath::finish(std::vector<Reply> replies) {
  Context& ctx = *ctx_;
  std::exception_ptr usage_error;  // the first reply that was about the request, not the server
  ctx.counters.answered += replies.size();
  try {
    // Each reply is judged on its own: one call's outage reply does not undo another's decisions.
    bool answered = false;
    for (std::size_t k = 0; k < replies.size() && k < members_.size(); ++k) {
      const auto& ids = members_[k];
      try {
        check_script_reply(*script_, replies[k], spec_->name);
        const auto ds = decode_decisions(replies[k], ids.size(), spec_->limits, spec_->windows);
        for (std::size_t j = 0; j < ids.size(); ++j) out_[pending_[ids[j]]] = ds[j];
        answered = true;
      } catch (const UnavailableError& e) {
        for (std::size_t j : ids) failed(e, j);
      } catch (const ReplyError&) {
        answered = true;  // the server is up: it judged the request
        if (!usage_error) usage_error = std::current_exception();
      }
    }
    if (answered && ctx.breaker) ctx.breaker->success();
    if (usage_error) {
      ++ctx.counters.errors;
      std::rethrow_exception(usage_error);
    }
  } catch (const std::exception& e) {
    if (ctx.breaker) ctx.breaker->release();  // harmless unless this call was the probe
    report_error(e);
    throw;
  }
  return settle();
}

REDLIMIT_INLINE std::vector<Decision> DecisionPath::fail(const std::exception& error) {
  Context& ctx = *ctx_;
  ++ctx.counters.errors;
  if (ctx.breaker) ctx.breaker->failure(ctx.clock->now());
  try {
    for (std::size_t p : pending_) out_[p] = on_failure(error, call_of(p));
  } catch (const std::exception& e) {
    report_error(e);
    throw;
  }
  return settle();
}

// An outage reply for one request: counted, told to the breaker, answered by the failure policy.
REDLIMIT_INLINE void DecisionPath::failed(const std::exception& error, std::size_t pending_index) {
  Context& ctx = *ctx_;
  ++ctx.counters.errors;
  if (ctx.breaker) ctx.breaker->failure(ctx.clock->now());
  const std::size_t request = pending_[pending_index];
  out_[request] = on_failure(error, call_of(request));
}

REDLIMIT_INLINE Decision DecisionPath::on_failure(const std::exception& error, ScriptCall& call) const {
  const Context& ctx = *ctx_;
  // fail_open and fail_closed know nothing of the subject's quota: every quota field stays 0
  // (unknown), so that nothing built from the decision (http.hpp) claims a quota it cannot back.
  Decision d;
  switch (ctx.options.on_failure) {
    case OnFailure::raise:
      if (const auto* t = dynamic_cast<const TimeoutError*>(&error)) throw *t;
      if (const auto* u = dynamic_cast<const UnavailableError*>(&error)) throw *u;
      if (const auto* c = dynamic_cast<const ConnectionError*>(&error)) throw *c;
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
  d = decode_decision(run_script(*ctx.fallback, *script_, call.keys, call.args), spec_->limits, spec_->windows);
  d.source = Source::fallback;
  return d;
}

// What the reject cache learns from the decisions Redis made, then shadow mode, counters, metrics.
REDLIMIT_INLINE std::vector<Decision> DecisionPath::settle() {
  for (std::size_t p : pending_) learn(p, out_[p]);
  const auto latency = std::chrono::steady_clock::now() - started_;
  for (Decision& d : out_) account(d, latency);
  return std::move(out_);
}

REDLIMIT_INLINE void DecisionPath::learn(std::size_t request, const Decision& d) const {
  RejectCache* cache = ctx_->reject_cache.get();
  if (cache == nullptr || d.source != Source::primary) return;
  const std::string& key = call_of(request).keys[0];
  if (op_ == Operation::consume && !d.allowed && d.retry_after.count() > 0) {
    cache->remember(key, costs_[request], now_ + d.retry_after, now_);
  } else if (op_ == Operation::refund) {
    cache->forget(key);
  }
}

REDLIMIT_INLINE void DecisionPath::account(Decision& d, std::chrono::nanoseconds latency) const {
  Context& ctx = *ctx_;
  auto& c = ctx.counters;
  if (op_ == Operation::consume) {
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
  report(&d, {}, latency);
}

REDLIMIT_INLINE void DecisionPath::abandon(const std::exception& error) {
  ++ctx_->counters.errors;
  if (ctx_->breaker) ctx_->breaker->release();
  report_error(error);
}

REDLIMIT_INLINE void DecisionPath::report_error(const std::exception& error) const {
  report(nullptr, error.what(), std::chrono::steady_clock::now() - started_);
}

REDLIMIT_INLINE void DecisionPath::report(const Decision* d, std::string_view error,
                                          std::chrono::nanoseconds latency) const {
  if (!ctx_->options.metrics) return;
  MetricsEvent e;
  e.resource = spec_->resource;
  e.operation = op_;
  e.decision = d;
  e.error = error;
  e.latency = latency;
  ctx_->options.metrics->on_event(e);
}

}  // namespace redlimit::detail
