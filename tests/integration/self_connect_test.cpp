// A reconnect to a loopback port where nothing listens can reach itself (src/hiredis/self_connect.hpp):
// the client's own port is drawn from the range the dead server's port lies in, the handshake meets
// itself, and every command comes back as its "reply". The cluster failover test met it: after a
// master was killed, its clients' reconnects to its port read their own FCALLs back, "an array of 6".
// Each test reconnects to such a port until one connection reaches itself (a few thousand attempts
// on this kernel) and checks that it was refused like any dead port, never answered.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include "integration/async_fixture.hpp"
#include "redlimit/transport/redis_connection.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::ConnectionError;
using redlimit::Endpoint;
using redlimit::Reply;
using Steady = std::chrono::steady_clock;

// At most this many attempts (or kBudget), to meet one connection that reaches itself. Runs here
// needed 184 to 61,861 attempts; under TSan on a slow 2-core machine an attempt through an async
// adapter took 1.5 to 3 ms, so 30 s (the budget before) could end a run short of its draw.
constexpr int kMostAttempts = 400000;
constexpr auto kBudget = 120s;

// A free loopback port that a client connecting to it may draw as its own: inside the kernel's
// ephemeral range, of the parity Linux gives connect() (that of the range's low end; bind() to
// port 0 takes the other parity, which is why a port found that way rarely shows this).
int port_a_client_can_draw() {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(0, (high - low) / 2);
  for (int i = 0; i < 1000; ++i) {
    const int port = low + 2 * pick(random);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    if (free) return port;
  }
  throw std::runtime_error("no free port in the ephemeral range");
}

Endpoint dead_endpoint() {
  Endpoint e;
  e.host = "127.0.0.1";
  e.port = port_a_client_can_draw();
  return e;
}

std::string shape(const Reply& r) {
  return r.type == Reply::Type::array ? "an array of " + std::to_string(r.elements.size()) : "\"" + r.str + "\"";
}

// What a run of attempts met: refusals that named a connection reaching itself, and any reply.
struct Outcome {
  int attempts = 0;
  int reached_itself = 0;
  std::string reply;  // the first reply read from the dead port (a defect), or empty
  void count(const std::string& error) {
    if (error.find("reached itself") != std::string::npos) ++reached_itself;
  }
  bool more(Steady::time_point until) const {
    return reached_itself == 0 && reply.empty() && attempts < kMostAttempts && Steady::now() < until;
  }
  void report(const char* who, int port) const {
    std::cout << "[ figures ] " << who << ": port " << port << ", " << attempts
              << " connects until one reached itself (refused: " << reached_itself << ")\n";
    EXPECT_EQ(reply, "") << "a command to a port where nothing listens was answered";
    EXPECT_EQ(reached_itself, 1) << "no connection reached itself in " << attempts << " attempts";
  }
};

TEST(SelfConnect, ARedisConnectionThatReachesItselfIsRefusedNotAnswered) {
  const Endpoint dead = dead_endpoint();
  Outcome o;
  const auto until = Steady::now() + kBudget;
  while (o.more(until)) {
    ++o.attempts;
    try {
      redlimit::RedisConnection c(dead, 200ms, 200ms);
      o.reply = shape(c.command({"PING"}));
    } catch (const ConnectionError& e) {
      o.count(e.what());
    }
  }
  o.report("RedisConnection", dead.port);
}

template <class Loop>
void async_attempts(const char* who) {
  const Endpoint dead = dead_endpoint();
  Loop loop;
  auto redis = loop.attach(dead, redlimit::AsyncOptions{200ms, 200ms, 64});
  loop.start();
  Outcome o;
  const auto until = Steady::now() + kBudget;
  while (o.more(until)) {
    ++o.attempts;
    auto f = redlimit_test::async_fixture::command(*redis, {"PING"});
    try {
      o.reply = shape(redlimit_test::async_fixture::get_within(f));
    } catch (const ConnectionError& e) {
      o.count(e.what());
    }
  }
  redis.reset();
  loop.stop();
  o.report(who, dead.port);
}

#ifdef REDLIMIT_HAVE_LIBEVENT
TEST(SelfConnect, AnAsyncConnectionThatReachesItselfIsRefusedNotAnsweredLibevent) {
  async_attempts<redlimit_test::async_fixture::LibeventLoop>("AsyncRedis (libevent)");
}
#endif

#ifdef REDLIMIT_HAVE_LIBUV
TEST(SelfConnect, AnAsyncConnectionThatReachesItselfIsRefusedNotAnsweredLibuv) {
  async_attempts<redlimit_test::async_fixture::LibuvLoop>("AsyncRedis (libuv)");
}
#endif

}  // namespace
