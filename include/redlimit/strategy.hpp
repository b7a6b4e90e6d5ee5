#pragma once
// What every strategy offers, whatever its algorithm: consume, peek, refund, acquire, block, reset.
// A Strategy is a cheap handle (copyable; shares the RateLimiter's connection) and every call is one
// round trip running the strategy's Lua script (see lua/).
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/decision.hpp"
#include "redlimit/metrics.hpp"
#include "redlimit/reply.hpp"

namespace redlimit {

namespace detail {
struct Context;
struct Script;
}  // namespace detail

// One request of a batch. `subject` must outlive the consume_many call.
struct Request {
  std::string_view subject;
  std::int64_t cost = 1;
};

class Strategy {
 public:
  // Admits `cost` units for `subject` if they fit, and records them; a rejected request records
  // nothing. Throws InvalidArgument, before any I/O, for cost < 1, cost > the limit, or a subject
  // that is empty or over 1 KiB.
  Decision consume(std::string_view subject, std::int64_t cost = 1) const;

  // What consume(subject, cost) would answer now, recording nothing. `remaining` is the quota left
  // now; `retry_after` is the exact wait before `cost` units fit.
  Decision peek(std::string_view subject, std::int64_t cost = 1) const;

  // Gives `cost` units back (the guarded work was cancelled). Exact for token and leaky buckets;
  // for windows and logs it takes the units back from the newest records (see docs/policies.md).
  // Returns the state after the refund (allowed = true).
  Decision refund(std::string_view subject, std::int64_t cost = 1) const;

  // Blocks the calling thread (sleeping on the limiter's clock) until `cost` units are admitted or
  // `max_wait` would pass; returns the last decision. For a shaping leaky bucket it also waits the
  // admitted request's delay; if that delay exceeds what is left of max_wait, the units are
  // refunded and the decision says not allowed.
  Decision acquire(std::string_view subject, std::int64_t cost, std::chrono::microseconds max_wait) const;

  // Denies `subject` outright for `duration` (a block never shortens an existing one). Returns the
  // decision requests get meanwhile. reset() lifts it.
  Decision block(std::string_view subject, std::chrono::microseconds duration) const;

  // Many consumes in one round trip; decisions in the order of `requests`, each request decided as
  // if consumed alone, in that order (not all-or-nothing across requests). On a single server one
  // script call decides up to 256 requests (larger batches are pipelined calls); on a cluster,
  // requests are grouped by hash slot and the calls pipelined per node. Every request is checked
  // before anything is sent.
  std::vector<Decision> consume_many(const std::vector<Request>& requests) const;

  // Asynchronous consume over the limiter's AsyncConnection (RateLimiter::attach_async): returns at
  // once; `done` runs later on the event loop's thread with the decision, or with the exception
  // (ConnectionError, ReplyError...) when no decision could be made and the failure policy is
  // OnFailure::raise. Input is checked before anything is queued (InvalidArgument is thrown here).
  using Callback = std::function<void(const Decision&, std::exception_ptr)>;
  void consume_async(std::string_view subject, std::int64_t cost, Callback done) const;
  // The same as a future. The event loop must run on another thread than the one that waits.
  std::future<Decision> consume_future(std::string_view subject, std::int64_t cost = 1) const;

  // Forgets everything recorded for `subject`, including a block (one DEL of its keys).
  void reset(std::string_view subject) const;

  const std::string& resource() const { return resource_; }
  // The Redis key holding `subject`'s state (checks the subject).
  std::string key_for(std::string_view subject) const;
  // The key of `subject`'s block marker (same hash slot as key_for).
  std::string block_key_for(std::string_view subject) const;

 protected:
  // `limits`: the count of each limit (one, or several for a policy); cost may not exceed the least.
  Strategy(std::shared_ptr<detail::Context> ctx, std::string resource, std::string kind, const detail::Script& script,
           std::vector<std::int64_t> limits, std::vector<std::string> params);

 private:
  // One prepared script call: keys and ARGV.
  struct Call {
    std::vector<std::string> keys;
    std::vector<std::string> args;
  };
  // One consume_async in flight (src/strategy_async.cpp). learn() and account() are what it shares
  // with execute(): what the reject cache learns from a decision Redis made at `now`, then shadow
  // mode, counters and metrics for the decision returned.
  struct AsyncCall;
  void learn(Operation op, const std::string& key, std::int64_t cost, const Decision& d,
             std::chrono::microseconds now) const;
  void account(Operation op, Decision& d, std::chrono::nanoseconds latency) const;
  // `now`: ARGV[1] when the caller already has it (one clock reading for a whole batch).
  Call prepare(std::string_view subject, std::int64_t cost, const char* mode, const std::vector<std::string>& params,
               const std::string* now = nullptr) const;
  // Breaker, failure policy, shadow mode, local cache, counters and metrics around the round trip
  // of one call (a command) or several (a pipeline).
  Decision run(Operation op, const detail::Script& script, std::string_view subject, std::int64_t cost,
               const std::vector<std::string>& params) const;
  std::vector<Decision> execute(Operation op, const detail::Script& script, std::vector<Call>& calls,
                                const std::vector<std::int64_t>& costs) const;
  // Merges single-request calls into script calls of up to kMaxPerCall requests each (one slot per
  // call on a cluster); members[k] lists the requests of out[k].
  void group(const std::vector<Call>& calls, std::vector<Call>& out,
             std::vector<std::vector<std::size_t>>& members) const;
  static constexpr std::size_t kMaxPerCall = 256;
  std::vector<Reply> round_trip(const detail::Script& script, std::vector<Call>& calls) const;
  Decision on_failure(const std::exception& error, const detail::Script& script, Call& call) const;
  void report(Operation op, const Decision* d, std::string_view error, std::chrono::nanoseconds latency) const;
  void check_cost(std::int64_t cost) const;

  std::shared_ptr<detail::Context> ctx_;
  std::string resource_;
  std::string kind_;
  const detail::Script* script_;
  std::vector<std::int64_t> limits_;
  std::vector<std::string> params_;
};

}  // namespace redlimit
