#pragma once
// Bodies of redlimit/detail/sha1.hpp (see redlimit/detail/config.hpp: compiled once in src/redlimit.cpp, or inline
// with REDLIMIT_HEADER_ONLY).
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/detail/sha1.hpp"
// SHA1 (FIPS 180-1), only to name Lua scripts as Redis does: we compute the digest locally so the
// first call can be an EVALSHA without a SCRIPT LOAD round trip. Not used for anything secret.

#include <cstdint>

namespace redlimit::detail {

namespace sha1_impl {

REDLIMIT_INLINE std::uint32_t rol(std::uint32_t v, int bits) { return (v << bits) | (v >> (32 - bits)); }

REDLIMIT_INLINE void block(std::uint32_t h[5], const unsigned char* p) {
  std::uint32_t w[80];
  for (int i = 0; i < 16; ++i) {
    w[i] = (std::uint32_t{p[4 * i]} << 24) | (std::uint32_t{p[4 * i + 1]} << 16) | (std::uint32_t{p[4 * i + 2]} << 8) |
           std::uint32_t{p[4 * i + 3]};
  }
  for (int i = 16; i < 80; ++i) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; ++i) {
    std::uint32_t f, k;
    if (i < 20) {
      f = (b & c) | (~b & d);
      k = 0x5A827999;
    } else if (i < 40) {
      f = b ^ c ^ d;
      k = 0x6ED9EBA1;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8F1BBCDC;
    } else {
      f = b ^ c ^ d;
      k = 0xCA62C1D6;
    }
    const std::uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = rol(b, 30);
    b = a;
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

}  // namespace sha1_impl

REDLIMIT_INLINE std::string sha1_hex(std::string_view data) {
  std::uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) sha1_impl::block(h, bytes + i);
  // Padding: 0x80, zeros, then the bit length as a big-endian 64-bit number.
  unsigned char tail[128] = {};
  const std::size_t rest = n - i;
  for (std::size_t j = 0; j < rest; ++j) tail[j] = bytes[i + j];
  tail[rest] = 0x80;
  const std::size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
  const std::uint64_t bits = static_cast<std::uint64_t>(n) * 8;
  for (int j = 0; j < 8; ++j) tail[tail_len - 1 - j] = static_cast<unsigned char>(bits >> (8 * j));
  sha1_impl::block(h, tail);
  if (tail_len == 128) sha1_impl::block(h, tail + 64);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(40, '0');
  for (int j = 0; j < 20; ++j) {
    const auto byte = static_cast<unsigned char>(h[j / 4] >> (24 - 8 * (j % 4)));
    out[2 * j] = kHex[byte >> 4];
    out[2 * j + 1] = kHex[byte & 0xf];
  }
  return out;
}

}  // namespace redlimit::detail
