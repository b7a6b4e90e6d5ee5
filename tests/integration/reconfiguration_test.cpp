// Issue 12: a deploy that changes a live subject's limit, window, precision or rate has defined
// semantics (docs/algorithms.md, Reconfiguration), the same on Redis and in memory: what was
// consumed stays consumed, a bucket keeps its tokens or water, and no state written under one
// configuration is misread under another. Each case below was found by an independent oracle.
#include <gtest/gtest.h>

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using namespace std::chrono_literals;

class ReconfigurationTest : public StrictRedisTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    StrictRedisTest::SetUp();
    if (!GetParam()) memory.emplace(redlimit::RateLimiter::in_memory(options()));
  }
  // Redis (param true) or the memory backend (false), on the same ManualClock.
  const redlimit::RateLimiter& lim() const { return memory ? *memory : rl(); }

  std::optional<redlimit::RateLimiter> memory;
};

TEST_P(ReconfigurationTest, LoweringALiveLimitRejectsWithoutThrowing) {
  at(30s);
  EXPECT_TRUE(lim().fixed_window("fw", Limit::per_minute(100)).consume("s", 80).allowed);
  EXPECT_TRUE(lim().sliding_log("sl", Limit::per_minute(100)).consume("s", 80).allowed);
  at(40s);
  const Decision window = lim().fixed_window("fw", Limit::per_minute(50)).consume("s");
  const Decision log = lim().sliding_log("sl", Limit::per_minute(50)).consume("s");
  for (const Decision& d : {window, log}) {
    EXPECT_FALSE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 0) << d;
  }
  EXPECT_EQ(window.retry_after, 20s) << "the window of the 80 ends at 1:00";
  EXPECT_EQ(log.retry_after, 50s) << "the 80 leave the log at 1:30";
  // Under fail_open too, on Redis: a rejection, not a script error answered by the failure policy.
  if (GetParam()) {
    redlimit::Options open = options();
    open.on_failure = redlimit::OnFailure::fail_open;
    const auto lenient = redlimit::RateLimiter::connect(server().url(), open);
    const Decision d = lenient.fixed_window("fw", Limit::per_minute(50)).consume("s");
    EXPECT_FALSE(d.allowed) << d;
    EXPECT_EQ(d.source, redlimit::Source::primary) << d;
  }
  // Raised again: the 80 still count.
  const Decision raised = lim().fixed_window("fw", Limit::per_minute(1000)).consume("s");
  EXPECT_TRUE(raised.allowed);
  EXPECT_EQ(raised.remaining, 919);
}

TEST_P(ReconfigurationTest, ATokenBucketKeepsItsTokensWhenItsRateChanges) {
  at(0s);
  EXPECT_TRUE(lim().token_bucket("tb", 10, 10, 1s).consume("s", 5).allowed);
  const auto slow = lim().token_bucket("tb", 10, 10, 1min);
  EXPECT_TRUE(slow.peek("s", 5).allowed) << "5 tokens left, whatever the new rate";
  const Decision six = slow.peek("s", 6);
  EXPECT_FALSE(six.allowed);
  EXPECT_EQ(six.retry_after, 6s) << "one token at 10 a minute";
  // The other way: 10 a minute with 5 taken, then 10 a second.
  EXPECT_TRUE(lim().token_bucket("tb2", 10, 10, 1min).consume("s", 5).allowed);
  const Decision fast = lim().token_bucket("tb2", 10, 10, 1s).peek("s", 6);
  EXPECT_FALSE(fast.allowed);
  EXPECT_EQ(fast.retry_after, 100ms);
  // A smaller capacity clamps the level (5 tokens, capacity 3).
  EXPECT_EQ(lim().token_bucket("tb", 3, 10, 1s).peek("s", 1).remaining, 3);
}

TEST_P(ReconfigurationTest, ALeakyBucketKeepsItsWaterWhenItsRateChanges) {
  at(0s);
  EXPECT_TRUE(lim().leaky_bucket("lb", 10, Limit::per_second(10)).consume("s", 5).allowed);
  const auto slow = lim().leaky_bucket("lb", 10, Limit::per_minute(10));
  EXPECT_TRUE(slow.peek("s", 5).allowed);
  const Decision six = slow.peek("s", 6);
  EXPECT_FALSE(six.allowed);
  EXPECT_EQ(six.retry_after, 6s);
  // The other way: 10 a minute with 5 in, then 10 a second: 5 still in, one more drains in 100 ms.
  EXPECT_TRUE(lim().leaky_bucket("lb2", 10, Limit::per_minute(10)).consume("s", 5).allowed);
  const Decision fast = lim().leaky_bucket("lb2", 10, Limit::per_second(10)).peek("s", 6);
  EXPECT_FALSE(fast.allowed);
  EXPECT_EQ(fast.remaining, 5);
  EXPECT_EQ(fast.retry_after, 100ms);
  // A smaller capacity clamps the water (5 in, capacity 3): full, and one drains in 100 ms.
  const Decision full = lim().leaky_bucket("lb", 3, Limit::per_second(10)).peek("s", 1);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.remaining, 0);
  EXPECT_EQ(full.retry_after, 100ms);
}

TEST_P(ReconfigurationTest, AFixedWindowChangedFromAMinuteToAnHourKeepsWhatWasConsumed) {
  at(37min + 30s);
  EXPECT_TRUE(lim().fixed_window("fw", Limit::per_minute(100)).consume("s", 80).allowed);
  at(37min + 40s);
  const auto hourly = lim().fixed_window("fw", Limit::per_hour(100));
  const Decision d = hourly.consume("s");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 19) << "the minute's 80 count in the hour that holds them";
  const Decision wait = hourly.peek("s", 20);
  EXPECT_FALSE(wait.allowed);
  EXPECT_EQ(wait.retry_after, 22min + 20s) << "to the end of the hour, not of a one-hour window from 0:37";
  at(60min);
  EXPECT_TRUE(hourly.peek("s", 100).allowed);
  // And back: the hour's state overlaps the current minute, so its units count there.
  at(60min + 5s);
  EXPECT_TRUE(hourly.consume("s", 30).allowed);
  const Decision minute = lim().fixed_window("fw", Limit::per_minute(100)).consume("s");
  EXPECT_EQ(minute.remaining, 69);
}

TEST_P(ReconfigurationTest, ASlidingWindowWhosePrecisionChangesRegroupsItsCounts) {
  at(1s);
  EXPECT_TRUE(lim().sliding_window("sw", Limit::per_minute(100)).consume("s", 80).allowed);
  at(2s);
  const auto finer = lim().sliding_window("sw", Limit::per_minute(100), 6s);
  EXPECT_FALSE(finer.consume("s", 21).allowed) << "an exact log admits 20, not 100";
  const Decision twenty = finer.consume("s", 20);
  EXPECT_TRUE(twenty.allowed);
  EXPECT_EQ(twenty.remaining, 0);
  // The regrouped 80 are dated 0:02 (their old bucket ended later): never earlier than they were.
  EXPECT_FALSE(finer.peek("s", 1).allowed);
}

TEST_P(ReconfigurationTest, APolicyWhoseLimitChangesWindowAdoptsTheOldCounts) {
  at(10s);
  EXPECT_TRUE(lim().policy("pol", redlimit::parse_limits("100/1m; 1000/1h")).consume("s", 90).allowed);
  at(20s);
  // The hour limit becomes a day limit: the new limit adopts the hour's buckets (the longest window
  // that left), so the 90 count against it too.
  const Decision d = lim().policy("pol", redlimit::parse_limits("100/1m; 1000/1d")).consume("s", 10);
  EXPECT_TRUE(d.allowed);
  ASSERT_EQ(d.limits.size(), 2u);
  EXPECT_EQ(d.limits[0].remaining, 0);
  EXPECT_EQ(d.limits[1].remaining, 900);
}

// A refund as the first write after a window grew writes the old limit's counts under the new
// limit's tags (own): they must live by the new window, not by the TTL the key got under the old one
// (about 2 s here, where the new window is a minute). Before, the key kept that TTL through the
// refund and every admission after it, and its units vanished with it.
TEST_P(ReconfigurationTest, ARefundThatTakesOverAnOldWindowsCountsGivesTheKeyTheNewWindowsLife) {
  at(30s);
  EXPECT_TRUE(lim().sliding_window("sw", Limit::per_second(10)).consume("s", 5).allowed);
  const auto grown = lim().sliding_window("sw", Limit::per_minute(10), 1s);
  EXPECT_EQ(grown.refund("s").remaining, 6);
  EXPECT_TRUE(grown.consume("s").allowed);
  if (GetParam()) {
    EXPECT_GT(server().integer({"PTTL", grown.key_for("s")}), 55000) << "the key dies with the old window";
  } else {
    at(35s);  // past the old TTL: the memory backend expires keys by the calls' clock
    EXPECT_EQ(grown.peek("s").remaining, 5) << "the 4 taken over and the 1 consumed are still counted";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ReconfigurationTest, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "Redis" : "Memory"); });

}  // namespace
}  // namespace redlimit_test
