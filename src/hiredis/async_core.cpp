// AsyncRedis::Core, on the loop's side of the queue: taking what other threads queued, running it in
// order (tasks, commands, the close marker), the reply and connect deadlines, and the shutdown that
// ends with the loop resources released. See async_core.hpp for the shape and the hiredis rules.
#include "async_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "redlimit/errors.hpp"

namespace redlimit {

namespace async_detail {

std::string describe(const Endpoint& e) {
  return e.unix_path.empty() ? fmt::format("{}:{}", e.host, e.port) : e.unix_path;
}

void check_options(const AsyncOptions& o) {
  if (o.connect_timeout.count() < 0) throw InvalidArgument("connect_timeout must not be negative");
  if (o.command_timeout.count() < 0) throw InvalidArgument("command_timeout must not be negative");
}

}  // namespace async_detail

using async_detail::describe;
using async_detail::SteadyClock;

namespace {

std::exception_ptr closed_error(const Endpoint& e) {
  return std::make_exception_ptr(ConnectionError(fmt::format("AsyncRedis to {} is closed", describe(e))));
}

}  // namespace

AsyncRedis::Core::Core(Endpoint endpoint, AsyncOptions options)
    : endpoint_(std::move(endpoint)), options_(options), tls_(hiredis_detail::Tls::make(endpoint_)) {}

void AsyncRedis::Core::submit(Item item) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (released_) {
    lock.unlock();
    run_inline(item);
    return;
  }
  if (item.close) {
    if (closing_) return;
    closing_ = true;
  }
  queue_.push_back(std::move(item));
  if (!wake_pending_) {
    wake_pending_ = true;
    wake();
  }
}

AsyncRedis::Stats AsyncRedis::Core::stats() const {
  Stats s;
  s.connections = connections_.load();
  s.commands = commands_.load();
  s.max_in_flight = max_in_flight_.load();
  return s;
}

void AsyncRedis::Core::on_wake() {
  collect_garbage();
  std::vector<Item> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(queue_);
    wake_pending_ = false;
  }
  for (Item& item : batch) backlog_.push_back(std::move(item));
  pump();
  maybe_finish();
}

void AsyncRedis::Core::on_timer() {
  timer_armed_ = false;
  collect_garbage();
  if (conn_) {
    const TimePoint now = SteadyClock::now();
    if (!conn_->connected && conn_->connect_deadline && now >= *conn_->connect_deadline) {
      drop(fmt::format("connecting to {} took longer than {} ms", describe(endpoint_),
                       options_.connect_timeout.count()),
           true);
    } else if (const auto due = reply_due(*conn_); due && *due <= now) {
      drop(fmt::format("no reply from {} within {} ms", describe(endpoint_), options_.command_timeout.count()), true);
    }
  }
  pump();
  schedule_deadline();
  maybe_finish();
}

void AsyncRedis::Core::finished() {
  const std::shared_ptr<Core> last = std::move(self_);
  (void)last;  // destroyed here, possibly with *this
}

void AsyncRedis::Core::run_inline(Item& item) {
  if (item.task) {
    run_task(item.task);
  } else if (!item.close) {
    // No loop to run it on any more.
    fail(item.on_error, std::make_exception_ptr(ConnectionError("AsyncRedis is closed")));
  }
}

void AsyncRedis::Core::run_task(const std::function<void()>& task) {
  try {
    task();
  } catch (...) {  // cannot propagate through the event loop's C frames
  }
}

void AsyncRedis::Core::fail(const ErrorCallback& on_error, std::exception_ptr error) {
  try {
    on_error(std::move(error));
  } catch (...) {
  }
}

// Runs the backlog in order: tasks, the close marker, and commands, which go to hiredis while fewer
// than max_in_flight wait for replies (hiredis 0.14 moves its whole output buffer after each
// partial write: an unbounded flood would cost it quadratic time).
void AsyncRedis::Core::pump() {
  std::exception_ptr connect_error;  // one failed connect fails the rest of this pass too
  while (!backlog_.empty()) {
    Item& front = backlog_.front();
    const bool command = !front.task && !front.close;
    if (command && !shutting_down_ && at_capacity()) return;  // resumed by replied()
    Item item = std::move(front);
    backlog_.pop_front();
    if (item.task) {
      run_task(item.task);
    } else if (item.close) {
      begin_shutdown();
    } else if (shutting_down_) {
      fail(item.on_error, closed_error(endpoint_));
    } else {
      send(item, connect_error);
    }
  }
}

bool AsyncRedis::Core::at_capacity() const {
  return conn_ && options_.max_in_flight > 0 && conn_->inflight.size() >= options_.max_in_flight;
}

// When the oldest command waiting on `conn` is overdue: command_timeout after it was sent, or after
// the reply before it arrived, whichever is later. Replies come in order, so a command deep in a
// pipeline waits for the ones ahead of it; what the deadline catches is a connection that stops
// answering, not a long (but moving) queue.
std::optional<AsyncRedis::Core::TimePoint> AsyncRedis::Core::reply_due(const Conn& conn) const {
  if (conn.inflight.empty() || options_.command_timeout.count() == 0) return std::nullopt;
  return std::max(conn.inflight.front(), conn.last_reply) + options_.command_timeout;
}

void AsyncRedis::Core::schedule_deadline() {
  if (!conn_) return;
  std::optional<TimePoint> next;
  if (!conn_->connected && conn_->connect_deadline) next = conn_->connect_deadline;
  if (const auto due = reply_due(*conn_); due && (!next || *due < *next)) next = due;
  if (next && (!timer_armed_ || *next < timer_at_)) arm(*next);
}

void AsyncRedis::Core::arm(TimePoint at) {
  const auto delay = std::max(std::chrono::microseconds{0},
                              std::chrono::duration_cast<std::chrono::microseconds>(at - SteadyClock::now()));
  timer_armed_ = true;
  timer_at_ = at;
  arm_timer(delay);
}

void AsyncRedis::Core::begin_shutdown() {
  shutting_down_ = true;
  if (!conn_) return;
  if (conn_->inflight.empty()) {
    drop(fmt::format("AsyncRedis to {} is closed", describe(endpoint_)), false);
  } else {
    // Let what was sent be answered (the command deadlines still hold); hiredis frees the
    // context after the last reply and tells on_disconnect.
    redisAsyncDisconnect(conn_->ac.get());
  }
}

void AsyncRedis::Core::maybe_finish() {
  if (!shutting_down_ || conn_ || finishing_) return;
  finishing_ = true;
  collect_garbage();
  std::vector<Item> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;  // from now on submit() runs things on the caller's thread
    left.swap(queue_);
  }
  for (Item& item : backlog_) run_inline(item);
  backlog_.clear();
  for (Item& item : left) run_inline(item);
  release_loop();  // last: may destroy *this
}

}  // namespace redlimit
