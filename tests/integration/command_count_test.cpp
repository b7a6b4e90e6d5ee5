// Redis commands per decision (issue 13): what each strategy's script calls (redis.call) for one
// decision, read from INFO commandstats, which counts the commands a script runs. Prints the table
// docs/performance.md shows and holds each strategy to it, so a script that starts calling more is
// caught here.
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::Reply;

class CommandCountTest : public RedisTest {
 protected:
  // Commands run since the last reset, by name, without the script call itself and the harness's.
  std::map<std::string, std::int64_t> commands_since_reset() {
    const std::string info = server().command({"INFO", "commandstats"}).str;
    std::map<std::string, std::int64_t> out;
    std::size_t pos = 0;
    while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
      const std::size_t colon = info.find(':', pos);
      const std::string name = info.substr(pos + 8, colon - pos - 8);
      const std::int64_t calls = std::stoll(info.substr(colon + 7));  // ":calls="
      pos = colon;
      if (name == "fcall" || name == "evalsha" || name == "eval" || name.rfind("config", 0) == 0 ||
          name.rfind("function", 0) == 0) {
        continue;
      }
      out[name] = calls;
    }
    return out;
  }
  std::int64_t count(const std::function<void()>& decide, std::string* names = nullptr) {
    ASSERT_RESET();
    decide();
    std::int64_t n = 0;
    for (const auto& [name, calls] : commands_since_reset()) {
      n += calls;
      if (names != nullptr) *names += (names->empty() ? "" : " ") + name + "×" + std::to_string(calls);
    }
    return n;
  }
  void ASSERT_RESET() { ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).type, Reply::Type::status); }
};

TEST_F(CommandCountTest, EachStrategyCallsAtMostItsShareOfCommands) {
  at(std::chrono::seconds(0));
  auto strategies = all_strategies(rl(), "cc", 1000, std::chrono::minutes(1));
  strategies.push_back(wrap("policy_3", 1000,
                            rl().policy("cc.pol", redlimit::parse_limits("1000/s; 10000/m; 100000/h"))));
  // The most commands one decision may call. A string state: one GET of the state (which holds its
  // block), one write (PSETEX, or SETRANGE in place within a bucket's lease). A fixed window: its
  // HINCRBY, and PEXPIRE NX on a window's first request (the next test). A hash (sliding window, policies of any number
  // of limits), which holds its block too: HGETALL, one HSET, PEXPIRE. The sliding log, whose sorted set holds its
  // block too: the newest entry, the ZADD, the PEXPIRE, and the next consumes the oldest live entry instead of the
  // PEXPIRE (set once per half-second slot; the trim of the entries that left only every limit / 8 units:
  // sliding_log.lua).
  const std::map<std::string, std::int64_t> most = {
      {"fixed_window", 2},   {"token_bucket", 2}, {"leaky_meter", 2}, {"leaky_shaper", 2},
      {"sliding_window", 3}, {"sliding_log", 3},  {"policy_3", 3},
  };
  // The next consume of the same subject, in the same buckets: a hash's TTL still holds (no PEXPIRE).
  const std::map<std::string, std::int64_t> most_next = {
      {"fixed_window", 1},   {"token_bucket", 2}, {"leaky_meter", 2}, {"leaky_shaper", 2},
      {"sliding_window", 2}, {"sliding_log", 3},  {"policy_3", 2},
  };
  std::vector<redlimit::Request> batch;
  std::vector<std::string> subjects;
  for (int i = 0; i < 128; ++i) subjects.push_back("b" + std::to_string(i));
  for (const auto& s : subjects) batch.push_back({s, 1});
  std::printf("[ commands ] per decision: strategy | first consume | next consume | peek | batch of 128 (per decision)\n");
  for (const auto& s : strategies) {
    SCOPED_TRACE(s.name);
    std::string first_names;
    const std::int64_t first = count([&] { s.consume("u", 1); }, &first_names);
    const std::int64_t next = count([&] { s.consume("u", 1); });
    const std::int64_t peek = count([&] { s.peek("u", 1); });
    const std::int64_t many = count([&] { s.consume_many(batch); });
    std::printf("[ commands ] %-14s | %lld (%s) | %lld | %lld | %.2f\n", s.name.c_str(), static_cast<long long>(first),
                first_names.c_str(), static_cast<long long>(next), static_cast<long long>(peek),
                static_cast<double>(many) / 128.0);
    ASSERT_TRUE(most.count(s.name)) << "no bound for " << s.name;
    EXPECT_LE(first, most.at(s.name));
    EXPECT_LE(next, most_next.at(s.name));
    EXPECT_LE(peek, most.at(s.name));
    EXPECT_GE(first, 1) << "INFO commandstats counted nothing: the count cannot be trusted";
    EXPECT_LE(many, 128 * most.at(s.name));
  }
}

// A decision of a subject that is not blocked reads no block marker: the consume of a new subject
// is ZRANGE, ZADD and PEXPIRE; a blocked one reads the entry under the member too, and writes
// nothing.
TEST_F(CommandCountTest, ASlidingLogDecisionReadsNoOtherKeyForItsBlock) {
  at(std::chrono::seconds(0));
  const auto sl = rl().sliding_log("cmds", redlimit::Limit(5, std::chrono::hours(1)));
  ASSERT_TRUE(sl.consume("warm", 1).allowed);  // the script loaded
  ASSERT_RESET();
  ASSERT_TRUE(sl.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset(), (std::map<std::string, std::int64_t>{{"zrange", 1}, {"zadd", 1}, {"pexpire", 1}}));
  sl.block("u", std::chrono::seconds(10));
  ASSERT_RESET();
  ASSERT_FALSE(sl.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset(), (std::map<std::string, std::int64_t>{{"zrange", 2}, {"zrangebyscore", 1}}));
}

// A fixed window's decision is one HINCRBY, whose reply is the count (fixed_window.lua). A window's
// first request sets the TTL with PEXPIRE NX, which says the key is new; on a key that holds the last
// window it reads the hash, deletes that window's field and sets the TTL; a rejection takes its unit
// back with a second HINCRBY.
TEST_F(CommandCountTest, AFixedWindowDecisionIsOneHincrby) {
  const auto fw = rl().fixed_window("one", redlimit::Limit(3, std::chrono::seconds(10)));
  at(std::chrono::seconds(0));
  ASSERT_RESET();
  ASSERT_TRUE(fw.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset(), (std::map<std::string, std::int64_t>{{"hincrby", 1}, {"pexpire", 1}}));
  ASSERT_RESET();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(fw.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset(), (std::map<std::string, std::int64_t>{{"hincrby", 2}}));
  ASSERT_RESET();
  ASSERT_FALSE(fw.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset(), (std::map<std::string, std::int64_t>{{"hincrby", 2}}));
  ASSERT_RESET();
  at(std::chrono::seconds(10));  // the next window, the last one's field still there
  ASSERT_TRUE(fw.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset(),
            (std::map<std::string, std::int64_t>{{"hgetall", 1}, {"hdel", 1}, {"hincrby", 1}, {"pexpire", 2}}));
  EXPECT_EQ(server().integer({"HLEN", fw.key_for("u")}), 1);
}

// A bucket sets its key's TTL once per lease (helpers.lua, bucket_ttl): its first write PSETEXes,
// the next ones of the same lease keep the TTL (SETRANGE, in place: epilogue.lua, rare_write), and a
// write after the lease's period takes a new one. The key's TTL is never shortened by the writes that keep it.
TEST_F(CommandCountTest, BucketsSetTheirTtlOncePerLease) {
  // 1000 an hour, 500 taken: 30 min to full (or empty). A lease of 7 periods of 2^28 us (268 s);
  // kT0 is 141.5 s into one, so the next 20 ms are in it, and 130 s later the next period has begun.
  auto strategies = all_strategies(rl(), "lease", 1000, std::chrono::hours(1));
  for (const auto& s : strategies) {
    if (s.name != "token_bucket" && s.name != "leaky_meter" && s.name != "leaky_shaper") continue;
    SCOPED_TRACE(s.name);
    at(std::chrono::seconds(0));
    ASSERT_RESET();
    ASSERT_TRUE(s.consume("u", 500).allowed);
    EXPECT_EQ(commands_since_reset()["psetex"], 1);
    const std::int64_t first_ttl = server().integer({"PTTL", s.key_for("u")});
    ASSERT_RESET();
    for (int i = 1; i <= 20; ++i) {  // 72 s more to full: still within the lease
      at(std::chrono::milliseconds(i));
      ASSERT_TRUE(s.consume("u", 1).allowed);
    }
    const auto kept = commands_since_reset();
    EXPECT_EQ(kept.count("psetex") ? kept.at("psetex") : 0, 0);
    EXPECT_EQ(kept.count("setrange") ? kept.at("setrange") : 0, 20);
    EXPECT_EQ(kept.count("set") ? kept.at("set") : 0, 0);
    const std::int64_t kept_ttl = server().integer({"PTTL", s.key_for("u")});
    EXPECT_LE(kept_ttl, first_ttl);
    EXPECT_GT(kept_ttl, 0);
    ASSERT_RESET();
    at(std::chrono::seconds(130));
    ASSERT_TRUE(s.consume("u", 1).allowed);
    EXPECT_EQ(commands_since_reset()["psetex"], 1);
  }
}

// Within its lease a bucket's write changes the state's first 20 bytes alone (at, whole, frac:
// helpers.lua, BUCKET_HEAD, in_place), laid over the key with SETRANGE: the unit and the lease the
// first write packed stay, and the key reads back as the whole state a full write would have made.
// So it is for one request, for a batch of distinct subjects, and for a batch in which a subject
// comes twice (whose second request reads what the first wrote, so the first writes the whole).
TEST_F(CommandCountTest, AWriteWithinTheLeaseLaysTheNewHeadOverTheState) {
  using namespace std::chrono_literals;
  // 7 bytes little-endian, as struct.pack('<I7') writes them.
  const auto le7 = [](std::int64_t v) {
    std::string out;
    for (int i = 0; i < 7; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return out;
  };
  auto strategies = all_strategies(rl(), "head", 1000, std::chrono::hours(1));
  for (const auto& s : strategies) {
    if (s.name != "token_bucket" && s.name != "leaky_meter" && s.name != "leaky_shaper") continue;
    SCOPED_TRACE(s.name);
    at(0s);
    std::map<std::string, std::string> first;  // each subject's state after its first write
    for (const std::string subject : {"u", "v"}) {
      ASSERT_TRUE(s.consume(subject, 500).allowed);
      first[subject] = server().command({"GET", s.key_for(subject)}).str;
      ASSERT_EQ(first[subject].size(), 28u);
    }
    const auto held = [&](const std::string& subject, Micros when) {
      const std::string v = server().command({"GET", s.key_for(subject)}).str;
      ASSERT_EQ(v.size(), 28u);
      EXPECT_EQ(v.substr(0, 7), le7((kT0 + when).count())) << "at";
      EXPECT_EQ(v.substr(20), first[subject].substr(20)) << "unit and lease";
    };
    ASSERT_RESET();
    at(5ms);
    ASSERT_TRUE(s.consume("u", 1).allowed);
    held("u", 5ms);
    at(6ms);
    for (const auto& d : s.consume_many({{"u", 1}, {"v", 1}})) EXPECT_TRUE(d.allowed) << d;
    held("u", 6ms);
    held("v", 6ms);
    at(7ms);
    for (const auto& d : s.consume_many({{"v", 1}, {"v", 2}})) EXPECT_TRUE(d.allowed) << d;
    held("v", 7ms);
    const auto kept = commands_since_reset();
    EXPECT_EQ(kept.count("setrange") ? kept.at("setrange") : 0, 5);
    EXPECT_EQ(kept.size(), 3u) << "get, mget, setrange";  // no SET, PSETEX or DEL
    // What was taken: 500 + 1 + 1 of u's, 500 + 1 + 3 of v's (a millisecond refills or leaks
    // nothing of 1000 an hour).
    if (s.name != "leaky_shaper") {
      EXPECT_EQ(s.peek("u", 1).remaining, 1000 - 502);
      EXPECT_EQ(s.peek("v", 1).remaining, 1000 - 504);
    }
  }
}

// A sliding log's key gets its TTL (the newest entry's time plus the window, plus the margin) from
// the first admission of each half-second slot (sliding_log.lua, RENEW_SLOT), not from each one: the
// TTL's one-second margin covers the later admissions of the slot, and a refund sets it again.
TEST_F(CommandCountTest, ASlidingLogSetsItsTtlOncePerHalfSecond) {
  const auto sl = rl().sliding_log("renew", redlimit::Limit(100, std::chrono::seconds(10)));
  at(std::chrono::seconds(0));  // kT0 starts a slot
  ASSERT_RESET();
  ASSERT_TRUE(sl.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset()["pexpire"], 1) << "a new key";
  ASSERT_RESET();
  for (const auto t : {100, 250, 499}) {
    at(std::chrono::milliseconds(t));
    ASSERT_TRUE(sl.consume("u", 1).allowed);
  }
  EXPECT_EQ(commands_since_reset().count("pexpire"), 0u);
  // The entry of 0.499 s counts until 10.499 s: the key, given 11.001 s at 0 s, outlives it.
  EXPECT_GT(server().integer({"PTTL", sl.key_for("u")}), 10'499 + 100);
  ASSERT_RESET();
  at(std::chrono::milliseconds(500));
  ASSERT_TRUE(sl.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset()["pexpire"], 1) << "the next slot";
  ASSERT_RESET();
  ASSERT_TRUE(sl.refund("u", 1).allowed);
  EXPECT_EQ(commands_since_reset()["pexpire"], 1) << "a refund";
}

// A policy sets its key's TTL again only when the time its hash turns all stale moves: the latest
// end of a limit's newest bucket (parts/policy_writes.lua, conclude). A second-long limit's next bucket under an
// hour-long limit's moves nothing; the hour-long limit's next bucket moves it a minute on.
TEST_F(CommandCountTest, APolicySetsItsTtlOnlyWhenItsHashLivesLonger) {
  using Counts = std::map<std::string, std::int64_t>;
  const auto pol = rl().policy("ttl", redlimit::parse_limits("10/s; 100/h@1m"));
  at(std::chrono::seconds(0));
  ASSERT_RESET();
  ASSERT_TRUE(pol.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset(), (Counts{{"hgetall", 1}, {"hset", 1}, {"pexpire", 1}}));
  EXPECT_GE(server().integer({"PTTL", pol.key_for("u")}), 3'660'000);  // the hour's bucket 0 weighs for 61 min
  ASSERT_RESET();
  at(std::chrono::seconds(1));  // the second-long limit's next bucket
  ASSERT_TRUE(pol.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset(), (Counts{{"hgetall", 1}, {"hset", 1}}));
  ASSERT_RESET();
  at(std::chrono::seconds(60));  // the hour-long limit's next bucket; the second-long one's two are stale
  ASSERT_TRUE(pol.consume("u", 1).allowed);
  EXPECT_EQ(commands_since_reset(), (Counts{{"hgetall", 1}, {"hset", 1}, {"hdel", 1}, {"pexpire", 1}}));
  EXPECT_GE(server().integer({"PTTL", pol.key_for("u")}), 3'660'000);  // bucket 1 weighs until 62 min
}

}  // namespace
}  // namespace redlimit_test
