// The strategies and policies on a 3-master cluster: the same decisions as on one server (a scaled
// selection of the integration suite), keys of one subject in one slot, subjects spread over the
// masters, batches split by node (batch_calls_test.cpp counts their script calls), functions and
// scripts reloaded per node, and the #!lua shebang.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_fixture.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/transport/redis_connection.hpp"

namespace redlimit_cluster {
namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::Micros;
using redlimit_test::all_strategies;

std::string subject(int i) { return "user-" + std::to_string(i); }

template <class S>
int admitted_until_rejected(const S& s, std::string_view who) {
  int n = 0;
  while (n <= 1000 && s.consume(who).allowed) ++n;
  return n;
}

class ClusterStrategies : public ClusterTest {};

// Each of the six, for subjects on every master: limit admitted, then rejected with an exact
// retry_after; peek records nothing; refund gives back; block denies; reset forgets.
TEST_F(ClusterStrategies, EveryStrategyDecidesAsOnOneServer) {
  at(0s);
  for (const auto& s : all_strategies(rl(), "every", 4, 1h)) {
    SCOPED_TRACE(s.name);
    for (const auto& who : subjects_on_each_master(s, 2)) {
      SCOPED_TRACE(who);
      at(0s);
      Decision p = s.peek(who, 1);
      EXPECT_TRUE(p.allowed) << p;
      EXPECT_EQ(p.remaining, 4) << p;
      EXPECT_EQ(s.consume(who, 3).remaining, 1);
      EXPECT_EQ(s.peek(who, 1).remaining, 1);
      EXPECT_TRUE(s.consume(who, 1).allowed);
      const Decision rejected = s.consume(who, 1);
      EXPECT_FALSE(rejected.allowed) << rejected;
      EXPECT_EQ(rejected.limit, 4) << rejected;
      redlimit_test::expect_retry_after_exact(*clock, s, who, 1, rejected);
      // Refund one unit: one more request fits again.
      const Decision r = s.refund(who, 1);
      EXPECT_TRUE(r.allowed) << r;
      EXPECT_TRUE(s.consume(who, 1).allowed);
      // Block: denied; unblock lifts the block and keeps the state; reset lifts a block and the
      // state.
      const std::int64_t left = s.peek(who, 1).remaining;
      const Decision b = s.block(who, 10min);
      EXPECT_FALSE(b.allowed) << b;
      const Decision denied = s.consume(who, 1);
      EXPECT_FALSE(denied.allowed) << denied;
      EXPECT_GE(denied.retry_after, 10min - 1s) << denied;
      EXPECT_TRUE(s.unblock(who));
      EXPECT_FALSE(s.unblock(who));
      EXPECT_EQ(s.peek(who, 1).remaining, left);
      s.block(who, 10min);
      s.reset(who);
      p = s.peek(who, 1);
      EXPECT_EQ(p.remaining, 4) << p;
      EXPECT_TRUE(s.consume(who, 4).allowed);
    }
  }
}

// Seed 004 on the cluster: 100 in the first 15 s of a minute; at 1.25 min, 25 more with one-minute
// precision, 50 with 30 s precision.
TEST_F(ClusterStrategies, Seed004SlidingWindow) {
  auto coarse = rl().sliding_window("seed004-60s", Limit::per_minute(100));
  auto fine = rl().sliding_window("seed004-30s", Limit::per_minute(100), 30s);
  for (const auto& who : subjects_on_each_master(coarse, 1)) {
    SCOPED_TRACE(who);
    for (int i = 0; i < 100; ++i) {
      at(Micros{i * 150'000});
      ASSERT_TRUE(coarse.consume(who).allowed) << i;
      ASSERT_TRUE(fine.consume(who).allowed) << i;
    }
    at(75s);
    const Decision first = coarse.consume(who);
    EXPECT_TRUE(first.allowed) << first;
    EXPECT_EQ(first.remaining, 24) << first;
    EXPECT_EQ(admitted_until_rejected(coarse, who), 24);
    EXPECT_EQ(admitted_until_rejected(fine, who), 50);
  }
}

// A policy of three limits: all-or-nothing, the deciding limit reported, retry_after exact.
TEST_F(ClusterStrategies, ThreeLimitPolicy) {
  auto api = rl().policy("api3", redlimit::parse_limits("5/s; 12/min; 100/h"));
  for (const auto& who : subjects_on_each_master(api, 1)) {
    SCOPED_TRACE(who);
    at(0s);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(api.consume(who).allowed) << i;
    Decision d = api.consume(who);
    EXPECT_FALSE(d.allowed) << d;
    EXPECT_EQ(d.limit_index, 0u) << d;
    at(2s);  // the 1 s window of [0 s, 1 s) no longer weighs
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(api.consume(who).allowed) << i;
    at(4s);
    EXPECT_TRUE(api.consume(who).allowed);
    EXPECT_TRUE(api.consume(who).allowed);
    d = api.consume(who);  // 12 in this minute
    EXPECT_FALSE(d.allowed) << d;
    EXPECT_EQ(d.limit_index, 1u) << d;
    EXPECT_EQ(d.limit, 12) << d;
    redlimit_test::expect_retry_after_exact(*clock, api, who, 1, d);
  }
}

// consume_many over many subjects: split by master, decisions in the caller's order, the same as
// single consumes on a twin resource.
TEST_F(ClusterStrategies, ConsumeManyMatchesSingleConsumes) {
  at(0s);
  auto batch_fw = rl().fixed_window("batch.fw", Limit(5, 1min));
  auto twin_fw = rl().fixed_window("twin.fw", Limit(5, 1min));
  auto batch_tb = rl().token_bucket("batch.tb", 5, 5, 1min);
  auto twin_tb = rl().token_bucket("twin.tb", 5, 5, 1min);
  auto batch_p = rl().policy("batch.p", redlimit::parse_limits("5/min; 8/h"));
  auto twin_p = rl().policy("twin.p", redlimit::parse_limits("5/min; 8/h"));
  const int n = 150;
  std::vector<std::string> who;
  for (int i = 0; i < n; ++i) who.push_back(subject((i * 37) % n));  // not in slot order
  auto check = [&](const redlimit::Strategy& batch, const redlimit::Strategy& twin, const char* name) {
    SCOPED_TRACE(name);
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < i % 6; ++k) {
        batch.consume(who[i]);
        twin.consume(who[i]);
      }
    }
    std::vector<redlimit::Request> requests;
    for (int i = 0; i < n; ++i) requests.push_back({who[i], 1 + i % 3});
    const std::vector<Decision> got = batch.consume_many(requests);
    ASSERT_EQ(got.size(), requests.size());
    int allowed = 0;
    for (int i = 0; i < n; ++i) {
      const Decision want = twin.consume(who[i], 1 + i % 3);
      EXPECT_EQ(got[i].allowed, want.allowed) << i << " " << who[i] << ": " << got[i] << " vs " << want;
      EXPECT_EQ(got[i].remaining, want.remaining) << i << ": " << got[i] << " vs " << want;
      EXPECT_EQ(got[i].retry_after, want.retry_after) << i << ": " << got[i] << " vs " << want;
      EXPECT_EQ(got[i].reset_after, want.reset_after) << i << ": " << got[i] << " vs " << want;
      EXPECT_EQ(got[i].limit_index, want.limit_index) << i;
      allowed += got[i].allowed;
    }
    EXPECT_GT(allowed, 0);
    EXPECT_LT(allowed, n);
  };
  check(batch_fw, twin_fw, "fixed_window");
  check(batch_tb, twin_tb, "token_bucket");
  check(batch_p, twin_p, "policy");
  // A sliding log writing compact entries adds a word to the script's parameters: a call of many
  // slots carries it through, as a function of the library and as the EVALSHA text's spread.
  for (const bool functions : {true, false}) {
    redlimit::Options o = options();
    o.sliding_log_members = redlimit::SlidingLogMembers::compact;
    o.redis_functions = functions;
    const redlimit::RateLimiter compact(connection, o);
    const std::string tag = functions ? "fn" : "sha";
    check(compact.sliding_log("batch.sl." + tag, Limit(5, 1min)), compact.sliding_log("twin.sl." + tag, Limit(5, 1min)),
          functions ? "sliding_log compact, functions" : "sliding_log compact, evalsha");
  }
  // The subjects really were spread over the three masters.
  std::set<std::string> nodes;
  for (const auto& w : who) nodes.insert(connection->node_for_slot(redlimit::detail::key_slot(batch_fw.key_for(w))));
  EXPECT_EQ(nodes.size(), 3u);
}

// Every master loses its scripts and functions (SCRIPT FLUSH, FUNCTION FLUSH) between decisions,
// on both paths: as Redis Functions (the default: the router loads the library on every master, and
// after the flush one LOAD a master serves the calls that missed it) and as EVALSHA
// (Options::redis_functions = false: NOSCRIPT, then one SCRIPT LOAD, which the router sends to every
// master, with the calls that missed behind it; no call goes whole as EVAL). Decisions stay exact,
// through single calls and a batch, and each path runs only its own kind of command.
TEST_F(ClusterStrategies, ScriptsAndFunctionsFlushedOnEveryMasterOnBothPaths) {
  for (const bool functions : {true, false}) {
    SCOPED_TRACE(functions ? "functions" : "evalsha");
    flush_all_masters();
    on_live_masters({"FUNCTION", "FLUSH"});
    on_live_masters({"CONFIG", "RESETSTAT"});
    const auto flush = [] {
      on_live_masters({"SCRIPT", "FLUSH"});
      on_live_masters({"FUNCTION", "FLUSH"});
    };
    redlimit::Options o = options();
    o.redis_functions = functions;
    const redlimit::RateLimiter l(connection, o);
    at(0s);
    for (const auto& s : all_strategies(l, "flushed", 3, 1h)) {
      SCOPED_TRACE(s.name);
      const auto who = subjects_on_each_master(s, 2);
      for (const auto& w : who) EXPECT_EQ(s.consume(w, 1).remaining, 2) << w;
      flush();
      for (const auto& w : who) EXPECT_EQ(s.consume(w, 1).remaining, 1) << w;
      for (const auto& w : who) EXPECT_EQ(s.consume(w, 1).remaining, 0) << w;
      for (const auto& w : who) EXPECT_FALSE(s.consume(w, 1).allowed) << w;
    }
    auto fw = l.fixed_window("flushed.batch", Limit(3, 1h));
    const auto who = subjects_on_each_master(fw, 3);
    std::vector<redlimit::Request> requests;
    for (const auto& w : who) requests.push_back({w, 1});
    flush();
    const auto got = fw.consume_many(requests);
    ASSERT_EQ(got.size(), who.size());
    for (const auto& d : got) {
      EXPECT_TRUE(d.allowed) << d;
      EXPECT_EQ(d.remaining, 2) << d;
    }
    EXPECT_EQ(l.health().scripts, functions ? redlimit::ScriptPath::functions : redlimit::ScriptPath::evalsha);
    for (const auto& m : live_masters()) {
      SCOPED_TRACE(m.port);
      EXPECT_GT(calls_of(m.port, functions ? "fcall" : "evalsha"), 0);
      EXPECT_EQ(calls_of(m.port, functions ? "evalsha" : "fcall"), 0);
      EXPECT_EQ(calls_of(m.port, "eval"), 0);
      if (!functions) EXPECT_GT(calls_of(m.port, "script|load"), 0);
      const redlimit::Reply listed =
          raw(m.port, {"FUNCTION", "LIST", "LIBRARYNAME", std::string(redlimit::detail::scripts::library_name())});
      EXPECT_EQ(listed.elements.size(), functions ? 1u : 0u) << "the library on this master";
    }
  }
}

class ClusterSlots : public ClusterTest {};

// Every key of one subject in one slot (Redis's own CLUSTER KEYSLOT agrees with ours), and the
// subjects spread over the three masters.
TEST_F(ClusterSlots, SubjectKeysShareASlotAndSubjectsSpread) {
  at(0s);
  auto fw = rl().fixed_window("spread", Limit(10, 1h));
  auto p = rl().policy("spread.p", redlimit::parse_limits("5/s; 100/h"));
  redlimit::Endpoint ep;
  ep.host = "127.0.0.1";
  ep.port = cluster().ports.front();
  redlimit::RedisConnection node(ep, 3000ms, 10000ms);
  const int n = 300;
  for (int i = 0; i < n; ++i) {
    const std::string who = subject(i) + (i % 7 == 0 ? "{x}:|%" : "");  // escaping keeps one tag
    for (const redlimit::Strategy* s : {static_cast<const redlimit::Strategy*>(&fw), static_cast<const redlimit::Strategy*>(&p)}) {
      const std::string key = s->key_for(who), block = s->block_key_for(who);
      const redlimit::Reply a = node.command({"CLUSTER", "KEYSLOT", key});
      const redlimit::Reply b = node.command({"CLUSTER", "KEYSLOT", block});
      ASSERT_EQ(a.type, redlimit::Reply::Type::integer) << a.str;
      EXPECT_EQ(a.integer, b.integer) << key << " vs " << block;
      EXPECT_EQ(a.integer, redlimit::detail::key_slot(key)) << key;
    }
    ASSERT_TRUE(fw.consume(who).allowed) << who;
  }
  std::int64_t total = 0;
  const auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  for (const auto& m : masters) {
    const redlimit::Reply r = raw(m.port, {"DBSIZE"});
    ASSERT_EQ(r.type, redlimit::Reply::Type::integer) << r.str;
    std::cout << "[ slots ] master " << m.port << ": " << r.integer << " of " << n << " keys\n";
    EXPECT_GT(r.integer, n * 15 / 100) << "master " << m.port;
    total += r.integer;
  }
  EXPECT_EQ(total, n);
  EXPECT_EQ(connection->masters().size(), 3u);
}

// The shebang: with "#!lua", Redis refuses a key outside the slot of the keys the script declared
// (even one on the same node, which a script without the shebang may touch), so a routing or key
// layout bug fails loudly instead of touching another slot. That is why every redlimit script starts
// with it. (With no key declared at all, Redis 7.0 only refuses keys of slots the node does not serve:
// printed below, not asserted.)
TEST_F(ClusterSlots, ShebangRefusesUndeclaredKeys) {
  const std::string key = "undeclared";
  const int slot = redlimit::detail::key_slot(key);
  const int port = owner_port(slot);
  ASSERT_NE(port, 0);
  std::string declared;  // a key of another slot on the same node
  for (int i = 0; i < 10000 && declared.empty(); ++i) {
    const std::string k = "declared-" + std::to_string(i);
    const int s = redlimit::detail::key_slot(k);
    if (s != slot && owner_port(s) == port) declared = k;
  }
  ASSERT_FALSE(declared.empty());
  const std::string body = "return redis.call('GET', '" + key + "')";
  const redlimit::Reply plain = raw(port, {"EVAL", body, "1", declared});
  EXPECT_FALSE(plain.is_error()) << "without the shebang the undeclared key is served: " << plain.str;
  const redlimit::Reply shebang = raw(port, {"EVAL", "#!lua\n" + body, "1", declared});
  EXPECT_TRUE(shebang.is_error()) << "with the shebang, an undeclared key of another slot must be refused";
  std::cout << "[ shebang ] declared " << declared << ", touched " << key << ": Redis says: " << shebang.str << "\n";
  // A non-local key is refused either way; a local one with no key declared is not checked.
  const redlimit::Reply zero = raw(port, {"EVAL", "#!lua\n" + body, "0"});
  std::cout << "[ shebang ] EVAL \"#!lua ... GET undeclared\" 0 on the key's own node: "
            << (zero.is_error() ? "refused: " + zero.str : std::string("served (Redis 7.0 checks only declared slots)"))
            << "\n";
  const int other_port = owner_port((slot + 8192) % 16384);
  ASSERT_NE(other_port, port);
  const redlimit::Reply remote = raw(other_port, {"EVAL", "#!lua\n" + body, "0"});
  EXPECT_TRUE(remote.is_error()) << "a key the node does not serve must be refused";
  namespace sc = redlimit::detail::scripts;
  for (const redlimit::detail::Script* s :
       {&sc::fixed_window(), &sc::sliding_log(), &sc::policy(), &sc::token_bucket(), &sc::leaky_bucket(), &sc::block()}) {
    EXPECT_EQ(s->source.substr(0, 5), "#!lua") << s->name;
  }
}

}  // namespace
}  // namespace redlimit_cluster
