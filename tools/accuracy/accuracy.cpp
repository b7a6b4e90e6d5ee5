// The accuracy study (docs/accuracy.md): each strategy of the library, on the in-memory backend
// with a ManualClock, over standard traces, compared request by request with an exact sliding log
// (token and leaky bucket: with GCRA). scripts/accuracy.sh builds and runs it and draws the plots.
//
//   redlimit_accuracy [--quick] [--out DIR]
//
// Prints the markdown tables; with --out, writes summary.csv and series_<trace>.csv into DIR.
// Exits 1 if a check fails (checks.cpp), 2 on bad arguments. --quick: shorter traces, a few seconds.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "checks.hpp"
#include "population.hpp"
#include "report.hpp"
#include "run.hpp"
#include "traces.hpp"

namespace {

using namespace accuracy;

constexpr std::int64_t kMinute = 60'000'000;

std::vector<Trace> make_traces(const Shape& shape, bool quick) {
  const std::int64_t hours = (quick ? 1 : 6) * 60 * kMinute;
  std::vector<Trace> traces;
  std::uint64_t seed = 4;
  for (const double m : {0.5, 1.0, 2.0, 10.0}) traces.push_back(poisson(shape, m, quick && m > 2 ? hours / 6 : hours, ++seed));
  traces.push_back(edge_bursts(shape, quick ? 20 * kMinute : hours));
  traces.push_back(diurnal(shape, (quick ? 2 : 24) * 60 * kMinute, ++seed));
  const std::int64_t w = shape.window;
  traces.push_back(seed004(shape, "seed004_a", false, w + w / 4));
  traces.push_back(seed004(shape, "seed004_b", false, w + 3 * w / 4));
  traces.push_back(seed004(shape, "seed004_c", true, w + w / 4));
  return traces;
}

// Cells of about 1/600 of the plotted stretch, at least a second.
std::int64_t plot_step(const Trace& t) { return std::max<std::int64_t>(1'000'000, (t.plot_to - t.plot_from) / 600); }

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string out_dir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out_dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--out DIR]\n", argv[0]);
      return 2;
    }
  }
  const Shape shape;
  std::vector<Trace> traces = make_traces(shape, quick);
  std::vector<Outcome> outcomes;
  // The population first: its sources' figures added up, in all ("mix") and by rate ("mix: ...").
  outcomes = run_population(shape, population(shape, quick ? 100 : 1000, (quick ? 10 : 60) * kMinute, 2017));
  Trace mix;
  mix.name = "mix";
  traces.insert(traces.begin(), mix);
  for (const auto& trace : traces) {
    if (trace.name == "mix") continue;
    const bool seed = trace.name.rfind("seed004", 0) == 0;
    for (const auto& c : contenders(shape, seed)) {
      outcomes.push_back(run(shape, trace, c, out_dir.empty() ? 0 : plot_step(trace)));
    }
  }
  write_markdown(std::cout, shape, traces, outcomes);
  if (!out_dir.empty()) {
    std::ofstream summary(out_dir + "/summary.csv");
    write_summary_csv(summary, outcomes);
    for (const auto& trace : traces) {
      if (trace.name == "mix") continue;
      std::ofstream series(out_dir + "/series_" + trace.name + ".csv");
      write_series_csv(series, trace, plot_step(trace), outcomes);
    }
  }
  const int failed = check(shape, outcomes);
  if (failed > 0) std::fprintf(stderr, "accuracy: %d check(s) failed\n", failed);
  return failed > 0 ? 1 : 0;
}
