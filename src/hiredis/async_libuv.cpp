// AsyncRedis over libuv: the adapter half of AsyncRedis::Core (wake-up, timer, release of the loop
// resources) and AsyncRedis::attach_libuv. Without REDLIMIT_HAVE_LIBUV only the factory is left,
// and it throws.
#include "async_core.hpp"

#include <fmt/format.h>

#include "redlimit/errors.hpp"

#ifdef REDLIMIT_HAVE_LIBUV
#include <hiredis/adapters/libuv.h>
#include <uv.h>
#endif

namespace redlimit {

#ifdef REDLIMIT_HAVE_LIBUV

namespace {

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

}  // namespace

#endif  // REDLIMIT_HAVE_LIBUV

std::shared_ptr<AsyncRedis> AsyncRedis::attach_libuv(uv_loop_s* loop, const Endpoint& endpoint, AsyncOptions options) {
#ifdef REDLIMIT_HAVE_LIBUV
  async_detail::check_options(options);
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

bool AsyncRedis::has_libuv() {
#ifdef REDLIMIT_HAVE_LIBUV
  return true;
#else
  return false;
#endif
}

}  // namespace redlimit
