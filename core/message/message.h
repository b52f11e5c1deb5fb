/* Messages: slotted instances laid out by their pc_MessageDef.
 *
 * A message is 'def->size' bytes of memory:
 *   offset 0        one word naming the type: its pc_MessageDef * with bit 0
 *                   set, until the message gets unknown bytes or
 *                   extensions; then its pc_MessageInternal * (bit 0 clear),
 *                   whose 'def' names the type (pc_Message_Def reads it: a
 *                   binding finds the type of a block it is handed)
 *   offset 8        presence bits (bit i of byte 8 + i/8), one per field
 *                   whose pc_FieldDef.hasbit >= 0
 *   then            one uint32_t case slot per real oneof (the set member's
 *                   field number, 0 when none); members share one slot
 *   then            field slots, largest first (pc_FieldDef.offset, .slot)
 * Slot contents by pc_SlotKind: Bool uint8_t, 32 int32_t/uint32_t/float,
 * 64 int64_t/uint64_t/double, String pc_StringView, Message pc_Message *,
 * Array pc_Array *, Map pc_Map *. An empty message is a zeroed block with
 * the type word set (pc_Message_New, pc_Message_Init).
 *
 * Memory: everything a message points to (strings, sub-messages, arrays,
 * maps, unknown bytes, extensions) is created in a pc_Arena the caller
 * names; the core never frees a part of a message (arenas free wholesale).
 * A message may point into memory owned by others (the Lua binding keeps
 * those owners alive); the core only reads through such pointers.
 * Nothing here allocates except the functions taking a pc_Arena, which
 * return NULL / 0 on allocation failure leaving the message as it was. */
#ifndef PC_MESSAGE_H
#define PC_MESSAGE_H

#include "base/arena.h"
#include "schema/def.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef void pc_Message;

typedef struct {
  const char *data; /* not NUL-terminated in general; may be NULL if size 0 */
  size_t size;
} pc_StringView;
_Static_assert(sizeof(pc_StringView) == sizeof(const char *) + sizeof(size_t),
               "pc_Slot_Size (schema/def.h) gives a string slot this size");

/* One value of any field type (what a slot, an array element, a map key or
 * value, or an extension holds). */
typedef union {
  uint8_t b;
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  float f;
  double d;
  pc_StringView s;
  pc_Message *m;
  struct pc_Array *a;
  struct pc_Map *map;
} pc_Value;

/* A repeated field: 'size' elements of pc_Slot_Size(slot) bytes each
 * ('data' has room for 'cap'). Elements are stored as the field's slot kind
 * (messages as pc_Message *). */
typedef struct pc_Array {
  void *data;
  size_t size, cap;
} pc_Array;

/* A map field: entries in insertion order, indexed by a hash of the key. */
typedef struct pc_MapEntry {
  pc_Value key, value;
} pc_MapEntry;

typedef struct pc_Map {
  pc_MapEntry *entries; /* 'size' live entries */
  size_t size, cap;
  uint32_t *index; /* open addressing, 'index_cap' slots: entry + 1, 0 free */
  size_t index_cap;
} pc_Map;

/* An extension's value in a message ('value' as a slot of the extension's
 * kind; repeated extensions hold a pc_Array *). */
typedef struct {
  const pc_FieldDef *field;
  pc_Value value;
} pc_Extension;

/* What offset 0 points to once a message has unknown fields or
 * extensions. */
typedef struct pc_MessageInternal {
  const pc_MessageDef *def; /* the message's type (offset 0 held it before) */
  char *unknown;            /* raw wire bytes of unknown fields, in arrival order */
  size_t unknown_size, unknown_cap;
  pc_Extension *ext; /* sorted by field number */
  size_t ext_count, ext_cap;
} pc_MessageInternal;

/* -- Instances ----------------------------------------------------------- */

/* A new empty message of type 'm' in 'a'; NULL on allocation failure. */
pc_Message *pc_Message_New(const pc_MessageDef *m, pc_Arena *a);

/* Turns 'def->size' bytes at 'mem' into an empty message (zeroes them and
 * sets the type word). */
void pc_Message_Init(const pc_MessageDef *m, void *mem);

/* The type of a message (from its offset-0 word; see the layout above). */
static inline const pc_MessageDef *pc_Message_Def(const pc_Message *msg) {
  const char *w;
  memcpy(&w, msg, sizeof(void *));
  if ((uintptr_t)w & 1) return (const pc_MessageDef *)(const void *)(w - 1);
  return ((const pc_MessageInternal *)(const void *)w)->def;
}

/* Slot address of a regular (non-extension) field. */
static inline void *pc_Message_Slot(pc_Message *msg, const pc_FieldDef *f) {
  return (char *)msg + f->offset;
}

/* Whether 'f' is set: hasbit / oneof case / non-NULL message pointer;
 * repeated and map fields: non-empty; proto3 implicit-presence scalars:
 * non-zero (strings: non-empty; floats: bit pattern non-zero, so -0.0
 * counts). Extensions: present in the extension list. */
int pc_Message_Has(const pc_Message *msg, const pc_FieldDef *f);

/* The value of 'f', or its default when unset (proto2 default, enum first
 * value, zero / empty / NULL). Repeated and map fields: the pointer (NULL
 * when empty). Extensions too. */
pc_Value pc_Message_Get(const pc_Message *msg, const pc_FieldDef *f);

/* Stores 'v' into a regular field's slot and marks it present (hasbit, or
 * the oneof case, which drops whatever member was set). Never allocates;
 * strings and messages are stored by pointer. For repeated and map fields
 * 'v' is the pc_Array * / pc_Map *. */
void pc_Message_Set(pc_Message *msg, const pc_FieldDef *f, pc_Value v);

/* Clears one field (regular or extension) back to unset. */
void pc_Message_ClearField(pc_Message *msg, const pc_FieldDef *f);

/* Clears every field, unknown bytes and extensions (memory stays in its
 * arena). */
void pc_Message_Clear(pc_Message *msg, const pc_MessageDef *m);

/* The set member of oneof 'o', or NULL. */
const pc_FieldDef *pc_Message_WhichOneof(const pc_Message *msg, const pc_OneofDef *o);

/* -- Containers ---------------------------------------------------------- */

/* The field's array / map, created empty in 'a' when absent (and stored in
 * the slot); NULL on allocation failure. Extensions included. */
pc_Array *pc_Message_MutableArray(pc_Message *msg, const pc_FieldDef *f, pc_Arena *a);
pc_Map *pc_Message_MutableMap(pc_Message *msg, const pc_FieldDef *f, pc_Arena *a);

/* A new empty array / map in 'a'; NULL on failure. */
pc_Array *pc_Array_New(pc_Arena *a);
pc_Map *pc_Map_New(pc_Arena *a);

/* Makes room for 'size' elements of 'elem' bytes (growing 'data' in 'a'
 * when needed, new elements zeroed) and sets arr->size; 0 on failure. */
int pc_Array_Resize(pc_Array *arr, size_t size, size_t elem, pc_Arena *a);

/* Appends one element (copied from the first 'elem' bytes of 'v'); 0 on
 * failure. */
int pc_Array_Append(pc_Array *arr, const pc_Value *v, size_t elem, pc_Arena *a);

/* Element 'i' (0-based, i < size) as a pc_Value of slot kind 'slot'. */
pc_Value pc_Array_Get(const pc_Array *arr, size_t i, pc_SlotKind slot);
void pc_Array_Set(pc_Array *arr, size_t i, pc_SlotKind slot, pc_Value v);

/* Map keys are compared by their slot kind 'kslot' (Bool, 32, 64 as the
 * integer bits, String by bytes). */
pc_Value *pc_Map_Find(const pc_Map *map, pc_SlotKind kslot, pc_Value key);

/* Inserts or replaces; returns the stored entry's value, or NULL on
 * allocation failure (map unchanged). */
pc_Value *pc_Map_Set(pc_Map *map, pc_SlotKind kslot, pc_Value key, pc_Value value, pc_Arena *a);

/* pc_Map_Set of a key the caller knows is not in the map (without looking
 * it up first: a key met twice would be two entries). */
pc_Value *pc_Map_Insert(pc_Map *map, pc_SlotKind kslot, pc_Value key, pc_Value value, pc_Arena *a);

/* Removes every entry, keeping the storage. NULL allowed. */
void pc_Map_Clear(pc_Map *map);

/* Removes 'key' if present (the last entry takes its place). Returns 1 when
 * removed. */
int pc_Map_Delete(pc_Map *map, pc_SlotKind kslot, pc_Value key);

/* Puts pointers to the map's entries into 'out' (room for map->size) in
 * key order: false before true, integers by value (signed or unsigned as
 * 'ktype', the key's field type, says), strings by their bytes. The order
 * of deterministic serialization (wire/encode.h) and of JSON output. */
void pc_Map_SortEntries(const pc_Map *map, pc_FieldType ktype, const pc_MapEntry **out);

/* Room pc_Map_ShowKey needs. */
#define PC_MAP_KEY_SHOWN 80

/* Map key 'k' of key field 'kf' as error paths show it, into 'buf'
 * (PC_MAP_KEY_SHOWN bytes): ["text"] for a string or bytes key, as a Lua
 * literal shows it ('"' and '\' escaped, control bytes, NUL and bytes that
 * are not UTF-8 as \ddd; cut with "..." once it takes 64 bytes), [n] for a
 * number, [true] or [false]. Returns 'buf'. */
const char *pc_Map_ShowKey(char *buf, const pc_FieldDef *kf, pc_Value k);

/* -- Unknown fields and extensions --------------------------------------- */

/* Appends raw wire bytes (whole fields) to the unknown bytes; 0 on
 * failure. */
int pc_Message_AddUnknown(pc_Message *msg, const char *data, size_t size, pc_Arena *a);

/* The unknown bytes (NULL and 0 when none). */
const char *pc_Message_GetUnknown(const pc_Message *msg, size_t *size);

void pc_Message_DiscardUnknown(pc_Message *msg);

/* The extension's value cell, or NULL when not set. */
const pc_Value *pc_Message_GetExtension(const pc_Message *msg, const pc_FieldDef *ext);

/* The extension's value cell, added zeroed when absent (repeated: with an
 * empty array from 'a'); NULL on failure. The caller writes the value. */
pc_Value *pc_Message_MutableExtension(pc_Message *msg, const pc_FieldDef *ext, pc_Arena *a);

/* Extensions set on the message, sorted by field number (for encoders). */
const pc_Extension *pc_Message_Extensions(const pc_Message *msg, size_t *count);

/* -- Whole messages ------------------------------------------------------ */

/* Copies 'size' bytes into 'a' as a string view; {NULL,0} data is fine.
 * Returns 0 on failure. */
int pc_StringView_Copy(pc_StringView *out, const char *data, size_t size, pc_Arena *a);

/* Protobuf merge of 'src' into 'dst' (both of type 'm'): set scalars and
 * strings overwrite, messages merge recursively, repeated fields append,
 * map entries replace by key, unknown bytes append, extensions merge.
 * Everything new is copied into 'a' (nothing of 'src' is shared). 0 on
 * allocation failure (dst then holds part of src, still valid). */
int pc_Message_Merge(pc_Message *dst, const pc_Message *src, const pc_MessageDef *m, pc_Arena *a);

/* Merges one field (regular or extension) of 'src' into 'dst' with the
 * rules of pc_Message_Merge; does nothing when 'src' does not have it. */
int pc_Message_MergeField(pc_Message *dst, const pc_Message *src, const pc_FieldDef *f,
                          pc_Arena *a);

/* A deep copy of 'src' in 'a', or NULL. */
pc_Message *pc_Message_Clone(const pc_Message *src, const pc_MessageDef *m, pc_Arena *a);

/* Value equality: same presence and values for every field (floats by
 * value, NaN unequal), maps regardless of order, same extensions, same
 * unknown bytes. */
int pc_Message_Equal(const pc_Message *a, const pc_Message *b, const pc_MessageDef *m);

/* The deepest nesting protocall handles: levels of sub-messages below the
 * root (the root is level 0). The decoder's max_depth may not exceed it
 * (core/wire/decode.h; 100 by default), the encoder refuses deeper messages
 * (core/wire/encode.h), pc_Message_Contains answers 2 past it, and the
 * recursive walks (merge, clone, equality, required fields) stay within
 * what a 1 MiB thread stack holds at this depth (core/wire/depth_test.c
 * runs them all on such a thread). So whatever decodes also re-encodes,
 * merges, clones, compares and can be assigned. */
#define PC_MESSAGE_MAX_DEPTH 1000

/* The nesting reading allows unless told otherwise, in the same levels:
 * the protobuf C++ library's default recursion limit (100 nested messages
 * parse, 101 fail). The binary decoder and the JSON reader both take it
 * by default (their max_depth raises it up to PC_MESSAGE_MAX_DEPTH); what
 * builds or writes messages (construct, encode, the JSON writer) is bound
 * by PC_MESSAGE_MAX_DEPTH alone, as protobuf's serializers by none, so a
 * message read with a raised max_depth can be written again. */
#define PC_MESSAGE_DEFAULT_DEPTH 100

/* What pc_Message_Walk calls on each message it meets ('msg', of type
 * 'm'), with the walk's 'ud': 0 to go on, a positive value to stop the
 * walk, which then returns that value. */
typedef int pc_MessageVisitFn(const pc_Message *msg, const pc_MessageDef *m, void *ud);

/* Calls 'visit' on 'msg' (of type 'm') and on every message reachable
 * from it, through sub-messages, repeated messages, map values and
 * extensions: depth first, each message before what it holds (its regular
 * fields in the order of m->fields, then its extensions). Returns the
 * first non-zero value 'visit' returns, or -1 as soon as the walk meets a
 * message deeper than 'max_depth' levels below 'msg' (clamped to
 * 0..PC_MESSAGE_MAX_DEPTH; that message is not visited), stopping there;
 * 0 when it visited everything. pc_Message_Contains is one such walk; the
 * Lua binding's pc.merge checks its source with one (does it hold the
 * destination, or a message the merge writes into). */
int pc_Message_Walk(const pc_Message *msg, const pc_MessageDef *m, int max_depth,
                    pc_MessageVisitFn *visit, void *ud);

/* Whether 'needle' is reachable from 'msg' (msg itself included), through
 * sub-messages, repeated messages, map values and extensions: 1 when it is,
 * 0 when not, 2 when 'msg' nests deeper than PC_MESSAGE_MAX_DEPTH (so the
 * answer is unknown; a walk of pc_Message_Walk's order, so 1 when 'needle'
 * comes first). The Lua binding refuses an assignment that would make a
 * message contain itself. */
int pc_Message_Contains(const pc_Message *msg, const pc_MessageDef *m, const pc_Message *needle);

/* As pc_Message_Contains, answering 2 as soon as 'msg' nests deeper than
 * 'max_depth' levels (clamped to 0..PC_MESSAGE_MAX_DEPTH): the same walk
 * checks that a message stored one level below a parent keeps the parent
 * within PC_MESSAGE_MAX_DEPTH (max_depth PC_MESSAGE_MAX_DEPTH - 1). */
int pc_Message_ContainsWithin(const pc_Message *msg, const pc_MessageDef *m,
                              const pc_Message *needle, int max_depth);

/* -- Required fields (proto2) --------------------------------------------- */

/* Checks that every proto2 `required` field of 'msg' and of every message
 * it holds (sub-messages, repeated messages, map values, extensions; down
 * to PC_MESSAGE_MAX_DEPTH) is set. Returns 0 when all are. Otherwise, with
 * 'err' NULL, returns non-zero at the first missing field; with 'err',
 * returns how many are missing and writes "missing required fields:
 * r.Req.inner.id, r.Req.name" naming each by its path from the root type
 * (".name" per field, "[i]" from 0 in repeated fields, "[\"key\"]" or
 * "[n]" in maps, ".(pkg.ext)" for extensions; a list too long for
 * PC_ERROR_MAX ends "..., (N in all)"). A type with no required field only
 * costs the walk over the messages it holds. */
size_t pc_Message_CheckRequired(const pc_Message *msg, const pc_MessageDef *m, pc_Error *err);

#endif
