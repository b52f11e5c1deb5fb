/* The engine driven with byte buffers: a client engine talking to an
 * nghttp2 server session in the same process (no sockets). The server
 * answers by method name: echo, counts, gzip, Trailers-Only, HTTP errors,
 * resets, oversized prefixes and headers, long streams, GOAWAY; paths
 * under /t.W/ get the canned response of the test (gRPC-Web and Connect,
 * well formed and hostile). */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "net/engine.h"
#include "net/session_internal.h"
#include "net/web.h"

#include <nghttp2/nghttp2.h>
#include <zlib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- the server side ----------------------------------------------------- */

typedef struct {
  char path[128];
  unsigned char body[65536];
  size_t body_len;
  unsigned char *resp; /* response body (framed messages) */
  size_t resp_len, resp_pos;
  int trailers;   /* send grpc-status 0 trailers after resp */
  uint32_t reset; /* RST_STREAM code received */
  int got_reset;
} SStream;

typedef struct {
  nghttp2_session *s;
  SStream st[16]; /* by (stream id - 1) / 2 */
  int gzip_flag;  /* flag byte of the last request message */
  char encoding[32];
  int requests;        /* request header blocks begun */
  char hdr[16][2][64]; /* the last request's headers (names and values, cut at 63 bytes) */
  int nhdr;
  int32_t last; /* the stream of the last request */
} Server;

/* The canned response of paths under /t.W/: ':status', content-type, one
 * more header (NULL: none) and the body (0 bytes: the headers end the
 * stream). */
static struct {
  const char *status, *ct, *k, *v;
  const unsigned char *body;
  size_t len;
} can;

/* The server's SETTINGS_MAX_HEADER_LIST_SIZE for server_new (0: none sent). */
static uint32_t srv_header_limit;

static Server srv;

static SStream *sst(int32_t id) {
  return &srv.st[((id - 1) / 2) % 16];
}

static ssize_t s_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                      uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)src;
  (void)ud;
  SStream *t = sst(id);
  size_t n = t->resp_len - t->resp_pos;
  if (n > length) n = length;
  memcpy(buf, t->resp + t->resp_pos, n);
  t->resp_pos += n;
  if (t->resp_pos == t->resp_len) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (t->trailers) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      nghttp2_nv tr[] = {{(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, 0},
                         {(uint8_t *)"x-t", (uint8_t *)"yes", 3, 3, 0}};
      nghttp2_submit_trailer(session, id, tr, 2);
    }
  }
  return (ssize_t)n;
}

#define H(k, v)                                                                                    \
  { (uint8_t *)k, (uint8_t *)v, sizeof k - 1, sizeof v - 1, 0 }

static void frame(unsigned char *out, const void *msg, size_t n, int flag) {
  out[0] = (unsigned char)flag;
  out[1] = (unsigned char)(n >> 24);
  out[2] = (unsigned char)(n >> 16);
  out[3] = (unsigned char)(n >> 8);
  out[4] = (unsigned char)n;
  memcpy(out + 5, msg, n);
}

static void respond(int32_t id, unsigned char *body, size_t len, int trailers) {
  SStream *t = sst(id);
  t->resp = body;
  t->resp_len = len;
  t->resp_pos = 0;
  t->trailers = trailers;
  nghttp2_nv h[] = {H(":status", "200"), H("content-type", "application/grpc"),
                    H("grpc-encoding", "gzip")};
  nghttp2_data_provider prd = {{0}, s_read};
  int gz = strcmp(t->path, "/t.T/Gzip") == 0;
  nghttp2_submit_response(srv.s, id, h, gz ? 3 : 2, &prd);
}

static unsigned char big_body[300 * 1024];
static unsigned char small_body[4096];

static void reply(int32_t id) {
  SStream *t = sst(id);
  const char *m = t->path + 5; /* after "/t.T/" */
  if (strncmp(t->path, "/t.W/", 5) == 0) {
    nghttp2_nv h[3] = {{(uint8_t *)":status", (uint8_t *)can.status, 7, strlen(can.status), 0},
                       {(uint8_t *)"content-type", (uint8_t *)can.ct, 12, strlen(can.ct), 0}};
    size_t nh = 2;
    if (can.k) {
      h[2] = (nghttp2_nv){(uint8_t *)can.k, (uint8_t *)can.v, strlen(can.k), strlen(can.v), 0};
      nh = 3;
    }
    t->resp = (unsigned char *)can.body;
    t->resp_len = can.len;
    t->resp_pos = 0;
    t->trailers = 0;
    nghttp2_data_provider prd = {{0}, s_read};
    nghttp2_submit_response(srv.s, id, h, nh, can.len ? &prd : NULL);
  } else if (strcmp(m, "Echo") == 0) {
    memcpy(small_body, t->body, t->body_len);
    respond(id, small_body, t->body_len, 1);
  } else if (strcmp(m, "Count") == 0) {
    int n = 0;
    for (size_t o = 0; o + 5 <= t->body_len; n++) {
      o += 5 + ((size_t)t->body[o + 3] << 8 | t->body[o + 4]);
    }
    char text[16] = {0};
    int tl = snprintf(text, sizeof text, "%d", n);
    frame(small_body, text, (size_t)tl, 0);
    respond(id, small_body, (size_t)tl + 5, 1);
  } else if (strcmp(m, "Gzip") == 0) {
    unsigned char plain[300], z[512] = {0};
    memset(plain, 'a', sizeof plain);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    deflateInit2(&zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
    zs.next_in = plain;
    zs.avail_in = sizeof plain;
    zs.next_out = z;
    zs.avail_out = sizeof z;
    deflate(&zs, Z_FINISH);
    size_t zl = zs.total_out;
    deflateEnd(&zs);
    frame(small_body, z, zl, 1);
    respond(id, small_body, zl + 5, 1);
  } else if (strcmp(m, "Only") == 0) {
    nghttp2_nv h[] = {H(":status", "200"), H("content-type", "application/grpc"),
                      H("grpc-status", "5"), H("grpc-message", "no%20such"), H("x-o", "1")};
    nghttp2_submit_response(srv.s, id, h, 5, NULL);
  } else if (strcmp(m, "Info") == 0) {
    /* two 1xx blocks (informational, RFC 9113 8.1), then the response */
    nghttp2_nv c[] = {H(":status", "100")};
    nghttp2_nv hint[] = {H(":status", "103"), H("x-early", "hint")};
    nghttp2_submit_headers(srv.s, NGHTTP2_FLAG_NONE, id, NULL, c, 1, NULL);
    nghttp2_submit_headers(srv.s, NGHTTP2_FLAG_NONE, id, NULL, hint, 2, NULL);
    memcpy(small_body, t->body, t->body_len);
    respond(id, small_body, t->body_len, 1);
  } else if (strcmp(m, "StatusInHeaders") == 0) {
    /* grpc-status in the response headers, then a message and END_STREAM
     * without trailers */
    nghttp2_nv h[] = {H(":status", "200"), H("content-type", "application/grpc"),
                      H("grpc-status", "5"), H("grpc-message", "early")};
    nghttp2_submit_headers(srv.s, NGHTTP2_FLAG_NONE, id, NULL, h, 4, NULL);
    memcpy(small_body, t->body, t->body_len);
    t->resp = small_body;
    t->resp_len = t->body_len;
    t->resp_pos = 0;
    t->trailers = 0;
    nghttp2_data_provider prd = {{0}, s_read};
    nghttp2_submit_data(srv.s, NGHTTP2_FLAG_END_STREAM, id, &prd);
  } else if (strncmp(m, "Http", 4) == 0) {
    nghttp2_nv h[] = {{(uint8_t *)":status", (uint8_t *)m + 4, 7, 3, 0},
                      H("content-type", "text/plain")};
    nghttp2_submit_response(srv.s, id, h, 2, NULL);
  } else if (strncmp(m, "Rst", 3) == 0) {
    uint32_t code = (uint32_t)atoi(m + 3);
    if (code != NGHTTP2_REFUSED_STREAM) {
      nghttp2_nv h[] = {H(":status", "200"), H("content-type", "application/grpc")};
      nghttp2_submit_headers(srv.s, NGHTTP2_FLAG_NONE, id, NULL, h, 2, NULL);
    }
    nghttp2_submit_rst_stream(srv.s, NGHTTP2_FLAG_NONE, id, code);
  } else if (strcmp(m, "BigPrefix") == 0) {
    static unsigned char prefix[5] = {0, 0, 0xa0, 0, 0}; /* 10 MiB */
    respond(id, prefix, 5, 0);
  } else if (strcmp(m, "BigHeader") == 0) {
    static char v[10000];
    memset(v, 'y', sizeof v);
    nghttp2_nv h[] = {H(":status", "200"),
                      H("content-type", "application/grpc"),
                      {(uint8_t *)"x-big", (uint8_t *)v, 5, sizeof v, 0}};
    nghttp2_data_provider prd = {{0}, s_read};
    sst(id)->resp = small_body;
    sst(id)->resp_len = 0;
    sst(id)->trailers = 1;
    nghttp2_submit_response(srv.s, id, h, 3, &prd);
  } else if (strcmp(m, "Many") == 0) {
    /* 300 messages of 1019 bytes + 5 */
    unsigned char msg[1019] = {0};
    memset(msg, 'm', sizeof msg);
    for (size_t i = 0; i < 300; i++) frame(big_body + i * 1024, msg, sizeof msg, 0);
    respond(id, big_body, sizeof big_body, 1);
  } else if (strcmp(m, "GoawayAfter") == 0) {
    nghttp2_submit_goaway(srv.s, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR, NULL, 0);
    memcpy(small_body, t->body, t->body_len);
    respond(id, small_body, t->body_len, 1);
  } /* Hang: nothing */
}

static int s_header(nghttp2_session *session, const nghttp2_frame *f, const uint8_t *name,
                    size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud) {
  (void)session;
  (void)flags;
  (void)ud;
  SStream *t = sst(f->hd.stream_id);
  if (nl == 5 && memcmp(name, ":path", 5) == 0 && vl < sizeof t->path) {
    memcpy(t->path, value, vl);
    t->path[vl] = '\0';
  }
  if (srv.nhdr < 16 && nl < 64 && vl < 64) {
    memcpy(srv.hdr[srv.nhdr][0], name, nl);
    srv.hdr[srv.nhdr][0][nl] = '\0';
    memcpy(srv.hdr[srv.nhdr][1], value, vl);
    srv.hdr[srv.nhdr][1][vl] = '\0';
    srv.nhdr++;
  }
  if (nl == 13 && memcmp(name, "grpc-encoding", 13) == 0 && vl < sizeof srv.encoding) {
    memcpy(srv.encoding, value, vl);
    srv.encoding[vl] = '\0';
  }
  return 0;
}

static int s_begin(nghttp2_session *session, const nghttp2_frame *f, void *ud) {
  (void)session;
  (void)ud;
  SStream *t = sst(f->hd.stream_id);
  memset(t, 0, sizeof *t);
  srv.requests++;
  srv.nhdr = 0;
  srv.last = f->hd.stream_id;
  return 0;
}

static int s_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                  void *ud) {
  (void)session;
  (void)flags;
  (void)ud;
  SStream *t = sst(id);
  if (t->body_len == 0 && n > 0) srv.gzip_flag = d[0];
  if (t->body_len + n <= sizeof t->body) {
    memcpy(t->body + t->body_len, d, n);
    t->body_len += n;
  }
  return 0;
}

static int s_frame(nghttp2_session *session, const nghttp2_frame *f, void *ud) {
  (void)session;
  (void)ud;
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
    reply(f->hd.stream_id);
  if (f->hd.type == NGHTTP2_HEADERS && strcmp(sst(f->hd.stream_id)->path, "/t.T/Hang") == 0) {
    nghttp2_nv h[] = {H(":status", "200"), H("content-type", "application/grpc")};
    nghttp2_submit_headers(srv.s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NULL, h, 2, NULL);
  }
  if (f->hd.type == NGHTTP2_RST_STREAM) {
    sst(f->hd.stream_id)->got_reset = 1;
    sst(f->hd.stream_id)->reset = f->rst_stream.error_code;
  }
  return 0;
}

static void server_new(void) {
  memset(&srv, 0, sizeof srv);
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, s_header);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, s_begin);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, s_data);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, s_frame);
  nghttp2_session_server_new(&srv.s, cb, NULL);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 8},
                                 {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, srv_header_limit}};
  nghttp2_submit_settings(srv.s, NGHTTP2_FLAG_NONE, iv, srv_header_limit ? 2 : 1);
}

/* Moves bytes both ways until neither side has any. */
static void shuttle(pc_GrpcEngine *e) {
  for (int round = 0; round < 10000; round++) {
    int moved = 0;
    const char *p;
    size_t n;
    while ((n = pc_GrpcEngine_Output(e, &p)) > 0) {
      nghttp2_session_mem_recv(srv.s, (const uint8_t *)p, n);
      pc_GrpcEngine_Wrote(e, n);
      moved = 1;
    }
    const uint8_t *q;
    ssize_t m;
    while ((m = nghttp2_session_mem_send(srv.s, &q)) > 0) {
      pc_GrpcEngine_Recv(e, q, (size_t)m);
      moved = 1;
    }
    if (!moved) return;
  }
}

/* -- the client side ----------------------------------------------------- */

static int events[5];

static void on_event(void *ud, pc_GrpcStream *s, pc_GrpcEvent ev) {
  (void)ud;
  (void)s;
  events[ev]++;
}

static pc_GrpcEngine *client(size_t max_receive, size_t max_header_list, uint32_t window,
                             pc_Alloc *alloc) {
  pc_GrpcEngineOptions o;
  memset(&o, 0, sizeof o);
  o.authority = "test:1";
  o.max_receive = max_receive;
  o.max_header_list = max_header_list;
  o.stream_window = window;
  o.on_event = on_event;
  pc_Error err;
  pc_Error_Init(&err);
  return pc_GrpcEngine_New(&o, alloc, NULL, &err);
}

static pc_GrpcCallSettings plain = {-1, NULL, 0, 0, 0, 0, 0, 0, NULL};

/* Opens 'path', sends 'msg' (NULL: nothing), closes, shuttles. */
static pc_GrpcStream *call(pc_GrpcEngine *e, const char *path, const char *msg,
                           const pc_GrpcCallSettings *set) {
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcStream *s = pc_GrpcEngine_Open(e, path, set ? set : &plain, NULL, &err);
  if (s == NULL) return NULL;
  if (msg) pc_GrpcStream_Send(s, msg, strlen(msg));
  pc_GrpcStream_CloseSend(s);
  shuttle(e);
  return s;
}

static int ended_with(pc_GrpcStream *s, pc_Code code, const char *message) {
  const char *d;
  size_t n;
  while (pc_GrpcStream_Next(s, &d, &n) == 1) {
  }
  const pc_GrpcStatus *st = pc_GrpcStream_Status(s);
  if (st == NULL) return 0;
  if (st->code != code || (message && strcmp(st->message, message) != 0)) {
    fprintf(stderr, "status %d '%s'\n", (int)st->code, st->message);
    return 0;
  }
  return 1;
}

static int next_is(pc_GrpcStream *s, const char *want) {
  const char *d;
  size_t n;
  return pc_GrpcStream_Next(s, &d, &n) == 1 && n == strlen(want) && memcmp(d, want, n) == 0;
}

/* The value of 'key' among the response headers ('trailers' 0) or the
 * trailers (1), NULL when absent. */
static const char *md_value(pc_GrpcStream *s, int trailers, const char *key) {
  for (size_t i = 0; i < pc_GrpcStream_MetadataCount(s, trailers); i++) {
    const pc_GrpcPair *p = pc_GrpcStream_Metadata(s, trailers, i);
    if (strcmp(p->key, key) == 0) return p->value;
  }
  return NULL;
}

static const char *trailer(pc_GrpcStream *s, const char *key) {
  return md_value(s, 1, key);
}

/* Metadata of one pair "x-big" whose value is 'n' bytes of 'v'. */
static pc_GrpcCallSettings big_metadata(size_t n) {
  static char v[80000];
  static pc_GrpcPair p;
  memset(v, 'v', sizeof v);
  p.key = "x-big";
  p.key_len = 5;
  p.value = v;
  p.value_len = n;
  pc_GrpcCallSettings set = {-1, &p, 1, 0, 0, 0, 0, 0, NULL};
  return set;
}

/* An echo call with 'set' (NULL: none) through a new engine, then the
 * frees: 1 when it ended OK (for each_failure). */
static int echo_through(pc_Alloc *alloc, const pc_GrpcCallSettings *set) {
  server_new();
  pc_GrpcEngine *e = client(0, 0, 0, alloc);
  if (e == NULL) {
    nghttp2_session_del(srv.s);
    return 0;
  }
  pc_GrpcStream *s = call(e, "/t.T/Echo", "hello", set);
  int ok =
      s != NULL && pc_GrpcStream_Status(s) != NULL && pc_GrpcStream_Status(s)->code == kPc_Code_Ok;
  pc_GrpcEngine_Free(e);
  pc_GrpcStream_Free(s);
  nghttp2_session_del(srv.s);
  return ok;
}

static int echo_with(pc_Alloc *alloc) {
  return echo_through(alloc, NULL);
}

/* A call held until the peer's SETTINGS (9000 bytes of metadata, more
 * than goes out before them). */
static int held_with(pc_Alloc *alloc) {
  pc_GrpcCallSettings set = big_metadata(9000);
  return echo_through(alloc, &set);
}

/* Runs 'run' with allocation k failing, k = 1, 2, ... until none fails:
 * nothing leaks, and it succeeds once no allocation fails. */
static void each_failure(int (*run)(pc_Alloc *alloc)) {
  for (long k = 1;; k++) {
    fail_reset(k);
    int ok = run(fail_alloc);
    if (fail_live != 0) fprintf(stderr, "leak %lld bytes failing allocation %ld\n", fail_live, k);
    CHECK(fail_live == 0);
    if (!fail_hit) {
      CHECK(ok);
      break;
    }
  }
}

static void *must(void *p, const char *what);

/* Whether the 'n' bytes at 'p' hold the 'kn' bytes at 'k'. */
static int holds(const char *p, size_t n, const char *k, size_t kn) {
  for (size_t i = 0; i + kn <= n; i++)
    if (memcmp(p + i, k, kn) == 0) return 1;
  return 0;
}

/* The value of request header 'name' the server saw last, NULL when absent. */
static const char *req_header(const char *name) {
  for (int i = 0; i < srv.nhdr; i++)
    if (strcmp(srv.hdr[i][0], name) == 0) return srv.hdr[i][1];
  return NULL;
}

/* Sets the canned response. */
static void canned(const char *status, const char *ct, const char *k, const char *v,
                   const void *body, size_t len) {
  can.status = status;
  can.ct = ct;
  can.k = k;
  can.v = v;
  can.body = body;
  can.len = len;
}

/* An envelope ('flag', then the length) of the NUL-terminated 'msg' at
 * 'out' + '*at'; moves '*at' past it. */
static void envelope(unsigned char *out, size_t *at, int flag, const char *msg) {
  frame(out + *at, msg, strlen(msg), flag);
  *at += 5 + strlen(msg);
}

/* The settings of a call over 'protocol' (pc_WebProtocol). */
static pc_GrpcCallSettings over(int protocol) {
  pc_GrpcCallSettings set = {-1, NULL, 0, 0, 0, protocol, 0, 0, NULL};
  return set;
}

/* gRPC-Web and Connect, the client's side: request headers and bodies,
 * statuses from the Connect error JSON, the end-of-stream message and the
 * gRPC-Web trailers message, and hostile responses. */
static void web_client(void) {
  server_new();
  pc_GrpcEngine *e = must(client(1000, 0, 0, NULL), "client");
  static unsigned char b[4096];
  size_t at = 0;

  /* Connect unary: a bare body, Connect's headers, trailer- headers */
  pc_GrpcCallSettings cu = over(kPc_WebProtocol_ConnectUnary);
  cu.timeout = 1.5;
  canned("200", "application/proto", "trailer-x-t", "yes", "world", 5);
  pc_GrpcStream *s = must(call(e, "/t.W/U", "hello", &cu), "call");
  SStream *t = sst(srv.last);
  CHECK(t->body_len == 5 && memcmp(t->body, "hello", 5) == 0);
  CHECK(strcmp(req_header("content-type"), "application/proto") == 0);
  CHECK(strcmp(req_header("connect-protocol-version"), "1") == 0);
  CHECK(strcmp(req_header("connect-timeout-ms"), "1500") == 0);
  CHECK(strcmp(req_header("accept-encoding"), "gzip") == 0);
  CHECK(req_header("te") == NULL && req_header("grpc-timeout") == NULL);
  CHECK(next_is(s, "world"));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  CHECK(trailer(s, "x-t") != NULL && strcmp(trailer(s, "x-t"), "yes") == 0);
  CHECK(md_value(s, 0, "trailer-x-t") == NULL);
  pc_GrpcStream_Free(s);
  /* ...an empty body (the headers end the stream): an empty message, the
   * headers stay headers, trailer- headers trailers */
  canned("200", "application/proto", "trailer-x-t", "yes", NULL, 0);
  s = must(call(e, "/t.W/U", "hello", &cu), "call");
  CHECK(next_is(s, ""));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  CHECK(strcmp(md_value(s, 0, "content-type"), "application/proto") == 0);
  CHECK(trailer(s, "x-t") != NULL && strcmp(trailer(s, "x-t"), "yes") == 0);
  pc_GrpcStream_Free(s);
  /* ...gzip: Content-Encoding, the body gzipped whole */
  cu.gzip = 1;
  s = must(call(e, "/t.W/U", "hello", &cu), "call");
  CHECK(strcmp(req_header("content-encoding"), "gzip") == 0);
  CHECK(sst(srv.last)->body_len > 2 && sst(srv.last)->body[0] == 0x1f &&
        sst(srv.last)->body[1] == 0x8b);
  pc_GrpcStream_Free(s);
  cu.gzip = 0;

  /* Connect unary errors: the error JSON with details, a missing code, bad
   * JSON, no JSON, a body over the limit */
  const char *json =
      "{\"code\":\"not_found\",\"message\":\"gone \\u2713\",\"details\":["
      "{\"type\":\"google.rpc.ErrorInfo\",\"value\":\"CgdUT09fRkFS\",\"debug\":{}}]}";
  canned("404", "application/json", NULL, NULL, json, strlen(json));
  s = must(call(e, "/t.W/U", "x", &cu), "call");
  CHECK(ended_with(s, kPc_Code_NotFound, "gone \xe2\x9c\x93"));
  const pc_GrpcStatus *st = pc_GrpcStream_Status(s);
  /* google.rpc.Status{code 5, message, details [Any{type_url, value}]} */
  CHECK(st->details_len > 40 && st->details[0] == 0x08 && st->details[1] == 5);
  CHECK(holds(st->details, st->details_len, "type.googleapis.com/google.rpc.ErrorInfo", 40));
  CHECK(holds(st->details, st->details_len, "\x0a\x07TOO_FAR", 9));
  pc_GrpcStream_Free(s);
  canned("503", "application/json", NULL, NULL, "{\"message\":\"later\"}", 19);
  s = must(call(e, "/t.W/U", "x", &cu), "call");
  CHECK(ended_with(s, kPc_Code_Unavailable, "later"));
  pc_GrpcStream_Free(s);
  static const char *bad_json[] = {"{not json",
                                   "{\"code\":5}",
                                   "[]",
                                   "{\"details\":[{\"value\":\"!!\"}]}",
                                   "{\"code\":\"aborted\"} x",
                                   "\"\\ud800",
                                   "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[["
                                   "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["};
  for (size_t i = 0; i < sizeof bad_json / sizeof *bad_json; i++) {
    canned("503", "application/json", NULL, NULL, bad_json[i], strlen(bad_json[i]));
    s = must(call(e, "/t.W/U", "x", &cu), "call");
    CHECK(ended_with(s, kPc_Code_Unavailable, NULL));
    CHECK(strncmp(pc_GrpcStream_Status(s)->message,
                  "HTTP status 503 without Connect's error JSON: ", 46) == 0);
    pc_GrpcStream_Free(s);
  }
  canned("429", "text/plain", NULL, NULL, "slow down", 9);
  s = must(call(e, "/t.W/U", "x", &cu), "call");
  CHECK(ended_with(s, kPc_Code_Unavailable, "HTTP status 429 without Connect's error JSON"));
  pc_GrpcStream_Free(s);
  static unsigned char big[2000];
  memset(big, 'z', sizeof big);
  canned("200", "application/proto", NULL, NULL, big, sizeof big);
  s = must(call(e, "/t.W/U", "x", &cu), "call");
  CHECK(ended_with(s, kPc_Code_ResourceExhausted, NULL));
  pc_GrpcStream_Free(s);

  /* Connect streaming: envelopes, the end-of-stream message's metadata
   * and error */
  pc_GrpcCallSettings cs = over(kPc_WebProtocol_ConnectStream);
  at = 0;
  envelope(b, &at, 0, "a");
  envelope(b, &at, 0, "b");
  envelope(b, &at, 2, "{\"metadata\":{\"X-T\":[\"yes\",\"again\"],\"x-b-bin\":[\"AAE\"]}}");
  canned("200", "application/connect+proto", NULL, NULL, b, at);
  s = must(call(e, "/t.W/S", "hi", &cs), "call");
  CHECK(strcmp(req_header("content-type"), "application/connect+proto") == 0);
  CHECK(strcmp(req_header("connect-accept-encoding"), "gzip") == 0);
  CHECK(sst(srv.last)->body_len == 7 && sst(srv.last)->body[0] == 0 && sst(srv.last)->body[4] == 2);
  CHECK(next_is(s, "a") && next_is(s, "b"));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  CHECK(pc_GrpcStream_MetadataCount(s, 1) == 3 && strcmp(trailer(s, "x-t"), "yes") == 0);
  CHECK(memcmp(trailer(s, "x-b-bin"), "\0\1", 2) == 0);
  pc_GrpcStream_Free(s);
  at = 0;
  envelope(b, &at, 0, "a");
  envelope(b, &at, 2, "{\"error\":{\"code\":\"aborted\",\"message\":\"x\"},\"metadata\":null}");
  canned("200", "application/connect+json", NULL, NULL, b, at);
  s = must(call(e, "/t.W/S", "hi", &cs), "call");
  CHECK(next_is(s, "a"));
  CHECK(ended_with(s, kPc_Code_Aborted, "x"));
  pc_GrpcStream_Free(s);
  /* ...hostile: no end, a cut envelope, data after the end, bad JSON, an
   * end-of-stream message over the limit, a compressed one without gzip */
  struct {
    int flag;
    const char *body;
    const char *extra; /* raw bytes after (NULL: none) */
    pc_Code code;
    const char *message;
  } hostile[] = {
      {0, "a", NULL, kPc_Code_Internal, "Connect stream ended without its end-of-stream message"},
      {0, "a",
       "\0\0\0\0\x64"
       "ab",
       kPc_Code_Internal, "Connect stream ended without its end-of-stream message"},
      {2, "{}", "\0\0\0\0\0", kPc_Code_Internal, "response data after its end-of-stream message"},
      {2, "{\"error\":5}", NULL, kPc_Code_Internal,
       "invalid end-of-stream message: expected an object at offset 9"},
      {2, "{\"metadata\":{\"k\":[1]}}", NULL, kPc_Code_Internal,
       "invalid end-of-stream message: expected a string at offset 18"},
      {3, "{}", NULL, kPc_Code_Internal,
       "end-of-stream message is compressed but no encoding was given"},
      {0x80, "{}", NULL, kPc_Code_Internal, "response message has an invalid flags byte 0x80"},
  };
  for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
    at = 0;
    envelope(b, &at, hostile[i].flag, hostile[i].body);
    if (hostile[i].extra) {
      memcpy(b + at, hostile[i].extra, 5 + (hostile[i].extra[4] ? 2 : 0));
      at += 5 + (hostile[i].extra[4] ? 2 : 0);
    }
    canned("200", "application/connect+proto", NULL, NULL, b, at);
    s = must(call(e, "/t.W/S", "hi", &cs), "call");
    if (!ended_with(s, hostile[i].code, hostile[i].message)) {
      fprintf(stderr, "hostile Connect stream %zu\n", i);
      CHECK(0);
    }
    pc_GrpcStream_Free(s);
  }
  static unsigned char huge[5] = {2, 0, 0xa0, 0, 0}; /* 10 MiB */
  canned("200", "application/connect+proto", NULL, NULL, huge, 5);
  s = must(call(e, "/t.W/S", "hi", &cs), "call");
  CHECK(ended_with(s, kPc_Code_ResourceExhausted,
                   "end-of-stream message of 10485760 bytes exceeds the limit of 1000 bytes"));
  pc_GrpcStream_Free(s);
  canned("415", "application/json", NULL, NULL, "{}", 2);
  s = must(call(e, "/t.W/S", "hi", &cs), "call");
  CHECK(ended_with(s, kPc_Code_Unknown, "Connect stream failed with HTTP status 415"));
  pc_GrpcStream_Free(s);

  /* gRPC-Web: envelopes, the trailers message, trailers-only */
  pc_GrpcCallSettings gw = over(kPc_WebProtocol_GrpcWeb);
  gw.timeout = 2;
  at = 0;
  envelope(b, &at, 0, "hi");
  envelope(b, &at, 0x80, "grpc-status: 7\r\nGrpc-Message: no%20way\r\nx-t:yes\n\r\n");
  canned("200", "application/grpc-web+proto", NULL, NULL, b, at);
  s = must(call(e, "/t.W/G", "q", &gw), "call");
  CHECK(strcmp(req_header("content-type"), "application/grpc-web+proto") == 0);
  CHECK(strcmp(req_header("x-grpc-web"), "1") == 0 && req_header("te") == NULL);
  CHECK(req_header("grpc-timeout") != NULL && req_header("connect-timeout-ms") == NULL);
  CHECK(next_is(s, "hi"));
  CHECK(ended_with(s, kPc_Code_PermissionDenied, "no way"));
  CHECK(strcmp(trailer(s, "x-t"), "yes") == 0);
  pc_GrpcStream_Free(s);
  canned("200", "application/grpc-web+proto", "grpc-status", "5", NULL, 0);
  s = must(call(e, "/t.W/G", "q", &gw), "call");
  CHECK(ended_with(s, kPc_Code_NotFound, ""));
  pc_GrpcStream_Free(s);
  at = 0;
  envelope(b, &at, 0x80, "garbage\r\n");
  canned("200", "application/grpc-web+proto", NULL, NULL, b, at);
  s = must(call(e, "/t.W/G", "q", &gw), "call");
  CHECK(ended_with(s, kPc_Code_Internal,
                   "invalid gRPC-Web trailers message: gRPC-Web trailer line at offset 0 has no "
                   "key or no ':'"));
  pc_GrpcStream_Free(s);
  at = 0;
  envelope(b, &at, 0, "hi");
  canned("200", "application/grpc-web+proto", NULL, NULL, b, at);
  s = must(call(e, "/t.W/G", "q", &gw), "call");
  CHECK(next_is(s, "hi"));
  CHECK(ended_with(s, kPc_Code_Unknown, "no grpc-status in the response (HTTP status 200)"));
  pc_GrpcStream_Free(s);
  at = 0;
  envelope(b, &at, 0x80, "grpc-status: 0\r\n");
  envelope(b, &at, 0, "late");
  canned("200", "application/grpc-web+proto", NULL, NULL, b, at);
  s = must(call(e, "/t.W/G", "q", &gw), "call");
  CHECK(ended_with(s, kPc_Code_Internal, "response data after its trailers"));
  pc_GrpcStream_Free(s);

  /* the connection went on through all of it */
  s = must(call(e, "/t.T/Echo", "still", NULL), "call");
  CHECK(next_is(s, "still"));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);
}

/* 'p', or the test stops: what follows needs it. */
static void *must(void *p, const char *what) {
  if (p == NULL) {
    fprintf(stderr, "%s failed\n", what);
    exit(1);
  }
  return p;
}

/* At rest a client connection gives back the pages of nghttp2's start
 * block that are dead (the frame buffer, which a 20 KB request went
 * through) or zero (the stream map's table) and keeps less than 7 KiB of
 * it (about 13 KB as blocks of their own); a stream open keeps the map's
 * pages, and goes on. */
static void client_rest(void) {
  static char big[20001];
  memset(big, 'x', sizeof big - 1);
  server_new();
  pc_GrpcEngine *e = must(client(0, 0, 0, NULL), "client");
  pc_GrpcSession *h2 = (pc_GrpcSession *)e; /* its first member */
  CHECK(h2->block != NULL && h2->rest_lo != NULL && h2->zero_len[0] > 0);
  CHECK(h2->frames >= h2->block && h2->frames < h2->block + h2->block_size);
  h2->rest_delay = 0; /* at once (else the second round's pages a second later) */
  for (int round = 0; round < 2; round++) {
    pc_GrpcStream *s = must(call(e, "/t.T/Count", big, NULL), "call");
    CHECK(next_is(s, "1"));
    CHECK(ended_with(s, kPc_Code_Ok, ""));
    pc_GrpcStream_Free(s);
    const char *p;
    CHECK(pc_GrpcEngine_Output(e, &p) == 0);
    CHECK(!h2->frames_dirty);
    CHECK(pc_GrpcSession_RestResident(h2) == 0);
  }
  size_t kept = h2->block_size - (size_t)(h2->rest_hi - h2->rest_lo);
  CHECK(kept <= 7 * 1024);
  /* A rest page holding a byte of the map's table that is not zero stays,
   * and the byte with it. */
  unsigned char *z = h2->block + h2->zero_off[0];
  unsigned char *mark = z > h2->rest_lo ? z : h2->rest_lo;
  CHECK(mark < z + h2->zero_len[0] && mark < h2->rest_hi);
  *mark = 1;
  h2->frames_dirty = h2->frames_new = h2->quiet = 1;
  pc_GrpcSession_Rest(h2);
  CHECK(*mark == 1 && pc_GrpcSession_RestResident(h2) == 1);
  *mark = 0;
  /* As if at rest with a stream open: its entry in the map stays. */
  pc_GrpcStream *s = must(call(e, "/t.T/Hang", NULL, NULL), "call");
  int32_t id = 0;
  for (int32_t i = 1; i < 64; i += 2)
    if (strcmp(sst(i)->path, "/t.T/Hang") == 0) id = i;
  unsigned char before[8192];
  CHECK(h2->zero_len[0] <= sizeof before);
  memcpy(before, z, h2->zero_len[0]);
  h2->frames_dirty = h2->frames_new = h2->quiet = 1;
  pc_GrpcSession_Rest(h2);
  CHECK(memcmp(before, z, h2->zero_len[0]) == 0);
  pc_GrpcStream_Cancel(s, kPc_Code_Cancelled, "cancelled");
  shuttle(e);
  CHECK(sst(id)->got_reset && sst(id)->reset == NGHTTP2_CANCEL);
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Echo", "after", NULL), "call");
  CHECK(next_is(s, "after"));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);
  memset(events, 0, sizeof events);
}

int main(void) {
  client_rest();
  server_new();
  pc_GrpcEngine *e = must(client(0, 0, 0, NULL), "client");

  /* unary echo: headers, message, trailers, status; drained once the one
   * message is read (pc_GrpcStream_Drained), not before */
  pc_GrpcStream *s = must(call(e, "/t.T/Echo", "hello", NULL), "call");
  CHECK(!pc_GrpcStream_Drained(s));
  CHECK(next_is(s, "hello"));
  CHECK(pc_GrpcStream_Drained(s));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  CHECK(strcmp(trailer(s, "x-t"), "yes") == 0);
  CHECK(events[kPc_GrpcEvent_Headers] == 1 && events[kPc_GrpcEvent_Message] == 1 &&
        events[kPc_GrpcEvent_End] == 1);
  pc_GrpcStream_Free(s);

  /* a stream in a lent arena: what it keeps is there, its end frees none
   * of it (the arena's owner does) */
  {
    pc_Arena *lent = must(pc_Arena_New(NULL, NULL), "pc_Arena_New");
    pc_GrpcCallSettings in_arena = plain;
    in_arena.arena = lent;
    size_t before = pc_Arena_SpaceAllocated(lent);
    s = must(call(e, "/t.T/Echo", "lent", &in_arena), "call");
    CHECK(pc_Arena_SpaceAllocated(lent) > before);
    CHECK(next_is(s, "lent"));
    CHECK(ended_with(s, kPc_Code_Ok, ""));
    CHECK(strcmp(trailer(s, "x-t"), "yes") == 0);
    pc_GrpcStream_Free(s);
    pc_Arena_Free(lent);
  }

  /* client streaming: three messages, one answer */
  pc_Error err;
  pc_Error_Init(&err);
  s = must(pc_GrpcEngine_Open(e, "/t.T/Count", &plain, NULL, &err), "pc_GrpcEngine_Open");
  CHECK(pc_GrpcStream_Send(s, "a", 1) && pc_GrpcStream_Send(s, "", 0) &&
        pc_GrpcStream_Send(s, "ccc", 3));
  shuttle(e);
  CHECK(pc_GrpcStream_Status(s) == NULL);
  pc_GrpcStream_CloseSend(s);
  CHECK(!pc_GrpcStream_Send(s, "late", 4));
  shuttle(e);
  CHECK(next_is(s, "3"));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  pc_GrpcStream_Free(s);

  /* gzip both ways */
  pc_GrpcCallSettings gz = {5.0, NULL, 0, 1, 0, 0, 0, 0, NULL};
  s = must(call(e, "/t.T/Echo", "squeeze", &gz), "call");
  CHECK(srv.gzip_flag == 1 && strcmp(srv.encoding, "gzip") == 0);
  CHECK(pc_GrpcStream_Status(s) != NULL);
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Gzip", NULL, NULL), "call");
  const char *d;
  size_t n;
  CHECK(pc_GrpcStream_Next(s, &d, &n) == 1 && n == 300 && d[0] == 'a' && d[299] == 'a');
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  pc_GrpcStream_Free(s);

  /* Trailers-Only (its metadata is the trailers, as grpc-core reads it), HTTP errors */
  s = must(call(e, "/t.T/Only", NULL, NULL), "call");
  CHECK(ended_with(s, kPc_Code_NotFound, "no such"));
  CHECK(pc_GrpcStream_MetadataCount(s, 0) == 0);
  CHECK(trailer(s, "x-o") != NULL && strcmp(trailer(s, "x-o"), "1") == 0);
  pc_GrpcStream_Free(s);
  /* 1xx blocks are skipped: the response that follows is read */
  s = must(call(e, "/t.T/Info", "hello", NULL), "call");
  CHECK(next_is(s, "hello"));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  CHECK(md_value(s, 0, "content-type") != NULL && md_value(s, 0, "x-early") == NULL &&
        trailer(s, "x-early") == NULL);
  CHECK(trailer(s, "x-t") != NULL && strcmp(trailer(s, "x-t"), "yes") == 0);
  pc_GrpcStream_Free(s);
  /* a grpc-status in the response headers is not the status (the C++
   * client's reading): the message is read, the missing trailers are UNKNOWN */
  s = must(call(e, "/t.T/StatusInHeaders", "hello", NULL), "call");
  CHECK(next_is(s, "hello"));
  CHECK(ended_with(s, kPc_Code_Unknown, "no grpc-status in the response (HTTP status 200)"));
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Http503", NULL, NULL), "call");
  CHECK(ended_with(s, kPc_Code_Unavailable, "no grpc-status in the response (HTTP status 503)"));
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Http431", NULL, NULL), "call");
  CHECK(ended_with(s, kPc_Code_Internal, "no grpc-status in the response (HTTP status 431)"));
  pc_GrpcStream_Free(s);

  /* RST_STREAM codes */
  s = must(call(e, "/t.T/Rst7", NULL, NULL), "call");
  CHECK(ended_with(s, kPc_Code_Unavailable, NULL));
  CHECK(pc_GrpcStream_Refused(s));
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Rst8", NULL, NULL), "call");
  CHECK(ended_with(s, kPc_Code_Cancelled, "stream reset by the server: RST_STREAM CANCEL (8)"));
  CHECK(!pc_GrpcStream_Refused(s));
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Rst0", NULL, NULL), "call");
  CHECK(ended_with(s, kPc_Code_Internal, NULL));
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Rst11", NULL, NULL), "call");
  CHECK(ended_with(s, kPc_Code_ResourceExhausted, NULL));
  pc_GrpcStream_Free(s);

  /* cancel: the server sees RST_STREAM CANCEL */
  s = must(call(e, "/t.T/Hang", NULL, NULL), "call");
  CHECK(pc_GrpcStream_HeadersDone(s) && pc_GrpcStream_Status(s) == NULL);
  int32_t hang_id = 0;
  for (int32_t id = 1; id < 64; id += 2) {
    if (strcmp(sst(id)->path, "/t.T/Hang") == 0) hang_id = id;
  }
  pc_GrpcStream_Cancel(s, kPc_Code_DeadlineExceeded, "deadline exceeded");
  shuttle(e);
  CHECK(sst(hang_id)->got_reset && sst(hang_id)->reset == NGHTTP2_CANCEL);
  CHECK(ended_with(s, kPc_Code_DeadlineExceeded, "deadline exceeded"));
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);

  /* limits: receive size at the prefix; header list; the connection goes on */
  server_new();
  e = must(client(1000, 8192, 0, NULL), "client");
  s = must(call(e, "/t.T/BigPrefix", NULL, NULL), "call");
  CHECK(ended_with(s, kPc_Code_ResourceExhausted,
                   "response message of 10485760 bytes exceeds the receive limit of 1000 bytes"));
  CHECK(pc_GrpcStream_Status(s)->local);
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/BigHeader", NULL, NULL), "call");
  CHECK(ended_with(s, kPc_Code_ResourceExhausted,
                   "response header list of more than 8192 bytes exceeds the limit of 8192 bytes"));
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Echo", "still", NULL), "call");
  CHECK(next_is(s, "still"));
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);

  /* flow control: an unread stream holds at most its window */
  server_new();
  e = must(client(0, 0, 65536, NULL), "client");
  s = must(call(e, "/t.T/Many", NULL, NULL), "call");
  CHECK(pc_GrpcStream_Status(s) == NULL);
  CHECK(pc_GrpcStream_Buffered(s) <= 2 * 65536);
  int got = 0;
  for (int i = 0; i < 10000 && got < 300; i++) {
    if (pc_GrpcStream_Next(s, &d, &n) == 1) {
      CHECK(n == 1019);
      got++;
    } else {
      shuttle(e);
    }
    CHECK(pc_GrpcStream_Buffered(s) <= 2 * 65536);
  }
  CHECK(got == 300);
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  pc_GrpcStream_Free(s);

  /* graceful GOAWAY: the call in flight completes, no new streams */
  s = must(call(e, "/t.T/GoawayAfter", "bye", NULL), "call");
  CHECK(next_is(s, "bye"));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  CHECK(pc_GrpcEngine_GoawayReceived(e) && !pc_GrpcEngine_CanOpen(e));
  CHECK(pc_GrpcEngine_Open(e, "/t.T/Echo", &plain, NULL, &err) == NULL);
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);

  /* GOAWAY before the call was taken: refused, UNAVAILABLE */
  server_new();
  e = must(client(0, 0, 0, NULL), "client");
  nghttp2_submit_goaway(srv.s, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0);
  pc_Error_Init(&err);
  s = must(pc_GrpcEngine_Open(e, "/t.T/Echo", &plain, NULL, &err), "pc_GrpcEngine_Open");
  const uint8_t *q;
  ssize_t m;
  while ((m = nghttp2_session_mem_send(srv.s, &q)) > 0) pc_GrpcEngine_Recv(e, q, (size_t)m);
  shuttle(e);
  CHECK(ended_with(s, kPc_Code_Unavailable, NULL));
  CHECK(pc_GrpcStream_Refused(s));
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);

  /* garbage from the peer: a clear connection error, streams end */
  e = must(client(0, 0, 0, NULL), "client");
  s = must(pc_GrpcEngine_Open(e, "/t.T/Echo", &plain, NULL, &err), "pc_GrpcEngine_Open");
  static const char junk[] = "SSH-2.0-OpenSSH_9.2 this is not HTTP/2\r\n";
  const char *sent;
  pc_GrpcEngine_Wrote(e, pc_GrpcEngine_Output(e, &sent));
  pc_GrpcEngine_Recv(e, junk, sizeof junk - 1);
  for (int i = 0; i < 4; i++) {
    const char *p;
    size_t k = pc_GrpcEngine_Output(e, &p);
    pc_GrpcEngine_Wrote(e, k);
  }
  CHECK(!pc_GrpcEngine_Alive(e));
  CHECK(pc_GrpcStream_Status(s) != NULL && pc_GrpcStream_Status(s)->code == kPc_Code_Unavailable);
  CHECK(strncmp(pc_GrpcStream_Status(s)->message, "HTTP/2 connection error", 23) == 0);
  pc_GrpcEngine_Free(e);
  CHECK(pc_GrpcStream_Next(s, &d, &n) == -1); /* detached, still valid */
  pc_GrpcStream_Free(s);

  /* keepalive PING: one at a time, answered by the peer's ACK */
  server_new();
  e = must(client(0, 0, 0, NULL), "client");
  shuttle(e);
  CHECK(!pc_GrpcEngine_PingPending(e));
  CHECK(pc_GrpcEngine_Ping(e) && pc_GrpcEngine_PingPending(e));
  CHECK(!pc_GrpcEngine_Ping(e));                          /* the first awaits its ACK */
  pc_GrpcEngine_Wrote(e, pc_GrpcEngine_Output(e, &sent)); /* lost on the way: no ACK */
  CHECK(pc_GrpcEngine_PingPending(e));
  CHECK(!pc_GrpcEngine_Ping(e));
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);
  server_new();
  e = must(client(0, 0, 0, NULL), "client");
  CHECK(pc_GrpcEngine_Ping(e));
  shuttle(e); /* the server's nghttp2 ACKs it */
  CHECK(!pc_GrpcEngine_PingPending(e) && pc_GrpcEngine_Alive(e));
  CHECK(pc_GrpcEngine_Ping(e));
  pc_GrpcEngine_Lost(e, "gone", 0);
  CHECK(!pc_GrpcEngine_Ping(e) || !pc_GrpcEngine_Alive(e));
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);

  /* a request header block the connection cannot carry fails at once,
   * RESOURCE_EXHAUSTED and local, nothing sent: over the peer's
   * SETTINGS_MAX_HEADER_LIST_SIZE (389 bytes of fields with 5037 of
   * metadata), over what nghttp2 sends in one block */
  srv_header_limit = 4096;
  server_new();
  e = must(client(0, 0, 0, NULL), "client");
  shuttle(e); /* SETTINGS both ways */
  pc_GrpcCallSettings big = big_metadata(5000);
  s = must(call(e, "/t.T/Echo", "hello", &big), "call");
  CHECK(ended_with(s, kPc_Code_ResourceExhausted,
                   "request header list of 5426 bytes exceeds the server's limit of 4096 bytes "
                   "(SETTINGS_MAX_HEADER_LIST_SIZE: a field counts its name, its value and 32)"));
  CHECK(pc_GrpcStream_Status(s)->local && !pc_GrpcStream_Refused(s));
  CHECK(srv.requests == 0);
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Echo", "small", NULL), "call");
  CHECK(next_is(s, "small"));
  CHECK(ended_with(s, kPc_Code_Ok, "") && srv.requests == 1);
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);
  /* before the peer's SETTINGS: a block over 8 KiB waits for them, then
   * is checked; a smaller one goes out at once; a held call cancelled */
  server_new();
  e = must(client(0, 0, 0, NULL), "client");
  big = big_metadata(9000);
  s = must(pc_GrpcEngine_Open(e, "/t.T/Echo", &big, NULL, &err), "pc_GrpcEngine_Open");
  pc_GrpcStream *small = must(pc_GrpcEngine_Open(e, "/t.T/Echo", &plain, NULL, &err), "open");
  pc_GrpcStream_Send(small, "at once", 7);
  pc_GrpcStream_CloseSend(small);
  const char *out;
  size_t len;
  while ((len = pc_GrpcEngine_Output(e, &out)) > 0) { /* to the server, nothing back */
    nghttp2_session_mem_recv(srv.s, (const uint8_t *)out, len);
    pc_GrpcEngine_Wrote(e, len);
  }
  CHECK(srv.requests == 1 && pc_GrpcStream_Status(s) == NULL);
  shuttle(e);
  CHECK(next_is(small, "at once"));
  CHECK(ended_with(small, kPc_Code_Ok, "") && srv.requests == 1);
  CHECK(ended_with(s, kPc_Code_ResourceExhausted,
                   "request header list of 9426 bytes exceeds the server's limit of 4096 bytes "
                   "(SETTINGS_MAX_HEADER_LIST_SIZE: a field counts its name, its value and 32)"));
  CHECK(srv.requests == 1);
  pc_GrpcStream_Free(s);
  pc_GrpcStream_Free(small);
  s = must(pc_GrpcEngine_Open(e, "/t.T/Echo", &big, NULL, &err), "pc_GrpcEngine_Open");
  CHECK(ended_with(s, kPc_Code_ResourceExhausted, NULL)); /* known now: at once */
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);
  srv_header_limit = 0;
  server_new();
  e = must(client(0, 0, 0, NULL), "client");
  s = must(call(e, "/t.T/Echo", "held", &big), "call"); /* sent once SETTINGS came */
  CHECK(next_is(s, "held"));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  pc_GrpcStream_Free(s);
  big = big_metadata(70000);
  s = must(call(e, "/t.T/Echo", "hello", &big), "call");
  CHECK(ended_with(s, kPc_Code_ResourceExhausted,
                   "request header block of up to 70263 bytes exceeds the 65536 bytes nghttp2 "
                   "sends as one header block"));
  CHECK(pc_GrpcStream_Status(s)->local && !pc_GrpcStream_Refused(s));
  pc_GrpcStream_Free(s);
  big = big_metadata(65273); /* up to 65536 bytes: nghttp2 sends it */
  s = must(call(e, "/t.T/Echo", "edge", &big), "call");
  CHECK(next_is(s, "edge"));
  CHECK(ended_with(s, kPc_Code_Ok, ""));
  pc_GrpcStream_Free(s);
  big = big_metadata(65274);
  s = must(call(e, "/t.T/Echo", "edge", &big), "call");
  CHECK(ended_with(s, kPc_Code_ResourceExhausted, NULL) && pc_GrpcStream_Status(s)->local);
  pc_GrpcStream_Free(s);

  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);
  server_new();
  e = must(client(0, 0, 0, NULL), "client");
  s = must(pc_GrpcEngine_Open(e, "/t.T/Echo", &big, NULL, &err), "pc_GrpcEngine_Open");
  pc_GrpcStream_Cancel(s, kPc_Code_Cancelled, "cancelled");
  shuttle(e);
  CHECK(ended_with(s, kPc_Code_Cancelled, "cancelled") && srv.requests == 0);
  CHECK(pc_GrpcEngine_Running(e) == 0 && pc_GrpcEngine_CanOpen(e));
  pc_GrpcStream_Free(s);
  s = must(call(e, "/t.T/Echo", "next", NULL), "call");
  CHECK(next_is(s, "next"));
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  nghttp2_session_del(srv.s);

  /* misuse */
  e = must(client(0, 0, 0, NULL), "client");
  CHECK(pc_GrpcEngine_Open(e, "no-slash", &plain, NULL, &err) == NULL);
  CHECK(strcmp(err.msg, "method path 'no-slash': expected /package.Service/Method") == 0);
  pc_GrpcPair bad = {"Bad", 3, "v", 1};
  pc_GrpcCallSettings badmd = {-1, &bad, 1, 0, 0, 0, 0, 0, NULL};
  CHECK(pc_GrpcEngine_Open(e, "/a.B/C", &badmd, NULL, &err) == NULL);
  pc_GrpcEngine_Free(e);

  each_failure(echo_with);
  each_failure(held_with);
  web_client();
  return CHECK_DONE();
}
