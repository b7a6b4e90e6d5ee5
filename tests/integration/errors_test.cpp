// Transport failures: a command deadline is a TimeoutError (a ConnectionError), the connection is
// dropped, and the next call reconnects; a decision whose outcome is unknown is never replayed.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class ErrorsTest : public StrictRedisTest {
 protected:
  void TearDown() override {
    server().command({"CLIENT", "UNPAUSE"});
    StrictRedisTest::TearDown();
  }
};

TEST_F(ErrorsTest, CommandDeadlineIsATimeoutAndTheNextCallReconnects) {
  redlimit::Options o = options();
  o.command_timeout = std::chrono::milliseconds(200);
  auto limiter = redlimit::RateLimiter::connect(server().url(), o);
  auto fw = limiter.fixed_window("timeout", Limit(5, 1h));
  at(0s);
  EXPECT_EQ(fw.consume("u").remaining, 4);
  // Scripts may write, so the server holds them back while writes are paused.
  ASSERT_EQ(server().command({"CLIENT", "PAUSE", "20000", "WRITE"}).str, "OK");
  EXPECT_THROW(fw.consume("u"), redlimit::TimeoutError);
  EXPECT_THROW(fw.peek("u"), redlimit::ConnectionError);
  ASSERT_EQ(server().command({"CLIENT", "UNPAUSE"}).str, "OK");
  // A fresh connection; the timed-out consume may or may not have run, and was not replayed.
  const Decision d = fw.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_GE(d.remaining, 2) << d;
  EXPECT_LE(d.remaining, 3) << d;
}

TEST_F(ErrorsTest, UnreachableServerIsAConnectionError) {
  int port = 0;
  {
    RedisServer gone;
    port = gone.port();
  }
  EXPECT_THROW(redlimit::RateLimiter::connect("redis://127.0.0.1:" + std::to_string(port) + "/0", options()),
               redlimit::ConnectionError);
}

TEST_F(ErrorsTest, ServerSideDisconnectIsAConnectionErrorThenReconnects) {
  auto extra = std::make_unique<RedisServer>();
  auto limiter = redlimit::RateLimiter::connect(extra->url(), options());
  auto sl = limiter.sliding_log("restart", Limit(3, 1h));
  at(0s);
  EXPECT_EQ(sl.consume("u").remaining, 2);
  // Kill the connection from the server side: the next call fails, the one after reconnects.
  extra->command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  bool failed_once = false;
  try {
    sl.consume("u");
  } catch (const redlimit::ConnectionError&) {
    failed_once = true;
  }
  EXPECT_TRUE(failed_once);
  const Decision d = sl.consume("u");
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, 1) << d;  // the failed call never reached the script
}

}  // namespace
}  // namespace redlimit_test
