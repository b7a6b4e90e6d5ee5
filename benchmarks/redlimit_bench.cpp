// redlimit's load driver. Runs against a redis-server of the caller's (scripts/bench.sh starts one)
// and prints one JSON object a line on stdout; progress goes to stderr. Every loop is bounded both in
// operations and in wall-clock time.
//
//   redlimit_bench --port P [--host H]
//                  [--suite all|throughput|raw|memory|growth|flood|largest|buckets|heap|lease|functions]
//                  [--seconds S] [--max-ops N] [--sizes 1,1000,100000,1000000]
//                  [--growth-budget S] [--flood-limit L] [--strategies id,id,...] [--modes m,m,...]
//   redlimit_bench --url redis-cluster://host:port[,host:port...] [--suite cluster|failover] [--seconds S] ...
//
// --url redis://... or unix://... replaces --host/--port. With a redis-cluster:// URL the suites
// are `cluster`: the throughput suite over a ClusterConnection (the async modes over AsyncCluster),
// its rows tagged "suite": "cluster", with the Redis-side figures (commandstats, main-thread CPU)
// summed over the masters; and `failover` (bench_failover.cpp): the fixed window's rate through
// planned failovers (CLUSTER FAILOVER) and masters stopped until their replica takes over, which
// change the cluster's masters, so it runs last and only when asked for.
//
// Workload: every strategy allows 1000 units per minute per subject and the requests cycle over
// 10,000 subjects, so nearly every decision is an admission (the full read-modify-write path of
// each script). Each (strategy, mode) pair gets a resource of its own, so runs never share state.
#include "bench_common.hpp"

using namespace redlimit_bench;  // NOLINT: main reads the options and runs the suites

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
    else if (a == "--subjects") c.subjects = std::max(1L, std::stol(next()));
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
    if (c.suite != "cluster" && c.suite != "failover") {
      fmt::print(stderr, "redlimit_bench: with a redis-cluster:// URL the suites are cluster and failover, not {}\n",
                 c.suite);
      return 2;
    }
  } else if (c.suite == "cluster" || c.suite == "failover") {
    fmt::print(stderr, "redlimit_bench: --suite {} needs --url redis-cluster://host:port[,host:port...]\n", c.suite);
    return 2;
  }
  try {
    Admin admin(c);
    const bool all = c.suite == "all";
    if (c.suite == "cluster") suite_throughput(c, admin, "cluster");
    if (c.suite == "failover") suite_failover(c);
    if (all || c.suite == "raw") suite_raw(c, admin);
    if (all || c.suite == "throughput") suite_throughput(c, admin);
    if (all || c.suite == "memory") suite_memory(c, admin);
    if (all || c.suite == "flood") suite_flood(c, admin);
    if (all || c.suite == "growth") suite_growth(c, admin);
    if (all || c.suite == "largest") suite_largest(c, admin);
    if (all || c.suite == "buckets") suite_buckets(c, admin);
    if (all || c.suite == "heap") suite_heap(c, admin);
    if (all || c.suite == "lease") suite_lease(c, admin);
    if (all || c.suite == "functions") suite_functions(c, admin);
  } catch (const std::exception& e) {
    fmt::print(stderr, "redlimit_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
