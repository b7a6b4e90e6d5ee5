// Twin of lua/policy.lua (also SlidingWindow, a policy of one limit): sliding-window limits checked
// together and recorded all-or-nothing in one hash of "<tag>:<bucket>" fields.
#include "twins.hpp"

namespace redlimit::detail::memory {

std::int64_t PolicyTwin::Limit::count_at(std::int64_t idx) const {
  const auto it = counts.find(idx);
  return it == counts.end() ? 0 : it->second;
}

std::int64_t& PolicyTwin::Limit::count_ref(std::int64_t idx) { return counts[idx]; }

namespace {

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

// weighted(l, old): the old bucket's units in the window, rounded up.
std::int64_t weighted(const PolicyTwin::Limit& l, std::int64_t old) { return old - muldiv(old, l.r, l.P).q; }

// parse_tag(tag): a tag's window and precision in us, as format_duration writes them ("1h@1m",
// "90s"); false for anything else, as the script's patterns and unit table decide.
bool number_unit(std::string_view s, std::int64_t& us) {
  std::size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  std::size_t j = i;
  while (j < s.size() && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z'))) ++j;
  std::int64_t n = 0;
  if (i == 0 || j == i || j != s.size() || !parse_int(s.substr(0, i), n)) return false;
  const std::string_view u = s.substr(i);
  constexpr std::pair<std::string_view, std::int64_t> units[] = {
      {"d", 86400000000}, {"h", 3600000000}, {"m", 60000000}, {"s", 1000000}, {"ms", 1000}, {"us", 1}};
  for (const auto& [name, size] : units) {
    if (u == name) {
      us = n * size;
      return true;
    }
  }
  return false;
}

// The buckets of `l` past `above` that hold units, oldest first (policy.lua's buckets_with_units):
// what a refund and a wait walk bucket by bucket.
std::vector<std::int64_t> buckets_with_units(const PolicyTwin::Limit& l, std::int64_t above) {
  std::vector<std::int64_t> list;
  for (const auto& [i, c] : l.counts) {
    if (i > above && c > 0) list.push_back(i);
  }
  std::sort(list.begin(), list.end());
  return list;
}

// A limit's own reset_after (lua/parts/policy_writes.lua, own_reset): until its newest bucket stops weighing
// anything; 0 when it has none.
std::int64_t own_reset(const PolicyTwin::Limit& l, std::int64_t now) {
  return l.newest ? std::max<std::int64_t>(0, (*l.newest + l.n + 1) * l.P - now) : 0;
}

// retry_after(l): the earliest time the limit has room for `cost`, walking forward one bucket
// interval at a time (see policy.lua for the derivation), over the limit's buckets in order: an
// interval whose weighted bucket is empty changes nothing, so while the request does not fit the
// walk jumps to the next bucket with units, as policy.lua's does past bucket b + 1 (where a client
// whose clock runs ahead may have written any distance away). Everywhere else the two walks visit
// the same intervals; skipping empty ones here too keeps the walk linear in the buckets.
std::int64_t retry_after(const PolicyTwin::Limit& l, std::int64_t cost, std::int64_t now) {
  const std::vector<std::int64_t> buckets = buckets_with_units(l, l.b - l.n - 1);
  std::size_t next = 0;  // the first bucket at or past the current interval's weighted one
  std::int64_t s = l.full;
  const std::int64_t last = std::max(l.newest.value_or(l.b), l.b) - l.b + l.n + 1;
  for (std::int64_t k = 0; k <= last;) {
    const std::int64_t weighted = l.b + k - l.n;
    while (next < buckets.size() && buckets[next] < weighted) ++next;
    const bool has = next < buckets.size() && buckets[next] == weighted;
    const std::int64_t o = has ? l.count_at(weighted) : 0;
    if (k > 0) s = s - o;
    const std::int64_t x = l.limit - s - cost;
    if (x >= 0) {
      std::int64_t d = 0;
      if (x < o) d = l.P - muldiv(x, l.P, o).q;
      if (k == 0) d = std::max(d, l.r);
      if (d < l.P) return (l.b + k) * l.P + d - now;
    }
    ++k;
    if (x >= 0) continue;
    if (has) ++next;
    if (next == buckets.size()) break;  // nothing left to leave the window: it never fits
    k = std::max(k, buckets[next] - l.b + l.n);
  }
  return 0;  // not reached when cost <= limit: the last interval has an empty weighted bucket
}

}  // namespace

// helpers.lua's split_field, string.match(field, '^([^:]*):(%d+)$'): the field's one ':', digits after it.
bool split_field(std::string_view field, std::string_view& tag, std::int64_t& idx) {
  const std::size_t colon = field.find(':');
  if (colon == std::string_view::npos || field.find(':', colon + 1) != std::string_view::npos) return false;
  const std::string_view digits = field.substr(colon + 1);
  if (digits.empty()) return false;
  for (const char ch : digits) {
    if (ch < '0' || ch > '9') return false;
  }
  if (!parse_int(digits, idx)) return false;
  tag = field.substr(0, colon);
  return true;
}

bool parse_tag(std::string_view tag, std::int64_t& w, std::int64_t& p) {
  const std::size_t at = tag.find('@');
  if (at == std::string_view::npos) {
    if (!number_unit(tag, w)) return false;
    p = w;
    return true;
  }
  return number_unit(tag.substr(0, at), w) && number_unit(tag.substr(at + 1), p);
}

// The limits are read once per call, as the script does; decide() resets what depends on the request.
std::int64_t PolicyTwin::most_cost() const {
  std::int64_t least = limits_.empty() ? 0 : limits_.front().limit;
  for (const Limit& l : limits_) least = std::min(least, l.limit);
  return least;
}

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

namespace {

// A limit that left the policy: its window and precision, and its buckets.
struct Gone {
  std::string_view tag;
  std::int64_t w = 0, P = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> counts;
};

// adopt(l, src): the counts of a limit that left, regrouped into `l` (policy.lua's Reconfiguration).
void adopt(PolicyTwin::Limit& l, const Gone& src, std::int64_t now) {
  for (const auto& [idx, c] : src.counts) {
    const std::int64_t t = std::min((idx + 1) * src.P - 1, now);
    const std::int64_t i = floor_div(t, l.P);
    if (i >= l.b - l.n) l.count_ref(i) += c;
  }
  for (const auto& [i, c] : l.counts) {
    if (i == l.b - l.n) {
      l.old = c;
    } else {
      l.full = l.full + c;
    }
    if (!l.newest || i > *l.newest) l.newest = i;
  }
  l.adopted = true;
}

}  // namespace

// HGETALL: sort each bucket into its limit; too old, or left by a limit no longer in the policy, is
// stale. A tag named twice belongs to its last limit, as by_tag[l.tag] = l keeps the last. Then
// limits without buckets adopt those of the longest window that left.
void PolicyTwin::read(KeyRef& key, std::vector<std::string>& stale) {
  // redis.pcall('HGETALL'): a key of another type reads as none, deleted before a write
  // (epilogue.lua, foreign keys).
  if (const Entry* e = key.get(); e != nullptr && !std::holds_alternative<BucketHash>(e->state)) {
    if (c_.record || c_.refund) key.erase();
    return;
  }
  const BucketHash* hash = as_hash(key);
  if (hash == nullptr) return;
  std::vector<Gone> gone;
  for (const auto& [field, count] : hash->fields) {
    std::string_view tag;
    std::int64_t idx = 0;
    Limit* l = nullptr;
    const bool parsed = split_field(field, tag, idx);
    if (!parsed && field == kBlockField && count > c_.now) {  // a block in force: kept
      blocked_until_ = count;
      continue;
    }
    if (parsed) {
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
      continue;
    }
    stale.push_back(field);
    if (!parsed || l != nullptr) continue;
    auto g = std::find_if(gone.begin(), gone.end(), [&](const Gone& x) { return x.tag == tag; });
    if (g == gone.end()) {
      Gone fresh;
      fresh.tag = tag;
      if (!parse_tag(tag, fresh.w, fresh.P)) continue;
      gone.push_back(std::move(fresh));
      g = gone.end() - 1;
    }
    g->counts.emplace_back(idx, count);
  }
  const Gone* src = nullptr;
  for (const auto& g : gone) {
    if (src == nullptr || g.w > src->w || (g.w == src->w && (g.P < src->P || (g.P == src->P && g.tag < src->tag)))) {
      src = &g;
    }
  }
  if (src == nullptr) return;
  for (auto& l : limits_) {
    if (!l.newest) adopt(l, *src, c_.now);
  }
}

// own(key, l): adopted counts become the limit's own fields (HINCRBY) before its first write.
void PolicyTwin::own(KeyRef& key, Limit& l) {
  if (!l.adopted) return;
  BucketHash* hash = as_hash(key);
  if (hash == nullptr) hash = &std::get<BucketHash>(key.create(BucketHash{}).state);
  for (const auto& [i, c] : l.counts) hash->fields[field_name(l.tag, i)] += c;
  l.adopted = false;
}

// A refund: each limit gives `cost` back from its newest buckets (HDEL or HINCRBY -take).
void PolicyTwin::give_back(KeyRef& key, std::int64_t cost) {
  for (auto& l : limits_) {
    own(key, l);
    std::int64_t left = cost;
    const std::vector<std::int64_t> held = buckets_with_units(l, l.b - l.n - 1);
    for (auto it = held.rbegin(); it != held.rend(); ++it) {  // from the newest down
      const std::int64_t idx = *it;
      if (left <= 0) break;
      const std::int64_t cnt = l.count_at(idx);
      const std::int64_t take = std::min(cnt, left);
      if (idx == l.b - l.n) {
        l.old -= take;
      } else {
        l.full -= take;
      }
      l.count_ref(idx) = cnt - take;
      // take > 0: the count came from the hash (or own() put it there), which therefore exists.
      auto& fields = std::get<BucketHash>(key.get()->state).fields;
      if (cnt == take) {
        fields.erase(field_name(l.tag, idx));
      } else {
        fields[field_name(l.tag, idx)] -= take;
      }
      if (fields.empty()) key.erase();  // Redis deletes an emptied hash
      left = left - take;
    }
    l.newest.reset();
    for (const auto& [i, cnt] : l.counts) {
      if (cnt > 0 && (!l.newest || i > *l.newest)) l.newest = i;
    }
    l.used = l.full + weighted(l, l.old);
  }
}

// An admission: HINCRBY each limit's current bucket, then delete_stale().
void PolicyTwin::take(KeyRef& key, std::int64_t cost, const std::vector<std::string>& stale) {
  for (auto& l : limits_) {
    own(key, l);
    BucketHash* hash = as_hash(key);
    if (hash == nullptr) hash = &std::get<BucketHash>(key.create(BucketHash{}).state);
    hash->fields[field_name(l.tag, l.b)] += cost;
    l.used = l.used + cost;
    l.count_ref(l.b) += cost;
    if (!l.newest || l.b > *l.newest) l.newest = l.b;
  }
  BucketHash* hash = as_hash(key);
  for (const auto& f : stale) hash->fields.erase(f);
  if (hash->fields.empty()) key.erase();
}

// The deciding limit: when rejected, the one that makes the caller wait longest; when admitted, the
// one with the least quota left. Then the TTL: the hash is all stale once every newest bucket is,
// at now + reset_after; unless that moved past `held` (decide()), the TTL set then still holds.
// `renew`: a refund wrote adopted counts (own), which live by these limits from now on.
Decided PolicyTwin::conclude(KeyRef& key, std::int64_t cost, bool allowed, std::optional<std::int64_t> held,
                             bool renew) const {
  std::optional<std::int64_t> remaining;
  Decided d;
  d.each.reserve(2 * limits_.size());
  for (std::size_t i = 0; i < limits_.size(); ++i) {
    const Limit& l = limits_[i];
    const std::int64_t rem = std::max<std::int64_t>(0, l.limit - l.used);
    std::int64_t wait = 0;
    if (!allowed && !l.allowed) wait = retry_after(l, cost, c_.now);
    const std::int64_t own = own_reset(l, c_.now);
    d.each.push_back(rem);
    d.each.push_back(own);
    d.reset_after = std::max(d.reset_after, own);
    if (allowed) {
      if (!remaining || rem < *remaining) d.decider = static_cast<std::int64_t>(i) + 1;
    } else if (wait > d.retry_after) {
      d.decider = static_cast<std::int64_t>(i) + 1;
    }
    if (!remaining || rem < *remaining) remaining = rem;
    d.retry_after = std::max(d.retry_after, wait);
  }
  const bool ttl_holds = held && *held >= c_.now + d.reset_after;
  if (renew && d.reset_after > 0) {  // adopted counts written by a refund live by these limits now
    std::int64_t life = d.reset_after;
    if (blocked_until_) life = std::max(life, *blocked_until_ - c_.now);  // and a block's end
    key.expire_ms(c_.now, ttl_ms(life));
  } else if (allowed && c_.record && d.reset_after > 0 && !ttl_holds) {
    key.expire_ms(c_.now, ttl_ms(d.reset_after));
  }
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
    l.adopted = false;
  }
  std::vector<std::string> stale;
  blocked_until_.reset();
  read(key, stale);
  Decided blocked;  // nothing left of any limit until the block ends; nothing written
  if (blocked_until_ && blocked_until(c_, *blocked_until_, width(), blocked)) {
    // Each limit back to full quota at the later of the block's end and its newest bucket's end.
    const std::int64_t wait = blocked.reset_after;
    for (std::size_t i = 0; i < limits_.size(); ++i) {
      const std::int64_t own = std::max(wait, own_reset(limits_[i], c_.now));
      if (2 * i + 1 < blocked.each.size()) blocked.each[2 * i + 1] = own;
      blocked.reset_after = std::max(blocked.reset_after, own);
    }
    return blocked;
  }

  // held: the latest end of a limit's newest bucket as read, which the key's TTL covers (conclude;
  // policy.lua, general()); none when no limit has a bucket, or one adopted another's.
  bool allowed = true;
  bool adopted = false;
  std::optional<std::int64_t> held;
  for (auto& l : limits_) {
    l.used = l.full + weighted(l, l.old);
    l.allowed = l.used + cost <= l.limit;
    allowed = allowed && l.allowed;
    adopted = adopted || l.adopted;
    if (l.newest) {
      const std::int64_t ends = (*l.newest + l.n + 1) * l.P;
      if (!held || ends > *held) held = ends;
    }
  }
  if (adopted) held.reset();
  if (c_.refund) {
    allowed = true;
    give_back(key, cost);
  } else if (allowed && c_.record) {
    take(key, cost, stale);
  }
  return conclude(key, cost, allowed, held, c_.refund && adopted);
}

}  // namespace redlimit::detail::memory
