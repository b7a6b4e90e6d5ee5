#include "redlimit/transport/memory_connection.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>

#include "memory_scripts.hpp"

namespace redlimit {

namespace mem = detail::memory;

static_assert((MemoryConnection::shard_count() & (MemoryConnection::shard_count() - 1)) == 0,
              "shard_count() must be a power of two");
static_assert(MemoryConnection::shard_count() <= 64, "ShardLocks keeps the shards of a call in 64 bits");

struct MemoryConnection::Shard {
  mutable std::mutex mutex;
  mem::Table table;
  std::size_t cursor = 0;  // next bucket of `table` the incremental sweep looks at

  // Looks at the next `buckets` buckets of the table and evicts what has expired at `now`.
  std::size_t sweep_some(std::int64_t now, std::size_t buckets) {
    if (table.empty()) return 0;
    const std::size_t count = table.bucket_count();
    std::vector<std::string> doomed;
    for (std::size_t i = 0; i < buckets; ++i) {
      const std::size_t b = cursor % count;
      cursor = b + 1;
      for (auto it = table.begin(b); it != table.end(b); ++it) {
        if (it->second.expired(now)) doomed.push_back(it->first);
      }
    }
    for (const auto& k : doomed) table.erase(k);
    return doomed.size();
  }

  std::size_t sweep_all(std::int64_t now) {
    std::size_t evicted = 0;
    for (auto it = table.begin(); it != table.end();) {
      if (it->second.expired(now)) {
        it = table.erase(it);
        ++evicted;
      } else {
        ++it;
      }
    }
    return evicted;
  }
};

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

Reply wrong_arity(std::string_view command) {
  std::string lower(command);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return Reply::make_error("ERR wrong number of arguments for '" + lower + "' command");
}

// Lua's %s: isspace() in the C locale.
constexpr std::string_view kSpace = " \t\n\v\f\r";

// Appends the words of `s` (Lua's %S+) to `out`.
void split_words(std::string_view s, std::vector<std::string_view>& out) {
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t start = s.find_first_not_of(kSpace, at);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(s.find_first_of(kSpace, start), s.size());
    out.push_back(s.substr(start, end - start));
    at = end;
  }
}

// ARGV from argv[first] on, as the twins read it: the scripts take mode, cost and parameters in
// one argument, the head ARGV[2] = "<mode> <cost> <parameters>" (lua/prologue.lua), and the twins
// take them one argument each, in the order the scripts named them before: now, cost, mode, then a
// word a parameter, then the costs of a batch's later requests. nullopt for a head the script's
// pattern refuses (helpers.lua, read_head: a Lua error there).
struct ScriptArgs {
  std::vector<std::string_view> args;
  std::string_view params;  // the head's parameters, as one string (what the scripts parse)
  std::size_t param_words;  // args[3 .. 3 + param_words): params, a word each
};
std::optional<ScriptArgs> script_args(const std::vector<std::string>& argv, std::size_t first) {
  ScriptArgs out;
  std::vector<std::string_view>& args = out.args;
  args.reserve(argv.size() - first + 12);
  if (first + 1 >= argv.size()) return std::nullopt;  // no head: Lua's match(nil) fails
  args.emplace_back(argv[first]);
  const std::string_view head = argv[first + 1];
  if (head.size() < 3 || head[0] < '0' || head[0] > '4' || head[1] != ' ') return std::nullopt;
  const std::size_t cost_end = head.find(' ', 2);
  const std::string_view cost = head.substr(2, cost_end == std::string_view::npos ? head.npos : cost_end - 2);
  if (!mem::decimal_in(cost, 1, mem::kMaxCount)) return std::nullopt;  // as lua/helpers.lua's integer_in
  args.push_back(cost);
  args.push_back(head.substr(0, 1));
  if (cost_end != std::string_view::npos) {
    out.params = head.substr(cost_end + 1);
    split_words(out.params, args);
  }
  out.param_words = args.size() - 3;
  for (std::size_t i = first + 2; i < argv.size(); ++i) args.emplace_back(argv[i]);
  return out;
}

}  // namespace

MemoryConnection::MemoryConnection(std::shared_ptr<Clock> clock)
    : clock_(clock ? std::move(clock) : std::shared_ptr<Clock>(SystemClock::instance())),
      shards_(new Shard[shard_count()]) {}

MemoryConnection::~MemoryConnection() = default;

std::size_t MemoryConnection::shard_of(std::string_view key) {
  // Redis Cluster's rule: the part between the first '{' and the next '}', when non-empty.
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) key = key.substr(open + 1, close - open - 1);
  }
  std::uint64_t h = std::hash<std::string_view>{}(key);
  h ^= h >> 33;  // fold the high bits in: std::hash need not spread its low bits
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<std::size_t>(h & (shard_count() - 1));
}

Reply MemoryConnection::command(const std::vector<std::string>& argv) {
  if (argv.empty()) return Reply::make_error("ERR empty command");
  const std::string name = upper(argv[0]);
  if (name == "EVALSHA") return eval(argv, true);
  if (name == "EVAL") return eval(argv, false);
  if (name == "DEL" || name == "UNLINK") return del(argv);
  if (name == "SET") return set(argv);
  if (name == "PING") {
    if (argv.size() == 1) return Reply::make_status("PONG");
    if (argv.size() == 2) return Reply::make_string(argv[1]);
    return wrong_arity(argv[0]);
  }
  return Reply::make_error("ERR unknown command '" + argv[0] +
                           "': the redlimit memory backend answers only EVALSHA, EVAL, DEL, SET and PING");
}

// The shards a command's keys live in, as a bit set (shard_count() is 64): locked in increasing
// order, so that two commands spanning the same shards cannot deadlock, and released together.
class MemoryConnection::ShardLocks final : public mem::Tables {
 public:
  ShardLocks(MemoryConnection& self, const std::string* keys, std::size_t n) : self_(self) {
    for (std::size_t i = 0; i < n; ++i) mask_ |= std::uint64_t{1} << shard_of(keys[i]);
    each([this](Shard& s) { s.mutex.lock(); });
  }
  ~ShardLocks() {
    each([](Shard& s) { s.mutex.unlock(); });
  }
  ShardLocks(const ShardLocks&) = delete;
  ShardLocks& operator=(const ShardLocks&) = delete;

  mem::Table& of(const std::string& key) override { return self_.shards_[shard_of(key)].table; }
  void sweep(std::int64_t now) {
    each([now](Shard& s) { s.sweep_some(now, sweep_buckets()); });
  }

 private:
  // The shards in the set, in increasing order (a call has one or two, a batch a few dozen at most).
  template <class F>
  void each(F f) {
    for (std::uint64_t m = mask_; m != 0; m &= m - 1) f(self_.shards_[static_cast<std::size_t>(__builtin_ctzll(m))]);
  }

  MemoryConnection& self_;
  std::uint64_t mask_ = 0;
};

// EVAL/EVALSHA, one request or a batch alike: the clock is read once, every shard the call's keys
// live in is locked for the whole call, and the call runs as one script run (memory_scripts.hpp).
Reply MemoryConnection::eval(const std::vector<std::string>& argv, bool by_sha) {
  if (argv.size() < 3) return wrong_arity(argv[0]);
  std::int64_t numkeys = 0;
  {
    const std::string& s = argv[2];
    const auto res = std::from_chars(s.data(), s.data() + s.size(), numkeys);
    if (res.ec != std::errc() || res.ptr != s.data() + s.size()) {
      return Reply::make_error("ERR value is not an integer or out of range");
    }
  }
  if (numkeys < 0) return Reply::make_error("ERR Number of keys can't be negative");
  if (static_cast<std::uint64_t>(numkeys) > argv.size() - 3) {
    return Reply::make_error("ERR Number of keys can't be greater than number of args");
  }
  const std::optional<mem::ScriptId> id = by_sha ? mem::script_by_sha1(argv[1]) : mem::script_by_source(argv[1]);
  if (!id) {
    if (by_sha) return Reply::make_error("NOSCRIPT No matching script. Please use EVAL.");
    return Reply::make_error("ERR the redlimit memory backend runs only redlimit's own scripts");
  }
  const std::string_view script = mem::script_name(*id);
  const auto nkeys = static_cast<std::size_t>(numkeys);
  const std::size_t stride = mem::keys_per_request(*id);
  // The keys a call sends, as the scripts check them (lua/epilogue.lua, fixed_window.lua, block.lua).
  const bool one_call = *id == mem::ScriptId::block;  // block.lua: one state and its marker
  if (nkeys < stride || nkeys % stride != 0 || (one_call && nkeys != 2)) {
    return Reply::make_error("ERR redlimit: " + std::string(script) + ".lua takes " +
                             (stride == 2 ? "2 keys a request: the state and the block marker" : "1 key a request"));
  }
  if (stride == 2 && nkeys == 2 && argv[3] == argv[4]) {
    return Reply::make_error("ERR redlimit: the state and the block marker are one key (" + std::string(script) +
                             ".lua)");
  }
  const std::optional<ScriptArgs> split = script_args(argv, 3 + nkeys);
  if (!split) {
    return Reply::make_error("ERR " + std::string(script) + R"(.lua: ARGV[2] is not "<mode> <cost> <parameters>")");
  }
  const std::vector<std::string_view>& args = split->args;
  if (auto why = mem::params_error(*id, args.data() + 3, split->param_words, split->params)) {
    return Reply::make_error("ERR " + *why + " (in the memory twin of " + std::string(script) + ".lua)");
  }

  const std::int64_t clock_now = clock_->now().count();
  const std::optional<std::int64_t> now = mem::script_now(args[0], clock_now);
  if (!now) {
    // Whole microseconds since 1970, below 2^53 (the year 2255), where the scripts' doubles are
    // exact (lua/prologue.lua); past it the twins' int64 math would overflow.
    return Reply::make_error("ERR redlimit: now (ARGV[1]) is not a whole number of microseconds in [0, 2^53): " +
                             std::string(args[0]) + " (in the memory twin of " + std::string(script) + ".lua)");
  }
  Reply reply;
  {
    ShardLocks locks(*this, &argv[3], nkeys);
    reply = mem::run_script(*id, &argv[3], nkeys, args, split->param_words, *now, locks);
    locks.sweep(clock_now);
  }
  after_operation();
  return reply;
}

// SET key value [PX ms]: for tests that put a value of the wrong kind or length under a key, as
// they would on Redis. No other option.
Reply MemoryConnection::set(const std::vector<std::string>& argv) {
  if (argv.size() != 3 && argv.size() != 5) return wrong_arity(argv[0]);
  std::int64_t ttl_ms = 0;
  if (argv.size() == 5) {
    const std::optional<std::int64_t> ms = mem::decimal_in(argv[4], 1, std::int64_t{1} << 50);
    if (upper(argv[3]) != "PX" || !ms) return Reply::make_error("ERR syntax error");
    ttl_ms = *ms;
  }
  const std::int64_t now = clock_->now().count();
  {
    ShardLocks locks(*this, &argv[1], 1);
    mem::KeyRef key(locks.of(argv[1]), argv[1], now);
    if (ttl_ms > 0) {
      key.set(mem::string_state(argv[2]), now, ttl_ms);
    } else {
      key.create(mem::string_state(argv[2]));
    }
    locks.sweep(now);
  }
  after_operation();
  return Reply::make_status("OK");
}

Reply MemoryConnection::del(const std::vector<std::string>& argv) {
  if (argv.size() < 2) return wrong_arity(argv[0]);
  const std::int64_t now = clock_->now().count();
  std::int64_t deleted = 0;
  {
    ShardLocks locks(*this, &argv[1], argv.size() - 1);
    for (std::size_t k = 1; k < argv.size(); ++k) {
      mem::Table& table = locks.of(argv[k]);
      const auto it = table.find(argv[k]);
      if (it == table.end()) continue;
      if (!it->second.expired(now)) ++deleted;
      table.erase(it);
    }
    locks.sweep(now);
  }
  after_operation();
  return Reply::make_integer(deleted);
}

void MemoryConnection::after_operation() {
  // Every sweep_every()-th operation sweeps a little of the next shard in turn, so that expired
  // entries also leave shards that no longer see traffic. try_lock: never wait for it.
  const std::uint64_t n = operations_.fetch_add(1, std::memory_order_relaxed);
  if (n % sweep_every() != sweep_every() - 1) return;
  Shard& shard = shards_[(n / sweep_every()) % shard_count()];
  std::unique_lock<std::mutex> lock(shard.mutex, std::try_to_lock);
  if (lock.owns_lock()) shard.sweep_some(clock_->now().count(), sweep_buckets());
}

std::size_t MemoryConnection::size() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < shard_count(); ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mutex);
    total += shards_[i].table.size();
  }
  return total;
}

std::size_t MemoryConnection::sweep() {
  std::size_t evicted = 0;
  for (std::size_t i = 0; i < shard_count(); ++i) {
    const std::int64_t now = clock_->now().count();
    std::lock_guard<std::mutex> lock(shards_[i].mutex);
    evicted += shards_[i].sweep_all(now);
  }
  return evicted;
}

std::optional<Micros> MemoryConnection::expires_at(const std::string& key) const {
  const std::int64_t now = clock_->now().count();
  const Shard& shard = shards_[shard_of(key)];
  std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.table.find(key);
  if (it == shard.table.end() || it->second.expired(now)) return std::nullopt;
  if (it->second.deadline == mem::kNoDeadline) return Micros::max();
  return Micros{it->second.deadline};
}

}  // namespace redlimit
