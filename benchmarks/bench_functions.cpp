// Redis Functions against EVALSHA (issue 13): each strategy's script time on Redis's thread per
// decision (`usec` of INFO commandstats over the decisions), called as FCALL of the loaded library
// and as EVALSHA of the script, one decision a call and 128 a call, on the same server in the same
// run. Rows "suite": "functions".
#include "bench_common.hpp"

namespace redlimit_bench {

namespace {

double script_usec_per_decision(const Config& c, Admin& admin, const Spec& spec, bool functions, int batch) {
  redlimit::Options o;
  o.pool.size = 1;
  o.redis_functions = functions;
  auto limiter = redlimit::RateLimiter::connect(url_of(c), o);
  auto s = spec.make(limiter, functions ? "fn" : "sha");
  s->peek("warm-up");  // loads the library or the script before the count starts
  admin.reset_stats();
  const auto until = Clock::now() + std::chrono::duration<double>(c.seconds);
  long long decisions = 0;
  std::vector<std::string> names;
  for (long i = 0; i < 10'000; ++i) names.push_back(subject_name(i));
  std::vector<redlimit::Request> reqs;
  while (Clock::now() < until && decisions < c.max_ops) {
    if (batch <= 1) {
      s->consume(names[static_cast<std::size_t>(decisions % 10'000)]);
      ++decisions;
      continue;
    }
    reqs.clear();
    for (int k = 0; k < batch; ++k) reqs.push_back({names[static_cast<std::size_t>((decisions + k) % 10'000)], 1});
    s->consume_many(reqs);
    decisions += batch;
  }
  const CmdStat st = admin.script_stats();
  return decisions > 0 ? static_cast<double>(st.usec) / static_cast<double>(decisions) : 0;
}

}  // namespace

void suite_functions(const Config& c, Admin& admin) {
  for (const auto& spec : all_specs()) {
    if (!wanted(c.strategies, spec.id)) continue;
    for (const int batch : {1, 128}) {
      for (const bool functions : {true, false}) {
        admin.flushall();
        const double usec = script_usec_per_decision(c, admin, spec, functions, batch);
        Json()
            .str("suite", "functions")
            .str("strategy", spec.id)
            .str("label", spec.label)
            .str("path", functions ? "fcall" : "evalsha")
            .integer("batch", batch)
            .num("usec_per_decision", usec)
            .emit();
        progress("functions {} {} batch {}: {:.2f} us a decision", spec.id, functions ? "FCALL" : "EVALSHA", batch,
                 usec);
      }
    }
  }
  admin.flushall();
}

}  // namespace redlimit_bench
