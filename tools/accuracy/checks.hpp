#pragma once
// What the study asserts on every run (and the `accuracy_quick` ctest entry with --quick): the
// known properties of each strategy, so that a change that breaks one fails a test.
#include <vector>

#include "run.hpp"

namespace accuracy {

// Prints each failed check to stderr; returns how many failed.
int check(const Shape& shape, const std::vector<Outcome>& outcomes);

}  // namespace accuracy
