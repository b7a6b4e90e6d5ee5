// The load driver's suite "heap": what a Redis that has served sliding windows for hours costs a
// decision, against a freshly loaded library. Every bucket interval names a new bucket, which the
// policy script's parse cache keeps across calls (lua/policy.lua, parse_field); whatever the
// scripts keep lives in the Functions engine's one Lua heap, which Redis's garbage collector steps
// over on behalf of every script call. So a cache that grows with time taxes every decision of
// every strategy, not only the windows' own.
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace redlimit_bench {

namespace {

// Redis's script time per decision (INFO commandstats) of `calls` single consumes cycling over
// 2,000 subjects, 50 us apart on `clock`: the best of `reps` runs.
double script_usec(const redlimit::Strategy& s, Admin& admin, redlimit::ManualClock& clock, long calls, int reps) {
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    admin.reset_stats();
    for (long i = 0; i < calls; ++i) {
      clock.advance(std::chrono::microseconds(50));
      s.consume(subject_name(i % 2000));
    }
    const CmdStat st = admin.script_stats();
    const double per = static_cast<double>(st.usec) / static_cast<double>(st.calls > 0 ? st.calls : 1);
    if (rep == 0 || per < best) best = per;
  }
  return best;
}

}  // namespace

// For each of the fixed window, the token bucket and the 3-limit policy: the script time per
// decision on a fresh library, then after a sliding window of one-second buckets has decided
// `aged` times a second apart (as many bucket names as four and a half hours of one limiter), and
// the Functions heap each time. The keys are flushed before each measurement, so the two differ
// only by what the scripts keep. Two rounds, each from a freshly loaded library (FUNCTION FLUSH;
// the limiter loads it again at its next call), 2 runs of each measurement a round: the best of 4.
void suite_heap(const Config& c, Admin& admin) {
  const bool quick = c.max_ops < 100'000;
  const long calls = quick ? 4'000 : 20'000;
  const long aged = 16'000;  // just under the 16,384 names the parse cache once kept: its fullest
  auto clock = std::make_shared<redlimit::ManualClock>(redlimit::Micros{1'795'000'000'000'000});
  redlimit::Options o;
  o.clock = clock;
  const auto limiter = redlimit::RateLimiter::connect(url_of(c), o);
  std::vector<Spec> specs;
  for (const Spec& s : all_specs()) {
    if (s.id == "fixed_window" || s.id == "token_bucket" || s.id == "policy3") specs.push_back(s);
  }
  const auto ager =
      limiter.sliding_window("heap.ager", redlimit::Limit(1'000'000, std::chrono::seconds(2)), std::chrono::seconds(1));
  std::vector<double> fresh(specs.size(), 0), after(specs.size(), 0);
  long long heap_fresh = 0, heap_aged = 0;
  const auto measure = [&](std::vector<double>& best, bool first) {
    admin.flushall();
    for (std::size_t k = 0; k < specs.size(); ++k) {
      const double us = script_usec(*specs[k].make(limiter, "heap." + specs[k].id), admin, *clock, calls, 2);
      if (first || us < best[k]) best[k] = us;
    }
    return admin.functions_heap();
  };
  for (int round = 0; round < 2; ++round) {
    admin.cmd({"FUNCTION", "FLUSH"});
    heap_fresh = measure(fresh, round == 0);
    for (long i = 0; i < aged; ++i) {
      clock->advance(std::chrono::seconds(1));
      ager.consume("u");
    }
    heap_aged = measure(after, round == 0);
  }
  for (std::size_t k = 0; k < specs.size(); ++k) {
    Json()
        .str("suite", "heap")
        .str("strategy", specs[k].id)
        .integer("aged_bucket_names", aged)
        .num("usec_fresh", fresh[k])
        .num("usec_aged", after[k])
        .integer("heap_fresh", heap_fresh)
        .integer("heap_aged", heap_aged)
        .emit();
    progress("heap {}: {:.2f} us a decision fresh ({} B heap), {:.2f} us after {} bucket names ({} B)", specs[k].id,
             fresh[k], heap_fresh, after[k], aged, heap_aged);
  }
  admin.flushall();
}

}  // namespace redlimit_bench
