// The in-memory backend's scripts by name: lookup by SHA1 or source, how many keys a request
// sends, and how the prologue reads `now` and the scripts read a number (memory_scripts.hpp).
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "memory_scripts.hpp"
#include "redlimit/detail/scripts.hpp"
#include "twins.hpp"

namespace redlimit::detail::memory {

bool parse_int(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}

std::optional<std::int64_t> decimal_in(std::string_view s, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos || !parse_int(s, v) || v < lo ||
      v > hi) {
    return std::nullopt;
  }
  return v;
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

}  // namespace

std::optional<ScriptId> script_by_sha1(std::string_view sha1) {
  for (const auto& k : kKnown) {  // the client sends lowercase: one memcmp a script, most of the time
    if (k.script().sha1 == sha1 || k.script().legacy_sha1 == sha1) return k.id;
  }
  for (const auto& k : kKnown) {
    if (equal_hex_nocase(k.script().sha1, sha1) || equal_hex_nocase(k.script().legacy_sha1, sha1)) return k.id;
  }
  return std::nullopt;
}

std::optional<ScriptId> script_by_source(std::string_view source) {
  for (const auto& k : kKnown) {
    if (k.script().source == source || k.script().legacy_source == source) return k.id;
  }
  return std::nullopt;
}

std::string_view script_name(ScriptId id) {
  for (const auto& k : kKnown) {
    if (k.id == id) return k.script().name;
  }
  return "unknown";
}

// The client's rule (scripts::keys_per_request) by script id, not through it: that one tells the
// scripts apart by address, and this library is built with REDLIMIT_HEADER_ONLY (CMakeLists.txt,
// redlimit_transports), so its Script objects need not be the compiled core's.
std::size_t keys_per_request(ScriptId id) { return id == ScriptId::block ? 2 : 1; }

std::optional<std::int64_t> script_now(std::string_view argv1, std::int64_t clock_now) {
  if (argv1 == "redis") return clock_now;
  // Lua 5.1's reading of a string in arithmetic (luaO_str2d), which `ARGV[1] + 0` runs: strtod,
  // strtoul for a hexadecimal tail, then nothing but white space. It stops at a NUL, as this copy's
  // c_str() does.
  const std::string s(argv1);
  const char* begin = s.c_str();
  char* end = nullptr;
  double v = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  if (*end == 'x' || *end == 'X') v = static_cast<double>(std::strtoul(begin, &end, 16));
  while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (*end != '\0') return std::nullopt;
  // The prologue's range: NaN fails the first comparison.
  if (!(v >= 0 && v < static_cast<double>(kMaxNow)) || v != std::floor(v)) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

}  // namespace redlimit::detail::memory
