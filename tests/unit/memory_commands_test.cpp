// The commands the in-memory backend answers, its batches (one locked script run, as on Redis), and
// the sorted set kept in Redis's order (fixture: memory_fixture.hpp).
#include "redlimit/detail/decode.hpp"
#include "unit/memory_fixture.hpp"

namespace {

// A call's decisions as the client reads them (detail::decode_decisions: lua/epilogue.lua's forms).
// A batch's decisions, of a strategy whose limit is `limit`: an admission's integer packs it
// (lua/epilogue.lua, reply).
std::vector<redlimit::Decision> decisions(const Reply& r, std::size_t n, std::int64_t limit) {
  return redlimit::detail::decode_decisions(r, n, {limit});
}
// One request's decision, of a strategy whose limit is 3 (every call below): an admission may come
// packed by it (lua/epilogue.lua, reply).
redlimit::Decision decoded(const Reply& r) { return redlimit::detail::decode_decision(r, {3}); }

// --- the commands it answers ------------------------------------------------------------------

// One request's call: the state's key, which holds its block (lua/prologue.lua).
Argv eval_argv(const std::string& verb, const std::string& script, const Argv& rest) {
  Argv argv{verb, script, "1", "redlimit:{r|u}:fw"};
  argv.insert(argv.end(), rest.begin(), rest.end());
  return argv;
}

TEST_F(MemoryTest, AnswersOnlyWhatTheStrategiesSend) {
  Reply r = store->command({"GET", "k"});
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(r.str.rfind("ERR unknown command", 0), 0u) << r.str;
  r = store->command({"FLUSHALL"});
  EXPECT_TRUE(r.is_error());
  r = store->command({});
  EXPECT_TRUE(r.is_error());
  r = store->command({"PING"});
  EXPECT_EQ(r.type, Reply::Type::status);
  EXPECT_EQ(r.str, "PONG");
  EXPECT_TRUE(store->thread_safe());
  r = store->command({"SET", "k", "v"});
  EXPECT_EQ(r.type, Reply::Type::status);
  EXPECT_EQ(store->size(), 1u);
}

// --- batches: one script run ---------------------------------------------------------------------

// A clock that moves a second every time it is read.
class TickingClock final : public redlimit::Clock {
 public:
  redlimit::Micros now() const override { return kT0 + Micros{1'000'000 * ticks_++}; }
  void sleep_for(redlimit::Micros) override {}

 private:
  mutable std::int64_t ticks_ = 0;
};

Argv batch_argv(const redlimit::detail::Script& script, const std::string& now,
                const std::vector<std::string>& subjects, const Argv& params, const std::vector<std::string>& costs) {
  Argv argv{"EVALSHA", script.sha1, std::to_string(subjects.size())};  // each request's state
  for (const auto& s : subjects) {
    argv.push_back("redlimit:{r|" + s + "}:st");
  }
  argv.push_back(now);
  argv.push_back("1 " + costs.front() + " " + scripts::params_arg(params));  // the head: mode, cost, parameters
  argv.insert(argv.end(), costs.begin() + 1, costs.end());
  return argv;
}

std::vector<std::int64_t> allowed_of(const Reply& r, std::size_t n, std::int64_t limit) {
  std::vector<std::int64_t> out;
  for (const auto& d : decisions(r, n, limit)) out.push_back(d.allowed ? 1 : 0);
  return out;
}

TEST(MemoryBatch, ReadsRedisTimeOnceForTheWholeBatch) {
  // 2 per 1 s window, three requests: at one instant the third is rejected. Reading the clock per
  // request (a second later each time) would put each request in a window of its own.
  MemoryConnection store(std::make_shared<TickingClock>());
  const Reply r =
      store.command(batch_argv(scripts::fixed_window(), "redis", {"u", "u", "u"}, {"2", "1000000"}, {"1", "1", "1"}));
  ASSERT_EQ(r.type, Reply::Type::array) << r.str;
  EXPECT_EQ(allowed_of(r, 3, 2), (std::vector<std::int64_t>{1, 1, 0}));
}

TEST_F(MemoryTest, ALaterRequestSeesTheWritesOfEarlierOnes) {
  const std::string now = std::to_string(kT0.count());
  const Reply r = store->command(
      batch_argv(scripts::token_bucket(), now, {"a", "b", "a", "a", "a"}, {"3", "1", "1"}, {"2", "3", "1", "1", "1"}));
  ASSERT_EQ(r.type, Reply::Type::array) << r.str;
  EXPECT_EQ(allowed_of(r, 5, 3), (std::vector<std::int64_t>{1, 1, 1, 0, 0}));
  EXPECT_EQ(decisions(r, 5, 3)[2].remaining, 0) << "a's bucket is empty after 2 + 1";
}

TEST_F(MemoryTest, AFailedBatchWritesNoStringState) {
  // The third request's cost is not a number: the script fails in decide(), and the epilogue, which
  // writes string states only after every request, has written nothing.
  const std::string now = std::to_string(kT0.count());
  const Reply r =
      store->command(batch_argv(scripts::fixed_window(), now, {"a", "b", "c"}, {"5", "1000000"}, {"1", "2", "x"}));
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(store->size(), 0u);
}

TEST_F(MemoryTest, AKeyOfAnotherTypeInABatchIsReplacedAndFailsNoOtherRequest) {
  // lua/epilogue.lua, foreign keys: sliding_log.lua reads b's key with redis.pcall, finds a string
  // where a sorted set belongs, reads it as no state and deletes it before its ZADD; a and c are
  // decided as if it were not there.
  store->command({"SET", "redlimit:{r|b}:st", "not a sorted set"});
  const std::string now = std::to_string(kT0.count());
  const Reply r =
      store->command(batch_argv(scripts::sliding_log(), now, {"a", "b", "c"}, {"5", "1000000"}, {"1", "1", "1"}));
  ASSERT_EQ(r.type, Reply::Type::array) << r.str;
  const auto ds = decisions(r, 3, 5);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(ds[i].allowed) << "request " << i;
    EXPECT_EQ(ds[i].remaining, 4) << "request " << i;
  }
  EXPECT_EQ(store->size(), 3u) << "three logs, b's string replaced";
}

TEST_F(MemoryTest, EvalshaKnowsTheScriptsBySha1AndEvalBySource) {
  const Argv args{std::to_string((kT0 + 250ms).count()), "1 1 3 1000000"};
  Reply r = store->command(eval_argv("EVALSHA", scripts::fixed_window().sha1, args));
  ASSERT_EQ(r.type, Reply::Type::integer) << r.str;  // an admission that waits for nothing,
  EXPECT_EQ(r.integer, 750'000 * 4 + 2);             // reset_after * (limit + 1) + remaining

  r = store->command(eval_argv("EVALSHA", std::string(40, 'a'), args));
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(r.str.rfind("NOSCRIPT", 0), 0u) << r.str;

  r = store->command(eval_argv("eval", std::string(scripts::fixed_window().source), args));
  ASSERT_FALSE(r.is_error()) << r.str;
  EXPECT_EQ(decoded(r).remaining, 1);  // the same state: the second unit

  r = store->command(eval_argv("EVAL", "return 1", args));
  EXPECT_TRUE(r.is_error());

  // Malformed calls answer errors, as Redis does.
  EXPECT_TRUE(store->command({"EVALSHA", scripts::fixed_window().sha1}).is_error());
  EXPECT_TRUE(store->command({"EVALSHA", scripts::fixed_window().sha1, "x"}).is_error());
  EXPECT_TRUE(store->command({"EVALSHA", scripts::fixed_window().sha1, "3", "a", "b"}).is_error());
  EXPECT_TRUE(store->command({"EVALSHA", scripts::block().sha1, "1", "a", "1", "3 1 1000000 4"}).is_error())
      << "block.lua takes two keys: the state and the marker";
  r = store->command({"EVALSHA", scripts::fixed_window().sha1, "1", "a", "1", "1 1 x 1"});
  EXPECT_TRUE(r.is_error()) << "a limit that is not a number is a Lua error";

  // DEL counts the keys that existed; so does UNLINK (what reset() sends), which is DEL here.
  r = store->command({"DEL", "redlimit:{r|u}:fw", "redlimit:{r|u}:blk", "nope"});
  ASSERT_EQ(r.type, Reply::Type::integer);
  EXPECT_EQ(r.integer, 1);
  EXPECT_EQ(store->size(), 0u);
  ASSERT_FALSE(store->command(eval_argv("EVALSHA", scripts::fixed_window().sha1, args)).is_error());
  r = store->command({"unlink", "nope", "redlimit:{r|u}:fw"});
  ASSERT_EQ(r.type, Reply::Type::integer);
  EXPECT_EQ(r.integer, 1);
  EXPECT_EQ(store->size(), 0u);
}

// 0.3's fixed window, a 20-byte string ('<I7I6I7': start, used, window) with a block after it as
// '<I7' and "BK", read as the hash it becomes (lua/fixed_window.lua, legacy): its count and its block
// hold, a peek leaves the string, and the first write replaces it with a TTL to the window's end.
TEST_F(MemoryTest, AFixedWindowStateOf03IsReadAsTheHashItBecomes) {
  const auto packed = [](std::int64_t x, int bytes) {
    std::string v;
    for (int i = 0; i < bytes; ++i) v += static_cast<char>((x >> (8 * i)) & 0xff);
    return v;
  };
  const std::string key = "redlimit:{r|u}:fw";
  const std::string state = packed(kT0.count(), 7) + packed(2, 6) + packed(1'000'000, 7);
  ASSERT_EQ(store->command({"SET", key, state}).type, Reply::Type::status);
  const std::optional<Micros> set = store->expires_at(key);
  ASSERT_TRUE(set.has_value());
  const Argv peek{std::to_string(kT0.count()), "0 1 3 1000000"};
  EXPECT_EQ(decoded(store->command(eval_argv("EVALSHA", scripts::fixed_window().sha1, peek))).remaining, 1);
  EXPECT_EQ(store->expires_at(key), set) << "a peek leaves the string as it was";
  const Argv consume{std::to_string(kT0.count()), "1 1 3 1000000"};
  const redlimit::Decision d = decoded(store->command(eval_argv("EVALSHA", scripts::fixed_window().sha1, consume)));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(store->expires_at(key), kT0 + 1s + kTtlSlack) << "the hash's TTL: the window's end";
  EXPECT_FALSE(decoded(store->command(eval_argv("EVALSHA", scripts::fixed_window().sha1, consume))).allowed);
  // A blocked one: the block holds until its end.
  const std::string blocked = state + packed((kT0 + 5s).count(), 7) + "BK";
  ASSERT_EQ(store->command({"SET", key, blocked}).type, Reply::Type::status);
  const redlimit::Decision b = decoded(store->command(eval_argv("EVALSHA", scripts::fixed_window().sha1, consume)));
  EXPECT_FALSE(b.allowed);
  EXPECT_EQ(b.retry_after, 5s);
  EXPECT_EQ(store->expires_at(key), kT0 + 5s + kTtlSlack) << "the key outlives the block";
}

// The twin of BlockTest.AStateThatIsNoLeasesKeepsItsKeysTtlThroughABlock: 20 bytes under a bucket's
// key keep the key's TTL through a block (block.lua, the kind "1": PTTL), whatever they would say as
// a fixed window's state.
TEST_F(MemoryTest, AStateThatIsNoLeasesKeepsItsKeysTtlThroughABlock) {
  const std::string key = "redlimit:{r|u}:tb";
  ASSERT_EQ(store->command({"SET", key, std::string(20, '\0'), "PX", "5000"}).type, Reply::Type::status);
  const Argv block{std::to_string(kT0.count()), "3 1 1000000 1"};
  const Reply r = store->command({"EVALSHA", scripts::block().sha1, "2", key, "redlimit:{r|u}:blk", block[0], block[1]});
  ASSERT_EQ(r.type, Reply::Type::array) << r.str;
  const std::optional<Micros> expires = store->expires_at(key);
  ASSERT_TRUE(expires.has_value());
  EXPECT_GT(*expires, kT0 + 4s) << "the key's own TTL, longer than the block";
  // SET's one option is PX, a positive number of ms.
  EXPECT_TRUE(store->command({"SET", key, "v", "PX", "0"}).is_error());
  EXPECT_TRUE(store->command({"SET", key, "v", "EX", "5"}).is_error());
  EXPECT_TRUE(store->command({"SET", key, "v", "PX"}).is_error());
}

TEST_F(MemoryTest, AKeyHoldingAnotherKindOfStateReadsAsRedisReadsIt) {
  // Strategies never share keys (each key names its kind); a hand-made call that crosses them gets
  // what Redis gives: a token bucket reads a fixed window's hash as no state at all (redis.pcall),
  // a full bucket.
  const Argv fw_args{std::to_string(kT0.count()), "1 1 3 1000000"};
  ASSERT_FALSE(store->command(eval_argv("EVALSHA", scripts::fixed_window().sha1, fw_args)).is_error());
  const Argv tb_args{std::to_string(kT0.count()), "1 1 3 1 1"};
  Reply r = store->command(eval_argv("EVALSHA", scripts::token_bucket().sha1, tb_args));
  ASSERT_FALSE(r.is_error()) << r.str;
  EXPECT_EQ(decoded(r).remaining, 2) << "a full bucket of 3, 1 taken";
  // A string where a hash belongs, or a hash where a sorted set does, reads as no state (redis.pcall)
  // and is replaced by the write (lua/epilogue.lua, foreign keys); a peek leaves it.
  const Argv policy_args{std::to_string(kT0.count()), "1 1 1 1s 3 1000000 1000000"};
  r = store->command(eval_argv("EVALSHA", scripts::policy().sha1, policy_args));
  ASSERT_FALSE(r.is_error()) << r.str;
  EXPECT_EQ(decoded(r).remaining, 2) << "an empty window of 3, 1 taken";
  const Argv log_peek{std::to_string(kT0.count()), "0 1 3 1000000"};
  r = store->command(eval_argv("EVALSHA", scripts::sliding_log().sha1, log_peek));
  ASSERT_FALSE(r.is_error()) << r.str;
  EXPECT_EQ(decoded(r).remaining, 3) << "an empty log";
  const Argv log_args{std::to_string(kT0.count()), "1 1 3 1000000"};
  r = store->command(eval_argv("EVALSHA", scripts::sliding_log().sha1, log_args));
  ASSERT_FALSE(r.is_error()) << r.str;
  EXPECT_EQ(decoded(r).remaining, 2) << "the hash replaced by a log, 1 taken";
}

// A transport that has never seen the scripts: every EVALSHA names an unknown SHA1, so each call
// goes through the whole NOSCRIPT path of run_script: EVALSHA, SCRIPT LOAD (which the memory
// backend does not answer) and EVALSHA again, then EVAL.
class ForgetfulConnection final : public redlimit::Connection {
 public:
  explicit ForgetfulConnection(std::shared_ptr<MemoryConnection> inner) : inner_(std::move(inner)) {}
  bool thread_safe() const override { return true; }
  Reply command(const std::vector<std::string>& argv) override {
    if (!argv.empty() && argv[0] == "EVALSHA") {
      Argv changed = argv;
      changed[1] = std::string(40, '0');
      ++evalsha;
      return inner_->command(changed);
    }
    if (!argv.empty() && argv[0] == "EVAL") ++eval;
    return inner_->command(argv);
  }
  int evalsha = 0;
  int eval = 0;

 private:
  std::shared_ptr<MemoryConnection> inner_;
};

TEST_F(MemoryTest, TheEvalFallbackDecidesTheSame) {
  auto forgetful = std::make_shared<ForgetfulConnection>(std::make_shared<MemoryConnection>(clock));
  const RateLimiter other(forgetful, options());
  const auto a = limiter.policy("p", redlimit::parse_limits("2/s; 3/min"));
  const auto b = other.policy("p", redlimit::parse_limits("2/s; 3/min"));
  for (int i = 0; i < 8; ++i) {
    clock->advance(300ms);
    const Decision x = a.consume("u");
    const Decision y = b.consume("u");
    EXPECT_EQ(show(x), show(y)) << i;
  }
  EXPECT_EQ(forgetful->evalsha, 16);
  EXPECT_EQ(forgetful->eval, 8);
}

// --- the sorted set keeps Redis's order --------------------------------------------------------

TEST(MemoryScripts, EntryLogCountsRanksAndTrimsAsRedisDoes) {
  redlimit::detail::memory::EntryLog log;
  log.append({4, 1, 1});
  log.append({5, 4, 3});
  log.append({5, 6, 2});
  log.append({9, 7, 1});
  EXPECT_EQ(log.count_through(4), 1u);  // ZCOUNT -inf 4
  EXPECT_EQ(log.count_through(5), 3u);
  EXPECT_EQ(log.at(-1)->cum, 7);  // ZRANGE -1 -1: the newest
  EXPECT_EQ(log.at(0)->cum, 1);
  EXPECT_EQ(log.at(4), nullptr);
  EXPECT_EQ(log.at(-5), nullptr);
  EXPECT_EQ(log.pop_newest().cum, 7);  // ZPOPMAX
  log.remove_through(4, 10);           // ZCOUNT -inf 4 (1), ZREMRANGEBYRANK 0 0
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log.at(0)->cum, 4);
  log.append({9, 7, 1});
  log.remove_through(9, 2);  // three entries through 9, two of them removed: the oldest
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log.at(0)->cum, 7);
  log.remove_through(8, 5);  // none through 8
  EXPECT_EQ(log.size(), 1u);
  log.remove_through(9, 5);
  EXPECT_TRUE(log.empty());
}

}  // namespace
