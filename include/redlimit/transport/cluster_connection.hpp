#pragma once
// A Connection to a Redis Cluster: we route ourselves, as hiredis 0.14 has no cluster support.
// Each command goes to the master owning its key's slot (CRC16 of the {hash tag}); the slot map
// comes from CLUSTER SLOTS and is refreshed on MOVED and on connection errors. MOVED and ASK are
// followed (ASK with ASKING); TRYAGAIN and CLUSTERDOWN are retried with a bounded backoff, from the
// slot's owner again; a redirect still unresolved at the end is returned as the reply, which the
// decision path treats as an outage. Reads stay on masters. Each master is a shard of its own
// (node_of), with its own circuit breaker. A command whose outcome is unknown (I/O error, timeout)
// is never replayed: the error goes to the caller (and its failure policy), or, in a pipeline whose
// other nodes answered, that command's reply is a transit_failure(); the map is refreshed for the
// next call. One call's
// deadline (now + command_timeout) bounds everything it does: pool waits, redirects, the TRYAGAIN
// backoff and a refresh (docs/reliability.md §7).
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/transport/connection.hpp"
#include "redlimit/transport/connection_pool.hpp"
#include "redlimit/options.hpp"
#include "redlimit/url.hpp"

namespace redlimit {

// redis-cluster://[user:password@]host:port[,host:port...][?user=U&password=P&password_env=NAME] — the
// seed nodes; rediss-cluster://...[?tls_ca_file=...&...] over TLS, with the tls_* parameters of
// rediss:// (docs/connecting.md). Each seed is the Endpoint parse_url makes of redis:// (rediss://)
// with the same userinfo and query; db 0 only. The nodes found in CLUSTER SLOTS get the first seed's
// credentials and TLS options, and their certificate is verified against the host the slot map names
// (unless tls_server_name names one for every node).
struct ClusterEndpoint {
  std::vector<Endpoint> seeds;
};
ClusterEndpoint parse_cluster_url(std::string_view url);

class ClusterConnection final : public Connection {
 public:
  // Reads the slot map from the first seed that answers; throws ConnectionError if none does (under
  // OnFailure::raise; other policies start without a map). A seed refusing our credentials or, over
  // TLS, refused by our verification throws AuthError (TlsError) whatever the policy; TLS options
  // that cannot be used (a file that cannot be read, a build without TLS) are an InvalidArgument
  // before any I/O.
  ClusterConnection(ClusterEndpoint endpoint, const Options& options);

  Reply command(const std::vector<std::string>& argv) override;
  std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands) override;
  bool thread_safe() const override { return true; }
  bool scripts_span_slots() const override { return false; }
  // Its masters take spread calls: the library's spread functions, or the EVAL texts' spread form.
  bool scripts_span_node() const override { return true; }
  // The master serving the key's slot in the current map: a number per node, stable for the
  // connection's life (0 while the slot's owner is unknown).
  std::size_t node_of(std::string_view key) const override;
  // The map read again (the refused node's address asked last), at most every 100 ms.
  void shard_refused(std::string_view key) override;
  // Whether the current map names the shard's node for any slot.
  bool shard_serves(std::size_t shard) const override;
  void begin_call(std::chrono::steady_clock::time_point started) override;
  void end_call() noexcept override;

  // Re-reads CLUSTER SLOTS from any node that answers.
  void refresh();
  // "host:port" of the master serving `slot` (for tests and diagnostics).
  std::string node_for_slot(std::uint16_t slot) const;
  // Masters known from the last refresh.
  std::vector<std::string> masters() const;

  // For a router of its own over this slot map (AsyncCluster). The endpoint of the master serving
  // `slot` (the map is read first when the slot's owner is unknown: ConnectionError when no node
  // answers); of every master; of any node by name, with the seeds' credentials and TLS options.
  Endpoint master_endpoint(std::uint16_t slot);
  std::vector<Endpoint> master_endpoints();
  // The same from the map as it stands, with no I/O: nullopt (none) while the slot's owner (every
  // owner) is unknown, where the two above read the map first. For a router that must not block.
  std::optional<Endpoint> mapped_master(std::uint16_t slot) const;
  std::vector<Endpoint> mapped_masters() const;
  // A reply of a command sent for `slot`: when it is MOVED (the map learns the slot's new owner,
  // with no I/O) or ASK (`ask` set: this command only, behind ASKING), where to send it again.
  std::optional<Endpoint> redirected_to(const Reply& reply, std::uint16_t slot, bool& ask);
  // A CLUSTER SLOTS reply that a node on `answered_by` (its host) gave, read by the router itself
  // (AsyncCluster reads it asynchronously): the map takes what it says. False, and the map as it
  // was, for a reply that is not a slot map.
  bool learn_slots(const Reply& slots, const std::string& answered_by);

  // MOVED/ASK followed in a row before the redirect is returned as the reply (an outage).
  static constexpr int max_redirects() { return 5; }
  // TRYAGAIN/CLUSTERDOWN retries of one command (10, 20, 40, 80, then 100 ms apart), fewer when the
  // call's deadline comes first.
  static constexpr int max_retries() { return 10; }
  // TRYAGAIN (a multi-key command on a slot mid-migration whose keys are split) or CLUSTERDOWN: the
  // command did not run, and may once the slot settles.
  static bool asks_to_wait(const Reply& r);
  // The wait before retry `n` (1, 2, ...) of such a command: 10, 20, 40, 80, then 100 ms.
  static std::chrono::milliseconds retry_wait(int n) {
    return n >= 5 ? std::chrono::milliseconds(100) : std::chrono::milliseconds(10 << (n - 1));
  }

 private:
  struct Node {
    Endpoint endpoint;
    std::shared_ptr<ConnectionPool> pool;
    std::size_t shard = 0;  // 1, 2, ...: the order we met the node in
  };
  std::shared_ptr<Node> node(const std::string& host, int port);
  std::shared_ptr<Node> route(std::uint16_t slot);
  // The masters the map names, each once, in the order of their first slots; no I/O.
  std::vector<std::shared_ptr<Node>> named_masters() const;
  // refresh(), ignoring a failure (no node answered: the map stays as it was), for callers that go
  // on, or throw their own error, either way.
  // Within the call's deadline: when the call has no time left, the refresh is left to the next
  // call routed to `suspect` (the node that failed), which does it first.
  void refresh_quietly(const std::shared_ptr<Node>& suspect = nullptr);
  // refresh(), asking `suspect` last. With `wait` false, returns at once when another thread is
  // refreshing already; otherwise waits for it until the call's deadline (then TimeoutError).
  void refresh_avoiding(const std::shared_ptr<Node>& suspect, bool wait = true);
  // Takes refresh_mutex_: at once (false if another thread holds it) or, with `wait`, waiting until the
  // call's deadline (then TimeoutError).
  bool lock_refresh(std::unique_lock<std::timed_mutex>& one_at_a_time, bool wait);
  // A CLUSTER SLOTS reply into slots_ (answered by the node at host `answered_by`).
  void apply_slots(const Reply& slots, const std::string& answered_by);
  // route(), after the refresh a previous call left to this node's next caller.
  std::shared_ptr<Node> route_fresh(std::uint16_t slot);
  Reply send(const std::vector<std::string>& argv, std::uint16_t slot);
  // The node a MOVED or ASK `reply` names (null for any other reply, or one that cannot be read).
  // MOVED points `slot` at it at once (no I/O); ASK (`ask` set) is for this command only.
  std::shared_ptr<Node> follow(const Reply& reply, std::uint16_t slot, bool& ask);
  // `slot` pointed at `owner` (no I/O).
  void learn_owner(std::uint16_t slot, const std::shared_ptr<Node>& owner);
  // A pipeline's commands grouped by the master that serves them (src/hiredis/cluster_pipeline.cpp).
  struct Group {
    std::shared_ptr<Node> node;
    std::vector<std::size_t> indices;  // into the pipeline's commands
  };
  // A command whose slot no master serves fails alone (a transit_failure() reply in `out`; `failure`
  // keeps the first error), unsent.
  std::vector<Group> group_by_master(const std::vector<std::vector<std::string>>& commands, std::vector<Reply>& out,
                                     std::exception_ptr& failure);
  // Every master the slot map names, at least one (refreshing an empty map first; ConnectionError when
  // no node answers or the map names none). Keyless commands go to the first.
  std::vector<std::shared_ptr<Node>> every_master();
  // One master's group through its pool's shared round trips, answers into `out`; or every group
  // written before any is read (send_at_once). A command that failed in transit is answered by a
  // transit_failure() reply; `failure` keeps the first error.
  void send_group(const Group& g, const std::vector<std::vector<std::string>>& commands, std::vector<Reply>& out,
                  std::exception_ptr& failure);
  void send_at_once(std::vector<Group>& groups, const std::vector<std::vector<std::string>>& commands,
                    std::vector<Reply>& out, std::exception_ptr& failure);
  // A group's replies into `out`, each redirected one sent again on its own through command().
  // `replies` may be fewer than the group's commands (a share that failed partway): those read
  // answer the group's first commands, and the others are left to fail_group().
  void deliver(const Group& g, std::vector<Reply>& replies, const std::vector<std::vector<std::string>>& commands,
               std::vector<Reply>& out, std::exception_ptr& failure);
  // A group whose commands failed in transit: each answered by transit_failure(e). Called in the
  // handler of `e` (the first failure is kept as thrown).
  static void fail_group(const Group& g, const std::vector<std::vector<std::string>>& commands,
                         const ConnectionError& e, std::vector<Reply>& out, std::exception_ptr& failure);
  // A master's reply into out[i]; for a command sent to every master, an error wins over what is there.
  static void put(std::vector<Reply>& out, std::size_t i, Reply reply, const std::vector<std::string>& command);
  // MOVED, ASK, TRYAGAIN or CLUSTERDOWN: the command did not run where it was sent.
  static bool redirected(const Reply& r);

  ClusterEndpoint seeds_;
  Options options_;
  std::chrono::steady_clock::time_point next_refused_refresh_{};  // shard_refused(), under mutex_
  std::chrono::steady_clock::time_point next_unmapped_refresh_{};  // route() of an unserved slot, under mutex_
  mutable std::shared_mutex mutex_;
  std::array<std::shared_ptr<Node>, 16384> slots_{};
  std::vector<std::shared_ptr<Node>> nodes_;  // every node we connected to, masters first
  std::timed_mutex refresh_mutex_;  // one refresh at a time; waited for only until the call's deadline
  // A node whose call failed with no time left to refresh the map (guarded by mutex_): the next
  // call routed to it refreshes first.
  std::shared_ptr<Node> suspect_;
};

// The slot a command is routed by: its first key (EVAL, EVALSHA, FCALL, FCALL_RO: after numkeys;
// otherwise argv[1]), or -1 for a keyless command.
int command_slot(const std::vector<std::string>& argv);

// True for a command every master must run: FUNCTION LOAD and SCRIPT LOAD (an FCALL or EVALSHA
// runs on the master of its keys, so each master needs the library or script). The router sends it to each master, ahead of that master's
// share of the pipeline; its reply is the first error any master answered, else the first reply.
bool to_every_master(const std::vector<std::string>& argv);
// That rule for the replies of such a command, one master's after another: true when `next` takes
// the place of `kept` (`kept_any`: a reply is kept already).
bool replaces_every_master_reply(const Reply& next, const Reply& kept, bool kept_any);

}  // namespace redlimit
