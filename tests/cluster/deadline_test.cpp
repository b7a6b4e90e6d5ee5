// End-to-end deadlines on a cluster (issue 17, item 3): every master paused with CLIENT PAUSE, eight
// threads over pools of two connections per node, command_timeout 200 ms (pool.wait_timeout left at
// 1 s). Every call, consume and consume_many (split by slot), comes back within the deadline plus a
// margin, and decisions come from Redis again once the pause ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_env.hpp"

namespace redlimit_cluster {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr auto kDeadline = 200ms;
constexpr auto kMargin = 300ms;  // a loaded 2-core CI box
constexpr int kThreads = 8;

TEST(ClusterDeadline, ClientPauseOnEveryMasterEveryCallWithinTheDeadline) {
  ASSERT_FALSE(cluster().url.empty()) << "the cluster did not start";
  flush_all_masters();
  redlimit::Options o;
  o.command_timeout = kDeadline;
  o.connect_timeout = kDeadline;
  o.on_failure = redlimit::OnFailure::fail_open;
  o.breaker_threshold = 0;
  o.pool.size = 2;
  o.pool.health_check_interval = 0ms;
  auto conn = std::make_shared<redlimit::ClusterConnection>(redlimit::parse_cluster_url(cluster().url), o);
  redlimit::RateLimiter limiter(conn, o);
  auto fw = limiter.fixed_window("deadline", redlimit::Limit::per_hour(1000000));
  ASSERT_EQ(fw.consume("warm").source, redlimit::Source::primary);

  const auto masters = live_masters();
  ASSERT_FALSE(masters.empty());
  for (const auto& m : masters) {
    ASSERT_EQ(raw(m.port, {"CLIENT", "PAUSE", "2000"}).type, redlimit::Reply::Type::status);
  }
  std::vector<std::chrono::milliseconds> single(kThreads, 0ms), batch(kThreads, 0ms);
  std::vector<int> from_policy(kThreads, 0);
  std::vector<std::thread> threads;
  const auto until = Steady::now() + 1500ms;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const auto i = static_cast<std::size_t>(t);
      const std::string s = "t" + std::to_string(t), a = s + "a", b = s + "b";
      for (int n = 0; Steady::now() < until; ++n) {
        const bool many = (n + t) % 2 == 1;
        const auto start = Steady::now();
        try {
          if (many) {
            for (const auto& d : fw.consume_many({{s, 1}, {a, 1}, {b, 1}})) {
              from_policy[i] += d.source == redlimit::Source::failure_policy;
            }
          } else {
            from_policy[i] += fw.consume(s).source == redlimit::Source::failure_policy;
          }
        } catch (const redlimit::Error&) {
        }
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start);
        auto& worst = many ? batch[i] : single[i];
        worst = std::max(worst, took);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& m : masters) raw(m.port, {"CLIENT", "UNPAUSE"});
  const auto worst_single = *std::max_element(single.begin(), single.end());
  const auto worst_batch = *std::max_element(batch.begin(), batch.end());
  int policy = 0;
  for (int p : from_policy) policy += p;
  std::printf("[ deadline ] cluster CLIENT PAUSE, %d threads over 2 connections per node: worst consume %lld ms, "
              "worst consume_many %lld ms (%d decisions from the failure policy)\n",
              kThreads, static_cast<long long>(worst_single.count()), static_cast<long long>(worst_batch.count()),
              policy);
  EXPECT_GT(policy, 0);
  EXPECT_LT(worst_single.count(), (kDeadline + kMargin).count());
  EXPECT_LT(worst_batch.count(), (kDeadline + kMargin).count());
  // Back: decisions come from Redis again within a bounded time.
  redlimit::Source source = redlimit::Source::failure_policy;
  for (const auto stop = Steady::now() + 5s; Steady::now() < stop; std::this_thread::sleep_for(50ms)) {
    source = fw.consume("after").source;
    if (source == redlimit::Source::primary) break;
  }
  EXPECT_EQ(source, redlimit::Source::primary);
}

}  // namespace
}  // namespace redlimit_cluster
