// consume() calls of several threads sharing script calls (issue 13, Options::share_sync_calls,
// detail/sync_lane.hpp): exact under contention on one hot subject, far fewer script calls than
// decisions, each caller its own decision, and a stalled server ending every call, queued or in
// flight, by its own deadline with nothing sent twice.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/transport/connection_pool.hpp"
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::ConnectionPool;
using redlimit::Decision;

class SyncLaneTest : public StrictRedisTest {
 protected:
  std::shared_ptr<ConnectionPool> pool(std::size_t size,
                                       std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    redlimit::PoolOptions o;
    o.size = size;
    o.wait_timeout = timeout;
    return std::make_shared<ConnectionPool>(redlimit::parse_url(server().url()), timeout, timeout, o);
  }
  redlimit::Options shared_options() const {
    redlimit::Options o = options();
    o.share_sync_calls = true;
    return o;
  }
  // Runs `body(t)` on `threads` threads started together.
  static void together(int threads, const std::function<void(int)>& body) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        body(t);
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    go.store(true);
    for (auto& th : ts) th.join();
  }
};

// 8 threads x 300 consumes of one subject allowed 1000: exactly 1000 admitted, and each remaining
// from 0 to 999 handed out once (no two requests saw the same state), in far fewer script calls.
TEST_F(SyncLaneTest, EightThreadsOnOneHotSubjectAreExactInSharedScriptCalls) {
  const redlimit::RateLimiter l(pool(4), shared_options());
  const auto fw = l.fixed_window("lane", redlimit::Limit::per_hour(1000));
  std::vector<std::vector<std::int64_t>> remaining(8);
  together(8, [&](int t) {
    for (int i = 0; i < 300; ++i) {
      const Decision d = fw.consume("hot");
      if (d.allowed) remaining[static_cast<std::size_t>(t)].push_back(d.remaining);
    }
  });
  std::vector<std::int64_t> all;
  for (const auto& r : remaining) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 1000u);
  for (std::int64_t i = 0; i < 1000; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
  const auto c = l.counters();
  std::printf("[ figures ] 8 threads x 300 consumes, share_sync_calls: %llu decisions in %llu script calls\n",
              static_cast<unsigned long long>(c.decisions), static_cast<unsigned long long>(c.answered));
  EXPECT_EQ(c.decisions, 2400u);
  EXPECT_LT(c.answered * 2, c.decisions) << "concurrent consume() calls did not share script calls";
}

// Each thread consumes its own subject (allowed 10) 15 times with the others': whatever call
// carried its request, each thread sees its own quota count down, then its own rejections.
TEST_F(SyncLaneTest, EachCallerGetsItsOwnDecision) {
  const redlimit::RateLimiter l(pool(2), shared_options());
  const auto tb = l.token_bucket("own", 10, 10, std::chrono::hours(1));
  std::vector<std::vector<Decision>> seen(8);
  together(8, [&](int t) {
    for (int i = 0; i < 15; ++i) seen[static_cast<std::size_t>(t)].push_back(tb.consume("s" + std::to_string(t)));
  });
  for (int t = 0; t < 8; ++t) {
    const auto& ds = seen[static_cast<std::size_t>(t)];
    for (int i = 0; i < 15; ++i) {
      EXPECT_EQ(ds[static_cast<std::size_t>(i)].allowed, i < 10) << "thread " << t << " call " << i;
      EXPECT_EQ(ds[static_cast<std::size_t>(i)].remaining, std::max(0, 9 - i)) << "thread " << t << " call " << i;
    }
  }
}

// The server sleeps 1 s; 6 threads consume with a deadline of 300 ms on a pool of 1. The first
// call is in flight, the others queue behind it: each ends by its own deadline (a TimeoutError:
// the failure policy is raise), and what reached Redis ran once at most.
TEST_F(SyncLaneTest, AStalledServerEndsQueuedCallsByTheirOwnDeadline) {
  constexpr auto kDeadline = std::chrono::milliseconds(300);
  redlimit::Options o = shared_options();
  o.command_timeout = kDeadline;
  o.breaker_threshold = 0;
  const redlimit::RateLimiter l(pool(1, kDeadline), o);
  const auto fw = l.fixed_window("stall", redlimit::Limit::per_hour(1000000));
  fw.consume("warm-up");
  std::thread sleeper([this] { server().command({"DEBUG", "SLEEP", "1"}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the server is asleep now
  std::atomic<int> timeouts{0}, other{0};
  std::atomic<long long> worst_ms{0};
  together(6, [&](int) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      fw.consume("s");
      ++other;
    } catch (const redlimit::TimeoutError&) {
      ++timeouts;
    } catch (...) {
      ++other;
    }
    const long long ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    long long w = worst_ms;
    while (ms > w && !worst_ms.compare_exchange_weak(w, ms)) {
    }
  });
  sleeper.join();
  std::printf("[ figures ] 6 shared calls, server asleep 1 s, deadline 300 ms: %d timeouts, worst %lld ms\n",
              timeouts.load(), worst_ms.load());
  EXPECT_EQ(timeouts, 6);
  EXPECT_EQ(other, 0);
  EXPECT_LT(worst_ms, 300 + 250) << "a queued call waited past its deadline";
  std::this_thread::sleep_for(std::chrono::milliseconds(900));  // the server is awake again
  EXPECT_LE(fw.peek("s").limit - fw.peek("s").remaining, 6);
}

}  // namespace
}  // namespace redlimit_test
