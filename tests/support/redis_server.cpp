#include "support/redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "redlimit/transport/redis_connection.hpp"
#include "redlimit/url.hpp"
#include "support/server_version.hpp"

namespace redlimit_test {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kStartTimeout = std::chrono::seconds(10);
constexpr auto kStopTimeout = std::chrono::seconds(5);
constexpr int kStartAttempts = 5;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The redis-server to run: $REDIS_SERVER, else the first executable `redis-server` on PATH.
std::string find_binary() {
  if (const char* env = std::getenv("REDIS_SERVER"); env != nullptr && *env != '\0') {
    if (::access(env, X_OK) != 0) {
      throw std::runtime_error("REDIS_SERVER=" + std::string(env) + " is not executable");
    }
    return env;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/redis-server";
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  throw std::runtime_error(
      "redis-server not found: install it (Debian: apt-get install redis-server) or set REDIS_SERVER");
}

// A port the kernel considers free right now: bind 127.0.0.1:0, read the port, close. Someone may
// take it before redis-server binds it; the caller retries, and never trusts a server on that port
// without checking its pid.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(errno_text("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string e = errno_text("bind 127.0.0.1:0");
    ::close(fd);
    throw std::runtime_error(e);
  }
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string e = errno_text("getsockname");
    ::close(fd);
    throw std::runtime_error(e);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// PING over the unix socket in our private directory: nobody else can be listening there.
bool unix_ping(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  timeval tv{};
  tv.tv_usec = 500'000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    static const char kPing[] = "PING\r\n";
    if (::send(fd, kPing, sizeof kPing - 1, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof kPing - 1)) {
      char buf[16] = {};
      const ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
      ok = n >= 5 && std::strncmp(buf, "+PONG", 5) == 0;
    }
  }
  ::close(fd);
  return ok;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The "process_id:" line of INFO server.
long info_pid(const redlimit::Reply& info) {
  if (info.type != redlimit::Reply::Type::string) return -1;
  const auto pos = info.str.find("process_id:");
  if (pos == std::string::npos) return -1;
  return std::strtol(info.str.c_str() + pos + std::strlen("process_id:"), nullptr, 10);
}

// The directory for the servers' private directories: $REDLIMIT_TEST_TMPDIR (scripts/test.sh points
// it to a directory it removes at exit) or /tmp. Not $TMPDIR: a unix socket path must fit in 108
// bytes, so the base must be short.
std::string temp_base() {
  const char* env = std::getenv("REDLIMIT_TEST_TMPDIR");
  if (env != nullptr && *env != '\0' && std::strlen(env) < 60) return env;
  return "/tmp";
}

}  // namespace

RedisServer::RedisServer() { start(); }

RedisServer::RedisServer(std::vector<std::string> tls_args, bool plain_too)
    : tls_args_(std::move(tls_args)), plain_too_(plain_too) {
  if (tls_args_.empty()) throw std::runtime_error("a TLS server needs at least its certificate arguments");
  start();
}

RedisServer::RedisServer(ClusterNode, std::vector<std::string> tls_args)
    : tls_args_(std::move(tls_args)), cluster_(true) {
  if (tls_args_.empty()) throw std::runtime_error("a TLS server needs at least its certificate arguments");
  start();
}

void RedisServer::start() {
  std::string tmpl = temp_base() + "/redlimit-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error(errno_text(("mkdtemp " + tmpl).c_str()));
  dir_ = tmpl;
  unix_path_ = dir_ + "/redis.sock";
  log_path_ = dir_ + "/redis.log";

  std::string errors;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    std::string error;
    try {
      if (start_once(error)) return;
    } catch (...) {
      kill_and_reap();
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      throw;
    }
    errors += "\n  attempt " + std::to_string(attempt + 1) + ": " + error;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  throw std::runtime_error("could not start redis-server:" + errors);
}

// One attempt, in the order it happens (directory, fork and exec with the kernel's parent-death
// signal, wait for PING, pid file): longer than most functions, but each step needs the previous one's
// state and error text, and a helper per step would only pass them around.
bool RedisServer::start_once(std::string& error) {
  const std::string binary = find_binary();
  port_ = free_port();
  plain_port_ = !tls_args_.empty() && plain_too_ ? free_port() : 0;
  bus_port_ = cluster_ ? free_port() : 0;
  ::unlink(unix_path_.c_str());
  if (cluster_) ::unlink((dir_ + "/nodes.conf").c_str());  // a fresh node: no id of an attempt that failed

  // Everything the child needs is prepared before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> args = {
      binary,
      "--port",
      std::to_string(tls_args_.empty() ? port_ : plain_port_),
      "--bind",
      "127.0.0.1",
      "--unixsocket",
      unix_path_,
      "--unixsocketperm",
      "700",
      "--dir",
      dir_,
      "--save",
      "",
      "--appendonly",
      "no",
      "--daemonize",
      "no",
      "--logfile",
      "",
      "--databases",
      "16",
  };
  if (server_major_version(binary) >= 7) args.insert(args.end(), {"--enable-debug-command", "local"});
  if (cluster_) {
    args.insert(args.end(), {"--cluster-enabled", "yes", "--cluster-config-file", dir_ + "/nodes.conf",
                             "--cluster-port", std::to_string(bus_port_)});
  }
  if (!tls_args_.empty()) {
    args.insert(args.end(), {"--tls-port", std::to_string(port_)});
    args.insert(args.end(), tls_args_.begin(), tls_args_.end());
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0) throw std::runtime_error(errno_text(("open " + log_path_).c_str()));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();

  const pid_t child = ::fork();
  if (child < 0) {
    const std::string e = errno_text("fork");
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    throw std::runtime_error(e);
  }
  if (child == 0) {
    // Die with the test process, even when it is SIGKILLed (ctest timeout): no stray servers.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    ::setpgid(0, 0);  // a terminal's Ctrl-C reaches the test, whose destructors stop us
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  pid_ = child;

  if (const char* piddir = std::getenv("REDLIMIT_TEST_PIDDIR"); piddir != nullptr && *piddir != '\0') {
    pid_file_ = std::string(piddir) + "/" + std::to_string(pid_);
    std::ofstream(pid_file_) << pid_ << '\n';
  }

  const auto deadline = Clock::now() + kStartTimeout;
  bool answered = false;
  while (Clock::now() < deadline) {
    int status = 0;
    const pid_t w = ::waitpid(pid_, &status, WNOHANG);
    if (w == pid_) {
      pid_ = -1;
      if (!pid_file_.empty()) ::unlink(pid_file_.c_str());
      pid_file_.clear();
      const std::string log_text = log();
      error = "redis-server exited (status " + std::to_string(status) + ") on port " + std::to_string(port_) +
              "; log:\n" + log_text;
      // A port someone grabbed between free_port() and redis' bind(): try another one.
      if (log_text.find("Address already in use") != std::string::npos ||
          log_text.find("Could not create server TCP listening socket") != std::string::npos ||
          log_text.find("Failed listening on port") != std::string::npos) {
        return false;
      }
      throw std::runtime_error(error);
    }
    if (unix_ping(unix_path_)) {
      answered = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!answered) {
    kill_and_reap();
    throw std::runtime_error("redis-server did not answer PING within 10 s on " + unix_path_ + "; log:\n" + log());
  }

  // Redis binds TCP before it serves the unix socket, and exits if it cannot. Still, make sure the
  // TCP port leads to our process and not to a server someone else started there. A TLS server's
  // port is checked by its tests' own handshakes; the harness talks to it over the unix socket.
  conn_ = std::make_unique<redlimit::RedisConnection>(redlimit::parse_url(tls_args_.empty() ? url() : unix_url()),
                                                      std::chrono::milliseconds(5000), std::chrono::milliseconds(30000));
  const long served_by = info_pid(conn_->command({"INFO", "server"}));
  if (served_by != static_cast<long>(pid_)) {
    conn_.reset();
    kill_and_reap();
    error = "port " + std::to_string(port_) + " is served by process " + std::to_string(served_by) +
            ", not by our redis-server";
    return false;
  }
  return true;
}

RedisServer::~RedisServer() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void RedisServer::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  conn_.reset();
  kill_and_reap();
}

void RedisServer::kill() {
  std::lock_guard<std::mutex> lock(mutex_);
  conn_.reset();
  kill_and_reap(SIGKILL);
}

void RedisServer::kill_and_reap(int first_signal) {
  if (pid_ <= 0) return;
  ::kill(pid_, first_signal);
  const auto deadline = Clock::now() + kStopTimeout;
  bool reaped = false;
  while (Clock::now() < deadline) {
    int status = 0;
    const pid_t w = ::waitpid(pid_, &status, WNOHANG);
    if (w == pid_ || (w < 0 && errno == ECHILD)) {
      reaped = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!reaped) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  if (!pid_file_.empty()) ::unlink(pid_file_.c_str());
  pid_file_.clear();
}

int RedisServer::major_version() const { return server_major_version(find_binary()); }

std::string RedisServer::runnable(std::string_view source) const {
  if (major_version() >= 7 || source.rfind("#!", 0) != 0) return std::string(source);
  return std::string(source.substr(source.find('\n') + 1));
}

std::string RedisServer::url(int db) const {
  return "redis://127.0.0.1:" + std::to_string(tls_args_.empty() ? port_ : plain_port_) + "/" + std::to_string(db);
}

std::string RedisServer::unix_url() const { return "unix://" + unix_path_; }

std::string RedisServer::log() const { return read_file(log_path_); }

redlimit::Reply RedisServer::command(const std::vector<std::string>& argv) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!conn_) throw std::runtime_error("redis-server on port " + std::to_string(port_) + " is not running");
  return conn_->command(argv);
}

std::int64_t RedisServer::integer(const std::vector<std::string>& argv) {
  const redlimit::Reply r = command(argv);
  if (r.type != redlimit::Reply::Type::integer) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw std::runtime_error(cmd + ": expected an integer reply, got " +
                             (r.is_error() ? "error " + r.str : "type " + std::to_string(static_cast<int>(r.type))));
  }
  return r.integer;
}

std::vector<std::string> RedisServer::keys() {
  std::vector<std::string> out;
  std::string cursor = "0";
  do {
    const redlimit::Reply r = command({"SCAN", cursor, "COUNT", "1000"});
    if (r.type != redlimit::Reply::Type::array || r.elements.size() != 2) {
      throw std::runtime_error("SCAN: unexpected reply " + r.str);
    }
    cursor = r.elements[0].str;
    for (const auto& k : r.elements[1].elements) out.push_back(k.str);
  } while (cursor != "0");
  return out;
}

}  // namespace redlimit_test
