#pragma once
// Leaky bucket: a bucket of `capacity` that leaks at a constant rate.
//  - meter:  a request is rejected when its cost does not fit in the bucket (this is GCRA, the
//            algorithm of redis-cell and redis_rate); admitted requests proceed at once.
//  - shaper: the bucket is a queue; a request that fits is admitted with Decision::delay, the time
//            the caller must wait so that work leaves at the leak rate (traffic shaping).
// State: one string per subject (level and the time it was measured). Script: lua/leaky_bucket.lua.
#include "redlimit/detail/config.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlimit/limit.hpp"
#include "redlimit/strategy.hpp"

namespace redlimit {

enum class LeakyMode {
  meter,   // reject what does not fit; admitted work proceeds now
  shaper,  // queue what fits; Decision::delay says when to proceed
};

class LeakyBucket : public Strategy {
 public:
  std::int64_t capacity() const { return capacity_; }
  LeakyMode mode() const { return mode_; }

 private:
  friend class RateLimiter;
  LeakyBucket(std::shared_ptr<detail::Context> ctx, std::string resource, std::int64_t capacity,
              Limit leak_rate, LeakyMode mode);
  std::int64_t capacity_;
  LeakyMode mode_;
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/strategies-inl.hpp"
#endif
