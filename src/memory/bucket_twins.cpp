// Twins of lua/token_bucket.lua and lua/leaky_bucket.lua, which read their state alike
// (prologue.lua's read_bucket).
#include "twins.hpp"

namespace redlimit::detail::memory {

namespace {

// read_bucket(v, missing, full): the level (at most `full`) at time `at`, or `missing` at now
// without a state; t0 = max(now, at) (nothing moves backwards) and ahead = t0 - now.
struct Bucket {
  std::int64_t level, at, t0, ahead;
};
Bucket read_bucket(const Packed* v, std::int64_t now, std::int64_t missing, std::int64_t full) {
  Bucket b{missing, now, now, 0};
  if (v != nullptr) {
    b.level = std::min(v->quantity, full);
    b.at = v->time;
  }
  b.t0 = std::max(now, b.at);
  b.ahead = b.t0 - now;
  return b;
}

}  // namespace

TokenBucketTwin::TokenBucketTwin(const Call& c)
    : c_(c), capacity_(c.num(4)), unit_(c.num(5)), refill_(c.num(6)), full_(capacity_ * unit_) {}

Decided TokenBucketTwin::decide(std::int64_t cost, const Packed* v, Write& w) const {
  auto [level, at, t0, ahead] = read_bucket(v, c_.now, full_, full_);
  // Refill since `at`, comparing elapsed time (elapsed * refill could pass 2^53 after a long idle).
  if (t0 - at >= ceil_div(full_ - level, refill_)) {
    level = full_;
  } else {
    level = level + (t0 - at) * refill_;
  }

  const std::int64_t need = cost * unit_;
  const bool allowed = c_.refund || level >= need;
  bool changed = false;
  if (c_.refund) {
    changed = level < full_;
    level = std::min(full_, level + need);
  } else if (allowed && c_.record) {
    level = level - need;
    changed = true;
  }
  if (changed) {
    if (level < full_) {
      w = {Write::Kind::set, {t0, level}, ttl_ms(ahead + ceil_div(full_ - level, refill_))};
    } else {
      w.kind = Write::Kind::del;  // full is what a missing key means
    }
  }

  Decided d;
  d.allowed = allowed ? 1 : 0;
  d.remaining = floor_div(level, unit_);
  if (!allowed) d.retry_after = ahead + ceil_div(need - level, refill_);
  if (level < full_) d.reset_after = ahead + ceil_div(full_ - level, refill_);
  return d;
}

LeakyBucketTwin::LeakyBucketTwin(const Call& c)
    : c_(c),
      capacity_(c.num(4)),
      unit_(c.num(5)),
      leak_(c.num(6)),
      full_(capacity_ * unit_),
      shaper_(c.arg(7).value_or(std::string_view{}) == "shaper") {}

Decided LeakyBucketTwin::decide(std::int64_t cost, const Packed* v, Write& w) const {
  auto [level, at, t0, ahead] = read_bucket(v, c_.now, 0, full_);
  // Leak since `at`, comparing elapsed time (elapsed * leak could pass 2^53 after a long idle).
  if (t0 - at >= ceil_div(level, leak_)) {
    level = 0;
  } else {
    level = level - (t0 - at) * leak_;
  }

  const std::int64_t need = cost * unit_;
  const bool allowed = c_.refund || level + need <= full_;
  Decided d;
  if (allowed && shaper_ && !c_.refund) d.delay = ahead + ceil_div(level, leak_);  // water ahead leaks first
  bool changed = false;
  if (c_.refund) {
    changed = level > 0;
    level = std::max<std::int64_t>(0, level - need);
  } else if (allowed && c_.record) {
    level = level + need;
    changed = true;
  }
  if (changed) {
    if (level > 0) {
      w = {Write::Kind::set, {t0, level}, ttl_ms(ahead + ceil_div(level, leak_))};
    } else {
      w.kind = Write::Kind::del;  // empty is what a missing key means
    }
  }

  d.allowed = allowed ? 1 : 0;
  d.remaining = floor_div(full_ - level, unit_);
  if (!allowed) d.retry_after = ahead + ceil_div(level + need - full_, leak_);
  if (level > 0) d.reset_after = ahead + ceil_div(level, leak_);
  return d;
}

}  // namespace redlimit::detail::memory
