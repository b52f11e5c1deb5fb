/* The sans-I/O gRPC server engine on nghttp2 (see server.h).
 *
 * nghttp2 does HTTP/2 (framing, HPACK, stream states, flow-control
 * accounting, the checks of RFC 9113 8.3 on request pseudo headers); this
 * file does what gRPC adds: request headers to a call, length-prefixed
 * messages, gzip, responses and trailers, and the limits. */
#define _POSIX_C_SOURCE 200809L

#include "net/server.h"

#include <nghttp2/nghttp2.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define OUTPUT_CHUNK ((size_t)64 * 1024)

typedef pc_GrpcBuf Buf;

typedef struct {
  pc_Alloc *alloc;
  void *ud;
} Mem;

typedef struct {
  pc_GrpcPair *items;
  size_t count, cap;
} Pairs;

typedef struct {
  double tokens, last;
  int started;
} Bucket;

struct pc_GrpcServerCall {
  Mem m;
  pc_GrpcServerConn *c; /* NULL once the connection is gone */
  pc_GrpcServerCall *prev, *next;
  pc_Arena *arena;
  int32_t id;
  const char *path;
  const char *content_type;
  const char *encoding;
  double timeout, deadline;
  Pairs md, out_md[2]; /* request metadata; response headers and trailers */
  size_t block_bytes;
  int queued;   /* waiting for pc_GrpcServerConn_Accept */
  int accepted; /* the driver owns it */
  Buf in;       /* request body: read below 'rpos', whole messages below 'scan' */
  size_t rpos, scan;
  size_t unconsumed;
  char *dbuf; /* the last decompressed message */
  size_t dcap;
  Buf out; /* framed response messages, sent below 'out_pos' */
  size_t out_pos;
  int deferred;
  int submitted; /* response headers submitted */
  int remote_ended, closed, cancelled;
  int finished;        /* Finish ran: the trailers follow the messages */
  int ended;           /* the engine finished it (fail, deadline): its status is queued */
  int accepts_gzip;    /* grpc-accept-encoding lists gzip */
  int gzip_declared;   /* the response headers carry grpc-encoding gzip */
  int gzip_out;        /* response messages are gzipped */
  int last_compressed; /* the last message Next returned had the flag set */
  pc_Code code;
  const char *message, *details;
  size_t message_len, details_len;
};

struct pc_GrpcServerConn {
  Mem m;
  nghttp2_session *session;
  nghttp2_mem mem;
  pc_GrpcServerCall *calls, *last;
  size_t held; /* calls not yet freed */
  size_t max_receive, max_header_list;
  uint32_t max_streams;
  uint32_t reset_burst, reset_rate, control_burst, control_rate;
  Bucket resets, controls;
  double now;
  Buf out;
  size_t out_pos;
  int dead, goaway;
  int broken;              /* nghttp2_session_mem_recv failed */
  char why[PC_ERROR_MAX];  /* what ended the connection */
  char said[PC_ERROR_MAX]; /* what nghttp2 said last */
};

/* -- memory ------------------------------------------------------------ */

static void *mem(const Mem *m, void *p, size_t osize, size_t nsize) {
  return m->alloc(m->ud, p, osize, nsize);
}

static int buf_reserve(const Mem *m, Buf *b, size_t extra) {
  return pc_GrpcBuf_Reserve(m->alloc, m->ud, b, extra);
}

static void buf_free(const Mem *m, Buf *b) {
  pc_GrpcBuf_Free(m->alloc, m->ud, b);
}

static void *ng_malloc(size_t size, void *ud) {
  pc_GrpcServerConn *c = ud;
  return pc_Grpc_BlockRealloc(c->m.alloc, c->m.ud, NULL, size);
}

static void ng_free(void *ptr, void *ud) {
  pc_GrpcServerConn *c = ud;
  if (ptr) pc_Grpc_BlockRealloc(c->m.alloc, c->m.ud, ptr, 0);
}

static void *ng_calloc(size_t n, size_t size, void *ud) {
  if (size != 0 && n > SIZE_MAX / size) return NULL;
  void *p = ng_malloc(n * size, ud);
  if (p) memset(p, 0, n * size);
  return p;
}

static void *ng_realloc(void *ptr, size_t size, void *ud) {
  pc_GrpcServerConn *c = ud;
  return pc_Grpc_BlockRealloc(c->m.alloc, c->m.ud, ptr, size);
}

/* -- helpers --------------------------------------------------------------- */

static nghttp2_nv nv(const char *k, size_t kn, const char *v, size_t vn) {
  nghttp2_nv x;
  /* nghttp2 copies the bytes and never writes them (no NO_COPY flag). */
  memcpy(&x.name, &k, sizeof k);
  memcpy(&x.value, &v, sizeof v);
  x.namelen = kn;
  x.valuelen = vn;
  x.flags = NGHTTP2_NV_FLAG_NONE;
  return x;
}

#define NV(k, v) nv((k), sizeof(k) - 1, (v), strlen(v))

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

static void set_why(pc_GrpcServerConn *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void set_why(pc_GrpcServerConn *c, const char *fmt, ...) {
  if (c->why[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
}

/* Ends the connection with GOAWAY ENHANCE_YOUR_CALM. */
static void calm(pc_GrpcServerConn *c, const char *what) {
  set_why(c, "%s: GOAWAY ENHANCE_YOUR_CALM", what);
  nghttp2_session_terminate_session(c->session, NGHTTP2_ENHANCE_YOUR_CALM);
}

static pc_GrpcServerCall *call_of(nghttp2_session *session, int32_t id) {
  return nghttp2_session_get_stream_user_data(session, id);
}

static void unlink_call(pc_GrpcServerCall *s) {
  pc_GrpcServerConn *c = s->c;
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

static void free_call(pc_GrpcServerCall *s) {
  if (s->c) {
    if (!s->closed) {
      if (s->unconsumed > 0) nghttp2_session_consume_connection(s->c->session, s->unconsumed);
      nghttp2_session_set_stream_user_data(s->c->session, s->id, NULL);
    }
    unlink_call(s);
  }
  Mem m = s->m;
  pc_Arena_Free(s->arena);
  buf_free(&m, &s->in);
  buf_free(&m, &s->out);
  if (s->dbuf) mem(&m, s->dbuf, s->dcap, 0);
  mem(&m, s, sizeof *s, 0);
}

static int add_pair(pc_GrpcServerCall *s, Pairs *ps, const char *k, size_t kn, const char *v,
                    size_t vn, int decode_bin) {
  if (ps->count == ps->cap) {
    size_t cap = ps->cap ? ps->cap * 2 : 8;
    pc_GrpcPair *items = pc_Arena_Malloc(s->arena, cap * sizeof *items);
    if (items == NULL) return 0;
    if (ps->count) memcpy(items, ps->items, ps->count * sizeof *items);
    ps->items = items;
    ps->cap = cap;
  }
  char *key = pc_Arena_StrDup(s->arena, k, kn);
  if (key == NULL) return 0;
  char *value = NULL;
  if (decode_bin && pc_Grpc_IsBinKey(key, kn)) {
    unsigned char *raw = pc_Arena_Malloc(s->arena, vn / 4 * 3 + 4);
    if (raw == NULL) return 0;
    size_t n = pc_Grpc_Base64Decode(v, vn, raw);
    if (n != (size_t)-1) {
      raw[n] = '\0';
      value = (char *)raw;
      vn = n;
    }
  }
  if (value == NULL) value = pc_Arena_StrDup(s->arena, v, vn);
  if (value == NULL) return 0;
  ps->items[ps->count].key = key;
  ps->items[ps->count].key_len = kn;
  ps->items[ps->count].value = value;
  ps->items[ps->count].value_len = vn;
  ps->count++;
  return 1;
}

/* -- responses ------------------------------------------------------------- */

static ssize_t read_response(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                             uint32_t *data_flags, nghttp2_data_source *source, void *ud);

/* Appends the response pairs of 'block' (base64 for "-bin" keys). */
static int push_pairs(pc_GrpcServerCall *s, const Pairs *ps, nghttp2_nv *h, size_t *n) {
  for (size_t i = 0; i < ps->count; i++) {
    const pc_GrpcPair *p = &ps->items[i];
    const char *v = p->value;
    size_t vn = p->value_len;
    if (pc_Grpc_IsBinKey(p->key, p->key_len)) {
      char *b = pc_Arena_Malloc(s->arena, p->value_len / 3 * 4 + 8);
      if (b == NULL) return 0;
      vn = pc_Grpc_Base64Encode((const unsigned char *)p->value, p->value_len, b);
      v = b;
    }
    h[(*n)++] = nv(p->key, p->key_len, v, vn);
  }
  return 1;
}

/* The status pairs (grpc-status, grpc-message, grpc-status-details-bin). */
static int push_status(pc_GrpcServerCall *s, nghttp2_nv *h, size_t *n) {
  char *code = pc_Arena_Malloc(s->arena, 8);
  if (code == NULL) return 0;
  snprintf(code, 8, "%d", (int)s->code);
  h[(*n)++] = NV("grpc-status", code);
  if (s->message_len > 0) {
    char *m = pc_Arena_Malloc(s->arena, s->message_len * 3 + 1);
    if (m == NULL) return 0;
    size_t mn = pc_Grpc_PercentEncode(s->message, s->message_len, m);
    h[(*n)++] = nv("grpc-message", 12, m, mn);
  }
  if (s->details_len > 0) {
    char *d = pc_Arena_Malloc(s->arena, s->details_len / 3 * 4 + 8);
    if (d == NULL) return 0;
    size_t dn = pc_Grpc_Base64Encode((const unsigned char *)s->details, s->details_len, d);
    h[(*n)++] = nv("grpc-status-details-bin", 23, d, dn);
  }
  return 1;
}

/* Submits the response headers: with a data provider, or (trailers_only)
 * as the whole response with the status. */
static int submit_headers(pc_GrpcServerCall *s, int trailers_only) {
  pc_GrpcServerConn *c = s->c;
  size_t max = 8 + s->out_md[0].count + (trailers_only ? s->out_md[1].count : 0);
  nghttp2_nv *h = pc_Arena_Malloc(s->arena, max * sizeof *h);
  if (h == NULL) return 0;
  size_t n = 0;
  h[n++] = NV(":status", "200");
  h[n++] = NV("content-type", "application/grpc");
  h[n++] = NV("grpc-accept-encoding", "identity,gzip");
  if (s->gzip_out) {
    h[n++] = NV("grpc-encoding", "gzip");
    s->gzip_declared = 1;
  }
  if (!push_pairs(s, &s->out_md[0], h, &n)) return 0;
  s->submitted = 1;
  if (trailers_only) {
    if (!push_status(s, h, &n) || !push_pairs(s, &s->out_md[1], h, &n)) return 0;
    return nghttp2_submit_response(c->session, s->id, h, n, NULL) == 0;
  }
  nghttp2_data_provider prd;
  prd.source.ptr = s;
  prd.read_callback = read_response;
  return nghttp2_submit_response(c->session, s->id, h, n, &prd) == 0;
}

static void resume(pc_GrpcServerCall *s) {
  if (s->deferred && s->c && !s->closed) {
    s->deferred = 0;
    nghttp2_session_resume_data(s->c->session, s->id);
  }
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
  int ok = s->submitted ? 1 : submit_headers(s, s->out.len == s->out_pos);
  if (!ok) {
    nghttp2_submit_rst_stream(s->c->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  resume(s);
}

/* A failure the engine found in a request: the call ends with 'code'
 * (the handler sees it cancelled) and the rest of its body is dropped. */
static void fail(pc_GrpcServerCall *s, pc_Code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void fail(pc_GrpcServerCall *s, pc_Code code, const char *fmt, ...) {
  char text[PC_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof text) n = (int)sizeof text - 1;
  s->cancelled = 1;
  s->ended = 1;
  s->in.len = s->rpos = s->scan = 0;
  s->out.len = s->out_pos = 0;
  finish(s, code, text, (size_t)n, NULL, 0);
}

static ssize_t read_response(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                             uint32_t *data_flags, nghttp2_data_source *source, void *ud) {
  (void)source;
  (void)ud;
  pc_GrpcServerCall *s = call_of(session, id);
  if (s == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  size_t left = s->out.len - s->out_pos;
  if (left == 0) {
    if (!s->finished) {
      s->deferred = 1;
      return NGHTTP2_ERR_DEFERRED;
    }
    *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    size_t max = 4 + s->out_md[1].count;
    nghttp2_nv *h = pc_Arena_Malloc(s->arena, max * sizeof *h);
    size_t n = 0;
    if (h == NULL || !push_status(s, h, &n) || !push_pairs(s, &s->out_md[1], h, &n) ||
        nghttp2_submit_trailer(session, id, h, n) != 0)
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
  }
  size_t n = left < length ? left : length;
  memcpy(buf, s->out.p + s->out_pos, n);
  s->out_pos += n;
  if (s->out_pos == s->out.len) s->out.len = s->out_pos = 0;
  return (ssize_t)n;
}

/* -- requests -------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  pc_GrpcServerConn *c = ud;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
    pc_GrpcServerCall *s = call_of(session, frame->hd.stream_id);
    if (s) s->block_bytes = 0;
    return 0;
  }
  if (c->held >= (size_t)c->max_streams * 2) {
    /* The driver still holds as many calls as two full connections. */
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                              NGHTTP2_REFUSED_STREAM);
    return 0;
  }
  pc_GrpcServerCall *s = mem(&c->m, NULL, 0, sizeof *s);
  if (s == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  memset(s, 0, sizeof *s);
  s->m = c->m;
  s->c = c;
  s->id = frame->hd.stream_id;
  s->timeout = s->deadline = -1;
  s->arena = pc_Arena_New(c->m.alloc, c->m.ud);
  if (s->arena == NULL || nghttp2_session_set_stream_user_data(session, s->id, s) != 0) {
    if (s->arena) pc_Arena_Free(s->arena);
    mem(&c->m, s, sizeof *s, 0);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  s->prev = c->last;
  if (c->last)
    c->last->next = s;
  else
    c->calls = s;
  c->last = s;
  c->held++;
  return 0;
}

static int is(const uint8_t *p, size_t n, const char *k) {
  size_t kn = strlen(k);
  return n == kn && memcmp(p, k, kn) == 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud) {
  pc_GrpcServerConn *c = ud;
  (void)flags;
  pc_GrpcServerCall *s = call_of(session, frame->hd.stream_id);
  if (s == NULL || frame->hd.type != NGHTTP2_HEADERS) return 0;
  s->block_bytes += namelen + valuelen + 32;
  if (s->block_bytes > c->max_header_list) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* client trailers: ignored */
  const char *v = (const char *)value;
  if (is(name, namelen, ":path")) {
    s->path = pc_Arena_StrDup(s->arena, v, valuelen);
    return s->path ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
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
    return 0;
  }
  if (is(name, namelen, "grpc-accept-encoding")) {
    /* a comma-separated list: "identity, deflate, gzip" */
    for (size_t i = 0; i < valuelen;) {
      while (i < valuelen && (v[i] == ' ' || v[i] == ',')) i++;
      size_t j = i;
      while (j < valuelen && v[j] != ',' && v[j] != ' ') j++;
      if (j - i == 4 && memcmp(v + i, "gzip", 4) == 0) s->accepts_gzip = 1;
      i = j;
    }
    return 0;
  }
  if (is(name, namelen, "te")) return 0;
  if (!add_pair(s, &s->md, (const char *)name, namelen, v, valuelen, 1))
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return 0;
}

/* A request whose headers are complete: refused here (415, an unknown
 * grpc-encoding) or queued for the driver. */
static void request_ready(pc_GrpcServerConn *c, pc_GrpcServerCall *s) {
  const char *ct = s->content_type;
  size_t ctn = ct ? strlen(ct) : 0;
  if (ct == NULL || ctn < 16 || memcmp(ct, "application/grpc", 16) != 0 ||
      (ctn > 16 && ct[16] != '+' && ct[16] != ';')) {
    nghttp2_nv h[3] = {NV(":status", "415"), NV("content-type", "text/plain"),
                       NV("grpc-message", "content-type must be application/grpc")};
    s->finished = s->cancelled = 1;
    s->submitted = 1;
    nghttp2_submit_response(c->session, s->id, h, 3, NULL);
    return;
  }
  if (s->path == NULL) s->path = "";
  if (s->encoding && strcmp(s->encoding, "identity") != 0 && strcmp(s->encoding, "gzip") != 0) {
    fail(s, kPc_Code_Unimplemented, "grpc-encoding '%.40s' is not supported (identity, gzip)",
         s->encoding);
    return;
  }
  if (s->timeout >= 0) s->deadline = c->now + s->timeout;
  s->queued = 1;
}

/* Checks each length prefix and flag as soon as they are here; a request
 * over the limit fails before its body arrives. */
static void scan_messages(pc_GrpcServerCall *s) {
  pc_GrpcServerConn *c = s->c;
  while (!s->cancelled && s->in.len - s->scan >= 5) {
    const unsigned char *h = (const unsigned char *)s->in.p + s->scan;
    uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
    if (h[0] > 1) {
      fail(s, kPc_Code_Internal, "request message has an invalid flags byte 0x%02x", h[0]);
      return;
    }
    if (h[0] == 1 && (s->encoding == NULL || strcmp(s->encoding, "gzip") != 0)) {
      fail(s, kPc_Code_Internal, "request message is compressed but grpc-encoding is not gzip");
      return;
    }
    if (len > c->max_receive) {
      fail(s, kPc_Code_ResourceExhausted,
           "request message of %lu bytes exceeds the limit of %zu bytes", (unsigned long)len,
           c->max_receive);
      return;
    }
    if (s->in.len - s->scan - 5 < len) return;
    s->scan += 5 + (size_t)len;
  }
}

/* Gives back to flow control what is not held in whole unread messages. */
static void release_window(pc_GrpcServerCall *s) {
  size_t held = s->scan - s->rpos;
  if (s->cancelled) held = 0;
  if (s->unconsumed > held && s->c && !s->closed) {
    nghttp2_session_consume(s->c->session, s->id, s->unconsumed - held);
    s->unconsumed = held;
  }
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud) {
  (void)flags;
  (void)ud;
  pc_GrpcServerCall *s = call_of(session, id);
  if (s == NULL || s->cancelled || s->finished) {
    nghttp2_session_consume(session, id, len);
    return 0;
  }
  s->unconsumed += len;
  if (s->rpos > 0 && s->rpos == s->in.len) s->in.len = s->rpos = s->scan = 0;
  if (!buf_reserve(&s->m, &s->in, len)) {
    fail(s, kPc_Code_ResourceExhausted, "out of memory reading the request");
  } else {
    memcpy(s->in.p + s->in.len, data, len);
    s->in.len += len;
    scan_messages(s);
  }
  release_window(s);
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
    if (!s->cancelled && s->in.len > s->scan)
      fail(s, kPc_Code_Internal, "request ended inside a message (%zu bytes left over)",
           s->in.len - s->scan);
  }
  return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  (void)ud;
  if (frame->hd.type != NGHTTP2_HEADERS || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
  pc_GrpcServerCall *s = call_of(session, frame->hd.stream_id);
  /* The response is complete while the client still sends: stop it. */
  if (s && !s->remote_ended)
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
  return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *ud) {
  (void)code;
  (void)ud;
  pc_GrpcServerCall *s = call_of(session, id);
  if (s == NULL) return 0;
  s->closed = 1;
  if (s->unconsumed > 0) nghttp2_session_consume_connection(session, s->unconsumed);
  s->unconsumed = 0;
  if (!s->finished) s->cancelled = 1;
  nghttp2_session_set_stream_user_data(session, id, NULL);
  if (!s->accepted) free_call(s);
  return 0;
}

static int on_error(nghttp2_session *session, int lib_error_code, const char *msg, size_t len,
                    void *ud) {
  pc_GrpcServerConn *c = ud;
  (void)session;
  (void)lib_error_code;
  snprintf(c->said, sizeof c->said, "%.*s", (int)(len > 200 ? 200 : len), msg);
  return 0;
}

/* -- connection ------------------------------------------------------------ */

static void cancel_all(pc_GrpcServerConn *c) {
  pc_GrpcServerCall *s = c->calls;
  while (s) {
    pc_GrpcServerCall *next = s->next;
    s->cancelled = 1;
    if (!s->accepted) {
      if (!s->closed) nghttp2_session_set_stream_user_data(c->session, s->id, NULL);
      s->closed = 1;
      free_call(s);
    }
    s = next;
  }
}

static void check_dead(pc_GrpcServerConn *c) {
  if (c->dead || c->out_pos < c->out.len) return;
  /* A broken session has nothing left to say once its output is out. */
  if (!c->broken &&
      (nghttp2_session_want_read(c->session) || nghttp2_session_want_write(c->session)))
    return;
  c->dead = 1;
  set_why(c, "the connection ended");
  cancel_all(c);
}

pc_GrpcServerConn *pc_GrpcServerConn_New(const pc_GrpcServerOptions *o, pc_Alloc *alloc, void *ud,
                                         pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_GrpcServerConn *c = alloc(ud, NULL, 0, sizeof *c);
  if (c == NULL) goto oom;
  memset(c, 0, sizeof *c);
  c->m.alloc = alloc;
  c->m.ud = ud;
  c->max_streams =
      o->max_concurrent_streams ? o->max_concurrent_streams : PC_GRPC_SERVER_DEFAULT_MAX_STREAMS;
  c->max_receive = o->max_receive ? o->max_receive : PC_GRPC_DEFAULT_MAX_RECEIVE;
  c->max_header_list =
      o->max_header_list ? o->max_header_list : PC_GRPC_SERVER_DEFAULT_MAX_HEADER_LIST;
  c->reset_burst = o->reset_burst ? o->reset_burst : PC_GRPC_SERVER_DEFAULT_RESET_BURST;
  c->reset_rate = o->reset_rate ? o->reset_rate : PC_GRPC_SERVER_DEFAULT_RESET_RATE;
  c->control_burst = o->control_burst ? o->control_burst : PC_GRPC_SERVER_DEFAULT_CONTROL_BURST;
  c->control_rate = o->control_rate ? o->control_rate : PC_GRPC_SERVER_DEFAULT_CONTROL_RATE;
  c->mem.mem_user_data = c;
  c->mem.malloc = ng_malloc;
  c->mem.free = ng_free;
  c->mem.calloc = ng_calloc;
  c->mem.realloc = ng_realloc;
  nghttp2_session_callbacks *cb;
  if (nghttp2_session_callbacks_new(&cb) != 0) goto fail;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_error_callback2(cb, on_error);
  nghttp2_option *opt;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cb);
    goto fail;
  }
  nghttp2_option_set_no_auto_window_update(opt, 1);
  /* The buckets above answer with ENHANCE_YOUR_CALM first. */
  nghttp2_option_set_stream_reset_rate_limit(opt, 1u << 30, 1u << 30);
  nghttp2_option_set_max_continuations(opt, 16);
  int r = nghttp2_session_server_new3(&c->session, cb, c, opt, &c->mem);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (r != 0) {
    c->session = NULL;
    goto fail;
  }
  uint32_t sw = o->stream_window ? o->stream_window : (uint32_t)1024 * 1024;
  uint32_t cw = o->connection_window ? o->connection_window : (uint32_t)16 * 1024 * 1024;
  if (sw > 0x7fffffff) sw = 0x7fffffff;
  if (cw > 0x7fffffff) cw = 0x7fffffff;
  size_t hl = c->max_header_list > 0xffffffffu ? 0xffffffffu : c->max_header_list;
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->max_streams},
                                 {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, sw},
                                 {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)hl}};
  if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, 3) != 0) goto fail;
  if (nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, (int32_t)cw) != 0)
    goto fail;
  return c;
fail:
  pc_GrpcServerConn_Free(c);
oom:
  pc_Error_Set(err, "cannot start an HTTP/2 server session: out of memory");
  return NULL;
}

void pc_GrpcServerConn_Free(pc_GrpcServerConn *c) {
  if (c == NULL) return;
  if (c->session) cancel_all(c);
  for (pc_GrpcServerCall *s = c->calls; s; s = s->next) {
    if (!s->closed && c->session) nghttp2_session_set_stream_user_data(c->session, s->id, NULL);
    s->closed = 1;
    s->cancelled = 1;
    s->c = NULL;
  }
  if (c->session) nghttp2_session_del(c->session);
  buf_free(&c->m, &c->out);
  mem(&c->m, c, sizeof *c, 0);
}

int pc_GrpcServerConn_Recv(pc_GrpcServerConn *c, const void *data, size_t len, double now) {
  if (c->dead || c->broken) return 0;
  c->now = now;
  ssize_t r = nghttp2_session_mem_recv(c->session, data, len);
  if (r < 0) {
    c->broken = 1;
    set_why(c, "HTTP/2: %s", c->said[0] ? c->said : nghttp2_strerror((int)r));
    /* nghttp2 queued a GOAWAY for most errors: _Output lets it out. */
    return 0;
  }
  check_dead(c);
  return !c->dead;
}

size_t pc_GrpcServerConn_Output(pc_GrpcServerConn *c, const char **data) {
  if (c->out_pos == c->out.len && !c->dead) {
    c->out.len = c->out_pos = 0;
    while (c->out.len < OUTPUT_CHUNK) {
      const uint8_t *p;
      ssize_t n = nghttp2_session_mem_send(c->session, &p);
      if (n < 0) {
        set_why(c, "HTTP/2 session failed: %s", nghttp2_strerror((int)n));
        c->dead = 1;
        cancel_all(c);
        break;
      }
      if (n == 0) break;
      if (!buf_reserve(&c->m, &c->out, (size_t)n)) {
        set_why(c, "out of memory sending");
        c->dead = 1;
        cancel_all(c);
        break;
      }
      memcpy(c->out.p + c->out.len, p, (size_t)n);
      c->out.len += (size_t)n;
    }
  }
  if (c->out.len == c->out_pos) check_dead(c);
  *data = c->out.p + c->out_pos;
  return c->out.len - c->out_pos;
}

void pc_GrpcServerConn_Wrote(pc_GrpcServerConn *c, size_t n) {
  size_t left = c->out.len - c->out_pos;
  c->out_pos += n < left ? n : left;
  check_dead(c);
}

int pc_GrpcServerConn_Alive(const pc_GrpcServerConn *c) {
  return !c->dead;
}

const char *pc_GrpcServerConn_Why(const pc_GrpcServerConn *c) {
  return c->why;
}

void pc_GrpcServerConn_Lost(pc_GrpcServerConn *c) {
  if (c->dead) return;
  c->dead = 1;
  set_why(c, "the connection was lost");
  cancel_all(c);
}

void pc_GrpcServerConn_Shutdown(pc_GrpcServerConn *c) {
  if (c->dead || c->goaway) return;
  c->goaway = 1;
  nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(c->session), NGHTTP2_NO_ERROR, NULL,
                        0);
}

size_t pc_GrpcServerConn_Running(const pc_GrpcServerConn *c) {
  size_t n = 0;
  for (const pc_GrpcServerCall *s = c->calls; s; s = s->next) n += !s->closed;
  return n;
}

double pc_GrpcServerConn_Expire(pc_GrpcServerConn *c, double now) {
  double next = -1;
  for (pc_GrpcServerCall *s = c->calls; s; s = s->next) {
    if (s->deadline < 0 || s->finished || s->closed) continue;
    if (now >= s->deadline) {
      s->cancelled = s->ended = 1;
      s->out.len = s->out_pos = 0;
      finish(s, kPc_Code_DeadlineExceeded, "deadline exceeded", 17, NULL, 0);
    } else if (next < 0 || s->deadline < next) {
      next = s->deadline;
    }
  }
  return next;
}

pc_GrpcServerCall *pc_GrpcServerConn_Accept(pc_GrpcServerConn *c) {
  for (pc_GrpcServerCall *s = c->calls; s; s = s->next) {
    if (!s->queued) continue;
    s->queued = 0;
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
  if (s->rpos > 0) {
    memmove(s->in.p, s->in.p + s->rpos, s->in.len - s->rpos);
    s->in.len -= s->rpos;
    s->scan -= s->rpos;
    s->rpos = 0;
  }
  if (s->rpos < s->scan) {
    const unsigned char *h = (const unsigned char *)s->in.p;
    size_t n = (size_t)((uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4]);
    const char *body = s->in.p + 5;
    s->rpos = 5 + n;
    release_window(s);
    s->last_compressed = h[0] == 1;
    if (h[0] == 0) {
      *data = body;
      *len = n;
      return 1;
    }
    size_t out =
        pc_Grpc_Gunzip(s->m.alloc, s->m.ud, body, n, s->c->max_receive, &s->dbuf, &s->dcap);
    if (out == (size_t)-1) {
      fail(s, kPc_Code_Internal, "request message is not valid gzip");
      return -1;
    }
    if (out == (size_t)-2) {
      fail(s, kPc_Code_ResourceExhausted,
           "decompressed request message exceeds the limit of %zu bytes", s->c->max_receive);
      return -1;
    }
    if (out == (size_t)-3) {
      fail(s, kPc_Code_ResourceExhausted, "out of memory decompressing a request");
      return -1;
    }
    *data = s->dbuf;
    *len = out;
    return 1;
  }
  return s->remote_ended || s->closed ? -1 : 0;
}

void pc_GrpcServerCall_Release(pc_GrpcServerCall *s) {
  if (s->dbuf) mem(&s->m, s->dbuf, s->dcap, 0);
  s->dbuf = NULL;
  s->dcap = 0;
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
  if (!add_pair(s, &s->out_md[trailers ? 1 : 0], p->key, p->key_len, p->value, p->value_len, 0)) {
    pc_Error_Set(err, "out of memory");
    return 0;
  }
  return 1;
}

int pc_GrpcServerCall_Send(pc_GrpcServerCall *s, const void *msg, size_t len) {
  if (s->cancelled || s->finished || s->c == NULL || s->closed || len > UINT32_MAX) return 0;
  if (!s->submitted && !submit_headers(s, 0)) {
    fail(s, kPc_Code_ResourceExhausted, "out of memory sending response headers");
    return 0;
  }
  if (s->out_pos > 0 && s->out_pos == s->out.len) s->out.len = s->out_pos = 0;
  if (!pc_Grpc_FrameMessage(s->m.alloc, s->m.ud, &s->out, msg, len, s->gzip_out)) {
    fail(s, kPc_Code_ResourceExhausted, "out of memory framing a response message");
    return 0;
  }
  resume(s);
  return 1;
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
  return s->out.len - s->out_pos;
}

void pc_GrpcServerCall_Finish(pc_GrpcServerCall *s, pc_Code code, const char *message, size_t len,
                              const char *details, size_t details_len) {
  if (s->cancelled) return;
  finish(s, code, message, len, details, details_len);
}

int pc_GrpcServerCall_Done(const pc_GrpcServerCall *s) {
  return s->closed || s->c == NULL;
}

void pc_GrpcServerCall_Free(pc_GrpcServerCall *s) {
  if (s == NULL) return;
  if (s->c && !s->closed && !s->c->dead && s->finished && (!s->cancelled || s->ended)) {
    /* The response is queued (or the status of a call the engine ended):
     * the engine keeps the call until the stream closes (or the connection
     * goes), as it does calls never taken. */
    s->accepted = 0;
    return;
  }
  if (s->c && !s->closed) {
    nghttp2_submit_rst_stream(s->c->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
  }
  free_call(s);
}
