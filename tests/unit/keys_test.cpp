// Key layout <prefix>{<resource>|<subject>}:<kind>: escaping, hash tags, cluster slots, size limits.
#include "redlimit/detail/keys.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/errors.hpp"

namespace {

using redlimit::InvalidArgument;
using redlimit::detail::check_prefix;
using redlimit::detail::check_resource;
using redlimit::detail::check_subject;
using redlimit::detail::escape_key_part;
using redlimit::detail::key_slot;
using redlimit::detail::make_key;
using namespace std::string_literals;

// Reference percent-decoder: escaping is injective iff decoding it gives the input back.
std::string percent_decode(const std::string& s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) {
        ADD_FAILURE() << "truncated escape in \"" << s << "\"";
        return out;
      }
      const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
      if (hi < 0 || lo < 0) {
        ADD_FAILURE() << "bad escape in \"" << s << "\"";
        return out;
      }
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Independent CRC16-CCITT (XMODEM) as in the Redis Cluster specification, checked below against
// the specification's own test vector.
std::uint16_t ref_crc16(const std::string& data) {
  std::uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<std::uint16_t>(byte << 8);
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

bool has_structural_byte(const std::string& s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '{' || c == '}' || c == ':' || c == '|' || c < 0x20) return true;
  }
  return false;
}

// Subjects and resources chosen to collide under any naive key scheme.
const std::vector<std::pair<std::string, std::string>>& tricky_pairs() {
  static const std::vector<std::pair<std::string, std::string>> pairs = {
      {"a:b", "c"},        {"a", "b:c"},          {"a|b", "c"},         {"a", "b|c"},
      {"a%7Cb", "c"},      {"a%7cb", "c"},        {"a", "b%7Cc"},       {"a%3Ab", "c"},
      {"a%", "b"},         {"a", "%b"},           {"a%25", "b"},        {"a", "%25b"},
      {"a}", "b"},         {"a", "}b"},           {"a{", "b"},          {"a", "{b"},
      {"a", "b}:fw"},      {"a", "b}:sw"},        {"a}|{b", "c"},       {"a", "}|{b"},
      {"a\0b"s, "c"},      {"a", "b\0c"s},        {"a", "b\0"s},        {"a\0"s, "b"},
      {"a", "\0"s},        {"a", "\0\0"s},        {"a", "%00"},         {"a", "\n"},
      {"a\xff", "b"},      {"a", "\xff" "b"},     {"a\xc3", "\xa9"},   {"a", "\xc3\xa9"},
      {"a", "\xc0\xaf"},   {"a", "\xed\xa0\x80"}, {"a", "\xfe\xff"},    {"a", "user-42"},
      {"a", "user-42 "},   {"a", " user-42"},     {"a", "USER-42"},     {"a:", "b"},
      {"a", ":b"},         {"a", "b"},            {"ab", ""s + "x"},    {"a", "bx"},
  };
  return pairs;
}

// ---- escape_key_part ---------------------------------------------------------------------------

TEST(KeysTest, PlainTextIsNotEscaped) {
  EXPECT_EQ(escape_key_part("user-42"), "user-42");
  EXPECT_EQ(escape_key_part("api.v1_login"), "api.v1_login");
  EXPECT_EQ(escape_key_part(""), "");
}

TEST(KeysTest, StructuralBytesArePercentEscaped) {
  for (const char c : {'%', '{', '}', ':', '|', '\0', '\n', '\x1f'}) {
    const std::string raw(1, c);
    const std::string esc = escape_key_part(raw);
    SCOPED_TRACE(static_cast<int>(static_cast<unsigned char>(c)));
    ASSERT_EQ(esc.size(), 3u);
    EXPECT_EQ(esc[0], '%');
    EXPECT_EQ(percent_decode(esc), raw);
  }
}

TEST(KeysTest, EveryByteRoundTripsAndNoStructuralByteSurvives) {
  for (int b = 0; b < 256; ++b) {
    const std::string raw = "x"s + static_cast<char>(b) + "y";
    const std::string esc = escape_key_part(raw);
    SCOPED_TRACE(b);
    EXPECT_FALSE(has_structural_byte(esc)) << esc;
    EXPECT_EQ(percent_decode(esc), raw);
  }
}

TEST(KeysTest, EscapingIsInjectiveOnRandomBinaryStrings) {
  std::mt19937 rng(12345);
  // Small alphabet rich in structural bytes so that near-collisions are frequent.
  const std::string alphabet = "a%{}:|\0\x01\xff\xc3" "7C"s;
  std::set<std::string> raws, escaped;
  for (int i = 0; i < 5000; ++i) {
    std::string raw;
    const int len = static_cast<int>(rng() % 8);
    for (int j = 0; j < len; ++j) raw += alphabet[rng() % alphabet.size()];
    const std::string esc = escape_key_part(raw);
    ASSERT_FALSE(has_structural_byte(esc)) << esc;
    ASSERT_EQ(percent_decode(esc), raw);
    raws.insert(raw);
    escaped.insert(esc);
  }
  EXPECT_EQ(raws.size(), escaped.size());
}

// ---- make_key ----------------------------------------------------------------------------------

TEST(KeysTest, DocumentedLayout) {
  EXPECT_EQ(make_key("redlimit:", "api", "user-42", "fw"), "redlimit:{api|user-42}:fw");
  EXPECT_EQ(make_key("", "login", "10.0.0.1", "sw"), "{login|10.0.0.1}:sw");
}

TEST(KeysTest, EscapedPartsInsideTheTag) {
  EXPECT_EQ(make_key("p:", "a:b", "c}d", "tb"),
            "p:{" + escape_key_part("a:b") + "|" + escape_key_part("c}d") + "}:tb");
}

TEST(KeysTest, DistinctResourceSubjectPairsNeverShareAKey) {
  std::set<std::string> keys;
  for (const auto& [resource, subject] : tricky_pairs()) keys.insert(make_key("rl:", resource, subject, "fw"));
  EXPECT_EQ(keys.size(), tricky_pairs().size());
  EXPECT_NE(make_key("rl:", "a:b", "c", "fw"), make_key("rl:", "a", "b:c", "fw"));
  EXPECT_NE(make_key("rl:", "a|b", "c", "fw"), make_key("rl:", "a", "b|c", "fw"));
}

TEST(KeysTest, DistinctKindsNeverShareAKey) {
  std::set<std::string> keys;
  for (const char* kind : {"fw", "sl", "sw", "tb", "lb", "pol"}) keys.insert(make_key("rl:", "api", "u", kind));
  EXPECT_EQ(keys.size(), 6u);
}

TEST(KeysTest, OneHashTagWrappingResourceAndSubject) {
  for (const auto& [resource, subject] : tricky_pairs()) {
    const std::string key = make_key("rl:", resource, subject, "sw");
    SCOPED_TRACE(key);
    // Exactly one '{' ...
    ASSERT_EQ(std::count(key.begin(), key.end(), '{'), 1);
    const std::size_t open = key.find('{');
    EXPECT_EQ(key.substr(0, open), "rl:");
    // ... and the first '}' after it closes the tag, right before ":<kind>".
    const std::size_t close = key.find('}', open + 1);
    ASSERT_NE(close, std::string::npos);
    EXPECT_EQ(key.substr(close), "}:sw");
    EXPECT_EQ(std::count(key.begin(), key.end(), '}'), 1);
    // The tag is exactly escaped resource | escaped subject, and decodes back to them.
    const std::string tag = key.substr(open + 1, close - open - 1);
    const std::size_t bar = tag.find('|');
    ASSERT_NE(bar, std::string::npos);
    EXPECT_EQ(tag.find('|', bar + 1), std::string::npos);
    EXPECT_EQ(percent_decode(tag.substr(0, bar)), resource);
    EXPECT_EQ(percent_decode(tag.substr(bar + 1)), subject);
  }
}

TEST(KeysTest, AllKeysOfOnePairShareASlotWhateverThePrefixOrKind) {
  for (const auto& [resource, subject] : tricky_pairs()) {
    const std::uint16_t slot = key_slot(make_key("redlimit:", resource, subject, "fw"));
    for (const char* kind : {"sl", "sw", "tb", "lb", "pol"}) {
      EXPECT_EQ(key_slot(make_key("redlimit:", resource, subject, kind)), slot);
    }
    EXPECT_EQ(key_slot(make_key("other-prefix:", resource, subject, "fw")), slot);
    EXPECT_EQ(key_slot(make_key("", resource, subject, "fw")), slot);
    // The slot is the CRC16 of the tag alone.
    const std::string tag = escape_key_part(resource) + "|" + escape_key_part(subject);
    EXPECT_EQ(slot, ref_crc16(tag) % 16384);
  }
}

// ---- key_slot ----------------------------------------------------------------------------------

TEST(KeySlotTest, ReferenceCrc16MatchesTheClusterSpecVector) {
  ASSERT_EQ(ref_crc16("123456789"), 0x31C3);
}

TEST(KeySlotTest, ClusterSpecVector) {
  EXPECT_EQ(key_slot("123456789"), 0x31C3 % 16384);
  EXPECT_EQ(key_slot("123456789"), 12739);
}

TEST(KeySlotTest, KnownSlotsFromClusterKeyslot) {
  // Values of CLUSTER KEYSLOT on a real server.
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("hello"), 866);
  EXPECT_EQ(key_slot("somekey"), 11058);
}

TEST(KeySlotTest, HashTagsShareASlot) {
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
  EXPECT_EQ(key_slot("x{bar}"), key_slot("bar"));
}

TEST(KeySlotTest, EmptyTagHashesTheWholeKey) {
  EXPECT_EQ(key_slot("foo{}{bar}"), ref_crc16("foo{}{bar}") % 16384);
  EXPECT_EQ(key_slot("{}"), ref_crc16("{}") % 16384);
}

TEST(KeySlotTest, FirstOpeningBraceAndNextClosingBraceDelimitTheTag) {
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
  EXPECT_EQ(key_slot("foo{{bar}}zap"), ref_crc16("{bar") % 16384);
}

TEST(KeySlotTest, UnclosedBraceHashesTheWholeKey) {
  EXPECT_EQ(key_slot("foo{bar"), ref_crc16("foo{bar") % 16384);
  EXPECT_EQ(key_slot("}foo{"), ref_crc16("}foo{") % 16384);
}

TEST(KeySlotTest, BinaryKeysAndRange) {
  const std::string key = "a\0b\xff"s;
  EXPECT_EQ(key_slot(key), ref_crc16(key) % 16384);
  EXPECT_EQ(key_slot(""), 0);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(key_slot("key:" + std::to_string(i)), 16384);
}

// ---- size and character limits -----------------------------------------------------------------

TEST(KeysTest, SubjectLength) {
  EXPECT_NO_THROW(check_subject("x"));
  EXPECT_NO_THROW(check_subject(std::string(1024, 'x')));
  EXPECT_THROW(check_subject(std::string(1025, 'x')), InvalidArgument);
  EXPECT_THROW(check_subject(""), InvalidArgument);
}

TEST(KeysTest, SubjectMayHoldAnyBytes) {
  EXPECT_NO_THROW(check_subject("a:b{c}d|e%f"));
  EXPECT_NO_THROW(check_subject("\0"s));
  EXPECT_NO_THROW(check_subject("\xff\xfe"));
  EXPECT_NO_THROW(check_subject(std::string(1024, '\0')));
  EXPECT_NO_THROW(check_subject(std::string(1024, '{')));
}

TEST(KeysTest, ResourceLength) {
  EXPECT_NO_THROW(check_resource("api"));
  EXPECT_NO_THROW(check_resource(std::string(redlimit::detail::kMaxResourceBytes, 'r')));
  EXPECT_THROW(check_resource(std::string(redlimit::detail::kMaxResourceBytes + 1, 'r')), InvalidArgument);
  EXPECT_THROW(check_resource(""), InvalidArgument);
}

TEST(KeysTest, PrefixRules) {
  EXPECT_NO_THROW(check_prefix("redlimit:"));
  EXPECT_NO_THROW(check_prefix(""));
  EXPECT_NO_THROW(check_prefix("app:rl:"));
  EXPECT_NO_THROW(check_prefix(std::string(redlimit::detail::kMaxPrefixBytes, 'p')));
  EXPECT_THROW(check_prefix(std::string(redlimit::detail::kMaxPrefixBytes + 1, 'p')), InvalidArgument);
  EXPECT_THROW(check_prefix("{"), InvalidArgument);
  EXPECT_THROW(check_prefix("}"), InvalidArgument);
  EXPECT_THROW(check_prefix("app{x}:"), InvalidArgument);
  EXPECT_THROW(check_prefix("app}:"), InvalidArgument);
}

}  // namespace
