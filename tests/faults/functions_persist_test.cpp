// Redis Functions are data (issue 13): saved in the RDB file and replicated. A server restarted from
// its RDB, or a promoted replica, still has the library, so a limiter settled on Functions goes on
// with FCALL alone: no "Function not found", no reload, nothing like the EVALSHA path's NOSCRIPT,
// which a restart always meets (shown side by side).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "redlimit/redlimit.hpp"
#include "restartable_server.hpp"

namespace redlimit_faults {
namespace {

using redlimit::ScriptPath;

std::int64_t calls_of(redlimit::RedisConnection& admin, const std::string& command) {
  const redlimit::Reply info = admin.command({"INFO", "commandstats"});
  const std::string needle = "cmdstat_" + command + ":calls=";
  const auto pos = info.str.find(needle);
  return pos == std::string::npos ? 0 : std::stoll(info.str.substr(pos + needle.size()));
}

// The decision after a restart: the first call may meet the broken connection (the pool drops it
// and the next call reconnects).
redlimit::Decision consume_across_restart(const redlimit::FixedWindow& fw) {
  for (int i = 0;; ++i) {
    try {
      return fw.consume("s");
    } catch (const redlimit::ConnectionError&) {
      if (i == 3) throw;
    }
  }
}

// A clock held still: the decisions before and after a restart or a promotion (seconds apart) are
// in one window even when the run crosses the hour.
redlimit::Options persist_options() {
  redlimit::Options o;
  o.pool.size = 1;
  o.breaker_threshold = 0;
  o.clock = std::make_shared<redlimit::ManualClock>();
  return o;
}

// Saves, restarts, and returns the commands the restarted server got for one more decision.
struct AfterRestart {
  std::int64_t remaining, fcalls, loads, evals, shas, script_loads;
};
AfterRestart restart_and_consume(RestartableServer& server, const redlimit::FixedWindow& fw) {
  {
    auto admin = raw(server.url());
    must(admin, {"SAVE"});
  }
  server.restart();  // kill -9 and start: the RDB file saved above is loaded
  const redlimit::Decision d = consume_across_restart(fw);
  auto admin = raw(server.url());
  return {d.remaining,
          calls_of(admin, "fcall"),
          calls_of(admin, "function|load"),
          calls_of(admin, "eval"),
          calls_of(admin, "evalsha"),
          calls_of(admin, "script|load")};
}

TEST(FunctionsPersist, ARestartFromRdbKeepsTheLibraryAndTheCount) {
  RestartableServer server;
  auto limiter = redlimit::RateLimiter::connect(server.url(), persist_options());
  const auto fw = limiter.fixed_window("persist", redlimit::Limit::per_hour(10));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fw.consume("s").allowed);
  ASSERT_EQ(limiter.health().scripts, ScriptPath::functions);
  const AfterRestart got = restart_and_consume(server, fw);
  EXPECT_EQ(got.remaining, 6);
  EXPECT_EQ(got.fcalls, 1);
  EXPECT_EQ(got.loads, 0) << "the library came back with the RDB file";
  EXPECT_EQ(got.evals + got.shas, 0);
}

TEST(FunctionsPersist, TheEvalshaPathMeetsNoscriptAfterTheSameRestart) {
  RestartableServer server;
  redlimit::Options o = persist_options();
  o.redis_functions = false;
  auto limiter = redlimit::RateLimiter::connect(server.url(), o);
  const auto fw = limiter.fixed_window("persist", redlimit::Limit::per_hour(10));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fw.consume("s").allowed);
  const AfterRestart got = restart_and_consume(server, fw);
  EXPECT_EQ(got.remaining, 6);
  // The script cache is not saved: NOSCRIPT, then SCRIPT LOAD and the EVALSHA again behind it.
  EXPECT_EQ(got.shas, 2);
  EXPECT_EQ(got.script_loads, 1);
  EXPECT_EQ(got.evals, 0);
}

TEST(FunctionsPersist, APromotedReplicaHasTheLibrary) {
  RestartableServer primary, replica;
  auto admin = raw(replica.url());
  must(admin, {"REPLICAOF", "127.0.0.1", std::to_string(primary.port())});
  auto limiter = redlimit::RateLimiter::connect(primary.url(), persist_options());
  const auto fw = limiter.fixed_window("promote", redlimit::Limit::per_hour(10));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(fw.consume("s").allowed);
  // Wait (bounded) until the replica has the writes, then promote it.
  auto p = raw(primary.url());
  must(p, {"SET", "promote:marker", "1"});
  for (int i = 0; i < 500 && admin.command({"GET", "promote:marker"}).str != "1"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(admin.command({"GET", "promote:marker"}).str, "1") << "the replica did not catch up in 10 s";
  must(admin, {"REPLICAOF", "NO", "ONE"});
  must(admin, {"CONFIG", "RESETSTAT"});
  // A connection already settled on Functions, as a Sentinel limiter's is when its master changes.
  auto conn = std::make_shared<redlimit::RedisConnection>(redlimit::parse_url(replica.url()),
                                                          std::chrono::milliseconds(2000),
                                                          std::chrono::milliseconds(2000));
  conn->set_script_path(ScriptPath::functions);
  redlimit::RateLimiter promoted(conn, persist_options());
  const auto fw2 = promoted.fixed_window("promote", redlimit::Limit::per_hour(10));
  EXPECT_EQ(fw2.consume("s").remaining, 6);
  EXPECT_EQ(calls_of(admin, "fcall"), 1);
  EXPECT_EQ(calls_of(admin, "function|load"), 0) << "the library was replicated";
  EXPECT_EQ(calls_of(admin, "eval") + calls_of(admin, "evalsha"), 0);
}

}  // namespace
}  // namespace redlimit_faults
