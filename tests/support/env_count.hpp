#pragma once
// A long test's count from the environment. The user's own variable wins (REDLIMIT_DIFF_STEPS=50000
// on the binary, or on ctest, which passes its environment on); else the short count the ctest
// entries of a slow pass set under a name of their own (REDLIMIT_SHORT_COUNTS in
// tests/CMakeLists.txt), so that setting it never hides the user's; else the test's full count.
#include <algorithm>
#include <cstdlib>

namespace redlimit_test {

inline int count_from_env(const char* user_variable, const char* short_variable, int full) {
  for (const char* name : {user_variable, short_variable}) {
    if (const char* env = std::getenv(name); env != nullptr && *env != '\0') return std::max(1, std::atoi(env));
  }
  return full;
}

}  // namespace redlimit_test
