#pragma once
// Bodies of redlimit/limit.hpp (see redlimit/detail/config.hpp: compiled once in src/redlimit.cpp, or inline
// with REDLIMIT_HEADER_ONLY).
#include <cctype>
#include <cstdint>
#include <limits>

#include "redlimit/detail/config.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limit.hpp"

namespace redlimit {

namespace limit_impl {

using std::chrono::microseconds;

struct UnitName {
  std::string_view name;
  std::int64_t micros;
};

// Longest names first is not needed: a unit must match the whole alphabetic word.
inline constexpr UnitName kUnits[] = {
    {"us", 1},
    {"usec", 1},
    {"microsecond", 1},
    {"microseconds", 1},
    {"ms", 1000},
    {"msec", 1000},
    {"millisecond", 1000},
    {"milliseconds", 1000},
    {"s", 1000000},
    {"sec", 1000000},
    {"secs", 1000000},
    {"second", 1000000},
    {"seconds", 1000000},
    {"m", 60000000},
    {"min", 60000000},
    {"mins", 60000000},
    {"minute", 60000000},
    {"minutes", 60000000},
    {"h", 3600000000},
    {"hr", 3600000000},
    {"hour", 3600000000},
    {"hours", 3600000000},
    {"d", 86400000000},
    {"day", 86400000000},
    {"days", 86400000000},
};

// The shortest exact spelling of a duration for to_string().
REDLIMIT_INLINE std::string format_duration(microseconds d) {
  const std::int64_t us = d.count();
  constexpr std::pair<std::int64_t, const char*> units[] = {{86400000000, "d"}, {3600000000, "h"}, {60000000, "m"},
                                                            {1000000, "s"},     {1000, "ms"},      {1, "us"}};
  for (const auto& [size, name] : units) {
    if (us % size == 0) return detail::message("{}{}", us / size, name);
  }
  return detail::message("{}us", us);
}

class Parser {
 public:
  Parser(std::string_view whole, std::string_view text, std::size_t offset)
      : whole_(whole), text_(text), offset_(offset) {}

  Limit parse() {
    skip_space();
    const std::size_t count_at = pos_;
    const std::int64_t count = number("a count");
    skip_space();
    if (peek() == '/') {
      ++pos_;
    } else if (word_is("per")) {
      pos_ += 3;
    } else {
      fail("expected '/' or 'per' after the count");
    }
    skip_space();
    const microseconds window = duration("window");
    Limit limit = located(count_at, [&] { return Limit(count, window); });
    skip_space();
    if (peek() == '@') {
      ++pos_;
      skip_space();
      const std::size_t precision_at = pos_;
      const microseconds precision = duration("precision");
      limit = located(precision_at, [&] { return limit.precision(precision); });
      skip_space();
    }
    if (pos_ != text_.size()) fail("unexpected text");
    return limit;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  // `w` (lower case) at the cursor, in any case, as a word of its own: "per", as the units are.
  bool word_is(std::string_view w) const {
    if (pos_ > text_.size() || text_.size() - pos_ < w.size()) return false;
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(text_[pos_ + i])) != w[i]) return false;
    }
    const std::size_t end = pos_ + w.size();
    return end == text_.size() || !std::isalpha(static_cast<unsigned char>(text_[end]));
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw InvalidArgument(detail::message("rate \"{}\": {} at position {} (\"{}\")", detail::printable(whole_), why,
                                          offset_ + pos_,
                                          detail::printable(text_.substr(std::min(pos_, text_.size())))));
  }

  // A Limit's own checks (the count's range, a precision that divides the window), reported as the
  // parser's errors are: in a list of limits, the one at fault and where it starts.
  template <class Make>
  Limit located(std::size_t at, Make make) {
    try {
      return make();
    } catch (const InvalidArgument& e) {
      std::string why = e.what();
      const std::string_view prefix = "redlimit: invalid argument: ";  // (errors.hpp): fail() adds it again
      if (why.compare(0, prefix.size(), prefix) == 0) why.erase(0, prefix.size());
      pos_ = at;
      fail(why);
    }
  }

  std::int64_t number(const char* what) {
    const std::size_t start = pos_;
    std::int64_t v = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      const int digit = text_[pos_] - '0';
      if (v > (std::numeric_limits<std::int64_t>::max() - digit) / 10) {
        pos_ = start;
        fail(detail::message("{} too large", what));
      }
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail(detail::message("expected {}", what));
    return v;
  }

  // "[N] unit": "1m", "2 seconds", "second", "500ms".
  microseconds duration(const char* what) {
    std::int64_t n = 1;
    if (std::isdigit(static_cast<unsigned char>(peek()))) {
      n = number(what);
      skip_space();
    }
    const std::size_t start = pos_;
    while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    std::string unit(text_.substr(start, pos_ - start));
    if (unit == "M") {  // case is folded, but an upper-case M is as often a month as a minute
      pos_ = start;
      fail("\"M\" is ambiguous: write m or min for minutes (there is no month: 30d)");
    }
    for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (unit.empty()) {
      pos_ = start;
      fail(detail::message("expected a time unit for the {}", what));
    }
    for (const auto& u : kUnits) {
      if (u.name == unit) {
        if (n == 0) {
          pos_ = start;
          fail(detail::message("the {} must be positive", what));
        }
        if (n > Limit::max_window().count() / u.micros) {
          pos_ = start;
          fail(detail::message("the {} is too long", what));
        }
        return microseconds{n * u.micros};
      }
    }
    pos_ = start;
    fail(detail::message("unknown time unit \"{}\"", detail::printable(unit)));
  }

  std::string_view whole_;
  std::string_view text_;
  std::size_t offset_;
  std::size_t pos_ = 0;
};

}  // namespace limit_impl

REDLIMIT_INLINE Limit::Limit(std::int64_t count, limit_impl::microseconds window) : count_(count), window_(window) {
  if (count < 1 || count > max_count()) {
    throw InvalidArgument(detail::message("limit count must be in [1, {}], got {}", max_count(), count));
  }
  if (window.count() <= 0 || window > max_window()) {
    throw InvalidArgument(
        detail::message("limit window must be in (0, {}us], got {}us", max_window().count(), window.count()));
  }
}

REDLIMIT_INLINE Limit Limit::precision(limit_impl::microseconds p) const {
  if (p.count() <= 0 || p > window_ || window_.count() % p.count() != 0) {
    throw InvalidArgument(
        detail::message("precision {}us must be positive and divide the window {}us", p.count(), window_.count()));
  }
  Limit copy = *this;
  copy.precision_ = p;
  return copy;
}

REDLIMIT_INLINE std::string Limit::to_string() const {
  std::string s = detail::message("{}/{}", count_, limit_impl::format_duration(window_));
  if (precision() != window_) s += "@" + limit_impl::format_duration(precision());
  return s;
}

REDLIMIT_INLINE Limit Limit::parse(std::string_view text) { return limit_impl::Parser(text, text, 0).parse(); }

REDLIMIT_INLINE std::vector<Limit> parse_limits(std::string_view text) {
  std::vector<Limit> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find_first_of(";,", start);
    const std::string_view part = text.substr(start, end == std::string_view::npos ? text.npos : end - start);
    out.push_back(limit_impl::Parser(text, part, start).parse());
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace redlimit
