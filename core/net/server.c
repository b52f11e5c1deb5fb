/* The sans-I/O gRPC server engine on nghttp2 (see server.h).
 *
 * nghttp2 does HTTP/2 (framing, HPACK, stream states, flow-control
 * accounting, the checks of RFC 9113 8.3 on request pseudo headers); this
 * file does what gRPC adds: request headers to a call, length-prefixed
 * messages, gzip, responses and trailers, and the limits. */
#define _POSIX_C_SOURCE 200809L

#include "net/server.h"
#include "net/session_internal.h"
#include "net/web.h"
#include "net/web_http.h"

#include <nghttp2/nghttp2.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  double tokens, last;
  int started;
} Bucket;

struct pc_GrpcServerCall {
  pc_GrpcMem m;
  pc_GrpcServerConn *c; /* NULL once the connection is gone */
  pc_GrpcServerCall *prev, *next;
  pc_Arena *arena;
  int32_t id;
  const char *path;
  const char *content_type;
  const char *encoding;
  const char *bad_timeout; /* a grpc-timeout outside the grammar, refused INTERNAL */
  const char *method;      /* :method */
  /* Connect's headers as they came (read once the protocol is known) */
  const char *connect_timeout, *content_encoding, *connect_encoding, *connect_version;
  int accepts_gzip_http;    /* accept-encoding lists gzip (Connect unary) */
  int accepts_gzip_connect; /* connect-accept-encoding lists gzip (Connect streaming) */
  pc_WebProtocol proto;     /* from the content-type (web.h) */
  const char *origin;       /* Origin (CORS, web_http.h) */
  int preflight;            /* Access-Control-Request-Method came: a CORS preflight */
  char *cors_headers;       /* its Access-Control-Request-Headers, or NULL */
  size_t cors_len;          /* ... their bytes (at most PC_WEB_CORS_MAX_REQUEST_HEADERS) */
  int cors_over;            /* ... were longer than that: none is echoed */
  int connect_get;          /* a Connect GET: its request is the query, a body is refused */
  const char *query;        /* ...its query, cut off its path (the arena's copy) */
  int query_unread;         /* ...queued with it unread: the driver checks the path and
                             * the method first (pc_GrpcServerCall_ReadQuery) */
  int get_body;             /* ...a body came meanwhile, dropped: ReadQuery refuses it */
  int refused;              /* queued for the driver's refusal alone, its body discarded
                             * unread, no header check made (its framing and headers no
                             * reason for another answer): gRPC, gRPC-Web or Connect
                             * streaming by another method than POST (405 or 404 by its
                             * path), or a type of none of the protocols without
                             * plain_http (queue_unknown_types: 415, or 405 to a
                             * method's path by another method than POST; Connect
                             * unary's type by PUT is such a type) */
  pc_WebCodec codec;
  int http1;        /* carried over HTTP/1.x (http1_server.h) */
  int too_large;    /* a plain HTTP body past max_receive: answered 413 */
  int eager;        /* a body decoded on arrival (gRPC-Web-Text, Connect unary): its
                     * flow-control window goes back at once, its bytes are bounded by
                     * the receive limit instead */
  pc_WebBase64 b64; /* gRPC-Web-Text: the request's base64 across DATA frames */
  size_t b64_seen;  /* ...characters decoded so far (error offsets) */
  double timeout, deadline;
  pc_GrpcPairs md, out_md[2]; /* request metadata; response headers and trailers */
  int queued;                 /* waiting for pc_GrpcServerConn_Accept */
  int accepted;               /* the driver owns it */
  pc_GrpcInbox in;            /* the request body */
  pc_GrpcOutbox out;          /* framed response messages */
  int submitted;              /* response headers submitted */
  int remote_ended, closed, cancelled;
  int finished;        /* Finish ran: the trailers follow the messages */
  int ended;           /* the engine finished it (fail, deadline): its status is queued */
  int accepts_gzip;    /* grpc-accept-encoding lists gzip */
  int gzip_declared;   /* the response headers carry grpc-encoding gzip */
  int gzip_out;        /* response messages are gzipped */
  int last_compressed; /* the last message Next returned had the flag set */
  int not_found;       /* an unknown method (pc_GrpcServerCall_NotFound): HTTP 404 on the web */
  size_t res;          /* the reservation of the connection's incomplete_budget: the
                        * length of the message it covers (0: none) */
  size_t res_to;       /* where that message ends, counted from the next unread byte */
  size_t ahead;        /* of the unconsumed bytes, those given to the connection already */
  double stall_from;   /* when the stall timer started (-1: not running) */
  pc_GrpcWaker waker;  /* its place in the listener's wake list (wake.h) */
  pc_Code code;
  const char *message, *details;
  size_t message_len, details_len;
};

struct pc_GrpcServerConn {
  pc_GrpcSession h2; /* first: the connection is its block (pc_GrpcSession_New) */
  pc_GrpcServerCall *calls, *last;
  size_t held;    /* calls not yet freed */
  size_t open;    /* ...of them not closed by nghttp2 (pc_GrpcServerConn_Running) */
  size_t waiting; /* ...queued for pc_GrpcServerConn_Accept */
  double due;     /* no call's deadline is before this (-1: none has one): Expire's scan waits */
  size_t max_receive, max_header_list;
  uint32_t max_streams;
  uint32_t reset_burst, reset_rate, control_burst, control_rate;
  size_t budget;   /* incomplete_budget */
  size_t reserved; /* of it, held by calls (pc_GrpcServerCall.res) */
  int room;        /* 'reserved' went down: calls waiting may take it (wake) */
  double stall_timeout;
  int plain_http;          /* pc_GrpcServerOptions.plain_http */
  int queue_unknown_types; /* pc_GrpcServerOptions.queue_unknown_types */
  pc_GrpcWakeList *wake;   /* the driver's, or NULL */
  const pc_WebCors *cors;  /* the options', or NULL: no CORS */
  Bucket resets, controls;
  double now;
  int goaway;
  int broken; /* nghttp2_session_mem_recv failed */
  char *why;  /* what ended the connection (NULL while it is fine), a block of its own */
};
_Static_assert(offsetof(pc_GrpcServerConn, h2) == 0,
               "a connection's block starts with its session");

/* -- helpers --------------------------------------------------------------- */

static int take_token(Bucket *b, uint32_t burst, uint32_t rate, double now) {
  if (!b->started) {
    b->started = 1;
    b->tokens = burst;
    b->last = now;
  }
  if (now > b->last) {
    b->tokens += (now - b->last) * rate;
    if (b->tokens > burst) b->tokens = burst;
    b->last = now;
  }
  if (b->tokens < 1) return 0;
  b->tokens -= 1;
  return 1;
}

static void set_why(pc_GrpcServerConn *c, const char *fmt, ...) PC_GRPC_PRINTF(2, 3);

/* The reason kept when its block cannot be had (never freed). */
static char why_no_memory[] = "out of memory";

static void set_why(pc_GrpcServerConn *c, const char *fmt, ...) {
  if (c->why) return;
  char text[PC_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  size_t n = pc_Grpc_VFormat(text, sizeof text, fmt, ap);
  va_end(ap);
  c->why = pc_GrpcMem_Alloc(&c->h2.m, NULL, 0, n + 1);
  if (c->why)
    memcpy(c->why, text, n + 1);
  else
    c->why = why_no_memory;
}

/* Ends the connection with GOAWAY ENHANCE_YOUR_CALM. */
static void calm(pc_GrpcServerConn *c, const char *what) {
  set_why(c, "%s: GOAWAY ENHANCE_YOUR_CALM", what);
  nghttp2_session_terminate_session(c->h2.session, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* Something the driver's waiter on 's' may care about happened: a
 * message or the end of the request arrived, responses went out, the call
 * ended (wake.h). */
static void wake(pc_GrpcServerCall *s) {
  if (s->c && s->c->wake && s->accepted) pc_GrpcWakeList_Add(s->c->wake, &s->waker);
}

static pc_GrpcServerCall *call_of(nghttp2_session *session, int32_t id) {
  return nghttp2_session_get_stream_user_data(session, id);
}

/* The session of a call nghttp2 has not closed, NULL once closed or
 * detached. */
static nghttp2_session *live(const pc_GrpcServerCall *s) {
  return s->c && !s->closed ? s->c->h2.session : NULL;
}

/* The stream is closed (once). */
static void mark_closed(pc_GrpcServerCall *s) {
  if (s->closed) return;
  s->closed = 1;
  if (s->c) s->c->open--;
}

static void unlink_call(pc_GrpcServerCall *s) {
  pc_GrpcServerConn *c = s->c;
  if (!s->closed) c->open--;
  if (s->queued) c->waiting--;
  if (s->prev)
    s->prev->next = s->next;
  else
    c->calls = s->next;
  if (s->next)
    s->next->prev = s->prev;
  else
    c->last = s->prev;
  s->prev = s->next = NULL;
  c->held--;
}

/* Requests still arriving (below). */
static int unreserve(pc_GrpcServerCall *s);
static void drop_ahead(pc_GrpcServerCall *s);
static void share_room(pc_GrpcServerConn *c);
static void release_window(pc_GrpcServerCall *s);

static void free_call(pc_GrpcServerCall *s) {
  pc_GrpcServerConn *c = s->c;
  if (c) {
    unreserve(s);
    if (!s->closed) {
      drop_ahead(s);
      pc_GrpcInbox_Detach(&s->in, c->h2.session, s->id);
    }
    unlink_call(s);
    share_room(c);
  }
  pc_GrpcMem m = s->m;
  pc_Arena_Free(s->arena);
  pc_GrpcInbox_Free(&s->in, &m);
  pc_GrpcOutbox_Free(&s->out, &m);
  pc_GrpcMem_Alloc(&m, s, sizeof *s, 0);
}

/* -- responses ------------------------------------------------------------- */

/* Appends the response pairs 'ps' (base64 for "-bin" keys). */
static int push_pairs(pc_GrpcServerCall *s, const pc_GrpcPairs *ps, nghttp2_nv *h, size_t *n) {
  return pc_Grpc_PushPairs(ps->items, ps->count, s->arena, h, n);
}

/* The status pairs (grpc-status, grpc-message, grpc-status-details-bin). */
static int push_status(pc_GrpcServerCall *s, nghttp2_nv *h, size_t *n) {
  char *code = pc_Arena_Malloc(s->arena, 8);
  if (code == NULL) return 0;
  snprintf(code, 8, "%d", (int)s->code);
  h[(*n)++] = PC_GRPC_NV("grpc-status", code);
  if (s->message_len > 0) {
    char *m = pc_Arena_Malloc(s->arena, s->message_len * 3 + 1);
    if (m == NULL) return 0;
    size_t mn = pc_Grpc_PercentEncode(s->message, s->message_len, m);
    h[(*n)++] = pc_Grpc_Nv("grpc-message", 12, m, mn);
  }
  if (s->details_len > 0) {
    char *d = pc_Arena_Malloc(s->arena, s->details_len / 3 * 4 + 8);
    if (d == NULL) return 0;
    size_t dn = pc_Grpc_Base64Encode((const unsigned char *)s->details, s->details_len, d);
    h[(*n)++] = pc_Grpc_Nv("grpc-status-details-bin", 23, d, dn);
  }
  return 1;
}

/* nghttp2 sends no header block over this many bytes (its default
 * max_send_header_block_length, which the session keeps): a larger one
 * would never go out, and its stream would never end. */
#define SEND_BLOCK_MAX ((size_t)64 * 1024)

/* A header block's size as RFC 9113 6.5.2 counts it (each field its name,
 * its value and 32 bytes): never below nghttp2's own estimate. */
static size_t block_size(const nghttp2_nv *h, size_t n) {
  size_t size = 0;
  for (size_t i = 0; i < n; i++) size += h[i].namelen + h[i].valuelen + 32;
  return size;
}

/* The largest header block the call may send: what nghttp2 sends, or the
 * client's SETTINGS_MAX_HEADER_LIST_SIZE when lower (grpc-core checks the
 * metadata it is about to send against it). */
static size_t block_limit(const pc_GrpcServerCall *s) {
  uint32_t peer =
      nghttp2_session_get_remote_settings(s->c->h2.session, NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE);
  return peer < SEND_BLOCK_MAX ? peer : SEND_BLOCK_MAX;
}

/* A status block of 'size' bytes is over 'limit': as grpc-core cancels a
 * stream whose metadata to send exceeds the peer's limit, the status
 * becomes RESOURCE_EXHAUSTED with a short message naming the sizes
 * ('what': "headers", "trailers"), appended at '*n' alone (no metadata, no
 * details). Returns 0 when memory runs out or even that does not fit. */
static int cut_status(pc_GrpcServerCall *s, const char *what, size_t size, size_t limit,
                      nghttp2_nv *h, size_t *n) {
  char text[96];
  int len = snprintf(text, sizeof text, "response %s of %zu bytes exceed the limit of %zu bytes",
                     what, size, limit);
  s->code = kPc_Code_ResourceExhausted;
  s->message = pc_Arena_StrDup(s->arena, text, (size_t)len);
  s->message_len = s->message ? (size_t)len : 0;
  s->details = NULL;
  s->details_len = 0;
  return s->message && push_status(s, h, n) && block_size(h, *n) <= limit;
}

/* Whether the request body is one message, its prefix written at its end
 * (Connect unary, plain HTTP). */
static int whole_body(const pc_GrpcServerCall *s) {
  return s->proto == kPc_WebProtocol_ConnectUnary || s->proto == kPc_WebProtocol_Http;
}

/* The response's content-type: the request's protocol and codec. */
static const char *response_type(const pc_GrpcServerCall *s) {
  int json = s->codec == kPc_WebCodec_Json;
  switch (s->proto) {
  case kPc_WebProtocol_GrpcWeb:
    return json ? "application/grpc-web+json" : "application/grpc-web+proto";
  case kPc_WebProtocol_GrpcWebText:
    return json ? "application/grpc-web-text+json" : "application/grpc-web-text+proto";
  case kPc_WebProtocol_ConnectStream:
    return json ? "application/connect+json" : "application/connect+proto";
  case kPc_WebProtocol_ConnectUnary: return json ? "application/json" : "application/proto";
  default: return json ? "application/grpc+json" : "application/grpc";
  }
}

/* Adds the CORS headers of a response to a request whose origin the
 * options allow (web_http.h); none otherwise, nor to a native gRPC call
 * (no browser makes one: its answer's metadata stays the handler's).
 * 'h' has room for 6 more.
 * 'extra' (NULL: none) is one more response header a script may read (a
 * 415's Accept-Post, a 405's Allow), exposed after the protocols' and the
 * options'. */
static void push_cors_exposing(const pc_GrpcServerCall *s, nghttp2_nv *h, size_t *n,
                               const char *extra) {
  const pc_WebCors *cors = s->c ? s->c->cors : NULL;
  if (cors == NULL || s->proto == kPc_WebProtocol_Grpc) return;
  /* the answer depends on Origin whether or not it came and is allowed, so
   * a shared cache (of a Connect GET's answer) keeps the variants apart */
  h[(*n)++] = PC_GRPC_NV("vary", "Origin");
  const char *allow = s->origin ? pc_WebCors_AllowOrigin(cors, s->origin, strlen(s->origin)) : NULL;
  if (allow == NULL) return;
  h[(*n)++] = PC_GRPC_NV("access-control-allow-origin", allow);
  if (cors->credentials) h[(*n)++] = PC_GRPC_NV("access-control-allow-credentials", "true");
  if (s->preflight) return;
  const char *more = cors->expose;
  size_t len =
      sizeof PC_WEB_CORS_EXPOSE + (more ? 2 + strlen(more) : 0) + (extra ? 2 + strlen(extra) : 0);
  char *v = more || extra ? pc_Arena_Malloc(s->arena, len) : NULL;
  if (v)
    snprintf(v, len, "%s%s%s%s%s", PC_WEB_CORS_EXPOSE, more ? ", " : "", more ? more : "",
             extra ? ", " : "", extra ? extra : "");
  h[(*n)++] = PC_GRPC_NV("access-control-expose-headers", v ? v : PC_WEB_CORS_EXPOSE);
}

static void push_cors(const pc_GrpcServerCall *s, nghttp2_nv *h, size_t *n) {
  push_cors_exposing(s, h, n, NULL);
}

/* Answers a CORS preflight (OPTIONS with Access-Control-Request-Method)
 * when the listener has CORS: 204 with the methods and headers the
 * protocols (and the options') allow for an allowed origin, a bare 204
 * for another. The values are in the call's arena: the options may
 * change once this returns (pc_GrpcListener_SetCors). */
static void answer_preflight(pc_GrpcServerCall *s) {
  const pc_WebCors *cors = s->c->cors;
  nghttp2_nv h[12];
  size_t n = 0;
  h[n++] = PC_GRPC_NV(":status", "204");
  size_t bare = n + 1; /* and Vary, which push_cors always adds */
  push_cors(s, h, &n);
  char *age = NULL;
  if (n > bare) {
    const char *methods = pc_WebCors_AllowMethods(cors, s->arena);
    const char *rh = s->cors_over ? NULL : s->cors_headers;
    const char *headers = pc_WebCors_AllowHeaders(cors, rh, rh ? s->cors_len : 0, s->arena);
    age = pc_Arena_Malloc(s->arena, 16);
    if (methods == NULL || headers == NULL || age == NULL) {
      n = bare; /* out of memory: a bare answer, which the browser refuses */
    } else {
      snprintf(age, 16, "%u", cors->max_age ? cors->max_age : PC_WEB_CORS_DEFAULT_MAX_AGE);
      h[n++] = PC_GRPC_NV("access-control-allow-methods", methods);
      h[n++] = PC_GRPC_NV("access-control-allow-headers", headers);
      h[n++] = PC_GRPC_NV("access-control-max-age", age);
    }
  }
  s->finished = s->cancelled = 1;
  s->submitted = 1;
  nghttp2_submit_response(s->c->h2.session, s->id, h, n, NULL);
}

/* Appends the 'n' bytes at 'p' to the response body: in base64 for
 * gRPC-Web-Text (each piece padded, as PROTOCOL-WEB.md allows). Returns 0
 * when memory runs out. */
static int put_body(pc_GrpcServerCall *s, const void *p, size_t n) {
  pc_GrpcOutbox *o = &s->out;
  if (o->pos > 0 && o->pos == o->buf.len) o->buf.len = o->pos = 0;
  int text = s->proto == kPc_WebProtocol_GrpcWebText;
  if (!pc_GrpcBuf_Reserve(s->m.alloc, s->m.ud, &o->buf, text ? n / 3 * 4 + 8 : n)) return 0;
  if (text)
    o->buf.len += pc_Web_Base64Encode(p, n, o->buf.p + o->buf.len);
  else if (n > 0) {
    memcpy(o->buf.p + o->buf.len, p, n);
    o->buf.len += n;
  }
  return 1;
}

/* The status of the call as web.h takes it. */
static pc_GrpcStatus status_of(const pc_GrpcServerCall *s) {
  pc_GrpcStatus st;
  memset(&st, 0, sizeof st);
  st.code = s->code;
  st.message = s->message;
  st.message_len = s->message_len;
  st.details = s->details;
  st.details_len = s->details_len;
  return st;
}

/* Appends the last message of a gRPC-Web or Connect streaming response:
 * the trailers (0x80) or the end-of-stream JSON (0x02). */
static int put_end(pc_GrpcServerCall *s) {
  pc_GrpcBuf b = {0};
  pc_GrpcStatus st = status_of(s);
  const pc_GrpcPairs *md = &s->out_md[1];
  int ok = s->proto == kPc_WebProtocol_ConnectStream
               ? pc_Connect_EndStream(s->m.alloc, s->m.ud, &b, &st, md->items, md->count)
               : pc_Web_GrpcWebTrailers(s->m.alloc, s->m.ud, &b, &st, md->items, md->count);
  ok = ok && put_body(s, b.p, b.len);
  pc_GrpcBuf_Free(s->m.alloc, s->m.ud, &b);
  return ok;
}

/* Submits the whole response of a Connect unary call: the status (200 or
 * pc_Connect_HttpStatus), the response metadata as headers and the
 * trailers as "trailer-" headers, the message or the error JSON. A block
 * over the limit goes without the metadata as resource_exhausted.
 * Returns 0 when memory runs out or nghttp2 refuses. */
static int submit_unary(pc_GrpcServerCall *s) {
  size_t max = 15 + s->out_md[0].count + s->out_md[1].count;
  nghttp2_nv *h = pc_Arena_Malloc(s->arena, max * sizeof *h);
  char *code = pc_Arena_Malloc(s->arena, 8), *length = pc_Arena_Malloc(s->arena, 24);
  if (h == NULL || code == NULL || length == NULL) return 0;
  int ok = s->code == kPc_Code_Ok;
  snprintf(code, 8, "%d", s->not_found ? 404 : pc_Connect_HttpStatus(s->code));
  size_t n = 0;
  h[n++] = PC_GRPC_NV(":status", code);
  h[n++] = PC_GRPC_NV("content-type", ok ? response_type(s) : "application/json");
  h[n++] = PC_GRPC_NV("accept-encoding", "gzip");
  if (ok && s->gzip_out) h[n++] = PC_GRPC_NV("content-encoding", "gzip");
  push_cors(s, h, &n);
  size_t fixed = n;
  if (!push_pairs(s, &s->out_md[0], h, &n)) return 0;
  size_t t0 = n;
  if (!push_pairs(s, &s->out_md[1], h, &n)) return 0;
  for (size_t i = t0; i < n; i++) { /* trailers: "trailer-" and the key */
    char *k = pc_Arena_Malloc(s->arena, h[i].namelen + 9);
    if (k == NULL) return 0;
    snprintf(k, h[i].namelen + 9, "trailer-%.*s", (int)h[i].namelen, (const char *)h[i].name);
    h[i].name = (uint8_t *)k;
    h[i].namelen += 8;
  }
  size_t size = block_size(h, n), limit = block_limit(s);
  if (size > limit) {
    char text[96];
    int len = snprintf(text, sizeof text,
                       "response headers of %zu bytes exceed the limit of %zu bytes", size, limit);
    s->code = kPc_Code_ResourceExhausted;
    s->message = pc_Arena_StrDup(s->arena, text, (size_t)len);
    s->message_len = s->message ? (size_t)len : 0;
    s->details_len = 0;
    ok = 0;
    n = fixed;
    snprintf(code, 8, "%d", pc_Connect_HttpStatus(s->code));
    h[1] = PC_GRPC_NV("content-type", "application/json");
  }
  if (!ok) {
    pc_GrpcOutbox_Clear(&s->out);
    pc_GrpcBuf b = {0};
    pc_GrpcStatus st = status_of(s);
    int put = pc_Connect_ErrorJson(s->m.alloc, s->m.ud, &b, &st) && put_body(s, b.p, b.len);
    pc_GrpcBuf_Free(s->m.alloc, s->m.ud, &b);
    if (!put) return 0;
  }
  /* the whole body is known: an HTTP/1.1 client gets it with its length */
  snprintf(length, 24, "%zu", pc_GrpcOutbox_Unsent(&s->out));
  h[n++] = PC_GRPC_NV("content-length", length);
  s->submitted = 1;
  s->gzip_declared = s->gzip_out;
  /* a HEAD's answer is the GET's head, its length with it (RFC 9110 9.3.2) */
  if (s->method && strcmp(s->method, "HEAD") == 0) {
    pc_GrpcOutbox_Clear(&s->out);
    return nghttp2_submit_response(s->c->h2.session, s->id, h, n, NULL) == 0;
  }
  nghttp2_data_provider prd = pc_GrpcSession_Body();
  return nghttp2_submit_response(s->c->h2.session, s->id, h, n, &prd) == 0;
}

/* Submits the answer of a plain HTTP call finished before its head went:
 * the HTTP status of its code (413 for a body past the limit) and its
 * google.rpc.Status JSON. */
static int submit_plain_error(pc_GrpcServerCall *s) {
  char *code = pc_Arena_Malloc(s->arena, 8), *len = pc_Arena_Malloc(s->arena, 24);
  if (code == NULL || len == NULL) return 0;
  snprintf(code, 8, "%d", s->too_large ? 413 : pc_Connect_HttpStatus(s->code));
  pc_GrpcOutbox_Clear(&s->out);
  pc_GrpcBuf b = {0};
  pc_GrpcStatus st = status_of(s);
  int put = pc_Web_StatusJson(s->m.alloc, s->m.ud, &b, &st) && put_body(s, b.p, b.len);
  snprintf(len, 24, "%zu", b.len);
  pc_GrpcBuf_Free(s->m.alloc, s->m.ud, &b);
  if (!put) return 0;
  nghttp2_nv h[3] = {PC_GRPC_NV(":status", code), PC_GRPC_NV("content-type", "application/json"),
                     PC_GRPC_NV("content-length", len)};
  s->submitted = 1;
  nghttp2_data_provider prd = pc_GrpcSession_Body();
  return nghttp2_submit_response(s->c->h2.session, s->id, h, 3, &prd) == 0;
}

/* Submits the response headers: with a data provider, or (trailers_only)
 * as the whole response with the status (cut_status when it does not fit).
 * Returns 1; 0 when memory runs out or nghttp2 refuses; -1 when headers
 * with a data provider exceed the limit, with the sizes in '*over' (the
 * block's) and '*limit'. */
static int submit_headers(pc_GrpcServerCall *s, int trailers_only, size_t *over, size_t *limit) {
  pc_GrpcServerConn *c = s->c;
  size_t max = 14 + s->out_md[0].count + (trailers_only ? s->out_md[1].count : 0);
  nghttp2_nv *h = pc_Arena_Malloc(s->arena, max * sizeof *h);
  if (h == NULL) return 0;
  size_t n = 0;
  h[n++] = PC_GRPC_NV(":status", s->not_found && s->proto != kPc_WebProtocol_Grpc ? "404" : "200");
  h[n++] = PC_GRPC_NV("content-type", response_type(s));
  if (s->proto == kPc_WebProtocol_ConnectStream) {
    h[n++] = PC_GRPC_NV("connect-accept-encoding", "gzip");
    if (s->gzip_out) h[n++] = PC_GRPC_NV("connect-content-encoding", "gzip");
  } else {
    h[n++] = PC_GRPC_NV("grpc-accept-encoding", "identity,gzip");
    if (s->gzip_out) h[n++] = PC_GRPC_NV("grpc-encoding", "gzip");
  }
  size_t cors_at = n;
  push_cors(s, h, &n);
  size_t cors_n = n - cors_at;
  if (!push_pairs(s, &s->out_md[0], h, &n)) return 0;
  /* (a Connect stream's head alone, a HEAD's: its status is in the body) */
  if (trailers_only && s->proto != kPc_WebProtocol_ConnectStream &&
      (!push_status(s, h, &n) || !push_pairs(s, &s->out_md[1], h, &n)))
    return 0;
  *over = block_size(h, n);
  *limit = block_limit(s);
  if (*over > *limit) {
    if (!trailers_only) return -1;
    /* :status, content-type, the CORS headers (so a browser reads the status) */
    for (size_t i = 0; i < cors_n; i++) h[2 + i] = h[cors_at + i];
    n = 2 + cors_n;
    if (!cut_status(s, "trailers", *over, *limit, h, &n)) return 0;
  }
  s->submitted = 1;
  s->gzip_declared = s->gzip_out;
  nghttp2_data_provider prd = pc_GrpcSession_Body();
  return nghttp2_submit_response(c->h2.session, s->id, h, n, trailers_only ? NULL : &prd) == 0;
}

static void resume(pc_GrpcServerCall *s) {
  pc_GrpcOutbox_Resume(&s->out, live(s), s->id);
}

static void finish(pc_GrpcServerCall *s, pc_Code code, const char *msg, size_t len,
                   const char *details, size_t dlen) {
  if (s->finished || s->c == NULL || s->closed) return;
  s->finished = 1;
  s->code = code;
  s->message = pc_Arena_StrDup(s->arena, msg ? msg : "", msg ? len : 0);
  s->message_len = s->message ? len : 0;
  if (s->message == NULL) s->message = "";
  s->details = NULL;
  s->details_len = 0;
  if (details && dlen > 0) {
    char *d = pc_Arena_StrDup(s->arena, details, dlen);
    if (d) {
      s->details = d;
      s->details_len = dlen;
    }
  }
  size_t size, limit;
  int ok;
  if (s->proto == kPc_WebProtocol_ConnectUnary) {
    ok = submit_unary(s);
  } else if (s->proto == kPc_WebProtocol_Http) {
    ok = s->submitted ? 1 : submit_plain_error(s);
  } else {
    /* trailers-only: nothing was sent (Connect streaming has none, but a
     * HEAD's answer is its head alone, RFC 9110 9.3.2) */
    int head = s->method && strcmp(s->method, "HEAD") == 0;
    int only =
        !s->submitted &&
        (head || (s->proto != kPc_WebProtocol_ConnectStream && pc_GrpcOutbox_Unsent(&s->out) == 0));
    if (only) pc_GrpcOutbox_Clear(&s->out);
    ok = s->submitted ? 1 : submit_headers(s, only, &size, &limit);
    /* gRPC-Web and Connect streaming end the body with their status */
    if (ok == 1 && s->proto != kPc_WebProtocol_Grpc && !only) ok = put_end(s);
  }
  if (ok != 1) {
    nghttp2_submit_rst_stream(s->c->h2.session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  resume(s);
}

/* A failure the engine found in a request: the call ends with 'code'
 * (the handler sees it cancelled) and the rest of its body is dropped. */
static void fail(pc_GrpcServerCall *s, pc_Code code, const char *fmt, ...) PC_GRPC_PRINTF(3, 4);

static void fail(pc_GrpcServerCall *s, pc_Code code, const char *fmt, ...) {
  char text[PC_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  size_t n = pc_Grpc_VFormat(text, sizeof text, fmt, ap);
  va_end(ap);
  s->cancelled = 1;
  s->ended = 1;
  pc_GrpcInbox_Clear(&s->in);
  pc_GrpcOutbox_Clear(&s->out);
  finish(s, code, text, n, NULL, 0);
  release_window(s);
  wake(s);
  if (s->c) share_room(s->c);
}

/* The response body: the framed messages, then (once Finish ran) the
 * trailers end the stream. */
static ssize_t response_body(void *ud, void *call, uint8_t *buf, size_t length,
                             uint32_t *data_flags) {
  pc_GrpcServerCall *s = call;
  (void)ud;
  ssize_t n = pc_GrpcOutbox_Pull(&s->out, buf, length, s->finished, data_flags);
  if (n > 0) wake(s); /* a sender waiting for room may go on */
  if (n != 0 || !(*data_flags & NGHTTP2_DATA_FLAG_EOF)) return n;
  if (s->proto != kPc_WebProtocol_Grpc) return 0; /* the status went in the body */
  *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
  size_t max = 4 + s->out_md[1].count;
  nghttp2_nv *h = pc_Arena_Malloc(s->arena, max * sizeof *h);
  size_t k = 0;
  if (h == NULL || !push_status(s, h, &k) || !push_pairs(s, &s->out_md[1], h, &k))
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  size_t size = block_size(h, k), limit = block_limit(s);
  if (size > limit) {
    k = 0;
    if (!cut_status(s, "trailers", size, limit, h, &k)) /* RST_STREAM INTERNAL_ERROR */
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (nghttp2_submit_trailer(s->c->h2.session, s->id, h, k) != 0)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return 0;
}

/* -- requests -------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  pc_GrpcServerConn *c = ud;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  if (c->held >= (size_t)c->max_streams * 2) {
    /* The driver still holds as many calls as two full connections. */
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                              NGHTTP2_REFUSED_STREAM);
    return 0;
  }
  pc_GrpcServerCall *s = pc_GrpcMem_Zalloc(&c->h2.m, sizeof *s);
  if (s == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  s->m = c->h2.m;
  s->c = c;
  s->id = frame->hd.stream_id;
  s->timeout = s->deadline = s->stall_from = -1;
  s->arena = pc_Arena_New(s->m.alloc, s->m.ud);
  if (s->arena == NULL || nghttp2_session_set_stream_user_data(session, s->id, s) != 0) {
    if (s->arena) pc_Arena_Free(s->arena);
    pc_GrpcMem_Alloc(&s->m, s, sizeof *s, 0);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  s->prev = c->last;
  if (c->last)
    c->last->next = s;
  else
    c->calls = s;
  c->last = s;
  c->held++;
  c->open++;
  return 0;
}

static int is(const uint8_t *p, size_t n, const char *k) {
  size_t kn = strlen(k);
  return n == kn && memcmp(p, k, kn) == 0;
}

/* Whether the comma-separated list 'v' ("identity, deflate, gzip") names
 * gzip. */
static int lists_gzip(const char *v, size_t valuelen) {
  for (size_t i = 0; i < valuelen;) {
    while (i < valuelen && (v[i] == ' ' || v[i] == ',')) i++;
    size_t j = i;
    while (j < valuelen && v[j] != ',' && v[j] != ' ') j++;
    if (j - i == 4 && memcmp(v + i, "gzip", 4) == 0) return 1;
    i = j;
  }
  return 0;
}

/* Keeps a copy of a header's value in '*slot'; 0 when the arena fails. */
static int keep(pc_GrpcServerCall *s, const char **slot, const char *v, size_t n) {
  *slot = pc_Arena_StrDup(s->arena, v, n);
  return *slot != NULL;
}

/* Adds a line of Access-Control-Request-Headers to the call's list, lines
 * sent twice joined as one list ("a, b": RFC 9110 5.3) in one buffer of
 * PC_WEB_CORS_MAX_REQUEST_HEADERS bytes (so many lines cost no more than
 * one); past that the list is over and none of it is echoed. 0 when the
 * arena fails. */
static int keep_cors_headers(pc_GrpcServerCall *s, const char *v, size_t n) {
  if (s->cors_over) return 1;
  size_t at = s->cors_headers ? s->cors_len + 2 : 0;
  if (at > PC_WEB_CORS_MAX_REQUEST_HEADERS || n > PC_WEB_CORS_MAX_REQUEST_HEADERS - at) {
    s->cors_over = 1;
    return 1;
  }
  if (s->cors_headers == NULL) {
    s->cors_headers = pc_Arena_Malloc(s->arena, PC_WEB_CORS_MAX_REQUEST_HEADERS + 1);
    if (s->cors_headers == NULL) return 0;
  } else {
    memcpy(s->cors_headers + s->cors_len, ", ", 2);
  }
  memcpy(s->cors_headers + at, v, n);
  s->cors_len = at + n;
  s->cors_headers[s->cors_len] = '\0';
  return 1;
}

static int on_header(void *ud, void *call, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, int over) {
  pc_GrpcServerCall *s = call;
  (void)ud;
  if (over) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* client trailers: ignored */
  const char *v = (const char *)value;
  if (is(name, namelen, ":path")) {
    s->path = pc_Arena_StrDup(s->arena, v, valuelen);
    return s->path ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (is(name, namelen, ":method"))
    return keep(s, &s->method, v, valuelen) ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (namelen > 0 && name[0] == ':') return 0;
  if (is(name, namelen, "content-type")) {
    s->content_type = pc_Arena_StrDup(s->arena, v, valuelen);
    return s->content_type ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (is(name, namelen, "grpc-encoding")) {
    s->encoding = pc_Arena_StrDup(s->arena, v, valuelen);
    return s->encoding ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (is(name, namelen, "grpc-timeout")) {
    s->timeout = pc_Grpc_ParseTimeout(v, valuelen);
    s->bad_timeout = NULL;
    if (s->timeout < 0) {
      s->bad_timeout = pc_Arena_StrDup(s->arena, v, valuelen);
      return s->bad_timeout ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
  }
  if (is(name, namelen, "grpc-accept-encoding")) {
    if (lists_gzip(v, valuelen)) s->accepts_gzip = 1;
    return 0;
  }
  if (is(name, namelen, "te")) return 0;
  if (is(name, namelen, "origin") && !keep(s, &s->origin, v, valuelen))
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (is(name, namelen, "access-control-request-method")) s->preflight = 1;
  if (is(name, namelen, "access-control-request-headers") && !keep_cors_headers(s, v, valuelen))
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  /* Connect's headers: metadata too (as for gRPC before), dropped from it
   * once the call is known to be Connect (web_request) */
  int ok = 1;
  if (is(name, namelen, "connect-timeout-ms"))
    ok = keep(s, &s->connect_timeout, v, valuelen);
  else if (is(name, namelen, "connect-protocol-version"))
    ok = keep(s, &s->connect_version, v, valuelen);
  else if (is(name, namelen, "content-encoding"))
    ok = keep(s, &s->content_encoding, v, valuelen);
  else if (is(name, namelen, "connect-content-encoding"))
    ok = keep(s, &s->connect_encoding, v, valuelen);
  else if (is(name, namelen, "accept-encoding"))
    s->accepts_gzip_http |= lists_gzip(v, valuelen);
  else if (is(name, namelen, "connect-accept-encoding"))
    s->accepts_gzip_connect |= lists_gzip(v, valuelen);
  if (!ok) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (!pc_GrpcPairs_Add(&s->md, s->arena, (const char *)name, namelen, v, valuelen, 1))
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return 0;
}

/* Whether the key 'k' of 'n' bytes is one of Connect's or gRPC-Web's own
 * headers rather than metadata. */
static int protocol_header(const pc_GrpcServerCall *s, const char *k, size_t n) {
  if (n == 14 && memcmp(k, "content-length", 14) == 0) return 1;
  if (s->proto == kPc_WebProtocol_GrpcWeb || s->proto == kPc_WebProtocol_GrpcWebText)
    return n == 10 && memcmp(k, "x-grpc-web", 10) == 0;
  if (n >= 8 && memcmp(k, "connect-", 8) == 0) return 1;
  return s->proto == kPc_WebProtocol_ConnectUnary &&
         ((n == 16 && memcmp(k, "content-encoding", 16) == 0) ||
          (n == 15 && memcmp(k, "accept-encoding", 15) == 0));
}

/* The headers of a gRPC-Web or Connect request: its protocol headers out
 * of the metadata, Connect's encoding, accepted encodings and timeout in
 * place of gRPC's, a Connect unary body's prefix (its length is written
 * at the end of the request: web.h). Returns 0 when the call failed. */
static int web_request(pc_GrpcServerCall *s) {
  size_t k = 0;
  for (size_t i = 0; i < s->md.count; i++)
    if (!protocol_header(s, s->md.items[i].key, s->md.items[i].key_len))
      s->md.items[k++] = s->md.items[i];
  s->md.count = k;
  s->eager = s->proto == kPc_WebProtocol_GrpcWebText || s->proto == kPc_WebProtocol_ConnectUnary;
  if (s->proto != kPc_WebProtocol_ConnectUnary && s->proto != kPc_WebProtocol_ConnectStream)
    return 1;
  int unary = s->proto == kPc_WebProtocol_ConnectUnary;
  s->encoding = unary ? s->content_encoding : s->connect_encoding;
  s->accepts_gzip = unary ? s->accepts_gzip_http : s->accepts_gzip_connect;
  s->timeout = -1;
  s->bad_timeout = NULL;
  /* a version of the protocol other than 1 is refused, as connect-go
   * refuses it (a GET gives its version as the query's connect=v1) */
  if (s->connect_version && strcmp(s->connect_version, "1") != 0 &&
      strcmp(pc_GrpcServerCall_HttpMethod(s), "GET") != 0) {
    fail(s, kPc_Code_InvalidArgument, "connect-protocol-version must be \"1\": got \"%.20s\"",
         s->connect_version);
    return 0;
  }
  if (s->connect_timeout) {
    s->timeout = pc_Connect_ParseTimeout(s->connect_timeout, strlen(s->connect_timeout));
    if (s->timeout < 0) {
      fail(s, kPc_Code_InvalidArgument, "Connect-Timeout-Ms '%.20s' is malformed (1 to 10 digits)",
           s->connect_timeout);
      return 0;
    }
  }
  if (s->encoding && strcmp(s->encoding, "identity") != 0 && strcmp(s->encoding, "gzip") != 0) {
    fail(s, kPc_Code_Unimplemented, "%s '%.40s' is not supported (identity, gzip)",
         unary ? "content-encoding" : "connect-content-encoding", s->encoding);
    return 0;
  }
  if (unary) {
    unsigned char prefix[5] = {s->encoding && strcmp(s->encoding, "gzip") == 0, 0, 0, 0, 0};
    int ok = pc_GrpcInbox_Append(&s->in, &s->m, prefix, 5);
    s->in.unconsumed -= 5; /* not from the client */
    if (!ok) {
      fail(s, kPc_Code_ResourceExhausted, "out of memory reading the request");
      return 0;
    }
  }
  return 1;
}

/* Whether the query of 'path' has the parameter connect=v1 (what tells a
 * Connect GET from a REST GET when the listener serves both). */
static int connect_query(const char *path) {
  const char *q = strchr(path ? path : "", '?');
  while (q) {
    q++;
    if (strncmp(q, "connect=v1", 10) == 0 && (q[10] == 0 || q[10] == '&')) return 1;
    q = strchr(q, '&');
  }
  return 0;
}

/* A Connect GET (web_http.h): its query (s->query) gives the codec and
 * the compression (as a POST's headers would); the message waits in
 * s->message for get_message. A bad query fails the call
 * invalid_argument (resource_exhausted past the receive limit). Returns
 * 0 when the call failed. */
static int connect_get(pc_GrpcServerCall *s) {
  const char *q = s->query ? s->query : "";
  pc_ConnectGet g;
  pc_Error err;
  pc_Error_Init(&err);
  int big;
  if (!pc_Connect_ParseGet(s->arena, q, strlen(q), s->c->max_receive, &g, &big, &err)) {
    fail(s, big ? kPc_Code_ResourceExhausted : kPc_Code_InvalidArgument, "Connect GET: %s",
         err.msg);
    return 0;
  }
  s->codec = g.codec;
  s->content_encoding = g.compression;
  s->message = g.message; /* the request, until get_message */
  s->message_len = g.message_len;
  return 1;
}

/* The message of a Connect GET into the request body, after the prefix
 * web_request wrote (its length goes in at the end of the stream,
 * unary_end, which a GET's HEADERS carry). Returns 0 when the call
 * failed. */
static int get_message(pc_GrpcServerCall *s) {
  size_t n = s->message_len;
  int ok = n == 0 || pc_GrpcInbox_Append(&s->in, &s->m, (const uint8_t *)s->message, n);
  s->in.unconsumed -= n; /* not flow-controlled: it came in the headers */
  s->message = NULL;
  s->message_len = 0;
  if (!ok) fail(s, kPc_Code_ResourceExhausted, "out of memory reading the request");
  return ok;
}

/* The checks of a request's headers once its protocol is known (a
 * Connect GET's query read too), its deadline from its timeout. Returns 0
 * when the call failed (answered: a malformed grpc-timeout, an unknown
 * grpc-encoding, a bad Connect GET query, ...). */
static int admit(pc_GrpcServerConn *c, pc_GrpcServerCall *s) {
  if (s->connect_get && !connect_get(s)) return 0;
  if (s->proto != kPc_WebProtocol_Grpc && s->proto != kPc_WebProtocol_Http && !web_request(s))
    return 0;
  if (s->connect_get && !get_message(s)) return 0;
  if (s->bad_timeout) {
    /* PROTOCOL-HTTP2.md: 1 to 8 digits and a unit; grpc-core answers a
     * value it cannot parse INTERNAL ("Error parsing 'grpc-timeout'
     * metadata") rather than run the call without a deadline; a plain
     * HTTP request's is the client's mistake (400, as the transcoder). */
    fail(s, s->proto == kPc_WebProtocol_Http ? kPc_Code_InvalidArgument : kPc_Code_Internal,
         "grpc-timeout '%.20s' is malformed (1 to 8 digits, then H, M, S, m, u or n)",
         s->bad_timeout);
    return 0;
  }
  if (s->encoding && strcmp(s->encoding, "identity") != 0 && strcmp(s->encoding, "gzip") != 0) {
    fail(s, kPc_Code_Unimplemented, "grpc-encoding '%.40s' is not supported (identity, gzip)",
         s->encoding);
    return 0;
  }
  if (s->timeout >= 0) {
    s->deadline = c->now + s->timeout;
    if (c->due < 0 || s->deadline < c->due) c->due = s->deadline;
  }
  return 1;
}

/* A request whose headers are complete: refused here (415, a malformed
 * grpc-timeout, an unknown grpc-encoding) or queued for the driver. */
static void request_ready(pc_GrpcServerConn *c, pc_GrpcServerCall *s) {
  const char *ct = s->content_type;
  size_t ctn = ct ? strlen(ct) : 0;
  /* A GET is Connect's when its query has connect=v1, or else unless REST
   * is on or its content type is another protocol's (405 below); a HEAD
   * is read as its GET, answered with the head alone (submit_unary) */
  int get =
      s->method != NULL && (strcmp(s->method, "GET") == 0 || strcmp(s->method, "HEAD") == 0) &&
      (connect_query(s->path) ||
       (!c->plain_http && pc_Web_Classify(s->method, ct, ctn, &s->codec) == kPc_WebProtocol_None));
  if (c->cors && s->preflight && s->method && strcmp(s->method, "OPTIONS") == 0) {
    answer_preflight(s);
    return;
  }
  s->preflight = 0;
  s->proto = get ? kPc_WebProtocol_ConnectUnary : pc_Web_Classify(s->method, ct, ctn, &s->codec);
  if (s->proto == kPc_WebProtocol_None && (c->plain_http || c->queue_unknown_types)) {
    s->proto = kPc_WebProtocol_Http;
    s->codec = kPc_WebCodec_Json;
  }
  /* Without plain_http such a call is queued for the driver's refusal
   * alone (refused, below), its body discarded: no prefix for a body
   * nobody reads, nothing allocated for it. */
  if (s->proto == kPc_WebProtocol_Http && c->plain_http) {
    s->eager = 1;
    unsigned char prefix[5] = {0, 0, 0, 0, 0};
    int ok = pc_GrpcInbox_Append(&s->in, &s->m, prefix, 5);
    s->in.unconsumed -= 5; /* not from the client */
    if (!ok) {
      fail(s, kPc_Code_ResourceExhausted, "out of memory reading the request");
      return;
    }
  }
  if (s->proto == kPc_WebProtocol_None) {
    /* connect-go lists what it takes in Accept-Post */
    nghttp2_nv h[10] = {
        PC_GRPC_NV(":status", "415"), PC_GRPC_NV("content-type", "text/plain"),
        PC_GRPC_NV("grpc-message", "content-type must be gRPC's, gRPC-Web's or Connect's"),
        PC_GRPC_NV("accept-post", PC_WEB_ACCEPT_POST)};
    size_t n = 4;
    push_cors_exposing(s, h, &n, "Accept-Post");
    s->finished = s->cancelled = 1;
    s->submitted = 1;
    nghttp2_submit_response(c->h2.session, s->id, h, n, NULL);
    return;
  }
  /* gRPC, gRPC-Web and Connect streaming take POST alone (a GET or HEAD
   * of Connect unary is a Connect GET), but a request by another method
   * is queued: the driver knows which paths name a method, whose answer
   * is 405 (pc_GrpcServerCall_NotAllowed, as connect-go), and an unknown
   * path's is the POST's (pc_GrpcServerCall_NotFound; a HEAD's without
   * its body, finish) */
  if (s->path == NULL) s->path = "";
  s->connect_get = get;
  if (get) {
    /* A Connect GET is queued with its query unread, its path cut before
     * it: connect-go checks the path (404, as its POST) and the method (a
     * method with side effects: 405) before the query, and the driver
     * knows which paths name a method that takes a GET
     * (pc_GrpcServerCall_ReadQuery runs admit) */
    char *q = strchr((char *)s->path, '?'); /* the arena's copy */
    if (q) *q++ = 0;
    s->query = q ? q : "";
    s->query_unread = 1;
    s->codec = kPc_WebCodec_Proto; /* until the query says */
  }
  if ((!get && s->proto != kPc_WebProtocol_Http && s->method && strcmp(s->method, "POST") != 0) ||
      (s->proto == kPc_WebProtocol_Http && !c->plain_http)) {
    s->refused = 1;
  } else if (!get && !admit(c, s)) {
    return;
  }
  s->queued = 1;
  c->waiting++;
}

/* -- requests still arriving ---------------------------------------------- */

/* A message above its stream window arrives only as its window is given
 * back before it is whole. The bytes the calls of a connection hold that
 * way are bounded by its incomplete_budget: a call whose message is still
 * arriving reserves the message's whole length (known from its prefix)
 * before its stream window is given back, so each reserved message can
 * complete; one that finds no room keeps its stream window, and its client
 * stalls on it. The connection window of a message still arriving is
 * always given back (as before): were it held, messages waiting for the
 * budget could take the whole connection window and starve the ones
 * holding it, and a client with many uploads at once would hang (nghttp2
 * sends the connection's WINDOW_UPDATE only once half of it was given
 * back). A connection then holds at most its budget and a stream window
 * per stream of request bytes, instead of max_receive per stream. A
 * reservation lasts until its message is read (or the call ends); one call
 * holds at most one. */

/* Gives the call's reservation back; returns whether it held one. */
static int unreserve(pc_GrpcServerCall *s) {
  if (s->res == 0) return 0;
  if (s->c) {
    s->c->reserved -= s->res;
    s->c->room = 1;
  }
  s->res = s->res_to = 0;
  return 1;
}

/* Gives 'n' of the call's unconsumed bytes back to flow control; the ones
 * already given to the connection ('ahead') go back to the stream alone. */
static void give(pc_GrpcServerCall *s, nghttp2_session *h2, size_t n) {
  size_t ahead = n < s->ahead ? n : s->ahead;
  if (ahead > 0) nghttp2_session_consume_stream(h2, s->id, ahead);
  if (n > ahead) nghttp2_session_consume(h2, s->id, n - ahead);
  s->ahead -= ahead;
  s->in.unconsumed -= n;
}

/* The stream closes or is detached: what it gave the connection already
 * is not owed again (pc_GrpcInbox_Closed gives the rest). */
static void drop_ahead(pc_GrpcServerCall *s) {
  s->in.unconsumed -= s->ahead;
  s->ahead = 0;
}

/* Gives back to flow control what the call need not hold: whole unread
 * messages wait for their reader (the window opens as they are read), a
 * message still arriving is given back once it holds a reservation, and
 * until then to the connection alone; a call that is over gives back
 * everything and its reservation. */
/* While a message is still arriving ('partial'), the client may send the
 * rest: its stall timer starts (again), and the connection's next scan
 * comes no later than its end (pc_GrpcServerConn_Expire). */
static void stall_timer(pc_GrpcServerCall *s, int partial) {
  pc_GrpcServerConn *c = s->c;
  if (!partial || c->stall_timeout <= 0) return;
  s->stall_from = c->now;
  double end = c->now + c->stall_timeout;
  if (c->due < 0 || end < c->due) c->due = end;
}

/* A body decoded on arrival (gRPC-Web-Text, Connect unary: eager_chunk)
 * owes flow control its raw bytes, and its message still arriving
 * reserves the budget as a gRPC message does: gRPC-Web-Text the length its
 * decoded prefix gives, Connect unary (no prefix: the body is one message,
 * whole at the end of the request) the most it may be, max_receive and
 * its prefix. With a reservation, or no message still arriving, its bytes
 * go back to flow control at once; without one the stream's window is
 * held (its client stalls on it), the connection's given back. */
static void eager_window(pc_GrpcServerCall *s, nghttp2_session *h2) {
  pc_GrpcServerConn *c = s->c;
  size_t partial = pc_GrpcInbox_Partial(&s->in);
  if (s->res == 0 && partial > 0) {
    size_t need = s->proto == kPc_WebProtocol_ConnectUnary ? c->max_receive + 5
                                                           : pc_GrpcInbox_Expected(&s->in);
    if (need > 0 && need <= c->budget - c->reserved) {
      s->res = need; /* res_to 0: the next message read gives it back */
      c->reserved += need;
    }
  }
  if (s->res > 0 || partial == 0) {
    give(s, h2, s->in.unconsumed);
  } else if (s->in.unconsumed > s->ahead) {
    nghttp2_session_consume_connection(h2, s->in.unconsumed - s->ahead);
    s->ahead = s->in.unconsumed;
  }
}

static void release_window(pc_GrpcServerCall *s) {
  pc_GrpcServerConn *c = s->c;
  pc_GrpcInbox *b = &s->in;
  nghttp2_session *h2 = live(s);
  if (s->cancelled || h2 == NULL) {
    unreserve(s);
    if (h2) give(s, h2, b->unconsumed);
    return;
  }
  size_t unread = b->buf.len - b->rpos, whole = b->scan - b->rpos;
  if (s->eager) {
    eager_window(s, h2);
    stall_timer(s, unread > whole);
    return;
  }
  if (s->res == 0 && unread > whole) {
    size_t need = pc_GrpcInbox_Expected(b);
    if (need > 0 && need <= c->budget - c->reserved) {
      s->res = need;
      s->res_to = whole + need;
      c->reserved += need;
    }
  }
  size_t covered = 0, waiting = 0;
  if (s->res > 0) {
    size_t start = s->res_to - s->res, end = s->res_to < unread ? s->res_to : unread;
    covered = end > start ? end - start : 0;
  } else {
    waiting = unread - whole;
  }
  if (b->unconsumed > unread - covered) give(s, h2, b->unconsumed - (unread - covered));
  if (waiting > b->unconsumed) waiting = b->unconsumed;
  if (waiting > s->ahead) {
    nghttp2_session_consume_connection(h2, waiting - s->ahead);
    s->ahead = waiting;
  }
  stall_timer(s, unread > whole);
}

/* The budget has room again: calls whose message waits for it take it in
 * turn, oldest first. */
static void share_room(pc_GrpcServerConn *c) {
  if (!c->room) return;
  c->room = 0;
  for (pc_GrpcServerCall *t = c->calls; t && c->reserved < c->budget; t = t->next)
    if (t->res == 0 && !t->cancelled && live(t) && pc_GrpcInbox_Partial(&t->in) > 0)
      release_window(t);
}

/* Whether the client could send the rest of a message it started and does
 * not: the windows of the call's stream and of the connection are open. A
 * message held up by the engine (whole messages unread, no room in the
 * budget) does not stall. */
static int stalled(pc_GrpcServerCall *s) {
  if (s->finished || s->cancelled || s->remote_ended || live(s) == NULL ||
      pc_GrpcInbox_Partial(&s->in) == 0)
    return 0;
  nghttp2_session *h2 = s->c->h2.session;
  return nghttp2_session_get_stream_local_window_size(h2, s->id) > 0 &&
         nghttp2_session_get_local_window_size(h2) > 0;
}

/* A request message that could not be read fails the call: INTERNAL for
 * a body that is not gzip as gRPC says, invalid_argument over Connect (a
 * client's bad input, as connect-go answers it). */
static void fail_read(pc_GrpcServerCall *s, pc_GrpcRead r) {
  char text[PC_ERROR_MAX];
  pc_Code code =
      pc_GrpcInbox_Failure(&s->in, r, s->c->max_receive, "request", "the limit", text, sizeof text);
  if (r == kPc_GrpcRead_NotGzip &&
      (s->proto == kPc_WebProtocol_ConnectUnary || s->proto == kPc_WebProtocol_ConnectStream))
    code = kPc_Code_InvalidArgument;
  fail(s, code, "%s", text);
}

/* The request ended inside a message: INTERNAL over gRPC and gRPC-Web,
 * invalid_argument over Connect streaming in connect-go's words (its
 * envelopeReader: a client's bad input). */
static void ended_inside(pc_GrpcServerCall *s) {
  size_t left = pc_GrpcInbox_Partial(&s->in);
  if (s->proto != kPc_WebProtocol_ConnectStream) {
    fail(s, kPc_Code_Internal, "request ended inside a message (%zu bytes left over)", left);
    return;
  }
  if (left < 5) {
    fail(s, kPc_Code_InvalidArgument, "protocol error: incomplete envelope: unexpected EOF");
    return;
  }
  const unsigned char *h = (const unsigned char *)s->in.buf.p + s->in.scan;
  unsigned long promised =
      ((unsigned long)h[1] << 24) | ((unsigned long)h[2] << 16) | ((unsigned long)h[3] << 8) | h[4];
  fail(s, kPc_Code_InvalidArgument,
       "protocol error: promised %lu bytes in enveloped message, got %zu bytes", promised,
       left - 5);
}

/* Checks each length prefix and flag as soon as they are here; a request
 * over the limit fails before its body arrives. */
static void scan_messages(pc_GrpcServerCall *s) {
  int gzip = s->encoding != NULL && strcmp(s->encoding, "gzip") == 0;
  int whole;
  pc_GrpcRead r = pc_GrpcInbox_Scan(&s->in, s->c->max_receive, gzip, &whole);
  if (whole > 0) wake(s);
  if (r == kPc_GrpcRead_Compressed)
    fail(s, kPc_Code_Internal, "request message is compressed but grpc-encoding is not gzip");
  else if (r != kPc_GrpcRead_Ok)
    fail_read(s, r);
}

/* A DATA chunk of a gRPC-Web-Text or Connect unary request: base64 is
 * decoded as it comes, a unary body waits for its end (unary_end); the
 * bytes a call holds are bounded by the receive limit, its window goes
 * back as the incomplete budget allows (eager_window: the raw bytes are
 * counted unconsumed here, the decoded ones are not). */
static void eager_chunk(pc_GrpcServerCall *s, const uint8_t *data, size_t len) {
  s->in.unconsumed += len;
  size_t max = s->c->max_receive;
  if (whole_body(s)) {
    if (s->in.buf.len - 5 + len > max) {
      s->too_large = s->proto == kPc_WebProtocol_Http;
      /* (REST's body is the request, not a message of one) */
      fail(s, kPc_Code_ResourceExhausted,
           "request %s of at least %zu bytes exceeds the limit of %zu bytes",
           s->too_large ? "body" : "message", s->in.buf.len - 5 + len, max);
      return;
    }
    int ok = len == 0 || pc_GrpcInbox_Append(&s->in, &s->m, data, len);
    s->in.unconsumed -= len; /* counted above (Append counts it, whether or not it fails) */
    if (!ok) fail(s, kPc_Code_ResourceExhausted, "out of memory reading the request");
    return;
  }
  enum { PIECE = 4096 }; /* base64 characters decoded at a time */
  unsigned char out[PIECE / 4 * 3 + 3];
  while (len > 0 && !s->cancelled) {
    size_t n = len < PIECE ? len : PIECE, at = 0;
    size_t got = pc_WebBase64_Decode(&s->b64, (const char *)data, n, out, &at);
    if (got == (size_t)-1) {
      fail(s, kPc_Code_Internal,
           "grpc-web-text request body is not base64: byte 0x%02x at offset %zu", data[at],
           s->b64_seen + at);
      return;
    }
    s->b64_seen += n;
    data += n;
    len -= n;
    if (s->in.buf.len - s->in.rpos + got > max + 5) {
      fail(s, kPc_Code_ResourceExhausted,
           "request messages of more than %zu bytes wait unread (the limit of %zu bytes)",
           s->in.buf.len - s->in.rpos + got, max + 5);
      return;
    }
    int ok = got == 0 || pc_GrpcInbox_Append(&s->in, &s->m, out, got);
    s->in.unconsumed -= got;
    if (!ok) {
      fail(s, kPc_Code_ResourceExhausted, "out of memory reading the request");
      return;
    }
    scan_messages(s);
  }
}

/* The end of a Connect unary request: its body is the message, whose
 * prefix gets the length now. */
static void unary_end(pc_GrpcServerCall *s) {
  pc_GrpcInbox *b = &s->in;
  if (b->buf.len - b->scan < 5) return;
  size_t n = b->buf.len - b->scan - 5;
  unsigned char *h = (unsigned char *)b->buf.p + b->scan;
  h[1] = (unsigned char)(n >> 24);
  h[2] = (unsigned char)(n >> 16);
  h[3] = (unsigned char)(n >> 8);
  h[4] = (unsigned char)n;
  scan_messages(s);
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud) {
  (void)flags;
  (void)ud;
  pc_GrpcServerCall *s = call_of(session, id);
  if (s == NULL || s->cancelled || s->finished || s->refused) {
    nghttp2_session_consume(session, id, len);
    return 0;
  }
  if (s->connect_get && len > 0) {
    /* the URL is what a cache keys the answer on: a body must not change
     * it (refused once the driver reads the query: its path and method
     * come first) */
    nghttp2_session_consume(session, id, len);
    if (s->query_unread)
      s->get_body = 1;
    else
      fail(s, kPc_Code_InvalidArgument, "Connect GET: a GET carries no request body");
    return 0;
  }
  if (s->eager)
    eager_chunk(s, data, len);
  else if (!pc_GrpcInbox_Append(&s->in, &s->m, data, len))
    fail(s, kPc_Code_ResourceExhausted, "out of memory reading the request");
  else
    scan_messages(s);
  release_window(s);
  share_room(s->c);
  return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  pc_GrpcServerConn *c = ud;
  switch (frame->hd.type) {
  case NGHTTP2_PING:
  case NGHTTP2_SETTINGS:
    if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) &&
        !take_token(&c->controls, c->control_burst, c->control_rate, c->now))
      calm(c, "too many SETTINGS and PING frames");
    return 0;
  case NGHTTP2_RST_STREAM:
    if (!take_token(&c->resets, c->reset_burst, c->reset_rate, c->now))
      calm(c, "too many streams reset by the client");
    return 0;
  case NGHTTP2_HEADERS:
  case NGHTTP2_DATA: break;
  default: return 0;
  }
  pc_GrpcServerCall *s = call_of(session, frame->hd.stream_id);
  if (s == NULL) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
    request_ready(c, s);
  if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
    s->remote_ended = 1;
    wake(s);
    if (!s->cancelled && s->queued + s->accepted > 0 && whole_body(s)) unary_end(s);
    if (!s->cancelled && pc_WebBase64_Pending(&s->b64) > 0)
      fail(s, kPc_Code_Internal,
           "grpc-web-text request ended inside a base64 group (%zu characters left over)",
           pc_WebBase64_Pending(&s->b64));
    if (!s->cancelled && pc_GrpcInbox_Partial(&s->in) > 0) ended_inside(s);
  }
  return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  (void)ud;
  /* gRPC ends with HEADERS, gRPC-Web and Connect with DATA (their status
   * is in the body) */
  if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
      !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    return 0;
  pc_GrpcServerCall *s = call_of(session, frame->hd.stream_id);
  /* The response is complete while the client still sends: stop it. */
  if (s && !s->remote_ended)
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
  return 0;
}

/* A header block nghttp2 could not send (over one of its limits) would
 * leave its stream open forever: reset it. */
static int on_frame_not_sent(nghttp2_session *session, const nghttp2_frame *frame, int why,
                             void *ud) {
  (void)ud;
  pc_GrpcServerCall *s = call_of(session, frame->hd.stream_id);
  if (frame->hd.type == NGHTTP2_HEADERS && s && !s->closed && why != NGHTTP2_ERR_STREAM_CLOSED &&
      why != NGHTTP2_ERR_STREAM_CLOSING && why != NGHTTP2_ERR_SESSION_CLOSING)
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
  return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *ud) {
  (void)code;
  (void)ud;
  pc_GrpcServerCall *s = call_of(session, id);
  if (s == NULL) return 0;
  mark_closed(s);
  drop_ahead(s);
  pc_GrpcInbox_Closed(&s->in, session);
  if (!s->finished) s->cancelled = 1;
  unreserve(s);
  wake(s);
  share_room(s->c);
  nghttp2_session_set_stream_user_data(session, id, NULL);
  if (!s->accepted) free_call(s);
  return 0;
}

/* The server's side of the session. */
static const pc_GrpcSessionRole server = {.server = 1,
                                          .begin_headers = on_begin_headers,
                                          .header = on_header,
                                          .body = response_body,
                                          .nghttp2 = {.data_chunk = on_data_chunk,
                                                      .frame_recv = on_frame_recv,
                                                      .frame_send = on_frame_send,
                                                      .frame_not_sent = on_frame_not_sent,
                                                      .stream_close = on_stream_close}};

/* -- connection ------------------------------------------------------------ */

static void cancel_all(pc_GrpcServerConn *c) {
  pc_GrpcServerCall *s = c->calls;
  while (s) {
    pc_GrpcServerCall *next = s->next;
    s->cancelled = 1;
    wake(s);
    if (!s->accepted) {
      if (!s->closed) nghttp2_session_set_stream_user_data(c->h2.session, s->id, NULL);
      mark_closed(s);
      free_call(s);
    }
    s = next;
  }
}

static void check_dead(pc_GrpcServerConn *c) {
  if (c->h2.dead || pc_GrpcSession_Unsent(&c->h2) > 0) return;
  /* A broken session has nothing left to say once its output is out. */
  if (!c->broken &&
      (nghttp2_session_want_read(c->h2.session) || nghttp2_session_want_write(c->h2.session)))
    return;
  c->h2.dead = 1;
  set_why(c, "the connection ended");
  cancel_all(c);
}

pc_GrpcServerConn *pc_GrpcServerConn_New(const pc_GrpcServerOptions *o, pc_Alloc *alloc, void *ud,
                                         pc_Error *err) {
  pc_GrpcServerConn *c = pc_GrpcSession_New(&server, alloc, ud, sizeof *c, err);
  if (c == NULL) return NULL;
  c->max_streams =
      o->max_concurrent_streams ? o->max_concurrent_streams : PC_GRPC_SERVER_DEFAULT_MAX_STREAMS;
  c->max_receive = o->max_receive ? o->max_receive : PC_GRPC_DEFAULT_MAX_RECEIVE;
  c->max_header_list =
      o->max_header_list ? o->max_header_list : PC_GRPC_SERVER_DEFAULT_MAX_HEADER_LIST;
  c->reset_burst = o->reset_burst ? o->reset_burst : PC_GRPC_SERVER_DEFAULT_RESET_BURST;
  c->reset_rate = o->reset_rate ? o->reset_rate : PC_GRPC_SERVER_DEFAULT_RESET_RATE;
  c->control_burst = o->control_burst ? o->control_burst : PC_GRPC_SERVER_DEFAULT_CONTROL_BURST;
  c->control_rate = o->control_rate ? o->control_rate : PC_GRPC_SERVER_DEFAULT_CONTROL_RATE;
  c->budget = o->incomplete_budget   ? o->incomplete_budget
              : o->connection_window ? o->connection_window
                                     : PC_GRPC_DEFAULT_CONNECTION_WINDOW;
  if (c->budget < c->max_receive + 5) c->budget = c->max_receive + 5;
  c->stall_timeout = o->stall_timeout ? o->stall_timeout : PC_GRPC_SERVER_DEFAULT_STALL_TIMEOUT;
  c->plain_http = o->plain_http;
  c->queue_unknown_types = o->queue_unknown_types;
  c->wake = o->wake;
  c->cors = o->cors;
  c->due = -1;
  pc_GrpcSessionSettings set = {.max_streams = c->max_streams,
                                .stream_window = o->stream_window,
                                .connection_window = o->connection_window,
                                .max_header_list = c->max_header_list};
  if (pc_GrpcSession_Start(&c->h2, &set, err)) return c;
  pc_GrpcServerConn_Free(c);
  return NULL;
}

void pc_GrpcServerConn_Free(pc_GrpcServerConn *c) {
  if (c == NULL) return;
  if (c->h2.session) cancel_all(c);
  for (pc_GrpcServerCall *s = c->calls; s; s = s->next) {
    if (!s->closed && c->h2.session)
      nghttp2_session_set_stream_user_data(c->h2.session, s->id, NULL);
    s->closed = 1;
    s->cancelled = 1;
    s->c = NULL;
  }
  if (c->why && c->why != why_no_memory) pc_GrpcMem_Alloc(&c->h2.m, c->why, strlen(c->why) + 1, 0);
  pc_GrpcSession_Free(&c->h2, sizeof *c);
}

int pc_GrpcServerConn_Recv(pc_GrpcServerConn *c, const void *data, size_t len, double now) {
  if (c->h2.dead || c->broken) return 0;
  c->now = now;
  char said[PC_ERROR_MAX];
  if (!pc_GrpcSession_Recv(&c->h2, data, len, said, sizeof said)) {
    c->broken = 1;
    set_why(c, "HTTP/2: %s", said);
    /* nghttp2 queued a GOAWAY for most errors: _Output lets it out. */
    return 0;
  }
  check_dead(c);
  return !c->h2.dead;
}

size_t pc_GrpcServerConn_Output(pc_GrpcServerConn *c, const char **data) {
  char why[PC_ERROR_MAX];
  if (!pc_GrpcSession_Fill(&c->h2, why, sizeof why)) {
    set_why(c, "%s", why);
    cancel_all(c);
  }
  if (c->open == 0) pc_GrpcSession_Rest(&c->h2);
  if (pc_GrpcSession_Unsent(&c->h2) == 0) check_dead(c);
  return pc_GrpcSession_Output(&c->h2, data);
}

void pc_GrpcServerConn_Wrote(pc_GrpcServerConn *c, size_t n) {
  pc_GrpcSession_Wrote(&c->h2, n);
  check_dead(c);
}

int pc_GrpcServerConn_Alive(const pc_GrpcServerConn *c) {
  return !c->h2.dead;
}

const char *pc_GrpcServerConn_Why(const pc_GrpcServerConn *c) {
  return c->why ? c->why : "";
}

void pc_GrpcServerConn_Lost(pc_GrpcServerConn *c) {
  if (c->h2.dead) return;
  c->h2.dead = 1;
  set_why(c, "the connection was lost");
  cancel_all(c);
}

void pc_GrpcServerConn_Shutdown(pc_GrpcServerConn *c) {
  if (c->h2.dead || c->goaway) return;
  c->goaway = 1;
  nghttp2_submit_goaway(c->h2.session, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(c->h2.session), NGHTTP2_NO_ERROR,
                        NULL, 0);
}

size_t pc_GrpcServerConn_Running(const pc_GrpcServerConn *c) {
  return c->open;
}

/* Ends a call whose request message stalled for the stall timeout. */
static void fail_stalled(pc_GrpcServerCall *s) {
  size_t have = pc_GrpcInbox_Partial(&s->in), need = pc_GrpcInbox_Expected(&s->in);
  double t = s->c->stall_timeout;
  if (whole_body(s)) /* its prefix is the engine's placeholder, not the client's */
    fail(s, kPc_Code_ResourceExhausted,
         "request message stalled: %zu byte%s of the body arrived, then nothing for %g s", have - 5,
         have - 5 == 1 ? "" : "s", t);
  else if (need > 0)
    fail(s, kPc_Code_ResourceExhausted,
         "request message stalled: %zu of %zu bytes arrived, then nothing for %g s", have, need, t);
  else
    fail(s, kPc_Code_ResourceExhausted,
         "request message stalled: %zu bytes of its 5-byte prefix arrived, then nothing for %g s",
         have, t);
}

double pc_GrpcServerConn_Expire(pc_GrpcServerConn *c, double now) {
  c->now = now;
  /* Nothing is due before 'due' (a lower bound of the deadlines and stall
   * timers): no scan of every call each round. */
  if (c->due < 0 || now < c->due) return c->due;
  for (pc_GrpcServerCall *s = c->calls; s; s = s->next) {
    if (s->finished || s->closed) continue;
    if (s->deadline >= 0 && now >= s->deadline) {
      s->cancelled = s->ended = 1;
      pc_GrpcOutbox_Clear(&s->out);
      finish(s, kPc_Code_DeadlineExceeded, "deadline exceeded", 17, NULL, 0);
      release_window(s);
      wake(s);
      share_room(c);
    } else if (c->stall_timeout > 0 && stalled(s)) {
      if (s->stall_from < 0) s->stall_from = now;
      if (now >= s->stall_from + c->stall_timeout) fail_stalled(s);
    } else {
      s->stall_from = -1;
    }
  }
  /* A call that ended above may have made room for one seen before it. */
  double next = -1;
  for (pc_GrpcServerCall *s = c->calls; s; s = s->next) {
    if (s->finished || s->closed) continue;
    double due = s->deadline;
    if (c->stall_timeout > 0 && stalled(s)) {
      if (s->stall_from < 0) s->stall_from = now;
      double stall = s->stall_from + c->stall_timeout;
      if (due < 0 || stall < due) due = stall;
    }
    if (due >= 0 && (next < 0 || due < next)) next = due;
  }
  c->due = next;
  return next;
}

pc_GrpcServerCall *pc_GrpcServerConn_Accept(pc_GrpcServerConn *c) {
  if (c->waiting == 0) return NULL; /* no scan of the calls held */
  for (pc_GrpcServerCall *s = c->calls; s; s = s->next) {
    if (!s->queued) continue;
    s->queued = 0;
    c->waiting--;
    s->accepted = 1;
    return s;
  }
  return NULL;
}

/* -- calls ----------------------------------------------------------------- */

const char *pc_GrpcServerCall_Path(const pc_GrpcServerCall *s) {
  return s->path;
}

double pc_GrpcServerCall_Timeout(const pc_GrpcServerCall *s) {
  return s->timeout;
}

double pc_GrpcServerCall_Deadline(const pc_GrpcServerCall *s) {
  return s->deadline;
}

size_t pc_GrpcServerCall_MetadataCount(const pc_GrpcServerCall *s) {
  return s->md.count;
}

const pc_GrpcPair *pc_GrpcServerCall_Metadata(const pc_GrpcServerCall *s, size_t i) {
  return i < s->md.count ? &s->md.items[i] : NULL;
}

int pc_GrpcServerCall_Next(pc_GrpcServerCall *s, const char **data, size_t *len) {
  if (s->cancelled || s->c == NULL) return -1;
  pc_GrpcInbox_Drop(&s->in);
  if (pc_GrpcInbox_Ready(&s->in)) {
    size_t before = s->in.rpos;
    pc_GrpcRead r =
        pc_GrpcInbox_Take(&s->in, &s->m, s->c->max_receive, data, len, &s->last_compressed);
    size_t taken = s->in.rpos - before;
    if (s->res > 0 && s->res_to <= taken)
      unreserve(s); /* the message it covered was read */
    else if (s->res > 0)
      s->res_to -= taken;
    release_window(s);
    share_room(s->c);
    if (r == kPc_GrpcRead_Ok) return 1;
    fail_read(s, r);
    return -1;
  }
  return s->remote_ended || s->closed ? -1 : 0;
}

pc_WebProtocol pc_GrpcServerCall_Protocol(const pc_GrpcServerCall *s) {
  return s->proto;
}

pc_WebCodec pc_GrpcServerCall_Codec(const pc_GrpcServerCall *s) {
  return s->codec;
}

void pc_GrpcServerCall_SetHttp1(pc_GrpcServerCall *s) {
  s->http1 = 1;
}

const char *pc_GrpcServerCall_HttpMethod(const pc_GrpcServerCall *s) {
  return s->method ? s->method : "POST";
}

int pc_GrpcServerCall_ReadQuery(pc_GrpcServerCall *s) {
  if (!s->query_unread) return !s->cancelled && !s->finished && s->c != NULL;
  s->query_unread = 0;
  if (s->cancelled || s->finished || s->c == NULL || s->closed) return 0;
  if (s->get_body) {
    fail(s, kPc_Code_InvalidArgument, "Connect GET: a GET carries no request body");
    return 0;
  }
  if (!admit(s->c, s)) return 0;
  /* its HEADERS ended the stream before: the message is whole now */
  if (s->remote_ended) unary_end(s);
  return !s->cancelled;
}

/* Answers 's' with 'status' (405, or 204 for an OPTIONS) and "Allow:
 * 'allow'", no body. */
static void answer_allow(pc_GrpcServerCall *s, const char *status, const char *allow) {
  if (s->finished || s->submitted || s->c == NULL || s->closed) return;
  nghttp2_nv h[8];
  size_t n = 0;
  h[n++] = PC_GRPC_NV(":status", status);
  h[n++] = PC_GRPC_NV("allow", allow);
  /* (no body: a HEAD's answer over HTTP/1.1 says so as the GET's does; a
   * 204 has no length, RFC 9110 8.6) */
  if (strcmp(status, "204") != 0) h[n++] = PC_GRPC_NV("content-length", "0");
  push_cors_exposing(s, h, &n, "Allow");
  s->finished = s->cancelled = s->ended = 1;
  s->submitted = 1;
  pc_GrpcInbox_Clear(&s->in);
  if (nghttp2_submit_response(s->c->h2.session, s->id, h, n, NULL) != 0)
    nghttp2_submit_rst_stream(s->c->h2.session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
}

void pc_GrpcServerCall_NotAllowed(pc_GrpcServerCall *s, const char *allow) {
  answer_allow(s, "405", allow);
}

void pc_GrpcServerCall_AnswerOptions(pc_GrpcServerCall *s, const char *allow) {
  answer_allow(s, "204", allow);
}

int pc_GrpcServerCall_HttpVersion(const pc_GrpcServerCall *s) {
  return s->http1 ? 1 : 2;
}

const char *pc_GrpcServerCall_ContentType(const pc_GrpcServerCall *s) {
  return s->content_type;
}

int pc_GrpcServerCall_SetHttp(pc_GrpcServerCall *s) {
  if (s->proto == kPc_WebProtocol_ConnectUnary && !s->submitted && !s->finished) {
    s->proto = kPc_WebProtocol_Http;
    s->gzip_out = 0;
  }
  return s->proto == kPc_WebProtocol_Http;
}

/* Whether 'p' of 'n' bytes is a lowercase header name (an RFC 9110 token). */
static int header_name(const char *p, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)p[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch)) ||
        ch == 0)
      return 0;
  }
  return 1;
}

int pc_GrpcServerCall_Respond(pc_GrpcServerCall *s, int status, const pc_GrpcPair *h, size_t n,
                              pc_Error *err) {
  if (s->proto != kPc_WebProtocol_Http) {
    pc_Error_Set(err, "not a plain HTTP call");
    return 0;
  }
  if (s->submitted || s->finished || s->cancelled || s->c == NULL || s->closed) {
    pc_Error_Set(err, s->submitted ? "the response head was sent already" : "the call is over");
    return 0;
  }
  if (status < 200 || status > 599) {
    pc_Error_Set(err, "HTTP status %d out of 200..599", status);
    return 0;
  }
  nghttp2_nv *nv = pc_Arena_Malloc(s->arena, (n + 5) * sizeof *nv); /* + CORS's 4 */
  char *code = pc_Arena_Malloc(s->arena, 8);
  if (nv == NULL || code == NULL) {
    pc_Error_Set(err, "out of memory");
    return 0;
  }
  snprintf(code, 8, "%d", status);
  nv[0] = PC_GRPC_NV(":status", code);
  for (size_t i = 0; i < n; i++) {
    if (!header_name(h[i].key, h[i].key_len)) {
      pc_Error_Set(err, "header %zu: '%.*s' is not a lowercase header name", i + 1,
                   (int)(h[i].key_len > 60 ? 60 : h[i].key_len), h[i].key);
      return 0;
    }
    /* RFC 9110's field-value: visible bytes, obs-text, SP and HTAB (no
     * other control byte: CR and LF would split the header, and HTTP/1
     * clients refuse or mangle the rest) */
    for (size_t k = 0; k < h[i].value_len; k++) {
      unsigned char ch = (unsigned char)h[i].value[k];
      if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
        pc_Error_Set(err, "header '%.*s': value holds control byte 0x%02x",
                     (int)(h[i].key_len > 60 ? 60 : h[i].key_len), h[i].key, ch);
        return 0;
      }
    }
    nv[i + 1] = (nghttp2_nv){(uint8_t *)h[i].key, (uint8_t *)h[i].value, h[i].key_len,
                             h[i].value_len, NGHTTP2_NV_FLAG_NONE};
  }
  size_t count = n + 1;
  /* a 415's Accept-Post and a 405's Allow (rpc/rest.lua's) are for the
   * page's script too (the names are lowercase: checked above) */
  const char *extra = NULL;
  for (size_t i = 0; i < n && extra == NULL; i++) {
    if (h[i].key_len == 11 && memcmp(h[i].key, "accept-post", 11) == 0) extra = "Accept-Post";
    if (h[i].key_len == 5 && memcmp(h[i].key, "allow", 5) == 0) extra = "Allow";
  }
  push_cors_exposing(s, nv, &count, extra);
  if (block_size(nv, count) > block_limit(s)) {
    pc_Error_Set(err, "response headers of %zu bytes exceed the limit of %zu bytes",
                 block_size(nv, count), block_limit(s));
    return 0;
  }
  nghttp2_data_provider prd = pc_GrpcSession_Body();
  if (nghttp2_submit_response(s->c->h2.session, s->id, nv, count, &prd) != 0) {
    pc_Error_Set(err, "nghttp2 refused the response head");
    return 0;
  }
  s->submitted = 1;
  resume(s);
  return 1;
}

void pc_GrpcServerCall_Release(pc_GrpcServerCall *s) {
  pc_GrpcInbox_FreeMessage(&s->in, &s->m);
}

int pc_GrpcServerCall_Cancelled(const pc_GrpcServerCall *s) {
  return s->cancelled || s->c == NULL;
}

int pc_GrpcServerCall_AddMetadata(pc_GrpcServerCall *s, int trailers, const pc_GrpcPair *p,
                                  pc_Error *err) {
  if (!pc_GrpcPair_Check(p, err)) return 0;
  if (s->finished || (!trailers && s->submitted)) {
    pc_Error_Set(err, "%s already sent", trailers ? "trailers" : "headers");
    return 0;
  }
  if (!pc_GrpcPairs_Add(&s->out_md[trailers ? 1 : 0], s->arena, p->key, p->key_len, p->value,
                        p->value_len, 0)) {
    pc_Error_Set(err, "out of memory");
    return 0;
  }
  return 1;
}

int pc_GrpcServerCall_SetPushback(pc_GrpcServerCall *s, long long ms) {
  static const char key[] = "grpc-retry-pushback-ms";
  char value[24];
  if (s->finished) return 0;
  int n = snprintf(value, sizeof value, "%lld",
                   ms < 0           ? -1LL
                   : ms > INT32_MAX ? (long long)INT32_MAX
                                    : ms);
  return pc_GrpcPairs_Add(&s->out_md[1], s->arena, key, sizeof key - 1, value, (size_t)n, 0);
}

/* Queues one response message as the call's protocol frames it: a
 * length-prefixed message (in base64 for gRPC-Web-Text), or for Connect
 * unary the message alone (gzipped whole), sent with the status. */
static int send_message(pc_GrpcServerCall *s, const void *msg, size_t len) {
  if (s->proto == kPc_WebProtocol_Http) return put_body(s, msg, len);
  if (s->proto == kPc_WebProtocol_Grpc || s->proto == kPc_WebProtocol_GrpcWeb ||
      s->proto == kPc_WebProtocol_ConnectStream)
    return pc_GrpcOutbox_Frame(&s->out, &s->m, msg, len, s->gzip_out);
  pc_GrpcBuf b = {0};
  int ok = pc_Grpc_FrameMessage(s->m.alloc, s->m.ud, &b, msg, len, s->gzip_out);
  if (ok && s->proto == kPc_WebProtocol_ConnectUnary)
    ok = put_body(s, b.p + 5, b.len - 5);
  else if (ok)
    ok = put_body(s, b.p, b.len);
  pc_GrpcBuf_Free(s->m.alloc, s->m.ud, &b);
  return ok;
}

int pc_GrpcServerCall_Send(pc_GrpcServerCall *s, const void *msg, size_t len) {
  if (s->cancelled || s->finished || s->c == NULL || s->closed || len > UINT32_MAX) return 0;
  if (s->proto == kPc_WebProtocol_ConnectUnary) {
    /* the headers go with the status (pc_GrpcServerCall_Finish) */
    if (pc_GrpcOutbox_Unsent(&s->out) > 0) {
      fail(s, kPc_Code_Internal, "a unary call answers with one response message");
      return 0;
    }
    if (!send_message(s, msg, len)) {
      fail(s, kPc_Code_ResourceExhausted, "out of memory framing a response message");
      return 0;
    }
    return 1;
  }
  if (s->proto == kPc_WebProtocol_Http) {
    if (!s->submitted) return 0; /* pc_GrpcServerCall_Respond first */
    if (!send_message(s, msg, len)) {
      fail(s, kPc_Code_ResourceExhausted, "out of memory queuing a response body");
      return 0;
    }
    resume(s);
    return 1;
  }
  size_t size, limit;
  int r = s->submitted ? 1 : submit_headers(s, 0, &size, &limit);
  if (r == -1) {
    s->out_md[0].count = 0; /* they cannot go out, nor with the status */
    fail(s, kPc_Code_ResourceExhausted,
         "response headers of %zu bytes exceed the limit of %zu bytes", size, limit);
    return 0;
  }
  if (r == 0) {
    fail(s, kPc_Code_ResourceExhausted, "out of memory sending response headers");
    return 0;
  }
  if (!send_message(s, msg, len)) {
    fail(s, kPc_Code_ResourceExhausted, "out of memory framing a response message");
    return 0;
  }
  resume(s);
  return 1;
}

void pc_GrpcServerCall_SetWakeToken(pc_GrpcServerCall *s, uint64_t token) {
  s->waker.token = token;
}

int pc_GrpcServerCall_Compressed(const pc_GrpcServerCall *s) {
  return s->last_compressed;
}

int pc_GrpcServerCall_SetCompression(pc_GrpcServerCall *s, int gzip) {
  if (!gzip) {
    s->gzip_out = 0;
    return 1;
  }
  if (!s->accepts_gzip || (s->submitted && !s->gzip_declared)) return 0;
  s->gzip_out = 1;
  return 1;
}

size_t pc_GrpcServerCall_Unsent(const pc_GrpcServerCall *s) {
  return pc_GrpcOutbox_Unsent(&s->out);
}

void pc_GrpcServerCall_Finish(pc_GrpcServerCall *s, pc_Code code, const char *message, size_t len,
                              const char *details, size_t details_len) {
  if (s->cancelled) return;
  finish(s, code, message, len, details, details_len);
}

void pc_GrpcServerCall_NotFound(pc_GrpcServerCall *s, const char *message, size_t len) {
  if (s->cancelled || s->finished) return;
  s->not_found = 1;
  finish(s, kPc_Code_Unimplemented, message, len, NULL, 0);
}

int pc_GrpcServerCall_Done(const pc_GrpcServerCall *s) {
  return s->closed || s->c == NULL;
}

void pc_GrpcServerCall_Free(pc_GrpcServerCall *s) {
  if (s == NULL) return;
  if (s->c && !s->closed && !s->c->h2.dead && s->finished && (!s->cancelled || s->ended)) {
    /* The response is queued (or the status of a call the engine ended):
     * the engine keeps the call until the stream closes (or the connection
     * goes), as it does calls never taken. */
    s->accepted = 0;
    return;
  }
  if (s->c && !s->closed) {
    nghttp2_submit_rst_stream(s->c->h2.session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
  }
  free_call(s);
}
