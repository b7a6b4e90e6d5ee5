// AsyncRedis: hiredis's async interface on the caller's libevent or libuv loop.
//
// Shape. The public AsyncRedis is a thin handle on a Core. The Core owns the queue that any thread
// may push to, and everything that lives on the loop: the hiredis context (one Conn at a time), the
// wake-up event and a deadline timer. The Core keeps itself alive (self_) for as long as it holds
// loop resources, so the handle can go away at any time, on any thread: its destructor only queues
// a close, and the loop tears everything down at a safe point.
//
// hiredis rules kept here:
// - Only top-level loop handlers (the wake-up and the timer) ever free a context (redisAsyncFree),
//   never a hiredis callback. Contexts that stop being current inside a callback are parked in
//   graveyard_ and freed by the next top-level handler.
// - hiredis frees a context itself after an I/O error, EOF or a failed connect: the connect and
//   disconnect callbacks release our ownership (ContextPtr::release) so it is never freed twice.
// - Every command handed to hiredis gets its callback exactly once: with the reply, or with a null
//   reply when the context is freed (by hiredis after an error, or by us on a timeout or close).
#include "redlimit/transport/redis_async.hpp"
#include "hiredis_reply.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "redlimit/errors.hpp"

#ifdef REDLIMIT_HAVE_LIBEVENT
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#endif
#ifdef REDLIMIT_HAVE_LIBUV
#include <hiredis/adapters/libuv.h>
#include <uv.h>
#endif

namespace redlimit {

namespace {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

struct ContextDeleter {
  void operator()(redisAsyncContext* ac) const { redisAsyncFree(ac); }
};
using ContextPtr = std::unique_ptr<redisAsyncContext, ContextDeleter>;


std::string describe(const Endpoint& e) {
  return e.unix_path.empty() ? fmt::format("{}:{}", e.host, e.port) : e.unix_path;
}

[[maybe_unused]] timeval to_timeval(std::chrono::microseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(d.count() / 1000000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>(d.count() % 1000000);
  return tv;
}

std::exception_ptr closed_error(const Endpoint& e) {
  return std::make_exception_ptr(ConnectionError(fmt::format("AsyncRedis to {} is closed", describe(e))));
}

}  // namespace

class AsyncRedis::Core : public std::enable_shared_from_this<AsyncRedis::Core> {
 public:
  // One entry of the cross-thread queue: a command, a task, or the close marker.
  struct Item {
    std::vector<std::string> argv;
    ReplyCallback on_reply;
    ErrorCallback on_error;
    std::function<void()> task;
    bool close = false;
  };

  Core(Endpoint endpoint, AsyncOptions options) : endpoint_(std::move(endpoint)), options_(options) {}
  virtual ~Core() = default;
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // From here on the Core keeps itself alive until its loop resources are released.
  void start() { self_ = shared_from_this(); }

  // Any thread.
  void submit(Item item) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (released_) {
      lock.unlock();
      run_inline(item);
      return;
    }
    if (item.close) {
      if (closing_) return;
      closing_ = true;
    }
    queue_.push_back(std::move(item));
    if (!wake_pending_) {
      wake_pending_ = true;
      wake();
    }
  }

  const Endpoint& endpoint() const { return endpoint_; }

  Stats stats() const {
    Stats s;
    s.connections = connections_.load();
    s.commands = commands_.load();
    s.max_in_flight = max_in_flight_.load();
    return s;
  }

 protected:
  // The adapter's side. wake() is called with mutex_ held, from any thread; the others on the loop.
  virtual bool attach(redisAsyncContext* ac) = 0;
  virtual void wake() = 0;
  virtual void arm_timer(std::chrono::microseconds delay) = 0;
  // Releases the wake-up event and the timer, then calls finished() (at once or from a later loop
  // callback). The Core may be destroyed by then: nothing may touch it afterwards.
  virtual void release_loop() = 0;

  // Top-level loop handlers, called by the adapter. Each may destroy the Core as its last act.
  void on_wake() {
    collect_garbage();
    std::vector<Item> batch;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      batch.swap(queue_);
      wake_pending_ = false;
    }
    for (Item& item : batch) backlog_.push_back(std::move(item));
    pump();
    maybe_finish();
  }

  void on_timer() {
    timer_armed_ = false;
    collect_garbage();
    if (conn_) {
      const TimePoint now = SteadyClock::now();
      if (!conn_->connected && conn_->connect_deadline && now >= *conn_->connect_deadline) {
        drop(fmt::format("connecting to {} took longer than {} ms", describe(endpoint_),
                         options_.connect_timeout.count()),
             true);
      } else if (const auto due = reply_due(*conn_); due && *due <= now) {
        drop(fmt::format("no reply from {} within {} ms", describe(endpoint_), options_.command_timeout.count()), true);
      }
    }
    pump();
    schedule_deadline();
    maybe_finish();
  }

  // Called by release_loop() once the loop resources are gone: lets the Core go.
  void finished() {
    const std::shared_ptr<Core> last = std::move(self_);
    (void)last;  // destroyed here, possibly with *this
  }

 private:
  struct Conn;

  // What hiredis carries for each command (its privdata).
  struct Pending {
    ReplyCallback on_reply;
    ErrorCallback on_error;
    const char* setup = nullptr;  // "AUTH" / "SELECT": internal, no user callbacks
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
    std::deque<TimePoint> inflight;  // when each command hiredis holds was sent, oldest first
    TimePoint last_reply{};          // when the last reply arrived
    std::string failure;             // set when we drop it: the pending commands fail with this
    bool timed_out = false;
    ContextPtr ac;                   // null once hiredis has freed the context itself
  };

  static void run_inline(Item& item) {
    if (item.task) {
      run_task(item.task);
    } else if (!item.close) {
      // No loop to run it on any more.
      fail(item.on_error, std::make_exception_ptr(ConnectionError("AsyncRedis is closed")));
    }
  }

  static void run_task(const std::function<void()>& task) {
    try {
      task();
    } catch (...) {  // cannot propagate through the event loop's C frames
    }
  }

  static void fail(const ErrorCallback& on_error, std::exception_ptr error) {
    try {
      on_error(std::move(error));
    } catch (...) {
    }
  }

  // Runs the backlog in order: tasks, the close marker, and commands, which go to hiredis while fewer
  // than max_in_flight wait for replies (hiredis 0.14 moves its whole output buffer after each
  // partial write: an unbounded flood would cost it quadratic time).
  void pump() {
    std::exception_ptr connect_error;  // one failed connect fails the rest of this pass too
    while (!backlog_.empty()) {
      Item& front = backlog_.front();
      const bool command = !front.task && !front.close;
      if (command && !shutting_down_ && at_capacity()) return;  // resumed by replied()
      Item item = std::move(front);
      backlog_.pop_front();
      if (item.task) {
        run_task(item.task);
      } else if (item.close) {
        begin_shutdown();
      } else if (shutting_down_) {
        fail(item.on_error, closed_error(endpoint_));
      } else {
        send(item, connect_error);
      }
    }
  }

  bool at_capacity() const {
    return conn_ && options_.max_in_flight > 0 && conn_->inflight.size() >= options_.max_in_flight;
  }

  // Contexts retired inside callbacks are freed here, at the top level.
  void collect_garbage() {
    auto dead = std::move(graveyard_);
    graveyard_.clear();
    dead.clear();  // may run callbacks (with a null reply); they can only queue more work
  }

  void send(Item& item, std::exception_ptr& connect_error) {
    if (connect_error) {
      fail(item.on_error, connect_error);
      return;
    }
    Conn* conn = nullptr;
    try {
      conn = connection();
    } catch (...) {
      connect_error = std::current_exception();
      fail(item.on_error, connect_error);
      return;
    }
    auto pending = std::make_unique<Pending>();
    pending->on_reply = std::move(item.on_reply);
    pending->on_error = std::move(item.on_error);
    if (!issue(*conn, item.argv, pending.get())) {
      const std::string why = conn->ac && conn->ac->errstr ? conn->ac->errstr : "context unusable";
      fail(pending->on_error,
           std::make_exception_ptr(ConnectionError(fmt::format("sending to {}: {}", describe(endpoint_), why))));
      return;
    }
    pending.release();  // hiredis owns it now, until its callback
    ++commands_;
    if (conn->inflight.size() > max_in_flight_.load(std::memory_order_relaxed)) {
      max_in_flight_.store(conn->inflight.size(), std::memory_order_relaxed);
    }
  }

  // Hands one command to hiredis (it is written when the socket is writable).
  bool issue(Conn& conn, const std::vector<std::string>& args, Pending* pending) {
    std::vector<const char*> ptrs;
    std::vector<std::size_t> lens;
    ptrs.reserve(args.size());
    lens.reserve(args.size());
    for (const auto& a : args) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAsyncCommandArgv(conn.ac.get(), &Core::on_reply, pending, static_cast<int>(args.size()), ptrs.data(),
                              lens.data()) != REDIS_OK) {
      return false;
    }
    conn.inflight.push_back(SteadyClock::now());
    if (conn.inflight.size() == 1) {
      if (const auto due = reply_due(conn); due && (!timer_armed_ || *due < timer_at_)) arm(*due);
    }
    return true;
  }

  // When the oldest command waiting on `conn` is overdue: command_timeout after it was sent, or after
  // the reply before it arrived, whichever is later. Replies come in order, so a command deep in a
  // pipeline waits for the ones ahead of it; what the deadline catches is a connection that stops
  // answering, not a long (but moving) queue.
  std::optional<TimePoint> reply_due(const Conn& conn) const {
    if (conn.inflight.empty() || options_.command_timeout.count() == 0) return std::nullopt;
    return std::max(conn.inflight.front(), conn.last_reply) + options_.command_timeout;
  }

  // The current connection, opened (with AUTH / SELECT queued first) if there is none.
  Conn* connection() {
    if (conn_) return conn_.get();
    auto conn = std::make_unique<Conn>(*this);
    redisAsyncContext* raw = endpoint_.unix_path.empty()
                                 ? redisAsyncConnect(endpoint_.host.c_str(), endpoint_.port)
                                 : redisAsyncConnectUnix(endpoint_.unix_path.c_str());
    if (raw == nullptr) throw ConnectionError(fmt::format("cannot allocate a connection to {}", describe(endpoint_)));
    conn->ac.reset(raw);
    if (raw->err) throw ConnectionError(fmt::format("connecting to {}: {}", describe(endpoint_), raw->errstr));
    raw->data = conn.get();
    if (!attach(raw)) {
      throw ConnectionError(fmt::format("cannot attach the connection to {} to the event loop", describe(endpoint_)));
    }
    redisAsyncSetConnectCallback(raw, &Core::on_connect);
    redisAsyncSetDisconnectCallback(raw, &Core::on_disconnect);
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
    // hiredis >= 1.0 also watches for a silent server itself (no reply for this long); our own
    // per-command deadline below stays, as it is what holds on hiredis 0.14.
    if (options_.command_timeout.count() > 0) {
      redisAsyncSetTimeout(raw, to_timeval(std::chrono::duration_cast<std::chrono::microseconds>(options_.command_timeout)));
    }
#endif
    ++connections_;
    if (options_.connect_timeout.count() > 0) {
      conn->connect_deadline = SteadyClock::now() + options_.connect_timeout;
      if (!timer_armed_ || *conn->connect_deadline < timer_at_) arm(*conn->connect_deadline);
    }
    std::vector<std::pair<const char*, std::vector<std::string>>> setup;
    if (!endpoint_.password.empty()) {
      if (endpoint_.username.empty()) {
        setup.push_back({"AUTH", {"AUTH", endpoint_.password}});
      } else {
        setup.push_back({"AUTH", {"AUTH", endpoint_.username, endpoint_.password}});
      }
    }
    if (endpoint_.db != 0) setup.push_back({"SELECT", {"SELECT", std::to_string(endpoint_.db)}});
    for (const auto& [what, argv] : setup) {
      auto pending = std::make_unique<Pending>();
      pending->setup = what;
      if (!issue(*conn, argv, pending.get())) {
        throw ConnectionError(fmt::format("cannot send {} to {}", what, describe(endpoint_)));
      }
      pending.release();
    }
    conn_ = std::move(conn);
    return conn_.get();
  }

  // Drops the current connection from a top-level handler: every pending command fails now.
  void drop(std::string why, bool timed_out) {
    std::unique_ptr<Conn> conn = std::move(conn_);
    conn->failure = std::move(why);
    conn->timed_out = timed_out;
    conn->ac.reset();  // redisAsyncFree: the pending callbacks run with a null reply
  }

  // Inside a hiredis callback: `conn` stops being current; it is freed at the next top-level handler.
  void retire(Conn& conn) {
    if (conn_.get() == &conn) graveyard_.push_back(std::move(conn_));
    arm(SteadyClock::now());
  }

  void begin_shutdown() {
    shutting_down_ = true;
    if (!conn_) return;
    if (conn_->inflight.empty()) {
      drop(fmt::format("AsyncRedis to {} is closed", describe(endpoint_)), false);
    } else {
      // Let what was sent be answered (the command deadlines still hold); hiredis frees the
      // context after the last reply and tells on_disconnect.
      redisAsyncDisconnect(conn_->ac.get());
    }
  }

  void maybe_finish() {
    if (!shutting_down_ || conn_ || finishing_) return;
    finishing_ = true;
    collect_garbage();
    std::vector<Item> left;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;  // from now on submit() runs things on the caller's thread
      left.swap(queue_);
    }
    for (Item& item : backlog_) run_inline(item);
    backlog_.clear();
    for (Item& item : left) run_inline(item);
    release_loop();  // last: may destroy *this
  }

  void schedule_deadline() {
    if (!conn_) return;
    std::optional<TimePoint> next;
    if (!conn_->connected && conn_->connect_deadline) next = conn_->connect_deadline;
    if (const auto due = reply_due(*conn_); due && (!next || *due < *next)) next = due;
    if (next && (!timer_armed_ || *next < timer_at_)) arm(*next);
  }

  void arm(TimePoint at) {
    const auto delay = std::max(std::chrono::microseconds{0},
                                std::chrono::duration_cast<std::chrono::microseconds>(at - SteadyClock::now()));
    timer_armed_ = true;
    timer_at_ = at;
    arm_timer(delay);
  }

  void replied(Conn& conn, const redisAsyncContext* ac, const redisReply* reply, std::unique_ptr<Pending> p) {
    if (!conn.inflight.empty()) conn.inflight.pop_front();
    if (reply != nullptr && options_.command_timeout.count() > 0) conn.last_reply = SteadyClock::now();
    if (!backlog_.empty() && conn_.get() == &conn && conn.inflight.size() <= options_.max_in_flight / 2 &&
        !(timer_armed_ && timer_at_ == TimePoint{})) {
      arm(TimePoint{});  // room again: the timer (at the top level) sends more of the backlog
    }
    if (p->setup != nullptr) {
      if (reply != nullptr && reply->type == REDIS_REPLY_ERROR && conn.failure.empty()) {
        // The commands queued behind it must not run unauthenticated or on the wrong db.
        conn.failure = fmt::format("{} on {} failed: {}", p->setup, describe(endpoint_),
                                   std::string(reply->str, reply->len));
        retire(conn);
      }
      return;
    }
    std::exception_ptr error;
    if (!conn.failure.empty()) {
      error = conn.timed_out ? std::make_exception_ptr(TimeoutError(conn.failure))
                             : std::make_exception_ptr(ConnectionError(conn.failure));
    } else if (reply == nullptr) {
      const std::string why = ac->err ? ac->errstr : "connection closed";
#ifdef REDIS_ERR_TIMEOUT
      if (ac->err == REDIS_ERR_TIMEOUT) {
        error = std::make_exception_ptr(TimeoutError(fmt::format("{}: {}", describe(endpoint_), why)));
      }
#endif
      if (!error) error = std::make_exception_ptr(ConnectionError(fmt::format("{}: {}", describe(endpoint_), why)));
    }
    try {
      if (error) {
        p->on_error(error);
      } else {
        p->on_reply(detail::from_hiredis(*reply));
      }
    } catch (...) {  // must not unwind through hiredis
    }
  }

  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata) {
    std::unique_ptr<Pending> p(static_cast<Pending*>(privdata));
    auto* conn = static_cast<Conn*>(ac->data);
    conn->core.replied(*conn, ac, static_cast<const redisReply*>(reply), std::move(p));
  }

  static void on_connect(const redisAsyncContext* ac, int status) {
    auto* conn = static_cast<Conn*>(ac->data);
    if (status == REDIS_OK) {
      conn->connected = true;
      return;
    }
    // hiredis frees the context right after this (failing the pending commands with its error).
    (void)conn->ac.release();
    conn->core.retire(*conn);
  }

  static void on_disconnect(const redisAsyncContext* ac, int /*status*/) {
    auto* conn = static_cast<Conn*>(ac->data);
    (void)conn->ac.release();  // hiredis frees it when we return (a no-op when we are freeing it)
    conn->connected = false;
    conn->core.retire(*conn);
  }

  const Endpoint endpoint_;
  const AsyncOptions options_;

  // Shared with other threads, under mutex_.
  std::mutex mutex_;
  std::vector<Item> queue_;
  bool wake_pending_ = false;
  bool closing_ = false;
  bool released_ = false;

  std::atomic<std::uint64_t> connections_{0};
  std::atomic<std::uint64_t> commands_{0};
  std::atomic<std::size_t> max_in_flight_{0};

  // Loop thread only.
  std::deque<Item> backlog_;  // taken from queue_, not yet handed to hiredis
  std::unique_ptr<Conn> conn_;
  std::vector<std::unique_ptr<Conn>> graveyard_;
  bool timer_armed_ = false;
  TimePoint timer_at_{};
  bool shutting_down_ = false;
  bool finishing_ = false;
  std::shared_ptr<Core> self_;
};

namespace {

[[maybe_unused]] void check_options(const AsyncOptions& o) {
  if (o.connect_timeout.count() < 0) throw InvalidArgument("connect_timeout must not be negative");
  if (o.command_timeout.count() < 0) throw InvalidArgument("command_timeout must not be negative");
}

#ifdef REDLIMIT_HAVE_LIBEVENT

struct EventDeleter {
  void operator()(event* e) const { event_free(e); }
};
using EventPtr = std::unique_ptr<event, EventDeleter>;

struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

bool set_flags(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0 && ::fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
}

// libevent: a pipe wakes the loop (event_active from another thread would need evthread support,
// which the caller's base may not have), and an evtimer keeps the deadlines.
class LibeventCore final : public AsyncRedis::Core {
 public:
  LibeventCore(event_base* base, Endpoint endpoint, AsyncOptions options)
      : Core(std::move(endpoint), options), base_(base) {
    int fds[2];
    if (::pipe(fds) != 0) throw ConnectionError(fmt::format("cannot create a wake-up pipe: errno {}", errno));
    read_.fd = fds[0];
    write_.fd = fds[1];
    if (!set_flags(read_.fd) || !set_flags(write_.fd)) throw ConnectionError("cannot set up the wake-up pipe");
    wake_ev_.reset(event_new(base_, read_.fd, EV_READ | EV_PERSIST, &LibeventCore::wake_cb, this));
    timer_ev_.reset(evtimer_new(base_, &LibeventCore::timer_cb, this));
    if (!wake_ev_ || !timer_ev_ || event_add(wake_ev_.get(), nullptr) != 0) {
      throw ConnectionError("cannot add the wake-up event to the event_base");
    }
  }

 protected:
  bool attach(redisAsyncContext* ac) override { return redisLibeventAttach(ac, base_) == REDIS_OK; }

  void wake() override {
    const char byte = 1;
    // A full pipe already means "wake up": EAGAIN is fine.
    [[maybe_unused]] const auto n = ::write(write_.fd, &byte, 1);
  }

  void arm_timer(std::chrono::microseconds delay) override {
    const timeval tv = to_timeval(delay);
    evtimer_add(timer_ev_.get(), &tv);
  }

  void release_loop() override {
    wake_ev_.reset();  // freeing the event whose callback is running is allowed
    timer_ev_.reset();
    read_.reset();
    write_.reset();
    finished();
  }

 private:
  static void wake_cb(evutil_socket_t fd, short /*what*/, void* arg) {
    char buf[256];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
    static_cast<LibeventCore*>(arg)->on_wake();
  }

  static void timer_cb(evutil_socket_t /*fd*/, short /*what*/, void* arg) { static_cast<LibeventCore*>(arg)->on_timer(); }

  event_base* base_;
  Fd read_, write_;
  EventPtr wake_ev_, timer_ev_;
};

#endif  // REDLIMIT_HAVE_LIBEVENT

#ifdef REDLIMIT_HAVE_LIBUV

// libuv: uv_async_send is libuv's one thread-safe call, made for this; a uv_timer_t keeps the
// deadlines. Handles close asynchronously: the Core lives until both close callbacks ran.
class LibuvCore final : public AsyncRedis::Core {
 public:
  LibuvCore(uv_loop_t* loop, Endpoint endpoint, AsyncOptions options) : Core(std::move(endpoint), options), loop_(loop) {
    // uv_async_init may fail (it may need an fd); uv_timer_init cannot. Once a handle is
    // initialised it can only go through uv_close on a running loop, so nothing may throw after.
    const int rc = uv_async_init(loop_, &async_, &LibuvCore::async_cb);
    if (rc != 0) throw ConnectionError(fmt::format("uv_async_init failed: {}", uv_strerror(rc)));
    async_.data = this;
    uv_timer_init(loop_, &timer_);
    timer_.data = this;
  }

 protected:
  bool attach(redisAsyncContext* ac) override { return redisLibuvAttach(ac, loop_) == REDIS_OK; }

  void wake() override { uv_async_send(&async_); }

  void arm_timer(std::chrono::microseconds delay) override {
    const auto ms = static_cast<std::uint64_t>((delay.count() + 999) / 1000);
    uv_timer_start(&timer_, &LibuvCore::timer_cb, ms, 0);
  }

  void release_loop() override {
    open_ = 2;
    uv_close(reinterpret_cast<uv_handle_t*>(&async_), &LibuvCore::close_cb);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &LibuvCore::close_cb);
  }

 private:
  static void async_cb(uv_async_t* h) { static_cast<LibuvCore*>(h->data)->on_wake(); }
  static void timer_cb(uv_timer_t* h) { static_cast<LibuvCore*>(h->data)->on_timer(); }
  static void close_cb(uv_handle_t* h) {
    auto* self = static_cast<LibuvCore*>(h->data);
    if (--self->open_ == 0) self->finished();
  }

  uv_loop_t* loop_;
  uv_async_t async_{};
  uv_timer_t timer_{};
  int open_ = 0;
};

#endif  // REDLIMIT_HAVE_LIBUV

}  // namespace

AsyncRedis::AsyncRedis(std::shared_ptr<Core> core) : core_(std::move(core)) {}

AsyncRedis::~AsyncRedis() {
  try {
    close();
  } catch (...) {  // out of memory while queueing the close: nothing better to do
  }
}

std::shared_ptr<AsyncRedis> AsyncRedis::attach_libevent(event_base* base, const Endpoint& endpoint,
                                                        AsyncOptions options) {
#ifdef REDLIMIT_HAVE_LIBEVENT
  check_options(options);
  if (base == nullptr) throw InvalidArgument("event_base must not be null");
  auto core = std::make_shared<LibeventCore>(base, endpoint, options);
  core->start();
  return std::shared_ptr<AsyncRedis>(new AsyncRedis(std::move(core)));
#else
  (void)base;
  (void)endpoint;
  (void)options;
  throw Error("this redlimit was built without libevent (install libevent-dev and rebuild)");
#endif
}

std::shared_ptr<AsyncRedis> AsyncRedis::attach_libuv(uv_loop_s* loop, const Endpoint& endpoint, AsyncOptions options) {
#ifdef REDLIMIT_HAVE_LIBUV
  check_options(options);
  if (loop == nullptr) throw InvalidArgument("uv loop must not be null");
  auto core = std::make_shared<LibuvCore>(loop, endpoint, options);
  core->start();
  return std::shared_ptr<AsyncRedis>(new AsyncRedis(std::move(core)));
#else
  (void)loop;
  (void)endpoint;
  (void)options;
  throw Error("this redlimit was built without libuv (install libuv1-dev and rebuild)");
#endif
}

bool AsyncRedis::has_libevent() {
#ifdef REDLIMIT_HAVE_LIBEVENT
  return true;
#else
  return false;
#endif
}

bool AsyncRedis::has_libuv() {
#ifdef REDLIMIT_HAVE_LIBUV
  return true;
#else
  return false;
#endif
}

void AsyncRedis::command_async(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error) {
  if (argv.empty()) throw InvalidArgument("empty command");
  if (!on_reply || !on_error) throw InvalidArgument("command_async needs both callbacks");
  Core::Item item;
  item.argv = std::move(argv);
  item.on_reply = std::move(on_reply);
  item.on_error = std::move(on_error);
  core_->submit(std::move(item));
}

void AsyncRedis::post(std::function<void()> task) {
  if (!task) throw InvalidArgument("post needs a task");
  Core::Item item;
  item.task = std::move(task);
  core_->submit(std::move(item));
}

void AsyncRedis::close() {
  Core::Item item;
  item.close = true;
  core_->submit(std::move(item));
}

const Endpoint& AsyncRedis::endpoint() const { return core_->endpoint(); }

AsyncRedis::Stats AsyncRedis::stats() const { return core_->stats(); }

}  // namespace redlimit
