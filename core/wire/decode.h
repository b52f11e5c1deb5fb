/* Wire decoding: bytes into a slotted message (core/message/message.h).
 *
 * Table-driven over the message definitions: each field's value goes
 * straight into its slot; sub-messages, strings, arrays, maps, extensions
 * and unknown bytes are created in the caller's arena. Decoding MERGES into
 * the message, as the protobuf spec defines parsing: scalars and oneof
 * members take the last value seen, sub-messages seen twice merge, repeated
 * fields append (packed and unpacked chunks in any mix), map entries with a
 * missing key or value get defaults and a duplicate key keeps the last
 * entry, proto2 groups are read as groups. Unknown fields of every wire
 * type (unknown groups included) are kept verbatim, as are values of closed
 * (proto2) enums that the enum lacks and fields whose wire type does not
 * fit their declaration (as the C++ library does).
 *
 * Hostile input is normal input: every length is checked against what
 * remains before anything is allocated; nesting (sub-messages and groups,
 * known or unknown) stops at 'max_depth' levels below the root, counted as
 * the C++ library counts (100 nested messages parse, 101 fail); the tag
 * rules of core/wire/wire.h apply; proto3 'string' fields must be valid UTF-8.
 * Errors read "<subject>: <reason> at offset <n>", where the subject is the
 * field's full name ("t.Bin.text"), "<message> field <n>" for a field the
 * schema lacks, or the message's full name when no field number could be
 * read. */
#ifndef PC_DECODE_H
#define PC_DECODE_H

#include "base/arena.h"
#include "schema/def.h"
#include "base/error.h"
#include "message/message.h"

#include <stddef.h>

/* ORDER DECODESTATUS: pc_DecodeStatus_String follows it. */
typedef enum {
  kPc_DecodeStatus_Ok = 0,
  kPc_DecodeStatus_Malformed,      /* bad input; 'err' says where and why */
  kPc_DecodeStatus_OutOfMemory,    /* the arena's allocator failed */
  kPc_DecodeStatus_MissingRequired /* the input lacks a proto2 required field
                                      (pc_Message_CheckRequired's list) */
} pc_DecodeStatus;

const char *pc_DecodeStatus_String(pc_DecodeStatus s);

typedef struct {
  int max_depth;     /* levels of nesting allowed below the root; 0 means
                        PC_WIRE_DEFAULT_DEPTH (100); at most PC_MESSAGE_MAX_DEPTH
                        (1000, core/message/message.h; larger values mean it) */
  int alias;         /* non-zero: string and bytes values point into the input
                        instead of being copied, so the input must outlive the
                        message (unknown bytes are always copied) */
  int partial;       /* non-zero: do not check proto2 required fields */
  int no_extensions; /* non-zero: fields in extension ranges stay unknown
                        fields, byte for byte in arrival order, as for a
                        reader that knows no extensions (what protoc keeps
                        of custom options in a FileDescriptorProto) */
} pc_DecodeOptions;

/* Decodes the 'size' bytes at 'buf' into 'msg' (of type 'm', merging into
 * what it holds), allocating from 'a'. 'opts' may be NULL (defaults).
 * Unless opts->partial, a result with a proto2 required field unset
 * anywhere fails with kPc_DecodeStatus_MissingRequired and 'err' lists
 * every missing field (pc_Message_CheckRequired); input that touches no
 * type with required fields skips the check.
 * On failure 'msg' holds whatever was decoded before the error (valid, all
 * in 'a'), and 'err' (may be NULL) the reason. */
pc_DecodeStatus pc_Decode(const char *buf, size_t size, pc_Message *msg, const pc_MessageDef *m,
                          pc_Arena *a, const pc_DecodeOptions *opts, pc_Error *err);

#endif
