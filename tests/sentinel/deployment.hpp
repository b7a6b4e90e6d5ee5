#pragma once
// A Redis Sentinel deployment for the tests, all our own processes on free loopback ports: one
// master, one replica and three sentinels (quorum 2), each in a private directory under
// $REDLIMIT_TEST_TMPDIR (else /tmp), killed with the test process (PR_SET_PDEATHSIG) and listed in
// $REDLIMIT_TEST_PIDDIR while they run (scripts/test.sh stops what a killed test left behind).
//
// Binaries: $REDIS_SERVER (else redis-server) for the data servers; $REDIS_SENTINEL (else the same
// redis-server with --sentinel, which is what Debian's redis-sentinel runs) for the sentinels.
// Start deployments from the main thread (the parent-death signal is tied to the forking thread).
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/reply.hpp"

namespace redlimit_sentinel {

// One server process of our own (redis-server, or a sentinel).
class Process {
 public:
  // Starts `args` (port and config included: `make_args(port, dir)`) on a free port, retrying with
  // another port if it was taken, and waits until it answers PING. Throws std::runtime_error.
  using MakeArgs = std::function<std::vector<std::string>(int port, const std::string& dir)>;
  // `password`: the server's requirepass, sent by the harness's own connections ("": none).
  Process(std::string name, const MakeArgs& make_args, std::string password = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  bool running() const { return pid_ > 0; }
  void kill9();  // SIGKILL and reap; idempotent
  // SIGSTOP / SIGCONT: a process that hangs (its connections stay open, nothing answers).
  void pause();
  void resume();
  std::string log() const;
  // One command on a fresh connection of the harness's own (with the server's password).
  redlimit::Reply command(const std::vector<std::string>& argv) const;

 private:
  bool start_once(const MakeArgs& make_args, std::string& error);
  std::string name_;
  std::string password_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string pid_file_;
};

// The major version of the servers a Deployment starts ($REDIS_SERVER: 6 for Redis 6.0), for what
// a test may ask of them (ACL channel patterns are 6.2's, say).
int server_major_version();

struct DeploymentOptions {
  std::string master_name = "mymaster";
  std::string requirepass;        // the data servers' default-user password ("": none)
  std::string sentinel_password;  // the sentinels' own requirepass ("": none)
  int down_after_ms = 500;
  int failover_timeout_ms = 2000;
  // TLS (tests/tls): PEM files of the servers' certificate, its key and the CA. With tls_cert set,
  // every server also listens with TLS on a port of its own (tls_port()), and the replica and the
  // sentinels reach the data servers over TLS (tls-replication), so the sentinels name TLS ports;
  // the harness's own connections stay on the clear ports. No server asks its clients for a
  // certificate (tls-auth-clients no): a server's own certificate is no client certificate.
  std::string tls_cert, tls_key, tls_ca;
};

class Deployment {
 public:
  // Starts master, replica and sentinels, and waits (at most 30 s) until the replica is in sync and
  // every sentinel knows the replica and the two other sentinels (only then can they fail over).
  explicit Deployment(DeploymentOptions options = {});
  ~Deployment();

  // redis-sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/<master-name>; `userinfo` ("u:p@") and
  // `query` ("?...") as given.
  std::string url(const std::string& userinfo = {}, const std::string& query = {}) const;
  // rediss-sentinel://127.0.0.1:T1,127.0.0.1:T2,127.0.0.1:T3/<master-name>?<query>: the sentinels'
  // TLS ports (DeploymentOptions::tls_cert).
  std::string tls_url(const std::string& query) const;
  // The TLS port of the master, the replica, sentinel i (0 without TLS).
  int master_tls_port() const { return tls_ports_[0]; }
  int replica_tls_port() const { return tls_ports_[1]; }
  int sentinel_tls_port(std::size_t i) const { return tls_ports_.at(2 + i); }
  const DeploymentOptions& options() const { return options_; }
  Process& master() { return *master_; }
  Process& replica() { return *replica_; }
  Process& sentinel(std::size_t i) { return *sentinels_.at(i); }
  // "host:port" that sentinel 0 names as the master now.
  std::string master_address() const;
  // Waits (at most `limit`) until every live sentinel names `address` as the master.
  bool wait_for_master(const std::string& address, std::chrono::milliseconds limit) const;
  // Waits (at most `limit`) until `count` clients of the live sentinels are subscribed to a channel:
  // clients' +switch-master listeners (sentinels subscribe to nothing on each other; their hello
  // channel is on the Redis servers).
  bool wait_for_subscribers(std::size_t count, std::chrono::milliseconds limit) const;

 private:
  void wait_until_ready();
  // "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3": the sentinels' clear or TLS ports.
  std::string sentinel_hosts(bool tls) const;

  DeploymentOptions options_;
  std::unique_ptr<Process> master_;
  std::unique_ptr<Process> replica_;
  std::vector<std::unique_ptr<Process>> sentinels_;
  std::vector<int> tls_ports_ = std::vector<int>(5, 0);  // master, replica, the three sentinels
};

// The units the fixed window's state `key` on `server` holds in its latest window (a hash:
// lua/fixed_window.lua), -1 if it is not one.
std::int64_t used_of(Process& server, const std::string& key);
// The key of the fixed-window state whose name holds `pattern` on `server` ("" when none).
std::string state_key(Process& server, const std::string& pattern);
// Waits (at most `limit`) until that state on `server` holds `units`: a write replicated to a
// replica before a test fails over to it (replication is asynchronous: a replica promoted while it
// still lags loses what it had not read, which on a loaded machine can be a test's last write).
bool wait_for_units(Process& server, const std::string& pattern, std::int64_t units, std::chrono::milliseconds limit);

// A loopback port where nothing listens now (a sentinel of a deployment that is down): a
// redis-server of ours was started there and stopped again.
int refused_port();

// The value of `field` in an INFO reply ("" when missing).
std::string info_field(const std::string& info, const std::string& field);

}  // namespace redlimit_sentinel
