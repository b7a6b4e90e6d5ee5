#include "oracles.hpp"

#include <algorithm>

namespace accuracy {

bool ExactLog::decide(std::int64_t t) {
  // A request admitted at a counts during [a, a + window): gone once a <= t - window.
  while (!admitted_.empty() && admitted_.front() <= t - window_) admitted_.pop_front();
  return static_cast<std::int64_t>(admitted_.size()) < limit_;
}

void Gcra::record(std::int64_t t) {
  const std::int64_t now = t * limit_;
  tat_ = (started_ ? std::max(tat_, now) : now) + window_;
  started_ = true;
}

bool CounterRule::decide(std::int64_t t) {
  const std::int64_t b = t / precision_;
  const std::int64_t r = t % precision_;
  const std::int64_t n = fixed_ ? 1 : window_ / precision_;
  // Buckets older than the weighted one never count again: forget them.
  buckets_.erase(buckets_.begin(), buckets_.lower_bound(b - n));
  std::int64_t full = 0, old = 0;
  for (const auto& [index, count] : buckets_) {
    if (index == b - n) {
      old = count;
    } else {
      full += count;
    }
  }
  if (fixed_) return full + 1 <= limit_;
  return full * precision_ + old * (precision_ - r) + precision_ <= limit_ * precision_;
}

}  // namespace accuracy
