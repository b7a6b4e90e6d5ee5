// One process of the multi-process lease tests (tests/integration/lease_processes_test.cpp):
// `threads` threads consume one subject of a fixed window through redlimit::Leases (or per request
// when `leases` is 0) at `rate` requests a second in all, from the start of the window numbered
// `first` for `windows` windows, on the system clock. Prints one line per window, "window <index>
// <admitted>" (the window each admission was decided in), then "stats <leases taken> <local
// decisions> <remote decisions> <units returned>". With DIE_MS, the first lease it takes DIE_MS or
// more after the start is its last: it stops its threads, prints what it admitted and "died
// <window>" (the window of that lease: the other process may have taken the rest of DIE_MS's
// window first, and then it is a later one), and kills itself with SIGKILL, holding that lease's
// unused units. Either way, after the window lines, "stall <microseconds>": its longest call, which
// the window attribution below needs under half a window.
//
//   redlimit_lease_worker URL LIMIT WINDOW_MS FIRST WINDOWS THREADS RATE LEASES [DIE_MS]
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"

namespace {

using Clock = std::chrono::system_clock;

long long micros(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

void print(const std::vector<std::atomic<long long>>& admitted, long long first, long long stall) {
  for (std::size_t i = 0; i < admitted.size(); ++i) {
    const long long n = admitted[i].load();
    if (n > 0) std::printf("window %lld %lld\n", first - 1 + static_cast<long long>(i), n);
  }
  std::printf("stall %lld\n", stall);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9 && argc != 10) {
    std::fprintf(stderr, "usage: redlimit_lease_worker URL LIMIT WINDOW_MS FIRST WINDOWS THREADS RATE LEASES [DIE_MS]\n");
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
  const long long die_ms = argc == 10 ? std::atoll(argv[9]) : -1;

  auto limiter = redlimit::RateLimiter::connect(url);
  const auto fw = limiter.fixed_window("leased", redlimit::Limit(limit, window));
  redlimit::Leases leases(fw);
  const long long window_us = std::chrono::duration_cast<std::chrono::microseconds>(window).count();
  const Clock::time_point start{std::chrono::microseconds(first * window_us)};
  const Clock::time_point end = start + window * windows;
  const auto gap = std::chrono::duration<double>(static_cast<double>(threads) / rate);
  // admitted[i]: window first - 1 + i (a request decided just before the first edge lands in i = 0).
  std::vector<std::atomic<long long>> admitted(static_cast<std::size_t>(windows + 2));

  std::atomic<long long> stall{0};   // the longest call, microseconds
  std::atomic<long long> armed{-1};  // leases taken when DIE_MS came
  std::atomic<bool> dying{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto next = start + std::chrono::duration_cast<Clock::duration>(gap * (static_cast<double>(t) / threads));
      std::this_thread::sleep_until(next);
      while (Clock::now() < end) {
        if (dying.load()) {
          std::this_thread::sleep_for(std::chrono::seconds(10));  // until the process is killed
          continue;
        }
        const long long before = micros(Clock::now());
        const redlimit::Decision d = use_leases ? leases.consume("s") : fw.consume("s");
        const long long after = micros(Clock::now());
        for (long long seen = stall.load();
             after - before > seen && !stall.compare_exchange_weak(seen, after - before);) {
        }
        // The window the decision was made in, from what it says. An admitted request's reset_after
        // is its window's end E minus the time t it was decided, t in [before, after]; for a lease's
        // local decision, E minus the lease's lag as well: the lease ends where its taker saw the
        // window end, which is E less that call's own time between its clock reading and the
        // script's. So before + reset_after lies in [E - 2 x stall, E], and while the longest call
        // (`stall`) is under half a window, the first edge at or after it is E. The test checks
        // that bound. (`before`'s own window would misplace a request decided just past an edge.)
        const long long w = (before + d.reset_after.count() + window_us - 1) / window_us - 1;
        if (d.allowed) {
          const long long i = w - first + 1;
          if (i >= 0 && i < static_cast<long long>(admitted.size())) ++admitted[static_cast<std::size_t>(i)];
        }
        if (die_ms >= 0 && Clock::now() >= start + std::chrono::milliseconds(die_ms)) {
          long long unarmed = -1;
          const auto taken = static_cast<long long>(leases.stats().leases_taken);
          if (!armed.compare_exchange_strong(unarmed, taken) && taken > armed.load() && !dying.exchange(true)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the other threads finish their call
            print(admitted, first, stall.load());
            // The lease just taken served this call, in window w; a refused call (the other
            // thread's took it) reads the window from the clock.
            std::printf("died %lld\n", d.allowed ? w : micros(Clock::now()) / window_us);
            std::fflush(stdout);
            std::raise(SIGKILL);  // no close(), no refund: the lease just taken is lost
          }
        }
        next += std::chrono::duration_cast<Clock::duration>(gap);
        std::this_thread::sleep_until(next);
      }
    });
  }
  for (auto& th : pool) th.join();
  leases.close();
  print(admitted, first, stall.load());
  const auto s = leases.stats();
  std::printf("stats %llu %llu %llu %llu\n", static_cast<unsigned long long>(s.leases_taken),
              static_cast<unsigned long long>(s.local_decisions), static_cast<unsigned long long>(s.remote_decisions),
              static_cast<unsigned long long>(s.units_returned));
  return 0;
}
