// Sliding window counter against a real server: the weighted oldest bucket, exact retry_after (with
// precision equal to and finer than the window, cost above one) and reset_after.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class SlidingWindowTest : public StrictRedisTest {};

TEST_F(SlidingWindowTest, RetryAfterIsExactWithPrecisionEqualToTheWindow) {
  auto sw = rl().sliding_window("sw", Limit::per_minute(100));
  at(0s);
  EXPECT_TRUE(sw.consume("u", 50).allowed);
  EXPECT_TRUE(sw.consume("u", 50).allowed);
  at(75s);
  // Minute 0 weighs 45/60: 75 used, room for 25.
  Decision d = sw.consume("u", 25);
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;
  d = sw.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  // 25 + 100 * (60 - r) / 60 + 1 <= 100 first holds at r = 15.6 s.
  EXPECT_EQ(d.retry_after, 600ms) << d;
  expect_retry_after_exact(*clock, sw, "u", 1, d);
}

TEST_F(SlidingWindowTest, RetryAfterIsExactWithPrecisionEqualToTheWindowAndCostAboveOne) {
  auto sw = rl().sliding_window("sw", Limit::per_minute(100));
  at(0s);
  EXPECT_TRUE(sw.consume("u", 100).allowed);
  at(75s);
  EXPECT_TRUE(sw.consume("u", 25).allowed);
  const Decision d = sw.consume("u", 7);
  // 25 + 100 * (60 - r) / 60 + 7 <= 100 first holds at r = 19.2 s.
  EXPECT_EQ(d.retry_after, 4200ms) << d;
  expect_retry_after_exact(*clock, sw, "u", 7, d);
}

TEST_F(SlidingWindowTest, RetryAfterIsExactWithFinerPrecision) {
  // 10 per minute in buckets of 10 s: 4 units in bucket [0, 10 s), 6 in [20 s, 30 s).
  auto sw = rl().sliding_window("sw", Limit(10, 1min), 10s);
  struct Case {
    std::int64_t cost;
    Micros retry_after;
  };
  for (const Case& c : {Case{1, 500ms}, Case{2, 3s}, Case{5, 19'666'667us}}) {
    SCOPED_TRACE("cost " + std::to_string(c.cost));
    const std::string subject = "u" + std::to_string(c.cost);
    at(5s);
    EXPECT_TRUE(sw.consume(subject, 4).allowed);
    at(25s);
    EXPECT_TRUE(sw.consume(subject, 6).allowed);
    at(62s);
    // Bucket [0, 10 s) now weighs 8/10: 3.2 + 6 = 9.2 used.
    const Decision p = sw.peek(subject);
    EXPECT_FALSE(p.allowed) << p;
    EXPECT_EQ(p.remaining, 0) << p;
    const Decision d = sw.consume(subject, c.cost);
    // cost 1: 6 + 1 + 4 * (10 - r) / 10 <= 10 at r = 2.5 s, in the bucket starting at 60 s.
    // cost 2: 6 + 2 + 4 * (10 - r) / 10 <= 10 at r = 5 s.
    // cost 5: needs bucket [20 s, 30 s) to weigh at most 5/6: from 80 s + 1.666667 s.
    EXPECT_EQ(d.retry_after, c.retry_after) << d;
    expect_retry_after_exact(*clock, sw, subject, c.cost, d);
  }
}

// The script remembers the bucket names it parsed, up to 4096 (lua/policy.lua, parse_field), and
// then starts afresh. 5000 bucket names in one 10 s window, one a millisecond: a fresh subject at
// each, and one subject every 100 ms whose hash keeps 50 of them across the restart; every decision
// stays exact.
TEST_F(SlidingWindowTest, MoreBucketNamesThanTheScriptRemembersAreCountedExactly) {
  auto sw = rl().sliding_window("sw", Limit(6000, 10s), 1ms);
  int kept = 0;
  for (int ms = 0; ms < 5000; ++ms) {
    at(std::chrono::milliseconds(ms));
    const Decision d = sw.consume("fresh" + std::to_string(ms), 3);
    ASSERT_TRUE(d.allowed) << ms;
    ASSERT_EQ(d.remaining, 5997) << ms;
    if (ms % 100 == 0) {
      const Decision k = sw.consume("kept", 2);
      ++kept;
      ASSERT_TRUE(k.allowed) << ms;
      ASSERT_EQ(k.remaining, 6000 - 2 * kept) << ms;
    }
  }
  EXPECT_EQ(sw.peek("kept").remaining, 6000 - 2 * 50);
  at(10050ms);  // the first 50 ms of buckets have left: the one at 0 ms
  EXPECT_EQ(sw.peek("kept").remaining, 6000 - 2 * 49);
}

TEST_F(SlidingWindowTest, ResetAfterIsExact) {
  auto sw = rl().sliding_window("sw", Limit(10, 1min), 10s);
  at(5s);
  Decision d = sw.consume("u", 3);
  // Bucket [0, 10 s) weighs something until 70 s.
  EXPECT_EQ(d.reset_after, 65s) << d;
  expect_reset_after_exact(*clock, sw, "u", d);
  at(33s);
  d = sw.consume("u");
  EXPECT_EQ(d.reset_after, 100s - 33s) << d;  // bucket [30 s, 40 s) weighs until 100 s
  expect_reset_after_exact(*clock, sw, "u", d);
}

TEST_F(SlidingWindowTest, RemainingIsTheFloorOfWhatIsLeft) {
  auto sw = rl().sliding_window("sw", Limit(10, 1min));
  at(0s);
  sw.consume("u", 3);
  at(60s + 20s);  // minute 0 weighs 40/60: 2 used
  EXPECT_EQ(sw.peek("u").remaining, 8);
  at(60s + 21s);  // 3 * 39/60 = 1.95 used: 8.05 left
  EXPECT_EQ(sw.peek("u").remaining, 8);
  at(60s + 40s);  // 3 * 20/60 = 1
  EXPECT_EQ(sw.peek("u").remaining, 9);
  at(60s + 41s);  // 0.95
  EXPECT_EQ(sw.peek("u").remaining, 9);
  at(120s);
  EXPECT_EQ(sw.peek("u").remaining, 10);
}

TEST_F(SlidingWindowTest, StateIsOneHashWithOnlyLiveBuckets) {
  auto sw = rl().sliding_window("sw", Limit(100, 1min), 10s);
  for (int i = 0; i < 12; ++i) {
    at(Micros{i * 10s});
    EXPECT_TRUE(sw.consume("u").allowed);
  }
  EXPECT_EQ(dbsize(), 1);
  EXPECT_EQ(server().command({"TYPE", sw.key_for("u")}).str, "hash");
  // At 110 s the window holds buckets 5..11 (bucket 5 weighted); each admission deleted the bucket
  // that had just left it (policy.lua's common path).
  EXPECT_EQ(server().integer({"HLEN", sw.key_for("u")}), 7);
  EXPECT_EQ(sw.peek("u").remaining, 100 - 7);  // bucket 5 still weighs 1 at r = 0
  // Much later, every bucket left long ago (past the names the common path knows): the general
  // path deletes them all.
  at(300s);
  EXPECT_EQ(sw.consume("u").remaining, 99);
  EXPECT_EQ(server().integer({"HLEN", sw.key_for("u")}), 1);
}

// The TTL runs to when the newest bucket stops weighing anything, (newest + n + 1) * P: set by the
// write that makes a bucket the newest, kept by later writes into that bucket (single and batched),
// moved on by the first write into a later one.
TEST_F(SlidingWindowTest, TheTtlIsSetWhenTheNewestBucketMoves) {
  auto sw = rl().sliding_window("sw", Limit(100, 1h), 10min);  // n = 6 buckets of 10 min
  const auto pttl = [&] { return server().integer({"PTTL", sw.key_for("u")}); };
  at(15min);  // bucket 1: it stops weighing at (1 + 6 + 1) * 10 min = 80 min, 65 min from now
  EXPECT_TRUE(sw.consume("u").allowed);
  const std::int64_t first = pttl();
  EXPECT_GT(first, (65min - 5s) / 1ms);
  EXPECT_LE(first, 65min / 1ms + 1001);  // ttl_ms's margin (helpers.lua)
  at(19min);  // still bucket 1: had the TTL been written again, it would be 61 min
  EXPECT_TRUE(sw.consume("u").allowed);
  sw.consume_many({{"u", 1}, {"u", 1}});
  const std::int64_t kept = pttl();
  EXPECT_LE(kept, first);
  EXPECT_GT(kept, first - 5000) << "the TTL was written again";
  EXPECT_EQ(sw.peek("u").remaining, 96);
  at(21min);  // bucket 2: 90 min, 69 min from now
  EXPECT_TRUE(sw.consume("u").allowed);
  EXPECT_GT(pttl(), (69min - 5s) / 1ms);
  EXPECT_LE(pttl(), 69min / 1ms + 1001);
}

// A limit that adopts the buckets of one that left the policy (a longer window) writes them under
// its own TTL, even when the adopted newest bucket is the current one: the TTL they carried was the
// old, shorter window's.
TEST_F(SlidingWindowTest, AdoptedBucketsGetTheNewWindowsTtl) {
  auto ten_minutes = rl().sliding_window("sw", Limit(100, 10min), 1min);
  auto an_hour = rl().sliding_window("sw", Limit(100, 1h), 1min);
  ASSERT_EQ(ten_minutes.key_for("u"), an_hour.key_for("u"));
  at(5min);
  EXPECT_TRUE(ten_minutes.consume("u").allowed);  // bucket 5: weighs until 16 min
  EXPECT_LE(server().integer({"PTTL", ten_minutes.key_for("u")}), 11min / 1ms + 1001);
  at(5min + 30s);  // still bucket 5, now under the hour: it weighs until 66 min, 60.5 min from now
  const Decision d = an_hour.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 98) << d;  // the adopted unit counts
  EXPECT_GT(server().integer({"PTTL", an_hour.key_for("u")}), (60min + 30s - 5s) / 1ms);
}

}  // namespace
}  // namespace redlimit_test
