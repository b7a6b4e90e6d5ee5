// rediss-sentinel:// against a Sentinel deployment of our own (sentinel/deployment.hpp) whose
// servers and sentinels all listen with TLS too, with tests/tls/make_certs.sh's certificates, and
// reach one another over TLS (tls-replication): discovery asks the sentinels over TLS, confirms and
// uses the master over TLS, follows a failover, and a sentinel certificate we cannot verify is a
// TlsError. Built with the TLS suite (scripts/test.sh --hiredis1).
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
#include "redlimit/transport/sentinel_connection.hpp"
#include "sentinel/deployment.hpp"
#include "support/hung_node.hpp"
#include "tls/certificates.hpp"

#ifdef REDLIMIT_HAVE_LIBEVENT
#include <event2/event.h>
#endif

namespace {

using namespace std::chrono_literals;
using redlimit::Limit;
using redlimit_sentinel::Deployment;
using redlimit_sentinel::DeploymentOptions;
using redlimit_test::Certificates;

class TlsSentinelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new Certificates(); }
  static void TearDownTestSuite() { delete certs_; }

  // A deployment whose every server presents server.crt (signed by ca.crt, for 127.0.0.1).
  static std::unique_ptr<Deployment> start() {
    DeploymentOptions o;
    o.tls_cert = (*certs_)("server.crt");
    o.tls_key = (*certs_)("server.key");
    o.tls_ca = (*certs_)("ca.crt");
    return std::make_unique<Deployment>(o);
  }
  static std::string ca(const char* file = "ca.crt") { return "tls_ca_file=" + (*certs_)(file); }

  static Certificates* certs_;
};

Certificates* TlsSentinelTest::certs_ = nullptr;

TEST_F(TlsSentinelTest, FindsTheMasterOverTlsAndDecidesThere) {
  const auto d = start();
  // The sentinels name the master by its TLS port: they reach it over TLS.
  ASSERT_EQ(d->master_address(), "127.0.0.1:" + std::to_string(d->master_tls_port()));
  auto rl = redlimit::RateLimiter::connect(d->tls_url(ca()));
  auto fw = rl.fixed_window("tls-sentinel", Limit::per_minute(2));
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_FALSE(fw.consume("u").allowed);
  // The state is on the master (read by the harness on its clear port), replicated over TLS.
  EXPECT_EQ(redlimit_sentinel::used_of(d->master(), redlimit_sentinel::state_key(d->master(), "tls-sentinel")), 2);
  // The +switch-master listener subscribed over TLS too (its connect is its own: interrupt.hpp).
  EXPECT_TRUE(d->wait_for_subscribers(1, 10s)) << "no subscription on any sentinel within 10 s";
#ifdef REDLIMIT_HAVE_LIBEVENT
  // The async client too: the sentinels asked over TLS off the loop, the master's certificate
  // verified for the address they name.
  event_base* base = event_base_new();
  auto async = redlimit::AsyncRedis::attach_libevent(base, redlimit::parse_sentinel_url(d->tls_url(ca())));
  std::thread loop([base] { event_base_dispatch(base); });
  {
    rl.attach_async(async);
    auto afw = rl.fixed_window("tls-sentinel-async", Limit::per_minute(2));
    std::vector<std::future<redlimit::Decision>> calls;
    for (int i = 0; i < 3; ++i) calls.push_back(afw.consume_future("u"));
    int admitted = 0;
    for (auto& f : calls) {
      ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
      admitted += f.get().allowed ? 1 : 0;
    }
    EXPECT_EQ(admitted, 2);
    EXPECT_EQ(async->master(), "127.0.0.1:" + std::to_string(d->master_tls_port()));
    EXPECT_EQ(redlimit_sentinel::used_of(d->master(), redlimit_sentinel::state_key(d->master(), "tls-sentinel-async")),
              2);
  }
  rl.attach_async(nullptr);
  async.reset();
  loop.join();
  event_base_free(base);
#endif
}

// Every sentinel presents a certificate our CA did not sign: a TlsError from connect(), whatever the
// failure policy (configuration, not an outage), that says so.
TEST_F(TlsSentinelTest, SentinelsWhoseCertificatesAreRefusedAreATlsError) {
  const auto d = start();
  const std::string what = redlimit_test::tls_error(d->tls_url(ca("other-ca.crt")), redlimit::OnFailure::fail_open);
  EXPECT_NE(what.find("every sentinel's certificate was refused"), std::string::npos) << what;
}

// kill -9 of the master: the sentinels promote the replica (over TLS), and the limiter's next calls
// find it and decide there, within the failover's few seconds.
TEST_F(TlsSentinelTest, AFailoverOverTlsIsFollowed) {
  const auto d = start();
  redlimit::Options o;
  o.on_failure = redlimit::OnFailure::raise;
  auto rl = redlimit::RateLimiter::connect(d->tls_url(ca()), o);
  auto fw = rl.fixed_window("tls-failover", Limit::per_minute(100));
  ASSERT_TRUE(fw.consume("u").allowed);
  d->master().kill9();
  const std::string promoted = "127.0.0.1:" + std::to_string(d->replica_tls_port());
  ASSERT_TRUE(d->wait_for_master(promoted, 30s)) << "the sentinels did not promote the replica";
  bool decided = false;
  for (int attempt = 0; attempt < 100 && !decided; ++attempt) {  // at most ~10 s
    try {
      decided = fw.consume("v").allowed;
    } catch (const redlimit::ConnectionError&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  ASSERT_TRUE(decided);
  EXPECT_EQ(redlimit_sentinel::used_of(d->replica(), redlimit_sentinel::state_key(d->replica(), "tls-failover")), 1);
}

// Closing ends the +switch-master listener's TLS handshake with a sentinel that accepts and never
// answers (a wait inside hiredis and OpenSSL, ended by a shutdown() of the reading half of the
// listener's socket: src/hiredis/interrupt.hpp) at once, where it waited out connect_timeout (8 s
// here); no SIGPIPE either (this process does not ignore it).
TEST_F(TlsSentinelTest, ClosingEndsTheListenersHandshakeWithAHungSentinel) {
  redlimit_test::HungNode hung;
  redlimit::Options o;
  o.connect_timeout = 8000ms;
  o.command_timeout = 8000ms;
  auto conn = std::make_unique<redlimit::SentinelConnection>(
      redlimit::parse_sentinel_url("rediss-sentinel://127.0.0.1:" + std::to_string(hung.port()) + "/mymaster?" + ca()),
      o);
  std::this_thread::sleep_for(300ms);  // the listener's thread is in its handshake
  const auto t0 = std::chrono::steady_clock::now();
  conn.reset();
  const auto took = std::chrono::steady_clock::now() - t0;
  std::printf("closing during the listener's TLS handshake: %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_LT(took, 1000ms);
}

}  // namespace
