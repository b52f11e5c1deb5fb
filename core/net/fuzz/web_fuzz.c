/* libFuzzer target for the server engine's gRPC-Web and Connect paths:
 * hostile request bodies in every protocol, through an nghttp2 client
 * session in memory (random HTTP/2 bytes would seldom name a web
 * content-type; server_fuzz.c has those).
 *
 * Input: byte 0 picks the content-type, byte 1 the extra header
 * (Connect-Timeout-Ms, an encoding, none); the rest are DATA frames, each
 * a length byte and that many bytes, the last ending the stream. Between
 * frames the calls are taken and read; the first answers with a message,
 * trailers and OK, the next with an error with details, at the end the
 * engine's deadlines pass. Then the same body goes to the pure functions
 * of web.h: base64 decoded whole and in the frames' pieces must agree,
 * and Connect's error JSON is written with the body as a google.rpc.Status
 * and read back by the client's reader, which also reads the body itself as
 * an error JSON, an end-of-stream message and gRPC-Web trailer lines.
 * Anything else than a clean run aborts, which is what libFuzzer reports. */
#include "net/server.h"
#include "net/web.h"
#include "net/web_http.h"

#include <nghttp2/nghttp2.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const TYPES[] = {"application/grpc-web",      "application/grpc-web+json",
                                    "application/grpc-web-text", "application/grpc-web-text+json",
                                    "application/proto",         "application/json",
                                    "application/connect+proto", "application/connect+json"};
static const char *const EXTRA[][2] = {{"connect-timeout-ms", "5"},
                                       {"connect-timeout-ms", "x1"},
                                       {"content-encoding", "gzip"},
                                       {"connect-content-encoding", "gzip"},
                                       {"grpc-encoding", "gzip"},
                                       {"grpc-timeout", "2S"},
                                       {"x-a", "1"},
                                       {"accept-encoding", "gzip"}};

typedef struct {
  const uint8_t *p;
  size_t n;
  int last;
} Piece;

static ssize_t c_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                      uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)session;
  (void)id;
  (void)ud;
  Piece *pc = src->ptr;
  size_t n = pc->n < length ? pc->n : length;
  if (n > 0) memcpy(buf, pc->p, n);
  pc->p += n;
  pc->n -= n;
  if (pc->n == 0) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!pc->last) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
  }
  return (ssize_t)n;
}

static int c_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                  void *ud) {
  (void)flags;
  (void)d;
  (void)ud;
  nghttp2_session_consume(session, id, n);
  return 0;
}

static void shuttle(nghttp2_session *cli, pc_GrpcServerConn *c, double now) {
  for (int round = 0; round < 64; round++) {
    int moved = 0;
    const uint8_t *p;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(cli, &p)) > 0) {
      moved = 1;
      pc_GrpcServerConn_Recv(c, p, (size_t)n, now);
    }
    const char *q;
    size_t m;
    while ((m = pc_GrpcServerConn_Output(c, &q)) > 0) {
      moved = 1;
      nghttp2_session_mem_recv(cli, (const uint8_t *)q, m);
      pc_GrpcServerConn_Wrote(c, m);
    }
    if (!moved) break;
  }
}

#define MAX_CALLS 4

static void serve(pc_GrpcServerConn *c, pc_GrpcServerCall **calls, size_t *ncalls,
                  size_t *answered) {
  pc_GrpcServerCall *s;
  while ((s = pc_GrpcServerConn_Accept(c)) != NULL) {
    if (*ncalls < MAX_CALLS)
      calls[(*ncalls)++] = s;
    else
      pc_GrpcServerCall_Free(s);
  }
  for (size_t i = 0; i < *ncalls; i++) {
    const char *d;
    size_t len;
    int r;
    while ((r = pc_GrpcServerCall_Next(calls[i], &d, &len)) == 1)
      if (len > 0 && d == NULL) abort();
    if (r != -1 || i < *answered) continue;
    pc_Error err;
    pc_Error_Init(&err);
    pc_GrpcPair p = {"x-k-bin", 7, "\x00\xff", 2};
    pc_GrpcServerCall_AddMetadata(calls[i], 1, &p, &err);
    if (i % 2 == 0) {
      pc_GrpcServerCall_SetCompression(calls[i], 1);
      pc_GrpcServerCall_Send(calls[i], "reply", 5);
      pc_GrpcServerCall_Finish(calls[i], kPc_Code_Ok, "", 0, NULL, 0);
    } else {
      pc_GrpcServerCall_Finish(calls[i], kPc_Code_Internal, "n\xc3\xa9 \"100%\"", 11,
                               "\x1a\x05\x0a\x01x\x12\x00", 7);
    }
    *answered = i + 1;
  }
}

/* The pure functions on the same bytes. */
/* A metadata pair the client's readers found: its bytes are there. */
static int any_pair(void *ud, const char *k, size_t kn, const char *v, size_t vn) {
  (void)ud;
  if ((kn > 0 && k == NULL) || (vn > 0 && v == NULL)) abort();
  return 1;
}

/* web_http.h: the body as a Connect GET query (a message it gives fits
 * the limit) and as an Origin. */
static void pure_http(const uint8_t *data, size_t size) {
  pc_Arena *arena = pc_Arena_New(NULL, NULL);
  if (arena == NULL) abort();
  pc_ConnectGet g;
  pc_Error err;
  pc_Error_Init(&err);
  int big = 0;
  if (pc_Connect_ParseGet(arena, (const char *)data, size, 512, &g, &big, &err) &&
      (g.message_len > 512 || big))
    abort();
  pc_Arena_Free(arena);
  static const pc_WebCors cors = {.origins = "http://a.example\nhttps://b.example:8443\n"};
  const char *o = pc_WebCors_AllowOrigin(&cors, (const char *)data, size);
  if (o != NULL && o != (const char *)data) abort();
}

static void pure(const uint8_t *data, size_t size) {
  pure_http(data, size);
  unsigned char *whole = malloc(size / 4 * 3 + 4), *split = malloc(size / 4 * 3 + 4);
  if (whole == NULL || split == NULL) abort();
  pc_WebBase64 a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  size_t at = 0, n = pc_WebBase64_Decode(&a, (const char *)data, size, whole, &at), m = 0;
  size_t off = 0, at2 = 0;
  int bad = 0;
  for (size_t i = 0; i < size && !bad;) {
    size_t k = 1 + data[i] % 7;
    if (k > size - i) k = size - i;
    size_t got = pc_WebBase64_Decode(&b, (const char *)data + i, k, split + m, &at2);
    if (got == (size_t)-1) {
      bad = 1;
      at2 += off;
    } else {
      m += got;
    }
    i += k;
    off = i;
  }
  if ((n == (size_t)-1) != bad) abort();
  if (bad && at != at2) abort();
  if (!bad && (n != m || memcmp(whole, split, n) != 0 ||
               pc_WebBase64_Pending(&a) != pc_WebBase64_Pending(&b)))
    abort();
  free(whole);
  free(split);
  pc_GrpcBuf out = {0};
  pc_GrpcStatus st;
  memset(&st, 0, sizeof st);
  st.code = (pc_Code)(size % 17);
  st.message = (const char *)data;
  st.message_len = size;
  st.details = (const char *)data;
  st.details_len = size;
  if (!pc_Connect_ErrorJson(pc_DefaultAlloc, NULL, &out, &st)) abort();
  /* the client's readers: what the writer wrote reads back, any bytes
   * are read or refused */
  pc_Arena *arena = pc_Arena_New(NULL, NULL);
  if (arena == NULL) abort();
  pc_ConnectError ce;
  memset(&ce, 0, sizeof ce);
  pc_Error perr;
  pc_Error_Init(&perr);
  if (!pc_Connect_ParseError(arena, out.p, out.len, &ce, &perr)) abort();
  if (st.code != kPc_Code_Ok && ce.code != st.code) abort();
  pc_Connect_ParseError(arena, (const char *)data, size, &ce, &perr);
  pc_Connect_ParseEndStream(arena, (const char *)data, size, &ce, any_pair, NULL, &perr);
  pc_Web_ParseGrpcWebTrailers(arena, (const char *)data, size, any_pair, NULL, &perr);
  pc_Arena_Free(arena);
  out.len = 0;
  pc_GrpcPair md = {"k", 1, (const char *)data, size};
  if (!pc_Connect_EndStream(pc_DefaultAlloc, NULL, &out, &st, &md, 1)) abort();
  if (!pc_Web_GrpcWebTrailers(pc_DefaultAlloc, NULL, &out, &st, &md, 1)) abort();
  pc_GrpcBuf_Free(pc_DefaultAlloc, NULL, &out);
  pc_WebCodec codec;
  pc_Web_Classify((size & 1) ? "GET" : "POST", (const char *)data, size, &codec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  pure(data + 2, size - 2);
  static const pc_WebCors cors = {.origins = "*\n", .headers = "x-a", .expose = "x-b"};
  pc_GrpcServerOptions o;
  memset(&o, 0, sizeof o);
  o.max_receive = 4096;
  o.cors = &cors;
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcServerConn *c = pc_GrpcServerConn_New(&o, NULL, NULL, &err);
  if (c == NULL) abort();
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, c_data);
  nghttp2_option *opt;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_session *cli;
  nghttp2_session_client_new2(&cli, cb, NULL, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  nghttp2_submit_settings(cli, NGHTTP2_FLAG_NONE, NULL, 0);
  const char *ct = TYPES[data[0] % 8];
  const char *const *extra = EXTRA[data[1] % 8];
  nghttp2_nv h[6] = {
      {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
      {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
      {(uint8_t *)":path", (uint8_t *)"/t.T/M", 5, 6, 0},
      {(uint8_t *)":authority", (uint8_t *)"t", 10, 1, 0},
      {(uint8_t *)"content-type", (uint8_t *)ct, 12, strlen(ct), 0},
      {(uint8_t *)extra[0], (uint8_t *)extra[1], strlen(extra[0]), strlen(extra[1]), 0}};
  int32_t id = nghttp2_submit_headers(cli, NGHTTP2_FLAG_NONE, -1, NULL, h, 6, NULL);
  pc_GrpcServerCall *calls[MAX_CALLS];
  size_t ncalls = 0, answered = 0;
  double now = 0;
  shuttle(cli, c, now);
  size_t pos = 2;
  Piece piece;
  while (id > 0 && pos < size) {
    size_t n = data[pos++];
    if (n > size - pos) n = size - pos;
    piece.p = data + pos;
    piece.n = n;
    pos += n;
    piece.last = pos >= size;
    nghttp2_data_provider prd;
    prd.source.ptr = &piece;
    prd.read_callback = c_read;
    if (nghttp2_submit_data(cli, piece.last ? NGHTTP2_FLAG_END_STREAM : NGHTTP2_FLAG_NONE, id,
                            &prd) != 0)
      break;
    shuttle(cli, c, now);
    serve(c, calls, &ncalls, &answered);
    shuttle(cli, c, now);
  }
  now += 10;
  pc_GrpcServerConn_Expire(c, now);
  serve(c, calls, &ncalls, &answered);
  shuttle(cli, c, now);
  nghttp2_session_del(cli);
  pc_GrpcServerConn_Free(c);
  for (size_t i = 0; i < ncalls; i++) pc_GrpcServerCall_Free(calls[i]);
  return 0;
}
