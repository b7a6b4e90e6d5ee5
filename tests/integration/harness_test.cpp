// The test harness itself: servers of our own, on free ports, gone when stopped.
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

TEST(Harness, SharedServerIsOursAndAnswers) {
  RedisServer& s = shared_server();
  EXPECT_TRUE(s.running());
  EXPECT_GT(s.port(), 0);
  EXPECT_EQ(s.url(), "redis://127.0.0.1:" + std::to_string(s.port()) + "/0");
  EXPECT_EQ(s.unix_url(), "unix://" + s.unix_path());
  EXPECT_EQ(s.unix_path(), s.dir() + "/redis.sock");
  const redlimit::Reply pong = s.command({"PING"});
  EXPECT_EQ(pong.str, "PONG");
  // Persistence is off: nothing the tests write outlives the server.
  const redlimit::Reply save = s.command({"CONFIG", "GET", "save"});
  ASSERT_EQ(save.elements.size(), 2u);
  EXPECT_EQ(save.elements[1].str, "");
  const redlimit::Reply aof = s.command({"CONFIG", "GET", "appendonly"});
  ASSERT_EQ(aof.elements.size(), 2u);
  EXPECT_EQ(aof.elements[1].str, "no");
  const redlimit::Reply info = s.command({"INFO", "server"});
  EXPECT_NE(info.str.find("process_id:" + std::to_string(s.pid()) + "\r\n"), std::string::npos);
  EXPECT_NE(info.str.find("tcp_port:" + std::to_string(s.port()) + "\r\n"), std::string::npos);
}

TEST(Harness, ExtraServersAreIndependentAndStopCleanly) {
  std::string dir;
  pid_t pid = -1;
  {
    RedisServer a;
    RedisServer b;
    EXPECT_NE(a.port(), b.port());
    EXPECT_NE(a.port(), shared_server().port());
    EXPECT_NE(a.dir(), b.dir());
    a.command({"SET", "only-in-a", "1"});
    EXPECT_EQ(a.dbsize(), 1);
    EXPECT_EQ(b.dbsize(), 0);

    auto limiter = redlimit::RateLimiter::connect(a.url());
    auto fw = limiter.fixed_window("harness", Limit::per_hour(5));
    EXPECT_TRUE(fw.consume("x").allowed);

    dir = b.dir();
    pid = b.pid();
    b.stop();
    EXPECT_FALSE(b.running());
    EXPECT_EQ(::kill(pid, 0), -1);
    EXPECT_EQ(errno, ESRCH);
    EXPECT_THROW(b.command({"PING"}), std::runtime_error);
    EXPECT_THROW(redlimit::RateLimiter::connect(b.url()), redlimit::ConnectionError);

    // A limiter whose server went away reports a ConnectionError (also a redlimit::Error).
    const std::string a_url = a.url();
    a.stop();
    EXPECT_THROW(fw.consume("x"), redlimit::ConnectionError);
    EXPECT_THROW(fw.peek("x"), redlimit::Error);
    EXPECT_TRUE(std::filesystem::exists(dir));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace redlimit_test
