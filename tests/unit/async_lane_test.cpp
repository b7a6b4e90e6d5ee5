// Options::share_script_calls (detail/async_lane.hpp), against a connection answered by hand whose
// posted tasks wait for the test (a loop's next turn): the consume_async calls of one turn are one
// script call, the requests in call order, each callback with its own decision; an error reply is
// every caller's; a callback that throws costs the others nothing; a lone call goes alone; with
// the option off every call is sent at once.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/rate_limiter.hpp"
#include "unit/hand_answered.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::Decision;
using redlimit::Reply;

// A script call's reply of one fixed-window decision per `remaining`: admitted, that many left.
Reply decided(const std::vector<long long>& remaining) {
  std::vector<Reply> ints;
  for (long long r : remaining) {
    for (long long v : {1LL, r, 0LL, 1000LL, 0LL}) ints.push_back(Reply::make_integer(v));
  }
  return Reply::make_array(std::move(ints));
}

struct Got {
  int calls = 0;
  Decision decision;
  std::string error;
};

class AsyncLaneTest : public ::testing::Test {
 protected:
  void make(bool share) {
    held = std::make_shared<redlimit_test::HandAnswered>();
    held->set_script_path(redlimit::ScriptPath::evalsha);  // one command a call, nothing probed
    held->defer_posts = true;
    redlimit::Options o;
    o.share_script_calls = share;
    rl.emplace(std::make_shared<::testing::StrictMock<MockConnection>>(), o);  // no sync command expected
    rl->attach_async(held);
  }

  // The held callbacks keep the limiter alive: dropped first.
  void TearDown() override {
    if (held) {
      held->sent.clear();
      held->posted.clear();
    }
    rl.reset();
  }

  // consume_async of each subject, recorded into `got` (one per subject, in order).
  void consume_each(const redlimit::Strategy& s, const std::vector<std::string>& subjects, std::vector<Got>& got) {
    got.resize(subjects.size());
    for (std::size_t i = 0; i < subjects.size(); ++i) {
      s.consume_async(subjects[i], 1, [&got, i](const Decision& d, std::exception_ptr e) {
        Got& g = got[i];
        ++g.calls;
        g.decision = d;
        if (e) {
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& ex) {
            g.error = ex.what();
          }
        }
      });
    }
  }

  std::shared_ptr<redlimit_test::HandAnswered> held;
  std::optional<redlimit::RateLimiter> rl;
};

TEST_F(AsyncLaneTest, TheCallsOfOneTurnAreOneScriptCallInCallOrder) {
  make(true);
  const auto fw = rl->fixed_window("lane", redlimit::Limit::per_minute(10));
  std::vector<Got> got;
  consume_each(fw, {"a", "b", "a"}, got);
  EXPECT_TRUE(held->sent.empty()) << "nothing is sent before the loop's turn";
  ASSERT_EQ(held->posted.size(), 1u) << "one turn scheduled for the three calls";
  held->run_posted();
  ASSERT_EQ(held->sent.size(), 1u);
  const auto& argv = held->sent.front().argv;
  ASSERT_EQ(argv.at(2), "3");  // three requests: a fixed window's state each (it holds its block)
  EXPECT_EQ(argv.at(3), fw.key_for("a"));
  EXPECT_EQ(argv.at(4), fw.key_for("b"));
  EXPECT_EQ(argv.at(5), fw.key_for("a"));
  held->answer(decided({9, 9, 8}));
  const std::vector<long long> want{9, 9, 8};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].calls, 1) << i;
    EXPECT_TRUE(got[i].error.empty()) << got[i].error;
    EXPECT_TRUE(got[i].decision.allowed) << i;
    EXPECT_EQ(got[i].decision.remaining, want[i]) << i;
  }
  EXPECT_EQ(rl->counters().decisions, 3u);
}

TEST_F(AsyncLaneTest, ALoneCallGoesAloneAndTheNextTurnStartsAfresh) {
  make(true);
  const auto fw = rl->fixed_window("lane", redlimit::Limit::per_minute(10));
  std::vector<Got> first, second;
  consume_each(fw, {"a"}, first);
  held->run_posted();
  ASSERT_EQ(held->sent.size(), 1u);
  EXPECT_EQ(held->sent.front().argv.at(2), "1");
  consume_each(fw, {"b", "c"}, second);  // while the first is on its way: a turn of their own
  ASSERT_EQ(held->posted.size(), 1u);
  held->run_posted();
  ASSERT_EQ(held->sent.size(), 2u);
  EXPECT_EQ(held->sent.back().argv.at(2), "2");
  held->answer(decided({9}));
  held->answer(decided({9, 9}));
  EXPECT_EQ(first[0].calls, 1);
  EXPECT_EQ(second[0].calls + second[1].calls, 2);
}

TEST_F(AsyncLaneTest, AnErrorReplyIsEveryCallersErrorAndCountsOnceForEach) {
  make(true);
  const auto fw = rl->fixed_window("lane", redlimit::Limit::per_minute(10));
  std::vector<Got> got;
  consume_each(fw, {"a", "b"}, got);
  held->run_posted();
  held->answer(Reply::make_error("WRONGTYPE Operation against a key holding the wrong kind of value"));
  for (const auto& g : got) {
    EXPECT_EQ(g.calls, 1);
    EXPECT_NE(g.error.find("WRONGTYPE"), std::string::npos) << g.error;
  }
  EXPECT_EQ(rl->counters().errors, 2u);  // each consume_async a call of its own
}

TEST_F(AsyncLaneTest, ACallbackThatThrowsCostsTheOthersNothing) {
  make(true);
  const auto fw = rl->fixed_window("lane", redlimit::Limit::per_minute(10));
  int others = 0;
  fw.consume_async("a", 1, [](const Decision&, std::exception_ptr) { throw std::runtime_error("caller's bug"); });
  fw.consume_async("b", 1, [&others](const Decision& d, std::exception_ptr e) { others += (!e && d.allowed) ? 1 : 0; });
  fw.consume_async("c", 1, [&others](const Decision& d, std::exception_ptr e) { others += (!e && d.allowed) ? 1 : 0; });
  held->run_posted();
  held->answer(decided({9, 9, 9}));
  EXPECT_EQ(others, 2);
}

TEST_F(AsyncLaneTest, WithTheOptionOffEveryCallIsSentAtOnce) {
  make(false);
  const auto fw = rl->fixed_window("lane", redlimit::Limit::per_minute(10));
  std::vector<Got> got;
  consume_each(fw, {"a", "b", "a"}, got);
  EXPECT_TRUE(held->posted.empty());
  ASSERT_EQ(held->sent.size(), 3u);
  for (const auto& s : held->sent) EXPECT_EQ(s.argv.at(2), "1");
  for (long long r : {9LL, 9LL, 8LL}) held->answer(decided({r}));
  EXPECT_EQ(got[2].decision.remaining, 8);
}

}  // namespace
