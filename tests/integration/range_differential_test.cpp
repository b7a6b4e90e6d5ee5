// Issue 12: the quotas of the whole accepted range, decided by Redis (the Lua scripts, whose big
// products go through muldiv's long division in doubles) and by the memory backend (128-bit
// integers), request by request: single calls, peeks, refunds and consume_many batches.
#include <gtest/gtest.h>

#include "support/fixture.hpp"
#include "support/range_scenarios.hpp"

namespace redlimit_test {
namespace {

using redlimit_range::Calls;
using redlimit_range::Generator;
using redlimit_range::Kind;
using redlimit_range::Quota;

class RangeDifferentialTest : public StrictRedisTest {};

TEST_F(RangeDifferentialTest, RedisDecidesAsMemoryAcrossTheRange) {
  const auto memory_limiter = redlimit::RateLimiter::in_memory(options());
  const Micros span{2'000'000'000'000'000};  // the clock stays below kT0 + span < 2^53 us
  int compared = 0;
  for (std::uint64_t seed = 1; seed <= 70 && !HasFailure(); ++seed) {
    Generator gen(seed * 104729);
    const Kind kind = redlimit_range::kAllKinds[seed % 7];
    const Quota q = gen.quota(kind);
    const std::string resource = "range" + std::to_string(seed);
    const Calls redis = redlimit_range::make(rl(), resource, q);
    const Calls memory = redlimit_range::make(memory_limiter, resource, q);
    Micros t = kT0;
    for (int step = 0; step < 25 && !HasFailure(); ++step) {
      t += gen.step(redlimit_range::horizon(q), kT0 + span - t);
      clock->set(t);
      const std::int64_t cost = gen.cost(q.largest_cost());
      const std::string subject = gen.chance(0.5) ? "a" : "b";
      const std::string where = q.describe() + " seed " + std::to_string(seed) + " step " + std::to_string(step);
      switch (gen.uniform(0, 5)) {
        case 0:
          expect_same_decision(redis.peek(subject, cost), memory.peek(subject, cost), where + " peek");
          break;
        case 1:
          expect_same_decision(redis.refund(subject, cost), memory.refund(subject, cost), where + " refund");
          break;
        case 2: {
          std::vector<redlimit::Request> batch;
          const std::int64_t n = gen.uniform(1, 6);
          std::vector<std::string> subjects;
          subjects.reserve(static_cast<std::size_t>(n));
          for (std::int64_t i = 0; i < n; ++i) subjects.push_back(gen.chance(0.5) ? "a" : "b");
          for (const auto& s : subjects) batch.push_back({s, gen.cost(q.largest_cost())});
          const auto r = redis.consume_many(batch), m = memory.consume_many(batch);
          ASSERT_EQ(r.size(), m.size());
          for (std::size_t i = 0; i < r.size(); ++i)
            expect_same_decision(r[i], m[i], where + " batch " + std::to_string(i));
          break;
        }
        default:
          expect_same_decision(redis.consume(subject, cost), memory.consume(subject, cost), where + " consume");
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 70 * 25);
}

}  // namespace
}  // namespace redlimit_test
