/* Messages as Lua values, writing: the per-type __newindex (plain slots
 * stored directly, the rest through lpc_set_field), T{...} (one pass over
 * the table, cycles refused), filling repeated and map fields from Lua
 * tables, and the writing side of the containers (__newindex). Every value
 * is checked before the message changes. */
#include "lpc_message.h"

#include <lauxlib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static char kVisitKey; /* registry: tables being converted (cycle check) */

/* A place below the first table of a conversion (lpc_message.h): field 'f'
 * of the message at 'up' (NULL: the first), element 'i' (1-based, as Lua
 * counts) of it when a list's, or the entry under the key at stack index
 * 'key' when a map's (0: none). Frames live on the C stack of the
 * functions that descend; nothing is made of them unless an error is
 * raised below. */
struct lpc_Path {
  const lpc_Path *up;
  const pc_FieldDef *f;
  lua_Integer i;
  int key;
};

static void construct(lua_State *L, int type, int t, lpc_Build *visited);

static const char *push_place(lua_State *L, const lpc_Path *p);

/* Pushes the name of field 'f' of the message at place 'at' (NULL: the
 * first of the conversion, whose fields errors name by their full names,
 * "demo.T.ins"), "demo.T.ins[2].v" below it, and returns it. */
static const char *push_field_name(lua_State *L, const lpc_Path *at, const pc_FieldDef *f) {
  if (at == NULL) {
    lua_pushstring(L, f->full_name);
    return f->full_name;
  }
  push_place(L, at);
  const char *s = lua_pushfstring(L, "%s.%s", lua_tostring(L, -1), f->name);
  lua_remove(L, -2);
  return s;
}

/* Replaces the name at the top with that of its element 'i' (1-based, as
 * Lua counts), and returns it: "demo.T.ids[2]" for i = 3, counted from 0
 * as every path of a message's problems is (the encoder's, the required
 * fields', JSON's, protovalidate's), as the C++ library's
 * FindInitializationErrors counts. */
static const char *add_index(lua_State *L, lua_Integer i) {
  const char *s = lua_pushfstring(L, "%s[%I]", lua_tostring(L, -1), i - 1);
  lua_remove(L, -2);
  return s;
}

/* Replaces the name at the top with that of its entry under the key at
 * 'key' (an absolute index), "demo.T.labels[\"k\"]" (NUL bytes shown \0)
 * or "demo.T.counts[5]", and returns it. */
static const char *add_key(lua_State *L, int key) {
  const char *shown;
  if (lua_type(L, key) == LUA_TSTRING) {
    shown = lpc_push_shown(L, key);
    lua_pushfstring(L, "%s[\"%s\"]", lua_tostring(L, -2), shown);
  } else {
    shown = luaL_tolstring(L, key, NULL);
    lua_pushfstring(L, "%s[%s]", lua_tostring(L, -2), shown);
  }
  lua_replace(L, -3); /* the name, then the shown key, go */
  lua_pop(L, 1);
  return lua_tostring(L, -1);
}

/* Pushes the name of place 'p', "demo.T.ins[1]" (add_index), and returns it. */
static const char *push_place(lua_State *L, const lpc_Path *p) {
  luaL_checkstack(L, 4, "message nesting too deep");
  push_field_name(L, p->up, p->f);
  if (p->key != 0) return add_key(L, p->key);
  if (p->i != 0) return add_index(L, p->i);
  return lua_tostring(L, -1);
}

/* The name errors give field 'f' of the message 'visited' is converting:
 * its full name in the first (nothing pushed), else its path, pushed. */
static const char *field_name(lua_State *L, const lpc_Build *visited, const pc_FieldDef *f) {
  if (visited->path == NULL) return f->full_name;
  return push_field_name(L, visited->path, f);
}

/* lpc_check_scalar of the value at 'v' for field 'f' of the message
 * 'visited' is converting, an error naming the field's path; the path is
 * made only for a value lpc_is_plain_scalar does not take as it is (which
 * has checked a string's UTF-8 then). */
static pc_Value check_field_scalar(lua_State *L, const lpc_Build *visited, const pc_FieldDef *f,
                                   int v) {
  if (visited->path == NULL) return lpc_check_scalar(L, f, f->full_name, v);
  if (lpc_is_plain_scalar(L, f, v)) return lpc_check_scalar_lax(L, f, f->full_name, v);
  v = lua_absindex(L, v);
  pc_Value x = lpc_check_scalar(L, f, push_field_name(L, visited->path, f), v);
  lua_pop(L, 1); /* (a string value points into the one at 'v') */
  return x;
}

/* The message of type 'def' for place 'at' (a field, element or entry)
 * from the value at 'idx' (a message of that type, or a table to construct
 * one from, errors below naming their paths from 'at'); pushes its
 * object. */
static pc_Message *check_message(lua_State *L, const pc_MessageDef *def, int idx,
                                 lpc_Build *visited, const lpc_Path *at) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TTABLE) {
    /* Checked on the way down: the recursion below is C's. (Named by the
     * field, not a path of PC_MESSAGE_MAX_DEPTH steps.) */
    if (visited->depth >= PC_MESSAGE_MAX_DEPTH)
      lpc_msg_error(L, "%s: tables nested deeper than %d levels", at->f->full_name,
                    PC_MESSAGE_MAX_DEPTH);
    luaL_checkstack(L, 20, "message nesting too deep");
    lpc_push_type(L, def);
    int type = lua_gettop(L);
    const lpc_Path *up = visited->path;
    visited->depth++;
    visited->path = at;
    construct(L, type, idx, visited);
    visited->path = up;
    visited->depth--;
    lua_remove(L, type);
    return lua_touserdata(L, -1);
  }
  const pc_MessageDef *d = NULL;
  pc_Message *m = lpc_to_message(L, idx, &d);
  if (m == NULL || d != def) lpc_message_type_error(L, push_place(L, at), def, idx);
  lua_pushvalue(L, idx);
  return m;
}

/* Refuses storing 'value' (type 'vdef') one level below 'target' when
 * 'target' is inside it, or when 'target' would then nest deeper than
 * PC_MESSAGE_MAX_DEPTH levels below it (as encoding would later refuse it):
 * the walk the cycle check makes anyway stops there. */
void lpc_check_no_cycle(lua_State *L, const char *name, const pc_Message *value,
                        const pc_MessageDef *vdef, const pc_Message *target) {
  int r = pc_Message_ContainsWithin(value, vdef, target, PC_MESSAGE_MAX_DEPTH - 1);
  if (r == 1) lpc_msg_error(L, "%s: a message cannot contain itself", name);
  if (r == 2)
    lpc_msg_error(L, "%s: the message would nest deeper than %d levels", name,
                  PC_MESSAGE_MAX_DEPTH);
}

/* lpc_check_no_cycle for the message 'value' stored in field 'f' (its
 * type 'f->message') of 'target', the message 'visited' is converting: the
 * error names the field's path, made only when it raises. */
static void check_no_cycle_at(lua_State *L, const lpc_Build *visited, const pc_FieldDef *f,
                              const pc_Message *value, const pc_Message *target) {
  if (visited->path == NULL) {
    lpc_check_no_cycle(L, f->full_name, value, f->message, target);
  } else if (pc_Message_ContainsWithin(value, f->message, target, PC_MESSAGE_MAX_DEPTH - 1)) {
    lpc_check_no_cycle(L, push_field_name(L, visited->path, f), value, f->message, target);
  }
}

/* Pushes the object of a message element at place 'at' (field 'f' the
 * element's, from the value at 'idx': a message, or a table to construct
 * one from), refusing cycles through 'target'. */
static pc_Message *elem_object(lua_State *L, const pc_FieldDef *f, int idx, pc_Message *target,
                               lpc_Build *visited, const lpc_Path *at) {
  pc_Message *m = check_message(L, f->message, idx, visited, at);
  check_no_cycle_at(L, visited, f, m, target);
  return m;
}

/* Whether the table at 't' is a proxy: a metatable and no entries of its
 * own. T{...} reads a proxy through its metamethods (a message's declared
 * fields through __index, a list through __len and __index, a map through
 * __pairs); tables with entries are read raw, as pc.encode(T, table) reads
 * them. */
static int is_proxy(lua_State *L, int t) {
  if (!lua_getmetatable(L, t)) return 0;
  lua_pop(L, 1);
  lua_pushnil(L);
  if (!lua_next(L, t)) return 1;
  lua_pop(L, 2);
  return 0;
}

/* Pushes the name of element 'i' (1-based, as Lua counts) of list field
 * 'f' of the message 'visited' is converting, "demo.T.ids[2]" for i = 3
 * (add_index), and returns it. */
static const char *push_elem_name(lua_State *L, const lpc_Build *visited, const pc_FieldDef *f,
                                  lua_Integer i) {
  push_field_name(L, visited->path, f);
  return add_index(L, i);
}

/* Pushes the name of the entry under the key at 'key' of map field 'f' of
 * the message 'visited' is converting, "demo.T.labels[\"k\"]" or
 * "demo.T.counts[5]", and returns it. */
static const char *push_entry_name(lua_State *L, const lpc_Build *visited, const pc_FieldDef *f,
                                   int key) {
  key = lua_absindex(L, key);
  push_field_name(L, visited->path, f);
  return add_key(L, key);
}

/* Checks the scalar at 'idx' as element 'i' of list field 'f': an error
 * names the element (the name made only for a value that is not plain). */
static void check_elem(lua_State *L, const lpc_Build *visited, const pc_FieldDef *f, lua_Integer i,
                       int idx) {
  if (lpc_is_plain_scalar(L, f, idx)) return;
  idx = lua_absindex(L, idx);
  lpc_check_scalar(L, f, push_elem_name(L, visited, f, i), idx);
  lua_pop(L, 1);
}

/* Whether the value at 'idx' is a table or a message of 'def' (what a
 * message element or entry may be given). */
static int is_message_value(lua_State *L, const pc_MessageDef *def, int idx) {
  const pc_MessageDef *d = NULL;
  return lua_type(L, idx) == LUA_TTABLE || (lpc_to_message(L, idx, &d) != NULL && d == def);
}

/* Checks the key at 'key' and the scalar value at 'value' (when
 * 'value_field' is not NULL) of an entry of map field 'f': an error names
 * the entry, and says when the key is what is wrong. */
static void check_entry(lua_State *L, const lpc_Build *visited, const pc_FieldDef *f, int key,
                        const pc_FieldDef *value_field, int value) {
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f);
  int key_ok = lpc_is_plain_scalar(L, kf, key);
  if (key_ok && (value_field == NULL || lpc_is_plain_scalar(L, value_field, value))) return;
  key = lua_absindex(L, key);
  value = lua_absindex(L, value);
  push_entry_name(L, visited, f, key);
  if (!key_ok) {
    lua_pushfstring(L, "%s: key", lua_tostring(L, -1));
    lpc_check_scalar(L, kf, lua_tostring(L, -1), key);
    lua_pop(L, 1);
  }
  if (value_field != NULL) lpc_check_scalar(L, value_field, lua_tostring(L, -1), value);
  lua_pop(L, 1);
}

/* Whether the string or bytes elements of container field 'f' point into
 * the Lua strings its container keeps (user value 2, by index or key), so
 * overwriting an element frees the old bytes with the old string instead
 * of leaving a copy in the arena. Extensions, which have no remembered
 * container, copy into the arena. */
static int kept_string(const pc_FieldDef *container, const pc_FieldDef *ef) {
  return !container->is_extension && (ef->type == kPc_Type_String || ef->type == kPc_Type_Bytes);
}

/* Element 'i' (1-based) of the list at 'src' as a value for the array: the
 * element objects of messages, and the strings, come from the table at
 * 'objs' (the strings pass 1 checked: a proxy's __index is not asked
 * again). */
static pc_Value array_value(lua_State *L, const pc_FieldDef *f, int src, lua_Integer i, int objs,
                            pc_Arena *arena) {
  pc_Value v;
  memset(&v, 0, sizeof(v));
  if (f->message != NULL) {
    lua_rawgeti(L, objs, i);
    v.m = lpc_to_message(L, -1, NULL);
    lua_pop(L, 1);
    return v;
  }
  if (f->type == kPc_Type_String || f->type == kPc_Type_Bytes) {
    lua_rawgeti(L, objs, i); /* a kept string stays in 'objs', the container's */
    v.s.data = lua_tolstring(L, -1, &v.s.size);
    if (!kept_string(f, f) && !pc_StringView_Copy(&v.s, v.s.data, v.s.size, arena)) lpc_nomem(L);
    lua_pop(L, 1);
    return v;
  }
  lua_geti(L, src, i);
  v = lpc_check_scalar(L, f, f->full_name, -1);
  lua_pop(L, 1);
  return v;
}

/* Replaces the elements of the repeated field of the container at 'c' with
 * the list at 'src' (a table or a repeated container of the same element
 * type). Everything is checked before the field changes; the array's
 * storage is reused when it is large enough. */
static void fill_array(lua_State *L, int c, int src, lpc_Build *visited) {
  c = lua_absindex(L, c);
  src = lua_absindex(L, src);
  const lpc_Container *cont = lua_touserdata(L, c);
  pc_Message *msg = cont->msg;
  const pc_FieldDef *f = cont->f;
  lua_Integer n = 0;
  if (lua_type(L, src) == LUA_TTABLE && lua_rawlen(L, src) == 0 && is_proxy(L, src)) {
    /* its # and its elements as __len and __index answer them */
    n = luaL_len(L, src);
    if (lua_geti(L, src, n + 1) != LUA_TNIL)
      lpc_msg_error(L, "%s: list expected, got a table with element %I beyond its # (%I)",
                    field_name(L, visited, f), n + 1, n);
    lua_pop(L, 1);
  } else if (lua_type(L, src) == LUA_TTABLE) {
    n = (lua_Integer)lua_rawlen(L, src);
    lua_Integer count = 0;
    lua_pushnil(L);
    while (lua_next(L, src)) {
      count++;
      if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1 || lua_tointeger(L, -2) > n) {
        int key = lua_absindex(L, -2);
        const char *name = field_name(L, visited, f);
        if (lua_isinteger(L, key) && lua_tointeger(L, key) > n)
          lpc_msg_error(L, "%s: list expected, got a table with key %I beyond its # (%I)", name,
                        lua_tointeger(L, key), n);
        if (lua_type(L, key) == LUA_TSTRING) /* quoted: "3" is no 3 */
          lpc_msg_error(L, "%s: list expected, got a table with key \"%s\"", name,
                        lpc_push_shown(L, key));
        lpc_msg_error(L, "%s: list expected, got a table with key %s", name,
                      luaL_tolstring(L, key, NULL));
      }
      lua_pop(L, 1);
    }
    if (count != n) {
      lua_Integer hole = 1;
      while (lua_rawgeti(L, src, hole) != LUA_TNIL) {
        lua_pop(L, 1);
        hole++;
      }
      lpc_msg_error(L, "%s: list expected, got a table with a hole at element %I within its # (%I)",
                    field_name(L, visited, f), hole, n);
    }
  } else {
    const lpc_Container *other = luaL_testudata(L, src, LPC_REPEATED_MT);
    if (other == NULL || other->f->type != f->type || other->f->message != f->message ||
        other->f->enumdef != f->enumdef)
      lpc_msg_error(L, "%s: list expected, got %s", field_name(L, visited, f),
                    lpc_type_name(L, src));
    n = luaL_len(L, src);
  }
  /* Pass 1: check every element; message objects and strings into a new
   * table. */
  int keep = f->message != NULL || f->type == kPc_Type_String || f->type == kPc_Type_Bytes;
  lua_createtable(L, keep ? (int)n : 0, 0);
  int objs = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, src, i);
    if (f->message != NULL) {
      if (!is_message_value(L, f->message, -1)) {
        int v = lua_absindex(L, -1);
        lpc_message_type_error(L, push_elem_name(L, visited, f, i), f->message, v);
      }
      lpc_Path at = {visited->path, f, i, 0};
      elem_object(L, f, -1, msg, visited, &at);
      lua_rawseti(L, objs, i);
    } else {
      check_elem(L, visited, f, i, -1); /* a string stays a string */
      if (keep) {
        lua_pushvalue(L, -1);
        lua_rawseti(L, objs, i);
      }
    }
    lua_pop(L, 1);
  }
  /* Pass 2: store. */
  int a = lpc_push_container_anchor(L, c); /* (its message object checked: the debug library) */
  lpc_ArenaBox *h = lpc_anchor_arena(L, a);
  pc_Array *arr = pc_Message_MutableArray(msg, f, h->arena);
  size_t elem = pc_FieldDef_ElemSize(f);
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  if (arr == NULL) {
    lpc_nomem(L);
    return; /* (lpc_nomem raises) */
  }
  if (arr->cap < (size_t)n) {
    pc_Array fresh = {NULL, 0, 0}; /* new storage: the old values stay readable from 'src' */
    if (!pc_Array_Resize(&fresh, (size_t)n, elem, h->arena)) lpc_nomem(L);
    for (lua_Integer i = 1; i <= n; i++)
      pc_Array_Set(&fresh, (size_t)i - 1, slot, array_value(L, f, src, i, objs, h->arena));
    *arr = fresh;
  } else {
    /* Values first (src may be this very field), then the stores. */
    for (lua_Integer i = 1; i <= n; i++) {
      pc_Value v = array_value(L, f, src, i, objs, h->arena);
      if ((size_t)i > arr->size) arr->size = (size_t)i;
      pc_Array_Set(arr, (size_t)i - 1, slot, v);
    }
    arr->size = (size_t)n;
  }
  if (f->is_extension) {
    for (lua_Integer i = 1; i <= n && f->message != NULL; i++) {
      lua_rawgeti(L, objs, i);
      lpc_set_ref(L, a, lpc_to_message(L, -1, NULL), -1);
      lua_pop(L, 1);
    }
  } else {
    lua_pushvalue(L, objs);
    lua_setiuservalue(L, c, 2);
  }
  lpc_pace(L, h);
  lua_settop(L, objs - 1);
}

/* LuaJIT: raises when two keys of the table at 'src' for the integer-keyed
 * map field 'f' (key field 'kf') are one key of the map: a number, an
 * int64_t / uint64_t cdata and a decimal string can name the same integer
 * (1, 1LL, "1"), and the map would keep one of their values, the one
 * lua_next met last. Tables whose keys are all numbers pass at once:
 * distinct numbers are distinct integers. */
static void check_key_aliases(lua_State *L, const lpc_Build *visited, int src, const pc_FieldDef *f,
                              const pc_FieldDef *kf, pc_SlotKind ks) {
  int plain = 1;
  lua_pushnil(L);
  while (plain && lua_next(L, src)) {
    lua_pop(L, 1);
    plain = lua_type(L, -1) == LUA_TNUMBER;
  }
  if (plain) return;
  lua_pop(L, 1); /* the key lua_next stopped at */
  lua_newtable(L);
  int seen = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, src)) {
    lua_pop(L, 1);
    pc_Value k = lpc_check_scalar(L, kf, f->full_name, -1);
    uint64_t bits = ks == kPc_Slot_32 ? k.u32 : k.u64;
    lua_pushlstring(L, (const char *)&bits, sizeof bits);
    if (lua_rawget(L, seen) != LUA_TNIL) {
      char text[32];
      int is_signed = kf->type != kPc_Type_Uint64 && kf->type != kPc_Type_Fixed64 &&
                      kf->type != kPc_Type_Uint32 && kf->type != kPc_Type_Fixed32;
      if (is_signed)
        snprintf(text, sizeof text, "%" PRId64,
                 ks == kPc_Slot_32 ? (int64_t)k.i32 : (int64_t)k.u64);
      else
        snprintf(text, sizeof text, "%" PRIu64, bits);
      lpc_msg_error(L,
                    "%s: two keys of the table are map key %s (LuaJIT: a number, an int64_t or "
                    "uint64_t cdata and a decimal string may name one integer)",
                    field_name(L, visited, f), text);
    }
    lua_pop(L, 1);
    lua_pushlstring(L, (const char *)&bits, sizeof bits);
    lua_pushboolean(L, 1);
    lua_rawset(L, seen);
  }
  lua_pop(L, 1);
}

/* Replaces the entries of the map field of the container at 'c' with the
 * table (or map container of the same type) at 'src'; checked first. */
static void fill_map(lua_State *L, int c, int src, lpc_Build *visited) {
  c = lua_absindex(L, c);
  src = lua_absindex(L, src);
  const lpc_Container *cont = lua_touserdata(L, c);
  pc_Message *msg = cont->msg;
  const pc_FieldDef *f = cont->f, *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf);
  if (lua_type(L, src) == LUA_TTABLE && is_proxy(L, src)) {
    if (luaL_getmetafield(L, src, "__pairs") != LUA_TNIL) {
      /* its entries as its __pairs gives them, into a plain table */
      lua_pushvalue(L, src);
      lua_call(L, 1, 3);
      lua_newtable(L);
      lua_replace(L, src);
      for (;;) {
        lua_pushvalue(L, -3);
        lua_pushvalue(L, -3);
        lua_pushvalue(L, -3);
        lua_call(L, 2, 2);
        if (lua_isnil(L, -2)) break;
        lua_pushvalue(L, -2);
        lua_replace(L, -4); /* the control variable */
        lua_rawset(L, src);
      }
      lua_pop(L, 5);
    } else if (luaL_getmetafield(L, src, "__index") != LUA_TNIL) {
      lpc_msg_error(L, "%s: table without entries whose __index cannot be listed (no __pairs)",
                    field_name(L, visited, f));
    }
  }
  if (lua_type(L, src) != LUA_TTABLE) {
    const lpc_Container *other = luaL_testudata(L, src, LPC_MAP_MT);
    if (other == NULL || other->f->message != f->message) {
      lpc_msg_error(L, "%s: table expected, got %s", field_name(L, visited, f),
                    lpc_type_name(L, src));
      return; /* (lpc_msg_error raises) */
    }
    lua_newtable(L); /* copy through a plain table: src may be this very map */
    const pc_Map *m = pc_Message_Get(other->msg, other->f).map;
    for (size_t i = 0; m != NULL && i < m->size; i++) {
      lpc_push_key(L, kf, m->entries[i].key);
      lpc_push_elem(L, src, vf, m->entries[i].value, -1);
      lua_rawset(L, -3);
    }
    lua_replace(L, src);
  }
  /* Pass 1: check keys and values; by key (lpc_push_elem_key), message
   * objects, kept string values, and 'true' for the other values of string
   * keys (the table's key is then the string the entry's key points into). */
  int keep_key = kept_string(f, kf), keep_value = kept_string(f, vf);
  lua_newtable(L);
  int objs = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, src)) {
    check_entry(L, visited, f, -2, vf->message != NULL ? NULL : vf, -1);
    if (vf->message != NULL) {
      int key = lua_absindex(L, -2);
      if (!is_message_value(L, vf->message, -1)) {
        int v = lua_absindex(L, -1);
        lpc_message_type_error(L, push_entry_name(L, visited, f, key), vf->message, v);
      }
      lpc_Path at = {visited->path, f, 0, key};
      elem_object(L, vf, -1, msg, visited, &at);
      lpc_push_elem_key(L, c, -3);
      lua_insert(L, -2);
      lua_rawset(L, objs);
    } else {
      if (keep_key || keep_value) {
        lpc_push_elem_key(L, c, -2);
        if (keep_value)
          lua_pushvalue(L, -2);
        else
          lua_pushboolean(L, 1);
        lua_rawset(L, objs);
      }
    }
    lua_pop(L, 1);
  }
  if (LPC_LUAJIT && (ks == kPc_Slot_32 || ks == kPc_Slot_64))
    check_key_aliases(L, visited, src, f, kf, ks);
  if (vf->message != NULL) {
    /* The metamethods pass 1 ran (a proxy value's) may have added keys to
     * 'src': each key needs the object pass 1 made for it (and checked). */
    lua_pushnil(L);
    while (lua_next(L, src)) {
      lua_pop(L, 1);
      lpc_push_elem_key(L, c, -1);
      if (lua_rawget(L, objs) == LUA_TNIL)
        lpc_msg_error(L, "%s: table changed while it was read (a key added by a metamethod)",
                      field_name(L, visited, f));
      lua_pop(L, 1);
    }
  }
  /* Pass 2: store into the emptied map. */
  int a = lpc_push_container_anchor(L, c); /* (its message object checked: the debug library) */
  lpc_ArenaBox *h = lpc_anchor_arena(L, a);
  pc_Map *map = pc_Message_MutableMap(msg, f, h->arena);
  if (map == NULL) lpc_nomem(L);
  pc_Map_Clear(map);
  lua_pushnil(L);
  while (lua_next(L, src)) { /* (keys and values checked by pass 1) */
    pc_Value k = lpc_check_scalar_lax(L, kf, f->full_name, -2), v;
    if (ks == kPc_Slot_String && !keep_key &&
        !pc_StringView_Copy(&k.s, k.s.data, k.s.size, h->arena))
      lpc_nomem(L);
    if (vf->message != NULL) {
      memset(&v, 0, sizeof(v));
      lpc_push_elem_key(L, c, -2);
      lua_rawget(L, objs);
      v.m = lpc_to_message(L, -1, NULL);
      lua_pop(L, 1);
    } else {
      v = lpc_check_scalar_lax(L, vf, f->full_name, -1);
      if ((vf->type == kPc_Type_String || vf->type == kPc_Type_Bytes) && !keep_value &&
          !pc_StringView_Copy(&v.s, v.s.data, v.s.size, h->arena))
        lpc_nomem(L);
    }
    if (pc_Map_Set(map, ks, k, v, h->arena) == NULL) lpc_nomem(L);
    lua_pop(L, 1);
  }
  lua_pushvalue(L, objs);
  lua_setiuservalue(L, c, 2);
  lpc_pace(L, h);
  lua_settop(L, objs - 1);
}

void lpc_clear_field(lua_State *L, int obj, int a, int c, pc_Message *msg, const pc_FieldDef *f) {
  int top = lua_gettop(L);
  if (f->label == kPc_Label_Repeated) { /* emptied, its storage kept for reuse */
    if (!f->is_extension) {
      if (c == 0) {
        lpc_push_container(L, obj, msg, f);
        c = lua_gettop(L);
      }
      lua_pushnil(L);
      lua_setiuservalue(L, c, 2);
    }
    pc_Value v = pc_Message_Get(msg, f);
    if (f->is_map) {
      if (v.map != NULL) pc_Map_Clear(v.map);
    } else if (v.a != NULL) {
      v.a->size = 0;
    }
  } else if (f->case_offset == 0 || pc_Message_Has(msg, f)) {
    /* (a oneof member that is not the one set has nothing to clear, and its
     * slot, shared by every member, holds the set member's reference) */
    if ((f->message != NULL || f->type == kPc_Type_String || f->type == kPc_Type_Bytes) &&
        !f->is_extension) {
      if (a == 0) a = lpc_push_anchor(L, obj);
      lua_pushnil(L);
      lpc_set_ref(L, a, pc_Message_Slot(msg, f), -1);
    }
    pc_Message_ClearField(msg, f);
  }
  lua_settop(L, top);
}

/* -- Writing --------------------------------------------------------------- */

/* m[f] = value at 'v' for the message object at 'obj'. */
void lpc_set_field(lua_State *L, int obj, pc_Message *msg, const pc_FieldDef *f, int v,
                   lpc_Build *visited) {
  obj = lua_absindex(L, obj);
  v = lua_absindex(L, v);
  int singular_string = f->label != kPc_Label_Repeated && !f->is_extension &&
                        (f->type == kPc_Type_String || f->type == kPc_Type_Bytes);
  if (lua_isnil(L, v)) {
    lpc_clear_field(L, obj, 0, 0, msg, f);
    return;
  }
  if (f->label == kPc_Label_Repeated) {
    if (f->is_extension) {
      int a = lpc_push_anchor(L, obj);
      if (pc_Message_MutableArray(msg, f, lpc_anchor_arena(L, a)->arena) == NULL) lpc_nomem(L);
      lua_settop(L, a - 1);
    }
    lpc_push_container(L, obj, msg, f);
    if (f->is_map)
      fill_map(L, -1, v, visited);
    else
      fill_array(L, -1, v, visited);
    lua_pop(L, 1);
    return;
  }
  int scalar = f->label != kPc_Label_Repeated && f->message == NULL && f->type != kPc_Type_String &&
               f->type != kPc_Type_Bytes;
  if (scalar && !f->is_extension) {
    pc_Message_Set(msg, f, check_field_scalar(L, visited, f, v));
    return;
  }
  if (singular_string) {
    /* The slot points into the Lua string, which the anchor keeps (under
     * the slot's address, so overwriting a field in a loop holds only the
     * last string, and needs no arena). */
    pc_Value val = check_field_scalar(L, visited, f, v);
    int a = lpc_push_anchor(L, obj);
    lpc_set_ref(L, a, pc_Message_Slot(msg, f), v);
    pc_Message_Set(msg, f, val);
    lua_settop(L, a - 1);
    return;
  }
  int a = lpc_push_anchor(L, obj);
  lpc_ArenaBox *h = NULL;
  pc_Arena *arena = NULL;
  if (f->message == NULL || f->is_extension) {
    h = lpc_anchor_arena(L, a);
    arena = h->arena;
  }
  pc_Value val;
  memset(&val, 0, sizeof(val));
  if (f->message != NULL) {
    lpc_Path at = {visited->path, f, 0, 0};
    val.m = check_message(L, f->message, v, visited, &at);
    check_no_cycle_at(L, visited, f, val.m, msg);
    lpc_set_ref(L, a, f->is_extension ? (const void *)val.m : pc_Message_Slot(msg, f), -1);
    lua_pop(L, 1);
  } else {
    val = check_field_scalar(L, visited, f, v);
    if ((f->type == kPc_Type_String || f->type == kPc_Type_Bytes) &&
        !pc_StringView_Copy(&val.s, val.s.data, val.s.size, arena))
      lpc_nomem(L);
  }
  if (f->is_extension) {
    pc_Value *cell = pc_Message_MutableExtension(msg, f, arena);
    if (cell == NULL) {
      lpc_nomem(L);
      return;
    }
    *cell = val;
  } else {
    pc_Message_Set(msg, f, val);
  }
  if (h != NULL) lpc_pace(L, h);
  lua_settop(L, a - 1);
}

/* m[key] = value at 3 for the message 'msg', when store_plain did not
 * take it. */
static void newindex_slow(lua_State *L, const lpc_Lookup *lk, const lpc_LookupEntry *e,
                          pc_Message *msg) {
  const pc_FieldDef *f = e ? lpc_entry_field(lk, e) : lpc_lookup_slow(L, lk->def, 2);
  if (lpc_plain_slot(f) && !lua_isnil(L, 3)) {
    pc_Value v = lpc_check_scalar(L, f, f->full_name, 3);
    memcpy((char *)msg + f->offset, &v, pc_Slot_Size(f->slot));
    return;
  }
  lpc_Build visited = {0, 0, NULL};
  lpc_set_field(L, 1, msg, f, 3, &visited);
}

LPC_INLINE void newindex_common(lua_State *L, int kind) {
  const lpc_Lookup *lk = lua_touserdata(L, lua_upvalueindex(1));
  char *msg = lpc_msg_at1(L, kind);
  if (msg == NULL) lpc_arg_type_error(L, 1, "__newindex", lk->def->full_name);
  const lpc_LookupEntry *e = lpc_probe(lk, lua_topointer(L, 2));
  if (e != NULL && lpc_store_plain(L, msg, e, 3)) return;
  newindex_slow(L, lk, e, msg);
}

/* -- m.name = v   (standalone message) */
int lpc_message_newindex(lua_State *L) {
  newindex_common(L, kLpc_Standalone);
  return 0;
}

/* -- m.name = v   (view) */
int lpc_view_newindex(lua_State *L) {
  newindex_common(L, kLpc_View);
  return 0;
}

/* Marks (on = 1) or unmarks the table at 't' as being converted; with
 * on = -1 only checks. Returns whether it was marked. The table of marks
 * lives in the registry; the first mark of a top-level conversion
 * (visited->marks == 0) starts a fresh one, so marks left by a conversion
 * that raised are forgotten. */
static int visit(lua_State *L, int t, int on, lpc_Build *visited) {
  if (visited->marks == 0) {
    if (on != 1) return 0;
    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &kVisitKey);
    visited->marks = 1;
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kVisitKey);
  lua_pushvalue(L, t);
  int was = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 1);
  if (on >= 0) {
    lua_pushvalue(L, t);
    if (on)
      lua_pushboolean(L, 1);
    else
      lua_pushnil(L);
    lua_rawset(L, -3);
  }
  lua_pop(L, 1);
  return was;
}

/* Pushes a plain copy of the proxy at 't' given for a message of 'def':
 * each declared field as lua_getfield reads it (its __index answers, as
 * lua-protobuf's encode_order reads fields). */
static void read_proxy(lua_State *L, const pc_MessageDef *def, int t) {
  lua_newtable(L);
  for (uint32_t i = 0; i < def->field_count; i++) {
    const char *name = def->fields[i].name;
    if (lua_getfield(L, t, name) != LUA_TNIL)
      lua_setfield(L, -2, name);
    else
      lua_pop(L, 1);
  }
}

/* The field of 'def' named by the key at 'key' of a table 'visited'
 * converts (lpc_lookup_slow: raises when there is none, naming the
 * table's place). */
static const pc_FieldDef *lookup_field(lua_State *L, const pc_MessageDef *def, int key,
                                       const lpc_Build *visited) {
  if (visited->path == NULL) return lpc_lookup_slow(L, def, key);
  const pc_FieldDef *f = lpc_find_field(L, def, key);
  if (f == NULL) {
    key = lua_absindex(L, key);
    lpc_no_field(L, push_place(L, visited->path), key);
  }
  return f;
}

/* Raises when the oneof of 'f' (a member given a value by the table
 * 'visited' is converting into the new message 'msg' of 'def') already
 * has a member set: by another key of the same table, whichever order
 * pairs visits them in. The error names the members by field number,
 * "demo.T: oneof o set twice (by a and b)", in pc.from_json's words. */
static void check_one_member(lua_State *L, const pc_MessageDef *def, const pc_Message *msg,
                             const pc_FieldDef *f, const lpc_Build *visited) {
  const pc_FieldDef *other = pc_Message_WhichOneof(msg, f->oneof);
  if (other == NULL) return;
  const pc_FieldDef *lo = other->number < f->number ? other : f;
  const pc_FieldDef *hi = lo == f ? other : f;
  lpc_msg_error(L, "%s: oneof %s set twice (by %s and %s)",
                visited->path ? push_place(L, visited->path) : def->full_name, f->oneof->name,
                lo->name, hi->name);
}

/* Pushes a new standalone message filled from the table at 't'; 'type' is
 * the index of its Type (whose user value 2 is the instance metatable).
 * One pass over the table: each key is found by its string's address and
 * plain slots take their values directly; the one allocation is the
 * message's block. */
static void construct(lua_State *L, int type, int t, lpc_Build *visited) {
  const lpc_TypeBox *box = lua_touserdata(L, type);
  const pc_MessageDef *def = box->def;
  const lpc_Lookup *lk = box->lookup;
  if (visited->marks && visit(L, t, -1, visited))
    lpc_msg_error(L, "%s: table with a cycle given to the constructor",
                  visited->path ? push_place(L, visited->path) : def->full_name);
  int proxy = 0, any;
  char *msg = lua_newuserdatauv(L, def->size, lk->standalone_uv);
  pc_Message_Init(def, msg);
  lua_getiuservalue(L, type, 2);
  lua_setmetatable(L, -2);
  int obj = lua_gettop(L);
  int marked = 0;
  /* The first string stored keeps its Lua string as the user value itself,
   * the form a flat decode leaves (lpc_push_refs makes the refs table, with
   * it inside, when a second reference comes): a message of one string
   * field needs no table. Until then the user value is empty. */
  int uv_empty = lk->standalone_uv;
fill:
  any = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    any = 1;
    const lpc_LookupEntry *e = lpc_probe(lk, lua_topointer(L, -2));
    if (e != NULL && lpc_store_plain(L, msg, e, -1)) {
      lua_pop(L, 1);
      continue;
    }
    int v = obj + 2;
    const pc_FieldDef *f = e ? lpc_entry_field(lk, e) : lookup_field(L, def, v - 1, visited);
    if (lpc_plain_slot(f) && !lua_isnil(L, v)) {
      pc_Value x = check_field_scalar(L, visited, f, v); /* plain slot: store directly */
      memcpy(msg + f->offset, &x, pc_Slot_Size(f->slot));
      lua_settop(L, v - 1);
      continue;
    }
    if (f->oneof != NULL && !lua_isnil(L, v)) check_one_member(L, def, msg, f, visited);
    if (uv_empty && f->label != kPc_Label_Repeated && !f->is_extension &&
        (f->type == kPc_Type_String || f->type == kPc_Type_Bytes) && !lua_isnil(L, v)) {
      pc_Message_Set(msg, f, check_field_scalar(L, visited, f, v));
      lua_setiuservalue(L, obj, 1); /* the value, popped */
      uv_empty = 0;
      lua_settop(L, v - 1);
      continue;
    }
    uv_empty = 0;
    if (f->message != NULL && !marked && lua_type(L, v) == LUA_TTABLE) {
      visit(L, t, 1, visited);
      marked = 1;
    }
    lpc_set_field(L, obj, msg, f, v, visited);
    lua_settop(L, v - 1);
  }
  /* A proxy (is_proxy: asked once the table is found empty, so tables with
   * entries pay nothing): its fields again from a plain copy, put below
   * the message */
  if (!any && !proxy && is_proxy(L, t) && luaL_getmetafield(L, t, "__index") != LUA_TNIL) {
    lua_pop(L, 1);
    read_proxy(L, def, t);
    lua_insert(L, obj);
    proxy = t = obj++;
    goto fill;
  }
  if (marked) visit(L, t, 0, visited);
  if (proxy) lua_remove(L, proxy);
}

/* -- m = T{...} or T() */
int lpc_type_call(lua_State *L) {
  /* Only a Type has this __call, and __metatable hides it: a self that is
   * no userdata comes from the debug library (lpc_msg_at1 on the hot
   * metamethods' checks) */
  if (lua_touserdata(L, 1) == NULL) lpc_arg_type_error(L, 1, "__call", LPC_TYPE_MT);
  int t = lua_type(L, 2);
  if (t == LUA_TTABLE) {
    const lpc_TypeBox *box = lua_touserdata(L, 1);
    if (((const lpc_Lookup *)box->lookup)->tree && lpc_table_message(L, 1, 2)) return 1;
    lpc_Build visited = {0, 0, NULL};
    construct(L, 1, 2, &visited);
    return 1;
  }
  const pc_MessageDef *def = *(const pc_MessageDef **)lua_touserdata(L, 1);
  if (t != LUA_TNONE && t != LUA_TNIL) /* named as the caller sees it: T(fields) */
    lpc_msg_error(L, "bad argument #1 to '%s' (table expected, got %s)", def->full_name,
                  luaL_typename(L, 2));
  lua_settop(L, 1);
  lua_getiuservalue(L, 1, 2);
  lpc_new_standalone(L, def, 2);
  return 1;
}

/* -- c[i] = v   (1..#c replaces, #c+1 appends, c[#c] = nil removes the last) */
int lpc_repeated_newindex(lua_State *L) {
  lpc_Container *c = lpc_check_container(L, 1, LPC_REPEATED_MT);
  const pc_FieldDef *f = c->f;
  pc_Array *arr = pc_Message_Get(c->msg, f).a;
  size_t size = arr ? arr->size : 0;
  lua_Integer i = lpc_check_integer(L, f->full_name, 2);
  lua_settop(L, 3);
  if (lua_isnil(L, 3)) {
    if ((size_t)i != size || i < 1)
      lpc_msg_error(L, "%s: only the last element (%I) can be removed, not %I", f->full_name,
                    (lua_Integer)size, i);
    arr->size--;
    if (f->message != NULL || kept_string(f, f)) lpc_keep_elem(L, 1, 2, 3);
    return 0;
  }
  if (i < 1 || (size_t)i > size + 1)
    lpc_msg_error(L, "%s: index %I out of range (size %I)", f->full_name, i, (lua_Integer)size);
  lpc_Build visited = {0, 0, NULL};
  pc_Value v;
  memset(&v, 0, sizeof(v));
  if (f->message == NULL) check_elem(L, &visited, f, i, 3);
  if (f->message != NULL && !is_message_value(L, f->message, 3))
    lpc_message_type_error(L, push_elem_name(L, &visited, f, i), f->message, 3);
  lpc_Path at = {NULL, f, i, 0};
  if (f->message != NULL)
    v.m = elem_object(L, f, 3, c->msg, &visited, &at); /* at 4 */
  else
    v = lpc_check_scalar_lax(L, f, f->full_name, 3); /* checked by check_elem */
  int a = lpc_push_container_anchor(L, 1);
  lpc_ArenaBox *h = lpc_anchor_arena(L, a);
  int keep = kept_string(f, f); /* the element points into the string at 3 */
  if ((f->type == kPc_Type_String || f->type == kPc_Type_Bytes) && !keep &&
      !pc_StringView_Copy(&v.s, v.s.data, v.s.size, h->arena))
    lpc_nomem(L);
  if ((size_t)i == size + 1) {
    arr = pc_Message_MutableArray(c->msg, f, h->arena);
    if (arr == NULL || !pc_Array_Append(arr, &v, pc_FieldDef_ElemSize(f), h->arena)) lpc_nomem(L);
  } else {
    pc_Array_Set(arr, (size_t)i - 1, pc_FieldDef_ElemSlot(f), v);
  }
  if (f->message != NULL) lpc_keep_elem(L, 1, 2, 4);
  if (keep) lpc_keep_elem(L, 1, 2, 3);
  lpc_pace(L, h);
  return 0;
}

/* -- c[k] = v   (nil removes) */
int lpc_map_newindex(lua_State *L) {
  lpc_Container *c = lpc_check_container(L, 1, LPC_MAP_MT);
  const pc_FieldDef *f = c->f, *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf);
  lua_settop(L, 3);
  lpc_Build visited = {0, 0, NULL};
  /* removing by a string key checks nothing more: a key stored unchecked
   * (from C) that is not UTF-8 can be removed, as it can be read */
  if (!(lua_isnil(L, 3) && lua_type(L, 2) == LUA_TSTRING && kf->type == kPc_Type_String))
    check_entry(L, &visited, f, 2, lua_isnil(L, 3) || vf->message != NULL ? NULL : vf, 3);
  if (vf->message != NULL && !lua_isnil(L, 3) && !is_message_value(L, vf->message, 3))
    lpc_message_type_error(L, push_entry_name(L, &visited, f, 2), vf->message, 3);
  pc_Value k = lpc_check_scalar_lax(L, kf, f->full_name, 2); /* checked by check_entry */
  int keep_key = kept_string(f, kf), keep_value = kept_string(f, vf);
  if (lua_isnil(L, 3)) {
    pc_Map_Delete(pc_Message_Get(c->msg, f).map, ks, k);
    if (vf->message != NULL || keep_key || keep_value) lpc_keep_elem(L, 1, 2, 3);
    return 0;
  }
  lpc_Path at = {NULL, f, 0, 2};
  pc_Value v;
  memset(&v, 0, sizeof(v));
  if (vf->message != NULL)
    v.m = elem_object(L, vf, 3, c->msg, &visited, &at); /* at 4 */
  else
    v = lpc_check_scalar_lax(L, vf, f->full_name, 3);
  int a = lpc_push_container_anchor(L, 1);
  lpc_ArenaBox *h = lpc_anchor_arena(L, a);
  if ((vf->type == kPc_Type_String || vf->type == kPc_Type_Bytes) && !keep_value &&
      !pc_StringView_Copy(&v.s, v.s.data, v.s.size, h->arena))
    lpc_nomem(L);
  pc_Map *map = pc_Message_MutableMap(c->msg, f, h->arena);
  if (map == NULL) lpc_nomem(L);
  int is_new = pc_Map_Find(map, ks, k) == NULL;
  if (is_new && keep_key) {
    /* The new entry's key points into the string at 2, which the keep
     * table then holds as its key: an equal key left there would stay the
     * table's key instead, so it goes first. */
    if (lua_getiuservalue(L, 1, 2) == LUA_TTABLE) {
      lua_pushvalue(L, 2);
      lua_pushnil(L);
      lua_rawset(L, -3);
    }
    lua_pop(L, 1);
  } else if (is_new && ks == kPc_Slot_String &&
             !pc_StringView_Copy(&k.s, k.s.data, k.s.size, h->arena)) {
    lpc_nomem(L);
  }
  if (pc_Map_Set(map, ks, k, v, h->arena) == NULL) lpc_nomem(L);
  if (vf->message != NULL) {
    lpc_keep_elem(L, 1, 2, 4);
  } else if (keep_value) {
    lpc_keep_elem(L, 1, 2, 3);
  } else if (keep_key) {
    lua_pushboolean(L, 1);
    lpc_keep_elem(L, 1, 2, -1);
    lua_pop(L, 1);
  }
  lpc_pace(L, h);
  return 0;
}
