/* Call policies: backoff caps and jitter, the deadline and attempt-timeout
 * arithmetic of the cases (replayed on a fake clock), the plan
 * cache's LRU order and counters, and the monotonic clock. */
#include "testing/check.h"
#include "base/clock.h"
#include "testing/failalloc.h"
#include "call/policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_backoff(void) {
  pc_Backoff b;
  const double caps[] = {1, 2, 4, 8, 16, 32, 60, 60};
  pc_Backoff_Init(&b, 1, 60, 2);
  for (int i = 0; i < 8; i++) CHECK(pc_Backoff_Next(&b, 1) == caps[i]);
  pc_Backoff_Init(&b, 1, 60, 2);
  for (int i = 0; i < 8; i++) CHECK(pc_Backoff_Next(&b, 0) == 0);
  CHECK(b.cap == 60);
  pc_Backoff_Init(&b, 1, 60, 2);
  CHECK(pc_Backoff_Next(&b, 0.5) == 0.5);
  CHECK(pc_Backoff_Next(&b, 0.25) == 0.5);
  /* Out-of-range sources are clamped, NaN counts as 0. */
  pc_Backoff_Init(&b, 1, 60, 2);
  CHECK(pc_Backoff_Next(&b, 7) == 1);
  CHECK(pc_Backoff_Next(&b, -1) == 0);
  CHECK(pc_Backoff_Next(&b, NAN) == 0);
  /* initial above maximum starts at maximum. */
  pc_Backoff_Init(&b, 10, 3, 2);
  CHECK(pc_Backoff_Next(&b, 1) == 3);
}

static void test_check(void) {
  pc_RetryParams r;
  pc_Error e;
  pc_RetryParams_Default(&r);
  CHECK(r.initial == 1 && r.maximum == 60 && r.multiplier == 2 && r.timeout == 120);
  CHECK(r.max_attempts == 5 && r.min_pushback == 1);
  CHECK(pc_RetryParams_Check(&r, NULL));
  r.min_pushback = -1;
  pc_Error_Init(&e);
  CHECK(!pc_RetryParams_Check(&r, &e));
  CHECK(strcmp(e.msg, "min_pushback: number >= 0 expected") == 0);
  r.min_pushback = NAN;
  CHECK(!pc_RetryParams_Check(&r, NULL));
  r.min_pushback = 0;
  r.timeout = INFINITY;
  CHECK(pc_RetryParams_Check(&r, NULL));
  r.maximum = 0;
  pc_Error_Init(&e);
  CHECK(!pc_RetryParams_Check(&r, &e));
  CHECK(strcmp(e.msg, "maximum: positive number expected") == 0);
  pc_RetryParams_Default(&r);
  r.multiplier = 0.5;
  pc_Error_Init(&e);
  CHECK(!pc_RetryParams_Check(&r, &e));
  CHECK(strcmp(e.msg, "multiplier: number >= 1 expected") == 0);
  pc_RetryParams_Default(&r);
  r.initial = NAN;
  CHECK(!pc_RetryParams_Check(&r, NULL));

  pc_TimeoutParams t;
  pc_TimeoutParams_DefaultExponential(&t);
  CHECK(t.initial == 5 && t.maximum == 30 && t.multiplier == 2 && t.deadline == 120);
  CHECK(pc_TimeoutParams_Check(&t, NULL));
  t.deadline = -1;
  pc_Error_Init(&e);
  CHECK(!pc_TimeoutParams_Check(&t, &e));
  CHECK(strcmp(e.msg, "deadline: positive number expected") == 0);
  t.kind = kPc_Timeout_Fixed;
  t.initial = 0;
  CHECK(!pc_TimeoutParams_Check(&t, NULL));
  t.initial = INFINITY;
  CHECK(!pc_TimeoutParams_Check(&t, NULL));
  t.kind = kPc_Timeout_None;
  CHECK(pc_TimeoutParams_Check(&t, NULL));
}

static pc_TimeoutParams fixed(double budget) {
  pc_TimeoutParams t = {kPc_Timeout_Fixed, budget, 0, 0, 0};
  return t;
}

static pc_TimeoutParams none(void) {
  pc_TimeoutParams t = {kPc_Timeout_None, 0, 0, 0, 0};
  return t;
}

/* The first attempt's timeout never depends on the call: 10 at t = 0, 5,
 * 9.5 and 20 alike, and an exponential timeout starts afresh each call. */
static void test_first_timeouts(void) {
  pc_TimeoutParams t = fixed(10);
  double v;
  CHECK(pc_TimeoutParams_First(&t, &v) && v == 10);
  pc_TimeoutParams x = {kPc_Timeout_Exponential, 1, 8, 2, 120};
  pc_RetryParams r;
  pc_RetryParams_Default(&r);
  for (int call = 0; call < 5; call++) {
    CHECK(pc_TimeoutParams_First(&x, &v) && v == 1);
    pc_CallState c;
    pc_CallState_Start(&c, &r, &x, call * 100.0);
    double t2;
    CHECK(pc_CallState_NextAttempt(&c, call * 100.0, &t2) == kPc_Attempt_Timed && t2 == 2);
  }
  pc_TimeoutParams n = none();
  CHECK(!pc_TimeoutParams_First(&n, &v));
  pc_TimeoutParams small = {kPc_Timeout_Exponential, 5, 30, 2, 3};
  CHECK(pc_TimeoutParams_First(&small, &v) && v == 3);
}

/* Retry{1, 2, 8, timeout 10}, always UNAVAILABLE, random at its maximum:
 * attempts at 0, 1, 3, 7, then give up at 7 (7 + 8 > 10). */
static void test_retry_deadline(void) {
  pc_RetryParams r = {1, 8, 2, 10, 0, 0};
  pc_TimeoutParams t = none();
  pc_CallState c;
  double now = 0, sleep, timeout;
  const double starts[] = {0, 1, 3, 7};
  pc_CallState_Start(&c, &r, &t, now);
  CHECK(now == starts[0]);
  for (int i = 1; i < 4; i++) {
    CHECK(pc_CallState_OnError(&c, now, 1, NAN, &sleep) == kPc_Verdict_Retry);
    now += sleep;
    CHECK(pc_CallState_NextAttempt(&c, now, &timeout) == kPc_Attempt_Untimed);
    CHECK(now == starts[i]);
  }
  CHECK(pc_CallState_OnError(&c, now, 1, NAN, &sleep) == kPc_Verdict_Deadline);
  CHECK(c.attempts == 4);
}

/* Timeout 600, Retry{timeout = 600}, attempts of 200 s, sleeps of 0:
 * attempts get 600, 400, 200, and the call ends at 600 exactly. */
static void test_attempt_budget(void) {
  pc_RetryParams r;
  pc_RetryParams_Default(&r);
  r.timeout = 600;
  pc_TimeoutParams t = fixed(600);
  pc_CallState c;
  double now = 0, sleep, timeout;
  CHECK(pc_TimeoutParams_First(&t, &timeout) && timeout == 600);
  pc_CallState_Start(&c, &r, &t, now);
  now += 200;
  CHECK(pc_CallState_OnError(&c, now, 0, NAN, &sleep) == kPc_Verdict_Retry && sleep == 0);
  CHECK(pc_CallState_NextAttempt(&c, now, &timeout) == kPc_Attempt_Timed && timeout == 400);
  now += 200;
  CHECK(pc_CallState_OnError(&c, now, 0, NAN, &sleep) == kPc_Verdict_Retry);
  CHECK(pc_CallState_NextAttempt(&c, now, &timeout) == kPc_Attempt_Timed && timeout == 200);
  now += 200;
  /* A sleep (even of 0) that would reach the call's deadline: give up. */
  CHECK(pc_CallState_OnError(&c, now, 0, NAN, &sleep) == kPc_Verdict_NoTime && sleep == 0);
  CHECK(c.attempts == 3 && now == 600);
}

/* Timeout 3, Retry{1, 4, 2, timeout 10}: the third attempt fails with
 * 0.5 s left; the drawn sleep of 4 would pass the call's deadline, so the
 * call gives up without sleeping. */
static void test_sleep_past_call_deadline(void) {
  pc_RetryParams r = {1, 4, 2, 10, 0, 0};
  pc_TimeoutParams t = fixed(3);
  pc_CallState c;
  double sleep, timeout;
  pc_CallState_Start(&c, &r, &t, 100);
  CHECK(pc_CallState_OnError(&c, 100, 0.5, NAN, &sleep) == kPc_Verdict_Retry && sleep == 0.5);
  CHECK(pc_CallState_NextAttempt(&c, 100.5, &timeout) == kPc_Attempt_Timed && timeout == 2.5);
  CHECK(pc_CallState_OnError(&c, 100.5, 1, NAN, &sleep) == kPc_Verdict_Retry && sleep == 2);
  CHECK(pc_CallState_NextAttempt(&c, 102.5, &timeout) == kPc_Attempt_Timed && timeout == 0.5);
  CHECK(pc_CallState_OnError(&c, 102.5, 1, NAN, &sleep) == kPc_Verdict_NoTime && sleep == 0);
  CHECK(c.attempts == 3);
  /* A sleep that would end exactly at the deadline gives up too. */
  pc_CallState_Start(&c, &r, &t, 100);
  CHECK(pc_CallState_OnError(&c, 100, 1, NAN, &sleep) == kPc_Verdict_Retry && sleep == 1);
  CHECK(pc_CallState_NextAttempt(&c, 101, &timeout) == kPc_Attempt_Timed && timeout == 2);
  CHECK(pc_CallState_OnError(&c, 101, 1, NAN, &sleep) == kPc_Verdict_NoTime);
  /* A pushback is held to the same rule. */
  pc_CallState_Start(&c, &r, &t, 100);
  CHECK(pc_CallState_OnError(&c, 100, 1, 3, &sleep) == kPc_Verdict_NoTime);
  CHECK(pc_CallState_OnError(&c, 100, 1, 2.5, &sleep) == kPc_Verdict_Retry && sleep == 2.5);
  CHECK(c.attempts == 1);
}

/* An exponential timeout: min(next value, time left to its deadline). */
static void test_exponential_attempts(void) {
  pc_RetryParams r;
  pc_RetryParams_Default(&r);
  pc_TimeoutParams t = {kPc_Timeout_Exponential, 1, 8, 2, 10};
  pc_CallState c;
  double timeout;
  pc_CallState_Start(&c, &r, &t, 100);
  CHECK(pc_CallState_NextAttempt(&c, 101, &timeout) == kPc_Attempt_Timed && timeout == 2);
  CHECK(pc_CallState_NextAttempt(&c, 103, &timeout) == kPc_Attempt_Timed && timeout == 4);
  CHECK(pc_CallState_NextAttempt(&c, 107, &timeout) == kPc_Attempt_Timed && timeout == 3);
  CHECK(pc_CallState_NextAttempt(&c, 110, &timeout) == kPc_Attempt_NoTime);
  CHECK(c.attempts == 4);
}

static void test_max_attempts_and_pushback(void) {
  pc_RetryParams r;
  pc_RetryParams_Default(&r);
  r.max_attempts = 3;
  pc_TimeoutParams t = none();
  pc_CallState c;
  double sleep, timeout;
  pc_CallState_Start(&c, &r, &t, 0);
  CHECK(pc_CallState_OnError(&c, 0, 1, NAN, &sleep) == kPc_Verdict_Retry);
  CHECK(pc_CallState_NextAttempt(&c, 0, &timeout) == kPc_Attempt_Untimed);
  CHECK(pc_CallState_OnError(&c, 0, 1, NAN, &sleep) == kPc_Verdict_Retry);
  CHECK(pc_CallState_NextAttempt(&c, 0, &timeout) == kPc_Attempt_Untimed);
  CHECK(pc_CallState_OnError(&c, 0, 1, NAN, &sleep) == kPc_Verdict_MaxAttempts);
  CHECK(c.attempts == 3);

  /* A pushback below min_pushback (by default 1 s, the initial backoff)
   * sleeps min_pushback: a server sending 0 cannot make the client hammer. */
  pc_RetryParams_Default(&r);
  pc_CallState_Start(&c, &r, &t, 0);
  CHECK(pc_CallState_OnError(&c, 0, 1, 0, &sleep) == kPc_Verdict_Retry && sleep == 1);
  CHECK(pc_CallState_OnError(&c, 0, 1, 0.25, &sleep) == kPc_Verdict_Retry && sleep == 1);
  CHECK(pc_CallState_OnError(&c, 0, 1, 1.5, &sleep) == kPc_Verdict_Retry && sleep == 1.5);

  pc_RetryParams_Default(&r);
  r.min_pushback = 0; /* the caller opted in to the server's word */
  pc_CallState_Start(&c, &r, &t, 0);
  CHECK(pc_CallState_OnError(&c, 0, 1, 0.25, &sleep) == kPc_Verdict_Retry && sleep == 0.25);
  /* The cap grew past the pushback's turn: the next drawn sleep is 2. */
  CHECK(pc_CallState_OnError(&c, 0, 1, NAN, &sleep) == kPc_Verdict_Retry && sleep == 2);
  CHECK(pc_CallState_OnError(&c, 0, 1, 500, &sleep) == kPc_Verdict_Deadline);
  CHECK(pc_CallState_OnError(&c, 0, 1, -1, &sleep) == kPc_Verdict_PushbackStop);
}

static pc_PlanKey key(uint64_t r, uint64_t t, unsigned char ctag) {
  pc_PlanKey k;
  memset(&k, 0, sizeof k);
  k.tag[0] = 1;
  k.bits[0] = r;
  k.tag[1] = 2;
  k.bits[1] = t;
  k.tag[2] = ctag;
  return k;
}

static void test_plan_cache(void) {
  pc_PlanCache *c = pc_PlanCache_New(2, NULL, NULL);
  CHECK(c != NULL);
  if (c == NULL) return;
  pc_PlanCacheInfo info;
  pc_PlanKey a = key(1, 10, 0), b = key(2, 10, 0), d = key(3, 10, 0);
  CHECK(pc_PlanCache_Find(c, &a) == -1);
  int sa = pc_PlanCache_Insert(c, &a);
  int sb = pc_PlanCache_Insert(c, &b);
  CHECK(sa != sb && sa >= 0 && sa < 2 && sb >= 0 && sb < 2);
  CHECK(pc_PlanCache_Find(c, &a) == sa); /* a is now the most recent */
  int sd = pc_PlanCache_Insert(c, &d);   /* evicts b, the least recent */
  CHECK(sd == sb);
  CHECK(pc_PlanCache_Find(c, &b) == -1);
  CHECK(pc_PlanCache_Find(c, &a) == sa);
  CHECK(pc_PlanCache_Find(c, &d) == sd);
  /* Tags tell kinds apart with the same bits ('true' is not '1'). */
  pc_PlanKey a2 = key(1, 10, 5);
  CHECK(pc_PlanCache_Find(c, &a2) == -1);
  pc_PlanCache_GetInfo(c, &info);
  CHECK(info.hits == 3 && info.misses == 3 && info.size == 2 && info.capacity == 2);
  pc_PlanCache_Free(c);
  pc_PlanCache_Free(NULL);

  /* Capacity 0 caches nothing; a caller-owned block needs no free. */
  unsigned char mem[256];
  CHECK(pc_PlanCache_Bytes(0) <= sizeof mem);
  pc_PlanCache *z = pc_PlanCache_Init(mem, 0);
  CHECK(pc_PlanCache_Find(z, &a) == -1);
  CHECK(pc_PlanCache_Insert(z, &a) == -1);
  pc_PlanCache_GetInfo(z, &info);
  CHECK(info.size == 0 && info.misses == 1);

  /* A long run against a model: the cache always holds the last 4 distinct. */
  pc_PlanCache *m = pc_PlanCache_New(4, NULL, NULL);
  CHECK(m != NULL);
  if (m == NULL) return;
  uint64_t recent[4] = {0, 0, 0, 0}; /* most recent first; 0 = empty */
  unsigned s = 12345;
  for (int i = 0; i < 5000; i++) {
    s = s * 1103515245u + 12345u;
    uint64_t id = 1 + (s >> 16) % 7;
    pc_PlanKey k = key(id, 0, 0);
    int in_model = 0, at = 3;
    for (int j = 0; j < 4; j++)
      if (recent[j] == id) in_model = 1, at = j;
    int slot = pc_PlanCache_Find(m, &k);
    CHECK((slot >= 0) == in_model);
    if (slot < 0) CHECK(pc_PlanCache_Insert(m, &k) >= 0);
    for (int j = at; j > 0; j--) recent[j] = recent[j - 1];
    recent[0] = id;
  }
  pc_PlanCache_Free(m);

  for (long n = 1;; n++) {
    fail_reset(n);
    pc_PlanCache *f = pc_PlanCache_New(4, fail_alloc, NULL);
    pc_PlanCache_Free(f);
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
}

static void test_clock(void) {
  double a = pc_Clock_Monotonic();
  CHECK(pc_Clock_Sleep(0.002) == 0);
  double b = pc_Clock_Monotonic();
  CHECK(b - a >= 0.002);
  CHECK(pc_Clock_Sleep(0) == 0);
  CHECK(pc_Clock_Sleep(-1) == 0);
  CHECK(pc_Clock_Sleep(NAN) == 0);
  CHECK(pc_Clock_Monotonic() >= b);
}

int main(void) {
  test_backoff();
  test_check();
  test_first_timeouts();
  test_retry_deadline();
  test_attempt_budget();
  test_sleep_past_call_deadline();
  test_exponential_attempts();
  test_max_attempts_and_pushback();
  test_plan_cache();
  test_clock();
  return CHECK_DONE();
}
