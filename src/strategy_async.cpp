// Strategy::consume_async and consume_future: consume() over the limiter's AsyncConnection.
//
// The same decision path as the synchronous execute(), spread over callbacks: input checked (and
// thrown) before anything is queued; the local reject cache and the breaker consulted first; one
// EVALSHA, re-sent once as EVAL only on a NOSCRIPT reply (the script did not run); a connection
// failure or an "unavailable" reply counted, told to the breaker and answered by the failure
// policy; then what the reject cache learns, shadow mode, counters and metrics. The callback runs
// on the event loop's thread, exactly once, also for decisions made without Redis (delivered
// through AsyncRedis::post when the connection is an AsyncRedis).
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "redlimit/detail/context.hpp"
#include "redlimit/detail/script.hpp"
#include "redlimit/detail/scripted_strategy.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/transport/redis_async.hpp"
#include "redlimit/strategy.hpp"

namespace redlimit {

// Owned by the callbacks of the command in flight (shared_ptr), so it outlives the caller's
// Strategy handle; it holds a copy of the handle (which shares the limiter's Context).
struct Strategy::AsyncCall : std::enable_shared_from_this<Strategy::AsyncCall> {
  AsyncCall(const Strategy& s, std::shared_ptr<AsyncConnection> c, Call prepared, std::int64_t units,
            std::chrono::microseconds at, Callback callback)
      : strategy(s), conn(std::move(c)), call(std::move(prepared)), cost(units), now(at), done(std::move(callback)) {}

  const Strategy strategy;
  const std::shared_ptr<AsyncConnection> conn;
  Call call;
  const std::int64_t cost;
  const std::chrono::microseconds now;  // the limiter's clock when the call was made
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  const Callback done;
  bool resent = false;

  const detail::Script& script() const { return *strategy.script_; }

  void send(bool eval) {
    std::vector<std::string> argv = eval ? detail::eval_command(script(), call.keys, call.args)
                                         : detail::evalsha_command(script(), call.keys, call.args);
    auto self = shared_from_this();
    conn->command_async(
        std::move(argv), [self](Reply reply) { self->on_reply(std::move(reply)); },
        [self](std::exception_ptr error) { self->on_error(std::move(error)); });
  }

  void on_reply(Reply reply) {
    if (!resent && detail::is_noscript(reply)) {
      // NOSCRIPT: the script did not run (SCRIPT FLUSH, a restart, a failover); EVAL runs and caches it.
      resent = true;
      try {
        send(true);
      } catch (...) {
        on_error(std::current_exception());
      }
      return;
    }
    Decision d;
    std::exception_ptr error;
    try {
      detail::check_script_reply(script(), reply);
      d = detail::decode_decision(reply, strategy.limits_);
    } catch (const UnavailableError& e) {  // the script did not run: the failure policy answers
      failed(e);
      return;
    } catch (...) {  // a reply we cannot use: the caller's problem, not an outage
      error = std::current_exception();
    }
    if (error) {
      raise(error);
      return;
    }
    if (strategy.ctx_->breaker) strategy.ctx_->breaker->success();
    decide(d, true);
  }

  void on_error(std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const ConnectionError& e) {  // includes TimeoutError: outcome unknown, never replayed
      failed(e);
      return;
    } catch (const UnavailableError& e) {
      failed(e);
      return;
    } catch (...) {
    }
    raise(error);
  }

  // An outage: counted, told to the breaker, answered by the failure policy (which may raise).
  void failed(const std::exception& e) {
    detail::Context& ctx = *strategy.ctx_;
    ++ctx.counters.errors;
    if (ctx.breaker) ctx.breaker->failure(ctx.clock->now());
    answer_by_policy(e);
  }

  void answer_by_policy(const std::exception& e) {
    Decision d;
    std::exception_ptr error;
    try {
      d = strategy.on_failure(e, script(), call);
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      raise(error);
    } else {
      decide(d, false);
    }
  }

  void decide(Decision d, bool from_redis) {
    if (from_redis) strategy.learn(Operation::consume, call.keys[0], cost, d, now);
    strategy.account(Operation::consume, d, std::chrono::steady_clock::now() - started);
    done(d, nullptr);
  }

  void raise(const std::exception_ptr& error) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    strategy.report(Operation::consume, nullptr, what, std::chrono::steady_clock::now() - started);
    done(Decision{}, error);
  }
};

void Strategy::consume_async(std::string_view subject, std::int64_t cost, Callback done) const {
  check_cost(cost);
  Call call = prepare(subject, cost, "1", params_);  // checks the subject
  if (!done) throw InvalidArgument("consume_async needs a callback");
  detail::Context& ctx = *ctx_;
  std::shared_ptr<AsyncConnection> conn;
  {
    std::lock_guard<std::mutex> lock(ctx.mutex);  // RateLimiter::attach_async writes it under this lock
    conn = ctx.async;
  }
  if (!conn) throw Error("no async connection: call RateLimiter::attach_async");

  const auto now = ctx.clock->now();
  auto st = std::make_shared<AsyncCall>(*this, conn, std::move(call), cost, now, std::move(done));

  // Decisions made without Redis still reach the callback on the loop's thread when the connection
  // can run a task there; another AsyncConnection gets them on this thread.
  const auto deliver = [&conn](std::function<void()> task) {
    if (auto* redis = dynamic_cast<AsyncRedis*>(conn.get())) {
      redis->post(std::move(task));
    } else {
      task();
    }
  };

  // A subject the local reject cache knows to be over its limit never leaves the process.
  if (ctx.reject_cache) {
    if (const auto wait = ctx.reject_cache->lookup(st->call.keys[0], cost, now)) {
      Decision d;
      d.limit = *std::min_element(limits_.begin(), limits_.end());
      d.retry_after = d.reset_after = *wait;
      d.source = Source::local_cache;
      ++ctx.counters.local_cache_hits;
      deliver([st, d] { st->decide(d, false); });
      return;
    }
  }
  if (ctx.breaker && !ctx.breaker->allow(now)) {
    ++ctx.counters.breaker_short_circuits;
    deliver([st] { st->answer_by_policy(ConnectionError("circuit breaker open: Redis failed repeatedly")); });
    return;
  }
  st->send(false);
}

std::future<Decision> Strategy::consume_future(std::string_view subject, std::int64_t cost) const {
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

}  // namespace redlimit
