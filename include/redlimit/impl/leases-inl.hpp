#pragma once
// Bodies of redlimit/leases.hpp (see redlimit/detail/config.hpp: compiled once in src/redlimit.cpp,
// or inline with REDLIMIT_HEADER_ONLY). The algorithm and its guarantees: docs/leases.md.
#include "redlimit/detail/config.hpp"
#include "redlimit/leases.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "redlimit/clock.hpp"
#include "redlimit/detail/context.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

namespace leases_impl {

using std::chrono::microseconds;

// One subject: its lease and what decides whether it gets one. Guarded by `m`; shared_ptr so that a
// sweep can drop an idle entry while a caller still holds it.
struct Lease {
  std::mutex m;
  std::int64_t left = 0;                                           // units still held
  std::int64_t expires = 0;                                        // its time is up (monotonic(), us)
  std::int64_t window_end = std::numeric_limits<std::int64_t>::max();  // fixed window (now()): lease, refunds end
  std::int64_t reset_at = 0;                                       // the lease decision's reset, absolute
  std::int64_t remaining_seen = -1;                                // Redis's remaining at the last call
  std::int64_t bucket_start = 0, bucket_requests = 0, bucket_units = 0;  // the rate measured (monotonic())
  double rate = 0, unit_rate = 0;                                  // requests and units a second
  std::int64_t last_use = 0;                                       // for the idle sweep (monotonic())
  LeaseState state = LeaseState::cold;
};

struct Stats {
  std::atomic<std::uint64_t> leases_taken{0}, leases_returned{0}, leases_lapsed{0}, units_leased{0},
      units_returned{0}, units_lapsed{0}, local_decisions{0}, remote_decisions{0};
};

}  // namespace leases_impl

struct Leases::Table {
  Table(Strategy s, std::shared_ptr<Clock> c, bool on_redis_time, std::int64_t largest, bool ends_with_window,
        LeaseOptions o)
      : strategy(std::move(s)),
        clock(std::move(c)),
        redis_time(on_redis_time),
        most(largest),
        windowed(ends_with_window),
        options(o) {
    sweeper = std::thread([this] { sweep_loop(); });
  }

  Strategy strategy;
  std::shared_ptr<Clock> clock;
  bool redis_time;
  std::int64_t most;  // the largest cost: the limit or capacity
  bool windowed;      // fixed window: a lease ends with its window, and so do refunds
  LeaseOptions options;
  leases_impl::Stats stats;
  std::atomic<bool> closed{false};

  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::mutex m;
    std::unordered_map<std::string, std::shared_ptr<leases_impl::Lease>> leases;
  };
  Shard shards[kShards];

  std::mutex stop_m;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread sweeper;

  Shard& shard_of(std::string_view subject) { return shards[std::hash<std::string_view>{}(subject) % kShards]; }

  std::shared_ptr<leases_impl::Lease> find(std::string_view subject, bool create) {
    Shard& sh = shard_of(subject);
    std::lock_guard<std::mutex> g(sh.m);
    const auto it = sh.leases.find(std::string(subject));
    if (it != sh.leases.end()) return it->second;
    if (!create) return nullptr;
    auto l = std::make_shared<leases_impl::Lease>();
    sh.leases.emplace(std::string(subject), l);
    return l;
  }

  // The subject's rate over the last `duration`: requests and units a second.
  void observe(leases_impl::Lease& l, std::int64_t now, std::int64_t cost) const {
    const std::int64_t span = now - l.bucket_start;
    if (span >= options.duration.count()) {
      l.rate = static_cast<double>(l.bucket_requests) * 1e6 / static_cast<double>(span);
      l.unit_rate = static_cast<double>(l.bucket_units) * 1e6 / static_cast<double>(span);
      l.bucket_start = now;
      l.bucket_requests = l.bucket_units = 0;
    }
    ++l.bucket_requests;
    l.bucket_units += cost;
    l.last_use = now;
  }

  // How many units to lease: what the subject uses in a lease's lifetime, within [min_lease,
  // max_lease], no more than `share` of what Redis last said remains, and at least `cost`. 0: none.
  std::int64_t lease_size(const leases_impl::Lease& l, std::int64_t now, std::int64_t cost) const {
    const double seconds = static_cast<double>(options.duration.count()) / 1e6;
    auto k = static_cast<std::int64_t>(std::ceil(l.unit_rate * seconds));
    k = std::clamp<std::int64_t>(k, options.min_lease, options.max_lease);
    const bool known = l.remaining_seen >= 0 && (!windowed || now < l.reset_at);
    const std::int64_t remaining = known ? l.remaining_seen : most;
    const auto cap = static_cast<std::int64_t>(options.share * static_cast<double>(remaining));
    if (cap < options.min_lease) return 0;
    return std::min({std::max(std::min(k, cap), cost), most});
  }

  Decision local(const leases_impl::Lease& l, std::int64_t now) const {
    Decision d;
    d.allowed = true;
    d.limit = most;
    d.remaining = std::max<std::int64_t>(0, l.remaining_seen) + l.left;
    d.reset_after = std::chrono::microseconds{std::max<std::int64_t>(0, l.reset_at - now)};
    d.source = Source::lease;
    return d;
  }

  // Ends `l`'s lease: its unused units go back to Redis, unless its window is over (a refund then
  // would count against the next window), or almost over by the time Redis runs it.
  void give_back(std::string_view subject, leases_impl::Lease& l, std::int64_t now) {
    const std::int64_t n = l.left;
    l.left = 0;
    l.expires = 0;
    if (n <= 0) return;
    const std::int64_t margin = redis_time ? 10'000 : 1'000;
    bool returned = false;
    if (!windowed || now + margin < l.window_end) {
      try {
        // Under fail_open/fail_closed/fallback an outage does not throw: the refund is then
        // answered by the failure policy, and the units never reached Redis.
        returned = strategy.refund(subject, n).source == Source::primary;
      } catch (const Error&) {  // Redis away under OnFailure::raise: the units lapse (counted below)
      }
    }
    if (returned) {
      ++stats.leases_returned;
      stats.units_returned += static_cast<std::uint64_t>(n);
    } else {
      ++stats.leases_lapsed;
      stats.units_lapsed += static_cast<std::uint64_t>(n);
    }
  }

  Decision remote(std::string_view subject, leases_impl::Lease& l, std::int64_t cost) {
    ++stats.remote_decisions;
    Decision d = strategy.consume(subject, cost);
    if (d.source == Source::primary) l.remaining_seen = d.remaining;
    if (l.state == LeaseState::rejected && d.allowed) l.state = LeaseState::cold;
    return d;
  }

  Decision take(std::string_view subject, leases_impl::Lease& l, std::int64_t now, std::int64_t mono, std::int64_t k,
                std::int64_t cost);
  Decision consume(std::string_view subject, std::int64_t cost);
  void return_expired(bool all);
  void sweep_loop();
  void stop();
};

REDLIMIT_INLINE Decision Leases::Table::take(std::string_view subject, leases_impl::Lease& l, std::int64_t now,
                                             std::int64_t mono, std::int64_t k, std::int64_t cost) {
  const Decision d = strategy.consume(subject, k);
  if (d.source != Source::primary || !d.allowed) {
    // Rejected (or decided by the failure policy): this request is decided alone, and the subject
    // per request until Redis admits again.
    if (d.source == Source::primary) {
      l.remaining_seen = d.remaining;
      l.state = LeaseState::rejected;
    }
    if (k == cost) {
      ++stats.remote_decisions;
      return d;
    }
    return remote(subject, l, cost);
  }
  ++stats.leases_taken;
  stats.units_leased += static_cast<std::uint64_t>(k);
  ++stats.local_decisions;
  l.state = LeaseState::leased;
  l.left = k - cost;
  l.remaining_seen = d.remaining;
  l.reset_at = now + d.reset_after.count();
  // The script's now is no earlier than ours, so now + reset_after is no later than the window's
  // end: the lease never outlives its window.
  l.window_end = windowed ? l.reset_at : std::numeric_limits<std::int64_t>::max();
  l.expires = mono + options.duration.count();  // and the window's end (consume)
  Decision out = d;
  out.remaining = d.remaining + l.left;
  return out;
}

REDLIMIT_INLINE Decision Leases::Table::consume(std::string_view subject, std::int64_t cost) {
  if (cost < 1 || cost > most) {  // checked here too: a local decision sends nothing to be checked
    throw InvalidArgument(detail::message("cost must be in [1, {}], got {}", most, cost));
  }
  if (closed.load()) {
    ++stats.remote_decisions;
    return strategy.consume(subject, cost);
  }
  const auto lease = find(subject, true);
  leases_impl::Lease& l = *lease;
  std::lock_guard<std::mutex> g(l.m);
  // Wall time (`now`) for what the decisions say, monotonic time (`mono`) for the spans the table
  // times: a lease's duration, the rate, idleness (clock.hpp). A lease ends at whichever comes first,
  // its duration or its window's end, so a wall clock stepped back keeps it no longer than its time.
  const std::int64_t now = clock->now().count();
  const std::int64_t mono = clock->monotonic().count();
  observe(l, mono, cost);
  if (l.left >= cost && mono < l.expires && now < l.window_end) {
    l.left -= cost;
    ++stats.local_decisions;
    return local(l, now);
  }
  if (l.left > 0) give_back(subject, l, now);  // ended, or too small for this request
  if (l.state == LeaseState::rejected || l.rate < options.hot_rate || cost > most) {
    if (l.state != LeaseState::rejected) l.state = LeaseState::cold;
    return remote(subject, l, cost);
  }
  const std::int64_t k = lease_size(l, now, cost);
  if (k == 0) {
    l.state = LeaseState::little_left;
    return remote(subject, l, cost);
  }
  return take(subject, l, now, mono, k, cost);
}

// Ends the leases that have expired (all of them when closing) and forgets subjects idle for ten
// lease durations, so the table holds the subjects in use, not every subject ever seen.
REDLIMIT_INLINE void Leases::Table::return_expired(bool all) {
  const std::int64_t now = clock->now().count();
  const std::int64_t mono = clock->monotonic().count();  // as in consume()
  const std::int64_t idle = 10 * options.duration.count();
  for (auto& sh : shards) {
    std::vector<std::pair<std::string, std::shared_ptr<leases_impl::Lease>>> due;
    {
      std::lock_guard<std::mutex> g(sh.m);
      for (auto it = sh.leases.begin(); it != sh.leases.end();) {
        leases_impl::Lease& l = *it->second;
        std::unique_lock<std::mutex> lk(l.m, std::try_to_lock);
        if (lk.owns_lock() && l.left == 0 && mono - l.last_use > idle && !all) {
          lk.unlock();
          it = sh.leases.erase(it);
          continue;
        }
        due.emplace_back(it->first, it->second);
        ++it;
      }
    }
    for (auto& [subject, lease] : due) {
      std::lock_guard<std::mutex> g(lease->m);
      if (lease->left > 0 && (all || mono >= lease->expires || now >= lease->window_end)) {
        give_back(subject, *lease, now);
      }
      if (all) lease->state = LeaseState::closed;
    }
  }
}

REDLIMIT_INLINE void Leases::Table::sweep_loop() {
  const auto period = std::max<std::chrono::microseconds>(options.duration / 2, std::chrono::microseconds{1000});
  std::unique_lock<std::mutex> lk(stop_m);
  while (!stopping) {
    stop_cv.wait_for(lk, period);
    if (stopping) break;
    lk.unlock();
    return_expired(false);
    lk.lock();
  }
}

REDLIMIT_INLINE void Leases::Table::stop() {
  {
    std::lock_guard<std::mutex> g(stop_m);
    stopping = true;
  }
  stop_cv.notify_all();
  if (sweeper.joinable()) sweeper.join();
}

namespace leases_impl {

inline void check(const LeaseOptions& o) {
  if (o.duration.count() <= 0 || !(o.share > 0 && o.share <= 1) || o.min_lease < 1 || o.max_lease < o.min_lease ||
      !(o.hot_rate >= 0)) {
    throw InvalidArgument(detail::message(
        "lease options: duration > 0, 0 < share <= 1, 1 <= min_lease <= max_lease and hot_rate >= 0, got "
        "duration {}us, share {}, min_lease {}, max_lease {}, hot_rate {}",
        o.duration.count(), std::to_string(o.share), o.min_lease, o.max_lease, std::to_string(o.hot_rate)));
  }
}

}  // namespace leases_impl

REDLIMIT_INLINE Leases::Leases(const FixedWindow& s, LeaseOptions o) {
  leases_impl::check(o);
  o.duration = std::min(o.duration, s.limit().window());
  table_ = std::make_shared<Table>(s, s.ctx_->clock, s.ctx_->options.time_source == TimeSource::redis,
                                   s.limit().count(), true, o);
}

REDLIMIT_INLINE Leases::Leases(const TokenBucket& s, LeaseOptions o) {
  leases_impl::check(o);
  table_ = std::make_shared<Table>(s, s.ctx_->clock, s.ctx_->options.time_source == TimeSource::redis, s.capacity(),
                                   false, o);
}

REDLIMIT_INLINE Leases::Leases(const LeakyBucket& s, LeaseOptions o) {
  leases_impl::check(o);
  if (s.mode() == LeakyMode::shaper) {
    throw InvalidArgument("leases: a shaping leaky bucket hands each admission its own delay, which a lease cannot; "
                          "use LeakyMode::meter");
  }
  table_ = std::make_shared<Table>(s, s.ctx_->clock, s.ctx_->options.time_source == TimeSource::redis, s.capacity(),
                                   false, o);
}

REDLIMIT_INLINE Leases::~Leases() { close(); }

REDLIMIT_INLINE Decision Leases::consume(std::string_view subject, std::int64_t cost) {
  return table_->consume(subject, cost);
}

REDLIMIT_INLINE void Leases::close() {
  if (table_->closed.exchange(true)) return;
  table_->stop();
  table_->return_expired(true);
}

REDLIMIT_INLINE void Leases::return_expired() { table_->return_expired(false); }

REDLIMIT_INLINE LeaseStats Leases::stats() const {
  const auto& s = table_->stats;
  LeaseStats out{s.leases_taken.load(),    s.leases_returned.load(), s.leases_lapsed.load(),
                 s.units_leased.load(),    s.units_returned.load(),  s.units_lapsed.load(),
                 s.local_decisions.load(), s.remote_decisions.load()};
  for (auto& sh : table_->shards) {
    std::lock_guard<std::mutex> g(sh.m);
    for (const auto& entry : sh.leases) {
      std::lock_guard<std::mutex> lg(entry.second->m);
      switch (entry.second->state) {
        case LeaseState::cold: ++out.subjects_cold; break;
        case LeaseState::leased: ++out.subjects_leased; break;
        case LeaseState::little_left: ++out.subjects_little_left; break;
        case LeaseState::rejected: ++out.subjects_rejected; break;
        case LeaseState::closed: break;
      }
    }
  }
  return out;
}

REDLIMIT_INLINE LeaseState Leases::state(std::string_view subject) const {
  if (table_->closed.load()) return LeaseState::closed;
  const auto l = table_->find(subject, false);
  if (!l) return LeaseState::cold;
  std::lock_guard<std::mutex> g(l->m);
  return l->state;
}

}  // namespace redlimit
