#pragma once
// Decoding of the strategy scripts' common reply.
#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "redlimit/decision.hpp"
#include "redlimit/detail/config.hpp"
#include "redlimit/reply.hpp"

namespace redlimit::detail {

// Decodes {allowed, remaining, retry_after_us, reset_after_us, delay_us}, or its short forms for
// an admission whose retry and delay are 0 (lua/epilogue.lua, reply): the integer
// reset_after_us * (limits[0] + 1) + remaining (limits of one), or {remaining, reset_after_us}; into a
// Decision whose `limit` is limits[0] (a policy of one limit, given its window, answers so too: its
// `limits` then holds that limit's state, the decision's own); or a policy's {..., deciding limit
// 1..m, then each limit's remaining and reset_after_us} (6 + 2m integers, m = limits.size() > 1),
// or for its admission the m pairs alone (the decision's remaining their least, its reset_after
// their latest, the first limit with the least left deciding), into one whose `limit` is the
// deciding limit's and whose `limits` holds every limit's state, with windows[i] as its window (0
// when `windows` is shorter). Throws ReplyError for an error reply, or anything but those shapes
// of non-negative integers with allowed in {0, 1} and a deciding index in range.
Decision decode_decision(const Reply& reply, const std::vector<std::int64_t>& limits,
                         const std::vector<std::chrono::microseconds>& windows = {});

// Decodes the reply of a script call that decided n requests: one decision for n = 1, otherwise
// n decisions one after the other: a policy's of m > 1 limits each {2, its m pairs} (an admission)
// or its 6 + 2m integers; another strategy's admission that waits for nothing one negative integer
// e, with x = -1 - e: remaining x / 2 for an even x, whose reset_after is the previous decision's,
// else (x - 1) / 2 = reset_after * (limits[0] + 1) + remaining; or {3, remaining, reset_after};
// any other decision its five integers (lua/epilogue.lua, reply).
std::vector<Decision> decode_decisions(const Reply& reply, std::size_t n, const std::vector<std::int64_t>& limits,
                                       const std::vector<std::chrono::microseconds>& windows = {});

// A policy's admission alone in its call, as the one integer lua/policy.lua packs (packable: the
// limits' remaining as the digits of a mixed radix, limit i's of radix limits[i] + 1,
// the first the lowest), turned into the pairs {remaining_i, reset_after_i} it stands for, which
// decode_decision reads: each limit's reset_after is the end of its current bucket's weight,
// (b + n + 1) * P - now, with P = intervals[i], n = windows[i] / P and b = now / P, `now` the time
// the call sent (its ARGV[1]). Throws ReplyError for a negative integer, one past the limits' digits,
// a call that sent no time of its own ("redis") or one outside [0, 2^53), or a strategy of fewer
// than two limits.
Reply policy_pairs_of(std::int64_t packed, const std::vector<std::int64_t>& limits,
                      const std::vector<std::chrono::microseconds>& windows,
                      const std::vector<std::chrono::microseconds>& intervals, std::string_view now);

}  // namespace redlimit::detail

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/decode-inl.hpp"
#endif
