// Leaky bucket, both modes: the meter rejects what does not fit; the shaper queues it and says how
// long to wait so that work leaves at the leak rate.
#include <cstdio>
#include <exception>

#include "common.hpp"

int main() {
  using namespace std::chrono_literals;
  try {
    auto [clock, limiter] = example::connect();
    const auto one_per_second = redlimit::Limit::per_second(1);
    const auto meter = limiter.leaky_bucket("api", 5, one_per_second, redlimit::LeakyMode::meter);
    const auto shaper = limiter.leaky_bucket("jobs", 5, one_per_second, redlimit::LeakyMode::shaper);
    meter.reset("user-1");
    shaper.reset("user-1");

    std::puts("Leaky bucket: holds 5 requests, leaks 1 per second; the clock starts at 00:00:00.\n");

    std::puts("1. Meter. 6 requests at once: 5 fill the bucket and proceed now; the 6th overflows and may");
    std::puts("   retry in 1 s, when one request's worth has leaked. The bucket is empty 5 s after the burst.");
    example::each(*clock, meter, "user-1", 6);
    clock->advance(1s);
    example::print(*clock, "consume", meter.consume("user-1"));

    std::puts("\n2. Shaper. The same 6 requests: the bucket is a queue, and each admitted request is told");
    std::puts("   to wait (delay) for those ahead of it, so they proceed at 0, 1, 2, 3 and 4 s. The 6th");
    std::puts("   does not fit in the queue and is rejected.");
    clock->set(example::kMidnight);
    example::each(*clock, shaper, "user-1", 6);

    std::puts("\n3. Shaper, 2.5 s later: 2.5 requests' worth has leaked. A new request waits 2.5 s for the");
    std::puts("   rest, and so proceeds at 00:00:05, one second after the last one queued.");
    clock->advance(2500ms);
    example::print(*clock, "consume", shaper.consume("user-1"));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_leaky_bucket: %s\n", e.what());
    return 1;
  }
}
