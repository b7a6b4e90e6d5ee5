#pragma once
// A redlimit::Clock whose wall time (now()) and monotonic reading the test moves apart, as a host's
// part when NTP steps its wall clock: pass() is time passing (both move), step_wall() the step (only
// the wall moves), step_wall_in_next_sleep() the step taken while a blocking call sleeps. For the
// tests of what the limiter times on Clock::monotonic() (clock.hpp).
#include <atomic>
#include <chrono>

#include "redlimit/clock.hpp"

namespace redlimit_test {

class SteppedClock final : public redlimit::Clock {
 public:
  explicit SteppedClock(redlimit::Micros wall = redlimit::Micros{1'700'000'000'000'000}) : wall_(wall.count()) {}
  redlimit::Micros now() const override { return redlimit::Micros{wall_.load()}; }
  redlimit::Micros monotonic() const override { return redlimit::Micros{steady_.load()}; }
  void sleep_for(redlimit::Micros d) override {
    pass(d);
    step_wall(redlimit::Micros{pending_step_.exchange(0)});
  }
  void pass(redlimit::Micros d) {
    wall_ += d.count();
    steady_ += d.count();
  }
  void step_wall(redlimit::Micros d) { wall_ += d.count(); }
  void step_wall_in_next_sleep(redlimit::Micros d) { pending_step_ = d.count(); }

 private:
  std::atomic<long long> wall_;
  std::atomic<long long> steady_{42'000'000};  // a steady clock's epoch is not the wall's
  std::atomic<long long> pending_step_{0};
};

}  // namespace redlimit_test
