// Options::share_script_calls for consume() from many threads (detail/sync_lane.hpp), against a
// connection that holds each script call until the test lets it through: with
// Options::shared_call_flights at 2, a call made while two are on their way waits, and the calls
// queued meanwhile go as one script call, in the order they came, at the time they are sent, under
// the deadline of the oldest; each caller gets its own decision.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/rate_limiter.hpp"
#include "redlimit/transport/connection.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Reply;

// Answers every EVALSHA with one admitted fixed-window decision per request, its `remaining` the
// number the subject ends with ("u7" -> 7), after the test opens the gate for it.
class GateConnection final : public redlimit::Connection {
 public:
  bool thread_safe() const override { return true; }
  void begin_call(std::chrono::steady_clock::time_point started) override {
    std::lock_guard<std::mutex> l(m_);
    starts.push_back(started);
  }

  Reply command(const std::vector<std::string>& argv) override {
    std::unique_lock<std::mutex> l(m_);
    commands.push_back(argv);
    changed_.notify_all();
    changed_.wait(l, [&] { return passes_ > 0; });
    --passes_;
    std::vector<Reply> ints;
    const std::size_t keys = std::stoul(argv[2]);
    if (fail_shared && keys > 1) return Reply::make_error("ERR a shared call's error");
    for (std::size_t k = 3; k < 3 + keys; ++k) {  // a fixed window's request sends one key
      const std::string& key = argv[k];           // redlimit:{gate|u7}:fw
      const auto from = key.find("|u") + 2;
      const long long n = std::stoll(key.substr(from, key.find('}') - from));
      for (long long v : {1LL, n, 0LL, 1000LL, 0LL}) ints.push_back(Reply::make_integer(v));
    }
    return Reply::make_array(std::move(ints));
  }

  // Lets one held (or the next) command through.
  void pass() {
    std::lock_guard<std::mutex> l(m_);
    ++passes_;
    changed_.notify_all();
  }
  // Waits until `n` commands have arrived.
  void wait_for_commands(std::size_t n) {
    std::unique_lock<std::mutex> l(m_);
    changed_.wait(l, [&] { return commands.size() >= n; });
  }

  std::vector<std::vector<std::string>> commands;  // read once the threads are joined
  std::vector<std::chrono::steady_clock::time_point> starts;
  bool fail_shared = false;  // answer a call of more than one request with an error reply

 private:
  std::mutex m_;
  std::condition_variable changed_;
  int passes_ = 0;
};

// A clock that counts its readings: a caller reads it (its ARGV[1]) just before it queues.
class CountingClock final : public redlimit::Clock {
 public:
  redlimit::Micros now() const override {
    ++readings;
    return redlimit::Micros{at.load()};
  }
  void sleep_for(redlimit::Micros) override {}
  mutable std::atomic<int> readings{0};
  std::atomic<long long> at{1'700'000'000'000'000};
};

// Keeps every MetricsEvent: the decision's remaining (the subject's number) or -1 for an error,
// and the latency.
class Events final : public redlimit::MetricsSink {
 public:
  void on_event(const redlimit::MetricsEvent& e) noexcept override {
    std::lock_guard<std::mutex> l(m_);
    got.emplace_back(e.decision != nullptr ? e.decision->remaining : -1, e.latency);
  }
  std::vector<std::pair<std::int64_t, std::chrono::nanoseconds>> got;  // read once the threads are joined

 private:
  std::mutex m_;
};

class SyncLaneTest : public ::testing::Test {
 protected:
  // `buckets`: a sliding window of that many one-second buckets instead of the fixed window.
  void make(bool share, int buckets = 0) {
    gate = std::make_shared<GateConnection>();
    gate->set_script_path(redlimit::ScriptPath::evalsha);  // one command a call, nothing probed
    clock = std::make_shared<CountingClock>();
    redlimit::Options o;
    o.clock = clock;
    o.share_script_calls = share;
    o.shared_call_flights = 2;  // two calls out at once, then the others wait
    events = std::make_shared<Events>();
    thrown = 0;
    o.metrics = events;
    rl = std::make_unique<redlimit::RateLimiter>(gate, o);
    fixed.reset();
    sliding.reset();
    if (buckets == 0) {
      fixed = std::make_unique<redlimit::FixedWindow>(rl->fixed_window("gate", redlimit::Limit::per_hour(100)));
      fw = fixed.get();
    } else {
      sliding = std::make_unique<redlimit::SlidingWindow>(
          rl->sliding_window("gate", redlimit::Limit(100, std::chrono::seconds(buckets)), std::chrono::seconds(1)));
      fw = sliding.get();
    }
  }

  // Starts a thread consuming `subject` into `out` (a ReplyError counted in `thrown`), and returns
  // once it has read the clock (the last thing it does before it queues) and then gone to sleep:
  // queued behind the calls on their way, or held in the gate. Sleeping is waited for, not assumed
  // after a fixed pause: on a loaded machine (CI runs these under ASan beside other tests) a thread
  // that has read the clock may not run again for a long while, and a later thread would queue first.
  std::thread start(const std::string& subject, Decision& out) {
    const int before = clock->readings.load();
    struct Seen {
      std::atomic<pid_t> tid{0};
      std::atomic<bool> returned{false};
    };
    const auto seen = std::make_shared<Seen>();  // the thread may outlive this frame
    std::thread t([this, subject, &out, seen] {
      seen->tid = static_cast<pid_t>(::syscall(SYS_gettid));
      try {
        out = fw->consume(subject);
      } catch (const redlimit::ReplyError&) {
        ++thrown;
      }
      seen->returned = true;
    });
    while (clock->readings.load() == before || seen->tid.load() == 0) std::this_thread::sleep_for(1ms);
    // Asleep twice, 20 ms apart: the lane's mutex is held for a few instructions at a time, the
    // wait for a turn (or for the gate) until the test moves. A call that returned is not waited for.
    for (int asleep = 0; asleep < 2 && !seen->returned.load(); asleep = sleeping(seen->tid.load()) ? asleep + 1 : 0) {
      std::this_thread::sleep_for(20ms);
    }
    return t;
  }

  // True when thread `tid` of this process is blocked (state S or D in /proc/self/task/TID/stat).
  static bool sleeping(pid_t tid) {
    std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto paren = line.rfind(')');  // the name in parentheses may hold spaces
    return paren != std::string::npos && paren + 2 < line.size() &&
           (line[paren + 2] == 'S' || line[paren + 2] == 'D');
  }

  std::shared_ptr<GateConnection> gate;
  std::shared_ptr<CountingClock> clock;
  std::shared_ptr<Events> events;
  std::atomic<int> thrown{0};  // consume() calls that ended in a ReplyError
  std::unique_ptr<redlimit::RateLimiter> rl;
  // One strategy object (its copies share its lane): `fixed` or `sliding`, each deleted as what it
  // is (Strategy's destructor is not virtual).
  std::unique_ptr<redlimit::FixedWindow> fixed;
  std::unique_ptr<redlimit::SlidingWindow> sliding;
  const redlimit::Strategy* fw = nullptr;
};

TEST_F(SyncLaneTest, CallsMadeWhileTwoAreOnTheirWayGoTogetherInOrderAtTheTimeTheyAreSent) {
  make(true);
  Decision a, b, c, d, e;
  std::thread ta = start("u1", a);
  gate->wait_for_commands(1);  // u1 alone, held
  std::thread tb = start("u2", b);
  gate->wait_for_commands(2);  // u2 alone too: two calls may be on their way at once
  const auto queued_from = std::chrono::steady_clock::now();
  std::thread tc = start("u3", c);
  const auto after_u3 = std::chrono::steady_clock::now();
  std::thread td = start("u4", d);
  std::thread te = start("u5", e);
  clock->at += 5'000'000;                    // five seconds pass before the shared call goes
  for (int i = 0; i < 3; ++i) gate->pass();  // u1 and u2 come back; u3..u5 go as one call
  for (auto* t : {&ta, &tb, &tc, &td, &te}) t->join();

  ASSERT_EQ(gate->commands.size(), 3u);
  EXPECT_EQ(gate->commands[0][2], "1");  // one request: its state (a fixed window's holds its block)
  EXPECT_EQ(gate->commands[1][2], "1");
  const auto& shared = gate->commands[2];
  ASSERT_EQ(shared[2], "3");
  EXPECT_EQ(shared[3], "redlimit:{gate|u3}:fw");
  EXPECT_EQ(shared[4], "redlimit:{gate|u4}:fw");
  EXPECT_EQ(shared[5], "redlimit:{gate|u5}:fw");
  // ARGV[1]: the time the shared call was sent, not its callers' own readings five seconds before.
  EXPECT_EQ(shared[6], std::to_string(clock->at.load()));
  EXPECT_EQ(gate->commands[0][4], std::to_string(clock->at.load() - 5'000'000));
  // Each caller its own decision.
  EXPECT_EQ(a.remaining, 1);
  EXPECT_EQ(b.remaining, 2);
  EXPECT_EQ(c.remaining, 3);
  EXPECT_EQ(d.remaining, 4);
  EXPECT_EQ(e.remaining, 5);
  // The shared call's deadline counts from its oldest caller's start (u3's), before u4's and u5's.
  ASSERT_EQ(gate->starts.size(), 3u);
  EXPECT_TRUE(gate->starts[2] >= queued_from);
  EXPECT_TRUE(gate->starts[2] < after_u3);
}

// A sliding window of 10,000 buckets: a script call carries one of its requests
// (DecisionPath::per_call_of), so the calls queued behind the two on their way take a flight each,
// each a call of its own (a transport call, begin_call, each), not one flight of three calls.
TEST_F(SyncLaneTest, CallsOfManyBucketsTakeAFlightEach) {
  make(true, 10'000);
  Decision d[5];
  std::vector<std::thread> threads;
  threads.push_back(start("u1", d[0]));
  gate->wait_for_commands(1);
  threads.push_back(start("u2", d[1]));
  gate->wait_for_commands(2);
  for (int i = 2; i < 5; ++i) threads.push_back(start("u" + std::to_string(i + 1), d[i]));
  for (int i = 0; i < 5; ++i) gate->pass();
  for (auto& t : threads) t.join();

  ASSERT_EQ(gate->commands.size(), 5u);
  std::vector<std::string> keys;
  for (const auto& c : gate->commands) {
    EXPECT_EQ(c[2], "1");  // one request a call
    keys.push_back(c[3]);
  }
  std::sort(keys.begin(), keys.end());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(keys[i], "redlimit:{gate|u" + std::to_string(i + 1) + "}:sw");
  EXPECT_EQ(gate->starts.size(), 5u);  // five flights
  for (int i = 0; i < 5; ++i) EXPECT_EQ(d[i].remaining, i + 1);
}

// Each caller of a shared call is a call of its own to the MetricsSink and Counters::errors: one
// event each, whose latency counts the caller's wait for the shared call; and when the shared call
// fails, one error event and one error counted per caller.
TEST_F(SyncLaneTest, EachCallerOfASharedCallIsReportedWithItsOwnWaitAndCountedOnFailure) {
  for (const bool fail : {false, true}) {
    SCOPED_TRACE(fail ? "the shared call fails" : "the shared call decides");
    make(true);
    gate->fail_shared = fail;
    Decision a, b, c, d;
    std::thread ta = start("u1", a);
    gate->wait_for_commands(1);
    std::thread tb = start("u2", b);
    gate->wait_for_commands(2);
    std::thread tc = start("u3", c);
    const auto u3_queued = std::chrono::steady_clock::now();  // u3 queued before this
    std::thread td = start("u4", d);
    const auto sent = std::chrono::steady_clock::now();  // the shared call is sent after this
    for (int i = 0; i < 3; ++i) gate->pass();
    for (auto* t : {&ta, &tb, &tc, &td}) t->join();

    ASSERT_EQ(gate->commands.size(), 3u);
    ASSERT_EQ(events->got.size(), 4u);  // one per consume(), the shared call's two callers included
    EXPECT_EQ(thrown.load(), fail ? 2 : 0);
    EXPECT_EQ(rl->counters().errors, fail ? 2u : 0u);
    // u3's latency covers its wait in the queue: from before u3_queued to after `sent`. Failed,
    // u3's event is the longer of the two error events (u4 started after u3).
    int shared_events = 0;
    std::chrono::nanoseconds u3_latency{0};
    for (const auto& [remaining, latency] : events->got) {
      if (remaining == 1 || remaining == 2) continue;  // u1, u2: sent alone
      ++shared_events;
      if (remaining == 3 || remaining == -1) u3_latency = std::max(u3_latency, latency);
    }
    EXPECT_EQ(shared_events, 2);
    EXPECT_GE(u3_latency.count(), std::chrono::nanoseconds(sent - u3_queued).count()) << "ns";
  }
}

TEST_F(SyncLaneTest, ACallAloneGoesAtOnceAndWithTheOptionOffEveryCallGoesAlone) {
  make(false);
  Decision a, b, c;
  std::thread ta = start("u1", a);
  std::thread tb = start("u2", b);
  const auto after_u2 = std::chrono::steady_clock::now();
  std::thread tc = start("u3", c);
  gate->wait_for_commands(3);  // all three on their way at once, each alone
  for (int i = 0; i < 3; ++i) gate->pass();
  for (auto* t : {&ta, &tb, &tc}) t->join();
  ASSERT_EQ(gate->commands.size(), 3u);
  for (const auto& cmd : gate->commands) EXPECT_EQ(cmd[2], "1");
  EXPECT_EQ(a.remaining + b.remaining + c.remaining, 6);

  make(true);  // shared, but nothing else on its way: it goes at once
  gate->pass();
  EXPECT_EQ(fw->consume("u9").remaining, 9);
  ASSERT_EQ(gate->commands.size(), 1u);
  EXPECT_EQ(gate->commands[0][2], "1");
}

}  // namespace
