#pragma once
// The one decision path. Every call that asks Redis for decisions — consume, peek, refund, block,
// consume_many, consume_async, on a server, a cluster or the memory backend — goes through it:
//
//   begin()   the local reject cache answers what it can; the breaker of each request's shard may
//             forbid sending (then the failure policy answers that shard's requests: one server is
//             one shard, a cluster one per master); the rest is grouped into script calls
//   send      the caller's own step: send_script_calls() (a round trip; NOSCRIPT -> a reload) or
//             send_script_call_async() (the same, over an event loop)
//   finish()  each reply judged on its own: decisions decoded, outage replies answered by the
//             failure policy; or fail() when the send step failed as a whole
//   then      the breaker told, the reject cache taught, shadow mode, counters, metrics
//
// A DecisionPath is one use: made for one call, with its requests added, then begin(), one send
// and one finish() or fail(). It keeps what it needs by shared_ptr, so an async call may hold it
// past the Strategy handle that made it.
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redlimit/decision.hpp"
#include "redlimit/detail/async_lane.hpp"
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/context.hpp"
#include "redlimit/detail/script.hpp"
#include "redlimit/detail/small_vector.hpp"
#include "redlimit/detail/sync_lane.hpp"
#include "redlimit/metrics.hpp"

namespace redlimit::detail {

// What a strategy is, as the decision path needs it: shared by a Strategy and its copies.
struct StrategySpec {
  std::string resource;
  std::string kind;                  // the state key's suffix ("fw", "sl", ...)
  std::string name;                  // what the user built, for messages: sliding window "api"
  const Script* script;              // the strategy's own script (block() runs another)
  std::vector<std::int64_t> limits;  // each limit's count (several for a policy)
  std::int64_t least_limit;          // the smallest of them: the most a request may cost
  std::string params;                // the script's parameters, space-separated: the end of its
                                     // head, ARGV[2] (lua/prologue.lua; detail::scripts::head)
  std::vector<std::chrono::microseconds> windows;  // each limit's window (policies: Decision::limits)
  // A sliding window's and a policy's: each limit's bucket interval, its precision (a packed
  // admission, policy_pairs_of; per_call).
  std::vector<std::chrono::microseconds> intervals;
  // The most requests one script call decides (DecisionPath::per_call_of).
  std::size_t per_call;
  // Sends concurrent consume_async() calls as shared script calls (detail/async_lane.hpp); null when
  // each goes alone (Options::share_script_calls off, or a cluster with Options::batch_per_master
  // off, where calls of a turn rarely share a slot).
  std::unique_ptr<AsyncLane> async_lane;
  // The same for concurrent consume() calls from many threads (detail/sync_lane.hpp).
  std::unique_ptr<SyncLane> sync_lane;
};

class DecisionPath {
 public:
  // The most requests one script call decides (lua/epilogue.lua); larger batches are pipelined.
  static constexpr std::size_t kMaxPerCall = 256;
  // The most live buckets the decisions of one call read: those of the largest policy's one
  // decision (Policy::max_buckets(), and each limit's partly weighted one). A sliding window's or a
  // policy's decision reads every live bucket of its limits, about 0.3 us of Redis's time each
  // (docs/performance.md, "Buckets"), so that 256 decisions of 10,000 buckets would hold Redis for
  // most of a second in one script call, every other client waiting; split so, no call of a batch
  // holds it longer than the largest single decision does (docs/algorithms.md, "Work per decision").
  static constexpr std::int64_t kMostBucketsPerCall = 10'016;
  // How many requests a call of a strategy whose limits have these windows and bucket intervals
  // (none: not a sliding window or a policy) decides: kMaxPerCall, or fewer that read at most
  // kMostBucketsPerCall buckets, window / interval + 1 each, and at least one.
  static std::size_t per_call_of(const std::vector<std::chrono::microseconds>& windows,
                                 const std::vector<std::chrono::microseconds>& intervals);

  // `keep_alive`: hold the context and the strategy by shared_ptr (an async call outlives its
  // caller); a synchronous call borrows them, which saves two atomic counts per decision.
  DecisionPath(const std::shared_ptr<Context>& ctx, const std::shared_ptr<const StrategySpec>& spec, Operation op,
               const Script& script, bool keep_alive = false);

  // Room for n requests (a batch), so that add() does not reallocate.
  void reserve(std::size_t n);
  // Each request is a call of its own, its caller's (consume() and consume_async() calls sharing a
  // script call, detail/sync_lane.hpp and detail/async_lane.hpp): a send that fails as a whole
  // counts an error for each of them in Counters::errors, where a batch (consume_many) counts one,
  // and an error thrown to them is reported to the MetricsSink once per request, not once per path.
  void count_each_request() { count_each_ = true; }
  // A call the library makes inside another one that reports itself (block()'s peek under the
  // block): neither counted in Counters nor reported to the MetricsSink. Breakers still hear it.
  void quiet() { quiet_ = true; }

  // One request, already checked: its own call (KEYS its state; ARGV now, cost, mode, parameters)
  // and its cost.
  void add(ScriptCall call, std::int64_t cost);
  // The same for a request whose caller started before this path: a call that waited to share a
  // script call. Its MetricsEvent::latency counts from `started`, the wait included. Either add()
  // for every request of a path, not both.
  void add(ScriptCall call, std::int64_t cost, std::chrono::steady_clock::time_point started);

  // Before any I/O. Returns the script calls to send, in order; empty when nothing needs Redis.
  // Throws (after reporting) when a breaker is open and the failure policy is OnFailure::raise.
  // `span_node`: a call may decide requests of several slots of one cluster node (the limiter's
  // connection's scripts_span_node(), and the sending transport on ScriptPath::functions), as the
  // send step sends again what split_refused() returns.
  const std::vector<ScriptCall>& begin(bool span_node = false);
  // After begin(): the key of a request a breaker refused, or empty (for Connection::shard_refused).
  const std::string& refused_key() const { return refused_key_; }
  // After the send step, with its replies: each spread call (ScriptCall::spread) that its node
  // refused before running it (a slot that moved or is moving; lua/epilogue.lua reads every key
  // before it writes any) is split into one call per slot, appended to the calls begin() returned.
  // Returns the position of the first appended call (their count before: none appended). The
  // refused calls decide nothing: finish() passes over their replies, and takes the appended
  // calls' replies after the others'.
  std::size_t split_refused(const std::vector<Reply>& replies);
  // The script calls to send: begin()'s, and those split_refused() appended.
  const std::vector<ScriptCall>& calls() const { return script_calls_; }
  // The replies to begin()'s calls, in order. Returns one decision per request added: Redis's, or
  // the failure policy's for the requests whose call met an outage (an outage reply, or a
  // transit_failure() reply for a call whose cluster node failed). Throws ReplyError for a usage
  // error reply (counted; the server answered, so its shard's breaker hears success), or the failure
  // policy's error under raise (then the decisions other calls made are recorded but not returned).
  std::vector<Decision> finish(std::vector<Reply> replies);
  // The send step failed as a whole (ConnectionError, TimeoutError: the outcome is unknown and
  // nothing is replayed): the failure policy answers every request that was to be sent.
  std::vector<Decision> fail(const std::exception& error);
  // An exception leaving the path that the path did not judge (a send step failing otherwise than
  // with a ConnectionError): counted, reported, and the breaker released if this call was its probe.
  void abandon(const std::exception& error);
  // An exception leaving the path (a usage error, the failure policy raising) is reported here.
  void report_error(const std::exception& error) const;

  const Script& script() const { return *script_; }
  Context& context() const { return *ctx_; }

 private:
  void consult_breakers();
  void group();
  // Script calls for the pending requests at `positions` (into pending_), in order, at most
  // kMaxPerCall each; `slots` (parallel to pending_, or null): a call whose requests lie in
  // several slots is a spread call.
  void add_calls(const std::vector<std::size_t>& positions, const std::vector<std::uint16_t>* slots);
  // `positions` grouped by the hash slot of their request's keys.
  std::vector<std::vector<std::size_t>> by_slot(const std::vector<std::size_t>& positions) const;
  Decision on_failure(const std::exception& error, ScriptCall& call) const;
  // The decision of `reply`, the answer to `call`, a call of one request (whose now a policy's
  // packed admission needs); a call of several decodes with decode_decisions.
  Decision decoded_one(const Reply& reply, const ScriptCall& call) const;
  void answer_outage(std::size_t pending_index, const std::exception_ptr& outage);
  void release_breakers();
  std::vector<Decision> settle();
  void learn(std::size_t request, const Decision& d) const;
  // Request i's MetricsEvent::latency, ended now: from its own start (add() with `started`), or
  // from begin().
  std::chrono::nanoseconds latency_of(std::size_t request, std::chrono::steady_clock::time_point now) const {
    return now - (started_each_.empty() ? started_ : started_each_[request]);
  }
  // A request's own call: in requests_, or moved to script_calls_[0] when it is sent alone.
  ScriptCall& call_of(std::size_t request) { return alone_ ? script_calls_[0] : requests_[request]; }
  const ScriptCall& call_of(std::size_t request) const { return alone_ ? script_calls_[0] : requests_[request]; }
  void account(Decision& d, std::chrono::nanoseconds latency) const;
  void report(const Decision* d, const std::exception* error, std::chrono::nanoseconds latency) const;

  Context* ctx_;
  const StrategySpec* spec_;
  std::shared_ptr<Context> ctx_owner_;                // set with keep_alive only
  std::shared_ptr<const StrategySpec> spec_owner_;  // set with keep_alive only
  Operation op_;
  const Script* script_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::microseconds now_{0};  // the clock's monotonic() when begin() ran
  std::vector<ScriptCall> requests_;  // one call per request, as added
  // The lists below that hold one element for a single request keep it inline (small_vector.hpp).
  SmallVector<std::int64_t, 1> costs_;
  SmallVector<std::chrono::steady_clock::time_point, 1> started_each_;  // add() with `started` only
  std::vector<Decision> out_;                      // one per request
  SmallVector<std::size_t, 1> pending_;            // requests that need Redis
  std::vector<ScriptCall> script_calls_;           // what begin() returns: pending requests, merged
  std::vector<SmallVector<std::size_t, 1>> members_;  // per script call: indices into pending_
  bool alone_ = false;  // one request, sent as its own call: moved, not copied, to script_calls_
  bool count_each_ = false;  // count_each_request()
  bool quiet_ = false;       // quiet()
  void count_errors(std::size_t n) const {
    if (!quiet_) ctx_->counters.errors += n;
  }
  // The calls a failure of the whole send fails, for Counters::errors.
  std::size_t failed_calls() const { return count_each_ && !pending_.empty() ? pending_.size() : 1; }
  bool span_node_ = false;  // begin(span_node)
  // The breaker of a pending request's shard (null without breakers).
  Breaker* breaker_at(std::size_t pending_index) const {
    if (!breaker_of_.empty()) return breaker_of_[pending_index];
    return through_.empty() ? nullptr : through_.front();
  }
  // With breakers: the distinct breakers that let this call through, each settled once by the call's
  // outcome; and, only when there are several, each pending request's (parallel to pending_).
  SmallVector<Breaker*, 1> through_;
  SmallVector<Breaker*, 1> breaker_of_;
  std::string refused_key_;  // refused_key()
};

// The whole path, synchronously, over the limiter's connection (serialised by the context's mutex
// unless the connection is thread-safe). `started`: when the call began, which starts its deadline
// (Options::command_timeout); earlier than now for consume() calls that waited their turn in a
// shared script call (detail/sync_lane.hpp).
std::vector<Decision> decide(DecisionPath& path,
                             std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now());

// The whole path over the limiter's AsyncConnection: every script call queued at once, and `done`
// run exactly once, on the loop's thread (decisions made without Redis are delivered through
// AsyncConnection::post), with a decision per request when the last reply is in. A call that fails
// in transit while others are answered is an outage of its own requests (the failure policy answers
// them); when every call fails, the send step failed as a whole (DecisionPath::fail).
using BatchDecisionCallback = std::function<void(const std::vector<Decision>&, std::exception_ptr)>;
// `deadline`: every script call's (send_script_call_async); none given = each takes its own.
void decide_many_async(std::shared_ptr<DecisionPath> path, std::shared_ptr<AsyncConnection> conn,
                       BatchDecisionCallback done, std::optional<AsyncConnection::Deadline> deadline = std::nullopt);
// The same for a path of one request.
using DecisionCallback = std::function<void(const Decision&, std::exception_ptr)>;
void decide_async(std::shared_ptr<DecisionPath> path, std::shared_ptr<AsyncConnection> conn, DecisionCallback done);

}  // namespace redlimit::detail

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/async_lane-inl.hpp"
#include "redlimit/impl/decide-inl.hpp"
#include "redlimit/impl/decision_path-inl.hpp"
#include "redlimit/impl/sync_lane-inl.hpp"
#endif
