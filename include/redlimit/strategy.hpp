#pragma once
// What every strategy offers, whatever its algorithm: consume, peek, refund, acquire, block, reset.
// A Strategy is a cheap handle (copyable; shares the RateLimiter's connection) and every call is one
// round trip running the strategy's Lua script (see lua/), through the one decision path
// (detail/decision_path.hpp).
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
#include "redlimit/detail/config.hpp"

namespace redlimit {

class AsyncConnection;
class Connection;

namespace detail {
struct Context;
class DecisionPath;
struct Script;
struct ScriptCall;
struct StrategySpec;
}  // namespace detail

// One request of a batch. `subject` must outlive the consume_many call.
struct Request {
  std::string_view subject;
  std::int64_t cost = 1;
};

class Strategy {
 public:
  // A strategy may be held and deleted through a Strategy pointer (a container of a service's
  // limiters, each of its own kind: std::unique_ptr<Strategy>): the derived handles hold more than
  // this one (FixedWindow its Limit), which only a virtual destructor frees. It costs a pointer a
  // handle and nothing a decision. Copies and moves stay as they were (a declared destructor would
  // otherwise turn every move into a copy).
  virtual ~Strategy() = default;
  Strategy(const Strategy&) = default;
  Strategy(Strategy&&) noexcept = default;
  Strategy& operator=(const Strategy&) = default;
  Strategy& operator=(Strategy&&) noexcept = default;

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
  // refunded and the decision says not allowed. max_wait = microseconds::max() waits as long as it
  // takes.
  Decision acquire(std::string_view subject, std::int64_t cost, std::chrono::microseconds max_wait) const;

  // Denies `subject` outright for `duration` (a block never shortens an existing one). Returns the
  // block's decision: rejected, retry_after its time left, and a reset_after (each limit's too)
  // that also waits for the state counted before the block to be back to full quota, read by a peek
  // after the block (a second round trip; without it when that peek fails: the block's time left).
  // Requests get the same meanwhile.
  // unblock() lifts it; reset() lifts it and forgets the count.
  Decision block(std::string_view subject, std::chrono::microseconds duration) const;
  // Lifts `subject`'s block, keeping what was counted before and during it. True when a block was in
  // force. Like reset(), it clears the local reject cache's entry and the fallback's copy first, and
  // throws (ConnectionError...) when Redis does not answer: no failure policy makes one up.
  bool unblock(std::string_view subject) const;

  // Many consumes in one round trip; decisions in the order of `requests`, each request decided as
  // if consumed alone, in that order (not all-or-nothing across requests). On a single server one
  // script call decides up to 256 requests (larger batches are pipelined calls; fewer a call for a
  // sliding window or policy of many buckets, detail::DecisionPath::per_call_of); on a cluster,
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

  // consume_many over the AsyncConnection: every request checked and every script call queued
  // before this returns (up to 256 requests a call, as consume_many; on a cluster one call per hash slot, each to
  // its master), and `done` run once, on the loop's thread, with the decisions in the order of
  // `requests` when the last reply is in. A call lost in transit while others were answered gets
  // the failure policy for its own requests only. The subjects need not outlive this call.
  using BatchCallback = std::function<void(const std::vector<Decision>&, std::exception_ptr)>;
  void consume_many_async(const std::vector<Request>& requests, BatchCallback done) const;
  // The same as a future.
  std::future<std::vector<Decision>> consume_many_future(const std::vector<Request>& requests) const;

  // Forgets everything recorded for `subject`, including a block (one DEL of its keys).
  void reset(std::string_view subject) const;

  const std::string& resource() const;
  // The Redis key holding `subject`'s state (checks the subject).
  std::string key_for(std::string_view subject) const;
  // The key of `subject`'s block marker (same hash slot as key_for).
  std::string block_key_for(std::string_view subject) const;

 protected:
  // `limits`: the count of each limit (one, or several for a policy); cost may not exceed the least.
  // `windows`: each limit's window, for the strategies whose script reports every limit (policies);
  // `intervals`: each one's bucket interval (its precision), for a policy's packed admission.
  Strategy(std::shared_ptr<detail::Context> ctx, std::string resource, std::string kind, const detail::Script& script,
           std::vector<std::int64_t> limits, std::vector<std::string> params,
           std::vector<std::chrono::microseconds> windows = {}, std::vector<std::chrono::microseconds> intervals = {});

 private:
  friend class Leases;  // reads the clock and time source its leases are timed on

  // One request's call of `script` (checks the subject): KEYS its state, and the block marker for
  // block.lua (detail::scripts::keys_per_request); ARGV now (or `now` when the caller
  // already has it: one clock reading for a whole batch), then the head: mode, cost, params.
  detail::ScriptCall prepare(const detail::Script& script, std::string_view subject, std::int64_t cost,
                             const char* mode, const std::string& params, const std::string* now = nullptr) const;
  // One request of `op` on this strategy's script, its cost and subject checked (checked()).
  detail::ScriptCall request(Operation op, std::string_view subject, std::int64_t cost) const;
  // One request whose script call is prepared already through the decision path
  // (detail/decision_path.hpp), synchronously, as a call of its own; `quiet`: one made inside
  // another call (DecisionPath::quiet).
  Decision run(Operation op, const detail::Script& script, detail::ScriptCall call, std::int64_t cost,
               bool quiet = false) const;
  void check_cost(std::int64_t cost) const;
  // Runs `checks` (a call's argument checks, before any I/O) and returns what it returns; an
  // InvalidArgument it throws goes to the metrics sink as a call of `op` that threw, then on.
  template <class Checks>
  decltype(auto) checked(Operation op, Checks&& checks) const;
  void refused(Operation op, const std::exception& error) const;
  // block()'s decision completed from a peek under the block (the state's reset_after, each limit's).
  void during_block(std::string_view subject, Decision& d) const;
  // The limiter's AsyncConnection (throws when none is attached).
  std::shared_ptr<AsyncConnection> async_connection() const;
  // reset() and unblock(): `send` run on the fallback (if any) and then on Redis, after the reject
  // cache forgets `state_key`; one MetricsEvent of `op`; an error counted and thrown.
  void maintain(Operation op, const std::string& state_key, const std::function<void(Connection&)>& send) const;
  // block.lua's call for `subject`: its parameters are the duration in us ("0" lifts the block) and
  // where this strategy's state holds the block too (detail::scripts::block_holder).
  detail::ScriptCall block_call(std::string_view subject, std::string duration) const;
  // A path for consume_many's requests, every one checked (throws before any I/O).
  std::shared_ptr<detail::DecisionPath> batch_path(const std::vector<Request>& requests, bool keep_alive) const;

  std::shared_ptr<detail::Context> ctx_;
  std::shared_ptr<const detail::StrategySpec> spec_;  // shared by copies of this handle
};

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/strategy-inl.hpp"
#endif
