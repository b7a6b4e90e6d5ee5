#include "metrics.hpp"

#include <algorithm>

namespace accuracy {

std::vector<std::int64_t> admitted_times(const std::vector<std::int64_t>& times, const std::vector<bool>& allowed) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (allowed[i]) out.push_back(times[i]);
  }
  return out;
}

std::int64_t admitted_in_window(const std::vector<std::int64_t>& admitted, std::int64_t t, std::int64_t window) {
  const auto hi = std::upper_bound(admitted.begin(), admitted.end(), t);
  const auto lo = std::upper_bound(admitted.begin(), hi, t - window);
  return hi - lo;
}

std::int64_t max_in_any_window(const std::vector<std::int64_t>& admitted, std::int64_t window) {
  std::int64_t best = 0;
  std::size_t lo = 0;
  for (std::size_t hi = 0; hi < admitted.size(); ++hi) {
    // Equal times all count: the window ending at admitted[hi] holds every later one at that time too,
    // which the iteration over hi reaches before moving past that time.
    while (admitted[lo] <= admitted[hi] - window) ++lo;
    best = std::max<std::int64_t>(best, static_cast<std::int64_t>(hi - lo + 1));
  }
  return best;
}

std::int64_t worst_deficit(const std::vector<std::int64_t>& times, const std::vector<std::int64_t>& strategy,
                           const std::vector<std::int64_t>& reference, std::int64_t window) {
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (i + 1 < times.size() && times[i + 1] == times[i]) continue;  // the last of equal times sees them all
    const std::int64_t d = admitted_in_window(reference, times[i], window) - admitted_in_window(strategy, times[i], window);
    worst = std::max(worst, d);
  }
  return worst;
}

std::vector<std::int64_t> window_series(const std::vector<std::int64_t>& times, const std::vector<std::int64_t>& admitted,
                                        std::int64_t window, std::int64_t from, std::int64_t to, std::int64_t step) {
  const std::size_t cells = static_cast<std::size_t>((to - from + step - 1) / step);
  std::vector<std::int64_t> out(cells, 0);
  for (std::size_t c = 0; c < cells; ++c) {
    const std::int64_t end = from + static_cast<std::int64_t>(c + 1) * step;
    out[c] = admitted_in_window(admitted, end - 1, window);
  }
  // Peaks between cell ends (a burst that leaves before the cell ends) show at the requests' times.
  for (const std::int64_t t : times) {
    if (t < from || t >= to) continue;
    const auto c = static_cast<std::size_t>((t - from) / step);
    out[c] = std::max(out[c], admitted_in_window(admitted, t, window));
  }
  return out;
}

}  // namespace accuracy
