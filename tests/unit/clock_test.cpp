// ManualClock (set / advance / sleep_for) and SystemClock.
#include "redlimit/clock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace {

using redlimit::Clock;
using redlimit::ManualClock;
using redlimit::Micros;
using redlimit::SystemClock;
using namespace std::chrono_literals;

Micros system_now() {
  return std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch());
}

TEST(ManualClockTest, DefaultStart) {
  const ManualClock c;
  EXPECT_EQ(c.now(), Micros{1'700'000'000'000'000});
}

TEST(ManualClockTest, ExplicitStart) {
  const ManualClock c(Micros{42});
  EXPECT_EQ(c.now(), Micros{42});
}

TEST(ManualClockTest, DoesNotMoveByItself) {
  const ManualClock c(Micros{1000});
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(c.now(), Micros{1000});
}

TEST(ManualClockTest, Set) {
  ManualClock c;
  c.set(Micros{1'800'000'000'000'001});
  EXPECT_EQ(c.now(), Micros{1'800'000'000'000'001});
  c.set(Micros{5});  // may go backwards: tests model clock skew
  EXPECT_EQ(c.now(), Micros{5});
}

TEST(ManualClockTest, Advance) {
  ManualClock c(Micros{1'000'000});
  c.advance(1500ms);
  EXPECT_EQ(c.now(), Micros{2'500'000});
  c.advance(Micros{1});
  EXPECT_EQ(c.now(), Micros{2'500'001});
  c.advance(1min);
  EXPECT_EQ(c.now(), Micros{62'500'001});
}

TEST(ManualClockTest, SleepForAdvancesInsteadOfBlocking) {
  ManualClock c(Micros{0});
  const auto wall_before = std::chrono::steady_clock::now();
  c.sleep_for(std::chrono::hours(24));
  const auto wall_after = std::chrono::steady_clock::now();
  EXPECT_EQ(c.now(), std::chrono::hours(24));
  EXPECT_LT(wall_after - wall_before, 1s);
}

TEST(ManualClockTest, UsableThroughTheClockInterface) {
  auto manual = std::make_shared<ManualClock>(Micros{100});
  std::shared_ptr<Clock> clock = manual;
  clock->sleep_for(Micros{50});
  EXPECT_EQ(clock->now(), Micros{150});
  manual->advance(Micros{50});
  EXPECT_EQ(clock->now(), Micros{200});
}

TEST(ManualClockTest, ConcurrentAdvancesAreNotLost) {
  ManualClock c(Micros{0});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 10'000; ++i) c.advance(Micros{1});
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(c.now(), Micros{80'000});
}

TEST(SystemClockTest, NearTheSystemClock) {
  SystemClock c;
  const Micros before = system_now();
  const Micros now = c.now();
  const Micros after = system_now();
  EXPECT_GE(now, before - 1ms);
  EXPECT_LE(now, after + 1ms);
  // Microseconds since the Unix epoch, not some other epoch or unit: after 2020, before 2100.
  EXPECT_GT(now, Micros{1'577'836'800'000'000});
  EXPECT_LT(now, Micros{4'102'444'800'000'000});
}

TEST(SystemClockTest, SleepForWaits) {
  SystemClock c;
  const auto start = std::chrono::steady_clock::now();
  const Micros t0 = c.now();
  c.sleep_for(20ms);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 20ms);
  EXPECT_GE(c.now() - t0, 19ms);
}

TEST(SystemClockTest, NonPositiveSleepReturnsAtOnce) {
  SystemClock c;
  const auto start = std::chrono::steady_clock::now();
  c.sleep_for(Micros{0});
  c.sleep_for(-1s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
}

TEST(SystemClockTest, InstanceIsShared) {
  const auto a = SystemClock::instance();
  const auto b = SystemClock::instance();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a.get(), b.get());
  const Micros now = a->now();
  EXPECT_LE(now - system_now(), 1ms);
  EXPECT_LE(system_now() - now, 1s);
}

}  // namespace
