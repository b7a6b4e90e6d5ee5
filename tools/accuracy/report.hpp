#pragma once
// The study's output: the markdown tables (stdout, and docs/accuracy.md between its markers) and
// the CSV files the plots are drawn from.
#include <ostream>
#include <string>
#include <vector>

#include "run.hpp"

namespace accuracy {

// Every figure, one row per (trace, strategy): summary.csv.
void write_summary_csv(std::ostream& out, const std::vector<Outcome>& outcomes);

// One trace's plot data: minutes, then for each strategy its series and the reference's.
void write_series_csv(std::ostream& out, const Trace& trace, std::int64_t step, const std::vector<Outcome>& outcomes);

// The tables of docs/accuracy.md: the main traces, Cloudflare's measure, seed 004's examples.
void write_markdown(std::ostream& out, const Shape& shape, const std::vector<Trace>& traces,
                    const std::vector<Outcome>& outcomes);

// "0.0123 %" with enough digits for a small share; "0" when exactly zero.
std::string percent(std::int64_t part, std::int64_t whole);

}  // namespace accuracy
