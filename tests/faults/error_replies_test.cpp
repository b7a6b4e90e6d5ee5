// Issue 17, item 2: every outage reply that Redis 7.0 can be made to give is answered by the failure
// policy (counted, Source::failure_policy) instead of escaping as a ReplyError, and Redis decides again
// once the cause is gone. One server of the test's own, one row at a time (docs/reliability.md has the
// table; LOADING, MISCONF, CLUSTERDOWN and TRYAGAIN are covered by unit tests only: they cannot be
// provoked on demand on one plain server).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>

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

struct Row {
  const char* name;
  const char* user;  // the limiter's ACL user ("" = default)
  std::function<void(redlimit::RedisConnection& admin, const RestartableServer& s)> provoke, restore;
};

std::vector<Row> rows() {
  return {
      {"NOREPLICAS", "", [](auto& a, auto&) { must(a, {"CONFIG", "SET", "min-replicas-to-write", "1"}); },
       [](auto& a, auto&) { must(a, {"CONFIG", "SET", "min-replicas-to-write", "0"}); }},
      {"OOM", "",
       [](auto& a, auto&) {
         must(a, {"CONFIG", "SET", "maxmemory-policy", "noeviction"});
         must(a, {"CONFIG", "SET", "maxmemory", "1"});
       },
       [](auto& a, auto&) { must(a, {"CONFIG", "SET", "maxmemory", "0"}); }},
      {"NOPERM", "limited",
       // Every way to run a script: FCALL is refused, so the call goes on to EVALSHA, refused too.
       [](auto& a, auto&) {
         must(a, {"ACL", "SETUSER", "limited", "on", ">pw", "~*", "+@all", "-evalsha", "-eval", "-fcall", "-function"});
       },
       [](auto& a, auto&) { must(a, {"ACL", "SETUSER", "limited", "+evalsha", "+eval", "+fcall", "+function"}); }},
      {"READONLY", "",
       [](auto& a, auto&) {
         must(a, {"CONFIG", "SET", "replica-serve-stale-data", "yes"});
         must(a, {"REPLICAOF", "127.0.0.1", "1"});  // a master that is not there: a stale replica
       },
       [](auto& a, auto&) { must(a, {"REPLICAOF", "NO", "ONE"}); }},
      {"MASTERDOWN", "",
       [](auto& a, auto&) {
         must(a, {"CONFIG", "SET", "replica-serve-stale-data", "no"});
         must(a, {"REPLICAOF", "127.0.0.1", "1"});
       },
       [](auto& a, auto&) {
         must(a, {"REPLICAOF", "NO", "ONE"});
         must(a, {"CONFIG", "SET", "replica-serve-stale-data", "yes"});
       }},
  };
}

redlimit::Options fail_open() {
  redlimit::Options o;
  o.on_failure = OnFailure::fail_open;
  o.breaker_threshold = 0;  // every call goes to Redis: each one meets the reply
  o.command_timeout = 2000ms;
  o.pool.size = 1;
  return o;
}

std::string url_for(const RestartableServer& s, const char* user) {
  if (*user == '\0') return s.url();
  return "redis://" + std::string(user) + ":pw@127.0.0.1:" + std::to_string(s.port()) + "/0";
}

TEST(ErrorReplies, EveryOutageReplyIsAnsweredByTheFailurePolicy) {
  RestartableServer server;
  auto admin = raw(server.url());
  int round = 0;
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.name);
    if (*row.user != '\0') must(admin, {"ACL", "SETUSER", row.user, "on", ">pw", "~*", "+@all"});
    auto limiter = redlimit::RateLimiter::connect(url_for(server, row.user), fail_open());
    const auto fw = limiter.fixed_window("replies" + std::to_string(round++), Limit::per_minute(1));
    row.provoke(admin, server);
    const Decision d = fw.consume("u");
    EXPECT_EQ(d.source, Source::failure_policy) << "the reply escaped the failure policy";
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(limiter.counters().errors, 1u);
    EXPECT_EQ(limiter.counters().answered, 1u);  // Redis did answer, with the outage reply
    row.restore(admin, server);
    const Decision after = fw.consume("u");
    EXPECT_EQ(after.source, Source::primary);
    EXPECT_TRUE(after.allowed);
  }
}

// -READONLY: the server became a replica under the limiter's connection (a failover demoted it).
// The connection is let go after that reply and the next call connects again, which resolves the
// URL's host name again: a managed Redis points its primary endpoint's name at the promoted replica,
// and a connection kept to the old node would be refused for as long as it lived. Seen here as a
// connection the server received after the refusal (the same host and port, no DNS on loopback).
TEST(ErrorReplies, AReplicasRefusalMakesTheNextCallConnectAgain) {
  RestartableServer server;
  auto admin = raw(server.url());
  auto limiter = redlimit::RateLimiter::connect(server.url(), fail_open());  // a pool of one connection
  const auto fw = limiter.fixed_window("reconnect", Limit::per_minute(10));
  ASSERT_EQ(fw.consume("u").source, Source::primary);
  auto connections = [&admin] {  // INFO stats' total_connections_received
    const std::string info = admin.command({"INFO", "stats"}).str, field = "total_connections_received:";
    const std::size_t at = info.find(field);
    return at == std::string::npos ? -1LL : std::stoll(info.substr(at + field.size()));
  };
  const long long before = connections();
  must(admin, {"CONFIG", "SET", "replica-serve-stale-data", "yes"});
  must(admin, {"REPLICAOF", "127.0.0.1", "1"});
  EXPECT_EQ(fw.consume("u").source, Source::failure_policy);  // -READONLY
  must(admin, {"REPLICAOF", "NO", "ONE"});
  const Decision after = fw.consume("u");
  EXPECT_EQ(after.source, Source::primary);
  EXPECT_EQ(after.remaining, 10 - 2);
  EXPECT_EQ(connections(), before + 1) << "the refused connection was used again";
}

// NOAUTH and "max number of clients reached" come to a connection opened after the change, so the
// limiter is made after it: connect() starts anyway under fail_open (the PING's answer is an outage).
TEST(ErrorReplies, RepliesToANewConnectionAreOutagesToo) {
  RestartableServer server;
  auto admin = raw(server.url());
  {
    must(admin, {"CONFIG", "SET", "requirepass", "set-later"});
    auto limiter = redlimit::RateLimiter::connect(server.url(), fail_open());
    const Decision d = limiter.fixed_window("noauth", Limit::per_minute(1)).consume("u");
    EXPECT_EQ(d.source, Source::failure_policy);
    EXPECT_EQ(limiter.counters().errors, 1u);
    must(admin, {"CONFIG", "SET", "requirepass", ""});
  }
  {
    must(admin, {"CONFIG", "SET", "maxclients", "1"});  // the admin connection is the one
    auto limiter = redlimit::RateLimiter::connect(server.url(), fail_open());
    const Decision d = limiter.fixed_window("maxclients", Limit::per_minute(1)).consume("u");
    EXPECT_EQ(d.source, Source::failure_policy);
    EXPECT_GE(limiter.counters().errors, 1u);
    must(admin, {"CONFIG", "SET", "maxclients", "10000"});
  }
}

// BUSY: another client's script runs past busy-reply-threshold; SCRIPT KILL ends it.
TEST(ErrorReplies, BusyServerIsAnOutageUntilTheScriptIsKilled) {
  RestartableServer server;
  auto admin = raw(server.url());
  must(admin, {"CONFIG", "SET", "busy-reply-threshold", "100"});
  auto limiter = redlimit::RateLimiter::connect(server.url(), fail_open());
  const auto fw = limiter.fixed_window("busy", Limit::per_minute(1));
  std::thread looping([&server] {
    auto busy = raw(server.url(), 20000ms);
    busy.command({"EVAL", "local i = 0 while true do i = i + 1 end", "0"});  // ends by SCRIPT KILL
  });
  std::this_thread::sleep_for(400ms);  // past the 100 ms threshold
  const Decision d = fw.consume("u");
  EXPECT_EQ(d.source, Source::failure_policy);
  EXPECT_EQ(limiter.counters().errors, 1u);
  redlimit::Reply killed;
  for (int i = 0; i < 50; ++i) {  // the script may need a moment to notice
    killed = admin.command({"SCRIPT", "KILL"});
    if (!killed.is_error()) break;
    std::this_thread::sleep_for(20ms);
  }
  looping.join();
  EXPECT_FALSE(killed.is_error()) << killed.str;
  EXPECT_EQ(fw.consume("u").source, Source::primary);
}

}  // namespace
