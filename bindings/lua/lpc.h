/* Private to bindings/lua: each concern of the C module has one opener that
 * adds its functions and metatables to the module table at the top of the
 * stack. luaopen_protocall_core (lpc_base.c) calls them in order; add yours
 * to the list there. */
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

/* The state's time source: the host's clock and sleep (protocall_settime),
 * NULL for the defaults (CLOCK_MONOTONIC, nanosleep). */
typedef struct {
  protocall_ClockFn *clock;
  protocall_SleepFn *sleep;
  void *ud;
} lpc_Time;

/* The state's time source, made (all defaults) on first use (lpc_call.c). */
lpc_Time *lpc_gettime(lua_State *L);

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
void lpc_open_table(lua_State *L);    /* plain tables to wire bytes (lpc_table.c) */
void lpc_open_plain(lua_State *L);    /* wire bytes and messages to plain tables (lpc_plain.c) */
void lpc_open_ffi(lua_State *L);      /* FFI struct messages (lpc_ffi.c) */

/* The listener of the "protocall.GrpcListener" userdata at 'idx' (NULL
 * when closed), for core.grpc_pump; lpc_islistener tells such a userdata
 * apart (lpc_listen.c). */
struct pc_GrpcListener *lpc_tolistener(lua_State *L, int idx);
int lpc_islistener(lua_State *L, int idx);

/* Pushes the wire encoding of the plain table at 't' as a message of the
 * Type at 'type' and returns 1; returns 0 (nothing pushed, nothing
 * raised) when the table needs T{...}'s checks: the caller then builds
 * T{...} and encodes it (see lpc_table.c). Raises only when memory runs
 * out. */
int lpc_encode_table(lua_State *L, int type, int t);

/* T{...} for a table of nested tables: encodes it as lpc_encode_table does
 * and decodes the bytes into one arena (a message view), which costs a
 * fraction of building one object per sub-message. Returns 1 with the
 * message pushed, or 0 (nothing pushed, nothing raised) when
 * lpc_encode_table declines: the caller builds T{...} (lpc_table.c). */
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

/* Messages, types and pools as Lua values, shared by lpc_schema.c (pools,
 * types, declarations), the message files (instances: lpc_anchor.c,
 * lpc_scalar.c, lpc_message.c, lpc_construct.c, lpc_message_ops.c) and the
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
 *                       memory (def->size bytes); user value 1, its refs
 *                       table, when the type can hold references
 *                       (lpc_standalone_uv), else none; a flat type's
 *                       decode (lpc_wire.c) leaves there the input string
 *                       its string fields point into, which lpc_push_refs
 *                       moves into the refs table (under the message's own
 *                       address) when one is first needed.
 *   message, view       userdata {pc_Message *}, user value 1: its anchor, the
 *                       object owning the memory (an Arena or a standalone
 *                       message).
 * A standalone message is its own anchor. What a message's memory points to
 * that the anchor's arena does not own is kept alive from a per-anchor refs
 * table: the anchor's user value 1 (an Arena's, a standalone message's), or
 * for standalone messages of numbers-only types, which have no user value,
 * an entry in an ephemeron table in the registry (lpc_push_refs). */

#define LPC_POOL_MT "protocall.Pool"

/* The "protocall.Pool" userdata. */
typedef struct {
  pc_Pool *pool;
  int owned; /* 0: a host's pool (protocall_pushpool), never freed here */
} lpc_PoolBox;

/* A "protocall.Type" userdata: its def, and its field lookup in this
 * lua_State (owned by the instance metatables the Type holds in user values
 * 2 and 3; per state, since it is keyed by this state's strings: a frozen
 * pool's defs are shared by several states and never written). */
typedef struct {
  const pc_MessageDef *def;
  const void *lookup;
} lpc_TypeBox;

/* The pool of the "protocall.Pool" userdata at 'idx' (raises otherwise). */
pc_Pool *lpc_checkpool(lua_State *L, int idx);

/* What the FFI writers (lua/protocall/message.lua, ffi.lua) may store into
 * the slot of 'f' themselves, as the C __newindex would: the kWrite_*
 * kinds (1 uint32, 2 int32, 3 64-bit, 4 double, 5 float, 6 bool), 7 for
 * an open enum's numbers; 0 for what goes through C (closed enums, enum
 * names, strings, messages, repeated fields, extensions) (lpc_message_ops.c). */
int lpc_ffi_write_kind(const pc_FieldDef *f);

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

/* Pushes the weak table (__mode 'mode': "k", "v") the registry holds at
 * 'key', making it on first use, so opening the module again in a state
 * keeps what live objects rely on (lpc_anchor.c). */
void lpc_registry_table(lua_State *L, void *key, const char *mode);

/* Tells Lua's collector about arena memory it cannot see: call after
 * filling the arena of the Arena userdata at 'idx'. */
void lpc_pacearena(lua_State *L, int idx);

/* Adds the built-in well-known-type file defining 'full_name'
 * ("google.protobuf.Timestamp") to 'pool' when it lacks it, so those types
 * are there on first use. 1 when the pool has the file now; 0 when
 * 'full_name' is no well-known type or the pool is frozen. Raises only
 * when memory runs out. */
int lpc_load_wkt(lua_State *L, pc_Pool *pool, const char *full_name);

/* The same by file name ("google/protobuf/timestamp.proto"): 1 when the
 * pool has that built-in file now, 0 when it is none or the pool is frozen. */
int lpc_load_builtin(lua_State *L, pc_Pool *pool, const char *file);

/* -- Argument errors (lpc_arg.c) ------------------------------------------
 * The binding's one path for Lua's "bad argument" error. */

/* Raises "bad argument #arg to 'fname' (msg)" after the calling Lua line's
 * position, as luaL_argerror words it; 'fname' names the function as its
 * caller knows it ("decode", "to_json"). 'msg' NULL: the message is the
 * string on top of the stack (which may hold a NUL byte). */
_Noreturn void lpc_arg_error(lua_State *L, int arg, const char *fname, const char *msg);
/* As luaL_typeerror through lpc_arg_error: "(table expected, got number)",
 * a value with a __name metafield shown by it. */
_Noreturn void lpc_arg_type_error(lua_State *L, int arg, const char *fname, const char *expected);
/* The name of the type of the value at 'idx' for an error: its __name
 * metafield ("protocall.Pool", "demo.Point"), else its Lua type. */
const char *lpc_type_name(lua_State *L, int idx);
/* The arguments (T, s) of a parser such as pc.from_json / pc.from_text:
 * the Type's def, and the string in *s, *len; raises naming 'fname'. */
const pc_MessageDef *lpc_check_parse_args(lua_State *L, const char *fname, const char **s,
                                          size_t *len);

/* -- Options tables (lpc_options.c) --------------------------------------- */

/* The table at 'idx' (nil or none allowed: argument #idx of 'fname') has
 * only keys among 'names' (NULL-terminated; whole keys compared, a NUL in
 * one too); else raises "bad argument #idx to 'fname' (unknown option
 * 'key')", a key that is not a string named as tostring shows it. */
void lpc_check_options(lua_State *L, int idx, const char *fname, const char *const *names);
/* The keys of the declaration table at 't' are 1..npos and names among
 * 'allowed'; else raises "<where>: unknown option 'k' (expected
 * <expected>)" (pc.message, pc.enum, pc.extend). */
void lpc_check_keys(lua_State *L, int t, const char *where, lua_Integer npos,
                    const char *const *allowed, const char *expected);
/* Field 'name' of the table at 'idx' is set and not false (0 when there is
 * no table). */
int lpc_opt_bool(lua_State *L, int idx, const char *name);
/* Field 'name' of the table at 'idx': 1 with '*v' set when it is a number
 * with an integer value in lo..hi, 0 when absent (or no table), -1 when it
 * is anything else (the caller words the error). */
int lpc_test_opt_int(lua_State *L, int idx, const char *name, int lo, int hi, int *v);
/* As lpc_test_opt_int: the value, 'dflt' when absent; raises "bad argument
 * #idx to 'fname' (<name> must be an integer in lo..hi)". */
int lpc_opt_int(lua_State *L, int idx, const char *fname, const char *name, int lo, int hi,
                int dflt);
/* The pool of field "pool" of the table at 'idx' (a Pool userdata), or NULL;
 * raises "bad argument #idx to 'fname' (pool: protocall.Pool expected, ...)". */
pc_Pool *lpc_opt_pool(lua_State *L, int idx, const char *fname);
/* String field 'k' of the table at 't', or NULL when nil (luaL_checkstring
 * on the field otherwise). */
const char *lpc_opt_string(lua_State *L, int t, const char *k);
/* Integer field 'k' of the table at 't' in 0..max, 0 when nil; raises "<k>
 * must be in 0..<max>". */
lua_Integer lpc_opt_size(lua_State *L, int t, const char *k, lua_Integer max);

/* Types ("protocall.Type", lpc_schema.c) get their instance metatables
 * from the message binding without the schema binding naming it: the
 * registry holds, under &lpc_type_metatables_key, the C function that
 * lpc_open_message registers; lpc_pushtype calls it with the new Type. The
 * Type metatable's __call (T{...}, lpc_type_call in lpc_construct.c) is
 * added by lpc_open_message the same way. */
#define LPC_TYPE_MT "protocall.Type"
extern char lpc_type_metatables_key;
int lpc_type_call(lua_State *L);

/* -- The message binding's shared parts (lpc_anchor.c, lpc_scalar.c,
 * lpc_message.c, lpc_construct.c, lpc_message_ops.c) ------------------- */

/* The field access paths are inlined into each metamethod (the kind of
 * message a constant there). */
#if defined(__GNUC__)
#define LPC_INLINE static inline __attribute__((always_inline))
#else
#define LPC_INLINE static inline
#endif

#define LPC_ARENA_MT    "protocall.Arena"
#define LPC_REPEATED_MT "protocall.Repeated"
#define LPC_MAP_MT      "protocall.Map"

/* Instance metatables say which kind of object they serve. */
enum { kLpc_Standalone = 1, kLpc_View = 2 };

extern char lpc_refs_key; /* registry: ephemeron table anchor -> refs table */
/* Instance metatable field: a light userdata of the type's def with the
 * kind in its two low bits (a def is aligned to at least 4 bytes), so one
 * lookup gives both (lpc_tomessage). */
extern char lpc_def_key;

/* The "protocall.Arena" userdata. */
typedef struct {
  pc_Arena *arena;
  size_t reported; /* bytes already reported to the collector */
} Holder;

/* A repeated or map container: the field 'f' of the message 'msg'. */
typedef struct {
  pc_Message *msg;
  const pc_FieldDef *f;
} Container;

/* Per-type field lookup without allocation: open addressing keyed by the
 * address of the field name's interned Lua string (short strings are
 * interned, so a key string read from Lua code is that very string). The
 * strings are kept alive by the userdata's user value. The Lookup is this
 * state's (a frozen pool's defs are shared by several states): __index and
 * __newindex have it as their upvalue, the Type in its TypeBox. */
enum { kRead_Other, kRead_U32, kRead_I32, kRead_I64, kRead_F64, kRead_F32, kRead_Bool };

/* How a plain slot takes a Lua value without the general path: integers
 * range-checked here, the rest (enums, strings, messages, presence) through
 * set_field. */
enum { kWrite_Other, kWrite_U32, kWrite_I32, kWrite_I64, kWrite_F64, kWrite_F32, kWrite_Bool };

typedef struct {
  const void *key; /* the name's TString, as lua_topointer gives it */
  uint32_t offset; /* the field's offset, for the direct read and write */
  uint8_t read;    /* kRead_*: a plain slot read directly, or kRead_Other */
  uint8_t write;   /* kWrite_* */
} LookupEntry;

typedef struct {
  const pc_MessageDef *def;
  int standalone_uv; /* lpc_standalone_uv(def), for T{...} */
  int tree;          /* a field holds messages: T{...} tries lpc_table_message first */
  size_t mask;
  unsigned shift;             /* hash: (address >> shift) & mask */
  const pc_FieldDef **fields; /* fields[i] is the field of e[i] (after e) */
  LookupEntry e[1];
} Lookup;

static inline int lpc_plain_slot(const pc_FieldDef *f) {
  return f->slot <= kPc_Slot_64 && f->hasbit < 0 && f->case_offset == 0 && !f->is_extension &&
         f->label != kPc_Label_Repeated;
}

/* Strings are separate allocations: the address bits above the
 * alignment tell them apart. Each type picks the shift (and table size)
 * that puts every name in its first slot when it can (see make_lookup). */
static inline size_t lpc_hash_ptr(const void *p, unsigned shift) {
  return (size_t)((uintptr_t)p >> shift);
}

/* The entry of the name at 'p', probing past its first slot; NULL when
 * absent (lpc_message.c). */
const LookupEntry *lpc_probe_more(const Lookup *lk, const void *p, size_t i);

/* The entry of the interned name string at 'p' in the Lookup, or NULL. */
LPC_INLINE const LookupEntry *lpc_probe(const Lookup *lk, const void *p) {
  size_t i = lpc_hash_ptr(p, lk->shift) & lk->mask;
  if (lk->e[i].key == p) return &lk->e[i];
  return lpc_probe_more(lk, p, i);
}

static inline const pc_FieldDef *lpc_entry_field(const Lookup *lk, const LookupEntry *e) {
  return lk->fields[e - lk->e];
}

/* The message memory of the object at 1 (a standalone message's block or
 * the memory a view points to). */
LPC_INLINE char *lpc_msg_at1(lua_State *L, int kind) {
  void *p = lua_touserdata(L, 1);
  return kind == kLpc_Standalone ? (char *)p : *(char **)p;
}

int lpc_arena_gc(lua_State *L);
/* Declared here for the message files; each is documented where it is
 * defined. */
_Noreturn void lpc_msg_error(lua_State *L, const char *fmt, ...);
/* Whether the string at 'idx' holds a NUL byte: no name of a pool does (C
 * reads one as the end), so such a name is refused where declared and
 * found nowhere (lpc_anchor.c). */
int lpc_has_nul(lua_State *L, int idx);
/* Pushes the string at 'idx' with each NUL byte written \0, for an error
 * message's %s, and returns it. */
const char *lpc_pushshown(lua_State *L, int idx);
void lpc_pace(lua_State *L, Holder *h);
int lpc_push_anchor(lua_State *L, int idx);
int lpc_push_anchor_of(lua_State *L, int idx, int kind);
void lpc_push_refs(lua_State *L, int a, int create);
Holder *lpc_anchor_holder(lua_State *L, int a);
void lpc_set_ref(lua_State *L, int a, const void *key, int v);
_Noreturn void lpc_nomem(lua_State *L);
void lpc_push_scalar(lua_State *L, const pc_FieldDef *f, pc_Value v);

/* Pushes a map key of key field 'f': as lpc_push_scalar, except that under
 * LuaJIT a 64-bit key within +-2^53 is a number (so plain tables can be
 * indexed by it; cdata keys are distinct objects), cdata beyond. */
void lpc_push_key(lua_State *L, const pc_FieldDef *f, pc_Value v);
/* Whether lpc_push_key pushes key 'v' of 'f' as a cdata: under LuaJIT, a
 * 64-bit key beyond +-2^53 (two equal ones are then two table keys). */
int lpc_key_is_cdata(const pc_FieldDef *f, pc_Value v);
_Noreturn void lpc_type_error(lua_State *L, const char *name, const char *expected, int idx);
lua_Integer lpc_check_integer(lua_State *L, const char *name, int idx);
pc_Value lpc_check_scalar(lua_State *L, const pc_FieldDef *f, const char *name, int idx);
pc_Message *lpc_new_standalone(lua_State *L, const pc_MessageDef *def, int mt);
/* 1 when standalone messages of 'def' carry a refs user value: the type has
 * a string, message, repeated or map field, or extension ranges. */
int lpc_standalone_uv(const pc_MessageDef *def);
void lpc_push_container(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f);
void lpc_push_field(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f);
const pc_FieldDef *lpc_lookup_slow(lua_State *L, const pc_MessageDef *def, int key);
int lpc_message_index(lua_State *L);
int lpc_view_index(lua_State *L);
void lpc_keep_elem(lua_State *L, int c, int key, int v);
void lpc_push_elem(lua_State *L, int c, const pc_FieldDef *ef, pc_Value v, int key);
Container *lpc_check_container(lua_State *L, int idx, const char *mt);
int lpc_repeated_index(lua_State *L);
int lpc_container_len(lua_State *L);
int lpc_repeated_pairs(lua_State *L);
int lpc_map_index(lua_State *L);
int lpc_map_pairs(lua_State *L);
void lpc_check_no_cycle(lua_State *L, const char *name, const pc_Message *value,
                        const pc_MessageDef *vdef, const pc_Message *target);
/* One conversion of Lua tables into messages (T{...}, m.f = {...}): 'marks'
 * whether the registry's table of tables being converted (the cycle check)
 * was started, 'depth' how many levels of tables below the first the
 * conversion is in (refused past PC_MESSAGE_MAX_DEPTH before recursing).
 * Start each conversion at {0, 0}. */
typedef struct {
  int marks;
  int depth;
} lpc_Build;
void lpc_set_field(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f, int v,
                   lpc_Build *visited);
int lpc_message_newindex(lua_State *L);
int lpc_view_newindex(lua_State *L);
int lpc_repeated_newindex(lua_State *L);
int lpc_map_newindex(lua_State *L);

#endif
