// Leaky bucket against a real server, as a meter (GCRA: reject what does not fit) and as a shaper
// (queue what fits, with a delay that grows by one leak interval per queued request).
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::LeakyMode;

class LeakyBucketTest : public StrictRedisTest {};

TEST_F(LeakyBucketTest, MeterStartsEmptyAndRejectsWhatDoesNotFit) {
  auto lb = rl().leaky_bucket("lb", 5, Limit(1, 1s), LeakyMode::meter);
  at(0s);
  Decision d = lb.peek("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.limit, 5);
  EXPECT_EQ(d.remaining, 5) << d;
  EXPECT_EQ(d.reset_after, 0us) << d;
  EXPECT_EQ(dbsize(), 0);
  for (std::int64_t left : {4, 3, 2, 1, 0}) {
    d = lb.consume("u");
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, left) << d;
    EXPECT_EQ(d.delay, 0us) << d;  // a meter never delays
  }
  EXPECT_EQ(d.reset_after, 5s) << d;
  d = lb.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 1s) << d;
  at(2500ms);  // 2.5 requests leaked
  EXPECT_EQ(lb.peek("u").remaining, 2);
  EXPECT_TRUE(lb.consume("u", 2).allowed);
  EXPECT_FALSE(lb.consume("u").allowed);
}

TEST_F(LeakyBucketTest, MeterRetryAfterIsExact) {
  // 3 requests leak per 10 s: one every 3.333... s.
  auto lb = rl().leaky_bucket("lb", 5, Limit(3, 10s), LeakyMode::meter);
  struct Case {
    std::int64_t cost;
    Micros retry_after;
  };
  for (const Case& c : {Case{1, 3'333'334us}, Case{3, 10s}, Case{5, 16'666'667us}}) {
    SCOPED_TRACE("cost " + std::to_string(c.cost));
    const std::string subject = "u" + std::to_string(c.cost);
    at(0s);
    EXPECT_TRUE(lb.consume(subject, 5).allowed);
    const Decision d = lb.consume(subject, c.cost);
    EXPECT_EQ(d.retry_after, c.retry_after) << d;
    const Decision admitted = expect_retry_after_exact(*clock, lb, subject, c.cost, d);
    EXPECT_EQ(admitted.remaining, 0) << admitted;
    EXPECT_EQ(admitted.delay, 0us) << admitted;
  }
}

TEST_F(LeakyBucketTest, MeterResetAfterIsExact) {
  auto lb = rl().leaky_bucket("lb", 5, Limit(3, 10s), LeakyMode::meter);
  at(0s);
  Decision d = lb.consume("u", 4);
  EXPECT_EQ(d.reset_after, 13'333'334us) << d;
  expect_reset_after_exact(*clock, lb, "u", d);
  at(7s);
  d = lb.consume("u");
  EXPECT_EQ(d.reset_after, 9'666'667us) << d;  // 4 - 2.1 + 1 = 2.9 requests to leak
  expect_reset_after_exact(*clock, lb, "u", d);
}

TEST_F(LeakyBucketTest, ShaperDelayGrowsByOneLeakIntervalPerQueuedRequest) {
  auto lb = rl().leaky_bucket("lb", 4, Limit(1, 10s), LeakyMode::shaper);
  at(0s);
  std::int64_t left = 4;
  for (Micros delay : {0s, 10s, 20s, 30s}) {
    const Decision d = lb.consume("u");
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.delay, delay) << d;
    EXPECT_EQ(d.remaining, --left) << d;
    EXPECT_EQ(d.retry_after, 0us) << d;
  }
  // The queue is full.
  Decision d = lb.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.delay, 0us) << d;
  EXPECT_EQ(d.retry_after, 10s) << d;
  EXPECT_EQ(d.reset_after, 40s) << d;
  // A peek says what a consume would get, delay included.
  at(2s);
  EXPECT_FALSE(lb.peek("u").allowed);
  at(10s);
  d = lb.peek("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.delay, 30s) << d;
  at(15s);
  d = lb.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.delay, 25s) << d;  // 2.5 requests ahead
  EXPECT_FALSE(lb.consume("u").allowed);
}

TEST_F(LeakyBucketTest, ShaperDelayCountsTheCostAhead) {
  auto lb = rl().leaky_bucket("lb", 4, Limit(1, 10s), LeakyMode::shaper);
  at(0s);
  EXPECT_EQ(lb.consume("u").delay, 0s);
  const Decision two = lb.consume("u", 2);
  EXPECT_TRUE(two.allowed) << two;
  EXPECT_EQ(two.delay, 10s) << two;
  const Decision last = lb.consume("u");
  EXPECT_TRUE(last.allowed) << last;
  EXPECT_EQ(last.delay, 30s) << last;
  EXPECT_FALSE(lb.consume("u").allowed);
}

TEST_F(LeakyBucketTest, ShaperRetryAfterIsExact) {
  auto lb = rl().leaky_bucket("lb", 4, Limit(3, 10s), LeakyMode::shaper);
  struct Case {
    std::int64_t cost;
    Micros retry_after;
  };
  for (const Case& c : {Case{1, 3'333'334us}, Case{2, 6'666'667us}}) {
    SCOPED_TRACE("cost " + std::to_string(c.cost));
    const std::string subject = "u" + std::to_string(c.cost);
    at(0s);
    EXPECT_TRUE(lb.consume(subject, 4).allowed);
    const Decision d = lb.consume(subject, c.cost);
    EXPECT_EQ(d.retry_after, c.retry_after) << d;
    const Decision admitted = expect_retry_after_exact(*clock, lb, subject, c.cost, d);
    // Admitted as soon as it fits, behind the 4 - cost requests still queued.
    EXPECT_EQ(admitted.delay, 13'333'334us - c.retry_after) << admitted;
  }
}

TEST_F(LeakyBucketTest, ShaperResetAfterIsExact) {
  auto lb = rl().leaky_bucket("lb", 4, Limit(3, 10s), LeakyMode::shaper);
  at(0s);
  const Decision d = lb.consume("u", 3);
  EXPECT_EQ(d.reset_after, 10s) << d;
  expect_reset_after_exact(*clock, lb, "u", d);
}

TEST_F(LeakyBucketTest, KeyLivesUntilTheBucketIsEmpty) {
  auto lb = rl().leaky_bucket("lb", 100, Limit(100, 1h), LeakyMode::meter);
  at(0s);
  lb.consume("u", 50);
  const std::int64_t pttl = server().integer({"PTTL", lb.key_for("u")});
  EXPECT_GT(pttl, (30min - 5s) / 1ms);
  // The lease (helpers.lua, bucket_ttl) keeps a key less than 1.5 times what its state needs (30
  // min here, far above the lease's floor), and
  // ttl_ms adds a second's margin and a millisecond.
  EXPECT_LE(pttl, 45min / 1ms + 1001);
}

}  // namespace
}  // namespace redlimit_test
