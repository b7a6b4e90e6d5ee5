#pragma once
// Bodies of redlimit/detail/scripts.hpp (see redlimit/detail/config.hpp: compiled once in src/redlimit.cpp, or inline
// with REDLIMIT_HEADER_ONLY).
#include <charconv>
#include <cstring>

#include "redlimit/detail/config.hpp"
#include "redlimit/detail/lua_sources.hpp"  // generated from lua/*.lua (cmake/embed_lua.cmake)

namespace redlimit::detail::scripts {

#define REDLIMIT_SCRIPT(name)                     \
  REDLIMIT_INLINE const Script& name() {          \
    static const Script script(#name, lua::name, lua::name##_function, lua::name##_spread_function); \
    return script;                                \
  }
REDLIMIT_SCRIPT(fixed_window)
REDLIMIT_SCRIPT(sliding_log)
REDLIMIT_SCRIPT(policy)
REDLIMIT_SCRIPT(token_bucket)
REDLIMIT_SCRIPT(leaky_bucket)
REDLIMIT_SCRIPT(block)
#undef REDLIMIT_SCRIPT

REDLIMIT_INLINE const char* block_holder(const Script& script) {
  if (&script == &token_bucket() || &script == &leaky_bucket()) return "1";
  if (&script == &fixed_window()) return "3";
  if (&script == &sliding_log()) return "4";
  return &script == &policy() ? "2" : "0";
}

REDLIMIT_INLINE std::size_t keys_per_request(const Script& script) { return &script == &block() ? 2 : 1; }

REDLIMIT_INLINE std::string params_arg(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

REDLIMIT_INLINE std::string head(const char* mode, std::int64_t cost, const std::string& params) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, cost);
  (void)ec;  // an int64_t always fits in 24 characters
  std::string out;
  out.reserve(std::strlen(mode) + 2 + static_cast<std::size_t>(end - digits) + params.size());
  out += mode;
  out += ' ';
  out.append(digits, end);
  if (!params.empty()) {
    out += ' ';
    out += params;
  }
  return out;
}

REDLIMIT_INLINE std::string_view library() { return lua::library; }
REDLIMIT_INLINE std::string_view library_name() { return lua::library_name; }

}  // namespace redlimit::detail::scripts

#include "redlimit/detail/message.hpp"
#include "redlimit/detail/scripts.hpp"