// End-to-end deadlines (issue 17, item 3): one call's command_timeout bounds the whole call (the wait
// for a pooled connection, connecting, sending, the NOSCRIPT reload and the reply), also when more
// threads call than the pool has connections. Eight threads share a pool of two under a stalled
// server (DEBUG SLEEP, then CLIENT PAUSE); every call, consume and consume_many alike, must come
// back within the deadline plus a margin. Before the fix a call could wait the pool's wait_timeout
// (1 s) for a connection and then its own deadline: about 1.2 s. And a pipeline whose replies come in
// parts ends by its deadline too, however short each gap between the parts.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "redlimit/url.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kCallDeadline = 200ms;
constexpr auto kCallMargin = 300ms;  // a loaded 2-core CI box; in practice the worst call is ~deadline
constexpr int kCallerThreads = 8;
constexpr std::size_t kPoolSize = 2;

redlimit::Options deadline_options() {
  redlimit::Options o;
  o.command_timeout = kCallDeadline;
  o.connect_timeout = kCallDeadline;
  o.on_failure = redlimit::OnFailure::fail_open;  // every call comes back with a decision
  o.breaker_threshold = 0;                        // every call goes to Redis: none is short-circuited
  o.pool.size = kPoolSize;                        // wait_timeout stays at its default, 1 s
  o.pool.health_check_interval = 0ms;
  return o;
}

redlimit::RedisConnection raw_client(redlimit_test::RedisServer& server, std::chrono::milliseconds timeout) {
  return redlimit::RedisConnection(redlimit::parse_url(server.url()), 2000ms, timeout);
}

bool wait_for_stall(redlimit_test::RedisServer& server) {
  auto probe = raw_client(server, 50ms);
  const auto until = Clock::now() + 10s;
  while (Clock::now() < until) {
    try {
      probe.command({"PING"});
    } catch (const redlimit::TimeoutError&) {
      return true;
    } catch (const redlimit::ConnectionError&) {
    }
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

struct Worst {
  std::chrono::milliseconds single{0};  // consume
  std::chrono::milliseconds batch{0};   // consume_many
  int calls = 0;
  int from_policy = 0;
};

// kCallerThreads threads call for `length` (half consume, half consume_many of three subjects); returns
// the slowest call of each kind.
Worst hammer_for(const redlimit::FixedWindow& fw, std::chrono::milliseconds length) {
  std::vector<Worst> per_thread(kCallerThreads);
  std::vector<std::thread> threads;
  const auto until = Clock::now() + length;
  for (int t = 0; t < kCallerThreads; ++t) {
    threads.emplace_back([&, t] {
      Worst& w = per_thread[static_cast<std::size_t>(t)];
      const std::string s = "t" + std::to_string(t);
      const std::string a = s + "a", b = s + "b";
      for (int i = 0; Clock::now() < until; ++i) {
        const bool batch = (i + t) % 2 == 1;
        const auto start = Clock::now();
        try {
          if (batch) {
            const auto ds = fw.consume_many({{s, 1}, {a, 1}, {b, 1}});
            for (const auto& d : ds) w.from_policy += d.source == redlimit::Source::failure_policy;
          } else {
            w.from_policy += fw.consume(s).source == redlimit::Source::failure_policy;
          }
        } catch (const redlimit::Error&) {
        }
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
        auto& slot = batch ? w.batch : w.single;
        slot = std::max(slot, took);
        ++w.calls;
      }
    });
  }
  for (auto& th : threads) th.join();
  Worst all;
  for (const auto& w : per_thread) {
    all.single = std::max(all.single, w.single);
    all.batch = std::max(all.batch, w.batch);
    all.calls += w.calls;
    all.from_policy += w.from_policy;
  }
  return all;
}

void report(const char* stall, const Worst& w) {
  std::printf(
      "[ deadline ] %s, %d threads over %zu connections: worst consume %lld ms, worst consume_many %lld ms "
      "(%d calls, %d decisions from the failure policy)\n",
      stall, kCallerThreads, kPoolSize, static_cast<long long>(w.single.count()),
      static_cast<long long>(w.batch.count()), w.calls, w.from_policy);
}

TEST(Deadline, DebugSleepEveryCallWithinTheDeadlineWithMoreThreadsThanConnections) {
  redlimit_test::RedisServer server;
  auto limiter = redlimit::RateLimiter::connect(server.url(), deadline_options());
  auto fw = limiter.fixed_window("deadline", redlimit::Limit::per_hour(1000000));
  hammer_for(fw, 100ms);  // both connections open, the script loaded
  std::thread sleeper([&] {
    try {
      auto c = raw_client(server, 0ms);
      c.command({"DEBUG", "SLEEP", "3"});
    } catch (...) {
    }
  });
  ASSERT_TRUE(wait_for_stall(server));
  const Worst w = hammer_for(fw, 1500ms);
  sleeper.join();
  report("DEBUG SLEEP", w);
  EXPECT_GT(w.from_policy, 0);
  EXPECT_LT(w.single.count(), (kCallDeadline + kCallMargin).count());
  EXPECT_LT(w.batch.count(), (kCallDeadline + kCallMargin).count());
  // Back: decisions come from Redis again.
  EXPECT_EQ(fw.consume("after").source, redlimit::Source::primary);
}

TEST(Deadline, ClientPauseEveryCallWithinTheDeadlineWithMoreThreadsThanConnections) {
  redlimit_test::RedisServer server;
  auto limiter = redlimit::RateLimiter::connect(server.url(), deadline_options());
  auto fw = limiter.fixed_window("deadline", redlimit::Limit::per_hour(1000000));
  hammer_for(fw, 100ms);
  auto admin = raw_client(server, 2000ms);
  const auto paused_at = std::chrono::steady_clock::now();
  ASSERT_EQ(admin.command({"CLIENT", "PAUSE", "2500"}).type, redlimit::Reply::Type::status);
  const Worst w = hammer_for(fw, 1500ms);
  report("CLIENT PAUSE", w);
  EXPECT_GT(w.from_policy, 0);
  EXPECT_LT(w.single.count(), (kCallDeadline + kCallMargin).count());
  EXPECT_LT(w.batch.count(), (kCallDeadline + kCallMargin).count());
  // CLIENT UNPAUSE is 6.2's: before it, the pause ends when its time is up.
  if (admin.command({"CLIENT", "UNPAUSE"}).is_error()) std::this_thread::sleep_until(paused_at + 2600ms);
  EXPECT_EQ(fw.consume("after").source, redlimit::Source::primary);
}

// A round trip answered in parts, each gap shorter than the socket timeout: a socket timeout bounds
// one read, so the call's deadline must be checked between reads. Redis reads at most 16 KiB of a
// connection at a time and answers what it read before it reads more, so a 20 KB ECHO after each
// DEBUG SLEEP 0.05 puts every sleep in a read of its own: 20 of them take about a second, where the
// deadline is 200 ms. Before the fix the pipeline came back whole after about a second.
TEST(Deadline, APipelineAnsweredInPartsEndsByTheCallsDeadline) {
  redlimit_test::RedisServer server;
  auto conn = raw_client(server, kCallDeadline);
  conn.command({"PING"});  // connected: the call below is only its round trip
  std::vector<std::vector<std::string>> commands;
  for (int i = 0; i < 20; ++i) {
    commands.push_back({"DEBUG", "SLEEP", "0.05"});
    commands.push_back({"ECHO", std::string(20000, 'x')});
  }
  const auto start = Clock::now();
  EXPECT_THROW(conn.pipeline(commands), redlimit::TimeoutError);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  std::printf("[ deadline ] a pipeline answered in parts timed out after %lld ms\n",
              static_cast<long long>(took.count()));
  EXPECT_LT(took.count(), (kCallDeadline + kCallMargin).count());
  // The stream was dropped with half its replies unread: the next command, on a new connection,
  // reads its own reply (Redis drops what the old one had not run, once its current sleep ends).
  EXPECT_EQ(conn.command({"ECHO", "after"}).str, "after");
}

}  // namespace
