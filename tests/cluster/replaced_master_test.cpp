// A master replaced while it is silent: it stops answering (SIGSTOP, past cluster-node-timeout),
// its replica is promoted, and the calls for its slots must reach the new master while the old one
// is still silent. A silent master sends no MOVED, so only reading the slot map again finds the new
// owner.
// - AsyncCluster reads it after a call fails in transit, with an asynchronous CLUSTER SLOTS to
//   another master. Before, its map kept the stopped master, and every call for those slots failed
//   until that master came back.
// - Synchronously, with the master's breaker open (and kept open: the test clock does not move, so
//   its cooldown never ends), the decision path asks the connection to read its map again
//   (Connection::shard_refused), and the slots' next calls go to the new master and its own breaker.
//   Before, they were short-circuited until the old master's breaker let a probe through. Async
//   calls likewise: the AsyncCluster shares the limiter's map, and a refusal has it read the map
//   again without blocking.
// (relearn_test.cpp: a re-read asks the other masters in turn.)
// Each test lets the old master go at the end; it rejoins as a replica, so the cluster is whole again
// for the suites after this one.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cluster/cluster_fixture.hpp"
#include "integration/async_fixture.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/transport/async_cluster.hpp"

namespace redlimit_cluster {
namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::Source;

// "shard:state ..." of every breaker health() lists.
std::string breakers(const redlimit::Health& h) {
  std::string out;
  for (const auto& [shard, state] : h.breakers) out += std::to_string(shard) + ":" + redlimit::to_string(state) + " ";
  return out;
}

class ClusterReplacedMaster : public ClusterTest {
 protected:
  void TearDown() override {
    if (stopped_ != 0) ::kill(stopped_, SIGCONT);  // a failed test must not leave a node stopped
  }

  // The first live master, with a subject it serves and one another master serves; its replica in
  // sync (a replica takes over only then: a new cluster's take a few seconds, Redis 7 waiting 5 s
  // before a diskless full sync).
  void pick(const redlimit::Strategy& s, std::string& on_victim, std::string& elsewhere) {
    const auto masters = live_masters();
    ASSERT_EQ(masters.size(), 3u);
    victim_ = masters[0].port;
    for (int i = 0; (on_victim.empty() || elsewhere.empty()) && i < 100000; ++i) {
      const std::string who = "rm" + std::to_string(i);
      const int p = owner_port(redlimit::detail::key_slot(s.key_for(who)));
      if (p == victim_ && on_victim.empty()) on_victim = who;
      if (p != victim_ && p != 0 && elsewhere.empty()) elsewhere = who;
    }
    ASSERT_FALSE(on_victim.empty() || elsewhere.empty());
    const int replica = replica_of(masters[0]);
    ASSERT_NE(replica, 0) << "the victim has no replica";
    ASSERT_TRUE(wait_in_sync(replica)) << "the victim's replica never synced";
  }

  void stop_victim() {
    stopped_ = pid_of(victim_);
    ASSERT_NE(stopped_, 0);
    ASSERT_EQ(::kill(stopped_, SIGSTOP), 0);
  }

  // Lets the old master go; it rejoins as a replica, in sync before the next suite (load_test's
  // failover needs one).
  void resume_victim() {
    ::kill(stopped_, SIGCONT);
    stopped_ = 0;
    ASSERT_TRUE(wait_cluster_ok(std::chrono::seconds(20)));
    EXPECT_TRUE(wait_in_sync(victim_)) << "the old master did not resync as a replica";
  }

#ifdef REDLIMIT_HAVE_LIBEVENT
  // An AsyncCluster on `loop`, which it starts; each call bounded by 300 ms.
  std::shared_ptr<redlimit::AsyncCluster> attach_async(redlimit_test::LibeventLoop& loop) {
    redlimit::AsyncOptions ao;
    ao.command_timeout = 300ms;
    auto async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url), ao);
    loop.start();
    return async;
  }
#endif

  pid_t stopped_ = 0;
  int victim_ = 0;
};

TEST_F(ClusterReplacedMaster, AnOpenBreakerSendsTheSlotsToThePromotedReplica) {
  at(0s);
  redlimit::Options o = options();
  o.on_failure = redlimit::OnFailure::raise;  // a short-circuited call throws: the map is read all the same
  o.command_timeout = 300ms;  // the default breaker: 5 failures, then open for good (frozen clock)
  const auto rl = redlimit::RateLimiter::connect(cluster().url, o);
  const auto fw = rl.fixed_window("sync.replaced", Limit(1000, 1h));
  std::string on_victim, elsewhere;
  ASSERT_NO_FATAL_FAILURE(pick(fw, on_victim, elsewhere));
  ASSERT_EQ(fw.consume(on_victim).source, Source::primary);
  ASSERT_NO_FATAL_FAILURE(stop_victim());
  const auto t0 = std::chrono::steady_clock::now();
  int by_policy = 0;
  Decision last;
  while (std::chrono::steady_clock::now() - t0 < 20s) {
    try {
      last = fw.consume(on_victim);
      if (last.source == Source::primary) break;
    } catch (const redlimit::Error&) {  // a timeout, the breaker open, CLUSTERDOWN
      ++by_policy;
    }
    std::this_thread::sleep_for(50ms);
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(last.source, Source::primary) << "short-circuited for good: " << last;
  EXPECT_GT(rl.counters().breaker_short_circuits, 0u) << "the breaker never opened: nothing was tested";
  EXPECT_TRUE(last.remaining == 1000 - 2 || last.remaining == 1000 - 1) << last;
  const Decision other = fw.consume(elsewhere);
  EXPECT_EQ(other.source, Source::primary) << other;
  // The old master's breaker stays open (the clock does not move), but it serves no slot any more:
  // health() leaves it out.
  EXPECT_EQ(rl.health().breaker, redlimit::BreakerState::closed) << breakers(rl.health());
  std::printf("[ replaced master ] sync, breaker open: decided by the promoted replica %lld ms after SIGSTOP; %d "
              "calls threw meanwhile (raise), %llu of them short-circuited\n",
              static_cast<long long>(took.count()), by_policy,
              static_cast<unsigned long long>(rl.counters().breaker_short_circuits));
  ASSERT_NO_FATAL_FAILURE(resume_victim());
}

#ifdef REDLIMIT_HAVE_LIBEVENT
TEST_F(ClusterReplacedMaster, AsyncCallsGoToThePromotedReplica) {
  at(0s);
  redlimit_test::LibeventLoop loop;  // declared first: it outlives everything that uses it
  auto async = attach_async(loop);
  {  // the limiter is gone at the end of the block: the loop then returns by itself
    redlimit::Options o = options();
    o.on_failure = redlimit::OnFailure::fail_closed;
    o.breaker_threshold = 0;  // every call reaches the router (the test clock does not move)
    auto rl = redlimit::RateLimiter::connect(cluster().url, o);
    rl.attach_async(async);
    const auto fw = rl.fixed_window("async.replaced", Limit(1000, 1h));
    std::string on_victim, elsewhere;
    ASSERT_NO_FATAL_FAILURE(pick(fw, on_victim, elsewhere));
    for (const auto& who : {on_victim, elsewhere}) {
      auto f = fw.consume_future(who);
      ASSERT_EQ(redlimit_test::get_within(f).source, Source::primary) << who;
    }
    ASSERT_NO_FATAL_FAILURE(stop_victim());
    const auto t0 = std::chrono::steady_clock::now();
    int by_policy = 0, elsewhere_by_redis = 0, rounds = 0;
    Decision last, last_elsewhere;
    while (std::chrono::steady_clock::now() - t0 < 20s) {
      auto f = fw.consume_future(on_victim);
      auto g = fw.consume_future(elsewhere);
      last = redlimit_test::get_within(f);
      last_elsewhere = redlimit_test::get_within(g);
      elsewhere_by_redis += last_elsewhere.source == Source::primary;
      ++rounds;
      if (last.source == Source::primary) break;
      by_policy += last.source == Source::failure_policy;
      std::this_thread::sleep_for(50ms);
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    const int promoted = owner_port(redlimit::detail::key_slot(fw.key_for(on_victim)), victim_);
    EXPECT_EQ(last.source, Source::primary) << "the victim's slots were never decided again: " << last;
    EXPECT_NE(promoted, victim_);
    // The replica had the first admission, unless replication lost it (at most that one: the bound).
    EXPECT_TRUE(last.remaining == 1000 - 2 || last.remaining == 1000 - 1) << last;
    // The other masters answer CLUSTERDOWN while the cluster marks the victim failed and has not
    // promoted its replica yet (cluster-require-full-coverage): retried within each call's
    // deadline, a policy's answer past it. Before and after, Redis decides.
    EXPECT_EQ(last_elsewhere.source, Source::primary) << last_elsewhere;
    std::printf("[ replaced master ] async: the stopped master's subject decided by its promoted replica (port %d) %lld ms "
                "after SIGSTOP; %d calls answered by fail_closed meanwhile; the other master's %d of %d by Redis\n",
                promoted, static_cast<long long>(took.count()), by_policy, elsewhere_by_redis, rounds);
  }
  async.reset();
  loop.stop();
  ASSERT_NO_FATAL_FAILURE(resume_victim());
}

// The async twin of AnOpenBreakerSendsTheSlotsToThePromotedReplica. The limiter's breakers are
// kept per master of the limiter's slot map, which the AsyncCluster now shares (attach_async), and a
// refusal has the AsyncCluster read the map again. Before, async calls were refused by the breaker
// of the master the limiter's map still named (nothing sent through it ever corrected that map), for
// good with this frozen clock.
TEST_F(ClusterReplacedMaster, AnOpenBreakerSendsAsyncCallsToThePromotedReplica) {
  at(0s);
  redlimit_test::LibeventLoop loop;  // declared first: it outlives everything that uses it
  auto async = attach_async(loop);
  {  // the limiter is gone at the end of the block: the loop then returns by itself
    redlimit::Options o = options();
    o.on_failure = redlimit::OnFailure::fail_closed;  // the default breaker: 5 failures, then open for good
    auto rl = redlimit::RateLimiter::connect(cluster().url, o);
    rl.attach_async(async);
    const auto fw = rl.fixed_window("async.breaker", Limit(1000, 1h));
    std::string on_victim, elsewhere;
    ASSERT_NO_FATAL_FAILURE(pick(fw, on_victim, elsewhere));
    auto first = fw.consume_future(on_victim);
    ASSERT_EQ(redlimit_test::get_within(first).source, Source::primary);
    ASSERT_NO_FATAL_FAILURE(stop_victim());
    const auto t0 = std::chrono::steady_clock::now();
    int by_policy = 0;
    bool opened = false;
    Decision last;
    while (std::chrono::steady_clock::now() - t0 < 20s) {
      auto f = fw.consume_future(on_victim);
      last = redlimit_test::get_within(f);
      if (last.source == Source::primary) break;
      by_policy += last.source == Source::failure_policy;
      opened = opened || rl.health().breaker == redlimit::BreakerState::open;
      std::this_thread::sleep_for(50ms);
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    EXPECT_EQ(last.source, Source::primary) << "short-circuited for good: " << last;
    EXPECT_TRUE(opened) << "the breaker never opened: nothing was tested";
    EXPECT_GT(rl.counters().breaker_short_circuits, 0u);
    EXPECT_TRUE(last.remaining == 1000 - 2 || last.remaining == 1000 - 1) << last;
    auto g = fw.consume_future(elsewhere);
    const Decision other = redlimit_test::get_within(g);
    EXPECT_EQ(other.source, Source::primary) << other;
    EXPECT_EQ(rl.health().breaker, redlimit::BreakerState::closed) << breakers(rl.health());
    std::printf("[ replaced master ] async, breaker open: decided by the promoted replica %lld ms after SIGSTOP; %d "
                "calls answered by fail_closed meanwhile, %llu of them short-circuited\n",
                static_cast<long long>(took.count()), by_policy,
                static_cast<unsigned long long>(rl.counters().breaker_short_circuits));
  }
  async.reset();
  loop.stop();
  ASSERT_NO_FATAL_FAILURE(resume_victim());
}

#endif

}  // namespace
}  // namespace redlimit_cluster
