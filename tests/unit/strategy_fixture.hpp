#pragma once
// The fixture shared by the strategy unit tests (every_strategy_test.cpp, strategies_test.cpp): a
// RateLimiter over a MockConnection and a ManualClock, and one Case per strategy with the EVALSHA
// it must send (script, keys, ARGV as lua/prologue.lua and each script's header document).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/detail/sha1.hpp"
#include "redlimit/redlimit.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::ConnectionError;
using redlimit::Decision;
using redlimit::InvalidArgument;
using redlimit::LeakyMode;
using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::Micros;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Reply;
using redlimit::ReplyError;
using redlimit::Strategy;
using redlimit::TimeSource;
using redlimit::detail::Script;
using redlimit_unit::decision_reply;
using ::testing::_;
using ::testing::InSequence;
using ::testing::Return;
using ::testing::StrictMock;
using ::testing::Throw;
using namespace std::chrono_literals;
using namespace std::string_literals;
using Argv = std::vector<std::string>;
namespace scripts = redlimit::detail::scripts;

constexpr std::int64_t kStrategyStart = 1'700'000'000'123'456;  // the ManualClock's start, in microseconds

Argv concat(Argv head, const Argv& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}
Argv script_command(const char* verb, std::string_view body, const Argv& keys, const Argv& args) {
  return concat(concat({verb, std::string(body), std::to_string(keys.size())}, keys), args);
}
Argv evalsha(const Script& s, const Argv& keys, const Argv& args) { return script_command("EVALSHA", s.sha1, keys, args); }
Argv eval(const Script& s, const Argv& keys, const Argv& args) { return script_command("EVAL", s.source, keys, args); }

// The policy script (which also runs SlidingWindow) appends the deciding limit's 1-based index, then
// each of its m limits' remaining and reset (here all alike: the decision's own).
Reply policy_reply(std::int64_t allowed, std::int64_t remaining, std::int64_t retry_us, std::int64_t reset_us,
                   std::int64_t deciding, std::size_t m = 1) {
  Reply r = decision_reply(allowed, remaining, retry_us, reset_us, 0);
  r.elements.push_back(Reply::make_integer(deciding));
  for (std::size_t i = 0; i < m; ++i) {
    r.elements.push_back(Reply::make_integer(remaining));
    r.elements.push_back(Reply::make_integer(reset_us));
  }
  return r;
}

struct Case {
  const char* name;
  const Script& (*script)();
  std::function<Strategy(const RateLimiter&, std::string resource)> make;
  Argv params;         // the parameters, word by word: the head (ARGV[2]) ends with them, space-separated
  std::int64_t limit;  // Decision::limit: the limit's count or the bucket's capacity
  const char* kind;    // the key's kind suffix
  bool policy_reply;   // replies carry the deciding limit and one limit's state (policies of one)
};

std::vector<Case> cases() {
  return {
      {"fixed_window", &scripts::fixed_window,
       [](const RateLimiter& l, std::string r) -> Strategy { return l.fixed_window(std::move(r), Limit::per_minute(100)); },
       {"100", "60000000"}, 100, "fw", false},
      {"sliding_log", &scripts::sliding_log,
       [](const RateLimiter& l, std::string r) -> Strategy { return l.sliding_log(std::move(r), Limit(50, 10s)); },
       {"50", "10000000"}, 50, "sl", false},
      {"sliding_window", &scripts::policy,
       [](const RateLimiter& l, std::string r) -> Strategy { return l.sliding_window(std::move(r), Limit::per_minute(100)); },
       {"1", "1m", "100", "60000000", "60000000"}, 100, "sw", true},
      {"sliding_window_10s_buckets", &scripts::policy,
       [](const RateLimiter& l, std::string r) -> Strategy {
         return l.sliding_window(std::move(r), Limit::per_minute(100), 10s);
       },
       {"1", "1m@10s", "100", "60000000", "10000000"}, 100, "sw", true},
      {"token_bucket_1_per_s", &scripts::token_bucket,
       [](const RateLimiter& l, std::string r) -> Strategy { return l.token_bucket(std::move(r), 10, 1, 1s); },
       {"10", "1000000", "1"}, 10, "tb", false},
      {"token_bucket_3_per_2s", &scripts::token_bucket,
       [](const RateLimiter& l, std::string r) -> Strategy { return l.token_bucket(std::move(r), 10, 3, 2s); },
       {"10", "2000000", "3"}, 10, "tb", false},
      {"leaky_bucket_meter", &scripts::leaky_bucket,
       [](const RateLimiter& l, std::string r) -> Strategy {
         return l.leaky_bucket(std::move(r), 10, Limit::per_second(2), LeakyMode::meter);
       },
       {"10", "500000", "1", "meter"}, 10, "lb", false},
      {"leaky_bucket_shaper", &scripts::leaky_bucket,
       [](const RateLimiter& l, std::string r) -> Strategy {
         return l.leaky_bucket(std::move(r), 20, Limit(3, 2s), LeakyMode::shaper);
       },
       {"20", "2000000", "3", "shaper"}, 20, "lb", false},
      {"policy_of_one", &scripts::policy,
       [](const RateLimiter& l, std::string r) -> Strategy { return l.policy(std::move(r), {Limit::per_hour(30)}); },
       {"1", "1h", "30", "3600000000", "3600000000"}, 30, "pol", true},
  };
}

// A strategy's parameters as the head (ARGV[2]) ends with them: space-separated (lua/helpers.lua).
inline std::string joined(const Argv& words) { return scripts::params_arg(words); }
// A call's ARGV for one request: now, then the head "<mode> <cost> <parameters>" (lua/prologue.lua).
inline Argv call_args(std::string now, std::int64_t cost, const char* mode, const Argv& params) {
  return {std::move(now), scripts::head(mode, cost, joined(params))};
}

class StrategyTestBase {
 protected:
  std::shared_ptr<StrictMock<MockConnection>> mock = std::make_shared<StrictMock<MockConnection>>();
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Micros{kStrategyStart});

  // `share`: Options::share_script_calls (concurrent consume() calls merged into one script call).
  RateLimiter make_limiter(TimeSource ts = TimeSource::client, std::string prefix = "redlimit:",
                           bool share = true) {
    Options o;
    o.clock = clock;
    o.time_source = ts;
    o.prefix = std::move(prefix);
    o.share_script_calls = share;
    return RateLimiter(mock, o);
  }
  std::string now() const { return std::to_string(clock->now().count()); }
  void expect_nothing_sent() {
    EXPECT_CALL(*mock, command(_)).Times(0);
    EXPECT_CALL(*mock, pipeline(_)).Times(0);
  }
};


}  // namespace
