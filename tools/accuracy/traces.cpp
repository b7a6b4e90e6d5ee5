#include "traces.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace accuracy {

namespace {

constexpr double kPi = 3.14159265358979323846;

// splitmix64: a tiny generator whose output is the same on every platform and standard library
// (std::exponential_distribution is not specified bit for bit, and the study must reproduce).
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Exponential gap with mean 1/rate (rate per microsecond).
  double gap(double rate) { return -std::log1p(-uniform()) / rate; }

 private:
  std::uint64_t state_;
};

std::string multiple_text(double m) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gx", m);
  return buf;
}

}  // namespace

Trace poisson(const Shape& shape, double multiple, std::int64_t duration, std::uint64_t seed) {
  Trace t;
  t.name = "poisson_" + multiple_text(multiple);
  t.description = "Poisson at " + multiple_text(multiple) + " the limit";
  const double rate = multiple * static_cast<double>(shape.limit) / static_cast<double>(shape.window);
  Random rng(seed);
  for (double at = rng.gap(rate); at < static_cast<double>(duration); at += rng.gap(rate)) {
    t.times.push_back(static_cast<std::int64_t>(at));
  }
  t.plot_from = 0;
  t.plot_to = std::min<std::int64_t>(duration, 30 * shape.window);
  t.multiple = multiple;
  return t;
}

Trace edge_bursts(const Shape& shape, std::int64_t duration) {
  Trace t;
  t.name = "edges";
  t.description = "bursts of the limit on both sides of every other window edge";
  const std::int64_t spread = 1'000'000;  // each half-burst over one second
  for (std::int64_t edge = shape.window; edge + spread <= duration; edge += 2 * shape.window) {
    for (std::int64_t i = 0; i < shape.limit; ++i) t.times.push_back(edge - spread + i * spread / shape.limit);
    for (std::int64_t i = 0; i < shape.limit; ++i) t.times.push_back(edge + i * spread / shape.limit);
  }
  t.plot_from = 0;
  t.plot_to = std::min<std::int64_t>(duration, 10 * shape.window);
  return t;
}

Trace diurnal(const Shape& shape, std::int64_t duration, std::uint64_t seed) {
  Trace t;
  t.name = "diurnal";
  t.description = "a day, rate 0.1x (night) to 1.5x (peak) the limit";
  const double base = static_cast<double>(shape.limit) / static_cast<double>(shape.window);
  const double peak = 1.5 * base;
  // Thinning (Lewis and Shedler): candidates at the peak rate, each kept with probability
  // rate(t) / peak, give a Poisson process of rate(t).
  Random rng(seed);
  for (double at = rng.gap(peak); at < static_cast<double>(duration); at += rng.gap(peak)) {
    const double phase = 2 * kPi * at / static_cast<double>(duration);
    const double rate = base * (0.8 - 0.7 * std::cos(phase));  // 0.1x at 0:00, 1.5x at 12:00
    if (rng.uniform() * peak < rate) t.times.push_back(static_cast<std::int64_t>(at));
  }
  t.plot_from = 0;
  t.plot_to = duration;
  return t;
}

Trace seed004(const Shape& shape, const std::string& name, bool late_start, std::int64_t burst_at) {
  Trace t;
  t.name = name;
  const std::int64_t quarter = shape.window / 4;
  for (std::int64_t i = 0; i < shape.limit; ++i) {
    t.times.push_back(late_start ? shape.window * 99 / 100 : i * quarter / shape.limit);
  }
  for (std::int64_t i = 0; i < shape.limit; ++i) t.times.push_back(burst_at);
  t.description = late_start ? "seed 004: 100 at 0.99 min, 100 more at " : "seed 004: 100 in 0-0.25 min, 100 more at ";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g min", static_cast<double>(burst_at) / static_cast<double>(shape.window));
  t.description += buf;
  t.plot_from = 0;
  t.plot_to = 3 * shape.window;
  return t;
}

std::vector<Trace> population(const Shape& shape, int subjects, std::int64_t duration, std::uint64_t seed) {
  Random rng(seed);
  std::vector<Trace> out;
  for (int i = 0; i < subjects; ++i) {
    // Box-Muller: one standard normal draw from two uniforms.
    const double z = std::sqrt(-2 * std::log1p(-rng.uniform())) * std::cos(2 * kPi * rng.uniform());
    const double multiple = std::min(20.0, 0.05 * std::exp(1.5 * z));
    Trace t = poisson(shape, multiple, duration, rng.next());
    t.name = "mix";
    t.description = "a population of sources, most far below the limit";
    t.plot_to = 0;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace accuracy
