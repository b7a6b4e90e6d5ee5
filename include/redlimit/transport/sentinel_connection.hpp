#pragma once
// A Connection to the master of a Redis Sentinel deployment (redis-sentinel://, or
// rediss-sentinel:// with TLS to the sentinels and the master; docs/connecting.md).
//
// Discovery: the sentinels are asked in turn (starting with the one that answered last) for the
// address of the master (SENTINEL GET-MASTER-ADDR-BY-NAME); the address a sentinel gives is
// confirmed with ROLE on a data connection (it must say "master"), else the next sentinel is asked.
// A pass that found no confirmed master is tried again after a short pause while the call has time
// left (a failover in progress), max_rounds() passes at most. Each connection is bounded by
// Options::connect_timeout, the whole by the call's deadline (Options::command_timeout).
//
// The master found is then served by a ConnectionPool, as for redis://. It is found again:
//   - after a command on it failed in transit (ConnectionError, TimeoutError): that command's
//     outcome is unknown, so it is never re-sent (the error goes to the caller and its failure
//     policy); the next call asks the sentinels first;
//   - after a -READONLY or -LOADING reply (a master demoted to replica, a replica restarting): the
//     server refused the command before it could change anything (on a replica every write of a
//     script is refused, so nothing was recorded), so it is re-sent once to the master found
//     again, if the call still has time; otherwise the reply goes to the caller (an outage reply:
//     the failure policy answers).
//   - when a sentinel names another master: every SentinelEndpoint::check_interval_ms (1 s by
//     default, ?sentinel_check_ms=) one call asks the sentinel that answered last, before its
//     command. A failover whose old master stays up (SENTINEL FAILOVER, a network partition) is
//     not seen otherwise until Sentinel demotes it, some 10 s later, and meanwhile it takes
//     writes the new master never sees (Sentinel's own split-brain window; min-replicas-to-write
//     on the server narrows it).
//   - when a sentinel announces a failover: a thread of the connection's own stays subscribed to
//     +switch-master on one sentinel (the next one when that connection ends), and an announcement
//     naming another master for our name makes the next call confirm that master with ROLE (and
//     ask the sentinels when it is not one).
//     A failover whose old master stays up is then followed as soon as Sentinel completes it, not
//     at the next check; sentinels that all refuse SUBSCRIBE (an ACL) leave the check to do it.
// The same address found again keeps its pool (its connections reconnect by themselves).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "redlimit/options.hpp"
#include "redlimit/transport/connection.hpp"
#include "redlimit/transport/connection_pool.hpp"
#include "redlimit/url.hpp"

namespace redlimit {

namespace hiredis_detail {
class SwitchListener;
}

class SentinelConnection final : public Connection {
 public:
  // No I/O on the caller's thread (the +switch-master subscription starts on a thread of its own;
  // the destructor stops it): the first command finds the master (RateLimiter::connect's first
  // PING, which follows the failure policy). Discovery throws ConnectionError when no sentinel answered or no master
  // could be confirmed within the call, and AuthError (configuration, thrown by connect() whatever
  // the policy) when every sentinel refused our sentinel credentials or knows no master of that
  // name, or the master refused the data credentials.
  SentinelConnection(SentinelEndpoint endpoint, const Options& options);
  ~SentinelConnection() override;

  Reply command(const std::vector<std::string>& argv) override;
  std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands) override;
  bool thread_safe() const override { return true; }
  void begin_call(std::chrono::steady_clock::time_point started) override;
  void end_call() noexcept override;

  // As ConnectionPool::on_connect, for the pool of every master found. Set it before sharing.
  void on_connect(ConnectionPool::ConnectHook hook) { hook_ = std::move(hook); }

  // "host:port" of the master in use ("" before the first discovery).
  std::string master() const;
  // Times the sentinels were asked and a master confirmed.
  std::uint64_t discoveries() const { return discoveries_.load(); }
  // +switch-master announcements heard for our master name (a sentinel completed a failover).
  std::uint64_t announcements() const { return announcements_.load(); }
  // Discovery passes over the sentinels in one call, at most.
  static constexpr int max_rounds() { return 5; }

 private:
  // The pool of the confirmed master; asks the sentinels first when there is none or it failed.
  std::shared_ptr<ConnectionPool> current();
  std::shared_ptr<ConnectionPool> rediscover();
  // After `pool` failed (in transit, or READONLY / LOADING): the next call asks the sentinels.
  void forget(const std::shared_ptr<ConnectionPool>& pool) noexcept;
  // One command on `pool`; forgets the pool after a failure in transit (rethrown) or a refusal.
  Reply send(const std::shared_ptr<ConnectionPool>& pool, const std::vector<std::string>& argv);
  void lock_for_discovery(std::unique_lock<std::mutex>& lock) const;
  // The periodic check (check_interval_ms): asks one sentinel, at most once per interval, by one
  // thread (the others go on); marks the pool stale when the sentinel names another master.
  void check_now_and_then();
  // On the listener's thread: an announced master other than the one in use makes the pool stale.
  void heard_switch(const std::string& host, int port);

  SentinelEndpoint endpoint_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds command_timeout_;
  PoolOptions pool_options_;
  ConnectionPool::ConnectHook hook_;

  mutable std::mutex mutex_;  // guards the five below
  std::shared_ptr<ConnectionPool> pool_;
  std::string master_;                               // pool_'s address
  bool stale_ = true;                                // pool_ failed: ask the sentinels before the next command
  std::chrono::steady_clock::time_point checked_{};  // the last discovery or check
  struct Announced {
    std::string host;
    int port = 0;  // 0: none
  } announced_;    // the master a sentinel announced since the last discovery: confirmed first

  std::mutex discovery_mutex_;  // one discovery at a time; guards next_sentinel_
  std::size_t next_sentinel_ = 0;
  std::atomic<std::uint64_t> discoveries_{0};
  std::atomic<std::uint64_t> announcements_{0};
  // Last: destroyed (its thread stopped) before anything its callback touches.
  std::unique_ptr<hiredis_detail::SwitchListener> listener_;
};

}  // namespace redlimit
