/* Wire bytes and messages to plain Lua tables in pc.to_table's shape:
 * core.to_table(m) walks a message tree (lpc_push_plain), and
 * pc.decode(T, bytes, {table = true}) reads the bytes straight into tables
 * (lpc_decode_plain), leaving what it does not take exactly to a decode
 * into an arena and lpc_push_plain (lpc_wire.c). Both set fields by their
 * interned names from a per-type plan (PlainPlan). The other way, plain
 * tables to wire bytes, is lpc_table.c. */
#include "lpc_message.h"
#include "wire/decode.h"
#include "wire/wire.h"

#include <lauxlib.h>
#include <limits.h>
#include <string.h>

/* -- Messages to plain tables ---------------------------------------------- */

/* Message types one plan names: deeper ones (a rare schema) set their
 * fields by name, interning each as they go. */
#define LPC_PLAIN_TYPES 64

static char kPlainKey; /* registry: Type -> the names table of its PlainPlan (weak keys) */
#if LPC_LUAJIT
/* registry: the table of the values set later (Plain), kept between calls
 * while its array part has not grown; a call takes it out (one a finalizer
 * starts meanwhile makes its own) and puts it back empty. */
static char kLaterKey;
#endif

/* The field names of every message type reachable from one root type, as
 * interned strings in one Lua table (which holds the plan userdata at [0]), so a
 * table is filled with lua_rawgeti + lua_rawset rather than by interning
 * each name again: names[first[k] + i + 1] is field i of defs[k]; sub[first[k] + i]
 * the index in defs of that field's message type (a map's value type), or
 * -1 when it has none or the plan is full. */
typedef struct {
  uint32_t ntypes;
  const pc_MessageDef *defs[LPC_PLAIN_TYPES];
  uint32_t first[LPC_PLAIN_TYPES];
  /* has64[k]: a 64-bit integer value may be met in a message of defs[k]
   * (its fields, and those of the plan types below it) */
  uint8_t has64[LPC_PLAIN_TYPES];
  /* size[k]: the fields of the last table of defs[k] lpc_decode_plain
   * made, the size it makes the next one at */
  uint16_t size[LPC_PLAIN_TYPES];
  int32_t sub[1];
} PlainPlan;

/* The 64-bit values a call holds on the C stack; more take a userdata. */
#define LPC_PLAIN_INTS 64

/* A call's state: the plan and the stack index of its names. Under LuaJIT
 * a 64-bit value is a cdata, which C makes only by calling Lua: the values
 * met below plan types are set at the end, all in one call
 * (lpc_set_int64s), from 'bits' and 'is_unsigned' (n of them, room for
 * cap) and the table at 'later': its [2i - 1] the table of value i, [2i]
 * its key, [0] the userdata 'bits' is in when it outgrew the C stack. */
typedef struct {
  lua_State *L;
  PlainPlan *plan;
  int names;
  int later; /* 0: no values set later (Lua 5.4, or a tree without them) */
  uint64_t *bits;
  uint8_t *is_unsigned;
  size_t n, cap;
} Plain;

static int is_int64(pc_FieldType t) {
  return t == kPc_Type_Int64 || t == kPc_Type_Sint64 || t == kPc_Type_Sfixed64 ||
         t == kPc_Type_Uint64 || t == kPc_Type_Fixed64;
}

/* The message type of the values of 'f' (a map's value type), or NULL. */
static const pc_MessageDef *plain_sub(const pc_FieldDef *f) {
  if (f->is_map) f = pc_FieldDef_MapValue(f);
  return f->type == kPc_Type_Message || f->type == kPc_Type_Group ? f->message : NULL;
}

static int plan_index(const pc_MessageDef *const *defs, uint32_t n, const pc_MessageDef *def) {
  for (uint32_t k = 0; k < n; k++)
    if (defs[k] == def) return (int)k;
  return -1;
}

/* Pushes the names table of a new plan for 'root' (the PlainPlan
 * userdata at its [0]). */
static void make_plan(lua_State *L, const pc_MessageDef *root) {
  const pc_MessageDef *defs[LPC_PLAIN_TYPES];
  uint32_t n = 1, fields = 0;
  defs[0] = root;
  for (uint32_t k = 0; k < n; k++) { /* breadth first, up to LPC_PLAIN_TYPES */
    fields += defs[k]->field_count;
    for (uint32_t i = 0; i < defs[k]->field_count; i++) {
      const pc_MessageDef *m = plain_sub(&defs[k]->fields[i]);
      if (m != NULL && n < LPC_PLAIN_TYPES && plan_index(defs, n, m) < 0) defs[n++] = m;
    }
  }
  size_t size = sizeof(PlainPlan) + (fields ? fields - 1 : 0) * sizeof(int32_t);
  lua_createtable(L, (int)fields, 1);
  PlainPlan *plan = lua_newuserdatauv(L, size, 0);
  memset(plan, 0, size);
  plan->ntypes = n;
  lua_rawseti(L, -2, 0);
  uint32_t at = 0;
  for (uint32_t k = 0; k < n; k++) {
    plan->defs[k] = defs[k];
    plan->first[k] = at;
    for (uint32_t i = 0; i < defs[k]->field_count; i++, at++) {
      const pc_MessageDef *m = plain_sub(&defs[k]->fields[i]);
      plan->sub[at] = m != NULL ? plan_index(defs, n, m) : -1;
      const pc_FieldDef *f = &defs[k]->fields[i];
      if (is_int64((f->is_map ? pc_FieldDef_MapValue(f) : f)->type)) plan->has64[k] = 1;
      lua_pushstring(L, defs[k]->fields[i].name);
      lua_rawseti(L, -2, (lua_Integer)at + 1);
    }
  }
  for (int changed = 1; changed;) { /* has64 through the sub-message types */
    changed = 0;
    for (uint32_t k = 0; k < n; k++) {
      for (uint32_t i = 0; i < defs[k]->field_count && !plan->has64[k]; i++) {
        int32_t s = plan->sub[plan->first[k] + i];
        if (s >= 0 && plan->has64[s]) changed = plan->has64[k] = 1;
      }
    }
  }
}

static void push_plain(Plain *P, const pc_Message *msg, const pc_MessageDef *def, int k);

/* Doubles the room for the values set later. */
static void grow_later(Plain *P) {
  if (P->cap > SIZE_MAX / 18) lpc_nomem(P->L);
  size_t cap = 2 * P->cap;
  uint64_t *bits = lua_newuserdatauv(P->L, cap * 9, 0);
  memcpy(bits, P->bits, P->n * sizeof *bits);
  memcpy(bits + cap, P->is_unsigned, P->n);
  lua_rawseti(P->L, P->later, 0);
  P->bits = bits;
  P->is_unsigned = (uint8_t *)(bits + cap);
  P->cap = cap;
}

/* Whether the value 'v' of 'f' is set later (Plain): then it is kept in
 * P's list, and the caller calls set_later with the key on top. 'planned':
 * the value is in a message of a plan type. */
static inline int keep_later(Plain *P, const pc_FieldDef *f, pc_Value v, int planned) {
  if (P->later == 0 || !planned || !is_int64(f->type)) return 0;
  if (P->n == P->cap) grow_later(P);
  P->bits[P->n] = v.u64;
  P->is_unsigned[P->n] = f->type == kPc_Type_Uint64 || f->type == kPc_Type_Fixed64;
  P->n++;
  return 1;
}

/* Notes the table at 't' and the key on top (popped) as where the value
 * keep_later kept goes. */
static void set_later(Plain *P, int t) {
  lua_State *L = P->L;
  lua_pushvalue(L, t);
  lua_Integer i = 2 * (lua_Integer)P->n;
  lua_rawseti(L, P->later, i - 1);
  lua_rawseti(L, P->later, i);
}

/* Pushes one element or singular value of 'f' as pc.to_table shows it
 * ('k': the plan index of its message type). */
static void push_plain_value(Plain *P, const pc_FieldDef *f, pc_Value v, int k) {
  if (f->type == kPc_Type_Message || f->type == kPc_Type_Group) {
    if (v.m == NULL)
      lua_createtable(P->L, 0, 0);
    else
      push_plain(P, v.m, f->message, k);
  } else {
    lpc_push_scalar(P->L, f, v);
  }
}

/* Whether the regular field 'f' of 'msg' is set (pc_Message_Has's rules,
 * inline), with its value in '*v' when it is. */
static inline int plain_get(const pc_Message *msg, const pc_FieldDef *f, pc_Value *v) {
  const char *slot = (const char *)msg + f->offset;
  int has = f->hasbit >= 0;
  if (f->case_offset != 0) { /* a oneof member: set when it is the case */
    uint32_t which;
    memcpy(&which, (const char *)msg + f->case_offset, 4);
    if (which != (uint32_t)f->number) return 0;
    has = 1;
  } else if (has && !((((const uint8_t *)msg)[8 + f->hasbit / 8] >> (f->hasbit % 8)) & 1)) {
    return 0;
  }
  switch (f->slot) {
  case kPc_Slot_Bool: v->b = *(const uint8_t *)slot; return has || v->b != 0;
  case kPc_Slot_32: memcpy(&v->u32, slot, 4); return has || v->u32 != 0;
  case kPc_Slot_64: memcpy(&v->u64, slot, 8); return has || v->u64 != 0;
  case kPc_Slot_String: memcpy(&v->s, slot, sizeof v->s); return has || v->s.size != 0;
  default: break;
  }
  void *ptr; /* a pointer slot, maybe unaligned */
  memcpy(&ptr, slot, sizeof ptr);
  if (f->slot == kPc_Slot_Array) {
    v->a = ptr;
    return v->a != NULL && v->a->size > 0;
  }
  if (f->slot == kPc_Slot_Map) {
    v->map = ptr;
    return v->map != NULL && v->map->size > 0;
  }
  v->m = ptr;
  return ptr != NULL || f->case_offset != 0; /* a oneof's case counts, as for pc_Message_Has */
}

/* Pushes the name of 'f', field 'i' of plan type 'k' (k < 0: of no plan
 * type); returns the plan index of its message type, or -1. */
static inline int push_name(Plain *P, const pc_FieldDef *f, int k, uint32_t i) {
  if (k < 0) {
    lua_pushstring(P->L, f->name);
    return -1;
  }
  uint32_t at = P->plan->first[k] + i;
  (lua_rawgeti)(P->L, P->names, (lua_Integer)at + 1);
  return P->plan->sub[at];
}

/* Sets field 'f' (value 'v', field 'i' of plan type 'k', or of no plan
 * type when k < 0) of the table at 't'. */
static void plain_field(Plain *P, int t, const pc_FieldDef *f, pc_Value v, int k, uint32_t i) {
  lua_State *L = P->L;
  int sub = push_name(P, f, k, i);
  int planned = k >= 0;
  if (f->is_map) {
    const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
    lua_createtable(L, 0, (int)v.map->size);
    int m = lua_gettop(L);
    for (size_t j = 0; j < v.map->size; j++) {
      lpc_push_key(L, kf, v.map->entries[j].key);
      if (keep_later(P, vf, v.map->entries[j].value, planned)) {
        set_later(P, m);
        continue;
      }
      push_plain_value(P, vf, v.map->entries[j].value, sub);
      lua_rawset(L, m);
    }
  } else if (f->label == kPc_Label_Repeated) {
    pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
    lua_createtable(L, (int)v.a->size, 0);
    int list = lua_gettop(L);
    for (size_t j = 0; j < v.a->size; j++) {
      pc_Value e = pc_Array_Get(v.a, j, slot);
      if (keep_later(P, f, e, planned)) {
        lua_pushinteger(L, (lua_Integer)j + 1);
        set_later(P, list);
        continue;
      }
      push_plain_value(P, f, e, sub);
      lua_rawseti(L, list, (lua_Integer)j + 1);
    }
  } else if (keep_later(P, f, v, planned)) {
    set_later(P, t);
    return;
  } else {
    push_plain_value(P, f, v, sub);
  }
  lua_rawset(L, t);
}

/* Fields gathered in one pass before the table is made (its size known);
 * types with more fields count first. */
#define LPC_PLAIN_GATHER 32

/* Pushes the plain table of 'msg' (type 'def', plan index 'k' or -1): its
 * set fields by name, sub-messages as tables, repeated fields as lists,
 * maps as tables, enums as numbers (pc.to_table's shape). Extensions and
 * unknown fields are left out. */
static void push_plain(Plain *P, const pc_Message *msg, const pc_MessageDef *def, int k) {
  lua_State *L = P->L;
  luaL_checkstack(L, 8, "message nesting too deep");
  uint32_t count = def->field_count;
  pc_Value v;
  if (count <= LPC_PLAIN_GATHER) {
    uint8_t is[LPC_PLAIN_GATHER];
    pc_Value vs[LPC_PLAIN_GATHER];
    int n = 0;
    for (uint32_t i = 0; i < count; i++) {
      if (plain_get(msg, &def->fields[i], &vs[n])) is[n++] = (uint8_t)i;
    }
    lua_createtable(L, 0, n);
    int t = lua_gettop(L);
    for (int j = 0; j < n; j++) plain_field(P, t, &def->fields[is[j]], vs[j], k, is[j]);
    return;
  }
  int present = 0;
  for (uint32_t i = 0; i < count; i++) present += plain_get(msg, &def->fields[i], &v);
  lua_createtable(L, 0, present);
  int t = lua_gettop(L);
  for (uint32_t i = 0; i < count && present > 0; i++) {
    if (!plain_get(msg, &def->fields[i], &v)) continue;
    present--;
    plain_field(P, t, &def->fields[i], v, k, i);
  }
}

/* Pushes the names table of the plan of the Type at 'type' (of 'def'),
 * made on first use; returns the plan (kept by that table). */
static PlainPlan *push_plan(lua_State *L, int type, const pc_MessageDef *def) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kPlainKey);
  lua_pushvalue(L, type);
  if (lua_rawget(L, -2) == LUA_TNIL) {
    lua_pop(L, 1);
    make_plan(L, def);
    lua_pushvalue(L, type);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
  }
  lua_remove(L, -2);
  (lua_rawgeti)(L, -1, 0);
  PlainPlan *plan = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return plan;
}

/* Starts a call: 'P' for 'plan' with its names table at 'names', its
 * C-stack room for 64-bit values in 'bits' and 'is_unsigned'. */
static void plain_begin(Plain *P, lua_State *L, PlainPlan *plan, int names, uint64_t *bits,
                        uint8_t *is_unsigned) {
  Plain p0 = {L, plan, names, 0, bits, is_unsigned, 0, LPC_PLAIN_INTS};
  *P = p0;
#if LPC_LUAJIT
  if (plan->has64[0]) { /* the state's table, taken out while in use */
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kLaterKey) == LUA_TNIL) {
      lua_pop(L, 1);
      lua_createtable(L, 2 * LPC_PLAIN_INTS, 0);
    } else {
      lua_pushnil(L);
      lua_rawsetp(L, LUA_REGISTRYINDEX, &kLaterKey);
    }
    P->later = lua_gettop(L);
  }
#endif
}

/* Ends a call whose tree is on top: sets the values kept for later, and
 * leaves the tree alone at 'base' + 1 (above it, when the call began: the
 * names table or nothing, then the table of the values set later). */
static void plain_end(Plain *P, int base) {
#if LPC_LUAJIT
  if (P->n > 0) { /* where the values go, then the values (their places cleared) */
    lua_pushvalue(P->L, P->later);
    lpc_set_int64s(P->L, P->bits, P->is_unsigned, P->n);
  }
  if (P->later != 0 && P->cap == LPC_PLAIN_INTS) { /* back, unless it grew */
    lua_pushvalue(P->L, P->later);
    lua_rawsetp(P->L, LUA_REGISTRYINDEX, &kLaterKey);
  }
#endif
  if (lua_gettop(P->L) > base + 1) {
    lua_replace(P->L, base + 1);
    lua_settop(P->L, base + 1);
  }
}

void lpc_push_plain(lua_State *L, int type, const pc_Message *msg, const pc_MessageDef *def) {
  type = lua_absindex(L, type);
  int base = lua_gettop(L);
  luaL_checkstack(L, 8, "message nesting too deep");
  PlainPlan *plan = push_plan(L, type, def);
  uint64_t bits[LPC_PLAIN_INTS];
  uint8_t is_unsigned[LPC_PLAIN_INTS];
  Plain P;
  plain_begin(&P, L, plan, lua_gettop(L), bits, is_unsigned);
  push_plain(&P, msg, def, 0);
  plain_end(&P, base);
}

/* -- Wire bytes straight to plain tables ------------------------------------
 *
 * pc.decode(T, bytes, {table = true}) without the message tree: one pass
 * over the bytes, each field set in its table as it is read (a table made
 * at the size its type's tables have taken, a list at the size of its run,
 * counted first). It takes only what it reads exactly as pc_Decode followed
 * by lpc_push_plain would show it, and returns 0 (the caller then decodes
 * into an arena, which gives the same tables or the decoder's error) for
 * anything else: malformed input, a field seen twice (the last value wins,
 * sub-messages merge: pc_Decode's rules), a repeated field in two runs, two
 * members of one oneof, a required field missing (without 'partial'), a
 * closed enum's unknown value, a proto3 string that is not UTF-8, unknown
 * fields of a type with extension ranges, a map entry's message value
 * twice, a map key beyond 2^53 under LuaJIT (a cdata), groups, types of
 * more than DIRECT_FIELDS fields or 64 oneofs, nesting at the depth limit.
 * Unknown fields and fields of another wire type are skipped
 * (pc_Wire_SkipField's checks), as plain tables leave them out. */

/* Stack room made at the start and every fourth message level (counted by
 * direct_message's calls, not by the depth left, which a map entry lowers
 * by two): a level holds at most 5 slots (its table, a key, a list or map,
 * an element's key and a table for set_later). */
#define DIRECT_STACK 32

/* Fields a type may have for this path (a bit each on the C stack). */
#define DIRECT_FIELDS 256

/* A decode's state: the tables' Plain, the levels still allowed. */
typedef struct {
  Plain *P;
  int depth_left;
  int partial;
  unsigned levels; /* direct_message calls running */
} Direct;

static int direct_message(Direct *D, const uint8_t *p, const uint8_t *end, const pc_MessageDef *def,
                          int k);

/* Whether wire type 'wt' reads as field 'f' (a repeated number also packed). */
static inline int direct_fits(const pc_FieldDef *f, pc_WireType wt) {
  return wt == pc_Decode_WireType(f->type) ||
         (wt == kPc_Wire_Len && f->label == kPc_Label_Repeated && pc_Decode_IsNumeric(f->type));
}

/* Skips the value of a known field 'f' of wire type 'wt' at 'p' (a length
 * checked against 'end'); NULL when it is malformed. */
static inline const uint8_t *direct_skip(const uint8_t *p, const uint8_t *end, pc_WireType wt) {
  pc_WireStatus st;
  size_t len;
  uint64_t u;
  switch (wt) {
  case kPc_Wire_Varint: return pc_Wire_ReadVarint(p, end, &u, &st);
  case kPc_Wire_Fixed64: return end - p >= 8 ? p + 8 : NULL;
  case kPc_Wire_Fixed32: return end - p >= 4 ? p + 4 : NULL;
  case kPc_Wire_Len: p = pc_Wire_ReadLength(p, end, &len, &st); return p != NULL ? p + len : NULL;
  default: return NULL;
  }
}

/* Pushes the table of the message of field 'f' (plan type 'sub') whose
 * length prefix is at 'p'; returns the position after it, or NULL to give
 * up. */
static inline const uint8_t *direct_sub(Direct *D, const uint8_t *p, const uint8_t *end,
                                        const pc_FieldDef *f, int sub) {
  pc_WireStatus st;
  size_t len;
  p = pc_Wire_ReadLength(p, end, &len, &st);
  if (p == NULL || D->depth_left <= 0) return NULL;
  D->depth_left--;
  int ok = direct_message(D, p, p + len, f->message, sub);
  D->depth_left++;
  return ok ? p + len : NULL;
}

/* Pushes the string or bytes value of 'f' whose length prefix is at 'p';
 * returns the position after it, or NULL to give up. '*empty': it is "". */
static inline const uint8_t *direct_string(Direct *D, const uint8_t *p, const uint8_t *end,
                                           const pc_FieldDef *f, int *empty) {
  pc_WireStatus st;
  size_t len;
  p = pc_Wire_ReadLength(p, end, &len, &st);
  if (p == NULL || (pc_Decode_ChecksUtf8(f) && !pc_Wire_ValidUtf8(p, len))) return NULL;
  lua_pushlstring(D->P->L, (const char *)p, len);
  *empty = len == 0;
  return p + len;
}

/* Sets number 'v' of 'f' as element 'j' of the list at 'list' (now, or
 * kept for later: Plain). */
static inline void direct_element(Plain *P, int list, const pc_FieldDef *f, pc_Value v,
                                  lua_Integer j, int planned) {
  if (keep_later(P, f, v, planned)) {
    lua_pushinteger(P->L, j);
    set_later(P, list);
    return;
  }
  lpc_push_scalar(P->L, f, v);
  lua_rawseti(P->L, list, j);
}

/* The elements of a packed run of 'len' bytes at 'p' of numeric field
 * 'f', or (size_t)-1 when the run is malformed. */
static size_t packed_count(const pc_FieldDef *f, const uint8_t *p, size_t len) {
  pc_WireType wt = pc_Decode_WireType(f->type);
  if (wt != kPc_Wire_Varint) {
    size_t w = wt == kPc_Wire_Fixed32 ? 4 : 8;
    return len % w == 0 ? len / w : (size_t)-1;
  }
  if (len > 0 && p[len - 1] >= 0x80) return (size_t)-1;
  size_t n = 0;
  for (size_t i = 0; i < len; i++) n += p[i] < 0x80;
  return n;
}

/* The run of repeated (or map) field 'f''s records that starts with the
 * tag at 'p', up to the first record of another field: returns its end
 * and its elements (packed ones counted) in '*count', or NULL when it is
 * malformed. */
static const uint8_t *run_count(const uint8_t *p, const uint8_t *end, const pc_FieldDef *f,
                                size_t *count) {
  size_t n = 0;
  while (p < end) {
    const uint8_t *tagpos = p;
    uint32_t num;
    pc_WireType wt;
    pc_WireStatus st;
    size_t len;
    p = pc_Decode_ReadTag(p, end, &num, &wt, &st);
    if (p == NULL) return NULL;
    if (num != (uint32_t)f->number || !direct_fits(f, wt)) {
      p = tagpos;
      break;
    }
    if (wt == kPc_Wire_Len && pc_Decode_IsNumeric(f->type)) {
      p = pc_Wire_ReadLength(p, end, &len, &st);
      if (p == NULL) return NULL;
      size_t k = packed_count(f, p, len);
      if (k == (size_t)-1) return NULL;
      n += k;
      p += len;
    } else {
      p = direct_skip(p, end, wt);
      if (p == NULL) return NULL;
      n++;
    }
  }
  *count = n;
  return p;
}

/* Pushes the list of repeated field 'f' from the run of its records that
 * starts with the tag at 'p' (up to the first record of another field: a
 * record of 'f' after it makes direct_message give up), or pops the key on
 * top when the run has no elements. Returns the position after the run,
 * or NULL to give up. */
static const uint8_t *direct_list(Direct *D, const uint8_t *p, const uint8_t *end,
                                  const pc_FieldDef *f, int sub, int planned) {
  lua_State *L = D->P->L;
  pc_WireStatus st;
  uint32_t num;
  pc_WireType wt;
  size_t count, len;
  const uint8_t *q, *run_end = run_count(p, end, f, &count);
  if (run_end == NULL) return NULL;
  if (count == 0) { /* empty packed runs: the field is not set */
    lua_pop(L, 1);
    return run_end;
  }
  lua_createtable(L, count < INT_MAX ? (int)count : INT_MAX, 0);
  int list = lua_gettop(L);
  lua_Integer j = 0;
  int empty;
  for (q = p; q < run_end;) {
    q = pc_Decode_ReadTag(q, end, &num, &wt, &st);
    if (q == NULL) return NULL;
    pc_Value v;
    if (wt == kPc_Wire_Len && pc_Decode_IsNumeric(f->type)) {
      q = pc_Wire_ReadLength(q, end, &len, &st);
      if (q == NULL) return NULL;
      for (const uint8_t *e = q + len; q < e;) {
        q = pc_Decode_ReadNumber(q, e, f->type, &v, &st);
        if (q == NULL || pc_Decode_EnumUnknown(f, v.i32)) return NULL;
        direct_element(D->P, list, f, v, ++j, planned);
      }
    } else if (f->type == kPc_Type_Message) {
      q = direct_sub(D, q, end, f, sub);
      if (q == NULL) return NULL;
      lua_rawseti(L, list, ++j);
    } else if (f->type == kPc_Type_String || f->type == kPc_Type_Bytes) {
      q = direct_string(D, q, end, f, &empty);
      if (q == NULL) return NULL;
      lua_rawseti(L, list, ++j);
    } else {
      q = pc_Decode_ReadNumber(q, end, f->type, &v, &st);
      if (q == NULL || pc_Decode_EnumUnknown(f, v.i32)) return NULL;
      direct_element(D->P, list, f, v, ++j, planned);
    }
  }
  return run_end;
}

/* Reads the map entry in [p, end) of map field 'f' into '*key' and
 * '*val' (a message value: its length prefix at '*msg', or NULL when the
 * entry has none), as pc_Decode does: each missing part its default, the
 * last of a repeated part (other fields skipped). Returns 0 to give up: a
 * malformed entry, a message value twice (they merge), a closed enum's
 * unknown value (the entry goes to unknown fields). */
static int direct_entry(Direct *D, const uint8_t *p, const uint8_t *end, const pc_FieldDef *f,
                        pc_Value *key, pc_Value *val, const uint8_t **msg) {
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  if (kf == NULL || vf == NULL) return 0; /* a map entry type has both */
  int have_val = 0;
  memset(key, 0, sizeof *key);
  memset(val, 0, sizeof *val);
  *msg = NULL;
  while (p < end) {
    uint32_t num;
    pc_WireType wt;
    pc_WireStatus st;
    p = pc_Decode_ReadTag(p, end, &num, &wt, &st);
    if (p == NULL) return 0;
    const pc_FieldDef *ef = num == 1 ? kf : num == 2 ? vf : NULL;
    if (ef == NULL || wt != pc_Decode_WireType(ef->type)) {
      const uint8_t *at;
      p = pc_Wire_SkipField(p, end, num, wt, D->depth_left, &st, &at);
      if (p == NULL) return 0;
      continue;
    }
    pc_Value *v = num == 1 ? key : val;
    if (ef->type == kPc_Type_Message) {
      if (*msg != NULL) return 0;
      *msg = p;
      p = direct_skip(p, end, wt);
    } else if (ef->type == kPc_Type_String || ef->type == kPc_Type_Bytes) {
      size_t len;
      p = pc_Wire_ReadLength(p, end, &len, &st);
      if (p == NULL || (pc_Decode_ChecksUtf8(ef) && !pc_Wire_ValidUtf8(p, len))) return 0;
      v->s.data = (const char *)p;
      v->s.size = len;
      p += len;
    } else {
      p = pc_Decode_ReadNumber(p, end, ef->type, v, &st);
    }
    if (p == NULL) return 0;
    have_val |= num == 2;
  }
  if (have_val && pc_Decode_EnumUnknown(vf, val->i32)) return 0;
  if (vf->type == kPc_Type_Enum && !have_val && vf->enumdef != NULL && vf->enumdef->closed &&
      vf->enumdef->value_count > 0)
    val->i32 = vf->enumdef->values[0].number;
  return 1;
}

/* Pushes the table of map field 'f' from the run of its entries that
 * starts with the tag at 'p' (as direct_list); the key of the field's
 * table is on top. Returns the position after the run, or NULL to give
 * up. */
static const uint8_t *direct_map(Direct *D, const uint8_t *p, const uint8_t *end,
                                 const pc_FieldDef *f, int sub, int planned) {
  lua_State *L = D->P->L;
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  if (kf == NULL || vf == NULL) return NULL; /* a map entry type has both */
  pc_WireStatus st;
  uint32_t num;
  pc_WireType wt;
  size_t count, len;
  const uint8_t *q, *run_end = run_count(p, end, f, &count);
  if (run_end == NULL) return NULL;
  lua_createtable(L, 0, count < INT_MAX ? (int)count : INT_MAX);
  int m = lua_gettop(L);
  for (q = p; q < run_end;) {
    q = pc_Decode_ReadTag(q, end, &num, &wt, &st);
    q = q != NULL ? pc_Wire_ReadLength(q, end, &len, &st) : NULL;
    if (q == NULL || D->depth_left <= 0) return NULL; /* an entry is a level */
    D->depth_left--;
    pc_Value key, val;
    const uint8_t *msg;
    if (!direct_entry(D, q, q + len, f, &key, &val, &msg)) return NULL;
    if (lpc_key_is_cdata(kf, key)) return NULL; /* equal keys would be two table keys */
    lpc_push_key(L, kf, key);
    if (vf->type == kPc_Type_Message) {
      if (msg == NULL && vf->message->required_count > 0 && !D->partial)
        return NULL; /* an empty value lacks its required fields: the decoder says which */
      if (msg == NULL)
        lua_createtable(L, 0, 0);
      else if (direct_sub(D, msg, q + len, vf, sub) == NULL)
        return NULL;
      lua_rawset(L, m);
    } else if (keep_later(D->P, vf, val, planned)) {
      set_later(D->P, m);
    } else {
      lpc_push_scalar(L, vf, val);
      lua_rawset(L, m);
    }
    D->depth_left++;
    q += len;
  }
  return run_end;
}

/* Pushes the table of the message of type 'def' (plan type 'k', or -1)
 * in [p, end): 1, or 0 to give up (the stack then holds what was made).
 * The table is made at the size the last table of its type took. */
static int direct_fields(Direct *D, const uint8_t *p, const uint8_t *end, const pc_MessageDef *def,
                         int k);

static int direct_message(Direct *D, const uint8_t *p, const uint8_t *end, const pc_MessageDef *def,
                          int k) {
  if (def->field_count > DIRECT_FIELDS || def->oneof_count > 64) return 0;
  if (++D->levels % 4 == 0) luaL_checkstack(D->P->L, DIRECT_STACK, "message nesting too deep");
  int ok = direct_fields(D, p, end, def, k);
  D->levels--;
  return ok;
}

/* direct_message's work: the table, then the fields. */
static int direct_fields(Direct *D, const uint8_t *p, const uint8_t *end, const pc_MessageDef *def,
                         int k) {
  Plain *P = D->P;
  lua_State *L = P->L;
  lua_createtable(L, 0, k >= 0 ? P->plan->size[k] : 4);
  int t = lua_gettop(L), planned = k >= 0, empty, n = 0;
  uint64_t seen[DIRECT_FIELDS / 64], oneofs = 0; /* fields by index, oneofs by index */
  seen[0] = 0;
  if (def->field_count > 64) memset(seen + 1, 0, (def->field_count - 1) / 64 * sizeof seen[0]);
  uint32_t hint = 0;
  while (p < end) {
    const uint8_t *tagpos = p;
    uint32_t num;
    pc_WireType wt;
    pc_WireStatus st;
    p = pc_Decode_ReadTag(p, end, &num, &wt, &st);
    if (p == NULL) return 0;
    const pc_FieldDef *f = pc_Decode_FindField(def, num, &hint);
    if (f == NULL || !direct_fits(f, wt)) { /* left out, as unknown fields are */
      if (f == NULL && def->extension_range_count > 0) return 0;
      const uint8_t *at;
      p = pc_Wire_SkipField(p, end, num, wt, D->depth_left, &st, &at);
      if (p == NULL) return 0;
      continue;
    }
    uint64_t bit = (uint64_t)1 << (f->index % 64);
    if (seen[f->index / 64] & bit) return 0; /* a second value (direct_list takes a whole run) */
    seen[f->index / 64] |= bit;
    n++;
    if (f->case_offset != 0) { /* a oneof member: the only one of its oneof */
      uint64_t o = (uint64_t)1 << f->oneof->index;
      if (oneofs & o) return 0;
      oneofs |= o;
    }
    int sub = push_name(P, f, k, f->index);
    if (f->label == kPc_Label_Repeated) {
      p = f->is_map ? direct_map(D, tagpos, end, f, sub, planned)
                    : direct_list(D, tagpos, end, f, sub, planned);
      if (p == NULL) return 0;
      if (lua_gettop(L) > t) lua_rawset(L, t);
      continue;
    }
    /* else the default, of a field without presence, is not set */
    int has = f->has_presence;
    if (wt == kPc_Wire_Len) {
      if (f->type == kPc_Type_Message) {
        p = direct_sub(D, p, end, f, sub);
        if (p == NULL) return 0;
        lua_rawset(L, t);
        continue;
      }
      p = direct_string(D, p, end, f, &empty);
      if (p == NULL) return 0;
      if (empty && !has)
        lua_pop(L, 2);
      else
        lua_rawset(L, t);
      continue;
    }
    if (wt == kPc_Wire_StartGroup) return 0;
    pc_Value v;
    p = pc_Decode_ReadNumber(p, end, f->type, &v, &st);
    if (p == NULL || pc_Decode_EnumUnknown(f, v.i32)) return 0;
    int zero = f->slot == kPc_Slot_Bool ? v.b == 0
               : f->slot == kPc_Slot_32 ? v.u32 == 0
                                        : v.u64 == 0;
    if (zero && !has) {
      lua_pop(L, 1);
    } else if (keep_later(P, f, v, planned)) {
      set_later(P, t);
    } else {
      lpc_push_scalar(L, f, v);
      lua_rawset(L, t);
    }
  }
  if (def->required_count > 0 && !D->partial) {
    for (uint32_t i = 0; i < def->field_count; i++)
      if (def->fields[i].label == kPc_Label_Required && !(seen[i / 64] >> (i % 64) & 1)) return 0;
  }
  if (k >= 0 && n > P->plan->size[k]) P->plan->size[k] = (uint16_t)n;
  return 1;
}

void *lpc_plain_plan(lua_State *L, int type, const pc_MessageDef *def) {
  return push_plan(L, lua_absindex(L, type), def);
}

int lpc_decode_plain(lua_State *L, int names, void *plan, const pc_MessageDef *def,
                     const char *bytes, size_t len, const pc_DecodeOptions *opts) {
  names = lua_absindex(L, names);
  int base = lua_gettop(L);
  luaL_checkstack(L, DIRECT_STACK, "message nesting too deep");
  uint64_t bits[LPC_PLAIN_INTS];
  uint8_t is_unsigned[LPC_PLAIN_INTS];
  Plain P;
  plain_begin(&P, L, plan, names, bits, is_unsigned);
  int depth = opts->max_depth > 0 ? opts->max_depth : PC_WIRE_DEFAULT_DEPTH;
  Direct D = {&P, depth < PC_MESSAGE_MAX_DEPTH ? depth : PC_MESSAGE_MAX_DEPTH, opts->partial, 0};
  const uint8_t *p = (const uint8_t *)bytes;
  if (!direct_message(&D, p, p + len, def, 0)) {
    lua_settop(L, base);
    return 0;
  }
  plain_end(&P, base);
  return 1;
}

/* -- t = core.to_table(m)   (pc.to_table: message.lua checks m) */
static int lpc_to_table(lua_State *L) {
  const pc_MessageDef *def;
  const pc_Message *msg = lpc_check_message(L, 1, "to_table", &def);
  lpc_push_type(L, def);
  lpc_push_plain(L, -1, msg, def);
  return 1;
}

/* -- t | false = core.decode_direct(T, bytes [, max_depth [, partial]])
 * What lpc_decode_plain gives by itself: the tables, or false where it
 * gives up (the specs compare it with pc.to_table(pc.decode(T, bytes)) and
 * count what it takes). */
static int lpc_decode_direct(lua_State *L) {
  const pc_MessageDef *def = lpc_check_type(L, 1);
  size_t len;
  const char *bytes = luaL_checklstring(L, 2, &len);
  pc_DecodeOptions opts = {0};
  opts.max_depth = (int)luaL_optinteger(L, 3, 0);
  opts.partial = lua_toboolean(L, 4);
  void *plan = lpc_plain_plan(L, 1, def);
  if (!lpc_decode_plain(L, lua_gettop(L), plan, def, bytes, len, &opts)) lua_pushboolean(L, 0);
  return 1;
}

void lpc_open_plain(lua_State *L) {
  lua_createtable(L, 0, 0); /* Type -> plan names, dropped with the Type */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kPlainKey);
  lua_pushcfunction(L, lpc_to_table);
  lua_setfield(L, -2, "to_table");
  lua_pushcfunction(L, lpc_decode_direct);
  lua_setfield(L, -2, "decode_direct");
}
