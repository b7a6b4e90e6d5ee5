// What concurrent consume() calls send with Options::share_sync_calls (detail/sync_lane.hpp): a
// call alone goes at once as its own script call; calls made while one is in flight go together as
// the next, one script call whose keys are theirs (a consume_many batch), and each caller gets the
// decision of its own request. Without the option, every call is its own script call.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mock_connection.hpp"
#include "redlimit/redlimit.hpp"

namespace {

using redlimit::Reply;
using redlimit_unit::batch_reply;
using redlimit_unit::decision_reply;

// The digit that ends a test subject ("u3"), from its state key ("<prefix>:{api|u3}:fw").
char digit_of(const std::string& state_key) { return state_key.at(state_key.size() - 5); }

// A thread-safe connection that holds its first command until open() and answers each request of
// a script call with remaining = its subject's digit, so that each caller can tell its own decision.
class GatedConnection : public redlimit::Connection {
 public:
  Reply command(const std::vector<std::string>& argv) override {
    std::unique_lock<std::mutex> lock(mutex_);
    sent_.push_back(argv);
    if (sent_.size() == 1) opened_.wait(lock, [this] { return open_; });
    const std::size_t keys = static_cast<std::size_t>(std::stoul(argv.at(2)));
    std::vector<Reply> ds;
    for (std::size_t k = 0; k < keys; k += 2) {
      const std::string& state = argv.at(3 + k);
      ds.push_back(decision_reply(1, digit_of(state) - '0', 0, 1000));
    }
    return ds.size() == 1 ? ds.front() : batch_reply(ds);
  }
  bool thread_safe() const override { return true; }

  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }
  std::vector<std::vector<std::string>> sent() {
    std::lock_guard<std::mutex> lock(mutex_);
    return sent_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
  std::vector<std::vector<std::string>> sent_;
};

struct Sent {
  std::vector<std::vector<std::string>> sent;
  bool each_own = true;  // every caller got the decision of its own subject
};

// Thread 1 consumes subject "u1", held in flight by the connection; then threads 2..4 consume "u2"
// .. "u4"; 50 ms later the connection lets the first call through.
Sent hold_first_then_three(bool share) {
  auto conn = std::make_shared<GatedConnection>();
  redlimit::Options o;
  o.share_sync_calls = share;
  o.clock = std::make_shared<redlimit::ManualClock>(std::chrono::microseconds(1'700'000'000'000'000));
  const redlimit::RateLimiter limiter(conn, o);
  const auto fw = limiter.fixed_window("api", redlimit::Limit::per_second(9));
  Sent run;
  std::atomic<int> wrong{0};
  auto consume = [&](int i) {
    if (fw.consume("u" + std::to_string(i)).remaining != i) ++wrong;
  };
  std::thread first(consume, 1);
  while (conn->sent().empty()) std::this_thread::yield();
  std::vector<std::thread> others;
  for (int i = 2; i <= 4; ++i) others.emplace_back(consume, i);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  conn->open();
  first.join();
  for (auto& t : others) t.join();
  run.sent = conn->sent();
  run.each_own = wrong == 0;
  return run;
}

// The subjects a script call carries, from its state keys.
std::set<char> subjects_of(const std::vector<std::string>& argv) {
  std::set<char> out;
  const std::size_t keys = static_cast<std::size_t>(std::stoul(argv.at(2)));
  for (std::size_t k = 0; k < keys; k += 2) out.insert(digit_of(argv.at(3 + k)));
  return out;
}

TEST(SyncLane, CallsMadeWhileOneIsInFlightGoAsTheNextScriptCall) {
  // Threads 2..4 are queued within the 50 ms the first call is held, unless the machine stalls
  // them that long; a few attempts make that a non-event. Every attempt must be right either way.
  bool merged = false;
  for (int attempt = 0; attempt < 5 && !merged; ++attempt) {
    const Sent run = hold_first_then_three(true);
    EXPECT_TRUE(run.each_own);
    ASSERT_GE(run.sent.size(), 2u);
    EXPECT_EQ(subjects_of(run.sent[0]), std::set<char>({'1'}));  // alone: nothing was in flight
    std::set<char> rest;
    for (std::size_t c = 1; c < run.sent.size(); ++c) {
      const auto s = subjects_of(run.sent[c]);
      rest.insert(s.begin(), s.end());
    }
    EXPECT_EQ(rest, std::set<char>({'2', '3', '4'}));  // each sent once
    merged = run.sent.size() == 2;
  }
  EXPECT_TRUE(merged) << "calls queued behind one in flight were not sent as one script call";
}

TEST(SyncLane, WithoutTheOptionEveryCallIsItsOwnScriptCall) {
  const Sent run = hold_first_then_three(false);
  EXPECT_TRUE(run.each_own);
  ASSERT_EQ(run.sent.size(), 4u);
  for (const auto& argv : run.sent) EXPECT_EQ(subjects_of(argv).size(), 1u);
}

}  // namespace
