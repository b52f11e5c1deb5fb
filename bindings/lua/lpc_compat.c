/* The compatibility layer's functions (lpc_compat.h): formatted strings
 * with "%I" and sized buffers for LuaJIT, and the 64-bit integer values of
 * both runtimes. */
#define _GNU_SOURCE /* dladdr */
#include "lpc_compat.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if LPC_LUAJIT

#include <dlfcn.h>

#undef lua_pushvfstring
#undef lua_pushfstring
#undef luaL_error

char *lpc_compat_buffinitsize(lua_State *L, luaL_Buffer *B, size_t size) {
  luaL_buffinit(L, B);
  return lua_newuserdata(L, size ? size : 1);
}

void lpc_compat_pushresultsize(luaL_Buffer *B, size_t n) {
  lua_pushlstring(B->L, lua_touserdata(B->L, -1), n);
  lua_remove(B->L, -2);
}

/* Lua 5.4's conversions: %s %d %I %f %p %c %U %%. */
const char *lpc_compat_pushvfstring(lua_State *L, const char *fmt, va_list ap) {
  int n = 0;
  const char *e;
  char buf[64];
  while ((e = strchr(fmt, '%')) != NULL) {
    luaL_checkstack(L, 3, "formatting a message");
    lua_pushlstring(L, fmt, (size_t)(e - fmt));
    switch (e[1]) {
    case 's': {
      const char *s = va_arg(ap, const char *);
      lua_pushstring(L, s != NULL ? s : "(null)");
      break;
    }
    case 'd': snprintf(buf, sizeof buf, "%d", va_arg(ap, int)), lua_pushstring(L, buf); break;
    case 'I':
      snprintf(buf, sizeof buf, "%lld", (long long)va_arg(ap, lua_Integer));
      lua_pushstring(L, buf);
      break;
    case 'f':
      lua_pushnumber(L, (lua_Number)va_arg(ap, double));
      lua_tolstring(L, -1, NULL);
      break;
    case 'p': snprintf(buf, sizeof buf, "%p", va_arg(ap, void *)), lua_pushstring(L, buf); break;
    case 'c':
      buf[0] = (char)va_arg(ap, int);
      lua_pushlstring(L, buf, 1);
      break;
    case 'U': snprintf(buf, sizeof buf, "U+%lX", va_arg(ap, long)), lua_pushstring(L, buf); break;
    case '%': lua_pushliteral(L, "%"); break;
    default: return luaL_error(L, "invalid conversion '%%%c' to 'lua_pushfstring'", e[1]), NULL;
    }
    n += 2;
    fmt = e + 2;
  }
  lua_pushstring(L, fmt);
  lua_concat(L, n + 1);
  return lua_tostring(L, -1);
}

const char *lpc_compat_pushfstring(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *s = lpc_compat_pushvfstring(L, fmt, ap);
  va_end(ap);
  return s;
}

int lpc_compat_error(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  luaL_where(L, 1);
  lpc_compat_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_concat(L, 2);
  return lua_error(L);
}

/* Pointers reach the helpers as numbers (their addresses: below 2^53 on
 * every 64-bit target LuaJIT runs on, so exact): the JIT compiles ffi.cast
 * of a number, not of a light userdata (NYI, which left the helpers to the
 * interpreter).
 * push(pointer, unsigned) -> int64_t / uint64_t cdata of *pointer (read
 * through unqualified pointers: a const int64_t cdata would not be taken
 * by string.format's %d);
 * to(value, pointer) -> 1 for an int64_t cdata, 2 for a uint64_t one (its
 * bits stored at *pointer), false for anything else;
 * set(t, bits, unsigned, n): t[2i + 1][t[2i + 2]] = push(bits + i, unsigned[i] ~= 0)
 * for i = 0..n-1, then t[2i + 1] and t[2i + 2] cleared (t is used again). */
static const char kHelpers[] = "local ffi = require 'ffi'\n"
                               "local i64, u64 = ffi.typeof('int64_t'), ffi.typeof('uint64_t')\n"
                               "local pi, pu = ffi.typeof('int64_t *'), ffi.typeof('uint64_t *')\n"
                               "local pk = ffi.typeof('const uint8_t *')\n"
                               "local cast, istype = ffi.cast, ffi.istype\n"
                               "return function(p, unsigned)\n"
                               "  if unsigned then return cast(pu, p)[0] end\n"
                               "  return cast(pi, p)[0]\n"
                               "end, function(v, p)\n"
                               "  if istype(i64, v) then cast(pi, p)[0] = v return 1 end\n"
                               "  if istype(u64, v) then cast(pi, p)[0] = v return 2 end\n"
                               "  return false\n"
                               "end, function(t, p, k, n)\n"
                               "  local u, s, ks = cast(pu, p), cast(pi, p), cast(pk, k)\n"
                               "  for i = 0, n - 1 do\n"
                               "    local v\n"
                               "    if ks[i] ~= 0 then v = u[i] else v = s[i] end\n"
                               "    t[2 * i + 1][t[2 * i + 2]] = v\n"
                               "    t[2 * i + 1], t[2 * i + 2] = nil, nil\n"
                               "  end\n"
                               "end\n";

/* Registry keys of the three ffi helpers below. */
static const char kPushKey = 'p', kToKey = 't', kSetKey = 'l';

/* LuaJIT's lua_close runs finalizers in up to ten rounds, and unloads C
 * modules in the first: a finalizer of ours that a finalizer made (the
 * codec's per-cycle sentinel, lpc_wire.c) would then call into unmapped
 * code. So the module stays loaded until the process exits. */
static void keep_loaded(void) {
  Dl_info info;
  if (dladdr(&kPushKey, &info) != 0 && info.dli_fname != NULL)
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

void lpc_open_compat(lua_State *L) {
  keep_loaded();
  if (luaL_loadbuffer(L, kHelpers, sizeof kHelpers - 1, "=protocall.int64") != 0) lua_error(L);
  lua_call(L, 0, 3);
  lua_pushlightuserdata(L, (void *)&kSetKey);
  lua_insert(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  lua_pushlightuserdata(L, (void *)&kToKey);
  lua_insert(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  lua_pushlightuserdata(L, (void *)&kPushKey);
  lua_insert(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
}

/* A pointer as the number the helpers take. */
static void push_address(lua_State *L, const void *p) {
  lua_pushnumber(L, (lua_Number)(uintptr_t)p);
}

void lpc_push_int64(lua_State *L, uint64_t bits, int is_unsigned) {
  lua_pushlightuserdata(L, (void *)&kPushKey);
  lua_rawget(L, LUA_REGISTRYINDEX);
  push_address(L, &bits);
  lua_pushboolean(L, is_unsigned);
  lua_call(L, 2, 1);
}

void lpc_set_int64s(lua_State *L, const uint64_t *bits, const uint8_t *is_unsigned, size_t n) {
  lua_pushlightuserdata(L, (void *)&kSetKey);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_insert(L, -2);
  push_address(L, bits);
  push_address(L, is_unsigned);
  lua_pushnumber(L, (lua_Number)n);
  lua_call(L, 4, 0);
}

/* 2^53: every integer up to it is exact in a double. */
#define LPC_EXACT_MAX 9007199254740992.0

int lpc_to_int64(lua_State *L, int idx, uint64_t *out) {
  int t = lua_type(L, idx);
  if (t == LUA_TNUMBER) {
    lua_Number n = lua_tonumber(L, idx);
    if (!(n >= -LPC_EXACT_MAX && n <= LPC_EXACT_MAX) || n != (lua_Number)(int64_t)n) return -1;
    *out = (uint64_t)(int64_t)n;
    return 1;
  }
  int is_unsigned;
  return lpc_is_int64_cdata(L, idx, out, &is_unsigned);
}

int lpc_is_int64_cdata(lua_State *L, int idx, uint64_t *bits, int *is_unsigned) {
  if (lua_type(L, idx) != 10) return 0; /* LuaJIT's cdata type (LUA_TCDATA in its lj_obj.h) */
  idx = lua_absindex(L, idx);
  lua_pushlightuserdata(L, (void *)&kToKey);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, idx);
  push_address(L, bits);
  lua_call(L, 2, 1);
  lua_Integer kind = lua_tointeger(L, -1);
  lua_pop(L, 1);
  *is_unsigned = kind == 2;
  return kind != 0;
}

#else

void lpc_open_compat(lua_State *L) {
  (void)L;
}

void lpc_push_int64(lua_State *L, uint64_t bits, int is_unsigned) {
  (void)is_unsigned;
  lua_pushinteger(L, (lua_Integer)bits);
}

int lpc_is_int64_cdata(lua_State *L, int idx, uint64_t *bits, int *is_unsigned) {
  (void)L;
  (void)idx;
  (void)bits;
  (void)is_unsigned;
  return 0;
}

int lpc_to_int64(lua_State *L, int idx, uint64_t *out) {
  if (lua_type(L, idx) != LUA_TNUMBER) return 0;
  int exact;
  lua_Integer i = lua_tointegerx(L, idx, &exact); /* floats only when integral */
  if (!exact) return -1;
  *out = (uint64_t)i;
  return 1;
}

#endif
