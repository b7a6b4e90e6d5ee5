#pragma once
// Bodies of redlimit/detail/decode.hpp (see redlimit/detail/config.hpp).
#include <algorithm>
#include <charconv>
#include <cstdint>

#include "redlimit/detail/decode.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

namespace decode_impl {

// The length of a policy's decision: allowed .. delay, the deciding limit, a pair per limit.
inline std::size_t policy_width(std::size_t m) { return 6 + 2 * m; }

// What came instead of a decision, for the error that reports it (a string cut to 64 bytes).
inline std::string shape_of(const Reply& r) {
  switch (r.type) {
    case Reply::Type::nil: return "nil";
    case Reply::Type::integer: return message("the integer {}", r.integer);
    case Reply::Type::array: return message("an array of {}", r.elements.size());
    default: return message("the string \"{}\"", printable(r.str.substr(0, 64)));
  }
}

}  // namespace decode_impl

namespace decode_impl {

// Each limit's state, from the pairs (remaining, reset_after) at v[from], into d.limits.
inline void limit_states(const std::vector<Reply>& v, std::size_t from, const std::vector<std::int64_t>& limits,
                         const std::vector<std::chrono::microseconds>& windows, Decision& d) {
  d.limits.resize(limits.size());
  for (std::size_t i = 0; i < limits.size(); ++i) {
    LimitState& s = d.limits[i];
    s.limit = limits[i];
    if (i < windows.size()) s.window = windows[i];
    s.remaining = v[from + 2 * i].integer;
    s.reset_after = std::chrono::microseconds{v[from + 2 * i + 1].integer};
  }
}

// A policy's admission from its limits' states alone (lua/parts/policy_writes.lua, conclude): the least remaining,
// the latest reset, and the first limit with the least left deciding; retry and delay 0.
inline std::size_t admission_of(Decision& d) {
  std::size_t index = 0;
  for (std::size_t i = 0; i < d.limits.size(); ++i) {
    if (d.limits[i].remaining < d.limits[index].remaining) index = i;
    d.reset_after = std::max(d.reset_after, d.limits[i].reset_after);
  }
  d.allowed = true;
  d.remaining = d.limits[index].remaining;
  return index;
}

}  // namespace decode_impl

namespace decode_impl {

// One request's admission that waits for nothing, as one integer: reset_after * (limit + 1) +
// remaining, from a strategy of one limit (lua/epilogue.lua, reply): the short form {remaining,
// reset_after} it stands for, read straight into a Decision (a single decision's commonest reply:
// no array built for it). A negative integer gives a negative remaining, which is refused.
inline Decision short_form_of(std::int64_t v, const std::vector<std::int64_t>& limits,
                              const std::vector<std::chrono::microseconds>& windows) {
  if (limits.size() != 1 || limits[0] < 1 || limits[0] >= (std::int64_t{1} << 53)) {
    throw ReplyError(message("an integer answers for a strategy of one limit below 2^53, not {}", limits.size()));
  }
  if (v < 0) throw ReplyError("a strategy script must return non-negative integers");
  Decision d;
  d.allowed = true;
  d.remaining = v % (limits[0] + 1);
  d.reset_after = std::chrono::microseconds{v / (limits[0] + 1)};
  d.limit = limits[0];
  // As decode_decision's short form: a policy of one limit (a sliding window) states its limit.
  if (!windows.empty()) d.limits.push_back(LimitState{limits[0], windows[0], d.remaining, d.reset_after});
  return d;
}

}  // namespace decode_impl

REDLIMIT_INLINE Decision decode_decision(const Reply& reply, const std::vector<std::int64_t>& limits,
                                         const std::vector<std::chrono::microseconds>& windows) {
  if (reply.is_error()) throw ReplyError(message("error reply: {}", reply.str));
  if (reply.type == Reply::Type::integer) {
    return decode_impl::short_form_of(reply.integer, limits, windows);
  }
  const std::size_t policy = decode_impl::policy_width(limits.size());
  const std::size_t size = reply.type == Reply::Type::array ? reply.elements.size() : 0;
  // Five integers, or a policy's; for an admission that waits for nothing one integer (above), two,
  // {remaining, reset_after}, or a policy's pairs alone (lua/epilogue.lua, reply).
  const bool short_form = size == 2;
  const bool policy_admission = limits.size() > 1 && size == 2 * limits.size();
  if (reply.type != Reply::Type::array || (size != 5 && size != policy && !short_form && !policy_admission)) {
    throw ReplyError(message("a strategy script must return an integer or an array of 2, 5, {} or {} integers, not {}",
                             2 * limits.size(), policy, decode_impl::shape_of(reply)));
  }
  for (const auto& e : reply.elements) {
    if (e.type != Reply::Type::integer || e.integer < 0) {
      throw ReplyError("a strategy script must return non-negative integers");
    }
  }
  const auto& v = reply.elements;
  if (!short_form && !policy_admission && v[0].integer > 1) throw ReplyError("the allowed flag must be 0 or 1");
  if (limits.empty()) throw ReplyError("no limits to decode against");
  std::size_t index = 0;
  Decision d;
  if (policy_admission) {
    decode_impl::limit_states(v, 0, limits, windows, d);
    index = decode_impl::admission_of(d);
  } else if (v.size() == policy) {
    if (v[5].integer < 1 || static_cast<std::uint64_t>(v[5].integer) > limits.size()) {
      throw ReplyError(message("deciding limit {} is not in 1..{}", v[5].integer, limits.size()));
    }
    index = static_cast<std::size_t>(v[5].integer - 1);
    decode_impl::limit_states(v, 6, limits, windows, d);
  }
  if (short_form) {
    d.allowed = true;
    d.remaining = v[0].integer;
    d.reset_after = std::chrono::microseconds{v[1].integer};
  } else if (!policy_admission) {
    d.allowed = v[0].integer == 1;
    d.remaining = v[1].integer;
    d.retry_after = std::chrono::microseconds{v[2].integer};
    d.reset_after = std::chrono::microseconds{v[3].integer};
    d.delay = std::chrono::microseconds{v[4].integer};
  }
  d.limit = limits[index];
  // A policy of one limit (a sliding window) answers as the other strategies do (lua/policy.lua):
  // its limit's state is the decision's.
  if (v.size() != policy && limits.size() == 1 && !windows.empty()) {
    d.limits.push_back(LimitState{limits[0], windows[0], d.remaining, d.reset_after});
  }
  d.limit_index = index;
  return d;
}

namespace decode_impl {

// An admission of a batch of one limit `limit` as its one negative integer e (lua/epilogue.lua,
// reply), into `one`'s five integers: with x = -1 - e, x even is remaining x / 2 with the previous
// decision's reset_after (`last_reset`: none before the first), x odd is p = (x - 1) / 2 =
// reset_after * (limit + 1) + remaining. False for any other integer.
inline bool negative_admission(std::int64_t e, std::int64_t limit, const std::int64_t* last_reset, Reply& one) {
  constexpr std::int64_t two53 = std::int64_t{1} << 53;
  if (e >= 0 || e < -two53 || limit < 1 || limit >= two53) return false;
  const std::int64_t x = -1 - e, half = x / 2;
  if (x % 2 == 0 && last_reset == nullptr) return false;
  const std::int64_t remaining = x % 2 == 0 ? half : half % (limit + 1);
  const std::int64_t reset = x % 2 == 0 ? *last_reset : half / (limit + 1);
  const std::int64_t ints[] = {1, remaining, 0, reset, 0};
  for (std::size_t i = 0; i < 5; ++i) one.elements[i] = Reply::make_integer(ints[i]);
  return true;
}

// The next decision of a batch of one limit `limit`, from elements[at]: one negative integer (an
// admission waiting for nothing: negative_admission), {3, remaining, reset_after} (another such
// admission) or the five integers, as `one`'s five integers; `at` moves past it. False when the
// elements do not hold one of those shapes.
inline bool next_decision(const std::vector<Reply>& e, std::size_t& at, std::int64_t limit,
                          const std::int64_t* last_reset, Reply& one) {
  if (at >= e.size() || e[at].type != Reply::Type::integer) return false;
  const std::int64_t tag = e[at].integer;
  if (tag < 0) {
    if (!negative_admission(tag, limit, last_reset, one)) return false;
    ++at;
    return true;
  }
  const std::size_t len = tag == 3 ? 3 : 5;
  if (e.size() - at < len) return false;
  for (std::size_t i = at; i < at + len; ++i) {
    if (e[i].type != Reply::Type::integer || e[i].integer < 0) return false;
  }
  if (len == 5) {  // allowed 0 or 1; decode_decision refuses any other
    std::copy_n(e.begin() + static_cast<std::ptrdiff_t>(at), 5, one.elements.begin());
  } else {
    const std::int64_t ints[] = {1, e[at + 1].integer, 0, e[at + 2].integer, 0};
    for (std::size_t i = 0; i < 5; ++i) one.elements[i] = Reply::make_integer(ints[i]);
  }
  at += len;
  return true;
}

}  // namespace decode_impl

REDLIMIT_INLINE std::vector<Decision> decode_decisions(const Reply& reply, std::size_t n,
                                                       const std::vector<std::int64_t>& limits,
                                                       const std::vector<std::chrono::microseconds>& windows) {
  if (n == 1) return {decode_decision(reply, limits, windows)};
  if (reply.is_error()) throw ReplyError(message("error reply: {}", reply.str));
  if (reply.type != Reply::Type::array || n == 0) {
    throw ReplyError(message("a strategy script deciding {} requests must return an array", n));
  }
  if (limits.empty()) throw ReplyError("no limits to decode against");
  const auto& e = reply.elements;
  std::vector<Decision> out;
  out.reserve(n);
  Reply one;
  one.type = Reply::Type::array;
  std::size_t at = 0;
  if (limits.size() > 1) {  // a policy's: {2, its limits' pairs} (an admission), or whole
    const std::size_t width = decode_impl::policy_width(limits.size());
    for (std::size_t i = 0; i < n; ++i) {
      const bool admission = at < e.size() && e[at].type == Reply::Type::integer && e[at].integer == 2;
      const std::size_t from = admission ? at + 1 : at, len = admission ? width - 6 : width;
      if (e.size() - from < len) {
        throw ReplyError(message("decision {} of {} in a policy script's reply is cut short", i + 1, n));
      }
      one.elements.assign(e.begin() + static_cast<std::ptrdiff_t>(from),
                          e.begin() + static_cast<std::ptrdiff_t>(from + len));
      out.push_back(decode_decision(one, limits, windows));
      at = from + len;
    }
    if (at != e.size())
      throw ReplyError(message("{} integers follow a policy script's {} decisions", e.size() - at, n));
    return out;
  }
  one.elements.resize(5);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t last_reset = out.empty() ? 0 : out.back().reset_after.count();
    if (!decode_impl::next_decision(e, at, limits.front(), out.empty() ? nullptr : &last_reset, one)) {
      throw ReplyError(
          message("decision {} of {} in a strategy script's reply is not an admission's negative integer, "
                  "(3, remaining, reset_after) or five integers",
                  i + 1, n));
    }
    out.push_back(decode_decision(one, limits, windows));
  }
  if (at != e.size())
    throw ReplyError(message("{} integers follow a strategy script's {} decisions", e.size() - at, n));
  return out;
}

REDLIMIT_INLINE Reply policy_pairs_of(std::int64_t packed, const std::vector<std::int64_t>& limits,
                                      const std::vector<std::chrono::microseconds>& windows,
                                      const std::vector<std::chrono::microseconds>& intervals,
                                      std::string_view now_arg) {
  std::int64_t now = -1;
  const char* end = now_arg.data() + now_arg.size();
  const auto [at, ec] = std::from_chars(now_arg.data(), end, now);
  // The scripts take a time in [0, 2^53) (lua/prologue.lua); the client sends no other.
  if (ec != std::errc() || at != end || now < 0 || now >= (std::int64_t{1} << 53)) {
    throw ReplyError(message("an integer answers a policy's call that sent its own time, not \"{}\"",
                             printable(now_arg.substr(0, 32))));
  }
  if (limits.size() < 2 || windows.size() != limits.size() || intervals.size() != limits.size() || packed < 0) {
    throw ReplyError(message("the integer {} is no admission of a policy of {} limits", packed, limits.size()));
  }
  std::vector<Reply> pairs;
  pairs.reserve(2 * limits.size());
  std::int64_t rest = packed;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const std::int64_t radix = limits[i] + 1, P = intervals[i].count(), w = windows[i].count();
    if (limits[i] < 1 || P < 1 || w < P || w % P != 0 || w > INT64_MAX - P) {
      throw ReplyError(message("policy limit {} cannot read a packed admission", i + 1));
    }
    // (b + n + 1) * P - now, with b * P = now - now % P and n * P = w: no product to overflow
    pairs.push_back(Reply::make_integer(rest % radix));
    pairs.push_back(Reply::make_integer(w + P - now % P));
    rest /= radix;
  }
  if (rest != 0) throw ReplyError(message("the integer {} is past the digits of the policy's limits", packed));
  return Reply::make_array(std::move(pairs));
}

}  // namespace redlimit::detail
