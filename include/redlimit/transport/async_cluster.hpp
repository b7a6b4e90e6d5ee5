#pragma once
// The asynchronous API on a Redis Cluster: an AsyncConnection that sends each command to the master
// serving its key's slot, over one asynchronous connection per master (AsyncRedis, on the caller's
// event loop), all on one loop.
//
//   auto limiter = redlimit::RateLimiter::connect("redis-cluster://127.0.0.1:7000,127.0.0.1:7001");
//   limiter.attach_async(redlimit::AsyncCluster::attach_libevent(base, redlimit::parse_cluster_url(url)));
//
// Routing. The slot map is a ClusterConnection's: one of its own, read at attach, until a limiter
// over a cluster attaches it (RateLimiter::attach_async), and from then on that limiter's, so that
// the limiter's per-master breakers and both paths go by one map. The map is read again with an
// asynchronous CLUSTER SLOTS when a slot's owner is unknown, and, to another master, after a master
// fails a call in transit or a breaker refuses a call for it (shard_refused), so that the slots of
// a master replaced by a failover go to its promoted replica; the other masters are asked in turn,
// one re-read after another. MOVED is followed to the new owner, which the map learns for the next
// calls; ASK is followed behind ASKING; at most ClusterConnection::max_redirects() in a row, after
// which the redirect is the reply (an outage for the failure policy). TRYAGAIN and CLUSTERDOWN are
// retried as on the synchronous path (10 to 100 ms apart, at most ClusterConnection::max_retries()
// times, within the call's deadline), the waits on the loop's timer (post_after); what is left is
// the reply. A command answered MOVED, ASK, TRYAGAIN or CLUSTERDOWN did not run, so sending it
// again never replays a call. FUNCTION LOAD and SCRIPT LOAD go to every master; their reply is the
// first error any master gave, else the first answer. Each call keeps its one deadline across its
// redirects and retries.
//
// Threads. As for AsyncRedis: callbacks run on the loop's thread, and attach_* must be called on the
// loop's thread or before the loop runs; the masters known then get their connection at once. A
// master met later (a failover, resharding) gets its connection on the loop's thread. No call
// blocks: a slot whose owner the map does not know (a map read while slots were unassigned, or a
// limiter's that started without one) is sent to a master with a connection, whose MOVED names
// the owner, while an asynchronous CLUSTER SLOTS reads the map again.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/transport/async_connection.hpp"
#include "redlimit/transport/cluster_connection.hpp"
#include "redlimit/transport/redis_async.hpp"

struct event_base;
struct uv_loop_s;

namespace redlimit {

class AsyncCluster final : public AsyncConnection, public std::enable_shared_from_this<AsyncCluster> {
 public:
  // One master's connection, made on the loop's thread.
  using Connect = std::function<std::shared_ptr<AsyncConnection>(const Endpoint&)>;

  // Each master over AsyncRedis::attach_libevent / attach_libuv (same errors) with `options`.
  // Reads the slot map: ConnectionError when no seed answers, AuthError / TlsError for refused
  // credentials or certificates.
  static std::shared_ptr<AsyncCluster> attach_libevent(event_base* base, ClusterEndpoint seeds,
                                                       AsyncOptions options = {});
  static std::shared_ptr<AsyncCluster> attach_libuv(uv_loop_s* loop, ClusterEndpoint seeds, AsyncOptions options = {});
  // Over any per-master connection (tests; another loop): `connect` makes one, on the loop's thread.
  static std::shared_ptr<AsyncCluster> attach(ClusterEndpoint seeds, Connect connect, AsyncOptions options = {});

  void command_async(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error) override;
  void command_async_until(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error,
                           Deadline deadline) override;
  Deadline call_deadline() const override;
  // On the loop's thread, through a master's connection (at once, here, when there is none).
  void post(std::function<void()> task) override;
  void post_after(std::chrono::milliseconds delay, std::function<void()> task) override;
  bool routes_by_slot() const override { return true; }
  // Takes the limiter's slot map when it is a ClusterConnection's (see Routing above). Attached to
  // several limiters, it goes by the last one's map: give each limiter an AsyncCluster of its own.
  void share_routing(const std::shared_ptr<Connection>& limiter_connection) override;
  // Reads the map again, asynchronously (relearn), the master now serving `key` asked last.
  void shard_refused(std::string_view key) override;
  // Every master's AsyncRedis::send_now.
  void send_now() override;

  // Masters with a connection so far.
  std::size_t connections() const;

  AsyncCluster(ClusterEndpoint seeds, Connect connect, AsyncOptions options);  // use attach*

 private:
  struct Call;  // one command on its way, with what a redirect needs to send it again
  void route(const std::shared_ptr<Call>& call, const Endpoint& to, bool asking);
  // Where a call for `slot` goes first: the master the map names, with no I/O; for a slot whose
  // owner the map does not know, a master with a connection, in turn (its MOVED names the owner),
  // and the map is read again (relearn). ConnectionError when there is no master to send to.
  Endpoint target(std::uint16_t slot);
  // The masters to send a command for every master to: the map's, else those with a connection.
  std::vector<Endpoint> every_master();
  bool retry_later(const std::shared_ptr<Call>& call);
  // An asynchronous CLUSTER SLOTS to a master other than `failed` ("host:port"), into the map.
  void relearn(const std::string& failed);
  std::shared_ptr<ClusterConnection> map() const;
  void broadcast(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error, Deadline deadline);
  // The master's connection, or null when it has none yet (it is then made on the loop's thread).
  std::shared_ptr<AsyncConnection> connection_to(const Endpoint& e);
  std::shared_ptr<AsyncConnection> any_connection() const;
  void connect_masters();

  std::shared_ptr<ClusterConnection> map_;  // under mutex_: share_routing() replaces it
  Connect connect_;
  AsyncOptions options_;
  mutable std::mutex mutex_;
  struct Master {
    Endpoint endpoint;
    std::shared_ptr<AsyncConnection> connection;
  };
  std::map<std::string, Master> masters_;  // by "host:port"
  bool relearning_ = false;  // a CLUSTER SLOTS of relearn() is on its way
  std::chrono::steady_clock::time_point next_relearn_{};
  std::size_t relearn_turn_ = 0;  // which of the other masters relearn() asks next
  std::size_t unmapped_turn_ = 0;  // which master target() sends the next unmapped slot's call to
};

}  // namespace redlimit
