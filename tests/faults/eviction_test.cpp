// Issue 17, item 6: a server that evicts keys under memory pressure forgets subjects' state and
// over-admits; RateLimiter::connect reads maxmemory-policy and says so once through the metrics sink.
#include <gtest/gtest.h>

#include <mutex>
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

}  // namespace
