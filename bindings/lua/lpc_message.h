/* Private to bindings/lua: the internals of message objects, shared by the
 * message files (lpc_anchor.c, lpc_scalar.c, lpc_message.c,
 * lpc_construct.c, lpc_message_ops.c) and the files that read or write
 * message memory themselves (lpc_table.c: the Lookup; lpc_plain.c: scalar
 * values). Everything else goes through lpc.h.
 *
 * How message memory is owned:
 *   message, standalone one block: the message's slots ARE the userdata's
 *                       memory (def->size bytes); user value 1, its refs
 *                       table, when the type can hold references
 *                       (lpc_standalone_uv), else none; a flat type's
 *                       decode (lpc_wire.c) leaves there the input string
 *                       its string fields point into, which lpc_push_refs
 *                       moves into the refs table (under the message's own
 *                       address) when one is first needed.
 *   message, view       userdata lpc_View {pc_Message *, the Lookup of its
 *                       type (its __index's upvalue 1, at hand without the
 *                       API call)}, user value 1: its anchor, the
 *                       object owning the memory (an Arena or a standalone
 *                       message); then one user value per sub-message,
 *                       repeated and map field (lpc_view_uv): the object last
 *                       read from it (the sub-message's view or the object
 *                       assigned there, the container). A view is the one
 *                       object of its message, so what it keeps is what the
 *                       anchor's refs would, reached through the view alone.
 *   "protocall.Arena"   userdata lpc_ArenaBox; user value 1 its refs table;
 *                       user value 2, set by its __gc, its group's token.
 *                       Its __gc does not free the arena: that waits until
 *                       the collector frees the box, so that no finalizer,
 *                       and no view a finalizer kept, reads freed memory
 *                       (lpc_anchor.c, "Deferred arena frees").
 * A standalone message is its own anchor. What a message's memory points to
 * that the anchor's arena does not own is kept alive from a per-anchor refs
 * table: the anchor's user value 1 (an Arena's, a standalone message's), or
 * for standalone messages of numbers-only types, which have no user value,
 * an entry in an ephemeron table in the registry (lpc_push_refs). */
#ifndef LPC_MESSAGE_H
#define LPC_MESSAGE_H

#include "lpc.h"

#define LPC_ARENA_MT    "protocall.Arena"
#define LPC_REPEATED_MT "protocall.Repeated"
#define LPC_MAP_MT      "protocall.Map"

/* Instance metatables say which kind of object they serve. */
enum { kLpc_Standalone = 1, kLpc_View = 2 };

extern char lpc_refs_key; /* registry: ephemeron table anchor -> refs table */
/* registry: LPC_REPEATED_MT's and LPC_MAP_MT's tables, under these
 * addresses too (new_container, lpc_message.c: quicker than by name) */
extern char lpc_repeated_mt_key, lpc_map_mt_key;
/* registry: LPC_ARENA_MT's table under this address too (lpc_new_arena) */
extern char lpc_arena_mt_key;
/* Instance metatable field: a light userdata of the type's def with the
 * kind in its two low bits (a def is aligned to at least 4 bytes), so one
 * lookup gives both (lpc_to_message). */
extern char lpc_def_key;

/* The "protocall.Arena" userdata. */
typedef struct {
  pc_Arena *arena;
  size_t reported; /* bytes already reported to the collector */
  int queued;      /* its __gc ran: the arena waits in the Reaper's list (lpc_anchor.c) */
  size_t made;     /* made in a finalizer, its __gc not run: 1 + its index in the Reaper's 'made' */
} lpc_ArenaBox;

typedef struct lpc_Lookup lpc_Lookup;

/* A repeated or map container: the field 'f' of the message 'msg'. */
typedef struct {
  pc_Message *msg;
  const pc_FieldDef *f;
  int uv;                    /* lpc_view_uv(f), or -1 until needed */
  int kind;                  /* the kind of its message object (user value 1), or 0 until needed */
  const lpc_Lookup *elem_lk; /* repeated messages: their views' Lookup, or NULL until needed */
} lpc_Container;

/* -- The per-type field lookup ----------------------------------------------
 * Without allocation: open addressing keyed by the address of the field
 * name's interned Lua string (short strings are interned, so a key string
 * read from Lua code is that very string). The strings are kept alive by
 * the userdata's user value. The Lookup is this state's (a frozen pool's
 * defs are shared by several states): __index and __newindex have it as
 * their upvalue, the Type in its lpc_TypeBox. The field access paths are
 * inlined into each metamethod (LPC_INLINE; the kind of message a constant
 * there). */

/* How a plain slot is read without the general path. */
enum {
  kLpc_Read_Other,
  kLpc_Read_U32,
  kLpc_Read_I32,
  kLpc_Read_I64,
  kLpc_Read_F64,
  kLpc_Read_F32,
  kLpc_Read_Bool,
  kLpc_Read_String, /* a string or bytes slot without presence or a default */
  kLpc_Read_Oneof,  /* a oneof member (not repeated) whose default is zero: its case tested */
  /* kLpc_Read_OneofBase + U32 .. String: such a member of a plain kind
   * (not a message; under LuaJIT not 64-bit), read as that kind from its
   * slot when it is the member set, else as zero */
  kLpc_Read_OneofBase = 16
};

/* How a plain slot takes a Lua value without the general path: integers
 * range-checked here, the rest (enums, strings, messages, presence) through
 * lpc_set_field. */
enum {
  kLpc_Write_Other,
  kLpc_Write_U32,
  kLpc_Write_I32,
  kLpc_Write_I64,
  kLpc_Write_F64,
  kLpc_Write_F32,
  kLpc_Write_Bool
};

typedef struct {
  const void *key; /* the name's TString, as lua_topointer gives it */
  uint32_t offset; /* the field's offset, for the direct read and write */
  uint8_t read;    /* kLpc_Read_*: a plain or string slot read directly, or kLpc_Read_Other */
  uint8_t write;   /* kLpc_Write_* */
  uint8_t uv;      /* lpc_view_uv of the field (< LPC_VIEW_MAX_UV) */
  uint8_t utf8;    /* a proto3 string field: its values must be UTF-8 */
} lpc_LookupEntry;

struct lpc_Lookup {
  const pc_MessageDef *def;
  int standalone_uv; /* lpc_standalone_uv(def), for T{...} */
  int view_uvs;      /* lpc_view_uvs(def): how many user values its views have */
  int tree;          /* a field holds messages: T{...} tries lpc_table_message first */
  size_t mask;
  unsigned shift;             /* hash: (address >> shift) & mask */
  const pc_FieldDef **fields; /* fields[i] is the field of e[i] (after e) */
  /* subs[uv] (after fields; uv 2..view_uvs): the Lookup of the views held
   * by the field whose lpc_view_uv is 'uv' (its sub-messages, elements or
   * map values), set with [uv] of this Lookup's own views' metatable,
   * which keeps it alive (push_child_mt, lpc_message.c); NULL before. */
  const lpc_Lookup **subs;
  lpc_LookupEntry e[1];
};

/* A view (see the top of this file): its message first, as a standalone
 * message's block is its message, so lpc_msg_at1 and the LuaJIT accessors
 * read either through the first word. */
typedef struct {
  pc_Message *msg;
  const lpc_Lookup *lk;
} lpc_View;

/* The kLpc_Write_* of a 32-bit, floating or bool field type; kLpc_Write_Other for
 * enums and 64-bit types (whose callers decide), and the rest. */
static inline uint8_t lpc_scalar_write_kind(pc_FieldType t) {
  switch (t) {
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: return kLpc_Write_U32;
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32: return kLpc_Write_I32;
  case kPc_Type_Double: return kLpc_Write_F64;
  case kPc_Type_Float: return kLpc_Write_F32;
  case kPc_Type_Bool: return kLpc_Write_Bool;
  default: return kLpc_Write_Other;
  }
}

/* How lpc_store_plain stores a value of field type 't' in a plain slot
 * (kLpc_Write_Other: the general path; enums, and 64-bit under LuaJIT,
 * whose cdata goes through C). Fields and list elements share it. */
static inline uint8_t lpc_type_write_kind(pc_FieldType t) {
  switch (t) {
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: return LPC_LUAJIT ? kLpc_Write_Other : kLpc_Write_I64;
  default: return lpc_scalar_write_kind(t);
  }
}

static inline int lpc_plain_slot(const pc_FieldDef *f) {
  return f->slot <= kPc_Slot_64 && f->hasbit < 0 && f->case_offset == 0 && !f->is_extension &&
         f->label != kPc_Label_Repeated;
}

/* Strings are separate allocations: the address bits above the
 * alignment tell them apart. Each type picks the shift (and table size)
 * that puts every name in its first slot when it can (see make_lookup). */
static inline size_t lpc_hash_ptr(const void *p, unsigned shift) {
  return (size_t)((uintptr_t)p >> shift);
}

/* The entry of the name at 'p', probing past its first slot; NULL when
 * absent (lpc_message.c). */
const lpc_LookupEntry *lpc_probe_more(const lpc_Lookup *lk, const void *p, size_t i);

/* The entry of the interned name string at 'p' in the Lookup, or NULL. */
LPC_INLINE const lpc_LookupEntry *lpc_probe(const lpc_Lookup *lk, const void *p) {
  size_t i = lpc_hash_ptr(p, lk->shift) & lk->mask;
  if (lk->e[i].key == p) return &lk->e[i];
  return lpc_probe_more(lk, p, i);
}

static inline const pc_FieldDef *lpc_entry_field(const lpc_Lookup *lk, const lpc_LookupEntry *e) {
  return lk->fields[e - lk->e];
}

/* The message memory of the object at 1 (a standalone message's block or
 * the memory a view points to); NULL when arg 1 is no userdata. The hot
 * metamethods (a message's or a container's __index, a message's
 * __newindex, a Type's __call) check their self no further: lpc_check_self's
 * metatable compare costs a third of a field read and 5% of a small
 * T{...} (callgrind), and the VM calls them with their own objects alone;
 * the debug library can still hand them a userdata of another kind. */
LPC_INLINE char *lpc_msg_at1(lua_State *L, int kind) {
  void *p = lua_touserdata(L, 1);
  return kind == kLpc_Standalone || p == NULL ? (char *)p : *(char **)p;
}

/* Stores the value at 'v' into the plain slot of 'e' when it is exactly
 * what the slot takes (an integer in range, a number, a boolean): 1 when
 * stored, 0 when the general path must check it (and raise). */
LPC_INLINE int lpc_store_plain(lua_State *L, char *msg, const lpc_LookupEntry *e, int v) {
  char *p = msg + e->offset;
  switch (e->write) {
  case kLpc_Write_U32:
  case kLpc_Write_I32:
  case kLpc_Write_I64: {
    if (!lua_isinteger(L, v)) return 0;
    lua_Integer i = lua_tointegerx(L, v, NULL);
    if (e->write == kLpc_Write_I64) {
      int64_t x = (int64_t)i;
      memcpy(p, &x, 8);
    } else if (e->write == kLpc_Write_U32) {
      if (i < 0 || i > (lua_Integer)UINT32_MAX) return 0;
      uint32_t x = (uint32_t)i;
      memcpy(p, &x, 4);
    } else {
      if (i < INT32_MIN || i > INT32_MAX) return 0;
      int32_t x = (int32_t)i;
      memcpy(p, &x, 4);
    }
    return 1;
  }
  case kLpc_Write_F64:
  case kLpc_Write_F32: {
    if (lua_type(L, v) != LUA_TNUMBER) return 0;
    lua_Number d = lua_tonumberx(L, v, NULL);
    if (e->write == kLpc_Write_F64) {
      double x = (double)d;
      memcpy(p, &x, 8);
    } else {
      float x = (float)d;
      memcpy(p, &x, 4);
    }
    return 1;
  }
  case kLpc_Write_Bool:
    if (!lua_isboolean(L, v)) return 0;
    *p = (char)lua_toboolean(L, v);
    return 1;
  default: return 0;
  }
}

/* -- Arenas, anchors and errors (lpc_anchor.c) ------------------------------
 * A function without a comment here has it where it is defined. */
/* Makes the Arena metatable's __gc (a closure over this state's Reaper);
 * once per state (lpc_open_message_ops). */
void lpc_push_arena_gc(lua_State *L);
/* Pushes the Pool metatable's __gc, a closure over the Reaper of the
 * Arena's __gc at 'arena_gc_idx': an owned pool's free waits as an
 * arena's does (lpc_anchor.c, "Deferred arena frees"); the box is made
 * with one user value for its group's token. */
void lpc_push_pool_gc(lua_State *L, int arena_gc_idx);
_Noreturn void lpc_msg_error(lua_State *L, const char *fmt, ...);
_Noreturn void lpc_nomem(lua_State *L); /* lpc_msg_error "not enough memory" */
/* Pushes the string at 'idx' quoted for an error message's %s as a Lua
 * literal's text (pc_Error_Quote, kPc_Quote_Lua: '"', '\\', control bytes
 * and bytes that begin no UTF-8 character escaped, "\0", "\255"; cut with
 * "..." once it takes 64 bytes), and returns it. */
const char *lpc_push_shown(lua_State *L, int idx);
/* As lpc_pace_arena, for the box at hand. */
void lpc_pace(lua_State *L, lpc_ArenaBox *h);
int lpc_push_anchor(lua_State *L, int idx);
/* The debug library can replace the user values of a view or a container
 * (debug.setfenv under LuaJIT, debug.setuservalue): what is read from them
 * and then used as an object (an anchor, a container's message object, a
 * view's kept container) is checked where a new object is made or memory is
 * written, never on a read of a kept one; lpc_replaced_error raises. (What
 * keeps memory alive cannot be checked so: a view whose user value 1, or a
 * standalone message whose refs, were replaced may lose its memory to the
 * collector, and a read of it is then a read of freed memory.) */
_Noreturn void lpc_replaced_error(lua_State *L);
void lpc_push_view_anchor(lua_State *L, int idx);
/* Raises unless the value at 'a', an anchor read from a view's user value
 * 1, is a full userdata, as the API calls that read its own user values
 * need: what a read does with it (push_kept, lpc_message.c: its refs
 * looked up, then kept by the new view) takes any, and the view's writes
 * check it further (lpc_push_view_anchor). */
LPC_INLINE void lpc_check_anchor(lua_State *L, int a) {
  if (lua_type(L, a) != LUA_TUSERDATA) lpc_replaced_error(L);
}
int lpc_push_anchor_of(lua_State *L, int idx, int kind);
void lpc_push_refs(lua_State *L, int a, int create);
lpc_ArenaBox *lpc_anchor_arena(lua_State *L, int a);
void lpc_set_ref(lua_State *L, int a, const void *key, int v);

/* -- Scalar values (lpc_scalar.c) ------------------------------------------ */

/* Pushes value 'v' of scalar (or string) field 'f' as Lua shows it. */
void lpc_push_scalar(lua_State *L, const pc_FieldDef *f, pc_Value v);
/* Pushes a map key of key field 'f': as lpc_push_scalar, except that under
 * LuaJIT a 64-bit key within +-2^53 is a number (so plain tables can be
 * indexed by it; cdata keys are distinct objects), cdata beyond. */
void lpc_push_key(lua_State *L, const pc_FieldDef *f, pc_Value v);
/* Whether lpc_push_key pushes key 'v' of 'f' as a cdata: under LuaJIT, a
 * 64-bit key beyond +-2^53 (two equal ones are then two table keys). */
int lpc_key_is_cdata(const pc_FieldDef *f, pc_Value v);
/* Raises "<name>: <expected> expected, got <type of the value at idx>". */
_Noreturn void lpc_field_type_error(lua_State *L, const char *name, const char *expected, int idx);
/* Raises "<name>: <def's name> expected, got <type of the value at idx>",
 * adding "of another pool" when the value is a message of another type of
 * def's name (another pool's). */
_Noreturn void lpc_message_type_error(lua_State *L, const char *name, const pc_MessageDef *def,
                                      int idx);
/* The integer at 'idx' (a number with an integer value; LuaJIT: an int64
 * cdata too) or an error naming 'name'. */
lua_Integer lpc_check_integer(lua_State *L, const char *name, int idx);
/* The scalar (or string, as a view into the Lua string) at 'idx' for a
 * field of f's type, as it is stored; raises naming 'name' ("demo.M.x:
 * integer expected, got string"; a proto3 string that is not UTF-8:
 * lpc_utf8_error). */
pc_Value lpc_check_scalar(lua_State *L, const pc_FieldDef *f, const char *name, int idx);
/* lpc_check_scalar without the UTF-8 check of a proto3 string: for a value
 * checked before (the second pass over a list or map the first pass
 * checked) and for a map key that is only looked up (one that is not UTF-8
 * finds no entry). */
pc_Value lpc_check_scalar_lax(lua_State *L, const pc_FieldDef *f, const char *name, int idx);
/* Raises "<name>: invalid UTF-8 at byte <n>" for the 'len' bytes at 's',
 * the first byte that begins no well-formed character counted from 1 (as
 * string.byte counts). */
_Noreturn void lpc_utf8_error(lua_State *L, const char *name, const char *s, size_t len);
/* Whether lpc_check_scalar takes the value at 'idx' for 'f' as it is (a
 * string, UTF-8 for a proto3 string field, a boolean, a number, an
 * integer in range, a known enum name or number); 0 does not mean it
 * raises. Callers whose error names more than the field (an element, a map
 * entry) make that name only when it says 0. */
int lpc_is_plain_scalar(lua_State *L, const pc_FieldDef *f, int idx);
/* A decimal integer string ("-9223372036854775808", "18446744073709551615")
 * as a 64-bit field's value, as LuaJIT's lpc_check_scalar takes it: 1 with
 * '*out' its two's-complement bits, 0 when 's' is no decimal integer, -1
 * when it is one outside the range of uint64 ('is_unsigned') or int64. */
int lpc_parse_decimal(const char *s, size_t len, int is_unsigned, uint64_t *out);

/* -- Reading (lpc_message.c) ----------------------------------------------- */

/* Views keep the objects read from their first LPC_VIEW_MAX_UV - 2
 * sub-message, repeated and map fields in user values (lpc_message.c). */
#define LPC_VIEW_MAX_UV 256
/* The user value of a view of the message holding field 'f' that keeps
 * the object read from 'f' (its sub-message's view, its container): 2 +
 * the number of sub-message, repeated and map fields declared before it;
 * 0 for none (another kind of field, an extension, or past
 * LPC_VIEW_MAX_UV). */
int lpc_view_uv(const pc_FieldDef *f);
/* How many user values views of 'def' have: 1 the anchor, then one per
 * field lpc_view_uv gives one (at most LPC_VIEW_MAX_UV - 1). */
int lpc_view_uvs(const pc_MessageDef *def);

/* Pushes a new empty standalone message of 'def' with the metatable at
 * 'mt' (0: its Type's). */
pc_Message *lpc_new_standalone(lua_State *L, const pc_MessageDef *def, int mt);
/* 1 when standalone messages of 'def' carry a refs user value: the type has
 * a string, message, repeated or map field, or extension ranges. */
int lpc_standalone_uv(const pc_MessageDef *def);
/* Pushes the container object of repeated or map field 'f' of the message
 * object at 'obj', raising (lpc_replaced_error) unless what the object kept
 * for it is that container (the debug library can replace it). */
void lpc_push_container(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f);
void lpc_push_field(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f);
const pc_FieldDef *lpc_lookup_slow(lua_State *L, const pc_MessageDef *def, int key);
/* The field of 'def' the string key at 'key' names, or NULL (no string,
 * no such field): lpc_lookup_slow without raising. */
const pc_FieldDef *lpc_find_field(lua_State *L, const pc_MessageDef *def, int key);
/* Raises "<owner>.<key>: no such field" (a string key at 'key') or
 * "<owner>: field name expected, got <type>": 'owner' names the message,
 * its type's full name or its place in a conversion ("demo.T.ins[2]"). */
_Noreturn void lpc_no_field(lua_State *L, const char *owner, int key);
/* Pushes the form of key 'key' (a stack index) of the container at 'c'
 * that keys its table of element objects (user value 2): one Lua value for
 * each element, whatever value names it (5, 5.0 or, under LuaJIT, 5LL and
 * "5"; an int64_t cdata, of which each is a table key of its own, as its
 * 8 bytes). Raises on a key the container would not take. */
void lpc_push_elem_key(lua_State *L, int c, int key);
/* At most this many elements size a container's new table of element
 * objects: the container's size is untrusted (decoded). */
enum { kLpc_ElemsPresize = 64 };
void lpc_keep_elem(lua_State *L, int c, int key, int v);
/* Pushes the message object of the container at 'c' (absolute; its user
 * value 1) and then its anchor, raising (lpc_replaced_error) unless the
 * object is the container's message object and the anchor an anchor (the
 * debug library can replace either); returns the anchor's index. */
int lpc_push_container_anchor(lua_State *L, int c);
void lpc_push_elem(lua_State *L, int c, const pc_FieldDef *ef, pc_Value v, int key);
/* The container at 'idx' of metatable 'mt' (LPC_REPEATED_MT, LPC_MAP_MT);
 * quicker in the container metamethods, which hold their metatable as
 * upvalue 1. */
lpc_Container *lpc_check_container(lua_State *L, int idx, const char *mt);
int lpc_message_index(lua_State *L);
int lpc_view_index(lua_State *L);
int lpc_repeated_index(lua_State *L);
int lpc_container_len(lua_State *L);
int lpc_repeated_pairs(lua_State *L);
int lpc_map_index(lua_State *L);
int lpc_map_pairs(lua_State *L);

/* -- Writing (lpc_construct.c) --------------------------------------------- */

/* Where a conversion is below its first table (lpc_construct.c): the
 * field, list element or map entry whose table it converts, below the
 * place 'up' (NULL: the message the conversion started in). Errors raised
 * there name the whole path, "demo.T.ins[2].v", made only when raising. */
typedef struct lpc_Path lpc_Path;

/* One conversion of Lua tables into messages (T{...}, m.f = {...}): 'marks'
 * whether the registry's table of tables being converted (the cycle check)
 * was started, 'depth' how many levels of tables below the first the
 * conversion is in (refused past PC_MESSAGE_MAX_DEPTH before recursing),
 * 'path' the place of the table being converted (NULL at the first).
 * Start each conversion at {0, 0, NULL}. */
typedef struct {
  int marks;
  int depth;
  const lpc_Path *path;
} lpc_Build;

void lpc_check_no_cycle(lua_State *L, const char *name, const pc_Message *value,
                        const pc_MessageDef *vdef, const pc_Message *target);
void lpc_set_field(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f, int v,
                   lpc_Build *visited);
/* Clears field 'f' of the message object at 'obj' (lpc_set_field with nil:
 * a repeated or map field emptied, its storage kept), given the object's
 * anchor at 'a' and, for a repeated field that is no extension, its
 * container at 'c' (lpc_push_container); 0 for either: pushed here when
 * needed. Given both, it raises nothing: pc.clear pushes them for every
 * field first, so that what raises (lpc_replaced_error) does before
 * anything is cleared. */
void lpc_clear_field(lua_State *L, int obj, int a, int c, pc_Message *msg, const pc_FieldDef *f);
int lpc_message_newindex(lua_State *L);
int lpc_view_newindex(lua_State *L);
int lpc_repeated_newindex(lua_State *L);
int lpc_map_newindex(lua_State *L);

#endif
