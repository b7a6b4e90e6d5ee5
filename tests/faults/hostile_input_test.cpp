// Hostile input (issue 5): subjects and resources that try to break out of the hash tag or forge
// another subject's key, out-of-range limits, windows and costs, malformed URLs and rate strings.
// Each gets either a clear redlimit::InvalidArgument (and then nothing reached Redis: DBSIZE is
// unchanged) or a correct decision; every subject's keys stay in one hash slot, as Redis computes it.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <thread>

#include "redlimit/detail/keys.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "redlimit/url.hpp"
#include "redlimit/redlimit.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using redlimit::Decision;
using redlimit::Limit;

constexpr redlimit::Micros kHostileT0{1'699'999'200'000'000};

// CLUSTER KEYSLOT needs cluster support on (Redis 7.0 refuses it otherwise): a lone redis-server
// with cluster-enabled yes answers it without any slot assigned. Killed with the test process.
class ClusterNode {
 public:
  ClusterNode() {
    char tmpl[] = "/tmp/redlimit-keyslot-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = d;
    // A few attempts: the free port we picked may be taken by another process meanwhile.
    std::string why;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (start_once(why)) return;
    }
    throw std::runtime_error("cluster-enabled redis-server did not start: " + why);
  }
  bool start_once(std::string& why) {
    // The cluster bus listens on port + 10000, so the port must stay at or below 55535 (the
    // kernel's ephemeral range reaches 60999): draw again until it does.
    do {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof addr;
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      port_ = ntohs(addr.sin_port);
      ::close(fd);
    } while (port_ > 55535);
    const char* bin = std::getenv("REDIS_SERVER");
    const std::string server = bin != nullptr ? bin : "redis-server";
    const std::string port = std::to_string(port_), log = dir_ + "/redis.log";
    const std::string nodes = dir_ + "/nodes-" + port + ".conf";
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) {
      why = "fork failed";
      return false;
    }
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::execlp(server.c_str(), server.c_str(), "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", dir_.c_str(), "--logfile", log.c_str(), "--cluster-enabled", "yes",
               "--cluster-config-file", nodes.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto until = std::chrono::steady_clock::now() + 30s;  // a loaded CI box
    while (std::chrono::steady_clock::now() < until) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        why = "redis-server exited (port " + port + " taken?), see " + log;
        return false;
      }
      try {
        conn_ = std::make_unique<redlimit::RedisConnection>(
            redlimit::parse_url("redis://127.0.0.1:" + port + "/0"), 1000ms, 5000ms);
        if (conn_->command({"PING"}).str == "PONG") return true;
      } catch (const redlimit::Error& e) {
        why = e.what();
      }
      std::this_thread::sleep_for(20ms);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    why = "no PONG within 30 s: " + why;
    return false;
  }
  ~ClusterNode() {
    conn_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::int64_t keyslot(const std::string& key) {
    const auto r = conn_->command({"CLUSTER", "KEYSLOT", key});
    if (r.type != redlimit::Reply::Type::integer) throw std::runtime_error("CLUSTER KEYSLOT: " + r.str);
    return r.integer;
  }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::unique_ptr<redlimit::RedisConnection> conn_;
};

class HostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    redlimit::Options o;
    o.clock = clock;
    limiter = std::make_unique<redlimit::RateLimiter>(redlimit::RateLimiter::connect(server.url(), o));
  }
  // `f` must throw InvalidArgument with a non-empty message, and leave the server untouched.
  void expect_invalid(const std::string& what, const std::function<void()>& f) {
    SCOPED_TRACE(what);
    const auto before = server.dbsize();
    const auto calls_before = evals();
    try {
      f();
      ADD_FAILURE() << what << ": no InvalidArgument";
    } catch (const redlimit::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("invalid argument"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": threw something else: " << e.what();
    }
    EXPECT_EQ(server.dbsize(), before);
    EXPECT_EQ(evals(), calls_before) << "a script ran for rejected input";
  }
  std::int64_t evals() {
    const auto info = server.command({"INFO", "commandstats"});
    std::int64_t n = 0;
    for (const std::string c : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
      const auto pos = info.str.find(c);
      if (pos != std::string::npos) n += std::stoll(info.str.substr(pos + c.size()));
    }
    return n;
  }
  // detail::key_slot agrees with a cluster node's CLUSTER KEYSLOT, and both keys of a subject share it.
  void expect_one_slot(const redlimit::Strategy& s, std::string_view subject) {
    static ClusterNode node;  // one for the whole binary
    const std::string key = s.key_for(subject), blk = s.block_key_for(subject);
    EXPECT_EQ(redlimit::detail::key_slot(key), redlimit::detail::key_slot(blk)) << key;
    EXPECT_EQ(node.keyslot(key), redlimit::detail::key_slot(key)) << key;
    EXPECT_EQ(node.keyslot(blk), redlimit::detail::key_slot(blk)) << blk;
  }

  redlimit_test::RedisServer server;
  std::shared_ptr<redlimit::ManualClock> clock = std::make_shared<redlimit::ManualClock>(kHostileT0);
  std::unique_ptr<redlimit::RateLimiter> limiter;
};

TEST_F(HostileInput, BadSubjectsAreRejectedBeforeIo) {
  const auto fw = limiter->fixed_window("h", Limit::per_minute(3));
  expect_invalid("empty subject", [&] { fw.consume(""); });
  expect_invalid("1 KiB + 1 subject", [&] { fw.consume(std::string(1025, 's')); });
  expect_invalid("empty subject peek", [&] { fw.peek(""); });
  expect_invalid("empty subject block", [&] { fw.block("", 1s); });
  expect_invalid("empty subject refund", [&] { fw.refund("", 1); });
  expect_invalid("empty subject reset", [&] { fw.reset(""); });
  expect_invalid("empty subject key_for", [&] { fw.key_for(""); });
  expect_invalid("one bad subject in a batch", [&] {
    const std::string ok = "fine";
    fw.consume_many({{ok, 1}, {"", 1}});
  });
  // 1 KiB exactly is fine.
  EXPECT_TRUE(fw.consume(std::string(1024, 's')).allowed);
}

TEST_F(HostileInput, StructuralBytesInSubjectsDecideCorrectlyAndStayInOneSlot) {
  const auto fw = limiter->fixed_window("h", Limit::per_minute(2));
  const auto pol = limiter->policy("h", redlimit::parse_limits("2/s; 5/m"));
  const std::vector<std::string> subjects = {
      "{", "}", "{}", "}{", ":", "a:b", "x|y", "%7B", "a\0b"s, "\0"s, "\xff\xfe\xfd", "\xc3\x28", "{user}:x",
      "a}{b", "\r\n", std::string(1024, '{'),
  };
  std::set<std::string> keys;
  for (const auto& subject : subjects) {
    SCOPED_TRACE(::testing::PrintToString(subject));
    for (const redlimit::Strategy* s : {static_cast<const redlimit::Strategy*>(&fw), static_cast<const redlimit::Strategy*>(&pol)}) {
      expect_one_slot(*s, subject);
      EXPECT_TRUE(keys.insert(s->key_for(subject)).second) << "two subjects share a key";
      const Decision a = s->consume(subject), b = s->consume(subject), c = s->consume(subject);
      EXPECT_TRUE(a.allowed);
      EXPECT_TRUE(b.allowed);
      EXPECT_FALSE(c.allowed);  // each subject has its own two, whatever bytes it holds
      EXPECT_EQ(s->block_key_for(subject).find(s->key_for(subject)), std::string::npos);
    }
  }
  // Every key written is one of ours (no subject wrote outside its own keys), and each expires.
  for (const auto& key : server.keys()) {
    EXPECT_TRUE(keys.count(key)) << "unexpected key " << ::testing::PrintToString(key);
    EXPECT_NE(server.integer({"PTTL", key}), -1) << key;
  }
}

TEST_F(HostileInput, CollidingLookingPairsStayApart) {
  struct Pair {
    std::string r1, s1, r2, s2;
  };
  const std::vector<Pair> pairs = {
      {"a", "b:c", "a:b", "c"}, {"a", "b|c", "a|b", "c"}, {"a", "x|y", "a|x", "y"},
      {"a", "b}c", "a}b", "c"}, {"a", "%3A", "a", ":"},   {"a", "b", "a", "b:fw"},
  };
  for (const auto& p : pairs) {
    SCOPED_TRACE(p.r1 + " / " + p.s1 + " vs " + p.r2 + " / " + p.s2);
    const auto one = limiter->fixed_window(p.r1, Limit::per_hour(1));
    const auto two = limiter->fixed_window(p.r2, Limit::per_hour(1));
    EXPECT_NE(one.key_for(p.s1), two.key_for(p.s2));
    EXPECT_NE(one.block_key_for(p.s1), two.block_key_for(p.s2));
    EXPECT_TRUE(one.consume(p.s1).allowed);
    EXPECT_TRUE(two.consume(p.s2).allowed) << "the other subject's use leaked into this one";
    EXPECT_FALSE(one.consume(p.s1).allowed);
    two.reset(p.s2);
    EXPECT_FALSE(one.peek(p.s1).allowed) << "a reset of one subject cleared the other";
    one.reset(p.s1);
  }
}

TEST_F(HostileInput, OutOfRangeLimitsWindowsAndCostsAreRejectedBeforeIo) {
  const auto max_w = Limit::max_window();
  expect_invalid("count 0", [] { Limit(0, 1s); });
  expect_invalid("count -1", [] { Limit(-1, 1s); });
  expect_invalid("count over max", [] { Limit(Limit::max_count() + 1, 1s); });
  expect_invalid("window 0", [] { Limit(1, 0s); });
  expect_invalid("window -1s", [] { Limit(1, -1s); });
  expect_invalid("window over max", [&] { Limit(1, max_w + 1us); });
  expect_invalid("precision not dividing", [] { Limit(10, 1s).precision(3ms + 1us); });
  expect_invalid("token bucket capacity 0", [&] { limiter->token_bucket("h", 0, 1, 1s); });
  expect_invalid("token bucket capacity -5", [&] { limiter->token_bucket("h", -5, 1, 1s); });
  expect_invalid("token bucket refill 0", [&] { limiter->token_bucket("h", 10, 0, 1s); });
  expect_invalid("token bucket period 0", [&] { limiter->token_bucket("h", 10, 1, 0s); });
  expect_invalid("token bucket period over max", [&] { limiter->token_bucket("h", 10, 1, max_w + 1us); });
  expect_invalid("leaky bucket capacity 0", [&] { limiter->leaky_bucket("h", 0, Limit::per_second(1)); });
  expect_invalid("empty resource", [&] { limiter->fixed_window("", Limit::per_second(1)); });
  expect_invalid("resource over 256 bytes", [&] { limiter->fixed_window(std::string(257, 'r'), Limit::per_second(1)); });
  expect_invalid("policy with no limits", [&] { limiter->policy("h", {}); });
  const auto fw = limiter->fixed_window("h", Limit::per_minute(5));
  const auto tb = limiter->token_bucket("h", 5, 1, 1s);
  const auto pol = limiter->policy("h", redlimit::parse_limits("5/s; 3/m"));
  for (const redlimit::Strategy* s : {static_cast<const redlimit::Strategy*>(&fw), static_cast<const redlimit::Strategy*>(&tb), static_cast<const redlimit::Strategy*>(&pol)}) {
    expect_invalid("cost 0", [&] { s->consume("u", 0); });
    expect_invalid("cost -1", [&] { s->consume("u", -1); });
    expect_invalid("cost over capacity", [&] { s->consume("u", 6); });
    expect_invalid("cost huge", [&] { s->consume("u", std::numeric_limits<std::int64_t>::max()); });
    expect_invalid("peek cost 0", [&] { s->peek("u", 0); });
    expect_invalid("refund cost 0", [&] { s->refund("u", 0); });
  }
  expect_invalid("policy cost over the smallest limit", [&] { pol.consume("u", 4); });
  // The extremes that are valid decide correctly, and their keys expire.
  const auto huge = limiter->fixed_window("huge", Limit(Limit::max_count(), max_w));
  const Decision d = huge.consume("u", Limit::max_count());
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_FALSE(huge.consume("u").allowed);
  const auto tiny = limiter->fixed_window("tiny", Limit(1, 1us));
  EXPECT_TRUE(tiny.consume("u").allowed);
  for (const auto& key : server.keys()) EXPECT_NE(server.integer({"PTTL", key}), -1) << key;
}

TEST_F(HostileInput, MalformedUrlsRatesAndOptionsAreInvalidArguments) {
  for (const std::string url : {"", "redis", "http://127.0.0.1:6379", "redis://", "redis://127.0.0.1:abc",
                                "redis://127.0.0.1:99999", "redis://127.0.0.1:-1", "redis://127.0.0.1:6379/x",
                                "redis://127.0.0.1:6379/-1", "unix://", "redis://[::1",
                                "rediss://127.0.0.1:6379?tls_cert_file=/no-key.pem"}) {
    expect_invalid("URL " + ::testing::PrintToString(url), [&] { redlimit::RateLimiter::connect(url); });
  }
  for (const std::string rate : {"", "abc", "0/s", "-1/s", "10/", "/s", "10/0s", "10/-1s", "10/1m@7s",
                                 "99999999999999999999/s", "10 per", "10/fortnight", "10/s@", "1.5/s", "10/s extra"}) {
    expect_invalid("rate " + ::testing::PrintToString(rate), [&] { Limit::parse(rate); });
  }
  for (const std::string rates : {"", ";", "10/s;;", "10/s; bogus", "10/s,,20/m"}) {
    expect_invalid("rates " + ::testing::PrintToString(rates), [&] { redlimit::parse_limits(rates); });
  }
  redlimit::Options o;
  o.prefix = "pre{fix";
  expect_invalid("prefix with a brace", [&] { redlimit::RateLimiter::connect(server.url(), o); });
  o.prefix = std::string(65, 'p');
  expect_invalid("prefix over 64 bytes", [&] { redlimit::RateLimiter::connect(server.url(), o); });
  o = {};
  o.command_timeout = -1ms;
  expect_invalid("negative command timeout", [&] { redlimit::RateLimiter::connect(server.url(), o); });
  o = {};
  o.breaker_threshold = -1;
  expect_invalid("negative breaker threshold", [&] { redlimit::RateLimiter::connect(server.url(), o); });
}

}  // namespace
