#include "redlimit/transport/connection_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "call_deadline.hpp"
#include "pool_rider.hpp"
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

  void connected_check() noexcept { pool_.connected_check(slot_); }

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

void ConnectionPool::begin_call(std::chrono::steady_clock::time_point started) {
  hiredis_detail::begin_call(command_timeout_, started);
}
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
    throw_wait_timeout(deadline <= waited_out);
  }
  return take_slot(lock);
}

void ConnectionPool::throw_wait_timeout(bool call_deadline_first) const {
  if (call_deadline_first) {
    throw TimeoutError(fmt::format("no pooled connection free before the call's deadline ({} ms; {} in use)",
                                   command_timeout_.count(), options_.size));
  }
  throw TimeoutError(fmt::format("no pooled connection free within {} ms ({} in use)", options_.wait_timeout.count(),
                                 options_.size));
}

ConnectionPool::Slot ConnectionPool::take_slot(std::unique_lock<std::mutex>& lock) {
  if (idle_.empty()) {
    ++open_;
    lock.unlock();
    try {
      return Slot{std::make_unique<RedisConnection>(endpoint_, connect_timeout_, command_timeout_, tls_),
                  std::chrono::steady_clock::now()};
    } catch (...) {  // out of memory: the connection was never opened
      lock.lock();
      --open_;
      lock.unlock();
      throw;
    }
  }
  Slot slot = std::move(idle_.back());
  idle_.pop_back();
  lock.unlock();
  const auto idle_for = std::chrono::steady_clock::now() - slot.last_used;
  if (options_.health_check_interval.count() > 0 && idle_for > options_.health_check_interval) {
    try {
      slot.connection->command({"PING"});
    } catch (const Error&) {
      // A check only: the connection dropped a broken context, and the decision's own command
      // reconnects it and meets whatever is wrong itself.
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
  // A caller queued for a shared round trip waits on ridden_: a connection given back by a Sent
  // pipeline (or a lease) is one it can drive on.
  ridden_.notify_all();
}

void ConnectionPool::connected_check(Slot& slot) noexcept {
  const std::uint64_t connects = slot.connection->connects();
  if (connects == slot.connects_seen || !on_connect_) return;
  slot.connects_seen = connects;
  try {
    on_connect_(*slot.connection);
  } catch (...) {  // a check of the server, never the caller's failure
  }
}

// A command outside any call (reset(), setup) is a call of its own: the wait for a connection and
// the round trip share one deadline.
Reply ConnectionPool::command(const std::vector<std::string>& argv) {
  if (options_.coalesce) {
    if (argv.empty()) throw InvalidArgument("empty command");
    Rider me(&argv, nullptr);
    return std::move(ride(me).front());
  }
  CallScope call(*this);
  Lease lease(*this);
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  commands_.fetch_add(1, std::memory_order_relaxed);
  Reply reply = (*lease).command(argv);
  lease.connected_check();
  return reply;
}

std::vector<Reply> ConnectionPool::pipeline(const std::vector<std::vector<std::string>>& commands) {
  if (options_.coalesce) {
    if (commands.empty()) return {};
    // Checked before queueing: one caller's bad command must not fail the round trip it shares.
    for (const auto& c : commands) {
      if (c.empty()) throw InvalidArgument("empty command in pipeline");
    }
    Rider me(nullptr, &commands);
    return ride(me);
  }
  CallScope call(*this);
  Lease lease(*this);
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  commands_.fetch_add(commands.size(), std::memory_order_relaxed);
  std::vector<Reply> replies = (*lease).pipeline(commands);
  lease.connected_check();
  return replies;
}

ConnectionPool::Sent::Sent(ConnectionPool& pool, Slot slot, std::size_t count)
    : pool_(&pool), slot_(std::move(slot)), count_(count) {}

ConnectionPool::Sent::Sent(Sent&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), slot_(std::move(other.slot_)), count_(other.count_),
      read_(other.read_) {}

ConnectionPool::Sent::~Sent() {
  if (pool_ == nullptr) return;  // moved from
  if (!read_) slot_.connection->disconnect();
  slot_.last_used = std::chrono::steady_clock::now();
  pool_->release(std::move(slot_));
}

void ConnectionPool::Sent::receive(std::vector<Reply>& replies) {
  if (pool_ == nullptr || read_) throw InvalidArgument("a sent pipeline's replies are read once");
  slot_.connection->receive(count_, replies);
  read_ = true;
  pool_->connected_check(slot_);
}

ConnectionPool::Sent ConnectionPool::send_only(const std::vector<std::vector<std::string>>& commands) {
  std::vector<const std::vector<std::string>*> refs;
  refs.reserve(commands.size());
  for (const auto& c : commands) {
    if (c.empty()) throw InvalidArgument("empty command in pipeline");
    refs.push_back(&c);
  }
  CallScope call(*this);
  Sent sent(*this, acquire(), commands.size());
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  commands_.fetch_add(commands.size(), std::memory_order_relaxed);
  sent.slot_.connection->send(refs);  // a failure: ~Sent gives the connection back, dropped
  return sent;
}

ConnectionPool::Stats ConnectionPool::stats() const {
  Stats s;
  s.round_trips = round_trips_.load(std::memory_order_relaxed);
  s.commands = commands_.load(std::memory_order_relaxed);
  return s;
}

std::size_t ConnectionPool::open_connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

}  // namespace redlimit
