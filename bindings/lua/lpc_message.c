/* Messages as Lua values, reading (doc/guide.md "Messages"): views
 * of sub-messages, the per-type __index (plain slots read through the
 * Lookup, the rest through lpc_push_field), and the reading side of the
 * live repeated and map containers (__index, __len, __pairs). Writing is in
 * lpc_construct.c, the module functions and metatables in
 * lpc_message_ops.c. */
#include "lpc_message.h"

#include <lauxlib.h>
#include <string.h>

/* -- Types and views ------------------------------------------------------- */

/* The state's objects index (lpc_open_objects). */
static lpc_ObjIndex *obj_index(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_index_key);
  lpc_ObjIndex *x = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return x;
}

/* Pushes the instance metatable of 'def' for 'kind', through the cache in
 * the anchors table (of index 'x'). */
static void push_mt(lua_State *L, lpc_ObjIndex *x, const pc_MessageDef *def, int kind) {
  size_t slot = ((uintptr_t)def >> 4) % LPC_MT_CACHE + (kind == kLpc_Standalone ? LPC_MT_CACHE : 0);
  lpc_push_anchors(L, x);
  if (x->mt_def[slot] == def) {
    if (lua_rawgeti(L, -1, (lua_Integer)slot + 1) == LUA_TTABLE) {
      lua_remove(L, -2);
      return;
    }
    lua_pop(L, 1);
  }
  lpc_push_type(L, def);
  lua_getiuservalue(L, -1, kind == kLpc_Standalone ? 2 : 3);
  lua_remove(L, -2);
  lua_pushvalue(L, -1);
  lua_rawseti(L, -3, (lua_Integer)slot + 1);
  lua_remove(L, -2);
  x->mt_def[slot] = def;
}

static void push_instance_mt(lua_State *L, const pc_MessageDef *def, int kind) {
  push_mt(L, obj_index(L), def, kind);
}

/* Pushes a new view of 'msg' (type 'def'), whose anchor is the value at
 * 'a', its map 'm' and its objects table at 'objs'. */
static void new_view(lua_State *L, const pc_MessageDef *def, pc_Message *msg, int a, int objs,
                     lpc_ObjMap *m) {
  lpc_View *v = lua_newuserdatauv(L, sizeof(lpc_View), 2);
  v->msg = msg;
  v->map = m;
  lua_pushvalue(L, a);
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, objs);
  lua_setiuservalue(L, -2, 2);
  push_mt(L, m->index, def, kLpc_View);
  lua_setmetatable(L, -2);
}

void lpc_push_view(lua_State *L, const pc_MessageDef *def, pc_Message *msg, int anchor_idx) {
  anchor_idx = lua_absindex(L, anchor_idx);
  lpc_ObjMap *m = lpc_anchor_map(L, anchor_idx);
  lpc_push_map_objs(L, m);
  new_view(L, def, msg, anchor_idx, lua_gettop(L), m);
  lua_remove(L, -2);
}

int lpc_standalone_uv(const pc_MessageDef *def) {
  if (def->extension_range_count > 0) return 1;
  for (uint32_t i = 0; i < def->field_count; i++)
    if (def->fields[i].slot > kPc_Slot_64) return 1;
  return 0;
}

pc_Message *lpc_new_standalone(lua_State *L, const pc_MessageDef *def, int mt) {
  if (mt != 0) mt = lua_absindex(L, mt);
  void *p = lua_newuserdatauv(L, def->size, lpc_standalone_uv(def));
  pc_Message_Init(def, p);
  if (mt != 0)
    lua_pushvalue(L, mt);
  else
    push_instance_mt(L, def, kLpc_Standalone);
  lua_setmetatable(L, -2);
  return p;
}

/* Pushes the anchor and the objects table of the object at 'obj' (a
 * message of kind 'kind', or a container: kind 0): a view's or a
 * container's user values, else the message itself and its map's table;
 * returns the map. */
static lpc_ObjMap *push_owner(lua_State *L, int obj, int kind) {
  if (kind == kLpc_Standalone) {
    lpc_ObjMap *m = lpc_anchor_map(L, obj);
    lua_pushvalue(L, obj);
    lpc_push_map_objs(L, m);
    return m;
  }
  lua_getiuservalue(L, obj, 1);
  lua_getiuservalue(L, obj, 2);
  return kind == kLpc_View ? ((lpc_View *)lpc_to_pointer(L, obj))->map
                           : ((lpc_Container *)lpc_to_pointer(L, obj))->map;
}

/* Pushes the Lua object for sub-message 'msg' (of type 'def') reached from
 * the object at 'obj' (a message of kind 'kind', or a container: kind 0):
 * the one its anchor's map has for that memory (the object a field was
 * given, or a view made before and still referenced), or a new view, which
 * the map then has. */
static void push_submessage(lua_State *L, int obj, int kind, const pc_MessageDef *def,
                            pc_Message *msg) {
  if (msg == NULL) {
    lua_pushnil(L);
    return;
  }
  obj = lua_absindex(L, obj);
  lpc_ObjMap *m = push_owner(L, obj, kind);
  int objs = lua_gettop(L), a = objs - 1;
  uint32_t idx = lpc_map_find(m, msg);
  if (idx != 0) {
    if (lua_rawgeti(L, objs, (lua_Integer)idx) != LUA_TNIL) {
      lua_replace(L, a);
      lua_settop(L, a);
      return;
    }
    lua_pop(L, 1);
  } else if ((idx = lpc_map_add(m, msg)) == 0) {
    lpc_nomem(L);
  }
  new_view(L, def, msg, a, objs, m);
  lua_pushvalue(L, -1);
  lua_rawseti(L, objs, (lua_Integer)idx);
  lua_replace(L, a);
  lua_settop(L, a);
}

/* Pushes the container of repeated or map field 'f' of the message object at
 * 'obj': one object per field of a message (while one is referenced),
 * found by the slot's address in the anchor's map (extensions get a new
 * one each time). */
static void push_container(lua_State *L, int obj, int kind, pc_Message *msg, const pc_FieldDef *f) {
  obj = lua_absindex(L, obj);
  if (kind == 0) kind = lpc_kind_of(L, obj);
  lpc_ObjMap *m = push_owner(L, obj, kind);
  int objs = lua_gettop(L), a = objs - 1;
  const void *key = pc_Message_Slot(msg, f);
  uint32_t idx = f->is_extension ? 0 : lpc_map_find(m, key);
  if (idx != 0) {
    if (lua_rawgeti(L, objs, (lua_Integer)idx) != LUA_TNIL) {
      lua_replace(L, a);
      lua_settop(L, a);
      return;
    }
    lua_pop(L, 1);
  } else if (!f->is_extension && (idx = lpc_map_add(m, key)) == 0) {
    lpc_nomem(L);
  }
  lpc_Container *c = lua_newuserdatauv(L, sizeof(lpc_Container), 2);
  c->msg = msg;
  c->f = f;
  c->map = m;
  c->magic = f->is_map ? kLpc_MapMagic : kLpc_RepeatedMagic;
  lua_pushvalue(L, a);
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, objs);
  lua_setiuservalue(L, -2, 2);
  int slot = f->is_map ? LPC_OBJ_MAP : LPC_OBJ_REPEATED;
  lpc_push_anchors(L, m->index);
  if (lua_rawgeti(L, -1, slot) != LUA_TTABLE) {
    lua_pop(L, 1);
    luaL_getmetatable(L, f->is_map ? LPC_MAP_MT : LPC_REPEATED_MT);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, slot);
  }
  lua_remove(L, -2);
  lua_setmetatable(L, -2);
  if (idx != 0) {
    lua_pushvalue(L, -1);
    lua_rawseti(L, objs, (lua_Integer)idx);
  }
  lua_replace(L, a);
  lua_settop(L, a);
}

void lpc_push_container(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f) {
  push_container(L, obj, 0, msg, f);
}

/* Pushes the value of field 'f' of the message object at 'obj' (of kind
 * 'kind', or 0: its metatable says). */
static void push_field(lua_State *L, int obj, int kind, pc_Message *msg, const pc_FieldDef *f) {
  if (f->label == kPc_Label_Repeated) {
    push_container(L, obj, kind, msg, f);
  } else if (f->message != NULL) {
    pc_Value v = pc_Message_Get(msg, f);
    if (v.m == NULL) {
      lua_pushnil(L);
      return;
    }
    if (kind == 0) kind = lpc_kind_of(L, obj);
    push_submessage(L, obj, kind, f->message, v.m);
  } else {
    lpc_push_scalar(L, f, pc_Message_Get(msg, f));
  }
}

/* Pushes the value of field 'f' of the message object at 'obj'. */
void lpc_push_field(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f) {
  push_field(L, obj, 0, msg, f);
}

static _Noreturn void no_field(lua_State *L, const pc_MessageDef *def, int key) {
  if (lua_type(L, key) == LUA_TSTRING)
    lpc_msg_error(L, "%s.%s: no such field", def->full_name, lpc_push_shown(L, key));
  lpc_msg_error(L, "%s: field name expected, got %s", def->full_name, lpc_type_name(L, key));
}

/* Empty entries hold the Lookup's own address (never a string), so a NULL
 * key (a number) is a miss without a test. */
const lpc_LookupEntry *lpc_probe_more(const lpc_Lookup *lk, const void *p, size_t i) {
  for (;;) {
    if (lk->e[i].key == (const void *)lk) return NULL;
    i = (i + 1) & lk->mask;
    if (lk->e[i].key == p) return &lk->e[i];
  }
}

/* The field named by the key at 'key' (raises when there is none), through
 * the Lookup at 'lk'; names longer than Lua's short strings fall back to a
 * search by name. */
const pc_FieldDef *lpc_lookup_slow(lua_State *L, const pc_MessageDef *def, int key) {
  if (lua_type(L, key) == LUA_TSTRING) {
    size_t len;
    const pc_FieldDef *f;
    const char *name = lua_tolstring(L, key, &len);
    f = pc_MessageDef_FindFieldByName(def, name, len);
    if (f != NULL) return f;
  }
  no_field(L, def, key);
  return NULL;
}

/* The general read of m[key] (not a plain slot, or a key the Lookup does
 * not hold) of the message of kind 'kind' at 1. */
static int index_slow(lua_State *L, const lpc_Lookup *lk, const lpc_LookupEntry *e, char *msg,
                      int kind) {
  const pc_FieldDef *f = e != NULL ? lpc_entry_field(lk, e) : lpc_lookup_slow(L, lk->def, 2);
  if (f->slot <= kPc_Slot_String) {
    lpc_push_scalar(L, f, pc_Message_Get(msg, f));
    return 1;
  }
  push_field(L, 1, kind, msg, f);
  return 1;
}

/* Inlined into both __index functions: the plain slots are read here, the
 * most common kinds tested first. The key is probed before the message is
 * fetched, so fewer values live across the API calls. */
LPC_INLINE int index_common(lua_State *L, int kind) {
  const lpc_Lookup *lk = lua_touserdata(L, lua_upvalueindex(1));
  char *msg = lpc_msg_at1(L, kind);
  const lpc_LookupEntry *e = lpc_probe(lk, lua_topointer(L, 2));
  if (e == NULL) return index_slow(L, lk, e, msg, kind);
  const char *p = msg + e->offset;
  if (e->read == kLpc_Read_U32) {
    uint32_t v;
    memcpy(&v, p, 4);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  if (e->read == kLpc_Read_I32) {
    int32_t v;
    memcpy(&v, p, 4);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  if (e->read == kLpc_Read_I64) {
    int64_t v;
    memcpy(&v, p, 8);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  if (e->read == kLpc_Read_F64) {
    double v;
    memcpy(&v, p, 8);
    lua_pushnumber(L, v);
    return 1;
  }
  if (e->read == kLpc_Read_F32) {
    float v;
    memcpy(&v, p, 4);
    lua_pushnumber(L, (lua_Number)v);
    return 1;
  }
  if (e->read == kLpc_Read_Bool) {
    lua_pushboolean(L, *p != 0);
    return 1;
  }
  return index_slow(L, lk, e, msg, kind);
}

/* -- v = m.name   (standalone message) */
int lpc_message_index(lua_State *L) {
  return index_common(L, kLpc_Standalone);
}

/* -- v = m.name   (view) */
int lpc_view_index(lua_State *L) {
  return index_common(L, kLpc_View);
}

/* Pushes the anchor of the container at 'c' (its user value 1). */
int lpc_push_container_anchor(lua_State *L, int c) {
  lua_getiuservalue(L, c, 1);
  return lua_gettop(L);
}

/* Remembers what the element 'key' (a stack index) of the container at 'c'
 * points into, the value at 'v' (a message object or a string; nil
 * forgets): the anchor's refs keep it, and a message is pinned in the
 * anchor's map. */
void lpc_keep_elem(lua_State *L, int c, int key, int v) {
  c = lua_absindex(L, c);
  key = lua_absindex(L, key);
  v = lua_absindex(L, v);
  const lpc_Container *cont = lua_touserdata(L, c);
  int a = lpc_push_container_anchor(L, c);
  if (cont->f->is_extension) { /* no slot of its own: keep by address */
    if (!lua_isnil(L, v)) lpc_set_ref(L, a, lpc_to_message(L, v, NULL), v);
    lua_settop(L, a - 1);
    return;
  }
  lpc_push_elems(L, a, pc_Message_Slot(cont->msg, cont->f), !lua_isnil(L, v));
  if (lua_istable(L, -1)) {
    int elems = lua_gettop(L);
    lua_pushvalue(L, key);
    lua_rawget(L, elems);
    lpc_pin_obj(L, a, v, 1);
    lpc_pin_obj(L, a, -1, -1);
    lua_pop(L, 1);
    lua_pushvalue(L, key);
    lua_pushvalue(L, v);
    lua_rawset(L, elems);
  }
  lua_settop(L, a - 1);
}

/* Pushes element 'v' (of field 'ef', at Lua key 'key') of the container at
 * 'c': scalars as values, messages as the object the anchor's map has for
 * the element's memory, or a new view. */
void lpc_push_elem(lua_State *L, int c, const pc_FieldDef *ef, pc_Value v, int key) {
  (void)key;
  if (ef->message == NULL) {
    lpc_push_scalar(L, ef, v);
    return;
  }
  if (v.m == NULL) {
    lua_pushnil(L);
    return;
  }
  push_submessage(L, c, 0, ef->message, v.m);
}

/* -- Repeated containers ----------------------------------------------------- */

lpc_Container *lpc_check_container(lua_State *L, int idx, const char *mt) {
  lpc_Container *c = lpc_test_container(L, idx, strcmp(mt, LPC_MAP_MT) == 0);
  if (c == NULL) luaL_typeerror(L, idx, mt);
  return c;
}

lpc_Container *lpc_test_container(lua_State *L, int idx, int is_map) {
  if (lua_type(L, idx) != LUA_TUSERDATA || lua_rawlen(L, idx) != sizeof(lpc_Container)) return NULL;
  lpc_Container *c = lpc_to_pointer(L, idx);
  return c->magic == (is_map ? kLpc_MapMagic : kLpc_RepeatedMagic) ? c : NULL;
}

/* -- v = c[i]   (repeated; nil outside 1..#c) */
int lpc_repeated_index(lua_State *L) {
  lpc_Container *c = lpc_check_container(L, 1, LPC_REPEATED_MT);
  const pc_Array *arr = pc_Message_Get(c->msg, c->f).a;
  int isint;
  lua_Integer i = lua_tointegerx(L, 2, &isint); /* 1.0 reads element 1, as c[1.0] = v writes it */
  if (!isint || lua_type(L, 2) != LUA_TNUMBER || arr == NULL || i < 1 || (size_t)i > arr->size)
    return 0;
  lpc_push_elem(L, 1, c->f, pc_Array_Get(arr, (size_t)i - 1, pc_FieldDef_ElemSlot(c->f)), 2);
  return 1;
}

/* -- n = #c */
int lpc_container_len(lua_State *L) {
  lpc_Container *c = lua_touserdata(L, 1);
  pc_Value v = pc_Message_Get(c->msg, c->f);
  size_t n = c->f->is_map ? (v.map ? v.map->size : 0) : (v.a ? v.a->size : 0);
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

/* -- i, v = next(c, i)   (the iterator lpc_repeated_pairs returns) */
static int lpc_repeated_next(lua_State *L) {
  lua_Integer i = luaL_checkinteger(L, 2) + 1;
  lua_pushinteger(L, i);
  if (lua_geti(L, 1, i) == LUA_TNIL) return 1;
  return 2;
}

/* -- for i, v in pairs(c)   (repeated: as ipairs) */
int lpc_repeated_pairs(lua_State *L) {
  lpc_check_container(L, 1, LPC_REPEATED_MT);
  lua_pushcfunction(L, lpc_repeated_next);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  return 3;
}

/* -- Map containers ---------------------------------------------------------- */

/* -- v = c[k]   (nil when absent; a key of the wrong type raises) */
int lpc_map_index(lua_State *L) {
  lpc_Container *c = lpc_check_container(L, 1, LPC_MAP_MT);
  const pc_FieldDef *kf = pc_FieldDef_MapKey(c->f), *vf = pc_FieldDef_MapValue(c->f);
  pc_Value k = lpc_check_scalar(L, kf, c->f->full_name, 2);
  const pc_Value *v = pc_Map_Find(pc_Message_Get(c->msg, c->f).map, pc_FieldDef_ElemSlot(kf), k);
  if (v == NULL) return 0;
  lpc_push_elem(L, 1, vf, *v, 2);
  return 1;
}

/* The iterator of lpc_map_pairs: upvalue 1 the keys as they were when
 * pairs began, upvalue 2 the position; a key deleted since is skipped, a
 * value changed since reads as it is now (Lua's rule for next: existing
 * fields may be changed or cleared during a traversal). */
static int lpc_map_next(lua_State *L) {
  lpc_Container *c = lua_touserdata(L, 1);
  const pc_FieldDef *kf = pc_FieldDef_MapKey(c->f);
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf);
  lua_Integer i = lua_tointeger(L, lua_upvalueindex(2));
  lua_settop(L, 1);
  for (;;) {
    if (lua_rawgeti(L, lua_upvalueindex(1), ++i) == LUA_TNIL) return 0;
    const pc_Value *v = pc_Map_Find(pc_Message_Get(c->msg, c->f).map, ks,
                                    lpc_check_scalar(L, kf, c->f->full_name, 2));
    if (v != NULL) {
      lua_pushinteger(L, i);
      lua_replace(L, lua_upvalueindex(2));
      lpc_push_elem(L, 1, pc_FieldDef_MapValue(c->f), *v, 2);
      return 2;
    }
    lua_pop(L, 1);
  }
}

/* -- for k, v in pairs(c)   (map: in the order of its entries; entries may
 * be changed or deleted during the loop, as in a Lua table) */
int lpc_map_pairs(lua_State *L) {
  lpc_Container *c = lpc_check_container(L, 1, LPC_MAP_MT);
  const pc_Map *map = pc_Message_Get(c->msg, c->f).map;
  const pc_FieldDef *kf = pc_FieldDef_MapKey(c->f);
  size_t n = map != NULL ? map->size : 0;
  lua_createtable(L, n < INT32_MAX ? (int)n : 0, 0);
  for (size_t i = 0; i < n; i++) {
    lpc_push_key(L, kf, map->entries[i].key);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushinteger(L, 0);
  lua_pushcclosure(L, lpc_map_next, 2);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}
