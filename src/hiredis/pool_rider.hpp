#pragma once
// One caller's commands in a shared round trip of ConnectionPool (PoolOptions::coalesce; the round
// trips are in pool_sharing.cpp). The caller's own stack holds it and its commands: the caller does
// not return while a round trip carries them (`taken`), so nothing is copied.
#include <exception>
#include <string>
#include <vector>

#include "call_deadline.hpp"
#include "redlimit/reply.hpp"
#include "redlimit/transport/connection_pool.hpp"

namespace redlimit {

struct ConnectionPool::Rider {
  Rider(const std::vector<std::string>* one, const std::vector<std::vector<std::string>>* many)
      : single(one), several(many) {}

  std::size_t size() const { return single != nullptr ? 1 : several->size(); }
  const std::vector<std::string>* at(std::size_t i) const { return single != nullptr ? single : &(*several)[i]; }

  const std::vector<std::string>* single;                 // command(): one command
  const std::vector<std::vector<std::string>>* several;   // pipeline(): its commands
  hiredis_detail::DeadlineClock::time_point deadline{};  // the caller's call's
  // Written by the caller that drives the round trip, under the pool's mutex.
  bool taken = false;  // in a round trip: its outcome comes, whatever the caller's deadline
  bool done = false;
  std::vector<Reply> replies;
  std::exception_ptr error;
};

}  // namespace redlimit
