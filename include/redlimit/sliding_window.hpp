#pragma once
// Sliding window counter: the window is cut into buckets of limit.precision(); the count is the sum of
// the buckets inside the window plus the oldest, partly expired bucket weighted by the part of it
// still inside. precision == window is the classic two-window counter. One hash per subject.
// Script: lua/policy.lua (a sliding window is a policy of one limit).
#include "redlimit/detail/config.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlimit/limit.hpp"
#include "redlimit/strategy.hpp"

namespace redlimit {

class SlidingWindow : public Strategy {
 public:
  const Limit& limit() const { return limit_; }

  // At most this many buckets per window (window / precision); each decision reads them all.
  static constexpr std::int64_t max_buckets() { return 10'000; }

 private:
  friend class RateLimiter;
  SlidingWindow(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit);
  Limit limit_;
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/strategies-inl.hpp"
#endif
