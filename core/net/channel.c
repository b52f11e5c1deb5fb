/* gRPC channels over the engine and the built-in driver (see channel.h). */
#define _POSIX_C_SOURCE 200809L

#include "net/channel.h"

#include "base/clock.h"
#include "net/socket.h"

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Bytes read from one connection per pump round, at most (then the next
 * connection gets its turn). */
#define READ_ROUND              ((size_t)1024 * 1024)
/* Request bytes kept to run a refused call again; a call sending more is
 * not retried transparently. */
#define REPLAY_MAX              ((size_t)4 * 1024 * 1024)
#define MAX_TRANSPARENT_RETRIES 3
/* The most bytes of a first request message kept for replay in the call's
 * arena (more, or more messages: a buffer of their own). */
#define REPLAY_IN_ARENA         ((size_t)1024)
/* Arenas of freed calls kept, reset, for the next calls (each holds its
 * call, its stream and what they keep: most calls then allocate nothing
 * for them), and the most bytes such an arena may hold to be kept. */
#define SPARE_ARENAS            4
#define SPARE_ARENA_MAX         ((size_t)4 * 1024)

typedef struct Conn Conn;

struct Conn {
  pc_GrpcChannel *ch;
  Conn *next;
  pc_NetSocket *sock; /* NULL once closed */
  pc_GrpcEngine *engine;
  int ready;               /* connected (and TLS done) */
  size_t calls;            /* calls attached */
  double connect_by;       /* monotonic seconds: not ready by then is a failed attempt, */
  double connect_deadline; /* ...the same for the caller's connect_timeout (< 0: none); */
  /* ...and no SETTINGS of the server's by either, once ready (check_conns) */
  double connect_window; /* seconds from the attempt's start to 'connect_by' */
  double backoff_before; /* the backoff its becoming ready reset (settings_missing) */
  double last_recv;      /* when bytes last arrived (keepalive) */
  double ping_sent;      /* when the pending keepalive PING went out */
  unsigned id;           /* names it to a host driver (host_io) */
  int host_up;           /* host_io: the host connected it (TLS may still be under way) */
};

/* Reconnection backoff of a target (channel.h). */
typedef struct {
  double initial, multiplier, jitter, max, min_connect;
  double current;    /* the backoff after the last failed attempt; 0: none failed */
  double retry_at;   /* monotonic seconds: no new attempt before */
  unsigned failures; /* attempts failed so far (pick_conn tells a failed one from no memory) */
  uint64_t rng;
  char *why; /* how the last attempt failed (NULL: none did, or no memory for it) */
} Backoff;

struct pc_GrpcChannel {
  pc_Alloc *alloc;
  void *ud;
  pc_GrpcChannelOptions o; /* strings owned */
  char *authority;
  char *where;          /* "host:port" or "unix:path", for messages */
  pc_NetTlsClient *tls; /* with o.tls: shared by the connections (made at the first) */
  /* Why TLS is not available in this process (pc_NetTls_Available: the
   * Lua module without its protocall_tls.so): nothing mends it while the
   * process runs, so no connection is tried again and every call fails
   * INTERNAL with it (gRPC's lame channel). NULL: available (or no memory
   * to keep why, then the backoff retries as for any failed attempt). Any
   * other failed TLS setup (a file that does not load, perhaps being
   * rewritten; memory) fails the attempt: the backoff, then a new setup. */
  char *lame;
  Conn *conns;
  pc_GrpcCall *calls;
  size_t live_calls;
  int closing; /* freed: the last call frees it */
  int closed;  /* pc_GrpcChannel_Close: no new call */
  Backoff backoff;
  unsigned last_id;     /* of the newest connection */
  pc_GrpcWakeList wake; /* the calls' (wake.h) */
  /* So a round with many calls in flight scans none of them: */
  double due;            /* no call's deadline is before this (-1: none has one) */
  int any_waiting;       /* a call may wait for the backoff (start_waiting) */
  pc_GrpcCall *check;    /* calls whose stream got headers or ended: retry_refused's */
  unsigned goaways;      /* GOAWAY frames received (pc_GrpcChannel_Goaways) */
  unsigned host_version; /* changes with what pc_GrpcChannel_HostConns lists but the calls */
  pc_Arena *spare[SPARE_ARENAS]; /* reset arenas of freed calls (take_arena) */
  size_t spares;
  size_t arena_first; /* a new call arena's first block: what the last freed call's took */
};

struct pc_GrpcCall {
  pc_GrpcChannel *ch;
  pc_GrpcCall *prev, *next;
  pc_Arena *arena; /* the call itself, path, metadata, early status; lent to its streams */
  Conn *conn;
  pc_GrpcStream *stream;
  const char *path;
  pc_GrpcPair *md;
  size_t md_count;
  int gzip;
  /* sent as grpc-previous-rpc-attempts when positive */
  unsigned previous_attempts;
  int protocol, json, get; /* pc_GrpcCallSettings' */
  double deadline;         /* monotonic seconds; < 0: none */
  char *replay;            /* request messages as [4-byte length][bytes], while replayable */
  size_t replay_len, replay_cap;
  int replay_in_arena; /* 'replay' is in 'arena' (a small first message): not freed */
  int lent_arena;      /* a stream was opened in 'arena' (open_stream): the next ones are not */
  int replayable;
  int replay_over; /* replay dropped: the request went past REPLAY_MAX */
  int send_closed;
  int retries;
  int waiting; /* no stream yet: waits for the next connection attempt (backoff) */
  int early;   /* ended before a stream could start: 'status' */
  pc_GrpcStatus status;
  pc_GrpcWaker waker;                   /* its place in the channel's wake list */
  pc_GrpcCall *check_prev, *check_next; /* in the channel's 'check' list */
  int checking;
};

static void *mem(pc_GrpcChannel *ch, void *p, size_t o, size_t n) {
  return ch->alloc(ch->ud, p, o, n);
}

/* An empty arena for a new call: a spare one, else a new one whose first
 * block holds what the last freed call took (NULL: no memory). */
static pc_Arena *take_arena(pc_GrpcChannel *ch) {
  if (ch->spares > 0) return ch->spare[--ch->spares];
  return pc_Arena_NewSized(ch->alloc, ch->ud, ch->arena_first);
}

/* The arena of a freed call: reset and kept for the next call while other
 * calls live (so calls in flight together reuse them), there is room and it
 * stayed small, else freed. The channel's last call frees the spares too:
 * an idle channel holds no arena (the idle connection's memory); the next
 * call's arena is made with the room this one took, one block. */
static void give_arena(pc_GrpcChannel *ch, pc_Arena *a) {
  size_t took = pc_Arena_SpaceUsed(a);
  ch->arena_first = took < SPARE_ARENA_MAX ? took : SPARE_ARENA_MAX;
  if (ch->calls == NULL) {
    while (ch->spares > 0) pc_Arena_Free(ch->spare[--ch->spares]);
    pc_Arena_Free(a);
  } else if (ch->spares < SPARE_ARENAS && pc_Arena_SpaceAllocated(a) <= SPARE_ARENA_MAX) {
    pc_Arena_Reset(a);
    ch->spare[ch->spares++] = a;
  } else {
    pc_Arena_Free(a);
  }
}

static char *dup_opt(pc_GrpcChannel *ch, const char *s, int *ok) {
  if (s == NULL) return NULL;
  size_t n = strlen(s) + 1;
  char *p = mem(ch, NULL, 0, n);
  if (p == NULL) {
    *ok = 0;
    return NULL;
  }
  memcpy(p, s, n);
  return p;
}

/* Frees a string of dup_opt (kept in a const field of the options). */
static void free_opt(pc_GrpcChannel *ch, const char *s) {
  if (s == NULL) return;
  char *p;
  memcpy(&p, &s, sizeof p);
  mem(ch, p, strlen(s) + 1, 0);
}

/* Something the waiter on 'c' may care about happened (wake.h). */
static void wake(pc_GrpcCall *c) {
  pc_GrpcWakeList_Add(&c->ch->wake, &c->waker);
}

/* Lists 'c' for retry_refused (check_calls). */
static void to_check(pc_GrpcCall *c) {
  if (c->checking) return;
  c->checking = 1;
  c->check_prev = NULL;
  c->check_next = c->ch->check;
  if (c->check_next) c->check_next->check_prev = c;
  c->ch->check = c;
}

static void unlist_check(pc_GrpcCall *c) {
  if (!c->checking) return;
  c->checking = 0;
  if (c->check_prev)
    c->check_prev->check_next = c->check_next;
  else
    c->ch->check = c->check_next;
  if (c->check_next) c->check_next->check_prev = c->check_prev;
  c->check_prev = c->check_next = NULL;
}

/* The engine's events: each is news for its call's waiter (a GOAWAY
 * alone is not; the streams it refuses end), but for request bytes that
 * went out once the sending side is closed (no sender waits for room: a
 * unary call's waiter, which waits for its answer, is not woken when its
 * request is written); headers and the end are what retry_refused looks
 * for. */
static void on_event(void *ud, pc_GrpcStream *stream, pc_GrpcEvent ev) {
  if (ev == kPc_GrpcEvent_Goaway) ((pc_GrpcChannel *)ud)->goaways++;
  pc_GrpcCall *c = stream ? pc_GrpcStream_User(stream) : NULL;
  if (c == NULL) return;
  if (ev == kPc_GrpcEvent_Writable && c->send_closed) return;
  wake(c);
  if (ev == kPc_GrpcEvent_Headers || ev == kPc_GrpcEvent_End) to_check(c);
}

/* -- reconnection backoff ------------------------------------------------ */

static void backoff_init(Backoff *b, const pc_GrpcChannelOptions *o, const void *seed) {
  memset(b, 0, sizeof *b);
  if (o->backoff_set) {
    b->initial = o->backoff_initial;
    b->multiplier = o->backoff_multiplier;
    b->jitter = o->backoff_jitter;
    b->max = o->backoff_max;
    b->min_connect = o->min_connect_timeout;
  } else { /* doc/connection-backoff.md */
    b->initial = 1.0;
    b->multiplier = 1.6;
    b->jitter = 0.2;
    b->max = 120.0;
    b->min_connect = 20.0;
  }
  b->rng = (uint64_t)(uintptr_t)seed ^ (uint64_t)(pc_Clock_Monotonic() * 1e9) ^ 0x9e3779b97f4a7c15u;
}

/* A uniform draw in [-1, 1] (xorshift64*). */
static double backoff_draw(Backoff *b) {
  b->rng ^= b->rng >> 12;
  b->rng ^= b->rng << 25;
  b->rng ^= b->rng >> 27;
  uint64_t x = b->rng * 0x2545f4914f6cdd1du;
  return (double)(x >> 11) / (double)(UINT64_C(1) << 52) - 1.0;
}

/* The time a new connection attempt may take to become ready. */
static double connect_time(const Backoff *b) {
  double next = b->current == 0 ? b->initial : b->current;
  return next > b->min_connect ? next : b->min_connect;
}

/* A connection attempt failed ('why'): the next waits for the backoff. */
static void backoff_failed(pc_GrpcChannel *ch, const char *why) {
  Backoff *b = &ch->backoff;
  double next = b->current == 0 ? b->initial : b->current * b->multiplier;
  if (next > b->max) next = b->max;
  b->current = next;
  b->failures++;
  double wait = next * (1 + b->jitter * backoff_draw(b));
  b->retry_at = pc_Clock_Monotonic() + (wait > 0 ? wait : 0);
  int ok = 1;
  free_opt(ch, b->why);
  b->why = dup_opt(ch, why, &ok);
}

static void backoff_reset(Backoff *b) {
  b->current = 0;
  b->retry_at = 0;
}

/* -- connections --------------------------------------------------------- */

static void close_sock(Conn *c) {
  if (c->sock) c->ch->host_version++;
  pc_NetSocket_Close(c->sock);
  c->sock = NULL;
}

/* Frees the call's stream; 1 when that queued frames for the peer. */
static int detach(pc_GrpcCall *c) {
  int queued = pc_GrpcStream_Free(c->stream);
  c->stream = NULL;
  if (c->conn) c->conn->calls--;
  c->conn = NULL;
  return queued;
}

static void end_unkept(pc_GrpcCall *c);

/* The calls on connection 'conn', whose attempt failed before it was
 * ready, wait for the next attempt instead of failing (gRPC's
 * wait-for-ready: a failed attempt puts the channel in TRANSIENT_FAILURE,
 * which such a call waits through). Nothing of theirs reached the peer,
 * so they start anew with their request messages kept for replay; one
 * whose request went past REPLAY_MAX fails UNAVAILABLE saying so. */
static void requeue(Conn *conn) {
  pc_GrpcChannel *ch = conn->ch;
  if (ch->closed) return; /* no connection is made for them any more */
  for (pc_GrpcCall *c = ch->calls; c; c = c->next) {
    if (c->conn != conn || c->early) continue;
    if (!c->replayable) {
      /* kept too much to wait: says so rather than the attempt's failure */
      if (c->replay_over && !pc_GrpcStream_Status(c->stream)) {
        detach(c);
        end_unkept(c);
      }
      continue;
    }
    /* a stream ended here (cancelled, past its deadline) keeps its status:
     * such a call is not sent again */
    if (pc_GrpcStream_Status(c->stream)) continue;
    detach(c);
    c->waiting = 1;
    ch->any_waiting = 1;
    wake(c);
  }
}

/* Connection 'c' is gone ('why'). A peer that closed a connection it had
 * sent no HTTP/2 SETTINGS on (an HTTP/1.1-only server dropping the client
 * preface) is said so: "...: connection closed by the peer before its
 * HTTP/2 SETTINGS". */
static void lose(Conn *c, const char *why) {
  static const char closed[] = "connection closed by the peer";
  char m[400];
  const char *at = strstr(why, closed);
  if (c->ready && c->engine && !pc_GrpcEngine_SettingsReceived(c->engine) && at != NULL &&
      strcmp(at, closed) == 0) {
    snprintf(m, sizeof m, "%.340s before its HTTP/2 SETTINGS", why);
    why = m;
  }
  if (!c->ready) {
    backoff_failed(c->ch, why);
    if (c->ch->o.wait_for_ready == kPc_GrpcWaitForReady_Deadline) requeue(c);
  }
  pc_GrpcEngine_Lost(c->engine, why, !c->ready);
  close_sock(c);
}

static void flush_out(Conn *c) {
  while (c->sock && c->ready) {
    const char *p;
    size_t len = pc_GrpcEngine_Output(c->engine, &p);
    if (len == 0) break;
    long w = pc_NetSocket_Write(c->sock, p, len);
    if (w < 0) {
      lose(c, pc_NetSocket_Error(c->sock));
      return;
    }
    pc_GrpcEngine_Wrote(c->engine, (size_t)w);
    if ((size_t)w < len) break;
  }
}

/* Connects, reads what is there, writes what is queued. */
static void service(Conn *c) {
  if (c->sock == NULL) return;
  if (!c->ready) {
    int r = pc_NetSocket_Progress(c->sock);
    if (r < 0) {
      lose(c, pc_NetSocket_Error(c->sock));
      return;
    }
    if (r == 0) return;
    c->ready = 1;
    c->ch->host_version++;
    c->last_recv = pc_Clock_Monotonic();
    c->backoff_before = c->ch->backoff.current;
    backoff_reset(&c->ch->backoff);
  }
  char buf[65536];
  size_t total = 0;
  while (c->sock && total < READ_ROUND) {
    long n = pc_NetSocket_Read(c->sock, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      lose(c, pc_NetSocket_Error(c->sock));
      return;
    }
    total += (size_t)n;
    c->last_recv = pc_Clock_Monotonic();
    if (!pc_GrpcEngine_Recv(c->engine, buf, (size_t)n)) break;
  }
  flush_out(c);
  if (c->sock && !pc_GrpcEngine_Alive(c->engine)) {
    flush_out(c); /* a GOAWAY of ours */
    close_sock(c);
  }
}

static void free_conn(Conn *c) {
  pc_GrpcChannel *ch = c->ch;
  pc_GrpcEngine_Free(c->engine);
  close_sock(c);
  mem(ch, c, sizeof *c, 0);
}

/* Frees the connections that are dead and carry no call. */
static void reap(pc_GrpcChannel *ch) {
  Conn **pp = &ch->conns;
  while (*pp) {
    Conn *c = *pp;
    if (c->calls == 0 && (c->sock == NULL || !pc_GrpcEngine_Alive(c->engine))) {
      *pp = c->next;
      free_conn(c);
    } else {
      pp = &c->next;
    }
  }
}

/* After pc_GrpcChannel_Close: frees the connections that carry no call. */
static void close_idle(pc_GrpcChannel *ch) {
  Conn **pp = &ch->conns;
  while (*pp) {
    Conn *c = *pp;
    if (c->calls == 0) {
      *pp = c->next;
      free_conn(c);
    } else {
      pp = &c->next;
    }
  }
}

static Conn *new_conn(pc_GrpcChannel *ch, pc_Error *err) {
  Conn *c = mem(ch, NULL, 0, sizeof *c);
  if (c == NULL) {
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  memset(c, 0, sizeof *c);
  c->ch = ch;
  pc_NetOptions no = {ch->o.host,
                      ch->o.port,
                      ch->o.tls,
                      ch->o.ca_file,
                      ch->o.cert_file,
                      ch->o.key_file,
                      ch->o.server_name,
                      ch->o.insecure,
                      ch->o.unix_path,
                      ch->o.unix_abstract,
                      NULL,
                      0};
  pc_GrpcEngineOptions eo;
  memset(&eo, 0, sizeof eo);
  eo.authority = ch->authority;
  eo.tls = ch->o.tls;
  eo.user_agent = ch->o.user_agent;
  eo.max_receive = ch->o.max_receive;
  eo.max_header_list = ch->o.max_header_list;
  eo.stream_window = ch->o.stream_window;
  eo.connection_window = ch->o.connection_window;
  eo.on_event = on_event;
  eo.event_ud = ch;
  eo.http1 = no.http1 = ch->o.http1; /* ALPN http/1.1 (socket.h) */
  c->engine = pc_GrpcEngine_New(&eo, ch->alloc, ch->ud, err);
  if (c->engine == NULL) {
    mem(ch, c, sizeof *c, 0);
    return NULL;
  }
  c->connect_window = connect_time(&ch->backoff);
  c->connect_by = pc_Clock_Monotonic() + c->connect_window;
  if (ch->o.tls && ch->tls == NULL) {
    int ok = 1;
    if (!pc_NetTls_Available(err))
      ch->lame = dup_opt(ch, err->msg, &ok);
    else
      ch->tls = pc_NetTlsClient_New(&no, err);
  }
  no.tls_client = ch->tls;
  c->sock = ch->o.tls && ch->tls == NULL ? NULL
            : ch->o.host_io              ? pc_NetSocket_NewHosted(&no, ch->alloc, ch->ud, err)
                                         : pc_NetSocket_Connect(&no, ch->alloc, ch->ud, err);
  if (c->sock == NULL) {
    if (ch->lame == NULL) backoff_failed(ch, err->msg);
    pc_GrpcEngine_Free(c->engine);
    mem(ch, c, sizeof *c, 0);
    return NULL;
  }
  c->connect_deadline =
      ch->o.connect_timeout > 0 ? pc_Clock_Monotonic() + ch->o.connect_timeout : -1;
  c->id = ++ch->last_id;
  c->next = ch->conns;
  ch->conns = c;
  ch->host_version++;
  return c;
}

/* The earlier of two times (< 0: none). */
static double sooner(double a, double b) {
  return a < 0 || (b >= 0 && b < a) ? b : a;
}

/* Whether connection 'c', ready, is past its attempt's time ('connect_by',
 * 'connect_deadline') without the server's first SETTINGS. */
static int settings_overdue(const Conn *c, double now) {
  return c->ready && c->sock && pc_GrpcEngine_Alive(c->engine) &&
         !pc_GrpcEngine_SettingsReceived(c->engine) &&
         now >= sooner(c->connect_by, c->connect_deadline);
}

/* Closes connection 'c', which carries no call, without counting a failed
 * attempt: one past its time without SETTINGS that nobody may have read
 * while it was idle (a host driver reads only connections with calls), so
 * the server's SETTINGS may be waiting unread. */
static void retire(Conn *c) {
  pc_GrpcEngine_Lost(c->engine, "the connection was closed", 0);
  close_sock(c);
}

/* A connection that takes a new stream now (after reading what it has, so
 * a GOAWAY that came while it was idle is seen), or a new one; NULL with
 * '*wait' set when a new one is needed but the backoff holds it back. One
 * past its time without the server's SETTINGS takes none (check_conns
 * fails it), and closes when idle (retire). */
static Conn *pick_conn(pc_GrpcChannel *ch, pc_Error *err, int *wait) {
  for (Conn *c = ch->conns; c; c = c->next) {
    if (c->sock == NULL || !pc_GrpcEngine_CanOpen(c->engine)) continue;
    service(c);
    if (settings_overdue(c, pc_Clock_Monotonic())) {
      if (c->calls == 0) retire(c);
      continue;
    }
    if (c->sock && pc_GrpcEngine_CanOpen(c->engine)) return c;
  }
  reap(ch);
  if (pc_Clock_Monotonic() < ch->backoff.retry_at) {
    *wait = 1;
    return NULL;
  }
  unsigned failures = ch->backoff.failures;
  Conn *c = new_conn(ch, err);
  /* an attempt that failed at once (a Unix socket file not there, a TLS
   * setup): a wait-for-ready call waits for the next */
  if (c == NULL && ch->backoff.failures != failures &&
      ch->o.wait_for_ready == kPc_GrpcWaitForReady_Deadline)
    *wait = 1;
  return c;
}

/* -- channel ------------------------------------------------------------- */

static void end_early(pc_GrpcCall *c, pc_Code code, const char *msg) {
  char *m = pc_Arena_StrDup(c->arena, msg, strlen(msg));
  c->early = 1;
  c->status.code = code;
  c->status.message = m ? m : "out of memory";
  c->status.message_len = strlen(c->status.message);
  c->status.details = "";
  c->status.unsent = code == kPc_Code_Unavailable; /* it had no stream */
  c->status.lost = 0;                              /* nor a connection */
  wake(c);
}

/* A call that needs a new connection on a closed channel ends UNAVAILABLE:
 * none is made for it (it never reached the backend, which its message
 * says as a failed attempt's does: a balancer takes it on to another). */
static void end_closed(pc_GrpcCall *c) {
  char m[PC_ERROR_MAX];
  snprintf(m, sizeof m, "connect to %.280s: the channel is closed", c->ch->where);
  end_early(c, kPc_Code_Unavailable, m);
}

/* A call waiting for a connection (wait_for_ready) that could not keep its
 * request messages to send them once connected ends UNAVAILABLE saying
 * why: past REPLAY_MAX, or no memory for them. */
static void end_unkept(pc_GrpcCall *c) {
  char m[PC_ERROR_MAX];
  if (c->replay_over)
    snprintf(m, sizeof m,
             "the request is over the %u MiB a call waiting for a connection keeps "
             "(wait_for_ready)",
             (unsigned)(REPLAY_MAX >> 20));
  else
    snprintf(m, sizeof m, "out of memory keeping the request of a call waiting for a connection");
  end_early(c, kPc_Code_Unavailable, m);
}

pc_GrpcChannel *pc_GrpcChannel_New(const pc_GrpcChannelOptions *o, pc_Alloc *alloc, void *ud,
                                   pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_GrpcChannel *ch = alloc(ud, NULL, 0, sizeof *ch);
  if (ch == NULL) goto oom;
  memset(ch, 0, sizeof *ch);
  ch->alloc = alloc;
  ch->ud = ud;
  ch->o = *o;
  ch->due = -1;
  pc_GrpcWakeList_Init(&ch->wake, alloc, ud);
  backoff_init(&ch->backoff, o, ch);
  int ok = 1;
  ch->o.host = dup_opt(ch, o->host ? o->host : "", &ok);
  ch->o.port = dup_opt(ch, o->port ? o->port : "", &ok);
  ch->o.ca_file = dup_opt(ch, o->ca_file, &ok);
  ch->o.cert_file = dup_opt(ch, o->cert_file, &ok);
  ch->o.key_file = dup_opt(ch, o->key_file, &ok);
  ch->o.server_name = dup_opt(ch, o->server_name, &ok);
  ch->o.user_agent = dup_opt(ch, o->user_agent, &ok);
  ch->o.unix_path = dup_opt(ch, o->unix_path, &ok);
  char where[300];
  if (ok && ch->o.unix_path) {
    snprintf(where, sizeof where, "unix%s:%.280s", o->unix_abstract ? "-abstract" : "",
             ch->o.unix_path);
    const char *host = o->server_name && o->server_name[0] ? o->server_name : "localhost";
    size_t n = strlen(host) + 1;
    ch->authority = mem(ch, NULL, 0, n); /* freed as strlen + 1 */
    if (ch->authority) memcpy(ch->authority, host, n);
  } else if (ok) {
    snprintf(where, sizeof where, "%.250s:%.20s", ch->o.host, ch->o.port);
    const char *host = o->server_name && o->server_name[0] ? o->server_name : ch->o.host;
    const char *fmt = strchr(host, ':') ? "[%s]:%s" : "%s:%s";
    size_t n = (size_t)snprintf(NULL, 0, fmt, host, ch->o.port) + 1;
    ch->authority = mem(ch, NULL, 0, n); /* freed as strlen + 1 */
    if (ch->authority) snprintf(ch->authority, n, fmt, host, ch->o.port);
  }
  if (ok) ch->where = dup_opt(ch, where, &ok); /* a block of its own: names are short */
  if (!ok || ch->authority == NULL) {
    pc_GrpcChannel_Free(ch);
    goto oom;
  }
  return ch;
oom:
  pc_Error_Set(err, "out of memory");
  return NULL;
}

void pc_GrpcChannel_Close(pc_GrpcChannel *ch) {
  ch->closed = 1;
  for (pc_GrpcCall *c = ch->calls; c; c = c->next) {
    if (c->waiting && !c->early) end_closed(c);
  }
  close_idle(ch);
}

void pc_GrpcChannel_Free(pc_GrpcChannel *ch) {
  if (ch == NULL) return;
  if (ch->live_calls > 0) {
    ch->closing = 1; /* the last call frees it */
    return;
  }
  while (ch->conns) {
    Conn *c = ch->conns;
    ch->conns = c->next;
    free_conn(c);
  }
  free_opt(ch, ch->o.host);
  free_opt(ch, ch->o.port);
  free_opt(ch, ch->o.ca_file);
  free_opt(ch, ch->o.cert_file);
  free_opt(ch, ch->o.key_file);
  free_opt(ch, ch->o.server_name);
  free_opt(ch, ch->o.user_agent);
  free_opt(ch, ch->o.unix_path);
  pc_NetTlsClient_Free(ch->tls);
  free_opt(ch, ch->authority);
  free_opt(ch, ch->where);
  free_opt(ch, ch->backoff.why);
  free_opt(ch, ch->lame);
  pc_GrpcWakeList_Free(&ch->wake);
  while (ch->spares > 0) pc_Arena_Free(ch->spare[--ch->spares]);
  mem(ch, ch, sizeof *ch, 0);
}

/* -- calls --------------------------------------------------------------- */

static void drop_replay(pc_GrpcCall *c) {
  if (c->replay && !c->replay_in_arena) mem(c->ch, c->replay, c->replay_cap, 0);
  c->replay = NULL;
  c->replay_in_arena = 0;
  c->replay_len = c->replay_cap = 0;
  c->replayable = 0;
}

static int keep_for_replay(pc_GrpcCall *c, const void *msg, size_t len) {
  if (!c->replayable) return 1;
  if (len > REPLAY_MAX || c->replay_len + 4 + len > REPLAY_MAX) {
    drop_replay(c);
    c->replay_over = 1;
    return 1;
  }
  size_t need = c->replay_len + 4 + len;
  if (c->replay == NULL && need <= REPLAY_IN_ARENA) {
    /* a first message as small as most: in the call's arena, nothing to free */
    c->replay = pc_Arena_Malloc(c->arena, need);
    c->replay_cap = c->replay ? need : 0;
    c->replay_in_arena = c->replay != NULL;
  }
  if (c->replay == NULL || need > c->replay_cap) {
    size_t cap = c->replay_cap && !c->replay_in_arena ? c->replay_cap : 256;
    while (cap < need) cap *= 2;
    char *p =
        c->replay_in_arena ? mem(c->ch, NULL, 0, cap) : mem(c->ch, c->replay, c->replay_cap, cap);
    if (p == NULL) {
      drop_replay(c);
      return 1;
    }
    if (c->replay_in_arena && c->replay != NULL)
      memcpy(p, c->replay, c->replay_len); /* out of the arena */
    c->replay = p;
    c->replay_cap = cap;
    c->replay_in_arena = 0;
  }
  uint32_t n = (uint32_t)len;
  memcpy(c->replay + c->replay_len, &n, 4);
  if (len) memcpy(c->replay + c->replay_len + 4, msg, len);
  c->replay_len = need;
  return 1;
}

/* Opens the call's stream on a connection that takes it; 0 when it ended
 * early instead (no connection, no time left) or waits for the next
 * connection attempt ('waiting'). */
static int open_stream(pc_GrpcCall *c) {
  pc_GrpcCallSettings s;
  s.timeout = -1;
  if (c->deadline >= 0) {
    s.timeout = c->deadline - pc_Clock_Monotonic();
    if (s.timeout <= 0) {
      end_early(c, kPc_Code_DeadlineExceeded, "deadline exceeded");
      return 0;
    }
  }
  s.metadata = c->md;
  s.metadata_count = c->md_count;
  s.gzip = c->gzip;
  s.previous_attempts = c->previous_attempts;
  s.protocol = c->protocol;
  s.json = c->json;
  s.get = c->get;
  /* The first stream lives in the call's arena; a later one (a transparent
   * retry, a wait-for-ready call's next attempt) in an arena of its own,
   * freed with it: the call's would grow by a stream each attempt. */
  s.arena = c->lent_arena ? NULL : c->arena;
  pc_Error err;
  pc_Error_Init(&err);
  int wait = 0;
  Conn *conn = c->ch->lame ? NULL : pick_conn(c->ch, &err, &wait);
  if (c->ch->lame) {
    end_early(c, kPc_Code_Internal, c->ch->lame);
    return 0;
  }
  if (conn == NULL && wait && c->ch->closed) {
    end_closed(c);
    return 0;
  }
  if (conn == NULL && wait) {
    const Backoff *b = &c->ch->backoff;
    int fail_fast = c->ch->o.wait_for_ready == kPc_GrpcWaitForReady_No;
    if (fail_fast || (c->ch->o.wait_for_ready == kPc_GrpcWaitForReady_Backoff && c->deadline >= 0 &&
                      c->deadline <= b->retry_at)) {
      double in = b->retry_at - pc_Clock_Monotonic();
      char when[128], m[PC_ERROR_MAX];
      if (fail_fast)
        snprintf(when, sizeof when,
                 "the next attempt in %.3g s; a transport with wait_for_ready "
                 "waits for it",
                 in);
      else
        snprintf(when, sizeof when, "the next attempt, in %.3g s, comes after the call's deadline",
                 in);
      snprintf(m, sizeof m, "%.300s (reconnection backoff: %s)",
               b->why ? b->why : "the last connection attempt failed", when);
      end_early(c, kPc_Code_Unavailable, m);
      return 0;
    }
    c->waiting = 1;
    c->ch->any_waiting = 1;
    return 0;
  }
  if (conn == NULL) {
    end_early(c, kPc_Code_Unavailable, err.msg);
    return 0;
  }
  c->stream = pc_GrpcEngine_Open(conn->engine, c->path, &s, c, &err);
  c->lent_arena = 1;
  if (c->stream == NULL) {
    end_early(c, kPc_Code_Unavailable, err.msg);
    return 0;
  }
  c->conn = conn;
  conn->calls++;
  return 1;
}

/* Opens the call's stream (again) and sends the request messages sent so
 * far. */
static void reopen(pc_GrpcCall *c) {
  if (!open_stream(c)) return;
  for (size_t o = 0; o < c->replay_len;) {
    uint32_t n;
    memcpy(&n, c->replay + o, 4);
    pc_GrpcStream_Send(c->stream, c->replay + o + 4, n);
    o += 4 + n;
  }
  if (c->send_closed) pc_GrpcStream_CloseSend(c->stream);
}

/* Runs a call the server refused before taking it again, on another
 * connection, with the request messages sent so far. */
static void retry_refused(pc_GrpcCall *c) {
  if (c->stream == NULL) return;
  if (c->replayable && pc_GrpcStream_HeadersDone(c->stream) && !pc_GrpcStream_Refused(c->stream)) {
    drop_replay(c); /* the server took it */
    return;
  }
  if (!c->replayable || c->retries >= MAX_TRANSPARENT_RETRIES || !pc_GrpcStream_Refused(c->stream))
    return;
  c->retries++;
  detach(c);
  reopen(c);
}

pc_GrpcCall *pc_GrpcChannel_Start(pc_GrpcChannel *ch, const char *path,
                                  const pc_GrpcCallSettings *s, pc_Error *err) {
  if (ch->closed) {
    pc_Error_Set(err, "the channel is closed");
    return NULL;
  }
  if (!pc_Grpc_PathCheck(path, err)) return NULL;
  for (size_t i = 0; i < s->metadata_count; i++) {
    if (!pc_GrpcPair_Check(&s->metadata[i], err)) return NULL;
  }
  pc_Arena *arena = take_arena(ch);
  pc_GrpcCall *c = arena ? pc_Arena_Calloc(arena, sizeof *c) : NULL;
  if (c == NULL) {
    if (arena) give_arena(ch, arena);
    goto oom;
  }
  c->ch = ch;
  c->arena = arena;
  c->next = ch->calls;
  if (ch->calls) ch->calls->prev = c;
  ch->calls = c;
  ch->live_calls++;
  c->gzip = s->gzip;
  c->previous_attempts = s->previous_attempts;
  c->protocol = s->protocol;
  c->json = s->json;
  c->get = s->get;
  c->replayable = 1;
  c->deadline = s->timeout >= 0 ? pc_Clock_Monotonic() + s->timeout : -1;
  if (c->deadline >= 0 && (ch->due < 0 || c->deadline < ch->due)) ch->due = c->deadline;
  c->path = pc_Arena_StrDup(c->arena, path, strlen(path));
  c->md_count = s->metadata_count;
  c->md = pc_Arena_Malloc(c->arena, (s->metadata_count ? s->metadata_count : 1) * sizeof *c->md);
  if (c->path == NULL || c->md == NULL) goto fail;
  for (size_t i = 0; i < s->metadata_count; i++) {
    const pc_GrpcPair *p = &s->metadata[i];
    c->md[i].key = pc_Arena_StrDup(c->arena, p->key, p->key_len);
    c->md[i].value = pc_Arena_StrDup(c->arena, p->value, p->value_len);
    c->md[i].key_len = p->key_len;
    c->md[i].value_len = p->value_len;
    if (c->md[i].key == NULL || c->md[i].value == NULL) goto fail;
  }
  if (s->timeout >= 0 && s->timeout <= 0) {
    end_early(c, kPc_Code_DeadlineExceeded, "deadline exceeded before the call started");
    return c;
  }
  open_stream(c);
  return c;
fail:
  pc_GrpcCall_Free(c);
oom:
  pc_Error_Set(err, "cannot start a call: out of memory");
  return NULL;
}

/* Ends the call if its deadline passed; 1 when it did. */
static int past_deadline(pc_GrpcCall *c) {
  if (c->deadline < 0 || c->early || c->stream == NULL || pc_GrpcStream_Status(c->stream)) return 0;
  if (pc_Clock_Monotonic() < c->deadline) return 0;
  pc_GrpcStream_Cancel(c->stream, kPc_Code_DeadlineExceeded, "deadline exceeded");
  if (c->conn) flush_out(c->conn);
  return 1;
}

/* Queues one request message; with 'last' the sending side closes, both
 * before anything is flushed. */
static int send_message(pc_GrpcCall *c, const void *msg, size_t len, int last) {
  int ok;
  if (c->waiting && !c->early && !c->send_closed) {
    keep_for_replay(c, msg, len);
    ok = c->replayable;
    if (!ok) end_unkept(c);
  } else if (c->early || c->stream == NULL || c->send_closed || past_deadline(c)) {
    ok = 0;
  } else {
    keep_for_replay(c, msg, len);
    ok = pc_GrpcStream_Send(c->stream, msg, len);
  }
  if (last) pc_GrpcCall_CloseSend(c);
  if (ok && c->conn) flush_out(c->conn); /* no wait for the next pump */
  return ok;
}

int pc_GrpcCall_Send(pc_GrpcCall *c, const void *msg, size_t len) {
  return send_message(c, msg, len, 0);
}

int pc_GrpcCall_SendLast(pc_GrpcCall *c, const void *msg, size_t len) {
  return send_message(c, msg, len, 1);
}

size_t pc_GrpcCall_Unsent(const pc_GrpcCall *c) {
  if (c->stream) return pc_GrpcStream_Unsent(c->stream);
  /* waiting for a connection: all of it, so a sender waits for that too */
  return c->waiting && !c->early ? c->replay_len : 0;
}

int pc_GrpcCall_PeerSettings(const pc_GrpcCall *c) {
  return c->stream && c->conn && c->conn->engine && pc_GrpcEngine_SettingsReceived(c->conn->engine);
}

void pc_GrpcCall_CloseSend(pc_GrpcCall *c) {
  c->send_closed = 1;
  if (c->stream) pc_GrpcStream_CloseSend(c->stream);
}

int pc_GrpcCall_Next(pc_GrpcCall *c, const char **data, size_t *len) {
  if (c->early) return -1;
  retry_refused(c);
  if (c->early) return -1;
  if (c->stream == NULL) return 0; /* waiting */
  return pc_GrpcStream_Next(c->stream, data, len);
}

int pc_GrpcCall_Drained(const pc_GrpcCall *c) {
  if (c->early) return 1;
  return c->stream && !pc_GrpcStream_Refused(c->stream) && pc_GrpcStream_Drained(c->stream);
}

void pc_GrpcCall_SetWakeToken(pc_GrpcCall *c, uint64_t token) {
  c->waker.token = token;
}

pc_GrpcWakeList *pc_GrpcChannel_Wake(pc_GrpcChannel *ch) {
  return &ch->wake;
}

int pc_GrpcCall_HeadersDone(const pc_GrpcCall *c) {
  return c->early || (c->stream && pc_GrpcStream_HeadersDone(c->stream));
}

const pc_GrpcStatus *pc_GrpcCall_Status(const pc_GrpcCall *c) {
  if (c->early) return &c->status;
  return c->stream ? pc_GrpcStream_Status(c->stream) : NULL;
}

size_t pc_GrpcCall_Buffered(const pc_GrpcCall *c) {
  return c->stream ? pc_GrpcStream_Buffered(c->stream) : 0;
}

size_t pc_GrpcCall_MetadataCount(const pc_GrpcCall *c, int trailers) {
  return c->stream ? pc_GrpcStream_MetadataCount(c->stream, trailers) : 0;
}

const pc_GrpcPair *pc_GrpcCall_Metadata(const pc_GrpcCall *c, int trailers, size_t i) {
  return c->stream ? pc_GrpcStream_Metadata(c->stream, trailers, i) : NULL;
}

void pc_GrpcCall_Cancel(pc_GrpcCall *c) {
  if (c->stream)
    pc_GrpcStream_Cancel(c->stream, kPc_Code_Cancelled, "cancelled");
  else if (!c->early)
    end_early(c, kPc_Code_Cancelled, "cancelled");
  if (c->conn) flush_out(c->conn);
}

void pc_GrpcCall_Free(pc_GrpcCall *c) {
  if (c == NULL) return;
  pc_GrpcChannel *ch = c->ch;
  Conn *conn = c->conn;
  int queued = detach(c);
  unlist_check(c);                     /* after detach: the end of its stream lists it */
  if (conn && queued) flush_out(conn); /* the RST_STREAM */
  drop_replay(c);
  if (c->prev)
    c->prev->next = c->next;
  else
    ch->calls = c->next;
  if (c->next) c->next->prev = c->prev;
  give_arena(ch, c->arena); /* the call with it */
  ch->live_calls--;
  reap(ch);
  if (ch->closed) close_idle(ch);
  if (ch->closing && ch->live_calls == 0) pc_GrpcChannel_Free(ch);
}

/* -- the loop ------------------------------------------------------------ */

static int running(const pc_GrpcCall *c) {
  return !c->early && c->stream && pc_GrpcStream_Status(c->stream) == NULL;
}

/* A connection made (TCP, TLS) whose server sent no SETTINGS within the
 * attempt's time ('within' seconds) while it carries calls: not HTTP/2,
 * or not answering (a wrong port, a proxy forwarding to nothing). Closed
 * as a failed attempt: the backoff goes on from where its becoming ready
 * reset it (unless an attempt failed since), so a peer that always does
 * this is tried ever less often. Its calls were written and may have
 * run: they end UNAVAILABLE 'lost', not 'unsent', and none is sent again
 * (a wait-for-ready call included; requeue is for attempts never ready).
 * One carrying no call is retired instead (retire). */
static void settings_missing(Conn *c, double within) {
  pc_GrpcChannel *ch = c->ch;
  char m[PC_ERROR_MAX];
  snprintf(m, sizeof m, "connect to %.280s: no HTTP/2 SETTINGS from the server within %.3g s",
           ch->where, within);
  if (ch->backoff.current == 0) ch->backoff.current = c->backoff_before;
  backoff_failed(ch, m);
  lose(c, m);
}

/* Connection attempts past their time, keepalive PINGs due or unanswered;
 * returns when the next of these falls due (< 0: none). */
static double check_conns(pc_GrpcChannel *ch, double now) {
  double next = -1;
  const double ka = ch->o.keepalive_time;
  const double ka_wait = ch->o.keepalive_timeout > 0 ? ch->o.keepalive_timeout : 20.0;
  for (Conn *c = ch->conns; c; c = c->next) {
    if (c->sock == NULL) continue;
    if (!c->ready) {
      if (c->connect_deadline >= 0 && now >= c->connect_deadline) {
        char m[PC_ERROR_MAX];
        snprintf(m, sizeof m, "connect to %.280s: timed out after %g s", ch->where,
                 ch->o.connect_timeout);
        lose(c, m);
      } else if (now >= c->connect_by) {
        char m[PC_ERROR_MAX];
        snprintf(m, sizeof m, "connect to %.280s: not connected within %.3g s", ch->where,
                 c->connect_window);
        lose(c, m);
      } else {
        next = sooner(sooner(next, c->connect_by), c->connect_deadline);
      }
      continue;
    }
    /* what came while the loop was away (a busy task, a slow host) is
     * read before the SETTINGS are judged missing: they may be there,
     * in time, with the answers of the calls judged lost */
    if (settings_overdue(c, now)) service(c);
    if (settings_overdue(c, now)) {
      double by = sooner(c->connect_by, c->connect_deadline);
      if (c->calls == 0)
        retire(c); /* no call held: not known to be silent (retire) */
      else
        settings_missing(c, by == c->connect_deadline ? ch->o.connect_timeout : c->connect_window);
      continue;
    }
    if (!pc_GrpcEngine_SettingsReceived(c->engine) && pc_GrpcEngine_Alive(c->engine))
      next = sooner(next, sooner(c->connect_by, c->connect_deadline));
    if (ka <= 0 || !pc_GrpcEngine_Alive(c->engine)) continue;
    if (pc_GrpcEngine_PingPending(c->engine)) {
      if (now - c->ping_sent >= ka_wait) {
        char m[PC_ERROR_MAX];
        snprintf(m, sizeof m, "keepalive: no PING ACK from %.280s within %.3g s", ch->where,
                 ka_wait);
        lose(c, m);
      } else {
        next = sooner(next, c->ping_sent + ka_wait);
      }
    } else if (c->calls > 0) {
      if (now - c->last_recv >= ka && pc_GrpcEngine_Ping(c->engine)) {
        c->ping_sent = now;
        flush_out(c);
        next = sooner(next, now + ka_wait);
      } else {
        next = sooner(next, c->last_recv + ka);
      }
    }
  }
  return next;
}

/* Opens the streams of calls that waited for the backoff once it is over;
 * returns when it is (< 0: no call waits). */
static double start_waiting(pc_GrpcChannel *ch, double now) {
  if (!ch->any_waiting) return -1;
  /* set again by each call that waits on: one reopen puts back to waiting
   * (open_stream), or an attempt that fails meanwhile (requeue, perhaps a
   * call the loop passed already) */
  ch->any_waiting = 0;
  for (pc_GrpcCall *c = ch->calls; c; c = c->next) {
    if (!c->waiting || c->early) continue;
    if (now < ch->backoff.retry_at) {
      ch->any_waiting = 1;
      continue;
    }
    c->waiting = 0;
    reopen(c);
    wake(c); /* its request bytes moved to a stream (pc_GrpcCall_Unsent) */
  }
  return ch->any_waiting ? ch->backoff.retry_at : -1;
}

/* retry_refused for the calls whose stream got headers or ended since. */
static void check_calls(pc_GrpcChannel *ch) {
  while (ch->check) {
    pc_GrpcCall *c = ch->check;
    unlist_check(c);
    retry_refused(c);
  }
}

/* The status message of a call whose deadline passed on connection 'c'
 * (NULL: none yet): what the connection had not done yet, so that a call
 * that never reached a server says so (a wait-for-ready call whose
 * deadline came during an attempt, a peer that never spoke HTTP/2);
 * "deadline exceeded" once the server's SETTINGS came. */
static void deadline_text(const pc_GrpcChannel *ch, const Conn *c, char *m, size_t size) {
  if (c != NULL && !c->ready && ch->backoff.why)
    snprintf(m, size,
             "deadline exceeded waiting for a connection (connecting to %.200s; the last attempt: "
             "%.200s)",
             ch->where, ch->backoff.why);
  else if (c != NULL && !c->ready)
    snprintf(m, size, "deadline exceeded waiting for a connection (connecting to %.200s)",
             ch->where);
  else if (c != NULL && c->engine && !pc_GrpcEngine_SettingsReceived(c->engine))
    snprintf(m, size,
             "deadline exceeded (connected to %.200s, no HTTP/2 SETTINGS from the server yet)",
             ch->where);
  else
    snprintf(m, size, "deadline exceeded");
}

/* Ends the calls whose deadline passed; returns the nearest deadline of
 * the others (< 0: none). The calls are scanned only once the nearest
 * deadline known has come ('due': it may be a call's that ended since). */
static double enforce_deadlines(pc_GrpcChannel *ch, double now) {
  if (ch->due < 0 || now < ch->due) return ch->due;
  double nearest = -1;
  for (pc_GrpcCall *c = ch->calls; c; c = c->next) {
    if (c->waiting && !c->early && c->deadline >= 0) {
      if (c->deadline <= now) {
        char m[PC_ERROR_MAX];
        if (ch->backoff.why)
          snprintf(m, sizeof m,
                   "deadline exceeded waiting for a connection (the last attempt: %.300s)",
                   ch->backoff.why);
        else
          snprintf(m, sizeof m, "deadline exceeded waiting for a connection");
        end_early(c, kPc_Code_DeadlineExceeded, m);
      } else {
        nearest = sooner(nearest, c->deadline);
      }
    }
    if (!running(c) || c->deadline < 0) continue;
    if (c->deadline <= now) {
      char m[PC_ERROR_MAX];
      deadline_text(ch, c->conn, m, sizeof m);
      pc_GrpcStream_Cancel(c->stream, kPc_Code_DeadlineExceeded, m);
      if (c->conn) flush_out(c->conn);
    } else {
      nearest = sooner(nearest, c->deadline);
    }
  }
  ch->due = nearest;
  return nearest;
}

/* How much news wake list 'w' holds (an overflow counts as one more). */
static size_t news(const pc_GrpcWakeList *w) {
  return w->count + (w->overflow ? 1 : 0);
}

size_t pc_Grpc_PollPrepare(pc_GrpcChannel *const *chs, size_t n, struct pollfd *fds, void **who,
                           size_t max, double *timeout) {
  size_t nfds = 0;
  double now = pc_Clock_Monotonic();
  for (size_t i = 0; i < n; i++) {
    size_t before = news(&chs[i]->wake);
    double d = enforce_deadlines(chs[i], now);
    d = sooner(d, check_conns(chs[i], now));
    d = sooner(d, start_waiting(chs[i], now));
    if (d >= 0 && d - now < *timeout) *timeout = d - now;
    /* A call it just ended (its deadline came, its connection failed) has
     * news its waiter has not seen: no wait for it. Without this, the last
     * call of a channel to pass its deadline ended here, left no nearer
     * deadline, and its waiter heard of it only after the whole timeout
     * (a second late under pc.run). */
    if (news(&chs[i]->wake) != before) *timeout = 0;
    for (Conn *c = chs[i]->conns; c; c = c->next) {
      if (c->ready) flush_out(c);
      if (c->sock == NULL || nfds == max) continue;
      const char *p;
      int want = c->ready && pc_GrpcEngine_Output(c->engine, &p) > 0;
      fds[nfds].fd = pc_NetSocket_Fd(c->sock);
      fds[nfds].events = pc_NetSocket_Events(c->sock, want);
      fds[nfds].revents = 0;
      /* a connect that failed at once (a Unix socket file not there) has
       * no descriptor for poll(2) to report: serviced at once */
      if (fds[nfds].fd < 0 && !c->ready && !chs[i]->o.host_io) *timeout = 0;
      who[nfds++] = c;
    }
  }
  return nfds;
}

void pc_Grpc_PollDone(pc_GrpcChannel *const *chs, size_t n, const struct pollfd *fds,
                      void *const *who, size_t nfds) {
  double now = pc_Clock_Monotonic();
  /* A call whose deadline passed while the poll waited ends
   * DEADLINE_EXCEEDED before what arrived meanwhile is read (a server
   * resetting the stream at its own, later-started, deadline). */
  for (size_t i = 0; i < n; i++) enforce_deadlines(chs[i], now);
  for (size_t i = 0; i < nfds; i++) {
    if (fds[i].revents || fds[i].fd < 0) service(who[i]);
  }
  now = pc_Clock_Monotonic();
  for (size_t i = 0; i < n; i++) {
    enforce_deadlines(chs[i], now);
    check_conns(chs[i], now);
    start_waiting(chs[i], now);
    check_calls(chs[i]);
    reap(chs[i]);
  }
}

size_t pc_Grpc_PollSlots(pc_GrpcChannel *const *chs, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    for (Conn *c = chs[i]->conns; c; c = c->next) count += c->sock != NULL;
    count += 2; /* a connection _PollPrepare may open for waiting calls */
  }
  return count;
}

int pc_GrpcPollSet_Init(pc_GrpcPollSet *p, size_t cap, size_t nspans) {
  p->heap = NULL;
  p->heap_size = 0;
  if (cap <= sizeof p->small_fds / sizeof p->small_fds[0] &&
      nspans <= sizeof p->small_spans / sizeof p->small_spans[0]) {
    p->fds = p->small_fds;
    p->who = p->small_who;
    p->spans = p->small_spans;
  } else {
    size_t each = sizeof(struct pollfd) + sizeof(void *);
    if (cap > (SIZE_MAX / 2) / each || nspans > (SIZE_MAX / 2) / sizeof(size_t)) return 0;
    size_t size = cap * each + nspans * sizeof(size_t) + 1;
    char *m = pc_DefaultAlloc(NULL, NULL, 0, size);
    if (m == NULL) return 0;
    p->heap = m;
    p->heap_size = size;
    p->who = (void **)m; /* pointers first: each part stays aligned */
    p->fds = (struct pollfd *)(m + cap * sizeof(void *));
    p->spans = (size_t *)(m + cap * each);
  }
  p->cap = cap;
  p->nspans = nspans;
  return 1;
}

void pc_GrpcPollSet_Free(pc_GrpcPollSet *p) {
  if (p->heap != NULL) pc_DefaultAlloc(NULL, p->heap, p->heap_size, 0);
  p->heap = NULL;
}

int pc_Grpc_Pump(pc_GrpcChannel *const *chs, size_t n, double timeout) {
  pc_GrpcPollSet ps;
  if (!pc_GrpcPollSet_Init(&ps, pc_Grpc_PollSlots(chs, n), 0)) return 0;
  size_t nfds = pc_Grpc_PollPrepare(chs, n, ps.fds, ps.who, ps.cap, &timeout);
  if (timeout < 0) timeout = 0;
  int ms = timeout > 3600 ? 3600000 : (int)(timeout * 1000 + 0.999);
  int r = poll(ps.fds, nfds, ms);
  if (r >= 0) pc_Grpc_PollDone(chs, n, ps.fds, ps.who, nfds);
  pc_GrpcPollSet_Free(&ps);
  return r >= 0;
}

/* -- host I/O ------------------------------------------------------------ */

static Conn *host_conn(pc_GrpcChannel *ch, unsigned id) {
  for (Conn *c = ch->conns; c; c = c->next) {
    if (c->id == id) return c->sock ? c : NULL;
  }
  return NULL;
}

size_t pc_GrpcChannel_HostConns(const pc_GrpcChannel *ch, pc_GrpcHostConn *out, size_t max) {
  size_t n = 0;
  for (const Conn *c = ch->conns; c; c = c->next) {
    if (c->sock == NULL) continue;
    if (n < max) {
      out[n].id = c->id;
      out[n].ready = c->ready || c->host_up;
      out[n].calls = c->calls;
    }
    n++;
  }
  return n;
}

unsigned pc_GrpcChannel_HostVersion(const pc_GrpcChannel *ch) {
  return ch->host_version;
}

double pc_GrpcChannel_HostTick(pc_GrpcChannel *ch) {
  double now = pc_Clock_Monotonic();
  for (Conn *c = ch->conns; c; c = c->next) {
    if (ch->o.host_io && c->ready && c->sock && !pc_NetSocket_HostedTls(c->sock)) {
      /* Ready without TLS: the host reads, and its pc_GrpcChannel_HostOutput
       * serializes what the engine queued; nothing to read or write here
       * (service's reads get nothing, its writes take nothing) but the
       * end of an engine that is done. */
      if (!pc_GrpcEngine_Alive(c->engine)) {
        flush_out(c); /* a GOAWAY of ours */
        close_sock(c);
      }
      continue;
    }
    service(c);
  }
  double d = enforce_deadlines(ch, now);
  d = sooner(d, check_conns(ch, now));
  d = sooner(d, start_waiting(ch, now));
  check_calls(ch);
  reap(ch);
  return d < 0 ? -1 : (d > now ? d - now : 0);
}

void pc_GrpcChannel_HostConnected(pc_GrpcChannel *ch, unsigned id, int ok, const char *why) {
  Conn *c = host_conn(ch, id);
  if (c == NULL) return;
  c->host_up = ok != 0;
  ch->host_version++;
  pc_NetSocket_SetHosted(c->sock, ok, why);
  service(c);
}

/* With TLS the socket runs it (socket.h, hosted TLS): the engine's output
 * goes through it and the host moves the ciphertext. */
/* What pc_GrpcChannel_HostOutput gives; 'all': with the frames nghttp2
 * holds added to bytes left unwritten (else those bytes alone). */
static size_t host_output(pc_GrpcChannel *ch, unsigned id, const char **data, int all) {
  Conn *c = host_conn(ch, id);
  if (c != NULL && c->host_up && pc_NetSocket_HostedTls(c->sock)) {
    flush_out(c); /* the engine's bytes into TLS */
    return c->sock ? pc_NetSocket_HostedOutput(c->sock, data) : 0;
  }
  if (c == NULL || !c->ready) return 0;
  /* the frames of every call started since the last write, in one (the
   * pointer lasts until the next call on the channel) */
  return all ? pc_GrpcEngine_OutputAll(c->engine, data) : pc_GrpcEngine_Output(c->engine, data);
}

size_t pc_GrpcChannel_HostOutput(pc_GrpcChannel *ch, unsigned id, const char **data) {
  return host_output(ch, id, data, 1);
}

int pc_GrpcChannel_HostHasOutput(pc_GrpcChannel *ch, unsigned id) {
  const char *p;
  return host_output(ch, id, &p, 0) > 0;
}

void pc_GrpcChannel_HostWrote(pc_GrpcChannel *ch, unsigned id, size_t n) {
  Conn *c = host_conn(ch, id);
  const char *p;
  if (c != NULL && pc_NetSocket_HostedTls(c->sock)) {
    pc_NetSocket_HostedWrote(c->sock, n);
    if (c->ready && !pc_GrpcEngine_Alive(c->engine) && pc_GrpcEngine_Output(c->engine, &p) == 0 &&
        pc_NetSocket_HostedOutput(c->sock, &p) == 0)
      close_sock(c);
    return;
  }
  if (c == NULL || !c->ready) return;
  pc_GrpcEngine_Wrote(c->engine, n);
  if (!pc_GrpcEngine_Alive(c->engine) && pc_GrpcEngine_Output(c->engine, &p) == 0) close_sock(c);
}

int pc_GrpcChannel_HostRecv(pc_GrpcChannel *ch, unsigned id, const void *data, size_t len) {
  Conn *c = host_conn(ch, id);
  if (c != NULL && c->host_up && pc_NetSocket_HostedTls(c->sock)) {
    if (!pc_NetSocket_HostedInput(c->sock, data, len)) {
      lose(c, "out of memory");
      return 0;
    }
    c->last_recv = pc_Clock_Monotonic();
    service(c); /* the handshake, or the plain bytes into the engine */
    return c->sock != NULL;
  }
  if (c == NULL || !c->ready) return 0;
  c->last_recv = pc_Clock_Monotonic();
  return pc_GrpcEngine_Recv(c->engine, data, len);
}

void pc_GrpcChannel_HostLost(pc_GrpcChannel *ch, unsigned id, const char *why) {
  Conn *c = host_conn(ch, id);
  if (c == NULL) return;
  c->host_up = 0;
  ch->host_version++;
  pc_NetSocket_SetHosted(c->sock, 0, why);
  lose(c, pc_NetSocket_Error(c->sock)); /* 'why', or during a TLS handshake naming it */
}

unsigned pc_GrpcChannel_Goaways(const pc_GrpcChannel *ch) {
  return ch->goaways;
}

double pc_GrpcChannel_NextAttempt(const pc_GrpcChannel *ch) {
  double in = ch->backoff.retry_at - pc_Clock_Monotonic();
  return in > 0 ? in : 0;
}

int pc_GrpcChannel_Busy(const pc_GrpcChannel *ch) {
  return ch->live_calls > 0;
}

int pc_GrpcChannel_Connected(const pc_GrpcChannel *ch) {
  for (const Conn *c = ch->conns; c; c = c->next) {
    if (c->sock != NULL && pc_GrpcEngine_Alive(c->engine)) return 1;
  }
  return 0;
}
