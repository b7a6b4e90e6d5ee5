// The asynchronous API on libuv (fixture: async_fixture.hpp).
#include "integration/async_fixture.hpp"

namespace redlimit_test {
namespace {

#ifdef REDLIMIT_HAVE_LIBUV

TEST_F(AsyncTest, LibuvAdapterDecidesExactlyAndStopsCleanly) {
  constexpr int kCalls = 1000;
  constexpr std::int64_t kLimit = 100;
  LibuvLoop loop;
  auto tally = std::make_shared<Tally>(kCalls - 1);
  std::future<void> all_done = tally->all_done.get_future();
  {
    auto redis = loop.attach(redlimit::parse_url(server().unix_url()));  // over the unix socket
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto sl = rl.sliding_log("async.uv", Limit(kLimit, 1min));
    loop.start();
    auto first = sl.consume_future("v", 1);
    EXPECT_EQ(get_within(first).remaining, kLimit - 1);
    for (int i = 1; i < kCalls; ++i) {
      sl.consume_async("v", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
    }
    ASSERT_EQ(all_done.wait_for(60s), std::future_status::ready);
    std::lock_guard<std::mutex> lock(tally->mutex);
    EXPECT_TRUE(tally->errors.empty()) << tally->errors.front();
    EXPECT_EQ(tally->allowed, kLimit - 1);
    EXPECT_EQ(tally->rejected, kCalls - kLimit);
    EXPECT_EQ(tally->threads, std::set<std::thread::id>{loop.id()});
    EXPECT_EQ(redis->stats().connections, 1u);
  }
  loop.stop();  // uv_loop_close() == 0: every handle of ours was closed
}

// As on libevent (async_shared_test.cpp): calls made in callbacks wake the loop without a system
// call (an idle handle, where uv_async_send writes to an eventfd), and are decided exactly.
TEST_F(AsyncTest, LibuvCallsMadeInCallbacksWakeTheLoopWithoutASystemCall) {
  LibuvLoop loop;
  expect_chained_calls_wake_the_loop_once(loop, "chain.uv");  // loop.stop(): uv_loop_close() == 0
}

// As on libevent: a merged call's first half of callers has its next calls sent before the second
// half runs.
TEST_F(AsyncTest, LibuvMergedCallsFirstHalfSendsItsCallsBeforeTheSecondHalfRuns) {
  LibuvLoop loop;
  expect_the_first_halfs_calls_to_leave_before_the_second_half_runs(loop, "halves.uv");
}

// Dropping a connection (a deadline) and losing one (a server-side kill) with libuv, whose handles
// close asynchronously.
TEST_F(AsyncTest, LibuvAdapterSurvivesATimeoutAndAKill) {
  LibuvLoop loop;
  {
    AsyncOptions quick;
    quick.command_timeout = 300ms;
    auto redis = loop.attach(endpoint_of(server()), quick);
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.uv2", Limit::per_minute(10));
    fw.consume("warm-up");
    loop.start();
    auto blocked = command(*redis, {"BLPOP", "redlimit-test:never", "5"});
    EXPECT_THROW(get_within(blocked), redlimit::TimeoutError);

    auto id = command(*redis, {"CLIENT", "ID"});
    const Reply id_reply = get_within(id);
    ASSERT_EQ(id_reply.type, Reply::Type::integer);
    ASSERT_EQ(server().integer({"CLIENT", "KILL", "ID", std::to_string(id_reply.integer)}), 1);
    // The kill is seen when the loop reads EOF; a call racing with it may fail (its outcome is
    // unknown), but one of the next few must go through on a new connection.
    Decision d;
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto f = fw.consume_future("w");
      try {
        d = get_within(f);
        break;
      } catch (const redlimit::TimeoutError&) {
        throw;
      } catch (const redlimit::ConnectionError&) {
      }
    }
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(redis->stats().connections, 3u);
  }
  loop.stop();
}

#else  // not in this build

TEST(AsyncRedisBuild, LibuvFactoryThrowsWithoutLibuv) {
  EXPECT_FALSE(AsyncRedis::has_libuv());
  EXPECT_THROW(AsyncRedis::attach_libuv(nullptr, Endpoint{}), redlimit::Error);
}

#endif  // REDLIMIT_HAVE_LIBUV

}  // namespace
}  // namespace redlimit_test
