// The asynchronous API on the cluster (issue 13): AsyncCluster routes each consume_async to the
// master of its subject's slot, over one libevent loop. Exact limits on every master with Redis
// Functions loaded on each; a slot moved to another master after attach is followed (MOVED) and
// learned; consume_many_future split by master, exact, and keeping the live masters' decisions while
// one master is stopped; and one outcome a command when the caller's reply callback throws.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_fixture.hpp"
#include "integration/async_fixture.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/transport/async_cluster.hpp"

namespace redlimit_cluster {
namespace {

#ifdef REDLIMIT_HAVE_LIBEVENT  // the whole suite runs on a libevent loop

using namespace std::chrono_literals;
using redlimit::Limit;

// `per_master` subjects whose keys each master serves, for `s` (by the cluster's own CLUSTER NODES).
std::map<int, std::vector<std::string>> subjects_by_master(const redlimit::Strategy& s, std::size_t per_master) {
  std::map<int, std::vector<std::string>> out;
  for (const auto& m : live_masters()) out[m.port];
  for (int i = 0; i < 100000; ++i) {
    const std::string who = "a" + std::to_string(i);
    auto& list = out[owner_port(redlimit::detail::key_slot(s.key_for(who)))];
    if (list.size() < per_master) list.push_back(who);
    bool full = true;
    for (const auto& [port, l] : out) full = full && l.size() >= per_master;
    if (full) break;
  }
  return out;
}

// An AsyncCluster on `loop` whose calls end at `timeout`, and the loop started.
std::shared_ptr<redlimit::AsyncCluster> attach_started(redlimit_test::LibeventLoop& loop,
                                                       std::chrono::milliseconds timeout) {
  redlimit::AsyncOptions ao;
  ao.command_timeout = timeout;
  auto async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url), ao);
  loop.start();
  return async;
}

// A limiter over the cluster with `o` and OnFailure::fail_closed, its async calls over `async`.
std::unique_ptr<redlimit::RateLimiter> fail_closed_over(const std::shared_ptr<redlimit::AsyncCluster>& async,
                                                        redlimit::Options o) {
  o.on_failure = redlimit::OnFailure::fail_closed;
  auto rl = std::make_unique<redlimit::RateLimiter>(redlimit::RateLimiter::connect(cluster().url, o));
  rl->attach_async(async);
  return rl;
}

std::string id_of(int port) {
  for (const auto& n : cluster_nodes(port)) {
    if (n.port == port) return n.id;
  }
  return {};
}

// Gives `slot` (which holds no key: the masters are flushed first) to the master on `to` as
// redis-cli does: IMPORTING on the target and MIGRATING on the source first, so that the target
// bumps its config epoch when it takes the slot and the change wins over older gossip; then waits
// until every master agrees.
void give_slot(int slot, int to) {
  const int from = owner_port(slot);
  ASSERT_NE(from, 0);
  if (from == to) return;
  const std::string s = std::to_string(slot), to_id = id_of(to), from_id = id_of(from);
  ASSERT_FALSE(to_id.empty() || from_id.empty());
  ASSERT_FALSE(raw(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", from_id}).is_error());
  ASSERT_FALSE(raw(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}).is_error());
  for (int port : {to, from}) ASSERT_FALSE(raw(port, {"CLUSTER", "SETSLOT", s, "NODE", to_id}).is_error());
  for (const auto& m : live_masters()) {
    if (m.port != to && m.port != from) ASSERT_FALSE(raw(m.port, {"CLUSTER", "SETSLOT", s, "NODE", to_id}).is_error());
  }
  bool agreed = false;
  for (int i = 0; i < 200 && !agreed; ++i) {
    agreed = true;
    for (const auto& m : live_masters()) {
      for (const auto& n : cluster_nodes(m.port)) {  // m's view: who serves the slot
        for (auto [lo, hi] : n.slots) {
          if (slot >= lo && slot <= hi) agreed = agreed && n.port == to;
        }
      }
    }
    if (!agreed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(agreed) << "slot " << slot << " did not settle on " << to;
}


class ClusterAsync : public ClusterTest {
 protected:
  // `n` consume_future calls for each subject, all queued before any is waited for; the admissions
  // of each subject.
  static std::map<std::string, int> admitted(const redlimit::Strategy& s, const std::vector<std::string>& who, int n) {
    std::vector<std::pair<std::string, std::future<redlimit::Decision>>> calls;
    for (int i = 0; i < n; ++i) {
      for (const auto& w : who) calls.emplace_back(w, s.consume_future(w));
    }
    std::map<std::string, int> out;
    for (auto& [w, f] : calls) {
      const auto d = redlimit_test::get_within(f);
      EXPECT_EQ(d.source, redlimit::Source::primary) << w;
      out[w] += d.allowed ? 1 : 0;
    }
    return out;
  }
};

TEST_F(ClusterAsync, EveryMastersSubjectsAreDecidedExactlyAsFunctions) {
  on_live_masters({"FUNCTION", "FLUSH"});
  redlimit_test::LibeventLoop loop;
  auto async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url));
  EXPECT_EQ(async->connections(), 3u) << "a connection per master, made at attach";
  limiter->attach_async(async);
  loop.start();
  {  // the strategy holds the limiter's context, and with it the async connection
    const auto fw = rl().fixed_window("async", Limit(5, 1h));
    std::vector<std::string> who;
    for (const auto& [port, list] : subjects_by_master(fw, 3)) {
      ASSERT_EQ(list.size(), 3u) << port;
      who.insert(who.end(), list.begin(), list.end());
    }
    for (const auto& [w, n] : admitted(fw, who, 8)) EXPECT_EQ(n, 5) << w;
    EXPECT_EQ(rl().health().async_scripts, redlimit::ScriptPath::functions);
    for (const auto& m : live_masters()) {
      const auto listed =
          raw(m.port, {"FUNCTION", "LIST", "LIBRARYNAME", std::string(redlimit::detail::scripts::library_name())});
      EXPECT_EQ(listed.elements.size(), 1u) << "the library on master " << m.port;
    }
  }
  limiter.reset();
  async.reset();
  loop.stop();
}

// A slot given to another master after the AsyncCluster read the map: the old owner answers MOVED,
// the call goes to the new owner (it had not run), and the map learns it for the next calls.
TEST_F(ClusterAsync, AMovedSlotIsFollowedAndLearned) {
  redlimit_test::LibeventLoop loop;
  auto async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url));
  limiter->attach_async(async);
  loop.start();
  const std::string who = "moving-subject";
  int slot = 0, from = 0;
  {  // the strategy holds the limiter's context, and with it the async connection
    const auto fw = rl().fixed_window("moved", Limit(3, 1h));
    slot = redlimit::detail::key_slot(fw.key_for(who));
    from = owner_port(slot);
    int to = 0;
    for (const auto& m : live_masters()) {
      if (m.port != from) to = m.port;
    }
    ASSERT_NE(to, 0);
    give_slot(slot, to);
    std::vector<std::future<redlimit::Decision>> calls;
    for (int i = 0; i < 5; ++i) calls.push_back(fw.consume_future(who));
    int allowed = 0;
    for (auto& f : calls) {
      const auto d = redlimit_test::get_within(f);
      EXPECT_EQ(d.source, redlimit::Source::primary);
      allowed += d.allowed ? 1 : 0;
    }
    EXPECT_EQ(allowed, 3) << "exact on the new owner";
    EXPECT_EQ(raw(to, {"EXISTS", fw.key_for(who)}).integer, 1) << "the state is on the new owner";
    EXPECT_EQ(async->connections(), 3u);
  }
  limiter.reset();
  async.reset();
  loop.stop();
  flush_all_masters();
  give_slot(slot, from);
}

// consume_many_future over the cluster: 3 subjects per master, 8 requests each, interleaved, in one
// batch: one script call per master (per slot while the path probes), every master's call in
// flight at once; exactly the first 5 of each subject admitted, in order.
TEST_F(ClusterAsync, ABatchIsDecidedExactlyOnEveryMaster) {
  redlimit_test::LibeventLoop loop;
  auto async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url));
  limiter->attach_async(async);
  loop.start();
  {
    const auto fw = rl().fixed_window("async.batch", Limit(5, 1h));
    std::vector<std::string> who;
    for (const auto& [port, list] : subjects_by_master(fw, 3)) who.insert(who.end(), list.begin(), list.end());
    ASSERT_EQ(who.size(), 9u);
    std::vector<redlimit::Request> requests;
    for (int i = 0; i < 8; ++i) {
      for (const auto& w : who) requests.push_back({w, 1});
    }
    auto f = fw.consume_many_future(requests);
    const auto ds = redlimit_test::get_within(f);
    ASSERT_EQ(ds.size(), requests.size());
    for (std::size_t i = 0; i < ds.size(); ++i) {
      const std::size_t round = i / who.size();
      EXPECT_EQ(ds[i].source, redlimit::Source::primary) << i;
      EXPECT_EQ(ds[i].allowed, round < 5) << "request " << round << " of " << requests[i].subject;
      if (round < 5) EXPECT_EQ(ds[i].remaining, static_cast<std::int64_t>(4 - round)) << i;
    }
    for (const auto& w : who) EXPECT_EQ(fw.peek(w).remaining, 0) << w;
  }
  limiter.reset();
  async.reset();
  loop.stop();
}

// A master stopped (SIGSTOP, shorter than the node timeout: no failover) while a batch covers every
// master: its requests get the failure policy when the call's deadline passes; the other masters'
// are decided by Redis, and kept.
TEST_F(ClusterAsync, ABatchKeepsTheLiveMastersDecisionsWhenOneMasterIsStopped) {
  redlimit_test::LibeventLoop loop;
  auto async = attach_started(loop, std::chrono::milliseconds(200));
  {  // the limiter is gone at the end of the block: the loop then returns by itself
    const auto rl_stall = fail_closed_over(async, options());
    const auto fw = rl_stall->fixed_window("async.stall", Limit(100, 1h));
    const auto groups = subjects_by_master(fw, 2);
    ASSERT_EQ(groups.size(), 3u);
    const int victim = groups.begin()->first;
    std::vector<redlimit::Request> requests;
    for (const auto& [port, list] : groups) {
      for (const auto& w : list) requests.push_back({w, 1});
    }
    auto warm = fw.consume_many_future(requests);  // connections made, library loaded everywhere
    for (const auto& d : redlimit_test::get_within(warm)) ASSERT_EQ(d.source, redlimit::Source::primary);

    const pid_t pid = pid_of(victim);
    ASSERT_NE(pid, 0);
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    auto f = fw.consume_many_future(requests);
    std::vector<redlimit::Decision> ds;
    std::string error;
    try {
      ds = redlimit_test::get_within(f);
    } catch (const std::exception& e) {
      error = e.what();
    }
    ::kill(pid, SIGCONT);
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_EQ(ds.size(), requests.size());
    std::size_t i = 0;
    for (const auto& [port, list] : groups) {
      for (std::size_t j = 0; j < list.size(); ++j, ++i) {
        if (port == victim) {
          EXPECT_EQ(ds[i].source, redlimit::Source::failure_policy) << list[j];
          EXPECT_FALSE(ds[i].allowed) << "fail_closed";
        } else {
          EXPECT_EQ(ds[i].source, redlimit::Source::primary) << list[j];
          EXPECT_TRUE(ds[i].allowed);
          EXPECT_EQ(ds[i].remaining, 98) << list[j];
        }
      }
    }
  }
  async.reset();
  loop.stop();
  ASSERT_TRUE(wait_cluster_ok(std::chrono::seconds(10)));
}

// consume_async calls of one loop turn share script calls (Options::share_script_calls) one per
// master: with a master stopped, the live masters' callers hear from Redis as soon as their
// master answers, not when the stopped master's call ends at its deadline.
TEST_F(ClusterAsync, SharedCallsAreMergedPerMasterSoAStoppedMasterHoldsUpOnlyItsOwnCallers) {
  redlimit_test::LibeventLoop loop;
  auto async = attach_started(loop, std::chrono::milliseconds(500));
  {
    const auto rl_lane = fail_closed_over(async, options());
    const auto fw = rl_lane->fixed_window("async.lane", Limit(100, 1h));
    const auto groups = subjects_by_master(fw, 2);
    ASSERT_EQ(groups.size(), 3u);
    const int victim = groups.begin()->first;  // its callers are queued first
    std::vector<std::pair<std::string, int>> calls;  // subject, master
    for (const auto& [port, list] : groups) {
      for (const auto& w : list) calls.emplace_back(w, port);
    }
    for (const auto& [who, port] : calls) {  // connections made, library loaded everywhere
      auto f = fw.consume_future(who);
      ASSERT_EQ(redlimit_test::get_within(f).source, redlimit::Source::primary);
    }

    struct Heard {
      int port;
      redlimit::Decision decision;
      std::chrono::steady_clock::duration after;
    };
    auto heard = std::make_shared<std::vector<Heard>>();  // appended on the loop's thread only
    auto all = std::make_shared<std::promise<void>>();
    auto done = all->get_future();
    const pid_t pid = pid_of(victim);
    ASSERT_NE(pid, 0);
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    const auto sent = std::chrono::steady_clock::now();
    async->post([&fw, &calls, heard, all, sent] {  // one loop turn: the calls share the lane's turn
      for (const auto& [who, port] : calls) {
        fw.consume_async(who, 1, [heard, all, sent, port = port, n = calls.size()](const redlimit::Decision& d,
                                                                                    std::exception_ptr) {
          heard->push_back({port, d, std::chrono::steady_clock::now() - sent});
          if (heard->size() == n) all->set_value();
        });
      }
    });
    const bool in_time = done.wait_for(10s) == std::future_status::ready;
    ::kill(pid, SIGCONT);
    ASSERT_TRUE(in_time);
    ASSERT_EQ(heard->size(), calls.size());
    // Every live master's caller is answered by Redis before any of the stopped master's callers
    // (which get the failure policy when their call's deadline passes).
    bool victim_seen = false;
    for (const auto& h : *heard) {
      using std::chrono::duration_cast;
      using std::chrono::milliseconds;
      std::printf("[ figures ] master %d answered after %lld ms (%s)\n", h.port,
                  static_cast<long long>(duration_cast<milliseconds>(h.after).count()),
                  h.decision.source == redlimit::Source::primary ? "Redis" : "failure policy");
      if (h.port == victim) {
        victim_seen = true;
        EXPECT_EQ(h.decision.source, redlimit::Source::failure_policy);
      } else {
        EXPECT_FALSE(victim_seen) << "a live master's caller waited for the stopped master";
        EXPECT_EQ(h.decision.source, redlimit::Source::primary);
        EXPECT_EQ(h.decision.remaining, 98);
      }
    }
  }
  async.reset();
  loop.stop();
  ASSERT_TRUE(wait_cluster_ok(std::chrono::seconds(10)));
}

// Exactly one outcome a command, also when the caller's on_reply throws: the exception is the
// caller's (dropped, as AsyncRedis drops it), never followed by an on_error. Before, route's catch,
// meant for a refused redirect, took it and ran on_error as well. A keyed command and a broadcast.
TEST_F(ClusterAsync, AReplyCallbackThatThrowsGetsNoOnErrorAfterIt) {
  redlimit_test::LibeventLoop loop;
  auto async = attach_started(loop, std::chrono::milliseconds(2000));
  for (const std::vector<std::string>& argv : {std::vector<std::string>{"GET", "thrower"},
                                               std::vector<std::string>{"SCRIPT", "LOAD", "return 1"}}) {
    auto replies = std::make_shared<std::atomic<int>>(0);
    auto errors = std::make_shared<std::atomic<int>>(0);
    async->command_async(
        argv,
        [replies](const redlimit::Reply&) {
          ++*replies;
          throw std::runtime_error("the caller's own bug");
        },
        [errors](std::exception_ptr) { ++*errors; });
    // The same command again, answered after the first (one connection, in order) and after
    // whatever the first's callback led to on the loop's thread.
    std::promise<void> after;
    auto done = after.get_future();
    async->command_async(
        argv, [&after](const redlimit::Reply&) { after.set_value(); },
        [&after](std::exception_ptr) { after.set_value(); });
    ASSERT_EQ(done.wait_for(redlimit_test::kWait), std::future_status::ready) << argv[0];
    EXPECT_EQ(replies->load(), 1) << argv[0];
    EXPECT_EQ(errors->load(), 0) << argv[0] << ": on_error ran after on_reply";
  }
  async.reset();  // the loop returns once its connections are released
  loop.stop();
}

#endif  // REDLIMIT_HAVE_LIBEVENT

}  // namespace
}  // namespace redlimit_cluster
