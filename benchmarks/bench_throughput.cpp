// The throughput suites of the load driver: decisions per second for each (strategy, mode), and the
// raw ceiling (redis-benchmark-like commands over plain hiredis) measured beside them.
#include "bench_common.hpp"

namespace redlimit_bench {

// ---------------------------------------------------------------------------------------------
// Throughput: decisions per second for one (strategy, mode).

struct Mode {
  std::string id;
  int threads = 1;     // caller threads (pool size = threads)
  int batch = 0;       // 0 = consume(); otherwise consume_many of this many requests
  int in_flight = 0;   // async: requests kept in flight on one connection
  int pool = 0;        // pool size; 0 = threads
  bool coalesce = true;  // PoolOptions::coalesce and Options::share_script_calls (bench_common.hpp)
  bool per_master = true;  // Options::batch_per_master (a cluster's batches)
  std::size_t flights = 0;  // Options::shared_call_flights (0: the pool's size)
  long linger_us = 0;       // Options::shared_call_linger
};

struct RunResult {
  long long ops = 0;
  long long allowed = 0;
  double seconds = 0;
  double server_cpu = 0;  // seconds of Redis main-thread CPU during the run
};


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
  auto limiter = connect(for_spec(c, spec), static_cast<std::size_t>(m.pool > 0 ? m.pool : m.threads), m.coalesce,
                         m.per_master, m.flights, m.linger_us);
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
  // On a cluster, AsyncCluster: a connection per master on the same loop, each call routed by slot.
  std::shared_ptr<redlimit::AsyncConnection> redis;
  if (is_cluster(c)) {
    redis = redlimit::AsyncCluster::attach_libevent(base, redlimit::parse_cluster_url(c.url));
  } else {
    redis = redlimit::AsyncRedis::attach_libevent(base, endpoint_of(c));
  }
  std::thread loop([base] { event_base_dispatch(base); });
  RunResult r;
  {
    auto limiter = connect(for_spec(c, spec), 1, m.coalesce);
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
  for (const char* name : {"fcall", "evalsha", "eval"}) {
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
      {"seq", 1, 0, 0},
      {"pool2", 2, 0, 0},
      {"pool4", 4, 0, 0},
      {"pool8", 8, 0, 0},
      {"batch32", 1, 32, 0},
      {"batch128", 1, 128, 0},
      {"pool2_batch128", 2, 128, 0},
      {"async64", 1, 0, 64},
      {"async256", 1, 0, 256},
      // 64 in flight, each consume_async its own script call (Options::share_script_calls off).
      {"async64_unshared", 1, 0, 64, 0, false},
      // 8 threads on the default pool of 4, as a service calls it: sharing round trips, then not.
      {"threads8", 8, 0, 0, 4, true},
      {"threads8_unshared", 8, 0, 0, 4, false},
      // The same with at most 2 shared script calls out (Options::shared_call_flights), not 4, then 1.
      {"threads8_flights2", 8, 0, 0, 4, true, true, 2},
      {"threads8_flights1", 8, 0, 0, 4, true, true, 1},
      // One call out at a time, each held up to 200 us for as many callers as the last one carried.
      {"threads8_linger", 8, 0, 0, 4, true, true, 1, 200},
      // The same linger with the default flights (the pool's 4): the callers that come while a call
      // is held back join it rather than take another flight.
      {"threads8_linger4", 8, 0, 0, 4, true, true, 0, 200},
      // consume_many 128 on a cluster, a script call per hash slot (Options::batch_per_master off);
      // the same as batch128 on one server.
      {"batch128_per_slot", 1, 128, 0, 0, true, false},
  };
}

// The throughput suite, on one server (rows "suite": "throughput") or on a cluster (`cluster`:
// the same strategies and modes, rows "suite": "cluster"; the async modes over AsyncCluster).
void suite_throughput(const Config& c, Admin& admin, const std::string& suite) {
  const bool cluster = suite == "cluster";
  std::vector<std::string> subjects;
  for (long i = 0; i < c.subjects; ++i) subjects.push_back(subject_name(i));
  // Load every script once (the first call of each is EVAL after NOSCRIPT), outside any measurement:
  // 32 subjects, so that on a cluster every master has loaded every script.
  {
    auto limiter = connect(c, 1);
    for (const auto& spec : all_specs()) {
      auto s = spec.make(limiter, "bench-warmup");
      for (int k = 0; k < (cluster ? 32 : 1); ++k) s->consume(subject_name(k));
    }
  }
  for (const auto& spec : throughput_specs()) {
    if (!wanted(c.strategies, spec.id)) continue;
    for (const auto& m : all_modes()) {
      if (!wanted(c.modes, m.id) || (!cluster && !m.per_master)) continue;  // per slot: a cluster's
      const std::string resource = fmt::format("tp-{}-{}", spec.id, m.id);
      if (m.in_flight > 0) {
        std::string missing;
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
    // Each strategy starts on an empty server: the keys of the one before would otherwise expire
    // during its rows (a sliding log's 10,000 sets of up to 1,000 entries, a minute after their
    // last write), and Redis's work freeing them would count against it.
    admin.flushall();
  }
}

// ---------------------------------------------------------------------------------------------
// Raw hiredis, no redlimit on the path: the one-line INCR script redis-benchmark runs, through the
// same RedisConnection redlimit uses. Separates the cost of the client library from the script's.

// The raw ceiling: plain hiredis commands, sequential then pipelined, beside the strategies' rows.
// Slightly over 60 lines: each mode is a few lines of the same shape, kept together for comparison.
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
  // decision, called with a fixed-window decision's KEYS and ARGV (1 key; 2 arguments: now, and the
  // head: mode, cost, the parameters), pipelined by 32.
  const std::string empty = admin.cmd({"SCRIPT", "LOAD", "return {1, 999, 0, 60000000, 0}"}).str;
  std::vector<std::vector<std::string>> batch;
  for (int i = 0; i < 32; ++i) {
    const std::string subj = subject_name(i);
    batch.push_back({"EVALSHA", empty, "1", "redlimit:{api|" + subj + "}:fw", "1700000000000000", "1 1 1000 60000000"});
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

}  // namespace redlimit_bench
