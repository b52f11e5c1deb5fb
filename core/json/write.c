/* Messages to proto3 JSON (json.h). One recursive walk over the message,
 * appending to a growable buffer; well-known types by their full names. */
#include "base/number.h"
#include "json/json_internal.h"
#include "wire/decode.h"
#include "wire/wire.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  pc_JsonBuf *out;
  const pc_JsonWriteOptions *o;
  const pc_Pool *pool; /* Any's types: the options' or the root's */
  pc_Error *err;
  pc_Arena *scratch; /* Any's decoded values, made on first use */
  pc_JsonStatus status;
} W;

#define FAIL(w, path, ...)                                                                         \
  do {                                                                                             \
    pc_Json_Fail((w)->err, (path), __VA_ARGS__);                                                   \
    (w)->status = kPc_JsonStatus_Invalid;                                                          \
    return 0;                                                                                      \
  } while (0)

/* -- Output --------------------------------------------------------------- */

/* Room for 'n' more bytes; 0 (and the status set) when memory runs out. */
static int reserve(W *w, size_t n) {
  pc_JsonBuf *b = w->out;
  if (b->cap - b->size >= n) return 1;
  size_t cap = b->cap < 256 ? 256 : b->cap;
  while (cap - b->size < n) {
    if (cap > SIZE_MAX / 2) goto oom;
    cap *= 2;
  }
  char *p = b->alloc(b->ud, b->data, b->cap, cap);
  if (p == NULL) goto oom;
  b->data = p;
  b->cap = cap;
  return 1;
oom:
  w->status = kPc_JsonStatus_OutOfMemory;
  pc_Error_Set(w->err, "not enough memory");
  return 0;
}

static int put(W *w, const char *s, size_t n) {
  if (n == 0) return 1; /* 's' may be NULL then (an empty string view) */
  if (!reserve(w, n)) return 0;
  memcpy(w->out->data + w->out->size, s, n);
  w->out->size += n;
  return 1;
}

#define PUTS(w, lit) put((w), (lit), sizeof(lit) - 1)

static int putch(W *w, char c) {
  if (w->out->size == w->out->cap && !reserve(w, 1)) return 0;
  w->out->data[w->out->size++] = c;
  return 1;
}

/* A newline and the indentation of 'level' (nothing on one line). */
static int newline(W *w, int level) {
  int ind = w->o->indent;
  if (ind <= 0) return 1;
  size_t n = 1 + (size_t)ind * (size_t)level;
  if (!reserve(w, n)) return 0;
  char *p = w->out->data + w->out->size;
  p[0] = '\n';
  memset(p + 1, ' ', n - 1);
  w->out->size += n;
  return 1;
}

static const char kHex[] = "0123456789abcdef";

/* The inside of a JSON string of 'n' bytes already known to be UTF-8. */
static int put_escaped_body(W *w, const char *s, size_t n) {
  if (n == 0) return 1;
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    if (!put(w, s + run, i - run)) return 0;
    run = i + 1;
    char e[6] = {'\\', 0, 0, 0, 0, 0};
    size_t en = 2;
    switch (c) {
    case '"': e[1] = '"'; break;
    case '\\': e[1] = '\\'; break;
    case '\b': e[1] = 'b'; break;
    case '\f': e[1] = 'f'; break;
    case '\n': e[1] = 'n'; break;
    case '\r': e[1] = 'r'; break;
    case '\t': e[1] = 't'; break;
    default:
      e[1] = 'u';
      e[2] = '0';
      e[3] = '0';
      e[4] = kHex[c >> 4];
      e[5] = kHex[c & 15];
      en = 6;
    }
    if (!put(w, e, en)) return 0;
  }
  return put(w, s + run, n - run);
}

static int put_escaped(W *w, const char *s, size_t n) {
  return putch(w, '"') && put_escaped_body(w, s, n) && putch(w, '"');
}

/* The scratch arena, made on first use; NULL (status set) on failure. */
static pc_Arena *scratch_of(W *w) {
  if (w->scratch == NULL && (w->scratch = pc_Arena_New(w->out->alloc, w->out->ud)) == NULL) {
    w->status = kPc_JsonStatus_OutOfMemory;
    pc_Error_Set(w->err, "not enough memory");
  }
  return w->scratch;
}

static int put_string(W *w, const pc_JsonPath *path, const char *s, size_t n) {
  if (!pc_Wire_ValidUtf8((const uint8_t *)s, n)) FAIL(w, path, "string is not valid UTF-8");
  return put_escaped(w, s, n);
}

/* A double as JSON: pc_Number_Shortest's text ("-0.0" for negative zero);
 * NaN and the infinities quoted when 'quote_specials' (proto3 JSON),
 * nothing otherwise. */
static int put_double(W *w, double d, int quote_specials) {
  if (isnan(d)) return quote_specials ? PUTS(w, "\"NaN\"") : 0;
  if (isinf(d))
    return quote_specials ? (d > 0 ? PUTS(w, "\"Infinity\"") : PUTS(w, "\"-Infinity\"")) : 0;
  if (d == 0) return signbit(d) ? PUTS(w, "-0.0") : putch(w, '0'); /* "-0" reads as 0 in some */
  char buf[32];
  return put(w, buf, pc_Number_Shortest(d, buf));
}

static int put_float(W *w, float f) {
  if (isnan(f)) return PUTS(w, "\"NaN\"");
  if (isinf(f)) return f > 0 ? PUTS(w, "\"Infinity\"") : PUTS(w, "\"-Infinity\"");
  if (f == 0) return signbit(f) ? PUTS(w, "-0.0") : putch(w, '0');
  char buf[40];
  int n = 0;
  for (int prec = fabsf(f) < FLT_MIN ? 1 : 6; prec <= 9; prec++) {
    n = snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
    if ((float)strtod(buf, NULL) == f) break;
  }
  return put(w, buf, (size_t)n);
}

static int putf(W *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int putf(W *w, const char *fmt, ...) {
  char buf[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return put(w, buf, (size_t)n);
}

/* -- Values --------------------------------------------------------------- */

static int write_message(W *w, const pc_Message *msg, const pc_MessageDef *m,
                         const pc_JsonPath *path, int depth, int level);

/* The value of field 'number' of 'msg' (its default when the type lacks
 * the field, which a well-formed well-known type never does). */
static pc_Value get_number(const pc_Message *msg, const pc_MessageDef *m, int32_t number,
                           const pc_FieldDef **field) {
  const pc_FieldDef *f = pc_MessageDef_FindFieldByNumber(m, number);
  if (field != NULL) *field = f;
  pc_Value v;
  memset(&v, 0, sizeof v);
  if (f != NULL) v = pc_Message_Get(msg, f);
  return v;
}

static int write_enum(W *w, const pc_FieldDef *f, int32_t n) {
  if (pc_Json_IsNullValue(f->enumdef)) return PUTS(w, "null");
  if (!w->o->enums_as_ints) {
    const pc_EnumValueDef *ev = pc_EnumDef_FindByNumber(f->enumdef, n);
    if (ev != NULL) return put_escaped(w, ev->name, strlen(ev->name));
  }
  return putf(w, "%" PRId32, n);
}

static int write_bytes(W *w, const pc_StringView *s) {
  size_t n = (s->size + 2) / 3 * 4;
  if (!reserve(w, n + 2)) return 0;
  char *p = w->out->data + w->out->size;
  p[0] = '"';
  pc_Json_Base64Encode((const uint8_t *)s->data, s->size, p + 1);
  p[n + 1] = '"';
  w->out->size += n + 2;
  return 1;
}

/* One value of field 'f' (an element, for repeated fields). */
static int write_single(W *w, const pc_FieldDef *f, pc_Value v, const pc_JsonPath *path, int depth,
                        int level) {
  switch (f->type) {
  case kPc_Type_Bool: return v.b ? PUTS(w, "true") : PUTS(w, "false");
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32: return putf(w, "%" PRId32, v.i32);
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: return putf(w, "%" PRIu32, v.u32);
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: return putf(w, "\"%" PRId64 "\"", v.i64);
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: return putf(w, "\"%" PRIu64 "\"", v.u64);
  case kPc_Type_Float: return put_float(w, v.f);
  case kPc_Type_Double: return put_double(w, v.d, 1);
  case kPc_Type_Enum: return write_enum(w, f, v.i32);
  case kPc_Type_String: return put_string(w, path, v.s.data, v.s.size);
  case kPc_Type_Bytes: return write_bytes(w, &v.s);
  default: return write_message(w, v.m, f->message, path, depth + 1, level);
  }
}

/* A map key in its string form. */
static int write_key(W *w, const pc_FieldDef *kf, pc_Value k, const pc_JsonPath *path) {
  switch (kf->type) {
  case kPc_Type_Bool: return k.b ? PUTS(w, "\"true\"") : PUTS(w, "\"false\"");
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32: return putf(w, "\"%" PRId32 "\"", k.i32);
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: return putf(w, "\"%" PRIu32 "\"", k.u32);
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: return putf(w, "\"%" PRIu64 "\"", k.u64);
  case kPc_Type_String: return put_string(w, path, k.s.data, k.s.size);
  default: return putf(w, "\"%" PRId64 "\"", k.i64);
  }
}

/* Starts a member: the separator, the line break and the key. */
static int begin_member(W *w, int *first, int level, const char *key, size_t keylen) {
  if (!*first && !putch(w, ',')) return 0;
  *first = 0;
  if (!newline(w, level + 1) || !put_escaped(w, key, keylen) || !putch(w, ':')) return 0;
  return w->o->indent > 0 ? putch(w, ' ') : 1;
}

/* Closes an object or array opened at 'level' ('empty': nothing inside). */
static int close_with(W *w, int empty, int level, char c) {
  if (!empty && !newline(w, level)) return 0;
  return putch(w, c);
}

/* A map field's object. */
static int write_map(W *w, const pc_FieldDef *f, const pc_Map *map, const pc_JsonPath *path,
                     int depth, int level) {
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  if (!putch(w, '{')) return 0;
  size_t n = map != NULL ? map->size : 0;
  /* keys in order (pc_Map_SortEntries), so the text does not depend on
   * the order the entries were set in */
  const pc_MapEntry **sorted = NULL;
  if (n > 1) {
    pc_Arena *a = scratch_of(w);
    if (a == NULL) return 0;
    size_t each = sizeof(const pc_MapEntry *);
    sorted = n <= SIZE_MAX / each ? pc_Arena_Malloc(a, n * each) : NULL;
    if (sorted == NULL) {
      w->status = kPc_JsonStatus_OutOfMemory;
      pc_Error_Set(w->err, "not enough memory");
      return 0;
    }
    pc_Map_SortEntries(map, kf->type, sorted);
  }
  for (size_t i = 0; i < n; i++) {
    const pc_MapEntry *e = sorted != NULL ? sorted[i] : &map->entries[i];
    pc_JsonPath step = {path, "", 0, 0};
    if (kf->type == kPc_Type_String) {
      step.key = e->key.s.data != NULL ? e->key.s.data : "";
      step.keylen = e->key.s.size;
    }
    if ((i > 0 && !putch(w, ',')) || !newline(w, level + 1)) return 0;
    if (!write_key(w, kf, e->key, &step) || !putch(w, ':')) return 0;
    if (w->o->indent > 0 && !putch(w, ' ')) return 0;
    if (!write_single(w, vf, e->value, &step, depth, level + 1)) return 0;
  }
  return close_with(w, n == 0, level, '}');
}

static int write_array(W *w, const pc_FieldDef *f, const pc_Array *arr, const pc_JsonPath *path,
                       int depth, int level) {
  if (!putch(w, '[')) return 0;
  size_t n = arr != NULL ? arr->size : 0;
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  for (size_t i = 0; i < n; i++) {
    pc_JsonPath step = {path, NULL, 0, i};
    if ((i > 0 && !putch(w, ',')) || !newline(w, level + 1)) return 0;
    if (!write_single(w, f, pc_Array_Get(arr, i, slot), &step, depth, level + 1)) return 0;
  }
  return close_with(w, n == 0, level, ']');
}

/* A field's whole value: map, array or single value. */
static int write_field(W *w, const pc_FieldDef *f, pc_Value v, const pc_JsonPath *path, int depth,
                       int level) {
  if (f->is_map) return write_map(w, f, v.map, path, depth, level);
  if (f->label == kPc_Label_Repeated) return write_array(w, f, v.a, path, depth, level);
  return write_single(w, f, v, path, depth, level);
}

/* -- Well-known types ----------------------------------------------------- */

/* ".123", ".123456" or ".123456789" for non-zero nanos (0 < n < 1e9). */
static int put_nanos(W *w, int32_t nanos) {
  if (nanos == 0) return 1;
  if (nanos % 1000000 == 0) return putf(w, ".%03" PRId32, nanos / 1000000);
  if (nanos % 1000 == 0) return putf(w, ".%06" PRId32, nanos / 1000);
  return putf(w, ".%09" PRId32, nanos);
}

static int write_timestamp(W *w, const pc_Message *msg, const pc_MessageDef *m,
                           const pc_JsonPath *path) {
  int64_t s = get_number(msg, m, 1, NULL).i64;
  int32_t nanos = get_number(msg, m, 2, NULL).i32;
  if (s < PC_JSON_TIMESTAMP_MIN || s > PC_JSON_TIMESTAMP_MAX)
    FAIL(w, path, "Timestamp seconds %" PRId64 " out of range (years 1 to 9999)", s);
  if (nanos < 0 || nanos > 999999999)
    FAIL(w, path, "Timestamp nanos %" PRId32 " out of range 0..999999999", nanos);
  int64_t days = s >= 0 ? s / 86400 : -((-s + 86399) / 86400);
  int64_t secs = s - days * 86400;
  int64_t y;
  unsigned mo, d;
  pc_Json_CivilFromDays(days, &y, &mo, &d);
  if (!putf(w, "\"%04" PRId64 "-%02u-%02uT%02d:%02d:%02d", y, mo, d, (int)(secs / 3600),
            (int)(secs / 60 % 60), (int)(secs % 60)))
    return 0;
  return put_nanos(w, nanos) && PUTS(w, "Z\"");
}

static int write_duration(W *w, const pc_Message *msg, const pc_MessageDef *m,
                          const pc_JsonPath *path) {
  int64_t s = get_number(msg, m, 1, NULL).i64;
  int32_t nanos = get_number(msg, m, 2, NULL).i32;
  if (s < -PC_JSON_DURATION_MAX || s > PC_JSON_DURATION_MAX)
    FAIL(w, path, "Duration seconds %" PRId64 " out of range", s);
  if (nanos < -999999999 || nanos > 999999999 || (s > 0 && nanos < 0) || (s < 0 && nanos > 0))
    FAIL(w, path, "Duration nanos %" PRId32 " out of range or of the other sign", nanos);
  int neg = s < 0 || nanos < 0;
  uint64_t as = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
  int32_t an = nanos < 0 ? -nanos : nanos;
  if (!putf(w, "\"%s%" PRIu64, neg ? "-" : "", as)) return 0;
  return put_nanos(w, an) && PUTS(w, "s\"");
}

/* Whether the camelCase path 's' reads back (read.c's read_fieldmask):
 * dot-separated names of letters and digits, none empty, none starting with
 * a digit (protobuf-go's valid names; a ',' would split it in two). */
static int fieldmask_path_reads(const char *s, size_t n) {
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || s[i] == '.') {
      if (i == start) return 0;
      start = i + 1;
      continue;
    }
    unsigned char c = (unsigned char)s[i];
    int digit = c >= '0' && c <= '9';
    if (!(digit ? i > start : (unsigned)(c | 0x20) - 'a' < 26)) return 0;
  }
  return 1;
}

static int write_fieldmask(W *w, const pc_Message *msg, const pc_MessageDef *m,
                           const pc_JsonPath *path) {
  const pc_Array *arr = get_number(msg, m, 1, NULL).a;
  if (!putch(w, '"')) return 0;
  for (size_t i = 0; arr != NULL && i < arr->size; i++) {
    pc_StringView p = pc_Array_Get(arr, i, kPc_Slot_String).s;
    if (i > 0 && !putch(w, ',')) return 0;
    pc_Arena *a = scratch_of(w);
    char *camel = a != NULL ? pc_Arena_Malloc(a, p.size + 1) : NULL;
    if (camel == NULL) {
      w->status = kPc_JsonStatus_OutOfMemory;
      pc_Error_Set(w->err, "not enough memory");
      return 0;
    }
    size_t n = pc_Json_SnakeToCamel(p.data, p.size, camel);
    if (n == (size_t)-1 || !fieldmask_path_reads(camel, n)) {
      char shown[104];
      FAIL(w, path, "FieldMask path \"%s\" has no JSON form",
           pc_Error_Quote(shown, sizeof shown, p.data, p.size, kPc_Quote_Json));
    }
    if (!put_escaped_body(w, camel, n)) return 0;
  }
  return putch(w, '"');
}

static int write_value(W *w, const pc_Message *msg, const pc_MessageDef *m, const pc_JsonPath *path,
                       int depth, int level);

static int write_struct(W *w, const pc_Message *msg, const pc_MessageDef *m,
                        const pc_JsonPath *path, int depth, int level) {
  const pc_FieldDef *f;
  pc_Value v = get_number(msg, m, 1, &f);
  if (f == NULL || !f->is_map) return PUTS(w, "{}");
  return write_map(w, f, v.map, path, depth, level);
}

static int write_listvalue(W *w, const pc_Message *msg, const pc_MessageDef *m,
                           const pc_JsonPath *path, int depth, int level) {
  const pc_FieldDef *f;
  pc_Value v = get_number(msg, m, 1, &f);
  if (f == NULL) return PUTS(w, "[]");
  return write_array(w, f, v.a, path, depth, level);
}

static int write_value(W *w, const pc_Message *msg, const pc_MessageDef *m, const pc_JsonPath *path,
                       int depth, int level) {
  for (int32_t n = 1; n <= 6; n++) {
    const pc_FieldDef *f = pc_MessageDef_FindFieldByNumber(m, n);
    if (f == NULL || !pc_Message_Has(msg, f)) continue;
    pc_Value v = pc_Message_Get(msg, f);
    switch (n) {
    case 1: return PUTS(w, "null");
    case 2:
      if (!isfinite(v.d))
        FAIL(w, path, "Value number %s has no JSON form",
             isnan(v.d) ? "NaN"
             : v.d > 0  ? "Infinity"
                        : "-Infinity");
      return put_double(w, v.d, 0);
    case 3: return put_string(w, path, v.s.data, v.s.size);
    case 4: return v.b ? PUTS(w, "true") : PUTS(w, "false");
    default: return write_message(w, v.m, f->message, path, depth + 1, level);
    }
  }
  return PUTS(w, "null");
}

static int write_body(W *w, const pc_Message *msg, const pc_MessageDef *m, const pc_JsonPath *path,
                      int depth, int level, int *first);

static int write_any(W *w, const pc_Message *msg, const pc_MessageDef *m, const pc_JsonPath *path,
                     int depth, int level) {
  pc_StringView url = get_number(msg, m, 1, NULL).s;
  pc_StringView value = get_number(msg, m, 2, NULL).s;
  if (url.size == 0 && value.size == 0) return PUTS(w, "{}");
  const char *slash = url.size > 0 ? memchr(url.data, '/', url.size) : NULL;
  const char *name = url.data;
  size_t namelen = url.size;
  for (size_t i = url.size; slash != NULL && i > 0; i--)
    if (url.data[i - 1] == '/') {
      name = url.data + i;
      namelen = url.size - i;
      break;
    }
  char buf[512];
  const pc_MessageDef *t = NULL;
  if (namelen > 0 && namelen < sizeof buf && memchr(name, 0, namelen) == NULL) {
    memcpy(buf, name, namelen);
    buf[namelen] = '\0';
    t = w->o->find_type != NULL ? w->o->find_type(w->o->find_type_ud, w->pool, buf)
                                : pc_Pool_FindMessage(w->pool, buf);
  }
  if (t == NULL)
    FAIL(w, path, "Any type \"%.*s\" is not in the pool", (int)(url.size > 200 ? 200 : url.size),
         url.data);
  if (scratch_of(w) == NULL) return 0;
  pc_Message *inner = pc_Message_New(t, w->scratch);
  if (inner == NULL) {
    w->status = kPc_JsonStatus_OutOfMemory;
    pc_Error_Set(w->err, "not enough memory");
    return 0;
  }
  pc_Error derr;
  pc_Error_Init(&derr);
  static const pc_DecodeOptions kPartial = {.partial = 1}; /* required fields are not checked */
  pc_DecodeStatus ds = pc_Decode(value.data, value.size, inner, t, w->scratch, &kPartial, &derr);
  if (ds == kPc_DecodeStatus_OutOfMemory) {
    w->status = kPc_JsonStatus_OutOfMemory;
    pc_Error_Set(w->err, "not enough memory");
    return 0;
  }
  if (ds != kPc_DecodeStatus_Ok) FAIL(w, path, "Any value does not decode: %s", derr.msg);
  if (!putch(w, '{') || !newline(w, level + 1) || !PUTS(w, "\"@type\":")) return 0;
  if (w->o->indent > 0 && !putch(w, ' ')) return 0;
  if (!put_string(w, path, url.data, url.size)) return 0;
  int first = 0;
  /* A well-known type with a JSON form of its own goes under "value"
   * (Empty's form is an ordinary message's, so it does not). */
  pc_JsonWkt inner_wkt = pc_Json_WktOf(t);
  if (inner_wkt != kWkt_None && inner_wkt != kWkt_Empty) {
    pc_JsonPath step = {path, "value", 5, 0};
    if (!begin_member(w, &first, level, "value", 5)) return 0;
    if (!write_message(w, inner, t, &step, depth + 1, level + 1)) return 0;
  } else if (!write_body(w, inner, t, path, depth + 1, level, &first)) {
    return 0;
  }
  return close_with(w, 0, level, '}');
}

static int write_wkt(W *w, pc_JsonWkt wkt, const pc_Message *msg, const pc_MessageDef *m,
                     const pc_JsonPath *path, int depth, int level) {
  switch (wkt) {
  case kWkt_Any: return write_any(w, msg, m, path, depth, level);
  case kWkt_Timestamp: return write_timestamp(w, msg, m, path);
  case kWkt_Duration: return write_duration(w, msg, m, path);
  case kWkt_FieldMask: return write_fieldmask(w, msg, m, path);
  case kWkt_Struct: return write_struct(w, msg, m, path, depth, level);
  case kWkt_Value: return write_value(w, msg, m, path, depth, level);
  case kWkt_ListValue: return write_listvalue(w, msg, m, path, depth, level);
  case kWkt_Empty: return PUTS(w, "{}");
  default: {
    const pc_FieldDef *f;
    pc_Value v = get_number(msg, m, 1, &f);
    if (f == NULL) return PUTS(w, "null");
    return write_single(w, f, v, path, depth, level);
  }
  }
}

/* -- Messages ------------------------------------------------------------- */

/* Whether field 'f' is printed. */
static int printed(const W *w, const pc_Message *msg, const pc_FieldDef *f) {
  if (pc_Message_Has(msg, f)) return 1;
  return w->o->emit_defaults && !f->has_presence;
}

/* The members of 'msg' (inside braces someone else writes). */
static int write_body(W *w, const pc_Message *msg, const pc_MessageDef *m, const pc_JsonPath *path,
                      int depth, int level, int *first) {
  for (uint32_t i = 0; i < m->field_count; i++) {
    const pc_FieldDef *f = m->fields_by_number[i];
    if (!printed(w, msg, f)) continue;
    const char *key = w->o->proto_names ? f->name : f->json_name;
    size_t keylen = strlen(key);
    pc_JsonPath step = {path, key, keylen, 0};
    if (!begin_member(w, first, level, key, keylen)) return 0;
    if (!write_field(w, f, pc_Message_Get(msg, f), &step, depth, level + 1)) return 0;
  }
  size_t ext_count;
  const pc_Extension *ext = pc_Message_Extensions(msg, &ext_count);
  for (size_t i = 0; i < ext_count; i++) {
    const pc_FieldDef *f = ext[i].field;
    char key[512];
    int n = snprintf(key, sizeof key, "[%s]", f->full_name);
    size_t keylen = n < 0 ? 0 : (size_t)n >= sizeof key ? sizeof key - 1 : (size_t)n;
    pc_JsonPath step = {path, key, keylen, 0};
    if (!begin_member(w, first, level, key, keylen)) return 0;
    if (!write_field(w, f, ext[i].value, &step, depth, level + 1)) return 0;
  }
  return 1;
}

static int write_message(W *w, const pc_Message *msg, const pc_MessageDef *m,
                         const pc_JsonPath *path, int depth, int level) {
  if (depth > PC_JSON_MAX_DEPTH) FAIL(w, path, "messages nested deeper than %d", PC_JSON_MAX_DEPTH);
  pc_JsonWkt wkt = pc_Json_WktOf(m);
  if (wkt != kWkt_None) return write_wkt(w, wkt, msg, m, path, depth, level);
  int first = 1;
  if (!putch(w, '{') || !write_body(w, msg, m, path, depth, level, &first)) return 0;
  return close_with(w, first, level, '}');
}

pc_JsonStatus pc_Json_Write(const pc_Message *msg, const pc_MessageDef *m,
                            const pc_JsonWriteOptions *opts, pc_JsonBuf *out, pc_Error *err) {
  static const pc_JsonWriteOptions kDefaults = {0, 0, 0, 0, NULL, NULL, NULL};
  W w = {out, opts != NULL ? opts : &kDefaults, NULL, err, NULL, kPc_JsonStatus_Ok};
  w.pool = w.o->pool != NULL ? w.o->pool : m->file->pool;
  int ok = write_message(&w, msg, m, NULL, 0, 0);
  pc_Arena_Free(w.scratch);
  if (ok) return kPc_JsonStatus_Ok;
  return w.status != kPc_JsonStatus_Ok ? w.status : kPc_JsonStatus_Invalid;
}
