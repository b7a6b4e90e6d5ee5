// A connection that breaks under load (issue 18, items 1 and 2), on both loops: every call ends in
// exactly one callback, a decision or an error, whatever the options; the broken connection fails
// its in-flight calls at once (not at a deadline) and the next calls reconnect. Each test prints
// what it measured (fixture: async_fixture.hpp).
#include <cstdio>

#include "integration/async_fixture.hpp"

namespace redlimit_test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kLoad = 20000;  // calls in flight when the connection breaks

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

class AsyncBreakTest : public AsyncTest {
 protected:
  // No breaker: after the break, the next call must go to Redis (not be short-circuited).
  redlimit::Options no_breaker() const {
    redlimit::Options o = call_each();
    o.breaker_threshold = 0;
    return o;
  }

  // Waits (bounded) until hiredis has been handed `n` commands: the load is on the wire.
  static void wait_handed(const AsyncRedis& redis, std::uint64_t n) {
    const auto deadline = Clock::now() + kWait;
    while (redis.stats().commands < n) {
      ASSERT_LT(Clock::now(), deadline) << "the calls were never handed to hiredis";
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // kLoad consumes in flight on `loop`, then the server kills the connection. Every callback must
  // run within `bound`, exactly once, and the next call must be decided on a new connection.
  template <class Loop>
  void kill_under_load(const char* name, AsyncOptions o, std::chrono::milliseconds bound) {
    Loop loop;
    auto tally = std::make_shared<Tally>(kLoad);
    std::future<void> all_done = tally->all_done.get_future();
    {
      auto redis = loop.attach(endpoint_of(server()), o);
      auto rl = redlimit::RateLimiter::connect(server().url(), no_breaker());
      rl.attach_async(redis);
      const auto fw = rl.fixed_window("async.break", Limit::per_minute(1000000));
      loop.start();
      auto id = command(*redis, {"CLIENT", "ID"});
      const Reply id_reply = get_within(id);
      ASSERT_EQ(id_reply.type, Reply::Type::integer);
      for (int i = 0; i < kLoad; ++i) {
        fw.consume_async("k", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
      }
      wait_handed(*redis, 2000);
      ASSERT_EQ(server().integer({"CLIENT", "KILL", "ID", std::to_string(id_reply.integer)}), 1);
      const auto killed_at = Clock::now();
      const bool ended = all_done.wait_for(bound) == std::future_status::ready;
      const double ms = ms_since(killed_at);
      std::this_thread::sleep_for(100ms);  // a callback run twice would show now
      std::lock_guard<std::mutex> lock(tally->mutex);
      std::printf("[ figures ] %s: CLIENT KILL under %d calls: %d callbacks (%zu errors) %s %.0f ms after the kill\n",
                  name, kLoad, tally->done, tally->errors.size(), ended ? "all ran within" : "NOT all ran in", ms);
      ASSERT_TRUE(ended) << tally->done << " of " << kLoad << " callbacks ran within " << bound.count() << " ms";
      EXPECT_EQ(tally->done, kLoad) << "a callback ran twice";
      EXPECT_EQ(tally->allowed + tally->rejected + static_cast<int>(tally->errors.size()), kLoad);
      auto next = fw.consume_future("k");
      EXPECT_TRUE(get_within(next).allowed);
      EXPECT_GE(redis->stats().connections, 2u);
    }
    loop.stop();
  }

  // kLoad consumes in flight, then the server goes away for good: every call must fail within
  // `bound`, long before the connect / command deadlines (`o`) could have failed them in rounds.
  template <class Loop>
  void server_down_under_load(const char* name, AsyncOptions o, std::chrono::milliseconds bound) {
    RedisServer doomed;
    Loop loop;
    auto tally = std::make_shared<Tally>(kLoad);
    std::future<void> all_done = tally->all_done.get_future();
    {
      auto redis = loop.attach(endpoint_of(doomed), o);
      auto rl = redlimit::RateLimiter::connect(doomed.url(), no_breaker());
      rl.attach_async(redis);
      const auto fw = rl.fixed_window("async.down", Limit::per_minute(1000000));
      loop.start();
      for (int i = 0; i < kLoad; ++i) {
        fw.consume_async("k", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
      }
      wait_handed(*redis, 2000);
      int done_at_stop = 0;
      {
        std::lock_guard<std::mutex> lock(tally->mutex);
        done_at_stop = tally->done;
      }
      // SIGKILL: a SIGTERMed Redis goes on answering until its next cron tick, and may answer
      // every call still in flight before it goes (seen on a loaded box), leaving nothing to fail.
      doomed.kill();
      const auto stopped_at = Clock::now();
      const bool ended = all_done.wait_for(bound) == std::future_status::ready;
      const double ms = ms_since(stopped_at);
      std::this_thread::sleep_for(100ms);
      std::lock_guard<std::mutex> lock(tally->mutex);
      std::printf("[ figures ] %s: server stopped under %d calls: %d callbacks (%zu errors) %s %.0f ms after the stop,"
                  " %llu connections\n",
                  name, kLoad, tally->done, tally->errors.size(), ended ? "all ran within" : "NOT all ran in", ms,
                  static_cast<unsigned long long>(redis->stats().connections));
      ASSERT_TRUE(ended) << tally->done << " of " << kLoad << " callbacks ran within " << bound.count() << " ms";
      EXPECT_EQ(tally->done, kLoad) << "a callback ran twice";
      // A slow client (a sanitizer build) may see the server answer every call before it stops:
      // then there was nothing in flight to fail. With half the calls or more unanswered at the
      // stop, the break must show as errors.
      if (done_at_stop < kLoad / 2) EXPECT_FALSE(tally->errors.empty());
    }
    loop.stop();
  }
};

AsyncOptions no_deadline() {
  AsyncOptions o;
  o.command_timeout = 0ms;  // documented "no deadline": only the break itself can end the calls
  return o;
}

// Deadlines long enough that only noticing the break at once passes the bound (kBeforeDeadline).
// Running 20,000 callbacks takes time of its own: under TSan on a slow 2-core machine, 16,626 of
// them ran in the first 2.5 s after a kill, so the bound is 7.5 s and the deadlines 10 s.
AsyncOptions long_deadlines() {
  AsyncOptions o;
  o.connect_timeout = 10s;
  o.command_timeout = 10s;
  return o;
}
constexpr auto kBeforeDeadline = 7500ms;

#ifdef REDLIMIT_HAVE_LIBEVENT
TEST_F(AsyncBreakTest, LibeventKillWithoutDeadlineRunsEveryCallbackOnce) {
  kill_under_load<LibeventLoop>("libevent", no_deadline(), 5000ms);
}
TEST_F(AsyncBreakTest, LibeventKillFailsInFlightCallsBeforeTheDeadline) {
  kill_under_load<LibeventLoop>("libevent", long_deadlines(), kBeforeDeadline);
}
TEST_F(AsyncBreakTest, LibeventServerDownFailsEveryCallAtOnce) {
  server_down_under_load<LibeventLoop>("libevent", long_deadlines(), kBeforeDeadline);
}
#endif

#ifdef REDLIMIT_HAVE_LIBUV
TEST_F(AsyncBreakTest, LibuvKillWithoutDeadlineRunsEveryCallbackOnce) {
  kill_under_load<LibuvLoop>("libuv", no_deadline(), 5000ms);
}
TEST_F(AsyncBreakTest, LibuvKillFailsInFlightCallsBeforeTheDeadline) {
  kill_under_load<LibuvLoop>("libuv", long_deadlines(), kBeforeDeadline);
}
TEST_F(AsyncBreakTest, LibuvServerDownFailsEveryCallAtOnce) {
  server_down_under_load<LibuvLoop>("libuv", long_deadlines(), kBeforeDeadline);
}
#endif

}  // namespace
}  // namespace redlimit_test
