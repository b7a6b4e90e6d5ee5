// A deliberate sanitizer report, to prove that one fails the run (scripts/test.sh --sanitize).
//
//   redlimit_sanitizer_canary use-after-free | leak | undefined | race
//
// Each kind exits 0 unless a sanitizer reports it: nothing here crashes or fails on its own. ctest
// runs them with WILL_FAIL (tests/CMakeLists.txt), so a canary passes only when the sanitizer's
// options turn a report into a non-zero exit status: the status that fails every other test with a
// report. Someone setting ASAN_OPTIONS=exitcode=0 or TSAN_OPTIONS=exitcode=0 makes these fail.
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>

namespace {

volatile int sink = 0;
int shared_counter = 0;  // written by two threads without synchronisation

int* volatile hide(int* p) { return p; }  // keeps the compiler from seeing through the bug

}  // namespace

int main(int argc, char** argv) {
  const char* kind = argc > 1 ? argv[1] : "";
  if (std::strcmp(kind, "use-after-free") == 0) {
    int* p = hide(new int[4]{1, 2, 3, 4});
    delete[] p;
    sink = hide(p)[1];
  } else if (std::strcmp(kind, "leak") == 0) {
    int* volatile p = new int[64];
    p[0] = 1;
    sink = p[0];
    p = nullptr;
  } else if (std::strcmp(kind, "undefined") == 0) {
    volatile int x = INT_MAX;
    sink = x + 1;  // signed overflow
  } else if (std::strcmp(kind, "race") == 0) {
    std::thread a([] {
      for (int i = 0; i < 1000; ++i) ++shared_counter;
    });
    std::thread b([] {
      for (int i = 0; i < 1000; ++i) ++shared_counter;
    });
    a.join();
    b.join();
    sink = shared_counter;
  } else {
    // 0, so that under WILL_FAIL an unknown kind fails its canary instead of passing as a report.
    std::fprintf(stderr, "usage: %s use-after-free|leak|undefined|race\n", argv[0]);
  }
  return 0;
}
