#pragma once
// The drivers of the decision path (redlimit/detail/decision_path.hpp): the same steps, with a
// synchronous or an asynchronous send step between begin() and finish().
#include <mutex>
#include <utility>

#include "redlimit/detail/decision_path.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

REDLIMIT_INLINE std::vector<Decision> decide(DecisionPath& path) {
  const std::vector<ScriptCall>& calls = path.begin();
  if (calls.empty()) return path.finish({});
  Context& ctx = path.context();
  std::vector<Reply> replies;
  try {
    // The call's deadline starts here and bounds the whole send step: the pool's wait, connecting,
    // the round trip and the EVAL after NOSCRIPT (docs/reliability.md §7).
    CallScope call(*ctx.connection);
    std::unique_lock<std::mutex> lock(ctx.mutex, std::defer_lock);
    if (!ctx.connection->thread_safe()) lock.lock();
    replies = send_script_calls(*ctx.connection, path.script(), calls);
  } catch (const ConnectionError& e) {  // includes TimeoutError: outcome unknown, never replayed
    return path.fail(e);
  } catch (const std::exception& e) {
    path.abandon(e);
    throw;
  }
  return path.finish(std::move(replies));
}

namespace decide_impl {

// Runs `step` (finish or fail) and hands its decision to `done`; an exception from the step goes to
// `done` instead. `done` itself runs outside the try: its own exceptions are not ours to deliver.
template <typename Step>
void deliver(const DecisionCallback& done, Step&& step) {
  Decision d;
  std::exception_ptr error;
  try {
    d = step().front();
  } catch (...) {
    error = std::current_exception();
  }
  done(d, error);
}

}  // namespace decide_impl

REDLIMIT_INLINE void decide_async(std::shared_ptr<DecisionPath> path, std::shared_ptr<AsyncConnection> conn,
                                  DecisionCallback done) {
  const std::vector<ScriptCall>* calls = nullptr;
  try {
    calls = &path->begin();
  } catch (...) {  // breaker open under OnFailure::raise: reported already
    conn->post([done, error = std::current_exception()] { done(Decision{}, error); });
    return;
  }
  if (calls->empty()) {  // the reject cache or the failure policy answered: no Redis
    conn->post([path, done] { decide_impl::deliver(done, [&] { return path->finish({}); }); });
    return;
  }
  auto on_reply = [path, done](Reply reply) {
    decide_impl::deliver(done, [&] {
      std::vector<Reply> replies;
      replies.push_back(std::move(reply));
      return path->finish(std::move(replies));
    });
  };
  auto on_error = [path, done](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const ConnectionError& e) {  // includes TimeoutError: outcome unknown, never replayed
      decide_impl::deliver(done, [&] { return path->fail(e); });
    } catch (const UnavailableError& e) {
      decide_impl::deliver(done, [&] { return path->fail(e); });
    } catch (const std::exception& e) {
      path->abandon(e);
      done(Decision{}, error);
    } catch (...) {
      path->abandon(Error("unknown error from the async connection"));
      done(Decision{}, error);
    }
  };
  try {
    send_script_call_async(conn, path->script(), calls->front(), std::move(on_reply), on_error);
  } catch (...) {  // refused before anything was queued: no callback will come from the connection
    on_error(std::current_exception());
  }
}

}  // namespace redlimit::detail
