// Closing a Sentinel client ends the threads it runs at once, whatever they wait for
// (src/hiredis/interrupt.hpp): its +switch-master listener (switch_listener.hpp) and an async
// client's master search (master_watch.hpp). Before, the owner's destructor waited for a connect to
// a sentinel whose host never answers until connect_timeout, for a hung sentinel's reply until
// command_timeout, and for a search until its deadline: a service shutting down, or a limiter made
// again on new settings, stalled that long (the async client's event loop with it, where it releases
// them). Each test makes a thread wait on a sentinel that never answers, with timeouts of 8 s, and
// closes the client. No deployment: the only sentinel is the one that never answers.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/transport/redis_async.hpp"
#include "redlimit/transport/sentinel_connection.hpp"
#include "support/fake_resolver.hpp"
#include "support/hung_node.hpp"

#ifdef REDLIMIT_HAVE_LIBEVENT
#include <event2/event.h>
#endif

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr auto kTimeout = 8000ms;  // connect_timeout and command_timeout: what closing used to wait
constexpr auto kSettle = 300ms;    // for the listener's thread to reach its wait

redlimit::SentinelEndpoint sentinel_at(int port) {
  return redlimit::parse_sentinel_url("redis-sentinel://127.0.0.1:" + std::to_string(port) + "/mymaster");
}

redlimit::Options long_timeouts() {
  redlimit::Options o;
  o.connect_timeout = kTimeout;
  o.command_timeout = kTimeout;
  return o;
}

// How long destroying a SentinelConnection (its listener waiting on `port`) takes.
std::chrono::milliseconds closing_time(int port) {
  auto conn = std::make_unique<redlimit::SentinelConnection>(sentinel_at(port), long_timeouts());
  std::this_thread::sleep_for(kSettle);
  const auto t0 = Steady::now();
  conn.reset();
  return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0);
}

// A first check that the port does make a connect wait (HungNode::silent): without it, a quick close would prove
// nothing.
bool connect_waits(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  const sockaddr_in a = redlimit_test::loopback_address(port);
  const bool pending = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 && errno == EINPROGRESS;
  std::this_thread::sleep_for(200ms);
  int error = 0;
  socklen_t len = sizeof error;
  const bool still = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0 &&
                     ::send(fd, "x", 1, MSG_NOSIGNAL) < 0 && errno == EAGAIN;
  ::close(fd);
  return pending && still;
}

TEST(SentinelListener, ClosingEndsAConnectThatGetsNoAnswer) {
  const auto silent = redlimit_test::HungNode::silent();
  ASSERT_TRUE(connect_waits(silent.port())) << "a connect to the full backlog did not wait";
  const auto took = closing_time(silent.port());
  std::printf("closing with the listener's connect in progress: %lld ms (connect_timeout %lld ms)\n",
              static_cast<long long>(took.count()), static_cast<long long>(kTimeout.count()));
  EXPECT_LT(took, 1000ms);
}

// A sentinel named by a host name whose lookup hangs (tests/support/fake_resolver.hpp): the listener
// waits for the lookup (src/hiredis/name_lookup.hpp) on its interrupt's wake pipe too. Before, its
// getaddrinfo ran on the listener's thread, and closing waited for the resolver (10 s here).
TEST(SentinelListener, ClosingEndsALookupOfTheSentinelsName) {
  redlimit_test::FakeResolver resolver(redlimit_test::FakeResolver::Kind::hanging);
  auto conn = std::make_unique<redlimit::SentinelConnection>(
      redlimit::parse_sentinel_url("redis-sentinel://sentinel.redlimit-test:26379/mymaster"), long_timeouts());
  const auto settled = Steady::now();
  while (resolver.hung() == 0 && Steady::now() - settled < kTimeout) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(resolver.hung(), 1) << "the listener did not look the sentinel's name up";
  const auto t0 = Steady::now();
  conn.reset();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0);
  std::printf("closing with the listener's lookup of the sentinel's name hung: %lld ms (the resolver hangs %lld s)\n",
              static_cast<long long>(took.count()), static_cast<long long>(redlimit_test::FakeResolver::kHang.count()));
  EXPECT_LT(took, 1000ms);
}

TEST(SentinelListener, ClosingEndsAWaitForAHungSentinelsReply) {
  redlimit_test::HungNode hung;  // accepts (from its backlog) and never answers SUBSCRIBE
  const auto took = closing_time(hung.port());
  std::printf("closing with the listener's SUBSCRIBE unanswered: %lld ms (command_timeout %lld ms)\n",
              static_cast<long long>(took.count()), static_cast<long long>(kTimeout.count()));
  EXPECT_LT(took, 1000ms);
}

#ifdef REDLIMIT_HAVE_LIBEVENT
// An AsyncRedis on a libevent loop of its own, following the sentinel at `port`.
class AsyncLoop {
 public:
  explicit AsyncLoop(int port) : base_(event_base_new()) {
    if (base_ == nullptr) throw std::runtime_error("event_base_new failed");
    redlimit::AsyncOptions o;
    o.connect_timeout = kTimeout;
    o.command_timeout = kTimeout;
    redis_ = redlimit::AsyncRedis::attach_libevent(base_, sentinel_at(port), o);
    loop_ = std::thread([b = base_] { event_base_dispatch(b); });
  }
  ~AsyncLoop() {
    redis_.reset();
    if (loop_.joinable()) loop_.join();
    event_base_free(base_);
  }
  AsyncLoop(const AsyncLoop&) = delete;
  AsyncLoop& operator=(const AsyncLoop&) = delete;
  redlimit::AsyncRedis& redis() { return *redis_; }
  // Releases the client (the loop returns once it is gone) and waits for the loop: how long that took.
  std::chrono::milliseconds close() {
    const auto t0 = Steady::now();
    redis_.reset();
    loop_.join();
    return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0);
  }

 private:
  event_base* base_;
  std::shared_ptr<redlimit::AsyncRedis> redis_;
  std::thread loop_;
};

// The async client releases its listener on the loop's thread: before, the loop stopped as long.
TEST(SentinelListener, TheAsyncClientsLoopIsNotHeldByAClosingListener) {
  const auto silent = redlimit_test::HungNode::silent();
  AsyncLoop loop(silent.port());
  std::this_thread::sleep_for(kSettle);
  const auto took = loop.close();
  std::printf("the async client closed, its listener connecting: the loop ended after %lld ms\n",
              static_cast<long long>(took.count()));
  EXPECT_LT(took, 1000ms);
}

// A command makes the async client search for the master, on a thread of its own, which waits on
// the one sentinel's connect (bounded by command_timeout). The command's own deadline (300 ms)
// passes first, and it fails; the search goes on. Closing then ends the search at once. (A command
// queued before close() and still waiting for the master is still waited for, within its deadline:
// close() lets what was queued before it be answered.)
TEST(SentinelSearch, ClosingTheAsyncClientEndsASearchInProgress) {
  const auto silent = redlimit_test::HungNode::silent();
  AsyncLoop loop(silent.port());
  std::atomic<int> answered{0}, timed_out{0};
  loop.redis().command_async_until(
      {"PING"}, [&](redlimit::Reply) { ++answered; },
      [&](std::exception_ptr e) {
        try {
          std::rethrow_exception(e);
        } catch (const redlimit::TimeoutError&) {
          ++timed_out;
        } catch (...) {
        }
      },
      Steady::now() + 300ms);
  for (int i = 0; i < 200 && timed_out.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(timed_out.load(), 1) << "the command did not time out while the master was looked for";
  EXPECT_EQ(answered.load(), 0);
  const auto took = loop.close();
  std::printf("the async client closed during a search: the loop ended after %lld ms\n",
              static_cast<long long>(took.count()));
  EXPECT_LT(took, 1000ms);
}
#endif

}  // namespace
