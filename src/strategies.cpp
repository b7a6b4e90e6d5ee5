// Construction of the five Redis strategies: parameter checks (before any I/O) and the script
// parameters each one passes after ARGV[1..3].
#include <fmt/format.h>

#include <numeric>

#include "redlimit/detail/scripts.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/fixed_window.hpp"
#include "redlimit/leaky_bucket.hpp"
#include "redlimit/policy.hpp"
#include "redlimit/sliding_log.hpp"
#include "redlimit/sliding_window.hpp"
#include "redlimit/token_bucket.hpp"

namespace redlimit {

namespace {

using std::chrono::microseconds;

// Scripts do their math in Lua doubles; keeping every product below 2^52 keeps it exact, with a
// factor of two to spare for sums.
constexpr std::int64_t kExactBound = std::int64_t{1} << 52;

std::vector<std::string> to_args(std::initializer_list<std::int64_t> values) {
  std::vector<std::string> out;
  for (auto v : values) out.push_back(std::to_string(v));
  return out;
}

// A rate of `per` units each `period`: one unit is period/g "ticks" and per/g ticks pass each
// microsecond, g = gcd(per, period), so that `per` units take exactly `period`.
struct Rate {
  std::int64_t unit;
  std::int64_t per_us;
};

Rate exact_rate(std::int64_t per, microseconds period, std::int64_t capacity, const char* what) {
  if (per < 1 || per > Limit::max_count()) {
    throw InvalidArgument(fmt::format("{} must be in [1, {}], got {}", what, Limit::max_count(), per));
  }
  if (period.count() <= 0 || period > Limit::max_window()) {
    throw InvalidArgument(fmt::format("period must be in (0, {}us], got {}us", Limit::max_window().count(),
                                      period.count()));
  }
  if (capacity < 1 || capacity > Limit::max_count()) {
    throw InvalidArgument(fmt::format("capacity must be in [1, {}], got {}", Limit::max_count(), capacity));
  }
  const std::int64_t g = std::gcd(per, period.count());
  const Rate r{period.count() / g, per / g};
  if (capacity > (kExactBound - 1) / r.unit) {  // capacity * unit must stay below 2^52
    throw InvalidArgument(fmt::format(
        "capacity {} with a rate of {} per {}us needs more precision than the scripts keep exact; "
        "use a smaller capacity or a rate whose period is a multiple of its count",
        capacity, per, period.count()));
  }
  return r;
}

Limit checked_sliding_window(Limit limit) {
  const std::int64_t p = limit.precision().count();
  const std::int64_t buckets = limit.window().count() / p;
  if (buckets > SlidingWindow::max_buckets()) {
    throw InvalidArgument(fmt::format("sliding window {} has {} buckets; at most {}", limit.to_string(), buckets,
                                      SlidingWindow::max_buckets()));
  }
  if (limit.count() > (kExactBound - 1) / p) {  // limit * precision must stay below 2^52
    throw InvalidArgument(fmt::format("sliding window {}: limit x precision must stay below 2^52 us; "
                                      "use a finer precision or a smaller limit",
                                      limit.to_string()));
  }
  return limit;
}

constexpr std::int64_t kMaxLogLimit = 1'000'000;

Limit checked_sliding_log(Limit limit) {
  if (limit.count() > kMaxLogLimit) {
    throw InvalidArgument(fmt::format("sliding log {} keeps one entry per unit; at most {} per window "
                                      "(use a sliding window for larger limits)",
                                      limit.to_string(), kMaxLogLimit));
  }
  return limit;
}

// ARGV[4..] of policy.lua: the number of limits, then tag, count, window, precision for each.
std::vector<std::string> policy_args(const std::vector<Limit>& limits) {
  std::vector<std::string> args{std::to_string(limits.size())};
  for (const auto& l : limits) {
    const std::string text = l.to_string();
    args.push_back(text.substr(text.find('/') + 1));  // "1h@1m": names the limit's buckets in the hash
    args.push_back(std::to_string(l.count()));
    args.push_back(std::to_string(l.window().count()));
    args.push_back(std::to_string(l.precision().count()));
  }
  return args;
}

std::vector<Limit> checked_policy(std::vector<Limit> limits) {
  if (limits.empty()) throw InvalidArgument("a policy needs at least one limit");
  if (limits.size() > Policy::max_limits()) {
    throw InvalidArgument(fmt::format("a policy takes at most {} limits, got {}", Policy::max_limits(), limits.size()));
  }
  for (std::size_t i = 0; i < limits.size(); ++i) {
    checked_sliding_window(limits[i]);
    for (std::size_t j = 0; j < i; ++j) {
      if (limits[i].window() == limits[j].window() && limits[i].precision() == limits[j].precision()) {
        throw InvalidArgument(fmt::format("policy limits {} and {} share a window and precision; keep the smaller",
                                          limits[j].to_string(), limits[i].to_string()));
      }
    }
  }
  return limits;
}

std::vector<std::int64_t> counts(const std::vector<Limit>& limits) {
  std::vector<std::int64_t> out;
  for (const auto& l : limits) out.push_back(l.count());
  return out;
}

}  // namespace

FixedWindow::FixedWindow(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit)
    : Strategy(std::move(ctx), std::move(resource), "fw", detail::scripts::fixed_window(), {limit.count()},
               to_args({limit.count(), limit.window().count()})),
      limit_(limit) {}

SlidingLog::SlidingLog(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit)
    : Strategy(std::move(ctx), std::move(resource), "sl", detail::scripts::sliding_log(),
               {checked_sliding_log(limit).count()}, to_args({limit.count(), limit.window().count()})),
      limit_(limit) {}

SlidingWindow::SlidingWindow(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit)
    : Strategy(std::move(ctx), std::move(resource), "sw", detail::scripts::policy(),
               {checked_sliding_window(limit).count()}, policy_args({limit})),
      limit_(limit) {}

Policy::Policy(std::shared_ptr<detail::Context> ctx, std::string resource, std::vector<Limit> limits)
    : Strategy(std::move(ctx), std::move(resource), "pol", detail::scripts::policy(), counts(checked_policy(limits)),
               policy_args(limits)),
      limits_(std::move(limits)) {}

TokenBucket::TokenBucket(std::shared_ptr<detail::Context> ctx, std::string resource, std::int64_t capacity,
                         std::int64_t refill_per_period, microseconds period)
    : Strategy(std::move(ctx), std::move(resource), "tb", detail::scripts::token_bucket(), {capacity}, [&] {
        const Rate r = exact_rate(refill_per_period, period, capacity, "refill_per_period");
        return to_args({capacity, r.unit, r.per_us});
      }()),
      capacity_(capacity) {}

LeakyBucket::LeakyBucket(std::shared_ptr<detail::Context> ctx, std::string resource, std::int64_t capacity,
                         Limit leak_rate, LeakyMode mode)
    : Strategy(std::move(ctx), std::move(resource), "lb", detail::scripts::leaky_bucket(), {capacity}, [&] {
        const Rate r = exact_rate(leak_rate.count(), leak_rate.window(), capacity, "leak rate");
        auto args = to_args({capacity, r.unit, r.per_us});
        args.emplace_back(mode == LeakyMode::shaper ? "shaper" : "meter");
        return args;
      }()),
      capacity_(capacity),
      mode_(mode) {}

}  // namespace redlimit
