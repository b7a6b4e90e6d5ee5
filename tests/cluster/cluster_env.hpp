#pragma once
// The cluster the tests run on: started once by a gtest global environment (scripts/cluster.sh
// start), stopped after the last test (and at exit, should the binary end early). Helpers talk to
// single nodes with raw commands.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/transport/cluster_connection.hpp"

namespace redlimit_cluster {

struct ClusterState {
  std::string url;  // redis-cluster://127.0.0.1:P1,...
  std::string dir;
  std::vector<int> ports;
  std::vector<pid_t> pids;  // pids[i] serves ports[i]
};

// The running cluster (valid after the environment's SetUp).
const ClusterState& cluster();

// Stops the cluster now (idempotent; also done after the last test and at exit).
void stop_cluster_now();

// One raw command to 127.0.0.1:port on a fresh connection (generous timeouts). Error replies are
// returned; connection failures throw redlimit::ConnectionError.
redlimit::Reply raw(int port, const std::vector<std::string>& argv);

// The count of `command` in a node's INFO commandstats ("cmdstat_fcall:calls=12,..."), 0 when absent.
long long calls_of(int port, const std::string& command);
// The command that carries a decision's script call to the nodes: "fcall" (Redis Functions), or
// "evalsha" on a server older than Redis 7.0 ($REDIS_SERVER: cluster_redis6), which has none, or
// for a limiter with `functions` (Options::redis_functions) false.
std::string script_command(bool functions = true);

struct NodeInfo {
  std::string id;
  int port = 0;
  bool master = false;
  bool failed = false;  // "fail" or "fail?" flag, or disconnected
  std::string master_id;  // for replicas
  std::vector<std::pair<int, int>> slots;  // ranges served (masters)
};
// CLUSTER NODES as seen from `port`.
std::vector<NodeInfo> cluster_nodes(int port);
// The live masters serving slots, as seen from any node that answers (skipping `avoid_port`).
std::vector<NodeInfo> live_masters(int avoid_port = 0);
// The port of the master serving `slot`, per CLUSTER NODES from any live node (0 if none).
int owner_port(int slot, int avoid_port = 0);
// owner_port(slot) once it is `port`, asked again for up to `limit`: a node that was not sent the
// CLUSTER SETSLOT (a replica, say) learns the new owner by gossip, a few ms to a heartbeat later.
// Returns the last answer.
int wait_owner(int slot, int port, std::chrono::milliseconds limit = std::chrono::seconds(5));

// `argv` on every live master (SCRIPT FLUSH, FUNCTION FLUSH, CONFIG RESETSTAT, ...); an error reply
// throws std::runtime_error, which fails the test.
void on_live_masters(const std::vector<std::string>& argv);
// FLUSHALL on every live master.
void flush_all_masters();
// The calls of `command` ("fcall", "evalsha") the live masters ran since their last CONFIG RESETSTAT.
long long calls_on_masters(const std::string& command);

// `per_master` subjects whose keys land on each live master, named `prefix` and a number, the lowest
// numbers first: for `s`, anything with key_for (a strategy, a policy, redlimit_test::AnyStrategy).
std::vector<std::string> subjects_on_each_master_by(const std::function<std::string(const std::string&)>& key_for,
                                                    std::size_t per_master, const std::string& prefix);
template <class S>
std::vector<std::string> subjects_on_each_master(const S& s, std::size_t per_master,
                                                 const std::string& prefix = "user-") {
  return subjects_on_each_master_by([&s](const std::string& who) { return s.key_for(who); }, per_master, prefix);
}

// The pid of the cluster node on `port` (0 if it is not one of the cluster's).
pid_t pid_of(int port);

// Starts again, on its port, a node the test killed (same directory, nodes.conf and options as
// scripts/cluster.sh gives it); its new pid replaces the old one in cluster() and in the state file,
// so stopping the cluster stops it. Returns the new pid (throws std::runtime_error on failure).
pid_t restart_node(int port);

// Waits until every node that answers says cluster_state:ok and three live masters serve all 16384
// slots; false if that did not happen within `limit`.
bool wait_cluster_ok(std::chrono::milliseconds limit);

// Whether the node on `port` is a replica whose link to its master is up (in sync); waiting up to
// 20 s for it. A replica takes over only then: a new cluster's take a few seconds, Redis 7 waiting
// 5 s before a diskless full sync.
bool in_sync(int port);
bool wait_in_sync(int port);

// The port of a replica of `master` (0 if it has none), per CLUSTER NODES from the master, asked
// again for up to 5 s: a new cluster's master may not have heard of its replica yet when the first
// node seen says the cluster is up (seen on a fast machine: the first test after the cluster
// started found none).
int replica_of(const NodeInfo& master);

// CONFIG SET name value on every node that answers.
void config_set_everywhere(const std::string& name, const std::string& value);

// Runs a shell command with a time limit (coreutils `timeout`); returns its exit status, and its
// output in `out` when given.
int run(const std::string& command, int timeout_seconds, std::string* out = nullptr);

}  // namespace redlimit_cluster
