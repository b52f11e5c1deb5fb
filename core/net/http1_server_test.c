/* The HTTP/1.1 server engine driven with byte buffers (no sockets): bytes
 * of requests in, calls taken and answered as a driver does, bytes of
 * responses out. Covers Connect unary (Content-Length), a request split at
 * every byte, pipelined requests one at a time, a chunked request body,
 * gRPC-Web streaming (chunked, the trailers message in the body), Expect:
 * 100-continue, Connection: close and HTTP/1.0, plain gRPC refused (505),
 * CONNECT (405, its target a path or host:port), smuggling cases refused (400) and the connection
 * closed, the head timeout (408), a pipelining flood, a request answered before its body ended
 * (closed after a bounded rest of it), a driver's 204 (no body, no length), and every allocation
 * failing. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "net/http1_server.h"

#include <stdio.h>
#include <string.h>

static char out[1 << 16];
static size_t out_len;

/* Takes all the output into 'out' (appended). */
static void drain(pc_Http1ServerConn *c) {
  const char *p;
  size_t n;
  while ((n = pc_Http1ServerConn_Output(c, &p)) > 0) {
    size_t k = n < sizeof out - out_len ? n : sizeof out - out_len;
    memcpy(out + out_len, p, k);
    out_len += k;
    pc_Http1ServerConn_Wrote(c, n);
  }
}

static int has(const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= out_len; i++)
    if (memcmp(out + i, needle, k) == 0) return 1;
  return 0;
}

static pc_Http1ServerConn *conn(pc_Alloc *alloc) {
  pc_Http1ServerOptions o;
  memset(&o, 0, sizeof o);
  o.engine.max_receive = 1024;
  o.head_timeout = 10;
  o.max_pending = 4096;
  pc_Error err;
  pc_Error_Init(&err);
  out_len = 0;
  return pc_Http1ServerConn_New(&o, alloc, NULL, &err);
}

static const char kUnary[] =
    "POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    "Content-Length: 5\r\nX-User: ann\r\n\r\nhello";

/* Answers the next call: its message must be 'want'; sends "world". 0
 * when there is no call or it is not as expected. */
static int answer(pc_Http1ServerConn *c, const char *want) {
  pc_GrpcServerCall *s = pc_Http1ServerConn_Accept(c);
  if (s == NULL) return 0;
  const char *d;
  size_t n;
  int ok = pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == strlen(want) && memcmp(d, want, n) == 0 &&
           pc_GrpcServerCall_Next(s, &d, &n) == -1;
  ok = ok && pc_GrpcServerCall_Send(s, "world", 5);
  pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
  pc_GrpcServerCall_Free(s);
  return ok;
}

static const char kAnswer[] = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n";

static void unary_whole(void) {
  pc_Http1ServerConn *c = conn(NULL);
  CHECK(pc_Http1ServerConn_Recv(c, kUnary, sizeof kUnary - 1, 100));
  pc_GrpcServerCall *s = pc_Http1ServerConn_Accept(c);
  CHECK(s != NULL);
  if (s == NULL) return;
  CHECK(strcmp(pc_GrpcServerCall_Path(s), "/t.T/Echo") == 0);
  CHECK(pc_GrpcServerCall_Protocol(s) == kPc_WebProtocol_ConnectUnary);
  CHECK(pc_GrpcServerCall_Codec(s) == kPc_WebCodec_Json);
  CHECK(pc_GrpcServerCall_HttpVersion(s) == 1);
  int user = 0;
  for (size_t i = 0; i < pc_GrpcServerCall_MetadataCount(s); i++) {
    const pc_GrpcPair *p = pc_GrpcServerCall_Metadata(s, i);
    if (p->key_len == 6 && memcmp(p->key, "x-user", 6) == 0 && p->value_len == 3) user = 1;
    CHECK(!(p->key_len == 4 && memcmp(p->key, "host", 4) == 0));
  }
  CHECK(user);
  const char *d;
  size_t n;
  CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 5 && memcmp(d, "hello", 5) == 0);
  CHECK(pc_GrpcServerCall_Send(s, "world", 5));
  drain(c);
  CHECK(out_len == 0); /* a Connect unary response waits for its status */
  pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
  pc_GrpcServerCall_Free(s);
  drain(c);
  CHECK(out_len > sizeof kAnswer && memcmp(out, kAnswer, sizeof kAnswer - 1) == 0);
  CHECK(has("Content-Length: 5\r\n\r\nworld"));
  CHECK(!has("Connection: close"));
  CHECK(pc_Http1ServerConn_Alive(c)); /* keep-alive */
  CHECK(pc_Http1ServerConn_Running(c) == 0);
  pc_Http1ServerConn_Free(c);
}

/* The request split at every byte (and byte by byte) gets the same
 * answer. */
static void unary_split(void) {
  char first[sizeof out];
  size_t first_len = 0;
  for (size_t at = 0; at <= sizeof kUnary - 1; at++) {
    pc_Http1ServerConn *c = conn(NULL);
    CHECK(pc_Http1ServerConn_Recv(c, kUnary, at, 100));
    CHECK(pc_Http1ServerConn_Recv(c, kUnary + at, sizeof kUnary - 1 - at, 100));
    CHECK(answer(c, "hello"));
    drain(c);
    if (at == 0) {
      memcpy(first, out, out_len);
      first_len = out_len;
    }
    CHECK(out_len == first_len && memcmp(out, first, out_len) == 0);
    pc_Http1ServerConn_Free(c);
  }
  pc_Http1ServerConn *c = conn(NULL);
  for (size_t i = 0; i < sizeof kUnary - 1; i++)
    CHECK(pc_Http1ServerConn_Recv(c, kUnary + i, 1, 100));
  CHECK(answer(c, "hello"));
  drain(c);
  CHECK(out_len == first_len && memcmp(out, first, out_len) == 0);
  pc_Http1ServerConn_Free(c);
}

/* Three requests in one read: one call at a time, answers in order. */
static void pipelined(void) {
  pc_Http1ServerConn *c = conn(NULL);
  char three[3 * sizeof kUnary];
  for (int i = 0; i < 3; i++) memcpy(three + i * (sizeof kUnary - 1), kUnary, sizeof kUnary - 1);
  CHECK(pc_Http1ServerConn_Recv(c, three, 3 * (sizeof kUnary - 1), 100));
  for (int i = 0; i < 3; i++) {
    pc_GrpcServerCall *s = pc_Http1ServerConn_Accept(c);
    CHECK(s != NULL);
    CHECK(pc_Http1ServerConn_Accept(c) == NULL); /* the next waits for this answer */
    if (s == NULL) break;
    pc_GrpcServerCall_Send(s, "w", 1);
    pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
    pc_GrpcServerCall_Free(s);
  }
  drain(c);
  int count = 0;
  for (size_t i = 0; i + 8 <= out_len; i++) count += memcmp(out + i, "HTTP/1.1", 8) == 0;
  CHECK(count == 3);
  CHECK(pc_Http1ServerConn_Alive(c));
  pc_Http1ServerConn_Free(c);
}

static void chunked_body_and_close(void) {
  static const char req[] =
      "POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "2\r\nhe\r\n3;ext=1\r\nllo\r\n0\r\nX-T: 1\r\n\r\n";
  pc_Http1ServerConn *c = conn(NULL);
  CHECK(pc_Http1ServerConn_Recv(c, req, sizeof req - 1, 100));
  CHECK(answer(c, "hello"));
  drain(c);
  CHECK(memcmp(out, kAnswer, sizeof kAnswer - 1) == 0);
  CHECK(has("Connection: close\r\n"));
  CHECK(!pc_Http1ServerConn_Alive(c)); /* closed once the answer is out */
  pc_Http1ServerConn_Free(c);
}

static void http10_and_expect(void) {
  static const char req10[] = "POST /t.T/Echo HTTP/1.0\r\nContent-Type: application/json\r\n"
                              "Content-Length: 5\r\n\r\nhello";
  pc_Http1ServerConn *c = conn(NULL);
  CHECK(pc_Http1ServerConn_Recv(c, req10, sizeof req10 - 1, 100));
  CHECK(answer(c, "hello"));
  drain(c);
  CHECK(memcmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
  CHECK(has("Connection: close\r\n"));
  CHECK(!pc_Http1ServerConn_Alive(c));
  pc_Http1ServerConn_Free(c);

  static const char head[] =
      "POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n";
  c = conn(NULL);
  CHECK(pc_Http1ServerConn_Recv(c, head, sizeof head - 1, 100));
  drain(c);
  CHECK(out_len == 25 && memcmp(out, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0);
  CHECK(pc_Http1ServerConn_Recv(c, "hello", 5, 100));
  CHECK(answer(c, "hello"));
  drain(c);
  CHECK(has("\r\n\r\nHTTP/1.1 200 OK\r\n"));
  pc_Http1ServerConn_Free(c);
}

/* gRPC-Web: the response chunked, the trailers message last in it. */
static void grpc_web_stream(void) {
  static const char req[] = "POST /t.T/Walk HTTP/1.1\r\nHost: x\r\n"
                            "Content-Type: application/grpc-web+proto\r\n"
                            "Content-Length: 7\r\n\r\n\0\0\0\0\2hi";
  pc_Http1ServerConn *c = conn(NULL);
  CHECK(pc_Http1ServerConn_Recv(c, req, sizeof req - 1, 100));
  pc_GrpcServerCall *s = pc_Http1ServerConn_Accept(c);
  CHECK(s != NULL);
  if (s == NULL) return;
  CHECK(pc_GrpcServerCall_Protocol(s) == kPc_WebProtocol_GrpcWeb);
  const char *d;
  size_t n;
  CHECK(pc_GrpcServerCall_Next(s, &d, &n) == 1 && n == 2 && memcmp(d, "hi", 2) == 0);
  CHECK(pc_GrpcServerCall_Send(s, "a", 1));
  drain(c);
  CHECK(has("Transfer-Encoding: chunked\r\n"));
  CHECK(has("\r\n6\r\n\0\0\0\0\1a\r\n"));
  pc_GrpcPair t = {"x-t", 3, "1", 1};
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_GrpcServerCall_AddMetadata(s, 1, &t, &err));
  pc_GrpcServerCall_Finish(s, kPc_Code_NotFound, "gone", 4, NULL, 0);
  pc_GrpcServerCall_Free(s);
  drain(c);
  CHECK(has("\x80\0\0\0\x26grpc-status:5\r\ngrpc-message:gone\r\nx-t:1\r\n\r\n0\r\n\r\n"));
  CHECK(pc_Http1ServerConn_Alive(c));
  pc_Http1ServerConn_Free(c);
}

/* Requests answered by the engine itself, then the connection closed. */
static void refused(const char *req, const char *status) {
  pc_Http1ServerConn *c = conn(NULL);
  pc_Http1ServerConn_Recv(c, req, strlen(req), 100);
  CHECK(pc_Http1ServerConn_Accept(c) == NULL);
  drain(c);
  CHECK(out_len > strlen(status) && memcmp(out, status, strlen(status)) == 0);
  CHECK(has("Connection: close\r\n"));
  CHECK(!pc_Http1ServerConn_Alive(c));
  CHECK(pc_Http1ServerConn_Recv(c, "GET / HTTP/1.1\r\n\r\n", 18, 100) == 1); /* dropped */
  pc_Http1ServerConn_Free(c);
}

static void refusals(void) {
  refused("POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/grpc\r\n"
          "Content-Length: 5\r\n\r\n\0\0\0\0\0",
          "HTTP/1.1 505 ");
  refused("POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
          "HTTP/1.1 400 ");
  refused("POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
          "HTTP/1.1 400 ");
  refused("POST /t.T/Echo HTTP/1.1\nHost: x\r\n\r\n", "HTTP/1.1 400 ");
  refused("POST /t.T/Echo HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", "HTTP/1.1 400 ");
  refused("POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 501 ");
  refused("POST /t.T/Echo HTTP/2.2\r\nHost: x\r\n\r\n", "HTTP/1.1 505 ");
  refused("POST http://x/t.T/Echo HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 ");
  refused("CONNECT /t.T/Echo HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 405 ");
  /* the authority-form a CONNECT sends (RFC 9112 3.2.3) is refused the same */
  refused("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", "HTTP/1.1 405 ");
  refused("CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n", "HTTP/1.1 405 ");
  refused("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 ");
  refused("POST example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 ");
  refused("CONNECTCONNECTCONNECTCONNECTCONNECT / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 501 ");
  refused("POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n",
          "HTTP/1.1 413 ");
  /* A chunked body broken after the call began: reset, 400, closed. */
  refused("POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          "Transfer-Encoding: chunked\r\n\r\n2\r\nhe\r\nzz\r\n",
          "HTTP/1.1 400 ");
}

static void head_timeout_and_flood(void) {
  pc_Http1ServerConn *c = conn(NULL);
  CHECK(pc_Http1ServerConn_Expire(c, 100) < 0); /* nothing waits */
  CHECK(pc_Http1ServerConn_Recv(c, "POST /t.T/Echo HTTP/1.1\r\nHo", 27, 100));
  CHECK(pc_Http1ServerConn_Expire(c, 105) == 110);
  CHECK(pc_Http1ServerConn_Recv(c, "st: x\r\n", 7, 106)); /* still not whole */
  pc_Http1ServerConn_Expire(c, 110);
  drain(c);
  CHECK(memcmp(out, "HTTP/1.1 408 ", 13) == 0);
  CHECK(!pc_Http1ServerConn_Alive(c));
  pc_Http1ServerConn_Free(c);

  /* Requests pile up past max_pending while one is served: dropped. */
  c = conn(NULL);
  CHECK(pc_Http1ServerConn_Recv(c, kUnary, sizeof kUnary - 1, 100));
  pc_GrpcServerCall *s = pc_Http1ServerConn_Accept(c);
  CHECK(s != NULL);
  int ok = 1;
  for (int i = 0; i < 100 && ok; i++)
    ok = pc_Http1ServerConn_Recv(c, kUnary, sizeof kUnary - 1, 100);
  CHECK(!ok);
  CHECK(!pc_Http1ServerConn_Alive(c));
  CHECK(strstr(pc_Http1ServerConn_Why(c), "input over 4096 bytes") != NULL);
  CHECK(pc_GrpcServerCall_Cancelled(s));
  pc_GrpcServerCall_Free(s);
  pc_Http1ServerConn_Free(c);
}

/* A request answered before its body ended (here an error while a chunked
 * body still comes): "Connection: close" on the answer, then at most
 * 256 KiB more of the body (an endless one) or 2 s, and the connection
 * closes; it read such a body to its end before. */
static void answered_early(void) {
  static const char head[] =
      "POST /t.T/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  static char chunk[1024 + 9];
  memcpy(chunk, "400\r\n", 5);
  memset(chunk + 5, 'z', 1024);
  memcpy(chunk + 5 + 1024, "\r\n", 2);
  size_t chunk_len = 5 + 1024 + 2;
  for (int timed = 0; timed < 2; timed++) {
    pc_Http1ServerConn *c = conn(NULL);
    CHECK(pc_Http1ServerConn_Recv(c, head, sizeof head - 1, 100));
    CHECK(pc_Http1ServerConn_Recv(c, chunk, chunk_len, 100));
    pc_GrpcServerCall *s = pc_Http1ServerConn_Accept(c);
    CHECK(s != NULL);
    if (s == NULL) return;
    pc_GrpcServerCall_Finish(s, kPc_Code_InvalidArgument, "no", 2, NULL, 0);
    pc_GrpcServerCall_Free(s);
    drain(c);
    CHECK(memcmp(out, "HTTP/1.1 400 ", 13) == 0);
    CHECK(has("Connection: close\r\n"));
    CHECK(pc_Http1ServerConn_Alive(c)); /* the body's rest is read, for a while */
    if (timed) {
      CHECK(pc_Http1ServerConn_Expire(c, 101) == 102);
      CHECK(pc_Http1ServerConn_Recv(c, chunk, chunk_len, 101.5));
      CHECK(pc_Http1ServerConn_Alive(c));
      pc_Http1ServerConn_Expire(c, 102);
    } else {
      size_t fed = 0;
      while (fed < ((size_t)1 << 20) && pc_Http1ServerConn_Alive(c)) {
        CHECK(pc_Http1ServerConn_Recv(c, chunk, chunk_len, 100));
        fed += 1024;
      }
      CHECK(fed > ((size_t)255 << 10) && fed <= ((size_t)257 << 10));
    }
    drain(c);
    CHECK(!pc_Http1ServerConn_Alive(c));
    pc_Http1ServerConn_Free(c);
  }
}

/* A plain HTTP call answered 204 by its driver (pc_GrpcServerCall_Respond,
 * then Finish: a REST route's plain OPTIONS) goes out as a head with no
 * length and no body, the connection kept; it went as a last chunk alone,
 * "0\r\n\r\n" without its head. */
static void respond_204(void) {
  static const char req[] = "OPTIONS /v1/x HTTP/1.1\r\nHost: x\r\n\r\n";
  pc_Http1ServerOptions o;
  memset(&o, 0, sizeof o);
  o.engine.plain_http = 1;
  o.head_timeout = 10;
  o.max_pending = 4096;
  pc_Error err;
  pc_Error_Init(&err);
  out_len = 0;
  pc_Http1ServerConn *c = pc_Http1ServerConn_New(&o, NULL, NULL, &err);
  CHECK(c != NULL);
  if (c == NULL) return;
  CHECK(pc_Http1ServerConn_Recv(c, req, sizeof req - 1, 100));
  pc_GrpcServerCall *s = pc_Http1ServerConn_Accept(c);
  CHECK(s != NULL);
  if (s == NULL) return;
  CHECK(pc_GrpcServerCall_Protocol(s) == kPc_WebProtocol_Http);
  pc_GrpcPair allow = {"allow", 5, "GET, OPTIONS", 12};
  CHECK(pc_GrpcServerCall_Respond(s, 204, &allow, 1, &err));
  pc_GrpcServerCall_Finish(s, kPc_Code_Ok, "", 0, NULL, 0);
  pc_GrpcServerCall_Free(s);
  drain(c);
  static const char want[] = "HTTP/1.1 204 No Content\r\nallow: GET, OPTIONS\r\n\r\n";
  CHECK(out_len == sizeof want - 1 && memcmp(out, want, out_len) == 0);
  CHECK(pc_Http1ServerConn_Alive(c));
  pc_Http1ServerConn_Free(c);
}

/* Every allocation failing in turn: nothing leaks, nothing crashes. */
static void failing(void) {
  for (long at = 1;; at++) {
    fail_reset(at);
    pc_Http1ServerConn *c = conn(fail_alloc);
    if (c) {
      pc_Http1ServerConn_Recv(c, kUnary, sizeof kUnary - 1, 100);
      answer(c, "hello");
      drain(c);
      pc_Http1ServerConn_Recv(c, kUnary, sizeof kUnary - 1, 100);
      pc_GrpcServerCall *s = pc_Http1ServerConn_Accept(c);
      pc_Http1ServerConn_Free(c);
      pc_GrpcServerCall_Free(s);
    }
    if (fail_live != 0) printf("leak at %ld: %lld\n", at, fail_live);
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
}

int main(void) {
  CHECK(pc_Http1_SniffPreface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24) == 2);
  CHECK(pc_Http1_SniffPreface("PRI * HTTP/2", 12) == 0);
  CHECK(pc_Http1_SniffPreface("POST / HTTP/1.1\r\n", 17) == 1);
  CHECK(pc_Http1_SniffPreface("PRI * HTTP/1.1\r\n", 16) == 1);
  unary_whole();
  unary_split();
  pipelined();
  chunked_body_and_close();
  http10_and_expect();
  grpc_web_stream();
  refusals();
  head_timeout_and_flood();
  answered_early();
  respond_204();
  failing();
  return CHECK_DONE();
}
