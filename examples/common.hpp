#pragma once
// What the examples share, kept out of them so each one reads as the story of its strategy: a
// limiter on REDIS_URL whose time is a ManualClock, and one line per decision.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <redlimit/redlimit.hpp>
#include <string>

namespace example {

using Micros = std::chrono::microseconds;

// Midnight UTC, 14 November 2023. The clock starts here on a round minute, so window edges fall on
// round times of day, and every run prints the same lines.
constexpr Micros kMidnight = std::chrono::hours(24 * 19675);

struct Setup {
  std::shared_ptr<redlimit::ManualClock> clock;
  redlimit::RateLimiter limiter;
};

inline Setup connect() {
  auto clock = std::make_shared<redlimit::ManualClock>(kMidnight);
  redlimit::Options options;
  options.prefix = "redlimit-example:";
  options.clock = clock;
  // REDIS_URL=memory: the in-memory backend, which decides exactly as Redis would (scripts/demo.sh --memory).
  const char* env = std::getenv("REDIS_URL");
  const std::string url = env != nullptr ? env : "";
  if (url == "memory") {
    return {clock, redlimit::RateLimiter::in_memory(options)};
  }
  return {clock, redlimit::RateLimiter::connect(url.empty() ? "redis://127.0.0.1:6379/0" : url, options)};
}

// Milliseconds, with the microseconds shown only when there are any: "600ms", "333.334ms".
inline std::string ms(Micros d) {
  const long long us = d.count();
  char buf[40];
  if (us % 1000 == 0) {
    std::snprintf(buf, sizeof buf, "%lldms", us / 1000);
  } else {
    std::snprintf(buf, sizeof buf, "%lld.%03lldms", us / 1000, us % 1000);
  }
  return buf;
}

// The manual clock as a time of day: "00:01:15.000".
inline std::string time_of_day(const redlimit::Clock& clock) {
  const long long us = clock.now().count() % 86'400'000'000LL;
  const long long s = us / 1'000'000;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld.%03lld", s / 3600, s / 60 % 60, s % 60, us / 1000 % 1000);
  std::string out = buf;
  if (us % 1000 != 0) out += std::to_string(1000 + us % 1000).substr(1);  // the microseconds, if any
  return out;
}

inline void print(const redlimit::Clock& clock, const std::string& what, const redlimit::Decision& d) {
  std::printf("  %-15s %-22s allowed=%-3s remaining=%-4lld retry_after=%-11s reset_after=%-11s delay=%s\n",
              time_of_day(clock).c_str(), what.c_str(), d.allowed ? "yes" : "no", static_cast<long long>(d.remaining),
              ms(d.retry_after).c_str(), ms(d.reset_after).c_str(), ms(d.delay).c_str());
}

// Sends `n` requests of cost 1, `step` apart (0: all at this instant), and prints how many were
// admitted, then the last admitted and the first rejected decision with the time each was made.
template <class Strategy>
void burst(redlimit::ManualClock& clock, const Strategy& strategy, const std::string& subject, int n,
           Micros step = Micros{0}) {
  const std::string start = time_of_day(clock);
  int admitted = 0;
  bool have_last = false, have_rejected = false;
  redlimit::Decision last, rejected;
  Micros last_at{0}, rejected_at{0};
  for (int i = 0; i < n; ++i) {
    if (i > 0) clock.advance(step);
    const redlimit::Decision d = strategy.consume(subject);
    if (d.allowed) {
      ++admitted;
      have_last = true;
      last = d;
      last_at = clock.now();
    } else if (!have_rejected) {
      have_rejected = true;
      rejected = d;
      rejected_at = clock.now();
    }
  }
  if (step.count() > 0) {
    std::printf("  %-15s %d requests, one every %s: %d allowed, %d rejected\n", start.c_str(), n, ms(step).c_str(),
                admitted, n - admitted);
  } else {
    std::printf("  %-15s %d requests at once: %d allowed, %d rejected\n", start.c_str(), n, admitted, n - admitted);
  }
  const Micros end = clock.now();
  if (have_last) {
    clock.set(last_at);
    print(clock, "  last allowed", last);
  }
  if (have_rejected) {
    clock.set(rejected_at);
    print(clock, "  first rejected", rejected);
  }
  clock.set(end);
}

// Sends `n` requests of cost 1 at this instant and prints every decision.
template <class Strategy>
void each(const redlimit::Clock& clock, const Strategy& strategy, const std::string& subject, int n) {
  for (int i = 1; i <= n; ++i) print(clock, "consume #" + std::to_string(i), strategy.consume(subject));
}

}  // namespace example
