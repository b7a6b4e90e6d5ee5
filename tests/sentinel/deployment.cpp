#include "sentinel/deployment.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "redlimit/url.hpp"
#include "support/server_version.hpp"

namespace redlimit_sentinel {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string server_binary() { return env_or("REDIS_SERVER", "redis-server"); }

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(std::string("no free loopback port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_base() {
  const char* env = std::getenv("REDLIMIT_TEST_TMPDIR");
  return env != nullptr && *env != '\0' && std::strlen(env) < 60 ? env : "/tmp";
}

// fork + exec with the parent-death signal; stdout and stderr to `log`.
pid_t spawn(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) throw std::runtime_error("open " + log + ": " + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    ::setpgid(0, 0);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  return child;
}

}  // namespace

int server_major_version() { return redlimit_test::server_major_version(server_binary()); }

std::int64_t used_of(Process& server, const std::string& key) {
  // The fixed window's hash (docs/keys.md): field "<start>:<window>" = the units admitted in that
  // window (less 2^50 during a block); the latest window's count.
  const redlimit::Reply all = server.command({"HGETALL", key});
  if (all.type != redlimit::Reply::Type::array) return -1;
  std::int64_t used = -1, latest = -1;
  for (std::size_t i = 0; i + 1 < all.elements.size(); i += 2) {
    const std::string& f = all.elements[i].str;
    const auto colon = f.find(':');
    if (colon == std::string::npos || f == "blk") continue;
    const std::int64_t start = std::stoll(f.substr(0, colon));
    std::int64_t count = std::stoll(all.elements[i + 1].str);
    if (count < 0) count += std::int64_t{1} << 50;
    if (start > latest) latest = start, used = count;
  }
  return used;
}

bool wait_for_units(Process& server, const std::string& pattern, std::int64_t units, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (true) {
    const std::string key = state_key(server, pattern);
    if (!key.empty() && used_of(server, key) == units) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string state_key(Process& server, const std::string& pattern) {
  const redlimit::Reply keys = server.command({"KEYS", "*" + pattern + "*:fw"});
  for (const auto& k : keys.elements) {
    if (used_of(server, k.str) >= 0) return k.str;
  }
  return {};
}

std::string info_field(const std::string& info, const std::string& field) {
  const std::string key = field + ":";
  std::size_t at = info.find(key);
  while (at != std::string::npos && at != 0 && info[at - 1] != '\n') at = info.find(key, at + 1);
  if (at == std::string::npos) return {};
  const std::size_t from = at + key.size(), to = info.find_first_of("\r\n", from);
  return info.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

Process::Process(std::string name, const MakeArgs& make_args, std::string password)
    : name_(std::move(name)), password_(std::move(password)) {
  std::string tmpl = temp_base() + "/redlimit-sentinel-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
  dir_ = tmpl;
  std::string errors;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    std::string error;
    if (start_once(make_args, error)) return;
    errors += "\n  attempt " + std::to_string(attempt) + ": " + error;
  }
  throw std::runtime_error("could not start " + name_ + ":" + errors);
}

Process::~Process() {
  kill9();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool Process::start_once(const MakeArgs& make_args, std::string& error) {
  port_ = free_port();
  pid_ = spawn(make_args(port_, dir_), dir_ + "/log");
  if (const char* piddir = std::getenv("REDLIMIT_TEST_PIDDIR"); piddir != nullptr && *piddir != '\0') {
    pid_file_ = std::string(piddir) + "/" + std::to_string(pid_);
    std::ofstream(pid_file_) << pid_ << '\n';
  }
  const auto until = Clock::now() + 10s;
  while (Clock::now() < until) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      error = name_ + " exited on port " + std::to_string(port_) + "; log:\n" + log();
      if (log().find("Address already in use") != std::string::npos) return false;  // taken meanwhile
      throw std::runtime_error(error);
    }
    try {
      // Answered by our process, not by a server of someone else's that took the port first (ours
      // then exits, which the waitpid above sees).
      const redlimit::Reply info = command({"INFO", "server"});
      if (!info.is_error() && info_field(info.str, "process_id") == std::to_string(pid_)) return true;
    } catch (const redlimit::Error&) {
    }
    std::this_thread::sleep_for(20ms);
  }
  kill9();
  throw std::runtime_error(name_ + " did not answer PING within 10 s; log:\n" + log());
}

void Process::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (!pid_file_.empty()) ::unlink(pid_file_.c_str());
  pid_file_.clear();
}

void Process::pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void Process::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string Process::log() const { return read_file(dir_ + "/log"); }

redlimit::Reply Process::command(const std::vector<std::string>& argv) const {
  redlimit::Endpoint e;
  e.host = "127.0.0.1";
  e.port = port_;
  e.password = password_;
  redlimit::RedisConnection conn(e, std::chrono::milliseconds(1000), std::chrono::milliseconds(5000));
  return conn.command(argv);
}

namespace {

// The TLS settings of a server or sentinel listening with TLS on `tls_port` (DeploymentOptions).
std::vector<std::pair<std::string, std::string>> tls_settings(const DeploymentOptions& o, int tls_port) {
  return {{"tls-port", std::to_string(tls_port)}, {"tls-cert-file", o.tls_cert}, {"tls-key-file", o.tls_key},
          {"tls-ca-cert-file", o.tls_ca},         {"tls-auth-clients", "no"},    {"tls-replication", "yes"}};
}

// `master_port`: the master's port to replicate from (its TLS port with TLS), 0 for the master.
std::vector<std::string> data_server_args(int port, int tls_port, const std::string& dir, const DeploymentOptions& o,
                                          int master_port) {
  std::vector<std::string> args = {server_binary(), "--port", std::to_string(port), "--bind", "127.0.0.1", "--dir", dir,
                                   "--save",        "",       "--appendonly",       "no"};
  if (server_major_version() >= 7) args.insert(args.end(), {"--enable-debug-command", "local"});
  if (!o.requirepass.empty()) args.insert(args.end(), {"--requirepass", o.requirepass, "--masterauth", o.requirepass});
  if (master_port > 0) args.insert(args.end(), {"--replicaof", "127.0.0.1", std::to_string(master_port)});
  if (tls_port > 0) {
    for (const auto& [name, value] : tls_settings(o, tls_port)) args.insert(args.end(), {"--" + name, value});
  }
  return args;
}

std::vector<std::string> sentinel_args(int port, int tls_port, const std::string& dir, const DeploymentOptions& o,
                                       int master_port) {
  const std::string conf = dir + "/sentinel.conf";
  const std::string& name = o.master_name;
  std::ofstream out(conf);
  out << "port " << port << "\nbind 127.0.0.1\ndir " << dir << "\n"
      << "sentinel monitor " << name << " 127.0.0.1 " << master_port << " 2\n"
      << "sentinel down-after-milliseconds " << name << " " << o.down_after_ms << "\n"
      << "sentinel failover-timeout " << name << " " << o.failover_timeout_ms << "\n"
      << "sentinel parallel-syncs " << name << " 1\n";
  if (!o.requirepass.empty()) out << "sentinel auth-pass " << name << " " << o.requirepass << "\n";
  if (!o.sentinel_password.empty()) {
    out << "requirepass " << o.sentinel_password << "\n";
    // How a sentinel authenticates to the others: `sentinel sentinel-pass` from 6.2 on, an unknown
    // statement to 6.0, whose sentinels send their own requirepass instead (the same one here).
    if (server_major_version() >= 7) {
      out << "sentinel sentinel-pass " << o.sentinel_password << "\n";
    }
  }
  if (tls_port > 0) {
    for (const auto& [name, value] : tls_settings(o, tls_port)) out << name << " " << value << "\n";
  }
  out.close();
  const std::string own = env_or("REDIS_SENTINEL", "");
  if (!own.empty()) return {own, conf};
  return {server_binary(), conf, "--sentinel"};
}

// SENTINEL MASTER's flat field/value array, as a lookup.
std::string sentinel_field(const redlimit::Reply& r, const std::string& field) {
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    if (r.elements[i].str == field) return r.elements[i + 1].str;
  }
  return {};
}

}  // namespace

Deployment::Deployment(DeploymentOptions options) : options_(std::move(options)) {
  const DeploymentOptions& o = options_;
  // Each start attempt (Process retries on a taken port) picks a TLS port of its own too.
  const auto tls_port = [&](std::size_t i) { return tls_ports_[i] = o.tls_cert.empty() ? 0 : free_port(); };
  master_ = std::make_unique<Process>(
      "master", [&](int port, const std::string& dir) { return data_server_args(port, tls_port(0), dir, o, 0); },
      o.requirepass);
  // With TLS the replica and the sentinels reach the master on its TLS port (tls-replication).
  const int master_port = o.tls_cert.empty() ? master_->port() : tls_ports_[0];
  replica_ = std::make_unique<Process>(
      "replica",
      [&](int port, const std::string& dir) { return data_server_args(port, tls_port(1), dir, o, master_port); },
      o.requirepass);
  for (std::size_t i = 0; i < 3; ++i) {
    sentinels_.push_back(std::make_unique<Process>(
        "sentinel " + std::to_string(i),
        [&, i](int port, const std::string& dir) { return sentinel_args(port, tls_port(2 + i), dir, o, master_port); },
        o.sentinel_password));
  }
  wait_until_ready();
}

Deployment::~Deployment() = default;

void Deployment::wait_until_ready() {
  const auto until = Clock::now() + 30s;
  std::string state;
  while (Clock::now() < until) {
    bool ready = info_field(replica_->command({"INFO", "replication"}).str, "master_link_status") == "up";
    state = "replica link " + std::string(ready ? "up" : "down");
    for (const auto& s : sentinels_) {
      const redlimit::Reply m = s->command({"SENTINEL", "MASTER", options_.master_name});
      const std::string slaves = sentinel_field(m, "num-slaves"), others = sentinel_field(m, "num-other-sentinels");
      state += "; sentinel " + std::to_string(s->port()) + ": " + slaves + " replica(s), " + others + " other(s)";
      ready = ready && slaves == "1" && others == "2";
    }
    if (ready) return;
    std::this_thread::sleep_for(100ms);
  }
  throw std::runtime_error("the Sentinel deployment was not ready within 30 s: " + state + "\nsentinel 0's log:\n" +
                           sentinels_[0]->log());
}

std::string Deployment::sentinel_hosts(bool tls) const {
  std::string hosts;
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    const int port = tls ? sentinel_tls_port(i) : sentinels_[i]->port();
    hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(port);
  }
  return hosts;
}

std::string Deployment::url(const std::string& userinfo, const std::string& query) const {
  return "redis-sentinel://" + userinfo + sentinel_hosts(false) + "/" + options_.master_name + query;
}

std::string Deployment::tls_url(const std::string& query) const {
  return "rediss-sentinel://" + sentinel_hosts(true) + "/" + options_.master_name + "?" + query;
}

std::string Deployment::master_address() const {
  for (const auto& s : sentinels_) {
    if (!s->running()) continue;
    const redlimit::Reply r = s->command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
    if (r.elements.size() == 2) return r.elements[0].str + ":" + r.elements[1].str;
  }
  return {};
}

bool Deployment::wait_for_master(const std::string& address, std::chrono::milliseconds limit) const {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    bool all = true;
    for (const auto& s : sentinels_) {
      if (!s->running()) continue;
      const redlimit::Reply r = s->command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
      all = all && r.elements.size() == 2 && r.elements[0].str + ":" + r.elements[1].str == address;
    }
    if (all) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

bool Deployment::wait_for_subscribers(std::size_t count, std::chrono::milliseconds limit) const {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    std::size_t seen = 0;
    for (const auto& s : sentinels_) {
      if (!s->running()) continue;
      const std::string clients = s->command({"CLIENT", "LIST"}).str;
      for (auto at = clients.find(" sub=1 "); at != std::string::npos; at = clients.find(" sub=1 ", at + 1)) ++seen;
    }
    if (seen >= count) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

int refused_port() {
  const char* server = std::getenv("REDIS_SERVER");
  Process gone("scratch", [server](int port, const std::string&) {
    return std::vector<std::string>{server != nullptr ? server : "redis-server",
                                    "--port",
                                    std::to_string(port),
                                    "--bind",
                                    "127.0.0.1",
                                    "--save",
                                    ""};
  });
  return gone.port();
}  // stopped here: its port refuses connections

}  // namespace redlimit_sentinel
