#pragma once
// A loopback TCP server that speaks just enough RESP to play a cluster node whose answers a test
// scripts: each command (an array of bulk strings, as hiredis sends them) goes to `answer`, which
// returns the raw RESP reply. For unit tests of how the cluster router reads replies (MOVED, a
// stale CLUSTER SLOTS) in orders a real cluster gives only by the luck of timing. One thread polls
// the listener and every client; the destructor stops it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace redlimit_test {

class ScriptedNode {
 public:
  using Answer = std::function<std::string(const std::vector<std::string>&)>;

  explicit ScriptedNode(Answer answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;  // any free port
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::listen(listener_, 16) != 0) {
      if (listener_ >= 0) ::close(listener_);  // no destructor runs for a constructor that throws
      throw std::runtime_error("ScriptedNode: cannot listen on loopback");
    }
    socklen_t len = sizeof(a);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedNode() {
    stop_ = true;
    thread_.join();
    for (auto& [fd, buffer] : clients_) ::close(fd);
    ::close(listener_);
  }
  ScriptedNode(const ScriptedNode&) = delete;
  ScriptedNode& operator=(const ScriptedNode&) = delete;

  int port() const { return port_; }
  // How many commands with this verb (as sent, e.g. "CLUSTER") the node has answered.
  int count(const std::string& verb) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = counts_.find(verb);
    return it == counts_.end() ? 0 : it->second;
  }

  // RESP pieces for answers.
  static std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }
  static std::string error(const std::string& s) { return "-" + s + "\r\n"; }
  // CLUSTER SLOTS naming one master, 127.0.0.1:port, for every slot.
  static std::string every_slot_on(int port) {
    return "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n" + bulk("127.0.0.1") + ":" + std::to_string(port) + "\r\n";
  }

 private:
  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const auto& [fd, buffer] : clients_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int fd = ::accept(listener_, nullptr, nullptr);
        if (fd >= 0) clients_[fd];
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(fds[i].fd);
      }
    }
  }

  void read_from(int fd) {
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      ::close(fd);
      clients_.erase(fd);
      return;
    }
    std::string& buffer = clients_[fd];
    buffer.append(chunk, static_cast<std::size_t>(n));
    std::vector<std::string> argv;
    std::string out;
    while (take_command(buffer, argv)) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++counts_[argv.empty() ? std::string() : argv[0]];
      }
      out += answer_(argv);
    }
    if (!out.empty()) ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
  }

  // One whole "*N\r\n($len\r\nbytes\r\n)*N" off the front of `buffer`; false while it is partial.
  static bool take_command(std::string& buffer, std::vector<std::string>& argv) {
    argv.clear();
    std::size_t at = 0;
    long n = 0;
    if (!number_line(buffer, at, '*', n)) return false;
    for (long i = 0; i < n; ++i) {
      long len = 0;
      if (!number_line(buffer, at, '$', len) || buffer.size() < at + static_cast<std::size_t>(len) + 2) return false;
      argv.push_back(buffer.substr(at, static_cast<std::size_t>(len)));
      at += static_cast<std::size_t>(len) + 2;
    }
    buffer.erase(0, at);
    return true;
  }
  static bool number_line(const std::string& buffer, std::size_t& at, char kind, long& n) {
    const std::size_t end = buffer.find("\r\n", at);
    if (end == std::string::npos || buffer[at] != kind) return false;
    n = std::stol(buffer.substr(at + 1, end - at - 1));
    at = end + 2;
    return true;
  }

  Answer answer_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::map<int, std::string> clients_;  // fd -> bytes read and not yet a whole command
  mutable std::mutex mutex_;
  std::map<std::string, int> counts_;
  std::thread thread_;
};

}  // namespace redlimit_test
