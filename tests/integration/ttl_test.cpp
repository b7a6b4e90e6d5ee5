// Every key redlimit writes carries a TTL. A mixed workload (all strategies and a policy; hostile
// subjects; rejections, peeks, refunds, blocks, blocking acquires and resets; a client whose clock
// lags; server time; a script flush), then a SCAN of the whole keyspace: no key may be without a
// TTL, and none may live much longer than its state matters. (Every StrictRedisTest also checks the
// first property after each test, in TearDown.)
#include <random>

#include <functional>
#include <thread>
#include <tuple>

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class TtlTest : public StrictRedisTest {};

// Long on purpose: one workload over every strategy and operation, then one sweep over every key.
TEST_F(TtlTest, NoKeyLivesForeverAfterAMixedWorkload) {
  std::mt19937 rng(20240601);
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };

  auto lag_clock = std::make_shared<redlimit::ManualClock>(kT0);
  redlimit::Options lag_options = options();
  lag_options.clock = lag_clock;
  auto lagging = redlimit::RateLimiter::connect(server().url(), lag_options);
  redlimit::Options server_time_options;
  server_time_options.time_source = redlimit::TimeSource::redis;
  auto server_time = redlimit::RateLimiter::connect(server().url(), server_time_options);

  struct Config {
    std::int64_t limit;
    Micros window;
  };
  const std::vector<Config> configs = {{5, 1h}, {3, 10min}, {20, 1min}, {1, 10s}};
  std::vector<AnyStrategy> strategies;
  for (const auto& c : configs) {
    const std::string resource = "ttl-" + std::to_string(c.limit);
    for (auto& s : all_strategies(rl(), resource, c.limit, c.window)) strategies.push_back(std::move(s));
    // The same keys, from a client whose clock runs behind.
    for (auto& s : all_strategies(lagging, resource, c.limit, c.window)) strategies.push_back(std::move(s));
    for (auto& s : all_strategies(server_time, "ttl-server-time-" + std::to_string(c.limit), c.limit, c.window)) {
      s.name += "-server-time";
      strategies.push_back(std::move(s));
    }
  }
  // A policy of two limits (all-or-nothing, one hash), from both client clocks.
  const std::vector<Limit> policy_limits = {Limit(4, 1min), Limit(10, 1h).precision(1min)};
  strategies.push_back(wrap("policy", 4, rl().policy("ttl-policy", policy_limits)));
  strategies.push_back(wrap("policy-lagging", 4, lagging.policy("ttl-policy", policy_limits)));
  strategies.push_back(wrap("policy-server-time", 4, server_time.policy("ttl-server-time-policy", policy_limits)));
  using namespace std::string_literals;
  const std::vector<std::string> subjects = {"alice", "bob", "a:b", "{x}", "\0"s, "\xff\xfe"s,
                                             std::string(1024, 'q'), "carol", "dave", "eve"};

  at(0s);
  int admitted = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    const AnyStrategy& s = strategies[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(strategies.size()) - 1))];
    const std::string& subject = subjects[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(subjects.size()) - 1))];
    const std::int64_t op = uniform(0, 99);
    if (op < 60) {
      const Decision d = s.consume(subject, uniform(1, s.limit));
      (d.allowed ? admitted : rejected)++;
    } else if (op < 80) {
      s.peek(subject, uniform(1, s.limit));
    } else if (op < 84) {
      s.refund(subject, uniform(1, s.limit));
    } else if (op < 86) {
      s.block(subject, Micros{uniform(1, 1'800'000'000)});
    } else if (op < 88) {
      if (s.name.find("server-time") == std::string::npos) {
        // ManualClock::sleep_for advances the clock: no real waiting.
        s.acquire(subject, uniform(1, s.limit), Micros{uniform(0, 10'000'000)});
      }
    } else if (op < 90) {
      s.reset(subject);
    } else {
      clock->advance(Micros{uniform(0, 120'000'000)});
      lag_clock->set(clock->now() - Micros{uniform(0, 600'000'000)});
    }
    if (i == 1500) ASSERT_EQ(server().command({"SCRIPT", "FLUSH"}).str, "OK");
  }
  EXPECT_GT(admitted, 100);
  EXPECT_GT(rejected, 100);

  const std::vector<std::string> keys = server().keys();
  EXPECT_GE(keys.size(), 50u);
  int with_ttl = 0;
  for (const auto& key : keys) {
    EXPECT_EQ(key.rfind("redlimit:{", 0), 0u) << key;
    const std::int64_t pttl = server().integer({"PTTL", key});
    EXPECT_NE(pttl, -1) << "no TTL on " << key;
    if (pttl < 0) continue;  // expired between SCAN and PTTL
    ++with_ttl;
    if (key.find("ttl-server-time-") == std::string::npos) {
      // At most two of the longest window (a clock behind by less than a window sees the window
      // ahead), plus the 10 minutes the lagging clock may be behind.
      EXPECT_LE(pttl, (2h + 10min) / 1ms) << key;
    } else {
      // A window's reset (a sliding window of 1 h in 6-minute buckets: up to 66 min; a hash's TTL
      // is set when its newest bucket moves, so it can be the one set just after a bucket began),
      // or for a bucket 1.5 times its time to full or empty of up to 1 h (its lease, helpers.lua's
      // bucket_ttl), plus ttl_ms's margin of a second and a millisecond.
      const bool bucket = key.size() > 3 && (key.compare(key.size() - 3, 3, ":tb") == 0 ||
                                             key.compare(key.size() - 3, 3, ":lb") == 0);
      EXPECT_LE(pttl, (bucket ? 90min : 66min) / 1ms + 1001) << key;
    }
  }
  EXPECT_GE(with_ttl, 50);
}

// Issue 12: a decision never depends on when Redis expires a key. With a ManualClock held at
// 0:59.999, the 101st request of a 100/min window is rejected; a few real milliseconds later, at
// the same manual time, it still is (the key's TTL once ran out in real time and it was admitted
// with remaining 99). Same for the other strategies at the last millisecond of their state.
TEST_F(TtlTest, ADecisionDoesNotChangeWhenRealTimePassesAtTheSameClockTime) {
  at(59s + 999ms);
  auto fw = rl().fixed_window("fw", Limit::per_minute(100));
  auto sw = rl().sliding_window("sw", Limit(100, 1s), 1ms);
  auto sl = rl().sliding_log("sl", Limit(100, 2ms));
  auto tb = rl().token_bucket("tb", 100, 100, 2ms);
  auto lb = rl().leaky_bucket("lb", 100, Limit(100, 2ms));
  for (const auto& [name, consume, peek] :
       std::vector<std::tuple<std::string, std::function<Decision(std::int64_t)>, std::function<Decision()>>>{
           {"fixed_window", [&](std::int64_t c) { return fw.consume("u", c); }, [&] { return fw.peek("u"); }},
           {"sliding_window", [&](std::int64_t c) { return sw.consume("u", c); }, [&] { return sw.peek("u"); }},
           {"sliding_log", [&](std::int64_t c) { return sl.consume("u", c); }, [&] { return sl.peek("u"); }},
           {"token_bucket", [&](std::int64_t c) { return tb.consume("u", c); }, [&] { return tb.peek("u"); }},
           {"leaky_bucket", [&](std::int64_t c) { return lb.consume("u", c); }, [&] { return lb.peek("u"); }}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(consume(100).allowed);
    const Decision before = peek();
    EXPECT_FALSE(before.allowed) << before;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const Decision after = peek();
    EXPECT_FALSE(after.allowed) << after;
    EXPECT_EQ(after.remaining, before.remaining) << after;
    EXPECT_EQ(after.retry_after, before.retry_after) << after;
  }
}

}  // namespace
}  // namespace redlimit_test
