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
  EXPECT_EQ(zcard(sl, "u"), 2);  // the request of 2 s and the one of 2 units just admitted
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

TEST_F(SlidingLogTest, RequestsOfOneMicrosecondAreDistinctEntries) {
  auto sl = rl().sliding_log("sl", Limit(5, 10s));
  at(1s);
  EXPECT_TRUE(sl.consume("u").allowed);
  EXPECT_TRUE(sl.consume("u").allowed);
  EXPECT_TRUE(sl.consume("u", 3).allowed);
  EXPECT_EQ(zcard(sl, "u"), 3);  // one entry a request, whatever its cost
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

// The entries that left are trimmed by the admission whose cum crosses a multiple of limit / 8, not by
// each one (sliding_log.lua): the decisions are the same, and the set never holds more than 9/8 of a
// full window's entries.
TEST_F(SlidingLogTest, TheEntriesThatLeftAreTrimmedEveryEighthOfTheLimit) {
  // A window of 100 s on the test's clock, units 100 ms apart: the key's TTL (the window) is real
  // time to Redis, and with a 1 s window a slow run (TSan, beside another suite) let the key expire
  // between the flood's calls.
  constexpr Micros kWindow = 100s;
  auto sl = rl().sliding_log("lazy", Limit(80, kWindow));
  for (int i = 0; i < 80; ++i) {
    at(Micros{i * 100'000});
    ASSERT_TRUE(sl.consume("u").allowed);
  }
  at(kWindow + 5s);  // the entries of 0..5 s have left: 29 live
  Decision d = sl.consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 50) << d;
  EXPECT_EQ(zcard(sl, "u"), 81) << "cum 80 -> 81 crosses no multiple of 10: nothing trimmed";
  EXPECT_EQ(sl.peek("u").remaining, 50);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(sl.consume("u").allowed);  // cum 89
  EXPECT_EQ(zcard(sl, "u"), 89);
  EXPECT_TRUE(sl.consume("u").allowed);  // cum 90: the trim
  EXPECT_EQ(zcard(sl, "u"), 39);
  // A flood over the window's length: the set stays within 80 + 10 entries, and every rejection's
  // wait is exact (when the oldest live unit leaves).
  std::int64_t most = 0;
  for (int i = 0; i < 3000; ++i) {
    at(2 * kWindow + Micros{i * 100'000});
    const Decision f = sl.consume("u");
    if (!f.allowed) {
      const std::int64_t t = (2 * kWindow + Micros{i * 100'000}).count();
      const redlimit::Reply oldest =
          server().command({"ZRANGEBYSCORE", sl.key_for("u"), "(" + std::to_string(kT0.count() + t - kWindow.count()),
                            "+inf", "WITHSCORES", "LIMIT", "0", "1"});
      ASSERT_EQ(oldest.elements.size(), 2u) << i << ": no live entry in the log";
      ASSERT_EQ(f.retry_after.count(), std::stoll(oldest.elements[1].str) + kWindow.count() - (kT0.count() + t)) << i;
    }
    most = std::max(most, zcard(sl, "u"));
  }
  EXPECT_GT(most, 80);
  EXPECT_LE(most, 90);
}

TEST_F(SlidingLogTest, KeyLivesUntilItsNewestUnitLeaves) {
  auto sl = rl().sliding_log("sl", Limit(5, 1h));
  at(0s);
  sl.consume("u");
  at(20min);
  sl.consume("u");
  const std::int64_t pttl = server().integer({"PTTL", sl.key_for("u")});
  EXPECT_GT(pttl, (1h - 5s) / 1ms);
  EXPECT_LE(pttl, 1h / 1ms + 1001);  // ttl_ms adds a second's margin and a millisecond (prologue.lua)
}

}  // namespace
}  // namespace redlimit_test

namespace redlimit_test {
namespace {

// Issue 12: a decision's Redis work is bounded by the requests in the window, never by the cost.
// consume(1'000'000) on a 1M/day log once wrote a million members (115 MB, 3.5 s inside Redis).
TEST_F(SlidingLogTest, AHugeCostIsOneEntry) {
  auto sl = rl().sliding_log("sl", Limit::per_day(1'000'000));
  at(0s);
  const Decision d = sl.consume("u", 1'000'000);
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;
  EXPECT_EQ(zcard(sl, "u"), 1);
  EXPECT_LT(server().integer({"MEMORY", "USAGE", sl.key_for("u")}), 1024);
  at(1h);
  const Decision next = sl.consume("u");
  EXPECT_FALSE(next.allowed) << next;
  EXPECT_EQ(next.retry_after, 23h) << next;
  // The corners: 2^40 units in one request, on a ten-year log.
  auto big = rl().sliding_log("big", Limit(Limit::max_count(), Limit::max_window()));
  EXPECT_TRUE(big.consume("u", Limit::max_count()).allowed);
  EXPECT_EQ(zcard(big, "u"), 1);
  EXPECT_EQ(big.peek("u").retry_after, Limit::max_window());
}

TEST_F(SlidingLogTest, ALogWrittenBy02IsRestarted) {
  // 0.2 kept one member "<time>:<seq>" per unit; such a log reads as empty and the next write
  // replaces it.
  auto sl = rl().sliding_log("sl", Limit(3, 1h));
  at(0s);
  const std::string key = sl.key_for("u");
  const std::string t = std::to_string(clock->now().count());
  for (const char* seq : {"1", "2", "3"}) server().command({"ZADD", key, t, t + ":" + seq});
  server().command({"PEXPIRE", key, "3600000"});
  EXPECT_EQ(sl.peek("u").remaining, 3);
  EXPECT_TRUE(sl.consume("u").allowed);
  EXPECT_EQ(zcard(sl, "u"), 1);
  EXPECT_EQ(sl.peek("u").remaining, 2);
}

}  // namespace
}  // namespace redlimit_test

namespace redlimit_test {
namespace {

// Shortening the only entry pops it (Redis deletes the emptied set) and adds it back: the key must
// get its TTL again (found by the fault suite's mixed workload under ASan).
TEST_F(SlidingLogTest, APartRefundOfTheOnlyEntryKeepsATtl) {
  auto sl = rl().sliding_log("sl", Limit(10, 1h));
  at(0s);
  ASSERT_TRUE(sl.consume("u", 5).allowed);
  sl.refund("u", 2);
  EXPECT_EQ(zcard(sl, "u"), 1);
  const std::int64_t pttl = server().integer({"PTTL", sl.key_for("u")});
  EXPECT_GT(pttl, 0) << "no TTL after the refund";
  EXPECT_LE(pttl, 1h / 1ms + 1001);
  EXPECT_EQ(sl.peek("u").remaining, 7);
}

}  // namespace
}  // namespace redlimit_test
