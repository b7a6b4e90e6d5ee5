// The scripts' own check of their parameters (lua/helpers.lua, param; src/memory/params.cpp): a raw
// call made past the client's checks (a hand-written FCALL, another language's port) with
// parameters the client never sends fails before it reads or writes a key, as EVAL, as FCALL and
// in the in-memory backend alike, and fails again when sent again: a Functions library keeps a
// script's parsed parameters from call to call, and must not keep those of a call that failed.
// Each script's good parameters, sent around the bad ones, write its key, so the count of keys
// can tell. Before the check, a window or precision of 0 made Redis's time math NaN and divided by
// zero in the memory backend (SIGFPE, the whole process).
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/detail/scripts.hpp"
#include "redlimit/transport/memory_connection.hpp"
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

namespace scripts = redlimit::detail::scripts;
using redlimit::Reply;

struct Case {
  const redlimit::detail::Script& script;
  std::string mode;              // the head's: "1" consume, "3" block
  std::string good;              // parameters the client sends
  std::vector<std::string> bad;  // parameters it never sends
};

std::vector<Case> cases() {
  return {
      {scripts::fixed_window(),
       "1",
       "5 1000000",
       {"5 0", "0 1000000", "5", "5 1000000 7", "5 1e6", "5 -1000000", "5 0x10", "5 315360000000001",
        "1099511627777 1000000", "5 99999999999999999999999"}},
      {scripts::sliding_log(), "1", "5 1000000", {"5 0", "x 1000000", "5 1000000 1"}},
      {scripts::token_bucket(), "1", "10 1000 1", {"10 1000 0", "10 0 1", "10 315360000000000 1", "10 1000"}},
      {scripts::leaky_bucket(), "1", "10 1000 1 shaper", {"10 1000 1 queue", "10 1000 0 meter", "10 1000 1"}},
      {scripts::policy(),
       "1",
       "2 1s 5 1000000 1000000 1m@1s 50 60000000 1000000",
       {"1 1s 5 1000000 0",                                  // a precision of 0
        "1 1s 5 1000000 300000",                             // that does not divide the window
        "1 10s 5 10000000 2000000",                          // a tag that says another precision
        "1 1s 5 2000000 1000000",                            // or another window
        "1 1h@1ms 5 3600000000 1000",                        // 3.6 million buckets
        "2 6s@1ms 5 6000000 1000 1m@10ms 9 60000000 10000",  // 6,000 each: 12,000 in all
        "2 1s 5 1000000 1000000",                            // fewer words than limits
        "2 1s 5 1000000 1000000 1000ms 9 1000000 1000000",   // two limits of one window and precision
        "0", "17 1s 5 1000000 1000000"}},
      {scripts::block(), "3", "1000000 1", {"-5 1", "x 1", "315360000000001 1", ""}},
  };
}

std::vector<std::string> keys_of(const redlimit::detail::Script& script) {
  if (scripts::keys_per_request(script) == 2) return {"raw:{a}:s", "raw:{a}:b"};
  return {"raw:{a}:s"};
}

class ParamsTest : public StrictRedisTest {
 protected:
  // The call of `c`'s script with `params` as EVAL (fcall false) or FCALL, at `now` with `keys`.
  std::vector<std::string> call(const Case& c, const std::string& params, bool fcall,
                                const std::string& now = std::to_string(kT0.count()),
                                const std::vector<std::string>* keys_sent = nullptr) {
    const auto keys = keys_sent ? *keys_sent : keys_of(c.script);
    std::vector<std::string> argv;
    if (fcall) {
      argv = {"FCALL", std::string(c.script.function)};
    } else {
      argv = {"EVAL", server().runnable(c.script.source)};
    }
    argv.push_back(std::to_string(keys.size()));
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.push_back(now);
    argv.push_back(c.mode + " 1" + (params.empty() ? "" : " " + params));
    return argv;
  }

  // Runs `argv` and says whether it failed; checks that a failed call left no key, and that a call
  // that ran wrote its key, then deletes what it wrote. `memory`: the in-memory backend's turn.
  // `foreign_error`: the error need not be redlimit's own (Lua's). `keys`: the keys the call may write,
  // when not the script's usual ones.
  bool failed(const std::vector<std::string>& argv, redlimit::MemoryConnection* memory, bool foreign_error = false,
              const std::vector<std::string>& keys = {}) {
    const Reply r = memory ? memory->command(argv) : server().command(argv);
    std::vector<std::string> del = {"DEL"};
    const auto usual = keys_of(*script_of_);
    del.insert(del.end(), usual.begin(), usual.end());
    del.insert(del.end(), keys.begin(), keys.end());
    const Reply deleted = memory ? memory->command(del) : server().command(del);
    EXPECT_EQ(deleted.type, Reply::Type::integer) << deleted.str;
    if (r.type == Reply::Type::error) {
      EXPECT_EQ(deleted.integer, 0) << "a failed call wrote a key: " << r.str;
      if (!foreign_error) EXPECT_NE(r.str.find("redlimit: "), std::string::npos) << "not the checks' error: " << r.str;
      return true;
    }
    EXPECT_GT(deleted.integer, 0) << "the call wrote nothing";
    return false;
  }

  // The ways a raw call is sent: EVAL, and FCALL on a server with Functions (Redis 7.0 and later),
  // whose library is loaded first.
  std::vector<bool> call_kinds() {
    if (server().major_version() < 7) return {false};
    EXPECT_EQ(server().command({"FUNCTION", "LOAD", "REPLACE", std::string(scripts::library())}).type,
              Reply::Type::string);
    return {false, true};
  }

  const redlimit::detail::Script* script_of_ = nullptr;
};

TEST_F(ParamsTest, ParametersTheClientNeverSendsFailBeforeAnyKeyIsTouched) {
  const std::vector<bool> kinds = call_kinds();
  redlimit::MemoryConnection memory(clock);
  for (const Case& c : cases()) {
    script_of_ = &c.script;
    for (const std::string& bad : c.bad) {
      SCOPED_TRACE(std::string(c.script.name) + " \"" + bad + "\"");
      for (const bool fcall : kinds) {
        SCOPED_TRACE(fcall ? "FCALL" : "EVAL");
        // good, bad, bad again, good: a library that kept the first bad call's parse would decide
        // the second with it, or with the good one before it.
        EXPECT_FALSE(failed(call(c, c.good, fcall), nullptr));
        EXPECT_TRUE(failed(call(c, bad, fcall), nullptr));
        EXPECT_TRUE(failed(call(c, bad, fcall), nullptr));
        EXPECT_FALSE(failed(call(c, c.good, fcall), nullptr));
      }
      SCOPED_TRACE("memory");
      EXPECT_FALSE(failed(call(c, c.good, false), &memory));
      EXPECT_TRUE(failed(call(c, bad, false), &memory));
    }
  }
}

// The same for the time and the keys a call sends, which every script reads in the prologue and
// the epilogue (block.lua: its own): a `now` that is not a whole number of microseconds in
// [0, 2^53), and a count of keys that is not the script's keys a request times the requests.
// Before these checks, a now of NaN, an infinity or 1e300 made a policy write its hash and then
// fail to give it a TTL (PEXPIRE of NaN: the key lived for ever), a block of one key wrote the
// state and then failed on the marker, and a sliding log of 3 keys decided for one and a half
// requests. Times that Lua's number reading takes (a leading space, hexadecimal, 0) run.
TEST_F(ParamsTest, ATimeOrKeysTheClientNeverSendsFailBeforeAnyKeyIsTouched) {
  const std::vector<bool> kinds = call_kinds();
  redlimit::MemoryConnection memory(clock);
  const std::vector<std::string> bad_nows = {"nan",   "inf", "-inf", "-1", "1.5", "1e300", "9007199254740992",
                                             "2e15x", ""};
  // Good times: kT0 as Lua also reads it, and on Redis the range's ends. The in-memory backend keeps
  // its keys on the script's time, so there a time far from its clock's has its keys expire at once.
  char hex[32], exp[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(kT0.count()));
  std::snprintf(exp, sizeof exp, "%.15e", static_cast<double>(kT0.count()));
  const std::vector<std::string> near_nows = {" " + std::to_string(kT0.count()) + " ", hex, exp};
  for (const Case& c : cases()) {
    script_of_ = &c.script;
    // A script of one key a request takes any number of keys but none; block.lua takes exactly 2.
    std::vector<std::vector<std::string>> bad_keys = {{}};
    if (scripts::keys_per_request(c.script) == 2) {
      bad_keys.push_back({"raw:{a}:s"});
      bad_keys.push_back({"raw:{a}:s", "raw:{a}:b", "raw:{a}:t"});
      bad_keys.push_back({"raw:{a}:s", "raw:{a}:s"});
    }
    for (redlimit::MemoryConnection* m : {static_cast<redlimit::MemoryConnection*>(nullptr), &memory}) {
      for (const bool fcall : kinds) {
        if (m && fcall) continue;  // the in-memory backend runs scripts by EVAL and EVALSHA
        SCOPED_TRACE(std::string(c.script.name) + (m ? " memory" : fcall ? " FCALL" : " EVAL"));
        for (const std::string& now : bad_nows) {
          SCOPED_TRACE("now \"" + now + "\"");
          // "2e15x" and "" are no number: Lua's own arithmetic error, with no redlimit: prefix
          EXPECT_TRUE(failed(call(c, c.good, fcall, now), m, !m && (now.empty() || now.back() == 'x')));
        }
        std::vector<std::string> good_nows = near_nows;
        if (!m) good_nows.insert(good_nows.end(), {"0", "9007199254740991"});
        for (const std::string& now : good_nows) {
          SCOPED_TRACE("now \"" + now + "\"");
          EXPECT_FALSE(failed(call(c, c.good, fcall, now), m));
        }
        for (const auto& keys : bad_keys) {
          SCOPED_TRACE(std::to_string(keys.size()) + " keys");
          EXPECT_TRUE(failed(call(c, c.good, fcall, std::to_string(kT0.count()), &keys), m, false, keys));
        }
      }
    }
  }
}

// A bucket's 28-byte state that no client writes (another program's bytes under a bucket's key):
// a unit of 0, or ticks of a whole unit or more, under the limit's unit or another. It reads as
// none, on Redis and in memory alike, and the consume's write replaces it, with a TTL. Before,
// Redis divided by the unit 0 (NaN in the level), and the in-memory backend divided by zero; ticks
// of 2^56 under another unit were rescaled past int64 in memory (fuzz_memory_scripts found it), and
// on Redis made the key live for thousands of years.
TEST_F(ParamsTest, ABucketStateNoClientWritesReadsAsNoState) {
  const auto le = [](std::uint64_t v, int bytes) {
    std::string out;
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return out;
  };
  const auto state = [&](std::uint64_t frac, std::uint64_t unit) {
    return le(static_cast<std::uint64_t>(kT0.count()), 7) + le(3, 6) + le(frac, 7) + le(unit, 7) + le(0, 1);
  };
  const std::uint64_t big = (std::uint64_t{1} << 56) - 1;
  const std::vector<std::string> states = {state(5, 0), state(1000, 1000), state(big, 1000), state(big, 1)};
  // A token bucket of 10 (a token every 1,000 us) starts full; a leaky meter of 10 starts empty.
  const std::vector<std::pair<const redlimit::detail::Script*, std::string>> buckets = {
      {&scripts::token_bucket(), "1 1 10 1000 1"}, {&scripts::leaky_bucket(), "1 1 10 1000 1 meter"}};
  redlimit::MemoryConnection memory(clock);
  for (const auto& [script, head] : buckets) {
    for (const std::string& bytes : states) {
      ASSERT_EQ(bytes.size(), 28u);
      const std::vector<std::string> consume = {"EVAL",      server().runnable(script->source), "1",
                                                "raw:{a}:s", std::to_string(kT0.count()),       head};
      for (redlimit::MemoryConnection* m : {static_cast<redlimit::MemoryConnection*>(nullptr), &memory}) {
        SCOPED_TRACE(std::string(script->name) + (m ? " memory" : " Redis") + ", state of " +
                     std::to_string(bytes.size()) + " bytes #" + std::to_string(&bytes - states.data()));
        const std::vector<std::string> set = {"SET", "raw:{a}:s", bytes};
        ASSERT_EQ((m ? m->command(set) : server().command(set)).type, Reply::Type::status);
        const Reply r = m ? m->command(consume) : server().command(consume);
        ASSERT_EQ(r.type, Reply::Type::integer) << r.str;                   // an admission, packed by the limit 10:
        EXPECT_EQ(r.integer % 11, 9) << "a bucket with no state, 1 taken";  // remaining
        EXPECT_EQ(r.integer / 11, 1000) << "back as it was in 1,000 us";    // reset_after
      }
      const std::int64_t pttl = server().integer({"PTTL", "raw:{a}:s"});
      EXPECT_GT(pttl, 0);
      EXPECT_LT(pttl, 10000) << "a TTL for 1 ms of state and a lease of about a second";
      ASSERT_TRUE(memory.expires_at("raw:{a}:s").has_value());
      EXPECT_LT(*memory.expires_at("raw:{a}:s"), kT0 + std::chrono::seconds(10));
    }
  }
  // 0.2's 15-byte pack2(time, quantity) with a quantity of 2^64 - 1: the scripts read it as a
  // double, a level past any capacity, so a leaky meter of 10 is full (a request's room in 1,000 us,
  // empty in 10,000). The in-memory backend read it as int64, -1, and its time math overflowed
  // (fuzz_memory_scripts); it now holds such a quantity at 2^53, full alike.
  const std::string full = le(static_cast<std::uint64_t>(kT0.count()), 7) + le(~std::uint64_t{0}, 8);
  const std::vector<std::string> meter = {"EVAL",
                                          server().runnable(scripts::leaky_bucket().source),
                                          "1",
                                          "raw:{a}:s",
                                          std::to_string(kT0.count()),
                                          "1 1 10 1000 1 meter"};
  for (redlimit::MemoryConnection* m : {static_cast<redlimit::MemoryConnection*>(nullptr), &memory}) {
    SCOPED_TRACE(m ? "pack2, memory" : "pack2, Redis");
    ASSERT_EQ((m ? m->command({"SET", "raw:{a}:s", full}) : server().command({"SET", "raw:{a}:s", full})).type,
              Reply::Type::status);
    const Reply r = m ? m->command(meter) : server().command(meter);
    ASSERT_EQ(r.type, Reply::Type::array) << r.str;
    ASSERT_EQ(r.elements.size(), 5u) << "a rejection";
    EXPECT_EQ(r.elements[0].integer, 0);
    EXPECT_EQ(r.elements[1].integer, 0);
    EXPECT_EQ(r.elements[2].integer, 1000);
    EXPECT_EQ(r.elements[3].integer, 10000);
  }
  server().command({"DEL", "raw:{a}:s"});  // a rejection writes nothing: SET's key has no TTL
}

}  // namespace
}  // namespace redlimit_test
