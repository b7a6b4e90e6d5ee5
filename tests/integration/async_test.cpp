// The asynchronous API: Strategy::consume_async / consume_future over AsyncRedis, on a libevent or
// libuv loop running on a background thread. Every wait is bounded (futures with wait_for), and
// every test checks that its loop returns by itself once the AsyncRedis is gone (the loop thread is
// then joined; a loop that does not return is reported and abandoned, never waited for forever).
#include <csignal>
#include <cstdint>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "redlimit/transport/redis_async.hpp"
#include "support/fixture.hpp"

#ifdef REDLIMIT_HAVE_LIBEVENT
#include <event2/event.h>
#endif
#ifdef REDLIMIT_HAVE_LIBUV
#include <uv.h>
#endif

namespace redlimit_test {
namespace {

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
std::future<Reply> command(AsyncRedis& redis, std::vector<std::string> argv) {
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
std::string error_of(std::future<Decision>& f) {
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
      run();
      ended->set_value();
    });
    done_ = ended_->get_future();
  }

  std::thread::id id() const { return thread_.get_id(); }

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
  bool stopped_ = false;
};

Endpoint endpoint_of(RedisServer& server, int db = 0) { return redlimit::parse_url(server.url(db)); }

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

class AsyncTest : public RedisTest {
 protected:
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

// 10,000 decisions in flight on one connection, one subject, limit 1000, a clock that does not
// move: exactly 1000 admitted, each with a distinct `remaining`, every callback on the loop thread.
TEST_F(AsyncTest, TenThousandInFlightOnOneConnectionAdmitExactlyTheLimit) {
  constexpr int kCalls = 10000;
  constexpr std::int64_t kLimit = 1000;
  LibeventLoop loop;
  auto tally = std::make_shared<Tally>(kCalls);
  std::future<void> all_done = tally->all_done.get_future();
  {
    auto redis = loop.attach(endpoint_of(server()));
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async", Limit(kLimit, 1min));
    fw.consume("warm-up");  // loads the script, so that every async call is one EVALSHA
    loop.start();
    for (int i = 0; i < kCalls; ++i) {
      fw.consume_async("hot", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
    }
    ASSERT_EQ(all_done.wait_for(60s), std::future_status::ready) << "not every callback ran";

    std::lock_guard<std::mutex> lock(tally->mutex);
    EXPECT_TRUE(tally->errors.empty()) << tally->errors.front();
    EXPECT_EQ(tally->allowed, kLimit);
    EXPECT_EQ(tally->rejected, kCalls - kLimit);
    EXPECT_EQ(tally->remaining_when_allowed.size(), static_cast<std::size_t>(kLimit));  // 0..999, once each
    EXPECT_EQ(*tally->remaining_when_allowed.begin(), 0);
    EXPECT_EQ(*tally->remaining_when_allowed.rbegin(), kLimit - 1);
    EXPECT_EQ(tally->threads, std::set<std::thread::id>{loop.id()}) << "callbacks must run on the loop thread";

    const auto stats = redis->stats();
    EXPECT_EQ(stats.connections, 1u);
    EXPECT_EQ(stats.commands, static_cast<std::uint64_t>(kCalls));
    EXPECT_GT(stats.max_in_flight, 100u) << "the calls should be pipelined, many in flight";
    const auto c = rl.counters();
    EXPECT_EQ(c.decisions, static_cast<std::uint64_t>(kCalls + 1));
    EXPECT_EQ(c.allowed, static_cast<std::uint64_t>(kLimit + 1));
    EXPECT_EQ(c.rejected, static_cast<std::uint64_t>(kCalls - kLimit));
    EXPECT_EQ(c.errors, 0u);
    EXPECT_EQ(fw.peek("hot").remaining, 0);
  }
  loop.stop();
}

// With max_in_flight, the rest wait in the queue, in order, and go out as replies make room.
TEST_F(AsyncTest, MaxInFlightCapsWhatIsHandedToHiredis) {
  constexpr int kCalls = 500;
  LibeventLoop loop;
  auto tally = std::make_shared<Tally>(kCalls);
  std::future<void> all_done = tally->all_done.get_future();
  {
    AsyncOptions capped;
    capped.max_in_flight = 8;
    auto redis = loop.attach(endpoint_of(server()), capped);
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.cap", Limit(100, 1min));
    fw.consume("warm-up");
    loop.start();
    for (int i = 0; i < kCalls; ++i) {
      fw.consume_async("c", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
    }
    ASSERT_EQ(all_done.wait_for(60s), std::future_status::ready);
    std::lock_guard<std::mutex> lock(tally->mutex);
    EXPECT_TRUE(tally->errors.empty()) << tally->errors.front();
    EXPECT_EQ(tally->allowed, 100);
    EXPECT_EQ(tally->rejected, kCalls - 100);
    const auto stats = redis->stats();
    EXPECT_EQ(stats.commands, static_cast<std::uint64_t>(kCalls));
    EXPECT_LE(stats.max_in_flight, 8u);
    EXPECT_GE(stats.max_in_flight, 2u);
  }
  loop.stop();
}

// Several threads calling at once, on one AsyncRedis.
TEST_F(AsyncTest, ManyThreadsShareOneAsyncConnection) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 250;
  constexpr std::int64_t kLimit = 1000;
  LibeventLoop loop;
  auto tally = std::make_shared<Tally>(kThreads * kPerThread);
  std::future<void> all_done = tally->all_done.get_future();
  {
    auto redis = loop.attach(endpoint_of(server()));
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto tb = rl.token_bucket("async.mt", kLimit, kLimit, 1h);
    loop.start();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&tb, tally] {
        for (int i = 0; i < kPerThread; ++i) {
          tb.consume_async("shared", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
        }
      });
    }
    for (auto& th : threads) th.join();
    ASSERT_EQ(all_done.wait_for(60s), std::future_status::ready);
    std::lock_guard<std::mutex> lock(tally->mutex);
    EXPECT_TRUE(tally->errors.empty()) << tally->errors.front();
    EXPECT_EQ(tally->allowed, kLimit);
    EXPECT_EQ(tally->rejected, kThreads * kPerThread - kLimit);
    EXPECT_EQ(redis->stats().connections, 1u);
  }
  loop.stop();
}

TEST_F(AsyncTest, ConsumeFutureFromTheMainThread) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.future", Limit::per_minute(3));
    loop.start();
    auto first = fw.consume_future("u", 2);
    const Decision a = get_within(first);
    EXPECT_TRUE(a.allowed) << a;
    EXPECT_EQ(a.limit, 3);
    EXPECT_EQ(a.remaining, 1);
    EXPECT_EQ(a.source, Source::primary);
    auto second = fw.consume_future("u", 2);
    const Decision b = get_within(second);
    EXPECT_FALSE(b.allowed) << b;
    EXPECT_EQ(b.remaining, 1);
    EXPECT_EQ(b.retry_after, 60s);  // kT0 starts a window
    auto third = fw.consume_future("u");
    EXPECT_TRUE(get_within(third).allowed);
    // The async path and the sync path see the same state.
    EXPECT_EQ(fw.peek("u").remaining, 0);
  }
  loop.stop();
}

// After SCRIPT FLUSH the EVALSHA answers NOSCRIPT (and did not run): the call is re-sent once, as
// EVAL, and recorded once.
TEST_F(AsyncTest, NoscriptAfterScriptFlushIsResentOnceWithEval) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.noscript", Limit::per_minute(5));
    fw.consume("warm-up");  // the script is cached: the first async call is one EVALSHA
    loop.start();
    auto f1 = fw.consume_future("s");
    EXPECT_EQ(get_within(f1).remaining, 4);
    ASSERT_EQ(server().command({"SCRIPT", "FLUSH"}).type, Reply::Type::status);
    const auto evals_before = command_calls("eval");
    const auto shas_before = command_calls("evalsha");
    auto f2 = fw.consume_future("s");
    const Decision d = get_within(f2);
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 3) << "the NOSCRIPT attempt must not have been counted";
    EXPECT_EQ(command_calls("eval"), evals_before + 1);
    EXPECT_EQ(command_calls("evalsha"), shas_before + 1);
    auto f3 = fw.consume_future("s");  // cached again by the EVAL: back to EVALSHA
    EXPECT_EQ(get_within(f3).remaining, 2);
    EXPECT_EQ(command_calls("eval"), evals_before + 1);
    EXPECT_EQ(redis->stats().commands, 4u);  // EVALSHA, EVALSHA + EVAL, EVALSHA
  }
  loop.stop();
}

// The server kills the connection while commands wait for replies: each fails with ConnectionError
// (outcome unknown, nothing replayed), and the next call opens a new connection.
TEST_F(AsyncTest, ServerSideKillFailsPendingCallsAndTheNextCallReconnects) {
  LibeventLoop loop;
  {
    AsyncOptions slow;
    slow.command_timeout = 30s;  // the kill, not the deadline, must end the BLPOP
    auto redis = loop.attach(endpoint_of(server()), slow);
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.kill", Limit::per_minute(10));
    fw.consume("warm-up");
    loop.start();

    auto id = command(*redis, {"CLIENT", "ID"});
    const Reply id_reply = get_within(id);
    ASSERT_EQ(id_reply.type, Reply::Type::integer);
    // A blocked BLPOP holds the connection; the consume queued behind it is not run by the server.
    auto blocked = command(*redis, {"BLPOP", "redlimit-test:never", "25"});
    auto behind = fw.consume_future("k");
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (server().command({"CLIENT", "LIST", "ID", std::to_string(id_reply.integer)}).str.find("cmd=blpop") ==
           std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the BLPOP never reached the server";
      std::this_thread::sleep_for(1ms);
    }
    const Reply killed = server().command({"CLIENT", "KILL", "ID", std::to_string(id_reply.integer)});
    ASSERT_EQ(killed.type, Reply::Type::integer) << killed.str;
    ASSERT_EQ(killed.integer, 1);

    EXPECT_THROW(get_within(blocked), redlimit::ConnectionError);
    const std::string why = error_of<redlimit::ConnectionError>(behind);
    EXPECT_NE(why.find("connection"), std::string::npos) << why;
    EXPECT_EQ(rl.counters().errors, 1u);

    auto next = fw.consume_future("k");
    const Decision d = get_within(next);
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 9) << "the killed call must not have run, nor been replayed";
    const auto stats = redis->stats();
    EXPECT_EQ(stats.connections, 2u);
    EXPECT_EQ(stats.commands, 4u);  // CLIENT ID, BLPOP, the failed EVALSHA, the new one
  }
  loop.stop();
}

// A reply that does not come within command_timeout: TimeoutError for it and for what is queued
// behind it on the connection, which is dropped; the next call reconnects.
TEST_F(AsyncTest, CommandTimeoutFailsPendingCallsAndDropsTheConnection) {
  LibeventLoop loop;
  {
    AsyncOptions quick;
    quick.command_timeout = 200ms;
    auto redis = loop.attach(endpoint_of(server()), quick);
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.timeout", Limit::per_minute(10));
    fw.consume("warm-up");
    loop.start();
    const auto started = std::chrono::steady_clock::now();
    auto blocked = command(*redis, {"BLPOP", "redlimit-test:never", "5"});
    auto behind = fw.consume_future("t");
    EXPECT_THROW(get_within(blocked), redlimit::TimeoutError);
    error_of<redlimit::TimeoutError>(behind);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 3s) << "the deadline should fire after ~200 ms";

    auto next = fw.consume_future("t");
    EXPECT_TRUE(get_within(next).allowed);
    EXPECT_EQ(redis->stats().connections, 2u);
  }
  loop.stop();
}

// The failure policy answers for an unreachable server, and the breaker short-circuits: decisions
// made without Redis still arrive on the loop thread.
TEST_F(AsyncTest, FailurePolicyAndBreakerApplyToAsyncCalls) {
  LibeventLoop loop;
  {
    Endpoint nowhere = endpoint_of(server());
    nowhere.unix_path = server().dir() + "/no-such.sock";  // refused at once, every time
    auto redis = loop.attach(nowhere);
    redlimit::Options o = options();
    o.on_failure = redlimit::OnFailure::fail_open;
    o.breaker_threshold = 2;
    o.breaker_cooldown = 10s;
    auto rl = redlimit::RateLimiter::connect(server().url(), o);
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.down", Limit::per_minute(1));
    loop.start();
    std::set<std::thread::id> threads;
    for (int i = 0; i < 4; ++i) {  // one at a time: the breaker sees each failure before the next call
      auto p = std::make_shared<std::promise<std::pair<Decision, std::thread::id>>>();
      auto f = p->get_future();
      fw.consume_async("x", 1, [p](const Decision& d, std::exception_ptr e) {
        if (e) {
          p->set_exception(e);
        } else {
          p->set_value({d, std::this_thread::get_id()});
        }
      });
      const auto [d, thread] = get_within(f);
      EXPECT_TRUE(d.allowed) << d;
      EXPECT_EQ(d.source, Source::failure_policy);
      threads.insert(thread);
    }
    const auto c = rl.counters();
    EXPECT_EQ(c.errors, 2u);                  // then the breaker opened
    EXPECT_EQ(c.breaker_short_circuits, 2u);  // the other two: answered without trying Redis
    EXPECT_EQ(c.from_failure_policy, 4u);
    EXPECT_EQ(c.allowed, 4u);
    EXPECT_EQ(redis->stats().commands, 0u);
    EXPECT_EQ(threads, std::set<std::thread::id>{loop.id()}) << "decisions made without Redis too";
  }
  loop.stop();
}

// With OnFailure::raise the ConnectionError reaches the callback.
TEST_F(AsyncTest, UnreachableServerRaisesConnectionError) {
  LibeventLoop loop;
  {
    Endpoint nowhere = endpoint_of(server());
    nowhere.unix_path = server().dir() + "/no-such.sock";
    auto redis = loop.attach(nowhere);
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.down", Limit::per_minute(1));
    loop.start();
    auto f = fw.consume_future("x");
    error_of<redlimit::ConnectionError>(f);
    EXPECT_EQ(rl.counters().errors, 1u);
  }
  loop.stop();
}

// Local reject cache and shadow mode behave as in the synchronous path.
TEST_F(AsyncTest, LocalRejectCacheAndShadowModeApply) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    redlimit::Options cached = options();
    cached.local_reject_cache = true;
    auto rl = redlimit::RateLimiter::connect(server().url(), cached);
    rl.attach_async(redis);
    redlimit::Options shadow = options();
    shadow.shadow = true;
    auto rs = redlimit::RateLimiter::connect(server().url(), shadow);
    rs.attach_async(redis);
    const auto fw = rl.fixed_window("async.cache", Limit::per_minute(1));
    const auto sw = rs.fixed_window("async.shadow", Limit::per_minute(1));
    loop.start();

    auto a = fw.consume_future("c");
    EXPECT_TRUE(get_within(a).allowed);
    auto b = fw.consume_future("c");
    const Decision rejected = get_within(b);
    EXPECT_FALSE(rejected.allowed);
    EXPECT_EQ(rejected.source, Source::primary);
    const auto commands = redis->stats().commands;
    auto c = fw.consume_future("c");
    const Decision local = get_within(c);
    EXPECT_FALSE(local.allowed);
    EXPECT_EQ(local.source, Source::local_cache);
    EXPECT_EQ(local.retry_after, 60s);
    EXPECT_EQ(redis->stats().commands, commands) << "a cached rejection must not reach Redis";
    EXPECT_EQ(rl.counters().local_cache_hits, 1u);
    EXPECT_EQ(rl.counters().rejected, 2u);

    auto s1 = sw.consume_future("s");
    EXPECT_TRUE(get_within(s1).allowed);
    auto s2 = sw.consume_future("s");
    const Decision shadowed = get_within(s2);
    EXPECT_TRUE(shadowed.allowed);
    EXPECT_TRUE(shadowed.shadow_rejected);
    EXPECT_EQ(rs.counters().shadow_rejected, 1u);
  }
  loop.stop();
}

TEST_F(AsyncTest, SelectsTheDatabaseOfTheEndpoint) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server(), 3));
    loop.start();
    auto info = command(*redis, {"CLIENT", "INFO"});
    const Reply r = get_within(info);
    EXPECT_NE(r.str.find(" db=3 "), std::string::npos) << r.str;
  }
  loop.stop();
}

// AUTH goes first on every new connection; a refused AUTH fails the commands queued behind it.
TEST_F(AsyncTest, AuthenticatesWithTheEndpointCredentials) {
  ASSERT_EQ(server().command({"ACL", "SETUSER", "redlimit-async", "on", ">s3cret", "~*", "&*", "+@all"}).type,
            Reply::Type::status);
  struct DropUser {
    RedisServer& s;
    ~DropUser() { s.command({"ACL", "DELUSER", "redlimit-async"}); }
  } drop_user{server()};
  LibeventLoop loop;
  {
    Endpoint good = endpoint_of(server());
    good.username = "redlimit-async";
    good.password = "s3cret";
    Endpoint bad = good;
    bad.password = "wrong";
    auto ok = loop.attach(good);
    auto refused = loop.attach(bad);
    loop.start();
    auto who = command(*ok, {"ACL", "WHOAMI"});
    EXPECT_EQ(get_within(who).str, "redlimit-async");
    auto denied = command(*refused, {"PING"});
    try {
      get_within(denied);
      ADD_FAILURE() << "PING after a refused AUTH must fail";
    } catch (const redlimit::ConnectionError& e) {
      EXPECT_NE(std::string(e.what()).find("AUTH"), std::string::npos) << e.what();
    }
  }
  loop.stop();
}

// Bad input throws at once, on the calling thread, and nothing is queued or sent.
TEST_F(AsyncTest, InvalidArgumentIsThrownSynchronouslyAndNothingIsSent) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    const auto fw = rl.fixed_window("async.bad", Limit::per_minute(5));
    // No AsyncConnection yet.
    try {
      fw.consume_async("u", 1, [](const Decision&, std::exception_ptr) {});
      ADD_FAILURE() << "consume_async without attach_async must throw";
    } catch (const redlimit::InvalidArgument&) {
      ADD_FAILURE() << "not an InvalidArgument";
    } catch (const redlimit::Error& e) {
      EXPECT_NE(std::string(e.what()).find("attach_async"), std::string::npos) << e.what();
    }
    EXPECT_THROW(fw.consume_future("u"), redlimit::Error);
    rl.attach_async(redis);
    loop.start();
    const auto ignore = [](const Decision&, std::exception_ptr) { ADD_FAILURE() << "must never be called"; };
    EXPECT_THROW(fw.consume_async("u", 0, ignore), redlimit::InvalidArgument);
    EXPECT_THROW(fw.consume_async("u", 6, ignore), redlimit::InvalidArgument);
    EXPECT_THROW(fw.consume_async("", 1, ignore), redlimit::InvalidArgument);
    EXPECT_THROW(fw.consume_async(std::string(2000, 'x'), 1, ignore), redlimit::InvalidArgument);
    EXPECT_THROW(fw.consume_async("u", 1, nullptr), redlimit::InvalidArgument);
    EXPECT_THROW(fw.consume_future("u", -1), redlimit::InvalidArgument);
    EXPECT_THROW(fw.consume_future("", 1), redlimit::InvalidArgument);
    EXPECT_THROW(redis->command_async({}, [](Reply) {}, [](std::exception_ptr) {}), redlimit::InvalidArgument);
    // A round trip through the loop: anything queued before it would have been sent by now.
    auto ping = command(*redis, {"PING"});
    EXPECT_EQ(get_within(ping).str, "PONG");
    EXPECT_EQ(redis->stats().commands, 1u);
    EXPECT_EQ(dbsize(), 0);
    EXPECT_EQ(rl.counters().decisions, 0u);
  }
  loop.stop();
}

// close(): what was queued before is still answered, what comes after fails, then the loop returns.
TEST_F(AsyncTest, CloseLetsSentCommandsFinishAndFailsLaterOnes) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    loop.start();
    auto before = command(*redis, {"BLPOP", "redlimit-test:never", "0.2"});
    redis->close();
    auto after = command(*redis, {"PING"});
    EXPECT_EQ(get_within(before).type, Reply::Type::nil);  // the BLPOP timed out normally
    EXPECT_THROW(get_within(after), redlimit::ConnectionError);
    redis->close();  // idempotent
  }
  loop.stop();
}

// The last reference to the AsyncRedis may be released inside one of its own callbacks.
TEST_F(AsyncTest, ReleasingTheLastReferenceInsideACallbackIsSafe) {
  LibeventLoop loop;
  auto holder = std::make_shared<std::shared_ptr<AsyncRedis>>(loop.attach(endpoint_of(server())));
  std::weak_ptr<AsyncRedis> weak = *holder;
  loop.start();
  auto p = std::make_shared<std::promise<std::string>>();
  auto f = p->get_future();
  (*holder)->command_async(
      {"PING"},
      [holder, p](Reply r) {
        holder->reset();  // ~AsyncRedis inside a hiredis reply callback
        p->set_value(r.str);
      },
      [p](std::exception_ptr e) { p->set_exception(e); });
  holder.reset();
  EXPECT_EQ(get_within(f), "PONG");
  loop.stop();  // the loop returns by itself: its teardown ran on the loop
  EXPECT_TRUE(weak.expired());
}

#else  // no libevent in this build

TEST(AsyncRedisBuild, LibeventFactoryThrowsWithoutLibevent) {
  EXPECT_FALSE(AsyncRedis::has_libevent());
  EXPECT_THROW(AsyncRedis::attach_libevent(nullptr, Endpoint{}), redlimit::Error);
}

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

TEST_F(AsyncTest, LibuvAdapterDecidesExactlyAndStopsCleanly) {
  constexpr int kCalls = 1000;
  constexpr std::int64_t kLimit = 100;
  LibuvLoop loop;
  auto tally = std::make_shared<Tally>(kCalls - 1);
  std::future<void> all_done = tally->all_done.get_future();
  {
    auto redis = loop.attach(redlimit::parse_url(server().unix_url()));  // over the unix socket
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto sl = rl.sliding_log("async.uv", Limit(kLimit, 1min));
    loop.start();
    auto first = sl.consume_future("v", 1);
    EXPECT_EQ(get_within(first).remaining, kLimit - 1);
    for (int i = 1; i < kCalls; ++i) {
      sl.consume_async("v", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
    }
    ASSERT_EQ(all_done.wait_for(60s), std::future_status::ready);
    std::lock_guard<std::mutex> lock(tally->mutex);
    EXPECT_TRUE(tally->errors.empty()) << tally->errors.front();
    EXPECT_EQ(tally->allowed, kLimit - 1);
    EXPECT_EQ(tally->rejected, kCalls - kLimit);
    EXPECT_EQ(tally->threads, std::set<std::thread::id>{loop.id()});
    EXPECT_EQ(redis->stats().connections, 1u);
  }
  loop.stop();  // uv_loop_close() == 0: every handle of ours was closed
}

// Dropping a connection (a deadline) and losing one (a server-side kill) with libuv, whose handles
// close asynchronously.
TEST_F(AsyncTest, LibuvAdapterSurvivesATimeoutAndAKill) {
  LibuvLoop loop;
  {
    AsyncOptions quick;
    quick.command_timeout = 300ms;
    auto redis = loop.attach(endpoint_of(server()), quick);
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.uv2", Limit::per_minute(10));
    fw.consume("warm-up");
    loop.start();
    auto blocked = command(*redis, {"BLPOP", "redlimit-test:never", "5"});
    EXPECT_THROW(get_within(blocked), redlimit::TimeoutError);

    auto id = command(*redis, {"CLIENT", "ID"});
    const Reply id_reply = get_within(id);
    ASSERT_EQ(id_reply.type, Reply::Type::integer);
    ASSERT_EQ(server().integer({"CLIENT", "KILL", "ID", std::to_string(id_reply.integer)}), 1);
    // The kill is seen when the loop reads EOF; a call racing with it may fail (its outcome is
    // unknown), but one of the next few must go through on a new connection.
    Decision d;
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto f = fw.consume_future("w");
      try {
        d = get_within(f);
        break;
      } catch (const redlimit::TimeoutError&) {
        throw;
      } catch (const redlimit::ConnectionError&) {
      }
    }
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(redis->stats().connections, 3u);
  }
  loop.stop();
}

#else  // no libuv in this build

TEST(AsyncRedisBuild, LibuvFactoryThrowsWithoutLibuv) {
  EXPECT_FALSE(AsyncRedis::has_libuv());
  EXPECT_THROW(AsyncRedis::attach_libuv(nullptr, Endpoint{}), redlimit::Error);
}

#endif  // REDLIMIT_HAVE_LIBUV

}  // namespace
}  // namespace redlimit_test
