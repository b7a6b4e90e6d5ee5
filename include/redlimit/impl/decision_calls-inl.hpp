#pragma once
// Bodies of redlimit/detail/decision_path.hpp, part two (see redlimit/detail/config.hpp): how a
// path's requests become script calls (group, by_slot, add_calls). Included by
// decision_path-inl.hpp, which holds the rest: the breakers, the replies, failures and accounting.
#include <algorithm>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "redlimit/detail/decision_path.hpp"
#include "redlimit/detail/keys.hpp"

namespace redlimit::detail {

namespace decision_path_impl {

// `positions` grouped by `group_key(position)`: each group in order, the groups in the order of
// their first member.
template <class GroupKey>
std::vector<std::vector<std::size_t>> grouped(const std::vector<std::size_t>& positions, GroupKey group_key) {
  std::vector<std::vector<std::size_t>> groups;
  std::unordered_map<std::size_t, std::size_t> group_of;  // key -> index in groups
  for (std::size_t j : positions) {
    const auto [it, added] = group_of.emplace(group_key(j), groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(j);
  }
  return groups;
}

}  // namespace decision_path_impl

REDLIMIT_INLINE std::size_t DecisionPath::per_call_of(const std::vector<std::chrono::microseconds>& windows,
                                                      const std::vector<std::chrono::microseconds>& intervals) {
  if (intervals.size() != windows.size()) return kMaxPerCall;
  std::int64_t buckets = 0;  // at most Policy::max_buckets() + Policy::max_limits(): checked when made
  for (std::size_t i = 0; i < windows.size(); ++i) buckets += windows[i] / intervals[i] + 1;
  if (buckets <= 0) return kMaxPerCall;
  return static_cast<std::size_t>(std::clamp<std::int64_t>(kMostBucketsPerCall / buckets, 1, kMaxPerCall));
}

// One script call decides many requests (lua/epilogue.lua): the whole batch on a single server; on a
// cluster, one call per master where its masters run the spread functions (scripts_span_node), one
// per hash slot otherwise; at most spec_->per_call requests each (per_call_of). A call of one request is that
// request's own call.
REDLIMIT_INLINE void DecisionPath::group() {
  if (pending_.size() == 1) {  // the common case: the request's own call, moved rather than copied
    members_.emplace_back().push_back(0);
    script_calls_.push_back(std::move(requests_[pending_[0]]));
    alone_ = true;
    return;
  }
  Connection& conn = *ctx_->connection;
  std::vector<std::size_t> all(pending_.size());
  for (std::size_t j = 0; j < all.size(); ++j) all[j] = j;
  if (conn.scripts_span_slots()) {
    add_calls(all, nullptr);
    return;
  }
  if (!span_node_ || !ctx_->options.batch_per_master || script_->spread_function.empty()) {
    for (const auto& g : by_slot(all)) add_calls(g, nullptr);
    return;
  }
  // By node; a call whose requests lie in several slots is a spread call.
  std::vector<std::uint16_t> slots(pending_.size());
  for (std::size_t j = 0; j < slots.size(); ++j) slots[j] = key_slot(requests_[pending_[j]].keys[0]);
  const auto node = [&](std::size_t j) { return conn.node_of(requests_[pending_[j]].keys[0]); };
  for (const auto& g : decision_path_impl::grouped(all, node)) add_calls(g, &slots);
}

REDLIMIT_INLINE std::vector<std::vector<std::size_t>> DecisionPath::by_slot(
    const std::vector<std::size_t>& positions) const {
  return decision_path_impl::grouped(positions,
                                     [&](std::size_t j) { return key_slot(requests_[pending_[j]].keys[0]); });
}

namespace decision_path_impl {

// Whether no key comes twice: an open-addressed table of the keys (a batch is at most kMaxPerCall
// requests), at least twice as large as their count, in one allocation, where a hash set made one a
// key (128 a batch: malloc and free were a third of the client's time in consume_many, perf).
REDLIMIT_INLINE bool all_distinct(const std::vector<std::string>& keys) {
  std::size_t size = 8;
  while (size < 2 * keys.size()) size *= 2;
  std::vector<const std::string*> table(size, nullptr);
  const std::hash<std::string_view> hash;
  for (const std::string& k : keys) {
    std::size_t i = hash(k) & (size - 1);
    for (; table[i] != nullptr; i = (i + 1) & (size - 1)) {
      if (*table[i] == k) return false;
    }
    table[i] = &k;
  }
  return true;
}

}  // namespace decision_path_impl

REDLIMIT_INLINE void DecisionPath::add_calls(const std::vector<std::size_t>& g,
                                             const std::vector<std::uint16_t>* slots) {
  const std::size_t per_call = spec_->per_call;
  for (std::size_t from = 0; from < g.size(); from += per_call) {
    const std::size_t to = std::min(g.size(), from + per_call);
    members_.emplace_back(g.begin() + static_cast<std::ptrdiff_t>(from), g.begin() + static_cast<std::ptrdiff_t>(to));
    const ScriptCall& first = requests_[pending_[g[from]]];
    if (to - from == 1) {
      script_calls_.push_back(first);
      continue;
    }
    // KEYS: each request's (lua/prologue.lua); ARGV: the first request's (its now, and its head:
    // mode, cost, the strategy's parameters), then the costs of the others, unless they all cost
    // what the first does (lua/prologue.lua): fewer arguments for Redis to read and the script to
    // parse. Requests of one path share mode and parameters, so equal heads mean equal costs.
    ScriptCall merged;
    merged.keys.reserve(2 * (to - from));
    merged.args = first.args;
    bool uniform = true;
    for (std::size_t j = from; j < to; ++j) {
      const ScriptCall& c = requests_[pending_[g[j]]];
      merged.keys.insert(merged.keys.end(), c.keys.begin(), c.keys.end());
      uniform = uniform && c.args[1] == first.args[1];
      if (slots != nullptr && (*slots)[g[j]] != (*slots)[g[from]]) merged.spread = true;
    }
    if (!uniform) {
      merged.args.reserve(first.args.size() + (to - from - 1));
      for (std::size_t j = from + 1; j < to; ++j) merged.args.push_back(std::to_string(costs_[pending_[g[j]]]));
    }
    // Consuming requests whose keys all differ say so (mode "4", lua/prologue.lua): the script then
    // keeps no table of the values it wrote, which a key read again would need.
    if (merged.args[1][0] == '1' && decision_path_impl::all_distinct(merged.keys)) merged.args[1][0] = '4';
    script_calls_.push_back(std::move(merged));
  }
}

}  // namespace redlimit::detail
