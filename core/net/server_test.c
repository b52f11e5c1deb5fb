/* The server engine driven with byte buffers: an nghttp2 client session in
 * the same process (no sockets) against pc_GrpcServerConn. Covers a unary
 * call with metadata and timeout, Trailers-Only errors with a
 * percent-encoded message and details, 415, a malformed grpc-timeout, an
 * unknown grpc-encoding, gzip, limits (message size, resets, PING flood,
 * response header blocks too large to send, requests still arriving and
 * stalled), a truncated message, a
 * client reset, deadlines, flow control of a client that does not read,
 * wake tokens, graceful shutdown, and every allocation failing. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "net/server.h"
#include "net/session_internal.h"

#include <nghttp2/nghttp2.h>
#include <zlib.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -- the client side ------------------------------------------------------- */

typedef struct {
  char headers[1024]; /* "k=v;" of the response header block */
  char trailers[1024];
  unsigned char data[1 << 20];
  size_t data_len;
  int closed;
  uint32_t rst;
  int got_rst;
  const unsigned char *body; /* request body to send */
  size_t body_len, body_pos;
  int end; /* END_STREAM after the body */
} CStream;

typedef struct {
  nghttp2_session *s;
  CStream st[32]; /* by (stream id - 1) / 2 */
  int goaway;
  uint32_t goaway_code;
  int32_t goaway_last;
  int no_window; /* do not give received bytes back */
} Client;

static Client cli;

static CStream *cst(int32_t id) {
  return &cli.st[((id - 1) / 2) % 32];
}

static int c_header(nghttp2_session *session, const nghttp2_frame *f, const uint8_t *name,
                    size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud) {
  (void)session;
  (void)flags;
  (void)ud;
  CStream *t = cst(f->hd.stream_id);
  char *dst = f->headers.cat == NGHTTP2_HCAT_HEADERS ? t->trailers : t->headers;
  size_t len = strlen(dst);
  snprintf(dst + len, 1024 - len, "%.*s=%.*s;", (int)nl, name, (int)vl, value);
  return 0;
}

static int c_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                  void *ud) {
  (void)flags;
  (void)ud;
  CStream *t = cst(id);
  if (t->data_len + n <= sizeof t->data) {
    memcpy(t->data + t->data_len, d, n);
    t->data_len += n;
  }
  if (!cli.no_window) nghttp2_session_consume(session, id, n);
  return 0;
}

static int c_frame(nghttp2_session *session, const nghttp2_frame *f, void *ud) {
  (void)session;
  (void)ud;
  if (f->hd.type == NGHTTP2_GOAWAY) {
    cli.goaway = 1;
    cli.goaway_code = f->goaway.error_code;
    cli.goaway_last = f->goaway.last_stream_id;
  }
  if (f->hd.type == NGHTTP2_RST_STREAM) {
    cst(f->hd.stream_id)->got_rst = 1;
    cst(f->hd.stream_id)->rst = f->rst_stream.error_code;
  }
  return 0;
}

static int c_close(nghttp2_session *session, int32_t id, uint32_t code, void *ud) {
  (void)session;
  (void)code;
  (void)ud;
  cst(id)->closed = 1;
  return 0;
}

static ssize_t c_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                      uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)session;
  (void)src;
  (void)ud;
  CStream *t = cst(id);
  size_t n = t->body_len - t->body_pos;
  if (n > length) n = length;
  memcpy(buf, t->body + t->body_pos, n);
  t->body_pos += n;
  if (t->body_pos == t->body_len) {
    if (t->end)
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    else if (n == 0)
      return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

static void client_new(uint32_t window) {
  if (cli.s) nghttp2_session_del(cli.s);
  memset(&cli, 0, sizeof cli);
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, c_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, c_data);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, c_frame);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, c_close);
  nghttp2_option *opt;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_session_client_new2(&cli.s, cb, NULL, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window}};
  nghttp2_submit_settings(cli.s, NGHTTP2_FLAG_NONE, iv, 1);
}

#define H(k, v)                                                                                    \
  { (uint8_t *)k, (uint8_t *)v, sizeof k - 1, sizeof v - 1, 0 }

static unsigned char bodies[8][8192];

/* A request of 'path' with one framed message 'msg' (flag 'flag'). */
static int32_t request(const char *path, const char *ctype, const char *extra_k,
                       const char *extra_v, const void *msg, size_t n, int flag, int end) {
  nghttp2_nv h[8] = {H(":method", "POST"),
                     H(":scheme", "http"),
                     {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
                     H(":authority", "t"),
                     {(uint8_t *)"content-type", (uint8_t *)ctype, 12, strlen(ctype), 0},
                     H("te", "trailers"),
                     H("x-user", "ann")};
  size_t nh = 7;
  if (extra_k) {
    h[nh].name = (uint8_t *)extra_k;
    h[nh].namelen = strlen(extra_k);
    h[nh].value = (uint8_t *)extra_v;
    h[nh].valuelen = strlen(extra_v);
    h[nh].flags = 0;
    nh++;
  }
  int32_t id = nghttp2_session_get_next_stream_id(cli.s);
  CStream *t = cst(id);
  unsigned char *b = bodies[((id - 1) / 2) % 8];
  b[0] = (unsigned char)flag;
  b[1] = (unsigned char)(n >> 24);
  b[2] = (unsigned char)(n >> 16);
  b[3] = (unsigned char)(n >> 8);
  b[4] = (unsigned char)n;
  if (msg) memcpy(b + 5, msg, n);
  t->body = b;
  t->body_len = msg ? 5 + n : 5;
  t->end = end;
  nghttp2_data_provider prd = {{0}, c_read};
  return nghttp2_submit_request(cli.s, NULL, h, nh, &prd, NULL);
}

static double now_s = 100;

/* Moves bytes both ways until neither side has any. */
static void shuttle(pc_GrpcServerConn *c) {
  for (int round = 0; round < 1000; round++) {
    int moved = 0;
    const uint8_t *p;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(cli.s, &p)) > 0) {
      moved = 1;
      pc_GrpcServerConn_Recv(c, p, (size_t)n, now_s);
    }
    const char *q;
    size_t m;
    while ((m = pc_GrpcServerConn_Output(c, &q)) > 0) {
      moved = 1;
      nghttp2_session_mem_recv(cli.s, (const uint8_t *)q, m);
      pc_GrpcServerConn_Wrote(c, m);
    }
    if (!moved) break;
  }
}

static pc_GrpcServerConn *server(pc_Alloc *alloc, size_t max_receive, uint32_t resets,
                                 uint32_t controls) {
  pc_GrpcServerOptions o;
  memset(&o, 0, sizeof o);
  o.max_receive = max_receive;
  o.reset_burst = resets;
  o.control_burst = controls;
  o.reset_rate = o.control_rate = 1;
  pc_Error err;
  pc_Error_Init(&err);
  return pc_GrpcServerConn_New(&o, alloc, NULL, &err);
}

static int has(const char *block, const char *kv) {
  return strstr(block, kv) != NULL;
}

static void *must_at(void *p, const char *what, int line) {
  if (p == NULL) {
    fprintf(stderr, "%s:%d: no %s\n", __FILE__, line, what);
    exit(1);
  }
  return p;
}

#define must(p, what) must_at((p), (what), __LINE__)

/* One unary exchange under 'alloc'; returns whether it all went through. */
static int unary_with(pc_Alloc *alloc) {
  client_new(65535);
  pc_GrpcServerConn *c = server(alloc, 0, 0, 0);
  if (c == NULL) return 0;
  int32_t id = request("/t.T/Echo", "application/grpc", "x-raw-bin", "AAEC", "hi", 2, 0, 1);
  shuttle(c);
  pc_GrpcServerCall *s = pc_GrpcServerConn_Accept(c);
  int ok = 0;
  if (s) {
    const char *d;
    size_t n;
    if (pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 2) {
      pc_GrpcPair tr = {"x-t", 3, "yes", 3};
      pc_Error err;
      pc_Error_Init(&err);
      pc_GrpcServerCall_AddMetadata(s, 1, &tr, &err);
      pc_GrpcServerCall_Send(s, d, n);
      pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
      shuttle(c);
      ok = has(cst(id)->trailers, "grpc-status=0;") && has(cst(id)->trailers, "x-t=yes;");
    }
    pc_GrpcServerCall_Free(s);
  }
  pc_GrpcServerConn_Free(c);
  return ok;
}

/* -- gRPC-Web and Connect ------------------------------------------------- */

/* A request of 'path' whose body is the first 'first' of the 'n' bytes at
 * 'body' (the rest: more_body), ending the stream when all is sent and
 * 'end'. */
static int32_t request_body(const char *path, const char *ctype, const char *extra_k,
                            const char *extra_v, const char *body, size_t n, size_t first,
                            int end) {
  nghttp2_nv h[8] = {H(":method", "POST"),
                     H(":scheme", "http"),
                     {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
                     H(":authority", "t"),
                     {(uint8_t *)"content-type", (uint8_t *)ctype, 12, strlen(ctype), 0},
                     H("x-user", "ann")};
  size_t nh = 6;
  if (extra_k) {
    h[nh].name = (uint8_t *)extra_k;
    h[nh].namelen = strlen(extra_k);
    h[nh].value = (uint8_t *)extra_v;
    h[nh].valuelen = strlen(extra_v);
    h[nh].flags = 0;
    nh++;
  }
  int32_t id = nghttp2_session_get_next_stream_id(cli.s);
  CStream *t = cst(id);
  unsigned char *b = bodies[((id - 1) / 2) % 8];
  memcpy(b, body, n);
  t->body = b;
  t->body_len = first;
  t->end = end && first == n;
  nghttp2_data_provider prd = {{0}, c_read};
  return nghttp2_submit_request(cli.s, NULL, h, nh, &prd, NULL);
}

/* A request of 'path' by HTTP 'method', without a body. */
static int32_t request_no_body(const char *method, const char *path, const char *ctype) {
  nghttp2_nv h[5] = {{(uint8_t *)":method", (uint8_t *)method, 7, strlen(method), 0},
                     H(":scheme", "http"),
                     {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
                     H(":authority", "t"),
                     {(uint8_t *)"content-type", (uint8_t *)ctype, 12, strlen(ctype), 0}};
  return nghttp2_submit_request(cli.s, NULL, h, 5, NULL, NULL);
}

/* Writes at 'b' a gRPC message of 'len' bytes 'p', its prefix first. */
static void fill_message(unsigned char *b, size_t len) {
  memset(b + 5, 'p', len);
  b[0] = 0;
  b[1] = (unsigned char)(len >> 24);
  b[2] = (unsigned char)(len >> 16);
  b[3] = (unsigned char)(len >> 8);
  b[4] = (unsigned char)len;
}

/* Sends the rest of request_body's body, then the end of the stream. */
static void more_body(int32_t id, size_t upto, int end) {
  cst(id)->body_len = upto;
  cst(id)->end = end;
  nghttp2_session_resume_data(cli.s, id);
}

/* Decodes the base64 response of a gRPC-Web-Text call into 'out'. */
static size_t unbase64(const CStream *t, unsigned char *out) {
  pc_WebBase64 b;
  memset(&b, 0, sizeof b);
  size_t at;
  return pc_WebBase64_Decode(&b, (const char *)t->data, t->data_len, out, &at);
}

/* A Connect unary exchange under 'alloc' (request gzipped when 'gzip'):
 * returns whether it all went through. */
static int connect_with(pc_Alloc *alloc) {
  client_new(65535);
  pc_GrpcServerConn *c = server(alloc, 0, 0, 0);
  if (c == NULL) return 0;
  int32_t id =
      request_body("/t.T/Echo", "application/proto", "connect-timeout-ms", "2500", "hi", 2, 2, 1);
  shuttle(c);
  pc_GrpcServerCall *s = pc_GrpcServerConn_Accept(c);
  int ok = 0;
  if (s) {
    const char *d;
    size_t n;
    if (pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 2 && pc_GrpcServerCall_Timeout(s) == 2.5) {
      pc_GrpcPair tr = {"x-t", 3, "yes", 3};
      pc_Error err;
      pc_Error_Init(&err);
      pc_GrpcServerCall_AddMetadata(s, 1, &tr, &err);
      pc_GrpcServerCall_Send(s, d, n);
      pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
      shuttle(c);
      ok = has(cst(id)->headers, ":status=200;") && has(cst(id)->headers, "trailer-x-t=yes;") &&
           cst(id)->data_len == 2;
    }
    pc_GrpcServerCall_Free(s);
  }
  pc_GrpcServerConn_Free(c);
  return ok;
}

/* gRPC-Web and Connect calls through the engine: framing, base64 split
 * across DATA frames, trailers in the body, Connect's errors, and bad
 * framing answered with a status, never a crash. */
static void web_calls(void) {
  const char *d;
  size_t n;
  unsigned char out[1024];
  /* An unknown method (pc_GrpcServerCall_NotFound): HTTP 404 over Connect
   * unary (with the error JSON), Connect streaming and gRPC-Web, as
   * connect-go answers; over gRPC 200 with grpc-status 12. */
  {
    static const char *const types[] = {"application/proto", "application/connect+proto",
                                        "application/grpc-web+proto", "application/grpc"};
    for (int i = 0; i < 4; i++) {
      client_new(65535);
      pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
      int32_t id = i == 0 ? request_body("/t.T/Nope", types[i], NULL, NULL, "", 0, 0, 1)
                          : request("/t.T/Nope", types[i], NULL, NULL, "", 0, 0, 1);
      shuttle(c);
      pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
      pc_GrpcServerCall_NotFound(s, "unknown method /t.T/Nope", 24);
      pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0); /* ignored: finished */
      shuttle(c);
      CHECK(cst(id)->closed);
      CHECK(has(cst(id)->headers, i == 3 ? ":status=200;" : ":status=404;"));
      if (i == 0)
        CHECK(cst(id)->data_len > 0 &&
              strstr((const char *)cst(id)->data, "\"code\":\"unimplemented\"") != NULL);
      if (i >= 2) CHECK(has(cst(id)->headers, "grpc-status=12;"));
      pc_GrpcServerCall_Free(s);
      pc_GrpcServerConn_Free(c);
    }
  }
  /* gRPC, gRPC-Web and Connect streaming by another method than POST are
   * queued (the driver knows whether the path names a method): a PUT's
   * 405 by NotAllowed, a HEAD's NotFound the head alone (a Connect
   * stream's 404 without its end-of-stream body), its status with it. */
  {
    static const char *const types[] = {"application/connect+proto", "application/grpc-web+proto",
                                        "application/grpc"};
    for (int i = 0; i < 3; i++) {
      client_new(65535);
      pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
      int32_t put = request_no_body("PUT", "/t.T/Echo", types[i]);
      int32_t head = request_no_body("HEAD", "/t.T/Nope", types[i]);
      shuttle(c);
      pc_GrpcServerCall *a = must(pc_GrpcServerConn_Accept(c), "call");
      pc_GrpcServerCall *b = must(pc_GrpcServerConn_Accept(c), "call");
      CHECK(strcmp(pc_GrpcServerCall_HttpMethod(a), "PUT") == 0);
      CHECK(strcmp(pc_GrpcServerCall_HttpMethod(b), "HEAD") == 0);
      pc_GrpcServerCall_NotAllowed(a, "POST");
      pc_GrpcServerCall_NotFound(b, "unknown method /t.T/Nope", 24);
      shuttle(c);
      CHECK(cst(put)->closed && has(cst(put)->headers, ":status=405;"));
      CHECK(has(cst(put)->headers, "allow=POST;"));
      CHECK(cst(head)->closed && cst(head)->data_len == 0);
      CHECK(has(cst(head)->headers, i == 2 ? ":status=200;" : ":status=404;"));
      if (i > 0) CHECK(has(cst(head)->headers, "grpc-status=12;"));
      pc_GrpcServerCall_Free(a);
      pc_GrpcServerCall_Free(b);
      pc_GrpcServerConn_Free(c);
    }
  }
  /* queue_unknown_types: a content type of no protocol is queued as a
   * plain HTTP call for the driver's 415 (a GET stays a Connect GET), and
   * so is Connect unary's by another method than POST or GET (its 405 by
   * NotAllowed). Refused, they hold nothing of their bodies: no message
   * (it was an empty one, a prefix allocated for a body discarded). */
  {
    client_new(65535);
    pc_GrpcServerOptions o;
    memset(&o, 0, sizeof o);
    o.queue_unknown_types = 1;
    pc_Error err;
    pc_Error_Init(&err);
    pc_GrpcServerConn *c = must(pc_GrpcServerConn_New(&o, NULL, NULL, &err), "server");
    request_body("/t.T/Echo", "text/plain", NULL, NULL, "x", 1, 1, 1);
    request_no_body("GET", "/t.T/Echo?encoding=json&message=%7B%7D", "text/plain");
    int32_t put = request_no_body("PUT", "/t.T/Echo", "application/proto");
    shuttle(c);
    pc_GrpcServerCall *a = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall *b = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall *p = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(pc_GrpcServerCall_Protocol(a) == kPc_WebProtocol_Http);
    CHECK(pc_GrpcServerCall_Protocol(b) == kPc_WebProtocol_ConnectUnary);
    CHECK(pc_GrpcServerCall_Protocol(p) == kPc_WebProtocol_Http);
    CHECK(pc_GrpcServerCall_Next(a, &d, &n) == -1);
    CHECK(pc_GrpcServerCall_Next(p, &d, &n) == -1);
    pc_GrpcServerCall_NotAllowed(p, "GET, POST");
    shuttle(c);
    CHECK(cst(put)->closed && has(cst(put)->headers, ":status=405;"));
    CHECK(has(cst(put)->headers, "allow=GET, POST;"));
    pc_GrpcServerCall_Free(a);
    pc_GrpcServerCall_Free(b);
    pc_GrpcServerCall_Free(p);
    pc_GrpcServerConn_Free(c);
  }
  /* A Connect GET is queued with its query unread (connect-go checks the
   * path, then the method, then the query): an unknown path's NotFound is
   * 404, a method's 405 comes before its incomplete query's 400 (both were
   * 400 about the query), a bad query is refused by ReadQuery, a good one
   * read by it (codec, message); a body that came with it is refused
   * there. A plain OPTIONS gets AnswerOptions' 204 with no length. */
  {
    client_new(65535);
    pc_GrpcServerOptions o;
    memset(&o, 0, sizeof o);
    o.queue_unknown_types = 1;
    pc_Error err;
    pc_Error_Init(&err);
    pc_GrpcServerConn *c = must(pc_GrpcServerConn_New(&o, NULL, NULL, &err), "server");
    int32_t nope = request_no_body("GET", "/t.T/Nope", "text/plain");
    int32_t side = request_no_body("HEAD", "/t.T/Echo?connect=v1", "text/plain");
    int32_t bad = request_no_body("GET", "/t.T/Echo?connect=v1&encoding=xml", "text/plain");
    int32_t good = request_no_body("GET", "/t.T/Echo?encoding=json&message=%7B%7D", "text/plain");
    int32_t opt = request_no_body("OPTIONS", "/t.T/Echo", "text/plain");
    shuttle(c);
    pc_GrpcServerCall *s[5];
    for (int i = 0; i < 5; i++) s[i] = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(strcmp(pc_GrpcServerCall_Path(s[0]), "/t.T/Nope") == 0);
    CHECK(strcmp(pc_GrpcServerCall_Path(s[1]), "/t.T/Echo") == 0);
    CHECK(pc_GrpcServerCall_Protocol(s[1]) == kPc_WebProtocol_ConnectUnary);
    pc_GrpcServerCall_NotFound(s[0], "unknown method /t.T/Nope", 24);
    pc_GrpcServerCall_NotAllowed(s[1], "POST");
    CHECK(pc_GrpcServerCall_ReadQuery(s[2]) == 0);
    CHECK(pc_GrpcServerCall_Codec(s[3]) == kPc_WebCodec_Proto);
    CHECK(pc_GrpcServerCall_Next(s[3], &d, &n) == -1); /* nothing before ReadQuery */
    CHECK(pc_GrpcServerCall_ReadQuery(s[3]) == 1);
    CHECK(pc_GrpcServerCall_Codec(s[3]) == kPc_WebCodec_Json);
    CHECK(pc_GrpcServerCall_Next(s[3], &d, &n) == 1 && n == 2 && memcmp(d, "{}", 2) == 0);
    CHECK(pc_GrpcServerCall_Next(s[3], &d, &n) == -1);
    CHECK(pc_GrpcServerCall_ReadQuery(s[3]) == 1); /* once: read already */
    pc_GrpcServerCall_Finish(s[3], kPc_Code_Ok, "", 0, NULL, 0);
    CHECK(pc_GrpcServerCall_Protocol(s[4]) == kPc_WebProtocol_Http);
    pc_GrpcServerCall_AnswerOptions(s[4], "OPTIONS, POST");
    shuttle(c);
    CHECK(cst(nope)->closed && has(cst(nope)->headers, ":status=404;"));
    CHECK(strstr((const char *)cst(nope)->data, "\"code\":\"unimplemented\"") != NULL);
    CHECK(cst(side)->closed && has(cst(side)->headers, ":status=405;"));
    CHECK(cst(bad)->closed && has(cst(bad)->headers, ":status=400;"));
    CHECK(strstr((const char *)cst(bad)->data, "query parameter 'encoding' must be") != NULL);
    CHECK(cst(good)->closed && has(cst(good)->headers, ":status=200;"));
    CHECK(cst(opt)->closed && has(cst(opt)->headers, ":status=204;"));
    CHECK(has(cst(opt)->headers, "allow=OPTIONS, POST;") &&
          !has(cst(opt)->headers, "content-length"));
    for (int i = 0; i < 5; i++) pc_GrpcServerCall_Free(s[i]);
    pc_GrpcServerConn_Free(c);
  }
  /* application/grpc+json takes the JSON codec and answers in kind (as
   * connect-go); another subtype is protobuf, as before. */
  {
    for (int i = 0; i < 2; i++) {
      client_new(65535);
      pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
      int32_t id = request("/t.T/Echo", i ? "application/grpc+thrift" : "application/grpc+json",
                           NULL, NULL, "{}", 2, 0, 1);
      shuttle(c);
      pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
      CHECK(pc_GrpcServerCall_Codec(s) == (i ? kPc_WebCodec_Proto : kPc_WebCodec_Json));
      CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 2);
      CHECK(pc_GrpcServerCall_Send(s, d, n));
      pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
      shuttle(c);
      CHECK(has(cst(id)->headers,
                i ? "content-type=application/grpc;" : "content-type=application/grpc+json;"));
      CHECK(has(cst(id)->trailers, "grpc-status=0;"));
      pc_GrpcServerCall_Free(s);
      pc_GrpcServerConn_Free(c);
    }
  }
  /* gRPC-Web-Text: "hello" framed, in base64 split inside a group and
   * across three DATA frames; the response in base64, its trailers the
   * last message. */
  {
    static const char body[] = "AAAAAAVoZWxsbw=="; /* 00 00000005 "hello" */
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t id =
        request_body("/t.T/Echo", "application/grpc-web-text", "x-grpc-web", "1", body, 16, 3, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 0);
    more_body(id, 9, 0);
    shuttle(c);
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 0);
    more_body(id, 16, 1);
    shuttle(c);
    CHECK(pc_GrpcServerCall_Protocol(s) == kPc_WebProtocol_GrpcWebText);
    CHECK(pc_GrpcServerCall_Codec(s) == kPc_WebCodec_Proto);
    for (size_t i = 0; i < pc_GrpcServerCall_MetadataCount(s); i++)
      CHECK(strcmp(pc_GrpcServerCall_Metadata(s, i)->key, "x-grpc-web") != 0);
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 5 && memcmp(d, "hello", 5) == 0);
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == -1);
    pc_GrpcPair tr = {"x-t", 3, "yes", 3};
    pc_Error err;
    pc_Error_Init(&err);
    CHECK(pc_GrpcServerCall_AddMetadata(s, 1, &tr, &err));
    CHECK(pc_GrpcServerCall_Send(s, "world", 5));
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    shuttle(c);
    CHECK(has(cst(id)->headers, "content-type=application/grpc-web-text+proto;"));
    CHECK(cst(id)->trailers[0] == '\0'); /* no HTTP trailers */
    size_t m = unbase64(cst(id), out);
    static const char want[] = "\0\0\0\0\5world\x80\0\0\0\x18grpc-status:0\r\nx-t:yes\r\n";
    CHECK(m == sizeof want - 1 && memcmp(out, want, m) == 0);
    CHECK(cst(id)->closed);
    pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);
  }
  /* gRPC-Web-Text in wrapped lines (coreutils base64, MIME): CR and LF
   * between the characters are skipped */
  {
    static const char body[] = "AAAAAAVo\nZWxs\r\nbw==\n"; /* 00 00000005 "hello" */
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t id = request_body("/t.T/Echo", "application/grpc-web-text", NULL, NULL, body,
                              sizeof body - 1, sizeof body - 1, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(!pc_GrpcServerCall_Cancelled(s));
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 5 && memcmp(d, "hello", 5) == 0);
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == -1);
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    shuttle(c);
    CHECK(cst(id)->closed);
    pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);
  }
  /* gRPC-Web-Text that is not base64, and one cut inside a group: the
   * call ends INTERNAL, trailers-only, with the offset */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t bad =
        request_body("/t.T/A", "application/grpc-web-text", NULL, NULL, "AAAA*AAA", 8, 8, 1);
    int32_t cut =
        request_body("/t.T/B", "application/grpc-web-text", NULL, NULL, "AAAAAAVoZ", 9, 9, 1);
    shuttle(c);
    CHECK(has(cst(bad)->headers, "grpc-status=13;"));
    CHECK(has(cst(bad)->headers, "grpc-message=grpc-web-text request body is not base64: byte "
                                 "0x2a at offset 4;"));
    CHECK(has(cst(cut)->headers, "grpc-status=13;"));
    CHECK(has(cst(cut)->headers, "(1 characters left over);"));
    CHECK(has(cst(cut)->headers, "content-type=application/grpc-web-text+proto;"));
    pc_GrpcServerCall *s;
    while ((s = pc_GrpcServerConn_Accept(c)) != NULL) {
      CHECK(pc_GrpcServerCall_Cancelled(s));
      CHECK(pc_GrpcServerCall_Next(s, &d, &n) == -1);
      pc_GrpcServerCall_Free(s);
    }
    pc_GrpcServerConn_Free(c);
  }
  /* gRPC-Web (binary, JSON): a message flagged 0x80 from the client is
   * refused; an error after a message goes in the trailers message */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t bad =
        request_body("/t.T/A", "application/grpc-web+proto", NULL, NULL, "\x80\0\0\0\0", 5, 5, 1);
    int32_t id =
        request_body("/t.T/B", "application/grpc-web+json", NULL, NULL, "\0\0\0\0\2{}", 7, 7, 1);
    shuttle(c);
    CHECK(has(cst(bad)->headers, "grpc-status=13;"));
    CHECK(has(cst(bad)->headers, "content-type=application/grpc-web+proto;"));
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    if (pc_GrpcServerCall_Cancelled(s)) { /* the refused one came first */
      pc_GrpcServerCall_Free(s);
      s = must(pc_GrpcServerConn_Accept(c), "call");
    }
    CHECK(pc_GrpcServerCall_Codec(s) == kPc_WebCodec_Json);
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 2 && memcmp(d, "{}", 2) == 0);
    CHECK(pc_GrpcServerCall_Send(s, "[]", 2));
    pc_GrpcServerCall_Finish(s, kPc_Code_NotFound, "gone", 4, NULL, 0);
    shuttle(c);
    CHECK(has(cst(id)->headers, "content-type=application/grpc-web+json;"));
    CHECK(!has(cst(id)->headers, "grpc-status"));
    static const char want[] = "\0\0\0\0\2[]\x80\0\0\0\x22grpc-status:5\r\ngrpc-message:gone\r\n";
    CHECK(cst(id)->data_len == sizeof want - 1 &&
          memcmp(cst(id)->data, want, sizeof want - 1) == 0);
    pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);
  }
  /* Connect unary: the body split across frames is one message; metadata
   * and trailer- headers; an error is its JSON with the HTTP status; a
   * malformed Connect-Timeout-Ms is invalid_argument; an unknown
   * content-encoding unimplemented; a body over the limit
   * resource_exhausted */
  {
    CHECK(connect_with(NULL));
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 8, 0, 0), "server");
    int32_t id = request_body("/t.T/A", "application/json", "connect-protocol-version", "1",
                              "{\"a\":1}", 7, 3, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 0); /* not before the whole body */
    more_body(id, 7, 1);
    shuttle(c);
    CHECK(pc_GrpcServerCall_Protocol(s) == kPc_WebProtocol_ConnectUnary);
    CHECK(pc_GrpcServerCall_Codec(s) == kPc_WebCodec_Json);
    CHECK(pc_GrpcServerCall_Timeout(s) < 0);
    for (size_t i = 0; i < pc_GrpcServerCall_MetadataCount(s); i++)
      CHECK(strncmp(pc_GrpcServerCall_Metadata(s, i)->key, "connect-", 8) != 0);
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 7 && memcmp(d, "{\"a\":1}", 7) == 0);
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == -1);
    pc_GrpcPair hd = {"x-h", 3, "1", 1}, tr = {"x-t-bin", 7, "\xff", 1};
    pc_Error err;
    pc_Error_Init(&err);
    CHECK(pc_GrpcServerCall_AddMetadata(s, 0, &hd, &err));
    CHECK(pc_GrpcServerCall_AddMetadata(s, 1, &tr, &err));
    CHECK(pc_GrpcServerCall_Send(s, "{}", 2));
    CHECK(!pc_GrpcServerCall_Send(s, "{}", 2)); /* one response: INTERNAL */
    shuttle(c);
    CHECK(has(cst(id)->headers, ":status=500;"));
    CHECK(has(cst(id)->headers, "content-type=application/json;"));
    CHECK(has(cst(id)->headers, "x-h=1;"));
    CHECK(has(cst(id)->headers, "trailer-x-t-bin=/w;"));
    static const char want[] =
        "{\"code\":\"internal\",\"message\":\"a unary call answers with one response message\"}";
    CHECK(cst(id)->data_len == sizeof want - 1 &&
          memcmp(cst(id)->data, want, sizeof want - 1) == 0);
    pc_GrpcServerCall_Free(s);

    int32_t t =
        request_body("/t.T/A", "application/proto", "connect-timeout-ms", "1.5", "", 0, 0, 1);
    int32_t e = request_body("/t.T/A", "application/proto", "content-encoding", "br", "x", 1, 1, 1);
    int32_t big = request_body("/t.T/A", "application/proto", NULL, NULL, "0123456789", 10, 10, 0);
    /* a protocol version other than 1: invalid_argument, as connect-go answers */
    int32_t v2 =
        request_body("/t.T/A", "application/json", "connect-protocol-version", "2", "{}", 2, 2, 1);
    shuttle(c);
    CHECK(has(cst(v2)->headers, ":status=400;"));
    static const char want_v2[] = "{\"code\":\"invalid_argument\",\"message\":"
                                  "\"connect-protocol-version must be \\\"1\\\": got \\\"2\\\"\"}";
    CHECK(cst(v2)->data_len == sizeof want_v2 - 1 &&
          memcmp(cst(v2)->data, want_v2, sizeof want_v2 - 1) == 0);
    CHECK(cst(big)->got_rst && cst(big)->rst == NGHTTP2_NO_ERROR); /* it would still send */
    CHECK(has(cst(t)->headers, ":status=400;"));
    CHECK(cst(t)->data_len > 0 && strstr((const char *)cst(t)->data, "\"invalid_argument\""));
    CHECK(has(cst(e)->headers, ":status=501;"));
    CHECK(has(cst(big)->headers, ":status=429;"));
    CHECK(strstr((const char *)cst(big)->data, "exceeds the limit of 8 bytes") != NULL);
    while ((s = pc_GrpcServerConn_Accept(c)) != NULL) pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);
  }
  /* Connect streaming: envelopes both ways, the end-of-stream message
   * with the error and the trailers; an error before any message still
   * goes in the body after 200 */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t id = request_body("/t.T/S", "application/connect+proto", "connect-timeout-ms", "100",
                              "\0\0\0\0\1a\0\0\0\0\1b", 12, 12, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(pc_GrpcServerCall_Timeout(s) == 0.1);
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 1 && d[0] == 'a');
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 1 && d[0] == 'b');
    CHECK(pc_GrpcServerCall_Send(s, "c", 1));
    pc_GrpcPair tr = {"x-t", 3, "v", 1};
    pc_Error err;
    pc_Error_Init(&err);
    CHECK(pc_GrpcServerCall_AddMetadata(s, 1, &tr, &err));
    pc_GrpcServerCall_Finish(s, kPc_Code_Aborted, "no", 2, NULL, 0);
    shuttle(c);
    CHECK(has(cst(id)->headers, ":status=200;"));
    CHECK(has(cst(id)->headers, "content-type=application/connect+proto;"));
    static const char want[] =
        "\0\0\0\0\1c\2\0\0\0\x44{\"error\":{\"code\":\"aborted\",\"message\":"
        "\"no\"},\"metadata\":{\"x-t\":[\"v\"]}}";
    CHECK(cst(id)->data_len == sizeof want - 1 &&
          memcmp(cst(id)->data, want, sizeof want - 1) == 0);
    pc_GrpcServerCall_Free(s);
    /* the deadline passes: deadline_exceeded in the end-of-stream message */
    id = request_body("/t.T/S", "application/connect+json", "connect-timeout-ms", "100", "", 0, 0,
                      0);
    shuttle(c);
    s = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerConn_Expire(c, now_s + 1);
    shuttle(c);
    CHECK(pc_GrpcServerCall_Cancelled(s));
    CHECK(has(cst(id)->headers, "content-type=application/connect+json;"));
    CHECK(cst(id)->data_len > 5 && cst(id)->data[0] == 2 &&
          strstr((const char *)cst(id)->data + 5, "\"deadline_exceeded\"") != NULL);
    pc_GrpcServerCall_Free(s);
    /* a body ending inside an envelope or its prefix: invalid_argument in
     * connect-go's words (over gRPC it is INTERNAL, see "Limits") */
    int32_t cut = request_body("/t.T/S", "application/connect+proto", NULL, NULL,
                               "\0\0\0\0\1a\0\0\0\0\5ab", 13, 13, 1);
    int32_t pre = request_body("/t.T/S", "application/connect+proto", NULL, NULL,
                               "\0\0\0\0\1a\0\0\0", 9, 9, 1);
    shuttle(c);
    static const char want_cut[] = "{\"error\":{\"code\":\"invalid_argument\",\"message\":"
                                   "\"protocol error: promised 5 bytes in enveloped message, got "
                                   "2 bytes\"}}";
    static const char want_pre[] = "{\"error\":{\"code\":\"invalid_argument\",\"message\":"
                                   "\"protocol error: incomplete envelope: unexpected EOF\"}}";
    CHECK(has(cst(cut)->headers, ":status=200;"));
    CHECK(cst(cut)->data_len == 5 + sizeof want_cut - 1 && cst(cut)->data[0] == 2 &&
          memcmp(cst(cut)->data + 5, want_cut, sizeof want_cut - 1) == 0);
    CHECK(cst(pre)->data_len == 5 + sizeof want_pre - 1 && cst(pre)->data[0] == 2 &&
          memcmp(cst(pre)->data + 5, want_pre, sizeof want_pre - 1) == 0);
    while ((s = pc_GrpcServerConn_Accept(c)) != NULL) pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);
  }
}

/* How many of the pages of 'c' that go back at rest (nghttp2's frame
 * buffer's, its stream map's) are resident (mincore). */
static size_t frames_resident(pc_GrpcServerConn *c) {
  return pc_GrpcSession_RestResident((const pc_GrpcSession *)c); /* its first member */
}

/* Once its calls are closed a connection gives the whole pages of
 * nghttp2's frame buffer back (madvise), and later frames are whole. */
static void frames_rest(void) {
  static char big[20000];
  client_new(65535);
  pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
  pc_GrpcSession *h2 = (pc_GrpcSession *)c;
  CHECK(h2->frames != NULL && h2->frames_size >= 16384);
  CHECK(h2->rest_delay == PC_GRPC_REST_DELAY);
  h2->rest_delay = 0; /* at once (else the second Output a second later) */
  for (int round = 0; round < 2; round++) {
    memset(big, 'a' + round, sizeof big);
    int32_t id = request("/t.T/Echo", "application/grpc", NULL, NULL, "hi", 2, 0, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    const char *d;
    size_t n;
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 2);
    CHECK(pc_GrpcServerCall_Send(s, big, sizeof big));
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    shuttle(c);
    CHECK(has(cst(id)->trailers, "grpc-status=0;"));
    CHECK(cst(id)->data_len == 5 + sizeof big && memcmp(cst(id)->data + 5, big, sizeof big) == 0);
    CHECK(pc_GrpcServerConn_Running(c) == 0);
    CHECK(!h2->frames_dirty);
    CHECK(frames_resident(c) == 0); /* a 16 KiB DATA frame went through them */
    pc_GrpcServerCall_Free(s);
  }
  /* Before the delay the pages stay: no system call per call. */
  h2->rest_delay = 1000;
  request("/t.T/Echo", "application/grpc", NULL, NULL, "hi", 2, 0, 1);
  shuttle(c);
  pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
  CHECK(pc_GrpcServerCall_Send(s, big, sizeof big));
  pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
  shuttle(c);
  CHECK(pc_GrpcServerConn_Running(c) == 0);
  CHECK(h2->frames_dirty && h2->rest_at > 0);
  pc_GrpcServerCall_Free(s);
  pc_GrpcServerConn_Free(c);
}

int main(void) {
  web_calls();
  frames_rest();

  /* A unary call: path, metadata, timeout, the message, headers, trailers. */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t id =
        request("/t.T/Echo", "application/grpc", "grpc-timeout", "1500m", "hello", 5, 0, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(pc_GrpcServerConn_Accept(c) == NULL);
    CHECK(strcmp(pc_GrpcServerCall_Path(s), "/t.T/Echo") == 0);
    CHECK(pc_GrpcServerCall_Timeout(s) == 1.5);
    CHECK(pc_GrpcServerCall_Deadline(s) == now_s + 1.5);
    int user = 0;
    for (size_t i = 0; i < pc_GrpcServerCall_MetadataCount(s); i++) {
      const pc_GrpcPair *p = pc_GrpcServerCall_Metadata(s, i);
      if (p->key_len == 6 && memcmp(p->key, "x-user", 6) == 0) user = 1;
      CHECK(!(p->key_len == 12 && memcmp(p->key, "grpc-timeout", 12) == 0));
    }
    CHECK(user);
    const char *d;
    size_t n;
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 5 && memcmp(d, "hello", 5) == 0);
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == -1);
    pc_Error err;
    pc_Error_Init(&err);
    pc_GrpcPair hd = {"x-h", 3, "1", 1}, bad = {"Bad", 3, "v", 1};
    CHECK(pc_GrpcServerCall_AddMetadata(s, 0, &hd, &err));
    CHECK(!pc_GrpcServerCall_AddMetadata(s, 0, &bad, &err));
    CHECK(pc_GrpcServerCall_Send(s, "world", 5));
    CHECK(!pc_GrpcServerCall_AddMetadata(s, 0, &hd, &err)); /* headers are out */
    pc_GrpcPair pb = {"grpc-retry-pushback-ms", 22, "5", 1};
    CHECK(!pc_GrpcServerCall_AddMetadata(s, 1, &pb, &err)); /* reserved: SetPushback sends it */
    CHECK(pc_GrpcServerCall_SetPushback(s, 1500));
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    CHECK(!pc_GrpcServerCall_SetPushback(s, 1)); /* the trailers are out */
    shuttle(c);
    CHECK(has(cst(id)->headers, ":status=200;"));
    CHECK(has(cst(id)->headers, "content-type=application/grpc;"));
    CHECK(has(cst(id)->headers, "x-h=1;"));
    CHECK(cst(id)->data_len == 10 && memcmp(cst(id)->data + 5, "world", 5) == 0);
    CHECK(has(cst(id)->trailers, "grpc-status=0;"));
    CHECK(has(cst(id)->trailers, "grpc-retry-pushback-ms=1500;"));
    CHECK(cst(id)->closed);
    CHECK(pc_GrpcServerCall_Done(s));
    CHECK(!pc_GrpcServerCall_Cancelled(s));
    pc_GrpcServerCall_Free(s);
    CHECK(pc_GrpcServerConn_Running(c) == 0);
    pc_GrpcServerConn_Free(c);
  }

  /* An error before any message: Trailers-Only, grpc-message
   * percent-encoded, details in base64; the client still sending is
   * stopped with RST_STREAM NO_ERROR. */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t id = request("/t.T/Fail", "application/grpc+proto", NULL, NULL, "x", 1, 0, 0);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall_Finish(s, kPc_Code_NotFound, "no such 100%\n", 13, "\x01\x02\x03", 3);
    shuttle(c);
    CHECK(has(cst(id)->headers, "grpc-status=5;"));
    CHECK(has(cst(id)->headers, "grpc-message=no such 100%25%0A;"));
    CHECK(has(cst(id)->headers, "grpc-status-details-bin=AQID;"));
    CHECK(cst(id)->trailers[0] == '\0');
    CHECK(cst(id)->got_rst && cst(id)->rst == NGHTTP2_NO_ERROR);
    pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);
  }

  /* A content-type that is not gRPC: HTTP 415, never accepted; an unknown
   * grpc-encoding: UNIMPLEMENTED, never accepted. */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t a = request("/t.T/Echo", "text/plain", NULL, NULL, "x", 1, 0, 1);
    int32_t b = request("/t.T/Echo", "application/grpcx", NULL, NULL, "x", 1, 0, 1);
    int32_t e = request("/t.T/Echo", "application/grpc", "grpc-encoding", "snappy", "x", 1, 1, 1);
    shuttle(c);
    CHECK(pc_GrpcServerConn_Accept(c) == NULL);
    CHECK(has(cst(a)->headers, ":status=415;"));
    CHECK(has(cst(b)->headers, ":status=415;"));
    CHECK(has(cst(b)->headers, "accept-post=application/grpc, "));
    CHECK(has(cst(e)->headers, "grpc-status=12;"));
    CHECK(cst(a)->closed && cst(b)->closed && cst(e)->closed);
    pc_GrpcServerConn_Free(c);
  }

  /* gzip: a compressed request message is given back decompressed; bad
   * gzip is INTERNAL; a compressed flag without grpc-encoding INTERNAL. */
  {
    unsigned char plain[300], z[512];
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
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    request("/t.T/Z", "application/grpc", "grpc-encoding", "gzip", z, zl, 1, 1);
    int32_t bad = request("/t.T/Z", "application/grpc", "grpc-encoding", "gzip", "nope", 4, 1, 1);
    int32_t flag = request("/t.T/Z", "application/grpc", NULL, NULL, z, zl, 1, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall *s2 = must(pc_GrpcServerConn_Accept(c), "call 2");
    const char *d;
    size_t n;
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 300 && memcmp(d, plain, 300) == 0);
    CHECK(pc_GrpcServerCall_Compressed(s));
    CHECK(pc_GrpcServerCall_Next(s2, &d, &n) == -1);
    CHECK(pc_GrpcServerCall_Cancelled(s2));
    shuttle(c);
    CHECK(has(cst(bad)->headers, "grpc-status=13;"));
    CHECK(has(cst(flag)->headers, "grpc-status=13;") ||
          has(cst(flag)->trailers, "grpc-status=13;"));
    pc_GrpcServerCall_Free(s);
    pc_GrpcServerCall_Free(s2);
    while ((s = pc_GrpcServerConn_Accept(c)) != NULL) pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);
  }

  /* A request the engine fails while decompressing it, its call freed at
   * once (as a driver does when Next ends it): the status still goes out
   * in the trailers, with no RST_STREAM CANCEL before them. With a limit of
   * 100 bytes a message inflating to 101 is RESOURCE_EXHAUSTED; one of 100
   * goes through, and after Release its buffer is gone. */
  {
    unsigned char plain[101], z[512];
    memset(plain, 'b', sizeof plain);
    size_t zl[2];
    for (int i = 0; i < 2; i++) {
      z_stream zs;
      memset(&zs, 0, sizeof zs);
      deflateInit2(&zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
      zs.next_in = plain;
      zs.avail_in = (uInt)(sizeof plain - (size_t)i);
      zs.next_out = z + (i ? 256 : 0);
      zs.avail_out = 256;
      deflate(&zs, Z_FINISH);
      zl[i] = zs.total_out;
      deflateEnd(&zs);
    }
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 100, 0, 0), "server");
    int32_t big = request("/t.T/Z", "application/grpc", "grpc-encoding", "gzip", z, zl[0], 1, 1);
    int32_t bad = request("/t.T/Z", "application/grpc", "grpc-encoding", "gzip", "nope", 4, 1, 1);
    int32_t fits =
        request("/t.T/Z", "application/grpc", "grpc-encoding", "gzip", z + 256, zl[1], 1, 1);
    shuttle(c);
    const char *d;
    size_t n;
    for (int i = 0; i < 2; i++) {
      pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "failed call");
      CHECK(pc_GrpcServerCall_Next(s, &d, &n) == -1);
      pc_GrpcServerCall_Free(s);
    }
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 100 && memcmp(d, plain, 100) == 0);
    pc_GrpcServerCall_Release(s);
    pc_GrpcServerCall_Release(s); /* twice is harmless */
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    pc_GrpcServerCall_Free(s);
    shuttle(c);
    CHECK(has(cst(big)->headers, "grpc-status=8;") || has(cst(big)->trailers, "grpc-status=8;"));
    CHECK(has(cst(big)->headers, "decompressed request message exceeds") ||
          has(cst(big)->trailers, "decompressed request message exceeds"));
    CHECK(has(cst(bad)->headers, "grpc-status=13;") || has(cst(bad)->trailers, "grpc-status=13;"));
    CHECK(has(cst(fits)->headers, "grpc-status=0;") || has(cst(fits)->trailers, "grpc-status=0;"));
    CHECK(!cst(big)->got_rst || cst(big)->rst != NGHTTP2_CANCEL);
    CHECK(!cst(bad)->got_rst || cst(bad)->rst != NGHTTP2_CANCEL);
    CHECK(cst(big)->closed && cst(bad)->closed && cst(fits)->closed);
    pc_GrpcServerConn_Free(c);
  }

  /* Compressed responses: gzip only for a client whose
   * grpc-accept-encoding lists it; the headers declare grpc-encoding gzip;
   * each message gzipped or not as asked; no gzip once the headers went
   * out without it. */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t gz = request("/t.T/Z", "application/grpc", "grpc-accept-encoding",
                         "identity, deflate,gzip", "x", 1, 0, 1);
    int32_t no =
        request("/t.T/Z", "application/grpc", "grpc-accept-encoding", "gzipx", "x", 1, 0, 1);
    int32_t late =
        request("/t.T/Z", "application/grpc", "grpc-accept-encoding", "gzip", "x", 1, 0, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall *s2 = must(pc_GrpcServerConn_Accept(c), "call 2");
    pc_GrpcServerCall *s3 = must(pc_GrpcServerConn_Accept(c), "call 3");
    const char *d;
    size_t n;
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && !pc_GrpcServerCall_Compressed(s));
    static char plain[3000];
    memset(plain, 'a', sizeof plain);
    CHECK(pc_GrpcServerCall_SetCompression(s, 1));
    CHECK(pc_GrpcServerCall_Send(s, plain, sizeof plain));
    CHECK(pc_GrpcServerCall_SetCompression(s, 0));
    CHECK(pc_GrpcServerCall_Send(s, "b", 1));
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    CHECK(!pc_GrpcServerCall_SetCompression(s2, 1));
    CHECK(pc_GrpcServerCall_Send(s2, "b", 1));
    pc_GrpcServerCall_Finish(s2, kPc_Code_Ok, "", 0, NULL, 0);
    CHECK(pc_GrpcServerCall_Send(s3, "b", 1));
    CHECK(!pc_GrpcServerCall_SetCompression(s3, 1)); /* the headers are out without it */
    CHECK(pc_GrpcServerCall_Send(s3, "b", 1));
    pc_GrpcServerCall_Finish(s3, kPc_Code_Ok, "", 0, NULL, 0);
    shuttle(c);
    CStream *t = cst(gz);
    CHECK(has(t->headers, "grpc-encoding=gzip;"));
    CHECK(t->data_len > 12 && t->data[0] == 1);
    size_t zl =
        (size_t)t->data[1] << 24 | (size_t)t->data[2] << 16 | (size_t)t->data[3] << 8 | t->data[4];
    CHECK(zl < sizeof plain && t->data_len == 5 + zl + 6);
    unsigned char back[4000] = {0};
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    inflateInit2(&zs, 31);
    zs.next_in = t->data + 5;
    zs.avail_in = (uInt)zl;
    zs.next_out = back;
    zs.avail_out = sizeof back;
    CHECK(inflate(&zs, Z_FINISH) == Z_STREAM_END);
    CHECK(zs.total_out == sizeof plain && memcmp(back, plain, sizeof plain) == 0);
    inflateEnd(&zs);
    CHECK(t->data[5 + zl] == 0 && t->data[5 + zl + 5] == 'b');
    CHECK(!has(cst(no)->headers, "grpc-encoding"));
    CHECK(cst(no)->data_len == 6 && cst(no)->data[0] == 0);
    CHECK(cst(late)->data_len == 12 && cst(late)->data[0] == 0 && cst(late)->data[6] == 0);
    CHECK(has(cst(late)->trailers, "grpc-status=0;"));
    pc_GrpcServerCall_Free(s);
    pc_GrpcServerCall_Free(s2);
    pc_GrpcServerCall_Free(s3);
    pc_GrpcServerConn_Free(c);
  }

  /* A grpc-timeout outside the grammar of PROTOCOL-HTTP2.md (1 to 8
   * digits, then one of H M S m u n) is refused INTERNAL before the driver
   * sees the call, not ignored (a call with no deadline); the largest
   * valid one is taken. */
  {
    static const char *bad[] = {"1x", "123456789S", "S", "-1S", "1.5S", "", "1s", "+1S"};
    size_t nbad = sizeof bad / sizeof bad[0];
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t ids[8];
    for (size_t i = 0; i < nbad; i++)
      ids[i] = request("/t.T/T", "application/grpc", "grpc-timeout", bad[i], "x", 1, 0, 1);
    shuttle(c);
    CHECK(pc_GrpcServerConn_Accept(c) == NULL);
    for (size_t i = 0; i < nbad; i++) {
      CHECK(has(cst(ids[i])->headers, "grpc-status=13;"));
      CHECK(has(cst(ids[i])->headers, "grpc-message=grpc-timeout"));
      CHECK(cst(ids[i])->closed);
    }
    int32_t ok = request("/t.T/T", "application/grpc", "grpc-timeout", "99999999H", "x", 1, 0, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(pc_GrpcServerCall_Timeout(s) == 99999999.0 * 3600);
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    shuttle(c);
    CHECK(has(cst(ok)->headers, "grpc-status=0;"));
    pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);
  }

  /* Limits: a prefix over max_receive is RESOURCE_EXHAUSTED before the
   * body; END_STREAM inside a message is INTERNAL; a client reset cancels
   * the call; a deadline passing ends the call DEADLINE_EXCEEDED. */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 100, 0, 0), "server");
    static char big[200];
    int32_t a = request("/t.T/Big", "application/grpc", NULL, NULL, big, sizeof big, 0, 1);
    int32_t b = request("/t.T/Cut", "application/grpc", NULL, NULL, "abc", 3, 0, 1);
    cst(b)->body_len = 6; /* the prefix says 3 bytes, 1 arrives */
    int32_t r = request("/t.T/Rst", "application/grpc", NULL, NULL, "x", 1, 0, 0);
    int32_t t = request("/t.T/Late", "application/grpc", "grpc-timeout", "2S", "x", 1, 0, 1);
    shuttle(c);
    /* The first two ended before the driver took them: it never sees them. */
    CHECK(has(cst(a)->headers, "grpc-status=8;"));
    CHECK(has(cst(b)->headers, "grpc-status=13;"));
    pc_GrpcServerCall *s[4] = {NULL, NULL, NULL, NULL};
    for (int i = 2; i < 4; i++) s[i] = must(pc_GrpcServerConn_Accept(c), "call");
    CHECK(pc_GrpcServerConn_Accept(c) == NULL);
    CHECK(!pc_GrpcServerCall_Cancelled(s[2]));
    nghttp2_submit_rst_stream(cli.s, NGHTTP2_FLAG_NONE, r, NGHTTP2_CANCEL);
    shuttle(c);
    CHECK(pc_GrpcServerCall_Cancelled(s[2]));
    CHECK(!pc_GrpcServerCall_Send(s[2], "x", 1));
    CHECK(pc_GrpcServerConn_Expire(c, now_s + 1) == now_s + 2);
    CHECK(!pc_GrpcServerCall_Cancelled(s[3]));
    CHECK(pc_GrpcServerConn_Expire(c, now_s + 3) == -1);
    CHECK(pc_GrpcServerCall_Cancelled(s[3]));
    pc_GrpcServerCall_Free(s[3]); /* at once: DEADLINE_EXCEEDED still goes out */
    shuttle(c);
    CHECK(has(cst(t)->headers, "grpc-status=4;"));
    CHECK(!cst(t)->got_rst || cst(t)->rst != NGHTTP2_CANCEL);
    pc_GrpcServerCall_Free(s[2]);
    pc_GrpcServerConn_Free(c);
  }

  /* Header blocks larger than will go out (nghttp2 sends none over 64 KiB;
   * the client's SETTINGS_MAX_HEADER_LIST_SIZE) still end the stream: as
   * grpc-core does, RESOURCE_EXHAUSTED with a short message in place of
   * the status, trailers or headers that do not fit. A status message of
   * 70,000 bytes: Trailers-Only, and trailers after a message; trailer
   * metadata of 70,000 bytes; response headers of 70,000 bytes (Send
   * fails); a message of 2,000 bytes to a client that takes 1,024. */
  {
    static char huge[70000];
    memset(huge, 'e', sizeof huge);
    pc_GrpcPair big_md = {"x-big", 5, huge, sizeof huge};
    pc_Error err;
    pc_Error_Init(&err);
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t ids[4];
    for (int i = 0; i < 4; i++)
      ids[i] = request("/t.T/Big", "application/grpc", NULL, NULL, "x", 1, 0, 1);
    shuttle(c);
    pc_GrpcServerCall *s[4];
    for (int i = 0; i < 4; i++) s[i] = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall_Finish(s[0], kPc_Code_InvalidArgument, huge, sizeof huge, NULL, 0);
    CHECK(pc_GrpcServerCall_Send(s[1], "r", 1));
    pc_GrpcServerCall_Finish(s[1], kPc_Code_InvalidArgument, huge, sizeof huge, NULL, 0);
    CHECK(pc_GrpcServerCall_AddMetadata(s[2], 1, &big_md, &err));
    CHECK(pc_GrpcServerCall_Send(s[2], "r", 1));
    pc_GrpcServerCall_Finish(s[2], kPc_Code_Ok, "", 0, NULL, 0);
    CHECK(pc_GrpcServerCall_AddMetadata(s[3], 0, &big_md, &err));
    CHECK(!pc_GrpcServerCall_Send(s[3], "r", 1));
    CHECK(pc_GrpcServerCall_Cancelled(s[3]));
    shuttle(c);
    for (int i = 0; i < 4; i++) {
      CStream *t = cst(ids[i]);
      const char *block = i == 0 || i == 3 ? t->headers : t->trailers;
      CHECK(t->closed);
      CHECK(has(block, "grpc-status=8;"));
      CHECK(has(block, i == 3 ? "grpc-message=response headers of "
                              : "grpc-message=response trailers of "));
      CHECK(has(block, " bytes exceed the limit of 65536 bytes;"));
      CHECK(!has(block, "x-big"));
      pc_GrpcServerCall_Free(s[i]);
    }
    CHECK(cst(ids[1])->data_len == 6 && cst(ids[2])->data_len == 6);
    CHECK(pc_GrpcServerConn_Running(c) == 0);
    pc_GrpcServerConn_Free(c);

    client_new(65535);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 1024}};
    nghttp2_submit_settings(cli.s, NGHTTP2_FLAG_NONE, iv, 1);
    c = must(server(NULL, 0, 0, 0), "server");
    int32_t id = request("/t.T/Big", "application/grpc", NULL, NULL, "x", 1, 0, 1);
    shuttle(c);
    pc_GrpcServerCall *one = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall_Finish(one, kPc_Code_InvalidArgument, huge, 2000, NULL, 0);
    shuttle(c);
    CHECK(cst(id)->closed);
    CHECK(has(cst(id)->headers, "grpc-status=8;"));
    CHECK(has(cst(id)->headers, " bytes exceed the limit of 1024 bytes;"));
    pc_GrpcServerCall_Free(one);
    pc_GrpcServerConn_Free(c);
  }

  /* Requests still arriving: the window of a message above its stream
   * window is given back only while the connection's incomplete_budget
   * holds its whole length, so 8 streams that each send all but the last
   * byte of a message of 100,000 bytes get in at most the budget and a
   * stream window each (the rest wait on their stream windows), not 8 x
   * 100,000 bytes. A stream whose message then stalls for
   * stall_timeout ends RESOURCE_EXHAUSTED and hands its share of the
   * budget to one that waits; a stream that waits for the budget does not
   * time out. A message larger than the stream window still arrives
   * whole. */
  {
    enum { LEN = 100000, N = 8 };
    static unsigned char big[5 + LEN];
    fill_message(big, LEN);
    pc_GrpcServerOptions o;
    memset(&o, 0, sizeof o);
    o.max_receive = LEN;
    o.stream_window = 65535;
    o.connection_window = 8 * 65535;
    o.incomplete_budget = 2 * (5 + LEN) + 10;
    o.stall_timeout = 5;
    pc_Error err;
    pc_Error_Init(&err);
    client_new(65535);
    pc_GrpcServerConn *c = must(pc_GrpcServerConn_New(&o, NULL, NULL, &err), "server");
    int32_t ids[N];
    for (int i = 0; i < N; i++) {
      ids[i] = request("/t.T/Up", "application/grpc", NULL, NULL, "x", 1, 0, 0);
      cst(ids[i])->body = big;
      cst(ids[i])->body_len = sizeof big - 1; /* all but the last byte */
    }
    shuttle(c);
    size_t sent = 0, whole = 0;
    for (int i = 0; i < N; i++) {
      sent += cst(ids[i])->body_pos;
      whole += cst(ids[i])->body_pos == sizeof big - 1;
    }
    CHECK(whole == 2);
    CHECK(sent <= o.incomplete_budget + N * o.stream_window);
    for (int i = 0; i < N; i++) /* a waiting one holds its stream window at most */
      CHECK(cst(ids[i])->body_pos == sizeof big - 1 || cst(ids[i])->body_pos <= o.stream_window);
    pc_GrpcServerCall *s;
    while ((s = pc_GrpcServerConn_Accept(c)) != NULL) pc_GrpcServerCall_Free(s);
    shuttle(c);
    for (int i = 0; i < N; i++) CHECK(cst(ids[i])->got_rst && cst(ids[i])->rst == NGHTTP2_CANCEL);
    pc_GrpcServerConn_Free(c);

    client_new(65535);
    c = must(pc_GrpcServerConn_New(&o, NULL, NULL, &err), "server");
    for (int i = 0; i < N; i++) {
      ids[i] = request("/t.T/Up", "application/grpc", NULL, NULL, "x", 1, 0, 0);
      cst(ids[i])->body = big;
      cst(ids[i])->body_len = sizeof big - 1;
    }
    shuttle(c);
    CHECK(pc_GrpcServerConn_Expire(c, now_s + 4) == now_s + 5);
    shuttle(c);
    CHECK(pc_GrpcServerConn_Expire(c, now_s + 6) == now_s + 6 + 5); /* the next two */
    shuttle(c);
    size_t ended = 0;
    whole = 0;
    for (int i = 0; i < N; i++) {
      CStream *t = cst(ids[i]);
      if (has(t->headers, "grpc-status=8;")) {
        ended++;
        CHECK(has(t->headers, "grpc-message=request message stalled: 100004 of 100005 bytes"));
      }
      whole += t->body_pos == sizeof big - 1;
    }
    CHECK(ended == 2);
    CHECK(whole == 4);
    size_t waiting = 0; /* the two that ended were never taken: gone with their streams */
    while ((s = pc_GrpcServerConn_Accept(c)) != NULL) {
      const char *d;
      size_t n;
      waiting += pc_GrpcServerCall_Next(s, &d, &n) == 0;
      pc_GrpcServerCall_Free(s);
    }
    CHECK(waiting == N - 2);
    pc_GrpcServerConn_Free(c);

    client_new(65535);
    c = must(pc_GrpcServerConn_New(&o, NULL, NULL, &err), "server");
    int32_t id = request("/t.T/Up", "application/grpc", NULL, NULL, "x", 1, 0, 1);
    cst(id)->body = big;
    cst(id)->body_len = sizeof big;
    shuttle(c);
    s = must(pc_GrpcServerConn_Accept(c), "call");
    const char *d;
    size_t n;
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == LEN && d[0] == 'p' && d[LEN - 1] == 'p');
    CHECK(pc_GrpcServerCall_Next(s, &d, &n) == -1);
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    shuttle(c);
    CHECK(has(cst(id)->headers, "grpc-status=0;"));
    pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);
  }

  /* The same bound for bodies decoded on arrival: Connect unary bodies
   * (one message, reserving max_receive and its prefix while it arrives)
   * and gRPC-Web-Text bodies (reserving the length of the decoded prefix)
   * of 8 streams, each all but its last bytes, get in at most the budget
   * (4/3 of it in base64) and a stream window each; two are whole. */
  {
    enum { LEN = 100000, N = 8 };
    static unsigned char big[5 + LEN];
    static char text[(5 + LEN + 2) / 3 * 4];
    fill_message(big, LEN);
    size_t text_len = pc_Web_Base64Encode(big, sizeof big, text);
    pc_GrpcServerOptions o;
    memset(&o, 0, sizeof o);
    o.max_receive = LEN;
    o.stream_window = 65535;
    o.connection_window = 8 * 65535;
    o.incomplete_budget = 2 * (5 + LEN) + 10;
    pc_Error err;
    pc_Error_Init(&err);
    for (int text_body = 0; text_body < 2; text_body++) {
      client_new(65535);
      pc_GrpcServerConn *c = must(pc_GrpcServerConn_New(&o, NULL, NULL, &err), "server");
      int32_t ids[N];
      size_t len = text_body ? text_len - 4 : LEN - 1;
      for (int i = 0; i < N; i++) {
        ids[i] =
            request_body("/t.T/Up", text_body ? "application/grpc-web-text" : "application/proto",
                         NULL, NULL, "x", 1, 1, 0);
        cst(ids[i])->body = text_body ? (unsigned char *)text : big + 5;
        cst(ids[i])->body_len = len;
      }
      shuttle(c);
      size_t sent = 0, whole = 0;
      for (int i = 0; i < N; i++) {
        sent += cst(ids[i])->body_pos;
        whole += cst(ids[i])->body_pos == len;
        CHECK(cst(ids[i])->body_pos == len || cst(ids[i])->body_pos <= o.stream_window);
      }
      CHECK(whole == 2);
      CHECK(sent <= o.incomplete_budget * (text_body ? 4 : 3) / 3 + N * o.stream_window);
      pc_GrpcServerCall *s;
      while ((s = pc_GrpcServerConn_Accept(c)) != NULL) pc_GrpcServerCall_Free(s);
      shuttle(c);
      pc_GrpcServerConn_Free(c);
    }
  }

  /* Flow control: a client that gives nothing back holds the responses
   * queued in the call (Unsent), not sent beyond its window. */
  {
    client_new(65535);
    cli.no_window = 1;
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t id = request("/t.T/Stream", "application/grpc", NULL, NULL, "x", 1, 0, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    static char chunk[16384];
    for (int i = 0; i < 10; i++) {
      CHECK(pc_GrpcServerCall_Send(s, chunk, sizeof chunk));
      shuttle(c);
    }
    CHECK(cst(id)->data_len == 65535);
    CHECK(pc_GrpcServerCall_Unsent(s) == 10 * (sizeof chunk + 5) - 65535);
    pc_GrpcServerCall_Free(s); /* RST_STREAM CANCEL */
    shuttle(c);
    CHECK(cst(id)->got_rst && cst(id)->rst == NGHTTP2_CANCEL);
    pc_GrpcServerConn_Free(c);
  }

  /* Wake tokens (wake.h): a call with one is listed in the options' wake
   * list, once until the list is cleared, when a whole message arrives
   * (not a part of one), when the request ends, when its responses go
   * out, when the client resets it, when its deadline passes and when the
   * connection goes; a call without a token never is. */
  {
    client_new(65535);
    pc_GrpcWakeList w;
    pc_GrpcWakeList_Init(&w, NULL, NULL);
    pc_GrpcServerOptions o;
    memset(&o, 0, sizeof o);
    o.wake = &w;
    pc_Error err;
    pc_Error_Init(&err);
    pc_GrpcServerConn *c = must(pc_GrpcServerConn_New(&o, NULL, NULL, &err), "server");
    int32_t a = request("/t.T/A", "application/grpc", NULL, NULL, "abc", 3, 0, 0);
    int32_t b = request("/t.T/B", "application/grpc", "grpc-timeout", "2S", NULL, 0, 0, 0);
    int32_t m = request("/t.T/M", "application/grpc", NULL, NULL, "x", 1, 0, 0);
    cst(a)->body_len = 4; /* the prefix and 'a' of "abc" */
    cst(b)->body_len = 0; /* the headers alone */
    shuttle(c);
    pc_GrpcServerCall *sa = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall *sb = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall *sm = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall_SetWakeToken(sa, 1);
    pc_GrpcServerCall_SetWakeToken(sb, 2);
    const char *d;
    size_t n;
    const uint64_t *items;
    CHECK(pc_GrpcServerCall_Next(sa, &d, &n) == 0);
    CHECK(pc_GrpcWakeList_Items(&w, &items) == 0);
    cst(a)->body_len = 8; /* the rest of the message */
    nghttp2_session_resume_data(cli.s, a);
    shuttle(c);
    CHECK(pc_GrpcWakeList_Items(&w, &items) == 1 && items[0] == 1);
    pc_GrpcWakeList_Clear(&w);
    CHECK(pc_GrpcServerCall_Next(sa, &d, &n) == 1 && n == 3);
    cst(a)->end = 1; /* the end of the request */
    nghttp2_session_resume_data(cli.s, a);
    shuttle(c);
    CHECK(pc_GrpcWakeList_Items(&w, &items) == 1 && items[0] == 1);
    pc_GrpcWakeList_Clear(&w);
    CHECK(pc_GrpcServerCall_Next(sa, &d, &n) == -1);
    CHECK(pc_GrpcServerCall_Send(sa, "r", 1));
    CHECK(pc_GrpcServerCall_Send(sm, "r", 1));
    shuttle(c); /* out: a sender waiting for room may go on */
    CHECK(pc_GrpcWakeList_Items(&w, &items) == 1 && items[0] == 1);
    pc_GrpcWakeList_Clear(&w);
    CHECK(pc_GrpcServerConn_Expire(c, now_s + 3) == -1);
    CHECK(pc_GrpcWakeList_Items(&w, &items) == 1 && items[0] == 2);
    shuttle(c); /* its status out, the stream closes: listed once still */
    CHECK(pc_GrpcWakeList_Items(&w, &items) == 1 && items[0] == 2);
    pc_GrpcWakeList_Clear(&w);
    nghttp2_submit_rst_stream(cli.s, NGHTTP2_FLAG_NONE, a, NGHTTP2_CANCEL);
    nghttp2_submit_rst_stream(cli.s, NGHTTP2_FLAG_NONE, m, NGHTTP2_CANCEL);
    shuttle(c);
    CHECK(pc_GrpcServerCall_Cancelled(sa) && pc_GrpcServerCall_Cancelled(sm));
    CHECK(pc_GrpcWakeList_Items(&w, &items) == 1 && items[0] == 1);
    pc_GrpcWakeList_Clear(&w);
    pc_GrpcServerCall_Free(sa);
    request("/t.T/C", "application/grpc", NULL, NULL, "x", 1, 0, 0);
    shuttle(c);
    pc_GrpcServerCall *sc = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerCall_SetWakeToken(sc, 3);
    pc_GrpcServerCall_Free(sb);
    pc_GrpcWakeList_Clear(&w);
    pc_GrpcServerConn_Free(c); /* the connection goes */
    CHECK(pc_GrpcWakeList_Items(&w, &items) == 1 && items[0] == 3);
    CHECK(pc_GrpcServerCall_Next(sc, &d, &n) == -1);
    pc_GrpcServerCall_Free(sc);
    pc_GrpcServerCall_Free(sm);
    pc_GrpcWakeList_Free(&w);
  }

  /* Floods: RST_STREAM after HEADERS and PING, past their buckets, end the
   * connection with GOAWAY ENHANCE_YOUR_CALM. */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 5, 0), "server");
    for (int i = 0; i < 10; i++) {
      int32_t id = request("/t.T/R", "application/grpc", NULL, NULL, "x", 1, 0, 0);
      shuttle(c); /* the HEADERS go out before the reset */
      nghttp2_submit_rst_stream(cli.s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    }
    shuttle(c);
    CHECK(cli.goaway && cli.goaway_code == NGHTTP2_ENHANCE_YOUR_CALM);
    CHECK(!pc_GrpcServerConn_Alive(c));
    CHECK(strstr(pc_GrpcServerConn_Why(c), "reset") != NULL);
    pc_GrpcServerCall *s;
    while ((s = pc_GrpcServerConn_Accept(c)) != NULL) pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);

    client_new(65535);
    c = must(server(NULL, 0, 0, 5), "server");
    for (int i = 0; i < 10; i++) nghttp2_submit_ping(cli.s, NGHTTP2_FLAG_NONE, NULL);
    shuttle(c);
    CHECK(cli.goaway && cli.goaway_code == NGHTTP2_ENHANCE_YOUR_CALM);
    CHECK(!pc_GrpcServerConn_Alive(c));
    pc_GrpcServerConn_Free(c);
  }

  /* Garbage instead of the preface: the connection ends. */
  {
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    CHECK(!pc_GrpcServerConn_Recv(c, "GET / HTTP/1.1\r\n\r\n", 18, now_s));
    const char *q;
    size_t m;
    while ((m = pc_GrpcServerConn_Output(c, &q)) > 0) pc_GrpcServerConn_Wrote(c, m);
    CHECK(!pc_GrpcServerConn_Alive(c));
    CHECK(pc_GrpcServerConn_Why(c)[0] != '\0');
    pc_GrpcServerConn_Free(c);
  }

  /* Graceful shutdown: GOAWAY with the last stream id; the call in flight
   * finishes, then the connection ends; a call taken and not freed when
   * the engine goes is cancelled and stays valid. */
  {
    client_new(65535);
    pc_GrpcServerConn *c = must(server(NULL, 0, 0, 0), "server");
    int32_t id = request("/t.T/A", "application/grpc", NULL, NULL, "x", 1, 0, 1);
    shuttle(c);
    pc_GrpcServerCall *s = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerConn_Shutdown(c);
    shuttle(c);
    CHECK(cli.goaway && cli.goaway_code == NGHTTP2_NO_ERROR && cli.goaway_last == id);
    CHECK(pc_GrpcServerConn_Alive(c));
    CHECK(pc_GrpcServerCall_Send(s, "y", 1));
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    shuttle(c);
    CHECK(has(cst(id)->trailers, "grpc-status=0;"));
    CHECK(!pc_GrpcServerConn_Alive(c));
    pc_GrpcServerCall_Free(s);
    pc_GrpcServerConn_Free(c);

    client_new(65535);
    c = must(server(NULL, 0, 0, 0), "server");
    request("/t.T/A", "application/grpc", NULL, NULL, "x", 1, 0, 0);
    shuttle(c);
    s = must(pc_GrpcServerConn_Accept(c), "call");
    pc_GrpcServerConn_Free(c);
    CHECK(pc_GrpcServerCall_Cancelled(s));
    CHECK(!pc_GrpcServerCall_Send(s, "y", 1));
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    pc_GrpcServerCall_Free(s);
  }

  /* Every allocation failing in turn: nothing leaks, nothing crashes. */
  {
    CHECK(unary_with(NULL));
    long n;
    for (n = 1; n < 100000; n++) {
      fail_reset(n);
      unary_with(fail_alloc);
      CHECK(fail_live == 0);
      if (!fail_hit) break;
    }
    CHECK(!fail_hit);
    fail_reset(0);
    CHECK(unary_with(fail_alloc));
    CHECK(fail_live == 0);
    for (n = 1; n < 100000; n++) {
      fail_reset(n);
      connect_with(fail_alloc);
      CHECK(fail_live == 0);
      if (!fail_hit) break;
    }
    CHECK(!fail_hit);
    fail_reset(0);
  }

  nghttp2_session_del(cli.s);
  return CHECK_DONE();
}
