// Issue 17, items 5 and 7: URLs in messages never show a password, unprintable bytes are escaped
// (a NUL used to cut the message short), and schemes are case-insensitive.
#include <gtest/gtest.h>

#include <string>

#include "redlimit/errors.hpp"
#include "redlimit/transport/cluster_connection.hpp"
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

}  // namespace
