// AsyncRedis over libuv: the adapter half of AsyncRedis::Core (wake-up, timer, release of the loop
// resources), our own hiredis adapter for libuv, and AsyncRedis::attach_libuv. Without
// REDLIMIT_HAVE_LIBUV only the factory is left, and it throws.
#include <fmt/format.h>

#include "async_core.hpp"
#include "redlimit/errors.hpp"
#include "sentinel_discovery.hpp"

#ifdef REDLIMIT_HAVE_LIBUV
#include <uv.h>

#include <memory>
#endif

namespace redlimit {

#ifdef REDLIMIT_HAVE_LIBUV

namespace {

// Our hiredis adapter for libuv, in place of hiredis 0.14's (hiredis/adapters/libuv.h). libuv
// reports a socket error (POLLERR: a reset or refused connection) as a negative status, and stops
// the poll handle; that adapter then returns without telling hiredis, so hiredis never learns that
// the connection broke: with no command deadline its callbacks never run, and with one they fail
// only at the deadline. Here an error status runs hiredis's read and write handlers for the events
// hiredis asked for, so it tries the socket, meets the error and fails what it holds at once.
//
// One UvPoll per context, owned by it: hiredis calls cleanup() when it frees the context, which
// closes the handle; the UvPoll is freed in the close callback (libuv still holds the handle until
// then).
struct UvPoll {
  uv_poll_t handle{};
  redisAsyncContext* ac = nullptr;  // null once hiredis has freed the context
  int events = 0;                   // UV_READABLE / UV_WRITABLE, as hiredis asked

  static UvPoll* of(void* privdata) { return static_cast<UvPoll*>(privdata); }

  void watch(int add, int remove) {
    events = (events | add) & ~remove;
    // Started again even when `events` did not change: libuv stops the handle after an error.
    if (events != 0) {
      uv_poll_start(&handle, events, &UvPoll::on_poll);
    } else {
      uv_poll_stop(&handle);
    }
  }

  static void on_poll(uv_poll_t* h, int status, int ready) {
    UvPoll* p = of(h->data);
    if (status < 0) ready = p->events;  // let hiredis find the error itself
    // Either handler may free the context (then cleanup() clears p->ac; p itself lives on).
    if (p->ac != nullptr && (ready & UV_READABLE) != 0) redisAsyncHandleRead(p->ac);
    if (p->ac != nullptr && (ready & UV_WRITABLE) != 0) redisAsyncHandleWrite(p->ac);
  }

  static void add_read(void* d) { of(d)->watch(UV_READABLE, 0); }
  static void del_read(void* d) { of(d)->watch(0, UV_READABLE); }
  static void add_write(void* d) { of(d)->watch(UV_WRITABLE, 0); }
  static void del_write(void* d) { of(d)->watch(0, UV_WRITABLE); }
  static void cleanup(void* d) {
    UvPoll* p = of(d);
    p->ac = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(&p->handle),
             [](uv_handle_t* h) { delete of(h->data); });  // NOLINT: ours since attach_uv_poll
  }
};

// Attaches `ac` to `loop` through a UvPoll. On failure nothing is attached and nothing leaks.
bool attach_uv_poll(redisAsyncContext* ac, uv_loop_t* loop) {
  if (ac->ev.data != nullptr) return false;  // attached already
  auto p = std::make_unique<UvPoll>();
  if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) return false;  // no handle was registered
  p->handle.data = p.get();
  p->ac = ac;
  // Only these five: hiredis >= 1.0 has more hooks (scheduleTimer), which stay unset.
  ac->ev.addRead = &UvPoll::add_read;
  ac->ev.delRead = &UvPoll::del_read;
  ac->ev.addWrite = &UvPoll::add_write;
  ac->ev.delWrite = &UvPoll::del_write;
  ac->ev.cleanup = &UvPoll::cleanup;
  ac->ev.data = p.release();  // owned by the context from here: freed after cleanup()
  return true;
}

// libuv: uv_async_send is libuv's one thread-safe call, made for this (it writes to an eventfd);
// from the loop's own callbacks a uv_idle_t, started, runs on_wake() at the loop's next turn with no
// system call. A uv_timer_t keeps the deadlines. Handles close asynchronously: the Core lives until
// every close callback ran.
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
    uv_idle_init(loop_, &idle_);
    idle_.data = this;
  }

 protected:
  bool attach(redisAsyncContext* ac) override { return attach_uv_poll(ac, loop_); }

  void wake() override { uv_async_send(&async_); }
  void wake_in_loop() override { uv_idle_start(&idle_, &LibuvCore::idle_cb); }
  const void* loop() const override { return loop_; }

  void arm_timer(std::chrono::microseconds delay) override {
    const auto ms = static_cast<std::uint64_t>((delay.count() + 999) / 1000);
    uv_timer_start(&timer_, &LibuvCore::timer_cb, ms, 0);
  }

  void release_loop() override {
    open_ = 3;
    uv_close(reinterpret_cast<uv_handle_t*>(&async_), &LibuvCore::close_cb);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &LibuvCore::close_cb);
    uv_close(reinterpret_cast<uv_handle_t*>(&idle_), &LibuvCore::close_cb);  // stops it too
  }

 private:
  static void async_cb(uv_async_t* h) { static_cast<LibuvCore*>(h->data)->on_wake(); }
  static void timer_cb(uv_timer_t* h) { static_cast<LibuvCore*>(h->data)->on_timer(); }
  static void idle_cb(uv_idle_t* h) {
    uv_idle_stop(h);  // once per wake-up: a running idle handle would keep the loop from sleeping
    static_cast<LibuvCore*>(h->data)->on_wake();
  }
  static void close_cb(uv_handle_t* h) {
    auto* self = static_cast<LibuvCore*>(h->data);
    if (--self->open_ == 0) self->finished();
  }

  uv_loop_t* loop_;
  uv_async_t async_{};
  uv_timer_t timer_{};
  uv_idle_t idle_{};
  int open_ = 0;
};

}  // namespace

#endif  // REDLIMIT_HAVE_LIBUV

namespace {

// Both attach_libuv overloads: the checks every endpoint needs, and the Core.
std::shared_ptr<AsyncRedis::Core> libuv_core(uv_loop_s* loop, const Endpoint& endpoint, const AsyncOptions& options) {
#ifdef REDLIMIT_HAVE_LIBUV
  async_detail::check_options(options);
  if (loop == nullptr) throw InvalidArgument("uv loop must not be null");
  return std::make_shared<LibuvCore>(loop, endpoint, options);
#else
  (void)loop;
  (void)endpoint;
  (void)options;
  throw Error("this redlimit was built without libuv (install libuv1-dev and rebuild)");
#endif
}

}  // namespace

std::shared_ptr<AsyncRedis> AsyncRedis::attach_libuv(uv_loop_s* loop, const Endpoint& endpoint, AsyncOptions options) {
  return begin(libuv_core(loop, endpoint, options), nullptr);
}

std::shared_ptr<AsyncRedis> AsyncRedis::attach_libuv(uv_loop_s* loop, const SentinelEndpoint& sentinels,
                                                     AsyncOptions options) {
  auto core = libuv_core(loop, sentinels.master, options);
  hiredis_detail::check_sentinel_endpoint(sentinels);
  return begin(std::move(core), &sentinels);
}

bool AsyncRedis::has_libuv() {
#ifdef REDLIMIT_HAVE_LIBUV
  return true;
#else
  return false;
#endif
}

}  // namespace redlimit
