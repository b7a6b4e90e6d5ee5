// See first.cpp. Also a policy and a batch, so that the decision path's batch code is linked too.
#include <cstdio>
#include <redlimit/redlimit.hpp>

int decide_in_first(redlimit::RateLimiter& limiter);

int main() {
  auto limiter = redlimit::RateLimiter::in_memory();
  const int first = decide_in_first(limiter);
  const auto pol = limiter.policy("second", redlimit::parse_limits("2/s; 3/min"));
  const auto ds = pol.consume_many({{"a", 1}, {"a", 1}, {"a", 1}});
  const int second =
      static_cast<int>(ds[0].allowed) + static_cast<int>(ds[1].allowed) + static_cast<int>(ds[2].allowed);
  std::printf("header-only: %d of 3 and %d of 3 admitted (expected 2 and 2)\n", first, second);
  return first == 2 && second == 2 ? 0 : 1;
}
