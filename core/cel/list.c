/* Lists and maps: made while evaluating (maps with an open-addressing
 * index, keys compared as == compares them: 1 and 1u are the same key), or
 * views of a message's repeated and map fields, their elements converted
 * when read. */
#include "cel/cel_internal.h"

#include "base/hash.h"

#include <math.h>
#include <string.h>

/* -- Lists ---------------------------------------------------------------- */

int cel_new_list(cel_E *e, pc_CelValue *items, size_t n, uint32_t pos, pc_CelValue *out) {
  if (cel_check_size(e, n, pos) != kCel_Ok) return kCel_Fatal;
  pc_CelList *l = cel_alloc(e, sizeof *l, pos);
  if (l == NULL) return kCel_Fatal;
  memset(l, 0, sizeof *l);
  l->kind = kCelList_Values;
  l->size = n;
  l->items = items;
  memset(out, 0, sizeof *out);
  out->kind = kPc_Cel_List;
  out->v.list = l;
  return kCel_Ok;
}

size_t pc_CelList_Size(const pc_CelList *l) {
  return l->size;
}

int cel_list_get(cel_E *e, const pc_CelList *l, size_t i, uint32_t pos, pc_CelValue *out) {
  if (l->kind == kCelList_Values) {
    *out = l->items[i];
    return kCel_Ok;
  }
  pc_Value v = pc_Array_Get(l->arr, i, pc_FieldDef_ElemSlot(l->field));
  return cel_elem_value(e, l->field, v, pos, out);
}

/* -- Maps ----------------------------------------------------------------- */

/* A key as one of the kinds maps are keyed by; a double that is an
 * integer looks up the int / uint key of that value. 0 when 'k' can be no
 * key. */
static int normal_key(const pc_CelValue *k, pc_CelValue *out) {
  *out = *k;
  switch (k->kind) {
  case kPc_Cel_Int:
  case kPc_Cel_Uint:
  case kPc_Cel_Bool:
  case kPc_Cel_String: return 1;
  case kPc_Cel_Double: {
    double d = k->v.d;
    if (d != floor(d)) return 0;
    if (d >= 0 && d < 18446744073709551616.0) {
      *out = cel_uint((uint64_t)d);
      return 1;
    }
    if (d < 0 && d >= -9223372036854775808.0) {
      *out = cel_int((int64_t)d);
      return 1;
    }
    return 0;
  }
  default: return 0;
  }
}

/* Keys 1 and 1u hash alike, as they are equal. */
static uint64_t key_hash(const pc_CelValue *k) {
  switch (k->kind) {
  case kPc_Cel_Int:
    if (k->v.i >= 0) return pc_Hash_Mix64((uint64_t)k->v.i ^ 0x1000);
    return pc_Hash_Mix64((uint64_t)k->v.i ^ 0x2000);
  case kPc_Cel_Uint: return pc_Hash_Mix64(k->v.u ^ 0x1000);
  case kPc_Cel_Bool: return pc_Hash_Mix64((uint64_t)k->v.b ^ 0x3000);
  default: {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < k->v.s.size; i++)
      h = (h ^ (unsigned char)k->v.s.data[i]) * 1099511628211ULL;
    return pc_Hash_Mix64(h ^ 0x4000);
  }
  }
}

static int key_equal(const pc_CelValue *a, const pc_CelValue *b) {
  if (a->kind == kPc_Cel_String || b->kind == kPc_Cel_String)
    return a->kind == b->kind && a->v.s.size == b->v.s.size &&
           memcmp(a->v.s.data, b->v.s.data, a->v.s.size) == 0;
  if (a->kind == kPc_Cel_Bool || b->kind == kPc_Cel_Bool)
    return a->kind == b->kind && a->v.b == b->v.b;
  if (a->kind == b->kind) return a->kind == kPc_Cel_Int ? a->v.i == b->v.i : a->v.u == b->v.u;
  const pc_CelValue *i = a->kind == kPc_Cel_Int ? a : b, *u = a->kind == kPc_Cel_Int ? b : a;
  return i->v.i >= 0 && (uint64_t)i->v.i == u->v.u;
}

int cel_new_map(cel_E *e, pc_CelValue *keys, pc_CelValue *values, size_t n, uint32_t pos,
                pc_CelValue *out) {
  if (cel_check_size(e, n, pos) != kCel_Ok) return kCel_Fatal;
  size_t cap = 4;
  while (cap < 2 * n) cap *= 2;
  pc_CelMap *m = cel_alloc(e, sizeof *m, pos);
  uint32_t *index = m != NULL ? cel_alloc(e, cap * sizeof *index, pos) : NULL;
  if (index == NULL) return kCel_Fatal;
  memset(m, 0, sizeof *m);
  memset(index, 0, cap * sizeof *index);
  for (size_t i = 0; i < n; i++) {
    pc_CelValue k = keys[i];
    if (k.kind != kPc_Cel_Int && k.kind != kPc_Cel_Uint && k.kind != kPc_Cel_Bool &&
        k.kind != kPc_Cel_String)
      return cel_fail(e, pos, "unsupported key type: %s", cel_type_name(&k));
    size_t slot = key_hash(&k) & (cap - 1);
    while (index[slot] != 0) {
      if (key_equal(&keys[index[slot] - 1], &k))
        return cel_fail(e, pos, "repeated key in a map literal");
      /* each key compared is a step: keys a request picked to share a
         slot (transformMap over its fields) probe within the budget */
      if (cel_steps(e, 1, pos) != kCel_Ok) return kCel_Fatal;
      slot = (slot + 1) & (cap - 1);
    }
    index[slot] = (uint32_t)(i + 1);
  }
  if (cel_steps(e, n, pos) != kCel_Ok) return kCel_Fatal;
  m->kind = kCelMap_Values;
  m->size = n;
  m->keys = keys;
  m->values = values;
  m->index = index;
  m->index_cap = cap;
  memset(out, 0, sizeof *out);
  out->kind = kPc_Cel_Map;
  out->v.map = m;
  return kCel_Ok;
}

size_t pc_CelMap_Size(const pc_CelMap *m) {
  return m->size;
}

int cel_map_entry(cel_E *e, const pc_CelMap *m, size_t i, uint32_t pos, pc_CelValue *key,
                  pc_CelValue *value) {
  if (m->kind == kCelMap_Values) {
    if (key != NULL) *key = m->keys[i];
    if (value != NULL) *value = m->values[i];
    return kCel_Ok;
  }
  const pc_MapEntry *ent = &m->map->entries[i];
  int rc = kCel_Ok;
  if (key != NULL) rc = cel_elem_value(e, pc_FieldDef_MapKey(m->field), ent->key, pos, key);
  if (rc == kCel_Ok && value != NULL)
    rc = cel_elem_value(e, pc_FieldDef_MapValue(m->field), ent->value, pos, value);
  return rc;
}

/* A CEL key as a key of map field 'kf' (its field type), or 0 when no key
 * of that field can equal it. */
static int field_key(const pc_FieldDef *kf, const pc_CelValue *k, pc_Value *out) {
  memset(out, 0, sizeof *out);
  int64_t i;
  uint64_t u;
  int neg;
  switch (k->kind) {
  case kPc_Cel_Bool:
    if (kf->type != kPc_Type_Bool) return 0;
    out->b = (uint8_t)k->v.b;
    return 1;
  case kPc_Cel_String:
    if (kf->type != kPc_Type_String) return 0;
    out->s.data = k->v.s.data;
    out->s.size = k->v.s.size;
    return 1;
  case kPc_Cel_Int:
    neg = k->v.i < 0;
    i = k->v.i;
    u = (uint64_t)k->v.i;
    break;
  case kPc_Cel_Uint:
    neg = 0;
    u = k->v.u;
    i = (int64_t)k->v.u;
    if (u > (uint64_t)INT64_MAX) i = -1; /* too big for a signed key: caught below */
    break;
  default: return 0;
  }
  switch (kf->type) {
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
    if ((k->kind == kPc_Cel_Uint && u > INT32_MAX) || i < INT32_MIN || i > INT32_MAX) return 0;
    out->i32 = (int32_t)i;
    return 1;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
    if (k->kind == kPc_Cel_Uint && u > (uint64_t)INT64_MAX) return 0;
    out->i64 = i;
    return 1;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32:
    if (neg || u > UINT32_MAX) return 0;
    out->u32 = (uint32_t)u;
    return 1;
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64:
    if (neg) return 0;
    out->u64 = u;
    return 1;
  default: return 0;
  }
}

int cel_map_find(cel_E *e, const pc_CelMap *m, const pc_CelValue *key, uint32_t pos,
                 pc_CelValue *out, int *found) {
  *found = 0;
  pc_CelValue k;
  if (!normal_key(key, &k)) return kCel_Ok;
  if (m->kind == kCelMap_Values) {
    size_t slot = key_hash(&k) & (m->index_cap - 1);
    while (m->index[slot] != 0) {
      size_t i = m->index[slot] - 1;
      if (key_equal(&m->keys[i], &k)) {
        *found = 1;
        if (out != NULL) *out = m->values[i];
        return kCel_Ok;
      }
      if (cel_steps(e, 1, pos) != kCel_Ok) return kCel_Fatal;
      slot = (slot + 1) & (m->index_cap - 1);
    }
    return kCel_Ok;
  }
  if (m->map == NULL) return kCel_Ok;
  const pc_FieldDef *kf = pc_FieldDef_MapKey(m->field);
  pc_Value fk;
  if (!field_key(kf, &k, &fk)) return kCel_Ok;
  pc_Value *v = pc_Map_Find(m->map, pc_FieldDef_ElemSlot(kf), fk);
  if (v == NULL) return kCel_Ok;
  *found = 1;
  if (out == NULL) return kCel_Ok;
  return cel_elem_value(e, pc_FieldDef_MapValue(m->field), *v, pos, out);
}
