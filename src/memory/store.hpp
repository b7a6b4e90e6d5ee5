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

// A string state written by prologue.lua: the fixed window's pack_window(start, used, window), the
// buckets' pack_bucket(at, whole, frac, unit), or 0.2's pack2(time, quantity). Kept as its numbers
// and layout: each packing is a bijection on them, so the bytes themselves never matter here.
struct Packed {
  enum class Layout { pack2, window, bucket };
  std::int64_t time = 0;
  std::int64_t quantity = 0;  // used, whole, or pack2's quantity
  std::int64_t frac = 0;      // bucket only
  std::int64_t tag = 0;       // the window (window) or unit (bucket) it was written under
  Layout layout = Layout::pack2;
};

// The block marker (block.lua): the decimal string fmt(blocked until).
struct Marker {
  std::int64_t until = 0;
};

// Any other string (only a plain SET writes one: see MemoryConnection::command).
struct Text {
  std::string bytes;
};

// sliding_log.lua's sorted set: members "<time>:<seq>" scored by time.
struct LogUnit {
  std::int64_t time = 0;
  std::int64_t seq = 0;
};

// A sorted set of LogUnits in Redis's order: by score, then by member bytes (so "t:10" sorts
// before "t:9"), which decides what ZPOPMAX pops and what ZREVRANGE finds.
class UnitLog {
 public:
  std::size_t size() const { return units_.size() - head_; }
  bool empty() const { return size() == 0; }
  // ZREMRANGEBYSCORE -inf cutoff
  void remove_through(std::int64_t cutoff);
  // ZPOPMAX n
  void pop_max(std::int64_t n);
  // ZCOUNT (cutoff +inf
  std::size_t count_after(std::int64_t cutoff) const;
  // ZREVRANGE k k WITHSCORES: the score at reverse rank k (negative k counts from the oldest, as
  // Redis does); nullopt where Redis answers an empty array.
  std::optional<std::int64_t> rev_score(std::int64_t k) const;
  // ZADD NX time "<time>:<seq>": false when that member exists already.
  bool add_nx(std::int64_t time, std::int64_t seq);
  // The units in Redis's order (for tests).
  std::vector<LogUnit> units() const {
    return {units_.begin() + static_cast<std::ptrdiff_t>(head_), units_.end()};
  }

 private:
  std::size_t lower_index(std::int64_t time_after) const;  // first unit with time > time_after
  void compact();
  std::vector<LogUnit> units_;  // sorted; [head_, end) are live
  std::size_t head_ = 0;
};

// policy.lua's hash: field "<tag>:<bucket>" -> units admitted in that bucket.
struct BucketHash {
  std::unordered_map<std::string, std::int64_t> fields;
};

// Packed, Marker and Text are Redis strings (GET and MGET read them); the other two are not.
using State = std::variant<Packed, Marker, Text, UnitLog, BucketHash>;

inline bool is_string(const State& s) {
  return std::holds_alternative<Packed>(s) || std::holds_alternative<Marker>(s) || std::holds_alternative<Text>(s);
}

// The string `bytes` as the scripts would read it: a number is a Marker (tonumber()), 12, 15, 20
// or 27 bytes a Packed (prologue.lua's unpackers), anything else Text.
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
