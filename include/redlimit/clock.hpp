#pragma once
// Where "now" comes from when Options::time_source is TimeSource::client. Time is microseconds since
// the Unix epoch everywhere in redlimit: Lua numbers are doubles, and microsecond timestamps stay
// exact in a double (below 2^53) until the year 2255.
#include "redlimit/detail/config.hpp"
#include <atomic>
#include <chrono>
#include <memory>

namespace redlimit {

using Micros = std::chrono::microseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since the Unix epoch.
  virtual Micros now() const = 0;
  // Waits `d` on this clock (used by blocking calls). ManualClock advances itself instead.
  virtual void sleep_for(Micros d) = 0;
  // What the limiter times rather than decides on: the circuit breaker's cooldown, a cached
  // rejection's retry_after (Options::local_reject_cache), acquire()'s max_wait, a lease's duration
  // and the rates Leases measures. By default now(): a clock of one's own keeps one time for
  // everything, and its sleep_for moves both (ManualClock's does). SystemClock answers the machine's
  // steady clock, which never goes back: on the wall clock a backward step (an NTP correction, a VM
  // restored) would hold an open breaker or a cached rejection, or keep an acquire retrying, for the
  // step's length, and a forward one would cut a cooldown short. A clock of one's own that reads the
  // wall clock should answer steady time here too.
  virtual Micros monotonic() const { return now(); }
};

class SystemClock final : public Clock {
 public:
  Micros now() const override;
  void sleep_for(Micros d) override;
  Micros monotonic() const override;  // std::chrono::steady_clock
  static std::shared_ptr<SystemClock> instance();
};

// A clock that moves only when told to: deterministic tests of window edges and retry_after.
// Thread-safe. sleep_for() advances it, so blocking calls return at once in tests.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Micros start = Micros{1'700'000'000'000'000}) : now_(start.count()) {}
  Micros now() const override { return Micros{now_.load()}; }
  void sleep_for(Micros d) override { advance(d); }
  void set(Micros t) { now_.store(t.count()); }
  void advance(Micros d) { now_.fetch_add(d.count()); }

 private:
  std::atomic<long long> now_;
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/clock-inl.hpp"
#endif
