#pragma once
// A listening socket on a free loopback port that never accepts: a connection to it opens (the
// kernel completes the handshake from its backlog) and then nothing answers, as from a hung node.
// HungNode::silent() makes one whose backlog is full instead: a SYN to it gets no answer (Linux
// drops it while the accept queue is full), so a connect waits for its timeout, as to a host that
// is down or behind a firewall that drops. Closed with the object. Header-only: the cluster, fault
// and Sentinel suites use it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

namespace redlimit_test {

// 127.0.0.1:`port`.
inline sockaddr_in loopback_address(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

// A socket listening on a free loopback port (set in `port`) with `backlog`, close-on-exec; throws
// std::runtime_error when none can be had. (HungNode's, and the Sentinel suite's fake sentinel's.)
inline int listen_on_loopback(int backlog, int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback_address(0);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot listen on a loopback port");
  }
  port = ntohs(a.sin_port);
  return fd;
}

class HungNode {
 public:
  HungNode() : HungNode(64) {}
  static HungNode silent() {
    HungNode node(0);
    // A backlog of 0 queues one connection; the second is left waiting too.
    for (int i = 0; i < 2; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      const sockaddr_in a = loopback_address(node.port_);
      (void)::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
      node.fillers_.push_back(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the first handshake fills the queue
    return node;
  }
  ~HungNode() {
    for (const int fd : fillers_) ::close(fd);
    if (fd_ >= 0) ::close(fd_);
  }
  HungNode(HungNode&& o) noexcept : port_(o.port_), fd_(o.fd_), fillers_(std::move(o.fillers_)) { o.fd_ = -1; }
  HungNode(const HungNode&) = delete;
  HungNode& operator=(const HungNode&) = delete;
  HungNode& operator=(HungNode&&) = delete;
  int port() const { return port_; }

 private:
  explicit HungNode(int backlog) : fd_(listen_on_loopback(backlog, port_)) {}

  int port_ = 0;  // before fd_: its initializer sets it
  int fd_;
  std::vector<int> fillers_;  // silent(): the connections that fill the backlog
};

}  // namespace redlimit_test
