/* The sans-I/O gRPC client engine on nghttp2 (see engine.h).
 *
 * nghttp2 does HTTP/2 (framing, HPACK, stream states, flow-control
 * accounting); this file does what gRPC adds on top: request headers,
 * length-prefixed messages, gzip, the status of a call from what arrived,
 * and when to open the receive window (automatic WINDOW_UPDATE is off: a
 * stream's bytes are given back as its messages are read). */
#define _POSIX_C_SOURCE 200809L

#include "net/engine.h"
#include "net/http1_client.h"
#include "net/session_internal.h"
#include "net/web.h"

#include <nghttp2/nghttp2.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pc_GrpcStream {
  pc_GrpcMem m;     /* a stream outlives its engine, detached */
  pc_GrpcEngine *e; /* NULL once the engine is gone */
  pc_GrpcStream *prev, *next;
  void *user;
  pc_Arena *arena; /* metadata, status message and details */
  int own_arena;   /* 'arena' (and the stream) are the stream's to free, not lent */
  int32_t id;
  int gzip;
  pc_GrpcOutbox out; /* framed request messages */
  int send_closed;   /* pc_GrpcStream_CloseSend was called */
  pc_GrpcInbox in;   /* the response body */
  int http_status;
  int gzip_in;      /* the response's grpc-encoding is gzip */
  int headers_done; /* the response header block is complete */
  int grpc_body;    /* the response is HTTP 200 application/grpc */
  int remote_ended; /* END_STREAM arrived */
  int closed;       /* nghttp2 closed the stream */
  uint32_t rst_code;
  int refused; /* nghttp2 error code of a frame of the server's this side reset the stream for */
  size_t block_wire; /* of the header block being received, as HEADERS and CONTINUATION frames */
  pc_GrpcPairs pairs[2]; /* headers, trailers */
  int ended;             /* 'status' is final */
  int failed;            /* ...set by this side (a local failure or a cancel) */
  pc_GrpcStatus status;
  pc_WebProtocol proto; /* gRPC, gRPC-Web or Connect (unary, streaming) */
  int json;             /* ...its codec is JSON */
  int text;             /* gRPC-Web-Text: both bodies in base64 ('proto' GrpcWeb) */
  pc_WebBase64 b64;     /* ...the response's decoder, across DATA frames */
  int web_end;          /* gRPC-Web's trailers or Connect's end-of-stream message was read */
  int web_status;       /* ...and 'status' came from it (Connect) */
  int held;             /* the request waits for the peer's SETTINGS (not submitted) */
  int get;              /* a Connect GET: submitted by the first Send, its message the query */
  nghttp2_nv *req;      /* ...its header fields, copied into 'arena' */
  size_t req_count;     /* ...how many */
};

struct pc_GrpcEngine {
  pc_GrpcSession h2;      /* first: the engine is its block (pc_GrpcSession_New) */
  pc_GrpcStream *streams; /* every stream not yet freed */
  size_t running;         /* streams not yet ended */
  size_t open;            /* streams nghttp2 has not closed */
  char *authority;
  char *user_agent;
  int tls;
  size_t max_receive, max_header_list;
  pc_GrpcEventFn *on_event;
  void *event_ud;
  int goaway;
  int32_t goaway_last;
  int ping_pending;   /* a PING of pc_GrpcEngine_Ping awaits its ACK */
  int settings_in;    /* the peer's SETTINGS arrived (its limits are known) */
  pc_Http1Client *h1; /* HTTP/1.1: the connection the session speaks through (else NULL) */
};
_Static_assert(offsetof(pc_GrpcEngine, h2) == 0, "an engine's block starts with its session");

/* -- memory ------------------------------------------------------------ */

static char *dup_cstr(pc_GrpcEngine *e, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = pc_GrpcMem_Alloc(&e->h2.m, NULL, 0, n);
  if (p) memcpy(p, s, n);
  return p;
}

static void free_cstr(pc_GrpcEngine *e, char *s) {
  if (s) pc_GrpcMem_Alloc(&e->h2.m, s, strlen(s) + 1, 0);
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
  if (s->held || (s->get && s->id == 0 && !s->closed)) {
    /* never submitted (held for SETTINGS, or a Connect GET that ended before
     * its message): nghttp2 has no such stream */
    s->held = 0;
    s->closed = 1;
    if (s->e) s->e->open--;
  }
  if (s->e) {
    s->e->running--;
    emit(s->e, s, kPc_GrpcEvent_End);
  }
}

/* 'code' and the formatted message as the status. */
static void statusv(pc_GrpcStream *s, pc_Code code, const char *fmt, va_list ap) {
  char text[PC_ERROR_MAX];
  size_t n = pc_Grpc_VFormat(text, sizeof text, fmt, ap);
  s->status.code = code;
  s->status.peer = 0; /* this side's text */
  set_message(s, text, n);
}

static void failv(pc_GrpcStream *s, pc_Code code, int local, const char *fmt, va_list ap) {
  s->failed = 1;
  s->status.local = local;
  s->status.unsent = s->status.lost = 0;
  s->status.has_pushback = s->status.no_retry = 0;
  s->status.details = "";
  s->status.details_len = 0;
  statusv(s, code, fmt, ap);
}

/* Sends RST_STREAM 'code' unless the stream is closed already. */
static void reset(pc_GrpcStream *s, uint32_t code) {
  if (s->e && !s->closed && s->id > 0 && !s->e->h2.dead)
    nghttp2_submit_rst_stream(s->e->h2.session, NGHTTP2_FLAG_NONE, s->id, code);
}

/* A failure found on this side: the status is final whatever arrives
 * later, buffered messages are dropped and the stream is reset. */
static void fail(pc_GrpcStream *s, pc_Code code, int local, const char *fmt, ...)
    PC_GRPC_PRINTF(4, 5);

static void fail(pc_GrpcStream *s, pc_Code code, int local, const char *fmt, ...) {
  if (s->failed) return;
  va_list ap;
  va_start(ap, fmt);
  failv(s, code, local, fmt, ap);
  va_end(ap);
  pc_GrpcInbox_Clear(&s->in);
  reset(s, NGHTTP2_CANCEL);
  end_stream(s);
}

static int key_is(const pc_GrpcPair *p, const char *k) {
  size_t n = strlen(k);
  return p->key_len == n && memcmp(p->key, k, n) == 0;
}

static const pc_GrpcPair *find_pair(const pc_GrpcStream *s, int block, const char *key) {
  const pc_GrpcPairs *ps = &s->pairs[block];
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

static void set_statusf(pc_GrpcStream *s, pc_Code code, const char *fmt, ...) PC_GRPC_PRINTF(3, 4);

static void set_statusf(pc_GrpcStream *s, pc_Code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  statusv(s, code, fmt, ap);
  va_end(ap);
}

static void read_pushback(pc_GrpcStream *s) {
  const pc_GrpcPair *pb = find_pair(s, 1, "grpc-retry-pushback-ms");
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
 * grpc-status from the trailers or a Trailers-Only block (which became the
 * trailers) once the response is complete, else the reset, GOAWAY or HTTP
 * status. A grpc-status among the response headers of a response that
 * goes on is not the status: the C++ client reads the messages after it
 * and takes the status from the trailers (UNKNOWN without them). */
static void decide_status(pc_GrpcStream *s) {
  pc_GrpcEngine *e = s->e;
  const pc_GrpcPair *gs = find_pair(s, 1, "grpc-status");
  if (s->remote_ended && s->web_status) return; /* Connect's status, read at the end */
  if (s->remote_ended && s->proto == kPc_WebProtocol_ConnectStream) {
    if (s->http_status != 200)
      set_statusf(s, pc_Code_FromHttpStatus(s->http_status),
                  "Connect stream failed with HTTP status %d", s->http_status);
    else
      set_statusf(s, kPc_Code_Internal, "Connect stream ended without its end-of-stream message");
    return;
  }
  if (!s->remote_ended) {
    if (e && e->goaway && s->id > e->goaway_last) {
      set_statusf(s, kPc_Code_Unavailable,
                  "the server sent GOAWAY (last stream %ld) before taking the call",
                  (long)e->goaway_last);
    } else if (s->refused) {
      set_statusf(s, code_from_rst(s->rst_code),
                  "invalid response from the server: %s (this client reset the stream: "
                  "RST_STREAM %s (%lu))",
                  nghttp2_strerror(s->refused), nghttp2_http2_strerror(s->rst_code),
                  (unsigned long)s->rst_code);
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
    s->status.peer = 1;
    const pc_GrpcPair *gm = find_pair(s, 1, "grpc-message");
    if (gm != NULL) {
      char *m = pc_Arena_StrDup(s->arena, gm->value, gm->value_len);
      if (m != NULL) {
        size_t n = pc_Grpc_PercentDecode(m, gm->value_len);
        m[n] = '\0';
        s->status.message = m;
        s->status.message_len = n;
      }
    }
    const pc_GrpcPair *gd = find_pair(s, 1, "grpc-status-details-bin");
    if (gd != NULL) {
      s->status.details = gd->value;
      s->status.details_len = gd->value_len;
    }
    read_pushback(s);
  } else {
    /* http-grpc-status-mapping.md; 431 (header list too large) is a
     * failure of this side's request. */
    pc_Code code =
        s->http_status == 431 ? kPc_Code_Internal : pc_Code_FromHttpStatus(s->http_status);
    set_statusf(s, code, "no grpc-status in the response (HTTP status %d)", s->http_status);
  }
  if (s->status.code == kPc_Code_Ok && pc_GrpcInbox_Partial(&s->in) > 0) {
    set_statusf(s, kPc_Code_Internal, "response ended inside a message (%zu bytes left over)",
                pc_GrpcInbox_Partial(&s->in));
  }
}

/* -- nghttp2 callbacks --------------------------------------------------- */

static pc_GrpcStream *stream_of(nghttp2_session *session, int32_t id) {
  return nghttp2_session_get_stream_user_data(session, id);
}

/* The session of a stream nghttp2 has not closed, NULL once closed or
 * detached. */
static nghttp2_session *live(const pc_GrpcStream *s) {
  return s->e && !s->closed ? s->e->h2.session : NULL;
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

static int on_header(void *ud, void *stream, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, int over) {
  pc_GrpcEngine *e = ud;
  pc_GrpcStream *s = stream;
  if (s->failed) return 0;
  if (over) {
    fail(s, kPc_Code_ResourceExhausted, 1,
         "response header list of more than %zu bytes exceeds the limit of %zu bytes",
         e->max_header_list, e->max_header_list);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  (void)frame;
  /* Blocks before the final response headers are response headers (a 1xx
   * block first, nghttp2 checks the order); those after it trailers. */
  int trailers = s->headers_done;
  if (namelen > 0 && name[0] == ':') {
    if (!trailers && namelen == 7 && memcmp(name, ":status", 7) == 0) {
      int st = 0;
      for (size_t i = 0; i < valuelen && i < 3; i++) st = st * 10 + (value[i] - '0');
      s->http_status = st;
    }
    return 0;
  }
  /* An informational (1xx) block's fields are not metadata; kept, endless
   * 1xx blocks would grow the arena. (Pseudo headers come first.) */
  if (!trailers && s->http_status < 200) return 0;
  if (!trailers && s->proto == kPc_WebProtocol_ConnectUnary && namelen > 8 &&
      memcmp(name, "trailer-", 8) == 0) {
    /* Connect unary: its trailers are headers named trailer-KEY */
    trailers = 1;
    name += 8;
    namelen -= 8;
  }
  if (!pc_GrpcPairs_Add(&s->pairs[trailers], s->arena, (const char *)name, namelen,
                        (const char *)value, valuelen, 1)) {
    fail(s, kPc_Code_ResourceExhausted, 1, "out of memory reading response metadata");
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

/* Gives back to flow control what is not held in whole unread messages
 * (everything once nobody reads them). */
static void release_window(pc_GrpcStream *s) {
  pc_GrpcInbox_Release(&s->in, live(s), s->id, !s->failed && s->grpc_body);
}

/* A message that could not be read fails the stream. */
static void fail_read(pc_GrpcStream *s, pc_GrpcRead r) {
  char text[PC_ERROR_MAX];
  pc_Code code = pc_GrpcInbox_Failure(&s->in, r, s->e->max_receive, "response", "the receive limit",
                                      text, sizeof text);
  fail(s, code, 1, "%s", text);
}

/* -- gRPC-Web and Connect ------------------------------------------------- */

static int add_trailer(void *ud, const char *k, size_t kn, const char *v, size_t vn) {
  pc_GrpcStream *s = ud;
  return pc_GrpcPairs_Add(&s->pairs[1], s->arena, k, kn, v, vn, 1);
}

/* A Connect error read (or the code of the HTTP status when it came
 * without one) as the status. */
static void connect_status(pc_GrpcStream *s, const pc_ConnectError *ce) {
  s->web_status = 1;
  s->status.code = ce->present ? ce->code : kPc_Code_Ok;
  s->status.peer = 1;
  s->status.message = ce->present ? ce->message : "";
  s->status.message_len = ce->present ? ce->message_len : 0;
  s->status.details = ce->present ? ce->details : "";
  s->status.details_len = ce->present ? ce->details_len : 0;
}

/* The body of the end message at the inbox's 'scan' (its prefix and body
 * whole, 'n' bytes after the prefix): gRPC-Web's trailers, Connect's
 * end-of-stream JSON. */
static void read_end(pc_GrpcStream *s, const unsigned char *h, size_t n) {
  const char *body = (const char *)h + 5;
  const char *what =
      s->proto == kPc_WebProtocol_GrpcWeb ? "gRPC-Web trailers message" : "end-of-stream message";
  char *plain = NULL;
  size_t cap = 0;
  if (h[0] & 1) {
    if (!s->gzip_in) {
      fail(s, kPc_Code_Internal, 1, "%s is compressed but no encoding was given", what);
      return;
    }
    size_t got = pc_Grpc_Gunzip(s->m.alloc, s->m.ud, body, n, s->e->max_receive, &plain, &cap);
    if (got >= (size_t)-3) {
      if (plain) s->m.alloc(s->m.ud, plain, cap, 0);
      fail(s, got == (size_t)-2 ? kPc_Code_ResourceExhausted : kPc_Code_Internal, 1, "%s %s", what,
           got == (size_t)-2 ? "exceeds the receive limit once decompressed" : "is not gzip");
      return;
    }
    body = plain;
    n = got;
  }
  pc_Error err;
  pc_Error_Init(&err);
  int ok;
  if (s->proto == kPc_WebProtocol_ConnectStream) {
    pc_ConnectError ce = {0};
    ce.code = kPc_Code_Unknown;
    ok = pc_Connect_ParseEndStream(s->arena, body, n, &ce, add_trailer, s, &err);
    if (ok) connect_status(s, &ce);
  } else {
    ok = pc_Web_ParseGrpcWebTrailers(s->arena, body, n, add_trailer, s, &err);
  }
  if (plain) s->m.alloc(s->m.ud, plain, cap, 0);
  if (!ok) fail(s, kPc_Code_Internal, 1, "invalid %s: %s", what, err.msg);
}

/* Scan stopped at a flags byte gRPC does not have: the end message of
 * gRPC-Web (0x80) or Connect streaming (0x02) is read once whole and taken
 * out of the body; 0 for any other flags. */
static int web_end_message(pc_GrpcStream *s) {
  pc_GrpcInbox *b = &s->in;
  const unsigned char *h = (const unsigned char *)b->buf.p + b->scan;
  int end = s->proto == kPc_WebProtocol_GrpcWeb         ? (h[0] & ~1u) == 0x80
            : s->proto == kPc_WebProtocol_ConnectStream ? (h[0] & ~1u) == 0x02
                                                        : 0;
  if (!end) return 0;
  size_t n = pc_GrpcInbox_Expected(b) - 5;
  if (n > s->e->max_receive) {
    fail(s, kPc_Code_ResourceExhausted, 1, "%s of %zu bytes exceeds the limit of %zu bytes",
         s->proto == kPc_WebProtocol_GrpcWeb ? "gRPC-Web trailers" : "end-of-stream message", n,
         s->e->max_receive);
    return 1;
  }
  if (b->buf.len - b->scan - 5 < n) return 1; /* the rest is on its way */
  if (b->buf.len - b->scan - 5 > n) {
    fail(s, kPc_Code_Internal, 1, "response data after its %s",
         s->proto == kPc_WebProtocol_GrpcWeb ? "trailers" : "end-of-stream message");
    return 1;
  }
  s->web_end = 1;
  read_end(s, h, n);
  b->buf.len = b->scan; /* its bytes were counted: flow control gives them back */
  return 1;
}

/* Checks each length prefix and flag as soon as they are here, before the
 * body; returns how many messages became whole. */
static int scan_messages(pc_GrpcStream *s) {
  pc_GrpcEngine *e = s->e;
  int whole;
  pc_GrpcRead r = pc_GrpcInbox_Scan(&s->in, e->max_receive, s->gzip_in, &whole);
  if (r == kPc_GrpcRead_BadFlags && web_end_message(s)) return whole;
  if (r == kPc_GrpcRead_Compressed) {
    const pc_GrpcPair *enc = find_pair(s, 0, "grpc-encoding");
    if (enc == NULL || enc->value_len == 0 ||
        (enc->value_len == 8 && memcmp(enc->value, "identity", 8) == 0)) {
      fail(s, kPc_Code_Internal, 1,
           "response message is compressed but no grpc-encoding was given");
    } else {
      fail(s, kPc_Code_Internal, 1, "response grpc-encoding '%.*s' was not offered (gzip only)",
           (int)(enc->value_len > 32 ? 32 : enc->value_len), enc->value);
    }
  } else if (r != kPc_GrpcRead_Ok) {
    fail_read(s, r);
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
  if (s->web_end) {
    fail(s, kPc_Code_Internal, 1, "response data after its %s",
         s->proto == kPc_WebProtocol_GrpcWeb ? "trailers" : "end-of-stream message");
    release_window(s);
    return 0;
  }
  if (s->proto == kPc_WebProtocol_ConnectUnary) {
    /* The body is one message (or the error JSON), read at its end: its
     * window goes back at once, the bytes held are bounded by the limit. */
    nghttp2_session_consume(session, id, len);
    if (s->in.buf.len - 5 + len > s->e->max_receive) {
      fail(s, kPc_Code_ResourceExhausted, 1,
           "response of at least %zu bytes exceeds the limit of %zu bytes", s->in.buf.len - 5 + len,
           s->e->max_receive);
      return 0;
    }
    int ok = len == 0 || pc_GrpcInbox_Append(&s->in, &s->m, data, len);
    s->in.unconsumed -= len;
    if (!ok) fail(s, kPc_Code_ResourceExhausted, 1, "out of memory reading the response");
    return 0;
  }
  unsigned char *plain = NULL;
  size_t wire = len, cap = len / 4 * 3 + 3;
  if (s->text && len > 0) { /* base64, split anywhere across frames */
    plain = pc_GrpcMem_Alloc(&s->m, NULL, 0, cap);
    size_t at = 0;
    size_t n = plain ? pc_WebBase64_Decode(&s->b64, (const char *)data, len, plain, &at) : 0;
    if (plain == NULL || n == (size_t)-1) {
      if (plain) pc_GrpcMem_Alloc(&s->m, plain, cap, 0);
      nghttp2_session_consume(session, id, len);
      if (plain == NULL)
        fail(s, kPc_Code_ResourceExhausted, 1, "out of memory reading the response");
      else
        fail(s, kPc_Code_Internal, 1,
             "gRPC-Web-Text response: not base64 at byte %zu of a "
             "DATA frame",
             at);
      return 0;
    }
    nghttp2_session_consume(session, id, wire - n); /* what decoding took off */
    data = plain;
    len = n;
  }
  int appended = len == 0 || pc_GrpcInbox_Append(&s->in, &s->m, data, len);
  if (plain) pc_GrpcMem_Alloc(&s->m, plain, cap, 0);
  if (!appended) {
    fail(s, kPc_Code_ResourceExhausted, 1, "out of memory reading the response");
    release_window(s);
    return 0;
  }
  int whole = scan_messages(s);
  release_window(s);
  if (whole > 0) emit(s->e, s, kPc_GrpcEvent_Message);
  return 0;
}

static void release_held(pc_GrpcEngine *e);

/* The end of a Connect unary response: HTTP 200 makes its body the
 * message (the prefix gets its length now) and the status OK; another
 * status reads the body as the error JSON, or takes the code of the HTTP
 * status when it is not one (Connect's mapping is gRPC's). */
static void unary_end(pc_GrpcStream *s) {
  pc_GrpcInbox *b = &s->in;
  if (b->buf.len < 5) return;
  size_t n = b->buf.len - 5;
  unsigned char *h = (unsigned char *)b->buf.p;
  pc_ConnectError ce = {0};
  if (s->http_status == 200) {
    h[0] = (unsigned char)(s->gzip_in ? 1 : 0);
    h[1] = (unsigned char)(n >> 24);
    h[2] = (unsigned char)(n >> 16);
    h[3] = (unsigned char)(n >> 8);
    h[4] = (unsigned char)n;
    connect_status(s, &ce);
    s->web_end = 1;
    if (scan_messages(s) > 0) emit(s->e, s, kPc_GrpcEvent_Message);
    return;
  }
  const pc_GrpcPair *ct = find_pair(s, 0, "content-type");
  pc_Code http = pc_Code_FromHttpStatus(s->http_status);
  ce.code = http;
  pc_Error err;
  pc_Error_Init(&err);
  int json = ct != NULL && ct->value_len >= 16 && memcmp(ct->value, "application/json", 16) == 0;
  const char *body = b->buf.p + 5;
  char *plain = NULL;
  size_t cap = 0;
  if (json && s->gzip_in) { /* an error JSON may be gzipped as a message is */
    size_t got = pc_Grpc_Gunzip(s->m.alloc, s->m.ud, body, n, s->e->max_receive, &plain, &cap);
    if (got >= (size_t)-3) {
      json = 0;
      snprintf(err.msg, sizeof err.msg, "%s",
               got == (size_t)-2 ? "larger than the receive limit" : "not gzip");
    } else {
      body = plain;
      n = got;
    }
  }
  int parsed = json && pc_Connect_ParseError(s->arena, body, n, &ce, &err);
  if (plain) s->m.alloc(s->m.ud, plain, cap, 0);
  if (parsed) {
    connect_status(s, &ce);
  } else {
    s->web_status = 1;
    set_statusf(s, http, "HTTP status %d without Connect's error JSON%s%s", s->http_status,
                err.msg[0] ? ": " : "", err.msg);
  }
  s->web_end = 1;
  pc_GrpcInbox_Clear(b);
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  pc_GrpcEngine *e = ud;
  if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
    if (!e->settings_in) {
      e->settings_in = 1;
      release_held(e);
    }
    return 0;
  }
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
  if (frame->hd.type == NGHTTP2_HEADERS && !s->headers_done && s->http_status < 200) {
    /* An informational (1xx) block (RFC 9113 8.1): the response follows. */
    s->http_status = 0;
  } else if (frame->hd.type == NGHTTP2_HEADERS && !s->headers_done) {
    s->headers_done = 1;
    const pc_GrpcPair *ct = find_pair(s, 0, "content-type");
    s->grpc_body = s->http_status == 200 && ct != NULL && ct->value_len >= 16 &&
                   memcmp(ct->value, "application/grpc", 16) == 0;
    /* The header block is whole: no message comes before it. */
    const char *enc_name = "grpc-encoding";
    if (s->proto == kPc_WebProtocol_ConnectStream) {
      s->grpc_body = s->http_status == 200 && ct != NULL && ct->value_len >= 20 &&
                     memcmp(ct->value, "application/connect+", 20) == 0;
      enc_name = "connect-content-encoding";
    } else if (s->proto == kPc_WebProtocol_ConnectUnary) {
      enc_name = "content-encoding";
    }
    const pc_GrpcPair *enc = find_pair(s, 0, enc_name);
    s->gzip_in = enc != NULL && enc->value_len == 4 && memcmp(enc->value, "gzip", 4) == 0;
    if (s->proto == kPc_WebProtocol_ConnectUnary) {
      /* The message or the error JSON, held behind a prefix written at
       * the end (unary_end) */
      static const uint8_t none[5] = {0};
      s->grpc_body = 1;
      if (!pc_GrpcInbox_Append(&s->in, &s->m, none, 5))
        fail(s, kPc_Code_ResourceExhausted, 1, "out of memory reading the response");
      s->in.unconsumed -= 5;
    }
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && s->proto != kPc_WebProtocol_ConnectUnary &&
        s->proto != kPc_WebProtocol_ConnectStream) {
      /* Trailers-Only: its metadata is the trailers (grpc-core reads it so:
       * grpcio's trailing_metadata()), the headers stay empty. (Connect has
       * none: a unary body may be empty, its trailers are trailer-
       * headers.) */
      s->pairs[1] = s->pairs[0];
      memset(&s->pairs[0], 0, sizeof s->pairs[0]);
    }
    emit(e, s, kPc_GrpcEvent_Headers);
  }
  if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
    s->remote_ended = 1;
    if (s->proto == kPc_WebProtocol_ConnectUnary && !s->failed && s->headers_done) unary_end(s);
  }
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
  pc_GrpcInbox_Closed(&s->in, session);
  if (!s->failed && !s->ended) decide_status(s);
  end_stream(s);
  return 0;
}

/* A frame of the server's nghttp2 found invalid: it resets the stream
 * itself (the reset must not read as the server's). */
static int on_invalid_frame(nghttp2_session *session, const nghttp2_frame *frame,
                            int lib_error_code, void *ud) {
  (void)ud;
  pc_GrpcStream *s = stream_of(session, frame->hd.stream_id);
  if (s != NULL && !s->refused) s->refused = lib_error_code ? lib_error_code : NGHTTP2_ERR_PROTO;
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

/* The request body: the framed messages, the end once CloseSend ran. */
static ssize_t request_body(void *ud, void *stream, uint8_t *buf, size_t length,
                            uint32_t *data_flags) {
  pc_GrpcStream *s = stream;
  (void)ud;
  ssize_t n = pc_GrpcOutbox_Pull(&s->out, buf, length, s->send_closed, data_flags);
  if (n > 0 && pc_GrpcOutbox_Unsent(&s->out) == 0 && s->send_closed)
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  if (n > 0) emit(s->e, s, kPc_GrpcEvent_Writable);
  return n;
}

/* The client's side of the session. */
static const pc_GrpcSessionRole client = {.header = on_header,
                                          .body = request_body,
                                          .nghttp2 = {.begin_frame = on_begin_frame,
                                                      .data_chunk = on_data_chunk,
                                                      .frame_recv = on_frame_recv,
                                                      .frame_not_sent = on_not_sent,
                                                      .stream_close = on_stream_close,
                                                      .invalid_frame = on_invalid_frame}};

/* -- engine -------------------------------------------------------------- */

/* Ends every running stream UNAVAILABLE with 'why': its connection is
 * gone (pc_GrpcStatus.lost); unsent when 'unsent' or held for the peer's
 * SETTINGS (nothing of it was submitted). */
static void end_all(pc_GrpcEngine *e, const char *why, int unsent) {
  for (pc_GrpcStream *s = e->streams; s; s = s->next) {
    if (s->ended) continue;
    s->failed = 1;
    s->status.code = kPc_Code_Unavailable;
    s->status.local = 0;
    s->status.unsent = unsent || s->held;
    s->status.lost = 1;
    s->status.peer = 0; /* (a status read before the connection failed is replaced) */
    set_message(s, why, strlen(why));
    end_stream(s);
  }
}

/* The connection can carry nothing more once nghttp2 wants neither to
 * read nor to write and the output is out. */
static void check_dead(pc_GrpcEngine *e) {
  if (e->h2.dead) return;
  const char *out;
  if (nghttp2_session_want_read(e->h2.session) || nghttp2_session_want_write(e->h2.session) ||
      pc_GrpcSession_Unsent(&e->h2) > 0 || (e->h1 && pc_Http1Client_Output(e->h1, &out) > 0))
    return;
  e->h2.dead = 1;
  char why[PC_ERROR_MAX + 64];
  if (e->h2.said)
    snprintf(why, sizeof why, "HTTP/2 connection error: %s", e->h2.said);
  else
    snprintf(why, sizeof why, "the connection closed (GOAWAY) before the call ended");
  end_all(e, why, 0);
}

static void pump_http1(pc_GrpcEngine *e);

pc_GrpcEngine *pc_GrpcEngine_New(const pc_GrpcEngineOptions *opts, pc_Alloc *alloc, void *ud,
                                 pc_Error *err) {
  pc_GrpcEngine *e = pc_GrpcSession_New(&client, alloc, ud, sizeof *e, err);
  if (e == NULL) return NULL;
  e->tls = opts->tls;
  e->on_event = opts->on_event;
  e->event_ud = opts->event_ud;
  e->max_receive = opts->max_receive ? opts->max_receive : PC_GRPC_DEFAULT_MAX_RECEIVE;
  e->max_header_list =
      opts->max_header_list ? opts->max_header_list : PC_GRPC_DEFAULT_MAX_HEADER_LIST;
  pc_GrpcSessionSettings set = {.stream_window = opts->stream_window,
                                .connection_window = opts->connection_window,
                                .max_header_list = e->max_header_list};
  if (pc_GrpcSession_Start(&e->h2, &set, err)) {
    e->authority = dup_cstr(e, opts->authority ? opts->authority : "");
    e->user_agent = dup_cstr(e, opts->user_agent ? opts->user_agent : "protocall");
    if (opts->http1) {
      e->h1 = pc_Http1Client_New(NULL, alloc, ud, err);
      if (e->h1 == NULL) goto fail;
      pump_http1(e); /* its SETTINGS (one stream at a time) before any stream opens */
    }
    if (e->authority && e->user_agent) return e;
    pc_GrpcSession_OutOfMemory(&e->h2, err);
  }
fail:
  pc_GrpcEngine_Free(e);
  return NULL;
}

void pc_GrpcEngine_Free(pc_GrpcEngine *e) {
  if (e == NULL) return;
  e->on_event = NULL; /* the driver is tearing down */
  if (!e->h2.dead) {
    e->h2.dead = 1;
    end_all(e, "the connection was closed", 0);
  }
  for (pc_GrpcStream *s = e->streams; s; s = s->next) {
    if (e->h2.session && s->id > 0)
      nghttp2_session_set_stream_user_data(e->h2.session, s->id, NULL);
    s->e = NULL;
  }
  free_cstr(e, e->authority);
  free_cstr(e, e->user_agent);
  pc_Http1Client_Free(e->h1);
  pc_GrpcSession_Free(&e->h2, sizeof *e);
}

/* The session takes 'len' bytes of the peer's; 0 when they broke it (the
 * engine is dead, its streams ended). */
static int session_recv(pc_GrpcEngine *e, const void *data, size_t len) {
  char said[PC_ERROR_MAX];
  if (pc_GrpcSession_Recv(&e->h2, data, len, said, sizeof said)) return 1;
  e->h2.dead = 1;
  char why[PC_ERROR_MAX + 64];
  snprintf(why, sizeof why, "HTTP/2 connection error: %s", said);
  end_all(e, why, 0);
  return 0;
}

/* HTTP/1.1: the session's frames to the connection and its answers back
 * until nothing moves; a failed connection ends the streams with why. */
static void pump_http1(pc_GrpcEngine *e) {
  for (int moved = 1; moved && !e->h2.dead;) {
    moved = 0;
    char why[PC_ERROR_MAX];
    if (!pc_GrpcSession_Fill(&e->h2, why, sizeof why)) end_all(e, why, 0);
    const char *d;
    size_t n = pc_GrpcSession_Output(&e->h2, &d);
    if (n > 0) {
      pc_Http1Client_FromEngine(e->h1, d, n);
      pc_GrpcSession_Wrote(&e->h2, n);
      moved = 1;
    }
    n = pc_Http1Client_ToEngine(e->h1, &d);
    if (n > 0) {
      pc_Http1Client_ToEngineDone(e->h1, n);
      if (!session_recv(e, d, n)) return;
      moved = 1;
    }
  }
  pc_Http1Client_Idle(e->h1);
  const char *why = pc_Http1Client_Why(e->h1);
  if (why[0] && !e->h2.dead) {
    e->h2.dead = 1;
    end_all(e, why, 0);
  }
}

int pc_GrpcEngine_Recv(pc_GrpcEngine *e, const void *data, size_t len) {
  if (e->h2.dead) return 0;
  if (e->h1) {
    pc_Http1Client_Recv(e->h1, data, len);
    pump_http1(e);
  } else if (!session_recv(e, data, len)) {
    return 0;
  }
  check_dead(e);
  return !e->h2.dead;
}

static size_t output(pc_GrpcEngine *e, const char **data, int more) {
  if (e->h1) {
    if (!e->h2.dead) pump_http1(e);
    return pc_Http1Client_Output(e->h1, data);
  }
  char why[PC_ERROR_MAX];
  if (!(more ? pc_GrpcSession_FillMore : pc_GrpcSession_Fill)(&e->h2, why, sizeof why))
    end_all(e, why, 0);
  if (e->open == 0) pc_GrpcSession_Rest(&e->h2);
  return pc_GrpcSession_Output(&e->h2, data);
}

size_t pc_GrpcEngine_Output(pc_GrpcEngine *e, const char **data) {
  return output(e, data, 0);
}

size_t pc_GrpcEngine_OutputAll(pc_GrpcEngine *e, const char **data) {
  return output(e, data, 1);
}

void pc_GrpcEngine_Wrote(pc_GrpcEngine *e, size_t n) {
  if (e->h1)
    pc_Http1Client_Wrote(e->h1, n);
  else
    pc_GrpcSession_Wrote(&e->h2, n);
  check_dead(e);
}

void pc_GrpcEngine_Lost(pc_GrpcEngine *e, const char *why, int unsent) {
  if (e->h1 && !e->h2.dead) { /* a response until close ends with it */
    pc_Http1Client_Eof(e->h1);
    pump_http1(e);
  }
  e->h2.dead = 1;
  end_all(e, why, unsent);
}

int pc_GrpcEngine_CanOpen(const pc_GrpcEngine *e) {
  if (e->h2.dead || e->goaway) return 0;
  uint32_t max =
      nghttp2_session_get_remote_settings(e->h2.session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return e->open < max && nghttp2_session_get_next_stream_id(e->h2.session) < 0x7ffffff0;
}

int pc_GrpcEngine_Alive(const pc_GrpcEngine *e) {
  return !e->h2.dead;
}

size_t pc_GrpcEngine_Running(const pc_GrpcEngine *e) {
  return e->running;
}

int pc_GrpcEngine_GoawayReceived(const pc_GrpcEngine *e) {
  return e->goaway;
}

int pc_GrpcEngine_SettingsReceived(const pc_GrpcEngine *e) {
  return e->settings_in;
}

int pc_GrpcEngine_Ping(pc_GrpcEngine *e) {
  if (e->h2.dead || e->ping_pending) return 0;
  if (nghttp2_submit_ping(e->h2.session, NGHTTP2_FLAG_NONE, NULL) != 0) return 0;
  e->ping_pending = 1;
  return 1;
}

int pc_GrpcEngine_PingPending(const pc_GrpcEngine *e) {
  return e->ping_pending;
}

/* -- streams ------------------------------------------------------------- */

/* Until the peer's SETTINGS arrive, its SETTINGS_MAX_HEADER_LIST_SIZE is
 * unknown: a request header list larger than this waits for them, a
 * smaller one goes out at once (gRPC servers take this much by default:
 * grpc-core advertises 8192 bytes). */
#define EARLY_HEADER_LIST ((size_t)8 * 1024)

/* The request's header fields, in the stream's arena: '*out' and '*count';
 * 0 when the arena fails. Names and values are still the caller's (nghttp2
 * copies them when the request is submitted). */
static int request_fields(pc_GrpcStream *s, const char *path, const pc_GrpcCallSettings *set,
                          nghttp2_nv **out, size_t *count) {
  pc_GrpcEngine *e = s->e;
  size_t n = 0, max = 11 + set->metadata_count;
  nghttp2_nv *h = pc_Arena_Malloc(s->arena, max * sizeof *h);
  if (h == NULL) return 0;
  int get = s->get;
  h[n++] = get ? PC_GRPC_NV(":method", "GET") : PC_GRPC_NV(":method", "POST");
  h[n++] = PC_GRPC_NV(":scheme", e->tls ? "https" : "http");
  h[n++] = PC_GRPC_NV(":path", path);
  h[n++] = PC_GRPC_NV(":authority", e->authority);
  h[n++] = PC_GRPC_NV("user-agent", e->user_agent);
  int connect =
      s->proto == kPc_WebProtocol_ConnectUnary || s->proto == kPc_WebProtocol_ConnectStream;
  if (get) {
    /* the codec and version go in the query (get_path) */
    h[n++] = PC_GRPC_NV("accept-encoding", "gzip");
    if (set->timeout >= 0) {
      char *t = pc_Arena_Malloc(s->arena, 16);
      if (t == NULL) return 0;
      pc_Connect_FormatTimeout(set->timeout, t);
      h[n++] = PC_GRPC_NV("connect-timeout-ms", t);
      h[n - 1].flags = NGHTTP2_NV_FLAG_NO_INDEX; /* as grpc-timeout's */
    }
  } else if (connect) {
    int unary = s->proto == kPc_WebProtocol_ConnectUnary;
    h[n++] = PC_GRPC_NV("content-type", unary ? (s->json ? "application/json" : "application/proto")
                                              : (s->json ? "application/connect+json"
                                                         : "application/connect+proto"));
    h[n++] = PC_GRPC_NV("connect-protocol-version", "1");
    /* (PC_GRPC_NV takes the name's length from a literal) */
    if (unary) {
      h[n++] = PC_GRPC_NV("accept-encoding", "gzip");
      if (set->gzip) h[n++] = PC_GRPC_NV("content-encoding", "gzip");
    } else {
      h[n++] = PC_GRPC_NV("connect-accept-encoding", "gzip");
      if (set->gzip) h[n++] = PC_GRPC_NV("connect-content-encoding", "gzip");
    }
    if (set->timeout >= 0) {
      char *t = pc_Arena_Malloc(s->arena, 16);
      if (t == NULL) return 0;
      pc_Connect_FormatTimeout(set->timeout, t);
      h[n++] = PC_GRPC_NV("connect-timeout-ms", t);
      h[n - 1].flags = NGHTTP2_NV_FLAG_NO_INDEX; /* as grpc-timeout's */
    }
  } else if (s->proto == kPc_WebProtocol_GrpcWeb && s->text) {
    h[n++] = PC_GRPC_NV("content-type", s->json ? "application/grpc-web-text+json"
                                                : "application/grpc-web-text+proto");
    h[n++] = PC_GRPC_NV("accept", "application/grpc-web-text");
    h[n++] = PC_GRPC_NV("x-grpc-web", "1");
  } else if (s->proto == kPc_WebProtocol_GrpcWeb) {
    h[n++] = PC_GRPC_NV("content-type",
                        s->json ? "application/grpc-web+json" : "application/grpc-web+proto");
    h[n++] = PC_GRPC_NV("x-grpc-web", "1");
  } else {
    h[n++] = PC_GRPC_NV("content-type", "application/grpc");
    h[n++] = PC_GRPC_NV("te", "trailers");
  }
  if (!connect) {
    h[n++] = PC_GRPC_NV("grpc-accept-encoding", "gzip");
    if (set->gzip) h[n++] = PC_GRPC_NV("grpc-encoding", "gzip");
  }
  if (set->timeout >= 0 && !connect) {
    char *t = pc_Arena_Malloc(s->arena, 16);
    if (t == NULL) return 0;
    pc_Grpc_FormatTimeout(set->timeout > 0 ? set->timeout : 1e-9, t);
    h[n++] = PC_GRPC_NV("grpc-timeout", t);
    /* A value that differs from call to call: not entered in the HPACK
     * tables (ours and the server's), where each would evict others. */
    h[n - 1].flags = NGHTTP2_NV_FLAG_NO_INDEX;
  }
  if (set->previous_attempts > 0 && !connect) {
    char *a = pc_Arena_Malloc(s->arena, 12);
    if (a == NULL) return 0;
    snprintf(a, 12, "%u", set->previous_attempts);
    h[n++] = PC_GRPC_NV("grpc-previous-rpc-attempts", a);
  }
  if (!pc_Grpc_PushPairs(set->metadata, set->metadata_count, s->arena, h, &n)) return 0;
  *out = h;
  *count = n;
  return 1;
}

/* Keeps the request's fields for later: their names and values copied into
 * the stream's arena. 0 when it fails. */
static int hold(pc_GrpcStream *s, nghttp2_nv *h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char *k = pc_Arena_StrDup(s->arena, (const char *)h[i].name, h[i].namelen);
    char *v = pc_Arena_StrDup(s->arena, (const char *)h[i].value, h[i].valuelen);
    if (k == NULL || v == NULL) return 0;
    uint8_t flags = h[i].flags;
    h[i] = pc_Grpc_Nv(k, h[i].namelen, v, h[i].valuelen);
    h[i].flags = flags;
  }
  s->req = h;
  s->req_count = n;
  s->held = 1;
  return 1;
}

/* Whether HTTP/1.1 carries the request's fields as they are: it trims a
 * value's surrounding whitespace (RFC 9112 5), so such a value (metadata
 * gRPC allows) is refused rather than changed. Else 0 with why in 'text'. */
static int fits_http1(const nghttp2_nv *h, size_t n, char *text, size_t size) {
  for (size_t i = 0; i < n; i++) {
    const uint8_t *v = h[i].value;
    size_t k = h[i].valuelen;
    if (k > 0 && (v[0] == ' ' || v[0] == '\t' || v[k - 1] == ' ' || v[k - 1] == '\t')) {
      snprintf(text, size,
               "metadata '%.*s': a value with surrounding whitespace cannot go over HTTP/1.1",
               (int)(h[i].namelen > 100 ? 100 : h[i].namelen), (const char *)h[i].name);
      return 0;
    }
  }
  return 1;
}

/* Whether the connection can carry the request's header block: within the
 * peer's SETTINGS_MAX_HEADER_LIST_SIZE (unlimited until its SETTINGS) and
 * what nghttp2 sends as one block. Else 0 with why in 'text'. */
static int fits(const pc_GrpcEngine *e, const nghttp2_nv *h, size_t n, char *text, size_t size) {
  size_t list = pc_Grpc_NvListSize(h, n), bound = pc_Grpc_NvBound(h, n);
  uint32_t peer =
      nghttp2_session_get_remote_settings(e->h2.session, NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE);
  if (list > peer) {
    snprintf(text, size,
             "request header list of %zu bytes exceeds the server's limit of %lu bytes "
             "(SETTINGS_MAX_HEADER_LIST_SIZE: a field counts its name, its value and 32)",
             list, (unsigned long)peer);
    return 0;
  }
  if (bound > PC_GRPC_MAX_SEND_HEADER_BLOCK) {
    snprintf(text, size,
             "request header block of up to %zu bytes exceeds the %zu bytes nghttp2 sends as "
             "one header block",
             bound, PC_GRPC_MAX_SEND_HEADER_BLOCK);
    return 0;
  }
  return 1;
}

/* A request the connection cannot carry ends RESOURCE_EXHAUSTED (what
 * grpc-core's "to-be-sent initial metadata size exceeds peer limit" says,
 * and a gRPC server answers metadata over its limit), and local: the same
 * block fails again, so retry policies pass it over. Nothing was sent. */
static void refuse(pc_GrpcStream *s, pc_Code code, const char *why) {
  s->closed = 1; /* never submitted: no RST_STREAM */
  fail(s, code, 1, "%s", why);
}

/* Hands the request to nghttp2; 0 when it refuses it (out of memory, no
 * stream id left). */
static int submit(pc_GrpcStream *s, const nghttp2_nv *h, size_t n) {
  nghttp2_data_provider prd = pc_GrpcSession_Body();
  int32_t id = nghttp2_submit_request(s->e->h2.session, NULL, h, n, s->get ? NULL : &prd, s);
  if (id < 0) return 0;
  s->id = id;
  return 1;
}

/* The peer's SETTINGS came: each request held for them is checked against
 * its limits, then submitted or refused. */
static void release_held(pc_GrpcEngine *e) {
  for (pc_GrpcStream *s = e->streams; s; s = s->next) {
    if (!s->held) continue;
    s->held = 0;
    char why[PC_ERROR_MAX];
    if (!fits(e, s->req, s->req_count, why, sizeof why)) {
      e->open--;
      refuse(s, kPc_Code_ResourceExhausted, why);
    } else if (!submit(s, s->req, s->req_count)) {
      e->open--;
      s->closed = 1;
      fail(s, kPc_Code_ResourceExhausted, 1, "cannot start a call: out of memory");
    }
  }
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
  /* In the arena lent ('settings->arena'), else in an arena of its own,
   * which the stream is freed with. */
  pc_Arena *arena = settings->arena ? settings->arena : pc_Arena_New(e->h2.m.alloc, e->h2.m.ud);
  pc_GrpcStream *s = arena ? pc_Arena_Calloc(arena, sizeof *s) : NULL;
  if (s == NULL) {
    if (arena != settings->arena) pc_Arena_Free(arena);
    goto oom;
  }
  s->arena = arena;
  s->own_arena = arena != settings->arena;
  s->m = e->h2.m;
  s->e = e;
  s->user = user;
  s->gzip = settings->gzip;
  s->proto = settings->protocol == kPc_WebProtocol_GrpcWeb ||
                     settings->protocol == kPc_WebProtocol_ConnectUnary ||
                     settings->protocol == kPc_WebProtocol_ConnectStream
                 ? (pc_WebProtocol)settings->protocol
                 : kPc_WebProtocol_Grpc;
  if (settings->protocol == kPc_WebProtocol_GrpcWebText) {
    s->proto = kPc_WebProtocol_GrpcWeb;
    s->text = 1;
  }
  s->json = s->proto != kPc_WebProtocol_Grpc && settings->json;
  s->get = s->proto == kPc_WebProtocol_ConnectUnary && settings->get;
  s->status.message = "";
  s->status.details = "";
  nghttp2_nv *h = NULL;
  size_t n = 0;
  char why[PC_ERROR_MAX];
  int fit = 1, ok = request_fields(s, path, settings, &h, &n);
  pc_Code unfit = kPc_Code_ResourceExhausted;
  if (ok && e->h1 && !fits_http1(h, n, why, sizeof why)) {
    fit = 0;
    unfit = kPc_Code_Internal;
  } else if (ok) {
    if (s->get) {
      ok = hold(s, h, n); /* until its message: pc_GrpcStream_Send */
      s->held = 0;
    } else if (!e->settings_in && pc_Grpc_NvListSize(h, n) > EARLY_HEADER_LIST)
      ok = hold(s, h, n);
    else if ((fit = fits(e, h, n, why, sizeof why)))
      ok = submit(s, h, n);
  }
  if (!ok) {
    if (s->own_arena) pc_Arena_Free(s->arena); /* the stream with it */
    goto oom;
  }
  s->next = e->streams;
  if (e->streams) e->streams->prev = s;
  e->streams = s;
  if (!fit) {
    /* Ended before it ran: detached meanwhile, it is not counted as
     * running and no End event comes from inside Open. */
    s->e = NULL;
    refuse(s, unfit, why);
    s->e = e;
    return s;
  }
  e->running++;
  e->open++;
  return s;
oom:
  pc_Error_Set(err, "cannot start a call: out of memory");
  return NULL;
}

static void resume(pc_GrpcStream *s) {
  pc_GrpcOutbox_Resume(&s->out, live(s), s->id);
}

/* The :path of a Connect GET: 'path' (the request's, in s->req) and the
 * query carrying 'msg' ('len' bytes): base64url for protobuf, percent-
 * encoded JSON. NULL when the arena fails. */
static const char *get_path(pc_GrpcStream *s, const char *path, size_t pn, const void *msg,
                            size_t len) {
  static const char hex[] = "0123456789ABCDEF";
  size_t room = pn + 64 + (s->json ? len * 3 : (len + 2) / 3 * 4) + 1;
  char *p = pc_Arena_Malloc(s->arena, room);
  if (p == NULL) return NULL;
  int w = snprintf(p, room, "%.*s?connect=v1&encoding=%s%s&message=", (int)pn, path,
                   s->json ? "json" : "proto", s->json ? "" : "&base64=1");
  char *o = p + w;
  const unsigned char *m = msg;
  if (s->json) {
    for (size_t i = 0; i < len; i++) {
      unsigned char c = m[i];
      if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.' || c == '~') {
        *o++ = (char)c;
      } else {
        *o++ = '%';
        *o++ = hex[c >> 4];
        *o++ = hex[c & 15];
      }
    }
  } else {
    size_t k = pc_Web_Base64Encode(m, len, o);
    while (k > 0 && o[k - 1] == '=') k--; /* base64url, unpadded */
    for (size_t i = 0; i < k; i++) {
      if (o[i] == '+')
        o[i] = '-';
      else if (o[i] == '/')
        o[i] = '_';
    }
    o += k;
  }
  *o = 0;
  return p;
}

/* The first message of a Connect GET: the request goes out, its query
 * holding the message; later ones are dropped (a unary call has one). */
static int send_get(pc_GrpcStream *s, const void *msg, size_t len) {
  if (s->id != 0) return 1;
  nghttp2_nv *h = s->req;
  const char *path = get_path(s, (const char *)h[2].value, h[2].valuelen, msg, len);
  if (path == NULL) {
    fail(s, kPc_Code_ResourceExhausted, 1, "out of memory writing a Connect GET");
    return 0;
  }
  h[2] = pc_Grpc_Nv(":path", 5, path, strlen(path));
  char why[PC_ERROR_MAX];
  if (!fits(s->e, h, s->req_count, why, sizeof why)) {
    s->e->open--;
    refuse(s, kPc_Code_ResourceExhausted, why);
    return 0;
  }
  if (!submit(s, h, s->req_count)) {
    s->e->open--;
    s->closed = 1;
    fail(s, kPc_Code_ResourceExhausted, 1, "cannot start a call: out of memory");
    return 0;
  }
  return 1;
}

int pc_GrpcStream_Send(pc_GrpcStream *s, const void *msg, size_t len) {
  if (s->ended || s->send_closed || s->e == NULL) return 0;
  if (s->get) return send_get(s, msg, len);
  size_t before = s->out.pos > 0 && s->out.pos == s->out.buf.len ? 0 : s->out.buf.len;
  if (!pc_GrpcOutbox_Frame(&s->out, &s->m, msg, len, s->gzip)) {
    fail(s, kPc_Code_ResourceExhausted, 1, "out of memory framing a request message");
    return 0;
  }
  if (s->proto == kPc_WebProtocol_ConnectUnary) {
    /* Connect unary: the body is the message alone (gzipped whole) */
    pc_GrpcBuf *b = &s->out.buf;
    memmove(b->p + before, b->p + before + 5, b->len - before - 5);
    b->len -= 5;
  } else if (s->text) {
    /* gRPC-Web-Text: the framed message in padded base64 (a body of such
     * pieces, as the server decodes it) */
    pc_GrpcBuf *b = &s->out.buf;
    size_t raw = b->len - before, enc = (raw + 2) / 3 * 4;
    char *tmp = pc_GrpcMem_Alloc(&s->m, NULL, 0, enc);
    if (tmp == NULL || !pc_GrpcBuf_Reserve(s->m.alloc, s->m.ud, b, enc - raw)) {
      if (tmp) pc_GrpcMem_Alloc(&s->m, tmp, enc, 0);
      fail(s, kPc_Code_ResourceExhausted, 1, "out of memory framing a request message");
      return 0;
    }
    pc_Web_Base64Encode((const unsigned char *)b->p + before, raw, tmp);
    memcpy(b->p + before, tmp, enc);
    b->len = before + enc;
    pc_GrpcMem_Alloc(&s->m, tmp, enc, 0);
  }
  resume(s);
  return 1;
}

size_t pc_GrpcStream_Unsent(const pc_GrpcStream *s) {
  return pc_GrpcOutbox_Unsent(&s->out);
}

void pc_GrpcStream_CloseSend(pc_GrpcStream *s) {
  if (s->send_closed) return;
  s->send_closed = 1;
  resume(s);
}

int pc_GrpcStream_Next(pc_GrpcStream *s, const char **data, size_t *len) {
  /* Drop what was read (the caller is done with the last message). */
  if (s->e) pc_GrpcInbox_Drop(&s->in);
  if (!s->failed && pc_GrpcInbox_Ready(&s->in) && s->e) {
    int compressed;
    pc_GrpcRead r = pc_GrpcInbox_Take(&s->in, &s->m, s->e->max_receive, data, len, &compressed);
    if (r != kPc_GrpcRead_Ok) fail_read(s, r);
    release_window(s);
    if (r == kPc_GrpcRead_Ok) return 1;
  }
  return s->ended ? -1 : 0;
}

int pc_GrpcStream_Drained(const pc_GrpcStream *s) {
  return s->ended && (s->failed || !s->e || !pc_GrpcInbox_Ready(&s->in));
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
  return s->in.buf.cap;
}

size_t pc_GrpcStream_MetadataCount(const pc_GrpcStream *s, int trailers) {
  return s->pairs[trailers ? 1 : 0].count;
}

const pc_GrpcPair *pc_GrpcStream_Metadata(const pc_GrpcStream *s, int trailers, size_t i) {
  const pc_GrpcPairs *ps = &s->pairs[trailers ? 1 : 0];
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

int pc_GrpcStream_Free(pc_GrpcStream *s) {
  if (s == NULL) return 0;
  pc_GrpcEngine *e = s->e;
  int queued = e != NULL && (!s->ended || !s->closed);
  if (e) {
    if (!s->ended) fail(s, kPc_Code_Cancelled, 0, "cancelled");
    if (!s->closed) pc_GrpcInbox_Detach(&s->in, e->h2.session, s->id);
    if (s->prev)
      s->prev->next = s->next;
    else
      e->streams = s->next;
    if (s->next) s->next->prev = s->prev;
  }
  pc_GrpcMem m = s->m;
  pc_GrpcOutbox_Free(&s->out, &m);
  pc_GrpcInbox_Free(&s->in, &m);
  if (s->own_arena) pc_Arena_Free(s->arena); /* the stream with it */
  return queued;
}
