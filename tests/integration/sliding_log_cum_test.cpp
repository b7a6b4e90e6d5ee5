// A sliding log's running sum, cum (lua/sliding_log.lua), is kept modulo 2^50: a log that never
// empties adds up its costs for as long as it lives, and from 2^53 on a Lua number rounds them (two
// admissions then wrote one member, and the second was admitted and never counted). Each test runs
// with both entry forms (Options::sliding_log_members).
#include <random>

#include "sliding_log_fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::SlidingLogMembers;

constexpr std::int64_t kCumMod = std::int64_t{1} << 50;

class SlidingLogCumTest : public SlidingLogFixture {};

// A log an earlier build wrote after 2^53 - 3 units (a byte quota at 1 GB/s, its subject never idle
// for 104 days): every admission is an entry of its own and counted, its cum taken modulo 2^50.
TEST_F(SlidingLogCumTest, ALogNear2To53CountsEveryAdmission) {
  each_form([&](SlidingLogMembers form, const redlimit::RateLimiter& limiter) {
    auto sl = limiter.sliding_log("cum", Limit(100, 1h));
    at(0s);
    const std::string key = sl.key_for("u");
    plant(key, text_member((std::int64_t{1} << 53) - 3, 1), kT0 - 1s);
    for (std::int64_t i = 0; i < 5; ++i) {
      const Decision d = sl.consume("u");
      EXPECT_TRUE(d.allowed) << d;
      EXPECT_EQ(d.remaining, 100 - 2 - i) << d;
    }
    const std::vector<SlidingLogEntry> log = entries(sl, "u");
    ASSERT_EQ(log.size(), 6u);
    // 2^53 - 2 .. 2^53 + 2 modulo 2^50, in rank order; the entry that wrapped to 0 a microsecond on.
    const std::int64_t cums[] = {kCumMod - 2, kCumMod - 1, 0, 1, 2};
    for (std::size_t i = 1; i < log.size(); ++i) {
      EXPECT_EQ(log[i].cum, cums[i - 1]) << "rank " << i;
      EXPECT_EQ(log[i].cost, 1) << "rank " << i;
      EXPECT_EQ(log[i].compact, form == SlidingLogMembers::compact) << "rank " << i;
      EXPECT_EQ(log[i].score, (kT0 + (i >= 3 ? 1us : 0us)).count()) << "rank " << i;
    }
    EXPECT_EQ(rl().sliding_log("cum", Limit(100, 1h)).peek("u").remaining, 94);
  });
}

// Across the wrap, by hand: the sums, a rejection's wait (the binary search compares cums as their
// distance from the window's base), a refund that shortens an entry back across 2^50.
TEST_F(SlidingLogCumTest, DecisionsAcrossTheWrapAreExact) {
  each_form([&](SlidingLogMembers, const redlimit::RateLimiter& limiter) {
    auto sl = limiter.sliding_log("cum", Limit(10, 1s));
    at(0s);
    const std::string key = sl.key_for("u");
    plant(key, text_member(kCumMod - 3, 3), kT0 - 500ms);  // 3 units, live until 500 ms
    Decision d = sl.consume("u", 4);                       // cum 2^50 + 1: stored as 1
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 3) << d;
    d = sl.consume("u", 4);  // the first 1 unit must leave: the planted entry, at 500 ms
    EXPECT_FALSE(d.allowed) << d;
    EXPECT_EQ(d.retry_after, 500ms) << d;
    EXPECT_EQ(d.reset_after, 1s) << d;
    EXPECT_TRUE(sl.consume("u", 3).allowed);  // cum 4: full
    at(500ms);                                // the planted entry has left: 4 + 3 in the window
    d = sl.peek("u", 6);                      // 3 + 6 > 10 + ... the first 1 unit must leave
    EXPECT_FALSE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 3) << d;
    EXPECT_EQ(d.retry_after, 500ms) << d;
    sl.refund("u", 5);  // pops the 3, and shortens the 4 (cum 1) to 2: cum 2^50 - 1
    std::vector<SlidingLogEntry> log = entries(sl, "u");
    ASSERT_FALSE(log.empty());
    EXPECT_EQ(log.back().cum, kCumMod - 1);
    EXPECT_EQ(log.back().cost, 2);
    EXPECT_EQ(log.back().score, kT0.count());
    d = sl.consume("u", 8);  // cum 2^50 + 7: stored as 7
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 0) << d;
    log = entries(sl, "u");
    EXPECT_EQ(log.back().cum, 7);
    d = rl().sliding_log("cum", Limit(10, 1s)).peek("u");  // the 2 at 0 s leave first, at 1 s
    EXPECT_FALSE(d.allowed) << d;
    EXPECT_EQ(d.retry_after, 500ms) << d;
    EXPECT_EQ(d.reset_after, 1s) << d;
    expect_retry_after_exact(*clock, sl, "u", 1, d);
  });
}

// Redis and the memory backend in step while a busy subject's log runs past 2^50 units: 2^40 a
// second, two admissions of about a quarter of it at each instant, 0.9-0.99 s apart (so the log
// never empties), peeks of any cost and refunds. Near 2^50 the second admission of an instant is
// the one to wrap, so it is stamped a microsecond after the first, by both.
TEST_F(SlidingLogCumTest, RedisDecidesAsMemoryWhileTheCumWraps) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 40;
  each_form([&](SlidingLogMembers form, const redlimit::RateLimiter& limiter) {
    const redlimit::RateLimiter memory_limiter = in_memory_writing(form);
    const auto memory = memory_limiter.sliding_log("wrap", Limit(kLimit, 1s));
    const auto redis = limiter.sliding_log("wrap", Limit(kLimit, 1s));
    std::mt19937_64 gen(form == SlidingLogMembers::compact ? 7 : 3);
    auto uniform = [&gen](std::int64_t lo, std::int64_t hi) {
      return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
    };
    auto both = [&](const std::string& where, auto call) { expect_same_decision(call(redis), call(memory), where); };
    Micros t = kT0;
    std::int64_t newest_cum = 0;
    int wraps = 0, after_wrap = 0, step = 0;
    for (; step < 3000 && after_wrap < 20 && !HasFailure(); ++step) {
      t += Micros{uniform(900'000, 990'000)};  // under the window: the last instant's entries live
      clock->set(t);
      const std::string where = "step " + std::to_string(step);
      // Together at most half the limit, which fits beside the last instant's.
      const std::int64_t to_wrap = kCumMod - newest_cum;
      const bool near = to_wrap <= kLimit / 2;
      const std::int64_t a = near ? to_wrap / 2 : uniform(kLimit / 40 * 9, kLimit / 4);
      const std::int64_t b =
          near ? to_wrap - a + uniform(0, kLimit / 2 - to_wrap) : uniform(kLimit / 40 * 9, kLimit / 4);
      both(where + " consume", [a](const redlimit::SlidingLog& sl) { return sl.consume("s", a); });
      both(where + " consume", [b](const redlimit::SlidingLog& sl) { return sl.consume("s", b); });
      const std::int64_t ask = uniform(1, kLimit);
      both(where + " peek", [ask](const redlimit::SlidingLog& sl) { return sl.peek("s", ask); });
      if (step % 10 == 0 && !near) {
        const std::int64_t back = uniform(1, kLimit / 16);
        both(where + " refund", [back](const redlimit::SlidingLog& sl) { return sl.refund("s", back); });
      }
      const std::vector<SlidingLogEntry> log = entries(redis, "s");
      ASSERT_GE(log.size(), 2u);
      if (log.back().cum < newest_cum) {
        ++wraps;
        EXPECT_EQ(log.back().score, log[log.size() - 2].score + 1) << where << ": the wrapped entry";
      }
      if (wraps > 0) ++after_wrap;
      newest_cum = log.back().cum;
    }
    EXPECT_EQ(wraps, 1) << "after " << step << " steps";
  });
}

}  // namespace
}  // namespace redlimit_test
