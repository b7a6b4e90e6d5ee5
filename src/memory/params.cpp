// The twin of the scripts' parameter checks (lua/helpers.lua: param, param_words, param_rate,
// parse_limits; block.lua's duration): the same bounds, compared the same way, so that a call the
// client never makes fails in memory where it fails on Redis, before anything is read or written.
// Without them a window or precision of 0 divided by zero here (SIGFPE: the process, not the call).
#include <algorithm>
#include <cstdint>
#include <utility>

#include "memory_scripts.hpp"
#include "redlimit/detail/message.hpp"
#include "twins.hpp"

namespace redlimit::detail::memory {

namespace {

constexpr std::int64_t kMaxWindow = std::int64_t{315'360'000'000'000};  // MAX_WINDOW (Limit::max_window)
constexpr std::int64_t kMaxLimits = 16;                                 // MAX_LIMITS (Policy::max_limits)
constexpr std::int64_t kMaxBuckets = 10'000;  // MAX_BUCKETS (SlidingWindow::max_buckets, Policy::max_buckets)

struct Bad {
  std::string message;
};

class Words {
 public:
  Words(const std::string_view* words, std::size_t n) : w_(words), n_(n) {}

  std::string_view at(std::size_t i) const { return i >= 1 && i <= n_ ? w_[i - 1] : std::string_view{}; }

  // param(p, i, lo, hi, what): word i, a decimal integer in [lo, hi].
  std::int64_t param(std::size_t i, std::int64_t lo, std::int64_t hi, const char* what) const {
    const std::string_view w = at(i);
    const std::optional<std::int64_t> v = decimal_in(w, lo, hi);
    if (!v) {
      throw Bad{detail::message("redlimit: parameter {} ({}) is not an integer in [{}, {}]: {}", i, what, lo, hi,
                                i <= n_ ? w : std::string_view{"nil"})};
    }
    return *v;
  }

  // `what` names the script for the message ("a fixed window"); `of` (a policy's) its count of limits.
  void expect(std::size_t n, const char* what, std::int64_t of = 0) const {
    if (n_ == n) return;
    throw Bad{detail::message("redlimit: {} takes {} parameters, got {}",
                              of > 0 ? detail::message(what, of) : std::string(what), n, n_)};
  }

 private:
  const std::string_view* w_;
  std::size_t n_;
};

// param_rate(p): capacity, ticks a unit, ticks a microsecond, with the products compared in
// doubles as the script compares them (each rounded to nearest: a rate the client took passes).
void rate(const Words& p, std::string_view params) {
  const std::int64_t capacity = p.param(1, 1, kMaxCount, "capacity");
  const std::int64_t unit = p.param(2, 1, kMaxWindow, "ticks a unit");
  const std::int64_t per_us = p.param(3, 1, kMaxCount, "ticks a microsecond");
  if (static_cast<double>(capacity) * static_cast<double>(unit) >
      static_cast<double>(kMaxWindow) * static_cast<double>(per_us)) {
    throw Bad{detail::message("redlimit: a bucket of {} takes longer than ten years to fill or drain", params)};
  }
}

void limits(const Words& p) {
  const std::int64_t m = p.param(1, 1, kMaxLimits, "the number of limits");
  p.expect(static_cast<std::size_t>(1 + 4 * m), "a policy of {} limits", m);
  // The (window, precision) pairs met so far: at most kMaxLimits, looked through (this check runs on
  // every call: a std::set made an allocation a limit).
  std::pair<std::int64_t, std::int64_t> seen[kMaxLimits];
  std::size_t seen_n = 0;
  std::int64_t buckets = 0;
  for (std::size_t i = 1; i <= static_cast<std::size_t>(m); ++i) {
    const std::size_t base = 2 + 4 * (i - 1);
    p.param(base + 1, 1, kMaxCount, "limit");
    const std::int64_t w = p.param(base + 2, 1, kMaxWindow, "window");
    const std::int64_t P = p.param(base + 3, 1, w, "precision");
    std::int64_t tw = 0;
    std::int64_t tp = 0;
    const bool named = parse_tag(p.at(base), tw, tp) && tw == w && tp == P;
    const bool repeated = std::find(seen, seen + seen_n, std::make_pair(w, P)) != seen + seen_n;
    if (!repeated) seen[seen_n++] = {w, P};
    if (w % P != 0 || w / P > kMaxBuckets || !named || repeated) {
      throw Bad{detail::message(
          "redlimit: policy limit {} (\"{} {} {} {}\") needs a tag that names its window and precision, a precision "
          "that divides the window into at most {} buckets, and a window and precision of its own",
          i, p.at(base), p.at(base + 1), p.at(base + 2), p.at(base + 3), kMaxBuckets)};
    }
    buckets += w / P;
    if (buckets > kMaxBuckets) {
      throw Bad{detail::message("redlimit: a policy of more than {} buckets in all ({} by limit {})", kMaxBuckets,
                                buckets, i)};
    }
  }
}

}  // namespace

std::optional<std::string> params_error(ScriptId id, const std::string_view* words, std::size_t n,
                                        std::string_view params) {
  const Words p(words, n);
  try {
    switch (id) {
      case ScriptId::fixed_window:
      case ScriptId::sliding_log:  // a sliding log's "[compact]": its entries' form (no state here)
        if (id == ScriptId::fixed_window || n != 3 || p.at(3) != "compact") {
          p.expect(2, id == ScriptId::fixed_window ? "a fixed window" : "a sliding log");
        }
        p.param(1, 1, kMaxCount, "limit");
        p.param(2, 1, kMaxWindow, "window");
        break;
      case ScriptId::token_bucket:
        p.expect(3, "a token bucket");
        rate(p, params);
        break;
      case ScriptId::leaky_bucket:
        p.expect(4, "a leaky bucket");
        if (p.at(4) != "meter" && p.at(4) != "shaper") {
          throw Bad{detail::message("redlimit: parameter 4 (mode) is not meter or shaper: {}", p.at(4))};
        }
        rate(p, params);
        break;
      case ScriptId::policy:
        limits(p);
        break;
      case ScriptId::block:
        p.param(1, 0, kMaxWindow, "duration");
        break;
    }
  } catch (const Bad& bad) {
    return bad.message;
  }
  return std::nullopt;
}

}  // namespace redlimit::detail::memory
