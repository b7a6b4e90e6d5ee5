// sha1_hex: FIPS 180 test vectors, padding boundaries, and the digests the scripts are known by.
#include "redlimit/detail/sha1.hpp"

#include <gtest/gtest.h>

#include <string>

#include "redlimit/detail/scripts.hpp"

namespace {

using redlimit::detail::sha1_hex;
using namespace std::string_literals;

TEST(Sha1Test, EmptyString) { EXPECT_EQ(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709"); }

TEST(Sha1Test, Abc) { EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d"); }

TEST(Sha1Test, TwoBlockMessage) {
  EXPECT_EQ(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

TEST(Sha1Test, MillionAs) {
  EXPECT_EQ(sha1_hex(std::string(1'000'000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST(Sha1Test, QuickBrownFox) {
  EXPECT_EQ(sha1_hex("The quick brown fox jumps over the lazy dog"), "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12");
}

TEST(Sha1Test, BinaryInputWithNul) { EXPECT_EQ(sha1_hex("a\0b"s), "4a3dec2d1f8245280855c42db0ee4239f917fdb8"); }

// Messages around the 55/56/64-byte padding edges; bytes (i*7+3) mod 256, digests from Python's hashlib.
TEST(Sha1Test, PaddingBoundaries) {
  const std::pair<int, const char*> vectors[] = {
      {55, "ddf57317ef34bfee3b6df83d359098930eb278bc"},  {56, "a0d492bb0fc889d0eca3bc137066ab6f4f74f369"},
      {57, "11a02dcf95859677a62e75024067c22b165d890f"},  {63, "c55856749bef509bdfe6bfebfc7bf4e793e82132"},
      {64, "bede92be29c3874e1b54ddc77988d606fc857a8e"},  {65, "b05a80522b053d6dc7e0a517d0e70212c7dad11f"},
      {119, "504e27376a6e0f0dba8295b85cb25dc4dfa17d23"}, {120, "82134b02fb3f702491be9bed581eeab59334acb2"},
      {127, "34d5e582029e9b9b85b2febe31da3db7cdabaaea"}, {128, "a09133e6730ffe899efb70204cb5646cd5dc24ee"},
      {129, "808aea332ce367541d37adae7f94e59c5c1a934e"},
  };
  for (const auto& [len, digest] : vectors) {
    std::string data;
    for (int i = 0; i < len; ++i) data += static_cast<char>((i * 7 + 3) % 256);
    EXPECT_EQ(sha1_hex(data), digest) << "length " << len;
  }
}

TEST(Sha1Test, DigestIsFortyLowercaseHexDigits) {
  for (const std::string& s : {"x"s, "hello world"s, std::string(1000, '\xff')}) {
    const std::string d = sha1_hex(s);
    ASSERT_EQ(d.size(), 40u);
    for (char c : d) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << d;
  }
}

TEST(Sha1Test, ScriptsAreNamedBySha1OfTheirSource) {
  namespace s = redlimit::detail::scripts;
  for (const redlimit::detail::Script* script :
       {&s::fixed_window(), &s::sliding_log(), &s::policy(), &s::token_bucket(), &s::leaky_bucket(), &s::block()}) {
    SCOPED_TRACE(std::string(script->name));
    EXPECT_FALSE(script->source.empty());
    EXPECT_EQ(script->sha1, sha1_hex(script->source));
  }
}

}  // namespace
