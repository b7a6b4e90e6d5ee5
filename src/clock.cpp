#include "redlimit/clock.hpp"

#include <thread>

namespace redlimit {

Micros SystemClock::now() const {
  return std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch());
}

void SystemClock::sleep_for(Micros d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

std::shared_ptr<SystemClock> SystemClock::instance() {
  static const auto clock = std::make_shared<SystemClock>();
  return clock;
}

}  // namespace redlimit
