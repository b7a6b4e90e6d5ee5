#include "population.hpp"

#include <map>
#include <string>

namespace accuracy {

const std::vector<RateGroup>& rate_groups() {
  static const std::vector<RateGroup> groups = {
      {"under 0.5x", 0, 0.5}, {"0.5x to 1x", 0.5, 1}, {"1x to 2x", 1, 2}, {"2x and more", 2, 1e9}};
  return groups;
}

std::vector<Outcome> run_population(const Shape& shape, const std::vector<Trace>& sources) {
  const auto cs = contenders(shape, false);
  // Keyed by (trace name, strategy index), in the order of first appearance.
  std::map<std::pair<std::string, std::size_t>, Outcome> totals;
  std::vector<std::pair<std::string, std::size_t>> order;
  auto add = [&](const std::string& trace, std::size_t i, Outcome o) {
    o.trace = trace;
    const auto key = std::make_pair(trace, i);
    const auto it = totals.find(key);
    if (it == totals.end()) {
      totals.emplace(key, std::move(o));
      order.push_back(key);
    } else {
      merge(it->second, o);
    }
  };
  for (const auto& g : rate_groups()) {
    for (std::size_t i = 0; i < cs.size(); ++i) add(std::string("mix: ") + g.name, i, Outcome{});
  }
  for (const auto& source : sources) {
    for (std::size_t i = 0; i < cs.size(); ++i) {
      const Outcome o = run(shape, source, cs[i], 0);
      add("mix", i, o);
      for (const auto& g : rate_groups()) {
        if (source.multiple >= g.from && source.multiple < g.to) add(std::string("mix: ") + g.name, i, o);
      }
    }
  }
  std::vector<Outcome> out;
  for (const auto& key : order) {
    Outcome o = totals.at(key);
    o.strategy = cs[key.second].name;
    o.reference = cs[key.second].reference == Reference::exact_log ? "exact log" : "GCRA";
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace accuracy
