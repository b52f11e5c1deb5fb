/* Argument errors: the binding's one path for "bad argument #2 to 'decode'
 * (string expected, got number)", as lauxlib.c's luaL_argerror is Lua's.
 * The functions using it name themselves ('fname'): luaL_argerror takes
 * the name from the call site, which a pcall or a method call gives as
 * something else ('protocall.core.decode', 'integer index', '?'). The file
 * uses nothing else of the binding, so every other file may use it. */
#include "lpc.h"

#include <lauxlib.h>

_Noreturn void lpc_arg_error(lua_State *L, int arg, const char *fname, const char *msg) {
  if (msg != NULL) lua_pushstring(L, msg);
  int m = lua_gettop(L);
  luaL_where(L, 1); /* the calling Lua line, as luaL_error's */
  lua_pushfstring(L, "bad argument #%d to '%s' (", arg, fname);
  lua_pushvalue(L, m); /* pushed whole: it may hold a NUL byte */
  lua_pushliteral(L, ")");
  lua_concat(L, 4);
  lua_error(L);
#if defined(__GNUC__)
  __builtin_unreachable();
#endif
}

const char *lpc_type_name(lua_State *L, int idx) {
  if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) {
    const char *n = lua_tostring(L, -1);
    lua_pop(L, 1); /* the metatable still holds it */
    return n;
  }
  return luaL_typename(L, idx);
}

_Noreturn void lpc_arg_type_error(lua_State *L, int arg, const char *fname, const char *expected) {
  lpc_arg_error(L, arg, fname,
                lua_pushfstring(L, "%s expected, got %s", expected, lpc_type_name(L, arg)));
}

const pc_MessageDef *lpc_check_parse_args(lua_State *L, const char *fname, const char **s,
                                          size_t *len) {
  if (luaL_testudata(L, 1, LPC_TYPE_MT) == NULL)
    lpc_arg_error(L, 1, fname,
                  lua_pushfstring(L, "protocall.Type expected, got %s", luaL_typename(L, 1)));
  if (lua_type(L, 2) != LUA_TSTRING)
    lpc_arg_error(L, 2, fname, lua_pushfstring(L, "string expected, got %s", luaL_typename(L, 2)));
  *s = lua_tolstring(L, 2, len);
  return ((const lpc_TypeBox *)lua_touserdata(L, 1))->def;
}
