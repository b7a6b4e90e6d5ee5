// consume_async on the cluster shares script calls per master (Options::share_script_calls with
// Options::batch_per_master): the calls of one loop turn go as one call to each master, through
// the script's spread function, decided in the order they were made; consume_many_future the same; a
// merged call's first half has its calls sent to any master before the second half runs.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/cluster_fixture.hpp"
#include "integration/async_fixture.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/transport/async_cluster.hpp"

namespace redlimit_cluster {
namespace {

#ifdef REDLIMIT_HAVE_LIBEVENT

using redlimit::Decision;
using redlimit::Limit;
using namespace std::chrono_literals;

class ClusterAsyncShared : public ClusterTest {
 protected:
  void calls_of_one_loop_turn(bool functions);
};

// 4 calls for each of 9 subjects (3 per master), made in one task on the loop: one script call per
// master; each subject's first 3 admitted, in call order, the 4th rejected. As Functions, then on
// the EVALSHA path (Options::redis_functions off: the EVAL text's spread form, lua/spread_eval.lua).
TEST_F(ClusterAsyncShared, CallsOfOneLoopTurnGoAsOneCallPerMaster) { calls_of_one_loop_turn(true); }

TEST_F(ClusterAsyncShared, CallsOfOneLoopTurnGoAsOneCallPerMasterOverEvalsha) { calls_of_one_loop_turn(false); }

void ClusterAsyncShared::calls_of_one_loop_turn(bool functions) {
  redlimit_test::LibeventLoop loop;
  auto async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url));
  redlimit::Options o = options();
  o.redis_functions = functions;
  limiter.emplace(std::make_shared<redlimit::ClusterConnection>(redlimit::parse_cluster_url(cluster().url), o), o);
  limiter->attach_async(async);
  const std::string command = script_command(functions);
  // No master has the scripts: the warm-up below must load them (as an earlier test may not have).
  on_live_masters({"SCRIPT", "FLUSH"});
  loop.start();
  {
    const auto fw = rl().fixed_window(functions ? "turn" : "turn-sha", Limit(3, 1h));
    const auto who = subjects_on_each_master(fw, 3);
    ASSERT_EQ(who.size(), 9u);
    // The async path settles, and every master has the script: on the EVALSHA path a master that
    // lacks it answers NOSCRIPT, and its call goes twice (after a LOAD on that connection).
    for (const auto& w : subjects_on_each_master(fw, 1, "warm")) {
      auto warm = fw.consume_future(w);
      ASSERT_TRUE(redlimit_test::get_within(warm).allowed);
    }
    on_live_masters({"CONFIG", "RESETSTAT"});
    std::mutex mutex;
    std::vector<Decision> got(4 * who.size());
    std::size_t left = got.size();
    std::promise<void> all;
    async->post([&] {
      for (std::size_t round = 0, i = 0; round < 4; ++round) {
        for (const auto& w : who) {
          fw.consume_async(w, 1, [&, i](const Decision& d, std::exception_ptr e) {
            EXPECT_FALSE(e);
            std::lock_guard<std::mutex> lock(mutex);
            got[i] = d;
            if (--left == 0) all.set_value();
          });
          ++i;
        }
      }
    });
    auto done = all.get_future();
    ASSERT_EQ(done.wait_for(redlimit_test::kWait), std::future_status::ready);
    EXPECT_EQ(calls_on_masters(command), 3);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const std::size_t round = i / who.size();
      EXPECT_EQ(got[i].source, redlimit::Source::primary) << i;
      EXPECT_EQ(got[i].allowed, round < 3) << who[i % who.size()] << " call " << round;
      EXPECT_EQ(got[i].remaining, round < 3 ? static_cast<std::int64_t>(2 - round) : 0) << i;
    }

    // A batch over the same subjects: one call per master too.
    on_live_masters({"CONFIG", "RESETSTAT"});
    std::vector<redlimit::Request> requests;
    for (const auto& w : who) requests.push_back({w, 1});
    auto f = fw.consume_many_future(requests);
    for (const auto& d : redlimit_test::get_within(f)) EXPECT_FALSE(d.allowed) << d.remaining;
    EXPECT_EQ(calls_on_masters(command), 3);
    EXPECT_EQ(rl().counters().resent_by_slot, 0u);
  }
  limiter.reset();
  async.reset();
  loop.stop();
}

// A merged call's first half has its calls written before the second half's callbacks run on a
// cluster too: AsyncCluster::send_now writes on every master's connection, and here the calls go
// to another master than the merged call's (fixture: expect_first_half_leaves_early).
TEST_F(ClusterAsyncShared, AMergedCallsFirstHalfSendsItsCallsToAnyMasterBeforeTheSecondHalfRuns) {
  redlimit_test::LibeventLoop loop;
  auto async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url));
  limiter->attach_async(async);
  loop.start();
  {
    const auto fw = rl().fixed_window("halves", Limit(1000, 1h));
    // One subject on each master, each consumed once so that every master's script path is settled
    // (a FUNCTION LOAD after the loop is held would have to wait for it); "next" is then reset, so
    // that its key appears only when the first half's calls reach its master.
    const auto who = subjects_on_each_master(fw, 1);
    ASSERT_EQ(who.size(), 3u);
    for (const auto& w : who) {
      auto f = fw.consume_future(w);
      ASSERT_TRUE(redlimit_test::get_within(f).allowed) << w;
    }
    const std::string& first = who[0];
    const std::string& next = who[1];  // on another master than `first`
    fw.reset(next);
    auto port_of = [&](const std::string& w) { return owner_port(redlimit::detail::key_slot(fw.key_for(w))); };
    ASSERT_NE(port_of(first), port_of(next));
    const int next_port = port_of(next);
    const std::string next_key = fw.key_for(next);
    redlimit_test::expect_first_half_leaves_early(
        *async, fw, first, next, [next_port, next_key] { return raw(next_port, {"EXISTS", next_key}).integer == 1; });
  }
  limiter.reset();
  async.reset();
  loop.stop();
}

#endif  // REDLIMIT_HAVE_LIBEVENT

}  // namespace
}  // namespace redlimit_cluster
