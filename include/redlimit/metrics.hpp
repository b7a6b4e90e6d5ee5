#pragma once
// A hook for decisions, rejections, errors and latency, so users can feed Prometheus, StatsD or
// logs without redlimit depending on any of them. Built-in counters (RateLimiter::counters())
// need no hook at all.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string_view>

#include "redlimit/decision.hpp"

namespace redlimit {

enum class Operation { consume, peek, refund, block, reset, unblock };

struct MetricsEvent {
  std::string_view resource;
  // The strategy's kind, as in its state keys (docs/keys.md): "fw", "sl", "sw", "pol", "tb", "lb".
  std::string_view strategy;
  Operation operation = Operation::consume;
  // Null when the call threw (then `error` holds the exception's message), and for a reset or an
  // unblock, which return no decision (then `exception` tells whether it threw).
  const Decision* decision = nullptr;
  std::string_view error;
  // The exception itself when the call threw (null otherwise), for classifying it by type.
  const std::exception* exception = nullptr;
  // Wall time spent in the call, round trip included (steady clock, whatever the limiter clock is);
  // for a call that waited to share a script call (Options::share_script_calls), the wait too.
  std::chrono::nanoseconds latency{0};
};

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // Called once per consume/peek/refund/block/reset/unblock, on the calling thread, after the decision;
  // also for a call refused for bad input (its exception an InvalidArgument, thrown before any I/O).
  // Must not throw and should be quick: it sits on every request's path.
  virtual void on_event(const MetricsEvent& event) noexcept = 0;
  // Something an operator should know, said once: for instance that the server evicts keys under
  // memory pressure (RateLimiter::connect reads maxmemory-policy), which silently forgets subjects'
  // state and over-admits. The default ignores it.
  virtual void on_warning(std::string_view message) noexcept { (void)message; }
};

// How often each thing happened since the limiter was made. Read with RateLimiter::counters().
struct Counters {
  std::uint64_t decisions = 0;        // consumes (single or batched) that returned a Decision
  std::uint64_t allowed = 0;          // ... of which allowed
  std::uint64_t rejected = 0;         // ... of which rejected
  std::uint64_t shadow_rejected = 0;  // allowed only because of shadow mode
  std::uint64_t from_fallback = 0;    // decided by the in-memory fallback
  std::uint64_t from_failure_policy = 0;  // decided by fail_open / fail_closed
  // Calls that failed against Redis (thrown or handled by the policy). A batch whose send failed as
  // a whole is one; an outage reply counts once per request it leaves undecided; consume() calls
  // and consume_async() calls that shared a script call (Options::share_script_calls) count one each.
  std::uint64_t errors = 0;
  std::uint64_t breaker_short_circuits = 0;  // calls not sent to Redis because the breaker was open
  std::uint64_t local_cache_hits = 0;  // consumes rejected by the local reject cache, without Redis
  std::uint64_t answered = 0;  // script calls Redis answered (error replies included): a limiter that
                               // started during an outage sees its first connection here
  std::uint64_t resent_by_slot = 0;  // cluster script calls of one master's many slots that the
                                     // master refused (a slot moved or moving), sent again per slot
};

}  // namespace redlimit
