#pragma once
// The forms in which the memory twins reply, as lua/epilogue.lua's reply() and batch loop answer
// (memory_scripts.cpp runs the calls; this turns their decisions into the reply).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "redlimit/reply.hpp"
#include "twins.hpp"

namespace redlimit::detail::memory {

// The decisions of a call as the reply, in epilogue.lua's forms (reply): an admission that waits
// for nothing goes short, alone in a call of one request the integer reset_after * (L + 1) +
// remaining (L: the strategy's limit, `most`) when that is below 2^53, else {remaining,
// reset_after}; in a batch one negative integer, -1 - 2 * remaining when its reset_after is the
// previous decision's, else -2 - 2 * (reset_after * (L + 1) + remaining) below 2^52, else
// {3, remaining, reset_after}; a policy's of several limits (width 6 + 2m) as its limits' pairs,
// after a 2 in a batch, or alone in its call as one integer when policy.lua packs it (pack_with,
// policy_integer). A Lua table becomes a Redis array up to its first nil: a policy of no limits
// has a nil remaining, which ends the reply after its `allowed`.
class Out {
 public:
  Out(std::size_t n, int width, std::int64_t most) : width_(width), one_(n == 1), most_(most) {
    items_.reserve(n * static_cast<std::size_t>(width));
  }
  void add(const Decided& d);
  Reply done() { return integer_ ? Reply::make_integer(*integer_) : Reply::make_array(std::move(items_)); }
  // A policy's call: its admission alone may answer as one integer (policy_integer).
  void pack_with(const PolicyTwin* policy) { policy_ = policy; }

 private:
  void add_whole(const Decided& d);
  // reset_after * (most + 1) + remaining, when remaining is in [0, most] and that is below 2^bits.
  std::optional<std::int64_t> packed_below(const Decided& d, int bits) const;
  void push(std::int64_t v) { items_.push_back(Reply::make_integer(v)); }
  std::vector<Reply> items_;
  int width_;
  bool one_;           // the call decides one request
  std::int64_t most_;  // the strategy's limit (its most_cost)
  bool cut_ = false;
  std::optional<std::int64_t> integer_;     // the packed admission of a call of one request
  const PolicyTwin* policy_ = nullptr;      // pack_with()
  std::optional<std::int64_t> last_reset_;  // the previous decision's reset_after
};

}  // namespace redlimit::detail::memory
