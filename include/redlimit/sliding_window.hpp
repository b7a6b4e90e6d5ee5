#pragma once
// Sliding window counter: the window is cut into buckets of limit.precision(); the count is the sum of
// the buckets inside the window plus the oldest, partly expired bucket weighted by the part of it
// still inside. precision == window is the classic two-window counter. One hash per subject.
// Script: src/lua/sliding_window.lua.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlimit/decision.hpp"
#include "redlimit/detail/scripted_strategy.hpp"
#include "redlimit/limit.hpp"

namespace redlimit {

class SlidingWindow : private detail::ScriptedStrategy {
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
  const Limit& limit() const { return limit_; }

  // At most this many buckets per window (window / precision); each decision reads them all.
  static constexpr std::int64_t max_buckets() { return 10'000; }

 private:
  friend class RateLimiter;
  SlidingWindow(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit);
  Limit limit_;
};

}  // namespace redlimit
