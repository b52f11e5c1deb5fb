/* Proto3 JSON as Lua functions: core.to_json and core.from_json
 * (lua/protocall/json.lua makes them pc.*), over core/json/json.h.
 *
 * to_json writes into a per-state buffer held by a userdata (an upvalue),
 * so an error raised by lua_pushlstring leaks nothing (a call a finalizer
 * runs while that buffer is being copied makes one of its own). from_json makes one
 * "protocall.Arena" userdata first, so everything the reader allocates has
 * an owner before anything can raise; the result is a view of the root
 * message anchored to that arena. An Any naming a well-known type the pool
 * lacks loads that type's built-in file (as pc.type does) and runs again.
 *
 * json_to_wire and wire_to_json go between JSON text and wire bytes with
 * no Lua object in between: the message (and the JSON reader's tree of
 * the text) lives in a per-state scratch arena (a
 * "protocall.TranscodeState" userdata, their upvalue), reset at each use,
 * and the output in its buffers. A call made while the state is in
 * use (from a finalizer run by an allocation of another call) makes a
 * state of its own and leaves it to the collector. */
#include "json/json.h"
#include "lpc_options.h"
#include "schema/wkt.h"
#include "wire/decode.h"
#include "wire/encode.h"
#include "wire/wire.h"

#include <lauxlib.h>
#include <string.h>

#define LPC_JSONSTATE    "protocall.JsonState"
#define LPC_TCSTATE      "protocall.TranscodeState"
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

/* The pool that owns 'def' (through its Type's Pool userdata; also one
 * whose __gc ran, still there while the box is: lpc_anchor.c). */
static pc_Pool *pool_of(lua_State *L, const pc_MessageDef *def) {
  lpc_push_type(L, def);
  lua_getiuservalue(L, -1, 1);
  const lpc_PoolBox *b = luaL_testudata(L, -1, LPC_POOL_MT);
  pc_Pool *pool = b != NULL && b->pool != NULL ? b->pool : lpc_check_pool(L, -1);
  lua_pop(L, 2);
  return pool;
}

/* to_json's buffer (its upvalue), and (LuaJIT) whether it holds text being
 * copied into a string: LuaJIT's lua_pushlstring steps the collector before
 * it copies (Lua 5.4's after), and a to_json a finalizer runs then writes
 * into a JsonState of its own ('busy', a busy mark: LPC_BUSY_MARK, lpc.h,
 * so one the copy's error left is taken back). */
typedef struct {
  pc_JsonBuf b;
  uintptr_t busy;
} JsonState;

static int lpc_jsonstate_gc(lua_State *L) {
  JsonState *js = luaL_checkudata(L, 1, LPC_JSONSTATE);
  pc_JsonBuf_Free(&js->b);
  return 0;
}

/* A new JsonState, pushed. */
static JsonState *new_jsonstate(lua_State *L) {
  JsonState *js = lua_newuserdatauv(L, sizeof *js, 0);
  pc_JsonBuf_Init(&js->b, NULL, NULL);
  js->busy = 0;
  if (luaL_newmetatable(L, LPC_JSONSTATE)) {
    lua_pushcfunction(L, lpc_jsonstate_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  lua_setmetatable(L, -2);
  return js;
}

/* The options table at 'idx' of 'fname' (pc.from_json, pc.json_to_wire)
 * into 'o', its Any finder 'f' cleared; raises on an unknown name or a bad
 * value. Returns the 'pool' option, or NULL. */
static pc_Pool *read_options(lua_State *L, int idx, const char *fname, pc_JsonReadOptions *o,
                             Finder *f) {
  static const char *const names[] = {"ignore_unknown", "max_depth", "pool", NULL};
  memset(o, 0, sizeof *o);
  f->want[0] = '\0';
  o->find_type = find_type;
  o->find_type_ud = f;
  if (lua_isnoneornil(L, idx)) { /* the defaults, without a look per option */
    o->max_depth = PC_JSON_DEFAULT_DEPTH;
    return NULL;
  }
  lpc_check_options(L, idx, fname, names);
  o->ignore_unknown = lpc_opt_bool(L, idx, fname, "ignore_unknown");
  o->max_depth =
      lpc_opt_int(L, idx, fname, "max_depth", 1, PC_JSON_MAX_DEPTH, PC_JSON_DEFAULT_DEPTH);
  pc_Pool *pool = lpc_opt_pool(L, idx, fname);
  o->pool = pool;
  return pool;
}

/* The options table at 'idx' of 'fname' (pc.to_json, pc.wire_to_json)
 * into 'o', as read_options. */
static pc_Pool *write_options(lua_State *L, int idx, const char *fname, pc_JsonWriteOptions *o,
                              Finder *f) {
  static const char *const names[] = {"emit_defaults", "proto_names", "enums_as_ints",
                                      "indent",        "pool",        NULL};
  memset(o, 0, sizeof *o);
  f->want[0] = '\0';
  o->find_type = find_type;
  o->find_type_ud = f;
  if (lua_isnoneornil(L, idx)) return NULL; /* the defaults (all zero) */
  lpc_check_options(L, idx, fname, names);
  o->emit_defaults = lpc_opt_bool(L, idx, fname, "emit_defaults");
  o->proto_names = lpc_opt_bool(L, idx, fname, "proto_names");
  o->enums_as_ints = lpc_opt_bool(L, idx, fname, "enums_as_ints");
  o->indent = lpc_opt_int(L, idx, fname, "indent", 0, 16, 0);
  pc_Pool *pool = lpc_opt_pool(L, idx, fname);
  o->pool = pool;
  return pool;
}

/* -- s = pc.to_json(m [, opts])   (the contract: lua/protocall/json.lua;
 * the mapping: core/json/json.h) */
static int lpc_to_json(lua_State *L) {
  JsonState *js = lua_touserdata(L, lua_upvalueindex(1));
  const pc_MessageDef *def;
  pc_Message *msg = lpc_to_message(L, 1, &def);
  if (msg == NULL)
    lpc_arg_error(L, 1, "to_json",
                  lua_pushfstring(L, "message expected, got %s", luaL_typename(L, 1)));
  Finder finder;
  pc_JsonWriteOptions o;
  pc_Pool *pool = write_options(L, 2, "to_json", &o, &finder);
  if (pool == NULL) pool = pool_of(L, def);
  JsonState *own = LPC_LUAJIT && LPC_IS_BUSY(js->busy) ? new_jsonstate(L) : js; /* see JsonState */
  pc_JsonBuf *b = &own->b;
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
  if (LPC_LUAJIT) own->busy = LPC_BUSY_MARK();
  lua_pushlstring(L, b->data != NULL ? b->data : "", b->size);
  if (LPC_LUAJIT) own->busy = 0;
  if (b->cap > LPC_JSONBUF_KEEP || own != js) pc_JsonBuf_Free(b);
  return 1;
}

/* -- m | nil, err = pc.from_json(T, s [, opts])   (lua/protocall/json.lua) */
static int lpc_from_json(lua_State *L) {
  size_t len;
  const char *s;
  const pc_MessageDef *def = lpc_check_parse_args(L, "from_json", &s, &len);
  Finder finder;
  pc_JsonReadOptions o;
  pc_Pool *pool = read_options(L, 3, "from_json", &o, &finder);
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

/* The scratch of json_to_wire and wire_to_json (see the file's comment). */
typedef struct {
  pc_Arena *arena; /* the message between the two forms; NULL before the first use */
  pc_WireWriter w; /* json_to_wire's output */
  pc_JsonBuf json; /* wire_to_json's output */
  uintptr_t busy;  /* a call is using this state: a busy mark (LPC_BUSY_MARK, lpc.h) */
} TranscodeState;

static int lpc_tcstate_gc(lua_State *L) {
  TranscodeState *ts = luaL_checkudata(L, 1, LPC_TCSTATE);
  pc_Arena_Free(ts->arena);
  ts->arena = NULL;
  pc_WireWriter_Free(&ts->w);
  pc_JsonBuf_Free(&ts->json);
  return 0;
}

/* __close (Lua 5.4): the state is free again however the call ended. */
static int lpc_tcstate_close(lua_State *L) {
  TranscodeState *ts = lua_touserdata(L, 1); /* the size check: lpc_codecstate_close's */
  if (ts == NULL || lua_rawlen(L, 1) != sizeof(TranscodeState))
    lpc_arg_type_error(L, 1, "__close", LPC_TCSTATE);
  ts->busy = 0;
  return 0;
}

static TranscodeState *new_tcstate(lua_State *L) {
  TranscodeState *ts = lua_newuserdatauv(L, sizeof *ts, 0);
  ts->arena = NULL;
  pc_WireWriter_Init(&ts->w, NULL, NULL);
  pc_JsonBuf_Init(&ts->json, NULL, NULL);
  ts->busy = 0;
  if (luaL_newmetatable(L, LPC_TCSTATE)) {
    lua_pushcfunction(L, lpc_tcstate_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, lpc_tcstate_close);
    lua_setfield(L, -2, "__close");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  lua_setmetatable(L, -2);
  return ts;
}

/* The state for this call (the upvalue, or a new one on the stack when the
 * upvalue is in use), marked in use, its arena empty and a message of
 * 'def' in it; raises when memory runs out. */
static TranscodeState *take_tcstate(lua_State *L, const pc_MessageDef *def, pc_Message **msg) {
  TranscodeState *ts = lua_touserdata(L, lua_upvalueindex(1));
  if (LPC_IS_BUSY(ts->busy)) {
    ts = new_tcstate(L);
  } else {
    lua_pushvalue(L, lua_upvalueindex(1));
  }
  lua_toclose(L, -1);
  ts->busy = LPC_BUSY_MARK();
  if (ts->arena == NULL)
    ts->arena = pc_Arena_New(NULL, NULL);
  else
    pc_Arena_Reset(ts->arena);
  *msg = ts->arena != NULL ? pc_Message_New(def, ts->arena) : NULL;
  if (*msg == NULL) {
    ts->busy = 0;
    luaL_error(L, "not enough memory");
  }
  return ts;
}

/* Done with 'ts': a state grown large gives its memory back. */
static void release_tcstate(TranscodeState *ts) {
  if (ts->arena != NULL && pc_Arena_SpaceAllocated(ts->arena) > LPC_JSONBUF_KEEP) {
    pc_Arena_Free(ts->arena);
    ts->arena = NULL;
  }
  if (ts->w.cap > LPC_JSONBUF_KEEP) pc_WireWriter_Free(&ts->w);
  if (ts->json.cap > LPC_JSONBUF_KEEP) pc_JsonBuf_Free(&ts->json);
  ts->busy = 0;
}

/* -- bytes | nil, err, part = pc.json_to_wire(T, s [, opts [, more]])
 * (the contract: lua/protocall/json.lua) */
static int lpc_json_to_wire(lua_State *L) {
  size_t len, more_len = 0;
  const char *s, *more = NULL;
  const pc_MessageDef *def = lpc_check_parse_args(L, "json_to_wire", &s, &len);
  Finder finder;
  pc_JsonReadOptions o;
  pc_Pool *pool = read_options(L, 3, "json_to_wire", &o, &finder);
  if (!lua_isnoneornil(L, 4)) {
    if (lua_type(L, 4) != LUA_TSTRING) lpc_arg_type_error(L, 4, "json_to_wire", "string");
    more = lua_tolstring(L, 4, &more_len);
  }
  pc_JsonReadOptions o_more; /* pc.from_json's defaults */
  memset(&o_more, 0, sizeof o_more);
  o_more.find_type = find_type;
  o_more.find_type_ud = &finder;
  lua_settop(L, 4);
  for (;;) {
    pc_Message *msg;
    TranscodeState *ts = take_tcstate(L, def, &msg);
    pc_Error err;
    pc_Error_Init(&err);
    int part = 1;
    o.scratch = o_more.scratch = ts->arena; /* the text's tree too: reset with the message */
    pc_JsonStatus st = pc_Json_Read(s, len, msg, def, ts->arena, &o, &err);
    if (st == kPc_JsonStatus_Ok && more != NULL) {
      part = 2;
      pc_Message *extra = pc_Message_New(def, ts->arena);
      st = extra == NULL ? kPc_JsonStatus_OutOfMemory
                         : pc_Json_Read(more, more_len, extra, def, ts->arena, &o_more, &err);
      if (st == kPc_JsonStatus_Ok && !pc_Message_Merge(msg, extra, def, ts->arena))
        st = kPc_JsonStatus_OutOfMemory;
    }
    if (st == kPc_JsonStatus_Ok) {
      pc_WireWriter_Reset(&ts->w);
      pc_EncodeStatus est = pc_Encode(msg, def, NULL, &ts->w, &err);
      if (est == kPc_EncodeStatus_Ok) {
        lua_pushlstring(L, (const char *)pc_WireWriter_Data(&ts->w), pc_WireWriter_Size(&ts->w));
        release_tcstate(ts);
        return 1;
      }
      release_tcstate(ts);
      if (est == kPc_EncodeStatus_OutOfMemory) return luaL_error(L, "not enough memory");
      lua_pushnil(L);
      lua_pushstring(L, err.msg);
      return 2;
    }
    release_tcstate(ts);
    if (st == kPc_JsonStatus_OutOfMemory) return luaL_error(L, "not enough memory");
    if (pool == NULL) pool = pool_of(L, def);
    if (!load_wanted(L, pool, &finder)) {
      lua_pushnil(L);
      lua_pushstring(L, err.msg);
      lua_pushinteger(L, part);
      return 3;
    }
    lua_settop(L, 4);
  }
}

/* -- s | nil, err = pc.wire_to_json(T, bytes [, opts])
 * (the contract: lua/protocall/json.lua) */
static int lpc_wire_to_json(lua_State *L) {
  size_t len;
  const char *s;
  const pc_MessageDef *def = lpc_check_parse_args(L, "wire_to_json", &s, &len);
  Finder finder;
  pc_JsonWriteOptions o;
  pc_Pool *pool = write_options(L, 3, "wire_to_json", &o, &finder);
  pc_DecodeOptions d;
  memset(&d, 0, sizeof d);
  d.alias = 1; /* strings point into 's', alive for the whole call */
  lua_settop(L, 3);
  for (;;) {
    pc_Message *msg;
    TranscodeState *ts = take_tcstate(L, def, &msg);
    pc_Error err;
    pc_Error_Init(&err);
    pc_DecodeStatus dst = pc_Decode(s, len, msg, def, ts->arena, &d, &err);
    if (dst != kPc_DecodeStatus_Ok) {
      release_tcstate(ts);
      if (dst == kPc_DecodeStatus_OutOfMemory) return luaL_error(L, "not enough memory");
      lua_pushnil(L);
      lua_pushstring(L, err.msg);
      return 2;
    }
    ts->json.size = 0;
    pc_JsonStatus st = pc_Json_Write(msg, def, &o, &ts->json, &err);
    if (st == kPc_JsonStatus_Ok) {
      lua_pushlstring(L, ts->json.data != NULL ? ts->json.data : "", ts->json.size);
      release_tcstate(ts);
      return 1;
    }
    release_tcstate(ts);
    if (st == kPc_JsonStatus_OutOfMemory) return luaL_error(L, "not enough memory");
    if (pool == NULL) pool = pool_of(L, def);
    if (!load_wanted(L, pool, &finder)) return luaL_error(L, "%s", err.msg);
    lua_settop(L, 3);
  }
}

void lpc_open_json(lua_State *L) {
  new_jsonstate(L);
  lua_pushcclosure(L, lpc_to_json, 1);
  lua_setfield(L, -2, "to_json");
  lua_pushcfunction(L, lpc_from_json);
  lua_setfield(L, -2, "from_json");
  new_tcstate(L);
  lua_pushcclosure(L, lpc_json_to_wire, 1);
  lua_setfield(L, -2, "json_to_wire");
  new_tcstate(L);
  lua_pushcclosure(L, lpc_wire_to_json, 1);
  lua_setfield(L, -2, "wire_to_json");
}
