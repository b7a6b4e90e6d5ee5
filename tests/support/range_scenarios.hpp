#pragma once
// Random quotas across the whole accepted range (issue 12): counts log-uniform in
// [1, Limit::max_count()], windows log-uniform in [1 ms, Limit::max_window()], precisions that divide
// them, bucket rates that fill within the longest window; costs up to the count, clock steps from
// nothing to many windows. Used by tests/unit/range_property_test.cpp (memory backend, against
// oracles) and tests/integration/range_differential_test.cpp (Redis against memory).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/redlimit.hpp"

namespace redlimit_range {

using Micros = std::chrono::microseconds;
using redlimit::Decision;
using redlimit::Limit;

enum class Kind { fixed_window, sliding_log, sliding_window, policy, token_bucket, leaky_meter, leaky_shaper };

inline const char* name(Kind k) {
  switch (k) {
    case Kind::fixed_window: return "fixed_window";
    case Kind::sliding_log: return "sliding_log";
    case Kind::sliding_window: return "sliding_window";
    case Kind::policy: return "policy";
    case Kind::token_bucket: return "token_bucket";
    case Kind::leaky_meter: return "leaky_meter";
    case Kind::leaky_shaper: return "leaky_shaper";
  }
  return "?";
}

// One strategy's parameters. Window strategies use `limits` (one, or two for a policy); buckets use
// capacity with `per` units each `period`.
struct Quota {
  Kind kind = Kind::fixed_window;
  std::vector<Limit> limits;
  std::int64_t capacity = 0, per = 0;
  Micros period{0};

  std::int64_t largest_cost() const {
    if (limits.empty()) return capacity;
    std::int64_t c = limits[0].count();
    for (const auto& l : limits) c = std::min(c, l.count());
    return c;
  }
  std::string describe() const {
    std::ostringstream os;
    os << name(kind);
    for (const auto& l : limits) os << ' ' << l.to_string();
    if (limits.empty()) os << " capacity " << capacity << " at " << per << " per " << period.count() << "us";
    return os.str();
  }
};

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  // log-uniform integer in [lo, hi]
  std::int64_t log_uniform(std::int64_t lo, std::int64_t hi) {
    std::uniform_real_distribution<double> d(std::log(static_cast<double>(lo)), std::log(static_cast<double>(hi)));
    const auto v = static_cast<std::int64_t>(std::llround(std::exp(d(rng_))));
    return std::clamp(v, lo, hi);
  }
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  Micros window() { return Micros{log_uniform(1, Limit::max_window().count() / 1000) * 1000}; }

  // A precision dividing `w` into at most SlidingWindow::max_buckets() buckets of whole milliseconds.
  Micros precision(Micros w) {
    const std::int64_t ms = w.count() / 1000;
    std::int64_t k = uniform(1, std::min<std::int64_t>(ms, redlimit::SlidingWindow::max_buckets()));
    while (ms % k != 0) --k;
    return w / k;
  }

  Limit limit() {
    const Micros w = window();
    return Limit(log_uniform(1, Limit::max_count()), w).precision(chance(0.3) ? w : precision(w));
  }

  Quota quota(Kind kind) {
    Quota q;
    q.kind = kind;
    switch (kind) {
      case Kind::fixed_window:
      case Kind::sliding_log: q.limits = {Limit(log_uniform(1, Limit::max_count()), window())}; break;
      case Kind::sliding_window: q.limits = {limit()}; break;
      case Kind::policy: {
        Limit a = limit(), b = limit();
        // Two limits of their own, of at most Policy::max_buckets() together.
        const auto buckets = [](const Limit& l) { return l.window() / l.precision(); };
        while ((a.window() == b.window() && a.precision() == b.precision()) ||
               buckets(a) + buckets(b) > redlimit::Policy::max_buckets()) {
          if (buckets(a) == redlimit::Policy::max_buckets()) a = limit();  // no room for b's
          b = limit();
        }
        q.limits = {a, b};
        break;
      }
      default: bucket(q);
    }
    return q;
  }

  std::int64_t cost(std::int64_t largest) {
    if (chance(0.5)) return uniform(1, std::min<std::int64_t>(largest, 10));
    return log_uniform(1, largest);
  }

  // The next clock step for a strategy whose longest window is `w`: none, a few us, part of a
  // window, or several windows; never past `left`.
  Micros step(Micros w, Micros left) {
    std::int64_t s = 0;
    switch (uniform(0, 4)) {
      case 0: s = 0; break;
      case 1: s = uniform(1, 1000); break;
      case 2: s = uniform(0, w.count() - 1); break;
      case 3: s = uniform(0, w.count() / 10 + 1); break;
      default: s = uniform(1, 5) * w.count() + uniform(0, w.count() - 1); break;
    }
    return Micros{std::min(s, left.count())};
  }

 private:
  // capacity, per and period with capacity * period / per <= Limit::max_window().
  void bucket(Quota& q) {
    q.per = log_uniform(1, Limit::max_count());
    q.period = Micros{log_uniform(1, Limit::max_window().count())};
    __extension__ using u128 = unsigned __int128;
    const u128 most = static_cast<u128>(Limit::max_window().count()) * static_cast<u128>(q.per) /
                      static_cast<u128>(q.period.count());
    const std::int64_t cap = most > static_cast<u128>(Limit::max_count()) ? Limit::max_count()
                                                                           : static_cast<std::int64_t>(most);
    q.capacity = log_uniform(1, std::max<std::int64_t>(1, cap));
  }

  std::mt19937_64 rng_;
};

// The strategy of `q` on limiter `l`, as consume / peek / refund / consume_many calls.
struct Calls {
  std::function<Decision(std::string_view, std::int64_t)> consume, peek, refund;
  std::function<std::vector<Decision>(const std::vector<redlimit::Request>&)> consume_many;
};

template <class S>
Calls calls_of(S s) {
  return {[s](std::string_view x, std::int64_t c) { return s.consume(x, c); },
          [s](std::string_view x, std::int64_t c) { return s.peek(x, c); },
          [s](std::string_view x, std::int64_t c) { return s.refund(x, c); },
          [s](const std::vector<redlimit::Request>& r) { return s.consume_many(r); }};
}

inline Calls make(const redlimit::RateLimiter& l, const std::string& resource, const Quota& q) {
  switch (q.kind) {
    case Kind::fixed_window: return calls_of(l.fixed_window(resource, q.limits[0]));
    case Kind::sliding_log: return calls_of(l.sliding_log(resource, q.limits[0]));
    case Kind::sliding_window: return calls_of(l.sliding_window(resource, q.limits[0], q.limits[0].precision()));
    case Kind::policy: return calls_of(l.policy(resource, q.limits));
    case Kind::token_bucket: return calls_of(l.token_bucket(resource, q.capacity, q.per, q.period));
    case Kind::leaky_meter:
      return calls_of(l.leaky_bucket(resource, q.capacity, Limit(q.per, q.period), redlimit::LeakyMode::meter));
    case Kind::leaky_shaper:
      return calls_of(l.leaky_bucket(resource, q.capacity, Limit(q.per, q.period), redlimit::LeakyMode::shaper));
  }
  return {};
}

// The longest time that matters to `q`: its longest window, or the time to fill or drain it.
inline Micros horizon(const Quota& q) {
  Micros w{1};
  for (const auto& l : q.limits) w = std::max(w, l.window());
  if (q.limits.empty()) {
    __extension__ using u128 = unsigned __int128;
    const u128 fill = static_cast<u128>(q.capacity) * static_cast<u128>(q.period.count()) / static_cast<u128>(q.per);
    w = Micros{std::max<std::int64_t>(1, static_cast<std::int64_t>(fill))};
  }
  return w;
}

inline constexpr Kind kAllKinds[] = {Kind::fixed_window, Kind::sliding_log,  Kind::sliding_window, Kind::policy,
                                     Kind::token_bucket, Kind::leaky_meter, Kind::leaky_shaper};

}  // namespace redlimit_range
