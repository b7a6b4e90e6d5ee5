#pragma once
// A redlimit::Clock that runs at the machine's pace from a fixed instant on the hour. For the fault
// tests that need time to pass (a breaker's cooldown, a deadline) and also count exactly in
// per-minute or per-hour windows: on the system clock such a test fails whenever it runs across a
// window's edge (one that started at 19:59:58 counted its last calls in a new hour, once). From
// this start a test shorter than a minute sees no window end.
#include <chrono>
#include <thread>

#include "redlimit/clock.hpp"

namespace redlimit_test {

class RunningClock final : public redlimit::Clock {
 public:
  // 2023-11-14 22:00:00 UTC: on the hour, and so on the minute.
  static constexpr redlimit::Micros kOnTheHour{1'699'999'200'000'000};

  explicit RunningClock(redlimit::Micros start = kOnTheHour)
      : start_(start), origin_(std::chrono::steady_clock::now()) {}

  redlimit::Micros now() const override {
    return start_ + std::chrono::duration_cast<redlimit::Micros>(std::chrono::steady_clock::now() - origin_);
  }
  void sleep_for(redlimit::Micros d) override { std::this_thread::sleep_for(d); }

 private:
  redlimit::Micros start_;
  std::chrono::steady_clock::time_point origin_;
};

}  // namespace redlimit_test
