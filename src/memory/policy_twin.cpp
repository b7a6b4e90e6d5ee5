// Twin of lua/policy.lua (also SlidingWindow, a policy of one limit): sliding-window limits checked
// together and recorded all-or-nothing in one hash of "<tag>:<bucket>" fields.
#include "twins.hpp"

namespace redlimit::detail::memory {

std::int64_t PolicyTwin::Limit::count_at(std::int64_t idx) const {
  for (const auto& [i, c] : counts) {
    if (i == idx) return c;
  }
  return 0;
}

std::int64_t& PolicyTwin::Limit::count_ref(std::int64_t idx) {
  for (auto& [i, c] : counts) {
    if (i == idx) return c;
  }
  counts.emplace_back(idx, 0);
  return counts.back().second;
}

namespace {

// string.match(field, '^(.*):(%d+)$'): the greedy (.*) ends at the last ':' that only digits follow.
bool split_field(std::string_view field, std::string_view& tag, std::int64_t& idx) {
  const std::size_t colon = field.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view digits = field.substr(colon + 1);
  if (digits.empty()) return false;
  for (const char ch : digits) {
    if (ch < '0' || ch > '9') return false;
  }
  if (!parse_int(digits, idx)) return false;
  tag = field.substr(0, colon);
  return true;
}

std::string field_name(std::string_view tag, std::int64_t idx) {
  std::string f;
  f.reserve(tag.size() + 21);
  f.append(tag);
  f += ':';
  f += std::to_string(idx);
  return f;
}

BucketHash* as_hash(KeyRef& key) {
  Entry* e = key.get();
  if (e == nullptr) return nullptr;
  if (auto* h = std::get_if<BucketHash>(&e->state)) return h;
  wrong_type();
}

// retry_after(l): the earliest time the limit has room for `cost`, walking forward one bucket
// interval at a time (see policy.lua for the derivation).
std::int64_t retry_after(const PolicyTwin::Limit& l, std::int64_t cost, std::int64_t now) {
  std::int64_t s = l.full;
  const std::int64_t last = std::max(l.newest.value_or(l.b), l.b) - l.b + l.n + 1;
  for (std::int64_t k = 0; k <= last; ++k) {
    const std::int64_t o = l.count_at(l.b + k - l.n);
    if (k > 0) s = s - o;
    const std::int64_t x = l.limit - s - cost;
    if (x >= 0) {
      std::int64_t d = 0;
      if (o > 0) d = std::max<std::int64_t>(0, l.P - floor_div(x * l.P, o));
      if (k == 0) d = std::max(d, l.r);
      if (d < l.P) return (l.b + k) * l.P + d - now;
    }
  }
  return 0;  // not reached: the last interval has an empty weighted bucket
}

}  // namespace

// The limits are read once per call, as the script does; decide() resets what depends on the request.
PolicyTwin::PolicyTwin(const Call& c) : c_(c) {
  const std::int64_t m = c.num(4);
  limits_.resize(static_cast<std::size_t>(std::max<std::int64_t>(0, m)));
  for (std::int64_t i = 1; i <= m; ++i) {
    const auto base = static_cast<std::size_t>(5 + 4 * (i - 1));
    Limit& l = limits_[static_cast<std::size_t>(i - 1)];
    l.tag = c.arg(base).value_or(std::string_view{});
    l.limit = c.num(base + 1);
    l.P = c.num(base + 3);
    l.n = c.num(base + 2) / l.P;
    l.r = c.now % l.P;
    l.b = (c.now - l.r) / l.P;
  }
}

// HGETALL: sort each bucket into its limit; too old, or left by a limit no longer in the policy, is
// stale. A tag named twice belongs to its last limit, as by_tag[l.tag] = l keeps the last.
void PolicyTwin::read(KeyRef& key, std::vector<std::string>& stale) {
  const BucketHash* hash = as_hash(key);
  if (hash == nullptr) return;
  for (const auto& [field, count] : hash->fields) {
    std::string_view tag;
    std::int64_t idx = 0;
    Limit* l = nullptr;
    if (split_field(field, tag, idx)) {
      for (auto& cand : limits_) {
        if (cand.tag == tag) l = &cand;
      }
    }
    if (l != nullptr && idx >= l->b - l->n) {
      l->count_ref(idx) = count;
      if (idx == l->b - l->n) {
        l->old = count;
      } else {
        l->full = l->full + count;  // buckets ahead of b: clock skew
      }
      if (!l->newest || idx > *l->newest) l->newest = idx;
    } else {
      stale.push_back(field);
    }
  }
}

// A refund: each limit gives `cost` back from its newest buckets (HDEL or HINCRBY -take).
void PolicyTwin::give_back(KeyRef& key, std::int64_t cost) {
  for (auto& l : limits_) {
    std::int64_t left = cost;
    std::int64_t idx = std::max(l.newest.value_or(l.b), l.b);
    while (left > 0 && idx >= l.b - l.n) {
      const std::int64_t cnt = l.count_at(idx);
      const std::int64_t take = std::min(cnt, left);
      if (take > 0) {
        const std::int64_t weight = (idx == l.b - l.n) ? (l.P - l.r) : l.P;
        l.usedP = l.usedP - take * weight;
        l.count_ref(idx) = cnt - take;
        // take > 0: the count came from the hash, which therefore exists.
        auto& fields = std::get<BucketHash>(key.get()->state).fields;
        if (cnt == take) {
          fields.erase(field_name(l.tag, idx));
        } else {
          fields[field_name(l.tag, idx)] -= take;
        }
        if (fields.empty()) key.erase();  // Redis deletes an emptied hash
        left = left - take;
      }
      idx = idx - 1;
    }
    l.newest.reset();
    for (const auto& [i, cnt] : l.counts) {
      if (cnt > 0 && (!l.newest || i > *l.newest)) l.newest = i;
    }
  }
}

// An admission: HINCRBY each limit's current bucket, then delete_stale().
void PolicyTwin::take(KeyRef& key, std::int64_t cost, const std::vector<std::string>& stale) {
  BucketHash* hash = as_hash(key);
  if (hash == nullptr) hash = &std::get<BucketHash>(key.create(BucketHash{}).state);
  for (auto& l : limits_) {
    hash->fields[field_name(l.tag, l.b)] += cost;
    l.usedP = l.usedP + cost * l.P;
    l.count_ref(l.b) += cost;
    if (!l.newest || l.b > *l.newest) l.newest = l.b;
  }
  for (const auto& f : stale) hash->fields.erase(f);
  if (hash->fields.empty()) key.erase();
}

// The deciding limit: when rejected, the one that makes the caller wait longest; when admitted, the
// one with the least quota left. Then the TTL: the hash is all stale once every newest bucket is.
Decided PolicyTwin::conclude(KeyRef& key, std::int64_t cost, bool allowed) const {
  std::optional<std::int64_t> remaining;
  Decided d;
  d.each.reserve(2 * limits_.size());
  for (std::size_t i = 0; i < limits_.size(); ++i) {
    const Limit& l = limits_[i];
    const std::int64_t rem = std::max<std::int64_t>(0, floor_div(l.limit * l.P - l.usedP, l.P));
    std::int64_t wait = 0;
    if (!allowed && !l.allowed) wait = retry_after(l, cost, c_.now);
    std::int64_t own_reset = 0;
    if (l.newest) own_reset = std::max<std::int64_t>(0, (*l.newest + l.n + 1) * l.P - c_.now);
    d.each.push_back(rem);
    d.each.push_back(own_reset);
    d.reset_after = std::max(d.reset_after, own_reset);
    if (allowed) {
      if (!remaining || rem < *remaining) d.decider = static_cast<std::int64_t>(i) + 1;
    } else if (wait > d.retry_after) {
      d.decider = static_cast<std::int64_t>(i) + 1;
    }
    if (!remaining || rem < *remaining) remaining = rem;
    d.retry_after = std::max(d.retry_after, wait);
  }
  if (allowed && c_.record && d.reset_after > 0) key.expire_ms(c_.now, ttl_ms(d.reset_after));
  d.allowed = allowed ? 1 : 0;
  d.remaining = remaining.value_or(0);
  d.has_remaining = remaining.has_value();
  return d;
}

Decided PolicyTwin::decide(KeyRef& key, std::int64_t cost) {
  for (auto& l : limits_) {
    l.counts.clear();
    l.full = l.old = 0;
    l.newest.reset();
  }
  std::vector<std::string> stale;
  read(key, stale);

  bool allowed = true;
  for (auto& l : limits_) {
    l.usedP = l.full * l.P + l.old * (l.P - l.r);
    l.allowed = l.usedP + cost * l.P <= l.limit * l.P;
    allowed = allowed && l.allowed;
  }
  if (c_.refund) {
    allowed = true;
    give_back(key, cost);
  } else if (allowed && c_.record) {
    take(key, cost, stale);
  }
  return conclude(key, cost, allowed);
}

}  // namespace redlimit::detail::memory
