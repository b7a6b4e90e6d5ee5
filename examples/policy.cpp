// Policies: several limits checked together and recorded all-or-nothing (seeds 001 and 004).
//
// A policy keeps all of one subject's limits in one hash, so one script checks and records them
// atomically, on one Redis or on one Cluster slot. Each limit is a sliding window counter.
#include <cstdio>
#include <exception>

#include "common.hpp"

int main() {
  using namespace std::chrono_literals;
  try {
    auto [clock, limiter] = example::connect();

    std::puts("1. Seed 001's limits: 10 per second, 120 per minute, 240 per hour counted in 1-minute buckets.");
    const auto api = limiter.policy("seed-001", redlimit::parse_limits("10/second; 120/minute; 240/hour@1m"));
    api.reset("user-1");
    clock->set(example::kMidnight);
    example::burst(*clock, api, "user-1", 12);
    std::puts("   The per-second limit decided (limit_index 0). Nothing was recorded for the rejected two:");
    const auto peek = api.peek("user-1");
    example::print(*clock, "peek", peek);
    std::printf("   decided by limit %zu (%s)\n", peek.limit_index, api.limits()[peek.limit_index].to_string().c_str());

    std::puts("\n   Keep sending one request per 100 ms: the minute limit (120) is what stops us after 12 s.");
    clock->advance(1s);
    example::burst(*clock, api, "user-1", 200, 100ms);
    const auto minute = api.peek("user-1");
    std::printf("   decided by limit %zu (%s)\n", minute.limit_index, api.limits()[minute.limit_index].to_string().c_str());

    std::puts("\n   At 2:00 minute 0 has left the minute window; another 120 are allowed. That is 240 this hour.");
    clock->set(example::kMidnight + 2min);
    example::burst(*clock, api, "user-1", 200, 100ms);
    std::puts("   At 4:00 the second and minute limits have room, but the hour limit rejects; all-or-nothing,");
    std::puts("   so nothing is recorded in the other two either.");
    clock->set(example::kMidnight + 4min);
    const auto hour = api.consume("user-1");
    example::print(*clock, "consume", hour);
    std::printf("   decided by limit %zu (%s)\n", hour.limit_index, api.limits()[hour.limit_index].to_string().c_str());

    std::puts("\n2. Seed 004's minimum distance between requests, as a second limit: 100/minute and 2/second.");
    const auto cadence = limiter.policy("seed-004-cadence", {redlimit::Limit::per_minute(100), redlimit::Limit::per_second(2)});
    cadence.reset("user-2");
    clock->set(example::kMidnight);
    example::each(*clock, cadence, "user-2", 3);

    std::puts("\n3. Refund: the guarded call was cancelled, so its quota goes back.");
    const auto calls = limiter.policy("refunds", redlimit::parse_limits("3/minute"));
    calls.reset("user-3");
    example::each(*clock, calls, "user-3", 3);
    example::print(*clock, "refund", calls.refund("user-3"));
    example::print(*clock, "consume", calls.consume("user-3"));

    std::puts("\n4. acquire(): wait (on the limiter's clock) until admitted, at most 90 s. The three requests of");
    std::puts("   minute 0 weigh less as minute 0 slides out; at 1:20 they weigh 2 and one more fits.");
    const auto before = clock->now();
    example::print(*clock, "acquire", calls.acquire("user-3", 1, 90s));
    std::printf("   waited %s\n", example::ms(clock->now() - before).c_str());

    std::puts("\n5. block(): deny a subject outright for 10 minutes; reset() lifts it.");
    example::print(*clock, "block", calls.block("user-3", 10min));
    example::print(*clock, "consume", calls.consume("user-3"));
    calls.reset("user-3");
    example::print(*clock, "after reset", calls.consume("user-3"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_policy: %s\n", e.what());
    return 1;
  }
}
