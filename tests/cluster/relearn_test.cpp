// AsyncCluster reads the slot map again after a master fails a call in transit, with a CLUSTER
// SLOTS to another master (relearn). The masters other than the failed one are asked in turn, one
// re-read after another, so a second master that cannot answer either (down too, or cut off from
// this client) does not keep the map from ever being read again. Before, every re-read asked the
// first other master by name.
// In a 3-master cluster two masters down leave no majority, so no failover and no new map: the test
// cuts masters off from the client instead, while the cluster still sees them (the case of a client
// partitioned from part of a cluster, or of a larger cluster with two masters down).
// A slot whose owner the map does not know is sent to a master the router has a connection to,
// without reading the map on the calling thread (ASlotWithNoKnownOwnerIsSentWithoutBlocking).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_fixture.hpp"
#include "integration/async_fixture.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/transport/async_cluster.hpp"
#include "support/hung_node.hpp"

namespace redlimit_cluster {
namespace {

#ifdef REDLIMIT_HAVE_LIBEVENT

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::Source;

// A master's connection the test can cut off from this client: while cut, every command fails in
// transit (a ConnectionError, on the loop's thread) without reaching Redis.
class Cuttable final : public redlimit::AsyncConnection {
 public:
  explicit Cuttable(std::shared_ptr<redlimit::AsyncConnection> real) : real_(std::move(real)) {}
  void command_async(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error) override {
    command_async_until(std::move(argv), std::move(on_reply), std::move(on_error), real_->call_deadline());
  }
  Deadline call_deadline() const override { return real_->call_deadline(); }
  void command_async_until(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error,
                           Deadline deadline) override {
    if (cut) {
      real_->post([on_error] { on_error(std::make_exception_ptr(redlimit::ConnectionError("cut off by the test"))); });
      return;
    }
    real_->command_async_until(std::move(argv), std::move(on_reply), std::move(on_error), deadline);
  }
  void post(std::function<void()> task) override { real_->post(std::move(task)); }
  void post_after(std::chrono::milliseconds delay, std::function<void()> task) override {
    real_->post_after(delay, std::move(task));
  }
  void send_now() override { real_->send_now(); }

  std::atomic<bool> cut{false};

 private:
  std::shared_ptr<redlimit::AsyncConnection> real_;
};

// An AsyncCluster on `loop` whose every master connection is a Cuttable, kept by port.
class CuttableCluster {
 public:
  explicit CuttableCluster(redlimit_test::LibeventLoop& loop) {
    redlimit::AsyncOptions ao;
    ao.command_timeout = 300ms;
    async_ = redlimit::AsyncCluster::attach(
        redlimit::parse_cluster_url(cluster().url),
        [this, &loop, ao](const redlimit::Endpoint& e) -> std::shared_ptr<redlimit::AsyncConnection> {
          auto c = std::make_shared<Cuttable>(redlimit::AsyncRedis::attach_libevent(loop.base(), e, ao));
          std::lock_guard<std::mutex> lock(mutex_);
          made_[e.port] = c;
          return c;
        },
        ao);
  }
  const std::shared_ptr<redlimit::AsyncCluster>& async() const { return async_; }
  void cut(int port, bool on) {
    std::lock_guard<std::mutex> lock(mutex_);
    ASSERT_EQ(made_.count(port), 1u) << port;
    made_[port]->cut = on;
  }
  // Lets go of every connection, the last owner of each, so that the loop returns.
  void release() {
    async_.reset();
    std::lock_guard<std::mutex> lock(mutex_);
    made_.clear();
  }

 private:
  std::mutex mutex_;
  std::map<int, std::shared_ptr<Cuttable>> made_;  // every master connection, by port
  std::shared_ptr<redlimit::AsyncCluster> async_;
};

class ClusterRelearn : public ClusterTest {};

// Two masters cut off from the client: A, whose slots a manual failover then gives to its replica,
// and B, the first other master by name (the AsyncCluster keeps its masters by "host:port"). A's
// subject fails in transit until a re-read asks C and learns the promoted replica.
TEST_F(ClusterRelearn, AReReadAsksTheOtherMastersInTurn) {
  at(0s);
  auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  std::sort(masters.begin(), masters.end(),
            [](const NodeInfo& x, const NodeInfo& y) { return std::to_string(x.port) < std::to_string(y.port); });
  const NodeInfo a = masters[2], b = masters[0];
  const int replica = replica_of(a);
  ASSERT_NE(replica, 0) << "A has no replica";
  ASSERT_TRUE(wait_in_sync(replica)) << "A's replica never synced";

  redlimit_test::LibeventLoop loop;  // declared first: it outlives everything that uses it
  CuttableCluster masters_seen(loop);
  loop.start();
  {  // the limiter is gone at the end of the block: the loop then returns by itself
    redlimit::Options o = options();
    o.on_failure = redlimit::OnFailure::fail_closed;
    o.breaker_threshold = 0;  // every call reaches the router (the test clock does not move)
    auto rl = redlimit::RateLimiter::connect(cluster().url, o);
    rl.attach_async(masters_seen.async());
    const auto fw = rl.fixed_window("async.turns", Limit(1000, 1h));
    std::string on_a;
    for (int i = 0; on_a.empty() && i < 100000; ++i) {
      const std::string who = "turn" + std::to_string(i);
      if (owner_port(redlimit::detail::key_slot(fw.key_for(who))) == a.port) on_a = who;
    }
    ASSERT_FALSE(on_a.empty());
    auto first = fw.consume_future(on_a);
    ASSERT_EQ(redlimit_test::get_within(first).source, Source::primary);

    ASSERT_NO_FATAL_FAILURE(masters_seen.cut(a.port, true));
    ASSERT_NO_FATAL_FAILURE(masters_seen.cut(b.port, true));
    EXPECT_EQ(raw(replica, {"CLUSTER", "FAILOVER"}).str, "OK");
    const auto t0 = std::chrono::steady_clock::now();
    int failed = 0;
    Decision last;
    while (std::chrono::steady_clock::now() - t0 < 20s) {
      auto f = fw.consume_future(on_a);
      last = redlimit_test::get_within(f);
      if (last.source == Source::primary) break;
      failed += last.source == Source::failure_policy;
      std::this_thread::sleep_for(50ms);
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    EXPECT_EQ(owner_port(redlimit::detail::key_slot(fw.key_for(on_a))), replica)
        << "the manual failover did not happen: nothing was tested";
    EXPECT_EQ(last.source, Source::primary) << "A's subject was never decided again: " << last;
    EXPECT_GT(failed, 0) << "no call failed in transit: no re-read was needed";
    EXPECT_EQ(last.remaining, 1000 - 2) << last;  // a manual failover loses no write
    std::printf(
        "[ relearn ] A and B cut off: A's subject decided by its promoted replica %lld ms after CLUSTER FAILOVER, %d "
        "calls answered by fail_closed meanwhile\n",
        static_cast<long long>(took.count()), failed);
  }
  ASSERT_NO_FATAL_FAILURE(masters_seen.cut(a.port, false));
  ASSERT_NO_FATAL_FAILURE(masters_seen.cut(b.port, false));
  masters_seen.release();
  loop.stop();
  ASSERT_TRUE(wait_cluster_ok(std::chrono::seconds(20)));
  EXPECT_TRUE(wait_in_sync(a.port)) << "the old master did not sync as a replica";
}

using redlimit_test::HungNode;  // support/hung_node.hpp

// A seed that accepts connections and never answers, first in the URL, before the cluster's own: the
// slot map read at start-up (one call, its deadline 2 s) gives it half of the call's time left and
// asks the next seed, so connect() succeeds under `raise` and the limiter decides on every master.
// Before, the hung seed took the whole call and connect() threw: one hung seed of four, an outage.
TEST_F(ClusterRelearn, AHungSeedFirstCostsHalfOfTheSlotMapRead) {
  HungNode hung;
  redlimit::Options o = options();
  o.on_failure = redlimit::OnFailure::raise;
  o.command_timeout = 2000ms;
  const std::string scheme = "redis-cluster://";
  ASSERT_EQ(cluster().url.compare(0, scheme.size(), scheme), 0) << cluster().url;
  const std::string url =
      scheme + "127.0.0.1:" + std::to_string(hung.port()) + "," + cluster().url.substr(scheme.size());
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<redlimit::RateLimiter> rl;
  try {
    rl.emplace(redlimit::RateLimiter::connect(url, o));
  } catch (const redlimit::Error& e) {
    FAIL() << "connect() failed: " << e.what();
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::printf("[ relearn ] a hung seed first: connect() returned after %lld ms (deadline 2000 ms)\n",
              static_cast<long long>(took.count()));
  EXPECT_GE(took, 900ms);  // the hung seed was asked first, and waited for: half the call
  const auto fw = rl->fixed_window("hung.seed", Limit(1000, 1h));
  std::set<int> owners;
  for (int i = 0; owners.size() < 3 && i < 1000; ++i) {
    const std::string who = "seed" + std::to_string(i);
    const Decision d = fw.consume(who);
    EXPECT_EQ(d.source, Source::primary) << d;
    owners.insert(owner_port(redlimit::detail::key_slot(fw.key_for(who))));
  }
  EXPECT_EQ(owners.size(), 3u);  // decided on every master
}

// A limiter whose slot map is empty (it started while its one seed did not answer: here a seed
// that accepts connections and never answers, as a hung node) hands that map to the AsyncCluster
// (attach_async). A slot whose owner the map does not know is sent to a master the router has a
// connection to, whose MOVED names the owner, and an asynchronous CLUSTER SLOTS fills the map.
// Before, the router read the map with a blocking CLUSTER SLOTS on the thread that routed the call
// (the loop's, for calls that share a script call), which asked the hung seed, held the loop for
// the command timeout and failed the call: every call, for as long as the seed hung.
TEST_F(ClusterRelearn, ASlotWithNoKnownOwnerIsSentWithoutBlocking) {
  HungNode hung;
  redlimit::Options o = options();
  o.on_failure = redlimit::OnFailure::fail_closed;  // starts without a map, where raise would throw
  o.connect_timeout = 2000ms;
  o.command_timeout = 2000ms;
  auto unmapped = std::make_shared<redlimit::ClusterConnection>(
      redlimit::parse_cluster_url("redis-cluster://127.0.0.1:" + std::to_string(hung.port())), o);
  ASSERT_TRUE(unmapped->masters().empty()) << "the map was read: nothing would be tested";

  redlimit_test::LibeventLoop loop;  // declared first: it outlives everything that uses it
  redlimit::AsyncOptions ao;
  ao.command_timeout = 2000ms;
  auto async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url), ao);
  loop.start();
  {  // the limiter is gone at the end of the block: the loop then returns by itself
    redlimit::RateLimiter rl(unmapped, o);
    rl.attach_async(async);
    async.reset();
    const auto fw = rl.fixed_window("async.unmapped", Limit(1000, 1h));
    std::map<int, std::string> subject_of;  // one subject on each master, by the master's port
    for (int i = 0; subject_of.size() < 3 && i < 100000; ++i) {
      const std::string who = "unmapped" + std::to_string(i);
      subject_of.emplace(owner_port(redlimit::detail::key_slot(fw.key_for(who))), who);
    }
    ASSERT_EQ(subject_of.size(), 3u);
    for (const auto& [port, who] : subject_of) {
      const auto t0 = std::chrono::steady_clock::now();
      auto f = fw.consume_future(who);
      const Decision d = redlimit_test::get_within(f);
      // Routing reads nothing (the calls of a loop turn are routed on the loop's thread): a read
      // of the map would ask the hung seed and hold the loop for its 2 s.
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms) << "the call waited for a read of the map";
      EXPECT_EQ(d.source, Source::primary) << "the subject on :" << port << " was not decided by Redis: " << d;
      EXPECT_EQ(d.remaining, 1000 - 1) << d;
    }
    // The map learns every owner (the MOVED followed, the asynchronous re-read).
    const auto t0 = std::chrono::steady_clock::now();
    while (unmapped->masters().size() < 3 && std::chrono::steady_clock::now() - t0 < 10s) {
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(unmapped->masters().size(), 3u);
    for (const auto& [port, who] : subject_of) {
      EXPECT_EQ(unmapped->node_for_slot(redlimit::detail::key_slot(fw.key_for(who))),
                "127.0.0.1:" + std::to_string(port));
    }
  }
  loop.stop();
}

#endif

}  // namespace
}  // namespace redlimit_cluster
