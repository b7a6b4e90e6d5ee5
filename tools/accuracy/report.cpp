#include "report.hpp"

#include <cstdio>
#include <map>

namespace accuracy {

namespace {

std::string ratio(std::int64_t part, std::int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

const Outcome* find(const std::vector<Outcome>& outcomes, const std::string& trace, const std::string& strategy) {
  for (const auto& o : outcomes) {
    if (o.trace == trace && o.strategy == strategy) return &o;
  }
  return nullptr;
}

// The strategies in the order they were run, each once.
std::vector<std::string> strategy_names(const std::vector<Outcome>& outcomes) {
  std::vector<std::string> names;
  for (const auto& o : outcomes) {
    bool seen = false;
    for (const auto& n : names) seen = seen || n == o.strategy;
    if (!seen) names.push_back(o.strategy);
  }
  return names;
}

bool is_seed004(const Trace& t) { return t.name.rfind("seed004", 0) == 0; }

// One table: a row per strategy, a column per (non-seed) trace, `cell` fills each.
template <typename Cell>
void table(std::ostream& out, const std::vector<Trace>& traces, const std::vector<Outcome>& outcomes, Cell cell,
           bool counters_only) {
  out << "| strategy |";
  for (const auto& t : traces) {
    if (!is_seed004(t)) out << ' ' << t.name << " |";
  }
  out << "\n|---|";
  for (const auto& t : traces) {
    if (!is_seed004(t)) out << "---:|";
  }
  out << '\n';
  for (const auto& name : strategy_names(outcomes)) {
    const Outcome* first = find(outcomes, traces.front().name, name);
    if (first == nullptr || (counters_only && first->model_differ < 0)) continue;
    out << "| " << name << " |";
    for (const auto& t : traces) {
      if (is_seed004(t)) continue;
      const Outcome* o = find(outcomes, t.name, name);
      out << ' ' << (o ? cell(*o) : std::string("-")) << " |";
    }
    out << '\n';
  }
  out << '\n';
}

void seed004_table(std::ostream& out, const std::vector<Trace>& traces, const std::vector<Outcome>& outcomes) {
  // The article's figures for what the burst gets (sliding window at W and at W/2); "-" where it gives none.
  const std::map<std::string, std::pair<std::string, std::string>> article = {
      {"seed004_a", {"25", "50"}}, {"seed004_b", {"75", "-"}}, {"seed004_c", {"25", "0"}}};
  out << "| example | article (W) | article (W/2) |";
  const auto names = strategy_names(outcomes);
  for (const auto& n : names) out << ' ' << n << " |";
  out << "\n|---|---:|---:|";
  for (std::size_t i = 0; i < names.size(); ++i) out << "---:|";
  out << '\n';
  for (const auto& t : traces) {
    if (!is_seed004(t)) continue;
    const auto it = article.find(t.name);
    out << "| " << t.description << " | " << (it != article.end() ? it->second.first : "-") << " | "
        << (it != article.end() ? it->second.second : "-") << " |";
    for (const auto& n : names) {
      const Outcome* o = find(outcomes, t.name, n);
      out << ' ' << (o ? std::to_string(o->admitted_at_end) : std::string("-")) << " |";
    }
    out << '\n';
  }
  out << '\n';
}

// Cloudflare's measure on the population, by the sources' rates: where the wrong decisions come from.
void cloudflare_by_rate(std::ostream& out, const std::vector<Outcome>& outcomes) {
  std::vector<std::string> groups;
  for (const auto& o : outcomes) {
    if (o.trace.rfind("mix: ", 0) == 0 && (groups.empty() || groups.back() != o.trace)) groups.push_back(o.trace);
  }
  out << "| sources' rate |";
  for (const auto& g : groups) out << ' ' << g.substr(5) << " |";
  out << " all |\n|---|";
  for (std::size_t i = 0; i <= groups.size(); ++i) out << "---:|";
  groups.push_back("mix");
  out << "\n| requests (share) |";
  const Outcome* total = find(outcomes, "mix", outcomes.front().strategy);
  for (const auto& g : groups) {
    const Outcome* o = find(outcomes, g, outcomes.front().strategy);
    out << ' ' << o->requests << " (" << percent(o->requests, total->requests) << ") |";
  }
  out << '\n';
  for (const auto& name : strategy_names(outcomes)) {
    const Outcome* in_mix = find(outcomes, "mix", name);
    if (in_mix == nullptr || in_mix->model_differ < 0) continue;
    for (const bool all : {false, true}) {
      out << "| " << name << (all ? ", counting every request" : "") << " |";
      for (const auto& g : groups) {
        const Outcome* o = find(outcomes, g, name);
        const std::int64_t wrong = all ? o->wrongly_counting_all : o->wrongly_allowed + o->wrongly_rejected;
        out << ' ' << (o->model_differ < 0 ? "-" : percent(wrong, o->requests)) << " |";
      }
      out << '\n';
    }
  }
  out << '\n';
}

}  // namespace

std::string percent(std::int64_t part, std::int64_t whole) {
  if (whole == 0) return "-";
  if (part == 0) return "0";
  char buf[32];
  const double p = 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  std::snprintf(buf, sizeof buf, p >= 1 ? "%.1f %%" : p >= 0.01 ? "%.3f %%" : "%.4f %%", p);
  return buf;
}

void write_summary_csv(std::ostream& out, const std::vector<Outcome>& outcomes) {
  out << "trace,strategy,reference,requests,admitted,reference_admitted,differ,max_window,"
         "reference_max_window,worst_deficit,model_differ,wrongly_allowed,wrongly_rejected,wrongly_counting_all,admitted_at_end\n";
  for (const auto& o : outcomes) {
    out << o.trace << ',' << o.strategy << ',' << o.reference << ',' << o.requests << ',' << o.admitted << ','
        << o.reference_admitted << ',' << o.differ << ',' << o.max_window << ',' << o.reference_max_window << ','
        << o.worst_deficit << ',' << o.model_differ << ',' << o.wrongly_allowed << ',' << o.wrongly_rejected << ','
        << o.wrongly_counting_all << ',' << o.admitted_at_end << '\n';
  }
}

void write_series_csv(std::ostream& out, const Trace& trace, std::int64_t step, const std::vector<Outcome>& outcomes) {
  std::vector<const Outcome*> mine;
  for (const auto& o : outcomes) {
    if (o.trace == trace.name) mine.push_back(&o);
  }
  out << "minute";
  for (const auto* o : mine) out << ",\"" << o->strategy << "\",\"" << o->reference << '"';
  out << '\n';
  const std::size_t cells = mine.empty() ? 0 : mine.front()->series.size();
  for (std::size_t c = 0; c < cells; ++c) {
    const double minute = static_cast<double>(trace.plot_from + static_cast<std::int64_t>(c + 1) * step) / 60e6;
    out << minute;
    for (const auto* o : mine) out << ',' << o->series[c] << ',' << o->reference_series[c];
    out << '\n';
  }
}

void write_markdown(std::ostream& out, const Shape& shape, const std::vector<Trace>& traces,
                    const std::vector<Outcome>& outcomes) {
  out << "Limit " << shape.limit << " per " << shape.window / 1'000'000 << " s; requests per trace:";
  for (const auto& t : traces) {
    const Outcome* o = is_seed004(t) || outcomes.empty() ? nullptr : find(outcomes, t.name, outcomes.front().strategy);
    if (o != nullptr) out << ' ' << t.name << ' ' << o->requests << ';';
  }
  out << "\n\n**Decided differently** from the reference, each run on its own admissions "
         "(share of requests):\n\n";
  table(out, traces, outcomes, [](const Outcome& o) { return percent(o.differ, o.requests); }, false);
  out << "**Over-admission**: most requests admitted in any window of length W, as a multiple of the limit "
         "(strategy / reference):\n\n";
  table(out, traces, outcomes, [&](const Outcome& o) {
    return ratio(o.max_window, shape.limit) + " / " + ratio(o.reference_max_window, shape.limit);
  }, false);
  out << "**Under-admission**: admitted in all, short of the reference (share of the reference's admissions; "
         "negative: more) / worst window (requests fewer than the reference in one window, as a multiple "
         "of the limit):\n\n";
  table(out, traces, outcomes, [&](const Outcome& o) {
    const std::int64_t gap = o.reference_admitted - o.admitted;
    const std::string total = gap >= 0 ? percent(gap, o.reference_admitted) : "−" + percent(-gap, o.reference_admitted);
    return total + " / " + ratio(o.worst_deficit, shape.limit);
  }, false);
  out << "**Cloudflare's measure**: the counter's rule asked about every request against the exact log's own "
         "history; wrongly decided (wrongly allowed + wrongly rejected), share of requests:\n\n";
  table(out, traces, outcomes, [](const Outcome& o) {
    return percent(o.wrongly_allowed + o.wrongly_rejected, o.requests) + " (" + std::to_string(o.wrongly_allowed) +
           " + " + std::to_string(o.wrongly_rejected) + ")";
  }, true);
  out << "The same, counting every request (admitted or not) in both the log and the counter, as "
         "Cloudflare's counters do:\n\n";
  table(out, traces, outcomes, [](const Outcome& o) { return percent(o.wrongly_counting_all, o.requests); }, true);
  out << "The same measure on the population (trace mix), by the rate of the sources the requests came from:\n\n";
  cloudflare_by_rate(out, outcomes);
  out << "**Seed 004's worked examples**: requests the second burst of 100 gets:\n\n";
  seed004_table(out, traces, outcomes);
}

}  // namespace accuracy
