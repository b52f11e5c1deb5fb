/* The message binding's ownership layer: the "protocall.Arena" userdata
 * (arenas paced against Lua's collector), anchors (the object owning a
 * message's memory) and their refs tables, the message test behind
 * lpc_to_message, and the error helpers the message files share. The object
 * model is described in lpc_message.h. */
#include "lpc_message.h"

#include <lauxlib.h>
#include <stdarg.h>
#include <string.h>

char lpc_refs_key; /* registry: ephemeron table anchor -> refs table */
char lpc_def_key;  /* metatable field: lightuserdata def | kind (lpc_message.h) */

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
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '\0')
      luaL_addstring(&b, "\\0");
    else
      luaL_addchar(&b, s[i]);
  }
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* -- Arenas and anchors ---------------------------------------------------- */

static void free_map(lua_State *L, lpc_ObjMap *m);
static void init_map(lua_State *L, lpc_ObjMap *m);

void lpc_free_arena(lua_State *L, int idx) {
  lpc_ArenaBox *h = luaL_checkudata(L, idx, LPC_ARENA_MT);
  free_map(L, &h->map);
  pc_Arena_Free(h->arena);
  h->arena = NULL;
}

int lpc_arena_gc(lua_State *L) {
  lpc_free_arena(L, 1);
  return 0;
}

pc_Arena *lpc_new_arena(lua_State *L) {
  lpc_ArenaBox *h = lua_newuserdatauv(L, sizeof(lpc_ArenaBox), 2); /* refs, objects */
  h->arena = NULL;
  h->reported = 0;
  init_map(L, &h->map);
  luaL_setmetatable(L, LPC_ARENA_MT);
  void *ud;
  lua_Alloc f = lua_getallocf(L, &ud);
  h->arena = pc_Arena_New(f, ud);
  if (h->arena == NULL) lpc_msg_error(L, "not enough memory");
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

int lpc_kind_of(lua_State *L, int idx) {
  return kind_of(def_and_kind(L, idx));
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

static _Noreturn void not_a_message(lua_State *L, int idx) {
  luaL_typeerror(L, idx, "message");
#if defined(__GNUC__)
  __builtin_unreachable();
#endif
}

pc_Message *lpc_check_message(lua_State *L, int idx, const pc_MessageDef **def) {
  pc_Message *m = lpc_to_message(L, idx, def);
  if (m == NULL) not_a_message(L, idx);
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
  else
    lua_getiuservalue(L, idx, 1);
  return lua_gettop(L);
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

/* refs[key] = value at 'v' (nil allowed) in the refs of the anchor at 'a';
 * a message given so is pinned in the anchor's map, the one it replaces
 * unpinned. */
void lpc_set_ref(lua_State *L, int a, const void *key, int v) {
  a = lua_absindex(L, a);
  v = lua_absindex(L, v);
  lpc_push_refs(L, a, !lua_isnil(L, v));
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  int refs = lua_gettop(L);
  lua_rawgetp(L, refs, key);
  lpc_pin_obj(L, a, v, 1); /* first: the same object again stays in the map */
  lpc_pin_obj(L, a, -1, -1);
  lua_pop(L, 1);
  lua_pushvalue(L, v);
  lua_rawsetp(L, refs, key);
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

/* -- One object per piece of memory ------------------------------------------ */

char lpc_index_key;   /* registry: the lpc_ObjIndex userdata */
static char kWeakKey; /* registry: the metatable {__mode = "v"} of objects tables */

/* A new anchor index, 0 when memory runs out. */
static uint32_t index_alloc(lpc_ObjIndex *x) {
  if (x->nfree > 0) return x->free[--x->nfree];
  if (x->top == UINT32_MAX) return 0;
  return ++x->top;
}

/* Gives anchor index 'i' back, emptying its slot of the anchors table. */
static void index_free(lua_State *L, lpc_ObjIndex *x, uint32_t i) {
  if (x->closed || i == 0) return;
  lpc_push_anchors(L, x);
  lua_pushnil(L);
  lua_rawseti(L, -2, (lua_Integer)i);
  lua_pop(L, 1);
  if (x->nfree == x->capfree) {
    size_t cap = x->capfree ? 2 * (size_t)x->capfree : 64;
    uint32_t *f =
        cap > UINT32_MAX ? NULL : x->alloc(x->ud, x->free, x->capfree * sizeof *f, cap * sizeof *f);
    if (f == NULL) return; /* the index is lost, nothing else */
    x->free = f;
    x->capfree = (uint32_t)cap;
  }
  x->free[x->nfree++] = i;
}

static int lpc_objindex_gc(lua_State *L) {
  lpc_ObjIndex *x = lua_touserdata(L, 1);
  if (x->free != NULL) x->alloc(x->ud, x->free, x->capfree * sizeof *x->free, 0);
  x->free = NULL;
  x->nfree = x->capfree = 0;
  x->closed = 1; /* maps finalized after this one give nothing back */
  return 0;
}

/* Pushes a new weak-valued table. */
static void new_weak_table(lua_State *L, int narr) {
  lua_createtable(L, narr, 0);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kWeakKey);
  lua_setmetatable(L, -2);
}

void lpc_open_objects(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_index_key) == LUA_TUSERDATA) { /* opened again */
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kWeakKey);
  lpc_ObjIndex *x = lua_newuserdatauv(L, sizeof *x, 0);
  memset(x, 0, sizeof *x);
  x->alloc = lua_getallocf(L, &x->ud);
  x->top = LPC_OBJ_FIRST - 1;
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, lpc_objindex_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lpc_index_key);
  new_weak_table(L, LPC_OBJ_FIRST + 64);
  x->anchors_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* Fibonacci hashing: the keys are addresses 8 bytes apart (the slots of one
 * message), which linear probing would otherwise pile into long runs. */
static size_t hash_key(const void *key) {
  return (size_t)(((uint64_t)(uintptr_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> 32);
}

uint32_t lpc_map_find(const lpc_ObjMap *m, const void *key) {
  if (m->e == NULL) return 0;
  for (size_t i = hash_key(key) & m->mask;; i = (i + 1) & m->mask) {
    if (m->e[i].key == key) return m->e[i].idx;
    if (m->e[i].key == NULL) return 0;
  }
}

static lpc_ObjEntry *map_entry(const lpc_ObjMap *m, const void *key) {
  if (m->e == NULL) return NULL;
  for (size_t i = hash_key(key) & m->mask;; i = (i + 1) & m->mask) {
    if (m->e[i].key == key) return &m->e[i];
    if (m->e[i].key == NULL) return NULL;
  }
}

static lpc_ObjEntry *put_entry(lpc_ObjMap *m, lpc_ObjEntry x) {
  size_t i = hash_key(x.key) & m->mask;
  while (m->e[i].key != NULL) i = (i + 1) & m->mask;
  m->e[i] = x;
  m->count++;
  return &m->e[i];
}

/* Room for one more entry, growing at three quarters full; 0 when memory
 * runs out. */
static int map_room(lpc_ObjMap *m) {
  size_t cap = m->e == NULL ? 0 : (size_t)m->mask + 1;
  if (4 * ((size_t)m->count + 1) <= 3 * cap) return 1;
  size_t ncap = cap == 0 ? 16 : 2 * cap;
  if (ncap > UINT32_MAX) return 0;
  lpc_ObjIndex *x = m->index;
  lpc_ObjEntry *old = m->e;
  lpc_ObjEntry *e = x->alloc(x->ud, NULL, 0, ncap * sizeof *e);
  if (e == NULL) return 0;
  memset(e, 0, ncap * sizeof *e);
  m->e = e;
  m->mask = (uint32_t)(ncap - 1);
  m->count = 0;
  for (size_t i = 0; i < cap; i++)
    if (old[i].key != NULL) put_entry(m, old[i]);
  if (old != NULL) x->alloc(x->ud, old, cap * sizeof *old, 0);
  return 1;
}

/* Adds 'key' with a new index and 'pins'; NULL when memory runs out. */
static lpc_ObjEntry *map_add(lpc_ObjMap *m, const void *key, uint32_t pins) {
  if (m->next == UINT32_MAX || !map_room(m)) return NULL;
  lpc_ObjEntry x = {key, ++m->next, pins};
  return put_entry(m, x);
}

uint32_t lpc_map_add(lpc_ObjMap *m, const void *key) {
  lpc_ObjEntry *e = map_add(m, key, LPC_PIN_READ);
  return e != NULL ? e->idx : 0;
}

/* Removes the entry at 'e' (linear probing: the entries after it move up). */
static void map_remove(lpc_ObjMap *m, lpc_ObjEntry *e) {
  size_t i = (size_t)(e - m->e);
  for (;;) {
    m->e[i].key = NULL;
    size_t j = i;
    for (;;) {
      j = (j + 1) & m->mask;
      if (m->e[j].key == NULL) {
        m->count--;
        return;
      }
      size_t home = hash_key(m->e[j].key) & m->mask;
      /* the entry at j may fill the hole at i when its home is not in (i, j] */
      if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) break;
    }
    m->e[i] = m->e[j];
    i = j;
  }
}

/* Frees the map's entries and gives its anchor index back (an Arena's
 * __gc: its objects table goes with it). */
static void free_map(lua_State *L, lpc_ObjMap *m) {
  lpc_ObjIndex *x = m->index;
  if (x == NULL) return;
  index_free(L, x, m->anchor);
  if (m->e != NULL) x->alloc(x->ud, m->e, ((size_t)m->mask + 1) * sizeof *m->e, 0);
  m->e = NULL;
  m->mask = m->count = m->anchor = m->next = 0;
}

/* Sets up the map of a new arena box. */
static void init_map(lua_State *L, lpc_ObjMap *m) {
  memset(m, 0, sizeof *m);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_index_key);
  m->index = lua_touserdata(L, -1);
  lua_pop(L, 1);
}

lpc_ObjMap *lpc_anchor_map(lua_State *L, int a) {
  a = lua_absindex(L, a);
  lpc_ArenaBox *h = lpc_anchor_arena(L, a);
  lpc_ObjMap *m = &h->map;
  if (m->anchor == 0) { /* its objects table: [0] the anchor, in the box and the anchors table */
    uint32_t i = index_alloc(m->index);
    if (i == 0) lpc_nomem(L);
    new_weak_table(L, 0);
    lua_pushvalue(L, a);
    lua_rawseti(L, -2, 0);
    lua_pushvalue(L, -1);
    lpc_push_anchors(L, m->index);
    lua_insert(L, -2);
    lua_rawseti(L, -2, (lua_Integer)i);
    lua_pop(L, 1);
    /* the box holds it: find the box again (an anchor's arena is in its refs) */
    if (luaL_testudata(L, a, LPC_ARENA_MT) != NULL) {
      lua_setiuservalue(L, a, 2);
    } else {
      lpc_push_refs(L, a, 1);
      lua_rawgeti(L, -1, 1);
      lua_rotate(L, -3, -1); /* refs, box, objs */
      lua_setiuservalue(L, -2, 2);
      lua_pop(L, 2);
    }
    m->anchor = i;
  }
  return m;
}

void lpc_push_map_objs(lua_State *L, const lpc_ObjMap *m) {
  lpc_push_anchors(L, m->index);
  lua_rawgeti(L, -1, (lua_Integer)m->anchor);
  lua_remove(L, -2);
}

int lpc_find_obj(lua_State *L, lpc_ObjMap *m, const void *key, uint32_t *idx) {
  uint32_t i = lpc_map_find(m, key);
  if (i != 0) {
    lpc_push_map_objs(L, m);
    if (lua_rawgeti(L, -1, (lua_Integer)i) != LUA_TNIL) {
      lua_remove(L, -2);
      return 1;
    }
    lua_pop(L, 2);
    *idx = i;
    return 0;
  }
  i = lpc_map_add(m, key);
  if (i == 0) lpc_nomem(L);
  *idx = i;
  return 0;
}

void lpc_set_obj(lua_State *L, const lpc_ObjMap *m, uint32_t idx, int v) {
  v = lua_absindex(L, v);
  lpc_push_map_objs(L, m);
  lua_pushvalue(L, v);
  lua_rawseti(L, -2, (lua_Integer)idx);
  lua_pop(L, 1);
}

void lpc_pin_obj(lua_State *L, int a, int v, int delta) {
  pc_Message *msg = lpc_to_message(L, v, NULL);
  if (msg == NULL) return;
  a = lua_absindex(L, a);
  v = lua_absindex(L, v);
  lpc_ObjMap *m = lpc_anchor_map(L, a);
  lpc_ObjEntry *e = map_entry(m, msg);
  if (delta < 0) {
    if (e == NULL || (e->pins & ~LPC_PIN_READ) == 0) return;
    if (--e->pins == 0) { /* given and taken back: its object is its own again */
      uint32_t i = e->idx;
      map_remove(m, e);
      lua_pushnil(L);
      lpc_set_obj(L, m, i, -1);
      lua_pop(L, 1);
    }
    return;
  }
  if (e == NULL && (e = map_add(m, msg, 0)) == NULL) lpc_nomem(L);
  e->pins++;
  lpc_set_obj(L, m, e->idx, v); /* the object given is the object of that memory */
}

void lpc_push_elems(lua_State *L, int a, const void *slot, int create) {
  lpc_push_refs(L, a, create);
  if (lua_isnil(L, -1)) return;
  if (lua_rawgetp(L, -1, (const char *)slot + 1) == LUA_TNIL && create) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, -3, (const char *)slot + 1);
  }
  lua_remove(L, -2);
}
