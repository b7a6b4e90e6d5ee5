#pragma once
// Body of redlimit/detail/async_lane.hpp.
#include <algorithm>
#include <cstddef>
#include <utility>

#include "redlimit/detail/async_lane.hpp"
#include "redlimit/detail/context.hpp"
#include "redlimit/detail/decision_path.hpp"

namespace redlimit::detail {

REDLIMIT_INLINE bool AsyncLane::add(const std::shared_ptr<Context>& ctx,
                                    const std::shared_ptr<const StrategySpec>& spec,
                                    const std::shared_ptr<AsyncConnection>& conn, ScriptCall& call, std::int64_t cost,
                                    Done& done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_.empty()) {
      conn_ = conn;
      deadline_ = conn->call_deadline();
    } else if (conn_ != conn) {
      return false;
    }
    pending_.push_back(Pending{std::move(call), cost, std::move(done), std::chrono::steady_clock::now()});
    if (pending_.size() > 1) return true;  // the turn that sends it is scheduled already
  }
  // Outside the lock: a connection without a loop runs the task at once.
  conn->post([this, ctx, spec] { flush(ctx, spec); });
  return true;
}

REDLIMIT_INLINE void AsyncLane::flush(const std::shared_ptr<Context>& ctx,
                                      const std::shared_ptr<const StrategySpec>& spec) {
  std::vector<Pending> batch;
  std::shared_ptr<AsyncConnection> conn;
  AsyncConnection::Deadline deadline;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(pending_);
    conn = std::move(conn_);
    deadline = deadline_;
  }
  if (batch.empty()) return;  // cannot happen (one turn is scheduled per batch); nothing to send
  if (!conn->routes_by_slot() || batch.size() == 1) {
    send(ctx, spec, std::move(conn), deadline, std::move(batch));
    return;
  }
  // A call per master, in the order each master's first caller came; within one, the order queued.
  // The limiter's own router knows the masters (its slot map); the AsyncCluster follows any change
  // (MOVED) either way, so a stale map costs only how the calls are grouped.
  std::vector<std::pair<std::size_t, std::vector<Pending>>> by_node;
  for (Pending& p : batch) {
    const std::size_t node = ctx->connection->node_of(p.call.keys[0]);
    auto it = std::find_if(by_node.begin(), by_node.end(), [&](const auto& g) { return g.first == node; });
    if (it == by_node.end()) it = by_node.insert(by_node.end(), {node, {}});
    it->second.push_back(std::move(p));
  }
  for (auto& group : by_node) send(ctx, spec, conn, deadline, std::move(group.second));
}

REDLIMIT_INLINE void AsyncLane::send(const std::shared_ptr<Context>& ctx,
                                     const std::shared_ptr<const StrategySpec>& spec,
                                     std::shared_ptr<AsyncConnection> conn, AsyncConnection::Deadline deadline,
                                     std::vector<Pending> batch) {
  auto path = std::make_shared<DecisionPath>(ctx, spec, Operation::consume, *spec->script, /*keep_alive=*/true);
  path->count_each_request();  // each caller's consume_async() is a call of its own
  path->reserve(batch.size());
  std::vector<Done> callers;
  callers.reserve(batch.size());
  for (Pending& p : batch) {
    path->add(std::move(p.call), p.cost, p.started);  // its latency counts the turn it waited
    callers.push_back(std::move(p.done));
  }
  std::shared_ptr<AsyncConnection> sender = conn;
  decide_many_async(
      std::move(path), std::move(conn),
      [callers = std::move(callers), sender](const std::vector<Decision>& ds, std::exception_ptr error) {
        // Halfway, the calls the first half's callers made go out (AsyncConnection::send_now): Redis
        // decides them while the second half's are made, instead of waiting for all of them.
        const std::size_t half = callers.size() >= kSendEarlyFrom ? callers.size() / 2 : callers.size();
        for (std::size_t i = 0; i < callers.size(); ++i) {
          if (i == half) sender->send_now();
          try {  // one caller's exception must not cost the others their decisions (dropped, as
                 // the connection drops an exception escaping any callback)
            callers[i](error ? Decision{} : ds[i], error);
          } catch (...) {
          }
        }
      },
      deadline);
}

}  // namespace redlimit::detail
