// peek records nothing and answers what consume would; reset forgets; strategy objects outlive
// their limiter; a key of another type under a redlimit name reads as no state.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class StateTest : public StrictRedisTest {};

TEST_F(StateTest, PeekRecordsNothing) {
  at(0s);
  for (const auto& s : all_strategies(rl(), "peek", 4, 1h)) {
    SCOPED_TRACE(s.name);
    for (int i = 0; i < 10; ++i) {
      const Decision d = s.peek("u", 4);
      EXPECT_TRUE(d.allowed) << d;
      EXPECT_EQ(d.remaining, 4) << d;
      EXPECT_EQ(d.reset_after, 0us) << d;
    }
    EXPECT_EQ(dbsize(), 0);
  }
  for (const auto& s : all_strategies(rl(), "peek", 4, 1h)) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.consume("u", 3).remaining, 1);
    const std::string before = server().command({"DUMP", s.key_for("u")}).str;
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(s.peek("u", 1).remaining, 1);  // the current remaining, not after a request
      EXPECT_FALSE(s.peek("u", 2).allowed);
    }
    EXPECT_EQ(server().command({"DUMP", s.key_for("u")}).str, before);
    EXPECT_TRUE(s.consume("u", 1).allowed);
  }
}

TEST_F(StateTest, PeekAnswersWhatConsumeWould) {
  at(0s);
  for (const auto& s : all_strategies(rl(), "agree", 4, 1h)) {
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(s.consume("u", 3).allowed);
    at(100s);
    // Rejected: consume records nothing, so both give the very same answer.
    const Decision p = s.peek("u", 2);
    const Decision c = s.consume("u", 2);
    EXPECT_FALSE(p.allowed) << p;
    expect_same_decision(p, c, "rejected: peek / consume");
    // Admitted: the same verdict, wait and delay; consume then reports one unit less.
    const Decision p1 = s.peek("u", 1);
    const Decision c1 = s.consume("u", 1);
    EXPECT_TRUE(p1.allowed) << p1;
    EXPECT_TRUE(c1.allowed) << c1;
    EXPECT_EQ(p1.retry_after, c1.retry_after);
    EXPECT_EQ(p1.delay, c1.delay);
    EXPECT_EQ(c1.remaining, p1.remaining - 1) << p1 << " then " << c1;
    at(0s);
  }
}

TEST_F(StateTest, ResetForgets) {
  at(0s);
  for (const auto& s : all_strategies(rl(), "reset", 3, 1h)) {
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(s.consume("u", 3).allowed);
    EXPECT_TRUE(s.consume("other", 1).allowed);
    EXPECT_FALSE(s.consume("u", 1).allowed);
    s.reset("u");
    EXPECT_EQ(server().integer({"EXISTS", s.key_for("u")}), 0);
    Decision d = s.peek("u", 1);
    EXPECT_EQ(d.remaining, 3) << d;
    EXPECT_EQ(d.reset_after, 0us) << d;
    d = s.consume("u", 3);
    EXPECT_TRUE(d.allowed) << d;
    // Other subjects keep their state; resetting what is not there is fine.
    EXPECT_EQ(s.peek("other", 1).remaining, 2);
    s.reset("never-seen");
  }
}

TEST_F(StateTest, StrategiesOutliveTheirLimiter) {
  at(0s);
  std::vector<AnyStrategy> strategies;
  {
    auto temporary = redlimit::RateLimiter::connect(server().url(), options());
    strategies = all_strategies(temporary, "outlive", 2, 1h);
  }
  for (const auto& s : strategies) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.consume("u", 1).remaining, 1);
    EXPECT_EQ(s.consume("u", 1).remaining, 0);
    EXPECT_FALSE(s.consume("u", 1).allowed);
  }
}

TEST_F(StateTest, LimitIsReportedInEveryDecision) {
  at(0s);
  for (const auto& s : all_strategies(rl(), "limit", 7, 1h)) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.peek("u", 1).limit, 7);
    EXPECT_EQ(s.consume("u", 7).limit, 7);
    EXPECT_EQ(s.consume("u", 1).limit, 7);
  }
}

// A key of another type under a subject's state key, or its block marker (another program wrote
// there: docs/keys.md, Foreign keys): read as no state and replaced by the next write, alone or in a
// batch; a peek leaves it. Earlier, the sliding log and policies failed with WRONGTYPE, and so
// did every request of a batch that held one.
TEST_F(StateTest, AKeyOfAnotherTypeReadsAsNoStateAndIsReplacedByTheNextWrite) {
  at(0s);
  const auto sw = rl().sliding_window("foreign-marker", Limit(5, 1h));
  auto strategies = all_strategies(rl(), "foreign", 5, 1h);
  strategies.push_back(wrap("policy", 5, rl().policy("foreign.pol", redlimit::parse_limits("5/h; 9/d"))));
  for (const auto& s : strategies) {
    SCOPED_TRACE(s.name);
    const bool string_state = s.name == "token_bucket" || s.name.rfind("leaky", 0) == 0;
    for (const std::string subject : {"a", "b"}) {
      const std::string key = s.key_for(subject);
      if (string_state) {
        server().command({"HSET", key, "field", "value"});
      } else {
        server().command({"SET", key, "not a state"});
      }
      server().command({"PEXPIRE", key, "600000"});
    }
    const std::string foreign_type = string_state ? "hash" : "string";
    EXPECT_EQ(s.peek("a", 1).remaining, 5);
    EXPECT_EQ(server().command({"TYPE", s.key_for("a")}).str, foreign_type) << "a peek leaves it";
    EXPECT_EQ(s.consume("a", 1).remaining, 4);
    const auto batch = s.consume_many({{"c", 1}, {"b", 2}, {"c", 1}});
    EXPECT_EQ(batch[0].remaining, 4);
    EXPECT_EQ(batch[1].remaining, 3);
    EXPECT_EQ(batch[2].remaining, 3);
    for (const std::string subject : {"a", "b"}) {
      EXPECT_NE(server().command({"TYPE", s.key_for(subject)}).str, foreign_type) << subject << " replaced";
    }
  }
  // A block marker of another type: no block, and block() replaces it.
  const std::string marker = sw.block_key_for("m");
  server().command({"HSET", marker, "field", "value"});
  server().command({"PEXPIRE", marker, "600000"});
  EXPECT_TRUE(sw.consume("m", 1).allowed);
  EXPECT_TRUE(sw.consume_many({{"m", 1}})[0].allowed);
  EXPECT_EQ(sw.block("m", 10s).retry_after, 10s);
  EXPECT_FALSE(sw.consume("m", 1).allowed);
}

}  // namespace
}  // namespace redlimit_test
