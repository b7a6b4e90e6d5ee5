// Redis Functions (issue 13): on Redis >= 7.0 the scripts run as one library of functions, loaded
// once per server, named after a hash of its code; FUNCTION FLUSH is survived with one reload, an
// ACL user denied Functions falls back to EVALSHA by itself, Options::redis_functions = false keeps
// EVALSHA, and a library of another redlimit version is left alone. The restart and replica
// promotion cases are in tests/faults/functions_persist_test.cpp.
#include <algorithm>
#include <sstream>
#include <string>

#include "integration/async_fixture.hpp"
#include "redlimit/detail/scripts.hpp"
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::Decision;
using redlimit::Reply;
using redlimit::ScriptPath;

class FunctionsTest : public RedisTest {
 protected:
  void SetUp() override {
    RedisTest::SetUp();
    ASSERT_EQ(server().command({"FUNCTION", "FLUSH"}).type, Reply::Type::status);
    ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).type, Reply::Type::status);
  }
  void TearDown() override { server().command({"ACL", "DELUSER", "nofunctions"}); }

  // The names of the libraries on the server (FUNCTION LIST).
  std::vector<std::string> libraries() {
    const Reply list = server().command({"FUNCTION", "LIST"});
    std::vector<std::string> names;
    for (const Reply& lib : list.elements) {
      for (std::size_t i = 0; i + 1 < lib.elements.size(); i += 2) {
        if (lib.elements[i].str == "library_name") names.push_back(lib.elements[i + 1].str);
      }
    }
    return names;
  }

  // Five consumes of 1 under a limit of 3: 3 admitted, then 2 rejected, whichever path runs them.
  static void expect_exact(const redlimit::RateLimiter& l, const std::string& resource) {
    const auto fw = l.fixed_window(resource, redlimit::Limit::per_minute(3));
    for (int i = 0; i < 5; ++i) {
      const redlimit::Decision d = fw.consume("s");
      EXPECT_EQ(d.allowed, i < 3) << i;
      EXPECT_EQ(d.remaining, i < 3 ? 2 - i : 0) << i;
    }
  }
};

TEST_F(FunctionsTest, EveryStrategyRunsAsAFunctionOfOneLibraryLoadedOnce) {
  EXPECT_EQ(rl().health().scripts, ScriptPath::probe);
  for (auto& s : all_strategies(rl(), "fn", 4, std::chrono::minutes(1))) {
    for (int i = 0; i < 6; ++i) EXPECT_EQ(s.consume("a", 1).allowed, i < 4) << s.name << " " << i;
  }
  EXPECT_EQ(rl().health().scripts, ScriptPath::functions);
  EXPECT_EQ(libraries(), std::vector<std::string>{std::string(redlimit::detail::scripts::library_name())});
  // The first FCALL found a fresh server ("Function not found"): one LOAD, and it was sent again.
  EXPECT_EQ(command_calls("fcall"), 6 * 6 + 1);
  EXPECT_EQ(command_calls("function|load"), 1);
  EXPECT_EQ(command_calls("evalsha") + command_calls("eval"), 0);
}

// A server that has the library (another process loaded it, an earlier run, a promoted replica)
// is only called: a new limiter and a new async connection send no FUNCTION LOAD and no FCALL
// twice; each settles on functions with its first call.
TEST_F(FunctionsTest, ANewConnectionFindsTheLibraryThereAndOnlyCallsIt) {
  rl().fixed_window("warm", redlimit::Limit::per_minute(3)).peek("s");  // loads it
  ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).type, Reply::Type::status);
  const auto other = redlimit::RateLimiter::connect(server().url(), options());
  EXPECT_EQ(other.health().scripts, ScriptPath::probe);
  expect_exact(other, "found.sync");
  EXPECT_EQ(other.health().scripts, ScriptPath::functions);
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    auto l = redlimit::RateLimiter::connect(server().url(), options());
    l.attach_async(redis);
    const auto fw = l.fixed_window("found.async", redlimit::Limit::per_minute(3));
    loop.start();
    EXPECT_EQ(l.health().async_scripts, ScriptPath::probe);
    auto f = fw.consume_future("s");
    EXPECT_EQ(get_within(f).remaining, 2);
    EXPECT_EQ(l.health().async_scripts, ScriptPath::functions);
  }
  EXPECT_EQ(command_calls("function|load"), 0);
  EXPECT_EQ(command_calls("fcall"), 5 + 1);
}

// A function keeps the last call's parsed parameters and reuses them while the strings are the same
// (lua/helpers.lua, params): calls of limiters with other limits, windows, rates and policies,
// interleaved one by one on one server, are each decided under their own.
TEST_F(FunctionsTest, InterleavedLimitersAreEachDecidedUnderTheirOwnParameters) {
  auto small = all_strategies(rl(), "p.small", 4, std::chrono::minutes(1));
  auto big = all_strategies(rl(), "p.big", 7, std::chrono::hours(1));
  const auto two = rl().policy("p.two", redlimit::parse_limits("2/s; 5/min"));
  const auto three = rl().policy("p.three", redlimit::parse_limits("3/s; 4/min; 9/h"));
  for (int i = 0; i < 9; ++i) {
    for (std::size_t k = 0; k < small.size(); ++k) {
      const Decision s = small[k].consume("a", 1);
      const Decision b = big[k].consume("a", 1);
      EXPECT_EQ(s.allowed, i < 4) << small[k].name << " " << i;
      EXPECT_EQ(s.limit, 4) << small[k].name;
      EXPECT_EQ(b.allowed, i < 7) << big[k].name << " " << i;
      EXPECT_EQ(b.limit, 7) << big[k].name;
    }
    const Decision p2 = two.consume("a", 1);
    const Decision p3 = three.consume("a", 1);
    EXPECT_EQ(p2.allowed, i < 2) << i;  // the clock is held: 2 a second
    ASSERT_EQ(p2.limits.size(), 2u);
    EXPECT_EQ(p3.allowed, i < 3) << i;
    ASSERT_EQ(p3.limits.size(), 3u);
    EXPECT_EQ(p3.limits[2].remaining, i < 3 ? 8 - i : 6) << i;
  }
  EXPECT_EQ(rl().health().scripts, ScriptPath::functions);
}

// The library keeps each head it has parsed (mode, cost, parameters: lua/helpers.lua, read_head),
// up to HEADS_MAX (64), and then starts again: 1,100 costs, each consumed and then peeked at,
// are each read as sent, before the table starts again and after.
TEST_F(FunctionsTest, EveryHeadIsReadAsSentPastTheTableOfParsedHeads) {
  const auto fw = rl().fixed_window("heads", redlimit::Limit::per_hour(2000));
  for (std::int64_t cost = 1; cost <= 1100; ++cost) {
    const std::string subject = "s" + std::to_string(cost);
    const Decision d = fw.consume(subject, cost);
    ASSERT_TRUE(d.allowed) << cost;
    ASSERT_EQ(d.remaining, 2000 - cost) << cost;
    ASSERT_EQ(fw.peek(subject, 2000 - cost + 1).allowed, false) << cost;
    ASSERT_EQ(fw.peek(subject, 1).remaining, 2000 - cost) << cost;
  }
  EXPECT_EQ(rl().health().scripts, ScriptPath::functions);
}

TEST_F(FunctionsTest, AFlushedLibraryIsLoadedAgainOnceAndCountingGoesOn) {
  const auto fw = rl().fixed_window("flush", redlimit::Limit::per_minute(10));
  const auto batch = std::vector<redlimit::Request>{{"a", 1}, {"b", 1}, {"a", 1}};
  EXPECT_TRUE(fw.consume("a").allowed);
  ASSERT_EQ(server().command({"FUNCTION", "FLUSH"}).type, Reply::Type::status);
  const auto decisions = fw.consume_many(batch);  // a batch meets "Function not found" at once
  ASSERT_EQ(decisions.size(), 3u);
  EXPECT_EQ(decisions[0].remaining, 8);
  EXPECT_EQ(decisions[1].remaining, 9);
  EXPECT_EQ(decisions[2].remaining, 7);
  EXPECT_EQ(fw.consume("a").remaining, 6);
  EXPECT_EQ(command_calls("function|load"), 2);
  EXPECT_EQ(command_calls("evalsha") + command_calls("eval"), 0);
  EXPECT_EQ(rl().health().scripts, ScriptPath::functions);
}

TEST_F(FunctionsTest, AfterFunctionFlushEveryStrategyCountsExactlyOnce) {
  at(std::chrono::seconds(0));
  for (const auto& s : all_strategies(rl(), "fflush", 5, std::chrono::hours(1))) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.consume("u", 1).remaining, 4);
    ASSERT_EQ(server().command({"FUNCTION", "FLUSH"}).str, "OK");
    const redlimit::Decision d = s.consume("u", 1);
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 3) << d;
    EXPECT_EQ(s.peek("u", 1).remaining, 3);
  }
  EXPECT_EQ(command_calls("function|load"), 1 + 6);  // the probe's, then one per flush
  EXPECT_EQ(command_calls("evalsha") + command_calls("eval"), 0);
}

TEST_F(FunctionsTest, AnAclUserDeniedFunctionsFallsBackToEvalshaByItself) {
  ASSERT_EQ(server().command({"ACL", "SETUSER", "nofunctions", "on", ">pw", "~*", "+@all", "-function", "-fcall"}).type,
            Reply::Type::status);
  const std::string url = "redis://nofunctions:pw@127.0.0.1:" + std::to_string(server().port());
  const auto l = redlimit::RateLimiter::connect(url, options());
  expect_exact(l, "acl");
  EXPECT_EQ(l.health().scripts, ScriptPath::evalsha);
  // The ACL refuses the one probing FCALL before it runs (rejected_calls); EVALSHA for good after.
  const std::string stats = server().command({"INFO", "commandstats"}).str;
  EXPECT_NE(stats.find("cmdstat_fcall:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,"), std::string::npos)
      << stats;
  EXPECT_GE(command_calls("evalsha"), 5);
}

TEST_F(FunctionsTest, AUserWhoMayCallButNotLoadUsesALibraryAnOperatorLoaded) {
  rl().fixed_window("warm", redlimit::Limit::per_minute(3)).peek("s");  // the default user loads it
  ASSERT_EQ(server().command({"ACL", "SETUSER", "nofunctions", "on", ">pw", "~*", "+@all", "-function"}).type,
            Reply::Type::status);
  ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).type, Reply::Type::status);
  const std::string url = "redis://nofunctions:pw@127.0.0.1:" + std::to_string(server().port());
  const auto l = redlimit::RateLimiter::connect(url, options());
  expect_exact(l, "operator");
  EXPECT_EQ(l.health().scripts, ScriptPath::functions);
  EXPECT_EQ(command_calls("fcall"), 5);
  EXPECT_EQ(command_calls("evalsha") + command_calls("eval"), 0);
}

TEST_F(FunctionsTest, AUserWhoMayCallButNotLoadAnAbsentLibraryFallsBackToEvalsha) {
  ASSERT_EQ(server().command({"ACL", "SETUSER", "nofunctions", "on", ">pw", "~*", "+@all", "-function"}).type,
            Reply::Type::status);
  const std::string url = "redis://nofunctions:pw@127.0.0.1:" + std::to_string(server().port());
  const auto l = redlimit::RateLimiter::connect(url, options());
  expect_exact(l, "noload");
  EXPECT_EQ(l.health().scripts, ScriptPath::evalsha);
  EXPECT_TRUE(libraries().empty());
  // The first call: FCALL (not found), the refused LOAD with the FCALL again, then EVALSHA.
  EXPECT_EQ(command_calls("fcall"), 2);
  EXPECT_EQ(command_calls("evalsha"), 5);
}

TEST_F(FunctionsTest, TheOptionOffKeepsEvalsha) {
  redlimit::Options o = options();
  o.redis_functions = false;
  const auto l = redlimit::RateLimiter::connect(server().url(), o);
  expect_exact(l, "off");
  EXPECT_EQ(l.health().scripts, ScriptPath::evalsha);
  EXPECT_EQ(command_calls("fcall") + command_calls("function|load"), 0);
  EXPECT_TRUE(libraries().empty());
}

TEST_F(FunctionsTest, AnotherVersionsLibraryIsLeftInPlace) {
  // What an older or newer redlimit would have loaded: its own name, its own functions.
  const std::string other = "#!lua name=redlimit_0123456789abcdef\n"
                            "redis.register_function('redlimit_0123456789abcdef_fixed_window', "
                            "function(keys, args) return 'other' end)";
  ASSERT_EQ(server().command({"FUNCTION", "LOAD", other}).type, Reply::Type::string);
  expect_exact(rl(), "coexist");
  EXPECT_EQ(libraries().size(), 2u);
  const Reply r = server().command({"FCALL", "redlimit_0123456789abcdef_fixed_window", "0"});
  EXPECT_EQ(r.str, "other");
}

TEST_F(FunctionsTest, TheLibraryNameCarriesTheHashOfItsCode) {
  const std::string name(redlimit::detail::scripts::library_name());
  ASSERT_EQ(name.size(), std::string("redlimit_").size() + 16);
  EXPECT_EQ(name.rfind("redlimit_", 0), 0u);
  EXPECT_NE(redlimit::detail::scripts::library().find("#!lua name=" + name + "\n"), std::string::npos);
  EXPECT_EQ(redlimit::detail::scripts::fixed_window().function, name + "_fixed_window");
}

// Every bucket interval names a new bucket, whose name the policy script keeps parsed across calls
// (lua/policy.lua, parse_field). While it kept up to 16,384 names whatever was in use, one limiter
// of one-second buckets grew the Functions engine's Lua heap by 2.5 MB in four and a half hours,
// and Redis's collector, stepped over that heap on every script call, made every decision of every
// strategy cost Redis 1.6-2.6x (docs/algorithms.md, "The Lua heap"). The cache now keeps the live
// buckets of the policies in use and 128 names more: 10,000 seconds of such a limiter grew the heap
// by 1.8 MB before, a few KB now. The figure Redis reports counts garbage not yet collected too: hence
// the margin.
TEST_F(FunctionsTest, BucketNamesOfPassedTimeDoNotGrowTheLuaHeap) {
  const auto heap = [&] {
    std::istringstream in(server().command({"INFO", "memory"}).str);
    const std::string field = "used_memory_vm_functions:";
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(field, 0) == 0) return std::stoll(line.substr(field.size()));
    }
    ADD_FAILURE() << "no " << field << " in INFO memory";
    return 0LL;
  };
  const auto sw =
      rl().sliding_window("aging", redlimit::Limit(1'000'000, std::chrono::seconds(2)), std::chrono::seconds(1));
  ASSERT_TRUE(sw.consume("u").allowed);
  const long long before = heap();
  for (int i = 1; i <= 10'000; ++i) {
    at(std::chrono::seconds(i));
    // This bucket and the two before it (the oldest weighs whole at r = 0): one unit each
    ASSERT_EQ(sw.consume("u").remaining, 1'000'000 - std::min(i + 1, 3)) << i;
  }
  EXPECT_LT(heap() - before, 512 * 1024) << "from " << before << " B";
}

}  // namespace
}  // namespace redlimit_test
