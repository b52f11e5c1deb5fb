/* Arena: alignment, large blocks, strings, accounting, reset, and no leak
 * when any allocation fails. */
#include "base/arena.h"
#include "testing/check.h"
#include "testing/failalloc.h"

#include <stdint.h>
#include <string.h>

static int fill(pc_Arena *a) {
  for (int i = 0; i < 200; i++) {
    char *p = pc_Arena_Malloc(a, (size_t)(i % 37) + 1);
    if (p == NULL) return 0;
    CHECK(((uintptr_t)p & 7) == 0);
    memset(p, 0xab, (size_t)(i % 37) + 1);
  }
  char *big = pc_Arena_Malloc(a, 200000);
  if (big == NULL) return 0;
  memset(big, 1, 200000);
  char *s = pc_Arena_StrDup(a, "a\0b", 3);
  if (s == NULL) return 0;
  CHECK(memcmp(s, "a\0b", 4) == 0);
  return 1;
}

int main(void) {
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  CHECK(a != NULL);
  if (a == NULL) return 1;
  CHECK(fill(a));
  CHECK(pc_Arena_SpaceAllocated(a) >= 200000);
  int *z = pc_Arena_Calloc(a, 64 * sizeof(int));
  for (int i = 0; i < 64; i++) CHECK(z[i] == 0);
  pc_Arena_Free(a);
  pc_Arena_Free(NULL);

  /* Reset keeps the newest block only; the same work again then allocates
   * nothing more, and the memory is usable. */
  a = pc_Arena_New(NULL, NULL);
  CHECK(a != NULL);
  if (a == NULL) return 1;
  pc_Arena_Reset(a); /* an empty arena: nothing to do */
  CHECK(pc_Arena_SpaceAllocated(a) < 100);
  for (int i = 0; i < 300; i++) CHECK(pc_Arena_Malloc(a, 40) != NULL);
  size_t grown = pc_Arena_SpaceAllocated(a);
  pc_Arena_Reset(a);
  size_t kept = pc_Arena_SpaceAllocated(a);
  CHECK(kept < grown);
  for (int round = 0; round < 3; round++) {
    char *p = pc_Arena_Malloc(a, 40);
    CHECK(p != NULL);
    if (p != NULL) memset(p, 7, 40);
    CHECK(pc_Arena_SpaceAllocated(a) == kept);
    pc_Arena_Reset(a);
  }
  CHECK(fill(a));
  pc_Arena_Reset(a);
  CHECK(pc_Arena_SpaceAllocated(a) < 200000);
  pc_Arena_Free(a);

  /* A sized arena: one block of the size asked for, whose used part
   * pc_Arena_SpaceUsed tells; sizes out of range are clamped. */
  a = pc_Arena_NewSized(NULL, NULL, 4000);
  CHECK(a != NULL);
  if (a == NULL) return 1;
  size_t empty = pc_Arena_SpaceAllocated(a);
  CHECK(pc_Arena_SpaceUsed(a) == empty);
  for (int i = 0; i < 30; i++) CHECK(pc_Arena_Malloc(a, 100) != NULL);
  CHECK(pc_Arena_SpaceAllocated(a) == empty + 4000);
  size_t used = pc_Arena_SpaceUsed(a);
  CHECK(used > empty + 3000 && used < empty + 4000);
  CHECK(pc_Arena_Malloc(a, 1000) != NULL); /* a second block */
  CHECK(pc_Arena_SpaceAllocated(a) > empty + 4000);
  CHECK(fill(a));
  pc_Arena_Free(a);
  a = pc_Arena_NewSized(NULL, NULL, (size_t)1 << 30);
  CHECK(a != NULL);
  if (a == NULL) return 1;
  empty = pc_Arena_SpaceAllocated(a);
  CHECK(pc_Arena_Malloc(a, 8) != NULL);
  CHECK(pc_Arena_SpaceAllocated(a) == empty + 64 * 1024);
  pc_Arena_Free(a);
  a = pc_Arena_NewSized(NULL, NULL, 0);
  CHECK(a != NULL);
  if (a == NULL) return 1;
  CHECK(pc_Arena_Malloc(a, 8) != NULL);
  CHECK(pc_Arena_SpaceAllocated(a) == empty + 256);
  pc_Arena_Free(a);

  /* A large allocation's block of its own is left out of
   * pc_Arena_SpaceUsed, first allocation or later: a new arena would give
   * it its own block again, and a first block sized for it would go unused
   * (T{...} of a message holding a big string took 64 KiB more each). */
  for (int later = 0; later < 2; later++) {
    a = pc_Arena_New(NULL, NULL);
    CHECK(a != NULL);
    if (a == NULL) return 1;
    empty = pc_Arena_SpaceAllocated(a);
    if (later) CHECK(pc_Arena_Malloc(a, 8) != NULL);
    CHECK(pc_Arena_Malloc(a, 100000) != NULL);
    CHECK(pc_Arena_Malloc(a, 8) != NULL);
    CHECK(pc_Arena_SpaceAllocated(a) > empty + 100000);
    CHECK(pc_Arena_SpaceUsed(a) < empty + 1000);
    pc_Arena_Reset(a); /* the block kept is ordinary again */
    CHECK(pc_Arena_SpaceUsed(a) < empty + 100);
    pc_Arena_Free(a);
  }

  for (long n = 1;; n++) {
    fail_reset(n);
    pc_Arena *f = pc_Arena_New(fail_alloc, NULL);
    if (f != NULL) {
      fill(f);
      pc_Arena_Reset(f);
      fill(f);
      pc_Arena_Free(f);
    }
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
  return CHECK_DONE();
}
