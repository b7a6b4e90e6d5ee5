// A sliding log's refund (lua/sliding_log.lua, give_back) gives back the newest units: whole entries
// from the newest, the last one shortened. A few entries are popped one by one; past that the cut
// is found by rank and what lies above it removed in one command, and a refund of every live unit
// drops the log. Each test runs with both entry forms (Options::sliding_log_members).
#include <string>
#include <vector>

#include "sliding_log_fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::SlidingLogMembers;

using SlidingLogRefundTest = SlidingLogFixture;

// The expected log: each refund takes the newest units off a model of the entries, which the log
// in Redis, the memory backend's decisions and both backends' peeks must match, refunds of one entry
// and of many alike: past the pops, the cut in an entry and on a boundary between two, the entries
// above it removed (more stay than leave) or the log rebuilt from those that stay (16 times fewer
// stay than leave: cut_above).
TEST_F(SlidingLogRefundTest, ARefundOfManyEntriesTakesTheNewestUnits) {
  each_form([&](SlidingLogMembers form, const redlimit::RateLimiter& limiter) {
    const redlimit::RateLimiter memory_limiter = in_memory_writing(form);
    const auto memory = memory_limiter.sliding_log("rf", Limit(1000, 1h));
    const auto redis = limiter.sliding_log("rf", Limit(1000, 1h));
    std::vector<SlidingLogEntry> model;
    std::int64_t used = 0;
    for (std::int64_t i = 0; i < 120; ++i) {
      at(Micros{i * 1000});
      const std::int64_t cost = 1 + i % 3;
      expect_same_decision(redis.consume("u", cost), memory.consume("u", cost), "consume");
      used += cost;
      const std::int64_t t = (kT0 + Micros{i * 1000}).count();
      model.push_back({used, cost, t, form == SlidingLogMembers::compact, t});
    }
    at(1s);
    // The units of the newest n entries of the model as it is now.
    auto newest_units = [&model](std::size_t n) {
      std::int64_t u = 0;
      for (std::size_t i = model.size() - n; i < model.size(); ++i) u += model[i].cost;
      return u;
    };
    auto refund = [&](std::int64_t back) {
      const std::string where =
          "refund of " + std::to_string(back) + " with " + std::to_string(model.size()) + " entries";
      expect_same_decision(redis.refund("u", back), memory.refund("u", back), where);
      for (std::int64_t left = back; left > 0;) {  // the model: whole entries, the last shortened
        SlidingLogEntry& e = model.back();
        if (e.cost > left) {
          e.cum -= left;
          e.cost -= left;
          left = 0;
        } else {
          left -= e.cost;
          model.pop_back();
        }
      }
      used -= back;
      const std::vector<SlidingLogEntry> log = entries(redis, "u");
      ASSERT_EQ(log.size(), model.size()) << where;
      for (std::size_t i = 0; i < log.size(); ++i) {
        EXPECT_EQ(log[i].cum, model[i].cum) << where << ", rank " << i;
        EXPECT_EQ(log[i].cost, model[i].cost) << where << ", rank " << i;
        EXPECT_EQ(log[i].score, model[i].score) << where << ", rank " << i;
        EXPECT_EQ(log[i].compact, model[i].compact) << where << ", rank " << i;
      }
      EXPECT_GT(server().integer({"PTTL", redis.key_for("u")}), 0) << where;
      const Decision d = redis.peek("u", 1);
      expect_same_decision(d, memory.peek("u", 1), where + ", peek");
      EXPECT_EQ(d.remaining, 1000 - used) << where;
    };
    refund(1);
    refund(2);
    refund(newest_units(12));      // 12 entries of 119: removed
    refund(newest_units(10) + 1);  // into the 11th: removed, that one shortened
    refund(3);
    ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).type, redlimit::Reply::Type::status);
    refund(newest_units(model.size() - 5) + 1);  // all but 5, the 5th shortened: rebuilt
    ASSERT_EQ(model.size(), 5U);
    EXPECT_EQ(calls_of("unlink"), 1);  // (the memory backend's calls are not Redis's)
    EXPECT_EQ(calls_of("zremrangebyrank"), 0);
    refund(newest_units(2));  // on a boundary, 3 of 5 stay: popped
    // Every live unit back: the log is dropped, and the subject has its whole limit.
    expect_same_decision(redis.refund("u", used), memory.refund("u", used), "the rest");
    EXPECT_EQ(server().integer({"EXISTS", redis.key_for("u")}), 0);
    const Decision full = redis.peek("u", 1000);
    expect_same_decision(full, memory.peek("u", 1000), "after the rest");
    EXPECT_TRUE(full.allowed) << full;
  });
}

// A refund of nearly all of 10,000 entries of cost 1 makes a few commands, not one per entry (which
// held Redis for 2.5 s at a million): the pops, then a rebuild from the 10 that stay (cut_above: a
// ZREMRANGEBYRANK of 999,990 of a million held Redis for 287-326 ms). A refund of 3,000 removes them
// with one ZREMRANGEBYRANK: a rebuild would send the 7,000 that stay through Lua.
TEST_F(SlidingLogRefundTest, ARefundOfThousandsOfEntriesIsAFewCommands) {
  each_form([&](SlidingLogMembers, const redlimit::RateLimiter& limiter) {
    const auto sl = limiter.sliding_log("rf", Limit(20000, 1h));
    auto fill = [&](const std::string& subject) {
      at(0s);
      std::vector<redlimit::Request> batch(10000, redlimit::Request{subject, 1});
      for (const Decision& d : sl.consume_many(batch)) ASSERT_TRUE(d.allowed) << d;
      at(1s);
    };
    fill("u");
    ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).type, redlimit::Reply::Type::status);
    const Decision d = sl.refund("u", 9990);
    EXPECT_EQ(d.remaining, 20000 - 10) << d;
    EXPECT_LE(calls_of("zpopmax"), 8);
    EXPECT_EQ(calls_of("zremrangebyrank"), 0);
    EXPECT_EQ(calls_of("unlink"), 1);
    EXPECT_EQ(calls_of("zadd"), 1);
    EXPECT_EQ(server().integer({"ZCARD", sl.key_for("u")}), 10);
    EXPECT_GT(server().integer({"PTTL", sl.key_for("u")}), 0);
    EXPECT_EQ(sl.peek("u").remaining, 20000 - 10);
    const std::vector<SlidingLogEntry> log = entries(sl, "u");
    for (std::size_t i = 0; i < log.size(); ++i) EXPECT_EQ(log[i].cum, static_cast<std::int64_t>(i + 1)) << i;

    fill("v");
    ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).type, redlimit::Reply::Type::status);
    EXPECT_EQ(sl.refund("v", 3000).remaining, 20000 - 7000);
    EXPECT_EQ(calls_of("zremrangebyrank"), 1);
    EXPECT_EQ(calls_of("unlink"), 0);
    EXPECT_EQ(server().integer({"ZCARD", sl.key_for("v")}), 7000);
    EXPECT_EQ(sl.peek("v").remaining, 20000 - 7000);
  });
}

}  // namespace
}  // namespace redlimit_test
