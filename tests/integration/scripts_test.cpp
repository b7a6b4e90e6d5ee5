// Script caching on the EVALSHA path (Options::redis_functions = false, or a server without
// Functions): after SCRIPT FLUSH (as after a restart or failover) the next decision reloads the
// script and is counted exactly once; one SCRIPT LOAD serves every call of a round trip that met
// NOSCRIPT. The Functions path: functions_test.cpp.
#include "redlimit/detail/scripts.hpp"

#include <cstdio>

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class ScriptsTest : public StrictRedisTest {
 protected:
  void SetUp() override {
    StrictRedisTest::SetUp();
    limiter.emplace(redlimit::RateLimiter::connect(server().url(), options()));
  }
  redlimit::Options options() const {
    redlimit::Options o = StrictRedisTest::options();
    o.redis_functions = false;
    return o;
  }
};

TEST_F(ScriptsTest, AfterScriptFlushTheNextConsumeCountsExactlyOnce) {
  at(0s);
  for (const auto& s : all_strategies(rl(), "noscript", 5, 1h)) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.consume("u", 1).remaining, 4);
    ASSERT_EQ(server().command({"SCRIPT", "FLUSH"}).str, "OK");
    const Decision d = s.consume("u", 1);
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 3) << d;
    EXPECT_EQ(s.peek("u", 1).remaining, 3);
    // The script is cached again: the next call runs through EVALSHA alone.
    const std::int64_t evals = command_calls("eval");
    EXPECT_EQ(s.consume("u", 1).remaining, 2);
    EXPECT_EQ(command_calls("eval"), evals);
  }
}

// A round trip of several script calls (a batch past 256 requests goes as calls of at most 256,
// pipelined) that all meet NOSCRIPT sends the script's body once: one SCRIPT LOAD with the three
// calls again behind it, and no EVAL. Each request counts once.
TEST_F(ScriptsTest, AfterScriptFlushOneLoadServesEveryCallOfARoundTrip) {
  at(0s);
  const auto fw = rl().fixed_window("noscript-batch", Limit(1000, 1h));
  std::vector<std::string> names;  // the requests' subjects are views of these
  for (int i = 0; i < 600; ++i) names.push_back("s" + std::to_string(i));
  std::vector<redlimit::Request> requests;
  for (const auto& n : names) requests.push_back({n, 1});
  ASSERT_EQ(fw.consume_many(requests).size(), requests.size());  // the script is cached
  ASSERT_EQ(server().command({"SCRIPT", "FLUSH"}).str, "OK");
  ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).str, "OK");
  const std::vector<Decision> got = fw.consume_many(requests);
  const std::string stats = server().command({"INFO", "stats"}).str;
  const auto in = stats.find("total_net_input_bytes:");
  ASSERT_NE(in, std::string::npos);
  std::printf("[ figures ] 600 requests in 3 calls after SCRIPT FLUSH: %lld bytes in (the script: %zu bytes)\n",
              std::stoll(stats.substr(in + 22)), redlimit::detail::scripts::fixed_window().source.size());
  ASSERT_EQ(got.size(), requests.size());
  for (const Decision& d : got) EXPECT_EQ(d.remaining, 998) << d;
  EXPECT_EQ(command_calls("script|load"), 1);
  EXPECT_EQ(command_calls("evalsha"), 3 + 3);  // each call twice: NOSCRIPT, then behind the LOAD
  EXPECT_EQ(command_calls("eval"), 0);
}

TEST_F(ScriptsTest, AfterScriptFlushAPeekStillRecordsNothing) {
  at(0s);
  for (const auto& s : all_strategies(rl(), "noscript-peek", 5, 1h)) {
    SCOPED_TRACE(s.name);
    ASSERT_EQ(server().command({"SCRIPT", "FLUSH"}).str, "OK");
    const Decision d = s.peek("u", 2);
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 5) << d;
    EXPECT_EQ(dbsize(), 0);
  }
}

TEST_F(ScriptsTest, SlidingLogHoldsOneEntryPerRequestAcrossAFlush) {
  at(0s);
  auto sl = rl().sliding_log("noscript-log", Limit(10, 1h));
  sl.consume("u", 2);
  ASSERT_EQ(server().command({"SCRIPT", "FLUSH"}).str, "OK");
  sl.consume("u", 3);
  EXPECT_EQ(server().integer({"ZCARD", sl.key_for("u")}), 2);  // two requests, 5 units
  EXPECT_EQ(sl.peek("u").remaining, 5);
  auto fw = rl().fixed_window("noscript-fw", Limit(10, 1h));
  fw.consume("u", 2);
  ASSERT_EQ(server().command({"SCRIPT", "FLUSH"}).str, "OK");
  fw.consume("u", 3);
  EXPECT_EQ(window_state(server().command({"HGETALL", fw.key_for("u")})).quantity, 5);
}

TEST_F(ScriptsTest, AFreshServerLoadsScriptsOnFirstUse) {
  RedisServer fresh;
  auto limiter = redlimit::RateLimiter::connect(fresh.url(), options());
  at(0s);
  for (const auto& s : all_strategies(limiter, "fresh", 2, 1h)) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.consume("u", 1).remaining, 1);
    EXPECT_EQ(s.consume("u", 1).remaining, 0);
    EXPECT_FALSE(s.consume("u", 1).allowed);
  }
}

}  // namespace
}  // namespace redlimit_test
