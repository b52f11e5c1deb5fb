/* The client's side of HTTP/1.1 (see http1_client.h): an in-memory HTTP/2
 * server session (session_internal.h's, as the engines') answers the
 * client engine; each of its streams goes out as an HTTP/1.1 request and
 * the response http1.h parses comes back on it. */
#include "net/http1_client.h"
#include "net/session_internal.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_MAX_FIELDS  100
#define DEFAULT_MAX_PENDING ((size_t)16 * 1024 * 1024)
/* Response body bytes held for the engine before parsing waits. */
#define RESPONSE_HIGH       ((size_t)256 * 1024)
/* Request bytes unwritten to the socket past which a streamed request's
 * DATA is not given back to the engine's flow control (its send waits). */
#define OUTPUT_HIGH         ((size_t)256 * 1024)
/* The request header list the session takes from the engine. */
#define MAX_REQUEST_HEADERS ((size_t)64 * 1024)

/* Where the exchange of the connection stands. */
enum {
  kIdle,      /* no stream */
  kGathering, /* a stream's request arrives from the engine */
  kStreaming, /* its head is written, its body goes out in chunks as it comes */
  kSent,      /* its request is written; its response is read */
  kReceived,  /* the response was read whole; the stream has yet to close */
};

struct pc_Http1Client {
  pc_GrpcSession h2; /* first: the block is the session's (pc_GrpcSession_New) */
  pc_Http1ClientOptions o;
  pc_Http1Parser p;
  pc_Http1Header *slots;
  pc_GrpcBuf in; /* wire input, unconsumed from 'in_pos' */
  size_t in_pos;
  pc_GrpcBuf out; /* wire output, unwritten from 'out_pos' */
  size_t out_pos;
  int phase;
  int32_t stream;     /* the stream of the exchange (0: none) */
  int32_t last_taken; /* the last stream whose request went out */
  /* The request: ":method", ":path", ":authority" then the fields, each
   * name NUL value NUL; 'nreq' fields in all. */
  pc_GrpcBuf req;
  size_t nreq;
  int head_in;       /* ...its header block is whole */
  pc_GrpcBuf body;   /* its body while gathered (kGathering) */
  int body_open;     /* ...streamed, its last chunk not written yet */
  size_t unconsumed; /* streamed body bytes not given back to flow control */
  /* The response. */
  pc_GrpcBuf rhead; /* its head's fields, name NUL value NUL, lower case */
  size_t nrhead;
  int status;
  int head_held;   /* ...not given to the session yet */
  int head_sent;   /* its head went to the session */
  int body_end;    /* the parser reached its end */
  int deferred;    /* the session waits for body bytes */
  pc_GrpcBuf resp; /* body bytes for the session, from 'resp_pos' */
  size_t resp_pos;
  pc_GrpcBuf trailers; /* name NUL value NUL ... */
  size_t ntrailers;
  int closing;     /* no further exchange: GOAWAY */
  int goaway_sent; /* ...and it was submitted */
  int eof;         /* the server closed */
  int dead;
  char why[PC_ERROR_MAX];
};
_Static_assert(offsetof(pc_Http1Client, h2) == 0, "the block starts with its session");

static int append(pc_Http1Client *c, pc_GrpcBuf *b, const void *p, size_t n) {
  if (n == 0) return 1;
  if (!pc_GrpcBuf_Reserve(c->h2.m.alloc, c->h2.m.ud, b, n)) return 0;
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return 1;
}

static int push_field(pc_Http1Client *c, pc_GrpcBuf *b, const void *name, size_t nl,
                      const void *value, size_t vl) {
  static const char nul = 0;
  return append(c, b, name, nl) && append(c, b, &nul, 1) && append(c, b, value, vl) &&
         append(c, b, &nul, 1);
}

static void fail(pc_Http1Client *c, const char *why) {
  if (!c->dead) snprintf(c->why, sizeof c->why, "%.*s", (int)sizeof c->why - 1, why);
  c->dead = 1;
}

/* No further exchange on this connection: the session says GOAWAY (a
 * stream whose request has not gone out is refused by it, and the engine
 * runs that call again elsewhere). */
static void closing(pc_Http1Client *c) {
  c->closing = 1;
  if (c->goaway_sent || c->dead) return;
  c->goaway_sent = 1;
  if (nghttp2_submit_goaway(c->h2.session, NGHTTP2_FLAG_NONE, c->last_taken, NGHTTP2_NO_ERROR, NULL,
                            0) != 0)
    fail(c, "out of memory");
}

/* The exchange is over: the next one may start (a stream closed before its
 * request went out leaves the connection as it was). */
static void next_exchange(pc_Http1Client *c) {
  int reusable = c->phase == kGathering ||
                 (c->phase == kReceived && !c->body_open && pc_Http1Parser_Next(&c->p));
  if (c->unconsumed > 0 && nghttp2_session_consume_connection(c->h2.session, c->unconsumed) != 0)
    fail(c, "out of memory");
  c->phase = kIdle;
  c->stream = 0;
  c->req.len = c->body.len = c->resp.len = c->trailers.len = c->rhead.len = 0;
  c->nreq = c->ntrailers = c->nrhead = 0;
  c->resp_pos = c->unconsumed = 0;
  c->head_in = c->body_open = c->head_held = c->head_sent = c->body_end = c->deferred = 0;
  if (!reusable || c->eof) closing(c);
}

/* -- the request --------------------------------------------------------- */

/* The 'i'th name NUL value NUL pair of 'b' from '*at': sets the field. */
static void read_pair(const pc_GrpcBuf *b, size_t *at, pc_Http1Header *f) {
  f->name = b->p + *at;
  f->name_len = strlen(f->name);
  *at += f->name_len + 1;
  f->value = b->p + *at;
  f->value_len = strlen(f->value);
  *at += f->value_len + 1;
}

/* Writes the request of the stream: whole with its length once it ended,
 * else its head and the body so far (none when nothing was sent yet) as a
 * chunk ('chunked'). */
static void write_request(pc_Http1Client *c, int chunked) {
  pc_Alloc *alloc = c->h2.m.alloc;
  void *ud = c->h2.m.ud;
  if (c->nreq < 3) { /* no :method, :path or :authority: nghttp2 would have refused it */
    nghttp2_submit_rst_stream(c->h2.session, NGHTTP2_FLAG_NONE, c->stream, NGHTTP2_PROTOCOL_ERROR);
    return;
  }
  size_t at = 0;
  pc_Http1Header pseudo[3];
  for (int i = 0; i < 3; i++) read_pair(&c->req, &at, &pseudo[i]);
  size_t nf = c->nreq - 2; /* Host, then the fields */
  pc_Http1Header *f = alloc(ud, NULL, 0, nf * sizeof *f);
  if (f == NULL) {
    fail(c, "out of memory");
    return;
  }
  f[0] = (pc_Http1Header){"Host", 4, pseudo[2].value, pseudo[2].value_len};
  for (size_t i = 1; i < nf; i++) read_pair(&c->req, &at, &f[i]);
  pc_Http1Out h = {pseudo[0].value,
                   pseudo[1].value,
                   0,
                   f,
                   nf,
                   chunked ? kPc_Http1Body_Chunked : kPc_Http1Body_Length,
                   c->body.len,
                   0};
  pc_Error err;
  pc_Error_Init(&err);
  size_t n = pc_Http1_WriteHead(NULL, 0, &h, &err);
  size_t body = chunked ? pc_Http1_WriteChunk(NULL, 0, c->body.p, c->body.len) : c->body.len;
  if (n == 0) {
    /* A field HTTP/1.1 cannot carry: the call fails, the connection goes on. */
    c->head_in = 0; /* (reset once: pc_Http1Client_Idle does not come back to it) */
    nghttp2_submit_rst_stream(c->h2.session, NGHTTP2_FLAG_NONE, c->stream, NGHTTP2_PROTOCOL_ERROR);
  } else if (!pc_GrpcBuf_Reserve(alloc, ud, &c->out, n + body)) {
    fail(c, "out of memory");
  } else {
    pc_Http1_WriteHead(c->out.p + c->out.len, n, &h, &err);
    c->out.len += n;
    if (chunked)
      c->out.len += pc_Http1_WriteChunk(c->out.p + c->out.len, body, c->body.p, c->body.len);
    else
      append(c, &c->out, c->body.p, c->body.len);
    pc_GrpcBuf_Free(alloc, ud, &c->body);
    c->phase = chunked ? kStreaming : kSent;
    c->body_open = chunked;
    c->last_taken = c->stream;
  }
  alloc(ud, f, nf * sizeof *f, 0);
}

/* -- the session's side (the engine's server) ----------------------------- */

static int begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  pc_Http1Client *c = ud;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  int32_t id = frame->hd.stream_id;
  if (c->phase != kIdle || c->closing) {
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
    return 0;
  }
  c->phase = kGathering;
  c->stream = id;
  nghttp2_session_set_stream_user_data(session, id, c);
  return 0;
}

/* The fields the HTTP/1.1 side owns or HTTP/2 does not carry. */
static int own_field(const uint8_t *name, size_t n) {
  static const char *const own[] = {
      "host", "te", "connection", "content-length", "transfer-encoding", "keep-alive", "upgrade"};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (strlen(own[i]) == n && memcmp(own[i], name, n) == 0) return 1;
  return 0;
}

static int on_header(void *user, void *stream, const nghttp2_frame *frame, const uint8_t *name,
                     size_t nl, const uint8_t *value, size_t vl, int over) {
  pc_Http1Client *c = user;
  (void)stream;
  if (frame->hd.stream_id != c->stream || c->phase != kGathering) return 0;
  if (over) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* request trailers: dropped */
  /* The pseudo-headers come first (nghttp2 checks): kept in this order. */
  static const char *const pseudo[] = {":method", ":path", ":authority"};
  if (nl > 0 && name[0] == ':') {
    size_t want = c->nreq;
    if (want >= 3 || strlen(pseudo[want]) != nl || memcmp(pseudo[want], name, nl) != 0) {
      if (nl == 7 && memcmp(name, ":scheme", 7) == 0) return 0;
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the engine sends them in this order */
    }
  } else if (c->nreq < 3 || own_field(name, nl)) {
    return c->nreq < 3 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
  }
  if (memchr(value, 0, vl) != NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (!push_field(c, &c->req, name, nl, value, vl)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  c->nreq++;
  return 0;
}

/* A chunk of 'len' bytes of the streamed body onto the wire output. */
static int write_chunk(pc_Http1Client *c, const void *data, size_t len) {
  if (len == 0) return 1; /* (a chunk of 0 bytes would end the body) */
  size_t n = pc_Http1_WriteChunk(NULL, 0, data, len);
  if (!pc_GrpcBuf_Reserve(c->h2.m.alloc, c->h2.m.ud, &c->out, n)) return 0;
  c->out.len += pc_Http1_WriteChunk(c->out.p + c->out.len, n, data, len);
  return 1;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud) {
  pc_Http1Client *c = ud;
  (void)flags;
  if (id == c->stream && c->phase == kStreaming) {
    /* given back as the socket takes the output (give_back) */
    c->unconsumed += len;
    return write_chunk(c, data, len) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  nghttp2_session_consume(session, id, len);
  if (id != c->stream || c->phase != kGathering) return 0;
  if (!append(c, &c->body, data, len)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  pc_Http1Client *c = ud;
  (void)session;
  if (frame->hd.stream_id == 0 || frame->hd.stream_id != c->stream) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && c->phase == kGathering) c->head_in = 1;
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    if (c->phase == kGathering) {
      write_request(c, 0);
    } else if (c->phase == kStreaming) {
      static const char last[] = "0\r\n\r\n";
      if (!append(c, &c->out, last, sizeof last - 1)) return NGHTTP2_ERR_CALLBACK_FAILURE;
      c->phase = kSent;
      c->body_open = 0;
    }
  }
  return 0;
}

/* The response ended (its last frame went to the engine) while the request
 * body is still being sent (a server that answered early): the stream is
 * reset NO_ERROR, as a gRPC server ends a call whose client has not
 * finished, so the call ends with that response's status; next_exchange
 * then ends the connection (the body was cut short). */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud) {
  pc_Http1Client *c = ud;
  if (frame->hd.stream_id == 0 || frame->hd.stream_id != c->stream || !c->body_open) return 0;
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, c->stream, NGHTTP2_NO_ERROR) != 0)
    fail(c, "out of memory");
  return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *ud) {
  pc_Http1Client *c = ud;
  (void)session;
  (void)code;
  if (id != c->stream) return 0;
  /* Reset while its response was still coming (kSent): the rest of it
   * could not be told from the next response's, next_exchange closes. */
  next_exchange(c);
  return 0;
}

/* The response body for the session: what was parsed, then the end (with
 * the trailers, when there are). */
static ssize_t response_body(void *user, void *stream, uint8_t *buf, size_t length,
                             uint32_t *flags) {
  pc_Http1Client *c = user;
  (void)stream;
  size_t avail = c->resp.len - c->resp_pos;
  size_t n = avail < length ? avail : length;
  if (n) memcpy(buf, c->resp.p + c->resp_pos, n);
  c->resp_pos += n;
  if (c->resp_pos == c->resp.len) c->resp.len = c->resp_pos = 0;
  if (n == avail && c->body_end) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    c->phase = kReceived;
    if (c->ntrailers > 0) {
      nghttp2_nv *nv = c->h2.m.alloc(c->h2.m.ud, NULL, 0, c->ntrailers * sizeof *nv);
      if (nv == NULL) return NGHTTP2_ERR_CALLBACK_FAILURE;
      size_t at = 0;
      for (size_t i = 0; i < c->ntrailers; i++) {
        pc_Http1Header f;
        read_pair(&c->trailers, &at, &f);
        nv[i] = pc_Grpc_Nv(f.name, f.name_len, f.value, f.value_len);
      }
      int r = nghttp2_submit_trailer(c->h2.session, c->stream, nv, c->ntrailers);
      c->h2.m.alloc(c->h2.m.ud, nv, c->ntrailers * sizeof *nv, 0);
      if (r == 0) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
  }
  if (n == 0) {
    c->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

static const pc_GrpcSessionRole kRole = {
    1,
    begin_headers,
    on_header,
    response_body,
    {NULL, on_data_chunk, on_frame_recv, on_frame_send, NULL, on_stream_close, NULL}};

static void resume(pc_Http1Client *c) {
  if (c->deferred && c->head_sent) {
    c->deferred = 0;
    nghttp2_session_resume_data(c->h2.session, c->stream);
  }
}

/* -- the wire's side (the server's responses) ---------------------------- */

static char lower_ascii(char x) {
  if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
  return x;
}

/* Fields of a response or trailer section HTTP/2 does not carry. */
static int hop_field(const pc_Http1Header *f) {
  static const char *const hop[] = {"connection",        "keep-alive", "proxy-connection",
                                    "transfer-encoding", "upgrade",    "te",
                                    "content-length"};
  for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++) {
    size_t k = strlen(hop[i]);
    if (f->name_len != k) continue;
    size_t j = 0;
    while (j < k && lower_ascii(f->name[j]) == hop[i][j]) j++;
    if (j == k) return 1;
  }
  return 0;
}

/* The fields of 'f' ('n' of them) pushed to 'b', names in lower case, the
 * hop-by-hop ones left out; returns how many, or -1 when memory ran out. */
static long lower_fields(pc_Http1Client *c, pc_GrpcBuf *b, const pc_Http1Header *f, size_t n) {
  long kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (hop_field(&f[i])) continue;
    char name[256];
    if (f[i].name_len > sizeof name) return -2;
    for (size_t k = 0; k < f[i].name_len; k++) name[k] = lower_ascii(f[i].name[k]);
    if (!push_field(c, b, name, f[i].name_len, f[i].value, f[i].value_len)) return -1;
    kept++;
  }
  return kept;
}

/* The response head, kept until the body's first bytes or its end. */
static void keep_head(pc_Http1Client *c, const pc_Http1Head *h) {
  long n = lower_fields(c, &c->rhead, h->fields, h->nfields);
  if (n < 0) {
    fail(c, n == -2 ? "HTTP/1.1 response: a field name over 256 bytes" : "out of memory");
    return;
  }
  c->nrhead = (size_t)n;
  c->status = h->status;
  c->head_held = 1;
}

/* The response head to the session: with the body to come ('body'), or
 * ending the stream (a response with neither body nor trailers: gRPC-Web's
 * trailers-only form reads as such only so). */
static void response_head(pc_Http1Client *c, int body) {
  c->head_held = 0;
  nghttp2_nv *nv = c->h2.m.alloc(c->h2.m.ud, NULL, 0, (c->nrhead + 1) * sizeof *nv);
  if (nv == NULL) {
    fail(c, "out of memory");
    return;
  }
  int st = c->status; /* 100..999 (http1.h) */
  char status[3] = {(char)('0' + st / 100 % 10), (char)('0' + st / 10 % 10), (char)('0' + st % 10)};
  nv[0] = pc_Grpc_Nv(":status", 7, status, 3);
  size_t at = 0;
  for (size_t i = 0; i < c->nrhead; i++) {
    pc_Http1Header f;
    read_pair(&c->rhead, &at, &f);
    nv[i + 1] = pc_Grpc_Nv(f.name, f.name_len, f.value, f.value_len);
  }
  nghttp2_data_provider provider = pc_GrpcSession_Body();
  int r =
      nghttp2_submit_response(c->h2.session, c->stream, nv, c->nrhead + 1, body ? &provider : NULL);
  c->h2.m.alloc(c->h2.m.ud, nv, (c->nrhead + 1) * sizeof *nv, 0);
  if (r != 0) {
    fail(c, "out of memory");
    return;
  }
  c->head_sent = 1;
  if (!body) c->phase = kReceived;
}

/* Parses the response while it has bytes and the engine takes them;
 * returns whether anything moved. */
static int parse_some(pc_Http1Client *c) {
  int moved = 0;
  while (!c->dead && (c->phase == kStreaming || c->phase == kSent) && !c->body_end &&
         c->resp.len - c->resp_pos < RESPONSE_HIGH) {
    pc_Http1Event ev;
    const char *at = c->in.p ? c->in.p + c->in_pos : "";
    size_t used = pc_Http1Parser_Parse(&c->p, at, c->in.len - c->in_pos, &ev);
    c->in_pos += used;
    if (used) moved = 1;
    switch (ev.type) {
    case kPc_Http1Event_NeedMore: return moved;
    case kPc_Http1Event_Informational: break;
    case kPc_Http1Event_Head:
      keep_head(c, ev.head);
      moved = 1;
      break;
    case kPc_Http1Event_Body:
      if (!append(c, &c->resp, ev.data, ev.len)) fail(c, "out of memory");
      if (c->head_held) response_head(c, 1);
      resume(c);
      break;
    case kPc_Http1Event_Trailers: {
      if (c->head_held) response_head(c, 1);
      long n = lower_fields(c, &c->trailers, ev.fields, ev.nfields);
      if (n < 0)
        fail(c, n == -2 ? "HTTP/1.1 response: a field name over 256 bytes" : "out of memory");
      else
        c->ntrailers += (size_t)n;
      break;
    }
    case kPc_Http1Event_End:
      c->body_end = 1;
      moved = 1;
      if (c->head_held) response_head(c, 0);
      resume(c);
      break;
    case kPc_Http1Event_Paused: return moved;
    case kPc_Http1Event_Closed: /* a response has begun: not given */
    case kPc_Http1Event_Error: {
      pc_Error err;
      pc_Error_Init(&err);
      pc_Http1Parser_Error(&c->p, &err);
      fail(c, err.msg[0] ? err.msg : "HTTP/1.1 response: the connection closed");
      return 1;
    }
    }
  }
  return moved;
}

/* Bytes from the server while no request is out: an idle connection the
 * server ends (a 408 before it closes, say) is not used again. */
static void idle_input(pc_Http1Client *c) {
  if (c->phase >= kStreaming || c->in.len == c->in_pos) return;
  c->in_pos = c->in.len;
  closing(c);
}

/* Moves what can move: the response into the session, the session's
 * frames out to the engine's buffer (taken by pc_Http1Client_ToEngine). */
static void advance(pc_Http1Client *c) {
  idle_input(c);
  parse_some(c);
}

/* -- the connection ------------------------------------------------------ */

pc_Http1Client *pc_Http1Client_New(const pc_Http1ClientOptions *opts, pc_Alloc *alloc, void *ud,
                                   pc_Error *err) {
  pc_Http1Client *c = pc_GrpcSession_New(&kRole, alloc, ud, sizeof *c, err);
  if (c == NULL) return NULL;
  if (opts) c->o = *opts;
  if (c->o.max_fields == 0) c->o.max_fields = DEFAULT_MAX_FIELDS;
  if (c->o.max_pending == 0) c->o.max_pending = DEFAULT_MAX_PENDING;
  c->slots = c->h2.m.alloc(c->h2.m.ud, NULL, 0, c->o.max_fields * sizeof *c->slots);
  pc_GrpcSessionSettings set = {.max_streams = 1, .max_header_list = MAX_REQUEST_HEADERS};
  if (c->slots && pc_GrpcSession_Start(&c->h2, &set, err)) {
    pc_Http1Parser_Init(&c->p, kPc_Http1_Responses, &c->o.http1, c->slots, c->o.max_fields);
    return c;
  }
  if (err && err->msg[0] == 0) pc_Error_Set(err, "out of memory");
  pc_Http1Client_Free(c);
  return NULL;
}

void pc_Http1Client_Free(pc_Http1Client *c) {
  if (c == NULL) return;
  pc_Alloc *alloc = c->h2.m.alloc;
  void *ud = c->h2.m.ud;
  pc_GrpcBuf *bufs[] = {&c->in, &c->out, &c->req, &c->body, &c->resp, &c->trailers, &c->rhead};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pc_GrpcBuf_Free(alloc, ud, bufs[i]);
  if (c->slots) alloc(ud, c->slots, c->o.max_fields * sizeof *c->slots, 0);
  pc_GrpcSession_Free(&c->h2, sizeof *c);
}

int pc_Http1Client_FromEngine(pc_Http1Client *c, const void *data, size_t len) {
  if (c->dead) return 0;
  char why[PC_ERROR_MAX - 32];
  if (!pc_GrpcSession_Recv(&c->h2, data, len, why, sizeof why)) {
    char text[PC_ERROR_MAX];
    snprintf(text, sizeof text, "HTTP/2 side of HTTP/1.1: %s", why);
    fail(c, text);
    return 0;
  }
  advance(c);
  return !c->dead;
}

/* A streamed body's bytes back to the engine's flow control while the
 * socket keeps up (its window then lets the next messages come). */
static void give_back(pc_Http1Client *c) {
  if (c->unconsumed == 0 || c->out.len - c->out_pos > OUTPUT_HIGH) return;
  if (nghttp2_session_consume(c->h2.session, c->stream, c->unconsumed) != 0)
    fail(c, "out of memory");
  c->unconsumed = 0;
}

size_t pc_Http1Client_ToEngine(pc_Http1Client *c, const char **data) {
  char why[PC_ERROR_MAX];
  if (!c->dead) {
    give_back(c);
    advance(c);
    if (!pc_GrpcSession_Fill(&c->h2, why, sizeof why)) fail(c, why);
    advance(c); /* the session took body bytes: more may be parsed */
  }
  if (c->dead) {
    *data = "";
    return 0;
  }
  return pc_GrpcSession_Output(&c->h2, data);
}

void pc_Http1Client_ToEngineDone(pc_Http1Client *c, size_t n) {
  pc_GrpcSession_Wrote(&c->h2, n);
}

int pc_Http1Client_Recv(pc_Http1Client *c, const void *data, size_t len) {
  if (c->dead) return 0;
  if (c->in_pos > 0) { /* the parser is given the unconsumed bytes first, again */
    memmove(c->in.p, c->in.p + c->in_pos, c->in.len - c->in_pos);
    c->in.len -= c->in_pos;
    c->in_pos = 0;
  }
  if (c->in.len + len + (c->resp.len - c->resp_pos) > c->o.max_pending) {
    char why[PC_ERROR_MAX];
    snprintf(why, sizeof why,
             "HTTP/1.1 response: over %zu bytes received and not read yet (no flow control "
             "over HTTP/1.1: read the stream or use HTTP/2)",
             c->o.max_pending);
    fail(c, why);
    return 0;
  }
  if (!append(c, &c->in, data, len)) {
    fail(c, "out of memory");
    return 0;
  }
  advance(c);
  return !c->dead;
}

void pc_Http1Client_Eof(pc_Http1Client *c) {
  if (c->eof) return;
  c->eof = 1;
  pc_Http1Parser_Eof(&c->p);
  if (c->dead) return;
  advance(c); /* a body until close ends; one cut short fails */
  if (c->phase < kStreaming) closing(c);
}

void pc_Http1Client_Idle(pc_Http1Client *c) {
  /* Its request has not ended with all the engine had: a stream whose
   * messages follow, its head written now so the server starts the call. */
  if (!c->dead && c->phase == kGathering && c->head_in) write_request(c, 1);
}

size_t pc_Http1Client_Output(pc_Http1Client *c, const char **data) {
  if (c->out.len == c->out_pos) {
    *data = "";
    return 0;
  }
  *data = c->out.p + c->out_pos;
  return c->out.len - c->out_pos;
}

void pc_Http1Client_Wrote(pc_Http1Client *c, size_t n) {
  size_t left = c->out.len - c->out_pos;
  c->out_pos += n < left ? n : left;
  if (c->out_pos == c->out.len) c->out.len = c->out_pos = 0;
}

const char *pc_Http1Client_Why(const pc_Http1Client *c) {
  return c->why;
}
