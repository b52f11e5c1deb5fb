/* Wake lists (see wake.h). */
#include "net/wake.h"

#include <string.h>

void pc_GrpcWakeList_Init(pc_GrpcWakeList *w, pc_Alloc *alloc, void *ud) {
  memset(w, 0, sizeof *w);
  w->alloc = alloc ? alloc : pc_DefaultAlloc;
  w->ud = ud;
  w->round = 1;
}

void pc_GrpcWakeList_Free(pc_GrpcWakeList *w) {
  if (w->items) w->alloc(w->ud, w->items, w->cap * sizeof *w->items, 0);
  w->items = NULL;
  w->count = w->cap = 0;
}

void pc_GrpcWakeList_Add(pc_GrpcWakeList *w, pc_GrpcWaker *k) {
  if (k->token == 0 || k->round == w->round) return;
  if (w->count == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 64;
    uint64_t *p = cap <= PC_GRPC_WAKE_MAX
                      ? w->alloc(w->ud, w->items, w->cap * sizeof *w->items, cap * sizeof *p)
                      : NULL;
    if (p == NULL) {
      w->overflow = 1; /* every waiter looks: this one too */
      return;
    }
    w->items = p;
    w->cap = cap;
  }
  k->round = w->round;
  w->items[w->count++] = k->token;
}

size_t pc_GrpcWakeList_Items(const pc_GrpcWakeList *w, const uint64_t **items) {
  *items = w->items;
  return w->count;
}

int pc_GrpcWakeList_Overflow(const pc_GrpcWakeList *w) {
  return w->overflow;
}

int pc_GrpcWakeList_Pending(const pc_GrpcWakeList *w) {
  return w->count > 0 || w->overflow;
}

void pc_GrpcWakeList_Clear(pc_GrpcWakeList *w) {
  w->count = 0;
  w->overflow = 0;
  w->round++; /* 64 bits: never back to a round a call was listed in */
}
