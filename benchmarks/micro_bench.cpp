// Client-side CPU per decision, no I/O: a Connection that answers every command with a canned
// decision stands in for Redis. What remains is what redlimit itself does around each round trip
// (checks, keys, argv, the breaker, decoding, counters). Google Benchmark. Each row also counts
// the heap allocations a decision makes (`allocs`: operator new calls in the timed loop, divided by
// the decisions), a figure that repeats exactly from run to run where the times move.
//
// The BM_memory_* rows run the whole decision on the in-memory backend instead (the C++ twins of the
// Lua scripts, src/memory/): single-thread decisions per second per strategy, the local decision
// path. A ManualClock moves 1 us a decision over 1024 subjects, so each subject sees about 977
// requests a second against a limit of 1000: nearly every decision admits and writes. The
// BM_memory_command_* rows send prebuilt EVALSHA argv straight to MemoryConnection::command(): the
// backend's own cost per decision, without the limiter's (the BM_<strategy> rows above).
//
//   redlimit_micro [--benchmark_min_time=0.2] [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/detail/scripts.hpp"
#include "redlimit/redlimit.hpp"
#include "redlimit/transport/memory_connection.hpp"

namespace {
std::atomic<std::int64_t> g_allocations{0};
}  // namespace

// Every allocation of the program goes through these, so the loops below can count theirs. (GCC
// takes the free() of a replaced operator delete, inlined where a static is destroyed, for a
// mismatch with the replaced operator new's malloc(): it is their pair.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

// A row's counter: `total` over the loop's decisions (none: 0).
benchmark::Counter per_decision(std::int64_t total, std::int64_t decisions) {
  return benchmark::Counter(static_cast<double>(total) / static_cast<double>(std::max<std::int64_t>(1, decisions)));
}

// Counts the allocations of a timed loop: made before it, read after it.
class AllocationCount {
 public:
  AllocationCount() : start_(g_allocations.load(std::memory_order_relaxed)) {}
  std::int64_t made() const { return g_allocations.load(std::memory_order_relaxed) - start_; }
  // Sets the row's counter `allocs`: allocations per decision, less `outside` (made by the loop's
  // untimed part).
  void report(benchmark::State& state, std::int64_t decisions, std::int64_t outside = 0) const {
    state.counters["allocs"] = per_decision(made() - outside, decisions);
  }

 private:
  std::int64_t start_;
};

// The reply to each shape of command (script and argv length) is the in-memory backend's answer to
// the first command of that shape, a fresh subject's admission: the form Redis sends for the common
// case, whatever form the scripts answer in today. Later commands of the shape get a copy of it.
class CannedConnection final : public redlimit::Connection {
 public:
  bool thread_safe() const override { return true; }
  redlimit::Reply command(const std::vector<std::string>& argv) override {
    benchmark::DoNotOptimize(argv.data());
    const std::string_view name = argv.size() > 1 ? std::string_view(argv[1]) : std::string_view();
    const std::lock_guard<std::mutex> lock(mutex_);
    // A shape's lookup builds nothing (a few shapes a row): its allocations are the library's alone.
    for (const auto& known : replies_) {
      if (known.size == argv.size() && known.name == name) return known.reply;
    }
    replies_.push_back({std::string(name), argv.size(), store_.command(argv)});
    return replies_.back().reply;
  }

 private:
  struct Shape {
    std::string name;  // argv[1]: the script's SHA1 or function name
    std::size_t size;
    redlimit::Reply reply;
  };
  std::mutex mutex_;
  redlimit::MemoryConnection store_;
  std::vector<Shape> replies_;
};

std::shared_ptr<CannedConnection> canned() { return std::make_shared<CannedConnection>(); }

std::vector<std::string> subjects() {
  std::vector<std::string> out;
  for (int i = 0; i < 1024; ++i) out.push_back("u" + std::to_string(1000000 + i));
  return out;
}

template <typename Make>
void consume(benchmark::State& state, Make make) {
  redlimit::RateLimiter limiter(canned());
  const auto s = make(limiter);
  const auto names = subjects();
  std::size_t i = 0;
  const AllocationCount allocations;
  for (auto _ : state) {
    auto d = s.consume(names[i++ & 1023]);
    benchmark::DoNotOptimize(d);
  }
  allocations.report(state, state.iterations());
  state.SetItemsProcessed(state.iterations());
}

template <typename Make>
void consume_many(benchmark::State& state, Make make) {
  redlimit::RateLimiter limiter(canned());
  const auto s = make(limiter);
  const auto names = subjects();
  std::vector<redlimit::Request> reqs;
  for (int k = 0; k < 128; ++k) reqs.push_back({names[static_cast<std::size_t>(k)], 1});
  const AllocationCount allocations;
  for (auto _ : state) {
    auto d = s.consume_many(reqs);
    benchmark::DoNotOptimize(d.data());
  }
  allocations.report(state, state.iterations() * 128);
  state.SetItemsProcessed(state.iterations() * 128);
}

const redlimit::Limit kPerMin(1000, std::chrono::minutes(1));

void BM_fixed_window(benchmark::State& st) {
  consume(st, [](const redlimit::RateLimiter& l) { return l.fixed_window("api", kPerMin); });
}
void BM_token_bucket(benchmark::State& st) {
  consume(st, [](const redlimit::RateLimiter& l) { return l.token_bucket("api", 1000, 1000, std::chrono::minutes(1)); });
}
void BM_leaky_bucket(benchmark::State& st) {
  consume(st, [](const redlimit::RateLimiter& l) { return l.leaky_bucket("api", 1000, kPerMin); });
}
void BM_policy3(benchmark::State& st) {
  consume(st, [](const redlimit::RateLimiter& l) {
    return l.policy("api", redlimit::parse_limits("100/1s; 1000/1m; 10000/1h@1m"));
  });
}
void BM_fixed_window_batch128(benchmark::State& st) {
  consume_many(st, [](const redlimit::RateLimiter& l) { return l.fixed_window("api", kPerMin); });
}

// The memory backend: the limiter, the twin and the store, no I/O.
template <typename Make>
void memory(benchmark::State& state, Make make) {
  auto clock = std::make_shared<redlimit::ManualClock>();
  redlimit::Options options;
  options.clock = clock;
  const redlimit::RateLimiter limiter = redlimit::RateLimiter::in_memory(options);
  const auto s = make(limiter);
  const auto names = subjects();
  std::size_t i = 0;
  std::int64_t admitted = 0;
  const AllocationCount allocations;
  for (auto _ : state) {
    clock->advance(std::chrono::microseconds(1));
    auto d = s.consume(names[i++ & 1023]);
    admitted += d.allowed ? 1 : 0;
    benchmark::DoNotOptimize(d);
  }
  allocations.report(state, state.iterations());
  state.SetItemsProcessed(state.iterations());
  state.counters["admitted"] = per_decision(admitted, state.iterations());
}

template <typename Make>
void memory_many(benchmark::State& state, Make make) {
  auto clock = std::make_shared<redlimit::ManualClock>();
  redlimit::Options options;
  options.clock = clock;
  const redlimit::RateLimiter limiter = redlimit::RateLimiter::in_memory(options);
  const auto s = make(limiter);
  const auto names = subjects();
  std::vector<redlimit::Request> reqs;
  std::size_t next = 0;
  std::int64_t paused = 0;  // the allocations of building each batch, not the decisions'
  const AllocationCount allocations;
  for (auto _ : state) {
    state.PauseTiming();
    const AllocationCount building;
    reqs.clear();
    for (int k = 0; k < 128; ++k) reqs.push_back({names[next++ & 1023], 1});
    clock->advance(std::chrono::microseconds(128));
    paused += building.made();
    state.ResumeTiming();
    auto d = s.consume_many(reqs);
    benchmark::DoNotOptimize(d.data());
  }
  allocations.report(state, state.iterations() * 128, paused);
  state.SetItemsProcessed(state.iterations() * 128);
}

const redlimit::Limit kPerSec(1000, std::chrono::seconds(1));

// The memory backend alone: EVALSHA argv built once per subject, straight into
// MemoryConnection::command(), without the limiter around it (the twin, the store and the locks).
void memory_command(benchmark::State& state, const redlimit::detail::Script& script,
                    const std::vector<std::string>& params) {
  auto clock = std::make_shared<redlimit::ManualClock>();
  redlimit::MemoryConnection store(clock);
  std::vector<std::vector<std::string>> argvs;
  for (const auto& name : subjects()) {
    const std::vector<std::string> args{
        "0", redlimit::detail::scripts::head("1", 1, redlimit::detail::scripts::params_arg(params))};
    const std::vector<std::string> keys{"rl:{" + name + "}"};  // the state, which holds its block
    argvs.push_back(redlimit::detail::evalsha_command(script, keys, args));
  }
  std::size_t i = 0;
  std::int64_t now = clock->now().count();
  const AllocationCount allocations;
  for (auto _ : state) {
    auto& argv = argvs[i++ & 1023];
    argv[4] = std::to_string(++now);  // ARGV[1]: the client's clock, 1 us a decision (one allocation)
    auto r = store.command(argv);
    benchmark::DoNotOptimize(r);
  }
  allocations.report(state, state.iterations());
  state.SetItemsProcessed(state.iterations());
}

namespace sc = redlimit::detail::scripts;
void BM_memory_command_fixed_window(benchmark::State& st) { memory_command(st, sc::fixed_window(), {"1000", "1000000"}); }
void BM_memory_command_sliding_log(benchmark::State& st) { memory_command(st, sc::sliding_log(), {"1000", "1000000"}); }
void BM_memory_command_sliding_window(benchmark::State& st) {
  memory_command(st, sc::policy(), {"1", "1000/1s@100ms", "1000", "1000000", "100000"});
}
void BM_memory_command_token_bucket(benchmark::State& st) { memory_command(st, sc::token_bucket(), {"1000", "1000", "1"}); }
void BM_memory_command_leaky_meter(benchmark::State& st) {
  memory_command(st, sc::leaky_bucket(), {"1000", "1000", "1", "meter"});
}
void BM_memory_command_policy3(benchmark::State& st) {
  memory_command(st, sc::policy(),
                 {"3", "1000/1s", "1000", "1000000", "1000000", "60000/1m", "60000", "60000000", "60000000",
                  "3600000/1h@1m", "3600000", "3600000000", "60000000"});
}

void BM_memory_fixed_window(benchmark::State& st) {
  memory(st, [](const redlimit::RateLimiter& l) { return l.fixed_window("api", kPerSec); });
}
void BM_memory_sliding_log(benchmark::State& st) {
  memory(st, [](const redlimit::RateLimiter& l) { return l.sliding_log("api", kPerSec); });
}
void BM_memory_sliding_window(benchmark::State& st) {
  memory(st, [](const redlimit::RateLimiter& l) {
    return l.sliding_window("api", kPerSec, std::chrono::milliseconds(100));
  });
}
void BM_memory_token_bucket(benchmark::State& st) {
  memory(st, [](const redlimit::RateLimiter& l) { return l.token_bucket("api", 1000, 1000, std::chrono::seconds(1)); });
}
void BM_memory_leaky_meter(benchmark::State& st) {
  memory(st, [](const redlimit::RateLimiter& l) { return l.leaky_bucket("api", 1000, kPerSec); });
}
void BM_memory_leaky_shaper(benchmark::State& st) {
  memory(st, [](const redlimit::RateLimiter& l) {
    return l.leaky_bucket("api", 1000, kPerSec, redlimit::LeakyMode::shaper);
  });
}
void BM_memory_policy3(benchmark::State& st) {
  memory(st, [](const redlimit::RateLimiter& l) {
    return l.policy("api", redlimit::parse_limits("1000/1s; 60000/1m; 3600000/1h@1m"));
  });
}
void BM_memory_fixed_window_batch128(benchmark::State& st) {
  memory_many(st, [](const redlimit::RateLimiter& l) { return l.fixed_window("api", kPerSec); });
}
void BM_memory_token_bucket_batch128(benchmark::State& st) {
  memory_many(st, [](const redlimit::RateLimiter& l) {
    return l.token_bucket("api", 1000, 1000, std::chrono::seconds(1));
  });
}

BENCHMARK(BM_fixed_window);
BENCHMARK(BM_token_bucket);
BENCHMARK(BM_leaky_bucket);
BENCHMARK(BM_policy3);
BENCHMARK(BM_fixed_window_batch128);
BENCHMARK(BM_memory_fixed_window);
BENCHMARK(BM_memory_sliding_log);
BENCHMARK(BM_memory_sliding_window);
BENCHMARK(BM_memory_token_bucket);
BENCHMARK(BM_memory_leaky_meter);
BENCHMARK(BM_memory_leaky_shaper);
BENCHMARK(BM_memory_policy3);
BENCHMARK(BM_memory_fixed_window_batch128);
BENCHMARK(BM_memory_token_bucket_batch128);
BENCHMARK(BM_memory_command_fixed_window);
BENCHMARK(BM_memory_command_sliding_log);
BENCHMARK(BM_memory_command_sliding_window);
BENCHMARK(BM_memory_command_token_bucket);
BENCHMARK(BM_memory_command_leaky_meter);
BENCHMARK(BM_memory_command_policy3);

}  // namespace

BENCHMARK_MAIN();
