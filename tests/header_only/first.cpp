// redlimit::header_only in two translation units: every body in include/redlimit/impl/ must be
// inline (else the link fails with multiple definitions) and complete (else undefined symbols).
// This one and second.cpp each include everything and make decisions on the memory backend.
#include <redlimit/redlimit.hpp>

int decide_in_first(redlimit::RateLimiter& limiter) {
  const auto fw = limiter.fixed_window("first", redlimit::Limit::per_minute(2));
  int allowed = 0;
  for (int i = 0; i < 3; ++i) allowed += fw.consume("user").allowed ? 1 : 0;
  return allowed;
}
