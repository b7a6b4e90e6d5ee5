#pragma once
// Sliding log: a sorted set of the admitted requests of the last window, each with its cost, scored
// by admission time. Exact at every instant; memory and work grow with the requests in the window,
// never with the cost or a flood (rejected requests add nothing). Script: lua/sliding_log.lua.
#include "redlimit/detail/config.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlimit/limit.hpp"
#include "redlimit/strategy.hpp"

namespace redlimit {

class SlidingLog : public Strategy {
 public:
  const Limit& limit() const { return limit_; }

 private:
  friend class RateLimiter;
  SlidingLog(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit);
  Limit limit_;
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/strategies-inl.hpp"
#endif
