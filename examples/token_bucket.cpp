// Token bucket: a burst up to the capacity, then the refill rate, with waits exact to the microsecond.
#include <cstdio>
#include <exception>

#include "common.hpp"

int main() {
  using namespace std::chrono_literals;
  try {
    auto [clock, limiter] = example::connect();
    // 3 tokens per second is one every 333333.33... us. The script counts a token as 1000000 units and
    // adds 3 units per microsecond, so nothing is rounded until a wait is reported, and that is rounded up.
    const auto api = limiter.token_bucket("uploads", 5, 3, 1s);
    api.reset("user-1");

    std::puts("Token bucket: 5 tokens, refilled at 3 per second; the clock starts at 00:00:00.\n");

    std::puts("1. A full bucket takes a burst of 5; the 6th request waits for the next token, 333.334 ms");
    std::puts("   (a third of a second, rounded up). The bucket is full again 1666.667 ms after the burst.");
    example::each(*clock, api, "user-1", 6);

    std::puts("\n2. 1 us before that wait is over the token is not there yet; at the end of the wait it is.");
    clock->advance(333333us);
    example::print(*clock, "peek", api.peek("user-1"));
    clock->advance(1us);
    example::print(*clock, "consume", api.consume("user-1"));

    std::puts("\n3. One idle second brings 3 tokens: a request of cost 3 fits.");
    clock->advance(1s);
    example::print(*clock, "consume 3", api.consume("user-1", 3));

    std::puts("\n4. Two idle seconds would bring 6; the bucket stops at 5, and nothing is left to reset.");
    clock->advance(2s);
    example::print(*clock, "peek", api.peek("user-1"));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_token_bucket: %s\n", e.what());
    return 1;
  }
}
