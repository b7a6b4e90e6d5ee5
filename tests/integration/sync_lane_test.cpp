// Shared script calls for consume() from many threads (Options::share_script_calls,
// detail/sync_lane.hpp), against a real server: every strategy stays exact on a hot subject under
// 16 threads while the threads' calls share FCALLs; many subjects get the same decisions as calls
// made one by one; a caller whose request shares a call with a bad key's gets that call's error; and
// with the option off every consume is a script call of its own. Every key keeps a TTL
// (StrictRedisTest).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::Limit;
using redlimit::Strategy;

class SyncLaneTest : public StrictRedisTest {
 protected:
  // `threads` threads each run `each` consumes of `subject_of(thread, i)` on `s`; returns the
  // admissions. Any exception fails the test.
  long long hammer(const Strategy& s, int threads, int each, const std::function<std::string(int, int)>& subject_of) {
    std::atomic<long long> admitted{0};
    std::atomic<int> failures{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        for (int i = 0; i < each; ++i) {
          try {
            admitted += s.consume(subject_of(t, i)).allowed ? 1 : 0;
          } catch (const std::exception&) {
            ++failures;
          }
        }
      });
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(failures, 0);
    return admitted;
  }

  std::int64_t script_calls() { return command_calls("fcall") + command_calls("evalsha") + command_calls("eval"); }
};

TEST_F(SyncLaneTest, SixteenThreadsOnAHotSubjectAreExactForEveryStrategyAndShareScriptCalls) {
  constexpr int kThreads = 16;
  constexpr int kEach = 250;
  constexpr std::int64_t kLimit = 1500;  // of 4,000 requests: the clock holds still, nothing refills
  const Limit limit = Limit::per_hour(kLimit);
  const std::vector<std::pair<std::string, Strategy>> strategies = {
      {"fixed window", rl().fixed_window("lane-fw", limit)},
      {"sliding log", rl().sliding_log("lane-sl", limit)},
      {"sliding window", rl().sliding_window("lane-sw", limit)},
      {"token bucket", rl().token_bucket("lane-tb", kLimit, 1, std::chrono::hours(1))},
      {"leaky bucket", rl().leaky_bucket("lane-lb", kLimit, Limit::per_hour(1))},
      {"policy", rl().policy("lane-pol", {limit, Limit::per_minute(kLimit * 2)})},
  };
  for (const auto& [name, s] : strategies) {
    server().command({"CONFIG", "RESETSTAT"});
    const long long admitted = hammer(s, kThreads, kEach, [](int, int) { return std::string("hot"); });
    const std::int64_t calls = script_calls();
    std::printf("[ figures ] %s: %d threads x %d consumes of one subject: %lld admitted, %lld script calls\n",
                name.c_str(), kThreads, kEach, admitted, static_cast<long long>(calls));
    EXPECT_EQ(admitted, kLimit) << name;
    EXPECT_EQ(s.peek("hot").remaining, 0) << name;
    // Some calls waited for others and went with them: fewer script calls than consumes.
    EXPECT_LT(calls, kThreads * kEach) << name;
    EXPECT_GT(calls, 0) << name;
  }
}

TEST_F(SyncLaneTest, ManySubjectsGetWhatTheSameCallsOneByOneGet) {
  // 8 threads, each consuming subjects 0..39 in its own order, 10 times over: every subject gets
  // 80 requests at limit 25. Any order of them admits exactly 25 each, as one thread would.
  constexpr int kThreads = 8;
  constexpr int kSubjects = 40;
  const auto tb = rl().token_bucket("lane-many", 25, 1, std::chrono::hours(1));
  const long long admitted = hammer(tb, kThreads, kSubjects * 10, [](int t, int i) {
    return "s" + std::to_string((i * (2 * t + 1) + t) % kSubjects);
  });
  EXPECT_EQ(admitted, 25LL * kSubjects);
  for (int s = 0; s < kSubjects; ++s) EXPECT_EQ(tb.peek("s" + std::to_string(s)).remaining, 0) << s;
}

TEST_F(SyncLaneTest, WithTheOptionOffEachConsumeIsAScriptCallOfItsOwn) {
  redlimit::Options o = options();
  o.share_script_calls = false;
  const auto own = redlimit::RateLimiter::connect(server().url(), o);
  const auto fw = own.fixed_window("lane-off", Limit::per_hour(100000));
  fw.consume("warm");  // loads the library
  server().command({"CONFIG", "RESETSTAT"});
  EXPECT_EQ(hammer(fw, 8, 100, [](int t, int) { return "u" + std::to_string(t); }), 800);
  EXPECT_EQ(script_calls(), 800);
}

TEST_F(SyncLaneTest, AKeyOfAnotherTypeUnderOneSubjectFailsNoSharedCall) {
  // A string that is not a redlimit state under one subject's hash key (lua/epilogue.lua, foreign
  // keys): read as no state and replaced by the first write, so neither that subject's consumes nor
  // those that share its script calls fail. Earlier, each shared call it was in failed whole.
  const auto sw = rl().sliding_window("lane-bad", Limit::per_hour(100000));
  server().command({"SET", sw.key_for("bad"), "not a hash"});
  server().command({"PEXPIRE", sw.key_for("bad"), "600000"});
  std::atomic<int> failed{0}, admitted{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        try {
          if (sw.consume(t == 0 ? "bad" : "good" + std::to_string(t)).allowed) ++admitted;
        } catch (const redlimit::ReplyError&) {
          ++failed;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(admitted, 800);
  EXPECT_EQ(rl().counters().errors, 0u);
  EXPECT_EQ(server().command({"TYPE", sw.key_for("bad")}).str, "hash");
  EXPECT_EQ(sw.peek("bad").remaining, 100000 - 100);
}

}  // namespace
}  // namespace redlimit_test
