// Twins of lua/token_bucket.lua and lua/leaky_bucket.lua, which read their state alike
// (prologue.lua's read_bucket and time_to).
#include "twins.hpp"

namespace redlimit::detail::memory {

namespace {

// read_bucket(v, missing, cap, unit, round_up): the level as whole units and ticks of the next (at
// most `cap` whole), at time `at`, or `missing` at now without a state; t0 = max(now, at) and
// ahead = t0 - now. Ticks written under another unit are rescaled, rounded up for water.
struct Bucket {
  std::int64_t whole, frac, at, t0, ahead, lease;
};
Bucket read_bucket(const Packed* v, std::int64_t now, std::int64_t missing, std::int64_t cap, std::int64_t unit,
                   bool round_up) {
  Bucket b{missing, 0, now, now, 0, -1};
  if (v != nullptr && v->layout == Packed::Layout::bucket && (v->tag == 0 || v->frac >= v->tag)) {
    // A unit of 0, or ticks of a whole unit or more: no client's state. Rescaled, such ticks
    // overflowed muldiv's int64 quotient.
    return read_bucket(nullptr, now, missing, cap, unit, round_up);
  }
  if (v != nullptr && v->layout == Packed::Layout::bucket) {
    std::int64_t whole = v->quantity, frac = v->frac;
    if (v->tag != unit) {
      const QuotRem qr = muldiv(frac, unit, v->tag);
      frac = qr.q + ((round_up && qr.r > 0) ? 1 : 0);
      if (frac >= unit) {
        whole += 1;
        frac -= unit;
      }
    }
    b = {whole, frac, v->time, 0, 0, v->lease};
  } else if (v != nullptr && v->layout == Packed::Layout::pack2) {
    b = {floor_div(v->quantity, unit), v->quantity % unit, v->time, 0, 0, -1};
  }
  if (v != nullptr && v->layout != Packed::Layout::window && b.whole >= cap) {
    b.whole = cap;
    b.frac = 0;
  }
  b.t0 = std::max(now, b.at);
  b.ahead = b.t0 - now;
  return b;
}

// time_to(target, whole, frac, unit, per): us until a rising level reaches `target` whole units.
std::int64_t time_to(std::int64_t target, std::int64_t whole, std::int64_t frac, std::int64_t unit, std::int64_t per) {
  const QuotRem qr = muldiv(target - whole, unit, per);
  const std::int64_t d = qr.r - frac;
  if (d > 0) return qr.q + ceil_div(d, per);
  return qr.q - floor_div(-d, per);
}

// helpers.lua's bucket_ttl: keep the key's TTL (0) while the stored lease covers the new state
// (`need` us past t0) within the lease's period, or take a new lease. Returns the TTL and the lease.
struct Lease {
  std::int64_t ttl_ms, lease;
};
Lease bucket_ttl(std::int64_t now, std::int64_t at, std::int64_t lease, std::int64_t t0, std::int64_t need) {
  if (lease >= 0) {
    const LeaseSpan span = lease_span(at, lease);
    if (t0 < span.next_period && t0 + need <= span.lives_until) return {0, lease};
  }
  std::int64_t e = 0, p = std::int64_t{1} << kLeaseMinLog2;
  while (8 * p < need) {
    p *= 2;
    ++e;
  }
  const std::int64_t m = std::max<std::int64_t>(1, ceil_div(need, p));
  return {ttl_ms((floor_div(t0, p) + 1 + m) * p - now), e + 32 * (m - 1)};
}

Packed bucket_state(std::int64_t at, std::int64_t whole, std::int64_t frac, std::int64_t unit, std::int64_t lease) {
  return Packed{at, whole, frac, unit, Packed::Layout::bucket, lease};
}

}  // namespace

TokenBucketTwin::TokenBucketTwin(const Call& c)
    : c_(c), capacity_(c.num(4)), unit_(c.num(5)), refill_(c.num(6)), full_(capacity_) {}

Decided TokenBucketTwin::decide(std::int64_t cost, const Packed* v, Write& w) const {
  auto [whole, frac, at, t0, ahead, lease] = read_bucket(v, c_.now, capacity_, capacity_, unit_, false);
  const std::int64_t elapsed = t0 - at;
  if (whole >= capacity_ || elapsed >= time_to(capacity_, whole, frac, unit_, refill_)) {
    whole = capacity_;
    frac = 0;
  } else if (elapsed > 0) {
    const QuotRem qr = muldiv(elapsed, refill_, unit_);
    whole += qr.q;
    frac += qr.r;
    if (frac >= unit_) {
      whole += 1;
      frac -= unit_;
    }
  }

  const bool allowed = c_.refund || whole >= cost;
  bool changed = false;
  if (c_.refund) {
    changed = whole < capacity_;
    whole += cost;
    if (whole >= capacity_) {
      whole = capacity_;
      frac = 0;
    }
  } else if (allowed && c_.record) {
    whole -= cost;
    changed = true;
  }
  const std::int64_t to_full = whole < capacity_ ? time_to(capacity_, whole, frac, unit_, refill_) : 0;
  if (changed) {
    if (whole < capacity_) {
      const Lease l = bucket_ttl(c_.now, at, lease, t0, to_full);
      w = {Write::Kind::set, bucket_state(t0, whole, frac, unit_, l.lease), l.ttl_ms};
    } else {
      w.kind = Write::Kind::del;  // full is what a missing key means
    }
  }

  Decided d;
  d.allowed = allowed ? 1 : 0;
  d.remaining = whole;
  if (!allowed) d.retry_after = ahead + time_to(cost, whole, frac, unit_, refill_);
  if (whole < capacity_) d.reset_after = ahead + to_full;
  return d;
}

LeakyBucketTwin::LeakyBucketTwin(const Call& c)
    : c_(c),
      capacity_(c.num(4)),
      unit_(c.num(5)),
      leak_(c.num(6)),
      full_(capacity_),
      shaper_(c.arg(7).value_or(std::string_view{}) == "shaper") {}

namespace {

// leaky_bucket.lua's time_to_empty: ceil((whole * unit + frac) / leak).
std::int64_t time_to_empty(std::int64_t whole, std::int64_t frac, std::int64_t unit, std::int64_t leak) {
  const QuotRem qr = muldiv(whole, unit, leak);
  return qr.q + ceil_div(qr.r + frac, leak);
}

}  // namespace

Decided LeakyBucketTwin::decide(std::int64_t cost, const Packed* v, Write& w) const {
  auto [whole, frac, at, t0, ahead, lease] = read_bucket(v, c_.now, 0, capacity_, unit_, true);
  const std::int64_t elapsed = t0 - at;
  if (elapsed >= time_to_empty(whole, frac, unit_, leak_)) {
    whole = frac = 0;
  } else if (elapsed > 0) {
    const QuotRem qr = muldiv(elapsed, leak_, unit_);
    whole -= qr.q;
    frac -= qr.r;
    if (frac < 0) {
      whole -= 1;
      frac += unit_;
    }
  }

  const std::int64_t part = frac > 0 ? 1 : 0;
  const bool allowed = c_.refund || whole + cost + part <= capacity_;
  Decided d;
  if (allowed && shaper_ && !c_.refund) d.delay = ahead + time_to_empty(whole, frac, unit_, leak_);
  bool changed = false;
  if (c_.refund) {
    changed = whole > 0 || frac > 0;
    whole -= cost;
    if (whole < 0) whole = frac = 0;
  } else if (allowed && c_.record) {
    whole += cost;
    changed = true;
  }
  const std::int64_t to_empty = time_to_empty(whole, frac, unit_, leak_);
  if (changed) {
    if (to_empty > 0) {
      const Lease l = bucket_ttl(c_.now, at, lease, t0, to_empty);
      w = {Write::Kind::set, bucket_state(t0, whole, frac, unit_, l.lease), l.ttl_ms};
    } else {
      w.kind = Write::Kind::del;  // empty is what a missing key means
    }
  }

  d.allowed = allowed ? 1 : 0;
  d.remaining = capacity_ - whole - (frac > 0 ? 1 : 0);
  if (!allowed) {
    const QuotRem qr = muldiv(whole + cost - capacity_, unit_, leak_);
    d.retry_after = ahead + qr.q + ceil_div(qr.r + frac, leak_);
  }
  if (to_empty > 0) d.reset_after = ahead + to_empty;
  return d;
}

}  // namespace redlimit::detail::memory
