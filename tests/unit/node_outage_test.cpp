// One node of several down (issue 18, items 5 and 6), behind a MockConnection that stands for a
// cluster of two masters: keys of subjects starting with "dead" live on node 2, the others on node 1.
// Each node has its own breaker; a batch keeps the decisions of the node that answered, and a
// command whose node failed in transit (a transit_failure reply) is an outage of its requests only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/detail/keys.hpp"
#include "redlimit/redlimit.hpp"
#include "unit/hand_answered.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::ConnectionError;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::Micros;
using redlimit::OnFailure;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Reply;
using redlimit::Source;
using redlimit::TimeoutError;
using redlimit_unit::decision_reply;
using ::testing::_;
using ::testing::Return;
using ::testing::StrictMock;
using namespace std::chrono_literals;
using Argv = std::vector<std::string>;
using Commands = std::vector<Argv>;

bool dead_key(std::string_view key) { return key.find("{api|dead") != std::string_view::npos; }
bool to_dead(const Argv& c) { return c.size() > 3 && dead_key(c[3]); }

class NodeOutageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mock->span_slots = false;
    mock->node_for = [](std::string_view key) -> std::size_t { return dead_key(key) ? 2 : 1; };
  }

  RateLimiter make(OnFailure on_failure, int breaker_threshold) const {
    Options o;
    o.clock = clock;
    o.on_failure = on_failure;
    o.breaker_threshold = breaker_threshold;
    o.breaker_cooldown = 1000ms;
    return RateLimiter(mock, o);
  }

  std::shared_ptr<StrictMock<MockConnection>> mock = std::make_shared<StrictMock<MockConnection>>();
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Micros{1'700'000'000'000'000});
};

TEST_F(NodeOutageTest, OneNodesFailuresOpenOnlyItsBreaker) {
  const RateLimiter limiter = make(OnFailure::fail_closed, 2);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  int to_dead_node = 0;
  EXPECT_CALL(*mock, command(_)).WillRepeatedly([&](const Argv& c) -> Reply {
    if (to_dead(c)) {
      ++to_dead_node;
      throw ConnectionError("refused");
    }
    return decision_reply(1, 4, 0, 1'000'000);
  });
  // Failures of node 2 between successes of node 1: node 2's count is its own.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(fw.consume("dead").source, Source::failure_policy);
    EXPECT_EQ(fw.consume("live").source, Source::primary);
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(fw.consume("dead").source, Source::failure_policy);  // short-circuited
    EXPECT_EQ(fw.consume("live").source, Source::primary);          // never
  }
  EXPECT_EQ(to_dead_node, 2);
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 5u);
  EXPECT_EQ(limiter.counters().errors, 2u);
  // A batch over both nodes while node 2's breaker is open: node 1's request alone is sent.
  const auto d = fw.consume_many({{"dead", 1}, {"live", 1}});
  EXPECT_EQ(d[0].source, Source::failure_policy);
  EXPECT_EQ(d[1].source, Source::primary);
  EXPECT_EQ(to_dead_node, 2);
  // After the cooldown node 2 is probed, and its success closes its breaker.
  clock->advance(1s);
  ::testing::Mock::VerifyAndClearExpectations(mock.get());
  EXPECT_CALL(*mock, command(_)).WillRepeatedly(Return(decision_reply(1, 3, 0, 1'000'000)));
  EXPECT_EQ(fw.consume("dead").source, Source::primary);
  EXPECT_EQ(fw.consume("dead").source, Source::primary);
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 6u);
}

// Under raise, a call refused by one node's open breaker throws before any I/O; a probe the other
// node's breaker let through for that call is given back, so that node is probed by the next call.
TEST_F(NodeOutageTest, RaiseRefusedByOneBreakerGivesBackTheOthersProbe) {
  const RateLimiter limiter = make(OnFailure::raise, 1);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  {
    ::testing::InSequence seq;
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(::testing::Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).WillOnce([](const Argv& c) {
      EXPECT_TRUE(to_dead(c));
      return decision_reply(1, 4, 0, 1'000'000);
    });
  }
  EXPECT_THROW(fw.consume("dead"), ConnectionError);  // node 2 open until +1 s
  clock->advance(500ms);
  EXPECT_THROW(fw.consume("live"), ConnectionError);  // node 1 open until +1.5 s
  clock->advance(600ms);
  // Node 2 may be probed, node 1 not: the batch throws before any I/O...
  EXPECT_THROW(fw.consume_many({{"dead", 1}, {"live", 1}}), ConnectionError);
  // ... and node 2's probe was given back: this call probes it (before, it stayed half-open).
  EXPECT_EQ(fw.consume("dead").source, Source::primary);
  EXPECT_EQ(limiter.counters().breaker_short_circuits, 1u);
}

// A transit_failure reply (node 2 failed in transit while node 1 answered): node 1's decisions stand,
// node 2's requests get the failure policy, counted once each.
TEST_F(NodeOutageTest, TransitFailureIsAnOutageOfItsOwnCallOnly) {
  const RateLimiter limiter = make(OnFailure::fail_open, 0);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, pipeline(_)).WillOnce([](const Commands& cmds) {
    std::vector<Reply> out;
    for (const auto& c : cmds) {
      out.push_back(to_dead(c) ? redlimit::transit_failure(ConnectionError("refused"))
                               : decision_reply(0, 0, 500'000, 1'000'000));
    }
    return out;
  });
  const auto d = fw.consume_many({{"live", 1}, {"dead", 1}});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].source, Source::primary);
  EXPECT_FALSE(d[0].allowed);  // Redis's rejection, not fail_open's admission
  EXPECT_EQ(d[1].source, Source::failure_policy);
  EXPECT_TRUE(d[1].allowed);
  EXPECT_EQ(limiter.counters().errors, 1u);
  EXPECT_EQ(limiter.counters().from_failure_policy, 1u);
}

// Under raise the transit failure is thrown as what it was: a TimeoutError or a ConnectionError
// (outcome unknown), not a ReplyError.
TEST_F(NodeOutageTest, TransitFailureUnderRaiseThrowsItsOwnKind) {
  const RateLimiter limiter = make(OnFailure::raise, 0);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, pipeline(_)).Times(2).WillRepeatedly([](const Commands& cmds) {
    std::vector<Reply> out;
    for (const auto& c : cmds) {
      out.push_back(to_dead(c) ? redlimit::transit_failure(TimeoutError("read: Resource temporarily unavailable"))
                               : decision_reply(1, 4, 0, 1'000'000));
    }
    return out;
  });
  EXPECT_THROW(fw.consume_many({{"live", 1}, {"dead", 1}}), TimeoutError);
  try {
    fw.consume_many({{"live", 1}, {"dead", 1}});
  } catch (const TimeoutError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("Resource temporarily unavailable"));
    EXPECT_THAT(e.what(), ::testing::Not(::testing::HasSubstr("REDLIMIT_")));
  }
}

// NOSCRIPT on node 2 only, and node 2 failing on the reload (SCRIPT LOAD and the EVALSHA again):
// node 1's decision stands (the reload is the only round trip that met the failure; nothing is sent
// again).
TEST_F(NodeOutageTest, FailedReloadAfterNoscriptKeepsTheOtherNodesDecision) {
  const RateLimiter limiter = make(OnFailure::fail_closed, 0);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, pipeline(_))
      .WillOnce([](const Commands& cmds) {
        std::vector<Reply> out;
        for (const auto& c : cmds) {
          out.push_back(to_dead(c) ? redlimit_unit::noscript_reply() : decision_reply(1, 4, 0, 1));
        }
        return out;
      })
      .WillOnce([](const Commands& cmds) -> std::vector<Reply> {
        EXPECT_EQ(cmds.size(), 2u);
        EXPECT_EQ(cmds.at(0).at(0), "SCRIPT");
        EXPECT_EQ(cmds.at(1).at(0), "EVALSHA");
        EXPECT_TRUE(to_dead(cmds.at(1)));
        throw ConnectionError("reset by peer");
      });
  EXPECT_CALL(*mock, command(_)).Times(0);
  const auto d = fw.consume_many({{"live", 1}, {"dead", 1}});
  EXPECT_EQ(d[0].source, Source::primary);
  EXPECT_TRUE(d[0].allowed);
  EXPECT_EQ(d[1].source, Source::failure_policy);
  EXPECT_FALSE(d[1].allowed);
}

// RateLimiter::health() on a cluster: each node's breaker by shard, the facade's the worst of them,
// among the nodes that serve slots.
TEST_F(NodeOutageTest, HealthShowsEachNodesBreaker) {
  const RateLimiter limiter = make(OnFailure::fail_open, 2);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillRepeatedly([&](const Argv& c) -> Reply {
    if (to_dead(c)) throw ConnectionError("refused");
    return decision_reply(1, 4, 0, 1'000'000);
  });
  fw.consume("live");
  fw.consume("dead");
  fw.consume("dead");
  redlimit::Health h = limiter.health();
  EXPECT_EQ(h.breaker, redlimit::BreakerState::open);
  using State = std::pair<std::size_t, redlimit::BreakerState>;
  EXPECT_EQ(h.breakers, (std::vector<State>{{0, redlimit::BreakerState::closed},
                                            {1, redlimit::BreakerState::closed},
                                            {2, redlimit::BreakerState::open}}));
  EXPECT_EQ(h.last_source, Source::failure_policy);
  fw.consume("live");
  h = limiter.health();
  EXPECT_EQ(h.last_source, Source::primary);
  EXPECT_EQ(h.breaker, redlimit::BreakerState::open) << "node 2 is still down";
  clock->advance(1s);
  EXPECT_EQ(limiter.health().breaker, redlimit::BreakerState::half_open);
  // Node 2 replaced by a failover serves no slot any more (Connection::shard_serves): its breaker,
  // which no call consults again, no longer counts.
  mock->serves = [](std::size_t shard) { return shard != 2; };
  h = limiter.health();
  EXPECT_EQ(h.breaker, redlimit::BreakerState::closed);
  EXPECT_EQ(h.breakers, (std::vector<State>{{0, redlimit::BreakerState::closed}, {1, redlimit::BreakerState::closed}}));
}

// The async path over a cluster: attach_async hands the router the limiter's connection (one slot
// map, by which the breakers are kept), and a call a breaker refuses is reported to the router
// (AsyncConnection::shard_refused), which may read its map again; a call let through is not.
TEST_F(NodeOutageTest, AnAsyncCallABreakerRefusesIsReportedToTheRouter) {
  RateLimiter limiter = make(OnFailure::fail_closed, 2);
  auto router = std::make_shared<redlimit_test::HandAnswered>();
  router->by_slot = true;
  router->set_script_path(redlimit::ScriptPath::evalsha);
  limiter.attach_async(router);
  EXPECT_EQ(router->shared_routing, mock);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillRepeatedly([&](const Argv&) -> Reply { throw ConnectionError("refused"); });
  fw.consume("dead");
  fw.consume("dead");  // node 2's breaker opens
  std::vector<Decision> got;
  const auto keep = [&got](const Decision& d, const std::exception_ptr&) { got.push_back(d); };
  fw.consume_async("dead", 1, keep);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].source, Source::failure_policy);
  EXPECT_TRUE(router->sent.empty()) << "a refused call sends nothing";
  ASSERT_EQ(router->refused_keys.size(), 1u);
  EXPECT_TRUE(dead_key(router->refused_keys[0])) << router->refused_keys[0];
  fw.consume_async("live", 1, keep);
  EXPECT_EQ(router->sent.size(), 1u);
  EXPECT_EQ(router->refused_keys.size(), 1u) << "a call let through is not reported";
  router->sent.clear();  // its callbacks hold the limiter
}

}  // namespace
