/* Descriptors out (core/wire/descriptor_write.h): a small file covering every
 * part of descriptor.proto the writer emits (package, imports, options and
 * a custom option, defaults with escapes, oneofs, maps, nested enums with
 * negative numbers, extension and reserved ranges, reserved names,
 * streaming methods, extensions) serializes to exactly the bytes protoc
 * writes for it; every file of every corpus descriptor set, loaded from its
 * .proto through a pool, serializes to protoc's bytes for that file;
 * allocation failures leak nothing. The corpus part skips without the
 * corpus (fails when env CI is set). */
#include "base/arena.h"
#include "testing/check.h"
#include "testing/corpus.h"
#include "schema/def.h"
#include "wire/descriptor_write.h"
#include "testing/failalloc.h"
#include "compiler/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char kProto[] =
    "syntax = \"proto2\";\n"
    "package t;\n"
    "import \"google/protobuf/descriptor.proto\";\n"
    "extend google.protobuf.FieldOptions { optional string note = 50001; }\n"
    "message M {\n"
    "  optional int32 a_b = 1 [default = -5, (note) = \"x\"];\n"
    "  repeated M kids = 2;\n"
    "  oneof o { string s = 3; bytes b = 4 [default = \"a\\001b\"]; }\n"
    "  extensions 100 to 199;\n"
    "  reserved 10, 12 to 14;\n"
    "  reserved \"old\";\n"
    "  map<string, E> m = 5;\n"
    "  enum E { option allow_alias = true; Z = 0; NEG = -1; ALIAS = -1; }\n"
    "}\n"
    "service S { rpc Call(stream M) returns (stream M) { option deprecated = true; } }\n";

/* protoc 3.21.12: protoc -o w.pb w.proto, the file's bytes in the set. */
static const char kExpected[] =
    "\x0a\x07\x77\x2e\x70\x72\x6f\x74\x6f\x12\x01\x74\x1a\x20\x67\x6f\x6f\x67\x6c\x65\x2f\x70\x72"
    "\x6f\x74\x6f\x62\x75\x66\x2f\x64\x65"
    "\x73\x63\x72\x69\x70\x74\x6f\x72\x2e\x70\x72\x6f\x74\x6f\x22\x8d\x02\x0a\x01\x4d\x12\x1a\x0a"
    "\x03\x61\x5f\x62\x18\x01\x20\x01\x28"
    "\x05\x3a\x02\x2d\x35\x42\x05\x8a\xb5\x18\x01\x78\x52\x02\x61\x42\x12\x18\x0a\x04\x6b\x69\x64"
    "\x73\x18\x02\x20\x03\x28\x0b\x32\x04"
    "\x2e\x74\x2e\x4d\x52\x04\x6b\x69\x64\x73\x12\x0e\x0a\x01\x73\x18\x03\x20\x01\x28\x09\x48\x00"
    "\x52\x01\x73\x12\x16\x0a\x01\x62\x18"
    "\x04\x20\x01\x28\x0c\x3a\x06\x61\x5c\x30\x30\x31\x62\x48\x00\x52\x01\x62\x12\x19\x0a\x01\x6d"
    "\x18\x05\x20\x03\x28\x0b\x32\x0b\x2e"
    "\x74\x2e\x4d\x2e\x4d\x45\x6e\x74\x72\x79\x52\x01\x6d\x1a\x3c\x0a\x06\x4d\x45\x6e\x74\x72\x79"
    "\x12\x10\x0a\x03\x6b\x65\x79\x18\x01"
    "\x20\x01\x28\x09\x52\x03\x6b\x65\x79\x12\x1c\x0a\x05\x76\x61\x6c\x75\x65\x18\x02\x20\x01\x28"
    "\x0e\x32\x06\x2e\x74\x2e\x4d\x2e\x45"
    "\x52\x05\x76\x61\x6c\x75\x65\x3a\x02\x38\x01\x22\x34\x0a\x01\x45\x12\x05\x0a\x01\x5a\x10\x00"
    "\x12\x10\x0a\x03\x4e\x45\x47\x10\xff"
    "\xff\xff\xff\xff\xff\xff\xff\xff\x01\x12\x12\x0a\x05\x41\x4c\x49\x41\x53\x10\xff\xff\xff\xff"
    "\xff\xff\xff\xff\xff\x01\x1a\x02\x10"
    "\x01\x2a\x05\x08\x64\x10\xc8\x01\x42\x03\x0a\x01\x6f\x4a\x04\x08\x0a\x10\x0b\x4a\x04\x08\x0c"
    "\x10\x0f\x52\x03\x6f\x6c\x64\x32\x20"
    "\x0a\x01\x53\x12\x1b\x0a\x04\x43\x61\x6c\x6c\x12\x04\x2e\x74\x2e\x4d\x1a\x04\x2e\x74\x2e\x4d"
    "\x22\x03\x88\x02\x01\x28\x01\x30\x01"
    "\x3a\x33\x0a\x04\x6e\x6f\x74\x65\x12\x1d\x2e\x67\x6f\x6f\x67\x6c\x65\x2e\x70\x72\x6f\x74\x6f"
    "\x62\x75\x66\x2e\x46\x69\x65\x6c\x64"
    "\x4f\x70\x74\x69\x6f\x6e\x73\x18\xd1\x86\x03\x20\x01\x28\x09\x52\x04\x6e\x6f\x74\x65";
#define EXPECTED_SIZE 405

/* Sources: the one file above by name, else files under 'dir' (NULL: none;
 * the well-known types are built in). */
typedef struct {
  const char *dir;
  char *buf;
} Source;

static int read_source(void *ud, const char *name, const char **src, size_t *len, pc_Error *err) {
  Source *s = ud;
  (void)err;
  if (strcmp(name, "w.proto") == 0) {
    *src = kProto;
    *len = sizeof kProto - 1;
    return 1;
  }
  if (s->dir == NULL) return 0;
  free(s->buf);
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", s->dir, name);
  s->buf = slurp(path, len);
  *src = s->buf;
  return s->buf != NULL;
}

/* Loads 'name' (with imports) into 'pool'; returns its description there. */
static const pc_FileDesc *load(pc_Pool *pool, Source *src, const char *name) {
  pc_Arena *arena = pc_Arena_New(NULL, NULL);
  pc_ProtoSet set = {0};
  pc_Error err;
  pc_Error_Init(&err);
  if (pc_LoadProto(arena, &set, name, read_source, src, &err) == NULL) {
    fprintf(stderr, "%s\n", err.msg);
    CHECK(0);
  }
  for (size_t i = 0; i < set.count; i++) {
    if (pc_Pool_FindFile(pool, set.files[i]->name) != NULL) continue;
    pc_Error_Init(&err);
    if (pc_Pool_AddFile(pool, set.files[i], &err) == NULL) {
      fprintf(stderr, "%s\n", err.msg);
      CHECK(0);
    }
  }
  pc_Arena_Free(arena);
  return pc_Pool_FileDesc(pool, name);
}

static void small(void) {
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  Source src = {NULL, NULL};
  const pc_FileDesc *fd = load(pool, &src, "w.proto");
  CHECK(fd != NULL);
  if (fd == NULL) return;
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  CHECK(pc_FileDesc_Write(fd, &w, NULL));
  CHECK(pc_WireWriter_Size(&w) == EXPECTED_SIZE);
  CHECK(memcmp(pc_WireWriter_Data(&w), kExpected, EXPECTED_SIZE) == 0);
  /* Every allocation failure reports, and leaks nothing. */
  for (long n = 1;; n++) {
    fail_reset(n);
    pc_WireWriter fw;
    pc_WireWriter_Init(&fw, fail_alloc, NULL);
    pc_Error err;
    pc_Error_Init(&err);
    int ok = pc_FileDesc_Write(fd, &fw, &err);
    CHECK(ok == !fail_hit);
    if (!ok) CHECK(strcmp(err.msg, "out of memory") == 0);
    if (ok) CHECK(memcmp(pc_WireWriter_Data(&fw), kExpected, EXPECTED_SIZE) == 0);
    pc_WireWriter_Free(&fw);
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
  pc_WireWriter_Free(&w);
  pc_Pool_Free(pool);
}

/* Reads one varint; NULL past the end. */
static const uint8_t *varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
  pc_WireStatus st;
  return pc_Wire_ReadVarint(p, end, v, &st);
}

/* Every file of descriptors/<project>.pb, loaded from protos/<project>
 * by name, writes protoc's bytes. Returns the number of files compared. */
static int compare_project(const char *project) {
  char path[1024];
  size_t size;
  snprintf(path, sizeof path, CORPUS "/descriptors/%s.pb", project);
  char *set = slurp(path, &size);
  CHECK(set != NULL);
  if (set == NULL) return 0;
  char dir[1024];
  snprintf(dir, sizeof dir, CORPUS "/protos/%s", project);
  Source src = {dir, NULL};
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  int files = 0;
  const uint8_t *p = (const uint8_t *)set, *end = p + size;
  while (p < end) {
    uint64_t tag, len;
    p = varint(p, end, &tag);
    CHECK(p != NULL && tag == 0x0a);
    if (p == NULL || tag != 0x0a) break;
    p = varint(p, end, &len);
    CHECK(p != NULL && len <= (uint64_t)(end - p));
    if (p == NULL || len > (uint64_t)(end - p)) break;
    /* The file's name is its field 1, first. */
    uint64_t ntag, nlen;
    const uint8_t *q = varint(p, p + len, &ntag);
    q = q ? varint(q, p + len, &nlen) : NULL;
    CHECK(q != NULL && ntag == 0x0a);
    if (q == NULL) break;
    char name[512];
    snprintf(name, sizeof name, "%.*s", (int)nlen, (const char *)q);
    const pc_FileDesc *fd = load(pool, &src, name);
    CHECK(fd != NULL);
    if (fd != NULL) {
      pc_WireWriter_Reset(&w);
      CHECK(pc_FileDesc_Write(fd, &w, NULL));
      int same = pc_WireWriter_Size(&w) == len && memcmp(pc_WireWriter_Data(&w), p, len) == 0;
      if (!same) fprintf(stderr, "%s: %s: bytes differ from protoc's\n", project, name);
      CHECK(same);
      files++;
    }
    p += len;
  }
  free(src.buf);
  pc_WireWriter_Free(&w);
  pc_Pool_Free(pool);
  free(set);
  return files;
}

int main(void) {
  small();
  size_t size;
  char *probe = slurp(CORPUS "/descriptors/wkt.pb", &size);
  if (probe == NULL) {
    return CHECK_DONE() ? 1 : corpus_missing("corpus " CORPUS);
  }
  free(probe);
  const char *projects[] = {"wkt", "protobuf", "opentelemetry", "grpc", "googleapis"};
  int total = 0;
  for (size_t i = 0; i < 5; i++) total += compare_project(projects[i]);
  printf("%d files written as protoc writes them\n", total);
  CHECK(total > 40);
  return CHECK_DONE();
}
