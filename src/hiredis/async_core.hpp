#pragma once
// AsyncRedis::Core, private to src/hiredis: what the public AsyncRedis handle drives.
//
// Shape. The public AsyncRedis is a thin handle on a Core. The Core owns the queue that any thread
// may push to, and everything that lives on the loop: the hiredis context (one Conn at a time), the
// wake-up event and a deadline timer. The Core keeps itself alive (self_) for as long as it holds
// loop resources, so the handle can go away at any time, on any thread: its destructor only queues
// a close, and the loop tears everything down at a safe point.
//
// Files.
//   async_core.hpp      this declaration
//   async_core.cpp      the cross-thread queue, the backlog and the shutdown
//   async_deadline.cpp  each call's deadline, the connect and health deadlines, and the timer
//   async_context.cpp   the hiredis context: opening it, sending, its callbacks, freeing it, and
//                       a server that refuses us (-READONLY): the connection drained, then let go
//   async_sentinel.cpp  following a Sentinel deployment's master (the SentinelEndpoint factories):
//                       when to ask the sentinels, and what their answer changes
//   async_lookup.cpp    the target's host name looked up on a thread of its own (name_lookup.hpp)
//                       while the commands wait in the backlog, within connect_timeout
//   async_libevent.cpp  the libevent adapter (a pipe to wake the loop from other threads, an event
//                       activated in-process from its own callbacks, an evtimer) and attach_libevent
//   async_libuv.cpp     the libuv adapter (a uv_async_t, a uv_idle_t for wake-ups from its own
//                       callbacks, a uv_timer_t), our hiredis adapter for
//                       libuv (a uv_poll_t per context; it reports socket errors) and attach_libuv
//   redis_async.cpp     the public handle
//
// hiredis rules kept here:
// - Only top-level loop handlers (the wake-up and the timer) ever free a context (redisAsyncFree),
//   never a hiredis callback. Contexts that stop being current inside a callback are parked in
//   graveyard_ and freed by the next top-level handler.
// - hiredis frees a context itself after an I/O error, EOF or a failed connect: the connect and
//   disconnect callbacks release our ownership (ContextPtr::release) so it is never freed twice.
// - Every command handed to hiredis gets its callback exactly once: with the reply, or with a null
//   reply when the context is freed (by hiredis after an error, or by us on a timeout or close).
//
// Deadlines (docs/reliability.md §7). Each call carries its own (Item::deadline, then
// Pending::deadline), taken when it was queued; the timer fires at the earliest of them, of the
// connect deadline and of the connection's health deadline. A call past its deadline fails with
// TimeoutError wherever it is: in the backlog it is removed and never sent; in hiredis it is answered
// at once and marked expired, and its reply (or null reply) is dropped when hiredis runs its callback
// later, so the user still gets exactly one callback. While the oldest command hiredis holds is
// expired, nothing more is handed to that connection (at_capacity()). Separately, a connection that
// answers nothing for command_timeout while commands wait is dropped (the health rule, reply_due()).
// The same timer runs post_after's tasks as they fall due (later_), and the shutdown runs those
// still waiting.
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "endpoint_text.hpp"
#include "master_watch.hpp"
#include "name_lookup.hpp"
#include "redlimit/transport/redis_async.hpp"
#include "switch_listener.hpp"
#include "tls.hpp"

namespace redlimit {

namespace async_detail {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

// Owns a redisAsyncContext: redisAsyncFree runs the pending commands' callbacks with a null reply.
struct ContextDeleter {
  void operator()(redisAsyncContext* ac) const { redisAsyncFree(ac); }
};
using ContextPtr = std::unique_ptr<redisAsyncContext, ContextDeleter>;

inline timeval to_timeval(std::chrono::microseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(d.count() / 1000000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>(d.count() % 1000000);
  return tv;
}

// Throws InvalidArgument for a negative timeout (the attach_* factories call it first).
void check_options(const AsyncOptions& o);

}  // namespace async_detail

class AsyncRedis::Core : public std::enable_shared_from_this<AsyncRedis::Core> {
 public:
  using TimePoint = async_detail::TimePoint;

  // One entry of the cross-thread queue: a command, a task, or the close marker.
  struct Item {
    std::vector<std::string> argv;
    ReplyCallback on_reply;
    ErrorCallback on_error;
    TimePoint deadline{};  // the command's call's; TimePoint{} = none
    std::function<void()> task;
    TimePoint not_before{};  // a task's (post_after): it waits in later_ until then
    bool close = false;
    // A Sentinel search's outcome (its task): run when taken from the queue, ahead of the backlog,
    // whose commands may be waiting for it; dropped once the Core has let its loop go.
    bool urgent = false;
    // Sentinel: a command sent once and refused with -READONLY or -LOADING, queued again for the
    // master found next (send_again); never sent a third time.
    bool resent = false;
  };

  // A rediss:// endpoint makes its TLS context here: InvalidArgument, before any I/O, when this build
  // has no TLS or a file the URL names cannot be loaded.
  Core(Endpoint endpoint, AsyncOptions options);
  virtual ~Core() = default;
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // Before start(): connections go to the master the sentinels name (async_sentinel.cpp), not to
  // the endpoint given, which only lends its credentials, db and TLS options.
  void follow(const SentinelEndpoint& sentinels);
  // From here on the Core keeps itself alive until its loop resources are released.
  void start() { self_ = shared_from_this(); }

  // Any thread.
  void submit(Item item);
  // AsyncRedis::send_now: on the loop's thread inside one of its callbacks, with a connection up.
  void send_now();
  // The deadline of a call starting now: now + command_timeout; none when that is 0.
  TimePoint call_deadline() const;
  const Endpoint& endpoint() const { return endpoint_; }
  Stats stats() const;
  // Sentinel: "host:port" of the master in use ("" before the first one is found, or for one server).
  std::string master() const;

 protected:
  // The adapter's side. wake() is called with mutex_ held, from any thread; the others on the loop.
  virtual bool attach(redisAsyncContext* ac) = 0;
  virtual void wake() = 0;
  // wake() made on the loop's own thread, from inside one of the callbacks below (of any Core on
  // this loop): an adapter can do that without a system call. A call made from a reply's callback
  // (a service answering a request by starting the next) wakes the loop this way, twice per
  // merged call (AsyncLane's turn, then its command), where a pipe costs a write and two reads.
  virtual void wake_in_loop() = 0;
  // What identifies the event loop (its event_base, its uv_loop_t): the Cores of one loop share it.
  virtual const void* loop() const = 0;
  virtual void arm_timer(std::chrono::microseconds delay) = 0;
  // Releases the wake-up event and the timer, then calls finished() (at once or from a later loop
  // callback). The Core may be destroyed by then: nothing may touch it afterwards.
  virtual void release_loop() = 0;

  // Top-level loop handlers, called by the adapter. Each may destroy the Core as its last act.
  void on_wake();
  void on_timer();

  // Marks the calling thread as running `loop`'s callbacks while it lives (thread-local; it keeps
  // no reference to the Core, which its scope may destroy): submit() then knows it runs on the loop.
  class InLoop {
   public:
    explicit InLoop(const void* loop) : outer_(running_) { running_ = loop; }
    ~InLoop() { running_ = outer_; }
    InLoop(const InLoop&) = delete;
    InLoop& operator=(const InLoop&) = delete;

   private:
    const void* outer_;
  };
  // The loop whose callbacks this thread is running (InLoop), if any.
  static thread_local const void* running_;

  // Called by release_loop() once the loop resources are gone: lets the Core go.
  void finished();

 private:
  // What hiredis carries for each command (its privdata).
  struct Pending {
    ReplyCallback on_reply;
    ErrorCallback on_error;
    TimePoint deadline{};         // the call's; none for setup commands
    bool expired = false;         // failed at its deadline already: what hiredis hands back is dropped
    const char* setup = nullptr;  // "AUTH" / "SELECT": internal, no user callbacks
    // Sentinel: the command itself, kept to send it once more when the server refuses it (-READONLY,
    // -LOADING: it ran nothing); empty otherwise, and once it has been sent again.
    std::vector<std::string> argv;
  };

  // A command hiredis holds: when it was sent, and its Pending (owned by hiredis until its callback).
  struct Sent {
    TimePoint at;
    Pending* pending;
  };

  struct Conn {
    explicit Conn(Core& c) : core(c) {}
    // Freed first, while the rest of the Conn is intact: the callbacks it runs read it.
    ~Conn() { ac.reset(); }
    Conn(const Conn&) = delete;
    Conn& operator=(const Conn&) = delete;

    Core& core;
    bool connected = false;
    std::optional<TimePoint> connect_deadline;
    std::deque<Sent> inflight;       // the commands hiredis holds, in the order it answers them
    TimePoint last_reply{};          // when the last reply arrived
    std::string failure;             // set when we drop it: the pending commands fail with this
    bool timed_out = false;
    // The server answered -READONLY (with Sentinel, or -LOADING): nothing more is sent on it; it is
    // let go once every command on it has answered (with Sentinel each refused one is queued again:
    // send_again).
    bool refused = false;
    async_detail::ContextPtr ac;     // null once hiredis has freed the context itself
    ssl_st* ssl = nullptr;           // rediss://: the context's SSL object (hiredis owns it)
  };

  // async_core.cpp: the backlog and the shutdown.
  bool take_queue();
  static void run_inline(Item& item);
  static void run_task(const std::function<void()>& task);
  static void fail(const ErrorCallback& on_error, std::exception_ptr error);
  // Takes the commands of the backlog that `chosen` picks out, and returns their error callbacks;
  // everything else (tasks, the close marker, the commands left) keeps its place and order.
  std::vector<ErrorCallback> take_commands(const std::function<bool(const Item&)>& chosen);
  // `in_callback`: called inside a hiredis callback (send_now), where the close marker must not be
  // run: with nothing in flight it frees the context whose callback is running (drop). It stays at
  // the backlog's front, for the wake-up its submit() scheduled.
  void pump(bool in_callback = false);
  bool at_capacity() const;
  static bool head_expired(const Conn& conn);
  void begin_shutdown();
  void maybe_finish();

  // async_deadline.cpp: the deadlines and the timer.
  static bool has_deadline(TimePoint t) { return t != TimePoint{}; }
  static bool overdue(const Item& item, TimePoint now);
  void expire_calls(TimePoint now);
  std::exception_ptr deadline_error(bool sent) const;
  void check_connection(TimePoint now);
  std::optional<TimePoint> reply_due(const Conn& conn) const;
  std::optional<TimePoint> earliest_call_deadline() const;
  void schedule_deadline(TimePoint fired);
  // post_after's tasks: a task not due yet waits in later_ (the timer fires when it is due); those
  // due by `now`, or all of them when the connection is closing, go to the front of the backlog.
  bool keep_for_later(Item& item, TimePoint now);
  void move_due(TimePoint now, bool all);
  void arm_by(TimePoint at);
  void arm(TimePoint at);

  // async_sentinel.cpp: following the master.
  bool waiting_for_master(TimePoint now);
  void check_master_now_and_then(TimePoint now);
  void search(bool check);
  void deliver(hiredis_detail::MasterWatch::Outcome outcome);
  void apply(const hiredis_detail::MasterWatch::Outcome& outcome);
  void found_master(const std::string& host, int port);
  void fail_waiting(const std::exception_ptr& error);
  void heard_switch(const std::string& host, int port);
  // The server named in messages: target_, or the Sentinel master still being looked for.
  std::string where() const;

  // async_lookup.cpp: the target's host name looked up off the loop.
  bool waiting_for_address(TimePoint now);
  void resolved(std::uint64_t lookup, const hiredis_detail::LookupResult& result);

  // async_context.cpp: the hiredis context.
  void send(Item& item, std::exception_ptr& connect_error);
  bool issue(Conn& conn, const std::vector<std::string>& args, Pending* pending);
  static void forget(Conn& conn, const Pending* pending);
  Conn* connection();
  void queue_setup(Conn& conn);
  void drop(std::string why, bool timed_out);
  void retire(Conn& conn);
  void collect_garbage();
  void replied(Conn& conn, const redisAsyncContext* ac, const redisReply* reply, std::unique_ptr<Pending> p);
  std::exception_ptr reply_error(const Conn& conn, const redisAsyncContext* ac, const redisReply* reply) const;
  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_connect(const redisAsyncContext* ac, int status);
  static void on_disconnect(const redisAsyncContext* ac, int status);
  // A server that refuses us (-READONLY; with Sentinel, -LOADING too): the connection drains, then goes.
  bool refused_by(Conn& conn, const redisReply* reply);
  bool held_by_refusal();
  bool send_again(Pending& p);
  void leave_when_drained(Conn& conn);

  const Endpoint endpoint_;
  const AsyncOptions options_;
  std::shared_ptr<const hiredis_detail::Tls> tls_;  // rediss:// only; made again for each master found

  // Sentinel (async_sentinel.cpp); loop thread only, but for what is said otherwise.
  std::unique_ptr<hiredis_detail::MasterWatch> watch_;  // null: one server (endpoint_)
  std::string master_name_;
  int check_interval_ms_ = 0;
  Endpoint target_;           // where connections go: endpoint_, or the master found
  bool need_master_ = false;  // ask the sentinels before the next connection
  bool searching_ = false;    // a search or check is out (MasterWatch)
  TimePoint checked_{};       // the last search or check started
  std::string master_;        // target_ as "host:port" once found; under mutex_
  std::atomic<std::uint64_t> discoveries_{0};
  // +switch-master announcements (switch_listener.hpp): heard on its thread, applied on the loop's;
  // stopped when the shutdown begins.
  std::unique_ptr<hiredis_detail::SwitchListener> listener_;
  hiredis_detail::FoundMaster announced_;  // announced since the last search (port 0: none)
  std::atomic<std::uint64_t> announcements_{0};
  std::atomic<std::uint64_t> resent_{0};

  // The target's addresses (async_lookup.cpp); loop thread only. Looked up for each connection,
  // never kept past it: a name that moves is followed.
  std::shared_ptr<const addrinfo> addresses_;  // for the next connection, to addresses_for_
  std::string addresses_for_;                  // "host:port" they were looked up for
  std::uint64_t lookup_ = 0;                   // the lookup out, by its number; 0: none
  std::uint64_t lookups_ = 0;                  // lookups started

  // Shared with other threads, under mutex_.
  mutable std::mutex mutex_;
  std::vector<Item> queue_;
  bool wake_pending_ = false;
  bool closing_ = false;
  bool released_ = false;

  std::atomic<std::uint64_t> connections_{0};
  std::atomic<std::uint64_t> commands_{0};
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::size_t> max_in_flight_{0};

  // Loop thread only.
  std::deque<Item> backlog_;  // taken from queue_, not yet handed to hiredis
  std::multimap<TimePoint, std::function<void()>> later_;  // post_after's tasks, by when they are due
  std::unique_ptr<Conn> conn_;
  std::vector<std::unique_ptr<Conn>> graveyard_;
  bool timer_armed_ = false;
  TimePoint timer_at_{};
  bool shutting_down_ = false;
  bool finishing_ = false;
  std::shared_ptr<Core> self_;
};

}  // namespace redlimit
