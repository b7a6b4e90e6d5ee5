#pragma once
// Leaky bucket: a bucket of `capacity` that leaks at a constant rate.
//  - meter:  a request is rejected when its cost does not fit in the bucket (this is GCRA, the
//            algorithm of redis-cell and redis_rate); admitted requests proceed at once.
//  - shaper: the bucket is a queue; a request that fits is admitted with Decision::delay, the time
//            the caller must wait so that work leaves at the leak rate (traffic shaping).
// State: one string per subject (level and the time it was measured). Script: src/lua/leaky_bucket.lua.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlimit/decision.hpp"
#include "redlimit/detail/scripted_strategy.hpp"
#include "redlimit/limit.hpp"

namespace redlimit {

enum class LeakyMode {
  meter,   // reject what does not fit; admitted work proceeds now
  shaper,  // queue what fits; Decision::delay says when to proceed
};

class LeakyBucket : private detail::ScriptedStrategy {
 public:
  // Admits `cost` units for `subject` if they fit, recording them; rejected requests record nothing.
  // Throws InvalidArgument (before any I/O) for cost < 1 or cost > limit, or a bad subject.
  Decision consume(std::string_view subject, std::int64_t cost = 1) const { return run(subject, cost, true); }
  // What consume(subject, cost) would answer now, without recording anything.
  Decision peek(std::string_view subject, std::int64_t cost = 1) const { return run(subject, cost, false); }
  // Forgets everything recorded for `subject` (one DEL).
  void reset(std::string_view subject) const { remove(subject); }

  using ScriptedStrategy::key_for;
  using ScriptedStrategy::resource;
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
