#pragma once
// An AsyncConnection the unit tests answer by hand (script_async_test.cpp, batch_async_test.cpp,
// async_lane_test.cpp):
// it keeps every command with its callbacks, for the test to answer oldest first (answer()) or in
// any order (sent[i].on_reply / on_error).
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/transport/async_connection.hpp"

namespace redlimit_test {

// An ordered connection the test answers by hand, oldest command first.
class HandAnswered final : public redlimit::AsyncConnection {
 public:
  struct Sent {
    std::vector<std::string> argv;
    ReplyCallback on_reply;
    ErrorCallback on_error;
  };

  // A command with no deadline of its own (the shared SCRIPT LOAD).
  void command_async(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error) override {
    command_async_until(std::move(argv), std::move(on_reply), std::move(on_error), Deadline{});
  }

  void command_async_until(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error,
                           Deadline deadline) override {
    if (!refuse.empty() && argv[0] == refuse) throw redlimit::ConnectionError("refused: " + refuse);
    deadlines.emplace_back(argv[0], deadline);
    sent.push_back({std::move(argv), std::move(on_reply), std::move(on_error)});
    ++total;
  }

  // What a call starting now gets: whatever the test set last.
  Deadline call_deadline() const override {
    ++deadlines_taken;
    return next_deadline;
  }

  // With defer_posts, post() keeps the task for run_posted(), as a loop runs it on its next turn;
  // otherwise it runs at once (the default AsyncConnection's behaviour).
  void post(std::function<void()> task) override {
    if (defer_posts) {
      posted.push_back(std::move(task));
    } else {
      task();
    }
  }
  void run_posted() {
    std::vector<std::function<void()>> tasks;
    tasks.swap(posted);
    for (auto& t : tasks) t();
  }

  // A cluster router when a test says so (a limiter over a cluster accepts only such a one).
  bool routes_by_slot() const override { return by_slot; }
  // What the limiter hands over and asks (RateLimiter::attach_async, a breaker's refusal), recorded.
  void share_routing(const std::shared_ptr<redlimit::Connection>& c) override { shared_routing = c; }
  void shard_refused(std::string_view key) override { refused_keys.emplace_back(key); }

  // Answers the oldest command; returns its verb.
  std::string answer(const redlimit::Reply& r) {
    Sent s = std::move(sent.front());
    sent.pop_front();
    s.on_reply(r);
    return s.argv[0] == "SCRIPT" ? "SCRIPT " + s.argv[1] : s.argv[0];
  }

  bool by_slot = false;
  std::shared_ptr<redlimit::Connection> shared_routing;
  std::vector<std::string> refused_keys;
  std::deque<Sent> sent;
  std::string refuse;  // a verb whose sends throw
  bool defer_posts = false;
  std::vector<std::function<void()>> posted;
  int total = 0;
  Deadline next_deadline{};
  mutable int deadlines_taken = 0;
  std::vector<std::pair<std::string, Deadline>> deadlines;  // every send's verb and deadline, in order
};

}  // namespace redlimit_test
