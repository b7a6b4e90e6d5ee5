// The reply's forms of the memory twins (reply_forms.hpp).
#include "reply_forms.hpp"

#include <algorithm>
#include <utility>

namespace redlimit::detail::memory {

namespace {

// A policy's consume admitted alone in its call, as the one integer policy.lua answers (packable):
// the limits' remaining as the digits of a mixed radix, limit i's of radix limit_i + 1, the first
// the lowest; when the time is the client's, the radixes' product is below 2^53 and every limit's
// reset is its current bucket's end, (b + n + 1) * P - now. Nothing otherwise (the pairs go).
std::optional<std::int64_t> policy_integer(const PolicyTwin& policy, const Decided& d) {
  __extension__ using i128 = __int128;
  const i128 two53 = static_cast<i128>(1) << 53;
  const Call& c = policy.call();
  const auto& limits = policy.limits();
  if (!c.record || c.arg(1) == "redis" || limits.size() < 2 || d.each.size() != 2 * limits.size()) {
    return std::nullopt;
  }
  i128 radix = 1;  // policy.lua computes it in doubles, which round a product past 2^53 to 2^53 or more
  for (const auto& l : limits) radix = std::min(radix * (l.limit + 1), two53);
  if (radix >= two53) return std::nullopt;
  std::int64_t packed = 0, scale = 1;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const auto& l = limits[i];
    const std::int64_t rem = d.each[2 * i];
    if (d.each[2 * i + 1] != (l.b + l.n + 1) * l.P - c.now || rem > l.limit) return std::nullopt;
    packed += rem * scale;
    scale *= l.limit + 1;
  }
  return packed;
}

}  // namespace

void Out::add(const Decided& d) {
  if (cut_) return;
  const bool admission = d.allowed == 1 && d.retry_after == 0 && d.delay == 0;
  if (!admission || width_ == 6) {  // (6: a policy of no limits)
    add_whole(d);
  } else if (width_ > 6) {
    if (one_ && policy_ != nullptr) integer_ = policy_integer(*policy_, d);
    if (integer_) return;
    if (!one_) push(2);
    for (int i = 0; i < width_ - 6; ++i) push(d.each[static_cast<std::size_t>(i)]);
  } else if (one_) {
    const std::optional<std::int64_t> packed = packed_below(d, 53);
    if (packed) {
      integer_ = *packed;
    } else {
      push(d.remaining);
      push(d.reset_after);
    }
  } else if (last_reset_ && *last_reset_ == d.reset_after && d.remaining >= 0) {
    push(-1 - 2 * d.remaining);
  } else if (const std::optional<std::int64_t> packed = packed_below(d, 52)) {
    push(-2 - 2 * *packed);
  } else {
    push(3);
    push(d.remaining);
    push(d.reset_after);
  }
  last_reset_ = d.reset_after;
}

void Out::add_whole(const Decided& d) {
  push(d.allowed);
  if (!d.has_remaining) {
    cut_ = true;
    return;
  }
  push(d.remaining);
  push(d.retry_after);
  push(d.reset_after);
  push(d.delay);
  if (width_ > 5) {
    push(d.decider);
    for (int i = 0; i < width_ - 6; ++i) push(d.each[static_cast<std::size_t>(i)]);
  }
}

std::optional<std::int64_t> Out::packed_below(const Decided& d, int bits) const {
  __extension__ using i128 = __int128;
  const i128 packed = static_cast<i128>(d.reset_after) * (most_ + 1) + d.remaining;
  if (d.remaining < 0 || d.remaining > most_ || packed >= (static_cast<i128>(1) << bits)) return std::nullopt;
  return static_cast<std::int64_t>(packed);
}

}  // namespace redlimit::detail::memory
