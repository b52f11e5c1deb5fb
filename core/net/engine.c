/* The sans-I/O gRPC client engine on nghttp2 (see engine.h).
 *
 * nghttp2 does HTTP/2 (framing, HPACK, stream states, flow-control
 * accounting); this file does what gRPC adds on top: request headers,
 * length-prefixed messages, gzip, the status of a call from what arrived,
 * and when to open the receive window (automatic WINDOW_UPDATE is off: a
 * stream's bytes are given back as its messages are read). */
#define _POSIX_C_SOURCE 200809L

#include "net/engine.h"

#include <nghttp2/nghttp2.h>
#define ZLIB_CONST /* next_in is const */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Output gathered from nghttp2 per pc_GrpcEngine_Output, at most. */
#define OUTPUT_CHUNK ((size_t)64 * 1024)

typedef pc_GrpcBuf Buf;

/* The allocator an engine and each of its streams keep (a stream outlives
 * its engine, detached). */
typedef struct {
  pc_Alloc *alloc;
  void *ud;
} Mem;

typedef struct {
  pc_GrpcPair *items;
  size_t count, cap;
} Pairs;

struct pc_GrpcStream {
  Mem m;
  pc_GrpcEngine *e; /* NULL once the engine is gone */
  pc_GrpcStream *prev, *next;
  void *user;
  pc_Arena *arena; /* metadata, status message and details */
  int32_t id;
  int gzip;
  Buf out; /* framed request messages, sent below 'out_pos' */
  size_t out_pos;
  int send_closed; /* pc_GrpcStream_CloseSend was called */
  int deferred;    /* the data source is waiting for messages */
  Buf in;          /* response body: read below 'rpos', whole messages below 'scan' */
  size_t rpos, scan;
  size_t unconsumed; /* bytes received and not yet given back to flow control */
  Buf dbuf;          /* the last decompressed message */
  int http_status;
  int headers_done; /* the response header block is complete */
  int grpc_body;    /* the response is HTTP 200 application/grpc */
  int remote_ended; /* END_STREAM arrived */
  int closed;       /* nghttp2 closed the stream */
  uint32_t rst_code;
  size_t block_bytes; /* of the header block being received, decoded */
  size_t block_wire;  /* ...and as HEADERS and CONTINUATION frames */
  Pairs pairs[2];     /* headers, trailers */
  int ended;          /* 'status' is final */
  int failed;         /* ...set by this side (a local failure or a cancel) */
  pc_GrpcStatus status;
};

struct pc_GrpcEngine {
  Mem m;
  nghttp2_session *session;
  nghttp2_mem mem;
  pc_GrpcStream *streams; /* every stream not yet freed */
  size_t running;         /* streams not yet ended */
  size_t open;            /* streams nghttp2 has not closed */
  char *authority;
  char *user_agent;
  int tls;
  size_t max_receive, max_header_list;
  pc_GrpcEventFn *on_event;
  void *event_ud;
  Buf out;
  size_t out_pos;
  int dead;
  int goaway;
  int32_t goaway_last;
  int ping_pending;       /* a PING of pc_GrpcEngine_Ping awaits its ACK */
  char why[PC_ERROR_MAX]; /* what nghttp2 said about a connection error */
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

static char *dup_cstr(pc_GrpcEngine *e, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = mem(&e->m, NULL, 0, n);
  if (p) memcpy(p, s, n);
  return p;
}

static void free_cstr(pc_GrpcEngine *e, char *s) {
  if (s) mem(&e->m, s, strlen(s) + 1, 0);
}

/* nghttp2 allocates through the engine's allocator; the size sits
 * in front of each block because pc_Alloc needs it to free. */
#define HEAD 16

static void *head_alloc(pc_GrpcEngine *e, size_t n) {
  if (n > SIZE_MAX - HEAD) return NULL;
  n += HEAD;
  unsigned char *p = mem(&e->m, NULL, 0, n);
  if (p == NULL) return NULL;
  memcpy(p, &n, sizeof n);
  return p + HEAD;
}

static void head_free(pc_GrpcEngine *e, void *ptr) {
  if (ptr == NULL) return;
  size_t n;
  unsigned char *p = (unsigned char *)ptr - HEAD;
  memcpy(&n, p, sizeof n);
  mem(&e->m, p, n, 0);
}

static void *ng_malloc(size_t size, void *ud) {
  return head_alloc(ud, size);
}

static void ng_free(void *ptr, void *ud) {
  head_free(ud, ptr);
}

static void *ng_calloc(size_t n, size_t size, void *ud) {
  if (size != 0 && n > SIZE_MAX / size) return NULL;
  void *p = head_alloc(ud, n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

static void *ng_realloc(void *ptr, size_t size, void *ud) {
  pc_GrpcEngine *e = ud;
  if (ptr == NULL) return head_alloc(e, size);
  if (size == 0) {
    head_free(e, ptr);
    return NULL;
  }
  if (size > SIZE_MAX - HEAD) return NULL;
  size_t old;
  unsigned char *p = (unsigned char *)ptr - HEAD;
  memcpy(&old, p, sizeof old);
  size_t n = size + HEAD;
  unsigned char *q = mem(&e->m, p, old, n);
  if (q == NULL) return NULL;
  memcpy(q, &n, sizeof n);
  return q + HEAD;
}

/* -- events and status --------------------------------------------------- */

static void emit(pc_GrpcEngine *e, pc_GrpcStream *s, pc_GrpcEvent ev) {
  if (e && e->on_event) e->on_event(e->event_ud, s, ev);
}

static void set_message(pc_GrpcStream *s, const char *msg, size_t len) {
  char *m = pc_Arena_StrDup(s->arena, msg, len);
  s->status.message = m ? m : "out of memory";
  s->status.message_len = m ? len : strlen("out of memory");
}

/* Makes the status final (once) and tells the driver. */
static void end_stream(pc_GrpcStream *s) {
  if (s->ended) return;
  s->ended = 1;
  if (s->e) {
    s->e->running--;
    emit(s->e, s, kPc_GrpcEvent_End);
  }
}

static void failv(pc_GrpcStream *s, pc_Code code, int local, const char *fmt, va_list ap) {
  char text[PC_ERROR_MAX];
  int n = vsnprintf(text, sizeof text, fmt, ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof text) n = (int)sizeof text - 1;
  s->failed = 1;
  s->status.code = code;
  s->status.local = local;
  s->status.has_pushback = s->status.no_retry = 0;
  s->status.details = "";
  s->status.details_len = 0;
  set_message(s, text, (size_t)n);
}

/* Sends RST_STREAM 'code' unless the stream is closed already. */
static void reset(pc_GrpcStream *s, uint32_t code) {
  if (s->e && !s->closed && s->id > 0 && !s->e->dead)
    nghttp2_submit_rst_stream(s->e->session, NGHTTP2_FLAG_NONE, s->id, code);
}

/* A failure found on this side: the status is final whatever arrives
 * later, buffered messages are dropped and the stream is reset. */
static void fail(pc_GrpcStream *s, pc_Code code, int local, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static void fail(pc_GrpcStream *s, pc_Code code, int local, const char *fmt, ...) {
  if (s->failed) return;
  va_list ap;
  va_start(ap, fmt);
  failv(s, code, local, fmt, ap);
  va_end(ap);
  s->in.len = s->rpos = s->scan = 0;
  reset(s, NGHTTP2_CANCEL);
  end_stream(s);
}

static int key_is(const pc_GrpcPair *p, const char *k) {
  size_t n = strlen(k);
  return p->key_len == n && memcmp(p->key, k, n) == 0;
}

static const pc_GrpcPair *find_pair(const pc_GrpcStream *s, int block, const char *key) {
  const Pairs *ps = &s->pairs[block];
  for (size_t i = 0; i < ps->count; i++) {
    if (key_is(&ps->items[i], key)) return &ps->items[i];
  }
  return NULL;
}

/* RST_STREAM to status (PROTOCOL-HTTP2.md, "Errors"). */
static pc_Code code_from_rst(uint32_t code) {
  switch (code) {
  case NGHTTP2_REFUSED_STREAM: return kPc_Code_Unavailable;
  case NGHTTP2_CANCEL: return kPc_Code_Cancelled;
  case NGHTTP2_ENHANCE_YOUR_CALM: return kPc_Code_ResourceExhausted;
  case NGHTTP2_INADEQUATE_SECURITY: return kPc_Code_PermissionDenied;
  default: return kPc_Code_Internal; /* NO_ERROR before the end too */
  }
}

static void set_statusf(pc_GrpcStream *s, pc_Code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void set_statusf(pc_GrpcStream *s, pc_Code code, const char *fmt, ...) {
  char text[PC_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof text) n = (int)sizeof text - 1;
  s->status.code = code;
  set_message(s, text, (size_t)n);
}

static void read_pushback(pc_GrpcStream *s, int block) {
  const pc_GrpcPair *pb = find_pair(s, block, "grpc-retry-pushback-ms");
  if (pb == NULL) return;
  long long ms = 0;
  int valid = pb->value_len > 0 && pb->value_len <= 12;
  for (size_t i = 0; valid && i < pb->value_len; i++) {
    if (pb->value[i] < '0' || pb->value[i] > '9')
      valid = 0;
    else
      ms = ms * 10 + (pb->value[i] - '0');
  }
  s->status.has_pushback = 1;
  s->status.no_retry = !valid;
  s->status.retry_delay = valid ? (double)ms / 1000.0 : 0;
}

/* The status of a stream nghttp2 closed (unless this side decided it):
 * grpc-status from the trailers or a Trailers-Only block once the response
 * is complete, else the reset, GOAWAY or HTTP status. */
static void decide_status(pc_GrpcStream *s) {
  pc_GrpcEngine *e = s->e;
  int block = 1;
  const pc_GrpcPair *gs = find_pair(s, 1, "grpc-status");
  if (gs == NULL) {
    block = 0;
    gs = find_pair(s, 0, "grpc-status");
  }
  if (!s->remote_ended) {
    if (e && e->goaway && s->id > e->goaway_last) {
      set_statusf(s, kPc_Code_Unavailable,
                  "the server sent GOAWAY (last stream %ld) before taking the call",
                  (long)e->goaway_last);
    } else {
      const char *name = nghttp2_http2_strerror(s->rst_code);
      set_statusf(s, code_from_rst(s->rst_code), "stream reset by the server: RST_STREAM %s (%lu)",
                  name, (unsigned long)s->rst_code);
    }
    return;
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
      set_statusf(s, kPc_Code_Unknown, "invalid grpc-status '%.*s'",
                  (int)(gs->value_len > 16 ? 16 : gs->value_len), gs->value);
      return;
    }
    s->status.code = (pc_Code)code;
    const pc_GrpcPair *gm = find_pair(s, block, "grpc-message");
    if (gm != NULL) {
      char *m = pc_Arena_StrDup(s->arena, gm->value, gm->value_len);
      if (m != NULL) {
        size_t n = pc_Grpc_PercentDecode(m, gm->value_len);
        m[n] = '\0';
        s->status.message = m;
        s->status.message_len = n;
      }
    }
    const pc_GrpcPair *gd = find_pair(s, block, "grpc-status-details-bin");
    if (gd != NULL) {
      s->status.details = gd->value;
      s->status.details_len = gd->value_len;
    }
    read_pushback(s, block);
  } else {
    /* http-grpc-status-mapping.md; 431 (header list too large) is a
     * failure of this side's request. */
    pc_Code code =
        s->http_status == 431 ? kPc_Code_Internal : pc_Code_FromHttpStatus(s->http_status);
    set_statusf(s, code, "no grpc-status in the response (HTTP status %d)", s->http_status);
  }
  if (s->status.code == kPc_Code_Ok && s->in.len > s->scan) {
    set_statusf(s, kPc_Code_Internal, "response ended inside a message (%zu bytes left over)",
                s->in.len - s->scan);
  }
}

/* -- nghttp2 callbacks --------------------------------------------------- */

static pc_GrpcStream *stream_of(nghttp2_session *session, int32_t id) {
  return nghttp2_session_get_stream_user_data(session, id);
}

static int add_pair(pc_GrpcStream *s, int block, const uint8_t *k, size_t kn, const uint8_t *v,
                    size_t vn) {
  Pairs *ps = &s->pairs[block];
  if (ps->count == ps->cap) {
    size_t cap = ps->cap ? ps->cap * 2 : 8;
    pc_GrpcPair *items = pc_Arena_Malloc(s->arena, cap * sizeof *items);
    if (items == NULL) return 0;
    if (ps->count) memcpy(items, ps->items, ps->count * sizeof *items);
    ps->items = items;
    ps->cap = cap;
  }
  char *key = pc_Arena_StrDup(s->arena, (const char *)k, kn);
  if (key == NULL) return 0;
  char *value = NULL;
  if (pc_Grpc_IsBinKey(key, kn)) {
    unsigned char *raw = pc_Arena_Malloc(s->arena, vn / 4 * 3 + 4);
    if (raw == NULL) return 0;
    size_t n = pc_Grpc_Base64Decode((const char *)v, vn, raw);
    if (n != (size_t)-1) {
      raw[n] = '\0';
      value = (char *)raw;
      vn = n;
    }
  }
  if (value == NULL) value = pc_Arena_StrDup(s->arena, (const char *)v, vn);
  if (value == NULL) return 0;
  ps->items[ps->count].key = key;
  ps->items[ps->count].key_len = kn;
  ps->items[ps->count].value = value;
  ps->items[ps->count].value_len = vn;
  ps->count++;
  return 1;
}

/* Counts a header block's frames as they begin, so a block far over the
 * limit fails its stream at once rather than after it all arrived. */
static int on_begin_frame(nghttp2_session *session, const nghttp2_frame_hd *hd, void *ud) {
  pc_GrpcEngine *e = ud;
  if (hd->type != NGHTTP2_HEADERS && hd->type != NGHTTP2_CONTINUATION) return 0;
  pc_GrpcStream *s = stream_of(session, hd->stream_id);
  if (s == NULL || s->failed) return 0;
  if (hd->type == NGHTTP2_HEADERS) s->block_wire = 0;
  s->block_wire += hd->length;
  if (s->block_wire > e->max_header_list) {
    fail(s, kPc_Code_ResourceExhausted, 1,
         "response header list of more than %zu bytes exceeds the limit of %zu bytes",
         e->max_header_list, e->max_header_list);
  }
  return 0;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  (void)ud;
  pc_GrpcStream *s = stream_of(session, frame->hd.stream_id);
  if (s) s->block_bytes = 0;
  return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud) {
  pc_GrpcEngine *e = ud;
  (void)flags;
  pc_GrpcStream *s = stream_of(session, frame->hd.stream_id);
  if (s == NULL || s->failed || frame->hd.type != NGHTTP2_HEADERS) return 0;
  s->block_bytes += namelen + valuelen + 32;
  if (s->block_bytes > e->max_header_list) {
    fail(s, kPc_Code_ResourceExhausted, 1,
         "response header list of more than %zu bytes exceeds the limit of %zu bytes",
         e->max_header_list, e->max_header_list);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  int trailers = frame->headers.cat != NGHTTP2_HCAT_RESPONSE;
  if (namelen > 0 && name[0] == ':') {
    if (!trailers && namelen == 7 && memcmp(name, ":status", 7) == 0) {
      int st = 0;
      for (size_t i = 0; i < valuelen && i < 3; i++) st = st * 10 + (value[i] - '0');
      s->http_status = st;
    }
    return 0;
  }
  if (!add_pair(s, trailers, name, namelen, value, valuelen)) {
    fail(s, kPc_Code_ResourceExhausted, 1, "out of memory reading response metadata");
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

/* Gives back to flow control what is not held in whole unread messages:
 * the part of a message still arriving is always taken (the reader needs
 * all of it), whole messages only as they are read. */
static void release_window(pc_GrpcStream *s) {
  size_t held = s->scan - s->rpos;
  if (s->failed || !s->grpc_body) held = 0;
  if (s->unconsumed > held && s->e) {
    nghttp2_session_consume(s->e->session, s->id, s->unconsumed - held);
    s->unconsumed = held;
  }
}

/* Checks each length prefix and flag as soon as they are here, before the
 * body; returns how many messages became whole. */
static int scan_messages(pc_GrpcStream *s) {
  pc_GrpcEngine *e = s->e;
  int whole = 0;
  while (!s->failed && s->in.len - s->scan >= 5) {
    const unsigned char *h = (const unsigned char *)s->in.p + s->scan;
    uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
    if (h[0] > 1) {
      fail(s, kPc_Code_Internal, 1, "response message has an invalid flags byte 0x%02x", h[0]);
      break;
    }
    if (h[0] == 1) {
      const pc_GrpcPair *enc = find_pair(s, 0, "grpc-encoding");
      if (enc == NULL || enc->value_len == 0 ||
          (enc->value_len == 8 && memcmp(enc->value, "identity", 8) == 0)) {
        fail(s, kPc_Code_Internal, 1,
             "response message is compressed but no grpc-encoding was given");
        break;
      }
      if (!(enc->value_len == 4 && memcmp(enc->value, "gzip", 4) == 0)) {
        fail(s, kPc_Code_Internal, 1, "response grpc-encoding '%.*s' was not offered (gzip only)",
             (int)(enc->value_len > 32 ? 32 : enc->value_len), enc->value);
        break;
      }
    }
    if (len > e->max_receive) {
      fail(s, kPc_Code_ResourceExhausted, 1,
           "response message of %lu bytes exceeds the receive limit of %zu bytes",
           (unsigned long)len, e->max_receive);
      break;
    }
    if (s->in.len - s->scan - 5 < len) break;
    s->scan += 5 + (size_t)len;
    whole++;
  }
  return whole;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud) {
  (void)flags;
  (void)ud;
  pc_GrpcStream *s = stream_of(session, id);
  if (s == NULL || s->failed || !s->grpc_body) {
    /* Nobody reads it (a freed or failed stream, an HTTP error page). */
    nghttp2_session_consume(session, id, len);
    return 0;
  }
  s->unconsumed += len;
  if (s->rpos > 0 && s->rpos == s->in.len) s->in.len = s->rpos = s->scan = 0;
  if (!buf_reserve(&s->m, &s->in, len)) {
    fail(s, kPc_Code_ResourceExhausted, 1, "out of memory reading the response");
    release_window(s);
    return 0;
  }
  memcpy(s->in.p + s->in.len, data, len);
  s->in.len += len;
  int whole = scan_messages(s);
  release_window(s);
  if (whole > 0) emit(s->e, s, kPc_GrpcEvent_Message);
  return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  pc_GrpcEngine *e = ud;
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    e->goaway = 1;
    e->goaway_last = frame->goaway.last_stream_id;
    emit(e, NULL, kPc_GrpcEvent_Goaway);
    return 0;
  }
  if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK)) {
    e->ping_pending = 0;
    return 0;
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  pc_GrpcStream *s = stream_of(session, frame->hd.stream_id);
  if (s == NULL) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_RESPONSE &&
      s->http_status >= 200) {
    s->headers_done = 1;
    const pc_GrpcPair *ct = find_pair(s, 0, "content-type");
    s->grpc_body = s->http_status == 200 && ct != NULL && ct->value_len >= 16 &&
                   memcmp(ct->value, "application/grpc", 16) == 0;
    emit(e, s, kPc_GrpcEvent_Headers);
  }
  if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) s->remote_ended = 1;
  return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *ud) {
  pc_GrpcEngine *e = ud;
  if (e->open > 0) e->open--;
  pc_GrpcStream *s = stream_of(session, id);
  if (s == NULL) return 0;
  s->closed = 1;
  s->rst_code = code;
  /* Bytes still held count no more against the connection's window. */
  if (s->unconsumed > 0) nghttp2_session_consume_connection(session, s->unconsumed);
  s->unconsumed = 0;
  if (!s->failed && !s->ended) decide_status(s);
  end_stream(s);
  return 0;
}

/* A request nghttp2 could not send (GOAWAY or the end of the connection
 * came first): the server never saw it. */
static int on_not_sent(nghttp2_session *session, const nghttp2_frame *frame, int lib_error_code,
                       void *ud) {
  (void)ud;
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  pc_GrpcStream *s = stream_of(session, frame->hd.stream_id);
  if (s == NULL || s->ended) return 0;
  s->rst_code = NGHTTP2_REFUSED_STREAM;
  set_statusf(s, kPc_Code_Unavailable, "the call could not be sent: %s",
              nghttp2_strerror(lib_error_code));
  end_stream(s);
  return 0;
}

static ssize_t read_request(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                            uint32_t *data_flags, nghttp2_data_source *source, void *ud) {
  (void)source;
  (void)ud;
  pc_GrpcStream *s = stream_of(session, id);
  if (s == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  size_t left = s->out.len - s->out_pos;
  if (left == 0) {
    if (s->send_closed) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      return 0;
    }
    s->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t n = left < length ? left : length;
  memcpy(buf, s->out.p + s->out_pos, n);
  s->out_pos += n;
  if (s->out_pos == s->out.len) {
    s->out.len = s->out_pos = 0;
    if (s->send_closed) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    emit(s->e, s, kPc_GrpcEvent_Writable);
  }
  return (ssize_t)n;
}

static int on_error(nghttp2_session *session, int lib_error_code, const char *msg, size_t len,
                    void *ud) {
  pc_GrpcEngine *e = ud;
  (void)session;
  (void)lib_error_code;
  if (len >= sizeof e->why) len = sizeof e->why - 1;
  memcpy(e->why, msg, len);
  e->why[len] = '\0';
  return 0;
}

/* -- engine -------------------------------------------------------------- */

/* Ends every running stream UNAVAILABLE with 'why'. */
static void end_all(pc_GrpcEngine *e, const char *why) {
  for (pc_GrpcStream *s = e->streams; s; s = s->next) {
    if (s->ended) continue;
    s->failed = 1;
    s->status.code = kPc_Code_Unavailable;
    s->status.local = 0;
    set_message(s, why, strlen(why));
    end_stream(s);
  }
}

/* The connection can carry nothing more once nghttp2 wants neither to
 * read nor to write and the output is out. */
static void check_dead(pc_GrpcEngine *e) {
  if (e->dead) return;
  if (nghttp2_session_want_read(e->session) || nghttp2_session_want_write(e->session) ||
      e->out_pos < e->out.len)
    return;
  e->dead = 1;
  char why[PC_ERROR_MAX + 64];
  if (e->why[0])
    snprintf(why, sizeof why, "HTTP/2 connection error: %s", e->why);
  else
    snprintf(why, sizeof why, "the connection closed (GOAWAY) before the call ended");
  end_all(e, why);
}

pc_GrpcEngine *pc_GrpcEngine_New(const pc_GrpcEngineOptions *opts, pc_Alloc *alloc, void *ud,
                                 pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_GrpcEngine *e = alloc(ud, NULL, 0, sizeof *e);
  if (e == NULL) goto oom;
  memset(e, 0, sizeof *e);
  e->m.alloc = alloc;
  e->m.ud = ud;
  e->tls = opts->tls;
  e->on_event = opts->on_event;
  e->event_ud = opts->event_ud;
  e->max_receive = opts->max_receive ? opts->max_receive : PC_GRPC_DEFAULT_MAX_RECEIVE;
  e->max_header_list =
      opts->max_header_list ? opts->max_header_list : PC_GRPC_DEFAULT_MAX_HEADER_LIST;
  e->authority = dup_cstr(e, opts->authority ? opts->authority : "");
  e->user_agent = dup_cstr(e, opts->user_agent ? opts->user_agent : "protocall");
  if (e->authority == NULL || e->user_agent == NULL) goto fail;
  e->mem.mem_user_data = e;
  e->mem.malloc = ng_malloc;
  e->mem.free = ng_free;
  e->mem.calloc = ng_calloc;
  e->mem.realloc = ng_realloc;
  nghttp2_session_callbacks *cb;
  if (nghttp2_session_callbacks_new(&cb) != 0) goto fail;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
  nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_error_callback2(cb, on_error);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, on_not_sent);
  nghttp2_option *opt;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cb);
    goto fail;
  }
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_reserved_remote_streams(opt, 0);
  int r = nghttp2_session_client_new3(&e->session, cb, e, opt, &e->mem);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (r != 0) {
    e->session = NULL;
    goto fail;
  }
  uint32_t sw = opts->stream_window ? opts->stream_window : PC_GRPC_DEFAULT_STREAM_WINDOW;
  uint32_t cw =
      opts->connection_window ? opts->connection_window : PC_GRPC_DEFAULT_CONNECTION_WINDOW;
  if (sw > 0x7fffffff) sw = 0x7fffffff;
  if (cw > 0x7fffffff) cw = 0x7fffffff;
  size_t hl = e->max_header_list > 0xffffffffu ? 0xffffffffu : e->max_header_list;
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                 {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, sw},
                                 {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)hl}};
  if (nghttp2_submit_settings(e->session, NGHTTP2_FLAG_NONE, iv, 3) != 0) goto fail;
  if (nghttp2_session_set_local_window_size(e->session, NGHTTP2_FLAG_NONE, 0, (int32_t)cw) != 0)
    goto fail;
  return e;
fail:
  pc_GrpcEngine_Free(e);
oom:
  pc_Error_Set(err, "cannot start an HTTP/2 session: out of memory");
  return NULL;
}

void pc_GrpcEngine_Free(pc_GrpcEngine *e) {
  if (e == NULL) return;
  e->on_event = NULL; /* the driver is tearing down */
  if (!e->dead) {
    e->dead = 1;
    end_all(e, "the connection was closed");
  }
  for (pc_GrpcStream *s = e->streams; s; s = s->next) {
    if (e->session && s->id > 0) nghttp2_session_set_stream_user_data(e->session, s->id, NULL);
    s->e = NULL;
  }
  if (e->session) nghttp2_session_del(e->session);
  buf_free(&e->m, &e->out);
  free_cstr(e, e->authority);
  free_cstr(e, e->user_agent);
  mem(&e->m, e, sizeof *e, 0);
}

int pc_GrpcEngine_Recv(pc_GrpcEngine *e, const void *data, size_t len) {
  if (e->dead) return 0;
  ssize_t r = nghttp2_session_mem_recv(e->session, data, len);
  if (r < 0) {
    e->dead = 1;
    char why[PC_ERROR_MAX + 64];
    snprintf(why, sizeof why, "HTTP/2 connection error: %s",
             e->why[0] ? e->why : nghttp2_strerror((int)r));
    end_all(e, why);
    return 0;
  }
  check_dead(e);
  return !e->dead;
}

size_t pc_GrpcEngine_Output(pc_GrpcEngine *e, const char **data) {
  if (e->out_pos == e->out.len && !e->dead) {
    e->out.len = e->out_pos = 0;
    while (e->out.len < OUTPUT_CHUNK) {
      const uint8_t *p;
      ssize_t n = nghttp2_session_mem_send(e->session, &p);
      if (n < 0) {
        e->dead = 1;
        char why[PC_ERROR_MAX];
        snprintf(why, sizeof why, "HTTP/2 session failed: %s", nghttp2_strerror((int)n));
        end_all(e, why);
        break;
      }
      if (n == 0) break;
      if (!buf_reserve(&e->m, &e->out, (size_t)n)) {
        e->dead = 1;
        end_all(e, "out of memory sending");
        break;
      }
      memcpy(e->out.p + e->out.len, p, (size_t)n);
      e->out.len += (size_t)n;
    }
  }
  *data = e->out.p + e->out_pos;
  return e->out.len - e->out_pos;
}

void pc_GrpcEngine_Wrote(pc_GrpcEngine *e, size_t n) {
  size_t left = e->out.len - e->out_pos;
  e->out_pos += n < left ? n : left;
  check_dead(e);
}

void pc_GrpcEngine_Lost(pc_GrpcEngine *e, const char *why) {
  e->dead = 1;
  end_all(e, why);
}

int pc_GrpcEngine_CanOpen(const pc_GrpcEngine *e) {
  if (e->dead || e->goaway) return 0;
  uint32_t max =
      nghttp2_session_get_remote_settings(e->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return e->open < max && nghttp2_session_get_next_stream_id(e->session) < 0x7ffffff0;
}

int pc_GrpcEngine_Alive(const pc_GrpcEngine *e) {
  return !e->dead;
}

size_t pc_GrpcEngine_Running(const pc_GrpcEngine *e) {
  return e->running;
}

int pc_GrpcEngine_GoawayReceived(const pc_GrpcEngine *e) {
  return e->goaway;
}

int pc_GrpcEngine_Ping(pc_GrpcEngine *e) {
  if (e->dead || e->ping_pending) return 0;
  if (nghttp2_submit_ping(e->session, NGHTTP2_FLAG_NONE, NULL) != 0) return 0;
  e->ping_pending = 1;
  return 1;
}

int pc_GrpcEngine_PingPending(const pc_GrpcEngine *e) {
  return e->ping_pending;
}

/* -- streams ------------------------------------------------------------- */

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

static int submit(pc_GrpcStream *s, const char *path, const pc_GrpcCallSettings *set) {
  pc_GrpcEngine *e = s->e;
  size_t n = 0, max = 11 + set->metadata_count;
  nghttp2_nv *h = pc_Arena_Malloc(s->arena, max * sizeof *h);
  if (h == NULL) return 0;
  h[n++] = NV(":method", "POST");
  h[n++] = NV(":scheme", e->tls ? "https" : "http");
  h[n++] = NV(":path", path);
  h[n++] = NV(":authority", e->authority);
  h[n++] = NV("content-type", "application/grpc");
  h[n++] = NV("te", "trailers");
  h[n++] = NV("user-agent", e->user_agent);
  h[n++] = NV("grpc-accept-encoding", "gzip");
  if (set->gzip) h[n++] = NV("grpc-encoding", "gzip");
  if (set->timeout >= 0) {
    char *t = pc_Arena_Malloc(s->arena, 16);
    if (t == NULL) return 0;
    pc_Grpc_FormatTimeout(set->timeout > 0 ? set->timeout : 1e-9, t);
    h[n++] = NV("grpc-timeout", t);
  }
  if (set->previous_attempts > 0) {
    char *a = pc_Arena_Malloc(s->arena, 12);
    if (a == NULL) return 0;
    snprintf(a, 12, "%u", set->previous_attempts);
    h[n++] = NV("grpc-previous-rpc-attempts", a);
  }
  for (size_t i = 0; i < set->metadata_count; i++) {
    const pc_GrpcPair *p = &set->metadata[i];
    const char *v = p->value;
    size_t vn = p->value_len;
    if (pc_Grpc_IsBinKey(p->key, p->key_len)) {
      char *b = pc_Arena_Malloc(s->arena, p->value_len / 3 * 4 + 8);
      if (b == NULL) return 0;
      vn = pc_Grpc_Base64Encode((const unsigned char *)p->value, p->value_len, b);
      v = b;
    }
    h[n++] = nv(p->key, p->key_len, v, vn);
  }
  nghttp2_data_provider prd;
  prd.source.ptr = s;
  prd.read_callback = read_request;
  int32_t id = nghttp2_submit_request(e->session, NULL, h, n, &prd, s);
  if (id < 0) return 0;
  s->id = id;
  e->open++;
  return 1;
}

pc_GrpcStream *pc_GrpcEngine_Open(pc_GrpcEngine *e, const char *path,
                                  const pc_GrpcCallSettings *settings, void *user, pc_Error *err) {
  if (!pc_Grpc_PathCheck(path, err)) return NULL;
  for (size_t i = 0; i < settings->metadata_count; i++) {
    if (!pc_GrpcPair_Check(&settings->metadata[i], err)) return NULL;
  }
  if (!pc_GrpcEngine_CanOpen(e)) {
    pc_Error_Set(err, "the connection takes no new streams");
    return NULL;
  }
  pc_GrpcStream *s = mem(&e->m, NULL, 0, sizeof *s);
  if (s == NULL) goto oom;
  memset(s, 0, sizeof *s);
  s->m = e->m;
  s->e = e;
  s->user = user;
  s->gzip = settings->gzip;
  s->status.message = "";
  s->status.details = "";
  s->arena = pc_Arena_New(e->m.alloc, e->m.ud);
  if (s->arena == NULL || !submit(s, path, settings)) {
    if (s->arena) pc_Arena_Free(s->arena);
    mem(&e->m, s, sizeof *s, 0);
    goto oom;
  }
  s->next = e->streams;
  if (e->streams) e->streams->prev = s;
  e->streams = s;
  e->running++;
  return s;
oom:
  pc_Error_Set(err, "cannot start a call: out of memory");
  return NULL;
}

static int frame_message(pc_GrpcStream *s, const void *msg, size_t len) {
  if (s->out_pos > 0 && s->out_pos == s->out.len) s->out.len = s->out_pos = 0;
  return pc_Grpc_FrameMessage(s->m.alloc, s->m.ud, &s->out, msg, len, s->gzip);
}

static void resume(pc_GrpcStream *s) {
  if (s->deferred && s->e && !s->closed) {
    s->deferred = 0;
    nghttp2_session_resume_data(s->e->session, s->id);
  }
}

int pc_GrpcStream_Send(pc_GrpcStream *s, const void *msg, size_t len) {
  if (s->ended || s->send_closed || s->e == NULL) return 0;
  if (!frame_message(s, msg, len)) {
    fail(s, kPc_Code_ResourceExhausted, 1, "out of memory framing a request message");
    return 0;
  }
  resume(s);
  return 1;
}

size_t pc_GrpcStream_Unsent(const pc_GrpcStream *s) {
  return s->out.len - s->out_pos;
}

void pc_GrpcStream_CloseSend(pc_GrpcStream *s) {
  if (s->send_closed) return;
  s->send_closed = 1;
  resume(s);
}

static int take_message(pc_GrpcStream *s, const char **data, size_t *len) {
  const unsigned char *h = (const unsigned char *)s->in.p + s->rpos;
  size_t n = (size_t)((uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4]);
  const char *body = s->in.p + s->rpos + 5;
  s->rpos += 5 + n;
  if (h[0] == 0) {
    *data = body;
    *len = n;
    return 1;
  }
  size_t max = s->e->max_receive;
  size_t out = pc_Grpc_Gunzip(s->m.alloc, s->m.ud, body, n, max, &s->dbuf.p, &s->dbuf.cap);
  if (out == (size_t)-2) {
    fail(s, kPc_Code_ResourceExhausted, 1,
         "decompressed response message exceeds the receive limit of %zu bytes", max);
    return 0;
  }
  if (out == (size_t)-3) {
    fail(s, kPc_Code_ResourceExhausted, 1, "out of memory decompressing a response");
    return 0;
  }
  if (out == (size_t)-1) {
    fail(s, kPc_Code_Internal, 1, "response message is not valid gzip");
    return 0;
  }
  s->dbuf.len = out;
  *data = s->dbuf.p;
  *len = s->dbuf.len;
  return 1;
}

int pc_GrpcStream_Next(pc_GrpcStream *s, const char **data, size_t *len) {
  if (s->rpos > 0 && s->e) {
    /* Drop what was read (the caller is done with the last message). */
    memmove(s->in.p, s->in.p + s->rpos, s->in.len - s->rpos);
    s->in.len -= s->rpos;
    s->scan -= s->rpos;
    s->rpos = 0;
  }
  if (!s->failed && s->rpos < s->scan && s->e) {
    int ok = take_message(s, data, len);
    release_window(s);
    if (ok) return 1;
  }
  return s->ended ? -1 : 0;
}

void pc_GrpcStream_Cancel(pc_GrpcStream *s, pc_Code code, const char *message) {
  if (s->ended) return;
  fail(s, code, 0, "%s", message);
  release_window(s);
}

const pc_GrpcStatus *pc_GrpcStream_Status(const pc_GrpcStream *s) {
  return s->ended ? &s->status : NULL;
}

int pc_GrpcStream_HeadersDone(const pc_GrpcStream *s) {
  return s->headers_done || s->ended;
}

size_t pc_GrpcStream_Buffered(const pc_GrpcStream *s) {
  return s->in.cap;
}

size_t pc_GrpcStream_MetadataCount(const pc_GrpcStream *s, int trailers) {
  return s->pairs[trailers ? 1 : 0].count;
}

const pc_GrpcPair *pc_GrpcStream_Metadata(const pc_GrpcStream *s, int trailers, size_t i) {
  const Pairs *ps = &s->pairs[trailers ? 1 : 0];
  return i < ps->count ? &ps->items[i] : NULL;
}

int pc_GrpcStream_Refused(const pc_GrpcStream *s) {
  if (!s->ended || s->headers_done || s->remote_ended) return 0;
  if (s->failed) return 0;
  return s->rst_code == NGHTTP2_REFUSED_STREAM;
}

void *pc_GrpcStream_User(const pc_GrpcStream *s) {
  return s->user;
}

void pc_GrpcStream_Free(pc_GrpcStream *s) {
  if (s == NULL) return;
  pc_GrpcEngine *e = s->e;
  if (e) {
    if (!s->ended) fail(s, kPc_Code_Cancelled, 0, "cancelled");
    if (!s->closed) {
      if (s->unconsumed > 0) nghttp2_session_consume_connection(e->session, s->unconsumed);
      nghttp2_session_set_stream_user_data(e->session, s->id, NULL);
    }
    if (s->prev)
      s->prev->next = s->next;
    else
      e->streams = s->next;
    if (s->next) s->next->prev = s->prev;
  }
  pc_Arena_Free(s->arena);
  Mem m = s->m;
  buf_free(&m, &s->out);
  buf_free(&m, &s->in);
  buf_free(&m, &s->dbuf);
  mem(&m, s, sizeof *s, 0);
}
