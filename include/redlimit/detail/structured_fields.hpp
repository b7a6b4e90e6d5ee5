#pragma once
// The few pieces of HTTP Structured Fields (RFC 9651, formerly 8941) that redlimit/http.hpp writes:
// sf-string, sf-binary, sf-integer and delta seconds. Header-only and self-contained: a field value
// must be checked here, because a byte the grammar forbids (a CR, an LF) in a header is a response
// splitting hole, not a cosmetic bug.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "redlimit/errors.hpp"

namespace redlimit::detail::sf {

// sf-integer allows at most 15 digits.
inline constexpr std::int64_t kMaxInteger = 999'999'999'999'999;

// A non-negative sf-integer, or InvalidArgument naming `what`.
inline std::string integer(std::int64_t v, std::string_view what) {
  if (v < 0) throw InvalidArgument(std::string(what) + " must not be negative, got " + std::to_string(v));
  if (v > kMaxInteger) {
    throw InvalidArgument(std::string(what) + " does not fit a structured-field integer (15 digits): " +
                          std::to_string(v));
  }
  return std::to_string(v);
}

// Whole seconds, rounded up: a client told 0 for a 600 ms wait would come back too early.
inline std::int64_t seconds_up(std::chrono::microseconds d, std::string_view what) {
  if (d.count() < 0) {
    throw InvalidArgument(std::string(what) + " must not be negative, got " + std::to_string(d.count()) + "us");
  }
  return d.count() / 1'000'000 + (d.count() % 1'000'000 != 0 ? 1 : 0);
}

// sf-string: DQUOTE, printable ASCII with '\' and '"' escaped, DQUOTE. Anything else (control bytes,
// DEL, UTF-8) has no spelling in an sf-string: InvalidArgument naming the offending byte.
inline std::string string(std::string_view s, std::string_view what) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c > 0x7e) {
      static constexpr char kHex[] = "0123456789abcdef";
      throw InvalidArgument(std::string(what) + " must be printable ASCII (a structured-field string): byte 0x" +
                            kHex[c >> 4] + kHex[c & 15] + " at position " + std::to_string(i));
    }
    if (c == '\\' || c == '"') out += '\\';
    out += static_cast<char>(c);
  }
  out += '"';
  return out;
}

// sf-binary: ':' base64 (RFC 4648, with padding) ':'. Any bytes.
inline std::string binary(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out = ":";
  out.reserve(2 + (bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
                            static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                            static_cast<unsigned char>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 63];
  }
  const std::size_t left = bytes.size() - i;
  if (left > 0) {
    std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (left == 2) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  out += ':';
  return out;
}

}  // namespace redlimit::detail::sf
