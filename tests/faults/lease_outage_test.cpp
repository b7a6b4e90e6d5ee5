// Issue 14, failure handling, on a real server: a process holding a lease when Redis dies goes on
// deciding from it (those units were granted before the outage), and once it is spent the
// configured failure policy decides; a lease that cannot go back (close() during the outage) lapses
// and is counted, and close() does not throw. The clock is a ManualClock held still after the kill,
// so no lease ends on its own during the outage and the counts below are exact.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "faults/restartable_server.hpp"
#include "redlimit/redlimit.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Leases;
using redlimit::LeaseState;
using redlimit::Limit;
using redlimit::OnFailure;
using redlimit::Source;
using redlimit_faults::RestartableServer;

constexpr std::chrono::microseconds kLeaseT0{1'699'999'200'000'000};

TEST(LeaseOutage, ALeaseDecidesThroughAnOutageThenTheFailurePolicyDoes) {
  RestartableServer server;
  auto clock = std::make_shared<redlimit::ManualClock>(kLeaseT0);
  redlimit::Options o;
  o.clock = clock;
  o.on_failure = OnFailure::fail_closed;
  o.connect_timeout = 1000ms;
  o.command_timeout = 1000ms;
  o.pool.size = 1;
  auto limiter = redlimit::RateLimiter::connect(server.url(), o);
  const auto fw = limiter.fixed_window("lease-outage", Limit::per_hour(1'000'000));
  redlimit::LeaseOptions lo;
  lo.duration = 1s;  // on the manual clock
  lo.hot_rate = 100;
  Leases leases(fw, lo);

  // Two subjects at 1,000 requests a (manual) second each: hot after one lease duration.
  for (int i = 0; i < 5'000 && (leases.state("s") != LeaseState::leased || leases.state("t") != LeaseState::leased);
       ++i) {
    clock->advance(1ms);
    ASSERT_TRUE(leases.consume("s").allowed);
    ASSERT_TRUE(leases.consume("t").allowed);
  }
  ASSERT_EQ(leases.state("s"), LeaseState::leased);
  ASSERT_EQ(leases.state("t"), LeaseState::leased);
  const auto before = leases.stats();
  ASSERT_EQ(before.leases_taken, 2u);

  server.kill9();
  // The lease of "s" still decides: every unit it holds, and not one more.
  long long from_lease = 0;
  Decision d = leases.consume("s");
  while (d.source == Source::lease && from_lease < 1'000'000) {
    EXPECT_TRUE(d.allowed);
    ++from_lease;
    d = leases.consume("s");
  }
  EXPECT_GT(from_lease, 0) << "the lease held no units when Redis died: the case is not exercised";
  EXPECT_LT(static_cast<std::uint64_t>(from_lease), before.units_leased) << "more than the lease decided";
  // Spent: the failure policy (fail_closed) decides, and no lease is taken from a dead server.
  EXPECT_EQ(d.source, Source::failure_policy);
  EXPECT_FALSE(d.allowed);
  for (int i = 0; i < 5; ++i) {
    const Decision next = leases.consume("s");
    EXPECT_EQ(next.source, Source::failure_policy);
    EXPECT_FALSE(next.allowed);
  }
  EXPECT_EQ(leases.stats().leases_taken, 2u);

  // "t" still holds units; they cannot go back while Redis is down: they lapse, counted.
  EXPECT_NO_THROW(leases.close());
  const auto after = leases.stats();
  EXPECT_EQ(after.leases_lapsed, 1u);
  EXPECT_GT(after.units_lapsed, 0u);
  EXPECT_EQ(after.units_returned, before.units_returned);
  EXPECT_EQ(leases.state("s"), LeaseState::closed);
}

}  // namespace
