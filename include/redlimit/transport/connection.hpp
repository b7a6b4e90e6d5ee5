#pragma once
// The narrow seam between strategies and Redis: send one command, get one reply. Strategies need
// nothing else (FCALL, EVALSHA, EVAL, UNLINK), so unit tests swap in a gmock MockConnection and other
// transports (a pool, a cluster router) plug in beside RedisConnection.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/reply.hpp"
#include "redlimit/transport/script_path.hpp"

namespace redlimit {

class Connection {
 public:
  virtual ~Connection() = default;

  // True when command() may be called from several threads at once (the in-memory backend, a
  // pool). Otherwise the RateLimiter serialises calls.
  virtual bool thread_safe() const { return false; }

  // True when one script call may name keys of any hash slots: a single server (or the in-memory
  // backend), where consume_many decides a whole batch in one script call. A Redis Cluster router
  // answers false, and batches are then split by slot, or by node (scripts_span_node).
  virtual bool scripts_span_slots() const { return true; }
  // On a router whose scripts_span_slots() is false: true when one script call may still decide
  // requests of several slots served by one node, through the script's spread function
  // (detail::ScriptCall::spread), on either script path. A call that such a node refuses is sent
  // again slot by slot.
  virtual bool scripts_span_node() const { return false; }

  // Which shard serves `key`: the unit of failure, each with its own circuit breaker, so that an
  // outage of one shard short-circuits only the subjects that live there. One server is one shard
  // (0); a Redis Cluster router answers one number per master, from its slot map (0 while the
  // slot's owner is not known). Cheap: called for every request of every decision.
  virtual std::size_t node_of(std::string_view key) const {
    (void)key;
    return 0;
  }

  // A breaker refused `key`'s requests (no I/O was made for them): a router whose shards can change
  // hands (a cluster's failover promotes a replica, a shard of another number) may read its map
  // again, so that the key's next calls go to the new owner, through that owner's breaker, rather
  // than wait for the old one's cooldown. Called by synchronous decisions only, outside any call;
  // bounded by command_timeout (an asynchronous decision asks its AsyncConnection's twin). This
  // default: nothing.
  virtual void shard_refused(std::string_view key) { (void)key; }

  // Whether node_of() may still answer `shard`: false for a cluster master that serves no slot any
  // more (a failover replaced it), whose breaker no call consults again, so that it no longer counts
  // in RateLimiter::health(). Shard 0 always may. This default: every shard.
  virtual bool shard_serves(std::size_t shard) const {
    (void)shard;
    return true;
  }

  // One call's deadline (docs/reliability.md §7): the decision path brackets each call's send step
  // (EVALSHA, the reload after NOSCRIPT, a batch's pipeline) with begin_call() / end_call(), through
  // CallScope. A transport with a command deadline starts it at begin_call() and makes every step
  // of the call (waiting for a pooled connection, connecting, each round trip, cluster redirects)
  // share it; a command outside any call has a deadline of its own. Calls may nest (a transport
  // over another one): the outermost one sets the deadline, `started` + its command timeout:
  // `started` is when the call began, earlier than now for a consume() that waited its turn in a
  // shared script call (detail/sync_lane.hpp). The defaults do nothing.
  virtual void begin_call(std::chrono::steady_clock::time_point started) { (void)started; }
  virtual void end_call() noexcept {}

  // Sends argv as one command (binary-safe) and returns its reply. Error replies are returned as
  // Reply::Type::error, not thrown; transport failures throw ConnectionError / TimeoutError.
  virtual Reply command(const std::vector<std::string>& argv) = 0;

  // Sends several commands in one round trip; replies in order. The default sends them one by one.
  // A transport over several servers (a cluster) whose commands went to several nodes, some of which
  // answered and some failed, returns a transit_failure() reply for each command of the failed
  // nodes instead of throwing, so that the answers of the others are not lost; it throws only when
  // every command failed.
  virtual std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands) {
    std::vector<Reply> out;
    out.reserve(commands.size());
    for (const auto& c : commands) out.push_back(command(c));
    return out;
  }

  // How scripts are called on this connection (redlimit/transport/script_path.hpp).
  ScriptPath script_path() const { return script_path_.get(); }
  void set_script_path(ScriptPath p) { script_path_.set(p); }
  ScriptPathState& script_path_state() { return script_path_; }

 private:
  ScriptPathState script_path_;
};

// A pipeline's answer for one command that failed at the transport level (its node refused, broke or
// timed out) while other commands of the pipeline were answered. It is an error reply no server
// sends: its first word names the failure, the rest is the message. Like a thrown ConnectionError,
// it means the command's outcome is unknown (it may have run): it must never be sent again. The
// decision path judges it as an outage of that command's requests only (check_script_reply).
inline constexpr std::string_view kTransitConnectionError = "REDLIMIT_CONNECTION";
inline constexpr std::string_view kTransitTimeout = "REDLIMIT_TIMEOUT";
inline Reply transit_failure(const ConnectionError& error) {
  const bool timeout = dynamic_cast<const TimeoutError*>(&error) != nullptr;
  std::string_view what = error.what();  // "redlimit: connection: ..." / "redlimit: timeout: ..."
  for (std::string_view prefix : {"redlimit: ", "timeout: ", "connection: "}) {
    if (what.substr(0, prefix.size()) == prefix) what.remove_prefix(prefix.size());
  }
  std::string text(timeout ? kTransitTimeout : kTransitConnectionError);
  text += ' ';
  text += what;
  return Reply::make_error(std::move(text));
}

inline bool is_transit_failure(const Reply& r) {
  if (!r.is_error()) return false;
  const std::string_view code = std::string_view(r.str).substr(0, r.str.find(' '));
  return code == kTransitConnectionError || code == kTransitTimeout;
}

// Opens a call on `conn` for as long as it lives (Connection::begin_call / end_call).
class CallScope {
 public:
  explicit CallScope(Connection& conn,
                     std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now())
      : conn_(conn) {
    conn_.begin_call(started);
  }
  ~CallScope() { conn_.end_call(); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  Connection& conn_;
};

}  // namespace redlimit
