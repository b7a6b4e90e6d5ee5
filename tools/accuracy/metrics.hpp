#pragma once
// What the study measures on two runs over the same requests (the strategy's and the reference's),
// each run being the list of the trace's requests with the decision it got. docs/accuracy.md
// defines each figure.
#include <cstdint>
#include <vector>

namespace accuracy {

// The times of the admitted requests, in order.
std::vector<std::int64_t> admitted_times(const std::vector<std::int64_t>& times, const std::vector<bool>& allowed);

// Requests admitted in (t - window, t], from the sorted admitted times.
std::int64_t admitted_in_window(const std::vector<std::int64_t>& admitted, std::int64_t t, std::int64_t window);

// Over-admission: the most requests admitted in any window (t - window, t] (checked at every
// admission, where the count can only have grown).
std::int64_t max_in_any_window(const std::vector<std::int64_t>& admitted, std::int64_t window);

// Worst window of under-admission: at every request's time t, how many more requests the
// reference admitted in (t - window, t] than the strategy did; the largest (0 if never more).
std::int64_t worst_deficit(const std::vector<std::int64_t>& times, const std::vector<std::int64_t>& strategy,
                           const std::vector<std::int64_t>& reference, std::int64_t window);

// The plots' series: for each cell [from + i*step, from + (i+1)*step), the most requests admitted in a
// window ending anywhere in the cell (at a request time inside it or at its end).
std::vector<std::int64_t> window_series(const std::vector<std::int64_t>& times, const std::vector<std::int64_t>& admitted,
                                        std::int64_t window, std::int64_t from, std::int64_t to, std::int64_t step);

}  // namespace accuracy
