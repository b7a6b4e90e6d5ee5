// Connecting over the server's unix socket: decisions work and share state with TCP clients; the
// ?db= parameter selects the database.
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class UnixSocketTest : public StrictRedisTest {};

TEST_F(UnixSocketTest, DecidesAndSharesStateWithTcpClients) {
  auto over_unix = redlimit::RateLimiter::connect(server().unix_url(), options());
  at(0s);
  for (const auto& s : all_strategies(over_unix, "unix", 3, 1h)) {
    SCOPED_TRACE(s.name);
    const Decision d = s.consume("u", 2);
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 1) << d;
  }
  // The same state, seen over TCP.
  for (const auto& s : all_strategies(rl(), "unix", 3, 1h)) {
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(s.consume("u", 1).allowed);
    EXPECT_FALSE(s.peek("u", 1).allowed);
  }
  EXPECT_EQ(dbsize(), 6);
}

TEST_F(UnixSocketTest, DatabaseParameterSelectsTheDatabase) {
  auto db3 = redlimit::RateLimiter::connect(server().unix_url() + "?db=3", options());
  at(0s);
  auto fw = db3.fixed_window("unix", Limit(1, 1h));
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_FALSE(fw.consume("u").allowed);
  EXPECT_EQ(dbsize(), 0);  // nothing in db 0
  redlimit::RedisConnection raw(redlimit::parse_url(server().url(3)), std::chrono::milliseconds(5000),
                                std::chrono::milliseconds(5000));
  EXPECT_EQ(raw.command({"DBSIZE"}).integer, 1);
  EXPECT_EQ(raw.command({"EXISTS", fw.key_for("u")}).integer, 1);
  // And the same subject in db 0 is untouched.
  EXPECT_TRUE(rl().fixed_window("unix", Limit(1, 1h)).consume("u").allowed);
}

TEST_F(UnixSocketTest, MissingSocketIsAConnectionError) {
  EXPECT_THROW(redlimit::RateLimiter::connect("unix://" + server().dir() + "/no-such.sock", options()),
               redlimit::ConnectionError);
}

}  // namespace
}  // namespace redlimit_test
