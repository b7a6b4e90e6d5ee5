// The in-memory backend's store: expiry on the limiter's clock, eviction keeping the store bounded by
// the live subjects, and thread safety (fixture: memory_fixture.hpp).
#include "unit/memory_fixture.hpp"

namespace {

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
  // A bucket's key lives to the end of the period after its lease's (helpers.lua, bucket_ttl):
  // periods of 2^20 us, the shortest, for a bucket that drains in 1 s; TTLs are whole milliseconds.
  const Micros period{std::int64_t{1} << 20};
  const Micros lease_end = (kT0 / period + 2) * period;
  EXPECT_EQ(store->expires_at(lb.key_for("u")), kT0 + std::chrono::ceil<std::chrono::milliseconds>(lease_end - kT0) + kTtlSlack);
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
  // A stream of new subjects, one every millisecond, each subject's log mattering 1 s and kept 1 s
  // more (the TTL margin, prologue.lua): 2000 are held at any time. Eviction riding on the traffic
  // keeps what the store holds close to that.
  const auto log = limiter.sliding_log("log", Limit(5, 1s));
  std::size_t most = 0;
  for (int i = 0; i < 100'000; ++i) {
    clock->advance(1ms);
    EXPECT_TRUE(log.consume("subject-" + std::to_string(i)).allowed);
    if (i > 2000) most = std::max(most, store->size());
  }
  EXPECT_GE(most, 2000u);
  EXPECT_LE(most, 2300u) << "expired entries pile up";
  // The same with fixed windows, whose 1000 states all expire together a second after their
  // window's end.
  const auto fw = limiter.fixed_window("fw", Limit(5, 1s));
  most = 0;
  for (int i = 0; i < 100'000; ++i) {
    clock->advance(1ms);
    EXPECT_TRUE(fw.consume("subject-" + std::to_string(i)).allowed);
    if (i > 2000) most = std::max(most, store->size());
  }
  EXPECT_GE(most, 1999u);
  EXPECT_LE(most, 2500u) << "expired entries pile up";
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

}  // namespace
