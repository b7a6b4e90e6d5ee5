// NOSCRIPT under load (issue 18, item 4): after SCRIPT FLUSH (or a restart), thousands of async calls
// in flight meet NOSCRIPT at once. One SCRIPT LOAD per connection must serve them all, instead of
// each sending the whole script as EVAL (fixture: async_fixture.hpp).
#include <cstdio>

#include "integration/async_fixture.hpp"

namespace redlimit_test {
namespace {

using Clock = std::chrono::steady_clock;

class AsyncNoscriptTest : public AsyncTest {
 protected:
  // `calls` consumes against a limit of `limit`, sent after SCRIPT FLUSH: counts the script bodies
  // sent (EVAL and SCRIPT LOAD), checks every callback ran once and exactly `limit` were admitted.
  template <class Loop>
  void flush_under_load(const char* name, int calls, std::int64_t limit) {
    Loop loop;
    auto tally = std::make_shared<Tally>(calls);
    std::future<void> all_done = tally->all_done.get_future();
    {
      // Every call's deadline runs from when it is queued, and all are queued before the loop runs:
      // a loaded box may take longer than the default 1 s for the last of 20,000. This test is about
      // the reload; the deadlines have their own (async_deadline_test.cpp).
      AsyncOptions patient;
      patient.command_timeout = 30s;
      auto redis = loop.attach(endpoint_of(server()), patient);
      auto rl = redlimit::RateLimiter::connect(server().url(), options());
      rl.attach_async(redis);
      const auto fw = rl.fixed_window("async.storm", Limit::per_minute(limit));
      fw.peek("warm-up");  // loads the script: the flush below is what empties the cache
      ASSERT_EQ(server().command({"SCRIPT", "FLUSH"}).type, Reply::Type::status);
      ASSERT_EQ(server().command({"CONFIG", "RESETSTAT"}).type, Reply::Type::status);
      const auto t0 = Clock::now();
      // Queued before the loop runs: the first max_in_flight EVALSHAs go out in one pipeline, and
      // every one of them meets NOSCRIPT before the first reply can start a reload.
      for (int i = 0; i < calls; ++i) {
        fw.consume_async("s", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
      }
      loop.start();
      ASSERT_EQ(all_done.wait_for(kWait), std::future_status::ready) << tally->done << " of " << calls;
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      std::this_thread::sleep_for(50ms);  // a callback run twice would show now
      const auto evals = command_calls("eval");
      const auto loads = command_calls("script|load");
      const auto shas = command_calls("evalsha");
      std::printf("[ figures ] %s: %d calls after SCRIPT FLUSH: %lld EVAL, %lld SCRIPT LOAD, %lld EVALSHA, %.0f ms\n",
                  name, calls, static_cast<long long>(evals), static_cast<long long>(loads),
                  static_cast<long long>(shas), ms);
      std::lock_guard<std::mutex> lock(tally->mutex);
      EXPECT_EQ(tally->done, calls);
      EXPECT_TRUE(tally->errors.empty()) << tally->errors.front();
      EXPECT_EQ(tally->allowed, limit);
      EXPECT_EQ(tally->rejected, calls - limit);
      EXPECT_LE(evals + loads, 3) << "one reload must serve every waiting call";
      EXPECT_GE(loads, 1);
    }
    loop.stop();
  }
};

#ifdef REDLIMIT_HAVE_LIBEVENT
TEST_F(AsyncNoscriptTest, LibeventOneReloadServes20000CallsAfterScriptFlush) {
  flush_under_load<LibeventLoop>("libevent", 20000, 1000);
}
#endif

#ifdef REDLIMIT_HAVE_LIBUV
TEST_F(AsyncNoscriptTest, LibuvOneReloadServes20000CallsAfterScriptFlush) {
  flush_under_load<LibuvLoop>("libuv", 20000, 1000);
}
#endif

}  // namespace
}  // namespace redlimit_test
