// Each strategy behind RateLimiter(MockConnection): the exact EVALSHA it sends (script, keys, ARGV
// as lua/prologue.lua and each script's header document), how the reply becomes a Decision,
// refund / block / acquire / reset, and invalid input that must throw InvalidArgument before
// anything is sent.
#include <gmock/gmock.h>
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

constexpr std::int64_t kStart = 1'700'000'000'123'456;  // the ManualClock's start, in microseconds
constexpr std::int64_t k2Pow52 = std::int64_t{1} << 52;

Argv concat(Argv head, const Argv& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}
Argv script_command(const char* verb, std::string_view body, const Argv& keys, const Argv& args) {
  return concat(concat({verb, std::string(body), std::to_string(keys.size())}, keys), args);
}
Argv evalsha(const Script& s, const Argv& keys, const Argv& args) { return script_command("EVALSHA", s.sha1, keys, args); }
Argv eval(const Script& s, const Argv& keys, const Argv& args) { return script_command("EVAL", s.source, keys, args); }

// The policy script (which also runs SlidingWindow) appends the deciding limit's 1-based index.
Reply policy_reply(std::int64_t allowed, std::int64_t remaining, std::int64_t retry_us, std::int64_t reset_us,
                   std::int64_t deciding) {
  Reply r = decision_reply(allowed, remaining, retry_us, reset_us, 0);
  r.elements.push_back(Reply::make_integer(deciding));
  return r;
}

struct Case {
  const char* name;
  const Script& (*script)();
  std::function<Strategy(const RateLimiter&, std::string resource)> make;
  Argv params;         // ARGV[4..]
  std::int64_t limit;  // Decision::limit: the limit's count or the bucket's capacity
  const char* kind;    // the key's kind suffix
  bool policy_reply;   // replies carry a 6th element (deciding limit)
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

class StrategyTestBase {
 protected:
  std::shared_ptr<StrictMock<MockConnection>> mock = std::make_shared<StrictMock<MockConnection>>();
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Micros{kStart});

  RateLimiter make_limiter(TimeSource ts = TimeSource::client, std::string prefix = "redlimit:") {
    Options o;
    o.clock = clock;
    o.time_source = ts;
    o.prefix = std::move(prefix);
    return RateLimiter(mock, o);
  }
  std::string now() const { return std::to_string(clock->now().count()); }
  void expect_nothing_sent() {
    EXPECT_CALL(*mock, command(_)).Times(0);
    EXPECT_CALL(*mock, pipeline(_)).Times(0);
  }
};

// =================================================================================================
// The contract every strategy shares
// =================================================================================================

class EveryStrategyTest : public StrategyTestBase, public ::testing::TestWithParam<Case> {
 protected:
  const Case& c() const { return GetParam(); }
  const Script& script() const { return c().script(); }
  Strategy make(const RateLimiter& l, std::string resource = "api") const { return c().make(l, std::move(resource)); }
  static Argv keys(const Strategy& s, std::string_view subject) { return {s.key_for(subject), s.block_key_for(subject)}; }
  Argv args(const std::string& now_arg, std::int64_t cost, const char* mode) const {
    return concat({now_arg, std::to_string(cost), mode}, c().params);
  }
  Reply reply(std::int64_t allowed, std::int64_t remaining, std::int64_t retry_us, std::int64_t reset_us,
              std::int64_t delay_us = 0) const {
    Reply r = decision_reply(allowed, remaining, retry_us, reset_us, delay_us);
    if (c().policy_reply) r.elements.push_back(Reply::make_integer(1));
    return r;
  }
};

TEST_P(EveryStrategyTest, ConsumeSendsOneEvalshaWithTheDocumentedArgv) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(std::to_string(kStart), 1, "1"))))
      .WillOnce(Return(reply(1, c().limit - 1, 0, 5'000'000)));
  const Decision d = s.consume("user-42", 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, c().limit);
  EXPECT_EQ(d.remaining, c().limit - 1);
  EXPECT_EQ(d.retry_after, 0us);
  EXPECT_EQ(d.reset_after, 5s);
  EXPECT_EQ(d.delay, 0us);
  EXPECT_EQ(d.limit_index, 0u);
  EXPECT_EQ(d.source, redlimit::Source::primary);
  EXPECT_FALSE(d.shadow_rejected);
}

TEST_P(EveryStrategyTest, CommandShapeAndScriptSha) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce([&](const Argv& argv) {
    EXPECT_EQ(argv.size(), 3 + 2 + 3 + c().params.size());
    EXPECT_EQ(argv.at(0), "EVALSHA");
    EXPECT_EQ(argv.at(1), script().sha1);
    EXPECT_EQ(argv.at(1), redlimit::detail::sha1_hex(script().source));
    EXPECT_EQ(argv.at(2), "2");  // the state key and the block marker
    EXPECT_EQ(argv.at(3), s.key_for("u"));
    EXPECT_EQ(argv.at(4), s.block_key_for("u"));
    return reply(1, 0, 0, 0);
  });
  s.consume("u", 1);
}

TEST_P(EveryStrategyTest, CostIsPassedAsArgv2) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(now(), 3, "1"))))
      .WillOnce(Return(reply(1, c().limit - 3, 0, 1000)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(now(), c().limit, "1"))))
      .WillOnce(Return(reply(0, c().limit - 3, 700, 1000)));
  EXPECT_EQ(s.consume("user-42", 3).remaining, c().limit - 3);
  // cost == limit is the largest valid cost.
  const Decision d = s.consume("user-42", c().limit);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 700us);
}

TEST_P(EveryStrategyTest, DefaultCostIsOne) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "0")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "2")))).WillOnce(Return(reply(1, 0, 0, 0)));
  s.consume("u");
  s.peek("u");
  s.refund("u");
}

TEST_P(EveryStrategyTest, PeekSendsMode0) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(now(), 2, "0"))))
      .WillOnce(Return(reply(1, 5, 0, 0)));
  const Decision d = s.peek("user-42", 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 5);
  EXPECT_EQ(d.limit, c().limit);
}

TEST_P(EveryStrategyTest, RefundSendsMode2) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "user-42"), args(now(), 2, "2"))))
      .WillOnce(Return(reply(1, c().limit, 0, 0)));
  const Decision d = s.refund("user-42", 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, c().limit);
  EXPECT_EQ(d.limit, c().limit);
}

TEST_P(EveryStrategyTest, BlockRunsTheBlockScriptWithMode3AndTheDuration) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(scripts::block(), keys(s, "user-42"), {now(), "1", "3", "90000000"})))
      .WillOnce(Return(decision_reply(0, 0, 90'000'000, 90'000'000, 0)));
  const Decision d = s.block("user-42", 90s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 90s);
  EXPECT_EQ(d.reset_after, 90s);
  EXPECT_EQ(d.limit, c().limit);
}

TEST_P(EveryStrategyTest, NonPositiveBlockDurationThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  expect_nothing_sent();
  EXPECT_THROW(s.block("u", 0us), InvalidArgument);
  EXPECT_THROW(s.block("u", -1s), InvalidArgument);
  EXPECT_THROW(s.block("", 1s), InvalidArgument);
}

TEST_P(EveryStrategyTest, NowIsTheManualClocksMicroseconds) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("1700000000123456", 1, "1"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("1700000001623457", 1, "1"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("1800000000000000", 1, "0"))))
      .WillOnce(Return(reply(1, 0, 0, 0)));
  s.consume("u", 1);
  clock->advance(1'500'001us);
  s.consume("u", 1);
  clock->set(Micros{1'800'000'000'000'000});
  s.peek("u", 1);
}

TEST_P(EveryStrategyTest, RedisTimeSourceSendsRedis) {
  const RateLimiter limiter = make_limiter(TimeSource::redis);
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("redis", 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("redis", 1, "0")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args("redis", 1, "2")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_CALL(*mock, command(evalsha(scripts::block(), keys(s, "u"), {"redis", "1", "3", "1000000"})))
      .WillOnce(Return(decision_reply(0, 0, 1'000'000, 1'000'000, 0)));
  clock->advance(10s);  // irrelevant with TimeSource::redis
  s.consume("u", 1);
  s.peek("u", 1);
  s.refund("u", 1);
  s.block("u", 1s);
}

TEST_P(EveryStrategyTest, KeysFollowTheDocumentedLayout) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_EQ(s.resource(), "api");
  EXPECT_EQ(s.key_for("user-42"), "redlimit:{api|user-42}:" + std::string(c().kind));
  EXPECT_EQ(s.key_for("a:b}c"), redlimit::detail::make_key("redlimit:", "api", "a:b}c", c().kind));
  // The block marker is another key in the same hash slot.
  EXPECT_NE(s.block_key_for("user-42"), s.key_for("user-42"));
  EXPECT_EQ(redlimit::detail::key_slot(s.block_key_for("user-42")), redlimit::detail::key_slot(s.key_for("user-42")));
  EXPECT_NE(s.block_key_for("user-42"), s.block_key_for("user-43"));
  EXPECT_EQ(s.block_key_for("user-42").rfind("redlimit:{api|user-42}", 0), 0u) << s.block_key_for("user-42");
}

TEST_P(EveryStrategyTest, CustomPrefix) {
  const RateLimiter limiter = make_limiter(TimeSource::client, "myapp:rl:");
  const Strategy s = make(limiter);
  EXPECT_EQ(s.key_for("u"), "myapp:rl:{api|u}:" + std::string(c().kind));
  EXPECT_EQ(s.block_key_for("u").rfind("myapp:rl:{api|u}", 0), 0u);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  s.consume("u", 1);
}

TEST_P(EveryStrategyTest, AnySubjectBytesGoIntoOneHashTag) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  const std::string subject = "a{b}c:d|e%f\0g\xff"s;
  for (const std::string& key : keys(s, subject)) {
    EXPECT_EQ(std::count(key.begin(), key.end(), '{'), 1) << key;
    EXPECT_EQ(std::count(key.begin(), key.end(), '}'), 1) << key;
  }
  EXPECT_NE(s.key_for(subject), s.key_for("a{b}c:d|e%f"));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, subject), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  s.consume(subject, 1);
}

TEST_P(EveryStrategyTest, SubjectOf1024BytesIsAccepted) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  const std::string subject(1024, 's');
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, subject), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_TRUE(s.consume(subject, 1).allowed);
}

TEST_P(EveryStrategyTest, RejectedReplyIsDecoded) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(reply(0, 0, 250'000, 1'000'000)));
  const Decision d = s.consume("u", 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, c().limit);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 250ms);
  EXPECT_EQ(d.reset_after, 1s);
}

TEST_P(EveryStrategyTest, DelayIsDecoded) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(reply(1, 3, 0, 2'000'000, 1'500'000)));
  const Decision d = s.consume("u", 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.delay, 1500ms);
}

TEST_P(EveryStrategyTest, ResetSendsOneDelOfTheSubjectsKeys) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(concat({"DEL"}, keys(s, "user-42")))).WillOnce(Return(Reply::make_integer(1)));
  s.reset("user-42");
}

TEST_P(EveryStrategyTest, ResetOfAnUnknownSubjectIsFine) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(concat({"DEL"}, keys(s, "nobody")))).WillOnce(Return(Reply::make_integer(0)));
  EXPECT_NO_THROW(s.reset("nobody"));
}

TEST_P(EveryStrategyTest, ResetErrorReplyThrowsReplyError) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(concat({"DEL"}, keys(s, "u")))).WillOnce(Return(Reply::make_error("ERR boom")));
  EXPECT_THROW(s.reset("u"), ReplyError);
}

TEST_P(EveryStrategyTest, InvalidCostThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  expect_nothing_sent();
  for (const std::int64_t cost : {std::int64_t{0}, std::int64_t{-1}, c().limit + 1, INT64_MIN, INT64_MAX}) {
    SCOPED_TRACE(cost);
    EXPECT_THROW(s.consume("u", cost), InvalidArgument);
    EXPECT_THROW(s.peek("u", cost), InvalidArgument);
    EXPECT_THROW(s.refund("u", cost), InvalidArgument);
    EXPECT_THROW(s.acquire("u", cost, 1s), InvalidArgument);
  }
}

TEST_P(EveryStrategyTest, InvalidSubjectThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  expect_nothing_sent();
  for (const std::string& subject : {""s, std::string(1025, 's'), std::string(4096, '\0')}) {
    SCOPED_TRACE(subject.size());
    EXPECT_THROW(s.consume(subject, 1), InvalidArgument);
    EXPECT_THROW(s.peek(subject, 1), InvalidArgument);
    EXPECT_THROW(s.refund(subject, 1), InvalidArgument);
    EXPECT_THROW(s.block(subject, 1s), InvalidArgument);
    EXPECT_THROW(s.acquire(subject, 1, 1s), InvalidArgument);
    EXPECT_THROW(s.reset(subject), InvalidArgument);
    EXPECT_THROW(s.key_for(subject), InvalidArgument);
    EXPECT_THROW(s.block_key_for(subject), InvalidArgument);
  }
}

TEST_P(EveryStrategyTest, InvalidResourceThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(make(limiter, ""), InvalidArgument);
  EXPECT_THROW(make(limiter, std::string(redlimit::detail::kMaxResourceBytes + 1, 'r')), InvalidArgument);
  EXPECT_NO_THROW(make(limiter, std::string(redlimit::detail::kMaxResourceBytes, 'r')));
}

TEST_P(EveryStrategyTest, ErrorReplyThrowsReplyError) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(Reply::make_error("ERR Error running script: @user_script:10: boom")));
  try {
    s.consume("u", 1);
    FAIL() << "did not throw";
  } catch (const ReplyError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("boom"));
  }
}

TEST_P(EveryStrategyTest, MalformedReplyThrowsReplyError) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(Reply::make_integer(1)))
      .WillOnce(Return(Reply::make_nil()))
      .WillOnce(Return(Reply::make_array({Reply::make_integer(1), Reply::make_integer(2)})))
      .WillOnce(Return(reply(3, 0, 0, 0)))
      .WillOnce(Return(reply(1, -2, 0, 0)))
      .WillOnce(Return(policy_reply(1, 0, 0, 0, 2)));  // deciding limit 2 of 1
  for (int i = 0; i < 6; ++i) EXPECT_THROW(s.consume("u", 1), ReplyError) << i;
}

TEST_P(EveryStrategyTest, NoscriptIsFollowedByOneEvalWithTheSameArguments) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  const Argv a = args(now(), 2, "1");
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), a))).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(*mock, command(eval(script(), keys(s, "u"), a))).WillOnce(Return(reply(1, 4, 0, 9)));
  const Decision d = s.consume("u", 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 4);
  EXPECT_EQ(d.reset_after, 9us);
}

TEST_P(EveryStrategyTest, ConnectionErrorPropagatesAndIsNotRetried) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("connection reset")));
  EXPECT_THROW(s.consume("u", 1), ConnectionError);
}

TEST_P(EveryStrategyTest, AcquireSleepsOnTheLimiterClockUntilAdmitted) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(std::to_string(kStart), 2, "1"))))
      .WillOnce(Return(reply(0, 1, 300'000, 900'000)));
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(std::to_string(kStart + 300'000), 2, "1"))))
      .WillOnce(Return(reply(1, 0, 0, 900'000)));
  const Decision d = s.acquire("u", 2, 1s);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(clock->now(), Micros{kStart + 300'000});
}

TEST_P(EveryStrategyTest, AcquireGivesUpWhenTheWaitExceedsMaxWait) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1"))))
      .WillOnce(Return(reply(0, 0, 2'000'000, 2'000'000)));
  const Decision d = s.acquire("u", 1, 1s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 2s);
  EXPECT_EQ(clock->now(), Micros{kStart});  // no point sleeping
}

TEST_P(EveryStrategyTest, AcquireWithZeroMaxWaitIsOneConsume) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  EXPECT_CALL(*mock, command(evalsha(script(), keys(s, "u"), args(now(), 1, "1"))))
      .WillOnce(Return(reply(0, 0, 1, 1)));
  EXPECT_FALSE(s.acquire("u", 1, 0us).allowed);
  EXPECT_EQ(clock->now(), Micros{kStart});
}

TEST_P(EveryStrategyTest, AcquireWithNegativeMaxWaitThrowsAndSendsNothing) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  expect_nothing_sent();
  EXPECT_THROW(s.acquire("u", 1, -1us), InvalidArgument);
}

TEST_P(EveryStrategyTest, StrategyOutlivesTheLimiter) {
  std::optional<Strategy> s;
  {
    const RateLimiter limiter = make_limiter();
    s.emplace(make(limiter));
  }
  EXPECT_CALL(*mock, command(evalsha(script(), keys(*s, "u"), args(now(), 1, "1")))).WillOnce(Return(reply(1, 0, 0, 0)));
  EXPECT_TRUE(s->consume("u", 1).allowed);
}

TEST_P(EveryStrategyTest, CallsFromManyThreadsAreSerialised) {
  const RateLimiter limiter = make_limiter();
  const Strategy s = make(limiter);
  std::atomic<int> in_flight{0};
  std::atomic<int> overlaps{0};
  constexpr int kThreads = 8, kCalls = 25;
  const Reply ok = reply(1, 0, 0, 0);
  EXPECT_CALL(*mock, command(_)).Times(kThreads * kCalls).WillRepeatedly([&](const Argv&) {
    if (in_flight.fetch_add(1) != 0) overlaps.fetch_add(1);
    std::this_thread::sleep_for(20us);
    in_flight.fetch_sub(1);
    return ok;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) s.consume("subject-" + std::to_string(t), 1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(overlaps.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategyTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// =================================================================================================
// Strategy-specific parameters and construction checks
// =================================================================================================

class StrategiesTest : public StrategyTestBase, public ::testing::Test {
 protected:
  static Argv keys(const Strategy& s, std::string_view subject) { return {s.key_for(subject), s.block_key_for(subject)}; }
};

TEST_F(StrategiesTest, AccessorsReflectTheConstruction) {
  const RateLimiter limiter = make_limiter();
  EXPECT_EQ(limiter.fixed_window("a", Limit::per_minute(7)).limit(), Limit::per_minute(7));
  EXPECT_EQ(limiter.fixed_window("a", Limit::per_minute(7)).resource(), "a");
  EXPECT_EQ(limiter.sliding_log("b", Limit(3, 5s)).limit(), Limit(3, 5s));
  EXPECT_EQ(limiter.sliding_window("c", Limit::per_minute(60), 15s).limit().precision(), 15s);
  EXPECT_EQ(limiter.token_bucket("d", 12, 1, 1s).capacity(), 12);
  EXPECT_EQ(limiter.leaky_bucket("e", 9, Limit::per_second(1)).capacity(), 9);
  EXPECT_EQ(limiter.leaky_bucket("e", 9, Limit::per_second(1)).mode(), LeakyMode::meter);
  EXPECT_EQ(limiter.leaky_bucket("e", 9, Limit::per_second(1), LeakyMode::shaper).mode(), LeakyMode::shaper);
  EXPECT_EQ(limiter.policy("f", redlimit::parse_limits("1/s; 2/m")).limits(), redlimit::parse_limits("1/s; 2/m"));
  EXPECT_EQ(&limiter.clock(), clock.get());
  EXPECT_EQ(limiter.options().prefix, "redlimit:");
}

TEST_F(StrategiesTest, StrategiesSharingAResourceUseDifferentStateKeys) {
  const RateLimiter limiter = make_limiter();
  const std::set<std::string> keys = {
      limiter.fixed_window("api", Limit::per_minute(1)).key_for("u"),
      limiter.sliding_log("api", Limit::per_minute(1)).key_for("u"),
      limiter.sliding_window("api", Limit::per_minute(1)).key_for("u"),
      limiter.token_bucket("api", 1, 1, 1s).key_for("u"),
      limiter.leaky_bucket("api", 1, Limit::per_second(1)).key_for("u"),
      limiter.policy("api", {Limit::per_minute(1)}).key_for("u"),
  };
  EXPECT_EQ(keys.size(), 6u);
}

TEST_F(StrategiesTest, SlidingWindowPrecisionFromTheLimit) {
  const RateLimiter limiter = make_limiter();
  const auto sw = limiter.sliding_window("api", Limit::parse("100/1m@10s"));
  EXPECT_CALL(*mock, command(evalsha(scripts::policy(), keys(sw, "u"),
                                     {now(), "1", "1", "1", "1m@10s", "100", "60000000", "10000000"})))
      .WillOnce(Return(policy_reply(1, 99, 0, 70'000'000, 1)));
  const Decision d = sw.consume("u");
  EXPECT_EQ(d.remaining, 99);
  EXPECT_EQ(d.limit, 100);
}

TEST_F(StrategiesTest, SlidingWindowPrecisionArgumentOverridesTheLimits) {
  const RateLimiter limiter = make_limiter();
  const auto sw = limiter.sliding_window("api", Limit::parse("100/1m@10s"), 20s);
  EXPECT_EQ(sw.limit().precision(), 20s);
  EXPECT_CALL(*mock, command(evalsha(scripts::policy(), keys(sw, "u"),
                                     {now(), "1", "1", "1", "1m@20s", "100", "60000000", "20000000"})))
      .WillOnce(Return(policy_reply(1, 99, 0, 80'000'000, 1)));
  sw.consume("u");
}

TEST_F(StrategiesTest, TokenBucketRateUsesTheGcd) {
  const RateLimiter limiter = make_limiter();
  struct R {
    std::int64_t capacity, per;
    Micros period;
    const char* unit;
    const char* refill;
  };
  const R rates[] = {
      {10, 1, 1s, "1000000", "1"},     // 1 token per s
      {10, 3, 2s, "2000000", "3"},     // gcd(3, 2000000) = 1
      {100, 10, 1s, "100000", "1"},    // gcd(10, 1000000) = 10
      {5, 1000, 1ms, "1", "1"},        // one token per microsecond
      {60, 60, 1min, "1000000", "1"},  // gcd(60, 60000000) = 60
      {7, 4, 6us, "3", "2"},           // gcd(4, 6) = 2
      {1, 1000000, 1s, "1", "1"},      // a refill larger than the capacity is fine
  };
  for (const R& r : rates) {
    SCOPED_TRACE(std::to_string(r.per) + " per " + std::to_string(r.period.count()) + "us");
    const auto tb = limiter.token_bucket("api", r.capacity, r.per, r.period);
    EXPECT_CALL(*mock, command(evalsha(scripts::token_bucket(), keys(tb, "u"),
                                       {now(), "1", "1", std::to_string(r.capacity), r.unit, r.refill})))
        .WillOnce(Return(decision_reply(1, r.capacity - 1, 0, 1)));
    const Decision d = tb.consume("u");
    EXPECT_EQ(d.limit, r.capacity);
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
  }
}

TEST_F(StrategiesTest, LeakyBucketRateUsesTheGcd) {
  const RateLimiter limiter = make_limiter();
  struct R {
    Limit rate;
    const char* unit;
    const char* leak;
  };
  const R rates[] = {
      {Limit::per_second(2), "500000", "1"},
      {Limit(3, 2s), "2000000", "3"},
      {Limit::per_second(1'000'000), "1", "1"},
      {Limit::per_minute(1), "60000000", "1"},
      {Limit(4, 6us), "3", "2"},
  };
  for (const R& r : rates) {
    SCOPED_TRACE(r.rate.to_string());
    for (const LeakyMode mode : {LeakyMode::meter, LeakyMode::shaper}) {
      const auto lb = limiter.leaky_bucket("api", 8, r.rate, mode);
      EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                         {now(), "1", "1", "8", r.unit, r.leak,
                                          mode == LeakyMode::shaper ? "shaper" : "meter"})))
          .WillOnce(Return(decision_reply(1, 7, 0, 1)));
      EXPECT_EQ(lb.consume("u").limit, 8);
      ::testing::Mock::VerifyAndClearExpectations(mock.get());
    }
  }
}

TEST_F(StrategiesTest, LeakyBucketDefaultsToMeter) {
  const RateLimiter limiter = make_limiter();
  const auto lb = limiter.leaky_bucket("api", 10, Limit::per_second(2));
  EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                     {now(), "1", "1", "10", "500000", "1", "meter"})))
      .WillOnce(Return(decision_reply(1, 9, 0, 500000)));
  lb.consume("u");
}

TEST_F(StrategiesTest, ShaperDelayReachesTheDecision) {
  const RateLimiter limiter = make_limiter();
  const auto lb = limiter.leaky_bucket("api", 10, Limit::per_second(2), LeakyMode::shaper);
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 7, 0, 1'500'000, 1'000'000)));
  const Decision d = lb.consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 7);
  EXPECT_EQ(d.delay, 1s);
  EXPECT_EQ(d.reset_after, 1500ms);
}

TEST_F(StrategiesTest, AcquireOnAShaperWaitsTheDelay) {
  const RateLimiter limiter = make_limiter();
  const auto lb = limiter.leaky_bucket("api", 10, Limit::per_second(2), LeakyMode::shaper);
  EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                     {now(), "1", "1", "10", "500000", "1", "shaper"})))
      .WillOnce(Return(decision_reply(1, 8, 0, 1'000'000, 400'000)));
  const Decision d = lb.acquire("u", 1, 1s);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.delay, 400ms);
  EXPECT_EQ(clock->now(), Micros{kStart + 400'000});
}

TEST_F(StrategiesTest, AcquireOnAShaperRefundsWhenTheDelayExceedsMaxWait) {
  const RateLimiter limiter = make_limiter();
  const auto lb = limiter.leaky_bucket("api", 10, Limit::per_second(2), LeakyMode::shaper);
  InSequence seq;
  EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                     {now(), "3", "1", "10", "500000", "1", "shaper"})))
      .WillOnce(Return(decision_reply(1, 2, 0, 4'000'000, 2'500'000)));
  EXPECT_CALL(*mock, command(evalsha(scripts::leaky_bucket(), keys(lb, "u"),
                                     {now(), "3", "2", "10", "500000", "1", "shaper"})))
      .WillOnce(Return(decision_reply(1, 5, 0, 2'500'000, 0)));
  const Decision d = lb.acquire("u", 3, 1s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(clock->now(), Micros{kStart});
}

// ---- policies ----------------------------------------------------------------------------------

TEST_F(StrategiesTest, PolicySendsEveryLimitInOrder) {
  const RateLimiter limiter = make_limiter();
  const auto pol = limiter.policy("api", redlimit::parse_limits("10/s; 120/m; 240/h@1m"));
  EXPECT_EQ(pol.key_for("u"), "redlimit:{api|u}:pol");
  EXPECT_CALL(*mock, command(evalsha(scripts::policy(), keys(pol, "u"),
                                     {now(), "1", "1", "3",                           //
                                      "1s", "10", "1000000", "1000000",               //
                                      "1m", "120", "60000000", "60000000",            //
                                      "1h@1m", "240", "3600000000", "60000000"})))
      .WillOnce(Return(policy_reply(1, 9, 0, 3'600'000'000, 1)));
  const Decision d = pol.consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit_index, 0u);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 9);
}

TEST_F(StrategiesTest, PolicyDecisionNamesTheDecidingLimit) {
  const RateLimiter limiter = make_limiter();
  const auto pol = limiter.policy("api", redlimit::parse_limits("10/s, 120/m, 240/h"));
  EXPECT_CALL(*mock, command(_))
      .WillOnce(Return(policy_reply(0, 0, 12'000'000, 3'600'000'000, 2)))
      .WillOnce(Return(policy_reply(0, 0, 1'800'000'000, 3'600'000'000, 3)));
  Decision d = pol.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit_index, 1u);
  EXPECT_EQ(d.limit, 120);
  EXPECT_EQ(d.retry_after, 12s);
  d = pol.consume("u");
  EXPECT_EQ(d.limit_index, 2u);
  EXPECT_EQ(d.limit, 240);
}

TEST_F(StrategiesTest, PolicyCostIsCappedByTheSmallestLimit) {
  const RateLimiter limiter = make_limiter();
  const auto pol = limiter.policy("api", redlimit::parse_limits("120/m; 10/s; 240/h"));
  {
    expect_nothing_sent();
    EXPECT_THROW(pol.consume("u", 11), InvalidArgument);
    EXPECT_THROW(pol.peek("u", 11), InvalidArgument);
    ::testing::Mock::VerifyAndClearExpectations(mock.get());
  }
  EXPECT_CALL(*mock, command(_)).WillOnce(Return(policy_reply(1, 0, 0, 1'000'000, 2)));
  EXPECT_EQ(pol.consume("u", 10).limit, 10);
}

TEST_F(StrategiesTest, InvalidPoliciesThrowAndSendNothing) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.policy("api", {}), InvalidArgument);
  std::vector<Limit> seventeen;
  for (int i = 1; i <= 17; ++i) seventeen.emplace_back(i, std::chrono::seconds(i));
  EXPECT_THROW(limiter.policy("api", seventeen), InvalidArgument);
  seventeen.pop_back();
  ASSERT_EQ(seventeen.size(), redlimit::Policy::max_limits());
  EXPECT_NO_THROW(limiter.policy("api", seventeen));
  // Same window and precision twice.
  EXPECT_THROW(limiter.policy("api", redlimit::parse_limits("10/m; 20/m")), InvalidArgument);
  EXPECT_THROW(limiter.policy("api", redlimit::parse_limits("10/m@10s; 20/60s@10s")), InvalidArgument);
  // Same window, different precision is fine.
  EXPECT_NO_THROW(limiter.policy("api", redlimit::parse_limits("10/m; 20/m@10s")));
  // A limit a sliding window rejects (36000 buckets).
  EXPECT_THROW(limiter.policy("api", redlimit::parse_limits("10/s; 100/1h@100ms")), InvalidArgument);
  EXPECT_THROW(limiter.policy("", {Limit::per_second(1)}), InvalidArgument);
}

// ---- construction checks -----------------------------------------------------------------------

TEST_F(StrategiesTest, TokenBucketInvalidParametersThrowAndSendNothing) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.token_bucket("api", 0, 1, 1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", -1, 1, 1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", 10, 0, 1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", 10, -3, 1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", 10, 1, 0s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", 10, 1, -1s), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("", 10, 1, 1s), InvalidArgument);
}

TEST_F(StrategiesTest, TokenBucketCapacityTimesUnitMustStayExact) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  // unit = 3.6e9 for 1 token per hour: capacity * unit far above 2^52.
  EXPECT_THROW(limiter.token_bucket("api", 1'000'000'000, 1, 1h), InvalidArgument);
  EXPECT_THROW(limiter.token_bucket("api", Limit::max_count(), 1, 1s), InvalidArgument);
  // 2^40 tokens at 1 per 4095 us: capacity * unit = 2^52 - 2^40 < 2^52, accepted.
  EXPECT_NO_THROW(limiter.token_bucket("api", Limit::max_count(), 1, Micros{4095}));
}

TEST_F(StrategiesTest, TokenBucketCapacityTimesUnitOfExactly2Pow52IsRejected) {
  // token_bucket.lua (first version) / prologue.lua: the client keeps every product below 2^52.
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  ASSERT_EQ(Limit::max_count() * 4096, k2Pow52);
  EXPECT_THROW(limiter.token_bucket("api", Limit::max_count(), 1, Micros{4096}), InvalidArgument);
}

TEST_F(StrategiesTest, LeakyBucketInvalidParametersThrowAndSendNothing) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.leaky_bucket("api", 0, Limit::per_second(1)), InvalidArgument);
  EXPECT_THROW(limiter.leaky_bucket("api", -5, Limit::per_second(1)), InvalidArgument);
  EXPECT_THROW(limiter.leaky_bucket("api", 0, Limit::per_second(1), LeakyMode::shaper), InvalidArgument);
  EXPECT_THROW(limiter.leaky_bucket("api", 1'000'000'000, Limit::per_hour(1)), InvalidArgument);
  EXPECT_THROW(limiter.leaky_bucket("", 10, Limit::per_second(1)), InvalidArgument);
}

TEST_F(StrategiesTest, LeakyBucketCapacityTimesUnitOfExactly2Pow52IsRejected) {
  // prologue.lua: "the client keeps every product of the math below 2^52".
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_NO_THROW(limiter.leaky_bucket("api", Limit::max_count(), Limit(1, Micros{4095})));
  EXPECT_THROW(limiter.leaky_bucket("api", Limit::max_count(), Limit(1, Micros{4096})), InvalidArgument);
}

TEST_F(StrategiesTest, SlidingWindowPrecisionMustDivideTheWindow) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.sliding_window("api", Limit::per_minute(100), 7s), InvalidArgument);
  EXPECT_THROW(limiter.sliding_window("api", Limit::per_minute(100), 2min), InvalidArgument);
  EXPECT_THROW(limiter.sliding_window("api", Limit::per_minute(100), -1s), InvalidArgument);
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit::per_minute(100), 1min));
}

TEST_F(StrategiesTest, SlidingWindowBucketCountIsCapped) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  ASSERT_EQ(redlimit::SlidingWindow::max_buckets(), 10'000);
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit(100, 10s), 1ms));                     // 10000 buckets
  EXPECT_THROW(limiter.sliding_window("api", Limit(100, 10001ms), 1ms), InvalidArgument);     // 10001
  EXPECT_THROW(limiter.sliding_window("api", Limit::per_hour(100), 100ms), InvalidArgument);  // 36000
  EXPECT_THROW(limiter.sliding_window("api", Limit::parse("100/1h@100ms")), InvalidArgument);
}

TEST_F(StrategiesTest, SlidingWindowLimitTimesPrecisionMustStayExact) {
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.sliding_window("api", Limit(Limit::max_count(), 10s)), InvalidArgument);
  EXPECT_THROW(limiter.sliding_window("api", Limit(Limit::max_count(), 1h), 1s), InvalidArgument);
  EXPECT_NO_THROW(limiter.sliding_window("api", Limit(Limit::max_count(), Micros{4095})));
}

TEST_F(StrategiesTest, SlidingWindowLimitTimesPrecisionOfExactly2Pow52IsRejected) {
  // policy.lua: "the client keeps limit * P below 2^52".
  const RateLimiter limiter = make_limiter();
  expect_nothing_sent();
  EXPECT_THROW(limiter.sliding_window("api", Limit(Limit::max_count(), Micros{4096})), InvalidArgument);
}

TEST_F(StrategiesTest, BadPrefixInOptionsThrowsAndSendsNothing) {
  expect_nothing_sent();
  for (const std::string& prefix : {"a{b"s, "{"s, "}"s, "rl:{x}:"s, std::string(65, 'p')}) {
    SCOPED_TRACE(prefix);
    Options o;
    o.clock = clock;
    o.prefix = prefix;
    EXPECT_THROW(RateLimiter(mock, o), InvalidArgument);
  }
}

TEST_F(StrategiesTest, NullConnectionIsRejected) {
  EXPECT_THROW(RateLimiter(std::shared_ptr<redlimit::Connection>{}, Options{}), InvalidArgument);
}

TEST_F(StrategiesTest, EmptyPrefixIsAllowed) {
  const RateLimiter limiter = make_limiter(TimeSource::client, "");
  EXPECT_EQ(limiter.fixed_window("api", Limit::per_second(1)).key_for("u"), "{api|u}:fw");
}

TEST_F(StrategiesTest, WithoutAClockTheSystemClockIsUsed) {
  const RateLimiter limiter(mock, Options{});
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  std::string sent_now;
  EXPECT_CALL(*mock, command(_)).WillOnce([&](const Argv& argv) {
    sent_now = argv.at(5);  // EVALSHA sha 2 key blk now ...
    return decision_reply(1, 4, 0, 1);
  });
  const auto before = std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch());
  fw.consume("u");
  const auto after = std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch());
  ASSERT_FALSE(sent_now.empty());
  ASSERT_TRUE(std::all_of(sent_now.begin(), sent_now.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      << sent_now;
  const std::int64_t t = std::stoll(sent_now);
  EXPECT_GE(t, before.count() - 1000);
  EXPECT_LE(t, after.count() + 1000);
}

TEST_F(StrategiesTest, EveryDecisionIsExactlyOneCommand) {
  const RateLimiter limiter = make_limiter();
  const auto sl = limiter.sliding_log("api", Limit::per_second(3));
  EXPECT_CALL(*mock, command(_)).Times(3).WillRepeatedly(Return(decision_reply(1, 2, 0, 1000)));
  sl.consume("a");
  sl.peek("a");
  sl.consume("b", 3);
}

}  // namespace
