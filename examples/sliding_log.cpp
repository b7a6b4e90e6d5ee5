// Sliding log: every admitted unit is remembered with its time and counts for exactly one window.
#include <cstdio>
#include <exception>

#include "common.hpp"

int main() {
  using namespace std::chrono_literals;
  try {
    auto [clock, limiter] = example::connect();

    std::puts("Sliding log; the clock starts at 00:00:00.\n");

    std::puts("1. 3 requests per second (seed 000): requests at 0, 300 and 600 ms are allowed; one at 900 ms");
    std::puts("   is not, and may retry in 100 ms, when the request of 0 ms leaves the window. At 1.5 s the");
    std::puts("   requests of 0 and 300 ms have left, the one of 600 ms has not: 2 in the window, 1 to spare.");
    const auto per_second = limiter.sliding_log("seed-000", redlimit::Limit::per_second(3));
    per_second.reset("user-1");
    for (int i = 0; i < 3; ++i) {
      if (i > 0) clock->advance(300ms);
      example::print(*clock, "consume", per_second.consume("user-1"));
    }
    clock->advance(300ms);
    example::print(*clock, "consume", per_second.consume("user-1"));
    clock->advance(100ms - 1us);
    example::print(*clock, "peek", per_second.peek("user-1"));
    clock->advance(1us);
    example::print(*clock, "peek", per_second.peek("user-1"));
    clock->set(example::kMidnight + 1500ms);
    example::print(*clock, "consume", per_second.consume("user-1"));

    std::puts("\n2. 240 per hour (seed 001): 20 used at 18:05 leave 220 until 19:05, when those 20 come back.");
    std::puts("   220 more at 18:30 use everything; at 19:04:59 the wait is 1 s; at 19:05:00 20 fit again.");
    const auto per_hour = limiter.sliding_log("seed-001", redlimit::Limit::per_hour(240));
    per_hour.reset("user-1");
    clock->set(example::kMidnight + 18h + 5min);
    example::print(*clock, "consume 20", per_hour.consume("user-1", 20));
    clock->set(example::kMidnight + 18h + 30min);
    example::print(*clock, "consume 220", per_hour.consume("user-1", 220));
    clock->set(example::kMidnight + 19h + 4min + 59s);
    example::print(*clock, "consume", per_hour.consume("user-1"));
    clock->advance(1s);
    example::print(*clock, "consume 20", per_hour.consume("user-1", 20));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_sliding_log: %s\n", e.what());
    return 1;
  }
}
