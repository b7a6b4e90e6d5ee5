// Issue 17, item 6: a server that evicts keys under memory pressure forgets subjects' state and
// over-admits; the limiter reads maxmemory-policy on every new server connection (at connect, on a
// reconnect, and when a limiter started during an outage first reaches Redis) and says so through the
// metrics sink once per change to an evicting policy.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "faults/restartable_server.hpp"
#include "redlimit/redlimit.hpp"

namespace {

using redlimit_faults::raw;
using redlimit_faults::RestartableServer;

class Warnings final : public redlimit::MetricsSink {
 public:
  void on_event(const redlimit::MetricsEvent&) noexcept override {}
  void on_warning(std::string_view message) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_.emplace_back(message);
  }
  std::vector<std::string> messages() {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> messages_;
};

std::vector<std::string> warnings_at_connect(const RestartableServer& server) {
  auto sink = std::make_shared<Warnings>();
  redlimit::Options o;
  o.metrics = sink;
  auto limiter = redlimit::RateLimiter::connect(server.url(), o);
  static int calls = 0;  // a subject per connect: the limiter still decides, and admits
  EXPECT_TRUE(limiter.fixed_window("evict", redlimit::Limit::per_minute(1)).consume(std::to_string(++calls)).allowed);
  return sink->messages();
}

TEST(Eviction, AnEvictingServerIsReportedOnceAtConnect) {
  RestartableServer server;
  auto admin = raw(server.url());
  EXPECT_TRUE(warnings_at_connect(server).empty()) << "noeviction and no maxmemory: nothing to say";

  admin.command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
  EXPECT_TRUE(warnings_at_connect(server).empty()) << "no maxmemory: nothing is ever evicted";

  admin.command({"CONFIG", "SET", "maxmemory", "200mb"});
  for (const char* policy : {"allkeys-lru", "volatile-lru", "allkeys-random", "volatile-ttl"}) {
    SCOPED_TRACE(policy);
    admin.command({"CONFIG", "SET", "maxmemory-policy", policy});
    const auto said = warnings_at_connect(server);
    ASSERT_EQ(said.size(), 1u);
    EXPECT_NE(said[0].find(policy), std::string::npos) << said[0];
    EXPECT_NE(said[0].find("noeviction"), std::string::npos) << said[0];
  }
  admin.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  EXPECT_TRUE(warnings_at_connect(server).empty());
}

redlimit::Options lazy_options(const std::shared_ptr<Warnings>& sink) {
  redlimit::Options o;
  o.metrics = sink;
  o.on_failure = redlimit::OnFailure::fail_open;
  o.breaker_threshold = 0;  // every call tries Redis: the test waits for the first one it answers
  o.connect_timeout = std::chrono::milliseconds(200);
  o.command_timeout = std::chrono::milliseconds(500);
  return o;
}

// Consumes until Redis itself answers one call (the failure policy answers while it cannot), at most
// 5 s. Returns whether it did.
bool until_redis_answers(redlimit::RateLimiter& limiter, const redlimit::FixedWindow& window) {
  const auto answered = limiter.counters().answered;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  static int subject = 0;
  while (std::chrono::steady_clock::now() < until) {
    (void)window.consume("s" + std::to_string(++subject));
    if (limiter.counters().answered > answered) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void make_evicting(const RestartableServer& server) {
  auto admin = raw(server.url());
  admin.command({"CONFIG", "SET", "maxmemory", "200mb"});
  admin.command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
}

TEST(Eviction, ALimiterStartedDuringAnOutageChecksWhenRedisFirstAnswers) {
  RestartableServer server;
  server.kill9();
  auto sink = std::make_shared<Warnings>();
  auto limiter = redlimit::RateLimiter::connect(server.url(), lazy_options(sink));
  const auto window = limiter.fixed_window("evict-lazy", redlimit::Limit::per_minute(100));
  EXPECT_TRUE(window.consume("before").allowed) << "fail_open answers while Redis is down";
  EXPECT_EQ(limiter.counters().answered, 0u);

  server.start();
  make_evicting(server);
  ASSERT_TRUE(until_redis_answers(limiter, window));
  const auto said = sink->messages();
  ASSERT_EQ(said.size(), 1u) << "checked on the first connection that reached Redis";
  EXPECT_NE(said[0].find("allkeys-lru"), std::string::npos) << said[0];
  for (int i = 0; i < 20; ++i) (void)window.consume("again");
  EXPECT_EQ(sink->messages().size(), 1u) << "said once, not once per call";
}

TEST(Eviction, AReconnectToAServerThatNowEvictsIsReportedOncePerChange) {
  RestartableServer server;
  auto sink = std::make_shared<Warnings>();
  auto limiter = redlimit::RateLimiter::connect(server.url(), lazy_options(sink));
  const auto window = limiter.fixed_window("evict-reconnect", redlimit::Limit::per_minute(100));
  ASSERT_TRUE(until_redis_answers(limiter, window));
  EXPECT_TRUE(sink->messages().empty()) << "noeviction: nothing to say";

  for (int round = 1; round <= 2; ++round) {
    SCOPED_TRACE(round);
    server.restart();  // the limiter's connection breaks; the next call reconnects
    make_evicting(server);
    ASSERT_TRUE(until_redis_answers(limiter, window));
    EXPECT_EQ(sink->messages().size(), static_cast<std::size_t>(round)) << "the reconnect was checked";
    ASSERT_TRUE(until_redis_answers(limiter, window));
    EXPECT_EQ(sink->messages().size(), static_cast<std::size_t>(round)) << "said once per change";
    server.restart();  // back to noeviction: the next change to evicting is said again
    ASSERT_TRUE(until_redis_answers(limiter, window));
    EXPECT_EQ(sink->messages().size(), static_cast<std::size_t>(round));
  }
}

}  // namespace
