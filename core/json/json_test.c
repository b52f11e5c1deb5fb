/* The JSON codec: base64, FieldMask names and dates on their own; then over
 * the corpus, every payload's .json (written by python3-protobuf's
 * json_format) reads into the message its binary payload decodes to, and
 * that message written as JSON reads back to itself; reading and writing
 * under a failing allocator report OutOfMemory and leak nothing. The corpus
 * part skips (exit 77) when the corpus is absent, fails when env CI is set. */
#include "base/arena.h"
#include "json/json.h"
#include "json/json_internal.h"
#include "testing/check.h"
#include "testing/corpus.h"
#include "testing/corpus_sets.h"
#include "testing/failalloc.h"
#include "wire/decode.h"
#include "wire/descriptor_set.h"
#include "wire/encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_base64(void) {
  char out[16];
  pc_Json_Base64Encode((const uint8_t *)"\xfb\xff", 2, out);
  CHECK(memcmp(out, "+/8=", 4) == 0);
  uint8_t buf[16];
  size_t bad = 0;
  CHECK(pc_Json_Base64Decode("+/8=", 4, buf, &bad) == 2 && buf[0] == 0xfb && buf[1] == 0xff);
  CHECK(pc_Json_Base64Decode("-_8", 3, buf, &bad) == 2 && buf[0] == 0xfb && buf[1] == 0xff);
  CHECK(pc_Json_Base64Decode("-_8=", 4, buf, &bad) == 2);
  CHECK(pc_Json_Base64Decode("", 0, buf, &bad) == 0);
  CHECK(pc_Json_Base64Decode("+_8=", 4, buf, &bad) == (size_t)-1 && bad == 1); /* mixed */
  CHECK(pc_Json_Base64Decode("ab!d", 4, buf, &bad) == (size_t)-1 && bad == 2);
  CHECK(pc_Json_Base64Decode("abcde", 5, buf, &bad) == (size_t)-1);
  CHECK(pc_Json_Base64Decode("ab=", 3, buf, &bad) == (size_t)-1);
  CHECK(pc_Json_Base64Decode("YWJj", 4, buf, &bad) == 3 && memcmp(buf, "abc", 3) == 0);
}

static void test_names(void) {
  char out[64];
  CHECK(pc_Json_SnakeToCamel("foo_bar.baz_q", 13, out) == 11 &&
        memcmp(out, "fooBar.bazQ", 11) == 0);
  CHECK(pc_Json_SnakeToCamel("fooBar", 6, out) == (size_t)-1);
  CHECK(pc_Json_SnakeToCamel("foo__bar", 8, out) == (size_t)-1);
  CHECK(pc_Json_SnakeToCamel("foo_", 4, out) == (size_t)-1);
  CHECK(pc_Json_CamelToSnake("fooBar.bazQ", 11, out) == 13 &&
        memcmp(out, "foo_bar.baz_q", 13) == 0);
  CHECK(pc_Json_CamelToSnake("foo_bar", 7, out) == (size_t)-1);
}

static void test_dates(void) {
  CHECK(pc_Json_DaysFromCivil(1970, 1, 1) == 0);
  CHECK(pc_Json_DaysFromCivil(1, 1, 1) * 86400 == PC_JSON_TIMESTAMP_MIN);
  CHECK(pc_Json_DaysFromCivil(9999, 12, 31) * 86400 + 86399 == PC_JSON_TIMESTAMP_MAX);
  for (int64_t z = -800000; z <= 3000000; z += 997) {
    int64_t y;
    unsigned m, d;
    pc_Json_CivilFromDays(z, &y, &m, &d);
    CHECK(pc_Json_DaysFromCivil(y, m, d) == z);
  }
}

/* Whether 'a' and 'b' encode to the same bytes in deterministic mode (NaN
 * equals itself there, unlike pc_Message_Equal). */
static int same(const pc_Message *a, const pc_Message *b, const pc_MessageDef *m) {
  pc_WireWriter wa, wb;
  pc_WireWriter_Init(&wa, NULL, NULL);
  pc_WireWriter_Init(&wb, NULL, NULL);
  pc_EncodeOptions eo = {1, 1};
  int ok = pc_Encode(a, m, &eo, &wa, NULL) == kPc_EncodeStatus_Ok &&
           pc_Encode(b, m, &eo, &wb, NULL) == kPc_EncodeStatus_Ok &&
           pc_WireWriter_Size(&wa) == pc_WireWriter_Size(&wb) &&
           (pc_WireWriter_Size(&wa) == 0 ||
            memcmp(pc_WireWriter_Data(&wa), pc_WireWriter_Data(&wb), pc_WireWriter_Size(&wa)) == 0);
  pc_WireWriter_Free(&wa);
  pc_WireWriter_Free(&wb);
  return ok;
}

/* NAME.json against NAME.bin (or NAME for the upstream goldens); 1 when
 * they agree, -1 when there is no binary companion. */
static int compare(const pc_MessageDef *m, const char *file) {
  char path[512];
  size_t jsize, bsize;
  snprintf(path, sizeof path, "%s/payloads/%s", CORPUS, file);
  char *json = slurp(path, &jsize);
  size_t stem = strlen(path) - 5;
  snprintf(path + stem, sizeof path - stem, ".bin");
  char *bin = slurp(path, &bsize);
  if (bin == NULL) {
    path[stem] = '\0';
    if (strstr(path, "golden_message") != NULL && strstr(path, "oneof") == NULL &&
        strstr(path, "proto3") == NULL && strstr(path, "maps") == NULL)
      strcat(path, "_oneof_implemented"); /* 4 oneof members: JSON keeps the last */
    bin = slurp(path, &bsize);
  }
  if (json == NULL || bin == NULL) {
    free(json);
    free(bin);
    return -1;
  }
  int ok = 0;
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_Message *want = pc_Message_New(m, a), *got = pc_Message_New(m, a),
             *back = pc_Message_New(m, a);
  pc_Error err;
  pc_Error_Init(&err);
  pc_JsonBuf out;
  pc_JsonBuf_Init(&out, NULL, NULL);
  if (pc_Decode(bin, bsize, want, m, a, NULL, &err) != kPc_DecodeStatus_Ok) {
    fprintf(stderr, "%s: decode: %s\n", file, err.msg);
  } else if (pc_Json_Read(json, jsize, got, m, a, NULL, &err) != kPc_JsonStatus_Ok) {
    fprintf(stderr, "%s: read: %s\n", file, err.msg);
  } else if (!same(want, got, m)) {
    fprintf(stderr, "%s: read a different message than the binary holds\n", file);
  } else if (pc_Json_Write(want, m, NULL, &out, &err) != kPc_JsonStatus_Ok) {
    fprintf(stderr, "%s: write: %s\n", file, err.msg);
  } else if (pc_Json_Read(out.data, out.size, back, m, a, NULL, &err) != kPc_JsonStatus_Ok) {
    fprintf(stderr, "%s: read back: %s\n%.*s\n", file, err.msg, (int)out.size, out.data);
  } else if (!same(want, back, m)) {
    fprintf(stderr, "%s: written JSON reads back different\n", file);
  } else {
    ok = 1;
  }
  pc_JsonBuf_Free(&out);
  pc_Arena_Free(a);
  free(json);
  free(bin);
  return ok;
}

/* Payloads whose .json does not read to their binary, and why. */
static const char *const kDifferent[] = {
    /* python3-protobuf 4.21 prints repeated extensions under their
     * json_name without brackets ("repeatedInt32Extension"), which names
     * no field of TestAllExtensions: refused */
    "protobuf/text_format_unittest_extensions_data.json",
    "protobuf/text_format_unittest_extensions_data_pointy.json",
    /* MessageSet wire format: core/wire keeps its items as unknown
     * fields, the JSON sets the extensions */
    "protobuf/test_all_types_proto2_message_set.json",
};

/* Reading and writing under a failing allocator. */
static void failing(const pc_MessageDef *m, const char *file) {
  char path[512];
  size_t size;
  snprintf(path, sizeof path, "%s/payloads/%s", CORPUS, file);
  char *json = slurp(path, &size);
  CHECK(json != NULL && m != NULL);
  if (json == NULL || m == NULL) return;
  for (long n = 1;; n++) {
    fail_reset(n);
    pc_Arena *a = pc_Arena_New(fail_alloc, NULL);
    if (a != NULL) {
      pc_Message *msg = pc_Message_New(m, a);
      if (msg != NULL) {
        pc_JsonStatus st = pc_Json_Read(json, size, msg, m, a, NULL, NULL);
        CHECK(st == kPc_JsonStatus_Ok || (fail_hit && st == kPc_JsonStatus_OutOfMemory));
        if (st == kPc_JsonStatus_Ok) {
          pc_JsonBuf out;
          pc_JsonBuf_Init(&out, fail_alloc, NULL);
          pc_JsonWriteOptions wo = {0, 0, 0, 2, NULL, NULL, NULL};
          st = pc_Json_Write(msg, m, &wo, &out, NULL);
          CHECK(st == kPc_JsonStatus_Ok || st == kPc_JsonStatus_OutOfMemory);
          pc_JsonBuf_Free(&out);
        }
      }
      pc_Arena_Free(a);
    }
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
  free(json);
}

int main(void) {
  test_base64();
  test_names();
  test_dates();
  size_t msize;
  char *manifest = slurp(CORPUS "/payloads/MANIFEST.tsv", &msize);
  if (manifest == NULL) {
    if (pc_check_failures) return 1;
    return corpus_missing("corpus " CORPUS);
  }
  pc_Pool *pools[NPROJ];
  for (size_t i = 0; i < NPROJ; i++) pools[i] = load_set(kProjects[i]);
  int count = 0;
  char *line = strtok(manifest, "\n");
  for (line = strtok(NULL, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    char *cols[7] = {0};
    int nc = manifest_row(line, cols);
    if (nc < 6 || strcmp(cols[5], "json") != 0) continue;
    size_t proj = manifest_project(cols[0]);
    CHECK(proj < NPROJ);
    if (proj >= NPROJ || pools[proj] == NULL) continue;
    const pc_MessageDef *m = pc_Pool_FindMessage(pools[proj], cols[2]);
    CHECK(m != NULL);
    if (m == NULL) continue;
    int expect_ok = 1;
    for (size_t i = 0; i < sizeof kDifferent / sizeof kDifferent[0]; i++)
      if (strcmp(cols[0], kDifferent[i]) == 0) expect_ok = 0;
    int ok = compare(m, cols[0]);
    if (ok < 0) continue;
    if (!expect_ok) printf("%s: differs, as expected\n", cols[0]);
    CHECK(ok == expect_ok);
    count += ok == 1;
  }
  printf("%d corpus JSON payloads agree with their binary forms\n", count);
  CHECK(count >= 45);
  failing(pc_Pool_FindMessage(pools[2],
                              "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
          "opentelemetry/otlp_traces.json");
  failing(pc_Pool_FindMessage(pools[1], "protobuf_test_messages.proto3.TestAllTypesProto3"),
          "protobuf/test_all_types_proto3.json");
  for (size_t i = 0; i < NPROJ; i++) pc_Pool_Free(pools[i]);
  free(manifest);
  return CHECK_DONE();
}
