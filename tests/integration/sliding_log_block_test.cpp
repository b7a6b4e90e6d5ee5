// A sliding log's block (lua/block.lua, kind "4") is a member of its sorted set, "~blk:<until>"
// scored +inf (lua/helpers.lua, BLOCK_MEMBER): the read of the newest entry that every decision
// makes meets it, so a decision of a subject that is not blocked reads no other key
// (command_count_test.cpp counts them). These tests look at the set and its TTL on a real server.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::Decision;
using redlimit::Limit;
using namespace std::chrono_literals;

class SlidingLogBlockTest : public StrictRedisTest {
 protected:
  std::int64_t pttl(const std::string& key) { return server().integer({"PTTL", key}); }
  // ZRANGE key -1 -1 WITHSCORES: the top member and its score ("" for an empty set).
  std::pair<std::string, std::string> top(const std::string& key) {
    const Reply r = server().command({"ZRANGE", key, "-1", "-1", "WITHSCORES"});
    if (r.elements.size() != 2) return {"", ""};
    return {r.elements[0].str, r.elements[1].str};
  }
  std::int64_t card(const std::string& key) { return server().integer({"ZCARD", key}); }
  std::string member(Micros until) { return "~blk:" + std::to_string((kT0 + until).count()); }
};

TEST_F(SlidingLogBlockTest, TheBlockIsAMemberAboveEveryEntry) {
  at(0s);
  const auto sl = rl().sliding_log("held", Limit(5, 1h));
  const std::string key = sl.key_for("u");
  ASSERT_TRUE(sl.consume("u", 2).allowed);
  const std::int64_t before = pttl(key);  // the entry's time plus the hour, plus the margin
  EXPECT_GT(before, 3'599'000);
  sl.block("u", 10s);
  EXPECT_EQ(top(key), std::make_pair(member(10s), std::string("inf")));
  EXPECT_EQ(card(key), 2) << "the entry and the block";
  EXPECT_GE(pttl(key), before - 1000) << "a short block never shortens the log's life";
  EXPECT_EQ(server().command({"GET", sl.block_key_for("u")}).str, std::to_string((kT0 + 10s).count()))
      << "the marker is written too, for the decisions of earlier versions";

  at(4s);
  const Decision d = sl.consume("u", 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 6s);
  EXPECT_EQ(d.reset_after, 1h - 4s) << "the log's own reset outlasts the block";
  EXPECT_EQ(card(key), 2) << "a blocked consume writes nothing";
  // A refund goes through under the block: the entry's units back, the member kept, and the key
  // still lives past the block.
  EXPECT_TRUE(sl.refund("u", 2).allowed);
  EXPECT_EQ(top(key).first, member(10s));
  EXPECT_EQ(card(key), 1) << "the block alone";
  EXPECT_GT(pttl(key), 6'000);
  EXPECT_FALSE(sl.consume("u", 1).allowed);

  // Once it ends, a peek reads past the member; the first consume deletes it.
  at(10s);
  EXPECT_EQ(sl.peek("u", 1).remaining, 5);
  EXPECT_EQ(card(key), 1);
  const Decision after = sl.consume("u", 1);
  EXPECT_TRUE(after.allowed);
  EXPECT_EQ(after.remaining, 4);
  EXPECT_EQ(card(key), 1) << "the new entry alone";
  EXPECT_NE(top(key).first.rfind("~blk:", 0), 0u);
}

TEST_F(SlidingLogBlockTest, BlockNeverShortensAndUnblockRemovesTheMemberAlone) {
  at(0s);
  const auto sl = rl().sliding_log("lift", Limit(5, 1h));
  const std::string key = sl.key_for("u");
  ASSERT_TRUE(sl.consume("u", 3).allowed);
  sl.block("u", 1h);
  sl.block("u", 10s);  // never shortens the block in force
  EXPECT_EQ(top(key).first, member(1h));
  EXPECT_EQ(card(key), 2) << "one block member, replaced, never two";
  sl.block("u", 2h);  // lengthens it
  EXPECT_EQ(top(key).first, member(2h));
  EXPECT_EQ(card(key), 2);
  EXPECT_GT(pttl(key), 2 * 3'600'000) << "the key lives as long as the block";
  EXPECT_TRUE(sl.unblock("u"));
  EXPECT_EQ(card(key), 1) << "the entry stays";
  EXPECT_FALSE(sl.unblock("u")) << "none in force";
  EXPECT_EQ(sl.consume("u", 1).remaining, 1) << "the count from before the block stays";

  // A subject never seen: the set is the block alone, living as long as the block (plus the
  // margin), and unblock() leaves no key.
  sl.block("new", 10s);
  EXPECT_EQ(card(sl.key_for("new")), 1);
  EXPECT_GT(pttl(sl.key_for("new")), 10'000);
  EXPECT_LE(pttl(sl.key_for("new")), 11'001);
  EXPECT_FALSE(sl.consume("new", 1).allowed);
  EXPECT_TRUE(sl.unblock("new"));
  EXPECT_EQ(server().integer({"EXISTS", sl.key_for("new")}), 0);
  EXPECT_TRUE(sl.consume("new", 1).allowed);
}

TEST_F(SlidingLogBlockTest, ABatchMeetsTheBlockAndAKeyOfAnotherTypeIsReplaced) {
  at(0s);
  const auto sl = rl().sliding_log("batch", Limit(5, 1h));
  sl.block("b", 10s);
  const auto ds = sl.consume_many({{"a", 1}, {"b", 1}, {"a", 1}, {"b", 2}});
  ASSERT_EQ(ds.size(), 4u);
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[1].retry_after, 10s);
  EXPECT_TRUE(ds[2].allowed);
  EXPECT_EQ(ds[2].remaining, 3);
  EXPECT_FALSE(ds[3].allowed);
  EXPECT_EQ(card(sl.key_for("b")), 1) << "a blocked request of a batch writes nothing";

  // Another program's hash under the log's name: no block, and block() replaces it.
  const std::string key = sl.key_for("c");
  server().command({"HSET", key, "field", "value"});
  server().command({"PEXPIRE", key, "600000"});
  sl.block("c", 10s);
  EXPECT_EQ(top(key).first, member(10s));
  EXPECT_FALSE(sl.consume("c", 1).allowed);
}

}  // namespace
}  // namespace redlimit_test
