#include "redlimit/transport/memory_connection.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <mutex>

#include "memory_scripts.hpp"

namespace redlimit {

namespace mem = detail::memory;

static_assert((MemoryConnection::shard_count() & (MemoryConnection::shard_count() - 1)) == 0,
              "shard_count() must be a power of two");

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

// The shards a command's keys live in, each once, in increasing order: the order they are locked
// in, so that two commands spanning the same shards cannot deadlock.
std::vector<std::size_t> shards_for(const std::string* keys, std::size_t n) {
  std::vector<std::size_t> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(MemoryConnection::shard_of(keys[i]));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
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
  if (name == "DEL") return del(argv);
  if (name == "PING") {
    if (argv.size() == 1) return Reply::make_status("PONG");
    if (argv.size() == 2) return Reply::make_string(argv[1]);
    return wrong_arity(argv[0]);
  }
  return Reply::make_error("ERR unknown command '" + argv[0] +
                           "': the redlimit memory backend answers only EVALSHA, EVAL, DEL and PING");
}

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
  if (numkeys < 2 || numkeys % 2 != 0) {
    return Reply::make_error("ERR " + std::string(script) +
                             ".lua takes 2 keys a request: the state and the block marker");
  }
  if (numkeys > 2) return eval_batch(argv, static_cast<std::size_t>(numkeys / 2), by_sha);
  const std::string& state_key = argv[3];
  const std::string& block_key = argv[4];
  if (state_key == block_key) {
    return Reply::make_error("ERR " + std::string(script) + ".lua needs two different keys");
  }
  std::vector<std::string_view> args;
  args.reserve(argv.size() - 3 - static_cast<std::size_t>(numkeys));
  for (std::size_t i = 3 + static_cast<std::size_t>(numkeys); i < argv.size(); ++i) args.emplace_back(argv[i]);

  const std::int64_t clock_now = clock_->now().count();
  const std::int64_t now = mem::script_now(args.empty() ? std::string_view{} : args[0], clock_now);

  Reply reply;
  {
    const std::vector<std::size_t> ids = shards_for(&argv[3], 2);
    std::unique_lock<std::mutex> first(shards_[ids[0]].mutex);
    std::unique_lock<std::mutex> second;
    if (ids.size() > 1) second = std::unique_lock<std::mutex>(shards_[ids[1]].mutex);

    mem::KeyRef state(shards_[shard_of(state_key)].table, state_key, now);
    mem::KeyRef marker(shards_[shard_of(block_key)].table, block_key, now);
    reply = mem::run_script(*id, state, marker, args, now);

    for (const std::size_t i : ids) shards_[i].sweep_some(clock_now, sweep_buckets());
  }
  after_operation();
  return reply;
}

// A call deciding n > 1 requests (prologue.lua's layout): each request is run as a call of its
// own, in order, and the decisions are returned one after the other, as the script does.
Reply MemoryConnection::eval_batch(const std::vector<std::string>& argv, std::size_t n, bool by_sha) {
  const std::size_t first_arg = 3 + 2 * n;
  if (argv.size() < first_arg + 3 + (n - 1)) return wrong_arity(argv[0]);
  const std::size_t params_end = argv.size() - (n - 1);  // the costs of requests 2..n follow the parameters
  std::vector<std::string> one{argv[0], argv[1], "2", "", ""};
  one.insert(one.end(), argv.begin() + static_cast<std::ptrdiff_t>(first_arg),
             argv.begin() + static_cast<std::ptrdiff_t>(params_end));
  Reply out;
  out.type = Reply::Type::array;
  for (std::size_t i = 0; i < n; ++i) {
    one[3] = argv[3 + 2 * i];
    one[4] = argv[4 + 2 * i];
    if (i > 0) one[6] = argv[params_end + i - 1];  // ARGV[2]: this request's cost
    Reply r = eval(one, by_sha);
    if (r.type != Reply::Type::array) return r;  // an error stops the script there, as in Redis
    for (auto& e : r.elements) out.elements.push_back(std::move(e));
  }
  return out;
}

Reply MemoryConnection::del(const std::vector<std::string>& argv) {
  if (argv.size() < 2) return wrong_arity(argv[0]);
  const std::int64_t now = clock_->now().count();
  std::int64_t deleted = 0;
  {
    const std::vector<std::size_t> ids = shards_for(&argv[1], argv.size() - 1);
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(ids.size());
    for (const std::size_t i : ids) locks.emplace_back(shards_[i].mutex);
    for (std::size_t k = 1; k < argv.size(); ++k) {
      mem::Table& table = shards_[shard_of(argv[k])].table;
      const auto it = table.find(argv[k]);
      if (it == table.end()) continue;
      if (!it->second.expired(now)) ++deleted;
      table.erase(it);
    }
    for (const std::size_t i : ids) shards_[i].sweep_some(now, sweep_buckets());
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
