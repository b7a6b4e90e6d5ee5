// One stalled master (issue 18, item 8): a master stopped with SIGSTOP, for less than the cluster's
// node timeout (so no failover starts), under load on its own slots and on the other masters' slots.
// The calls on its slots come back within the call's deadline (the refresh after a timeout asks the
// stalled node last and never waits past the deadline); the calls on the healthy masters' slots are
// all decided by Redis, none short-circuited (the breaker is per node); once the node resumes,
// Redis decides its subjects again. A batch whose first master is stalled still reaches the other
// masters at once and keeps their decisions.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_env.hpp"
#include "redlimit/detail/keys.hpp"
#include "support/running_clock.hpp"

namespace redlimit_cluster {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr auto kStallDeadline = 200ms;
constexpr auto kStallMargin = 300ms;  // a loaded 2-core CI box
constexpr auto kStall = 700ms;   // under scripts/cluster.sh's cluster-node-timeout (1 s): no failover

// `n` subjects of `fw` whose slots the master on `port` serves (or, with `on` false, does not serve).
std::vector<std::string> subjects_on(const redlimit::Strategy& fw, const redlimit::ClusterConnection& conn,
                                     int port, bool on, std::size_t n) {
  const std::string node = "127.0.0.1:" + std::to_string(port);
  std::vector<std::string> out;
  for (int i = 0; out.size() < n && i < 100000; ++i) {
    const std::string who = "s" + std::to_string(i);
    const auto slot = static_cast<std::uint16_t>(redlimit::detail::key_slot(fw.key_for(who)));
    if ((conn.node_for_slot(slot) == node) == on) out.push_back(who);
  }
  return out;
}

struct Worst {
  std::chrono::milliseconds took{0};
  int calls = 0, from_redis = 0, from_policy = 0, errors = 0;
};

// Calls fw.consume on `who` until `until`, on one thread; what it saw.
Worst hammer(const redlimit::Strategy& fw, const std::vector<std::string>& who, Steady::time_point until) {
  Worst w;
  for (std::size_t n = 0; Steady::now() < until; ++n) {
    const auto start = Steady::now();
    try {
      const auto d = fw.consume(who[n % who.size()]);
      ++(d.source == redlimit::Source::primary ? w.from_redis : w.from_policy);
    } catch (const redlimit::Error&) {
      ++w.errors;
    }
    ++w.calls;
    w.took = std::max(w.took, std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start));
  }
  return w;
}

// The 200 ms deadline for every step, fail_open with the default breaker (5 failures, 1 s), and no
// health-check PING to a stopped node.
redlimit::Options stall_options() {
  redlimit::Options o;
  o.command_timeout = kStallDeadline;
  o.connect_timeout = kStallDeadline;
  o.on_failure = redlimit::OnFailure::fail_open;
  o.pool.health_check_interval = 0ms;
  o.clock = std::make_shared<redlimit_test::RunningClock>();  // exact counts: no hour ends mid-test
  return o;
}

TEST(ClusterStall, OneStoppedMasterSlowsOnlyItsSlotsAndNeverPastTheDeadline) {
  ASSERT_FALSE(cluster().url.empty()) << "the cluster did not start";
  flush_all_masters();
  redlimit::Options o = stall_options();
  o.pool.size = 2;
  auto conn = std::make_shared<redlimit::ClusterConnection>(redlimit::parse_cluster_url(cluster().url), o);
  redlimit::RateLimiter limiter(conn, o);
  const auto fw = limiter.fixed_window("stall", redlimit::Limit::per_hour(1000000));

  const auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  const int victim = masters.front().port;
  const pid_t pid = pid_of(victim);
  ASSERT_NE(pid, 0);
  const auto stalled = subjects_on(fw, *conn, victim, true, 8);
  const auto healthy = subjects_on(fw, *conn, victim, false, 8);
  ASSERT_EQ(stalled.size(), 8u);
  ASSERT_EQ(healthy.size(), 8u);
  for (const auto& s : stalled) ASSERT_EQ(fw.consume(s).source, redlimit::Source::primary);
  for (const auto& s : healthy) ASSERT_EQ(fw.consume(s).source, redlimit::Source::primary);

  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const auto until = Steady::now() + kStall - 100ms;
  std::vector<Worst> on_stalled(3), on_healthy(3);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] { on_stalled[t] = hammer(fw, stalled, until); });
    threads.emplace_back([&, t] { on_healthy[t] = hammer(fw, healthy, until); });
  }
  for (auto& th : threads) th.join();
  std::this_thread::sleep_until(until + 100ms);
  ::kill(pid, SIGCONT);

  Worst s, h;
  for (const auto& w : on_stalled) {
    s.took = std::max(s.took, w.took);
    s.calls += w.calls, s.from_redis += w.from_redis, s.from_policy += w.from_policy, s.errors += w.errors;
  }
  for (const auto& w : on_healthy) {
    h.took = std::max(h.took, w.took);
    h.calls += w.calls, h.from_redis += w.from_redis, h.from_policy += w.from_policy, h.errors += w.errors;
  }
  std::printf("[ stall ] master %d stopped %lld ms: its slots %d calls (%d by the failure policy), worst %lld ms; "
              "other slots %d calls (%d by Redis, %d by the failure policy), worst %lld ms\n",
              victim, static_cast<long long>(kStall.count()), s.calls, s.from_policy,
              static_cast<long long>(s.took.count()), h.calls, h.from_redis, h.from_policy,
              static_cast<long long>(h.took.count()));
  EXPECT_GT(s.from_policy, 0) << "the stalled master's subjects should have met the deadline";
  EXPECT_EQ(s.errors + h.errors, 0) << "fail_open answers every outage";
  EXPECT_LT(s.took.count(), (kStallDeadline + kStallMargin).count())
      << "a call on the stalled slots outlived its deadline";
  EXPECT_GT(h.calls, 0);
  EXPECT_EQ(h.from_policy, 0) << "a healthy master's subjects were answered without Redis";
  EXPECT_LT(h.took.count(), (kStallDeadline + kStallMargin).count());

  // Resumed: Redis decides the stalled master's subjects again within a bounded time.
  redlimit::Source source = redlimit::Source::failure_policy;
  for (const auto stop = Steady::now() + 10s; Steady::now() < stop; std::this_thread::sleep_for(50ms)) {
    source = fw.consume(stalled.front()).source;
    if (source == redlimit::Source::primary) break;
  }
  EXPECT_EQ(source, redlimit::Source::primary);
}

// A batch over every master whose first master (in the order shares are sent: shard numbers) is
// stopped: the other masters get their shares before the stalled one is waited for, so their
// decisions are Redis's, and the batch ends at its deadline. Sent one master after another, the
// stalled master's timeout would have used the whole deadline, and the other shares would never
// have left (every decision then the failure policy's).
TEST(ClusterStall, ABatchReachesTheOtherMastersWhileItsFirstMasterIsStopped) {
  ASSERT_FALSE(cluster().url.empty()) << "the cluster did not start";
  flush_all_masters();
  const redlimit::Options o = stall_options();
  auto conn = std::make_shared<redlimit::ClusterConnection>(redlimit::parse_cluster_url(cluster().url), o);
  redlimit::RateLimiter limiter(conn, o);
  const auto fw = limiter.fixed_window("stall-batch", redlimit::Limit::per_hour(10));

  // Four subjects a master, the stalled master's first in the batch; the victim is the master whose
  // share is sent first.
  const auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  std::vector<std::pair<std::size_t, std::vector<std::string>>> by_shard;
  for (const auto& m : masters) {
    auto who = subjects_on(fw, *conn, m.port, true, 4);
    ASSERT_EQ(who.size(), 4u);
    by_shard.push_back({conn->node_of(fw.key_for(who.front())), std::move(who)});
  }
  std::sort(by_shard.begin(), by_shard.end());
  const int victim = owner_port(redlimit::detail::key_slot(fw.key_for(by_shard.front().second.front())));
  const pid_t pid = pid_of(victim);
  ASSERT_NE(pid, 0);
  std::vector<redlimit::Request> batch;
  for (const auto& [shard, who] : by_shard) {
    for (const auto& s : who) batch.push_back({s, 1});
  }
  for (const auto& d : fw.consume_many(batch)) ASSERT_EQ(d.source, redlimit::Source::primary);  // warm pools

  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const auto start = Steady::now();
  const auto decisions = fw.consume_many(batch);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start);
  ::kill(pid, SIGCONT);

  int from_redis = 0;
  for (std::size_t i = 0; i < decisions.size(); ++i) {
    const bool stalled = i < 4;
    EXPECT_EQ(decisions[i].source, stalled ? redlimit::Source::failure_policy : redlimit::Source::primary) << i;
    if (!stalled && decisions[i].source == redlimit::Source::primary) {
      ++from_redis;
      EXPECT_EQ(decisions[i].remaining, 8) << "the second of 10 an hour";
    }
  }
  std::printf("[ stall ] batch of 12, its first master (%d) stopped: %d of 8 decided by the live masters, %lld ms\n",
              victim, from_redis, static_cast<long long>(took.count()));
  EXPECT_EQ(from_redis, 8);
  EXPECT_LT(took.count(), (kStallDeadline + kStallMargin).count());
}

// A master's share that stalls midway: a blocking command (BLPOP on an empty list, for longer than
// the deadline) behind a command the master answered. Redis writes the answered command's reply
// when the client blocks, as it answers the first part of a long pipeline before it reads the rest.
// The reply read before the stall stands; the blocked command's outcome is unknown (a transit
// failure, never sent again); the other master's share is answered. Before, the whole share failed,
// the answered command with it.
TEST(ClusterStall, AShareThatStallsMidwayKeepsTheRepliesReadBeforeTheStall) {
  ASSERT_FALSE(cluster().url.empty()) << "the cluster did not start";
  flush_all_masters();
  const redlimit::Options o = stall_options();
  redlimit::ClusterConnection conn(redlimit::parse_cluster_url(cluster().url), o);
  const std::string first = "{midway}a", blocked = "{midway}b";
  const auto slot = [](const std::string& key) { return static_cast<std::uint16_t>(redlimit::detail::key_slot(key)); };
  ASSERT_EQ(conn.command({"PING"}).str, "PONG");  // the map, read
  std::string other;
  for (int i = 0; other.empty() && i < 1000; ++i) {
    const std::string key = "{other" + std::to_string(i) + "}c";
    if (conn.node_for_slot(slot(key)) != conn.node_for_slot(slot(first))) other = key;
  }
  ASSERT_FALSE(other.empty());
  const auto start = Steady::now();
  const auto replies = conn.pipeline({{"INCR", first}, {"BLPOP", blocked, "2"}, {"INCR", other}});
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start);
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0].integer, 1) << replies[0].str;
  EXPECT_TRUE(redlimit::is_transit_failure(replies[1])) << replies[1].str;
  EXPECT_EQ(replies[2].integer, 1) << replies[2].str;
  EXPECT_LT(took.count(), (kStallDeadline + kStallMargin).count());
  EXPECT_EQ(raw(owner_port(slot(first)), {"GET", first}).str, "1");  // sent once
}

}  // namespace
}  // namespace redlimit_cluster
