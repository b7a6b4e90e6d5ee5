#pragma once
// The `redlimit` command-line tool (docs/operations.md): what its parts share.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <redlimit/redlimit.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cli {

// Exit codes, documented in docs/operations.md and in --help.
enum Exit : int { kOk = 0, kLimited = 1, kUsage = 2, kConnection = 3, kRedis = 4 };

// A mistake in the command line: one line on stderr, exit 2, nothing sent to Redis.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// e.what() without the "redlimit: " every redlimit::Error starts with, for a message the tool
// prefixes itself (main's one line, or a UsageError that wraps the library's reason).
inline std::string reason(const std::exception& e) {
  constexpr std::string_view kPrefix = "redlimit: ";
  std::string_view what = e.what();
  if (what.substr(0, kPrefix.size()) == kPrefix) what.remove_prefix(kPrefix.size());
  return std::string(what);
}

struct Args {
  std::string command;
  std::vector<std::string> positional;
  std::string url = "redis://127.0.0.1:6379/0";
  std::string prefix = "redlimit:";
  std::string limit;     // --limit: a rate string (several, ';'-separated, for a policy)
  std::string duration;  // --for: block's duration
  bool json = false;
  bool help = false;
};

Args parse_args(int argc, char** argv);
std::chrono::microseconds parse_duration(const std::string& text);
const char* usage();

// One command's result: ordered fields, printed as "name: value" lines or one JSON object.
class Output {
 public:
  void text(const std::string& name, const std::string& value) { fields_.emplace_back(name, quote(value)); }
  void number(const std::string& name, long long value) { fields_.emplace_back(name, std::to_string(value)); }
  void boolean(const std::string& name, bool value) { fields_.emplace_back(name, value ? "true" : "false"); }
  void object(const std::string& name, const Output& inner) { fields_.emplace_back(name, inner.json()); }
  std::string json() const;
  std::string lines(const std::string& indent = "") const;

 private:
  static std::string quote(const std::string& s);
  std::vector<std::pair<std::string, std::string>> fields_;
};

// The limiter and a raw connection to the same server (the CLI is single-threaded: they share it).
struct Session {
  std::shared_ptr<redlimit::Connection> connection;
  redlimit::RateLimiter limiter;
};
Session open_session(const Args& args);

// The strategy a command names: fw, sl, sw, pol, tb, lb (or their long names) over --limit.
redlimit::Strategy make_strategy(const Session& s, const std::string& kind, const std::string& resource,
                                 const std::string& limit);
std::string kind_of(const std::string& name);

int run_check(const Args& args, Output& out);
int run_inspect(const Args& args, Output& out);
int run_reset(const Args& args, Output& out);
int run_block(const Args& args, Output& out);
int run_unblock(const Args& args, Output& out);
int run_scan(const Args& args, Output& out);

// The decoded raw state of a key of `kind` (docs/keys.md), for display.
Output decode_state(redlimit::Connection& conn, const std::string& kind, const std::string& key);

}  // namespace cli
