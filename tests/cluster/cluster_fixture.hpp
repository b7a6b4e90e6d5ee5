#pragma once
// A test on the shared cluster: every master flushed, a ManualClock at kT0, and a limiter over a
// ClusterConnection of the test's own (so node_for_slot can be checked).
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "cluster/cluster_env.hpp"
#include "support/fixture.hpp"

namespace redlimit_cluster {

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(cluster().url.empty()) << "the cluster did not start";
    flush_all_masters();
    clock = std::make_shared<redlimit::ManualClock>(redlimit_test::kT0);
    connection = std::make_shared<redlimit::ClusterConnection>(redlimit::parse_cluster_url(cluster().url), options());
    limiter.emplace(connection, options());
  }

  virtual redlimit::Options options() const {
    redlimit::Options o;
    o.clock = clock;
    o.connect_timeout = std::chrono::milliseconds(3000);
    o.command_timeout = std::chrono::milliseconds(5000);
    o.pool.wait_timeout = std::chrono::milliseconds(10000);
    return o;
  }

  const redlimit::RateLimiter& rl() const { return *limiter; }
  void at(redlimit::Micros offset) { clock->set(redlimit_test::kT0 + offset); }

  std::shared_ptr<redlimit::ManualClock> clock;
  std::shared_ptr<redlimit::ClusterConnection> connection;
  std::optional<redlimit::RateLimiter> limiter;
};

}  // namespace redlimit_cluster
