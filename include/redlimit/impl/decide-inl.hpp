#pragma once
// The drivers of the decision path (redlimit/detail/decision_path.hpp): the same steps, with a
// synchronous or an asynchronous send step between begin() and finish().
#include <mutex>
#include <utility>

#include "redlimit/detail/decision_path.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

namespace decide_impl {

// The spread calls a cluster node refused, split by slot (DecisionPath::split_refused), sent in one
// more round trip within the call's deadline; their replies are appended to `replies`. When that
// round trip breaks, only the re-sent calls' requests meet the failure (their outcome is unknown):
// the first round trip's decisions stand.
REDLIMIT_INLINE void resend_refused(DecisionPath& path, Connection& conn, std::vector<Reply>& replies) {
  const std::size_t from = path.split_refused(replies);
  const std::vector<ScriptCall>& calls = path.calls();
  if (from == calls.size()) return;
  const std::vector<ScriptCall> again(calls.begin() + static_cast<std::ptrdiff_t>(from), calls.end());
  try {
    std::vector<Reply> more = send_script_calls(conn, path.script(), again);
    for (Reply& r : more) replies.push_back(std::move(r));
  } catch (const ConnectionError& e) {
    for (std::size_t k = from; k < calls.size(); ++k) replies.push_back(transit_failure(e));
  }
}

}  // namespace decide_impl

REDLIMIT_INLINE std::vector<Decision> decide(DecisionPath& path, std::chrono::steady_clock::time_point started) {
  Context& ctx = path.context();
  // A breaker short-circuited some requests: a cluster reads its map again, in case their master was
  // replaced (a failover), so that their next calls reach the new one; under OnFailure::raise too,
  // where begin() throws. The asynchronous path asks its AsyncConnection instead, whose caller may
  // be an event loop's thread (AsyncCluster reads the map without blocking).
  const auto refused = [&] {
    if (!path.refused_key().empty()) ctx.connection->shard_refused(path.refused_key());
  };
  const std::vector<ScriptCall>* begun = nullptr;
  try {
    begun = &path.begin(ctx.connection->scripts_span_node());
  } catch (const Error&) {
    refused();
    throw;
  }
  refused();
  const std::vector<ScriptCall>& calls = *begun;
  if (calls.empty()) return path.finish({});
  std::vector<Reply> replies;
  try {
    // The call's deadline starts here and bounds the whole send step: the pool's wait, connecting,
    // the round trip and the reload after NOSCRIPT (docs/reliability.md §7).
    CallScope call(*ctx.connection, started);
    std::unique_lock<std::mutex> lock(ctx.mutex, std::defer_lock);
    if (!ctx.connection->thread_safe()) lock.lock();
    replies = send_script_calls(*ctx.connection, path.script(), calls);
    decide_impl::resend_refused(path, *ctx.connection, replies);
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
struct Gathering : std::enable_shared_from_this<Gathering> {
  std::shared_ptr<DecisionPath> path;
  BatchDecisionCallback done;
  std::shared_ptr<AsyncConnection> conn;
  std::optional<AsyncConnection::Deadline> deadline;
  std::mutex mutex;
  std::vector<Reply> replies;
  std::size_t left = 0;
  std::size_t lost = 0;           // calls failed in transit (outcome unknown)
  std::exception_ptr first_lost;  // the first of those failures
  std::exception_ptr foreign;     // any other exception: the path is abandoned
  bool resent = false;            // the refused spread calls went again (once)

  // Counts one call in (its reply or failure recorded); returns whether it was the last.
  bool arrived() { return --left == 0; }
  // Sends calls [from, end) of the path; each reply or failure comes back through gather().
  void send(std::size_t from);
  // The spread calls a cluster node refused, split by slot and sent (DecisionPath::split_refused);
  // false when there were none.
  bool resend_refused();
  void conclude();
};

REDLIMIT_INLINE bool Gathering::resend_refused() {
  if (resent || foreign) return false;
  resent = true;
  const std::size_t from = path->split_refused(replies);
  const std::size_t end = path->calls().size();
  if (from == end) return false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    replies.resize(end);
    left = end - from;
  }
  send(from);
  return true;
}

REDLIMIT_INLINE void Gathering::conclude() {
  if (resend_refused()) return;  // concluded when the calls sent again are in
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

REDLIMIT_INLINE void Gathering::send(std::size_t from) {
  const std::vector<ScriptCall>& calls = path->calls();
  // Taken now: a call refused at once may conclude the gathering, which may append calls (sent by
  // that conclusion, not by this loop).
  const std::size_t end = calls.size();
  const auto self = shared_from_this();
  for (std::size_t k = from; k < end; ++k) {
    auto on_error = [self, k](std::exception_ptr error) { gather(self, k, nullptr, std::move(error)); };
    try {
      send_script_call_async(
          conn, path->script(), calls[k], [self, k](Reply reply) { gather(self, k, &reply, nullptr); }, on_error,
          deadline);
    } catch (...) {  // refused before anything was queued: no callback will come for this call
      on_error(std::current_exception());
    }
  }
}

}  // namespace decide_impl

REDLIMIT_INLINE void decide_many_async(std::shared_ptr<DecisionPath> path, std::shared_ptr<AsyncConnection> conn,
                                       BatchDecisionCallback done, std::optional<AsyncConnection::Deadline> deadline) {
  const std::vector<ScriptCall>* calls = nullptr;
  // As in decide(): requests a breaker short-circuited have the router read its map again (on a
  // cluster, an asynchronous CLUSTER SLOTS: AsyncConnection::shard_refused never blocks).
  const auto refused = [&] {
    if (!path->refused_key().empty()) conn->shard_refused(path->refused_key());
  };
  try {
    const Connection& router = *path->context().connection;
    calls = &path->begin(router.scripts_span_node());
  } catch (...) {  // breaker open under OnFailure::raise: reported already
    refused();
    conn->post([done, error = std::current_exception()] { done({}, error); });
    return;
  }
  refused();
  if (calls->empty()) {  // the reject cache or the failure policy answered: no Redis
    conn->post([path, done] { decide_impl::deliver(done, [&] { return path->finish({}); }); });
    return;
  }
  // Every script call is queued at once (pipelined on one server, one per master on a cluster);
  // the decisions are delivered when the last reply is in.
  auto g = std::make_shared<decide_impl::Gathering>();
  g->path = path;
  g->done = std::move(done);
  g->conn = std::move(conn);
  g->deadline = deadline;
  g->replies.resize(calls->size());
  g->left = calls->size();
  g->send(0);
}

REDLIMIT_INLINE void decide_async(std::shared_ptr<DecisionPath> path, std::shared_ptr<AsyncConnection> conn,
                                  DecisionCallback done) {
  decide_many_async(std::move(path), std::move(conn),
                    [done = std::move(done)](const std::vector<Decision>& ds, std::exception_ptr e) {
                      done(ds.empty() ? Decision{} : ds.front(), std::move(e));
                    });
}

}  // namespace redlimit::detail
