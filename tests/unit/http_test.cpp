// redlimit/http.hpp: the exact header fields of draft-ietf-httpapi-ratelimit-headers-11 (and
// Retry-After, X-RateLimit-*) for hand-made decisions and for decisions of a real in-memory limiter,
// the statuses of decisions and exceptions, and the InvalidArgument every bad input gets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "unit/mock_connection.hpp"

// gtest prints a Field as its bytes otherwise (found by argument-dependent lookup).
namespace redlimit::http {
inline void PrintTo(const Field& f, std::ostream* os) { *os << f.name << ": " << f.value; }
}  // namespace redlimit::http

namespace {

using redlimit::Decision;
using redlimit::InvalidArgument;
using redlimit::Limit;
using redlimit::LimitState;
using redlimit::Source;
using redlimit::http::Field;
using redlimit::http::HeaderOptions;
using redlimit::http::headers;
using redlimit::http::Quota;
using namespace std::chrono_literals;
using Fields = std::vector<Field>;

Decision decision(bool allowed, std::int64_t limit, std::int64_t remaining, std::chrono::microseconds retry,
                  std::chrono::microseconds reset) {
  Decision d;
  d.allowed = allowed;
  d.limit = limit;
  d.remaining = remaining;
  d.retry_after = retry;
  d.reset_after = reset;
  return d;
}

// ---- one limit -----------------------------------------------------------------------------------

TEST(HttpTest, AdmittedSingleLimit) {
  const Quota q = redlimit::http::quota(Limit::per_minute(100));
  EXPECT_EQ(q.name, "100/1m");
  EXPECT_EQ(headers(decision(true, 100, 99, 0us, 60s), q),
            (Fields{{"RateLimit-Policy", R"("100/1m";q=100;w=60)"}, {"RateLimit", R"("100/1m";r=99;t=60)"}}));
}

TEST(HttpTest, LastUnitAdmittedSaysRemainingZeroWithoutRetryAfter) {
  const Quota q = redlimit::http::quota(Limit::per_second(10));
  EXPECT_EQ(headers(decision(true, 10, 0, 0us, 1'877'000us), q),
            (Fields{{"RateLimit-Policy", R"("10/1s";q=10;w=1)"}, {"RateLimit", R"("10/1s";r=0;t=2)"}}));
}

// Retry-After rounds up (a 1 us wait is 1 s, never 0), and an exhausted limit's "t" is never later
// than Retry-After: the two fields agree on when to come back.
TEST(HttpTest, RejectionRoundsWaitsUpAndKeepsTNotPastRetryAfter) {
  const Quota q = redlimit::http::quota(Limit::per_second(10));
  EXPECT_EQ(
      headers(decision(false, 10, 0, 600ms, 1'877'000us), q),
      (Fields{{"RateLimit-Policy", R"("10/1s";q=10;w=1)"}, {"RateLimit", R"("10/1s";r=0;t=1)"}, {"Retry-After", "1"}}));
  EXPECT_EQ(headers(decision(false, 10, 0, 1us, 1us), q).at(2), (Field{"Retry-After", "1"}));
  EXPECT_EQ(
      headers(decision(false, 10, 0, 1'000'001us, 1'500'000us), q),
      (Fields{{"RateLimit-Policy", R"("10/1s";q=10;w=1)"}, {"RateLimit", R"("10/1s";r=0;t=2)"}, {"Retry-After", "2"}}));
  // A limit with quota left (the request cost more than it has) keeps its own reset.
  EXPECT_EQ(headers(decision(false, 10, 3, 500ms, 1'900'000us), q).at(1), (Field{"RateLimit", R"("10/1s";r=3;t=2)"}));
  // A rejection that names no wait still tells the client to wait a second, not to come back at once.
  EXPECT_EQ(headers(decision(false, 10, 0, 0us, 0us), q).at(2), (Field{"Retry-After", "1"}));
}

TEST(HttpTest, HugeWindowsAndLimits) {
  const Quota q{"decade", std::int64_t{1} << 40, std::chrono::hours(24 * 365 * 10)};
  EXPECT_EQ(headers(decision(true, q.limit, q.limit - 1, 0us, q.window - 1us), q),
            (Fields{{"RateLimit-Policy", R"("decade";q=1099511627776;w=315360000)"},
                    {"RateLimit", R"("decade";r=1099511627775;t=315360000)"}}));
  // A sub-second window is one second: "w" has no fractions and must not be 0.
  EXPECT_EQ(headers(decision(true, 5, 4, 0us, 250ms), Quota{"burst", 5, 250ms}).at(0).value, R"("burst";q=5;w=1)");
}

TEST(HttpTest, NamesAreEscapedSfStrings) {
  const Quota q{R"(a "quoted" \ name)", 5, 1s};
  EXPECT_EQ(headers(decision(true, 5, 4, 0us, 1s), q),
            (Fields{{"RateLimit-Policy", R"("a \"quoted\" \\ name";q=5;w=1)"},
                    {"RateLimit", R"("a \"quoted\" \\ name";r=4;t=1)"}}));
}

TEST(HttpTest, NamesOutsidePrintableAsciiAreRejected) {
  for (const std::string& bad : {std::string("a\r\nSet-Cookie: x"), std::string("tab\there"), std::string("del\x7f"),
                                 std::string("caf\xc3\xa9"), std::string("nul\0x", 5), std::string()}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(headers(decision(true, 5, 4, 0us, 1s), Quota{bad, 5, 1s}), InvalidArgument);
  }
  try {
    headers(decision(true, 5, 4, 0us, 1s), Quota{"x\ny", 5, 1s});
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("quota name must be printable ASCII"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("byte 0x0a at position 1"));
  }
}

TEST(HttpTest, TokenBucketWithoutWindowUnitPartitionKeyAndLegacyFields) {
  HeaderOptions o;
  o.unit = "requests";
  o.partition_key = "user-42";
  o.legacy = true;
  EXPECT_EQ(headers(decision(false, 20, 0, 2'500'000us, 9'000'000us), Quota{"bucket", 20, 0us}, o),
            (Fields{{"RateLimit-Policy", R"("bucket";q=20;qu="requests";pk=:dXNlci00Mg==:)"},
                    {"RateLimit", R"("bucket";r=0;t=3;pk=:dXNlci00Mg==:)"},
                    {"Retry-After", "3"},
                    {"X-RateLimit-Limit", "20"},
                    {"X-RateLimit-Remaining", "0"},
                    {"X-RateLimit-Reset", "3"}}));
  o.partition_key = std::string("\0\xff\xfe", 3);  // any bytes: base64
  o.legacy = false;
  o.policy_field = false;
  o.unit.clear();
  EXPECT_EQ(headers(decision(true, 20, 19, 0us, 1s), Quota{"b", 20, 0us}, o),
            (Fields{{"RateLimit", R"("b";r=19;t=1;pk=:AP/+:)"}}));
  o.unit = "bytes\n";
  EXPECT_THROW(headers(decision(true, 20, 19, 0us, 1s), Quota{"b", 20, 0us}, o), InvalidArgument);
}

// ---- policies: one item per limit, each with its own remaining and reset -------------------------

TEST(HttpTest, PolicyOfTwoLimitsStatesEachLimitsOwnQuota) {
  const auto limits = redlimit::parse_limits("10/s; 300/min");
  Decision d = decision(true, 10, 9, 0us, 100s);
  d.limits = {LimitState{10, 1s, 9, 1'877'000us}, LimitState{300, 60s, 299, 100s}};
  HeaderOptions o;
  o.legacy = true;
  EXPECT_EQ(headers(d, redlimit::http::quotas(limits), o),
            (Fields{{"RateLimit-Policy", R"("10/1s";q=10;w=1, "300/1m";q=300;w=60)"},
                    {"RateLimit", R"("10/1s";r=9;t=2, "300/1m";r=299;t=100)"},
                    {"X-RateLimit-Limit", "10"},
                    {"X-RateLimit-Remaining", "9"},
                    {"X-RateLimit-Reset", "2"}}));
}

// The limiter's own decisions, in memory on a ManualClock (14 Nov 2023 22:13:20 UTC: 20 s into a
// minute, 800 s into an hour). A 1 s sliding window is back to full 2 s after its newest bucket
// began; the minute 120 s after its bucket began (100 s from now); the hour 7200 s (6400 s).
TEST(HttpTest, PolicyOfThreeLimitsFromTheLimiter) {
  auto clock = std::make_shared<redlimit::ManualClock>();
  redlimit::Options options;
  options.clock = clock;
  const auto limiter = redlimit::RateLimiter::in_memory(options);
  const auto api = limiter.policy("api", redlimit::parse_limits("10/s; 300/min; 1000/h"));
  const auto quotas = redlimit::http::quotas(api.limits());
  Decision d = api.consume("user-42");
  EXPECT_EQ(headers(d, quotas),
            (Fields{{"RateLimit-Policy", R"("10/1s";q=10;w=1, "300/1m";q=300;w=60, "1000/1h";q=1000;w=3600)"},
                    {"RateLimit", R"("10/1s";r=9;t=2, "300/1m";r=299;t=100, "1000/1h";r=999;t=6400)"}}));
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(api.consume("user-42").allowed);
  d = api.consume("user-42");  // the 11th in this second: the 1 s limit rejects, retry 1.1 s
  ASSERT_FALSE(d.allowed);
  EXPECT_EQ(d.limit_index, 0u);
  EXPECT_EQ(d.retry_after, 1100ms);
  HeaderOptions o;
  o.legacy = true;
  o.policy_field = false;
  EXPECT_EQ(headers(d, quotas, o),
            (Fields{{"RateLimit", R"("10/1s";r=0;t=2, "300/1m";r=290;t=100, "1000/1h";r=990;t=6400)"},
                    {"Retry-After", "2"},
                    {"X-RateLimit-Limit", "10"},
                    {"X-RateLimit-Remaining", "0"},
                    {"X-RateLimit-Reset", "2"}}));
  EXPECT_EQ(redlimit::http::status(d), 429);
  // A sliding window is a policy of one limit: its decisions carry that limit's state too.
  const auto sw = limiter.sliding_window("sw", Limit::per_minute(100));
  EXPECT_EQ(headers(sw.consume("user-42"), redlimit::http::quota(sw.limit())).at(1),
            (Field{"RateLimit", R"("100/1m";r=99;t=100)"}));
}

TEST(HttpTest, QuotasThatAreNotTheDecisionsAreRejected) {
  Decision d = decision(true, 10, 9, 0us, 100s);
  d.limits = {LimitState{10, 1s, 9, 1s}, LimitState{300, 60s, 299, 100s}};
  EXPECT_THROW(headers(d, redlimit::http::quotas(redlimit::parse_limits("10/s"))), InvalidArgument);
  EXPECT_THROW(headers(d, redlimit::http::quotas(redlimit::parse_limits("10/s; 200/min"))), InvalidArgument);
  EXPECT_THROW(headers(decision(true, 10, 9, 0us, 1s), redlimit::http::quota(Limit::per_second(11))), InvalidArgument);
  EXPECT_THROW(headers(d, std::vector<Quota>{}), InvalidArgument);
}

// A policy's block() decision has no limit's own quota: no items, only the wait.
TEST(HttpTest, PolicyBlockStatesNoQuota) {
  const auto quotas = redlimit::http::quotas(redlimit::parse_limits("10/s; 300/min"));
  EXPECT_EQ(headers(decision(false, 10, 0, 30s, 30s), quotas),
            (Fields{{"RateLimit-Policy", R"("10/1s";q=10;w=1, "300/1m";q=300;w=60)"}, {"Retry-After", "30"}}));
}

// ---- decisions made without a store, and shadow mode ---------------------------------------------

// fail_open / fail_closed know nothing of the quota: the limiter leaves every quota field 0 and the
// headers claim none of it (no RateLimit, no X-RateLimit-*); fail_closed still says when to retry.
TEST(HttpTest, FailurePolicyDecisionsClaimNoQuota) {
  for (const auto policy : {redlimit::OnFailure::fail_open, redlimit::OnFailure::fail_closed}) {
    SCOPED_TRACE(static_cast<int>(policy));
    auto mock = std::make_shared<::testing::StrictMock<MockConnection>>();
    redlimit::Options options;
    options.clock = std::make_shared<redlimit::ManualClock>();
    options.on_failure = policy;
    options.breaker_threshold = 0;  // no breaker: fail_closed's wait is 1 s
    const redlimit::RateLimiter limiter(mock, options);
    const auto api = limiter.policy("api", redlimit::parse_limits("10/s; 300/min"));
    EXPECT_CALL(*mock, command(::testing::_)).WillOnce(::testing::Throw(redlimit::ConnectionError("refused")));
    const Decision d = api.consume("user-42");
    EXPECT_EQ(d.source, Source::failure_policy);
    EXPECT_EQ(d.limit, 0);
    EXPECT_TRUE(d.limits.empty());
    HeaderOptions o;
    o.legacy = true;
    Fields want{{"RateLimit-Policy", R"("10/1s";q=10;w=1, "300/1m";q=300;w=60)"}};
    if (policy == redlimit::OnFailure::fail_closed) want.push_back({"Retry-After", "1"});
    EXPECT_EQ(headers(d, redlimit::http::quotas(api.limits()), o), want);
    EXPECT_EQ(redlimit::http::status(d), policy == redlimit::OnFailure::fail_open ? 200 : 503);
  }
}

TEST(HttpTest, LocalRejectCacheDecisionsClaimNoQuota) {
  Decision d = decision(false, 10, 0, 1'500'000us, 1'500'000us);
  d.source = Source::local_cache;
  EXPECT_EQ(headers(d, redlimit::http::quota(Limit::per_second(10))),
            (Fields{{"RateLimit-Policy", R"("10/1s";q=10;w=1)"}, {"Retry-After", "2"}}));
  EXPECT_EQ(redlimit::http::status(d), 429);
}

// Shadow mode admits what the limit would reject: the quota fields are true (r=0), the request was
// served, so there is no Retry-After and the status is 200.
TEST(HttpTest, ShadowRejectionsAreAdmittedWithTrueQuotaFields) {
  auto clock = std::make_shared<redlimit::ManualClock>();
  redlimit::Options options;
  options.clock = clock;
  options.shadow = true;
  const auto limiter = redlimit::RateLimiter::in_memory(options);
  const auto fw = limiter.fixed_window("login", Limit::per_minute(1));
  ASSERT_TRUE(fw.consume("10.0.0.1").allowed);
  const Decision d = fw.consume("10.0.0.1");
  ASSERT_TRUE(d.allowed);
  ASSERT_TRUE(d.shadow_rejected);
  EXPECT_EQ(headers(d, redlimit::http::quota(fw.limit())),
            (Fields{{"RateLimit-Policy", R"("1/1m";q=1;w=60)"}, {"RateLimit", R"("1/1m";r=0;t=40)"}}));
  EXPECT_EQ(redlimit::http::status(d), 200);
}

// ---- bad input -----------------------------------------------------------------------------------

TEST(HttpTest, NegativeOrAbsurdValuesAreRejected) {
  const Quota q = redlimit::http::quota(Limit::per_second(10));
  EXPECT_THROW(headers(decision(true, 10, -1, 0us, 1s), q), InvalidArgument);
  EXPECT_THROW(headers(decision(true, -10, 1, 0us, 1s), q), InvalidArgument);
  EXPECT_THROW(headers(decision(false, 10, 0, -1us, 1s), q), InvalidArgument);
  EXPECT_THROW(headers(decision(true, 10, 1, 0us, -1s), q), InvalidArgument);
  Decision d = decision(true, 10, 1, 0us, 1s);
  d.delay = -1us;
  EXPECT_THROW(headers(d, q), InvalidArgument);
  EXPECT_THROW(headers(decision(true, 10, INT64_MAX, 0us, 1s), q), InvalidArgument);  // beyond 15 digits
  EXPECT_THROW(headers(decision(true, 10, 1, 0us, 1s), Quota{"x", -1, 1s}), InvalidArgument);
  EXPECT_THROW(headers(decision(true, 10, 1, 0us, 1s), Quota{"x", 10, -1s}), InvalidArgument);
  d = decision(true, 10, 9, 0us, 1s);
  d.limits = {LimitState{10, 1s, -9, 1s}};
  EXPECT_THROW(headers(d, q), InvalidArgument);
  d.limits = {LimitState{10, 1s, 9, -1s}};
  EXPECT_THROW(headers(d, q), InvalidArgument);
  d.limits = {LimitState{10, 1s, 9, 1s}};
  d.limit_index = 1;
  EXPECT_THROW(headers(d, q), InvalidArgument);
}

// ---- statuses ------------------------------------------------------------------------------------

TEST(HttpTest, ExceptionsMapToStatusesAndBodiesWithoutTheirText) {
  struct Case {
    std::exception_ptr error;
    int status;
  };
  const Case cases[] = {
      {std::make_exception_ptr(InvalidArgument("subject longer than 1024 bytes")), 400},
      {std::make_exception_ptr(redlimit::ConnectionError("connect to 10.1.2.3:6379: refused")), 503},
      {std::make_exception_ptr(redlimit::TimeoutError("10.1.2.3:6379: no reply in 1000 ms")), 503},
      {std::make_exception_ptr(redlimit::UnavailableError("LOADING 10.1.2.3:6379")), 503},
      {std::make_exception_ptr(redlimit::AuthError("10.1.2.3:6379 refused AUTH")), 500},
      {std::make_exception_ptr(redlimit::ReplyError("ERR 10.1.2.3:6379")), 500},
      {std::make_exception_ptr(std::runtime_error("10.1.2.3:6379")), 500},
  };
  for (const Case& c : cases) {
    try {
      std::rethrow_exception(c.error);
    } catch (const std::exception& e) {
      SCOPED_TRACE(e.what());
      EXPECT_EQ(redlimit::http::status(e), c.status);
      const auto r = redlimit::http::error_response(e);
      EXPECT_EQ(r.status, c.status);
      EXPECT_THAT(r.body, ::testing::Not(::testing::HasSubstr("10.1.2.3")));
      EXPECT_THAT(r.body, ::testing::Not(::testing::HasSubstr("1024")));
    }
  }
  EXPECT_EQ(redlimit::http::error_response(InvalidArgument("x")).body, R"({"error":"bad request"})");
  EXPECT_EQ(redlimit::http::error_response(redlimit::TimeoutError("x")).body,
            R"({"error":"rate limiter unavailable"})");
  EXPECT_EQ(redlimit::http::error_response(std::logic_error("x")).body, R"({"error":"internal error"})");
}

TEST(HttpTest, DecisionStatuses) {
  EXPECT_EQ(redlimit::http::status(decision(true, 10, 9, 0us, 1s)), 200);
  EXPECT_EQ(redlimit::http::status(decision(false, 10, 0, 1s, 1s)), 429);
  Decision fallback = decision(false, 10, 0, 1s, 1s);
  fallback.source = Source::fallback;  // the in-memory fallback decided: a real rejection
  EXPECT_EQ(redlimit::http::status(fallback), 429);
}

}  // namespace
