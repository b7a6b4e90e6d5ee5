// ClusterConnection's slot map: reading CLUSTER SLOTS from the known nodes and the seeds (one
// refresh at a time, under the call's deadline), and learning it. Routing, redirects and the
// per-node connections are in cluster_connection.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "call_deadline.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/transport/cluster_connection.hpp"

namespace redlimit {

void ClusterConnection::refresh() {
  // One deadline for every probe: the slot map read at start-up is a call of its own (each seed
  // that does not answer would otherwise cost a command_timeout of its own); inside a call, its.
  CallScope call(*this);
  refresh_avoiding(nullptr);
}

void ClusterConnection::refresh_avoiding(const std::shared_ptr<Node>& suspect, bool wait) {
  std::unique_lock<std::timed_mutex> one_at_a_time(refresh_mutex_, std::defer_lock);
  if (!lock_refresh(one_at_a_time, wait)) return;  // another thread is refreshing the map right now
  std::vector<Endpoint> candidates;
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    for (const auto& n : nodes_) {
      if (n != suspect) candidates.push_back(n->endpoint);
    }
    if (suspect) candidates.push_back(suspect->endpoint);
  }
  candidates.insert(candidates.end(), seeds_.seeds.begin(), seeds_.seeds.end());
  std::string last_error = "no node answered";
  std::exception_ptr refused;  // the first AuthError (TlsError): thrown when no node answers
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Endpoint& ep = candidates[i];
    // Half the call's time left for each but the last: a node that hangs (a master stopped, the
    // very failover this read may be for) cannot take the whole call while the next would answer.
    const hiredis_detail::NarrowedCall share(i + 1 < candidates.size() ? hiredis_detail::half_of_call_left()
                                                                       : hiredis_detail::no_deadline());
    Reply slots;
    try {
      RedisConnection probe(ep, options_.connect_timeout, options_.command_timeout);
      slots = probe.command({"CLUSTER", "SLOTS"});
    } catch (const AuthError& e) {
      if (!refused) refused = std::current_exception();
      last_error = e.what();
      continue;
    } catch (const ConnectionError& e) {
      last_error = e.what();
      continue;
    }
    if (learn_slots(slots, ep.host)) return;
    last_error = fmt::format("{}:{} answered CLUSTER SLOTS with {}", ep.host, ep.port,
                             slots.is_error() ? slots.str : "no slots");
  }
  // Refused credentials or certificate say more than "no node answered": they are configuration.
  if (refused) std::rethrow_exception(refused);
  throw ConnectionError("cannot read the cluster's slot map: " + last_error);
}

bool ClusterConnection::lock_refresh(std::unique_lock<std::timed_mutex>& one_at_a_time, bool wait) {
  if (!wait) return one_at_a_time.try_lock();
  const auto deadline = hiredis_detail::step_deadline(options_.command_timeout);
  if (deadline == hiredis_detail::no_deadline()) {
    one_at_a_time.lock();
    return true;
  }
  // try_lock polled until the deadline rather than try_lock_until: ThreadSanitizer (GCC 12) does not
  // see a lock taken by pthread_mutex_clocklock and reports its unlock as an error. A refresh is rare
  // and short, so waiting for one costs a few 1 ms naps at most.
  while (!one_at_a_time.try_lock()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw TimeoutError("the call's deadline passed waiting for the cluster's slot map");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool ClusterConnection::learn_slots(const Reply& slots, const std::string& answered_by) {
  if (slots.type != Reply::Type::array || slots.elements.empty()) return false;
  apply_slots(slots, answered_by);
  return true;
}

void ClusterConnection::apply_slots(const Reply& slots, const std::string& answered_by) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  for (const auto& range : slots.elements) {
    if (range.type != Reply::Type::array || range.elements.size() < 3) continue;
    const auto& master = range.elements[2];
    if (master.type != Reply::Type::array || master.elements.size() < 2) continue;
    const std::int64_t lo = range.elements[0].integer, hi = range.elements[1].integer;
    const std::int64_t port = master.elements[1].integer;
    if (port < 1 || port > 65535) continue;  // a node in handshake reports port 0
    std::string host = master.elements[0].str;
    if (host.empty() || host == "?") host = answered_by;  // a node that does not know its own address
    const auto n = node(host, static_cast<int>(port));
    for (std::int64_t s = std::max<std::int64_t>(lo, 0); s <= std::min<std::int64_t>(hi, 16383); ++s) {
      slots_[static_cast<std::size_t>(s)] = n;
    }
  }
}

void ClusterConnection::refresh_quietly(const std::shared_ptr<Node>& suspect) {
  if (hiredis_detail::left_in_call(options_.command_timeout) <= std::chrono::nanoseconds::zero()) {
    if (suspect) {
      std::unique_lock<std::shared_mutex> lock(mutex_);
      suspect_ = suspect;
    }
    return;
  }
  try {
    refresh_avoiding(suspect, false);
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (suspect_ == suspect) suspect_.reset();
  } catch (const ConnectionError&) {
  }
}

}  // namespace redlimit
