// A host name is resolved within the connect's time (src/hiredis/name_lookup.hpp). hiredis's own
// connect called getaddrinfo, which waits as long as the system's resolver does: with a DNS server
// that does not answer, glibc's defaults (5 s, 2 attempts, each server in turn) hold a connect 10 s
// or more whatever connect_timeout and the call's deadline say, and an async client's event loop
// with it. The resolver here is the test's own (tests/support/fake_resolver.hpp): one that asks
// getaddrinfo and counts, one for which every name is unknown, or one that hangs for 10 s. The
// connects themselves go to the suite's real redis-server.
#include <gtest/gtest.h>
#include <netdb.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>

#include "integration/async_fixture.hpp"
#include "redlimit/redlimit.hpp"
#include "support/fake_resolver.hpp"

namespace redlimit_test {
namespace {

using Steady = std::chrono::steady_clock;

constexpr auto kConnectTimeout = 200ms;
constexpr auto kBound = 1500ms;  // a connect's failure comes within this, where it took the 10 s hang

std::chrono::milliseconds since(Steady::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0);
}

class NameLookupTest : public RedisTest {
 protected:
  std::string url_of(const std::string& host) {
    return "redis://" + host + ":" + std::to_string(server().port()) + "/0";
  }

  redlimit::Options quick() const {
    redlimit::Options o = options();
    o.connect_timeout = kConnectTimeout;
    o.command_timeout = kConnectTimeout;
    o.on_failure = redlimit::OnFailure::raise;
    o.breaker_threshold = 0;  // every call connects anew: the test sees each one
    return o;
  }

  // A limiter on `host` (made anew: its first call connects), and that call's decision.
  redlimit::Decision consume_once(const std::string& host) {
    auto limiter = redlimit::RateLimiter::connect(url_of(host), quick());
    return limiter.fixed_window("lookup", redlimit::Limit(5, 1min)).consume("u");
  }
};

TEST_F(NameLookupTest, AHostNameIsLookedUpOnceAConnectAndANumericAddressNever) {
  FakeResolver resolver(FakeResolver::Kind::counting);
  EXPECT_TRUE(consume_once("localhost").allowed);
  EXPECT_EQ(resolver.calls(), 1) << "one lookup for the limiter's one connection";
  const redlimit::Decision d = consume_once("127.0.0.1");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 3) << "both limiters reached the same server";
  EXPECT_EQ(resolver.calls(), 1) << "a numeric address asked the resolver";
}

TEST_F(NameLookupTest, AResolverThatHangsCostsTheConnectTimeoutAndOneLookupServesTheRetries) {
  FakeResolver resolver(FakeResolver::Kind::hanging);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto t0 = Steady::now();
    std::string what;
    try {
      (void)consume_once("redis.redlimit-test");
      ADD_FAILURE() << "a connect with a hung resolver went through";
    } catch (const redlimit::TimeoutError& e) {
      what = e.what();
    }
    const auto took = since(t0);
    std::printf("attempt %d failed after %lld ms (connect_timeout %lld ms, the resolver hangs %lld s): %s\n", attempt,
                static_cast<long long>(took.count()), static_cast<long long>(kConnectTimeout.count()),
                static_cast<long long>(FakeResolver::kHang.count()), what.c_str());
    EXPECT_NE(what.find("resolving the name timed out"), std::string::npos) << what;
    EXPECT_LT(took, kBound);
  }
  EXPECT_EQ(resolver.calls(), 1) << "each retry started a lookup of its own while the first still hung";
  EXPECT_EQ(resolver.hung(), 1);
}

TEST_F(NameLookupTest, ANameThatDoesNotResolveFailsAtOnceWithTheResolversWords) {
  FakeResolver resolver(FakeResolver::Kind::unknown);
  try {
    (void)consume_once("redis.redlimit-test");
    ADD_FAILURE() << "a connect to a name that does not resolve went through";
  } catch (const redlimit::TimeoutError& e) {
    ADD_FAILURE() << "a failed lookup reported as a timeout: " << e.what();
  } catch (const redlimit::ConnectionError& e) {
    EXPECT_NE(std::string(e.what()).find(::gai_strerror(EAI_NONAME)), std::string::npos) << e.what();
  }
  EXPECT_EQ(resolver.calls(), 1);
}

#ifdef REDLIMIT_HAVE_LIBEVENT
// The async client looks the name up off its event loop (src/hiredis/async_lookup.cpp): while the
// resolver hangs, another client on the same loop is answered, and the calls waiting for the name
// fail with TimeoutError once connect_timeout has passed, all of them on one lookup.
TEST_F(NameLookupTest, AnAsyncClientsLookupNeverHoldsItsEventLoop) {
  FakeResolver resolver(FakeResolver::Kind::hanging);
  LibeventLoop loop;
  redlimit::AsyncOptions o;
  o.connect_timeout = 1000ms;
  o.command_timeout = 5000ms;
  auto named = loop.attach(redlimit::parse_url(url_of("redis.redlimit-test")), o);
  auto numeric = loop.attach(redlimit::parse_url(url_of("127.0.0.1")), o);
  loop.start();
  const auto t0 = Steady::now();
  auto first = command(*named, {"PING"});
  auto second = command(*named, {"PING"});
  auto pong = command(*numeric, {"PING"});
  EXPECT_EQ(get_within(pong).str, "PONG");
  const auto answered = since(t0);
  EXPECT_NE(first.wait_for(0s), std::future_status::ready) << "the named client's call ended before the other's PONG";
  std::string what;
  try {
    (void)get_within(first);
    ADD_FAILURE() << "a PING went through a hung resolver";
  } catch (const redlimit::TimeoutError& err) {
    what = err.what();
  }
  const auto failed = since(t0);
  EXPECT_THROW((void)get_within(second), redlimit::TimeoutError);
  std::printf(
      "the other client's PONG after %lld ms; the named client's PINGs failed after %lld ms "
      "(connect_timeout %lld ms): %s\n",
      static_cast<long long>(answered.count()), static_cast<long long>(failed.count()),
      static_cast<long long>(o.connect_timeout.count()), what.c_str());
  EXPECT_NE(what.find("resolving the name timed out"), std::string::npos) << what;
  EXPECT_LT(answered, o.connect_timeout) << "the loop waited for the lookup";
  EXPECT_GE(failed, o.connect_timeout - 50ms);
  EXPECT_LT(failed, o.connect_timeout + kBound);
  EXPECT_EQ(resolver.calls(), 1) << "the two calls waiting for the name made a lookup each";

  resolver.use(FakeResolver::Kind::counting);  // the lookup in flight still hangs; a new name is asked anew
  auto local = loop.attach(redlimit::parse_url(url_of("localhost")), o);
  auto by_name = command(*local, {"PING"});
  EXPECT_EQ(get_within(by_name).str, "PONG");
  EXPECT_EQ(resolver.calls(), 2);
  named.reset();
  numeric.reset();
  local.reset();
  loop.stop();
}
#endif

}  // namespace
}  // namespace redlimit_test
