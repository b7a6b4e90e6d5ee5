// Fixed window: one counter per clock-aligned minute, and what that costs at the minute's edge.
#include <cstdio>
#include <exception>

#include "common.hpp"

int main() {
  using namespace std::chrono_literals;
  try {
    auto [clock, limiter] = example::connect();
    const auto api = limiter.fixed_window("seed-002", redlimit::Limit::per_minute(100));
    api.reset("user-1");

    std::puts("Fixed window, 100 requests per minute; windows start on the minute.\n");

    std::puts("1. 101 requests at 00:00:55: 100 allowed. The window closes at 00:01:00, so the rejected");
    std::puts("   request is told to retry in 5 s, and the counter is gone 5 s from now (reset_after).");
    clock->set(example::kMidnight + 55s);
    example::burst(*clock, api, "user-1", 101);
    example::print(*clock, "peek", api.peek("user-1"));

    std::puts("\n2. At 00:01:00 a new window starts empty: 100 more are allowed. That is 200 requests in");
    std::puts("   5 seconds under a limit of 100 per minute: the fixed window's edge problem. A sliding log");
    std::puts("   would allow none of them before 00:01:55.");
    clock->advance(5s);
    example::burst(*clock, api, "user-1", 101);

    std::puts("\n3. Half a minute later the window is still full; its end is the only way out.");
    clock->advance(30s);
    example::print(*clock, "consume", api.consume("user-1"));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_fixed_window: %s\n", e.what());
    return 1;
  }
}
