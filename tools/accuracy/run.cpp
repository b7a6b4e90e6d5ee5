#include "run.hpp"

#include <algorithm>
#include <chrono>

#include "metrics.hpp"

namespace accuracy {

namespace {

using std::chrono::microseconds;

std::optional<CounterRule> none() { return std::nullopt; }

// The reference's decisions, run on its own admissions.
std::vector<bool> reference_run(const Shape& shape, const Trace& trace, Reference kind) {
  std::vector<bool> out;
  out.reserve(trace.times.size());
  ExactLog log(shape.limit, shape.window);
  Gcra gcra(shape.limit, shape.window, shape.limit);
  for (const std::int64_t t : trace.times) {
    const std::int64_t at = kEpoch + t;
    const bool ok = kind == Reference::exact_log ? log.decide(at) : gcra.decide(at);
    if (ok) kind == Reference::exact_log ? log.record(at) : gcra.record(at);
    out.push_back(ok);
  }
  return out;
}

// The library's decisions: one subject, one consume per request, the clock set to each request's time.
std::vector<bool> library_run(const Trace& trace, const Contender& contender) {
  auto clock = std::make_shared<redlimit::ManualClock>(microseconds{kEpoch});
  redlimit::Options options;
  options.clock = clock;
  const auto limiter = redlimit::RateLimiter::in_memory(options);
  const redlimit::Strategy strategy = contender.make(limiter);
  std::vector<bool> out;
  out.reserve(trace.times.size());
  for (const std::int64_t t : trace.times) {
    clock->set(microseconds{kEpoch + t});
    out.push_back(strategy.consume("subject").allowed);
  }
  return out;
}

// The model on its own admissions, compared with the library: how many decisions differ.
std::int64_t model_vs_library(const Trace& trace, CounterRule rule, const std::vector<bool>& library) {
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < trace.times.size(); ++i) {
    const std::int64_t at = kEpoch + trace.times[i];
    const bool ok = rule.decide(at);
    if (ok) rule.record(at);
    differ += ok != library[i];
  }
  return differ;
}

// Cloudflare's measure: the exact log decides and keeps the history; the counter's rule is asked
// about every request against that same history, and counted wrong where it answers otherwise.
void same_history(const Shape& shape, const Trace& trace, CounterRule rule, Outcome& out) {
  ExactLog log(shape.limit, shape.window);
  out.wrongly_allowed = out.wrongly_rejected = 0;
  for (const std::int64_t t : trace.times) {
    const std::int64_t at = kEpoch + t;
    const bool exact = log.decide(at);
    const bool approx = rule.decide(at);
    out.wrongly_allowed += approx && !exact;
    out.wrongly_rejected += !approx && exact;
    if (exact) {
      log.record(at);
      rule.record(at);
    }
  }
}

// Cloudflare's counting: both record every request, so a source far over the limit is refused by
// both until its own rate falls, instead of being admitted whenever an admission leaves the window.
std::int64_t counting_all(const Shape& shape, const Trace& trace, CounterRule rule) {
  ExactLog log(shape.limit, shape.window);
  std::int64_t wrong = 0;
  for (const std::int64_t t : trace.times) {
    const std::int64_t at = kEpoch + t;
    wrong += log.decide(at) != rule.decide(at);
    log.record(at);
    rule.record(at);
  }
  return wrong;
}

}  // namespace

std::vector<Contender> contenders(const Shape& shape, bool with_30s) {
  using redlimit::Limit;
  const Limit limit(shape.limit, microseconds{shape.window});
  const std::int64_t l = shape.limit, w = shape.window;
  auto counter = [l, w](std::int64_t p, bool fixed) {
    return [=]() -> std::optional<CounterRule> { return CounterRule(l, w, p, fixed); };
  };
  auto sliding = [&](std::string name, std::int64_t p) {
    return Contender{std::move(name), Reference::exact_log,
                     [limit, p](const redlimit::RateLimiter& rl) -> redlimit::Strategy {
                       return rl.sliding_window("sw", limit, microseconds{p});
                     },
                     counter(p, false)};
  };
  std::vector<Contender> out;
  out.push_back({"fixed_window", Reference::exact_log,
                 [limit](const redlimit::RateLimiter& rl) -> redlimit::Strategy { return rl.fixed_window("fw", limit); },
                 counter(w, true)});
  out.push_back(sliding("sliding_window@W", w));
  out.push_back(sliding("sliding_window@W/10", w / 10));
  out.push_back({"sliding_log", Reference::exact_log,
                 [limit](const redlimit::RateLimiter& rl) -> redlimit::Strategy { return rl.sliding_log("sl", limit); },
                 none});
  out.push_back({"token_bucket", Reference::gcra,
                 [l, w](const redlimit::RateLimiter& rl) -> redlimit::Strategy {
                   return rl.token_bucket("tb", l, l, microseconds{w});
                 },
                 none});
  out.push_back({"leaky_bucket (meter)", Reference::gcra,
                 [limit, l](const redlimit::RateLimiter& rl) -> redlimit::Strategy {
                   return rl.leaky_bucket("lb", l, limit, redlimit::LeakyMode::meter);
                 },
                 none});
  // Last, so that every trace's plot columns are the same six first (tools/accuracy/plot.gp).
  if (with_30s) out.push_back(sliding("sliding_window@W/2", w / 2));
  return out;
}

void merge(Outcome& total, const Outcome& more) {
  total.requests += more.requests;
  total.admitted += more.admitted;
  total.reference_admitted += more.reference_admitted;
  total.differ += more.differ;
  total.max_window = std::max(total.max_window, more.max_window);
  total.reference_max_window = std::max(total.reference_max_window, more.reference_max_window);
  total.worst_deficit = std::max(total.worst_deficit, more.worst_deficit);
  if (more.model_differ >= 0) {
    if (total.model_differ < 0) {
      total.model_differ = total.wrongly_allowed = total.wrongly_rejected = total.wrongly_counting_all = 0;
    }
    total.wrongly_counting_all += more.wrongly_counting_all;
    total.model_differ += more.model_differ;
    total.wrongly_allowed += more.wrongly_allowed;
    total.wrongly_rejected += more.wrongly_rejected;
  }
}

Outcome run(const Shape& shape, const Trace& trace, const Contender& contender, std::int64_t plot_step) {
  Outcome out;
  out.trace = trace.name;
  out.strategy = contender.name;
  out.reference = contender.reference == Reference::exact_log ? "exact log" : "GCRA";
  out.requests = static_cast<std::int64_t>(trace.times.size());
  const std::vector<bool> mine = library_run(trace, contender);
  const std::vector<bool> ref = reference_run(shape, trace, contender.reference);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    out.differ += mine[i] != ref[i];
    if (trace.times[i] == trace.times.back()) out.admitted_at_end += mine[i];
  }
  const auto a = admitted_times(trace.times, mine), b = admitted_times(trace.times, ref);
  out.admitted = static_cast<std::int64_t>(a.size());
  out.reference_admitted = static_cast<std::int64_t>(b.size());
  out.max_window = max_in_any_window(a, shape.window);
  out.reference_max_window = max_in_any_window(b, shape.window);
  out.worst_deficit = worst_deficit(trace.times, a, b, shape.window);
  if (auto rule = contender.model()) {
    out.model_differ = model_vs_library(trace, *rule, mine);
    same_history(shape, trace, *rule, out);
    out.wrongly_counting_all = counting_all(shape, trace, *rule);
  }
  if (plot_step > 0) {
    out.series = window_series(trace.times, a, shape.window, trace.plot_from, trace.plot_to, plot_step);
    out.reference_series = window_series(trace.times, b, shape.window, trace.plot_from, trace.plot_to, plot_step);
  }
  return out;
}

}  // namespace accuracy
