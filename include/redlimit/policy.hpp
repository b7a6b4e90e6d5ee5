#pragma once
// Policy: several limits (say 10/s, 120/min and 240/h with 1-minute precision) checked together
// and recorded all-or-nothing, in one round trip and one hash per subject, so it works on Redis
// Cluster. Each limit is a sliding window counter (see sliding_window.hpp); Decision::limit_index
// names the limit that decided. Script: lua/policy.lua.
#include "redlimit/detail/config.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/limit.hpp"
#include "redlimit/strategy.hpp"

namespace redlimit {

class Policy : public Strategy {
 public:
  const std::vector<Limit>& limits() const { return limits_; }

 private:
  friend class RateLimiter;
  // Throws InvalidArgument for no limits, more than max_limits(), two limits with the same window
  // and precision, a limit a sliding window would reject, or more than max_buckets() in all.
  Policy(std::shared_ptr<detail::Context> ctx, std::string resource, std::vector<Limit> limits);
  std::vector<Limit> limits_;

 public:
  static constexpr std::size_t max_limits() { return 16; }
  // At most this many buckets (window / precision) over all the limits together, as many as one
  // sliding window may have: a decision reads every live bucket of every limit, about 0.3 us of
  // Redis's time each (docs/performance.md, "Buckets"), so no policy's decision costs Redis more
  // than the largest window's, where 16 limits of 10,000 buckets each cost it 320 ms (docs/policies.md).
  static constexpr std::int64_t max_buckets() { return 10'000; }
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/strategies-inl.hpp"
#endif
