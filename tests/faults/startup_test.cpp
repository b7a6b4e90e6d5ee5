// Issue 17, item 4: starting during an outage. Under a failure policy that answers without Redis,
// RateLimiter::connect() starts while Redis is down, decides by that policy, and uses Redis as soon
// as it answers (counters().answered shows the first call it answered). Under OnFailure::raise it
// still fails fast; a server that refuses AUTH throws AuthError whatever the policy. Seeds that
// never answer hold a cluster's start-up for one deadline, not one each.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "faults/restartable_server.hpp"
#include "redlimit/redlimit.hpp"
#include "support/hung_node.hpp"
#include "support/running_clock.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::OnFailure;
using redlimit::Source;
using redlimit_faults::raw;
using redlimit_faults::RestartableServer;

redlimit::Options quick(OnFailure policy) {
  redlimit::Options o;
  o.on_failure = policy;
  o.connect_timeout = 300ms;
  o.command_timeout = 300ms;
  o.breaker_threshold = 0;  // every call tries Redis: the test sees the first one it answers
  o.clock = std::make_shared<redlimit_test::RunningClock>();  // no minute ends between the counted calls
  return o;
}

TEST(Startup, FailOpenStartsWhileRedisIsDownAndUsesRedisOnceItAnswers) {
  RestartableServer server;
  server.kill9();  // down, on a port we know
  auto limiter = redlimit::RateLimiter::connect(server.url(), quick(OnFailure::fail_open));
  const auto fw = limiter.fixed_window("startup", Limit::per_minute(2));
  for (int i = 0; i < 3; ++i) {
    const Decision d = fw.consume("u");
    EXPECT_EQ(d.source, Source::failure_policy);
    EXPECT_TRUE(d.allowed);
  }
  EXPECT_EQ(limiter.counters().answered, 0u);
  EXPECT_EQ(limiter.counters().errors, 3u);

  server.start();
  const Decision a = fw.consume("u"), b = fw.consume("u"), c = fw.consume("u");
  EXPECT_EQ(a.source, Source::primary);
  EXPECT_TRUE(a.allowed);
  EXPECT_TRUE(b.allowed);
  EXPECT_FALSE(c.allowed);  // Redis's own count: the policy's admissions were never recorded
  EXPECT_EQ(limiter.counters().answered, 3u);
}

TEST(Startup, FallbackAndClusterUrlsStartDuringAnOutageToo) {
  RestartableServer server;
  server.kill9();
  auto fallback = redlimit::RateLimiter::connect(server.url(), quick(OnFailure::fallback));
  EXPECT_EQ(fallback.fixed_window("startup", Limit::per_minute(1)).consume("u").source, Source::fallback);
  const std::string cluster = "redis-cluster://127.0.0.1:" + std::to_string(server.port());
  auto closed = redlimit::RateLimiter::connect(cluster, quick(OnFailure::fail_closed));
  const Decision d = closed.fixed_window("startup", Limit::per_minute(1)).consume("u");
  EXPECT_EQ(d.source, Source::failure_policy);
  EXPECT_FALSE(d.allowed);
}

TEST(Startup, RaiseStillFailsFast) {
  RestartableServer server;
  server.kill9();
  EXPECT_THROW(redlimit::RateLimiter::connect(server.url(), quick(OnFailure::raise)), redlimit::ConnectionError);
  const std::string cluster = "redis-cluster://127.0.0.1:" + std::to_string(server.port());
  EXPECT_THROW(redlimit::RateLimiter::connect(cluster, quick(OnFailure::raise)), redlimit::ConnectionError);
}

TEST(Startup, RefusedCredentialsThrowAuthErrorWhateverThePolicyAndNeverShowThePassword) {
  RestartableServer server;
  raw(server.url()).command({"CONFIG", "SET", "requirepass", "right-one"});
  const std::string url = "redis://:s3cret-wrong@127.0.0.1:" + std::to_string(server.port());
  for (const OnFailure policy : {OnFailure::raise, OnFailure::fail_open}) {
    try {
      redlimit::RateLimiter::connect(url, quick(policy));
      ADD_FAILURE() << "a wrong password was accepted";
    } catch (const redlimit::AuthError& e) {
      EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("AUTH"), std::string::npos) << e.what();
    }
  }
}

// The slot map read at start-up is one call: three seeds that never answer cost one command_timeout
// between them, not one each (961 ms for 300 ms before the fix); so does a Sentinel's first query.
TEST(Startup, SeedsThatNeverAnswerCostOneDeadlineBetweenThem) {
  redlimit_test::HungNode a, b, c;  // seeds that accept and never answer
  const std::string seeds = "127.0.0.1:" + std::to_string(a.port()) + ",127.0.0.1:" + std::to_string(b.port()) +
                            ",127.0.0.1:" + std::to_string(c.port());
  const auto start = std::chrono::steady_clock::now();
  auto limiter = redlimit::RateLimiter::connect("redis-cluster://" + seeds, quick(OnFailure::fail_open));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::printf("[ startup ] three silent seeds: RateLimiter::connect returned after %lld ms (deadline 300 ms)\n",
              static_cast<long long>(took.count()));
  EXPECT_LT(took.count(), 600) << "three silent seeds took " << took.count() << " ms under a 300 ms deadline";
  EXPECT_EQ(limiter.fixed_window("startup", Limit::per_minute(1)).consume("u").source, Source::failure_policy);
}

}  // namespace
