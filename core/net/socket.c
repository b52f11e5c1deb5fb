/* The built-in I/O driver (see socket.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* NI_MAXHOST, MSG_NOSIGNAL */

#include "net/socket.h"

#include "net/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

#define TLS_CHUNK ((size_t)16384)

enum { kConnecting, kHandshake, kReady, kFailed };

struct pc_NetSocket {
  pc_Alloc *alloc;
  void *ud;
  int fd;
  int state;
  struct addrinfo *list, *next_ai;
  struct sockaddr_un unix_sa; /* pc_NetOptions.unix_path */
  socklen_t unix_len;         /* 0: not a Unix-domain socket, or tried */
  pc_NetTlsClient *tc;        /* the client TLS setup held (NULL: none, or a server's socket) */
  pc_NetTls *tls;             /* NULL: plain TCP; encrypted bytes wait in it until sent */
  char *where;                /* "host:port" (NULL: no memory for it), for messages */
  size_t where_size;          /* ...of its block */
  char *err;       /* why it failed: NULL before (a block of its own, only on a failure) */
  size_t err_size; /* ...of that block */
  int has_cert;    /* a client certificate is configured */
  int got_data;    /* application data arrived over TLS */
  int hosted;      /* pc_NetSocket_NewHosted: no descriptor, the host moves the bytes */
  int linger;      /* pc_NetSocket_Linger: 1 sending what is left, 2 reading to the end */
};

/* Keeps 'text' as the socket's error (none when memory runs out:
 * pc_NetSocket_Error then says "connection failed"). */
static void keep_err(pc_NetSocket *s, const char *text) {
  if (s->err) s->alloc(s->ud, s->err, s->err_size, 0);
  s->err_size = strlen(text) + 1;
  s->err = s->alloc(s->ud, NULL, 0, s->err_size);
  if (s->err) memcpy(s->err, text, s->err_size);
}

/* The peer's name for messages. */
static const char *peer_name(const pc_NetSocket *s) {
  return s->where ? s->where : "";
}

/* Keeps "what where: why" as the socket's error: whole with a DNS name
 * (253 bytes) in 'where' and in 'why' (pc_NetTls_Why), else cut with "...". */
static void set_err(pc_NetSocket *s, const char *what, const char *why) {
  char text[2 * PC_ERROR_MAX];
  int n = snprintf(text, sizeof text, "%s %s: %s", what, peer_name(s), why);
  if (n < 0)
    text[0] = '\0';
  else if ((size_t)n >= sizeof text)
    memcpy(text + sizeof text - 4, "...", 4);
  keep_err(s, text);
}

static void tls_err(pc_NetSocket *s, const char *what) {
  char text[PC_ERROR_MAX];
  pc_NetTls_Why(s->tls, text, sizeof text);
  set_err(s, what, text[0] ? text : "connection closed during the TLS handshake");
}

/* Starts a non-blocking connect to the next address; 0 when none is left. */
static int start_next(pc_NetSocket *s) {
  if (s->unix_len > 0) {
    socklen_t len = s->unix_len;
    s->unix_len = 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      set_err(s, "connect to", strerror(errno));
      return 0;
    }
    if (connect(fd, (struct sockaddr *)&s->unix_sa, len) == 0 || errno == EINPROGRESS) {
      s->fd = fd;
      return 1;
    }
    set_err(s, "connect to", strerror(errno));
    close(fd);
    return 0;
  }
  while (s->next_ai) {
    struct addrinfo *ai = s->next_ai;
    s->next_ai = ai->ai_next;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      set_err(s, "connect to", strerror(errno));
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
      s->fd = fd;
      return 1;
    }
    set_err(s, "connect to", strerror(errno));
    close(fd);
  }
  return 0;
}

/* TLS for a client connection to 'host', verifying o->server_name when
 * set, else 'host'. */
static int setup_tls(pc_NetSocket *s, const pc_NetOptions *o, const char *host, pc_Error *err) {
  if (o->tls_client) {
    s->tc = o->tls_client;
    pc_NetTlsClient_Hold(s->tc);
  } else {
    s->tc = pc_NetTlsClient_New(o, err);
    if (s->tc == NULL) return 0;
  }
  s->has_cert = pc_NetTlsClient_HasCert(s->tc);
  int named = o->server_name && o->server_name[0];
  s->tls = pc_NetTls_NewClient(s->tc, named ? o->server_name : host, named, o->insecure);
  if (s->tls == NULL) {
    pc_Error_Set(err, "cannot set up TLS (OpenSSL)");
    return 0;
  }
  return 1;
}

int pc_Net_UnixAddress(const char *path, int abstract, struct sockaddr_un *sa, socklen_t *len,
                       pc_Error *err) {
  size_t n = strlen(path);
  size_t room = sizeof sa->sun_path - 1; /* a file's path ends with a NUL; a name starts with one */
  if (n == 0 || n > room) {
    pc_Error_Set(err, "%s: unix%s:%.60s%s",
                 n == 0     ? "empty path"
                 : abstract ? "name longer than 106 bytes (sun_path)"
                            : "path longer than 107 bytes (sun_path)",
                 abstract ? "-abstract" : "", path, n > 60 ? "..." : "");
    return 0;
  }
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  memcpy(sa->sun_path + (abstract ? 1 : 0), path, n);
  *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
  return 1;
}

/* Keeps 'text' as the socket's name for messages, in a block of its own
 * (the name of a peer is short: no fixed array per connection). Returns 0
 * when memory runs out. */
static int keep_where(pc_NetSocket *s, const char *text) {
  s->where_size = strlen(text) + 1;
  s->where = s->alloc(s->ud, NULL, 0, s->where_size);
  if (s->where) memcpy(s->where, text, s->where_size);
  return s->where != NULL;
}

/* Names the peer for messages ("host:port", "unix:path"); returns the
 * host TLS names by default ("localhost" for a Unix-domain socket), NULL
 * when memory runs out. */
static const char *set_where(pc_NetSocket *s, const pc_NetOptions *o) {
  char text[300];
  const char *host = o->unix_path ? "localhost" : o->host;
  if (o->unix_path)
    snprintf(text, sizeof text, "unix%s:%.280s", o->unix_abstract ? "-abstract" : "", o->unix_path);
  else
    snprintf(text, sizeof text, strchr(o->host, ':') ? "[%.250s]:%s" : "%.250s:%s", o->host,
             o->port);
  return keep_where(s, text) ? host : NULL;
}

pc_NetSocket *pc_NetSocket_Connect(const pc_NetOptions *o, pc_Alloc *alloc, void *ud,
                                   pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_NetSocket *s = alloc(ud, NULL, 0, sizeof *s);
  if (s == NULL) {
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  memset(s, 0, sizeof *s);
  s->alloc = alloc;
  s->ud = ud;
  s->fd = -1;
  const char *host = set_where(s, o);
  if (host == NULL) {
    pc_NetSocket_Close(s);
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  if (o->unix_path &&
      !pc_Net_UnixAddress(o->unix_path, o->unix_abstract, &s->unix_sa, &s->unix_len, err)) {
    pc_NetSocket_Close(s);
    return NULL;
  }
  if (o->tls && !setup_tls(s, o, host, err)) {
    pc_NetSocket_Close(s);
    return NULL;
  }
  if (o->unix_path) {
    s->state = kConnecting;
    if (!start_next(s)) s->state = kFailed;
    return s;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  int r = getaddrinfo(o->host, o->port, &hints, &s->list);
  if (r != 0) {
    pc_Error_Set(err, "resolve %s: %s", peer_name(s), gai_strerror(r));
    s->list = NULL;
    pc_NetSocket_Close(s);
    return NULL;
  }
  s->next_ai = s->list;
  s->state = kConnecting;
  if (!start_next(s)) s->state = kFailed;
  return s;
}

/* Sends encrypted bytes waiting in the TLS output: 1 when all went, 0
 * when the socket is full, -1 on an error. They are sent from the TLS
 * output's own buffer and dropped from it as they go, so a socket keeps no
 * copy (an idle connection holds no send buffer of its own). */
static int flush_tls(pc_NetSocket *s) {
  if (s->hosted) /* the host takes it (pc_NetSocket_HostedOutput): 1 while little waits */
    return pc_NetTls_Output(s->tls, NULL) < TLS_CHUNK * 4;
  for (;;) {
    const char *p = NULL;
    size_t n = pc_NetTls_Output(s->tls, &p);
    if (n == 0) return 1;
    ssize_t w = send(s->fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
      set_err(s, "send to", strerror(errno));
      return -1;
    }
    pc_NetTls_Sent(s->tls, (size_t)w);
  }
}

/* Moves received bytes into the TLS input: > 0 bytes moved, 0 nothing now,
 * -1 at the end or on an error (or out of memory). */
static long feed_tls(pc_NetSocket *s) {
  if (s->hosted) return 0; /* the host gives it (pc_NetSocket_HostedInput) */
  char buf[TLS_CHUNK];
  ssize_t n = recv(s->fd, buf, sizeof buf, 0);
  if (n > 0) {
    if (!pc_NetTls_Input(s->tls, buf, (size_t)n)) {
      set_err(s, "read from", "out of memory");
      return -1;
    }
    return (long)n;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  if (n == 0)
    set_err(s, "read from", "connection closed by the peer");
  else
    set_err(s, "read from", strerror(errno));
  return -1;
}

static int handshake(pc_NetSocket *s) {
  for (;;) {
    int r = pc_NetTls_Handshake(s->tls);
    if (flush_tls(s) < 0) return -1;
    if (r == 1) break;
    if (r < 0) {
      tls_err(s, "TLS handshake with");
      return -1;
    }
    long f = feed_tls(s);
    if (f == 0) return 0;
    if (f < 0) {
      set_err(s, "TLS handshake with", "connection closed (is it a TLS port?)");
      return -1;
    }
  }
  const char *refused = pc_NetTls_AlpnRefused(s->tls);
  if (refused) {
    set_err(s, "TLS handshake with", refused);
    return -1;
  }
  return 1;
}

int pc_NetSocket_Progress(pc_NetSocket *s) {
  if (s->hosted && s->state != kHandshake) return s->state == kFailed ? -1 : s->state == kReady;
  if (s->state == kConnecting) {
    struct pollfd p = {s->fd, POLLOUT, 0};
    if (s->fd < 0) {
      s->state = kFailed;
      return -1;
    }
    if (poll(&p, 1, 0) == 0) return 0;
    int so = 0;
    socklen_t len = sizeof so;
    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &so, &len);
    if (so != 0) {
      set_err(s, "connect to", strerror(so));
      close(s->fd);
      s->fd = -1;
      if (!start_next(s)) {
        s->state = kFailed;
        return -1;
      }
      return 0;
    }
    s->state = s->tls ? kHandshake : kReady;
    if (s->list) freeaddrinfo(s->list); /* no other address is tried now */
    s->list = s->next_ai = NULL;
  }
  if (s->state == kHandshake) {
    int r = handshake(s);
    if (r < 0) s->state = kFailed;
    if (r > 0) s->state = kReady;
  }
  if (s->state == kFailed) return -1;
  return s->state == kReady;
}

int pc_NetSocket_Fd(const pc_NetSocket *s) {
  return s->fd;
}

short pc_NetSocket_Events(const pc_NetSocket *s, int want_write) {
  if (s->hosted) return 0;
  if (s->state == kConnecting) return POLLOUT;
  if (s->linger) return s->linger == 1 ? POLLOUT : POLLIN;
  short ev = POLLIN;
  if (want_write || (s->tls && pc_NetTls_Output(s->tls, NULL) > 0)) ev |= POLLOUT;
  return ev;
}

long pc_NetSocket_Read(pc_NetSocket *s, void *buf, size_t n) {
  if (s->state != kReady || (s->hosted && s->tls == NULL)) return s->state == kFailed ? -1 : 0;
  if (s->tls == NULL) {
    ssize_t r = recv(s->fd, buf, n, 0);
    if (r > 0) return (long)r;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    set_err(s, "read from", r == 0 ? "connection closed by the peer" : strerror(errno));
    s->state = kFailed;
    return -1;
  }
  for (;;) {
    long r = pc_NetTls_Read(s->tls, buf, n);
    if (flush_tls(s) < 0) {
      s->state = kFailed;
      return -1;
    }
    if (r > 0) {
      s->got_data = 1;
      return r;
    }
    if (r == -1) {
      set_err(s, "read from", "connection closed by the peer (TLS close_notify)");
      s->state = kFailed;
      return -1;
    }
    if (r < 0) {
      tls_err(s, "TLS read from");
      s->state = kFailed;
      return -1;
    }
    long f = feed_tls(s);
    if (f == 0) return 0;
    if (f < 0) {
      /* A TLS 1.3 server that requires a client certificate checks it
       * after the client's handshake is done, and some (gRPC's) then just
       * close the connection, with no alert to report. */
      if (!s->got_data && !s->has_cert)
        set_err(s, "read from",
                "connection closed by the peer right after the TLS handshake (does the server "
                "require a client certificate? cert_file, key_file)");
      s->state = kFailed;
      return -1;
    }
  }
}

long pc_NetSocket_Write(pc_NetSocket *s, const void *buf, size_t n) {
  if (s->state != kReady || (s->hosted && s->tls == NULL)) return s->state == kFailed ? -1 : 0;
  if (s->tls == NULL) {
    ssize_t w = send(s->fd, buf, n, MSG_NOSIGNAL);
    if (w >= 0) return (long)w;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    set_err(s, "send to", strerror(errno));
    s->state = kFailed;
    return -1;
  }
  int f = flush_tls(s);
  if (f <= 0) {
    if (f < 0) s->state = kFailed;
    return f;
  }
  if (n > TLS_CHUNK * 4) n = TLS_CHUNK * 4;
  long r = pc_NetTls_Write(s->tls, buf, n);
  if (r <= 0) {
    tls_err(s, "TLS write to");
    s->state = kFailed;
    return -1;
  }
  if (flush_tls(s) < 0) {
    s->state = kFailed;
    return -1;
  }
  return r;
}

const char *pc_NetSocket_Error(const pc_NetSocket *s) {
  return s->err ? s->err : "connection failed";
}

int pc_NetSocket_Linger(pc_NetSocket *s) {
  if (s->hosted || s->fd < 0 || s->state != kReady) return 1;
  if (s->linger == 0) {
    s->linger = 1;
    if (s->tls) pc_NetTls_Shutdown(s->tls); /* close_notify (the peer's is not awaited) */
  }
  if (s->linger == 1) {
    int f = s->tls ? flush_tls(s) : 1;
    if (f == 0) return 0;
    if (f < 0 || shutdown(s->fd, SHUT_WR) != 0) return 1;
    s->linger = 2;
  }
  char buf[4096];
  for (int i = 0; i < 16; i++) {
    ssize_t n = recv(s->fd, buf, sizeof buf, 0);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    return 1; /* the peer's end, or an error */
  }
  return 0;
}

void pc_NetSocket_Close(pc_NetSocket *s) {
  if (s == NULL) return;
  pc_NetTls_Free(s->tls);
  pc_NetTlsClient_Free(s->tc);
  if (s->fd >= 0) close(s->fd);
  if (s->list) freeaddrinfo(s->list);
  if (s->err) s->alloc(s->ud, s->err, s->err_size, 0);
  if (s->where) s->alloc(s->ud, s->where, s->where_size, 0);
  s->alloc(s->ud, s, sizeof *s, 0);
}

/* -- the serving side ------------------------------------------------------ */

pc_NetSocket *pc_NetSocket_Adopt(int fd, const char *where, pc_NetTlsServer *tls, pc_Alloc *alloc,
                                 void *ud, pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  pc_NetSocket *s = alloc(ud, NULL, 0, sizeof *s);
  if (s == NULL) {
    close(fd);
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  memset(s, 0, sizeof *s);
  s->alloc = alloc;
  s->ud = ud;
  s->fd = fd;
  s->state = kReady;
  char text[300];
  snprintf(text, sizeof text, "%.290s", where);
  if (!keep_where(s, text)) {
    pc_NetSocket_Close(s);
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  if (tls == NULL) return s;
  s->state = kHandshake;
  s->tls = pc_NetTls_NewServer(tls);
  if (s->tls == NULL) {
    pc_NetSocket_Close(s);
    pc_Error_Set(err, "cannot set up TLS (OpenSSL)");
    return NULL;
  }
  return s;
}

pc_NetSocket *pc_NetSocket_NewHosted(const pc_NetOptions *o, pc_Alloc *alloc, void *ud,
                                     pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_NetSocket *s = alloc(ud, NULL, 0, sizeof *s);
  if (s == NULL) {
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  memset(s, 0, sizeof *s);
  s->alloc = alloc;
  s->ud = ud;
  s->fd = -1;
  s->hosted = 1;
  s->state = kConnecting;
  if (o && o->tls) {
    const char *host = set_where(s, o);
    if (host == NULL) {
      pc_NetSocket_Close(s);
      pc_Error_Set(err, "out of memory");
      return NULL;
    }
    if (!setup_tls(s, o, host, err)) {
      pc_NetSocket_Close(s);
      return NULL;
    }
  }
  return s;
}

void pc_NetSocket_SetHosted(pc_NetSocket *s, int ready, const char *why) {
  if (!s->hosted || s->state == kFailed) return;
  if (ready) {
    if (s->state == kConnecting) s->state = s->tls ? kHandshake : kReady;
    return;
  }
  if (s->state == kHandshake) /* a hosted TLS connection lost during its handshake */
    set_err(s, "TLS handshake with", why ? why : "connection closed (is it a TLS port?)");
  else
    keep_err(s, why ? why : "connection failed");
  s->state = kFailed;
}

int pc_NetSocket_HostedTls(const pc_NetSocket *s) {
  return s->hosted && s->tls != NULL;
}

size_t pc_NetSocket_HostedOutput(pc_NetSocket *s, const char **data) {
  if (!pc_NetSocket_HostedTls(s) || s->state == kFailed || s->state == kConnecting) return 0;
  (void)flush_tls(s);
  return pc_NetTls_Output(s->tls, data); /* its own bytes, until pc_NetSocket_HostedWrote */
}

void pc_NetSocket_HostedWrote(pc_NetSocket *s, size_t n) {
  if (!pc_NetSocket_HostedTls(s)) return;
  pc_NetTls_Sent(s->tls, n);
}

int pc_NetSocket_HostedInput(pc_NetSocket *s, const void *data, size_t len) {
  if (!pc_NetSocket_HostedTls(s) || s->state == kFailed) return 1;
  return pc_NetTls_Input(s->tls, data, len);
}

int pc_NetSocket_Resumed(const pc_NetSocket *s) {
  return s->tls != NULL && pc_NetTls_Resumed(s->tls);
}
