#pragma once
// A thread-safe Connection over up to `size` RedisConnections. With PoolOptions::coalesce (the
// default), the calls in flight at the same moment share round trips: whoever finds a connection
// free sends every call queued by then in one pipeline (src/hiredis/pool_sharing.cpp). Without it,
// each command leases one connection for its round trip and gives it back (RAII), so N threads run
// N round trips at once. Either way a caller waits for a free connection at most
// PoolOptions::wait_timeout, and never past its call's deadline.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "redlimit/transport/connection.hpp"
#include "redlimit/options.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "redlimit/url.hpp"

namespace redlimit {

class ConnectionPool final : public Connection {
 public:
  ConnectionPool(Endpoint endpoint, std::chrono::milliseconds connect_timeout,
                 std::chrono::milliseconds command_timeout, PoolOptions options);

  Reply command(const std::vector<std::string>& argv) override;
  std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands) override;
  bool thread_safe() const override { return true; }
  // A call's deadline (its start + command_timeout) also bounds its wait for a free connection.
  void begin_call(std::chrono::steady_clock::time_point started) override;
  void end_call() noexcept override;

  // Connections opened so far (idle or leased).
  std::size_t open_connections() const;

  // Round trips made and the commands they carried, since the pool was made: with
  // PoolOptions::coalesce under concurrent calls, several commands a round trip.
  struct Stats {
    std::uint64_t round_trips = 0;
    std::uint64_t commands = 0;
  };
  Stats stats() const;

  // Runs `hook` on a pooled connection after the first round trip it makes on a new server
  // connection (the first connect, and every reconnect), before the connection goes back to the
  // pool; the round trip's reply is already in hand. For checks of the server a reconnect may have
  // changed (RateLimiter: the eviction policy). What the hook throws is ignored. Set it before the
  // pool is shared between threads.
  using ConnectHook = std::function<void(Connection&)>;
  void on_connect(ConnectHook hook) { on_connect_ = std::move(hook); }

 private:
  struct Slot {
    std::unique_ptr<RedisConnection> connection;
    std::chrono::steady_clock::time_point last_used;
    std::uint64_t connects_seen = 0;  // connection->connects() when the hook last ran
  };
  class Lease;
  struct Rider;  // one caller's commands in a shared round trip (pool_sharing.cpp)

  Slot acquire();
  // With the lock held and a connection free (idle, or one more may be opened): takes it, and
  // unlocks. The connection is PINGed first when it sat idle past health_check_interval.
  Slot take_slot(std::unique_lock<std::mutex>& lock);
  void release(Slot slot);
  // After a round trip: the connect hook, once per new server connection.
  void connected_check(Slot& slot) noexcept;
  // The shared round trips (PoolOptions::coalesce).
  std::vector<Reply> ride(Rider& me);
  void drive(std::unique_lock<std::mutex>& lock);
  [[noreturn]] void throw_wait_timeout(bool call_deadline_first) const;

  Endpoint endpoint_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds command_timeout_;
  PoolOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable available_;
  std::vector<Slot> idle_;
  std::size_t open_ = 0;
  std::deque<Rider*> riders_;               // calls waiting for a round trip, oldest first
  std::condition_variable ridden_;          // a shared round trip ended: a call done, a connection free
  std::atomic<std::uint64_t> round_trips_{0}, commands_{0};
  ConnectHook on_connect_;
  std::shared_ptr<const hiredis_detail::Tls> tls_;  // rediss://: made once, shared by the connections

 public:
  // A pipeline written on a connection taken for it alone, whose replies are not read yet: the
  // caller writes to several pools before it reads from any (ClusterConnection::pipeline sends a
  // batch to every master at once). receive() reads the replies, within the call's deadline as it
  // stands then, appending each to `replies` as it is read: when it throws, those read before the
  // failure are there (RedisConnection::pipeline's pointer overload). The connection goes back to
  // the pool when this is destroyed; unread replies are dropped with their connection first, never
  // left for another command to read as its own.
  class Sent {
   public:
    Sent(Sent&& other) noexcept;
    Sent& operator=(Sent&&) = delete;
    Sent(const Sent&) = delete;
    Sent& operator=(const Sent&) = delete;
    ~Sent();
    void receive(std::vector<Reply>& replies);

   private:
    friend class ConnectionPool;
    Sent(ConnectionPool& pool, Slot slot, std::size_t count);
    ConnectionPool* pool_;
    Slot slot_;
    std::size_t count_;
    bool read_ = false;
  };
  // Takes a connection (waiting as command() does) and writes `commands` on it, not shared with
  // other callers' round trips (PoolOptions::coalesce does not apply). Throws as pipeline() does.
  Sent send_only(const std::vector<std::vector<std::string>>& commands);
};

}  // namespace redlimit
