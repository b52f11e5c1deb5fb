/* Proto3 JSON as Lua functions: core.to_json and core.from_json
 * (lua/protocall/json.lua makes them pc.*), over core/json/json.h.
 *
 * to_json writes into a per-state buffer held by a userdata (an upvalue),
 * so an error raised by lua_pushlstring leaks nothing. from_json makes one
 * "protocall.Arena" userdata first, so everything the reader allocates has
 * an owner before anything can raise; the result is a view of the root
 * message anchored to that arena. An Any naming a well-known type the pool
 * lacks loads that type's built-in file (as pc.type does) and runs again. */
#include "json/json.h"
#include "lpc.h"
#include "schema/wkt.h"

#include <lauxlib.h>
#include <string.h>

#define LPC_JSONSTATE    "protocall.JsonState"
/* A buffer grown past this is freed after use rather than kept. */
#define LPC_JSONBUF_KEEP ((size_t)64 * 1024)

/* Records the first well-known type an Any named that the pool lacks. */
typedef struct {
  char want[128];
} Finder;

static const pc_MessageDef *find_type(void *ud, const pc_Pool *pool, const char *full_name) {
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, full_name);
  Finder *f = ud;
  size_t n = strlen(full_name);
  if (m == NULL && f->want[0] == '\0' && pc_Wkt_FileOf(full_name) != NULL && n < sizeof f->want)
    memcpy(f->want, full_name, n + 1);
  return m;
}

/* After a failed run: loads the type 'f' recorded into 'pool' and clears
 * it; 1 when that added something (so a second run may succeed). */
static int load_wanted(lua_State *L, pc_Pool *pool, Finder *f) {
  if (f->want[0] == '\0') return 0;
  int ok = pc_Pool_FindMessage(pool, f->want) == NULL && lpc_load_wkt(L, pool, f->want) &&
           pc_Pool_FindMessage(pool, f->want) != NULL;
  f->want[0] = '\0';
  return ok;
}

void lpc_argerror(lua_State *L, int arg, const char *fname, const char *msg) {
  luaL_error(L, "bad argument #%d to '%s' (%s)", arg, fname, msg);
}

const pc_MessageDef *lpc_check_parse_args(lua_State *L, const char *fname, const char **s,
                                          size_t *len) {
  if (luaL_testudata(L, 1, LPC_TYPE_MT) == NULL)
    lpc_argerror(L, 1, fname,
                 lua_pushfstring(L, "protocall.Type expected, got %s", luaL_typename(L, 1)));
  const pc_MessageDef *def = lpc_checktype(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING)
    lpc_argerror(L, 2, fname, lua_pushfstring(L, "string expected, got %s", luaL_typename(L, 2)));
  *s = lua_tolstring(L, 2, len);
  return def;
}

/* As lpc_argerror, marked as not returning for the compiler. */
static _Noreturn void json_argerror(lua_State *L, int arg, const char *fname, const char *msg) {
  lpc_argerror(L, arg, fname, msg);
#if defined(__GNUC__)
  __builtin_unreachable();
#endif
}

void lpc_check_options(lua_State *L, int idx, const char *fname, const char *const *names) {
  if (lua_isnoneornil(L, idx)) return;
  if (!lua_istable(L, idx))
    json_argerror(L, idx, fname,
                  lua_pushfstring(L, "table expected, got %s", luaL_typename(L, idx)));
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    size_t len = 0;
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    size_t i = 0; /* the whole key: "partial\0" is not "partial" */
    while (k != NULL && names[i] != NULL &&
           (strlen(names[i]) != len || memcmp(names[i], k, len) != 0))
      i++;
    if (k == NULL || names[i] == NULL) {
      /* named whole (a NUL in it too), or as tostring shows it */
      luaL_where(L, 1);
      lua_pushfstring(L, "bad argument #%d to '%s' (unknown option '", idx, fname);
      if (k != NULL)
        lua_pushvalue(L, -3);
      else
        luaL_tolstring(L, -3, NULL); /* '1', 'table: 0x...' */
      lua_pushliteral(L, "')");
      lua_concat(L, 4);
      lua_error(L);
    }
  }
}

static int opt_bool(lua_State *L, int idx, const char *name) {
  if (lua_isnoneornil(L, idx)) return 0;
  int v = lua_getfield(L, idx, name) != LUA_TNIL && lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

int lpc_opt_int(lua_State *L, int idx, const char *fname, const char *name, int lo, int hi,
                int dflt) {
  if (lua_isnoneornil(L, idx)) return dflt;
  int v = dflt;
  if (lua_getfield(L, idx, name) != LUA_TNIL) {
    int isint = 0; /* a number: a string such as "10" is refused on both runtimes */
    lua_Integer n = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
    if (!isint || n < lo || n > hi)
      json_argerror(L, idx, fname,
                    lua_pushfstring(L, "%s must be an integer in %d..%d", name, lo, hi));
    v = (int)n;
  }
  lua_pop(L, 1);
  return v;
}

pc_Pool *lpc_opt_pool(lua_State *L, int idx, const char *fname) {
  if (lua_isnoneornil(L, idx)) return NULL;
  pc_Pool *pool = NULL;
  if (lua_getfield(L, idx, "pool") != LUA_TNIL) {
    if (luaL_testudata(L, -1, "protocall.Pool") == NULL)
      lpc_argerror(L, idx, fname,
                   lua_pushfstring(L, "pool: protocall.Pool expected, got %s", lpc_tname(L, -1)));
    pool = lpc_checkpool(L, -1);
  }
  lua_pop(L, 1);
  return pool;
}

/* The pool that owns 'def' (through its Type's Pool userdata). */
static pc_Pool *pool_of(lua_State *L, const pc_MessageDef *def) {
  lpc_pushtype(L, def);
  lua_getiuservalue(L, -1, 1);
  pc_Pool *pool = lpc_checkpool(L, -1);
  lua_pop(L, 2);
  return pool;
}

static int lpc_jsonstate_gc(lua_State *L) {
  pc_JsonBuf *b = luaL_checkudata(L, 1, LPC_JSONSTATE);
  pc_JsonBuf_Free(b);
  return 0;
}

/* -- s = pc.to_json(m [, opts])   (the contract: lua/protocall/json.lua;
 * the mapping: core/json/json.h) */
static int lpc_to_json(lua_State *L) {
  static const char *const names[] = {"emit_defaults", "proto_names", "enums_as_ints",
                                      "indent",        "pool",        NULL};
  pc_JsonBuf *b = lua_touserdata(L, lua_upvalueindex(1));
  const pc_MessageDef *def;
  pc_Message *msg = lpc_tomessage(L, 1, &def);
  if (msg == NULL)
    json_argerror(L, 1, "to_json",
                  lua_pushfstring(L, "message expected, got %s", luaL_typename(L, 1)));
  lpc_check_options(L, 2, "to_json", names);
  Finder finder;
  finder.want[0] = '\0';
  pc_JsonWriteOptions o;
  memset(&o, 0, sizeof o);
  o.emit_defaults = opt_bool(L, 2, "emit_defaults");
  o.proto_names = opt_bool(L, 2, "proto_names");
  o.enums_as_ints = opt_bool(L, 2, "enums_as_ints");
  o.indent = lpc_opt_int(L, 2, "to_json", "indent", 0, 16, 0);
  pc_Pool *pool = lpc_opt_pool(L, 2, "to_json");
  o.pool = pool;
  o.find_type = find_type;
  o.find_type_ud = &finder;
  if (pool == NULL) pool = pool_of(L, def);
  pc_Error err;
  pc_JsonStatus st;
  do {
    pc_Error_Init(&err);
    b->size = 0;
    st = pc_Json_Write(msg, def, &o, b, &err);
  } while (st == kPc_JsonStatus_Invalid && load_wanted(L, pool, &finder));
  if (st != kPc_JsonStatus_Ok) {
    pc_JsonBuf_Free(b);
    return luaL_error(L, "%s", err.msg);
  }
  lua_pushlstring(L, b->data != NULL ? b->data : "", b->size);
  if (b->cap > LPC_JSONBUF_KEEP) pc_JsonBuf_Free(b);
  return 1;
}

/* -- m | nil, err = pc.from_json(T, s [, opts])   (lua/protocall/json.lua) */
static int lpc_from_json(lua_State *L) {
  static const char *const names[] = {"ignore_unknown", "max_depth", "pool", NULL};
  size_t len;
  const char *s;
  const pc_MessageDef *def = lpc_check_parse_args(L, "from_json", &s, &len);
  lpc_check_options(L, 3, "from_json", names);
  Finder finder;
  finder.want[0] = '\0';
  pc_JsonReadOptions o;
  memset(&o, 0, sizeof o);
  o.ignore_unknown = opt_bool(L, 3, "ignore_unknown");
  o.max_depth =
      lpc_opt_int(L, 3, "from_json", "max_depth", 1, PC_JSON_MAX_DEPTH, PC_JSON_DEFAULT_DEPTH);
  pc_Pool *pool = lpc_opt_pool(L, 3, "from_json");
  o.pool = pool;
  o.find_type = find_type;
  o.find_type_ud = &finder;
  if (pool == NULL) pool = pool_of(L, def);
  for (;;) {
    pc_Arena *a = lpc_newarena(L);
    int arena_idx = lua_gettop(L);
    pc_Message *msg = pc_Message_New(def, a);
    if (msg == NULL) return luaL_error(L, "not enough memory");
    pc_Error err;
    pc_Error_Init(&err);
    pc_JsonStatus st = pc_Json_Read(s, len, msg, def, a, &o, &err);
    lpc_pacearena(L, arena_idx);
    if (st == kPc_JsonStatus_OutOfMemory) return luaL_error(L, "not enough memory");
    if (st == kPc_JsonStatus_Ok) {
      lpc_pushview(L, def, msg, arena_idx);
      return 1;
    }
    if (!load_wanted(L, pool, &finder)) {
      lua_pushnil(L);
      lua_pushstring(L, err.msg);
      return 2;
    }
    lua_settop(L, arena_idx - 1); /* the failed arena, to the collector */
  }
}

void lpc_open_json(lua_State *L) {
  pc_JsonBuf *b = lua_newuserdatauv(L, sizeof *b, 0);
  pc_JsonBuf_Init(b, NULL, NULL);
  if (luaL_newmetatable(L, LPC_JSONSTATE)) {
    lua_pushcfunction(L, lpc_jsonstate_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  lua_setmetatable(L, -2);
  lua_pushcclosure(L, lpc_to_json, 1);
  lua_setfield(L, -2, "to_json");
  lua_pushcfunction(L, lpc_from_json);
  lua_setfield(L, -2, "from_json");
}
