// Issue 15: redis-sentinel:// URLs and passwords from the environment (password_env=NAME), parsed
// before any I/O; every mistake an InvalidArgument that names what is wrong, never a password.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "redlimit/errors.hpp"
#include "redlimit/rate_limiter.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "redlimit/url.hpp"

namespace {

using redlimit::Endpoint;
using redlimit::InvalidArgument;
using redlimit::parse_sentinel_url;
using redlimit::parse_url;
using redlimit::redact_url;
using redlimit::SentinelEndpoint;

template <class Parse>
std::string sentinel_error_of(Parse parse) {
  try {
    parse();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

// An environment variable set for the life of the object.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~EnvVar() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST(SentinelUrl, HostsMasterNameAndDb) {
  const SentinelEndpoint s = parse_sentinel_url("redis-sentinel://s1:26380,s2,[::1]:26381/mymaster/3");
  ASSERT_EQ(s.sentinels.size(), 3u);
  EXPECT_EQ(s.sentinels[0].host, "s1");
  EXPECT_EQ(s.sentinels[0].port, 26380);
  EXPECT_EQ(s.sentinels[1].host, "s2");
  EXPECT_EQ(s.sentinels[1].port, 26379);  // Sentinel's default port, not 6379
  EXPECT_EQ(s.sentinels[2].host, "::1");
  EXPECT_EQ(s.sentinels[2].port, 26381);
  EXPECT_EQ(s.master_name, "mymaster");
  EXPECT_EQ(s.master.db, 3);
  EXPECT_TRUE(s.master.host.empty());  // discovery fills it in
  EXPECT_FALSE(s.master.tls.enabled);
}

TEST(SentinelUrl, DataAndSentinelCredentialsAreSeparate) {
  const SentinelEndpoint s = parse_sentinel_url(
      "Redis-Sentinel://app:data%40pw@s1,s2/cache?sentinel_user=watch&sentinel_password=s%26pw&db=2");
  EXPECT_EQ(s.master.username, "app");
  EXPECT_EQ(s.master.password, "data@pw");
  EXPECT_EQ(s.master.db, 2);
  for (const Endpoint& e : s.sentinels) {
    EXPECT_EQ(e.username, "watch");
    EXPECT_EQ(e.password, "s&pw");
    EXPECT_EQ(e.db, 0);
  }
  const SentinelEndpoint plain = parse_sentinel_url("redis-sentinel://s1/m?user=app&password=p");
  EXPECT_EQ(plain.master.username, "app");
  EXPECT_EQ(plain.master.password, "p");
  EXPECT_TRUE(plain.sentinels[0].password.empty());  // the data password is not the sentinels'
}

// rediss-sentinel://: TLS to the sentinels and to the master they name, with the same tls_*
// options (one CA, one client certificate); each server's name is checked against its own host
// unless tls_server_name gives one.
TEST(SentinelUrl, TlsGoesToTheSentinelsAndTheMasterAlike) {
  const SentinelEndpoint s = parse_sentinel_url(
      "rediss-sentinel://s1,s2:26380/cache/1?tls_ca_file=/ca.crt&tls_cert_file=/c.crt&tls_key_file=/c.key");
  EXPECT_TRUE(s.master.tls.enabled);
  EXPECT_EQ(s.master.tls.ca_file, "/ca.crt");
  EXPECT_EQ(s.master.db, 1);
  ASSERT_EQ(s.sentinels.size(), 2u);
  for (const Endpoint& e : s.sentinels) {
    EXPECT_TRUE(e.tls.enabled);
    EXPECT_EQ(e.tls.ca_file, "/ca.crt");
    EXPECT_EQ(e.tls.cert_file, "/c.crt");
    EXPECT_EQ(e.tls.key_file, "/c.key");
    EXPECT_TRUE(e.tls.server_name.empty());  // its own host
  }
  EXPECT_EQ(parse_sentinel_url("REDISS-SENTINEL://s1/m?tls_server_name=redis.internal").sentinels[0].tls.server_name,
            "redis.internal");
  EXPECT_TRUE(parse_sentinel_url("rediss-sentinel://s1/m").sentinels[0].tls.enabled);  // the system's CAs
}

// Before any I/O, whatever the failure policy (a policy that starts during an outage must not
// hide a configuration this build cannot serve): a build without TLS says so, a build with TLS
// names the CA file it could not read. Port 1 is never asked.
TEST(SentinelUrl, RedissSentinelIsRefusedOrPreparedBeforeAnyIo) {
  redlimit::Options o;
  o.on_failure = redlimit::OnFailure::fail_open;
  const std::string what = sentinel_error_of(
      [&] { redlimit::RateLimiter::connect("rediss-sentinel://127.0.0.1:1/m?tls_ca_file=/nonexistent/ca.pem", o); });
  if (redlimit::RedisConnection::has_tls()) {
    EXPECT_NE(what.find("cannot load the CA file \"/nonexistent/ca.pem\""), std::string::npos) << what;
  } else {
    EXPECT_NE(what.find("TLS (rediss://) is not supported by this hiredis build"), std::string::npos) << what;
  }
}

TEST(SentinelUrl, CheckInterval) {
  EXPECT_EQ(parse_sentinel_url("redis-sentinel://s1/m").check_interval_ms, 1000);
  EXPECT_EQ(parse_sentinel_url("redis-sentinel://s1/m?sentinel_check_ms=250").check_interval_ms, 250);
  EXPECT_EQ(parse_sentinel_url("redis-sentinel://s1/m?sentinel_check_ms=0").check_interval_ms, 0);
  EXPECT_THROW(parse_sentinel_url("redis-sentinel://s1/m?sentinel_check_ms=-1"), InvalidArgument);
  EXPECT_THROW(parse_sentinel_url("redis-sentinel://s1/m?sentinel_check_ms=x"), InvalidArgument);
  EXPECT_THROW(parse_url("redis://h?sentinel_check_ms=5"), InvalidArgument);
}

TEST(SentinelUrl, MasterNameIsPercentDecoded) {
  EXPECT_EQ(parse_sentinel_url("redis-sentinel://s1/my%2Fmaster").master_name, "my/master");
  EXPECT_EQ(parse_sentinel_url("redis-sentinel://s1/m/").master.db, 0);
}

TEST(SentinelUrl, MistakesAreInvalidArgumentsThatSayWhat) {
  const auto says = [](const char* url, const char* what) {
    const std::string e = sentinel_error_of([&] { parse_sentinel_url(url); });
    EXPECT_NE(e.find(what), std::string::npos) << url << " -> " << e;
  };
  says("redis-sentinel://s1", "names its master");
  says("redis-sentinel://s1/", "names its master");
  says("redis-sentinel://s1,,s2/m", "empty host");
  says("redis-sentinel://s1:0/m", "port must be");
  says("redis-sentinel://s1/m/x", "db must be");
  says("redis-sentinel://s1/m/1/2", "db must be");
  says("redis-sentinel://s1/m?tls_ca_file=/x", "tls_ca_file needs a rediss-sentinel:// URL");
  says("rediss-sentinel://s1/m?tls_nope=1", "unknown TLS parameter");
  says("redis-sentinel://s1/m?nope=1", "unknown query parameter");
  says("redis-sentinel://s1/m?sentinel_user=u", "sentinel_user needs a sentinel password");
  says("sentinel://s1/m", "scheme must be redis-sentinel:// or rediss-sentinel://");
  EXPECT_NE(sentinel_error_of([] { parse_url("redis://h?sentinel_password=x"); }).find("needs a redis-sentinel:// URL"),
            std::string::npos);
  // A Sentinel URL written with another scheme: the master name is not a db.
  EXPECT_NE(sentinel_error_of([] { parse_url("redis://s1:26379/mymaster"); }).find("db must be"), std::string::npos);
  // A single connection cannot take a URL of several servers.
  EXPECT_NE(sentinel_error_of([] { parse_url("redis-sentinel://s1/m"); }).find("names several servers"),
            std::string::npos);
  EXPECT_NE(sentinel_error_of([] { parse_url("rediss-sentinel://s1/m"); }).find("names several servers"),
            std::string::npos);
}

TEST(SentinelUrl, PasswordsNeverShowInItsErrors) {
  const std::string e =
      sentinel_error_of([] { parse_sentinel_url("redis-sentinel://app:s3cret@s1/m?sentinel_password=t0p&x=1"); });
  EXPECT_NE(e.find("unknown query parameter"), std::string::npos) << e;
  EXPECT_EQ(e.find("s3cret"), std::string::npos) << e;
  EXPECT_EQ(e.find("t0p"), std::string::npos) << e;
  EXPECT_EQ(redact_url("redis-sentinel://s1/m?sentinel_password=t0p&db=1"),
            "redis-sentinel://s1/m?sentinel_password=***&db=1");
}

TEST(PasswordEnv, ReadsThePasswordFromTheNamedVariable) {
  const EnvVar data("REDLIMIT_TEST_DATA_PW", "from-env@:/");
  const EnvVar watch("REDLIMIT_TEST_SENTINEL_PW", "sentinel-env");
  const Endpoint tcp = parse_url("redis://h:1/2?user=app&password_env=REDLIMIT_TEST_DATA_PW");
  EXPECT_EQ(tcp.username, "app");
  EXPECT_EQ(tcp.password, "from-env@:/");
  EXPECT_EQ(parse_url("unix:///tmp/r.sock?password_env=REDLIMIT_TEST_DATA_PW").password, "from-env@:/");
  EXPECT_EQ(parse_url("rediss://h?password_env=REDLIMIT_TEST_DATA_PW").password, "from-env@:/");
  const SentinelEndpoint s = parse_sentinel_url(
      "redis-sentinel://s1,s2/"
      "m?user=app&password_env=REDLIMIT_TEST_DATA_PW&sentinel_password_env=REDLIMIT_TEST_SENTINEL_PW");
  EXPECT_EQ(s.master.password, "from-env@:/");
  EXPECT_EQ(s.sentinels[1].password, "sentinel-env");
}

TEST(PasswordEnv, AMissingOrEmptyVariableIsNamedNeverAValue) {
  ::unsetenv("REDLIMIT_TEST_UNSET_PW");
  const std::string unset = sentinel_error_of([] { parse_url("redis://h?password_env=REDLIMIT_TEST_UNSET_PW"); });
  EXPECT_NE(unset.find("password_env: the environment variable REDLIMIT_TEST_UNSET_PW is not set"), std::string::npos)
      << unset;
  const std::string sentinel = sentinel_error_of(
      [] { parse_sentinel_url("redis-sentinel://s1/m?sentinel_password_env=REDLIMIT_TEST_UNSET_PW"); });
  EXPECT_NE(sentinel.find("sentinel_password_env: the environment variable REDLIMIT_TEST_UNSET_PW is not set"),
            std::string::npos)
      << sentinel;
  const EnvVar empty("REDLIMIT_TEST_EMPTY_PW", "");
  EXPECT_NE(sentinel_error_of([] { parse_url("redis://h?password_env=REDLIMIT_TEST_EMPTY_PW"); }).find("is empty"),
            std::string::npos);
  EXPECT_NE(
      sentinel_error_of([] { parse_url("redis://h?password_env=1BAD"); }).find("must name an environment variable"),
      std::string::npos);
  EXPECT_NE(sentinel_error_of([] { parse_url("redis://h?password_env="); }).find("must name an environment variable"),
            std::string::npos);
}

TEST(PasswordEnv, APasswordGivenTwiceIsRefusedWithoutShowingIt) {
  const EnvVar pw("REDLIMIT_TEST_DATA_PW", "env-value");
  for (const char* url : {"redis://:inline-pw@h?password_env=REDLIMIT_TEST_DATA_PW",
                          "redis://h?password=inline-pw&password_env=REDLIMIT_TEST_DATA_PW"}) {
    const std::string e = sentinel_error_of([&] { parse_url(url); });
    EXPECT_NE(e.find("a password and password_env are given"), std::string::npos) << e;
    EXPECT_EQ(e.find("inline-pw"), std::string::npos) << e;
    EXPECT_EQ(e.find("env-value"), std::string::npos) << e;
  }
}

}  // namespace
