/* The gRPC listener (see listener.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* NI_MAXHOST */

#include "net/listener.h"

#include "base/clock.h"
#include "base/hash.h"
#include "net/http1_server.h"
#include "net/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK        ((size_t)16 * 1024)
#define READ_ROUND        ((size_t)256 * 1024)
#define DEFAULT_MAX_CONNS 1000
/* How long an ended connection lingers to let its peer read the GOAWAY
 * (pc_NetSocket_Linger) before it is closed anyway. */
#define LINGER_SECONDS    2.0
/* How long the listening socket is left out of the poll set after accept
 * failed for want of file descriptors or memory (EMFILE, ENFILE, ENOBUFS,
 * ENOMEM): the connection waits in the backlog, readable, so polling it
 * again at once would spin (nginx pauses its accepts the same way). */
#define ACCEPT_PAUSE      0.1

typedef struct SConn SConn;

struct SConn {
  SConn *next;
  pc_NetSocket *sock;
  /* The engine, once the first bytes told which (HTTP/2's client preface
   * or an HTTP/1.x request line): one of these two, or neither yet. */
  pc_GrpcServerConn *engine;
  pc_Http1ServerConn *h1;
  char sniff[24]; /* the first bytes, until they tell */
  size_t nsniff;
  int lost; /* lost before an engine was picked */
  pc_GrpcListener *l;
  int ready;
  int got_bytes;
  double started, active;
  double linger_until; /* > 0: the engine is done, the socket lingers until then */
  double aged_at;      /* > 0: max_connection_age's GOAWAY is due then */
  double grace_until;  /* > 0: that GOAWAY went out; closed then (the grace's end) */
};

struct pc_GrpcListener {
  pc_Alloc *alloc;
  void *ud;
  int fd; /* -1 once shut down */
  int port;
  pc_NetTlsServer *tls;
  pc_GrpcListenerOptions o;
  SConn *conns;
  size_t nconns;  /* live connections, the ones max_connections counts */
  size_t nlinger; /* connections in 'conns' that linger */
  int shutting;
  double accept_after; /* > now: accept failed for want of resources (ACCEPT_PAUSE) */
  char *unix_file;     /* the socket file bound (removed at the end), NULL: none */
  dev_t unix_dev;      /* and its identity, so a file another server bound since stays */
  ino_t unix_ino;
  pc_GrpcWakeList wake; /* the calls' (wake.h); every engine lists into it */
  uint64_t jitter;      /* splitmix64 state of the connections' age draws */
  pc_WebCors cors;      /* a copy of the options' CORS, its strings in cors_text */
  char *cors_text;
  size_t cors_size;
};

/* When a connection accepted at 'now' reaches its maximum age: within
 * +-10 % of max_connection_age (gRFC A9's jitter), 0 for none. */
static double aged_at(pc_GrpcListener *l, double now) {
  double age = l->o.max_connection_age;
  if (age <= 0) return 0;
  l->jitter += 0x9e3779b97f4a7c15u;
  double u = (double)(pc_Hash_Mix64(l->jitter) >> 11) / (double)(UINT64_C(1) << 53); /* [0, 1) */
  return now + age * (0.9 + 0.2 * u);
}

/* Copies the options' CORS (the engines keep a pointer to it) into the
 * listener's own memory, in place of the copy it had; 0 when memory runs
 * out (the copy it had stays). */
static int copy_cors(pc_GrpcListener *l, const pc_WebCors *from) {
  enum { kParts = 5 };
  const char *parts[kParts] = {from->origins ? from->origins : "", from->headers, from->expose,
                               from->methods, from->header_prefix};
  size_t len[kParts], total = 0;
  for (int i = 0; i < kParts; i++) total += (len[i] = parts[i] ? strlen(parts[i]) : 0) + 1;
  char *text = l->alloc(l->ud, NULL, 0, total);
  if (text == NULL) return 0;
  if (l->cors_text) l->alloc(l->ud, l->cors_text, l->cors_size, 0);
  l->cors_text = text;
  l->cors_size = total;
  l->cors = *from;
  const char **to[kParts] = {&l->cors.origins, &l->cors.headers, &l->cors.expose, &l->cors.methods,
                             &l->cors.header_prefix};
  char *p = l->cors_text;
  for (int i = 0; i < kParts; i++) {
    memcpy(p, parts[i] ? parts[i] : "", len[i] + 1);
    *to[i] = parts[i] ? p : NULL;
    p += len[i] + 1;
  }
  l->o.engine.cors = &l->cors;
  return 1;
}

int pc_GrpcListener_SetCors(pc_GrpcListener *l, const pc_WebCors *cors, pc_Error *err) {
  if (l->o.engine.cors == NULL) {
    pc_Error_Set(err, "the listener has no CORS");
    return 0;
  }
  if (!copy_cors(l, cors)) {
    pc_Error_Set(err, "out of memory");
    return 0;
  }
  return 1;
}

static void conn_free(pc_GrpcListener *l, SConn *c) {
  pc_GrpcServerConn_Free(c->engine);
  pc_Http1ServerConn_Free(c->h1);
  pc_NetSocket_Close(c->sock);
  l->alloc(l->ud, c, sizeof *c, 0);
}

/* Removes the socket file at 'path' when it is a stale one: a socket
 * that refuses a connection (no one listens). 1 when the path is free
 * now (removed, or nothing there), 0 with 'err' set otherwise. */
static int remove_stale(const char *path, const struct sockaddr_un *sa, socklen_t len,
                        pc_Error *err) {
  struct stat st;
  if (lstat(path, &st) != 0) return 1; /* nothing there (bind says what else is wrong) */
  if (!S_ISSOCK(st.st_mode)) {
    pc_Error_Set(err, "listen on unix:%.200s: the file exists and is not a socket", path);
    return 0;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    pc_Error_Set(err, "listen on unix:%.200s: %s", path, strerror(errno));
    return 0;
  }
  int r = connect(fd, (const struct sockaddr *)sa, len);
  int e = errno;
  close(fd);
  if (r == 0 || e != ECONNREFUSED) {
    pc_Error_Set(err, "listen on unix:%.200s: %s", path,
                 r == 0 ? "in use (a server listens there)" : strerror(e));
    return 0;
  }
  if (unlink(path) != 0 && errno != ENOENT) {
    pc_Error_Set(err, "listen on unix:%.200s: cannot remove the stale socket: %s", path,
                 strerror(errno));
    return 0;
  }
  return 1;
}

static int listen_unix(pc_GrpcListener *l, const pc_GrpcListenerOptions *o, pc_Error *err) {
  struct sockaddr_un sa;
  socklen_t len;
  const char *kind = o->unix_abstract ? "unix-abstract" : "unix";
  if (!pc_Net_UnixAddress(o->unix_path, o->unix_abstract, &sa, &len, err)) return 0;
  if (!o->unix_abstract && !remove_stale(o->unix_path, &sa, len, err)) return 0;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) != 0) {
    pc_Error_Set(err, "listen on %s:%.200s: %s", kind, o->unix_path, strerror(errno));
    if (fd >= 0) close(fd);
    return 0;
  }
  l->fd = fd; /* closed by pc_GrpcListener_Free on failure */
  if (!o->unix_abstract) {
    struct stat st;
    size_t n = strlen(o->unix_path) + 1;
    l->unix_file = l->alloc(l->ud, NULL, 0, n);
    if (l->unix_file == NULL) {
      unlink(o->unix_path);
      pc_Error_Set(err, "out of memory");
      return 0;
    }
    memcpy(l->unix_file, o->unix_path, n);
    if (lstat(o->unix_path, &st) == 0) {
      l->unix_dev = st.st_dev;
      l->unix_ino = st.st_ino;
    }
    if (o->unix_mode && chmod(o->unix_path, o->unix_mode & 07777) != 0) {
      pc_Error_Set(err, "listen on unix:%.200s: mode %o: %s", o->unix_path, o->unix_mode,
                   strerror(errno));
      return 0;
    }
  }
  if (listen(fd, SOMAXCONN) != 0) {
    pc_Error_Set(err, "listen on %s:%.200s: %s", kind, o->unix_path, strerror(errno));
    return 0;
  }
  return 1;
}

/* Removes the socket file bound, when it is still ours. */
static void remove_file(pc_GrpcListener *l) {
  if (l->unix_file == NULL) return;
  struct stat st;
  if (lstat(l->unix_file, &st) == 0 && st.st_dev == l->unix_dev && st.st_ino == l->unix_ino)
    unlink(l->unix_file);
  l->alloc(l->ud, l->unix_file, strlen(l->unix_file) + 1, 0);
  l->unix_file = NULL;
}

/* -- a connection's engine, HTTP/2 or HTTP/1.1 ------------------------------ */

static int conn_alive(const SConn *c) {
  if (c->engine) return pc_GrpcServerConn_Alive(c->engine);
  if (c->h1) return pc_Http1ServerConn_Alive(c->h1);
  return !c->lost;
}

static void conn_lost(SConn *c) {
  if (c->engine) pc_GrpcServerConn_Lost(c->engine);
  if (c->h1) pc_Http1ServerConn_Lost(c->h1);
  c->lost = 1;
}

static size_t conn_output(SConn *c, const char **p) {
  if (c->engine) return pc_GrpcServerConn_Output(c->engine, p);
  if (c->h1) return pc_Http1ServerConn_Output(c->h1, p);
  return 0;
}

static void conn_wrote(SConn *c, size_t n) {
  if (c->engine) pc_GrpcServerConn_Wrote(c->engine, n);
  if (c->h1) pc_Http1ServerConn_Wrote(c->h1, n);
}

static void conn_shutdown(SConn *c) {
  if (c->engine) pc_GrpcServerConn_Shutdown(c->engine);
  if (c->h1) pc_Http1ServerConn_Shutdown(c->h1);
  if (!c->engine && !c->h1) c->lost = 1; /* nothing started: nothing to finish */
}

static size_t conn_running(const SConn *c) {
  if (c->engine) return pc_GrpcServerConn_Running(c->engine);
  if (c->h1) return pc_Http1ServerConn_Running(c->h1);
  return 0;
}

static double conn_expire(SConn *c, double now) {
  if (c->engine) return pc_GrpcServerConn_Expire(c->engine, now);
  if (c->h1) return pc_Http1ServerConn_Expire(c->h1, now);
  return -1;
}

static pc_GrpcServerCall *conn_accept(SConn *c) {
  if (c->engine) return pc_GrpcServerConn_Accept(c->engine);
  if (c->h1) return pc_Http1ServerConn_Accept(c->h1);
  return NULL;
}

/* Feeds bytes read; the first ones pick the engine (HTTP/2's client
 * preface, else HTTP/1.x). Returns 0 when the connection broke. */
static int conn_recv(SConn *c, const char *p, size_t n, double now) {
  pc_GrpcListener *l = c->l;
  if (c->engine) return pc_GrpcServerConn_Recv(c->engine, p, n, now);
  if (c->h1) return pc_Http1ServerConn_Recv(c->h1, p, n, now);
  size_t k = sizeof c->sniff - c->nsniff;
  if (k > n) k = n;
  memcpy(c->sniff + c->nsniff, p, k);
  c->nsniff += k;
  int kind = pc_Http1_SniffPreface(c->sniff, c->nsniff);
  if (kind == 0) return 1;
  pc_Error err;
  pc_Error_Init(&err);
  if (kind == 2) {
    c->engine = pc_GrpcServerConn_New(&l->o.engine, l->alloc, l->ud, &err);
  } else {
    pc_Http1ServerOptions o;
    memset(&o, 0, sizeof o);
    o.engine = l->o.engine;
    o.head_timeout = l->o.handshake_timeout;
    c->h1 = pc_Http1ServerConn_New(&o, l->alloc, l->ud, &err);
  }
  if (c->engine == NULL && c->h1 == NULL) {
    c->lost = 1;
    return 0;
  }
  return conn_recv(c, c->sniff, c->nsniff, now) && (k == n || conn_recv(c, p + k, n - k, now));
}

pc_GrpcListener *pc_GrpcListener_New(const pc_GrpcListenerOptions *o, pc_Alloc *alloc, void *ud,
                                     pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_GrpcListener *l = alloc(ud, NULL, 0, sizeof *l);
  if (l == NULL) {
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  memset(l, 0, sizeof *l);
  l->alloc = alloc;
  l->ud = ud;
  l->fd = -1;
  pc_GrpcWakeList_Init(&l->wake, alloc, ud);
  l->o = *o;
  l->o.engine.wake = &l->wake;
  l->o.engine.cors = NULL;
  if (o->engine.cors && !copy_cors(l, o->engine.cors)) {
    pc_Error_Set(err, "out of memory");
    pc_GrpcWakeList_Free(&l->wake);
    l->alloc(l->ud, l, sizeof *l, 0);
    return NULL;
  }
  l->o.host = l->o.port = l->o.cert_file = l->o.key_file = l->o.client_ca_file = NULL;
  l->o.unix_path = NULL;
  if (l->o.max_connections == 0) l->o.max_connections = DEFAULT_MAX_CONNS;
  if (l->o.handshake_timeout <= 0) l->o.handshake_timeout = 10;
  if (l->o.idle_timeout == 0) l->o.idle_timeout = 300;
  l->jitter = (uint64_t)(uintptr_t)l ^ (uint64_t)(pc_Clock_Monotonic() * 1e9);
  if (o->cert_file) {
    l->tls = pc_NetTlsServer_New(o->cert_file, o->key_file, o->client_ca_file, err);
    if (l->tls == NULL) goto fail;
  }
  if (o->unix_path) {
    if (!listen_unix(l, o, err)) goto fail;
    return l;
  }
  struct addrinfo hints, *list = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const char *host = o->host && o->host[0] ? o->host : NULL;
  int r = getaddrinfo(host, o->port, &hints, &list);
  if (r != 0) {
    pc_Error_Set(err, "listen on %.200s:%.20s: %s", host ? host : "*", o->port, gai_strerror(r));
    goto fail;
  }
  int saved = 0;
  for (struct addrinfo *ai = list; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      saved = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
      l->fd = fd;
      break;
    }
    saved = errno;
    close(fd);
  }
  freeaddrinfo(list);
  if (l->fd < 0) {
    pc_Error_Set(err, "listen on %.200s:%.20s: %s", host ? host : "*", o->port, strerror(saved));
    goto fail;
  }
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(l->fd, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET6)
      l->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    else
      l->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  }
  return l;
fail:
  pc_GrpcListener_Free(l);
  return NULL;
}

int pc_GrpcListener_Port(const pc_GrpcListener *l) {
  return l->port;
}

pc_GrpcServerCall *pc_GrpcListener_Accept(pc_GrpcListener *l) {
  for (SConn *c = l->conns; c; c = c->next) {
    pc_GrpcServerCall *s = conn_accept(c);
    if (s) return s;
  }
  return NULL;
}

void pc_GrpcListener_Shutdown(pc_GrpcListener *l) {
  l->shutting = 1;
  if (l->fd >= 0) close(l->fd);
  l->fd = -1;
  remove_file(l);
  for (SConn *c = l->conns; c; c = c->next) conn_shutdown(c);
}

void pc_GrpcListener_CloseAll(pc_GrpcListener *l) {
  while (l->conns) {
    SConn *c = l->conns;
    l->conns = c->next;
    conn_lost(c);
    conn_free(l, c);
  }
  l->nconns = l->nlinger = 0;
}

pc_GrpcWakeList *pc_GrpcListener_Wake(pc_GrpcListener *l) {
  return &l->wake;
}

size_t pc_GrpcListener_Connections(const pc_GrpcListener *l) {
  return l->nconns;
}

void pc_GrpcListener_Free(pc_GrpcListener *l) {
  if (l == NULL) return;
  pc_GrpcListener_CloseAll(l);
  if (l->fd >= 0) close(l->fd);
  remove_file(l);
  pc_NetTlsServer_Free(l->tls);
  pc_GrpcWakeList_Free(&l->wake);
  if (l->cors_text) l->alloc(l->ud, l->cors_text, l->cors_size, 0);
  l->alloc(l->ud, l, sizeof *l, 0);
}

/* -- I/O --------------------------------------------------------------------- */

/* Closes the lingering connection that has lingered longest (the one due
 * first), making room for a live one: live and lingering connections
 * together hold at most max_connections sockets. */
static void drop_lingering(pc_GrpcListener *l) {
  SConn **first = NULL;
  for (SConn **pp = &l->conns; *pp; pp = &(*pp)->next)
    if ((*pp)->linger_until > 0 && (first == NULL || (*pp)->linger_until < (*first)->linger_until))
      first = pp;
  if (first == NULL) return;
  SConn *c = *first;
  *first = c->next;
  l->nlinger--;
  conn_free(l, c);
}

static void accept_all(pc_GrpcListener *l, double now) {
  for (int i = 0; i < 64 && l->fd >= 0; i++) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = accept(l->fd, (struct sockaddr *)&ss, &len);
    if (fd < 0) { /* EAGAIN, a failure of that one client, or out of resources */
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        l->accept_after = now + ACCEPT_PAUSE;
      return;
    }
    if (l->nconns >= l->o.max_connections) {
      close(fd);
      continue;
    }
    if (l->nconns + l->nlinger >= l->o.max_connections) drop_lingering(l);
    char host[NI_MAXHOST] = "?", port[16] = "?", where[NI_MAXHOST + 24];
    if (ss.ss_family == AF_UNIX) {
      snprintf(where, sizeof where, "unix:%.200s", l->unix_file ? l->unix_file : "(abstract)");
    } else {
      getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV);
      snprintf(where, sizeof where, "%s:%s", host, port);
    }
    pc_Error err;
    pc_Error_Init(&err);
    SConn *c = l->alloc(l->ud, NULL, 0, sizeof *c);
    if (c == NULL) {
      close(fd);
      continue;
    }
    memset(c, 0, sizeof *c);
    c->l = l;
    c->sock = pc_NetSocket_Adopt(fd, where, l->tls, l->alloc, l->ud, &err);
    if (c->sock == NULL) {
      l->alloc(l->ud, c, sizeof *c, 0);
      continue;
    }
    c->started = c->active = now;
    c->aged_at = aged_at(l, now);
    c->next = l->conns;
    l->conns = c;
    l->nconns++;
  }
}

static void flush(SConn *c) {
  while (c->sock && c->ready) {
    const char *p;
    size_t len = conn_output(c, &p);
    if (len == 0) break;
    long w = pc_NetSocket_Write(c->sock, p, len);
    if (w < 0) {
      conn_lost(c);
      return;
    }
    conn_wrote(c, (size_t)w);
    if ((size_t)w < len) break;
  }
}

static void service(SConn *c, double now) {
  if (c->linger_until > 0) { /* done once the peer closed: tend closes it */
    if (pc_NetSocket_Linger(c->sock)) c->linger_until = now;
    return;
  }
  if (!c->ready) {
    int r = pc_NetSocket_Progress(c->sock);
    if (r < 0) {
      conn_lost(c);
      return;
    }
    if (r == 0) return;
    c->ready = 1;
  }
  char buf[READ_CHUNK];
  size_t total = 0;
  while (total < READ_ROUND && conn_alive(c)) {
    long n = pc_NetSocket_Read(c->sock, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      conn_lost(c);
      return;
    }
    c->got_bytes = 1;
    c->active = now;
    total += (size_t)n;
    if (!conn_recv(c, buf, (size_t)n, now)) break;
  }
  flush(c);
}

/* Deadlines, timeouts, and connections that are over; returns the
 * nearest time something is due (-1: none). */
static double tend(pc_GrpcListener *l, double now) {
  double due = -1;
  SConn **pp = &l->conns;
  while (*pp) {
    SConn *c = *pp;
    if (c->linger_until > 0) {
      if (now >= c->linger_until) {
        *pp = c->next;
        l->nlinger--;
        conn_free(l, c);
        continue;
      }
      if (due < 0 || c->linger_until < due) due = c->linger_until;
      pp = &c->next;
      continue;
    }
    if (c->ready) flush(c);
    double d = conn_expire(c, now);
    int waiting = !c->ready || !c->got_bytes || (!c->engine && !c->h1);
    if (waiting && now - c->started > l->o.handshake_timeout) conn_lost(c);
    if (waiting) {
      double h = c->started + l->o.handshake_timeout;
      if (d < 0 || h < d) d = h;
    } else if (l->o.idle_timeout > 0 && conn_running(c) == 0) {
      double i = c->active + l->o.idle_timeout;
      if (now >= i) conn_shutdown(c);
      if (now >= i + l->o.handshake_timeout) conn_lost(c);
      if (d < 0 || i < d) d = i;
    }
    if (c->aged_at > 0 && !waiting) { /* max_connection_age */
      double t = c->aged_at;
      if (now >= c->aged_at) {
        conn_shutdown(c);
        c->aged_at = 0;
        double grace = l->o.max_connection_age_grace;
        if (grace > 0) c->grace_until = now + grace;
      }
      if (c->aged_at > 0 && (d < 0 || t < d)) d = t;
    }
    if (c->grace_until > 0) {
      if (now >= c->grace_until)
        conn_lost(c);
      else if (d < 0 || c->grace_until < d)
        d = c->grace_until;
    }
    if (c->ready) flush(c);
    if (!conn_alive(c)) {
      l->nconns--;
      /* Lingers, so the peer reads the GOAWAY rather than a reset (a
       * new connection may end that early: drop_lingering). */
      if (c->ready && !pc_NetSocket_Linger(c->sock)) {
        c->linger_until = now + LINGER_SECONDS;
        l->nlinger++;
        if (due < 0 || c->linger_until < due) due = c->linger_until;
        pp = &c->next;
        continue;
      }
      *pp = c->next;
      conn_free(l, c);
      continue;
    }
    if (d >= 0 && (due < 0 || d < due)) due = d;
    pp = &c->next;
  }
  return due;
}

/* Tends listener 'l' (timeouts, flushes), lowers '*timeout' to when its
 * next timer is due and adds its sockets to 'fds' / 'who' (NULL for the
 * listening socket) from entry 'nfds' on, up to 'max'; returns the new
 * count. */
static size_t prepare(pc_GrpcListener *l, double now, struct pollfd *fds, void **who, size_t nfds,
                      size_t max, double *timeout) {
  size_t before = l->wake.count + (l->wake.overflow ? 1 : 0);
  double due = tend(l, now);
  if (due >= 0 && due - now < *timeout) *timeout = due - now;
  /* a call it just ended (its deadline) has news its handler has not seen */
  if (l->wake.count + (l->wake.overflow ? 1 : 0) != before) *timeout = 0;
  if (l->fd >= 0 && now < l->accept_after) { /* the listening socket sits out its pause */
    if (l->accept_after - now < *timeout) *timeout = l->accept_after - now;
  } else if (l->fd >= 0 && nfds < max) {
    fds[nfds].fd = l->fd;
    fds[nfds].events = POLLIN;
    fds[nfds].revents = 0;
    who[nfds++] = NULL; /* the listening socket */
  }
  for (SConn *c = l->conns; c && nfds < max; c = c->next) {
    const char *p;
    int want = c->ready && c->linger_until == 0 && conn_output(c, &p) > 0;
    fds[nfds].fd = pc_NetSocket_Fd(c->sock);
    fds[nfds].events = pc_NetSocket_Events(c->sock, want);
    fds[nfds].revents = 0;
    who[nfds++] = c;
  }
  return nfds;
}

size_t pc_Grpc_PollCount(pc_GrpcChannel *const *chs, size_t n, pc_GrpcListener *const *ls, size_t m,
                         size_t nr) {
  size_t count = pc_Grpc_PollSlots(chs, n) + pc_NetResolver_PollSlots(nr);
  for (size_t i = 0; i < m; i++) count += 1 + ls[i]->nconns + ls[i]->nlinger;
  return count;
}

size_t pc_Grpc_PollFds(pc_GrpcChannel *const *chs, size_t n, pc_GrpcListener *const *ls, size_t m,
                       pc_NetResolver *const *rs, size_t nr, struct pollfd *fds, size_t max,
                       double *timeout) {
  pc_GrpcPollSet ps; /* for 'who', which only the pump needs */
  if (!pc_GrpcPollSet_Init(&ps, max, 0)) return 0;
  double now = pc_Clock_Monotonic();
  size_t nfds = pc_Grpc_PollPrepare(chs, n, fds, ps.who, max, timeout);
  for (size_t i = 0; i < m; i++) nfds = prepare(ls[i], now, fds, ps.who, nfds, max, timeout);
  nfds += pc_NetResolver_PollPrepare(rs, nr, fds + nfds, max - nfds, timeout);
  pc_GrpcPollSet_Free(&ps);
  return nfds;
}

int pc_Grpc_PumpAll(pc_GrpcChannel *const *chs, size_t n, pc_GrpcListener *const *ls, size_t m,
                    pc_NetResolver *const *rs, size_t nr, double timeout) {
  pc_GrpcPollSet ps;
  if (!pc_GrpcPollSet_Init(&ps, pc_Grpc_PollCount(chs, n, ls, m, nr), m)) return 0;
  struct pollfd *fds = ps.fds;
  void **who = ps.who;
  double now = pc_Clock_Monotonic();
  size_t nch = pc_Grpc_PollPrepare(chs, n, fds, who, ps.cap, &timeout);
  size_t nfds = nch;
  for (size_t i = 0; i < m; i++) {
    size_t first = nfds;
    nfds = prepare(ls[i], now, fds, who, nfds, ps.cap, &timeout);
    ps.spans[i] = nfds - first;
  }
  size_t nres = nfds; /* the resolvers' entries come last */
  nfds += pc_NetResolver_PollPrepare(rs, nr, fds + nres, ps.cap - nres, &timeout);
  if (timeout < 0) timeout = 0;
  int ms = timeout > 3600 ? 3600000 : (int)(timeout * 1000 + 0.999);
  if (poll(fds, nfds, ms) < 0 && errno != EINTR) {
    pc_GrpcPollSet_Free(&ps);
    return 0;
  }
  pc_Grpc_PollDone(chs, n, fds, who, nch);
  pc_NetResolver_PollDone(rs, nr, fds + nres, nfds - nres);
  now = pc_Clock_Monotonic();
  size_t k = nch;
  for (size_t i = 0; i < m; i++) {
    /* Connections first, then the ended ones counted out (tend), then new
     * ones: a client that closes and connects again at once, at
     * max_connections, is not refused for the connection it ended. */
    int listening = 0;
    for (size_t end = k + ps.spans[i]; k < end; k++) {
      if (!fds[k].revents) continue;
      if (who[k] == NULL)
        listening = 1;
      else
        service(who[k], now);
    }
    tend(ls[i], now);
    if (listening) accept_all(ls[i], now);
  }
  pc_GrpcPollSet_Free(&ps);
  return 1;
}
