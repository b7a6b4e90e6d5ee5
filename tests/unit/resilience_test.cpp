// What a decision does when Redis fails (Options::on_failure), the circuit breaker, shadow mode,
// the local reject cache, the built-in counters and the metrics sink; all behind a MockConnection
// and a ManualClock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::ConnectionError;
using redlimit::Counters;
using redlimit::Decision;
using redlimit::InvalidArgument;
using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::Micros;
using redlimit::OnFailure;
using redlimit::Operation;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Reply;
using redlimit::ReplyError;
using redlimit::Source;
using redlimit::TimeoutError;
using redlimit::UnavailableError;
using redlimit_unit::decision_reply;
using ::testing::_;
using ::testing::InSequence;
using ::testing::Return;
using ::testing::StrictMock;
using ::testing::Throw;
using namespace std::chrono_literals;
using Argv = std::vector<std::string>;

constexpr std::int64_t kStart = 1'700'000'000'000'000;

// Records every event; copies what the event only borrows.
class RecordingSink : public redlimit::MetricsSink {
 public:
  struct Seen {
    std::string resource;
    Operation operation;
    bool has_decision;
    Decision decision;
    std::string error;
    std::chrono::nanoseconds latency;
  };
  void on_event(const redlimit::MetricsEvent& e) noexcept override {
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back(Seen{std::string(e.resource), e.operation, e.decision != nullptr,
                          e.decision ? *e.decision : Decision{}, std::string(e.error), e.latency});
  }
  std::mutex mutex;
  std::vector<Seen> events;
};

class ResilienceTest : public ::testing::Test {
 protected:
  std::shared_ptr<StrictMock<MockConnection>> mock = std::make_shared<StrictMock<MockConnection>>();
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Micros{kStart});

  Options options(OnFailure on_failure, int breaker_threshold = 0) const {
    Options o;
    o.clock = clock;
    o.on_failure = on_failure;
    o.breaker_threshold = breaker_threshold;
    return o;
  }
};

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
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 0us);
  EXPECT_EQ(d.reset_after, 0us);
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
      .WillOnce(Return(Reply::make_integer(7)));
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
    EXPECT_EQ(argv.at(7), "1");
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
      .WillOnce(Return(Reply::make_integer(1)))
      .WillOnce(Throw(ConnectionError("broken pipe")));
  fw.consume("u");
  fw.peek("u");
  fw.refund("u");
  fw.block("u", 1s);
  fw.reset("u");
  EXPECT_THROW(fw.consume("u"), ConnectionError);

  ASSERT_EQ(sink->events.size(), 6u);
  const Operation ops[] = {Operation::consume, Operation::peek, Operation::refund, Operation::block, Operation::reset,
                           Operation::consume};
  for (std::size_t i = 0; i < 6; ++i) {
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
  EXPECT_FALSE(sink->events[5].has_decision);
  EXPECT_THAT(sink->events[5].error, ::testing::HasSubstr("broken pipe"));
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

// ---- local reject cache ----------------------------------------------------------------------------

class RejectCacheTest : public ResilienceTest {
 protected:
  RateLimiter make() const {
    Options o = options(OnFailure::raise);
    o.local_reject_cache = true;
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
