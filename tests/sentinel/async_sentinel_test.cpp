// Sentinel with the async client: AsyncRedis::attach_libevent / attach_libuv over a SentinelEndpoint
// (redis_async.hpp), against a real deployment (deployment.hpp): the master found by asking the
// sentinels (off the loop) and decided on, a kill -9 of the master followed to the promoted replica,
// a SENTINEL FAILOVER (the old master alive, demoted) followed, a failover's +switch-master
// announcement followed with no call made, the calls a demoted master refused sent again to the new
// one, no sentinel answering failing the waiting calls with a ConnectionError, and bad input refused
// before any I/O.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/transport/redis_async.hpp"
#include "sentinel/deployment.hpp"
#include "support/running_clock.hpp"

#ifdef REDLIMIT_HAVE_LIBEVENT
#include <event2/event.h>
#endif
#ifdef REDLIMIT_HAVE_LIBUV
#include <uv.h>
#endif

namespace {

using namespace std::chrono_literals;
using redlimit::AsyncRedis;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::OnFailure;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit_sentinel::Deployment;
using redlimit_sentinel::state_key;
using redlimit_sentinel::used_of;
using Steady = std::chrono::steady_clock;

Options raise_options() {
  Options o;
  o.on_failure = OnFailure::raise;  // every decision lost is an exception, seen by the test
  // One window for the whole test, on a clock that runs: the breaker stays as by default (5 failures,
  // 1 s), and its cooldown must pass. On a ManualClock that was never moved it did not: once, in CI,
  // a failover slow enough for five calls to fail opened it, and every call after was short-circuited
  // for the test's 30 s, the promoted replica found.
  o.clock = std::make_shared<redlimit_test::RunningClock>();
  o.connect_timeout = 300ms;
  o.command_timeout = 1000ms;
  return o;
}

redlimit::AsyncOptions async_options() {
  redlimit::AsyncOptions o;
  o.connect_timeout = 300ms;
  o.command_timeout = 1000ms;
  return o;
}

// One event loop (libevent, or libuv) on a thread of its own, with an AsyncRedis that follows the
// sentinels of `url`; the loop returns once that AsyncRedis is released.
class SentinelLoop {
 public:
  SentinelLoop(const std::string& url, bool libuv) {
    const auto sentinels = redlimit::parse_sentinel_url(url);
#ifdef REDLIMIT_HAVE_LIBUV
    if (libuv) {
      uv_ = std::make_unique<uv_loop_t>();
      uv_loop_init(uv_.get());
      redis_ = AsyncRedis::attach_libuv(uv_.get(), sentinels, async_options());
      thread_ = std::thread([l = uv_.get()] { uv_run(l, UV_RUN_DEFAULT); });
      return;
    }
#endif
#ifdef REDLIMIT_HAVE_LIBEVENT
    base_ = event_base_new();
    redis_ = AsyncRedis::attach_libevent(base_, sentinels, async_options());
    thread_ = std::thread([b = base_] { event_base_dispatch(b); });
#endif
    (void)libuv;
  }
  ~SentinelLoop() {
    redis_.reset();
    if (thread_.joinable()) thread_.join();
#ifdef REDLIMIT_HAVE_LIBEVENT
    if (base_ != nullptr) event_base_free(base_);
#endif
#ifdef REDLIMIT_HAVE_LIBUV
    if (uv_) uv_loop_close(uv_.get());
#endif
  }
  SentinelLoop(const SentinelLoop&) = delete;
  SentinelLoop& operator=(const SentinelLoop&) = delete;
  const std::shared_ptr<AsyncRedis>& redis() const { return redis_; }

 private:
#ifdef REDLIMIT_HAVE_LIBEVENT
  event_base* base_ = nullptr;
#endif
#ifdef REDLIMIT_HAVE_LIBUV
  std::unique_ptr<uv_loop_t> uv_;
#endif
  std::shared_ptr<AsyncRedis> redis_;
  std::thread thread_;
};

// A decision's outcome, waited for at most 10 s: true admitted, false rejected; `error` set instead
// when it threw.
bool decided(std::future<Decision>& f, std::string& error) {
  if (f.wait_for(10s) != std::future_status::ready) {
    error = "no answer within 10 s";
    return false;
  }
  try {
    return f.get().allowed;
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
}

std::string address(const redlimit_sentinel::Process& p) { return "127.0.0.1:" + std::to_string(p.port()); }

// Five calls on a limit of 3, on a loop of each kind over one deployment: one search, and the
// state on the master itself.
void decides_on_the_master(Deployment& d, bool libuv, const std::string& subject) {
  SentinelLoop loop(d.url(), libuv);
  auto limiter = RateLimiter::connect(d.url(), raise_options());
  limiter.attach_async(loop.redis());
  auto window = limiter.fixed_window("async-sentinel", Limit::per_hour(3));
  std::vector<std::future<Decision>> calls;
  for (int i = 0; i < 5; ++i) calls.push_back(window.consume_future(subject));
  int admitted = 0;
  for (auto& f : calls) {
    std::string error;
    if (decided(f, error)) ++admitted;
    EXPECT_EQ(error, "");
  }
  EXPECT_EQ(admitted, 3);
  EXPECT_EQ(loop.redis()->master(), address(d.master()));
  EXPECT_EQ(loop.redis()->stats().discoveries, 1u);  // five calls, one search
  EXPECT_EQ(used_of(d.master(), state_key(d.master(), subject)), 3);
}

#if defined(REDLIMIT_HAVE_LIBEVENT) || defined(REDLIMIT_HAVE_LIBUV)
TEST(AsyncSentinel, FindsTheMasterAndDecidesThere) {
  Deployment d;
#ifdef REDLIMIT_HAVE_LIBEVENT
  decides_on_the_master(d, false, "user-libevent");
#endif
#ifdef REDLIMIT_HAVE_LIBUV
  decides_on_the_master(d, true, "user-libuv");
#endif
}
#endif

#ifdef REDLIMIT_HAVE_LIBEVENT
// kill -9 of the master: the calls on it fail (ConnectionError, or their deadline), the next ones
// wait for a search, and once the sentinels have promoted the replica the calls are decided there.
TEST(AsyncSentinel, FollowsAKilledMasterToThePromotedReplica) {
  Deployment d;
  SentinelLoop loop(d.url(), false);
  auto limiter = RateLimiter::connect(d.url(), raise_options());
  limiter.attach_async(loop.redis());
  auto window = limiter.fixed_window("async-kill", Limit::per_hour(1000000));
  for (int i = 0; i < 10; ++i) {
    auto f = window.consume_future("hot");
    std::string error;
    ASSERT_TRUE(decided(f, error)) << error;
  }
  const std::string promoted = address(d.replica());
  d.master().kill9();
  const auto t0 = Steady::now();
  int errors = 0, after = 0;
  std::string first_error, last_error;  // both printed: the first says why the calls began to fail,
  double followed_ms = -1;              // the last why they still did when the test ended
  while (Steady::now() < t0 + 30s && after < 50) {
    auto f = window.consume_future("hot");
    std::string error;
    const bool ok = decided(f, error);
    if (!error.empty()) {
      if (errors++ == 0) first_error = error;
      last_error = error;
    }
    if (ok && loop.redis()->master() == promoted) {
      if (followed_ms < 0) followed_ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
      ++after;
    }
    if (!ok) std::this_thread::sleep_for(20ms);
  }
  std::printf(
      "async, kill -9 of the master: followed to the replica after %.0f ms, %d calls failed meanwhile "
      "(the first: %s; the last: %s), %llu searches\n",
      followed_ms, errors, first_error.c_str(), last_error.c_str(),
      static_cast<unsigned long long>(loop.redis()->stats().discoveries));
  ASSERT_EQ(after, 50) << "still on " << loop.redis()->master();
  EXPECT_GE(loop.redis()->stats().discoveries, 2u);
  EXPECT_GE(used_of(d.replica(), state_key(d.replica(), "hot")), 50);  // decided on the promoted replica
}

// SENTINEL FAILOVER: the old master stays up and is demoted under our open connection. It answers
// -READONLY (the connection is let go), or the periodic check finds the sentinels naming the
// replica first; either way the calls go to the new master, and none is counted twice.
TEST(AsyncSentinel, FollowsAManualFailover) {
  Deployment d;
  SentinelLoop loop(d.url(), false);
  auto limiter = RateLimiter::connect(d.url(), raise_options());
  limiter.attach_async(loop.redis());
  auto window = limiter.fixed_window("async-manual", Limit::per_hour(1000000));
  int admitted = 0;
  for (int i = 0; i < 10; ++i) {
    auto f = window.consume_future("hot");
    std::string error;
    ASSERT_TRUE(decided(f, error)) << error;
    ++admitted;
  }
  const std::string promoted = address(d.replica());
  ASSERT_EQ(d.sentinel(0).command({"SENTINEL", "FAILOVER", d.options().master_name}).str, "OK");
  const auto t0 = Steady::now();
  int errors = 0, after = 0, in_window = 0;
  double promoted_ms = -1, followed_ms = -1;
  while (Steady::now() < t0 + 30s && after < 50) {
    // The split-brain window: from the replica's promotion until the client follows. The replica is
    // asked before each call, so a call counted outside the window went out after we knew.
    try {  // the harness's own question; a server switching roles may drop it
      if (promoted_ms < 0 && d.replica().command({"ROLE"}).elements.at(0).str == "master") {
        promoted_ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
      }
    } catch (const redlimit::Error&) {
    }
    const bool window_open = promoted_ms >= 0 && followed_ms < 0;
    auto f = window.consume_future("hot");
    std::string error;
    if (decided(f, error)) {
      ++admitted;
      if (window_open) ++in_window;
    }
    if (!error.empty()) ++errors;
    if (error.empty() && loop.redis()->master() == promoted) {
      if (followed_ms < 0) followed_ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
      ++after;
    }
    std::this_thread::sleep_for(5ms);
  }
  const std::int64_t held = used_of(d.replica(), state_key(d.replica(), "hot"));
  std::printf(
      "async, SENTINEL FAILOVER: replica promoted after %.0f ms, followed after %.0f ms; %d admitted (%d in "
      "the split-brain window), %d failed; the new master holds %lld\n",
      promoted_ms, followed_ms, admitted, in_window, errors, static_cast<long long>(held));
  ASSERT_EQ(after, 50) << "still on " << loop.redis()->master();
  EXPECT_GE(loop.redis()->stats().discoveries, 2u);
  // Nothing counted twice, and the writes lost are those of the split-brain window (a few in flight
  // as it opened aside).
  EXPECT_LE(held, admitted);
  EXPECT_LE(admitted - held, in_window + 5);
  EXPECT_LE(errors, 10);
}

// +switch-master: with the periodic check off (sentinel_check_ms=0) and no call made after the
// failover, the sentinels' announcement alone moves the client to the promoted replica, and the
// next call is decided there.
TEST(AsyncSentinel, HearsTheSwitchAnnouncedWithNoCallMade) {
  Deployment d;
  SentinelLoop loop(d.url({}, "?sentinel_check_ms=0"), false);
  auto limiter = RateLimiter::connect(d.url(), raise_options());
  limiter.attach_async(loop.redis());
  auto window = limiter.fixed_window("async-announced", Limit::per_hour(1000000));
  auto first = window.consume_future("hot");
  std::string error;
  ASSERT_TRUE(decided(first, error)) << error;
  ASSERT_EQ(loop.redis()->master(), address(d.master()));
  ASSERT_TRUE(redlimit_sentinel::wait_for_units(d.replica(), "hot", 1, 10s)) << "not replicated within 10 s";
  // Two listeners: the limiter's SentinelConnection's, and the AsyncRedis's under test.
  ASSERT_TRUE(d.wait_for_subscribers(2, 10s)) << "not both subscriptions on the sentinels within 10 s";
  EXPECT_EQ(loop.redis()->stats().announcements, 0u);

  const std::string promoted = address(d.replica());
  ASSERT_EQ(d.sentinel(0).command({"SENTINEL", "FAILOVER", d.options().master_name}).str, "OK");
  const auto t0 = Steady::now();
  while (loop.redis()->master() != promoted && Steady::now() < t0 + 20s) std::this_thread::sleep_for(5ms);
  const double followed_ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
  std::printf("async, SENTINEL FAILOVER announced: followed after %.0f ms with no call made (%llu announcements)\n",
              followed_ms, static_cast<unsigned long long>(loop.redis()->stats().announcements));
  ASSERT_EQ(loop.redis()->master(), promoted);
  EXPECT_GE(loop.redis()->stats().announcements, 1u);
  EXPECT_EQ(loop.redis()->stats().discoveries, 2u);  // the first search, and the one the announcement started

  auto next = window.consume_future("hot");
  ASSERT_TRUE(decided(next, error)) << error;
  EXPECT_EQ(used_of(d.replica(), state_key(d.replica(), "hot")), 2);  // the replica had the first by replication
}

// A master demoted under the connection while calls are in flight, the sentinels naming the new
// master already and no announcement heard (the sentinels refuse SUBSCRIBE; the periodic check is
// off): each call the old master refuses with -READONLY (or -LOADING, while it loads the new
// master's data) ran nothing there, and is sent once more to the master the sentinels name. No call
// fails, and none is counted twice.
TEST(AsyncSentinel, CallsADemotedMasterRefusesAreSentAgainToTheNewOne) {
  Deployment d;
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(d.sentinel(i).command({"ACL", "SETUSER", "default", "-subscribe", "-psubscribe"}).str, "OK");
  }
  SentinelLoop loop(d.url({}, "?sentinel_check_ms=0"), false);
  auto limiter = RateLimiter::connect(d.url(), raise_options());
  limiter.attach_async(loop.redis());
  auto window = limiter.fixed_window("async-refused", Limit::per_hour(1000000));
  int admitted = 0, errors = 0;
  std::string first_error;
  auto wave = [&] {  // 64 calls in flight at once, then their outcomes
    std::vector<std::future<Decision>> calls;
    for (int i = 0; i < 64; ++i) calls.push_back(window.consume_future("hot"));
    for (auto& f : calls) {
      std::string error;
      if (decided(f, error)) ++admitted;
      if (!error.empty() && errors++ == 0) first_error = error;
    }
  };
  wave();
  ASSERT_EQ(loop.redis()->master(), address(d.master()));
  const std::string promoted = address(d.replica());
  ASSERT_EQ(d.sentinel(0).command({"SENTINEL", "FAILOVER", d.options().master_name}).str, "OK");
  const auto t0 = Steady::now();
  while (!d.wait_for_master(promoted, 10ms) && Steady::now() < t0 + 20s) wave();  // split brain: on the old one
  ASSERT_TRUE(d.wait_for_master(promoted, 1s));
  EXPECT_EQ(loop.redis()->stats().announcements, 0u);  // nothing told the client
  const int before = admitted;
  std::thread demote([&d] { d.master().command({"REPLICAOF", "127.0.0.1", std::to_string(d.replica().port())}); });
  const auto t1 = Steady::now();
  while (Steady::now() < t1 + 1500ms) wave();
  demote.join();
  const std::int64_t held = used_of(d.replica(), state_key(d.replica(), "hot"));
  std::printf(
      "async, master demoted under 64 calls in flight: %d admitted after the demotion began, %d failed (%s), "
      "%llu sent again, %llu searches; the new master holds %lld of %d\n",
      admitted - before, errors, first_error.c_str(), static_cast<unsigned long long>(loop.redis()->stats().resent),
      static_cast<unsigned long long>(loop.redis()->stats().discoveries), static_cast<long long>(held), admitted);
  EXPECT_EQ(errors, 0) << first_error;
  EXPECT_GE(loop.redis()->stats().resent, 1u);
  EXPECT_EQ(loop.redis()->master(), promoted);
  EXPECT_GT(held, 0);
  EXPECT_LE(held, admitted);  // nothing counted twice (the split brain's writes on the old master are lost)
}

// No sentinel answers: the calls waiting for the master fail with a ConnectionError that says so,
// within their deadline, and the loop stays free meanwhile (a task posted to it runs).
TEST(AsyncSentinel, NoSentinelAnsweringFailsTheWaitingCalls) {
  const std::string url = "redis-sentinel://127.0.0.1:" + std::to_string(redlimit_sentinel::refused_port()) +
                          ",127.0.0.1:" + std::to_string(redlimit_sentinel::refused_port()) + "/mymaster";
  SentinelLoop loop(url, false);
  const Options o = raise_options();
  auto conn = std::make_shared<redlimit::MemoryConnection>();  // the sync side is not under test
  RateLimiter limiter(conn, o);
  limiter.attach_async(loop.redis());
  auto window = limiter.fixed_window("async-none", Limit::per_hour(10));
  auto f = window.consume_future("user");
  std::promise<void> ran;
  auto posted = ran.get_future();
  loop.redis()->post([&ran] { ran.set_value(); });
  std::string error;
  EXPECT_FALSE(decided(f, error));
  EXPECT_NE(error.find("no master \"mymaster\" confirmed by the sentinels"), std::string::npos) << error;
  EXPECT_EQ(posted.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(loop.redis()->master(), "");
  EXPECT_EQ(loop.redis()->stats().connections, 0u);  // no data connection was opened
}

TEST(AsyncSentinel, BadInputIsRefusedBeforeAnyIo) {
  event_base* base = event_base_new();
  redlimit::SentinelEndpoint none;
  none.master_name = "mymaster";
  EXPECT_THROW(AsyncRedis::attach_libevent(base, none), redlimit::InvalidArgument);
  const auto good = redlimit::parse_sentinel_url("redis-sentinel://127.0.0.1:1/mymaster");
  redlimit::SentinelEndpoint unnamed = good;
  unnamed.master_name.clear();
  EXPECT_THROW(AsyncRedis::attach_libevent(base, unnamed), redlimit::InvalidArgument);
  EXPECT_THROW(AsyncRedis::attach_libevent(nullptr, good), redlimit::InvalidArgument);
  redlimit::AsyncOptions negative;
  negative.command_timeout = -1ms;
  EXPECT_THROW(AsyncRedis::attach_libevent(base, good, negative), redlimit::InvalidArgument);
  event_base_free(base);
}
#endif

}  // namespace
