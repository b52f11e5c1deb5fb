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
#include "lpc_options.h"
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

/* The pool that owns 'def' (through its Type's Pool userdata). */
static pc_Pool *pool_of(lua_State *L, const pc_MessageDef *def) {
  lpc_push_type(L, def);
  lua_getiuservalue(L, -1, 1);
  pc_Pool *pool = lpc_check_pool(L, -1);
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
  pc_Message *msg = lpc_to_message(L, 1, &def);
  if (msg == NULL)
    lpc_arg_error(L, 1, "to_json",
                  lua_pushfstring(L, "message expected, got %s", luaL_typename(L, 1)));
  lpc_check_options(L, 2, "to_json", names);
  Finder finder;
  finder.want[0] = '\0';
  pc_JsonWriteOptions o;
  memset(&o, 0, sizeof o);
  o.emit_defaults = lpc_opt_bool(L, 2, "to_json", "emit_defaults");
  o.proto_names = lpc_opt_bool(L, 2, "to_json", "proto_names");
  o.enums_as_ints = lpc_opt_bool(L, 2, "to_json", "enums_as_ints");
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
  o.ignore_unknown = lpc_opt_bool(L, 3, "from_json", "ignore_unknown");
  o.max_depth =
      lpc_opt_int(L, 3, "from_json", "max_depth", 1, PC_JSON_MAX_DEPTH, PC_JSON_DEFAULT_DEPTH);
  pc_Pool *pool = lpc_opt_pool(L, 3, "from_json");
  o.pool = pool;
  o.find_type = find_type;
  o.find_type_ud = &finder;
  if (pool == NULL) pool = pool_of(L, def);
  for (;;) {
    pc_Arena *a = lpc_new_arena(L);
    int arena_idx = lua_gettop(L);
    pc_Message *msg = pc_Message_New(def, a);
    if (msg == NULL) return luaL_error(L, "not enough memory");
    pc_Error err;
    pc_Error_Init(&err);
    pc_JsonStatus st = pc_Json_Read(s, len, msg, def, a, &o, &err);
    lpc_pace_arena(L, arena_idx);
    if (st == kPc_JsonStatus_OutOfMemory) return luaL_error(L, "not enough memory");
    if (st == kPc_JsonStatus_Ok) {
      lpc_push_view(L, def, msg, arena_idx);
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
