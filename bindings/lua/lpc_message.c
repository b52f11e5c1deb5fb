/* Messages as Lua values (API.md "Messages"): the per-type metatables with
 * C __index / __newindex, checked conversions, live repeated and map
 * containers, and the module functions pc.has, pc.clear, pc.which_oneof,
 * pc.type_of, pc.clone, pc.merge, pc.get_extension, pc.set_extension.
 * Ownership is described in lpc_msg.h. */
#include "lpc.h"

#include <lauxlib.h>
#include <math.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdarg.h>
#include <string.h>

static char kRefsKey;  /* registry: ephemeron table anchor -> refs table */
static char kDefKey;   /* metatable field: lightuserdata def */
static char kKindKey;  /* metatable field: kStandalone / kView */
static char kTypeKey;  /* metatable field: the Type */
static char kVisitKey; /* registry: tables being converted (cycle check) */

enum { kStandalone = 1, kView = 2 };

/* The field access paths are inlined into each metamethod (the kind of
 * message a constant there). */
#if defined(__GNUC__)
#define LPC_INLINE static inline __attribute__((always_inline))
#else
#define LPC_INLINE static inline
#endif

#define ARENA_MT    "protocall.Arena"
#define REPEATED_MT "protocall.Repeated"
#define MAP_MT      "protocall.Map"

typedef struct {
  pc_Arena *arena;
  size_t reported; /* bytes already reported to the collector */
} Holder;

typedef struct {
  pc_Message *msg;
  const pc_FieldDef *f;
} Container;

/* Raises "file:line: <message>" naming the nearest Lua caller, also when a
 * C function such as table.insert stands between it and the metamethod. */
static _Noreturn void msg_error(lua_State *L, const char *fmt, ...) {
  lua_Debug ar;
  int level = 1, found = 0;
  while (!found && lua_getstack(L, level++, &ar)) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline > 0) {
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      found = 1;
    }
  }
  if (!found) lua_pushliteral(L, "");
  va_list argp;
  va_start(argp, fmt);
  lua_pushvfstring(L, fmt, argp);
  va_end(argp);
  lua_concat(L, 2);
  lua_error(L);
#if defined(__GNUC__)
  __builtin_unreachable();
#endif
}

/* -- Arenas and anchors ---------------------------------------------------- */

static int lpc_arena_gc(lua_State *L) {
  Holder *h = luaL_checkudata(L, 1, ARENA_MT);
  pc_Arena_Free(h->arena);
  h->arena = NULL;
  return 0;
}

pc_Arena *lpc_newarena(lua_State *L) {
  Holder *h = lua_newuserdatauv(L, sizeof(Holder), 0);
  h->arena = NULL;
  h->reported = 0;
  luaL_setmetatable(L, ARENA_MT);
  void *ud;
  lua_Alloc f = lua_getallocf(L, &ud);
  h->arena = pc_Arena_New(f, ud);
  if (h->arena == NULL) msg_error(L, "not enough memory");
  h->reported = pc_Arena_SpaceAllocated(h->arena);
  return h->arena;
}

static void pace(lua_State *L, Holder *h) {
  size_t now = pc_Arena_SpaceAllocated(h->arena);
  if (now - h->reported >= 4096) {
    lua_gc(L, LUA_GCSTEP, (int)((now - h->reported) / 1024));
    h->reported = now;
  }
}

void lpc_pacearena(lua_State *L, int idx) {
  pace(L, luaL_checkudata(L, idx, ARENA_MT));
}

static int meta_int(lua_State *L, int mt, void *key) {
  lua_rawgetp(L, mt, key);
  int v = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return v;
}

pc_Message *lpc_tomessage(lua_State *L, int idx, const pc_MessageDef **def) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return NULL;
  lua_rawgetp(L, -1, &kDefKey);
  const pc_MessageDef *d = lua_touserdata(L, -1);
  lua_pop(L, 1);
  int kind = d ? meta_int(L, lua_gettop(L), &kKindKey) : 0;
  lua_pop(L, 1);
  if (d == NULL) return NULL;
  if (def != NULL) *def = d;
  void *p = lua_touserdata(L, idx);
  return kind == kStandalone ? p : *(pc_Message **)p;
}

static _Noreturn void not_a_message(lua_State *L, int idx) {
  luaL_typeerror(L, idx, "message");
#if defined(__GNUC__)
  __builtin_unreachable();
#endif
}

pc_Message *lpc_checkmessage(lua_State *L, int idx, const pc_MessageDef **def) {
  pc_Message *m = lpc_tomessage(L, idx, def);
  if (m == NULL) not_a_message(L, idx);
  return m;
}

static int is_standalone(lua_State *L, int idx) {
  lua_getmetatable(L, idx);
  int kind = meta_int(L, lua_gettop(L), &kKindKey);
  lua_pop(L, 1);
  return kind == kStandalone;
}

/* Pushes the anchor of the message at 'idx'; returns its absolute index. */
static int push_anchor(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (is_standalone(L, idx))
    lua_pushvalue(L, idx);
  else
    lua_getiuservalue(L, idx, 1);
  return lua_gettop(L);
}

/* Pushes the refs table of the anchor at 'a' (created when 'create'), or
 * nil. */
static void push_refs(lua_State *L, int a, int create) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kRefsKey);
  lua_pushvalue(L, a);
  if (lua_rawget(L, -2) == LUA_TNIL && create) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 2);
    lua_pushvalue(L, a);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
  }
  lua_remove(L, -2);
}

/* The arena holder of the anchor at 'a' (made for a standalone message on
 * first need). */
static Holder *anchor_holder(lua_State *L, int a) {
  Holder *h = luaL_testudata(L, a, ARENA_MT);
  if (h != NULL) return h;
  push_refs(L, a, 1);
  if (lua_rawgeti(L, -1, 1) == LUA_TNIL) {
    lua_pop(L, 1);
    lpc_newarena(L);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, 1);
  }
  h = lua_touserdata(L, -1);
  lua_pop(L, 2);
  return h;
}

/* refs[key] = value at 'v' (nil allowed) in the refs of the anchor at 'a'. */
static void set_ref(lua_State *L, int a, const void *key, int v) {
  v = lua_absindex(L, v);
  push_refs(L, a, !lua_isnil(L, v));
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_pushvalue(L, v);
  lua_rawsetp(L, -2, key);
  lua_pop(L, 1);
}

static _Noreturn void nomem(lua_State *L) {
  msg_error(L, "not enough memory");
}

/* -- Types and views ------------------------------------------------------- */

static void push_instance_mt(lua_State *L, const pc_MessageDef *def, int kind) {
  lpc_pushtype(L, def);
  lua_getiuservalue(L, -1, kind == kStandalone ? 2 : 3);
  lua_remove(L, -2);
}

void lpc_pushview(lua_State *L, const pc_MessageDef *def, pc_Message *msg, int anchor_idx) {
  anchor_idx = lua_absindex(L, anchor_idx);
  pc_Message **p = lua_newuserdatauv(L, sizeof(pc_Message *), 1);
  *p = msg;
  lua_pushvalue(L, anchor_idx);
  lua_setiuservalue(L, -2, 1);
  push_instance_mt(L, def, kView);
  lua_setmetatable(L, -2);
}

static pc_Message *new_standalone(lua_State *L, const pc_MessageDef *def, int mt) {
  void *p = lua_newuserdatauv(L, def->size, 0);
  pc_Message_Init(def, p);
  if (mt != 0)
    lua_pushvalue(L, mt);
  else
    push_instance_mt(L, def, kStandalone);
  lua_setmetatable(L, -2);
  return p;
}

/* Pushes the Lua object for sub-message 'msg' reached from the anchor at
 * 'a' through 'key' (a slot address or the message itself): the object
 * stored there, or a new view remembered there. */
static void push_submessage(lua_State *L, int a, const pc_MessageDef *def, pc_Message *msg,
                            const void *key) {
  if (msg == NULL) {
    lua_pushnil(L);
    return;
  }
  push_refs(L, a, 1);
  if (lua_rawgetp(L, -1, key) != LUA_TNIL && lpc_tomessage(L, -1, NULL) == msg) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  lpc_pushview(L, def, msg, a);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, key);
  lua_remove(L, -2);
}

/* -- Reading --------------------------------------------------------------- */

static void push_scalar(lua_State *L, const pc_FieldDef *f, pc_Value v) {
  switch (f->type) {
  case kPc_Type_Double: lua_pushnumber(L, v.d); break;
  case kPc_Type_Float: lua_pushnumber(L, (lua_Number)v.f); break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: lua_pushinteger(L, (lua_Integer)v.i64); break;
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: lua_pushinteger(L, (lua_Integer)v.u64); break;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: lua_pushinteger(L, (lua_Integer)v.u32); break;
  case kPc_Type_Bool: lua_pushboolean(L, v.b); break;
  case kPc_Type_String:
  case kPc_Type_Bytes: lua_pushlstring(L, v.s.size ? v.s.data : "", v.s.size); break;
  default: lua_pushinteger(L, (lua_Integer)v.i32); break;
  }
}

/* Pushes the container of repeated or map field 'f' of the message object at
 * 'obj': one object per field of a message, remembered by the anchor under
 * the slot's address + 1 (extensions get a new one each time). User values:
 * 1 the message object, 2 the table of element objects (message elements:
 * index or key -> the object the slot points to), or nil. */
static void push_container(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f) {
  obj = lua_absindex(L, obj);
  int a = 0;
  const void *key = (const char *)pc_Message_Slot(msg, f) + 1;
  if (!f->is_extension) {
    a = push_anchor(L, obj);
    push_refs(L, a, 1);
    if (lua_rawgetp(L, -1, key) == LUA_TUSERDATA) {
      lua_replace(L, a);
      lua_settop(L, a);
      return;
    }
    lua_pop(L, 1);
  }
  Container *c = lua_newuserdatauv(L, sizeof(Container), 2);
  c->msg = msg;
  c->f = f;
  lua_pushvalue(L, obj);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, f->is_map ? MAP_MT : REPEATED_MT);
  if (a != 0) {
    lua_pushvalue(L, -1);
    lua_rawsetp(L, a + 1, key);
    lua_replace(L, a);
    lua_settop(L, a);
  }
}

/* Pushes the value of field 'f' of the message object at 'obj'. */
static void push_field(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f) {
  if (f->label == kPc_Label_Repeated) {
    push_container(L, obj, msg, f);
  } else if (f->message != NULL) {
    pc_Value v = pc_Message_Get(msg, f);
    if (v.m == NULL) {
      lua_pushnil(L);
      return;
    }
    int a = push_anchor(L, obj);
    const void *key = f->is_extension ? (const void *)v.m : pc_Message_Slot(msg, f);
    push_submessage(L, a, f->message, v.m, key);
    lua_remove(L, a);
  } else {
    push_scalar(L, f, pc_Message_Get(msg, f));
  }
}

static const char *tname(lua_State *L, int idx) {
  if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) {
    const char *n = lua_tostring(L, -1);
    lua_pop(L, 1); /* the metatable still holds it */
    return n;
  }
  return luaL_typename(L, idx);
}

static _Noreturn void no_field(lua_State *L, const pc_MessageDef *def, int key) {
  if (lua_type(L, key) == LUA_TSTRING)
    msg_error(L, "%s.%s: no such field", def->full_name, lua_tostring(L, key));
  msg_error(L, "%s: field name expected, got %s", def->full_name, tname(L, key));
}

/* Per-type field lookup without allocation: open addressing keyed by the
 * address of the field name's interned Lua string (short strings are
 * interned, so a key string read from Lua code is that very string). The
 * strings are kept alive by the userdata's user value. The Lookup is this
 * state's (a frozen pool's defs are shared by several states): __index and
 * __newindex have it as their upvalue, the Type in its TypeBox. */
enum { kRead_Other, kRead_U32, kRead_I32, kRead_I64, kRead_F64, kRead_F32, kRead_Bool };

/* How a plain slot takes a Lua value without the general path: integers
 * range-checked here, the rest (enums, strings, messages, presence) through
 * set_field. */
enum { kWrite_Other, kWrite_U32, kWrite_I32, kWrite_I64, kWrite_F64, kWrite_F32, kWrite_Bool };

typedef struct {
  const void *key; /* the name's TString, as lua_topointer gives it */
  uint32_t offset; /* the field's offset, for the direct read and write */
  uint8_t read;    /* kRead_*: a plain slot read directly, or kRead_Other */
  uint8_t write;   /* kWrite_* */
} LookupEntry;

typedef struct {
  const pc_MessageDef *def;
  size_t mask;
  unsigned shift;             /* hash: (address >> shift) & mask */
  const pc_FieldDef **fields; /* fields[i] is the field of e[i] (after e) */
  LookupEntry e[1];
} Lookup;

static int plain_slot(const pc_FieldDef *f) {
  return f->slot <= kPc_Slot_64 && f->hasbit < 0 && f->case_offset == 0 && !f->is_extension &&
         f->label != kPc_Label_Repeated;
}

static uint8_t read_kind(const pc_FieldDef *f) {
  if (!plain_slot(f)) return kRead_Other;
  switch (f->type) {
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: return kRead_U32;
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Enum: return kRead_I32;
  case kPc_Type_Double: return kRead_F64;
  case kPc_Type_Float: return kRead_F32;
  case kPc_Type_Bool: return kRead_Bool;
  default: return kRead_I64;
  }
}

static uint8_t write_kind(const pc_FieldDef *f) {
  if (!plain_slot(f)) return kWrite_Other;
  switch (f->type) {
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: return kWrite_U32;
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32: return kWrite_I32;
  case kPc_Type_Double: return kWrite_F64;
  case kPc_Type_Float: return kWrite_F32;
  case kPc_Type_Bool: return kWrite_Bool;
  case kPc_Type_Enum: return kWrite_Other; /* names, closed enums */
  default: return kWrite_I64;              /* any Lua integer */
  }
}

/* Strings are separate allocations: the address bits above the
 * alignment tell them apart. Each type picks the shift (and table size)
 * that puts every name in its first slot when it can (see make_lookup). */
static size_t hash_ptr(const void *p, unsigned shift) {
  return (size_t)((uintptr_t)p >> shift);
}

/* Empty entries hold the Lookup's own address (never a string), so a NULL
 * key (a number) is a miss without a test. */
static const LookupEntry *probe_more(const Lookup *lk, const void *p, size_t i) {
  for (;;) {
    if (lk->e[i].key == (const void *)lk) return NULL;
    i = (i + 1) & lk->mask;
    if (lk->e[i].key == p) return &lk->e[i];
  }
}

LPC_INLINE const LookupEntry *probe(const Lookup *lk, const void *p) {
  size_t i = hash_ptr(p, lk->shift) & lk->mask;
  if (lk->e[i].key == p) return &lk->e[i];
  return probe_more(lk, p, i);
}

static const pc_FieldDef *entry_field(const Lookup *lk, const LookupEntry *e) {
  return lk->fields[e - lk->e];
}

/* The field named by the key at 'key' (raises when there is none), through
 * the Lookup at 'lk'; names longer than Lua's short strings fall back to a
 * search by name. */
static const pc_FieldDef *lookup_slow(lua_State *L, const pc_MessageDef *def, int key) {
  if (lua_type(L, key) == LUA_TSTRING) {
    size_t len;
    const pc_FieldDef *f;
    const char *name = lua_tolstring(L, key, &len);
    f = pc_MessageDef_FindFieldByName(def, name, len);
    if (f != NULL) return f;
  }
  no_field(L, def, key);
  return NULL;
}

/* The general read of m[key] (not a plain slot, or a key the Lookup does
 * not hold). */
static int index_slow(lua_State *L, const Lookup *lk, const LookupEntry *e, char *msg) {
  const pc_FieldDef *f = e != NULL ? entry_field(lk, e) : lookup_slow(L, lk->def, 2);
  if (f->slot <= kPc_Slot_String) {
    push_scalar(L, f, pc_Message_Get(msg, f));
    return 1;
  }
  push_field(L, 1, msg, f);
  return 1;
}

/* The message memory of the object at 1 (a standalone message's block or
 * the memory a view points to). */
LPC_INLINE char *msg_at1(lua_State *L, int kind) {
  void *p = lua_touserdata(L, 1);
  return kind == kStandalone ? (char *)p : *(char **)p;
}

/* Inlined into both __index functions: the plain slots are read here, the
 * most common kinds tested first. The key is probed before the message is
 * fetched, so fewer values live across the API calls. */
LPC_INLINE int index_common(lua_State *L, int kind) {
  const Lookup *lk = lua_touserdata(L, lua_upvalueindex(1));
  char *msg = msg_at1(L, kind);
  const LookupEntry *e = probe(lk, lua_topointer(L, 2));
  if (e == NULL) return index_slow(L, lk, e, msg);
  const char *p = msg + e->offset;
  if (e->read == kRead_U32) {
    uint32_t v;
    memcpy(&v, p, 4);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  if (e->read == kRead_I32) {
    int32_t v;
    memcpy(&v, p, 4);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  if (e->read == kRead_I64) {
    int64_t v;
    memcpy(&v, p, 8);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  if (e->read == kRead_F64) {
    double v;
    memcpy(&v, p, 8);
    lua_pushnumber(L, v);
    return 1;
  }
  if (e->read == kRead_F32) {
    float v;
    memcpy(&v, p, 4);
    lua_pushnumber(L, (lua_Number)v);
    return 1;
  }
  if (e->read == kRead_Bool) {
    lua_pushboolean(L, *p != 0);
    return 1;
  }
  return index_slow(L, lk, e, msg);
}

/* -- v = m.name   (standalone message) */
static int lpc_message_index(lua_State *L) {
  return index_common(L, kStandalone);
}

/* -- v = m.name   (view) */
static int lpc_view_index(lua_State *L) {
  return index_common(L, kView);
}

/* -- Checked conversions --------------------------------------------------- */

static _Noreturn void type_error(lua_State *L, const char *name, const char *expected, int idx) {
  msg_error(L, "%s: %s expected, got %s", name, expected, tname(L, idx));
}

static lua_Integer check_integer(lua_State *L, const char *name, int idx) {
  if (lua_type(L, idx) != LUA_TNUMBER) type_error(L, name, "integer", idx);
  int exact;
  lua_Integer i = lua_tointegerx(L, idx, &exact); /* floats only when integral */
  if (!exact) msg_error(L, "%s: number has no integer representation", name);
  return i;
}

static void check_range(lua_State *L, const char *name, lua_Integer i, lua_Integer lo,
                        lua_Integer hi, const char *type) {
  if (i < lo || i > hi) msg_error(L, "%s: value %I out of range for %s", name, i, type);
}

static int32_t check_enum(lua_State *L, const pc_FieldDef *f, const char *name, int idx) {
  const pc_EnumDef *e = f->enumdef;
  if (lua_type(L, idx) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    const pc_EnumValueDef *v = pc_EnumDef_FindByName(e, s, len);
    if (v != NULL) return v->number;
    msg_error(L, "%s: unknown value '%s' for enum %s", name, s, e->full_name);
  }
  if (lua_type(L, idx) != LUA_TNUMBER) type_error(L, name, "enum value name or number", idx);
  lua_Integer i = check_integer(L, name, idx);
  check_range(L, name, i, INT32_MIN, INT32_MAX, "enum");
  if (e->closed && pc_EnumDef_FindByNumber(e, (int32_t)i) == NULL)
    msg_error(L, "%s: %I is not a value of closed enum %s", name, i, e->full_name);
  return (int32_t)i;
}

/* The scalar (or string, as a view into the Lua string) at 'idx' for a
 * field of f's type; raises naming 'name'. */
static pc_Value check_scalar(lua_State *L, const pc_FieldDef *f, const char *name, int idx) {
  pc_Value v;
  memset(&v, 0, sizeof(v));
  switch (f->type) {
  case kPc_Type_Double:
  case kPc_Type_Float:
    if (lua_type(L, idx) != LUA_TNUMBER) type_error(L, name, "number", idx);
    if (f->type == kPc_Type_Double)
      v.d = (double)lua_tonumber(L, idx);
    else
      v.f = (float)lua_tonumber(L, idx);
    break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: v.i64 = (int64_t)check_integer(L, name, idx); break;
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32: {
    lua_Integer i = check_integer(L, name, idx);
    check_range(L, name, i, INT32_MIN, INT32_MAX, pc_FieldType_Name(f->type));
    v.i32 = (int32_t)i;
    break;
  }
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: {
    lua_Integer i = check_integer(L, name, idx);
    check_range(L, name, i, 0, UINT32_MAX, pc_FieldType_Name(f->type));
    v.u32 = (uint32_t)i;
    break;
  }
  case kPc_Type_Bool:
    if (!lua_isboolean(L, idx)) type_error(L, name, "boolean", idx);
    v.b = (uint8_t)lua_toboolean(L, idx);
    break;
  case kPc_Type_String:
  case kPc_Type_Bytes:
    if (lua_type(L, idx) != LUA_TSTRING) type_error(L, name, "string", idx);
    v.s.data = lua_tolstring(L, idx, &v.s.size);
    break;
  case kPc_Type_Enum: v.i32 = check_enum(L, f, name, idx); break;
  default: type_error(L, name, "scalar", idx);
  }
  return v;
}

static void construct(lua_State *L, int type, int t, int *visited);

/* The message for a field of type 'def' from the value at 'idx' (a message
 * of that type, or a table to construct one from); pushes its object. */
static pc_Message *check_message(lua_State *L, const pc_MessageDef *def, const char *name, int idx,
                                 int *visited) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TTABLE) {
    luaL_checkstack(L, 20, "message nesting too deep");
    lpc_pushtype(L, def);
    int type = lua_gettop(L);
    construct(L, type, idx, visited);
    lua_remove(L, type);
    return lua_touserdata(L, -1);
  }
  const pc_MessageDef *d = NULL;
  pc_Message *m = lpc_tomessage(L, idx, &d);
  if (m == NULL || d != def) type_error(L, name, def->full_name, idx);
  lua_pushvalue(L, idx);
  return m;
}

/* Refuses storing 'value' (type 'vdef') anywhere inside 'target'. */
static void check_no_cycle(lua_State *L, const char *name, const pc_Message *value,
                           const pc_MessageDef *vdef, const pc_Message *target) {
  int r = pc_Message_Contains(value, vdef, target);
  if (r == 1) msg_error(L, "%s: a message cannot contain itself", name);
  if (r == 2) msg_error(L, "%s: messages nested deeper than %d", name, PC_MESSAGE_MAX_DEPTH);
}

/* Pushes the object of a message element (field 'f', from the value at
 * 'idx': a message, or a table to construct one from), refusing cycles
 * through 'target'. */
static pc_Message *elem_object(lua_State *L, const pc_FieldDef *f, int idx, pc_Message *target,
                               int *visited) {
  pc_Message *m = check_message(L, f->message, f->full_name, idx, visited);
  check_no_cycle(L, f->full_name, m, f->message, target);
  return m;
}

/* Remembers the message object at 'v' (or forgets, when nil) as element
 * 'key' (a stack index) of the container at 'c'. */
static void keep_elem(lua_State *L, int c, int key, int v) {
  c = lua_absindex(L, c);
  key = lua_absindex(L, key);
  v = lua_absindex(L, v);
  const Container *cont = lua_touserdata(L, c);
  if (cont->f->is_extension) { /* no remembered container: keep by address */
    if (lua_isnil(L, v)) return;
    lua_getiuservalue(L, c, 1);
    int a = push_anchor(L, -1);
    set_ref(L, a, lpc_tomessage(L, v, NULL), v);
    lua_settop(L, a - 2);
    return;
  }
  if (lua_getiuservalue(L, c, 2) != LUA_TTABLE) {
    lua_pop(L, 1);
    if (lua_isnil(L, v)) return;
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, c, 2);
  }
  lua_pushvalue(L, key);
  lua_pushvalue(L, v);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* Pushes element 'v' (of field 'ef', at Lua key 'key') of the container at
 * 'c': scalars as values, messages as the remembered object or a new view. */
static void push_elem(lua_State *L, int c, const pc_FieldDef *ef, pc_Value v, int key) {
  if (ef->message == NULL) {
    push_scalar(L, ef, v);
    return;
  }
  if (v.m == NULL) {
    lua_pushnil(L);
    return;
  }
  c = lua_absindex(L, c);
  key = lua_absindex(L, key);
  const Container *cont = lua_touserdata(L, c);
  lua_getiuservalue(L, c, 1);
  int a = push_anchor(L, -1);
  if (cont->f->is_extension) {
    push_submessage(L, a, ef->message, v.m, v.m);
  } else {
    if (lua_getiuservalue(L, c, 2) == LUA_TTABLE) {
      lua_pushvalue(L, key);
      lua_rawget(L, -2);
      if (lpc_tomessage(L, -1, NULL) == v.m) {
        lua_replace(L, a - 1);
        lua_settop(L, a - 1);
        return;
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lpc_pushview(L, ef->message, v.m, a);
    keep_elem(L, c, key, -1);
  }
  lua_replace(L, a - 1);
  lua_settop(L, a - 1);
}

/* Element 'i' (1-based) of the list at 'src' as a value for the array: the
 * element objects of messages come from the table at 'objs'. */
static pc_Value array_value(lua_State *L, const pc_FieldDef *f, int src, lua_Integer i, int objs,
                            pc_Arena *arena) {
  pc_Value v;
  memset(&v, 0, sizeof(v));
  if (f->message != NULL) {
    lua_rawgeti(L, objs, i);
    v.m = lpc_tomessage(L, -1, NULL);
    lua_pop(L, 1);
    return v;
  }
  lua_geti(L, src, i);
  v = check_scalar(L, f, f->full_name, -1);
  if ((f->type == kPc_Type_String || f->type == kPc_Type_Bytes) &&
      !pc_StringView_Copy(&v.s, v.s.data, v.s.size, arena))
    nomem(L);
  lua_pop(L, 1);
  return v;
}

/* Replaces the elements of the repeated field of the container at 'c' with
 * the list at 'src' (a table or a repeated container of the same element
 * type). Everything is checked before the field changes; the array's
 * storage is reused when it is large enough. */
static void fill_array(lua_State *L, int c, int src, int *visited) {
  c = lua_absindex(L, c);
  src = lua_absindex(L, src);
  const Container *cont = lua_touserdata(L, c);
  pc_Message *msg = cont->msg;
  const pc_FieldDef *f = cont->f;
  lua_Integer n = 0;
  if (lua_type(L, src) == LUA_TTABLE) {
    n = (lua_Integer)lua_rawlen(L, src);
    lua_Integer count = 0;
    lua_pushnil(L);
    while (lua_next(L, src)) {
      count++;
      if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1 || lua_tointeger(L, -2) > n)
        msg_error(L, "%s: list expected, got a table with key %s", f->full_name,
                  luaL_tolstring(L, -2, NULL));
      lua_pop(L, 1);
    }
    if (count != n) msg_error(L, "%s: list expected, got a table with holes", f->full_name);
  } else {
    const Container *other = luaL_testudata(L, src, REPEATED_MT);
    if (other == NULL || other->f->type != f->type || other->f->message != f->message ||
        other->f->enumdef != f->enumdef)
      msg_error(L, "%s: list expected, got %s", f->full_name, tname(L, src));
    n = luaL_len(L, src);
  }
  /* Pass 1: check every element; message objects into a new table. */
  lua_createtable(L, f->message ? (int)n : 0, 0);
  int objs = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, src, i);
    if (f->message != NULL) {
      elem_object(L, f, -1, msg, visited);
      lua_rawseti(L, objs, i);
    } else {
      check_scalar(L, f, f->full_name, -1);
    }
    lua_pop(L, 1);
  }
  /* Pass 2: store. */
  lua_getiuservalue(L, c, 1);
  int a = push_anchor(L, -1);
  Holder *h = anchor_holder(L, a);
  pc_Array *arr = pc_Message_MutableArray(msg, f, h->arena);
  size_t elem = pc_FieldDef_ElemSize(f);
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  if (arr == NULL) {
    nomem(L);
    return; /* (nomem raises) */
  }
  if (arr->cap < (size_t)n) {
    pc_Array fresh = {NULL, 0, 0}; /* new storage: the old values stay readable from 'src' */
    if (!pc_Array_Resize(&fresh, (size_t)n, elem, h->arena)) nomem(L);
    for (lua_Integer i = 1; i <= n; i++)
      pc_Array_Set(&fresh, (size_t)i - 1, slot, array_value(L, f, src, i, objs, h->arena));
    *arr = fresh;
  } else {
    /* Values first (src may be this very field), then the stores. */
    for (lua_Integer i = 1; i <= n; i++) {
      pc_Value v = array_value(L, f, src, i, objs, h->arena);
      if ((size_t)i > arr->size) arr->size = (size_t)i;
      pc_Array_Set(arr, (size_t)i - 1, slot, v);
    }
    arr->size = (size_t)n;
  }
  if (f->is_extension) {
    for (lua_Integer i = 1; i <= n && f->message != NULL; i++) {
      lua_rawgeti(L, objs, i);
      set_ref(L, a, lpc_tomessage(L, -1, NULL), -1);
      lua_pop(L, 1);
    }
  } else {
    lua_pushvalue(L, objs);
    lua_setiuservalue(L, c, 2);
  }
  pace(L, h);
  lua_settop(L, objs - 1);
}

/* Replaces the entries of the map field of the container at 'c' with the
 * table (or map container of the same type) at 'src'; checked first. */
static void fill_map(lua_State *L, int c, int src, int *visited) {
  c = lua_absindex(L, c);
  src = lua_absindex(L, src);
  const Container *cont = lua_touserdata(L, c);
  pc_Message *msg = cont->msg;
  const pc_FieldDef *f = cont->f, *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf);
  if (lua_type(L, src) != LUA_TTABLE) {
    const Container *other = luaL_testudata(L, src, MAP_MT);
    if (other == NULL || other->f->message != f->message) {
      msg_error(L, "%s: table expected, got %s", f->full_name, tname(L, src));
      return; /* (msg_error raises) */
    }
    lua_newtable(L); /* copy through a plain table: src may be this very map */
    const pc_Map *m = pc_Message_Get(other->msg, other->f).map;
    for (size_t i = 0; m != NULL && i < m->size; i++) {
      push_scalar(L, kf, m->entries[i].key);
      push_elem(L, src, vf, m->entries[i].value, -1);
      lua_rawset(L, -3);
    }
    lua_replace(L, src);
  }
  /* Pass 1: check keys and values; message objects by key. */
  lua_newtable(L);
  int objs = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, src)) {
    check_scalar(L, kf, f->full_name, -2);
    if (vf->message != NULL) {
      elem_object(L, vf, -1, msg, visited);
      lua_pushvalue(L, -3);
      lua_insert(L, -2);
      lua_rawset(L, objs);
    } else {
      check_scalar(L, vf, f->full_name, -1);
    }
    lua_pop(L, 1);
  }
  /* Pass 2: store into the emptied map. */
  lua_getiuservalue(L, c, 1);
  int a = push_anchor(L, -1);
  Holder *h = anchor_holder(L, a);
  pc_Map *map = pc_Message_MutableMap(msg, f, h->arena);
  if (map == NULL) nomem(L);
  pc_Map_Clear(map);
  lua_pushnil(L);
  while (lua_next(L, src)) {
    pc_Value k = check_scalar(L, kf, f->full_name, -2), v;
    if (ks == kPc_Slot_String && !pc_StringView_Copy(&k.s, k.s.data, k.s.size, h->arena)) nomem(L);
    if (vf->message != NULL) {
      memset(&v, 0, sizeof(v));
      lua_pushvalue(L, -2);
      lua_rawget(L, objs);
      v.m = lpc_tomessage(L, -1, NULL);
      lua_pop(L, 1);
    } else {
      v = check_scalar(L, vf, f->full_name, -1);
      if ((vf->type == kPc_Type_String || vf->type == kPc_Type_Bytes) &&
          !pc_StringView_Copy(&v.s, v.s.data, v.s.size, h->arena))
        nomem(L);
    }
    if (pc_Map_Set(map, ks, k, v, h->arena) == NULL) nomem(L);
    lua_pop(L, 1);
  }
  lua_pushvalue(L, objs);
  lua_setiuservalue(L, c, 2);
  pace(L, h);
  lua_settop(L, objs - 1);
}

/* Empties the repeated or map field 'f' keeping its storage for reuse. */
static void empty_container(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f) {
  pc_Value v = pc_Message_Get(msg, f);
  if (f->is_map) {
    if (v.map != NULL) pc_Map_Clear(v.map);
  } else if (v.a != NULL) {
    v.a->size = 0;
  }
  if (!f->is_extension) {
    push_container(L, obj, msg, f);
    lua_pushnil(L);
    lua_setiuservalue(L, -2, 2);
    lua_pop(L, 1);
  }
}

/* -- Writing --------------------------------------------------------------- */

/* m[f] = value at 'v' for the message object at 'obj'. */
static void set_field(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f, int v,
                      int *visited) {
  obj = lua_absindex(L, obj);
  v = lua_absindex(L, v);
  int singular_string = f->label != kPc_Label_Repeated && !f->is_extension &&
                        (f->type == kPc_Type_String || f->type == kPc_Type_Bytes);
  if (lua_isnil(L, v) && f->label == kPc_Label_Repeated) {
    empty_container(L, obj, msg, f);
    return;
  }
  if (f->label == kPc_Label_Repeated) {
    if (f->is_extension) {
      int a = push_anchor(L, obj);
      if (pc_Message_MutableArray(msg, f, anchor_holder(L, a)->arena) == NULL) nomem(L);
      lua_settop(L, a - 1);
    }
    push_container(L, obj, msg, f);
    if (f->is_map)
      fill_map(L, -1, v, visited);
    else
      fill_array(L, -1, v, visited);
    lua_pop(L, 1);
    return;
  }
  if (lua_isnil(L, v)) {
    if ((f->message != NULL || singular_string) && !f->is_extension) {
      int a = push_anchor(L, obj);
      set_ref(L, a, pc_Message_Slot(msg, f), v);
      lua_pop(L, 1);
    }
    pc_Message_ClearField(msg, f);
    return;
  }
  int scalar = f->label != kPc_Label_Repeated && f->message == NULL && f->type != kPc_Type_String &&
               f->type != kPc_Type_Bytes;
  if (scalar && !f->is_extension) {
    pc_Message_Set(msg, f, check_scalar(L, f, f->full_name, v));
    return;
  }
  if (singular_string) {
    /* The slot points into the Lua string, which the anchor keeps (under
     * the slot's address, so overwriting a field in a loop holds only the
     * last string, and needs no arena). */
    pc_Value val = check_scalar(L, f, f->full_name, v);
    int a = push_anchor(L, obj);
    set_ref(L, a, pc_Message_Slot(msg, f), v);
    pc_Message_Set(msg, f, val);
    lua_settop(L, a - 1);
    return;
  }
  int a = push_anchor(L, obj);
  Holder *h = NULL;
  pc_Arena *arena = NULL;
  if (f->message == NULL || f->is_extension) {
    h = anchor_holder(L, a);
    arena = h->arena;
  }
  pc_Value val;
  memset(&val, 0, sizeof(val));
  if (f->message != NULL) {
    val.m = check_message(L, f->message, f->full_name, v, visited);
    check_no_cycle(L, f->full_name, val.m, f->message, msg);
    set_ref(L, a, f->is_extension ? (const void *)val.m : pc_Message_Slot(msg, f), -1);
    lua_pop(L, 1);
  } else {
    val = check_scalar(L, f, f->full_name, v);
    if ((f->type == kPc_Type_String || f->type == kPc_Type_Bytes) &&
        !pc_StringView_Copy(&val.s, val.s.data, val.s.size, arena))
      nomem(L);
  }
  if (f->is_extension) {
    pc_Value *cell = pc_Message_MutableExtension(msg, f, arena);
    if (cell == NULL) {
      nomem(L);
      return;
    }
    *cell = val;
  } else {
    pc_Message_Set(msg, f, val);
  }
  if (h != NULL) pace(L, h);
  lua_settop(L, a - 1);
}

/* Stores the value at 'v' into the plain slot of 'e' when it is exactly
 * what the slot takes (an integer in range, a number, a boolean): 1 when
 * stored, 0 when the general path must check it (and raise). */
LPC_INLINE int store_plain(lua_State *L, char *msg, const LookupEntry *e, int v) {
  char *p = msg + e->offset;
  switch (e->write) {
  case kWrite_U32:
  case kWrite_I32:
  case kWrite_I64: {
    if (!lua_isinteger(L, v)) return 0;
    lua_Integer i = lua_tointegerx(L, v, NULL);
    if (e->write == kWrite_I64) {
      int64_t x = (int64_t)i;
      memcpy(p, &x, 8);
    } else if (e->write == kWrite_U32) {
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
  case kWrite_F64:
  case kWrite_F32: {
    if (lua_type(L, v) != LUA_TNUMBER) return 0;
    lua_Number d = lua_tonumberx(L, v, NULL);
    if (e->write == kWrite_F64) {
      double x = (double)d;
      memcpy(p, &x, 8);
    } else {
      float x = (float)d;
      memcpy(p, &x, 4);
    }
    return 1;
  }
  case kWrite_Bool:
    if (!lua_isboolean(L, v)) return 0;
    *p = (char)lua_toboolean(L, v);
    return 1;
  default: return 0;
  }
}

/* m[key] = value at 3 for the message 'msg', when store_plain did not
 * take it. */
static void newindex_slow(lua_State *L, const Lookup *lk, const LookupEntry *e, pc_Message *msg) {
  const pc_FieldDef *f = e ? entry_field(lk, e) : lookup_slow(L, lk->def, 2);
  if (plain_slot(f) && !lua_isnil(L, 3)) {
    pc_Value v = check_scalar(L, f, f->full_name, 3);
    memcpy((char *)msg + f->offset, &v, pc_Slot_Size(f->slot));
    return;
  }
  int visited = 0;
  set_field(L, 1, msg, f, 3, &visited);
}

LPC_INLINE void newindex_common(lua_State *L, int kind) {
  const Lookup *lk = lua_touserdata(L, lua_upvalueindex(1));
  char *msg = msg_at1(L, kind);
  const LookupEntry *e = probe(lk, lua_topointer(L, 2));
  if (e != NULL && store_plain(L, msg, e, 3)) return;
  newindex_slow(L, lk, e, msg);
}

/* -- m.name = v   (standalone message) */
static int lpc_message_newindex(lua_State *L) {
  newindex_common(L, kStandalone);
  return 0;
}

/* -- m.name = v   (view) */
static int lpc_view_newindex(lua_State *L) {
  newindex_common(L, kView);
  return 0;
}

/* Marks (on = 1) or unmarks the table at 't' as being converted; with
 * on = -1 only checks. Returns whether it was marked. The table of marks
 * lives in the registry; the first mark of a top-level conversion
 * (*visited == 0) starts a fresh one, so marks left by a conversion that
 * raised are forgotten. */
static int visit(lua_State *L, int t, int on, int *visited) {
  if (*visited == 0) {
    if (on != 1) return 0;
    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &kVisitKey);
    *visited = 1;
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kVisitKey);
  lua_pushvalue(L, t);
  int was = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 1);
  if (on >= 0) {
    lua_pushvalue(L, t);
    if (on)
      lua_pushboolean(L, 1);
    else
      lua_pushnil(L);
    lua_rawset(L, -3);
  }
  lua_pop(L, 1);
  return was;
}

/* Pushes a new standalone message filled from the table at 't'; 'type' is
 * the index of its Type (whose user value 2 is the instance metatable).
 * One pass over the table: each key is found by its string's address and
 * plain slots take their values directly; the one allocation is the
 * message's block. */
static void construct(lua_State *L, int type, int t, int *visited) {
  const TypeBox *box = lua_touserdata(L, type);
  const pc_MessageDef *def = box->def;
  const Lookup *lk = box->lookup;
  if (*visited && visit(L, t, -1, visited))
    msg_error(L, "%s: table with a cycle given to the constructor", def->full_name);
  char *msg = lua_newuserdatauv(L, def->size, 0);
  pc_Message_Init(def, msg);
  lua_getiuservalue(L, type, 2);
  lua_setmetatable(L, -2);
  int obj = lua_gettop(L);
  int marked = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    const LookupEntry *e = probe(lk, lua_topointer(L, -2));
    if (e != NULL && store_plain(L, msg, e, -1)) {
      lua_pop(L, 1);
      continue;
    }
    int v = obj + 2;
    const pc_FieldDef *f = e ? entry_field(lk, e) : lookup_slow(L, def, v - 1);
    if (plain_slot(f) && !lua_isnil(L, v)) {
      pc_Value x = check_scalar(L, f, f->full_name, v); /* plain slot: store directly */
      memcpy(msg + f->offset, &x, pc_Slot_Size(f->slot));
      lua_settop(L, v - 1);
      continue;
    }
    if (f->message != NULL && !marked && lua_type(L, v) == LUA_TTABLE) {
      visit(L, t, 1, visited);
      marked = 1;
    }
    set_field(L, obj, msg, f, v, visited);
    lua_settop(L, v - 1);
  }
  if (marked) visit(L, t, 0, visited);
}

/* -- m = T{...} or T() */
int lpc_type_call(lua_State *L) {
  /* Only a Type has this __call, and __metatable hides it: arg 1 is one. */
  int t = lua_type(L, 2);
  if (t == LUA_TTABLE) {
    int visited = 0;
    construct(L, 1, 2, &visited);
    return 1;
  }
  const pc_MessageDef *def = *(const pc_MessageDef **)lua_touserdata(L, 1);
  if (t != LUA_TNONE && t != LUA_TNIL) /* named as the caller sees it: T(fields) */
    msg_error(L, "bad argument #1 to '%s' (table expected, got %s)", def->full_name,
              luaL_typename(L, 2));
  lua_settop(L, 1);
  lua_getiuservalue(L, 1, 2);
  new_standalone(L, def, 2);
  return 1;
}

/* -- Repeated containers ----------------------------------------------------- */

static Container *check_container(lua_State *L, int idx, const char *mt) {
  return luaL_checkudata(L, idx, mt);
}

/* -- v = c[i]   (repeated; nil outside 1..#c) */
static int lpc_repeated_index(lua_State *L) {
  Container *c = check_container(L, 1, REPEATED_MT);
  const pc_Array *arr = pc_Message_Get(c->msg, c->f).a;
  lua_Integer i = lua_tointeger(L, 2);
  if (!lua_isinteger(L, 2) || arr == NULL || i < 1 || (size_t)i > arr->size) return 0;
  push_elem(L, 1, c->f, pc_Array_Get(arr, (size_t)i - 1, pc_FieldDef_ElemSlot(c->f)), 2);
  return 1;
}

/* -- c[i] = v   (1..#c replaces, #c+1 appends, c[#c] = nil removes the last) */
static int lpc_repeated_newindex(lua_State *L) {
  Container *c = check_container(L, 1, REPEATED_MT);
  const pc_FieldDef *f = c->f;
  pc_Array *arr = pc_Message_Get(c->msg, f).a;
  size_t size = arr ? arr->size : 0;
  lua_Integer i = check_integer(L, f->full_name, 2);
  lua_settop(L, 3);
  if (lua_isnil(L, 3)) {
    if ((size_t)i != size || i < 1)
      msg_error(L, "%s: only the last element (%I) can be removed, not %I", f->full_name,
                (lua_Integer)size, i);
    arr->size--;
    if (f->message != NULL) keep_elem(L, 1, 2, 3);
    return 0;
  }
  if (i < 1 || (size_t)i > size + 1)
    msg_error(L, "%s: index %I out of range (size %I)", f->full_name, i, (lua_Integer)size);
  int visited = 0;
  pc_Value v;
  memset(&v, 0, sizeof(v));
  if (f->message != NULL)
    v.m = elem_object(L, f, 3, c->msg, &visited); /* at 4 */
  else
    v = check_scalar(L, f, f->full_name, 3);
  lua_getiuservalue(L, 1, 1);
  int a = push_anchor(L, -1);
  Holder *h = anchor_holder(L, a);
  if ((f->type == kPc_Type_String || f->type == kPc_Type_Bytes) &&
      !pc_StringView_Copy(&v.s, v.s.data, v.s.size, h->arena))
    nomem(L);
  if ((size_t)i == size + 1) {
    arr = pc_Message_MutableArray(c->msg, f, h->arena);
    if (arr == NULL || !pc_Array_Append(arr, &v, pc_FieldDef_ElemSize(f), h->arena)) nomem(L);
  } else {
    pc_Array_Set(arr, (size_t)i - 1, pc_FieldDef_ElemSlot(f), v);
  }
  if (f->message != NULL) keep_elem(L, 1, 2, 4);
  pace(L, h);
  return 0;
}

/* -- n = #c */
static int lpc_container_len(lua_State *L) {
  Container *c = lua_touserdata(L, 1);
  pc_Value v = pc_Message_Get(c->msg, c->f);
  size_t n = c->f->is_map ? (v.map ? v.map->size : 0) : (v.a ? v.a->size : 0);
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

static int repeated_next(lua_State *L) {
  lua_Integer i = luaL_checkinteger(L, 2) + 1;
  lua_pushinteger(L, i);
  if (lua_geti(L, 1, i) == LUA_TNIL) return 1;
  return 2;
}

/* -- for i, v in pairs(c)   (repeated: as ipairs) */
static int lpc_repeated_pairs(lua_State *L) {
  check_container(L, 1, REPEATED_MT);
  lua_pushcfunction(L, repeated_next);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  return 3;
}

/* -- Map containers ---------------------------------------------------------- */

/* -- v = c[k]   (nil when absent; a key of the wrong type raises) */
static int lpc_map_index(lua_State *L) {
  Container *c = check_container(L, 1, MAP_MT);
  const pc_FieldDef *kf = pc_FieldDef_MapKey(c->f), *vf = pc_FieldDef_MapValue(c->f);
  pc_Value k = check_scalar(L, kf, c->f->full_name, 2);
  const pc_Value *v = pc_Map_Find(pc_Message_Get(c->msg, c->f).map, pc_FieldDef_ElemSlot(kf), k);
  if (v == NULL) return 0;
  push_elem(L, 1, vf, *v, 2);
  return 1;
}

/* -- c[k] = v   (nil removes) */
static int lpc_map_newindex(lua_State *L) {
  Container *c = check_container(L, 1, MAP_MT);
  const pc_FieldDef *f = c->f, *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf);
  lua_settop(L, 3);
  pc_Value k = check_scalar(L, kf, f->full_name, 2);
  if (lua_isnil(L, 3)) {
    pc_Map_Delete(pc_Message_Get(c->msg, f).map, ks, k);
    if (vf->message != NULL) keep_elem(L, 1, 2, 3);
    return 0;
  }
  int visited = 0;
  pc_Value v;
  memset(&v, 0, sizeof(v));
  if (vf->message != NULL)
    v.m = elem_object(L, vf, 3, c->msg, &visited); /* at 4 */
  else
    v = check_scalar(L, vf, f->full_name, 3);
  lua_getiuservalue(L, 1, 1);
  int a = push_anchor(L, -1);
  Holder *h = anchor_holder(L, a);
  if ((vf->type == kPc_Type_String || vf->type == kPc_Type_Bytes) &&
      !pc_StringView_Copy(&v.s, v.s.data, v.s.size, h->arena))
    nomem(L);
  pc_Map *map = pc_Message_MutableMap(c->msg, f, h->arena);
  if (map == NULL) nomem(L);
  if (pc_Map_Find(map, ks, k) == NULL && ks == kPc_Slot_String &&
      !pc_StringView_Copy(&k.s, k.s.data, k.s.size, h->arena))
    nomem(L);
  if (pc_Map_Set(map, ks, k, v, h->arena) == NULL) nomem(L);
  if (vf->message != NULL) keep_elem(L, 1, 2, 4);
  pace(L, h);
  return 0;
}

static int map_next(lua_State *L) {
  Container *c = lua_touserdata(L, 1);
  lua_Integer i = lua_tointeger(L, lua_upvalueindex(1));
  const pc_Map *map = pc_Message_Get(c->msg, c->f).map;
  if (map == NULL || (size_t)i >= map->size) return 0;
  lua_pushinteger(L, i + 1);
  lua_replace(L, lua_upvalueindex(1));
  lua_settop(L, 1);
  push_scalar(L, pc_FieldDef_MapKey(c->f), map->entries[i].key);
  push_elem(L, 1, pc_FieldDef_MapValue(c->f), map->entries[i].value, 2);
  return 2;
}

/* -- for k, v in pairs(c)   (map: in insertion order) */
static int lpc_map_pairs(lua_State *L) {
  check_container(L, 1, MAP_MT);
  lua_pushinteger(L, 0);
  lua_pushcclosure(L, map_next, 1);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

/* -- Module functions ---------------------------------------------------------- */

/* The field or oneof named by argument 'arg' of the message type. */
static const pc_FieldDef *check_field(lua_State *L, const pc_MessageDef *def, int arg,
                                      const pc_OneofDef **oneof) {
  size_t len;
  const char *name = luaL_checklstring(L, arg, &len);
  const pc_FieldDef *f = pc_MessageDef_FindFieldByName(def, name, len);
  if (f != NULL) return f;
  if (oneof != NULL) {
    *oneof = pc_MessageDef_FindOneof(def, name, len);
    if (*oneof != NULL) return NULL;
  }
  msg_error(L, "%s.%s: no such field", def->full_name, name);
  return NULL;
}

/* -- bool = pc.has(m, name)   (name: a field or a oneof) */
static int lpc_message_has(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_checkmessage(L, 1, &def);
  const pc_OneofDef *o = NULL;
  const pc_FieldDef *f = check_field(L, def, 2, &o);
  lua_pushboolean(L,
                  f ? pc_Message_Has(msg, f) : o != NULL && pc_Message_WhichOneof(msg, o) != NULL);
  return 1;
}

/* Clears every field (containers keep their storage), the unknown bytes and
 * the extensions of the message object at 1. */
static void clear_all(lua_State *L, pc_Message *msg, const pc_MessageDef *def) {
  lua_settop(L, 1);
  lua_pushnil(L);
  int visited = 0;
  for (uint32_t i = 0; i < def->field_count; i++)
    set_field(L, 1, msg, &def->fields[i], 2, &visited);
  size_t n;
  const pc_Extension *e = pc_Message_Extensions(msg, &n);
  while (n > 0) {
    pc_Message_ClearField(msg, e[n - 1].field);
    e = pc_Message_Extensions(msg, &n);
  }
  pc_Message_DiscardUnknown(msg);
}

/* -- pc.clear(m [, name])   (one field, every member of a oneof, or all) */
static int lpc_message_clear(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_checkmessage(L, 1, &def);
  if (lua_isnoneornil(L, 2)) {
    clear_all(L, msg, def);
    return 0;
  }
  const pc_OneofDef *o = NULL;
  const pc_FieldDef *f = check_field(L, def, 2, &o);
  lua_settop(L, 2);
  lua_pushnil(L);
  int visited = 0;
  if (f != NULL) {
    set_field(L, 1, msg, f, 3, &visited);
  } else if (o != NULL) {
    for (uint32_t i = 0; i < o->field_count; i++) set_field(L, 1, msg, o->fields[i], 3, &visited);
  }
  return 0;
}

/* -- name = pc.which_oneof(m, oneof)   (nil when no member is set) */
static int lpc_message_which_oneof(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_checkmessage(L, 1, &def);
  size_t len;
  const char *name = luaL_checklstring(L, 2, &len);
  const pc_OneofDef *o = pc_MessageDef_FindOneof(def, name, len);
  if (o == NULL) msg_error(L, "%s: no oneof named '%s'", def->full_name, name);
  const pc_FieldDef *f = o != NULL ? pc_Message_WhichOneof(msg, o) : NULL;
  if (f == NULL) return 0;
  lua_pushstring(L, f->name);
  return 1;
}

/* -- T = pc.type_of(m)   (nil for a value that is not a message) */
static int lpc_message_type_of(lua_State *L) {
  const pc_MessageDef *def = NULL;
  if (lpc_tomessage(L, 1, &def) == NULL) return 0;
  lpc_pushtype(L, def);
  return 1;
}

/* -- copy = pc.clone(m)   (deep; the copy shares nothing with m) */
static int lpc_message_clone(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *src = lpc_checkmessage(L, 1, &def);
  pc_Message *dst = new_standalone(L, def, 0);
  int obj = lua_gettop(L);
  Holder *h = anchor_holder(L, obj);
  if (!pc_Message_Merge(dst, src, def, h->arena)) nomem(L);
  pace(L, h);
  return 1;
}

/* Merges the message at 'src' into the object at 'dst' (same type). */
static void merge(lua_State *L, int dst, int src) {
  const pc_MessageDef *def = NULL;
  pc_Message *d = lpc_checkmessage(L, dst, &def), *s = lpc_tomessage(L, src, NULL);
  int a = push_anchor(L, dst);
  Holder *h = anchor_holder(L, a);
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    if (!pc_Message_Has(s, f)) continue;
    if (f->slot == kPc_Slot_Message && pc_Message_Has(d, f)) {
      /* The sub-message may be owned elsewhere: merge through its object. */
      push_field(L, dst, d, f);
      push_field(L, src, s, f);
      merge(L, -2, -1);
      lua_pop(L, 2);
      continue;
    }
    if (f->slot == kPc_Slot_Message) {
      lua_pushnil(L);
      set_ref(L, a, pc_Message_Slot(d, f), -1);
      lua_pop(L, 1);
    }
    if (!pc_Message_MergeField(d, s, f, h->arena)) nomem(L);
  }
  size_t n;
  const char *u = pc_Message_GetUnknown(s, &n);
  if (n > 0 && !pc_Message_AddUnknown(d, u, n, h->arena)) nomem(L);
  const pc_Extension *e = pc_Message_Extensions(s, &n);
  for (size_t i = 0; i < n; i++) {
    const pc_FieldDef *f = e[i].field;
    if (f->message != NULL && f->label != kPc_Label_Repeated &&
        pc_Message_GetExtension(d, f) != NULL) {
      push_field(L, dst, d, f);
      push_field(L, src, s, f);
      merge(L, -2, -1);
      lua_pop(L, 2);
      e = pc_Message_Extensions(s, &n);
      continue;
    }
    if (!pc_Message_MergeField(d, s, f, h->arena)) nomem(L);
  }
  pace(L, h);
  lua_settop(L, a - 1);
}

/* -- pc.merge(dst, src)   (protobuf merge: see pc_Message_Merge; same type) */
static int lpc_message_merge(lua_State *L) {
  const pc_MessageDef *dd = NULL, *sd = NULL;
  pc_Message *d = lpc_checkmessage(L, 1, &dd);
  pc_Message *s = lpc_checkmessage(L, 2, &sd);
  if (dd != sd)
    msg_error(L, "bad argument #2 to 'merge' (%s expected, got %s)", dd->full_name, sd->full_name);
  if (d == s) return 0;
  check_no_cycle(L, dd->full_name, s, sd, d);
  merge(L, 1, 2);
  return 0;
}

/* -- a == b   (same type and equal values) */
static int lpc_message_eq(lua_State *L) {
  const pc_MessageDef *da = NULL, *db = NULL;
  pc_Message *a = lpc_tomessage(L, 1, &da), *b = lpc_tomessage(L, 2, &db);
  lua_pushboolean(L, a != NULL && b != NULL && da == db && pc_Message_Equal(a, b, da));
  return 1;
}

static const pc_FieldDef *check_extension(lua_State *L, const pc_MessageDef *def, int arg) {
  const char *name = luaL_checkstring(L, arg);
  const pc_FieldDef *f = pc_Pool_FindExtension(def->file->pool, name);
  if (f == NULL) {
    msg_error(L, "%s: no extension named '%s'", def->full_name, name);
    return NULL;
  }
  if (f->containing != def)
    msg_error(L, "%s: '%s' extends %s, not this type", def->full_name, name,
              f->containing->full_name);
  return f;
}

/* -- v = pc.get_extension(m, "pkg.name")   (its default when unset) */
static int lpc_message_get_extension(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_checkmessage(L, 1, &def);
  const pc_FieldDef *f = check_extension(L, def, 2);
  if (f->label == kPc_Label_Repeated) {
    int a = push_anchor(L, 1);
    Holder *h = anchor_holder(L, a);
    if (pc_Message_MutableArray(msg, f, h->arena) == NULL) nomem(L);
  }
  push_field(L, 1, msg, f);
  return 1;
}

/* -- pc.set_extension(m, "pkg.name", v)   (nil clears) */
static int lpc_message_set_extension(lua_State *L) {
  const pc_MessageDef *def = NULL;
  pc_Message *msg = lpc_checkmessage(L, 1, &def);
  const pc_FieldDef *f = check_extension(L, def, 2);
  lua_settop(L, 3);
  int visited = 0;
  set_field(L, 1, msg, f, 3, &visited);
  return 0;
}

/* -- bytes = core.unknown_fields(m)   (raw wire bytes kept, "" when none) */
static int lpc_message_unknown(lua_State *L) {
  pc_Message *msg = lpc_checkmessage(L, 1, NULL);
  size_t n;
  const char *u = pc_Message_GetUnknown(msg, &n);
  lua_pushlstring(L, n ? u : "", n);
  return 1;
}

/* -- core.add_unknown_fields(m, bytes)   (appends raw wire bytes; for tests
 * and codecs: the bytes are not checked here) */
static int lpc_message_add_unknown(lua_State *L) {
  pc_Message *msg = lpc_checkmessage(L, 1, NULL);
  size_t n;
  const char *s = luaL_checklstring(L, 2, &n);
  int a = push_anchor(L, 1);
  Holder *h = anchor_holder(L, a);
  if (!pc_Message_AddUnknown(msg, s, n, h->arena)) nomem(L);
  pace(L, h);
  return 0;
}

/* -- bytes = core.arena_size(m)   (bytes the arena of m's anchor has taken
 * from the allocator, 0 when it has none: for tests and benchmarks) */
static int lpc_message_arena_size(lua_State *L) {
  lpc_checkmessage(L, 1, NULL);
  int a = push_anchor(L, 1);
  Holder *h = luaL_testudata(L, a, ARENA_MT);
  if (h == NULL) {
    push_refs(L, a, 0);
    if (lua_istable(L, -1) && lua_rawgeti(L, -1, 1) != LUA_TNIL) h = lua_touserdata(L, -1);
  }
  lua_pushinteger(L, h ? (lua_Integer)pc_Arena_SpaceAllocated(h->arena) : 0);
  return 1;
}

/* -- bool = core.is_message(v) */
static int lpc_message_is(lua_State *L) {
  lua_pushboolean(L, lpc_tomessage(L, 1, NULL) != NULL);
  return 1;
}

/* -- bytes = core.sizeof(m)   (bytes of the message's own block: for the
 * benchmarks and tests of the layout) */
static int lpc_message_sizeof(lua_State *L) {
  const pc_MessageDef *def = NULL;
  lpc_checkmessage(L, 1, &def);
  lua_pushinteger(L, (lua_Integer)def->size);
  return 1;
}

/* The benchmark floor: a userdata whose __index returns a constant. */
static int const_index(lua_State *L) {
  lua_pushinteger(L, 0);
  return 1;
}

/* -- u = core._bench_const_index()   (internal: the benchmark's baseline) */
static int lpc_bench_const_index(lua_State *L) {
  lua_newuserdatauv(L, 8, 0);
  if (luaL_newmetatable(L, "protocall._BenchConst")) {
    lua_pushcfunction(L, const_index);
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
    lua_pushfstring(L, "%s: %p", tname(L, 1), lua_topointer(L, 1));
    return 1;
  }
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  return 1;
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
  lua_pushcclosure(L, kind == kStandalone ? lpc_message_index : lpc_view_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushvalue(L, names);
  lua_pushcclosure(L, kind == kStandalone ? lpc_message_newindex : lpc_view_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_pushcfunction(L, lpc_message_eq);
  lua_setfield(L, -2, "__eq");
  lua_pushcfunction(L, lpc_message_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushstring(L, def->full_name);
  lua_setfield(L, -2, "__name");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pushlightuserdata(L, (void *)def);
  lua_rawsetp(L, -2, &kDefKey);
  lua_pushinteger(L, kind);
  lua_rawsetp(L, -2, &kKindKey);
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
        size_t j = hash_ptr(keys[i], sh) & (c - 1);
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
  size_t entries = sizeof(Lookup) + (cap - 1) * sizeof(LookupEntry);
  size_t size = entries + cap * sizeof(const pc_FieldDef *);
  Lookup *lk = lua_newuserdatauv(L, size, 1);
  memset(lk, 0, size);
  lk->mask = cap - 1;
  lk->shift = shift;
  lk->def = def;
  lk->fields = (const pc_FieldDef **)(void *)((char *)lk + entries);
  for (size_t j = 0; j < cap; j++) lk->e[j].key = lk;
  for (uint32_t i = 0; i < def->field_count; i++) {
    lua_rawgeti(L, names, (lua_Integer)i + 1);
    if (lua_rawlen(L, -1) <= 40) { /* LUAI_MAXSHORTLEN: interned */
      size_t j = hash_ptr(lua_topointer(L, -1), shift) & lk->mask;
      while (lk->e[j].key != lk) j = (j + 1) & lk->mask;
      lk->e[j].key = lua_topointer(L, -1);
      lk->e[j].offset = def->fields[i].offset;
      lk->e[j].read = read_kind(&def->fields[i]);
      lk->e[j].write = write_kind(&def->fields[i]);
      lk->fields[j] = &def->fields[i];
    }
    lua_pop(L, 1);
  }
  lua_pushvalue(L, names);
  lua_setiuservalue(L, -2, 1);
  lua_remove(L, names);
}

void lpc_maketype_metatables(lua_State *L, int type_idx, const pc_MessageDef *def) {
  type_idx = lua_absindex(L, type_idx);
  make_lookup(L, def);
  int names = lua_gettop(L);
  /* The Type owns this Lookup through its metatables: instances keep
   * their Type alive. */
  ((TypeBox *)lua_touserdata(L, type_idx))->lookup = lua_touserdata(L, names);
  make_mt(L, def, names, kStandalone);
  lua_pushvalue(L, type_idx);
  lua_rawsetp(L, -2, &kTypeKey);
  lua_setiuservalue(L, type_idx, 2);
  make_mt(L, def, names, kView);
  lua_pushvalue(L, type_idx);
  lua_rawsetp(L, -2, &kTypeKey);
  lua_setiuservalue(L, type_idx, 3);
  lua_pop(L, 1);
}

void lpc_open_message(lua_State *L) {
  static const luaL_Reg funcs[] = {{"has", lpc_message_has},
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
                                   {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
  /* Ephemeron table: an anchor keeps what its memory points to alive. */
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kRefsKey);
  luaL_newmetatable(L, ARENA_MT);
  lua_pushcfunction(L, lpc_arena_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  static const luaL_Reg rep[] = {{"__index", lpc_repeated_index},
                                 {"__newindex", lpc_repeated_newindex},
                                 {"__len", lpc_container_len},
                                 {"__pairs", lpc_repeated_pairs},
                                 {NULL, NULL}};
  luaL_newmetatable(L, REPEATED_MT);
  luaL_setfuncs(L, rep, 0);
  lua_pop(L, 1);
  static const luaL_Reg map[] = {{"__index", lpc_map_index},
                                 {"__newindex", lpc_map_newindex},
                                 {"__len", lpc_container_len},
                                 {"__pairs", lpc_map_pairs},
                                 {NULL, NULL}};
  luaL_newmetatable(L, MAP_MT);
  luaL_setfuncs(L, map, 0);
  lua_pop(L, 1);
}
