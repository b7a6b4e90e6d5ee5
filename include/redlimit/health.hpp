#pragma once
// What RateLimiter::health() reports: the circuit breakers and who made the latest decision. Read
// in-process, with no round trip, so a health endpoint stays cheap and says what the limiter itself
// believes (whether Redis answers now is a separate question: ask it with a peek).
#include <cstddef>
#include <utility>
#include <vector>

#include "redlimit/decision.hpp"
#include "redlimit/transport/script_path.hpp"

namespace redlimit {

// Ordered from healthy to not: the facade's `breaker` is the worst of its shards'.
enum class BreakerState {
  closed,     // calls go to Redis
  half_open,  // the cooldown is over: the next call (or the one in flight) probes Redis
  open,       // calls skip Redis and the failure policy answers, until the cooldown ends
};

inline const char* to_string(BreakerState s) {
  switch (s) {
    case BreakerState::closed:
      return "closed";
    case BreakerState::half_open:
      return "half_open";
    case BreakerState::open:
      return "open";
  }
  return "unknown";
}

inline const char* to_string(Source s) {
  switch (s) {
    case Source::primary:
      return "primary";
    case Source::fallback:
      return "fallback";
    case Source::failure_policy:
      return "failure_policy";
    case Source::local_cache:
      return "local_cache";
    case Source::lease:
      return "lease";
  }
  return "unknown";
}

struct Health {
  // False when the limiter has no breaker (Options::breaker_threshold == 0): `breaker` is then closed.
  bool breaker_enabled() const { return !breakers.empty(); }
  // The worst state among the shards' breakers.
  BreakerState breaker = BreakerState::closed;
  // Each breaker made so far, by shard (Connection::node_of), shard 0 first: one for a single
  // server; for a cluster, one per master met that still serves slots (a master replaced by a
  // failover is left out), plus shard 0 (always listed), which there stands for the slots whose
  // owner is not known yet.
  std::vector<std::pair<std::size_t, BreakerState>> breakers;
  // Whether any decision was made yet, and, if so, the latest one's source.
  bool decided = false;
  Source last_source = Source::primary;
  // How scripts are called (redlimit/transport/script_path.hpp): `probe` until the first call
  // settles it; async_scripts for the attached async connection (evalsha when there is none).
  ScriptPath scripts = ScriptPath::evalsha;
  ScriptPath async_scripts = ScriptPath::evalsha;
};

}  // namespace redlimit
