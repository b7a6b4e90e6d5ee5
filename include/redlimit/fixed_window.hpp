#pragma once
// Fixed window: one counter per subject for the current clock-aligned window [k*w, (k+1)*w).
// Cheapest of all; admits up to 2x the limit across a window edge. Script: lua/fixed_window.lua.
#include "redlimit/detail/config.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlimit/limit.hpp"
#include "redlimit/strategy.hpp"

namespace redlimit {

class FixedWindow : public Strategy {
 public:
  const Limit& limit() const { return limit_; }

 private:
  friend class RateLimiter;
  FixedWindow(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit);
  Limit limit_;
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/strategies-inl.hpp"
#endif
