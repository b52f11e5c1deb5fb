/* libFuzzer target for the HTTP/1.1 server engine (net/http1_server.h):
 * hostile client bytes.
 *
 * The input comes in chunks whose sizes its bytes pick (as server_fuzz.c),
 * at a clock a second per chunk (the head timeout and deadlines run on
 * it). After each chunk every new call is taken and its ready messages
 * read; the first answers with two messages and OK, the second with an
 * error and trailers, the others are freed at once; the output is taken.
 * Everything must free cleanly and nothing may crash; anything else aborts,
 * which is what libFuzzer reports. */
#include "net/http1_server.h"
#include "net/fuzz/server_calls.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(pc_Http1ServerConn *c) {
  const char *p;
  size_t n;
  for (int i = 0; i < 64 && (n = pc_Http1ServerConn_Output(c, &p)) > 0; i++) {
    if (p == NULL) abort();
    pc_Http1ServerConn_Wrote(c, n);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pc_Http1ServerOptions o;
  memset(&o, 0, sizeof o);
  o.engine.max_receive = 4096;
  o.engine.max_header_list = 2048;
  o.http1.max_head = 2048;
  o.http1.max_content_length = 1 << 20;
  o.max_fields = 16;
  o.head_timeout = 3;
  o.max_pending = 8192;
  static const pc_WebCors cors = {.origins = "http://a.example\n", .max_age = 60};
  o.engine.cors = &cors; /* preflights (204 without a body) and CORS headers too */
  pc_Error err;
  pc_Error_Init(&err);
  pc_Http1ServerConn *c = pc_Http1ServerConn_New(&o, NULL, NULL, &err);
  if (c == NULL) abort();
  pc_GrpcServerCall *calls[MAX_CALLS];
  size_t ncalls = 0, taken = 0;
  double now = 0;
  size_t pos = 0;
  while (pos < size && pc_Http1ServerConn_Alive(c)) {
    size_t n = 1 + (size_t)data[pos] * 4;
    pos++;
    if (n > size - pos) n = size - pos;
    now += 1;
    pc_Http1ServerConn_Recv(c, data + pos, n, now);
    pos += n;
    pc_Http1ServerConn_Expire(c, now);
    pc_GrpcServerCall *s;
    while ((s = pc_Http1ServerConn_Accept(c)) != NULL) {
      if (pc_GrpcServerCall_HttpVersion(s) != 1) abort();
      keep_call(s, calls, &ncalls);
    }
    serve_calls(calls, ncalls, &taken, 2, &err);
    drain(c);
  }
  pc_Http1ServerConn_Free(c);
  for (size_t i = 0; i < ncalls; i++) pc_GrpcServerCall_Free(calls[i]);
  return 0;
}
