// The key builder on arbitrary (prefix, resource, subject, kind). Checked:
//  - check_prefix / check_resource / check_subject reject exactly what keys.hpp says they reject;
//  - a key is prefix + "{" + escape(resource) + "|" + escape(subject) + "}:" + kind, with exactly one
//    '{' and one '}' (the hash tag cannot be closed early or forged);
//  - escape_key_part's output holds no structural byte, every '%' starts a %XX escape, and it
//    decodes back to its input (so it is injective: escape(a) == escape(b) implies a == b);
//  - key_slot(key) is the CRC16 slot of the tag alone (checked against the independent CRC16 of
//    fuzz_check.hpp), so every key of one (resource, subject) lands in one cluster slot;
//  - keys of different (resource, subject) pairs differ, e.g. ("a:b", "c") vs ("a", "b:c").
//
// Input layout (FuzzedDataProvider): prefix, resource, subject as backslash-terminated strings
// ("\\\\" is a literal backslash), the rest of the bytes as a second subject; the kind is chosen
// by the last byte.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/errors.hpp"

namespace {

namespace d = redlimit::detail;

bool structural(unsigned char c) {
  return c == '%' || c == '{' || c == '}' || c == ':' || c == '|' || c < 0x20 || c == 0x7f;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // escape_key_part writes upper case only
}

std::string unescape_checked(std::string_view escaped) {
  std::string out;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    const auto c = static_cast<unsigned char>(escaped[i]);
    if (c != '%') {
      FUZZ_CHECK(!structural(c), "escaped text holds structural byte 0x%02x", c);
      out += escaped[i];
      continue;
    }
    FUZZ_CHECK(i + 2 < escaped.size() && hex(escaped[i + 1]) >= 0 && hex(escaped[i + 2]) >= 0,
               "'%%' at %zu does not start a %%XX escape", i);
    const auto decoded = static_cast<unsigned char>(hex(escaped[i + 1]) * 16 + hex(escaped[i + 2]));
    FUZZ_CHECK(structural(decoded), "byte 0x%02x escaped needlessly", decoded);
    out += static_cast<char>(decoded);
    i += 2;
  }
  return out;
}

std::string escape_checked(std::string_view raw) {
  const std::string e = d::escape_key_part(raw);
  FUZZ_CHECK(unescape_checked(e) == raw, "escape_key_part does not decode back to its input");
  return e;
}

template <typename F>
bool accepted(F&& check) {
  try {
    check();
    return true;
  } catch (const redlimit::InvalidArgument&) {
    return false;
  }
}

std::size_t count(std::string_view s, char c) {
  std::size_t n = 0;
  for (char x : s) n += x == c;
  return n;
}

}  // namespace

// One fuzz input runs every property in turn (injectivity, one slot per subject, escaping): a single
// entry point is what libFuzzer calls.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static constexpr const char* kKinds[] = {"fw", "sl", "sw", "tb", "lb", "pol", "blk"};
  static const bool vectors_ok = [] {
    // Published CRC16/XMODEM check value and slots from the Redis Cluster spec.
    FUZZ_CHECK(crc16_ref("123456789") == 0x31c3, "reference CRC16 is wrong");
    FUZZ_CHECK(d::key_slot("123456789") == (0x31c3 & 0x3fff), "key_slot(\"123456789\")");
    FUZZ_CHECK(d::key_slot("{user1000}.following") == d::key_slot("user1000"), "hash tag ignored");
    FUZZ_CHECK(d::key_slot("foo{}{bar}") == slot_ref("foo{}{bar}"), "empty tag");
    return true;
  }();
  (void)vectors_ok;

  FuzzedDataProvider in(data, size);
  const std::string kind = kKinds[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kKinds) - 1)];
  const std::string prefix = in.ConsumeRandomLengthString(100);
  const std::string resource = in.ConsumeRandomLengthString(300);
  const std::string subject = in.ConsumeRandomLengthString(1100);
  const std::string subject2 = in.ConsumeRemainingBytesAsString();

  // The checks reject exactly what the header documents.
  const bool prefix_ok = accepted([&] { d::check_prefix(prefix); });
  FUZZ_CHECK(prefix_ok == (prefix.find_first_of("{}") == std::string::npos && prefix.size() <= d::kMaxPrefixBytes),
             "check_prefix wrong for a %zu-byte prefix", prefix.size());
  const bool resource_ok = accepted([&] { d::check_resource(resource); });
  FUZZ_CHECK(resource_ok == (!resource.empty() && resource.size() <= d::kMaxResourceBytes),
             "check_resource wrong for %zu bytes", resource.size());
  const bool subject_ok = accepted([&] { d::check_subject(subject); });
  FUZZ_CHECK(subject_ok == (!subject.empty() && subject.size() <= d::kMaxSubjectBytes),
             "check_subject wrong for %zu bytes", subject.size());

  // Escaping is checked on everything, accepted or not.
  const std::string er = escape_checked(resource), es = escape_checked(subject), es2 = escape_checked(subject2);
  if ((es == es2) != (subject == subject2)) FUZZ_CHECK(false, "escape_key_part is not injective");

  // key_slot against Redis's algorithm on arbitrary bytes.
  FUZZ_CHECK(d::key_slot(subject2) == slot_ref(subject2), "key_slot differs from Redis on %zu bytes",
             subject2.size());

  if (!prefix_ok || !resource_ok || !subject_ok) return 0;

  const std::string key = d::make_key(prefix, resource, subject, kind);
  const std::string tag = "{" + er + "|" + es + "}";
  FUZZ_CHECK(key == prefix + tag + ":" + kind, "unexpected key layout");
  FUZZ_CHECK(count(key, '{') == 1 && count(key, '}') == 1, "key holds more than one brace pair");
  FUZZ_CHECK(key.find('{') == prefix.size(), "hash tag does not open right after the prefix");
  FUZZ_CHECK(key.find('|', prefix.size()) == prefix.size() + 1 + er.size(), "separator not where expected");
  const std::uint16_t slot = d::key_slot(key);
  FUZZ_CHECK(slot == d::key_slot(tag) && slot == slot_ref(tag) && slot == (crc16_ref(er + "|" + es) & 0x3fff),
             "key and tag in different slots");
  FUZZ_CHECK(slot == d::key_slot(d::make_key(prefix, resource, subject, "blk")), "kinds in different slots");
  FUZZ_CHECK(slot == d::key_slot(d::make_key("", resource, subject, kind)), "prefix moves the slot");

  // Colliding-looking pairs: moving bytes between resource and subject changes the key.
  if (subject.size() > 1) {
    const std::string k2 = d::make_key(prefix, resource + subject.substr(0, 1), subject.substr(1), kind);
    FUZZ_CHECK(k2 != key, "(r + s[0], s[1:]) has the same key as (r, s)");
    const std::string k3 = d::make_key(prefix, resource + "|" + subject.substr(0, 1), subject.substr(1), kind);
    FUZZ_CHECK(k3 != key, "a '|' in the resource forges another pair's key");
  }
  if (!subject2.empty() && subject2.size() <= d::kMaxSubjectBytes) {
    const std::string other = d::make_key(prefix, resource, subject2, kind);
    FUZZ_CHECK((other == key) == (subject2 == subject), "two subjects, %s keys",
               subject2 == subject ? "different" : "equal");
  }
  return 0;
}
