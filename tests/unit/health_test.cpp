// RateLimiter::health(): the breaker's state (closed, open, half-open) and the latest decision's
// source, as a health endpoint reads them; behind a MockConnection and a ManualClock.
#include "unit/resilience_fixture.hpp"

namespace {

using redlimit::BreakerState;
using redlimit::Health;

TEST_F(ResilienceTest, HealthFollowsTheBreakerAndTheLatestSource) {
  Options o = options(OnFailure::fail_open, 2);
  o.breaker_cooldown = 1000ms;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  Health h = limiter.health();
  EXPECT_TRUE(h.breaker_enabled());
  EXPECT_EQ(h.breaker, BreakerState::closed);
  EXPECT_FALSE(h.decided);
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 4, 0, 1'000'000)));
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 3, 0, 1'000'000)));
  }
  fw.consume("u");
  h = limiter.health();
  EXPECT_TRUE(h.decided);
  EXPECT_EQ(h.last_source, Source::primary);
  EXPECT_EQ(h.breaker, BreakerState::closed);

  fw.consume("u");
  EXPECT_EQ(limiter.health().breaker, BreakerState::closed) << "one failure is under the threshold";
  fw.consume("u");
  h = limiter.health();
  EXPECT_EQ(h.breaker, BreakerState::open);
  ASSERT_EQ(h.breakers.size(), 1u);
  EXPECT_EQ(h.breakers[0].first, 0u);
  EXPECT_EQ(h.breakers[0].second, BreakerState::open);
  EXPECT_EQ(h.last_source, Source::failure_policy);

  clock->advance(999ms);
  EXPECT_EQ(limiter.health().breaker, BreakerState::open);
  clock->advance(1ms);
  EXPECT_EQ(limiter.health().breaker, BreakerState::half_open) << "the next call probes";
  EXPECT_EQ(limiter.health().breaker, BreakerState::half_open) << "reading it changes nothing";
  fw.consume("u");  // the probe succeeds
  h = limiter.health();
  EXPECT_EQ(h.breaker, BreakerState::closed);
  EXPECT_EQ(h.last_source, Source::primary);
}

TEST_F(ResilienceTest, HealthWithoutABreaker) {
  const RateLimiter limiter(mock, options(OnFailure::fail_closed, 0));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("refused")));
  fw.consume("u");
  const Health h = limiter.health();
  EXPECT_FALSE(h.breaker_enabled());
  EXPECT_EQ(h.breaker, BreakerState::closed);
  EXPECT_TRUE(h.decided);
  EXPECT_EQ(h.last_source, Source::failure_policy);
  EXPECT_STREQ(redlimit::to_string(h.last_source), "failure_policy");
  EXPECT_STREQ(redlimit::to_string(BreakerState::half_open), "half_open");
}

}  // namespace
