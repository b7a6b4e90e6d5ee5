// peek records nothing and answers what consume would; reset forgets; strategy objects outlive
// their limiter.
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
    EXPECT_EQ(p.allowed, c.allowed);
    EXPECT_EQ(p.limit, c.limit);
    EXPECT_EQ(p.remaining, c.remaining);
    EXPECT_EQ(p.retry_after, c.retry_after);
    EXPECT_EQ(p.reset_after, c.reset_after);
    EXPECT_EQ(p.delay, c.delay);
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

}  // namespace
}  // namespace redlimit_test
