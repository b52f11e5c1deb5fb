/* Wake lists (wake.h): a token is listed once per round and only when
 * set, a failed allocation turns into an overflow (every waiter looks)
 * instead of a lost wake, nothing leaks; a host-I/O channel lists the
 * calls that have a token when their deadline passes or their connection
 * breaks, and not the others. The server engine's calls: server_test.c. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "base/clock.h"
#include "net/channel.h"

#include <string.h>

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

static pc_GrpcCall *start(pc_GrpcChannel *ch, double timeout) {
  pc_GrpcCallSettings s;
  memset(&s, 0, sizeof s);
  s.timeout = timeout;
  pc_Error err;
  pc_Error_Init(&err);
  return pc_GrpcChannel_Start(ch, "/a.B/C", &s, &err);
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

  /* A channel lists its calls with a token: the deadline that ends one in
   * the tick, then the lost connection that ends the others; a call
   * without a token never. */
  {
    pc_GrpcChannelOptions o;
    memset(&o, 0, sizeof o);
    o.host = "example.test";
    o.port = "50051";
    o.host_io = 1;
    pc_Error err;
    pc_Error_Init(&err);
    pc_GrpcChannel *ch = pc_GrpcChannel_New(&o, NULL, NULL, &err);
    if (ch == NULL) {
      fprintf(stderr, "wake_test.c: no channel: %s\n", err.msg);
      return 1;
    }
    pc_GrpcWakeList *w = pc_GrpcChannel_Wake(ch);
    pc_GrpcCall *late = start(ch, 0.02), *held = start(ch, 10), *mute = start(ch, 10);
    pc_GrpcCall_SetWakeToken(late, 1);
    pc_GrpcCall_SetWakeToken(held, 2);
    pc_GrpcHostConn c[2];
    CHECK(pc_GrpcChannel_HostConns(ch, c, 2) == 1);
    pc_GrpcChannel_HostConnected(ch, c[0].id, 1, NULL);
    pc_GrpcChannel_HostTick(ch);
    const char *p;
    for (size_t n; (n = pc_GrpcChannel_HostOutput(ch, c[0].id, &p)) > 0;)
      pc_GrpcChannel_HostWrote(ch, c[0].id, n);
    pc_GrpcWakeList_Clear(w); /* the headers went out: news of no interest here */
    pc_GrpcChannel_HostTick(ch);
    CHECK(count(w) == 0);
    pc_Clock_Sleep(0.025);
    pc_GrpcChannel_HostTick(ch);
    CHECK(pc_GrpcCall_Status(late) != NULL && listed(w) == (1u << 1));
    pc_GrpcWakeList_Clear(w);
    pc_GrpcChannel_HostLost(ch, c[0].id, "read from example.test:50051: connection reset");
    CHECK(pc_GrpcCall_Status(held) != NULL && pc_GrpcCall_Status(mute) != NULL);
    CHECK(listed(w) == (1u << 2));
    pc_GrpcCall_Free(late);
    pc_GrpcCall_Free(held);
    pc_GrpcCall_Free(mute);
    pc_GrpcChannel_Free(ch);
  }
  return CHECK_DONE();
}
