// Each strategy behind RateLimiter(MockConnection): the exact EVALSHA it sends for consume, peek,
// refund, block and reset, its keys, its clock, and invalid input that must throw InvalidArgument
// before anything is sent. The same tests for every strategy (one Case each: strategy_fixture.hpp);
// how the replies become decisions is every_strategy_reply_test.cpp's.
#include "unit/every_strategy_fixture.hpp"

namespace {

TEST_P(EveryStrategyTest, ConsumeSendsOneEvalshaWithTheDocumentedArgv) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(std::to_string(kStrategyStart), 1, "1"))))
      .WillOnce(Return(reply(1, c().limit - 1, 0, 5'000'000)));
  const Decision d = s.consume("user-42", 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, c().limit);
  EXPECT_EQ(d.remaining, c().limit - 1);
  EXPECT_EQ(d.retry_after, 0us);
  EXPECT_EQ(d.reset_after, 5s);
  EXPECT_EQ(d.delay, 0us);
  EXPECT_EQ(d.limit_index, 0u);
  EXPECT_EQ(d.source, redlimit::Source::primary);
  EXPECT_FALSE(d.shadow_rejected);
}

TEST_P(EveryStrategyTest, CommandShapeAndScriptSha) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce([&](const Argv& argv) {
    // The state key alone: every strategy's state holds its block.
    const std::size_t nkeys = redlimit::detail::scripts::keys_per_request(script());
    EXPECT_EQ(nkeys, 1u);
    EXPECT_EQ(argv.size(), 3 + nkeys + 2);  // now, and the head: mode, cost, the parameters
    EXPECT_EQ(argv.at(0), "EVALSHA");
    EXPECT_EQ(argv.at(1), script().sha1);
    EXPECT_EQ(argv.at(1), redlimit::detail::sha1_hex(script().source));
    EXPECT_EQ(argv.at(2), std::to_string(nkeys));
    EXPECT_EQ(argv.at(3), s.key_for("u"));
    return reply(1, 0, 0, 0);
  });
  s.consume("u", 1);
}

TEST_P(EveryStrategyTest, CostIsPassedInTheHead) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(now(), 3, "1"))))
      .WillOnce(Return(reply(1, c().limit - 3, 0, 1000)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(now(), c().limit, "1"))))
      .WillOnce(Return(reply(0, c().limit - 3, 700, 1000)));
  EXPECT_EQ(s.consume("user-42", 3).remaining, c().limit - 3);
  // cost == limit is the largest valid cost.
  const Decision d = s.consume("user-42", c().limit);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 700us);
}

TEST_P(EveryStrategyTest, DefaultCostIsOne) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "0")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "2")))).WillOnce(Return(reply(1, 0, 0, 0)));
  s.consume("u");
  s.peek("u");
  s.refund("u");
}

TEST_P(EveryStrategyTest, PeekSendsMode0) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(now(), 2, "0"))))
      .WillOnce(Return(reply(1, 5, 0, 0)));
  const Decision d = s.peek("user-42", 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 5);
  EXPECT_EQ(d.limit, c().limit);
}

TEST_P(EveryStrategyTest, RefundSendsMode2) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(now(), 2, "2"))))
      .WillOnce(Return(reply(1, c().limit, 0, 0)));
  const Decision d = s.refund("user-42", 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, c().limit);
  EXPECT_EQ(d.limit, c().limit);
}

// block.lua's kind, its second parameter: where the strategy's state holds the block. "1" a string
// state (the buckets), "2" a policy's hash (sliding windows and policies), "3" a fixed window's
// hash, "4" a sliding log's sorted set.
std::string holds_block(const Case& c) {
  const std::string kind = c.kind;
  if (kind == "tb" || kind == "lb") return "1";
  if (kind == "fw") return "3";
  return kind == "sl" ? "4" : "2";
}

TEST_P(EveryStrategyTest, BlockRunsTheBlockScriptWithMode3AndTheDuration) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock,
              command(evalsha(scripts::block(), both_keys(s, "user-42"), {now(), "3 1 90000000 " + holds_block(c())})))
      .WillOnce(Return(decision_reply(0, 0, 90'000'000, 90'000'000, 0)));
  // Then a peek under the block: the state's own reset_after, later than the block's end.
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(now(), 1, "0"))))
      .WillOnce(Return(reply(0, 0, 90'000'000, 120'000'000)));
  const Decision d = s.block("user-42", 90s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 90s);
  EXPECT_EQ(d.reset_after, 120s);
  EXPECT_EQ(d.limit, c().limit);
}

// A peek that fails after the block leaves the block's own decision: the block is in force.
TEST_P(EveryStrategyTest, BlockKeepsItsOwnDecisionWhenThePeekAfterItFails) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(scripts::block(), both_keys(s, "u"), {now(), "3 1 90000000 " + holds_block(c())})))
      .WillOnce(Return(decision_reply(0, 0, 90'000'000, 90'000'000, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "0"))))
      .WillOnce(Throw(redlimit::ConnectionError("connection: broken pipe")));
  const Decision d = s.block("u", 90s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 90s);
  EXPECT_EQ(d.reset_after, 90s);
  for (const auto& l : d.limits) EXPECT_EQ(l.reset_after, 90s);  // a sliding window's one limit
  EXPECT_EQ(limiter.counters().errors, 0u) << "block() did not throw: the peek is not counted";
}

TEST_P(EveryStrategyTest, NonPositiveBlockDurationThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  expect_nothing_sent();
  EXPECT_THROW(s.block("u", 0us), InvalidArgument);
  EXPECT_THROW(s.block("u", -1s), InvalidArgument);
  EXPECT_THROW(s.block("", 1s), InvalidArgument);
}

TEST_P(EveryStrategyTest, NowIsTheManualClocksMicroseconds) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("1700000000123456", 1, "1"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("1700000001623457", 1, "1"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("1800000000000000", 1, "0"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  s.consume("u", 1);
  clock->advance(1'500'001us);
  s.consume("u", 1);
  clock->set(Micros{1'800'000'000'000'000});
  s.peek("u", 1);
}

TEST_P(EveryStrategyTest, RedisTimeSourceSendsRedis) {
  const RateLimiter limiter = make_limiter(TimeSource::redis);
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("redis", 1, "1"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("redis", 1, "0"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("redis", 1, "2"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock,
              command(evalsha(scripts::block(), both_keys(s, "u"), {"redis", "3 1 1000000 " + holds_block(c())})))
      .WillOnce(Return(decision_reply(0, 0, 1'000'000, 1'000'000, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("redis", 1, "0"))))  // block()'s peek
      .WillOnce(Return(reply(0, 0, 1'000'000, 1'000'000)));
  clock->advance(10s);  // irrelevant with TimeSource::redis
  s.consume("u", 1);
  s.peek("u", 1);
  s.refund("u", 1);
  s.block("u", 1s);
}

TEST_P(EveryStrategyTest, KeysFollowTheDocumentedLayout) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_EQ(s.resource(), "api");
  EXPECT_EQ(s.key_for("user-42"), "redlimit:{api|user-42}:" + std::string(c().kind));
  EXPECT_EQ(s.key_for("a:b}c"), redlimit::detail::make_key("redlimit:", "api", "a:b}c", c().kind));
  // The block marker is another key in the same hash slot.
  EXPECT_NE(s.block_key_for("user-42"), s.key_for("user-42"));
  EXPECT_EQ(redlimit::detail::key_slot(s.block_key_for("user-42")), redlimit::detail::key_slot(s.key_for("user-42")));
  EXPECT_NE(s.block_key_for("user-42"), s.block_key_for("user-43"));
  EXPECT_EQ(s.block_key_for("user-42").rfind("redlimit:{api|user-42}", 0), 0u) << s.block_key_for("user-42");
}

TEST_P(EveryStrategyTest, CustomPrefix) {
  const RateLimiter limiter = make_limiter(TimeSource::client, "myapp:rl:");
  const Strategy s = make(limiter);
  EXPECT_EQ(s.key_for("u"), "myapp:rl:{api|u}:" + std::string(c().kind));
  EXPECT_EQ(s.block_key_for("u").rfind("myapp:rl:{api|u}", 0), 0u);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  s.consume("u", 1);
}

TEST_P(EveryStrategyTest, AnySubjectBytesGoIntoOneHashTag) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  const std::string subject = "a{b}c:d|e%f\0g\xff"s;
  for (const std::string& key : both_keys(s, subject)) {
    EXPECT_EQ(std::count(key.begin(), key.end(), '{'), 1) << key;
    EXPECT_EQ(std::count(key.begin(), key.end(), '}'), 1) << key;
  }
  EXPECT_NE(s.key_for(subject), s.key_for("a{b}c:d|e%f"));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, subject), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  s.consume(subject, 1);
}

TEST_P(EveryStrategyTest, SubjectOf1024BytesIsAccepted) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  const std::string subject(1024, 's');
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, subject), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_TRUE(s.consume(subject, 1).allowed);
}

TEST_P(EveryStrategyTest, ResetSendsOneDelOfTheSubjectsKeys) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(concat({"UNLINK"}, both_keys(s, "user-42")))).WillOnce(Return(Reply::make_integer(1)));
  s.reset("user-42");
}

TEST_P(EveryStrategyTest, ResetOfAnUnknownSubjectIsFine) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(concat({"UNLINK"}, both_keys(s, "nobody")))).WillOnce(Return(Reply::make_integer(0)));
  EXPECT_NO_THROW(s.reset("nobody"));
}

TEST_P(EveryStrategyTest, InvalidCostThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  expect_nothing_sent();
  for (const std::int64_t cost : {std::int64_t{0}, std::int64_t{-1}, c().limit + 1, INT64_MIN, INT64_MAX}) {
    SCOPED_TRACE(cost);
    EXPECT_THROW(s.consume("u", cost), InvalidArgument);
    EXPECT_THROW(s.peek("u", cost), InvalidArgument);
    EXPECT_THROW(s.refund("u", cost), InvalidArgument);
    EXPECT_THROW(s.acquire("u", cost, 1s), InvalidArgument);
  }
}

TEST_P(EveryStrategyTest, InvalidSubjectThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  expect_nothing_sent();
  for (const std::string& subject : {""s, std::string(1025, 's'), std::string(4096, '\0')}) {
    SCOPED_TRACE(subject.size());
    EXPECT_THROW(s.consume(subject, 1), InvalidArgument);
    EXPECT_THROW(s.peek(subject, 1), InvalidArgument);
    EXPECT_THROW(s.refund(subject, 1), InvalidArgument);
    EXPECT_THROW(s.block(subject, 1s), InvalidArgument);
    EXPECT_THROW(s.acquire(subject, 1, 1s), InvalidArgument);
    EXPECT_THROW(s.reset(subject), InvalidArgument);
    EXPECT_THROW(s.key_for(subject), InvalidArgument);
    EXPECT_THROW(s.block_key_for(subject), InvalidArgument);
  }
}

TEST_P(EveryStrategyTest, InvalidResourceThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(make(limiter, ""), InvalidArgument);
  EXPECT_THROW(make(limiter, std::string(redlimit::detail::kMaxResourceBytes + 1, 'r')), InvalidArgument);
  EXPECT_NO_THROW(make(limiter, std::string(redlimit::detail::kMaxResourceBytes, 'r')));
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategyTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
