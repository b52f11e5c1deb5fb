/* Values: errors and the budget, constructors, lists and maps, equality
 * and ordering (cel-spec's heterogeneous equality: numbers compare by
 * value across int, uint and double; values of other different types are
 * unequal), and values as text (string(), format's '%s'). */
#include "cel/cel_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Past this many levels of nested lists and maps, comparing or printing
 * is refused (messages nest no deeper than PC_MESSAGE_MAX_DEPTH). */
#define CEL_VALUE_DEPTH (PC_MESSAGE_MAX_DEPTH + PC_CEL_MAX_DEPTH + 8)

/* -- Errors and the budget ------------------------------------------------ */

int cel_fail(cel_E *e, uint32_t pos, const char *fmt, ...) {
  if (!e->err_set) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    e->err_set = 1;
    e->err_pos = pos;
  }
  return kCel_Error;
}

int cel_fatal(cel_E *e, pc_CelStatus status, uint32_t pos, const char *what) {
  if (e->status == kPc_CelStatus_Ok) {
    e->status = status;
    e->err_set = 0; /* a limit outranks any error being carried */
    if (status == kPc_CelStatus_Limit)
      cel_fail(e, pos, "evaluation limit reached: %s", what);
    else
      cel_fail(e, pos, "out of memory");
  }
  return kCel_Fatal;
}

void cel_clear_error(cel_E *e) {
  e->err_set = 0;
  e->err[0] = '\0';
}

void *cel_alloc(cel_E *e, size_t n, uint32_t pos) {
  if (n == 0) n = 1;
  if (e->running && (n > e->limits.bytes || e->used.bytes > e->limits.bytes - n)) {
    cel_fatal(e, kPc_CelStatus_Limit, pos, "bytes");
    return NULL;
  }
  void *p = pc_Arena_Malloc(e->arena, n);
  if (p == NULL) {
    cel_fatal(e, kPc_CelStatus_NoMemory, pos, "memory");
    return NULL;
  }
  e->used.bytes += n;
  return p;
}

int cel_check_size(cel_E *e, size_t n, uint32_t pos) {
  if (!e->running) return kCel_Ok;
  if (n > e->limits.max_size) return cel_fatal(e, kPc_CelStatus_Limit, pos, "size");
  if (n > e->used.max_size) e->used.max_size = n;
  return kCel_Ok;
}

char *cel_new_string(cel_E *e, size_t n, uint32_t pos) {
  if (cel_check_size(e, n, pos) != kCel_Ok) return NULL;
  if (cel_steps(e, n / 16, pos) != kCel_Ok) return NULL;
  return cel_alloc(e, n + 1, pos);
}

/* -- Constructors ----------------------------------------------------------- */

pc_CelValue cel_bool(int b) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Bool;
  v.v.b = b != 0;
  return v;
}

pc_CelValue cel_int(int64_t i) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Int;
  v.v.i = i;
  return v;
}

pc_CelValue cel_uint(uint64_t u) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Uint;
  v.v.u = u;
  return v;
}

pc_CelValue cel_double(double d) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Double;
  v.v.d = d;
  return v;
}

pc_CelValue cel_string(const char *s, size_t n) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_String;
  v.v.s.data = s;
  v.v.s.size = n;
  return v;
}

pc_CelValue cel_bytes(const char *s, size_t n) {
  pc_CelValue v = cel_string(s, n);
  v.kind = kPc_Cel_Bytes;
  return v;
}

pc_CelValue cel_type(const char *name) {
  pc_CelValue v = cel_string(name, strlen(name));
  v.kind = kPc_Cel_Type;
  return v;
}

const char *cel_kind_name(pc_CelKind k) {
  switch (k) {
  case kPc_Cel_Unbound: return "unbound";
  case kPc_Cel_Null: return "null_type";
  case kPc_Cel_Bool: return "bool";
  case kPc_Cel_Int: return "int";
  case kPc_Cel_Uint: return "uint";
  case kPc_Cel_Double: return "double";
  case kPc_Cel_String: return "string";
  case kPc_Cel_Bytes: return "bytes";
  case kPc_Cel_List: return "list";
  case kPc_Cel_Map: return "map";
  case kPc_Cel_Message: return "message";
  case kPc_Cel_Timestamp: return "google.protobuf.Timestamp";
  case kPc_Cel_Duration: return "google.protobuf.Duration";
  case kPc_Cel_Type: return "type";
  }
  return "?";
}

const char *cel_type_name(const pc_CelValue *v) {
  if (v->kind == kPc_Cel_Message) return v->v.m.def->full_name;
  return cel_kind_name(v->kind);
}

const char *pc_CelValue_TypeName(const pc_CelValue *v) {
  return cel_type_name(v);
}

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

static uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

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
    if (k->v.i >= 0) return mix((uint64_t)k->v.i ^ 0x1000);
    return mix((uint64_t)k->v.i ^ 0x2000);
  case kPc_Cel_Uint: return mix(k->v.u ^ 0x1000);
  case kPc_Cel_Bool: return mix((uint64_t)k->v.b ^ 0x3000);
  default: {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < k->v.s.size; i++) h = (h ^ (unsigned char)k->v.s.data[i]) * 1099511628211ULL;
    return mix(h ^ 0x4000);
  }
  }
}

static int key_equal(const pc_CelValue *a, const pc_CelValue *b) {
  if (a->kind == kPc_Cel_String || b->kind == kPc_Cel_String)
    return a->kind == b->kind && a->v.s.size == b->v.s.size &&
           memcmp(a->v.s.data, b->v.s.data, a->v.s.size) == 0;
  if (a->kind == kPc_Cel_Bool || b->kind == kPc_Cel_Bool) return a->kind == b->kind && a->v.b == b->v.b;
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
      if (key_equal(&keys[index[slot] - 1], &k)) return cel_fail(e, pos, "repeated key in a map literal");
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

/* -- Equality and ordering -------------------------------------------------- */

static int is_number(pc_CelKind k) {
  return k == kPc_Cel_Int || k == kPc_Cel_Uint || k == kPc_Cel_Double;
}

/* Numbers of any two kinds: -1, 0, 1, or 2 when unordered (NaN). An int
 * or uint against a double compares as doubles (as cel-go: conformance's
 * "lossy" cases), an int against a uint exactly. */
static int compare_numbers(const pc_CelValue *a, const pc_CelValue *b) {
  if (a->kind == kPc_Cel_Double || b->kind == kPc_Cel_Double) {
    double x = a->kind == kPc_Cel_Double ? a->v.d : a->kind == kPc_Cel_Int ? (double)a->v.i : (double)a->v.u;
    double y = b->kind == kPc_Cel_Double ? b->v.d : b->kind == kPc_Cel_Int ? (double)b->v.i : (double)b->v.u;
    if (isnan(x) || isnan(y)) return 2;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a->kind == b->kind) {
    if (a->kind == kPc_Cel_Int) return a->v.i < b->v.i ? -1 : a->v.i > b->v.i;
    return a->v.u < b->v.u ? -1 : a->v.u > b->v.u;
  }
  if (a->kind == kPc_Cel_Int) {
    if (a->v.i < 0) return -1;
    uint64_t x = (uint64_t)a->v.i;
    return x < b->v.u ? -1 : x > b->v.u;
  }
  if (b->v.i < 0) return 1;
  uint64_t y = (uint64_t)b->v.i;
  return a->v.u < y ? -1 : a->v.u > y;
}

static int compare_bytes(const pc_StringView *a, const pc_StringView *b) {
  size_t n = a->size < b->size ? a->size : b->size;
  int c = n ? memcmp(a->data, b->data, n) : 0;
  if (c != 0) return c < 0 ? -1 : 1;
  return a->size < b->size ? -1 : a->size > b->size;
}

static int compare_time(const pc_CelValue *a, const pc_CelValue *b) {
  if (a->v.t.seconds != b->v.t.seconds) return a->v.t.seconds < b->v.t.seconds ? -1 : 1;
  return a->v.t.nanos < b->v.t.nanos ? -1 : a->v.t.nanos > b->v.t.nanos;
}

int cel_compare(cel_E *e, const pc_CelValue *a, const pc_CelValue *b, uint32_t pos, int *cmp) {
  if (is_number(a->kind) && is_number(b->kind)) {
    *cmp = compare_numbers(a, b);
    return kCel_Ok;
  }
  if (a->kind == b->kind) {
    switch (a->kind) {
    case kPc_Cel_String:
    case kPc_Cel_Bytes:
      *cmp = compare_bytes(&a->v.s, &b->v.s); /* UTF-8 orders as its code points */
      return cel_steps(e, (a->v.s.size < b->v.s.size ? a->v.s.size : b->v.s.size) / 16, pos);
    case kPc_Cel_Bool: *cmp = a->v.b < b->v.b ? -1 : a->v.b > b->v.b; return kCel_Ok;
    case kPc_Cel_Timestamp:
    case kPc_Cel_Duration: *cmp = compare_time(a, b); return kCel_Ok;
    default: break;
    }
  }
  return cel_fail(e, pos, "no matching overload for ordering %s and %s", cel_type_name(a),
                  cel_type_name(b));
}

static int equal_at(cel_E *e, const pc_CelValue *a, const pc_CelValue *b, uint32_t pos, int *eq,
                    int depth);

static int equal_lists(cel_E *e, const pc_CelList *a, const pc_CelList *b, uint32_t pos, int *eq,
                       int depth) {
  *eq = 0;
  if (a->size != b->size) return kCel_Ok;
  for (size_t i = 0; i < a->size; i++) {
    pc_CelValue x, y;
    int rc;
    if ((rc = cel_steps(e, 1, pos)) != kCel_Ok || (rc = cel_list_get(e, a, i, pos, &x)) != kCel_Ok ||
        (rc = cel_list_get(e, b, i, pos, &y)) != kCel_Ok ||
        (rc = equal_at(e, &x, &y, pos, eq, depth + 1)) != kCel_Ok)
      return rc;
    if (!*eq) return kCel_Ok;
  }
  *eq = 1;
  return kCel_Ok;
}

static int equal_maps(cel_E *e, const pc_CelMap *a, const pc_CelMap *b, uint32_t pos, int *eq,
                      int depth) {
  *eq = 0;
  if (a->size != b->size) return kCel_Ok;
  for (size_t i = 0; i < a->size; i++) {
    pc_CelValue k, x, y;
    int rc, found;
    if ((rc = cel_steps(e, 1, pos)) != kCel_Ok || (rc = cel_map_entry(e, a, i, pos, &k, &x)) != kCel_Ok ||
        (rc = cel_map_find(e, b, &k, pos, &y, &found)) != kCel_Ok)
      return rc;
    if (!found) return kCel_Ok;
    if ((rc = equal_at(e, &x, &y, pos, eq, depth + 1)) != kCel_Ok) return rc;
    if (!*eq) return kCel_Ok;
  }
  *eq = 1;
  return kCel_Ok;
}

static int equal_at(cel_E *e, const pc_CelValue *a, const pc_CelValue *b, uint32_t pos, int *eq,
                    int depth) {
  if (depth > CEL_VALUE_DEPTH) return cel_fail(e, pos, "values nested too deeply to compare");
  if (is_number(a->kind) && is_number(b->kind)) {
    *eq = compare_numbers(a, b) == 0;
    return kCel_Ok;
  }
  *eq = 0;
  if (a->kind != b->kind) return kCel_Ok;
  switch (a->kind) {
  case kPc_Cel_Unbound:
  case kPc_Cel_Null: *eq = 1; return kCel_Ok;
  case kPc_Cel_Bool: *eq = a->v.b == b->v.b; return kCel_Ok;
  case kPc_Cel_String:
  case kPc_Cel_Bytes:
  case kPc_Cel_Type:
    *eq = a->v.s.size == b->v.s.size &&
          (a->v.s.size == 0 || memcmp(a->v.s.data, b->v.s.data, a->v.s.size) == 0);
    return cel_steps(e, a->v.s.size / 16, pos);
  case kPc_Cel_Timestamp:
  case kPc_Cel_Duration: *eq = compare_time(a, b) == 0; return kCel_Ok;
  case kPc_Cel_List: return equal_lists(e, a->v.list, b->v.list, pos, eq, depth);
  case kPc_Cel_Map: return equal_maps(e, a->v.map, b->v.map, pos, eq, depth);
  case kPc_Cel_Message: {
    const pc_MessageDef *m = a->v.m.def;
    if (m != b->v.m.def && strcmp(m->full_name, b->v.m.def->full_name) != 0) return kCel_Ok;
    const pc_Message *x = a->v.m.msg, *y = b->v.m.msg;
    if (x == NULL && y == NULL) {
      *eq = 1;
      return kCel_Ok;
    }
    if (x == NULL || y == NULL || m != b->v.m.def) {
      /* an empty message, or the same type from another pool: compare
         through a fresh empty message of the other's type when needed */
      if (m != b->v.m.def) return kCel_Ok;
      pc_Message *empty = cel_alloc(e, m->size, pos);
      if (empty == NULL) return kCel_Fatal;
      pc_Message_Init(m, empty);
      if (x == NULL) x = empty;
      else y = empty;
    }
    if (cel_steps(e, 1 + m->field_count, pos) != kCel_Ok) return kCel_Fatal;
    *eq = pc_Message_Equal(x, y, m);
    return kCel_Ok;
  }
  default: break; /* numbers: above */
  }
  return kCel_Ok;
}

int cel_equal(cel_E *e, const pc_CelValue *a, const pc_CelValue *b, uint32_t pos, int *eq) {
  return equal_at(e, a, b, pos, eq, 0);
}

/* -- Values as text --------------------------------------------------------- */

int cel_buf_add(cel_E *e, cel_Buf *b, const char *s, size_t n, uint32_t pos) {
  if (cel_check_size(e, b->size + n, pos) != kCel_Ok) return kCel_Fatal;
  if (b->data == NULL || n > b->cap - b->size) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->size + n + 1) cap *= 2;
    char *data = cel_alloc(e, cap, pos);
    if (data == NULL) return kCel_Fatal;
    if (b->size) memcpy(data, b->data, b->size);
    b->data = data;
    b->cap = cap - 1; /* room for a NUL */
  }
  if (n) memcpy(b->data + b->size, s, n);
  b->size += n;
  b->data[b->size] = '\0';
  return cel_steps(e, n / 16, pos);
}

/* JavaScript's Number.prototype.toString: the shortest digits that read
 * back as 'd', in plain notation from 1e-7 to 1e21, else with an exponent. */
int cel_double_text(double d, char *buf, size_t room) {
  if (isnan(d)) return snprintf(buf, room, "NaN");
  if (isinf(d)) return snprintf(buf, room, d < 0 ? "-Infinity" : "Infinity");
  if (d == 0) return snprintf(buf, room, "0");
  char tmp[40];
  int prec;
  for (prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
    if (strtod(tmp, NULL) == d) break;
  }
  /* tmp: [-]d[.ddd]e[+-]xx */
  const char *p = tmp;
  int neg = *p == '-';
  if (neg) p++;
  char digits[20];
  int k = 0;
  for (; *p != 'e'; p++)
    if (*p != '.') digits[k++] = *p;
  while (k > 1 && digits[k - 1] == '0') k--;
  int n = atoi(p + 1) + 1; /* value = 0.digits * 10^n */
  char out[64];
  size_t o = 0;
  if (neg) out[o++] = '-';
  if (k <= n && n <= 21) {
    memcpy(out + o, digits, (size_t)k);
    o += (size_t)k;
    for (int i = k; i < n; i++) out[o++] = '0';
  } else if (0 < n && n <= 21) {
    memcpy(out + o, digits, (size_t)n);
    o += (size_t)n;
    out[o++] = '.';
    memcpy(out + o, digits + n, (size_t)(k - n));
    o += (size_t)(k - n);
  } else if (-6 < n && n <= 0) {
    out[o++] = '0';
    out[o++] = '.';
    for (int i = 0; i < -n; i++) out[o++] = '0';
    memcpy(out + o, digits, (size_t)k);
    o += (size_t)k;
  } else {
    out[o++] = digits[0];
    if (k > 1) {
      out[o++] = '.';
      memcpy(out + o, digits + 1, (size_t)(k - 1));
      o += (size_t)(k - 1);
    }
    o += (size_t)snprintf(out + o, sizeof out - o, "e%c%d", n - 1 < 0 ? '-' : '+',
                          n - 1 < 0 ? 1 - n : n - 1);
  }
  out[o] = '\0';
  return snprintf(buf, room, "%s", out);
}

/* Bytes as text: UTF-8, each ill-formed subsequence as U+FFFD. */
static int add_lossy(cel_E *e, cel_Buf *b, const pc_StringView *s, uint32_t pos) {
  size_t i = 0, n = s->size;
  while (i < n) {
    size_t start = i;
    while (i < n && (unsigned char)s->data[i] < 0x80) i++;
    if (i > start && cel_buf_add(e, b, s->data + start, i - start, pos) != kCel_Ok) return kCel_Fatal;
    if (i >= n) break;
    start = i;
    uint32_t cp = cel_utf8_next(s->data, n, &i);
    char u[4];
    size_t len = cp == 0xFFFD ? cel_utf8_put(cp, u) : i - start;
    if (cel_buf_add(e, b, cp == 0xFFFD ? u : s->data + start, len, pos) != kCel_Ok) return kCel_Fatal;
  }
  return kCel_Ok;
}

typedef struct {
  cel_Buf key, value;
} Pair;

static int cmp_pairs(const void *x, const void *y) {
  const Pair *a = x, *b = y;
  size_t n = a->key.size < b->key.size ? a->key.size : b->key.size;
  int c = n ? memcmp(a->key.data, b->key.data, n) : 0;
  if (c != 0) return c;
  return a->key.size < b->key.size ? -1 : a->key.size > b->key.size;
}

int cel_format_value(cel_E *e, cel_Buf *b, const pc_CelValue *v, uint32_t pos, int depth) {
  char tmp[64];
  int n;
  if (depth > CEL_VALUE_DEPTH) return cel_fail(e, pos, "values nested too deeply to format");
  switch (v->kind) {
  case kPc_Cel_Null: return cel_buf_add(e, b, "null", 4, pos);
  case kPc_Cel_Bool: return cel_buf_add(e, b, v->v.b ? "true" : "false", v->v.b ? 4 : 5, pos);
  case kPc_Cel_Int: n = snprintf(tmp, sizeof tmp, "%" PRId64, v->v.i); break;
  case kPc_Cel_Uint: n = snprintf(tmp, sizeof tmp, "%" PRIu64, v->v.u); break;
  case kPc_Cel_Double: n = cel_double_text(v->v.d, tmp, sizeof tmp); break;
  case kPc_Cel_String:
  case kPc_Cel_Type: return cel_buf_add(e, b, v->v.s.data, v->v.s.size, pos);
  case kPc_Cel_Bytes: return add_lossy(e, b, &v->v.s, pos);
  case kPc_Cel_Timestamp: n = (int)cel_format_timestamp(v->v.t.seconds, v->v.t.nanos, tmp); break;
  case kPc_Cel_Duration: n = (int)cel_format_duration(v->v.t.seconds, v->v.t.nanos, tmp); break;
  case kPc_Cel_List: {
    const pc_CelList *l = v->v.list;
    int rc;
    if ((rc = cel_buf_add(e, b, "[", 1, pos)) != kCel_Ok) return rc;
    for (size_t i = 0; i < l->size; i++) {
      pc_CelValue x;
      if (i > 0 && (rc = cel_buf_add(e, b, ", ", 2, pos)) != kCel_Ok) return rc;
      if ((rc = cel_list_get(e, l, i, pos, &x)) != kCel_Ok ||
          (rc = cel_format_value(e, b, &x, pos, depth + 1)) != kCel_Ok)
        return rc;
    }
    return cel_buf_add(e, b, "]", 1, pos);
  }
  case kPc_Cel_Map: {
    /* entries sorted by their keys' text */
    const pc_CelMap *m = v->v.map;
    Pair *pairs = cel_alloc(e, (m->size ? m->size : 1) * sizeof *pairs, pos);
    int rc;
    if (pairs == NULL) return kCel_Fatal;
    memset(pairs, 0, (m->size ? m->size : 1) * sizeof *pairs);
    for (size_t i = 0; i < m->size; i++) {
      pc_CelValue k, x;
      if ((rc = cel_map_entry(e, m, i, pos, &k, &x)) != kCel_Ok ||
          (rc = cel_format_value(e, &pairs[i].key, &k, pos, depth + 1)) != kCel_Ok ||
          (rc = cel_format_value(e, &pairs[i].value, &x, pos, depth + 1)) != kCel_Ok)
        return rc;
    }
    if (cel_steps(e, m->size, pos) != kCel_Ok) return kCel_Fatal;
    qsort(pairs, m->size, sizeof *pairs, cmp_pairs);
    if ((rc = cel_buf_add(e, b, "{", 1, pos)) != kCel_Ok) return rc;
    for (size_t i = 0; i < m->size; i++) {
      if ((i > 0 && (rc = cel_buf_add(e, b, ", ", 2, pos)) != kCel_Ok) ||
          (rc = cel_buf_add(e, b, pairs[i].key.data, pairs[i].key.size, pos)) != kCel_Ok ||
          (rc = cel_buf_add(e, b, ": ", 2, pos)) != kCel_Ok ||
          (rc = cel_buf_add(e, b, pairs[i].value.data, pairs[i].value.size, pos)) != kCel_Ok)
        return rc;
    }
    return cel_buf_add(e, b, "}", 1, pos);
  }
  default: return cel_fail(e, pos, "invalid argument to format: a %s has no text", cel_type_name(v));
  }
  return cel_buf_add(e, b, tmp, (size_t)n, pos);
}
