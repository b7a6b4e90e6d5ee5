// Shadow mode, the built-in counters and the metrics sink, behind a MockConnection.
#include "unit/resilience_fixture.hpp"

namespace {

// ---- shadow mode -----------------------------------------------------------------------------------

TEST_F(ResilienceTest, ShadowModeAdmitsButReportsTheRejection) {
  Options o = options(OnFailure::raise);
  o.shadow = true;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(decision_reply(0, 0, 400'000, 400'000)))
      .WillOnce(Return(decision_reply(1, 3, 0, 400'000)));
  Decision d = fw.consume("u", 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_TRUE(d.shadow_rejected);
  EXPECT_EQ(d.remaining, 0);
  d = fw.consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_FALSE(d.shadow_rejected);
  const Counters c = limiter.counters();
  EXPECT_EQ(c.decisions, 2u);
  EXPECT_EQ(c.allowed, 2u);
  EXPECT_EQ(c.rejected, 0u);
  EXPECT_EQ(c.shadow_rejected, 1u);
}

TEST_F(ResilienceTest, ShadowModeStillSendsTheRealConsume) {
  Options o = options(OnFailure::raise);
  o.shadow = true;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  // "decide and record as usual": mode "1", not a peek.
  EXPECT_CALL(*mock, command(_)).WillOnce([](const Argv& argv) {
    EXPECT_EQ(argv.at(0), "EVALSHA");
    EXPECT_EQ(argv.at(5).substr(0, 2), "1 ");  // EVALSHA sha 1 key now "<mode> <cost> ..."
    return decision_reply(0, 0, 1, 1);
  });
  EXPECT_TRUE(fw.consume("u").shadow_rejected);
}

// ---- counters -----------------------------------------------------------------------------------

TEST_F(ResilienceTest, CountersCountConsumesOnly) {
  const RateLimiter limiter(mock, options(OnFailure::raise));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  const auto tb = limiter.token_bucket("other", 5, 1, 1s);
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(decision_reply(1, 4, 0, 1)))                  // consume: allowed
      .WillOnce(Return(decision_reply(0, 0, 5, 5)))                  // consume: rejected
      .WillOnce(Return(decision_reply(0, 0, 5, 5)))                  // peek
      .WillOnce(Return(decision_reply(1, 5, 0, 0)))                  // refund
      .WillOnce(Return(decision_reply(0, 0, 1'000'000, 1'000'000)))  // block
      .WillOnce(Return(decision_reply(0, 0, 1'000'000, 1'000'000)))  // block()'s peek: not counted
      .WillOnce(Return(Reply::make_integer(2)))                      // reset
      .WillOnce(Return(decision_reply(1, 4, 0, 1)));                 // another strategy's consume
  fw.consume("u");
  fw.consume("u");
  fw.peek("u");
  fw.refund("u");
  fw.block("u", 1s);
  fw.reset("u");
  tb.consume("u");
  const Counters c = limiter.counters();
  EXPECT_EQ(c.decisions, 3u);
  EXPECT_EQ(c.allowed, 2u);
  EXPECT_EQ(c.rejected, 1u);
  EXPECT_EQ(c.errors, 0u);
  EXPECT_EQ(c.shadow_rejected, 0u);
  EXPECT_EQ(c.from_failure_policy, 0u);
  EXPECT_EQ(c.from_fallback, 0u);
  EXPECT_EQ(c.breaker_short_circuits, 0u);
  EXPECT_EQ(c.local_cache_hits, 0u);
}

TEST_F(ResilienceTest, FreshLimiterHasZeroCounters) {
  const RateLimiter limiter(mock, options(OnFailure::raise));
  const Counters c = limiter.counters();
  EXPECT_EQ(c.decisions + c.allowed + c.rejected + c.errors + c.shadow_rejected + c.from_failure_policy +
                c.from_fallback + c.breaker_short_circuits + c.local_cache_hits,
            0u);
}

// ---- metrics sink --------------------------------------------------------------------------------

TEST_F(ResilienceTest, MetricsSinkSeesEveryCall) {
  auto sink = std::make_shared<RecordingSink>();
  Options o = options(OnFailure::raise);
  o.metrics = sink;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(decision_reply(1, 4, 0, 1)))
      .WillOnce(Return(decision_reply(1, 4, 0, 1)))
      .WillOnce(Return(decision_reply(1, 5, 0, 0)))
      .WillOnce(Return(decision_reply(0, 0, 1'000'000, 1'000'000)))
      .WillOnce(Return(decision_reply(0, 0, 1'000'000, 1'000'000)))  // block()'s peek: not reported
      .WillOnce(Return(Reply::make_integer(1)))
      .WillOnce(Return(decision_reply(1, 0, 0, 0)))  // unblock: a block was in force
      .WillOnce(Throw(ConnectionError("broken pipe")));
  fw.consume("u");
  fw.peek("u");
  fw.refund("u");
  fw.block("u", 1s);
  fw.reset("u");
  EXPECT_TRUE(fw.unblock("u"));
  EXPECT_THROW(fw.consume("u"), ConnectionError);

  ASSERT_EQ(sink->events.size(), 7u);
  const Operation ops[] = {Operation::consume, Operation::peek,  Operation::refund, Operation::block,
                           Operation::reset,   Operation::unblock, Operation::consume};
  for (std::size_t i = 0; i < 7; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(sink->events[i].resource, "api");
    EXPECT_EQ(sink->events[i].operation, ops[i]);
    EXPECT_GE(sink->events[i].latency.count(), 0);
  }
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(sink->events[i].has_decision) << i;
    EXPECT_TRUE(sink->events[i].error.empty()) << i;
  }
  EXPECT_TRUE(sink->events[0].decision.allowed);
  EXPECT_EQ(sink->events[0].decision.remaining, 4);
  EXPECT_FALSE(sink->events[3].decision.allowed);
  EXPECT_TRUE(sink->events[4].error.empty());  // reset: no decision, no error
  EXPECT_FALSE(sink->events[5].has_decision);   // unblock: neither
  EXPECT_TRUE(sink->events[5].error.empty());
  EXPECT_FALSE(sink->events[6].has_decision);
  EXPECT_THAT(sink->events[6].error, ::testing::HasSubstr("broken pipe"));
}

TEST_F(ResilienceTest, MetricsSinkSeesFailurePolicyDecisions) {
  auto sink = std::make_shared<RecordingSink>();
  Options o = options(OnFailure::fail_open);
  o.metrics = sink;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("refused")));
  fw.consume("u");
  ASSERT_EQ(sink->events.size(), 1u);
  ASSERT_TRUE(sink->events[0].has_decision);
  EXPECT_EQ(sink->events[0].decision.source, Source::failure_policy);
  EXPECT_TRUE(sink->events[0].decision.allowed);
}

TEST_F(ResilienceTest, InvalidInputReachesNeitherRedisNorTheCounters) {
  auto sink = std::make_shared<RecordingSink>();
  Options o = options(OnFailure::fail_open);
  o.metrics = sink;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).Times(0);
  EXPECT_THROW(fw.consume("u", 6), InvalidArgument);
  EXPECT_THROW(fw.consume("", 1), InvalidArgument);
  EXPECT_EQ(limiter.counters().decisions, 0u);
  EXPECT_EQ(limiter.counters().errors, 0u);
}


}  // namespace
