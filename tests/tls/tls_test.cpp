// TLS (issue 15), against redis-servers this binary starts with --tls-port and --port 0 (nothing in
// clear on TCP), with certificates tests/tls/make_certs.sh makes for this run: server
// authentication, mutual TLS, and each way verification must fail (wrong CA, expired certificate,
// another host name) with a clear TlsError. Built only when redlimit has TLS (hiredis >= 1.0 with
// hiredis_ssl): scripts/test.sh --hiredis1 builds and runs it.
#include <gtest/gtest.h>

#ifdef REDLIMIT_HAVE_LIBEVENT
#include <event2/event.h>
#endif
#ifdef REDLIMIT_HAVE_LIBUV
#include <uv.h>
#endif

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/transport/redis_async.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "support/redis_server.hpp"
#include "tls/certificates.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::Limit;
using redlimit_test::Certificates;
using redlimit_test::tls_error;
using redlimit_test::RedisServer;

// A TLS server presenting `cert`; `clients` is --tls-auth-clients (yes: mutual TLS required).
std::unique_ptr<RedisServer> tls_server(const Certificates& certs, const std::string& cert, const char* clients,
                                        bool plain_too = false) {
  std::vector<std::string> args = {
      "--tls-cert-file",    certs(cert + ".crt"), "--tls-key-file",     certs(cert + ".key"),
      "--tls-ca-cert-file", certs("ca.crt"),      "--tls-auth-clients", clients};
  return std::make_unique<RedisServer>(std::move(args), plain_too);
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new Certificates();
    server_ = tls_server(*certs_, "server", "optional").release();
    mutual_ = tls_server(*certs_, "server", "yes").release();
    expired_ = tls_server(*certs_, "expired", "optional").release();
    dns_only_ = tls_server(*certs_, "dnsonly", "optional").release();
  }
  static void TearDownTestSuite() {
    delete dns_only_;
    delete expired_;
    delete mutual_;
    delete server_;
    delete certs_;
  }

  // rediss://127.0.0.1:PORT/0?QUERY
  static std::string url(const RedisServer& s, const std::string& query) {
    return "rediss://127.0.0.1:" + std::to_string(s.port()) + "/0?" + query;
  }
  static std::string ca() { return "tls_ca_file=" + (*certs_)("ca.crt"); }
  static std::string client_cert() {
    return "&tls_cert_file=" + (*certs_)("client.crt") + "&tls_key_file=" + (*certs_)("client.key");
  }

  // Three decisions under a limit of 2 over `u`: admitted, admitted, rejected, and the state is on
  // the server.
  static void decides(RedisServer& s, const std::string& u, const std::string& subject) {
    auto limiter = redlimit::RateLimiter::connect(u);
    auto fw = limiter.fixed_window("tls", Limit::per_minute(2));
    EXPECT_TRUE(fw.consume(subject).allowed);
    EXPECT_TRUE(fw.consume(subject).allowed);
    EXPECT_FALSE(fw.consume(subject).allowed);
    bool found = false;
    for (const auto& k : s.keys()) found = found || k.find(subject) != std::string::npos;
    EXPECT_TRUE(found) << "no key of " << subject << " on the server";
  }

  static Certificates* certs_;
  static RedisServer* server_;
  static RedisServer* mutual_;
  static RedisServer* expired_;
  static RedisServer* dns_only_;  // its certificate names localhost, not 127.0.0.1
};

Certificates* TlsTest::certs_ = nullptr;
RedisServer* TlsTest::server_ = nullptr;
RedisServer* TlsTest::mutual_ = nullptr;
RedisServer* TlsTest::expired_ = nullptr;
RedisServer* TlsTest::dns_only_ = nullptr;

TEST_F(TlsTest, ThisBuildHasTls) { EXPECT_TRUE(redlimit::RedisConnection::has_tls()); }

TEST_F(TlsTest, ServerAuthenticationDecides) { decides(*server_, url(*server_, ca()), "server-auth"); }

TEST_F(TlsTest, TheServerNameOptionIsWhatIsVerified) {
  decides(*server_, url(*server_, ca() + "&tls_server_name=localhost"), "by-name");
}

TEST_F(TlsTest, NothingIsServedInClear) {
  // --port 0: the TLS port is the only TCP port, and a clear client gets nowhere on it.
  redlimit::Options options;
  options.connect_timeout = 2s;
  options.command_timeout = 2s;
  EXPECT_THROW(redlimit::RateLimiter::connect("redis://127.0.0.1:" + std::to_string(server_->port()), options),
               redlimit::ConnectionError);
}

TEST_F(TlsTest, MutualTlsDecides) { decides(*mutual_, url(*mutual_, ca() + client_cert()), "mutual"); }

TEST_F(TlsTest, MutualTlsWithoutAClientCertificateIsRefusedClearly) {
  try {
    redlimit::RateLimiter::connect(url(*mutual_, ca()));
    FAIL() << "connected without a client certificate";
  } catch (const redlimit::ConnectionError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("certificate"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(mutual_->port())), std::string::npos) << what;
  }
}

TEST_F(TlsTest, AnotherCaIsRefusedClearly) {
  // Redis sends its chain up to the root (OpenSSL builds it from its own CA file), so the verdict is
  // about that root; a server sending its certificate alone gets "unable to get local issuer
  // certificate".
  const std::string what = tls_error(url(*server_, "tls_ca_file=" + (*certs_)("other-ca.crt")));
  EXPECT_TRUE(what.find("the server's certificate was refused: self-signed certificate in certificate chain") !=
                  std::string::npos ||
              what.find("the server's certificate was refused: unable to get local issuer certificate") !=
                  std::string::npos)
      << what;
}

TEST_F(TlsTest, AnExpiredCertificateIsRefusedClearly) {
  const std::string what = tls_error(url(*expired_, ca()));
  EXPECT_NE(what.find("the server's certificate was refused: certificate has expired"), std::string::npos) << what;
}

TEST_F(TlsTest, AnotherHostNameIsRefusedClearly) {
  const std::string what = tls_error(url(*server_, ca() + "&tls_server_name=redis.example.com"));
  EXPECT_NE(what.find("the server's certificate was refused: hostname mismatch (verified against redis.example.com)"),
            std::string::npos)
      << what;
}

TEST_F(TlsTest, AnIpHostIsVerifiedAsAnAddress) {
  // The URL's host 127.0.0.1 must be an IP entry of the certificate: a DNS name is not enough...
  const std::string what = tls_error(url(*dns_only_, ca()));
  EXPECT_NE(what.find("the server's certificate was refused: IP address mismatch (verified against 127.0.0.1)"),
            std::string::npos)
      << what;
  // ...and with the name the certificate holds, the same server is accepted.
  decides(*dns_only_, url(*dns_only_, ca() + "&tls_server_name=localhost"), "dns-only");
}

TEST_F(TlsTest, VerificationFailuresAreThrownWhateverTheFailurePolicy) {
  redlimit::Options options;
  options.on_failure = redlimit::OnFailure::fail_open;
  EXPECT_THROW(redlimit::RateLimiter::connect(url(*server_, "tls_ca_file=" + (*certs_)("other-ca.crt")), options),
               redlimit::TlsError);
}

TEST_F(TlsTest, InsecureSkipVerifyConnectsToAnyCertificate) {
  decides(*expired_, url(*expired_, "tls_insecure_skip_verify=true"), "insecure");
}

TEST_F(TlsTest, UnreadableFilesAreInvalidArgumentsBeforeAnyIo) {
  for (const std::string& q :
       std::vector<std::string>{"tls_ca_file=/nonexistent/ca.pem", "tls_ca_dir=/nonexistent",
                                ca() + "&tls_cert_file=/nonexistent/c.pem&tls_key_file=/nonexistent/k.pem"}) {
    SCOPED_TRACE(q);
    try {
      redlimit::RateLimiter::connect("rediss://127.0.0.1:1/0?" + q);
      FAIL() << "accepted";
    } catch (const redlimit::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("/nonexistent"), std::string::npos) << e.what();
    }
  }
}

TEST_F(TlsTest, ThePoolSpeaksTlsFromManyThreads) {
  redlimit::Options options;
  auto limiter = redlimit::RateLimiter::connect(url(*mutual_, ca() + client_cert()), options);
  auto fw = limiter.fixed_window("pool", Limit::per_minute(100));
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) admitted += fw.consume("many").allowed ? 1 : 0;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(admitted.load(), 100);
}

#ifdef REDLIMIT_HAVE_LIBEVENT
// A libevent loop on a thread of its own, with one AsyncRedis attached before it runs. The loop
// returns once the AsyncRedis is released (every reference dropped).
class AsyncLoop {
 public:
  explicit AsyncLoop(const std::string& u) : base_(event_base_new()) {
    redis_ = redlimit::AsyncRedis::attach_libevent(base_, redlimit::parse_url(u));
    thread_ = std::thread([b = base_] { event_base_dispatch(b); });
  }
  ~AsyncLoop() {
    redis_.reset();
    thread_.join();
    event_base_free(base_);
  }
  AsyncLoop(const AsyncLoop&) = delete;
  AsyncLoop& operator=(const AsyncLoop&) = delete;
  std::shared_ptr<redlimit::AsyncRedis>& redis() { return redis_; }

 private:
  event_base* base_;
  std::shared_ptr<redlimit::AsyncRedis> redis_;
  std::thread thread_;
};

TEST_F(TlsTest, AsyncDecidesOverMutualTls) {
  const std::string u = url(*mutual_, ca() + client_cert());
  AsyncLoop loop(u);
  {
    auto limiter = redlimit::RateLimiter::connect(u);
    limiter.attach_async(loop.redis());
    auto fw = limiter.fixed_window("async", Limit::per_minute(2));
    std::vector<std::future<redlimit::Decision>> decisions;
    for (int i = 0; i < 3; ++i) decisions.push_back(fw.consume_future("async-tls"));
    int allowed = 0;
    for (auto& f : decisions) {
      ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
      allowed += f.get().allowed ? 1 : 0;
    }
    EXPECT_EQ(allowed, 2);
  }
  EXPECT_EQ(loop.redis()->stats().connections, 1u);
}

TEST_F(TlsTest, AsyncRefusesAnotherCaClearly) {
  AsyncLoop loop(url(*server_, "tls_ca_file=" + (*certs_)("other-ca.crt")));
  auto done = std::make_shared<std::promise<std::string>>();
  auto f = done->get_future();
  loop.redis()->command_async(
      {"PING"}, [done](redlimit::Reply) { done->set_value("answered"); },
      [done](std::exception_ptr e) {
        try {
          std::rethrow_exception(e);
        } catch (const redlimit::TlsError& err) {
          done->set_value(std::string("TlsError: ") + err.what());
        } catch (const std::exception& err) {
          done->set_value(std::string("other: ") + err.what());
        }
      });
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const std::string what = f.get();
  EXPECT_EQ(what.rfind("TlsError: ", 0), 0u) << what;
  EXPECT_NE(what.find("the server's certificate was refused"), std::string::npos) << what;
}
#endif

#ifdef REDLIMIT_HAVE_LIBUV
// The same over libuv (redlimit's own hiredis adapter for it).
TEST_F(TlsTest, AsyncOnLibuvDecidesAndRefusesAnotherCa) {
  for (const bool trusted : {true, false}) {
    SCOPED_TRACE(trusted ? "trusted CA" : "another CA");
    uv_loop_t loop;
    ASSERT_EQ(uv_loop_init(&loop), 0);
    const std::string ca_file = (*certs_)(trusted ? "ca.crt" : "other-ca.crt");
    auto redis =
        redlimit::AsyncRedis::attach_libuv(&loop, redlimit::parse_url(url(*server_, "tls_ca_file=" + ca_file)));
    std::thread runner([&loop] { uv_run(&loop, UV_RUN_DEFAULT); });
    auto done = std::make_shared<std::promise<std::string>>();
    auto f = done->get_future();
    redis->command_async(
        {"PING"}, [done](redlimit::Reply r) { done->set_value("answered " + r.str); },
        [done](std::exception_ptr e) {
          try {
            std::rethrow_exception(e);
          } catch (const redlimit::TlsError& err) {
            done->set_value(std::string("TlsError: ") + err.what());
          } catch (const std::exception& err) {
            done->set_value(std::string("other: ") + err.what());
          }
        });
    const bool ready = f.wait_for(10s) == std::future_status::ready;
    redis.reset();
    runner.join();
    EXPECT_EQ(uv_loop_close(&loop), 0);
    ASSERT_TRUE(ready);
    const std::string what = f.get();
    if (trusted) {
      EXPECT_EQ(what, "answered PONG");
    } else {
      EXPECT_EQ(what.rfind("TlsError: ", 0), 0u) << what;
      EXPECT_NE(what.find("the server's certificate was refused"), std::string::npos) << what;
    }
  }
}
#endif

// Sequential decisions per second over TLS and over plain TCP on the same server, in the same run
// (docs/connecting.md quotes the figures). Alternating rounds, so a busy machine slows both alike.
TEST_F(TlsTest, RoundTripCostAgainstPlainTcp) {
  const auto tcp_tls = tls_server(*certs_, "server", "optional", /*plain_too=*/true);
  auto tls = redlimit::RateLimiter::connect(url(*tcp_tls, ca()));
  auto tcp = redlimit::RateLimiter::connect(tcp_tls->url());
  auto a = tls.token_bucket("bench", 1'000'000, 1'000'000, 1s);
  auto b = tcp.token_bucket("bench", 1'000'000, 1'000'000, 1s);
  const int per_round = 2000, rounds = 4;
  std::chrono::steady_clock::duration over_tls{}, over_tcp{};
  auto run = [&](auto& strategy, std::chrono::steady_clock::duration& total) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < per_round; ++i) ASSERT_TRUE(strategy.consume("k").allowed);
    total += std::chrono::steady_clock::now() - start;
  };
  for (int r = 0; r < rounds; ++r) {
    run(a, over_tls);
    run(b, over_tcp);
  }
  auto rate = [&](std::chrono::steady_clock::duration d) {
    return per_round * rounds / std::chrono::duration<double>(d).count();
  };
  std::printf("[ figures  ] sequential decisions/s: TLS %.0f, TCP %.0f (TLS/TCP %.2f), %d each\n", rate(over_tls),
              rate(over_tcp), rate(over_tls) / rate(over_tcp), per_round * rounds);
  EXPECT_GT(rate(over_tls), 0);
}

}  // namespace
