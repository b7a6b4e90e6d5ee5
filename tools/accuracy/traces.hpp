#pragma once
// The request traces of the accuracy study (docs/accuracy.md): arrival times of one subject's
// requests, each of cost 1, generated from fixed seeds so that every run sees the same requests.
#include <cstdint>
#include <string>
#include <vector>

namespace accuracy {

// Times are microseconds from the start of the trace; the study adds an epoch offset that is a
// whole day, so trace time 0 is the start of a fixed window, of a minute and of every bucket.
struct Trace {
  std::string name;         // short, used in file names: poisson_1x, edges, diurnal...
  std::string description;  // one line for the table
  std::vector<std::int64_t> times;  // non-decreasing
  std::int64_t plot_from = 0;       // the stretch of time the plots show
  std::int64_t plot_to = 0;
  double multiple = 0;  // the rate as a multiple of the limit's, for Poisson traces
};

// The limit every trace is built around: `limit` requests per `window` microseconds.
struct Shape {
  std::int64_t limit = 100;
  std::int64_t window = 60'000'000;
};

// Poisson arrivals at `multiple` times the limit's rate for `duration` microseconds.
Trace poisson(const Shape& shape, double multiple, std::int64_t duration, std::uint64_t seed);

// The classic attack on fixed windows: every other window, `limit` requests spread over the last
// second before a window edge and `limit` more over the first second after it.
Trace edge_bursts(const Shape& shape, std::int64_t duration);

// A day of Poisson arrivals whose rate follows a sine: 0.1x the limit at night, 1.5x at the peak.
Trace diurnal(const Shape& shape, std::int64_t duration, std::uint64_t seed);

// Seed 004's worked examples (100/min): 100 requests in the first quarter minute (or all at 0.99
// min), then a burst of 100 at `burst_at`; the study counts what the burst gets.
Trace seed004(const Shape& shape, const std::string& name, bool late_start, std::int64_t burst_at);

// A population like a CDN's (for Cloudflare's measure): `subjects` sources, each a Poisson trace
// whose rate is drawn from a log-normal law, median 0.05x the limit, 2 % of sources above 1x (capped
// at 20x). All are named "mix"; the study adds up their figures.
std::vector<Trace> population(const Shape& shape, int subjects, std::int64_t duration, std::uint64_t seed);

}  // namespace accuracy
