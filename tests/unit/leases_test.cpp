// Quota leases (redlimit/leases.hpp) on the memory backend with a ManualClock: cold subjects are
// decided per request; hot ones from leases that never admit more than the limit; unused units go
// back when a lease ends and on close().
#include "redlimit/leases.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "redlimit/clock.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/rate_limiter.hpp"
#include "support/stepped_clock.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::LeaseOptions;
using redlimit::Leases;
using redlimit::LeaseState;
using redlimit::Limit;
using redlimit::Source;
using Micros = std::chrono::microseconds;

constexpr Micros kT0{1'699'999'200'000'000};

class LeasesTest : public ::testing::Test {
 protected:
  std::shared_ptr<redlimit::ManualClock> clock = std::make_shared<redlimit::ManualClock>(kT0);
  redlimit::RateLimiter limiter = [this] {
    redlimit::Options o;
    o.clock = clock;
    return redlimit::RateLimiter::in_memory(o);
  }();
};

TEST_F(LeasesTest, AColdSubjectIsDecidedPerRequest) {
  Leases leases(limiter.fixed_window("api", Limit::per_minute(100)));
  for (int i = 0; i < 10; ++i) {
    clock->advance(1s);  // one request a second: far below hot_rate
    EXPECT_EQ(leases.consume("u").source, Source::primary);
  }
  EXPECT_EQ(leases.stats().leases_taken, 0u);
  EXPECT_EQ(leases.stats().remote_decisions, 10u);
  EXPECT_EQ(leases.state("u"), LeaseState::cold);
  EXPECT_EQ(leases.stats().subjects_cold, 1u);
  EXPECT_EQ(leases.stats().subjects_leased, 0u);
}

TEST_F(LeasesTest, AHotSubjectIsDecidedLocallyAndNeverPastTheLimit) {
  // 10,000 per second, offered 20,000 a second for three seconds: one request every 50 us.
  const auto fw = limiter.fixed_window("api", Limit::per_second(10'000));
  Leases leases(fw);
  std::map<std::int64_t, std::int64_t> admitted;  // by window
  for (int i = 0; i < 60'000; ++i) {
    clock->advance(50us);
    const Decision d = leases.consume("hot");
    if (d.allowed) ++admitted[clock->now().count() / 1'000'000];
  }
  for (const auto& [window, n] : admitted) EXPECT_LE(n, 10'000) << "window " << window;
  const auto s = leases.stats();
  EXPECT_GT(s.leases_taken, 10u);
  EXPECT_GT(s.local_decisions, 20 * s.leases_taken) << "leases should carry many decisions each";
  EXPECT_EQ(leases.state("hot"), LeaseState::leased);
  EXPECT_EQ(s.subjects_leased, 1u);
  // Near the limit, under-admission stays small: each full window admits nearly its 10,000.
  for (const auto& [window, n] : admitted) {
    if (window > admitted.begin()->first && window < admitted.rbegin()->first) EXPECT_GE(n, 9'800) << window;
  }
}

TEST_F(LeasesTest, UnusedUnitsGoBackWhenTheLeaseEnds) {
  // A bucket that barely refills during the test (1,000 an hour), so what it holds is what was taken.
  const auto tb = limiter.token_bucket("tb", 1'000'000, 1'000, 1h);
  LeaseOptions o;
  o.hot_rate = 100;
  Leases leases(tb, o);
  for (int i = 0; i < 2'500; ++i) {  // the third 100 ms is half through its lease
    clock->advance(100us);
    ASSERT_TRUE(leases.consume("u").allowed);
  }
  ASSERT_GT(leases.stats().leases_taken, 0u);
  // Units still held count as taken in the store...
  const std::int64_t held = 1'000'000 - 2'500 - tb.peek("u").remaining;
  EXPECT_GT(held, 0);
  // ...until the lease ends and they go back.
  clock->advance(o.duration);
  leases.return_expired();
  EXPECT_EQ(leases.stats().units_returned, static_cast<std::uint64_t>(held));
  EXPECT_EQ(tb.peek("u").remaining, 1'000'000 - 2'500) << "exactly the admitted units stay taken";
}

// A lease's duration is a span the table times, on monotonic(). Before, its end was a wall time: a
// wall clock stepped back an hour kept the lease, and its units, out of the store for that hour.
TEST(LeasesOnASteppedClock, AWallClockStepBackDoesNotProlongALease) {
  auto clock = std::make_shared<redlimit_test::SteppedClock>(kT0);
  redlimit::Options lo;
  lo.clock = clock;
  const auto limiter = redlimit::RateLimiter::in_memory(lo);
  const auto tb = limiter.token_bucket("tb", 1'000'000, 1'000, 1h);  // barely refills
  LeaseOptions o;
  o.hot_rate = 100;
  Leases leases(tb, o);
  for (int i = 0; i < 2'500; ++i) {
    clock->pass(100us);
    ASSERT_TRUE(leases.consume("u").allowed);
  }
  ASSERT_EQ(leases.state("u"), LeaseState::leased);
  const std::int64_t held = 1'000'000 - 2'500 - tb.peek("u").remaining;
  ASSERT_GT(held, 0);
  clock->step_wall(-1h);
  clock->pass(o.duration);
  leases.return_expired();
  EXPECT_EQ(leases.stats().units_returned, static_cast<std::uint64_t>(held));
}

TEST_F(LeasesTest, CloseReturnsEverythingAndLaterCallsGoToTheStore) {
  const auto fw = limiter.fixed_window("api", Limit::per_hour(1'000'000));
  Leases leases(fw);
  std::int64_t admitted = 0;
  for (int i = 0; i < 5'000; ++i) {
    clock->advance(100us);
    admitted += leases.consume("u").allowed ? 1 : 0;
  }
  ASSERT_GT(leases.stats().leases_taken, 0u);
  leases.close();
  EXPECT_EQ(fw.peek("u").remaining, 1'000'000 - admitted) << "exactly the admitted units stay consumed";
  EXPECT_EQ(leases.state("u"), LeaseState::closed);
  EXPECT_EQ(leases.consume("u").source, Source::primary);
}

TEST_F(LeasesTest, LittleLeftMeansPerRequestDecisions) {
  LeaseOptions o;
  o.min_lease = 50;
  Leases leases(limiter.fixed_window("api", Limit::per_minute(100)), o);  // share x 100 = 25 < 50
  for (int i = 0; i < 200; ++i) {
    clock->advance(1ms);
    leases.consume("u");
  }
  EXPECT_EQ(leases.stats().leases_taken, 0u);
  EXPECT_EQ(leases.state("u"), LeaseState::little_left);
  EXPECT_EQ(leases.stats().subjects_little_left, 1u);
}

TEST_F(LeasesTest, BadInputThrowsBeforeAnything) {
  Leases leases(limiter.fixed_window("api", Limit::per_minute(100)));
  EXPECT_THROW(leases.consume("u", 0), redlimit::InvalidArgument);
  EXPECT_THROW(leases.consume("u", 101), redlimit::InvalidArgument);
  EXPECT_THROW(leases.consume("", 1), redlimit::InvalidArgument);
  LeaseOptions bad;
  bad.share = 0;
  EXPECT_THROW(Leases(limiter.fixed_window("api", Limit::per_minute(100)), bad), redlimit::InvalidArgument);
  EXPECT_THROW(Leases(limiter.leaky_bucket("lb", 10, Limit::per_second(10), redlimit::LeakyMode::shaper)),
               redlimit::InvalidArgument);
  EXPECT_NO_THROW(Leases(limiter.leaky_bucket("lb", 10, Limit::per_second(10))));
}

}  // namespace
