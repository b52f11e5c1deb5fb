/* luaopen_protocall: the module with its built-in Lua layer. */
#include "embedded.h"
#include "lpc_compat.h"
#include "protocall.h"

#include <lauxlib.h>
#include <string.h>

/* package.preload loader for one embedded file: ('module', extra) -> value. */
static int lpc_load_embedded(lua_State *L) {
  const lpc_EmbeddedFile *f = lua_touserdata(L, lua_upvalueindex(1));
  if (luaL_loadbufferx(L, (const char *)f->source, f->size, f->chunkname,
                       lpc_embedded_binary ? "b" : "t") != LUA_OK)
    return lua_error(L);
  lua_pushstring(L, f->module);
  lua_call(L, 1, 1);
  return 1;
}

int luaopen_protocall(lua_State *L) {
  const lpc_EmbeddedFile *init = NULL;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  if (lua_getfield(L, -1, "protocall.core") == LUA_TNIL) {
    lua_pushcfunction(L, luaopen_protocall_core);
    lua_setfield(L, -3, "protocall.core");
  }
  lua_pop(L, 1);
  for (size_t i = 0; i < lpc_embedded_count; i++) {
    const lpc_EmbeddedFile *f = &lpc_embedded_files[i];
    if (strcmp(f->module, "protocall") == 0) {
      init = f;
      continue;
    }
    if (lua_getfield(L, -1, f->module) == LUA_TNIL) { /* a host's own preload wins */
      lua_pushlightuserdata(L, (void *)f);
      lua_pushcclosure(L, lpc_load_embedded, 1);
      lua_setfield(L, -3, f->module);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (init == NULL)
    return luaL_error(L, "protocall: the library was built without lua/protocall/init.lua");
  lua_pushlightuserdata(L, (void *)init);
  lua_pushcclosure(L, lpc_load_embedded, 1);
  lua_call(L, 0, 1);
  return 1;
}
