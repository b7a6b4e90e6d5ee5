// The sliding log's trim (lua/sliding_log.lua, trim): the entries that left the window are removed,
// oldest first, by the admission whose cum crosses a multiple of min(limit / 8, 128) units, and at
// most 1,024 of them at a time, so that no admission holds Redis for the removal of a large log's
// eighth (or all of it, when its subject slowed down). Each test runs with both entry forms
// (Options::sliding_log_members), against the memory backend's decisions.
#include <string>
#include <vector>

#include "sliding_log_fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::SlidingLogMembers;

using SlidingLogTrimTest = SlidingLogFixture;

constexpr std::int64_t kTrimMost = 1024;  // sliding_log.lua's TRIM_MOST
constexpr std::int64_t kTrimEvery = 128;  // TRIM_MOST / 8: a limit of 100,000 / 8 is more

// 5,000 units admitted at once, one more 50 s later, then a window (100 s) after the first: 5,000
// entries have left and one is live. Each trim removes 1,024 of them, the oldest, until none is
// left, while fewer than 128 entries join between two trims; the decisions are the memory
// backend's throughout.
TEST_F(SlidingLogTrimTest, ATrimRemovesAtMostTrimMostEntriesOldestFirst) {
  each_form([&](SlidingLogMembers form, const redlimit::RateLimiter& limiter) {
    const redlimit::RateLimiter memory_limiter = in_memory_writing(form);
    const auto memory = memory_limiter.sliding_log("tr", Limit(100000, 100s));
    const auto redis = limiter.sliding_log("tr", Limit(100000, 100s));
    at(0s);
    const std::vector<redlimit::Request> batch(5000, redlimit::Request{"u", 1});
    const std::vector<Decision> r = redis.consume_many(batch), m = memory.consume_many(batch);
    ASSERT_EQ(r.size(), m.size());
    for (std::size_t i = 0; i < r.size(); ++i) expect_same_decision(r[i], m[i], "batch " + std::to_string(i));
    at(50s);
    expect_same_decision(redis.consume("u"), memory.consume("u"), "the live one");
    ASSERT_EQ(server().integer({"ZCARD", redis.key_for("u")}), 5001);

    at(100s + 1ms);
    ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).type, redlimit::Reply::Type::status);
    std::int64_t cum = 5001, dead = 5000, card = 5001, trims = 0;
    while (dead > 0) {
      const std::string where = "cum " + std::to_string(cum + 1);
      const Decision d = redis.consume("u");
      expect_same_decision(d, memory.consume("u"), where);
      ASSERT_TRUE(d.allowed) << where << " " << d;
      ++card;
      if ((cum + 1) / kTrimEvery != cum / kTrimEvery) {  // this admission trims
        const std::int64_t removed = std::min(dead, kTrimMost);
        dead -= removed;
        card -= removed;
        ++trims;
      }
      ++cum;
      const std::vector<SlidingLogEntry> log = entries(redis, "u");
      ASSERT_EQ(static_cast<std::int64_t>(log.size()), card) << where;
      ASSERT_LE(card, 5001 + kTrimEvery) << where;
      // The oldest entries went first: what is left of the 5,000 is their newest `dead`.
      EXPECT_EQ(log.front().cum, dead > 0 ? 5001 - dead : 5001) << where;
      EXPECT_EQ(d.remaining, 100000 - (cum - 5000)) << where;
    }
    EXPECT_EQ(trims, 5);  // 1,024 x 4, then the last 904
    EXPECT_EQ(calls_of("zremrangebyrank"), 5);
    EXPECT_EQ(calls_of("zremrangebyscore"), 0);
    const Decision p = redis.peek("u", 1);
    expect_same_decision(p, memory.peek("u", 1), "after the trims");
    EXPECT_EQ(p.remaining, 100000 - (cum - 5000));
  });
}

// A limit lowered under a log that holds more than the new limit's entries: the trims remove the
// entries that left 1,024 at a time, and every decision is the one the new limit gives.
TEST_F(SlidingLogTrimTest, ALoweredLimitShrinksTheLogByTrims) {
  each_form([&](SlidingLogMembers form, const redlimit::RateLimiter& limiter) {
    const redlimit::RateLimiter memory_limiter = in_memory_writing(form);
    at(0s);
    const std::vector<redlimit::Request> batch(3000, redlimit::Request{"u", 1});
    for (const Decision& d : limiter.sliding_log("lw", Limit(4000, 10s)).consume_many(batch)) ASSERT_TRUE(d.allowed);
    for (const Decision& d : memory_limiter.sliding_log("lw", Limit(4000, 10s)).consume_many(batch)) {
      ASSERT_TRUE(d.allowed);
    }
    at(5s);  // one live entry: a log whose entries have all left is dropped whole
    ASSERT_TRUE(limiter.sliding_log("lw", Limit(4000, 10s)).consume("u").allowed);
    ASSERT_TRUE(memory_limiter.sliding_log("lw", Limit(4000, 10s)).consume("u").allowed);
    // The same key (its name carries no limit), at a limit of 100: 12 units a trim.
    const auto redis = limiter.sliding_log("lw", Limit(100, 10s));
    const auto memory = memory_limiter.sliding_log("lw", Limit(100, 10s));
    std::int64_t card = 3001;
    for (int i = 0; i < 60; ++i) {
      at(10s + Micros{i * 1000});
      const std::string where = "step " + std::to_string(i);
      const Decision d = redis.consume("u");
      expect_same_decision(d, memory.consume("u"), where);
      ASSERT_TRUE(d.allowed) << where << " " << d;
      const std::int64_t now_card = server().integer({"ZCARD", redis.key_for("u")});
      EXPECT_GE(now_card, card + 1 - kTrimMost) << where << ": a trim removed more than 1,024 entries";
      EXPECT_LE(now_card, card + 1) << where;
      card = now_card;
    }
    EXPECT_EQ(card, 61) << "the 3,000 that left are gone, the live one and the 60 admitted stay";
  });
}

}  // namespace
}  // namespace redlimit_test
