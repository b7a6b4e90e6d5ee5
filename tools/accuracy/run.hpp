#pragma once
// Runs one strategy of the library (RateLimiter::in_memory, a ManualClock) over one trace, and
// beside it the reference and, for the counters, the tool's own model of their rule.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <redlimit/redlimit.hpp>

#include "oracles.hpp"
#include "traces.hpp"

namespace accuracy {

// Trace time 0 in absolute microseconds: a whole day (2023-11-14 00:00 UTC), so that windows and
// buckets, which the library aligns to the epoch, start with the trace.
constexpr std::int64_t kEpoch = 1'699'920'000'000'000;

enum class Reference { exact_log, gcra };

struct Contender {
  std::string name;  // as in the tables: "sliding_window@6s"
  Reference reference = Reference::exact_log;
  std::function<redlimit::Strategy(const redlimit::RateLimiter&)> make;
  // The counters' rule as the tool models it (CounterRule), for Cloudflare's same-history measure.
  std::function<std::optional<CounterRule>()> model;
};

// The strategies compared, all at `shape`'s limit (burst = limit for the buckets); with
// `with_30s` also the 30-second sliding window of seed 004's second example.
std::vector<Contender> contenders(const Shape& shape, bool with_30s);

struct Outcome {
  std::string trace, strategy, reference;
  std::int64_t requests = 0;
  std::int64_t admitted = 0, reference_admitted = 0;
  std::int64_t differ = 0;  // requests decided differently by the two independent runs
  std::int64_t max_window = 0, reference_max_window = 0;  // most admitted in any window
  std::int64_t worst_deficit = 0;  // largest (reference - strategy) admitted in a window
  // The tool's model of the counter run on its own: requests it decides unlike the library (-1: no model).
  std::int64_t model_differ = -1;
  // Cloudflare's measure: the counter's rule judged on the exact log's history (-1: no model).
  std::int64_t wrongly_allowed = -1, wrongly_rejected = -1;
  // The same with Cloudflare's counting: every request counts, admitted or not, in the log and in the
  // counter alike (their counters count requests; ours count only admissions).
  std::int64_t wrongly_counting_all = -1;
  // Admitted in the trace's last instant (seed 004: what the burst gets).
  std::int64_t admitted_at_end = 0;
  // The plots' series (most admitted in a window, per cell), strategy and reference.
  std::vector<std::int64_t> series, reference_series;
};

// Adds `more` (another subject of the same trace and strategy) into `total`: counts add up, window
// maxima take the larger.
void merge(Outcome& total, const Outcome& more);

Outcome run(const Shape& shape, const Trace& trace, const Contender& contender, std::int64_t plot_step);

}  // namespace accuracy
