// A cluster that serves only some of its slots (cluster-require-full-coverage no, a slot no master
// serves: a master lost with no replica to promote, or a slot taken from its owner by an operator).
// The slots still served are decided as ever, on both paths, and a command for every master (the
// library's FUNCTION LOAD) goes to the masters the map names. Before, finding every master asked
// for slot 0's owner first: with slot 0 unserved, the map was read again and the command failed
// ("no master serves slot 0"), on every call that needed it, and AsyncCluster could not attach.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

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

// How many of the nodes that answer name an owner for `slot` in CLUSTER SLOTS, of how many answer.
std::pair<int, int> nodes_serving(int slot) {
  int serving = 0, answering = 0;
  for (int port : cluster().ports) {
    redlimit::Reply slots;
    try {
      slots = raw(port, {"CLUSTER", "SLOTS"});
    } catch (const redlimit::ConnectionError&) {
      continue;
    }
    ++answering;
    for (const auto& range : slots.elements) {
      if (range.elements.size() >= 2 && range.elements[0].integer <= slot && slot <= range.elements[1].integer) {
        ++serving;
        break;
      }
    }
  }
  return {serving, answering};
}

// Whether the node on `port` names an owner for `slot` in CLUSTER SLOTS.
bool owner_port_seen_by(int port, int slot) {
  for (const auto& range : raw(port, {"CLUSTER", "SLOTS"}).elements) {
    if (range.elements.size() >= 2 && range.elements[0].integer <= slot && slot <= range.elements[1].integer) {
      return true;
    }
  }
  return false;
}

// Slot 0 taken from its owner for the test, given back after (the owner claims it again, and the
// other nodes learn it from the owner).
class ClusterCoverage : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    owner_ = owner_port(0);
    ASSERT_NE(owner_, 0);
    config_set_everywhere("cluster-require-full-coverage", "no");
    // On every node: a node forgets an owner only when told to (or when another node claims the
    // slot). The owner first: its heartbeats claim the slot, and a node that has already forgotten
    // it takes the claim again. A heartbeat sent just before the owner forgot can still land after
    // another node did: that node is told again, for at most 5 s.
    ASSERT_EQ(raw(owner_, {"CLUSTER", "DELSLOTS", "0"}).str, "OK") << owner_;
    for (int port : cluster().ports) {
      if (port != owner_) {
        ASSERT_EQ(raw(port, {"CLUSTER", "DELSLOTS", "0"}).str, "OK") << port;
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (nodes_serving(0).first > 0 && std::chrono::steady_clock::now() - t0 < 5s) {
      std::this_thread::sleep_for(50ms);
      for (int port : cluster().ports) {
        if (port != owner_ && owner_port_seen_by(port, 0)) raw(port, {"CLUSTER", "DELSLOTS", "0"});
      }
    }
    ASSERT_EQ(nodes_serving(0).first, 0) << "a node still names an owner for slot 0";
  }
  void TearDown() override {
    if (owner_ != 0) EXPECT_EQ(raw(owner_, {"CLUSTER", "ADDSLOTS", "0"}).str, "OK");
    const auto t0 = std::chrono::steady_clock::now();
    auto seen = nodes_serving(0);
    while (seen.first < seen.second && std::chrono::steady_clock::now() - t0 < 20s) {
      std::this_thread::sleep_for(50ms);
      seen = nodes_serving(0);
    }
    EXPECT_EQ(seen.first, seen.second) << "not every node learned slot 0's owner again";
    config_set_everywhere("cluster-require-full-coverage", "yes");
    EXPECT_TRUE(wait_cluster_ok(20s)) << "slot 0 was not served again";
  }

  // A subject of `fw` in slot 0, and one in another slot.
  template <typename S>
  static std::pair<std::string, std::string> subjects(const S& fw) {
    std::string in_0, elsewhere;
    for (int i = 0; in_0.empty() && i < 1000000; ++i) {
      const std::string who = "cov" + std::to_string(i);
      (redlimit::detail::key_slot(fw.key_for(who)) == 0 ? in_0 : elsewhere) = who;
    }
    return {in_0, elsewhere};
  }

  int owner_ = 0;
};

TEST_F(ClusterCoverage, TheServedSlotsAreDecidedWhenSlotZeroIsNot) {
  redlimit::Options o = options();
  o.on_failure = redlimit::OnFailure::fail_closed;
  auto rl = redlimit::RateLimiter::connect(cluster().url, o);  // reads the map now: no slot 0 in it
  const auto fw = rl.fixed_window("coverage", Limit(10, 1h));
  const auto [in_0, elsewhere] = subjects(fw);
  ASSERT_FALSE(in_0.empty());

  const Decision d = fw.consume(elsewhere);
  EXPECT_EQ(d.source, Source::primary) << d;
  EXPECT_EQ(d.remaining, 9) << d;
  const auto batch = fw.consume_many({{elsewhere, 1}, {in_0, 1}, {elsewhere, 2}});
  EXPECT_EQ(batch[0].source, Source::primary) << batch[0];
  EXPECT_EQ(batch[0].remaining, 8) << batch[0];
  EXPECT_EQ(batch[1].source, Source::failure_policy) << batch[1] << ": no master serves its slot";
  EXPECT_EQ(batch[2].source, Source::primary) << batch[2];
  EXPECT_EQ(batch[2].remaining, 6) << batch[2];
}

// CLUSTER SLOTS commands run by the nodes that answer, so far.
long long cluster_slots_calls() {
  long long calls = 0;
  for (int port : cluster().ports) {
    try {
      const std::string info = raw(port, {"INFO", "commandstats"}).str;
      const auto at = info.find("cmdstat_cluster|slots:calls=");
      if (at != std::string::npos) calls += std::stoll(info.substr(at + 28));
    } catch (const redlimit::ConnectionError&) {
    }
  }
  return calls;
}

// Requests for an unserved slot fail at once, the map read again at most every 100 ms: a flood of
// them is not a flood of CLUSTER SLOTS (each on a connection of its own) on a cluster that is
// already degraded. The breaker is off, so that every call reaches the router; before, each read it.
TEST_F(ClusterCoverage, AnUnservedSlotReadsTheMapAtMostEvery100ms) {
  redlimit::Options o = options();
  o.on_failure = redlimit::OnFailure::fail_closed;
  o.breaker_threshold = 0;
  auto rl = redlimit::RateLimiter::connect(cluster().url, o);
  const auto fw = rl.fixed_window("coverage.flood", Limit(10, 1h));
  const auto [in_0, elsewhere] = subjects(fw);
  ASSERT_FALSE(in_0.empty());
  ASSERT_EQ(fw.consume(elsewhere).source, Source::primary);  // the library is loaded: no more reads for it

  const long long before = cluster_slots_calls();
  const auto t0 = std::chrono::steady_clock::now();
  int policy = 0;
  for (int i = 0; i < 200; ++i) policy += fw.consume(in_0).source == Source::failure_policy;
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  const long long reads = cluster_slots_calls() - before;
  EXPECT_EQ(policy, 200);
  EXPECT_LE(reads, 2 + took.count() / 100) << "map reads for 200 requests in " << took.count() << " ms";
  std::printf("[ coverage ] 200 requests for an unserved slot in %lld ms: %lld reads of the map\n",
              static_cast<long long>(took.count()), reads);
}

#ifdef REDLIMIT_HAVE_LIBEVENT
TEST_F(ClusterCoverage, AnAsyncClusterAttachesAndDecidesTheServedSlots) {
  redlimit_test::LibeventLoop loop;  // declared first: it outlives everything that uses it
  std::shared_ptr<redlimit::AsyncCluster> async;
  ASSERT_NO_THROW(async =
                      redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url)));
  loop.start();
  {  // the limiter is gone at the end of the block: the loop then returns by itself
    redlimit::Options o = options();
    o.on_failure = redlimit::OnFailure::fail_closed;
    auto rl = redlimit::RateLimiter::connect(cluster().url, o);
    rl.attach_async(async);
    async.reset();
    const auto fw = rl.fixed_window("coverage.async", Limit(10, 1h));
    const auto [in_0, elsewhere] = subjects(fw);
    ASSERT_FALSE(in_0.empty());
    auto served = fw.consume_future(elsewhere, 3);
    auto unserved = fw.consume_future(in_0);
    const Decision d = redlimit_test::get_within(served);
    EXPECT_EQ(d.source, Source::primary) << d;
    EXPECT_EQ(d.remaining, 7) << d;
    const Decision u = redlimit_test::get_within(unserved);
    EXPECT_EQ(u.source, Source::failure_policy) << u << ": no master serves its slot";
  }
  loop.stop();
}
#endif

}  // namespace
}  // namespace redlimit_cluster
