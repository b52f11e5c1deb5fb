#include "wire/encode.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ORDER ENCODESTATUS */
static const char *const encode_status_text[] = {"ok", "out of memory", "nesting too deep",
                                                 "invalid UTF-8 in a string field",
                                                 "missing required fields"};

const char *pc_EncodeStatus_String(pc_EncodeStatus s) {
  if ((unsigned)s >= sizeof encode_status_text / sizeof encode_status_text[0])
    return "unknown encode status";
  return encode_status_text[s];
}

typedef struct {
  pc_WireWriter *w;
  int deterministic;
  int depth;
  uint32_t required; /* non-zero once a type with required fields was written
                        (the root's, then each sub-message's) */
  pc_EncodeStatus status;
  /* Where the failure is, from the root: built as the failure returns
   * through the fields, elements and entries that hold it, innermost
   * first, back to front: the text from path + at to the NUL ending
   * 'path'. 'cut' once a piece did not fit (the outer ones are left out;
   * half of PC_ERROR_MAX leaves the root's name and the reason room). */
  char path[PC_ERROR_MAX / 2];
  size_t at;
  int cut;
  size_t bad_byte; /* kPc_EncodeStatus_BadUtf8: the offset of the string's first bad byte */
  /* pc_Encode's arguments, for finish() */
  const pc_Message *root;
  const pc_MessageDef *root_def;
  const pc_EncodeOptions *opts;
  pc_Error *err;
} Enc;

static int enc_fail(Enc *e, pc_EncodeStatus st) {
  if (e->status == kPc_EncodeStatus_Ok) {
    e->status = st;
    e->at = sizeof e->path - 1;
    e->path[e->at] = '\0';
    e->cut = 0;
  }
  return 0;
}

/* Puts a piece of the failure's place ("[2]", ".name") before what the
 * path holds; returns 0 (the failure goes on out). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int
fail_in(Enc *e, const char *fmt, ...) {
  char piece[PC_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = e->cut ? -1 : vsnprintf(piece, sizeof piece, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n > e->at) {
    e->cut = 1;
    return 0;
  }
  e->at -= (size_t)n;
  memcpy(e->path + e->at, piece, (size_t)n);
  return 0;
}

/* fail_in for the map entry of key 'k' (key field 'kf'): "[\"k\"]", and
 * ": key" after it when the key itself failed ('in_key'). */
static int fail_in_entry(Enc *e, const pc_FieldDef *kf, pc_Value k, int in_key) {
  char shown[PC_MAP_KEY_SHOWN];
  if (in_key) fail_in(e, ": key");
  return fail_in(e, "%s", pc_Map_ShowKey(shown, kf, k));
}

/* fail_in for the field 'f' of a message: ".name", ".(pkg.ext)" for an
 * extension (as pc_Message_CheckRequired names them). */
static int fail_in_field(Enc *e, const pc_FieldDef *f) {
  return f->is_extension ? fail_in(e, ".(%s)", f->full_name) : fail_in(e, ".%s", f->name);
}

static int is_fixed32(pc_FieldType t) {
  return t == kPc_Type_Float || t == kPc_Type_Fixed32 || t == kPc_Type_Sfixed32;
}
static int is_fixed64(pc_FieldType t) {
  return t == kPc_Type_Double || t == kPc_Type_Fixed64 || t == kPc_Type_Sfixed64;
}

/* Prepends varint 'v' at 'p' (room known to be there); returns the new start. */
static inline uint8_t *varint_down(uint8_t *p, uint64_t v) {
  if (v < 0x80) {
    *--p = (uint8_t)v;
    return p;
  }
  size_t n = pc_Wire_VarintSize(v);
  uint8_t *q = p -= n;
  while (v >= 0x80) {
    *q++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *q = (uint8_t)v;
  return p;
}

/* Prepends the 'n' little-endian bytes of 'v' at 'p'; returns the new start. */
static inline uint8_t *fixed_down(uint8_t *p, uint64_t v, int n) {
  p -= n;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (n == 4) {
    uint32_t u = (uint32_t)v;
    memcpy(p, &u, 4);
  } else {
    memcpy(p, &v, 8);
  }
#else
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
#endif
  return p;
}

/* Prepends one numeric value (no tag) of type 't' stored as at 'src' at 'p'
 * (PC_WIRE_MAX_VARINT bytes of room known to be there); returns the new
 * start. */
static inline uint8_t *number_down(uint8_t *p, pc_FieldType t, const void *src) {
  uint32_t u32;
  uint64_t u64;
  switch (t) {
  case kPc_Type_Bool: return varint_down(p, *(const uint8_t *)src != 0);
  case kPc_Type_Float:
  case kPc_Type_Fixed32:
  case kPc_Type_Sfixed32: memcpy(&u32, src, 4); return fixed_down(p, u32, 4);
  case kPc_Type_Double:
  case kPc_Type_Fixed64:
  case kPc_Type_Sfixed64: memcpy(&u64, src, 8); return fixed_down(p, u64, 8);
  case kPc_Type_Int32:
  case kPc_Type_Enum: {
    int32_t i;
    memcpy(&i, src, 4);
    return varint_down(p, (uint64_t)(int64_t)i);
  }
  case kPc_Type_Uint32: memcpy(&u32, src, 4); return varint_down(p, u32);
  case kPc_Type_Sint32: {
    int32_t i;
    memcpy(&i, src, 4);
    return varint_down(p, pc_Wire_ZigZagEncode32(i));
  }
  case kPc_Type_Sint64: {
    int64_t i;
    memcpy(&i, src, 8);
    return varint_down(p, pc_Wire_ZigZagEncode64(i));
  }
  default: memcpy(&u64, src, 8); return varint_down(p, u64);
  }
}

/* Writes one numeric value (no tag) of type 't' stored as at 'src'. */
static int put_number(pc_WireWriter *w, pc_FieldType t, const void *src) {
  if (!pc_WireWriter_Reserve(w, PC_WIRE_MAX_VARINT)) return 0;
  w->ptr = number_down(w->ptr, t, src);
  return 1;
}

static pc_WireType wire_type(pc_FieldType t) {
  if (is_fixed32(t)) return kPc_Wire_Fixed32;
  if (is_fixed64(t)) return kPc_Wire_Fixed64;
  switch (t) {
  case kPc_Type_String:
  case kPc_Type_Bytes:
  case kPc_Type_Message: return kPc_Wire_Len;
  case kPc_Type_Group: return kPc_Wire_StartGroup;
  default: return kPc_Wire_Varint;
  }
}

static int encode_message(Enc *e, const pc_Message *msg, const pc_MessageDef *m);

/* Whether values of 'f' must be valid UTF-8 (pc_FieldSlot.utf8). */
static int checks_utf8(const pc_FieldDef *f) {
  return f->type == kPc_Type_String && f->file != NULL && f->file->syntax == kPc_Syntax_Proto3;
}

/* A length-delimited string or bytes value with its tag, in one
 * reservation; 'utf8': checks_utf8(f). */
static int put_string(Enc *e, const pc_FieldDef *f, const pc_StringView *s, int utf8) {
  pc_WireWriter *w = e->w;
  if (utf8 && !pc_Wire_ValidUtf8((const uint8_t *)s->data, s->size)) {
    e->bad_byte = pc_Wire_InvalidUtf8At((const uint8_t *)s->data, s->size);
    return enc_fail(e, kPc_EncodeStatus_BadUtf8);
  }
  if (s->size > SIZE_MAX - (size_t)2 * PC_WIRE_MAX_VARINT ||
      !pc_WireWriter_Reserve(w, s->size + (size_t)2 * PC_WIRE_MAX_VARINT))
    return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
  uint8_t *p = w->ptr - s->size;
  if (s->size > 0) memcpy(p, s->data, s->size);
  p = varint_down(p, s->size);
  w->ptr = varint_down(p, (uint64_t)(uint32_t)f->number << 3 | kPc_Wire_Len);
  return 1;
}

/* A sub-message 'sub' (NULL: empty) of message field 'f' with its length
 * and tag (these in one reservation). */
static int put_sub(Enc *e, const pc_FieldDef *f, const pc_Message *sub) {
  pc_WireWriter *w = e->w;
  size_t before = pc_WireWriter_Size(w);
  e->required |= f->message->required_count;
  if (sub != NULL && !encode_message(e, sub, f->message)) return 0;
  size_t len = pc_WireWriter_Size(w) - before;
  if (!pc_WireWriter_Reserve(w, (size_t)2 * PC_WIRE_MAX_VARINT))
    return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
  w->ptr = varint_down(varint_down(w->ptr, len), (uint64_t)(uint32_t)f->number << 3 | kPc_Wire_Len);
  return 1;
}

/* One element of field 'f' (its value at 'src', of the element slot kind)
 * with its tag. */
static int put_element(Enc *e, const pc_FieldDef *f, const void *src) {
  pc_WireWriter *w = e->w;
  uint32_t num = (uint32_t)f->number;
  switch (f->type) {
  case kPc_Type_String:
  case kPc_Type_Bytes: return put_string(e, f, src, checks_utf8(f));
  case kPc_Type_Message: return put_sub(e, f, *(pc_Message *const *)src);
  case kPc_Type_Group: {
    const pc_Message *sub = *(pc_Message *const *)src;
    if (!pc_WireWriter_PutTag(w, num, kPc_Wire_EndGroup))
      return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
    e->required |= f->message->required_count;
    if (sub != NULL && !encode_message(e, sub, f->message)) return 0;
    break;
  }
  default: /* value and tag in one reservation */
    if (!pc_WireWriter_Reserve(w, (size_t)2 * PC_WIRE_MAX_VARINT))
      return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
    w->ptr = varint_down(number_down(w->ptr, f->type, src),
                         (uint64_t)num << 3 | (uint32_t)wire_type(f->type));
    return 1;
  }
  if (!pc_WireWriter_PutTag(w, num, wire_type(f->type)))
    return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
  return 1;
}

/* Prepends the 'n' numbers of type 't' stored at 'data' (as its slot kind
 * stores them) at 'p' (room known to be there); returns the new start.
 * number_down's cases outside the loops. */
static uint8_t *packed_down(uint8_t *p, pc_FieldType t, const char *data, size_t n) {
  uint32_t u32;
  uint64_t u64;
  int32_t i32;
  int64_t i64;
  switch (t) {
  case kPc_Type_Bool:
    for (size_t i = n; i-- > 0;) *--p = data[i] != 0;
    return p;
  case kPc_Type_Float:
  case kPc_Type_Fixed32:
  case kPc_Type_Sfixed32:
    p -= 4 * n;
    for (size_t i = 0; i < n; i++) {
      memcpy(&u32, data + 4 * i, 4);
      fixed_down(p + 4 * (i + 1), u32, 4);
    }
    return p;
  case kPc_Type_Double:
  case kPc_Type_Fixed64:
  case kPc_Type_Sfixed64:
    p -= 8 * n;
    for (size_t i = 0; i < n; i++) {
      memcpy(&u64, data + 8 * i, 8);
      fixed_down(p + 8 * (i + 1), u64, 8);
    }
    return p;
  case kPc_Type_Int32:
  case kPc_Type_Enum:
    for (size_t i = n; i-- > 0;) {
      memcpy(&i32, data + 4 * i, 4);
      p = varint_down(p, (uint64_t)(int64_t)i32);
    }
    return p;
  case kPc_Type_Uint32:
    for (size_t i = n; i-- > 0;) {
      memcpy(&u32, data + 4 * i, 4);
      p = varint_down(p, u32);
    }
    return p;
  case kPc_Type_Sint32:
    for (size_t i = n; i-- > 0;) {
      memcpy(&i32, data + 4 * i, 4);
      p = varint_down(p, pc_Wire_ZigZagEncode32(i32));
    }
    return p;
  case kPc_Type_Sint64:
    for (size_t i = n; i-- > 0;) {
      memcpy(&i64, data + 8 * i, 8);
      p = varint_down(p, pc_Wire_ZigZagEncode64(i64));
    }
    return p;
  default:
    for (size_t i = n; i-- > 0;) {
      memcpy(&u64, data + 8 * i, 8);
      p = varint_down(p, u64);
    }
    return p;
  }
}

/* A packed list: its elements, length and tag, in one reservation when
 * the list is short (a long one reserves per element rather than ten
 * bytes an element at once). */
static int put_packed(Enc *e, const pc_FieldDef *f, const pc_Array *arr) {
  pc_WireWriter *w = e->w;
  size_t elem = pc_FieldDef_ElemSize(f);
  const char *data = arr->data;
  pc_FieldType t = f->type;
  if (arr->size > 1024) {
    size_t before = pc_WireWriter_Size(w);
    for (size_t i = arr->size; i-- > 0;)
      if (!put_number(w, t, data + i * elem)) return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
    if (!pc_WireWriter_PutVarint(w, pc_WireWriter_Size(w) - before) ||
        !pc_WireWriter_PutTag(w, (uint32_t)f->number, kPc_Wire_Len))
      return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
    return 1;
  }
  if (!pc_WireWriter_Reserve(w, (arr->size + 2) * PC_WIRE_MAX_VARINT))
    return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
  uint8_t *end = w->ptr, *p = packed_down(end, t, data, arr->size);
  p = varint_down(p, (uint64_t)(end - p));
  w->ptr = varint_down(p, (uint64_t)(uint32_t)f->number << 3 | kPc_Wire_Len);
  return 1;
}

static int put_repeated(Enc *e, const pc_FieldDef *f, const pc_Array *arr) {
  if (arr == NULL || arr->size == 0) return 1;
  if (f->packed && f->type != kPc_Type_String && f->type != kPc_Type_Bytes &&
      f->type != kPc_Type_Message && f->type != kPc_Type_Group)
    return put_packed(e, f, arr);
  const char *data = arr->data;
  if (f->type == kPc_Type_Message) {
    pc_Message *const *subs = (pc_Message *const *)(const void *)data;
    for (size_t i = arr->size; i-- > 0;)
      if (!put_sub(e, f, subs[i])) return fail_in(e, "[%zu]", i);
    return 1;
  }
  size_t elem = pc_FieldDef_ElemSize(f);
  pc_FieldType t = f->type;
  if (t == kPc_Type_String || t == kPc_Type_Bytes) {
    const pc_StringView *strs = (const pc_StringView *)(const void *)data;
    int utf8 = checks_utf8(f);
    for (size_t i = arr->size; i-- > 0;)
      if (!put_string(e, f, &strs[i], utf8)) return fail_in(e, "[%zu]", i);
    return 1;
  }
  if (t == kPc_Type_Group) {
    for (size_t i = arr->size; i-- > 0;)
      if (!put_element(e, f, data + i * elem)) return fail_in(e, "[%zu]", i);
    return 1;
  }
  /* unpacked numbers: each value and its tag in one reservation */
  pc_WireWriter *w = e->w;
  uint64_t tag = (uint64_t)(uint32_t)f->number << 3 | (uint32_t)wire_type(t);
  for (size_t i = arr->size; i-- > 0;) {
    if (!pc_WireWriter_Reserve(w, (size_t)2 * PC_WIRE_MAX_VARINT))
      return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
    w->ptr = varint_down(number_down(w->ptr, t, data + i * elem), tag);
  }
  return 1;
}

static int put_map_entry(Enc *e, const pc_FieldDef *f, const pc_FieldDef *kf, const pc_FieldDef *vf,
                         const pc_MapEntry *ent) {
  pc_WireWriter *w = e->w;
  size_t before = pc_WireWriter_Size(w);
  if (!put_element(e, vf, &ent->value)) return fail_in_entry(e, kf, ent->key, 0);
  if (!put_element(e, kf, &ent->key)) return fail_in_entry(e, kf, ent->key, 1);
  size_t len = pc_WireWriter_Size(w) - before;
  if (!pc_WireWriter_Reserve(w, (size_t)2 * PC_WIRE_MAX_VARINT))
    return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
  w->ptr = varint_down(varint_down(w->ptr, len), (uint64_t)(uint32_t)f->number << 3 | kPc_Wire_Len);
  return 1; /* length and tag in one reservation */
}

static int put_map(Enc *e, const pc_FieldDef *f, const pc_Map *map) {
  if (map == NULL || map->size == 0) return 1;
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  if (!e->deterministic || map->size == 1) {
    for (size_t i = map->size; i-- > 0;)
      if (!put_map_entry(e, f, kf, vf, &map->entries[i])) return 0;
    return 1;
  }
  pc_WireWriter *w = e->w;
  if (map->size > SIZE_MAX / sizeof(const pc_MapEntry *))
    return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
  size_t bytes = map->size * sizeof(const pc_MapEntry *);
  const pc_MapEntry **items = w->alloc(w->ud, NULL, 0, bytes);
  if (items == NULL) return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
  pc_Map_SortEntries(map, kf->type, items);
  int ok = 1;
  for (size_t i = map->size; ok && i-- > 0;) ok = put_map_entry(e, f, kf, vf, items[i]);
  w->alloc(w->ud, (void *)items, bytes, 0);
  return ok;
}

/* Whether singular regular field 'f' is present (pc_Message_Has's rules,
 * inline for the common cases). */
static int present(const pc_Message *msg, const pc_FieldDef *f) {
  const char *slot = (const char *)msg + f->offset;
  if (f->hasbit >= 0) return (((const uint8_t *)msg)[8 + f->hasbit / 8] >> (f->hasbit % 8)) & 1;
  if (f->oneof != NULL) {
    uint32_t which;
    memcpy(&which, (const char *)msg + f->case_offset, 4);
    return which == (uint32_t)f->number;
  }
  switch (f->slot) {
  case kPc_Slot_Bool: return *slot != 0;
  case kPc_Slot_32: {
    uint32_t v;
    memcpy(&v, slot, 4);
    return v != 0;
  }
  case kPc_Slot_64: {
    uint64_t v;
    memcpy(&v, slot, 8);
    return v != 0;
  }
  case kPc_Slot_String: return ((const pc_StringView *)(const void *)slot)->size != 0;
  default: {
    const void *ptr;
    memcpy(&ptr, slot, sizeof ptr);
    return ptr != NULL;
  }
  }
}

/* The pointer stored at 'slot' (which may be unaligned for the reader). */
static const void *load_ptr(const void *slot) {
  const void *p;
  memcpy(&p, slot, sizeof p);
  return p;
}

static int put_field(Enc *e, const pc_Message *msg, const pc_FieldDef *f) {
  const char *slot = (const char *)msg + f->offset;
  if (f->is_map) {
    return put_map(e, f, load_ptr(slot));
  }
  if (f->label == kPc_Label_Repeated) {
    return put_repeated(e, f, load_ptr(slot));
  }
  if (!present(msg, f)) return 1;
  if (f->oneof != NULL && (f->slot == kPc_Slot_Message)) {
    /* A oneof member's slot may be shared; read it through the API. */
    pc_Value v = pc_Message_Get(msg, f);
    return put_element(e, f, &v.m);
  }
  return put_element(e, f, slot);
}

static int put_extension(Enc *e, const pc_Extension *x) {
  const pc_FieldDef *f = x->field;
  if (f->label == kPc_Label_Repeated) return put_repeated(e, f, x->value.a);
  if ((f->type == kPc_Type_Message || f->type == kPc_Type_Group) && x->value.m == NULL) return 1;
  return put_element(e, f, &x->value);
}

/* A singular number that is not a oneof member, present (its value 'v'
 * as its slot holds it, widened): value and tag written in one
 * reservation. Returns 0 on allocation failure. */
static int put_number_slot(Enc *e, const pc_FieldSlot *fs, uint64_t v) {
  pc_WireWriter *w = e->w;
  if (!pc_WireWriter_Reserve(w, (size_t)2 * PC_WIRE_MAX_VARINT))
    return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
  uint8_t *p = w->ptr;
  pc_WireType wt = kPc_Wire_Varint;
  switch ((pc_FieldType)fs->type) {
  case kPc_Type_Float:
  case kPc_Type_Fixed32:
  case kPc_Type_Sfixed32:
    p = fixed_down(p, v, 4);
    wt = kPc_Wire_Fixed32;
    break;
  case kPc_Type_Double:
  case kPc_Type_Fixed64:
  case kPc_Type_Sfixed64:
    p = fixed_down(p, v, 8);
    wt = kPc_Wire_Fixed64;
    break;
  case kPc_Type_Int32:
  case kPc_Type_Enum: p = varint_down(p, (uint64_t)(int64_t)(int32_t)(uint32_t)v); break;
  case kPc_Type_Sint32: p = varint_down(p, pc_Wire_ZigZagEncode32((int32_t)(uint32_t)v)); break;
  case kPc_Type_Sint64: p = varint_down(p, pc_Wire_ZigZagEncode64((int64_t)v)); break;
  default: p = varint_down(p, v); break;
  }
  w->ptr = varint_down(p, (uint64_t)(uint32_t)fs->number << 3 | (uint32_t)wt);
  return 1;
}

/* Whether a singular field outside a oneof, of value 'v' (the slot's,
 * widened) or empty string when 'v' is 0, is absent from 'msg'. */
static inline int slot_absent(const pc_Message *msg, const pc_FieldSlot *fs, uint64_t v) {
  if (fs->hasbit < 0) return v == 0;
  return !((((const uint8_t *)msg)[8 + fs->hasbit / 8] >> (fs->hasbit % 8)) & 1);
}

/* The fields of 'msg' in [lo, hi) of its slots_by_number, highest number
 * first; an absent one is told from its compact record alone. */
static int put_slots(Enc *e, const pc_Message *msg, const pc_FieldSlot *lo,
                     const pc_FieldSlot *hi) {
  for (const pc_FieldSlot *fs = hi; fs-- > lo;) {
    const char *slot = (const char *)msg + fs->offset;
    uint64_t v;
    int ok;
    switch ((pc_WalkKind)fs->kind) {
    case kPc_Walk_Bool: v = *(const uint8_t *)slot != 0; break;
    case kPc_Walk_32: {
      uint32_t u;
      memcpy(&u, slot, 4);
      v = u;
      break;
    }
    case kPc_Walk_64: memcpy(&v, slot, 8); break;
    case kPc_Walk_String: {
      const pc_StringView *sv = (const pc_StringView *)(const void *)slot;
      if (slot_absent(msg, fs, sv->size)) continue;
      ok = put_string(e, fs->field, sv, fs->utf8);
      goto next;
    }
    case kPc_Walk_Message: {
      const pc_Message *sub = load_ptr(slot);
      if (sub == NULL) continue;
      /* groups (also message slots) through put_element */
      ok = fs->type == kPc_Type_Message ? put_sub(e, fs->field, sub)
                                        : put_element(e, fs->field, slot);
      goto next;
    }
    case kPc_Walk_Array: {
      const pc_Array *arr = load_ptr(slot);
      if (arr == NULL || arr->size == 0) continue;
      ok = put_repeated(e, fs->field, arr);
      goto next;
    }
    case kPc_Walk_Map: {
      const pc_Map *map = load_ptr(slot);
      if (map == NULL || map->size == 0) continue;
      ok = put_map(e, fs->field, map);
      goto next;
    }
    default: { /* a oneof member: its case says whether it is the one set */
      uint32_t which;
      memcpy(&which, (const char *)msg + fs->case_offset, 4);
      if (which != (uint32_t)fs->number) continue;
      /* the member set: its slot holds its value (put_field's checks,
       * made already) */
      const pc_FieldDef *f = fs->field;
      if (f->slot == kPc_Slot_String)
        ok = put_string(e, f, (const pc_StringView *)(const void *)slot, fs->utf8);
      else if (f->slot == kPc_Slot_Message && f->type == kPc_Type_Message)
        ok = put_sub(e, f, load_ptr(slot));
      else
        ok = put_field(e, msg, f);
      goto next;
    }
    }
    if (slot_absent(msg, fs, v)) continue;
    ok = put_number_slot(e, fs, v);
  next:
    if (!ok) return fail_in_field(e, fs->field);
  }
  return 1;
}

static int encode_message(Enc *e, const pc_Message *msg, const pc_MessageDef *m) {
  if (++e->depth > PC_ENCODE_MAX_DEPTH) return enc_fail(e, kPc_EncodeStatus_TooDeep);
  pc_WireWriter *w = e->w;
  const pc_FieldSlot *first = m->slots_by_number, *hi = first + m->field_count;
  /* Offset 0 holds the internal part (unknown bytes, extensions), or the
   * def with bit 0 set when there is none (message.h's layout). */
  const pc_MessageInternal *in = load_ptr(msg);
  if (((uintptr_t)in & 1) == 0) {
    if (in->unknown_size > 0 && !pc_WireWriter_PutBytes(w, in->unknown, in->unknown_size))
      return enc_fail(e, kPc_EncodeStatus_OutOfMemory);
    /* Fields and extensions merged, highest number first. */
    for (size_t j = in->ext_count; j > 0; j--) {
      const pc_Extension *x = &in->ext[j - 1];
      const pc_FieldSlot *lo = hi;
      while (lo > first && lo[-1].number > x->field->number) lo--;
      if (!put_slots(e, msg, lo, hi)) return 0;
      if (!put_extension(e, x)) return fail_in_field(e, x->field);
      hi = lo;
    }
  }
  if (!put_slots(e, msg, first, hi)) return 0;
  e->depth--;
  return 1;
}

/* The end of an encode that failed, or that wrote a type with required
 * fields (then 'e->status' is Ok). */
static pc_EncodeStatus finish(const Enc *e) {
  if (e->status != kPc_EncodeStatus_Ok) {
    /* (too deep: the root type alone, not a path of as many steps) */
    int deep = e->status == kPc_EncodeStatus_TooDeep;
    const char *root = e->root_def->full_name, *cut = e->cut && !deep ? "..." : "";
    const char *at = deep ? "" : e->path + e->at;
    char reason[64];
    if (e->status == kPc_EncodeStatus_BadUtf8)
      snprintf(reason, sizeof reason, "invalid UTF-8 at byte %zu", e->bad_byte + 1);
    else
      snprintf(reason, sizeof reason, "%s", pc_EncodeStatus_String(e->status));
    /* The place (at most half of PC_ERROR_MAX) and the reason always show
     * whole: a root name too long for the rest gives way, "..." and its
     * tail (the type's own name) kept, never from within a UTF-8 sequence. */
    size_t room = PC_ERROR_MAX - 1 - strlen(cut) - strlen(at) - 2 - strlen(reason);
    size_t len = strlen(root);
    const char *dots = "";
    if (len > room) {
      dots = "...";
      root += len - (room - 3);
      while (((unsigned char)*root & 0xC0) == 0x80) root++;
    }
    pc_Error_Set(e->err, "%s%s%s%s: %s", dots, root, cut, at, reason);
    return e->status;
  }
  if (!(e->opts != NULL && e->opts->partial) &&
      pc_Message_CheckRequired(e->root, e->root_def, e->err) != 0)
    return kPc_EncodeStatus_MissingRequired;
  return kPc_EncodeStatus_Ok;
}

pc_EncodeStatus pc_Encode(const pc_Message *msg, const pc_MessageDef *m,
                          const pc_EncodeOptions *opts, pc_WireWriter *w, pc_Error *err) {
  Enc e;
  e.w = w;
  e.deterministic = opts != NULL && opts->deterministic;
  e.depth = -1; /* the root is level 0 */
  e.required = m->required_count;
  e.status = kPc_EncodeStatus_Ok;
  e.path[sizeof e.path - 1] = '\0'; /* enc_fail sets the rest of the failure's place */
  e.at = sizeof e.path - 1;
  e.cut = 0;
  e.bad_byte = 0;
  e.root = msg;
  e.root_def = m;
  e.opts = opts;
  e.err = err;
  /* Only messages holding a type with required fields pay for the walk. */
  if (!encode_message(&e, msg, m) || e.required != 0) return finish(&e);
  return kPc_EncodeStatus_Ok;
}
