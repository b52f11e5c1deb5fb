/* The .proto parser: source text -> pc_FileDesc, as protoc's parser does.
 *
 * Covers syntax proto2/proto3 (an `edition` gets "editions are not supported
 * yet"), package, import/public/weak, messages, enums, oneofs, map fields
 * (the XxxEntry nested type synthesized as protoc does), proto3 optional
 * (synthetic oneofs "_name" after the real ones), groups, extend blocks,
 * extension ranges, reserved numbers/ranges/names, services with streaming,
 * every literal form, and options at every level.
 *
 * Output is the parser half of protoc's work: type references stay as
 * written (type_name relative, type 0 for message/enum references, extendee
 * and method types as written), and must go through pc_ResolveProto
 * (compiler/resolve_internal.h) before use. Standard options (java_package, packed,
 * deprecated, allow_alias, ...) are checked, decoded into the pc_*Desc
 * fields and encoded into the options bytes in field-number order.
 * Options naming an extension, `(pkg.ext).field = value`, need the
 * extension's type: they are kept, as in protoc, as uninterpreted_option
 * (field 999) entries after the standard ones, each carrying the line and
 * column of its name (fields 1000, 1001) and of its value (1002, 1003);
 * pc_ResolveProto replaces them with the encoded values. json_name is filled for every field
 * (explicit, or pc_JsonName's default, as protoc writes descriptor sets).
 * Default values take protoc's text form (integers in decimal, floats
 * through "%.15g"/"%.17g", bytes C-escaped, enum value names as written). */
#ifndef PC_PROTO_PARSE_H
#define PC_PROTO_PARSE_H

#include <stddef.h>

#include "base/arena.h"
#include "schema/descriptor.h"
#include "base/error.h"

/* Parses the 'len' bytes at 'src', the file known by import name 'name'
 * (say "google/api/http.proto"; used as pc_FileDesc.name and in errors),
 * into a pc_FileDesc allocated, with all it points to, in 'arena'. Returns
 * it, or NULL with "name:line:column: what is wrong" in 'err' (protoc's
 * wording) on a syntax error or allocation failure ("out of memory"). The
 * arena keeps whatever was allocated before a failure.
 *
 * An error protoc reports only once the file has parsed and its names are
 * resolved (a standard option that is unknown, set twice or given a value of
 * the wrong kind) does not stop parsing: the first one goes to 'later'
 * (its error initialized by the caller) with its position, the option is
 * left out, and the file is returned. pc_ResolveProto reports it where protoc
 * would: after name resolution (before it when 'early'), and before the
 * first custom option that fails at a later position. */
typedef struct {
  pc_Error error; /* set when there is one */
  int line, column;
  int file_level;    /* a file option's (protoc interprets those last) */
  int early;         /* protoc finds it before names resolve ("()" as an option name) */
  pc_Error validate; /* the first error protoc finds only when it validates the
                        built file, last of all (a group in proto3) */
} pc_LaterError;

pc_FileDesc *pc_ParseProto(pc_Arena *arena, const char *name, const char *src, size_t len,
                           pc_Error *err, pc_LaterError *later);

/* protoc's text form of a double default value ("%.15g", or "%.17g" when
 * that does not round-trip; "inf", "-inf", "nan") into 'out' (32 bytes). */
void pc_FormatDouble(double v, char out[32]);

/* As pc_FormatDouble for a float ("%.6g" / "%.9g"). */
void pc_FormatFloat(float v, char out[32]);

#endif
