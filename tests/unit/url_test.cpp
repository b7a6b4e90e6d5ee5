// parse_url: redis:// and unix:// URLs into an Endpoint; malformed URLs throw InvalidArgument.
#include "redlimit/url.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/transport/redis_connection.hpp"

namespace {

using redlimit::Endpoint;
using redlimit::InvalidArgument;
using redlimit::parse_url;

TEST(UrlTest, HostPortAndDb) {
  const Endpoint e = parse_url("redis://cache.example.com:6380/2");
  EXPECT_EQ(e.host, "cache.example.com");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.db, 2);
  EXPECT_TRUE(e.unix_path.empty());
  EXPECT_TRUE(e.username.empty());
  EXPECT_TRUE(e.password.empty());
}

TEST(UrlTest, Ipv4Host) {
  const Endpoint e = parse_url("redis://127.0.0.1:6379/0");
  EXPECT_EQ(e.host, "127.0.0.1");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.db, 0);
}

TEST(UrlTest, DefaultPortAndDb) {
  const Endpoint e = parse_url("redis://localhost");
  EXPECT_EQ(e.host, "localhost");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.db, 0);
  EXPECT_TRUE(e.password.empty());
}

TEST(UrlTest, TrailingSlashMeansDbZero) {
  const Endpoint e = parse_url("redis://localhost:7000/");
  EXPECT_EQ(e.port, 7000);
  EXPECT_EQ(e.db, 0);
}

TEST(UrlTest, DbWithoutPort) {
  const Endpoint e = parse_url("redis://localhost/15");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.db, 15);
}

TEST(UrlTest, PortBounds) {
  EXPECT_EQ(parse_url("redis://h:1").port, 1);
  EXPECT_EQ(parse_url("redis://h:65535").port, 65535);
}

TEST(UrlTest, PasswordOnly) {
  const Endpoint e = parse_url("redis://:s3cret@db.internal:6390/4");
  EXPECT_EQ(e.host, "db.internal");
  EXPECT_EQ(e.port, 6390);
  EXPECT_EQ(e.db, 4);
  EXPECT_TRUE(e.username.empty());
  EXPECT_EQ(e.password, "s3cret");
}

TEST(UrlTest, PasswordWithDefaultPort) {
  const Endpoint e = parse_url("redis://:pw@host");
  EXPECT_EQ(e.host, "host");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.password, "pw");
  EXPECT_TRUE(e.username.empty());
}

TEST(UrlTest, UserAndPassword) {
  const Endpoint e = parse_url("redis://alice:wonderland@host:6379/1");
  EXPECT_EQ(e.username, "alice");
  EXPECT_EQ(e.password, "wonderland");
  EXPECT_EQ(e.host, "host");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.db, 1);
}

TEST(UrlTest, PercentEncodedPassword) {
  const Endpoint e = parse_url("redis://:p%40ss%3Aw%2Frd%25@host:6379");
  EXPECT_EQ(e.password, "p@ss:w/rd%");
  EXPECT_EQ(e.host, "host");
}

TEST(UrlTest, PercentEncodedUserAndPassword) {
  const Endpoint e = parse_url("redis://us%65r:p%2fw@host");
  EXPECT_EQ(e.username, "user");
  EXPECT_EQ(e.password, "p/w");
}

TEST(UrlTest, Ipv6WithPort) {
  const Endpoint e = parse_url("redis://[::1]:7000");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 7000);
  EXPECT_EQ(e.db, 0);
}

TEST(UrlTest, Ipv6DefaultPort) {
  const Endpoint e = parse_url("redis://[2001:db8::7]/3");
  EXPECT_EQ(e.host, "2001:db8::7");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.db, 3);
}

TEST(UrlTest, Ipv6WithCredentials) {
  const Endpoint e = parse_url("redis://bob:pw@[::1]:7001/2");
  EXPECT_EQ(e.username, "bob");
  EXPECT_EQ(e.password, "pw");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 7001);
  EXPECT_EQ(e.db, 2);
}

TEST(UrlTest, AHostNoResolverReadsIsRefusedBeforeAnyIo) {
  // These failed only at connect, as a ConnectionError (or, under fail_open, not at all).
  for (const char* url : {"redis://host#frag", "redis://ho st:6379", "redis://ho%20st", "rediss://h!:6379",
                          "redis://[::1x]:7000", "redis://[fe80::1%eth0]", "redis://[fe80::1%25]",
                          "redis://[fe80::1%25e#0]"}) {
    try {
      parse_url(url);
      ADD_FAILURE() << url << " was taken";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("host") != std::string::npos || what.find("zone") != std::string::npos)
          << url << ": " << what;
    }
  }
  const Endpoint named = parse_url("redis://redis_primary-1.internal:6380");
  EXPECT_EQ(named.host, "redis_primary-1.internal");
  // An IPv6 zone as RFC 6874 writes it in a URL, handed to the resolver as it reads one.
  const Endpoint zoned = parse_url("redis://[fe80::1%25eth0]:7000");
  EXPECT_EQ(zoned.host, "fe80::1%eth0");
  EXPECT_EQ(zoned.port, 7000);
  const Endpoint v4in6 = parse_url("redis://[::ffff:127.0.0.1]");
  EXPECT_EQ(v4in6.host, "::ffff:127.0.0.1");
}

TEST(UrlTest, ASettingGivenTwiceIsRefusedRatherThanTheLastOneTaken) {
  for (const char* url : {"redis://h/2?db=3", "redis://h?db=3&db=4", "redis://:a@h?password=b",
                          "redis://app:a@h?username=ops", "redis://h?user=a&username=b",
                          "unix:///tmp/r.sock?db=1&db=2", "rediss://h?tls_ca_file=/a&tls_ca_file=/b",
                          "redis-sentinel://s1/mymaster/2?db=3"}) {
    try {
      if (std::string(url).rfind("redis-sentinel", 0) == 0) {
        redlimit::parse_sentinel_url(url);
      } else {
        parse_url(url);
      }
      ADD_FAILURE() << url << " was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("given twice"), std::string::npos) << url << ": " << e.what();
    }
  }
  // A password before the host and the ACL user in the query name each once.
  const Endpoint e = parse_url("redis://:secret@h?user=app");
  EXPECT_EQ(e.username, "app");
  EXPECT_EQ(e.password, "secret");
  // unix:// refuses an '@' after its '?' as the other schemes do (connecting.md).
  EXPECT_THROW(parse_url("unix:///tmp/r.sock?password=a@b"), InvalidArgument);
  EXPECT_EQ(parse_url("unix:///tmp/r.sock?password=a%40b").password, "a@b");
}

TEST(UrlTest, UnixSocket) {
  const Endpoint e = parse_url("unix:///var/run/redis/redis.sock");
  EXPECT_EQ(e.unix_path, "/var/run/redis/redis.sock");
  EXPECT_TRUE(e.host.empty());
  EXPECT_EQ(e.db, 0);
  EXPECT_TRUE(e.password.empty());
}

TEST(UrlTest, UnixSocketWithDbAndPassword) {
  const Endpoint e = parse_url("unix:///tmp/redis.sock?db=3&password=x");
  EXPECT_EQ(e.unix_path, "/tmp/redis.sock");
  EXPECT_TRUE(e.host.empty());
  EXPECT_EQ(e.db, 3);
  EXPECT_EQ(e.password, "x");
}

TEST(UrlTest, UnixSocketQueryInAnyOrder) {
  const Endpoint e = parse_url("unix:///tmp/redis.sock?password=pw&db=7");
  EXPECT_EQ(e.unix_path, "/tmp/redis.sock");
  EXPECT_EQ(e.db, 7);
  EXPECT_EQ(e.password, "pw");
}

TEST(UrlTest, UnixSocketPercentEncodedPassword) {
  const Endpoint e = parse_url("unix:///tmp/redis.sock?password=a%26b%3Dc");
  EXPECT_EQ(e.password, "a&b=c");
}

class BadUrlTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BadUrlTest, ThrowsInvalidArgument) {
  const std::string url = GetParam();
  EXPECT_THROW(parse_url(url), InvalidArgument) << "url: " << url;
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, BadUrlTest,
    ::testing::Values(
        // scheme
        "", "localhost:6379", "http://localhost:6379", "redis:/localhost", "tcp://localhost",
        // TLS parameters
        "redis://localhost?tls_ca_file=/x", "unix:///tmp/x.sock?tls_ca_file=/x", "rediss://h?tls_bogus=1",
        "rediss://h?tls_cert_file=/c", "rediss://h?tls_key_file=/k", "rediss://h?tls_ca_file=",
        "rediss://h?tls_insecure_skip_verify=maybe", "rediss://h?db", "rediss://h?nope=1",
        // port
        "redis://localhost:abc", "redis://localhost:0", "redis://localhost:65536", "redis://localhost:-1",
        "redis://localhost:", "redis://localhost:99999999999", "redis://[::1]:", "redis://[::1]x",
        // db
        "redis://localhost/-1", "redis://localhost/abc", "redis://localhost:6379/1x", "redis://localhost/1.5",
        // host
        "redis://", "redis://:6379", "redis://:pw@", "redis://:pw@:6379/0", "redis:///0", "redis://[]:6379",
        "redis://[::1",
        // unix path and query
        "unix://", "unix://?db=1", "unix:///tmp/x.sock?db=-1", "unix:///tmp/x.sock?db=abc",
        // percent-escapes
        "redis://:pw%zz@host", "redis://:pw%4@host"),
    [](const ::testing::TestParamInfo<const char*>& info) { return "case" + std::to_string(info.index); });

TEST(UrlTest, RedissParsesItsTlsOptions) {
  const Endpoint plain = parse_url("rediss://cache.example.com");
  EXPECT_TRUE(plain.tls.enabled);
  EXPECT_EQ(plain.host, "cache.example.com");
  EXPECT_EQ(plain.port, 6379);
  EXPECT_FALSE(plain.tls.insecure_skip_verify);
  EXPECT_TRUE(plain.tls.ca_file.empty());

  const Endpoint e = parse_url(
      "REDISS://app:pw@10.0.0.7:6380/2?tls_ca_file=/etc/ca%20s.pem&tls_ca_dir=/etc/cas&tls_cert_file=/c.pem"
      "&tls_key_file=/k.pem&tls_server_name=redis.internal&tls_insecure_skip_verify=true");
  EXPECT_TRUE(e.tls.enabled);
  EXPECT_EQ(e.host, "10.0.0.7");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.db, 2);
  EXPECT_EQ(e.username, "app");
  EXPECT_EQ(e.password, "pw");
  EXPECT_EQ(e.tls.ca_file, "/etc/ca s.pem");
  EXPECT_EQ(e.tls.ca_dir, "/etc/cas");
  EXPECT_EQ(e.tls.cert_file, "/c.pem");
  EXPECT_EQ(e.tls.key_file, "/k.pem");
  EXPECT_EQ(e.tls.server_name, "redis.internal");
  EXPECT_TRUE(e.tls.insecure_skip_verify);
  EXPECT_FALSE(parse_url("redis://h").tls.enabled);
  EXPECT_EQ(parse_url("redis://h?db=3&user=u&password=p").db, 3) << "query parameters on TCP URLs too";
}

TEST(UrlTest, TlsParametersNeedRedissAndExplainWhy) {
  try {
    parse_url("redis://localhost?tls_ca_file=/ca.pem");
    FAIL() << "tls_ca_file was accepted on redis://";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("rediss://"), std::string::npos) << e.what();
  }
}

// Before any I/O either way: a build without TLS says so (hiredis 0.14), a build with TLS loads the
// CA file the URL names (and says which one it could not read).
TEST(UrlTest, RedissIsRefusedOrPreparedBeforeAnyIo) {
  const Endpoint e = parse_url("rediss://127.0.0.1:1?tls_ca_file=/nonexistent/ca.pem");
  try {
    redlimit::RedisConnection conn(e, std::chrono::milliseconds(100), std::chrono::milliseconds(100));
    FAIL() << "a connection to rediss:// with an unreadable CA file was made";
  } catch (const InvalidArgument& err) {
    const std::string what = err.what();
    if (redlimit::RedisConnection::has_tls()) {
      EXPECT_NE(what.find("cannot load the CA file \"/nonexistent/ca.pem\""), std::string::npos) << what;
    } else {
      EXPECT_NE(what.find("TLS (rediss://) is not supported by this hiredis build"), std::string::npos) << what;
    }
  }
}

TEST(UrlTest, AnAtSignAfterTheQueryIsRefusedWithoutQuotingIt) {
  for (const char* url : {"redis://:pa?ss@host", "rediss://host?tls_ca_file=/a@b"}) {
    try {
      parse_url(url);
      FAIL() << url;
    } catch (const InvalidArgument& err) {
      const std::string what = err.what();
      EXPECT_NE(what.find("%3F"), std::string::npos) << what;
      EXPECT_EQ(what.find("pa?ss"), std::string::npos) << what;
    }
  }
}

// The TLS code hands the tls_* values to OpenSSL as C strings: a percent-encoded NUL used to cut a
// CA file or the name checked against the certificate short without a word (audit_api.md, finding
// 6). Every decoded control byte is refused before any I/O, the parameter named, its value not.
TEST(UrlTest, DecodedControlBytesInTlsParametersAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rediss://redis.internal?tls_ca_file=/etc/ssl/certs/ca.crt%00.bogus", "tls_ca_file"},
      {"rediss://10.0.0.5?tls_server_name=redis.example.com%00.attacker.test", "tls_server_name"},
      {"rediss://redis.internal?tls_server_name=a%0D%0Ab", "tls_server_name"},
      {"rediss://h?tls_ca_dir=/etc/cas%09", "tls_ca_dir"},
      {"rediss://h?tls_cert_file=/c.pem%7F&tls_key_file=/k.pem", "tls_cert_file"},
      {"rediss://h?tls_cert_file=/c.pem&tls_key_file=%1F/k.pem", "tls_key_file"},
  };
  for (const auto& [url, name] : cases) {
    SCOPED_TRACE(url);
    try {
      parse_url(url);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(name + " must not hold control bytes"), std::string::npos) << what;
    }
  }
  // Printable bytes, percent-encoded or not, are still taken.
  EXPECT_EQ(parse_url("rediss://h?tls_ca_file=/etc/ca%20s.pem%7E").tls.ca_file, "/etc/ca s.pem~");
  EXPECT_EQ(parse_url("rediss://h?tls_server_name=caf%C3%A9.internal").tls.server_name, "caf\xc3\xa9.internal");
}

TEST(UrlTest, ErrorsAreRedlimitErrors) {
  EXPECT_THROW(parse_url("http://x"), redlimit::Error);
}

}  // namespace

// hiredis takes the host and socket path as C strings: a NUL would cut them and connect elsewhere.
TEST(UrlControlBytes, NulAndControlBytesAreRejected) {
  using namespace std::string_literals;
  EXPECT_THROW(redlimit::parse_url("redis://evil\0.example.com:6379"s), redlimit::InvalidArgument);
  EXPECT_THROW(redlimit::parse_url("unix:///tmp/a.sock\0/../x"s), redlimit::InvalidArgument);
  EXPECT_THROW(redlimit::parse_url("redis://host\n:6379"), redlimit::InvalidArgument);
  EXPECT_THROW(redlimit::parse_url("redis://:pass\x7fword@host"), redlimit::InvalidArgument);
  EXPECT_EQ(redlimit::parse_url("redis://example.com:6379").host, "example.com");
}
