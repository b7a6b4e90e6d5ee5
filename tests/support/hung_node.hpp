#pragma once
// A listening socket on a free loopback port that never accepts: a connection to it opens (the
// kernel completes the handshake from its backlog) and then nothing answers, as from a hung node.
// Closed with the object. Header-only: the cluster and fault suites both use it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace redlimit_test {

class HungNode {
 public:
  HungNode() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("cannot listen on a loopback port");
    }
    port_ = ntohs(a.sin_port);
  }
  ~HungNode() { ::close(fd_); }
  HungNode(const HungNode&) = delete;
  HungNode& operator=(const HungNode&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

}  // namespace redlimit_test
