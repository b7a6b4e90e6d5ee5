// AsyncRedis over libevent: the adapter half of AsyncRedis::Core (wake-up, timer, release of the
// loop resources) and AsyncRedis::attach_libevent. Without REDLIMIT_HAVE_LIBEVENT only the factory
// is left, and it throws.
#include <fmt/format.h>

#include "async_core.hpp"
#include "redlimit/errors.hpp"
#include "sentinel_discovery.hpp"

#ifdef REDLIMIT_HAVE_LIBEVENT
#include <event2/event.h>
#include <fcntl.h>
#include <hiredis/adapters/libevent.h>
#include <unistd.h>

#include <cerrno>
#endif

namespace redlimit {

#ifdef REDLIMIT_HAVE_LIBEVENT

namespace {

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

// libevent: a pipe wakes the loop from other threads (event_active from another thread would need
// evthread support, which the caller's base may not have); on the loop's thread, event_active of an
// event of our own does it without a system call, in the same turn of the loop. Work queued from
// the loop's own callbacks without end (each call answered without I/O, as a breaker's
// short-circuit is, starts the next) would keep libevent in that turn for good: no reply read, no
// deadline or delayed task run, until the callers stopped. So past kWakesPerTurn such wake-ups in
// one turn (told by libevent's time cache, which a turn sets once), the next waits for the next turn,
// on a timer of no delay: after the sockets and the timers that are due. Always waiting for the next
// turn would cost a poll each wake-up: 10-20% of the async rate with 64 calls in flight. Another
// evtimer keeps the deadlines.
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
    local_ev_.reset(evtimer_new(base_, &LibeventCore::local_cb, this));
    if (!wake_ev_ || !timer_ev_ || !local_ev_ || event_add(wake_ev_.get(), nullptr) != 0) {
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
  void wake_in_loop() override {
    timeval turn{};
    event_base_gettimeofday_cached(base_, &turn);
    if (turn.tv_sec != turn_.tv_sec || turn.tv_usec != turn_.tv_usec) {
      turn_ = turn;
      wakes_this_turn_ = 0;
    }
    if (++wakes_this_turn_ <= kWakesPerTurn) {
      event_active(local_ev_.get(), EV_TIMEOUT, 0);
      return;
    }
    const timeval no_delay{0, 0};
    evtimer_add(local_ev_.get(), &no_delay);
  }
  const void* loop() const override { return base_; }

  void arm_timer(std::chrono::microseconds delay) override {
    const timeval tv = async_detail::to_timeval(delay);
    evtimer_add(timer_ev_.get(), &tv);
  }

  void release_loop() override {
    wake_ev_.reset();  // freeing the event whose callback is running is allowed
    timer_ev_.reset();
    local_ev_.reset();
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
  static void local_cb(evutil_socket_t /*fd*/, short /*what*/, void* arg) { static_cast<LibeventCore*>(arg)->on_wake(); }

  static constexpr int kWakesPerTurn = 16;
  event_base* base_;
  Fd read_, write_;
  EventPtr wake_ev_, timer_ev_, local_ev_;
  timeval turn_{};  // libevent's cached time when this turn began (wake_in_loop)
  int wakes_this_turn_ = 0;
};

}  // namespace

#endif  // REDLIMIT_HAVE_LIBEVENT

namespace {

// Both attach_libevent overloads: the checks every endpoint needs, and the Core.
std::shared_ptr<AsyncRedis::Core> libevent_core(event_base* base, const Endpoint& endpoint,
                                                const AsyncOptions& options) {
#ifdef REDLIMIT_HAVE_LIBEVENT
  async_detail::check_options(options);
  if (base == nullptr) throw InvalidArgument("event_base must not be null");
  return std::make_shared<LibeventCore>(base, endpoint, options);
#else
  (void)base;
  (void)endpoint;
  (void)options;
  throw Error("this redlimit was built without libevent (install libevent-dev and rebuild)");
#endif
}

}  // namespace

std::shared_ptr<AsyncRedis> AsyncRedis::attach_libevent(event_base* base, const Endpoint& endpoint,
                                                        AsyncOptions options) {
  return begin(libevent_core(base, endpoint, options), nullptr);
}

std::shared_ptr<AsyncRedis> AsyncRedis::attach_libevent(event_base* base, const SentinelEndpoint& sentinels,
                                                        AsyncOptions options) {
  auto core = libevent_core(base, sentinels.master, options);
  hiredis_detail::check_sentinel_endpoint(sentinels);
  return begin(std::move(core), &sentinels);
}

bool AsyncRedis::has_libevent() {
#ifdef REDLIMIT_HAVE_LIBEVENT
  return true;
#else
  return false;
#endif
}

}  // namespace redlimit
