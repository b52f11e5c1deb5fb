/* Private to bindings/lua: each concern of the C module has one opener that
 * adds its functions and metatables to the module table at the top of the
 * stack. luaopen_protocall_core (lpc_base.c) calls them in order; add yours
 * to the list there. */
#ifndef LPC_H
#define LPC_H

#include "message/message.h"
#include "protocall.h"
#include "schema/def.h"

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
void lpc_open_schema(lua_State *L);  /* pools, types, declarations (lpc_schema.c) */
void lpc_open_message(lua_State *L); /* message instances (lpc_message.c) */
void lpc_open_call(lua_State *L);
void lpc_open_wire(lua_State *L); /* wire encode/decode, descriptor sets (lpc_wire.c) */
void lpc_open_parse(lua_State *L);
void lpc_open_net(lua_State *L);
void lpc_open_compiler(lua_State *L); /* pool:load, services (lpc_compiler.c) */
void lpc_open_host(lua_State *L);     /* host transports (lpc_host.c) */
void lpc_open_json(lua_State *L);     /* proto3 JSON (lpc_json.c) */
void lpc_open_text(lua_State *L);     /* text format (lpc_text.c) */

/* Messages, types and pools as Lua values, shared by
 * lpc_schema.c (pools, types, declarations), lpc_message.c (instances) and the
 * wire codec's binding (decode into an arena, encode any message).
 *
 * Lua objects:
 *   "protocall.Pool"    userdata {pc_Pool *}: owns the pool.
 *   "protocall.Type"    userdata {def}, user values: 1 its Pool, 2 the
 *                       metatable of standalone instances, 3 the metatable
 *                       of views; calling it makes an instance.
 *   "protocall.Arena"   userdata {pc_Arena *}: owns an arena (decoded trees,
 *                       and what Lua-made messages point to).
 *   message, standalone one block: the message's slots ARE the userdata's
 *                       memory (def->size bytes, no user value).
 *   message, view       userdata {pc_Message *}, user value 1: its anchor, the
 *                       object owning the memory (an Arena or a standalone
 *                       message).
 * A standalone message is its own anchor. What a message's memory points to
 * that the anchor's arena does not own is kept alive from a per-anchor table
 * in an ephemeron table in the registry. */

/* A "protocall.Type" userdata: its def, and its field lookup in this
 * lua_State (owned by the instance metatables the Type holds in user values
 * 2 and 3; per state, since it is keyed by this state's strings: a frozen
 * pool's defs are shared by several states and never written). */
typedef struct {
  const pc_MessageDef *def;
  const void *lookup;
} TypeBox;

/* The pool of the "protocall.Pool" userdata at 'idx' (raises otherwise). */
pc_Pool *lpc_checkpool(lua_State *L, int idx);

/* Pushes the Pool userdata that owns 'pool' (created by this state). */
void lpc_pushpool(lua_State *L, const pc_Pool *pool);

/* Pushes the Pool userdata of a host's pool (protocall_pushpool): the one
 * this state already has for it, else a new one that does not free it. */
void lpc_pushhostpool(lua_State *L, pc_Pool *pool);

/* Pushes the Type of 'def' (cached; made on first use). */
void lpc_pushtype(lua_State *L, const pc_MessageDef *def);

/* The def of the Type at 'idx' (raises "bad argument ... (protocall.Type
 * expected, got ...)"). */
const pc_MessageDef *lpc_checktype(lua_State *L, int idx);

/* Pushes a new "protocall.Arena" userdata and returns its arena (raises on
 * allocation failure, before anything is owned). */
pc_Arena *lpc_newarena(lua_State *L);

/* Pushes a message view of 'msg' (type 'def') whose memory is owned by the
 * anchor at 'anchor_idx' (an Arena userdata or a standalone message). */
void lpc_pushview(lua_State *L, const pc_MessageDef *def, pc_Message *msg, int anchor_idx);

/* The message at 'idx' and its type, or NULL when it is not a message. */
pc_Message *lpc_tomessage(lua_State *L, int idx, const pc_MessageDef **def);

/* As lpc_tomessage, raising a bad-argument error when it is not one. */
pc_Message *lpc_checkmessage(lua_State *L, int idx, const pc_MessageDef **def);

/* Tells Lua's collector about arena memory it cannot see: call after
 * filling the arena of the Arena userdata at 'idx'. */
void lpc_pacearena(lua_State *L, int idx);

/* Where .proto text comes from when loading (lpc_compiler.c): the main file
 * given as text, else the import paths in order, else the built-in
 * well-known types. */
typedef struct {
  pc_Arena *arena;       /* scratch: paths, file text, loaded descriptions */
  const char *main_name; /* the file given as text, or NULL */
  const char *main_source;
  size_t main_len;
  const char **paths; /* import paths */
  size_t path_count;
} lpc_SourceCtx;

/* Loads the file 'name' and what it imports into 'pool' (files the pool
 * holds are reused, not read). Never raises. Returns 1, or 0 with 'err'
 * set; the pool then keeps the files added before the failing one. */
int lpc_load_into(pc_Pool *pool, lpc_SourceCtx *c, const char *name, pc_Error *err);

/* Adds the built-in well-known-type file defining 'full_name'
 * ("google.protobuf.Timestamp") to 'pool' when it lacks it, so those types
 * are there on first use. 1 when the pool has the file now; 0 when
 * 'full_name' is no well-known type or the pool is frozen. Raises only
 * when memory runs out. */
int lpc_load_wkt(lua_State *L, pc_Pool *pool, const char *full_name);

/* The same by file name ("google/protobuf/timestamp.proto"): 1 when the
 * pool has that built-in file now, 0 when it is none or the pool is frozen. */
int lpc_load_builtin(lua_State *L, pc_Pool *pool, const char *file);

/* Options tables of the codecs (lpc_json.c, used by lpc_text.c too). Each
 * raises "bad argument #idx to 'fname' (...)", named so that a pcall'd call
 * does not name the core table. */
void lpc_argerror(lua_State *L, int arg, const char *fname, const char *msg);
/* The table at 'idx' (nil or none allowed) has only keys among 'names'
 * (NULL-terminated). */
void lpc_check_options(lua_State *L, int idx, const char *fname, const char *const *names);
/* Integer field 'name' of the table at 'idx' in lo..hi, or 'dflt' when
 * absent (or when there is no table). */
int lpc_opt_int(lua_State *L, int idx, const char *fname, const char *name, int lo, int hi, int dflt);
/* The pool of field "pool" of the table at 'idx' (a Pool userdata), or NULL. */
pc_Pool *lpc_opt_pool(lua_State *L, int idx);

/* Used between lpc_schema.c and lpc_message.c: the two instance metatables
 * of a new Type (its user values 2 and 3), and calling a Type. */
void lpc_maketype_metatables(lua_State *L, int type_idx, const pc_MessageDef *def);
int lpc_type_call(lua_State *L);

#endif
