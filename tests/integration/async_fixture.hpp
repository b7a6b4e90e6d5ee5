#pragma once
// The fixture of the asynchronous API tests (async_*_test.cpp): Strategy::consume_async /
// consume_future over AsyncRedis, on a libevent or libuv loop running on a background thread. Every
// wait is bounded (futures with wait_for), and every test checks that its loop returns by itself once
// the AsyncRedis is gone (the loop thread is then joined; a loop that does not return is reported and
// abandoned, never waited for forever).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/transport/redis_async.hpp"
#include "support/fixture.hpp"
#include "support/run_delay.hpp"

#ifdef REDLIMIT_HAVE_LIBEVENT
#include <event2/event.h>
#endif
#ifdef REDLIMIT_HAVE_LIBUV
#include <uv.h>
#endif

namespace redlimit_test {
// Named, not anonymous: googletest needs one AsyncTest class across the files of the suite.
namespace async_fixture {

using redlimit::AsyncOptions;
using redlimit::AsyncRedis;
using redlimit::Endpoint;
using redlimit::Reply;
using redlimit::Source;

constexpr auto kWait = 20s;  // bound on any single wait in these tests

template <class T>
T get_within(std::future<T>& f, std::chrono::seconds limit = kWait) {
  if (f.wait_for(limit) != std::future_status::ready) throw std::runtime_error("timed out waiting for a reply");
  return f.get();
}

// A command's outcome as a future: the reply, or the exception.
inline std::future<Reply> command(AsyncRedis& redis, std::vector<std::string> argv) {
  auto p = std::make_shared<std::promise<Reply>>();
  auto f = p->get_future();
  redis.command_async(
      std::move(argv), [p](Reply r) { p->set_value(std::move(r)); },
      [p](std::exception_ptr e) { p->set_exception(std::move(e)); });
  return f;
}

// The exception a future holds, rethrown and caught as E (fails the test when there is none, or
// when it is not an E).
template <class E>
inline std::string error_of(std::future<Decision>& f) {
  try {
    const Decision d = get_within(f);
    ADD_FAILURE() << "expected an exception, got " << d;
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception: " << e.what();
  }
  return {};
}

// Runs an event loop on a background thread until it returns by itself. stop() expects it to return
// within a bound once every AsyncRedis on it is gone; one that does not is reported, and its thread
// and loop are abandoned (leaked) so that the suite goes on instead of hanging.
class LoopThread {
 public:
  virtual ~LoopThread() = default;

  void start() {
    auto ended = ended_;
    thread_ = std::thread([this, ended] {
      tid_ = this_thread_tid();
      run();
      ended->set_value();
    });
    done_ = ended_->get_future();
  }

  std::thread::id id() const { return thread_.get_id(); }
  // The loop thread's kernel id, once it has started (support/run_delay.hpp); 0 before.
  long tid() const { return tid_; }

  // Call after releasing every reference to the AsyncRedis objects on this loop.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    if (!thread_.joinable()) {
      release();
      return;
    }
    if (done_.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "the event loop did not return after its AsyncRedis was released";
      thread_.detach();  // the loop (and this object's loop storage) is leaked on purpose
      leaked_ = true;
      return;
    }
    thread_.join();
    release();
  }

 protected:
  virtual void run() = 0;
  virtual void release() = 0;
  bool leaked_ = false;

 private:
  std::shared_ptr<std::promise<void>> ended_ = std::make_shared<std::promise<void>>();
  std::future<void> done_;
  std::thread thread_;
  std::atomic<long> tid_{0};
  bool stopped_ = false;
};

inline Endpoint endpoint_of(RedisServer& server, int db = 0) { return redlimit::parse_url(server.url(db)); }

// An endpoint beside `server` that refuses every connection at once: a unix socket nobody listens on.
inline Endpoint refusing_endpoint(RedisServer& server) {
  Endpoint nowhere = endpoint_of(server);
  nowhere.unix_path = server.dir() + "/no-such.sock";
  return nowhere;
}

// What many callbacks report, shared with them (it outlives the test body if one is late).
struct Tally {
  explicit Tally(int expected) : expected(expected) {}
  const int expected;
  std::mutex mutex;
  int done = 0;
  int allowed = 0;
  int rejected = 0;
  std::vector<std::string> errors;
  std::set<std::int64_t> remaining_when_allowed;
  std::set<std::thread::id> threads;
  std::promise<void> all_done;

  void record(const Decision& d, std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        errors.emplace_back(ex.what());
      }
    } else if (d.allowed) {
      ++allowed;
      remaining_when_allowed.insert(d.remaining);
    } else {
      ++rejected;
    }
    if (++done == expected) all_done.set_value();
  }
};

// A service that answers each request by starting the next: consume_async calls made in their
// predecessors' callbacks, `in_flight` at a time, `total` in all, on one hot subject.
struct Chain : std::enable_shared_from_this<Chain> {
  Chain(const redlimit::Strategy& strategy, int total) : s(strategy), total(total) {}
  void issue() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (issued == total) return;
      ++issued;
    }
    s.consume_async("hot", 1, [self = shared_from_this()](const Decision& d, std::exception_ptr e) {
      {
        std::lock_guard<std::mutex> lock(self->mutex);
        self->decisions.push_back(d);
        if (e) ++self->errors;
        if (++self->done == self->total) self->all.set_value();
      }
      self->issue();
    });
  }
  const redlimit::Strategy& s;
  const int total;
  std::mutex mutex;
  int issued = 0, done = 0, errors = 0;
  std::vector<Decision> decisions;
  std::promise<void> all;
};

// A chain of `total` calls, `in_flight` at a time, started by one task posted to the loop; returns
// once every callback has run. Throws when no callback came for kWait (a lost callback leaves the
// chain waiting for ever) or the whole took over 5 x kWait. A bound on progress, not on the whole:
// under TSan beside another suite on a slow 2-core machine, 50,000 calls under a kill loop took over
// 20 s while never pausing (4.5 s alone, 10-11.5 s beside three busy loops).
inline std::shared_ptr<Chain> run_chain(redlimit::AsyncRedis& redis, const redlimit::Strategy& s, int total,
                                        int in_flight) {
  auto chain = std::make_shared<Chain>(s, total);
  redis.post([chain, in_flight] {
    for (int i = 0; i < in_flight; ++i) chain->issue();
  });
  auto all = chain->all.get_future();
  const auto start = std::chrono::steady_clock::now();
  auto progressed = start;
  int seen = 0;
  while (all.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(chain->mutex);
    if (chain->done != seen) {
      seen = chain->done;
      progressed = now;
    }
    if (now - progressed > kWait || now - start > 5 * kWait) {
      throw std::runtime_error("the chain stalled: " + std::to_string(chain->done) + " of " + std::to_string(total) +
                               " callbacks (" + std::to_string(chain->issued) + " calls made)");
    }
  }
  return chain;
}

// What a chain on a hot subject of limit `limit` must have been told: no errors, and the remaining
// of the admitted calls `limit - 1` down to 0, once each, in the order of the calls.
inline void expect_exact_chain(Chain& chain, std::int64_t limit) {
  std::lock_guard<std::mutex> lock(chain.mutex);
  EXPECT_EQ(chain.errors, 0);
  std::vector<std::int64_t> admitted;
  for (const Decision& d : chain.decisions) {
    if (d.allowed) admitted.push_back(d.remaining);
  }
  ASSERT_EQ(admitted.size(), static_cast<std::size_t>(limit));
  for (std::size_t i = 0; i < admitted.size(); ++i) {
    EXPECT_EQ(admitted[i], limit - 1 - static_cast<std::int64_t>(i)) << i;
  }
}

// A merged call of 32 hands out its decisions in two halves (AsyncLane::kSendEarlyFrom): the calls
// its first 16 callers make are written before the 17th caller's callback runs, so Redis decides
// them meanwhile. On `conn`'s loop: 32 consume_async of `first` in one turn; each of the first 16
// callbacks calls consume_async(`next`); the 17th holds the loop until `next_written()` (Redis has
// `next`'s key) or kWait/4. Without the early send, the calls of `next` could only leave once every
// callback had returned, and the 17th would wait in vain.
template <class Written>
void expect_first_half_leaves_early(redlimit::AsyncConnection& conn, const redlimit::Strategy& fw,
                                    const std::string& first, const std::string& next, Written next_written) {
  struct State {
    std::mutex mutex;
    int answered = 0, next_answered = 0;
    bool seen_in_time = false;
    std::promise<void> all;
  };
  auto st = std::make_shared<State>();
  auto finish = [st] {
    std::lock_guard<std::mutex> lock(st->mutex);
    if (++st->next_answered == 16) st->all.set_value();
  };
  conn.post([&fw, st, finish, first, next, next_written] {
    for (int i = 0; i < 32; ++i) {
      fw.consume_async(first, 1, [&fw, st, finish, next, next_written](const Decision&, std::exception_ptr) {
        int n = 0;
        {
          std::lock_guard<std::mutex> lock(st->mutex);
          n = ++st->answered;
        }
        if (n <= 16) {
          fw.consume_async(next, 1, [finish](const Decision&, std::exception_ptr) { finish(); });
        } else if (n == 17) {
          const auto until = std::chrono::steady_clock::now() + kWait / 4;
          bool seen = false;
          while (!seen && std::chrono::steady_clock::now() < until) {
            seen = next_written();
            if (!seen) std::this_thread::sleep_for(1ms);
          }
          std::lock_guard<std::mutex> lock(st->mutex);
          st->seen_in_time = seen;
        }
      });
    }
  });
  auto all = st->all.get_future();
  ASSERT_EQ(all.wait_for(kWait), std::future_status::ready) << "the calls made in callbacks were never answered";
  std::lock_guard<std::mutex> lock(st->mutex);
  EXPECT_TRUE(st->seen_in_time) << "the first half's calls waited for the second half's callbacks";
  EXPECT_TRUE(next_written());
}

class AsyncTest : public RedisTest {
 protected:
  // options() with a script call for every consume_async (Options::share_script_calls off): for the
  // tests of the connection itself, which count commands in flight, one per call.
  redlimit::Options call_each() const {
    redlimit::Options o = options();
    o.share_script_calls = false;
    return o;
  }

  // An AsyncRedis on `loop`, a limiter with `o` attached to it, and the limiter's fixed window of
  // 1,000 a minute named `resource`, with the loop started and the script path settled by one call
  // (FUNCTION LOAD). Members in the order the tests declared them, so they go in the same order.
  struct WarmFixedWindow {
    std::shared_ptr<AsyncRedis> redis;
    redlimit::RateLimiter rl;
    redlimit::FixedWindow fw;
  };
  template <class Loop>
  WarmFixedWindow warm_fixed_window(Loop& loop, const std::string& resource, const redlimit::Options& o) {
    auto redis = loop.attach(endpoint_of(server()));
    auto rl = redlimit::RateLimiter::connect(server().url(), o);
    rl.attach_async(redis);
    auto fw = rl.fixed_window(resource, Limit(1000, 1min));
    loop.start();
    auto warm = fw.consume_future("warm-up");
    EXPECT_TRUE(get_within(warm).allowed);
    return {std::move(redis), std::move(rl), std::move(fw)};
  }

  // Calls made in callbacks (3,000, 64 in flight, limit 1,000, on `loop`) go as merged calls that
  // wake the loop without a system call (Stats::wakeups: only the task that starts them woke it),
  // and are decided exactly: 1,000 admitted, remaining 999 down to 0 once each, in call order.
  template <class Loop>
  void expect_chained_calls_wake_the_loop_once(Loop& loop, const std::string& resource) {
    {
      auto [redis, rl, fw] = warm_fixed_window(loop, resource, options());
      const auto before = redis->stats();
      const auto chain = run_chain(*redis, fw, 3000, 64);
      const auto after = redis->stats();
      EXPECT_EQ(after.wakeups - before.wakeups, 1u) << "calls made in callbacks woke the loop with a system call";
      EXPECT_LT(after.commands - before.commands, 1500u) << "the calls were not merged";
      expect_exact_chain(*chain, 1000);
    }
    loop.stop();
  }

  // expect_first_half_leaves_early() on one server: `resource`'s fixed window, "first" and "next".
  template <class Loop>
  void expect_the_first_halfs_calls_to_leave_before_the_second_half_runs(Loop& loop, const std::string& resource) {
    {
      auto warmed = warm_fixed_window(loop, resource, options());
      const std::string next_key = warmed.fw.key_for("next");
      expect_first_half_leaves_early(*warmed.redis, warmed.fw, "first", "next",
                                     [&] { return server().integer({"EXISTS", next_key}) == 1; });
    }
    loop.stop();
  }

  void SetUp() override {
    // A write on a connection the server has just closed must be an EPIPE error, not a signal.
    std::signal(SIGPIPE, SIG_IGN);
    RedisTest::SetUp();
  }
};

#ifdef REDLIMIT_HAVE_LIBEVENT
class LibeventLoop final : public LoopThread {
 public:
  LibeventLoop() : base_(event_base_new()) {}
  ~LibeventLoop() override { stop(); }
  event_base* base() const { return base_; }
  std::shared_ptr<AsyncRedis> attach(const Endpoint& e, AsyncOptions o = {}) {
    return AsyncRedis::attach_libevent(base_, e, o);
  }

 private:
  void run() override { event_base_dispatch(base_); }
  void release() override {
    if (!leaked_) event_base_free(base_);
  }
  event_base* base_;
};

#endif  // REDLIMIT_HAVE_LIBEVENT

#ifdef REDLIMIT_HAVE_LIBUV
class LibuvLoop final : public LoopThread {
 public:
  LibuvLoop() : loop_(new uv_loop_t) { uv_loop_init(loop_); }
  ~LibuvLoop() override { stop(); }
  std::shared_ptr<AsyncRedis> attach(const Endpoint& e, AsyncOptions o = {}) {
    return AsyncRedis::attach_libuv(loop_, e, o);
  }

 private:
  void run() override { uv_run(loop_, UV_RUN_DEFAULT); }
  void release() override {
    if (leaked_) return;
    EXPECT_EQ(uv_loop_close(loop_), 0) << "a handle is still open on the libuv loop";
    delete loop_;
  }
  uv_loop_t* loop_;
};

#endif  // REDLIMIT_HAVE_LIBUV

}  // namespace async_fixture
using namespace async_fixture;  // NOLINT: the test files use the fixture's names
}  // namespace redlimit_test
