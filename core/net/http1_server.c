/* The server engine on one HTTP/1.1 connection (see http1_server.h): each
 * request parsed by http1.h goes, in memory, as a stream of an nghttp2
 * client session to a pc_GrpcServerConn, whose response comes back as
 * HTTP/1.1. */
#include "net/http1_server.h"

#include <nghttp2/nghttp2.h>

#include <stdio.h>
#include <string.h>

#define DEFAULT_MAX_FIELDS   100
#define DEFAULT_HEAD_TIME    10.0
/* Request body bytes held for the HTTP/2 side before parsing waits, and
 * response bytes held for the client before the HTTP/2 side waits. */
#define BODY_HIGH            ((size_t)64 * 1024)
#define OUT_HIGH             ((size_t)256 * 1024)
#define CLIENT_STREAM_WINDOW ((int32_t)1 << 20)
/* A request answered before its end ("early": a 4xx while its body is
 * still coming, a handler that ended without reading it all) has at most
 * this much more of its body read and dropped, for at most this long,
 * before the connection closes (its answer says Connection: close where
 * its head has not gone yet); an endless chunked body holds the
 * connection no longer. Go's net/http reads at most 256 KiB of a body
 * left unread (maxPostHandlerReadBytes), nginx lingers a bounded time;
 * the listener's lingering close (listener.c) then lets the client read
 * the answer rather than a reset. */
#define LINGER_BODY          ((size_t)256 * 1024)
#define LINGER_TIME          2.0

static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

int pc_Http1_SniffPreface(const char *p, size_t n) {
  size_t want = sizeof kPreface - 1;
  size_t k = n < want ? n : want;
  if (memcmp(p, kPreface, k) != 0) return 1;
  return k == want ? 2 : 0;
}

struct pc_Http1ServerConn {
  pc_Alloc *alloc;
  void *ud;
  pc_Http1ServerOptions o;
  pc_GrpcServerConn *inner;
  nghttp2_session *cs; /* the client's side of 'inner' */
  nghttp2_mem mem;
  pc_Http1Parser p;
  pc_Http1Header *slots;
  pc_GrpcBuf in; /* input, unconsumed from 'in_pos' */
  size_t in_pos;
  pc_GrpcBuf out; /* output, unsent from 'out_pos' */
  size_t out_pos;
  double now;
  double head_since; /* > 0: bytes of a request head wait since then */
  double body_since; /* > 0: the request's head ended then (or, chunked, its last
                      * body bytes came), its body still coming */
  int body_chunked;  /* the request's body is chunked (a client stream as it goes) */
  /* The request being served. */
  int busy;        /* a request is in progress (head parsed, exchange not over) */
  int32_t stream;  /* its HTTP/2 stream */
  int stream_open; /* the stream is not closed yet */
  int req_done;    /* the parser reached the request's end */
  int deferred;    /* nghttp2 waits for request body bytes */
  pc_GrpcBuf body; /* request body bytes for the stream, from 'body_pos' */
  size_t body_pos;
  pc_WebProtocol proto;
  int minor, keep_alive;
  /* Its response. */
  int status;
  pc_GrpcBuf rh, rt; /* response header and trailer fields: name NUL value NUL ... */
  size_t nrh, nrt;
  pc_GrpcBuf held; /* a Connect unary (or other non-stream) response body, until its end */
  int hold, head_written, chunked, resp_ended;
  int resp_length;            /* the response headers gave a content-length: a whole body */
  uint64_t resp_length_value; /* ...its value (a HEAD response's, which has no body) */
  int head_req;               /* the request is a HEAD: the response head alone (RFC 9110 9.3.2) */
  /* The connection. */
  int closing;         /* close once the output is out; read nothing more */
  int lingering;       /* answered early: the rest of the body is dropped, then close */
  size_t linger_left;  /* ...bytes of it still read (LINGER_BODY at the answer) */
  double linger_until; /* ...and until when (LINGER_TIME after it) */
  int close_after;     /* the response head said close: closing once the exchange is over */
  int shutdown;        /* close after the exchange in progress */
  int dead;
  char why[PC_ERROR_MAX];
};

/* -- memory -------------------------------------------------------------- */

static void *m_malloc(size_t size, void *ud) {
  pc_Http1ServerConn *c = ud;
  return pc_Grpc_BlockRealloc(c->alloc, c->ud, NULL, size);
}
static void m_free(void *ptr, void *ud) {
  pc_Http1ServerConn *c = ud;
  if (ptr) pc_Grpc_BlockRealloc(c->alloc, c->ud, ptr, 0);
}
static void *m_calloc(size_t n, size_t size, void *ud) {
  if (size && n > (size_t)-1 / size) return NULL;
  void *p = m_malloc(n * size, ud);
  if (p) memset(p, 0, n * size);
  return p;
}
static void *m_realloc(void *ptr, size_t size, void *ud) {
  pc_Http1ServerConn *c = ud;
  return pc_Grpc_BlockRealloc(c->alloc, c->ud, ptr, size);
}

static int append(pc_Http1ServerConn *c, pc_GrpcBuf *b, const void *p, size_t n) {
  if (n == 0) return 1;
  if (!pc_GrpcBuf_Reserve(c->alloc, c->ud, b, n)) return 0;
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return 1;
}

static void fail(pc_Http1ServerConn *c, const char *why) {
  if (!c->dead) snprintf(c->why, sizeof c->why, "%s", why);
  c->dead = 1;
}

/* -- writing the response ------------------------------------------------ */

/* Writes head 'h' to the output; 0 when it is invalid or memory ran out. */
static int write_head(pc_Http1ServerConn *c, pc_Http1Out *h) {
  pc_Error err;
  pc_Error_Init(&err);
  size_t n = pc_Http1_WriteHead(NULL, 0, h, &err);
  if (n == 0 || !pc_GrpcBuf_Reserve(c->alloc, c->ud, &c->out, n)) return 0;
  pc_Http1_WriteHead(c->out.p + c->out.len, n, h, &err);
  c->out.len += n;
  return 1;
}

/* A response of our own: 'code', 'text' as text/plain, then close. */
static void write_simple(pc_Http1ServerConn *c, int code, const char *text) {
  pc_Http1Header f[1] = {{"content-type", 12, "text/plain; charset=utf-8", 25}};
  pc_Http1Out h = {NULL, NULL, code, f, 1, kPc_Http1Body_Length, strlen(text), 1};
  /* (a HEAD's answer is its head alone) */
  if (!write_head(c, &h) || (!c->head_req && !append(c, &c->out, text, strlen(text)))) {
    fail(c, "out of memory");
    return;
  }
  c->closing = 1;
}

/* The fields of 'b' ('n' of them, name NUL value NUL) as an array (NULL
 * when 'n' is 0 or memory ran out: '*ok' 0 then). */
static pc_Http1Header *fields_of(pc_Http1ServerConn *c, const pc_GrpcBuf *b, size_t n, int *ok) {
  *ok = 1;
  if (n == 0) return NULL;
  pc_Http1Header *f = c->alloc(c->ud, NULL, 0, n * sizeof *f);
  if (f == NULL) {
    *ok = 0;
    return NULL;
  }
  const char *p = b->p;
  for (size_t i = 0; i < n; i++) {
    f[i].name = p;
    f[i].name_len = strlen(p);
    p += f[i].name_len + 1;
    f[i].value = p;
    f[i].value_len = strlen(p);
    p += f[i].value_len + 1;
  }
  return f;
}

/* The response head from the HTTP/2 response headers: framed by 'body'
 * ('len' bytes for Length). */
static int response_head(pc_Http1ServerConn *c, pc_Http1Body body, uint64_t len) {
  int ok;
  pc_Http1Header *f = fields_of(c, &c->rh, c->nrh, &ok);
  if (!ok) return 0;
  int close = !c->keep_alive || c->shutdown || body == kPc_Http1Body_Close || c->lingering;
  pc_Http1Out h = {NULL, NULL, c->status, f, c->nrh, body, len, close};
  int r = write_head(c, &h);
  if (f) c->alloc(c->ud, f, c->nrh * sizeof *f, 0);
  /* not closing yet: a streamed body has its bytes still to come */
  if (r && close) c->close_after = 1;
  c->head_written = 1;
  return r;
}

/* The response headers are complete ('end': and the stream ended). */
static void on_response_head(pc_Http1ServerConn *c, int end) {
  if (c->status < 200) return;
  /* a body of known length (Connect unary, a plain HTTP answer whole) is
   * held and written with it; others go as they come */
  int stream = c->proto == kPc_WebProtocol_GrpcWeb || c->proto == kPc_WebProtocol_GrpcWebText ||
               c->proto == kPc_WebProtocol_ConnectStream || !c->resp_length;
  /* a HEAD's or a 204's (a driver's, pc_GrpcServerCall_Respond): no body
   * comes, the head goes at the end */
  c->hold = !stream || c->head_req || c->status == 204;
  if (end || c->hold) return; /* written at the end, with its length */
  c->chunked = c->minor >= 1;
  if (!response_head(c, c->chunked ? kPc_Http1Body_Chunked : kPc_Http1Body_Close, 0))
    fail(c, "cannot write a response head");
}

static void finish_exchange(pc_Http1ServerConn *c);

/* The response ended before the request did: what is left of its body
 * is dropped, LINGER_BODY or LINGER_TIME at most, then the connection
 * closes (it might be endless). */
static void answered_early(pc_Http1ServerConn *c) {
  c->lingering = 1;
  c->linger_left = LINGER_BODY;
  c->linger_until = c->now + LINGER_TIME;
  c->close_after = 1;
}

/* The response stream ended: its last bytes out. */
static void end_response(pc_Http1ServerConn *c) {
  if (c->resp_ended) return;
  c->resp_ended = 1;
  if (!c->req_done) answered_early(c);
  if (!c->head_written) {
    /* a 204 (a CORS preflight's answer) carries no body and no length; a
     * HEAD's response the length its headers gave (a GET's), if any, and
     * no body (RFC 9110 8.6, 9.3.2) */
    pc_Http1Body framing = c->status == 204 || (c->head_req && !c->resp_length)
                               ? kPc_Http1Body_None
                               : kPc_Http1Body_Length;
    if (c->head_req) {
      if (!response_head(c, framing, c->resp_length_value)) fail(c, "cannot write a response");
    } else if (!response_head(c, framing, c->held.len) ||
               !append(c, &c->out, c->held.p, c->held.len)) {
      fail(c, "cannot write a response");
    }
  } else if (c->chunked) {
    int ok;
    pc_Http1Header *f = fields_of(c, &c->rt, c->nrt, &ok);
    pc_Error err;
    pc_Error_Init(&err);
    size_t n = ok ? pc_Http1_WriteLastChunk(NULL, 0, f, c->nrt, &err) : 0;
    if (n == 0) n = pc_Http1_WriteLastChunk(NULL, 0, NULL, 0, &err), c->nrt = 0;
    if (pc_GrpcBuf_Reserve(c->alloc, c->ud, &c->out, n)) {
      pc_Http1_WriteLastChunk(c->out.p + c->out.len, n, f, c->nrt, &err);
      c->out.len += n;
    } else {
      fail(c, "out of memory");
    }
    if (f) c->alloc(c->ud, f, c->nrt * sizeof *f, 0);
  }
  if (c->req_done) finish_exchange(c);
}

/* The stream closed without its response's end: a reset. */
static void abort_response(pc_Http1ServerConn *c) {
  if (c->resp_ended) return;
  c->resp_ended = 1;
  if (!c->head_written)
    write_simple(c, 500, "the call was reset\n");
  else
    c->closing = 1; /* a chunked body cut short: the client sees it */
  if (c->req_done) finish_exchange(c);
}

/* Request and response both over: the next request may be parsed. */
static void finish_exchange(pc_Http1ServerConn *c) {
  c->busy = 0;
  c->rh.len = c->rt.len = c->held.len = c->body.len = 0;
  c->nrh = c->nrt = 0;
  c->body_pos = 0;
  c->head_written = c->chunked = c->hold = c->resp_ended = c->req_done = c->resp_length = 0;
  c->resp_length_value = 0;
  c->head_req = 0;
  c->lingering = 0;
  c->deferred = 0;
  c->status = 0;
  if (c->close_after || !c->keep_alive || c->shutdown || !pc_Http1Parser_Next(&c->p))
    c->closing = 1;
}

/* -- the HTTP/2 client session ------------------------------------------- */

static int push_field(pc_Http1ServerConn *c, pc_GrpcBuf *b, const uint8_t *name, size_t nl,
                      const uint8_t *value, size_t vl) {
  static const char nul = 0;
  return append(c, b, name, nl) && append(c, b, &nul, 1) && append(c, b, value, vl) &&
         append(c, b, &nul, 1);
}

static int cs_header(nghttp2_session *session, const nghttp2_frame *f, const uint8_t *name,
                     size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud) {
  (void)session;
  (void)flags;
  pc_Http1ServerConn *c = ud;
  if (f->hd.stream_id != c->stream || !c->busy) return 0;
  if (f->headers.cat == NGHTTP2_HCAT_HEADERS && c->status >= 200) {
    if (nl > 0 && name[0] == ':') return 0;
    if (!push_field(c, &c->rt, name, nl, value, vl)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    c->nrt++;
    return 0;
  }
  if (nl == 7 && memcmp(name, ":status", 7) == 0) {
    int st = 0;
    for (size_t i = 0; i < vl && i < 3; i++) st = st * 10 + (value[i] - '0');
    c->status = st;
    c->rh.len = 0;
    c->nrh = 0;
    c->resp_length = 0;
    return 0;
  }
  if (nl > 0 && name[0] == ':') return 0;
  if (nl == 14 && memcmp(name, "content-length", 14) == 0) {
    uint64_t v = 0;
    for (size_t i = 0; i < vl && i < 19 && value[i] >= '0' && value[i] <= '9'; i++)
      v = v * 10 + (uint64_t)(value[i] - '0');
    c->resp_length = 1;
    c->resp_length_value = v;
    return 0;
  }
  if (!push_field(c, &c->rh, name, nl, value, vl)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  c->nrh++;
  return 0;
}

static int cs_frame(nghttp2_session *session, const nghttp2_frame *f, void *ud) {
  (void)session;
  pc_Http1ServerConn *c = ud;
  if (f->hd.stream_id != c->stream || !c->busy || c->resp_ended) return 0;
  int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (f->hd.type == NGHTTP2_HEADERS) {
    if (f->headers.cat == NGHTTP2_HCAT_RESPONSE) on_response_head(c, end);
    if (end) end_response(c);
  } else if (f->hd.type == NGHTTP2_DATA && end) {
    end_response(c);
  }
  return 0;
}

static int cs_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                   void *ud) {
  (void)session;
  (void)flags;
  pc_Http1ServerConn *c = ud;
  if (id != c->stream || !c->busy || c->resp_ended || n == 0) return 0;
  if (c->hold) {
    if (!append(c, &c->held, d, n)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  } else if (c->chunked) {
    size_t k = pc_Http1_WriteChunk(NULL, 0, d, n);
    if (!pc_GrpcBuf_Reserve(c->alloc, c->ud, &c->out, k)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    pc_Http1_WriteChunk(c->out.p + c->out.len, k, d, n);
    c->out.len += k;
  } else if (!append(c, &c->out, d, n)) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

static int cs_close(nghttp2_session *session, int32_t id, uint32_t code, void *ud) {
  (void)session;
  (void)code;
  pc_Http1ServerConn *c = ud;
  if (id != c->stream || !c->busy) return 0;
  c->stream_open = 0;
  abort_response(c);
  return 0;
}

static ssize_t cs_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                       uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)session;
  (void)src;
  pc_Http1ServerConn *c = ud;
  if (id != c->stream || !c->busy) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  size_t avail = c->body.len - c->body_pos;
  if (avail == 0) {
    if (c->req_done) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      return 0;
    }
    c->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t n = avail < length ? avail : length;
  memcpy(buf, c->body.p + c->body_pos, n);
  c->body_pos += n;
  if (c->body_pos == c->body.len) {
    c->body.len = c->body_pos = 0;
    if (c->req_done) *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  return (ssize_t)n;
}

static void resume(pc_Http1ServerConn *c) {
  if (c->deferred && c->stream_open) {
    c->deferred = 0;
    nghttp2_session_resume_data(c->cs, c->stream);
  }
}

/* -- requests ------------------------------------------------------------ */

static char lower_ascii(char x) {
  if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
  return x;
}

static int ieq(const char *a, size_t n, const char *lit) {
  size_t k = strlen(lit);
  if (n != k) return 0;
  for (size_t i = 0; i < n; i++) {
    if (lower_ascii(a[i]) != lit[i]) return 0;
  }
  return 1;
}

/* Fields HTTP/2 does not carry (RFC 9113 8.2.2) or that the HTTP/1.1 side
 * owns. */
static int hop_field(const pc_Http1Header *f) {
  static const char *const hop[] = {"host",
                                    "connection",
                                    "keep-alive",
                                    "upgrade",
                                    "proxy-connection",
                                    "transfer-encoding",
                                    "te",
                                    "content-length",
                                    "expect",
                                    "http2-settings"};
  for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
    if (ieq(f->name, f->name_len, hop[i])) return 1;
  return 0;
}

static void start_request(pc_Http1ServerConn *c, const pc_Http1Head *h) {
  c->busy = 1;
  c->minor = h->minor;
  c->keep_alive = h->keep_alive;
  c->req_done = 0;
  char method[32];
  if (h->method_len >= sizeof method) {
    write_simple(c, 501, "the request method is not implemented\n");
    return;
  }
  memcpy(method, h->method, h->method_len);
  method[h->method_len] = 0;
  c->head_req = strcmp(method, "HEAD") == 0;
  /* a tunnel: nothing here serves one, whatever its target (the
   * authority-form "host:port" RFC 9112 3.2.3 gives it, or a path) */
  if (strcmp(method, "CONNECT") == 0) {
    write_simple(c, 405, "CONNECT is not served here\n");
    return;
  }
  if (h->target_len == 0 || h->target[0] != '/') {
    write_simple(c, 400, "the request target must be a path (origin-form)\n");
    return;
  }
  const char *ct = NULL, *host = "localhost";
  size_t ctn = 0, hostn = 9;
  for (size_t i = 0; i < h->nfields; i++) {
    if (ieq(h->fields[i].name, h->fields[i].name_len, "content-type")) {
      ct = h->fields[i].value;
      ctn = h->fields[i].value_len;
    } else if (ieq(h->fields[i].name, h->fields[i].name_len, "host") &&
               h->fields[i].value_len > 0) {
      host = h->fields[i].value;
      hostn = h->fields[i].value_len;
    }
  }
  pc_WebCodec codec;
  c->proto = pc_Web_Classify(method, ct, ctn, &codec);
  if (c->proto == kPc_WebProtocol_Grpc) {
    write_simple(c, 505,
                 "gRPC needs HTTP/2; over HTTP/1.1 use gRPC-Web (application/grpc-web) or "
                 "Connect\n");
    return;
  }
  size_t room = 1; /* never 0 */
  for (size_t i = 0; i < h->nfields; i++) room += h->fields[i].name_len;
  nghttp2_nv *nv = c->alloc(c->ud, NULL, 0, (h->nfields + 4) * sizeof *nv);
  char *lower = c->alloc(c->ud, NULL, 0, room);
  if (nv == NULL || lower == NULL) {
    if (nv) c->alloc(c->ud, nv, (h->nfields + 4) * sizeof *nv, 0);
    if (lower) c->alloc(c->ud, lower, room, 0);
    fail(c, "out of memory");
    return;
  }
  size_t n = 0;
  const uint8_t none = NGHTTP2_NV_FLAG_NONE;
  nv[n++] = (nghttp2_nv){(uint8_t *)":method", (uint8_t *)method, 7, strlen(method), none};
  nv[n++] = (nghttp2_nv){(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, none};
  nv[n++] = (nghttp2_nv){(uint8_t *)":authority", (uint8_t *)host, 10, hostn, none};
  nv[n++] = (nghttp2_nv){(uint8_t *)":path", (uint8_t *)h->target, 5, h->target_len, none};
  char *q = lower;
  for (size_t i = 0; i < h->nfields; i++) {
    const pc_Http1Header *f = &h->fields[i];
    if (hop_field(f)) continue;
    for (size_t k = 0; k < f->name_len; k++) q[k] = lower_ascii(f->name[k]);
    nv[n++] = (nghttp2_nv){(uint8_t *)q, (uint8_t *)f->value, f->name_len, f->value_len, none};
    q += f->name_len;
  }
  nghttp2_data_provider prd;
  prd.source.ptr = NULL;
  prd.read_callback = cs_read;
  int32_t id =
      nghttp2_submit_request(c->cs, NULL, nv, n, h->body == kPc_Http1Body_None ? NULL : &prd, NULL);
  c->alloc(c->ud, nv, (h->nfields + 4) * sizeof *nv, 0);
  c->alloc(c->ud, lower, room, 0);
  if (id < 0) {
    write_simple(c, 503, "no more requests on this connection\n");
    return;
  }
  c->stream = id;
  c->stream_open = 1;
  if (h->expect_continue && !append(c, &c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25))
    fail(c, "out of memory");
}

/* Whether the request head at the unconsumed input, which http1.h
 * refused before its end (414, 431: not started as a request), is a
 * HEAD's, whose answer is the head alone. */
static int refused_head(const pc_Http1ServerConn *c) {
  const char *p = c->in.p ? c->in.p + c->in_pos : "";
  size_t n = c->in.len - c->in_pos;
  while (n > 0 && (*p == '\r' || *p == '\n')) p++, n--; /* empty lines before it */
  return n >= 5 && memcmp(p, "HEAD ", 5) == 0;
}

/* A request http1.h refused. */
static void refuse(pc_Http1ServerConn *c) {
  pc_Error err;
  pc_Error_Init(&err);
  pc_Http1Status st = pc_Http1Parser_Error(&c->p, &err);
  if (c->busy && c->stream_open && !c->resp_ended) {
    nghttp2_submit_rst_stream(c->cs, NGHTTP2_FLAG_NONE, c->stream, NGHTTP2_CANCEL);
    c->resp_ended = 1;
  }
  if (c->busy && c->head_written) {
    c->closing = 1;
    return;
  }
  if (!c->busy) c->head_req = refused_head(c);
  char text[PC_ERROR_MAX + 2];
  snprintf(text, sizeof text, "%s\n", err.msg);
  write_simple(c, pc_Http1Status_HttpCode(st), text);
}

/* Parses what it can; returns whether anything happened. */
static int parse_some(pc_Http1ServerConn *c) {
  int progress = 0;
  while (!c->closing && !c->dead) {
    if (c->busy && (c->req_done || c->body.len - c->body_pos >= BODY_HIGH)) break;
    pc_Http1Event ev;
    const char *at = c->in.p ? c->in.p + c->in_pos : "";
    size_t used = pc_Http1Parser_Parse(&c->p, at, c->in.len - c->in_pos, &ev);
    c->in_pos += used;
    if (used) progress = 1;
    switch (ev.type) {
    case kPc_Http1Event_NeedMore:
      if (!c->busy && c->in.len > c->in_pos && c->head_since == 0) c->head_since = c->now;
      return progress;
    case kPc_Http1Event_Head:
      c->head_since = 0;
      c->body_since = c->now;
      c->body_chunked = ev.head->body == kPc_Http1Body_Chunked;
      start_request(c, ev.head);
      progress = 1;
      break;
    case kPc_Http1Event_Body:
      if (c->lingering && ev.len > c->linger_left) {
        c->closing = 1; /* past LINGER_BODY of a body answered early */
        return 1;
      }
      if (c->lingering) c->linger_left -= ev.len;
      if (c->body_chunked && ev.len > 0) c->body_since = c->now;
      if (c->stream_open && !c->resp_ended && !append(c, &c->body, ev.data, ev.len))
        fail(c, "out of memory");
      resume(c);
      break;
    case kPc_Http1Event_Trailers: break; /* request trailers are not passed on */
    case kPc_Http1Event_End:
      c->req_done = 1;
      c->body_since = 0;
      progress = 1;
      resume(c);
      if (c->resp_ended) finish_exchange(c);
      break;
    case kPc_Http1Event_Paused: return progress; /* the exchange is not over yet */
    case kPc_Http1Event_Closed: c->closing = 1; return 1;
    case kPc_Http1Event_Informational: /* requests have none */
    case kPc_Http1Event_Error: refuse(c); return 1;
    }
  }
  return progress;
}

/* Moves bytes until nothing moves: requests in, the HTTP/2 exchange both
 * ways, responses out. */
static void pump(pc_Http1ServerConn *c) {
  for (int moved = 1; moved && !c->dead;) {
    moved = parse_some(c);
    for (;;) {
      const uint8_t *d;
      ssize_t n = nghttp2_session_mem_send(c->cs, &d);
      if (n < 0) {
        fail(c, nghttp2_strerror((int)n));
        return;
      }
      if (n == 0) break;
      moved = 1;
      if (!pc_GrpcServerConn_Recv(c->inner, d, (size_t)n, c->now)) {
        fail(c, pc_GrpcServerConn_Why(c->inner));
        return;
      }
    }
    while (c->out.len - c->out_pos < OUT_HIGH) {
      const char *d;
      size_t n = pc_GrpcServerConn_Output(c->inner, &d);
      if (n == 0) break;
      ssize_t r = nghttp2_session_mem_recv(c->cs, (const uint8_t *)d, n);
      if (r < 0) {
        fail(c, nghttp2_strerror((int)r));
        return;
      }
      pc_GrpcServerConn_Wrote(c->inner, n);
      moved = 1;
    }
  }
}

/* -- the connection ------------------------------------------------------ */

pc_Http1ServerConn *pc_Http1ServerConn_New(const pc_Http1ServerOptions *o, pc_Alloc *alloc,
                                           void *ud, pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_Http1ServerConn *c = alloc(ud, NULL, 0, sizeof *c);
  if (c == NULL) {
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  memset(c, 0, sizeof *c);
  c->alloc = alloc;
  c->ud = ud;
  c->o = *o;
  if (c->o.max_fields == 0) c->o.max_fields = DEFAULT_MAX_FIELDS;
  if (c->o.head_timeout <= 0) c->o.head_timeout = DEFAULT_HEAD_TIME;
  size_t max_head = c->o.http1.max_head ? c->o.http1.max_head : PC_HTTP1_DEFAULT_MAX_HEAD;
  if (c->o.max_pending == 0) c->o.max_pending = ((size_t)1 << 20) + max_head;
  c->slots = alloc(ud, NULL, 0, c->o.max_fields * sizeof *c->slots);
  /* The request body's time is this layer's (408, pc_Http1ServerConn_Expire):
   * the inner engine's stall timer would end a body that stopped first, as
   * RESOURCE_EXHAUSTED. */
  pc_GrpcServerOptions inner = c->o.engine;
  inner.stall_timeout = -1;
  c->inner = c->slots ? pc_GrpcServerConn_New(&inner, alloc, ud, err) : NULL;
  if (c->inner == NULL) goto fail;
  pc_Http1Parser_Init(&c->p, kPc_Http1_Requests, &c->o.http1, c->slots, c->o.max_fields);
  c->mem = (nghttp2_mem){c, m_malloc, m_free, m_calloc, m_realloc};
  nghttp2_session_callbacks *cb = NULL;
  if (nghttp2_session_callbacks_new(&cb) != 0) goto fail;
  nghttp2_session_callbacks_set_on_header_callback(cb, cs_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, cs_frame);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, cs_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, cs_close);
  int r = nghttp2_session_client_new3(&c->cs, cb, c, NULL, &c->mem);
  nghttp2_session_callbacks_del(cb);
  if (r != 0) goto fail;
  nghttp2_settings_entry iv[2] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                  {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, CLIENT_STREAM_WINDOW}};
  if (nghttp2_submit_settings(c->cs, NGHTTP2_FLAG_NONE, iv, 2) != 0) goto fail;
  return c;
fail:
  if (err && err->msg[0] == 0) pc_Error_Set(err, "out of memory");
  pc_Http1ServerConn_Free(c);
  return NULL;
}

void pc_Http1ServerConn_Free(pc_Http1ServerConn *c) {
  if (c == NULL) return;
  if (c->cs) nghttp2_session_del(c->cs);
  pc_GrpcServerConn_Free(c->inner);
  pc_GrpcBuf *bufs[] = {&c->in, &c->out, &c->body, &c->rh, &c->rt, &c->held};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    pc_GrpcBuf_Free(c->alloc, c->ud, bufs[i]);
  if (c->slots) c->alloc(c->ud, c->slots, c->o.max_fields * sizeof *c->slots, 0);
  c->alloc(c->ud, c, sizeof *c, 0);
}

int pc_Http1ServerConn_Recv(pc_Http1ServerConn *c, const void *data, size_t len, double now) {
  c->now = now;
  if (c->dead) return 0;
  if (c->closing) return 1; /* what comes after the last response is dropped */
  if (c->in_pos > 0) {      /* the parser is given the unconsumed bytes first, again */
    memmove(c->in.p, c->in.p + c->in_pos, c->in.len - c->in_pos);
    c->in.len -= c->in_pos;
    c->in_pos = 0;
  }
  if (c->in.len + len > c->o.max_pending) {
    /* A pipelining flood: what is queued is dropped with the connection. */
    char why[96];
    snprintf(why, sizeof why, "HTTP/1.1 input over %zu bytes while a request is served",
             c->o.max_pending);
    pc_GrpcServerConn_Lost(c->inner);
    fail(c, why);
    return 0;
  }
  if (!append(c, &c->in, data, len)) {
    fail(c, "out of memory");
    return 0;
  }
  pump(c);
  return !c->dead;
}

size_t pc_Http1ServerConn_Output(pc_Http1ServerConn *c, const char **data) {
  if (!c->dead) pump(c);
  if (c->out.len == c->out_pos) {
    *data = "";
    return 0;
  }
  *data = c->out.p + c->out_pos;
  return c->out.len - c->out_pos;
}

void pc_Http1ServerConn_Wrote(pc_Http1ServerConn *c, size_t n) {
  c->out_pos += n;
  if (c->out_pos >= c->out.len) c->out.len = c->out_pos = 0;
}

int pc_Http1ServerConn_Alive(const pc_Http1ServerConn *c) {
  return !c->dead && !(c->closing && c->out.len == c->out_pos);
}

const char *pc_Http1ServerConn_Why(const pc_Http1ServerConn *c) {
  return c->why;
}

void pc_Http1ServerConn_Lost(pc_Http1ServerConn *c) {
  pc_GrpcServerConn_Lost(c->inner);
  fail(c, "connection lost");
}

void pc_Http1ServerConn_Shutdown(pc_Http1ServerConn *c) {
  c->shutdown = 1;
  if (!c->busy) c->closing = 1;
}

size_t pc_Http1ServerConn_Running(const pc_Http1ServerConn *c) {
  size_t n = pc_GrpcServerConn_Running(c->inner);
  return n ? n : (size_t)c->busy;
}

double pc_Http1ServerConn_Expire(pc_Http1ServerConn *c, double now) {
  c->now = now;
  double due = pc_GrpcServerConn_Expire(c->inner, now);
  if (!c->dead) pump(c);
  if (!c->busy && !c->closing && !c->dead && c->head_since > 0) {
    double at = c->head_since + c->o.head_timeout;
    if (now >= at) {
      write_simple(c, 408, "request head not complete in time\n");
    } else if (due < 0 || at < due) {
      due = at;
    }
  }
  if (c->lingering && !c->req_done && !c->closing && !c->dead) {
    if (now >= c->linger_until)
      c->closing = 1; /* LINGER_TIME after an answer that came early */
    else if (due < 0 || c->linger_until < due)
      due = c->linger_until;
  }
  double stall = c->o.engine.stall_timeout == 0 ? 60 : c->o.engine.stall_timeout;
  if (c->busy && !c->req_done && !c->closing && !c->dead && !c->lingering && c->body_since > 0 &&
      stall > 0) {
    double at = c->body_since + stall;
    if (now < at) {
      if (due < 0 || at < due) due = at;
    } else if (!c->head_written) {
      write_simple(c, 408, "request body not complete in time\n");
    } else {
      fail(c, "request body not complete in time");
    }
  }
  return due;
}

pc_GrpcServerCall *pc_Http1ServerConn_Accept(pc_Http1ServerConn *c) {
  if (!c->dead) pump(c); /* a call answered lets the next request in */
  pc_GrpcServerCall *s = pc_GrpcServerConn_Accept(c->inner);
  if (s) pc_GrpcServerCall_SetHttp1(s);
  return s;
}
