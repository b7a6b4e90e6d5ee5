#pragma once
// Bodies of redlimit/strategy.hpp (see redlimit/detail/config.hpp). Every operation checks its input
// (before any I/O), prepares one script call per request and hands them to the decision path
// (detail/decision_path.hpp); reset() is a plain DEL, unblock() one call of the block script, both
// outside the decision path (maintain()).
#include <algorithm>
#include <mutex>

#include "redlimit/detail/decision_path.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/strategy.hpp"

namespace redlimit {

namespace strategy_impl {

// What the user built, by the state key's suffix: error messages name it (a sliding window runs
// the policy script, and "script policy failed" would puzzle its user).
REDLIMIT_INLINE std::string display_name(std::string_view kind, const std::string& resource) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"fw", "fixed window"}, {"sl", "sliding log"},  {"sw", "sliding window"},
      {"pol", "policy"},      {"tb", "token bucket"}, {"lb", "leaky bucket"}};
  std::string_view name = kind;
  for (const auto& [k, n] : kNames) {
    if (k == kind) name = n;
  }
  return detail::message("{} \"{}\"", name, detail::printable(resource));
}

REDLIMIT_INLINE const char* mode_of(Operation op) {
  switch (op) {
    case Operation::consume:
      return "1";
    case Operation::peek:
      return "0";
    case Operation::refund:
      return "2";
    default:
      return "3";  // block
  }
}

// acquire's deadline, now + max_wait, held at Micros::max() where the sum would overflow (signed
// overflow is undefined): max_wait = Micros::max() is the natural way to say "as long as it takes".
REDLIMIT_INLINE Micros deadline_after(Micros now, Micros max_wait) {
  if (now.count() > 0 && max_wait > Micros::max() - now) return Micros::max();
  return now + max_wait;  // max_wait >= 0: no overflow downwards
}

// What is left of acquire's wait at `now`: unbounded at a deadline held at Micros::max(), and held
// within Micros's range otherwise (a user's Clock may return any time, a negative one included).
REDLIMIT_INLINE Micros time_left(Micros deadline, Micros now) {
  if (deadline == Micros::max()) return Micros::max();
  if (now.count() < 0 && deadline > Micros::max() + now) return Micros::max();
  if (now.count() > 0 && deadline < Micros::min() + now) return Micros::min();
  return deadline - now;
}

}  // namespace strategy_impl

REDLIMIT_INLINE Strategy::Strategy(std::shared_ptr<detail::Context> ctx, std::string resource, std::string kind,
                                   const detail::Script& script, std::vector<std::int64_t> limits,
                                   std::vector<std::string> params, std::vector<std::chrono::microseconds> windows,
                                   std::vector<std::chrono::microseconds> intervals)
    : ctx_(std::move(ctx)) {
  detail::check_resource(resource);
  const std::int64_t least = *std::min_element(limits.begin(), limits.end());
  std::string name = strategy_impl::display_name(kind, resource);
  std::unique_ptr<detail::AsyncLane> lane;
  std::unique_ptr<detail::SyncLane> sync_lane;
  const Connection* conn = ctx_->connection.get();
  // On a cluster, calls made together share a call per master (Options::batch_per_master).
  if (ctx_->options.share_script_calls && conn != nullptr &&
      (conn->scripts_span_slots() || (ctx_->options.batch_per_master && conn->scripts_span_node()))) {
    lane = std::make_unique<detail::AsyncLane>();
    std::size_t flights = ctx_->options.shared_call_flights;
    if (flights == 0) flights = conn->thread_safe() ? ctx_->options.pool.size : 1;
    sync_lane = std::make_unique<detail::SyncLane>(flights, ctx_->options.shared_call_linger);
  }
  // The script's parameters go at the end of each call's head, space-separated (lua/helpers.lua,
  // params; detail::scripts::head).
  std::string script_params = detail::scripts::params_arg(params);
  const std::size_t per_call = detail::DecisionPath::per_call_of(windows, intervals);
  spec_ = std::make_shared<const detail::StrategySpec>(
      detail::StrategySpec{std::move(resource), std::move(kind), std::move(name), &script, std::move(limits), least,
                           std::move(script_params), std::move(windows), std::move(intervals), per_call,
                           std::move(lane), std::move(sync_lane)});
}

REDLIMIT_INLINE const std::string& Strategy::resource() const { return spec_->resource; }

REDLIMIT_INLINE std::string Strategy::key_for(std::string_view subject) const {
  detail::check_subject(subject);
  return detail::make_key(ctx_->options.prefix, spec_->resource, subject, spec_->kind);
}

REDLIMIT_INLINE std::string Strategy::block_key_for(std::string_view subject) const {
  detail::check_subject(subject);
  return detail::make_key(ctx_->options.prefix, spec_->resource, subject, "blk");
}

REDLIMIT_INLINE void Strategy::check_cost(std::int64_t cost) const {
  const std::int64_t most = spec_->least_limit;
  if (cost < 1 || cost > most) {
    throw InvalidArgument(detail::message("cost must be in [1, {}] for resource \"{}\", got {}", most,
                                          detail::printable(spec_->resource), cost));
  }
}

REDLIMIT_INLINE detail::ScriptCall Strategy::prepare(const detail::Script& script, std::string_view subject,
                                                     std::int64_t cost, const char* mode, const std::string& params,
                                                     const std::string* now) const {
  detail::ScriptCall call;
  call.keys.reserve(2);
  call.keys.push_back(key_for(subject));  // checks the subject
  if (detail::scripts::keys_per_request(script) == 2) call.keys.push_back(block_key_for(subject));
  call.args.reserve(2);
  call.args.push_back(now ? *now : ctx_->now_arg());
  call.args.push_back(detail::scripts::head(mode, cost, params));
  return call;
}

// Bad input is the caller's, and costs no I/O; but a service answers it (a 400), and its operator
// should see how often: redlimit_errors_total{kind="invalid_argument"}, not counters().errors (an
// outage's). Before, every check threw before the metrics sink heard of the call.
template <class Checks>
decltype(auto) Strategy::checked(Operation op, Checks&& checks) const {
  try {
    return checks();
  } catch (const InvalidArgument& e) {
    refused(op, e);
    throw;
  }
}

REDLIMIT_INLINE void Strategy::refused(Operation op, const std::exception& error) const {
  if (!ctx_->options.metrics) return;
  MetricsEvent e;
  e.resource = spec_->resource;
  e.strategy = spec_->kind;
  e.operation = op;
  e.exception = &error;
  e.error = error.what();
  ctx_->options.metrics->on_event(e);
}

REDLIMIT_INLINE detail::ScriptCall Strategy::request(Operation op, std::string_view subject,
                                                     std::int64_t cost) const {
  return checked(op, [&] {
    check_cost(cost);
    return prepare(*spec_->script, subject, cost, strategy_impl::mode_of(op), spec_->params);  // checks the subject
  });
}

REDLIMIT_INLINE Decision Strategy::run(Operation op, const detail::Script& script, detail::ScriptCall call,
                                       std::int64_t cost, bool quiet) const {
  detail::DecisionPath path(ctx_, spec_, op, script);
  if (quiet) path.quiet();
  path.add(std::move(call), cost);
  return detail::decide(path).front();
}

REDLIMIT_INLINE std::shared_ptr<detail::DecisionPath> Strategy::batch_path(const std::vector<Request>& requests,
                                                                            bool keep_alive) const {
  auto path = std::make_shared<detail::DecisionPath>(ctx_, spec_, Operation::consume, *spec_->script, keep_alive);
  path->reserve(requests.size());
  const std::string now = ctx_->now_arg();  // one now for the batch: its requests arrive together
  for (const auto& r : requests) {          // every request is checked before anything is sent
    check_cost(r.cost);
    path->add(prepare(*spec_->script, r.subject, r.cost, "1", spec_->params, &now), r.cost);
  }
  return path;
}

REDLIMIT_INLINE std::vector<Decision> Strategy::consume_many(const std::vector<Request>& requests) const {
  auto path = checked(Operation::consume, [&] { return batch_path(requests, /*keep_alive=*/false); });
  if (requests.empty()) return {};
  return detail::decide(*path);
}

REDLIMIT_INLINE void Strategy::consume_many_async(const std::vector<Request>& requests, BatchCallback done) const {
  auto path = checked(Operation::consume, [&] {
    auto checked_path = batch_path(requests, /*keep_alive=*/true);
    if (!done) throw InvalidArgument("consume_many_async needs a callback");
    return checked_path;
  });
  auto conn = async_connection();
  if (requests.empty()) {  // nothing to ask: answered on the loop's thread all the same
    conn->post([done = std::move(done)] { done({}, nullptr); });
    return;
  }
  detail::decide_many_async(std::move(path), std::move(conn), std::move(done));
}

REDLIMIT_INLINE std::future<std::vector<Decision>> Strategy::consume_many_future(
    const std::vector<Request>& requests) const {
  auto promise = std::make_shared<std::promise<std::vector<Decision>>>();
  std::future<std::vector<Decision>> future = promise->get_future();
  consume_many_async(requests, [promise](const std::vector<Decision>& ds, std::exception_ptr error) {
    if (error) {
      promise->set_exception(std::move(error));
    } else {
      promise->set_value(ds);
    }
  });
  return future;
}

REDLIMIT_INLINE std::shared_ptr<AsyncConnection> Strategy::async_connection() const {
  std::shared_ptr<AsyncConnection> conn;
  {
    std::lock_guard<std::mutex> lock(ctx_->mutex);  // RateLimiter::attach_async writes it under this lock
    conn = ctx_->async;
  }
  if (!conn) throw Error("no async connection: call RateLimiter::attach_async");
  return conn;
}

REDLIMIT_INLINE Decision Strategy::consume(std::string_view subject, std::int64_t cost) const {
  detail::ScriptCall call = request(Operation::consume, subject, cost);
  // Shares a script call with the consume() calls of other threads in flight (detail/sync_lane.hpp).
  if (spec_->sync_lane && spec_->sync_lane->takes(*ctx_, call, cost)) {
    return spec_->sync_lane->consume(ctx_, spec_, call, cost);
  }
  return run(Operation::consume, *spec_->script, std::move(call), cost);
}

REDLIMIT_INLINE Decision Strategy::peek(std::string_view subject, std::int64_t cost) const {
  return run(Operation::peek, *spec_->script, request(Operation::peek, subject, cost), cost);
}

REDLIMIT_INLINE Decision Strategy::refund(std::string_view subject, std::int64_t cost) const {
  return run(Operation::refund, *spec_->script, request(Operation::refund, subject, cost), cost);
}

REDLIMIT_INLINE Decision Strategy::block(std::string_view subject, std::chrono::microseconds duration) const {
  detail::ScriptCall call = checked(Operation::block, [&] {
    if (duration.count() <= 0 || duration > std::chrono::hours(24 * 365 * 10)) {
      throw InvalidArgument(detail::message("block duration must be in (0, 10 years], got {}us", duration.count()));
    }
    return block_call(subject, std::to_string(duration.count()));
  });
  Decision d = run(Operation::block, detail::scripts::block(), std::move(call), 1);
  d.limit = spec_->least_limit;
  if (d.source == Source::primary || d.source == Source::fallback) during_block(subject, d);
  return d;
}

// block.lua knows the block, not the strategy's state, which the quota counted before the block may
// outlast: a peek now is rejected as every request during the block is, with the later of the two
// for reset_after and each limit's own. A second round trip, quiet: block() is the call the
// counters and the metrics see. A peek the store does not answer leaves the block's decision as it
// is: the block is in force all the same.
REDLIMIT_INLINE void Strategy::during_block(std::string_view subject, Decision& d) const {
  Decision peeked;
  try {
    peeked = run(Operation::peek, *spec_->script, request(Operation::peek, subject, 1), 1, /*quiet=*/true);
  } catch (const Error&) {
    return;
  }
  // Another store answered (Redis back after the fallback took the block), or the peek was admitted
  // (a block shorter than the round trip has ended): the block's own decision stands.
  if (peeked.source != d.source || peeked.allowed) return;
  d.reset_after = std::max(d.reset_after, peeked.reset_after);
  d.limit = peeked.limit;
  d.limit_index = peeked.limit_index;
  d.limits = std::move(peeked.limits);
}

REDLIMIT_INLINE Decision Strategy::acquire(std::string_view subject, std::int64_t cost,
                                           std::chrono::microseconds max_wait) const {
  checked(Operation::consume, [&] {
    check_cost(cost);
    if (max_wait.count() < 0) throw InvalidArgument("max_wait must not be negative");
  });
  Clock& clock = *ctx_->clock;
  // max_wait is timed, not decided on: on monotonic() (clock.hpp), a wall clock stepped back while
  // we sleep does not add the step to the wait.
  const Micros deadline = strategy_impl::deadline_after(clock.monotonic(), max_wait);
  while (true) {
    Decision d = consume(subject, cost);
    const Micros left = strategy_impl::time_left(deadline, clock.monotonic());
    if (d.allowed) {
      if (d.delay.count() == 0) return d;
      if (d.delay > left) {
        // A shaper queued us too far back: give the place up rather than overstay max_wait.
        refund(subject, cost);
        d.allowed = false;
        d.retry_after = d.delay;
        return d;
      }
      clock.sleep_for(d.delay);
      return d;
    }
    if (d.retry_after > left) return d;
    clock.sleep_for(d.retry_after);
  }
}

REDLIMIT_INLINE void Strategy::consume_async(std::string_view subject, std::int64_t cost, Callback done) const {
  detail::ScriptCall call = request(Operation::consume, subject, cost);
  if (!done) checked(Operation::consume, [] { throw InvalidArgument("consume_async needs a callback"); });
  auto conn = async_connection();
  // Merged with the others of this loop turn (detail/async_lane.hpp), or else sent alone.
  if (spec_->async_lane && spec_->async_lane->add(ctx_, spec_, conn, call, cost, done)) return;
  auto path = std::make_shared<detail::DecisionPath>(ctx_, spec_, Operation::consume, *spec_->script,
                                                     /*keep_alive=*/true);
  path->add(std::move(call), cost);
  detail::decide_async(std::move(path), std::move(conn), std::move(done));
}

REDLIMIT_INLINE std::future<Decision> Strategy::consume_future(std::string_view subject, std::int64_t cost) const {
  auto promise = std::make_shared<std::promise<Decision>>();
  std::future<Decision> future = promise->get_future();
  consume_async(subject, cost, [promise](const Decision& d, std::exception_ptr error) {
    if (error) {
      promise->set_exception(std::move(error));
    } else {
      promise->set_value(d);
    }
  });
  return future;
}

REDLIMIT_INLINE void Strategy::reset(std::string_view subject) const {
  const std::vector<std::string> argv = checked(Operation::reset, [&] {
    // UNLINK, not DEL: Redis frees a large value (a sliding log of a million entries) off its main
    // thread, where DEL held it 181 ms; the keys are gone at once either way.
    return std::vector<std::string>{"UNLINK", key_for(subject), block_key_for(subject)};
  });
  maintain(Operation::reset, argv[1], [&](Connection& conn) {
    const Reply r = conn.command(argv);
    if (r.is_error()) throw ReplyError(detail::message("UNLINK failed: {}", detail::printable(r.str)));
  });
}

REDLIMIT_INLINE detail::ScriptCall Strategy::block_call(std::string_view subject, std::string duration) const {
  return prepare(detail::scripts::block(), subject, 1, strategy_impl::mode_of(Operation::block),
                 detail::scripts::params_arg({std::move(duration), detail::scripts::block_holder(*spec_->script)}));
}

REDLIMIT_INLINE bool Strategy::unblock(std::string_view subject) const {
  // A duration of "0" lifts the block: the marker deleted, a string state's block cut off it (its
  // bytes and TTL kept), a hash's block field deleted. Reply {1 when a block was in force, else 0, 0, 0, 0, 0}.
  const detail::ScriptCall call = checked(Operation::unblock, [&] { return block_call(subject, "0"); });
  bool was_blocked = false;
  maintain(Operation::unblock, call.keys[0], [&](Connection& conn) {
    const Reply r = detail::run_script(conn, detail::scripts::block(), call.keys, call.args);
    if (r.type != Reply::Type::array || r.elements.empty() || r.elements[0].type != Reply::Type::integer) {
      throw ReplyError("block script: unexpected reply to an unblock");
    }
    was_blocked = r.elements[0].integer == 1;
  });
  return was_blocked;
}

REDLIMIT_INLINE void Strategy::maintain(Operation op, const std::string& state_key,
                                        const std::function<void(Connection&)>& send) const {
  const auto started = std::chrono::steady_clock::now();
  const auto report = [&](const std::exception* error) {
    if (!ctx_->options.metrics) return;
    MetricsEvent e;
    e.resource = spec_->resource;
    e.strategy = spec_->kind;
    e.operation = op;
    e.exception = error;
    if (error != nullptr) e.error = error->what();
    e.latency = std::chrono::steady_clock::now() - started;
    ctx_->options.metrics->on_event(e);
  };
  // The local copies first, so that an outage cannot leave them stale: the reject cache, and the
  // fallback's state (which decides while Redis is down). Redis's own copy changes only if it
  // answers; otherwise the call throws and that state stays until its TTL or the next call.
  if (ctx_->reject_cache) ctx_->reject_cache->forget(state_key);
  if (ctx_->fallback) send(*ctx_->fallback);  // unblock(): Redis's answer, sent next, is the one returned
  try {
    std::unique_lock<std::mutex> lock(ctx_->mutex, std::defer_lock);
    if (!ctx_->connection->thread_safe()) lock.lock();
    send(*ctx_->connection);
  } catch (const std::exception& e) {
    ++ctx_->counters.errors;
    report(&e);
    throw;
  }
  report(nullptr);
}

}  // namespace redlimit
