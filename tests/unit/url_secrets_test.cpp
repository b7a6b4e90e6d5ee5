// Issue 17, items 5 and 7: URLs in messages never show a password, unprintable bytes are escaped
// (a NUL used to cut the message short), and schemes are case-insensitive.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/rate_limiter.hpp"
#include "redlimit/transport/cluster_connection.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "redlimit/url.hpp"

namespace {

using namespace std::string_literals;
using redlimit::InvalidArgument;
using redlimit::parse_url;
using redlimit::redact_url;

std::string error_of(const std::string& url) {
  try {
    parse_url(url);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << url;
  return {};
}

TEST(UrlSecrets, ErrorsNeverQuoteThePassword) {
  for (const std::string url : {"redis://user:s3cret@127.0.0.1:99999", "redis://:s3cret@127.0.0.1:0/1",
                                "redis://s3cret@[::1:6379", "redis://user:s3c@ret@host:port",
                                "redis://user:s3c/ret@host:1/x", "unix:///tmp/r.sock?password=s3cret&db=x",
                                "rediss://user:s3cret@host:6380?tls_bogus=1", "redis://:s3c?ret@host",
                                "redis://:s3c?r@et@host:1/x", "rediss://host?password=s3c@ret&tls_bogus=1",
                                "redis://host?user=u&password=s3cret&db=x"}) {
    SCOPED_TRACE(url);
    const std::string what = error_of(url);
    EXPECT_EQ(what.find("s3c"), std::string::npos) << what;
    EXPECT_NE(what.find("***"), std::string::npos) << what;
  }
}

// The audit's leaks (audit_api.md, finding 4): a password key in another case or misspelled, which
// the parser refuses, and a raw '&' inside a password, whose tail the parser takes for a part of its
// own. Each URL is refused; neither the message's URL nor its reason may show any of the secret.
TEST(UrlSecrets, MisspelledKeysAndRawAmpersandsKeepThePasswordHidden) {
  struct Case {
    std::string url;
    std::vector<std::string> secret;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"redis://cache.internal:6379/0?password=Tr0ub&dor", {"Tr0ub", "dor"}, "a query part after a password has no '='"},
      {"redis://cache.internal:6379/0?user=app&Password=hunter2", {"hunter2"}, "unknown query parameter \"Password\""},
      {"redis://cache.internal:6379/0?user=app&pasword=hunter2", {"hunter2"}, "unknown query parameter \"pasword\""},
      {"redis-sentinel://s1:26379/mymaster?SENTINEL_PASSWORD=topsecret", {"topsecret"},
       "unknown query parameter \"SENTINEL_PASSWORD\""},
      {"rediss://cache.internal?password=s3cr&t&tls_ca_file=/etc/ca.pem", {"s3cr", "&t&", "\"t\""}, "a query part after a password has no '='"},
      {"redis://h?password=ab&cd=ef", {"ab", "cd"}, "unknown query parameter after a password"},
  };
  for (const auto& [url, secret, says] : cases) {
    SCOPED_TRACE(url);
    try {
      redlimit::RateLimiter::connect(url);  // refused while parsing, before any I/O
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(says), std::string::npos) << what;
      for (const auto& part : secret) EXPECT_EQ(what.find(part), std::string::npos) << part << " in " << what;
      EXPECT_NE(what.find("=***"), std::string::npos) << what;
    }
  }
}

TEST(UrlSecrets, RedactionReadsASecretToTheNextParameterItKnows) {
  EXPECT_EQ(redact_url("redis://h?password=Tr0ub&dor"), "redis://h?password=***");
  EXPECT_EQ(redact_url("rediss://h?password=s3cr&t&tls_ca_file=/ca.pem"), "rediss://h?password=***&tls_ca_file=/ca.pem");
  EXPECT_EQ(redact_url("redis://h?password=a&db=1&zzz"), "redis://h?password=***");  // "a&db=1&zzz" may be one
  EXPECT_EQ(redact_url("redis://h?user=app&Password=hunter2&db=1"), "redis://h?user=app&Password=***&db=1");
  EXPECT_EQ(redact_url("redis://h?PASS=x&my_passphrase=y"), "redis://h?PASS=***");
  EXPECT_EQ(redact_url("redis://h?db=1&nope=1&user=u"), "redis://h?db=1&nope=***&user=u");  // any key it does not take
  EXPECT_EQ(redact_url("redis-sentinel://s1/m?SENTINEL_PASSWORD=t0p"), "redis-sentinel://s1/m?SENTINEL_PASSWORD=***");
  // A variable's name is no secret, and errors about it name it.
  EXPECT_EQ(redact_url("redis://h?user=u&password_env=PW"), "redis://h?user=u&password_env=PW");
  EXPECT_EQ(redact_url("redis://h?password=pw&password_env=PW"), "redis://h?password=***&password_env=PW");
  // A raw '?' in the userinfo's password: the '@' after it may end the userinfo, which stays hidden.
  const std::string both = redact_url("redis://:a1?pass=b2@host");
  EXPECT_EQ(both.find("a1"), std::string::npos) << both;
  EXPECT_EQ(both.find("b2"), std::string::npos) << both;
}

TEST(UrlSecrets, RedactionKeepsWhatHelpsFindTheServer) {
  EXPECT_EQ(redact_url("redis://user:pw@cache:6380/2"), "redis://user:***@cache:6380/2");
  EXPECT_EQ(redact_url("redis://:pw@cache"), "redis://:***@cache");
  EXPECT_EQ(redact_url("redis://pw@cache"), "redis://***@cache");
  EXPECT_EQ(redact_url("redis://cache:6379/0"), "redis://cache:6379/0");
  EXPECT_EQ(redact_url("unix:///r.sock?db=1&password=pw"), "unix:///r.sock?db=1&password=***");
  EXPECT_EQ(redact_url("redis-cluster://u:pw@a:1,b:2"), "redis-cluster://u:***@a:1,b:2");
}

TEST(UrlSecrets, UnprintableBytesAreEscapedNotCut) {
  const std::string what = error_of("redis://ho\0st-after-nul:6379"s);
  EXPECT_NE(what.find("ho\\x00st-after-nul"), std::string::npos) << what;
  EXPECT_NE(redact_url("redis://a\x1b[31mb"s).find("\\x1b"), std::string::npos);
}

TEST(UrlSecrets, SchemesAreCaseInsensitive) {
  const redlimit::Endpoint e = parse_url("REDIS://cache.example.com:6380/2");
  EXPECT_EQ(e.host, "cache.example.com");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.db, 2);
  EXPECT_EQ(parse_url("Unix:///tmp/r.sock").unix_path, "/tmp/r.sock");
  EXPECT_TRUE(redlimit::has_scheme("Redis-Cluster://a:1", "redis-cluster://"));
  EXPECT_FALSE(redlimit::has_scheme("redis:/", "redis://"));
}

TEST(UrlSecrets, ClusterUrlsToo) {
  for (const std::string url : {"redis-cluster://u:s3cret@a:1,,b:2", "redis-cluster://u:s3cret@a:1/3",
                                "redis-cluster://u:s3cret@a:99999", "redis://u:s3cret@a:1"}) {
    SCOPED_TRACE(url);
    try {
      redlimit::parse_cluster_url(url);
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()).find("s3c"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(redlimit::parse_cluster_url("REDIS-CLUSTER://a:1,b:2").seeds.size(), 2u);
}

// rediss-cluster:// (issue 15): the seeds of a TLS cluster, each with the URL's credentials and TLS
// options (the nodes found later get the first seed's).
TEST(ClusterUrls, RedissClusterGivesEverySeedTheTlsOptionsAndCredentials) {
  const auto c = redlimit::parse_cluster_url(
      "rediss-cluster://app:p%40ss@10.0.0.1:7000,[::1]:7001,cache.internal:7002?tls_ca_file=/etc/ca%20s.pem"
      "&tls_ca_dir=/etc/cas&tls_cert_file=/c.pem&tls_key_file=/k.pem&tls_server_name=redis.internal&db=0");
  ASSERT_EQ(c.seeds.size(), 3u);
  const std::vector<std::pair<std::string, int>> hosts = {{"10.0.0.1", 7000}, {"::1", 7001}, {"cache.internal", 7002}};
  for (std::size_t i = 0; i < c.seeds.size(); ++i) {
    const redlimit::Endpoint& e = c.seeds[i];
    SCOPED_TRACE(e.host);
    EXPECT_EQ(e.host, hosts[i].first);
    EXPECT_EQ(e.port, hosts[i].second);
    EXPECT_EQ(e.username, "app");
    EXPECT_EQ(e.password, "p@ss");
    EXPECT_EQ(e.db, 0);
    EXPECT_TRUE(e.tls.enabled);
    EXPECT_EQ(e.tls.ca_file, "/etc/ca s.pem");
    EXPECT_EQ(e.tls.ca_dir, "/etc/cas");
    EXPECT_EQ(e.tls.cert_file, "/c.pem");
    EXPECT_EQ(e.tls.key_file, "/k.pem");
    EXPECT_EQ(e.tls.server_name, "redis.internal");
    EXPECT_FALSE(e.tls.insecure_skip_verify);
  }
  const auto plain = redlimit::parse_cluster_url("REDISS-CLUSTER://h:1/");
  ASSERT_EQ(plain.seeds.size(), 1u);
  EXPECT_TRUE(plain.seeds[0].tls.enabled);
  EXPECT_TRUE(plain.seeds[0].tls.ca_file.empty());
  EXPECT_TRUE(redlimit::parse_cluster_url("rediss-cluster://h:1?tls_insecure_skip_verify=true")
                  .seeds[0]
                  .tls.insecure_skip_verify);
  EXPECT_FALSE(redlimit::parse_cluster_url("redis-cluster://h:1").seeds[0].tls.enabled);
}

TEST(ClusterUrls, CredentialsFromTheQueryAndTheEnvironmentOnBothSchemes) {
  ::setenv("REDLIMIT_TEST_CLUSTER_PW", "from-env@:/", 1);
  for (const std::string scheme : {"redis-cluster://", "rediss-cluster://"}) {
    SCOPED_TRACE(scheme);
    const auto q = redlimit::parse_cluster_url(scheme + "a:1,b:2?user=app&password=pw");
    const auto env = redlimit::parse_cluster_url(scheme + "a:1,b:2?user=app&password_env=REDLIMIT_TEST_CLUSTER_PW");
    for (const auto* c : {&q, &env}) {
      ASSERT_EQ(c->seeds.size(), 2u);
      for (const auto& e : c->seeds) {
        EXPECT_EQ(e.username, "app");
        EXPECT_EQ(e.tls.enabled, scheme == "rediss-cluster://");
      }
    }
    EXPECT_EQ(q.seeds[1].password, "pw");
    EXPECT_EQ(env.seeds[1].password, "from-env@:/");
  }
  ::unsetenv("REDLIMIT_TEST_CLUSTER_PW");
}

// Everything rediss:// refuses, plus a db other than 0, before any I/O; the message quotes the URL
// as it was written (redacted), not the seed URL made of it.
TEST(ClusterUrls, BadFormsAreRefusedWithoutThePassword) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rediss-cluster://u:s3cret@a:1?db=2", "a cluster has only database 0"},
      {"rediss-cluster://u:s3cret@a:1/2", "a cluster has only database 0; no /db part"},
      {"rediss-cluster://u:s3cret@a:1?tls_bogus=1", "unknown TLS parameter \"tls_bogus\""},
      {"rediss-cluster://u:s3cret@a:1?tls_cert_file=/c", "tls_cert_file and tls_key_file go together"},
      {"rediss-cluster://u:s3cret@a:1?tls_ca_file=", "tls_ca_file must not be empty"},
      {"rediss-cluster://u:s3cret@a:1?tls_insecure_skip_verify=maybe", "must be true or false"},
      {"rediss-cluster://u:s3cret@a:1?nope=1", "unknown query parameter \"nope\""},
      {"rediss-cluster://u:s3cret@a:1?sentinel_user=x", "needs a redis-sentinel:// URL"},
      {"rediss-cluster://u:s3cret@a:1?db", "has no '='"},
      {"redis-cluster://u:s3cret@a:1?tls_ca_file=/ca.pem", "tls_ca_file needs a rediss-cluster:// URL"},
      {"rediss-cluster://u:s3cret@a:1,,b:2", "empty seed node"},
      {"rediss-cluster://u:s3cret@a:99999", "port must be a number in [1, 65535]"},
      {"rediss-cluster://:s3c?ret@a:1", "'@' after '?'"},
      {"rediss-cluster://a:1?password=s3cret&password_env=REDLIMIT_TEST_CLUSTER_PW",
       "a password and password_env are given: use one"},
      {"rediss-cluster://a:1?user=u&password_env=REDLIMIT_TEST_UNSET_VARIABLE",
       "the environment variable REDLIMIT_TEST_UNSET_VARIABLE is not set"},
      {"redis-clusters://u:s3cret@a:1", "scheme must be redis-cluster:// or rediss-cluster://"},
  };
  ::setenv("REDLIMIT_TEST_CLUSTER_PW", "x", 1);
  ::unsetenv("REDLIMIT_TEST_UNSET_VARIABLE");
  for (const auto& [url, says] : cases) {
    SCOPED_TRACE(url);
    try {
      redlimit::parse_cluster_url(url);
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(says), std::string::npos) << what;
      EXPECT_EQ(what.find("s3c"), std::string::npos) << what;
      EXPECT_NE(what.find("URL \"" + redact_url(url) + "\": "), std::string::npos) << what;
    }
  }
  ::unsetenv("REDLIMIT_TEST_CLUSTER_PW");
  // A single connection takes one server's URL.
  EXPECT_THROW(parse_url("rediss-cluster://a:1"), InvalidArgument);
}

TEST(ClusterUrls, RedactionHidesPasswordsOfTlsClusterUrls) {
  EXPECT_EQ(redact_url("rediss-cluster://u:pw@a:1,b:2?tls_ca_file=/ca.pem"),
            "rediss-cluster://u:***@a:1,b:2?tls_ca_file=/ca.pem");
  EXPECT_EQ(redact_url("rediss-cluster://pw@a:1"), "rediss-cluster://***@a:1");
  EXPECT_EQ(redact_url("rediss-cluster://a:1,b:2?user=u&password=pw&tls_cert_file=/c.pem"),
            "rediss-cluster://a:1,b:2?user=u&password=***&tls_cert_file=/c.pem");
}

// Before any I/O, as for rediss://: a build without TLS says so (hiredis 0.14), a build with TLS
// loads the files the URL names (and says which one it could not read). Port 1: nothing listens.
TEST(ClusterUrls, RedissClusterIsRefusedOrPreparedBeforeAnyIo) {
  for (const auto policy : {redlimit::OnFailure::raise, redlimit::OnFailure::fail_open}) {
    redlimit::Options options;
    options.on_failure = policy;
    try {
      redlimit::RateLimiter::connect("rediss-cluster://127.0.0.1:1,127.0.0.1:2?tls_ca_file=/nonexistent/ca.pem",
                                     options);
      ADD_FAILURE() << "a limiter over rediss-cluster:// with an unreadable CA file was made";
    } catch (const InvalidArgument& err) {
      const std::string what = err.what();
      if (redlimit::RedisConnection::has_tls()) {
        EXPECT_NE(what.find("cannot load the CA file \"/nonexistent/ca.pem\""), std::string::npos) << what;
      } else {
        EXPECT_NE(what.find("TLS (rediss://) is not supported by this hiredis build"), std::string::npos) << what;
      }
    }
  }
}

}  // namespace
