// Twin of lua/fixed_window.lua: a hash whose field "<start>:<window>" counts the units admitted in
// that window, and kBlockField the end of a block, during which every count is held less
// kWindowBlocked. The script's steady path (one HINCRBY) and its settle() reach the same decisions
// and the same hash; the twin takes the steady path where the script would, so that TTLs match too.
#include "twins.hpp"

namespace redlimit::detail::memory {

std::string window_field(std::int64_t start, std::int64_t window) {
  return std::to_string(start) + ":" + std::to_string(window);
}

// "<start>:<window>" (decimal digits only, as the script's pattern), or false.
bool split_window_field(std::string_view f, std::int64_t& start, std::int64_t& window) {
  const auto colon = f.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == f.size()) return false;
  for (const char ch : f) {
    if (ch != ':' && (ch < '0' || ch > '9')) return false;
  }
  return parse_int(f.substr(0, colon), start) && parse_int(f.substr(colon + 1), window);
}

FixedWindowTwin::FixedWindowTwin(const Call& c)
    : c_(c),
      limit_(c.num(4)),
      window_(c.num(5)),
      current_(c.now - c.now % window_),
      field_(window_field(current_, window_)) {}

// settle()'s reading: the block and the counts, from the hash or from a 0.3 string state (legacy).
FixedWindowTwin::Read FixedWindowTwin::read(const Entry* e) const {
  Read r;
  if (e == nullptr) return r;
  if (const auto* h = std::get_if<BucketHash>(&e->state)) {
    for (const auto& [f, v] : h->fields) {
      if (f == kBlockField) {
        r.blocked_until = v;
        continue;
      }
      Count c{0, 0, v < 0 ? v + kWindowBlocked : v, f, false};
      c.named = split_window_field(f, c.start, c.window);
      r.counts.push_back(c);
    }
    return r;
  }
  r.foreign = true;
  const auto* p = std::get_if<Packed>(&e->state);
  if (p == nullptr) return r;
  if (p->blocked_until != 0) r.blocked_until = p->blocked_until;
  if (p->layout == Packed::Layout::window) r.counts.push_back({p->time, p->tag, p->quantity, {}, true});
  if (p->layout == Packed::Layout::pack2) r.counts.push_back({p->time, window_, p->quantity, {}, true});
  return r;
}

Decided FixedWindowTwin::decide(KeyRef& key, std::int64_t cost) const {
  const std::int64_t end_now = current_ + window_ - c_.now;
  Entry* e = key.get();
  if (c_.record && e == nullptr) {  // a new key: PEXPIRE NX answered 1
    Decided d;
    if (cost <= limit_) {
      key.create(BucketHash{{{field_, cost}}});
      key.expire_ms(c_.now, ttl_ms(end_now));
      d.allowed = 1;
      d.remaining = limit_ - cost;
      d.reset_after = end_now;
    } else {
      d.remaining = limit_;
      d.retry_after = end_now;
    }
    return d;
  }
  auto* h = c_.record ? std::get_if<BucketHash>(&e->state) : nullptr;
  if (h != nullptr) {  // the steady path: the current window's count is above zero
    const auto it = h->fields.find(field_);
    if (it != h->fields.end() && it->second > 0) {
      Decided d;
      d.reset_after = end_now;
      if (it->second + cost <= limit_) {
        it->second += cost;
        d.allowed = 1;
        d.remaining = limit_ - it->second;
      } else {
        d.remaining = std::max<std::int64_t>(0, limit_ - it->second);
        d.retry_after = end_now;
      }
      return d;
    }
  }
  return settle(key, cost);
}

// settle(): the count that wins (the latest start of this window length at or after the current
// window's), what overlapping windows of other lengths carry, then the decision, and the hash as it
// should stand afterwards (unless a peek).
Decided FixedWindowTwin::settle(KeyRef& key, std::int64_t cost) const {
  const Read r = read(key.get());
  const Count* home = nullptr;
  std::int64_t start = current_, used = 0, carried = 0;
  for (const Count& c : r.counts) {
    if (c.named && c.window == window_ && c.start >= start && (home == nullptr || c.start > start)) {
      home = &c;
      start = c.start;
      used = c.count;
    } else if (c.named && c.window != window_ && c.start < current_ + window_ && c.start + c.window > current_) {
      carried += c.count;
    }
  }
  if (home == nullptr || start == current_) used += carried;
  const std::int64_t window_end = start + window_;
  const bool blocked = r.blocked_until && *r.blocked_until > c_.now;
  Decided d;
  d.allowed = 1;
  if (blocked && !c_.refund) {
    d.allowed = 0;
    d.retry_after = *r.blocked_until - c_.now;
  } else if (c_.refund) {
    used = std::max<std::int64_t>(0, used - cost);
  } else if (used + cost <= limit_) {
    if (c_.record) used += cost;
  } else {
    d.allowed = 0;
    d.retry_after = window_end - c_.now;
  }
  if (c_.record || c_.refund) write(key, r, home, start, used);
  d.remaining = std::max<std::int64_t>(0, limit_ - used);
  d.reset_after = used > 0 ? window_end - c_.now : 0;
  if (blocked && !c_.refund) d.remaining = 0, d.reset_after = std::max(d.reset_after, d.retry_after);
  return d;
}

// settle()'s write: one count field (`home`'s, or the current window's), the block while it is in
// force, nothing else, and a TTL to the end of both; a key of another type replaced.
void FixedWindowTwin::write(KeyRef& key, const Read& r, const Count* home, std::int64_t start,
                            std::int64_t used) const {
  const bool blocked = r.blocked_until && *r.blocked_until > c_.now;
  const std::string name = home != nullptr && !r.foreign ? home->field : window_field(start, window_);
  if (r.foreign) key.erase();  // DEL
  BucketHash fresh;
  if (used > 0 || blocked) fresh.fields[name] = blocked ? used - kWindowBlocked : used;
  if (blocked) fresh.fields[std::string(kBlockField)] = *r.blocked_until;
  if (fresh.fields.empty()) {  // the hash left empty: Redis deletes it
    key.erase();
    return;
  }
  // The TTL holds for a count stored before this call (fixed_window.lua, ttl_holds).
  const bool ttl_holds = home != nullptr && !r.foreign && !(c_.record && home->field == field_ && home->count == 0);
  if (Entry* e = key.get()) {
    e->state = std::move(fresh);  // HDEL of the rest, HSET
  } else {
    key.create(std::move(fresh));
  }
  if (!ttl_holds)
    key.expire_ms(c_.now, ttl_ms(std::max(start + window_, blocked ? *r.blocked_until : 0) - c_.now));  // PEXPIRE
}

}  // namespace redlimit::detail::memory
