/* Host I/O of a channel (channel.h, host_io): connections named by ids
 * that a host driver connects and moves bytes for, while the channel keeps
 * its own logic: a failed connect ends the calls UNAVAILABLE with the
 * driver's words and backs off, the client preface comes out and stays
 * until reported written, a lost connection ends its calls, deadlines end
 * calls in pc_GrpcChannel_HostTick, which says when the next timer falls
 * due, bytes that are no HTTP/2 break the connection (once its GOAWAY is
 * out), ids no longer listed are ignored, calls with a wake token are
 * listed as they end, a call refused by a GOAWAY runs again on a new
 * connection, a server that sends no SETTINGS within connect_timeout
 * fails the attempt and its call lost, and every allocation failing leaks
 * nothing. The data
 * path against real servers is spec/driver_spec.lua. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "base/clock.h"
#include "net/channel.h"

#include <stdio.h>
#include <string.h>

/* A step of a scenario: prints where it went wrong (a scenario also runs
 * with allocations failing, where steps may fail quietly). */
#define STEP(cond) (step_at((cond), __LINE__))
static int quiet = 0;
static int step_at(int ok, int line) {
  if (!ok && !quiet) fprintf(stderr, "hostio_test.c:%d: step failed\n", line);
  return ok;
}

/* A host-I/O channel whose reconnection backoff is 'backoff' seconds
 * flat; 'wait_for_ready' as channel.h. */
static pc_GrpcChannel *backoff_channel(pc_Alloc *alloc, double backoff,
                                       pc_GrpcWaitForReady wait_for_ready) {
  pc_GrpcChannelOptions o;
  memset(&o, 0, sizeof o);
  o.host = "example.test";
  o.port = "50051";
  o.host_io = 1;
  o.backoff_set = 1;
  o.backoff_initial = backoff;
  o.backoff_multiplier = 1;
  o.backoff_max = backoff;
  o.min_connect_timeout = 10;
  o.wait_for_ready = wait_for_ready;
  pc_Error err;
  pc_Error_Init(&err);
  return pc_GrpcChannel_New(&o, alloc, NULL, &err);
}

static pc_GrpcChannel *host_channel(pc_Alloc *alloc) {
  return backoff_channel(alloc, 0.02, kPc_GrpcWaitForReady_Backoff);
}

static pc_GrpcCall *start(pc_GrpcChannel *ch, double timeout) {
  pc_GrpcCallSettings s;
  memset(&s, 0, sizeof s);
  s.timeout = timeout;
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcCall *call = pc_GrpcChannel_Start(ch, "/a.B/C", &s, &err);
  if (call) {
    pc_GrpcCall_Send(call, "hi", 2);
    pc_GrpcCall_CloseSend(call);
  }
  return call;
}

static int ended(const pc_GrpcCall *call, pc_Code code, const char *msg) {
  const pc_GrpcStatus *st = pc_GrpcCall_Status(call);
  return st != NULL && st->code == code && st->message_len == strlen(msg) &&
         memcmp(st->message, msg, st->message_len) == 0;
}

/* The one open connection's id (0: none, or more than one). */
static unsigned only_conn(pc_GrpcChannel *ch, int *ready) {
  pc_GrpcHostConn c[4];
  if (pc_GrpcChannel_HostConns(ch, c, 4) != 1) return 0;
  *ready = c[0].ready;
  return c[0].id;
}

/* A host-I/O channel ('*ch') with one call started on it, or NULL (and
 * nothing left) when an allocation failed. */
static pc_GrpcCall *one_call(pc_Alloc *alloc, pc_GrpcChannel **ch) {
  *ch = host_channel(alloc);
  pc_GrpcCall *a = *ch ? start(*ch, 5) : NULL;
  if (a == NULL) pc_GrpcChannel_Free(*ch);
  return a;
}

/* A failed connect, then a connection that connects, writes its preface
 * in two parts and is lost; 1 when every step went as it should. */
static int lifecycle(pc_Alloc *alloc, int *ok) {
  *ok = 0;
  pc_GrpcChannel *ch;
  pc_GrpcCall *a = one_call(alloc, &ch);
  if (a == NULL) return 0;
  int good = 1, ready = -1;
  const char *p;
  unsigned id = only_conn(ch, &ready);
  good &= STEP(id != 0 && ready == 0);
  good &= STEP(pc_GrpcChannel_HostOutput(ch, id, &p) == 0); /* not connected yet */
  pc_GrpcChannel_HostConnected(ch, id, 0, "connect to example.test:50051: refused");
  good &= STEP(ended(a, kPc_Code_Unavailable, "connect to example.test:50051: refused"));
  good &= STEP(pc_GrpcCall_Drained(a));
  pc_GrpcCall_Free(a);
  good &= STEP(pc_GrpcChannel_HostConns(ch, NULL, 0) == 0);

  /* Without wait_for_ready a call during the backoff fails at once. */
  {
    pc_GrpcChannel *fast = backoff_channel(alloc, 5, kPc_GrpcWaitForReady_No);
    pc_GrpcCall *f = fast ? start(fast, 5) : NULL;
    unsigned fid = f ? only_conn(fast, &ready) : 0;
    good &= STEP(fast == NULL || pc_GrpcChannel_NextAttempt(fast) == 0); /* nothing failed yet */
    if (fid) pc_GrpcChannel_HostConnected(fast, fid, 0, "connect to example.test:50051: refused");
    if (f) pc_GrpcCall_Free(f);
    if (fid) { /* the hint's figure: the 5 s flat backoff, from the failed attempt */
      double in = pc_GrpcChannel_NextAttempt(fast);
      good &= STEP(in > 4 && in <= 5);
    }
    f = fid ? start(fast, 5) : NULL;
    good &= STEP(f != NULL && ended(f, kPc_Code_Unavailable,
                                    "connect to example.test:50051: refused (reconnection backoff: "
                                    "the next attempt in 5 s; a transport with wait_for_ready "
                                    "waits for it)"));
    if (f) pc_GrpcCall_Free(f);
    pc_GrpcChannel_Free(fast);
  }

  /* With wait_for_ready the backoff holds the next attempt back: the call
   * waits for it. */
  pc_GrpcCall *b = start(ch, 5);
  if (b == NULL) {
    pc_GrpcChannel_Free(ch);
    return 0;
  }
  good &= STEP(pc_GrpcCall_Status(b) == NULL && pc_GrpcChannel_HostConns(ch, NULL, 0) == 0);
  good &= STEP(!pc_GrpcCall_Drained(b)); /* it waits */
  double next = pc_GrpcChannel_HostTick(ch);
  good &= STEP(next > 0 && next <= 0.02);
  pc_Clock_Sleep(0.025);
  unsigned v0 = pc_GrpcChannel_HostVersion(ch);
  pc_GrpcChannel_HostTick(ch);
  unsigned id2 = only_conn(ch, &ready);
  good &= STEP(id2 != 0 && id2 != id && ready == 0);
  unsigned v1 = pc_GrpcChannel_HostVersion(ch); /* a connection opened */
  good &= STEP(v1 != v0);
  pc_GrpcChannel_HostConnected(ch, id2, 1, NULL);
  pc_GrpcChannel_HostTick(ch);
  good &= STEP(only_conn(ch, &ready) == id2 && ready == 1);
  unsigned v2 = pc_GrpcChannel_HostVersion(ch); /* it became ready */
  good &= STEP(v2 != v1);
  size_t n = pc_GrpcChannel_HostOutput(ch, id2, &p);
  good &= STEP(n > 24 && memcmp(p, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24) == 0);
  pc_GrpcChannel_HostWrote(ch, id2, 10);
  size_t rest = pc_GrpcChannel_HostOutput(ch, id2, &p);
  good &= STEP(rest == n - 10 && memcmp(p, "/2.0", 4) == 0);
  pc_GrpcChannel_HostWrote(ch, id2, rest);
  pc_GrpcChannel_HostTick(ch);
  good &= STEP(pc_GrpcChannel_HostVersion(ch) == v2); /* bytes moved: the list is the same */

  /* Ids never given or gone are ignored. */
  good &= STEP(pc_GrpcChannel_HostOutput(ch, id, &p) == 0);
  good &= STEP(pc_GrpcChannel_HostRecv(ch, 9999, "x", 1) == 0);
  pc_GrpcChannel_HostLost(ch, id, "stale");
  good &= STEP(pc_GrpcCall_Status(b) == NULL);

  unsigned v3 = pc_GrpcChannel_HostVersion(ch);
  pc_GrpcChannel_HostLost(ch, id2, "read from example.test:50051: connection reset");
  good &= STEP(pc_GrpcChannel_HostVersion(ch) != v3); /* the connection closed */
  good &= STEP(ended(b, kPc_Code_Unavailable, "read from example.test:50051: connection reset"));
  pc_GrpcCall_Free(b);
  good &= STEP(pc_GrpcChannel_HostConns(ch, NULL, 0) == 0);
  pc_GrpcChannel_Free(ch);
  *ok = good;
  return 1;
}

/* A deadline on a connected connection ends the call in the tick; bytes
 * that are no HTTP/2 end the other. Each, given a wake token (wake.h), is
 * listed as it ends. */
static int deadline_and_garbage(pc_Alloc *alloc, int *ok) {
  *ok = 0;
  pc_GrpcChannel *ch = host_channel(alloc);
  if (ch == NULL) return 0;
  pc_GrpcCall *a = start(ch, 0.02);
  pc_GrpcCall *b = a ? start(ch, 5) : NULL;
  if (b == NULL) {
    pc_GrpcCall_Free(a);
    pc_GrpcChannel_Free(ch);
    return 0;
  }
  int good = 1, ready = 0;
  pc_GrpcWakeList *w = pc_GrpcChannel_Wake(ch);
  const uint64_t *items;
  pc_GrpcCall_SetWakeToken(a, 1);
  pc_GrpcCall_SetWakeToken(b, 2);
  unsigned id = only_conn(ch, &ready); /* both calls on one connection */
  pc_GrpcChannel_HostConnected(ch, id, 1, NULL);
  double next = pc_GrpcChannel_HostTick(ch);
  good &= STEP(id != 0 && next > 0 && next <= 0.02);
  pc_GrpcWakeList_Clear(w); /* what their requests going out listed */
  pc_Clock_Sleep(0.025);
  pc_GrpcChannel_HostTick(ch);
  good &= STEP(ended(a, kPc_Code_DeadlineExceeded,
                     "deadline exceeded (connected to example.test:50051, no HTTP/2 SETTINGS from "
                     "the server yet)"));
  good &= STEP(pc_GrpcCall_Status(b) == NULL);
  good &= STEP(pc_GrpcWakeList_Items(w, &items) == 1 && items[0] == 1);
  pc_GrpcWakeList_Clear(w);
  pc_GrpcChannel_HostRecv(ch, id, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
  const char *p;
  for (size_t n; (n = pc_GrpcChannel_HostOutput(ch, id, &p)) > 0;)
    pc_GrpcChannel_HostWrote(ch, id, n);
  pc_GrpcChannel_HostTick(ch);
  const pc_GrpcStatus *st = pc_GrpcCall_Status(b);
  good &= STEP(st != NULL && st->code == kPc_Code_Unavailable &&
               strstr(st->message, "expected SETTINGS frame") != NULL);
  good &= STEP(pc_GrpcWakeList_Items(w, &items) == 1 && items[0] == 2);
  pc_GrpcCall_Free(a);
  pc_GrpcCall_Free(b);
  pc_GrpcChannel_HostTick(ch);
  good &= STEP(pc_GrpcChannel_HostConns(ch, NULL, 0) == 0);
  pc_GrpcChannel_Free(ch);
  *ok = good;
  return 1;
}

/* A GOAWAY taking none of the calls refuses them: the tick runs each
 * again on a new connection (gRFC A6 transparent retry) although nobody
 * reads it, and lists its wake token. */
static int refused_again(pc_Alloc *alloc, int *ok) {
  *ok = 0;
  pc_GrpcChannel *ch;
  pc_GrpcCall *a = one_call(alloc, &ch);
  if (a == NULL) return 0;
  pc_GrpcCall_SetWakeToken(a, 7);
  int good = 1, ready = 0;
  unsigned id = only_conn(ch, &ready);
  pc_GrpcChannel_HostConnected(ch, id, 1, NULL);
  const char *p;
  for (size_t n; (n = pc_GrpcChannel_HostOutput(ch, id, &p)) > 0;)
    pc_GrpcChannel_HostWrote(ch, id, n);
  pc_GrpcWakeList *w = pc_GrpcChannel_Wake(ch);
  pc_GrpcWakeList_Clear(w);
  /* The server's SETTINGS, then GOAWAY NO_ERROR with last stream id 0. */
  static const unsigned char goaway[] = {0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 8, 7,
                                         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  pc_GrpcChannel_HostRecv(ch, id, goaway, sizeof goaway);
  const uint64_t *items;
  good &= STEP(pc_GrpcWakeList_Items(w, &items) >= 1 && items[0] == 7);
  pc_GrpcChannel_HostTick(ch);
  pc_GrpcHostConn c[4];
  size_t n = pc_GrpcChannel_HostConns(ch, c, 4);
  good &= STEP(pc_GrpcCall_Status(a) == NULL);                        /* running again */
  good &= STEP(n >= 1 && n <= 4 && c[0].id != id && c[0].ready == 0); /* the newest first */
  pc_GrpcCall_Free(a);
  pc_GrpcChannel_Free(ch);
  *ok = good;
  return 1;
}

/* gRPC's wait-for-ready (kPc_GrpcWaitForReady_Deadline): a refused
 * connect leaves the call waiting, listed by its wake token; the attempt
 * after the backoff carries it. A call whose deadline comes before the
 * next attempt waits for it too and ends DEADLINE_EXCEEDED naming the
 * failed attempt. */
static int waits_through_failures(pc_Alloc *alloc, int *ok) {
  *ok = 0;
  pc_GrpcChannel *ch = backoff_channel(alloc, 0.02, kPc_GrpcWaitForReady_Deadline);
  pc_GrpcChannel *slow = ch ? backoff_channel(alloc, 5, kPc_GrpcWaitForReady_Deadline) : NULL;
  pc_GrpcCall *a = slow ? start(ch, 5) : NULL;
  pc_GrpcCall *d = a ? start(slow, 0.03) : NULL;
  if (d == NULL) {
    pc_GrpcCall_Free(a);
    pc_GrpcChannel_Free(slow);
    pc_GrpcChannel_Free(ch);
    return 0;
  }
  pc_GrpcCall_SetWakeToken(a, 3);
  int good = 1, ready = -1;
  const uint64_t *items;
  pc_GrpcWakeList *w = pc_GrpcChannel_Wake(ch);
  pc_GrpcWakeList_Clear(w);
  unsigned id = only_conn(ch, &ready);
  pc_GrpcChannel_HostConnected(ch, id, 0, "connect to example.test:50051: refused");
  good &= STEP(id != 0 && pc_GrpcCall_Status(a) == NULL); /* waiting, not failed */
  good &= STEP(pc_GrpcChannel_HostConns(ch, NULL, 0) == 0);
  good &= STEP(pc_GrpcWakeList_Items(w, &items) >= 1 && items[0] == 3);
  double next = pc_GrpcChannel_HostTick(ch);
  good &= STEP(next > 0 && next <= 0.02);
  pc_Clock_Sleep(0.025);
  pc_GrpcChannel_HostTick(ch);
  unsigned id2 = only_conn(ch, &ready);
  good &= STEP(id2 != 0 && id2 != id && ready == 0 && pc_GrpcCall_Status(a) == NULL);
  pc_GrpcChannel_HostConnected(ch, id2, 1, NULL);
  const char *p;
  size_t n = pc_GrpcChannel_HostOutput(ch, id2, &p);
  good &= STEP(n > 24 && memcmp(p, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24) == 0);
  good &= STEP(pc_GrpcCall_Status(a) == NULL);

  unsigned sid = only_conn(slow, &ready);
  pc_GrpcChannel_HostConnected(slow, sid, 0, "connect to example.test:50051: refused");
  good &= STEP(sid != 0 && pc_GrpcCall_Status(d) == NULL); /* the next attempt is 5 s away */
  pc_Clock_Sleep(0.035);
  pc_GrpcChannel_HostTick(slow);
  good &= STEP(ended(d, kPc_Code_DeadlineExceeded,
                     "deadline exceeded waiting for a connection (the last attempt: connect to "
                     "example.test:50051: refused)"));
  pc_GrpcCall_Free(d);
  pc_GrpcCall_Free(a);
  pc_GrpcChannel_Free(slow);
  pc_GrpcChannel_Free(ch);
  *ok = good;
  return 1;
}

/* A connection whose server sends no SETTINGS within connect_timeout
 * (0.03 s) is a failed attempt though it connected: its wait-for-ready
 * call, written, ends UNAVAILABLE lost and not unsent and is not sent
 * again (no new connection), and the backoff goes on growing across such
 * attempts (0.05 s, then 0.1 s) although each reset it as it connected.
 * One whose server's SETTINGS came stays past the bound; one idle then is
 * closed without counting. */
static int no_settings(int *ok) {
  *ok = 0;
  pc_GrpcChannelOptions o;
  memset(&o, 0, sizeof o);
  o.host = "example.test";
  o.port = "50051";
  o.host_io = 1;
  o.backoff_set = 1;
  o.backoff_initial = 0.05;
  o.backoff_multiplier = 2;
  o.backoff_max = 10;
  o.min_connect_timeout = 10;
  o.connect_timeout = 0.03;
  o.wait_for_ready = kPc_GrpcWaitForReady_Deadline;
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcChannel *ch = pc_GrpcChannel_New(&o, NULL, NULL, &err);
  pc_GrpcCall *a = ch ? start(ch, 5) : NULL;
  if (a == NULL) {
    pc_GrpcChannel_Free(ch);
    return 0;
  }
  static const char want[] =
      "connect to example.test:50051: no HTTP/2 SETTINGS from the server within 0.03 s";
  int good = 1, ready = 0;
  const char *p;
  for (int round = 0; round < 2; round++) {
    unsigned id = only_conn(ch, &ready);
    pc_GrpcChannel_HostConnected(ch, id, 1, NULL);
    for (size_t n; (n = pc_GrpcChannel_HostOutput(ch, id, &p)) > 0;)
      pc_GrpcChannel_HostWrote(ch, id, n);
    double next = pc_GrpcChannel_HostTick(ch);
    good &= STEP(id != 0 && pc_GrpcCall_Status(a) == NULL && next > 0 && next <= 0.03);
    good &= STEP(pc_GrpcChannel_NextAttempt(ch) == 0); /* ready: the backoff reset */
    pc_Clock_Sleep(0.035);
    pc_GrpcChannel_HostTick(ch);
    const pc_GrpcStatus *st = pc_GrpcCall_Status(a);
    good &= STEP(ended(a, kPc_Code_Unavailable, want) && st->lost && !st->unsent);
    good &= STEP(pc_GrpcChannel_HostConns(ch, NULL, 0) == 0); /* not sent again */
    double in = pc_GrpcChannel_NextAttempt(ch);
    good &= STEP(round == 0 ? in > 0 && in <= 0.05 : in > 0.05 && in <= 0.1);
    pc_GrpcCall_Free(a);
    a = start(ch, 5); /* waits for the backoff (wait-for-ready) */
    if (a == NULL) break;
    good &= STEP(pc_GrpcCall_Status(a) == NULL && pc_GrpcChannel_HostConns(ch, NULL, 0) == 0);
    pc_Clock_Sleep(in + 0.005);
    pc_GrpcChannel_HostTick(ch);
  }
  /* The third attempt: the server's SETTINGS (empty) come in time. */
  unsigned id = a ? only_conn(ch, &ready) : 0;
  good &= STEP(id != 0);
  if (id) {
    pc_GrpcChannel_HostConnected(ch, id, 1, NULL);
    static const unsigned char settings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    pc_GrpcChannel_HostRecv(ch, id, settings, sizeof settings);
    pc_Clock_Sleep(0.035);
    pc_GrpcChannel_HostTick(ch);
    good &= STEP(pc_GrpcCall_Status(a) == NULL && only_conn(ch, &ready) == id && ready);
  }
  pc_GrpcCall_Free(a);
  pc_GrpcChannel_Free(ch);

  /* A connection that carries no call past its time without SETTINGS (a
   * host driver reads only connections with calls: they may wait unread)
   * is closed without counting a failed attempt, in the tick or when a
   * call would take it (the call then goes to a new connection). */
  for (int by_tick = 0; by_tick < 2; by_tick++) {
    pc_GrpcChannel *idle = pc_GrpcChannel_New(&o, NULL, NULL, &err);
    pc_GrpcCall *c = idle ? start(idle, 5) : NULL;
    id = c ? only_conn(idle, &ready) : 0;
    good &= STEP(id != 0);
    if (id) pc_GrpcChannel_HostConnected(idle, id, 1, NULL);
    pc_GrpcCall_Free(c); /* the connection stays, idle */
    good &= STEP(idle == NULL || (only_conn(idle, &ready) == id && ready));
    pc_Clock_Sleep(0.035);
    if (by_tick && idle) {
      unsigned v = pc_GrpcChannel_HostVersion(idle);
      pc_GrpcChannel_HostTick(idle);
      good &= STEP(pc_GrpcChannel_HostConns(idle, NULL, 0) == 0 &&
                   pc_GrpcChannel_HostVersion(idle) != v);
    }
    c = idle ? start(idle, 5) : NULL;
    unsigned id2 = c ? only_conn(idle, &ready) : 0;
    good &= STEP(id2 != 0 && id2 != id && !ready && pc_GrpcCall_Status(c) == NULL);
    good &= STEP(idle == NULL || pc_GrpcChannel_NextAttempt(idle) == 0);
    pc_GrpcCall_Free(c);
    pc_GrpcChannel_Free(idle);
  }
  *ok = good;
  return 1;
}

/* A wait-for-ready call through many failed connection attempts: each
 * attempt opens its stream anew, and the memory it holds stays flat (the
 * stream of an attempt that failed does not pile up in the call's arena). */
static int attempts_stay_flat(int *ok) {
  *ok = 0;
  fail_reset(0);
  pc_GrpcChannel *ch = backoff_channel(fail_alloc, 0, kPc_GrpcWaitForReady_Deadline);
  if (ch == NULL) return 0;
  pc_GrpcPair md[12];
  static char value[400];
  memset(value, 'v', sizeof value);
  for (int i = 0; i < 12; i++) {
    static char keys[12][8];
    snprintf(keys[i], sizeof keys[i], "x-k%d", i);
    md[i].key = keys[i];
    md[i].key_len = strlen(keys[i]);
    md[i].value = value;
    md[i].value_len = sizeof value;
  }
  pc_GrpcCallSettings s;
  memset(&s, 0, sizeof s);
  s.timeout = 600;
  s.metadata = md;
  s.metadata_count = 12;
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcCall *a = pc_GrpcChannel_Start(ch, "/a.B/C", &s, &err);
  if (a == NULL) {
    pc_GrpcChannel_Free(ch);
    return 0;
  }
  pc_GrpcCall_Send(a, "hi", 2);
  pc_GrpcCall_CloseSend(a);
  int good = 1, ready;
  long long after[2] = {0, 0};
  for (int i = 0; i < 200; i++) {
    pc_GrpcChannel_HostTick(ch);
    unsigned id = only_conn(ch, &ready);
    good &= STEP(id != 0 && !ready && pc_GrpcCall_Status(a) == NULL);
    if (id == 0) break;
    pc_GrpcChannel_HostConnected(ch, id, 0, "connect to example.test:50051: refused");
    if (i == 9) after[0] = fail_live;
  }
  after[1] = fail_live;
  if (after[1] > after[0] + 4096)
    fprintf(stderr, "hostio_test.c: %lld bytes after 10 attempts, %lld after 200\n", after[0],
            after[1]);
  good &= STEP(after[1] <= after[0] + 4096);
  pc_GrpcCall_Free(a);
  pc_GrpcChannel_Free(ch);
  good &= STEP(fail_live == 0);
  *ok = good;
  return 1;
}

int main(void) {
  int ok = 0;
  CHECK(lifecycle(NULL, &ok));
  CHECK(ok);
  CHECK(deadline_and_garbage(NULL, &ok));
  CHECK(ok);
  CHECK(refused_again(NULL, &ok));
  CHECK(ok);
  CHECK(waits_through_failures(NULL, &ok));
  CHECK(ok);
  CHECK(attempts_stay_flat(&ok));
  CHECK(ok);
  CHECK(no_settings(&ok)); /* timed: not in the failing-allocation rounds */
  CHECK(ok);
  quiet = 1;
  for (long n = 1;; n++) {
    fail_reset(n);
    int ran = lifecycle(fail_alloc, &ok);
    int ran2 = deadline_and_garbage(fail_alloc, &ok);
    int ran3 = refused_again(fail_alloc, &ok);
    int ran4 = waits_through_failures(fail_alloc, &ok);
    if (fail_live != 0) fprintf(stderr, "leak %lld bytes failing allocation %ld\n", fail_live, n);
    CHECK(fail_live == 0);
    if (!fail_hit) {
      CHECK(ran && ran2 && ran3 && ran4);
      break;
    }
  }
  return CHECK_DONE();
}
