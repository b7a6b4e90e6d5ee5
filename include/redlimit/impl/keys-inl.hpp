#pragma once
// Bodies of redlimit/detail/keys.hpp (see redlimit/detail/config.hpp: compiled once in src/redlimit.cpp, or inline
// with REDLIMIT_HEADER_ONLY).
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

namespace keys_impl {

inline bool needs_escape(unsigned char c) {
  return c == '%' || c == '{' || c == '}' || c == ':' || c == '|' || c < 0x20 || c == 0x7f;
}

// escape_key_part(raw), appended to `out`: the runs that need no escape are copied whole (a key is
// built twice per request, and most subjects need no escape at all).
REDLIMIT_INLINE void append_escaped(std::string& out, std::string_view raw) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::size_t run = 0;  // start of the run not yet copied
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (!needs_escape(c)) continue;
    out.append(raw.data() + run, i - run);
    const char esc[3] = {'%', kHex[c >> 4], kHex[c & 0xf]};
    out.append(esc, 3);
    run = i + 1;
  }
  out.append(raw.data() + run, raw.size() - run);
}

}  // namespace keys_impl

REDLIMIT_INLINE std::string escape_key_part(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() + 8);
  keys_impl::append_escaped(out, raw);
  return out;
}

REDLIMIT_INLINE void check_subject(std::string_view subject) {
  if (subject.empty()) throw InvalidArgument("subject must not be empty");
  if (subject.size() > kMaxSubjectBytes) {
    throw InvalidArgument(
        detail::message("subject is {} bytes; at most {} are accepted", subject.size(), kMaxSubjectBytes));
  }
}

REDLIMIT_INLINE void check_resource(std::string_view resource) {
  if (resource.empty()) throw InvalidArgument("resource name must not be empty");
  if (resource.size() > kMaxResourceBytes) {
    throw InvalidArgument(
        detail::message("resource name is {} bytes; at most {} are accepted", resource.size(), kMaxResourceBytes));
  }
}

REDLIMIT_INLINE void check_prefix(std::string_view prefix) {
  if (prefix.find_first_of("{}") != std::string_view::npos) {
    throw InvalidArgument("key prefix must not contain '{' or '}': redlimit owns the hash tag");
  }
  if (prefix.size() > kMaxPrefixBytes) {
    throw InvalidArgument(detail::message("key prefix is {} bytes; at most {}", prefix.size(), kMaxPrefixBytes));
  }
}

REDLIMIT_INLINE std::string make_key(std::string_view prefix, std::string_view resource, std::string_view subject,
                                     std::string_view kind) {
  std::string key;
  key.reserve(prefix.size() + resource.size() + subject.size() + kind.size() + 8);
  key.append(prefix);
  key += '{';
  keys_impl::append_escaped(key, resource);
  key += '|';
  keys_impl::append_escaped(key, subject);
  key += "}:";
  key.append(kind);
  return key;
}

namespace keys_impl {

// CRC16-CCITT (XMODEM), the checksum Redis Cluster uses for slots, a byte at a time from a table
// built at compile time: a cluster hashes each request's key to route it (and to find its breaker),
// and a bit at a time took about 1,400 instructions a key there.
struct Crc16Table {
  std::uint16_t entry[256] = {};
  constexpr Crc16Table() {
    for (int byte = 0; byte < 256; ++byte) {
      auto crc = static_cast<std::uint16_t>(byte << 8);
      for (int bit = 0; bit < 8; ++bit) {
        crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : static_cast<std::uint16_t>(crc << 1);
      }
      entry[byte] = crc;
    }
  }
};

inline constexpr Crc16Table kCrc16{};

REDLIMIT_INLINE std::uint16_t crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (char ch : data) {
    const auto index = static_cast<unsigned>((crc >> 8) ^ static_cast<unsigned char>(ch));
    crc = static_cast<std::uint16_t>((crc << 8) ^ kCrc16.entry[index]);
  }
  return crc;
}

}  // namespace keys_impl

REDLIMIT_INLINE std::uint16_t key_slot(std::string_view key) {
  // Redis hashes only the part between the first '{' and the next '}', if that part is non-empty.
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(keys_impl::crc16(key) & 16383);
}

}  // namespace redlimit::detail
