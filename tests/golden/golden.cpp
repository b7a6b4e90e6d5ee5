// The trace format, the replay against MemoryConnection, and the comparison of two traces.
#include "golden.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "redlimit/clock.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/transport/memory_connection.hpp"

namespace redlimit_golden {

using redlimit::Reply;

namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out + "\"";
}

// Reads what quote() wrote, from text[pos] (the opening quote).
std::string unquote(const std::string& text, std::size_t& pos) {
  if (pos >= text.size() || text[pos] != '"') throw std::runtime_error("expected '\"'");
  std::string out;
  for (++pos; pos < text.size(); ++pos) {
    const char ch = text[pos];
    if (ch == '"') {
      ++pos;
      return out;
    }
    if (ch != '\\') {
      out += ch;
      continue;
    }
    if (++pos >= text.size()) break;
    if (text[pos] == 'x') {
      if (pos + 2 >= text.size()) break;
      out += static_cast<char>(std::strtol(text.substr(pos + 1, 2).c_str(), nullptr, 16));
      pos += 2;
    } else {
      out += text[pos];
    }
  }
  throw std::runtime_error("unterminated string");
}

void skip_spaces(const std::string& text, std::size_t& pos) {
  while (pos < text.size() && text[pos] == ' ') ++pos;
}

Reply read_reply(const std::string& text, std::size_t& pos) {
  skip_spaces(text, pos);
  if (pos >= text.size()) throw std::runtime_error("expected a reply");
  const char tag = text[pos++];
  switch (tag) {
    case '_':
      return Reply::make_nil();
    case ':': {
      std::size_t end = pos;
      while (end < text.size() && text[end] != ' ' && text[end] != ']') ++end;
      const std::int64_t v = std::stoll(text.substr(pos, end - pos));
      pos = end;
      return Reply::make_integer(v);
    }
    case '$':
      return Reply::make_string(unquote(text, pos));
    case '+':
      return Reply::make_status(unquote(text, pos));
    case '-':
      return Reply::make_error(unquote(text, pos));
    case '[': {
      Reply r = Reply::make_array({});
      for (;;) {
        skip_spaces(text, pos);
        if (pos < text.size() && text[pos] == ']') {
          ++pos;
          return r;
        }
        r.elements.push_back(read_reply(text, pos));
      }
    }
    default:
      throw std::runtime_error(std::string("unknown reply tag '") + tag + "'");
  }
}

// The script a command runs (by its SHA1 in `scripts`), "" for anything else.
std::string script_of(const Command& c, const std::map<std::string, std::string>& scripts) {
  if (c.argv.size() < 2 || (c.argv[0] != "EVALSHA" && c.argv[0] != "EVAL")) return "";
  for (const auto& [name, sha] : scripts) {
    if (sha == c.argv[1]) return name;
  }
  return "";
}

// The words of a command's head, ARGV[2] after the numkeys keys and now (mode, cost, then the
// script's parameters); none for a hand-made call without one.
std::vector<std::string> head_words(const Command& c) {
  std::vector<std::string> words;
  try {
    std::istringstream head(c.argv.at(3 + std::stoul(c.argv.at(2)) + 1));
    for (std::string w; head >> w;) words.push_back(w);
  } catch (const std::exception&) {
  }
  return words;
}

// The length of one decision in a command's reply: 5, or 6 + 2m for a policy of m > 1 limits (the
// third word of its head: mode, cost, m, ...).
int decision_width(const Command& c, const std::map<std::string, std::string>& scripts) {
  if (script_of(c, scripts) != "policy") return 5;
  const std::vector<std::string> w = head_words(c);
  try {
    if (w.size() >= 3) return w[2] == "1" ? 5 : 6 + 2 * std::stoi(w[2]);  // a policy of one limit answers as the others
  } catch (const std::exception&) {
  }
  return 6;  // a hand-made call without the limits: the script errs, nothing to compare by field
}

std::string error_code(const std::string& message) { return message.substr(0, message.find(' ')); }

// The limit L of a decision of width 5, by which a single admission packs its remaining and
// reset_after into one integer (lua/epilogue.lua, reply): the first parameter (a fixed window's
// and a sliding log's limit, a bucket's capacity), a policy of one limit's count (its head: mode,
// cost, 1, tag, count, ...); 0 when the command says none.
std::int64_t decision_limit(const Command& c, const std::map<std::string, std::string>& scripts) {
  const std::vector<std::string> w = head_words(c);
  try {
    if (w.size() >= 3 && script_of(c, scripts) != "policy") return std::stoll(w[2]);
    if (w.size() >= 5 && w[2] == "1") return std::stoll(w[4]);
  } catch (const std::exception&) {
  }
  return 0;  // a hand-made call: the script errs
}

// Which integers of a reply are times: retry_after, reset_after, delay, and for a policy (6 + 2m)
// each limit's reset_after. Decisions come in lua/epilogue.lua's forms (reply). Of `width` 5:
// alone, an integer (same() reads it by decision_limit), {remaining, reset_after} (no batch replies
// 2 integers) or five; in a batch, one after the other, an admission's negative integer (marked
// in `packed`: same() reads it by decision_limit too), {3, remaining, reset_after} or five. A
// policy's: alone, its m pairs (no batch replies 2m integers) or whole; in a batch, {2, its m
// pairs} or whole.
std::vector<bool> time_fields(const Reply& reply, int width, std::vector<bool>& packed) {
  const auto& e = reply.elements;
  std::vector<bool> time(e.size(), false);
  packed.assign(e.size(), false);
  if (width > 5) {
    const std::size_t pairs = static_cast<std::size_t>(width) - 6, whole = static_cast<std::size_t>(width);
    if (e.size() == pairs) {
      for (std::size_t i = 1; i < e.size(); i += 2) time[i] = true;
      return time;
    }
    for (std::size_t at = 0; at < e.size();) {
      const bool admission = e[at].type == Reply::Type::integer && e[at].integer == 2;
      const std::size_t first = admission ? at + 1 : at;
      for (std::size_t k = 0; k < (admission ? pairs : whole) && first + k < e.size(); ++k) {
        time[first + k] = admission ? k % 2 == 1 : (k >= 2 && k <= 4) || (k >= 7 && (k - 7) % 2 == 0);
      }
      at += admission ? 1 + pairs : whole;
    }
    return time;
  }
  if (e.size() == 2) {
    time[1] = true;
    return time;
  }
  for (std::size_t at = 0; at < e.size();) {
    const std::int64_t tag = e[at].type == Reply::Type::integer ? e[at].integer : 0;
    if (tag < 0) {
      packed[at++] = true;
      continue;
    }
    const std::size_t len = tag == 3 ? 3 : 5;
    for (std::size_t k = at + 2; k < std::min(at + len, e.size()); ++k) time[k] = true;
    at += len;
  }
  return time;
}

// Whether a batch admission's negative integer `got` answers `want` (lua/epilogue.lua, reply): with
// x = -1 - e, an even x (remaining x / 2, the previous decision's reset) the same; an odd one,
// reset_after * (limit + 1) + remaining in (x - 1) / 2, the same remaining and a reset_after within
// `tolerance_us`.
bool same_packed(std::int64_t want, std::int64_t got, std::int64_t tolerance_us, std::int64_t limit) {
  const std::int64_t x = -1 - want, y = -1 - got;
  if (x % 2 == 0 || y % 2 == 0 || limit < 1) return want == got;
  const std::int64_t p = x / 2, q = y / 2;
  return p % (limit + 1) == q % (limit + 1) && std::llabs(p / (limit + 1) - q / (limit + 1)) <= tolerance_us;
}

// Whether `got` answers what `want` (Redis's reply) answers. Errors: the same code (Redis adds the
// script's line and SHA1). Under Redis TIME (`tolerance_us` >= 0), the decisions' time fields may
// differ by the uncertainty of when the server read its clock; allowed and remaining may not.
bool same(const Reply& want, const Reply& got, int width, std::int64_t tolerance_us, std::int64_t limit = 0) {
  if (want.type != got.type) return false;
  switch (want.type) {
    case Reply::Type::nil:
      return true;
    case Reply::Type::integer:  // a packed admission, reset_after * (limit + 1) + remaining (lua/epilogue.lua, reply)
      if (tolerance_us < 0 || limit < 1) return want.integer == got.integer;
      return want.integer % (limit + 1) == got.integer % (limit + 1) &&
             std::llabs(want.integer / (limit + 1) - got.integer / (limit + 1)) <= tolerance_us;
    case Reply::Type::error:
      return error_code(want.str) == error_code(got.str);
    case Reply::Type::string:
    case Reply::Type::status:
      return want.str == got.str;
    case Reply::Type::array: {
      if (want.elements.size() != got.elements.size()) return false;
      std::vector<bool> packed;
      const std::vector<bool> time = time_fields(want, width, packed);
      for (std::size_t i = 0; i < want.elements.size(); ++i) {
        const Reply& a = want.elements[i];
        const Reply& b = got.elements[i];
        const bool integers = a.type == Reply::Type::integer && b.type == Reply::Type::integer;
        if (tolerance_us >= 0 && packed[i] && integers) {
          if (!same_packed(a.integer, b.integer, tolerance_us, limit)) return false;
        } else if (tolerance_us >= 0 && time[i] && integers) {
          if (std::llabs(a.integer - b.integer) > tolerance_us) return false;
        } else if (!same(a, b, width, -1)) {
          return false;
        }
      }
      return true;
    }
  }
  return false;
}

// How far apart two readings of the server's clock can be within one Redis-TIME stretch of a
// trace: state written at one reading is read at the next.
std::int64_t tolerance(const Trace& t) {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  for (const auto& c : t.commands) {
    if (!c.redis_time) continue;
    if (lo == 0 || c.time_before < lo) lo = c.time_before;
    hi = std::max(hi, c.time_after);
  }
  return hi - lo + 2000;
}

}  // namespace

std::string show(const Reply& r) {
  switch (r.type) {
    case Reply::Type::nil:
      return "_";
    case Reply::Type::integer:
      return ":" + std::to_string(r.integer);
    case Reply::Type::string:
      return "$" + quote(r.str);
    case Reply::Type::status:
      return "+" + quote(r.str);
    case Reply::Type::error:
      return "-" + quote(r.str);
    case Reply::Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < r.elements.size(); ++i) out += (i ? " " : "") + show(r.elements[i]);
      return out + "]";
    }
  }
  return "?";
}

std::string show(const std::vector<std::string>& argv) {
  std::string out;
  for (std::size_t i = 0; i < argv.size(); ++i) out += (i ? " " : "") + quote(argv[i]);
  return out;
}

std::string format(const Trace& trace) {
  std::ostringstream os;
  os << "# redlimit golden trace: scenario " << trace.scenario << ", recorded from Redis by scripts/record_golden.sh\n"
     << "# (tests/golden/golden.hpp describes the format; tests/unit/golden_test.cpp replays it)\n";
  for (const auto& [name, sha] : trace.scripts) os << "script " << name << " " << sha << "\n";
  for (const auto& c : trace.commands) {
    if (c.redis_time) {
      os << "@ redis " << c.time_before << " " << c.time_after << "\n";
    } else {
      os << "@ " << c.at << "\n";
    }
    os << "> " << show(c.argv) << "\n< " << show(c.reply) << "\n";
  }
  return os.str();
}

Trace parse(const std::string& text, const std::string& scenario) {
  Trace t;
  t.scenario = scenario;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  Command next;
  try {
    while (std::getline(in, line)) {
      ++number;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string word;
      words >> word;
      if (word == "script") {
        std::string name, sha;
        words >> name >> sha;
        t.scripts[name] = sha;
      } else if (word == "@") {
        next = Command{};
        std::string first;
        words >> first;
        if (first == "redis") {
          next.redis_time = true;
          words >> next.time_before >> next.time_after;
        } else {
          next.at = std::stoll(first);
        }
      } else if (word == ">") {
        std::size_t pos = 2;
        for (skip_spaces(line, pos); pos < line.size(); skip_spaces(line, pos)) next.argv.push_back(unquote(line, pos));
      } else if (word == "<") {
        std::size_t pos = 2;
        next.reply = read_reply(line, pos);
        t.commands.push_back(next);
        next.argv.clear();
      } else {
        throw std::runtime_error("unknown line");
      }
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(scenario + ".trace line " + std::to_string(number) + ": " + e.what());
  }
  return t;
}

std::vector<std::string> replay(const Trace& trace) {
  auto clock = std::make_shared<redlimit::ManualClock>();
  redlimit::MemoryConnection memory(clock);
  const std::int64_t tol = tolerance(trace);
  std::vector<std::string> diffs;
  for (std::size_t i = 0; i < trace.commands.size(); ++i) {
    const Command& c = trace.commands[i];
    clock->set(redlimit::Micros{c.redis_time ? c.time_before : c.at});
    const Reply got = memory.command(c.argv);
    const int width = decision_width(c, trace.scripts);
    if (!same(c.reply, got, width, c.redis_time ? tol : -1, decision_limit(c, trace.scripts))) {
      diffs.push_back(trace.scenario + " command " + std::to_string(i + 1) + ": " + show(c.argv) +
                      "\n  Redis answered  " + show(c.reply) + "\n  memory answered " + show(got));
    }
  }
  return diffs;
}

std::vector<std::string> compare(const Trace& expected, const Trace& actual) {
  std::vector<std::string> diffs;
  if (expected.commands.size() != actual.commands.size()) {
    diffs.push_back(expected.scenario + ": " + std::to_string(actual.commands.size()) + " commands now, " +
                    std::to_string(expected.commands.size()) + " in the trace");
  }
  // Under Redis TIME the two recordings ran at different hours: only what does not depend on the
  // server's clock can match (replay() checks the time fields of each against the memory backend).
  const std::int64_t tol = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < std::min(expected.commands.size(), actual.commands.size()); ++i) {
    const Command& a = expected.commands[i];
    const Command& b = actual.commands[i];
    const int width = decision_width(a, expected.scripts);
    if (a.argv != b.argv || a.redis_time != b.redis_time || (!a.redis_time && a.at != b.at) ||
        !same(a.reply, b.reply, width, a.redis_time ? tol : -1, decision_limit(a, expected.scripts))) {
      diffs.push_back(expected.scenario + " command " + std::to_string(i + 1) + ":\n  trace: " + show(a.argv) +
                      " -> " + show(a.reply) + "\n  now:   " + show(b.argv) + " -> " + show(b.reply));
      if (diffs.size() > 10) break;
    }
  }
  return diffs;
}

}  // namespace redlimit_golden
