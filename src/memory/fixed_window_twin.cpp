// Twin of lua/fixed_window.lua.
#include "twins.hpp"

namespace redlimit::detail::memory {

FixedWindowTwin::FixedWindowTwin(const Call& c)
    : c_(c), limit_(c.num(4)), window_(c.num(5)), current_(c.now - c.now % window_) {}

Decided FixedWindowTwin::decide(std::int64_t cost, const Packed* v, Write& w) const {
  const std::int64_t now = c_.now;
  std::int64_t start = current_;
  std::int64_t used = 0;
  if (v != nullptr && v->time >= start) {  // a start ahead of ours (a client running ahead) wins
    start = v->time;
    used = v->quantity;
  }
  const std::int64_t window_end = start + window_;

  const bool allowed = c_.refund || used + cost <= limit_;
  if (c_.refund) {
    if (used > 0) {
      used = std::max<std::int64_t>(0, used - cost);
      w = {Write::Kind::set, {start, used}, ttl_ms(window_end - now)};
    }
  } else if (allowed && c_.record) {
    used = used + cost;
    w = {Write::Kind::set, {start, used}, ttl_ms(window_end - now)};
  }

  Decided d;
  d.allowed = allowed ? 1 : 0;
  d.remaining = limit_ - used;
  if (!allowed) d.retry_after = window_end - now;  // the next window starts empty
  if (used > 0) d.reset_after = window_end - now;
  return d;
}

}  // namespace redlimit::detail::memory
