// Two clients whose clocks disagree share one subject. State written by the client ahead is never
// undone by the one behind, and the waits the lagging client gets include the difference, so they
// stay exact on its own clock.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class ClockSkewTest : public StrictRedisTest {
 protected:
  void SetUp() override {
    StrictRedisTest::SetUp();
    lagging_clock = std::make_shared<redlimit::ManualClock>(kT0 + 4s);
    redlimit::Options o = options();
    o.clock = lagging_clock;
    lagging.emplace(redlimit::RateLimiter::connect(server().url(), o));
    at(10s);  // the client ahead is 6 s ahead
  }

  std::shared_ptr<redlimit::ManualClock> lagging_clock;
  std::optional<redlimit::RateLimiter> lagging;
};

TEST_F(ClockSkewTest, TokenBucket) {
  auto ahead = rl().token_bucket("skew", 3, 1, 10s);
  auto behind = lagging->token_bucket("skew", 3, 1, 10s);
  EXPECT_TRUE(ahead.consume("u", 2).allowed);
  // The token left is there for the lagging client too; nothing refills backwards.
  Decision d = behind.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;
  EXPECT_EQ(d.reset_after, 6s + 30s) << d;
  d = behind.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 6s + 10s) << d;  // one token 10 s after the ahead client's 10 s
  EXPECT_EQ(d.reset_after, 6s + 30s) << d;
  expect_retry_after_exact(*lagging_clock, behind, "u", 1, d);
}

TEST_F(ClockSkewTest, LeakyBucketMeter) {
  auto ahead = rl().leaky_bucket("skew", 3, Limit(1, 10s), redlimit::LeakyMode::meter);
  auto behind = lagging->leaky_bucket("skew", 3, Limit(1, 10s), redlimit::LeakyMode::meter);
  EXPECT_TRUE(ahead.consume("u", 2).allowed);
  Decision d = behind.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;
  EXPECT_EQ(d.reset_after, 6s + 30s) << d;
  d = behind.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 6s + 10s) << d;
  EXPECT_EQ(d.reset_after, 6s + 30s) << d;
  expect_retry_after_exact(*lagging_clock, behind, "u", 1, d);
}

TEST_F(ClockSkewTest, LeakyBucketShaper) {
  auto ahead = rl().leaky_bucket("skew", 3, Limit(1, 10s), redlimit::LeakyMode::shaper);
  auto behind = lagging->leaky_bucket("skew", 3, Limit(1, 10s), redlimit::LeakyMode::shaper);
  EXPECT_EQ(ahead.consume("u").delay, 0s);
  // Behind the request queued at the ahead client's 10 s: proceed at 20 s, 16 s from the lagging 4 s.
  Decision d = behind.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.delay, 6s + 10s) << d;
  d = behind.consume("u");
  EXPECT_EQ(d.delay, 6s + 20s) << d;
  d = behind.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 6s + 10s) << d;
  expect_retry_after_exact(*lagging_clock, behind, "u", 1, d);
}

TEST_F(ClockSkewTest, SlidingLog) {
  auto ahead = rl().sliding_log("skew", Limit(1, 10s));
  auto behind = lagging->sliding_log("skew", Limit(1, 10s));
  EXPECT_TRUE(ahead.consume("u").allowed);
  const Decision d = behind.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 6s + 10s) << d;  // the unit of 10 s leaves at 20 s
  EXPECT_EQ(d.reset_after, 6s + 10s) << d;
  expect_retry_after_exact(*lagging_clock, behind, "u", 1, d);
}

TEST_F(ClockSkewTest, SlidingWindow) {
  auto ahead = rl().sliding_window("skew", Limit(1, 10s));
  auto behind = lagging->sliding_window("skew", Limit(1, 10s));
  EXPECT_TRUE(ahead.consume("u").allowed);  // bucket [10 s, 20 s)
  const Decision d = behind.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  // The unit counts in full until 20 s, then weighs (30 s - t) / 10 s: room for one only at 30 s.
  EXPECT_EQ(d.retry_after, 26s) << d;
  EXPECT_EQ(d.reset_after, 26s) << d;
  expect_retry_after_exact(*lagging_clock, behind, "u", 1, d);
}

// A client whose clock runs a year ahead writes a bucket a year away. The lagging client's wait is
// counted to it exactly, in a few steps of the script's walk rather than one a bucket interval:
// one a second for the year (3 * 10^7 of them) held Redis for seconds, past this call's deadline.
TEST_F(ClockSkewTest, SlidingWindowAYearAhead) {
  constexpr Micros kYear = std::chrono::hours(24 * 365);
  at(10s + kYear);
  auto ahead = rl().sliding_window("skew", Limit(10, 1s));
  auto behind = lagging->sliding_window("skew", Limit(10, 1s));
  EXPECT_TRUE(ahead.consume("u", 10).allowed);  // bucket [A, A + 1 s), A = kT0 + 10 s + a year
  const Decision d = behind.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  // The 10 units count in full until A + 1 s, then weigh (A + 2 s - t) / 1 s: 9 of them, room for
  // one, at A + 1.1 s, which is a year and 7.1 s after the lagging client's 4 s.
  EXPECT_EQ(d.retry_after, kYear + 7100ms) << d;
  EXPECT_EQ(d.reset_after, kYear + 8s) << d;
  expect_retry_after_exact(*lagging_clock, behind, "u", 1, d);
}

// A refund takes units back from the newest bucket down, the one a year ahead first, then the
// lagging client's own: bucket by bucket, not one step for each of the year's seconds between.
TEST_F(ClockSkewTest, SlidingWindowRefundsPastABucketAYearAhead) {
  at(10s + std::chrono::hours(24 * 365));
  auto ahead = rl().sliding_window("skew", Limit(10, 1s));
  auto behind = lagging->sliding_window("skew", Limit(10, 1s));
  EXPECT_TRUE(ahead.consume("u", 2).allowed);
  Decision d = behind.consume("u", 5);
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 3) << d;
  d = behind.refund("u", 7);
  EXPECT_EQ(d.remaining, 10) << d;
  EXPECT_EQ(d.reset_after, 0s) << d;  // nothing left in any bucket
  EXPECT_EQ(dbsize(), 0);             // the emptied hash is gone
}

TEST_F(ClockSkewTest, FixedWindow) {
  auto ahead = rl().fixed_window("skew", Limit(1, 10s));
  auto behind = lagging->fixed_window("skew", Limit(1, 10s));
  EXPECT_TRUE(ahead.consume("u").allowed);  // window [10 s, 20 s)
  const Decision d = behind.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 16s) << d;
  expect_retry_after_exact(*lagging_clock, behind, "u", 1, d);
}

}  // namespace
}  // namespace redlimit_test
