#pragma once
// Bodies of redlimit/detail/breaker.hpp (see redlimit/detail/config.hpp).
#include <algorithm>

#include "redlimit/detail/breaker.hpp"

namespace redlimit::detail {

REDLIMIT_INLINE bool Breaker::allow(std::chrono::microseconds now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!open_) return true;
  if (now < open_until_ || probing_) return false;
  probing_ = true;  // half-open: this caller probes, the others keep short-circuiting
  return true;
}

REDLIMIT_INLINE void Breaker::success() {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_ = 0;
  open_ = false;
  probing_ = false;
}

REDLIMIT_INLINE void Breaker::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  probing_ = false;
}

REDLIMIT_INLINE void Breaker::failure(std::chrono::microseconds now) {
  std::lock_guard<std::mutex> lock(mutex_);
  probing_ = false;
  if (++failures_ >= threshold_) {
    open_ = true;
    open_until_ = now + cooldown_;
  }
}

REDLIMIT_INLINE BreakerState Breaker::state(std::chrono::microseconds now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!open_) return BreakerState::closed;
  // Past the cooldown the next call probes, so the breaker is half-open already.
  return probing_ || now >= open_until_ ? BreakerState::half_open : BreakerState::open;
}

REDLIMIT_INLINE std::vector<std::pair<std::size_t, BreakerState>> Breakers::states(
    std::chrono::microseconds now) const {
  std::vector<std::pair<std::size_t, BreakerState>> out{{0, first_.state(now)}};
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [shard, breaker] : others_) out.emplace_back(shard, breaker->state(now));
  std::sort(out.begin(), out.end());
  return out;
}

REDLIMIT_INLINE Breaker& Breakers::of(std::size_t shard) {
  if (shard == 0) return first_;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& b = others_[shard];
  if (!b) b = std::make_unique<Breaker>(first_.threshold(), first_.cooldown());
  return *b;  // never erased: the reference stays valid as long as the limiter
}

}  // namespace redlimit::detail
