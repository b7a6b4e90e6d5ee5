// The in-memory backend (RateLimiter::in_memory) without a server: every strategy's documented
// behaviour on a ManualClock (fixture: memory_fixture.hpp).
#include "unit/memory_fixture.hpp"

namespace {

// --- strategies on RateLimiter::in_memory ------------------------------------------------------

// Seed 004: 100 requests in the first 15 s of a minute; at 1.25 min the previous minute weighs 75 and
// 25 more are admitted; with 30 s precision the weighted half-minute leaves room for 50.
std::int64_t seed004_admitted_at_75s(Micros precision) {
  auto clock = std::make_shared<ManualClock>(kT0);
  Options o;
  o.clock = clock;
  const RateLimiter limiter = RateLimiter::in_memory(o);
  const auto api = limiter.sliding_window("api", Limit::per_minute(100), precision);
  for (int i = 0; i < 100; ++i) {
    clock->set(kT0 + Micros{i * 150'000});  // one every 150 ms: all within [0, 15 s)
    const Decision d = api.consume("user-42");
    EXPECT_TRUE(d.allowed) << i << " " << show(d);
  }
  EXPECT_FALSE(api.consume("user-42").allowed);
  clock->set(kT0 + 75s);
  std::int64_t admitted = 0;
  while (api.consume("user-42").allowed) ++admitted;
  return admitted;
}

TEST(MemoryBackend, Seed004SlidingWindowAt125Minutes) {
  EXPECT_EQ(seed004_admitted_at_75s(Micros{0}), 25);
  EXPECT_EQ(seed004_admitted_at_75s(30s), 50);
}

TEST_F(MemoryTest, FixedWindowCountsWithinTheAlignedWindow) {
  const auto fw = limiter.fixed_window("fw", Limit(3, 1s));
  at(250ms);
  for (std::int64_t expected : {2, 1, 0}) {
    const Decision d = fw.consume("u");
    EXPECT_TRUE(d.allowed) << show(d);
    EXPECT_EQ(d.limit, 3);
    EXPECT_EQ(d.remaining, expected) << show(d);
    EXPECT_EQ(d.reset_after, 750ms) << show(d);
  }
  const Decision d = fw.consume("u");
  EXPECT_FALSE(d.allowed) << show(d);
  EXPECT_EQ(d.retry_after, 750ms) << show(d);
  at(1s - 1us);
  EXPECT_FALSE(fw.consume("u").allowed);
  at(1s);
  EXPECT_TRUE(fw.consume("u").allowed);
  // The state's deadline is the TTL fixed_window.lua sets: the end of the window, in whole ms.
  EXPECT_EQ(store->expires_at(fw.key_for("u")), kT0 + 2s + kTtlSlack);
}

TEST_F(MemoryTest, SlidingLogIsExactAtEveryInstant) {
  const auto log = limiter.sliding_log("log", Limit(3, 1s));
  at(100ms);
  EXPECT_TRUE(log.consume("u").allowed);
  at(400ms);
  EXPECT_TRUE(log.consume("u", 2).allowed);
  at(500ms);
  Decision d = log.consume("u");
  EXPECT_FALSE(d.allowed) << show(d);
  EXPECT_EQ(d.retry_after, 600ms) << show(d);  // the unit of 100 ms leaves at 1.1 s
  EXPECT_EQ(d.reset_after, 900ms) << show(d);  // the units of 400 ms leave at 1.4 s
  at(1100ms - 1us);
  EXPECT_FALSE(log.peek("u").allowed);
  at(1100ms);
  d = log.consume("u");
  EXPECT_TRUE(d.allowed) << show(d);
  EXPECT_EQ(d.remaining, 0) << show(d);
  // A refund takes the newest units back.
  d = log.refund("u", 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 1) << show(d);
  EXPECT_EQ(d.reset_after, 300ms) << show(d);  // newest left: 400 ms + 1 s
}

TEST_F(MemoryTest, TokenBucketRefillsContinuously) {
  const auto tb = limiter.token_bucket("tb", 10, 3, 1s);  // 3 tokens a second: one per 333333.3 us
  Decision d = tb.consume("u", 10);
  EXPECT_TRUE(d.allowed) << show(d);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, Micros{3'333'334}) << show(d);
  d = tb.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Micros{333'334}) << show(d);
  clock->advance(Micros{333'333});
  EXPECT_FALSE(tb.consume("u").allowed);
  clock->advance(1us);
  EXPECT_TRUE(tb.consume("u").allowed);
}

TEST_F(MemoryTest, LeakyBucketMeterAndShaper) {
  const auto meter = limiter.leaky_bucket("lm", 2, Limit(1, 1s), LeakyMode::meter);
  EXPECT_TRUE(meter.consume("u").allowed);
  EXPECT_TRUE(meter.consume("u").allowed);
  Decision d = meter.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 1s) << show(d);
  EXPECT_EQ(d.reset_after, 2s) << show(d);

  const auto shaper = limiter.leaky_bucket("ls", 3, Limit(1, 1s), LeakyMode::shaper);
  for (Micros expected : {0s, 1s, 2s}) {
    d = shaper.consume("u");
    EXPECT_TRUE(d.allowed) << show(d);
    EXPECT_EQ(d.delay, expected) << show(d);
  }
  d = shaper.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 1s) << show(d);
}

// A bucket written a year ahead (a client whose clock runs ahead) is waited for exactly, and a
// refund reaches past it to the present one: the walks go from bucket to bucket, not through the
// year's 3 * 10^7 empty seconds.
TEST_F(MemoryTest, APolicyWaitsForAndRefundsPastABucketAYearAhead) {
  constexpr Micros kYear = std::chrono::hours(24 * 365);
  const auto pol = limiter.policy("ahead", redlimit::parse_limits("10/s; 100/min"));
  at(kYear);
  EXPECT_TRUE(pol.consume("waits", 10).allowed);
  EXPECT_TRUE(pol.consume("refunds", 2).allowed);
  at(0s);
  Decision d = pol.consume("waits");
  EXPECT_FALSE(d.allowed) << show(d);
  EXPECT_EQ(d.limit_index, 0u) << show(d);
  // The second's 10 units weigh 9 at a year + 1.1 s; the minute's 10 never stood in the way.
  EXPECT_EQ(d.retry_after, kYear + 1100ms) << show(d);

  EXPECT_TRUE(pol.consume("refunds", 5).allowed);
  d = pol.refund("refunds", 7);
  EXPECT_EQ(d.remaining, 10) << show(d);
  EXPECT_EQ(d.reset_after, 0s) << show(d);

  at(kYear + 1100ms - 1us);
  EXPECT_FALSE(pol.consume("waits").allowed);
  at(kYear + 1100ms);
  EXPECT_TRUE(pol.consume("waits").allowed);
}

TEST_F(MemoryTest, PolicyIsAllOrNothingAndNamesTheDecidingLimit) {
  const auto pol = limiter.policy("api", redlimit::parse_limits("3/s; 5/min"));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(pol.consume("u").allowed);
  Decision d = pol.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit_index, 0u) << show(d);
  EXPECT_EQ(d.limit, 3);
  at(1s);  // at the very edge the previous second still weighs in full
  EXPECT_FALSE(pol.consume("u").allowed);
  at(2s);
  EXPECT_TRUE(pol.consume("u").allowed);
  EXPECT_TRUE(pol.consume("u").allowed);
  d = pol.consume("u");  // the second has room, the minute does not: nothing is recorded
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit_index, 1u) << show(d);
  EXPECT_EQ(d.limit, 5);
  // At 1:12 the first minute's 5 units weigh 5 * 48/60 = 4, leaving room for one.
  EXPECT_EQ(d.retry_after, 70s) << show(d);
  d = pol.peek("u");
  EXPECT_EQ(d.remaining, 0) << show(d);
  // A rejected request recorded nothing in the per-second limit either: a refund of one unit leaves
  // room for exactly one more.
  d = pol.refund("u", 1);
  EXPECT_EQ(d.remaining, 1) << show(d);
  EXPECT_TRUE(pol.consume("u").allowed);
  EXPECT_FALSE(pol.consume("u").allowed);
}

TEST_F(MemoryTest, BlockDeniesUntilItEndsAndResetLiftsIt) {
  const auto fw = limiter.fixed_window("fw", Limit(100, 1h));
  Decision d = fw.block("u", 10s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 10s);
  at(4s);
  d = fw.block("u", 1s);  // never shortens a block
  EXPECT_EQ(d.retry_after, 6s) << show(d);
  d = fw.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 6s) << show(d);
  at(10s);
  EXPECT_TRUE(fw.consume("u").allowed);
  fw.block("u", 1h);
  EXPECT_FALSE(fw.consume("u").allowed);
  fw.reset("u");
  d = fw.consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 99) << show(d);  // the reset also forgot the earlier unit
}

TEST_F(MemoryTest, AcquireSleepsOnTheClock) {
  const auto fw = limiter.fixed_window("fw", Limit(1, 1s));
  at(300ms);
  EXPECT_TRUE(fw.acquire("u", 1, 0us).allowed);
  const Decision d = fw.acquire("u", 1, 2s);
  EXPECT_TRUE(d.allowed) << show(d);
  EXPECT_EQ(clock->now(), kT0 + 1s);  // slept exactly until the next window
}

// max_wait = microseconds::max() ("as long as it takes") used to overflow now + max_wait and
// deadline - now (signed overflow: undefined, caught by the UBSan pass); the deadline is now held at
// Micros::max(), and the call waits what it must.
TEST_F(MemoryTest, AcquireWithAnUnboundedWaitWaitsWhatItMust) {
  const auto fw = limiter.fixed_window("fw", Limit(1, 1s));
  at(300ms);
  EXPECT_TRUE(fw.consume("u").allowed);
  const Decision d = fw.acquire("u", 1, std::chrono::microseconds::max());
  EXPECT_TRUE(d.allowed) << show(d);
  EXPECT_EQ(clock->now(), kT0 + 1s);
  const auto lb = limiter.leaky_bucket("lb", 10, Limit(1, 1s), redlimit::LeakyMode::shaper);
  EXPECT_TRUE(lb.acquire("u", 1, std::chrono::microseconds::max()).allowed);
  const Decision queued = lb.acquire("u", 1, std::chrono::microseconds::max());
  EXPECT_TRUE(queued.allowed) << show(queued);
  EXPECT_EQ(queued.delay, 1s) << show(queued);  // a shaper's delay is slept, not refused
}

TEST(MemoryBackend, InMemoryHonoursTimeSourceRedisWithTheClock) {
  auto clock = std::make_shared<ManualClock>(kT0 + 500ms);
  Options o;
  o.clock = clock;
  o.time_source = redlimit::TimeSource::redis;
  const RateLimiter limiter = RateLimiter::in_memory(o);
  const auto fw = limiter.fixed_window("fw", Limit(1, 1s));
  EXPECT_TRUE(fw.consume("u").allowed);
  const Decision d = fw.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 500ms) << show(d);  // "redis" time is the memory backend's clock
}

TEST(MemoryBackend, InMemoryWithoutAClockUsesSystemTime) {
  const RateLimiter limiter = RateLimiter::in_memory();
  const auto fw = limiter.fixed_window("fw", Limit(2, 1h));
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_TRUE(fw.consume("u").allowed);
  const Decision d = fw.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_GT(d.retry_after.count(), 0);
  EXPECT_LE(d.retry_after, 1h);
}

}  // namespace
