#pragma once
// Fixed window: one counter per subject for the current clock-aligned window [k*w, (k+1)*w).
// Cheapest of all; admits up to 2x the limit across a window edge. Script: src/lua/fixed_window.lua.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlimit/decision.hpp"
#include "redlimit/detail/scripted_strategy.hpp"
#include "redlimit/limit.hpp"

namespace redlimit {

class FixedWindow : private detail::ScriptedStrategy {
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

 private:
  friend class RateLimiter;
  FixedWindow(std::shared_ptr<detail::Context> ctx, std::string resource, Limit limit);
  Limit limit_;
};

}  // namespace redlimit
