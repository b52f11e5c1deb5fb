/* The message binding's ownership layer: the "protocall.Arena" userdata
 * (arenas paced against Lua's collector), anchors (the object owning a
 * message's memory) and their refs tables, the message test behind
 * lpc_to_message, and the error helpers the message files share. The object
 * model is described in lpc_message.h. */
#include "base/error.h"
#include "lpc_message.h"

#include <lauxlib.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

char lpc_refs_key; /* registry: ephemeron table anchor -> refs table */
char lpc_def_key;  /* metatable field: lightuserdata def | kind (lpc_message.h) */
char lpc_arena_mt_key;

_Static_assert(_Alignof(pc_MessageDef) >= 4, "the kind is kept in a def's two low bits");

/* Registry: how many core.protect calls are running (a light integer). */
static char kProtectKey;

static lua_Integer protect_depth(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kProtectKey);
  lua_Integer n = lua_tointeger(L, -1);
  lua_pop(L, 1);
  return n;
}

static void set_protect_depth(lua_State *L, lua_Integer n) {
  lua_pushinteger(L, n);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kProtectKey);
}

/* -- ok, ... = core.protect(f, ...)
 * pcall for the Lua layer's own calls of the module's functions: the
 * errors lpc_msg_error raises inside name no source position, since the
 * nearest Lua caller is a file of lua/protocall, not the user's code (which
 * the layer's own error names). f must not yield. */
int lpc_protect(lua_State *L) {
  luaL_checkany(L, 1);
  lua_Integer depth = protect_depth(L);
  set_protect_depth(L, depth + 1);
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  set_protect_depth(L, depth);
  lua_pushboolean(L, status == LUA_OK);
  lua_insert(L, 1);
  return lua_gettop(L);
}

/* Raises "file:line: <message>" naming the nearest Lua caller, also when a
 * C function such as table.insert stands between it and the metamethod;
 * inside core.protect, "<message>" alone. */
_Noreturn void lpc_msg_error(lua_State *L, const char *fmt, ...) {
  lua_Debug ar;
  int level = 1, found = 0;
  if (protect_depth(L) > 0) {
    lua_pushliteral(L, "");
    found = 1;
  }
  while (!found && lua_getstack(L, level++, &ar)) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline > 0) {
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      found = 1;
    }
  }
  if (!found) lua_pushliteral(L, "");
  va_list argp;
  va_start(argp, fmt);
  lua_pushvfstring(L, fmt, argp);
  va_end(argp);
  lua_concat(L, 2);
  lua_error(L);
#if defined(__GNUC__)
  __builtin_unreachable();
#endif
}

int lpc_has_nul(lua_State *L, int idx) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  return s != NULL && memchr(s, 0, len) != NULL;
}

const char *lpc_push_shown(lua_State *L, int idx) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  char shown[68]; /* cut once it takes 64 bytes, as pc_Map_ShowKey cuts */
  lua_pushstring(L, pc_Error_Quote(shown, sizeof shown, s, len, kPc_Quote_Lua));
  return lua_tostring(L, -1);
}

/* -- Arenas and anchors ---------------------------------------------------- */

/* -- Deferred arena frees ---------------------------------------------------
 * Lua lets a finalizer use what its object reaches ("resurrected" objects),
 * but runs the finalizers of one cycle newest first, and a finalizer may
 * store what it reaches where live code reaches it for good: an Arena's
 * __gc freeing its arena would leave the views of it read then, or kept,
 * reading freed memory. So the Arena's __gc only moves its arena to the
 * Reaper's list, in a group of up to GROUP arenas, and sets its box's user
 * value 2 to the group's token (an empty table): the token lives while any
 * box of its group does. A weak-keyed table (TOKENS_UV) maps each token to
 * its group's number; a token leaves it only once the collector frees it,
 * a finalizer still to run reaching it included (Lua 5.4 manual, 2.5.4:
 * resurrected objects leave weak keys once freed; LuaJIT, lj_gc.c: weak
 * tables are cleared after the userdata to finalize are marked), so
 * nothing can read an arena of a group whose token is gone. A sweep, from
 * the __gc of a Sweep userdata made anew for every cycle while arenas wait
 * (a new object: LuaJIT finalizes an object once), frees those. The group
 * being filled is GROUP_UV's [1], a weak value; a new group starts at
 * GROUP boxes and at each cycle's first (push_group). (Weak values would
 * not do: Lua 5.4 clears a resurrected object from them before finalizers
 * run, LuaJIT a finalized userdata at every cycle, alive or not.)
 * Cost: a list entry and a user value set per Arena, a table and a key per
 * group. A box a finalizer keeps for good keeps the arenas of its group
 * (at most GROUP) until it dies; its __gc does not run again, its token
 * goes with it. Under Lua 5.4's generational mode a box that outlived a
 * minor collection is freed at a major one only, and its group with it.
 *
 * At lua_close every finalizer runs in one pass, newest object first, and
 * none made during it runs: the Reaper (made when the module was first
 * opened, so after every Arena in that order) frees what still waits, and an
 * Arena finalized after it frees its arena at once. An Arena a finalizer
 * makes there never has its __gc run (Lua 5.4.4's lgc.c: no finalizer is
 * set while the state closes), so every Arena made in a finalizer (where
 * Lua 5.4.4+'s lua_gc answers -1) is in the Reaper's 'made' list until its
 * __gc runs; the Reaper frees the arenas of those still there. (LuaJIT's
 * lua_close runs the finalizers of objects made meanwhile too: no list.)
 *
 * Pools wait the same way (pool_gc, the Pool box's user value 1 its
 * group's token): a view reaches its Type, the Type its Pool, so a finalizer
 * reading a view keeps the pool's defs and its Lookups' names until the
 * collector frees the box; an older object's finalizer run after the
 * Pool's __gc in the cycle both die in reads live defs.
 *
 * Known limits (doc/guide.md, "Lifetimes"): the finalizer of an object made
 * before the module was opened must not read views at lua_close, and the
 * memory of a message it makes there is not given back; a pool made in a
 * finalizer during Lua 5.4's lua_close is not given back (no __gc of it
 * runs: no 'made' list for pools). */

/* An arena or a pool waiting for a sweep (the other NULL). */
typedef struct {
  pc_Arena *arena;
  pc_Pool *pool;
  size_t group; /* its group's number */
} Grave;

static void free_grave(const Grave *g) {
  pc_Arena_Free(g->arena);
  pc_Pool_Free(g->pool);
}

/* Arenas per group: a group kept by a box that a finalizer kept for good
 * keeps that many arenas at most. */
#define GROUP 64

/* One per state (the upvalue 1 of the Arena's and the Sweep's __gc): the
 * waiting arenas, oldest group first. */
typedef struct {
  Grave *list; /* allocated with the state's allocator */
  size_t n, cap;
  size_t group;        /* the number of the last group started */
  size_t group_n;      /* its arenas */
  lpc_ArenaBox **made; /* Arenas made in a finalizer, their __gc not run (lpc_ArenaBox.made) */
  size_t made_n, made_cap;
  lua_Alloc f;
  void *ud;
  int armed;  /* a Sweep userdata waits for the collector */
  int closed; /* its __gc ran (lua_close): arenas are freed at once */
} Reaper;

/* The upvalues of the Arena's and the Sweep's __gc. */
#define REAPER_UV       lua_upvalueindex(1)
#define SWEEP_UV        lua_upvalueindex(2) /* the Sweep metatable */
/* The Arena's: [1] the token of the group being filled, [2] the probe (a
 * table held there alone, gone at each cycle), weak values. */
#define GROUP_UV        lua_upvalueindex(3)
/* The Arena's: token -> group number, weak keys (the Sweep's upvalue 3). */
#define TOKENS_UV       lua_upvalueindex(4)
/* The Arena's: new_group, called in protected mode (made once: LuaJIT's
 * lua_pushcfunction allocates a closure). */
#define NEW_GROUP_UV    lua_upvalueindex(5)
#define SWEEP_TOKENS_UV lua_upvalueindex(3)

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Frees the arenas of the groups whose tokens the collector took (all kept
 * when the scratch list of live groups cannot be allocated). */
static void sweep(lua_State *L, Reaper *r) {
  size_t cap = 16, nlive = 0, i, j = 0, k = 0;
  size_t *live = r->f(r->ud, NULL, 0, cap * sizeof(size_t));
  if (live == NULL) return;
  lua_pushnil(L);
  while (lua_next(L, SWEEP_TOKENS_UV)) { /* token, group number */
    if (nlive == cap) {
      size_t *more = r->f(r->ud, live, cap * sizeof(size_t), 2 * cap * sizeof(size_t));
      if (more == NULL) {
        r->f(r->ud, live, cap * sizeof(size_t), 0);
        lua_pop(L, 2);
        return;
      }
      live = more;
      cap *= 2;
    }
    live[nlive++] = (size_t)lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  qsort(live, nlive, sizeof(size_t), cmp_size);
  for (i = 0; i < r->n; i++) { /* both in group order */
    while (k < nlive && live[k] < r->list[i].group) k++;
    if (k < nlive && live[k] == r->list[i].group)
      r->list[j++] = r->list[i];
    else
      free_grave(&r->list[i]);
  }
  r->f(r->ud, live, cap * sizeof(size_t), 0);
  r->n = j;
  if (j == 0 || j < r->cap / 4) { /* give back what a burst took */
    size_t c = j == 0 ? 0 : r->cap / 2;
    Grave *list = r->f(r->ud, r->list, r->cap * sizeof(Grave), c * sizeof(Grave));
    if (list != NULL || c == 0) {
      r->list = list;
      r->cap = c;
    }
  }
}

/* Makes a Sweep userdata for the next cycle (raises on allocation failure,
 * leaving the Reaper unarmed: the next Arena __gc tries again). */
static void arm(lua_State *L, Reaper *r) {
  lua_newuserdatauv(L, 1, 0);
  lua_pushvalue(L, SWEEP_UV);
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
  r->armed = 1;
}

/* The Sweep's __gc. debug.getupvalue (of the Arena's __gc) reaches its
 * metatable: a foreign self raises, as every protocall metamethod's does. */
static int sweep_gc(lua_State *L) {
  Reaper *r = lua_touserdata(L, REAPER_UV);
  if (lua_type(L, 1) != LUA_TUSERDATA || !lua_getmetatable(L, 1) || !lua_rawequal(L, -1, SWEEP_UV))
    return luaL_typeerror(L, 1, "protocall Sweep");
  lua_settop(L, 1);
  r->armed = 0;
  if (r->closed) return 0;
  sweep(L, r);
  if (r->n > 0) arm(L, r);
  return 0;
}

/* The Reaper's __gc: at lua_close, frees what waits. Its upvalue is the
 * Reaper: debug.getmetatable of the Arena's __gc's upvalue 1 reaches this
 * function, and a foreign self raises. */
static int reaper_gc(lua_State *L) {
  Reaper *r = lua_touserdata(L, 1);
  if (r == NULL || lua_type(L, 1) != LUA_TUSERDATA || r != lua_touserdata(L, lua_upvalueindex(1)))
    return luaL_typeerror(L, 1, "protocall Reaper");
  for (size_t i = 0; i < r->n; i++) free_grave(&r->list[i]);
  r->f(r->ud, r->list, r->cap * sizeof(Grave), 0);
  r->list = NULL;
  r->n = r->cap = 0;
  for (size_t i = 0; i < r->made_n; i++) { /* made during lua_close: no __gc of theirs runs */
    pc_Arena_Free(r->made[i]->arena);
    r->made[i]->arena = NULL;
    r->made[i]->made = 0;
  }
  r->f(r->ud, r->made, r->made_cap * sizeof(lpc_ArenaBox *), 0);
  r->made = NULL;
  r->made_n = r->made_cap = 0;
  r->closed = 1;
  return 0;
}

/* Takes 'h' off the Reaper's 'made' list (its __gc runs). */
static void unlist_made(Reaper *r, lpc_ArenaBox *h) {
  lpc_ArenaBox *last = r->made[--r->made_n];
  r->made[h->made - 1] = last;
  last->made = h->made;
  h->made = 0;
}

/* -- token = new_group(): starts a group, its token known to the tokens
 * table (upvalue 3, TOKENS_UV's) before it is the one being filled in the
 * group table (upvalue 2, GROUP_UV's), so a token there always keeps its
 * arenas. Upvalue 1 is the Reaper. (debug.getupvalue reaches it: a call
 * from Lua only starts a group early.) */
static int new_group(lua_State *L) {
  Reaper *r = lua_touserdata(L, lua_upvalueindex(1));
  lua_createtable(L, 0, 0); /* the probe */
  lua_rawseti(L, lua_upvalueindex(2), 2);
  lua_createtable(L, 0, 0); /* the token */
  lua_pushvalue(L, -1);
  lua_pushinteger(L, (lua_Integer)r->group + 1);
  lua_rawset(L, lua_upvalueindex(3));
  lua_pushvalue(L, -1);
  lua_rawseti(L, lua_upvalueindex(2), 1);
  r->group++;
  r->group_n = 0;
  return 1;
}

/* Pushes the token of the group being filled, starting one when needed:
 * at GROUP arenas, and at the first box of each cycle (the probe, a table
 * held by a weak value alone, gone), so that a token the generational
 * collector made old (the box holding it was: Lua 5.4's barrier) keeps the
 * arenas of one cycle only until the next major collection. 0 (nothing
 * pushed) when memory for a new group runs out: a finalizer must not
 * raise, or what its box owns leaks. */
static int push_group(lua_State *L, Reaper *r) {
  int fresh = r->group_n >= GROUP;
  if (!fresh) {
    fresh = lua_rawgeti(L, GROUP_UV, 2) == LUA_TNIL;
    lua_pop(L, 1);
  }
  if (!fresh) {
    if (lua_rawgeti(L, GROUP_UV, 1) != LUA_TNIL) return 1;
    lua_pop(L, 1);
  }
  lua_pushvalue(L, NEW_GROUP_UV);
  if (lua_pcall(L, 0, 1, 0) == LUA_OK) return 1;
  lua_pop(L, 1);
  return 0;
}

/* Moves 'g' (its group set here) to the Reaper's list, the box at 1
 * taking its group's token as user value 'uv'; 0 when it cannot wait (the
 * state is closing, or the list or a new group cannot grow): the caller
 * frees it at once. The caller arms the Reaper once it has marked its box. */
static int bury(lua_State *L, Reaper *r, Grave g, int uv) {
  if (r->closed) return 0;
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 64;
    Grave *list = r->f(r->ud, r->list, r->cap * sizeof(Grave), cap * sizeof(Grave));
    if (list == NULL) return 0;
    r->list = list;
    r->cap = cap;
  }
  if (!push_group(L, r)) return 0;
  lua_setiuservalue(L, 1, uv);
  g.group = r->group;
  r->list[r->n++] = g;
  r->group_n++;
  return 1;
}

/* The Arena's __gc: its arena waits for a sweep (freed at once when the
 * state is closing or the Reaper's list cannot grow). */
static int arena_gc(lua_State *L) {
  lpc_ArenaBox *h = luaL_checkudata(L, 1, LPC_ARENA_MT); /* debug.getregistry() reaches it */
  Reaper *r = lua_touserdata(L, REAPER_UV);
  if (h->made) unlist_made(r, h);
  if (h->arena == NULL || h->queued) return 0;
  if (bury(L, r, (Grave){h->arena, NULL, 0}, 2)) {
    h->queued = 1; /* the arena is the Reaper's now, still in use until its group's token goes */
    if (!r->armed) arm(L, r);
    return 0;
  }
  pc_Arena_Free(h->arena);
  h->arena = NULL;
  return 0;
}

/* The Pool's __gc (the Arena's upvalues): an owned pool waits for a sweep
 * as an arena does, its types read by views that finalizers reach; the box
 * keeps it, marked finalized (lpc_check_pool refuses it; a Type made
 * meanwhile still finds the box: lpc_push_pool, lpc_schema.c). */
static int pool_gc(lua_State *L) {
  lpc_PoolBox *b = luaL_checkudata(L, 1, LPC_POOL_MT);
  Reaper *r = lua_touserdata(L, REAPER_UV);
  if (b->pool == NULL || !b->owned) return 0; /* a host's pool: still the host's, still usable */
  b->finalized = 1;
  if (bury(L, r, (Grave){NULL, b->pool, 0}, 1)) {
    if (!r->armed) arm(L, r);
    return 0;
  }
  pc_Pool_Free(b->pool);
  b->pool = NULL;
  return 0;
}

void lpc_push_pool_gc(lua_State *L, int arena_gc_idx) {
  arena_gc_idx = lua_absindex(L, arena_gc_idx);
  for (int i = 1; i <= 5; i++) lua_getupvalue(L, arena_gc_idx, i);
  lua_pushcclosure(L, pool_gc, 5);
}

/* Pushes a table with weak keys or values ('mode'). */
static void push_weak(lua_State *L, int narr, const char *mode) {
  lua_createtable(L, narr, 0);
  lua_createtable(L, 0, 1);
  lua_pushstring(L, mode);
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
}

void lpc_push_arena_gc(lua_State *L) {
  Reaper *r = lua_newuserdatauv(L, sizeof(Reaper), 0);
  memset(r, 0, sizeof *r);
  r->f = lua_getallocf(L, &r->ud);
  int ri = lua_gettop(L);
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, ri);
  lua_pushcclosure(L, reaper_gc, 1);
  lua_setfield(L, -2, "__gc");
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, ri);
  push_weak(L, 2, "v");     /* ri + 1: [1] the token of the group being filled, [2] the probe */
  push_weak(L, 0, "k");     /* ri + 2: token -> group number */
  lua_createtable(L, 0, 2); /* ri + 3: the Sweep metatable */
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pushvalue(L, ri);
  lua_pushvalue(L, ri + 3);
  lua_pushvalue(L, ri + 2);
  lua_pushcclosure(L, sweep_gc, 3);
  lua_setfield(L, -2, "__gc");
  lua_pushvalue(L, ri);
  lua_pushvalue(L, ri + 3);
  lua_pushvalue(L, ri + 1);
  lua_pushvalue(L, ri + 2);
  lua_pushvalue(L, ri);
  lua_pushvalue(L, ri + 1);
  lua_pushvalue(L, ri + 2);
  lua_pushcclosure(L, new_group, 3);
  lua_pushcclosure(L, arena_gc, 5);
  lua_replace(L, ri);
  lua_settop(L, ri);
}

void lpc_free_arena(lua_State *L, int idx) {
  lpc_ArenaBox *h = luaL_checkudata(L, idx, LPC_ARENA_MT);
  pc_Arena_Free(h->arena);
  h->arena = NULL;
}

/* The Reaper, for an Arena made in a finalizer (lua_gc answers -1 there
 * from Lua 5.4.4 on) before the Reaper's own __gc ran, with room in its
 * 'made' list for one more; NULL elsewhere. Raises when the list cannot
 * grow. */
static Reaper *made_in_finalizer(lua_State *L, int box) {
#if LPC_LUAJIT
  (void)L;
  (void)box;
  return NULL;
#else
  if (lua_gc(L, LUA_GCISRUNNING) != -1) return NULL;
  lua_getmetatable(L, box);
  lua_getfield(L, -1, "__gc"); /* arena_gc */
  lua_getupvalue(L, -1, 1);
  Reaper *r = lua_touserdata(L, -1);
  lua_pop(L, 3);
  if (r->closed) return NULL; /* nothing frees its list any more */
  if (r->made_n == r->made_cap) {
    size_t cap = r->made_cap ? 2 * r->made_cap : 8;
    lpc_ArenaBox **made =
        r->f(r->ud, r->made, r->made_cap * sizeof(lpc_ArenaBox *), cap * sizeof(lpc_ArenaBox *));
    if (made == NULL) lpc_msg_error(L, "not enough memory");
    r->made = made;
    r->made_cap = cap;
  }
  return r;
#endif
}

pc_Arena *lpc_new_arena(lua_State *L) {
  return lpc_new_arena_sized(L, 0);
}

pc_Arena *lpc_new_arena_sized(lua_State *L, size_t first) {
  lpc_ArenaBox *h =
      lua_newuserdatauv(L, sizeof(lpc_ArenaBox), 2); /* 1: refs, 2: its group's token (__gc) */
  h->arena = NULL;
  h->reported = 0;
  h->queued = 0;
  h->made = 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_arena_mt_key); /* LPC_ARENA_MT's, not by name */
  lua_setmetatable(L, -2);
  Reaper *r = made_in_finalizer(L, lua_gettop(L));
  void *ud;
  lua_Alloc f = lua_getallocf(L, &ud);
  h->arena = pc_Arena_NewSized(f, ud, first);
  if (h->arena == NULL) lpc_msg_error(L, "not enough memory");
  if (r != NULL) {
    r->made[r->made_n++] = h;
    h->made = r->made_n;
  }
  h->reported = pc_Arena_SpaceAllocated(h->arena);
  return h->arena;
}

void lpc_pace(lua_State *L, lpc_ArenaBox *h) {
  size_t now = pc_Arena_SpaceAllocated(h->arena);
  if (now - h->reported >= 4096) {
    lua_gc(L, LUA_GCSTEP, (int)((now - h->reported) / 1024));
    h->reported = now;
  }
}

void lpc_pace_arena(lua_State *L, int idx) {
  lpc_pace(L, luaL_checkudata(L, idx, LPC_ARENA_MT));
}

/* The lpc_def_key field of the metatable of the value at 'idx': the
 * type's def plus the kind as a pointer (make_mt, lpc_message_ops.c), or
 * NULL when it has none (not a message). */
static const char *def_and_kind(lua_State *L, int idx) {
  if (!lua_getmetatable(L, idx)) return NULL;
  lua_rawgetp(L, -1, &lpc_def_key);
  const char *tagged = lua_touserdata(L, -1);
  lua_pop(L, 2);
  return tagged;
}

/* The kind in a def_and_kind pointer. */
static int kind_of(const char *tagged) {
  return (int)((uintptr_t)tagged & 3);
}

pc_Message *lpc_to_message(lua_State *L, int idx, const pc_MessageDef **def) {
  if (lua_type(L, idx) != LUA_TUSERDATA) return NULL;
  const char *tagged = def_and_kind(L, idx);
  if (tagged == NULL) return NULL;
  int kind = kind_of(tagged);
  if (def != NULL) *def = (const pc_MessageDef *)(const void *)(tagged - kind);
  void *p = lua_touserdata(L, idx);
  return kind == kLpc_Standalone ? p : *(pc_Message **)p;
}

pc_Message *lpc_check_message(lua_State *L, int idx, const char *fname, const pc_MessageDef **def) {
  pc_Message *m = lpc_to_message(L, idx, def);
  if (m == NULL) lpc_arg_type_error(L, idx, fname, "message");
  return m;
}

/* Pushes the anchor of the message at 'idx', of kind 'kind' (its own
 * __index knows it; 0: read from its metatable); returns its absolute
 * index. */
int lpc_push_anchor_of(lua_State *L, int idx, int kind) {
  idx = lua_absindex(L, idx);
  if (kind == 0) kind = kind_of(def_and_kind(L, idx));
  if (kind == kLpc_Standalone)
    lua_pushvalue(L, idx);
  else if (kind == kLpc_View)
    lpc_push_view_anchor(L, idx);
  else
    lua_getiuservalue(L, idx, 1);
  return lua_gettop(L);
}

_Noreturn void lpc_replaced_error(lua_State *L) {
  lpc_msg_error(L, "a message object's user values were replaced through the debug library");
}

/* Whether the value at 'a' is an anchor: an Arena or a standalone message. */
static int is_anchor(lua_State *L, int a) {
  if (lua_type(L, a) != LUA_TUSERDATA || !lua_getmetatable(L, a)) return 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_arena_mt_key);
  int arena = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return arena || lpc_to_message(L, a, NULL) == lua_touserdata(L, a);
}

/* Pushes the anchor of the view at 'idx' (its user value 1), raising
 * (lpc_replaced_error) unless it is an Arena or a standalone message:
 * what a write or a new object's refs use must be one. */
void lpc_push_view_anchor(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA) lpc_replaced_error(L);
  lpc_push_known_uv(L, idx, 1);
  if (!is_anchor(L, -1)) lpc_replaced_error(L);
}

/* Pushes the anchor of the message at 'idx'; returns its absolute index. */
int lpc_push_anchor(lua_State *L, int idx) {
  return lpc_push_anchor_of(L, idx, 0);
}

/* Pushes the refs table of the anchor at 'a' (created when 'create'), or
 * nil. Anchors with a user value (Arenas, standalone messages of types
 * that hold references) keep it there (a flat decode leaves its input
 * string there instead, moved into the table when one is made); the others (numbers-only types) in
 * the registry's ephemeron table. A chain of anchors each holding the next
 * through user values costs the collector one traversal; through the
 * ephemeron table, one pass of Lua's ephemeron convergence per link (a
 * chain built top-down was quadratic). */
void lpc_push_refs(lua_State *L, int a, int create) {
  a = lua_absindex(L, a);
  int t = lua_getiuservalue(L, a, 1);
  if (t != LUA_TNONE) {
    if (t == LUA_TSTRING) { /* a flat decode's input (lpc_wire.c): no refs until one is kept */
      if (!create) {
        lua_pop(L, 1);
        lua_pushnil(L);
        return;
      }
      lua_createtable(L, 0, 2); /* the input moves into the new table, under the block's address */
      lua_insert(L, -2);
      lua_rawsetp(L, -2, lua_touserdata(L, a));
      lua_pushvalue(L, -1);
      lua_setiuservalue(L, a, 1);
    } else if (t == LUA_TNIL && create) {
      lua_pop(L, 1);
      lua_createtable(L, 0, 2);
      lua_pushvalue(L, -1);
      lua_setiuservalue(L, a, 1);
    }
    return;
  }
  lua_pop(L, 1);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_refs_key);
  lua_pushvalue(L, a);
  if (lua_rawget(L, -2) == LUA_TNIL && create) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 2);
    lua_pushvalue(L, a);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
  }
  lua_remove(L, -2);
}

/* The arena holder of the anchor at 'a' (made for a standalone message on
 * first need). */
lpc_ArenaBox *lpc_anchor_arena(lua_State *L, int a) {
  lpc_ArenaBox *h = luaL_testudata(L, a, LPC_ARENA_MT);
  if (h != NULL) return h;
  lpc_push_refs(L, a, 1);
  if (lua_rawgeti(L, -1, 1) == LUA_TNIL) {
    lua_pop(L, 1);
    lpc_new_arena(L);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, 1);
  }
  h = lua_touserdata(L, -1);
  lua_pop(L, 2);
  return h;
}

/* refs[key] = value at 'v' (nil allowed) in the refs of the anchor at 'a'. */
void lpc_set_ref(lua_State *L, int a, const void *key, int v) {
  v = lua_absindex(L, v);
  lpc_push_refs(L, a, !lua_isnil(L, v));
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_pushvalue(L, v);
  lua_rawsetp(L, -2, key);
  lua_pop(L, 1);
}

_Noreturn void lpc_nomem(lua_State *L) {
  lpc_msg_error(L, "not enough memory");
}

void lpc_registry_table(lua_State *L, void *key, const char *mode) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushstring(L, mode);
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}
