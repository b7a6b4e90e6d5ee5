// Closing a Sentinel client ends its +switch-master listener (switch_listener.hpp) at once, whatever
// the listener is waiting for. Before, the owner's destructor waited for a connect to a sentinel
// whose host never answers until connect_timeout, and for a hung sentinel's reply to SUBSCRIBE until
// command_timeout: a service shutting down, or a limiter made again on new settings, stalled that
// long (the async client's event loop with it, where the listener is released). Each test makes the
// listener wait on a sentinel that never answers, with timeouts of 8 s, and closes the client.
// No deployment: the listener's first sentinel is the one that never answers.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/transport/redis_async.hpp"
#include "redlimit/transport/sentinel_connection.hpp"
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
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool pending = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno == EINPROGRESS;
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

TEST(SentinelListener, ClosingEndsAWaitForAHungSentinelsReply) {
  redlimit_test::HungNode hung;  // accepts (from its backlog) and never answers SUBSCRIBE
  const auto took = closing_time(hung.port());
  std::printf("closing with the listener's SUBSCRIBE unanswered: %lld ms (command_timeout %lld ms)\n",
              static_cast<long long>(took.count()), static_cast<long long>(kTimeout.count()));
  EXPECT_LT(took, 1000ms);
}

#ifdef REDLIMIT_HAVE_LIBEVENT
// The async client releases its listener on the loop's thread: before, the loop stopped as long.
TEST(SentinelListener, TheAsyncClientsLoopIsNotHeldByAClosingListener) {
  const auto silent = redlimit_test::HungNode::silent();
  redlimit::AsyncOptions o;
  o.connect_timeout = kTimeout;
  o.command_timeout = kTimeout;
  event_base* base = event_base_new();
  ASSERT_NE(base, nullptr);
  auto redis = redlimit::AsyncRedis::attach_libevent(base, sentinel_at(silent.port()), o);
  std::thread loop([base] { event_base_dispatch(base); });
  std::this_thread::sleep_for(kSettle);
  const auto t0 = Steady::now();
  redis.reset();  // the loop returns once the client is gone
  loop.join();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0);
  event_base_free(base);
  std::printf("the async client closed, its listener connecting: the loop ended after %lld ms\n",
              static_cast<long long>(took.count()));
  EXPECT_LT(took, 1000ms);
}
#endif

}  // namespace
