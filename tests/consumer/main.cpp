// The consumer tests' program (tests/consumer/run.sh): what a user of the installed or vendored
// package writes. A fixed window of 2 per minute on the in-memory backend (no Redis) with a manual
// clock: three consumes must give allowed, allowed, rejected. Exits non-zero otherwise.
#include <redlimit/redlimit.hpp>

#include <cstdio>
#include <exception>
#include <memory>

// Built against redlimit::header_only, the target itself must define REDLIMIT_HEADER_ONLY (the
// driver passes REDLIMIT_CONSUMER_HEADER_ONLY to say which target this build links).
#if defined(REDLIMIT_CONSUMER_HEADER_ONLY) != defined(REDLIMIT_HEADER_ONLY)
#error "REDLIMIT_HEADER_ONLY is defined if and only if the consumer links redlimit::header_only"
#endif

int main() {
  try {
    redlimit::Options options;
    options.clock = std::make_shared<redlimit::ManualClock>();
    auto limiter = redlimit::RateLimiter::in_memory(options);
    auto api = limiter.fixed_window("consumer", redlimit::Limit::per_minute(2));
    const bool expected[] = {true, true, false};
    for (int i = 0; i < 3; ++i) {
      const redlimit::Decision d = api.consume("user-42");
      if (d.allowed != expected[i]) {
        std::fprintf(stderr, "consume #%d: allowed=%d, expected %d\n", i + 1, d.allowed ? 1 : 0,
                     expected[i] ? 1 : 0);
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    return 2;
  }
  std::puts("allowed, allowed, rejected");
  return 0;
}
