#pragma once
// A Connection over one hiredis redisContext. Not thread-safe (neither is redisContext): the
// RateLimiter serialises access. A broken context is dropped and the next command reconnects, so
// a reply is never read out of step with its command.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/transport/connection.hpp"
#include "redlimit/url.hpp"

struct redisContext;

namespace redlimit {

class RedisConnection final : public Connection {
 public:
  RedisConnection(Endpoint endpoint, std::chrono::milliseconds connect_timeout,
                  std::chrono::milliseconds command_timeout);
  ~RedisConnection() override;
  RedisConnection(RedisConnection&&) noexcept;
  RedisConnection& operator=(RedisConnection&&) noexcept;
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  Reply command(const std::vector<std::string>& argv) override;
  std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands) override;

  const Endpoint& endpoint() const { return endpoint_; }

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

  redisContext& context();  // connects (or reconnects) on demand
  [[noreturn]] void fail(const char* during);

  Endpoint endpoint_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds command_timeout_;
  ContextPtr ctx_;
};

}  // namespace redlimit
