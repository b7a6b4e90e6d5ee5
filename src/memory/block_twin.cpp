// Twin of lua/block.lua, and of the block a string state holds (helpers.lua, split_block and
// keep_block), which the epilogue's twin (memory_scripts.cpp) reads and carries.
#include "twins.hpp"

namespace redlimit::detail::memory {

namespace {

// block.lua's ttl_end: when the key's own TTL runs out, on the call's clock (PTTL, whole ms); 0 when
// it has none.
std::int64_t ttl_end(const Call& c, const Entry& e) {
  if (e.deadline == kNoDeadline) return 0;            // PTTL -1
  return c.now + (e.deadline - c.now) / 1000 * 1000;  // PTTL in whole ms
}

// The time until which a string state's key must live for the state's own sake (block.lua, the kind
// "1": the buckets'): a bucket's lease; for any other state of a known length (a 0.2 state, a bucket
// without a lease), its key's TTL (ttl_end). `none`: nothing.
std::int64_t state_lives_until(const Call& c, const Packed& v, const Entry& e) {
  switch (v.layout) {
    case Packed::Layout::bucket:
      if (v.lease >= 0) return lease_span(v.time, v.lease).lives_until;
      [[fallthrough]];
    case Packed::Layout::window:  // (not a bucket's state: a fixed window's hash is the kind "3")
    case Packed::Layout::pack2:
      return ttl_end(c, e);
    case Packed::Layout::none:
      break;
  }
  return 0;
}

// the kind "2": a policy's hash, read whole (redis.pcall('HGETALL')): its block, and when its newest
// bucket stops weighing anything, (bucket + n + 1) * P, the latest over its fields (none past 20
// years on: a field no client wrote). `foreign`: the key holds another type (no block; a block
// deletes it first).
struct HashBlock {
  BucketHash* hash = nullptr;
  std::optional<std::int64_t> held;
  std::int64_t lives = 0;
  bool foreign = false;
};

HashBlock hash_block(const Call& c, KeyRef& state) {
  HashBlock b;
  Entry* e = state.get();
  if (e == nullptr) return b;
  b.hash = std::get_if<BucketHash>(&e->state);
  b.foreign = b.hash == nullptr;
  if (b.hash == nullptr) return b;
  for (const auto& [field, value] : b.hash->fields) {
    std::string_view tag;
    std::int64_t idx = 0, w = 0, p = 0;
    if (field == kBlockField) {
      b.held = value;
    } else if (split_field(field, tag, idx) && parse_tag(tag, w, p) && p > 0) {
      __extension__ using i128 = __int128;
      const i128 t = (static_cast<i128>(idx) + w / p + 1) * p;
      if (t > b.lives && t - c.now < i128{20} * 366 * 86'400'000'000) b.lives = static_cast<std::int64_t>(t);
    }
  }
  return b;
}

// the kind "3": a fixed window's hash read whole (block.lua, window_hash), a key of another type made
// the hash first (a 0.3 window state's count and block kept, with its key's PTTL; anything else
// dropped); and the latest end of its windows.
struct WindowHash {
  BucketHash* hash = nullptr;
  std::optional<std::int64_t> held;
  std::int64_t lives = 0;
};

WindowHash window_hash(const Call& c, KeyRef& state) {
  WindowHash w;
  Entry* e = state.get();
  if (e != nullptr && !std::holds_alternative<BucketHash>(e->state)) {
    BucketHash converted;
    if (const auto* p = std::get_if<Packed>(&e->state)) {
      if (p->layout == Packed::Layout::window) {
        converted.fields[window_field(p->time, p->tag)] = p->quantity;
      }
      if (p->blocked_until != 0) converted.fields[std::string(kBlockField)] = p->blocked_until;
    }
    const std::int64_t deadline = e->deadline;
    state.erase();  // DEL
    if (!converted.fields.empty()) {
      state.create(std::move(converted));
      const std::int64_t pttl = deadline == kNoDeadline ? -1 : (deadline - c.now) / 1000;
      state.expire_ms(c.now, pttl > 0 ? pttl : 1);
    }
    e = state.get();
  }
  if (e == nullptr) return w;
  w.hash = &std::get<BucketHash>(e->state);
  for (const auto& [field, value] : w.hash->fields) {
    std::int64_t start = 0, window = 0;
    if (field == kBlockField) {
      w.held = value;
    } else if (split_window_field(field, start, window)) {
      w.lives = std::max(w.lives, start + window);
    }
  }
  return w;
}

// Adds `by` to each count of the hash whose sign `below_zero` names (block.lua, shift_counts).
void shift_counts(BucketHash& hash, std::int64_t by, bool below_zero) {
  for (auto& [field, value] : hash.fields) {
    if (field != kBlockField && (value < 0) == below_zero) value += by;
  }
}

// a duration of "0": the block lifted (Strategy::unblock). The marker deleted; a string state's block cut
// off, the state kept with its deadline (SET KEEPTTL), or deleted when it held the block alone; a
// hash's block field deleted (HDEL: Redis deletes a hash left empty).
std::vector<std::int64_t> lift(const Call& c, KeyRef& marker, KeyRef& state, std::string_view holder) {
  bool was = false;
  if (const Entry* e = marker.get()) {
    if (const auto* m = std::get_if<Marker>(&e->state)) {
      was = m->until > c.now;
      marker.erase();
    }
  }
  if (holder == "3") {
    const WindowHash w = window_hash(c, state);
    if (w.held) {
      was = was || *w.held > c.now;
      w.hash->fields.erase(std::string(kBlockField));
      shift_counts(*w.hash, kWindowBlocked, true);
      if (w.hash->fields.empty()) state.erase();
    }
    return {was ? 1 : 0, 0, 0, 0, 0};
  }
  if (holder == "2") {
    const HashBlock b = hash_block(c, state);
    if (b.held) {
      was = was || *b.held > c.now;
      b.hash->fields.erase(std::string(kBlockField));
      if (b.hash->fields.empty()) state.erase();
    }
    return {was ? 1 : 0, 0, 0, 0, 0};
  }
  if (holder == "4") {
    Entry* e = state.get();
    auto* log = e != nullptr ? std::get_if<EntryLog>(&e->state) : nullptr;
    if (log != nullptr && log->blocked_until != 0) {
      was = was || log->blocked_until > c.now;
      log->blocked_until = 0;  // ZREM
      if (log->empty()) state.erase();
    }
    return {was ? 1 : 0, 0, 0, 0, 0};
  }
  const Entry* e = holder == "1" ? state.get() : nullptr;
  const auto* v = e != nullptr ? std::get_if<Packed>(&e->state) : nullptr;
  if (v != nullptr && v->blocked_until != 0) {
    was = was || v->blocked_until > c.now;
    if (v->layout == Packed::Layout::none) {
      state.erase();
    } else {
      Packed kept = *v;
      kept.blocked_until = 0;
      state.set_keep_ttl(kept);
    }
  }
  return {was ? 1 : 0, 0, 0, 0, 0};
}

// the kind "1": the block written into the string state (MGET: another type reads as none), whose
// key lives until both the block and the state have ended.
void block_string(const Call& c, KeyRef& state, std::int64_t& blocked_until) {
  Packed v{0, 0, 0, 0, Packed::Layout::none};
  std::int64_t lives_until = 0;
  if (const Entry* e = state.get()) {
    if (const auto* p = std::get_if<Packed>(&e->state)) {
      v = *p;
      blocked_until = std::max(blocked_until, v.blocked_until);
      lives_until = state_lives_until(c, v, *e);
    }
  }
  v.blocked_until = blocked_until;
  state.set(v, c.now, ttl_ms(std::max(lives_until, blocked_until) - c.now));  // PSETEX
}

// the kind "2": HSET of the block field, and a TTL that outlives both the block and the hash's buckets.
void block_hash(const Call& c, KeyRef& state, std::int64_t& blocked_until) {
  HashBlock b = hash_block(c, state);
  if (b.held) blocked_until = std::max(blocked_until, *b.held);
  if (b.foreign) state.erase();  // DEL
  if (b.hash == nullptr) b.hash = &std::get<BucketHash>(state.create(BucketHash{}).state);
  b.hash->fields[std::string(kBlockField)] = blocked_until;
  state.expire_ms(c.now, ttl_ms(std::max(blocked_until, b.lives) - c.now));  // PEXPIRE
}

// the kind "3": every count not yet blocked less kWindowBlocked, the block field, and a TTL that
// outlives both the block and the hash's windows.
void block_window(const Call& c, KeyRef& state, std::int64_t& blocked_until) {
  WindowHash w = window_hash(c, state);
  if (w.held) blocked_until = std::max(blocked_until, *w.held);
  if (w.hash == nullptr) w.hash = &std::get<BucketHash>(state.create(BucketHash{}).state);
  shift_counts(*w.hash, -kWindowBlocked, false);
  w.hash->fields[std::string(kBlockField)] = blocked_until;
  state.expire_ms(c.now, ttl_ms(std::max(blocked_until, w.lives) - c.now));  // PEXPIRE
}

// the kind "4": the block member of the sliding log's sorted set (ZRANGE -1 -1: another type is no
// block, and is deleted), and a TTL that outlives both the block and the log's key (its PTTL, which
// the log's decisions set to its newest entry's time plus the window).
void block_log(const Call& c, KeyRef& state, std::int64_t& blocked_until) {
  Entry* e = state.get();
  auto* log = e != nullptr ? std::get_if<EntryLog>(&e->state) : nullptr;
  if (e != nullptr && log == nullptr) state.erase();  // DEL
  std::int64_t lives_until = 0;
  if (log != nullptr) {
    blocked_until = std::max(blocked_until, log->blocked_until);
    lives_until = ttl_end(c, *e);
  } else {
    log = &std::get<EntryLog>(state.create(EntryLog{}).state);
  }
  log->blocked_until = blocked_until;  // ZADD key +inf "~blk:<until>"
  state.expire_ms(c.now, ttl_ms(std::max(lives_until, blocked_until) - c.now));
}

}  // namespace

std::vector<std::int64_t> block(const Call& c, KeyRef& marker, KeyRef& state) {
  const std::string_view holder = c.arg(5).value_or(std::string_view{});
  const std::int64_t duration = c.num(4);  // checked: 0 to ten years (params.cpp)
  if (duration == 0) return lift(c, marker, state, holder);
  std::int64_t blocked_until = c.now + duration;
  // tonumber(redis.pcall('GET', KEYS[2])): nil for a pack2 string or a key of another type (which
  // PSETEX then replaces). A block is never shortened.
  if (const Entry* e = marker.get()) {
    if (const auto* m = std::get_if<Marker>(&e->state)) blocked_until = std::max(blocked_until, m->until);
  }
  if (holder == "1") block_string(c, state, blocked_until);
  if (holder == "2") block_hash(c, state, blocked_until);
  if (holder == "3") block_window(c, state, blocked_until);
  if (holder == "4") block_log(c, state, blocked_until);
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
