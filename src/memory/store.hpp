#pragma once
// The memory backend's store: what a Redis key holds, for the kinds of value redlimit's scripts
// keep (lua/), in a hash table per shard. MemoryConnection owns the tables and their locks; the
// twins (twins.hpp) read and write them through KeyRef, as the scripts do through redis.call().
//
// Expiry: where a script sets a TTL of `ttl_ms(x)` milliseconds, the entry gets a deadline of
// now + ttl_ms(x) * 1000 us, `now` being the script's (ARGV[1], or the clock for "redis"). Every
// script's state says in itself when it is stale (a window that has ended, units that have left the
// log, a bucket refilled or drained, a block that has ended), and its TTL is never shorter than
// that, so an entry past its deadline answers exactly what a missing one does.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace redlimit::detail::memory {

inline constexpr std::int64_t kNoDeadline = std::numeric_limits<std::int64_t>::max();

// A string state written by prologue.lua: the fixed window's pack(WINDOW, start, used, window), the
// buckets' pack(BUCKET, at, whole, frac, unit, lease), or 0.2's pack2(time, quantity). Kept as its numbers
// and layout: each packing is a bijection on them, so the bytes themselves never matter here.
// A block written into one (block.lua; helpers.lua's split_block) is `blocked_until`, and a block
// alone, with no state before its suffix, has the layout `none`.
struct Packed {
  enum class Layout { pack2, window, bucket, none };
  std::int64_t time = 0;
  std::int64_t quantity = 0;  // used, whole, or pack2's quantity
  std::int64_t frac = 0;      // bucket only
  std::int64_t tag = 0;       // the window (window) or unit (bucket) it was written under
  Layout layout = Layout::pack2;
  std::int64_t lease = -1;    // bucket only: how long its key lives (helpers.lua, bucket_ttl); -1 none
  std::int64_t blocked_until = 0;  // the end of a block held in the state; 0: none
};

// The block marker (block.lua): the decimal string fmt(blocked until).
struct Marker {
  std::int64_t until = 0;
};

// Any other string (only a plain SET writes one: see MemoryConnection::command).
struct Text {
  std::string bytes;
};

// sliding_log.lua's sorted set: one entry per admitted request, member "<cum>/<cost>" (cum zero-
// padded) scored by its time. The script only ever adds at the end of Redis's order (a time no
// earlier than every entry's, and a cum greater or, wrapped, a later time) and removes from either
// end, so a vector in that order, with its front trimmed by an index, is the sorted set. Its block
// member (block.lua: "~blk:<until>", scored +inf, above every entry) is `blocked_until`, 0 for none;
// the set is empty (and Redis deletes it) when it holds neither.
struct LogEntry {
  std::int64_t time = 0;
  std::int64_t cum = 0;   // units admitted to the key up to and including this entry, modulo 2^50
  std::int64_t cost = 0;  // this entry's units
};

class EntryLog {
 public:
  std::size_t size() const { return entries_.size() - head_; }  // the entries (the block member aside)
  bool empty() const { return size() == 0 && blocked_until == 0; }
  // ZRANGE i i (0 = oldest; negative from the newest, as Redis counts); nullptr past either end.
  const LogEntry* at(std::int64_t rank) const;
  // ZREMRANGEBYRANK 0 n-1 where n = min(ZCOUNT -inf cutoff, most): the oldest entries scored at or
  // before cutoff, `most` of them at most.
  void remove_through(std::int64_t cutoff, std::size_t most);
  // ZCOUNT -inf cutoff
  std::size_t count_through(std::int64_t cutoff) const;
  // ZPOPMAX: the newest entry, removed.
  LogEntry pop_newest();
  // ZADD of an entry that sorts after every other one (the script's only kind).
  void append(const LogEntry& e) { entries_.push_back(e); }
  std::vector<LogEntry> entries() const {
    return {entries_.begin() + static_cast<std::ptrdiff_t>(head_), entries_.end()};
  }
  std::int64_t blocked_until = 0;  // the block member's end (us); 0: none

 private:
  std::size_t first_after(std::int64_t cutoff) const;  // index of the first entry with time > cutoff
  void compact();
  std::vector<LogEntry> entries_;  // Redis's order; [head_, end) are live
  std::size_t head_ = 0;
};

// policy.lua's hash: field "<tag>:<bucket>" -> units admitted in that bucket, and kBlockField ->
// the end of a block (us), when block.lua wrote one.
struct BucketHash {
  std::unordered_map<std::string, std::int64_t> fields;
};
inline constexpr std::string_view kBlockField = "blk";  // helpers.lua's BLOCK_FIELD

// Packed, Marker and Text are Redis strings (GET and MGET read them); the other two are not.
using State = std::variant<Packed, Marker, Text, EntryLog, BucketHash>;

inline bool is_string(const State& s) {
  return std::holds_alternative<Packed>(s) || std::holds_alternative<Marker>(s) || std::holds_alternative<Text>(s);
}

// The string `bytes` as the scripts would read it: a number is a Marker (tonumber()), 12, 15, 20,
// 27 or 28 bytes a Packed (helpers.lua's unpackers), and so is one of those, or nothing, followed
// by a block's 9-byte suffix (split_block); anything else Text.
State string_state(const std::string& bytes);

struct Entry {
  State state;
  std::int64_t deadline = kNoDeadline;  // the entry is gone once now >= deadline

  bool expired(std::int64_t now) const { return now >= deadline; }
};

using Table = std::unordered_map<std::string, Entry>;

// One key of a script: its entry in a table (nullptr when missing), created, replaced or deleted
// as the script's Redis commands would. An entry already past its deadline at `now` is evicted on
// construction, so a twin never sees expired state. Entries are nodes of an unordered_map: a
// KeyRef stays valid while other keys of its table are inserted or erased.
class KeyRef {
 public:
  KeyRef(Table& table, const std::string& key, std::int64_t now);

  Entry* get() const { return entry_; }
  // SET / first HINCRBY / first ZADD: the key now holds `state` and no deadline (a SET without PX,
  // or a new hash or sorted set, has no TTL until PEXPIRE).
  Entry& create(State state);
  // PSETEX key ttl value: create() and expire_ms() together.
  void set(State state, std::int64_t now, std::int64_t ttl_ms);
  // SET key value KEEPTTL: the state replaced, the deadline kept (none for a key that was missing).
  void set_keep_ttl(State state);
  // PEXPIRE / PX: deadline = now + ttl_ms * 1000.
  void expire_ms(std::int64_t now, std::int64_t ttl_ms);
  // DEL (also what Redis does to a hash or sorted set left empty).
  void erase();

 private:
  Table* table_;
  const std::string* key_;
  Entry* entry_ = nullptr;
};

}  // namespace redlimit::detail::memory
