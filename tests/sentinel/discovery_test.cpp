// Issue 15: redis-sentinel:// against a real deployment (a master with an ACL user, its replica and
// three sentinels with a password of their own): discovery, its errors (a master name no sentinel
// knows, every sentinel down), credentials kept apart and named when refused (never a password),
// and passwords from the environment.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "redlimit/transport/sentinel_connection.hpp"
#include "sentinel/deployment.hpp"
#include "sentinel/fake_sentinel.hpp"
#include "support/hung_node.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::OnFailure;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit_sentinel::Deployment;

constexpr const char* kDataPassword = "data-pw-17";      // requirepass of master and replica
constexpr const char* kAppPassword = "app-pw-23";        // the ACL user "app"
constexpr const char* kSentinelPassword = "watch-pw-5";  // the sentinels' requirepass

Options quick(OnFailure policy = OnFailure::raise) {
  Options o;
  o.on_failure = policy;
  o.connect_timeout = 500ms;
  o.command_timeout = 2000ms;
  return o;
}

class SentinelDiscovery : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    redlimit_sentinel::DeploymentOptions o;
    o.requirepass = kDataPassword;
    o.sentinel_password = kSentinelPassword;
    deployment_ = std::make_unique<Deployment>(o);
    // The app's user may use every key and command; and every channel, which a server before 6.2
    // allows anyone and takes no pattern for (`&*`).
    std::vector<std::string> setuser = {"ACL", "SETUSER", "app", "on", std::string(">") + kAppPassword, "~*", "+@all"};
    if (redlimit_sentinel::server_major_version() >= 7) setuser.push_back("&*");
    for (auto* server : {&deployment_->master(), &deployment_->replica()}) {  // ACLs are not replicated
      const auto r = server->command(setuser);
      ASSERT_FALSE(r.is_error()) << r.str;
    }
  }
  static void TearDownTestSuite() { deployment_.reset(); }
  static Deployment& d() { return *deployment_; }
  // The URL with the ACL user and the sentinels' password.
  static std::string good_url(const std::string& extra = {}) {
    return d().url(std::string("app:") + kAppPassword + "@",
                   std::string("?sentinel_password=") + kSentinelPassword + extra);
  }
  static std::unique_ptr<Deployment> deployment_;
};
std::unique_ptr<Deployment> SentinelDiscovery::deployment_;

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const redlimit::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(SentinelDiscovery, FindsTheMasterAndDecidesThere) {
  Options o = quick();
  // A clock that does not move: on the real one, the three calls could straddle a minute's end, and
  // the third would then be the next window's first (seen once under ASan).
  o.clock = std::make_shared<redlimit::ManualClock>();
  auto limiter = RateLimiter::connect(good_url("&db=3"), o);
  auto fw = limiter.fixed_window("discovery", redlimit::Limit::per_minute(2));
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_FALSE(fw.consume("u").allowed);
  // Recorded on the master, in db 3 (and replicated).
  const auto keys = d().master().command({"EVAL", "redis.call('SELECT', 3) return redis.call('DBSIZE')", "0"});
  EXPECT_EQ(keys.integer, 1) << keys.str;
  EXPECT_EQ(d().master_address(), "127.0.0.1:" + std::to_string(d().master().port()));
}

// A batch of more than 256 requests is several script calls in one pipeline (SentinelConnection::pipeline).
TEST_F(SentinelDiscovery, ABatchGoesToTheMasterInOnePipeline) {
  auto limiter = RateLimiter::connect(good_url(), quick());
  auto fw = limiter.fixed_window("batch", redlimit::Limit::per_minute(1));
  std::vector<std::string> subjects;
  for (int i = 0; i < 600; ++i) subjects.push_back("s" + std::to_string(i));
  std::vector<redlimit::Request> twice;
  for (const auto& s : subjects) twice.push_back({s, 1});
  for (const auto& s : subjects) twice.push_back({s, 1});
  const auto decisions = fw.consume_many(twice);
  ASSERT_EQ(decisions.size(), 1200u);
  for (std::size_t i = 0; i < decisions.size(); ++i) EXPECT_EQ(decisions[i].allowed, i < 600) << i;
  EXPECT_EQ(d().master().command({"EXISTS", redlimit_sentinel::state_key(d().master(), "batch")}).integer, 1);
}

TEST_F(SentinelDiscovery, TheConnectionSaysWhichMasterItFound) {
  redlimit::SentinelConnection conn(redlimit::parse_sentinel_url(good_url()), quick());
  EXPECT_EQ(conn.master(), "");  // no I/O before the first command
  EXPECT_EQ(conn.command({"PING"}).str, "PONG");
  EXPECT_EQ(conn.master(), "127.0.0.1:" + std::to_string(d().master().port()));
  EXPECT_EQ(conn.discoveries(), 1u);
  EXPECT_EQ(conn.command({"ROLE"}).elements.at(0).str, "master");
  EXPECT_EQ(conn.discoveries(), 1u);  // asked once, not per command
}

TEST_F(SentinelDiscovery, AMasterNameNoSentinelKnowsIsAClearAuthErrorWhateverThePolicy) {
  const std::string url = d().url({}, std::string("?sentinel_password=") + kSentinelPassword);
  const std::string wrong = url.substr(0, url.find("/mymaster")) + "/nosuchmaster" + url.substr(url.find('?'));
  for (const OnFailure policy : {OnFailure::raise, OnFailure::fail_open}) {
    const std::string e = error_of([&] { RateLimiter::connect(wrong, quick(policy)); });
    EXPECT_NE(e.find("no sentinel knows a master named \"nosuchmaster\""), std::string::npos) << e;
    std::printf("wrong master name: %s\n", e.c_str());
    EXPECT_THROW(RateLimiter::connect(wrong, quick(policy)), redlimit::AuthError);
  }
}

TEST_F(SentinelDiscovery, EverySentinelDownIsAClearConnectionErrorAndTheFailurePolicyAnswers) {
  // Three ports where nothing listens (the sentinels of a deployment that is down).
  std::string hosts;
  for (int i = 0; i < 3; ++i)
    hosts += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(redlimit_sentinel::refused_port());
  const std::string url = "redis-sentinel://" + hosts + "/mymaster";
  const auto started = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { RateLimiter::connect(url, quick()); });
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  std::printf("every sentinel down: connect() failed in %lld ms\n", static_cast<long long>(took.count()));
  std::printf("every sentinel down: %s\n", e.c_str());
  EXPECT_NE(e.find("no master \"mymaster\" confirmed by the sentinels"), std::string::npos) << e;
  EXPECT_NE(e.find("Connection refused"), std::string::npos) << e;
  EXPECT_THROW(RateLimiter::connect(url, quick()), redlimit::ConnectionError);
  EXPECT_LT(took, 2500ms);  // within the call's deadline (2 s), with room for a loaded machine
  // Under fail_open the limiter starts, and the policy answers.
  auto open = RateLimiter::connect(url, quick(OnFailure::fail_open));
  const redlimit::Decision dec = open.fixed_window("down", redlimit::Limit::per_minute(1)).consume("u");
  EXPECT_TRUE(dec.allowed);
  EXPECT_EQ(dec.source, redlimit::Source::failure_policy);
}

// A call with no deadline (command_timeout and connect_timeout 0): a sentinel first in the URL that
// accepts the connection and never answers is passed over after one step's bound (kSentinelStep,
// sentinel_discovery.hpp: 1 s), and the next one names the master. Without that bound the search
// (and the +switch-master listener) waited on it for ever.
TEST_F(SentinelDiscovery, AHungSentinelIsPassedOverInACallWithNoDeadline) {
  redlimit_test::HungNode hung;
  std::string url = good_url();
  url.insert(url.find('@') + 1, "127.0.0.1:" + std::to_string(hung.port()) + ",");
  Options o = quick();
  o.connect_timeout = 0ms;
  o.command_timeout = 0ms;
  // On a thread of its own, so that a wait for ever fails this test instead of hanging the suite.
  auto outcome = std::make_shared<std::promise<std::string>>();
  auto result = outcome->get_future();
  const auto started = std::chrono::steady_clock::now();
  std::thread([url, o, outcome] {
    outcome->set_value(error_of([&] {
      auto limiter = RateLimiter::connect(url, o);
      if (!limiter.fixed_window("hung-first", redlimit::Limit::per_minute(10)).consume("u").allowed) {
        throw redlimit::Error("rejected");
      }
    }));
  }).detach();
  ASSERT_EQ(result.wait_for(30s), std::future_status::ready) << "still waiting on the hung sentinel after 30 s";
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  std::printf("a hung sentinel first, no deadline: decided after %lld ms\n", static_cast<long long>(took.count()));
  EXPECT_EQ(result.get(), "(no error)");
  EXPECT_GE(took, 900ms);  // the hung sentinel was asked first, and waited for
}

// The same hung sentinel first under the call's deadline (2 s): it costs half of the call (each
// sentinel of a pass but the last gets half the time left), not the whole of it, so the next
// sentinel still names the master within the call; and so in every limiter after it. Before, it took
// the whole deadline, and every search, starting with it again, failed: one sentinel hung, an outage.
TEST_F(SentinelDiscovery, AHungSentinelCostsHalfOfTheCallNotTheWholeOfIt) {
  redlimit_test::HungNode hung;
  std::string url = good_url("&sentinel_check_ms=0");
  url.insert(url.find('@') + 1, "127.0.0.1:" + std::to_string(hung.port()) + ",");
  for (int i = 0; i < 2; ++i) {  // two limiters: each begins its search with the hung sentinel
    const auto started = std::chrono::steady_clock::now();
    std::chrono::milliseconds took{-1};
    const std::string e = error_of([&] {
      auto limiter = RateLimiter::connect(url, quick());
      if (!limiter.fixed_window("hung-share", redlimit::Limit::per_minute(10)).consume("u").allowed) {
        throw redlimit::Error("rejected");
      }
      took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    });  // (the limiter's +switch-master listener, on the hung sentinel too, is waited for at its end)
    std::printf("a hung sentinel first, a 2 s deadline: %s, decided after %lld ms\n", e.c_str(),
                static_cast<long long>(took.count()));
    EXPECT_EQ(e, "(no error)");
    EXPECT_LT(took, 2000ms);  // within the call that connect() makes (half of it on the hung sentinel)
  }
}

// The periodic check (sentinel_check_ms) asks the sentinel that answered last, inside a call. That
// sentinel hangs (SIGSTOP) after the master was found: the check gets half of the call's time (the
// call's own command the rest) and the next check asks the next sentinel, so no call fails. Before,
// the check took the whole call, which then failed, and so did one call every check, for as long as
// that sentinel hung.
TEST_F(SentinelDiscovery, ASentinelHungAfterAnsweringFailsNoCall) {
  auto limiter = RateLimiter::connect(good_url("&sentinel_check_ms=100"), quick());
  auto fw = limiter.fixed_window("hung-check", redlimit::Limit::per_minute(1000000));
  ASSERT_TRUE(fw.consume("u").allowed);  // found through sentinel 0, the first in the URL
  d().sentinel(0).pause();
  int calls = 0, failed = 0;
  std::string first_error;
  auto slowest = std::chrono::milliseconds(0);
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < t0 + 3s) {
    const auto started = std::chrono::steady_clock::now();
    const std::string e = error_of([&] { fw.consume("u"); });
    slowest = std::max(
        slowest, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started));
    ++calls;
    if (e != "(no error)" && failed++ == 0) first_error = e;
    std::this_thread::sleep_for(20ms);
  }
  d().sentinel(0).resume();
  std::printf("a sentinel hung after answering: %d calls, %d failed (%s), the slowest %lld ms\n", calls, failed,
              first_error.c_str(), static_cast<long long>(slowest.count()));
  EXPECT_EQ(failed, 0) << first_error;
  EXPECT_GE(slowest, 900ms);  // one check did wait on the hung sentinel: half of the 2 s call
}

// An announcement (+switch-master) naming a master that hangs, while the sentinels name the real
// one (a stale or wrong announcement; a fake sentinel makes it, as no real one can be made to): the
// call that confirms the announced master gives it half of its time (half_of_call_left), as every
// step of a search does, and the sentinels the rest, so the call is decided on the real master.
// Before, the confirmation took the whole call, which failed.
TEST_F(SentinelDiscovery, AnAnnouncedMasterThatHangsCostsHalfOfTheCall) {
  redlimit_sentinel::FakeSentinel fake;
  fake.name_master("127.0.0.1", d().master().port());
  redlimit_test::HungNode hung;
  const std::string url = std::string("redis-sentinel://app:") + kAppPassword +
                          "@127.0.0.1:" + std::to_string(fake.port()) + "/mymaster?sentinel_check_ms=0";
  auto conn = std::make_shared<redlimit::SentinelConnection>(redlimit::parse_sentinel_url(url), quick());
  RateLimiter limiter(conn, quick());
  auto fw = limiter.fixed_window("announced-hung", redlimit::Limit::per_minute(1000));
  ASSERT_TRUE(fw.consume("u").allowed);  // the master the fake sentinel names
  const std::string real = "127.0.0.1:" + std::to_string(d().master().port());
  ASSERT_EQ(conn->master(), real);
  int sent = 0;  // once the listener has subscribed
  for (int i = 0; i < 500 && sent == 0; ++i) {
    sent = fake.announce("mymaster", "127.0.0.1", d().master().port(), "127.0.0.1", hung.port());
    if (sent == 0) std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(sent, 1) << "the listener did not subscribe within 5 s";
  for (int i = 0; i < 500 && conn->announcements() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(conn->announcements(), 1u);
  const auto started = std::chrono::steady_clock::now();
  const std::string e = error_of([&] {
    if (!fw.consume("u").allowed) throw redlimit::Error("rejected");
  });
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  std::printf("an announced master that hangs, a 2 s deadline: %s, decided after %lld ms\n", e.c_str(),
              static_cast<long long>(took.count()));
  EXPECT_EQ(e, "(no error)");
  EXPECT_GE(took, 900ms);  // the announced master was asked first, and waited for
  EXPECT_EQ(conn->master(), real);
  EXPECT_EQ(conn->discoveries(), 2u);
}

TEST_F(SentinelDiscovery, WrongSentinelCredentialsAreNamedNeverShown) {
  const std::string url = d().url(std::string("app:") + kAppPassword + "@", "?sentinel_password=not-it-91");
  const std::string e = error_of([&] { RateLimiter::connect(url, quick(OnFailure::fail_open)); });
  std::printf("wrong sentinel password: %s\n", e.c_str());
  EXPECT_NE(e.find("the sentinels refused our sentinel credentials"), std::string::npos) << e;
  EXPECT_NE(e.find("as user \"default\""), std::string::npos) << e;
  EXPECT_EQ(e.find("not-it-91"), std::string::npos) << e;
  EXPECT_EQ(e.find(kAppPassword), std::string::npos) << e;
  // Without any: the sentinels say NOAUTH.
  EXPECT_THROW(RateLimiter::connect(d().url("app:x@"), quick()), redlimit::AuthError);
}

TEST_F(SentinelDiscovery, WrongDataCredentialsNameTheUserNeverThePassword) {
  const std::string url = d().url("app:wrong-pw-33@", std::string("?sentinel_password=") + kSentinelPassword);
  for (const OnFailure policy : {OnFailure::raise, OnFailure::fail_open}) {
    try {
      RateLimiter::connect(url, quick(policy));
      ADD_FAILURE() << "wrong data credentials were accepted";
    } catch (const redlimit::AuthError& e) {
      const std::string what = e.what();
      std::printf("wrong data password: %s\n", what.c_str());
      EXPECT_NE(what.find("AUTH as user \"app\" on 127.0.0.1:" + std::to_string(d().master().port())),
                std::string::npos)
          << what;
      EXPECT_EQ(what.find("wrong-pw-33"), std::string::npos) << what;
    }
  }
}

TEST_F(SentinelDiscovery, PasswordsFromTheEnvironment) {
  ::setenv("REDLIMIT_TEST_APP_PW", kAppPassword, 1);
  ::setenv("REDLIMIT_TEST_WATCH_PW", kSentinelPassword, 1);
  auto limiter = RateLimiter::connect(
      d().url({}, "?user=app&password_env=REDLIMIT_TEST_APP_PW&sentinel_password_env=REDLIMIT_TEST_WATCH_PW"), quick());
  EXPECT_TRUE(limiter.token_bucket("env", 5, 1, 1s).consume("u").allowed);
  ::unsetenv("REDLIMIT_TEST_WATCH_PW");
  const std::string e = error_of([&] {
    RateLimiter::connect(d().url({}, "?password_env=REDLIMIT_TEST_APP_PW&sentinel_password_env=REDLIMIT_TEST_WATCH_PW"),
                         quick());
  });
  EXPECT_NE(e.find("invalid argument"), std::string::npos) << e;
  EXPECT_NE(e.find("REDLIMIT_TEST_WATCH_PW is not set"), std::string::npos) << e;
  ::unsetenv("REDLIMIT_TEST_APP_PW");
}

// Item 3 of the issue on a plain redis:// URL too: a real server with an ACL user.
TEST_F(SentinelDiscovery, AclUserOnARedisUrl) {
  const std::string host = "@127.0.0.1:" + std::to_string(d().master().port());
  auto limiter = RateLimiter::connect(std::string("redis://app:") + kAppPassword + host, quick());
  EXPECT_TRUE(limiter.fixed_window("acl", redlimit::Limit::per_minute(1)).consume("u").allowed);
  const std::string e =
      error_of([&] { RateLimiter::connect("redis://app:bad-pw-8" + host, quick(OnFailure::fail_open)); });
  EXPECT_NE(e.find("AUTH as user \"app\" on 127.0.0.1:"), std::string::npos) << e;
  EXPECT_NE(e.find("WRONGPASS"), std::string::npos) << e;
  EXPECT_EQ(e.find("bad-pw-8"), std::string::npos) << e;
  const std::string nobody = error_of([&] { RateLimiter::connect("redis://:bad-pw-8" + host, quick()); });
  EXPECT_NE(nobody.find("AUTH as user \"default\""), std::string::npos) << nobody;
  EXPECT_EQ(nobody.find("bad-pw-8"), std::string::npos) << nobody;
}

}  // namespace

namespace {

// Last (it swaps the roles of master and replica under the sentinels, then back): the master in use
// turns into a replica under our open connections (a REPLICAOF that kills no client), so a decision
// gets -READONLY; the sentinels still name it and ROLE says it is not a master, so nothing is
// re-sent anywhere and nothing is recorded; once it is a master again the limiter decides again.
TEST_F(SentinelDiscovery, ZzAMasterTurnedReplicaIsNeitherWrittenNorTrusted) {
  Options o = quick();
  o.breaker_threshold = 0;  // every call reaches the transport
  auto limiter = RateLimiter::connect(good_url("&sentinel_check_ms=0"), o);
  auto fw = limiter.fixed_window("readonly", redlimit::Limit::per_minute(100));
  ASSERT_TRUE(fw.consume("u").allowed);
  auto& m = d().master();
  auto& r = d().replica();
  ASSERT_EQ(r.command({"REPLICAOF", "NO", "ONE"}).str, "OK");
  ASSERT_EQ(m.command({"REPLICAOF", "127.0.0.1", std::to_string(r.port())}).str, "OK");
  const auto started = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { fw.consume("u"); });
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  std::printf("a master turned replica: %s (after %lld ms)\n", e.c_str(), static_cast<long long>(took.count()));
  EXPECT_TRUE(e.find("READONLY") != std::string::npos || e.find("LOADING") != std::string::npos) << e;
  // Recorded nowhere: the one unit admitted before is all either server holds.
  using redlimit_sentinel::state_key;
  using redlimit_sentinel::used_of;
  EXPECT_EQ(used_of(r, state_key(r, "readonly")), 1);
  EXPECT_EQ(used_of(m, state_key(m, "readonly")), 1);
  // Back as it was: the limiter finds the master again and decides.
  ASSERT_EQ(m.command({"REPLICAOF", "NO", "ONE"}).str, "OK");
  ASSERT_EQ(r.command({"REPLICAOF", "127.0.0.1", std::to_string(m.port())}).str, "OK");
  EXPECT_TRUE(fw.consume("u").allowed);
}

}  // namespace
