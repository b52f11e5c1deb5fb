/* Messages as Lua values, reading (doc/guide.md "Messages"): views
 * of sub-messages, the per-type __index (plain slots read through the
 * Lookup, the rest through lpc_push_field), and the reading side of the
 * live repeated and map containers (__index, __len, __pairs). Writing is in
 * lpc_construct.c, the module functions and metatables in
 * lpc_message_ops.c. */
#include "lpc_message.h"

#include <lauxlib.h>
#include <string.h>

char lpc_repeated_mt_key;
char lpc_map_mt_key;

/* -- Types and views ------------------------------------------------------- */

static void push_instance_mt(lua_State *L, const pc_MessageDef *def, int kind) {
  lpc_push_type(L, def);
  lua_getiuservalue(L, -1, kind == kLpc_Standalone ? 2 : 3);
  lua_remove(L, -2);
}

int lpc_view_uvs(const pc_MessageDef *def) {
  int n = 1;
  for (uint32_t i = 0; i < def->field_count && n < LPC_VIEW_MAX_UV - 1; i++)
    n += def->fields[i].slot >= kPc_Slot_Message;
  return n;
}

int lpc_view_uv(const pc_FieldDef *f) {
  if (f->is_extension || f->slot < kPc_Slot_Message) return 0;
  const pc_MessageDef *def = f->containing;
  size_t i = (size_t)(f - def->fields);
  if (f < def->fields || i >= def->field_count) return 0;
  int uv = 2;
  for (size_t j = 0; j < i && uv < LPC_VIEW_MAX_UV; j++)
    uv += def->fields[j].slot >= kPc_Slot_Message;
  return uv < LPC_VIEW_MAX_UV ? uv : 0;
}

/* Pushes the metatable of views of 'def' (its Type's user value 3) and
 * returns their Lookup (its __index's upvalue 1, kept in the metatable
 * under 0 by make_mt, lpc_message_ops.c, as a light userdata: the
 * metatable's __index keeps it alive). Not cached by def elsewhere: under
 * LuaJIT a metatable can outlive its pool by a collection cycle (marked
 * from an arena being finalized), and a new pool's def may then have the
 * freed one's address. */
static const lpc_Lookup *push_view_mt(lua_State *L, const pc_MessageDef *def) {
  push_instance_mt(L, def, kLpc_View);
  lua_rawgeti(L, -1, 0);
  const lpc_Lookup *lk = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return lk;
}

/* Pushes a view of 'msg' kept alive by the anchor at 'anchor', of the type
 * whose views' Lookup is 'lk', the metatable of its views on top of the
 * stack taking. */
static void new_view(lua_State *L, pc_Message *msg, int anchor, const lpc_Lookup *lk) {
  lpc_View *p = lpc_newuserdata_uv1(L, sizeof(lpc_View), lk->view_uvs, anchor);
  p->msg = msg;
  p->lk = lk;
  lua_insert(L, -2);
  lua_setmetatable(L, -2);
}

/* lpc_push_view, returning the view's Lookup. */
static const lpc_Lookup *push_view(lua_State *L, const pc_MessageDef *def, pc_Message *msg,
                                   int anchor_idx) {
  anchor_idx = lua_absindex(L, anchor_idx);
  const lpc_Lookup *lk = push_view_mt(L, def);
  new_view(L, msg, anchor_idx, lk);
  return lk;
}

void lpc_push_view(lua_State *L, const pc_MessageDef *def, pc_Message *msg, int anchor_idx) {
  push_view(L, def, msg, anchor_idx);
}

/* Pushes the metatable of views of 'def', the type of the field whose
 * lpc_view_uv is 'uv' of the messages of the instance metatable at 'mt',
 * and returns their Lookup: that metatable keeps both (under uv and -uv,
 * so also its Type lives as long as the parent's). 'plk': the Lookup of
 * the views whose metatable is at 'mt' (its subs[uv] set here), or NULL
 * (a standalone message's metatable). */
static const lpc_Lookup *push_child_mt(lua_State *L, int mt, int uv, const pc_MessageDef *def,
                                       const lpc_Lookup *plk) {
  const lpc_Lookup *lk = push_view_mt(L, def);
  lua_pushvalue(L, -1);
  lua_rawseti(L, mt, uv);
  lua_pushlightuserdata(L, (void *)lk);
  lua_rawseti(L, mt, -uv);
  if (plk != NULL) plk->subs[uv] = lk;
  return lk;
}

/* Pushes a new view of 'msg' (of type 'def'), a sub-message or element of
 * the field whose lpc_view_uv is 'uv' of the message object at 'obj' (an
 * absolute index; of kind 'kind'), kept alive by the anchor at 'anchor',
 * and returns its Lookup. 'lk': the Lookup of views of 'def' when the
 * caller has it at hand (a container's, returned here before for its
 * message object), else NULL. The child's metatable is [uv] of the
 * parent's; with its Lookup at hand (the caller's, or subs[uv] of a view
 * parent's) the view is made without reading the Lookup from the
 * metatable, three to seven API calls fewer than the general path. */
static const lpc_Lookup *push_child_view(lua_State *L, int obj, int kind, int uv,
                                         const pc_MessageDef *def, pc_Message *msg, int anchor,
                                         const lpc_Lookup *lk) {
  if (uv <= 0) return push_view(L, def, msg, anchor);
  const lpc_Lookup *plk = NULL;
  if (kind == kLpc_View) {
    plk = ((const lpc_View *)lua_touserdata(L, obj))->lk;
    if (lk == NULL) lk = plk->subs[uv];
  }
  if (lk != NULL) { /* the parent's metatable holds the child's at [uv] */
    lpc_View *p = lpc_newuserdata_uv1(L, sizeof(lpc_View), lk->view_uvs, anchor);
    p->msg = msg;
    p->lk = lk;
    int has_mt = lua_getmetatable(L, obj);
    if (has_mt && lua_rawgeti(L, -1, uv) == LUA_TTABLE) {
      lua_setmetatable(L, -3);
      lua_pop(L, 1);
      return lk;
    }
    lua_pop(L, has_mt ? 3 : 1); /* not there (not expected): the general path */
  }
  if (!lua_getmetatable(L, obj)) return push_view(L, def, msg, anchor);
  int mt = lua_gettop(L);
  if (lua_rawgeti(L, mt, uv) == LUA_TTABLE) {
    lua_rawgeti(L, mt, -uv);
    lk = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (plk != NULL) plk->subs[uv] = lk;
  } else {
    lua_pop(L, 1);
    lk = push_child_mt(L, mt, uv, def, plk);
  }
  new_view(L, msg, anchor, lk); /* the metatable at mt + 1 taken */
  lua_replace(L, mt);
  return lk;
}

int lpc_standalone_uv(const pc_MessageDef *def) {
  if (def->extension_range_count > 0) return 1;
  for (uint32_t i = 0; i < def->field_count; i++)
    if (def->fields[i].slot > kPc_Slot_64) return 1;
  return 0;
}

pc_Message *lpc_new_standalone(lua_State *L, const pc_MessageDef *def, int mt) {
  void *p = lua_newuserdatauv(L, def->size, lpc_standalone_uv(def));
  pc_Message_Init(def, p);
  if (mt != 0)
    lua_pushvalue(L, mt);
  else
    push_instance_mt(L, def, kLpc_Standalone);
  lua_setmetatable(L, -2);
  return p;
}

/* The kind of the message object at 'idx' whose message is 'msg': a
 * standalone message's block is its message, a view's holds a pointer. */
static int kind_of_object(lua_State *L, int idx, const pc_Message *msg) {
  return lua_touserdata(L, idx) == (const void *)msg ? kLpc_Standalone : kLpc_View;
}

/* Whether the message object at 'idx' (one a cache or refs table holds:
 * a message object, or nil) is an object of 'msg'. A standalone message
 * starts with its type word, which never equals a message's address. */
static int is_object_of(lua_State *L, int idx, const pc_Message *msg) {
  const void *p = lua_touserdata(L, idx);
  if (p == NULL) return lpc_to_message(L, idx, NULL) == msg && msg != NULL;
  return p == (const void *)msg || *(pc_Message *const *)p == msg;
}

/* Pushes the Lua object for sub-message 'msg' reached from the anchor at
 * 'a' through 'key' (a slot address or the message itself): the object
 * stored there, or a new view remembered there. */
static void push_submessage(lua_State *L, int a, const pc_MessageDef *def, pc_Message *msg,
                            const void *key) {
  lpc_push_refs(L, a, 1);
  if (lua_rawgetp(L, -1, key) != LUA_TNIL && is_object_of(L, -1, msg)) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  lpc_push_view(L, def, msg, a);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, key);
  lua_remove(L, -2);
}

/* How many user values a container of 'f' has: 2 when it may keep objects
 * in its table of elements (message elements, and the strings of string
 * or bytes elements and map keys a write keeps), else 1: a table of
 * numbers keeps nothing. */
static int container_uvs(const pc_FieldDef *f) {
  if (!f->is_map) return pc_FieldDef_ElemSlot(f) >= kPc_Slot_String ? 2 : 1;
  return pc_FieldDef_ElemSlot(pc_FieldDef_MapKey(f)) >= kPc_Slot_String ||
                 pc_FieldDef_ElemSlot(pc_FieldDef_MapValue(f)) >= kPc_Slot_String
             ? 2
             : 1;
}

/* Pushes a new container of repeated or map field 'f' of the message object
 * at 'obj' (user value 1; user value 2, the table of element objects, when
 * container_uvs gives one). Its metatable: with 'up', upvalue 2 (Repeated)
 * or 3 (Map) of the running function, an __index of messages (make_mt,
 * lpc_message_ops.c); else from the registry under a light userdata key,
 * not by name (a string lookup). */
static void new_container(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f, int uv,
                          int up) {
  lpc_Container *c = lpc_newuserdata_uv1(L, sizeof(lpc_Container), container_uvs(f), obj);
  c->msg = msg;
  c->f = f;
  c->uv = uv;
  c->kind = 0;
  c->elem_lk = NULL;
  if (up)
    lua_pushvalue(L, lua_upvalueindex(f->is_map ? 3 : 2));
  else
    lua_rawgetp(L, LUA_REGISTRYINDEX, f->is_map ? &lpc_map_mt_key : &lpc_repeated_mt_key);
  lua_setmetatable(L, -2);
}

/* Pushes the value of sub-message or container field 'f' of the view at
 * 'obj' kept in its user value 'uv' (lpc_view_uv): a container is one per
 * field; a sub-message's object is the one kept there while the slot
 * still points to its message, else the one the anchor's refs keep for the
 * slot (a message assigned there), else a new view. The view is the one
 * object of its message (views are made once per slot or element), so
 * what it keeps is what the anchor's refs would, without an insert into a
 * table that grows with every view of the tree; and those objects are
 * reached through the view alone, so they need live no longer than it.
 * Returns 0 (nothing pushed) when the view has no such user value, 2 when
 * it pushed what the user value kept (a sub-message checked; a container
 * not: check_kept_container), else 1. 'up' as for new_container. */
static int push_kept(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f, int uv, int up) {
  pc_Message *sub = NULL;
  if (f->label != kPc_Label_Repeated) {
    sub = pc_Message_Get(msg, f).m;
    if (sub == NULL) {
      lua_pushnil(L);
      return 1;
    }
  }
  int uvs = lpc_push_uvs(L, obj); /* a view: it has user values */
  int t = lpc_get_uv(L, uvs, uv);
  if (t == LUA_TNONE) { /* (Lua 5.4 alone answers so) */
    lua_pop(L, 1);
    return 0;
  }
  if (t != LUA_TNIL && (sub == NULL || is_object_of(L, -1, sub))) {
    lpc_pop_uvs(L, uvs);
    return 2;
  }
  lua_pop(L, 1);
  if (sub == NULL) {
    new_container(L, obj, msg, f, uv, up);
  } else {
    lpc_push_uv(L, uvs, 1); /* the anchor */
    int a = lua_gettop(L);
    lpc_check_anchor(L, a);
    /* its refs (lpc_push_refs without making them): a view's anchor has a
     * user value (an Arena; a standalone message, of a type that holds
     * messages), a table once something was kept (else nil, or a flat
     * decode's input string) */
    if (lpc_get_known_uv(L, a, 1) == LUA_TTABLE &&
        lua_rawgetp(L, -1, pc_Message_Slot(msg, f)) != LUA_TNIL && is_object_of(L, -1, sub)) {
      lua_copy(L, -1, a);
      lua_settop(L, a);
    } else {
      lua_settop(L, a);
      push_child_view(L, obj, kLpc_View, uv, f->message, sub, a, NULL);
      lua_replace(L, a);
    }
  }
  lua_pushvalue(L, -1);
  lpc_set_uv(L, uvs, uv);
  lpc_pop_uvs(L, uvs);
  return 1;
}

/* Raises (lpc_replaced_error) unless the value on top, what a view's user
 * value or an anchor's refs (both within the debug library's reach) kept
 * as the container of field 'f' of 'msg', is that container: a full
 * userdata of its size with the container metatable, of that very message
 * and field. A read hands a kept value to Lua unchecked (the VM then calls
 * the metamethods of what it is); this is for the C callers that use it as
 * an lpc_Container. */
static void check_kept_container(lua_State *L, const pc_Message *msg, const pc_FieldDef *f) {
  const lpc_Container *c = lua_touserdata(L, -1);
  int ours = lua_type(L, -1) == LUA_TUSERDATA && lua_rawlen(L, -1) == sizeof(lpc_Container) &&
             lua_getmetatable(L, -1);
  if (ours) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, f->is_map ? &lpc_map_mt_key : &lpc_repeated_mt_key);
    ours = lua_rawequal(L, -1, -2) && c->msg == msg && c->f == f;
    lua_pop(L, 2);
  }
  if (!ours) lpc_replaced_error(L);
}

/* Pushes the container of repeated or map field 'f' of the message object
 * at 'obj' (of kind 'kind', or 0: found here; 'uv' its lpc_view_uv, or -1:
 * found here): one object per field of a message, kept by a view in its
 * user value (push_kept), by a standalone message in its refs under the
 * slot's address + 1; extensions of any message get a new one each time.
 * User values: 1 the message object, 2 the table of element objects
 * (message elements: index or key -> the object the slot points to), or
 * nil. With 'take' (the caller uses it as an lpc_Container) a kept one is
 * checked (check_kept_container). */
static void push_container(lua_State *L, int obj, int kind, pc_Message *msg, const pc_FieldDef *f,
                           int uv, int take) {
  obj = lua_absindex(L, obj);
  if (f->is_extension) {
    new_container(L, obj, msg, f, 0, 0);
    return;
  }
  if (kind == 0) kind = kind_of_object(L, obj, msg);
  if (kind == kLpc_View) {
    if (uv < 0) uv = lpc_view_uv(f);
    int kept = uv > 0 ? push_kept(L, obj, msg, f, uv, 0) : 0;
    if (kept == 2 && take) check_kept_container(L, msg, f);
    if (kept) return;
  }
  const void *key = (const char *)pc_Message_Slot(msg, f) + 1;
  int a = lpc_push_anchor_of(L, obj, kind);
  lpc_push_refs(L, a, 1);
  if (lua_rawgetp(L, a + 1, key) != LUA_TUSERDATA) {
    lua_pop(L, 1);
    new_container(L, obj, msg, f, uv, 0);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, a + 1, key);
  } else if (take) {
    check_kept_container(L, msg, f);
  }
  lua_replace(L, a);
  lua_settop(L, a);
}

void lpc_push_container(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f) {
  push_container(L, obj, 0, msg, f, -1, 1);
}

/* Pushes the value of field 'f' of the message object at 'obj' (of kind
 * 'kind', or 0: found here; 'uv' as for push_container). */
static void push_field(lua_State *L, int obj, int kind, pc_Message *msg, const pc_FieldDef *f,
                       int uv) {
  if (f->label == kPc_Label_Repeated) {
    push_container(L, obj, kind, msg, f, uv, 0);
  } else if (f->message != NULL) {
    obj = lua_absindex(L, obj);
    if (kind == 0) kind = kind_of_object(L, obj, msg);
    if (kind == kLpc_View && !f->is_extension) {
      if (uv < 0) uv = lpc_view_uv(f);
      if (uv > 0 && push_kept(L, obj, msg, f, uv, 0)) return;
    }
    pc_Value v = pc_Message_Get(msg, f);
    if (v.m == NULL) {
      lua_pushnil(L);
      return;
    }
    int a = lpc_push_anchor_of(L, obj, kind);
    const void *key = f->is_extension ? (const void *)v.m : pc_Message_Slot(msg, f);
    push_submessage(L, a, f->message, v.m, key);
    lua_remove(L, a);
  } else {
    lpc_push_scalar(L, f, pc_Message_Get(msg, f));
  }
}

/* Pushes the value of field 'f' of the message object at 'obj'. */
void lpc_push_field(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f) {
  push_field(L, obj, 0, msg, f, -1);
}

_Noreturn void lpc_no_field(lua_State *L, const char *owner, int key) {
  if (lua_type(L, key) == LUA_TSTRING)
    lpc_msg_error(L, "%s.%s: no such field", owner, lpc_push_shown(L, key));
  lpc_msg_error(L, "%s: field name expected, got %s", owner, lpc_type_name(L, key));
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

const pc_FieldDef *lpc_find_field(lua_State *L, const pc_MessageDef *def, int key) {
  if (lua_type(L, key) != LUA_TSTRING) return NULL;
  size_t len;
  const char *name = lua_tolstring(L, key, &len);
  return pc_MessageDef_FindFieldByName(def, name, len);
}

/* The field named by the key at 'key' (raises when there is none), through
 * the Lookup at 'lk'; names longer than Lua's short strings fall back to a
 * search by name. */
const pc_FieldDef *lpc_lookup_slow(lua_State *L, const pc_MessageDef *def, int key) {
  const pc_FieldDef *f = lpc_find_field(L, def, key);
  if (f == NULL) lpc_no_field(L, def->full_name, key);
  return f;
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
  /* a view's sub-message or container (push_kept) with the container
   * metatables at hand */
  if (kind == kLpc_View && e != NULL && e->uv > 0 && push_kept(L, 1, msg, f, e->uv, 1)) return 1;
  push_field(L, 1, kind, msg, f, e != NULL ? e->uv : -1);
  return 1;
}

/* Zeros: what an unset oneof member of kLpc_Read_OneofBase + kind reads
 * as (0, 0.0, false, an empty string view). */
static const uint64_t kZeros[2] = {0, 0};
_Static_assert(sizeof(kZeros) >= sizeof(pc_StringView) && sizeof(kZeros) >= sizeof(pc_Value),
               "kZeros covers every plain kind's slot");

/* The __index functions' self at 1 of no userdata: raises. */
static _Noreturn void index_self_error(lua_State *L) {
  const lpc_Lookup *lk = lua_touserdata(L, lua_upvalueindex(1));
  lpc_arg_type_error(L, 1, "__index", lk->def->full_name);
}

/* Inlined into both __index functions: the plain slots are read here, a
 * oneof member with a zero default as its plain kind from its slot when it
 * is the member set, else from kZeros. A view carries its Lookup (the
 * upvalue, read without the API call, a tenth of a field read); a
 * standalone message's is the upvalue. */
LPC_INLINE int index_common(lua_State *L, int kind) {
  const lpc_Lookup *lk;
  char *msg;
  if (kind == kLpc_View) {
    const lpc_View *v = lua_touserdata(L, 1);
    if (v == NULL) index_self_error(L);
    msg = (char *)v->msg;
    lk = v->lk;
  } else {
    msg = lua_touserdata(L, 1);
    if (msg == NULL) index_self_error(L);
    lk = lua_touserdata(L, lua_upvalueindex(1));
  }
  const lpc_LookupEntry *e = lpc_probe(lk, lua_topointer(L, 2));
  if (e == NULL) return index_slow(L, lk, e, msg, kind);
  const char *p = msg + e->offset;
  unsigned read = e->read;
  if (read >= kLpc_Read_OneofBase) {
    const pc_FieldDef *f = lpc_entry_field(lk, e);
    uint32_t c;
    memcpy(&c, msg + f->case_offset, sizeof(c));
    if (c != (uint32_t)f->number) p = (const char *)kZeros;
    read -= kLpc_Read_OneofBase;
  }
  switch (read) {
  case kLpc_Read_U32: {
    uint32_t v;
    memcpy(&v, p, 4);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  case kLpc_Read_I32: {
    int32_t v;
    memcpy(&v, p, 4);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  case kLpc_Read_I64: {
    int64_t v;
    memcpy(&v, p, 8);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  case kLpc_Read_F64: {
    double v;
    memcpy(&v, p, 8);
    lua_pushnumber(L, v);
    return 1;
  }
  case kLpc_Read_F32: {
    float v;
    memcpy(&v, p, 4);
    lua_pushnumber(L, (lua_Number)v);
    return 1;
  }
  case kLpc_Read_String: {
    pc_StringView v;
    memcpy(&v, p, sizeof(v));
    lua_pushlstring(L, v.size ? v.data : "", v.size);
    return 1;
  }
  case kLpc_Read_Bool: lua_pushboolean(L, *p != 0); return 1;
  case kLpc_Read_Oneof: { /* a message member, or (LuaJIT) a 64-bit one */
    const pc_FieldDef *f = lpc_entry_field(lk, e);
    uint32_t c;
    memcpy(&c, msg + f->case_offset, sizeof(c));
    int set = c == (uint32_t)f->number;
    if (f->message != NULL) {
      if (set) return index_slow(L, lk, e, msg, kind);
      lua_pushnil(L);
      return 1;
    }
    pc_Value v;
    memset(&v, 0, sizeof(v)); /* unset: the zero value, its default */
    if (set) memcpy(&v, p, pc_Slot_Size(f->slot));
    lpc_push_scalar(L, f, v);
    return 1;
  }
  default: return index_slow(L, lk, e, msg, kind);
  }
}

/* -- v = m.name   (standalone message) */
int lpc_message_index(lua_State *L) {
  return index_common(L, kLpc_Standalone);
}

/* -- v = m.name   (view) */
int lpc_view_index(lua_State *L) {
  return index_common(L, kLpc_View);
}

/* The array or map of the field of container 'c': pc_Message_Get's value,
 * read from the slot when the field is no extension (a repeated or map
 * field has no has-bit and is in no oneof). */
static inline pc_Value container_value(const lpc_Container *c) {
  if (c->f->is_extension) return pc_Message_Get(c->msg, c->f);
  pc_Value v;
  /* a pointer, read as load (core/message/message.c) reads it */
  memcpy(&v, pc_Message_Slot(c->msg, c->f), sizeof(void *));
  return v;
}

void lpc_push_elem_key(lua_State *L, int c, int key) {
  key = lua_absindex(L, key);
  const lpc_Container *cont = lua_touserdata(L, c);
  if (!cont->f->is_map) { /* 1, 1.0 and (LuaJIT) 1LL name one element */
    lua_pushinteger(L, lpc_check_integer(L, cont->f->full_name, key));
    return;
  }
  const pc_FieldDef *kf = pc_FieldDef_MapKey(cont->f);
  if (pc_FieldDef_ElemSlot(kf) == kPc_Slot_String) { /* the very string: kept keys point into it */
    lua_pushvalue(L, key);
    return;
  }
  pc_Value k = lpc_check_scalar(L, kf, cont->f->full_name, key);
  if (lpc_key_is_cdata(kf, k)) /* LuaJIT: each cdata is a key of its own, the bits are not */
    lua_pushlstring(L, (const char *)&k.u64, sizeof k.u64);
  else
    lpc_push_key(L, kf, k);
}

/* Remembers the message object at 'v' (or forgets, when nil) as element
 * 'key' (a stack index) of the container at 'c'. */
int lpc_push_container_anchor(lua_State *L, int c) {
  lpc_Container *cont = lua_touserdata(L, c);
  lpc_get_known_uv(L, c, 1);
  if (!is_object_of(L, -1, cont->msg)) lpc_replaced_error(L);
  if (cont->kind == 0) cont->kind = kind_of_object(L, -1, cont->msg);
  return lpc_push_anchor_of(L, -1, cont->kind);
}

void lpc_keep_elem(lua_State *L, int c, int key, int v) {
  c = lua_absindex(L, c);
  key = lua_absindex(L, key);
  v = lua_absindex(L, v);
  const lpc_Container *cont = lua_touserdata(L, c);
  if (cont->f->is_extension) { /* no remembered container: keep by address */
    if (lua_isnil(L, v)) return;
    int a = lpc_push_container_anchor(L, c);
    lpc_set_ref(L, a, lpc_to_message(L, v, NULL), v);
    lua_settop(L, a - 2);
    return;
  }
  if (lua_getiuservalue(L, c, 2) != LUA_TTABLE) {
    lua_pop(L, 1);
    if (lua_isnil(L, v)) return;
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, c, 2);
  }
  lpc_push_elem_key(L, c, key);
  lua_pushvalue(L, v);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* Pushes element 'v' (of field 'ef', at Lua key 'key') of the container at
 * 'c': scalars as values, messages as the remembered object or a new view
 * remembered in the container's table of element objects (user value 2,
 * keyed by lpc_push_elem_key; made sized for at most kLpc_ElemsPresize
 * elements, which a big decoded container of untrusted size then grows
 * only as its elements are read). */
void lpc_push_elem(lua_State *L, int c, const pc_FieldDef *ef, pc_Value v, int key) {
  if (ef->message == NULL) {
    lpc_push_scalar(L, ef, v);
    return;
  }
  if (v.m == NULL) {
    lua_pushnil(L);
    return;
  }
  c = lua_absindex(L, c);
  key = lua_absindex(L, key);
  lpc_Container *cont = lua_touserdata(L, c);
  int elems = 0;
  if (!cont->f->is_extension) {
    if (lpc_get_known_uv(L, c, 2) == LUA_TTABLE) { /* a container: it has user values */
      lpc_push_elem_key(L, c, key);
      if (lua_rawget(L, -2) != LUA_TNIL && is_object_of(L, -1, v.m)) {
        lua_remove(L, -2);
        return;
      }
      lua_pop(L, 1);
    } else {
      lua_pop(L, 1);
      pc_Value all = container_value(cont);
      size_t n = cont->f->is_map ? (all.map ? all.map->size : 0) : (all.a ? all.a->size : 0);
      int size = n < kLpc_ElemsPresize ? (int)n : kLpc_ElemsPresize;
      lua_createtable(L, cont->f->is_map ? 0 : size, cont->f->is_map ? size : 0);
      lua_pushvalue(L, -1);
      lua_setiuservalue(L, c, 2);
    }
    elems = lua_gettop(L);
  }
  int a = lpc_push_container_anchor(L, c);
  if (elems == 0) {
    push_submessage(L, a, ef->message, v.m, v.m);
    lua_replace(L, a - 1);
    lua_settop(L, a - 1);
    return;
  }
  if (cont->uv < 0) cont->uv = lpc_view_uv(cont->f);
  push_child_view(L, a - 1, cont->kind, cont->uv, ef->message, v.m, a, NULL);
  lpc_push_elem_key(L, c, key);
  lua_pushvalue(L, -2);
  lua_rawset(L, elems);
  lua_replace(L, elems);
  lua_settop(L, elems);
}

/* -- Repeated containers ----------------------------------------------------- */

/* The container metamethods have their metatable as upvalue 1
 * (lpc_open_message): comparing with it is what luaL_checkudata's lookup
 * of the metatable by name would answer, for less. */
lpc_Container *lpc_check_container(lua_State *L, int idx, const char *mt) {
  void *p = lua_touserdata(L, idx);
  if (p != NULL && lua_getmetatable(L, idx)) {
    /* the addresses compared: lua_rawequal costs more */
    int same = lua_topointer(L, -1) == lua_topointer(L, lua_upvalueindex(1));
    lua_pop(L, 1);
    if (same) return p;
  }
  return luaL_checkudata(L, idx, mt);
}

/* Pushes the view of message 'm', element 'i' of the repeated container
 * 'c' at 1 (not an extension's): lpc_push_elem's path with the integer key
 * at hand (lpc_push_elem_key gives a repeated field's element that very
 * integer), the table of element objects (user value 2) read and written
 * by index. */
static void push_elem_view(lua_State *L, lpc_Container *c, size_t n, lua_Integer i, pc_Message *m) {
  int uvs = lpc_push_uvs(L, 1); /* the container has user values (left below the result) */
  int elems = lua_gettop(L) + 1, obj = elems + 1;
  if (lpc_get_uv(L, uvs, 2) == LUA_TTABLE) {
    if (lua_rawgeti(L, elems, i) != LUA_TNIL && is_object_of(L, -1, m)) return;
    obj++; /* what it read stays below the result */
  } else {
    lua_pop(L, 1);
    lua_createtable(L, n < kLpc_ElemsPresize ? (int)n : kLpc_ElemsPresize, 0);
    lua_pushvalue(L, -1);
    lpc_set_uv(L, uvs, 2);
  }
  lpc_push_uv(L, uvs, 1);
  /* its message object, checked as is_object_of does (the debug library
   * may have replaced it), without the call */
  const void *p = lua_touserdata(L, obj);
  if (p == NULL || (p != (const void *)c->msg && *(pc_Message *const *)p != c->msg))
    lpc_replaced_error(L);
  if (c->kind == 0) c->kind = p == (const void *)c->msg ? kLpc_Standalone : kLpc_View;
  /* the anchor (lpc_push_anchor_of's, the kind at hand; its element views
   * keep it, and check it where they use it) */
  if (c->kind == kLpc_View)
    lpc_push_known_uv(L, obj, 1);
  else
    lua_pushvalue(L, obj);
  if (c->uv < 0) c->uv = lpc_view_uv(c->f);
  c->elem_lk = push_child_view(L, obj, c->kind, c->uv, c->f->message, m, obj + 1, c->elem_lk);
  lua_pushvalue(L, -1);
  lua_rawseti(L, elems, i);
}

/* -- v = c[i]   (repeated; nil outside 1..#c) */
int lpc_repeated_index(lua_State *L) {
  lpc_Container *c = lua_touserdata(L, 1);
  if (c == NULL) lpc_arg_type_error(L, 1, "__index", LPC_REPEATED_MT);
  const pc_Array *arr = container_value(c).a;
  int isint;
  lua_Integer i = lua_tointegerx(L, 2, &isint); /* 1.0 reads element 1, as c[1.0] = v writes it */
  /* not the string "1" (Lua 5.4's lua_tointegerx takes it; LuaJIT's compat
   * one takes numbers alone, so the test is not made twice) */
  if (!isint || (!LPC_LUAJIT && lua_type(L, 2) != LUA_TNUMBER) || arr == NULL || i < 1 ||
      (size_t)i > arr->size)
    return 0;
  pc_Value v = pc_Array_Get(arr, (size_t)i - 1, pc_FieldDef_ElemSlot(c->f));
  if (c->f->message != NULL && v.m != NULL && !c->f->is_extension)
    push_elem_view(L, c, arr->size, i, v.m);
  else
    lpc_push_elem(L, 1, c->f, v, 2);
  return 1;
}

/* -- n = #c */
int lpc_container_len(lua_State *L) {
  /* lpc_check_self's test, the metatable left below the result */
  lpc_Container *c = lua_touserdata(L, 1);
  if (c == NULL || !lua_getmetatable(L, 1) ||
      lua_topointer(L, -1) != lua_topointer(L, lua_upvalueindex(1)))
    lpc_arg_type_error(L, 1, "__len", "protocall.Repeated or protocall.Map");
  pc_Value v = container_value(c);
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
  lpc_Container *c = lua_touserdata(L, 1);
  if (c == NULL) lpc_arg_type_error(L, 1, "__index", LPC_MAP_MT);
  const pc_FieldDef *kf = pc_FieldDef_MapKey(c->f), *vf = pc_FieldDef_MapValue(c->f);
  pc_Value k = lpc_check_scalar_lax(L, kf, c->f->full_name, 2); /* not UTF-8: not found */
  const pc_Value *v = pc_Map_Find(container_value(c).map, pc_FieldDef_ElemSlot(kf), k);
  if (v == NULL) return 0;
  lpc_push_elem(L, 1, vf, *v, 2);
  return 1;
}

/* Whether the value at 'idx' is a map container (its metatable the
 * one lpc_open_message registered). */
static int is_map(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lpc_map_mt_key);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same;
}

/* The iterator of lpc_map_pairs: upvalue 1 the keys as they were when
 * pairs began, upvalue 2 the position, upvalue 3 the address of the map
 * (a light userdata: the only map it takes as its argument 1); a key
 * deleted since is skipped, a value changed since reads as it is now
 * (Lua's rule for next: existing fields may be changed or cleared during
 * a traversal). The iterator holds no reference to the map, which the
 * loop's state holds: LuaJIT's traces keep each C closure they were
 * recorded with as a constant, so an iterator holding its map kept that
 * map's whole message tree (and arena) alive as long as the trace. */
static int lpc_map_next(lua_State *L) {
  if (lua_touserdata(L, 1) != lua_touserdata(L, lua_upvalueindex(3)) ||
      !is_map(L, 1)) /* f(other) of 'for k, v in f, c' */
    lpc_arg_error(L, 1, "the iterator of pairs", "the map pairs was called on expected");
  lpc_Container *c = lua_touserdata(L, 1);
  const pc_FieldDef *kf = pc_FieldDef_MapKey(c->f);
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf);
  lua_Integer i = lua_tointeger(L, lua_upvalueindex(2));
  lua_settop(L, 1);
  for (;;) {
    if (lua_rawgeti(L, lua_upvalueindex(1), ++i) == LUA_TNIL) return 0;
    const pc_Value *v =
        pc_Map_Find(container_value(c).map, ks, lpc_check_scalar_lax(L, kf, c->f->full_name, 2));
    if (v != NULL) {
      lua_pushinteger(L, i);
      lua_replace(L, lua_upvalueindex(2));
      lpc_push_elem(L, 1, pc_FieldDef_MapValue(c->f), *v, 2);
      return 2;
    }
    lua_pop(L, 1);
  }
}

/* The iterator of an empty map's pairs: entries added during the loop are
 * not visited (as lpc_map_next's). */
static int lpc_map_next_none(lua_State *L) {
  (void)L;
  return 0;
}

/* -- for k, v in pairs(c)   (map: in the order of its entries; entries may
 * be changed or deleted during the loop, as in a Lua table) */
int lpc_map_pairs(lua_State *L) {
  lpc_Container *c = lpc_check_container(L, 1, LPC_MAP_MT);
  const pc_Map *map = container_value(c).map;
  const pc_FieldDef *kf = pc_FieldDef_MapKey(c->f);
  size_t n = map != NULL ? map->size : 0;
  if (n == 0) {
    lua_pushcfunction(L, lpc_map_next_none);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
  }
  lua_createtable(L, n < INT32_MAX ? (int)n : 0, 0);
  for (size_t i = 0; i < n; i++) {
    lpc_push_key(L, kf, map->entries[i].key);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushinteger(L, 0);
  lua_pushlightuserdata(L, c);
  lua_pushcclosure(L, lpc_map_next, 3);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}
