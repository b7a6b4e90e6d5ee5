// A host name is resolved within the connect's time (src/hiredis/name_lookup.hpp). hiredis's own
// connect called getaddrinfo, which waits as long as the system's resolver does: with a DNS server
// that does not answer, glibc's defaults (5 s, 2 attempts, each server in turn) hold a connect 10 s
// or more whatever connect_timeout and the call's deadline say, and an async client's event loop
// with it. A test cannot make this machine's resolver hang without a DNS server of its own on port
// 53 named in /etc/resolv.conf, so these tests put a resolver of theirs in its place
// (set_resolver_for_tests): one that asks getaddrinfo and counts, or one that hangs until the test
// releases it (10 s at most). The connects themselves go to the suite's real redis-server.
#include "hiredis/name_lookup.hpp"

#include <gtest/gtest.h>
#include <netdb.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "integration/async_fixture.hpp"
#include "redlimit/redlimit.hpp"

namespace redlimit_test {
namespace {

using Steady = std::chrono::steady_clock;
using redlimit::hiredis_detail::set_resolver_for_tests;

constexpr auto kConnectTimeout = 200ms;
constexpr auto kHang = 10s;      // how long the hanging resolver waits when no test releases it
constexpr auto kBound = 1500ms;  // a connect's failure comes within this, where it took kHang

std::atomic<int> g_calls{0};
std::atomic<int> g_hanging{0};  // lookups inside hanging() now
std::mutex g_mutex;
std::condition_variable g_cv;
bool g_release = false;

int counting(const char* host, const char* service, const addrinfo* hints, addrinfo** res) {
  ++g_calls;
  return ::getaddrinfo(host, service, hints, res);
}

int unknown(const char*, const char*, const addrinfo*, addrinfo** res) {
  ++g_calls;
  *res = nullptr;
  return EAI_NONAME;
}

int hanging(const char*, const char*, const addrinfo*, addrinfo** res) {
  ++g_calls;
  ++g_hanging;
  {
    std::unique_lock<std::mutex> lock(g_mutex);
    g_cv.wait_for(lock, kHang, [] { return g_release; });
  }
  *res = nullptr;
  --g_hanging;
  return EAI_AGAIN;
}

std::chrono::milliseconds since(Steady::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0);
}

class NameLookupTest : public RedisTest {
 protected:
  void SetUp() override {
    RedisTest::SetUp();
    g_calls = 0;
    g_release = false;
  }
  // The resolver put back, and a hung lookup released and waited for (its thread would otherwise
  // count the next test's calls).
  void TearDown() override {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_release = true;
    }
    g_cv.notify_all();
    const auto t0 = Steady::now();
    while (g_hanging.load() > 0 && since(t0) < kHang) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(g_hanging.load(), 0) << "a lookup thread did not end";
    std::this_thread::sleep_for(20ms);  // the released thread's last steps after hanging() returned
    set_resolver_for_tests(nullptr);
    RedisTest::TearDown();
  }

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
};

TEST_F(NameLookupTest, AHostNameIsLookedUpOnceAConnectAndANumericAddressNever) {
  set_resolver_for_tests(&counting);
  auto by_name = redlimit::RateLimiter::connect(url_of("localhost"), quick());
  EXPECT_TRUE(by_name.fixed_window("lookup", redlimit::Limit(5, 1min)).consume("u").allowed);
  EXPECT_EQ(g_calls.load(), 1) << "one lookup for the limiter's one connection";
  auto by_address = redlimit::RateLimiter::connect(url_of("127.0.0.1"), quick());
  const redlimit::Decision d = by_address.fixed_window("lookup", redlimit::Limit(5, 1min)).consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 3) << "both limiters reached the same server";
  EXPECT_EQ(g_calls.load(), 1) << "a numeric address asked the resolver";
}

TEST_F(NameLookupTest, AResolverThatHangsCostsTheConnectTimeoutAndOneLookupServesTheRetries) {
  set_resolver_for_tests(&hanging);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto t0 = Steady::now();
    std::string what;
    try {
      auto limiter = redlimit::RateLimiter::connect(url_of("redis.redlimit-test"), quick());
      (void)limiter.fixed_window("lookup", redlimit::Limit(5, 1min)).consume("u");
      ADD_FAILURE() << "a connect with a hung resolver went through";
    } catch (const redlimit::TimeoutError& e) {
      what = e.what();
    }
    const auto took = since(t0);
    std::printf("attempt %d failed after %lld ms (connect_timeout %lld ms, the resolver hangs %lld s): %s\n", attempt,
                static_cast<long long>(took.count()), static_cast<long long>(kConnectTimeout.count()),
                static_cast<long long>(std::chrono::seconds(kHang).count()), what.c_str());
    EXPECT_NE(what.find("resolving the name timed out"), std::string::npos) << what;
    EXPECT_LT(took, kBound);
  }
  EXPECT_EQ(g_calls.load(), 1) << "each retry started a lookup of its own while the first still hung";
}

TEST_F(NameLookupTest, ANameThatDoesNotResolveFailsAtOnceWithTheResolversWords) {
  set_resolver_for_tests(&unknown);
  try {
    auto limiter = redlimit::RateLimiter::connect(url_of("redis.redlimit-test"), quick());
    (void)limiter.fixed_window("lookup", redlimit::Limit(5, 1min)).consume("u");
    ADD_FAILURE() << "a connect to a name that does not resolve went through";
  } catch (const redlimit::TimeoutError& e) {
    ADD_FAILURE() << "a failed lookup reported as a timeout: " << e.what();
  } catch (const redlimit::ConnectionError& e) {
    EXPECT_NE(std::string(e.what()).find(::gai_strerror(EAI_NONAME)), std::string::npos) << e.what();
  }
  EXPECT_GE(g_calls.load(), 1);
}

#ifdef REDLIMIT_HAVE_LIBEVENT
// The async client looks the name up off its event loop (src/hiredis/async_lookup.cpp): while the
// resolver hangs, another client on the same loop is answered, and the calls waiting for the name
// fail with TimeoutError once connect_timeout has passed, all of them on one lookup.
TEST_F(NameLookupTest, AnAsyncClientsLookupNeverHoldsItsEventLoop) {
  set_resolver_for_tests(&hanging);
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
  EXPECT_EQ(g_calls.load(), 1) << "the two calls waiting for the name made a lookup each";

  set_resolver_for_tests(&counting);  // the lookup in flight still hangs; a new name is asked anew
  auto local = loop.attach(redlimit::parse_url(url_of("localhost")), o);
  auto by_name = command(*local, {"PING"});
  EXPECT_EQ(get_within(by_name).str, "PONG");
  EXPECT_EQ(g_calls.load(), 2);
  named.reset();
  numeric.reset();
  local.reset();
  loop.stop();
}
#endif

}  // namespace
}  // namespace redlimit_test
