#include "redlimit/transport/connection_pool.hpp"

#include <fmt/format.h>

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

 private:
  ConnectionPool& pool_;
  Slot slot_;
};

ConnectionPool::ConnectionPool(Endpoint endpoint, std::chrono::milliseconds connect_timeout,
                               std::chrono::milliseconds command_timeout, PoolOptions options)
    : endpoint_(std::move(endpoint)),
      connect_timeout_(connect_timeout),
      command_timeout_(command_timeout),
      options_(options) {
  if (options_.size == 0) options_.size = 1;
  if (options_.wait_timeout.count() < 0) throw InvalidArgument("pool wait_timeout must not be negative");
  if (options_.health_check_interval.count() < 0) {
    throw InvalidArgument("pool health_check_interval must not be negative");
  }
}

ConnectionPool::Slot ConnectionPool::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto ready = [&] { return !idle_.empty() || open_ < options_.size; };
  if (options_.wait_timeout.count() == 0) {
    available_.wait(lock, ready);
  } else if (!available_.wait_for(lock, options_.wait_timeout, ready)) {
    throw TimeoutError(fmt::format("no pooled connection free within {} ms ({} in use)",
                                   options_.wait_timeout.count(), options_.size));
  }
  if (idle_.empty()) {
    ++open_;
    lock.unlock();
    return Slot{std::make_unique<RedisConnection>(endpoint_, connect_timeout_, command_timeout_),
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

Reply ConnectionPool::command(const std::vector<std::string>& argv) {
  Lease lease(*this);
  return (*lease).command(argv);
}

std::vector<Reply> ConnectionPool::pipeline(const std::vector<std::vector<std::string>>& commands) {
  Lease lease(*this);
  return (*lease).pipeline(commands);
}

std::size_t ConnectionPool::open_connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

}  // namespace redlimit
