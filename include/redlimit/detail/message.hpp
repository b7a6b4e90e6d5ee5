#pragma once
// Error messages without a formatting library: public headers (and, in header-only mode, the core's
// bodies) must not need fmt. message("cost must be in [1, {}], got {}", most, cost) replaces each
// "{}" in turn by the next argument: integers in decimal, strings as they are. Nothing else.
#include <string>
#include <string_view>
#include <type_traits>

namespace redlimit::detail {

inline void append_piece(std::string& out, std::string_view s) { out.append(s); }
inline void append_piece(std::string& out, const char* s) { out.append(s); }
inline void append_piece(std::string& out, const std::string& s) { out.append(s); }
inline void append_piece(std::string& out, char c) { out.push_back(c); }
template <typename T,
          std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, char> && !std::is_same_v<T, bool>, int> = 0>
void append_piece(std::string& out, T v) {
  out += std::to_string(v);
}

// `raw` safe to quote in a message: bytes below 0x20, 0x7f and above, and the backslash are
// written as \xNN (a NUL would cut what() short; control bytes could forge log lines).
inline std::string printable(std::string_view raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size());
  for (char ch : raw) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f || c == '\\') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

template <typename... Args>
std::string message(std::string_view pattern, const Args&... args) {
  std::string out;
  out.reserve(pattern.size() + 16 * sizeof...(Args));
  std::size_t pos = 0;
  const auto next = [&](const auto& arg) {
    const std::size_t at = pattern.find("{}", pos);
    if (at == std::string_view::npos) return;  // more arguments than holes: the rest are dropped
    out.append(pattern.substr(pos, at - pos));
    append_piece(out, arg);
    pos = at + 2;
  };
  (void)next;  // no arguments: nothing to replace
  (next(args), ...);
  out.append(pattern.substr(pos));
  return out;
}

}  // namespace redlimit::detail
