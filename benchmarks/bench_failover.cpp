// The cluster through a failover (suite `failover`, a redis-cluster:// URL only): decisions per
// second in 100 ms steps while a replica takes over its master.
// - Planned: CLUSTER FAILOVER to the replica, as an upgrade or a host's maintenance makes. The old
//   master pauses its writers until its replica has caught up, the replica takes the slots, and
//   every client's next call to those slots meets MOVED and follows it.
// - Unplanned: the master stops answering (SIGSTOP: a hung host; bench.sh started the cluster, and
//   the node is let go once its replica has been promoted, so it rejoins as a replica). The cluster
//   marks it failed after cluster-node-timeout and promotes the replica; a client learns the new
//   owner by reading the slot map again.
// So the figure is what a failover costs a busy client: how far the rate falls, for how long, and how
// many calls fail.
//
// One row per mode, each with a failover of its own: `batch128` (consume_many of 128, one thread,
// ClusterConnection: a script call per master) and `async64` (64 consume_async in flight over
// AsyncCluster), planned (the second hands the slots back) and then unplanned (`_stop`, each on a
// master of its own, whose replica is in sync). The strategy is the fixed window; the subjects and
// their quota are the throughput suite's.
#include <signal.h>
#include <sys/types.h>

#include "bench_common.hpp"
#include "redlimit/detail/keys.hpp"

namespace redlimit_bench {
namespace {

constexpr auto kStep = 100ms;          // one point of the timeline
constexpr auto kBefore = 2s;           // steady state before the failover
constexpr auto kAfter = 3s;            // measured after the replica answers ROLE as a master
constexpr auto kPromotionLimit = 10s;  // a failover not done by then is reported as such

struct Node {
  redlimit::Endpoint endpoint;
  std::string id;
  std::string master_id;  // empty for a master
};

// Every node of the cluster, from CLUSTER NODES on its first seed ("<id> <ip:port@bus> <flags>
// <master id or -> ..."); failed or handshaking nodes are left out.
std::vector<Node> cluster_nodes(const Config& c) {
  const redlimit::ClusterEndpoint ce = redlimit::parse_cluster_url(c.url);
  redlimit::RedisConnection conn(ce.seeds.front(), 2000ms, 2000ms);
  const redlimit::Reply r = conn.command({"CLUSTER", "NODES"});
  if (r.type != redlimit::Reply::Type::string) throw std::runtime_error("CLUSTER NODES: " + r.str);
  std::vector<Node> out;
  std::istringstream lines(r.str);
  std::string line;
  while (std::getline(lines, line)) {
    const std::vector<std::string> f = split(line, ' ');
    if (f.size() < 4 || f[2].find("fail") != std::string::npos || f[2].find("handshake") != std::string::npos) continue;
    const std::string addr = f[1].substr(0, f[1].find('@'));
    const auto colon = addr.rfind(':');
    Node n;
    n.endpoint = ce.seeds.front();  // credentials apply to every node
    n.endpoint.host = addr.substr(0, colon);
    n.endpoint.port = std::stoi(addr.substr(colon + 1));
    n.id = f[0];
    if (f[3] != "-") n.master_id = f[3];
    out.push_back(n);
  }
  return out;
}

// A master and the replica that takes over from it.
struct Shard {
  Node master, replica;
  bool planned = true;  // CLUSTER FAILOVER; false: the master is stopped
};

// Every master that has a replica, with its first.
std::vector<Shard> shards(const Config& c) {
  const std::vector<Node> nodes = cluster_nodes(c);
  std::vector<Shard> out;
  for (const Node& m : nodes) {
    if (!m.master_id.empty()) continue;
    for (const Node& r : nodes) {
      if (r.master_id != m.id) continue;
      out.push_back({m, r});
      break;
    }
  }
  return out;
}

std::string name_of(const Node& n) { return fmt::format("{}:{}", n.endpoint.host, n.endpoint.port); }

// The planned failovers take the master now serving the first subject's keys (a third of the
// subjects move with it): both pick by the same key, so the second hands the slots back. The
// unplanned ones each take another master: the first not in `used` (master ids).
Shard pick_shard(const Config& c, bool planned, const std::string& subject, std::vector<std::string>& used) {
  const redlimit::ClusterEndpoint ce = redlimit::parse_cluster_url(c.url);
  redlimit::ClusterConnection cluster(ce, redlimit::Options{});
  const std::string key = redlimit::detail::make_key("redlimit:", "fo", subject, "fw");
  const std::string owner = cluster.node_for_slot(redlimit::detail::key_slot(key));
  for (Shard s : shards(c)) {
    const bool fits =
        planned ? name_of(s.master) == owner
                : std::find(used.begin(), used.end(), s.master.id) == used.end() && name_of(s.master) != owner;
    if (!fits) continue;
    s.planned = planned;
    used.push_back(s.master.id);
    used.push_back(s.replica.id);  // after an unplanned failover it is that shard's master
    return s;
  }
  throw std::runtime_error(planned ? "no replica of the master of " + key : "no other master with a replica");
}

// The pid of the node's process (INFO server): the node bench.sh started.
pid_t pid_of(const Node& n) {
  redlimit::RedisConnection conn(n.endpoint, 2000ms, 2000ms);
  const std::string info = conn.command({"INFO", "server"}).str;
  const auto at = info.find("process_id:");
  if (at == std::string::npos) throw std::runtime_error("no process_id in INFO server of " + name_of(n));
  return static_cast<pid_t>(std::stol(info.substr(at + 11)));
}

// Waits up to 20 s for the replica's link to its master: a replica takes over only once in sync.
void wait_in_sync(const Node& replica) {
  for (int i = 0; i < 200; ++i) {
    try {
      redlimit::RedisConnection conn(replica.endpoint, 500ms, 500ms);
      if (conn.command({"INFO", "replication"}).str.find("master_link_status:up") != std::string::npos) return;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(100ms);
  }
  throw std::runtime_error("the replica " + name_of(replica) + " is not in sync with its master");
}

// Lets a stopped node go on whatever happens (an exception included): SIGCONT once.
class Stopped {
 public:
  explicit Stopped(pid_t pid) : pid_(pid) {
    if (::kill(pid_, SIGSTOP) != 0) throw std::runtime_error("SIGSTOP failed");
  }
  ~Stopped() { ::kill(pid_, SIGCONT); }
  Stopped(const Stopped&) = delete;
  Stopped& operator=(const Stopped&) = delete;

 private:
  pid_t pid_;
};

bool answers_as_master(const redlimit::Endpoint& e) {
  try {
    redlimit::RedisConnection conn(e, 500ms, 500ms);
    const redlimit::Reply r = conn.command({"ROLE"});
    return r.type == redlimit::Reply::Type::array && !r.elements.empty() && r.elements[0].str == "master";
  } catch (const std::exception&) {
    return false;
  }
}

// What a load thread counts; the timeline samples `decided` every step.
struct Counters {
  std::atomic<long long> decided{0}, failed{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::map<std::string, long long> errors;  // what() of each failure -> calls it failed
  // The limiter's breakers as health() reports them, one word a shard ("closed open ..."): sampled
  // every step, and written where it changed, to tell a breaker that stayed open from one that
  // kept reopening.
  std::function<std::string()> breakers;

  void fail(long long calls, const std::exception_ptr& e) {
    failed += calls;
    std::string what = "unknown";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
    std::lock_guard<std::mutex> lock(mutex);
    errors[what] += calls;
  }
};

struct Timeline {
  std::vector<long long> steps;   // decisions made in each step
  double failover_at_ms = -1;     // CLUSTER FAILOVER sent, or the master stopped
  double promoted_at_ms = -1;     // the replica answers ROLE as a master
  std::string breakers;           // "<step>:<states>" at each step where Counters::breakers changed
  std::vector<long long> failed;  // calls failed in each step
};

// Runs the load (started by the caller) through a failover of `s`, sampling `k` every step. An
// unplanned failover's master is let go kAfter past the promotion, when the timeline ends.
Timeline through_failover(Counters& k, const Shard& s) {
  Timeline t;
  const pid_t master_pid = s.planned ? 0 : pid_of(s.master);
  if (!s.planned) wait_in_sync(s.replica);
  std::unique_ptr<Stopped> stopped;
  const auto t0 = Clock::now();
  const auto ms = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
  long long last = k.decided.load();
  std::string last_states;
  long long last_failed = k.failed.load();
  auto next = t0 + kStep;
  auto end = t0 + kBefore + kPromotionLimit;
  redlimit::RedisConnection admin(s.replica.endpoint, 2000ms, 2000ms);
  while (Clock::now() < end) {
    std::this_thread::sleep_until(next);
    next += kStep;
    const long long now = k.decided.load();
    t.steps.push_back(now - last);
    last = now;
    const long long failed = k.failed.load();
    t.failed.push_back(failed - last_failed);
    last_failed = failed;
    if (k.breakers) {
      std::string states = k.breakers();
      if (states != last_states)
        t.breakers += fmt::format("{}{}:{}", t.breakers.empty() ? "" : " ", t.steps.size(), states);
      last_states = std::move(states);
    }
    if (t.failover_at_ms < 0 && Clock::now() - t0 >= kBefore) {
      t.failover_at_ms = ms();
      if (!s.planned) {
        stopped = std::make_unique<Stopped>(master_pid);
        continue;
      }
      const redlimit::Reply r = admin.command({"CLUSTER", "FAILOVER"});
      if (r.is_error()) throw std::runtime_error("CLUSTER FAILOVER: " + r.str);
    } else if (t.failover_at_ms >= 0 && t.promoted_at_ms < 0 && answers_as_master(s.replica.endpoint)) {
      t.promoted_at_ms = ms();
      end = Clock::now() + kAfter;
    }
  }
  k.stop = true;
  return t;  // `stopped` lets the old master go: it rejoins as its replica's replica
}

// The breakers of `limiter` as one word each, shard 0 first: for Counters::breakers.
std::string breaker_states(const redlimit::RateLimiter& limiter) {
  std::string out;
  for (const auto& [shard, state] : limiter.health().breakers)
    out += (out.empty() ? "" : ",") + std::string(redlimit::to_string(state));
  return out;
}

void emit_failover(const std::string& mode, const Timeline& t, Counters& k) {
  std::string steps;
  for (long long s : t.steps) steps += (steps.empty() ? "" : " ") + std::to_string(s);
  std::string failed;
  for (long long s : t.failed) failed += (failed.empty() ? "" : " ") + std::to_string(s);
  std::string errors;
  {
    std::lock_guard<std::mutex> lock(k.mutex);
    for (const auto& [what, calls] : k.errors)
      errors += (errors.empty() ? "" : "; ") + fmt::format("{} x {}", calls, what);
  }
  Json()
      .str("suite", "failover")
      .str("strategy", "fixed_window")
      .str("mode", mode)
      .integer("step_ms", static_cast<long long>(kStep.count()))
      .num("failover_at_ms", t.failover_at_ms)
      .num("promoted_at_ms", t.promoted_at_ms)
      .integer("decided", k.decided.load())
      .integer("failed", k.failed.load())
      .str("steps", steps)
      .str("errors", errors)
      .str("failed_steps", failed)
      .str("breakers", t.breakers)
      .emit();
  progress("failover {}: promoted {:.0f} ms after the failover began, {} decided, {} failed", mode,
           t.promoted_at_ms - t.failover_at_ms, k.decided.load(), k.failed.load());
}

void failover_batch128(const Config& c, const std::vector<std::string>& subjects, const Shard& shard) {
  const std::string resource = "fo";
  auto limiter = connect(c, 1);
  const auto strategy = all_specs().front().make(limiter, resource);
  Counters k;
  k.breakers = [&limiter] { return breaker_states(limiter); };
  std::thread load([&] {
    std::vector<redlimit::Request> reqs;
    std::size_t i = 0;
    while (!k.stop.load(std::memory_order_relaxed)) {
      reqs.clear();
      for (int n = 0; n < 128; ++n) reqs.push_back({subjects[i++ % subjects.size()], 1});
      try {
        k.decided += static_cast<long long>(strategy->consume_many(reqs).size());
      } catch (const redlimit::Error&) {
        k.fail(128, std::current_exception());
      }
    }
  });
  Timeline t;
  try {
    t = through_failover(k, shard);
  } catch (...) {
    k.stop = true;
    load.join();
    throw;
  }
  load.join();
  emit_failover(shard.planned ? "batch128" : "batch128_stop", t, k);
}

#ifdef REDLIMIT_BENCH_HAVE_ASYNC
void failover_async64(const Config& c, const std::vector<std::string>& subjects, const Shard& shard) {
  const std::string resource = "fo";
  event_base* base = event_base_new();
  if (base == nullptr) throw std::runtime_error("event_base_new failed");
  std::shared_ptr<redlimit::AsyncConnection> redis =
      redlimit::AsyncCluster::attach_libevent(base, redlimit::parse_cluster_url(c.url));
  std::thread loop([base] { event_base_dispatch(base); });
  Timeline t;
  Counters k;
  std::exception_ptr error;
  {
    auto limiter = connect(c, 1);
    limiter.attach_async(redis);
    const auto strategy = all_specs().front().make(limiter, resource);
    k.breakers = [&limiter] { return breaker_states(limiter); };
    for (int s = 0; s < 32; ++s) strategy->consume_future(subjects[static_cast<std::size_t>(s)]).get();
    std::atomic<long long> issued{0}, done{0};
    std::function<void()> issue = [&] {
      const long long i = issued.fetch_add(1);
      strategy->consume_async(subjects[static_cast<std::size_t>(i) % subjects.size()], 1,
                              [&](const redlimit::Decision&, std::exception_ptr e) {
                                if (e)
                                  k.fail(1, e);
                                else
                                  ++k.decided;
                                if (!k.stop.load()) issue();
                                ++done;
                              });
    };
    for (int n = 0; n < 64; ++n) issue();
    try {
      t = through_failover(k, shard);
    } catch (...) {
      k.stop = true;
      error = std::current_exception();
    }
    // Every callback has run before the strategy and the counters it uses go out of scope; a reply
    // that never comes is the deadline's to end (AsyncOptions::command_timeout), so this is bounded.
    const auto give_up = Clock::now() + 10s;
    while (done.load() < issued.load() && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
    if (!error && done.load() < issued.load()) {
      error = std::make_exception_ptr(std::runtime_error("async replies still missing after 10 s"));
    }
  }
  redis.reset();  // the limiter and the strategy are gone: this releases the loop, which returns
  loop.join();
  event_base_free(base);
  if (error) std::rethrow_exception(error);
  emit_failover(shard.planned ? "async64" : "async64_stop", t, k);
}
#endif

}  // namespace

// No FLUSHALL at the end, unlike the other suites: the masters are no longer those the Admin read
// at the start, and bench.sh stops the cluster right after this suite.
void suite_failover(const Config& c) {
  std::vector<std::string> subjects;
  for (long i = 0; i < c.subjects; ++i) subjects.push_back(subject_name(i));
  std::vector<std::string> used;  // masters (and their replicas) an unplanned failover took
  for (const bool planned : {true, false}) {
    const std::string suffix = planned ? "" : "_stop";
    if (wanted(c.modes, "batch128" + suffix)) failover_batch128(c, subjects, pick_shard(c, planned, subjects[0], used));
    if (!wanted(c.modes, "async64" + suffix)) continue;
#ifdef REDLIMIT_BENCH_HAVE_ASYNC
    failover_async64(c, subjects, pick_shard(c, planned, subjects[0], used));
#else
    Json().str("suite", "failover").str("mode", "async64" + suffix).str("missing", "built without libevent").emit();
#endif
  }
}

}  // namespace redlimit_bench
