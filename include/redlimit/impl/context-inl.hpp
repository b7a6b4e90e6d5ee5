#pragma once
// Bodies of redlimit/detail/context.hpp (see redlimit/detail/config.hpp).
#include "redlimit/detail/context.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

REDLIMIT_INLINE std::string Context::now_arg() const {
  if (options.time_source == TimeSource::redis) return "redis";
  const auto now = clock->now().count();
  // The scripts' time math assumes the epoch is behind us; checked here, before any I/O.
  if (now < 0) throw InvalidArgument(message("the limiter's clock reads {}us, before 1970", now));
  return std::to_string(now);
}

REDLIMIT_INLINE Counters AtomicCounters::snapshot() const {
  Counters c;
  c.decisions = decisions.load();
  c.allowed = allowed.load();
  c.rejected = rejected.load();
  c.shadow_rejected = shadow_rejected.load();
  c.from_fallback = from_fallback.load();
  c.from_failure_policy = from_failure_policy.load();
  c.errors = errors.load();
  c.breaker_short_circuits = breaker_short_circuits.load();
  c.local_cache_hits = local_cache_hits.load();
  c.answered = answered.load();
  c.resent_by_slot = resent_by_slot.load();
  return c;
}

}  // namespace redlimit::detail
