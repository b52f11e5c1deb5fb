/* protocall's C API on the same cases as codec_cpp.cc, built by
 * bench/codec_bench.lua against build/release's core library.
 *   codec_c SET.pb DIR OTLP_BIN TAT3_BIN [CASE OP N]
 * SET.pb is a descriptor set of point.proto, the OTLP trace service and
 * test_messages_proto3 (with imports). Prints "case decode_ns encode_ns". */
#define _POSIX_C_SOURCE 199309L
#include "base/arena.h"
#include "wire/decode.h"
#include "wire/descriptor_set.h"
#include "wire/encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) exit(1);
  fclose(f);
  *size = (size_t)n;
  return buf;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Decode into a fresh arena each time (what pc.decode does). */
static double time_decode(const pc_MessageDef *m, const char *buf, size_t size, long n) {
  double t0 = now();
  for (long i = 0; i < n; i++) {
    pc_Arena *a = pc_Arena_New(NULL, NULL);
    pc_Message *msg = pc_Message_New(m, a);
    if (pc_Decode(buf, size, msg, m, a, NULL, NULL) != kPc_DecodeStatus_Ok) exit(1);
    pc_Arena_Free(a);
  }
  return (now() - t0) / (double)n * 1e9;
}

static double time_encode(const pc_MessageDef *m, const char *buf, size_t size, long n) {
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_Message *msg = pc_Message_New(m, a);
  if (pc_Decode(buf, size, msg, m, a, NULL, NULL) != kPc_DecodeStatus_Ok) exit(1);
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  double t0 = now();
  for (long i = 0; i < n; i++) {
    pc_WireWriter_Reset(&w);
    if (pc_Encode(msg, m, NULL, &w, NULL) != kPc_EncodeStatus_Ok) exit(1);
  }
  double t = (now() - t0) / (double)n * 1e9;
  pc_WireWriter_Free(&w);
  pc_Arena_Free(a);
  return t;
}

typedef double (*timer)(const pc_MessageDef *, const char *, size_t, long);

static double best(timer f, const pc_MessageDef *m, const char *buf, size_t size) {
  long n = 1;
  while (f(m, buf, size, n) * (double)n < 5e7) n *= 4;
  double b = 1e30;
  for (int r = 0; r < 5; r++) {
    double v = f(m, buf, size, n);
    if (v < b) b = v;
  }
  return b;
}

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  size_t setsize;
  char *set = slurp(argv[1], &setsize);
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  pc_Error err;
  pc_Error_Init(&err);
  size_t first;
  if (pc_Pool_AddDescriptorSet(pool, set, setsize, &first, &err) < 0) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  char path[1024];
  const char *names[4] = {"point", "rich", "otlp_traces", "test_all_types_proto3"};
  const char *types[4] = {"bench.Point", "bench.Rich",
                          "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest",
                          "protobuf_test_messages.proto3.TestAllTypesProto3"};
  for (int i = 0; i < 4; i++) {
    const char *file = i == 2 ? argv[3] : i == 3 ? argv[4] : path;
    snprintf(path, sizeof path, "%s/%s.bin", argv[2], names[i]);
    size_t size;
    char *buf = slurp(file, &size);
    const pc_MessageDef *m = pc_Pool_FindMessage(pool, types[i]);
    if (m == NULL) return 1;
    if (argc >= 8) {
      if (strcmp(argv[5], names[i]) == 0)
        (strcmp(argv[6], "decode") == 0 ? time_decode : time_encode)(m, buf, size, atol(argv[7]));
    } else {
      printf("%s %.2f %.2f\n", names[i], best(time_decode, m, buf, size),
             best(time_encode, m, buf, size));
    }
    free(buf);
  }
  pc_Pool_Free(pool);
  free(set);
  return 0;
}
