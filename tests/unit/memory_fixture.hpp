#pragma once
// The fixture of the memory backend's unit tests (memory_*_test.cpp): a MemoryConnection on a
// ManualClock behind a RateLimiter. Its decisions are compared with Redis's, field by field, in
// tests/integration/differential_test.cpp, and with recorded Redis replies in tests/unit/golden_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "memory/store.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/redlimit.hpp"

// Named, not anonymous: googletest needs one MemoryTest class across the files of the suite.
namespace memory_fixture {

using redlimit::Decision;
using redlimit::LeakyMode;
using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::MemoryConnection;
using redlimit::Micros;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Reply;
using namespace std::chrono_literals;
using Argv = std::vector<std::string>;
namespace scripts = redlimit::detail::scripts;

// 2023-11-14T22:00:00Z: aligned to the hour, so to every window that divides an hour.
inline constexpr Micros kT0{1'699'999'200'000'000};

inline std::string show(const Decision& d) {
  std::ostringstream os;
  os << "{allowed=" << d.allowed << " limit=" << d.limit << " remaining=" << d.remaining
     << " retry_after=" << d.retry_after.count() << "us reset_after=" << d.reset_after.count()
     << "us delay=" << d.delay.count() << "us limit_index=" << d.limit_index << "}";
  return os.str();
}

class MemoryTest : public ::testing::Test {
 protected:
  MemoryTest()
      : clock(std::make_shared<ManualClock>(kT0)),
        store(std::make_shared<MemoryConnection>(clock)),
        limiter(store, options()) {}

  Options options() const {
    Options o;
    o.clock = clock;
    return o;
  }
  void at(Micros offset) { clock->set(kT0 + offset); }
  // ttl_ms keeps a state a second and a millisecond past the time it matters (prologue.lua).
  static constexpr Micros kTtlSlack = 1001ms;

  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<MemoryConnection> store;
  RateLimiter limiter;
};


}  // namespace memory_fixture
using namespace memory_fixture;  // NOLINT: the test files use the fixture's names
