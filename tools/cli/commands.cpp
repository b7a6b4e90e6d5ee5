// check, reset, block, unblock and scan (inspect is in inspect.cpp).
#include <algorithm>
#include <set>

#include "cli.hpp"

namespace cli {

namespace {

using redlimit::Reply;

Reply call(redlimit::Connection& conn, const std::vector<std::string>& argv) {
  Reply r = conn.command(argv);
  if (r.is_error()) throw redlimit::ReplyError(argv[0] + ": " + r.str);
  return r;
}

// STRATEGY RESOURCE SUBJECT, and the strategy over --limit (any rate when the command needs none:
// keys do not depend on the limit).
struct Target {
  Session session;
  redlimit::Strategy strategy;
  std::string subject;
};

Target target(const Args& args, const char* command) {
  if (args.positional.size() != 3) throw UsageError(std::string(command) + " needs STRATEGY RESOURCE SUBJECT");
  const std::string kind = kind_of(args.positional[0]);
  Session s = open_session(args);
  redlimit::Strategy strategy = make_strategy(s, kind, args.positional[1], args.limit.empty() ? "1/1s" : args.limit);
  return Target{std::move(s), std::move(strategy), args.positional[2]};
}

// A glob pattern matching `literal` exactly: SCAN's MATCH treats * ? [ ] \ specially.
std::string glob_literal(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

const char* ttl_bucket(long long ttl_ms) {
  if (ttl_ms < 0) return "none";
  if (ttl_ms < 1000) return "lt_1s";
  if (ttl_ms < 10000) return "lt_10s";
  if (ttl_ms < 60000) return "lt_1m";
  if (ttl_ms < 600000) return "lt_10m";
  if (ttl_ms < 3600000) return "lt_1h";
  return "ge_1h";
}

}  // namespace

int run_check(const Args& args, Output& out) {
  if (args.positional.size() != 1) throw UsageError("check needs one RATE (quote it: \"10/s; 300/min\")");
  std::vector<redlimit::Limit> limits;
  try {
    limits = redlimit::parse_limits(args.positional[0]);
  } catch (const redlimit::InvalidArgument& e) {
    throw UsageError("bad rate: " + reason(e));
  }
  std::string canonical;
  for (const auto& l : limits) canonical += (canonical.empty() ? "" : "; ") + l.to_string();
  out.text("canonical", canonical);
  out.number("limits", static_cast<long long>(limits.size()));
  return kOk;
}

int run_reset(const Args& args, Output& out) {
  const Target t = target(args, "reset");
  t.strategy.reset(t.subject);
  out.text("reset", t.strategy.key_for(t.subject));
  return kOk;
}

int run_block(const Args& args, Output& out) {
  if (args.duration.empty()) throw UsageError("block needs --for DURATION (\"10m\")");
  const auto duration = parse_duration(args.duration);
  const Target t = target(args, "block");
  const redlimit::Decision d = t.strategy.block(t.subject, duration);
  out.text("blocked", t.strategy.block_key_for(t.subject));
  out.number("retry_after_us", d.retry_after.count());
  return kOk;
}

// Strategy::unblock: the marker and the block a state holds (a string state's suffix, a hash's
// field), lifted in one script call (docs/keys.md, Blocks), the state and its TTL kept.
int run_unblock(const Args& args, Output& out) {
  const Target t = target(args, "unblock");
  out.boolean("was_blocked", t.strategy.unblock(t.subject));
  return kOk;
}

// Every key of RESOURCE (any strategy, any subject) by SCAN with MATCH, a page at a time.
int run_scan(const Args& args, Output& out) {
  if (args.positional.size() != 1) throw UsageError("scan needs RESOURCE");
  const Session s = open_session(args);
  // The key of any subject, cut after "|": "<prefix>{<escaped resource>|" (docs/keys.md, Layout).
  const std::string any = s.limiter.fixed_window(args.positional[0], redlimit::Limit::per_second(1)).key_for("x");
  const std::string pattern = glob_literal(any.substr(0, any.find('|', any.find('{')) + 1)) + "*";
  std::map<std::string, long long> kinds, ttls;
  std::set<std::string> subjects;
  long long keys = 0, memory = 0;
  std::string cursor = "0";
  do {
    const Reply page = call(*s.connection, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    cursor = page.elements.at(0).str;
    std::vector<std::vector<std::string>> asks;
    for (const Reply& k : page.elements.at(1).elements) {
      asks.push_back({"PTTL", k.str});
      asks.push_back({"MEMORY", "USAGE", k.str});
    }
    const std::vector<Reply> answers = s.connection->pipeline(asks);
    for (std::size_t i = 0; i < page.elements[1].elements.size(); ++i) {
      const std::string& key = page.elements[1].elements[i].str;
      const std::size_t close = key.rfind("}:");
      ++keys;
      ++kinds[key.substr(close + 2)];
      subjects.insert(key.substr(0, close));
      ++ttls[ttl_bucket(answers[2 * i].integer)];
      memory += answers[2 * i + 1].integer;
    }
  } while (cursor != "0");
  out.number("keys", keys);
  out.number("subjects", static_cast<long long>(subjects.size()));
  out.number("memory_bytes", memory);
  Output by_kind, histogram;
  for (const auto& [k, n] : kinds) by_kind.number(k, n);
  for (const char* b : {"lt_1s", "lt_10s", "lt_1m", "lt_10m", "lt_1h", "ge_1h", "none"}) histogram.number(b, ttls[b]);
  out.object("kinds", by_kind);
  out.object("ttl", histogram);
  return kOk;
}

}  // namespace cli
