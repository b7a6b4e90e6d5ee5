// C++ twins of lua/*.lua (see include/redlimit/detail/memory_scripts.hpp). Each function below
// follows its script line by line; the comments name the Lua lines they stand for. Lua numbers are
// doubles holding integers below 2^53 (the client keeps them there), so int64 math is exact where
// the Lua math is, and math.fmod truncates toward zero exactly like C++ `%`.
#include "memory_scripts.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <unordered_map>

#include "redlimit/detail/scripts.hpp"

namespace redlimit::detail::memory {

// ---------------------------------------------------------------------------------------------
// UnitLog: a sorted set in Redis's order.

namespace {

// The decimal text of a sequence number, as fmt(seq) writes it into the member.
struct Digits {
  std::array<char, 24> buf{};
  std::size_t len = 0;
  explicit Digits(std::int64_t v) {
    const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    len = static_cast<std::size_t>(res.ptr - buf.data());
  }
  std::string_view view() const { return {buf.data(), len}; }
};

// Redis orders sorted-set members by score, then by member bytes. Members of one score share the
// "<time>:" prefix, so the tie is decided by the bytes of the sequence numbers.
bool member_less(const LogUnit& a, const LogUnit& b) {
  if (a.time != b.time) return a.time < b.time;
  if (a.seq == b.seq) return false;
  return Digits(a.seq).view() < Digits(b.seq).view();
}

}  // namespace

std::size_t UnitLog::lower_index(std::int64_t time_after) const {
  const auto it = std::upper_bound(units_.begin() + static_cast<std::ptrdiff_t>(head_), units_.end(), time_after,
                                   [](std::int64_t t, const LogUnit& u) { return t < u.time; });
  return static_cast<std::size_t>(it - units_.begin());
}

void UnitLog::compact() {
  if (head_ == units_.size()) {
    units_.clear();
    head_ = 0;
  } else if (head_ >= 64 && head_ * 2 >= units_.size()) {
    units_.erase(units_.begin(), units_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

void UnitLog::remove_through(std::int64_t cutoff) {
  head_ = lower_index(cutoff);
  compact();
}

void UnitLog::pop_max(std::int64_t n) {
  for (std::int64_t i = 0; i < n && !empty(); ++i) units_.pop_back();
  compact();
}

std::size_t UnitLog::count_after(std::int64_t cutoff) const { return units_.size() - lower_index(cutoff); }

std::optional<std::int64_t> UnitLog::nth_after(std::int64_t cutoff, std::size_t k) const {
  const std::size_t i = lower_index(cutoff) + k;
  if (i >= units_.size()) return std::nullopt;
  return units_[i].time;
}

bool UnitLog::add_nx(std::int64_t time, std::int64_t seq) {
  const LogUnit u{time, seq};
  if (empty() || member_less(units_.back(), u)) {
    units_.push_back(u);
    return true;
  }
  const auto it =
      std::lower_bound(units_.begin() + static_cast<std::ptrdiff_t>(head_), units_.end(), u, member_less);
  if (it != units_.end() && !member_less(u, *it)) return false;  // the member exists
  units_.insert(it, u);
  return true;
}

// ---------------------------------------------------------------------------------------------
// KeyRef

KeyRef::KeyRef(Table& table, const std::string& key, std::int64_t now) : table_(&table), key_(&key) {
  const auto it = table.find(key);
  if (it == table.end()) return;
  if (it->second.expired(now)) {
    table.erase(it);
    return;
  }
  entry_ = &it->second;
}

Entry& KeyRef::create(State state) {
  if (entry_ != nullptr) {
    entry_->state = std::move(state);
    entry_->deadline = kNoDeadline;
  } else {
    entry_ = &(*table_)[*key_];
    entry_->state = std::move(state);
    entry_->deadline = kNoDeadline;
  }
  return *entry_;
}

void KeyRef::expire_ms(std::int64_t now, std::int64_t ttl_ms) {
  if (entry_ != nullptr) entry_->deadline = now + ttl_ms * 1000;
}

void KeyRef::erase() {
  if (entry_ == nullptr) return;
  table_->erase(*key_);
  entry_ = nullptr;
}

// ---------------------------------------------------------------------------------------------
// Script lookup

namespace {

struct Known {
  ScriptId id;
  const Script& (*script)();
};

constexpr Known kKnown[] = {
    {ScriptId::fixed_window, &scripts::fixed_window}, {ScriptId::sliding_log, &scripts::sliding_log},
    {ScriptId::policy, &scripts::policy},             {ScriptId::token_bucket, &scripts::token_bucket},
    {ScriptId::leaky_bucket, &scripts::leaky_bucket}, {ScriptId::block, &scripts::block},
};

bool equal_hex_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

bool parse_int(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}

}  // namespace

std::optional<ScriptId> script_by_sha1(std::string_view sha1) {
  for (const auto& k : kKnown) {
    if (equal_hex_nocase(k.script().sha1, sha1)) return k.id;
  }
  return std::nullopt;
}

std::optional<ScriptId> script_by_source(std::string_view source) {
  for (const auto& k : kKnown) {
    if (k.script().source == source) return k.id;
  }
  return std::nullopt;
}

std::string_view script_name(ScriptId id) {
  for (const auto& k : kKnown) {
    if (k.id == id) return k.script().name;
  }
  return "unknown";
}

std::int64_t script_now(std::string_view argv1, std::int64_t clock_now) {
  std::int64_t v = 0;
  return parse_int(argv1, v) ? v : clock_now;
}

// ---------------------------------------------------------------------------------------------
// The twins

namespace {

// A Lua runtime error (or a Redis command error inside the script): becomes an error reply.
struct ScriptError {
  std::string message;
};

[[noreturn]] void wrong_type() {
  throw ScriptError{"WRONGTYPE Operation against a key holding the wrong kind of value"};
}

// prologue.lua, lines 28-35.
std::int64_t floor_div(std::int64_t a, std::int64_t b) { return (a - a % b) / b; }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  const std::int64_t r = a % b;
  return (a - r) / b + ((r > 0) ? 1 : 0);
}
// prologue.lua's ttl_ms: whole milliseconds, one more than the state needs (see there).
std::int64_t ttl_ms(std::int64_t us) { return ceil_div(std::max<std::int64_t>(us, 0), 1000) + 1; }

Reply integers(std::initializer_list<std::int64_t> values) {
  std::vector<Reply> items;
  items.reserve(values.size());
  for (const auto v : values) items.push_back(Reply::make_integer(v));
  return Reply::make_array(std::move(items));
}

// The prologue's locals, and ARGV as Lua's tonumber() reads it.
class Call {
 public:
  Call(const std::vector<std::string_view>& args, std::int64_t now_us) : args_(args), now(now_us) {
    // local mode = ARGV[3]; record = mode == '1' ... (a missing ARGV[3] is nil: none of them)
    if (const auto m = arg(3)) {
      record = *m == "1";
      refund = *m == "2";
      blocking = *m == "3";
    }
  }

  // ARGV[i] (1-based), nil when absent.
  std::optional<std::string_view> arg(std::size_t i) const {
    if (i < 1 || i > args_.size()) return std::nullopt;
    return args_[i - 1];
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
  std::int64_t cost() const { return num(2); }

 private:
  const std::vector<std::string_view>& args_;

 public:
  const std::int64_t now;
  bool record = false;
  bool refund = false;
  bool blocking = false;
};

// The entry of `key` as a T, nullptr when missing; WRONGTYPE when it holds another kind of value
// (Redis: a hash read as a string, a sorted set read as a hash...). Keys name their strategy's kind,
// so only a hand-made call can get there.
template <class T>
T* as(KeyRef& key) {
  Entry* e = key.get();
  if (e == nullptr) return nullptr;
  if (T* v = std::get_if<T>(&e->state)) return v;
  wrong_type();
}

// prologue.lua, lines 37-43: GET KEYS[2]; tonumber() of anything but a number is nil.
std::optional<Reply> prologue(const Call& c, KeyRef& block_marker) {
  if (!c.refund && !c.blocking) {
    Entry* e = block_marker.get();
    if (e != nullptr) {
      if (const auto* b = std::get_if<BlockedUntil>(&e->state)) {
        if (b->until > c.now) return integers({0, 0, b->until - c.now, b->until - c.now, 0});
      } else if (!std::holds_alternative<LevelAt>(e->state)) {
        wrong_type();  // GET on a hash or a sorted set
      }
    }
  }
  return std::nullopt;
}

// block.lua
Reply block(const Call& c, KeyRef& block_marker) {
  const std::int64_t duration = c.num(4);
  std::int64_t blocked_until = c.now + duration;
  // local current = tonumber(redis.call('GET', KEYS[2]))
  if (Entry* e = block_marker.get()) {
    if (const auto* b = std::get_if<BlockedUntil>(&e->state)) {
      if (b->until > blocked_until) blocked_until = b->until;  // never shorten a block
    } else if (!std::holds_alternative<LevelAt>(e->state)) {
      wrong_type();
    }
  }
  // PSETEX KEYS[2] ttl_ms(blocked_until - now) blocked_until
  block_marker.create(BlockedUntil{blocked_until});
  block_marker.expire_ms(c.now, ttl_ms(blocked_until - c.now));
  return integers({0, 0, blocked_until - c.now, blocked_until - c.now, 0});
}

// fixed_window.lua
Reply fixed_window(const Call& c, KeyRef& key) {
  const std::int64_t limit = c.num(4);
  const std::int64_t window = c.num(5);
  const std::int64_t cost = c.cost();

  std::int64_t start = c.now - c.now % window;
  std::int64_t used = 0;
  WindowCount* state = as<WindowCount>(key);  // unpack2(get(key))
  if (state != nullptr && state->start >= start) {
    start = state->start;
    used = state->count;
  }
  const std::int64_t window_end = start + window;

  const bool allowed = c.refund || used + cost <= limit;
  if (c.refund) {
    if (used > 0) {
      used = std::max<std::int64_t>(0, used - cost);
      state->count = used;  // put(key, pack2(start, used), ...) (the key exists: used came from it)
      key.expire_ms(c.now, ttl_ms(window_end - c.now));
    }
  } else if (allowed && c.record) {
    used = used + cost;
    WindowCount& s = state != nullptr ? *state : std::get<WindowCount>(key.create(WindowCount{}).state);
    s.start = start;  // put(key, pack2(start, used), ttl)
    s.count = used;
    key.expire_ms(c.now, ttl_ms(window_end - c.now));
  }

  std::int64_t retry_after = 0;
  if (!allowed) retry_after = window_end - c.now;
  std::int64_t reset_after = 0;
  if (used > 0) reset_after = window_end - c.now;
  return integers({allowed ? 1 : 0, limit - used, retry_after, reset_after, 0});
}

// sliding_log.lua
Reply sliding_log(const Call& c, KeyRef& key) {
  const std::int64_t limit = c.num(4);
  const std::int64_t window = c.num(5);
  const std::int64_t cost = c.cost();

  const std::int64_t cutoff = c.now - window;  // scores <= cutoff have left the window
  UnitLog* log = as<UnitLog>(key);
  std::int64_t used = 0;
  if (c.record || c.refund) {
    if (log != nullptr) {
      log->remove_through(cutoff);      // ZREMRANGEBYSCORE key -inf cutoff
      if (c.refund) log->pop_max(cost);  // ZPOPMAX key cost
      if (log->empty()) {                // Redis deletes an emptied sorted set
        key.erase();
        log = nullptr;
      }
    }
    used = log != nullptr ? static_cast<std::int64_t>(log->size()) : 0;  // ZCARD
  } else {
    used = log != nullptr ? static_cast<std::int64_t>(log->count_after(cutoff)) : 0;  // ZCOUNT (cutoff +inf
  }

  const bool allowed = c.refund || used + cost <= limit;
  if (allowed && c.record) {
    if (log == nullptr) log = &std::get<UnitLog>(key.create(UnitLog{}).state);
    std::int64_t seq = used;
    for (std::int64_t i = 0; i < cost; ++i) {
      do {
        seq = seq + 1;
      } while (!log->add_nx(c.now, seq));  // ZADD key NX now "<now>:<seq>"
    }
    used = used + cost;
  }

  std::int64_t retry_after = 0;
  if (!allowed) {
    const std::int64_t nth = used + cost - limit;
    std::optional<std::int64_t> score;
    if (log != nullptr && nth >= 1) score = log->nth_after(cutoff, static_cast<std::size_t>(nth - 1));
    if (!score) throw ScriptError{"ERR attempt to perform arithmetic on a nil value (sliding_log retry_after)"};
    retry_after = *score + window - c.now;
  }
  std::int64_t reset_after = 0;
  if (used > 0) {
    const std::int64_t newest = log->max_time();  // ZREVRANGE key 0 0 WITHSCORES
    reset_after = std::max<std::int64_t>(0, newest + window - c.now);
    if (allowed && c.record) key.expire_ms(c.now, ttl_ms(reset_after));
  }
  return integers({allowed ? 1 : 0, limit - used, retry_after, reset_after, 0});
}

// policy.lua
struct PolicyLimit {
  std::string_view tag;
  std::int64_t limit = 0;
  std::int64_t P = 0;
  std::int64_t n = 0;
  std::int64_t r = 0;
  std::int64_t b = 0;
  std::unordered_map<std::int64_t, std::int64_t> counts;
  std::int64_t full = 0;
  std::int64_t old = 0;
  std::optional<std::int64_t> newest;
  std::int64_t usedP = 0;
  bool allowed = false;

  std::int64_t count_at(std::int64_t idx) const {
    const auto it = counts.find(idx);
    return it == counts.end() ? 0 : it->second;
  }
};

// string.match(field, '^(.*):(%d+)$'): the greedy (.*) ends at the last ':' that only digits follow.
bool split_field(std::string_view field, std::string_view& tag, std::int64_t& idx) {
  const std::size_t colon = field.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view digits = field.substr(colon + 1);
  if (digits.empty()) return false;
  for (const char ch : digits) {
    if (ch < '0' || ch > '9') return false;
  }
  if (!parse_int(digits, idx)) return false;
  tag = field.substr(0, colon);
  return true;
}

std::string field_name(std::string_view tag, std::int64_t idx) {
  std::string f;
  f.reserve(tag.size() + 21);
  f.append(tag);
  f += ':';
  f += std::to_string(idx);
  return f;
}

// retry_after(l), policy.lua lines 105-123.
std::int64_t policy_retry_after(const PolicyLimit& l, std::int64_t cost, std::int64_t now) {
  std::int64_t s = l.full;
  const std::int64_t last = std::max(l.newest.value_or(l.b), l.b) - l.b + l.n + 1;
  for (std::int64_t k = 0; k <= last; ++k) {
    const std::int64_t o = l.count_at(l.b + k - l.n);
    if (k > 0) s = s - o;
    const std::int64_t x = l.limit - s - cost;
    if (x >= 0) {
      std::int64_t d = 0;
      if (o > 0) d = std::max<std::int64_t>(0, l.P - floor_div(x * l.P, o));
      if (k == 0) d = std::max(d, l.r);
      if (d < l.P) return (l.b + k) * l.P + d - now;
    }
  }
  return 0;
}

Reply policy(const Call& c, KeyRef& key) {
  const std::int64_t cost = c.cost();
  const std::int64_t m = c.num(4);

  std::vector<PolicyLimit> limits(static_cast<std::size_t>(std::max<std::int64_t>(0, m)));
  std::unordered_map<std::string_view, PolicyLimit*> by_tag;
  for (std::int64_t i = 1; i <= m; ++i) {
    const std::size_t base = static_cast<std::size_t>(5 + 4 * (i - 1));
    PolicyLimit& l = limits[static_cast<std::size_t>(i - 1)];
    const std::int64_t P = c.num(base + 3);
    l.tag = c.arg(base).value_or(std::string_view{});
    l.limit = c.num(base + 1);
    l.P = P;
    l.n = c.num(base + 2) / P;
    l.r = c.now % P;
    l.b = (c.now - l.r) / P;
    by_tag[l.tag] = &l;
  }

  // One pass over the hash (HGETALL).
  BucketHash* hash = as<BucketHash>(key);
  std::vector<std::string> stale;
  if (hash != nullptr) {
    for (const auto& [field, value] : hash->fields) {
      std::string_view tag;
      std::int64_t idx = 0;
      PolicyLimit* l = nullptr;
      if (split_field(field, tag, idx)) {
        const auto it = by_tag.find(tag);
        if (it != by_tag.end()) l = it->second;
      }
      if (l != nullptr && idx >= l->b - l->n) {
        const std::int64_t cnt = value;
        l->counts[idx] = cnt;
        if (idx == l->b - l->n) {
          l->old = cnt;
        } else {
          l->full = l->full + cnt;
        }
        if (!l->newest || idx > *l->newest) l->newest = idx;
      } else {
        stale.push_back(field);
      }
    }
  }

  bool allowed = true;
  for (auto& l : limits) {
    l.usedP = l.full * l.P + l.old * (l.P - l.r);
    l.allowed = l.usedP + cost * l.P <= l.limit * l.P;
    allowed = allowed && l.allowed;
  }
  if (c.refund) allowed = true;

  if (c.refund) {
    for (auto& l : limits) {
      std::int64_t left = cost;
      std::int64_t idx = std::max(l.newest.value_or(l.b), l.b);
      while (left > 0 && idx >= l.b - l.n) {
        const std::int64_t cnt = l.count_at(idx);
        const std::int64_t take = std::min(cnt, left);
        if (take > 0) {
          const std::int64_t weight = (idx == l.b - l.n) ? (l.P - l.r) : l.P;
          l.usedP = l.usedP - take * weight;
          l.counts[idx] = cnt - take;
          // take > 0: the count came from the hash, which therefore exists.
          if (cnt == take) {
            hash->fields.erase(field_name(l.tag, idx));  // HDEL key "<tag>:<idx>"
          } else {
            hash->fields[field_name(l.tag, idx)] -= take;  // HINCRBY key "<tag>:<idx>" -take
          }
          left = left - take;
        }
        idx = idx - 1;
      }
      l.newest.reset();
      for (const auto& [i, cnt] : l.counts) {
        if (cnt > 0 && (!l.newest || i > *l.newest)) l.newest = i;
      }
    }
    if (hash != nullptr && hash->fields.empty()) {  // Redis deletes an emptied hash
      key.erase();
      hash = nullptr;
    }
  } else if (allowed && c.record) {
    if (hash == nullptr) hash = &std::get<BucketHash>(key.create(BucketHash{}).state);
    for (auto& l : limits) {
      hash->fields[field_name(l.tag, l.b)] += cost;  // HINCRBY key "<tag>:<b>" cost
      l.usedP = l.usedP + cost * l.P;
      l.counts[l.b] = l.count_at(l.b) + cost;
      if (!l.newest || l.b > *l.newest) l.newest = l.b;
    }
    for (const auto& f : stale) hash->fields.erase(f);  // delete_stale()
    if (hash->fields.empty()) {
      key.erase();
      hash = nullptr;
    }
  }

  // The deciding limit.
  std::optional<std::int64_t> remaining;
  std::int64_t retry = 0;
  std::int64_t reset = 0;
  std::int64_t decider = 1;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const PolicyLimit& l = limits[i];
    const std::int64_t rem = std::max<std::int64_t>(0, floor_div(l.limit * l.P - l.usedP, l.P));
    std::int64_t wait = 0;
    if (!allowed && !l.allowed) wait = policy_retry_after(l, cost, c.now);
    if (l.newest) reset = std::max(reset, (*l.newest + l.n + 1) * l.P - c.now);
    if (allowed) {
      if (!remaining || rem < *remaining) decider = static_cast<std::int64_t>(i) + 1;
    } else if (wait > retry) {
      decider = static_cast<std::int64_t>(i) + 1;
    }
    if (!remaining || rem < *remaining) remaining = rem;
    retry = std::max(retry, wait);
  }
  if (allowed && c.record && reset > 0) key.expire_ms(c.now, ttl_ms(reset));
  // A Lua table converts to a Redis array up to its first nil: with no limits, {allowed} only.
  if (!remaining) return integers({allowed ? 1 : 0});
  return integers({allowed ? 1 : 0, *remaining, retry, reset, 0, decider});
}

// GET of a "<level>:<at>" string; string.match(v, '^(%d+):(%d+)$') fails on anything else.
const LevelAt* read_level_at(KeyRef& key) {
  Entry* e = key.get();
  if (e == nullptr) return nullptr;
  if (const auto* v = std::get_if<LevelAt>(&e->state)) {
    if (v->level < 0 || v->at < 0) return nullptr;  // "-1:5" does not match %d+
    return v;
  }
  if (std::holds_alternative<BlockedUntil>(e->state)) return nullptr;  // a plain number: no match
  wrong_type();
}

// token_bucket.lua
Reply token_bucket(const Call& c, KeyRef& key) {
  const std::int64_t capacity = c.num(4);
  const std::int64_t unit = c.num(5);
  const std::int64_t refill = c.num(6);
  const std::int64_t cost = c.cost();

  const std::int64_t full = capacity * unit;
  std::int64_t level = full;
  std::int64_t at = c.now;
  if (const LevelAt* v = read_level_at(key)) {
    level = std::min(v->level, full);
    at = v->at;
  }
  const std::int64_t t0 = std::max(c.now, at);
  const std::int64_t ahead = t0 - c.now;
  if (t0 - at >= ceil_div(full - level, refill)) {
    level = full;
  } else {
    level = level + (t0 - at) * refill;
  }

  const std::int64_t need = cost * unit;
  const bool allowed = c.refund || level >= need;
  bool changed = false;
  if (c.refund) {
    changed = level < full;
    level = std::min(full, level + need);
  } else if (allowed && c.record) {
    level = level - need;
    changed = true;
  }
  if (changed) {
    if (level < full) {
      key.create(LevelAt{level, t0});  // PSETEX key ... pack2(t0, level)
      key.expire_ms(c.now, ttl_ms(ahead + ceil_div(full - level, refill)));
    } else {
      key.erase();  // full is what a missing key means
    }
  }

  std::int64_t retry_after = 0;
  if (!allowed) retry_after = ahead + ceil_div(need - level, refill);
  std::int64_t reset_after = 0;
  if (level < full) reset_after = ahead + ceil_div(full - level, refill);
  return integers({allowed ? 1 : 0, floor_div(level, unit), retry_after, reset_after, 0});
}

// leaky_bucket.lua
Reply leaky_bucket(const Call& c, KeyRef& key) {
  const std::int64_t capacity = c.num(4);
  const std::int64_t unit = c.num(5);
  const std::int64_t leak = c.num(6);
  const bool shaper = c.arg(7).value_or(std::string_view{}) == "shaper";
  const std::int64_t cost = c.cost();

  const std::int64_t full = capacity * unit;
  std::int64_t level = 0;
  std::int64_t at = c.now;
  if (const LevelAt* v = read_level_at(key)) {
    level = std::min(v->level, full);
    at = v->at;
  }
  const std::int64_t t0 = std::max(c.now, at);
  const std::int64_t ahead = t0 - c.now;
  if (t0 - at >= ceil_div(level, leak)) {
    level = 0;
  } else {
    level = level - (t0 - at) * leak;
  }

  const std::int64_t need = cost * unit;
  const bool allowed = c.refund || level + need <= full;
  std::int64_t delay = 0;
  if (allowed && shaper && !c.refund) delay = ahead + ceil_div(level, leak);
  bool changed = false;
  if (c.refund) {
    changed = level > 0;
    level = std::max<std::int64_t>(0, level - need);
  } else if (allowed && c.record) {
    level = level + need;
    changed = true;
  }
  if (changed) {
    if (level > 0) {
      key.create(LevelAt{level, t0});
      key.expire_ms(c.now, ttl_ms(ahead + ceil_div(level, leak)));
    } else {
      key.erase();  // empty is what a missing key means
    }
  }

  std::int64_t retry_after = 0;
  if (!allowed) retry_after = ahead + ceil_div(level + need - full, leak);
  std::int64_t reset_after = 0;
  if (level > 0) reset_after = ahead + ceil_div(level, leak);
  return integers({allowed ? 1 : 0, floor_div(full - level, unit), retry_after, reset_after, delay});
}

}  // namespace

Reply run_script(ScriptId id, KeyRef& state, KeyRef& block_marker, const std::vector<std::string_view>& args,
                 std::int64_t now) {
  try {
    const Call c(args, now);
    if (auto early = prologue(c, block_marker)) return std::move(*early);
    switch (id) {
      case ScriptId::fixed_window:
        return fixed_window(c, state);
      case ScriptId::sliding_log:
        return sliding_log(c, state);
      case ScriptId::policy:
        return policy(c, state);
      case ScriptId::token_bucket:
        return token_bucket(c, state);
      case ScriptId::leaky_bucket:
        return leaky_bucket(c, state);
      case ScriptId::block:
        return block(c, block_marker);
    }
    return Reply::make_error("ERR unknown script");
  } catch (const ScriptError& e) {
    if (e.message.rfind("WRONGTYPE", 0) == 0) return Reply::make_error(e.message);
    return Reply::make_error(e.message + " (in the memory twin of " + std::string(script_name(id)) + ".lua)");
  }
}

}  // namespace redlimit::detail::memory
