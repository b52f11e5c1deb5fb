/* The Lua 5.4 C API the binding uses, for LuaJIT 2.1 (the Lua 5.1 API with
 * LuaJIT's 5.2 additions). Private to bindings/lua, included by lpc.h after
 * lua.h and lauxlib.h; with Lua 5.4 it adds nothing but the 64-bit integer
 * helpers at the end, so the binding's files are written against 5.4 alone.
 *
 * How the 5.1 forms differ:
 *   - user values: a userdata's environment table holds them (value n at
 *     index n), made by lua_newuserdatauv when nuv > 0; a userdata made
 *     with none has the globals table as its environment, and reads as
 *     having no user values (LUA_TNONE, as 5.4).
 *   - integers: every number is a double; lua_isinteger and lua_tointegerx
 *     take a number with an exact integer value within the 64-bit range.
 *   - continuations (lua_callk, lua_pcallk): a plain call; LuaJIT cannot
 *     yield across a C function, so lua/protocall/call/callable.lua makes callables
 *     Lua functions under LuaJIT.
 *   - lua_toclose: nothing (the caller also clears what its __close would
 *     on the normal path; an error raised meanwhile leaves it set: a busy
 *     mark, LPC_BUSY_MARK in lpc.h, is then taken back by a later call).
 *   - lua_pushfstring, lua_pushvfstring, luaL_error: also take "%I" (a
 *     lua_Integer), as 5.4 does (lpc_compat.c). */
#ifndef LPC_COMPAT_H
#define LPC_COMPAT_H

#include <lauxlib.h>
#include <lua.h>
#include <stdarg.h>
#include <stdint.h>

#if LUA_VERSION_NUM < 502 /* LuaJIT 2.1 */

#define LPC_LUAJIT 1

typedef uint64_t lua_Unsigned;
typedef intptr_t lua_KContext;
typedef int (*lua_KFunction)(lua_State *L, int status, lua_KContext ctx);

#define LUA_LOADED_TABLE  "_LOADED"
#define LUA_PRELOAD_TABLE "_PRELOAD"

/* Getters that return the pushed value's type in 5.4. */
#define lua_getfield(L, i, k) (lua_getfield((L), (i), (k)), lua_type((L), -1))
#define lua_gettable(L, i)    (lua_gettable((L), (i)), lua_type((L), -1))
#define lua_rawget(L, i)      (lua_rawget((L), (i)), lua_type((L), -1))
#define lua_rawgeti(L, i, n)  (lua_rawgeti((L), (i), (n)), lua_type((L), -1))

static inline int lua_absindex(lua_State *L, int i) {
  return (i > 0 || i <= LUA_REGISTRYINDEX) ? i : lua_gettop(L) + i + 1;
}

#define lua_rawlen(L, i)        lua_objlen((L), (i))
#define luaL_typeerror(L, a, t) luaL_typerror((L), (a), (t))
#define luaL_pushfail(L)        lua_pushnil(L)

/* The length with __len, as 5.4's (5.1's lua_objlen is raw; on a
 * userdata, its size). */
static inline lua_Integer luaL_len(lua_State *L, int i) {
  if (luaL_callmeta(L, i, "__len")) {
    lua_Integer n = lua_tointeger(L, -1);
    lua_pop(L, 1);
    return n;
  }
  return (lua_Integer)lua_objlen(L, i);
}

static inline int lua_geti(lua_State *L, int t, lua_Integer n) {
  t = lua_absindex(L, t);
  lua_pushinteger(L, n);
  lua_gettable(L, t);
  return lua_type(L, -1);
}

static inline void lua_seti(lua_State *L, int t, lua_Integer n) {
  t = lua_absindex(L, t);
  lua_pushinteger(L, n);
  lua_insert(L, -2);
  lua_settable(L, t);
}

static inline int lua_rawgetp(lua_State *L, int t, const void *p) {
  t = lua_absindex(L, t);
  lua_pushlightuserdata(L, (void *)(uintptr_t)p);
  lua_rawget(L, t);
  return lua_type(L, -1);
}

static inline void lua_rawsetp(lua_State *L, int t, const void *p) {
  t = lua_absindex(L, t);
  lua_pushlightuserdata(L, (void *)(uintptr_t)p);
  lua_insert(L, -2);
  lua_rawset(L, t);
}

/* The n-th user value lives at [n] of the environment table. */
static inline void *lua_newuserdatauv(lua_State *L, size_t size, int nuv) {
  void *p = lua_newuserdata(L, size);
  if (nuv > 0) {
    lua_createtable(L, nuv, 0);
    lua_setfenv(L, -2);
  }
  return p;
}

static inline int lpc_compat_has_uv(lua_State *L, int idx) {
  lua_getfenv(L, idx);
  if (lua_type(L, -1) != LUA_TTABLE || lua_rawequal(L, -1, LUA_GLOBALSINDEX)) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

static inline int lua_getiuservalue(lua_State *L, int idx, int n) {
  if (lua_type(L, idx) != LUA_TUSERDATA) {
    lua_pushnil(L);
    return LUA_TNONE;
  }
  lua_getfenv(L, idx); /* a userdata's environment is always a table */
  if (lua_rawequal(L, -1, LUA_GLOBALSINDEX)) {
    lua_pop(L, 1);
    lua_pushnil(L);
    return LUA_TNONE;
  }
  int t = lua_rawgeti(L, -1, n); /* the 5.4-style macro: the type */
  lua_remove(L, -2);
  return t;
}

static inline int lua_setiuservalue(lua_State *L, int idx, int n) {
  idx = lua_absindex(L, idx);
  if (!lpc_compat_has_uv(L, idx)) {
    lua_pop(L, 1);
    return 0;
  }
  lua_insert(L, -2);
  lua_rawseti(L, -2, n);
  lua_pop(L, 1);
  return 1;
}

/* lua_newuserdatauv with user value 1 set to the value at 'v1', the
 * environment table made with it in place: the compat lua_setiuservalue's
 * checks (is it a userdata, has it a table of its own) cost a view under
 * LuaJIT some 180 instructions more (callgrind), and this userdata has one
 * by construction. */
static inline void *lpc_newuserdata_uv1(lua_State *L, size_t size, int nuv, int v1) {
  v1 = lua_absindex(L, v1);
  void *p = lua_newuserdata(L, size);
  lua_createtable(L, nuv, 0);
  lua_pushvalue(L, v1);
  lua_rawseti(L, -2, 1);
  lua_setfenv(L, -2);
  return p;
}

/* lua_getiuservalue of a userdata known to have user values (a view, a
 * container: made with nuv > 0), without the checks: pushes [n] of its
 * environment table and returns its type. */
static inline int lpc_get_known_uv(lua_State *L, int idx, int n) {
  lua_getfenv(L, idx);
  int t = lua_rawgeti(L, -1, n);
  lua_remove(L, -2);
  return t;
}

/* lpc_get_known_uv without the type: the macro's lua_type call saved
 * where the value is known (a view's or container's anchor). */
static inline void lpc_push_known_uv(lua_State *L, int idx, int n) {
  lua_getfenv(L, idx);
  (lua_rawgeti)(L, -1, n);
  lua_remove(L, -2);
}

/* One handle on the user values of a userdata known to have them (a
 * view, a container) for several reads and writes: its environment
 * table, pushed once (lpc_push_uvs returns its index); lpc_pop_uvs moves
 * the value on top into its place. Lua 5.4: the userdata's own index. */
static inline int lpc_push_uvs(lua_State *L, int idx) {
  lua_getfenv(L, idx);
  return lua_gettop(L);
}

/* Pushes user value n of the handle 'uvs' and returns its type. */
static inline int lpc_get_uv(lua_State *L, int uvs, int n) {
  return lua_rawgeti(L, uvs, n);
}

/* Pushes user value n of the handle 'uvs' (lpc_get_uv without the type). */
static inline void lpc_push_uv(lua_State *L, int uvs, int n) {
  (lua_rawgeti)(L, uvs, n);
}

/* Pops the value on top into user value n of the handle 'uvs'. */
static inline void lpc_set_uv(lua_State *L, int uvs, int n) {
  lua_rawseti(L, uvs, n);
}

static inline void lpc_pop_uvs(lua_State *L, int uvs) {
  lua_replace(L, uvs);
}

/* Whether the number 'n' has an exact 64-bit integer value. */
static inline int lpc_compat_integral(lua_Number n) {
  return n >= -9223372036854775808.0 && n < 9223372036854775808.0 && n == (lua_Number)(int64_t)n;
}

static inline int lpc_compat_isinteger(lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TNUMBER && lpc_compat_integral(lua_tonumber(L, idx));
}
#define lua_isinteger(L, i) lpc_compat_isinteger((L), (i))

/* The number read once (a container's c[i] reads its index so). */
static inline lua_Integer lpc_compat_tointegerx(lua_State *L, int idx, int *isnum) {
  int ok = lua_type(L, idx) == LUA_TNUMBER;
  lua_Number n = ok ? lua_tonumber(L, idx) : 0;
  ok = ok && lpc_compat_integral(n);
  if (isnum != NULL) *isnum = ok;
  return ok ? (lua_Integer)n : 0;
}
#define lua_tointegerx(L, i, p) lpc_compat_tointegerx((L), (i), (p))

static inline void lua_rotate(lua_State *L, int idx, int n) {
  idx = lua_absindex(L, idx);
  for (; n > 0; n--) lua_insert(L, idx);
  for (; n < 0; n++) {
    lua_pushvalue(L, idx);
    lua_remove(L, idx);
  }
}

#define lua_callk(L, na, nr, ctx, k)      ((void)(ctx), (void)(k), lua_call((L), (na), (nr)))
#define lua_pcallk(L, na, nr, eh, ctx, k) ((void)(ctx), (void)(k), lua_pcall((L), (na), (nr), (eh)))
#define lua_toclose(L, i)                 ((void)(L), (void)(i))

static inline int luaL_getsubtable(lua_State *L, int idx, const char *name) {
  idx = lua_absindex(L, idx);
  if (lua_getfield(L, idx, name) == LUA_TTABLE) return 1;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, idx, name);
  return 0;
}

/* 5.4's luaL_newmetatable also sets __name (lpc_type_name reads it). */
static inline int lpc_compat_newmetatable(lua_State *L, const char *name) {
  if (!luaL_newmetatable(L, name)) return 0;
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__name");
  return 1;
}
#define luaL_newmetatable(L, n) lpc_compat_newmetatable((L), (n))
#undef luaL_getmetatable
#define luaL_getmetatable(L, n) (lua_getfield((L), LUA_REGISTRYINDEX, (n)))

static inline int lpc_compat_getmetafield(lua_State *L, int idx, const char *e) {
  return luaL_getmetafield(L, idx, e) ? lua_type(L, -1) : LUA_TNIL;
}
#define luaL_getmetafield(L, i, e) lpc_compat_getmetafield((L), (i), (e))

static inline const char *luaL_tolstring(lua_State *L, int idx, size_t *len) {
  idx = lua_absindex(L, idx);
  lua_getglobal(L, "tostring");
  lua_pushvalue(L, idx);
  lua_call(L, 1, 1);
  return lua_tolstring(L, -1, len);
}

/* A buffer of 'size' bytes made at once: the string is built as a Lua
 * userdata block and pushed by luaL_pushresultsize. */
#define luaL_buffinitsize(L, B, size) lpc_compat_buffinitsize((L), (B), (size))
#define luaL_pushresultsize(B, n)     lpc_compat_pushresultsize((B), (n))
char *lpc_compat_buffinitsize(lua_State *L, luaL_Buffer *B, size_t size);
void lpc_compat_pushresultsize(luaL_Buffer *B, size_t n);

const char *lpc_compat_pushvfstring(lua_State *L, const char *fmt, va_list ap);
const char *lpc_compat_pushfstring(lua_State *L, const char *fmt, ...);
int lpc_compat_error(lua_State *L, const char *fmt, ...);
#define lua_pushvfstring lpc_compat_pushvfstring
#define lua_pushfstring  lpc_compat_pushfstring
#define luaL_error       lpc_compat_error

#else

#define LPC_LUAJIT 0

/* The LuaJIT block's helpers, as lua_newuserdatauv and lua_setiuservalue. */
static inline void *lpc_newuserdata_uv1(lua_State *L, size_t size, int nuv, int v1) {
  v1 = lua_absindex(L, v1);
  void *p = lua_newuserdatauv(L, size, nuv);
  lua_pushvalue(L, v1);
  lua_setiuservalue(L, -2, 1);
  return p;
}

static inline int lpc_get_known_uv(lua_State *L, int idx, int n) {
  return lua_getiuservalue(L, idx, n);
}

static inline void lpc_push_known_uv(lua_State *L, int idx, int n) {
  lua_getiuservalue(L, idx, n);
}

/* The LuaJIT block's handle on user values: the userdata at 'idx' (an
 * absolute index) itself; nothing pushed, nothing to pop. */
static inline int lpc_push_uvs(lua_State *L, int idx) {
  (void)L;
  return idx;
}

static inline int lpc_get_uv(lua_State *L, int uvs, int n) {
  return lua_getiuservalue(L, uvs, n);
}

static inline void lpc_push_uv(lua_State *L, int uvs, int n) {
  lua_getiuservalue(L, uvs, n);
}

static inline void lpc_set_uv(lua_State *L, int uvs, int n) {
  lua_setiuservalue(L, uvs, n);
}

static inline void lpc_pop_uvs(lua_State *L, int uvs) {
  (void)L;
  (void)uvs;
}

#endif

/* -- 64-bit integer fields -------------------------------------------------
 * Lua 5.4: plain integers (uint64 values above 2^63 read as negative
 * integers, as string.format("%u") prints them). LuaJIT: int64_t /
 * uint64_t cdata (boxed 64-bit integers, 1LL and 1ULL), made and read by
 * the functions lpc_compat.c registers (needs LuaJIT's ffi). */

/* Pushes a signed (or, when 'is_unsigned', unsigned) 64-bit value. */
void lpc_push_int64(lua_State *L, uint64_t bits, int is_unsigned);

/* Pops a table t and sets t[2i + 1][t[2i + 2]] to the 64-bit value
 * bits[i] (unsigned when 'is_unsigned[i]'), as lpc_push_int64 pushes it,
 * for i = 0..n-1 (LuaJIT: one Lua call makes all the cdata, instead of one
 * call each). */
#if LPC_LUAJIT
void lpc_set_int64s(lua_State *L, const uint64_t *bits, const uint8_t *is_unsigned, size_t n);
#endif

/* The 64-bit integer at 'idx': a Lua integer (5.4), an integral number
 * within +-2^53 or an int64_t / uint64_t cdata (LuaJIT). Returns 1 with
 * '*out' its two's-complement bits, 0 when the value is no integer at all
 * (not a number or cdata), -1 when it is a number without an exact 64-bit
 * integer value (a fraction, or a double beyond 2^53 under LuaJIT). */
int lpc_to_int64(lua_State *L, int idx, uint64_t *out);

/* Whether the value at 'idx' is an int64_t / uint64_t cdata (LuaJIT; never
 * under Lua 5.4): 1 with '*bits' its bits and '*is_unsigned' set. */
int lpc_is_int64_cdata(lua_State *L, int idx, uint64_t *bits, int *is_unsigned);

/* Registers the 64-bit helpers of this state (LuaJIT: requires "ffi");
 * luaopen_protocall_core calls it. */
void lpc_open_compat(lua_State *L);

#endif
