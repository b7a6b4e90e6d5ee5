#pragma once
// What the load driver's suites share (benchmarks/redlimit_bench.cpp has the usage): options,
// JSON output, the admin connection that reads Redis's own figures, the strategies under test.
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

#include "redlimit/transport/async_cluster.hpp"
#include "redlimit/transport/redis_async.hpp"
#define REDLIMIT_BENCH_HAVE_ASYNC 1
#endif

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace redlimit_bench {

// ---------------------------------------------------------------------------------------------
// Options

struct Config {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string url;                // --url; empty = redis://host:port
  std::string suite = "all";
  double seconds = 1.5;           // wall-clock budget of one throughput measurement
  long max_ops = 400000;          // operation cap of one throughput measurement
  long subjects = 10000;          // --subjects: how many subjects a throughput row cycles over
  std::vector<long> sizes{1, 1000, 100000, 1000000};
  double growth_budget = 240;     // seconds for the whole growth suite
  long flood_limit = 1000;        // the flooded sliding log's limit (flood = 100x this)
  std::vector<std::string> strategies;  // empty = all
  std::vector<std::string> modes;       // empty = all
  // The form of the entries sliding logs write (Options::sliding_log_members): set per row by
  // for_spec, from the Spec.
  redlimit::SlidingLogMembers members = redlimit::SlidingLogMembers::text;
};

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

inline bool is_cluster(const Config& c) { return c.url.rfind("redis-cluster://", 0) == 0; }

inline std::string url_of(const Config& c) { return c.url.empty() ? fmt::format("redis://{}:{}", c.host, c.port) : c.url; }

// The one server's endpoint (not for a cluster URL).
inline redlimit::Endpoint endpoint_of(const Config& c) {
  if (!c.url.empty()) return redlimit::parse_url(c.url);
  redlimit::Endpoint e;
  e.host = c.host;
  e.port = c.port;
  return e;
}

// The servers whose statistics the Admin reads: the one server, or every master of the cluster
// (from its slot map; replicas are left out, as no decision runs on them).
inline std::vector<redlimit::Endpoint> admin_endpoints(const Config& c) {
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
inline void progress(fmt::format_string<Args...> f, Args&&... args) {
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

  // Script calls (FCALL, EVALSHA, EVAL) on each node since the last reset: how the decisions spread.
  std::vector<long long> script_calls_per_node() {
    std::vector<long long> out;
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      long long calls = 0;
      for (const auto& [name, s] : commandstats_of(n)) {
        if (name == "fcall" || name == "evalsha" || name == "eval") calls += s.calls;
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

  // Script calls (FCALL, EVALSHA, EVAL) since the last reset: their count and total microseconds.
  CmdStat script_stats() {
    auto all = commandstats();
    CmdStat s;
    for (const char* name : {"fcall", "evalsha", "eval"}) {
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
      const std::string info = cmd_on(n, {"INFO", "memory"}).str;
      total += info_integer(info, "used_memory", -1) - info_integer(info, "mem_clients_normal", 0);
    }
    return total;
  }

  // The first node's used_memory_vm_functions: the Functions engine's Lua heap, in bytes (0 when
  // the server has no such field: one older than 7.0 runs EVALSHA, whose scripts keep nothing
  // across calls).
  long long functions_heap() { return info_integer(cmd({"INFO", "memory"}).str, "used_memory_vm_functions", 0); }

  // The integer of `field` in an INFO reply's text ("field:value" lines), or `missing`.
  static long long info_integer(const std::string& info, const std::string& field, long long missing) {
    std::istringstream in(info);
    const std::string prefix = field + ":";
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(prefix, 0) == 0) return std::atoll(line.c_str() + prefix.size());
    }
    return missing;
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
inline std::string inner_commands(const std::map<std::string, CmdStat>& stats, long long decisions) {
  std::string out;
  if (decisions <= 0) return out;
  for (const auto& [name, s] : stats) {
    if (name == "fcall" || name == "evalsha" || name == "eval" || name == "config" || name == "info" ||
        name == "ping" || name.rfind("function", 0) == 0) {
      continue;
    }
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
  // The form of a sliding log's entries that the limiter a row opens for this spec writes
  // (Options::sliding_log_members).
  redlimit::SlidingLogMembers members = redlimit::SlidingLogMembers::text;
};

template <typename T>
inline std::shared_ptr<redlimit::Strategy> share(T s) {
  return std::make_shared<T>(std::move(s));
}

// `window` is the rate's period: a minute for the throughput runs (1000 per minute), a day for the
// growth runs, so that every subject's state is still alive when the memory is read.
inline std::vector<Spec> all_specs(std::chrono::microseconds window = std::chrono::minutes(1)) {
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

// The throughput suite's: every strategy, and the sliding log once more with compact entries, so that
// the two forms are measured side by side in one run.
inline std::vector<Spec> throughput_specs() {
  std::vector<Spec> specs = all_specs();
  const auto log = std::find_if(specs.begin(), specs.end(), [](const Spec& s) { return s.id == "sliding_log"; });
  Spec compact = *log;
  compact.id += "_compact";
  compact.label += ", compact entries";
  compact.members = redlimit::SlidingLogMembers::compact;
  specs.insert(log + 1, std::move(compact));
  return specs;
}

// The options a row of `spec` runs under: the spec's entry form.
inline Config for_spec(Config c, const Spec& spec) {
  c.members = spec.members;
  return c;
}

inline bool wanted(const std::vector<std::string>& list, const std::string& id) {
  return list.empty() || std::find(list.begin(), list.end(), id) != list.end();
}

inline std::string subject_name(long i) { return fmt::format("u{:07d}", i); }

// On a cluster, Options::pool is per master: each master gets a pool of this size.
// `coalesce`: PoolOptions::coalesce and Options::share_script_calls; `per_master`:
// Options::batch_per_master; `flights`: Options::shared_call_flights; `linger_us`:
// Options::shared_call_linger.
inline redlimit::RateLimiter connect(const Config& c, std::size_t pool, bool coalesce = true, bool per_master = true,
                                     std::size_t flights = 0, long linger_us = 0) {
  redlimit::Options o;
  o.pool.size = pool;
  o.pool.coalesce = coalesce;
  o.share_script_calls = coalesce;
  o.shared_call_flights = flights;
  o.shared_call_linger = std::chrono::microseconds(linger_us);
  o.batch_per_master = per_master;
  o.sliding_log_members = c.members;
  return redlimit::RateLimiter::connect(url_of(c), o);
}

// The suites (bench_throughput.cpp, bench_suites.cpp, bench_buckets.cpp, bench_heap.cpp,
// bench_functions.cpp).
void suite_throughput(const Config& c, Admin& admin, const std::string& suite = "throughput");
void suite_raw(const Config& c, Admin& admin);
void suite_memory(const Config& c, Admin& admin);
void suite_growth(const Config& c, Admin& admin);
void suite_largest(const Config& c, Admin& admin);
void suite_buckets(const Config& c, Admin& admin);
void suite_heap(const Config& c, Admin& admin);
void suite_lease(const Config& c, Admin& admin);
void suite_functions(const Config& c, Admin& admin);
void suite_flood(const Config& c, Admin& admin);
void suite_failover(const Config& c);

}  // namespace redlimit_bench
