/* Pools, types and enums as Lua values, and the Lua declarations
 * pc.message / pc.enum (doc/guide.md "Schemas"): a declaration becomes a one-type
 * pc_FileDesc added with pc_Pool_AddFile, as every other schema source. */
#include "lpc_options.h"
#include "schema/wkt.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MT LPC_POOL_MT
#define TYPE_MT LPC_TYPE_MT

/* Registry tables by address. Under LuaJIT a table in a weak value that an
 * object being finalized reaches stays there for a collection cycle (it clears
 * white values and userdata it found white, not such tables), after its pool's
 * defs were freed (by the sweep after its box's __gc: lpc_anchor.c); a new
 * pool's def may then have the freed one's address. An Enum is such a table; Types and Pools are
 * userdata. So an entry is used only while it still names its live pool: of_pool. */
static char kPoolsKey;   /* registry: weak-valued pc_Pool* -> Pool */
static char kBoxesKey;   /* registry: weak-keyed owned Pool -> true (find_box) */
static char kTypesKey;   /* registry: weak-valued def -> Type / Enum */
static char kEnumDefKey; /* an Enum's metatable field: lightuserdata def */

char lpc_type_metatables_key;

/* -- Pools ------------------------------------------------------------------ */

/* Whether the value at 'idx' (a Pool or nil) is the Pool of 'pool' (its
 * __gc keeps b->pool while the pool waits for the Reaper, which frees it
 * once the box is gone; b->pool is cleared when freed at once). */
static int of_pool(lua_State *L, int idx, const pc_Pool *pool) {
  const lpc_PoolBox *b = lua_touserdata(L, idx);
  return b != NULL && b->pool == pool;
}

pc_Pool *lpc_check_pool(lua_State *L, int idx) {
  lpc_PoolBox *b = luaL_checkudata(L, idx, POOL_MT);
  if (b->pool == NULL || b->finalized) /* its __gc ran: a finalizer reached it */
    luaL_error(L, "protocall.Pool used after its __gc ran");
  return b->pool;
}

/* -- pool = core.pool_new()   (an empty pool) */
static int lpc_pool_new(lua_State *L) {
  lpc_PoolBox *b = lua_newuserdatauv(L, sizeof(lpc_PoolBox), 1); /* 1: its group's token (__gc) */
  b->pool = NULL;
  b->owned = 1;
  b->finalized = 0;
  luaL_setmetatable(L, POOL_MT);
  void *ud;
  lua_Alloc f = lua_getallocf(L, &ud);
  b->pool = pc_Pool_New(f, ud);
  if (b->pool == NULL) return luaL_error(L, "not enough memory");
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kPoolsKey);
  lua_pushvalue(L, -2);
  lua_rawsetp(L, -2, b->pool);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kBoxesKey);
  lua_pushvalue(L, -3);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 2);
  return 1;
}

/* Pushes the registry's table of pools; raises when the module was not
 * opened in this state (a host calling protocall_pushpool too early). */
static void push_pools(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kPoolsKey) != LUA_TTABLE)
    luaL_error(L, "protocall: open the module first (luaopen_protocall)");
}

void lpc_push_host_pool(lua_State *L, pc_Pool *pool) {
  push_pools(L);
  if (lua_rawgetp(L, -1, pool) != LUA_TNIL && of_pool(L, -1, pool)) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  lpc_PoolBox *b = lua_newuserdatauv(L, sizeof(lpc_PoolBox), 0);
  b->pool = pool;
  b->owned = 0;
  b->finalized = 0;
  luaL_setmetatable(L, POOL_MT);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, pool);
  lua_remove(L, -2);
}

/* Replaces nil at the top with the owned Pool of 'pool' when a weak key
 * still holds it: a Pool an object being finalized reaches leaves weak
 * values (Lua 5.4 clears resurrected objects from them, LuaJIT finalized
 * userdata), not weak keys, and a Type made then must still keep its pool
 * (lpc_push_type). A walk of every Pool: the rare path. */
static void find_box(lua_State *L, const pc_Pool *pool) {
  lua_pop(L, 1);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kBoxesKey);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    if (of_pool(L, -1, pool)) {
      lua_remove(L, -2);
      return;
    }
  }
  lua_pop(L, 1);
  lua_pushnil(L);
}

void lpc_push_pool(lua_State *L, const pc_Pool *pool) {
  push_pools(L);
  lua_rawgetp(L, -1, pool);
  if (!of_pool(L, -1, pool)) find_box(L, pool);
  lua_remove(L, -2);
}

/* -- Types ------------------------------------------------------------------ */

const pc_MessageDef *lpc_check_type(lua_State *L, int idx) {
  lpc_TypeBox *t = luaL_checkudata(L, idx, TYPE_MT);
  return t->def;
}

void lpc_push_type(lua_State *L, const pc_MessageDef *def) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kTypesKey);
  if (lua_rawgetp(L, -1, def) != LUA_TNIL) {
    lua_getiuservalue(L, -1, 1);
    int live = of_pool(L, -1, def->file->pool);
    lua_pop(L, 1);
    if (live) {
      lua_remove(L, -2);
      return;
    }
  }
  lua_pop(L, 1);
  lpc_TypeBox *t = lua_newuserdatauv(L, sizeof(lpc_TypeBox), 4);
  t->def = def;
  t->lookup = NULL;
  t->arena_hint = 0;
  luaL_setmetatable(L, TYPE_MT);
  lpc_push_pool(L, def->file->pool);
  lua_setiuservalue(L, -2, 1);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_type_metatables_key); /* lpc_open_message's */
  lua_pushvalue(L, -2);
  lua_call(L, 1, 0);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, def);
  lua_remove(L, -2);
}

/* -- v = T.full_name, T.name */
static int lpc_type_index(lua_State *L) {
  const pc_MessageDef *def = lpc_check_type(L, 1);
  const char *k = lua_tostring(L, 2);
  if (k != NULL && strcmp(k, "full_name") == 0)
    lua_pushstring(L, def->full_name);
  else if (k != NULL && strcmp(k, "name") == 0)
    lua_pushstring(L, def->name);
  else if (k != NULL && strcmp(k, "pool") == 0)
    lua_getiuservalue(L, 1, 1);
  else
    lua_pushnil(L);
  return 1;
}

/* -- s = tostring(T)   ("protocall.Type(demo.Point)") */
static int lpc_type_tostring(lua_State *L) {
  lua_pushfstring(L, "protocall.Type(%s)", lpc_check_type(L, 1)->full_name);
  return 1;
}

/* -- s = tostring(Enum)   ("protocall.Enum(demo.Color)", as a Type's) */
static int lpc_enum_tostring(lua_State *L) {
  const char *name = NULL;
  if (lua_getmetatable(L, 1)) {
    lua_getfield(L, -1, "__name");
    name = lua_tostring(L, -1);
  }
  lua_pushfstring(L, "protocall.Enum(%s)", name ? name : "?");
  return 1;
}

/* Pushes the Enum table of 'e': {NAME = number, [number] = NAME}. */
static void push_enum(lua_State *L, const pc_EnumDef *e) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kTypesKey);
  if (lua_rawgetp(L, -1, e) != LUA_TNIL && lua_getmetatable(L, -1)) {
    lua_getfield(L, -1, "pool");
    int live = of_pool(L, -1, e->file->pool);
    lua_pop(L, 2);
    if (live) {
      lua_remove(L, -2);
      return;
    }
  }
  lua_pop(L, 1);
  lua_createtable(L, (int)e->value_count, (int)e->value_count);
  for (uint32_t i = e->value_count; i-- > 0;) {
    lua_pushinteger(L, e->values[i].number);
    lua_setfield(L, -2, e->values[i].name);
    lua_pushstring(L, e->values[i].name);
    lua_rawseti(L, -2, e->values[i].number);
  }
  lua_createtable(L, 0, 4);
  lua_pushfstring(L, "%s", e->full_name);
  lua_setfield(L, -2, "__name");
  lua_pushcfunction(L, lpc_enum_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushlightuserdata(L, (void *)e);
  lua_rawsetp(L, -2, &kEnumDefKey);
  lpc_push_pool(L, e->file->pool);
  lua_setfield(L, -2, "pool"); /* keeps the pool alive */
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, e);
  lua_remove(L, -2);
}

/* -- Declarations ------------------------------------------------------------- */

/* The pool the function works on: its upvalue (functions bound to a pool)
 * or argument 1 (methods); *base is the first argument after the pool. */
static pc_Pool *bound_pool(lua_State *L, int *base, int *pool_idx) {
  if (lua_type(L, lua_upvalueindex(1)) == LUA_TUSERDATA) {
    *base = 1;
    *pool_idx = lua_upvalueindex(1);
  } else {
    *base = 2;
    *pool_idx = 1;
  }
  return lpc_check_pool(L, *pool_idx);
}

static const char *arena_str(lua_State *L, pc_Arena *a, const char *s, size_t len) {
  char *r = pc_Arena_StrDup(a, s, len);
  if (r == NULL) luaL_error(L, "not enough memory");
  return r;
}

/* A name (of a type, field, oneof or enum value, or a type named by a
 * field) copied into the arena; raises when it holds a NUL byte, where C
 * would read it cut short ("f3.All\0x" as f3.All). */
static const char *arena_name(lua_State *L, pc_Arena *a, const char *s, size_t len,
                              const char *where) {
  if (memchr(s, 0, len) != NULL) luaL_error(L, "%s: a name holds no NUL byte", where);
  return arena_str(L, a, s, len);
}

static void *arena_calloc(lua_State *L, pc_Arena *a, size_t size) {
  void *p = pc_Arena_Calloc(a, size ? size : 1);
  if (p == NULL) luaL_error(L, "not enough memory");
  return p;
}

/* Splits "pkg.sub.Name" into package (or NULL) and name. */
static void split_name(lua_State *L, pc_Arena *a, const char *full, const char **pkg,
                       const char **name) {
  const char *dot = strrchr(full, '.');
  if (dot == NULL) {
    *pkg = NULL;
    *name = full;
    return;
  }
  *pkg = arena_str(L, a, full, (size_t)(dot - full));
  *name = dot + 1;
}

static int opt_bool(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Resolves a field's type spelling (scalar keyword, or a message / enum
 * full name; 'self' is the type being declared) into 'fd'. */
static void resolve_type(lua_State *L, pc_Pool *pool, pc_Arena *a, const char *self,
                         const char *where, const char *spell, size_t len, pc_FieldDesc *fd) {
  pc_FieldType t = pc_FieldType_FromName(spell, len);
  if (t != 0) {
    fd->type = t;
    return;
  }
  if (len > 0 && spell[0] == '.') {
    spell++;
    len--;
  }
  char *name = (char *)arena_name(L, a, spell, len, where);
  char *dotted = arena_calloc(L, a, len + 2);
  dotted[0] = '.';
  memcpy(dotted + 1, name, len + 1);
  fd->type_name = dotted;
  if (pc_Pool_FindMessage(pool, name) == NULL && pc_Pool_FindEnum(pool, name) == NULL)
    lpc_load_wkt(L, pool, name); /* google.protobuf.* on first use */
  if (strcmp(name, self) == 0 || pc_Pool_FindMessage(pool, name) != NULL)
    fd->type = kPc_Type_Message;
  else if (pc_Pool_FindEnum(pool, name) != NULL)
    fd->type = kPc_Type_Enum;
  else
    luaL_error(L, "%s: unknown type '%s'", where, name);
}

/* Text form of a Lua default for descriptor.proto's default_value. */
static const char *default_text(lua_State *L, pc_Arena *a, pc_Pool *pool, const char *where,
                                const pc_FieldDesc *fd, int v) {
  luaL_Buffer b;
  if (fd->type == kPc_Type_Bytes || fd->type == kPc_Type_String) {
    if (lua_type(L, v) != LUA_TSTRING) luaL_error(L, "%s: default must be a string", where);
    size_t n;
    const char *s = lua_tolstring(L, v, &n);
    luaL_buffinit(L, &b);
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)s[i];
      if (fd->type == kPc_Type_Bytes &&
          (c < 32 || c >= 127 || c == '\\' || c == '"' || c == '\'')) {
        char esc[8];
        snprintf(esc, sizeof esc, "\\%03o", c);
        luaL_addstring(&b, esc);
      } else {
        luaL_addchar(&b, (char)c);
      }
    }
    luaL_pushresult(&b);
  } else if (fd->type == kPc_Type_Bool) {
    if (!lua_isboolean(L, v)) luaL_error(L, "%s: default must be a boolean", where);
    lua_pushstring(L, lua_toboolean(L, v) ? "true" : "false");
  } else if (fd->type == kPc_Type_Enum) {
    if (lua_type(L, v) == LUA_TNUMBER) {
      const pc_EnumDef *e = pc_Pool_FindEnum(pool, fd->type_name + 1);
      const pc_EnumValueDef *ev =
          e ? pc_EnumDef_FindByNumber(e, (int32_t)lua_tointeger(L, v)) : NULL;
      if (ev == NULL) {
        luaL_error(L, "%s: default is not a value of the enum", where);
        return NULL;
      }
      lua_pushstring(L, ev->name);
    } else {
      lua_pushvalue(L, v);
    }
  } else if (lua_isinteger(L, v) && (fd->type == kPc_Type_Uint64 || fd->type == kPc_Type_Fixed64)) {
    char buf[32]; /* any Lua integer, as two's complement (doc/guide.md "Messages") */
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)(lua_Unsigned)lua_tointeger(L, v));
    lua_pushstring(L, buf);
  } else if (lua_isinteger(L, v)) {
    lua_pushfstring(L, "%I", lua_tointeger(L, v));
  } else if (lua_type(L, v) == LUA_TNUMBER) {
    lua_Number n = lua_tonumber(L, v);
    char buf[64];
    if (n != n)
      snprintf(buf, sizeof buf, "nan");
    else if (n > 1e308 * 10)
      snprintf(buf, sizeof buf, "inf");
    else if (n < -1e308 * 10)
      snprintf(buf, sizeof buf, "-inf");
    else
      snprintf(buf, sizeof buf, "%.17g", (double)n);
    lua_pushstring(L, buf);
  } else {
    luaL_error(L, "%s: default must be a number", where);
  }
  size_t len;
  const char *s = lua_tolstring(L, -1, &len);
  const char *r = arena_str(L, a, s, len);
  lua_pop(L, 1);
  return r;
}

/* Adds a map entry type for field 'fd' ("map<K,V>") to 'md' (which has room). */
static void map_entry(lua_State *L, pc_Pool *pool, pc_Arena *a, const char *self, const char *where,
                      const char *spell, pc_FieldDesc *fd, pc_MessageDesc *md) {
  size_t len = strlen(spell);
  const char *comma = strchr(spell, ',');
  if (comma == NULL || spell[len - 1] != '>') {
    luaL_error(L, "%s: bad map type '%s' (map<key,value> expected)", where, spell);
    return;
  }
  const char *k = spell + 4, *v = comma + 1;
  size_t klen = (size_t)(comma - k), vlen = (size_t)(spell + len - 1 - v);
  while (klen > 0 && k[0] == ' ') k++, klen--;
  while (klen > 0 && k[klen - 1] == ' ') klen--;
  while (vlen > 0 && v[0] == ' ') v++, vlen--;
  while (vlen > 0 && v[vlen - 1] == ' ') vlen--;
  pc_MessageDesc *e = &md->nested[md->nested_count++];
  memset(e, 0, sizeof(*e));
  /* "attrs" -> "AttrsEntry", "my_map" -> "MyMapEntry" (protoc's rule) */
  size_t n = strlen(fd->name);
  char *ename = arena_calloc(L, a, n + 6);
  size_t j = 0;
  int up = 1;
  for (size_t i = 0; i < n; i++) {
    char c = fd->name[i];
    if (c == '_') {
      up = 1;
      continue;
    }
    ename[j++] = (char)(up && c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    up = 0;
  }
  memcpy(ename + j, "Entry", 6);
  e->name = ename;
  e->map_entry = 1;
  e->fields = arena_calloc(L, a, 2 * sizeof(pc_FieldDesc));
  e->field_count = 2;
  for (int i = 0; i < 2; i++) {
    pc_FieldDesc *f = &e->fields[i];
    f->name = i == 0 ? "key" : "value";
    f->number = i + 1;
    f->label = kPc_Label_Optional;
    f->oneof_index = -1;
    f->packed = -1;
    resolve_type(L, pool, a, self, where, i == 0 ? k : v, i == 0 ? klen : vlen, f);
  }
  pc_FieldType kt = e->fields[0].type;
  if (e->fields[0].type_name != NULL || kt == kPc_Type_Float || kt == kPc_Type_Double ||
      kt == kPc_Type_Bytes)
    luaL_error(L, "%s: bad map key type in '%s'", where, spell);
  const char *parent = self;
  size_t plen = strlen(parent);
  char *tn = arena_calloc(L, a, plen + strlen(ename) + 3);
  snprintf(tn, plen + strlen(ename) + 3, ".%s.%s", parent, ename);
  fd->type = kPc_Type_Message;
  fd->type_name = tn;
  fd->label = kPc_Label_Repeated;
}

static const char *const kFieldOptions[] = {"repeated",  "required", "optional", "packed",
                                            "json_name", "oneof",    "default",  NULL};
static const char *const kExtensionOptions[] = {"repeated", "default", NULL};

/* Raises "bad argument #arg to 'fname' (msg)" for the pool function
 * 'fname': named by itself when bound to a pool ('base' 1: pc.message,
 * whose caller may be a pcall or LuaJIT's tail call, which name it '?'),
 * by Lua as a method's (pool:message: "bad argument #1 to 'message'"). */
static _Noreturn void pool_arg_error(lua_State *L, int base, int arg, const char *fname,
                                     const char *msg) {
  if (base == 1) lpc_arg_error(L, arg, fname, msg);
  luaL_argerror(L, arg, msg);
#if defined(__GNUC__)
  __builtin_unreachable();
#endif
}

/* pool_arg_error when the value at 'arg' is not of Lua type 't' ('tname'). */
static void pool_check_type(lua_State *L, int base, int arg, const char *fname, int t,
                            const char *tname) {
  if (lua_type(L, arg) != t)
    pool_arg_error(L, base, arg, fname,
                   lua_pushfstring(L, "%s expected, got %s", tname, lpc_type_name(L, arg)));
}

/* A full name argument: a string, not a number Lua would convert
 * ("bad argument #1 to 'message' (string expected, got number)"). */
static const char *check_name(lua_State *L, int base, const char *fname) {
  pool_check_type(L, base, base, fname, LUA_TSTRING, "string");
  if (lpc_has_nul(L, base)) pool_arg_error(L, base, base, fname, "a name holds no NUL byte");
  return lua_tostring(L, base);
}

/* -- T = pc.message(full_name, fields [, opts])   (lua/protocall/message.lua) */
static int lpc_pool_message(lua_State *L) {
  int base, pidx;
  pc_Pool *pool = bound_pool(L, &base, &pidx);
  const char *full = check_name(L, base, "message");
  pool_check_type(L, base, base + 1, "message", LUA_TTABLE, "table");
  int fields = base + 1, opts = base + 2;
  int proto2 = 0;
  lua_settop(L, opts);
  if (!lua_isnoneornil(L, opts)) {
    pool_check_type(L, base, opts, "message", LUA_TTABLE, "table");
    static const char *const kMessageOptions[] = {"syntax", "extensions", NULL};
    lpc_check_keys(L, opts, full, 0, kMessageOptions, "syntax or extensions");
    lua_getfield(L, opts, "syntax");
    const char *syn = lua_tostring(L, -1);
    if (syn != NULL && strcmp(syn, "proto2") == 0)
      proto2 = 1;
    else if (syn != NULL && strcmp(syn, "proto3") != 0)
      return luaL_error(L, "%s: syntax must be \"proto2\" or \"proto3\"", full);
    lua_pop(L, 1);
  }
  if (pc_Pool_IsFrozen(pool)) return luaL_error(L, "%s: the pool is frozen", full);
  if (pc_Pool_FindMessage(pool, full) || pc_Pool_FindEnum(pool, full))
    return luaL_error(L, "%s: already defined", full);
  pc_Arena *a = lpc_new_arena(L); /* scratch, freed by the collector */
  pc_FileDesc *fd = arena_calloc(L, a, sizeof(pc_FileDesc));
  pc_MessageDesc *md = arena_calloc(L, a, sizeof(pc_MessageDesc));
  if (!lua_isnoneornil(L, opts) && lua_getfield(L, opts, "extensions") != LUA_TNIL) {
    /* {{from, to}, ...}, both inclusive as in .proto's "extensions 100 to 199" */
    if (!proto2 || lua_type(L, -1) != LUA_TTABLE)
      return luaL_error(L, "%s: extensions = {{from, to}, ...} needs syntax \"proto2\"", full);
    size_t nr = lua_rawlen(L, -1);
    md->extension_ranges = arena_calloc(L, a, nr * sizeof(pc_ExtensionRangeDesc));
    for (size_t i = 0; i < nr; i++) {
      lua_rawgeti(L, -1, (lua_Integer)i + 1);
      lua_rawgeti(L, -1, 1);
      lua_rawgeti(L, -2, 2);
      if (!lua_isinteger(L, -2) || !lua_isinteger(L, -1))
        return luaL_error(L, "%s: extensions = {{from, to}, ...} expected", full);
      md->extension_ranges[i].range.start = (int32_t)lua_tointeger(L, -2);
      md->extension_ranges[i].range.end = (int32_t)lua_tointeger(L, -1) + 1;
      lua_pop(L, 3);
    }
    md->extension_range_count = nr;
  }
  if (!lua_isnoneornil(L, opts)) lua_pop(L, 1);
  lua_pushfstring(L, "lua:%s", full);
  fd->name = arena_str(L, a, lua_tostring(L, -1), lua_rawlen(L, -1));
  lua_pop(L, 1);
  fd->syntax = proto2 ? kPc_Syntax_Proto2 : kPc_Syntax_Proto3;
  const char *self = arena_str(L, a, full, strlen(full));
  split_name(L, a, self, &fd->package, &md->name);
  fd->messages = md;
  fd->message_count = 1;
  size_t n = lua_rawlen(L, fields);
  md->fields = arena_calloc(L, a, n * sizeof(pc_FieldDesc));
  md->nested = arena_calloc(L, a, n * sizeof(pc_MessageDesc));
  md->oneofs = arena_calloc(L, a, 2 * n * sizeof(pc_OneofDesc));
  size_t synthetic = 0;
  const char **synth_names = arena_calloc(L, a, n * sizeof(char *));
  for (size_t i = 0; i < n; i++) {
    pc_FieldDesc *f = &md->fields[i];
    f->oneof_index = -1;
    f->packed = -1;
    f->label = kPc_Label_Optional;
    if (lua_rawgeti(L, fields, (lua_Integer)i + 1) != LUA_TTABLE)
      return luaL_error(L, "%s: field %d: {name, type, number} expected", full, (int)i + 1);
    int t = lua_gettop(L);
    lua_rawgeti(L, t, 1);
    lua_rawgeti(L, t, 2);
    lua_rawgeti(L, t, 3);
    if (lua_type(L, -3) != LUA_TSTRING || lua_type(L, -2) != LUA_TSTRING || !lua_isinteger(L, -1))
      return luaL_error(L, "%s: field %d: {name, type, number} expected", full, (int)i + 1);
    f->name = arena_name(L, a, lua_tostring(L, -3), lua_rawlen(L, -3), full);
    lua_Integer num = lua_tointeger(L, -1);
    f->number = num < 0 || num > INT32_MAX ? 0 : (int32_t)num;
    lua_pushfstring(L, "%s.%s", full, f->name);
    const char *where = lua_tostring(L, -1);
    lpc_check_keys(L, t, where, 3, kFieldOptions,
                   "repeated, required, optional, packed, json_name, oneof or default");
    size_t tlen;
    const char *spell = lua_tolstring(L, -3, &tlen);
    int repeated = opt_bool(L, t, "repeated");
    if (strncmp(spell, "map<", 4) == 0) {
      if (repeated) return luaL_error(L, "%s: a map cannot be repeated", where);
      map_entry(L, pool, a, self, where, spell, f, md);
    } else {
      resolve_type(L, pool, a, self, where, spell, tlen, f);
      if (repeated) f->label = kPc_Label_Repeated;
    }
    if (opt_bool(L, t, "required")) {
      if (!proto2) return luaL_error(L, "%s: required fields are not allowed in proto3", where);
      f->label = kPc_Label_Required;
    }
    if (lua_getfield(L, t, "packed") != LUA_TNIL) f->packed = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, t, "json_name") == LUA_TSTRING)
      f->json_name = arena_name(L, a, lua_tostring(L, -1), lua_rawlen(L, -1), where);
    lua_pop(L, 1);
    if (lua_getfield(L, t, "oneof") != LUA_TNIL) {
      if (lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "%s: oneof must be a name", where);
      if (lpc_has_nul(L, -1)) return luaL_error(L, "%s: a name holds no NUL byte", where);
      const char *o = lua_tostring(L, -1);
      size_t k = 0;
      while (k < md->oneof_count && strcmp(md->oneofs[k].name, o) != 0) k++;
      if (k == md->oneof_count) md->oneofs[md->oneof_count++].name = arena_str(L, a, o, strlen(o));
      f->oneof_index = (int32_t)k;
    }
    lua_pop(L, 1);
    if (opt_bool(L, t, "optional") && !proto2) {
      if (f->oneof_index >= 0 || f->label != kPc_Label_Optional)
        return luaL_error(L, "%s: optional cannot be combined with oneof or repeated", where);
      f->proto3_optional = 1;
      synth_names[synthetic++] = f->name;
      f->oneof_index = -2; /* set below, after the real oneofs */
    }
    if (lua_getfield(L, t, "default") != LUA_TNIL) {
      if (!proto2) return luaL_error(L, "%s: default values need syntax \"proto2\"", where);
      f->default_value = default_text(L, a, pool, where, f, lua_gettop(L));
      if (f->type == kPc_Type_String && lua_rawlen(L, -1) != strlen(f->default_value))
        f->default_value_len = lua_rawlen(L, -1); /* a string holding NUL bytes */
    }
    lua_settop(L, t - 1);
  }
  md->field_count = n;
  /* Synthetic oneofs ("_name") for proto3 optional come after real ones. */
  size_t s = 0;
  for (size_t i = 0; i < n; i++) {
    if (md->fields[i].oneof_index != -2) continue;
    size_t len = strlen(synth_names[s]);
    char *on = arena_calloc(L, a, len + 2);
    on[0] = '_';
    memcpy(on + 1, synth_names[s], len + 1);
    md->oneofs[md->oneof_count].name = on;
    md->fields[i].oneof_index = (int32_t)md->oneof_count++;
    s++;
  }
  pc_Error err;
  pc_Error_Init(&err);
  const pc_FileDef *file = pc_Pool_AddFile(pool, fd, &err);
  if (file == NULL) return luaL_error(L, "%s", err.msg);
  lpc_push_type(L, &file->messages[0]);
  return 1;
}

/* -- pc.extend(extendee, {{"pkg.name", type, number [, ...]}, ...})
 * (lua/protocall/message.lua): one synthetic file, so every extension's
 * full name must share one package. */
static int lpc_pool_extend(lua_State *L) {
  int base, pidx;
  pc_Pool *pool = bound_pool(L, &base, &pidx);
  const char *extendee = check_name(L, base, "extend");
  pool_check_type(L, base, base + 1, "extend", LUA_TTABLE, "table");
  int list = base + 1;
  lua_settop(L, list);
  if (pc_Pool_IsFrozen(pool)) return luaL_error(L, "%s: the pool is frozen", extendee);
  if (pc_Pool_FindMessage(pool, extendee) == NULL)
    return luaL_error(L, "%s: unknown message type", extendee);
  pc_Arena *a = lpc_new_arena(L);
  pc_FileDesc *fd = arena_calloc(L, a, sizeof(pc_FileDesc));
  size_t n = lua_rawlen(L, list);
  fd->syntax = kPc_Syntax_Proto2;
  fd->extensions = arena_calloc(L, a, n * sizeof(pc_FieldDesc));
  fd->extension_count = n;
  const char *dotted = lua_pushfstring(L, ".%s", extendee);
  const char *ext_ee = arena_str(L, a, dotted, strlen(dotted));
  lua_pop(L, 1);
  const char *first = NULL;
  for (size_t i = 0; i < n; i++) {
    pc_FieldDesc *f = &fd->extensions[i];
    f->oneof_index = -1;
    f->packed = -1;
    f->label = kPc_Label_Optional;
    f->extendee = ext_ee;
    if (lua_rawgeti(L, list, (lua_Integer)i + 1) != LUA_TTABLE)
      return luaL_error(L, "%s: extension %d: {full_name, type, number} expected", extendee,
                        (int)i + 1);
    int t = lua_gettop(L);
    lua_rawgeti(L, t, 1);
    lua_rawgeti(L, t, 2);
    lua_rawgeti(L, t, 3);
    if (lua_type(L, -3) != LUA_TSTRING || lua_type(L, -2) != LUA_TSTRING || !lua_isinteger(L, -1))
      return luaL_error(L, "%s: extension %d: {full_name, type, number} expected", extendee,
                        (int)i + 1);
    if (lpc_has_nul(L, -3)) return luaL_error(L, "%s: a name holds no NUL byte", extendee);
    const char *full = lua_tostring(L, -3);
    const char *pkg, *name;
    split_name(L, a, arena_str(L, a, full, strlen(full)), &pkg, &name);
    if (i == 0) {
      fd->package = pkg;
      first = lua_pushfstring(L, "lua:extend:%s", full);
      first = arena_str(L, a, first, strlen(first));
      lua_pop(L, 1);
    } else if ((pkg == NULL) != (fd->package == NULL) || (pkg && strcmp(pkg, fd->package) != 0))
      return luaL_error(L, "%s: every extension of one pc.extend must share a package", full);
    f->name = name;
    lua_Integer num = lua_tointeger(L, -1);
    f->number = num < 0 || num > INT32_MAX ? 0 : (int32_t)num;
    size_t tlen;
    const char *spell = lua_tolstring(L, -2, &tlen);
    lpc_check_keys(L, t, full, 3, kExtensionOptions, "repeated or default");
    resolve_type(L, pool, a, "", full, spell, tlen, f);
    if (opt_bool(L, t, "repeated")) f->label = kPc_Label_Repeated;
    if (lua_getfield(L, t, "default") != LUA_TNIL) {
      f->default_value = default_text(L, a, pool, full, f, lua_gettop(L));
      if (f->type == kPc_Type_String && lua_rawlen(L, -1) != strlen(f->default_value))
        f->default_value_len = lua_rawlen(L, -1); /* a string holding NUL bytes */
    }
    lua_settop(L, t - 1);
  }
  if (n == 0) return 0;
  fd->name = first;
  pc_Error err;
  pc_Error_Init(&err);
  if (pc_Pool_AddFile(pool, fd, &err) == NULL) return luaL_error(L, "%s", err.msg);
  return 0;
}

static int cmp_values(const void *x, const void *y) {
  const pc_EnumValueDesc *a = x, *b = y;
  if (a->number != b->number) return a->number < b->number ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* -- Enum = pc.enum(full_name, {NAME = number, ...} [, opts])   (lua/protocall/message.lua) */
static int lpc_pool_enum(lua_State *L) {
  int base, pidx;
  pc_Pool *pool = bound_pool(L, &base, &pidx);
  const char *full = check_name(L, base, "enum");
  pool_check_type(L, base, base + 1, "enum", LUA_TTABLE, "table");
  int values = base + 1, proto2 = 0;
  lua_settop(L, base + 2);
  if (lua_type(L, base + 2) == LUA_TTABLE) {
    lua_getfield(L, base + 2, "syntax");
    proto2 = lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), "proto2") == 0;
    lua_pop(L, 1);
  }
  if (pc_Pool_IsFrozen(pool)) return luaL_error(L, "%s: the pool is frozen", full);
  if (pc_Pool_FindMessage(pool, full) || pc_Pool_FindEnum(pool, full))
    return luaL_error(L, "%s: already defined", full);
  pc_Arena *a = lpc_new_arena(L);
  pc_FileDesc *fd = arena_calloc(L, a, sizeof(pc_FileDesc));
  pc_EnumDesc *ed = arena_calloc(L, a, sizeof(pc_EnumDesc));
  lua_pushfstring(L, "lua:%s", full);
  fd->name = arena_str(L, a, lua_tostring(L, -1), lua_rawlen(L, -1));
  lua_pop(L, 1);
  fd->syntax = proto2 ? kPc_Syntax_Proto2 : kPc_Syntax_Proto3;
  split_name(L, a, arena_str(L, a, full, strlen(full)), &fd->package, &ed->name);
  fd->enums = ed;
  fd->enum_count = 1;
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, values)) {
    n++;
    lua_pop(L, 1);
  }
  ed->values = arena_calloc(L, a, n * sizeof(pc_EnumValueDesc));
  lua_pushnil(L);
  while (lua_next(L, values)) {
    if (lua_type(L, -2) != LUA_TSTRING || !lua_isinteger(L, -1))
      return luaL_error(L, "%s: {NAME = number, ...} expected", full);
    lua_Integer v = lua_tointeger(L, -1);
    if (v < INT32_MIN || v > INT32_MAX)
      return luaL_error(L, "%s.%s: value out of range for int32", full, lua_tostring(L, -2));
    pc_EnumValueDesc *ev = &ed->values[ed->value_count++];
    ev->name = arena_name(L, a, lua_tostring(L, -2), lua_rawlen(L, -2), full);
    ev->number = (int32_t)v;
    lua_pop(L, 1);
  }
  qsort(ed->values, ed->value_count, sizeof(pc_EnumValueDesc), cmp_values);
  for (size_t i = 1; i < ed->value_count; i++)
    if (ed->values[i].number == ed->values[i - 1].number) ed->allow_alias = 1;
  if (!proto2 && (n == 0 || ed->values[0].number > 0)) {
    /* Negative numbers sort first; a proto3 enum must start at 0. */
    size_t z = 0;
    while (z < n && ed->values[z].number != 0) z++;
    if (z == n)
      return luaL_error(L, "%s: a proto3 enum needs a value numbered 0 (or {syntax = \"proto2\"})",
                        full);
  }
  for (size_t z = 0; !proto2 && z < n; z++)
    if (ed->values[z].number == 0 && z > 0) {
      pc_EnumValueDesc zero = ed->values[z];
      memmove(&ed->values[1], &ed->values[0], z * sizeof(pc_EnumValueDesc));
      ed->values[0] = zero;
      break;
    }
  pc_Error err;
  pc_Error_Init(&err);
  const pc_FileDef *file = pc_Pool_AddFile(pool, fd, &err);
  if (file == NULL) return luaL_error(L, "%s", err.msg);
  push_enum(L, &file->enums[0]);
  return 1;
}

/* -- T = pc.type(full_name)   (lua/protocall/message.lua) */
static int lpc_pool_type(lua_State *L) {
  int base, pidx;
  pc_Pool *pool = bound_pool(L, &base, &pidx);
  if (!lua_isstring(L, base))
    pool_arg_error(L, base, base, "type",
                   lua_pushfstring(L, "string expected, got %s", lpc_type_name(L, base)));
  const char *name = lua_tostring(L, base);
  if (lpc_has_nul(L, base)) { /* no type's name holds one */
    lua_pushnil(L);
    return 1;
  }
  if (name[0] == '.') name++;
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, name);
  const pc_EnumDef *e = m ? NULL : pc_Pool_FindEnum(pool, name);
  if (m == NULL && e == NULL && lpc_load_wkt(L, pool, name)) { /* google.protobuf.* */
    m = pc_Pool_FindMessage(pool, name);
    e = m ? NULL : pc_Pool_FindEnum(pool, name);
  }
  if (m != NULL) {
    lpc_push_type(L, m);
    return 1;
  }
  if (e == NULL) {
    lua_pushnil(L);
    return 1;
  }
  push_enum(L, e);
  return 1;
}

static const char *label_name(pc_Label l) {
  return l == kPc_Label_Repeated ? "repeated" : l == kPc_Label_Required ? "required" : "optional";
}

static const char *type_spelling(lua_State *L, const pc_FieldDef *f) {
  if (f->message) return f->message->full_name;
  if (f->enumdef) return f->enumdef->full_name;
  (void)L;
  return pc_FieldType_Name(f->type);
}

static void push_default(lua_State *L, const pc_FieldDef *f) {
  if (!f->has_default) {
    lua_pushnil(L);
    return;
  }
  switch (f->type) {
  case kPc_Type_Double: lua_pushnumber(L, f->default_value.d); break;
  case kPc_Type_Float: lua_pushnumber(L, f->default_value.f); break;
  case kPc_Type_Bool: lua_pushboolean(L, f->default_value.b); break;
  case kPc_Type_String:
  case kPc_Type_Bytes: lua_pushlstring(L, f->default_value.s.data, f->default_value.s.size); break;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: lua_pushinteger(L, f->default_value.u32); break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: lpc_push_int64(L, f->default_value.u64, 0); break;
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: lpc_push_int64(L, f->default_value.u64, 1); break;
  default: lua_pushinteger(L, f->default_value.i32); break;
  }
}

/* -- infos = pc.fields(T)   (lua/protocall/message.lua) */
static int lpc_pool_fields(lua_State *L) {
  const pc_MessageDef *def = NULL;
  int arg = lua_type(L, 1) == LUA_TUSERDATA && luaL_testudata(L, 1, POOL_MT) ? 2 : 1;
  if (luaL_testudata(L, arg, TYPE_MT) == NULL)
    pool_arg_error(L, arg, arg, "fields",
                   lua_pushfstring(L, "%s expected, got %s", TYPE_MT, lpc_type_name(L, arg)));
  def = lpc_check_type(L, arg);
  lua_createtable(L, (int)def->field_count, 0);
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    lua_createtable(L, 0, 10);
    lua_pushstring(L, f->name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, f->number);
    lua_setfield(L, -2, "number");
    if (f->is_map) {
      const pc_FieldDef *k = pc_FieldDef_MapKey(f), *v = pc_FieldDef_MapValue(f);
      lua_pushfstring(L, "map<%s,%s>", pc_FieldType_Name(k->type), type_spelling(L, v));
    } else {
      lua_pushstring(L, pc_FieldType_Name(f->type));
    }
    lua_setfield(L, -2, "type");
    if (f->message || f->enumdef) {
      lua_pushstring(L, type_spelling(L, f));
      lua_setfield(L, -2, "type_name");
    }
    lua_pushstring(L, label_name(f->label));
    lua_setfield(L, -2, "label");
    if (f->oneof) {
      lua_pushstring(L, f->oneof->name);
      lua_setfield(L, -2, "oneof");
    }
    lua_pushstring(L, f->json_name);
    lua_setfield(L, -2, "json_name");
    lua_pushboolean(L, f->packed);
    lua_setfield(L, -2, "packed");
    lua_pushboolean(L, f->has_presence);
    lua_setfield(L, -2, "has_presence");
    push_default(L, f);
    lua_setfield(L, -2, "default");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* -- pool:freeze()   (further declarations and loads raise) */
static int lpc_pool_freeze(lua_State *L) {
  int base, pidx;
  pc_Pool_Freeze(bound_pool(L, &base, &pidx));
  return 0;
}

/* -- bool = pool:is_frozen() */
static int lpc_pool_is_frozen(lua_State *L) {
  int base, pidx;
  lua_pushboolean(L, pc_Pool_IsFrozen(bound_pool(L, &base, &pidx)));
  return 1;
}

static const luaL_Reg pool_funcs[] = {
    {"message", lpc_pool_message},     {"enum", lpc_pool_enum},
    {"extend", lpc_pool_extend},       {"type", lpc_pool_type},
    {"fields", lpc_pool_fields},       {"freeze", lpc_pool_freeze},
    {"is_frozen", lpc_pool_is_frozen}, {NULL, NULL}};

/* -- fns = core.pool_functions(pool)   (message, enum, type, fields, freeze,
 * is_frozen as functions bound to 'pool', for pc.* on the default pool) */
static int lpc_pool_functions(lua_State *L) {
  lpc_check_pool(L, 1);
  lua_newtable(L);
  for (const luaL_Reg *r = pool_funcs; r->name; r++) {
    lua_pushvalue(L, 1);
    lua_pushcclosure(L, r->func, 1);
    lua_setfield(L, -2, r->name);
  }
  return 1;
}

/* Built-in well-known types, loaded on first use (lpc.h). */
int lpc_load_wkt(lua_State *L, pc_Pool *pool, const char *full_name) {
  const char *file = pc_Wkt_FileOf(full_name);
  return file != NULL && lpc_load_builtin(L, pool, file);
}

int lpc_load_builtin(lua_State *L, pc_Pool *pool, const char *file) {
  if (pc_Wkt_Source(file, NULL) == NULL || pc_Pool_IsFrozen(pool)) return 0;
  if (pc_Pool_FindFile(pool, file) != NULL) return 1;
  pc_ImportCtx c;
  memset(&c, 0, sizeof c); /* no text, no import paths: the built-ins answer */
  c.arena = lpc_new_arena(L);
  int idx = lua_gettop(L);
  pc_Error err;
  pc_Error_Init(&err);
  int ok = pc_Import(pool, &c, file, &err);
  lpc_pace_arena(L, idx);
  lua_remove(L, idx);
  return ok;
}

void lpc_open_schema(lua_State *L) {
  lpc_registry_table(L, &kPoolsKey, "v"); /* kept when the module is opened again */
  lpc_registry_table(L, &kBoxesKey, "k");
  lpc_registry_table(L, &kTypesKey, "v");
  lua_pop(L, 3);
  /* Pool: methods in core.Pool, which other concerns extend (pool:load ...). */
  luaL_newmetatable(L, POOL_MT); /* __gc: lpc_open_message adds it (lpc_push_pool_gc) */
  lua_newtable(L);
  luaL_setfuncs(L, pool_funcs, 0);
  lua_pushvalue(L, -1);
  lua_setfield(L, -4, "Pool");
  lua_setfield(L, -2, "__index");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  luaL_newmetatable(L, TYPE_MT); /* __call: lpc_open_message adds it */
  lua_pushcfunction(L, lpc_type_index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, lpc_type_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
  static const luaL_Reg funcs[] = {
      {"pool_new", lpc_pool_new}, {"pool_functions", lpc_pool_functions}, {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}
