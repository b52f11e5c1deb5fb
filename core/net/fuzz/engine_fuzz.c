/* libFuzzer target for the engine: hostile bytes from the server side.
 *
 * An engine opens three calls (one unary with a request, one gzip, one
 * still sending) and takes its output; the input, after an empty SETTINGS
 * frame (the server preface, so mutations start past it), comes in chunks
 * whose sizes the input's bytes pick, with every ready message read and
 * the output taken after each. Every call must end with a status once the
 * connection is lost, the engine and the calls must free cleanly, and
 * nothing may crash; anything else aborts, which is what libFuzzer
 * reports. engine_seeds/ (written by engine_seeds.py with python3-h2)
 * holds whole replies: a unary answer, a gzip one, and statuses, an HTTP
 * error, a reset and a GOAWAY. The top two bits of the first byte (its
 * low six are the first chunk's size) pick the calls' protocol: gRPC,
 * gRPC-Web, Connect (the first two calls unary, the third streaming) or
 * Connect streaming for all, so the same replies reach the gRPC-Web and
 * Connect readers (end messages, error JSON, trailer- headers). With
 * Connect, an odd first byte sends the first call as a Connect GET. */
#include "net/engine.h"
#include "net/web.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(pc_GrpcEngine *e) {
  const char *p;
  size_t n;
  for (int i = 0; i < 64 && (n = pc_GrpcEngine_Output(e, &p)) > 0; i++) pc_GrpcEngine_Wrote(e, n);
}

static void read_all(pc_GrpcStream *s) {
  const char *d;
  size_t n;
  while (pc_GrpcStream_Next(s, &d, &n) == 1) {
    if (n > 0 && d == NULL) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pc_GrpcEngineOptions o;
  memset(&o, 0, sizeof o);
  o.authority = "fuzz:1";
  o.max_receive = 4096;
  o.max_header_list = 2048;
  o.stream_window = 65535;
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcEngine *e = pc_GrpcEngine_New(&o, NULL, NULL, &err);
  if (e == NULL) abort();
  static const int unary[4] = {kPc_WebProtocol_Grpc, kPc_WebProtocol_GrpcWeb,
                               kPc_WebProtocol_ConnectUnary, kPc_WebProtocol_ConnectStream};
  static const int stream[4] = {kPc_WebProtocol_Grpc, kPc_WebProtocol_GrpcWeb,
                                kPc_WebProtocol_ConnectStream, kPc_WebProtocol_ConnectStream};
  int which = size > 0 ? data[0] >> 6 : 0;
  /* Connect unary: the first call as a Connect GET when byte 0's low bit is set */
  int get = which == 2 && size > 0 && (data[0] & 1);
  pc_GrpcCallSettings plain = {-1, NULL, 0, 0, 0, unary[which], 0, get, NULL};
  pc_GrpcCallSettings gz = {1.5, NULL, 0, 1, 2, unary[which], which == 1, 0, NULL};
  pc_GrpcCallSettings open = {-1, NULL, 0, 0, 0, stream[which], 0, 0, NULL};
  pc_GrpcStream *s[3];
  s[0] = pc_GrpcEngine_Open(e, "/f.F/A", &plain, NULL, &err);
  s[1] = pc_GrpcEngine_Open(e, "/f.F/B", &gz, NULL, &err);
  s[2] = pc_GrpcEngine_Open(e, "/f.F/C", &open, NULL, &err);
  if (s[0] == NULL || s[1] == NULL || s[2] == NULL) abort();
  pc_GrpcStream_Send(s[0], "req", 3);
  pc_GrpcStream_CloseSend(s[0]);
  pc_GrpcStream_Send(s[1], "zipped zipped zipped", 20);
  pc_GrpcStream_CloseSend(s[1]);
  pc_GrpcStream_Send(s[2], "open", 4);
  drain(e);
  static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
  pc_GrpcEngine_Recv(e, settings, sizeof settings);
  size_t off = 0;
  while (off < size) {
    size_t chunk = 1 + data[off] % 64;
    off++;
    if (chunk > size - off) chunk = size - off;
    if (!pc_GrpcEngine_Recv(e, data + off, chunk)) break;
    off += chunk;
    for (int i = 0; i < 3; i++) read_all(s[i]);
    drain(e);
  }
  pc_GrpcEngine_Lost(e, "end of input", 0);
  for (int i = 0; i < 3; i++) {
    read_all(s[i]);
    if (pc_GrpcStream_Status(s[i]) == NULL) abort();
  }
  pc_GrpcStream_Free(s[1]); /* one freed before the engine, two after */
  pc_GrpcEngine_Free(e);
  pc_GrpcStream_Free(s[0]);
  pc_GrpcStream_Free(s[2]);
  return 0;
}
