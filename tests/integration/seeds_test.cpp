// The worked examples of the spec articles, on a real server with a ManualClock.
//  - seed 000 ("Rate Limiting in Rust Using Redis"): fixed window, sliding log and sliding window.
//  - seed 004 (the sliding window article): 100 requests per minute, precision of one window and
//    of 30 s, requests early or late in minute 0, then asked at 1.25 and 1.75 minutes.
// A count is observed as limit - remaining.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class SeedsTest : public StrictRedisTest {
 protected:
  // Consumes one unit at a time until the first rejection; returns how many were admitted.
  template <class S>
  static int admitted_until_rejected(const S& s, std::string_view subject) {
    int n = 0;
    while (n <= 1000 && s.consume(subject).allowed) ++n;
    return n;
  }

  // 100 requests spread over the first quarter of minute 0: one every 150 ms, 0 s .. 14.85 s.
  template <class S>
  void hundred_in_first_quarter_minute(const S& s, std::string_view subject) {
    for (int i = 0; i < 100; ++i) {
      at(Micros{i * 150'000});
      ASSERT_TRUE(s.consume(subject).allowed) << "request " << i;
    }
  }
};

// Seed 000, fixed window: three requests count 1, 2, 3; after the window, a request counts 1.
TEST_F(SeedsTest, Seed000FixedWindow) {
  auto fw = rl().fixed_window("test", Limit(10, 1s));
  at(0s);
  for (std::int64_t count = 1; count <= 3; ++count) {
    const Decision d = fw.consume("user1");
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.limit - d.remaining, count) << d;
  }
  at(1s);  // delay_for(size)
  const Decision d = fw.consume("user1");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.limit - d.remaining, 1) << d;
}

// Seed 000, sliding log: three requests 300 ms apart; 300 ms after the last the log counts 3; 600 ms
// later a new request is counted with the one earlier request still in the last second: 2.
TEST_F(SeedsTest, Seed000SlidingLog) {
  auto sl = rl().sliding_log("test", Limit(10, 1s));
  for (Micros t : {0ms, 300ms, 600ms}) {
    at(t);
    EXPECT_TRUE(sl.consume("user1").allowed);
  }
  at(900ms);
  Decision d = sl.peek("user1");
  EXPECT_EQ(d.limit - d.remaining, 3) << d;
  at(1500ms);
  d = sl.consume("user1");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.limit - d.remaining, 2) << d;  // the requests of 0 ms and 300 ms have left the window
}

// Seed 000, sliding window: five requests count 5; one window later a request counts
// current + previous * weight.
TEST_F(SeedsTest, Seed000SlidingWindow) {
  auto sw = rl().sliding_window("test", Limit(10, 1s));
  at(0s);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(sw.consume("user1").allowed);
  Decision d = sw.peek("user1");
  EXPECT_EQ(d.limit - d.remaining, 5) << d;
  at(1s);  // the previous window still weighs 1
  d = sw.consume("user1");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.limit - d.remaining, 1 + 5) << d;
  at(1400ms);  // it weighs 0.6: 1 + 5 * 0.6 = 4
  d = sw.peek("user1");
  EXPECT_EQ(d.limit - d.remaining, 4) << d;
  at(1500ms);  // 1 + 5 * 0.5 = 3.5: remaining is floor(10 - 3.5) = 6
  d = sw.peek("user1");
  EXPECT_EQ(d.remaining, 6) << d;
}

// Seed 004: 100 requests in the first quarter minute; at 1.25 min the count is 1 + 0.75 * 100 = 76
// after the first new request, leaving 24 more: 25 admitted in all.
TEST_F(SeedsTest, Seed004At125MinutesWithOneMinutePrecision) {
  auto sw = rl().sliding_window("api", Limit::per_minute(100));
  hundred_in_first_quarter_minute(sw, "user");
  at(75s);
  const Decision first = sw.consume("user");
  EXPECT_TRUE(first.allowed) << first;
  EXPECT_EQ(first.remaining, 24) << first;
  EXPECT_EQ(admitted_until_rejected(sw, "user"), 24);
}

// Seed 004: the same with counters of 30 s: at 1.25 min the oldest counter weighs 0.5, 50 admitted.
TEST_F(SeedsTest, Seed004At125MinutesWith30SecondPrecision) {
  auto sw = rl().sliding_window("api", Limit::per_minute(100), 30s);
  hundred_in_first_quarter_minute(sw, "user");
  at(75s);
  EXPECT_EQ(admitted_until_rejected(sw, "user"), 50);
}

// Seed 004: waiting until 1.75 min: 1 + 0.25 * 100 = 26 after the first, 74 more: 75 admitted.
TEST_F(SeedsTest, Seed004At175Minutes) {
  auto sw = rl().sliding_window("api", Limit::per_minute(100));
  hundred_in_first_quarter_minute(sw, "user");
  at(105s);
  const Decision first = sw.consume("user");
  EXPECT_TRUE(first.allowed) << first;
  EXPECT_EQ(first.remaining, 74) << first;
  EXPECT_EQ(admitted_until_rejected(sw, "user"), 74);
}

// Seed 004: the 100 requests come at 0.99 min. With one counter per minute, 25 are still admitted at
// 1.25 min (~16 s later); with 30 s counters all are blocked, the 0.99 min counter being fully inside.
TEST_F(SeedsTest, Seed004RequestsAt099Minutes) {
  auto coarse = rl().sliding_window("api-60s", Limit::per_minute(100));
  auto fine = rl().sliding_window("api-30s", Limit::per_minute(100), 30s);
  at(59400ms);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(coarse.consume("user").allowed);
    ASSERT_TRUE(fine.consume("user").allowed);
  }
  at(75s);
  const Decision blocked = fine.consume("user");
  EXPECT_FALSE(blocked.allowed) << blocked;
  EXPECT_EQ(blocked.remaining, 0) << blocked;
  EXPECT_EQ(admitted_until_rejected(fine, "user"), 0);
  EXPECT_EQ(admitted_until_rejected(coarse, "user"), 25);
}

}  // namespace
}  // namespace redlimit_test
