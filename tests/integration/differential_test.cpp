// The memory backend against Redis: random traces replayed on one ManualClock against a Redis
// limiter and RateLimiter::in_memory() must give identical decisions, field by field, for every
// strategy and for policies: single calls (MemoryBackendDecidesExactlyAsRedis) and consume_many
// batches (BatchesDecideExactlyAsRedis). tests/golden/ holds fixed traces of the same kind that the
// unit suite replays without a server.
//
// Seed: REDLIMIT_DIFF_SEED=<n> replays a run (each strategy's trace uses seed + its index); steps per
// strategy: REDLIMIT_DIFF_STEPS (default 10000; the floors on what a trace covers apply at that
// length or more). Every failure message names the seed.
//
// Redis keeps TTLs in real milliseconds while the ManualClock jumps: a key given a 1 ms TTL just
// before a window edge would expire on the server while the trace still sits before that edge (and
// Redis 7.0 sometimes deletes a key at once when a script gives it a 1 ms TTL). So the Redis side
// runs each script's exact source inside a wrapper whose `redis` shadows two commands: the TTLs of
// PEXPIRE and PSETEX are recorded instead of applied. Nothing ever expires on the server: stale
// state stays there and must answer exactly what the memory backend's evicted (missing) state
// answers, and the recorded TTLs must be exactly the deadlines the memory backend set.
#include "integration/differential_fixture.hpp"

namespace redlimit_test {
namespace {

// One scenario read top to bottom (when, what, run on both, compare, bookkeeping): kept as one
// function on purpose, so that a failing step can be followed in order with the seed.
TEST_P(DifferentialTest, MemoryBackendDecidesExactlyAsRedis) {
  const Config config = configs()[GetParam()];
  const std::uint64_t seed = base_seed() + GetParam();
  const int steps = steps_per_strategy();
  SCOPED_TRACE("differential " + config.name + ": replay with REDLIMIT_DIFF_SEED=" + std::to_string(base_seed()) +
               " (this strategy's trace seed " + std::to_string(seed) + ")");
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  auto chance = [&rng](double p) { return std::bernoulli_distribution(p)(rng); };

  // One clock for all three limiters: Redis (through RecordingRedis), in_memory(), and a
  // MemoryConnection we can inspect.
  redlimit::Options opts = options();
  opts.sliding_log_members = config.members;
  auto redis_conn = std::make_shared<RecordingRedis>(server().url());
  const redlimit::RateLimiter redis_limiter(redis_conn, opts);
  const redlimit::RateLimiter memory_limiter = redlimit::RateLimiter::in_memory(opts);
  auto store = std::make_shared<redlimit::MemoryConnection>(clock);
  const redlimit::RateLimiter inspected_limiter(store, opts);
  const Target redis = config.make(redis_limiter);
  const Target memory = config.make(memory_limiter);
  const Target inspected = config.make(inspected_limiter);

  const std::vector<std::string> subjects{"alice", "bob", "carol", "dave", "eve"};
  clock->set(kT0 + Micros{uniform(0, 3'600'000'000)});  // not aligned to anything in particular

  // Instants worth landing on: now + retry_after / reset_after / delay of earlier decisions.
  std::deque<std::pair<Micros, std::size_t>> instants;
  std::deque<std::string> history;  // the last steps, for failure messages
  std::map<std::string, int> stats;
  std::vector<int> decided_by(config.limits, 0);
  // The trace runs in regimes of a few hundred steps, each at the time scale S of one of the
  // config's windows, so that every limit (a second, a minute, an hour) gets to bind in turn.
  Micros scale = config.edges.front();
  int regime_left = 0;
  std::size_t burst_left = 0;
  std::size_t burst_subject = 0;
  std::int64_t burst_gap = 0;  // 0: a tight burst (0..3 us apart); else the largest gap in a paced one
  auto pick = [&](auto& container) -> auto& {
    return container[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(container.size()) - 1))];
  };

  for (int step = 0; step < steps; ++step) {
    const Micros now0 = clock->now();
    if (regime_left-- <= 0) {
      regime_left = static_cast<int>(uniform(100, 400));
      scale = pick(config.edges);
    }
    const std::int64_t S = scale.count();
    // --- when
    std::size_t subject = static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(subjects.size()) - 1));
    if (burst_left > 0) {
      // A burst: one subject, many requests, either microseconds apart or paced across about S.
      --burst_left;
      subject = burst_subject;
      clock->advance(Micros{burst_gap == 0 ? uniform(0, 3) : uniform(0, burst_gap)});
      ++stats["burst step"];
    } else {
      const double r = std::uniform_real_distribution<double>(0, 1)(rng);
      if (r < 0.15) {
        ++stats["zero gap"];
      } else if (r < 0.55) {
        clock->advance(Micros{uniform(1, std::max<std::int64_t>(1, S / 50))});
      } else if (r < 0.63) {
        clock->advance(Micros{uniform(0, S / 5)});
      } else if (r < 0.65) {
        // Past S, and half the time past a bucket's lease too: its key lives up to two of the
        // lease's periods (of at least 2^20 us) past what its state needs (helpers.lua, bucket_ttl).
        clock->advance(Micros{uniform(S, 2 * S) + (chance(0.5) ? 2 * (std::int64_t{1} << 20) : 0)});
      } else if (r < 0.80) {
        // On, or 1 us around, the next edge of a window or bucket no longer than S.
        std::vector<Micros> periods;
        for (const Micros e : config.edges) {
          if (e <= scale) periods.push_back(e);
        }
        const std::int64_t p = pick(periods).count();
        const std::int64_t edge = (now0.count() / p + 1) * p + uniform(-1, 1);
        if (edge >= now0.count()) clock->set(Micros{edge});
        ++stats["edge jump"];
      } else if (r < 0.97) {
        // On, or 1 us around, an instant an earlier decision named (within 2 S, mostly).
        std::vector<std::pair<Micros, std::size_t>> near;
        for (const auto& i : instants) {
          if (i.first >= now0 && (i.first - now0 <= 2 * scale || chance(0.05))) near.push_back(i);
        }
        if (!near.empty()) {
          const auto& [when, whose] = pick(near);
          const Micros target_time = when + Micros{uniform(-1, 1)};
          if (target_time >= now0) clock->set(target_time);
          subject = whose;
          ++stats["instant jump"];
        }
      } else {
        burst_left = static_cast<std::size_t>(uniform(5, 40));
        burst_subject = subject;
        burst_gap = chance(0.4) ? 0 : std::max<std::int64_t>(1, 2 * S / static_cast<std::int64_t>(burst_left));
        ++stats[burst_gap == 0 ? "tight burst" : "paced burst"];
      }
    }
    const std::string& who = subjects[subject];
    const Micros now = clock->now();

    // --- what
    const double r = std::uniform_real_distribution<double>(0, 1)(rng);
    Op op = Op::consume;
    if (burst_left > 0) {
      op = chance(0.9) ? Op::consume : Op::peek;
    } else if (r < 0.62) {
      op = Op::consume;
    } else if (r < 0.78) {
      op = Op::peek;
    } else if (r < 0.90) {
      op = Op::refund;
    } else if (r < 0.94) {
      op = Op::acquire;
    } else if (r < 0.97) {
      op = Op::block;
    } else {
      op = Op::reset;
    }
    std::int64_t cost = 1;
    const double rc = std::uniform_real_distribution<double>(0, 1)(rng);
    if (rc < 0.25) cost = uniform(1, std::min<std::int64_t>(3, config.max_cost));
    else if (rc < 0.35) cost = uniform(1, config.max_cost);
    Micros arg{0};
    if (op == Op::block) arg = Micros{chance(0.5) ? uniform(1, 5) : uniform(1, 2 * S)};
    if (op == Op::acquire) arg = Micros{chance(0.2) ? 0 : uniform(0, 2 * S)};

    std::ostringstream what;
    what << "step " << step << " at T0+" << (now - kT0).count() << "us (+" << (now - now0).count() << "us): "
         << op_name(op) << "(" << who;
    if (op != Op::reset && op != Op::block) what << ", cost " << cost;
    if (op == Op::block) what << ", " << arg.count() << "us";
    if (op == Op::acquire) what << ", max_wait " << arg.count() << "us";
    what << ")";

    // The memory deadlines before the call: a script that sets no TTL must leave them alone.
    const std::string state_key = redis.key_for(who);
    const std::string block_key = redis.block_key_for(who);
    const std::optional<Micros> state_before = store->expires_at(state_key);
    const std::optional<Micros> block_before = store->expires_at(block_key);

    auto run = [&](const Target& t) {
      switch (op) {
        case Op::consume: return t.consume(who, cost);
        case Op::peek: return t.peek(who, cost);
        case Op::refund: return t.refund(who, cost);
        case Op::acquire: return t.acquire(who, cost, arg);
        case Op::block: return t.block(who, arg);
        case Op::reset: t.reset(who); return Decision{};
      }
      return Decision{};
    };
    redis_conn->last = {};
    const Outcome from_redis = outcome(*clock, [&] { return run(redis); });
    const RecordingRedis::Ttls ttls = redis_conn->last;
    clock->set(now);  // acquire sleeps on the clock: replay it from the same instant
    const Outcome from_memory = outcome(*clock, [&] { return run(memory); });
    clock->set(now);
    const Outcome from_inspected = outcome(*clock, [&] { return run(inspected); });

    history.push_back(what.str() + " -> " + describe(from_redis));
    if (history.size() > 12) history.pop_front();
    auto context = [&] {
      std::string s = "\nlast steps (Redis's answers):";
      for (const auto& h : history) s += "\n  " + h;
      return s + "\nin_memory() answered: " + describe(from_memory) +
             "\nthe inspected MemoryConnection answered: " + describe(from_inspected) + "\n";
    };

    for (const Outcome* mine : {&from_memory, &from_inspected}) {
      ASSERT_EQ(from_redis.error, mine->error) << context();
      ASSERT_EQ(from_redis.clock_after, mine->clock_after) << "acquire slept differently" << context();
      if (!from_redis.decision) continue;
      const Decision& a = *from_redis.decision;
      const Decision& b = *mine->decision;
      EXPECT_EQ(a.allowed, b.allowed) << context();
      EXPECT_EQ(a.limit, b.limit) << context();
      EXPECT_EQ(a.remaining, b.remaining) << context();
      EXPECT_EQ(a.retry_after, b.retry_after) << context();
      EXPECT_EQ(a.reset_after, b.reset_after) << context();
      EXPECT_EQ(a.delay, b.delay) << context();
      EXPECT_EQ(a.limit_index, b.limit_index) << context();
      EXPECT_EQ(static_cast<int>(a.source), static_cast<int>(b.source)) << context();
      EXPECT_EQ(a.shadow_rejected, b.shadow_rejected) << context();
      ASSERT_EQ(a.limits.size(), b.limits.size()) << context();
      for (std::size_t i = 0; i < a.limits.size(); ++i) {  // each limit's own state (policies)
        EXPECT_EQ(a.limits[i].remaining, b.limits[i].remaining) << "limit " << i << context();
        EXPECT_EQ(a.limits[i].reset_after, b.limits[i].reset_after) << "limit " << i << context();
      }
    }

    // The TTLs: the memory backend sets a deadline exactly where the script set a TTL.
    if (ttls.valid && op != Op::acquire && op != Op::reset) {
      const std::int64_t recorded[] = {ttls.state_ttl_ms, ttls.block_ttl_ms};
      const std::optional<Micros> before[] = {state_before, block_before};
      const std::string* keys[] = {&state_key, &block_key};
      for (int i = 0; i < 2; ++i) {
        const std::optional<Micros> mem = store->expires_at(*keys[i]);
        if (recorded[i] == -2) {
          EXPECT_FALSE(mem.has_value()) << *keys[i] << " is gone on Redis but not in memory" << context();
        } else if (recorded[i] >= 0) {
          ++stats["ttl compared"];
          ASSERT_TRUE(mem.has_value()) << *keys[i] << " got a TTL on Redis but has no entry in memory" << context();
          EXPECT_EQ(*mem - now, Micros{recorded[i] * 1000})
              << *keys[i] << ": the script set a TTL of " << recorded[i] << " ms" << context();
        } else if (mem.has_value()) {
          // The script set no TTL: the deadline must be the one from before.
          EXPECT_EQ(mem, before[i]) << *keys[i] << ": memory deadline moved without a PEXPIRE" << context();
        } else if (i == 0) {
          // Redis still holds state the memory backend has expired: stale state answered like none.
          ++stats["stale on Redis, expired in memory"];
        }
      }
    }
    if (HasFailure()) break;

    // Bookkeeping for later jumps and the coverage checks.
    clock->set(from_redis.clock_after);
    if (from_redis.decision && op != Op::reset) {
      const Decision& d = *from_redis.decision;
      const Micros t = clock->now();
      for (const Micros dt : {d.retry_after, d.reset_after, d.delay}) {
        if (dt.count() > 0) instants.emplace_back(t + dt, subject);
      }
      while (instants.size() > 64) instants.pop_front();
      if (op == Op::consume) {
        ++stats[d.allowed ? "consume admitted" : "consume rejected"];
        if (!d.allowed && d.limit_index < decided_by.size()) ++decided_by[d.limit_index];
        if (d.allowed && d.delay.count() > 0) ++stats["delayed admission"];
        if (!d.allowed && d.remaining > 0) ++stats["rejected with quota left"];
      }
      if (op == Op::peek) ++stats[d.allowed ? "peek allowed" : "peek refused"];
      if (op == Op::refund) ++stats["refund"];
    }
  }

  std::ostringstream summary;
  for (const auto& [k, v] : stats) summary << k << "=" << v << " ";
  for (std::size_t i = 0; i < decided_by.size(); ++i) summary << "rejections decided by limit " << i << "=" << decided_by[i] << " ";
  std::cout << "[ differential ] " << config.name << " seed " << seed << ": " << summary.str() << "\n";
  if (HasFailure()) return;
  // The trace must have exercised both answers, the edges and the TTLs, or it proves little. These
  // floors are the generator's, checked at its default length: a shorter replay (the sanitizer
  // passes run 2,000 steps) still compares every step, but holds too few of the rarer kinds for a
  // floor (one run: 9 refused peeks in 2,000 steps, against a floor of 10).
  if (steps < kDefaultDiffSteps) return;
  EXPECT_GE(stats["consume admitted"], steps / 20) << summary.str();
  EXPECT_GE(stats["consume rejected"], steps / 50) << summary.str();
  // The lazily trimmed log refuses fewest: 47 to 102 refused peeks in 22 runs of 10,000 steps (47
  // failed a floor of steps / 200 in one CI run).
  EXPECT_GE(stats["peek refused"], steps / 400) << summary.str();
  EXPECT_GE(stats["edge jump"], steps / 20) << summary.str();
  EXPECT_GE(stats["instant jump"], steps / 20) << summary.str();
  EXPECT_GE(stats["tight burst"] + stats["paced burst"], steps / 200) << summary.str();
  EXPECT_GE(stats["ttl compared"], steps / 20) << summary.str();
  // Rarer since TTLs carry a second's margin (prologue.lua): 130 to 750 in 10,000 steps.
  EXPECT_GE(stats["stale on Redis, expired in memory"], steps / 200) << summary.str();
  for (std::size_t i = 0; i < decided_by.size(); ++i) {
    EXPECT_GT(decided_by[i], 0) << "no rejection was decided by limit " << i << ": " << summary.str();
  }
  if (config.name == "leaky_bucket_shaper") {
    EXPECT_GT(stats["delayed admission"], steps / 50) << summary.str();
  }
}


INSTANTIATE_TEST_SUITE_P(AllStrategies, DifferentialTest, ::testing::Range<std::size_t>(0, configs().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& param) { return configs()[param.param].name; });

}  // namespace
}  // namespace redlimit_test
