// One process of the multi-process lease test (tests/integration/lease_processes_test.cpp): `threads`
// threads consume one subject of a fixed window through redlimit::Leases (or per request when
// `leases` is 0) at `rate` requests a second in all, from the start of the window numbered `first`
// for `windows` windows, on the system clock. Prints one line per window, "window <index>
// <admitted>" (the window each admission was decided in), then "stats <leases taken> <local decisions> <remote decisions> <units returned>".
//
//   redlimit_lease_worker URL LIMIT WINDOW_MS FIRST WINDOWS THREADS RATE LEASES
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: redlimit_lease_worker URL LIMIT WINDOW_MS FIRST WINDOWS THREADS RATE LEASES\n");
    return 2;
  }
  const std::string url = argv[1];
  const long long limit = std::atoll(argv[2]);
  const std::chrono::milliseconds window(std::atoll(argv[3]));
  const long long first = std::atoll(argv[4]);
  const long long windows = std::atoll(argv[5]);
  const int threads = std::atoi(argv[6]);
  const double rate = std::atof(argv[7]);
  const bool use_leases = std::atoi(argv[8]) != 0;

  auto limiter = redlimit::RateLimiter::connect(url);
  const auto fw = limiter.fixed_window("leased", redlimit::Limit(limit, window));
  redlimit::Leases leases(fw);
  using Clock = std::chrono::system_clock;
  const auto window_us = std::chrono::duration_cast<std::chrono::microseconds>(window).count();
  const Clock::time_point start{std::chrono::microseconds(first * window_us)};
  const Clock::time_point end = start + window * windows;
  const auto gap = std::chrono::duration<double>(static_cast<double>(threads) / rate);

  std::mutex m;
  std::map<long long, long long> admitted;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::map<long long, long long> mine;
      auto next = start + std::chrono::duration_cast<Clock::duration>(gap * (static_cast<double>(t) / threads));
      std::this_thread::sleep_until(next);
      while (Clock::now() < end) {
        const long long before =
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
        const redlimit::Decision d = use_leases ? leases.consume("s") : fw.consume("s");
        // The window the decision was made in, from what it says: an admitted request's reset_after
        // is its window's end minus the time it was decided, a moment after `before` (the call's
        // own latency, far below half a window), so before + reset_after is nearest that end.
        // (`before`'s own window would misplace a request decided just past an edge.)
        if (d.allowed) ++mine[(before + d.reset_after.count() + window_us / 2) / window_us - 1];
        next += std::chrono::duration_cast<Clock::duration>(gap);
        std::this_thread::sleep_until(next);
      }
      std::lock_guard<std::mutex> g(m);
      for (const auto& [w, n] : mine) admitted[w] += n;
    });
  }
  for (auto& th : pool) th.join();
  leases.close();
  for (const auto& [w, n] : admitted) std::printf("window %lld %lld\n", w, n);
  const auto s = leases.stats();
  std::printf("stats %llu %llu %llu %llu\n", static_cast<unsigned long long>(s.leases_taken),
              static_cast<unsigned long long>(s.local_decisions), static_cast<unsigned long long>(s.remote_decisions),
              static_cast<unsigned long long>(s.units_returned));
  return 0;
}
