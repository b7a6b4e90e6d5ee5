// Connecting, naming strategies, and printing results.
#include <cstdio>
#include <cstdlib>

#include "cli.hpp"

namespace cli {

Session open_session(const Args& args) {
  redlimit::Endpoint endpoint = redlimit::parse_url(args.url);
  // The password from the environment: argv is visible to every user of the machine (ps).
  if (const char* pw = std::getenv("REDLIMIT_PASSWORD"); pw != nullptr && *pw != '\0') endpoint.password = pw;
  // A bounded wait: an unreachable server is a connection error (exit 3) within two seconds.
  const auto timeout = std::chrono::milliseconds(2000);
  auto conn = std::make_shared<redlimit::RedisConnection>(endpoint, timeout, timeout);
  redlimit::Options options;
  options.prefix = args.prefix;
  options.on_failure = redlimit::OnFailure::raise;  // an operator wants the error, not a policy's answer
  options.breaker_threshold = 0;
  options.connect_timeout = timeout;
  options.command_timeout = timeout;
  return Session{conn, redlimit::RateLimiter(conn, options)};
}

std::string kind_of(const std::string& name) {
  static const std::map<std::string, std::string> kinds{
      {"fw", "fw"},  {"fixed_window", "fw"}, {"sl", "sl"},  {"sliding_log", "sl"},   {"sw", "sw"},
      {"sliding_window", "sw"}, {"pol", "pol"}, {"policy", "pol"}, {"tb", "tb"}, {"token_bucket", "tb"},
      {"lb", "lb"},  {"leaky_bucket", "lb"}};
  const auto it = kinds.find(name);
  if (it == kinds.end()) {
    throw UsageError("unknown strategy \"" + name + "\": expected fw, sl, sw, pol, tb or lb");
  }
  return it->second;
}

// Buckets take their capacity and refill from the one limit: "100/1m" is a bucket of 100 refilled
// (or leaking) at 100 a minute, as RateLimiter::token_bucket(r, 100, 100, 1min) would make.
redlimit::Strategy make_strategy(const Session& s, const std::string& kind, const std::string& resource,
                                 const std::string& limit) {
  std::vector<redlimit::Limit> limits;
  try {
    limits = redlimit::parse_limits(limit);
  } catch (const redlimit::InvalidArgument& e) {
    throw UsageError("bad --limit: " + reason(e));
  }
  if (kind != "pol" && limits.size() != 1) throw UsageError("--limit: this strategy takes exactly one rate");
  const redlimit::Limit& l = limits.front();
  const redlimit::RateLimiter& r = s.limiter;
  if (kind == "fw") return r.fixed_window(resource, l);
  if (kind == "sl") return r.sliding_log(resource, l);
  if (kind == "sw") return r.sliding_window(resource, l);
  if (kind == "pol") return r.policy(resource, limits);
  if (kind == "tb") return r.token_bucket(resource, l.count(), l.count(), l.window());
  return r.leaky_bucket(resource, l.count(), l);
}

std::string Output::quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Output::json() const {
  std::string out = "{";
  for (const auto& [name, value] : fields_) {
    if (out.size() > 1) out += ",";
    out += quote(name) + ":" + value;
  }
  return out + "}";
}

std::string Output::lines(const std::string& indent) const {
  std::string out;
  for (const auto& [name, value] : fields_) out += indent + name + ": " + value + "\n";
  return out;
}

}  // namespace cli
