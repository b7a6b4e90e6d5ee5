// Options::time_source = redis: the scripts read Redis TIME themselves and ignore the client clock.
// Assertions bracket every real-time quantity between two TIME readings, and use windows of an hour
// or more, so they hold however slow the machine is.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class TimeSourceTest : public StrictRedisTest {
 protected:
  void SetUp() override {
    StrictRedisTest::SetUp();
    redlimit::Options o;
    o.time_source = redlimit::TimeSource::redis;
    // A client clock 20+ years behind: were it used, every assertion below would fail.
    o.clock = std::make_shared<redlimit::ManualClock>(Micros{946'684'800'000'000});
    redis_time.emplace(redlimit::RateLimiter::connect(server().url(), o));
  }

  // Redis TIME in microseconds.
  Micros server_time() {
    const redlimit::Reply r = server().command({"TIME"});
    EXPECT_EQ(r.elements.size(), 2u);
    return Micros{std::stoll(r.elements[0].str) * 1'000'000 + std::stoll(r.elements[1].str)};
  }

  std::optional<redlimit::RateLimiter> redis_time;
};

TEST_F(TimeSourceTest, FixedWindowCountsInTheServersWindow) {
  // A ten-year window: its edges (multiples of 315,360,000 s since the epoch) are years away.
  const Micros window = Limit::max_window();
  auto fw = redis_time->fixed_window("fw", Limit(3, window));
  const Micros before = server_time();
  for (std::int64_t left : {2, 1, 0}) {
    const Decision d = fw.consume("u");
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, left) << d;
  }
  const Decision d = fw.consume("u");
  const Micros after = server_time();
  EXPECT_FALSE(d.allowed) << d;
  const Micros start{before.count() - before.count() % window.count()};
  EXPECT_EQ(window_state(server().command({"HGETALL", fw.key_for("u")})).time, start.count());
  EXPECT_GE(d.retry_after, start + window - after) << d;
  EXPECT_LE(d.retry_after, start + window - before) << d;
  EXPECT_EQ(d.reset_after, d.retry_after) << d;
}

TEST_F(TimeSourceTest, SlidingLogStampsUnitsWithServerTime) {
  auto sl = redis_time->sliding_log("sl", Limit(5, 1h));
  const Micros before = server_time();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(sl.consume("u").allowed);
  const Decision d = sl.consume("u");
  const Decision p = sl.peek("u");
  const Micros after = server_time();
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_FALSE(p.allowed) << p;
  EXPECT_EQ(p.remaining, 0) << p;
  EXPECT_GE(d.retry_after, 1h - (after - before)) << d;
  EXPECT_LE(d.retry_after, 1h) << d;
  const redlimit::Reply entries = server().command({"ZRANGE", sl.key_for("u"), "0", "-1", "WITHSCORES"});
  ASSERT_EQ(entries.elements.size(), 10u);
  for (std::size_t i = 1; i < entries.elements.size(); i += 2) {
    const Micros score{std::stoll(entries.elements[i].str)};
    EXPECT_GE(score, before);
    EXPECT_LE(score, after);
  }
}

TEST_F(TimeSourceTest, SlidingWindowCountsInServerBuckets) {
  auto sw = redis_time->sliding_window("sw", Limit(5, 1h), 1min);
  const Micros before = server_time();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(sw.consume("u").allowed);
  const Decision d = sw.consume("u");
  const Micros after = server_time();
  EXPECT_FALSE(d.allowed) << d;
  // The buckets written are the minutes of the server's time.
  const redlimit::Reply fields = server().command({"HKEYS", sw.key_for("u")});
  ASSERT_GE(fields.elements.size(), 1u);
  for (const auto& f : fields.elements) {
    // Field "<limit tag>:<bucket index>".
    const std::int64_t bucket = std::stoll(f.str.substr(f.str.rfind(':') + 1));
    EXPECT_GE(bucket, before / 1min);
    EXPECT_LE(bucket, after / 1min);
  }
  // The units leave the window about an hour later (weighted out during the bucket after that).
  EXPECT_GT(d.retry_after, 1h - 1min - (after - before)) << d;
  EXPECT_LE(d.retry_after, 1h + 1min) << d;
}

TEST_F(TimeSourceTest, TokenBucketRefillsOnServerTime) {
  auto tb = redis_time->token_bucket("tb", 5, 1, 1h);
  const Micros before = server_time();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(tb.consume("u").allowed);
  const Decision d = tb.consume("u");
  const Micros after = server_time();
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_GE(d.retry_after, 1h - (after - before)) << d;
  EXPECT_LE(d.retry_after, 1h) << d;
  const std::string state = server().command({"GET", tb.key_for("u")}).str;
  const Micros stamped{unpack_state(state).time};
  EXPECT_GE(stamped, before);
  EXPECT_LE(stamped, after);
}

TEST_F(TimeSourceTest, LeakyBucketLeaksOnServerTime) {
  auto meter = redis_time->leaky_bucket("lm", 3, Limit(1, 1h), redlimit::LeakyMode::meter);
  auto shaper = redis_time->leaky_bucket("ls", 3, Limit(1, 1h), redlimit::LeakyMode::shaper);
  const Micros before = server_time();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(meter.consume("u").allowed);
  const Decision d = meter.consume("u");
  std::vector<Decision> queued;
  for (int i = 0; i < 4; ++i) queued.push_back(shaper.consume("u"));
  const Micros after = server_time();
  const Micros span = after - before;
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_GE(d.retry_after, 1h - span) << d;
  EXPECT_LE(d.retry_after, 1h) << d;
  EXPECT_EQ(queued[0].delay, 0us) << queued[0];
  EXPECT_GE(queued[1].delay, 1h - span) << queued[1];
  EXPECT_LE(queued[1].delay, 1h) << queued[1];
  EXPECT_GE(queued[2].delay, 2h - span) << queued[2];
  EXPECT_LE(queued[2].delay, 2h) << queued[2];
  EXPECT_FALSE(queued[3].allowed) << queued[3];
}

TEST_F(TimeSourceTest, PeekRecordsNothingAndResetForgets) {
  at(0s);
  for (const auto& s : all_strategies(*redis_time, "peek", 2, 1h)) {
    SCOPED_TRACE(s.name);
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(s.peek("u", 2).allowed);
    EXPECT_EQ(dbsize(), 0);
    EXPECT_TRUE(s.consume("u", 2).allowed);
    EXPECT_FALSE(s.peek("u", 1).allowed);
    s.reset("u");
    EXPECT_EQ(dbsize(), 0);
    EXPECT_EQ(s.peek("u", 1).remaining, 2);
  }
}

TEST_F(TimeSourceTest, ClientAndServerTimeLimitersAgreeWithinOneWindow) {
  // The same subject, counted by a limiter on the client clock (set to the server's time) and one
  // on server time: both see each other's units.
  clock->set(server_time());
  auto client_side = rl().sliding_log("shared", Limit(4, 1h));
  auto server_side = redis_time->sliding_log("shared", Limit(4, 1h));
  EXPECT_TRUE(client_side.consume("u", 2).allowed);
  EXPECT_TRUE(server_side.consume("u", 2).allowed);
  EXPECT_FALSE(client_side.peek("u").allowed);
  EXPECT_FALSE(server_side.peek("u").allowed);
}

}  // namespace
}  // namespace redlimit_test
