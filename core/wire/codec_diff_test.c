/* Differential test against the reference (Debian's python3-protobuf):
 * spec/tools/wire_diff.py makes random messages of every corpus schema
 * (every field kind, extreme values, extensions, unknown fields) as their
 * deterministic encoding; protocall decodes each and re-encodes it in
 * deterministic mode, which must give the reference's bytes; then the
 * reference parses protocall's encodings and must find equal messages.
 * Bounded: a fixed count and a time cap in the generator. The seed is
 * fixed unless PC_DIFF_SEED is set (the seed is printed either way).
 * Skips when the corpus or /usr/bin/python3 is absent (fails if CI is set). */
#include "base/arena.h"
#include "testing/check.h"
#include "testing/corpus.h"
#include "wire/decode.h"
#include "wire/descriptor_set.h"
#include "wire/encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOOL PC_SOURCE_DIR "/spec/tools/wire_diff.py"

static const char *kProjects[] = {"wkt", "protobuf", "opentelemetry", "grpc", "googleapis"};
#define NPROJ (sizeof kProjects / sizeof kProjects[0])

static size_t unhex(const char *h, size_t n, char *out) {
  for (size_t i = 0; i + 1 < n + 1 && i < n / 2; i++) {
    unsigned v;
    sscanf(h + 2 * i, "%2x", &v);
    out[i] = (char)v;
  }
  return n / 2;
}

int main(void) {
  if (access(CORPUS "/descriptors/protobuf.pb", R_OK) != 0) return corpus_missing("corpus " CORPUS);
  if (access("/usr/bin/python3", X_OK) != 0) return corpus_missing("/usr/bin/python3");
  const char *seed = getenv("PC_DIFF_SEED") ? getenv("PC_DIFF_SEED") : "4";
  char gen[512], cases[256], out[256], cmd[1400];
  snprintf(cases, sizeof cases, "wire_diff_cases.tsv");
  snprintf(out, sizeof out, "wire_diff_protocall.tsv");
  snprintf(gen, sizeof gen,
           "/usr/bin/python3 %s gen %s/descriptors %s --seed %s --count 4000 --seconds 20", TOOL,
           CORPUS, cases, seed);
  printf("seed %s\n", seed);
  fflush(stdout);
  if (system("/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null") != 0)
    return corpus_missing("python3-protobuf");
  if (system(gen) != 0) {
    fprintf(stderr, "the generator failed\n");
    return 1;
  }

  pc_Pool *pools[NPROJ];
  for (size_t i = 0; i < NPROJ; i++) {
    char path[512];
    size_t size;
    snprintf(path, sizeof path, "%s/descriptors/%s.pb", CORPUS, kProjects[i]);
    char *buf = slurp(path, &size);
    pools[i] = pc_Pool_New(NULL, NULL);
    size_t first;
    pc_Error err;
    pc_Error_Init(&err);
    CHECK(buf != NULL && pc_Pool_AddDescriptorSet(pools[i], buf, size, &first, &err) > 0);
    free(buf);
  }

  size_t size;
  char *text = slurp(cases, &size);
  CHECK(text != NULL);
  FILE *o = fopen(out, "w");
  CHECK(o != NULL);
  if (text == NULL || o == NULL) return CHECK_DONE();
  char *bytes = malloc(size / 2 + 1);
  int count = 0, same = 0;
  for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    char *set = line, *type = strchr(set, '\t');
    if (type == NULL) continue;
    *type++ = '\0';
    char *hex = strchr(type, '\t');
    if (hex == NULL) continue;
    *hex++ = '\0';
    size_t n = unhex(hex, strlen(hex), bytes);
    size_t p = NPROJ;
    for (size_t i = 0; i < NPROJ; i++)
      if (strcmp(kProjects[i], set) == 0) p = i;
    const pc_MessageDef *m = p < NPROJ ? pc_Pool_FindMessage(pools[p], type) : NULL;
    CHECK(m != NULL);
    if (m == NULL) continue;
    count++;
    pc_Arena *a = pc_Arena_New(NULL, NULL);
    pc_Message *msg = pc_Message_New(m, a);
    pc_Error err;
    pc_Error_Init(&err);
    /* The reference writes partial messages (SerializePartialToString):
     * required fields are not checked on either side. */
    pc_DecodeOptions dopts = {.partial = 1};
    if (pc_Decode(bytes, n, msg, m, a, &dopts, &err) != kPc_DecodeStatus_Ok) {
      fprintf(stderr, "%s %s: decode failed: %s\n", set, type, err.msg);
      CHECK(0);
      pc_Arena_Free(a);
      continue;
    }
    pc_WireWriter w;
    pc_WireWriter_Init(&w, NULL, NULL);
    pc_EncodeOptions eo = {1, 1};
    CHECK(pc_Encode(msg, m, &eo, &w, &err) == kPc_EncodeStatus_Ok);
    size_t en = pc_WireWriter_Size(&w);
    const uint8_t *ed = pc_WireWriter_Data(&w);
    if (en == n && (n == 0 || memcmp(ed, bytes, n) == 0)) {
      same++;
    } else {
      fprintf(stderr, "%s %s: re-encoding differs\n  want %s\n", set, type, hex);
      CHECK(0);
    }
    fprintf(o, "%s\t%s\t%s\t", set, type, hex);
    for (size_t i = 0; i < en; i++) fprintf(o, "%02x", ed[i]);
    fputc('\n', o);
    pc_WireWriter_Free(&w);
    pc_Arena_Free(a);
  }
  fclose(o);
  free(bytes);
  free(text);
  printf("%d messages decoded, %d re-encoded to the reference's bytes\n", count, same);
  CHECK(count >= 1000);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s check %s/descriptors %s", TOOL, CORPUS, out);
  fflush(stdout);
  CHECK(system(cmd) == 0);
  for (size_t i = 0; i < NPROJ; i++) pc_Pool_Free(pools[i]);
  return CHECK_DONE();
}
