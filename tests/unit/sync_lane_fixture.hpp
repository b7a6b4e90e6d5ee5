#pragma once
// The fixture of the SyncLane tests (sync_lane_test.cpp, sync_lane_linger_test.cpp): a connection
// that holds each script call until the test lets it through, a clock that counts its readings, a
// sink that keeps every event, and a limiter of one strategy over them.
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

namespace sync_lane_fixture {

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
  // The same, for `at_most`: whether they did.
  bool wait_for_commands(std::size_t n, std::chrono::milliseconds at_most) {
    std::unique_lock<std::mutex> l(m_);
    return changed_.wait_for(l, at_most, [&] { return commands.size() >= n; });
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
  // `linger`: Options::shared_call_linger; `flights`: Options::shared_call_flights.
  void make(bool share, int buckets = 0, std::chrono::microseconds linger = {}, std::size_t flights = 2) {
    gate = std::make_shared<GateConnection>();
    gate->set_script_path(redlimit::ScriptPath::evalsha);  // one command a call, nothing probed
    clock = std::make_shared<CountingClock>();
    redlimit::Options o;
    o.clock = clock;
    o.share_script_calls = share;
    o.shared_call_flights = flights;  // by default two calls out at once, then the others wait
    o.shared_call_linger = linger;
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
    return paren != std::string::npos && paren + 2 < line.size() && (line[paren + 2] == 'S' || line[paren + 2] == 'D');
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

}  // namespace sync_lane_fixture
