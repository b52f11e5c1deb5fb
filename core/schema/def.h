/* Definitions: the schema pool and its immutable message, field, enum, oneof,
 * service and extension definitions.
 *
 * A pool is built only from resolved pc_FileDesc (core/schema/descriptor.h): every
 * type_name fully qualified with a leading dot and every field's 'type' set
 * (message, enum or group). pc_Pool_AddFile validates, builds the
 * definitions and the message layouts (core/message/message.h) and either adds the
 * whole file or nothing. Definitions never change once added; a frozen pool
 * refuses further files and may be read by several threads / Lua states.
 *
 * The structs below are public so the table-driven codec reads them
 * directly; treat every member as read-only. All strings are NUL-terminated
 * and live as long as the pool. */
#ifndef PC_DEF_H
#define PC_DEF_H

#include "base/arena.h"
#include "schema/descriptor.h"
#include "base/error.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pc_Pool pc_Pool;
typedef struct pc_FileDef pc_FileDef;
typedef struct pc_MessageDef pc_MessageDef;
typedef struct pc_FieldDef pc_FieldDef;
typedef struct pc_OneofDef pc_OneofDef;
typedef struct pc_EnumDef pc_EnumDef;
typedef struct pc_EnumValueDef pc_EnumValueDef;
typedef struct pc_ServiceDef pc_ServiceDef;
typedef struct pc_MethodDef pc_MethodDef;

/* How a field's value is stored in its slot (core/message/message.h), which also
 * fixes the slot's size (pc_Slot_Size). */
typedef enum {
  kPc_Slot_Bool = 0,    /* 1 byte: bool stored as uint8_t 0/1 */
  kPc_Slot_32 = 1,      /* 4 bytes: int32/sint32/sfixed32/enum (int32_t),
                           uint32/fixed32 (uint32_t), float */
  kPc_Slot_64 = 2,      /* 8 bytes: int64/sint64/sfixed64 (int64_t),
                           uint64/fixed64 (uint64_t), double */
  kPc_Slot_String = 3,  /* 16 bytes: pc_StringView (string, bytes) */
  kPc_Slot_Message = 4, /* pointer: pc_Message * (message, group), NULL unset */
  kPc_Slot_Array = 5,   /* pointer: pc_Array * (repeated), NULL empty */
  kPc_Slot_Map = 6      /* pointer: pc_Map * (map fields), NULL empty */
} pc_SlotKind;

/* A field's default as a value of its type (see pc_Value, message.h). */
typedef union {
  uint8_t b;
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  float f;
  double d;
  struct {
    const char *data;
    size_t size;
  } s;
} pc_DefaultValue;

struct pc_FieldDef {
  const char *name;      /* "x" */
  const char *full_name; /* "demo.Point.x"; extensions: "pkg.ext_name" */
  const char *json_name; /* as given, or protoc's default ("fooBar") */
  int32_t number;
  pc_FieldType type; /* never 0 in a pool */
  pc_Label label;
  uint32_t index; /* declaration order within its message (or scope) */
  /* Layout (message.h): where the value lives in a message's memory.
   * Extensions have no slot (offset 0); they sit in the message's
   * extension list. */
  pc_SlotKind slot;
  uint32_t offset;      /* byte offset of the slot */
  int32_t hasbit;       /* presence bit index, or -1 (see pc_Message_Has) */
  uint32_t case_offset; /* oneof members: offset of the uint32_t case slot
                           holding the set member's number; 0 otherwise */
  uint8_t is_map;       /* repeated map entry (slot kind Map) */
  uint8_t packed;       /* repeated scalar encoded packed */
  uint8_t has_presence; /* pc_Message_Has is meaningful (proto2 optional,
                           proto3 optional, message, oneof member, ext.) */
  uint8_t is_extension;
  uint8_t has_default; /* proto2 [default = ...] given */
  uint8_t proto3_optional;
  const pc_OneofDef *oneof;             /* real (not synthetic) oneof, or NULL */
  const pc_MessageDef *message;         /* message/group/map-entry type, or NULL */
  const pc_EnumDef *enumdef;            /* enum type, or NULL */
  const pc_MessageDef *containing;      /* owner; for an extension the extendee */
  const pc_MessageDef *extension_scope; /* extensions declared in a message */
  const pc_FileDef *file;
  pc_DefaultValue default_value; /* zero unless has_default (enums: the
                                    first value's number when not given) */
  const char *default_text;      /* descriptor's text form, or NULL */
};

/* Bytes one element of the slot kind takes: 1, 4, 8, 16 (a pc_StringView
 * of message/message.h: a pointer and a size) or a pointer. */
static inline size_t pc_Slot_Size(pc_SlotKind slot) {
  switch (slot) {
  case kPc_Slot_Bool: return 1;
  case kPc_Slot_32: return 4;
  case kPc_Slot_64: return 8;
  case kPc_Slot_String: return sizeof(const char *) + sizeof(size_t);
  default: return sizeof(void *);
  }
}

/* The slot kind of one element of 'f' (for repeated / map fields the
 * element's, not kPc_Slot_Array / Map). */
static inline pc_SlotKind pc_FieldDef_ElemSlot(const pc_FieldDef *f) {
  switch (f->type) {
  case kPc_Type_Bool: return kPc_Slot_Bool;
  case kPc_Type_Int32:
  case kPc_Type_Uint32:
  case kPc_Type_Sint32:
  case kPc_Type_Fixed32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Float:
  case kPc_Type_Enum: return kPc_Slot_32;
  case kPc_Type_String:
  case kPc_Type_Bytes: return kPc_Slot_String;
  case kPc_Type_Message:
  case kPc_Type_Group: return kPc_Slot_Message;
  default: return kPc_Slot_64;
  }
}

/* Element size of a repeated field's array (the element's slot size). */
static inline size_t pc_FieldDef_ElemSize(const pc_FieldDef *f) {
  return pc_Slot_Size(pc_FieldDef_ElemSlot(f));
}

struct pc_OneofDef {
  const char *name;
  const char *full_name;
  uint32_t index;
  const pc_MessageDef *containing;
  const pc_FieldDef **fields; /* declaration order */
  uint32_t field_count;
  uint32_t case_offset; /* offset of the uint32_t case slot (0 synthetic) */
  uint32_t slot_size;   /* bytes of the slot the members share: the widest
                           member's (0 synthetic) */
  uint8_t synthetic;    /* proto3 optional's oneof: members use hasbits */
};

/* How a walk over every field (the wire encoder) tells an absent field
 * without reading its pc_FieldDef (pc_FieldSlot.kind): a field outside a
 * oneof by its slot kind (the same values as pc_SlotKind; absent when its
 * hasbit is clear or, without one, when its slot is zero, empty or NULL),
 * a oneof member by its pc_FieldDef. */
typedef enum {
  kPc_Walk_Bool = 0,
  kPc_Walk_32 = 1,
  kPc_Walk_64 = 2,
  kPc_Walk_String = 3,
  kPc_Walk_Message = 4,
  kPc_Walk_Array = 5,
  kPc_Walk_Map = 6,
  kPc_Walk_Oneof = 7
} pc_WalkKind;

/* A field's layout in one compact record, for the walks that visit every
 * field of a message in number order (pc_MessageDef.slots_by_number). */
typedef struct {
  uint32_t offset;      /* the field's slot (its offset) */
  int32_t hasbit;       /* its presence bit, or -1 */
  int32_t number;       /* its number */
  uint32_t case_offset; /* a oneof member's case slot (pc_FieldDef.case_offset) */
  uint8_t type;         /* its pc_FieldType */
  uint8_t kind;         /* pc_WalkKind */
  uint8_t utf8;         /* a proto3 string: its value must be valid UTF-8 */
  const pc_FieldDef *field;
} pc_FieldSlot;

struct pc_MessageDef {
  const char *name;      /* "Point" */
  const char *full_name; /* "demo.Point" */
  const pc_FileDef *file;
  const pc_MessageDef *containing; /* enclosing message, or NULL */
  pc_Syntax syntax;
  const pc_FieldDef *fields; /* declaration order */
  uint32_t field_count;
  const pc_FieldDef **fields_by_number; /* ascending number, for the codec */
  const pc_FieldSlot *slots_by_number;  /* the same fields' layouts, compact */
  const pc_OneofDef *oneofs;
  uint32_t oneof_count;                 /* synthetic oneofs included (they come last) */
  const pc_RangeDesc *extension_ranges; /* end exclusive */
  uint32_t extension_range_count;
  uint8_t map_entry;
  uint8_t message_set; /* message_set_wire_format: its extensions travel as
                          MessageSet items (core/wire keeps those as unknown
                          bytes; core/text writes them so) */
  /* Layout: a message is 'size' bytes: the type word (offset 0, see
   * message.h), presence bits from byte 8 ('hasbit_count' bits), oneof case
   * slots, then field slots from the largest to the smallest. */
  uint32_t size;
  uint32_t hasbit_count;
  uint32_t index;          /* declaration order in its file (depth-first) */
  uint32_t required_count; /* proto2 `required` fields (the codec checks them) */
  uint32_t repeated_count; /* repeated fields, maps too: the containers a message holds */
};

struct pc_EnumValueDef {
  const char *name;
  const char *full_name; /* "demo.Color.RED" (enum's scope, as protobuf) */
  int32_t number;
};

struct pc_EnumDef {
  const char *name;
  const char *full_name;
  const pc_FileDef *file;
  const pc_MessageDef *containing;
  const pc_EnumValueDef *values; /* declaration order */
  uint32_t value_count;
  /* The values again, sorted for the lookups below: by number (equal
   * numbers in declaration order) and by name. */
  const pc_EnumValueDef **values_by_number;
  const pc_EnumValueDef **values_by_name;
  uint8_t closed; /* proto2: unknown numbers are not kept in the field */
};

struct pc_MethodDef {
  const char *name;
  const char *full_name; /* "pkg.Service.Method" */
  const pc_ServiceDef *service;
  const pc_MessageDef *input;
  const pc_MessageDef *output;
  uint8_t client_streaming, server_streaming;
};

struct pc_ServiceDef {
  const char *name;
  const char *full_name;
  const pc_FileDef *file;
  const pc_MethodDef *methods;
  uint32_t method_count;
};

struct pc_FileDef {
  const char *name;    /* "demo.proto" */
  const char *package; /* "" when none */
  pc_Syntax syntax;
  const pc_Pool *pool;
  const pc_FileDesc *desc;       /* the description it was built from (a deep
                                    copy owned by the pool) */
  const pc_MessageDef *messages; /* every message, nested included */
  uint32_t message_count;
  const pc_EnumDef *enums; /* every enum, nested included */
  uint32_t enum_count;
  const pc_FieldDef *extensions; /* every extension, nested included */
  uint32_t extension_count;
  const pc_ServiceDef *services;
  uint32_t service_count;
};

/* A new empty pool drawing memory from 'alloc' (NULL: pc_DefaultAlloc);
 * NULL when allocation fails. */
pc_Pool *pc_Pool_New(pc_Alloc *alloc, void *ud);

/* Frees the pool and every definition in it. NULL allowed. */
void pc_Pool_Free(pc_Pool *pool);

/* Adds one resolved file description. Validates it (unique file name and
 * full names, field numbers 1..2^29-1 outside 19000..19999 and unique per
 * message, every type_name present in this file or the pool with the kind
 * 'type' says, map entries well-formed, defaults parseable, extensions in an
 * extension range of their extendee, frozen pool refused), deep-copies it
 * and builds its definitions. Returns the new file, or NULL with 'err' set
 * and the pool unchanged. */
const pc_FileDef *pc_Pool_AddFile(pc_Pool *pool, const pc_FileDesc *file, pc_Error *err);

/* After this, pc_Pool_AddFile fails ("pool is frozen"). Idempotent. */
void pc_Pool_Freeze(pc_Pool *pool);
int pc_Pool_IsFrozen(const pc_Pool *pool);

/* Lookups by full name without a leading dot ("demo.Point"); NULL when
 * absent. */
const pc_FileDef *pc_Pool_FindFile(const pc_Pool *pool, const char *file_name);
const pc_MessageDef *pc_Pool_FindMessage(const pc_Pool *pool, const char *full_name);
const pc_EnumDef *pc_Pool_FindEnum(const pc_Pool *pool, const char *full_name);
const pc_ServiceDef *pc_Pool_FindService(const pc_Pool *pool, const char *full_name);
const pc_FieldDef *pc_Pool_FindExtension(const pc_Pool *pool, const char *full_name);

/* The extension of 'extendee' with field number 'number', or NULL. */
const pc_FieldDef *pc_Pool_FindExtensionByNumber(const pc_Pool *pool, const pc_MessageDef *extendee,
                                                 int32_t number);

/* The description a loaded file was built from, or NULL when no file has
 * that name. Valid as long as the pool. */
const pc_FileDesc *pc_Pool_FileDesc(const pc_Pool *pool, const char *file_name);

/* Number of files, and the i-th in the order they were added. */
size_t pc_Pool_FileCount(const pc_Pool *pool);
const pc_FileDef *pc_Pool_File(const pc_Pool *pool, size_t i);

/* Field lookups; NULL when absent. By name: 'len' bytes at 'name' (no NUL
 * needed). By number: binary search over fields_by_number. */
const pc_FieldDef *pc_MessageDef_FindFieldByNumber(const pc_MessageDef *m, int32_t number);
const pc_FieldDef *pc_MessageDef_FindFieldByName(const pc_MessageDef *m, const char *name,
                                                 size_t len);
const pc_FieldDef *pc_MessageDef_FindFieldByJsonName(const pc_MessageDef *m, const char *name,
                                                     size_t len);
const pc_OneofDef *pc_MessageDef_FindOneof(const pc_MessageDef *m, const char *name, size_t len);

/* Map entries: the key (number 1) and value (number 2) fields of a map
 * field's entry type. */
const pc_FieldDef *pc_FieldDef_MapKey(const pc_FieldDef *f);
const pc_FieldDef *pc_FieldDef_MapValue(const pc_FieldDef *f);

/* Enum values; NULL when absent. By number: the first value declared with
 * that number (aliases share numbers). Both are binary searches. */
const pc_EnumValueDef *pc_EnumDef_FindByName(const pc_EnumDef *e, const char *name, size_t len);
const pc_EnumValueDef *pc_EnumDef_FindByNumber(const pc_EnumDef *e, int32_t number);

const pc_MethodDef *pc_ServiceDef_FindMethod(const pc_ServiceDef *s, const char *name, size_t len);

#endif
