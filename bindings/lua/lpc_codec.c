/* The wire codec as Lua functions: core.encode, core.decode and
 * core.load_descriptor_set (lua/protocall/codec.lua makes them pc.*).
 *
 * Decoding makes one "protocall.Arena" userdata first, so everything the
 * decoder allocates has an owner before anything can raise; the result is
 * a view of the root message anchored to that arena (no Lua object per
 * sub-message until Lua reads one). Encoding writes into a per-state
 * reusable buffer held by a userdata (an upvalue), so an error raised by
 * lua_pushlstring leaks nothing and small encodes allocate nothing. */
#include "decode.h"
#include "descriptor_set.h"
#include "encode.h"
#include "lpc.h"
#include "lpc_msg.h"
#include "wire.h"

#include <lauxlib.h>

#define LPC_ENCODEBUF      "protocall.EncodeBuffer"
/* A buffer grown past this is freed after use rather than kept. */
#define LPC_ENCODEBUF_KEEP (64 * 1024)

static int lpc_encodebuf_gc(lua_State *L) {
  pc_WireWriter *w = luaL_checkudata(L, 1, LPC_ENCODEBUF);
  pc_WireWriter_Free(w);
  return 0;
}

/* -- bytes = core.encode(m, deterministic)
 * m: a message; deterministic: boolean (sort map entries by key).
 * Raises on a non-message, on nesting past PC_ENCODE_MAX_DEPTH and when
 * memory runs out. */
static int lpc_codec_encode(lua_State *L) {
  const pc_MessageDef *def;
  pc_Message *msg = lpc_checkmessage(L, 1, &def);
  pc_EncodeOptions opts = {lua_toboolean(L, 2)};
  pc_WireWriter *w = lua_touserdata(L, lua_upvalueindex(1));
  pc_Error err;
  pc_Error_Init(&err);
  pc_WireWriter_Reset(w);
  pc_EncodeStatus st = pc_Encode(msg, def, &opts, w, &err);
  if (st != kPc_EncodeStatus_Ok) {
    pc_WireWriter_Free(w);
    return luaL_error(L, "%s", err.msg);
  }
  lua_pushlstring(L, (const char *)pc_WireWriter_Data(w), pc_WireWriter_Size(w));
  if (w->cap > LPC_ENCODEBUF_KEEP) pc_WireWriter_Free(w);
  return 1;
}

/* -- m | nil, err = core.decode(T, bytes [, max_depth])
 * T: a message Type; bytes: string; max_depth: levels of nesting allowed
 * (default 100). Returns the message, or nil and "<subject>: <reason> at
 * offset <n>" for malformed input. Raises when memory runs out. */
static int lpc_codec_decode(lua_State *L) {
  const pc_MessageDef *def = lpc_checktype(L, 1);
  size_t len;
  const char *bytes = luaL_checklstring(L, 2, &len);
  pc_DecodeOptions opts = {(int)luaL_optinteger(L, 3, 0), 0};
  pc_Arena *a = lpc_newarena(L);
  int arena_idx = lua_gettop(L);
  pc_Message *msg = pc_Message_New(def, a);
  if (msg == NULL) return luaL_error(L, "not enough memory");
  pc_Error err;
  pc_Error_Init(&err);
  pc_DecodeStatus st = pc_Decode(bytes, len, msg, def, a, &opts, &err);
  lpc_pacearena(L, arena_idx);
  if (st == kPc_DecodeStatus_OutOfMemory) return luaL_error(L, "not enough memory");
  if (st != kPc_DecodeStatus_Ok) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lpc_pushview(L, def, msg, arena_idx);
  return 1;
}

/* -- names | nil, err = core.load_descriptor_set(pool, bytes)
 * Adds every file of a serialized FileDescriptorSet to 'pool' (files the
 * pool already has by name are skipped). Returns the list of the added
 * files' names in order, or nil and the reason. */
static int lpc_codec_load_descriptor_set(lua_State *L) {
  pc_Pool *pool = lpc_checkpool(L, 1);
  size_t len;
  const char *bytes = luaL_checklstring(L, 2, &len);
  pc_Error err;
  pc_Error_Init(&err);
  size_t first;
  long added = pc_Pool_AddDescriptorSet(pool, bytes, len, &first, &err);
  if (added < 0) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lua_createtable(L, (int)added, 0);
  for (long i = 0; i < added; i++) {
    lua_pushstring(L, pc_Pool_File(pool, first + (size_t)i)->name);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

void lpc_open_codec(lua_State *L) {
  pc_WireWriter *w = lua_newuserdatauv(L, sizeof *w, 0);
  pc_WireWriter_Init(w, NULL, NULL);
  if (luaL_newmetatable(L, LPC_ENCODEBUF)) {
    lua_pushcfunction(L, lpc_encodebuf_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  lua_setmetatable(L, -2);
  lua_pushcclosure(L, lpc_codec_encode, 1);
  lua_setfield(L, -2, "encode");
  lua_pushcfunction(L, lpc_codec_decode);
  lua_setfield(L, -2, "decode");
  lua_pushcfunction(L, lpc_codec_load_descriptor_set);
  lua_setfield(L, -2, "load_descriptor_set");
}
