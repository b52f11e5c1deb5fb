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

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CALLS 8

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
      if (pc_GrpcServerCall_Path(s) == NULL || pc_GrpcServerCall_HttpVersion(s) != 1) abort();
      for (size_t i = 0; i < pc_GrpcServerCall_MetadataCount(s); i++) {
        if (pc_GrpcServerCall_Metadata(s, i) == NULL) abort();
      }
      if (ncalls < MAX_CALLS)
        calls[ncalls++] = s;
      else
        pc_GrpcServerCall_Free(s);
    }
    for (size_t i = 0; i < ncalls; i++) {
      const char *d;
      size_t len;
      while (pc_GrpcServerCall_Next(calls[i], &d, &len) == 1) {
        if (len > 0 && d == NULL) abort();
      }
    }
    for (; taken < ncalls; taken++) {
      pc_GrpcServerCall *s2 = calls[taken];
      pc_GrpcPair p = {"x-k", 3, "v", 1};
      pc_GrpcServerCall_AddMetadata(s2, taken % 2 == 1, &p, &err);
      if (taken % 2 == 0) {
        pc_GrpcServerCall_Send(s2, "reply", 5);
        pc_GrpcServerCall_Send(s2, "again", 5);
        pc_GrpcServerCall_Finish(s2, kPc_Code_Ok, "", 0, NULL, 0);
      } else {
        pc_GrpcServerCall_Finish(s2, kPc_Code_Internal, "n\xc3\xa9 100%", 8, "\x01\x02", 2);
      }
    }
    drain(c);
  }
  pc_Http1ServerConn_Free(c);
  for (size_t i = 0; i < ncalls; i++) pc_GrpcServerCall_Free(calls[i]);
  return 0;
}
