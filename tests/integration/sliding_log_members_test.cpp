// The sliding log's two entry forms (Options::sliding_log_members, lua/sliding_log.lua): compact
// entries carry their time and decide as text ones do; clients writing either form share one log
// exactly, in any order and at one instant; a member of neither form restarts the log.
#include "sliding_log_fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::SlidingLogMembers;

class SlidingLogMembersTest : public SlidingLogFixture {};

TEST_F(SlidingLogMembersTest, CompactEntriesCarryTheirTimeAndDecideAsText) {
  const redlimit::RateLimiter compact = writing(SlidingLogMembers::compact);
  auto sl = compact.sliding_log("sl", Limit(5, 10s));
  at(0s);
  ASSERT_TRUE(sl.consume("u", 2).allowed);
  at(3s);
  ASSERT_TRUE(sl.consume("u", 3).allowed);
  const std::vector<SlidingLogEntry> log = entries(sl, "u");
  ASSERT_EQ(log.size(), 2u);
  for (const SlidingLogEntry& e : log) {
    EXPECT_TRUE(e.compact);
    EXPECT_EQ(e.time, e.score);  // the time it carries is its score
  }
  EXPECT_EQ(log[0].cum, 2);
  EXPECT_EQ(log[0].cost, 2);
  EXPECT_EQ(log[0].time, (kT0 + 0s).count());
  EXPECT_EQ(log[1].cum, 5);
  EXPECT_EQ(log[1].cost, 3);
  EXPECT_EQ(log[1].time, (kT0 + 3s).count());
  // Full: room for 2 once the first entry leaves at 10 s, exactly.
  at(4s);
  const Decision d = sl.consume("u", 2);
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.reset_after, 9s) << d;
  // A text client reads the compact log as its writer does.
  const Decision p = rl().sliding_log("sl", Limit(5, 10s)).peek("u", 2);
  EXPECT_FALSE(p.allowed) << p;
  EXPECT_EQ(p.retry_after, d.retry_after) << p;
  EXPECT_EQ(p.reset_after, d.reset_after) << p;
  expect_retry_after_exact(*clock, sl, "u", 2, d);
}

// Two clients, one writing each form, take turns on one subject at one instant (the entries then
// share a score unless the form changes) and later: the log admits exactly its limit, keeps cum
// order with rank, and a compact entry after a text newest of its instant is a microsecond later.
TEST_F(SlidingLogMembersTest, TextAndCompactClientsShareALogExactly) {
  const redlimit::RateLimiter compact = writing(SlidingLogMembers::compact);
  auto a = rl().sliding_log("sl", Limit(12, 1h));
  auto b = compact.sliding_log("sl", Limit(12, 1h));
  at(0s);
  std::int64_t admitted = 0;
  for (int i = 0; i < 6; ++i) {  // 3 of 1 unit, 3 of 2: 9 units
    const auto& sl = (i % 2 == 0) ? a : b;
    if (sl.consume("u", 1 + i % 2).allowed) admitted += 1 + i % 2;
  }
  at(1s);
  for (int i = 0; i < 6; ++i) {  // 3 admitted, then full
    const auto& sl = (i % 3 == 0) ? a : b;
    if (sl.consume("u").allowed) admitted += 1;
  }
  EXPECT_EQ(admitted, 12);
  EXPECT_EQ(a.peek("u").remaining, 0);
  EXPECT_EQ(b.peek("u").remaining, 0);
  const std::vector<SlidingLogEntry> log = entries(a, "u");
  std::int64_t cum = 0;
  bool text_then_compact = false;
  for (std::size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].cum, cum + log[i].cost) << "rank " << i;  // cum order is rank order
    cum = log[i].cum;
    if (i > 0 && log[i].compact && !log[i - 1].compact) {
      EXPECT_GT(log[i].score, log[i - 1].score) << "rank " << i;
      if (log[i - 1].score == (kT0 + 0s).count()) text_then_compact = log[i].score == log[i - 1].score + 1;
    }
  }
  EXPECT_EQ(cum, 12);
  EXPECT_TRUE(text_then_compact) << "no compact entry followed a text one at 0 s";
  // The first entries leave an hour (and the bumped ones a microsecond) later; nothing before.
  at(1h - 1us);
  EXPECT_EQ(b.peek("u").remaining, 0);
  at(1h + 1us);
  EXPECT_GT(a.peek("u").remaining, 0);
}

TEST_F(SlidingLogMembersTest, ARefundShortensACompactEntryInItsForm) {
  const redlimit::RateLimiter compact = writing(SlidingLogMembers::compact);
  auto sl = compact.sliding_log("sl", Limit(10, 1h));
  at(0s);
  ASSERT_TRUE(sl.consume("u", 5).allowed);
  at(1s);
  rl().sliding_log("sl", Limit(10, 1h)).refund("u", 2);  // by a text client
  const std::vector<SlidingLogEntry> log = entries(sl, "u");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_TRUE(log[0].compact);
  EXPECT_EQ(log[0].cum, 3);
  EXPECT_EQ(log[0].cost, 3);
  EXPECT_EQ(log[0].time, (kT0 + 0s).count());
  EXPECT_EQ(sl.peek("u").remaining, 7);
}

// A text member of a cost of 100 to 999 is 20 bytes long, as a compact one is: its first byte (a
// digit) tells them apart (sliding_log.lua, parse).
TEST_F(SlidingLogMembersTest, ATwentyByteTextEntryReadsAsText) {
  const redlimit::RateLimiter compact = writing(SlidingLogMembers::compact);
  auto text = rl().sliding_log("sl", Limit(1000, 1h));
  at(0s);
  ASSERT_TRUE(text.consume("u", 150).allowed);
  ASSERT_EQ(server().command({"ZRANGE", text.key_for("u"), "0", "0"}).elements.at(0).str.size(), 20u);
  at(1s);
  const Decision d = compact.sliding_log("sl", Limit(1000, 1h)).consume("u", 2);
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 848) << d;
  const std::vector<SlidingLogEntry> log = entries(text, "u");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_FALSE(log[0].compact);
  EXPECT_EQ(log[0].cum, 150);
  EXPECT_TRUE(log[1].compact);
  EXPECT_EQ(log[1].cum, 152);
  EXPECT_EQ(text.peek("u").remaining, 848);
}

// Not a member either form writes (a short one with a low first byte, as no compact entry is):
// read as no state and replaced at the next write, by either client, without an error.
TEST_F(SlidingLogMembersTest, AMemberOfNeitherFormRestartsTheLog) {
  const redlimit::RateLimiter compact = writing(SlidingLogMembers::compact);
  for (const redlimit::RateLimiter* limiter : {&rl(), &compact}) {
    auto sl = limiter->sliding_log("sl", Limit(3, 1h));
    at(0s);
    const std::string key = sl.key_for("u");
    plant(key, std::string("\x01\x02z", 3));
    EXPECT_EQ(sl.peek("u").remaining, 3);
    EXPECT_TRUE(sl.consume("u").allowed);
    EXPECT_EQ(server().integer({"ZCARD", key}), 1);
    EXPECT_EQ(sl.peek("u").remaining, 2);
    server().command({"DEL", key});
  }
}

// A foreign 20-byte member with a low first byte reads as a compact entry with whatever numbers its
// bytes make (here a cost far above the limit, dated two centuries on): the subject is refused,
// with waits, and no call throws or leaves the key without a TTL.
TEST_F(SlidingLogMembersTest, AForeignCompactLookingMemberNeitherThrowsNorLosesTheTtl) {
  const redlimit::RateLimiter compact = writing(SlidingLogMembers::compact);
  for (const redlimit::RateLimiter* limiter : {&rl(), &compact}) {
    auto sl = limiter->sliding_log("sl", Limit(3, 1h));
    at(0s);
    const std::string key = sl.key_for("u");
    plant(key, std::string(20, '\x1f'));
    const Decision p = sl.peek("u");
    EXPECT_FALSE(p.allowed) << p;
    const Decision d = sl.consume("u");
    EXPECT_FALSE(d.allowed) << d;
    EXPECT_GT(d.retry_after.count(), 0) << d;
    sl.refund("u", 1);
    EXPECT_NE(server().integer({"PTTL", key}), -1);
    server().command({"DEL", key});
  }
}

}  // namespace
}  // namespace redlimit_test
