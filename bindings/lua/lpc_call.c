/* Call policies in the binding: the clock and sleep, the numeric plan
 * (protocall.Policy), one call's state (protocall.CallState), the plan
 * cache (protocall.PlanCache) and the callable's fast path.
 *
 * The retry loop itself is Lua (lua/protocall/call/callable.lua) so that a 'sleep'
 * or a target may yield; these functions do its arithmetic. The fast path
 * (no per-call options) is C: one clock reading, one protected call of the
 * target, nothing allocated; a failure or per-call options continue in Lua
 * through lua_callk, so yields work there too. */
#include "base/clock.h"
#include "lpc.h"
#include "call/policy.h"
#include "call/throttle.h"

#include <errno.h>
#include <lauxlib.h>
#include <math.h>
#include <string.h>

/* The state's time source (protocall_settime): one userdata per state in
 * the registry, upvalue 1 of core.monotonic and core.sleep. */
static char kTimeKey;

lpc_Time *lpc_get_time(lua_State *L) {
  lpc_Time *t;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kTimeKey) == LUA_TUSERDATA) {
    t = lua_touserdata(L, -1);
  } else {
    lua_pop(L, 1);
    t = lua_newuserdatauv(L, sizeof *t, 0);
    memset(t, 0, sizeof *t);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &kTimeKey);
  }
  lua_pop(L, 1); /* the registry keeps it */
  return t;
}

static double now(const lpc_Time *t) {
  return t->clock != NULL ? t->clock(t->ud) : pc_Clock_Monotonic();
}

/* -- seconds = core.monotonic()   -- the host's clock (protocall_settime),
 * else clock_gettime(CLOCK_MONOTONIC) */
static int lpc_monotonic(lua_State *L) {
  lua_pushnumber(L, now(lua_touserdata(L, lua_upvalueindex(1))));
  return 1;
}

/* -- core.sleep(seconds)   -- the host's sleep (protocall_settime; it may
 * yield), else nanosleep; raises when nanosleep fails */
static int lpc_sleep(lua_State *L) {
  const lpc_Time *t = lua_touserdata(L, lua_upvalueindex(1));
  double s = luaL_checknumber(L, 1);
  if (t->sleep != NULL) return t->sleep(L, t->ud, s);
  if (pc_Clock_Sleep(s) != 0) return luaL_error(L, "sleep: %s", strerror(errno));
  return 0;
}

/* -- Policy: the numeric part of a plan -------------------------------------- */

typedef struct {
  int has_retry;
  pc_RetryParams retry;
  pc_TimeoutParams timeout;
} lpc_Policy;

#define POLICY    "protocall.Policy"
#define CALLSTATE "protocall.CallState"
#define PLANCACHE "protocall.PlanCache"
#define THROTTLE  "protocall.ThrottleBucket"

/* 'false' (or nil) reads as INFINITY: no budget. */
static double opt_budget(lua_State *L, int arg) {
  if (lua_isnoneornil(L, arg) || (lua_isboolean(L, arg) && !lua_toboolean(L, arg))) return INFINITY;
  return luaL_checknumber(L, arg);
}

/* -- ok, msg = core.check_retry(initial, maximum, multiplier, timeout|false, max_attempts,
 * --                             min_pushback)
 * -- true, or nil and "maximum: positive number expected" */
static int lpc_check_retry(lua_State *L) {
  pc_RetryParams p;
  pc_Error e;
  p.initial = luaL_checknumber(L, 1);
  p.maximum = luaL_checknumber(L, 2);
  p.multiplier = luaL_checknumber(L, 3);
  p.timeout = opt_budget(L, 4);
  p.max_attempts = (long)luaL_checkinteger(L, 5);
  p.min_pushback = luaL_checknumber(L, 6);
  pc_Error_Init(&e);
  if (!pc_RetryParams_Check(&p, &e)) {
    lua_pushnil(L);
    lua_pushstring(L, e.msg);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* Reads (kind, initial, maximum, multiplier, deadline) from 'arg' on. */
static void read_timeout(lua_State *L, int arg, pc_TimeoutParams *t) {
  t->kind = (pc_TimeoutKind)luaL_checkinteger(L, arg);
  t->initial = luaL_optnumber(L, arg + 1, 0);
  t->maximum = luaL_optnumber(L, arg + 2, 0);
  t->multiplier = luaL_optnumber(L, arg + 3, 0);
  t->deadline = opt_budget(L, arg + 4);
}

/* -- ok, msg = core.check_timeout(kind, initial, maximum, multiplier, deadline|false)
 * -- kind 0 none, 1 a number (initial), 2 exponential */
static int lpc_check_timeout(lua_State *L) {
  pc_TimeoutParams t;
  pc_Error e;
  read_timeout(L, 1, &t);
  pc_Error_Init(&e);
  if (!pc_TimeoutParams_Check(&t, &e)) {
    lua_pushnil(L);
    lua_pushstring(L, e.msg);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* -- policy, first = core.policy(tkind, tinitial, tmaximum, tmultiplier, tdeadline,
 * --                             [initial, maximum, multiplier, timeout, max_attempts,
 * --                              min_pushback])
 * -- Without the retry numbers the policy makes one attempt. 'first' is the
 * -- first attempt's timeout (nil: none). Returns nil, msg for bad numbers. */
static int lpc_policy_new(lua_State *L) {
  lua_settop(L, 11);
  lpc_Policy *p = lua_newuserdatauv(L, sizeof *p, 0);
  pc_Error e;
  memset(p, 0, sizeof *p);
  read_timeout(L, 1, &p->timeout);
  p->has_retry = !lua_isnoneornil(L, 6);
  if (p->has_retry) {
    p->retry.initial = luaL_checknumber(L, 6);
    p->retry.maximum = luaL_checknumber(L, 7);
    p->retry.multiplier = luaL_checknumber(L, 8);
    p->retry.timeout = opt_budget(L, 9);
    p->retry.max_attempts = (long)luaL_checkinteger(L, 10);
    p->retry.min_pushback = luaL_checknumber(L, 11);
  }
  pc_Error_Init(&e);
  if (!pc_TimeoutParams_Check(&p->timeout, &e) ||
      (p->has_retry && !pc_RetryParams_Check(&p->retry, &e))) {
    lua_pushnil(L);
    lua_pushstring(L, e.msg);
    return 2;
  }
  luaL_setmetatable(L, POLICY);
  double first;
  if (pc_TimeoutParams_First(&p->timeout, &first))
    lua_pushnumber(L, first);
  else
    lua_pushnil(L);
  return 2;
}

/* -- state = policy:start(start)   -- a fresh call state; the first attempt counted */
static int lpc_policy_start(lua_State *L) {
  const lpc_Policy *p = luaL_checkudata(L, 1, POLICY);
  double start = luaL_checknumber(L, 2);
  pc_CallState *c = lua_newuserdatauv(L, sizeof *c, 0);
  pc_CallState_Start(c, &p->retry, &p->timeout, start);
  luaL_setmetatable(L, CALLSTATE);
  return 1;
}

/* -- sleep | nil, reason = state:on_error(now, random01, pushback|nil)
 * -- reason: "max_attempts", "deadline", "pushback" or "no_time" (the
 * -- sleep would reach the call's deadline) */
static int lpc_callstate_on_error(lua_State *L) {
  pc_CallState *c = luaL_checkudata(L, 1, CALLSTATE);
  double now = luaL_checknumber(L, 2);
  double r = luaL_checknumber(L, 3);
  double pushback = lua_isnoneornil(L, 4) ? NAN : luaL_checknumber(L, 4);
  double sleep;
  switch (pc_CallState_OnError(c, now, r, pushback, &sleep)) {
  case kPc_Verdict_Retry: lua_pushnumber(L, sleep); return 1;
  case kPc_Verdict_MaxAttempts:
    lua_pushnil(L);
    lua_pushliteral(L, "max_attempts");
    return 2;
  case kPc_Verdict_Deadline:
    lua_pushnil(L);
    lua_pushliteral(L, "deadline");
    return 2;
  case kPc_Verdict_PushbackStop:
    lua_pushnil(L);
    lua_pushliteral(L, "pushback");
    return 2;
  case kPc_Verdict_NoTime:
    lua_pushnil(L);
    lua_pushliteral(L, "no_time");
    return 2;
  }
  return luaL_error(L, "on_error: unknown verdict");
}

/* -- timeout | nil | false = state:next_attempt(now)
 * -- seconds for the attempt, nil for none, false when no time is left */
static int lpc_callstate_next_attempt(lua_State *L) {
  pc_CallState *c = luaL_checkudata(L, 1, CALLSTATE);
  double timeout;
  switch (pc_CallState_NextAttempt(c, luaL_checknumber(L, 2), &timeout)) {
  case kPc_Attempt_Timed: lua_pushnumber(L, timeout); return 1;
  case kPc_Attempt_Untimed: lua_pushnil(L); return 1;
  case kPc_Attempt_NoTime: lua_pushboolean(L, 0); return 1;
  }
  return luaL_error(L, "next_attempt: unknown outcome");
}

/* -- The retry token bucket (core/call/throttle.h) ------------------------------ */

/* -- bucket | nil, msg = core.throttle(max_tokens, token_ratio) */
static int lpc_throttle_new(lua_State *L) {
  double max_tokens = luaL_checknumber(L, 1), ratio = luaL_checknumber(L, 2);
  pc_Throttle *t = lua_newuserdatauv(L, sizeof *t, 0);
  pc_Error e;
  pc_Error_Init(&e);
  if (!pc_Throttle_Init(t, max_tokens, ratio, &e)) {
    lua_pushnil(L);
    lua_pushstring(L, e.msg);
    return 2;
  }
  luaL_setmetatable(L, THROTTLE);
  return 1;
}

/* -- bucket:success()   -- a call succeeded: token_ratio back */
static int lpc_throttle_success(lua_State *L) {
  pc_Throttle_Success(luaL_checkudata(L, 1, THROTTLE));
  return 0;
}

/* -- allowed = bucket:failure()   -- an attempt failed with a retryable code:
 * -- one token taken; whether a retry may follow */
static int lpc_throttle_failure(lua_State *L) {
  lua_pushboolean(L, pc_Throttle_Failure(luaL_checkudata(L, 1, THROTTLE)));
  return 1;
}

/* -- tokens, max_tokens, token_ratio, allowed = bucket:info()   -- in tokens */
static int lpc_throttle_info(lua_State *L) {
  const pc_Throttle *t = luaL_checkudata(L, 1, THROTTLE);
  lua_pushnumber(L, (double)t->milli_tokens / 1000);
  lua_pushnumber(L, (double)t->max_milli_tokens / 1000);
  lua_pushnumber(L, (double)t->milli_ratio / 1000);
  lua_pushboolean(L, pc_Throttle_Allows(t));
  return 4;
}

/* -- The plan cache ------------------------------------------------------------ */

#define LPC_CACHE_MAX 4096

/* -- cache = core.plan_cache(capacity)   -- 0 .. 4096 entries */
static int lpc_plancache_new(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_argcheck(L, n >= 0 && n <= LPC_CACHE_MAX, 1, "cache_size: integer in 0..4096 expected");
  void *mem = lua_newuserdatauv(L, pc_PlanCache_Bytes((size_t)n), 0);
  pc_PlanCache_Init(mem, (size_t)n);
  luaL_setmetatable(L, PLANCACHE);
  return 1;
}

/* Key part of a Lua value: by identity for objects, by value for numbers,
 * booleans apart from numbers (true is not 1). */
static void key_part(lua_State *L, int idx, pc_PlanKey *k, int part) {
  int t = lua_type(L, idx);
  k->tag[part] = (unsigned char)(t + 1);
  k->bits[part] = 0;
  switch (t) {
  case LUA_TNONE:
  case LUA_TNIL: k->tag[part] = 0; break;
  case LUA_TBOOLEAN: k->bits[part] = (uint64_t)lua_toboolean(L, idx); break;
  case LUA_TNUMBER: {
    double d = lua_tonumber(L, idx);
    memcpy(&k->bits[part], &d, sizeof d);
    break;
  }
  default: k->bits[part] = (uint64_t)(uintptr_t)lua_topointer(L, idx); break;
  }
}

static pc_PlanCache *make_key(lua_State *L, pc_PlanKey *k) {
  pc_PlanCache *c = luaL_checkudata(L, 1, PLANCACHE);
  memset(k, 0, sizeof *k);
  for (int i = 0; i < PC_PLANKEY_PARTS; i++) key_part(L, 2 + i, k, i);
  return c;
}

/* -- slot | nil = cache:find(retry, timeout, compression)   -- slot counts from 1 */
static int lpc_plancache_find(lua_State *L) {
  pc_PlanKey k;
  pc_PlanCache *c = make_key(L, &k);
  int slot = pc_PlanCache_Find(c, &k);
  if (slot < 0) return 0;
  lua_pushinteger(L, slot + 1);
  return 1;
}

/* -- slot | nil = cache:insert(retry, timeout, compression)
 * -- the slot whose plan the caller (re)places; nil when capacity is 0 */
static int lpc_plancache_insert(lua_State *L) {
  pc_PlanKey k;
  pc_PlanCache *c = make_key(L, &k);
  int slot = pc_PlanCache_Insert(c, &k);
  if (slot < 0) return 0;
  lua_pushinteger(L, slot + 1);
  return 1;
}

/* -- hits, misses, size, capacity = cache:info() */
static int lpc_plancache_info(lua_State *L) {
  pc_PlanCacheInfo info;
  pc_PlanCache_GetInfo(luaL_checkudata(L, 1, PLANCACHE), &info);
  lua_pushinteger(L, (lua_Integer)info.hits);
  lua_pushinteger(L, (lua_Integer)info.misses);
  lua_pushinteger(L, (lua_Integer)info.size);
  lua_pushinteger(L, (lua_Integer)info.capacity);
  return 4;
}

/* -- The callable's call ------------------------------------------------------------
 * In C: the defaults' plan, and per-call retry/timeout/compression whose plan
 * the cache holds. In Lua: per-call metadata, a cache miss (the plan is built
 * there), misuse (Lua raises), and every failure (the retry loop).
 * Stack while calling: 1 self, 2 request, 3 opts, 4 start, 5 plan (nil: the
 * defaults'), 6 the first attempt's response or error. */

enum {
  UV_FN = 1,      /* the target */
  UV_TIMEOUT,     /* the defaults' first timeout, or nil */
  UV_METADATA,    /* the defaults' read-only metadata view */
  UV_COMPRESSION, /* the default compression, or nil */
  UV_CLOCK,       /* the callable's clock, or (light userdata) the state's lpc_Time */
  UV_NEEDSTART,   /* whether the defaults' plan retries (so needs the start time) */
  UV_ONFAIL,      /* on_fail(request, start, err, plan|nil) -> response: the retry loop */
  UV_ONOPTS,      /* on_opts(request, opts, missed) -> response: the per-call path */
  UV_CACHE,       /* the plan cache (protocall.PlanCache) */
  UV_PLANS,       /* slot -> plan table, for the cache's slots */
  UV_DEFAULT,     /* pc.DEFAULT */
  UV_THROTTLE,    /* the retry token bucket (protocall.ThrottleBucket), or false */
  UV_NAMES,       /* "retry", "timeout", "compression", "metadata": 4 upvalues */
  UV_COUNT = UV_NAMES + 3
};

/* A plan table's array slots, read here and filled by
 * lua/protocall/call/policy.lua, which takes their numbers from
 * core.plan_slots (lpc_open_call): the one place they are named. */
enum { PLAN_FIRST = 1, PLAN_NEEDSTART, PLAN_COMPRESSION };

/* The Lua part's result is the call's result. */
static int finish_k(lua_State *L, int status, lua_KContext ctx) {
  (void)L;
  (void)status;
  (void)ctx;
  return 1;
}

/* After the first attempt: its response, or on to the retry loop. 'ctx'
 * holds the stack indices of the start time and the plan (0: none). */
static int attempt_k(lua_State *L, int status, lua_KContext ctx) {
  if (status == LUA_OK || status == LUA_YIELD) return 1;
  int err = lua_gettop(L), start = (int)(ctx & 0xff), plan = (int)(ctx >> 8);
  lua_pushvalue(L, lua_upvalueindex(UV_ONFAIL));
  lua_pushvalue(L, 2);
  if (start)
    lua_pushvalue(L, start);
  else
    lua_pushnil(L);
  lua_pushvalue(L, err);
  if (plan)
    lua_pushvalue(L, plan);
  else
    lua_pushnil(L);
  lua_callk(L, 4, 1, 0, finish_k);
  return 1;
}

/* attempt_k of a callable with a retry token bucket: a success gives the
 * bucket its token_ratio. */
static int attempt_throttled_k(lua_State *L, int status, lua_KContext ctx) {
  if (status == LUA_OK || status == LUA_YIELD) {
    pc_Throttle_Success(lua_touserdata(L, lua_upvalueindex(UV_THROTTLE)));
    return 1;
  }
  return attempt_k(L, status, ctx);
}

/* Hands the call to on_opts(request, opts, missed). */
static int to_lua(lua_State *L, int missed) {
  lua_settop(L, 3);
  lua_pushvalue(L, lua_upvalueindex(UV_ONOPTS));
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_pushboolean(L, missed);
  lua_callk(L, 3, 1, 0, finish_k);
  return 1;
}

/* Key part of option 'idx': nil and pc.DEFAULT both mean the default (tag
 * 0). Returns whether the option was given (non-nil). */
static int option_part(lua_State *L, int idx, const void *deflt, pc_PlanKey *k, int part) {
  int t = lua_type(L, idx);
  if (t == LUA_TNIL) return 0;
  if (t == LUA_TTABLE && lua_topointer(L, idx) == deflt) return 1;
  key_part(L, idx, k, part);
  return 1;
}

/* Resolves opts (at 3, the top) to a plan: returns 1 with '*plan' its
 * stack index (0: the defaults'), 0 when the Lua path must take the call,
 * -1 for a cache miss. Pushes the four option values (4..7). */
static int plan_from_opts(lua_State *L, int *plan) {
  if (lua_type(L, 3) != LUA_TTABLE) return 0;
  for (int i = 0; i < 4; i++) { /* 4..7 */
    lua_pushvalue(L, lua_upvalueindex(UV_NAMES + i));
    lua_rawget(L, 3);
  }
  if (lua_type(L, 7) != LUA_TNIL) return 0;
  pc_PlanKey k;
  memset(&k, 0, sizeof k);
  const void *deflt = lua_topointer(L, lua_upvalueindex(UV_DEFAULT));
  int given = 0;
  for (int i = 0; i < PC_PLANKEY_PARTS; i++) given += option_part(L, 4 + i, deflt, &k, i);
  lua_pushnil(L); /* any other key is a mistake the Lua path reports */
  for (int keys = 0; lua_next(L, 3); keys++) {
    if (keys == given) return 0;
    lua_pop(L, 1);
  }
  *plan = 0;
  if (k.tag[0] == 0 && k.tag[1] == 0 && k.tag[2] == 0) return 1;
  int slot = pc_PlanCache_Find(lua_touserdata(L, lua_upvalueindex(UV_CACHE)), &k);
  if (slot < 0) return -1;
  lua_rawgeti(L, lua_upvalueindex(UV_PLANS), slot + 1);
  *plan = lua_gettop(L);
  return 1;
}

/* The call, continuing with 'k' (attempt_k or attempt_throttled_k). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int
callable_call(lua_State *L, lua_KFunction k) {
  int plan = 0, start = 0, needs_start, top = lua_gettop(L);
  if (top >= 3 && lua_type(L, 3) > LUA_TNIL) {
    lua_settop(L, 3);
    int r = plan_from_opts(L, &plan);
    if (r <= 0) return to_lua(L, r < 0);
  } else if (top < 2) {
    lua_settop(L, 2); /* the request at 2, even when none was passed */
  }
  if (plan) {
    lua_rawgeti(L, plan, PLAN_NEEDSTART);
    needs_start = lua_toboolean(L, -1);
  } else {
    needs_start = lua_toboolean(L, lua_upvalueindex(UV_NEEDSTART));
  }
  if (needs_start) {
    if (lua_type(L, lua_upvalueindex(UV_CLOCK)) == LUA_TLIGHTUSERDATA) {
      lua_pushnumber(L, now(lua_touserdata(L, lua_upvalueindex(UV_CLOCK))));
    } else {
      lua_pushvalue(L, lua_upvalueindex(UV_CLOCK));
      lua_call(L, 0, 1);
      if (lua_type(L, -1) != LUA_TNUMBER)
        return luaL_error(L, "clock: number expected, got %s", luaL_typename(L, -1));
      if (!isfinite(lua_tonumber(L, -1))) /* "nan", not the C library's "-nan" */
        return luaL_error(L, "clock: finite number expected, got %s",
                          isnan(lua_tonumber(L, -1)) ? "nan" : lua_tostring(L, -1));
    }
    start = lua_gettop(L);
  }
  lua_pushvalue(L, lua_upvalueindex(UV_FN));
  lua_pushvalue(L, 2);
  if (plan) {
    lua_rawgeti(L, plan, PLAN_FIRST);
    lua_pushvalue(L, lua_upvalueindex(UV_METADATA));
    lua_rawgeti(L, plan, PLAN_COMPRESSION);
  } else {
    lua_pushvalue(L, lua_upvalueindex(UV_TIMEOUT));
    lua_pushvalue(L, lua_upvalueindex(UV_METADATA));
    lua_pushvalue(L, lua_upvalueindex(UV_COMPRESSION));
  }
  lua_KContext ctx = (lua_KContext)start | (lua_KContext)plan << 8;
  return k(L, lua_pcallk(L, 4, 1, 0, ctx, k), ctx);
}

/* -- response = callable(request [, opts])   -- the __call of a callable */
static int lpc_callable_call(lua_State *L) {
  return callable_call(L, attempt_k);
}

/* -- the same for a callable with a retry token bucket */
static int lpc_callable_call_throttled(lua_State *L) {
  return callable_call(L, attempt_throttled_k);
}

/* -- call = core.callable(fn, timeout, metadata, compression, clock|false, needs_start,
 * --                      on_fail, on_opts, cache, plans, DEFAULT, bucket|false)
 * -- the __call function of one callable (see the UV_ list) */
static int lpc_callable_new(lua_State *L) {
  luaL_checktype(L, 7, LUA_TFUNCTION);
  luaL_checktype(L, 8, LUA_TFUNCTION);
  luaL_checkudata(L, 9, PLANCACHE);
  luaL_checktype(L, 10, LUA_TTABLE);
  int throttled = lua_toboolean(L, 12);
  if (throttled) luaL_checkudata(L, 12, THROTTLE);
  if (!lua_toboolean(L, 5)) { /* the state's time, found once (the registry keeps it) */
    lua_pushlightuserdata(L, lpc_get_time(L));
    lua_replace(L, 5);
  }
  lua_settop(L, UV_NAMES - 1);
  lua_pushliteral(L, "retry");
  lua_pushliteral(L, "timeout");
  lua_pushliteral(L, "compression");
  lua_pushliteral(L, "metadata");
  lua_pushcclosure(L, throttled ? lpc_callable_call_throttled : lpc_callable_call, UV_COUNT);
  return 1;
}

void lpc_open_call(lua_State *L) {
  static const luaL_Reg funcs[] = {{"check_retry", lpc_check_retry},
                                   {"check_timeout", lpc_check_timeout},
                                   {"policy", lpc_policy_new},
                                   {"plan_cache", lpc_plancache_new},
                                   {"callable", lpc_callable_new},
                                   {"throttle", lpc_throttle_new},
                                   {NULL, NULL}};
  static const luaL_Reg policy_methods[] = {{"start", lpc_policy_start}, {NULL, NULL}};
  static const luaL_Reg state_methods[] = {{"on_error", lpc_callstate_on_error},
                                           {"next_attempt", lpc_callstate_next_attempt},
                                           {NULL, NULL}};
  static const luaL_Reg cache_methods[] = {{"find", lpc_plancache_find},
                                           {"insert", lpc_plancache_insert},
                                           {"info", lpc_plancache_info},
                                           {NULL, NULL}};
  static const luaL_Reg throttle_methods[] = {{"success", lpc_throttle_success},
                                              {"failure", lpc_throttle_failure},
                                              {"info", lpc_throttle_info},
                                              {NULL, NULL}};
  const char *names[] = {POLICY, CALLSTATE, PLANCACHE, THROTTLE};
  const luaL_Reg *methods[] = {policy_methods, state_methods, cache_methods, throttle_methods};
  for (int i = 0; i < 4; i++) {
    luaL_newmetatable(L, names[i]);
    lua_newtable(L);
    luaL_setfuncs(L, methods[i], 0);
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
  }
  luaL_setfuncs(L, funcs, 0);
  lua_pushinteger(L, PC_RETRY_DEFAULT_MAX_ATTEMPTS);
  lua_setfield(L, -2, "DEFAULT_MAX_ATTEMPTS");
  lua_createtable(L, 0, 3); /* core.plan_slots: {first =, needs_start =, compression =} */
  lua_pushinteger(L, PLAN_FIRST);
  lua_setfield(L, -2, "first");
  lua_pushinteger(L, PLAN_NEEDSTART);
  lua_setfield(L, -2, "needs_start");
  lua_pushinteger(L, PLAN_COMPRESSION);
  lua_setfield(L, -2, "compression");
  lua_setfield(L, -2, "plan_slots");
  lpc_get_time(L);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kTimeKey);
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, lpc_monotonic, 1);
  lua_setfield(L, -3, "monotonic");
  lua_pushcclosure(L, lpc_sleep, 1);
  lua_setfield(L, -2, "sleep");
}
