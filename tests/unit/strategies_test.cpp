// What differs between strategies behind RateLimiter(MockConnection): their parameters and the ARGV
// those become, policies, and the checks at construction (InvalidArgument before anything is sent).
#include "support/stepped_clock.hpp"
#include "unit/strategy_fixture.hpp"

namespace {

// =================================================================================================
// Strategy-specific parameters and construction checks
// =================================================================================================

class StrategiesTest : public StrategyTestBase, public ::testing::Test {
 protected:
  static Argv keys(const Strategy& s, std::string_view subject) { return redlimit_unit::request_keys(s, subject); }
  // ARGV as sent, from now, cost, mode and the parameters word by word: now, then the head.
  static Argv args_of(const Argv& a) {
    return call_args(a[0], std::stoll(a[1]), a[2].c_str(), Argv(a.begin() + 3, a.end()));
  }
};

TEST_F(StrategiesTest, AccessorsReflectTheConstruction) {
  const RateLimiter limiter = make_limiter();
  EXPECT_EQ(limiter.fixed_window("a", Limit::per_minute(7)).limit(), Limit::per_minute(7));
  EXPECT_EQ(limiter.fixed_window("a", Limit::per_minute(7)).resource(), "a");
  EXPECT_EQ(limiter.sliding_log("b", Limit(3, 5s)).limit(), Limit(3, 5s));
  EXPECT_EQ(limiter.sliding_window("c", Limit::per_minute(60), 15s).limit().precision(), 15s);
  EXPECT_EQ(limiter.token_bucket("d", 12, 1, 1s).capacity(), 12);
  EXPECT_EQ(limiter.leaky_bucket("e", 9, Limit::per_second(1)).capacity(), 9);
  EXPECT_EQ(limiter.leaky_bucket("e", 9, Limit::per_second(1)).mode(), LeakyMode::meter);
  EXPECT_EQ(limiter.leaky_bucket("e", 9, Limit::per_second(1), LeakyMode::shaper).mode(), LeakyMode::shaper);
  EXPECT_EQ(limiter.policy("f", redlimit::parse_limits("1/s; 2/m")).limits(), redlimit::parse_limits("1/s; 2/m"));
  EXPECT_EQ(&limiter.clock(), clock.get());
  EXPECT_EQ(limiter.options().prefix, "redlimit:");
}

TEST_F(StrategiesTest, StrategiesSharingAResourceUseDifferentStateKeys) {
  const RateLimiter limiter = make_limiter();
  const std::set<std::string> keys = {
      limiter.fixed_window("api", Limit::per_minute(1)).key_for("u"),
      limiter.sliding_log("api", Limit::per_minute(1)).key_for("u"),
      limiter.sliding_window("api", Limit::per_minute(1)).key_for("u"),
      limiter.token_bucket("api", 1, 1, 1s).key_for("u"),
      limiter.leaky_bucket("api", 1, Limit::per_second(1)).key_for("u"),
      limiter.policy("api", {Limit::per_minute(1)}).key_for("u"),
  };
  EXPECT_EQ(keys.size(), 6u);
}

TEST_F(StrategiesTest, SlidingWindowPrecisionFromTheLimit) {
  const RateLimiter limiter = make_limiter();
  const auto sw = limiter.sliding_window("api", Limit::parse("100/1m@10s"));
  EXPECT_CALL(*mock, command(evalsha(scripts::policy(), keys(sw, "u"),
                                     args_of({now(), "1", "1", "1", "1m@10s", "100", "60000000", "10000000"}))))
      .WillOnce(Return(policy_reply(1, 99, 0, 70'000'000, 1)));
  const Decision d = sw.consume("u");
  EXPECT_EQ(d.remaining, 99);
  EXPECT_EQ(d.limit, 100);
}

TEST_F(StrategiesTest, SlidingWindowPrecisionArgumentOverridesTheLimits) {
  const RateLimiter limiter = make_limiter();
  const auto sw = limiter.sliding_window("api", Limit::parse("100/1m@10s"), 20s);
  EXPECT_EQ(sw.limit().precision(), 20s);
  EXPECT_CALL(*mock, command(evalsha(scripts::policy(), keys(sw, "u"),
                                     args_of({now(), "1", "1", "1", "1m@20s", "100", "60000000", "20000000"}))))
      .WillOnce(Return(policy_reply(1, 99, 0, 80'000'000, 1)));
  sw.consume("u");
}

TEST_F(StrategiesTest, TokenBucketRateUsesTheGcd) {
  const RateLimiter limiter = make_limiter();
  struct R {
    std::int64_t capacity, per;
    Micros period;
    const char* unit;
    const char* refill;
  };
  const R rates[] = {
      {10, 1, 1s, "1000000", "1"},     // 1 token per s
      {10, 3, 2s, "2000000", "3"},     // gcd(3, 2000000) = 1
      {100, 10, 1s, "100000", "1"},    // gcd(10, 1000000) = 10
      {5, 1000, 1ms, "1", "1"},        // one token per microsecond
      {60, 60, 1min, "1000000", "1"},  // gcd(60, 60000000) = 60
      {7, 4, 6us, "3", "2"},           // gcd(4, 6) = 2
      {1, 1000000, 1s, "1", "1"},      // a refill larger than the capacity is fine
  };
  for (const R& r : rates) {
    SCOPED_TRACE(std::to_string(r.per) + " per " + std::to_string(r.period.count()) + "us");
    const auto tb = limiter.token_bucket("api", r.capacity, r.per, r.period);
    EXPECT_CALL(*mock, command(evalsha(scripts::token_bucket(), keys(tb, "u"),
                                       args_of({now(), "1", "1", std::to_string(r.capacity), r.unit, r.refill}))))
        .WillOnce(Return(decision_reply(1, r.capacity - 1, 0, 1)));
    const Decision d = tb.consume("u");
    EXPECT_EQ(d.limit, r.capacity);
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
  }
}

TEST_F(StrategiesTest, LeakyBucketRateUsesTheGcd) {
  const RateLimiter limiter = make_limiter();
  struct R {
    Limit rate;
    const char* unit;
    const char* leak;
  };
  const R rates[] = {
      {Limit::per_second(2), "500000", "1"},
      {Limit(3, 2s), "2000000", "3"},
      {Limit::per_second(1'000'000), "1", "1"},
      {Limit::per_minute(1), "60000000", "1"},
      {Limit(4, 6us), "3", "2"},
  };
  for (const R& r : rates) {
    SCOPED_TRACE(r.rate.to_string());
    for (const LeakyMode mode : {LeakyMode::meter, LeakyMode::shaper}) {
      const auto lb = limiter.leaky_bucket("api", 8, r.rate, mode);
      EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                         args_of({now(), "1", "1", "8", r.unit, r.leak,
                                          mode == LeakyMode::shaper ? "shaper" : "meter"}))))
          .WillOnce(Return(decision_reply(1, 7, 0, 1)));
      EXPECT_EQ(lb.consume("u").limit, 8);
      ::testing::Mock::VerifyAndClearExpectations(mock.get());
    }
  }
}

TEST_F(StrategiesTest, LeakyBucketDefaultsToMeter) {
  const RateLimiter limiter = make_limiter();
  const auto lb = limiter.leaky_bucket("api", 10, Limit::per_second(2));
  EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                     args_of({now(), "1", "1", "10", "500000", "1", "meter"}))))
      .WillOnce(Return(decision_reply(1, 9, 0, 500000)));
  lb.consume("u");
}

// The entries' form travels as a third parameter, and only when compact: a text log's calls are
// word for word those of the builds before the option (lua/sliding_log.lua).
TEST_F(StrategiesTest, ASlidingLogNamesCompactEntriesInItsParameters) {
  for (const redlimit::SlidingLogMembers members :
       {redlimit::SlidingLogMembers::text, redlimit::SlidingLogMembers::compact}) {
    Options o;
    o.clock = clock;
    o.sliding_log_members = members;
    const RateLimiter limiter(mock, o);
    const auto sl = limiter.sliding_log("api", Limit(3, 5s));
    std::vector<std::string> args{now(), "1", "1", "3", "5000000"};
    if (members == redlimit::SlidingLogMembers::compact) args.emplace_back("compact");
    EXPECT_CALL(*mock, command(evalsha(scripts::sliding_log(), keys(sl, "u"), args_of(args))))
        .WillOnce(Return(decision_reply(1, 2, 0, 5'000'000)));
    EXPECT_EQ(sl.consume("u").remaining, 2);
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
  }
}

TEST_F(StrategiesTest, ShaperDelayReachesTheDecision) {
  const RateLimiter limiter = make_limiter();
  const auto lb = limiter.leaky_bucket("api", 10, Limit::per_second(2), LeakyMode::shaper);
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 7, 0, 1'500'000, 1'000'000)));
  const Decision d = lb.consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 7);
  EXPECT_EQ(d.delay, 1s);
  EXPECT_EQ(d.reset_after, 1500ms);
}

TEST_F(StrategiesTest, AcquireOnAShaperWaitsTheDelay) {
  const RateLimiter limiter = make_limiter();
  const auto lb = limiter.leaky_bucket("api", 10, Limit::per_second(2), LeakyMode::shaper);
  EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                     args_of({now(), "1", "1", "10", "500000", "1", "shaper"}))))
      .WillOnce(Return(decision_reply(1, 8, 0, 1'000'000, 400'000)));
  const Decision d = lb.acquire("u", 1, 1s);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.delay, 400ms);
  EXPECT_EQ(clock->now(), Micros{kStrategyStart + 400'000});
}

TEST_F(StrategiesTest, AcquireOnAShaperRefundsWhenTheDelayExceedsMaxWait) {
  const RateLimiter limiter = make_limiter();
  const auto lb = limiter.leaky_bucket("api", 10, Limit::per_second(2), LeakyMode::shaper);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                     args_of({now(), "3", "1", "10", "500000", "1", "shaper"}))))
      .WillOnce(Return(decision_reply(1, 2, 0, 4'000'000, 2'500'000)));
  EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                     args_of({now(), "3", "2", "10", "500000", "1", "shaper"}))))
      .WillOnce(Return(decision_reply(1, 5, 0, 2'500'000, 0)));
  const Decision d = lb.acquire("u", 3, 1s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(clock->now(), Micros{kStrategyStart});
}

// max_wait is timed on the clock's monotonic(). Before, acquire's deadline was a wall time, and the
// step gave its loop an hour more of retries (and of sleeping) past max_wait.
TEST_F(StrategiesTest, AcquireGivesUpAtMaxWaitThoughTheWallClockStepsBack) {
  auto stepped = std::make_shared<redlimit_test::SteppedClock>(Micros{kStrategyStart});
  stepped->step_wall_in_next_sleep(-1h);  // NTP, during the first sleep
  Options o;
  o.clock = stepped;
  const RateLimiter limiter(mock, o);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).Times(3).WillRepeatedly(Return(decision_reply(0, 0, 400'000, 400'000)));
  const Micros started = stepped->monotonic();
  const Decision d = fw.acquire("u", 1, 1s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(stepped->monotonic() - started, 800ms);  // two waits of 400 ms: a third would pass max_wait
}

// ---- policies ----------------------------------------------------------------------------------

TEST_F(StrategiesTest, PolicySendsEveryLimitInOrder) {
  const RateLimiter limiter = make_limiter();
  const auto pol = limiter.policy("api", redlimit::parse_limits("10/s; 120/m; 240/h@1m"));
  EXPECT_EQ(pol.key_for("u"), "redlimit:{api|u}:pol");
  EXPECT_CALL(*mock, command(evalsha(scripts::policy(), keys(pol, "u"),
                                     args_of({now(), "1", "1", "3",                           //
                                      "1s", "10", "1000000", "1000000",               //
                                      "1m", "120", "60000000", "60000000",            //
                                      "1h@1m", "240", "3600000000", "60000000"}))))
      .WillOnce(Return(policy_reply(1, 9, 0, 3'600'000'000, 1, 3)));
  const Decision d = pol.consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit_index, 0u);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 9);
}

TEST_F(StrategiesTest, PolicyDecisionNamesTheDecidingLimit) {
  const RateLimiter limiter = make_limiter();
  const auto pol = limiter.policy("api", redlimit::parse_limits("10/s, 120/m, 240/h"));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(policy_reply(0, 0, 12'000'000, 3'600'000'000, 2, 3)))
      .WillOnce(Return(policy_reply(0, 0, 1'800'000'000, 3'600'000'000, 3, 3)));
  Decision d = pol.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit_index, 1u);
  EXPECT_EQ(d.limit, 120);
  EXPECT_EQ(d.retry_after, 12s);
  d = pol.consume("u");
  EXPECT_EQ(d.limit_index, 2u);
  EXPECT_EQ(d.limit, 240);
}

TEST_F(StrategiesTest, PolicyCostIsCappedByTheSmallestLimit) {
  const RateLimiter limiter = make_limiter();
  const auto pol = limiter.policy("api", redlimit::parse_limits("120/m; 10/s; 240/h"));
  {
    expect_nothing_sent();
    EXPECT_THROW(pol.consume("u", 11), InvalidArgument);
    EXPECT_THROW(pol.peek("u", 11), InvalidArgument);
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
  }
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(policy_reply(1, 0, 0, 1'000'000, 2, 3)));
  EXPECT_EQ(pol.consume("u", 10).limit, 10);
}

TEST_F(StrategiesTest, InvalidPoliciesThrowAndSendNothing) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.policy("api", {}), InvalidArgument);
  std::vector<Limit> seventeen;
  for (int i = 1; i <= 17; ++i) seventeen.emplace_back(i, std::chrono::seconds(i));
  EXPECT_THROW(limiter.policy("api", seventeen), InvalidArgument);
  seventeen.pop_back();
  ASSERT_EQ(seventeen.size(), redlimit::Policy::max_limits());
  EXPECT_NO_THROW(limiter.policy("api", seventeen));
  // Same window and precision twice.
  EXPECT_THROW(limiter.policy("api", redlimit::parse_limits("10/m; 20/m")), InvalidArgument);
  EXPECT_THROW(limiter.policy("api", redlimit::parse_limits("10/m@10s; 20/60s@10s")), InvalidArgument);
  // Same window, different precision is fine.
  EXPECT_NO_THROW(limiter.policy("api", redlimit::parse_limits("10/m; 20/m@10s")));
  // A limit a sliding window rejects (36000 buckets).
  EXPECT_THROW(limiter.policy("api", redlimit::parse_limits("10/s; 100/1h@100ms")), InvalidArgument);
  // At most Policy::max_buckets() in all: 6,000 and 4,000 pass, 6,000 and 4,001 do not, nor do 16
  // limits of 1,000 each, which each window alone allows.
  ASSERT_EQ(redlimit::Policy::max_buckets(), 10'000);
  EXPECT_NO_THROW(limiter.policy("api", redlimit::parse_limits("10/6s@1ms; 20/4s@1ms")));
  try {
    limiter.policy("api", redlimit::parse_limits("10/6s@1ms; 20/4001ms@1ms"));
    ADD_FAILURE() << "a policy of 10,001 buckets was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("10001 buckets in all; at most 10000"), std::string::npos) << e.what();
  }
  std::vector<Limit> sixteen;
  for (int i = 1; i <= 16; ++i)
    sixteen.push_back(Limit(i, std::chrono::seconds(i)).precision(std::chrono::milliseconds(i)));
  EXPECT_THROW(limiter.policy("api", sixteen), InvalidArgument);
  EXPECT_THROW(limiter.policy("", {Limit::per_second(1)}), InvalidArgument);
}

// ---- construction checks -----------------------------------------------------------------------

TEST_F(StrategiesTest, TokenBucketInvalidParametersThrowAndSendNothing) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.token_bucket("api", 0, 1, 1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", -1, 1, 1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", 10, 0, 1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", 10, -3, 1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", 10, 1, 0s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", 10, 1, -1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("", 10, 1, 1s), InvalidArgument);
}

TEST_F(StrategiesTest, TokenBucketMustRefillWithinTheLongestWindow) {
  // The scripts keep any capacity up to 2^40 at any rate exact (whole tokens plus ticks); what a
  // bucket may not do is take longer than Limit::max_window() (ten years) to refill.
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.token_bucket("api", 1'000'000'000, 1, 1h), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", Limit::max_count(), 1, 1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", Limit::max_count(), 1, Micros{4096}), InvalidArgument);
  EXPECT_NO_THROW(limiter.token_bucket("api", 87'600, 1, 1h));  // ten years of 365 days, to the us
  EXPECT_THROW(limiter.token_bucket("api", 87'601, 1, 1h), InvalidArgument);
  // Once products of capacity and unit that passed 2^52 and were refused: 7 per 3 days, 2^40 per
  // ten years, 900 million at 3 per second.
  EXPECT_NO_THROW(limiter.token_bucket("api", 2'000, 7, 72h));
  EXPECT_NO_THROW(limiter.token_bucket("api", Limit::max_count(), Limit::max_count(), Limit::max_window()));
  EXPECT_NO_THROW(limiter.token_bucket("api", 900'000'000, 3, 1s));
}

TEST_F(StrategiesTest, LeakyBucketInvalidParametersThrowAndSendNothing) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.leaky_bucket("api", 0, Limit::per_second(1)), InvalidArgument);
  EXPECT_THROW(limiter.leaky_bucket("api", -5, Limit::per_second(1)), InvalidArgument);
  EXPECT_THROW(limiter.leaky_bucket("api", 0, Limit::per_second(1), LeakyMode::shaper), InvalidArgument);
  EXPECT_THROW(limiter.leaky_bucket("api", 1'000'000'000, Limit::per_hour(1)), InvalidArgument);
  EXPECT_THROW(limiter.leaky_bucket("", 10, Limit::per_second(1)), InvalidArgument);
}

TEST_F(StrategiesTest, LeakyBucketMustDrainWithinTheLongestWindow) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.leaky_bucket("api", Limit::max_count(), Limit(1, Micros{4096})), InvalidArgument);
  EXPECT_NO_THROW(limiter.leaky_bucket("api", 87'600, Limit::per_hour(1)));
  EXPECT_THROW(limiter.leaky_bucket("api", 87'601, Limit::per_hour(1)), InvalidArgument);
  EXPECT_NO_THROW(limiter.leaky_bucket("api", Limit::max_count(), Limit(Limit::max_count(), Limit::max_window())));
  EXPECT_NO_THROW(limiter.leaky_bucket("api", 2'000, Limit(7, 72h), LeakyMode::shaper));
}

TEST_F(StrategiesTest, SlidingWindowPrecisionMustDivideTheWindow) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.sliding_window("api", Limit::per_minute(100), 7s), InvalidArgument);
  EXPECT_THROW(limiter.sliding_window("api", Limit::per_minute(100), 2min), InvalidArgument);
  EXPECT_THROW(limiter.sliding_window("api", Limit::per_minute(100), -1s), InvalidArgument);
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit::per_minute(100), 1min));
}

TEST_F(StrategiesTest, SlidingWindowBucketCountIsCapped) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  ASSERT_EQ(redlimit::SlidingWindow::max_buckets(), 10'000);
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit(100, 10s), 1ms));                     // 10000 buckets
  EXPECT_THROW(limiter.sliding_window("api", Limit(100, 10001ms), 1ms), InvalidArgument);     // 10001
  EXPECT_THROW(limiter.sliding_window("api", Limit::per_hour(100), 100ms), InvalidArgument);  // 36000
  EXPECT_THROW(limiter.sliding_window("api", Limit::parse("100/1h@100ms")), InvalidArgument);
}

TEST_F(StrategiesTest, EverydayQuotasAreAcceptedBySlidingWindowsAndPolicies) {
  // Each of these once threw "limit x precision must stay below 2^52 us" (issue 12).
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit::per_day(1'000'000)));
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit::per_hour(10'000'000)));
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit::per_day(100'000'000), 1h));
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit(1'000'000, 24h * 30), 24h));
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit(1'000'000'000, 24h * 30)));
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit(Limit::max_count(), Limit::max_window())));
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit(Limit::max_count(), Limit::max_window()),
                                         Limit::max_window() / redlimit::SlidingWindow::max_buckets()));
  EXPECT_NO_THROW(limiter.policy("api", redlimit::parse_limits("1000000/1d; 10000000/10d")));
}

TEST_F(StrategiesTest, BadPrefixInOptionsThrowsAndSendsNothing) {
  expect_nothing_sent();
  for (const std::string& prefix : {"a{b"s, "{"s, "}"s, "rl:{x}:"s, std::string(65, 'p')}) {
    SCOPED_TRACE(prefix);
    Options o;
    o.clock = clock;
    o.prefix = prefix;
    EXPECT_THROW(RateLimiter(mock, o), InvalidArgument);
  }
}

TEST_F(StrategiesTest, NullConnectionIsRejected) {
  EXPECT_THROW(RateLimiter(std::shared_ptr<redlimit::Connection>{}, Options{}), InvalidArgument);
}

TEST_F(StrategiesTest, EmptyPrefixIsAllowed) {
  const RateLimiter limiter = make_limiter(TimeSource::client, "");
  EXPECT_EQ(limiter.fixed_window("api", Limit::per_second(1)).key_for("u"), "{api|u}:fw");
}

TEST_F(StrategiesTest, WithoutAClockTheSystemClockIsUsed) {
  const RateLimiter limiter(mock, Options{});
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  std::string sent_now;
  EXPECT_CALL(*mock, command(_)).WillOnce([&](const Argv& argv) {
    sent_now = argv.at(4);  // EVALSHA sha 1 key now ...
    return decision_reply(1, 4, 0, 1);
  });
  const auto before = std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch());
  fw.consume("u");
  const auto after = std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch());
  ASSERT_FALSE(sent_now.empty());
  ASSERT_TRUE(std::all_of(sent_now.begin(), sent_now.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      << sent_now;
  const std::int64_t t = std::stoll(sent_now);
  EXPECT_GE(t, before.count() - 1000);
  EXPECT_LE(t, after.count() + 1000);
}

TEST_F(StrategiesTest, EveryDecisionIsExactlyOneCommand) {
  const RateLimiter limiter = make_limiter();
  const auto sl = limiter.sliding_log("api", Limit::per_second(3));
  EXPECT_CALL(*mock, command(_)).Times(3).WillRepeatedly(Return(decision_reply(1, 2, 0, 1000)));
  sl.consume("a");
  sl.peek("a");
  sl.consume("b", 3);
}

}  // namespace
