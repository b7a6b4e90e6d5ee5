// Twin of lua/block.lua, and of the block a string state holds (helpers.lua, split_block and
// keep_block), which the epilogue's twin (memory_scripts.cpp) reads and carries.
#include "twins.hpp"

namespace redlimit::detail::memory {

namespace {

// The time until which a string state's key must live for the state's own sake (block.lua): a
// window's end, a bucket's lease; for a 0.2 state or a bucket without a lease, its key's TTL
// (PTTL: the deadline, on the call's clock). `none`: nothing.
std::int64_t state_lives_until(const Call& c, const Packed& v, const Entry& e) {
  switch (v.layout) {
    case Packed::Layout::window:
      return v.time + v.tag;
    case Packed::Layout::bucket:
      if (v.lease >= 0) return lease_span(v.time, v.lease).lives_until;
      [[fallthrough]];
    case Packed::Layout::pack2:
      if (e.deadline == kNoDeadline) return 0;            // PTTL -1
      return c.now + (e.deadline - c.now) / 1000 * 1000;  // PTTL in whole ms
    case Packed::Layout::none:
      break;
  }
  return 0;
}

// ARGV[4] "0": the block lifted (Strategy::unblock). The marker deleted; a string state's block cut
// off, the state kept with its deadline (SET KEEPTTL), or deleted when it held the block alone.
std::vector<std::int64_t> lift(const Call& c, KeyRef& marker, KeyRef* state) {
  bool was = false;
  if (const Entry* e = marker.get()) {
    if (const auto* m = std::get_if<Marker>(&e->state)) {
      was = m->until > c.now;
      marker.erase();
    }
  }
  const Entry* e = state != nullptr ? state->get() : nullptr;
  const auto* v = e != nullptr ? std::get_if<Packed>(&e->state) : nullptr;
  if (v != nullptr && v->blocked_until != 0) {
    was = was || v->blocked_until > c.now;
    if (v->layout == Packed::Layout::none) {
      state->erase();
    } else {
      Packed kept = *v;
      kept.blocked_until = 0;
      state->set_keep_ttl(kept);
    }
  }
  return {was ? 1 : 0, 0, 0, 0, 0};
}

}  // namespace

std::vector<std::int64_t> block(const Call& c, KeyRef& marker, KeyRef* state) {
  if (c.arg(4) == std::optional<std::string_view>("0")) return lift(c, marker, state);  // ARGV[4] == '0'
  std::int64_t blocked_until = c.now + c.num(4);
  // tonumber(redis.pcall('GET', KEYS[2])): nil for a pack2 string or a key of another type (which
  // PSETEX then replaces). A block is never shortened.
  if (const Entry* e = marker.get()) {
    if (const auto* m = std::get_if<Marker>(&e->state)) blocked_until = std::max(blocked_until, m->until);
  }
  if (state != nullptr) {  // ARGV[5] "1": a string state, read with MGET (another type reads as none)
    Packed v{0, 0, 0, 0, Packed::Layout::none};
    std::int64_t lives_until = 0;
    if (const Entry* e = state->get()) {
      if (const auto* p = std::get_if<Packed>(&e->state)) {
        v = *p;
        blocked_until = std::max(blocked_until, v.blocked_until);
        lives_until = state_lives_until(c, v, *e);
      }
    }
    v.blocked_until = blocked_until;
    state->set(v, c.now, ttl_ms(std::max(lives_until, blocked_until) - c.now));  // PSETEX
  }
  marker.set(Marker{blocked_until}, c.now, ttl_ms(blocked_until - c.now));  // PSETEX
  const std::int64_t wait = blocked_until - c.now;
  return {0, 0, wait, wait, 0};
}

bool blocked_in(const Call& c, const Packed* v) { return v != nullptr && v->blocked_until > c.now; }

void keep_block(const Call& c, const Packed* v, Write& w) {
  if (!blocked_in(c, v) || w.kind == Write::Kind::none) return;
  const std::int64_t block_ttl = ttl_ms(v->blocked_until - c.now);
  if (w.kind == Write::Kind::del) w = {Write::Kind::set, Packed{0, 0, 0, 0, Packed::Layout::none}, block_ttl};
  w.value.blocked_until = v->blocked_until;
  if (w.ttl_ms != 0) w.ttl_ms = std::max(w.ttl_ms, block_ttl);  // 0: the key's TTL, set by block.lua
}

}  // namespace redlimit::detail::memory
