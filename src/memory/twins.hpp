#pragma once
// The C++ twins of lua/*.lua, one per script, and what they share. A twin's decide() is the
// script's decide(); the epilogue that runs a call's requests through it (lua/epilogue.lua) is
// run_script() in memory_scripts.cpp, for every twin alike.
//
// Lua numbers are doubles holding integers below 2^53 (the client keeps them there), so int64 math
// is exact where the Lua math is, and math.fmod truncates toward zero exactly like C++ `%`.
// tests/golden/*.trace, recorded from a real Redis and replayed here by the unit suite, hold the
// twins to the scripts; the trace header names each script's SHA1, so a script that changes without
// new traces fails that test too.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store.hpp"

namespace redlimit::detail::memory {

// A Lua runtime error (or a Redis command error inside the script): becomes an error reply.
struct ScriptError {
  std::string message;
};

[[noreturn]] inline void wrong_type() {
  throw ScriptError{"WRONGTYPE Operation against a key holding the wrong kind of value"};
}

bool parse_int(std::string_view s, std::int64_t& out);

// prologue.lua's helpers.
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) { return (a - a % b) / b; }
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  const std::int64_t r = a % b;
  return (a - r) / b + ((r > 0) ? 1 : 0);
}
// prologue.lua's muldiv(a, b, c): floor(a * b / c) and (a * b) mod c, exact. The script does long
// division in doubles; 128-bit integers give the same two numbers.
struct QuotRem {
  std::int64_t q, r;
};
__extension__ using u128 = unsigned __int128;  // __extension__: a GCC/Clang type -Wpedantic accepts
inline QuotRem muldiv(std::int64_t a, std::int64_t b, std::int64_t c) {
  const u128 p = static_cast<u128>(a) * static_cast<u128>(b);
  const auto uc = static_cast<u128>(c);
  return {static_cast<std::int64_t>(p / uc), static_cast<std::int64_t>(p % uc)};
}
inline constexpr std::int64_t kTtlMarginMs = 1000;  // prologue.lua's TTL_MARGIN_MS
inline std::int64_t ttl_ms(std::int64_t us) { return ceil_div(std::max<std::int64_t>(us, 0), 1000) + 1 + kTtlMarginMs; }

// helpers.lua's lease_span(at, lease): the end of the period of the write that took a bucket's
// lease, and the end of the life it gave the key.
inline constexpr int kLeaseMinLog2 = 20;  // helpers.lua's LEASE_MIN_LOG2
struct LeaseSpan {
  std::int64_t next_period, lives_until;
};
inline LeaseSpan lease_span(std::int64_t at, std::int64_t lease) {
  const std::int64_t p = std::int64_t{1} << (kLeaseMinLog2 + lease % 32);
  const std::int64_t next_period = (floor_div(at, p) + 1) * p;
  return {next_period, next_period + (lease / 32 + 1) * p};
}

// The prologue's locals (now, record, refund), and ARGV as Lua's tonumber() reads it, laid out one
// argument a word (memory_connection.cpp, script_args): 1 now, 2 cost, 3 mode, then the
// parameters (`param_words` of them), then the costs of a batch's later requests. The scripts take
// 2 to the parameters in one argument, the head (lua/prologue.lua); the twins number them as named
// here.
class Call {
 public:
  Call(const std::vector<std::string_view>& args, std::size_t words, std::int64_t now_us)
      : args_(&args), now(now_us), param_words(words) {
    if (const auto m = arg(3)) {  // a missing ARGV[3] is nil: none of the modes
      record = *m == "1" || *m == "4";  // "4": consume, a batch of distinct keys (lua/prologue.lua)
      refund = *m == "2";
    }
  }

  // ARGV[i] (1-based), nil when absent.
  std::optional<std::string_view> arg(std::size_t i) const {
    if (i < 1 || i > args_->size()) return std::nullopt;
    return (*args_)[i - 1];
  }
  // tonumber(ARGV[i]) where the script goes on to compute with it: nil is a Lua error.
  std::int64_t num(std::size_t i) const {
    std::int64_t v = 0;
    const auto a = arg(i);
    if (!a || !parse_int(*a, v)) {
      throw ScriptError{"ERR attempt to perform arithmetic on ARGV[" + std::to_string(i) + "] (not an integer)"};
    }
    return v;
  }
  std::size_t argc() const { return args_->size(); }

 private:
  const std::vector<std::string_view>* args_;

 public:
  const std::int64_t now;
  // The head's parameter words (a sliding log's are 2 or 3: "[compact]"): the later costs follow.
  const std::size_t param_words;
  bool record = false;
  bool refund = false;
};

// What decide() returns to the epilogue, before it becomes part of the reply. `decider` is sent
// only by scripts of width 6 (policy.lua); `has_remaining` is false only for a policy of no limits,
// whose nil remaining cuts the Lua reply short.
struct Decided {
  std::int64_t allowed = 0;
  std::int64_t remaining = 0;
  std::int64_t retry_after = 0;
  std::int64_t reset_after = 0;
  std::int64_t delay = 0;
  std::int64_t decider = 1;
  bool has_remaining = true;
  std::vector<std::int64_t> each;  // policies: every limit's remaining and reset_after, in pairs
};

// decide()'s new value for a string state: leave it, write it with a TTL, or delete the key.
struct Write {
  enum class Kind { none, set, del };
  Kind kind = Kind::none;
  Packed value;
  std::int64_t ttl_ms = 0;  // for set: 0 keeps the key's TTL (SET KEEPTTL), else PSETEX's
};

// Twins of the scripts whose state is a string (state_is_string = true): decide() gets the staged
// value (nullptr: missing, or not a pack2 string) and says what to write; the epilogue writes.
class TokenBucketTwin {
 public:
  explicit TokenBucketTwin(const Call& c);
  Decided decide(std::int64_t cost, const Packed* v, Write& w) const;
  static constexpr int width() { return 5; }
  std::int64_t most_cost() const { return capacity_; }  // (helpers.lua, cost_above)

 private:
  const Call& c_;
  std::int64_t capacity_, unit_, refill_, full_;
};

class LeakyBucketTwin {
 public:
  explicit LeakyBucketTwin(const Call& c);
  Decided decide(std::int64_t cost, const Packed* v, Write& w) const;
  static constexpr int width() { return 5; }
  std::int64_t most_cost() const { return capacity_; }

 private:
  const Call& c_;
  std::int64_t capacity_, unit_, leak_, full_;
  bool shaper_;
};

// Twins of the scripts that keep their own kind of key (state_is_string = false): decide() reads
// and writes the key itself, command by command, as the script does with redis.call().
inline constexpr std::int64_t kWindowBlocked = std::int64_t{1} << 50;  // helpers.lua's WINDOW_BLOCKED
// A fixed window's count field "<start>:<window>", and back (helpers.lua: window_field,
// split_window_field; false for any other name).
std::string window_field(std::int64_t start, std::int64_t window);
bool split_window_field(std::string_view f, std::int64_t& start, std::int64_t& window);

// fixed_window.lua, which runs its own requests (no epilogue): its hash of counts by window.
class FixedWindowTwin {
 public:
  explicit FixedWindowTwin(const Call& c);
  Decided decide(KeyRef& key, std::int64_t cost) const;
  static constexpr int width() { return 5; }
  std::int64_t most_cost() const { return limit_; }

 private:
  struct Count {  // a field of the hash: "<start>:<window>" (named) and its count, unblocked
    std::int64_t start = 0, window = 0, count = 0;
    std::string field;
    bool named = false;
  };
  struct Read {
    std::optional<std::int64_t> blocked_until;
    std::vector<Count> counts;
    bool foreign = false;  // the key holds another type (a 0.3 string state is read as counts)
  };
  Read read(const Entry* e) const;
  Decided settle(KeyRef& key, std::int64_t cost) const;
  void write(KeyRef& key, const Read& r, const Count* home, std::int64_t start, std::int64_t used) const;

  const Call& c_;
  std::int64_t limit_, window_, current_;
  std::string field_;  // the current window's
};

class SlidingLogTwin {
 public:
  explicit SlidingLogTwin(const Call& c);
  // The block member first (EntryLog::blocked_until), then judge() of the entries (sliding_log.lua).
  Decided decide(KeyRef& key, std::int64_t cost) const;
  static constexpr int width() { return 5; }
  std::int64_t most_cost() const { return limit_; }

 private:
  Decided judge(KeyRef& key, std::int64_t cost) const;  // the log's entries alone

  const Call& c_;
  std::int64_t limit_, window_, cutoff_;
  std::int64_t trim_every_;  // units between two trims of the entries that left (sliding_log.lua)
  static constexpr std::size_t kTrimMost = 1024;  // entries a trim removes at most (TRIM_MOST)
};

class PolicyTwin {
 public:
  explicit PolicyTwin(const Call& c);
  Decided decide(KeyRef& key, std::int64_t cost);
  // 6 + 2m: the deciding limit, then each limit's remaining and reset_after (policy.lua's width);
  // 5 for a policy of one limit, whose own remaining and reset are the decision's.
  int width() const { return limits_.size() == 1 ? 5 : 6 + 2 * static_cast<int>(limits_.size()); }
  // The least of the limits (policy.lua's most_cost; params checked: at least one limit).
  std::int64_t most_cost() const;

  // One limit of the policy: its parameters (P = precision, n = buckets a window, r = now mod P,
  // b = the current bucket), then what decide() learns of it for the request at hand.
  struct Limit {
    std::string_view tag;
    std::int64_t limit = 0, P = 0, n = 0, r = 0, b = 0;
    // bucket -> units: every live bucket, up to 10,001 a limit (a window of 10,000 buckets), and any
    // ahead; by hash, as the script's table (a linear search per field made a decision O(m^2): 2.2 ms
    // with 3,600 buckets).
    std::unordered_map<std::int64_t, std::int64_t> counts;
    std::int64_t full = 0, old = 0, used = 0;
    std::optional<std::int64_t> newest;
    bool allowed = false, adopted = false;

    std::int64_t count_at(std::int64_t idx) const;
    std::int64_t& count_ref(std::int64_t idx);
  };

  // The call and the limits in place for it (reply_forms.cpp reads them).
  const Call& call() const { return c_; }
  const std::vector<Limit>& limits() const { return limits_; }

 private:
  void read(KeyRef& key, std::vector<std::string>& stale);
  void own(KeyRef& key, Limit& l);
  void give_back(KeyRef& key, std::int64_t cost);
  void take(KeyRef& key, std::int64_t cost, const std::vector<std::string>& stale);
  Decided conclude(KeyRef& key, std::int64_t cost, bool allowed, std::optional<std::int64_t> held,
                   bool renew) const;

  const Call& c_;
  std::vector<Limit> limits_;
  std::optional<std::int64_t> blocked_until_;  // read(): the block the hash holds, if in force
};

// The decision a block imposes until `until`, if it has not ended (false: none, or a refund, which
// goes through): nothing is left, and for a policy (width 6 + 2m) every limit has nothing left until
// the block ends (epilogue.lua's blocked_each, and policy.lua's decide() for the block its hash holds).
bool blocked_until(const Call& c, std::int64_t until, int width, Decided& d);

// A policy's hash field "<tag>:<bucket>" split (helpers.lua, split_field), and a tag's window
// and precision in us (helpers.lua, parse_tag); false for anything else.
bool split_field(std::string_view field, std::string_view& tag, std::int64_t& idx);
bool parse_tag(std::string_view tag, std::int64_t& w, std::int64_t& p);

// block.lua (no decide(): one answer). `state`: the strategy's state, which holds the block too
// when the kind (its second parameter) says so ("1": a string state, "2": a policy's hash).
std::vector<std::int64_t> block(const Call& c, KeyRef& marker, KeyRef& state);

// The block a string state holds (helpers.lua, split_block): true when `v` is blocked now.
bool blocked_in(const Call& c, const Packed* v);
// helpers.lua's keep_block: a write `w` of a state `v` blocked now keeps the block, and a TTL that
// outlives it.
void keep_block(const Call& c, const Packed* v, Write& w);

}  // namespace redlimit::detail::memory
