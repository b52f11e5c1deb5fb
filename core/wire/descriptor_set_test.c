/* Descriptor sets: every corpus set read through the codec builds the same
 * definitions as the .proto parser builds from the same files (names,
 * numbers, types, labels, json names, packing, presence, oneofs, maps,
 * defaults, extensions); files a pool already has are skipped; malformed
 * sets fail with the offset; allocation failures leak nothing. Skips
 * without the corpus (fails when env CI is set). */
#include "base/arena.h"
#include "testing/check.h"
#include "testing/corpus.h"
#include "wire/descriptor_set.h"
#include "testing/failalloc.h"
#include "compiler/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *dir;
  char *buf;
} Source;

static int read_source(void *ud, const char *name, const char **src, size_t *len, pc_Error *err) {
  Source *s = ud;
  (void)err;
  free(s->buf);
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", s->dir, name);
  s->buf = slurp(path, len);
  *src = s->buf;
  return s->buf != NULL;
}

static int same_str(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int fails;
static void diff(const char *what, const char *name) {
  if (fails++ < 20) fprintf(stderr, "differs: %s of %s\n", what, name);
}

static void compare_field(const pc_FieldDef *a, const pc_FieldDef *b) {
  const char *n = a->full_name;
  if (!same_str(a->full_name, b->full_name)) diff("full_name", n);
  if (a->number != b->number) diff("number", n);
  if (a->type != b->type) diff("type", n);
  if (a->label != b->label) diff("label", n);
  if (!same_str(a->json_name, b->json_name)) diff("json_name", n);
  if (a->packed != b->packed) diff("packed", n);
  if (a->has_presence != b->has_presence) diff("has_presence", n);
  if (a->is_map != b->is_map) diff("is_map", n);
  if (a->proto3_optional != b->proto3_optional) diff("proto3_optional", n);
  if (a->has_default != b->has_default) diff("has_default", n);
  if (!same_str(a->default_text, b->default_text)) diff("default", n);
  if ((a->oneof == NULL) != (b->oneof == NULL) ||
      (a->oneof != NULL && strcmp(a->oneof->full_name, b->oneof->full_name) != 0))
    diff("oneof", n);
  if ((a->message == NULL) != (b->message == NULL) ||
      (a->message != NULL && strcmp(a->message->full_name, b->message->full_name) != 0))
    diff("message type", n);
  if ((a->enumdef == NULL) != (b->enumdef == NULL) ||
      (a->enumdef != NULL && strcmp(a->enumdef->full_name, b->enumdef->full_name) != 0))
    diff("enum type", n);
  if (a->containing != NULL && b->containing != NULL &&
      strcmp(a->containing->full_name, b->containing->full_name) != 0)
    diff("containing type", n);
}

static int compare_project(const char *project) {
  char path[512];
  size_t size;
  snprintf(path, sizeof path, "%s/descriptors/%s.pb", CORPUS, project);
  char *buf = slurp(path, &size);
  CHECK(buf != NULL);
  if (buf == NULL) return 0;
  pc_Pool *a = pc_Pool_New(NULL, NULL), *b = pc_Pool_New(NULL, NULL);
  pc_Error err;
  pc_Error_Init(&err);
  size_t first;
  long n = pc_Pool_AddDescriptorSet(a, buf, size, &first, &err);
  if (n <= 0) fprintf(stderr, "%s: %s\n", project, err.msg);
  CHECK(n > 0 && first == 0);

  /* The same files through the parser, in the set's order. */
  pc_Arena *arena = pc_Arena_New(NULL, NULL);
  pc_ProtoSet set = {0};
  snprintf(path, sizeof path, "%s/protos/%s", CORPUS, project);
  Source src = {path, NULL};
  for (size_t i = 0; i < pc_Pool_FileCount(a); i++) {
    const char *name = pc_Pool_File(a, i)->name;
    if (pc_LoadProto(arena, &set, name, read_source, &src, &err) == NULL)
      fprintf(stderr, "%s: %s\n", name, err.msg);
  }
  free(src.buf);
  CHECK(set.count == pc_Pool_FileCount(a));
  for (size_t i = 0; i < set.count; i++)
    if (pc_Pool_AddFile(b, set.files[i], &err) == NULL) fprintf(stderr, "%s\n", err.msg);
  CHECK(pc_Pool_FileCount(b) == pc_Pool_FileCount(a));

  int compared = 0;
  for (size_t i = 0; i < pc_Pool_FileCount(a) && i < pc_Pool_FileCount(b); i++) {
    const pc_FileDef *fa = pc_Pool_File(a, i), *fb = pc_Pool_FindFile(b, fa->name);
    CHECK(fb != NULL);
    if (fb == NULL) continue;
    if (fa->syntax != fb->syntax) diff("syntax", fa->name);
    if (!same_str(fa->package, fb->package)) diff("package", fa->name);
    if (fa->message_count != fb->message_count) diff("message count", fa->name);
    if (fa->enum_count != fb->enum_count) diff("enum count", fa->name);
    if (fa->service_count != fb->service_count) diff("service count", fa->name);
    if (fa->extension_count != fb->extension_count) diff("extension count", fa->name);
    for (uint32_t m = 0; m < fa->message_count; m++) {
      const pc_MessageDef *ma = &fa->messages[m];
      const pc_MessageDef *mb = pc_Pool_FindMessage(b, ma->full_name);
      if (mb == NULL) {
        diff("presence", ma->full_name);
        continue;
      }
      if (ma->field_count != mb->field_count) diff("field count", ma->full_name);
      if (ma->oneof_count != mb->oneof_count) diff("oneof count", ma->full_name);
      if (ma->map_entry != mb->map_entry) diff("map_entry", ma->full_name);
      if (ma->extension_range_count != mb->extension_range_count)
        diff("extension ranges", ma->full_name);
      if (ma->size != mb->size) diff("layout size", ma->full_name);
      for (uint32_t f = 0; f < ma->field_count && f < mb->field_count; f++) {
        compare_field(&ma->fields[f], &mb->fields[f]);
        compared++;
      }
    }
    for (uint32_t e = 0; e < fa->enum_count; e++) {
      const pc_EnumDef *ea = &fa->enums[e];
      const pc_EnumDef *eb = pc_Pool_FindEnum(b, ea->full_name);
      if (eb == NULL || eb->value_count != ea->value_count || eb->closed != ea->closed) {
        diff("enum", ea->full_name);
        continue;
      }
      for (uint32_t v = 0; v < ea->value_count; v++)
        if (!same_str(ea->values[v].name, eb->values[v].name) ||
            ea->values[v].number != eb->values[v].number)
          diff("enum value", ea->values[v].full_name);
    }
    for (uint32_t x = 0; x < fa->extension_count; x++) {
      const pc_FieldDef *xa = &fa->extensions[x];
      const pc_FieldDef *xb = pc_Pool_FindExtension(b, xa->full_name);
      if (xb == NULL)
        diff("extension", xa->full_name);
      else
        compare_field(xa, xb);
    }
    for (uint32_t s = 0; s < fa->service_count; s++) {
      const pc_ServiceDef *sa = &fa->services[s];
      const pc_ServiceDef *sb = pc_Pool_FindService(b, sa->full_name);
      if (sb == NULL || sb->method_count != sa->method_count) {
        diff("service", sa->full_name);
        continue;
      }
      for (uint32_t k = 0; k < sa->method_count; k++)
        if (strcmp(sa->methods[k].input->full_name, sb->methods[k].input->full_name) != 0 ||
            strcmp(sa->methods[k].output->full_name, sb->methods[k].output->full_name) != 0 ||
            sa->methods[k].server_streaming != sb->methods[k].server_streaming ||
            sa->methods[k].client_streaming != sb->methods[k].client_streaming)
          diff("method", sa->methods[k].full_name);
    }
  }
  /* Loading the set again adds nothing: every file is there by name. */
  CHECK(pc_Pool_AddDescriptorSet(a, buf, size, &first, &err) == 0);
  pc_Arena_Free(arena);
  pc_Pool_Free(a);
  pc_Pool_Free(b);
  free(buf);
  return compared;
}

static void malformed(void) {
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_FileDesc *files;
  size_t count;
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(!pc_DescriptorSet_Read("\x0a\x05\x0a\x03", 4, a, &files, &count, &err));
  CHECK(strcmp(err.msg, "descriptor set: protocall.desc.FileDescriptorSet.file: length runs "
                        "past the end of the input at offset 1") == 0);
  pc_Error_Init(&err);
  CHECK(pc_DescriptorSet_Read("", 0, a, &files, &count, &err) && count == 0);
  pc_Arena_Free(a);
}

static void failing(void) {
  size_t size;
  char *buf = slurp(CORPUS "/descriptors/grpc.pb", &size);
  CHECK(buf != NULL);
  if (buf == NULL) return;
  for (long n = 1;; n++) {
    fail_reset(n);
    pc_Arena *a = pc_Arena_New(fail_alloc, NULL);
    if (a != NULL) {
      pc_FileDesc *files;
      size_t count;
      pc_Error err;
      pc_Error_Init(&err);
      int ok = pc_DescriptorSet_Read(buf, size, a, &files, &count, &err);
      CHECK(ok || strcmp(err.msg, "out of memory") == 0);
      CHECK(!ok || count == 5);
      pc_Arena_Free(a);
    }
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
  free(buf);
}

int main(void) {
  malformed();
  size_t size;
  char *probe = slurp(CORPUS "/descriptors/wkt.pb", &size);
  if (probe == NULL) {
    return CHECK_DONE() ? 1 : corpus_missing("corpus " CORPUS);
  }
  free(probe);
  const char *projects[] = {"wkt", "protobuf", "opentelemetry", "grpc", "googleapis"};
  int total = 0;
  for (size_t i = 0; i < 5; i++) total += compare_project(projects[i]);
  printf("%d fields compared, %d differences\n", total, fails);
  CHECK(total > 1000);
  CHECK(fails == 0);
  failing();
  return CHECK_DONE();
}
