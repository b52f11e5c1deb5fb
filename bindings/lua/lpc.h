/* Private to bindings/lua: each concern of the C module has one opener that
 * adds its functions and metatables to the module table at the top of the
 * stack. luaopen_protocall_core (lpc_base.c) calls them in order; add yours
 * to the list there. */
#ifndef LPC_H
#define LPC_H

#include "protocall.h"

#include <lua.h>

/* The state's time source: the host's clock and sleep (protocall_settime),
 * NULL for the defaults (CLOCK_MONOTONIC, nanosleep). */
typedef struct {
  protocall_ClockFn *clock;
  protocall_SleepFn *sleep;
  void *ud;
} lpc_Time;

/* The state's time source, made (all defaults) on first use (lpc_call.c). */
lpc_Time *lpc_gettime(lua_State *L);

void lpc_open_status(lua_State *L);
void lpc_open_def(lua_State *L);     /* pools, types, declarations (lpc_schema.c) */
void lpc_open_message(lua_State *L); /* message instances (lpc_message.c) */
void lpc_open_policy(lua_State *L);
void lpc_open_codec(lua_State *L); /* wire encode/decode, descriptor sets (lpc_wire.c) */
void lpc_open_parse(lua_State *L);
void lpc_open_grpc(lua_State *L);
void lpc_open_load(lua_State *L); /* pool:load, services (lpc_compiler.c) */
void lpc_open_host(lua_State *L); /* host transports (lpc_host.c) */

#endif
