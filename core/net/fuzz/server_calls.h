/* What the server fuzz targets (server_fuzz.c over HTTP/2,
 * http1_server_fuzz.c over HTTP/1.1) do with the calls a connection hands
 * them: both engines make pc_GrpcServerCall, so keeping, reading and
 * answering them is written once here. Anything wrong aborts, which is what
 * libFuzzer reports. */
#ifndef PROTOCALL_NET_FUZZ_SERVER_CALLS_H
#define PROTOCALL_NET_FUZZ_SERVER_CALLS_H

#include "net/server.h"

#include <stdlib.h>

#define MAX_CALLS 8

/* A new call 's': its path and metadata must read; kept in 'calls' while
 * there is room, freed at once otherwise. */
static void keep_call(pc_GrpcServerCall *s, pc_GrpcServerCall **calls, size_t *ncalls) {
  if (pc_GrpcServerCall_Path(s) == NULL) abort();
  for (size_t i = 0; i < pc_GrpcServerCall_MetadataCount(s); i++) {
    if (pc_GrpcServerCall_Metadata(s, i) == NULL) abort();
  }
  if (*ncalls < MAX_CALLS)
    calls[(*ncalls)++] = s;
  else
    pc_GrpcServerCall_Free(s);
}

/* Reads every kept call's ready messages, then answers the calls not yet
 * answered (from '*taken' on): the even ones with metadata, 'messages'
 * messages and OK, the odd ones with an error and trailers. */
static void serve_calls(pc_GrpcServerCall **calls, size_t ncalls, size_t *taken, int messages,
                        pc_Error *err) {
  for (size_t i = 0; i < ncalls; i++) {
    const char *d;
    size_t len;
    while (pc_GrpcServerCall_Next(calls[i], &d, &len) == 1) {
      if (len > 0 && d == NULL) abort();
    }
  }
  for (; *taken < ncalls; (*taken)++) {
    pc_GrpcServerCall *s2 = calls[*taken];
    pc_GrpcPair p = {"x-k", 3, "v", 1};
    pc_GrpcServerCall_AddMetadata(s2, *taken % 2 == 1, &p, err);
    if (*taken % 2 == 0) {
      pc_GrpcServerCall_Send(s2, "reply", 5);
      if (messages > 1) pc_GrpcServerCall_Send(s2, "again", 5);
      pc_GrpcServerCall_Finish(s2, kPc_Code_Ok, "", 0, NULL, 0);
    } else {
      pc_GrpcServerCall_Finish(s2, kPc_Code_Internal, "n\xc3\xa9 100%", 8, "\x01\x02", 2);
    }
  }
}

#endif
