#pragma once
// FUZZ_CHECK: an invariant that must hold for every input. Unlike assert() it survives NDEBUG
// (the fuzz build is RelWithDebInfo); a failure prints the condition and aborts, which libFuzzer
// reports as a crash and saves the input as a reproducer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define FUZZ_CHECK(cond, ...)                                                          \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n  ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                               \
      std::fprintf(stderr, "\n");                                                      \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

// Reference implementations the key and routing fuzzers check the library against, written from
// the specification rather than shared with src/.

// Bitwise CRC16-CCITT/XMODEM, written from the polynomial; Redis Cluster's slot function.
inline std::uint16_t crc16_ref(std::string_view s) {
  unsigned crc = 0;
  for (unsigned char c : s) {
    for (int bit = 7; bit >= 0; --bit) {
      const bool in = ((c >> bit) & 1) != 0;
      const bool top = (crc & 0x8000) != 0;
      crc = (crc << 1) & 0xffff;
      if (in != top) crc ^= 0x1021;
    }
  }
  return static_cast<std::uint16_t>(crc);
}

// Redis's keyHashSlot (cluster.c), transcribed: the CRC16 of the first non-empty {...} tag, else
// of the whole key, modulo 16384.
inline int slot_ref(std::string_view key) {
  std::size_t s = 0;
  for (; s < key.size(); ++s)
    if (key[s] == '{') break;
  if (s == key.size()) return crc16_ref(key) & 0x3fff;
  std::size_t e = s + 1;
  for (; e < key.size(); ++e)
    if (key[e] == '}') break;
  if (e == key.size() || e == s + 1) return crc16_ref(key) & 0x3fff;
  return crc16_ref(key.substr(s + 1, e - s - 1)) & 0x3fff;
}
