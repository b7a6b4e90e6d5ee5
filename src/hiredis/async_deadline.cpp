// AsyncRedis::Core's deadlines: each call's own (docs/reliability.md §7), the connect deadline, the
// connection's health, and the one timer that serves them all. See async_core.hpp ("Deadlines").
#include "async_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "redlimit/errors.hpp"

namespace redlimit {

using async_detail::SteadyClock;
using hiredis_detail::describe;

void AsyncRedis::Core::on_timer() {
  const InLoop in_loop(loop());
  timer_armed_ = false;
  collect_garbage();
  const TimePoint now = SteadyClock::now();
  expire_calls(now);
  check_connection(now);
  move_due(now, shutting_down_);
  pump();
  schedule_deadline(now);
  maybe_finish();
}

bool AsyncRedis::Core::overdue(const Item& item, TimePoint now) {
  return !item.task && !item.close && has_deadline(item.deadline) && item.deadline <= now;
}

// Fails every call whose deadline has passed. One still in the backlog is removed: it is never sent.
// One that hiredis holds fails now and is marked expired, so that its reply, whenever hiredis hands
// it back, is dropped (replied()): its outcome is unknown and it is never replayed. The connection
// is left to the health rule (check_connection): a late reply is told apart from the next command's
// by hiredis's order, so a slow call need not cost the calls queued behind it.
void AsyncRedis::Core::expire_calls(TimePoint now) {
  std::vector<ErrorCallback> sent;
  if (conn_) {
    for (const Sent& s : conn_->inflight) {
      Pending& p = *s.pending;
      if (p.expired || !has_deadline(p.deadline) || p.deadline > now) continue;
      p.expired = true;
      sent.push_back(std::move(p.on_error));
      p.on_reply = nullptr;  // lets go of what the call holds now, not at the late reply
    }
  }
  const std::vector<ErrorCallback> unsent = take_commands([now](const Item& item) { return overdue(item, now); });
  // Last: a callback may queue more work (never run it here: submit() only wakes the loop).
  for (const ErrorCallback& on_error : sent) fail(on_error, deadline_error(true));
  for (const ErrorCallback& on_error : unsent) fail(on_error, deadline_error(false));
}

std::exception_ptr AsyncRedis::Core::deadline_error(bool sent) const {
  return std::make_exception_ptr(
      TimeoutError(sent ? fmt::format("no reply from {} within the call's deadline", where())
                        : fmt::format("the call's deadline passed before it could be sent to {} (connection busy "
                                      "or connecting)",
                                      where())));
}

// The connection's own deadlines: connecting, and the health rule. Either drops the connection, and
// every command still on it fails with TimeoutError (those failed at their deadline already stay
// silent).
void AsyncRedis::Core::check_connection(TimePoint now) {
  if (!conn_) return;
  if (!conn_->connected && conn_->connect_deadline && now >= *conn_->connect_deadline) {
    drop(fmt::format("connecting to {} took longer than {} ms", where(), options_.connect_timeout.count()), true);
  } else if (const auto due = reply_due(*conn_); due && *due <= now) {
    drop(fmt::format("no reply from {} within {} ms", where(), options_.command_timeout.count()), true);
  }
}

// The health rule: when the connection is overdue, command_timeout after the oldest command waiting
// on it was sent or after the reply before it arrived, whichever is later. Replies come in order, so
// a command deep in a pipeline waits for the ones ahead of it; what this catches is a connection
// that stops answering, not a long (but moving) queue. Each call's own deadline is separate.
std::optional<AsyncRedis::Core::TimePoint> AsyncRedis::Core::reply_due(const Conn& conn) const {
  if (conn.inflight.empty() || options_.command_timeout.count() == 0) return std::nullopt;
  return std::max(conn.inflight.front().at, conn.last_reply) + options_.command_timeout;
}

// The earliest deadline of a call not failed yet, in hiredis or in the backlog. A scan: it runs after
// the timer fires, and the backlog and max_in_flight bound it.
std::optional<AsyncRedis::Core::TimePoint> AsyncRedis::Core::earliest_call_deadline() const {
  std::optional<TimePoint> earliest;
  const auto consider = [&earliest](TimePoint t) {
    if (has_deadline(t) && (!earliest || t < *earliest)) earliest = t;
  };
  if (conn_) {
    for (const Sent& s : conn_->inflight) {
      if (!s.pending->expired) consider(s.pending->deadline);
    }
  }
  for (const Item& item : backlog_) {
    if (!item.task && !item.close) consider(item.deadline);
  }
  return earliest;
}

// Re-arms the timer after it fired at `fired`, at the earliest deadline left but not within 1 ms of
// `fired`: calls queued in a steady stream during a stall have deadlines microseconds apart, and
// each firing scans the backlog; this way one scan fails a millisecond's worth of them.
void AsyncRedis::Core::schedule_deadline(TimePoint fired) {
  std::optional<TimePoint> next = earliest_call_deadline();
  const auto consider = [&next](std::optional<TimePoint> t) {
    if (t && (!next || *t < *next)) next = t;
  };
  if (conn_) {
    if (!conn_->connected) consider(conn_->connect_deadline);
    consider(reply_due(*conn_));
  }
  if (!later_.empty()) consider(later_.begin()->first);
  if (next) arm_by(std::max(*next, fired + std::chrono::milliseconds(1)));
}

bool AsyncRedis::Core::keep_for_later(Item& item, TimePoint now) {
  if (!item.task || !has_deadline(item.not_before) || item.not_before <= now || shutting_down_) return false;
  later_.emplace(item.not_before, std::move(item.task));
  arm_by(item.not_before);
  return true;
}

// In the order they were due, ahead of what the backlog holds: a task never waits behind commands
// held back by max_in_flight (pump() runs the tasks at its front whatever the connection's state).
void AsyncRedis::Core::move_due(TimePoint now, bool all) {
  const auto end = all ? later_.end() : later_.upper_bound(now);
  std::vector<Item> due;
  for (auto it = later_.begin(); it != end; ++it) {
    Item item;
    item.task = std::move(it->second);
    due.push_back(std::move(item));
  }
  later_.erase(later_.begin(), end);
  for (auto it = due.rbegin(); it != due.rend(); ++it) backlog_.push_front(std::move(*it));
}

// Arms the timer for `at` unless it fires earlier already (on_timer re-arms for what is left).
void AsyncRedis::Core::arm_by(TimePoint at) {
  if (!timer_armed_ || at < timer_at_) arm(at);
}

void AsyncRedis::Core::arm(TimePoint at) {
  const auto delay = std::max(std::chrono::microseconds{0},
                              std::chrono::duration_cast<std::chrono::microseconds>(at - SteadyClock::now()));
  timer_armed_ = true;
  timer_at_ = at;
  arm_timer(delay);
}

}  // namespace redlimit
