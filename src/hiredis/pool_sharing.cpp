// ConnectionPool's shared round trips (PoolOptions::coalesce): automatic pipelining of the calls
// that are in flight at the same moment, from any number of threads.
//
// A call queues itself as a Rider and waits. Whoever finds a connection free (idle, or one more may
// be opened) drives: it takes every rider queued by then, oldest first, sends all their commands in
// one pipeline, hands each its replies (or the round trip's error) and gives the connection back.
// While `size` round trips are on their way, new calls pile up and the next free connection takes
// them all at once: Redis reads and answers them in one go, which is where most of its CPU per
// decision goes when each request comes alone.
//
// Deadlines and the never-replay rule (docs/reliability.md §6, §7): a call still queued when its
// deadline (or the pool's wait_timeout) passes leaves the queue and throws TimeoutError; it was
// never sent. A round trip ends by the earliest deadline of the calls it carries, so no caller
// waits past its own. If it fails (broken, timed out), the calls whose replies were all read before
// it failed get them (Redis answered them; a later caller's deadline must not take that away), and
// every other call it carried gets the error: their outcome is unknown, and none is sent again. A
// call's commands go out together and in order.
#include <algorithm>
#include <exception>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "endpoint_text.hpp"
#include "pool_rider.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/transport/connection_pool.hpp"

namespace redlimit {

namespace {

// The most commands one shared round trip carries (a call's own may be more: it then goes alone).
// Large enough that a burst of single decisions goes out in a few writes, small enough that one
// round trip's replies stay a modest buffer.
constexpr std::size_t kMostCommands = 512;

// Hands each rider of a round trip its replies, in order; each is done. `replies` holds those read
// before the round trip failed (`error`): a rider they do not all cover gets the error.
template <typename Rider>
void settle(const std::vector<Rider*>& batch, std::vector<Reply>& replies, const std::exception_ptr& error) {
  std::size_t next = 0;
  for (Rider* r : batch) {
    if (next + r->size() > replies.size()) {
      r->error = error;
    } else {
      const auto first = replies.begin() + static_cast<std::ptrdiff_t>(next);
      r->replies.assign(std::make_move_iterator(first),
                        std::make_move_iterator(first + static_cast<std::ptrdiff_t>(r->size())));
    }
    next += r->size();
    r->done = true;
  }
}

}  // namespace

std::vector<Reply> ConnectionPool::ride(Rider& me) {
  CallScope call(*this);
  using Steady = hiredis_detail::DeadlineClock;
  me.deadline = hiredis_detail::step_deadline(command_timeout_);
  const Steady::time_point waited_out =
      options_.wait_timeout.count() > 0 ? Steady::now() + options_.wait_timeout : hiredis_detail::no_deadline();
  const Steady::time_point until = std::min(me.deadline, waited_out);
  std::unique_lock<std::mutex> lock(mutex_);
  riders_.push_back(&me);
  while (!me.done) {
    if (!me.taken && (!idle_.empty() || open_ < options_.size)) {
      drive(lock);  // carries `me` too: it is queued and not taken
      continue;
    }
    if (me.taken || until == hiredis_detail::no_deadline()) {
      // Taken: the round trip's own deadline (the earliest of its callers') bounds this wait.
      ridden_.wait(lock);
    } else if (ridden_.wait_until(lock, until) == std::cv_status::timeout && !me.taken && !me.done) {
      riders_.erase(std::find(riders_.begin(), riders_.end(), &me));
      throw_wait_timeout(me.deadline <= waited_out);
    }
  }
  lock.unlock();
  if (me.error) std::rethrow_exception(me.error);
  return std::move(me.replies);
}

// Called with the lock held and a connection free; returns with the lock held again, every rider
// it took done, and the connection back in the pool.
void ConnectionPool::drive(std::unique_lock<std::mutex>& lock) {
  std::vector<Rider*> batch;
  std::size_t commands = 0;
  auto earliest = hiredis_detail::no_deadline();
  const auto now = hiredis_detail::DeadlineClock::now();
  while (!riders_.empty() && (batch.empty() || commands + riders_.front()->size() <= kMostCommands)) {
    Rider* r = riders_.front();
    riders_.pop_front();
    r->taken = true;
    if (r->deadline <= now) {
      // Its deadline passed while it waited (its thread not yet back to leave the queue): it ends
      // here, unsent. Taken along, it would narrow the round trip to a deadline already passed, and
      // every other rider would get its TimeoutError, unsent too.
      r->error = std::make_exception_ptr(
          TimeoutError(fmt::format("the call's deadline passed while it waited for a round trip to {}",
                                   hiredis_detail::describe(endpoint_))));
      r->done = true;
      continue;
    }
    batch.push_back(r);
    commands += r->size();
    earliest = std::min(earliest, r->deadline);
  }
  if (batch.empty()) {  // every rider taken (at least the driver) had expired: nothing to send
    ridden_.notify_all();
    return;
  }
  std::vector<Reply> replies;
  std::exception_ptr error;
  Slot slot;
  try {
    slot = take_slot(lock);  // unlocks, also when it throws
  } catch (...) {
    error = std::current_exception();
  }
  if (!slot.connection) {  // no connection to send on: every rider taken gets the error, unsent
    lock.lock();
    settle(batch, replies, error);
    ridden_.notify_all();
    return;
  }
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  commands_.fetch_add(commands, std::memory_order_relaxed);
  {
    hiredis_detail::NarrowedCall narrowed(earliest);
    try {
      std::vector<const std::vector<std::string>*> refs;
      refs.reserve(commands);
      for (const Rider* r : batch) {
        for (std::size_t i = 0; i < r->size(); ++i) refs.push_back(r->at(i));
      }
      slot.connection->pipeline(refs, replies);
    } catch (...) {
      error = std::current_exception();
    }
  }
  lock.lock();
  settle(batch, replies, error);
  if (on_connect_ && slot.connection->connects() != slot.connects_seen) {
    // The connect hook (a new server connection's check: INFO) runs after the riders have their
    // replies: its round trip is bounded by this driver's deadline, which may be later than theirs.
    ridden_.notify_all();
    lock.unlock();
    connected_check(slot);
    lock.lock();
  }
  slot.last_used = std::chrono::steady_clock::now();
  idle_.push_back(std::move(slot));
  ridden_.notify_all();
  available_.notify_one();
}

}  // namespace redlimit
