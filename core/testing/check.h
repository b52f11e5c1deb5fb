/* A CHECK that survives NDEBUG (as Lua's ltests.c), for the core's C tests.
 * Each test program returns non-zero when any CHECK failed. */
#ifndef PC_TESTS_CHECK_H
#define PC_TESTS_CHECK_H

#include <stdio.h>

static int pc_check_failures = 0;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                     \
      pc_check_failures++;                                                                         \
    }                                                                                              \
  } while (0)

#define CHECK_DONE() (pc_check_failures == 0 ? 0 : 1)

#endif
