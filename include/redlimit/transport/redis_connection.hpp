#pragma once
// A Connection over one hiredis redisContext. Not thread-safe (neither is redisContext): the
// RateLimiter serialises access. A broken context is dropped and the next command reconnects, so
// a reply is never read out of step with its command; so is one answered -READONLY once its round
// trip's replies are read (a replica now: the next connect resolves the host name again). One call's
// deadline bounds connecting and every round trip of the call (Connection::begin_call;
// docs/reliability.md §7).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/transport/connection.hpp"
#include "redlimit/url.hpp"

struct redisContext;

namespace redlimit {

namespace hiredis_detail {
class Tls;
}

class RedisConnection final : public Connection {
 public:
  // A rediss:// endpoint makes its TLS context here: InvalidArgument, before any I/O, when this build
  // has no TLS or a certificate file cannot be loaded.
  RedisConnection(Endpoint endpoint, std::chrono::milliseconds connect_timeout,
                  std::chrono::milliseconds command_timeout);
  // With the TLS context of the endpoint made once and shared (the pool's connections).
  RedisConnection(Endpoint endpoint, std::chrono::milliseconds connect_timeout,
                  std::chrono::milliseconds command_timeout, std::shared_ptr<const hiredis_detail::Tls> tls);
  ~RedisConnection() override;
  RedisConnection(RedisConnection&&) noexcept;
  RedisConnection& operator=(RedisConnection&&) noexcept;
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  Reply command(const std::vector<std::string>& argv) override;
  std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands) override;
  // pipeline() over commands held elsewhere (the pool's shared round trips: several callers'
  // commands in one write, none of them copied). Each reply is appended to `replies` as it is read,
  // so that when the round trip breaks, those read before are there: their commands were answered,
  // and only the others' outcome is unknown.
  void pipeline(const std::vector<const std::vector<std::string>*>& commands, std::vector<Reply>& replies);
  // pipeline() in two halves, for a caller that writes to several servers before it reads any
  // reply (a cluster batch goes to every master at once: ClusterConnection::pipeline). send() writes
  // the commands out; receive() reads `count` replies, appended to `replies` as they are read (as
  // the pointer overload of pipeline() does), its socket timeout the call's time left as it stands
  // then (the caller may have waited on another server meanwhile). Nothing else may be sent in
  // between. Replies that will never be read must not stay on the connection for a later command
  // to read as its own: disconnect() drops it (the next command reconnects).
  void send(const std::vector<const std::vector<std::string>*>& commands);
  void receive(std::size_t count, std::vector<Reply>& replies);
  void disconnect() noexcept;
  // A subscriber's read (after SUBSCRIBE through command()): waits up to `wait` for a message the
  // server sends unasked and reads it into `out`. False when none came in that time, or when
  // `wake_fd` (if >= 0) became readable first: the connection stays up either way.
  bool await_push(std::chrono::milliseconds wait, Reply& out, int wake_fd = -1);
  void begin_call(std::chrono::steady_clock::time_point started) override;
  void end_call() noexcept override;

  const Endpoint& endpoint() const { return endpoint_; }
  // Whether this build speaks TLS (rediss://): hiredis >= 1.0 with hiredis_ssl.
  static bool has_tls();
  // Connections made so far (the first, and every reconnect after a broken context), each counted
  // once its AUTH and SELECT succeeded: a change tells the pool that the server may be another.
  std::uint64_t connects() const { return connects_; }

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

  redisContext& context();  // connects (or reconnects) on demand
  // The new context (connected, or with its error set), connecting within `limit` (0: none); under
  // an interrupt (src/hiredis/interrupt.hpp) with a connect that it can end.
  redisContext* open_context(std::chrono::microseconds limit);
  void start_tls(std::chrono::microseconds limit);  // rediss://: the handshake on a new context
  // Drops the context and throws TimeoutError or ConnectionError; `why` (else the context's errstr).
  [[noreturn]] void fail(const char* during, const std::string& why = {});
  // Before a round trip: throws TimeoutError if the call's deadline has passed (nothing is sent),
  // and shortens the socket timeout to the time left when that is less than command_timeout.
  void arm_deadline(redisContext& c);
  // After a round trip that succeeded: command_timeout again, if arm_deadline() shortened it.
  void disarm_deadline(redisContext& c);
  // receive(): the socket timeout becomes the call's time left (at least 1 ms), when it has a deadline.
  void rearm_deadline(redisContext& c);
  // Before a socket wait of a round trip past its first: bounds it by the call's deadline (poll
  // `events` once the deadline has passed); throws TimeoutError, the context dropped, when it has.
  void bound_wait(redisContext& c, short events, const char* during);
  void read_replies(redisContext& c, std::size_t count, std::vector<Reply>& out);

  Endpoint endpoint_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds command_timeout_;
  std::shared_ptr<const hiredis_detail::Tls> tls_;  // null without TLS
  ContextPtr ctx_;
  bool shortened_ = false;  // the context's socket timeout is the time left, not command_timeout
  bool unanswered_ = false;  // no reply yet on this context (a TLS failure then hints at client certificates)
  std::uint64_t connects_ = 0;
};

}  // namespace redlimit
