/* Resolving and validating a parsed .proto file, as protoc's
 * DescriptorBuilder does, without a schema pool.
 *
 * Input: a pc_FileDesc from pc_ParseProto (type references as written,
 * custom options uninterpreted) and the resolved descriptions of every file
 * it imports, transitively. Output, in place: every type reference fully
 * qualified with a leading dot (field type_name, extendee, method
 * input/output) and 'type' set (message, enum or group), float defaults in
 * protoc's float form, custom options `(pkg.ext).a.b = v` and aggregate
 * values `{ ... }` (text format) encoded into the options bytes as protoc
 * encodes them. The result equals the FileDescriptorProto protoc writes
 * with --descriptor_set_out (json_name included).
 *
 * Validation: duplicate names (C++ scoping for enum values) and field
 * numbers, numbers out of range or in 19000-19999, reserved numbers and
 * names, overlapping ranges, unresolved, invisible (not imported) or
 * ambiguous names (innermost scope first, leading dot absolute, public
 * imports re-exported), map key types, proto3 rules (first enum value 0,
 * no required, no defaults, no extension ranges), extension numbers inside
 * the extendee's ranges, enum aliases without allow_alias, packed on
 * non-packable fields, json_name on extensions, enum default names. Errors
 * read "file.proto:line:column: what is wrong" in protoc's wording. */
#ifndef PC_PROTO_RESOLVE_H
#define PC_PROTO_RESOLVE_H

#include <stddef.h>

#include "base/arena.h"
#include "schema/descriptor.h"
#include "base/error.h"
#include "compiler/parse_internal.h"

/* Resolves 'file' in place, allocating new strings and option bytes in
 * 'arena'. 'deps' are the 'dep_count' files 'file' imports, directly or
 * not, each already resolved (order does not matter). 'later' is what
 * pc_ParseProto kept for after parsing (NULL or unset for none): reported
 * after every name-resolution error and before any custom option error
 * at a later position, as protoc orders them. Returns 1, or 0 with the
 * first error in 'err' ('file' is then partly rewritten: discard it). */
int pc_ResolveProto(pc_Arena *arena, pc_FileDesc *file, const pc_FileDesc *const *deps,
                    size_t dep_count, const pc_LaterError *later, pc_Error *err);

#endif
