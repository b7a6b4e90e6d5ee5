// Strategy::consume_many of a sliding window or a policy of many buckets: a script call carries
// only as many requests as read DecisionPath::kMostBucketsPerCall buckets together
// (DecisionPath::per_call_of), not the 256 of the other strategies (batch_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/detail/decision_path.hpp"
#include "redlimit/redlimit.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::Micros;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Reply;
using redlimit::Request;
using redlimit::Strategy;
using redlimit_unit::batch_reply;
using redlimit_unit::decision_reply;
using ::testing::_;
using ::testing::StrictMock;
using namespace std::chrono_literals;

// A sliding window's or a policy's decision reads every live bucket of its limits (window /
// precision + 1 each): a call carries only as many requests as read at most
// DecisionPath::kMostBucketsPerCall buckets together, so that no call of a batch holds Redis longer
// than the largest policy's single decision.
TEST(BatchBucketsTest, ManyBucketsMakeSmallerCalls) {
  using redlimit::detail::DecisionPath;
  ASSERT_EQ(DecisionPath::kMostBucketsPerCall, redlimit::Policy::max_buckets() + redlimit::Policy::max_limits());
  const auto mock = std::make_shared<StrictMock<MockConnection>>();
  Options o;
  o.clock = std::make_shared<ManualClock>(Micros{1'700'000'000'000'000});
  o.breaker_threshold = 0;
  const RateLimiter limiter(mock, o);
  struct Case {
    Strategy strategy;
    std::size_t limits;  // a policy's, or 1
    std::size_t per_call;
  };
  const std::vector<Case> cases = {
      {limiter.sliding_window("w1", Limit(1000, 1min)), 1, 256},                                   // 2 buckets
      {limiter.sliding_window("w60", Limit(1000, 1h), 1min), 1, 164},                              // 61: 10,016 / 61
      {limiter.sliding_window("w1000", Limit(1000, 1000s), 1s), 1, 10},                            // 1,001
      {limiter.sliding_window("w10000", Limit(1000, 10000s), 1s), 1, 1},                           // 10,001
      {limiter.policy("p", redlimit::parse_limits("1000/s; 1000/10s@1s; 1000/1h@1m")), 3, 135},    // 2 + 11 + 61
      {limiter.policy("pmax", redlimit::parse_limits("1000/5000s@1s; 1000/5000min@1min")), 2, 1},  // 5,001 twice
  };
  std::vector<std::string> subjects;
  for (int i = 0; i < 300; ++i) subjects.push_back("s" + std::to_string(i));
  std::vector<Request> requests;
  for (const auto& subject : subjects) requests.push_back({subject, 1});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.strategy.resource());
    // A policy's admission: its limits' pairs, after a 2 in a batch's reply (lua/policy.lua).
    const auto decision = [&](std::int64_t remaining, bool alone) {
      if (c.limits == 1) return decision_reply(1, remaining, 0, 1);
      std::vector<Reply> pairs;
      if (!alone) pairs.push_back(Reply::make_integer(2));
      for (std::size_t i = 0; i < c.limits; ++i)
        pairs.insert(pairs.end(), {Reply::make_integer(remaining), Reply::make_integer(1)});
      return Reply::make_array(pairs);
    };
    const std::size_t calls = (requests.size() + c.per_call - 1) / c.per_call;
    EXPECT_CALL(*mock, pipeline(_)).WillOnce([&](const std::vector<std::vector<std::string>>& cmds) {
      EXPECT_EQ(cmds.size(), calls);
      std::vector<Reply> out;
      std::size_t first = 0;
      for (const auto& cmd : cmds) {
        const std::size_t n = std::stoul(cmd.at(2));
        EXPECT_EQ(n, std::min(c.per_call, requests.size() - first));
        EXPECT_EQ(cmd.at(3), c.strategy.key_for(requests[first].subject));  // in order
        std::vector<Reply> ds;
        for (std::size_t i = 0; i < n; ++i) ds.push_back(decision(static_cast<std::int64_t>(first + i), n == 1));
        out.push_back(n == 1 ? ds[0] : batch_reply(ds));
        first += n;
      }
      EXPECT_EQ(first, requests.size());
      return out;
    });
    const auto d = c.strategy.consume_many(requests);
    ASSERT_EQ(d.size(), requests.size());
    for (std::size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d[i].remaining, static_cast<std::int64_t>(i));
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
  }
}

}  // namespace
