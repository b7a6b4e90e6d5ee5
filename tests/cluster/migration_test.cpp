// A key caught mid-migration (issue 18, item 7), deterministically: a slot set MIGRATING/IMPORTING
// by hand with CLUSTER SETSLOT, and one key of a call of two keys of that slot moved with MIGRATE (a
// batch of a subject whose key moved and one that has no key yet; a single request sends one key,
// which follows ASK to the target at once: ASingleKeyRequestFollowsAskMidMigration). Redis then answers ASK on the
// source and TRYAGAIN on the target (a multi-key script whose keys are not all there) until the migration ends. Before,
// the router followed ASK, met TRYAGAIN, went back to the target without ASKING, got MOVED and let "ReplyError: ...
// MOVED ..." escape, which no failure policy handles. Now TRYAGAIN is retried from the slot's owner within the
// deadline, what is left is an outage for the failure policy, and once the migration ends (CLUSTER SETSLOT ... NODE)
// the decisions are exact.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_fixture.hpp"
#include "integration/async_fixture.hpp"
#include "redlimit/transport/async_cluster.hpp"
#include "redlimit/detail/keys.hpp"

namespace redlimit_cluster {
namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::OnFailure;
using redlimit::Source;

class ClusterMigration : public ClusterTest {
 protected:
  void TearDown() override {
    if (slot_ >= 0) finish_migration(/*checked=*/false);  // a failed test must not leave the slot half-moved
  }

  // `functions` false: the EVALSHA path (Options::redis_functions).
  redlimit::RateLimiter limiter(OnFailure policy, bool functions = true) const {
    redlimit::Options o = options();
    o.on_failure = policy;
    o.redis_functions = functions;
    o.breaker_threshold = 0;
    o.command_timeout = 300ms;  // bounds each call caught by the migration
    return redlimit::RateLimiter(
        std::make_shared<redlimit::ClusterConnection>(redlimit::parse_cluster_url(cluster().url), o), o);
  }

  static std::string id_of(int port) {
    for (const auto& n : cluster_nodes(port)) {
      if (n.port == port) return n.id;
    }
    return {};
  }

  // IMPORTING on the target, then MIGRATING on the source (as redis-cli does); TearDown ends it.
  void start_migration(int slot, int from, int to) {
    const std::string s = std::to_string(slot);
    ASSERT_EQ(raw(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", id_of(from)}).type, redlimit::Reply::Type::status);
    slot_ = slot;
    from_ = from;
    to_ = to;
    ASSERT_EQ(raw(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", id_of(to)}).type, redlimit::Reply::Type::status);
  }

  // One key of the migrating slot moved from the source to the target.
  void migrate(const std::string& key) const {
    const redlimit::Reply r = raw(from_, {"MIGRATE", "127.0.0.1", std::to_string(to_), key, "0", "5000"});
    ASSERT_EQ(r.str, "OK") << r.str;
  }

  // The target first, then the source, then every other master (as redis-cli does). `checked`: the
  // source must have accepted (it refuses while it still holds keys of the slot, and the slot would
  // stay MIGRATING there for the tests that follow).
  void finish_migration(bool checked = true) {
    const std::string slot = std::to_string(slot_), to = id_of(to_);
    for (int port : {to_, from_}) {
      const redlimit::Reply r = raw(port, {"CLUSTER", "SETSLOT", slot, "NODE", to});
      if (checked) EXPECT_EQ(r.str, "OK") << "SETSLOT NODE on " << port << ": " << r.str;
    }
    for (const auto& m : live_masters()) {
      if (m.port != to_ && m.port != from_) raw(m.port, {"CLUSTER", "SETSLOT", slot, "NODE", to});
    }
    slot_ = -1;
  }

  // A subject whose key under `s` hashes to `slot`: "<stem><n>" for the first n that does.
  static std::string subject_in_slot(const redlimit::Strategy& s, const std::string& stem, int slot) {
    for (int i = 0; i < 1000000; ++i) {
      const std::string who = stem + std::to_string(i);
      if (redlimit::detail::key_slot(s.key_for(who)) == slot) return who;
    }
    return {};
  }

  // The strategies whose batch meets a moving slot (below): the fixed window touches each key first
  // (EXISTS); a policy (and a sliding window, a policy of one limit) and a sliding log read each key
  // first with the read their decision then takes as given (lua/epilogue.lua, prefetch).
  enum class Kind { fixed_window, policy, sliding_log };
  // A batch of one master's many slots meets a slot mid-migration (the tests below).
  void batch_meets_a_moving_slot(bool async, bool functions = true, Kind kind = Kind::fixed_window);

  int slot_ = -1, from_ = 0, to_ = 0;
};

TEST_F(ClusterMigration, KeysSplitByAMigrationAreAnOutageThenDecidedExactly) {
  at(0s);
  constexpr std::int64_t L = 5;
  const auto closed = limiter(OnFailure::fail_closed);
  const auto raise = limiter(OnFailure::raise);
  const auto sl = closed.sliding_log("mig", Limit(L, 1h));
  const auto sl_raise = raise.sliding_log("mig", Limit(L, 1h));  // the same keys
  // a: a state key, moved; c (same slot): no key yet, so a batch of a and c is split; b (same
  // slot): a state key and a block marker, which stay on the source until the migration ends.
  const std::string a = "mig-a";
  const int slot = redlimit::detail::key_slot(sl.key_for(a));
  const std::string b = subject_in_slot(sl, "mig-b", slot);
  const std::string c = subject_in_slot(sl, "mig-c", slot);
  ASSERT_FALSE(b.empty());
  ASSERT_FALSE(c.empty());
  const auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  const int from = owner_port(slot);
  const int to = masters[0].port != from ? masters[0].port : masters[1].port;
  // Live subjects on the third master, for a batch.
  std::vector<std::string> others;
  for (int i = 0; others.size() < 3 && i < 10000; ++i) {
    const std::string who = "mig-o" + std::to_string(i);
    const int p = owner_port(redlimit::detail::key_slot(sl.key_for(who)));
    if (p != from && p != to) others.push_back(who);
  }
  ASSERT_EQ(others.size(), 3u);

  ASSERT_TRUE(sl.consume(a).allowed);
  ASSERT_TRUE(sl.consume(a).allowed);  // a: 3 left
  ASSERT_TRUE(sl.consume(b).allowed);  // b: 4 left, then blocked
  ASSERT_FALSE(sl.block(b, 1h).allowed);

  // Mid-migration: IMPORTING on the target, MIGRATING on the source, a's state key moved.
  ASSERT_NO_FATAL_FAILURE(start_migration(slot, from, to));
  ASSERT_NO_FATAL_FAILURE(migrate(sl.key_for(a)));

  // No ReplyError escapes: each caught request is an outage, answered by the failure policy.
  const std::vector<redlimit::Request> split{{a, 1}, {c, 1}};
  int caught = 0, answered_by_policy = 0;
  for (int round = 0; round < 2; ++round) {
    try {
      for (const Decision& d : sl.consume_many(split)) {
        ++caught;
        answered_by_policy += d.source == Source::failure_policy && !d.allowed;
      }
    } catch (const redlimit::Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
  try {
    sl_raise.consume_many(split);
    ADD_FAILURE() << "a split call was decided mid-migration";
  } catch (const redlimit::UnavailableError& e) {  // an outage, which raise throws as such
    std::printf("[ migration ] mid-migration under raise: %s\n", e.what());
  } catch (const redlimit::Error& e) {
    ADD_FAILURE() << "not an outage: " << e.what();
  }
  // A batch: the caught requests by the policy, the others by Redis.
  std::vector<redlimit::Request> batch = split;
  for (const auto& o : others) batch.push_back({o, 1});
  const auto got = sl.consume_many(batch);
  ASSERT_EQ(got.size(), batch.size());
  EXPECT_EQ(got[0].source, Source::failure_policy) << got[0];
  EXPECT_EQ(got[1].source, Source::failure_policy) << got[1];
  for (std::size_t i = 2; i < got.size(); ++i) {
    EXPECT_EQ(got[i].source, Source::primary) << got[i];
    EXPECT_EQ(got[i].remaining, L - 1) << got[i];
  }
  EXPECT_EQ(caught, 4);
  EXPECT_EQ(answered_by_policy, caught);

  // The migration ends (b's keys moved too, then SETSLOT NODE): decided exactly, as if the calls
  // caught by it had not happened (they did not run).
  ASSERT_NO_FATAL_FAILURE(migrate(sl.key_for(b)));
  ASSERT_NO_FATAL_FAILURE(migrate(sl.block_key_for(b)));
  finish_migration();
  const Decision da = sl.consume(a);
  EXPECT_EQ(da.source, Source::primary) << da;
  EXPECT_TRUE(da.allowed) << da;
  EXPECT_EQ(da.remaining, 2) << da;
  const Decision db = sl.consume(b);
  EXPECT_EQ(db.source, Source::primary) << db;
  EXPECT_FALSE(db.allowed) << db;  // still blocked
  EXPECT_GE(db.retry_after, 59min) << db;
  EXPECT_EQ(sl.consume(c).remaining, L - 1) << "c's caught requests did not run";
  EXPECT_EQ(wait_owner(slot, to), to);
  std::printf(
      "[ migration ] %d requests on split keys answered by fail_closed, 0 errors escaped; after SETSLOT NODE: "
      "a remaining %lld, b blocked\n",
      answered_by_policy, static_cast<long long>(da.remaining));
}

// A request of one key (every strategy's: the state holds the block) is never split by a migration: the source answers
// ASK once its key has left, the target (asked with ASKING) decides it, and nothing is lost or counted twice when the
// migration ends.
TEST_F(ClusterMigration, ASingleKeyRequestFollowsAskMidMigration) {
  at(0s);
  constexpr std::int64_t L = 5;
  const auto closed = limiter(OnFailure::fail_closed);
  const auto fw = closed.fixed_window("mig1", Limit(L, 1h));
  const std::string moved = "mig1-a";
  const int slot = redlimit::detail::key_slot(fw.key_for(moved));
  const std::string stays = subject_in_slot(fw, "mig1-b", slot);  // same slot, its key left on the source
  ASSERT_FALSE(stays.empty());
  const auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  const int from = owner_port(slot);
  const int to = masters[0].port != from ? masters[0].port : masters[1].port;
  ASSERT_TRUE(fw.consume(moved).allowed);
  ASSERT_TRUE(fw.consume(moved).allowed);  // 3 left
  ASSERT_TRUE(fw.consume(stays).allowed);  // 4 left

  ASSERT_NO_FATAL_FAILURE(start_migration(slot, from, to));
  ASSERT_NO_FATAL_FAILURE(migrate(fw.key_for(moved)));
  const Decision on_target = fw.consume(moved);  // ASK, then the target
  EXPECT_EQ(on_target.source, Source::primary) << on_target;
  EXPECT_EQ(on_target.remaining, L - 3) << on_target;
  const Decision on_source = fw.consume(stays);  // its key is still on the source
  EXPECT_EQ(on_source.source, Source::primary) << on_source;
  EXPECT_EQ(on_source.remaining, L - 2) << on_source;

  ASSERT_NO_FATAL_FAILURE(migrate(fw.key_for(stays)));  // the source holds no key of the slot left
  finish_migration();
  EXPECT_EQ(fw.consume(moved).remaining, L - 4) << "the request decided on the target counted once";
  EXPECT_EQ(fw.consume(stays).remaining, L - 3) << "and the one decided on the source";
  EXPECT_EQ(wait_owner(slot, to), to);
  std::printf("[ migration ] a one-key request mid-migration: decided on the target after ASK\n");
}

#ifdef REDLIMIT_HAVE_LIBEVENT
// Over AsyncCluster, a call caught by a migration waits for it, as a synchronous one does: TRYAGAIN
// is sent again 10 to 100 ms apart within the call's deadline, on the loop's timer. Before, the
// first TRYAGAIN was the call's reply, an outage at once for the failure policy.
TEST_F(ClusterMigration, AnAsyncCallCaughtByAMigrationIsDecidedOnceItEnds) {
  at(0s);
  constexpr std::int64_t L = 5;
  redlimit_test::LibeventLoop loop;  // declared first: it outlives everything that uses it
  redlimit::AsyncOptions ao;
  ao.command_timeout = 2s;  // the retries' bound: ten of them take about 0.75 s
  auto cluster_async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url), ao);
  loop.start();
  auto closed = limiter(OnFailure::fail_closed);
  closed.attach_async(cluster_async);
  const auto sl = closed.sliding_log("amig", Limit(L, 1h));
  const std::string a = "amig-a";
  const int slot = redlimit::detail::key_slot(sl.key_for(a));
  const std::string c = subject_in_slot(sl, "amig-c", slot);  // no key yet: a batch of a and c can be split
  ASSERT_FALSE(c.empty());
  const int from = owner_port(slot);
  const auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  const int to = masters[0].port != from ? masters[0].port : masters[1].port;
  auto first = sl.consume_future(a);
  ASSERT_EQ(redlimit_test::get_within(first).remaining, L - 1);

  ASSERT_NO_FATAL_FAILURE(start_migration(slot, from, to));
  ASSERT_NO_FATAL_FAILURE(migrate(sl.key_for(a)));  // split: the target answers TRYAGAIN
  const auto sent = std::chrono::steady_clock::now();
  auto caught = sl.consume_many_future({{a, 1}, {c, 1}});
  std::this_thread::sleep_for(100ms);  // the call meets TRYAGAIN meanwhile (its retries span 0.75 s)
  finish_migration();
  const std::vector<Decision> ds = redlimit_test::get_within(caught);
  const auto took = std::chrono::steady_clock::now() - sent;
  ASSERT_EQ(ds.size(), 2u);
  const Decision& d = ds[0];
  EXPECT_EQ(d.source, Source::primary) << d;
  EXPECT_TRUE(d.allowed) << d;
  EXPECT_EQ(d.remaining, L - 2) << d;
  EXPECT_EQ(ds[1].source, Source::primary) << ds[1];
  EXPECT_EQ(ds[1].remaining, L - 1) << ds[1];
  EXPECT_EQ(wait_owner(slot, to), to);
  std::printf("[ migration ] async call caught by a migration decided by Redis %lld ms after it was made\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}
#endif

// A batch call of one master's many slots (Options::batch_per_master) that meets a slot mid-migration:
// the master refuses the whole call at its read of the moved key, before it writes anything, and
// the router sends it again slot by slot. The caught request (a fixed window's: one key) then
// follows ASK to the target and is decided there; the master's other subjects, read before the
// refusal, are decided once, not twice.
// Synchronously (consume_many), then over AsyncCluster (consume_many_future), then on the EVALSHA
// path (the spread form of the EVAL text, lua/spread_eval.lua: the same refusal).
TEST_F(ClusterMigration, ABatchCallMeetingAMovingSlotIsSentAgainSlotBySlot) {
  batch_meets_a_moving_slot(false);
}

TEST_F(ClusterMigration, ABatchCallOverEvalshaMeetingAMovingSlotIsSentAgainSlotBySlot) {
  batch_meets_a_moving_slot(false, false);
}

#ifdef REDLIMIT_HAVE_LIBEVENT
TEST_F(ClusterMigration, AnAsyncBatchCallMeetingAMovingSlotIsSentAgainSlotBySlot) {
  batch_meets_a_moving_slot(true);
}
#endif

// The same for the states whose first read in a spread call is their decision's own (an HGETALL,
// a ZRANGE): the read of the moved key is refused as the fixed window's EXISTS is, and ends the
// call before anything was written; on Functions and on the EVALSHA path.
TEST_F(ClusterMigration, APolicyBatchCallMeetingAMovingSlotIsSentAgainSlotBySlot) {
  batch_meets_a_moving_slot(false, true, Kind::policy);
}

TEST_F(ClusterMigration, APolicyBatchCallOverEvalshaMeetingAMovingSlotIsSentAgainSlotBySlot) {
  batch_meets_a_moving_slot(false, false, Kind::policy);
}

TEST_F(ClusterMigration, ASlidingLogBatchCallMeetingAMovingSlotIsSentAgainSlotBySlot) {
  batch_meets_a_moving_slot(false, true, Kind::sliding_log);
}

TEST_F(ClusterMigration, ASlidingLogBatchCallOverEvalshaMeetingAMovingSlotIsSentAgainSlotBySlot) {
  batch_meets_a_moving_slot(false, false, Kind::sliding_log);
}

void ClusterMigration::batch_meets_a_moving_slot(bool async, bool functions, Kind kind) {
  at(0s);
  constexpr std::int64_t L = 5;
#ifdef REDLIMIT_HAVE_LIBEVENT
  redlimit_test::LibeventLoop loop;  // declared first: it outlives everything that uses it
  std::shared_ptr<redlimit::AsyncCluster> cluster_async;
  if (async) {
    cluster_async = redlimit::AsyncCluster::attach_libevent(loop.base(), redlimit::parse_cluster_url(cluster().url));
    loop.start();
  }
#else
  std::shared_ptr<redlimit::AsyncConnection> cluster_async;
#endif
  auto closed = limiter(OnFailure::fail_closed, functions);
  if (cluster_async) closed.attach_async(cluster_async);
  const std::string name = std::string(async       ? "spread-mig-async"
                                       : functions ? "spread-mig"
                                                   : "spread-mig-sha") +
                           (kind == Kind::policy        ? "-pol"
                            : kind == Kind::sliding_log ? "-log"
                                                        : "");
  std::unique_ptr<redlimit::Strategy> made;
  if (kind == Kind::fixed_window)
    made = std::make_unique<redlimit::FixedWindow>(closed.fixed_window(name, Limit(L, 1h)));
  if (kind == Kind::policy)
    made = std::make_unique<redlimit::Policy>(closed.policy(name, {Limit(L, 1h), Limit(100, 24h)}));
  if (kind == Kind::sliding_log) made = std::make_unique<redlimit::SlidingLog>(closed.sliding_log(name, Limit(L, 1h)));
  const redlimit::Strategy& fw = *made;
  const auto consume_many = [&](const std::vector<redlimit::Request>& batch) {
    if (!async) return fw.consume_many(batch);
    auto f = fw.consume_many_future(batch);
    return redlimit_test::get_within(f);
  };
  const auto slot_of = [&](const std::string& who) { return redlimit::detail::key_slot(fw.key_for(who)); };
  const std::string a = "smig-a";
  const int slot = slot_of(a);
  const int from = owner_port(slot);
  const auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  const int to = masters[0].port != from ? masters[0].port : masters[1].port;
  std::vector<std::string> same_master, elsewhere;  // on `from` in other slots; on the other masters
  for (int i = 0; (same_master.size() < 2 || elsewhere.size() < 2) && i < 10000; ++i) {
    const std::string who = "smig-" + std::to_string(i);
    const int p = owner_port(slot_of(who));
    if (p == from && slot_of(who) != slot && same_master.size() < 2) same_master.push_back(who);
    if (p != from && elsewhere.size() < 2) elsewhere.push_back(who);
  }
  ASSERT_EQ(same_master.size(), 2u);
  ASSERT_EQ(elsewhere.size(), 2u);
  // a's state exists; and the path settles (on Functions, unless off).
  ASSERT_TRUE(consume_many({{a, 1}, {a, 1}}).back().allowed);

  ASSERT_NO_FATAL_FAILURE(start_migration(slot, from, to));
  ASSERT_NO_FATAL_FAILURE(migrate(fw.key_for(a)));

  // On `from`: a same-master subject first (read before the refusal), then a, then the other.
  const std::vector<redlimit::Request> batch{
      {same_master[0], 1}, {a, 1}, {same_master[1], 1}, {elsewhere[0], 1}, {elsewhere[1], 1}};
  const auto got = consume_many(batch);
  ASSERT_EQ(got.size(), batch.size());
  EXPECT_EQ(got[1].source, Source::primary) << got[1];  // on the target, after ASK
  EXPECT_EQ(got[1].remaining, L - 3) << got[1];
  for (std::size_t i : {0u, 2u, 3u, 4u}) {
    EXPECT_EQ(got[i].source, Source::primary) << i << ": " << got[i];
    EXPECT_EQ(got[i].remaining, L - 1) << i << ": " << got[i];
  }
  EXPECT_EQ(closed.counters().resent_by_slot, 1u);

  finish_migration();
  for (const auto& who : same_master) EXPECT_EQ(fw.consume(who).remaining, L - 2) << who << ": counted once";
  const Decision da = fw.consume(a);
  EXPECT_EQ(da.source, Source::primary) << da;
  EXPECT_EQ(da.remaining, L - 4) << da;  // the refused call did not run; its resent request did, once
  std::printf("[ migration ] %s %s batch call (%s) refused mid-migration, sent again by slot %llu time(s)\n",
              async ? "async" : "sync", name.c_str(), functions ? "functions" : "evalsha",
              static_cast<unsigned long long>(closed.counters().resent_by_slot));
}

}  // namespace
}  // namespace redlimit_cluster
