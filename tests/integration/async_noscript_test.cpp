// NOSCRIPT under load (issue 18, item 4): after SCRIPT FLUSH (or a restart), thousands of async calls
// in flight meet NOSCRIPT at once. One SCRIPT LOAD per connection must serve them all, instead of
// each sending the whole script as EVAL (fixture: async_fixture.hpp). The same for Redis Functions
// (issue 13): after FUNCTION FLUSH, one FUNCTION LOAD serves every call that met "Function not
// found", and none falls back to EVALSHA or EVAL.
#include <cstdio>

#include "integration/async_fixture.hpp"

using redlimit::ScriptPath;

namespace redlimit_test {
namespace {

using Clock = std::chrono::steady_clock;

class AsyncNoscriptTest : public AsyncTest {
 protected:
  // `calls` consumes against a limit of `limit`, sent after SCRIPT FLUSH: counts the script bodies
  // sent (EVAL and SCRIPT LOAD), checks every callback ran once and exactly `limit` were admitted.
  // The EVALSHA path (Options::redis_functions = false) after SCRIPT FLUSH, or the Functions path
  // after FUNCTION FLUSH.
  template <class Loop>
  void flush_under_load(const char* name, int calls, std::int64_t limit, bool functions = false) {
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
      redlimit::Options opts = options();
      opts.redis_functions = functions;
      auto rl = redlimit::RateLimiter::connect(server().url(), opts);
      rl.attach_async(redis);
      const auto fw = rl.fixed_window("async.storm", Limit::per_minute(limit));
      fw.peek("warm-up");  // loads the script or the library: the flush below is what empties the cache
      const ScriptPath settled = functions ? ScriptPath::functions : ScriptPath::evalsha;
      EXPECT_EQ(rl.health().scripts, settled);
      ASSERT_EQ(server().command({functions ? "FUNCTION" : "SCRIPT", "FLUSH"}).type, Reply::Type::status);
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
      const auto shas = command_calls("evalsha");
      const auto loads = command_calls(functions ? "function|load" : "script|load");
      const auto fcalls = command_calls("fcall");
      std::printf("[ figures ] %s: %d calls after %s FLUSH: %lld EVAL, %lld LOAD, %lld EVALSHA, %lld FCALL, %.0f ms\n",
                  name, calls, functions ? "FUNCTION" : "SCRIPT", static_cast<long long>(evals),
                  static_cast<long long>(loads), static_cast<long long>(shas), static_cast<long long>(fcalls), ms);
      EXPECT_EQ(rl.health().async_scripts, settled);
      if (functions) {
        EXPECT_EQ(evals + shas, 0) << "the Functions path must not fall back after a flush";
        EXPECT_EQ(loads, 1);
      }
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

#ifdef REDLIMIT_HAVE_LIBEVENT
TEST_F(AsyncNoscriptTest, LibeventOneLibraryLoadServes20000CallsAfterFunctionFlush) {
  flush_under_load<LibeventLoop>("libevent", 20000, 1000, true);
}
#endif

#ifdef REDLIMIT_HAVE_LIBEVENT
// An async connection attached to a limiter starts from what the limiter's connection learned of
// the server: before 7.0, the EVALSHA path of the scripts' legacy text, before its first call
// (rather than learn it from a refused FCALL and a refused shebang); on 7.0 and later it probes
// Functions with its first call, as the limiter's did.
TEST_F(AsyncNoscriptTest, AnAttachedConnectionStartsFromWhatTheLimiterLearnedOfTheServer) {
  LibeventLoop loop;
  {
    const bool before_7 = server().major_version() < 7;
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    const auto fw = rl.fixed_window("attach.learned", Limit::per_minute(3));
    EXPECT_EQ(fw.consume("s").remaining, 2);  // the limiter's connection settles
    EXPECT_EQ(rl.health().scripts, before_7 ? ScriptPath::evalsha : ScriptPath::functions);
    rl.attach_async(loop.attach(endpoint_of(server())));
    EXPECT_EQ(rl.health().async_scripts, before_7 ? ScriptPath::evalsha : ScriptPath::probe);
    loop.start();
    auto f = fw.consume_future("s");
    EXPECT_EQ(get_within(f).remaining, 1);
    EXPECT_EQ(rl.health().async_scripts, before_7 ? ScriptPath::evalsha : ScriptPath::functions);
  }
  loop.stop();
}
#endif

}  // namespace
}  // namespace redlimit_test
