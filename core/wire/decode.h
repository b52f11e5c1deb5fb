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
 * the C++ library counts (100 nested messages parse, 101 fail: "t.Rec.child:
 * messages nested deeper than 100 (max_depth) at offset 303"); the tag
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
#include "wire/wire.h"

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

/* The decoder's default max_depth: the message layer's (message.h). */
#define PC_WIRE_DEFAULT_DEPTH PC_MESSAGE_DEFAULT_DEPTH

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

/* -- Helpers the decoder shares with the bindings' direct decoders (Lua
 * tables straight from wire bytes, bindings/lua/lpc_plain.c), so both read
 * a value the same way. ---------------------------------------------------- */

/* The wire type a field of type 't' is written with (proto encoding spec,
 * "Message Structure"); groups: kPc_Wire_StartGroup. */
static inline pc_WireType pc_Decode_WireType(pc_FieldType t) {
  switch (t) {
  case kPc_Type_Double:
  case kPc_Type_Fixed64:
  case kPc_Type_Sfixed64: return kPc_Wire_Fixed64;
  case kPc_Type_Float:
  case kPc_Type_Fixed32:
  case kPc_Type_Sfixed32: return kPc_Wire_Fixed32;
  case kPc_Type_String:
  case kPc_Type_Bytes:
  case kPc_Type_Message: return kPc_Wire_Len;
  case kPc_Type_Group: return kPc_Wire_StartGroup;
  default: return kPc_Wire_Varint;
  }
}

/* Whether a repeated field of type 't' may be packed (numbers, enums, bools). */
static inline int pc_Decode_IsNumeric(pc_FieldType t) {
  return t != kPc_Type_String && t != kPc_Type_Bytes && t != kPc_Type_Message &&
         t != kPc_Type_Group;
}

/* Reads a tag at 'p' (pc_Wire_ReadTag's rules; one- and two-byte tags,
 * fields up to 2047, inline). NULL with '*st' set on a bad tag, '*num'
 * then holding the field number when it could be read. */
static inline const uint8_t *pc_Decode_ReadTag(const uint8_t *p, const uint8_t *end, uint32_t *num,
                                               pc_WireType *wt, pc_WireStatus *st) {
  uint32_t t;
  if (*p < 0x80) {
    t = *p++;
  } else if (end - p >= 2 && p[1] < 0x80) {
    t = (uint32_t)(p[0] & 0x7f) | (uint32_t)p[1] << 7;
    p += 2;
  } else {
    return pc_Wire_ReadTag(p, end, num, wt, st);
  }
  *num = t >> 3;
  *wt = (pc_WireType)(t & 7);
  if (*num == 0) {
    *st = kPc_WireStatus_FieldZero;
    return NULL;
  }
  if (*wt > kPc_Wire_Fixed32) {
    *st = kPc_WireStatus_BadWireType;
    return NULL;
  }
  return p;
}

/* Reads one value of numeric type 't' (its wire type, pc_Decode_WireType)
 * at 'p' into '*v' as its slot kind holds it (message.h: bool in 'b',
 * 32-bit types in 'u32'/'i32', ZigZag undone, 64-bit types and double in
 * 'u64'; an int32's varint truncated to 32 bits, as the C++ library does).
 * Returns the position after it, or NULL with '*st' set (Truncated,
 * VarintTooLong). */
static inline const uint8_t *pc_Decode_ReadNumber(const uint8_t *p, const uint8_t *end,
                                                  pc_FieldType t, pc_Value *v, pc_WireStatus *st) {
  switch (pc_Decode_WireType(t)) {
  case kPc_Wire_Fixed32:
    if (end - p < 4) {
      *st = kPc_WireStatus_Truncated;
      return NULL;
    }
    v->u32 = pc_Wire_LoadFixed32(p);
    return p + 4;
  case kPc_Wire_Fixed64:
    if (end - p < 8) {
      *st = kPc_WireStatus_Truncated;
      return NULL;
    }
    v->u64 = pc_Wire_LoadFixed64(p);
    return p + 8;
  default: break;
  }
  uint64_t u;
  p = pc_Wire_ReadVarint(p, end, &u, st);
  if (p == NULL) return NULL;
  switch (t) {
  case kPc_Type_Bool: v->b = u != 0; break;
  case kPc_Type_Int32:
  case kPc_Type_Enum:
  case kPc_Type_Uint32: v->u32 = (uint32_t)u; break;
  case kPc_Type_Sint32: v->i32 = pc_Wire_ZigZagDecode32((uint32_t)u); break;
  case kPc_Type_Sint64: v->i64 = pc_Wire_ZigZagDecode64(u); break;
  default: v->u64 = u; break;
  }
  return p;
}

/* Whether 'v' is a value of closed (proto2) enum field 'f' that its enum
 * does not define: the decoder keeps it as an unknown field. */
static inline int pc_Decode_EnumUnknown(const pc_FieldDef *f, int32_t v) {
  return f->type == kPc_Type_Enum && f->enumdef != NULL && f->enumdef->closed &&
         pc_EnumDef_FindByNumber(f->enumdef, v) == NULL;
}

/* Whether values of 'f' must be valid UTF-8: proto3 'string' fields. */
static inline int pc_Decode_ChecksUtf8(const pc_FieldDef *f) {
  return f->type == kPc_Type_String && f->file != NULL && f->file->syntax == kPc_Syntax_Proto3;
}

/* The regular field of 'm' numbered 'num', or NULL (extensions are not
 * looked up here). '*hint' (start at 0) makes input in field-number order
 * one comparison per field: the field after the last one found is tried
 * first, then a binary search over m->fields_by_number. */
static inline const pc_FieldDef *pc_Decode_FindField(const pc_MessageDef *m, uint32_t num,
                                                     uint32_t *hint) {
  uint32_t i = *hint;
  if (i < m->field_count && (uint32_t)m->fields_by_number[i]->number == num) {
    *hint = i + 1;
    return m->fields_by_number[i];
  }
  uint32_t lo = 0, hi = m->field_count;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    uint32_t n = (uint32_t)m->fields_by_number[mid]->number;
    if (n == num) {
      *hint = mid + 1;
      return m->fields_by_number[mid];
    }
    if (n < num)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

#endif
