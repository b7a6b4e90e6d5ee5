// Each strategy behind RateLimiter(MockConnection): the exact EVALSHA it sends, how the reply becomes
// a Decision, refund / block / acquire / reset, and invalid input that must throw InvalidArgument
// before anything is sent. The same tests for every strategy (one Case each: strategy_fixture.hpp).
#include "unit/strategy_fixture.hpp"

namespace {

// =================================================================================================
// The contract every strategy shares
// =================================================================================================

class EveryStrategyTest : public StrategyTestBase, public ::testing::TestWithParam<Case> {
 protected:
  const Case& c() const { return GetParam(); }
  const Script& script() const { return c().script(); }
  Strategy make(const RateLimiter& l, std::string resource = "api") const { return c().make(l, std::move(resource)); }
  // A request's KEYS (its state; a sliding log's block marker too), and a subject's every key, as
  // block.lua and reset() name them.
  static Argv keys(const Strategy& s, std::string_view subject) { return redlimit_unit::request_keys(s, subject); }
  static Argv both_keys(const Strategy& s, std::string_view subject) {
    return {s.key_for(subject), s.block_key_for(subject)};
  }
  Argv args(const std::string& now_arg, std::int64_t cost, const char* mode) const {
    return call_args(now_arg, cost, mode, c().params);
  }
  Reply reply(std::int64_t allowed, std::int64_t remaining, std::int64_t retry_us, std::int64_t reset_us,
              std::int64_t delay_us = 0) const {
    Reply r = decision_reply(allowed, remaining, retry_us, reset_us, delay_us);
    if (c().policy_reply) {  // the deciding limit, then its own remaining and reset
      for (const std::int64_t v : {std::int64_t{1}, remaining, reset_us}) r.elements.push_back(Reply::make_integer(v));
    }
    return r;
  }
};

TEST_P(EveryStrategyTest, ConsumeSendsOneEvalshaWithTheDocumentedArgv) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(std::to_string(kStart), 1, "1"))))
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
    // The state key; the sliding log's block marker too (its sorted set cannot hold a block).
    const std::size_t nkeys = redlimit::detail::scripts::keys_per_request(script());
    EXPECT_EQ(nkeys, s.key_for("u").substr(s.key_for("u").size() - 3) == ":sl" ? 2u : 1u);
    EXPECT_EQ(argv.size(), 3 + nkeys + 2);  // now, and the head: mode, cost, the parameters
    EXPECT_EQ(argv.at(0), "EVALSHA");
    EXPECT_EQ(argv.at(1), script().sha1);
    EXPECT_EQ(argv.at(1), redlimit::detail::sha1_hex(script().source));
    EXPECT_EQ(argv.at(2), std::to_string(nkeys));
    EXPECT_EQ(argv.at(3), s.key_for("u"));
    if (nkeys == 2) EXPECT_EQ(argv.at(4), s.block_key_for("u"));
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

// block.lua's kind, its second parameter: where the strategy's state holds the block. "1" a string state, "2" a
// hash (sliding windows and policies), "0" nowhere (the sliding log reads the marker).
std::string holds_block(const Case& c) {
  const std::string kind = c.kind;
  if (kind == "fw" || kind == "tb" || kind == "lb") return "1";
  return kind == "sl" ? "0" : "2";
}

TEST_P(EveryStrategyTest, BlockRunsTheBlockScriptWithMode3AndTheDuration) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock,
              command(evalsha(scripts::block(), both_keys(s, "user-42"), {now(), "3 1 90000000 " + holds_block(c())})))
      .WillOnce(Return(decision_reply(0, 0, 90'000'000, 90'000'000, 0)));
  const Decision d = s.block("user-42", 90s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 90s);
  EXPECT_EQ(d.reset_after, 90s);
  EXPECT_EQ(d.limit, c().limit);
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

TEST_P(EveryStrategyTest, RejectedReplyIsDecoded) {
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

TEST_P(EveryStrategyTest, DelayIsDecoded) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(reply(1, 3, 0, 2'000'000, 1'500'000)));
  const Decision d = s.consume("u", 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.delay, 1500ms);
}

TEST_P(EveryStrategyTest, ResetSendsOneDelOfTheSubjectsKeys) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(concat({"DEL"}, both_keys(s, "user-42")))).WillOnce(Return(Reply::make_integer(1)));
  s.reset("user-42");
}

TEST_P(EveryStrategyTest, ResetOfAnUnknownSubjectIsFine) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(concat({"DEL"}, both_keys(s, "nobody")))).WillOnce(Return(Reply::make_integer(0)));
  EXPECT_NO_THROW(s.reset("nobody"));
}

TEST_P(EveryStrategyTest, ResetErrorReplyThrowsReplyError) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(concat({"DEL"}, both_keys(s, "u")))).WillOnce(Return(Reply::make_error("ERR boom")));
  EXPECT_THROW(s.reset("u"), ReplyError);
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

TEST_P(EveryStrategyTest, ErrorReplyThrowsReplyError) {
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

TEST_P(EveryStrategyTest, MalformedReplyThrowsReplyError) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(Reply::make_integer(1)))
      .WillOnce(Return(Reply::make_nil()))
      .WillOnce(Return(Reply::make_array({Reply::make_integer(1), Reply::make_integer(2), Reply::make_integer(3)})))
      .WillOnce(Return(reply(3, 0, 0, 0)))
      .WillOnce(Return(reply(1, -2, 0, 0)))
      .WillOnce(Return(policy_reply(1, 0, 0, 0, 2)));  // deciding limit 2 of 1
  for (int i = 0; i < 6; ++i) EXPECT_THROW(s.consume("u", 1), ReplyError) << i;
}

TEST_P(EveryStrategyTest, NoscriptIsFollowedByOneEvalWithTheSameArguments) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  const Argv a = args(now(), 2, "1");
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), a))).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(*mock, command(eval(script(), keys(s, "u"), a))).WillOnce(Return(reply(1, 4, 0, 9)));
  const Decision d = s.consume("u", 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 4);
  EXPECT_EQ(d.reset_after, 9us);
}

TEST_P(EveryStrategyTest, ConnectionErrorPropagatesAndIsNotRetried) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("connection reset")));
  EXPECT_THROW(s.consume("u", 1), ConnectionError);
}

TEST_P(EveryStrategyTest, AcquireSleepsOnTheLimiterClockUntilAdmitted) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(std::to_string(kStart), 2, "1"))))
      .WillOnce(Return(reply(0, 1, 300'000, 900'000)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(std::to_string(kStart + 300'000), 2, "1"))))
      .WillOnce(Return(reply(1, 0, 0, 900'000)));
  const Decision d = s.acquire("u", 2, 1s);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(clock->now(), Micros{kStart + 300'000});
}

TEST_P(EveryStrategyTest, AcquireGivesUpWhenTheWaitExceedsMaxWait) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1"))))
      .WillOnce(Return(reply(0, 0, 2'000'000, 2'000'000)));
  const Decision d = s.acquire("u", 1, 1s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 2s);
  EXPECT_EQ(clock->now(), Micros{kStart});  // no point sleeping
}

TEST_P(EveryStrategyTest, AcquireWithZeroMaxWaitIsOneConsume) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1"))))
      .WillOnce(Return(reply(0, 0, 1, 1)));
  EXPECT_FALSE(s.acquire("u", 1, 0us).allowed);
  EXPECT_EQ(clock->now(), Micros{kStart});
}

TEST_P(EveryStrategyTest, AcquireWithNegativeMaxWaitThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  expect_nothing_sent();
  EXPECT_THROW(s.acquire("u", 1, -1us), InvalidArgument);
}

TEST_P(EveryStrategyTest, StrategyOutlivesTheLimiter) {
  std::optional<Strategy> s;
  {
    const RateLimiter limiter = make_limiter();
    s.emplace(make(limiter));
  }
  EXPECT_CALL(*mock, command(evalsha(script(), keys(*s, "u"), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_TRUE(s->consume("u", 1).allowed);
}

TEST_P(EveryStrategyTest, CallsFromManyThreadsAreSerialised) {
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

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategyTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
