// The local reject cache: a subject Redis rejected is rejected in-process until its retry_after.
#include "unit/resilience_fixture.hpp"

namespace {

// ---- local reject cache ----------------------------------------------------------------------------

class RejectCacheTest : public ResilienceTest {
 protected:
  RateLimiter make(std::shared_ptr<redlimit::Clock> other_clock = nullptr) const {
    Options o = options(OnFailure::raise);
    o.local_reject_cache = true;
    if (other_clock) o.clock = std::move(other_clock);
    return RateLimiter(mock, o);
  }
};

TEST_F(RejectCacheTest, OffByDefault) {
  const RateLimiter limiter(mock, options(OnFailure::raise));
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).Times(3).WillRepeatedly(Return(decision_reply(0, 0, 500'000, 500'000)));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fw.consume("u").source, Source::primary);
  EXPECT_EQ(limiter.counters().local_cache_hits, 0u);
}

TEST_F(RejectCacheTest, RejectedSubjectIsRejectedLocallyUntilItsRetryAfter) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(decision_reply(0, 0, 500'000, 500'000)))
      .WillOnce(Return(decision_reply(1, 4, 0, 1'000'000)));
  EXPECT_EQ(fw.consume("u").source, Source::primary);
  clock->advance(200ms);
  const Decision d = fw.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.source, Source::local_cache);
  EXPECT_EQ(d.retry_after, 300ms);
  EXPECT_EQ(d.limit, 5);
  clock->advance(299ms);
  EXPECT_EQ(fw.consume("u").source, Source::local_cache);
  clock->advance(1ms);  // the cached wait is over: Redis decides again
  EXPECT_TRUE(fw.consume("u").allowed);
  const Counters c = limiter.counters();
  EXPECT_EQ(c.local_cache_hits, 2u);
  EXPECT_EQ(c.decisions, 4u);
  EXPECT_EQ(c.rejected, 3u);
}

// A cached rejection stands for its retry_after of elapsed time (the clock's monotonic()), however
// the wall clock steps. Before, its end was a wall time: a clock stepped back an hour kept the subject
// rejected in-process for that hour, never asking Redis.
TEST_F(RejectCacheTest, AWallClockStepBackDoesNotProlongARejection) {
  auto stepped = std::make_shared<SteppedClock>();
  const RateLimiter limiter = make(stepped);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(decision_reply(0, 0, 500'000, 500'000)))
      .WillOnce(Return(decision_reply(1, 4, 0, 1'000'000)));
  EXPECT_EQ(fw.consume("u").source, Source::primary);
  stepped->step_wall(-1h);
  stepped->pass(499ms);
  EXPECT_EQ(fw.consume("u").source, Source::local_cache);
  stepped->pass(1ms);  // the rejection's 500 ms have passed
  EXPECT_EQ(fw.consume("u").source, Source::primary);
  EXPECT_EQ(limiter.counters().local_cache_hits, 1u);
}

TEST_F(RejectCacheTest, CheaperRequestsAndOtherSubjectsStillGoToRedis) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(decision_reply(0, 2, 500'000, 500'000)))  // cost 3 rejected
      .WillOnce(Return(decision_reply(1, 0, 0, 500'000)))        // cost 2 fits
      .WillOnce(Return(decision_reply(1, 4, 0, 1'000'000)));     // another subject
  fw.consume("u", 3);
  EXPECT_EQ(fw.consume("u", 3).source, Source::local_cache);
  EXPECT_EQ(fw.consume("u", 5).source, Source::local_cache);
  EXPECT_TRUE(fw.consume("u", 2).allowed);
  EXPECT_EQ(fw.consume("v", 3).source, Source::primary);
}

TEST_F(RejectCacheTest, PeekAlwaysAsksRedis) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).Times(3).WillRepeatedly(Return(decision_reply(0, 0, 500'000, 500'000)));
  fw.consume("u");
  fw.peek("u");
  fw.peek("u");
}

TEST_F(RejectCacheTest, RefundAndResetForgetTheRejection) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(0, 0, 500'000, 500'000)));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 1, 0, 500'000)));  // refund
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(0, 0, 400'000, 400'000)));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(Reply::make_integer(1)));  // reset
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 4, 0, 1'000'000)));
  }
  fw.consume("u");
  fw.refund("u");
  EXPECT_EQ(fw.consume("u").source, Source::primary);  // sent: the refund made room
  fw.reset("u");
  EXPECT_EQ(fw.consume("u").source, Source::primary);  // sent: reset forgot everything
}


}  // namespace
