#pragma once
// The references the library's strategies are compared with, written here from their definitions
// and sharing no code with redlimit (src/memory/ and lua/ are what is under test).
//
// Every rule answers `decide(t)` for a request of cost 1 at time t (absolute microseconds) and, when
// told the request was admitted, `record(t)`. Keeping the two apart is what lets one history (the
// exact log's) be judged by another rule: Cloudflare's "wrongly decided" measure.
#include <cstdint>
#include <deque>
#include <map>

namespace accuracy {

// The exact sliding log: admitted iff fewer than `limit` requests were admitted in (t - window, t].
class ExactLog {
 public:
  ExactLog(std::int64_t limit, std::int64_t window) : limit_(limit), window_(window) {}
  bool decide(std::int64_t t);
  void record(std::int64_t t) { admitted_.push_back(t); }

 private:
  std::int64_t limit_, window_;
  std::deque<std::int64_t> admitted_;
};

// GCRA (the virtual scheduling algorithm of ITU-T I.371): emission interval T = window / limit,
// tolerance (burst - 1) T. Times are kept multiplied by `limit`, so that T = window exactly.
class Gcra {
 public:
  Gcra(std::int64_t limit, std::int64_t window, std::int64_t burst)
      : limit_(limit), window_(window), tolerance_((burst - 1) * window) {}
  bool decide(std::int64_t t) const { return !started_ || tat_ - t * limit_ <= tolerance_; }
  void record(std::int64_t t);

 private:
  std::int64_t limit_, window_, tolerance_;
  bool started_ = false;
  std::int64_t tat_ = 0;  // theoretical arrival time, times limit
};

// The sliding-window counter's rule (seed 004, Cloudflare): buckets of `precision` aligned to the
// epoch; the oldest bucket still partly inside the window is weighted by the part still inside.
// Admitted iff full + old * (P - r) / P + 1 <= limit, compared multiplied by P to stay exact.
// With precision == window this is also the fixed window's rule when `fixed` is set: only the
// current bucket counts.
class CounterRule {
 public:
  CounterRule(std::int64_t limit, std::int64_t window, std::int64_t precision, bool fixed = false)
      : limit_(limit), window_(window), precision_(precision), fixed_(fixed) {}
  bool decide(std::int64_t t);
  void record(std::int64_t t) { ++buckets_[t / precision_]; }

 private:
  std::int64_t limit_, window_, precision_;
  bool fixed_;
  std::map<std::int64_t, std::int64_t> buckets_;  // bucket index -> requests admitted in it
};

}  // namespace accuracy
