/* Descriptor sets: a serialized google.protobuf.FileDescriptorSet (what
 * `protoc -o --include_imports` writes) read with the project's own codec
 * into pc_FileDesc values (core/schema/descriptor.h), ready for pc_Pool_AddFile.
 *
 * The reader describes descriptor.proto's messages itself (the names and
 * field numbers are descriptor.proto's; see descriptor_set.c) in a private
 * pool, with every *Options field declared as bytes, so options arrive as
 * their serialized bytes verbatim (custom options included), as
 * pc_OptionsDesc keeps them; the options that change behaviour (packed,
 * deprecated, map_entry, message_set_wire_format, allow_alias) are then
 * decoded from those bytes. source_code_info is skipped. */
#ifndef PC_DESCRIPTOR_SET_H
#define PC_DESCRIPTOR_SET_H

#include "base/arena.h"
#include "schema/def.h"
#include "schema/descriptor.h"
#include "base/error.h"

#include <stddef.h>

/* Decodes the 'size' bytes at 'buf' as a FileDescriptorSet into an array
 * of '*count' file descriptions allocated in 'a' (strings too; the input
 * is not referenced afterwards). Returns 1, or 0 with 'err' set ("descriptor
 * set: <decode error>", or "out of memory"). */
int pc_DescriptorSet_Read(const char *buf, size_t size, pc_Arena *a, pc_FileDesc **files,
                          size_t *count, pc_Error *err);

/* Reads a descriptor set and adds every file to 'pool' in order
 * (extensions included; files already in the pool by the same name are
 * skipped, so a set can be loaded over the well-known types). Returns the
 * number of files added, or -1 with 'err' set (the pool then keeps the
 * files added before the failing one). A file that fails while an import
 * of it is neither earlier in the set nor in the pool names that import:
 * "descriptor set: a.proto imports b.proto, which is neither in the set nor
 * in the pool (<the pool's error>)". A set whose imports form a cycle
 * (through the pool's files too) adds nothing: protoc's "a.proto: File
 * recursively imports itself: a.proto -> b.proto -> a.proto", the first
 * cycle met following the set's files in order; a package past protoc's
 * limits is its "a.proto: Package name is too long" (or "Exceeds Maximum
 * Package Depth"). 'first' receives the index in the pool of the first
 * added file (pc_Pool_File). */
long pc_Pool_AddDescriptorSet(pc_Pool *pool, const char *buf, size_t size, size_t *first,
                              pc_Error *err);

#endif
