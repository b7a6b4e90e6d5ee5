// consume_many against a real server: one script call decides a whole batch (lua/epilogue.lua),
// and every decision in it is the one the same requests get one by one, in order. Covered: every
// strategy and a policy, subjects repeated inside a batch, floods past the limit (answered from the
// script's memo of rejections), costs above 1, batches longer than one script call.
#include <random>

#include "redlimit/detail/lua_sources.hpp"
#include "redlimit/transport/memory_connection.hpp"
#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

using redlimit::Reply;
using redlimit::Request;

void expect_same(const Decision& batched, const Decision& single, const std::string& where) {
  EXPECT_EQ(batched.allowed, single.allowed) << where << "\n batched " << batched << "\n  single " << single;
  EXPECT_EQ(batched.limit, single.limit) << where;
  EXPECT_EQ(batched.remaining, single.remaining) << where;
  EXPECT_EQ(batched.retry_after, single.retry_after) << where;
  EXPECT_EQ(batched.reset_after, single.reset_after) << where;
  EXPECT_EQ(batched.delay, single.delay) << where;
  EXPECT_EQ(batched.limit_index, single.limit_index) << where;
  ASSERT_EQ(batched.limits.size(), single.limits.size()) << where;
  for (std::size_t i = 0; i < batched.limits.size(); ++i) {  // the memo of rejections keeps them too
    EXPECT_EQ(batched.limits[i].remaining, single.limits[i].remaining) << where << " limit " << i;
    EXPECT_EQ(batched.limits[i].reset_after, single.limits[i].reset_after) << where << " limit " << i;
  }
}

class BatchTest : public StrictRedisTest {
 protected:
  // The strategies of all_strategies() and a policy of two limits, under `resource`.
  std::vector<AnyStrategy> strategies(const std::string& resource) const {
    auto all = all_strategies(rl(), resource, 10, 1s);
    all.push_back(wrap("policy", 10, rl().policy(resource + ".pol", redlimit::parse_limits("10/s; 25/5s@1s"))));
    return all;
  }
};

// A raw call, past the client's checks, whose second request's cost is not one (a decimal integer
// in [1, 2^40]) fails whole and writes nothing, not even the first request's admission: every cost
// is read before the first write (epilogue.lua), on Redis and in the in-memory backend alike. The
// same call with a good cost writes both subjects, so the count of keys can tell.
TEST_F(BatchTest, ARawCallWithABadLaterCostFailsWholeAndWritesNothing) {
  namespace lua = redlimit::detail::lua;
  struct Case {
    std::string_view source;
    std::string params;             // the parameters, space-separated: the end of the head (ARGV[2])
    std::vector<std::string> keys;  // two requests' (lua/prologue.lua: each its state)
  };
  const Case cases[] = {
      {lua::fixed_window, "5 1000000", {"raw:{a}:s", "raw:{b}:s"}},         // a string state
      {lua::policy, "1 1s 5 1000000 1000000", {"raw:{a}:s", "raw:{b}:s"}},  // a hash
      {lua::sliding_log, "5 1000000", {"raw:{a}:s", "raw:{b}:s"}},          // a sorted set
  };
  redlimit::MemoryConnection memory(clock);  // the call's now is kT0: so is the store's
  for (const Case& c : cases) {
    const std::vector<std::string>& keys = c.keys;
    for (const std::string second_cost : {"x", "0", "-1", "1.5", "1e3", "1099511627777", "2"}) {
      SCOPED_TRACE(std::string(c.source.substr(0, 60)) + " / cost " + second_cost);
      std::vector<std::string> argv = {"EVAL", server().runnable(c.source), std::to_string(keys.size())};
      argv.insert(argv.end(), keys.begin(), keys.end());
      argv.push_back(std::to_string(kT0.count()));
      argv.push_back("1 1 " + std::string(c.params));  // the head: mode, request 1's cost, parameters
      argv.push_back(second_cost);                     // request 2's cost
      const bool bad = second_cost != "2";             // a cost is a decimal integer in [1, 2^40]
      std::vector<std::string> del = {"DEL"};
      del.insert(del.end(), keys.begin(), keys.end());
      const Reply on_redis = server().command(argv);
      EXPECT_EQ(on_redis.type == Reply::Type::error, bad) << on_redis.str;
      EXPECT_EQ(server().integer(del), bad ? 0 : 2) << "keys written on Redis";
      const Reply in_memory = memory.command(argv);
      EXPECT_EQ(in_memory.type == Reply::Type::error, bad) << in_memory.str;
      const Reply deleted = memory.command(del);
      ASSERT_EQ(deleted.type, Reply::Type::integer) << deleted.str;
      EXPECT_EQ(deleted.integer, bad ? 0 : 2) << "keys written in memory";
    }
  }
}

// A raw call, past the client's checks (Strategy::check_cost), whose cost is above the least limit
// of its parameters fails with a redlimit error and writes nothing, whichever request asks for it,
// on Redis and in the in-memory backend alike: no such request can ever be admitted (helpers.lua,
// cost_above), where before it got a wait it would still not fit after (a sliding log with nothing
// live answered a Lua error). A cost at the limit writes each subject.
TEST_F(BatchTest, ARawCallWithACostAboveTheLimitFailsWholeAndWritesNothing) {
  namespace lua = redlimit::detail::lua;
  struct Case {
    std::string_view source;
    std::string params;  // every case's least limit is 5
  };
  const Case cases[] = {
      {lua::fixed_window, "5 1000000"},
      {lua::token_bucket, "5 1000 1"},
      {lua::leaky_bucket, "5 1000 1 meter"},
      {lua::sliding_log, "5 1000000"},
      {lua::policy, "2 1m 9 60000000 60000000 1s 5 1000000 1000000"},  // the second limit's
  };
  redlimit::MemoryConnection memory(clock);
  for (const Case& c : cases) {
    for (const auto& [costs, bad] : std::vector<std::pair<std::vector<std::string>, bool>>{
             {{"5"}, false}, {{"6"}, true}, {{"5", "5"}, false}, {{"6", "1"}, true}, {{"1", "6"}, true}}) {
      SCOPED_TRACE(std::string(c.source.substr(0, 40)) + " / costs " + costs.front() +
                   (costs.size() > 1 ? " " + costs.back() : ""));
      std::vector<std::string> keys;
      for (const char* s : {"a", "b"}) {
        if (keys.size() == costs.size()) break;
        keys.push_back(std::string("raw:{") + s + "}:s");  // each request's state
      }
      std::vector<std::string> argv = {"EVAL", server().runnable(c.source), std::to_string(keys.size())};
      argv.insert(argv.end(), keys.begin(), keys.end());
      argv.push_back(std::to_string(kT0.count()));
      argv.push_back("1 " + costs.front() + " " + c.params);
      if (costs.size() > 1) argv.push_back(costs.back());  // request 2's cost
      std::vector<std::string> del = {"DEL"};
      del.insert(del.end(), keys.begin(), keys.end());
      const long long written = bad ? 0 : static_cast<long long>(costs.size());
      const std::string why = bad ? "redlimit: a cost of 6 is above the limit of 5" : "";
      const Reply on_redis = server().command(argv);
      EXPECT_EQ(on_redis.type == Reply::Type::error, bad) << on_redis.str;
      EXPECT_NE(on_redis.str.find(why), std::string::npos) << on_redis.str;
      EXPECT_EQ(server().integer(del), written) << "keys written on Redis";
      const Reply in_memory = memory.command(argv);
      EXPECT_EQ(in_memory.type == Reply::Type::error, bad) << in_memory.str;
      EXPECT_NE(in_memory.str.find(why), std::string::npos) << in_memory.str;
      EXPECT_EQ(memory.command(del).integer, written) << "keys written in memory";
    }
  }
}

// A raw call whose head (ARGV[2], lua/prologue.lua) is not "<mode> <cost> <parameters>" fails
// before it reads or writes anything, on Redis and in the in-memory backend alike; a good head
// writes the subject's key, so the count of keys can tell.
TEST_F(BatchTest, ARawCallWithAMalformedHeadFailsAndWritesNothing) {
  namespace lua = redlimit::detail::lua;
  const std::pair<std::string, bool> heads[] = {
      {"1 1 5 1000000", false},
      {"1 x 5 1000000", true},
      {"9 1 5 1000000", true},
      {"11 1 5 1000000", true},
      {"1 -1 5 1000000", true},
      {"1 0 5 1000000", true},              // a cost of 0
      {"1 1099511627777 5 1000000", true},  // above 2^40
      {"1", true},
      {"", true},
  };
  redlimit::MemoryConnection memory(clock);
  for (const auto& [head, bad] : heads) {
    SCOPED_TRACE("head \"" + head + "\"");
    const std::vector<std::string> argv = {"EVAL",      server().runnable(lua::fixed_window), "1",
                                           "raw:{a}:s", std::to_string(kT0.count()),          head};
    const Reply on_redis = server().command(argv);
    EXPECT_EQ(on_redis.type == Reply::Type::error, bad) << on_redis.str;
    EXPECT_EQ(server().integer({"DEL", "raw:{a}:s"}), bad ? 0 : 1) << "keys written on Redis";
    const Reply in_memory = memory.command(argv);
    EXPECT_EQ(in_memory.type == Reply::Type::error, bad) << in_memory.str;
    EXPECT_EQ(memory.command({"DEL", "raw:{a}:s"}).integer, bad ? 0 : 1) << "keys written in memory";
  }
}

TEST_F(BatchTest, ABatchDecidesExactlyAsTheSameRequestsOneByOne) {
  const auto batched = strategies("batch");
  const auto single = strategies("single");
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<std::string> subjects{"a", "b", "c"};
  at(0s);
  int rejected = 0;
  int admitted = 0;
  for (std::size_t k = 0; k < batched.size(); ++k) {
    for (int step = 0; step < 40; ++step) {
      clock->advance(Micros{static_cast<std::int64_t>(rng() % 200'000)});
      std::vector<Request> requests(1 + rng() % 30);
      for (auto& r : requests) {
        r.subject = subjects[rng() % subjects.size()];
        r.cost = 1 + static_cast<std::int64_t>(rng() % 3);
      }
      const auto got = batched[k].consume_many(requests);
      ASSERT_EQ(got.size(), requests.size());
      for (std::size_t i = 0; i < requests.size(); ++i) {
        const Decision want = single[k].consume(requests[i].subject, requests[i].cost);
        expect_same(got[i], want, batched[k].name + " step " + std::to_string(step) + " request " + std::to_string(i));
        ++(want.allowed ? admitted : rejected);
      }
    }
  }
  // The workload did reach both sides of every limit.
  EXPECT_GT(admitted, 100);
  EXPECT_GT(rejected, 100);
}

TEST_F(BatchTest, AFloodInOneBatchAdmitsTheLimitAndRejectsTheRestExactly) {
  const auto batched = strategies("flood-batch");
  const auto single = strategies("flood-single");
  at(0s);
  for (std::size_t k = 0; k < batched.size(); ++k) {
    std::vector<Request> requests(300, Request{"flooder", 1});
    requests[150].cost = 2;  // a different cost in the middle of the flood
    const auto got = batched[k].consume_many(requests);
    int allowed = 0;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const Decision want = single[k].consume(requests[i].subject, requests[i].cost);
      expect_same(got[i], want, batched[k].name + " request " + std::to_string(i));
      allowed += got[i].allowed;
    }
    // Nothing refills or leaks while the clock stands still: the capacity, and not one more.
    EXPECT_EQ(allowed, 10) << batched[k].name;
  }
}

TEST_F(BatchTest, OneScriptCallPerBatchOnASingleServer) {
  const auto fw = rl().fixed_window("calls", Limit(1000, 1min));
  std::vector<std::string> names;
  for (int i = 0; i < 600; ++i) names.push_back("s" + std::to_string(i));
  std::vector<Request> requests;
  for (const auto& n : names) requests.push_back({n, 1});
  const auto script_calls = [this] { return command_calls("evalsha") + command_calls("eval") + command_calls("fcall"); };
  const std::int64_t before = script_calls();
  const auto got = fw.consume_many(requests);
  const std::int64_t after = script_calls();
  // 600 requests: calls of at most 256 requests each, so three.
  EXPECT_EQ(after - before, 3);
  ASSERT_EQ(got.size(), requests.size());
  for (const Decision& d : got) {
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 999) << d;
  }
}

}  // namespace
}  // namespace redlimit_test
