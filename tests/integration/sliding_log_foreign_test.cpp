// A sliding log holding a foreign member, one neither entry form parses (a 0.2 client's during a
// deploy that mixes versions, or another program's): lua/sliding_log.lua's header says what each
// path does with it. Every call must still answer, never too early, and leave its key with a TTL or
// none at all; before, each of these calls failed with a script error until the key expired.
#include <string>

#include "sliding_log_fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::SlidingLogMembers;

class SlidingLogForeignTest : public SlidingLogFixture {
 protected:
  // `n` entries of cost 1, one a second from 0 s, then the clock at n seconds.
  void fill(const redlimit::SlidingLog& sl, int n) {
    for (int i = 0; i < n; ++i) {
      at(std::chrono::seconds(i));
      ASSERT_TRUE(sl.consume("u").allowed) << i;
    }
    at(std::chrono::seconds(n));
  }
};

// The wait's search lands on the foreign member: it waits for the newest entry to leave (when all
// have), not for the foreign member's time, half a second before the true answer.
TEST_F(SlidingLogForeignTest, ARejectionThatMeetsOneWaitsForTheWholeLog) {
  each_form([&](SlidingLogMembers, const redlimit::RateLimiter& limiter) {
    const auto sl = limiter.sliding_log("fm", Limit(10, 1h));
    fill(sl, 10);
    plant(sl.key_for("u"), "foreign:1", kT0 + 2500ms);  // rank 3: between the units of 2 s and 3 s
    const Decision d = sl.peek("u", 4);                 // 4 units must leave: the wait probes rank 3
    EXPECT_FALSE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 0) << d;
    EXPECT_EQ(d.retry_after, 1h - 1s) << d;  // the newest (9 s) leaves at 1 h 9 s; now is 10 s
    EXPECT_EQ(sl.consume("u", 4).retry_after, 1h - 1s);
    EXPECT_GT(server().integer({"PTTL", sl.key_for("u")}), 0);
  });
}

// A refund's pops pass over the foreign member (it holds none of the units); a cut that meets one
// drops the log: every unit back.
TEST_F(SlidingLogForeignTest, ARefundPassesOverOneItPopsAndRestartsALogItsCutMeetsOneIn) {
  each_form([&](SlidingLogMembers, const redlimit::RateLimiter& limiter) {
    const auto sl = limiter.sliding_log("fm", Limit(30, 1h));
    fill(sl, 20);
    plant(sl.key_for("u"), "foreign:1", kT0 + 18500ms);  // between the two newest
    Decision d = sl.refund("u", 2);
    EXPECT_EQ(d.remaining, 30 - 18) << d;
    const std::vector<SlidingLogEntry> log = entries(sl, "u");  // the foreign member popped too
    ASSERT_EQ(log.size(), 18U);
    EXPECT_EQ(log.back().cum, 18);
    EXPECT_GT(server().integer({"PTTL", sl.key_for("u")}), 0);

    plant(sl.key_for("u"), "foreign:2", kT0 + 2500ms);  // rank 3
    d = sl.refund("u", 15);                             // 8 pops, then a cut at the entry reaching 4 units: rank 3
    EXPECT_EQ(d.remaining, 30) << d;
    EXPECT_EQ(server().integer({"EXISTS", sl.key_for("u")}), 0);
    EXPECT_EQ(sl.consume("u").remaining, 29);
    EXPECT_GT(server().integer({"PTTL", sl.key_for("u")}), 0);
  });
}

// The oldest live member foreign: the units cannot be told, so the log reads as empty and the next
// admission restarts it, as a log 0.2 wrote is.
TEST_F(SlidingLogForeignTest, AnOldestLiveOneRestartsTheLog) {
  each_form([&](SlidingLogMembers, const redlimit::RateLimiter& limiter) {
    const auto sl = limiter.sliding_log("fm", Limit(10, 1h));
    fill(sl, 5);
    plant(sl.key_for("u"), "foreign:1", kT0 - 1s);
    EXPECT_EQ(sl.peek("u").remaining, 10);
    EXPECT_EQ(server().integer({"ZCARD", sl.key_for("u")}), 6);  // a peek writes nothing
    const Decision d = sl.consume("u");
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 9) << d;
    EXPECT_EQ(server().integer({"ZCARD", sl.key_for("u")}), 1);
    EXPECT_GT(server().integer({"PTTL", sl.key_for("u")}), 0);
  });
}

}  // namespace
}  // namespace redlimit_test
