#pragma once
// Quota leases (docs/leases.md): for a hot subject, units are taken from Redis k at a time (one
// ordinary consume of k: they count as consumed there at once) and then decided in-process, under a
// per-subject lock, until the lease is used up or ends; unused units go back (a refund) when it ends,
// on close() and on destruction. Every unit admitted locally was granted by Redis first, so leases
// never admit more than the limit; what they can cost is under-admission (units held by one
// process that another could have used) and, if a process dies, the units of its lease.
//
// Fixed window, token bucket and leaky bucket (meter) only. A sliding log cannot lease without
// losing its exactness (a leased unit would be dated when it was leased, not used), and a sliding
// window or policy would date leased units early at a window edge: their constructors are deleted.
#include "redlimit/detail/config.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "redlimit/decision.hpp"
#include "redlimit/fixed_window.hpp"
#include "redlimit/leaky_bucket.hpp"
#include "redlimit/policy.hpp"
#include "redlimit/sliding_log.hpp"
#include "redlimit/sliding_window.hpp"
#include "redlimit/token_bucket.hpp"

namespace redlimit {

struct LeaseOptions {
  // The longest a lease lives (timed on the clock's monotonic(), clock.hpp). A fixed window's lease
  // also ends with its window (on the limiter's clock). What a crashed process can lose is bounded by one lease.
  std::chrono::microseconds duration{std::chrono::milliseconds(100)};
  // A subject is leased once its local rate reaches this many requests a second (measured over
  // `duration`); colder subjects are decided per request, with no extra Redis traffic.
  double hot_rate = 200;
  // A lease takes at most this fraction of what Redis last said remains, so processes sharing a
  // subject near its limit cannot starve each other...
  double share = 0.25;
  // ...and below this many units a lease is not worth it: per-request decisions instead.
  std::int64_t min_lease = 2;
  std::int64_t max_lease = std::int64_t{1} << 20;
};

// Why a subject is (not) decided from a lease right now.
enum class LeaseState {
  cold,         // below hot_rate: per-request decisions
  leased,       // holding a lease
  little_left,  // hot, but share x remaining < min_lease: per-request decisions
  rejected,     // Redis rejected the last lease: per-request decisions until it admits again
  closed,       // close() was called
};

struct LeaseStats {
  std::uint64_t leases_taken = 0;
  std::uint64_t leases_returned = 0;  // ended with units left, which were refunded
  std::uint64_t leases_lapsed = 0;    // ended with units left that could not go back (window over)
  std::uint64_t units_leased = 0;
  std::uint64_t units_returned = 0;
  std::uint64_t units_lapsed = 0;
  std::uint64_t local_decisions = 0;   // admitted from a lease, no Redis call
  std::uint64_t remote_decisions = 0;  // per-request decisions (cold, little left, rejected)
  // The subjects the table holds now (used within the last ten lease durations), by LeaseState.
  std::uint64_t subjects_cold = 0, subjects_leased = 0, subjects_little_left = 0, subjects_rejected = 0;
};

class Leases {
 public:
  explicit Leases(const FixedWindow& strategy, LeaseOptions options = {});
  explicit Leases(const TokenBucket& strategy, LeaseOptions options = {});
  // Meter only: a shaper's admissions carry a delay each, which a lease cannot hand out.
  explicit Leases(const LeakyBucket& strategy, LeaseOptions options = {});
  Leases(const SlidingLog&, LeaseOptions = {}) = delete;     // exact by design: no leases
  Leases(const SlidingWindow&, LeaseOptions = {}) = delete;  // leased units would be dated early
  Leases(const Policy&, LeaseOptions = {}) = delete;         // as the sliding window
  ~Leases();
  Leases(const Leases&) = delete;
  Leases& operator=(const Leases&) = delete;

  // consume(subject, cost) from the subject's lease when it has one, else through Redis (which may
  // grant a new lease). Decisions from a lease have Source::lease, retry_after 0, and `remaining`
  // = what Redis had left when the lease was taken plus what the lease still holds.
  Decision consume(std::string_view subject, std::int64_t cost = 1);
  // Returns every lease's unused units to Redis; later calls decide per request. Idempotent.
  void close();
  // Refunds the units of leases that have ended. A background thread does this every duration / 2;
  // call it yourself to return them sooner.
  void return_expired();

  LeaseStats stats() const;
  LeaseState state(std::string_view subject) const;

  struct Table;  // the per-subject leases (impl/leases-inl.hpp)

 private:
  std::shared_ptr<Table> table_;
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/leases-inl.hpp"
#endif
