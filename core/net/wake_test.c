/* Wake lists (wake.h): a token is listed once per round and only when
 * set, a failed allocation turns into an overflow (every waiter looks)
 * instead of a lost wake, nothing leaks. What lists a channel's calls:
 * hostio_test.c; a server engine's: server_test.c. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "net/wake.h"

/* The tokens listed, as a bit set of 1..63 (bit 0: anything else). */
static uint64_t listed(const pc_GrpcWakeList *w) {
  const uint64_t *items;
  size_t n = pc_GrpcWakeList_Items(w, &items);
  uint64_t bits = 0;
  for (size_t i = 0; i < n; i++) bits |= items[i] < 64 ? (uint64_t)1 << items[i] : 1;
  return bits;
}

static size_t count(const pc_GrpcWakeList *w) {
  const uint64_t *items;
  return pc_GrpcWakeList_Items(w, &items);
}

int main(void) {
  /* Once per round, only with a token; then again after a clear. */
  {
    pc_GrpcWakeList w;
    pc_GrpcWakeList_Init(&w, NULL, NULL);
    pc_GrpcWaker a = {0, 0}, b = {0, 0}, none = {0, 0};
    a.token = 5;
    b.token = 9;
    CHECK(!pc_GrpcWakeList_Pending(&w));
    pc_GrpcWakeList_Add(&w, &none);
    pc_GrpcWakeList_Add(&w, &a);
    pc_GrpcWakeList_Add(&w, &b);
    pc_GrpcWakeList_Add(&w, &a);
    CHECK(count(&w) == 2 && listed(&w) == ((1u << 5) | (1u << 9)));
    CHECK(pc_GrpcWakeList_Pending(&w) && !pc_GrpcWakeList_Overflow(&w));
    pc_GrpcWakeList_Clear(&w);
    CHECK(!pc_GrpcWakeList_Pending(&w) && count(&w) == 0);
    pc_GrpcWakeList_Add(&w, &a);
    CHECK(count(&w) == 1 && listed(&w) == (1u << 5));
    /* Many calls: the list grows. */
    pc_GrpcWakeList_Clear(&w);
    static pc_GrpcWaker many[1000];
    for (int i = 0; i < 1000; i++) {
      many[i].token = 1000 + (uint64_t)i;
      pc_GrpcWakeList_Add(&w, &many[i]);
      pc_GrpcWakeList_Add(&w, &many[i]);
    }
    const uint64_t *items;
    CHECK(pc_GrpcWakeList_Items(&w, &items) == 1000 && items[999] == 1999);
    pc_GrpcWakeList_Free(&w);
  }

  /* A failed allocation is an overflow: nothing listed is lost, the
   * driver is told to wake every waiter; a clear ends it. */
  {
    for (long n = 1;; n++) {
      fail_reset(n);
      pc_GrpcWakeList w;
      pc_GrpcWakeList_Init(&w, fail_alloc, NULL);
      static pc_GrpcWaker k[300];
      for (int i = 0; i < 300; i++) {
        k[i].token = 1 + (uint64_t)i;
        k[i].round = 0;
        pc_GrpcWakeList_Add(&w, &k[i]);
      }
      CHECK(pc_GrpcWakeList_Overflow(&w) == fail_hit);
      CHECK(pc_GrpcWakeList_Pending(&w));
      pc_GrpcWakeList_Clear(&w);
      CHECK(!pc_GrpcWakeList_Overflow(&w));
      pc_GrpcWakeList_Free(&w);
      CHECK(fail_live == 0);
      if (!fail_hit) break;
    }
    fail_reset(0);
  }

  return CHECK_DONE();
}
