/* Codec over the corpus: every descriptor set loads through the codec
 * (pc_Pool_AddDescriptorSet); every binary payload of
 * ../shared/corpus/payloads/MANIFEST.tsv decodes and re-encodes in
 * deterministic mode to the same bytes (golden_message, which carries four
 * members of one oneof, re-encodes as golden_message_oneof_implemented);
 * decoding under a failing allocator leaks nothing. Skips (exit 0, with a
 * message) when the corpus is absent, fails when env CI is set. */
#include "base/arena.h"
#include "testing/check.h"
#include "testing/corpus.h"
#include "testing/corpus_sets.h"
#include "wire/decode.h"
#include "wire/descriptor_set.h"
#include "wire/encode.h"
#include "testing/failalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int roundtrip(pc_Pool *pool, const char *type, const char *file, const char *expect_file) {
  char path[512];
  size_t size, esize;
  snprintf(path, sizeof path, "%s/payloads/%s", CORPUS, file);
  char *buf = slurp(path, &size);
  snprintf(path, sizeof path, "%s/payloads/%s", CORPUS, expect_file);
  char *want = slurp(path, &esize);
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, type);
  int ok = 0;
  if (buf != NULL && want != NULL && m != NULL) {
    pc_Arena *a = pc_Arena_New(NULL, NULL);
    pc_Message *msg = pc_Message_New(m, a);
    pc_Error err;
    pc_Error_Init(&err);
    if (pc_Decode(buf, size, msg, m, a, NULL, &err) != kPc_DecodeStatus_Ok) {
      fprintf(stderr, "%s: decode: %s\n", file, err.msg);
    } else {
      pc_WireWriter w;
      pc_WireWriter_Init(&w, NULL, NULL);
      pc_EncodeOptions eo = {1, 0};
      if (pc_Encode(msg, m, &eo, &w, &err) != kPc_EncodeStatus_Ok) {
        fprintf(stderr, "%s: encode: %s\n", file, err.msg);
      } else if (pc_WireWriter_Size(&w) != esize ||
                 (esize > 0 && memcmp(pc_WireWriter_Data(&w), want, esize) != 0)) {
        size_t n = pc_WireWriter_Size(&w), i = 0;
        while (i < n && i < esize && pc_WireWriter_Data(&w)[i] == (uint8_t)want[i]) i++;
        fprintf(stderr, "%s: re-encoded %zu bytes, want %zu; first difference at %zu\n", file, n,
                esize, i);
      } else {
        ok = 1;
      }
      pc_WireWriter_Free(&w);
    }
    pc_Arena_Free(a);
  } else {
    fprintf(stderr, "%s: cannot read payload or find %s\n", file, type);
  }
  free(buf);
  free(want);
  return ok;
}

/* Decoding under a failing allocator: every failure is OutOfMemory and
 * nothing leaks. */
static void failing_decode(pc_Pool *pool, const char *type, const char *file) {
  char path[512];
  size_t size;
  snprintf(path, sizeof path, "%s/payloads/%s", CORPUS, file);
  char *buf = slurp(path, &size);
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, type);
  CHECK(buf != NULL && m != NULL);
  if (buf == NULL || m == NULL) return;
  for (long n = 1;; n++) {
    fail_reset(n);
    pc_Arena *a = pc_Arena_New(fail_alloc, NULL);
    if (a != NULL) {
      pc_Message *msg = pc_Message_New(m, a);
      if (msg != NULL) {
        pc_DecodeStatus st = pc_Decode(buf, size, msg, m, a, NULL, NULL);
        CHECK(st == kPc_DecodeStatus_Ok || (fail_hit && st == kPc_DecodeStatus_OutOfMemory));
        pc_WireWriter w;
        pc_WireWriter_Init(&w, fail_alloc, NULL);
        if (st == kPc_DecodeStatus_Ok) {
          pc_EncodeOptions eo = {1, 0};
          pc_EncodeStatus es = pc_Encode(msg, m, &eo, &w, NULL);
          CHECK(es == kPc_EncodeStatus_Ok || es == kPc_EncodeStatus_OutOfMemory);
        }
        pc_WireWriter_Free(&w);
      }
      pc_Arena_Free(a);
    }
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
  free(buf);
}

int main(void) {
  size_t msize;
  char *manifest = slurp(CORPUS "/payloads/MANIFEST.tsv", &msize);
  if (manifest == NULL) {
    return corpus_missing("corpus " CORPUS);
  }
  manifest[msize] = '\0';
  pc_Pool *pools[NPROJ];
  for (size_t i = 0; i < NPROJ; i++) pools[i] = load_set(kProjects[i]);

  int count = 0;
  char *line = strtok(manifest, "\n");
  for (line = strtok(NULL, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    /* file proto_file message_type bytes sha256 format notes */
    char *cols[7] = {0};
    int nc = manifest_row(line, cols);
    if (nc < 6 || strcmp(cols[5], "binary") != 0) continue;
    size_t proj = manifest_project(cols[0]);
    CHECK(proj < NPROJ);
    if (proj >= NPROJ || pools[proj] == NULL) continue;
    const char *expect = cols[0];
    if (strcmp(cols[0], "protobuf/golden_message") == 0)
      expect = "protobuf/golden_message_oneof_implemented";
    int ok = roundtrip(pools[proj], cols[2], cols[0], expect);
    CHECK(ok);
    count++;
  }
  printf("%d corpus payloads round-tripped\n", count);
  CHECK(count >= 49);
  failing_decode(pools[2], "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest",
                 "opentelemetry/otlp_traces.bin");
  for (size_t i = 0; i < NPROJ; i++) pc_Pool_Free(pools[i]);
  free(manifest);
  return CHECK_DONE();
}
