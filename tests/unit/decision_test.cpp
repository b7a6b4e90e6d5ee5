// decode_decision: {allowed, remaining, retry_us, reset_us, delay_us} -> Decision, its short forms
// (an admission, retry and delay 0) reset_us * (limit + 1) + remaining and {remaining, reset_us},
// or a policy's {..., deciding limit 1..m,
// then each limit's remaining and reset_us}; anything else is a ReplyError. decode_decisions: a
// batch's decisions one after the other.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "redlimit/detail/decode.hpp"
#include "redlimit/errors.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::Decision;
using redlimit::Reply;
using redlimit::ReplyError;
using redlimit::detail::decode_decision;
using redlimit_unit::decision_reply;
using std::chrono::microseconds;

Reply ints(std::vector<std::int64_t> values) {
  std::vector<Reply> items;
  for (auto v : values) items.push_back(Reply::make_integer(v));
  return Reply::make_array(std::move(items));
}

TEST(DecisionTest, Allowed) {
  const Decision d = decode_decision(decision_reply(1, 99, 0, 60'000'000, 0), {100});
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 100);
  EXPECT_EQ(d.remaining, 99);
  EXPECT_EQ(d.retry_after, microseconds(0));
  EXPECT_EQ(d.reset_after, microseconds(60'000'000));
  EXPECT_EQ(d.delay, microseconds(0));
}

TEST(DecisionTest, Rejected) {
  const Decision d = decode_decision(decision_reply(0, 0, 1'234'567, 59'000'001, 0), {10});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, microseconds(1'234'567));
  EXPECT_EQ(d.reset_after, microseconds(59'000'001));
  EXPECT_EQ(d.delay, microseconds(0));
}

TEST(DecisionTest, Delay) {
  const Decision d = decode_decision(decision_reply(1, 7, 0, 1'500'000, 500'000), {10});
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 7);
  EXPECT_EQ(d.delay, microseconds(500'000));
}

TEST(DecisionTest, LargeValuesAreNotTruncated) {
  const std::int64_t big = (std::int64_t{1} << 52) + 1;
  const std::int64_t ten_years = 315'360'000'000'000;
  const Decision d = decode_decision(decision_reply(0, big, ten_years + 3, big * 2, ten_years), {1});
  EXPECT_EQ(d.remaining, big);
  EXPECT_EQ(d.retry_after, microseconds(ten_years + 3));
  EXPECT_EQ(d.reset_after, microseconds(big * 2));
  EXPECT_EQ(d.delay, microseconds(ten_years));
}

TEST(DecisionTest, LimitComesFromTheCallerNotTheReply) {
  EXPECT_EQ(decode_decision(decision_reply(1, 3, 0, 0), {42}).limit, 42);
  EXPECT_EQ(decode_decision(decision_reply(1, 3, 0, 0), {7}).limit, 7);
}

TEST(DecisionTest, ZeroesAreFine) {
  const Decision d = decode_decision(ints({0, 0, 0, 0, 0}), {5});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
}

// An admission that waits for nothing comes as two integers (lua/epilogue.lua, reply).
TEST(DecisionTest, TheShortFormIsAnAdmissionWithoutRetryOrDelay) {
  const Decision d = decode_decision(ints({7, 1'500'000}), {10});
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 7);
  EXPECT_EQ(d.retry_after, microseconds(0));
  EXPECT_EQ(d.reset_after, microseconds(1'500'000));
  EXPECT_EQ(d.delay, microseconds(0));
  EXPECT_EQ(d.limit_index, 0u);
  EXPECT_THROW(decode_decision(ints({-7, 0}), {10}), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 7, 0}), {10}), ReplyError) << "three integers: no form of one decision";
}

// A batch's decisions one after the other (lua/epilogue.lua, reply): an admission waiting for
// nothing as one negative integer, -1 - 2 * remaining (its reset_after the previous decision's) or
// -2 - 2 * (reset_after * (limit + 1) + remaining); {3, remaining, reset_after} another such
// admission; else five integers.
TEST(DecisionTest, ABatchMixesTheShortFormsAndWholeDecisions) {
  using redlimit::detail::decode_decisions;
  const std::int64_t same8 = -1 - 2 * 8, same7 = -1 - 2 * 7, packed5 = -2 - 2 * (500 * 11 + 5);
  const auto ds =
      decode_decisions(ints({3, 9, 500, same8, 0, 0, 700, 500, 0, same7, 1, 6, 0, 500, 30, packed5}), 6, {10});
  ASSERT_EQ(ds.size(), 6u);
  const bool allowed[] = {true, true, false, true, true, true};
  const std::int64_t remaining[] = {9, 8, 0, 7, 6, 5};
  for (std::size_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(ds[i].allowed, allowed[i]) << i;
    EXPECT_EQ(ds[i].remaining, remaining[i]) << i;
    EXPECT_EQ(ds[i].reset_after, microseconds(500)) << i;
    EXPECT_EQ(ds[i].retry_after, microseconds(i == 2 ? 700 : 0)) << i;
    EXPECT_EQ(ds[i].delay, microseconds(i == 4 ? 30 : 0)) << i;
    EXPECT_EQ(ds[i].limit, 10) << i;
  }
  // The packed form alone needs no decision before it, and holds up to 2^52 - 1.
  const std::int64_t p = (std::int64_t{1} << 52) - 1;  // reset_after * (2^20 + 1) + remaining
  const auto big = decode_decisions(ints({-2 - 2 * p, -1}), 2, {std::int64_t{1} << 20});
  EXPECT_EQ(big[0].remaining, p % ((std::int64_t{1} << 20) + 1));
  EXPECT_EQ(big[0].reset_after.count(), p / ((std::int64_t{1} << 20) + 1));
  EXPECT_EQ(big[1].remaining, 0);
  EXPECT_EQ(big[1].reset_after, big[0].reset_after);
  // Malformed: a reset taken from no decision, a decision cut short, integers left over, a tag of
  // no form (2 was one, before the negative integers), a negative in a tagged form, a negative
  // integer past -2^53.
  EXPECT_THROW(decode_decisions(ints({same8, 3, 8, 500}), 2, {10}), ReplyError);
  EXPECT_THROW(decode_decisions(ints({3, 9, 500, 3, 8}), 2, {10}), ReplyError);
  EXPECT_THROW(decode_decisions(ints({3, 9, 500, same8, 1}), 2, {10}), ReplyError);
  EXPECT_THROW(decode_decisions(ints({3, 9, 500, 2, 8}), 2, {10}), ReplyError);
  EXPECT_THROW(decode_decisions(ints({3, 9, 500, 4, 8, 0, 0, 0}), 2, {10}), ReplyError);
  EXPECT_THROW(decode_decisions(ints({3, 9, -500, same8}), 2, {10}), ReplyError);
  EXPECT_THROW(decode_decisions(ints({-(std::int64_t{1} << 53) - 2, same8}), 2, {10}), ReplyError);
  // A policy of several limits: whole decisions only, or {2, its pairs}.
  EXPECT_THROW(decode_decisions(ints({3, 9, 500, same8}), 2, {10, 20}), ReplyError);
  EXPECT_THROW(decode_decisions(ints({3, 9, 500, same8}), 2, {}), ReplyError) << "no limits";
}

// A policy of one limit (every sliding window) answers as the other strategies (lua/policy.lua):
// its one limit's state is the decision's, whole or short.
TEST(DecisionTest, APolicyOfOneLimitAnswersInFiveOrTwoAndHasItsLimitsState) {
  const std::vector<microseconds> window{microseconds(60'000'000)};
  for (const Reply& r : {ints({0, 0, 250, 40'000'000, 0}), ints({6, 40'000'000})}) {
    const Decision d = decode_decision(r, {10}, window);
    ASSERT_EQ(d.limits.size(), 1u);
    EXPECT_EQ(d.limits[0].limit, 10);
    EXPECT_EQ(d.limits[0].window, window[0]);
    EXPECT_EQ(d.limits[0].remaining, d.remaining);
    EXPECT_EQ(d.limits[0].reset_after, microseconds(40'000'000));
    EXPECT_EQ(d.limit_index, 0u);
  }
  EXPECT_TRUE(decode_decision(ints({6, 40'000'000}), {10}).limits.empty()) << "no window: not a policy";
  EXPECT_TRUE(decode_decision(ints({1, 6, 0, 4, 0}), {10, 20}, {window[0], window[0]}).limits.empty())
      << "a policy of two limits says each limit's state in its own reply";
}

TEST(DecisionTest, WrongLength) {
  EXPECT_THROW(decode_decision(ints({}), {10}), ReplyError);
  EXPECT_THROW(decode_decision(ints({1}), {10}), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 9, 0}), {10}), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 9, 0, 0}), {10}), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 9, 0, 0, 0, 1, 0}), {10}), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 9, 0, 0, 0, 1, 1, 1}), {10, 20}), ReplyError);
  // A policy's decision without every limit's pair (the shape before per-limit states) is refused.
  EXPECT_THROW(decode_decision(ints({1, 9, 0, 0, 0, 1}), {10}), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 9, 0, 0, 0, 1, 9, 0}), {10, 20}), ReplyError);
}

TEST(DecisionTest, SingleLimitStrategiesReportLimitIndexZeroAndPrimarySource) {
  const Decision d = decode_decision(decision_reply(1, 4, 0, 10), {5});
  EXPECT_EQ(d.limit_index, 0u);
  EXPECT_EQ(d.source, redlimit::Source::primary);
  EXPECT_FALSE(d.shadow_rejected);
}

// Policies append the 1-based index of the deciding limit.
TEST(DecisionTest, PolicyReplyNamesTheDecidingLimit) {
  const std::vector<std::int64_t> limits{10, 120, 240};
  for (std::int64_t deciding = 1; deciding <= 3; ++deciding) {
    SCOPED_TRACE(deciding);
    const Decision d =
        decode_decision(ints({0, 0, 700, 3'600'000'000, 0, deciding, 0, 1, 0, 2, 5, 3'600'000'000}), limits);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.limit_index, static_cast<std::size_t>(deciding - 1));
    EXPECT_EQ(d.limit, limits[static_cast<std::size_t>(deciding - 1)]);
    EXPECT_EQ(d.retry_after, microseconds(700));
    EXPECT_EQ(d.reset_after, microseconds(3'600'000'000));
  }
}

// A policy's admission is its limits' pairs alone (lua/epilogue.lua, reply): the decision's
// remaining is their least, its reset their latest, and the first limit with the least left decides,
// as conclude() in lua/parts/policy_writes.lua says for an admission.
TEST(DecisionTest, APolicysAdmissionIsItsLimitsPairsAlone) {
  const std::vector<std::int64_t> limits{10, 120, 240};
  const std::vector<microseconds> windows{microseconds(1'000'000), microseconds(60'000'000),
                                          microseconds(3'600'000'000)};
  const Decision d = decode_decision(ints({7, 1'000'000, 7, 60'000'000, 9, 30'000'000}), limits, windows);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 7);
  EXPECT_EQ(d.reset_after, microseconds(60'000'000));
  EXPECT_EQ(d.retry_after, microseconds(0));
  EXPECT_EQ(d.delay, microseconds(0));
  EXPECT_EQ(d.limit_index, 0u) << "the first of the two limits with 7 left";
  EXPECT_EQ(d.limit, 10);
  ASSERT_EQ(d.limits.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.limits[i].limit, limits[i]);
    EXPECT_EQ(d.limits[i].window, windows[i]);
  }
  EXPECT_EQ(d.limits[2].remaining, 9);
  EXPECT_EQ(d.limits[2].reset_after, microseconds(30'000'000));
  EXPECT_EQ(decode_decision(ints({9, 1, 3, 2, 3, 1}), limits).limit_index, 1u);
  EXPECT_THROW(decode_decision(ints({9, 1, 3, 2}), limits), ReplyError) << "two pairs for three limits";
  EXPECT_THROW(decode_decision(ints({9, 1, 3, -2, 3, 1}), limits), ReplyError);

  // In a batch: {2, the pairs}, or the whole decision.
  const auto ds = redlimit::detail::decode_decisions(
      ints({2, 5, 10, 6, 20, 1, 40, 0, 0, 700, 70, 0, 1, 0, 700, 4, 20, 3, 70}), 2, limits);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_EQ(ds[0].remaining, 1);
  EXPECT_EQ(ds[0].limit_index, 2u);
  EXPECT_EQ(ds[0].reset_after, microseconds(40));
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[1].retry_after, microseconds(700));
  EXPECT_EQ(ds[1].limits[2].remaining, 3);
  using redlimit::detail::decode_decisions;
  EXPECT_THROW(decode_decisions(ints({2, 5, 10, 6, 20, 1, 40, 2, 5, 10, 6}), 2, limits), ReplyError) << "cut short";
  EXPECT_THROW(decode_decisions(ints({2, 5, 10, 6, 20, 1, 40, 2, 5, 10, 6, 20, 1, 40, 9}), 2, limits), ReplyError)
      << "an integer left over";
}

TEST(DecisionTest, PolicyReplyOfOneLimit) {
  const Decision d = decode_decision(ints({1, 99, 0, 60'000'000, 0, 1, 99, 60'000'000}), {100}, {microseconds(60'000'000)});
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 100);
  EXPECT_EQ(d.limit_index, 0u);
  EXPECT_EQ(d.remaining, 99);
  ASSERT_EQ(d.limits.size(), 1u);
  EXPECT_EQ(d.limits[0].limit, 100);
  EXPECT_EQ(d.limits[0].window, microseconds(60'000'000));
  EXPECT_EQ(d.limits[0].remaining, 99);
  EXPECT_EQ(d.limits[0].reset_after, microseconds(60'000'000));
}

// Each limit's own remaining and reset, in order: a 1 s limit does not carry the hour's reset.
TEST(DecisionTest, PolicyReplyCarriesEveryLimitsOwnState) {
  const std::vector<std::int64_t> limits{10, 120, 240};
  const std::vector<microseconds> windows{microseconds(1'000'000), microseconds(60'000'000),
                                          microseconds(3'600'000'000)};
  const Decision d = decode_decision(
      ints({1, 9, 0, 3'600'000'000, 0, 1, 9, 1'000'000, 119, 60'000'000, 239, 3'600'000'000}), limits, windows);
  ASSERT_EQ(d.limits.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(d.limits[i].limit, limits[i]);
    EXPECT_EQ(d.limits[i].window, windows[i]);
    EXPECT_EQ(d.limits[i].remaining, limits[i] - 1);
    EXPECT_EQ(d.limits[i].reset_after, windows[i]);
  }
  // Without windows (a caller that has none) the states are there, windows 0.
  EXPECT_EQ(decode_decision(ints({1, 9, 0, 5, 0, 1, 9, 1, 119, 2, 239, 5}), limits).limits[2].window, microseconds(0));
  // Single-limit strategies have no per-limit states: the decision's own fields are their limit.
  EXPECT_TRUE(decode_decision(decision_reply(1, 4, 0, 10), {5}).limits.empty());
}

TEST(DecisionTest, DecidingIndexOutOfRange) {
  const std::vector<std::int64_t> limits{10, 120, 240};
  EXPECT_THROW(decode_decision(ints({1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), limits), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0}), limits), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0}), limits), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 0, 0, 0, 0, 2, 0, 0}), {10}), ReplyError);
  EXPECT_THROW(decode_decision(ints({1, 0, 0, 0, 0, 1, 0, -1}), {10}), ReplyError);  // a negative reset
  Reply r = ints({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  r.elements[5] = Reply::make_string("1");
  EXPECT_THROW(decode_decision(r, limits), ReplyError);
}

TEST(DecisionTest, NonIntegerElements) {
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    for (const Reply& bad : {Reply::make_string("1"), Reply::make_status("OK"), Reply::make_nil(),
                             Reply::make_error("ERR x"), ints({1})}) {
      Reply r = decision_reply(1, 1, 0, 0, 0);
      r.elements[static_cast<std::size_t>(i)] = bad;
      EXPECT_THROW(decode_decision(r, {10}), ReplyError);
    }
  }
}

TEST(DecisionTest, NegativeValues) {
  EXPECT_THROW(decode_decision(decision_reply(1, -1, 0, 0, 0), {10}), ReplyError);
  EXPECT_THROW(decode_decision(decision_reply(0, 0, -1, 0, 0), {10}), ReplyError);
  EXPECT_THROW(decode_decision(decision_reply(1, 0, 0, -5, 0), {10}), ReplyError);
  EXPECT_THROW(decode_decision(decision_reply(1, 0, 0, 0, -1), {10}), ReplyError);
  EXPECT_THROW(decode_decision(decision_reply(1, INT64_MIN, 0, 0, 0), {10}), ReplyError);
}

TEST(DecisionTest, AllowedMustBeZeroOrOne) {
  EXPECT_THROW(decode_decision(decision_reply(2, 0, 0, 0, 0), {10}), ReplyError);
  EXPECT_THROW(decode_decision(decision_reply(-1, 0, 0, 0, 0), {10}), ReplyError);
  EXPECT_THROW(decode_decision(decision_reply(INT64_MAX, 0, 0, 0, 0), {10}), ReplyError);
}

TEST(DecisionTest, AnIntegerIsAnAdmissionPackedByTheLimit) {
  // lua/epilogue.lua, reply: reset_after * (limit + 1) + remaining
  const Decision d = decode_decision(Reply::make_integer(750'000 * 11 + 7), {10});
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 7);
  EXPECT_EQ(d.reset_after, microseconds(750'000));
  EXPECT_EQ(d.retry_after, microseconds(0));
  EXPECT_EQ(d.delay, microseconds(0));
  EXPECT_TRUE(d.limits.empty());

  const Decision full = decode_decision(Reply::make_integer(10), {10});  // nothing to reset: full
  EXPECT_EQ(full.remaining, 10);
  EXPECT_EQ(full.reset_after, microseconds(0));

  // The largest the scripts send: below 2^53, a limit of 2^40
  const std::int64_t limit = std::int64_t{1} << 40;
  const std::int64_t reset = ((std::int64_t{1} << 53) - 1) / (limit + 1) - 1;
  const Decision big = decode_decision(Reply::make_integer(reset * (limit + 1) + limit - 3), {limit});
  EXPECT_EQ(big.remaining, limit - 3);
  EXPECT_EQ(big.reset_after, microseconds(reset));

  // A sliding window (a policy of one limit, given its window) holds that limit's state too.
  const Decision sw = decode_decision(Reply::make_integer(40 * 101 + 99), {100}, {microseconds(60'000'000)});
  ASSERT_EQ(sw.limits.size(), 1u);
  EXPECT_EQ(sw.limits[0].remaining, 99);
  EXPECT_EQ(sw.limits[0].reset_after, microseconds(40));
  EXPECT_EQ(sw.limits[0].window, microseconds(60'000'000));
}

TEST(DecisionTest, AnIntegerIsMalformedNegativeOrForAPolicyOfManyLimits) {
  EXPECT_THROW(decode_decision(Reply::make_integer(-1), {10}), ReplyError);
  EXPECT_THROW(decode_decision(Reply::make_integer(5), {10, 100}), ReplyError);
  EXPECT_THROW(decode_decision(Reply::make_integer(5), {}), ReplyError);
}

TEST(DecisionTest, NonArrayReplies) {
  EXPECT_THROW(decode_decision(Reply::make_nil(), {10}), ReplyError);
  EXPECT_THROW(decode_decision(Reply::make_string("1 9 0 0 0"), {10}), ReplyError);
  EXPECT_THROW(decode_decision(Reply::make_status("OK"), {10}), ReplyError);
}

TEST(DecisionTest, ErrorReplyIsAReplyErrorCarryingTheServerText) {
  try {
    decode_decision(Reply::make_error("ERR user_script:12: Script attempted to access nonexistent global"), {10});
    FAIL() << "did not throw";
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("nonexistent global"));
  }
}

TEST(DecisionTest, ReplyErrorIsARedlimitError) {
  EXPECT_THROW(decode_decision(ints({1}), {10}), redlimit::Error);
}

}  // namespace
