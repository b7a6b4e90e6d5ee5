// Token bucket against a real server: starts full, continuous refill (also at rates that are not a
// whole number of microseconds per token), exact retry_after / reset_after.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class TokenBucketTest : public StrictRedisTest {};

TEST_F(TokenBucketTest, StartsFullAndPeekCreatesNothing) {
  auto tb = rl().token_bucket("tb", 10, 1, 1s);
  at(0s);
  const Decision d = tb.peek("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 10) << d;
  EXPECT_EQ(d.reset_after, 0us) << d;
  EXPECT_EQ(dbsize(), 0);
}

TEST_F(TokenBucketTest, BurstsToCapacityThenRefills) {
  auto tb = rl().token_bucket("tb", 10, 1, 1s);
  at(0s);
  Decision d = tb.consume("u", 10);
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;
  EXPECT_EQ(d.reset_after, 10s) << d;
  d = tb.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 1s) << d;
  at(2500ms);
  d = tb.consume("u", 2);
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;  // 2.5 tokens - 2
  at(3s);
  EXPECT_EQ(tb.peek("u").remaining, 1);  // 1.0 exactly
  at(1h);
  EXPECT_EQ(tb.peek("u").remaining, 10);  // never above capacity
}

TEST_F(TokenBucketTest, RetryAfterIsExact) {
  auto tb = rl().token_bucket("tb", 10, 1, 1s);
  struct Case {
    std::int64_t cost;
    Micros retry_after;
  };
  for (const Case& c : {Case{1, 1s}, Case{3, 3s}, Case{10, 10s}}) {
    SCOPED_TRACE("cost " + std::to_string(c.cost));
    const std::string subject = "u" + std::to_string(c.cost);
    at(0s);
    EXPECT_TRUE(tb.consume(subject, 10).allowed);
    const Decision d = tb.consume(subject, c.cost);
    EXPECT_EQ(d.retry_after, c.retry_after) << d;
    const Decision admitted = expect_retry_after_exact(*clock, tb, subject, c.cost, d);
    EXPECT_EQ(admitted.remaining, 0) << admitted;
  }
}

TEST_F(TokenBucketTest, RetryAfterIsExactAtAFractionalRate) {
  // 3 tokens per 10 s: one every 3.333... s, so waits round up to the next microsecond.
  auto tb = rl().token_bucket("tb", 2, 3, 10s);
  struct Case {
    std::int64_t cost;
    Micros retry_after;
  };
  for (const Case& c : {Case{1, 3'333'334us}, Case{2, 6'666'667us}}) {
    SCOPED_TRACE("cost " + std::to_string(c.cost));
    const std::string subject = "u" + std::to_string(c.cost);
    at(0s);
    EXPECT_TRUE(tb.consume(subject, 2).allowed);
    const Decision d = tb.consume(subject, c.cost);
    EXPECT_EQ(d.retry_after, c.retry_after) << d;
    expect_retry_after_exact(*clock, tb, subject, c.cost, d);
  }
}

TEST_F(TokenBucketTest, ResetAfterIsExact) {
  auto tb = rl().token_bucket("tb", 10, 3, 10s);
  at(0s);
  Decision d = tb.consume("u", 4);
  EXPECT_EQ(d.reset_after, 13'333'334us) << d;  // 4 tokens at 3 per 10 s
  expect_reset_after_exact(*clock, tb, "u", d);
  at(5s);
  d = tb.peek("u");
  EXPECT_EQ(d.reset_after, 8'333'334us) << d;
  expect_reset_after_exact(*clock, tb, "u", d);
}

TEST_F(TokenBucketTest, KeyLivesUntilTheBucketIsFull) {
  auto tb = rl().token_bucket("tb", 100, 100, 1h);
  at(0s);
  tb.consume("u", 50);
  const std::int64_t pttl = server().integer({"PTTL", tb.key_for("u")});
  EXPECT_GT(pttl, (30min - 5s) / 1ms);
  // The lease (helpers.lua, bucket_ttl) keeps a key less than 1.5 times what its state needs (30
  // min here, far above the lease's floor), and
  // ttl_ms adds a second's margin and a millisecond.
  EXPECT_LE(pttl, 45min / 1ms + 1001);
}

}  // namespace
}  // namespace redlimit_test
