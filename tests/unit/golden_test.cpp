// The golden traces (tests/golden/*.trace), recorded from a real Redis, replayed against the memory
// backend with no server: every reply must be what Redis answered. And the traces must have been
// recorded from the scripts in this build: a script changed without new traces fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "golden/golden.hpp"
#include "redlimit/detail/scripts.hpp"

namespace {

namespace golden = redlimit_golden;
namespace scripts = redlimit::detail::scripts;

golden::Trace load(const std::string& name) {
  const std::string path = std::string(REDLIMIT_GOLDEN_DIR) + "/" + name + ".trace";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing " + path + ": run scripts/record_golden.sh");
  std::stringstream text;
  text << in.rdbuf();
  return golden::parse(text.str(), name);
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, RecordedFromTheScriptsOfThisBuild) {
  const golden::Trace trace = load(GetParam());
  std::map<std::string, std::string> now;
  for (const auto* s : {&scripts::fixed_window(), &scripts::sliding_log(), &scripts::policy(),
                        &scripts::token_bucket(), &scripts::leaky_bucket(), &scripts::block()}) {
    now[std::string(s->name)] = s->sha1;
  }
  for (const auto& [name, sha] : now) {
    const auto it = trace.scripts.find(name);
    ASSERT_NE(it, trace.scripts.end()) << "tests/golden/" << GetParam() << ".trace names no SHA1 for " << name
                                       << ": run scripts/record_golden.sh";
    EXPECT_EQ(it->second, sha) << "lua/" << name << ".lua (or prologue.lua/epilogue.lua) changed since tests/golden "
                               << "was recorded: run scripts/record_golden.sh";
  }
}

TEST_P(GoldenTest, MemoryBackendAnswersWhatRedisAnswered) {
  const golden::Trace trace = load(GetParam());
  ASSERT_GE(trace.commands.size(), 5u);
  for (const auto& diff : golden::replay(trace)) ADD_FAILURE() << diff;
}

INSTANTIATE_TEST_SUITE_P(Traces, GoldenTest, ::testing::ValuesIn(golden::scenario_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(GoldenFormat, RoundTripsEveryKindOfReplyAndBinaryBytes) {
  golden::Trace t;
  t.scenario = "x";
  t.scripts["fixed_window"] = "abc";
  golden::Command c;
  c.at = 42;
  c.argv = {"SET", std::string("k\0\x01\"\\ y", 7), ""};
  using R = redlimit::Reply;
  c.reply = R::make_array({R::make_integer(-3), R::make_nil(), R::make_string(std::string("\xff\n", 2)),
                           R::make_status("OK"), R::make_error("ERR bad \"x\""), R::make_array({})});
  t.commands.push_back(c);
  c.redis_time = true;
  c.time_before = 5;
  c.time_after = 9;
  t.commands.push_back(c);
  const golden::Trace back = golden::parse(golden::format(t), "x");
  EXPECT_EQ(golden::format(back), golden::format(t));
  ASSERT_EQ(back.commands.size(), 2u);
  EXPECT_EQ(back.commands[0].argv, c.argv);
  EXPECT_EQ(golden::show(back.commands[0].reply), golden::show(c.reply));
  EXPECT_TRUE(back.commands[1].redis_time);
  EXPECT_EQ(back.commands[1].time_after, 9);
}

TEST(GoldenReplay, ADifferentAnswerIsReported) {
  // A trace claiming Redis admitted a request the memory backend rejects must not replay clean.
  golden::Trace t = load("fixed_window");
  ASSERT_FALSE(t.commands.empty());
  auto& reply = t.commands.front().reply;
  ASSERT_EQ(reply.type, redlimit::Reply::Type::integer);  // reset_after * (limit + 1) + remaining
  reply.integer += 1;                                     // remaining
  EXPECT_FALSE(golden::replay(t).empty());
}

}  // namespace
