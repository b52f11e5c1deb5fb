/* Loading .proto files with their imports: parse, load each import first
 * (depth first, each file once), resolve against the transitive imports.
 *
 * The caller supplies the files' text through a pc_ProtoSource function
 * (reading import paths, a virtual file system, embedded strings); the
 * well-known types (wkt.h) answer for google/protobuf/... names the source
 * does not have. Loaded files accumulate in a pc_ProtoSet, imports before
 * the files importing them, ready to hand to a schema pool one by one. */
#ifndef PC_PROTO_LOAD_H
#define PC_PROTO_LOAD_H

#include <stddef.h>

#include "base/arena.h"
#include "schema/descriptor.h"
#include "base/error.h"

/* Finds the .proto text of import name 'name': returns 1 with '*src' and
 * '*len' set (the text must stay valid until the next call of the function
 * or the end of pc_LoadProto, whichever comes first), 0 when there is no
 * such file, -1 on another failure, with a message in 'err'. With 0 'err'
 * may say why nothing was found ("dir/x.proto is a folder"); the not-found
 * error then ends with it in parentheses. */
typedef int pc_ProtoSource(void *ud, const char *name, const char **src, size_t *len,
                           pc_Error *err);

/* Files loaded so far, imports first. Zero-initialize; storage lives in the
 * arena passed to pc_LoadProto (always the same arena for one set). A set
 * may be seeded with files already resolved elsewhere (say, those a schema
 * pool holds, emitted as pc_FileDesc): point 'files' at an array of 'count'
 * of them with 'cap' = 'count' (it is copied, not written, when the set
 * grows); imports of those names are then taken from the set, not read. */
typedef struct {
  pc_FileDesc **files;
  size_t count, cap;
} pc_ProtoSet;

/* Loads the file named 'name' and, first, everything it imports that 'set'
 * does not hold yet, appending each resolved file to 'set'. Returns the
 * loaded (or already present) file, or NULL with the first error in 'err':
 * a parse or resolve error ("a.proto:3:10: ..."), "b.proto: File not
 * found." for a missing file (an import of one: 'a.proto: Import "b.proto"
 * was not found or had errors.', with the source's reason or "an empty file
 * name" in parentheses before the dot when there is one), an import cycle ("File recursively
 * imports itself: a.proto -> b.proto -> a.proto"), "out of memory". Files appended before a failure
 * stay in 'set' (each is complete and resolved). */
pc_FileDesc *pc_LoadProto(pc_Arena *arena, pc_ProtoSet *set, const char *name,
                          pc_ProtoSource *source, void *ud, pc_Error *err);

#endif
