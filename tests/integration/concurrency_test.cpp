// 16 threads, each with its own connection, 200 requests each on one subject with a limit of 100:
// exactly 100 are admitted, whatever the interleaving. The clock is shared and does not move, so
// nothing expires or refills during the race.
#include <algorithm>
#include <atomic>
#include <thread>

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

constexpr int kHotThreads = 16;
constexpr int kRequestsPerThread = 200;
constexpr std::int64_t kHotLimit = 100;

class ConcurrencyTest : public StrictRedisTest {
 protected:
  void SetUp() override {
    StrictRedisTest::SetUp();
    at(0s);
    for (int i = 0; i < kHotThreads; ++i) {
      limiters.push_back(redlimit::RateLimiter::connect(server().url(), options()));
    }
  }

  // Runs kRequestsPerThread consumes on each thread, each through the strategy that `make` builds on
  // that thread's own limiter; returns every admitted decision.
  std::vector<Decision> race(const std::function<AnyStrategy(const redlimit::RateLimiter&)>& make) {
    std::vector<std::vector<Decision>> admitted(kHotThreads);
    std::vector<std::string> errors(kHotThreads);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kHotThreads; ++t) {
      threads.emplace_back([&, t] {
        const AnyStrategy s = make(limiters[t]);
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        try {
          for (int i = 0; i < kRequestsPerThread; ++i) {
            const Decision d = s.consume("hot", 1);
            if (d.allowed) admitted[t].push_back(d);
          }
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    }
    while (ready.load() < kHotThreads) std::this_thread::yield();
    go.store(true);
    for (auto& th : threads) th.join();
    std::vector<Decision> all;
    for (int t = 0; t < kHotThreads; ++t) {
      EXPECT_EQ(errors[t], "") << "thread " << t;
      all.insert(all.end(), admitted[t].begin(), admitted[t].end());
    }
    return all;
  }

  // Every remaining from 0 to kHotLimit - 1 was handed out exactly once: no two requests saw the same
  // state.
  static void expect_distinct_remaining(const std::vector<Decision>& admitted) {
    std::vector<std::int64_t> remaining;
    for (const auto& d : admitted) remaining.push_back(d.remaining);
    std::sort(remaining.begin(), remaining.end());
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(remaining.size()); ++i) {
      EXPECT_EQ(remaining[i], i);
    }
  }

  std::vector<redlimit::RateLimiter> limiters;
};

TEST_F(ConcurrencyTest, FixedWindowAdmitsExactlyTheLimit) {
  const auto admitted = race([](const redlimit::RateLimiter& l) {
    return wrap("fixed_window", kHotLimit, l.fixed_window("race", Limit(kHotLimit, 1h)));
  });
  EXPECT_EQ(admitted.size(), static_cast<std::size_t>(kHotLimit));
  expect_distinct_remaining(admitted);
  auto fw = rl().fixed_window("race", Limit(kHotLimit, 1h));
  EXPECT_EQ(window_state(server().command({"HGETALL", fw.key_for("hot")})).quantity, 100);
}

TEST_F(ConcurrencyTest, SlidingLogAdmitsExactlyTheLimit) {
  const auto admitted = race([](const redlimit::RateLimiter& l) {
    return wrap("sliding_log", kHotLimit, l.sliding_log("race", Limit(kHotLimit, 1h)));
  });
  EXPECT_EQ(admitted.size(), static_cast<std::size_t>(kHotLimit));
  expect_distinct_remaining(admitted);
  auto sl = rl().sliding_log("race", Limit(kHotLimit, 1h));
  EXPECT_EQ(server().integer({"ZCARD", sl.key_for("hot")}), kHotLimit);  // 100 members in one microsecond
}

TEST_F(ConcurrencyTest, SlidingWindowAdmitsExactlyTheLimit) {
  const auto admitted = race([](const redlimit::RateLimiter& l) {
    return wrap("sliding_window", kHotLimit, l.sliding_window("race", Limit(kHotLimit, 1h), 1min));
  });
  EXPECT_EQ(admitted.size(), static_cast<std::size_t>(kHotLimit));
  expect_distinct_remaining(admitted);
}

TEST_F(ConcurrencyTest, TokenBucketAdmitsExactlyTheCapacity) {
  // One token a day: nothing refills while the clock stands still.
  const auto admitted = race([](const redlimit::RateLimiter& l) {
    return wrap("token_bucket", kHotLimit, l.token_bucket("race", kHotLimit, 1, 24h));
  });
  EXPECT_EQ(admitted.size(), static_cast<std::size_t>(kHotLimit));
  expect_distinct_remaining(admitted);
}

TEST_F(ConcurrencyTest, LeakyBucketMeterAdmitsExactlyTheCapacity) {
  const auto admitted = race([](const redlimit::RateLimiter& l) {
    return wrap("leaky_meter", kHotLimit, l.leaky_bucket("race", kHotLimit, Limit(1, 24h), redlimit::LeakyMode::meter));
  });
  EXPECT_EQ(admitted.size(), static_cast<std::size_t>(kHotLimit));
  expect_distinct_remaining(admitted);
}

TEST_F(ConcurrencyTest, LeakyBucketShaperQueuesEachRequestInItsOwnSlot) {
  // 100 per hour: one leaves every 36 s. The admitted requests get delays 0, 36 s, ..., 99 * 36 s.
  const auto admitted = race([](const redlimit::RateLimiter& l) {
    return wrap("leaky_shaper", kHotLimit,
                l.leaky_bucket("race", kHotLimit, Limit(kHotLimit, 1h), redlimit::LeakyMode::shaper));
  });
  ASSERT_EQ(admitted.size(), static_cast<std::size_t>(kHotLimit));
  std::vector<Micros> delays;
  for (const auto& d : admitted) delays.push_back(d.delay);
  std::sort(delays.begin(), delays.end());
  for (std::int64_t i = 0; i < kHotLimit; ++i) EXPECT_EQ(delays[i], i * 36s);
}

TEST_F(ConcurrencyTest, OneLimiterSharedByAllThreadsAdmitsExactlyTheLimit) {
  // Strategy objects share their limiter's connection; calls are serialised on it.
  auto shared = rl().sliding_log("race-shared", Limit(kHotLimit, 1h));
  const auto admitted = race([&](const redlimit::RateLimiter&) { return wrap("shared", kHotLimit, shared); });
  EXPECT_EQ(admitted.size(), static_cast<std::size_t>(kHotLimit));
  expect_distinct_remaining(admitted);
}

}  // namespace
}  // namespace redlimit_test
