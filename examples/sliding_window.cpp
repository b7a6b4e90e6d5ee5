// Sliding window counter: seed 004's worked example, 100 requests per minute.
//
// The oldest bucket still partly inside the window counts in proportion to that part. With one
// bucket per minute, 100 requests made in the first quarter of minute 0 still weigh 75 at 1.25 min.
#include <cstdio>
#include <exception>

#include "common.hpp"

namespace {

using namespace std::chrono_literals;

// Starts `subject` afresh at midnight with 100 requests spread over the first quarter minute.
void first_quarter_minute(redlimit::ManualClock& clock, const redlimit::SlidingWindow& api, const char* subject) {
  api.reset(subject);
  clock.set(example::kMidnight);
  example::burst(clock, api, subject, 100, 150ms);
}

}  // namespace

int main() {
  try {
    auto [clock, limiter] = example::connect();
    const auto per_minute = redlimit::Limit::per_minute(100);
    const auto coarse = limiter.sliding_window("seed-004", per_minute);         // precision = window
    const auto fine = limiter.sliding_window("seed-004-30s", per_minute, 30s);  // two buckets per window

    std::puts("Sliding window, 100 requests per minute; the clock starts at 00:00:00.\n");

    std::puts("1. One bucket per minute. At 1.25 min minute 0 still counts 75% of its 100 requests: 75,");
    std::puts("   so 25 more are allowed. The first rejected one may retry 600 ms later, when it counts 74.");
    first_quarter_minute(*clock, coarse, "user-1");
    clock->set(example::kMidnight + 75s);
    example::burst(*clock, coarse, "user-1", 100);
    clock->advance(600ms);
    example::print(*clock, "consume", coarse.consume("user-1"));

    std::puts("\n2. The same start, then nothing until 1.75 min: minute 0 counts 25%, so 75 are allowed.");
    first_quarter_minute(*clock, coarse, "user-2");
    clock->set(example::kMidnight + 105s);
    example::burst(*clock, coarse, "user-2", 100);

    std::puts("\n3. 30 s buckets. At 1.25 min the bucket 0:00-0:30 is half inside the window: 50 are allowed.");
    first_quarter_minute(*clock, fine, "user-3");
    clock->set(example::kMidnight + 75s);
    example::burst(*clock, fine, "user-3", 100);

    std::puts("\n4. The price of one bucket per minute: 100 requests at 0.99 min, and at 1.25 min (16 s later)");
    std::puts("   25 more are still allowed. With 30 s buckets the 100 sit in a bucket that counts in full:");
    std::puts("   nothing is allowed until 0:30-1:00 starts to slide out, 15.3 s later.");
    coarse.reset("user-4");
    fine.reset("user-4");
    clock->set(example::kMidnight + 59400ms);
    example::burst(*clock, coarse, "user-4", 100);
    example::burst(*clock, fine, "user-4", 100);
    clock->set(example::kMidnight + 75s);
    std::puts("  one bucket per minute:");
    example::burst(*clock, coarse, "user-4", 100);
    std::puts("  30 s buckets:");
    example::burst(*clock, fine, "user-4", 100);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_sliding_window: %s\n", e.what());
    return 1;
  }
}
