// The memory backend against Redis for consume_many: random batches on one ManualClock must give
// identical decisions (see differential_test.cpp for the seeds and how TTLs are compared).
#include "integration/differential_fixture.hpp"

namespace redlimit_test {
namespace {

// consume_many: random batches (1 to 300 requests, so some split into several script calls; few
// subjects, so a batch repeats them and a later request sees an earlier one's writes) against Redis
// and the memory backend on one clock, then a peek of every subject.
TEST_P(DifferentialTest, BatchesDecideExactlyAsRedis) {
  const Config config = configs()[GetParam()];
  const std::uint64_t seed = base_seed() + 1000 + GetParam();
  const int batches = std::max(20, steps_per_strategy() / 50);
  SCOPED_TRACE("differential batches " + config.name + ": REDLIMIT_DIFF_SEED=" + std::to_string(base_seed()) +
               " (this trace's seed " + std::to_string(seed) + ")");
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  redlimit::Options opts = options();
  opts.sliding_log_members = config.members;
  const redlimit::RateLimiter redis_limiter(std::make_shared<RecordingRedis>(server().url()), opts);
  const redlimit::RateLimiter memory_limiter = redlimit::RateLimiter::in_memory(opts);
  const Target redis = config.make(redis_limiter);
  const Target memory = config.make(memory_limiter);
  const std::vector<std::string> subjects{"ann", "ben", "cat"};
  for (const auto& who : subjects) redis.reset(who);
  clock->set(kT0 + Micros{uniform(0, 3'600'000'000)});

  int admitted = 0;
  int rejected = 0;
  for (int b = 0; b < batches && !HasFailure(); ++b) {
    const std::int64_t scale = config.edges[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(config.edges.size()) - 1))].count();
    clock->advance(Micros{uniform(0, scale / 3)});
    const auto size = static_cast<std::size_t>(uniform(0, 9) == 0 ? uniform(257, 300) : uniform(1, 24));
    std::vector<redlimit::Request> requests;
    for (std::size_t i = 0; i < size; ++i) {
      requests.push_back({subjects[static_cast<std::size_t>(uniform(0, 2))], uniform(0, 3) == 0 ? uniform(1, config.max_cost) : 1});
    }
    const Micros now = clock->now();
    const std::vector<Decision> a = redis.consume_many(requests);
    clock->set(now);
    const std::vector<Decision> m = memory.consume_many(requests);
    ASSERT_EQ(a.size(), m.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].allowed, m[i].allowed) << "batch " << b << " request " << i << ": Redis " << a[i] << ", memory " << m[i];
      ASSERT_EQ(a[i].remaining, m[i].remaining) << "batch " << b << " request " << i << ": Redis " << a[i] << ", memory " << m[i];
      ASSERT_EQ(a[i].retry_after, m[i].retry_after) << "batch " << b << " request " << i << ": Redis " << a[i] << ", memory " << m[i];
      ASSERT_EQ(a[i].reset_after, m[i].reset_after) << "batch " << b << " request " << i << ": Redis " << a[i] << ", memory " << m[i];
      ASSERT_EQ(a[i].delay, m[i].delay) << "batch " << b << " request " << i << ": Redis " << a[i] << ", memory " << m[i];
      ASSERT_EQ(a[i].limit_index, m[i].limit_index) << "batch " << b << " request " << i;
      (a[i].allowed ? admitted : rejected)++;
    }
    for (const auto& who : subjects) {
      const Decision pa = redis.peek(who, 1);
      const Decision pm = memory.peek(who, 1);
      ASSERT_EQ(pa.remaining, pm.remaining) << "peek " << who << " after batch " << b << ": Redis " << pa << ", memory " << pm;
      ASSERT_EQ(pa.reset_after, pm.reset_after) << "peek " << who << " after batch " << b << ": Redis " << pa << ", memory " << pm;
    }
  }
  EXPECT_GT(admitted, 0);
  EXPECT_GT(rejected, 0) << "the batches never hit a limit: they prove little";
}

}  // namespace
}  // namespace redlimit_test
