#pragma once
// Token bucket: holds up to `capacity` tokens, refilled continuously at refill_per_period per period;
// a request takes `cost` tokens. Allows bursts up to capacity, then the refill rate. State: one
// string per subject (tokens and the time they were counted). Script: lua/token_bucket.lua.
#include "redlimit/detail/config.hpp"
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlimit/limit.hpp"
#include "redlimit/strategy.hpp"

namespace redlimit {

class TokenBucket : public Strategy {
 public:
  std::int64_t capacity() const { return capacity_; }

 private:
  friend class RateLimiter;
  TokenBucket(std::shared_ptr<detail::Context> ctx, std::string resource, std::int64_t capacity,
              std::int64_t refill_per_period, std::chrono::microseconds period);
  std::int64_t capacity_;
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/strategies-inl.hpp"
#endif
