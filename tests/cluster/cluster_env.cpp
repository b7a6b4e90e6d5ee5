#include "cluster/cluster_env.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "redlimit/detail/keys.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "support/server_version.hpp"

namespace redlimit_cluster {
namespace {

ClusterState g_state;
std::string g_state_file;
std::once_flag g_stop_once;
bool g_started = false;

std::string script_path() {
  if (const char* env = std::getenv("REDLIMIT_CLUSTER_SCRIPT"); env && *env) return env;
  return REDLIMIT_CLUSTER_SCRIPT_DEFAULT;
}

// Asks `done` until it says true, `step` apart, for up to `limit`; whether it did. Every wait of this
// file is one: a cluster changes by gossip and failure detection, which take their time.
template <typename Done>
bool poll(std::chrono::milliseconds limit, std::chrono::milliseconds step, Done done) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(step);
  }
  return true;
}

std::string unquote(std::string v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') return v.substr(1, v.size() - 2);
  return v;
}

void stop_cluster() {
  if (!g_started) return;
  std::call_once(g_stop_once, [] {
    const std::string cmd = "timeout 60 bash '" + script_path() + "' stop '" + g_state_file + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      // Last resort: our own pids only.
      for (pid_t pid : g_state.pids) ::kill(pid, SIGKILL);
    }
    std::remove(g_state_file.c_str());
  });
}

class ClusterEnvironment : public ::testing::Environment {
 public:
  ~ClusterEnvironment() override { stop_cluster(); }

  void SetUp() override {
    char tmpl[] = "/tmp/redlimit-cluster-state.XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::close(fd);
    g_state_file = tmpl;
    std::remove(g_state_file.c_str());  // cluster.sh refuses an existing state file
    g_started = true;
    std::atexit(stop_cluster);
    std::string out;
    const int rc = run("bash '" + script_path() + "' start '" + g_state_file + "'", 180, &out);
    ASSERT_EQ(rc, 0) << "cluster.sh start failed: " << out;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("redis-cluster://", 0) == 0) g_state.url = line;
    }
    ASSERT_FALSE(g_state.url.empty()) << out;
    std::ifstream state(g_state_file);
    for (std::string line; std::getline(state, line);) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = line.substr(0, eq), value = unquote(line.substr(eq + 1));
      std::istringstream items(value);
      if (key == "dir") g_state.dir = value;
      if (key == "ports") for (int p; items >> p;) g_state.ports.push_back(p);
      if (key == "pids") for (pid_t p; items >> p;) g_state.pids.push_back(p);
    }
    ASSERT_EQ(g_state.ports.size(), 6u);
    ASSERT_EQ(g_state.pids.size(), 6u);
    // The nodes run the binary asked for (cluster_valkey names a valkey-server, cluster_redis6 a
    // wrapper script that runs Redis 6.0): a cluster.sh that fell back to another would pass the
    // suite on a server it did not mean to test. Each node's INFO names the version that binary's
    // --version prints (redis_version, or Valkey's valkey_version).
    if (const char* server = std::getenv("REDIS_SERVER"); server && *server) {
      const std::string want = redlimit_test::server_version(server);
      ASSERT_FALSE(want.empty()) << "REDIS_SERVER=" << server << " --version names no version";
      for (const int port : g_state.ports) {
        const std::string info = raw(port, {"INFO", "server"}).str;
        EXPECT_NE(info.find("_version:" + want + "\r\n"), std::string::npos) << "port " << port << ": " << info;
      }
    }
    std::cout << "[ cluster ] " << g_state.url << " (dir " << g_state.dir << ")\n";
  }

  void TearDown() override { stop_cluster(); }
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

}  // namespace

const ClusterState& cluster() { return g_state; }

void stop_cluster_now() { stop_cluster(); }

redlimit::Reply raw(int port, const std::vector<std::string>& argv) {
  redlimit::Endpoint ep;
  ep.host = "127.0.0.1";
  ep.port = port;
  redlimit::RedisConnection c(ep, std::chrono::milliseconds(3000), std::chrono::milliseconds(10000));
  return c.command(argv);
}

std::vector<NodeInfo> cluster_nodes(int port) {
  const redlimit::Reply r = raw(port, {"CLUSTER", "NODES"});
  std::vector<NodeInfo> out;
  if (r.type != redlimit::Reply::Type::string) return out;
  std::istringstream lines(r.str);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::vector<std::string> fields;
    for (std::string w; f >> w;) fields.push_back(w);
    if (fields.size() < 8) continue;
    NodeInfo n;
    n.id = fields[0];
    const auto colon = fields[1].find(':');
    const auto at = fields[1].find('@');
    if (colon == std::string::npos) continue;
    n.port = std::atoi(fields[1].substr(colon + 1, at - colon - 1).c_str());
    n.master = fields[2].find("master") != std::string::npos;
    n.failed = fields[2].find("fail") != std::string::npos || fields[7] == "disconnected";
    if (fields[3] != "-") n.master_id = fields[3];
    for (std::size_t i = 8; i < fields.size(); ++i) {
      if (fields[i].front() == '[') continue;  // migrating/importing markers
      const auto dash = fields[i].find('-');
      if (dash == std::string::npos) {
        const int s = std::atoi(fields[i].c_str());
        n.slots.push_back({s, s});
      } else {
        n.slots.push_back({std::atoi(fields[i].substr(0, dash).c_str()), std::atoi(fields[i].substr(dash + 1).c_str())});
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<NodeInfo> live_masters(int avoid_port) {
  for (int port : g_state.ports) {
    if (port == avoid_port) continue;
    std::vector<NodeInfo> nodes;
    try {
      nodes = cluster_nodes(port);
    } catch (const redlimit::ConnectionError&) {
      continue;
    }
    std::vector<NodeInfo> masters;
    for (auto& n : nodes) {
      if (n.master && !n.failed && !n.slots.empty()) masters.push_back(n);
    }
    if (!masters.empty()) return masters;
  }
  return {};
}

int owner_port(int slot, int avoid_port) {
  for (const auto& m : live_masters(avoid_port)) {
    for (auto [lo, hi] : m.slots) {
      if (slot >= lo && slot <= hi) return m.port;
    }
  }
  return 0;
}

int wait_owner(int slot, int port, std::chrono::milliseconds limit) {
  int owner = 0;
  poll(limit, std::chrono::milliseconds(20), [&] { return (owner = owner_port(slot)) == port; });
  return owner;
}

void on_live_masters(const std::vector<std::string>& argv) {
  for (const auto& m : live_masters()) {
    const redlimit::Reply r = raw(m.port, argv);
    if (r.is_error()) throw std::runtime_error(argv.front() + " on " + std::to_string(m.port) + ": " + r.str);
  }
}

void flush_all_masters() { on_live_masters({"FLUSHALL"}); }

long long calls_on_masters(const std::string& command) {
  long long n = 0;
  for (const auto& m : live_masters()) n += calls_of(m.port, command);
  return n;
}

std::vector<std::string> subjects_on_each_master_by(const std::function<std::string(const std::string&)>& key_for,
                                                    std::size_t per_master, const std::string& prefix) {
  const std::size_t masters = live_masters().size();
  std::map<int, std::size_t> seen;
  std::vector<std::string> out;
  for (int i = 0; i < 100000 && out.size() < masters * per_master; ++i) {
    std::string who = prefix + std::to_string(i);
    std::size_t& n = seen[owner_port(redlimit::detail::key_slot(key_for(who)))];
    if (n < per_master) {
      ++n;
      out.push_back(std::move(who));
    }
  }
  return out;
}

namespace {

void write_state_file() {
  std::ofstream state(g_state_file, std::ios::trunc);
  state << "dir=" << g_state.dir << "\nports=\"";
  for (std::size_t i = 0; i < g_state.ports.size(); ++i) state << (i ? " " : "") << g_state.ports[i];
  state << "\"\npids=\"";
  for (std::size_t i = 0; i < g_state.pids.size(); ++i) state << (i ? " " : "") << g_state.pids[i];
  state << "\"\n";
}

}  // namespace

pid_t pid_of(int port) {
  const auto it = std::find(cluster().ports.begin(), cluster().ports.end(), port);
  return it == cluster().ports.end() ? 0 : cluster().pids[static_cast<std::size_t>(it - cluster().ports.begin())];
}

long long calls_of(int port, const std::string& command) {
  const std::string info = raw(port, {"INFO", "commandstats"}).str;
  const std::string tag = "cmdstat_" + command + ":calls=";
  const auto at = info.find(tag);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + tag.size()));
}

std::string script_command(bool functions) {
  if (!functions) return "evalsha";
  const char* server = std::getenv("REDIS_SERVER");
  return redlimit_test::server_major_version(server && *server ? server : "redis-server") >= 7 ? "fcall" : "evalsha";
}

pid_t restart_node(int port) {
  const auto it = std::find(g_state.ports.begin(), g_state.ports.end(), port);
  if (it == g_state.ports.end()) throw std::runtime_error("not a node of the cluster: " + std::to_string(port));
  const char* timeout_env = std::getenv("CLUSTER_NODE_TIMEOUT");
  const std::string node_timeout = timeout_env && *timeout_env ? timeout_env : "1000";
  const std::string dir = g_state.dir + "/" + std::to_string(port);
  const std::string pidfile = dir + "/restarted.pid";
  std::remove(pidfile.c_str());
  // Daemonized, so that it is not our child (no zombie for cluster.sh stop to wait on). The binary
  // cluster.sh started: $REDIS_SERVER, else redis-server from PATH.
  const char* server_env = std::getenv("REDIS_SERVER");
  const std::string server = server_env && *server_env ? server_env : "redis-server";
  const std::string debug_flag =
      redlimit_test::server_major_version(server) >= 7 ? " --enable-debug-command local" : "";
  std::string out;
  const int rc = run("'" + server + "' --port " + std::to_string(port) + " --bind 127.0.0.1 --cluster-enabled yes" +
                         " --cluster-config-file '" + dir + "/nodes.conf' --cluster-node-timeout " + node_timeout +
                         " --dir '" + dir + "' --save '' --appendonly no --daemonize yes --pidfile '" + pidfile + "'" +
                         debug_flag + " --logfile '" + dir + "/redis.log'",
                     30, &out);
  if (rc != 0) throw std::runtime_error(server + " did not start again: " + out);
  pid_t pid = 0;
  poll(std::chrono::seconds(5), std::chrono::milliseconds(25), [&] {
    std::ifstream f(pidfile);
    if (!(f >> pid)) pid = 0;
    return pid != 0;
  });
  if (pid == 0) throw std::runtime_error("no pid file from the restarted node " + std::to_string(port));
  g_state.pids[static_cast<std::size_t>(it - g_state.ports.begin())] = pid;
  write_state_file();
  const bool answers = poll(std::chrono::seconds(5), std::chrono::milliseconds(25), [port] {
    try {
      return raw(port, {"PING"}).type == redlimit::Reply::Type::status;
    } catch (const redlimit::ConnectionError&) {
      return false;
    }
  });
  if (answers) return pid;
  throw std::runtime_error("the restarted node " + std::to_string(port) + " does not answer");
}

bool wait_cluster_ok(std::chrono::milliseconds limit) {
  return poll(limit, std::chrono::milliseconds(50), [] {
    bool ok = true;
    for (int port : g_state.ports) {
      try {
        if (raw(port, {"CLUSTER", "INFO"}).str.find("cluster_state:ok") == std::string::npos) ok = false;
      } catch (const redlimit::ConnectionError&) {
      }
    }
    const auto masters = live_masters();
    std::int64_t covered = 0;
    for (const auto& m : masters) {
      for (auto [lo, hi] : m.slots) covered += hi - lo + 1;
    }
    return ok && masters.size() == 3 && covered == 16384;
  });
}

bool in_sync(int port) {
  try {
    return raw(port, {"INFO", "replication"}).str.find("master_link_status:up") != std::string::npos;
  } catch (const redlimit::ConnectionError&) {
    return false;
  }
}

bool wait_in_sync(int port) {
  return poll(std::chrono::seconds(20), std::chrono::milliseconds(100), [port] { return in_sync(port); });
}

int replica_of(const NodeInfo& master) {
  int replica = 0;
  poll(std::chrono::seconds(5), std::chrono::milliseconds(50), [&] {
    for (const auto& n : cluster_nodes(master.port)) {
      if (n.master_id == master.id) replica = n.port;
    }
    return replica != 0;
  });
  return replica;
}

void config_set_everywhere(const std::string& name, const std::string& value) {
  for (int port : g_state.ports) {
    try {
      raw(port, {"CONFIG", "SET", name, value});
    } catch (const redlimit::ConnectionError&) {
    }
  }
}

int run(const std::string& command, int timeout_seconds, std::string* out) {
  const std::string cmd = "timeout -k 5 " + std::to_string(timeout_seconds) + " " + command + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf{};
  std::string text;
  while (std::fgets(buf.data(), buf.size(), p)) text += buf.data();
  const int status = ::pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace redlimit_cluster
