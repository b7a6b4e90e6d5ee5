// redlimit/http.hpp over decisions Redis made: a policy's RateLimit items state each limit's own
// remaining and reset, as lua/policy.lua returns them (the unit suite holds the same strings for the
// memory backend, 20 s into a minute; kT0 is on a whole hour).
#include "redlimit/http.hpp"

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::http::Field;
using Fields = std::vector<Field>;

class HttpTest : public StrictRedisTest {};

TEST_F(HttpTest, PolicyItemsAreEachLimitsOwnOnRedis) {
  const auto api = rl().policy("api", redlimit::parse_limits("10/s; 300/min; 1000/h"));
  const auto quotas = redlimit::http::quotas(api.limits());
  redlimit::http::HeaderOptions o;
  o.policy_field = false;
  at(0s);
  EXPECT_EQ(redlimit::http::headers(api.consume("k"), quotas, o),
            (Fields{{"RateLimit", R"("10/1s";r=9;t=2, "300/1m";r=299;t=120, "1000/1h";r=999;t=7200)"}}));
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(api.consume("k").allowed);
  const Decision d = api.consume("k");
  ASSERT_FALSE(d.allowed) << d;
  EXPECT_EQ(redlimit::http::headers(d, quotas, o),
            (Fields{{"RateLimit", R"("10/1s";r=0;t=2, "300/1m";r=290;t=120, "1000/1h";r=990;t=7200)"},
                    {"Retry-After", "2"}}));
  // A blocked subject: every limit has nothing left until the block ends.
  api.block("k", std::chrono::seconds(30));
  EXPECT_EQ(
      redlimit::http::headers(api.consume("k"), quotas, o),
      (Fields{{"RateLimit", R"("10/1s";r=0;t=30, "300/1m";r=0;t=30, "1000/1h";r=0;t=30)"}, {"Retry-After", "30"}}));
}

}  // namespace
}  // namespace redlimit_test
