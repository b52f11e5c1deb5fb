/* An allocator that fails the Nth allocation (as Lua's ltests.c), and
 * counts live bytes so a test can prove nothing leaks on any failure path:
 *   for (n = 1; ; n++) { fail_reset(n); ...run...; CHECK(fail_live == 0);
 *                        if (!fail_hit) break; } */
#ifndef PC_TESTS_FAILALLOC_H
#define PC_TESTS_FAILALLOC_H

#include <stdlib.h>

static long fail_at = 0;        /* fail the fail_at-th allocation; 0 = never */
static long fail_count = 0;     /* allocations so far */
static int fail_hit = 0;        /* whether the failure happened */
static long long fail_live = 0; /* bytes allocated and not yet freed */

static void fail_reset(long at) {
  fail_at = at;
  fail_count = 0;
  fail_hit = 0;
  fail_live = 0;
}

static void *fail_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  if (nsize == 0) {
    if (ptr != NULL) fail_live -= (long long)osize;
    free(ptr);
    return NULL;
  }
  if (++fail_count == fail_at) {
    fail_hit = 1;
    return NULL;
  }
  void *p = realloc(ptr, nsize);
  if (p != NULL) fail_live += (long long)nsize - (ptr ? (long long)osize : 0);
  return p;
}

#endif
