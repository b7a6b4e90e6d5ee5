#pragma once
// A sentinel of the test's own on a free loopback port, for what a real one cannot be made to do:
// announce (+switch-master) whatever address the test names, a hung one included. It answers
// SENTINEL GET-MASTER-ADDR-BY-NAME (any name) with the address set by name_master(), SUBSCRIBE with
// the confirmation, PING with PONG, and anything else with an error; announce() sends every
// subscriber a +switch-master message. One thread polls every connection; stopped and joined with
// the object. Header-only, for the Sentinel suite.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/hung_node.hpp"

namespace redlimit_sentinel {

class FakeSentinel {
 public:
  FakeSentinel() : listener_(redlimit_test::listen_on_loopback(16, port_)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeSentinel() {
    stop_ = true;
    thread_.join();
    for (const Client& c : clients_) ::close(c.fd);
    ::close(listener_);
  }
  FakeSentinel(const FakeSentinel&) = delete;
  FakeSentinel& operator=(const FakeSentinel&) = delete;

  int port() const { return port_; }
  void name_master(const std::string& host, int port) {
    std::lock_guard<std::mutex> lock(mutex_);
    master_host_ = host;
    master_port_ = port;
  }
  // The number of subscribers it was sent to.
  int announce(const std::string& name, const std::string& old_host, int old_port, const std::string& host, int port) {
    const std::string text =
        name + " " + old_host + " " + std::to_string(old_port) + " " + host + " " + std::to_string(port);
    const std::string message = array({"message", "+switch-master", text});
    std::lock_guard<std::mutex> lock(mutex_);
    int sent = 0;
    for (const Client& c : clients_) {
      if (c.subscribed) sent += ::send(c.fd, message.data(), message.size(), MSG_NOSIGNAL) > 0 ? 1 : 0;
    }
    return sent;
  }

 private:
  struct Client {
    int fd;
    std::string in;
    bool subscribed = false;
  };

  static std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }
  static std::string array(const std::vector<std::string>& items) {
    std::string out = "*" + std::to_string(items.size()) + "\r\n";
    for (const auto& i : items) out += bulk(i);
    return out;
  }

  // One command off the front of `in` (a RESP array of bulk strings, as hiredis sends), or false
  // while it is incomplete.
  static bool take_command(std::string& in, std::vector<std::string>& argv) {
    argv.clear();
    std::size_t at = 0;
    auto line = [&](std::string& out) {
      const std::size_t end = in.find("\r\n", at);
      if (end == std::string::npos) return false;
      out = in.substr(at, end - at);
      at = end + 2;
      return true;
    };
    std::string head;
    if (!line(head) || head.empty() || head[0] != '*') return false;
    const int n = std::stoi(head.substr(1));
    for (int i = 0; i < n; ++i) {
      std::string len;
      if (!line(len) || len.empty() || len[0] != '$') return false;
      const std::size_t size = std::stoul(len.substr(1));
      if (in.size() < at + size + 2) return false;
      argv.push_back(in.substr(at, size));
      at += size + 2;
    }
    in.erase(0, at);
    return true;
  }

  // With the mutex held.
  std::string answer(Client& c, const std::vector<std::string>& argv) const {
    const std::string cmd = argv.empty() ? std::string() : argv[0];
    if (cmd == "SENTINEL") return array({master_host_, std::to_string(master_port_)});
    if (cmd == "SUBSCRIBE" && argv.size() == 2) {
      c.subscribed = true;
      return "*3\r\n" + bulk("subscribe") + bulk(argv[1]) + ":1\r\n";
    }
    if (cmd == "PING") return "+PONG\r\n";
    return "-ERR not a command of this fake sentinel\r\n";
  }

  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const Client& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents != 0) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        std::lock_guard<std::mutex> lock(mutex_);
        if (fd >= 0) clients_.push_back({fd, {}, false});
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) read_from(fds[i].fd);
      }
    }
  }

  void read_from(int fd) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < clients_.size(); ++i) {
      Client& c = clients_[i];
      if (c.fd != fd) continue;
      if (n <= 0) {
        ::close(fd);
        clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
      c.in.append(buf, static_cast<std::size_t>(n));
      std::vector<std::string> argv;
      std::string out;
      while (take_command(c.in, argv)) out += answer(c, argv);
      (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
      return;
    }
  }

  int port_ = 0;  // before listener_: its initializer sets it
  int listener_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mutex_;  // guards the three below and clients_ (the serving thread changes it)
  std::string master_host_ = "127.0.0.1";
  int master_port_ = 0;
  std::vector<Client> clients_;
};

}  // namespace redlimit_sentinel
