// A batch over subjects of many slots on a 3-master cluster is one script call per master
// (Options::batch_per_master, the default), or one per hash slot with the option off: counted in
// each master's INFO commandstats, on both script paths (Redis Functions, and EVALSHA of the EVAL
// text's spread form, lua/spread_eval.lua), for every strategy and a policy, with the same decisions
// either way; and with Functions denied to the user by an ACL.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_fixture.hpp"
#include "redlimit/detail/keys.hpp"

namespace redlimit_cluster {
namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit_test::all_strategies;

// Subject i of a batch: the names subjects_on_each_master gives (cluster_env.hpp).
std::string batch_subject(int i) { return "user-" + std::to_string(i); }

class ClusterBatchCalls : public ClusterTest {};

// One batch of 60 requests over 45 subjects (some twice: decided in order) through `spread`, one
// script call per master, and through its twin `sliced`, one per slot, each call a `command`: the
// same decisions. Returns how many were admitted.
template <class S>
int expect_one_call_per_master(const S& spread, const S& sliced, const std::string& command) {
  // Each limiter's path settles (Functions, or EVALSHA), and every master has the script: on the
  // EVALSHA path a master that lacks it answers NOSCRIPT, and its call goes twice (after a LOAD).
  for (const auto& w : subjects_on_each_master(spread, 1)) {
    spread.peek(w, 1);
    sliced.peek(w, 1);
  }
  std::vector<std::string> who;  // a Request views its subject: the strings live here
  for (int i = 0; i < 60; ++i) who.push_back(batch_subject(i % 45));
  std::vector<redlimit::Request> requests;
  std::set<int> slots;
  for (int i = 0; i < 60; ++i) {
    requests.push_back({who[i], 1 + i % 2});
    slots.insert(redlimit::detail::key_slot(spread.key_for(who[i])));
  }
  on_live_masters({"CONFIG", "RESETSTAT"});
  const std::vector<Decision> got = spread.consume_many(requests);
  EXPECT_EQ(calls_on_masters(command), 3) << "one call per master";
  on_live_masters({"CONFIG", "RESETSTAT"});
  const std::vector<Decision> want = sliced.consume_many(requests);
  EXPECT_EQ(calls_on_masters(command), static_cast<long long>(slots.size())) << "one call per slot";
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
  on_live_masters({"SCRIPT", "FLUSH"});
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
TEST_F(ClusterBatchCalls, ABatchIsOneScriptCallPerMasterOrOnePerSlot) {
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
TEST_F(ClusterBatchCalls, APolicyBatchIsOneScriptCallPerMasterOrOnePerSlot) {
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

// Every strategy (all_strategies: 4 a window of an hour), and a policy of two limits ("policy"),
// under resources named from `prefix`: the states a spread call reads, one of each kind.
std::vector<redlimit_test::AnyStrategy> every_strategy_and_a_policy(const redlimit::RateLimiter& l,
                                                                    const std::string& prefix) {
  std::vector<redlimit_test::AnyStrategy> strategies = all_strategies(l, prefix, 4, 1h);
  strategies.push_back(
      redlimit_test::wrap("policy", 2, l.policy(prefix + ".pol", redlimit::parse_limits("2/s; 3/min"))));
  return strategies;
}

// A spread call reads every request's key before it writes anything, so that a key whose slot
// moved ends the call with nothing written (migration_test.cpp). A hash's or a sorted set's read is
// the one its decision makes, handed to it (lua/epilogue.lua, prefetch): a sliding window's, a
// policy's or a sliding log's decision costs in a spread call the commands it costs alone, with no
// MGET beside them. A string state's read is its MGET; the fixed window touches each key (EXISTS).
// Counted over the masters for a batch of 30 subjects, each once; on the EVALSHA path too.
TEST_F(ClusterBatchCalls, ASpreadCallReadsEachKeyOnceBeforeItWrites) {
  constexpr long long kSubjects = 30;
  for (const bool functions : {true, false}) {
    SCOPED_TRACE(functions ? "functions" : "evalsha");
    const auto t = twins(options(), functions);
    at(0s);
    const auto strategies = every_strategy_and_a_policy(t->per_master, t->prefix + "reads");
    std::vector<std::string> who;  // a Request views its subject: the strings live here
    for (long long i = 0; i < kSubjects; ++i) who.push_back("reads-" + std::to_string(i));
    std::vector<redlimit::Request> requests;
    for (const auto& w : who) requests.push_back({w, 1});
    for (const auto& s : strategies) {
      SCOPED_TRACE(s.name);
      for (const auto& w : subjects_on_each_master_by(s.key_for, 1, "settle-")) s.peek(w, 1);  // the path settles
      on_live_masters({"CONFIG", "RESETSTAT"});
      for (const auto& d : s.consume_many(requests)) EXPECT_TRUE(d.allowed) << d;
      EXPECT_EQ(calls_on_masters(script_command(functions)), 3) << "one call per master";
      const bool hash = s.name == "sliding_window" || s.name == "policy";
      const bool string_state = s.name == "token_bucket" || s.name.rfind("leaky", 0) == 0;
      EXPECT_EQ(calls_on_masters("mget"), string_state ? kSubjects : 0);
      EXPECT_EQ(calls_on_masters("hgetall"), hash ? kSubjects : 0);
      EXPECT_EQ(calls_on_masters("zrange"), s.name == "sliding_log" ? kSubjects : 0);
      EXPECT_EQ(calls_on_masters("exists"), s.name == "fixed_window" ? kSubjects : 0);
    }
  }
}

// A key of another type under a subject's name (a list, which no strategy writes) in a spread call:
// its read fails with WRONGTYPE, which the call keeps for that request's decision alone (the state
// starts again, as for a single request: lua/epilogue.lua, foreign keys), where any other failed
// read ends the call. Every request of the batch is decided, the list is replaced by the strategy's
// state, and that state has a TTL.
TEST_F(ClusterBatchCalls, AKeyOfAnotherTypeInASpreadCallIsReplaced) {
  const auto t = twins(options(), true);
  at(0s);
  const auto strategies = every_strategy_and_a_policy(t->per_master, t->prefix + "foreign");
  const std::vector<std::string> who{"foreign-0", "foreign-1", "foreign-2", "foreign-3", "foreign-4", "foreign-5"};
  std::vector<redlimit::Request> requests;
  for (const auto& w : who) requests.push_back({w, 1});
  for (const auto& s : strategies) {
    SCOPED_TRACE(s.name);
    const std::string key = s.key_for(who[2]);
    const int port = owner_port(redlimit::detail::key_slot(key));
    ASSERT_NE(port, 0);
    ASSERT_EQ(raw(port, {"RPUSH", key, "not redlimit's"}).integer, 1);
    const std::vector<Decision> got = s.consume_many(requests);
    ASSERT_EQ(got.size(), who.size());
    for (const auto& d : got) EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(got[2].remaining, s.limit - 1) << got[2];
    EXPECT_NE(raw(port, {"TYPE", key}).str, "list");
    EXPECT_GT(raw(port, {"PTTL", key}).integer, 0);
  }
}

// An ACL user denied Functions (FCALL and FUNCTION, as a managed service or an operator may) on
// every node: the router's library load and first FCALL are refused, the connection settles on
// EVALSHA, and a batch still goes as one script call per master (the EVAL text's spread form),
// deciding as one call per slot does. Before 7.0 the user needs no denial: there are no Functions.
TEST_F(ClusterBatchCalls, AUserDeniedFunctionsStillSendsABatchAsOneCallPerMaster) {
  const bool has_functions = script_command() == "fcall";
  std::vector<std::string> setuser{"ACL", "SETUSER", "nofcall", "reset", "on", ">pw", "~*", "+@all"};
  if (has_functions) setuser.insert(setuser.end(), {"-fcall", "-function"});
  std::vector<int> nodes;  // the live ones: a failover test may have stopped one for good
  for (const auto& n : cluster_nodes(live_masters().front().port)) {
    if (!n.failed) nodes.push_back(n.port);
  }
  for (const int port : nodes) ASSERT_EQ(raw(port, setuser).type, redlimit::Reply::Type::status) << port;
  if (has_functions) {  // no library: the user may neither load it nor call it
    on_live_masters({"FUNCTION", "FLUSH"});
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

}  // namespace
}  // namespace redlimit_cluster
