/* protocall for C hosts that embed Lua 5.4.
 *
 * Link the host against the protocall library and liblua; then either
 *   luaL_requiref(L, "protocall", luaopen_protocall, 0);
 * or put luaopen_protocall in package.preload["protocall"] so scripts can
 * `require "protocall"`. No file on disk is needed: the Lua layer
 * (the files under lua/protocall/) is built into the library. Every piece of state lives
 * in the lua_State's registry, so two lua_States in one process are
 * independent. */
#ifndef PROTOCALL_H
#define PROTOCALL_H

#include <lua.h>

#if defined(_WIN32)
#define PROTOCALL_API __declspec(dllexport)
#else
#define PROTOCALL_API __attribute__((visibility("default")))
#endif

#define PROTOCALL_VERSION "0.1.0"

/* -- protocall = require "protocall"
 * Opens the whole module: registers the built-in Lua layer in
 * package.preload (for the submodules a host has not preloaded itself) and
 * runs its init chunk. Returns 1 (the module table). Raises on a Lua error
 * in the layer, which would be a build fault. */
PROTOCALL_API int luaopen_protocall(lua_State *L);

/* -- core = require "protocall.core"
 * Opens only the C part (what lua/protocall/init.lua requires). Returns 1. */
PROTOCALL_API int luaopen_protocall_core(lua_State *L);

#endif
