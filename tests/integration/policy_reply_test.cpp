// A policy's admission alone in its call comes back as one integer (lua/policy.lua, packable): the
// limits' remaining as the digits of a mixed radix, with each limit's reset_after left for the
// client to work out from the time it sent (detail::policy_pairs_of). These hold what the client
// decodes from it to what the same state answers as a table (a peek, or a bucket ahead of now),
// and look at the raw reply, so that the packing cannot stop unnoticed.
#include <string>

#include "redlimit/detail/scripts.hpp"
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class PolicyReplyTest : public StrictRedisTest {
 protected:
  // The policy below, as the script's parameters (helpers.lua, parse_limits).
  static constexpr const char* kParams =
      "3 1s 100 1000000 1000000 1m 1000 60000000 60000000 1h@1m 10000 3600000000 60000000";
  redlimit::Policy policy() const {
    return rl().policy("p", {Limit(100, 1s), Limit(1000, 1min), Limit(10000, 1h).precision(1min)});
  }
  // One raw consume of subject u at kT0 + offset, as the library sends it.
  redlimit::Reply raw_consume(Micros offset) {
    const std::string fn(redlimit::detail::scripts::policy().function);
    return server().command({"FCALL", fn, "1", "redlimit:{p|u}:pol", std::to_string((kT0 + offset).count()),
                             std::string("1 1 ") + kParams});
  }
};

TEST_F(PolicyReplyTest, AnAdmissionDecodesAsThePeekAtTheSameTimeReadsIt) {
  const auto p = policy();
  // A new subject (fresh), then the common path, across a second's and a minute's turn.
  for (const Micros t : {Micros(0), Micros(123'456), Micros(999'999), Micros(1'000'000), Micros(59'999'999),
                         Micros(60'000'001), Micros(61'500'000)}) {
    SCOPED_TRACE(t.count());
    at(t);
    const Decision consumed = p.consume("u", 3);
    ASSERT_TRUE(consumed.allowed) << consumed;
    expect_same_decision(consumed, p.peek("u"), "packed / table");
  }
  at(61'500'000us);
  const Decision d = p.peek("u");
  // 21 units taken. Second 61 holds 3, and second 60's 3 weigh half of them, rounded up: 2; its
  // bucket weighs until 63 s, the minute limit's bucket 1 until 3 min, the hour's (1 min buckets)
  // until 62 min.
  EXPECT_EQ(d.limits[0].remaining, 100 - 5) << d;
  EXPECT_EQ(d.limits[0].reset_after, 1500ms) << d;
  EXPECT_EQ(d.limits[1].reset_after, 180s - 61'500ms) << d;
  EXPECT_EQ(d.limits[2].remaining, 10000 - 21) << d;
  EXPECT_EQ(d.limits[2].reset_after, 62min - 61'500ms) << d;
}

TEST_F(PolicyReplyTest, TheRawReplyIsOneIntegerOfTheLimitsRemaining) {
  policy().peek("u");  // loads the library
  const redlimit::Reply first = raw_consume(0us);
  ASSERT_EQ(first.type, redlimit::Reply::Type::integer) << static_cast<int>(first.type);
  EXPECT_EQ(first.integer, 99 + 101 * (999 + 1001 * 9999));
  const redlimit::Reply second = raw_consume(2s);
  ASSERT_EQ(second.type, redlimit::Reply::Type::integer) << static_cast<int>(second.type);
  EXPECT_EQ(second.integer, 99 + 101 * (998 + 1001 * 9998));  // second 0 no longer weighs at 2 s
}

TEST_F(PolicyReplyTest, ABucketAheadOfNowSendsThePairsWithItsReset) {
  const auto p = policy();
  at(61s);  // a clock a little ahead writes bucket 1 of the minute limit
  ASSERT_TRUE(p.consume("u").allowed);
  // Back at 59.5 s, the minute limit's newest bucket is past the current one, b = 0.
  const redlimit::Reply raw = raw_consume(59'500ms);
  ASSERT_EQ(raw.type, redlimit::Reply::Type::array) << static_cast<int>(raw.type);
  at(59'500ms);
  const Decision d = p.consume("u");
  ASSERT_TRUE(d.allowed) << d;
  ASSERT_EQ(d.limits.size(), 3u);
  EXPECT_EQ(d.limits[1].reset_after, 180s - 59'500ms) << d;  // bucket 1 weighs until 3 min
  EXPECT_EQ(d.limits[1].remaining, 1000 - 3) << d;
  expect_same_decision(d, p.peek("u"), "pairs / table");
}

}  // namespace
}  // namespace redlimit_test
