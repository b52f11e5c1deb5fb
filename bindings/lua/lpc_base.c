/* luaopen_protocall_core: the C part of the module, what init.lua requires.
 * Each concern adds its functions through an lpc_open_* call (lpc.h); the
 * status codes' functions live here too. */
#include "lpc.h"
#include "protocall.h"
#include "base/status.h"
#include "base/xxhash.h"

#include <lauxlib.h>

/* -- name = core.code_name(number)   -- "UNAVAILABLE", or nil outside 0..16 */
static int lpc_code_name(lua_State *L) {
  const char *name = pc_Code_Name((int)luaL_checkinteger(L, 1));
  if (name == NULL) return 0;
  lua_pushstring(L, name);
  return 1;
}

/* -- number = core.code_number(name)   -- 14 for "UNAVAILABLE", or nil */
static int lpc_code_number(lua_State *L) {
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len);
  int code = pc_Code_FromName(name, len);
  if (code < 0) return 0;
  lua_pushinteger(L, code);
  return 1;
}

/* -- code_name = core.code_from_http(status)   -- gRPC code for an HTTP status */
static int lpc_code_from_http(lua_State *L) {
  lua_pushstring(L, pc_Code_Name(pc_Code_FromHttpStatus((int)luaL_checkinteger(L, 1))));
  return 1;
}

/* -- hi, lo = core.xxhash64(s)   -- XXH64 of string s, seed 0 (gRFC A42's ring
 * hash), as its high and low 32 bits (each 0 .. 2^32-1: exact under LuaJIT's
 * doubles too) */
static int lpc_xxhash64(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  uint64_t h = pc_XxHash64(s, len, 0);
  lua_pushinteger(L, (lua_Integer)(h >> 32));
  lua_pushinteger(L, (lua_Integer)(h & 0xffffffffu));
  return 2;
}

void lpc_open_status(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"protect", lpc_protect},         {"code_name", lpc_code_name},
      {"code_number", lpc_code_number}, {"code_from_http", lpc_code_from_http},
      {"xxhash64", lpc_xxhash64},       {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}

int luaopen_protocall_core(lua_State *L) {
  lua_newtable(L);
  lua_pushliteral(L, PROTOCALL_VERSION);
  lua_setfield(L, -2, "VERSION");
  /* One line per concern (see lpc.h). */
  lpc_open_compat(L);
  lpc_open_status(L);
  lpc_open_schema(L);
  lpc_open_message(L);
  lpc_open_call(L);
  lpc_open_wire(L);
  lpc_open_parse(L);
  lpc_open_net(L);
  lpc_open_listen(L);
  lpc_open_compiler(L);
  lpc_open_host(L);
  lpc_open_json(L);
  lpc_open_text(L);
  lpc_open_table(L);
  lpc_open_plain(L);
  lpc_open_ffi(L);
  lpc_open_validate(L);
  lpc_open_regex(L);
  return 1;
}
