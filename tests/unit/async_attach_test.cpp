// RateLimiter::attach_async over a Redis Cluster (issue 18, item 3; issue 13): an async connection
// to one server would send every call to that node, so it is refused; one that routes by slot
// (AsyncCluster) is accepted.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/rate_limiter.hpp"
#include "unit/mock_connection.hpp"

namespace {

// Counts what it is asked to do: attach_async must not do any of it.
class CountingAsync final : public redlimit::AsyncConnection {
 public:
  void command_async(std::vector<std::string> /*argv*/, ReplyCallback /*on_reply*/,
                     ErrorCallback /*on_error*/) override {
    ++commands;
  }
  void post(std::function<void()> /*task*/) override { ++posts; }
  bool routes_by_slot() const override { return by_slot; }
  int commands = 0;
  int posts = 0;
  bool by_slot = false;
};

TEST(AttachAsync, RefusedOverAClusterBeforeAnyIo) {
  auto conn = std::make_shared<::testing::StrictMock<MockConnection>>();  // no command expected
  conn->span_slots = false;  // what ClusterConnection answers
  redlimit::RateLimiter rl(conn);
  auto async = std::make_shared<CountingAsync>();
  try {
    rl.attach_async(async);
    FAIL() << "attach_async accepted a cluster limiter";
  } catch (const redlimit::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Cluster"), std::string::npos) << e.what();
  }
  EXPECT_EQ(async->commands, 0);
  EXPECT_EQ(async->posts, 0);
  // Still not attached: an async call reports that, as on a limiter that never had one.
  const auto fw = rl.fixed_window("c", redlimit::Limit::per_second(10));
  EXPECT_THROW(fw.consume_async("s", 1, [](const redlimit::Decision&, std::exception_ptr) {}), redlimit::Error);
  EXPECT_EQ(async->commands, 0);
}

TEST(AttachAsync, ARouterBySlotIsAcceptedOverACluster) {
  auto conn = std::make_shared<::testing::StrictMock<MockConnection>>();
  conn->span_slots = false;
  redlimit::RateLimiter rl(conn);
  auto async = std::make_shared<CountingAsync>();
  async->by_slot = true;
  EXPECT_NO_THROW(rl.attach_async(async));
  EXPECT_EQ(async->commands, 0);
  EXPECT_EQ(async->posts, 0);
}

TEST(AttachAsync, AcceptedOverOneServer) {
  auto conn = std::make_shared<::testing::StrictMock<MockConnection>>();
  redlimit::RateLimiter rl(conn);
  auto async = std::make_shared<CountingAsync>();
  EXPECT_NO_THROW(rl.attach_async(async));
  EXPECT_EQ(async->commands, 0);
}

}  // namespace
