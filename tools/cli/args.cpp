// The command line: global options anywhere, then the command and its positional arguments.
#include <cctype>
#include <cstdlib>

#include "cli.hpp"

namespace cli {

const char* usage() {
  return "usage: redlimit [--url URL] [--prefix P] [--json] COMMAND ...\n"
         "  check RATE                              parse a rate string, print its canonical form\n"
         "  inspect STRATEGY RESOURCE SUBJECT --limit RATE\n"
         "                                          remaining, reset, blocked, TTL, raw state\n"
         "  reset STRATEGY RESOURCE SUBJECT         forget the subject's state and block\n"
         "  block STRATEGY RESOURCE SUBJECT --for DURATION   deny the subject for DURATION\n"
         "  unblock STRATEGY RESOURCE SUBJECT       lift a block, keep the state\n"
         "  scan RESOURCE                           subjects, memory and TTLs (SCAN, never KEYS)\n"
         "STRATEGY: fixed_window|fw sliding_log|sl sliding_window|sw policy|pol token_bucket|tb "
         "leaky_bucket|lb\n"
         "The password comes from REDLIMIT_PASSWORD (never put it in argv); REDLIMIT_URL sets the default URL.\n"
         "Exit: 0 ok, 1 subject limited or blocked (inspect), 2 usage error, 3 connection error, 4 Redis error.\n";
}

namespace {

// The value of an option: "--name value" or "--name=value".
std::string value_of(int argc, char** argv, int& i, const std::string& arg, const std::string& name) {
  if (arg.size() > name.size() && arg[name.size()] == '=') return arg.substr(name.size() + 1);
  if (i + 1 >= argc) throw UsageError(name + " needs a value");
  return argv[++i];
}

bool is(const std::string& arg, const std::string& name) {
  return arg == name || (arg.rfind(name + "=", 0) == 0);
}

}  // namespace

Args parse_args(int argc, char** argv) {
  Args a;
  if (const char* url = std::getenv("REDLIMIT_URL"); url != nullptr && *url != '\0') a.url = url;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      a.json = true;
    } else if (arg == "-h" || arg == "--help") {
      a.help = true;
    } else if (is(arg, "--url")) {
      a.url = value_of(argc, argv, i, arg, "--url");
    } else if (is(arg, "--prefix")) {
      a.prefix = value_of(argc, argv, i, arg, "--prefix");
    } else if (is(arg, "--limit")) {
      a.limit = value_of(argc, argv, i, arg, "--limit");
    } else if (is(arg, "--for")) {
      a.duration = value_of(argc, argv, i, arg, "--for");
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError("unknown option " + arg);
    } else if (a.command.empty()) {
      a.command = arg;
    } else {
      a.positional.push_back(arg);
    }
  }
  if (a.command.empty() && !a.help) throw UsageError("no command (try --help)");
  return a;
}

// "500ms", "30s", "5m", "2h", "1d": a positive whole number and a unit.
std::chrono::microseconds parse_duration(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  const std::string digits = text.substr(0, i), unit = text.substr(i);
  static const std::map<std::string, long long> us{
      {"ms", 1000LL}, {"s", 1000000LL}, {"m", 60000000LL}, {"h", 3600000000LL}, {"d", 86400000000LL}};
  const auto u = us.find(unit);
  if (digits.empty() || digits.size() > 9 || u == us.end() || std::stoll(digits) == 0) {
    throw UsageError("bad duration \"" + text + "\": expected a positive number and ms, s, m, h or d (\"30s\")");
  }
  return std::chrono::microseconds(std::stoll(digits) * u->second);
}

}  // namespace cli
