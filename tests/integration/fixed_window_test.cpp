// Fixed window against a real server: epoch-aligned windows, exact retry_after / reset_after, and
// rejected requests recording nothing.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class FixedWindowTest : public StrictRedisTest {};

TEST_F(FixedWindowTest, CountsWithinTheAlignedWindow) {
  auto fw = rl().fixed_window("fw", Limit(3, 1s));
  at(250ms);
  for (std::int64_t expected_remaining : {2, 1, 0}) {
    const Decision d = fw.consume("u");
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.limit, 3);
    EXPECT_EQ(d.remaining, expected_remaining) << d;
    EXPECT_EQ(d.retry_after, 0us) << d;
    EXPECT_EQ(d.reset_after, 750ms) << d;  // the window [T0, T0 + 1s) closes in 750 ms
    EXPECT_EQ(d.delay, 0us) << d;
  }
  const Decision d = fw.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;
  EXPECT_EQ(d.retry_after, 750ms) << d;
  EXPECT_EQ(d.reset_after, 750ms) << d;
  EXPECT_EQ(dbsize(), 1);
}

TEST_F(FixedWindowTest, WindowsAreAlignedToTheEpoch) {
  auto fw = rl().fixed_window("fw", Limit(5, 1min));
  at(30s);
  EXPECT_TRUE(fw.consume("u", 5).allowed);
  at(60s - 1us);  // still minute 0 of kT0, which is minute-aligned
  Decision d = fw.peek("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 1us) << d;
  at(60s);
  d = fw.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 4) << d;
  EXPECT_EQ(d.reset_after, 60s) << d;
}

TEST_F(FixedWindowTest, RetryAfterIsExact) {
  auto fw = rl().fixed_window("fw", Limit(5, 10s));
  at(3500ms);
  EXPECT_EQ(fw.consume("u", 3).remaining, 2);
  EXPECT_EQ(fw.consume("u", 2).remaining, 0);
  const Decision d = fw.consume("u");
  EXPECT_EQ(d.retry_after, 6500ms) << d;
  const Decision admitted = expect_retry_after_exact(*clock, fw, "u", 1, d);
  EXPECT_EQ(admitted.remaining, 4) << admitted;
}

TEST_F(FixedWindowTest, RetryAfterIsExactWithCostAboveOne) {
  auto fw = rl().fixed_window("fw", Limit(5, 10s));
  at(3500ms);
  EXPECT_EQ(fw.consume("u", 3).remaining, 2);
  const Decision d = fw.consume("u", 3);  // 3 + 3 > 5
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 2) << d;
  EXPECT_EQ(d.retry_after, 6500ms) << d;
  const Decision admitted = expect_retry_after_exact(*clock, fw, "u", 3, d);
  EXPECT_EQ(admitted.remaining, 2) << admitted;
  EXPECT_EQ(admitted.reset_after, 10s) << admitted;
}

TEST_F(FixedWindowTest, ResetAfterIsExact) {
  auto fw = rl().fixed_window("fw", Limit(5, 10s));
  at(1234567us);
  const Decision d = fw.consume("u", 2);
  EXPECT_EQ(d.reset_after, 10s - 1234567us) << d;
  expect_reset_after_exact(*clock, fw, "u", d);
  // Nothing recorded: a fresh subject needs no reset.
  EXPECT_EQ(fw.peek("fresh").reset_after, 0us);
}

TEST_F(FixedWindowTest, AnAdmissionPackedJustBelowTwoTo53IsExact) {
  // One request's admission comes as reset_after * (limit + 1) + remaining when that is below 2^53
  // (lua/epilogue.lua, reply). At 8,191 us before the window's end a limit of 2^40 packs to
  // 2^53 - 2^40 + 8,191 + remaining: below 2^53 once 8,192 or more are used, while that product
  // plus the limit alone is past it, where doubles step by 2. Summed in that order the second
  // request's figure came back a unit off.
  const std::int64_t limit = std::int64_t{1} << 40;
  auto fw = rl().fixed_window("fw", Limit(limit, 1s));
  at(1s - 8191us);
  EXPECT_EQ(fw.consume("u", 5000).remaining, limit - 5000);
  const Decision d = fw.consume("u", 5000);
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, limit - 10000) << d;
  EXPECT_EQ(d.reset_after, 8191us) << d;
  EXPECT_EQ(fw.peek("u").remaining, limit - 10000);
}

TEST_F(FixedWindowTest, RejectedRequestsRecordNothing) {
  auto fw = rl().fixed_window("fw", Limit(5, 10s));
  at(1s);
  EXPECT_TRUE(fw.consume("u", 4).allowed);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(fw.consume("u", 2).allowed);
  EXPECT_EQ(window_state(server().command({"HGETALL", fw.key_for("u")})).quantity, 4);
  // The one unit left is still there.
  const Decision d = fw.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 0) << d;
}

TEST_F(FixedWindowTest, KeyExpiresWithItsWindow) {
  auto fw = rl().fixed_window("fw", Limit(5, 1h));
  at(15min);
  fw.consume("u");
  const std::int64_t pttl = server().integer({"PTTL", fw.key_for("u")});
  EXPECT_GT(pttl, (45min - 5s) / 1ms);
  EXPECT_LE(pttl, 45min / 1ms + 1001);  // ttl_ms adds a second's margin and a millisecond (prologue.lua)
}

// The write that starts a window's state sets its TTL (PSETEX); the later writes in the window keep
// it (SETRANGE in place), as do a refund and a batch; the next window's first write sets a new one. A
// batch's new key written twice gets the TTL of its first write.
TEST_F(FixedWindowTest, TheTtlIsSetByTheWindowsFirstWriteAndKept) {
  auto fw = rl().fixed_window("fw", Limit(5, 1h));
  const auto pttl = [&](const std::string& who) { return server().integer({"PTTL", fw.key_for(who)}); };
  at(15min);
  fw.consume("u");
  const std::int64_t first = pttl("u");
  EXPECT_GT(first, (45min - 5s) / 1ms);
  at(40min);  // had the TTL been written again, it would be 20 min
  fw.consume("u");
  fw.refund("u", 1);
  fw.consume_many({{"u", 1}, {"u", 1}});
  const std::int64_t kept = pttl("u");
  EXPECT_LE(kept, first);
  EXPECT_GT(kept, first - 5000) << "the TTL was written again";
  EXPECT_EQ(fw.peek("u").remaining, 2);
  at(1h + 10min);  // the next window: its first write sets its own TTL
  fw.consume("u");
  EXPECT_LE(pttl("u"), 50min / 1ms + 1001);
  EXPECT_GT(pttl("u"), (50min - 5s) / 1ms);
  fw.consume_many({{"new", 1}, {"new", 1}});
  EXPECT_GT(pttl("new"), (50min - 5s) / 1ms) << "a batch's new key keeps its first write's TTL";
  EXPECT_EQ(fw.peek("new").remaining, 3);
}

TEST_F(FixedWindowTest, AWindowStartedByAClockAheadWins) {
  // A client whose clock runs ahead opened window [10 s, 20 s); a lagging one at 9 s keeps counting
  // that window instead of going back to [0 s, 10 s).
  auto fw = rl().fixed_window("fw", Limit(5, 10s));
  at(10s);
  EXPECT_TRUE(fw.consume("u", 5).allowed);
  at(9s);
  const Decision d = fw.consume("u");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 11s) << d;
  at(20s);
  EXPECT_TRUE(fw.consume("u").allowed);
}

// The lagging client's requests land in the window the clock ahead started, one after another, and
// the hash keeps that window's field alone.
TEST_F(FixedWindowTest, ALaggingClientCountsInTheWindowAhead) {
  auto fw = rl().fixed_window("lag", Limit(5, 10s));
  at(10s);
  EXPECT_TRUE(fw.consume("u", 2).allowed);
  at(9s);
  EXPECT_EQ(fw.consume("u").remaining, 2);
  EXPECT_EQ(fw.consume_many({{"u", 1}, {"u", 1}})[1].remaining, 0);
  const PackedState held = window_state(server().command({"HGETALL", fw.key_for("u")}));
  EXPECT_EQ(held.time, (kT0 + 10s).count());
  EXPECT_EQ(held.quantity, 5);
  EXPECT_EQ(server().integer({"HLEN", fw.key_for("u")}), 1);
}

// 0.3 kept a fixed window in a 20-byte string (start, used, window: '<I7I6I7'), with a block after it
// as 9 bytes ('<I7' and "BK"). Such a state is read as the hash it becomes: its count and its block
// still hold (docs/keys.md, Upgrading a fixed window from 0.3).
std::string packed_window(std::int64_t start, std::int64_t used, std::int64_t window) {
  std::string v;
  const auto put = [&](std::int64_t x, int bytes) {
    for (int i = 0; i < bytes; ++i) v += static_cast<char>((x >> (8 * i)) & 0xff);
  };
  put(start, 7);
  put(used, 6);
  put(window, 7);
  return v;
}

TEST_F(FixedWindowTest, AStateOf03IsReadAndReplacedByTheHash) {
  auto fw = rl().fixed_window("up", Limit(5, 1min));
  at(10s);
  server().command({"SET", fw.key_for("u"), packed_window(kT0.count(), 3, 60'000'000), "PX", "60000"});
  Decision d = fw.peek("u");
  EXPECT_EQ(d.remaining, 2) << d;
  EXPECT_EQ(server().command({"TYPE", fw.key_for("u")}).str, "string") << "a peek writes nothing";
  d = fw.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 1) << d;
  EXPECT_EQ(server().command({"TYPE", fw.key_for("u")}).str, "hash");
  EXPECT_EQ(window_state(server().command({"HGETALL", fw.key_for("u")})).quantity, 4);
  EXPECT_EQ(fw.consume("u").remaining, 0);
  EXPECT_FALSE(fw.consume("u").allowed);
  // A blocked 0.3 state: the block holds until its end, then the count from before it.
  std::string blocked = packed_window(kT0.count(), 1, 60'000'000);
  const std::string until = packed_window((kT0 + 20s).count(), 0, 0).substr(0, 7);
  server().command({"SET", fw.key_for("b"), blocked + until + "BK", "PX", "60000"});
  d = fw.consume("b");
  EXPECT_FALSE(d.allowed) << d;
  EXPECT_EQ(d.retry_after, 10s) << d;
  EXPECT_EQ(server().command({"HGET", fw.key_for("b"), "blk"}).str, std::to_string((kT0 + 20s).count()));
  at(20s);
  d = fw.consume("b");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 3) << d;
  // A block() on a 0.3 state keeps its count too.
  server().command({"SET", fw.key_for("c"), packed_window(kT0.count(), 2, 60'000'000), "PX", "60000"});
  fw.block("c", 5s);
  at(25s);
  EXPECT_EQ(fw.consume("c").remaining, 2);
}

}  // namespace
}  // namespace redlimit_test
