#pragma once
// Bodies of redlimit/detail/decode.hpp (see redlimit/detail/config.hpp).
#include <algorithm>

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

REDLIMIT_INLINE Decision decode_decision(const Reply& reply, const std::vector<std::int64_t>& limits,
                                         const std::vector<std::chrono::microseconds>& windows) {
  if (reply.is_error()) throw ReplyError(message("error reply: {}", reply.str));
  const std::size_t policy = decode_impl::policy_width(limits.size());
  const std::size_t size = reply.type == Reply::Type::array ? reply.elements.size() : 0;
  // Five integers, or three, {allowed, remaining, reset_after}, for a decision that waits for nothing
  // (lua/epilogue.lua, reply), or a policy's.
  const bool short_form = size == 3;
  if (reply.type != Reply::Type::array || (size != 5 && size != policy && !short_form)) {
    throw ReplyError(message("a strategy script must return an array of 3, 5 or {} integers, not {}", policy,
                             decode_impl::shape_of(reply)));
  }
  for (const auto& e : reply.elements) {
    if (e.type != Reply::Type::integer || e.integer < 0) {
      throw ReplyError("a strategy script must return non-negative integers");
    }
  }
  const auto& v = reply.elements;
  if (v[0].integer > 1) throw ReplyError("the allowed flag must be 0 or 1");
  if (limits.empty()) throw ReplyError("no limits to decode against");
  std::size_t index = 0;
  Decision d;
  if (v.size() == policy) {
    if (v[5].integer < 1 || static_cast<std::uint64_t>(v[5].integer) > limits.size()) {
      throw ReplyError(message("deciding limit {} is not in 1..{}", v[5].integer, limits.size()));
    }
    index = static_cast<std::size_t>(v[5].integer - 1);
    d.limits.resize(limits.size());
    for (std::size_t i = 0; i < limits.size(); ++i) {
      LimitState& s = d.limits[i];
      s.limit = limits[i];
      if (i < windows.size()) s.window = windows[i];
      s.remaining = v[6 + 2 * i].integer;
      s.reset_after = std::chrono::microseconds{v[7 + 2 * i].integer};
    }
  }
  d.allowed = v[0].integer == 1;
  d.limit = limits[index];
  d.remaining = v[1].integer;
  if (short_form) {
    d.reset_after = std::chrono::microseconds{v[2].integer};
  } else {
    d.retry_after = std::chrono::microseconds{v[2].integer};
    d.reset_after = std::chrono::microseconds{v[3].integer};
    d.delay = std::chrono::microseconds{v[4].integer};
  }
  // A policy of one limit (a sliding window) answers as the other strategies do (lua/policy.lua):
  // its limit's state is the decision's.
  if (v.size() != policy && limits.size() == 1 && !windows.empty()) {
    d.limits.push_back(LimitState{limits[0], windows[0], d.remaining, d.reset_after});
  }
  d.limit_index = index;
  return d;
}

REDLIMIT_INLINE std::vector<Decision> decode_decisions(const Reply& reply, std::size_t n,
                                                       const std::vector<std::int64_t>& limits,
                                                       const std::vector<std::chrono::microseconds>& windows) {
  if (n == 1) return {decode_decision(reply, limits, windows)};
  if (reply.is_error()) throw ReplyError(message("error reply: {}", reply.str));
  const std::size_t total = reply.elements.size();
  const std::size_t policy = decode_impl::policy_width(limits.size());
  if (reply.type != Reply::Type::array || n == 0 || total % n != 0 || (total / n != 5 && total / n != policy)) {
    throw ReplyError(message("a strategy script deciding {} requests must return {} or {} integers", n, 5 * n,
                             policy * n));
  }
  const std::size_t width = total / n;
  std::vector<Decision> out;
  out.reserve(n);
  Reply one;
  one.type = Reply::Type::array;
  one.elements.resize(width);
  for (std::size_t i = 0; i < n; ++i) {
    std::copy_n(reply.elements.begin() + static_cast<std::ptrdiff_t>(i * width), width, one.elements.begin());
    out.push_back(decode_decision(one, limits, windows));
  }
  return out;
}

}  // namespace redlimit::detail
