#pragma once
// Shared pieces of the integration tests: a fixture on the suite's redis-server with a ManualClock,
// the five strategies behind one interface (for "every strategy does X" tests), and checks for the
// exactness of retry_after and reset_after.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "support/redis_server.hpp"

namespace redlimit {

// Readable gtest failure messages.
inline std::ostream& operator<<(std::ostream& os, const Decision& d) {
  return os << "Decision{allowed=" << d.allowed << ", limit=" << d.limit << ", remaining=" << d.remaining
            << ", retry_after=" << d.retry_after.count() << "us, reset_after=" << d.reset_after.count()
            << "us, delay=" << d.delay.count() << "us, limit_index=" << d.limit_index
            << ", source=" << static_cast<int>(d.source) << ", shadow_rejected=" << d.shadow_rejected << "}";
}
inline void PrintTo(const Decision& d, std::ostream* os) { *os << d; }

}  // namespace redlimit

namespace redlimit_test {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::Micros;

// 2023-11-14T22:00:00Z in microseconds: aligned to the hour, so to every window that divides an hour.
inline constexpr Micros kT0{1'699'999'200'000'000};

// A string state as helpers.lua packs it, little-endian with a time in 7 bytes first: the fixed
// window's (start, used in 6 bytes, window in 7), the buckets' (at, whole in 6, frac in 7, unit in 7,
// lease in 1), or 0.2's pack2 (time, quantity in 5 bytes, 8 past 2^40).
struct PackedState {
  std::int64_t time = -1;
  std::int64_t quantity = -1;  // used, or whole units
  std::int64_t frac = -1;      // buckets only
  std::int64_t tag = -1;       // the window or unit written under (not in pack2)
  std::int64_t lease = -1;     // buckets only: how long the key lives (helpers.lua, bucket_ttl)
};
inline PackedState unpack_state(const std::string& v) {
  const auto read = [&](std::size_t from, std::size_t n) {
    std::int64_t x = 0;
    for (std::size_t i = n; i-- > 0;) x = (x << 8) | static_cast<unsigned char>(v[from + i]);
    return x;
  };
  if (v.size() == 20) return {read(0, 7), read(7, 6), -1, read(13, 7)};
  if (v.size() == 28) return {read(0, 7), read(7, 6), read(13, 7), read(20, 7), read(27, 1)};
  if (v.size() == 27) return {read(0, 7), read(7, 6), read(13, 7), read(20, 7)};
  if (v.size() != 12 && v.size() != 15) return {};
  return {read(0, 7), read(7, v.size() - 7)};
}

// A fixed window's hash (lua/fixed_window.lua), from HGETALL, as a PackedState: the start, count
// and window of its count field "<start>:<window>" (a blocked count, held less 2^50, unblocked);
// all -1 unless it holds exactly one such field.
inline PackedState window_state(const redlimit::Reply& hgetall) {
  PackedState out;
  int fields = 0;
  for (std::size_t i = 0; i + 1 < hgetall.elements.size(); i += 2) {
    const std::string& f = hgetall.elements[i].str;
    const auto colon = f.find(':');
    if (f == "blk" || colon == std::string::npos) continue;
    ++fields;
    std::int64_t count = std::stoll(hgetall.elements[i + 1].str);
    if (count < 0) count += std::int64_t{1} << 50;
    out = {std::stoll(f.substr(0, colon)), count, -1, std::stoll(f.substr(colon + 1))};
  }
  return fields == 1 ? out : PackedState{};
}

// One strategy object behind a uniform face.
struct AnyStrategy {
  std::string name;
  std::int64_t limit = 0;  // Decision::limit: count or capacity
  std::function<Decision(std::string_view, std::int64_t)> consume;
  std::function<Decision(std::string_view, std::int64_t)> peek;
  std::function<void(std::string_view)> reset;
  std::function<std::string(std::string_view)> key_for;
  std::function<Decision(std::string_view, std::int64_t)> refund;
  std::function<Decision(std::string_view, Micros)> block;
  std::function<bool(std::string_view)> unblock;
  std::function<std::string(std::string_view)> block_key_for;
  std::function<Decision(std::string_view, std::int64_t, Micros)> acquire;
  std::function<std::vector<Decision>(const std::vector<redlimit::Request>&)> consume_many;
};

template <class S>
AnyStrategy wrap(std::string name, std::int64_t limit, S s) {
  AnyStrategy a;
  a.name = std::move(name);
  a.limit = limit;
  a.consume = [s](std::string_view subject, std::int64_t cost) { return s.consume(subject, cost); };
  a.peek = [s](std::string_view subject, std::int64_t cost) { return s.peek(subject, cost); };
  a.reset = [s](std::string_view subject) { s.reset(subject); };
  a.key_for = [s](std::string_view subject) { return s.key_for(subject); };
  a.refund = [s](std::string_view subject, std::int64_t cost) { return s.refund(subject, cost); };
  a.block = [s](std::string_view subject, Micros duration) { return s.block(subject, duration); };
  a.unblock = [s](std::string_view subject) { return s.unblock(subject); };
  a.block_key_for = [s](std::string_view subject) { return s.block_key_for(subject); };
  a.acquire = [s](std::string_view subject, std::int64_t cost, Micros max_wait) {
    return s.acquire(subject, cost, max_wait);
  };
  a.consume_many = [s](const std::vector<redlimit::Request>& requests) { return s.consume_many(requests); };
  return a;
}

// All six (five strategies, the leaky bucket in both modes), each admitting `limit` units per `window`
// (capacity `limit` for the buckets) under resource `<resource>.<kind>`. `window` must be a multiple
// of 10 us (the sliding window uses precision window / 10).
inline std::vector<AnyStrategy> all_strategies(const redlimit::RateLimiter& l, const std::string& resource,
                                               std::int64_t limit, Micros window) {
  const Limit lim(limit, window);
  return {
      wrap("fixed_window", limit, l.fixed_window(resource + ".fw", lim)),
      wrap("sliding_log", limit, l.sliding_log(resource + ".sl", lim)),
      wrap("sliding_window", limit, l.sliding_window(resource + ".sw", lim, window / 10)),
      wrap("token_bucket", limit, l.token_bucket(resource + ".tb", limit, limit, window)),
      wrap("leaky_meter", limit, l.leaky_bucket(resource + ".lm", limit, lim, redlimit::LeakyMode::meter)),
      wrap("leaky_shaper", limit, l.leaky_bucket(resource + ".ls", limit, lim, redlimit::LeakyMode::shaper)),
  };
}

// The integration fixture: a clean server (FLUSHALL), a ManualClock at kT0 and a limiter using it.
class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = &shared_server();
    const redlimit::Reply r = server_->command({"FLUSHALL"});
    ASSERT_EQ(r.type, redlimit::Reply::Type::status) << r.str;
    clock = std::make_shared<redlimit::ManualClock>(kT0);
    limiter.emplace(redlimit::RateLimiter::connect(server_->url(), options()));
  }

  // Options with this test's ManualClock.
  redlimit::Options options() const {
    redlimit::Options o;
    o.clock = clock;
    return o;
  }

  RedisServer& server() { return *server_; }
  // False when SetUp could not reach the shared server.
  bool has_server() const { return server_ != nullptr; }
  const redlimit::RateLimiter& rl() const { return *limiter; }
  // Sets the clock to kT0 + offset.
  void at(Micros offset) { clock->set(kT0 + offset); }
  std::int64_t dbsize() { return server_->dbsize(); }
  // The `calls=` count of INFO commandstats for one command (0 when never called).
  std::int64_t command_calls(const std::string& command);

  std::shared_ptr<redlimit::ManualClock> clock;
  std::optional<redlimit::RateLimiter> limiter;

 private:
  RedisServer* server_ = nullptr;
};

// A RedisTest that also checks, after each test, that no key left behind lacks a TTL (every key
// redlimit writes must expire). For tests that only use redlimit's own writes.
class StrictRedisTest : public RedisTest {
 protected:
  void TearDown() override {
    RedisTest::TearDown();
    if (!has_server() || !server().running()) return;
    for (const auto& key : server().keys()) {
      EXPECT_NE(server().integer({"PTTL", key}), -1) << "key without a TTL: " << key;
    }
  }
};

// Two answers to the same request (Redis and the memory backend; two reply forms of one state)
// field by field, each limit's state too.
inline void expect_same_decision(const Decision& a, const Decision& b, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(a.allowed, b.allowed);
  EXPECT_EQ(a.limit, b.limit);
  EXPECT_EQ(a.remaining, b.remaining);
  EXPECT_EQ(a.retry_after, b.retry_after);
  EXPECT_EQ(a.reset_after, b.reset_after);
  EXPECT_EQ(a.delay, b.delay);
  EXPECT_EQ(a.limit_index, b.limit_index);
  ASSERT_EQ(a.limits.size(), b.limits.size());
  for (std::size_t i = 0; i < a.limits.size(); ++i) {
    EXPECT_EQ(a.limits[i].limit, b.limits[i].limit) << "limit " << i;
    EXPECT_EQ(a.limits[i].window, b.limits[i].window) << "limit " << i;
    EXPECT_EQ(a.limits[i].remaining, b.limits[i].remaining) << "limit " << i;
    EXPECT_EQ(a.limits[i].reset_after, b.limits[i].reset_after) << "limit " << i;
  }
}

inline std::int64_t RedisTest::command_calls(const std::string& command) {
  const redlimit::Reply info = server_->command({"INFO", "commandstats"});
  // A server older than 7.0 counts a command's subcommands together ("script", not "script|load").
  const std::string name = server_->major_version() < 7 ? command.substr(0, command.find('|')) : command;
  const std::string needle = "cmdstat_" + name + ":calls=";
  const auto pos = info.str.find(needle);
  if (pos == std::string::npos) return 0;
  return std::stoll(info.str.substr(pos + needle.size()));
}

// `rejected` is what a request of `cost` for `subject` got at the clock's current time `t`. Checks
// that retry_after is exact: at t + retry_after - 1 ms and - 1 us the request is still rejected (by
// peek and by consume, whose rejection records nothing), and at t + retry_after both admit it. Leaves
// the clock at t + retry_after with the request recorded; returns that admitting decision.
template <class S>
Decision expect_retry_after_exact(redlimit::ManualClock& clock, const S& s, std::string_view subject, std::int64_t cost,
                                  const Decision& rejected) {
  EXPECT_FALSE(rejected.allowed) << rejected;
  EXPECT_GT(rejected.retry_after.count(), 0) << rejected;
  const Micros t = clock.now();
  std::vector<Micros> before{rejected.retry_after - 1us};
  if (rejected.retry_after >= 1ms) before.insert(before.begin(), rejected.retry_after - 1ms);
  for (Micros early : before) {
    clock.set(t + early);
    const Decision p = s.peek(subject, cost);
    EXPECT_FALSE(p.allowed) << "peek at now + " << early.count() << "us (retry_after " << rejected.retry_after.count()
                            << "us): " << p;
    const Decision c = s.consume(subject, cost);
    EXPECT_FALSE(c.allowed) << "consume at now + " << early.count() << "us (retry_after "
                            << rejected.retry_after.count() << "us): " << c;
    // What a rejection says stays true while nothing is recorded.
    EXPECT_EQ(c.retry_after, rejected.retry_after - early) << c;
  }
  clock.set(t + rejected.retry_after);
  const Decision p = s.peek(subject, cost);
  EXPECT_TRUE(p.allowed) << "peek at now + retry_after (" << rejected.retry_after.count() << "us): " << p;
  EXPECT_EQ(p.retry_after.count(), 0) << p;
  const Decision c = s.consume(subject, cost);
  EXPECT_TRUE(c.allowed) << "consume at now + retry_after (" << rejected.retry_after.count() << "us): " << c;
  EXPECT_EQ(c.retry_after.count(), 0) << c;
  return c;
}

// `d` is the latest decision for `subject` at the clock's current time `t`. Checks that reset_after
// is exact: at t + reset_after - 1 us the subject is not yet back to full quota, at t + reset_after
// it is. Only peeks; restores the clock to t.
template <class S>
void expect_reset_after_exact(redlimit::ManualClock& clock, const S& s, std::string_view subject, const Decision& d) {
  ASSERT_GT(d.reset_after.count(), 0) << d;
  const Micros t = clock.now();
  clock.set(t + d.reset_after - 1us);
  const Decision early = s.peek(subject, 1);
  EXPECT_LT(early.remaining, d.limit) << "1us before reset_after (" << d.reset_after.count() << "us): " << early;
  EXPECT_GT(early.reset_after.count(), 0) << early;
  clock.set(t + d.reset_after);
  const Decision full = s.peek(subject, 1);
  EXPECT_EQ(full.remaining, d.limit) << "at reset_after (" << d.reset_after.count() << "us): " << full;
  EXPECT_EQ(full.reset_after.count(), 0) << full;
  clock.set(t);
}

}  // namespace redlimit_test
