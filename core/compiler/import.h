/* Importing .proto files into a schema pool, as protoc's importer does:
 * the file named by the caller and everything it imports, their text taken
 * from a string given in memory (the main file), else from the import
 * paths in order, else from the built-in well-known types (schema/wkt.h).
 * Files the pool already holds are reused, not read again. */
#ifndef PC_COMPILER_IMPORT_H
#define PC_COMPILER_IMPORT_H

#include "base/arena.h"
#include "base/error.h"
#include "schema/def.h"

#include <stddef.h>

/* Where .proto text comes from. Zero-initialize, then set 'arena' (scratch
 * for paths, file text and the loaded descriptions; the caller frees it
 * after pc_Import returns) and what applies. */
typedef struct {
  pc_Arena *arena;
  const char *main_name; /* the file given as text, or NULL */
  const char *main_source;
  size_t main_len;
  const char **paths; /* import paths, searched in order */
  size_t path_count;
} pc_ImportCtx;

/* Loads the file 'name' and what it imports into 'pool'. Returns 1, or 0
 * with 'err' set ("a.proto:3:10: ...", "b.proto: File not found.", "out of
 * memory"); the pool then keeps the files added before the failing one. */
int pc_Import(pc_Pool *pool, pc_ImportCtx *c, const char *name, pc_Error *err);

#endif
