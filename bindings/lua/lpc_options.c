/* Options tables: the checks of their keys and the readers of their fields,
 * for every binding file that takes one (the codecs' {max_depth =, ...},
 * pc.message's declarations, the gRPC channel's and listener's settings).
 * Errors about a function's argument go through lpc_arg_error. */
#include "lpc_options.h"

#include <lauxlib.h>
#include <string.h>

/* The index of the key 'k' ('len' bytes) in 'names' (NULL-terminated),
 * compared whole ("partial\0" is not "partial"), or -1. */
static int find_name(const char *const *names, const char *k, size_t len) {
  for (int i = 0; names[i] != NULL; i++)
    if (strlen(names[i]) == len && memcmp(names[i], k, len) == 0) return i;
  return -1;
}

void lpc_check_options(lua_State *L, int idx, const char *fname, const char *const *names) {
  if (lua_isnoneornil(L, idx)) return;
  if (!lua_istable(L, idx))
    lpc_arg_error(L, idx, fname,
                  lua_pushfstring(L, "table expected, got %s", luaL_typename(L, idx)));
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    size_t len = 0;
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    if (k != NULL && find_name(names, k, len) >= 0) continue;
    /* named whole (a NUL in it too), or as tostring shows it */
    lua_pushliteral(L, "unknown option '");
    if (k != NULL)
      lua_pushvalue(L, -2);
    else
      luaL_tolstring(L, -2, NULL); /* '1', 'table: 0x...' */
    lua_pushliteral(L, "'");
    lua_concat(L, 3);
    lpc_arg_error(L, idx, fname, NULL);
  }
}

void lpc_check_keys(lua_State *L, int t, const char *where, lua_Integer npos,
                    const char *const *allowed, const char *expected) {
  lua_pushnil(L);
  while (lua_next(L, t) != 0) {
    lua_pop(L, 1);
    if (lua_isinteger(L, -1)) {
      lua_Integer k = lua_tointeger(L, -1);
      if (k >= 1 && k <= npos) continue;
    } else if (lua_type(L, -1) == LUA_TSTRING) {
      const char *k = lua_tostring(L, -1);
      if (find_name(allowed, k, strlen(k)) >= 0) continue; /* up to a NUL, as strcmp */
    }
    luaL_error(L, "%s: unknown option '%s' (expected %s)", where, luaL_tolstring(L, -1, NULL),
               expected);
  }
}

int lpc_opt_bool(lua_State *L, int idx, const char *fname, const char *name) {
  if (lua_isnoneornil(L, idx)) return 0;
  int t = lua_getfield(L, idx, name);
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    lpc_arg_error(L, idx, fname,
                  lua_pushfstring(L, "%s: boolean expected, got %s", name, lua_typename(L, t)));
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

int lpc_test_opt_int(lua_State *L, int idx, const char *name, int lo, int hi, int *v) {
  if (lua_isnoneornil(L, idx)) return 0;
  int r = 0;
  if (lua_getfield(L, idx, name) != LUA_TNIL) {
    int isint = 0; /* a number: a string such as "10" is refused on both runtimes */
    lua_Integer n = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
    r = isint && n >= lo && n <= hi ? 1 : -1;
    if (r > 0) *v = (int)n;
  }
  lua_pop(L, 1);
  return r;
}

int lpc_opt_int(lua_State *L, int idx, const char *fname, const char *name, int lo, int hi,
                int dflt) {
  int v = dflt;
  if (lpc_test_opt_int(L, idx, name, lo, hi, &v) < 0)
    lpc_arg_error(L, idx, fname,
                  lua_pushfstring(L, "%s must be an integer in %d..%d", name, lo, hi));
  return v;
}

pc_Pool *lpc_opt_pool(lua_State *L, int idx, const char *fname) {
  if (lua_isnoneornil(L, idx)) return NULL;
  pc_Pool *pool = NULL;
  if (lua_getfield(L, idx, "pool") != LUA_TNIL) {
    if (luaL_testudata(L, -1, LPC_POOL_MT) == NULL)
      lpc_arg_error(
          L, idx, fname,
          lua_pushfstring(L, "pool: protocall.Pool expected, got %s", lpc_type_name(L, -1)));
    const lpc_PoolBox *b = lua_touserdata(L, -1);
    if (b->pool == NULL || b->finalized) /* as lpc_check_pool: not the default pool */
      luaL_error(L, "protocall.Pool used after its __gc ran");
    pool = b->pool;
  }
  lua_pop(L, 1);
  return pool;
}

const char *lpc_opt_string(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  const char *s = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  lua_pop(L, 1); /* anchored in the options table */
  return s;
}

lua_Integer lpc_opt_size(lua_State *L, int t, const char *k, lua_Integer max) {
  lua_getfield(L, t, k);
  lua_Integer v = lua_isnil(L, -1) ? 0 : luaL_checkinteger(L, -1);
  lua_pop(L, 1);
  if (v < 0 || v > max) luaL_error(L, "%s must be in 0..%I", k, max);
  return v;
}
