// inspect: what the library's own peek says of a subject (remaining, waits), plus what Redis holds
// (block marker, TTL, the raw state decoded per docs/keys.md, for display only).
#include "cli.hpp"

namespace cli {

namespace {

using redlimit::Reply;

// A little-endian unsigned integer of `n` bytes at `at` (lua/prologue.lua's string.pack "<In").
long long field(const std::string& v, std::size_t at, std::size_t n) {
  unsigned long long x = 0;
  for (std::size_t i = 0; i < n; ++i) x |= static_cast<unsigned long long>(static_cast<unsigned char>(v[at + i])) << (8 * i);
  return static_cast<long long>(x);
}

// A big-endian unsigned integer of `n` bytes at `at` (a compact sliding-log entry, lua/sliding_log.lua).
long long big_endian(const std::string& v, std::size_t at, std::size_t n) {
  unsigned long long x = 0;
  for (std::size_t i = 0; i < n; ++i) x = (x << 8) | static_cast<unsigned char>(v[at + i]);
  return static_cast<long long>(x);
}

// A sliding log's entry as text "<cum>/<cost>" whichever form it was written in (docs/keys.md):
// a compact one (20 bytes, pack('>I7I6I7', cum, cost, time)) is shown as the text one would be.
std::string log_entry(const std::string& member, bool& compact) {
  compact = member.size() == 20 && static_cast<unsigned char>(member[0]) < '0';
  if (!compact) return member;
  std::string cum = std::to_string(big_endian(member, 0, 7));
  if (cum.size() < 16) cum.insert(0, 16 - cum.size(), '0');
  return cum + "/" + std::to_string(big_endian(member, 7, 6));
}

Reply call(redlimit::Connection& conn, std::vector<std::string> argv) {
  Reply r = conn.command(argv);
  if (r.is_error()) throw redlimit::ReplyError(argv[0] + ": " + r.str);
  return r;
}

Output decode_string(const std::string& kind, std::string v) {
  Output o;
  o.number("bytes", static_cast<long long>(v.size()));
  // A block held in the state (docs/keys.md, Blocks): 7 bytes of "blocked until", then "BK".
  const std::size_t n = v.size();
  if ((n == 9 || n == 21 || n == 24 || n == 29 || n == 36 || n == 37) && v.compare(n - 2, 2, "BK") == 0) {
    o.number("blocked_until_us", field(v, n - 9, 7));
    v.resize(n - 9);
    if (v.empty()) return o;
  }
  if (kind == "fw" && v.size() == 20) {  // redlimit 0.3's, read once and replaced by the hash
    o.number("start_us", field(v, 0, 7));
    o.number("used", field(v, 7, 6));
    o.number("window_us", field(v, 13, 7));
  } else if ((kind == "tb" || kind == "lb") && (v.size() == 27 || v.size() == 28)) {
    o.number("at_us", field(v, 0, 7));
    o.number("whole", field(v, 7, 6));
    o.number("frac", field(v, 13, 7));
    o.number("unit", field(v, 20, 7));
    if (v.size() == 28) o.number("lease", field(v, 27, 1));  // how long the key lives: helpers.lua, bucket_ttl
  } else {
    o.text("layout", "unknown (an older version's state, read as written under the current limit)");
  }
  return o;
}

}  // namespace

Output decode_state(redlimit::Connection& conn, const std::string& kind, const std::string& key) {
  Output o;
  const std::string type = call(conn, {"TYPE", key}).str;
  o.text("type", type);
  if (type == "none") return o;
  if (type == "string") {
    o.object("value", decode_string(kind, call(conn, {"GET", key}).str));
  } else if (type == "zset") {  // sliding log: entries "<cum>/<cost>" (or compact) scored by time
    // and, while blocked, the member "~blk:<until>" above them (docs/keys.md, Blocks)
    std::int64_t entries = call(conn, {"ZCARD", key}).integer;
    Reply top = call(conn, {"ZRANGE", key, "-2", "-1", "WITHSCORES"});
    std::size_t n = top.elements.size();
    if (n >= 2 && top.elements[n - 2].str.rfind("~blk:", 0) == 0) {
      o.text("blocked_until_us", top.elements[n - 2].str.substr(5));
      n -= 2;
      --entries;
    }
    o.number("entries", entries);
    if (n >= 2) {
      bool compact = false;
      o.text("newest", log_entry(top.elements[n - 2].str, compact));
      o.text("newest_form", compact ? "compact" : "text");
      o.text("newest_at_us", top.elements[n - 1].str);
    }
  } else if (type == "hash") {
    // fixed window: "<start>:<window>" -> units, held less 2^50 during a block (lua/helpers.lua,
    // WINDOW_BLOCKED); sliding window, policy: "<window>[@<precision>]:<bucket>" -> units
    Output fields;
    const Reply all = call(conn, {"HGETALL", key});
    for (std::size_t i = 0; i + 1 < all.elements.size(); i += 2) {
      const std::string& name = all.elements[i].str;
      const std::string& value = all.elements[i + 1].str;
      if (name == "blk") {  // the block the hash holds (docs/keys.md, Blocks)
        o.text("blocked_until_us", value);
      } else if (kind == "fw" && !value.empty() && value[0] == '-') {
        fields.text(name, std::to_string(std::stoll(value) + (1LL << 50)));
      } else {
        fields.text(name, value);
      }
    }
    o.object(kind == "fw" ? "windows" : "buckets", fields);
  }
  return o;
}

int run_inspect(const Args& args, Output& out) {
  if (args.positional.size() != 3) throw UsageError("inspect needs STRATEGY RESOURCE SUBJECT");
  if (args.limit.empty()) throw UsageError("inspect needs --limit RATE (the limit the subject is held to)");
  const std::string kind = kind_of(args.positional[0]);
  const Session s = open_session(args);
  const redlimit::Strategy strategy = make_strategy(s, kind, args.positional[1], args.limit);
  const std::string& subject = args.positional[2];
  const std::string key = strategy.key_for(subject), block_key = strategy.block_key_for(subject);
  const redlimit::Decision d = strategy.peek(subject);
  const long long block_ttl = call(*s.connection, {"PTTL", block_key}).integer;
  out.text("key", key);
  out.boolean("allowed", d.allowed);
  out.number("limit", d.limit);
  out.number("remaining", d.remaining);
  out.number("retry_after_us", d.retry_after.count());
  out.number("reset_after_us", d.reset_after.count());
  out.boolean("blocked", block_ttl > 0 || block_ttl == -1);
  out.number("blocked_ttl_ms", block_ttl > 0 ? block_ttl : 0);
  out.number("ttl_ms", call(*s.connection, {"PTTL", key}).integer);  // -2: no key, -1: no TTL
  out.object("state", decode_state(*s.connection, kind, key));
  return d.allowed ? kOk : kLimited;
}

}  // namespace cli
