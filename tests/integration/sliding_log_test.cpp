// Sliding log against a real server: an admitted unit counts during [t, t + window), unique members,
// bounded set, exact retry_after / reset_after.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class SlidingLogTest : public StrictRedisTest {
 protected:
  std::int64_t zcard(const redlimit::SlidingLog& sl, std::string_view subject) {
    return server().integer({"ZCARD", sl.key_for(subject)});
  }
};

TEST_F(SlidingLogTest, AUnitCountsDuringAHalfOpenWindow) {
  auto sl = rl().sliding_log("sl", Limit(1, 10s));
  at(0s);
  Decision d = sl.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;
  EXPECT_EQ(d.reset_after, 10s) << d;
  at(10s - 1us);
  d = sl.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 1us) << d;
  at(10s);
  d = sl.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;
}

TEST_F(SlidingLogTest, RetryAfterIsExact) {
  auto sl = rl().sliding_log("sl", Limit(3, 10s));
  for (Micros t : {0s, 1s, 2s}) {
    at(t);
    EXPECT_TRUE(sl.consume("u").allowed);
  }
  at(5s);
  const Decision d = sl.consume("u");
  EXPECT_EQ(d.retry_after, 5s) << d;  // when the unit of 0 s leaves
  const Decision admitted = expect_retry_after_exact(*clock, sl, "u", 1, d);
  EXPECT_EQ(admitted.remaining, 0) << admitted;
  EXPECT_EQ(zcard(sl, "u"), 3);
}

TEST_F(SlidingLogTest, RetryAfterIsExactWithCostAboveOne) {
  auto sl = rl().sliding_log("sl", Limit(3, 10s));
  for (Micros t : {0s, 1s, 2s}) {
    at(t);
    EXPECT_TRUE(sl.consume("u").allowed);
  }
  at(5s);
  const Decision d = sl.consume("u", 2);
  EXPECT_EQ(d.retry_after, 6s) << d;  // room for 2 once the units of 0 s and 1 s have left
  const Decision admitted = expect_retry_after_exact(*clock, sl, "u", 2, d);
  EXPECT_EQ(admitted.remaining, 0) << admitted;
  EXPECT_EQ(admitted.reset_after, 10s) << admitted;
  EXPECT_EQ(zcard(sl, "u"), 3);  // the unit of 2 s and the two just admitted
}

TEST_F(SlidingLogTest, ResetAfterIsExact) {
  auto sl = rl().sliding_log("sl", Limit(5, 10s));
  at(0s);
  sl.consume("u", 2);
  at(3s);
  const Decision d = sl.consume("u");
  EXPECT_EQ(d.reset_after, 10s) << d;  // the newest unit leaves last
  expect_reset_after_exact(*clock, sl, "u", d);
  at(7s);
  expect_reset_after_exact(*clock, sl, "u", sl.peek("u"));
}

TEST_F(SlidingLogTest, UnitsOfOneMicrosecondAreDistinctMembers) {
  auto sl = rl().sliding_log("sl", Limit(5, 10s));
  at(1s);
  EXPECT_TRUE(sl.consume("u").allowed);
  EXPECT_TRUE(sl.consume("u").allowed);
  EXPECT_TRUE(sl.consume("u", 3).allowed);
  EXPECT_EQ(zcard(sl, "u"), 5);
  EXPECT_FALSE(sl.consume("u").allowed);
}

TEST_F(SlidingLogTest, AFloodNeverGrowsTheSetBeyondTheLimit) {
  auto sl = rl().sliding_log("sl", Limit(10, 1h));
  std::int64_t admitted = 0;
  for (int i = 0; i < 1000; ++i) {
    at(Micros{i * 1000});
    admitted += sl.consume("u").allowed ? 1 : 0;
  }
  EXPECT_EQ(admitted, 10);
  EXPECT_EQ(zcard(sl, "u"), 10);
  // And old units are trimmed as they leave.
  at(1h + 5ms);
  EXPECT_TRUE(sl.consume("u").allowed);
  EXPECT_EQ(zcard(sl, "u"), 5);  // units of 6..9 ms and the new one
}

TEST_F(SlidingLogTest, KeyLivesUntilItsNewestUnitLeaves) {
  auto sl = rl().sliding_log("sl", Limit(5, 1h));
  at(0s);
  sl.consume("u");
  at(20min);
  sl.consume("u");
  const std::int64_t pttl = server().integer({"PTTL", sl.key_for("u")});
  EXPECT_GT(pttl, (1h - 5s) / 1ms);
  EXPECT_LE(pttl, 1h / 1ms + 1);  // ttl_ms adds a millisecond (prologue.lua)
}

}  // namespace
}  // namespace redlimit_test
