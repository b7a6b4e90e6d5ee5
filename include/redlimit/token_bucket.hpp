#pragma once
// Token bucket: holds up to `capacity` tokens, refilled continuously at refill_per_period per period;
// a request takes `cost` tokens. Allows bursts up to capacity, then the refill rate. State: one
// string per subject (tokens and the time they were counted). Script: src/lua/token_bucket.lua.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlimit/decision.hpp"
#include "redlimit/detail/scripted_strategy.hpp"
#include "redlimit/limit.hpp"

namespace redlimit {

class TokenBucket : private detail::ScriptedStrategy {
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

 private:
  friend class RateLimiter;
  TokenBucket(std::shared_ptr<detail::Context> ctx, std::string resource, std::int64_t capacity,
              std::int64_t refill_per_period, std::chrono::microseconds period);
  std::int64_t capacity_;
};

}  // namespace redlimit
