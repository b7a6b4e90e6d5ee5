#pragma once
// The answer to one consume/peek call.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace redlimit {

// Who decided.
enum class Source {
  primary,         // the limiter's store: Redis (or the in-memory store of RateLimiter::in_memory)
  fallback,        // the in-memory fallback, because Redis failed (OnFailure::fallback)
  failure_policy,  // no store: OnFailure::fail_open / fail_closed answered, because Redis failed
  local_cache,     // rejected in-process: Redis rejected this subject moments ago (Options::local_reject_cache)
  lease,           // admitted in-process from units Redis granted to this process (redlimit/leases.hpp)
};

// One limit of a policy (or of a sliding window, a policy of one limit), as a decision left it: what
// RateLimit-Policy and RateLimit say of that limit (redlimit/http.hpp).
struct LimitState {
  // Units per window. HTTP: "q".
  std::int64_t limit = 0;
  // The limit's window. HTTP: "w" (seconds, rounded up).
  std::chrono::microseconds window{0};
  // Units this limit has left after this call (consume) or now (peek). HTTP: "r".
  std::int64_t remaining = 0;
  // Microseconds until this limit is back to full quota (0 when it already is). HTTP: "t".
  std::chrono::microseconds reset_after{0};
};

struct Decision {
  // True when the request was admitted (consume) or would be (peek). HTTP: 429 when false.
  bool allowed = false;
  // The limit that decided: requests per window, or bucket capacity; 0 when unknown (decided by
  // OnFailure::fail_open / fail_closed, which know no quota). HTTP: "q", X-RateLimit-Limit.
  std::int64_t limit = 0;
  // Quota left after this call (consume) or now (peek), in cost units; for a policy the least of its
  // limits'. HTTP: "r", X-RateLimit-Remaining.
  std::int64_t remaining = 0;
  // Microseconds until the same request would be admitted; 0 when allowed (except in shadow mode,
  // where it keeps the wait the limit asked for). Exact: a retry at
  // now + retry_after succeeds when nothing else happens meanwhile. HTTP: Retry-After (round up).
  std::chrono::microseconds retry_after{0};
  // Microseconds until the subject's state is back to full quota (for a policy: the longest of its
  // limits'; each limit's own is in `limits`). HTTP: "t", X-RateLimit-Reset (round up).
  std::chrono::microseconds reset_after{0};
  // Shaping leaky bucket only: microseconds the caller must wait before doing the admitted work.
  std::chrono::microseconds delay{0};
  // Policies: index in Policy::limits() of the limit that decided (when rejected, the one with the
  // longest wait; when admitted, the one with the least quota left). 0 for single-limit strategies.
  std::size_t limit_index = 0;
  Source source = Source::primary;
  // Shadow mode (Options::shadow): the limit would have rejected this request, but it was allowed.
  bool shadow_rejected = false;
  // Policies and sliding windows: each limit's own state, in Policy::limits() order (limits[
  // limit_index] is the deciding one). Empty for the other strategies (the fields above are their
  // one limit), and whenever no store decided (Source::failure_policy, Source::local_cache) or a
  // block()'s peek under the block went unanswered (Strategy::block): what is not known is not claimed.
  std::vector<LimitState> limits;
};

}  // namespace redlimit
