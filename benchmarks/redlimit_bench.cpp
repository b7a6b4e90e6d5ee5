// redlimit's load driver. Runs against a redis-server of the caller's (scripts/bench.sh starts one)
// and prints one JSON object a line on stdout; progress goes to stderr. Every loop is bounded both in
// operations and in wall-clock time.
//
//   redlimit_bench --port P [--host H] [--suite all|throughput|raw|memory|growth|flood]
//                  [--seconds S] [--max-ops N] [--sizes 1,1000,100000,1000000]
//                  [--growth-budget S] [--flood-limit L] [--strategies id,id,...] [--modes m,m,...]
//   redlimit_bench --url redis-cluster://host:port[,host:port...] [--suite cluster] [--seconds S] ...
//
// --url redis://... or unix://... replaces --host/--port. With a redis-cluster:// URL the only
// suite is `cluster`: the throughput suite over a ClusterConnection, its rows tagged
// "suite": "cluster", with the Redis-side figures (commandstats, main-thread CPU) summed over the
// masters. The async modes are reported as missing there: AsyncRedis connects to one server.
//
// Workload: every strategy allows 1000 units per minute per subject and the requests cycle over
// 10,000 subjects, so nearly every decision is an admission (the full read-modify-write path of
// each script). Each (strategy, mode) pair gets a resource of its own, so runs never share state.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"

#if defined(REDLIMIT_BENCH_ASYNC) && __has_include("redlimit/transport/redis_async.hpp") && __has_include(<event2/event.h>)
#include <event2/event.h>

#include <condition_variable>
#include <mutex>

#include "redlimit/transport/redis_async.hpp"
#define REDLIMIT_BENCH_HAVE_ASYNC 1
#endif

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// ---------------------------------------------------------------------------------------------
// Options

struct Config {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string url;                // --url; empty = redis://host:port
  std::string suite = "all";
  double seconds = 1.5;           // wall-clock budget of one throughput measurement
  long max_ops = 400000;          // operation cap of one throughput measurement
  std::vector<long> sizes{1, 1000, 100000, 1000000};
  double growth_budget = 240;     // seconds for the whole growth suite
  long flood_limit = 1000;        // the flooded sliding log's limit (flood = 100x this)
  std::vector<std::string> strategies;  // empty = all
  std::vector<std::string> modes;       // empty = all
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

bool is_cluster(const Config& c) { return c.url.rfind("redis-cluster://", 0) == 0; }

std::string url_of(const Config& c) { return c.url.empty() ? fmt::format("redis://{}:{}", c.host, c.port) : c.url; }

// The one server's endpoint (not for a cluster URL).
redlimit::Endpoint endpoint_of(const Config& c) {
  if (!c.url.empty()) return redlimit::parse_url(c.url);
  redlimit::Endpoint e;
  e.host = c.host;
  e.port = c.port;
  return e;
}

// The servers whose statistics the Admin reads: the one server, or every master of the cluster
// (from its slot map; replicas are left out, as no decision runs on them).
std::vector<redlimit::Endpoint> admin_endpoints(const Config& c) {
  if (!is_cluster(c)) return {endpoint_of(c)};
  const redlimit::ClusterEndpoint ce = redlimit::parse_cluster_url(c.url);
  redlimit::ClusterConnection cluster(ce, redlimit::Options{});
  std::vector<redlimit::Endpoint> out;
  for (const std::string& hp : cluster.masters()) {
    const auto colon = hp.rfind(':');
    redlimit::Endpoint e = ce.seeds.front();  // credentials apply to every node
    e.host = hp.substr(0, colon);
    e.port = std::stoi(hp.substr(colon + 1));
    out.push_back(e);
  }
  if (out.empty()) throw std::runtime_error("the cluster's slot map names no master");
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON lines

class Json {
 public:
  Json& str(const std::string& k, const std::string& v) {
    std::string esc;
    for (char c : v) {
      if (c == '"' || c == '\\') esc += '\\';
      esc += c;
    }
    return raw(k, "\"" + esc + "\"");
  }
  Json& num(const std::string& k, double v) { return raw(k, fmt::format("{:.6g}", v)); }
  Json& integer(const std::string& k, long long v) { return raw(k, std::to_string(v)); }
  void emit() const {
    std::printf("{%s}\n", body_.c_str());
    std::fflush(stdout);
  }

 private:
  Json& raw(const std::string& k, const std::string& v) {
    if (!body_.empty()) body_ += ", ";
    body_ += "\"" + k + "\": " + v;
    return *this;
  }
  std::string body_;
};

template <typename... Args>
void progress(fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(stderr, "  [redlimit_bench] {}\n", fmt::format(f, std::forward<Args>(args)...));
}

// ---------------------------------------------------------------------------------------------
// The server's own view: INFO commandstats, INFO memory, MEMORY USAGE.

struct CmdStat {
  long long calls = 0;
  long long usec = 0;
};

// On a cluster every figure is the sum over the masters; cmd() goes to the first one (the suites
// that use it directly run on one server only).
class Admin {
 public:
  Admin(const Config& c) {
    for (const auto& e : admin_endpoints(c)) nodes_.emplace_back(e, 2000ms, 60000ms);
  }

  std::size_t nodes() const { return nodes_.size(); }

  redlimit::Reply cmd(const std::vector<std::string>& argv) { return cmd_on(0, argv); }
  redlimit::Reply cmd_on(std::size_t node, const std::vector<std::string>& argv) {
    redlimit::Reply r = nodes_.at(node).command(argv);
    if (r.is_error()) throw std::runtime_error(fmt::format("{} failed: {}", argv[0], r.str));
    return r;
  }
  void each(const std::vector<std::string>& argv) {
    for (std::size_t n = 0; n < nodes_.size(); ++n) cmd_on(n, argv);
  }
  void reset_stats() { each({"CONFIG", "RESETSTAT"}); }
  void flushall() { each({"FLUSHALL"}); }

  std::map<std::string, CmdStat> commandstats() {
    std::map<std::string, CmdStat> out;
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      for (const auto& [name, s] : commandstats_of(n)) {
        out[name].calls += s.calls;
        out[name].usec += s.usec;
      }
    }
    return out;
  }

  // Script calls (EVALSHA + EVAL) on each node since the last reset: how the decisions spread.
  std::vector<long long> script_calls_per_node() {
    std::vector<long long> out;
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      long long calls = 0;
      for (const auto& [name, s] : commandstats_of(n)) {
        if (name == "evalsha" || name == "eval") calls += s.calls;
      }
      out.push_back(calls);
    }
    return out;
  }

  std::map<std::string, CmdStat> commandstats_of(std::size_t node) {
    std::map<std::string, CmdStat> out;
    std::istringstream in(cmd_on(node, {"INFO", "commandstats"}).str);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("cmdstat_", 0) != 0) continue;
      const auto colon = line.find(':');
      CmdStat s;
      for (const auto& kv : split(line.substr(colon + 1), ',')) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos) continue;
        const std::string k = kv.substr(0, eq);
        if (k == "calls") s.calls = std::atoll(kv.c_str() + eq + 1);
        if (k == "usec") s.usec = std::atoll(kv.c_str() + eq + 1);
      }
      out[line.substr(8, colon - 8)] = s;
    }
    return out;
  }

  // Script calls (EVALSHA + EVAL) since the last reset: their count and total microseconds.
  CmdStat script_stats() {
    auto all = commandstats();
    CmdStat s;
    for (const char* name : {"evalsha", "eval"}) {
      auto it = all.find(name);
      if (it != all.end()) {
        s.calls += it->second.calls;
        s.usec += it->second.usec;
      }
    }
    return s;
  }

  // Redis's used_memory less what its clients' buffers hold (a pipelined batch's replies sit in
  // them for a while): the memory that the keys take.
  long long used_memory() {
    long long total = 0;
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      std::istringstream in(cmd_on(n, {"INFO", "memory"}).str);
      std::string line;
      long long used = -1, clients = 0;
      while (std::getline(in, line)) {
        if (line.rfind("used_memory:", 0) == 0) used = std::atoll(line.c_str() + 12);
        if (line.rfind("mem_clients_normal:", 0) == 0) clients = std::atoll(line.c_str() + 19);
      }
      total += used - clients;
    }
    return total;
  }

  // CPU seconds Redis's main thread has used (user + system): unlike commandstats' wall-clock usec
  // it does not grow when the thread is preempted, and it includes reading and writing the socket.
  double main_thread_cpu() {
    double total = 0;
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      std::istringstream in(cmd_on(n, {"INFO", "cpu"}).str);
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("used_cpu_user_main_thread:", 0) == 0) total += std::atof(line.c_str() + 26);
        if (line.rfind("used_cpu_sys_main_thread:", 0) == 0) total += std::atof(line.c_str() + 25);
      }
    }
    return total;
  }

  long long dbsize() {
    long long total = 0;
    for (std::size_t n = 0; n < nodes_.size(); ++n) total += cmd_on(n, {"DBSIZE"}).integer;
    return total;
  }

  long long memory_usage(const std::string& key) {
    redlimit::Reply r = cmd({"MEMORY", "USAGE", key, "SAMPLES", "0"});
    return r.type == redlimit::Reply::Type::integer ? r.integer : -1;
  }

 private:
  std::vector<redlimit::RedisConnection> nodes_;
};

// Inner commands run by the scripts since the last reset, per decision: "get=1 hmget=1 hset=1 ...".
std::string inner_commands(const std::map<std::string, CmdStat>& stats, long long decisions) {
  std::string out;
  if (decisions <= 0) return out;
  for (const auto& [name, s] : stats) {
    if (name == "evalsha" || name == "eval" || name == "config" || name == "info" || name == "ping") continue;
    if (!out.empty()) out += ' ';
    out += fmt::format("{}={:.2f}", name, static_cast<double>(s.calls) / static_cast<double>(decisions));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The strategies under test: 1000 units per minute each.

struct Spec {
  std::string id;
  std::string label;
  std::function<std::shared_ptr<redlimit::Strategy>(const redlimit::RateLimiter&, const std::string&)> make;
};

template <typename T>
std::shared_ptr<redlimit::Strategy> share(T s) {
  return std::make_shared<T>(std::move(s));
}

// `window` is the rate's period: a minute for the throughput runs (1000 per minute), a day for the
// growth runs, so that every subject's state is still alive when the memory is read.
std::vector<Spec> all_specs(std::chrono::microseconds window = std::chrono::minutes(1)) {
  using redlimit::Limit;
  const Limit rate(1000, window);
  const std::string per = window == std::chrono::minutes(1) ? "/min" : window == std::chrono::hours(24) ? "/day" : "";
  return {
      {"fixed_window", "fixed window 1000" + per,
       [=](const redlimit::RateLimiter& l, const std::string& r) { return share(l.fixed_window(r, rate)); }},
      {"sliding_log", "sliding log 1000" + per,
       [=](const redlimit::RateLimiter& l, const std::string& r) { return share(l.sliding_log(r, rate)); }},
      {"sliding_window", "sliding window 1000" + per + ", precision = window",
       [=](const redlimit::RateLimiter& l, const std::string& r) { return share(l.sliding_window(r, rate)); }},
      {"sliding_window_p10", "sliding window 1000" + per + ", precision = window/10",
       [=](const redlimit::RateLimiter& l, const std::string& r) {
         return share(l.sliding_window(r, rate, window / 10));
       }},
      {"token_bucket", "token bucket 1000, refill 1000" + per,
       [=](const redlimit::RateLimiter& l, const std::string& r) { return share(l.token_bucket(r, 1000, 1000, window)); }},
      {"leaky_bucket", "leaky bucket meter 1000, leak 1000" + per,
       [=](const redlimit::RateLimiter& l, const std::string& r) {
         return share(l.leaky_bucket(r, 1000, rate, redlimit::LeakyMode::meter));
       }},
      {"policy3", "policy 100/s; 1000/min; 10000/h@1min",
       [=](const redlimit::RateLimiter& l, const std::string& r) {
         return share(l.policy(r, redlimit::parse_limits("100/1s; 1000/1m; 10000/1h@1m")));
       }},
  };
}

bool wanted(const std::vector<std::string>& list, const std::string& id) {
  return list.empty() || std::find(list.begin(), list.end(), id) != list.end();
}

std::string subject_name(long i) { return fmt::format("u{:07d}", i); }

// ---------------------------------------------------------------------------------------------
// Throughput: decisions per second for one (strategy, mode).

struct Mode {
  std::string id;
  int threads = 1;     // caller threads (pool size = threads)
  int batch = 0;       // 0 = consume(); otherwise consume_many of this many requests
  int in_flight = 0;   // async: requests kept in flight on one connection
};

struct RunResult {
  long long ops = 0;
  long long allowed = 0;
  double seconds = 0;
  double server_cpu = 0;  // seconds of Redis main-thread CPU during the run
};

// On a cluster, Options::pool is per master: each master gets a pool of this size.
redlimit::RateLimiter connect(const Config& c, std::size_t pool) {
  redlimit::Options o;
  o.pool.size = pool;
  return redlimit::RateLimiter::connect(url_of(c), o);
}

// One caller thread: consume() or consume_many() over `subjects`, from `offset`, until `stop` or
// `quota` operations.
void caller(const redlimit::Strategy& s, const std::vector<std::string>& subjects, std::size_t offset, int batch,
            long quota, const std::atomic<bool>& stop, long long& ops, long long& allowed) {
  std::size_t i = offset;
  std::vector<redlimit::Request> reqs;
  while (ops < quota && !stop.load(std::memory_order_relaxed)) {
    if (batch == 0) {
      const auto d = s.consume(subjects[i++ % subjects.size()]);
      ++ops;
      allowed += d.allowed;
    } else {
      reqs.clear();
      for (int k = 0; k < batch; ++k) reqs.push_back({subjects[i++ % subjects.size()], 1});
      for (const auto& d : s.consume_many(reqs)) allowed += d.allowed;
      ops += batch;
    }
  }
}

RunResult run_sync(const Config& c, const Spec& spec, const Mode& m, const std::string& resource,
                   const std::vector<std::string>& subjects, Admin& admin) {
  auto limiter = connect(c, static_cast<std::size_t>(m.threads));
  auto strategy = spec.make(limiter, resource);
  // Open every pooled connection before the clock starts (on a cluster, a connection to each
  // master: 16 subjects per thread land on all three).
  {
    std::vector<std::thread> warm;
    for (int t = 0; t < m.threads; ++t) {
      warm.emplace_back([&, t] {
        for (int k = 0; k < 16; ++k) strategy->peek(subjects[static_cast<std::size_t>(t * 16 + k) % subjects.size()]);
      });
    }
    for (auto& th : warm) th.join();
  }
  admin.reset_stats();
  const double cpu0 = admin.main_thread_cpu();
  std::atomic<bool> stop{false};
  std::vector<long long> ops(m.threads, 0), allowed(m.threads, 0);
  const long quota = c.max_ops / m.threads;
  const auto t0 = Clock::now();
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < m.threads; ++t) {
    threads.emplace_back([&, t] {
      caller(*strategy, subjects, static_cast<std::size_t>(t) * subjects.size() / m.threads, m.batch, quota, stop,
             ops[t], allowed[t]);
      ++finished;
    });
  }
  const auto deadline = t0 + std::chrono::duration<double>(c.seconds);
  while (Clock::now() < deadline && finished.load() < m.threads) std::this_thread::sleep_for(1ms);
  stop = true;
  for (auto& th : threads) th.join();
  RunResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.server_cpu = admin.main_thread_cpu() - cpu0;
  for (int t = 0; t < m.threads; ++t) {
    r.ops += ops[t];
    r.allowed += allowed[t];
  }
  return r;
}

#ifdef REDLIMIT_BENCH_HAVE_ASYNC
// consume_async over an AsyncRedis on a libevent loop of our own (its thread runs the callbacks):
// `in_flight` requests are issued at once, and every completion issues the next one, until the time
// or the operation budget is spent; then the run waits for the last replies.
RunResult run_async(const Config& c, const Spec& spec, const Mode& m, const std::string& resource,
                    const std::vector<std::string>& subjects, Admin& admin) {
  event_base* base = event_base_new();
  if (base == nullptr) throw std::runtime_error("event_base_new failed");
  auto redis = redlimit::AsyncRedis::attach_libevent(base, endpoint_of(c));
  std::thread loop([base] { event_base_dispatch(base); });
  RunResult r;
  {
    auto limiter = connect(c, 1);
    limiter.attach_async(redis);
    auto strategy = spec.make(limiter, resource);
    strategy->consume_future(subjects[0]).get();  // opens the connection before the clock starts
    admin.reset_stats();
    const double cpu0 = admin.main_thread_cpu();

    struct Shared {
      std::atomic<long long> issued{0}, done{0}, allowed{0}, errors{0};
      std::atomic<bool> stop{false};
      std::mutex mutex;
      std::condition_variable cv;
    } st;
    std::function<void()> issue;
    issue = [&] {
      const long long i = st.issued.fetch_add(1);
      strategy->consume_async(subjects[static_cast<std::size_t>(i) % subjects.size()], 1,
                              [&](const redlimit::Decision& d, std::exception_ptr e) {
                                if (e) ++st.errors;
                                else if (d.allowed) ++st.allowed;
                                // Under the lock: the waiting thread may free `st` as soon as it
                                // sees the last completion.
                                std::lock_guard<std::mutex> lock(st.mutex);
                                ++st.done;
                                if (!st.stop.load() && st.issued.load() < c.max_ops) {
                                  issue();
                                } else {
                                  st.cv.notify_all();
                                }
                              });
    };
    const auto t0 = Clock::now();
    for (int k = 0; k < m.in_flight; ++k) issue();
    const auto deadline = t0 + std::chrono::duration<double>(c.seconds);
    {
      std::unique_lock<std::mutex> lock(st.mutex);
      while (Clock::now() < deadline && st.issued.load() < c.max_ops) st.cv.wait_for(lock, 2ms);
      st.stop = true;
      const auto give_up = Clock::now() + 10s;
      while (st.done.load() < st.issued.load() && Clock::now() < give_up) st.cv.wait_for(lock, 1ms);
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.server_cpu = admin.main_thread_cpu() - cpu0;
    r.ops = st.done.load() - st.errors.load();
    r.allowed = st.allowed.load();
    if (st.errors.load() > 0) progress("{} {}: {} errors", spec.id, m.id, st.errors.load());
    if (st.done.load() < st.issued.load()) throw std::runtime_error("async replies still missing after 10 s");
  }
  redis.reset();  // the limiter and the strategy are gone: this releases the loop, which returns
  loop.join();
  event_base_free(base);
  return r;
}
#endif

// `suite` is "throughput" on one server, "cluster" on a cluster (where the Redis-side figures are
// sums over the masters, and script_calls_per_master shows how the decisions spread).
void emit_throughput(const std::string& suite, const Spec& spec, const Mode& m, const RunResult& r, Admin& admin) {
  auto stats = admin.commandstats();
  std::string per_master;
  if (admin.nodes() > 1) {
    for (long long n : admin.script_calls_per_node()) per_master += (per_master.empty() ? "" : " ") + std::to_string(n);
  }
  CmdStat script;
  for (const char* name : {"evalsha", "eval"}) {
    if (stats.count(name)) {
      script.calls += stats[name].calls;
      script.usec += stats[name].usec;
    }
  }
  Json j;
  j.str("suite", suite)
      .str("strategy", spec.id)
      .str("label", spec.label)
      .str("mode", m.id)
      .integer("threads", m.threads)
      .integer("batch", m.batch)
      .integer("in_flight", m.in_flight)
      .integer("ops", r.ops)
      .integer("allowed", r.allowed)
      .num("seconds", r.seconds)
      .num("rate", static_cast<double>(r.ops) / r.seconds)
      .integer("script_calls", script.calls)
      .integer("script_usec", script.usec)
      .num("usec_per_decision", r.ops ? static_cast<double>(script.usec) / static_cast<double>(r.ops) : 0)
      .num("server_cpu_us_per_decision", r.ops ? r.server_cpu * 1e6 / static_cast<double>(r.ops) : 0)
      .str("inner", inner_commands(stats, r.ops));
  if (admin.nodes() > 1) j.integer("masters", static_cast<long long>(admin.nodes())).str("script_calls_per_master", per_master);
  j.emit();
}

std::vector<Mode> all_modes() {
  return {
      {"seq", 1, 0, 0},         {"pool2", 2, 0, 0},          {"pool4", 4, 0, 0},
      {"pool8", 8, 0, 0},       {"batch32", 1, 32, 0},        {"batch128", 1, 128, 0},
      {"pool2_batch128", 2, 128, 0}, {"async64", 1, 0, 64},   {"async256", 1, 0, 256},
  };
}

// The throughput suite, on one server (rows "suite": "throughput") or on a cluster (`cluster`:
// the same strategies and modes, rows "suite": "cluster"; the async modes are missing there).
void suite_throughput(const Config& c, Admin& admin, const std::string& suite = "throughput") {
  const bool cluster = suite == "cluster";
  std::vector<std::string> subjects;
  for (long i = 0; i < 10000; ++i) subjects.push_back(subject_name(i));
  // Load every script once (the first call of each is EVAL after NOSCRIPT), outside any measurement:
  // 32 subjects, so that on a cluster every master has loaded every script.
  {
    auto limiter = connect(c, 1);
    for (const auto& spec : all_specs()) {
      auto s = spec.make(limiter, "bench-warmup");
      for (int k = 0; k < (cluster ? 32 : 1); ++k) s->consume(subject_name(k));
    }
  }
  for (const auto& spec : all_specs()) {
    if (!wanted(c.strategies, spec.id)) continue;
    for (const auto& m : all_modes()) {
      if (!wanted(c.modes, m.id)) continue;
      const std::string resource = fmt::format("tp-{}-{}", spec.id, m.id);
      if (m.in_flight > 0) {
        std::string missing;
        if (cluster) {
          missing = "there is no asynchronous cluster connection (AsyncRedis, which consume_async runs on, "
                    "connects to one server; ClusterConnection is synchronous)";
        }
#ifdef REDLIMIT_BENCH_HAVE_ASYNC
        if (missing.empty()) {
          const RunResult r = run_async(c, spec, m, resource, subjects, admin);
          emit_throughput(suite, spec, m, r, admin);
          progress("{} {} {}: {:.0f}/s", suite, spec.id, m.id, r.ops / r.seconds);
          continue;
        }
#else
        if (missing.empty()) {
          missing = "built without the async rows: they need AsyncRedis (redlimit/transport/redis_async.hpp), "
                    "Strategy::consume_async and libevent-dev";
        }
#endif
        Json()
            .str("suite", suite)
            .str("strategy", spec.id)
            .str("label", spec.label)
            .str("mode", m.id)
            .integer("in_flight", m.in_flight)
            .str("missing", missing)
            .emit();
        continue;
      }
      const RunResult r = run_sync(c, spec, m, resource, subjects, admin);
      emit_throughput(suite, spec, m, r, admin);
      progress("{} {} {}: {:.0f}/s", suite, spec.id, m.id, r.ops / r.seconds);
    }
  }
  // bench.sh flushes its one server between repetitions; the cluster's masters are flushed here.
  if (cluster) admin.flushall();
}

// ---------------------------------------------------------------------------------------------
// Raw hiredis, no redlimit on the path: the one-line INCR script redis-benchmark runs, through the
// same RedisConnection redlimit uses. Separates the cost of the client library from the script's.

void suite_raw(const Config& c, Admin& admin) {
  const std::string sha = admin.cmd({"SCRIPT", "LOAD", "return redis.call('INCR', KEYS[1])"}).str;
  redlimit::RedisConnection conn(endpoint_of(c), 2000ms, 10000ms);
  const std::vector<std::string> argv{"EVALSHA", sha, "1", "bench:raw"};
  for (int pipeline : {1, 32}) {
    admin.reset_stats();
    const double cpu0 = admin.main_thread_cpu();
    long long ops = 0;
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::duration<double>(c.seconds);
    std::vector<std::vector<std::string>> batch(static_cast<std::size_t>(pipeline), argv);
    while (ops < c.max_ops && Clock::now() < deadline) {
      if (pipeline == 1) {
        conn.command(argv);
        ++ops;
      } else {
        conn.pipeline(batch);
        ops += pipeline;
      }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu = admin.main_thread_cpu() - cpu0;
    const CmdStat s = admin.script_stats();
    Json()
        .str("suite", "raw")
        .str("mode", pipeline == 1 ? "seq" : "pipeline32")
        .integer("ops", ops)
        .num("seconds", secs)
        .num("rate", static_cast<double>(ops) / secs)
        .num("usec_per_decision", ops ? static_cast<double>(s.usec) / static_cast<double>(ops) : 0)
        .num("server_cpu_us_per_decision", ops ? cpu * 1e6 / static_cast<double>(ops) : 0)
        .emit();
    progress("raw hiredis EVALSHA INCR, pipeline {}: {:.0f}/s", pipeline, ops / secs);
  }

  // The floor of any redlimit script: EVALSHA of a script that touches nothing and returns a
  // decision, called with a decision's KEYS and ARGV (2 keys, 5 arguments), pipelined by 32.
  const std::string empty = admin.cmd({"SCRIPT", "LOAD", "return {1, 999, 0, 60000000, 0}"}).str;
  std::vector<std::vector<std::string>> batch;
  for (int i = 0; i < 32; ++i) {
    const std::string subj = subject_name(i);
    batch.push_back({"EVALSHA", empty, "2", "redlimit:{api|" + subj + "}:fw", "redlimit:{api|" + subj + "}:blk",
                     "1700000000000000", "1", "1", "1000", "60000000"});
  }
  admin.reset_stats();
  const double cpu0 = admin.main_thread_cpu();
  long long ops = 0;
  const auto t0 = Clock::now();
  while (ops < 64000 && Clock::now() - t0 < std::chrono::duration<double>(c.seconds)) {
    conn.pipeline(batch);
    ops += 32;
  }
  const CmdStat s = admin.script_stats();
  Json()
      .str("suite", "raw")
      .str("mode", "empty_decision_script")
      .integer("ops", ops)
      .num("usec_per_decision", ops ? static_cast<double>(s.usec) / static_cast<double>(ops) : 0)
      .num("server_cpu_us_per_decision", ops ? (admin.main_thread_cpu() - cpu0) * 1e6 / static_cast<double>(ops) : 0)
      .emit();
}

// ---------------------------------------------------------------------------------------------
// Memory per subject: MEMORY USAGE of a subject's key after one decision, over 100 subjects decided
// one after the other (mean and largest: Redis's allocation for a value can depend on the commands
// scripts ran before, see docs/performance.md), and the sliding log at its full limit.

void suite_memory(const Config& c, Admin& admin) {
  auto limiter = connect(c, 1);
  const std::string subject = "u0000001";
  for (const auto& spec : all_specs()) {
    if (!wanted(c.strategies, spec.id)) continue;
    admin.flushall();
    auto s = spec.make(limiter, "api");
    constexpr int kSubjects = 100;
    long long total = 0;
    long long largest = 0;
    for (int i = 1; i <= kSubjects; ++i) {
      const std::string other = fmt::format("u{:07d}", i);  // u0000001 is `subject`
      s->consume(other);
      const long long b = admin.memory_usage(s->key_for(other));
      total += b;
      largest = std::max(largest, b);
    }
    const std::string key = s->key_for(subject);
    const auto emit = [&](const std::string& state, long long units) {
      Json j;
      j.str("suite", "memory")
          .str("strategy", spec.id)
          .str("label", spec.label)
          .str("state", state)
          .integer("units", units)
          .str("key", key)
          .integer("bytes", admin.memory_usage(key))
          .integer("keys", admin.dbsize());
      if (state == "one decision") {
        j.num("bytes_mean", static_cast<double>(total) / kSubjects).integer("bytes_max", largest).integer("subjects", kSubjects);
      }
      j.emit();
    };
    emit("one decision", 1);
    if (spec.id == "sliding_log") {
      std::vector<redlimit::Request> reqs(999, redlimit::Request{subject, 1});
      long long allowed = 0;
      for (const auto& d : s->consume_many(reqs)) allowed += d.allowed;
      emit("full limit", 1 + allowed);
    }
  }
  admin.flushall();
}

// ---------------------------------------------------------------------------------------------
// Growth: 1 -> 1,000 -> 100,000 -> 1,000,000 distinct subjects per strategy, each at 1000 per day
// (so that no subject's state expires during the run). Subjects are filled with consume_many batches
// of 128; at each size: the fill rate, Redis used_memory per subject, and decisions per second (one
// connection, sequential; and batches of 128) on random existing subjects.

void suite_growth(const Config& c, Admin& admin) {
  auto limiter = connect(c, 1);
  const auto suite_start = Clock::now();
  std::mt19937_64 rng(42);
  std::vector<Spec> specs;
  for (const auto& s : all_specs(std::chrono::hours(24))) {
    if (wanted(c.strategies, s.id)) specs.push_back(s);
  }
  // Split the budget evenly: a strategy that finishes early leaves its time to the next ones.
  for (std::size_t si = 0; si < specs.size(); ++si) {
    const Spec& spec = specs[si];
    const double elapsed_suite = std::chrono::duration<double>(Clock::now() - suite_start).count();
    const double budget = (c.growth_budget - elapsed_suite) / static_cast<double>(specs.size() - si);
    const auto started = Clock::now();
    admin.flushall();
    const long long base = admin.used_memory();
    auto s = spec.make(limiter, "grow");
    long filled = 0;
    double fill_rate = 0;
    for (long size : c.sizes) {
      const double spent = std::chrono::duration<double>(Clock::now() - started).count();
      const double projected = fill_rate > 0 ? static_cast<double>(size - filled) / fill_rate : 0;
      if (fill_rate > 0 && spent + projected * 1.3 + 1.0 > budget) {
        Json()
            .str("suite", "growth")
            .str("strategy", spec.id)
            .integer("subjects", size)
            .str("skipped", fmt::format("projected {:.0f} s would pass this strategy's {:.0f} s budget",
                                        projected, budget - spent))
            .emit();
        progress("growth {}: skipping {} subjects", spec.id, size);
        break;
      }
      // Fill [filled, size).
      std::vector<std::string> names;
      std::vector<redlimit::Request> reqs;
      const auto f0 = Clock::now();
      const long first = filled;
      while (filled < size) {
        const long n = std::min<long>(128, size - filled);
        names.clear();
        reqs.clear();
        for (long k = 0; k < n; ++k) names.push_back(subject_name(filled + k));
        for (const auto& nm : names) reqs.push_back({nm, 1});
        s->consume_many(reqs);
        filled += n;
      }
      const double fill_secs = std::chrono::duration<double>(Clock::now() - f0).count();
      if (filled - first >= 500) fill_rate = static_cast<double>(filled - first) / fill_secs;
      const long long used = admin.used_memory();
      const long long keys = admin.dbsize();
      // Decisions on random existing subjects: sequential, then batches of 128.
      std::uniform_int_distribution<long> pick(0, size - 1);
      const auto measure = [&](int batch) {
        long long ops = 0;
        const auto t0 = Clock::now();
        const auto deadline = t0 + std::chrono::duration<double>(std::min(0.5, c.seconds));
        std::vector<std::string> nm;
        std::vector<redlimit::Request> rq;
        while (ops < c.max_ops && Clock::now() < deadline) {
          if (batch == 0) {
            s->consume(subject_name(pick(rng)));
            ++ops;
          } else {
            nm.clear();
            rq.clear();
            for (int k = 0; k < batch; ++k) nm.push_back(subject_name(pick(rng)));
            for (const auto& x : nm) rq.push_back({x, 1});
            s->consume_many(rq);
            ops += batch;
          }
        }
        return static_cast<double>(ops) / std::chrono::duration<double>(Clock::now() - t0).count();
      };
      admin.reset_stats();
      const double seq_rate = measure(0);
      const CmdStat seq_cpu = admin.script_stats();
      const double batch_rate = measure(128);
      Json()
          .str("suite", "growth")
          .str("strategy", spec.id)
          .str("label", spec.label)
          .integer("subjects", size)
          .integer("keys", keys)
          .num("fill_rate", filled - first >= 500 ? static_cast<double>(filled - first) / fill_secs : 0)
          .num("seq_rate", seq_rate)
          .num("batch128_rate", batch_rate)
          .num("usec_per_decision", seq_cpu.calls ? static_cast<double>(seq_cpu.usec) / seq_cpu.calls : 0)
          .num("bytes_per_subject", static_cast<double>(used - base) / static_cast<double>(size))
          .integer("memory_growth", used - base)
          .integer("used_memory", used)
          .emit();
      progress("growth {} {} subjects: fill {:.0f}/s, seq {:.0f}/s, {:.0f} B/subject", spec.id, size,
               filled - first >= 500 ? (filled - first) / fill_secs : 0.0, seq_rate,
               static_cast<double>(used - base) / static_cast<double>(size));
    }
  }
  admin.flushall();
}

// ---------------------------------------------------------------------------------------------
// Flood: one subject of a sliding log (limit L per 10 minutes, so nothing leaves the window) hit
// 100 L times. Redis CPU per call in each stage: filling to the limit, then 1-2x, 2-10x, 10-100x.

void suite_flood(const Config& c, Admin& admin) {
  auto limiter = connect(c, 1);
  admin.flushall();
  const long L = c.flood_limit;
  auto s = limiter.sliding_log("flood", redlimit::Limit(L, std::chrono::minutes(10)));
  const std::string subject = "flooder";
  const std::vector<std::pair<long, long>> stages{{0, L}, {L, 2 * L}, {2 * L, 10 * L}, {10 * L, 100 * L}};
  const auto deadline = Clock::now() + 60s;
  for (const auto& [from, to] : stages) {
    admin.reset_stats();
    long sent = from;
    long long allowed = 0;
    const auto t0 = Clock::now();
    while (sent < to && Clock::now() < deadline) {
      const long n = std::min<long>(100, to - sent);
      std::vector<redlimit::Request> reqs(static_cast<std::size_t>(n), redlimit::Request{subject, 1});
      for (const auto& d : s.consume_many(reqs)) allowed += d.allowed;
      sent += n;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const CmdStat st = admin.script_stats();
    Json()
        .str("suite", "flood")
        .str("who", "redlimit sliding log")
        .integer("limit", L)
        .integer("from", from)
        .integer("to", sent)
        .integer("allowed", allowed)
        .num("rate", static_cast<double>(sent - from) / secs)
        .num("usec_per_call", sent > from ? static_cast<double>(st.usec) / static_cast<double>(sent - from) : 0)
        .integer("bytes", admin.memory_usage(s.key_for(subject)))
        .emit();
    progress("flood {}..{}: {:.2f} us/request", from, sent, sent > from ? static_cast<double>(st.usec) / static_cast<double>(sent - from) : 0);
  }
  admin.flushall();
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "redlimit_bench: {} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--host") c.host = next();
    else if (a == "--url") c.url = next();
    else if (a == "--port") c.port = std::stoi(next());
    else if (a == "--suite") c.suite = next();
    else if (a == "--seconds") c.seconds = std::stod(next());
    else if (a == "--max-ops") c.max_ops = std::stol(next());
    else if (a == "--growth-budget") c.growth_budget = std::stod(next());
    else if (a == "--flood-limit") c.flood_limit = std::stol(next());
    else if (a == "--strategies") c.strategies = split(next(), ',');
    else if (a == "--modes") c.modes = split(next(), ',');
    else if (a == "--sizes") {
      c.sizes.clear();
      for (const auto& s : split(next(), ',')) c.sizes.push_back(std::stol(s));
    } else {
      fmt::print(stderr, "redlimit_bench: unknown argument {}\n", a);
      return 2;
    }
  }
  if (is_cluster(c)) {
    // The other suites read one server's keys and memory (MEMORY USAGE, DBSIZE, a raw connection).
    if (c.suite == "all") c.suite = "cluster";
    if (c.suite != "cluster") {
      fmt::print(stderr, "redlimit_bench: with a redis-cluster:// URL the only suite is cluster, not {}\n", c.suite);
      return 2;
    }
  } else if (c.suite == "cluster") {
    fmt::print(stderr, "redlimit_bench: --suite cluster needs --url redis-cluster://host:port[,host:port...]\n");
    return 2;
  }
  try {
    Admin admin(c);
    const bool all = c.suite == "all";
    if (c.suite == "cluster") suite_throughput(c, admin, "cluster");
    if (all || c.suite == "raw") suite_raw(c, admin);
    if (all || c.suite == "throughput") suite_throughput(c, admin);
    if (all || c.suite == "memory") suite_memory(c, admin);
    if (all || c.suite == "flood") suite_flood(c, admin);
    if (all || c.suite == "growth") suite_growth(c, admin);
  } catch (const std::exception& e) {
    fmt::print(stderr, "redlimit_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
