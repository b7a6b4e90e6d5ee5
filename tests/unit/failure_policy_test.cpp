// What a decision does when Redis fails (Options::on_failure): raise, fail_open, fail_closed and the
// in-memory fallback, behind a MockConnection and a ManualClock.
#include "unit/resilience_fixture.hpp"

namespace {

// ---- on_failure ----------------------------------------------------------------------------------

TEST_F(ResilienceTest, DefaultsAreRaiseAndABreaker) {
  const Options o;
  EXPECT_EQ(o.on_failure, OnFailure::raise);
  EXPECT_GT(o.breaker_threshold, 0);
  EXPECT_GT(o.breaker_cooldown.count(), 0);
  EXPECT_FALSE(o.shadow);
  EXPECT_FALSE(o.local_reject_cache);
}

TEST_F(ResilienceTest, RaiseRethrowsConnectionErrorsAndCountsThem) {
  const RateLimiter limiter(mock, options(OnFailure::raise));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("refused")));
  EXPECT_THROW(fw.consume("u"), ConnectionError);
  EXPECT_EQ(limiter.counters().errors, 1u);
  EXPECT_EQ(limiter.counters().decisions, 0u);
}

TEST_F(ResilienceTest, RaiseKeepsTheTimeoutType) {
  const RateLimiter limiter(mock, options(OnFailure::raise));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(TimeoutError("no reply in 1000 ms")));
  EXPECT_THROW(fw.consume("u"), TimeoutError);
}

TEST_F(ResilienceTest, RaiseThrowsUnavailableForLoadingServer) {
  const RateLimiter limiter(mock, options(OnFailure::raise));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(Reply::make_error("LOADING Redis is loading the dataset in memory")));
  EXPECT_THROW(fw.consume("u"), UnavailableError);
  EXPECT_EQ(limiter.counters().errors, 1u);
}

TEST_F(ResilienceTest, FailOpenAdmitsWhenRedisIsUnreachable) {
  const RateLimiter limiter(mock, options(OnFailure::fail_open));
  const auto tb = limiter.token_bucket("api", 10, 1, 1s);
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("refused")));
  const Decision d = tb.consume("u", 3);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.source, Source::failure_policy);
  EXPECT_EQ(d.limit, 0);  // unknown, like every quota field: not "0 left of 10"
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 0us);
  EXPECT_EQ(d.reset_after, 0us);
  EXPECT_TRUE(d.limits.empty());
  const Counters c = limiter.counters();
  EXPECT_EQ(c.errors, 1u);
  EXPECT_EQ(c.from_failure_policy, 1u);
  EXPECT_EQ(c.decisions, 1u);
  EXPECT_EQ(c.allowed, 1u);
}

TEST_F(ResilienceTest, FailOpenCoversTimeoutsAndUnavailableServers) {
  const RateLimiter limiter(mock, options(OnFailure::fail_open));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Throw(TimeoutError("deadline")))
      .WillOnce(Return(Reply::make_error("OOM command not allowed when used memory > 'maxmemory'.")))
      .WillOnce(Return(Reply::make_error("MASTERDOWN Link with MASTER is down")));
  for (int i = 0; i < 3; ++i) {
    const Decision d = fw.consume("u");
    EXPECT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.source, Source::failure_policy) << i;
  }
  EXPECT_EQ(limiter.counters().errors, 3u);
}

TEST_F(ResilienceTest, FailurePolicyDoesNotHideScriptErrors) {
  // An ERR reply or a malformed reply is a bug to see, not an outage to paper over.
  const RateLimiter limiter(mock, options(OnFailure::fail_open));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(Reply::make_error("ERR Error running script: boom")))
      .WillOnce(Return(Reply::make_string("7")));
  EXPECT_THROW(fw.consume("u"), ReplyError);
  EXPECT_THROW(fw.consume("u"), ReplyError);
}

TEST_F(ResilienceTest, FailClosedRejectsForOneSecondWithoutABreaker) {
  const RateLimiter limiter(mock, options(OnFailure::fail_closed));
  const auto sl = limiter.sliding_log("api", Limit::per_minute(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("reset")));
  const Decision d = sl.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 1s);
  EXPECT_EQ(d.source, Source::failure_policy);
  EXPECT_EQ(d.limit, 0);  // the quota is unknown: only the wait is the policy's own
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, 0us);
  EXPECT_EQ(limiter.counters().rejected, 1u);
  EXPECT_EQ(limiter.counters().from_failure_policy, 1u);
}

TEST_F(ResilienceTest, FailClosedRetryAfterIsTheBreakerCooldown) {
  Options o = options(OnFailure::fail_closed, 5);
  o.breaker_cooldown = 250ms;
  const RateLimiter limiter(mock, o);
  const auto sl = limiter.sliding_log("api", Limit::per_minute(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("reset")));
  const Decision d = sl.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 250ms);
}


// ---- fallback ------------------------------------------------------------------------------------

// With Redis down, the in-memory fallback decides with the same semantics: exactly `limit` admitted,
// every decision marked Source::fallback and counted.
TEST_F(ResilienceTest, FallbackDecidesInMemoryWithTheSameLimit) {
  const RateLimiter limiter(mock, options(OnFailure::fallback));
  const auto fw = limiter.fixed_window("api", Limit::per_second(3));
  EXPECT_CALL(*mock, command(_)).Times(6).WillRepeatedly(Throw(ConnectionError("refused")));
  int admitted = 0;
  for (int i = 0; i < 5; ++i) {
    const Decision d = fw.consume("u");
    EXPECT_EQ(d.source, Source::fallback);
    admitted += d.allowed;
  }
  EXPECT_EQ(admitted, 3);
  const Decision last = fw.peek("u");  // the breaker is off: this goes to Redis (and fails) too
  EXPECT_FALSE(last.allowed);
  EXPECT_EQ(last.retry_after, 1s);
  const Counters c = limiter.counters();
  EXPECT_EQ(c.from_fallback, 6u);
  EXPECT_EQ(c.errors, 6u);
  EXPECT_EQ(c.allowed, 3u);
  EXPECT_EQ(c.rejected, 2u);
}

// The fallback's state follows the limiter's clock: the next window starts empty there too.
TEST_F(ResilienceTest, FallbackStateFollowsTheLimiterClock) {
  const RateLimiter limiter(mock, options(OnFailure::fallback));
  const auto fw = limiter.fixed_window("api", Limit::per_second(1));
  EXPECT_CALL(*mock, command(_)).WillRepeatedly(Throw(ConnectionError("refused")));
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_FALSE(fw.consume("u").allowed);
  clock->advance(1s);
  EXPECT_TRUE(fw.consume("u").allowed);
}

// Issue 17, item 7: reset() during an outage under fallback clears the fallback's copy (which is
// what decides meanwhile) and still throws, since Redis's copy could not be reset.
TEST_F(ResilienceTest, ResetDuringAnOutageClearsTheFallbacksStateAndThrows) {
  const RateLimiter limiter(mock, options(OnFailure::fallback));
  const auto fw = limiter.fixed_window("api", Limit::per_minute(1));
  EXPECT_CALL(*mock, command(_)).WillRepeatedly(Throw(ConnectionError("refused")));
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_FALSE(fw.consume("u").allowed);
  EXPECT_THROW(fw.reset("u"), ConnectionError);
  const Decision d = fw.consume("u");
  EXPECT_EQ(d.source, Source::fallback);
  EXPECT_TRUE(d.allowed) << "the fallback kept the state reset() was asked to forget";
}

// Issue 17, item 7: a clock before 1970 is rejected before any I/O, so nothing reaches Redis.
TEST_F(ResilienceTest, AClockBefore1970IsRejectedBeforeAnyIo) {
  const RateLimiter limiter(mock, options(OnFailure::fail_open));
  const auto fw = limiter.fixed_window("api", Limit::per_minute(1));
  EXPECT_CALL(*mock, command(_)).Times(0);
  clock->set(redlimit::Micros{-1});
  EXPECT_THROW(fw.consume("u"), redlimit::InvalidArgument);
  EXPECT_THROW(fw.consume_many({{"u", 1}}), redlimit::InvalidArgument);
  EXPECT_EQ(limiter.counters().decisions, 0u);
}

// Issue 17, item 7: an error names the strategy the user built (a sliding window runs the policy
// script; its errors used to say "script policy").
TEST_F(ResilienceTest, ErrorsNameTheStrategyTheUserBuilt) {
  const RateLimiter limiter(mock, options(OnFailure::raise));
  const auto sw = limiter.sliding_window("api", Limit::per_minute(10));
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(Reply::make_error("ERR Error running script: boom")));
  try {
    sw.consume("u");
    ADD_FAILURE() << "no error";
  } catch (const ReplyError& e) {
    EXPECT_NE(std::string(e.what()).find("sliding window \"api\""), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("script policy"), std::string::npos) << e.what();
  }
}

}  // namespace
