/* The corpus's descriptor sets and its payload manifest for C tests (after
 * testing/check.h and testing/corpus.h): a pool per project, and the
 * columns of a MANIFEST.tsv row. */
#ifndef PC_TESTS_CORPUS_SETS_H
#define PC_TESTS_CORPUS_SETS_H

#include "schema/def.h"
#include "wire/descriptor_set.h"

#include <stdio.h>
#include <string.h>

/* The projects of the corpus, each with descriptors/NAME.pb. */
static const char *kProjects[] = {"wkt", "protobuf", "opentelemetry", "grpc", "googleapis"};
#define NPROJ (sizeof kProjects / sizeof kProjects[0])

/* A new pool holding descriptors/PROJECT.pb (CHECKs that it loads), or
 * NULL when the file cannot be read. */
static pc_Pool *load_set(const char *project) {
  char path[512];
  snprintf(path, sizeof path, "%s/descriptors/%s.pb", CORPUS, project);
  size_t size;
  char *buf = slurp(path, &size);
  CHECK(buf != NULL);
  if (buf == NULL) return NULL;
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  pc_Error err;
  pc_Error_Init(&err);
  size_t first;
  long added = pc_Pool_AddDescriptorSet(pool, buf, size, &first, &err);
  if (added <= 0) fprintf(stderr, "%s: %s\n", project, err.msg);
  CHECK(added > 0);
  free(buf);
  return pool;
}

/* Splits the manifest row 'line' in place at its tabs: file, proto_file,
 * message_type, bytes, sha256, format, notes. Returns the number of
 * columns (at most 7). */
static int manifest_row(char *line, char *cols[7]) {
  int nc = 0;
  for (char *p = line; nc < 7;) {
    cols[nc++] = p;
    char *tab = strchr(p, '\t');
    if (tab == NULL) break;
    *tab = '\0';
    p = tab + 1;
  }
  return nc;
}

/* The index in kProjects of the project holding payload 'file'
 * ("grpc/route_guide_feature.bin"), or NPROJ. */
static size_t manifest_project(const char *file) {
  for (size_t i = 0; i < NPROJ; i++) {
    size_t n = strlen(kProjects[i]);
    if (strncmp(file, kProjects[i], n) == 0 && file[n] == '/') return i;
  }
  return NPROJ;
}

#endif
