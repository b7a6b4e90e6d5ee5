#pragma once
// The population trace (traces.hpp, population()): every source run apart, as its own subject,
// and the figures added up, for Cloudflare's measure on traffic like a CDN's.
#include <vector>

#include "run.hpp"
#include "traces.hpp"

namespace accuracy {

// The groups of sources by rate, as multiples of the limit: [from, to).
struct RateGroup {
  const char* name;
  double from, to;
};
const std::vector<RateGroup>& rate_groups();

// Outcomes for trace "mix" (all sources), then "mix: <group>" for each group, per strategy.
std::vector<Outcome> run_population(const Shape& shape, const std::vector<Trace>& sources);

}  // namespace accuracy
