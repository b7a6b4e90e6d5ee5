#pragma once
// How long a thread has waited for a CPU while it was ready to run: the kernel's "run delay"
// (/proc/<pid>/task/<tid>/schedstat, its second field, in ns). A test that bounds how late a thread
// acts (a deadline's callback) adds the time that thread was kept off every CPU by the rest of a
// loaded machine (a 64-thread test beside it under ctest -j2): that wait is the scheduler's, not
// ours, and it is measured, not guessed. What the thread spends running (our own slowness) is not
// in it. Linux only (gettid, /proc); when the file cannot be read (a kernel without schedstats), it
// reads 0, and the bound stays strict.
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

namespace redlimit_test {

inline long this_thread_tid() { return static_cast<long>(::syscall(SYS_gettid)); }

inline std::chrono::nanoseconds run_delay(long tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/schedstat");
  unsigned long long on_cpu = 0, waiting = 0;
  if (!(in >> on_cpu >> waiting)) return std::chrono::nanoseconds{0};
  return std::chrono::nanoseconds{static_cast<long long>(waiting)};
}

}  // namespace redlimit_test
