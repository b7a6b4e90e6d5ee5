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

// Runs `step` (finish or fail) and hands its decisions to `done`; an exception from the step goes to
// `done` instead. `done` itself runs outside the try: its own exceptions are not ours to deliver.
template <typename Step>
void deliver(const BatchDecisionCallback& done, Step&& step) {
  std::vector<Decision> ds;
  std::exception_ptr error;
  try {
    ds = step();
  } catch (...) {
    error = std::current_exception();
  }
  done(ds, error);
}

// The replies of one async call's script calls, gathered as they come: the last one to arrive (or to
// fail) concludes. A call is refused synchronously on the caller's thread while the others are
// answered on the loop's, hence the mutex.
struct Gathering {
  std::shared_ptr<DecisionPath> path;
  BatchDecisionCallback done;
  std::mutex mutex;
  std::vector<Reply> replies;
  std::size_t left = 0;
  std::size_t lost = 0;           // calls failed in transit (outcome unknown)
  std::exception_ptr first_lost;  // the first of those failures
  std::exception_ptr foreign;     // any other exception: the path is abandoned

  // Counts one call in (its reply or failure recorded); returns whether it was the last.
  bool arrived() { return --left == 0; }
  void conclude();
};

REDLIMIT_INLINE void Gathering::conclude() {
  if (foreign) {
    try {
      std::rethrow_exception(foreign);
    } catch (const std::exception& e) {
      path->abandon(e);
    } catch (...) {
      path->abandon(Error("unknown error from the async connection"));
    }
    done({}, foreign);
    return;
  }
  if (lost == replies.size()) {  // nothing answered: the send step failed as a whole, as decide()'s
    try {
      std::rethrow_exception(first_lost);
    } catch (const std::exception& e) {  // a ConnectionError (or UnavailableError): never replayed
      deliver(done, [&] { return path->fail(e); });
    }
    return;
  }
  // Some calls answered: each lost one is an outage of its own requests (a transit_failure reply).
  deliver(done, [&] { return path->finish(std::move(replies)); });
}

// Call k's reply or failure, into `g`; concludes when it was the last.
REDLIMIT_INLINE void gather(const std::shared_ptr<Gathering>& g, std::size_t k, Reply* reply,
                            std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(g->mutex);
    if (reply != nullptr) {
      g->replies[k] = std::move(*reply);
    } else {
      // Lost in transit: this call only, its requests get the failure policy (outcome unknown).
      const auto lose = [&](Reply failure) {
        g->replies[k] = std::move(failure);
        if (!g->first_lost) g->first_lost = error;
        ++g->lost;
      };
      try {
        std::rethrow_exception(error);
      } catch (const ConnectionError& e) {
        lose(transit_failure(e));
      } catch (const UnavailableError& e) {
        lose(transit_failure(ConnectionError(e.what())));
      } catch (...) {
        if (!g->foreign) g->foreign = error;
      }
    }
    if (!g->arrived()) return;
  }
  g->conclude();
}

}  // namespace decide_impl

REDLIMIT_INLINE void decide_many_async(std::shared_ptr<DecisionPath> path, std::shared_ptr<AsyncConnection> conn,
                                       BatchDecisionCallback done, std::optional<AsyncConnection::Deadline> deadline) {
  const std::vector<ScriptCall>* calls = nullptr;
  try {
    calls = &path->begin();
  } catch (...) {  // breaker open under OnFailure::raise: reported already
    conn->post([done, error = std::current_exception()] { done({}, error); });
    return;
  }
  if (calls->empty()) {  // the reject cache or the failure policy answered: no Redis
    conn->post([path, done] { decide_impl::deliver(done, [&] { return path->finish({}); }); });
    return;
  }
  // Every script call is queued at once (pipelined on one server, one per master on a cluster);
  // the decisions are delivered when the last reply is in.
  auto g = std::make_shared<decide_impl::Gathering>();
  g->path = path;
  g->done = std::move(done);
  g->replies.resize(calls->size());
  g->left = calls->size();
  for (std::size_t k = 0; k < calls->size(); ++k) {
    auto on_error = [g, k](std::exception_ptr error) { decide_impl::gather(g, k, nullptr, std::move(error)); };
    try {
      send_script_call_async(
          conn, path->script(), (*calls)[k], [g, k](Reply reply) { decide_impl::gather(g, k, &reply, nullptr); },
          on_error, deadline);
    } catch (...) {  // refused before anything was queued: no callback will come for this call
      on_error(std::current_exception());
    }
  }
}

REDLIMIT_INLINE void decide_async(std::shared_ptr<DecisionPath> path, std::shared_ptr<AsyncConnection> conn,
                                  DecisionCallback done) {
  decide_many_async(std::move(path), std::move(conn),
                    [done = std::move(done)](const std::vector<Decision>& ds, std::exception_ptr e) {
                      done(ds.empty() ? Decision{} : ds.front(), std::move(e));
                    });
}

}  // namespace redlimit::detail
