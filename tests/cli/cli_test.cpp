// The `redlimit` tool (tools/cli) run as an operator runs it, against a real redis-server of its own:
// inspect (the library's peek, the raw state decoded), reset, block/unblock, scan, check; --json;
// exit codes; bad arguments (one line on stderr, exit 2, nothing written); an unreachable server
// (exit 3, bounded); the password from REDLIMIT_PASSWORD.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "support/redis_server.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the tool with `args` (and `env` added), its output in files of a private directory.
Result cli(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env = {}) {
  char dir[] = "/tmp/redlimit-cli-XXXXXX";
  if (::mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp");
  const std::string out = std::string(dir) + "/out", err = std::string(dir) + "/err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(::open(out.c_str(), O_WRONLY | O_CREAT, 0600), 1);
    ::dup2(::open(err.c_str(), O_WRONLY | O_CREAT, 0600), 2);
    ::unsetenv("REDLIMIT_PASSWORD");
    ::unsetenv("REDLIMIT_URL");
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(REDLIMIT_CLI)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(REDLIMIT_CLI, argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  ::unlink(out.c_str());
  ::unlink(err.c_str());
  ::rmdir(dir);
  return r;
}

class CliTest : public ::testing::Test {
 protected:
  redlimit_test::RedisServer redis;
  redlimit::RateLimiter limiter = redlimit::RateLimiter::connect(redis.url());
  Result on_server(std::vector<std::string> args) {
    args.insert(args.begin(), {"--url", redis.url()});
    return cli(args);
  }
};

// The fixed windows of the next two tests are an hour long: the CLI runs on the wall clock, and a
// window that ends between a consume and the inspect that counts it (a minute's did, once in CI)
// would show another window's count.
TEST_F(CliTest, InspectShowsPeekAndDecodedState) {
  const auto fw = limiter.fixed_window("api", redlimit::Limit::per_hour(5));
  for (int i = 0; i < 3; ++i) fw.consume("alice");
  Result r = on_server({"inspect", "fw", "api", "alice", "--limit", "5/h", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(R"("key":"redlimit:{api|alice}:fw","allowed":true,"limit":5,"remaining":2,)"));
  EXPECT_THAT(r.out, HasSubstr(R"("blocked":false,"blocked_ttl_ms":0,)"));
  EXPECT_THAT(r.out, MatchesRegex(R"(.*"state":\{"type":"hash","windows":\{"[0-9]+:3600000000":"3"\}\}\}\s*)"));
  fw.consume("alice");
  fw.consume("alice");
  r = on_server({"inspect", "fixed_window", "api", "alice", "--limit", "5/h"});
  EXPECT_EQ(r.code, 1) << "a limited subject exits 1";
  EXPECT_THAT(r.out, HasSubstr("remaining: 0\n"));
  EXPECT_THAT(r.out, HasSubstr("allowed: false\n"));

  const auto tb = limiter.token_bucket("tok", 10, 10, std::chrono::seconds(1));
  tb.consume("t", 4);
  r = on_server({"inspect", "tb", "tok", "t", "--limit", "10/s", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, MatchesRegex(R"(.*"bytes":28,"at_us":[0-9]+,"whole":[0-9],"frac":[0-9]+,"unit":[0-9]+,"lease":[0-9]+.*)"));
  const auto sl = limiter.sliding_log("log", redlimit::Limit::per_minute(5));
  sl.consume("s", 2);
  r = on_server({"inspect", "sl", "log", "s", "--limit", "5/1m", "--json"});
  EXPECT_THAT(r.out, HasSubstr(R"("remaining":3,)"));
  EXPECT_THAT(r.out, HasSubstr(R"("type":"zset","entries":1,"newest":"0000000000000002/2","newest_form":"text")"));
  // A compact entry (Options::sliding_log_members) reads the same.
  redlimit::Options compact_options;
  compact_options.sliding_log_members = redlimit::SlidingLogMembers::compact;
  const redlimit::RateLimiter compact = redlimit::RateLimiter::connect(redis.url(), compact_options);
  compact.sliding_log("log", redlimit::Limit::per_minute(5)).consume("s", 1);
  r = on_server({"inspect", "sl", "log", "s", "--limit", "5/1m", "--json"});
  EXPECT_THAT(r.out, HasSubstr(R"("remaining":2,)"));
  EXPECT_THAT(r.out, HasSubstr(R"("type":"zset","entries":2,"newest":"0000000000000003/1","newest_form":"compact")"));
}

TEST_F(CliTest, BlockUnblockAndReset) {
  const auto fw = limiter.fixed_window("api", redlimit::Limit::per_hour(5));
  fw.consume("bob");
  Result r = on_server({"block", "fw", "api", "bob", "--for", "10m"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fw.consume("bob").allowed);
  r = on_server({"inspect", "fw", "api", "bob", "--limit", "5/h", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, MatchesRegex(R"(.*"blocked":true,"blocked_ttl_ms":(59[0-9]|600)[0-9]{3},.*)"));
  // The fixed window's hash holds the block too, beside its window's count (shown unblocked).
  EXPECT_THAT(r.out,
              MatchesRegex(R"(.*"type":"hash","blocked_until_us":"[0-9]+","windows":\{"[0-9]+:3600000000":"1"\}.*)"));
  r = on_server({"unblock", "fw", "api", "bob", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"was_blocked\":true}\n");
  EXPECT_TRUE(fw.consume("bob").allowed) << "the block is lifted";
  EXPECT_EQ(fw.peek("bob").remaining, 3) << "unblock keeps the state";
  EXPECT_EQ(redis.command({"HEXISTS", fw.key_for("bob"), "blk"}).integer, 0) << "and drops the block it held";
  EXPECT_EQ(redis.command({"HLEN", fw.key_for("bob")}).integer, 1);
  r = on_server({"reset", "fw", "api", "bob"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(fw.peek("bob").remaining, 5);
  EXPECT_EQ(redis.dbsize(), 0);
}

// A sliding log's sorted set holds its block as a member above its entries: inspect shows it apart
// from them, and unblock deletes it.
TEST_F(CliTest, InspectShowsTheBlockASlidingLogHolds) {
  const auto sl = limiter.sliding_log("logb", redlimit::Limit::per_minute(5));
  sl.consume("ann", 2);
  Result r = on_server({"block", "sl", "logb", "ann", "--for", "10m"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_GT(redis.command({"PTTL", sl.key_for("ann")}).integer, 599'000) << "the key outlives the block";
  r = on_server({"inspect", "sl", "logb", "ann", "--limit", "5/min", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, MatchesRegex(
                         R"(.*"type":"zset","blocked_until_us":"[0-9]+","entries":1,"newest":"0000000000000002/2".*)"));
  r = on_server({"unblock", "sl", "logb", "ann", "--json"});
  EXPECT_EQ(r.out, "{\"was_blocked\":true}\n");
  EXPECT_EQ(redis.command({"ZCARD", sl.key_for("ann")}).integer, 1);
  EXPECT_EQ(sl.peek("ann").remaining, 3);
}

// A sliding window's hash holds its block in the field "blk": inspect shows it apart from the
// buckets, and unblock deletes it.
TEST_F(CliTest, InspectShowsTheBlockAHashHolds) {
  const auto sw = limiter.sliding_window("win", redlimit::Limit::per_minute(5));
  sw.consume("ann");
  Result r = on_server({"block", "sw", "win", "ann", "--for", "10m"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = on_server({"inspect", "sw", "win", "ann", "--limit", "5/min", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, MatchesRegex(R"(.*"type":"hash","blocked_until_us":"[0-9]+","buckets":\{"1m:[0-9]+":"1"\}.*)"));
  r = on_server({"unblock", "sw", "win", "ann", "--json"});
  EXPECT_EQ(r.out, "{\"was_blocked\":true}\n");
  EXPECT_EQ(redis.command({"HEXISTS", sw.key_for("ann"), "blk"}).integer, 0);
  EXPECT_EQ(sw.peek("ann").remaining, 4);
}

TEST_F(CliTest, ScanCountsSubjectsKindsAndMemory) {
  const auto fw = limiter.fixed_window("scan*me", redlimit::Limit::per_minute(5));
  const auto sl = limiter.sliding_log("scan*me", redlimit::Limit::per_minute(5));
  for (const char* s : {"a", "b", "c"}) fw.consume(s);
  sl.consume("d");
  limiter.fixed_window("scanXme", redlimit::Limit::per_minute(5)).consume("other");  // not matched
  const Result r = on_server({"scan", "scan*me", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, MatchesRegex(R"(\{"keys":4,"subjects":4,"memory_bytes":[1-9][0-9]*,"kinds":\{"fw":3,"sl":1\},)"
                                  R"("ttl":\{"lt_1s":[0-4],"lt_10s":[0-4],"lt_1m":[0-4],"lt_10m":[0-4],"lt_1h":0,"ge_1h":0,"none":0\}\}
)"));
}

TEST(CliUsageTest, BadArgumentsGetOneLineAndExit2) {
  const std::vector<std::vector<std::string>> bad{
      {},
      {"frobnicate"},
      {"check", "ten/s"},
      {"check"},
      {"inspect", "bogus", "api", "u", "--limit", "5/min"},
      {"inspect", "fw", "api", "u"},
      {"inspect", "fw", "api", "u", "--limit", "5/fortnight"},
      {"block", "fw", "api", "u", "--for", "0s"},
      {"block", "fw", "api", "u", "--for", "soon"},
      {"block", "fw", "api", "u"},
      {"scan", "--color"},
      {"--url"},
  };
  for (const auto& args : bad) {
    const Result r = cli(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.code, 2) << joined << r.err;
    EXPECT_THAT(r.err, MatchesRegex("redlimit: [^\n]+\n")) << joined;
    EXPECT_EQ(r.err.find("redlimit:", 1), std::string::npos) << "the prefix said twice: " << r.err;
    EXPECT_EQ(r.out, "") << joined;
  }
}

TEST(CliUsageTest, CheckPrintsTheCanonicalForm) {
  Result r = cli({"check", "10/s;300/min"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "canonical: \"10/1s; 300/1m\"\nlimits: 2\n");
  r = cli({"check", "--json", "240/1h@1m"});
  EXPECT_EQ(r.out, "{\"canonical\":\"240/1h@1m\",\"limits\":1}\n");
  EXPECT_EQ(cli({"--help"}).code, 0);
}

TEST(CliConnectionTest, UnreachableServerExits3) {
  redlimit_test::RedisServer redis;
  const std::string url = redis.url();
  redis.stop();
  const Result r = cli({"--url", url, "inspect", "fw", "api", "u", "--limit", "5/min"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_THAT(r.err, MatchesRegex("redlimit: [^\n]+\n"));
}

TEST(CliConnectionTest, PasswordFromTheEnvironment) {
  redlimit_test::RedisServer redis;
  ASSERT_FALSE(redis.command({"CONFIG", "SET", "requirepass", "s3cret"}).is_error());
  Result r = cli({"--url", redis.url(), "scan", "api"});
  EXPECT_EQ(r.code, 3) << "no password: refused";
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos);
  r = cli({"--url", redis.url(), "scan", "api"}, {{"REDLIMIT_PASSWORD", "s3cret"}});
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
