/* Equality and ordering: cel-spec's heterogeneous equality (numbers
 * compare by value across int, uint and double; values of other different
 * types are unequal, never an error), ordering of the kinds that have one. */
#include "cel/cel_internal.h"

#include <math.h>
#include <string.h>

/* -- Equality and ordering -------------------------------------------------- */

static int is_number(pc_CelKind k) {
  return k == kPc_Cel_Int || k == kPc_Cel_Uint || k == kPc_Cel_Double;
}

/* Numbers of any two kinds: -1, 0, 1, or 2 when unordered (NaN). An int
 * or uint against a double compares as doubles (as cel-go: conformance's
 * "lossy" cases), an int against a uint exactly. */
static int compare_numbers(const pc_CelValue *a, const pc_CelValue *b) {
  if (a->kind == kPc_Cel_Double || b->kind == kPc_Cel_Double) {
    double x = a->kind == kPc_Cel_Double ? a->v.d
               : a->kind == kPc_Cel_Int  ? (double)a->v.i
                                         : (double)a->v.u;
    double y = b->kind == kPc_Cel_Double ? b->v.d
               : b->kind == kPc_Cel_Int  ? (double)b->v.i
                                         : (double)b->v.u;
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
    if ((rc = cel_steps(e, 1, pos)) != kCel_Ok ||
        (rc = cel_list_get(e, a, i, pos, &x)) != kCel_Ok ||
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
    if ((rc = cel_steps(e, 1, pos)) != kCel_Ok ||
        (rc = cel_map_entry(e, a, i, pos, &k, &x)) != kCel_Ok ||
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
      if (x == NULL)
        x = empty;
      else
        y = empty;
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
