// The asynchronous API on libevent when things go wrong: a killed connection, deadlines, the failure
// policy and the breaker, an unreachable server, the reject cache and shadow mode, bad input, close
// and release from a callback (fixture: async_fixture.hpp).
#include <atomic>

#include "integration/async_fixture.hpp"

namespace redlimit_test {
namespace {

#ifdef REDLIMIT_HAVE_LIBEVENT

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
    // The consume must be on the wire, behind the BLPOP, before the kill: the loop hands queued
    // commands to hiredis when it wakes, and one still queued at the kill would go out later on the
    // new connection (and be decided there). CLIENT ID and BLPOP are the first two.
    while (redis->stats().commands < 3) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the consume was never handed to hiredis";
      std::this_thread::sleep_for(1ms);
    }
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

// -READONLY: the server turned replica under the connection (a failover demotes a master). The call
// gets the refusal (an outage, for its failure policy); the connection is let go once its commands
// have answered, and the next call opens a new one, which resolves the host name again (a managed
// Redis moves its primary endpoint's name to the promoted replica). Before, the connection to the
// old node stayed, and every call was refused for as long as it lived.
TEST_F(AsyncTest, AReplicasRefusalMakesTheNextCallConnectAgain) {
  LibeventLoop loop;
  {
    redlimit::Options o = options();
    o.on_failure = redlimit::OnFailure::fail_open;
    o.breaker_threshold = 0;  // every call reaches the server
    auto warmed = warm_fixed_window(loop, "async.readonly", o);
    const auto before = warmed.redis->stats().connections;
    struct Master {  // the shared server is a master again whatever happens below
      RedisServer& s;
      ~Master() { s.command({"REPLICAOF", "NO", "ONE"}); }
    } restore{server()};
    ASSERT_FALSE(server().command({"CONFIG", "SET", "replica-serve-stale-data", "yes"}).is_error());
    ASSERT_FALSE(server().command({"REPLICAOF", "127.0.0.1", "1"}).is_error());  // no master there: stale
    auto refused = warmed.fw.consume_future("u");
    EXPECT_EQ(get_within(refused).source, Source::failure_policy);
    ASSERT_FALSE(server().command({"REPLICAOF", "NO", "ONE"}).is_error());
    auto after = warmed.fw.consume_future("u");
    const Decision d = get_within(after);
    EXPECT_EQ(d.source, Source::primary) << d;
    EXPECT_EQ(d.remaining, 1000 - 1) << d;  // the refused call recorded nothing
    EXPECT_EQ(warmed.redis->stats().connections, before + 1) << "the refused connection was used again";
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

    // The next call's own 200 ms deadline counts from when it is queued: a loaded box (TSan) that
    // stalls the loop longer fails it in the queue, never sent and with no connection opened. One
    // of the next few must go through, on a new connection.
    Decision d;
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto next = fw.consume_future("t");
      try {
        d = get_within(next);
        break;
      } catch (const redlimit::TimeoutError&) {
      }
    }
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(redis->stats().connections, 2u);
  }
  loop.stop();
}

// The failure policy answers for an unreachable server, and the breaker short-circuits: decisions
// made without Redis still arrive on the loop thread.
TEST_F(AsyncTest, FailurePolicyAndBreakerApplyToAsyncCalls) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(refusing_endpoint(server()));  // refused at once, every time
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
    auto redis = loop.attach(refusing_endpoint(server()));  // refused at once, every time
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

// Connections killed again and again while a chain of merged calls runs (64 in flight, each caller
// starting the next from its callback, the first half's calls written from inside the merged reply's
// callback: AsyncConnection::send_now): every call gets exactly one callback, those cut off fail
// (outcome unknown, nothing replayed: at most the limit is admitted), and the chain ends.
TEST_F(AsyncTest, KilledConnectionsUnderAChainOfMergedCallsFailCallsOnceEach) {
  LibeventLoop loop;
  {
    redlimit::Options o = options();
    o.breaker_threshold = 0;  // every call goes to Redis, through every kill
    auto [redis, rl, fw] = warm_fixed_window(loop, "async.chain.kill", o);
    std::atomic<bool> stop{false};
    int kills = 0;
    std::thread killer([&] {
      for (int i = 0; i < 2000 && !stop.load(); ++i) {  // 10 s at most; the main thread only waits
        std::this_thread::sleep_for(5ms);
        const Reply r = server().command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
        if (r.type == Reply::Type::integer && r.integer > 0) ++kills;
      }
    });
    std::shared_ptr<Chain> chain;
    EXPECT_NO_THROW(chain = run_chain(*redis, fw, 50000, 64));
    stop = true;
    killer.join();
    ASSERT_TRUE(chain);
    std::lock_guard<std::mutex> lock(chain->mutex);
    EXPECT_EQ(chain->done, 50000);
    EXPECT_EQ(chain->decisions.size(), 50000u);
    std::int64_t admitted = 0;
    for (const Decision& d : chain->decisions) admitted += d.allowed && d.source == Source::primary ? 1 : 0;
    EXPECT_LE(admitted, 1000);
    EXPECT_GT(kills, 0);
    EXPECT_GT(chain->errors, 0) << "no call was cut off by " << kills << " kills";
  }
  loop.stop();
}

#endif  // REDLIMIT_HAVE_LIBEVENT

}  // namespace
}  // namespace redlimit_test
