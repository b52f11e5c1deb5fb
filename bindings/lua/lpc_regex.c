/* RE2 patterns as Lua values: core.regex, over core/cel/regex.h (Debian's
 * libre2, the engine CEL's `matches` and protovalidate's string.pattern
 * use). The xDS route matchers (lua/protocall/transport/xds_route.lua:
 * safe_regex, RE2 syntax as Envoy and gRPC take it) compile each pattern
 * once, when the resource is accepted, and match per call. */
#include "cel/regex.h"
#include "lpc.h"

#include <lauxlib.h>

#define LPC_REGEX_MT "protocall.Regex"

typedef struct {
  pc_CelRegex *re;
} RegexBox;

static int lpc_regex_gc(lua_State *L) {
  RegexBox *b = luaL_checkudata(L, 1, LPC_REGEX_MT);
  pc_CelRegex_Free(b->re);
  b->re = NULL;
  return 0;
}

/* -- re | nil, why = core.regex(pattern)
 * The compiled RE2 pattern (a "protocall.Regex"), or nil and why it is
 * refused (RE2's message, "pattern too long" past 8192 bytes, "pattern
 * nested too deeply"). */
static int lpc_regex(lua_State *L) {
  size_t len;
  const char *pattern = luaL_checklstring(L, 1, &len);
  RegexBox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->re = NULL;
  luaL_setmetatable(L, LPC_REGEX_MT);
  char why[256];
  b->re = pc_CelRegex_New(pattern, len, why, sizeof why);
  if (b->re == NULL) {
    if (why[0] == '\0') return luaL_error(L, "not enough memory");
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  return 1;
}

/* re:find and re:full: 'match' over the string argument. */
static int regex_match(lua_State *L, int (*match)(const pc_CelRegex *, const char *, size_t)) {
  RegexBox *b = luaL_checkudata(L, 1, LPC_REGEX_MT);
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  if (b->re == NULL) return luaL_error(L, "regex: already freed");
  int found = match(b->re, s, len);
  if (found < 0) return luaL_error(L, "not enough memory");
  lua_pushboolean(L, found);
  return 1;
}

/* -- found = re:find(s)
 * Whether the pattern matches a substring of string 's' (unanchored: see
 * re:full). Raises when memory runs out. */
static int lpc_regex_find(lua_State *L) {
  return regex_match(L, pc_CelRegex_Match);
}

/* -- found = re:full(s)
 * Whether the pattern matches the whole of string 's' (what "^(?:p)$"
 * finds, the pattern's own length alone counting against RE2's limit: the
 * xDS matchers' safe_regex). Raises when memory runs out. */
static int lpc_regex_full(lua_State *L) {
  return regex_match(L, pc_CelRegex_FullMatch);
}

void lpc_open_regex(lua_State *L) {
  if (luaL_newmetatable(L, LPC_REGEX_MT)) {
    lua_pushcfunction(L, lpc_regex_gc);
    lua_setfield(L, -2, "__gc");
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, lpc_regex_find);
    lua_setfield(L, -2, "find");
    lua_pushcfunction(L, lpc_regex_full);
    lua_setfield(L, -2, "full");
    lua_setfield(L, -2, "__index");
    lua_pushliteral(L, "protocall.Regex");
    lua_setfield(L, -2, "__metatable"); /* Lua code cannot reach __gc */
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, lpc_regex);
  lua_setfield(L, -2, "regex");
}
