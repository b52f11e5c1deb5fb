/* The client engine over HTTP/1.1 (engine.h's 'http1', http1_client.h)
 * driven with byte buffers (no sockets): calls opened as a channel does,
 * the HTTP/1.1 requests read from the output, responses fed in. Covers
 * Connect unary whole and split at every byte, keep-alive (one stream at a
 * time, the next on the same connection), Connection: close, gRPC-Web
 * chunked with its trailers message, trailers-only, a body until close
 * ended by the connection's loss, a malformed response failing the call
 * with the parser's reason, a cancelled call closing the connection, a
 * client stream (chunked: its head at once, a chunk a message, the last
 * chunk at close_send; a server answering early), and every allocation
 * failing. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "net/engine.h"
#include "net/web.h"

#include <stdio.h>
#include <string.h>

static char out[1 << 16];
static size_t out_len;

/* Takes all the output into 'out' (replaced). */
static void drain(pc_GrpcEngine *e) {
  const char *p;
  size_t n;
  out_len = 0;
  while ((n = pc_GrpcEngine_Output(e, &p)) > 0) {
    size_t k = n < sizeof out - out_len ? n : sizeof out - out_len;
    memcpy(out + out_len, p, k);
    out_len += k;
    pc_GrpcEngine_Wrote(e, n);
  }
}

static int has(const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= out_len; i++)
    if (memcmp(out + i, needle, k) == 0) return 1;
  return 0;
}

static pc_GrpcEngine *engine(pc_Alloc *alloc) {
  pc_GrpcEngineOptions o;
  memset(&o, 0, sizeof o);
  o.authority = "example.test:80";
  o.max_receive = 1024;
  o.http1 = 1;
  pc_Error err;
  pc_Error_Init(&err);
  return pc_GrpcEngine_New(&o, alloc, NULL, &err);
}

/* A call of 'protocol' sending "request"; NULL when it cannot open. */
static pc_GrpcStream *call(pc_GrpcEngine *e, int protocol) {
  pc_GrpcCallSettings set = {2.5, NULL, 0, 0, 0, protocol, 0, 0, NULL};
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcStream *s = pc_GrpcEngine_Open(e, "/f.F/A", &set, NULL, &err);
  if (s == NULL) return NULL;
  pc_GrpcStream_Send(s, "request", 7);
  pc_GrpcStream_CloseSend(s);
  drain(e);
  return s;
}

/* The next message of 's' as a string ("" when none). */
static const char *next(pc_GrpcStream *s) {
  static char buf[256];
  const char *d;
  size_t n;
  if (pc_GrpcStream_Next(s, &d, &n) != 1 || n >= sizeof buf) return "";
  memcpy(buf, d, n);
  buf[n] = 0;
  return buf;
}

/* Whether the trailers of 's' hold 'key' = 'value'. */
static int trailer(const pc_GrpcStream *s, const char *key, const char *value) {
  for (size_t i = 0; i < pc_GrpcStream_MetadataCount(s, 1); i++) {
    const pc_GrpcPair *p = pc_GrpcStream_Metadata(s, 1, i);
    if (strcmp(p->key, key) == 0 && strcmp(p->value, value) == 0) return 1;
  }
  return 0;
}

static const char kUnary[] = "HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\n"
                             "Trailer-X-T: t1\r\nContent-Length: 2\r\n\r\nhi";

static void unary_and_keepalive(void) {
  pc_GrpcEngine *e = engine(NULL);
  CHECK(e != NULL);
  if (e == NULL) return;
  pc_GrpcStream *s = call(e, kPc_WebProtocol_ConnectUnary);
  CHECK(s != NULL);
  CHECK(has("POST /f.F/A HTTP/1.1\r\nHost: example.test:80\r\n"));
  CHECK(has("content-type: application/proto\r\n"));
  CHECK(has("connect-timeout-ms: 2500\r\n"));
  CHECK(has("Content-Length: 7\r\n\r\nrequest"));
  CHECK(!has("te: trailers"));
  CHECK(!pc_GrpcEngine_CanOpen(e)); /* one exchange at a time */
  CHECK(pc_GrpcEngine_Recv(e, kUnary, sizeof kUnary - 1));
  drain(e);
  CHECK(strcmp(next(s), "hi") == 0);
  CHECK(pc_GrpcStream_Status(s) != NULL && pc_GrpcStream_Status(s)->code == kPc_Code_Ok);
  CHECK(trailer(s, "x-t", "t1"));
  pc_GrpcStream_Free(s);
  CHECK(pc_GrpcEngine_CanOpen(e)); /* kept alive */
  /* The next one, its response a byte at a time. */
  s = call(e, kPc_WebProtocol_ConnectUnary);
  CHECK(s != NULL && has("POST /f.F/A HTTP/1.1\r\n"));
  for (size_t i = 0; i < sizeof kUnary - 1; i++) {
    CHECK(pc_GrpcEngine_Recv(e, kUnary + i, 1));
    drain(e);
  }
  CHECK(strcmp(next(s), "hi") == 0);
  CHECK(pc_GrpcStream_Status(s) != NULL && pc_GrpcStream_Status(s)->code == kPc_Code_Ok);
  pc_GrpcStream_Free(s);
  CHECK(pc_GrpcEngine_CanOpen(e) && pc_GrpcEngine_Alive(e));
  pc_GrpcEngine_Free(e);
}

static void connection_close(void) {
  pc_GrpcEngine *e = engine(NULL);
  pc_GrpcStream *s = call(e, kPc_WebProtocol_ConnectUnary);
  static const char r[] = "HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\n"
                          "Connection: close\r\nContent-Length: 2\r\n\r\nhi";
  pc_GrpcEngine_Recv(e, r, sizeof r - 1);
  drain(e);
  CHECK(strcmp(next(s), "hi") == 0);
  CHECK(pc_GrpcStream_Status(s) != NULL && pc_GrpcStream_Status(s)->code == kPc_Code_Ok);
  pc_GrpcStream_Free(s);
  CHECK(!pc_GrpcEngine_CanOpen(e));
  CHECK(!pc_GrpcEngine_Alive(e)); /* its one call ended: the channel closes it */
  pc_GrpcEngine_Free(e);
}

static void grpc_web_chunked(void) {
  pc_GrpcEngine *e = engine(NULL);
  pc_GrpcStream *s = call(e, kPc_WebProtocol_GrpcWeb);
  CHECK(has("content-type: application/grpc-web+proto\r\n"));
  CHECK(has("Content-Length: 12\r\n")); /* the 5-byte prefix and "request" */
  static const char r[] = "HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web+proto\r\n"
                          "transfer-encoding: chunked\r\n\r\n"
                          "3\r\n\0\0\0\r\n4\r\n\0\x02hi\r\n"
                          "5\r\n\x80\0\0\0\x1c\r\n1c\r\ngrpc-status:0\r\nx-trail: t1\r\n\r\n"
                          "0\r\n\r\n";
  CHECK(pc_GrpcEngine_Recv(e, r, sizeof r - 1));
  drain(e);
  CHECK(strcmp(next(s), "hi") == 0);
  const pc_GrpcStatus *st = pc_GrpcStream_Status(s);
  CHECK(st != NULL && st->code == kPc_Code_Ok);
  CHECK(trailer(s, "x-trail", "t1"));
  pc_GrpcStream_Free(s);
  /* Trailers-only: the status in the head, no body. */
  s = call(e, kPc_WebProtocol_GrpcWeb);
  CHECK(s != NULL);
  static const char t[] = "HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web+proto\r\n"
                          "grpc-status: 5\r\ngrpc-message: gone\r\ncontent-length: 0\r\n\r\n";
  CHECK(pc_GrpcEngine_Recv(e, t, sizeof t - 1));
  drain(e);
  st = pc_GrpcStream_Status(s);
  CHECK(st != NULL && st->code == kPc_Code_NotFound && strcmp(st->message, "gone") == 0);
  pc_GrpcStream_Free(s);
  CHECK(pc_GrpcEngine_CanOpen(e));
  pc_GrpcEngine_Free(e);
}

static void until_close_and_errors(void) {
  /* HTTP/1.0, the body until close: the loss of the connection ends it. */
  pc_GrpcEngine *e = engine(NULL);
  pc_GrpcStream *s = call(e, kPc_WebProtocol_ConnectUnary);
  static const char r[] = "HTTP/1.0 200 OK\r\nContent-Type: application/proto\r\n\r\nhi";
  CHECK(pc_GrpcEngine_Recv(e, r, sizeof r - 1));
  drain(e);
  CHECK(pc_GrpcStream_Status(s) == NULL);
  pc_GrpcEngine_Lost(e, "connection closed", 0);
  CHECK(strcmp(next(s), "hi") == 0);
  CHECK(pc_GrpcStream_Status(s) != NULL && pc_GrpcStream_Status(s)->code == kPc_Code_Ok);
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  /* A bare LF: the call fails with the parser's reason. */
  e = engine(NULL);
  s = call(e, kPc_WebProtocol_ConnectUnary);
  static const char bad[] = "HTTP/1.1 200 OK\nContent-Length: 2\n\nhi";
  CHECK(!pc_GrpcEngine_Recv(e, bad, sizeof bad - 1));
  const pc_GrpcStatus *st = pc_GrpcStream_Status(s);
  CHECK(st != NULL && st->code == kPc_Code_Unavailable);
  CHECK(st != NULL && strncmp(st->message, "HTTP/1.1 response: ", 19) == 0);
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  /* A cut body. */
  e = engine(NULL);
  s = call(e, kPc_WebProtocol_ConnectUnary);
  static const char cut[] = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhi";
  CHECK(pc_GrpcEngine_Recv(e, cut, sizeof cut - 1));
  pc_GrpcEngine_Lost(e, "connection closed", 0);
  st = pc_GrpcStream_Status(s);
  CHECK(st != NULL && st->code == kPc_Code_Unavailable);
  pc_GrpcStream_Free(s);
  pc_GrpcEngine_Free(e);
  /* A call cancelled while its response comes: no further call on it. */
  e = engine(NULL);
  s = call(e, kPc_WebProtocol_ConnectUnary);
  static const char part[] = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhi";
  CHECK(pc_GrpcEngine_Recv(e, part, sizeof part - 1));
  pc_GrpcStream_Cancel(s, kPc_Code_Cancelled, "cancelled");
  drain(e);
  pc_GrpcStream_Free(s);
  drain(e);
  CHECK(!pc_GrpcEngine_CanOpen(e));
  pc_GrpcEngine_Free(e);
}

/* Whether the output is exactly 'want' ('n' bytes). */
static int out_is(const char *want, size_t n) {
  return out_len == n && memcmp(out, want, n) == 0;
}

/* A stream opened with no message sent; NULL when it cannot open. */
static pc_GrpcStream *stream(pc_GrpcEngine *e) {
  pc_GrpcCallSettings set = {-1, NULL, 0, 0, 0, kPc_WebProtocol_GrpcWeb, 0, 0, NULL};
  pc_Error err;
  pc_Error_Init(&err);
  return pc_GrpcEngine_Open(e, "/f.F/S", &set, NULL, &err);
}

/* The chunked path of a client stream: its head at once, before any
 * message, each message a chunk as it is sent, the last chunk at
 * close_send; then a server that answers before close_send. */
static void client_stream(void) {
  pc_GrpcEngine *e = engine(NULL);
  pc_GrpcStream *s = stream(e);
  CHECK(s != NULL);
  drain(e);
  CHECK(has("POST /f.F/S HTTP/1.1\r\nHost: example.test:80\r\n"));
  CHECK(has("content-type: application/grpc-web+proto\r\n"));
  CHECK(has("Transfer-Encoding: chunked\r\n\r\n"));
  CHECK(!has("Content-Length"));
  CHECK(out_len > 4 && memcmp(out + out_len - 4, "\r\n\r\n", 4) == 0); /* the head alone */
  drain(e);
  CHECK(out_len == 0); /* nothing until a message */
  CHECK(pc_GrpcStream_Send(s, "one", 3));
  drain(e);
  static const char one[] = "8\r\n\0\0\0\0\x03one\r\n"; /* the 5-byte prefix and "one" */
  CHECK(out_is(one, sizeof one - 1));
  CHECK(pc_GrpcStream_Send(s, "second", 6));
  drain(e);
  static const char two[] = "b\r\n\0\0\0\0\x06second\r\n";
  CHECK(out_is(two, sizeof two - 1));
  pc_GrpcStream_CloseSend(s);
  drain(e);
  CHECK(out_is("0\r\n\r\n", 5));
  static const char r[] = "HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web+proto\r\n"
                          "transfer-encoding: chunked\r\n\r\n7\r\n\0\0\0\0\x02hi\r\n"
                          "0\r\ngrpc-status: 0\r\n\r\n";
  CHECK(pc_GrpcEngine_Recv(e, r, sizeof r - 1));
  drain(e);
  CHECK(strcmp(next(s), "hi") == 0);
  const pc_GrpcStatus *st = pc_GrpcStream_Status(s);
  CHECK(st != NULL && st->code == kPc_Code_Ok);
  pc_GrpcStream_Free(s);
  drain(e);
  CHECK(pc_GrpcEngine_CanOpen(e)); /* the request ended: kept alive */
  /* A unary call next on it: Content-Length again. */
  s = call(e, kPc_WebProtocol_GrpcWeb);
  CHECK(s != NULL && has("Content-Length: 12\r\n") && !has("chunked"));
  CHECK(pc_GrpcEngine_Recv(e, r, sizeof r - 1));
  drain(e);
  CHECK(strcmp(next(s), "hi") == 0);
  pc_GrpcStream_Free(s);
  drain(e);
  /* A server that answers before close_send (it failed the call early):
   * the call ends with its status (the stream reset NO_ERROR, as a gRPC
   * server ends one); the body not ended, the connection takes no further
   * request (GOAWAY). */
  s = stream(e);
  drain(e);
  CHECK(has("POST /f.F/S HTTP/1.1\r\n") && has("Transfer-Encoding: chunked\r\n"));
  CHECK(pc_GrpcStream_Send(s, "one", 3));
  drain(e);
  CHECK(out_is(one, sizeof one - 1));
  static const char early[] = "HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web+proto\r\n"
                              "grpc-status: 3\r\ngrpc-message: no\r\ncontent-length: 0\r\n\r\n";
  pc_GrpcEngine_Recv(e, early, sizeof early - 1); /* (0: the connection ends with the call) */
  drain(e);
  st = pc_GrpcStream_Status(s);
  CHECK(st != NULL && st->code == kPc_Code_InvalidArgument && strcmp(st->message, "no") == 0);
  pc_GrpcStream_Free(s);
  drain(e);
  CHECK(!pc_GrpcEngine_CanOpen(e));
  pc_GrpcEngine_Free(e);
}

static void every_allocation_failing(void) {
  for (long at = 1;; at++) {
    fail_reset(at);
    pc_GrpcEngine *e = engine(fail_alloc);
    if (e) {
      pc_GrpcStream *s = call(e, kPc_WebProtocol_GrpcWeb);
      static const char r[] = "HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web+proto\r\n"
                              "transfer-encoding: chunked\r\n\r\n7\r\n\0\0\0\0\x02hi\r\n"
                              "0\r\nx-t: 1\r\n\r\n";
      pc_GrpcEngine_Recv(e, r, sizeof r - 1);
      drain(e);
      if (s) next(s);
      pc_GrpcStream *s2 = call(e, kPc_WebProtocol_ConnectUnary);
      pc_GrpcEngine_Recv(e, kUnary, sizeof kUnary - 1);
      drain(e);
      pc_GrpcStream_Free(s2);
      drain(e);
      pc_GrpcStream *s3 = stream(e); /* a client stream: chunked */
      drain(e);
      if (s3) pc_GrpcStream_Send(s3, "one", 3);
      drain(e);
      if (s3) pc_GrpcStream_CloseSend(s3);
      drain(e);
      pc_GrpcEngine_Recv(e, r, sizeof r - 1);
      drain(e);
      pc_GrpcEngine_Free(e);
      pc_GrpcStream_Free(s);
      pc_GrpcStream_Free(s3);
    }
    if (fail_live != 0) printf("leak at %ld: %lld\n", at, fail_live);
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
}

int main(void) {
  unary_and_keepalive();
  connection_close();
  grpc_web_chunked();
  until_close_and_errors();
  client_stream();
  every_allocation_failing();
  return CHECK_DONE();
}
