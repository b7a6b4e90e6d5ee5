// Limit: construction, validation, the text form (parse / to_string) and parse_limits.
#include "redlimit/limit.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "redlimit/errors.hpp"

namespace {

using redlimit::InvalidArgument;
using redlimit::Limit;
using namespace std::chrono_literals;
using std::chrono::microseconds;
using ::testing::HasSubstr;

// Runs `f`, which must throw InvalidArgument, and returns the message.
template <typename F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than InvalidArgument: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

// ---- construction ------------------------------------------------------------------------------

TEST(LimitTest, ConstructorStoresCountAndWindow) {
  const Limit l(100, 60s);
  EXPECT_EQ(l.count(), 100);
  EXPECT_EQ(l.window(), microseconds(60'000'000));
  // Precision defaults to the whole window.
  EXPECT_EQ(l.precision(), l.window());
}

TEST(LimitTest, NamedConstructors) {
  EXPECT_EQ(Limit::per_second(5), Limit(5, 1s));
  EXPECT_EQ(Limit::per_minute(100), Limit(100, 60s));
  EXPECT_EQ(Limit::per_hour(240), Limit(240, 3600s));
  EXPECT_EQ(Limit::per_day(7), Limit(7, 86400s));
  EXPECT_EQ(Limit::per_second(5).count(), 5);
  EXPECT_EQ(Limit::per_hour(1).window(), microseconds(3'600'000'000));
}

TEST(LimitTest, EqualityComparesCountWindowAndPrecision) {
  EXPECT_EQ(Limit(10, 1s), Limit(10, 1000ms));
  EXPECT_NE(Limit(10, 1s), Limit(11, 1s));
  EXPECT_NE(Limit(10, 1s), Limit(10, 2s));
  EXPECT_NE(Limit(10, 1s), Limit(10, 1s).precision(500ms));
  // An explicit precision equal to the window is the same limit as the default.
  EXPECT_EQ(Limit(10, 1s), Limit(10, 1s).precision(1s));
}

TEST(LimitTest, CountMustBeAtLeastOne) {
  EXPECT_THROW(Limit(0, 1s), InvalidArgument);
  EXPECT_THROW(Limit(-1, 1s), InvalidArgument);
  EXPECT_THROW(Limit(INT64_MIN, 1s), InvalidArgument);
  EXPECT_THROW(Limit::per_second(0), InvalidArgument);
  EXPECT_THROW(Limit::per_minute(-5), InvalidArgument);
  EXPECT_NO_THROW(Limit(1, 1s));
}

TEST(LimitTest, CountAboveMaxIsRejected) {
  EXPECT_NO_THROW(Limit(Limit::max_count(), 1s));
  EXPECT_THROW(Limit(Limit::max_count() + 1, 1s), InvalidArgument);
}

TEST(LimitTest, WindowMustBePositive) {
  EXPECT_THROW(Limit(10, microseconds(0)), InvalidArgument);
  EXPECT_THROW(Limit(10, microseconds(-1)), InvalidArgument);
  EXPECT_THROW(Limit(10, -1s), InvalidArgument);
  EXPECT_NO_THROW(Limit(10, microseconds(1)));
}

TEST(LimitTest, WindowAboveMaxIsRejected) {
  EXPECT_NO_THROW(Limit(10, Limit::max_window()));
  EXPECT_THROW(Limit(10, Limit::max_window() + microseconds(1)), InvalidArgument);
  EXPECT_THROW(Limit(10, std::chrono::hours(24 * 365 * 11)), InvalidArgument);
}

TEST(LimitTest, ErrorsDeriveFromRedlimitError) {
  try {
    Limit(0, 1s);
    FAIL() << "did not throw";
  } catch (const redlimit::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("redlimit"));
  }
}

// ---- precision ---------------------------------------------------------------------------------

TEST(LimitTest, PrecisionThatDividesTheWindowIsKept) {
  const Limit base(100, 60s);
  const Limit l = base.precision(10s);
  EXPECT_EQ(l.precision(), microseconds(10'000'000));
  EXPECT_EQ(l.count(), 100);
  EXPECT_EQ(l.window(), microseconds(60'000'000));
  // precision() returns a copy; the original is unchanged.
  EXPECT_EQ(base.precision(), microseconds(60'000'000));
  EXPECT_EQ(base.precision(1us).precision(), microseconds(1));
}

TEST(LimitTest, PrecisionNotDividingTheWindowThrows) {
  EXPECT_THROW(Limit(100, 60s).precision(7s), InvalidArgument);
  EXPECT_THROW(Limit(100, 60s).precision(microseconds(59'999'999)), InvalidArgument);
}

TEST(LimitTest, PrecisionLargerThanTheWindowThrows) {
  EXPECT_THROW(Limit(100, 60s).precision(120s), InvalidArgument);
  EXPECT_THROW(Limit(100, 60s).precision(61s), InvalidArgument);
}

TEST(LimitTest, NonPositivePrecisionThrows) {
  EXPECT_THROW(Limit(100, 60s).precision(microseconds(0)), InvalidArgument);
  EXPECT_THROW(Limit(100, 60s).precision(-10s), InvalidArgument);
}

// ---- parse ---------------------------------------------------------------------------------------

TEST(LimitParseTest, SlashWithNumberedUnit) {
  EXPECT_EQ(Limit::parse("100/1m"), Limit(100, 60s));
  EXPECT_EQ(Limit::parse("5/2s"), Limit(5, 2s));
  EXPECT_EQ(Limit::parse("30/10m"), Limit(30, 600s));
}

TEST(LimitParseTest, ShortUnits) {
  EXPECT_EQ(Limit::parse("1/h"), Limit::per_hour(1));
  EXPECT_EQ(Limit::parse("10/s"), Limit::per_second(10));
  EXPECT_EQ(Limit::parse("10/m"), Limit::per_minute(10));
}

TEST(LimitParseTest, SlashWithWordUnit) {
  EXPECT_EQ(Limit::parse("10/second"), Limit::per_second(10));
  EXPECT_EQ(Limit::parse("120/minute"), Limit::per_minute(120));
  EXPECT_EQ(Limit::parse("240/hour"), Limit::per_hour(240));
}

TEST(LimitParseTest, PerForm) {
  EXPECT_EQ(Limit::parse("10 per second"), Limit::per_second(10));
  EXPECT_EQ(Limit::parse("5 per 2 seconds"), Limit(5, 2s));
  EXPECT_EQ(Limit::parse("3 per minute"), Limit::per_minute(3));
}

TEST(LimitParseTest, PrecisionAfterAt) {
  const Limit l = Limit::parse("100/1m@10s");
  EXPECT_EQ(l.count(), 100);
  EXPECT_EQ(l.window(), microseconds(60'000'000));
  EXPECT_EQ(l.precision(), microseconds(10'000'000));
  EXPECT_EQ(l, Limit(100, 60s).precision(10s));
}

TEST(LimitParseTest, PrecisionMustDivideTheWindow) {
  EXPECT_THROW(Limit::parse("100/1m@7s"), InvalidArgument);
  EXPECT_THROW(Limit::parse("100/1m@2m"), InvalidArgument);
}

TEST(LimitParseTest, SurroundingAndInnerWhitespaceIsAccepted) {
  EXPECT_EQ(Limit::parse("  100/1m  "), Limit(100, 60s));
  EXPECT_EQ(Limit::parse("100 / 1m"), Limit(100, 60s));
  EXPECT_EQ(Limit::parse("\t10   per   second\n"), Limit::per_second(10));
  EXPECT_EQ(Limit::parse(" 100/1m @ 10s "), Limit(100, 60s).precision(10s));
}

TEST(LimitParseTest, CanonicalTextForm) {
  EXPECT_EQ(Limit::per_minute(100).to_string(), "100/1m");
  EXPECT_EQ(Limit::per_hour(240).precision(std::chrono::minutes(1)).to_string(), "240/1h@1m");
}

TEST(LimitParseTest, ToStringRoundTrips) {
  const std::vector<Limit> limits = {
      Limit::per_second(10),
      Limit::per_minute(100),
      Limit::per_hour(240).precision(std::chrono::minutes(1)),
      Limit::per_day(5),
      Limit(3, 1500ms),
      Limit(7, microseconds(1)),
      Limit(9, microseconds(1'000'001)),
      Limit(100, 60s).precision(250ms),
      Limit(1, Limit::max_window()),
      Limit(Limit::max_count(), 1s),
      Limit(12, 90s).precision(30s),
  };
  for (const Limit& l : limits) {
    const std::string text = l.to_string();
    SCOPED_TRACE(text);
    Limit back = Limit::per_second(1);
    ASSERT_NO_THROW(back = Limit::parse(text));
    EXPECT_EQ(back, l);
    EXPECT_EQ(back.count(), l.count());
    EXPECT_EQ(back.window(), l.window());
    EXPECT_EQ(back.precision(), l.precision());
  }
}

struct BadRate {
  const char* text;
  const char* points_at;  // the part of the message that must name what is wrong
};

class LimitParseErrorTest : public ::testing::TestWithParam<BadRate> {};

TEST_P(LimitParseErrorTest, ThrowsInvalidArgumentNamingTheBadPart) {
  const BadRate& bad = GetParam();
  const std::string msg = invalid_argument_message([&] { Limit::parse(bad.text); });
  EXPECT_THAT(msg, HasSubstr(bad.points_at)) << "input: \"" << bad.text << "\"";
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, LimitParseErrorTest,
    ::testing::Values(BadRate{"", "count"},                // nothing at all
                      BadRate{"abc", "abc"},               // no count
                      BadRate{"10/", "unit"},              // no window
                      BadRate{"/s", "count"},              // no count
                      BadRate{"10/0s", "positive"},        // zero window
                      BadRate{"-1/s", "-1"},               // negative count
                      BadRate{"10/1x", "x"},               // unknown unit
                      BadRate{"10/1parsec", "parsec"},     // unknown unit
                      BadRate{"10 per", "unit"},           // no window after 'per'
                      BadRate{"10 every second", "every"}, // neither '/' nor 'per'
                      BadRate{"10/s garbage", "garbage"},  // trailing garbage
                      BadRate{"10/s/s", "/s"},             // trailing garbage
                      BadRate{"10/s@", "precision"},       // '@' without a precision
                      BadRate{"0/s", "0"}),                // zero count
    [](const ::testing::TestParamInfo<BadRate>& info) { return "case" + std::to_string(info.index); });

TEST(LimitParseTest, OverflowingCountIsRejected) {
  EXPECT_THROW(Limit::parse("99999999999999999999999/s"), InvalidArgument);
  EXPECT_THROW(Limit::parse("9223372036854775807/s"), InvalidArgument);  // > max_count()
}

TEST(LimitParseTest, OverlongWindowIsRejected) {
  EXPECT_THROW(Limit::parse("1/99999999999999h"), InvalidArgument);
  EXPECT_THROW(Limit::parse("1/4000d"), InvalidArgument);  // ~11 years > max_window()
}

// ---- parse_limits --------------------------------------------------------------------------------

TEST(ParseLimitsTest, SemicolonSeparated) {
  const auto limits = redlimit::parse_limits("10/second; 120/minute; 240/hour");
  ASSERT_EQ(limits.size(), 3u);
  EXPECT_EQ(limits[0], Limit::per_second(10));
  EXPECT_EQ(limits[1], Limit::per_minute(120));
  EXPECT_EQ(limits[2], Limit::per_hour(240));
}

TEST(ParseLimitsTest, CommaSeparated) {
  const auto limits = redlimit::parse_limits("10/second, 120/minute, 240/hour");
  ASSERT_EQ(limits.size(), 3u);
  EXPECT_EQ(limits[0], Limit::per_second(10));
  EXPECT_EQ(limits[1], Limit::per_minute(120));
  EXPECT_EQ(limits[2], Limit::per_hour(240));
}

TEST(ParseLimitsTest, MixedSeparatorsAndForms) {
  const auto limits = redlimit::parse_limits("5 per 2 seconds,100/1m@10s;1/h");
  ASSERT_EQ(limits.size(), 3u);
  EXPECT_EQ(limits[0], Limit(5, 2s));
  EXPECT_EQ(limits[1], Limit(100, 60s).precision(10s));
  EXPECT_EQ(limits[2], Limit::per_hour(1));
}

TEST(ParseLimitsTest, SingleLimit) {
  const auto limits = redlimit::parse_limits("100/1m");
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0], Limit(100, 60s));
}

TEST(ParseLimitsTest, ErrorNamesTheOffendingPartAndItsPosition) {
  // "minuet" starts at offset 15 of the whole string.
  const std::string text = "10/second; 120/minuet; 240/hour";
  const std::string msg = invalid_argument_message([&] { redlimit::parse_limits(text); });
  EXPECT_THAT(msg, HasSubstr("minuet"));
  EXPECT_THAT(msg, ::testing::AnyOf(HasSubstr("15"), HasSubstr("16")))
      << "the position of the bad part (0- or 1-based) should be named";
}

TEST(ParseLimitsTest, ALimitsOwnChecksNameThePartAndItsPosition) {
  // A count out of range and a precision that does not divide its window fail in Limit's own
  // checks; in a list of limits the message still says which one, and where it starts.
  const std::string zero = invalid_argument_message([] { redlimit::parse_limits("10/s; 0/min; 5/h"); });
  EXPECT_THAT(zero, HasSubstr("rate \"10/s; 0/min; 5/h\": limit count must be in [1,"));
  EXPECT_THAT(zero, HasSubstr("at position 6 (\"0/min\")"));
  const std::string precision = invalid_argument_message([] { redlimit::parse_limits("10/s; 100/1m@7s"); });
  EXPECT_THAT(precision, HasSubstr("divide the window"));
  EXPECT_THAT(precision, HasSubstr("at position 13 (\"7s\")"));
  EXPECT_THROW(redlimit::Limit::parse("5/2m@0s"), InvalidArgument);
}

TEST(LimitParseTest, CaseIsFoldedInPerAndTheUnitsButAnUpperCaseMIsRefused) {
  EXPECT_EQ(redlimit::Limit::parse("10 PER SECOND"), redlimit::Limit::per_second(10));
  EXPECT_EQ(redlimit::Limit::parse("10 Per 2 Minutes"), redlimit::Limit(10, std::chrono::minutes(2)));
  EXPECT_EQ(redlimit::Limit::parse("10/Ms"), redlimit::Limit(10, std::chrono::milliseconds(1)));
  EXPECT_THROW(redlimit::Limit::parse("10 perk second"), InvalidArgument);
  const std::string msg = invalid_argument_message([] { redlimit::Limit::parse("1000/M"); });
  EXPECT_THAT(msg, HasSubstr("ambiguous"));
  EXPECT_EQ(redlimit::Limit::parse("1000/m"), redlimit::Limit::per_minute(1000));
}

TEST(ParseLimitsTest, BadPartInTheMiddleThrows) {
  EXPECT_THROW(redlimit::parse_limits("10/s; bogus; 20/m"), InvalidArgument);
  EXPECT_THROW(redlimit::parse_limits("10/s;;20/m"), InvalidArgument);
  EXPECT_THROW(redlimit::parse_limits(""), InvalidArgument);
}

}  // namespace
