// Options::share_script_calls for consume() from many threads (detail/sync_lane.hpp), against a
// connection that holds each script call until the test lets it through: with
// Options::shared_call_flights at 2, a call made while two are on their way waits, and the calls
// queued meanwhile go as one script call, in the order they came, at the time they are sent, under
// the deadline of the oldest; each caller gets its own decision.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
    for (std::size_t k = 3; k < 3 + keys; k += 2) {
      const std::string& key = argv[k];  // redlimit:{gate|u7}:fw
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

class SyncLaneTest : public ::testing::Test {
 protected:
  void make(bool share) {
    gate = std::make_shared<GateConnection>();
    gate->set_script_path(redlimit::ScriptPath::evalsha);  // one command a call, nothing probed
    clock = std::make_shared<CountingClock>();
    redlimit::Options o;
    o.clock = clock;
    o.share_script_calls = share;
    o.shared_call_flights = 2;  // two calls out at once, then the others wait
    rl = std::make_unique<redlimit::RateLimiter>(gate, o);
    fw = std::make_unique<redlimit::FixedWindow>(rl->fixed_window("gate", redlimit::Limit::per_hour(100)));
  }

  // Starts a thread consuming `subject` into `out`, and returns once it has read the clock (the
  // last thing it does before it queues) and a little more.
  std::thread start(const std::string& subject, Decision& out) {
    const int before = clock->readings.load();
    std::thread t([this, subject, &out] { out = fw->consume(subject); });
    while (clock->readings.load() == before) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);  // from its clock reading into the queue: a few instructions
    return t;
  }

  std::shared_ptr<GateConnection> gate;
  std::shared_ptr<CountingClock> clock;
  std::unique_ptr<redlimit::RateLimiter> rl;
  std::unique_ptr<redlimit::FixedWindow> fw;  // one strategy object: its copies share its lane
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
  EXPECT_EQ(gate->commands[0][2], "2");  // one request: its state and its block marker
  EXPECT_EQ(gate->commands[1][2], "2");
  const auto& shared = gate->commands[2];
  ASSERT_EQ(shared[2], "6");
  EXPECT_EQ(shared[3], "redlimit:{gate|u3}:fw");
  EXPECT_EQ(shared[5], "redlimit:{gate|u4}:fw");
  EXPECT_EQ(shared[7], "redlimit:{gate|u5}:fw");
  // ARGV[1]: the time the shared call was sent, not its callers' own readings five seconds before.
  EXPECT_EQ(shared[9], std::to_string(clock->at.load()));
  EXPECT_EQ(gate->commands[0][5], std::to_string(clock->at.load() - 5'000'000));
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
  for (const auto& cmd : gate->commands) EXPECT_EQ(cmd[2], "2");
  EXPECT_EQ(a.remaining + b.remaining + c.remaining, 6);

  make(true);  // shared, but nothing else on its way: it goes at once
  gate->pass();
  EXPECT_EQ(fw->consume("u9").remaining, 9);
  ASSERT_EQ(gate->commands.size(), 1u);
  EXPECT_EQ(gate->commands[0][2], "2");
}

}  // namespace
