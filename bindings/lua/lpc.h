/* Private to bindings/lua: what the binding's files share. Each concern of
 * the C module has one opener that adds its functions and metatables to
 * the module table at the top of the stack; luaopen_protocall_core
 * (lpc_base.c) calls them in order (add yours to the list there). The
 * internals of message objects (lookups, arena boxes, containers, field
 * access) are in lpc_message.h, for the files that work on message memory.
 * Names: README "Naming" (lpc_<type>_<verb> Lua entry points, lpc_<verb>_
 * <noun> shared helpers, lpc_Name shared types, LPC_NAME macros). */
#ifndef LPC_H
#define LPC_H

#include "compiler/import.h"
#include "message/message.h"
#include "protocall.h"
#include "schema/def.h"
#include "wire/decode.h"

#include "lpc_compat.h"

#include <lauxlib.h>
#include <lua.h>

/* Hot paths inlined into each caller (a constant argument folded). */
#if defined(__GNUC__)
#define LPC_INLINE static inline __attribute__((always_inline))
#else
#define LPC_INLINE static inline
#endif

/* Busy marks of per-state scratch (README, "Errors"): the C stack frame of
 * the call using it, 0 when free. LuaJIT has no lua_toclose, so a mark an
 * error (a memory error, a finalizer's error) left behind stays set: a
 * later call takes the scratch for one in use only when it runs deeper on
 * the C stack than the marking frame, as a call made meanwhile (by a
 * finalizer, a hook) does while the marking call runs; a call no deeper
 * knows the marking one has returned or unwound, and takes the scratch
 * back. (The stack grows down on the targets built; without the builtin,
 * any mark is taken as in use.) */
#if defined(__GNUC__)
#define LPC_BUSY_MARK()   ((uintptr_t)__builtin_frame_address(0))
#define LPC_IS_BUSY(mark) ((mark) != 0 && LPC_BUSY_MARK() < (mark))
#else
#define LPC_BUSY_MARK()   ((uintptr_t)1)
#define LPC_IS_BUSY(mark) ((mark) != 0)
#endif

void lpc_open_status(lua_State *L);   /* status codes (lpc_base.c) */
void lpc_open_schema(lua_State *L);   /* pools, types, declarations (lpc_schema.c) */
void lpc_open_message(lua_State *L);  /* message instances (lpc_message_ops.c) */
void lpc_open_call(lua_State *L);     /* policies, callables (lpc_call.c) */
void lpc_open_wire(lua_State *L);     /* encode, decode, descriptor sets (lpc_wire.c) */
void lpc_open_parse(lua_State *L);    /* the .proto parser as tables (lpc_parse.c) */
void lpc_open_net(lua_State *L);      /* the gRPC channel (lpc_net.c) */
void lpc_open_listen(lua_State *L);   /* the gRPC listener (lpc_listen.c) */
void lpc_open_compiler(lua_State *L); /* pool:load, services (lpc_compiler.c) */
void lpc_open_host(lua_State *L);     /* host transports (lpc_host.c) */
void lpc_open_json(lua_State *L);     /* proto3 JSON (lpc_json.c) */
void lpc_open_text(lua_State *L);     /* text format (lpc_text.c) */
void lpc_open_validate(lua_State *L); /* protovalidate rules (lpc_validate.c) */
void lpc_open_regex(lua_State *L);    /* RE2 patterns (lpc_regex.c) */
void lpc_open_table(lua_State *L);    /* plain tables to wire bytes (lpc_table.c) */
void lpc_open_plain(lua_State *L);    /* wire bytes and messages to plain tables (lpc_plain.c) */
void lpc_open_ffi(lua_State *L);      /* FFI struct messages (lpc_ffi.c) */

/* -- ok, ... = core.protect(f, ...): pcall for the Lua layer's own calls of
 * the module's functions, under which lpc_msg_error names no source
 * position (lpc_anchor.c). */
int lpc_protect(lua_State *L);

/* The state's time source: the host's clock and sleep (protocall_settime),
 * NULL for the defaults (CLOCK_MONOTONIC, nanosleep). */
typedef struct {
  protocall_ClockFn *clock;
  protocall_SleepFn *sleep;
  void *ud;
} lpc_Time;

/* The state's time source, made (all defaults) on first use (lpc_call.c). */
lpc_Time *lpc_get_time(lua_State *L);

/* The listener of the "protocall.GrpcListener" userdata at 'idx' (NULL
 * when closed), for core.grpc_pump; lpc_is_listener tells such a userdata
 * apart (lpc_listen.c). */
struct pc_GrpcListener *lpc_to_listener(lua_State *L, int idx);
int lpc_is_listener(lua_State *L, int idx);

/* -- Pools, types, arenas and messages as Lua values -----------------------
 *   "protocall.Pool"    userdata lpc_PoolBox: owns the pool (lpc_schema.c).
 *   "protocall.Type"    userdata lpc_TypeBox, user values: 1 its Pool, 2 the
 *                       metatable of standalone instances, 3 the metatable
 *                       of views, 4 a table of the Types of sub-messages the
 *                       table paths met under it (lpc_table.c: kept alive
 *                       with it, not made again each call); calling it
 *                       makes an instance.
 *   "protocall.Arena"   owns an arena (decoded trees, and what Lua-made
 *                       messages point to).
 *   messages            standalone (the userdata is the message) or views
 *                       (a pointer into an arena); lpc_message.h tells how
 *                       their memory is owned and kept alive. */

#define LPC_POOL_MT "protocall.Pool"
#define LPC_TYPE_MT "protocall.Type"

/* The "protocall.Pool" userdata. */
typedef struct {
  pc_Pool *pool;
  int owned;     /* 0: a host's pool (protocall_pushpool), never freed here */
  int finalized; /* its __gc ran: 'pool' waits for the Reaper (lpc_anchor.c), read, not used */
} lpc_PoolBox;

/* The "protocall.Type" userdata: its def, and its field lookup in this
 * lua_State (an lpc_Lookup, owned by the instance metatables the Type holds
 * in user values 2 and 3; per state, since it is keyed by this state's
 * strings: a frozen pool's defs are shared by several states and never
 * written). */
typedef struct {
  const pc_MessageDef *def;
  const void *lookup;
  size_t arena_hint; /* T{...} of nested tables: the arena its last build used (lpc_table.c) */
} lpc_TypeBox;

/* The pool of the Pool userdata at 'idx' (raises otherwise, and when its
 * __gc ran: a finalizer using a pool the cycle also finalized). */
pc_Pool *lpc_check_pool(lua_State *L, int idx);

/* Pushes the Pool userdata that owns 'pool' (created by this state). */
void lpc_push_pool(lua_State *L, const pc_Pool *pool);

/* Pushes the Pool userdata of a host's pool (protocall_pushpool): the one
 * this state already has for it, else a new one that does not free it. */
void lpc_push_host_pool(lua_State *L, pc_Pool *pool);

/* Pushes the Type of 'def' (cached; made on first use). */
void lpc_push_type(lua_State *L, const pc_MessageDef *def);

/* The def of the Type at 'idx' (raises "bad argument ... (protocall.Type
 * expected, got ...)"). */
const pc_MessageDef *lpc_check_type(lua_State *L, int idx);

/* Adds the built-in well-known-type file defining 'full_name'
 * ("google.protobuf.Timestamp") to 'pool' when it lacks it, so those types
 * are there on first use. 1 when the pool has the file now; 0 when
 * 'full_name' is no well-known type or the pool is frozen. Raises only
 * when memory runs out. */
int lpc_load_wkt(lua_State *L, pc_Pool *pool, const char *full_name);

/* The same by file name ("google/protobuf/timestamp.proto"): 1 when the
 * pool has that built-in file now, 0 when it is none or the pool is frozen. */
int lpc_load_builtin(lua_State *L, pc_Pool *pool, const char *file);

/* Types get their instance metatables from the message binding without the
 * schema binding naming it: the registry holds, under
 * &lpc_type_metatables_key, the C function that lpc_open_message
 * registers; lpc_push_type calls it with the new Type. The Type
 * metatable's __call (T{...}, lpc_type_call in lpc_construct.c) is added
 * by lpc_open_message the same way. */
extern char lpc_type_metatables_key;
int lpc_type_call(lua_State *L);

/* Pushes a new "protocall.Arena" userdata and returns its arena (raises on
 * allocation failure, before anything is owned). */
pc_Arena *lpc_new_arena(lua_State *L);
/* As lpc_new_arena, its first block 'first' bytes (pc_Arena_NewSized). */
pc_Arena *lpc_new_arena_sized(lua_State *L, size_t first);

/* Tells Lua's collector about arena memory it cannot see: call after
 * filling the arena of the Arena userdata at 'idx'. */
void lpc_pace_arena(lua_State *L, int idx);

/* Frees the arena of the Arena userdata at 'idx' now (it then owns none),
 * for a tree that lived only until it was copied. */
void lpc_free_arena(lua_State *L, int idx);

/* Pushes a message view of 'msg' (type 'def') whose memory is owned by the
 * anchor at 'anchor_idx' (an Arena userdata or a standalone message). */
void lpc_push_view(lua_State *L, const pc_MessageDef *def, pc_Message *msg, int anchor_idx);

/* The message at 'idx' and its type, or NULL when it is not a message. */
pc_Message *lpc_to_message(lua_State *L, int idx, const pc_MessageDef **def);

/* As lpc_to_message, raising "bad argument #idx to 'fname' (message
 * expected, got number)" when it is not one: named by 'fname', not by the
 * call site, which a pcall or LuaJIT's wrapper of pc.clear (a tail call)
 * leaves as '?' (lpc_arg_error). */
pc_Message *lpc_check_message(lua_State *L, int idx, const char *fname, const pc_MessageDef **def);

/* Pushes the weak table (__mode 'mode': "k", "v") the registry holds at
 * 'key', making it on first use, so opening the module again in a state
 * keeps what live objects rely on (lpc_anchor.c). */
void lpc_registry_table(lua_State *L, void *key, const char *mode);

/* Whether the string at 'idx' holds a NUL byte: no name of a pool does (C
 * reads one as the end), so such a name is refused where declared and
 * found nowhere (lpc_anchor.c). */
int lpc_has_nul(lua_State *L, int idx);

/* What the FFI writers (lua/protocall/message.lua, ffi.lua) may store into
 * the slot of 'f' themselves, as the C __newindex would: the
 * kLpc_Write_* kinds (1 uint32, 2 int32, 3 64-bit, 4 double, 5 float, 6
 * bool), 7 for an open enum's numbers; 0 for what goes through C (closed
 * enums, enum names, strings, messages, repeated fields, extensions)
 * (lpc_message_ops.c). */
int lpc_ffi_write_kind(const pc_FieldDef *f);

/* -- Plain tables and the wire (lpc_table.c, lpc_plain.c) ------------------ */

/* Pushes the wire encoding of the plain table at 't' as a message of the
 * Type at 'type' and returns 1; returns 0 (nothing pushed, nothing
 * raised) when the table needs T{...}'s checks: the caller then builds
 * T{...} and encodes it (see lpc_table.c). Raises only when memory runs
 * out. */
int lpc_encode_table(lua_State *L, int type, int t);

/* T{...} for a table of nested tables: builds the tree straight into the
 * slots of one new arena (a message view), one pass over each table, no
 * object per sub-message. Returns 1 with the message pushed, or 0 (nothing
 * pushed, nothing raised) for a table T{...} must check or refuse itself:
 * the caller builds T{...} (lpc_table.c). */
int lpc_table_message(lua_State *L, int type, int t);

/* Pushes the plain table of 'msg' (type 'def', whose Type is at 'type')
 * in pc.to_table's shape: set fields by name, sub-messages as tables,
 * lists, maps as tables, enums as numbers (lpc_plain.c). */
void lpc_push_plain(lua_State *L, int type, const pc_Message *msg, const pc_MessageDef *def);

/* The plan {table = true} fills tables of 'def' (the Type at 'type') by:
 * pushes its names table (which keeps the plan) and returns the plan, made
 * on first use (lpc_plain.c). */
void *lpc_plain_plan(lua_State *L, int type, const pc_MessageDef *def);

/* pc.decode(T, bytes, {table = true}) straight from the wire: pushes the
 * tables lpc_push_plain would show of the decoded message (of type 'def',
 * with 'plan' and its names table at 'names' from lpc_plain_plan; 'opts':
 * max_depth and partial) and returns 1, or returns 0 with the stack as it
 * was when the input is anything but plain well-formed data (the caller
 * then decodes it into an arena: the same tables, or the decoder's error).
 * Never raises for bad input (lpc_plain.c). */
int lpc_decode_plain(lua_State *L, int names, void *plan, const pc_MessageDef *def,
                     const char *bytes, size_t len, const pc_DecodeOptions *opts);

/* -- Argument errors (lpc_arg.c) -------------------------------------------
 * The binding's one path for Lua's "bad argument" error. */

/* GCC's spelling of _Noreturn beside C11's: cppcheck reads only this one,
 * and without it takes a pointer checked for NULL before a raise as
 * possibly NULL after it. */
#define LPC_NORETURN __attribute__((noreturn))

/* Raises "bad argument #arg to 'fname' (msg)" after the calling Lua line's
 * position, as luaL_argerror words it; 'fname' names the function as its
 * caller knows it ("decode", "to_json"). 'msg' NULL: the message is the
 * string on top of the stack (which may hold a NUL byte). */
_Noreturn void lpc_arg_error(lua_State *L, int arg, const char *fname,
                             const char *msg) LPC_NORETURN;

/* As luaL_typeerror through lpc_arg_error: "(table expected, got number)",
 * a value with a __name metafield shown by it. */
_Noreturn void lpc_arg_type_error(lua_State *L, int arg, const char *fname,
                                  const char *expected) LPC_NORETURN;

/* The metatable-upvalue check of a metamethod's self: the userdata at 1
 * when its metatable is the value at upvalue 'uv' of the running C
 * closure, else raises "bad argument #1 to 'fname' (<expected> expected,
 * got <its type>)". A metamethod pulled out with debug.getmetatable and
 * called with a foreign value then raises instead of reading that value's
 * memory; no registry lookup, as luaL_checkudata makes. */
LPC_INLINE void *lpc_check_self(lua_State *L, int uv, const char *fname, const char *expected) {
  void *p = lua_touserdata(L, 1);
  if (p != NULL && lua_getmetatable(L, 1)) {
    int same = lua_topointer(L, -1) == lua_topointer(L, lua_upvalueindex(uv));
    lua_pop(L, 1);
    if (same) return p;
  }
  lpc_arg_type_error(L, 1, fname, expected);
}

/* The name of the type of the value at 'idx' for an error: its __name
 * metafield ("protocall.Pool", "demo.Point"), else its Lua type. */
const char *lpc_type_name(lua_State *L, int idx);

/* The arguments (T, s) of a parser such as pc.from_json / pc.from_text:
 * the Type's def, and the string in *s, *len; raises naming 'fname'. */
const pc_MessageDef *lpc_check_parse_args(lua_State *L, const char *fname, const char **s,
                                          size_t *len);

#endif
