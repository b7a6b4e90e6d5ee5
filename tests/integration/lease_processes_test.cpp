// Issue 14: quota leases across processes never admit past the limit. Four processes of two
// threads each (tests/leases/lease_worker.cpp) share one fixed-window subject on the suite's
// redis-server, offered 1.5x its limit for 20 windows; the test sums what each window admitted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class LeaseProcessesTest : public RedisTest {};

TEST_F(LeaseProcessesTest, FourProcessesNeverAdmitPastTheLimitInAnyWindow) {
  constexpr long long kLimit = 2'000, kWindowMs = 200, kWindows = 20, kProcesses = 4, kThreads = 2;
  const double offered = 1.5 * kLimit * 1000.0 / kWindowMs;  // requests a second, all processes together
  const auto now_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const long long first = now_us / (kWindowMs * 1000) + 4;  // time for every process to connect
  std::vector<FILE*> workers;
  for (int p = 0; p < kProcesses; ++p) {
    std::ostringstream cmd;
    cmd << REDLIMIT_LEASE_WORKER << ' ' << server().url() << ' ' << kLimit << ' ' << kWindowMs << ' ' << first << ' '
        << kWindows << ' ' << kThreads << ' ' << offered / kProcesses << " 1";
    FILE* f = popen(cmd.str().c_str(), "r");
    ASSERT_NE(f, nullptr) << cmd.str();
    workers.push_back(f);
  }
  std::map<long long, long long> admitted;
  unsigned long long leases = 0, local = 0, remote = 0, returned = 0;
  for (FILE* f : workers) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      long long w = 0, n = 0;
      unsigned long long a = 0, b = 0, c = 0, d = 0;
      if (std::sscanf(line, "window %lld %lld", &w, &n) == 2) admitted[w] += n;
      if (std::sscanf(line, "stats %llu %llu %llu %llu", &a, &b, &c, &d) == 4) {
        leases += a;
        local += b;
        remote += c;
        returned += d;
      }
    }
    EXPECT_EQ(pclose(f), 0);
  }
  ASSERT_FALSE(admitted.empty());
  long long total = 0, worst_under = 0, full_windows = 0, under_sum = 0;
  for (const auto& [w, n] : admitted) {
    EXPECT_LE(n, kLimit) << "window " << w << " admitted " << n << " of " << kLimit;
    total += n;
    if (w > first && w < first + kWindows - 1) {  // whole windows of offered load
      ++full_windows;
      under_sum += kLimit - n;
      worst_under = std::max(worst_under, kLimit - n);
    }
  }
  EXPECT_GT(local, remote) << "most decisions should come from leases";
  EXPECT_GT(leases, 0u);
  std::cout << "[ leases ] " << kProcesses << " processes x " << kThreads << " threads, limit " << kLimit << " per "
            << kWindowMs << " ms, offered 1.5x: admitted " << total << " in " << admitted.size()
            << " windows; under-admission per full window: mean "
            << (full_windows ? 100.0 * static_cast<double>(under_sum) / static_cast<double>(full_windows * kLimit) : 0)
            << "% of the limit, worst " << 100.0 * static_cast<double>(worst_under) / kLimit << "%; leases " << leases
            << ", local decisions " << local << ", remote " << remote << ", units returned " << returned << "\n";
}

}  // namespace
}  // namespace redlimit_test
