// SPDX-License-Identifier: MIT
// Shared by the fuzz targets: an assertion that survives NDEBUG and aborts
// (so libFuzzer records the input) with the failed condition.

#ifndef URAID_FUZZ_FUZZ_CHECK_H_
#define URAID_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, \
                   __LINE__, #cond);                                   \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

#endif  // URAID_FUZZ_FUZZ_CHECK_H_
