#pragma once
// A thread-safe Connection over up to `size` RedisConnections: each command leases one connection
// for its round trip and gives it back (RAII), so N threads run N round trips at once. A caller
// waits for a free connection at most PoolOptions::wait_timeout, and never past its call's deadline.
#include <chrono>
#include <condition_variable>
#include <cstddef>
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
  // A call's deadline (now + command_timeout) also bounds its wait for a free connection.
  void begin_call() override;
  void end_call() noexcept override;

  // Connections opened so far (idle or leased).
  std::size_t open_connections() const;

 private:
  struct Slot {
    std::unique_ptr<RedisConnection> connection;
    std::chrono::steady_clock::time_point last_used;
  };
  class Lease;

  Slot acquire();
  void release(Slot slot);

  Endpoint endpoint_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds command_timeout_;
  PoolOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable available_;
  std::vector<Slot> idle_;
  std::size_t open_ = 0;
};

}  // namespace redlimit
