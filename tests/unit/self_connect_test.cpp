// hiredis_detail::connected_to_itself (src/hiredis/self_connect.hpp) on sockets made here: a TCP
// socket bound to a port and connected to that same port reaches itself at once (Linux completes
// the "simultaneous open"), so each case is exact; the transports' own use of it is checked end to
// end by tests/integration/self_connect_test.cpp.
#include "hiredis/self_connect.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace {

using redlimit::hiredis_detail::connected_to_itself;

// A socket closed when the test ends.
struct Fd {
  explicit Fd(int fd) : fd(fd) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int fd;
};

sockaddr_in loopback4(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Binds `fd` to `a` (port 0: any) and returns the port it got, of either family.
template <class Addr>
std::uint16_t bound_port(int fd, Addr a) {
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  sockaddr_storage got{};
  socklen_t len = sizeof(got);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&got), &len), 0);
  return ntohs(got.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(got).sin6_port
                                         : reinterpret_cast<const sockaddr_in&>(got).sin_port);
}

TEST(SelfConnect, AnIpv4SocketConnectedToItsOwnPortIsSeen) {
  Fd s(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a = loopback4(bound_port(s.fd, loopback4(0)));
  ASSERT_EQ(::connect(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  EXPECT_TRUE(connected_to_itself(s.fd));
  // What the transports would otherwise read: their own bytes.
  ASSERT_EQ(::send(s.fd, "*1\r\n", 4, 0), 4);
  char echo[4];
  ASSERT_EQ(::recv(s.fd, echo, sizeof(echo), 0), 4);
  EXPECT_EQ(std::memcmp(echo, "*1\r\n", 4), 0);
}

TEST(SelfConnect, AnIpv6SocketConnectedToItsOwnPortIsSeen) {
  Fd s(::socket(AF_INET6, SOCK_STREAM, 0));
  ASSERT_GE(s.fd, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  a.sin6_port = htons(bound_port(s.fd, a));
  ASSERT_EQ(::connect(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  EXPECT_TRUE(connected_to_itself(s.fd));
}

TEST(SelfConnect, AConnectionToAListenerIsNotOnEitherEnd) {
  Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a = loopback4(bound_port(listener.fd, loopback4(0)));
  ASSERT_EQ(::listen(listener.fd, 1), 0);
  Fd client(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_EQ(::connect(client.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  Fd served(::accept(listener.fd, nullptr, nullptr));
  ASSERT_GE(served.fd, 0);
  EXPECT_FALSE(connected_to_itself(client.fd));
  EXPECT_FALSE(connected_to_itself(served.fd));
}

TEST(SelfConnect, OtherSocketsAreNot) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  Fd a(pair[0]), b(pair[1]);
  EXPECT_FALSE(connected_to_itself(a.fd));  // a unix socket
  Fd unconnected(::socket(AF_INET, SOCK_STREAM, 0));
  EXPECT_FALSE(connected_to_itself(unconnected.fd));  // no peer
  EXPECT_FALSE(connected_to_itself(-1));
}

}  // namespace
