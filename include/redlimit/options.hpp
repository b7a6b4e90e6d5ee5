#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "redlimit/clock.hpp"

namespace redlimit {

enum class TimeSource {
  client,  // the Options::clock's time is passed to each script: injectable, testable
  redis,   // each script reads Redis TIME itself: one clock for every client, no extra round trip
};

// What a decision does when Redis fails (connection refused or broken, deadline passed, server
// loading or out of memory). Whatever the choice, the failure is counted and reported.
enum class OnFailure {
  raise,        // throw ConnectionError / TimeoutError / ReplyError to the caller
  fail_open,    // admit (Decision::source = failure_policy; quota fields are 0: unknown)
  fail_closed,  // reject (retry_after = the breaker cooldown, or 1 s without a breaker)
  fallback,     // decide with an in-memory limiter of the same strategy (per process, not shared)
};

// The form of the entries a sliding log writes (lua/sliding_log.lua; docs/keys.md). This version
// reads both, in any mix, whatever it writes.
enum class SlidingLogMembers {
  text,     // "<cum>/<cost>", the time in the score: what earlier builds of 0.3 read
  compact,  // 20 bytes that carry the time too: 13-18% fewer instructions in Redis a decision
};

class MetricsSink;

// RateLimiter::connect opens a ConnectionPool: any number of threads may decide at once.
struct PoolOptions {
  // Connections at most; they are opened on demand. 0 is taken as 1.
  std::size_t size = 4;
  // How long a caller waits for a free connection before TimeoutError; 0 = wait as long as it takes.
  // A call never waits past its own deadline (Options::command_timeout) either, whichever is first.
  std::chrono::milliseconds wait_timeout{1000};
  // A connection idle for longer than this is PINGed before use, and reconnected if the PING fails
  // (a server restart or an idle-timeout kill is found before a decision depends on it). 0 = never.
  std::chrono::milliseconds health_check_interval{30000};
  // Calls in flight at the same moment share round trips (automatic pipelining): a caller that
  // finds a connection free sends every command queued by then, its own and other threads', in one
  // write, and hands each caller its replies; the others wait for theirs. Redis then reads and
  // answers many calls per socket read, which is most of its CPU per decision under concurrency,
  // and `size` stops being a tuning trap: a few connections serve many threads. Each call keeps its
  // deadline (a shared round trip ends by the earliest of its callers'), and a call that failed in
  // transit is never replayed. false: each call has a connection to itself for its round trip.
  bool coalesce = true;
};

struct Options {
  // Prepended to every key. Must not contain '{' or '}' (the hash tag is ours). At most 64 bytes.
  std::string prefix = "redlimit:";
  TimeSource time_source = TimeSource::client;
  // Used when time_source is client, and for blocking waits. nullptr = SystemClock.
  std::shared_ptr<Clock> clock;
  // Deadline to establish a connection, the host name's lookup included; 0 = wait as long as the
  // OS does. Within a call, connecting also stops at the call's deadline (command_timeout),
  // whichever is first.
  std::chrono::milliseconds connect_timeout{1000};
  // The deadline of one call, end to end: a decision (consume, consume_many, peek...) must finish
  // within command_timeout of its start, pool wait, connecting, the round trip, the reload after
  // NOSCRIPT and cluster redirects included; past it, TimeoutError (a ConnectionError: the failure
  // policy answers). A command outside a decision (reset(), setup) has the same deadline of its own.
  // An AsyncRedis has its own (AsyncOptions::command_timeout), with the same end-to-end meaning for
  // an async call (docs/reliability.md §7). 0 = no deadline.
  std::chrono::milliseconds command_timeout{1000};
  PoolOptions pool;

  OnFailure on_failure = OnFailure::raise;
  // Circuit breaker: after this many consecutive failures, decisions skip Redis (and go straight
  // to on_failure) for breaker_cooldown; then one call probes Redis, and a success closes it.
  // On a Redis Cluster each master has a breaker of its own (docs/cluster.md, "One master down").
  // The cooldown is timed on Clock::monotonic(): the system clock's steady time, which a step of
  // the wall clock does not move (a ManualClock's passes only when the test moves it). 0 = no breaker.
  int breaker_threshold = 5;
  std::chrono::milliseconds breaker_cooldown{1000};

  // Shadow mode: decide and record as usual, report rejections (Decision::shadow_rejected,
  // counters, metrics), but always admit. For rolling out new limits safely.
  bool shadow = false;

  // Opt-in: remember subjects Redis rejected until their retry_after, and reject them locally
  // meanwhile (Decision::source = local_cache). A flood from one subject then costs Redis nothing;
  // admissions are always decided by Redis. Another process's refund or reset is not seen until
  // the cached wait ends. At most local_reject_cache_size subjects are remembered.
  bool local_reject_cache = false;
  std::size_t local_reject_cache_size = 100000;

  // Call the scripts as Redis Functions (FCALL) where the server has them (Redis >= 7.0, Valkey),
  // falling back to EVALSHA by itself where it has not or the ACL user may not use them
  // (docs/performance.md, "Redis Functions"). false: EVALSHA always. RateLimiter::health() says
  // which path a limiter is on.
  bool redis_functions = true;

  // The form of the entries sliding logs write. Compact costs Redis less per decision; but an
  // earlier build of 0.3 (or 0.2) that meets a log whose newest entry is compact restarts it, as a
  // log of 0.2's, and so may admit its subject up to its limit again. Turn it on once no such
  // client shares the Redis (docs/algorithms.md, "Upgrading to compact entries"); it is to become
  // the default in the next version.
  SlidingLogMembers sliding_log_members = SlidingLogMembers::text;

  // Concurrent calls of one strategy (one Strategy object and its copies) share script calls, which
  // Redis decides one request after another, in order, exactly as a consume_many batch: the
  // script's fixed cost and its socket read and reply are shared, and each caller gets its own
  // decision.
  // - consume_async(): the calls made in the same turn of the event loop go as one call
  //   (detail/async_lane.hpp); a call alone still goes alone, one loop turn later at most.
  // - consume() from many threads: at most shared_call_flights calls per strategy are on their way
  //   at a time, and the calls made meanwhile go together in the next (detail/sync_lane.hpp); a
  //   call that finds fewer on their way goes at once, alone.
  // Each keeps its deadline; nothing is replayed; like a batch, a shared call fails as a whole (a
  // lost connection or an error reply is every caller's). On a
  // Redis Cluster, one call per master (batch_per_master). false: a script call each.
  bool share_script_calls = true;
  // With share_script_calls, the script calls of one strategy (per master on a cluster) that
  // consume() sends at once; the calls made while that many are on their way wait, and go together
  // in the next. 0 = as many as the connection carries at once: the pool's size (PoolOptions::size),
  // or 1 on a connection that is not thread-safe. So a call never waits while a connection is
  // free; only the calls beyond the connections share script calls. Fewer (1 or 2) makes more calls
  // share each one: less Redis CPU per decision, for a wait of up to a round trip when the calls
  // are fewer than the connections (docs/performance.md, "Sizing the connection pool").
  std::size_t shared_call_flights = 0;
  // With share_script_calls, how long a shared script call of consume() may wait for more callers
  // before it goes, while the lane is busy: its caller waited for a flight, or the shard's last call
  // carried more than one caller. It goes as soon as as many callers are queued as that last call
  // carried (the threads that call in a loop are back), or a call's worth, or this long after it
  // could have gone; a call on an idle lane never waits. Each wait counts against its oldest
  // caller's command_timeout, and ends by it. With 8 threads and shared_call_flights = 1, 200 us
  // made each call carry 8 decisions instead of 4.5, and cut Redis's main-thread CPU per decision
  // by a fifth to a half (docs/performance.md, "Sizing the connection pool"). 0: no wait. At
  // most 1 s, and less than command_timeout.
  std::chrono::microseconds shared_call_linger{0};

  // On a Redis Cluster whose masters run the Functions library: the requests of a batch
  // (consume_many, and consume_async calls merged by share_script_calls) that one master serves go
  // to it as one script call, whatever their hash slots,
  // where otherwise each slot is a call of its own (a script's commands each stay within one slot;
  // docs/cluster.md, "Batches"). A call the master refuses because a slot moved or is moving is
  // refused before it changes anything, and is sent again slot by slot, redirects followed. false:
  // one script call per slot.
  bool batch_per_master = true;

  // Called for every decision, rejection and error; nullptr = none.
  std::shared_ptr<MetricsSink> metrics;
};

}  // namespace redlimit
