/* The message module functions (pc.has, pc.clear, pc.which_oneof,
 * pc.type_of, pc.clone, pc.merge, pc.get_extension, pc.set_extension,
 * unknown fields, sizes and the benchmarks' probes), tostring through the
 * Lua layer's formatter, the per-type instance metatables and Lookups, and
 * lpc_open_message, which registers the metatables of arenas and
 * containers. */
#include "lpc_message.h"
#include "wire/decode.h"

#include <lauxlib.h>
#include <math.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char kTypeKey;   /* metatable field: the Type */
static char kEqKey;     /* registry: the messages' __eq */
static char kReaderKey; /* registry: the FFI reader hook (LuaJIT), or none */

/* The kLpc_Read_* of a scalar (non-string) field type: kLpc_Read_I64 for
 * every 64-bit integer. */
static uint8_t type_read_kind(pc_FieldType t) {
  switch (t) {
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: return kLpc_Read_U32;
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Enum: return kLpc_Read_I32;
  case kPc_Type_Double: return kLpc_Read_F64;
  case kPc_Type_Float: return kLpc_Read_F32;
  case kPc_Type_Bool: return kLpc_Read_Bool;
  default: return kLpc_Read_I64;
  }
}

static int zero_default(const pc_FieldDef *f);

static uint8_t read_kind(const pc_FieldDef *f) {
  if (f->case_offset != 0 && f->hasbit < 0 && !f->is_extension && f->label != kPc_Label_Repeated &&
      f->slot <= kPc_Slot_Message && zero_default(f)) {
    if (f->slot == kPc_Slot_Message) return kLpc_Read_Oneof;
    uint8_t k = f->slot == kPc_Slot_String ? kLpc_Read_String : type_read_kind(f->type);
    return LPC_LUAJIT && k == kLpc_Read_I64 ? kLpc_Read_Oneof : kLpc_Read_OneofBase + k;
  }
  if (f->slot == kPc_Slot_String && f->hasbit < 0 && f->case_offset == 0 && !f->is_extension &&
      f->label != kPc_Label_Repeated && f->default_value.s.size == 0)
    return kLpc_Read_String; /* the slot is the value; "" when unset */
  if (!lpc_plain_slot(f)) return kLpc_Read_Other;
  uint8_t k = type_read_kind(f->type);
  return LPC_LUAJIT && k == kLpc_Read_I64 ? kLpc_Read_Other
                                          : k; /* LuaJIT: cdata (lpc_push_int64) */
}

static int is_64bit_integer(pc_FieldType t) {
  return t == kPc_Type_Int64 || t == kPc_Type_Sint64 || t == kPc_Type_Sfixed64 ||
         t == kPc_Type_Uint64 || t == kPc_Type_Fixed64;
}

static uint8_t write_kind(const pc_FieldDef *f) {
  return lpc_plain_slot(f) ? lpc_type_write_kind(f->type) : kLpc_Write_Other;
}

/* -- Module functions ---------------------------------------------------------- */

/* The field or oneof named by argument 'arg' of function 'fname' for the
 * message type; another name is a bad argument ("bad argument #2 to 'has'
 * (demo.Point.z: no such field)"). */
/* The string (or number, as Lua converts it) at 'arg' of the function
 * 'fname': luaL_checklstring's check, its error naming 'fname'. */
static const char *check_string(lua_State *L, int arg, const char *fname, size_t *len) {
  if (!lua_isstring(L, arg)) lpc_arg_type_error(L, arg, fname, "string");
  return lua_tolstring(L, arg, len);
}

static const pc_FieldDef *check_field(lua_State *L, const pc_MessageDef *def, int arg,
                                      const char *fname, const pc_OneofDef **oneof) {
  size_t len;
  const char *name = check_string(L, arg, fname, &len);
  const pc_FieldDef *f = pc_MessageDef_FindFieldByName(def, name, len);
  if (f != NULL) return f;
  if (oneof != NULL) {
    *oneof = pc_MessageDef_FindOneof(def, name, len);
    if (*oneof != NULL) return NULL;
  }
  lpc_arg_error(L, arg, fname,
                lua_pushfstring(L, "%s.%s: no such field", def->full_name, lpc_push_shown(L, arg)));
}

/* -- present = pc.has(m, name)   (lua/protocall/message.lua) */
static int lpc_message_has(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_check_message(L, 1, "has", &def);
  const pc_OneofDef *o = NULL;
  const pc_FieldDef *f = check_field(L, def, 2, "has", &o);
  if (f != NULL && !f->has_presence)
    lpc_arg_error(L, 2, "has", lua_pushfstring(L, "%s has no presence", f->full_name));
  lua_pushboolean(L,
                  f ? pc_Message_Has(msg, f) : o != NULL && pc_Message_WhichOneof(msg, o) != NULL);
  return 1;
}

/* -- bool = core.is_set(m, name): as pc.has, for any field (repeated and
 * map fields: non-empty; implicit presence: not the zero value); what
 * pc.to_table and pc.to_text walk with. */
static int lpc_message_is_set(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_check_message(L, 1, "is_set", &def);
  const pc_OneofDef *o = NULL;
  const pc_FieldDef *f = check_field(L, def, 2, "is_set", &o);
  lua_pushboolean(L,
                  f ? pc_Message_Has(msg, f) : o != NULL && pc_Message_WhichOneof(msg, o) != NULL);
  return 1;
}

static int has_container(const pc_FieldDef *f) {
  return f->label == kPc_Label_Repeated && !f->is_extension;
}

/* Clears every field (containers keep their storage), the unknown bytes and
 * the extensions of the message object at 1. What can raise (a user value
 * replaced through the debug library: the anchor, a kept container) does
 * before anything is cleared: the anchor and every container are pushed
 * first (lpc_clear_field). With more containers than the stack can hold
 * (LuaJIT's is the smaller), each is pushed once to raise first, then
 * again by lpc_clear_field as it clears it. */
static void clear_all(lua_State *L, pc_Message *msg, const pc_MessageDef *def) {
  lua_settop(L, 1);
  int a = lpc_push_anchor(L, 1);
  int kept = lua_checkstack(L, (int)def->repeated_count + LUA_MINSTACK);
  for (uint32_t i = 0; i < def->field_count; i++) {
    if (!has_container(&def->fields[i])) continue;
    lpc_push_container(L, 1, msg, &def->fields[i]);
    if (!kept) lua_pop(L, 1);
  }
  int c = a;
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    lpc_clear_field(L, 1, a, has_container(f) && kept ? ++c : 0, msg, f);
  }
  size_t n;
  const pc_Extension *e = pc_Message_Extensions(msg, &n);
  while (n > 0) {
    pc_Message_ClearField(msg, e[n - 1].field);
    e = pc_Message_Extensions(msg, &n);
  }
  pc_Message_DiscardUnknown(msg);
}

/* -- pc.clear(m [, name])   (lua/protocall/message.lua) */
static int lpc_message_clear(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_check_message(L, 1, "clear", &def);
  if (lua_isnoneornil(L, 2)) {
    clear_all(L, msg, def);
    return 0;
  }
  const pc_OneofDef *o = NULL;
  const pc_FieldDef *f = check_field(L, def, 2, "clear", &o);
  lua_settop(L, 2);
  lua_pushnil(L);
  lpc_Build visited = {0, 0, NULL};
  if (f != NULL) {
    lpc_set_field(L, 1, msg, f, 3, &visited);
  } else if (o != NULL) {
    for (uint32_t i = 0; i < o->field_count; i++)
      lpc_set_field(L, 1, msg, o->fields[i], 3, &visited);
  }
  return 0;
}

/* -- name = pc.which_oneof(m, oneof)   (lua/protocall/message.lua) */
static int lpc_message_which_oneof(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_check_message(L, 1, "which_oneof", &def);
  size_t len;
  const char *name = check_string(L, 2, "which_oneof", &len);
  const pc_OneofDef *o = pc_MessageDef_FindOneof(def, name, len);
  if (o == NULL)
    lpc_arg_error(
        L, 2, "which_oneof",
        lua_pushfstring(L, "%s: no oneof named '%s'", def->full_name, lpc_push_shown(L, 2)));
  const pc_FieldDef *f = o != NULL ? pc_Message_WhichOneof(msg, o) : NULL;
  if (f == NULL) return 0;
  lua_pushstring(L, f->name);
  return 1;
}

/* -- T = pc.type_of(m)   (lua/protocall/message.lua) */
static int lpc_message_type_of(lua_State *L) {
  const pc_MessageDef *def = NULL;
  if (lpc_to_message(L, 1, &def) == NULL) {
    lua_pushnil(L);
    return 1;
  }
  lpc_push_type(L, def);
  return 1;
}

/* Pushes a new standalone message of 'def', a deep copy of 'src'. */
static void push_copy(lua_State *L, const pc_Message *src, const pc_MessageDef *def) {
  pc_Message *copy = lpc_new_standalone(L, def, 0);
  lpc_ArenaBox *h = lpc_anchor_arena(L, lua_gettop(L));
  if (!pc_Message_Merge(copy, src, def, h->arena)) lpc_nomem(L);
  lpc_pace(L, h);
}

/* -- copy = pc.clone(m)   (lua/protocall/message.lua) */
static int lpc_message_clone(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *src = lpc_check_message(L, 1, "clone", &def);
  push_copy(L, src, def);
  return 1;
}

static void merge(lua_State *L, int dst, int src);

/* Merges field 'f' (a message set in both) of 's', the message of the
 * object at 'src', into that of 'd' at 'dst' through the field's objects.
 * Pushing them allocates: a finalizer run then may have unset either
 * field, which is then left as that finalizer made it. */
static void merge_sub(lua_State *L, int dst, int src, pc_Message *d, pc_Message *s,
                      const pc_FieldDef *f) {
  lpc_push_field(L, dst, d, f);
  lpc_push_field(L, src, s, f);
  if (lpc_to_message(L, -2, NULL) != NULL && lpc_to_message(L, -1, NULL) != NULL) merge(L, -2, -1);
  lua_pop(L, 2);
}

/* Merges the message at 'src' into the object at 'dst' (same type). */
static void merge(lua_State *L, int dst, int src) {
  /* a level pushes the anchor and two fields (and their pushes need room) */
  luaL_checkstack(L, 3 + LUA_MINSTACK, "messages nested too deep to merge");
  /* (absolute: the anchor and the fields pushed below move relative ones) */
  dst = lua_absindex(L, dst);
  src = lua_absindex(L, src);
  const pc_MessageDef *def = NULL;
  pc_Message *d = lpc_check_message(L, dst, "merge", &def), *s = lpc_to_message(L, src, NULL);
  int a = lpc_push_anchor(L, dst);
  lpc_ArenaBox *h = lpc_anchor_arena(L, a);
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    if (!pc_Message_Has(s, f)) continue;
    if (f->slot == kPc_Slot_Message && pc_Message_Has(d, f)) {
      /* The sub-message may be owned elsewhere: merge through its object. */
      merge_sub(L, dst, src, d, s, f);
      continue;
    }
    if (f->slot == kPc_Slot_Message) {
      lua_pushnil(L);
      lpc_set_ref(L, a, pc_Message_Slot(d, f), -1);
      lua_pop(L, 1);
    }
    if (!pc_Message_MergeField(d, s, f, h->arena)) lpc_nomem(L);
  }
  size_t n;
  const char *u = pc_Message_GetUnknown(s, &n);
  if (n > 0 && !pc_Message_AddUnknown(d, u, n, h->arena)) lpc_nomem(L);
  const pc_Extension *e = pc_Message_Extensions(s, &n);
  for (size_t i = 0; i < n; i++) {
    const pc_FieldDef *f = e[i].field;
    if (f->message != NULL && f->label != kPc_Label_Repeated &&
        pc_Message_GetExtension(d, f) != NULL) {
      merge_sub(L, dst, src, d, s, f);
      e = pc_Message_Extensions(s, &n);
      continue;
    }
    if (!pc_Message_MergeField(d, s, f, h->arena)) lpc_nomem(L);
  }
  lpc_pace(L, h);
  lua_settop(L, a - 1);
}

/* What is_src_target looks for: 'dst' itself, and the messages merge
 * writes into ('count' of them), in an open-addressing set of 'mask' + 1
 * slots (a power of two, at most half full; empty slots NULL): a buffer of
 * the caller's first, then malloc'd memory twice as large each time it
 * fills (add_target). Collecting it calls no Lua function, so no finalizer
 * can change the messages while they are walked. */
typedef struct {
  const pc_Message *dst;
  const pc_Message **targets;
  const pc_Message **first; /* the caller's buffer (not freed) */
  size_t mask, count;
  int aliased; /* a target was found */
} SrcWalk;

static size_t target_slot(const SrcWalk *w, const pc_Message *m) {
  return (size_t)(((uintptr_t)m >> 3) * (uintptr_t)0x9E3779B97F4A7C15u >> 7) & w->mask;
}

static void insert_target(SrcWalk *w, const pc_Message *m) {
  size_t i = target_slot(w, m);
  while (w->targets[i] != NULL && w->targets[i] != m) i = (i + 1) & w->mask;
  if (w->targets[i] == NULL) w->count++;
  w->targets[i] = m;
}

static int is_target(const SrcWalk *w, const pc_Message *m) {
  for (size_t i = target_slot(w, m); w->targets[i] != NULL; i = (i + 1) & w->mask)
    if (w->targets[i] == m) return 1;
  return 0;
}

/* Adds 'm' to the set; 0 when its growth finds no memory (the set kept). */
static int add_target(SrcWalk *w, const pc_Message *m) {
  if (2 * (w->count + 1) > w->mask + 1) {
    const pc_Message **old = w->targets;
    size_t n = w->mask + 1;
    if (n > SIZE_MAX / 2 / sizeof *old) return 0;
    const pc_Message **grown = calloc(2 * n, sizeof *old);
    if (grown == NULL) return 0;
    w->targets = grown;
    w->mask = 2 * n - 1;
    w->count = 0;
    for (size_t i = 0; i < n; i++)
      if (old[i] != NULL) insert_target(w, old[i]);
    if (old != w->first) free((void *)old);
  }
  insert_target(w, m);
  return 1;
}

/* Adds to 'w' the messages merge(dst 'd', src 's' of 'def') writes into
 * besides 'd': at each singular message field or extension set on both
 * sides, the one of 'd' (merged through its object, see merge), and so on
 * down along 's' (at most as many as 's' holds). Elements of repeated and
 * map fields are appended or replaced, never written into. Returns 0, -1
 * past PC_MESSAGE_MAX_DEPTH levels, or -2 out of memory. */
static int merge_targets(SrcWalk *w, const pc_Message *d, const pc_Message *s,
                         const pc_MessageDef *def, int depth) {
  if (depth > PC_MESSAGE_MAX_DEPTH) return -1;
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    if (f->slot != kPc_Slot_Message || !pc_Message_Has(s, f) || !pc_Message_Has(d, f)) continue;
    const pc_Message *t = pc_Message_Get(d, f).m;
    if (!add_target(w, t)) return -2;
    int r = merge_targets(w, t, pc_Message_Get(s, f).m, f->message, depth + 1);
    if (r < 0) return r;
  }
  size_t count;
  const pc_Extension *e = pc_Message_Extensions(s, &count);
  for (size_t i = 0; i < count; i++) {
    const pc_FieldDef *f = e[i].field;
    if (f->message == NULL || f->label == kPc_Label_Repeated || e[i].value.m == NULL) continue;
    const pc_Value *v = pc_Message_GetExtension(d, f);
    if (v == NULL) continue;
    if (!add_target(w, v->m)) return -2;
    int r = merge_targets(w, v->m, e[i].value.m, f->message, depth + 1);
    if (r < 0) return r;
  }
  return 0;
}

/* The visitor of pc.merge's walk of its source (pc_Message_Walk, 'ud' a
 * SrcWalk): stops it with 1 at 'dst', sets 'aliased' at a target. */
static int is_src_target(const pc_Message *msg, const pc_MessageDef *m, void *ud) {
  (void)m;
  SrcWalk *w = ud;
  if (msg == w->dst) return 1;
  if (!w->aliased && w->count > 0 && is_target(w, msg)) w->aliased = 1;
  return 0;
}

/* -- pc.merge(dst, src)   (lua/protocall/message.lua; pc_Message_Merge) */
static int lpc_message_merge(lua_State *L) {
  const pc_MessageDef *dd = NULL, *sd = NULL;
  pc_Message *d = lpc_to_message(L, 1, &dd);
  pc_Message *s = lpc_to_message(L, 2, &sd);
  /* (named 'merge' as its other errors, called through pcall too) */
  int bad = d == NULL ? 1 : s == NULL ? 2 : 0;
  if (bad)
    lpc_msg_error(L, "bad argument #%d to 'merge' (message expected, got %s)", bad,
                  luaL_typename(L, bad));
  if (dd != sd)
    lpc_msg_error(L, "bad argument #2 to 'merge' (%s expected, got %s%s)", dd->full_name,
                  sd->full_name,
                  strcmp(dd->full_name, sd->full_name) == 0 ? " of another pool" : "");
  /* protobuf's repeated fields would append to themselves as they are
   * read (C++ refuses it with a CHECK) */
  if (d == s)
    lpc_msg_error(L, "bad argument #2 to 'merge' (a message cannot be merged into itself: "
                     "merge pc.clone(m))");
  /* Merging keeps the levels: 'src' may nest as deep as any message. One
   * walk of 'src' answers both questions: does it hold 'dst', and does it
   * hold a message merge writes into (collected first, in one walk along
   * the overlap of the two). */
  const pc_Message *first[16] = {NULL};
  SrcWalk w = {d, first, first, sizeof first / sizeof *first - 1, 0, 0};
  int r = merge_targets(&w, d, s, dd, 0);
  if (r == 0) r = pc_Message_Walk(s, sd, PC_MESSAGE_MAX_DEPTH, is_src_target, &w);
  if (w.targets != first) free((void *)w.targets);
  if (r == -2) lpc_nomem(L);
  if (r == 1)
    lpc_msg_error(L, "%s: a message cannot contain itself: merge pc.clone(src)", dd->full_name);
  if (r < 0)
    lpc_msg_error(L, "%s: messages nested deeper than %d", dd->full_name, PC_MESSAGE_MAX_DEPTH);
  lua_settop(L, 2);
  if (w.aliased) {
    /* merging would change 'src' while it is read: merged from a copy */
    push_copy(L, s, sd);
    lua_replace(L, 2);
  }
  merge(L, 1, 2);
  return 0;
}

/* -- a == b   (same type and equal values) */
static int lpc_message_eq(lua_State *L) {
  const pc_MessageDef *da = NULL, *db = NULL;
  pc_Message *a = lpc_to_message(L, 1, &da), *b = lpc_to_message(L, 2, &db);
  lua_pushboolean(L, a != NULL && b != NULL && da == db && pc_Message_Equal(a, b, da));
  return 1;
}

static const pc_FieldDef *check_extension(lua_State *L, const pc_MessageDef *def, int arg,
                                          const char *fname) {
  const char *name = check_string(L, arg, fname, NULL);
  const pc_FieldDef *f = lpc_has_nul(L, arg) ? NULL : pc_Pool_FindExtension(def->file->pool, name);
  if (f == NULL) {
    lpc_msg_error(L, "%s: no extension named '%s'", def->full_name, lpc_push_shown(L, arg));
    return NULL;
  }
  if (f->containing != def)
    lpc_msg_error(L, "%s: '%s' extends %s, not this type", def->full_name, name,
                  f->containing->full_name);
  return f;
}

/* -- v = pc.get_extension(m, "pkg.name")   (lua/protocall/message.lua) */
static int lpc_message_get_extension(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_check_message(L, 1, "get_extension", &def);
  const pc_FieldDef *f = check_extension(L, def, 2, "get_extension");
  if (f->label == kPc_Label_Repeated) {
    int a = lpc_push_anchor(L, 1);
    lpc_ArenaBox *h = lpc_anchor_arena(L, a);
    if (pc_Message_MutableArray(msg, f, h->arena) == NULL) lpc_nomem(L);
  }
  lpc_push_field(L, 1, msg, f);
  return 1;
}

/* -- pc.set_extension(m, "pkg.name", v)   (lua/protocall/message.lua) */
static int lpc_message_set_extension(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_check_message(L, 1, "set_extension", &def);
  const pc_FieldDef *f = check_extension(L, def, 2, "set_extension");
  lua_settop(L, 3);
  lpc_Build visited = {0, 0, NULL};
  lpc_set_field(L, 1, msg, f, 3, &visited);
  return 0;
}

/* -- bytes = core.unknown_fields(m)   (raw wire bytes kept, "" when none) */
static int lpc_message_unknown(lua_State *L) {
  pc_Message *msg = lpc_check_message(L, 1, "unknown_fields", NULL);
  size_t n;
  const char *u = pc_Message_GetUnknown(msg, &n);
  lua_pushlstring(L, n ? u : "", n);
  return 1;
}

/* -- core.add_unknown_fields(m, bytes)   (appends raw wire bytes; for tests
 * and codecs: the bytes are not checked here) */
static int lpc_message_add_unknown(lua_State *L) {
  pc_Message *msg = lpc_check_message(L, 1, "add_unknown_fields", NULL);
  size_t n;
  const char *s = luaL_checklstring(L, 2, &n);
  int a = lpc_push_anchor(L, 1);
  lpc_ArenaBox *h = lpc_anchor_arena(L, a);
  if (!pc_Message_AddUnknown(msg, s, n, h->arena)) lpc_nomem(L);
  lpc_pace(L, h);
  return 0;
}

/* -- bytes = core.arena_size(m)   (bytes the arena of m's anchor has taken
 * from the allocator, 0 when it has none: for tests and benchmarks) */
static int lpc_message_arena_size(lua_State *L) {
  lpc_check_message(L, 1, "arena_size", NULL);
  int a = lpc_push_anchor(L, 1);
  lpc_ArenaBox *h = luaL_testudata(L, a, LPC_ARENA_MT);
  if (h == NULL) {
    lpc_push_refs(L, a, 0);
    if (lua_istable(L, -1) && lua_rawgeti(L, -1, 1) != LUA_TNIL) h = lua_touserdata(L, -1);
  }
  lua_pushinteger(L, h ? (lua_Integer)pc_Arena_SpaceAllocated(h->arena) : 0);
  return 1;
}

/* -- bool = core.is_message(v) */
static int lpc_message_is(lua_State *L) {
  lua_pushboolean(L, lpc_to_message(L, 1, NULL) != NULL);
  return 1;
}

/* -- bytes = core.sizeof(m)   (bytes of the message's own block: for the
 * benchmarks and tests of the layout) */
static int lpc_message_sizeof(lua_State *L) {
  const pc_MessageDef *def = NULL;
  lpc_check_message(L, 1, "sizeof", &def);
  lua_pushinteger(L, (lua_Integer)def->size);
  return 1;
}

/* The benchmark floor: a userdata whose __index returns a constant. */
static int lpc_benchconst_index(lua_State *L) {
  lua_pushinteger(L, 0);
  return 1;
}

/* -- u = core._bench_const_index()   (internal: the benchmark's baseline) */
static int lpc_bench_const_index(lua_State *L) {
  lua_newuserdatauv(L, 8, 0);
  if (luaL_newmetatable(L, "protocall._BenchConst")) {
    lua_pushcfunction(L, lpc_benchconst_index);
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  return 1;
}

/* -- in_use, free = core._heap_stats()   (internal, for the benchmarks: bytes
 * malloc has handed out, chunk headers included, and bytes it holds free;
 * nothing on a C library other than glibc >= 2.33) */
static int lpc_heap_stats(lua_State *L) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  lua_pushinteger(L, (lua_Integer)mi.uordblks);
  lua_pushinteger(L, (lua_Integer)mi.fordblks);
  return 2;
#else
  (void)L;
  return 0;
#endif
}

/* -- Per-type metatables ------------------------------------------------------- */

static void push_tostring(lua_State *L);

/* -- s = tostring(m)   (through the Lua layer's formatter) */
static int lpc_message_tostring(lua_State *L) {
  push_tostring(L);
  if (lua_isnil(L, -1)) {
    lua_pushfstring(L, "%s: %p", lpc_type_name(L, 1), lua_topointer(L, 1));
    return 1;
  }
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  return 1;
}

/* -- pairs(m), pc.pairs(m): a message is no table of its fields (its
 * fields are read by name); raises, naming what lists them. */
static int lpc_message_pairs(lua_State *L) {
  return luaL_error(L,
                    "%s is a message, not iterable: pc.to_table(m) gives its fields as a table, "
                    "pc.fields(T) lists its type's fields",
                    lpc_type_name(L, 1));
}

static char kToStringKey;

static void push_tostring(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kToStringKey);
}

/* -- core.set_message_tostring(fn)   (the Lua layer's formatter) */
static int lpc_set_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kToStringKey);
  return 0;
}

static void make_mt(lua_State *L, const pc_MessageDef *def, int names, int kind) {
  lua_createtable(L, 0, 10);
  lua_pushvalue(L, names); /* the Lookup, read by the metamethod */
  /* the container metatables (new_container, lpc_message.c) */
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_repeated_mt_key);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_map_mt_key);
  lua_pushcclosure(L, kind == kLpc_Standalone ? lpc_message_index : lpc_view_index, 3);
  lua_setfield(L, -2, "__index");
  lua_pushvalue(L, names);
  lua_pushcclosure(L, kind == kLpc_Standalone ? lpc_message_newindex : lpc_view_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  /* One function object for every message metatable: Lua 5.1 (LuaJIT)
   * calls __eq only when both operands' are the same. */
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kEqKey) != LUA_TFUNCTION) {
    lua_pop(L, 1);
    lua_pushcfunction(L, lpc_message_eq);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &kEqKey);
  }
  lua_setfield(L, -2, "__eq");
  lua_pushcfunction(L, lpc_message_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, lpc_message_pairs);
  lua_setfield(L, -2, "__pairs");
  lua_pushstring(L, def->full_name);
  lua_setfield(L, -2, "__name");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pushlightuserdata(L, (void *)((const char *)def + kind)); /* lpc_def_key in lpc_message.h */
  lua_rawsetp(L, -2, &lpc_def_key);
  if (kind == kLpc_View) { /* the Lookup new views carry (push_view_mt, lpc_message.c) */
    lua_pushlightuserdata(L, lua_touserdata(L, names));
    lua_rawseti(L, -2, 0);
  }
}

/* Picks the table size and shift of a Lookup for the 'n' name addresses
 * in 'keys': the smallest size (at least twice the names) and shift that
 * give every name its own first slot, trying up to four times the size;
 * otherwise the smallest size with shift 4 (names then share slots and
 * probing finds them). */
static void lookup_shape(const void *const *keys, size_t n, size_t *cap, unsigned *shift) {
  size_t min = 4;
  while (min < 2 * n) min *= 2;
  *cap = min;
  *shift = 4;
  if (n > 64) return;
  for (size_t c = min; c <= 4 * min; c *= 2) {
    for (unsigned sh = 3; sh <= 12; sh++) {
      uint64_t used[8] = {0}; /* c <= 512 slots */
      size_t i = 0;
      for (; i < n; i++) {
        size_t j = lpc_hash_ptr(keys[i], sh) & (c - 1);
        if (used[j / 64] & ((uint64_t)1 << (j % 64))) break;
        used[j / 64] |= (uint64_t)1 << (j % 64);
      }
      if (i == n) {
        *cap = c;
        *shift = sh;
        return;
      }
    }
  }
}

/* Pushes the Lookup of 'def' (a userdata whose user value is the table of
 * the interned field names it is keyed by). */
static void make_lookup(lua_State *L, const pc_MessageDef *def) {
  lua_createtable(L, (int)def->field_count, 0); /* keeps the name strings */
  int names = lua_gettop(L);
  const void *small[64];
  size_t n = 0;
  for (uint32_t i = 0; i < def->field_count; i++) {
    lua_pushstring(L, def->fields[i].name);
    if (n < 64 && lua_rawlen(L, -1) <= 40) small[n++] = lua_topointer(L, -1);
    lua_rawseti(L, names, (lua_Integer)i + 1);
  }
  size_t cap;
  unsigned shift;
  lookup_shape(small, def->field_count <= 64 ? n : def->field_count, &cap, &shift);
  size_t entries = sizeof(lpc_Lookup) + (cap - 1) * sizeof(lpc_LookupEntry);
  int view_uvs = lpc_view_uvs(def);
  size_t size = entries + cap * sizeof(const pc_FieldDef *) +
                ((size_t)view_uvs + 1) * sizeof(const lpc_Lookup *);
  lpc_Lookup *lk = lua_newuserdatauv(L, size, 1);
  memset(lk, 0, size);
  lk->mask = cap - 1;
  lk->shift = shift;
  lk->def = def;
  lk->standalone_uv = lpc_standalone_uv(def);
  lk->view_uvs = view_uvs;
  for (uint32_t i = 0; i < def->field_count; i++)
    if (def->fields[i].message != NULL) lk->tree = 1;
  lk->fields = (const pc_FieldDef **)(void *)((char *)lk + entries);
  lk->subs = (const lpc_Lookup **)(void *)(lk->fields + cap);
  for (size_t j = 0; j < cap; j++) lk->e[j].key = lk;
  for (uint32_t i = 0; i < def->field_count; i++) {
    lua_rawgeti(L, names, (lua_Integer)i + 1);
    if (lua_rawlen(L, -1) <= 40) { /* LUAI_MAXSHORTLEN: interned */
      size_t j = lpc_hash_ptr(lua_topointer(L, -1), shift) & lk->mask;
      while (lk->e[j].key != lk) j = (j + 1) & lk->mask;
      lk->e[j].key = lua_topointer(L, -1);
      lk->e[j].offset = def->fields[i].offset;
      lk->e[j].read = read_kind(&def->fields[i]);
      lk->e[j].write = write_kind(&def->fields[i]);
      lk->e[j].uv = (uint8_t)lpc_view_uv(&def->fields[i]);
      lk->e[j].utf8 = (uint8_t)pc_Decode_ChecksUtf8(&def->fields[i]);
      lk->fields[j] = &def->fields[i];
    }
    lua_pop(L, 1);
  }
  lua_pushvalue(L, names);
  lua_setiuservalue(L, -2, 1);
  lua_remove(L, names);
}

int lpc_ffi_write_kind(const pc_FieldDef *f) {
  if (f->slot > kPc_Slot_64 || f->is_extension || f->label == kPc_Label_Repeated) return 0;
  if (f->type == kPc_Type_Enum) return f->enumdef->closed ? 0 : 7;
  if (is_64bit_integer(f->type)) return kLpc_Write_I64;
  return lpc_scalar_write_kind(f->type);
}

/* The FFI reader's kinds beyond the plain slots': a string or bytes field
 * (a pc_StringView slot copied out by ffi.string), and the 64-bit integers
 * (an int64_t / uint64_t cdata, what lpc_push_int64 makes of them). */
enum { kFfiRead_String = kLpc_Read_Bool + 2, kFfiRead_I64, kFfiRead_U64, kFfiRead_Message };

/* How the FFI reader reads field 'f' (0: it leaves 'f' to the C __index):
 * every singular scalar, enum, string and bytes field but extensions,
 * with or without presence (the reader tests the presence bit or the
 * oneof case itself); of a singular message field, kFfiRead_Message, it
 * only answers nil for an unset one (a NULL slot, another oneof member),
 * leaving the view of a set one to C. */
static int ffi_read_kind(const pc_FieldDef *f) {
  if (f->is_extension || f->label == kPc_Label_Repeated || f->slot > kPc_Slot_Message) return 0;
  if (f->slot == kPc_Slot_Message) return kFfiRead_Message;
  if (f->slot == kPc_Slot_String) return kFfiRead_String;
  int k = type_read_kind(f->type);
  if (k != kLpc_Read_I64) return k;
  return f->type == kPc_Type_Uint64 || f->type == kPc_Type_Fixed64 ? kFfiRead_U64 : kFfiRead_I64;
}

/* Whether field 'f' reads as zero when unset (0, false, "", a 64-bit
 * zero, nil for a message: pc_Message_Get's default_of all zero bits), so
 * the FFI reader can give that value itself; a proto2 default, a closed
 * enum's nonzero first value or a -0.0 default leave an unset read to the
 * C __index. */
static int zero_default(const pc_FieldDef *f) {
  switch (f->slot) {
  case kPc_Slot_Message: return 1;
  case kPc_Slot_Bool: return f->default_value.b == 0;
  case kPc_Slot_32: return f->default_value.u32 == 0;
  case kPc_Slot_64: return f->default_value.u64 == 0;
  case kPc_Slot_String: return f->default_value.s.size == 0;
  default: return 0;
  }
}

/* Pushes the list, in declaration order, of the fields the FFI reader and
 * writer handle: {name =, offset =, read = ffi_read_kind (kLpc_Read_* of a
 * 32-bit, double, float or bool slot, kFfiRead_String, kFfiRead_I64,
 * kFfiRead_U64, kFfiRead_Message, else 0), write = lpc_ffi_write_kind, hasbit = (-1: none),
 * case_offset = (0: no oneof), number =, widest = (the oneof's widest
 * member, which pc_Message_Set clears), zero = (zero_default: an unset
 * read gives 0, false, "" or a 64-bit zero)}. */
static void push_ffi_fields(lua_State *L, const pc_MessageDef *def) {
  lua_newtable(L);
  lua_Integer n = 0;
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    int read = ffi_read_kind(f), write = lpc_ffi_write_kind(f);
    if (read == kLpc_Read_Other && write == 0) continue;
    size_t widest = f->case_offset != 0 ? f->oneof->slot_size : 0;
    lua_createtable(L, 0, 9);
    lua_pushstring(L, f->name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, (lua_Integer)f->offset);
    lua_setfield(L, -2, "offset");
    lua_pushinteger(L, read);
    lua_setfield(L, -2, "read");
    lua_pushinteger(L, write);
    lua_setfield(L, -2, "write");
    lua_pushinteger(L, (lua_Integer)f->hasbit);
    lua_setfield(L, -2, "hasbit");
    lua_pushinteger(L, (lua_Integer)f->case_offset);
    lua_setfield(L, -2, "case_offset");
    lua_pushinteger(L, (lua_Integer)f->number);
    lua_setfield(L, -2, "number");
    lua_pushinteger(L, (lua_Integer)widest);
    lua_setfield(L, -2, "widest");
    lua_pushboolean(L, zero_default(f));
    lua_setfield(L, -2, "zero");
    lua_rawseti(L, -2, ++n);
  }
}

/* -- lpc_type_make_metatables(T)   (registered under &lpc_type_metatables_key:
 * a new Type's Lookup and its two instance metatables, user values 2 and 3) */
static int lpc_type_make_metatables(lua_State *L) {
  const int type_idx = 1;
  const pc_MessageDef *def = ((lpc_TypeBox *)lua_touserdata(L, type_idx))->def;
  make_lookup(L, def);
  int names = lua_gettop(L);
  /* The Type owns this Lookup through its metatables: instances keep
   * their Type alive. */
  ((lpc_TypeBox *)lua_touserdata(L, type_idx))->lookup = lua_touserdata(L, names);
  make_mt(L, def, names, kLpc_Standalone);
  lua_pushvalue(L, type_idx);
  lua_rawsetp(L, -2, &kTypeKey);
  lua_setiuservalue(L, type_idx, 2);
  make_mt(L, def, names, kLpc_View);
  lua_pushvalue(L, type_idx);
  lua_rawsetp(L, -2, &kTypeKey);
  lua_setiuservalue(L, type_idx, 3);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kReaderKey) == LUA_TFUNCTION) {
    lua_getiuservalue(L, type_idx, 2);
    lua_getiuservalue(L, type_idx, 3);
    push_ffi_fields(L, def);
    lua_call(L, 3, 0);
  } else {
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return 0;
}

/* -- core.set_reader(hook)   (LuaJIT: lua/protocall/message.lua) hook is
 * called as hook(standalone_mt, view_mt, fields) for every Type made from
 * then on, before its first instance, to put an FFI __index and
 * __newindex in front of the C ones: fields lists what each field's slot
 * needs (push_ffi_fields: name, offset, read kind 1 uint32, 2 int32, 4
 * double, 5 float, 6 bool, 8 string or bytes, 9 int64_t, 10 uint64_t, 11
 * message (nil when unset, else the C __index) or 0,
 * write kind the same but 8 plus 3 64-bit and 7 open enum or 0, hasbit,
 * case_offset, number, widest, zero: whether an unset read gives 0,
 * false, "" or a 64-bit zero). */
static int lpc_set_reader(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kReaderKey);
  return 0;
}

_Static_assert(sizeof(pc_FieldType) == 4 && sizeof(((pc_FieldDef *)0)->offset) == 4 &&
                   sizeof(((pc_FieldDef *)0)->is_extension) == 1 &&
                   offsetof(lpc_Container, msg) == 0,
               "core.container_layout: the FFI reads these as int32_t, uint32_t and uint8_t");

/* -- t = core.container_layout()   (LuaJIT: lua/protocall/ffi/accessors.lua)
 * Where the FFI __index of repeated containers finds what it reads, in
 * bytes: t.field (lpc_Container's 'f'; 'msg' is at 0), t.type, t.offset,
 * t.is_extension (of pc_FieldDef: int32_t, uint32_t, uint8_t), t.data and
 * t.size (of pc_Array: a pointer and a size_t). */
static int lpc_container_layout(lua_State *L) {
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, (lua_Integer)offsetof(lpc_Container, f));
  lua_setfield(L, -2, "field");
  lua_pushinteger(L, (lua_Integer)offsetof(pc_FieldDef, type));
  lua_setfield(L, -2, "type");
  lua_pushinteger(L, (lua_Integer)offsetof(pc_FieldDef, offset));
  lua_setfield(L, -2, "offset");
  lua_pushinteger(L, (lua_Integer)offsetof(pc_FieldDef, is_extension));
  lua_setfield(L, -2, "is_extension");
  lua_pushinteger(L, (lua_Integer)offsetof(pc_Array, data));
  lua_setfield(L, -2, "data");
  lua_pushinteger(L, (lua_Integer)offsetof(pc_Array, size));
  lua_setfield(L, -2, "size");
  return 1;
}

void lpc_open_message(lua_State *L) {
  static const luaL_Reg funcs[] = {{"has", lpc_message_has},
                                   {"is_set", lpc_message_is_set},
                                   {"clear", lpc_message_clear},
                                   {"which_oneof", lpc_message_which_oneof},
                                   {"type_of", lpc_message_type_of},
                                   {"clone", lpc_message_clone},
                                   {"merge", lpc_message_merge},
                                   {"get_extension", lpc_message_get_extension},
                                   {"set_extension", lpc_message_set_extension},
                                   {"unknown_fields", lpc_message_unknown},
                                   {"add_unknown_fields", lpc_message_add_unknown},
                                   {"is_message", lpc_message_is},
                                   {"arena_size", lpc_message_arena_size},
                                   {"sizeof", lpc_message_sizeof},
                                   {"set_message_tostring", lpc_set_tostring},
                                   {"_bench_const_index", lpc_bench_const_index},
                                   {"_heap_stats", lpc_heap_stats},
                                   {"set_reader", lpc_set_reader},
                                   {"container_layout", lpc_container_layout},
                                   {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
  /* The container metatables first: every message __index made from
   * then on (make_mt) holds them. */
  static const luaL_Reg rep[] = {{"__index", lpc_repeated_index},
                                 {"__newindex", lpc_repeated_newindex},
                                 {"__len", lpc_container_len},
                                 {"__pairs", lpc_repeated_pairs},
                                 {NULL, NULL}};
  /* __metatable hides the container metatables, as a message's: their
   * functions, called with another value, would read it as a container */
  luaL_newmetatable(L, LPC_REPEATED_MT); /* upvalue 1 of each: lpc_check_container */
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lpc_repeated_mt_key);
  lua_pushvalue(L, -1);
  luaL_setfuncs(L, rep, 1);
  lua_pop(L, 1);
  static const luaL_Reg map[] = {{"__index", lpc_map_index},
                                 {"__newindex", lpc_map_newindex},
                                 {"__len", lpc_container_len},
                                 {"__pairs", lpc_map_pairs},
                                 {NULL, NULL}};
  luaL_newmetatable(L, LPC_MAP_MT);
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lpc_map_mt_key);
  lua_pushvalue(L, -1);
  luaL_setfuncs(L, map, 1);
  lua_pop(L, 1);
  lua_pushcfunction(L, lpc_type_make_metatables);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lpc_type_metatables_key);
  luaL_getmetatable(L, LPC_TYPE_MT); /* made by lpc_open_schema */
  lua_pushcfunction(L, lpc_type_call);
  lua_setfield(L, -2, "__call");
  lua_pop(L, 1);
  /* Ephemeron table: an anchor keeps what its memory points to alive (the
   * same table when the module is opened again: live messages need it). */
  lpc_registry_table(L, &lpc_refs_key, "k");
  lua_pop(L, 1);
  if (luaL_newmetatable(L, LPC_ARENA_MT)) { /* the same Reaper when the module is opened again */
    lpc_push_arena_gc(L);
    lua_setfield(L, -2, "__gc");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  /* The Pool's __gc shares the Arena's Reaper (set here, each time the
   * module is opened: lpc_open_schema made its metatable without it). */
  lua_getfield(L, -1, "__gc");
  lpc_push_pool_gc(L, -1);
  luaL_getmetatable(L, LPC_POOL_MT);
  lua_insert(L, -2);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lpc_arena_mt_key);
}
