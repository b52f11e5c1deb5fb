/* The shared corpus (../shared/corpus beside the source tree) for C tests:
 * reading its files, and the one way to react when it is absent: skip with
 * a message (exit 77, ctest's SKIP_RETURN_CODE, so the summary counts a
 * skip), or fail when env CI is set, where the corpus must be there. */
#ifndef PC_TESTS_CORPUS_H
#define PC_TESTS_CORPUS_H

#include <stdio.h>
#include <stdlib.h>

#define CORPUS      PC_SOURCE_DIR "/../shared/corpus"
#define CORPUS_SKIP 77

/* The whole file at 'path' (NUL-terminated, for text), its size in
 * '*size'; NULL when it cannot be read. Free with free(). */
static char *slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n < 0 ? NULL : malloc((size_t)n + 1);
  if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf != NULL) buf[n] = '\0';
  *size = buf != NULL ? (size_t)n : 0;
  return buf;
}

/* The exit status of a test that cannot run because 'what' is absent. */
static int corpus_missing(const char *what) {
  if (getenv("CI") != NULL) {
    fprintf(stderr, "%s missing (required when CI is set)\n", what);
    return 1;
  }
  printf("SKIPPED: %s not found\n", what);
  return CORPUS_SKIP;
}

#endif
