// Client-side CPU per decision, no I/O: a Connection that answers every command with a canned
// decision stands in for Redis. What remains is what redlimit itself does around each round trip
// (checks, keys, argv, the breaker, decoding, counters). Google Benchmark.
//
//   redlimit_micro [--benchmark_min_time=0.2] [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"

namespace {

class CannedConnection final : public redlimit::Connection {
 public:
  bool thread_safe() const override { return true; }
  redlimit::Reply command(const std::vector<std::string>& argv) override {
    benchmark::DoNotOptimize(argv.data());
    using R = redlimit::Reply;
    // One decision per request of the call (two keys each): allowed, remaining, retry_after,
    // reset_after, delay, deciding limit (1-based).
    const std::size_t n = argv.size() > 2 ? std::stoul(argv[2]) / 2 : 1;
    R out = R::make_array({});
    for (std::size_t i = 0; i < n; ++i) {
      for (std::int64_t v : {1, 99, 0, 60000000, 0, 1}) out.elements.push_back(R::make_integer(v));
    }
    return out;
  }
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
  for (auto _ : state) {
    auto d = s.consume(names[i++ & 1023]);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}

template <typename Make>
void consume_many(benchmark::State& state, Make make) {
  redlimit::RateLimiter limiter(canned());
  const auto s = make(limiter);
  const auto names = subjects();
  std::vector<redlimit::Request> reqs;
  for (int k = 0; k < 128; ++k) reqs.push_back({names[static_cast<std::size_t>(k)], 1});
  for (auto _ : state) {
    auto d = s.consume_many(reqs);
    benchmark::DoNotOptimize(d.data());
  }
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

BENCHMARK(BM_fixed_window);
BENCHMARK(BM_token_bucket);
BENCHMARK(BM_leaky_bucket);
BENCHMARK(BM_policy3);
BENCHMARK(BM_fixed_window_batch128);

}  // namespace

BENCHMARK_MAIN();
