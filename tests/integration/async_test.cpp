// The asynchronous API on libevent: exact decisions with thousands in flight, many threads on one
// connection, futures, NOSCRIPT, database and credentials (fixture: async_fixture.hpp).
#include "integration/async_fixture.hpp"

namespace redlimit_test {
namespace {

#ifdef REDLIMIT_HAVE_LIBEVENT

// 10,000 decisions in flight on one connection, one subject, limit 1000, a clock that does not
// move: exactly 1000 admitted, each with a distinct `remaining`, every callback on the loop thread.
TEST_F(AsyncTest, TenThousandInFlightOnOneConnectionAdmitExactlyTheLimit) {
  constexpr int kCalls = 10000;
  constexpr std::int64_t kLimit = 1000;
  LibeventLoop loop;
  auto tally = std::make_shared<Tally>(kCalls);
  std::future<void> all_done = tally->all_done.get_future();
  {
    // Each call's deadline runs from when it is queued, all before the loop runs: a loaded box (or
    // TSan) may take longer than the default 1 s for the last of 10,000, and none may fail here.
    AsyncOptions patient;
    patient.command_timeout = 30s;
    auto redis = loop.attach(endpoint_of(server()), patient);
    auto rl = redlimit::RateLimiter::connect(server().url(), call_each());
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async", Limit(kLimit, 1min));
    fw.consume("warm-up");  // loads the script, so that every async call is one EVALSHA
    // Queued before the loop runs, so the loop takes them all at once and pipelines them: started
    // first, a fast loop could answer each call before the next was queued (94 in flight was seen).
    for (int i = 0; i < kCalls; ++i) {
      fw.consume_async("hot", 1, [tally](const Decision& d, std::exception_ptr e) { tally->record(d, e); });
    }
    loop.start();
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
    auto rl = redlimit::RateLimiter::connect(server().url(), call_each());
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

// After SCRIPT FLUSH the EVALSHA answers NOSCRIPT (and did not run): the connection reloads the
// script once (SCRIPT LOAD) and the call sends its EVALSHA again, behind the LOAD; it is recorded
// once. (async_noscript_test.cpp: one reload for thousands of calls.)
TEST_F(AsyncTest, NoscriptAfterScriptFlushReloadsOnceAndResendsEvalsha) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    redlimit::Options evalsha = options();
    evalsha.redis_functions = false;  // the EVALSHA path; functions_test.cpp has the other
    auto rl = redlimit::RateLimiter::connect(server().url(), evalsha);
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("async.noscript", Limit::per_minute(5));
    fw.consume("warm-up");  // the script is cached: the first async call is one EVALSHA
    loop.start();
    auto f1 = fw.consume_future("s");
    EXPECT_EQ(get_within(f1).remaining, 4);
    ASSERT_EQ(server().command({"SCRIPT", "FLUSH"}).type, Reply::Type::status);
    const auto evals_before = command_calls("eval");
    const auto shas_before = command_calls("evalsha");
    const auto loads_before = command_calls("script|load");
    auto f2 = fw.consume_future("s");
    const Decision d = get_within(f2);
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 3) << "the NOSCRIPT attempt must not have been counted";
    EXPECT_EQ(command_calls("eval"), evals_before);
    EXPECT_EQ(command_calls("script|load"), loads_before + 1);
    EXPECT_EQ(command_calls("evalsha"), shas_before + 2);
    auto f3 = fw.consume_future("s");  // cached again by the LOAD: one EVALSHA
    EXPECT_EQ(get_within(f3).remaining, 2);
    EXPECT_EQ(command_calls("script|load"), loads_before + 1);
    EXPECT_EQ(redis->stats().commands, 5u);  // EVALSHA, EVALSHA + SCRIPT LOAD + EVALSHA, EVALSHA
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
      EXPECT_NE(std::string(e.what()).find("AUTH as user \"redlimit-async\""), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("wrong"), std::string::npos) << e.what();
    }
  }
  loop.stop();
}

#else  // not in this build

TEST(AsyncRedisBuild, LibeventFactoryThrowsWithoutLibevent) {
  EXPECT_FALSE(AsyncRedis::has_libevent());
  EXPECT_THROW(AsyncRedis::attach_libevent(nullptr, Endpoint{}), redlimit::Error);
}

#endif  // REDLIMIT_HAVE_LIBEVENT

}  // namespace
}  // namespace redlimit_test
