// Behaviours held under issue 18, on both loops: repeated kills lose or double no callback, and every
// way of letting go of the client with calls in flight (dropping the limiter and the AsyncRedis,
// close(), releasing the last reference inside a callback) still runs every callback exactly once,
// and close() with send_now() inside the last reply's callback frees nothing hiredis is inside
// (fixture: async_fixture.hpp). And post_after's tasks: due in order, and run at close when still
// waiting. And work queued without end from the loop's own callbacks leaves the loop its sockets and
// timers.
#include "integration/async_fixture.hpp"

namespace redlimit_test {
namespace {

constexpr int kLifetimeCalls = 5000;

class AsyncLifetimeTest : public AsyncTest {
 protected:
  redlimit::Options no_breaker() const {
    redlimit::Options o = call_each();
    o.breaker_threshold = 0;
    return o;
  }

  static void wait_handed(const AsyncRedis& redis, std::uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (redis.stats().commands < n) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the calls were never handed to hiredis";
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // Waits for every callback of `tally`, then checks none ran twice.
  static void expect_each_once(const std::shared_ptr<Tally>& tally, std::future<void>& all_done) {
    ASSERT_EQ(all_done.wait_for(kWait), std::future_status::ready) << tally->done << " of " << tally->expected;
    std::this_thread::sleep_for(50ms);
    std::lock_guard<std::mutex> lock(tally->mutex);
    EXPECT_EQ(tally->done, tally->expected) << "a callback ran twice";
  }

  // Five CLIENT KILLs, each under kLifetimeCalls calls in flight, with no command deadline.
  template <class Loop>
  void kill_cycles() {
    constexpr int kCycles = 5;
    Loop loop;
    auto tally = std::make_shared<Tally>(kCycles * kLifetimeCalls);
    std::future<void> all_done = tally->all_done.get_future();
    {
      AsyncOptions o;
      o.command_timeout = 0ms;
      auto redis = loop.attach(endpoint_of(server()), o);
      auto rl = redlimit::RateLimiter::connect(server().url(), no_breaker());
      rl.attach_async(redis);
      const auto fw = rl.fixed_window("async.cycles", Limit::per_minute(1000000));
      loop.start();
      for (int cycle = 0; cycle < kCycles; ++cycle) {
        auto id = command(*redis, {"CLIENT", "ID"});
        const Reply id_reply = get_within(id);
        ASSERT_EQ(id_reply.type, Reply::Type::integer);
        const auto handed = redis->stats().commands;
        for (int i = 0; i < kLifetimeCalls; ++i) {
          fw.consume_async("c", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
        }
        wait_handed(*redis, handed + 500);
        server().command({"CLIENT", "KILL", "ID", std::to_string(id_reply.integer)});
        const auto deadline = std::chrono::steady_clock::now() + kWait;
        while (true) {  // this cycle's calls all ended before the next kill
          {
            std::lock_guard<std::mutex> lock(tally->mutex);
            if (tally->done >= (cycle + 1) * kLifetimeCalls) break;
          }
          ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "cycle " << cycle << ": callbacks lost";
          std::this_thread::sleep_for(1ms);
        }
      }
      expect_each_once(tally, all_done);
    }
    loop.stop();
  }

  // kLifetimeCalls in flight, then `let_go` (which drops or closes the client); every callback runs once.
  template <class Loop, class LetGo>
  void let_go_in_flight(LetGo let_go) {
    Loop loop;
    auto tally = std::make_shared<Tally>(kLifetimeCalls);
    std::future<void> all_done = tally->all_done.get_future();
    std::weak_ptr<AsyncRedis> weak;
    {
      auto redis = loop.attach(endpoint_of(server()));
      weak = redis;
      {
        auto rl = redlimit::RateLimiter::connect(server().url(), no_breaker());
        rl.attach_async(redis);
        const auto fw = rl.fixed_window("async.lifetime", Limit::per_minute(100));
        loop.start();
        for (int i = 0; i < kLifetimeCalls; ++i) {
          fw.consume_async("l", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
        }
      }  // the limiter is gone: only `redis` and the calls in flight hold the AsyncRedis
      let_go(redis);
    }  // unless let_go kept it, the AsyncRedis is only held by the calls in flight
    expect_each_once(tally, all_done);
    loop.stop();
    EXPECT_TRUE(weak.expired());
  }

  template <class Loop>
  void drop_close_release() {
    // Dropped with the limiter: what was queued is still sent and decided.
    let_go_in_flight<Loop>([](std::shared_ptr<AsyncRedis>&) {});
    // close(): the same, and a call after it fails at once.
    let_go_in_flight<Loop>([](std::shared_ptr<AsyncRedis>& redis) {
      redis->close();
      auto after = command(*redis, {"PING"});
      EXPECT_THROW(get_within(after), redlimit::ConnectionError);
    });
    // Our reference released inside a callback, with the rest still in flight: the last one goes
    // with the last decision's callback, also inside a hiredis callback.
    let_go_in_flight<Loop>([](std::shared_ptr<AsyncRedis>& redis) {
      auto holder = std::make_shared<std::shared_ptr<AsyncRedis>>(std::move(redis));
      auto released = std::make_shared<std::promise<void>>();
      auto f = released->get_future();
      (*holder)->command_async(
          {"PING"}, [holder, released](const Reply&) { holder->reset(); released->set_value(); },
          [holder, released](std::exception_ptr) { holder->reset(); released->set_value(); });
      EXPECT_EQ(f.wait_for(kWait), std::future_status::ready);
    });
  }

  // close() then send_now() inside the reply callback of the last command in flight: send_now runs
  // inside hiredis's callback, where freeing the context (what closing with nothing in flight does)
  // is a use-after-free; the close is left to the loop. The call after it fails, as after any close.
  template <class Loop>
  void close_and_send_now_in_callback() {
    Loop loop;
    auto redis = loop.attach(endpoint_of(server()));
    loop.start();
    auto outcome = std::make_shared<std::promise<bool>>();
    auto replied = outcome->get_future();
    AsyncRedis* r = redis.get();
    redis->command_async(
        {"PING"},
        [r, outcome](const Reply&) {
          r->close();
          r->send_now();
          outcome->set_value(true);
        },
        [outcome](std::exception_ptr) { outcome->set_value(false); });
    ASSERT_EQ(replied.wait_for(kWait), std::future_status::ready);
    EXPECT_TRUE(replied.get()) << "the PING failed";
    auto after = command(*redis, {"PING"});
    EXPECT_THROW(get_within(after), redlimit::ConnectionError);
    loop.stop();
  }

  // post_after (the wait between the tries of a command a cluster asked to send again,
  // AsyncCluster): each task runs on the loop's thread, no sooner than its delay, in the order they
  // fall due whatever order they were queued in; a task still waiting when the connection closes
  // runs then, once.
  template <class Loop>
  void delayed_tasks() {
    using Clock = std::chrono::steady_clock;
    Loop loop;
    auto redis = loop.attach(endpoint_of(server()));
    loop.start();
    struct Ran {
      std::mutex mutex;
      std::vector<int> order;
      std::vector<Clock::duration> after;
      bool off_main = true;
      std::promise<void> three;
    };
    auto ran = std::make_shared<Ran>();
    const auto main_thread = std::this_thread::get_id();
    const auto t0 = Clock::now();
    const auto task = [ran, t0, main_thread](int id) {
      return [ran, t0, main_thread, id] {
        std::lock_guard<std::mutex> lock(ran->mutex);
        ran->order.push_back(id);
        ran->after.push_back(Clock::now() - t0);
        ran->off_main = ran->off_main && std::this_thread::get_id() != main_thread;
        if (ran->order.size() == 3) ran->three.set_value();
      };
    };
    auto three = ran->three.get_future();
    redis->post_after(120ms, task(2));
    redis->post_after(40ms, task(1));
    redis->post(task(0));
    ASSERT_EQ(three.wait_for(kWait), std::future_status::ready);
    {
      std::lock_guard<std::mutex> lock(ran->mutex);
      EXPECT_EQ(ran->order, (std::vector<int>{0, 1, 2}));
      EXPECT_GE(ran->after[1], 40ms);
      EXPECT_GE(ran->after[2], 120ms);
      EXPECT_TRUE(ran->off_main) << "a task ran on the thread that queued it";
    }
    EXPECT_THROW(redis->post_after(-1ms, [] {}), redlimit::InvalidArgument);
    auto late = std::make_shared<std::promise<Clock::duration>>();
    auto late_ran = late->get_future();
    const auto t1 = Clock::now();
    redis->post_after(std::chrono::hours(1), [late, t1] { late->set_value(Clock::now() - t1); });
    redis->close();
    ASSERT_EQ(late_ran.wait_for(kWait), std::future_status::ready) << "a waiting task was lost at close";
    loop.stop();
  }

  // A task that queues itself again at once, from the loop's thread, as a callback does that starts
  // the next call when its own ended without I/O (a breaker's short-circuit, under OnFailure::raise):
  // while it spins, a reply and a delayed task still come, long before kSpins turns. When the loop
  // ran such work in the turn that queued it, it never got back to its sockets and timers: a
  // cluster's async calls stalled with every breaker half-open, their probes' replies unread.
  template <class Loop>
  void self_queuing_work() {
    constexpr long kSpins = 2000000;
    struct Spin {
      std::atomic<long> turns{0};
      std::atomic<bool> replied{false}, delayed{false};
      std::promise<long> ended;
      std::function<void()> step;
    };
    Loop loop;
    auto redis = loop.attach(endpoint_of(server()));
    loop.start();
    auto spin = std::make_shared<Spin>();
    AsyncRedis* r = redis.get();
    spin->step = [weak = std::weak_ptr<Spin>(spin), r] {
      const auto s = weak.lock();
      if (!s) return;
      const long n = ++s->turns;
      if ((s->replied && s->delayed) || n >= kSpins) {
        s->ended.set_value(n);
        return;
      }
      r->post(s->step);
    };
    redis->post([spin, r] {  // on the loop's thread: from here on every post is the loop's own
      r->command_async(
          {"PING"}, [spin](const Reply&) { spin->replied = true; }, [](std::exception_ptr) {});
      r->post_after(20ms, [spin] { spin->delayed = true; });
      r->post(spin->step);
    });
    auto ended = spin->ended.get_future();
    ASSERT_EQ(ended.wait_for(kWait), std::future_status::ready);
    const long turns = ended.get();
    EXPECT_TRUE(spin->replied) << "no reply read in " << turns << " turns";
    EXPECT_TRUE(spin->delayed) << "no delayed task run in " << turns << " turns";
    EXPECT_LT(turns, kSpins);
    redis->close();
    loop.stop();
  }
};

#ifdef REDLIMIT_HAVE_LIBEVENT
TEST_F(AsyncLifetimeTest, LibeventKillCyclesLoseOrDoubleNoCallback) { kill_cycles<LibeventLoop>(); }
TEST_F(AsyncLifetimeTest, LibeventDropCloseAndReleaseInCallbackRunEveryCallbackOnce) {
  drop_close_release<LibeventLoop>();
}
TEST_F(AsyncLifetimeTest, LibeventCloseAndSendNowInTheLastCallbackLeaveTheCloseToTheLoop) {
  close_and_send_now_in_callback<LibeventLoop>();
}
TEST_F(AsyncLifetimeTest, LibeventDelayedTasksRunWhenDueInOrderAndAtClose) { delayed_tasks<LibeventLoop>(); }
TEST_F(AsyncLifetimeTest, LibeventWorkQueuedWithoutEndLeavesTheLoopItsSocketsAndTimers) {
  self_queuing_work<LibeventLoop>();
}
#endif

#ifdef REDLIMIT_HAVE_LIBUV
TEST_F(AsyncLifetimeTest, LibuvKillCyclesLoseOrDoubleNoCallback) { kill_cycles<LibuvLoop>(); }
TEST_F(AsyncLifetimeTest, LibuvDropCloseAndReleaseInCallbackRunEveryCallbackOnce) {
  drop_close_release<LibuvLoop>();
}
TEST_F(AsyncLifetimeTest, LibuvCloseAndSendNowInTheLastCallbackLeaveTheCloseToTheLoop) {
  close_and_send_now_in_callback<LibuvLoop>();
}
TEST_F(AsyncLifetimeTest, LibuvDelayedTasksRunWhenDueInOrderAndAtClose) { delayed_tasks<LibuvLoop>(); }
TEST_F(AsyncLifetimeTest, LibuvWorkQueuedWithoutEndLeavesTheLoopItsSocketsAndTimers) {
  self_queuing_work<LibuvLoop>();
}
#endif

}  // namespace
}  // namespace redlimit_test
