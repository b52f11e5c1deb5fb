#include "compiler/load.h"

#include "compiler/parse_internal.h"
#include "compiler/resolve_internal.h"
#include "schema/wkt.h"

#include <stdio.h>
#include <string.h>

/* protoc has no limit of its own; this one bounds the recursion (each
 * level a small frame) well past real schemas' chains. */
#define MAX_IMPORT_DEPTH 512

typedef struct {
  pc_Arena *a;
  pc_ProtoSet *set;
  pc_ProtoSource *source;
  void *ud;
  pc_Error *err;
  const char *stack[MAX_IMPORT_DEPTH];
  size_t depth;
} L;

static pc_FileDesc *find_loaded(const pc_ProtoSet *set, const char *name) {
  for (size_t i = 0; i < set->count; i++)
    if (strcmp(set->files[i]->name, name) == 0) return set->files[i];
  return NULL;
}

static int append(L *l, pc_FileDesc *f) {
  pc_ProtoSet *s = l->set;
  if (s->count == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 16;
    pc_FileDesc **n = pc_Arena_Malloc(l->a, nc * sizeof(pc_FileDesc *));
    if (n == NULL) {
      pc_Error_Set(l->err, "out of memory");
      return 0;
    }
    if (s->count) memcpy(n, s->files, s->count * sizeof(pc_FileDesc *));
    s->files = n;
    s->cap = nc;
  }
  s->files[s->count++] = f;
  return 1;
}

/* Adds 'f' and its imports, transitively, to 'out' (each once). */
static void collect(const pc_ProtoSet *set, const pc_FileDesc *f, const pc_FileDesc **out,
                    size_t *n) {
  for (size_t i = 0; i < f->dependency_count; i++) {
    const pc_FileDesc *d = find_loaded(set, f->dependencies[i]);
    if (d == NULL) continue;
    int seen = 0;
    for (size_t k = 0; k < *n && !seen; k++) seen = out[k] == d;
    if (seen) continue;
    out[(*n)++] = d;
    collect(set, d, out, n);
  }
}

/* protoc's error for an import cycle from stack entry 'i' back to 'name'. */
static pc_FileDesc *cycle(L *l, size_t i, const char *name) {
  char chain[PC_ERROR_MAX];
  size_t n = 0;
  chain[0] = '\0';
  for (size_t k = i; k < l->depth && n < sizeof chain; k++)
    n += (size_t)snprintf(chain + n, sizeof chain - n, "%s -> ", l->stack[k]);
  pc_Error_Set(l->err, "File recursively imports itself: %s%s", chain, name);
  return NULL;
}

static pc_FileDesc *load(L *l, const char *name, const char *importer) {
  pc_FileDesc *f = find_loaded(l->set, name);
  if (f != NULL) return f;
  for (size_t i = 0; i < l->depth; i++)
    if (strcmp(l->stack[i], name) == 0) return cycle(l, i, name);
  if (l->depth == MAX_IMPORT_DEPTH) {
    pc_Error_Set(l->err, "%s: imports nested too deeply", name);
    return NULL;
  }
  const char *src = NULL;
  size_t len = 0;
  pc_Error why; /* the source's error, or why it found nothing */
  pc_Error_Init(&why);
  if (name[0] == '\0') pc_Error_Set(&why, "an empty file name");
  int found = l->source && name[0] != '\0' ? l->source(l->ud, name, &src, &len, &why) : 0;
  if (found < 0) {
    pc_Error_Set(l->err, "%s", why.set ? why.msg : "cannot read the file");
    return NULL;
  }
  if (found == 0) src = pc_Wkt_Source(name, &len);
  if (src == NULL) {
    if (importer && why.set)
      pc_Error_Set(l->err, "%s: Import \"%s\" was not found or had errors (%s).", importer, name,
                   why.msg);
    else if (importer)
      pc_Error_Set(l->err, "%s: Import \"%s\" was not found or had errors.", importer, name);
    else if (why.set)
      pc_Error_Set(l->err, "%s: File not found (%s).", name, why.msg);
    else
      pc_Error_Set(l->err, "%s: File not found.", name);
    return NULL;
  }
  pc_LaterError later;
  pc_Error_Init(&later.error);
  later.early = 0;
  later.file_level = 0;
  pc_Error_Init(&later.validate);
  f = pc_ParseProto(l->a, name, src, len, l->err, &later);
  if (f == NULL) return NULL;
  /* protoc checks the package's length as it builds a file, before its
   * imports (the number of dots after them: resolve.c) */
  if (f->package != NULL && strlen(f->package) > PC_PACKAGE_MAX_LENGTH) {
    pc_Error_Set(l->err, "%s:%d:%d: Package name is too long", f->name, f->package_line,
                 f->package_column);
    return NULL;
  }
  l->stack[l->depth++] = f->name;
  for (size_t i = 0; i < f->dependency_count; i++)
    if (load(l, f->dependencies[i], f->name) == NULL) return NULL;
  l->depth--;
  const pc_FileDesc **deps =
      pc_Arena_Malloc(l->a, (l->set->count + 1) * sizeof(const pc_FileDesc *));
  if (deps == NULL) {
    pc_Error_Set(l->err, "out of memory");
    return NULL;
  }
  size_t ndeps = 0;
  collect(l->set, f, deps, &ndeps);
  if (!pc_ResolveProto(l->a, f, deps, ndeps, &later, l->err)) return NULL;
  return append(l, f) ? f : NULL;
}

pc_FileDesc *pc_LoadProto(pc_Arena *arena, pc_ProtoSet *set, const char *name,
                          pc_ProtoSource *source, void *ud, pc_Error *err) {
  L l;
  memset(&l, 0, sizeof l);
  l.a = arena;
  l.set = set;
  l.source = source;
  l.ud = ud;
  l.err = err;
  return load(&l, name, NULL);
}
