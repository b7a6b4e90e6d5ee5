#pragma once
// Bodies of redlimit/clock.hpp (see redlimit/detail/config.hpp: compiled once in src/redlimit.cpp, or inline
// with REDLIMIT_HEADER_ONLY).
#include <thread>

#include "redlimit/clock.hpp"
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/message.hpp"

namespace redlimit {

REDLIMIT_INLINE Micros SystemClock::now() const {
  return std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch());
}

REDLIMIT_INLINE Micros SystemClock::monotonic() const {
  return std::chrono::duration_cast<Micros>(std::chrono::steady_clock::now().time_since_epoch());
}

REDLIMIT_INLINE void SystemClock::sleep_for(Micros d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

REDLIMIT_INLINE std::shared_ptr<SystemClock> SystemClock::instance() {
  static const auto clock = std::make_shared<SystemClock>();
  return clock;
}

}  // namespace redlimit
