#include "redlimit/transport/connection_pool.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "call_deadline.hpp"
#include "tls.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

// Returns the slot to the pool when the round trip is over, whatever happened during it: a
// RedisConnection that failed has already dropped its context and reconnects on next use.
class ConnectionPool::Lease {
 public:
  Lease(ConnectionPool& pool) : pool_(pool), slot_(pool.acquire()) {}
  ~Lease() {
    slot_.last_used = std::chrono::steady_clock::now();
    pool_.release(std::move(slot_));
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  RedisConnection& operator*() { return *slot_.connection; }

  // After a round trip: the pool's connect hook, once per new server connection.
  void connected_check() noexcept {
    const std::uint64_t connects = slot_.connection->connects();
    if (connects == slot_.connects_seen || !pool_.on_connect_) return;
    slot_.connects_seen = connects;
    try {
      pool_.on_connect_(*slot_.connection);
    } catch (...) {  // a check of the server, never the caller's failure
    }
  }

 private:
  ConnectionPool& pool_;
  Slot slot_;
};

ConnectionPool::ConnectionPool(Endpoint endpoint, std::chrono::milliseconds connect_timeout,
                               std::chrono::milliseconds command_timeout, PoolOptions options)
    : endpoint_(std::move(endpoint)),
      connect_timeout_(connect_timeout),
      command_timeout_(command_timeout),
      options_(options),
      tls_(hiredis_detail::Tls::make(endpoint_)) {  // before any I/O: a TLS error is the caller's
  if (options_.size == 0) options_.size = 1;
  if (options_.wait_timeout.count() < 0) throw InvalidArgument("pool wait_timeout must not be negative");
  if (options_.health_check_interval.count() < 0) {
    throw InvalidArgument("pool health_check_interval must not be negative");
  }
  set_script_path(ScriptPath::probe);  // one server: Redis Functions if it has them
}

void ConnectionPool::begin_call() { hiredis_detail::begin_call(command_timeout_); }
void ConnectionPool::end_call() noexcept { hiredis_detail::end_call(); }

ConnectionPool::Slot ConnectionPool::acquire() {
  // Whichever comes first: wait_timeout, or the deadline of the call (or of this command alone).
  using Steady = hiredis_detail::DeadlineClock;
  const Steady::time_point deadline = hiredis_detail::step_deadline(command_timeout_);
  const Steady::time_point waited_out = options_.wait_timeout.count() > 0
                                           ? Steady::now() + options_.wait_timeout
                                           : hiredis_detail::no_deadline();
  const Steady::time_point until = std::min(deadline, waited_out);
  std::unique_lock<std::mutex> lock(mutex_);
  const auto ready = [&] { return !idle_.empty() || open_ < options_.size; };
  if (until == hiredis_detail::no_deadline()) {
    available_.wait(lock, ready);
  } else if (!available_.wait_until(lock, until, ready)) {
    if (deadline <= waited_out) {
      throw TimeoutError(fmt::format("no pooled connection free before the call's deadline ({} ms; {} in use)",
                                     command_timeout_.count(), options_.size));
    }
    throw TimeoutError(fmt::format("no pooled connection free within {} ms ({} in use)",
                                   options_.wait_timeout.count(), options_.size));
  }
  if (idle_.empty()) {
    ++open_;
    lock.unlock();
    return Slot{std::make_unique<RedisConnection>(endpoint_, connect_timeout_, command_timeout_, tls_),
                std::chrono::steady_clock::now()};
  }
  Slot slot = std::move(idle_.back());
  idle_.pop_back();
  lock.unlock();
  const auto idle_for = std::chrono::steady_clock::now() - slot.last_used;
  if (options_.health_check_interval.count() > 0 && idle_for > options_.health_check_interval) {
    try {
      slot.connection->command({"PING"});
    } catch (const ConnectionError&) {
      // The connection dropped its broken context; the decision's own command reconnects it.
    }
  }
  return slot;
}

void ConnectionPool::release(Slot slot) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(std::move(slot));
  }
  available_.notify_one();
}

// A command outside any call (reset(), setup) is a call of its own: the wait for a connection and
// the round trip share one deadline.
Reply ConnectionPool::command(const std::vector<std::string>& argv) {
  CallScope call(*this);
  Lease lease(*this);
  Reply reply = (*lease).command(argv);
  lease.connected_check();
  return reply;
}

std::vector<Reply> ConnectionPool::pipeline(const std::vector<std::vector<std::string>>& commands) {
  CallScope call(*this);
  Lease lease(*this);
  std::vector<Reply> replies = (*lease).pipeline(commands);
  lease.connected_check();
  return replies;
}

std::size_t ConnectionPool::open_connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

}  // namespace redlimit
