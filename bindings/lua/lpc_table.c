/* Plain Lua tables straight to wire bytes: pc.encode(T, table) without
 * making message objects (lpc_wire.c calls lpc_encode_table), and straight
 * into arena slots: T{...} of nested tables (lpc_table_message, below);
 * the other way, wire bytes and messages to plain tables, is lpc_plain.c.
 *
 * The table is walked with the type's Lookup (the field found by the
 * address of the key's interned string, as T{...} does) and written front
 * to back into a per-state buffer: a message's fields are gathered with
 * lua_next (each value left on the Lua stack), sorted by field number and
 * written, so the bytes are those pc.encode(T{...}) writes (field-number
 * order; maps in the table's traversal order, which is the order T{...}
 * inserts them in). A sub-message's length takes one byte before its
 * contents are known and the contents move when it needs more.
 *
 * This path never raises for bad input: anything it does not take exactly
 * as T{...} would (an unknown field, a wrong type, a value out of range,
 * a message object inside the table, two members of one oneof, a list
 * with holes or keys in hash order, a proto3 string that is not UTF-8,
 * types with required fields or groups, nesting past
 * LPC_TABLE_MAX_DEPTH, a table with no entries of its own but a metatable,
 * a proxy that T{...} reads through it, another call begun inside it by a
 * finalizer or a debug hook: type_of_slow) makes it return 0, and the caller builds T{...}
 * and encodes that, which raises the very error T{...} and pc.encode
 * raise, or encodes what this path declined. */
#include "lpc_message.h"
#include "wire/decode.h"
#include "wire/wire.h"

#include <lauxlib.h>
#include <string.h>

/* Levels of nesting this path takes; deeper tables go through T{...}. */
#define LPC_TABLE_MAX_DEPTH   64
/* A buffer grown past this is freed after use rather than kept. */
#define LPC_TABLE_BUF_KEEP    ((size_t)64 * 1024)
/* Stack slots asked for beyond a table's own, and what a sub-message's
 * tables may leave on the stack (encode_message, put_message). */
#define LPC_TABLE_STACK_AHEAD 64
/* What a call's tables may leave on the stack in all (put_message). */
#define LPC_TABLE_STACK_KEEP  2048
/* Distinct sub-message types one encode remembers the Lookups of. */
#define LPC_TABLE_TYPES       32

static char kTableKey; /* registry: the TableState userdata */

/* Entries of TableState.slot (a power of two). */
#define LPC_TABLE_SLOTS 64

/* A message type met during a call: its Lookup and whether this path
 * takes it (plain_type). */
typedef struct {
  const pc_MessageDef *def;
  const lpc_Lookup *lk;
  int plain;
} TypeInfo;

/* A field gathered from a table: its def and the stack index of its value. */
typedef struct {
  const pc_FieldDef *f;
  int idx;
} Gathered;

/* Per-state scratch, kept between calls (freed by __gc). */
typedef struct {
  lua_Alloc alloc;
  void *ud;
  uint8_t *buf; /* the output, front to back */
  size_t len, cap;
  Gathered *g; /* fields being written, a stack over the nesting levels */
  size_t glen, gcap;
  int *pos; /* sort_gathered's scratch: a stack index per field */
  size_t pcap;
  /* The Lookups of the message types met by the calls on one root Type,
   * types[0] (begin_types; their Types kept alive by the root: type_of). */
  TypeInfo types[LPC_TABLE_TYPES];
  int ntypes;
  int full;       /* a call found types[] full: the next one forgets them */
  unsigned calls; /* calls begun (begin_types): one begun inside another shows */
  /* types[] by the def's address: a direct-mapped index (0: none). */
  uint8_t slot[LPC_TABLE_SLOTS];
} TableState;

typedef struct {
  lua_State *L;
  TableState *s;
  int root; /* the stack index of the call's Type */
  int depth;
  int top;    /* the stack's top, kept here rather than asked for */
  int room;   /* the stack is known to have slots up to this index */
  int bottom; /* the stack's top when the call began */
} Enc;

static int lpc_tablestate_gc(lua_State *L) {
  TableState *s = lpc_check_self(L, 1, "__gc", "the table codec's state");
  if (s->buf != NULL) s->alloc(s->ud, s->buf, s->cap, 0);
  if (s->g != NULL) s->alloc(s->ud, s->g, s->gcap * sizeof(Gathered), 0);
  if (s->pos != NULL) s->alloc(s->ud, s->pos, s->pcap * sizeof(int), 0);
  s->pos = NULL;
  s->pcap = 0;
  s->buf = NULL;
  s->g = NULL;
  s->cap = s->gcap = 0;
  return 0;
}

/* Room for 'n' more bytes (raises when memory runs out: the buffer is the
 * state's, so nothing leaks). */
static uint8_t *reserve_slow(Enc *e, size_t n) {
  TableState *s = e->s;
  size_t cap = s->cap ? s->cap : 256;
  while (cap - s->len < n) {
    if (cap > SIZE_MAX / 2) lpc_nomem(e->L);
    cap *= 2;
  }
  uint8_t *p = s->alloc(s->ud, s->buf, s->cap, cap);
  if (p == NULL) lpc_nomem(e->L);
  s->buf = p;
  s->cap = cap;
  return s->buf + s->len;
}

static inline uint8_t *reserve(Enc *e, size_t n) {
  TableState *s = e->s;
  if (s->cap - s->len >= n) return s->buf + s->len;
  return reserve_slow(e, n);
}

static inline uint8_t *put_varint_at(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* A tag and a varint, in one reservation. */
static inline void put_tag_varint(Enc *e, uint32_t tag, uint64_t v) {
  uint8_t *p = reserve(e, (size_t)2 * PC_WIRE_MAX_VARINT);
  p = put_varint_at(p, tag);
  p = put_varint_at(p, v);
  e->s->len = (size_t)(p - e->s->buf);
}

/* 'v' at 'p' little-endian, 4 or 8 bytes (each width written out, which
 * the compiler makes one store); returns the end. */
static inline uint8_t *put_fixed_at(uint8_t *p, uint64_t v, int bytes) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
  if (bytes == 4) return p + 4;
  p[4] = (uint8_t)(v >> 32);
  p[5] = (uint8_t)(v >> 40);
  p[6] = (uint8_t)(v >> 48);
  p[7] = (uint8_t)(v >> 56);
  return p + 8;
}

/* Opens a length-delimited value of tag 'tag': the tag and one byte kept
 * for its length, in one reservation. Returns where its contents start. */
static inline size_t open_len(Enc *e, uint32_t tag) {
  uint8_t *p = put_varint_at(reserve(e, PC_WIRE_MAX_VARINT + 1), tag);
  e->s->len = (size_t)(p - e->s->buf) + 1;
  return e->s->len;
}

/* close_len for contents of 'n' bytes, 0x80 or more: the length takes
 * more than one byte, so the contents move. */
static void close_long(Enc *e, size_t start, size_t n) {
  TableState *s = e->s;
  size_t extra = pc_Wire_VarintSize(n) - 1;
  reserve(e, extra);
  memmove(s->buf + start + extra, s->buf + start, n);
  put_varint_at(s->buf + start - 1, n);
  s->len += extra;
}

/* Writes the length of the value opened at 'start'. */
static inline void close_len(Enc *e, size_t start) {
  TableState *s = e->s;
  size_t n = s->len - start;
  if (n < 0x80)
    s->buf[start - 1] = (uint8_t)n;
  else
    close_long(e, start, n);
}

static int is_fixed32(pc_FieldType t) {
  return t == kPc_Type_Float || t == kPc_Type_Fixed32 || t == kPc_Type_Sfixed32;
}
static int is_fixed64(pc_FieldType t) {
  return t == kPc_Type_Double || t == kPc_Type_Fixed64 || t == kPc_Type_Sfixed64;
}

static uint32_t wire_type(pc_FieldType t) {
  if (is_fixed32(t)) return kPc_Wire_Fixed32;
  if (is_fixed64(t)) return kPc_Wire_Fixed64;
  if (t == kPc_Type_String || t == kPc_Type_Bytes || t == kPc_Type_Message) return kPc_Wire_Len;
  return kPc_Wire_Varint;
}

static inline uint32_t tag_of(const pc_FieldDef *f, uint32_t wt) {
  return (uint32_t)f->number << 3 | wt;
}

/* LuaJIT: the decimal string at 'idx' for the 64-bit field 'f', as
 * lpc_check_scalar takes it, in '*v' (its bits): 1, or 0 when T{...} would
 * refuse it. */
static int decimal_value(lua_State *L, const pc_FieldDef *f, int idx, uint64_t *v) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  int is_unsigned = f->type == kPc_Type_Uint64 || f->type == kPc_Type_Fixed64;
  return lpc_parse_decimal(s, len, is_unsigned, v) > 0;
}

/* The number at 'idx' (of Lua type 't') in '*i' when it has an integral
 * value, as lpc_check_scalar takes for an integer field: 1, else 0. */
LPC_INLINE int integer_value(lua_State *L, int t, int idx, lua_Integer *i) {
  if (t != LUA_TNUMBER) return 0;
  int exact;
  *i = lua_tointegerx(L, idx, &exact);
  return exact;
}

/* The number at 'idx' for a field of f's (numeric, enum or bool) type as
 * the wire value (sign-extended, ZigZag, or the float's bits): 1, or 0
 * when T{...} would refuse it. '*zero' says whether it is the field's
 * implicit default. One switch on the type: each case checks its range. */
LPC_INLINE int number_value(lua_State *L, const pc_FieldDef *f, int idx, uint64_t *out, int *zero) {
  int t = lua_type(L, idx);
  lua_Integer i;
  switch (f->type) {
  case kPc_Type_Bool:
    if (t != LUA_TBOOLEAN) return 0;
    *out = (uint64_t)lua_toboolean(L, idx);
    *zero = *out == 0;
    return 1;
  case kPc_Type_Double: {
    if (t != LUA_TNUMBER) return 0;
    double d = (double)lua_tonumber(L, idx);
    memcpy(out, &d, 8);
    *zero = *out == 0;
    return 1;
  }
  case kPc_Type_Float: {
    if (t != LUA_TNUMBER) return 0;
    float x = (float)lua_tonumber(L, idx);
    uint32_t u;
    memcpy(&u, &x, 4);
    *out = u;
    *zero = u == 0;
    return 1;
  }
  case kPc_Type_Enum:
    if (t == LUA_TSTRING) {
      size_t len;
      const char *name = lua_tolstring(L, idx, &len);
      const pc_EnumValueDef *v = pc_EnumDef_FindByName(f->enumdef, name, len);
      if (v == NULL) return 0;
      *out = (uint64_t)(int64_t)v->number;
      *zero = v->number == 0;
      return 1;
    }
    if (!integer_value(L, t, idx, &i) || i < INT32_MIN || i > INT32_MAX) return 0;
    if (f->enumdef->closed && pc_EnumDef_FindByNumber(f->enumdef, (int32_t)i) == NULL) return 0;
    *out = (uint64_t)(int64_t)i;
    break;
  case kPc_Type_Int32:
    if (!integer_value(L, t, idx, &i) || i < INT32_MIN || i > INT32_MAX) return 0;
    *out = (uint64_t)(int64_t)i;
    break;
  case kPc_Type_Sfixed32:
    if (!integer_value(L, t, idx, &i) || i < INT32_MIN || i > INT32_MAX) return 0;
    *out = (uint64_t)(uint32_t)(int32_t)i;
    break;
  case kPc_Type_Sint32:
    if (!integer_value(L, t, idx, &i) || i < INT32_MIN || i > INT32_MAX) return 0;
    *out = pc_Wire_ZigZagEncode32((int32_t)i);
    break;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32:
    if (!integer_value(L, t, idx, &i) || i < 0 || i > (lua_Integer)UINT32_MAX) return 0;
    *out = (uint64_t)i;
    break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64:
    if (LPC_LUAJIT && t == LUA_TSTRING) {
      uint64_t v;
      if (!decimal_value(L, f, idx, &v)) return 0;
      *out = f->type == kPc_Type_Sint64 ? pc_Wire_ZigZagEncode64((int64_t)v) : v;
      *zero = v == 0;
      return 1;
    }
    if (!integer_value(L, t, idx, &i)) return 0;
    /* LuaJIT: a number within +-2^53 only, as lpc_check_scalar takes (a
     * double past it may be a rounded literal) */
    if (LPC_LUAJIT && (i < -((lua_Integer)1 << 53) || i > (lua_Integer)1 << 53)) return 0;
    *out = f->type == kPc_Type_Sint64 ? pc_Wire_ZigZagEncode64((int64_t)i) : (uint64_t)i;
    break;
  default: return 0;
  }
  *zero = i == 0;
  return 1;
}

/* Whether a value of 'f' is written even at its default. */
static inline int explicit_presence(const pc_FieldDef *f) {
  return f->hasbit >= 0 || f->oneof != NULL || f->is_extension;
}

/* A string or bytes value with its tag; 0 when T{...} or the encoder
 * would refuse it. 'always': written even when empty (else only when the
 * field has explicit presence). */
LPC_INLINE int put_string(Enc *e, const pc_FieldDef *f, int idx, int always) {
  lua_State *L = e->L;
  if (lua_type(L, idx) != LUA_TSTRING) return 0;
  size_t len;
  const char *p = lua_tolstring(L, idx, &len);
  if (len == 0 && !always && !explicit_presence(f)) return 1;
  if (pc_Decode_ChecksUtf8(f) && !pc_Wire_ValidUtf8((const uint8_t *)p, len)) return 0;
  if (len > SIZE_MAX - (size_t)2 * PC_WIRE_MAX_VARINT) lpc_nomem(L);
  uint8_t *q = reserve(e, len + (size_t)2 * PC_WIRE_MAX_VARINT);
  q = put_varint_at(q, tag_of(f, kPc_Wire_Len));
  q = put_varint_at(q, len);
  memcpy(q, p, len);
  e->s->len = (size_t)(q - e->s->buf) + len;
  return 1;
}

static int encode_message(Enc *e, const TypeInfo *ti, int t);

/* Whether the table at 'idx', found to have no entries of its own, has a
 * metatable: such a proxy goes the general way, which reads it through
 * its __index, __len or __pairs (lpc_construct.c). Asked of empty tables
 * only, so tables with entries pay nothing. */
static int has_metatable(lua_State *L, int idx) {
  if (!lua_getmetatable(L, idx)) return 0;
  lua_pop(L, 1);
  return 1;
}

/* Whether T{...} and pc.encode take every message of type 'def' the same
 * way this path does: no required fields, no groups. */
static int plain_type(const pc_MessageDef *def) {
  for (uint32_t i = 0; i < def->field_count; i++) {
    const pc_FieldDef *f = &def->fields[i];
    if (f->label == kPc_Label_Required || f->type == kPc_Type_Group) return 0;
  }
  return 1;
}

static inline size_t slot_of(const pc_MessageDef *def) {
  return ((uintptr_t)def >> 4) & (LPC_TABLE_SLOTS - 1);
}

/* Remembers 'def' with its Lookup for the rest of the call. */
static const TypeInfo *remember(TableState *s, const pc_MessageDef *def, const lpc_Lookup *lk) {
  TypeInfo *t = &s->types[s->ntypes++];
  t->def = def;
  t->lk = lk;
  t->plain = plain_type(def);
  if (s->slot[slot_of(def)] == 0) s->slot[slot_of(def)] = (uint8_t)s->ntypes;
  return t;
}

/* The message type 'def' with its Lookup; NULL when the call has met too
 * many types, or when Lua code run meanwhile (a finalizer or a debug hook
 * run by the allocations here, the only place this path runs any) began
 * another call on this state: that one took over types[], the buffer and
 * the gathered fields, so this call declines. Its Type is kept alive by
 * the call's Type (user value 4), so the next call finds it instead of
 * making it (and its metatables and Lookup) again once the collector took
 * it. */
static const TypeInfo *type_of_slow(Enc *e, const pc_MessageDef *def) {
  TableState *s = e->s;
  unsigned calls = s->calls;
  for (int i = 0; i < s->ntypes; i++)
    if (s->types[i].def == def) return &s->types[i];
  if (s->ntypes == LPC_TABLE_TYPES) {
    s->full = 1; /* the next call starts afresh (begin_types) */
    return NULL;
  }
  lua_State *L = e->L;
  if (lua_getiuservalue(L, e->root, 4) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 4);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, e->root, 4);
  }
  if (lua_rawgetp(L, -1, def) == LUA_TNIL) {
    lua_pop(L, 1);
    lpc_push_type(L, def);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, -3, def);
  }
  const lpc_Lookup *lk = ((const lpc_TypeBox *)lua_touserdata(L, -1))->lookup;
  lua_pop(L, 2);
  if (s->calls != calls) return NULL;
  return remember(s, def, lk);
}

/* type_of_slow past the direct-mapped index, which finds nearly all. */
LPC_INLINE const TypeInfo *type_of(Enc *e, const pc_MessageDef *def) {
  TableState *s = e->s;
  uint8_t k = s->slot[slot_of(def)];
  if (k != 0 && s->types[k - 1].def == def) return &s->types[k - 1];
  return type_of_slow(e, def);
}

/* A sub-message from the table at 'idx' with its tag (field 'f'). What
 * its tables leave on the stack stays for the caller to drop, unless it
 * takes more than LPC_TABLE_STACK_AHEAD slots or the call's tables more
 * than LPC_TABLE_STACK_KEEP (siblings': a message of many sub-messages):
 * the stack a call takes grows with its depth, not with the size of its
 * tree (LuaJIT gives a C function 8,000 slots; past them this path
 * declines). */
static int put_message(Enc *e, const pc_FieldDef *f, int idx) {
  if (lua_type(e->L, idx) != LUA_TTABLE || f->type != kPc_Type_Message) return 0;
  const TypeInfo *ti = type_of(e, f->message);
  if (ti == NULL) return 0;
  int top = e->top;
  size_t start = open_len(e, tag_of(f, kPc_Wire_Len));
  if (!encode_message(e, ti, idx)) return 0;
  close_len(e, start);
  if (e->top - top > LPC_TABLE_STACK_AHEAD || e->top - e->bottom > LPC_TABLE_STACK_KEEP) {
    lua_settop(e->L, top);
    e->top = top;
  }
  return 1;
}

/* put_repeated for a list of messages of field 'f': the elements' type
 * found once, at the first element. */
static int put_messages(Enc *e, const pc_FieldDef *f, int idx) {
  lua_State *L = e->L;
  const TypeInfo *ti = NULL;
  uint32_t tag = tag_of(f, kPc_Wire_Len);
  lua_Integer expect = 1;
  lua_pushnil(L);
  int top = e->top;
  while (lua_next(L, idx)) {
    if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) != expect || lua_type(L, -1) != LUA_TTABLE)
      return 0;
    if (ti == NULL && (ti = type_of(e, f->message)) == NULL) return 0;
    e->top = top + 2;
    size_t start = open_len(e, tag);
    if (!encode_message(e, ti, top + 2)) return 0;
    close_len(e, start);
    expect++;
    lua_settop(L, top + 1); /* the key: the value and what its encoding left go */
  }
  e->top = top;
  return expect > 1 || !has_metatable(L, idx);
}

/* One value of field 'f' (a singular field, an element or a map entry's
 * key or value) with its tag. 'always': written even at its default (else
 * only when the field has explicit presence, asked only of a default). */
LPC_INLINE int put_value(Enc *e, const pc_FieldDef *f, int idx, int always) {
  switch (f->type) {
  case kPc_Type_String:
  case kPc_Type_Bytes: return put_string(e, f, idx, always);
  case kPc_Type_Message:
  case kPc_Type_Group: return put_message(e, f, idx);
  default: {
    uint64_t v;
    int zero;
    if (!number_value(e->L, f, idx, &v, &zero)) return 0;
    if (zero && !always && !explicit_presence(f)) return 1;
    if (is_fixed32(f->type) || is_fixed64(f->type)) {
      uint8_t *p = put_varint_at(reserve(e, PC_WIRE_MAX_VARINT + 8), tag_of(f, wire_type(f->type)));
      e->s->len = (size_t)(put_fixed_at(p, v, is_fixed32(f->type) ? 4 : 8) - e->s->buf);
    } else {
      put_tag_varint(e, tag_of(f, kPc_Wire_Varint), v);
    }
    return 1;
  }
  }
}

/* put_repeated for a packed field of numbers, enums or bools: one
 * length-delimited value, each element's width (varint, 4 or 8 bytes)
 * known before the walk. */
static int put_packed(Enc *e, const pc_FieldDef *f, int idx) {
  lua_State *L = e->L;
  int width = is_fixed32(f->type) ? 4 : is_fixed64(f->type) ? 8 : 0;
  size_t start = 0;
  lua_Integer expect = 1;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    uint64_t v;
    int zero;
    if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) != expect ||
        !number_value(L, f, -1, &v, &zero))
      return 0;
    if (expect++ == 1) start = open_len(e, tag_of(f, kPc_Wire_Len));
    uint8_t *p = reserve(e, PC_WIRE_MAX_VARINT); /* (8 bytes or a varint) */
    p = width != 0 ? put_fixed_at(p, v, width) : put_varint_at(p, v);
    e->s->len = (size_t)(p - e->s->buf);
    lua_pop(L, 1);
  }
  if (expect == 1) return !has_metatable(L, idx);
  close_len(e, start);
  return 1;
}

/* The list at 'idx' for the repeated field 'f': keys 1..n met in order by
 * lua_next (a table built as a list has them in its array part), else 0. */
static int put_repeated(Enc *e, const pc_FieldDef *f, int idx) {
  lua_State *L = e->L;
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  if (f->packed && f->type != kPc_Type_String && f->type != kPc_Type_Bytes &&
      f->type != kPc_Type_Message && f->type != kPc_Type_Group)
    return put_packed(e, f, idx);
  if (f->type == kPc_Type_Message) return put_messages(e, f, idx);
  lua_Integer expect = 1;
  lua_pushnil(L);
  int top = e->top;
  e->top = top + 2;
  while (lua_next(L, idx)) {
    if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) != expect || !put_value(e, f, top + 2, 1))
      return 0;
    expect++;
    lua_pop(L, 1);
  }
  e->top = top;
  return expect > 1 || !has_metatable(L, idx);
}

/* The table at 'idx' for the map field 'f': entries in traversal order. */
static int put_map(Enc *e, const pc_FieldDef *f, int idx) {
  lua_State *L = e->L;
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  int top = e->top;
  size_t len0 = e->s->len; /* unchanged: no entries */
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    /* LuaJIT: 1, 1LL and "1" may name one integer key (T{...} checks) */
    if (LPC_LUAJIT && kf->type != kPc_Type_String && kf->type != kPc_Type_Bool &&
        lua_type(L, -2) != LUA_TNUMBER)
      return 0;
    e->top = top + 2;
    size_t start = open_len(e, tag_of(f, kPc_Wire_Len));
    if (!put_value(e, kf, top + 1, 1) || !put_value(e, vf, top + 2, 1)) return 0;
    close_len(e, start);
    lua_settop(L, top + 1); /* the key: the value and what its encoding left go */
  }
  e->top = top;
  return e->s->len != len0 || !has_metatable(L, idx);
}

static int put_field(Enc *e, const pc_FieldDef *f, int idx) {
  if (f->is_map) return put_map(e, f, idx);
  if (f->label == kPc_Label_Repeated) return put_repeated(e, f, idx);
  return put_value(e, f, idx, 0);
}

/* The field of the key at -2 in 'lk', or NULL when T{...} knows none. */
LPC_INLINE const pc_FieldDef *field_of(lua_State *L, const lpc_Lookup *lk) {
  const lpc_LookupEntry *le = lpc_probe(lk, lua_topointer(L, -2));
  if (le != NULL) return lpc_entry_field(lk, le);
  if (lua_type(L, -2) != LUA_TSTRING) return NULL;
  size_t len;
  const char *name = lua_tolstring(L, -2, &len);
  return pc_MessageDef_FindFieldByName(lk->def, name, len);
}

/* Puts the 'n' fields gathered at 'g' in field-number order: insertion
 * for a few, else through their places in 'def' (linear in its fields). */
static void sort_gathered(Enc *e, const pc_MessageDef *def, Gathered *g, size_t n) {
  TableState *s = e->s;
  if (n <= 12) {
    for (size_t k = 1; k < n; k++) {
      Gathered x = g[k];
      size_t i = k;
      for (; i > 0 && g[i - 1].f->number > x.f->number; i--) g[i] = g[i - 1];
      g[i] = x;
    }
    return;
  }
  size_t count = def->field_count;
  if (s->pcap < count) {
    int *p = s->alloc(s->ud, s->pos, s->pcap * sizeof(int), count * sizeof(int));
    if (p == NULL) lpc_nomem(e->L);
    s->pos = p;
    s->pcap = count;
  }
  memset(s->pos, 0, count * sizeof(int));
  for (size_t k = 0; k < n; k++) s->pos[g[k].f - def->fields] = g[k].idx;
  size_t m = 0;
  for (size_t k = 0; k < count && m < n; k++) {
    const pc_FieldDef *f = def->fields_by_number[k];
    int idx = s->pos[f - def->fields];
    if (idx != 0) {
      g[m].f = f;
      g[m].idx = idx;
      m++;
    }
  }
}

/* Appends the encoding of the table at 't' as a message of type 'def'.
 * Its keys and values stay on the stack, e->top past them: the caller
 * drops them (put_message once they take many slots, the list and map
 * loops with their own pop, the call at its end), one lua_settop for a
 * tree of sub-messages rather than one per table. */
static int encode_message(Enc *e, const TypeInfo *ti, int t) {
  lua_State *L = e->L;
  TableState *s = e->s;
  const pc_MessageDef *def = ti->def;
  const lpc_Lookup *lk = ti->lk;
  int base = e->top;
  if (++e->depth > LPC_TABLE_MAX_DEPTH || !ti->plain) return 0;
  /* its entries and what type_of pushes; asked with room for the tables
   * after it, which begin above its entries */
  int need = base + 2 * (int)def->field_count + 16;
  if (need > e->room) {
    if (!lua_checkstack(L, need - base + LPC_TABLE_STACK_AHEAD)) return 0;
    e->room = need + LPC_TABLE_STACK_AHEAD;
  }
  size_t g0 = s->glen;
  /* Gather: each value stays on the stack, its key copied for lua_next. */
  lua_pushnil(L);
  while (lua_next(L, t)) {
    const pc_FieldDef *f = field_of(L, lk);
    if (f == NULL || f->is_extension) return 0;
    if (s->glen == s->gcap) {
      size_t cap = s->gcap ? 2 * s->gcap : 64;
      Gathered *g = s->alloc(s->ud, s->g, s->gcap * sizeof(Gathered), cap * sizeof(Gathered));
      if (g == NULL) lpc_nomem(L);
      s->g = g;
      s->gcap = cap;
    }
    size_t i = s->glen++;
    if (f->oneof != NULL) { /* one member per oneof */
      for (size_t j = g0; j < i; j++)
        if (s->g[j].f->oneof == f->oneof) return 0;
    }
    s->g[i].f = f;
    s->g[i].idx = base + 2 * (int)(i - g0) + 2;
    lua_pushvalue(L, -2);
  }
  if (s->glen == g0 && has_metatable(L, t)) return 0;
  e->top = base + 2 * (int)(s->glen - g0);
  sort_gathered(e, def, s->g + g0, s->glen - g0);
  for (size_t i = g0; i < s->glen; i++)
    if (!put_field(e, s->g[i].f, s->g[i].idx)) return 0;
  s->glen = g0;
  e->depth--;
  return 1;
}

LPC_INLINE void forget_types(TableState *s) {
  for (int i = 0; i < s->ntypes; i++) s->slot[slot_of(s->types[i].def)] = 0;
  s->ntypes = 0;
}

/* Starts a call on the Type at 'type' (the state at 'state'); returns the
 * root's TypeInfo. The types the previous call met stay when its root was
 * this very Type: the state's user value holds that Type weakly, so a
 * Type collected since (and another made at its address) no longer
 * matches, and while it lives it keeps every type it met alive (type_of).
 * Otherwise (and for a root without message fields) they are forgotten.
 * Counts the call (TableState.calls). */
static const TypeInfo *begin_types(lua_State *L, TableState *s, int type, int state) {
  const lpc_TypeBox *box = lua_touserdata(L, type);
  s->calls++;
  if (!((const lpc_Lookup *)box->lookup)->tree) { /* no types to keep: not worth the check */
    forget_types(s);
    return remember(s, box->def, box->lookup);
  }
  lua_getiuservalue(L, state, 1);
  if (s->ntypes > 0 && !s->full && s->types[0].def == box->def) {
    lua_rawgeti(L, -1, 1);
    int same = lua_rawequal(L, -1, type);
    lua_pop(L, 1);
    if (same) {
      lua_pop(L, 1);
      return &s->types[0];
    }
  }
  forget_types(s);
  s->full = 0;
  lua_pushvalue(L, type);
  lua_rawseti(L, -2, 1);
  lua_pop(L, 1);
  return remember(s, box->def, box->lookup);
}

int lpc_encode_table(lua_State *L, int type, int t) {
  t = lua_absindex(L, t);
  type = lua_absindex(L, type);
  int top = lua_gettop(L);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kTableKey);
  TableState *s = lua_touserdata(L, -1);
  const TypeInfo *root = begin_types(L, s, type, top + 1);
  lua_pop(L, 1); /* the registry keeps it */
  Enc e = {L, s, type, 0, top, top, top};
  s->len = 0;
  s->glen = 0;
  int ok = encode_message(&e, root, t);
  lua_settop(L, top);
  if (ok) lua_pushlstring(L, (const char *)s->buf, s->len);
  if (s->cap > LPC_TABLE_BUF_KEEP) {
    s->alloc(s->ud, s->buf, s->cap, 0);
    s->buf = NULL;
    s->cap = 0;
  }
  return ok;
}

/* -- T{...} straight into arena slots -------------------------------------
 * T{...} of a table of nested tables builds the tree in one new arena:
 * each field found by its key's Lookup entry, its value checked and stored
 * into its slot (strings copied into the arena, sub-messages made there),
 * one pass over each table and no Lua object but the root's view. As the
 * encoder above, it declines (returns 0, leaving the stack as it was) on
 * anything T{...} must check or refuse itself: a key that is no field, a
 * value of the wrong type or out of range, a proto3 string that is not
 * UTF-8, a message object inside the table, a list with holes or keys out
 * of order, 64-bit values other than
 * numbers under LuaJIT, nesting past LPC_TABLE_MAX_DEPTH (a table holding
 * itself), a proxy (no entries of its own, a metatable); the caller then builds T{...} the general
 * way, raising its error. */

typedef struct {
  Enc e; /* the state, the types met, the depth */
  pc_Arena *a;
} Build;

/* The scalar or string at 'idx' for field 'f' as lpc_check_scalar takes it
 * (strings copied into the arena): 1, or 0 when it would raise (or the
 * value is one only it takes: LuaJIT's 64-bit cdata). */
LPC_INLINE int build_scalar(Build *b, const pc_FieldDef *f, int idx, pc_Value *out) {
  lua_State *L = b->e.L;
  memset(out, 0, sizeof *out);
  int t = lua_type(L, idx);
  switch (f->type) {
  case kPc_Type_String:
  case kPc_Type_Bytes: {
    if (t != LUA_TSTRING) return 0;
    size_t len;
    const char *p = lua_tolstring(L, idx, &len);
    if (pc_Decode_ChecksUtf8(f) && !pc_Wire_ValidUtf8((const uint8_t *)p, len)) return 0;
    if (!pc_StringView_Copy(&out->s, p, len, b->a)) lpc_nomem(L);
    return 1;
  }
  case kPc_Type_Bool:
    if (t != LUA_TBOOLEAN) return 0;
    out->b = (uint8_t)lua_toboolean(L, idx);
    return 1;
  case kPc_Type_Double:
  case kPc_Type_Float:
    if (t != LUA_TNUMBER) return 0;
    if (f->type == kPc_Type_Double)
      out->d = (double)lua_tonumber(L, idx);
    else
      out->f = (float)lua_tonumber(L, idx);
    return 1;
  case kPc_Type_Enum:
    if (t == LUA_TSTRING) {
      size_t len;
      const char *name = lua_tolstring(L, idx, &len);
      const pc_EnumValueDef *v = pc_EnumDef_FindByName(f->enumdef, name, len);
      if (v == NULL) return 0;
      out->i32 = v->number;
      return 1;
    }
    break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64:
    if (LPC_LUAJIT && t == LUA_TSTRING) return decimal_value(L, f, idx, &out->u64);
    break;
  default: break;
  }
  if (t != LUA_TNUMBER) return 0;
  int exact;
  lua_Integer i = lua_tointegerx(L, idx, &exact);
  if (!exact) return 0;
  switch (f->type) {
  case kPc_Type_Enum:
    if (i < INT32_MIN || i > INT32_MAX) return 0;
    if (f->enumdef->closed && pc_EnumDef_FindByNumber(f->enumdef, (int32_t)i) == NULL) return 0;
    out->i32 = (int32_t)i;
    return 1;
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
    if (i < INT32_MIN || i > INT32_MAX) return 0;
    out->i32 = (int32_t)i;
    return 1;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32:
    if (i < 0 || i > (lua_Integer)UINT32_MAX) return 0;
    out->u32 = (uint32_t)i;
    return 1;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64:
    if (LPC_LUAJIT && (i < -((lua_Integer)1 << 53) || i > (lua_Integer)1 << 53)) return 0;
    out->i64 = (int64_t)i;
    return 1;
  default: return 0;
  }
}

/* Levels of nesting one lua_checkstack makes room for: a level takes at
 * most 4 slots (a key and its value here, and in a list or map). */
#define LPC_BUILD_LEVELS 8

static int build_message(Build *b, const TypeInfo *ti, int t, pc_Message *msg);

/* Stores 'v' at 'p' as a slot of kind 'slot' (pc_Array_Set's and
 * pc_Message_Set's store, without the call). */
static inline void store_slot(void *p, pc_SlotKind slot, pc_Value v) {
  switch (slot) {
  case kPc_Slot_Bool: *(uint8_t *)p = v.b; break;
  case kPc_Slot_32: memcpy(p, &v, 4); break;
  case kPc_Slot_64: memcpy(p, &v, 8); break;
  case kPc_Slot_String: memcpy(p, &v, sizeof(pc_StringView)); break;
  default: memcpy(p, &v, sizeof(void *)); break; /* Message, Array, Map: a pointer */
  }
}

/* A message element or field value from the table at 'idx', the top of
 * the stack: a new message of 'def' in the arena, in '*out'. */
static int build_sub(Build *b, const pc_MessageDef *def, int idx, pc_Value *out) {
  memset(out, 0, sizeof *out);
  if (lua_type(b->e.L, idx) != LUA_TTABLE) return 0;
  const TypeInfo *ti = type_of(&b->e, def);
  if (ti == NULL) return 0;
  pc_Message *m = pc_Message_New(def, b->a);
  if (m == NULL) lpc_nomem(b->e.L);
  out->m = m;
  return build_message(b, ti, idx, m);
}

/* One element or map value of field 'f' (its element field 'ef') from the
 * value at 'idx', the top of the stack. */
static int build_elem(Build *b, const pc_FieldDef *ef, int idx, pc_Value *out) {
  if (ef->message != NULL) return build_sub(b, ef->message, idx, out);
  return build_scalar(b, ef, idx, out);
}

/* The list at 'idx', the top of the stack, for repeated field 'f': keys
 * 1..n met in order. */
static int build_list(Build *b, const pc_FieldDef *f, int idx, pc_Message *msg) {
  lua_State *L = b->e.L;
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  size_t n = (size_t)lua_rawlen(L, idx);
  if (n == 0) { /* an empty list, or a table of other keys */
    lua_pushnil(L);
    if (lua_next(L, idx)) return 0;
    return !has_metatable(L, idx);
  }
  pc_Array *arr = pc_Message_MutableArray(msg, f, b->a);
  size_t elem = pc_FieldDef_ElemSize(f);
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  if (arr == NULL || !pc_Array_Resize(arr, n, elem, b->a)) lpc_nomem(L);
  lpc_LookupEntry plain; /* an element stored by lpc_store_plain when it can */
  plain.offset = 0;
  plain.write = lpc_type_write_kind(f->type);
  const TypeInfo *ti = NULL; /* a message element's type, found at the first */
  lua_Integer expect = 1;
  int k = idx + 1, v = idx + 2;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (!lua_isinteger(L, k) || lua_tointeger(L, k) != expect || (size_t)expect > n) return 0;
    char *at = (char *)arr->data + ((size_t)expect - 1) * elem;
    expect++;
    if (f->message != NULL) {
      if (lua_type(L, v) != LUA_TTABLE) return 0;
      if (ti == NULL && (ti = type_of(&b->e, f->message)) == NULL) return 0;
      pc_Message *m = pc_Message_New(f->message, b->a);
      if (m == NULL) lpc_nomem(L);
      memcpy(at, &m, sizeof m);
      if (!build_message(b, ti, v, m)) return 0;
    } else if (!lpc_store_plain(L, at, &plain, v)) {
      pc_Value x;
      if (!build_elem(b, f, v, &x)) return 0;
      store_slot(at, slot, x);
    }
    lua_settop(L, k);
  }
  return (size_t)expect == n + 1;
}

/* The table at 'idx', the top of the stack, for map field 'f'. */
static int build_map(Build *b, const pc_FieldDef *f, int idx, pc_Message *msg) {
  lua_State *L = b->e.L;
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf);
  pc_Map *map = NULL;
  int k = idx + 1, v = idx + 2;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    pc_Value kv, vv;
    /* LuaJIT: 1, 1LL and "1" may name one integer key (T{...} checks) */
    if (LPC_LUAJIT && ks != kPc_Slot_String && ks != kPc_Slot_Bool && lua_type(L, k) != LUA_TNUMBER)
      return 0;
    if (!build_scalar(b, kf, k, &kv) || !build_elem(b, vf, v, &vv)) return 0;
    if (map == NULL && (map = pc_Message_MutableMap(msg, f, b->a)) == NULL) lpc_nomem(L);
    /* Lua 5.4: a table's keys are distinct values and build_scalar takes
     * distinct ones to distinct keys (integers exactly, strings by their
     * bytes), so none is in the map yet (LuaJIT's numbers keep the
     * lookup) */
    if ((LPC_LUAJIT ? pc_Map_Set(map, ks, kv, vv, b->a) : pc_Map_Insert(map, ks, kv, vv, b->a)) ==
        NULL)
      lpc_nomem(L);
    lua_settop(L, k);
  }
  return map != NULL || !has_metatable(L, idx);
}

/* The string at 'v' copied into the arena and stored at 'slot' (a string
 * or bytes slot without presence; 'utf8': a proto3 string's): 1, or 0
 * when the value is no string, or not UTF-8 where it must be. */
LPC_INLINE int store_string(Build *b, char *slot, int v, int utf8) {
  lua_State *L = b->e.L;
  if (lua_type(L, v) != LUA_TSTRING) return 0;
  pc_StringView sv;
  sv.data = lua_tolstring(L, v, &sv.size);
  if (utf8 && !pc_Wire_ValidUtf8((const uint8_t *)sv.data, sv.size)) return 0;
  if (sv.size > 0) {
    char *p = pc_Arena_Malloc(b->a, sv.size);
    if (p == NULL) /* (an else: cppcheck does not take lpc_nomem for _Noreturn here) */
      lpc_nomem(L);
    else
      memcpy(p, sv.data, sv.size);
    sv.data = p;
  } else {
    sv.data = NULL;
  }
  memcpy(slot, &sv, sizeof sv);
  return 1;
}

/* Stores 'v' into singular field 'f' of 'msg' and marks it present: what
 * pc_Message_Set does, without the call. */
LPC_INLINE void set_field(pc_Message *msg, const pc_FieldDef *f, pc_Value v) {
  char *p = (char *)msg + f->offset;
  /* a oneof's members share the slot: clear the widest's bytes */
  if (f->oneof != NULL && f->case_offset != 0) {
    uint32_t c = (uint32_t)f->number;
    memset(p, 0, f->oneof->slot_size);
    memcpy((char *)msg + f->case_offset, &c, 4);
  }
  if (f->hasbit >= 0) ((uint8_t *)msg)[8 + f->hasbit / 8] |= (uint8_t)(1u << (f->hasbit % 8));
  store_slot(p, f->slot, v);
}

/* Fills 'msg' (type ti->def, empty) from the table at 't', the top of the
 * stack. */
static int build_message(Build *b, const TypeInfo *ti, int t, pc_Message *msg) {
  lua_State *L = b->e.L;
  const lpc_Lookup *lk = ti->lk;
  int depth = ++b->e.depth;
  if (depth > LPC_TABLE_MAX_DEPTH) return 0;
  /* room for this level and the next LPC_BUILD_LEVELS - 1, and what
   * type_of and the errors push */
  if (depth % LPC_BUILD_LEVELS == 1 && !lua_checkstack(L, 4 * LPC_BUILD_LEVELS + 16)) return 0;
  int k = t + 1, v = t + 2, empty = 1;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    empty = 0;
    const lpc_LookupEntry *le = lpc_probe(lk, lua_topointer(L, k));
    if (le != NULL && (lpc_store_plain(L, msg, le, v) ||
                       (le->read == kLpc_Read_String &&
                        store_string(b, (char *)msg + le->offset, v, le->utf8)))) {
      lua_settop(L, k);
      continue;
    }
    const pc_FieldDef *f = le != NULL ? lpc_entry_field(lk, le) : field_of(L, lk);
    if (f == NULL || f->is_extension) return 0;
    /* two members of one oneof: the general path raises */
    if (f->oneof != NULL && pc_Message_WhichOneof(msg, f->oneof) != NULL) return 0;
    int ok;
    if (f->is_map) {
      ok = build_map(b, f, v, msg);
    } else if (f->label == kPc_Label_Repeated) {
      ok = build_list(b, f, v, msg);
    } else {
      pc_Value x;
      ok = build_elem(b, f, v, &x);
      if (ok && f->case_offset == 0 && f->hasbit < 0)
        store_slot((char *)msg + f->offset, f->slot, x);
      else if (ok)
        set_field(msg, f, x);
    }
    if (!ok) return 0;
    lua_settop(L, k);
  }
  if (empty && has_metatable(L, t)) return 0;
  b->e.depth--;
  return 1;
}

/* The first block of a T{...} build's arena: what the type's last build
 * used and an eighth more, so that a tree of the same size takes one block
 * (the doubling from the smallest block took 6 for the codec bench's OTLP
 * tree, a quarter of it unused, and the collector is paced for all of it). */
static size_t arena_hint(const lpc_TypeBox *box) {
  return box->arena_hint + box->arena_hint / 8;
}

int lpc_table_message(lua_State *L, int type, int t) {
  t = lua_absindex(L, t);
  lpc_TypeBox *box = lua_touserdata(L, type);
  const pc_MessageDef *def = box->def;
  int top = lua_gettop(L);
  pc_Arena *a = lpc_new_arena_sized(L, arena_hint(box));
  int arena_idx = lua_gettop(L);
  pc_Message *msg = pc_Message_New(def, a);
  if (msg == NULL) lpc_nomem(L);
  type = lua_absindex(L, type);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kTableKey);
  TableState *s = lua_touserdata(L, -1);
  const TypeInfo *root = begin_types(L, s, type, arena_idx + 1);
  lua_pop(L, 1);
  Build b = {{L, s, type, 0, arena_idx, arena_idx, arena_idx}, a};
  lua_pushvalue(L, t); /* build_message's table is the top of the stack */
  int ok = build_message(&b, root, arena_idx + 1, msg);
  if (!ok) {
    lua_settop(L, arena_idx);
    lpc_free_arena(L, arena_idx);
    lua_settop(L, top);
    return 0;
  }
  lua_settop(L, arena_idx);
  box->arena_hint = pc_Arena_SpaceUsed(a);
  lpc_pace(L, lua_touserdata(L, arena_idx));
  lpc_push_view(L, def, msg, arena_idx);
  lua_replace(L, arena_idx);
  return 1;
}

void lpc_open_table(lua_State *L) {
  TableState *s = lua_newuserdatauv(L, sizeof *s, 1);
  memset(s, 0, sizeof *s);
  s->alloc = lua_getallocf(L, &s->ud);
  lua_createtable(L, 1, 0); /* user value 1: {the Type of types[]}, weak */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setiuservalue(L, -2, 1);
  lua_createtable(L, 0, 1);
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, lpc_tablestate_gc, 1); /* upvalue 1: lpc_check_self */
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kTableKey);
}
