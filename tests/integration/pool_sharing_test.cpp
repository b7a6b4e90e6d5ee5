// The pool's shared round trips (issue 13, PoolOptions::coalesce): calls in flight at the same
// moment from many threads leave in one write. Exactness under contention, several commands a
// round trip, the same decisions as unshared, a bad command failing only its own call, a stalled
// server ending every queued call by its own deadline with nothing sent twice, and a round trip
// that fails partway keeping the replies read before.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "redlimit/transport/connection_pool.hpp"
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::ConnectionPool;
using redlimit::Reply;

class PoolSharingTest : public RedisTest {
 protected:
  std::shared_ptr<ConnectionPool> pool(std::size_t size, bool coalesce,
                                       std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    redlimit::PoolOptions o;
    o.size = size;
    o.coalesce = coalesce;
    o.wait_timeout = timeout;
    return std::make_shared<ConnectionPool>(redlimit::parse_url(server().url()), timeout, timeout, o);
  }

  // `threads` threads consume one hot subject `each` times through a limiter over `conn`; returns
  // the admissions. The test's clock, held still: every decision falls in one window. Each consume
  // is a script call of its own (share_script_calls off), so that what is shared is round trips:
  // the pool's doing (shared script calls are tests/integration/sync_lane_test.cpp's).
  long long hammer(const std::shared_ptr<ConnectionPool>& conn, int threads, int each, std::int64_t limit) {
    redlimit::Options o = options();
    o.share_script_calls = false;
    const redlimit::RateLimiter l(conn, o);
    const auto fw = l.fixed_window("sharing", redlimit::Limit::per_hour(limit));
    std::atomic<long long> admitted{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&] {
        for (int i = 0; i < each; ++i) admitted += fw.consume("hot").allowed ? 1 : 0;
      });
    }
    for (auto& t : ts) t.join();
    return admitted;
  }
};

TEST_F(PoolSharingTest, SixteenThreadsOnTwoConnectionsAreExactAndShareRoundTrips) {
  auto p = pool(2, true);
  EXPECT_EQ(hammer(p, 16, 500, 3000), 3000);
  const ConnectionPool::Stats s = p->stats();
  const double per_trip = static_cast<double>(s.commands) / static_cast<double>(s.round_trips);
  std::printf("[ figures ] 16 threads x 500 consumes on a pool of 2: %llu commands in %llu round trips (%.2f each)\n",
              static_cast<unsigned long long>(s.commands), static_cast<unsigned long long>(s.round_trips), per_trip);
  EXPECT_GE(s.commands, 16u * 500u);
  EXPECT_GT(per_trip, 1.5) << "concurrent calls did not share round trips";
  EXPECT_LE(p->open_connections(), 2u);
}

TEST_F(PoolSharingTest, UnsharedMakesARoundTripPerCommand) {
  auto p = pool(2, false);
  EXPECT_EQ(hammer(p, 8, 200, 1000), 1000);
  // One round trip a call (the first calls also carry the Functions library's LOAD).
  EXPECT_EQ(p->stats().round_trips, 8u * 200u);
}

TEST_F(PoolSharingTest, EachCallerGetsItsOwnRepliesInOrder) {
  auto p = pool(2, true);
  std::vector<std::thread> ts;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      const std::string key = "sharing:echo:" + std::to_string(t);
      for (int i = 0; i < 300; ++i) {
        const std::string v = std::to_string(t * 1000 + i);
        const auto replies = p->pipeline({{"SET", key, v}, {"GET", key}, {"ECHO", v}});
        if (replies.size() != 3 || replies[1].str != v || replies[2].str != v) ++wrong;
        if (p->command({"ECHO", v}).str != v) ++wrong;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong, 0);
  server().command({"DEL", "sharing:echo:0"});
}

TEST_F(PoolSharingTest, AnErrorReplyStaysWithItsCaller) {
  auto p = pool(1, true);
  std::vector<std::thread> ts;
  std::atomic<int> errors{0}, oks{0};
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (t == 0) {
          errors += p->command({"INCR", "sharing:notanumber-" + std::to_string(i) + "x", "extra"}).is_error() ? 1 : 0;
        } else {
          oks += p->command({"PING"}).str == "PONG" ? 1 : 0;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors, 200);
  EXPECT_EQ(oks, 600);
  EXPECT_THROW(p->pipeline({{"PING"}, {}}), redlimit::InvalidArgument);
}

TEST_F(PoolSharingTest, AStalledServerEndsQueuedCallsByTheirDeadlineAndSendsNothingTwice) {
  constexpr auto kDeadline = std::chrono::milliseconds(300);
  auto p = pool(1, true, kDeadline);
  redlimit::Options o = options();
  o.command_timeout = kDeadline;
  o.breaker_threshold = 0;
  const redlimit::RateLimiter l(p, o);
  const auto fw = l.fixed_window("stall", redlimit::Limit::per_hour(1000000));
  fw.consume("warm-up");
  // When the server answered again: a call that ended by its own deadline ended before that.
  std::atomic<std::int64_t> awake_ns{0};
  std::thread sleeper([this, &awake_ns] {
    server().command({"DEBUG", "SLEEP", "1"});
    awake_ns = std::chrono::steady_clock::now().time_since_epoch().count();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the server is asleep now
  std::atomic<int> timeouts{0}, other{0};
  std::atomic<long long> worst_ms{0};
  std::atomic<std::int64_t> last_end_ns{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t) {
    ts.emplace_back([&] {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        fw.consume("s");
        ++other;
      } catch (const redlimit::TimeoutError&) {
        ++timeouts;
      } catch (...) {
        ++other;
      }
      const auto t1 = std::chrono::steady_clock::now();
      const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(t1 - t0).count();
      const std::int64_t end_ns = t1.time_since_epoch().count();
      std::int64_t e = last_end_ns;
      while (end_ns > e && !last_end_ns.compare_exchange_weak(e, end_ns)) {
      }
      long long w = worst_ms;
      while (ms > w && !worst_ms.compare_exchange_weak(w, ms)) {
      }
    });
  }
  for (auto& t : ts) t.join();
  sleeper.join();
  std::printf("[ figures ] 6 calls on a pool of 1, server asleep 1 s, deadline 300 ms: %d timeouts, worst %lld ms\n",
              timeouts.load(), worst_ms.load());
  EXPECT_EQ(timeouts, 6);
  EXPECT_EQ(other, 0);
  // Each call ended by its own deadline (300 ms after it began, 100 ms into the second-long sleep),
  // not by the server's answer: the last of them ended before the server woke. A wall-clock bound
  // here (300 ms plus a margin) would fail a slow or sanitized run that honoured every deadline.
  EXPECT_LT(last_end_ns.load(), awake_ns.load()) << "a queued call waited for the server, past its deadline";
  EXPECT_GE(worst_ms, 200) << "a call gave up long before its deadline";
  // What reached Redis ran at most once: "s" has at most the calls that were sent, never more.
  std::this_thread::sleep_for(std::chrono::milliseconds(900));  // the server is awake again
  EXPECT_LE(fw.peek("s").limit - fw.peek("s").remaining, 6);
}

// A shared round trip that fails partway: a later caller's command outlives the round trip's
// deadline (the earliest of its callers'). Redis writes the first reply when the blocking command
// blocks, as it answers the first part of a long pipeline before it reads the rest. The caller whose
// reply was read gets it, as it would have alone; only the stalled caller gets the error, and
// nothing is sent twice.
TEST_F(PoolSharingTest, ACallAnsweredBeforeItsRoundTripFailedKeepsItsReply) {
  using std::chrono::milliseconds;
  auto p = pool(1, true, milliseconds(1000));
  std::thread busy([&] { p->command({"DEBUG", "SLEEP", "0.5"}); });  // holds the one connection
  std::this_thread::sleep_for(milliseconds(100));
  Reply answered;
  std::string answered_error;
  std::thread first([&] {
    try {
      answered = p->command({"INCR", "partial:a"});
    } catch (const redlimit::Error& e) {
      answered_error = e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(100));  // both queued, `first` first
  bool timed_out = false;
  std::thread second([&] {
    try {
      p->command({"BLPOP", "partial:empty", "2"});  // answered 2 s on: past the round trip's deadline
    } catch (const redlimit::TimeoutError&) {
      timed_out = true;
    }
  });
  busy.join();
  first.join();
  second.join();
  EXPECT_EQ(p->stats().round_trips, 2u) << "the two queued calls did not share a round trip";
  EXPECT_EQ(answered_error, "");
  EXPECT_EQ(answered.integer, 1);
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(server().command({"GET", "partial:a"}).str, "1");  // sent once
}

// A pipeline in two halves (ConnectionPool::send_only, what a cluster batch sends each master):
// the commands are on the server before any reply is read; replies read back in order; a Sent
// dropped unread takes its connection's replies with it, so the next caller on that connection
// reads its own reply, not the abandoned ones.
TEST_F(PoolSharingTest, ASentPipelineRunsBeforeItsRepliesAreReadAndUnreadRepliesAreNeverSomeoneElses) {
  auto p = pool(1, true);
  {
    auto sent = p->send_only({{"SET", "halves:a", "1"}, {"INCR", "halves:a"}});
    // Another connection sees the writes while the replies still wait on ours.
    redlimit::RedisConnection other(redlimit::parse_url(server().url()), std::chrono::seconds(5),
                                    std::chrono::seconds(5));
    Reply seen;
    for (int i = 0; i < 200 && seen.str != "2"; ++i) {
      seen = other.command({"GET", "halves:a"});
      if (seen.str != "2") std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(seen.str, "2");
    std::vector<Reply> replies;
    sent.receive(replies);
    ASSERT_EQ(replies.size(), 2u);
    EXPECT_EQ(replies[0].str, "OK");
    EXPECT_EQ(replies[1].integer, 2);
    EXPECT_THROW(sent.receive(replies), redlimit::InvalidArgument);
  }
  { auto abandoned = p->send_only({{"ECHO", "not yours"}, {"ECHO", "nor this"}}); }
  EXPECT_EQ(p->command({"ECHO", "mine"}).str, "mine");
  EXPECT_EQ(p->pipeline({{"ECHO", "one"}, {"ECHO", "two"}})[1].str, "two");
  EXPECT_EQ(p->open_connections(), 1u);
  EXPECT_THROW(p->send_only({{"ECHO", "x"}, {}}), redlimit::InvalidArgument);
  EXPECT_EQ(p->command({"ECHO", "after"}).str, "after");
}

}  // namespace
}  // namespace redlimit_test
