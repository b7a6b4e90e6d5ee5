// Blocks (Strategy::block, lua/block.lua) on a real server: every strategy rejects a blocked subject
// until the block ends or unblock() lifts it, refunds go through, and the count from before the
// block survives it. A string state (token and leaky buckets) holds its block itself
// (lua/helpers.lua, split_block), a hash (fixed and sliding windows, policies) in its field "blk",
// and a sliding log's sorted set as a member (sliding_log_block_test.cpp), so that their decisions
// read one key; these tests look at those bytes, fields and TTLs.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class BlockTest : public StrictRedisTest {
 protected:
  std::int64_t strlen(const std::string& key) { return server().integer({"STRLEN", key}); }
  std::int64_t pttl(const std::string& key) { return server().integer({"PTTL", key}); }
};

bool holds_its_block(const AnyStrategy& s) {
  return s.name == "token_bucket" || s.name == "leaky_meter" || s.name == "leaky_shaper";
}
bool hash_holds_its_block(const AnyStrategy& s) { return s.name == "sliding_window" || s.name == "fixed_window"; }

TEST_F(BlockTest, EveryStrategyRejectsUntilTheBlockEndsAndKeepsWhatWasCountedBefore) {
  at(0s);
  for (const auto& s : all_strategies(rl(), "every", 5, 1h)) {
    SCOPED_TRACE(s.name);
    at(0s);
    ASSERT_TRUE(s.consume("u", 2).allowed);
    const Decision b = s.block("u", 10s);
    EXPECT_FALSE(b.allowed);
    EXPECT_EQ(b.retry_after, 10s);
    at(4s);
    for (const Decision& d : {s.consume("u", 1), s.peek("u", 1), s.consume_many({{"u", 1}, {"v", 1}})[0]}) {
      EXPECT_FALSE(d.allowed) << d;
      EXPECT_EQ(d.retry_after, 6s) << d;
      EXPECT_EQ(d.remaining, 0) << d;
    }
    EXPECT_TRUE(s.consume_many({{"u", 1}, {"v", 1}})[1].allowed) << "another subject of the same call";
    // A refund goes through, and the block stays.
    EXPECT_TRUE(s.refund("u", 1).allowed);
    EXPECT_FALSE(s.consume("u", 1).allowed);
    // At the block's end: what was counted before it (2, less the refund) still counts.
    at(10s);
    const Decision after = s.consume("u", 1);
    EXPECT_TRUE(after.allowed) << after;
    if (s.name != "leaky_shaper") EXPECT_LE(after.remaining, 3) << after;
    if (holds_its_block(s)) EXPECT_EQ(strlen(s.key_for("u")), 28) << "the write after the block drops it";
    if (hash_holds_its_block(s)) {
      EXPECT_EQ(server().integer({"HEXISTS", s.key_for("u"), "blk"}), 0) << "the write after the block drops it";
    }
  }
}

// reset_after says when the subject is back to full quota. During a block that is the later of the
// block's end and the state's own: 2 of 5 an hour counted before a 10 s block are not back at its
// end. retry_after stays the block's. (It was the block's time left, whatever the state.)
TEST_F(BlockTest, DuringABlockResetAfterIsTheLaterOfTheBlocksEndAndTheStates) {
  const redlimit::RateLimiter memory = redlimit::RateLimiter::in_memory(options());
  for (const redlimit::RateLimiter* l : {&rl(), &memory}) {  // the scripts, then their twins
    SCOPED_TRACE(l == &memory ? "in_memory()" : "Redis");
    for (const auto& s : all_strategies(*l, "reset", 5, 1h)) {
      SCOPED_TRACE(s.name);
      at(0s);
      ASSERT_TRUE(s.consume("u", 2).allowed);
      const Micros own = s.peek("u", 1).reset_after;
      ASSERT_GT(own, 10s);
      const Decision blocked = s.block("u", 10s);  // block()'s own decision says so too
      EXPECT_FALSE(blocked.allowed) << blocked;
      EXPECT_EQ(blocked.retry_after, 10s) << blocked;
      EXPECT_EQ(blocked.reset_after, own) << blocked;
      at(4s);
      for (const Decision& d : {s.consume("u", 1), s.peek("u", 1), s.consume_many({{"u", 1}, {"v", 1}})[0]}) {
        EXPECT_FALSE(d.allowed) << d;
        EXPECT_EQ(d.retry_after, 6s) << d;
        EXPECT_EQ(d.reset_after, own - 4s) << d;
      }
      // A block that outlasts the state: its end.
      ASSERT_TRUE(s.consume("w", 1).allowed);
      EXPECT_EQ(s.block("w", 2h).reset_after, 2h);
      EXPECT_EQ(s.peek("w", 1).reset_after, 2h);
    }
    // A policy: each limit's at the later of the block's end and its own.
    const auto api = l->policy("reset.pol", redlimit::parse_limits("5/1h; 3/10s"));
    at(0s);
    ASSERT_TRUE(api.consume("u", 2).allowed);
    const Micros hour_own = api.peek("u", 1).limits.at(0).reset_after;
    const Decision blocked = api.block("u", 30s);
    ASSERT_EQ(blocked.limits.size(), 2u) << blocked;
    EXPECT_EQ(blocked.limits[0].reset_after, hour_own) << blocked;
    EXPECT_EQ(blocked.limits[0].remaining, 0) << blocked;
    EXPECT_EQ(blocked.limits[1].reset_after, 30s) << blocked;
    EXPECT_EQ(blocked.reset_after, hour_own) << blocked;
    at(4s);
    const Decision d = api.peek("u", 1);
    ASSERT_EQ(d.limits.size(), 2u) << d;
    EXPECT_EQ(d.retry_after, 26s) << d;
    EXPECT_EQ(d.limits[0].reset_after, hour_own - 4s) << d;
    EXPECT_EQ(d.limits[1].reset_after, 26s) << d;  // its own 10 s bucket ended sooner
    EXPECT_EQ(d.reset_after, hour_own - 4s) << d;
  }
}

// A write that keeps the key's TTL overwrites a string state in place (SETRANGE) only when the key
// holds a value of the new one's length: after a block has ended, the state is still followed by
// the block's bytes, which the write must drop, not leave behind. In a batch, the second request of
// the subject reads what the first wrote, and its write then keeps the TTL in place. A fixed
// window's hash drops its ended block, and puts its count back above zero, in the same write.
TEST_F(BlockTest, AWriteAfterAnEndedBlockDropsItInABatchToo) {
  for (const auto& s : all_strategies(rl(), "ended", 5, 1h)) {
    if (!holds_its_block(s) && s.name != "fixed_window") continue;
    SCOPED_TRACE(s.name);
    at(0s);
    ASSERT_TRUE(s.consume("u", 1).allowed);
    s.block("u", 1s);
    const bool window = s.name == "fixed_window";
    // What the key holds: a string state's length, or a fixed window's block field and count.
    const auto expect_held = [&](std::int64_t length, std::int64_t count, bool blocked) {
      if (!window) {
        EXPECT_EQ(strlen(s.key_for("u")), length);
        return;
      }
      EXPECT_EQ(server().integer({"HEXISTS", s.key_for("u"), "blk"}), blocked ? 1 : 0);
      EXPECT_EQ(window_state(server().command({"HGETALL", s.key_for("u")})).quantity, count);
    };
    expect_held(28 + 9, 1, true);  // the state, then the block
    at(2s);
    const std::vector<Decision> d = s.consume_many({{"u", 1}, {"u", 1}});
    ASSERT_EQ(d.size(), 2u);
    EXPECT_TRUE(d[0].allowed) << d[0];
    EXPECT_TRUE(d[1].allowed) << d[1];
    if (s.name != "leaky_shaper") EXPECT_EQ(d[1].remaining, 2) << d[1];
    expect_held(28, 3, false);  // the ended block is gone
    EXPECT_GT(pttl(s.key_for("u")), 0);
    const Decision next = s.consume("u", 1);  // a single decision's write, now in place
    EXPECT_TRUE(next.allowed) << next;
    if (s.name != "leaky_shaper") EXPECT_EQ(next.remaining, 1) << next;
    expect_held(28, 4, false);
  }
}

// A fixed window's hash holds its block in the field "blk", and its count less 2^50 until the
// block ends (lua/helpers.lua, WINDOW_BLOCKED), so that a decision's HINCRBY meets the block.
TEST_F(BlockTest, AFixedWindowsHashHoldsItsBlockBesideItsCount) {
  at(0s);
  const auto fw = rl().fixed_window("held", Limit(5, 1h));
  fw.consume("u", 2);
  fw.block("u", 10s);
  const std::string key = fw.key_for("u");
  EXPECT_EQ(server().command({"HGET", key, "blk"}).str, std::to_string((kT0 + 10s).count()));
  const std::string field = std::to_string(kT0.count()) + ":3600000000";
  EXPECT_EQ(std::stoll(server().command({"HGET", key, field}).str), 2 - (std::int64_t{1} << 50));
  EXPECT_EQ(window_state(server().command({"HGETALL", key})).quantity, 2);
  // The marker is written too, for the decisions of older versions.
  EXPECT_EQ(server().command({"GET", fw.block_key_for("u")}).str, std::to_string((kT0 + 10s).count()));
  // A subject never seen: the block alone, living as long as the block (plus the margin).
  fw.block("new", 10s);
  EXPECT_EQ(server().integer({"HLEN", fw.key_for("new")}), 1);
  EXPECT_GT(pttl(fw.key_for("new")), 10'000);
  EXPECT_LE(pttl(fw.key_for("new")), 11'001);
  EXPECT_FALSE(fw.consume("new", 1).allowed);
  at(10s);
  EXPECT_EQ(fw.consume("new", 1).remaining, 4) << "the block alone held no count";
  EXPECT_EQ(server().integer({"HEXISTS", fw.key_for("new"), "blk"}), 0);
  EXPECT_EQ(fw.consume("u", 1).remaining, 2) << "the count from before the block, back above zero";
  EXPECT_EQ(server().command({"HGET", key, field}).str, "3");
}

TEST_F(BlockTest, TheStateKeyOutlivesBothTheBlockAndItsOwnState) {
  at(0s);
  // A block longer than the window: the key lives until the block ends.
  const auto shortw = rl().fixed_window("short", Limit(5, 1s));
  shortw.consume("u", 1);
  shortw.block("u", 1h);
  EXPECT_GT(pttl(shortw.key_for("u")), 3'600'000);
  // A block shorter than the window: the key keeps living until the window ends.
  const auto longw = rl().fixed_window("long", Limit(5, 24h));
  longw.consume("u", 1);
  const std::int64_t before = pttl(longw.key_for("u"));
  longw.block("u", 1s);
  EXPECT_GE(pttl(longw.key_for("u")), before - 1000);
  // A bucket: its lease (helpers.lua, bucket_ttl) is kept as well.
  const auto tb = rl().token_bucket("bucket", 100, 1, 1h);  // 1 token an hour: a long lease
  tb.consume("u", 100);
  const std::int64_t lease = pttl(tb.key_for("u"));
  tb.block("u", 1s);
  EXPECT_GE(pttl(tb.key_for("u")), lease - 1000);
  // A refund during a block that writes a new TTL never cuts the block's.
  shortw.refund("u", 1);
  EXPECT_GT(pttl(shortw.key_for("u")), 3'600'000);
  EXPECT_FALSE(shortw.consume("u", 1).allowed);
}

// A string under a bucket's key of a length that is no lease's (here 20 zero bytes, a 0.3 fixed
// window's layout, which no bucket writes) lives as long as its key's TTL says, as a 0.2 state does:
// block.lua once read it as a window that had ended at 0, and gave the key the block's second alone.
TEST_F(BlockTest, AStateThatIsNoLeasesKeepsItsKeysTtlThroughABlock) {
  at(0s);
  const auto tb = rl().token_bucket("odd", 10, 1, 1s);
  const std::string key = tb.key_for("u");
  ASSERT_EQ(server().command({"PSETEX", key, "5000", std::string(20, '\0')}).type, redlimit::Reply::Type::status);
  tb.block("u", 1s);
  EXPECT_GT(pttl(key), 4'000) << "the key's own TTL, longer than the block";
  EXPECT_EQ(strlen(key), 29) << "the 20 bytes kept, the block's 9 after them";
  EXPECT_FALSE(tb.consume("u", 1).allowed);
}

TEST_F(BlockTest, ABlockIsNeverShortened) {
  at(0s);
  const auto tb = rl().token_bucket("never", 5, 5, 1s);
  tb.block("u", 1h);
  EXPECT_EQ(tb.block("u", 1s).retry_after, 1h);
  at(30min);
  EXPECT_EQ(tb.consume("u", 1).retry_after, 30min);
}

// Strategy::unblock (block.lua with a duration of 0): the block goes from both places it is kept,
// what was counted before and during it stays, and so does the state key's TTL.
TEST_F(BlockTest, UnblockLiftsTheBlockAndKeepsTheCount) {
  for (const auto& s : all_strategies(rl(), "lift", 5, 1h)) {
    SCOPED_TRACE(s.name);
    at(0s);
    ASSERT_TRUE(s.consume("u", 2).allowed);
    s.block("u", 10s);
    EXPECT_TRUE(s.refund("u", 1).allowed);  // counted during the block: 1 used
    at(4s);
    EXPECT_TRUE(s.unblock("u"));
    EXPECT_EQ(server().integer({"EXISTS", s.block_key_for("u")}), 0);
    const Decision d = s.consume("u", 1);
    EXPECT_TRUE(d.allowed) << d;
    if (s.name != "leaky_shaper") EXPECT_EQ(d.remaining, 3) << d;
    EXPECT_GT(pttl(s.key_for("u")), 0);
    EXPECT_FALSE(s.unblock("u")) << "none left";
    // A subject with no state: a string state that held the block alone is deleted.
    s.block("new", 10s);
    EXPECT_TRUE(s.unblock("new"));
    EXPECT_EQ(server().integer({"EXISTS", s.key_for("new"), s.block_key_for("new")}), 0);
    EXPECT_EQ(s.consume("new", 1).remaining, 4);
    // A block that ended, still in the state until the next write: nothing in force, cut all the same.
    s.block("old", 1s);
    at(6s);
    EXPECT_FALSE(s.unblock("old"));
    if (holds_its_block(s) || hash_holds_its_block(s)) EXPECT_EQ(server().integer({"EXISTS", s.key_for("old")}), 0);
  }
}

TEST_F(BlockTest, UnblockForgetsTheLocalRejectCachesEntry) {
  redlimit::Options o = options();
  o.local_reject_cache = true;
  const auto cached = redlimit::RateLimiter::connect(server().url(), o);
  const auto fw = cached.fixed_window("cached", Limit(5, 1h));
  at(0s);
  fw.block("u", 1h);
  EXPECT_FALSE(fw.consume("u", 1).allowed);  // remembered for an hour
  const std::uint64_t hits = cached.counters().local_cache_hits;
  EXPECT_FALSE(fw.consume("u", 1).allowed);
  EXPECT_EQ(cached.counters().local_cache_hits, hits + 1);
  EXPECT_TRUE(fw.unblock("u"));
  EXPECT_TRUE(fw.consume("u", 1).allowed);
}

// What an earlier version's block() wrote, the marker alone, blocks no strategy of this version:
// each reads its block from its own state (docs/keys.md, Blocks, says to block again after
// upgrading).
TEST_F(BlockTest, AMarkerAloneBlocksNothing) {
  at(0s);
  const auto fw = rl().fixed_window("m", Limit(5, 1h));
  const auto sl = rl().sliding_log("m", Limit(5, 1h));
  const auto sw = rl().sliding_window("m", Limit(5, 1h));
  const auto pol = rl().policy("m", redlimit::parse_limits("5/h; 50/d"));
  const std::string until = std::to_string((kT0 + 1h).count());
  for (const std::string& key : {fw.block_key_for("u"), sl.block_key_for("u"), sw.block_key_for("u"),
                                 pol.block_key_for("u")}) {
    server().command({"SET", key, until, "PX", "3600000"});
  }
  EXPECT_TRUE(sl.consume("u", 1).allowed);
  EXPECT_TRUE(fw.consume("u", 1).allowed);
  EXPECT_TRUE(sw.consume("u", 1).allowed);
  EXPECT_TRUE(pol.consume("u", 1).allowed);
}

// A sliding window's or a policy's block is the hash's field "blk" (lua/helpers.lua, BLOCK_FIELD):
// the block's end in us, read by the HGETALL a decision makes anyway; the key lives until both the
// block and the newest bucket have ended.
TEST_F(BlockTest, AHashHoldsItsBlockInAField) {
  at(0s);
  const auto pol = rl().policy("hb", redlimit::parse_limits("5/h; 50/d"));
  const std::string key = pol.key_for("u");
  ASSERT_TRUE(pol.consume("u", 2).allowed);
  const std::int64_t before = pttl(key);  // the day's bucket: about 24 h
  EXPECT_GT(before, 23 * 3'600'000);
  const Decision seen = pol.peek("u", 1);
  pol.block("u", 10s);
  EXPECT_EQ(server().command({"HGET", key, "blk"}).str, std::to_string((kT0 + 10s).count()));
  EXPECT_EQ(server().command({"GET", pol.block_key_for("u")}).str, std::to_string((kT0 + 10s).count()))
      << "the marker is written too, for the decisions of older versions";
  EXPECT_GE(pttl(key), before - 1000) << "a short block never shortens the hash's life";
  const Decision d = pol.consume("u", 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 10s);
  ASSERT_EQ(d.limits.size(), 2u);
  for (std::size_t i = 0; i < d.limits.size(); ++i) {
    EXPECT_EQ(d.limits[i].remaining, 0);
    // An hour's and a day's buckets outlast the 10 s block: each limit is back at its own time.
    EXPECT_EQ(d.limits[i].reset_after, std::max(Micros(10s), seen.limits.at(i).reset_after));
  }
  // A block longer than the buckets live: the key lives until the block ends.
  const auto sw = rl().sliding_window("hb", Limit(5, 1s));
  sw.consume("u", 1);
  sw.block("u", 1h);
  EXPECT_GT(pttl(sw.key_for("u")), 3'600'000);
  EXPECT_LE(pttl(sw.key_for("u")), 3'601'001);
  // A subject never seen: a hash of the block alone, gone with it.
  sw.block("new", 10s);
  EXPECT_EQ(server().integer({"HLEN", sw.key_for("new")}), 1);
  EXPECT_GT(pttl(sw.key_for("new")), 10'000);
  EXPECT_LE(pttl(sw.key_for("new")), 11'001);
  // A key of another type under the name (another program's): the block replaces it.
  server().command({"SET", sw.key_for("foreign"), "x"});
  sw.block("foreign", 10s);
  EXPECT_EQ(server().command({"TYPE", sw.key_for("foreign")}).str, "hash");
  EXPECT_FALSE(sw.consume("foreign", 1).allowed);
  // Refunds go through and keep the block; the admission after it ends drops the field.
  EXPECT_TRUE(pol.refund("u", 1).allowed);
  EXPECT_EQ(server().integer({"HEXISTS", key, "blk"}), 1);
  at(10s);
  const Decision after = pol.consume("u", 1);
  EXPECT_TRUE(after.allowed) << after;
  EXPECT_EQ(after.remaining, 3) << "1 kept from before the block, and this one";
  EXPECT_EQ(server().integer({"HEXISTS", key, "blk"}), 0);
}

}  // namespace
}  // namespace redlimit_test
