#pragma once
// The narrow seam between strategies and Redis: send one command, get one reply. Strategies need
// nothing else (EVALSHA, EVAL, DEL), so unit tests swap in a gmock MockConnection and other
// transports (a pool, a cluster router) plug in beside RedisConnection.
#include <string>
#include <vector>

#include "redlimit/reply.hpp"

namespace redlimit {

class Connection {
 public:
  virtual ~Connection() = default;

  // True when command() may be called from several threads at once (the in-memory backend, a
  // pool). Otherwise the RateLimiter serialises calls.
  virtual bool thread_safe() const { return false; }

  // True when one script call may name keys of any hash slots: a single server (or the in-memory
  // backend), where consume_many decides a whole batch in one script call. A Redis Cluster router
  // answers false, and batches are then split by slot.
  virtual bool scripts_span_slots() const { return true; }

  // Sends argv as one command (binary-safe) and returns its reply. Error replies are returned as
  // Reply::Type::error, not thrown; transport failures throw ConnectionError / TimeoutError.
  virtual Reply command(const std::vector<std::string>& argv) = 0;

  // Sends several commands in one round trip; replies in order. The default sends them one by one.
  virtual std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands) {
    std::vector<Reply> out;
    out.reserve(commands.size());
    for (const auto& c : commands) out.push_back(command(c));
    return out;
  }
};

}  // namespace redlimit
