// Twin of lua/sliding_log.lua: the sorted set is an EntryLog (store.hpp), kept in Redis's order.
#include "twins.hpp"

namespace redlimit::detail::memory {

SlidingLogTwin::SlidingLogTwin(const Call& c)
    : c_(c),
      limit_(c.num(4)),
      window_(c.num(5)),
      cutoff_(c.now - window_),
      trim_every_(std::min<std::int64_t>(floor_div(limit_, 8), kTrimMost / 8)) {}

namespace {

constexpr std::int64_t kRenewSlot = kTtlMarginMs * 500;  // sliding_log.lua's RENEW_SLOT (us)
// sliding_log.lua's CUM_MOD: cums are kept modulo 2^50, and so is any difference of two.
constexpr std::int64_t kCumMod = std::int64_t{1} << 50;
std::int64_t cum_diff(std::int64_t cum, std::int64_t base) {
  const std::int64_t d = (cum - base) % kCumMod;
  return d < 0 ? d + kCumMod : d;
}

// rank_reaching(lo, hi, target, base): the first rank in [lo, hi] whose cum reaches `target` units
// past `base`.
std::int64_t rank_reaching(const EntryLog& log, std::int64_t lo, std::int64_t hi, std::int64_t target,
                           std::int64_t base) {
  hi = std::min(hi, lo + target - 1);
  if (hi > lo && cum_diff(log.at(hi - 1)->cum, base) >= target) {
    hi = hi - 1;
    while (lo < hi) {
      const std::int64_t mid = floor_div(lo + hi, 2);
      if (cum_diff(log.at(mid)->cum, base) >= target) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
  }
  return hi;
}

// A refund of `left` units (fewer than the window holds: a refund of them all drops the log): whole
// entries from the newest, the last one shortened, as sliding_log.lua's give_back leaves them (it
// finds the cut by rank past a few entries, to the same end).
void give_back(EntryLog& log, std::int64_t left) {
  while (left > 0) {
    const LogEntry e = log.pop_newest();
    if (e.cost > left) {
      log.append({e.time, cum_diff(e.cum, left), e.cost - left});
      left = 0;
    } else {
      left -= e.cost;
    }
  }
}

}  // namespace

// sliding_log.lua's decide(): a block in force rejects all but a refund, with the later of its end
// and the log's own reset (a peek under the member); one that ended is deleted by the first consume
// or refund (ZREM: an emptied set is deleted), read past by a peek; a refund during the block puts
// the member back, with a TTL that outlives both.
Decided SlidingLogTwin::decide(KeyRef& key, std::int64_t cost) const {
  EntryLog* log = key.get() != nullptr ? std::get_if<EntryLog>(&key.get()->state) : nullptr;
  const std::int64_t held = log != nullptr ? log->blocked_until : 0;
  if (held == 0) return judge(key, cost);
  const std::int64_t now = c_.now;
  if (held > now && !c_.refund) {
    Call quiet = c_;
    quiet.record = false;
    Decided d;
    blocked_until(c_, held, width(), d);
    d.reset_after = std::max(d.reset_after, SlidingLogTwin(quiet).judge(key, cost).reset_after);
    return d;
  }
  if (!c_.record && !c_.refund) return judge(key, cost);
  log->blocked_until = 0;  // ZREM
  if (log->empty()) key.erase();
  const Decided d = judge(key, cost);
  if (held > now) {  // ZADD key +inf <member>, PEXPIRE
    EntryLog* kept = key.get() != nullptr ? std::get_if<EntryLog>(&key.get()->state) : nullptr;
    if (kept == nullptr) kept = &std::get<EntryLog>(key.create(EntryLog{}).state);
    kept->blocked_until = held;
    key.expire_ms(now, ttl_ms(std::max(held - now, d.reset_after)));
  }
  return d;
}

Decided SlidingLogTwin::judge(KeyRef& key, std::int64_t cost) const {
  const std::int64_t now = c_.now;
  const bool write = c_.record || c_.refund;
  // redis.pcall('ZRANGE'): a key of another type reads as none, deleted before a write
  // (epilogue.lua, foreign keys).
  if (const Entry* e = key.get(); e != nullptr && !std::holds_alternative<EntryLog>(e->state) && write) key.erase();
  EntryLog* log = key.get() != nullptr ? std::get_if<EntryLog>(&key.get()->state) : nullptr;
  std::optional<std::int64_t> cum;
  std::int64_t newest_t = 0, base = 0, used = 0;
  bool renew = false;
  // Entries, or only a block member that a peek reads past (decide): Redis deletes an emptied set.
  if (log != nullptr && log->size() == 0) log = nullptr;
  if (log != nullptr) {
    newest_t = log->at(-1)->time;
    if (newest_t <= cutoff_) {
      if (write) {
        key.erase();  // every entry has left the window
        log = nullptr;
      }
    } else {
      // ZRANGEBYSCORE (cutoff +inf LIMIT 0 1: the oldest live entry, past those that left.
      const LogEntry* oldest = log->at(static_cast<std::int64_t>(log->count_through(cutoff_)));
      cum = log->at(-1)->cum;
      base = oldest->cum - oldest->cost;
      used = cum_diff(*cum, base);
    }
  }

  const bool allowed = c_.refund || used + cost <= limit_;
  if (c_.refund) {
    const std::int64_t left = std::min(cost, used);
    used -= left;
    if (left > 0 && used == 0) {
      key.erase();  // every live unit back: sliding_log.lua drops the log (give_back)
    } else if (left > 0) {
      give_back(*log, left);  // the log keeps live entries (used > 0)
    }
  } else if (allowed && c_.record) {
    std::int64_t t = cum ? std::max(now, newest_t) : now;
    std::int64_t after = cum.value_or(0) + cost;
    const bool wrapped = after >= kCumMod;  // stamped a microsecond later, as sliding_log.lua does
    if (wrapped) after %= kCumMod;          // (a log an earlier build wrote may be past it)
    if (wrapped && t == newest_t) ++t;
    // The TTL is set by the first admission of each RENEW_SLOT (sliding_log.lua).
    renew = !cum || floor_div(t, kRenewSlot) != floor_div(newest_t, kRenewSlot);
    // The trim, by the admission whose cum crosses a multiple of trim_every or wraps: the entries that
    // left, kTrimMost at most (sliding_log.lua).
    if (cum && (trim_every_ <= 1 || wrapped || floor_div(*cum, trim_every_) != floor_div(after, trim_every_))) {
      log->remove_through(cutoff_, kTrimMost);
    }
    if (log == nullptr) log = &std::get<EntryLog>(key.create(EntryLog{}).state);
    cum = after;
    newest_t = t;
    log->append({t, *cum, cost});
    used += cost;
  }

  Decided d;
  d.allowed = allowed ? 1 : 0;
  d.remaining = std::max<std::int64_t>(0, limit_ - used);  // a lowered limit: nothing left
  if (!allowed) {
    // Rejected with cost <= limit (memory_scripts.cpp, cost_of): used > 0, so `cum` is set.
    if (!cum) throw ScriptError{"ERR redlimit: a rejection with nothing in the log"};
    const auto card = static_cast<std::int64_t>(log->size());
    const auto first = static_cast<std::int64_t>(log->count_through(cutoff_));  // ZCOUNT -inf cutoff
    const std::int64_t r = rank_reaching(*log, first, card - 1, used + cost - limit_, base);
    d.retry_after = log->at(r)->time + window_ - now;
  }
  if (used > 0) {
    if (c_.refund) newest_t = log->at(-1)->time;
    d.reset_after = std::max<std::int64_t>(0, newest_t + window_ - now);
    if ((allowed && c_.record && renew) || c_.refund) key.expire_ms(now, ttl_ms(d.reset_after));  // as the script
  }
  return d;
}

}  // namespace redlimit::detail::memory
