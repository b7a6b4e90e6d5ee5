#pragma once
// Bodies of redlimit/detail/decode.hpp (see redlimit/detail/config.hpp).
#include <algorithm>

#include "redlimit/detail/decode.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

REDLIMIT_INLINE Decision decode_decision(const Reply& reply, const std::vector<std::int64_t>& limits) {
  if (reply.is_error()) throw ReplyError(message("error reply: {}", reply.str));
  if (reply.type != Reply::Type::array || (reply.elements.size() != 5 && reply.elements.size() != 6)) {
    throw ReplyError("a strategy script must return an array of 5 or 6 integers");
  }
  for (const auto& e : reply.elements) {
    if (e.type != Reply::Type::integer || e.integer < 0) {
      throw ReplyError("a strategy script must return non-negative integers");
    }
  }
  const auto& v = reply.elements;
  if (v[0].integer > 1) throw ReplyError("the allowed flag must be 0 or 1");
  std::size_t index = 0;
  if (v.size() == 6) {
    if (v[5].integer < 1 || static_cast<std::uint64_t>(v[5].integer) > limits.size()) {
      throw ReplyError(message("deciding limit {} is not in 1..{}", v[5].integer, limits.size()));
    }
    index = static_cast<std::size_t>(v[5].integer - 1);
  }
  if (limits.empty()) throw ReplyError("no limits to decode against");
  Decision d;
  d.allowed = v[0].integer == 1;
  d.limit = limits[index];
  d.remaining = v[1].integer;
  d.retry_after = std::chrono::microseconds{v[2].integer};
  d.reset_after = std::chrono::microseconds{v[3].integer};
  d.delay = std::chrono::microseconds{v[4].integer};
  d.limit_index = index;
  return d;
}

REDLIMIT_INLINE std::vector<Decision> decode_decisions(const Reply& reply, std::size_t n,
                                                       const std::vector<std::int64_t>& limits) {
  if (n == 1) return {decode_decision(reply, limits)};
  if (reply.is_error()) throw ReplyError(message("error reply: {}", reply.str));
  const std::size_t total = reply.elements.size();
  if (reply.type != Reply::Type::array || total % n != 0 || (total / n != 5 && total / n != 6)) {
    throw ReplyError(message("a strategy script deciding {} requests must return {} or {} integers", n, 5 * n, 6 * n));
  }
  const std::size_t width = total / n;
  std::vector<Decision> out;
  out.reserve(n);
  Reply one;
  one.type = Reply::Type::array;
  one.elements.resize(width);
  for (std::size_t i = 0; i < n; ++i) {
    std::copy_n(reply.elements.begin() + static_cast<std::ptrdiff_t>(i * width), width, one.elements.begin());
    out.push_back(decode_decision(one, limits));
  }
  return out;
}

}  // namespace redlimit::detail
