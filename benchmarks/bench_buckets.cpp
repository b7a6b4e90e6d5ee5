// The load driver's suite "buckets": what a sliding window's decision costs Redis as its buckets
// (window / precision) grow, each of which a decision reads and sums (lua/policy.lua).
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace redlimit_bench {

namespace {

// The script calls (FCALL, EVALSHA) in SLOWLOG, which logs every command while
// slowlog-log-slower-than is 0: their number and the longest one's microseconds.
struct Slowest {
  long long calls = 0;
  long long usec = 0;
};

Slowest slowest_script_call(Admin& admin) {
  Slowest out;
  const redlimit::Reply log = admin.cmd({"SLOWLOG", "GET", "100000"});
  for (const redlimit::Reply& e : log.elements) {
    if (e.elements.size() < 4 || e.elements[3].elements.empty()) continue;
    const std::string& name = e.elements[3].elements[0].str;
    if (name != "FCALL" && name != "EVALSHA" && name != "fcall" && name != "evalsha") continue;
    ++out.calls;
    if (e.elements[2].integer > out.usec) out.usec = e.elements[2].integer;
  }
  return out;
}

// One consume_many of `subjects` subjects, each holding a copy of `sw`'s subject "u": the script
// calls it took and the longest, by SLOWLOG.
Slowest copies_in_one_batch(const redlimit::Strategy& sw, Admin& admin, redlimit::ManualClock& clock, int subjects) {
  std::vector<std::string> names{"u"};
  for (int i = 1; i < subjects; ++i) {
    names.push_back("c" + std::to_string(i));
    admin.cmd({"COPY", sw.key_for("u"), sw.key_for(names.back())});
  }
  std::vector<redlimit::Request> batch;
  for (const auto& s : names) batch.push_back({s, 1});
  admin.cmd({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
  admin.cmd({"CONFIG", "SET", "slowlog-max-len", "100000"});
  admin.cmd({"SLOWLOG", "RESET"});
  clock.advance(std::chrono::microseconds(1));
  sw.consume_many(batch);
  const Slowest sl = slowest_script_call(admin);
  admin.cmd({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
  return sl;
}

}  // namespace

// One subject of a window of n seconds in buckets of a second, on a clock the suite moves: n
// decisions a second apart fill every bucket, then each of `calls` more (a second on) keeps them
// full, timed by INFO commandstats. Then, on the same buckets: `calls` rejections (the same window
// under a limit of n, which its n full buckets have reached), and one consume_many of 64 subjects
// holding as many (copies of the first), whose script calls SLOWLOG times: how many calls it took
// (DecisionPath::per_call_of) and the longest, which no other client could be served during.
void suite_buckets(const Config& c, Admin& admin) {
  const bool quick = c.max_ops < 100'000;
  const long calls = quick ? 50 : 200;
  for (const long n : {1L, 10L, 100L, 1'000L, 10'000L}) {
    if (quick && n > 1'000) break;
    auto clock = std::make_shared<redlimit::ManualClock>(redlimit::Micros{1'795'000'000'000'000});
    redlimit::Options o;
    o.clock = clock;
    const auto limiter = redlimit::RateLimiter::connect(url_of(c), o);
    const redlimit::Limit window(1'000'000'000, std::chrono::seconds(n));
    const auto sw = limiter.sliding_window("bk", window, std::chrono::seconds(1));
    admin.flushall();
    for (long i = 0; i < n; ++i) {
      clock->advance(std::chrono::seconds(1));
      sw.consume("u");
    }
    admin.reset_stats();
    for (long i = 0; i < calls; ++i) {
      clock->advance(std::chrono::seconds(1));
      sw.consume("u");
    }
    const CmdStat st = admin.script_stats();
    const double per = static_cast<double>(st.usec) / static_cast<double>(calls);

    // The same key and buckets (the tag names the window and precision, not the count).
    const auto full =
        limiter.sliding_window("bk", redlimit::Limit(n, std::chrono::seconds(n)), std::chrono::seconds(1));
    admin.reset_stats();
    long rejected = 0;
    for (long i = 0; i < calls; ++i) {
      clock->advance(std::chrono::microseconds(1));
      rejected += full.consume("u").allowed ? 0 : 1;
    }
    const double per_rejection = static_cast<double>(admin.script_stats().usec) / static_cast<double>(calls);

    constexpr int kBatch = 64;
    const Slowest sl = copies_in_one_batch(sw, admin, *clock, kBatch);

    Json()
        .str("suite", "buckets")
        .integer("buckets", n)
        .integer("calls", calls)
        .num("usec_per_call", per)
        .integer("bytes", admin.memory_usage(sw.key_for("u")))
        .integer("rejected", rejected)
        .num("usec_per_rejection", per_rejection)
        .integer("batch_subjects", kBatch)
        .integer("batch_script_calls", sl.calls)
        .integer("batch_slowest_usec", sl.usec)
        .emit();
    progress(
        "buckets {}: {:.2f} us/call, {:.2f} us/rejection ({} of {} rejected); consume_many of {}: {} script "
        "calls, the longest {} us",
        n, per, per_rejection, rejected, calls, kBatch, sl.calls, sl.usec);
  }
  admin.flushall();
}

}  // namespace redlimit_bench
