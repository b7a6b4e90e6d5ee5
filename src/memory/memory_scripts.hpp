#pragma once
// C++ twins of the Lua scripts in lua/, run by MemoryConnection. Each twin keeps the state its
// script keeps in Redis (the same fields, the same ordering, the same deletion of empty or full
// keys) and does the same integer math line by line, so that RateLimiter::in_memory() answers
// exactly what Redis answers for the same calls at the same times (tests/integration/
// differential_test.cpp checks it field by field).
//
// Expiry: where a script sets a TTL of `ttl_ms(x)` milliseconds, the twin sets a deadline of
// now + ttl_ms(x) * 1000 us on the limiter's clock. Every script's state says in itself when it is
// stale (a window that has ended, units that have left the log, a bucket refilled or drained, a block
// that has ended), and its TTL is never shorter than that, so an entry past its deadline answers
// exactly what a missing one does: evicting it changes no decision.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "redlimit/reply.hpp"

namespace redlimit::detail::memory {

inline constexpr std::int64_t kNoDeadline = std::numeric_limits<std::int64_t>::max();

// fixed_window.lua: hash {s = start of the counted window, c = units admitted in it}.
struct WindowCount {
  std::int64_t start = 0;
  std::int64_t count = 0;
};

// sliding_log.lua: sorted set of members "<time>:<seq>" scored by time. Kept in Redis's order:
// by score, then by member bytes (so "t:10" sorts before "t:9"), which decides what ZPOPMAX pops.
struct LogUnit {
  std::int64_t time = 0;
  std::int64_t seq = 0;
};

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
  // ZRANGEBYSCORE (cutoff +inf LIMIT k 1: the score of the k-th (0-based) unit after cutoff.
  std::optional<std::int64_t> nth_after(std::int64_t cutoff, std::size_t k) const;
  // ZREVRANGE 0 0: the highest score.
  std::int64_t max_time() const { return units_.back().time; }
  // ZADD NX time "<time>:<seq>": false when that member exists already.
  bool add_nx(std::int64_t time, std::int64_t seq);
  // The units in Redis's order (for tests).
  std::vector<LogUnit> units() const { return {units_.begin() + static_cast<std::ptrdiff_t>(head_), units_.end()}; }

 private:
  std::size_t lower_index(std::int64_t time_after) const;  // first unit with time > time_after
  void compact();
  std::vector<LogUnit> units_;  // sorted; [head_, end) are live
  std::size_t head_ = 0;
};

// policy.lua: hash field "<tag>:<bucket>" -> units admitted in that bucket.
struct BucketHash {
  std::unordered_map<std::string, std::int64_t> fields;
};

// token_bucket.lua and leaky_bucket.lua: string "<level>:<at>".
struct LevelAt {
  std::int64_t level = 0;
  std::int64_t at = 0;
};

// The block marker (block.lua, read by the prologue): string "<blocked until>".
struct BlockedUntil {
  std::int64_t until = 0;
};

using State = std::variant<WindowCount, UnitLog, BucketHash, LevelAt, BlockedUntil>;

struct Entry {
  State state;
  // On the limiter's clock, in us: the entry is gone once now >= deadline.
  std::int64_t deadline = kNoDeadline;

  bool expired(std::int64_t now) const { return now >= deadline; }
};

using Table = std::unordered_map<std::string, Entry>;

// One of a script's KEYS: its entry in a table (nullptr when missing), created, replaced or
// deleted as the script's Redis commands would. An entry already past its deadline at `now` is
// evicted on construction, so a twin never sees expired state.
class KeyRef {
 public:
  KeyRef(Table& table, const std::string& key, std::int64_t now);

  Entry* get() const { return entry_; }
  // SET / first HSET / first ZADD: the key now holds `state` and no deadline (a SET without PX, or
  // a new hash or sorted set, has no TTL until PEXPIRE).
  Entry& create(State state);
  // PEXPIRE / PX: deadline = now + ttl_ms * 1000.
  void expire_ms(std::int64_t now, std::int64_t ttl_ms);
  // DEL (also what Redis does to a hash or sorted set left empty).
  void erase();

 private:
  Table* table_;
  const std::string* key_;
  Entry* entry_ = nullptr;
};

enum class ScriptId { fixed_window, sliding_log, policy, token_bucket, leaky_bucket, block };

// The twin of a script known by its SHA1 (case-insensitive hex) or by its exact source.
std::optional<ScriptId> script_by_sha1(std::string_view sha1);
std::optional<ScriptId> script_by_source(std::string_view source);
std::string_view script_name(ScriptId id);

// The prologue's `now`: ARGV[1] as a number, else (ARGV[1] == "redis") the clock's time.
std::int64_t script_now(std::string_view argv1, std::int64_t clock_now);

// Runs the twin of `id` on KEYS[1] = state, KEYS[2] = block marker, with ARGV = args (args[0] is
// ARGV[1]) at time `now` (script_now()). Returns what EVALSHA returns: the decision array, or an
// error reply where the script would raise a Lua error.
Reply run_script(ScriptId id, KeyRef& state, KeyRef& block_marker, const std::vector<std::string_view>& args,
                 std::int64_t now);

}  // namespace redlimit::detail::memory
