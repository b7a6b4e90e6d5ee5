#pragma once
// The answer to one consume/peek call.
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace redlimit {

// Who decided.
enum class Source {
  primary,         // the limiter's store: Redis (or the in-memory store of RateLimiter::in_memory)
  fallback,        // the in-memory fallback, because Redis failed (OnFailure::fallback)
  failure_policy,  // no store: OnFailure::fail_open / fail_closed answered, because Redis failed
  local_cache,     // rejected in-process: Redis rejected this subject moments ago (Options::local_reject_cache)
};

struct Decision {
  // True when the request was admitted (consume) or would be (peek). HTTP: 429 when false.
  bool allowed = false;
  // The limit that decided: requests per window, or bucket capacity. HTTP: RateLimit-Limit / "q".
  std::int64_t limit = 0;
  // Quota left after this call (consume) or now (peek), in cost units. HTTP: RateLimit-Remaining / "r".
  std::int64_t remaining = 0;
  // Microseconds until the same request would be admitted; 0 when allowed (except in shadow mode,
  // where it keeps the wait the limit asked for). Exact: a retry at
  // now + retry_after succeeds when nothing else happens meanwhile. HTTP: Retry-After (round up).
  std::chrono::microseconds retry_after{0};
  // Microseconds until the subject's state is back to full quota. HTTP: RateLimit-Reset / "t" (round up).
  std::chrono::microseconds reset_after{0};
  // Shaping leaky bucket only: microseconds the caller must wait before doing the admitted work.
  std::chrono::microseconds delay{0};
  // Policies: index in Policy::limits() of the limit that decided (when rejected, the one with the
  // longest wait; when admitted, the one with the least quota left). 0 for single-limit strategies.
  std::size_t limit_index = 0;
  Source source = Source::primary;
  // Shadow mode (Options::shadow): the limit would have rejected this request, but it was allowed.
  bool shadow_rejected = false;
};

}  // namespace redlimit
