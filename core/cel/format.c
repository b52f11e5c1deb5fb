/* Values as text, as format's '%s' writes them (lists and maps included,
 * a map's entries sorted by their keys' text). */
#include "cel/cel_internal.h"
#include "base/utf8.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes as text: UTF-8, each ill-formed subsequence as U+FFFD. */
static int add_lossy(cel_E *e, cel_Buf *b, const pc_StringView *s, uint32_t pos) {
  size_t i = 0, n = s->size;
  while (i < n) {
    size_t start = i;
    while (i < n && (unsigned char)s->data[i] < 0x80) i++;
    if (i > start && cel_buf_add(e, b, s->data + start, i - start, pos) != kCel_Ok)
      return kCel_Fatal;
    if (i >= n) break;
    start = i;
    uint32_t cp = cel_utf8_next(s->data, n, &i);
    char u[4];
    size_t len = cp == 0xFFFD ? pc_Utf8_Put(cp, u) : i - start;
    if (cel_buf_add(e, b, cp == 0xFFFD ? u : s->data + start, len, pos) != kCel_Ok)
      return kCel_Fatal;
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
  default:
    return cel_fail(e, pos, "invalid argument to format: a %s has no text", cel_type_name(v));
  }
  return cel_buf_add(e, b, tmp, (size_t)n, pos);
}
