/* gRPC over HTTP/2 through libcurl's multi interface (see grpc_http2.h).
 *
 * libcurl does the HTTP/2 (nghttp2) and TLS; this file does what gRPC adds
 * on top: length-prefixed messages, gzip, grpc-timeout, metadata encoding,
 * and deciding the status of a call from what libcurl reports. libcurl does
 * not mark trailers (GRPC-TRANSPORT-NOTES.md), so the header callback
 * tracks where it is: status line, header block, blank line, trailers. */
#define _POSIX_C_SOURCE 200809L

#include "net/grpc_http2.h"

#include <curl/curl.h>
#define ZLIB_CONST /* next_in is const */
#include <zlib.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Large enough for any header line a gRPC server sends (libcurl stalls on
 * a header line longer than its receive buffer). */
#define RECEIVE_BUFFER ((size_t)256 * 1024)

typedef struct {
  char *p;
  size_t len, cap;
} Buf;

typedef struct {
  pc_GrpcPair *items;
  size_t count, cap;
} Pairs;

struct pc_GrpcChannel {
  pc_Alloc *alloc;
  void *ud;
  CURLM *multi;
  char *base; /* target without a trailing '/' */
  size_t base_len, base_size;
  char *ca_file;
  char *user_agent;
  size_t max_receive;
  size_t max_unread;   /* bytes a call may hold unread (pc_GrpcCall_Next) */
  pc_GrpcCall *driver; /* the call whose pc_GrpcCall_Next runs libcurl */
  int tls;
  size_t live_calls;
  int closing;     /* freed by its owner while calls were alive */
  int running;     /* transfers in 'multi' */
  CURL *spare;     /* an easy handle a finished call left for the next one */
  int sock;        /* the socket libcurl opened last, -1 when closed */
  unsigned closes; /* how many times libcurl closed that socket */
};

struct pc_GrpcCall {
  pc_GrpcChannel *ch;
  pc_Arena *arena; /* metadata, status message and details */
  CURL *easy;
  struct curl_slist *headers_out;
  char *url;
  size_t url_size;
  int in_multi;   /* added to ch->multi, transfer running */
  int reuse_only; /* asked for plain HTTP/2: must not open a connection */
  int reopen;     /* ...and libcurl tried to: restart with prior knowledge */
  int restarts;   /* transfers run again (restart_transfer) */
  int grpc_body;  /* the response is HTTP 200 application/grpc */
  int done;       /* transfer over (finished, failed or cancelled) */
  int ended;      /* 'status' is final */
  int failed;     /* 'status' was set early by a local failure */
  CURLcode result;
  double deadline; /* monotonic seconds; < 0: none */
  unsigned closes; /* ch->closes when the transfer started */
  Buf req;         /* the framed request */
  Buf rbuf;        /* response body: consumed below 'rpos', whole messages below 'scan' */
  size_t rpos, scan;
  Buf dbuf;   /* the last decompressed message */
  int hstate; /* 0 before a status line, 1 in headers, 2 in trailers */
  long http_status;
  Pairs pairs[2]; /* headers, trailers */
  pc_GrpcStatus status;
  char errbuf[CURL_ERROR_SIZE];
};

/* -- memory ------------------------------------------------------------ */

static void *mem(pc_GrpcChannel *ch, void *p, size_t osize, size_t nsize) {
  return ch->alloc(ch->ud, p, osize, nsize);
}

static int buf_reserve(pc_GrpcChannel *ch, Buf *b, size_t extra) {
  if (b->cap - b->len >= extra) return 1;
  if (extra > SIZE_MAX / 2 - b->len) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < extra) cap *= 2;
  char *p = mem(ch, b->p, b->cap, cap);
  if (p == NULL) return 0;
  b->p = p;
  b->cap = cap;
  return 1;
}

static void buf_free(pc_GrpcChannel *ch, Buf *b) {
  if (b->p) mem(ch, b->p, b->cap, 0);
  b->p = NULL;
  b->len = b->cap = 0;
}

static char *dup_cstr(pc_GrpcChannel *ch, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = mem(ch, NULL, 0, n);
  if (p) memcpy(p, s, n);
  return p;
}

static void free_cstr(pc_GrpcChannel *ch, char *s) {
  if (s) mem(ch, s, strlen(s) + 1, 0);
}

/* zlib allocates through the channel's allocator; the size sits in front of
 * each block because pc_Alloc needs it to free. */
#define ZHEAD 16

static voidpf z_alloc(voidpf opaque, uInt items, uInt size) {
  pc_GrpcChannel *ch = opaque;
  size_t n = (size_t)items * size + ZHEAD;
  unsigned char *p = mem(ch, NULL, 0, n);
  if (p == NULL) return Z_NULL;
  memcpy(p, &n, sizeof n);
  return p + ZHEAD;
}

static void z_free(voidpf opaque, voidpf ptr) {
  size_t n;
  unsigned char *p = (unsigned char *)ptr - ZHEAD;
  memcpy(&n, p, sizeof n);
  mem(opaque, p, n, 0);
}

/* -- small codecs -------------------------------------------------------- */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int key_is(const pc_GrpcPair *p, const char *k) {
  size_t n = strlen(k);
  return p->key_len == n && memcmp(p->key, k, n) == 0;
}

/* -- status -------------------------------------------------------------- */

static void set_message(pc_GrpcCall *c, const char *msg, size_t len) {
  char *m = pc_Arena_StrDup(c->arena, msg, len);
  c->status.message = m ? m : "out of memory";
  c->status.message_len = m ? len : strlen("out of memory");
}

/* A failure found on this side (local) or a cancellation: the status is
 * final whatever the transfer reports later. */
static void fail(pc_GrpcCall *c, pc_Code code, int local, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static void fail(pc_GrpcCall *c, pc_Code code, int local, const char *fmt, ...) {
  if (c->failed) return;
  char text[PC_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof text) n = (int)sizeof text - 1;
  c->failed = 1;
  c->status.code = code;
  c->status.local = local;
  set_message(c, text, (size_t)n);
}

static const pc_GrpcPair *find_pair(const pc_GrpcCall *c, int block, const char *key) {
  const Pairs *ps = &c->pairs[block];
  for (size_t i = 0; i < ps->count; i++) {
    if (key_is(&ps->items[i], key)) return &ps->items[i];
  }
  return NULL;
}

/* RST_STREAM codes reach us only as text in the error buffer
 * ("... was not closed cleanly: CANCEL (err 8)"). */
static pc_Code code_from_rst(const char *errbuf) {
  const char *p = strstr(errbuf, "(err ");
  if (p == NULL) return kPc_Code_Unavailable; /* connection lost, GOAWAY */
  switch (strtol(p + 5, NULL, 10)) {
  case 7: return kPc_Code_Unavailable;        /* REFUSED_STREAM */
  case 8: return kPc_Code_Cancelled;          /* CANCEL */
  case 11: return kPc_Code_ResourceExhausted; /* ENHANCE_YOUR_CALM */
  case 12: return kPc_Code_PermissionDenied;  /* INADEQUATE_SECURITY */
  default: return kPc_Code_Internal;
  }
}

static pc_Code code_from_curl(CURLcode r, const char *errbuf) {
  switch (r) {
  case CURLE_OPERATION_TIMEDOUT: return kPc_Code_DeadlineExceeded;
  case CURLE_HTTP2_STREAM: return code_from_rst(errbuf);
  case CURLE_OUT_OF_MEMORY: return kPc_Code_ResourceExhausted;
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_URL_MALFORMAT:
  case CURLE_BAD_FUNCTION_ARGUMENT: return kPc_Code_Internal;
  default:
    /* Connection refused or lost, name resolution, TLS handshake or
     * verification, a peer that does not speak HTTP/2, GOAWAY. */
    return kPc_Code_Unavailable;
  }
}

/* libcurl 7.88 fails a transfer with CURLE_HTTP2_STREAM and no message
 * ("stream N closed" in its verbose log) when the server answered and
 * closed the stream before libcurl sent the request body: a gRPC server
 * does that when it rejects a call before reading the request (unknown
 * method, Trailers-Only), and libcurl drops the response headers. No
 * handler saw the request, so running the call again is safe; on a new
 * connection (prior knowledge) the race goes the other way. */
static int lost_early_response(const pc_GrpcCall *c, CURLcode r) {
  return r == CURLE_HTTP2_STREAM && c->errbuf[0] == '\0' && c->hstate == 0 && !c->failed;
}

#define MAX_RESTARTS 3

/* Decides the status once the transfer is over (unless a local failure
 * already did): grpc-status from the trailers, else from a Trailers-Only
 * header block, else the transfer's error, else the HTTP status. */
static void decide_status(pc_GrpcCall *c) {
  pc_GrpcStatus *st = &c->status;
  int block = 1;
  const pc_GrpcPair *gs = find_pair(c, 1, "grpc-status");
  if (gs == NULL) {
    block = 0;
    gs = find_pair(c, 0, "grpc-status");
  }
  if (gs != NULL) {
    int code = 0, ok = gs->value_len > 0 && gs->value_len <= 2;
    for (size_t i = 0; ok && i < gs->value_len; i++) {
      if (gs->value[i] < '0' || gs->value[i] > '9')
        ok = 0;
      else
        code = code * 10 + (gs->value[i] - '0');
    }
    if (!ok || code >= PC_CODE_COUNT) {
      st->code = kPc_Code_Unknown;
      char text[96];
      int n = snprintf(text, sizeof text, "invalid grpc-status '%.*s'",
                       (int)(gs->value_len > 16 ? 16 : gs->value_len), gs->value);
      set_message(c, text, (size_t)n);
    } else {
      st->code = (pc_Code)code;
      const pc_GrpcPair *gm = find_pair(c, block, "grpc-message");
      if (gm != NULL) {
        char *m = pc_Arena_StrDup(c->arena, gm->value, gm->value_len);
        if (m != NULL) {
          size_t n = pc_Grpc_PercentDecode(m, gm->value_len);
          m[n] = '\0';
          st->message = m;
          st->message_len = n;
        }
      }
    }
    const pc_GrpcPair *gd = find_pair(c, block, "grpc-status-details-bin");
    if (gd != NULL) {
      st->details = gd->value;
      st->details_len = gd->value_len;
    }
    const pc_GrpcPair *pb = find_pair(c, block, "grpc-retry-pushback-ms");
    if (pb != NULL) {
      long long ms = 0;
      int valid = pb->value_len > 0 && pb->value_len <= 12;
      for (size_t i = 0; valid && i < pb->value_len; i++) {
        if (pb->value[i] < '0' || pb->value[i] > '9')
          valid = 0;
        else
          ms = ms * 10 + (pb->value[i] - '0');
      }
      st->has_pushback = 1;
      st->no_retry = !valid;
      st->retry_delay = valid ? (double)ms / 1000.0 : 0;
    }
    return;
  }
  if (lost_early_response(c, c->result)) {
    static const char kLost[] = "the server ended the call before reading the request, and "
                                "libcurl 7.88 lost its status";
    st->code = kPc_Code_Unknown;
    set_message(c, kLost, sizeof kLost - 1);
    return;
  }
  if (c->result != CURLE_OK) {
    const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(c->result);
    char text[CURL_ERROR_SIZE + 64];
    int n = snprintf(text, sizeof text, "%s (curl error %d)", why, (int)c->result);
    st->code = code_from_curl(c->result, c->errbuf);
    set_message(c, text, (size_t)n);
    return;
  }
  char text[160];
  int n = snprintf(text, sizeof text, "no grpc-status in the response (HTTP status %ld)%s",
                   c->http_status,
                   c->grpc_body && c->ch->closes != c->closes
                       ? "; the connection closed with it (GOAWAY?), and libcurl 7.88 "
                         "drops trailers then"
                       : "");
  st->code = pc_Code_FromHttpStatus((int)c->http_status);
  set_message(c, text, (size_t)n);
}

static void finish_status(pc_GrpcCall *c) {
  c->ended = 1;
  if (c->failed) return;
  decide_status(c);
  if (c->status.code == kPc_Code_Ok && c->rpos < c->rbuf.len) {
    c->status.code = kPc_Code_Internal;
    char text[96];
    int n = snprintf(text, sizeof text, "response ended inside a message (%zu bytes left over)",
                     c->rbuf.len - c->rpos);
    set_message(c, text, (size_t)n);
  }
}

/* -- libcurl callbacks --------------------------------------------------- */

static int add_pair(pc_GrpcCall *c, int block, const char *k, size_t kn, const char *v, size_t vn) {
  Pairs *ps = &c->pairs[block];
  if (ps->count == ps->cap) {
    size_t cap = ps->cap ? ps->cap * 2 : 8;
    pc_GrpcPair *items = pc_Arena_Malloc(c->arena, cap * sizeof *items);
    if (items == NULL) return 0;
    if (ps->count) memcpy(items, ps->items, ps->count * sizeof *items);
    ps->items = items;
    ps->cap = cap;
  }
  char *key = pc_Arena_StrDup(c->arena, k, kn);
  if (key == NULL) return 0;
  for (size_t i = 0; i < kn; i++) {
    if (key[i] >= 'A' && key[i] <= 'Z') key[i] = (char)(key[i] - 'A' + 'a');
  }
  char *value = NULL;
  if (pc_Grpc_IsBinKey(key, kn)) {
    unsigned char *raw = pc_Arena_Malloc(c->arena, vn / 4 * 3 + 4);
    if (raw == NULL) return 0;
    size_t n = pc_Grpc_Base64Decode(v, vn, raw);
    if (n != (size_t)-1) {
      raw[n] = '\0';
      value = (char *)raw;
      vn = n;
    }
  }
  if (value == NULL) value = pc_Arena_StrDup(c->arena, v, vn);
  if (value == NULL) return 0;
  ps->items[ps->count].key = key;
  ps->items[ps->count].key_len = kn;
  ps->items[ps->count].value = value;
  ps->items[ps->count].value_len = vn;
  ps->count++;
  return 1;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *ud) {
  pc_GrpcCall *c = ud;
  size_t total = size * nitems, n = total;
  while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == '\n')) n--;
  if (n == 0) {
    /* End of a header block: after a 1xx comes another status line; after
     * the final one, anything more is trailers. */
    if (c->hstate == 1) {
      c->hstate = (c->http_status >= 100 && c->http_status < 200) ? 0 : 2;
      const pc_GrpcPair *ct = find_pair(c, 0, "content-type");
      c->grpc_body = c->hstate == 2 && c->http_status == 200 && ct != NULL && ct->value_len >= 16 &&
                     memcmp(ct->value, "application/grpc", 16) == 0;
    }
    return total;
  }
  if (c->hstate == 0) {
    if (n > 5 && memcmp(line, "HTTP/", 5) == 0) {
      const char *sp = memchr(line, ' ', n);
      c->http_status = sp ? strtol(sp + 1, NULL, 10) : 0;
      c->hstate = 1;
    }
    return total;
  }
  const char *colon = memchr(line, ':', n);
  if (colon == NULL) return total;
  size_t kn = (size_t)(colon - line);
  const char *v = colon + 1;
  size_t vn = n - kn - 1;
  while (vn > 0 && (*v == ' ' || *v == '\t')) v++, vn--;
  while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t')) vn--;
  if (!add_pair(c, c->hstate == 2, line, kn, v, vn)) {
    fail(c, kPc_Code_ResourceExhausted, 1, "out of memory reading response metadata");
    return 0;
  }
  return total;
}

static size_t on_body(char *data, size_t size, size_t nitems, void *ud) {
  pc_GrpcCall *c = ud;
  size_t n = size * nitems;
  if (c->failed) return 0;
  if (!c->grpc_body) return n; /* an HTTP error page: the status decides */
  size_t unread = c->rbuf.len - c->rpos;
  if (c != c->ch->driver && (unread > c->ch->max_unread || n > c->ch->max_unread - unread)) {
    /* Read while another call drives the connection, past the limit. A
     * hard bound, not flow control: libcurl 7.88 loses other streams'
     * trailers while one is paused (CURL_WRITEFUNC_PAUSE), so a stream the
     * consumer does not keep up with is failed and cancelled instead. */
    fail(c, kPc_Code_ResourceExhausted, 1,
         "server stream: %zu bytes received but not read (limit %zu bytes): the consumer fell "
         "too far behind",
         unread + n, c->ch->max_unread);
    buf_free(c->ch, &c->rbuf);
    c->rpos = c->scan = 0;
    return 0;
  }
  if (!buf_reserve(c->ch, &c->rbuf, n)) {
    fail(c, kPc_Code_ResourceExhausted, 1, "out of memory reading the response");
    return 0;
  }
  memcpy(c->rbuf.p + c->rbuf.len, data, n);
  c->rbuf.len += n;
  /* Check each length prefix as soon as it is here, before the body. */
  while (c->rbuf.len - c->scan >= 5) {
    const unsigned char *h = (const unsigned char *)c->rbuf.p + c->scan;
    uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
    if (len > c->ch->max_receive) {
      fail(c, kPc_Code_ResourceExhausted, 1,
           "response message of %lu bytes exceeds the receive limit of %zu bytes",
           (unsigned long)len, c->ch->max_receive);
      return 0;
    }
    if (c->rbuf.len - c->scan - 5 < len) break;
    c->scan += 5 + (size_t)len;
  }
  return n;
}

/* -- connection reuse ---------------------------------------------------- */

/* libcurl 7.88.1 fails every request after the first on a reused h2c
 * connection when CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE is set (curl issue
 * 10634, fixed in 7.89): it stacks a second HTTP/2 layer on the reused
 * connection. So a call asks for prior knowledge only when it will open
 * a connection, and plain HTTP/2 when it will reuse the live one. Plain
 * HTTP/2 must never open a connection (that would be HTTP/1.1 with
 * Upgrade: h2c, which gRPC servers refuse): the open-socket callback
 * refuses, and the call restarts with prior knowledge (nothing was sent).
 * The channel tracks its socket through the open/close callbacks. */

static curl_socket_t on_open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a) {
  pc_GrpcCall *c = ud;
  (void)purpose;
  if (c->reuse_only) {
    c->reopen = 1;
    return CURL_SOCKET_BAD;
  }
  curl_socket_t fd = socket(a->family, a->socktype, a->protocol);
  if (fd != CURL_SOCKET_BAD) c->ch->sock = fd;
  return fd;
}

static int on_close_socket(void *ud, curl_socket_t fd) {
  pc_GrpcChannel *ch = ud;
  if (fd == ch->sock) {
    ch->sock = -1;
    ch->closes++;
  }
  return close(fd);
}

/* Whether the channel's connection can carry the next call. An idle
 * HTTP/2 connection has nothing to read; anything readable while idle
 * (end of file, an error, GOAWAY, a PING) and the connection is dropped so
 * the next call opens a fresh one. */
static int connection_usable(pc_GrpcChannel *ch) {
  if (ch->sock < 0) return 0;
  struct pollfd p;
  p.fd = ch->sock;
  p.events = POLLIN;
  p.revents = 0;
  int r = poll(&p, 1, 0);
  if (r == 0) return 1;
  if (r < 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return 0;
  if (ch->running == 0) return 0;
  char b;
  return recv(ch->sock, &b, 1, MSG_PEEK) > 0;
}

/* Closes an idle connection that cannot be reused: a new multi handle has
 * an empty connection cache. Returns 0 on allocation failure. */
static int drop_connection(pc_GrpcChannel *ch) {
  CURLM *m = curl_multi_init();
  if (m == NULL) return 0;
  curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
  curl_multi_cleanup(ch->multi);
  ch->multi = m;
  ch->sock = -1;
  return 1;
}

/* Sets the call's HTTP version: prior knowledge for a new h2c connection
 * (always when 'fresh'), plain HTTP/2 to reuse the live one, TLS with ALPN
 * for https. Returns 0 when libcurl refuses. */
static int set_version(pc_GrpcCall *c, int fresh) {
  pc_GrpcChannel *ch = c->ch;
  long version = CURL_HTTP_VERSION_2TLS;
  c->reuse_only = 0;
  if (!ch->tls) {
    int reuse = !fresh && connection_usable(ch);
    if (!reuse && ch->running == 0 && ch->sock >= 0 && !drop_connection(ch)) return 0;
    version = reuse ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    c->reuse_only = reuse;
  }
  return curl_easy_setopt(c->easy, CURLOPT_HTTP_VERSION, version) == CURLE_OK;
}

/* -- channel ------------------------------------------------------------- */

pc_GrpcChannel *pc_GrpcChannel_New(const pc_GrpcChannelOptions *opts, pc_Alloc *alloc, void *ud,
                                   pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  const char *t = opts->target ? opts->target : "";
  int tls;
  if (strncmp(t, "http://", 7) == 0 && t[7] != '\0' && t[7] != '/')
    tls = 0;
  else if (strncmp(t, "https://", 8) == 0 && t[8] != '\0' && t[8] != '/')
    tls = 1;
  else {
    pc_Error_Set(err, "target '%.200s': expected http://host:port or https://host:port", t);
    return NULL;
  }
  for (const char *p = t; *p; p++) {
    if ((unsigned char)*p <= ' ' || *p == 0x7f) {
      pc_Error_Set(err, "target '%.200s': contains a space or control character", t);
      return NULL;
    }
  }
  pc_GrpcChannel *ch = alloc(ud, NULL, 0, sizeof *ch);
  if (ch == NULL) goto oom;
  memset(ch, 0, sizeof *ch);
  ch->alloc = alloc;
  ch->ud = ud;
  ch->tls = tls;
  ch->max_receive = opts->max_receive ? opts->max_receive : PC_GRPC_DEFAULT_MAX_RECEIVE;
  ch->max_unread = opts->max_unread;
  if (ch->max_unread == 0) {
    ch->max_unread = ch->max_receive > SIZE_MAX / 4 ? SIZE_MAX : ch->max_receive * 4;
    if (ch->max_unread < PC_GRPC_MIN_UNREAD) ch->max_unread = PC_GRPC_MIN_UNREAD;
  }
  if (ch->max_receive > SIZE_MAX / 2 || ch->max_unread < ch->max_receive + 5 + RECEIVE_BUFFER)
    ch->max_unread =
        ch->max_receive > SIZE_MAX / 2 ? SIZE_MAX : ch->max_receive + 5 + RECEIVE_BUFFER;
  ch->sock = -1;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    mem(ch, ch, sizeof *ch, 0);
    pc_Error_Set(err, "libcurl failed to initialise");
    return NULL;
  }
  ch->base = dup_cstr(ch, t);
  if (ch->base) ch->base_size = strlen(t) + 1;
  ch->user_agent = dup_cstr(ch, opts->user_agent ? opts->user_agent : "protocall");
  if (opts->ca_file) ch->ca_file = dup_cstr(ch, opts->ca_file);
  ch->multi = curl_multi_init();
  if (ch->base == NULL || ch->user_agent == NULL || (opts->ca_file && ch->ca_file == NULL) ||
      ch->multi == NULL) {
    pc_GrpcChannel_Free(ch);
    goto oom;
  }
  ch->base_len = strlen(ch->base);
  while (ch->base_len > 0 && ch->base[ch->base_len - 1] == '/') ch->base[--ch->base_len] = '\0';
  curl_multi_setopt(ch->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
  return ch;
oom:
  pc_Error_Set(err, "out of memory");
  return NULL;
}

void pc_GrpcChannel_Free(pc_GrpcChannel *ch) {
  if (ch == NULL) return;
  if (ch->live_calls > 0) {
    ch->closing = 1; /* the last call frees it */
    return;
  }
  if (ch->spare) curl_easy_cleanup(ch->spare);
  if (ch->multi) curl_multi_cleanup(ch->multi);
  if (ch->base) mem(ch, ch->base, ch->base_size, 0);
  free_cstr(ch, ch->user_agent);
  free_cstr(ch, ch->ca_file);
  pc_Alloc *alloc = ch->alloc;
  void *ud = ch->ud;
  alloc(ud, ch, sizeof *ch, 0);
  curl_global_cleanup();
}

/* -- call ---------------------------------------------------------------- */

static int frame_request(pc_GrpcCall *c, const void *request, size_t len, int gzip) {
  pc_GrpcChannel *ch = c->ch;
  if (len > UINT32_MAX) return 0;
  if (!gzip) {
    if (!buf_reserve(ch, &c->req, 5 + len)) return 0;
    c->req.p[0] = 0;
    memcpy(c->req.p + 5, request, len);
    c->req.len = 5 + len;
  } else {
    z_stream z;
    memset(&z, 0, sizeof z);
    z.zalloc = z_alloc;
    z.zfree = z_free;
    z.opaque = ch;
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return 0;
    size_t bound = deflateBound(&z, (uLong)len);
    if (!buf_reserve(ch, &c->req, 5 + bound)) {
      deflateEnd(&z);
      return 0;
    }
    z.next_in = (const Bytef *)request;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)c->req.p + 5;
    z.avail_out = (uInt)bound;
    int r = deflate(&z, Z_FINISH);
    size_t out = z.total_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END || out > UINT32_MAX) return 0;
    c->req.p[0] = 1;
    c->req.len = 5 + out;
    len = out;
  }
  unsigned char *h = (unsigned char *)c->req.p;
  h[1] = (unsigned char)(len >> 24);
  h[2] = (unsigned char)(len >> 16);
  h[3] = (unsigned char)(len >> 8);
  h[4] = (unsigned char)len;
  return 1;
}

static int add_header(pc_GrpcCall *c, const char *line) {
  struct curl_slist *l = curl_slist_append(c->headers_out, line);
  if (l == NULL) return 0;
  c->headers_out = l;
  return 1;
}

/* "key: value" for one metadata entry ("key;" for an empty value, which
 * libcurl would otherwise take as "remove this header"). */
static int add_metadata(pc_GrpcCall *c, const pc_GrpcPair *p) {
  int bin = pc_Grpc_IsBinKey(p->key, p->key_len);
  size_t vlen = bin ? p->value_len / 3 * 4 + 4 : p->value_len;
  size_t n = p->key_len + 2 + vlen + 1;
  char *line = mem(c->ch, NULL, 0, n);
  if (line == NULL) return 0;
  memcpy(line, p->key, p->key_len);
  size_t o = p->key_len;
  size_t v = bin ? pc_Grpc_Base64Encode((const unsigned char *)p->value, p->value_len, line + o + 2)
                 : p->value_len;
  if (!bin) memcpy(line + o + 2, p->value, v);
  if (v == 0) {
    line[o++] = ';';
  } else {
    line[o] = ':';
    line[o + 1] = ' ';
    o += 2 + v;
  }
  line[o] = '\0';
  int ok = add_header(c, line);
  mem(c->ch, line, n, 0);
  return ok;
}

static int build_headers(pc_GrpcCall *c, const pc_GrpcCallSettings *s) {
  if (!add_header(c, "content-type: application/grpc") || !add_header(c, "te: trailers") ||
      !add_header(c, "grpc-accept-encoding: gzip") || !add_header(c, "Expect:") ||
      !add_header(c, "Accept:"))
    return 0;
  if (s->gzip && !add_header(c, "grpc-encoding: gzip")) return 0;
  if (s->timeout >= 0) {
    char line[32] = "grpc-timeout: ";
    pc_Grpc_FormatTimeout(s->timeout, line + 14);
    if (!add_header(c, line)) return 0;
  }
  for (size_t i = 0; i < s->metadata_count; i++) {
    if (!add_metadata(c, &s->metadata[i])) return 0;
  }
  return 1;
}

/* A new easy handle for the call's transfer (a restart gets a new one, as
 * libcurl 7.88 keeps stream state in a handle); 'fresh' as set_version. */
static int new_easy(pc_GrpcCall *c, int fresh) {
  pc_GrpcChannel *ch = c->ch;
  if (c->easy) curl_easy_cleanup(c->easy);
  CURL *e = ch->spare;
  int spare = e != NULL;
  ch->spare = NULL;
  if (e == NULL) e = curl_easy_init();
  c->easy = e;
  if (e == NULL) return 0;
  int ok = set_version(c, fresh);
  ok &= curl_easy_setopt(e, CURLOPT_URL, c->url) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, (void *)c) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, (void *)ch) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L) == CURLE_OK;
  /* No proxy from the environment: h2c with prior knowledge cannot go
   * through an HTTP proxy, and gRPC proxying (CONNECT) is not done yet. */
  ok &= curl_easy_setopt(e, CURLOPT_PROXY, "") == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK;
  if (!spare) ok &= curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)RECEIVE_BUFFER) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_POST, 1L) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->req.p) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->req.len) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers_out) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_USERAGENT, ch->user_agent) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_HEADERDATA, c) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_WRITEDATA, c) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)c) == CURLE_OK;
  ok &= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf) == CURLE_OK;
  if (ch->ca_file) ok &= curl_easy_setopt(e, CURLOPT_CAINFO, ch->ca_file) == CURLE_OK;
  return ok;
}

pc_GrpcCall *pc_GrpcCall_Start(pc_GrpcChannel *ch, const char *path, const void *request,
                               size_t len, const pc_GrpcCallSettings *s, pc_Error *err) {
  if (path == NULL || path[0] != '/') {
    pc_Error_Set(err, "method path '%.200s': expected /package.Service/Method", path ? path : "");
    return NULL;
  }
  for (const char *p = path; *p; p++) {
    if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == '?' || *p == '#' || *p == '%') {
      pc_Error_Set(err, "method path '%.200s': unexpected character", path);
      return NULL;
    }
  }
  for (size_t i = 0; i < s->metadata_count; i++) {
    if (!pc_GrpcPair_Check(&s->metadata[i], err)) return NULL;
  }
  pc_GrpcCall *c = mem(ch, NULL, 0, sizeof *c);
  if (c == NULL) goto oom;
  memset(c, 0, sizeof *c);
  c->ch = ch;
  ch->live_calls++;
  c->deadline = s->timeout >= 0 ? now_seconds() + s->timeout : -1;
  c->closes = ch->closes;
  c->arena = pc_Arena_New(ch->alloc, ch->ud);
  if (c->arena == NULL) goto fail_oom;
  size_t plen = strlen(path);
  c->url = mem(ch, NULL, 0, ch->base_len + plen + 1);
  if (c->url == NULL) goto fail_oom;
  c->url_size = ch->base_len + plen + 1;
  memcpy(c->url, ch->base, ch->base_len);
  memcpy(c->url + ch->base_len, path, plen + 1);
  c->status.message = "";
  c->status.details = "";
  if (s->timeout >= 0 && s->timeout <= 0) {
    /* Nothing can be sent in no time. */
    fail(c, kPc_Code_DeadlineExceeded, 0, "deadline exceeded before the call started");
    c->done = 1;
    return c;
  }
  if (!frame_request(c, request, len, s->gzip)) goto fail_oom;
  if (!ch->tls && ch->running > 0 && ch->sock < 0) {
    /* Another call is about to open the connection: let it open its
     * socket, so this one reuses it in plain HTTP/2 (set_version) rather
     * than asking for prior knowledge on it too, which libcurl 7.88 turns
     * into "Error in the HTTP2 framing layer" (a stream started but not
     * read yet, then a unary call). */
    int running = 0;
    curl_multi_perform(ch->multi, &running);
  }
  if (!build_headers(c, s) || !new_easy(c, 0)) goto fail_oom;
  if (curl_multi_add_handle(ch->multi, c->easy) != CURLM_OK) goto fail_oom;
  c->in_multi = 1;
  ch->running++;
  return c;
fail_oom:
  pc_GrpcCall_Free(c);
oom:
  pc_Error_Set(err, "cannot start a call: out of memory (or libcurl refused an option)");
  return NULL;
}

/* Stops the transfer (RST_STREAM if it is still open). */
static void stop_transfer(pc_GrpcCall *c) {
  if (c->in_multi) {
    curl_multi_remove_handle(c->ch->multi, c->easy);
    c->in_multi = 0;
    c->ch->running--;
  }
  c->done = 1;
}

/* Runs the transfer again from the start; 0 when libcurl refuses. Used
 * when nothing of the call reached a server handler: libcurl refused to
 * open a connection in plain HTTP/2 mode ('reopen', then on a fresh
 * connection), or libcurl 7.88 lost an early response (below). 'fresh'
 * as set_version; -1: a fresh connection unless other calls use this one
 * (an early response is not lost on a new connection). */
static int restart_transfer(pc_GrpcCall *c, int fresh) {
  pc_GrpcChannel *ch = c->ch;
  curl_multi_remove_handle(ch->multi, c->easy);
  ch->running--;
  c->in_multi = 0;
  c->restarts++;
  c->reopen = 0;
  c->errbuf[0] = '\0';
  c->hstate = 0;
  c->http_status = 0;
  c->grpc_body = 0;
  c->pairs[0].count = c->pairs[1].count = 0;
  c->rbuf.len = c->rpos = c->scan = 0;
  if (fresh < 0) fresh = ch->running == 0;
  if (!new_easy(c, fresh) || curl_multi_add_handle(ch->multi, c->easy) != CURLM_OK) return 0;
  c->in_multi = 1;
  ch->running++;
  return 1;
}

/* Marks every finished transfer of the channel as done (any of its calls
 * may finish while another one is being driven). */
static void collect_done(pc_GrpcChannel *ch) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(ch->multi, &left)) != NULL) {
    if (m->msg != CURLMSG_DONE) continue;
    char *priv = NULL;
    CURL *e = m->easy_handle;
    CURLcode r = m->data.result;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, &priv);
    pc_GrpcCall *c = (pc_GrpcCall *)(void *)priv;
    if (c->restarts < MAX_RESTARTS) {
      if (c->reopen && restart_transfer(c, 1)) continue;
      if (lost_early_response(c, r) && restart_transfer(c, -1)) continue;
    }
    c->result = r;
    stop_transfer(c);
  }
}

/* Extracts the message at 'rpos' (whole, below 'scan'). */
static int take_message(pc_GrpcCall *c, const char **data, size_t *len) {
  const unsigned char *h = (const unsigned char *)c->rbuf.p + c->rpos;
  size_t n = (size_t)((uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4]);
  const char *body = c->rbuf.p + c->rpos + 5;
  c->rpos += 5 + n;
  if (h[0] == 0) {
    *data = body;
    *len = n;
    return 1;
  }
  if (h[0] != 1) {
    fail(c, kPc_Code_Internal, 1, "response message has an invalid flags byte 0x%02x", h[0]);
    return 0;
  }
  const pc_GrpcPair *enc = find_pair(c, 0, "grpc-encoding");
  if (enc == NULL || enc->value_len == 0 ||
      (enc->value_len == 8 && memcmp(enc->value, "identity", 8) == 0)) {
    fail(c, kPc_Code_Internal, 1, "response message is compressed but no grpc-encoding was given");
    return 0;
  }
  if (!(enc->value_len == 4 && memcmp(enc->value, "gzip", 4) == 0)) {
    fail(c, kPc_Code_Internal, 1, "response grpc-encoding '%.*s' was not offered (gzip only)",
         (int)(enc->value_len > 32 ? 32 : enc->value_len), enc->value);
    return 0;
  }
  size_t max = c->ch->max_receive;
  z_stream z;
  memset(&z, 0, sizeof z);
  z.zalloc = z_alloc;
  z.zfree = z_free;
  z.opaque = c->ch;
  if (inflateInit2(&z, 15 + 16) != Z_OK) {
    fail(c, kPc_Code_ResourceExhausted, 1, "out of memory decompressing a response");
    return 0;
  }
  z.next_in = (const Bytef *)body;
  z.avail_in = (uInt)n;
  c->dbuf.len = 0;
  int r = Z_OK;
  while (r == Z_OK) {
    if (c->dbuf.len > max) break;
    if (!buf_reserve(c->ch, &c->dbuf, n * 2 + 1024)) {
      r = Z_MEM_ERROR;
      break;
    }
    z.next_out = (Bytef *)c->dbuf.p + c->dbuf.len;
    z.avail_out = (uInt)(c->dbuf.cap - c->dbuf.len);
    r = inflate(&z, Z_NO_FLUSH);
    c->dbuf.len = c->dbuf.cap - z.avail_out;
    if (r == Z_BUF_ERROR && z.avail_out > 0) break;
    if (r == Z_BUF_ERROR) r = Z_OK;
  }
  int trailing = z.avail_in > 0;
  inflateEnd(&z);
  if (c->dbuf.len > max) {
    fail(c, kPc_Code_ResourceExhausted, 1,
         "decompressed response message exceeds the receive limit of %zu bytes", max);
    return 0;
  }
  if (r == Z_MEM_ERROR) {
    fail(c, kPc_Code_ResourceExhausted, 1, "out of memory decompressing a response");
    return 0;
  }
  if (r != Z_STREAM_END || trailing) {
    fail(c, kPc_Code_Internal, 1, "response message is not valid gzip");
    return 0;
  }
  *data = c->dbuf.p;
  *len = c->dbuf.len;
  return 1;
}

int pc_GrpcCall_Next(pc_GrpcCall *call, const char **data, size_t *len) {
  pc_GrpcCall *c = call;
  pc_GrpcChannel *ch = c->ch;
  if (c->rpos > 0) {
    /* Drop consumed bytes (the caller is done with the last message). */
    memmove(c->rbuf.p, c->rbuf.p + c->rpos, c->rbuf.len - c->rpos);
    c->rbuf.len -= c->rpos;
    c->scan -= c->rpos;
    c->rpos = 0;
  }
  for (;;) {
    if (c->ended) return 0;
    if (c->failed) {
      stop_transfer(c);
      finish_status(c);
      return 0;
    }
    if (c->rpos < c->scan) {
      if (take_message(c, data, len)) return 1;
      continue;
    }
    if (c->done) {
      finish_status(c);
      return 0;
    }
    double wait_ms = 1000;
    if (c->deadline >= 0) {
      double left = c->deadline - now_seconds();
      if (left <= 0) {
        fail(c, kPc_Code_DeadlineExceeded, 0, "deadline exceeded");
        continue;
      }
      if (left * 1000 < wait_ms) wait_ms = left * 1000 + 1;
    }
    int running = 0;
    ch->driver = c;
    CURLMcode mr = curl_multi_perform(ch->multi, &running);
    ch->driver = NULL;
    collect_done(ch);
    if (mr != CURLM_OK) {
      fail(c, kPc_Code_Internal, 0, "libcurl: %s", curl_multi_strerror(mr));
      continue;
    }
    if (c->rpos < c->scan || c->done || c->failed) continue;
    int numfds = 0;
    curl_multi_poll(ch->multi, NULL, 0, (int)wait_ms, &numfds);
  }
}

size_t pc_GrpcCall_Buffered(const pc_GrpcCall *call) {
  return call->rbuf.cap;
}

const pc_GrpcStatus *pc_GrpcCall_Status(const pc_GrpcCall *call) {
  return call->ended ? &call->status : NULL;
}

size_t pc_GrpcCall_MetadataCount(const pc_GrpcCall *call, int trailers) {
  return call->pairs[trailers ? 1 : 0].count;
}

const pc_GrpcPair *pc_GrpcCall_Metadata(const pc_GrpcCall *call, int trailers, size_t i) {
  const Pairs *ps = &call->pairs[trailers ? 1 : 0];
  return i < ps->count ? &ps->items[i] : NULL;
}

void pc_GrpcCall_Free(pc_GrpcCall *call) {
  if (call == NULL) return;
  pc_GrpcCall *c = call;
  pc_GrpcChannel *ch = c->ch;
  stop_transfer(c);
  if (c->easy && ch->spare == NULL && !ch->closing) {
    /* Kept for the next call, which sets every option again but the
     * receive buffer's size (libcurl refuses to change it once allocated). */
    ch->spare = c->easy;
  } else if (c->easy) {
    curl_easy_cleanup(c->easy);
  }
  curl_slist_free_all(c->headers_out);
  if (c->url) mem(ch, c->url, c->url_size, 0);
  buf_free(ch, &c->req);
  buf_free(ch, &c->rbuf);
  buf_free(ch, &c->dbuf);
  pc_Arena_Free(c->arena);
  mem(ch, c, sizeof *c, 0);
  ch->live_calls--;
  if (ch->closing && ch->live_calls == 0) pc_GrpcChannel_Free(ch);
}
