// Issue 17, item 1, on a real server: a breaker whose half-open probe meets an outage reply that is
// not a broken connection (max clients, NOREPLICAS) must still settle, so that once Redis is healthy
// again a later probe reaches it and closes the breaker. Before the fix the probe's ReplyError left
// the breaker half-open with no probe in flight: every later call was short-circuited for good
// (290 of 290 over 3 s in the report). The unit test ResilienceTest.EveryWayOutOfAProbeSettlesTheBreaker
// covers each way out with a mocked connection; this one replays the reported sequence end to end.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "faults/restartable_server.hpp"
#include "redlimit/redlimit.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::OnFailure;
using redlimit::Source;
using redlimit_faults::must;
using redlimit_faults::raw;
using redlimit_faults::RestartableServer;

redlimit::Options breaker_options() {
  redlimit::Options o;
  o.on_failure = OnFailure::fail_open;
  o.breaker_threshold = 2;
  o.breaker_cooldown = 200ms;
  o.command_timeout = 1000ms;
  o.connect_timeout = 1000ms;
  o.pool.size = 1;
  return o;
}

struct Case {
  const char* name;
  // Run on the admin connection after the restart: the limiter's probe then meets the outage reply.
  std::function<void(redlimit::RedisConnection&)> provoke, restore;
};

// kill -9, five calls (the breaker opens), restart with the outage cause set, wait out the cooldown,
// one probe meets the reply; then heal the server: Redis must decide again within a bounded time.
void replay(const Case& c) {
  SCOPED_TRACE(c.name);
  RestartableServer server;
  auto limiter = redlimit::RateLimiter::connect(server.url(), breaker_options());
  const auto fw = limiter.fixed_window(std::string("breaker-") + c.name, Limit::per_minute(1000));
  ASSERT_EQ(fw.consume("u").source, Source::primary);

  server.kill9();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(fw.consume("u").source, Source::failure_policy);
  EXPECT_GT(limiter.counters().breaker_short_circuits, 0u) << "the breaker should have opened";

  server.start();
  auto admin = raw(server.url());  // with maxclients 1, this is the one client the server takes
  c.provoke(admin);
  std::this_thread::sleep_for(300ms);  // past the cooldown: the next call probes
  const auto errors_before = limiter.counters().errors;
  const Decision probe = fw.consume("u");
  EXPECT_EQ(probe.source, Source::failure_policy) << "the probe should have met the outage reply";
  EXPECT_GT(limiter.counters().errors, errors_before) << "the probe's outage reply must be counted";

  c.restore(admin);
  // Each cooldown lets one probe through; 10 s is many cooldowns on a loaded CI box.
  const auto until = std::chrono::steady_clock::now() + 10s;
  Source source = Source::failure_policy;
  int calls = 0;
  while (source != Source::primary && std::chrono::steady_clock::now() < until) {
    source = fw.consume("u").source;
    ++calls;
    if (source != Source::primary) std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(source, Source::primary) << "the breaker never let a call reach the healed server (" << calls
                                     << " calls)";
  // Closed again: the next calls go to Redis, none short-circuited.
  const auto short_circuits = limiter.counters().breaker_short_circuits;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(fw.consume("u").source, Source::primary);
  EXPECT_EQ(limiter.counters().breaker_short_circuits, short_circuits);
}

TEST(BreakerRecovery, AProbeThatMeetsMaxClientsStillLetsTheBreakerClose) {
  replay({"maxclients", [](auto& a) { must(a, {"CONFIG", "SET", "maxclients", "1"}); },
          [](auto& a) { must(a, {"CONFIG", "SET", "maxclients", "10000"}); }});
}

TEST(BreakerRecovery, AProbeThatMeetsNoreplicasStillLetsTheBreakerClose) {
  replay({"noreplicas", [](auto& a) { must(a, {"CONFIG", "SET", "min-replicas-to-write", "1"}); },
          [](auto& a) { must(a, {"CONFIG", "SET", "min-replicas-to-write", "0"}); }});
}

}  // namespace
