#pragma once
// Bodies of redlimit/policy.hpp (see redlimit/detail/config.hpp: compiled once in src/redlimit.cpp, or inline
// with REDLIMIT_HEADER_ONLY).
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/policy.hpp"
// Construction of the five Redis strategies: parameter checks (before any I/O) and the script
// parameters each one passes after ARGV[1..3].

#include <numeric>

#include "redlimit/detail/scripts.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/fixed_window.hpp"
#include "redlimit/leaky_bucket.hpp"
#include "redlimit/sliding_log.hpp"
#include "redlimit/sliding_window.hpp"
#include "redlimit/token_bucket.hpp"

namespace redlimit {

namespace strategies_impl {

using std::chrono::microseconds;

REDLIMIT_INLINE std::vector<std::string> to_args(std::initializer_list<std::int64_t> values) {
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

REDLIMIT_INLINE Rate exact_rate(std::int64_t per, microseconds period, std::int64_t capacity, const char* what) {
  if (per < 1 || per > Limit::max_count()) {
    throw InvalidArgument(detail::message("{} must be in [1, {}], got {}", what, Limit::max_count(), per));
  }
  if (period.count() <= 0 || period > Limit::max_window()) {
    throw InvalidArgument(
        detail::message("period must be in (0, {}us], got {}us", Limit::max_window().count(), period.count()));
  }
  if (capacity < 1 || capacity > Limit::max_count()) {
    throw InvalidArgument(detail::message("capacity must be in [1, {}], got {}", Limit::max_count(), capacity));
  }
  const std::int64_t g = std::gcd(per, period.count());
  const Rate r{period.count() / g, per / g};
  // The scripts keep a level as whole units plus ticks of the next, so no product of capacity and
  // rate needs to stay small; what they need is that filling (or draining) the whole bucket takes at
  // most the longest window, capacity * period / per <= max_window, compared in 128 bits.
  __extension__ using u128 = unsigned __int128;
  if (static_cast<u128>(capacity) * static_cast<u128>(period.count()) >
      static_cast<u128>(Limit::max_window().count()) * static_cast<u128>(per)) {
    throw InvalidArgument(detail::message(
        "capacity {} at {} per {}us takes longer than {}us (ten years) to refill or drain; "
        "use a faster rate or a smaller capacity",
        capacity, per, period.count(), Limit::max_window().count()));
  }
  return r;
}

REDLIMIT_INLINE Limit checked_sliding_window(Limit limit) {
  const std::int64_t p = limit.precision().count();
  const std::int64_t buckets = limit.window().count() / p;
  if (buckets > SlidingWindow::max_buckets()) {
    throw InvalidArgument(detail::message("sliding window {} has {} buckets; at most {}", limit.to_string(), buckets,
                                          SlidingWindow::max_buckets()));
  }
  return limit;
}

// ARGV[4..] of policy.lua: the number of limits, then tag, count, window, precision for each.
REDLIMIT_INLINE std::vector<std::string> policy_args(const std::vector<Limit>& limits) {
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

REDLIMIT_INLINE std::vector<Limit> checked_policy(std::vector<Limit> limits) {
  if (limits.empty()) throw InvalidArgument("a policy needs at least one limit");
  if (limits.size() > Policy::max_limits()) {
    throw InvalidArgument(
        detail::message("a policy takes at most {} limits, got {}", Policy::max_limits(), limits.size()));
  }
  std::int64_t buckets = 0;  // each at most SlidingWindow::max_buckets(): no overflow
  for (std::size_t i = 0; i < limits.size(); ++i) {
    checked_sliding_window(limits[i]);
    buckets += limits[i].window().count() / limits[i].precision().count();
    for (std::size_t j = 0; j < i; ++j) {
      if (limits[i].window() == limits[j].window() && limits[i].precision() == limits[j].precision()) {
        throw InvalidArgument(detail::message("policy limits {} and {} share a window and precision; keep the smaller",
                                              limits[j].to_string(), limits[i].to_string()));
      }
    }
  }
  if (buckets > Policy::max_buckets()) {
    throw InvalidArgument(
        detail::message("a policy's limits have {} buckets in all; at most {}: give a long window a coarser precision",
                        buckets, Policy::max_buckets()));
  }
  return limits;
}

// Each limit's figure field(limit), in order: its window, or its bucket interval (precision).
template <class Field>
std::vector<std::chrono::microseconds> each_of(const std::vector<Limit>& limits, Field field) {
  std::vector<std::chrono::microseconds> out;
  out.reserve(limits.size());
  for (const auto& l : limits) out.push_back(field(l));
  return out;
}

inline std::vector<std::chrono::microseconds> windows(const std::vector<Limit>& limits) {
  return each_of(limits, [](const Limit& l) { return l.window(); });
}

inline std::vector<std::chrono::microseconds> intervals(const std::vector<Limit>& limits) {
  return each_of(limits, [](const Limit& l) { return l.precision(); });
}

REDLIMIT_INLINE std::vector<std::int64_t> counts(const std::vector<Limit>& limits) {
  std::vector<std::int64_t> out;
  for (const auto& l : limits) out.push_back(l.count());
  return out;
}

}  // namespace strategies_impl

REDLIMIT_INLINE FixedWindow::FixedWindow(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit)
    : Strategy(std::move(ctx), std::move(resource), "fw", detail::scripts::fixed_window(), {limit.count()},
               strategies_impl::to_args({limit.count(), limit.window().count()})),
      limit_(limit) {}

// The params name the entries' form only when compact, so that a text log's calls are those of the
// builds before it. ctx is copied, not moved: the order in which Strategy's arguments are built is
// unspecified, and the params read the options through it.
REDLIMIT_INLINE SlidingLog::SlidingLog(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit)
    : Strategy(ctx, std::move(resource), "sl", detail::scripts::sliding_log(), {limit.count()},
               [&] {
                 auto args = strategies_impl::to_args({limit.count(), limit.window().count()});
                 if (ctx->options.sliding_log_members == SlidingLogMembers::compact) args.emplace_back("compact");
                 return args;
               }()),
      limit_(limit) {}

REDLIMIT_INLINE SlidingWindow::SlidingWindow(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit)
    : Strategy(std::move(ctx), std::move(resource), "sw", detail::scripts::policy(),
               {strategies_impl::checked_sliding_window(limit).count()}, strategies_impl::policy_args({limit}),
               {limit.window()}, {limit.precision()}),
      limit_(limit) {}

REDLIMIT_INLINE Policy::Policy(std::shared_ptr<detail::Context> ctx, std::string resource, std::vector<Limit> limits)
    : Strategy(std::move(ctx), std::move(resource), "pol", detail::scripts::policy(),
               strategies_impl::counts(strategies_impl::checked_policy(limits)), strategies_impl::policy_args(limits),
               strategies_impl::windows(limits), strategies_impl::intervals(limits)),
      limits_(std::move(limits)) {}

REDLIMIT_INLINE TokenBucket::TokenBucket(std::shared_ptr<detail::Context> ctx, std::string resource,
                                         std::int64_t capacity, std::int64_t refill_per_period,
                                         strategies_impl::microseconds period)
    : Strategy(std::move(ctx), std::move(resource), "tb", detail::scripts::token_bucket(), {capacity},
               [&] {
                 const strategies_impl::Rate r =
                     strategies_impl::exact_rate(refill_per_period, period, capacity, "refill_per_period");
                 return strategies_impl::to_args({capacity, r.unit, r.per_us});
               }()),
      capacity_(capacity) {}

REDLIMIT_INLINE LeakyBucket::LeakyBucket(std::shared_ptr<detail::Context> ctx, std::string resource,
                                         std::int64_t capacity, Limit leak_rate, LeakyMode mode)
    : Strategy(std::move(ctx), std::move(resource), "lb", detail::scripts::leaky_bucket(), {capacity},
               [&] {
                 const strategies_impl::Rate r =
                     strategies_impl::exact_rate(leak_rate.count(), leak_rate.window(), capacity, "leak rate");
                 auto args = strategies_impl::to_args({capacity, r.unit, r.per_us});
                 args.emplace_back(mode == LeakyMode::shaper ? "shaper" : "meter");
                 return args;
               }()),
      capacity_(capacity),
      mode_(mode) {}

}  // namespace redlimit
