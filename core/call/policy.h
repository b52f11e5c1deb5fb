/* Call policies: the arithmetic of retries and timeouts, and the plan cache.
 *
 * README "Calls" and core/call/README.md "Cache the plan, never the
 * call". Everything is in seconds (doubles); times are readings of the
 * caller's clock. The core sleeps, calls and decides nothing by itself: the
 * binding's retry loop (written in Lua so a sleep may yield) asks these
 * functions what to do next. No allocation except pc_PlanCache_New. */
#ifndef PC_POLICY_H
#define PC_POLICY_H

#include "base/arena.h"
#include "base/error.h"

#include <stddef.h>
#include <stdint.h>

/* -- Exponential sequences (backoff caps, exponential timeouts) ---------- */

/* cap = min(initial, maximum); each step yields cap, then
 * cap = min(cap * multiplier, maximum). */
typedef struct {
  double cap, maximum, multiplier;
} pc_Backoff;

void pc_Backoff_Init(pc_Backoff *b, double initial, double maximum, double multiplier);

/* Full jitter: returns cap * random01 ('random01' in [0, 1]) and advances
 * the cap. With random01 = 1 this is the sequence itself. */
double pc_Backoff_Next(pc_Backoff *b, double random01);

/* -- Parameters (immutable, call-independent: the numeric plan) ---------- */

typedef struct {
  double initial, maximum, multiplier; /* backoff, seconds */
  double timeout;                      /* budget for starting attempts; INFINITY: none */
  long max_attempts;                   /* 0: no cap */
} pc_RetryParams;

typedef enum {
  kPc_Timeout_None = 0,   /* attempts are sent without a timeout */
  kPc_Timeout_Fixed,      /* 'initial' is the whole call's budget */
  kPc_Timeout_Exponential /* initial, maximum, multiplier; 'deadline' the call's budget */
} pc_TimeoutKind;

typedef struct {
  pc_TimeoutKind kind;
  double initial, maximum, multiplier;
  double deadline; /* exponential only; INFINITY: none */
} pc_TimeoutParams;

/* Python-api-core's defaults: Retry 1, 60, 2, 120 s; ExponentialTimeout
 * 5, 30, 2, deadline 120 s. */
void pc_RetryParams_Default(pc_RetryParams *p);
void pc_TimeoutParams_DefaultExponential(pc_TimeoutParams *p);

/* Checks the numbers: initial, maximum, timeout/deadline > 0 and not NaN
 * (timeout and deadline may be INFINITY), initial and maximum finite,
 * multiplier >= 1 and finite, max_attempts >= 0. Returns 1 when valid; else
 * 0 with "maximum: positive number expected" in 'e'. */
int pc_RetryParams_Check(const pc_RetryParams *p, pc_Error *e);
int pc_TimeoutParams_Check(const pc_TimeoutParams *p, pc_Error *e);

/* The first attempt's timeout, the same for every call: 'initial' for
 * Fixed, min(initial, maximum, deadline) for Exponential. Returns 0 for
 * None (no timeout), else 1 with the value in '*timeout'. */
int pc_TimeoutParams_First(const pc_TimeoutParams *p, double *timeout);

/* -- One call's state (fresh for every call, never cached) --------------- */

typedef struct {
  pc_RetryParams retry;
  pc_TimeoutParams timeout;
  pc_Backoff backoff;    /* the next sleep's cap */
  pc_Backoff seq;        /* exponential timeout: the next attempt's value */
  double retry_deadline; /* start + retry.timeout */
  double call_deadline;  /* start + the timeout's budget; INFINITY: none */
  long attempts;         /* attempts sent so far */
} pc_CallState;

/* Starts a call at 'start' whose first attempt has been (or is being) sent
 * with pc_TimeoutParams_First's value: attempts = 1. */
void pc_CallState_Start(pc_CallState *c, const pc_RetryParams *r, const pc_TimeoutParams *t,
                        double start);

typedef enum {
  kPc_Verdict_Retry = 0,    /* sleep '*sleep' seconds, then pc_CallState_NextAttempt */
  kPc_Verdict_MaxAttempts,  /* give up: max_attempts attempts made */
  kPc_Verdict_Deadline,     /* give up: now + sleep would pass the retry deadline */
  kPc_Verdict_PushbackStop, /* give up: the server's pushback is negative (gRPC A6) */
  kPc_Verdict_NoTime        /* give up: now + sleep would reach the call's deadline */
} pc_Verdict;

/* After a retryable error at 'now': whether to try again and how long to
 * sleep first. 'pushback' is the error's retry delay in seconds, or NaN
 * when it has none; it replaces the drawn sleep (cap * random01), and the
 * cap grows either way. Gives up without sleeping when now + sleep would
 * pass the retry deadline, or reach or pass the call's deadline. */
pc_Verdict pc_CallState_OnError(pc_CallState *c, double now, double random01, double pushback,
                                double *sleep);

typedef enum {
  kPc_Attempt_Timed = 0, /* send with '*timeout' seconds (always > 0) */
  kPc_Attempt_Untimed,   /* send with no timeout */
  kPc_Attempt_NoTime     /* no time is left before the call's deadline: give up */
} pc_Attempt;

/* The timeout of the attempt about to start at 'now': min(the exponential
 * timeout's next value, time left to the call's deadline). Counts the
 * attempt unless NoTime. */
pc_Attempt pc_CallState_NextAttempt(pc_CallState *c, double now, double *timeout);

/* -- The plan cache: a bounded LRU of opaque keys -------------------------
 * A key is three parts (retry, timeout, compression), each a tag the caller
 * chooses (object, number, boolean, ...) and 64 bits (an address, a
 * number's bits). Equal tags and bits are the same key. The cache maps a key
 * to a slot in [0, capacity): the caller keeps the plan in its own array at
 * that slot, and the objects named by the key alive while the slot holds
 * it. A lookup is a scan from the most recently used entry, so capacity is
 * meant to be small (a handful). */

#define PC_PLANKEY_PARTS 3

typedef struct {
  uint64_t bits[PC_PLANKEY_PARTS];
  unsigned char tag[PC_PLANKEY_PARTS];
} pc_PlanKey;

typedef struct {
  unsigned long long hits, misses;
  size_t size, capacity;
} pc_PlanCacheInfo;

typedef struct pc_PlanCache pc_PlanCache;

/* Bytes for a cache of 'capacity' entries in one block, for
 * pc_PlanCache_Init (e.g. inside a Lua userdata). */
size_t pc_PlanCache_Bytes(size_t capacity);

/* Initializes an empty cache in 'mem' (pc_PlanCache_Bytes(capacity) bytes,
 * aligned as malloc's) and returns it. Nothing to free but 'mem'. */
pc_PlanCache *pc_PlanCache_Init(void *mem, size_t capacity);

/* As Init, in a block from 'alloc' (NULL: pc_DefaultAlloc); NULL on
 * allocation failure. Free with pc_PlanCache_Free (NULL allowed). */
pc_PlanCache *pc_PlanCache_New(size_t capacity, pc_Alloc *alloc, void *ud);
void pc_PlanCache_Free(pc_PlanCache *c);

/* The slot holding 'k' (then the most recently used; counts a hit), or -1
 * (counts a miss). */
int pc_PlanCache_Find(pc_PlanCache *c, const pc_PlanKey *k);

/* Stores 'k' (not present) as the most recently used and returns its slot:
 * a free one, else the least recently used one's (whose plan the caller
 * replaces). Returns -1 when capacity is 0. */
int pc_PlanCache_Insert(pc_PlanCache *c, const pc_PlanKey *k);

void pc_PlanCache_GetInfo(const pc_PlanCache *c, pc_PlanCacheInfo *info);

#endif
