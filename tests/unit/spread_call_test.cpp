// Batches on a cluster router whose masters run the spread functions (Connection::scripts_span_node,
// Options::batch_per_master), behind a MockConnection standing for two masters: subjects starting
// with "a" live on node 1, the others on node 2. One script call per node (FCALL of the spread
// function when its requests lie in several slots), decisions back in the caller's order; a call
// the node refuses before running it sent again slot by slot; nothing else sent twice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/detail/keys.hpp"
#include "redlimit/redlimit.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::ConnectionError;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::Micros;
using redlimit::OnFailure;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Reply;
using redlimit::Request;
using redlimit::Source;
using redlimit_unit::batch_reply;
using redlimit_unit::decision_reply;
using ::testing::_;
using ::testing::StrictMock;
using Argv = std::vector<std::string>;

// "redlimit:{api|a12}:fw" -> 12: each subject's number comes back as its remaining.
std::int64_t number_in(std::string_view key) {
  const auto bar = key.find('|'), close = key.find('}');
  return std::stoll(std::string(key.substr(bar + 2, close - bar - 2)));
}

// What one FCALL (or EVALSHA) carried: spread or not, and its state keys in order.
struct Sent {
  bool spread = false;
  std::vector<std::string> states;
};

// FCALL <fn>_spread 1 <k1> <n> <k1..kn> <args>, or EVALSHA <sha> 1 <k1> spread <n> <k1..kn> <args>
// (lua/spread_eval.lua); otherwise <verb> <body> <n> <k1..kn> <args>.
Sent parse(const Argv& c) {
  Sent s;
  const bool fcall = c[0] == "FCALL";
  const std::size_t marker = fcall ? 0 : 1;  // the "spread" argument of the EVAL text's form
  s.spread =
      fcall ? c[1].size() > 7 && c[1].compare(c[1].size() - 7, 7, "_spread") == 0 : c.size() > 4 && c[4] == "spread";
  const std::size_t nkeys = std::stoul(s.spread ? c[4 + marker] : c[2]);
  const std::size_t first = s.spread ? 5 + marker : 3;
  if (s.spread) EXPECT_EQ(c[2], "1") << "a spread call declares one key";
  if (s.spread) EXPECT_EQ(c[3], c[first]) << "the first state routes the call";
  for (std::size_t i = 0; i < nkeys; ++i) s.states.push_back(c[first + i]);  // a fixed window's: one key
  return s;
}

Reply answer(const Sent& s) {
  std::vector<Reply> ds;
  for (const auto& k : s.states) ds.push_back(decision_reply(1, number_in(k), 0, 1'000'000));
  return ds.size() == 1 ? ds.front() : batch_reply(ds);
}

class SpreadCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mock->span_slots = false;
    mock->span_node = true;
    mock->node_for = [](std::string_view key) -> std::size_t { return key.find("{api|a") != std::string_view::npos ? 1 : 2; };
    mock->set_script_path(redlimit::ScriptPath::functions);
    allow_pipelines();
  }
  // A batch's calls go as one pipeline: MockConnection's runs them through command().
  void allow_pipelines() { EXPECT_CALL(*mock, pipeline(_)).Times(::testing::AnyNumber()); }

  RateLimiter make(bool per_master = true) const {
    Options o;
    o.clock = clock;
    o.on_failure = OnFailure::fail_closed;
    o.breaker_threshold = 0;
    o.batch_per_master = per_master;
    return RateLimiter(mock, o);
  }

  // Subjects a1..aN (node 1) and b1..bN (node 2), interleaved, and the slots they cover.
  std::vector<std::string> subjects(int n) const {
    std::vector<std::string> out;
    for (int i = 1; i <= n; ++i) {
      out.push_back("a" + std::to_string(i));
      out.push_back("b" + std::to_string(i + 100));
    }
    return out;
  }
  static std::vector<Request> requests_of(const std::vector<std::string>& who) {
    std::vector<Request> r;
    for (const auto& w : who) r.push_back({w, 1});
    return r;
  }
  static void expect_in_order(const std::vector<Decision>& got, const std::vector<std::string>& who) {
    ASSERT_EQ(got.size(), who.size());
    for (std::size_t i = 0; i < who.size(); ++i) {
      EXPECT_EQ(got[i].source, Source::primary) << who[i];
      EXPECT_EQ(got[i].remaining, std::stoll(who[i].substr(1))) << who[i];
    }
  }

  std::shared_ptr<StrictMock<MockConnection>> mock = std::make_shared<StrictMock<MockConnection>>();
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Micros{1'700'000'000'000'000});
};

// On either script path: FCALL of the spread function, or EVALSHA of the EVAL text in its spread
// form (lua/spread_eval.lua, on every server version).
TEST_F(SpreadCallTest, ABatchIsOneSpreadCallPerNodeInTheCallersOrder) {
  for (const bool evalsha : {false, true}) {
    SCOPED_TRACE(evalsha ? "evalsha" : "functions");
    mock->set_script_path(evalsha ? redlimit::ScriptPath::evalsha : redlimit::ScriptPath::functions);
    const RateLimiter limiter = make();
    const auto fw = limiter.fixed_window("api", Limit::per_second(5));
    const auto who = subjects(6);
    std::vector<Sent> sent;
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly([&](const Argv& c) {
      EXPECT_EQ(c[0], evalsha ? "EVALSHA" : "FCALL");
      sent.push_back(parse(c));
      return answer(sent.back());
    });
    expect_in_order(fw.consume_many(requests_of(who)), who);
    ASSERT_EQ(sent.size(), 2u);
    for (const auto& s : sent) {
      EXPECT_TRUE(s.spread);
      ASSERT_EQ(s.states.size(), 6u);
      const char node = s.states[0][s.states[0].find('|') + 1];
      for (std::size_t i = 0; i < 6; ++i)
        EXPECT_EQ(s.states[i], fw.key_for(node + std::to_string(i + 1 + (node == 'b') * 100)));
    }
    EXPECT_EQ(limiter.counters().resent_by_slot, 0u);
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
    allow_pipelines();
  }
}

TEST_F(SpreadCallTest, WithTheOptionOffEachSlotIsACallOnEitherPath) {
  const auto who = subjects(4);
  std::set<int> slots;
  for (const auto& w : who) slots.insert(redlimit::detail::key_slot("{api|" + w + "}"));
  for (const bool evalsha : {false, true}) {
    SCOPED_TRACE(evalsha ? "evalsha" : "functions");
    mock->set_script_path(evalsha ? redlimit::ScriptPath::evalsha : redlimit::ScriptPath::functions);
    const RateLimiter limiter = make(false);
    const auto fw = limiter.fixed_window("api", Limit::per_second(5));
    int calls = 0;
    EXPECT_CALL(*mock, command(_)).WillRepeatedly([&](const Argv& c) {
      ++calls;
      EXPECT_EQ(c[0], evalsha ? "EVALSHA" : "FCALL");
      const Sent s = parse(c);
      EXPECT_FALSE(s.spread);
      return answer(s);
    });
    expect_in_order(fw.consume_many(requests_of(who)), who);
    EXPECT_EQ(calls, static_cast<int>(slots.size()));
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
    allow_pipelines();
  }
}

// Node 1 refuses its call at the read of a key it no longer serves: its requests go again, one
// call per slot (plain FCALLs); node 2's decisions stand, and nothing of node 2 is sent twice.
TEST_F(SpreadCallTest, ARefusedSpreadCallIsSentAgainSlotBySlot) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  const auto who = subjects(3);
  std::vector<Sent> sent;
  EXPECT_CALL(*mock, command(_)).WillRepeatedly([&](const Argv& c) {
    sent.push_back(parse(c));
    if (sent.back().spread && sent.back().states[0].find("{api|a") != std::string::npos) {
      return Reply::make_error(
          "ERR Script attempted to access a non local key in a cluster node script: x, on @user_function:1.");
    }
    return answer(sent.back());
  });
  expect_in_order(fw.consume_many(requests_of(who)), who);
  ASSERT_EQ(sent.size(), 2u + 3u);  // two spread calls, then node 1's three subjects alone
  for (std::size_t i = 2; i < sent.size(); ++i) {
    EXPECT_FALSE(sent[i].spread);
    ASSERT_EQ(sent[i].states.size(), 1u);
    EXPECT_EQ(sent[i].states[0].find("{api|a"), sent[i].states[0].find('{')) << "only node 1's requests again";
  }
  EXPECT_EQ(limiter.counters().resent_by_slot, 1u);
}

// Any other error of a spread call is its answer: an outage reply goes to the failure policy, a
// usage error is thrown; neither is sent again (the script may have run).
TEST_F(SpreadCallTest, OtherErrorsOfASpreadCallAreNotSentAgain) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  const auto who = subjects(3);
  for (const bool outage : {true, false}) {
    SCOPED_TRACE(outage ? "LOADING" : "WRONGTYPE");
    int calls = 0;
    EXPECT_CALL(*mock, command(_)).WillRepeatedly([&](const Argv& c) {
      ++calls;
      const Sent s = parse(c);
      if (s.states[0].find("{api|a") == std::string::npos) return answer(s);
      return Reply::make_error(outage ? "LOADING Redis is loading the dataset in memory"
                                      : "WRONGTYPE Operation against a key holding the wrong kind of value");
    });
    if (outage) {
      const auto got = fw.consume_many(requests_of(who));
      ASSERT_EQ(got.size(), who.size());
      for (std::size_t i = 0; i < who.size(); ++i) {
        EXPECT_EQ(got[i].source, who[i][0] == 'a' ? Source::failure_policy : Source::primary) << who[i];
      }
    } else {
      EXPECT_THROW(fw.consume_many(requests_of(who)), redlimit::ReplyError);
    }
    EXPECT_EQ(calls, 2);
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
    allow_pipelines();
  }
  EXPECT_EQ(limiter.counters().resent_by_slot, 0u);
}

// The second round trip breaks: the re-sent requests' outcome is unknown (the failure policy
// answers them, nothing replayed); the first round trip's decisions stand.
TEST_F(SpreadCallTest, ASecondRoundTripThatBreaksFailsOnlyTheResentRequests) {
  const RateLimiter limiter = make();
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  const auto who = subjects(3);
  int calls = 0;
  EXPECT_CALL(*mock, command(_)).WillRepeatedly([&](const Argv& c) -> Reply {
    ++calls;
    const Sent s = parse(c);
    if (s.states[0].find("{api|a") == std::string::npos) return answer(s);
    if (s.spread) return Reply::make_error("MOVED 1234 127.0.0.1:7001");
    throw ConnectionError("reset by peer");
  });
  const auto got = fw.consume_many(requests_of(who));
  ASSERT_EQ(got.size(), who.size());
  for (std::size_t i = 0; i < who.size(); ++i) {
    EXPECT_EQ(got[i].source, who[i][0] == 'a' ? Source::failure_policy : Source::primary) << who[i];
  }
  EXPECT_EQ(calls, 2 + 1);  // the base pipeline stops at the first broken command
  EXPECT_EQ(limiter.counters().resent_by_slot, 1u);
}

}  // namespace
