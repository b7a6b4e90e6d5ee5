// The load driver's other suites: memory per subject, growth with the number of subjects, and a
// flooded sliding log.
#include "bench_common.hpp"

#include <atomic>
#include <random>
#include <thread>

namespace redlimit_bench {

// ---------------------------------------------------------------------------------------------
// Memory per subject: MEMORY USAGE of a subject's key after one decision, over 100 subjects decided
// one after the other (mean and largest: Redis's allocation for a value can depend on the commands
// scripts ran before, see docs/performance.md), and the sliding log at its full limit.

void suite_memory(const Config& c, Admin& admin) {
  auto limiter = connect(c, 1);
  const std::string subject = "u0000001";
  for (const auto& spec : all_specs()) {
    if (!wanted(c.strategies, spec.id)) continue;
    admin.flushall();
    auto s = spec.make(limiter, "api");
    constexpr int kSubjects = 100;
    long long total = 0;
    long long largest = 0;
    for (int i = 1; i <= kSubjects; ++i) {
      const std::string other = fmt::format("u{:07d}", i);  // u0000001 is `subject`
      s->consume(other);
      const long long b = admin.memory_usage(s->key_for(other));
      total += b;
      largest = std::max(largest, b);
    }
    const std::string key = s->key_for(subject);
    const auto emit = [&](const std::string& state, long long units) {
      Json j;
      j.str("suite", "memory")
          .str("strategy", spec.id)
          .str("label", spec.label)
          .str("state", state)
          .integer("units", units)
          .str("key", key)
          .integer("bytes", admin.memory_usage(key))
          .integer("keys", admin.dbsize());
      if (state == "one decision") {
        j.num("bytes_mean", static_cast<double>(total) / kSubjects).integer("bytes_max", largest).integer("subjects", kSubjects);
      }
      j.emit();
    };
    emit("one decision", 1);
    if (spec.id == "sliding_log") {
      std::vector<redlimit::Request> reqs(999, redlimit::Request{subject, 1});
      long long allowed = 0;
      for (const auto& d : s->consume_many(reqs)) allowed += d.allowed;
      emit("full limit", 1 + allowed);
    }
  }
  admin.flushall();
}

// ---------------------------------------------------------------------------------------------
// Growth: 1 -> 1,000 -> 100,000 -> 1,000,000 distinct subjects per strategy, each at 1000 per day
// (so that no subject's state expires during the run). Subjects are filled with consume_many batches
// of 128; at each size: the fill rate, Redis used_memory per subject, and decisions per second (one
// connection, sequential; and batches of 128) on random existing subjects.

// Long on purpose: one measurement loop over sizes and strategies with its time budget, read in order.
void suite_growth(const Config& c, Admin& admin) {
  auto limiter = connect(c, 1);
  const auto suite_start = Clock::now();
  std::mt19937_64 rng(42);
  std::vector<Spec> specs;
  for (const auto& s : all_specs(std::chrono::hours(24))) {
    if (wanted(c.strategies, s.id)) specs.push_back(s);
  }
  // Split the budget evenly: a strategy that finishes early leaves its time to the next ones.
  for (std::size_t si = 0; si < specs.size(); ++si) {
    const Spec& spec = specs[si];
    const double elapsed_suite = std::chrono::duration<double>(Clock::now() - suite_start).count();
    const double budget = (c.growth_budget - elapsed_suite) / static_cast<double>(specs.size() - si);
    const auto started = Clock::now();
    admin.flushall();
    const long long base = admin.used_memory();
    auto s = spec.make(limiter, "grow");
    long filled = 0;
    double fill_rate = 0;
    for (long size : c.sizes) {
      const double spent = std::chrono::duration<double>(Clock::now() - started).count();
      const double projected = fill_rate > 0 ? static_cast<double>(size - filled) / fill_rate : 0;
      if (fill_rate > 0 && spent + projected * 1.3 + 1.0 > budget) {
        Json()
            .str("suite", "growth")
            .str("strategy", spec.id)
            .integer("subjects", size)
            .str("skipped", fmt::format("projected {:.0f} s would pass this strategy's {:.0f} s budget",
                                        projected, budget - spent))
            .emit();
        progress("growth {}: skipping {} subjects", spec.id, size);
        break;
      }
      // Fill [filled, size).
      std::vector<std::string> names;
      std::vector<redlimit::Request> reqs;
      const auto f0 = Clock::now();
      const long first = filled;
      while (filled < size) {
        const long n = std::min<long>(128, size - filled);
        names.clear();
        reqs.clear();
        for (long k = 0; k < n; ++k) names.push_back(subject_name(filled + k));
        for (const auto& nm : names) reqs.push_back({nm, 1});
        s->consume_many(reqs);
        filled += n;
      }
      const double fill_secs = std::chrono::duration<double>(Clock::now() - f0).count();
      if (filled - first >= 500) fill_rate = static_cast<double>(filled - first) / fill_secs;
      const long long used = admin.used_memory();
      const long long keys = admin.dbsize();
      // Decisions on random existing subjects: sequential, then batches of 128.
      std::uniform_int_distribution<long> pick(0, size - 1);
      const auto measure = [&](int batch) {
        long long ops = 0;
        const auto t0 = Clock::now();
        const auto deadline = t0 + std::chrono::duration<double>(std::min(0.5, c.seconds));
        std::vector<std::string> nm;
        std::vector<redlimit::Request> rq;
        while (ops < c.max_ops && Clock::now() < deadline) {
          if (batch == 0) {
            s->consume(subject_name(pick(rng)));
            ++ops;
          } else {
            nm.clear();
            rq.clear();
            for (int k = 0; k < batch; ++k) nm.push_back(subject_name(pick(rng)));
            for (const auto& x : nm) rq.push_back({x, 1});
            s->consume_many(rq);
            ops += batch;
          }
        }
        return static_cast<double>(ops) / std::chrono::duration<double>(Clock::now() - t0).count();
      };
      admin.reset_stats();
      const double seq_rate = measure(0);
      const CmdStat seq_cpu = admin.script_stats();
      const double batch_rate = measure(128);
      Json()
          .str("suite", "growth")
          .str("strategy", spec.id)
          .str("label", spec.label)
          .integer("subjects", size)
          .integer("keys", keys)
          .num("fill_rate", filled - first >= 500 ? static_cast<double>(filled - first) / fill_secs : 0)
          .num("seq_rate", seq_rate)
          .num("batch128_rate", batch_rate)
          .num("usec_per_decision", seq_cpu.calls ? static_cast<double>(seq_cpu.usec) / seq_cpu.calls : 0)
          .num("bytes_per_subject", static_cast<double>(used - base) / static_cast<double>(size))
          .integer("memory_growth", used - base)
          .integer("used_memory", used)
          .emit();
      progress("growth {} {} subjects: fill {:.0f}/s, seq {:.0f}/s, {:.0f} B/subject", spec.id, size,
               filled - first >= 500 ? (filled - first) / fill_secs : 0.0, seq_rate,
               static_cast<double>(used - base) / static_cast<double>(size));
    }
  }
  admin.flushall();
}

// ---------------------------------------------------------------------------------------------
// Flood: one subject of a sliding log (limit L per 10 minutes, so nothing leaves the window) hit
// 100 L times. Redis CPU per call in each stage: filling to the limit, then 1-2x, 2-10x, 10-100x.

void suite_flood(const Config& c, Admin& admin) {
  auto limiter = connect(c, 1);
  admin.flushall();
  const long L = c.flood_limit;
  auto s = limiter.sliding_log("flood", redlimit::Limit(L, std::chrono::minutes(10)));
  const std::string subject = "flooder";
  const std::vector<std::pair<long, long>> stages{{0, L}, {L, 2 * L}, {2 * L, 10 * L}, {10 * L, 100 * L}};
  const auto deadline = Clock::now() + 60s;
  for (const auto& [from, to] : stages) {
    admin.reset_stats();
    long sent = from;
    long long allowed = 0;
    const auto t0 = Clock::now();
    while (sent < to && Clock::now() < deadline) {
      const long n = std::min<long>(100, to - sent);
      std::vector<redlimit::Request> reqs(static_cast<std::size_t>(n), redlimit::Request{subject, 1});
      for (const auto& d : s.consume_many(reqs)) allowed += d.allowed;
      sent += n;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const CmdStat st = admin.script_stats();
    Json()
        .str("suite", "flood")
        .str("who", "redlimit sliding log")
        .integer("limit", L)
        .integer("from", from)
        .integer("to", sent)
        .integer("allowed", allowed)
        .num("rate", static_cast<double>(sent - from) / secs)
        .num("usec_per_call", sent > from ? static_cast<double>(st.usec) / static_cast<double>(sent - from) : 0)
        .integer("bytes", admin.memory_usage(s.key_for(subject)))
        .emit();
    progress("flood {}..{}: {:.2f} us/request", from, sent, sent > from ? static_cast<double>(st.usec) / static_cast<double>(sent - from) : 0);
  }
  admin.flushall();
}

// ---------------------------------------------------------------------------------------------
// Largest quotas (issue 12): each strategy at the top of the accepted range, 2^40 units per ten
// years (the sliding log also at 1M a day), its Redis CPU per call from INFO commandstats in three
// stages: requests of cost 1, one request of the whole limit followed by rejections, and (sliding
// log) rejections against a log of `entries` requests of random cost, whose wait is a binary search.
// Work must stay bounded by the requests, never the cost: the three columns stay close.

namespace {

void emit_largest(Admin& admin, const std::string& who, const char* stage, long calls, const std::string& key) {
  const CmdStat st = admin.script_stats();
  Json()
      .str("suite", "largest")
      .str("who", who)
      .str("stage", stage)
      .integer("calls", calls)
      .num("usec_per_call", calls > 0 ? static_cast<double>(st.usec) / static_cast<double>(calls) : 0)
      .integer("bytes", admin.memory_usage(key))
      .emit();
  progress("largest {} {}: {:.2f} us/call", who, stage, calls > 0 ? static_cast<double>(st.usec) / static_cast<double>(calls) : 0);
}

template <class S>
void largest_of(Admin& admin, const std::string& who, const S& s, std::int64_t limit, long calls) {
  admin.flushall();
  admin.reset_stats();
  for (long i = 0; i < calls; ++i) s.consume("u" + std::to_string(i % 100));
  emit_largest(admin, who, "cost 1", calls, s.key_for("u0"));
  admin.flushall();
  admin.reset_stats();
  s.consume("big", limit);
  for (long i = 1; i < calls; ++i) s.consume("big", 1 + i % 7);
  emit_largest(admin, who, "cost = limit, then rejected", calls, s.key_for("big"));
}

}  // namespace

void suite_largest(const Config& c, Admin& admin) {
  using redlimit::Limit;
  auto limiter = connect(c, 1);
  const bool quick = c.max_ops < 100'000;  // BENCH_QUICK runs with a small operation cap
  const long calls = quick ? 500 : 3000;
  const Limit top(Limit::max_count(), Limit::max_window());
  largest_of(admin, "fixed window 2^40/10y", limiter.fixed_window("lf", top), top.count(), calls);
  largest_of(admin, "sliding window 2^40/10y", limiter.sliding_window("ls", top), top.count(), calls);
  largest_of(admin, "sliding window 2^40/10y@/100", limiter.sliding_window("lp", top, top.window() / 100), top.count(),
             calls);
  largest_of(admin, "token bucket 2^40/10y", limiter.token_bucket("lt", top.count(), top.count(), top.window()),
             top.count(), calls);
  largest_of(admin, "leaky bucket 2^40/10y", limiter.leaky_bucket("ll", top.count(), top), top.count(), calls);
  largest_of(admin, "sliding log 2^40/10y", limiter.sliding_log("lg", top), top.count(), calls);
  const auto day = limiter.sliding_log("ld", Limit::per_day(1'000'000));
  largest_of(admin, "sliding log 1M/1d", day, 1'000'000, calls);
  // A log holding `entries` requests of random cost, then rejections that must search it.
  admin.flushall();
  const long entries = quick ? 2'000 : 20'000;
  std::mt19937_64 rng(7);
  std::vector<redlimit::Request> reqs;
  long units = 0;
  for (long i = 0; i < entries; ++i) {
    const long cost = 1 + static_cast<long>(rng() % 40);
    if (units + cost > 1'000'000) break;
    units += cost;
    reqs.push_back({"full", cost});
    if (reqs.size() == 100) {
      day.consume_many(reqs);
      reqs.clear();
    }
  }
  if (!reqs.empty()) day.consume_many(reqs);
  admin.reset_stats();
  for (long i = 0; i < calls; ++i) day.peek("full", 1'000'000 - units + 1 + static_cast<long>(rng() % 20'000));
  emit_largest(admin, "sliding log 1M/1d, " + std::to_string(entries) + " requests held", "rejected (binary search)",
               calls, day.key_for("full"));
  admin.flushall();
}

// ---------------------------------------------------------------------------------------------
// Leases (issue 14): one hot subject of a fixed window (limit far above what is offered, so every
// request is admitted), two threads for a fixed time, per request against redlimit::Leases:
// decisions a second and Redis CPU per decision (INFO commandstats over the decisions made).

namespace {

template <class Consume>
void lease_run(const Config& c, Admin& admin, const std::string& who, Consume consume) {
  admin.reset_stats();
  std::atomic<long long> decisions{0};
  const auto until = Clock::now() + std::chrono::duration<double>(std::max(1.0, c.seconds));
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < 2; ++t) {
    pool.emplace_back([&] {
      long long n = 0;
      while ((n & 63) != 0 || Clock::now() < until) {
        consume();
        ++n;
      }
      decisions += n;
    });
  }
  for (auto& th : pool) th.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const CmdStat st = admin.script_stats();
  const auto n = static_cast<double>(decisions.load());
  Json()
      .str("suite", "lease")
      .str("who", who)
      .integer("decisions", decisions.load())
      .num("rate", n / secs)
      .integer("script_calls", st.calls)
      .num("usec_per_decision", static_cast<double>(st.usec) / n)
      .emit();
  progress("lease {}: {:.0f} decisions/s, {:.3f} us of Redis CPU a decision", who, n / secs,
           static_cast<double>(st.usec) / n);
}

}  // namespace

void suite_lease(const Config& c, Admin& admin) {
  auto limiter = connect(c, 2);
  admin.flushall();
  const auto fw = limiter.fixed_window("hot", redlimit::Limit(redlimit::Limit::max_count(), std::chrono::hours(1)));
  lease_run(c, admin, "per request", [&] { fw.consume("subject"); });
  admin.flushall();
  redlimit::Leases leases(fw);
  lease_run(c, admin, "leases", [&] { leases.consume("subject"); });
  leases.close();
  admin.flushall();
}

}  // namespace redlimit_bench
