// detail::policy_pairs_of: a policy's admission packed as one integer (lua/policy.lua, packable)
// back into the pairs {remaining, reset_after} it stands for, which decode_decision reads; and what
// it refuses.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "redlimit/detail/decode.hpp"
#include "redlimit/errors.hpp"

namespace {

using redlimit::Reply;
using redlimit::ReplyError;
using redlimit::detail::policy_pairs_of;
using std::chrono::microseconds;

// 100/s, 1000/min and 10000/h in 1-minute buckets, at 2026-11-20 (whole seconds + 123,456 us).
const std::vector<std::int64_t> kLimits = {100, 1000, 10000};
const std::vector<microseconds> kWindows = {microseconds(1'000'000), microseconds(60'000'000),
                                            microseconds(3'600'000'000)};
const std::vector<microseconds> kIntervals = {microseconds(1'000'000), microseconds(60'000'000),
                                              microseconds(60'000'000)};
constexpr std::int64_t kNow = 1'795'000'000'123'456;  // 40.123456 s into its minute

std::vector<std::int64_t> integers(const Reply& r) {
  std::vector<std::int64_t> out;
  for (const auto& e : r.elements) out.push_back(e.integer);
  return out;
}

TEST(PolicyPairsTest, TheDigitsAreTheRemainingAndEachResetTheCurrentBucketsEnd) {
  const std::int64_t packed = 97 + 101 * (995 + 1001 * 9990);
  const Reply pairs = policy_pairs_of(packed, kLimits, kWindows, kIntervals, std::to_string(kNow));
  // (b + n + 1) * P - now: the second's bucket weighs through the next second; the minute's through
  // the next minute; the hour's last 1-minute bucket, this one, until 60 minutes after it ends.
  const std::vector<std::int64_t> expected = {97,   2'000'000 - 123'456,       995, 120'000'000 - 40'123'456,
                                              9990, 3'660'000'000 - 40'123'456};
  EXPECT_EQ(integers(pairs), expected);

  const redlimit::Decision d = redlimit::detail::decode_decision(pairs, kLimits, kWindows);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 97);
  EXPECT_EQ(d.limit_index, 0u);
  EXPECT_EQ(d.reset_after, microseconds(3'660'000'000 - 40'123'456));
  ASSERT_EQ(d.limits.size(), 3u);
  EXPECT_EQ(d.limits[1].window, microseconds(60'000'000));
}

TEST(PolicyPairsTest, EveryDigitAtItsTopAndAtZero) {
  const std::int64_t top = 100 + 101 * (1000 + 1001 * 10000);  // the largest: one below the radixes' product
  EXPECT_EQ(integers(policy_pairs_of(top, kLimits, kWindows, kIntervals, "0")),
            (std::vector<std::int64_t>{100, 2'000'000, 1000, 120'000'000, 10000, 3'660'000'000}));
  EXPECT_EQ(integers(policy_pairs_of(0, kLimits, kWindows, kIntervals, "59999999")),
            (std::vector<std::int64_t>{0, 1'000'001, 0, 60'000'001, 0, 3'600'000'001}));
}

TEST(PolicyPairsTest, WhatNoPolicyScriptSendsIsAReplyError) {
  const std::string now = std::to_string(kNow);
  const std::int64_t product = 101 * 1001 * 10001;
  EXPECT_THROW(policy_pairs_of(-1, kLimits, kWindows, kIntervals, now), ReplyError);
  EXPECT_THROW(policy_pairs_of(product, kLimits, kWindows, kIntervals, now), ReplyError);  // past the digits
  EXPECT_NO_THROW(policy_pairs_of(product - 1, kLimits, kWindows, kIntervals, now));
  // A call that sent no time of its own: the script read Redis TIME, which the client does not know.
  EXPECT_THROW(policy_pairs_of(5, kLimits, kWindows, kIntervals, "redis"), ReplyError);
  EXPECT_THROW(policy_pairs_of(5, kLimits, kWindows, kIntervals, "-5"), ReplyError);
  EXPECT_THROW(policy_pairs_of(5, kLimits, kWindows, kIntervals, "12x"), ReplyError);
  EXPECT_THROW(policy_pairs_of(5, kLimits, kWindows, kIntervals, ""), ReplyError);
  EXPECT_THROW(policy_pairs_of(5, kLimits, kWindows, kIntervals, "9007199254740992"), ReplyError);  // 2^53
  EXPECT_NO_THROW(policy_pairs_of(5, kLimits, kWindows, kIntervals, "9007199254740991"));
  EXPECT_THROW(policy_pairs_of(5, kLimits, kWindows, kIntervals, "9223372036856000000"), ReplyError);
  // Not a policy of several limits, or one described in part.
  EXPECT_THROW(policy_pairs_of(5, {100}, {kWindows[0]}, {kIntervals[0]}, now), ReplyError);
  EXPECT_THROW(policy_pairs_of(5, kLimits, kWindows, {}, now), ReplyError);
  EXPECT_THROW(policy_pairs_of(5, kLimits, kWindows, {microseconds(0), kIntervals[1], kIntervals[2]}, now), ReplyError);
  EXPECT_THROW(policy_pairs_of(5, {0, 1000, 10000}, kWindows, kIntervals, now), ReplyError);
}

}  // namespace
