#pragma once
// What every strategy object shares with the RateLimiter that made it: the connection, the clock and
// the options. Strategy objects hold it by shared_ptr, so they stay valid after the limiter is moved.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "redlimit/connection.hpp"
#include "redlimit/options.hpp"

namespace redlimit::detail {

struct Context {
  std::shared_ptr<Connection> connection;
  std::shared_ptr<Clock> clock;
  Options options;
  // A redisContext is not thread-safe: one caller at a time.
  std::mutex mutex;

  // ARGV[1] of every script: the client's time in microseconds, or "redis" for the script to read TIME.
  std::string now_arg() const;
};

}  // namespace redlimit::detail
