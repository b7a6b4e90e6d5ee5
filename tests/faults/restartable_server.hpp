#pragma once
// A redis-server the fault tests can kill and start again on the same port (tests/support/
// RedisServer picks a new port on each start). Killed with the test process (PR_SET_PDEATHSIG).
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "redlimit/url.hpp"
#include "support/server_version.hpp"

namespace redlimit_faults {

using namespace std::chrono_literals;

// A raw connection of the test's own, for setup and assertions.
inline redlimit::RedisConnection raw(const std::string& url, std::chrono::milliseconds timeout = 2000ms) {
  return redlimit::RedisConnection(redlimit::parse_url(url), 2000ms, timeout);
}

// A setup command on the test's own connection that must succeed (an error reply throws).
inline void must(redlimit::RedisConnection& admin, const std::vector<std::string>& argv) {
  const redlimit::Reply r = admin.command(argv);
  if (r.is_error()) throw std::runtime_error(argv[0] + " " + (argv.size() > 1 ? argv[1] : "") + ": " + r.str);
}

class RestartableServer {
 public:
  RestartableServer() {
    // hiredis writes with write(2): a server that closes a connection (maxclients, CLIENT KILL, a
    // kill -9) must give the next write EPIPE, not kill the test process with SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    char tmpl[] = "/tmp/redlimit-faults-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = d;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ::close(fd);
      throw std::runtime_error("no free port");
    }
    port_ = ntohs(addr.sin_port);
    ::close(fd);
    start();
  }
  ~RestartableServer() {
    kill9();
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }
  int port() const { return port_; }

  void start() {
    const char* bin = std::getenv("REDIS_SERVER");
    const std::string server = bin != nullptr ? bin : "redis-server";
    const std::string port = std::to_string(port_);
    const std::string log = dir_ + "/redis.log";
    // DEBUG (the tests' SLEEP and the like): asked for from Redis 7.0 on, allowed before, where the
    // directive would stop the server from starting. Ends the argument list there otherwise.
    const bool debug = redlimit_test::server_major_version(server) >= 7;
    const pid_t parent = ::getpid();
    // The load threads keep running across the fork: the child makes async-signal-safe calls only
    // (everything it needs, the log path included, is built above).
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::execlp(server.c_str(), server.c_str(), "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", dir_.c_str(), "--logfile", log.c_str(),
               debug ? "--enable-debug-command" : static_cast<char*>(nullptr), "local", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Up to 30 s for the PING (a loaded CI box).
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < until) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("redis-server exited at once (port " + port + " taken?); see " + dir_ +
                                 "/redis.log");
      }
      try {
        auto c = raw(url(), 500ms);
        if (c.command({"PING"}).str == "PONG") return;
      } catch (const redlimit::Error&) {
      }
      std::this_thread::sleep_for(20ms);
    }
    throw std::runtime_error("redis-server did not answer on port " + port);
  }
  void kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void restart() {
    kill9();
    start();
  }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace redlimit_faults
