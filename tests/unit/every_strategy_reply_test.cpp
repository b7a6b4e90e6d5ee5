// Each strategy behind RateLimiter(MockConnection): how its replies become decisions (rejections,
// delays, error and malformed replies, NOSCRIPT, a broken connection), acquire on the limiter's
// clock, a strategy outliving its limiter, and calls from many threads. The same tests for every
// strategy (one Case each: strategy_fixture.hpp); what each one sends is every_strategy_test.cpp's.
#include <atomic>
#include <thread>
#include <vector>

#include "unit/every_strategy_fixture.hpp"

namespace {

// A suite name of its own: gtest refuses one name for two fixture classes, and each file's
// anonymous namespace makes its own.
class EveryStrategyReplyTest : public EveryStrategyTest {};

TEST_P(EveryStrategyReplyTest, RejectedReplyIsDecoded) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(reply(0, 0, 250'000, 1'000'000)));
  const Decision d = s.consume("u", 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, c().limit);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 250ms);
  EXPECT_EQ(d.reset_after, 1s);
}

TEST_P(EveryStrategyReplyTest, DelayIsDecoded) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(reply(1, 3, 0, 2'000'000, 1'500'000)));
  const Decision d = s.consume("u", 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.delay, 1500ms);
}

TEST_P(EveryStrategyReplyTest, ResetErrorReplyThrowsReplyError) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(concat({"UNLINK"}, both_keys(s, "u")))).WillOnce(Return(Reply::make_error("ERR boom")));
  EXPECT_THROW(s.reset("u"), ReplyError);
}

TEST_P(EveryStrategyReplyTest, ErrorReplyThrowsReplyError) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(Reply::make_error("ERR Error running script: @user_script:10: boom")));
  try {
    s.consume("u", 1);
    FAIL() << "did not throw";
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("boom"));
  }
}

TEST_P(EveryStrategyReplyTest, MalformedReplyThrowsReplyError) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(Reply::make_integer(-1)))  // a packed admission is never negative
      .WillOnce(Return(Reply::make_nil()))
      .WillOnce(Return(Reply::make_array({Reply::make_integer(1), Reply::make_integer(2), Reply::make_integer(3)})))
      .WillOnce(Return(reply(3, 0, 0, 0)))
      .WillOnce(Return(reply(1, -2, 0, 0)))
      .WillOnce(Return(policy_reply(1, 0, 0, 0, 2)));  // deciding limit 2 of 1
  for (int i = 0; i < 6; ++i) EXPECT_THROW(s.consume("u", 1), ReplyError) << i;
}

TEST_P(EveryStrategyReplyTest, NoscriptIsFollowedByOneLoadAndTheSameEvalsha) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  const Argv a = args(now(), 2, "1");
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), a))).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(*mock, pipeline(_));  // the SCRIPT LOAD and the call again: one command() each, by default
  EXPECT_CALL(*mock, command(Argv{"SCRIPT", "LOAD", std::string(script().source)}))
      .WillOnce(Return(Reply::make_string(script().sha1)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), a))).WillOnce(Return(reply(1, 4, 0, 9)));
  const Decision d = s.consume("u", 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 4);
  EXPECT_EQ(d.reset_after, 9us);
}

TEST_P(EveryStrategyReplyTest, ConnectionErrorPropagatesAndIsNotRetried) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("connection reset")));
  EXPECT_THROW(s.consume("u", 1), ConnectionError);
}

TEST_P(EveryStrategyReplyTest, AcquireSleepsOnTheLimiterClockUntilAdmitted) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(std::to_string(kStrategyStart), 2, "1"))))
      .WillOnce(Return(reply(0, 1, 300'000, 900'000)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(std::to_string(kStrategyStart + 300'000), 2, "1"))))
      .WillOnce(Return(reply(1, 0, 0, 900'000)));
  const Decision d = s.acquire("u", 2, 1s);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(clock->now(), Micros{kStrategyStart + 300'000});
}

TEST_P(EveryStrategyReplyTest, AcquireGivesUpWhenTheWaitExceedsMaxWait) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1"))))
      .WillOnce(Return(reply(0, 0, 2'000'000, 2'000'000)));
  const Decision d = s.acquire("u", 1, 1s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 2s);
  EXPECT_EQ(clock->now(), Micros{kStrategyStart});  // no point sleeping
}

TEST_P(EveryStrategyReplyTest, AcquireWithZeroMaxWaitIsOneConsume) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1")))).WillOnce(Return(reply(0, 0, 1, 1)));
  EXPECT_FALSE(s.acquire("u", 1, 0us).allowed);
  EXPECT_EQ(clock->now(), Micros{kStrategyStart});
}

TEST_P(EveryStrategyReplyTest, AcquireWithNegativeMaxWaitThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  expect_nothing_sent();
  EXPECT_THROW(s.acquire("u", 1, -1us), InvalidArgument);
}

TEST_P(EveryStrategyReplyTest, StrategyOutlivesTheLimiter) {
  std::optional<Strategy> s;
  {
    const RateLimiter limiter = make_limiter();
    s.emplace(make(limiter));
  }
  EXPECT_CALL(*mock, command(evalsha(script(), keys(*s, "u"), args(now(), 1, "1"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_TRUE(s->consume("u", 1).allowed);
}

TEST_P(EveryStrategyReplyTest, CallsFromManyThreadsAreSerialised) {
  // A script call per consume (the mock answers each with one decision): the limiter's own mutex,
  // not a shared script call, is what keeps them from overlapping here.
  const RateLimiter limiter = make_limiter(TimeSource::client, "redlimit:", /*share=*/false);
  const Strategy s = make(limiter);
  std::atomic<int> in_flight{0};
  std::atomic<int> overlaps{0};
  constexpr int kThreads = 8, kCalls = 25;
  const Reply ok = reply(1, 0, 0, 0);
  EXPECT_CALL(*mock, command(_)).Times(kThreads * kCalls).WillRepeatedly([&](const Argv&) {
    if (in_flight.fetch_add(1) != 0) overlaps.fetch_add(1);
    std::this_thread::sleep_for(20us);
    in_flight.fetch_sub(1);
    return ok;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) s.consume("subject-" + std::to_string(t), 1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(overlaps.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategyReplyTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
