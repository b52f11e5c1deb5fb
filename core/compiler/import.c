/* Importing .proto files into a schema pool (compiler/import.h): the
 * files' text from memory or the import paths, the load seeded with what
 * the pool already holds. */
#include "compiler/import.h"

#include "compiler/load.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Reads the whole file at 'path' into the arena: 1 found, 0 absent (a folder of that
 * name is absent too, as protoc takes it, with the reason in 'err'), -1 error. */
static int read_file(pc_Arena *a, const char *path, const char **src, size_t *len, pc_Error *err) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 0;
  size_t cap = 4096, n = 0;
  char *buf = pc_Arena_Malloc(a, cap);
  errno = 0;
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *bigger = pc_Arena_Malloc(a, cap * 2); /* the old buffer stays in the arena */
    if (bigger != NULL) memcpy(bigger, buf, n);
    buf = bigger;
    cap *= 2;
  }
  int bad = ferror(f), why = errno;
  fclose(f);
  if (buf == NULL) {
    pc_Error_Set(err, "%s: out of memory", path);
    return -1;
  }
  if (bad && why == EISDIR) { /* absent, as protoc takes it; the reason noted */
    pc_Error_Set(err, "%s is a folder", path);
    return 0;
  }
  if (bad) {
    pc_Error_Set(err, "%s: %s", path, strerror(why));
    return -1;
  }
  *src = buf;
  *len = n;
  return 1;
}

static int source_fn(void *ud, const char *name, const char **src, size_t *len, pc_Error *err) {
  pc_ImportCtx *c = ud;
  if (c->main_name != NULL && strcmp(name, c->main_name) == 0) {
    *src = c->main_source;
    *len = c->main_len;
    return 1;
  }
  for (size_t i = 0; i < c->path_count; i++) {
    size_t plen = strlen(c->paths[i]), nlen = strlen(name);
    char *full = pc_Arena_Malloc(c->arena, plen + nlen + 2);
    if (full == NULL) {
      pc_Error_Set(err, "%s: out of memory", name);
      return -1;
    }
    memcpy(full, c->paths[i], plen);
    full[plen] = '/';
    memcpy(full + plen + 1, name, nlen + 1);
    int r = read_file(c->arena, full, src, len, err);
    if (r != 0) return r;
  }
  return 0;
}

int pc_Import(pc_Pool *pool, pc_ImportCtx *c, const char *name, pc_Error *err) {
  /* Seed with the pool's files so imports of loaded files are not reread. */
  size_t seeded = pc_Pool_FileCount(pool);
  pc_ProtoSet set = {NULL, 0, 0};
  if (seeded > 0) {
    set.files = pc_Arena_Malloc(c->arena, seeded * sizeof(pc_FileDesc *));
    if (set.files == NULL) {
      pc_Error_Set(err, "%s: out of memory", name);
      return 0;
    }
    for (size_t i = 0; i < seeded; i++) /* read only: the set copies before growing */
      set.files[i] = (pc_FileDesc *)pc_Pool_FileDesc(pool, pc_Pool_File(pool, i)->name);
    set.count = set.cap = seeded;
  }
  if (pc_LoadProto(c->arena, &set, name, source_fn, c, err) == NULL) return 0;
  for (size_t i = seeded; i < set.count; i++)
    if (pc_Pool_AddFile(pool, set.files[i], err) == NULL) return 0;
  return 1;
}
