/* libFuzzer target for the server engine: hostile client bytes.
 *
 * The input, after the client preface and an empty SETTINGS frame (so
 * mutations start past them), comes in chunks whose sizes the input's bytes
 * pick, at a clock that moves a second per chunk (the token buckets and
 * deadlines run on it). After each chunk every new call is taken, its ready
 * messages read; the first answers with a message and OK, the second with
 * an error, the others are freed at once; the output is taken. Everything
 * must free cleanly and nothing may crash; anything else aborts, which is
 * what libFuzzer reports. */
#include "net/server.h"
#include "net/fuzz/server_calls.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(pc_GrpcServerConn *c) {
  const char *p;
  size_t n;
  for (int i = 0; i < 64 && (n = pc_GrpcServerConn_Output(c, &p)) > 0; i++)
    pc_GrpcServerConn_Wrote(c, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pc_GrpcServerOptions o;
  memset(&o, 0, sizeof o);
  o.max_receive = 4096;
  o.max_header_list = 2048;
  o.max_concurrent_streams = 4;
  o.reset_burst = 8;
  o.control_burst = 8;
  static const pc_WebCors cors = {.origins = "http://a.example\n*\n", .credentials = 1};
  o.cors = &cors; /* preflights and CORS headers too */
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcServerConn *c = pc_GrpcServerConn_New(&o, NULL, NULL, &err);
  if (c == NULL) abort();
  pc_GrpcServerCall *calls[MAX_CALLS];
  size_t ncalls = 0, taken = 0;
  static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
  double now = 0;
  pc_GrpcServerConn_Recv(c, preface, sizeof preface - 1, now);
  pc_GrpcServerConn_Recv(c, settings, sizeof settings, now);
  drain(c);
  size_t pos = 0;
  while (pos < size && pc_GrpcServerConn_Alive(c)) {
    size_t n = 1 + (size_t)data[pos] * 4;
    pos++;
    if (n > size - pos) n = size - pos;
    now += 1;
    pc_GrpcServerConn_Recv(c, data + pos, n, now);
    pos += n;
    pc_GrpcServerConn_Expire(c, now);
    pc_GrpcServerCall *s;
    while ((s = pc_GrpcServerConn_Accept(c)) != NULL) {
      keep_call(s, calls, &ncalls);
    }
    serve_calls(calls, ncalls, &taken, 1, &err);
    drain(c);
  }
  pc_GrpcServerConn_Free(c);
  for (size_t i = 0; i < ncalls; i++) {
    if (!pc_GrpcServerCall_Cancelled(calls[i])) abort();
    pc_GrpcServerCall_Free(calls[i]);
  }
  return 0;
}
