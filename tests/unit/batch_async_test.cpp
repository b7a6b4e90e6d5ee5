// consume_many_async's gathering of replies (detail::decide_many_async): a batch of two script
// calls answered by hand, in either order; a call lost in transit while the other is answered gets
// the failure policy for its own requests only; both lost is one failure of the whole send step;
// anything else than a transport error is delivered as the batch's error, once.
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

// The reply of one script call deciding `n` requests: each admitted, with 7 left.
Reply admitted(std::size_t n) {
  std::vector<Reply> ints;
  for (std::size_t i = 0; i < n; ++i) {
    for (long long v : {1LL, 7LL, 0LL, 1000LL, 0LL}) ints.push_back(Reply::make_integer(v));
  }
  return Reply::make_array(std::move(ints));
}

struct Outcome {
  int calls = 0;
  std::vector<Decision> decisions;
  std::string error;
};

class BatchAsync : public ::testing::Test {
 protected:
  void SetUp() override {
    held = std::make_shared<redlimit_test::HandAnswered>();
    held->set_script_path(redlimit::ScriptPath::evalsha);  // one command a call, nothing probed
    redlimit::Options o;
    o.on_failure = redlimit::OnFailure::fail_closed;
    rl.emplace(std::make_shared<::testing::StrictMock<MockConnection>>(), o);  // no sync command expected
    rl->attach_async(held);
  }

  // The held callbacks keep the batch, and through it the limiter, alive: dropped first.
  void TearDown() override {
    held->sent.clear();
    rl.reset();
  }

  // 300 requests: two script calls, of 256 and 44.
  void start(Outcome& out) {
    const auto fw = rl->fixed_window("b", redlimit::Limit::per_minute(10));
    std::vector<redlimit::Request> requests(300, redlimit::Request{"s", 1});
    fw.consume_many_async(requests, [&out](const std::vector<Decision>& ds, std::exception_ptr e) {
      ++out.calls;
      out.decisions = ds;
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          out.error = ex.what();
        }
      }
    });
    ASSERT_EQ(held->sent.size(), 2u) << "both calls queued before any reply";
  }

  std::shared_ptr<redlimit_test::HandAnswered> held;
  std::optional<redlimit::RateLimiter> rl;
};

TEST_F(BatchAsync, RepliesInAnyOrderAreDeliveredOnceInRequestOrder) {
  Outcome out;
  start(out);
  held->sent[1].on_reply(admitted(44));
  EXPECT_EQ(out.calls, 0) << "nothing delivered before the last reply";
  held->sent[0].on_reply(admitted(256));
  ASSERT_EQ(out.calls, 1);
  EXPECT_TRUE(out.error.empty()) << out.error;
  ASSERT_EQ(out.decisions.size(), 300u);
  for (const auto& d : out.decisions) {
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 7);
    EXPECT_EQ(d.source, redlimit::Source::primary);
  }
  EXPECT_EQ(rl->counters().decisions, 300u);
}

TEST_F(BatchAsync, ACallLostInTransitGetsTheFailurePolicyForItsOwnRequestsOnly) {
  Outcome out;
  start(out);
  held->sent[0].on_error(std::make_exception_ptr(redlimit::TimeoutError("no reply within 1000 ms")));
  held->sent[1].on_reply(admitted(44));
  ASSERT_EQ(out.calls, 1);
  EXPECT_TRUE(out.error.empty()) << out.error;
  ASSERT_EQ(out.decisions.size(), 300u);
  for (std::size_t i = 0; i < 300; ++i) {
    const bool lost = i < 256;
    EXPECT_EQ(out.decisions[i].source, lost ? redlimit::Source::failure_policy : redlimit::Source::primary) << i;
    EXPECT_EQ(out.decisions[i].allowed, !lost) << i;  // fail_closed for the lost call's requests
  }
  EXPECT_EQ(rl->counters().from_failure_policy, 256u);
}

TEST_F(BatchAsync, EveryCallLostIsOneFailureOfTheWholeSend) {
  Outcome out;
  start(out);
  held->sent[1].on_error(std::make_exception_ptr(redlimit::ConnectionError("reset by peer")));
  held->sent[0].on_error(std::make_exception_ptr(redlimit::ConnectionError("reset by peer")));
  ASSERT_EQ(out.calls, 1);
  EXPECT_TRUE(out.error.empty()) << out.error;
  ASSERT_EQ(out.decisions.size(), 300u);
  for (const auto& d : out.decisions) {
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.source, redlimit::Source::failure_policy);
  }
  const auto c = rl->counters();
  EXPECT_EQ(c.errors, 1u) << "one failed send, as consume_many counts it";
  EXPECT_EQ(c.from_failure_policy, 300u);
}

TEST_F(BatchAsync, AnErrorThatIsNotATransportFailureIsTheBatchsErrorDeliveredOnce) {
  Outcome out;
  start(out);
  held->sent[0].on_error(std::make_exception_ptr(std::runtime_error("callback machinery broke")));
  EXPECT_EQ(out.calls, 0);
  held->sent[1].on_reply(admitted(44));
  ASSERT_EQ(out.calls, 1);
  EXPECT_EQ(out.error, "callback machinery broke");
  EXPECT_TRUE(out.decisions.empty());
}

}  // namespace
