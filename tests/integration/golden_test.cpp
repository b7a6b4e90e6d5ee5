// The golden traces stay true to Redis: every scenario recorded again against the suite's live
// server must give the checked-in trace (tests/golden/*.trace), command for command.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "golden/golden.hpp"
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class GoldenLiveTest : public RedisTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(GoldenLiveTest, RedisStillAnswersTheCheckedInTrace) {
  const std::string path = std::string(REDLIMIT_GOLDEN_DIR) + "/" + GetParam() + ".trace";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "missing " << path << ": run scripts/record_golden.sh";
  std::stringstream text;
  text << in.rdbuf();
  const redlimit_golden::Trace expected = redlimit_golden::parse(text.str(), GetParam());
  auto redis = std::make_shared<redlimit::RedisConnection>(redlimit::parse_url(server().url()),
                                                           std::chrono::milliseconds(5000),
                                                           std::chrono::milliseconds(30000));
  const redlimit_golden::Trace now = redlimit_golden::record(GetParam(), redis);
  for (const auto& diff : redlimit_golden::compare(expected, now)) {
    ADD_FAILURE() << diff << "\n(if the scripts changed on purpose: run scripts/record_golden.sh)";
  }
  // And the memory backend answers this recording too, time fields included.
  for (const auto& diff : redlimit_golden::replay(now)) ADD_FAILURE() << diff;
}

INSTANTIATE_TEST_SUITE_P(Traces, GoldenLiveTest, ::testing::ValuesIn(redlimit_golden::scenario_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace redlimit_test
