// The strategies and policies on a 3-master cluster: the same decisions as on one server (a scaled
// selection of the integration suite), keys of one subject in one slot, subjects spread over the
// masters, batches split by node, functions and scripts reloaded per node, and the #!lua shebang.
#include <gtest/gtest.h>

#include <map>
#include <memory>
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

// Subjects whose keys land on each master (at least `per_master` per master), for a strategy.
template <class S>
std::vector<std::string> subjects_on_every_master(const S& s, int per_master) {
  std::map<int, int> seen;
  std::vector<std::string> out;
  for (int i = 0; i < 1000; ++i) {
    const int port = owner_port(redlimit::detail::key_slot(s.key_for(subject(i))));
    if (seen[port] >= per_master) continue;
    ++seen[port];
    out.push_back(subject(i));
    if (seen.size() == 3 && static_cast<int>(out.size()) == 3 * per_master) break;
  }
  return out;
}

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
    for (const auto& who : subjects_on_every_master(s, 2)) {
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
  for (const auto& who : subjects_on_every_master(coarse, 1)) {
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
  for (const auto& who : subjects_on_every_master(api, 1)) {
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
    for (const auto& m : live_masters()) {
      ASSERT_FALSE(raw(m.port, {"FUNCTION", "FLUSH"}).is_error());
      ASSERT_FALSE(raw(m.port, {"CONFIG", "RESETSTAT"}).is_error());
    }
    const auto flush = [] {
      for (const auto& m : live_masters()) {
        ASSERT_FALSE(raw(m.port, {"SCRIPT", "FLUSH"}).is_error());
        ASSERT_FALSE(raw(m.port, {"FUNCTION", "FLUSH"}).is_error());
      }
    };
    redlimit::Options o = options();
    o.redis_functions = functions;
    const redlimit::RateLimiter l(connection, o);
    at(0s);
    for (const auto& s : all_strategies(l, "flushed", 3, 1h)) {
      SCOPED_TRACE(s.name);
      const auto who = subjects_on_every_master(s, 2);
      for (const auto& w : who) EXPECT_EQ(s.consume(w, 1).remaining, 2) << w;
      flush();
      for (const auto& w : who) EXPECT_EQ(s.consume(w, 1).remaining, 1) << w;
      for (const auto& w : who) EXPECT_EQ(s.consume(w, 1).remaining, 0) << w;
      for (const auto& w : who) EXPECT_FALSE(s.consume(w, 1).allowed) << w;
    }
    auto fw = l.fixed_window("flushed.batch", Limit(3, 1h));
    const auto who = subjects_on_every_master(fw, 3);
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

// The script calls (`command`: "fcall", "evalsha") the masters ran since their last CONFIG RESETSTAT.
long long script_calls(const std::string& command) {
  long long n = 0;
  for (const auto& m : live_masters()) n += calls_of(m.port, command);
  return n;
}

// One batch of 60 requests over 45 subjects (some twice: decided in order) through `spread`, one
// script call per master, and through its twin `sliced`, one per slot, each call a `command`: the
// same decisions. Returns how many were admitted.
template <class S>
int expect_one_call_per_master(const S& spread, const S& sliced, const std::string& command) {
  // Each limiter's path settles (Functions, or EVALSHA), and every master has the script: on the
  // EVALSHA path a master that lacks it answers NOSCRIPT, and its call goes twice (after a LOAD).
  for (const auto& w : subjects_on_every_master(spread, 1)) {
    spread.peek(w, 1);
    sliced.peek(w, 1);
  }
  std::vector<std::string> who;  // a Request views its subject: the strings live here
  for (int i = 0; i < 60; ++i) who.push_back(subject(i % 45));
  std::vector<redlimit::Request> requests;
  std::set<int> slots;
  for (int i = 0; i < 60; ++i) {
    requests.push_back({who[i], 1 + i % 2});
    slots.insert(redlimit::detail::key_slot(spread.key_for(who[i])));
  }
  for (const auto& m : live_masters()) EXPECT_FALSE(raw(m.port, {"CONFIG", "RESETSTAT"}).is_error());
  const std::vector<Decision> got = spread.consume_many(requests);
  EXPECT_EQ(script_calls(command), 3) << "one call per master";
  for (const auto& m : live_masters()) EXPECT_FALSE(raw(m.port, {"CONFIG", "RESETSTAT"}).is_error());
  const std::vector<Decision> want = sliced.consume_many(requests);
  EXPECT_EQ(script_calls(command), static_cast<long long>(slots.size())) << "one call per slot";
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size()) return 0;
  int allowed = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].allowed, want[i].allowed) << i << ": " << got[i] << " vs " << want[i];
    EXPECT_EQ(got[i].remaining, want[i].remaining) << i << ": " << got[i] << " vs " << want[i];
    EXPECT_EQ(got[i].retry_after, want[i].retry_after) << i << ": " << got[i] << " vs " << want[i];
    EXPECT_EQ(got[i].reset_after, want[i].reset_after) << i << ": " << got[i] << " vs " << want[i];
    EXPECT_EQ(got[i].delay, want[i].delay) << i;
    EXPECT_EQ(got[i].limit_index, want[i].limit_index) << i << ": " << got[i] << " vs " << want[i];
    allowed += got[i].allowed;
  }
  EXPECT_GT(allowed, 0);
  return allowed;
}

// Twin limiters, each on its own connection with the fixture's options on one script path: one
// script call per master (the default), and one per slot (Options::batch_per_master off).
struct Twins {
  std::string prefix;  // of the resources' names: each path's are its own
  redlimit::RateLimiter per_master, per_slot;
};

// No master has the EVAL scripts to begin with (expect_one_call_per_master's warm-up loads them).
std::unique_ptr<Twins> twins(redlimit::Options o, bool functions) {
  for (const auto& m : live_masters()) EXPECT_FALSE(raw(m.port, {"SCRIPT", "FLUSH"}).is_error());
  o.redis_functions = functions;
  const auto own = [](const redlimit::Options& with) {
    return redlimit::RateLimiter(
        std::make_shared<redlimit::ClusterConnection>(redlimit::parse_cluster_url(cluster().url), with), with);
  };
  redlimit::Options sliced = o;
  sliced.batch_per_master = false;
  return std::make_unique<Twins>(Twins{functions ? "fn." : "sha.", own(o), own(sliced)});
}

// A batch over many subjects is one script call per master (Options::batch_per_master, the
// default): an FCALL of each script's spread function (EVALSHA before 7.0, which has none), or
// with Functions off the same form of its EVAL text over EVALSHA (lua/spread_eval.lua, whose
// shebang allows keys of many slots; a server older than 7.0 gets it without that line). With the
// option off, one call per hash slot. Every strategy decides the same either way, on twin
// resources, on both paths.
TEST_F(ClusterStrategies, ABatchIsOneScriptCallPerMasterOrOnePerSlot) {
  for (const bool functions : {true, false}) {
    SCOPED_TRACE(functions ? "functions" : "evalsha");
    const auto t = twins(options(), functions);
    at(0s);
    const auto spread = all_strategies(t->per_master, t->prefix + "spread", 4, 1h);
    const auto sliced = all_strategies(t->per_slot, t->prefix + "sliced", 4, 1h);
    for (std::size_t k = 0; k < spread.size(); ++k) {
      SCOPED_TRACE(spread[k].name);
      expect_one_call_per_master<redlimit_test::AnyStrategy>(spread[k], sliced[k], script_command(functions));
    }
    EXPECT_EQ(t->per_master.counters().resent_by_slot, 0u);
  }
}

// The same for a policy of three limits, whose state is a hash its script reads itself (no MGET of
// it in a spread call: lua/epilogue.lua): the deciding limit the same too.
TEST_F(ClusterStrategies, APolicyBatchIsOneScriptCallPerMasterOrOnePerSlot) {
  const auto limits = redlimit::parse_limits("2/s; 3/min; 100/h");
  for (const bool functions : {true, false}) {
    SCOPED_TRACE(functions ? "functions" : "evalsha");
    const auto t = twins(options(), functions);
    at(0s);
    // The 15 subjects that come twice ask 3 units at once: past the first limit.
    EXPECT_EQ(
        expect_one_call_per_master(t->per_master.policy(t->prefix + "spread.pol", limits),
                                   t->per_slot.policy(t->prefix + "sliced.pol", limits), script_command(functions)),
        45);
    EXPECT_EQ(t->per_master.counters().resent_by_slot, 0u);
  }
}

// An ACL user denied Functions (FCALL and FUNCTION, as a managed service or an operator may) on
// every node: the router's library load and first FCALL are refused, the connection settles on
// EVALSHA, and a batch still goes as one script call per master (the EVAL text's spread form),
// deciding as one call per slot does. Before 7.0 the user needs no denial: there are no Functions.
TEST_F(ClusterStrategies, AUserDeniedFunctionsStillSendsABatchAsOneCallPerMaster) {
  const bool has_functions = script_command() == "fcall";
  std::vector<std::string> setuser{"ACL", "SETUSER", "nofcall", "reset", "on", ">pw", "~*", "+@all"};
  if (has_functions) setuser.insert(setuser.end(), {"-fcall", "-function"});
  std::vector<int> nodes;  // the live ones: a failover test may have stopped one for good
  for (const auto& n : cluster_nodes(live_masters().front().port)) {
    if (!n.failed) nodes.push_back(n.port);
  }
  for (const int port : nodes) ASSERT_EQ(raw(port, setuser).type, redlimit::Reply::Type::status) << port;
  if (has_functions) {  // no library: the user may neither load it nor call it
    for (const auto& m : live_masters()) ASSERT_FALSE(raw(m.port, {"FUNCTION", "FLUSH"}).is_error());
  }
  struct DropUser {
    const std::vector<int>& nodes;
    ~DropUser() {
      for (const int port : nodes) raw(port, {"ACL", "DELUSER", "nofcall"});
    }
  } drop{nodes};
  std::string url = cluster().url;  // redis-cluster://127.0.0.1:P1,...
  url.insert(std::string("redis-cluster://").size(), "nofcall:pw@");
  const auto own = [&url](const redlimit::Options& o) {
    return redlimit::RateLimiter(std::make_shared<redlimit::ClusterConnection>(redlimit::parse_cluster_url(url), o), o);
  };
  redlimit::Options o = options();  // Functions on: the ACL, not the option, says no
  const redlimit::RateLimiter denied = own(o);
  o.batch_per_master = false;
  const redlimit::RateLimiter per_slot = own(o);
  at(0s);
  const auto spread = all_strategies(denied, "acl.spread", 4, 1h);
  const auto sliced = all_strategies(per_slot, "acl.sliced", 4, 1h);
  for (std::size_t k = 0; k < spread.size(); ++k) {
    SCOPED_TRACE(spread[k].name);
    expect_one_call_per_master<redlimit_test::AnyStrategy>(spread[k], sliced[k], "evalsha");
  }
  EXPECT_EQ(denied.health().scripts, redlimit::ScriptPath::evalsha);
  EXPECT_EQ(denied.counters().resent_by_slot, 0u);
  for (const auto& m : live_masters()) {
    EXPECT_EQ(raw(m.port, {"FUNCTION", "LIST"}).elements.size(), 0u) << m.port << ": the user could not load it";
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
