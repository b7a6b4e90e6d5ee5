// Options::share_script_calls over AsyncRedis on libevent (detail/async_lane.hpp): the consume_async
// calls of one strategy made in the same turn of the loop go as one script call, decided in the
// order they were made, each callback with its own decision; with the option off, a call each; and
// a merged call that cannot reach Redis gets the failure policy for every caller; calls made in
// callbacks wake the loop without a system call (fixture: async_fixture.hpp).
#include "integration/async_fixture.hpp"

namespace redlimit_test {
namespace {

#ifdef REDLIMIT_HAVE_LIBEVENT

// What `n` callbacks were given, in the order of the calls, once all have run.
struct Outcomes {
  explicit Outcomes(int n) : decisions(static_cast<std::size_t>(n)), errors(static_cast<std::size_t>(n)), left(n) {}
  std::vector<Decision> decisions;
  std::vector<std::exception_ptr> errors;
  std::set<std::thread::id> threads;
  std::mutex mutex;
  int left;
  std::promise<void> all;
};

// `n` consume_async calls of `subject`, all made inside one task on the loop's thread: one turn.
std::shared_ptr<Outcomes> one_turn(redlimit::AsyncRedis& redis, const redlimit::Strategy& s, const std::string& subject,
                                   int n) {
  auto out = std::make_shared<Outcomes>(n);
  redis.post([&s, subject, n, out] {
    for (int i = 0; i < n; ++i) {
      s.consume_async(subject, 1, [out, i](const Decision& d, std::exception_ptr e) {
        std::lock_guard<std::mutex> lock(out->mutex);
        out->decisions[static_cast<std::size_t>(i)] = d;
        out->errors[static_cast<std::size_t>(i)] = e;
        out->threads.insert(std::this_thread::get_id());
        if (--out->left == 0) out->all.set_value();
      });
    }
  });
  auto all = out->all.get_future();
  if (all.wait_for(kWait) != std::future_status::ready) throw std::runtime_error("timed out waiting for the callbacks");
  return out;
}

// 200 calls of one hot subject in one turn, limit 50: one script call; the first 50 admitted with
// 49, 48 ... 0 left, the other 150 rejected until the window ends; the same decisions, one call
// each, with the option off.
TEST_F(AsyncTest, CallsOfOneLoopTurnGoAsOneScriptCallDecidedInOrder) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    redlimit::Options unshared = options();
    unshared.share_script_calls = false;
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    auto rl_unshared = redlimit::RateLimiter::connect(server().url(), unshared);
    rl.attach_async(redis);
    rl_unshared.attach_async(redis);
    const auto shared_fw = rl.fixed_window("turn.shared", Limit(50, 1min));
    const auto unshared_fw = rl_unshared.fixed_window("turn.unshared", Limit(50, 1min));
    loop.start();
    auto warm = shared_fw.consume_future("warm-up");  // settles the script path (FUNCTION LOAD)
    EXPECT_TRUE(get_within(warm).allowed);

    for (const bool shared : {true, false}) {
      const auto before = redis->stats().commands;
      const auto out = one_turn(*redis, shared ? shared_fw : unshared_fw, "hot", 200);
      EXPECT_EQ(redis->stats().commands - before, shared ? 1u : 200u) << "shared: " << shared;
      for (std::size_t i = 0; i < 200; ++i) {
        ASSERT_FALSE(out->errors[i]) << i;
        const Decision& d = out->decisions[i];
        EXPECT_EQ(d.allowed, i < 50) << i;
        EXPECT_EQ(d.remaining, i < 50 ? 49 - static_cast<std::int64_t>(i) : 0) << i;
        EXPECT_EQ(d.retry_after > 0us, i >= 50) << i;
        EXPECT_EQ(d.source, Source::primary) << i;
      }
      EXPECT_EQ(out->threads, std::set<std::thread::id>{loop.id()});
    }
    EXPECT_EQ(rl.counters().decisions, 201u);
    EXPECT_EQ(shared_fw.peek("hot").remaining, 0);
  }
  loop.stop();
}

// A merged call to a server that refuses the connection: every caller gets the failure policy's
// decision (fail_open), and the failure is counted once per caller: each consume_async is a call.
TEST_F(AsyncTest, AMergedCallThatCannotReachRedisGetsTheFailurePolicyForEveryCaller) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(refusing_endpoint(server()));  // refused at once, every time
    redlimit::Options o = options();
    o.on_failure = redlimit::OnFailure::fail_open;
    auto rl = redlimit::RateLimiter::connect(server().url(), o);
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("turn.down", Limit(1, 1min));
    loop.start();
    const auto out = one_turn(*redis, fw, "x", 40);
    for (std::size_t i = 0; i < 40; ++i) {
      EXPECT_FALSE(out->errors[i]) << i;
      EXPECT_TRUE(out->decisions[i].allowed) << i;
      EXPECT_EQ(out->decisions[i].source, Source::failure_policy) << i;
    }
    const auto c = rl.counters();
    EXPECT_EQ(c.errors, 40u);
    EXPECT_EQ(c.from_failure_policy, 40u);
  }
  loop.stop();
}

// Calls made in callbacks wake the loop without its wake-up pipe (event_active), and are decided
// exactly (fixture: expect_chained_calls_wake_the_loop_once).
TEST_F(AsyncTest, CallsMadeInCallbacksWakeTheLoopWithoutASystemCall) {
  LibeventLoop loop;
  expect_chained_calls_wake_the_loop_once(loop, "chain");
}

// A merged call's first half of callers has its next calls sent before the second half runs
// (AsyncConnection::send_now; fixture: expect_the_first_halfs_calls_to_leave_before_the_second_half_runs).
TEST_F(AsyncTest, AMergedCallsFirstHalfSendsItsCallsBeforeTheSecondHalfRuns) {
  LibeventLoop loop;
  expect_the_first_halfs_calls_to_leave_before_the_second_half_runs(loop, "halves");
}

#endif  // REDLIMIT_HAVE_LIBEVENT

}  // namespace
}  // namespace redlimit_test
