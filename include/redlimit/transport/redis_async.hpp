#pragma once
// An AsyncConnection over hiredis's asynchronous interface, on an event loop the caller already runs:
// libevent (event_base) or libuv (uv_loop_t). Many commands are in flight at once on one connection
// (pipelined); replies come back in order.
//
//   event_base* base = event_base_new();
//   auto redis = redlimit::AsyncRedis::attach_libevent(base, redlimit::parse_url("redis://127.0.0.1:6379"));
//   limiter.attach_async(redis);
//   std::thread loop([base] { event_base_dispatch(base); });  // returns once `redis` is gone
//   auto d = limiter.fixed_window("api", redlimit::Limit::per_second(10)).consume_future("user-42").get();
//
// Threads. hiredis and the loops are not thread-safe, so every hiredis call happens on the loop's
// thread: command_async() (and post()) may be called from any thread; it queues the command and
// wakes the loop (a pipe for libevent, a uv_async_t for libuv), which sends whatever is queued in
// one batch. Callbacks run on the loop's thread. attach_libevent / attach_libuv must be called on the
// loop's thread, or before the loop runs.
//
// Connection. Opened lazily by the first command (AUTH and SELECT from the Endpoint go first). When
// it breaks (reset, closed, refused), every command waiting for a reply fails at once with
// ConnectionError, on both loops and whatever the deadlines (its outcome is unknown: nothing is
// replayed), and the next command opens a new connection. So does a -READONLY reply (the server is a
// replica now: a failover demoted it): nothing more goes on that connection, it is let go once its
// commands have answered, and the next connection resolves the host name again. The host name is
// resolved on the loop's thread (blocking): prefer an address. As with any hiredis client, ignore
// SIGPIPE in the process: a write to a connection the server just closed would raise it.
//
// Deadlines (docs/reliability.md §7). Every call gets one deadline when it is queued: now +
// command_timeout (see AsyncOptions). A decision's call keeps it across all its commands (the
// EVALSHA, and after NOSCRIPT the reload and the EVALSHA or EVAL sent again). Past it the call fails
// with TimeoutError wherever it is: still queued behind max_in_flight or a connect (it is then never
// sent), or waiting for its reply (a late reply is dropped: the outcome is unknown, nothing is
// replayed). The connection is dropped, failing every command on it with TimeoutError, when it
// answers nothing for command_timeout while commands wait, or when a connect takes longer than
// connect_timeout.
//
// Lifetime. The loop must outlive the AsyncRedis. Destroying the last shared_ptr (or close()) stops
// new commands; what was queued before is still sent and answered (within its deadline), then
// the connection and the loop resources (wake-up event, timer) are released on the loop's thread,
// after which a loop with nothing else to do returns from event_base_dispatch / uv_run. Keep running
// the loop until then before freeing it. A callback may release the last reference: the teardown
// is deferred to the loop, never done inside a hiredis callback.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/transport/async_connection.hpp"
#include "redlimit/url.hpp"

struct event_base;
struct uv_loop_s;

namespace redlimit {

struct AsyncOptions {
  // Deadline to establish the connection, the host name's lookup included (made off the event
  // loop, docs/reliability.md §7); 0 = wait as long as the OS does.
  std::chrono::milliseconds connect_timeout{1000};
  // Deadline of one call, end to end (queued, connecting, sent, answered; a decision's NOSCRIPT
  // reload included), counted from when it was queued; 0 = no deadline. It is also the connection's
  // health deadline: a connection that answers nothing this long while commands wait is dropped.
  std::chrono::milliseconds command_timeout{1000};
  // Commands handed to hiredis (sent, or in its output buffer) at most; later ones wait in order in
  // the AsyncRedis's queue until replies make room. 0 = no cap.
  std::size_t max_in_flight = 4096;
};

class AsyncRedis final : public AsyncConnection {
 public:
  // Over a libevent event_base (hiredis/adapters/libevent.h). Throws redlimit::Error when redlimit
  // was built without libevent (REDLIMIT_HAVE_LIBEVENT), InvalidArgument for a null base or a
  // negative timeout.
  static std::shared_ptr<AsyncRedis> attach_libevent(event_base* base, const Endpoint& endpoint,
                                                     AsyncOptions options = {});
  // Over a libuv loop, with redlimit's own hiredis adapter (a uv_poll_t per connection: hiredis
  // 0.14's adapter does not report a socket error, so a broken connection went unnoticed); the
  // same, with REDLIMIT_HAVE_LIBUV.
  static std::shared_ptr<AsyncRedis> attach_libuv(uv_loop_s* loop, const Endpoint& endpoint,
                                                  AsyncOptions options = {});
  // The master of a Sentinel deployment (redis-sentinel://, rediss-sentinel://; parse_sentinel_url),
  // on either loop. The first command has the sentinels asked which server is the master (confirmed
  // with ROLE, as SentinelConnection does); commands wait for the answer in the queue, bounded by
  // their deadlines. The sentinels are asked again before the next connection whenever one ends (a
  // failure in transit, a refused connect, the health rule), after a -READONLY or -LOADING reply
  // (nothing more is sent on that connection, which is let go once its commands have answered; each
  // refused one ran nothing and is sent once more, to the master found, within its deadline), and
  // every check_interval_ms one sentinel is asked whether the master is still the one in use
  // (another: the connection is let go, and the commands on it fail with ConnectionError). The
  // sentinels are asked on a thread of the AsyncRedis's own, never on the loop: the loop's only wait
  // is in close() or the destructor, for a search in progress (at most command_timeout; with none,
  // 5 passes over the sentinels of 1 s steps: docs/connecting.md). Throws
  // InvalidArgument, before any I/O, for no sentinel or master name, or TLS options this build
  // cannot use. The Endpoint it reports (endpoint()) is the URL's master part: credentials and db.
  static std::shared_ptr<AsyncRedis> attach_libevent(event_base* base, const SentinelEndpoint& sentinels,
                                                     AsyncOptions options = {});
  static std::shared_ptr<AsyncRedis> attach_libuv(uv_loop_s* loop, const SentinelEndpoint& sentinels,
                                                  AsyncOptions options = {});
  // Whether this build of redlimit has each adapter.
  static bool has_libevent();
  static bool has_libuv();

  ~AsyncRedis() override;  // close()
  AsyncRedis(const AsyncRedis&) = delete;
  AsyncRedis& operator=(const AsyncRedis&) = delete;

  // Queues argv (throws InvalidArgument, at once, when it is empty), as a call of its own: bounded
  // by call_deadline(). Exactly one callback runs later on the loop's thread. An exception escaping a
  // callback cannot cross hiredis's C frames: it is caught and dropped, so callbacks should not
  // throw. After close() has completed on the loop, on_error runs at once on the calling thread with
  // a ConnectionError.
  void command_async(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error) override;

  // now + command_timeout; none (Deadline{}) when command_timeout is 0.
  Deadline call_deadline() const override;

  // command_async bounded by `deadline` (Deadline{}: none), a deadline taken earlier for the call
  // this command is part of. One already past fails the command with TimeoutError without sending it.
  void command_async_until(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error,
                           Deadline deadline) override;

  // Runs `task` on the loop's thread, in order with the commands queued around it (the strategies
  // use it to deliver decisions made without Redis, such as a local-cache rejection). Runs at once
  // on the calling thread when the loop resources are already released. Throws InvalidArgument for
  // an empty task. An exception escaping `task` is caught and dropped, as for callbacks.
  void post(std::function<void()> task) override;
  // post(), on the loop's timer: `task` runs no sooner than `delay` from now, or when the connection
  // closes, whichever is first (then in the order they were due). Throws InvalidArgument for an
  // empty task or a negative delay.
  void post_after(std::chrono::milliseconds delay, std::function<void()> task) override;

  // From one of this loop's callbacks: runs the tasks and commands queued since, and writes the
  // commands to the socket at once (AsyncConnection::send_now). Anywhere else: nothing.
  void send_now() override;

  // Stops taking commands: those queued before are still sent and answered, those queued after fail
  // with ConnectionError; then the connection and the loop resources are released (on the loop).
  // Thread-safe, idempotent, returns at once. The destructor calls it.
  void close();

  const Endpoint& endpoint() const;
  // A Sentinel master's "host:port" in use: "" before the first one is found, and for one server.
  std::string master() const;

  struct Stats {
    std::uint64_t connections = 0;     // connections opened (the first one and every reconnect)
    std::uint64_t commands = 0;        // commands handed to hiredis (AUTH/SELECT not counted)
    std::size_t max_in_flight = 0;     // most commands waiting for a reply at once, on one connection
    // Times queued work woke the loop with a system call (the libevent pipe, uv_async_send): work
    // queued from other threads. Work queued from inside the loop's callbacks (a call made in a
    // callback) wakes it without one (libevent: event_active, or past 16 in one turn a timer of no
    // delay, so that the turn ends; libuv: an idle handle, at the next turn), uncounted.
    std::uint64_t wakeups = 0;
    std::uint64_t discoveries = 0;  // Sentinel: times the sentinels named a master confirmed with ROLE
    // Sentinel: +switch-master announcements heard for this master name (a sentinel promoted a
    // replica); each one not naming the master in use let its connection go and started a search
    // (the announced master confirmed with ROLE first).
    std::uint64_t announcements = 0;
    // Sentinel: commands sent once more because the server refused them with -READONLY or -LOADING
    // (a master demoted under the connection, or loading): they ran nothing there.
    std::uint64_t resent = 0;
  };
  Stats stats() const;

  class Core;  // implementation detail (src/hiredis/async_core.hpp)

 private:
  explicit AsyncRedis(std::shared_ptr<Core> core);
  // The factories' end: the Core follows `sentinels` (when given), starts, and gets its handle.
  static std::shared_ptr<AsyncRedis> begin(std::shared_ptr<Core> core, const SentinelEndpoint* sentinels);

  std::shared_ptr<Core> core_;
};

}  // namespace redlimit
