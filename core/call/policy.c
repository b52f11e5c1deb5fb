#include "call/policy.h"

#include <math.h>
#include <string.h>

/* -- Exponential sequences ----------------------------------------------- */

void pc_Backoff_Init(pc_Backoff *b, double initial, double maximum, double multiplier) {
  b->cap = initial < maximum ? initial : maximum;
  b->maximum = maximum;
  b->multiplier = multiplier;
}

double pc_Backoff_Next(pc_Backoff *b, double random01) {
  if (!(random01 > 0)) random01 = 0; /* NaN too */
  if (random01 > 1) random01 = 1;
  double value = b->cap * random01;
  double next = b->cap * b->multiplier;
  b->cap = next < b->maximum ? next : b->maximum;
  return value;
}

/* -- Parameters ------------------------------------------------------------ */

void pc_RetryParams_Default(pc_RetryParams *p) {
  p->initial = 1;
  p->maximum = 60;
  p->multiplier = 2;
  p->timeout = 120;
  p->max_attempts = PC_RETRY_DEFAULT_MAX_ATTEMPTS;
  p->min_pushback = 1;
}

void pc_TimeoutParams_DefaultExponential(pc_TimeoutParams *p) {
  p->kind = kPc_Timeout_Exponential;
  p->initial = 5;
  p->maximum = 30;
  p->multiplier = 2;
  p->deadline = 120;
}

static int positive_finite(double x) {
  return x > 0 && isfinite(x);
}

static int check_sequence(double initial, double maximum, double multiplier, pc_Error *e) {
  if (!positive_finite(initial)) {
    pc_Error_Set(e, "initial: positive number expected");
    return 0;
  }
  if (!positive_finite(maximum)) {
    pc_Error_Set(e, "maximum: positive number expected");
    return 0;
  }
  if (!(multiplier >= 1 && isfinite(multiplier))) {
    pc_Error_Set(e, "multiplier: number >= 1 expected");
    return 0;
  }
  return 1;
}

int pc_RetryParams_Check(const pc_RetryParams *p, pc_Error *e) {
  if (!check_sequence(p->initial, p->maximum, p->multiplier, e)) return 0;
  if (!(p->timeout > 0)) {
    pc_Error_Set(e, "timeout: positive number expected");
    return 0;
  }
  if (p->max_attempts < 0) {
    pc_Error_Set(e, "max_attempts: positive integer expected");
    return 0;
  }
  if (!(p->min_pushback >= 0 && isfinite(p->min_pushback))) {
    pc_Error_Set(e, "min_pushback: number >= 0 expected");
    return 0;
  }
  return 1;
}

int pc_TimeoutParams_Check(const pc_TimeoutParams *p, pc_Error *e) {
  switch (p->kind) {
  case kPc_Timeout_None: return 1;
  case kPc_Timeout_Fixed:
    if (!positive_finite(p->initial)) {
      pc_Error_Set(e, "timeout: positive number expected");
      return 0;
    }
    return 1;
  case kPc_Timeout_Exponential:
    if (!check_sequence(p->initial, p->maximum, p->multiplier, e)) return 0;
    if (!(p->deadline > 0)) {
      pc_Error_Set(e, "deadline: positive number expected");
      return 0;
    }
    return 1;
  }
  pc_Error_Set(e, "timeout: unknown kind %d", (int)p->kind);
  return 0;
}

int pc_TimeoutParams_First(const pc_TimeoutParams *p, double *timeout) {
  switch (p->kind) {
  case kPc_Timeout_Fixed: *timeout = p->initial; return 1;
  case kPc_Timeout_Exponential: {
    double t = p->initial < p->maximum ? p->initial : p->maximum;
    *timeout = t < p->deadline ? t : p->deadline;
    return 1;
  }
  case kPc_Timeout_None: break;
  }
  return 0;
}

/* -- One call -------------------------------------------------------------- */

void pc_CallState_Start(pc_CallState *c, const pc_RetryParams *r, const pc_TimeoutParams *t,
                        double start) {
  c->retry = *r;
  c->timeout = *t;
  pc_Backoff_Init(&c->backoff, r->initial, r->maximum, r->multiplier);
  c->retry_deadline = start + r->timeout;
  c->call_deadline = INFINITY;
  if (t->kind == kPc_Timeout_Fixed) c->call_deadline = start + t->initial;
  if (t->kind == kPc_Timeout_Exponential) {
    c->call_deadline = start + t->deadline;
    pc_Backoff_Init(&c->seq, t->initial, t->maximum, t->multiplier);
    pc_Backoff_Next(&c->seq, 1); /* the first attempt's value is spent */
  }
  c->attempts = 1;
}

pc_Verdict pc_CallState_OnError(pc_CallState *c, double now, double random01, double pushback,
                                double *sleep) {
  *sleep = 0;
  if (c->retry.max_attempts > 0 && c->attempts >= c->retry.max_attempts)
    return kPc_Verdict_MaxAttempts;
  double s;
  if (isnan(pushback)) {
    s = pc_Backoff_Next(&c->backoff, random01);
  } else {
    if (pushback < 0) return kPc_Verdict_PushbackStop;
    pc_Backoff_Next(&c->backoff, 1); /* the cap grows as if drawn */
    s = pushback > c->retry.min_pushback ? pushback : c->retry.min_pushback;
  }
  if (now + s > c->retry_deadline) return kPc_Verdict_Deadline;
  if (now + s >= c->call_deadline) return kPc_Verdict_NoTime;
  *sleep = s;
  return kPc_Verdict_Retry;
}

pc_Attempt pc_CallState_NextAttempt(pc_CallState *c, double now, double *timeout) {
  *timeout = 0;
  if (c->timeout.kind == kPc_Timeout_None) {
    c->attempts++;
    return kPc_Attempt_Untimed;
  }
  double t = c->call_deadline - now;
  if (c->timeout.kind == kPc_Timeout_Exponential) {
    double v = pc_Backoff_Next(&c->seq, 1);
    if (v < t) t = v;
  }
  if (!(t > 0)) return kPc_Attempt_NoTime;
  c->attempts++;
  *timeout = t;
  return kPc_Attempt_Timed;
}

/* -- The plan cache -------------------------------------------------------- */

typedef struct {
  pc_PlanKey key;
  int prev, next; /* recency list, most recent first; -1 ends */
} pc_PlanEntry;

struct pc_PlanCache {
  pc_Alloc *alloc; /* NULL when the block belongs to the caller (Init) */
  void *ud;
  size_t capacity, size;
  unsigned long long hits, misses;
  int head, tail;
  pc_PlanEntry e[]; /* 'size' entries in use, at slots 0..size-1 */
};

size_t pc_PlanCache_Bytes(size_t capacity) {
  return offsetof(pc_PlanCache, e) + capacity * sizeof(pc_PlanEntry);
}

pc_PlanCache *pc_PlanCache_Init(void *mem, size_t capacity) {
  pc_PlanCache *c = mem;
  c->alloc = NULL;
  c->ud = NULL;
  c->capacity = capacity;
  c->size = 0;
  c->hits = c->misses = 0;
  c->head = c->tail = -1;
  return c;
}

pc_PlanCache *pc_PlanCache_New(size_t capacity, pc_Alloc *alloc, void *ud) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  void *mem = alloc(ud, NULL, 0, pc_PlanCache_Bytes(capacity));
  if (mem == NULL) return NULL;
  pc_PlanCache *c = pc_PlanCache_Init(mem, capacity);
  c->alloc = alloc;
  c->ud = ud;
  return c;
}

void pc_PlanCache_Free(pc_PlanCache *c) {
  if (c == NULL || c->alloc == NULL) return;
  c->alloc(c->ud, c, pc_PlanCache_Bytes(c->capacity), 0);
}

static int key_equal(const pc_PlanKey *a, const pc_PlanKey *b) {
  for (int i = 0; i < PC_PLANKEY_PARTS; i++)
    if (a->tag[i] != b->tag[i] || a->bits[i] != b->bits[i]) return 0;
  return 1;
}

static void unlink_entry(pc_PlanCache *c, int i) {
  pc_PlanEntry *x = &c->e[i];
  if (x->prev >= 0)
    c->e[x->prev].next = x->next;
  else
    c->head = x->next;
  if (x->next >= 0)
    c->e[x->next].prev = x->prev;
  else
    c->tail = x->prev;
}

static void push_front(pc_PlanCache *c, int i) {
  c->e[i].prev = -1;
  c->e[i].next = c->head;
  if (c->head >= 0) c->e[c->head].prev = i;
  c->head = i;
  if (c->tail < 0) c->tail = i;
}

int pc_PlanCache_Find(pc_PlanCache *c, const pc_PlanKey *k) {
  for (int i = c->head; i >= 0; i = c->e[i].next) {
    if (key_equal(&c->e[i].key, k)) {
      if (i != c->head) {
        unlink_entry(c, i);
        push_front(c, i);
      }
      c->hits++;
      return i;
    }
  }
  c->misses++;
  return -1;
}

int pc_PlanCache_Insert(pc_PlanCache *c, const pc_PlanKey *k) {
  if (c->capacity == 0) return -1;
  int i;
  if (c->size < c->capacity) {
    i = (int)c->size++;
  } else {
    i = c->tail;
    unlink_entry(c, i);
  }
  /* Copied part by part: 'k' may have padding bytes of any value. */
  memset(&c->e[i].key, 0, sizeof c->e[i].key);
  for (int p = 0; p < PC_PLANKEY_PARTS; p++) {
    c->e[i].key.tag[p] = k->tag[p];
    c->e[i].key.bits[p] = k->bits[p];
  }
  push_front(c, i);
  return i;
}

void pc_PlanCache_GetInfo(const pc_PlanCache *c, pc_PlanCacheInfo *info) {
  info->hits = c->hits;
  info->misses = c->misses;
  info->size = c->size;
  info->capacity = c->capacity;
}
