#include "message/message.h"
#include "base/hash.h"

#include <stdlib.h>
#include <string.h>

static pc_Value load(const void *p, pc_SlotKind slot) {
  pc_Value v;
  memset(&v, 0, sizeof(v));
  switch (slot) { /* constant sizes: copies inlined, not a call to memcpy */
  case kPc_Slot_Bool: memcpy(&v, p, 1); break;
  case kPc_Slot_32: memcpy(&v, p, 4); break;
  case kPc_Slot_64: memcpy(&v, p, 8); break;
  case kPc_Slot_String: memcpy(&v, p, sizeof(pc_StringView)); break;
  default: memcpy(&v, p, sizeof(void *)); break;
  }
  return v;
}

static void store(void *p, pc_SlotKind slot, pc_Value v) {
  memcpy(p, &v, pc_Slot_Size(slot));
}

static int is_zero(const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    if (c[i]) return 0;
  return 1;
}

/* -- Instances ------------------------------------------------------------ */

/* The offset-0 word of an empty message of type 'm'. */
static void set_type_word(void *msg, const pc_MessageDef *m) {
  const char *w = (const char *)m + 1; /* defs are pointer-aligned: bit 0 free */
  memcpy(msg, &w, sizeof(void *));
}

pc_Message *pc_Message_New(const pc_MessageDef *m, pc_Arena *a) {
  void *msg = pc_Arena_Calloc(a, m->size);
  if (msg != NULL) set_type_word(msg, m);
  return msg;
}

void pc_Message_Init(const pc_MessageDef *m, void *mem) {
  memset(mem, 0, m->size);
  set_type_word(mem, m);
}

/* The internal part, or NULL while offset 0 holds the tagged def. */
static pc_MessageInternal *internal(const pc_Message *msg) {
  pc_MessageInternal *in;
  memcpy(&in, msg, sizeof(void *));
  return ((uintptr_t)in & 1) ? NULL : in;
}

static pc_MessageInternal *mutable_internal(pc_Message *msg, pc_Arena *a) {
  pc_MessageInternal *in = internal(msg);
  if (in == NULL) {
    in = pc_Arena_Calloc(a, sizeof(*in));
    if (in != NULL) {
      in->def = pc_Message_Def(msg);
      memcpy(msg, &in, sizeof(void *));
    }
  }
  return in;
}

static int get_hasbit(const pc_Message *msg, int32_t bit) {
  const uint8_t *bits = (const uint8_t *)msg + sizeof(void *);
  return (bits[bit / 8] >> (bit % 8)) & 1;
}

static void set_hasbit(pc_Message *msg, int32_t bit, int on) {
  uint8_t *bits = (uint8_t *)msg + sizeof(void *);
  if (on)
    bits[bit / 8] = (uint8_t)(bits[bit / 8] | (1u << (bit % 8)));
  else
    bits[bit / 8] = (uint8_t)(bits[bit / 8] & ~(1u << (bit % 8)));
}

static uint32_t get_case(const pc_Message *msg, uint32_t off) {
  uint32_t c;
  memcpy(&c, (const char *)msg + off, 4);
  return c;
}

static void set_case(pc_Message *msg, uint32_t off, uint32_t c) {
  memcpy((char *)msg + off, &c, 4);
}

static pc_Extension *find_ext(const pc_Message *msg, const pc_FieldDef *f, size_t *pos) {
  pc_MessageInternal *in = internal(msg);
  size_t lo = 0, hi = in ? in->ext_count : 0;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int32_t n = in->ext[mid].field->number;
    if (n == f->number && in->ext[mid].field == f) return &in->ext[mid];
    if (n < f->number)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (pos != NULL) *pos = lo;
  return NULL;
}

int pc_Message_Has(const pc_Message *msg, const pc_FieldDef *f) {
  if (f->is_extension) {
    const pc_Value *v = pc_Message_GetExtension(msg, f);
    if (v == NULL) return 0;
    return f->label != kPc_Label_Repeated || (v->a != NULL && v->a->size > 0);
  }
  const char *slot = (const char *)msg + f->offset;
  if (f->case_offset != 0) return get_case(msg, f->case_offset) == (uint32_t)f->number;
  if (f->hasbit >= 0) return get_hasbit(msg, f->hasbit);
  switch (f->slot) {
  case kPc_Slot_Array: {
    const pc_Array *arr = *(pc_Array *const *)slot;
    return arr != NULL && arr->size > 0;
  }
  case kPc_Slot_Map: {
    const pc_Map *map = *(pc_Map *const *)slot;
    return map != NULL && map->size > 0;
  }
  case kPc_Slot_String: return ((const pc_StringView *)slot)->size > 0;
  default: return !is_zero(slot, pc_Slot_Size(f->slot));
  }
}

static pc_Value default_of(const pc_FieldDef *f) {
  pc_Value v;
  memset(&v, 0, sizeof(v));
  if (f->label == kPc_Label_Repeated || f->message != NULL) return v;
  if (f->slot == kPc_Slot_String ||
      (f->is_extension && pc_FieldDef_ElemSlot(f) == kPc_Slot_String)) {
    v.s.data = f->default_value.s.data;
    v.s.size = f->default_value.s.size;
  } else {
    memcpy(&v, &f->default_value,
           sizeof(f->default_value) < sizeof(v) ? sizeof(f->default_value) : sizeof(v));
  }
  return v;
}

pc_Value pc_Message_Get(const pc_Message *msg, const pc_FieldDef *f) {
  if (f->is_extension) {
    const pc_Value *v = pc_Message_GetExtension(msg, f);
    return v ? *v : default_of(f);
  }
  if (f->case_offset != 0 && get_case(msg, f->case_offset) != (uint32_t)f->number)
    return default_of(f);
  if (f->hasbit >= 0 && !get_hasbit(msg, f->hasbit)) return default_of(f);
  return load((const char *)msg + f->offset, f->slot);
}

void pc_Message_Set(pc_Message *msg, const pc_FieldDef *f, pc_Value v) {
  if (f->case_offset != 0) {
    /* The members share the slot: clear the widest member's bytes first. */
    memset((char *)msg + f->offset, 0, f->oneof->slot_size);
    set_case(msg, f->case_offset, (uint32_t)f->number);
  }
  if (f->hasbit >= 0) set_hasbit(msg, f->hasbit, 1);
  store((char *)msg + f->offset, f->slot, v);
}

void pc_Message_ClearField(pc_Message *msg, const pc_FieldDef *f) {
  if (f->is_extension) {
    size_t pos;
    pc_Extension *e = find_ext(msg, f, &pos);
    if (e != NULL) {
      pc_MessageInternal *in = internal(msg);
      size_t i = (size_t)(e - in->ext);
      memmove(&in->ext[i], &in->ext[i + 1], (in->ext_count - i - 1) * sizeof(pc_Extension));
      in->ext_count--;
    }
    return;
  }
  if (f->case_offset != 0) {
    if (get_case(msg, f->case_offset) != (uint32_t)f->number) return;
    set_case(msg, f->case_offset, 0);
  }
  if (f->hasbit >= 0) set_hasbit(msg, f->hasbit, 0);
  memset((char *)msg + f->offset, 0, pc_Slot_Size(f->slot));
}

void pc_Message_Clear(pc_Message *msg, const pc_MessageDef *m) {
  pc_Message_Init(m, msg);
}

const pc_FieldDef *pc_Message_WhichOneof(const pc_Message *msg, const pc_OneofDef *o) {
  if (o->synthetic) return pc_Message_Has(msg, o->fields[0]) ? o->fields[0] : NULL;
  uint32_t c = get_case(msg, o->case_offset);
  for (uint32_t i = 0; i < o->field_count; i++)
    if ((uint32_t)o->fields[i]->number == c) return o->fields[i];
  return NULL;
}

/* -- Arrays --------------------------------------------------------------- */

pc_Array *pc_Array_New(pc_Arena *a) {
  return pc_Arena_Calloc(a, sizeof(pc_Array));
}

int pc_Array_Resize(pc_Array *arr, size_t size, size_t elem, pc_Arena *a) {
  if (size > arr->cap) {
    size_t cap = arr->cap ? arr->cap * 2 : 4;
    while (cap < size) cap *= 2;
    if (cap > ((size_t)-1) / 2 / elem) return 0;
    void *data = pc_Arena_Malloc(a, cap * elem);
    if (data == NULL) return 0;
    if (arr->size > 0) memcpy(data, arr->data, arr->size * elem);
    arr->data = data;
    arr->cap = cap;
  }
  if (size > arr->size) memset((char *)arr->data + arr->size * elem, 0, (size - arr->size) * elem);
  arr->size = size;
  return 1;
}

int pc_Array_Append(pc_Array *arr, const pc_Value *v, size_t elem, pc_Arena *a) {
  if (!pc_Array_Resize(arr, arr->size + 1, elem, a)) return 0;
  memcpy((char *)arr->data + (arr->size - 1) * elem, v, elem);
  return 1;
}

pc_Value pc_Array_Get(const pc_Array *arr, size_t i, pc_SlotKind slot) {
  return load((const char *)arr->data + i * pc_Slot_Size(slot), slot);
}

void pc_Array_Set(pc_Array *arr, size_t i, pc_SlotKind slot, pc_Value v) {
  store((char *)arr->data + i * pc_Slot_Size(slot), slot, v);
}

/* -- Maps ----------------------------------------------------------------- */

/* The index's hash of 'key', seeded with where the map is: a sender cannot
 * know it, so it cannot pick keys of one slot (with a fixed hash, 50,000
 * integer keys of a 650 KB request sharing a slot took 2.7 s to decode). */
static uint32_t key_hash(const pc_Map *map, pc_SlotKind k, pc_Value key) {
  uint64_t seed = pc_Hash_Mix64((uint64_t)(uintptr_t)map), h;
  if (k == kPc_Slot_String) {
    h = pc_Hash_Mix64(pc_Hash_More(seed, key.s.data, key.s.size));
  } else {
    h = k == kPc_Slot_Bool ? key.b : k == kPc_Slot_32 ? key.u32 : key.u64;
    h = pc_Hash_Mix64(h ^ seed);
  }
  return (uint32_t)(h ^ (h >> 32));
}

static int key_eq(pc_SlotKind k, pc_Value x, pc_Value y) {
  switch (k) {
  case kPc_Slot_Bool: return x.b == y.b;
  case kPc_Slot_32: return x.u32 == y.u32;
  case kPc_Slot_String:
    return x.s.size == y.s.size && (x.s.size == 0 || memcmp(x.s.data, y.s.data, x.s.size) == 0);
  default: return x.u64 == y.u64;
  }
}

pc_Map *pc_Map_New(pc_Arena *a) {
  return pc_Arena_Calloc(a, sizeof(pc_Map));
}

static void index_insert(pc_Map *map, pc_SlotKind k, size_t entry) {
  size_t mask = map->index_cap - 1;
  size_t i = key_hash(map, k, map->entries[entry].key) & mask;
  while (map->index[i] != 0) i = (i + 1) & mask;
  map->index[i] = (uint32_t)(entry + 1);
}

static size_t index_find(const pc_Map *map, pc_SlotKind k, pc_Value key, int *found) {
  size_t mask = map->index_cap - 1;
  size_t i = key_hash(map, k, key) & mask;
  *found = 0;
  while (map->index[i] != 0) {
    if (key_eq(k, map->entries[map->index[i] - 1].key, key)) {
      *found = 1;
      return i;
    }
    i = (i + 1) & mask;
  }
  return i;
}

pc_Value *pc_Map_Find(const pc_Map *map, pc_SlotKind k, pc_Value key) {
  if (map == NULL || map->size == 0) return NULL;
  int found;
  size_t i = index_find(map, k, key, &found);
  return found ? &map->entries[map->index[i] - 1].value : NULL;
}

static void reindex(pc_Map *map, pc_SlotKind k) {
  memset(map->index, 0, map->index_cap * sizeof(uint32_t));
  for (size_t e = 0; e < map->size; e++) index_insert(map, k, e);
}

static int rebuild_index(pc_Map *map, pc_SlotKind k, size_t cap, pc_Arena *a) {
  uint32_t *index = pc_Arena_Malloc(a, cap * sizeof(uint32_t));
  if (index == NULL) return 0;
  map->index = index;
  map->index_cap = cap;
  reindex(map, k);
  return 1;
}

pc_Value *pc_Map_Set(pc_Map *map, pc_SlotKind k, pc_Value key, pc_Value value, pc_Arena *a) {
  pc_Value *v = pc_Map_Find(map, k, key);
  if (v != NULL) {
    *v = value;
    return v;
  }
  return pc_Map_Insert(map, k, key, value, a);
}

pc_Value *pc_Map_Insert(pc_Map *map, pc_SlotKind k, pc_Value key, pc_Value value, pc_Arena *a) {
  if (map->size == map->cap) {
    size_t cap = map->cap ? map->cap * 2 : 4;
    if (cap > UINT32_MAX / 4) return NULL;
    pc_MapEntry *entries = pc_Arena_Malloc(a, cap * sizeof(pc_MapEntry));
    if (entries == NULL) return NULL;
    if (map->size > 0) memcpy(entries, map->entries, map->size * sizeof(pc_MapEntry));
    pc_MapEntry *old = map->entries;
    size_t old_cap = map->cap;
    map->entries = entries;
    map->cap = cap;
    if (!rebuild_index(map, k, cap * 2, a)) {
      map->entries = old;
      map->cap = old_cap;
      return NULL;
    }
  }
  map->entries[map->size].key = key;
  map->entries[map->size].value = value;
  index_insert(map, k, map->size);
  return &map->entries[map->size++].value;
}

void pc_Map_Clear(pc_Map *map) {
  if (map == NULL) return;
  map->size = 0;
  if (map->index != NULL) memset(map->index, 0, map->index_cap * sizeof(uint32_t));
}

int pc_Map_Delete(pc_Map *map, pc_SlotKind k, pc_Value key) {
  if (map == NULL || map->size == 0) return 0;
  int found;
  size_t i = index_find(map, k, key, &found);
  if (!found) return 0;
  size_t e = map->index[i] - 1;
  map->entries[e] = map->entries[map->size - 1];
  map->size--;
  reindex(map, k);
  return 1;
}

/* Map key comparisons for pc_Map_SortEntries, one per key class. */
#define KEY_CMP(name, member)                                                                      \
  static int name(const void *pa, const void *pb) {                                                \
    const pc_Value *x = &(*(const pc_MapEntry *const *)pa)->key;                                   \
    const pc_Value *y = &(*(const pc_MapEntry *const *)pb)->key;                                   \
    return (x->member > y->member) - (x->member < y->member);                                      \
  }
KEY_CMP(key_cmp_i32, i32)
KEY_CMP(key_cmp_u32, u32)
KEY_CMP(key_cmp_i64, i64)
KEY_CMP(key_cmp_u64, u64)
#undef KEY_CMP

static int key_cmp_bool(const void *pa, const void *pb) {
  const pc_Value *x = &(*(const pc_MapEntry *const *)pa)->key;
  const pc_Value *y = &(*(const pc_MapEntry *const *)pb)->key;
  return (x->b != 0) - (y->b != 0);
}

static int key_cmp_bytes(const void *pa, const void *pb) {
  const pc_Value *x = &(*(const pc_MapEntry *const *)pa)->key;
  const pc_Value *y = &(*(const pc_MapEntry *const *)pb)->key;
  size_t n = x->s.size < y->s.size ? x->s.size : y->s.size;
  int c = n ? memcmp(x->s.data, y->s.data, n) : 0;
  if (c != 0) return c;
  return (x->s.size > y->s.size) - (x->s.size < y->s.size);
}

void pc_Map_SortEntries(const pc_Map *map, pc_FieldType ktype, const pc_MapEntry **out) {
  int (*cmp)(const void *, const void *);
  switch (ktype) {
  case kPc_Type_Bool: cmp = key_cmp_bool; break;
  case kPc_Type_String:
  case kPc_Type_Bytes: cmp = key_cmp_bytes; break;
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32: cmp = key_cmp_i32; break;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: cmp = key_cmp_u32; break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: cmp = key_cmp_i64; break;
  default: cmp = key_cmp_u64; break;
  }
  for (size_t i = 0; i < map->size; i++) out[i] = &map->entries[i];
  if (map->size > 1) qsort((void *)out, map->size, sizeof(const pc_MapEntry *), cmp);
}

pc_Map *pc_Message_MutableMap(pc_Message *msg, const pc_FieldDef *f, pc_Arena *a) {
  pc_Map **slot = (pc_Map **)((char *)msg + f->offset);
  if (*slot == NULL) *slot = pc_Map_New(a);
  return *slot;
}

pc_Array *pc_Message_MutableArray(pc_Message *msg, const pc_FieldDef *f, pc_Arena *a) {
  if (f->is_extension) {
    pc_Value *v = pc_Message_MutableExtension(msg, f, a);
    return v ? v->a : NULL;
  }
  pc_Array **slot = (pc_Array **)((char *)msg + f->offset);
  if (*slot == NULL) *slot = pc_Array_New(a);
  return *slot;
}

/* -- Unknown fields and extensions ---------------------------------------- */

int pc_Message_AddUnknown(pc_Message *msg, const char *data, size_t size, pc_Arena *a) {
  pc_MessageInternal *in = mutable_internal(msg, a);
  if (in == NULL) return 0;
  if (in->unknown_size + size > in->unknown_cap) {
    size_t cap = in->unknown_cap ? in->unknown_cap * 2 : 64;
    while (cap < in->unknown_size + size) cap *= 2;
    char *p = pc_Arena_Malloc(a, cap);
    if (p == NULL) return 0;
    if (in->unknown_size > 0) memcpy(p, in->unknown, in->unknown_size);
    in->unknown = p;
    in->unknown_cap = cap;
  }
  if (size > 0) memcpy(in->unknown + in->unknown_size, data, size);
  in->unknown_size += size;
  return 1;
}

const char *pc_Message_GetUnknown(const pc_Message *msg, size_t *size) {
  pc_MessageInternal *in = internal(msg);
  *size = in ? in->unknown_size : 0;
  return in && in->unknown_size ? in->unknown : NULL;
}

void pc_Message_DiscardUnknown(pc_Message *msg) {
  pc_MessageInternal *in = internal(msg);
  if (in != NULL) in->unknown_size = 0;
}

const pc_Value *pc_Message_GetExtension(const pc_Message *msg, const pc_FieldDef *ext) {
  pc_Extension *e = find_ext(msg, ext, NULL);
  return e ? &e->value : NULL;
}

pc_Value *pc_Message_MutableExtension(pc_Message *msg, const pc_FieldDef *ext, pc_Arena *a) {
  size_t pos = 0;
  pc_Extension *e = find_ext(msg, ext, &pos);
  if (e != NULL) return &e->value;
  pc_Array *arr = NULL;
  if (ext->label == kPc_Label_Repeated) {
    arr = pc_Array_New(a);
    if (arr == NULL) return NULL;
  }
  pc_MessageInternal *in = mutable_internal(msg, a);
  if (in == NULL) return NULL;
  if (in->ext_count == in->ext_cap) {
    size_t cap = in->ext_cap ? in->ext_cap * 2 : 2;
    pc_Extension *p = pc_Arena_Malloc(a, cap * sizeof(pc_Extension));
    if (p == NULL) return NULL;
    if (in->ext_count > 0) memcpy(p, in->ext, in->ext_count * sizeof(pc_Extension));
    in->ext = p;
    in->ext_cap = cap;
  }
  memmove(&in->ext[pos + 1], &in->ext[pos], (in->ext_count - pos) * sizeof(pc_Extension));
  in->ext_count++;
  memset(&in->ext[pos], 0, sizeof(pc_Extension));
  in->ext[pos].field = ext;
  in->ext[pos].value.a = arr;
  return &in->ext[pos].value;
}

const pc_Extension *pc_Message_Extensions(const pc_Message *msg, size_t *count) {
  pc_MessageInternal *in = internal(msg);
  *count = in ? in->ext_count : 0;
  return in ? in->ext : NULL;
}

/* -- Whole messages ------------------------------------------------------- */

int pc_StringView_Copy(pc_StringView *out, const char *data, size_t size, pc_Arena *a) {
  if (size == 0) {
    out->data = NULL;
    out->size = 0;
    return 1;
  }
  char *p = pc_Arena_Malloc(a, size);
  if (p == NULL) return 0;
  memcpy(p, data, size);
  out->data = p;
  out->size = size;
  return 1;
}

/* A copy of one element value of kind 'slot' (strings and messages deep). */
static int copy_value(pc_Value *out, pc_Value v, pc_SlotKind slot, const pc_MessageDef *sub,
                      pc_Arena *a) {
  if (slot == kPc_Slot_String) return pc_StringView_Copy(&out->s, v.s.data, v.s.size, a);
  if (slot == kPc_Slot_Message) {
    out->m = v.m ? pc_Message_Clone(v.m, sub, a) : NULL;
    return v.m == NULL || out->m != NULL;
  }
  *out = v;
  return 1;
}

static int merge_array(pc_Array *dst, const pc_Array *src, const pc_FieldDef *f, pc_Arena *a) {
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  size_t elem = pc_Slot_Size(slot), base = dst->size;
  if (src == NULL || src->size == 0) return 1;
  if (!pc_Array_Resize(dst, base + src->size, elem, a)) return 0;
  for (size_t i = 0; i < src->size; i++) {
    pc_Value v = {0}; /* copy_value writes the slot's member only (GCC -O2 warned) */
    if (!copy_value(&v, pc_Array_Get(src, i, slot), slot, f->message, a)) {
      dst->size = base + i;
      return 0;
    }
    pc_Array_Set(dst, base + i, slot, v);
  }
  return 1;
}

static int merge_map(pc_Map *dst, const pc_Map *src, const pc_FieldDef *f, pc_Arena *a) {
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf), vs = pc_FieldDef_ElemSlot(vf);
  for (size_t i = 0; src != NULL && i < src->size; i++) {
    pc_Value k, v;
    if (!copy_value(&k, src->entries[i].key, ks, NULL, a)) return 0;
    if (!copy_value(&v, src->entries[i].value, vs, vf->message, a)) return 0;
    if (pc_Map_Set(dst, ks, k, v, a) == NULL) return 0;
  }
  return 1;
}

static int merge_ext(pc_Message *dst, const pc_Extension *e, pc_Arena *a) {
  const pc_FieldDef *f = e->field;
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  pc_Value *d = pc_Message_MutableExtension(dst, f, a);
  if (d == NULL) return 0;
  if (f->label == kPc_Label_Repeated) return merge_array(d->a, e->value.a, f, a);
  if (slot == kPc_Slot_Message) {
    if (e->value.m == NULL) return 1;
    if (d->m == NULL) {
      d->m = pc_Message_New(f->message, a);
      if (d->m == NULL) return 0;
    }
    return pc_Message_Merge(d->m, e->value.m, f->message, a);
  }
  return copy_value(d, e->value, slot, NULL, a);
}

int pc_Message_MergeField(pc_Message *dst, const pc_Message *src, const pc_FieldDef *f,
                          pc_Arena *a) {
  if (f->is_extension) {
    size_t pos;
    const pc_Extension *e = find_ext(src, f, &pos);
    return e == NULL || merge_ext(dst, e, a);
  }
  if (!pc_Message_Has(src, f)) return 1;
  pc_Value v = pc_Message_Get(src, f);
  if (f->slot == kPc_Slot_Array) {
    pc_Array *d = pc_Message_MutableArray(dst, f, a);
    return d != NULL && merge_array(d, v.a, f, a);
  }
  if (f->slot == kPc_Slot_Map) {
    pc_Map *d = pc_Message_MutableMap(dst, f, a);
    return d != NULL && merge_map(d, v.map, f, a);
  }
  if (f->slot == kPc_Slot_Message) {
    pc_Value cur = pc_Message_Get(dst, f);
    if (!pc_Message_Has(dst, f) || cur.m == NULL) {
      cur.m = pc_Message_New(f->message, a);
      if (cur.m == NULL) return 0;
      pc_Message_Set(dst, f, cur);
    }
    return pc_Message_Merge(cur.m, v.m, f->message, a);
  }
  pc_Value c;
  if (!copy_value(&c, v, f->slot, NULL, a)) return 0;
  pc_Message_Set(dst, f, c);
  return 1;
}

int pc_Message_Merge(pc_Message *dst, const pc_Message *src, const pc_MessageDef *m, pc_Arena *a) {
  for (uint32_t i = 0; i < m->field_count; i++)
    if (!pc_Message_MergeField(dst, src, &m->fields[i], a)) return 0;
  size_t n;
  const char *u = pc_Message_GetUnknown(src, &n);
  if (n > 0 && !pc_Message_AddUnknown(dst, u, n, a)) return 0;
  const pc_Extension *ext = pc_Message_Extensions(src, &n);
  for (size_t i = 0; i < n; i++)
    if (!merge_ext(dst, &ext[i], a)) return 0;
  return 1;
}

pc_Message *pc_Message_Clone(const pc_Message *src, const pc_MessageDef *m, pc_Arena *a) {
  pc_Message *dst = pc_Message_New(m, a);
  if (dst == NULL || !pc_Message_Merge(dst, src, m, a)) return NULL;
  return dst;
}

static int value_eq(pc_Value x, pc_Value y, const pc_FieldDef *f, pc_SlotKind slot,
                    const pc_MessageDef *sub) {
  switch (slot) {
  case kPc_Slot_Bool: return x.b == y.b;
  case kPc_Slot_32: return f->type == kPc_Type_Float ? x.f == y.f : x.u32 == y.u32;
  case kPc_Slot_64: return f->type == kPc_Type_Double ? x.d == y.d : x.u64 == y.u64;
  case kPc_Slot_String: return key_eq(kPc_Slot_String, x, y);
  case kPc_Slot_Message:
    if (x.m == NULL || y.m == NULL) return x.m == y.m;
    return pc_Message_Equal(x.m, y.m, sub);
  default: return 0;
  }
}

static int array_eq(const pc_Array *x, const pc_Array *y, const pc_FieldDef *f) {
  size_t nx = x ? x->size : 0, ny = y ? y->size : 0;
  if (nx != ny) return 0;
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  for (size_t i = 0; i < nx; i++)
    if (!value_eq(pc_Array_Get(x, i, slot), pc_Array_Get(y, i, slot), f, slot, f->message))
      return 0;
  return 1;
}

static int map_eq(const pc_Map *x, const pc_Map *y, const pc_FieldDef *f) {
  size_t nx = x ? x->size : 0, ny = y ? y->size : 0;
  if (nx != ny) return 0;
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  pc_SlotKind ks = pc_FieldDef_ElemSlot(kf), vs = pc_FieldDef_ElemSlot(vf);
  for (size_t i = 0; i < nx; i++) {
    const pc_Value *v = pc_Map_Find(y, ks, x->entries[i].key);
    if (v == NULL || !value_eq(x->entries[i].value, *v, vf, vs, vf->message)) return 0;
  }
  return 1;
}

static int ext_eq(const pc_Extension *x, const pc_Value *y) {
  const pc_FieldDef *f = x->field;
  if (f->label == kPc_Label_Repeated) return array_eq(x->value.a, y->a, f);
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  return value_eq(x->value, *y, f, slot, f->message);
}

int pc_Message_Equal(const pc_Message *a, const pc_Message *b, const pc_MessageDef *m) {
  if (a == b) return 1;
  for (uint32_t i = 0; i < m->field_count; i++) {
    const pc_FieldDef *f = &m->fields[i];
    int ha = pc_Message_Has(a, f), hb = pc_Message_Has(b, f);
    if (ha != hb) return 0;
    if (!ha) continue;
    pc_Value x = pc_Message_Get(a, f), y = pc_Message_Get(b, f);
    if (f->slot == kPc_Slot_Array) {
      if (!array_eq(x.a, y.a, f)) return 0;
    } else if (f->slot == kPc_Slot_Map) {
      if (!map_eq(x.map, y.map, f)) return 0;
    } else if (!value_eq(x, y, f, f->slot, f->message)) {
      return 0;
    }
  }
  size_t na, nb;
  const char *ua = pc_Message_GetUnknown(a, &na), *ub = pc_Message_GetUnknown(b, &nb);
  if (na != nb || (na > 0 && memcmp(ua, ub, na) != 0)) return 0;
  const pc_Extension *ea = pc_Message_Extensions(a, &na);
  pc_Message_Extensions(b, &nb);
  size_t seen = 0;
  for (size_t i = 0; i < na; i++) {
    const pc_Value *v = pc_Message_GetExtension(b, ea[i].field);
    int has_a = pc_Message_Has(a, ea[i].field);
    if (!has_a && (v == NULL || !pc_Message_Has(b, ea[i].field))) continue;
    if (v == NULL || !ext_eq(&ea[i], v)) return 0;
    seen++;
  }
  const pc_Extension *eb = pc_Message_Extensions(b, &nb);
  for (size_t i = 0; i < nb; i++)
    if (pc_Message_Has(b, eb[i].field)) seen--;
  return seen == 0;
}

typedef struct {
  pc_MessageVisitFn *visit;
  void *ud;
  int max_depth;
} Walk;

static int walk(const pc_Message *msg, const pc_MessageDef *m, const Walk *w, int depth) {
  if (depth > w->max_depth) return -1;
  int r = w->visit(msg, m, w->ud);
  if (r) return r;
  for (uint32_t i = 0; i < m->field_count; i++) {
    const pc_FieldDef *f = &m->fields[i];
    if (f->message == NULL || !pc_Message_Has(msg, f)) continue;
    pc_Value v = pc_Message_Get(msg, f);
    if (f->slot == kPc_Slot_Message) {
      r = walk(v.m, f->message, w, depth + 1);
    } else if (f->slot == kPc_Slot_Array && v.a != NULL) {
      for (size_t j = 0; j < v.a->size && !r; j++)
        r = walk(pc_Array_Get(v.a, j, kPc_Slot_Message).m, f->message, w, depth + 1);
    } else if (f->slot == kPc_Slot_Map && v.map != NULL) {
      const pc_FieldDef *vf = pc_FieldDef_MapValue(f);
      if (vf->message == NULL) continue;
      for (size_t j = 0; j < v.map->size && !r; j++)
        if (v.map->entries[j].value.m)
          r = walk(v.map->entries[j].value.m, vf->message, w, depth + 1);
    }
    if (r) return r;
  }
  size_t n;
  const pc_Extension *e = pc_Message_Extensions(msg, &n);
  for (size_t i = 0; i < n; i++) {
    const pc_FieldDef *f = e[i].field;
    if (f->message == NULL) continue;
    if (f->label != kPc_Label_Repeated) {
      if (e[i].value.m) r = walk(e[i].value.m, f->message, w, depth + 1);
    } else {
      for (size_t j = 0; e[i].value.a && j < e[i].value.a->size && !r; j++)
        r = walk(pc_Array_Get(e[i].value.a, j, kPc_Slot_Message).m, f->message, w, depth + 1);
    }
    if (r) return r;
  }
  return 0;
}

int pc_Message_Walk(const pc_Message *msg, const pc_MessageDef *m, int max_depth,
                    pc_MessageVisitFn *visit, void *ud) {
  if (max_depth > PC_MESSAGE_MAX_DEPTH) max_depth = PC_MESSAGE_MAX_DEPTH;
  Walk w = {visit, ud, max_depth < 0 ? 0 : max_depth};
  return walk(msg, m, &w, 0);
}

/* The visitor of pc_Message_Contains: 'ud' points to the needle. */
static int is_needle(const pc_Message *msg, const pc_MessageDef *m, void *ud) {
  (void)m;
  return msg == *(const pc_Message **)ud;
}

int pc_Message_Contains(const pc_Message *msg, const pc_MessageDef *m, const pc_Message *needle) {
  return pc_Message_ContainsWithin(msg, m, needle, PC_MESSAGE_MAX_DEPTH);
}

int pc_Message_ContainsWithin(const pc_Message *msg, const pc_MessageDef *m,
                              const pc_Message *needle, int max_depth) {
  int r = pc_Message_Walk(msg, m, max_depth, is_needle, &needle);
  return r < 0 ? 2 : r;
}
