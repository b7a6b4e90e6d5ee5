#pragma once
// A throwaway redis-server for integration tests: our own process, on a free loopback port and a unix
// socket inside a fresh private directory, with persistence off. It is stopped (and its directory
// removed) by the destructor, and dies with the test process even when that is killed (the child
// asks the kernel for SIGKILL when its parent goes away).
//
// The binary is $REDIS_SERVER, else `redis-server` from PATH. The private directory is made in
// $REDLIMIT_TEST_TMPDIR (else /tmp). When $REDLIMIT_TEST_PIDDIR names a directory, the server's pid
// is written there while it runs, so that scripts/test.sh can clean up after a test binary that was
// killed outright.
//
// Start servers from the main thread: the kernel's parent-death signal is tied to the thread that
// forked, so a server started from a worker thread would be killed when that thread ends.
#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/reply.hpp"

namespace redlimit {
class RedisConnection;
}

namespace redlimit_test {

class RedisServer {
 public:
  // Starts the server and waits (at most ~10 s) until it answers PING, retrying with another port if
  // the one picked was taken meanwhile. Throws std::runtime_error (with the server's log) on failure.
  RedisServer();
  // A TLS server: `--port 0 --tls-port PORT` plus `tls_args` (--tls-cert-file and the like), so
  // port() is the TLS port and nothing listens in clear on TCP, unless `plain_too` (then url() names
  // a plain port of the same server). The harness's own connection (command()) uses the unix socket.
  explicit RedisServer(std::vector<std::string> tls_args, bool plain_too = false);
  // A cluster node (cluster-enabled, its nodes.conf in dir()), its bus on a free port of its own
  // (bus_port(), for CLUSTER MEET): port + 10000 may not exist. `tls_args` as above; with
  // --tls-cluster yes the node announces its TLS port and the bus speaks TLS.
  struct ClusterNode {};
  RedisServer(ClusterNode, std::vector<std::string> tls_args);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  int bus_port() const { return bus_port_; }  // a cluster node's bus port, else 0
  pid_t pid() const { return pid_; }
  // The private directory holding the socket and the log.
  const std::string& dir() const { return dir_; }
  const std::string& unix_path() const { return unix_path_; }
  // "redis://127.0.0.1:PORT/DB" (a TLS server's plain port, if it has one).
  std::string url(int db = 0) const;
  // "unix:///tmp/redlimit-test-XXXXXX/redis.sock" (db 0).
  std::string unix_url() const;
  // The binary's major version (6 for Redis 6.0; Valkey 8 answers 7, the Redis it speaks as).
  int major_version() const;
  // A script's text as this server takes it: without its `#!lua` first line on a server older
  // than 7.0 (redlimit's Script::legacy_source), as it is otherwise.
  std::string runnable(std::string_view source) const;

  // Runs one raw command on a connection of the harness's own (db 0), for assertions. Error replies
  // are returned, not thrown. Thread-safe.
  redlimit::Reply command(const std::vector<std::string>& argv);
  // command() that must answer an integer; throws std::runtime_error otherwise.
  std::int64_t integer(const std::vector<std::string>& argv);
  // Keys in db 0.
  std::int64_t dbsize() { return integer({"DBSIZE"}); }
  // Every key of db 0 (SCAN until the cursor is back at 0).
  std::vector<std::string> keys();

  bool running() const { return pid_ > 0; }
  // SIGTERM, then SIGKILL if it has not exited within a few seconds; reaps it. Idempotent. The
  // directory stays until destruction.
  void stop();
  // SIGKILL at once (no graceful shutdown: what is in flight stays unanswered); reaps it.
  void kill();
  // The server's log so far (for failure messages).
  std::string log() const;

 private:
  void start();
  bool start_once(std::string& error);
  void kill_and_reap(int first_signal = SIGTERM);

  std::string dir_;
  std::string unix_path_;
  std::string log_path_;
  std::string pid_file_;
  std::vector<std::string> tls_args_;  // empty: a plain TCP server
  bool plain_too_ = false;
  int port_ = 0;
  int plain_port_ = 0;  // a TLS server's clear port (plain_too), else 0
  bool cluster_ = false;
  int bus_port_ = 0;
  pid_t pid_ = -1;
  std::mutex mutex_;
  std::unique_ptr<redlimit::RedisConnection> conn_;
};

// The server shared by the whole integration suite, started by a gtest global environment
// (tests/support/environment.cpp). Throws std::runtime_error when it could not be started.
RedisServer& shared_server();

}  // namespace redlimit_test
