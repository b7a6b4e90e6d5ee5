#pragma once
// FUZZ_CHECK: an invariant that must hold for every input. Unlike assert() it survives NDEBUG
// (the fuzz build is RelWithDebInfo); a failure prints the condition and aborts, which libFuzzer
// reports as a crash and saves the input as a reproducer.
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                                          \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n  ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                               \
      std::fprintf(stderr, "\n");                                                      \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)
