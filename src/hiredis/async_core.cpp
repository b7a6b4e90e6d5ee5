// AsyncRedis::Core, on the loop's side of the queue: taking what other threads queued, running it in
// order (tasks, commands, the close marker), and the shutdown that ends with the loop resources
// released (the deadlines: async_deadline.cpp). See async_core.hpp for the shape and the hiredis rules.
#include "async_core.hpp"

#include <fmt/format.h>

#include <utility>

#include "redlimit/errors.hpp"

namespace redlimit {

namespace async_detail {

void check_options(const AsyncOptions& o) {
  if (o.connect_timeout.count() < 0) throw InvalidArgument("connect_timeout must not be negative");
  if (o.command_timeout.count() < 0) throw InvalidArgument("command_timeout must not be negative");
}

}  // namespace async_detail

using async_detail::SteadyClock;
using hiredis_detail::describe;

namespace {

std::exception_ptr closed_error(const std::string& where) {
  return std::make_exception_ptr(ConnectionError(fmt::format("AsyncRedis to {} is closed", where)));
}

}  // namespace

AsyncRedis::Core::Core(Endpoint endpoint, AsyncOptions options)
    : endpoint_(std::move(endpoint)),
      options_(options),
      tls_(hiredis_detail::Tls::make(endpoint_)),
      target_(endpoint_) {}

void AsyncRedis::Core::submit(Item item) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (released_) {
    lock.unlock();
    run_inline(item);  // (an urgent item is dropped: nothing waits for it any more)
    return;
  }
  if (item.close) {
    if (closing_) return;
    closing_ = true;
  }
  queue_.push_back(std::move(item));
  if (!wake_pending_) {
    wake_pending_ = true;
    if (running_ == loop()) {
      wake_in_loop();
    } else {
      ++wakeups_;
      wake();
    }
  }
}

AsyncRedis::Stats AsyncRedis::Core::stats() const {
  Stats s;
  s.connections = connections_.load();
  s.commands = commands_.load();
  s.max_in_flight = max_in_flight_.load();
  s.wakeups = wakeups_.load();
  s.discoveries = discoveries_.load();
  s.announcements = announcements_.load();
  s.resent = resent_.load();
  return s;
}

AsyncRedis::Core::TimePoint AsyncRedis::Core::call_deadline() const {
  if (options_.command_timeout.count() == 0) return TimePoint{};
  return SteadyClock::now() + options_.command_timeout;
}

thread_local const void* AsyncRedis::Core::running_ = nullptr;

void AsyncRedis::Core::on_wake() {
  const InLoop in_loop(loop());
  collect_garbage();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_pending_ = false;
  }
  take_queue();
  pump();
  maybe_finish();
}

// Moves what other threads (and callbacks) queued to the backlog; false when there was nothing.
bool AsyncRedis::Core::take_queue() {
  std::vector<Item> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(queue_);
  }
  // A call left in the backlog (behind max_in_flight) is bounded by its deadline there too.
  std::optional<TimePoint> earliest;
  const TimePoint now = SteadyClock::now();
  std::vector<std::function<void()>> urgent;
  for (Item& item : batch) {
    if (item.urgent) {
      urgent.push_back(std::move(item.task));
      continue;
    }
    if (keep_for_later(item, now)) continue;
    if (has_deadline(item.deadline) && (!earliest || item.deadline < *earliest)) earliest = item.deadline;
    backlog_.push_back(std::move(item));
  }
  if (earliest) arm_by(*earliest);
  for (const auto& task : urgent) run_task(task);  // after the commands they may fail are in the backlog
  return !batch.empty();
}

// The wake-up that queued work scheduled still comes (wake_pending_ stays as it is) and finds what
// is queued after this. Tasks queue commands (a merged call's turn queues its script call), so the
// queue is taken until it stays empty, a few rounds at most. A write that fails leaves its error in
// the context, where the loop's own handler finds it and drops the connection outside callbacks
// (hiredis would free the context inside this callback if we went through redisAsyncHandleWrite).
// For the same reason the close marker is left to on_wake (pump's `in_callback`): a close() made in
// this callback, or on another thread meanwhile, must not free the context hiredis is inside.
void AsyncRedis::Core::send_now() {
  const auto connected = [this] { return conn_ && conn_->connected && conn_->ac; };
  for (int round = 0; round < 4; ++round) {
    if (running_ != loop() || shutting_down_ || !connected()) return;
    if (!take_queue()) break;
    pump(true);
  }
  // Over TLS hiredis drives SSL_write through its own read and write events (a write can want a
  // read): the commands wait in its buffer for the loop's next turn, as without send_now.
  if (!connected() || conn_->ssl != nullptr || (conn_->ac->c.flags & REDIS_CONNECTED) == 0) return;
  int done = 0;
  (void)redisBufferWrite(&conn_->ac->c, &done);
}

void AsyncRedis::Core::finished() {
  const std::shared_ptr<Core> last = std::move(self_);
  (void)last;  // destroyed here, possibly with *this
}

void AsyncRedis::Core::run_inline(Item& item) {
  if (item.urgent) return;
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

std::vector<AsyncConnection::ErrorCallback> AsyncRedis::Core::take_commands(
    const std::function<bool(const Item&)>& chosen) {
  std::vector<ErrorCallback> taken;
  auto kept = backlog_.begin();
  for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
    if (!it->task && !it->close && chosen(*it)) {
      taken.push_back(std::move(it->on_error));
    } else {
      if (kept != it) *kept = std::move(*it);
      ++kept;
    }
  }
  backlog_.erase(kept, backlog_.end());
  return taken;
}

// Runs the backlog in order: tasks, the close marker, and commands, which go to hiredis while fewer
// than max_in_flight wait for replies (hiredis 0.14 moves its whole output buffer after each
// partial write: an unbounded flood would cost it quadratic time).
void AsyncRedis::Core::pump(bool in_callback) {
  std::exception_ptr connect_error;  // one failed connect fails the rest of this pass too
  const TimePoint now = SteadyClock::now();
  while (!backlog_.empty()) {
    Item& front = backlog_.front();
    const bool command = !front.task && !front.close;
    if (command && !shutting_down_ && at_capacity()) return;  // resumed by replied()
    // A refused connection draining (resumed by leave_when_drained()); a Sentinel master being looked
    // for (resumed by apply()).
    if (command && !shutting_down_ && held_by_refusal()) return;
    if (command && !shutting_down_ && watch_ && waiting_for_master(now)) return;
    if (command && !shutting_down_ && waiting_for_address(now)) return;  // resumed by resolved()
    if (front.close && in_callback) return;  // on_wake runs it, at the top level (async_core.hpp)
    Item item = std::move(front);
    backlog_.pop_front();
    if (item.task) {
      run_task(item.task);
    } else if (item.close) {
      begin_shutdown();
    } else if (shutting_down_) {
      fail(item.on_error, closed_error(where()));
    } else if (overdue(item, now)) {
      fail(item.on_error, deadline_error(false));  // its call's time is up: never sent
    } else {
      send(item, connect_error);
    }
  }
}

// Commands wait in the backlog while the connection holds max_in_flight of them, and while its
// oldest one is past its call's deadline: a connection that has answered nothing for that long is
// suspect (the health rule may drop it any moment), and a call sent behind that command would wait
// for it. Its late reply, or the drop, lets the backlog go again.
bool AsyncRedis::Core::at_capacity() const {
  if (!conn_) return false;
  return head_expired(*conn_) || (options_.max_in_flight > 0 && conn_->inflight.size() >= options_.max_in_flight);
}

bool AsyncRedis::Core::head_expired(const Conn& conn) {
  return !conn.inflight.empty() && conn.inflight.front().pending->expired;
}

void AsyncRedis::Core::begin_shutdown() {
  shutting_down_ = true;
  listener_.reset();  // no announcement is wanted now (its thread is woken and joined)
  if (!conn_) return;
  if (conn_->inflight.empty()) {
    drop(fmt::format("AsyncRedis to {} is closed", where()), false);
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
  move_due(TimePoint{}, true);  // post_after's tasks that were still waiting run now
  for (Item& item : backlog_) run_inline(item);
  backlog_.clear();
  for (Item& item : left) run_inline(item);
  release_loop();  // last: may destroy *this
}

}  // namespace redlimit
