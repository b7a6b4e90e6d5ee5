#pragma once
// Bodies of redlimit/detail/decision_path.hpp (see redlimit/detail/config.hpp); how a path's
// requests become script calls is in decision_calls-inl.hpp.
#include <algorithm>
#include <string_view>
#include <utility>

#include "redlimit/detail/decision_path.hpp"
#include "redlimit/detail/decode.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/impl/decision_calls-inl.hpp"  // group(), add_calls(): the path's script calls

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

REDLIMIT_INLINE void DecisionPath::add(ScriptCall call, std::int64_t cost,
                                       std::chrono::steady_clock::time_point started) {
  add(std::move(call), cost);
  started_each_.push_back(started);
}

REDLIMIT_INLINE const std::vector<ScriptCall>& DecisionPath::begin(bool span_node) {
  Context& ctx = *ctx_;
  span_node_ = span_node;
  started_ = std::chrono::steady_clock::now();
  now_ = ctx.clock->monotonic();  // what the breakers and the reject cache time (clock.hpp)
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
  if (ctx.breakers) consult_breakers();
  if (pending_.empty()) return script_calls_;  // every shard's breaker is open: the policy answered
  group();
  return script_calls_;
}

// Each shard's breaker is asked once per call (a second allow() would refuse the probe it just let
// through). The requests of a shard whose breaker is open are answered by the failure policy, with
// no I/O; the others go on. On one server there is one shard: all or nothing, as it always was.
REDLIMIT_INLINE void DecisionPath::consult_breakers() {
  Context& ctx = *ctx_;
  std::vector<std::size_t> refused;
  std::vector<Breaker*> closed_to;  // breakers that refused this call
  std::size_t kept = 0;
  for (std::size_t p : pending_) {
    Breaker* b = &ctx.breakers->of(ctx.connection->node_of(requests_[p].keys[0]));
    bool through = std::find(through_.begin(), through_.end(), b) != through_.end();
    if (!through && std::find(closed_to.begin(), closed_to.end(), b) == closed_to.end()) {
      through = b->allow(now_);
      if (through) {
        through_.push_back(b);
      } else {
        closed_to.push_back(b);
      }
    }
    if (through) {
      // One breaker for the whole call (always so on one server) needs no table; a second shard
      // starts one, filled in for the requests kept so far.
      if (b != through_.front() && breaker_of_.empty()) breaker_of_.assign(kept, through_.front());
      pending_[kept++] = p;
      if (!breaker_of_.empty()) breaker_of_.push_back(b);
    } else {
      refused.push_back(p);
    }
  }
  pending_.resize(kept);
  if (refused.empty()) return;
  refused_key_ = requests_[refused.front()].keys[0];
  ++ctx.counters.breaker_short_circuits;
  const ConnectionError open("circuit breaker open: Redis failed repeatedly");
  try {
    for (std::size_t p : refused) out_[p] = on_failure(open, requests_[p]);
  } catch (const std::exception& e) {
    release_breakers();  // nothing is sent: a probe let through above must not stay out
    report_error(e);
    throw;
  }
}

namespace decision_path_impl {

// A reply that says a node did not run a spread call: a redirect or a cluster state that refuses
// the call before it runs, or the script's first read of a key the node does not serve (Redis
// fails a script's command on a key of a slot it does not own, or one mid-migration that it no
// longer holds: "Script attempted to access a non local key in a cluster node"; before 7.0, "ERR
// Error running script ...: Lua script attempted to access a non local key in a cluster node").
REDLIMIT_INLINE bool refused_spread(const Reply& r) {
  if (!r.is_error()) return false;
  const std::string_view text = r.str;
  const std::string_view code = text.substr(0, text.find(' '));
  return code == "MOVED" || code == "ASK" || code == "TRYAGAIN" || code == "CLUSTERDOWN" || code == "CROSSSLOT" ||
         text.find("Script attempted to access") != std::string_view::npos ||
         text.find("script attempted to access a non local key") != std::string_view::npos;
}

}  // namespace decision_path_impl

REDLIMIT_INLINE std::size_t DecisionPath::split_refused(const std::vector<Reply>& replies) {
  const std::size_t before = script_calls_.size();
  for (std::size_t k = 0; k < before && k < replies.size(); ++k) {
    if (!script_calls_[k].spread || !decision_path_impl::refused_spread(replies[k])) continue;
    ++ctx_->counters.resent_by_slot;
    const std::vector<std::size_t> ids(members_[k].begin(), members_[k].end());
    members_[k].clear();
    for (const auto& g : by_slot(ids)) add_calls(g, nullptr);
  }
  return before;
}

REDLIMIT_INLINE std::vector<Decision> DecisionPath::finish(std::vector<Reply> replies) {
  Context& ctx = *ctx_;
  std::exception_ptr usage_error;  // the first reply that was about the request, not the server
  std::vector<std::pair<std::size_t, std::exception_ptr>> outages;  // (index in pending_, its call's outage)
  std::vector<Breaker*> answered;  // breakers of the shards that answered, when there are several
  bool any_answered = false;
  ctx.counters.answered += replies.size();
  // Each reply is judged on its own: one call's outage (an outage reply, or its node failing in
  // transit on a cluster) does not undo the decisions other calls made.
  for (std::size_t k = 0; k < replies.size() && k < members_.size(); ++k) {
    const auto& ids = members_[k];
    if (ids.empty()) continue;  // a spread call split by slot: its requests are in later calls
    Breaker* b = breaker_of_.empty() ? nullptr : breaker_of_[ids.front()];
    auto heard = [&] {
      any_answered = true;
      if (b && std::find(answered.begin(), answered.end(), b) == answered.end()) answered.push_back(b);
    };
    try {
      check_script_reply(*script_, replies[k], spec_->name);
      if (ids.size() == 1) {  // one request's call (every single consume): no vector of one
        out_[pending_[ids.front()]] = decoded_one(replies[k], call_of(pending_[ids.front()]));
      } else {
        auto ds = decode_decisions(replies[k], ids.size(), spec_->limits, spec_->windows);
        for (std::size_t j = 0; j < ids.size(); ++j) out_[pending_[ids[j]]] = std::move(ds[j]);
      }
      heard();
    } catch (const UnavailableError&) {
      for (std::size_t j : ids) outages.emplace_back(j, std::current_exception());
    } catch (const ConnectionError&) {
      for (std::size_t j : ids) outages.emplace_back(j, std::current_exception());
    } catch (const ReplyError&) {
      heard();  // the server is up: it judged the request
      if (!usage_error) usage_error = std::current_exception();
    }
  }
  // Every breaker hears its verdict before anything is thrown: an outage counts once per request,
  // as it always did; a shard that answered anything is up.
  for (const auto& o : outages) {
    count_errors(1);
    if (Breaker* b = breaker_at(o.first)) b->failure(ctx.clock->monotonic());
  }
  if (breaker_of_.empty() && any_answered && !through_.empty()) through_.front()->success();
  for (Breaker* b : answered) b->success();
  try {
    if (usage_error) {
      count_errors(failed_calls());
      std::rethrow_exception(usage_error);
    }
    // Under OnFailure::raise the first outage is thrown, and the decisions other calls made are
    // not returned (they were recorded): docs/cluster.md, "One master down".
    for (const auto& o : outages) answer_outage(o.first, o.second);
  } catch (const std::exception& e) {
    release_breakers();  // harmless unless this call was a probe
    report_error(e);
    throw;
  }
  return settle();
}

REDLIMIT_INLINE std::vector<Decision> DecisionPath::fail(const std::exception& error) {
  Context& ctx = *ctx_;
  count_errors(failed_calls());
  for (Breaker* b : through_) b->failure(ctx.clock->monotonic());  // each shard the call went to, once
  try {
    for (std::size_t p : pending_) out_[p] = on_failure(error, call_of(p));
  } catch (const std::exception& e) {
    report_error(e);
    throw;
  }
  return settle();
}

// An outage of one request's call, counted and told to its breaker already: the failure policy answers.
REDLIMIT_INLINE void DecisionPath::answer_outage(std::size_t pending_index, const std::exception_ptr& outage) {
  const std::size_t request = pending_[pending_index];
  try {
    std::rethrow_exception(outage);
  } catch (const std::exception& e) {
    out_[request] = on_failure(e, call_of(request));
  }
}

REDLIMIT_INLINE void DecisionPath::release_breakers() {
  for (Breaker* b : through_) b->release();
}

// A policy's admission alone in its call may come as one integer, whose limits' resets follow from
// the time the call sent (policy_pairs_of); every other reply decodes as it is.
REDLIMIT_INLINE Decision DecisionPath::decoded_one(const Reply& reply, const ScriptCall& call) const {
  if (reply.type == Reply::Type::integer && spec_->limits.size() > 1 && !call.args.empty()) {
    const Reply pairs = policy_pairs_of(reply.integer, spec_->limits, spec_->windows, spec_->intervals, call.args[0]);
    return decode_decision(pairs, spec_->limits, spec_->windows);
  }
  return decode_decision(reply, spec_->limits, spec_->windows);
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
      d.retry_after = ctx.breakers ? ctx.breakers->cooldown() : std::chrono::seconds(1);
      d.source = Source::failure_policy;
      return d;
    case OnFailure::fallback:
      break;
  }
  // The fallback keeps its own state on the limiter's clock (Redis TIME is what just failed).
  if (ctx.options.time_source == TimeSource::redis) call.args[0] = std::to_string(ctx.clock->now().count());
  d = decoded_one(run_script(*ctx.fallback, *script_, call.keys, call.args), call);
  d.source = Source::fallback;
  return d;
}

// What the reject cache learns from the decisions Redis made, then shadow mode, counters, metrics.
REDLIMIT_INLINE std::vector<Decision> DecisionPath::settle() {
  for (std::size_t p : pending_) learn(p, out_[p]);
  const auto ended = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < out_.size(); ++i) account(out_[i], latency_of(i, ended));
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
  if (quiet_) return;
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
  ctx.last_source.store(static_cast<int>(d.source), std::memory_order_relaxed);
  report(&d, nullptr, latency);
}

REDLIMIT_INLINE void DecisionPath::abandon(const std::exception& error) {
  count_errors(failed_calls());
  release_breakers();
  report_error(error);
}

REDLIMIT_INLINE void DecisionPath::report_error(const std::exception& error) const {
  const auto ended = std::chrono::steady_clock::now();
  // One call; or, under count_each_request(), as many as its requests: each caller gets the error.
  const std::size_t calls = count_each_ ? requests_.size() : 1;
  for (std::size_t i = 0; i < calls; ++i) report(nullptr, &error, latency_of(i, ended));
}

REDLIMIT_INLINE void DecisionPath::report(const Decision* d, const std::exception* error,
                                          std::chrono::nanoseconds latency) const {
  if (!ctx_->options.metrics || quiet_) return;
  MetricsEvent e;
  e.resource = spec_->resource;
  e.strategy = spec_->kind;
  e.operation = op_;
  e.decision = d;
  e.exception = error;
  if (error != nullptr) e.error = error->what();
  e.latency = latency;
  ctx_->options.metrics->on_event(e);
}

}  // namespace redlimit::detail
