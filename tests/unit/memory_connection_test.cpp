// The in-memory backend (RateLimiter::in_memory, MemoryConnection) without a server: the strategies'
// documented behaviour on a ManualClock, expiry on that clock and eviction keeping the store bounded,
// thread safety, and the commands it answers. Its decisions are compared with Redis's, field by field,
// in tests/integration/differential_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "memory/store.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/redlimit.hpp"

namespace {

using redlimit::Decision;
using redlimit::LeakyMode;
using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::MemoryConnection;
using redlimit::Micros;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Reply;
using namespace std::chrono_literals;
using Argv = std::vector<std::string>;
namespace scripts = redlimit::detail::scripts;

// 2023-11-14T22:00:00Z: aligned to the hour, so to every window that divides an hour.
constexpr Micros kT0{1'699'999'200'000'000};

std::string show(const Decision& d) {
  std::ostringstream os;
  os << "{allowed=" << d.allowed << " limit=" << d.limit << " remaining=" << d.remaining
     << " retry_after=" << d.retry_after.count() << "us reset_after=" << d.reset_after.count()
     << "us delay=" << d.delay.count() << "us limit_index=" << d.limit_index << "}";
  return os.str();
}

class MemoryTest : public ::testing::Test {
 protected:
  MemoryTest()
      : clock(std::make_shared<ManualClock>(kT0)),
        store(std::make_shared<MemoryConnection>(clock)),
        limiter(store, options()) {}

  Options options() const {
    Options o;
    o.clock = clock;
    return o;
  }
  void at(Micros offset) { clock->set(kT0 + offset); }
  // ttl_ms keeps a state one millisecond past the time it matters (prologue.lua).
  static constexpr Micros kTtlSlack = 1ms;

  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<MemoryConnection> store;
  RateLimiter limiter;
};

// --- strategies on RateLimiter::in_memory ------------------------------------------------------

// Seed 004: 100 requests in the first 15 s of a minute; at 1.25 min the previous minute weighs 75 and
// 25 more are admitted; with 30 s precision the weighted half-minute leaves room for 50.
std::int64_t seed004_admitted_at_75s(Micros precision) {
  auto clock = std::make_shared<ManualClock>(kT0);
  Options o;
  o.clock = clock;
  const RateLimiter limiter = RateLimiter::in_memory(o);
  const auto api = limiter.sliding_window("api", Limit::per_minute(100), precision);
  for (int i = 0; i < 100; ++i) {
    clock->set(kT0 + Micros{i * 150'000});  // one every 150 ms: all within [0, 15 s)
    const Decision d = api.consume("user-42");
    EXPECT_TRUE(d.allowed) << i << " " << show(d);
  }
  EXPECT_FALSE(api.consume("user-42").allowed);
  clock->set(kT0 + 75s);
  std::int64_t admitted = 0;
  while (api.consume("user-42").allowed) ++admitted;
  return admitted;
}

TEST(MemoryBackend, Seed004SlidingWindowAt125Minutes) {
  EXPECT_EQ(seed004_admitted_at_75s(Micros{0}), 25);
  EXPECT_EQ(seed004_admitted_at_75s(30s), 50);
}

TEST_F(MemoryTest, FixedWindowCountsWithinTheAlignedWindow) {
  const auto fw = limiter.fixed_window("fw", Limit(3, 1s));
  at(250ms);
  for (std::int64_t expected : {2, 1, 0}) {
    const Decision d = fw.consume("u");
    EXPECT_TRUE(d.allowed) << show(d);
    EXPECT_EQ(d.limit, 3);
    EXPECT_EQ(d.remaining, expected) << show(d);
    EXPECT_EQ(d.reset_after, 750ms) << show(d);
  }
  const Decision d = fw.consume("u");
  EXPECT_FALSE(d.allowed) << show(d);
  EXPECT_EQ(d.retry_after, 750ms) << show(d);
  at(1s - 1us);
  EXPECT_FALSE(fw.consume("u").allowed);
  at(1s);
  EXPECT_TRUE(fw.consume("u").allowed);
  // The state's deadline is the TTL fixed_window.lua sets: the end of the window, in whole ms.
  EXPECT_EQ(store->expires_at(fw.key_for("u")), kT0 + 2s + kTtlSlack);
}

TEST_F(MemoryTest, SlidingLogIsExactAtEveryInstant) {
  const auto log = limiter.sliding_log("log", Limit(3, 1s));
  at(100ms);
  EXPECT_TRUE(log.consume("u").allowed);
  at(400ms);
  EXPECT_TRUE(log.consume("u", 2).allowed);
  at(500ms);
  Decision d = log.consume("u");
  EXPECT_FALSE(d.allowed) << show(d);
  EXPECT_EQ(d.retry_after, 600ms) << show(d);  // the unit of 100 ms leaves at 1.1 s
  EXPECT_EQ(d.reset_after, 900ms) << show(d);  // the units of 400 ms leave at 1.4 s
  at(1100ms - 1us);
  EXPECT_FALSE(log.peek("u").allowed);
  at(1100ms);
  d = log.consume("u");
  EXPECT_TRUE(d.allowed) << show(d);
  EXPECT_EQ(d.remaining, 0) << show(d);
  // A refund takes the newest units back.
  d = log.refund("u", 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 1) << show(d);
  EXPECT_EQ(d.reset_after, 300ms) << show(d);  // newest left: 400 ms + 1 s
}

TEST_F(MemoryTest, TokenBucketRefillsContinuously) {
  const auto tb = limiter.token_bucket("tb", 10, 3, 1s);  // 3 tokens a second: one per 333333.3 us
  Decision d = tb.consume("u", 10);
  EXPECT_TRUE(d.allowed) << show(d);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after, Micros{3'333'334}) << show(d);
  d = tb.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Micros{333'334}) << show(d);
  clock->advance(Micros{333'333});
  EXPECT_FALSE(tb.consume("u").allowed);
  clock->advance(1us);
  EXPECT_TRUE(tb.consume("u").allowed);
}

TEST_F(MemoryTest, LeakyBucketMeterAndShaper) {
  const auto meter = limiter.leaky_bucket("lm", 2, Limit(1, 1s), LeakyMode::meter);
  EXPECT_TRUE(meter.consume("u").allowed);
  EXPECT_TRUE(meter.consume("u").allowed);
  Decision d = meter.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 1s) << show(d);
  EXPECT_EQ(d.reset_after, 2s) << show(d);

  const auto shaper = limiter.leaky_bucket("ls", 3, Limit(1, 1s), LeakyMode::shaper);
  for (Micros expected : {0s, 1s, 2s}) {
    d = shaper.consume("u");
    EXPECT_TRUE(d.allowed) << show(d);
    EXPECT_EQ(d.delay, expected) << show(d);
  }
  d = shaper.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 1s) << show(d);
}

TEST_F(MemoryTest, PolicyIsAllOrNothingAndNamesTheDecidingLimit) {
  const auto pol = limiter.policy("api", redlimit::parse_limits("3/s; 5/min"));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(pol.consume("u").allowed);
  Decision d = pol.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit_index, 0u) << show(d);
  EXPECT_EQ(d.limit, 3);
  at(1s);  // at the very edge the previous second still weighs in full
  EXPECT_FALSE(pol.consume("u").allowed);
  at(2s);
  EXPECT_TRUE(pol.consume("u").allowed);
  EXPECT_TRUE(pol.consume("u").allowed);
  d = pol.consume("u");  // the second has room, the minute does not: nothing is recorded
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit_index, 1u) << show(d);
  EXPECT_EQ(d.limit, 5);
  // At 1:12 the first minute's 5 units weigh 5 * 48/60 = 4, leaving room for one.
  EXPECT_EQ(d.retry_after, 70s) << show(d);
  d = pol.peek("u");
  EXPECT_EQ(d.remaining, 0) << show(d);
  // A rejected request recorded nothing in the per-second limit either: a refund of one unit leaves
  // room for exactly one more.
  d = pol.refund("u", 1);
  EXPECT_EQ(d.remaining, 1) << show(d);
  EXPECT_TRUE(pol.consume("u").allowed);
  EXPECT_FALSE(pol.consume("u").allowed);
}

TEST_F(MemoryTest, BlockDeniesUntilItEndsAndResetLiftsIt) {
  const auto fw = limiter.fixed_window("fw", Limit(100, 1h));
  Decision d = fw.block("u", 10s);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 10s);
  at(4s);
  d = fw.block("u", 1s);  // never shortens a block
  EXPECT_EQ(d.retry_after, 6s) << show(d);
  d = fw.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 6s) << show(d);
  at(10s);
  EXPECT_TRUE(fw.consume("u").allowed);
  fw.block("u", 1h);
  EXPECT_FALSE(fw.consume("u").allowed);
  fw.reset("u");
  d = fw.consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 99) << show(d);  // the reset also forgot the earlier unit
}

TEST_F(MemoryTest, AcquireSleepsOnTheClock) {
  const auto fw = limiter.fixed_window("fw", Limit(1, 1s));
  at(300ms);
  EXPECT_TRUE(fw.acquire("u", 1, 0us).allowed);
  const Decision d = fw.acquire("u", 1, 2s);
  EXPECT_TRUE(d.allowed) << show(d);
  EXPECT_EQ(clock->now(), kT0 + 1s);  // slept exactly until the next window
}

TEST(MemoryBackend, InMemoryHonoursTimeSourceRedisWithTheClock) {
  auto clock = std::make_shared<ManualClock>(kT0 + 500ms);
  Options o;
  o.clock = clock;
  o.time_source = redlimit::TimeSource::redis;
  const RateLimiter limiter = RateLimiter::in_memory(o);
  const auto fw = limiter.fixed_window("fw", Limit(1, 1s));
  EXPECT_TRUE(fw.consume("u").allowed);
  const Decision d = fw.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 500ms) << show(d);  // "redis" time is the memory backend's clock
}

TEST(MemoryBackend, InMemoryWithoutAClockUsesSystemTime) {
  const RateLimiter limiter = RateLimiter::in_memory();
  const auto fw = limiter.fixed_window("fw", Limit(2, 1h));
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_TRUE(fw.consume("u").allowed);
  const Decision d = fw.consume("u");
  EXPECT_FALSE(d.allowed);
  EXPECT_GT(d.retry_after.count(), 0);
  EXPECT_LE(d.retry_after, 1h);
}

// --- expiry and eviction ----------------------------------------------------------------------

TEST_F(MemoryTest, AnExpiredEntryIsEvictedWhenItsKeyIsTouched) {
  const auto fw = limiter.fixed_window("fw", Limit(5, 1s));
  at(250ms);
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_EQ(store->size(), 1u);
  EXPECT_EQ(store->expires_at(fw.key_for("u")), kT0 + 1s + kTtlSlack);
  at(1s - 1us);
  EXPECT_EQ(fw.peek("u").remaining, 4);
  EXPECT_EQ(store->size(), 1u);
  at(1s + kTtlSlack);
  EXPECT_EQ(store->expires_at(fw.key_for("u")), std::nullopt);  // expired: as good as missing
  EXPECT_EQ(store->size(), 1u);                                   // but still held...
  EXPECT_EQ(fw.peek("u").remaining, 5);
  EXPECT_EQ(store->size(), 0u);  // ...until its key is touched
}

TEST_F(MemoryTest, BucketsDeleteTheirStateWhenBackToEmpty) {
  const auto tb = limiter.token_bucket("tb", 2, 2, 1s);
  EXPECT_TRUE(tb.consume("u").allowed);
  EXPECT_EQ(store->size(), 1u);
  EXPECT_TRUE(tb.refund("u").allowed);  // full again: token_bucket.lua DELs the key
  EXPECT_EQ(store->size(), 0u);
  const auto lb = limiter.leaky_bucket("lb", 2, Limit(1, 1s));
  EXPECT_TRUE(lb.consume("u").allowed);
  EXPECT_EQ(store->expires_at(lb.key_for("u")), kT0 + 1s + kTtlSlack);
  EXPECT_TRUE(lb.refund("u").allowed);
  EXPECT_EQ(store->size(), 0u);
}

TEST_F(MemoryTest, SweepEvictsEveryExpiredEntry) {
  const auto fw = limiter.fixed_window("fw", Limit(5, 1s));
  const auto log = limiter.sliding_log("log", Limit(5, 10s));
  for (int i = 0; i < 500; ++i) {
    EXPECT_TRUE(fw.consume("s" + std::to_string(i)).allowed);
    EXPECT_TRUE(log.consume("s" + std::to_string(i)).allowed);
  }
  EXPECT_EQ(store->size(), 1000u);
  at(1s + kTtlSlack);
  EXPECT_EQ(store->sweep(), 500u);  // the windows have ended, the logs have 9 s to go
  EXPECT_EQ(store->size(), 500u);
  at(10s + kTtlSlack);
  EXPECT_EQ(store->sweep(), 500u);
  EXPECT_EQ(store->size(), 0u);
  EXPECT_EQ(store->sweep(), 0u);
}

TEST_F(MemoryTest, IncrementalSweepEmptiesTheStoreOnceEverythingExpired) {
  // 2000 subjects, then nothing but peeks at other subjects (which store nothing): the sweep riding
  // on those operations evicts every expired entry, in every shard.
  const auto fw = limiter.fixed_window("fw", Limit(5, 1s));
  for (int i = 0; i < 2000; ++i) EXPECT_TRUE(fw.consume("old-" + std::to_string(i)).allowed);
  EXPECT_EQ(store->size(), 2000u);
  at(1s + kTtlSlack);
  int operations = 0;
  while (store->size() > 0 && operations < 100'000) {
    fw.peek("fresh-" + std::to_string(operations));
    ++operations;
  }
  EXPECT_EQ(store->size(), 0u);
  // Every operation sweeps sweep_buckets() buckets of its own shard, and every sweep_every()-th one
  // as many of the next shard in turn: with ~31 entries (at most 127 buckets) a shard, the round
  // robin alone reaches every bucket within sweep_every() * shard_count() * 127 / sweep_buckets()
  // operations (about 400 are needed in practice).
  EXPECT_LE(operations, static_cast<int>(MemoryConnection::sweep_every() * MemoryConnection::shard_count() * 127 /
                                         MemoryConnection::sweep_buckets()));
}

TEST_F(MemoryTest, MemoryStaysBoundedByTheLiveSubjects) {
  // A stream of new subjects, one every millisecond, each subject's log living 1 s: 1000 are live at
  // any time. Eviction riding on the traffic keeps what the store holds close to that.
  const auto log = limiter.sliding_log("log", Limit(5, 1s));
  std::size_t most = 0;
  for (int i = 0; i < 100'000; ++i) {
    clock->advance(1ms);
    EXPECT_TRUE(log.consume("subject-" + std::to_string(i)).allowed);
    if (i > 2000) most = std::max(most, store->size());
  }
  EXPECT_GE(most, 1000u);
  EXPECT_LE(most, 1300u) << "expired entries pile up";
  // The same with fixed windows, whose 1000 states all expire together at each window's end.
  const auto fw = limiter.fixed_window("fw", Limit(5, 1s));
  most = 0;
  for (int i = 0; i < 100'000; ++i) {
    clock->advance(1ms);
    EXPECT_TRUE(fw.consume("subject-" + std::to_string(i)).allowed);
    if (i > 2000) most = std::max(most, store->size());
  }
  EXPECT_GE(most, 999u);
  EXPECT_LE(most, 1500u) << "expired entries pile up";
}

TEST_F(MemoryTest, StateAndBlockMarkerShareAShard) {
  const auto pol = limiter.policy("api", redlimit::parse_limits("1/s"));
  for (const char* subject : {"a", "b", "{weird}", "x:y|z", "%"}) {
    EXPECT_EQ(MemoryConnection::shard_of(pol.key_for(subject)), MemoryConnection::shard_of(pol.block_key_for(subject)))
        << subject;
  }
  // Keys spread over the shards.
  std::vector<int> used(MemoryConnection::shard_count(), 0);
  for (int i = 0; i < 1000; ++i) ++used[MemoryConnection::shard_of(pol.key_for("s" + std::to_string(i)))];
  for (std::size_t s = 0; s < used.size(); ++s) EXPECT_GT(used[s], 0) << "shard " << s << " never used";
}

// --- thread safety ----------------------------------------------------------------------------

struct Consumer {
  std::string name;
  std::function<Decision(const std::string&)> consume;
};

std::vector<Consumer> all_strategies(const RateLimiter& l) {
  const auto fw = l.fixed_window("t.fw", Limit(100, 1h));
  const auto log = l.sliding_log("t.sl", Limit(100, 1h));
  const auto sw = l.sliding_window("t.sw", Limit(100, 1h), 1min);
  const auto tb = l.token_bucket("t.tb", 100, 1, 1h);
  const auto lm = l.leaky_bucket("t.lm", 100, Limit(1, 1h), LeakyMode::meter);
  const auto ls = l.leaky_bucket("t.ls", 100, Limit(1, 1h), LeakyMode::shaper);
  const auto pol = l.policy("t.pol", redlimit::parse_limits("100/h; 150/d"));
  return {
      {"fixed_window", [fw](const std::string& s) { return fw.consume(s); }},
      {"sliding_log", [log](const std::string& s) { return log.consume(s); }},
      {"sliding_window", [sw](const std::string& s) { return sw.consume(s); }},
      {"token_bucket", [tb](const std::string& s) { return tb.consume(s); }},
      {"leaky_meter", [lm](const std::string& s) { return lm.consume(s); }},
      {"leaky_shaper", [ls](const std::string& s) { return ls.consume(s); }},
      {"policy", [pol](const std::string& s) { return pol.consume(s); }},
  };
}

TEST_F(MemoryTest, EightThreadsOnOneSubjectAdmitExactlyTheLimit) {
  for (const Consumer& c : all_strategies(limiter)) {
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 1000; ++i) {
          if (c.consume("shared").allowed) ++admitted;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(admitted.load(), 100) << c.name;
  }
}

TEST_F(MemoryTest, ManySubjectsInParallel) {
  // 8 threads, 200 subjects, 7 strategies: every thread hits every (strategy, subject) pair 15 times,
  // each from its own starting point, all racing across shards: 120 attempts per pair against a
  // limit of 100.
  const auto strategies = all_strategies(limiter);
  std::vector<std::string> subjects;
  for (int i = 0; i < 200; ++i) subjects.push_back("subject-" + std::to_string(i));
  std::vector<std::vector<std::atomic<int>>> admitted(strategies.size());
  for (auto& v : admitted) v = std::vector<std::atomic<int>>(subjects.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 15; ++round) {
        for (std::size_t k = 0; k < subjects.size(); ++k) {
          const std::size_t s = (k + t * 25) % subjects.size();
          for (std::size_t w = 0; w < strategies.size(); ++w) {
            if (strategies[w].consume(subjects[s]).allowed) ++admitted[w][s];
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (std::size_t w = 0; w < strategies.size(); ++w) {
    for (std::size_t s = 0; s < subjects.size(); ++s) {
      EXPECT_EQ(admitted[w][s].load(), 100) << strategies[w].name << " " << subjects[s];
    }
  }
  EXPECT_EQ(store->size(), strategies.size() * subjects.size());
}

// --- the commands it answers ------------------------------------------------------------------

Argv eval_argv(const std::string& verb, const std::string& script, const Argv& rest) {
  Argv argv{verb, script, "2", "redlimit:{r|u}:fw", "redlimit:{r|u}:blk"};
  argv.insert(argv.end(), rest.begin(), rest.end());
  return argv;
}

TEST_F(MemoryTest, AnswersOnlyWhatTheStrategiesSend) {
  Reply r = store->command({"GET", "k"});
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(r.str.rfind("ERR unknown command", 0), 0u) << r.str;
  r = store->command({"FLUSHALL"});
  EXPECT_TRUE(r.is_error());
  r = store->command({});
  EXPECT_TRUE(r.is_error());
  r = store->command({"PING"});
  EXPECT_EQ(r.type, Reply::Type::status);
  EXPECT_EQ(r.str, "PONG");
  EXPECT_TRUE(store->thread_safe());
  r = store->command({"SET", "k", "v"});
  EXPECT_EQ(r.type, Reply::Type::status);
  EXPECT_EQ(store->size(), 1u);
}

// --- batches: one script run ---------------------------------------------------------------------

// A clock that moves a second every time it is read.
class TickingClock final : public redlimit::Clock {
 public:
  redlimit::Micros now() const override { return kT0 + Micros{1'000'000 * ticks_++}; }
  void sleep_for(redlimit::Micros) override {}

 private:
  mutable std::int64_t ticks_ = 0;
};

Argv batch_argv(const std::string& sha, const std::string& now, const std::vector<std::string>& subjects,
                const Argv& params, const std::vector<std::string>& costs) {
  Argv argv{"EVALSHA", sha, std::to_string(2 * subjects.size())};
  for (const auto& s : subjects) {
    argv.push_back("redlimit:{r|" + s + "}:st");
    argv.push_back("redlimit:{r|" + s + "}:blk");
  }
  argv.insert(argv.end(), {now, costs.front(), "1"});
  argv.insert(argv.end(), params.begin(), params.end());
  argv.insert(argv.end(), costs.begin() + 1, costs.end());
  return argv;
}

std::vector<std::int64_t> allowed_of(const Reply& r, std::size_t width) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < r.elements.size(); i += width) out.push_back(r.elements[i].integer);
  return out;
}

TEST(MemoryBatch, ReadsRedisTimeOnceForTheWholeBatch) {
  // 2 per 1 s window, three requests: at one instant the third is rejected. Reading the clock per
  // request (a second later each time) would put each request in a window of its own.
  MemoryConnection store(std::make_shared<TickingClock>());
  const Reply r = store.command(batch_argv(scripts::fixed_window().sha1, "redis", {"u", "u", "u"}, {"2", "1000000"},
                                           {"1", "1", "1"}));
  ASSERT_EQ(r.type, Reply::Type::array) << r.str;
  EXPECT_EQ(allowed_of(r, 5), (std::vector<std::int64_t>{1, 1, 0}));
}

TEST_F(MemoryTest, ALaterRequestSeesTheWritesOfEarlierOnes) {
  const std::string now = std::to_string(kT0.count());
  const Reply r = store->command(batch_argv(scripts::token_bucket().sha1, now, {"a", "b", "a", "a", "a"},
                                            {"3", "1", "1"}, {"2", "3", "1", "1", "1"}));
  ASSERT_EQ(r.type, Reply::Type::array) << r.str;
  EXPECT_EQ(allowed_of(r, 5), (std::vector<std::int64_t>{1, 1, 1, 0, 0}));
  EXPECT_EQ(r.elements[5 * 2 + 1].integer, 0) << "a's bucket is empty after 2 + 1";
}

TEST_F(MemoryTest, AFailedBatchWritesNoStringState) {
  // The third request's cost is not a number: the script fails in decide(), and the epilogue, which
  // writes string states only after every request, has written nothing.
  const std::string now = std::to_string(kT0.count());
  const Reply r = store->command(batch_argv(scripts::fixed_window().sha1, now, {"a", "b", "c"}, {"5", "1000000"},
                                            {"1", "2", "x"}));
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(store->size(), 0u);
}

TEST_F(MemoryTest, AFailedBatchKeepsTheWritesOfASortedSetBeforeIt) {
  // Redis does not roll a script back: sliding_log.lua's decide() writes as it goes, so the
  // requests before the failure stay recorded there, and here.
  store->command({"SET", "redlimit:{r|b}:st", "not a sorted set"});
  const std::string now = std::to_string(kT0.count());
  const Reply r = store->command(batch_argv(scripts::sliding_log().sha1, now, {"a", "b", "c"}, {"5", "1000000"},
                                            {"1", "1", "1"}));
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(r.str.rfind("WRONGTYPE", 0), 0u) << r.str;
  EXPECT_EQ(store->size(), 2u) << "a's log and b's string; nothing for c";
}

TEST_F(MemoryTest, EvalshaKnowsTheScriptsBySha1AndEvalBySource) {
  const Argv args{std::to_string((kT0 + 250ms).count()), "1", "1", "3", "1000000"};
  Reply r = store->command(eval_argv("EVALSHA", scripts::fixed_window().sha1, args));
  ASSERT_EQ(r.type, Reply::Type::array) << r.str;
  ASSERT_EQ(r.elements.size(), 5u);
  EXPECT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[1].integer, 2);
  EXPECT_EQ(r.elements[3].integer, 750'000);

  r = store->command(eval_argv("EVALSHA", std::string(40, 'a'), args));
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(r.str.rfind("NOSCRIPT", 0), 0u) << r.str;

  r = store->command(eval_argv("eval", std::string(scripts::fixed_window().source), args));
  ASSERT_EQ(r.type, Reply::Type::array) << r.str;
  EXPECT_EQ(r.elements[1].integer, 1);  // the same state: the second unit

  r = store->command(eval_argv("EVAL", "return 1", args));
  EXPECT_TRUE(r.is_error());

  // Malformed calls answer errors, as Redis does.
  EXPECT_TRUE(store->command({"EVALSHA", scripts::fixed_window().sha1}).is_error());
  EXPECT_TRUE(store->command({"EVALSHA", scripts::fixed_window().sha1, "x"}).is_error());
  EXPECT_TRUE(store->command({"EVALSHA", scripts::fixed_window().sha1, "3", "a", "b"}).is_error());
  EXPECT_TRUE(store->command({"EVALSHA", scripts::fixed_window().sha1, "1", "a", "1", "1"}).is_error());
  r = store->command({"EVALSHA", scripts::fixed_window().sha1, "2", "a", "b", "now", "1", "1", "x", "1"});
  EXPECT_TRUE(r.is_error()) << "a limit that is not a number is a Lua error";

  // DEL counts the keys that existed.
  r = store->command({"DEL", "redlimit:{r|u}:fw", "redlimit:{r|u}:blk", "nope"});
  ASSERT_EQ(r.type, Reply::Type::integer);
  EXPECT_EQ(r.integer, 1);
  EXPECT_EQ(store->size(), 0u);
}

TEST_F(MemoryTest, AKeyHoldingAnotherKindOfStateReadsAsRedisReadsIt) {
  // Strategies never share keys (each key names its kind); a hand-made call that crosses them gets
  // what Redis gives. The string states are all pack2(time, quantity): a token bucket reads a fixed
  // window's (start, used) as (at, level).
  const Argv fw_args{std::to_string(kT0.count()), "1", "1", "3", "1000000"};
  ASSERT_EQ(store->command(eval_argv("EVALSHA", scripts::fixed_window().sha1, fw_args)).type, Reply::Type::array);
  const Argv tb_args{std::to_string(kT0.count()), "1", "1", "3", "1", "1"};
  Reply r = store->command(eval_argv("EVALSHA", scripts::token_bucket().sha1, tb_args));
  ASSERT_EQ(r.type, Reply::Type::array) << r.str;
  EXPECT_EQ(r.elements[1].integer, 0) << "a level of 1 unit, 1 taken";
  // A string read as a hash, or a hash read as a sorted set, is WRONGTYPE, as on Redis.
  const Argv policy_args{std::to_string(kT0.count()), "1", "1", "1", "3/s", "3", "1000000", "1000000"};
  r = store->command(eval_argv("EVALSHA", scripts::policy().sha1, policy_args));
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(r.str.rfind("WRONGTYPE", 0), 0u) << r.str;
  store->command({"DEL", "redlimit:{r|u}:fw"});
  ASSERT_EQ(store->command(eval_argv("EVALSHA", scripts::policy().sha1, policy_args)).type, Reply::Type::array);
  const Argv log_args{std::to_string(kT0.count()), "1", "1", "3", "1000000"};
  r = store->command(eval_argv("EVALSHA", scripts::sliding_log().sha1, log_args));
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(r.str.rfind("WRONGTYPE", 0), 0u) << r.str;
}

// A transport that has never seen the scripts: every EVALSHA names an unknown SHA1, so each call
// goes through the NOSCRIPT -> EVAL path of run_script.
class ForgetfulConnection final : public redlimit::Connection {
 public:
  explicit ForgetfulConnection(std::shared_ptr<MemoryConnection> inner) : inner_(std::move(inner)) {}
  bool thread_safe() const override { return true; }
  Reply command(const std::vector<std::string>& argv) override {
    if (!argv.empty() && argv[0] == "EVALSHA") {
      Argv changed = argv;
      changed[1] = std::string(40, '0');
      ++evalsha;
      return inner_->command(changed);
    }
    if (!argv.empty() && argv[0] == "EVAL") ++eval;
    return inner_->command(argv);
  }
  int evalsha = 0;
  int eval = 0;

 private:
  std::shared_ptr<MemoryConnection> inner_;
};

TEST_F(MemoryTest, TheEvalFallbackDecidesTheSame) {
  auto forgetful = std::make_shared<ForgetfulConnection>(std::make_shared<MemoryConnection>(clock));
  const RateLimiter other(forgetful, options());
  const auto a = limiter.policy("p", redlimit::parse_limits("2/s; 3/min"));
  const auto b = other.policy("p", redlimit::parse_limits("2/s; 3/min"));
  for (int i = 0; i < 8; ++i) {
    clock->advance(300ms);
    const Decision x = a.consume("u");
    const Decision y = b.consume("u");
    EXPECT_EQ(show(x), show(y)) << i;
  }
  EXPECT_EQ(forgetful->evalsha, 8);
  EXPECT_EQ(forgetful->eval, 8);
}

// --- the sorted set keeps Redis's order --------------------------------------------------------

TEST(MemoryScripts, UnitLogOrdersTiesByMemberBytesAsRedisDoes) {
  redlimit::detail::memory::UnitLog log;
  for (std::int64_t seq = 1; seq <= 11; ++seq) EXPECT_TRUE(log.add_nx(5, seq));
  EXPECT_FALSE(log.add_nx(5, 10));  // "5:10" exists: ZADD NX adds nothing
  EXPECT_TRUE(log.add_nx(4, 99));
  std::vector<std::int64_t> order;
  for (const auto& u : log.units()) order.push_back(u.seq);
  // Score 4 first; then "5:1" < "5:10" < "5:11" < "5:2" < ... < "5:9".
  EXPECT_EQ(order, (std::vector<std::int64_t>{99, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9}));
  log.pop_max(2);  // ZPOPMAX 2 pops "5:9" and "5:8"
  EXPECT_EQ(log.size(), 10u);
  EXPECT_EQ(log.count_after(4), 9u);
  EXPECT_EQ(log.rev_score(0), 5);
  EXPECT_EQ(log.rev_score(-1), 4);  // negative ranks count from the oldest, as in ZREVRANGE
  EXPECT_EQ(log.rev_score(10), std::nullopt);
  log.remove_through(4);
  EXPECT_EQ(log.size(), 9u);
  EXPECT_TRUE(log.add_nx(5, 9));  // popped, so free again
}

}  // namespace
