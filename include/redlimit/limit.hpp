#pragma once
// A rate: `count` units per `window`, optionally cut into sub-windows of `precision` (sliding window).
#include "redlimit/detail/config.hpp"
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlimit {

class Limit {
 public:
  // Throws InvalidArgument unless 1 <= count <= max_count() and 0 < window <= max_window().
  Limit(std::int64_t count, std::chrono::microseconds window);

  static Limit per_second(std::int64_t n) { return Limit(n, std::chrono::seconds(1)); }
  static Limit per_minute(std::int64_t n) { return Limit(n, std::chrono::minutes(1)); }
  static Limit per_hour(std::int64_t n) { return Limit(n, std::chrono::hours(1)); }
  static Limit per_day(std::int64_t n) { return Limit(n, std::chrono::hours(24)); }
  // "100/1m", "10/second", "10 per second", "5 per 2 seconds", "100/1m@10s" (precision after '@').
  static Limit parse(std::string_view text);

  std::int64_t count() const { return count_; }
  std::chrono::microseconds window() const { return window_; }
  // Sub-window length of a sliding window; equal to window() unless set.
  std::chrono::microseconds precision() const { return precision_.count() ? precision_ : window_; }
  // A copy with sub-windows of `p`; `p` must divide the window.
  Limit precision(std::chrono::microseconds p) const;

  // Canonical text form, accepted by parse(): "100/1m", "240/1h@1m".
  std::string to_string() const;

  friend bool operator==(const Limit& a, const Limit& b) {
    return a.count_ == b.count_ && a.window_ == b.window_ && a.precision() == b.precision();
  }
  friend bool operator!=(const Limit& a, const Limit& b) { return !(a == b); }

  static constexpr std::int64_t max_count() { return std::int64_t{1} << 40; }
  // Ten years: windows are stored as microseconds in Lua doubles; this keeps every sum exact.
  static constexpr std::chrono::microseconds max_window() {
    return std::chrono::microseconds{std::int64_t{315'360'000'000'000}};
  }

 private:
  std::int64_t count_;
  std::chrono::microseconds window_;
  std::chrono::microseconds precision_{0};
};

// Several limits in one string: "10/second; 120/minute; 240/hour". Separators: ';' or ','.
// Errors name the offending part and its position.
std::vector<Limit> parse_limits(std::string_view text);

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/limit-inl.hpp"
#endif
