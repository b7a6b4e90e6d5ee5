// Twin of lua/fixed_window.lua.
#include "twins.hpp"

namespace redlimit::detail::memory {

FixedWindowTwin::FixedWindowTwin(const Call& c)
    : c_(c), limit_(c.num(4)), window_(c.num(5)), current_(c.now - c.now % window_) {}

Decided FixedWindowTwin::decide(std::int64_t cost, const Packed* v, Write& w) const {
  const std::int64_t now = c_.now;
  std::int64_t start = current_;
  std::int64_t used = 0;
  bool ttl_set = false;  // the stored state is this window's, and its TTL was set for this window
  // unpack_window: a pack2 state is read as written under the current window; a bucket's is none.
  if (v != nullptr && v->layout != Packed::Layout::bucket) {
    const std::int64_t written_under = v->layout == Packed::Layout::window ? v->tag : window_;
    if (written_under == window_) {
      if (v->time >= start) {  // a start ahead of ours (a client running ahead) wins
        start = v->time;
        used = v->quantity;
        ttl_set = true;
      }
    } else if (v->time < current_ + window_ && v->time + written_under > current_) {
      used = v->quantity;  // another window length, overlapping ours: what was consumed stays consumed
    }
  }
  const std::int64_t window_end = start + window_;
  const auto state = [&] { return Packed{start, used, 0, window_, Packed::Layout::window}; };
  const std::int64_t ttl = ttl_set ? 0 : ttl_ms(window_end - now);  // 0: SET KEEPTTL

  const bool allowed = c_.refund || used + cost <= limit_;
  if (c_.refund) {
    if (used > 0) {
      used = std::max<std::int64_t>(0, used - cost);
      w = {Write::Kind::set, state(), ttl};
    }
  } else if (allowed && c_.record) {
    used = used + cost;
    w = {Write::Kind::set, state(), ttl};
  }

  Decided d;
  d.allowed = allowed ? 1 : 0;
  d.remaining = std::max<std::int64_t>(0, limit_ - used);  // a lowered limit: nothing left
  if (!allowed) d.retry_after = window_end - now;         // the next window starts empty
  if (used > 0) d.reset_after = window_end - now;
  return d;
}

}  // namespace redlimit::detail::memory
