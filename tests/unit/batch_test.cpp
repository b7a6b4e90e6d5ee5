// Strategy::consume_many: one script call decides the whole batch on a single server (sent again
// behind one SCRIPT LOAD after NOSCRIPT); on a cluster, one call per hash slot, pipelined; batches
// past 256 requests are split; everything is checked before anything is sent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/redlimit.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::ConnectionError;
using redlimit::Decision;
using redlimit::InvalidArgument;
using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::Micros;
using redlimit::OnFailure;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Reply;
using redlimit::ReplyError;
using redlimit::Request;
using redlimit::Source;
using redlimit::Strategy;
using redlimit_unit::batch_reply;
using redlimit_unit::decision_reply;
using ::testing::_;
using ::testing::AnyNumber;
using ::testing::InSequence;
using ::testing::Return;
using ::testing::StrictMock;
using ::testing::Throw;
using namespace std::chrono_literals;
using Argv = std::vector<std::string>;
using Commands = std::vector<Argv>;
namespace scripts = redlimit::detail::scripts;

constexpr std::int64_t kBatchStart = 1'700'000'000'000'000;

class BatchTest : public ::testing::Test {
 protected:
  std::shared_ptr<StrictMock<MockConnection>> mock = std::make_shared<StrictMock<MockConnection>>();
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Micros{kBatchStart});

  RateLimiter make(OnFailure on_failure = OnFailure::raise) const {
    Options o;
    o.clock = clock;
    o.on_failure = on_failure;
    o.breaker_threshold = 0;
    return RateLimiter(mock, o);
  }
  // The fixed window "api", 5 per second.
  static Argv call(const char* verb, const Strategy& s, const std::string& subject, std::int64_t cost) {
    const auto& script = scripts::fixed_window();
    return {verb,
            verb == std::string("EVAL") ? std::string(script.source) : script.sha1,
            "1",
            s.key_for(subject),
            std::to_string(kBatchStart),
            scripts::head("1", cost, "5 1000000")};  // mode, cost, the parameters (lua/prologue.lua)
  }
  // One script call deciding `requests` in order (prologue.lua): each request's key, the first
  // request's ARGV, then the costs of the others, unless all cost the same.
  static Argv batch_call(const char* verb, const Strategy& s,
                         const std::vector<std::pair<std::string, std::int64_t>>& requests) {
    const auto& script = scripts::fixed_window();
    Argv argv{verb, verb == std::string("EVAL") ? std::string(script.source) : script.sha1,
              std::to_string(requests.size())};
    for (const auto& r : requests) argv.push_back(s.key_for(r.first));
    // Mode "4": consume, and no subject comes twice (lua/prologue.lua); "1" otherwise.
    std::set<std::string> subjects;
    for (const auto& r : requests) subjects.insert(r.first);
    const char* mode = subjects.size() == requests.size() ? "4" : "1";
    argv.insert(argv.end(), {std::to_string(kBatchStart), scripts::head(mode, requests.front().second, "5 1000000")});
    bool uniform = true;
    for (const auto& r : requests) uniform = uniform && r.second == requests.front().second;
    if (uniform) return argv;
    for (std::size_t i = 1; i < requests.size(); ++i) argv.push_back(std::to_string(requests[i].second));
    return argv;
  }
};

TEST_F(BatchTest, OneScriptCallDecidesTheBatchInRequestOrder) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, pipeline(_)).Times(0);
  EXPECT_CALL(*mock, command(batch_call("EVALSHA", fw, {{"a", 1}, {"b", 3}, {"a", 5}})))
      .WillOnce(Return(batch_reply({decision_reply(1, 4, 0, 1'000'000), decision_reply(1, 2, 0, 1'000'000),
                                    decision_reply(0, 4, 1'000'000, 1'000'000)})));
  const std::vector<Decision> d = fw.consume_many({{"a", 1}, {"b", 3}, {"a", 5}});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_TRUE(d[0].allowed);
  EXPECT_EQ(d[0].remaining, 4);
  EXPECT_TRUE(d[1].allowed);
  EXPECT_EQ(d[1].remaining, 2);
  EXPECT_FALSE(d[2].allowed);
  EXPECT_EQ(d[2].retry_after, 1s);
  for (const Decision& x : d) {
    EXPECT_EQ(x.limit, 5);
    EXPECT_EQ(x.source, Source::primary);
  }
  EXPECT_EQ(limiter.counters().decisions, 3u);
  EXPECT_EQ(limiter.counters().allowed, 2u);
  EXPECT_EQ(limiter.counters().rejected, 1u);
}

TEST_F(BatchTest, DefaultCostIsOne) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  Request r;
  r.subject = "a";
  EXPECT_EQ(r.cost, 1);
  EXPECT_CALL(*mock, command(batch_call("EVALSHA", fw, {{"a", 1}, {"b", 1}})))
      .WillOnce(Return(batch_reply({decision_reply(1, 4, 0, 1), decision_reply(1, 4, 0, 1)})));
  EXPECT_EQ(fw.consume_many({r, Request{"b"}}).size(), 2u);
}

// A batch whose subjects all differ says so with mode "4" (lua/prologue.lua): the script keeps no
// table of what it wrote, which only a subject that comes again would read. A repeated subject
// sends "1".
TEST_F(BatchTest, ABatchOfDistinctSubjectsSendsMode4AndARepeatMode1) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  std::vector<std::string> modes;
  EXPECT_CALL(*mock, command(_)).Times(4).WillRepeatedly([&](const Argv& c) {
    const std::size_t n = std::stoul(c.at(2));
    modes.push_back(c.at(3 + n + 1).substr(0, 1));  // the head's first word
    std::vector<Reply> ds(n, decision_reply(1, 4, 0, 1));
    return batch_reply(ds);
  });
  fw.consume_many({{"a", 1}, {"b", 1}, {"c", 1}});
  fw.consume_many({{"a", 1}, {"b", 1}, {"a", 1}});
  // A call's most (kMaxPerCall): all distinct, then with its first subject again as its last.
  std::vector<std::string> names;
  for (int i = 0; i < 256; ++i) names.push_back("user-" + std::to_string(i));
  std::vector<Request> many;
  for (const auto& name : names) many.push_back({name, 1});
  fw.consume_many(many);
  many.back() = many.front();
  fw.consume_many(many);
  EXPECT_EQ(modes, (std::vector<std::string>{"4", "1", "4", "1"}));
}

// Requests that all cost what the first does send no costs after the head (prologue.lua):
// the script reads them all as its cost. One cost that differs sends those of requests 2..n.
TEST_F(BatchTest, CostsAreSentOnlyWhenTheyDiffer) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  const std::string sha = scripts::fixed_window().sha1;
  const Argv same{
      "EVALSHA",      sha, "3", fw.key_for("a"), fw.key_for("b"), fw.key_for("c"), std::to_string(kBatchStart),
      "4 2 5 1000000"};  // mode "4": three distinct subjects
  Argv differ = same;
  differ[7] = "4 1 5 1000000";
  differ.insert(differ.end(), {"2", "2"});
  const Reply three = batch_reply({decision_reply(1, 3, 0, 1), decision_reply(1, 1, 0, 1), decision_reply(0, 1, 1, 1)});
  InSequence seq;
  EXPECT_CALL(*mock, command(same)).WillOnce(Return(three));
  EXPECT_CALL(*mock, command(differ)).WillOnce(Return(three));
  EXPECT_EQ(fw.consume_many({{"a", 2}, {"b", 2}, {"c", 2}}).size(), 3u);
  EXPECT_EQ(fw.consume_many({{"a", 1}, {"b", 2}, {"c", 2}}).size(), 3u);
}

TEST_F(BatchTest, NoscriptIsAnsweredByOneLoadAndTheSameBatchAgain) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  InSequence seq;
  EXPECT_CALL(*mock, command(batch_call("EVALSHA", fw, {{"a", 1}, {"b", 2}, {"c", 3}})))
      .WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(*mock, pipeline(_));  // the SCRIPT LOAD and the call again: one command() each, by default
  EXPECT_CALL(*mock, command(Argv{"SCRIPT", "LOAD", std::string(scripts::fixed_window().source)}))
      .WillOnce(Return(Reply::make_string(scripts::fixed_window().sha1)));
  EXPECT_CALL(*mock, command(batch_call("EVALSHA", fw, {{"a", 1}, {"b", 2}, {"c", 3}})))
      .WillOnce(
          Return(batch_reply({decision_reply(1, 4, 0, 8), decision_reply(1, 3, 0, 7), decision_reply(1, 2, 0, 9)})));
  const std::vector<Decision> d = fw.consume_many({{"a", 1}, {"b", 2}, {"c", 3}});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].remaining, 4);
  EXPECT_EQ(d[0].reset_after, 8us);
  EXPECT_EQ(d[1].remaining, 3);
  EXPECT_EQ(d[1].reset_after, 7us);
  EXPECT_EQ(d[2].remaining, 2);
  EXPECT_EQ(d[2].reset_after, 9us);
}

TEST_F(BatchTest, EveryRequestIsCheckedBeforeAnythingIsSent) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).Times(0);
  EXPECT_CALL(*mock, pipeline(_)).Times(0);
  const std::string long_subject(1025, 'x');
  EXPECT_THROW(fw.consume_many({{"a", 1}, {"b", 0}}), InvalidArgument);
  EXPECT_THROW(fw.consume_many({{"a", 1}, {"b", 6}}), InvalidArgument);
  EXPECT_THROW(fw.consume_many({{"a", 1}, {"", 1}, {"c", 1}}), InvalidArgument);
  EXPECT_THROW(fw.consume_many({{long_subject, 1}, {"a", 1}}), InvalidArgument);
  EXPECT_EQ(limiter.counters().decisions, 0u);
}

TEST_F(BatchTest, EmptyBatchSendsNothing) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).Times(0);
  EXPECT_CALL(*mock, pipeline(_)).Times(0);
  EXPECT_TRUE(fw.consume_many({}).empty());
}

TEST_F(BatchTest, SingleRequestIsOneCommand) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, pipeline(_)).Times(0);
  EXPECT_CALL(*mock, command(call("EVALSHA", fw, "a", 2))).WillOnce(Return(decision_reply(1, 3, 0, 1)));
  const auto d = fw.consume_many({{"a", 2}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].remaining, 3);
}

TEST_F(BatchTest, ConnectionErrorUnderRaiseThrows) {
  const RateLimiter limiter = make(OnFailure::raise);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("reset")));
  EXPECT_THROW(fw.consume_many({{"a", 1}, {"b", 1}}), ConnectionError);
  EXPECT_EQ(limiter.counters().errors, 1u);
}

TEST_F(BatchTest, ConnectionErrorUnderFailOpenAdmitsEveryRequest) {
  const RateLimiter limiter = make(OnFailure::fail_open);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("reset")));
  const auto d = fw.consume_many({{"a", 1}, {"b", 1}, {"c", 4}});
  ASSERT_EQ(d.size(), 3u);
  for (const Decision& x : d) {
    EXPECT_TRUE(x.allowed);
    EXPECT_EQ(x.source, Source::failure_policy);
  }
  EXPECT_EQ(limiter.counters().from_failure_policy, 3u);
}

TEST_F(BatchTest, AnOutageReplyToTheBatchAppliesThePolicyToEachRequest) {
  const RateLimiter limiter = make(OnFailure::fail_closed);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(Reply::make_error("OOM command not allowed when used memory > 'maxmemory'.")));
  const auto d = fw.consume_many({{"a", 1}, {"b", 1}});
  ASSERT_EQ(d.size(), 2u);
  for (const Decision& x : d) {
    EXPECT_FALSE(x.allowed);
    EXPECT_EQ(x.source, Source::failure_policy);
  }
  EXPECT_EQ(limiter.counters().from_failure_policy, 2u);
}

TEST_F(BatchTest, ScriptErrorInTheBatchIsAReplyError) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(Reply::make_error("ERR boom")));
  EXPECT_THROW(fw.consume_many({{"a", 1}, {"b", 1}}), ReplyError);
}

TEST_F(BatchTest, ABatchReplyOfTheWrongSizeIsAReplyError) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  // Two requests, one decision back: nothing may be guessed for the other.
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(batch_reply({decision_reply(1, 4, 0, 1)})));
  EXPECT_THROW(fw.consume_many({{"a", 1}, {"b", 1}}), ReplyError);
}

TEST_F(BatchTest, BatchesPastTheCallSizeArePipelinedCalls) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit(1000, 1s));
  std::vector<std::string> subjects;
  for (int i = 0; i < 300; ++i) subjects.push_back("s" + std::to_string(i));
  std::vector<Request> requests;
  for (const auto& s : subjects) requests.push_back({s, 1});
  EXPECT_CALL(*mock, pipeline(_)).WillOnce([&](const Commands& cmds) {
    EXPECT_EQ(cmds.size(), 2u);
    std::vector<Reply> out;
    std::size_t first = 0;
    for (const Argv& c : cmds) {
      const std::size_t n = std::stoul(c.at(2));        // a fixed window's request sends one key
      EXPECT_EQ(c.at(3), fw.key_for(subjects[first]));  // requests stay in order
      std::vector<Reply> ds;
      for (std::size_t i = 0; i < n; ++i) ds.push_back(decision_reply(1, static_cast<std::int64_t>(first + i), 0, 1));
      out.push_back(n == 1 ? ds[0] : batch_reply(ds));
      first += n;
    }
    EXPECT_EQ(first, subjects.size());
    EXPECT_EQ(std::stoul(cmds[0].at(2)), 256u);
    return out;
  });
  const auto d = fw.consume_many(requests);
  ASSERT_EQ(d.size(), subjects.size());
  for (std::size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d[i].remaining, static_cast<std::int64_t>(i));
}

TEST_F(BatchTest, OnAClusterOneCallPerSlotAndAnswersInRequestOrder) {
  mock->span_slots = false;
  const RateLimiter limiter = make(OnFailure::fail_closed);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  ASSERT_NE(redlimit::detail::key_slot(fw.key_for("a")), redlimit::detail::key_slot(fw.key_for("b")));
  // a and a share a slot: one call deciding both; b alone: a plain call. b's outage reply does not
  // undo a's decisions, which Redis made and recorded.
  EXPECT_CALL(*mock, pipeline(Commands{batch_call("EVALSHA", fw, {{"a", 1}, {"a", 5}}), call("EVALSHA", fw, "b", 3)}))
      .WillOnce(Return(std::vector<Reply>{
          batch_reply({decision_reply(1, 4, 0, 1'000'000), decision_reply(0, 4, 1'000'000, 1'000'000)}),
          Reply::make_error("OOM command not allowed when used memory > 'maxmemory'.")}));
  const auto d = fw.consume_many({{"a", 1}, {"b", 3}, {"a", 5}});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_TRUE(d[0].allowed);
  EXPECT_EQ(d[0].source, Source::primary);
  EXPECT_EQ(d[1].source, Source::failure_policy);
  EXPECT_FALSE(d[1].allowed);
  EXPECT_FALSE(d[2].allowed);
  EXPECT_EQ(d[2].source, Source::primary);
  EXPECT_EQ(d[2].retry_after, 1s);
}

TEST_F(BatchTest, WorksForEveryStrategy) {
  const RateLimiter limiter = make();
  const std::vector<Strategy> strategies = {
      limiter.sliding_log("api", Limit::per_second(5)),
      limiter.sliding_window("api", Limit::per_second(5)),
      limiter.token_bucket("api", 5, 1, 1s),
      limiter.leaky_bucket("api", 5, Limit::per_second(1)),
      limiter.policy("api", redlimit::parse_limits("5/s; 50/m")),
  };
  for (const Strategy& s : strategies) {
    SCOPED_TRACE(s.key_for("a"));
    const std::string key = s.key_for("a");
    // A policy of several limits appends the deciding limit and each limit's state; a sliding window
    // (a policy of one limit) answers five integers, as the other strategies do.
    const bool policy_reply = key.size() > 4 && key.compare(key.size() - 4, 4, ":pol") == 0;
    EXPECT_CALL(*mock, command(_)).WillOnce([&](const Argv& c) {
      // Each request's key (its state), then ARGV.
      Argv keys = redlimit_unit::request_keys(s, "a");
      const Argv b_keys = redlimit_unit::request_keys(s, "b");
      keys.insert(keys.end(), b_keys.begin(), b_keys.end());
      EXPECT_EQ(c.at(0), "EVALSHA");
      EXPECT_EQ(c.at(2), std::to_string(keys.size()));
      EXPECT_EQ(Argv(c.begin() + 3, c.begin() + 3 + static_cast<std::ptrdiff_t>(keys.size())), keys);
      EXPECT_EQ(c.at(3 + keys.size() + 1).substr(0, 2), "4 ");  // the head: consume, a and b distinct
      EXPECT_EQ(c.back(), "2");                                 // b's cost, after the head
      std::vector<Reply> ds;
      for (int i = 0; i < 2; ++i) {
        Reply r = decision_reply(1, 4, 0, 1);
        if (policy_reply) {  // the deciding limit, then a (remaining, reset) pair for each of the 2 limits
          r.elements.push_back(Reply::make_integer(1));
          for (std::size_t j = 0; j < 4; ++j) r.elements.push_back(Reply::make_integer(1));
        }
        ds.push_back(r);
      }
      return batch_reply(ds);
    });
    const auto d = s.consume_many({{"a", 1}, {"b", 2}});
    ASSERT_EQ(d.size(), 2u);
    EXPECT_TRUE(d[0].allowed && d[1].allowed);
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
  }
}

}  // namespace
