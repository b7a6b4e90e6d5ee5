// One master down (issue 18, items 5 and 6): a master is killed with SIGKILL and started again on its
// port after the test. While it is down, the breaker of its shard opens and only its subjects are
// short-circuited; a batch spanning the three masters returns the decisions the live masters made,
// and the failure policy's answer for the dead master's requests only.
//
// The dead phase of each test lasts well under cluster-node-timeout (1 s), so the cluster has not
// marked the master failed (nor started a failover) when it comes back. In case a slow machine
// stretches it, the nodes run with cluster-require-full-coverage no during these tests: healthy
// masters then keep serving their slots even once the dead one is marked failed, as they would in
// production with that setting (with the default, every master answers CLUSTERDOWN from that moment
// until a replica is promoted, which no client can help).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_fixture.hpp"
#include "redlimit/detail/keys.hpp"

namespace redlimit_cluster {
namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::OnFailure;
using redlimit::Source;

class ClusterOneMasterDown : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    config_set_everywhere("cluster-require-full-coverage", "no");
    const auto masters = live_masters();
    ASSERT_EQ(masters.size(), 3u);
    victim_ = masters[0].port;
  }

  void TearDown() override {
    if (killed_) {
      restart_node(victim_);
      killed_ = false;
    }
    EXPECT_TRUE(wait_cluster_ok(20s)) << "the cluster did not recover after the test";
    config_set_everywhere("cluster-require-full-coverage", "yes");
  }

  // A limiter of the test's own, over a ClusterConnection of its own, on the fixture's clock (which
  // does not move unless the test moves it: a breaker that opens stays open).
  redlimit::RateLimiter limiter(OnFailure policy, int breaker_threshold) const {
    redlimit::Options o = options();
    o.on_failure = policy;
    o.breaker_threshold = breaker_threshold;
    o.command_timeout = 1000ms;
    o.connect_timeout = 500ms;
    return redlimit::RateLimiter(
        std::make_shared<redlimit::ClusterConnection>(redlimit::parse_cluster_url(cluster().url), o), o);
  }

  // `per_master` subjects on each master, the victim's first (from one read of the slot map, made
  // while every master is up).
  std::vector<std::string> subjects(const redlimit::Strategy& s, int per_master) {
    if (owners_.empty()) {
      for (const auto& m : live_masters()) {
        for (auto [lo, hi] : m.slots) owners_.push_back({lo, hi, m.port});
      }
    }
    std::map<int, std::vector<std::string>> by_port;
    for (int i = 0; i < 2000; ++i) {
      const std::string who = "down-" + std::to_string(i);
      auto& v = by_port[port_of(s, who)];
      if (static_cast<int>(v.size()) < per_master) v.push_back(who);
    }
    std::vector<std::string> out = by_port[victim_];
    for (const auto& [port, v] : by_port) {
      if (port != victim_) out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }

  int port_of(const redlimit::Strategy& s, const std::string& who) const {
    const int slot = redlimit::detail::key_slot(s.key_for(who));
    for (const auto& o : owners_) {
      if (slot >= o[0] && slot <= o[1]) return o[2];
    }
    return 0;
  }

  bool on_victim(const redlimit::Strategy& s, const std::string& who) const { return port_of(s, who) == victim_; }

  void kill_victim() {
    const auto& ports = cluster().ports;
    const auto i = static_cast<std::size_t>(std::find(ports.begin(), ports.end(), victim_) - ports.begin());
    ASSERT_LT(i, ports.size());
    ASSERT_EQ(::kill(cluster().pids[i], SIGKILL), 0);
    killed_ = true;
    for (int n = 0; n < 200; ++n) {  // until the port refuses connections
      try {
        raw(victim_, {"PING"});
      } catch (const redlimit::ConnectionError&) {
        return;
      }
      std::this_thread::sleep_for(5ms);
    }
    FAIL() << "the killed master still answers";
  }

  int victim_ = 0;
  bool killed_ = false;
  std::vector<std::array<int, 3>> owners_;  // slot ranges: lo, hi, master's port
};

// Item 5. Default breaker (5 failures, 1 s), fail_closed, 5 subjects per master, 100 rounds, each
// round the dead master's subjects first. Before (one breaker per limiter), the dead master's five
// failures in a row opened it for every subject: all 1,000 calls to the healthy masters were
// short-circuited (and where a healthy call came between two failures its success reset the count,
// so the dead master was never cut off at all: every call to it paid a failed connect). Now only
// the dead master's shard is short-circuited, after its own five failures.
TEST_F(ClusterOneMasterDown, OnlyTheDeadMastersSubjectsAreShortCircuited) {
  at(0s);
  constexpr int kRounds = 100;
  constexpr std::int64_t L = 1000;
  const auto rl = limiter(OnFailure::fail_closed, 5);
  const auto fw = rl.fixed_window("down.breaker", Limit(L, 1h));
  const auto who = subjects(fw, 5);
  ASSERT_EQ(who.size(), 15u);
  for (const auto& w : who) ASSERT_EQ(fw.consume(w).source, Source::primary) << w;
  kill_victim();
  int healthy_calls = 0, healthy_not_primary = 0, dead_calls = 0, dead_by_policy = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (const auto& w : who) {
      const Decision d = fw.consume(w);
      if (on_victim(fw, w)) {
        ++dead_calls;
        dead_by_policy += d.source == Source::failure_policy && !d.allowed;
      } else {
        ++healthy_calls;
        healthy_not_primary += d.source != Source::primary;
      }
    }
  }
  const redlimit::Counters c = rl.counters();
  std::printf("[ one master down ] calls to healthy masters not decided by Redis: %d of %d; calls to the dead "
              "master answered by fail_closed: %d of %d; errors %llu, breaker short-circuits %llu\n",
              healthy_not_primary, healthy_calls, dead_by_policy, dead_calls,
              static_cast<unsigned long long>(c.errors), static_cast<unsigned long long>(c.breaker_short_circuits));
  EXPECT_EQ(healthy_not_primary, 0);
  EXPECT_EQ(dead_by_policy, dead_calls);
  EXPECT_EQ(c.errors, 5u);  // the threshold; the clock does not move, so no probe since
  EXPECT_EQ(c.breaker_short_circuits, static_cast<std::uint64_t>(dead_calls - 5));
  for (const auto& w : who) {
    if (!on_victim(fw, w)) EXPECT_EQ(fw.peek(w).remaining, L - 1 - kRounds) << w;  // every call recorded
  }

  // Back: after the cooldown one call probes the restarted master, which closes its breaker.
  restart_node(victim_);
  killed_ = false;
  ASSERT_TRUE(wait_cluster_ok(20s));
  at(1s);
  const Decision probe = fw.consume(who.front());
  EXPECT_EQ(probe.source, Source::primary) << probe;
  EXPECT_EQ(fw.consume(who.front()).source, Source::primary);
  EXPECT_EQ(rl.counters().breaker_short_circuits, c.breaker_short_circuits);
}

// Item 6. A batch of 9 (3 subjects per master, limit 3), 4 times, no breaker (so that every batch
// reaches the dead master). Before, the dead master's ConnectionError failed every batch as a whole:
// fail_open admitted all 24 live requests (the 4th time over the limit, though the live masters had
// recorded them and rejected it), fail_closed rejected all 24. Now each live request gets its own
// decision and only the dead master's requests the policy's answer.
TEST_F(ClusterOneMasterDown, ABatchKeepsTheDecisionsOfTheLiveMasters) {
  at(0s);
  constexpr std::int64_t L = 3;
  const auto open = limiter(OnFailure::fail_open, 0);
  const auto closed = limiter(OnFailure::fail_closed, 0);
  const auto guarded = limiter(OnFailure::fail_closed, 5);  // the default breaker: opens for one shard
  const auto raise = limiter(OnFailure::raise, 0);
  const auto fw_open = open.fixed_window("down.batch.open", Limit(L, 1h));
  const auto fw_closed = closed.fixed_window("down.batch.closed", Limit(L, 1h));
  const auto fw_guarded = guarded.fixed_window("down.batch.guarded", Limit(L, 1h));
  const auto fw_raise = raise.fixed_window("down.batch.raise", Limit(L, 1h));
  std::map<const redlimit::Strategy*, std::vector<std::string>> subjects_of;
  for (const auto* fw : {&fw_open, &fw_closed, &fw_guarded, &fw_raise}) subjects_of[fw] = subjects(*fw, 3);
  kill_victim();
  int kept = 0, live = 0;
  for (const auto* fw : {&fw_open, &fw_closed, &fw_guarded}) {
    const bool admit_on_failure = fw == &fw_open;
    const auto& who = subjects_of[fw];
    ASSERT_EQ(who.size(), 9u);
    std::vector<redlimit::Request> batch;
    for (const auto& w : who) batch.push_back({w, 1});
    for (std::int64_t round = 0; round <= L; ++round) {
      const std::vector<Decision> got = fw->consume_many(batch);
      ASSERT_EQ(got.size(), batch.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE(who[i] + " round " + std::to_string(round));
        if (on_victim(*fw, who[i])) {
          EXPECT_EQ(got[i].source, Source::failure_policy) << got[i];
          EXPECT_EQ(got[i].allowed, admit_on_failure) << got[i];
          continue;
        }
        ++live;
        kept += got[i].source == Source::primary;
        EXPECT_EQ(got[i].source, Source::primary) << got[i];
        EXPECT_EQ(got[i].allowed, round < L) << got[i];
        EXPECT_EQ(got[i].remaining, std::max<std::int64_t>(L - 1 - round, 0)) << got[i];
      }
    }
    for (const auto& w : who) {
      if (!on_victim(*fw, w)) EXPECT_EQ(fw->peek(w).remaining, 0) << w;  // Redis recorded exactly L
    }
  }
  std::printf("[ one master down ] batches spanning 3 masters, one dead: %d of %d live decisions returned\n", kept,
              live);
  EXPECT_GT(guarded.counters().breaker_short_circuits, 0u);  // the dead shard's breaker opened...
  // ... and under raise the batch throws (documented: the live masters' decisions are recorded but
  // not returned), while a single call to a live master is decided.
  const auto& who = subjects_of[&fw_raise];
  std::vector<redlimit::Request> batch;
  for (const auto& w : who) batch.push_back({w, 1});
  EXPECT_THROW(fw_raise.consume_many(batch), redlimit::ConnectionError);
  EXPECT_EQ(fw_raise.consume(who.back()).source, Source::primary);
}

}  // namespace
}  // namespace redlimit_cluster
