// The circuit breaker: opens after consecutive failures, short-circuits to the failure policy, lets one
// probe through after the cooldown; behind a MockConnection and a ManualClock.
#include "unit/resilience_fixture.hpp"

namespace {

// ---- circuit breaker -----------------------------------------------------------------------------

TEST_F(ResilienceTest, BreakerOpensAfterThresholdFailuresAndProbesAfterCooldown) {
  Options o = options(OnFailure::fail_closed, 3);
  o.breaker_cooldown = 1000ms;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).Times(3).WillRepeatedly(Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Return(decision_reply(1, 4, 0, 1'000'000)));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fw.consume("u").source, Source::failure_policy);
  // Open: nothing is sent.
  Decision d = fw.consume("u");
  EXPECT_EQ(d.source, Source::failure_policy);
  EXPECT_FALSE(d.allowed);
  clock->advance(999ms);
  EXPECT_EQ(fw.consume("u").source, Source::failure_policy);
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 2u);
  // Cooldown over: one probe goes to Redis, succeeds, and closes the breaker.
  clock->advance(1ms);
  d = fw.consume("u");
  EXPECT_EQ(d.source, Source::primary);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(fw.consume("u").source, Source::primary);
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 2u);
  EXPECT_EQ(limiter.counters().errors, 3u);
}

TEST_F(ResilienceTest, FailedProbeReopensTheBreaker) {
  Options o = options(OnFailure::fail_open, 2);
  o.breaker_cooldown = 500ms;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).Times(3).WillRepeatedly(Throw(ConnectionError("refused")));  // 2 + probe
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 4, 0, 1'000'000)));
  }
  fw.consume("u");
  fw.consume("u");
  fw.consume("u");  // short-circuited
  clock->advance(500ms);
  fw.consume("u");  // the probe fails
  fw.consume("u");  // open again: short-circuited
  clock->advance(499ms);
  fw.consume("u");  // still open
  clock->advance(1ms);
  EXPECT_EQ(fw.consume("u").source, Source::primary);  // the next probe succeeds
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 3u);
}

// Issue 17, item 1: a probe answered by an error reply used to leave the breaker half-open with no
// probe in flight, so every later call was short-circuited forever. Every way out of a probe now
// settles it: an outage reply (max clients) reopens it, a usage error (WRONGTYPE, thrown) closes it
// (the server answered), and the next call after either reaches Redis again.
TEST_F(ResilienceTest, EveryWayOutOfAProbeSettlesTheBreaker) {
  Options o = options(OnFailure::fail_open, 2);
  o.breaker_cooldown = 500ms;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(Reply::make_error("ERR max number of clients reached")));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(Reply::make_error("WRONGTYPE Operation against a key")));
    EXPECT_CALL(*mock, command(_)).Times(3).WillRepeatedly(Return(decision_reply(1, 4, 0, 1'000'000)));
  }
  fw.consume("u");
  fw.consume("u");  // two failures: open
  EXPECT_EQ(fw.consume("u").source, Source::failure_policy);  // short-circuited
  clock->advance(500ms);
  const Decision refused = fw.consume("u");  // the probe: an outage reply, answered by the policy
  EXPECT_EQ(refused.source, Source::failure_policy);
  EXPECT_TRUE(refused.allowed);
  EXPECT_EQ(fw.consume("u").source, Source::failure_policy);  // reopened: short-circuited
  clock->advance(500ms);
  EXPECT_THROW(fw.consume("u"), ReplyError);  // the probe: a usage error, thrown (the server is up)
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fw.consume("u").source, Source::primary);  // closed
  const Counters c = limiter.counters();
  EXPECT_EQ(c.breaker_short_circuits, 2u);
  EXPECT_EQ(c.errors, 4u);  // two refused, the outage reply, the usage error
}

TEST_F(ResilienceTest, WhileTheProbeIsInFlightOtherCallsStillShortCircuit) {
  Options o = options(OnFailure::fail_open, 1);
  o.breaker_cooldown = 100ms;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  std::promise<void> probe_entered, release_probe;
  std::shared_future<void> released = release_probe.get_future().share();
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).WillOnce([&](const Argv&) {
      probe_entered.set_value();
      released.wait();
      return decision_reply(1, 4, 0, 1);
    });
  }
  fw.consume("u");  // opens the breaker
  clock->advance(100ms);
  std::thread probe([&] { EXPECT_EQ(fw.consume("u").source, Source::primary); });
  probe_entered.get_future().wait();
  // The breaker is half-open and its one probe is out: this call must not touch Redis (nor wait for it).
  EXPECT_EQ(fw.consume("v").source, Source::failure_policy);
  release_probe.set_value();
  probe.join();
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 1u);
}

TEST_F(ResilienceTest, OnlyConsecutiveFailuresOpenTheBreaker) {
  const RateLimiter limiter(mock, options(OnFailure::fail_open, 3));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 4, 0, 1)));
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 4, 0, 1)));
  }
  for (int i = 0; i < 5; ++i) fw.consume("u");
  EXPECT_EQ(fw.consume("u").source, Source::primary);  // 2 failures since the success: still closed
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 0u);
}

TEST_F(ResilienceTest, OpenBreakerUnderRaiseThrowsWithoutSending) {
  const RateLimiter limiter(mock, options(OnFailure::raise, 2));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Throw(ConnectionError("refused")));
  EXPECT_THROW(fw.consume("u"), ConnectionError);
  EXPECT_THROW(fw.consume("u"), ConnectionError);
  EXPECT_THROW(fw.consume("u"), ConnectionError);  // not sent
  EXPECT_THROW(fw.peek("u"), ConnectionError);     // not sent
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 2u);
}

TEST_F(ResilienceTest, BreakerIsSharedByTheLimitersStrategies) {
  const RateLimiter limiter(mock, options(OnFailure::fail_open, 2));
  const auto a = limiter.fixed_window("a", Limit::per_second(5));
  const auto b = limiter.token_bucket("b", 5, 1, 1s);
  EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Throw(ConnectionError("refused")));
  a.consume("u");
  a.consume("u");
  EXPECT_EQ(b.consume("u").source, Source::failure_policy);  // Redis is down for everyone
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 1u);
}

TEST_F(ResilienceTest, ZeroThresholdMeansNoBreaker) {
  const RateLimiter limiter(mock, options(OnFailure::fail_open, 0));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).Times(20).WillRepeatedly(Throw(ConnectionError("refused")));
  for (int i = 0; i < 20; ++i) fw.consume("u");
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 0u);
  EXPECT_EQ(limiter.counters().errors, 20u);
}

TEST_F(ResilienceTest, BreakerOptionsAreValidated) {
  EXPECT_CALL(*mock, command(_)).Times(0);
  Options o = options(OnFailure::raise, -1);
  EXPECT_THROW(RateLimiter(mock, o), InvalidArgument);
  o = options(OnFailure::raise, 3);
  o.breaker_cooldown = 0ms;
  EXPECT_THROW(RateLimiter(mock, o), InvalidArgument);
  o.breaker_cooldown = -5ms;
  EXPECT_THROW(RateLimiter(mock, o), InvalidArgument);
  o = options(OnFailure::raise, 0);
  o.breaker_cooldown = 0ms;  // irrelevant without a breaker
  EXPECT_NO_THROW(RateLimiter(mock, o));
}

// The cooldown is timed on monotonic(), not on the wall time decisions use. Before, an open breaker
// took its times from now(): a wall clock stepped back an hour kept it open for that hour (every call
// short-circuited), and one stepped forward ended its cooldown at once.
TEST_F(ResilienceTest, AWallClockStepNeitherHoldsNorCutsTheCooldown) {
  auto stepped = std::make_shared<SteppedClock>();
  Options o = options(OnFailure::fail_open, 2);
  o.clock = stepped;
  o.breaker_cooldown = 1000ms;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 4, 0, 1'000'000)));  // the probe
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 4, 0, 1'000'000)));  // the probe
  }
  fw.consume("u");
  fw.consume("u");  // open
  stepped->step_wall(-1h);
  stepped->pass(999ms);
  EXPECT_EQ(fw.consume("u").source, Source::failure_policy);
  EXPECT_EQ(limiter.health().breaker, redlimit::BreakerState::open);
  stepped->pass(1ms);  // the cooldown has passed, an hour before the wall clock's reading of it
  EXPECT_EQ(limiter.health().breaker, redlimit::BreakerState::half_open);
  EXPECT_EQ(fw.consume("u").source, Source::primary);
  EXPECT_EQ(limiter.health().breaker, redlimit::BreakerState::closed);

  fw.consume("u");
  fw.consume("u");  // open again
  stepped->step_wall(2h);
  stepped->pass(999ms);
  EXPECT_EQ(fw.consume("u").source, Source::failure_policy);  // the wall's two hours end no cooldown
  stepped->pass(1ms);
  EXPECT_EQ(fw.consume("u").source, Source::primary);
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 2u);
}

// SystemClock's monotonic() is the machine's steady clock; a clock that says nothing of it answers
// its now(), as ManualClock does.
TEST(ClockMonotonic, IsTheSteadyClockForTheSystemClockAndNowForTheOthers) {
  const auto steady = [] {
    return std::chrono::duration_cast<Micros>(std::chrono::steady_clock::now().time_since_epoch());
  };
  const Micros before = steady();
  const Micros reading = redlimit::SystemClock::instance()->monotonic();
  const Micros after = steady();
  EXPECT_GE(reading, before);
  EXPECT_LE(reading, after);
  class Fixed final : public redlimit::Clock {
   public:
    Micros now() const override { return Micros{5}; }
    void sleep_for(Micros) override {}
  };
  EXPECT_EQ(Fixed().monotonic(), Micros{5});
  ManualClock manual(Micros{123});
  manual.advance(Micros{7});
  EXPECT_EQ(manual.monotonic(), Micros{130});
}

}  // namespace
