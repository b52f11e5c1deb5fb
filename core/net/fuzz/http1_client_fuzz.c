/* libFuzzer target for the HTTP/1.1 client (net/http1_client.h) through
 * the engine that uses it (engine.h's 'http1'): hostile HTTP/1.1 responses.
 *
 * An engine over HTTP/1.1 opens a call, sends its request and takes the
 * output (an HTTP/1.1 request); the input's bytes after the first come as
 * the server's, in chunks whose sizes the input picks, every ready message
 * read and the output taken after each; whenever the call has ended and
 * the connection takes another (keep-alive), the next call opens, up to
 * four. The top two bits of the first byte pick the protocol (gRPC-Web,
 * gRPC-Web-Text, Connect unary, Connect streaming), its low bits whether
 * the connection is lost at the end or the input just stops. Every call
 * must end with a status once the connection is lost, each request must
 * start "POST ", the engine and the calls must free cleanly, and nothing
 * may crash or leak; anything else aborts, which is what libFuzzer
 * reports. http1_client_seeds/ holds whole replies of each protocol:
 * Content-Length, chunked with trailers, until close, two kept alive, a
 * 100 Continue first, errors. */
#include "net/engine.h"
#include "net/web.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CALLS 4

static void drain(pc_GrpcEngine *e) {
  const char *p;
  size_t n;
  for (int i = 0; i < 64 && (n = pc_GrpcEngine_Output(e, &p)) > 0; i++) {
    if (n >= 5 && memcmp(p, "POST ", 5) != 0) abort(); /* every request is written whole */
    pc_GrpcEngine_Wrote(e, n);
  }
}

static void read_all(pc_GrpcStream *s) {
  const char *d;
  size_t n;
  while (pc_GrpcStream_Next(s, &d, &n) == 1) {
    if (n > 0 && d == NULL) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  pc_GrpcEngineOptions o;
  memset(&o, 0, sizeof o);
  o.authority = "fuzz:1";
  o.max_receive = 4096;
  o.max_header_list = 4096;
  o.stream_window = 65535;
  o.http1 = 1;
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcEngine *e = pc_GrpcEngine_New(&o, NULL, NULL, &err);
  if (e == NULL) abort();
  static const int protocols[4] = {kPc_WebProtocol_GrpcWeb, kPc_WebProtocol_GrpcWebText,
                                   kPc_WebProtocol_ConnectUnary, kPc_WebProtocol_ConnectStream};
  pc_GrpcCallSettings set = {-1, NULL, 0, 0, 0, protocols[data[0] >> 6], 0, 0, NULL};
  int lose = data[0] & 1;
  pc_GrpcStream *s[CALLS] = {NULL};
  int opened = 0;
  size_t off = 1;
  for (;;) {
    if (opened < CALLS && (opened == 0 || pc_GrpcStream_Status(s[opened - 1]) != NULL) &&
        pc_GrpcEngine_CanOpen(e)) {
      set.timeout = opened == 2 ? 1.5 : -1;
      set.gzip = opened == 1;
      s[opened] = pc_GrpcEngine_Open(e, "/f.F/A", &set, NULL, &err);
      if (s[opened] == NULL) abort();
      pc_GrpcStream_Send(s[opened], "request", 7);
      pc_GrpcStream_CloseSend(s[opened]);
      opened++;
    }
    drain(e);
    if (off >= size) break;
    size_t chunk = 1 + data[off] % 64;
    off++;
    if (chunk > size - off) chunk = size - off;
    if (!pc_GrpcEngine_Recv(e, data + off, chunk)) break;
    off += chunk;
    for (int i = 0; i < opened; i++) read_all(s[i]);
  }
  if (lose || !pc_GrpcEngine_Alive(e)) {
    pc_GrpcEngine_Lost(e, "end of input", 0);
    for (int i = 0; i < opened; i++) {
      read_all(s[i]);
      if (pc_GrpcStream_Status(s[i]) == NULL) abort();
    }
  }
  if (opened > 1) pc_GrpcStream_Free(s[0]); /* one freed before the engine, the others after */
  pc_GrpcEngine_Free(e);
  for (int i = opened > 1 ? 1 : 0; i < opened; i++) {
    if (pc_GrpcStream_Status(s[i]) == NULL) abort(); /* Free ended them */
    pc_GrpcStream_Free(s[i]);
  }
  return 0;
}
