/* The standard functions and operators: arithmetic with overflow checks,
 * comparisons, `in`, size, the string tests, matches, conversions, and the
 * timestamp and duration accessors. protovalidate's functions and the
 * strings extension are in ext.c. */
#include "cel/cel_internal.h"
#include "wire/wire.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int overflow(cel_E *e, const cel_Node *n) {
  return cel_fail(e, n->pos, "integer overflow in '%s'", cel_fn_info[n->fn].name);
}

/* -- Time --------------------------------------------------------------------- */

static int make_time(cel_E *e, const cel_Node *n, pc_CelKind kind, int64_t sec, int64_t nanos,
                     pc_CelValue *out) {
  sec += nanos / 1000000000;
  nanos %= 1000000000;
  if (kind == kPc_Cel_Timestamp) {
    if (nanos < 0) {
      sec--;
      nanos += 1000000000;
    }
    if (sec < CEL_TS_MIN || sec > CEL_TS_MAX) return cel_fail(e, n->pos, "timestamp out of range");
  } else {
    if (sec > 0 && nanos < 0) {
      sec--;
      nanos += 1000000000;
    } else if (sec < 0 && nanos > 0) {
      sec++;
      nanos -= 1000000000;
    }
    if (!cel_duration_ok(sec, nanos)) return cel_fail(e, n->pos, "duration out of range");
  }
  memset(out, 0, sizeof *out);
  out->kind = kind;
  out->v.t.seconds = sec;
  out->v.t.nanos = (int32_t)nanos;
  return kCel_Ok;
}

static int time_add(cel_E *e, const cel_Node *n, const pc_CelValue *a, const pc_CelValue *b,
                    int sub, pc_CelValue *out) {
  int64_t s = b->v.t.seconds, ns = b->v.t.nanos;
  if (sub) {
    s = -s;
    ns = -ns;
  }
  /* both within 10^12 seconds: no overflow */
  pc_CelKind kind = a->kind == kPc_Cel_Timestamp || b->kind == kPc_Cel_Timestamp ? kPc_Cel_Timestamp
                                                                                 : kPc_Cel_Duration;
  if (sub && a->kind == kPc_Cel_Timestamp && b->kind == kPc_Cel_Timestamp) kind = kPc_Cel_Duration;
  /* seconds of timestamps and of durations read from messages stay within
     10^13: the sum cannot overflow */
  if (a->v.t.seconds > 1000000000000000LL || a->v.t.seconds < -1000000000000000LL ||
      s > 1000000000000000LL || s < -1000000000000000LL)
    return cel_fail(e, n->pos, "%s out of range",
                    kind == kPc_Cel_Timestamp ? "timestamp" : "duration");
  return make_time(e, n, kind, a->v.t.seconds + s, (int64_t)a->v.t.nanos + ns, out);
}

/* Timestamp accessors: the parts of the time in the zone given (UTC). */
static int time_part(cel_E *e, const cel_Node *n, pc_CelValue *a, size_t nargs, pc_CelValue *out) {
  const pc_CelValue *t = &a[0];
  if (t->kind == kPc_Cel_Duration) {
    if (nargs != 1) return cel_no_overload(e, n, a, nargs);
    int64_t s = t->v.t.seconds;
    switch (n->fn) {
    case kCelFn_GET_HOURS: *out = cel_int(s / 3600); return kCel_Ok;
    case kCelFn_GET_MINUTES: *out = cel_int(s / 60); return kCel_Ok;
    case kCelFn_GET_SECONDS: *out = cel_int(s); return kCel_Ok;
    case kCelFn_GET_MILLISECONDS: *out = cel_int(t->v.t.nanos / 1000000); return kCel_Ok;
    default: return cel_no_overload(e, n, a, nargs);
    }
  }
  if (t->kind != kPc_Cel_Timestamp || (nargs == 2 && a[1].kind != kPc_Cel_String))
    return cel_no_overload(e, n, a, nargs);
  int32_t offset = 0;
  if (nargs == 2 && !cel_time_zone(a[1].v.s.data, a[1].v.s.size, &offset))
    return cel_fail(e, n->pos,
                    "unsupported time zone '%.*s' (UTC and fixed offsets like +05:30 are)",
                    (int)(a[1].v.s.size > 64 ? 64 : a[1].v.s.size), a[1].v.s.data);
  int64_t local = t->v.t.seconds + offset;
  int64_t days = local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
  int64_t rem = local - days * 86400, year;
  int month, day;
  cel_civil(days, &year, &month, &day);
  int64_t v;
  switch (n->fn) {
  case kCelFn_GET_FULL_YEAR: v = year; break;
  case kCelFn_GET_MONTH: v = month - 1; break;
  case kCelFn_GET_DAY_OF_YEAR: {
    static const int kBefore[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    v = kBefore[month - 1] + (leap && month > 2) + day - 1;
    break;
  }
  case kCelFn_GET_DAY_OF_MONTH: v = day - 1; break;
  case kCelFn_GET_DATE: v = day; break;
  case kCelFn_GET_DAY_OF_WEEK: v = ((days % 7) + 7 + 4) % 7; break; /* 1970-01-01 was a Thursday */
  case kCelFn_GET_HOURS: v = rem / 3600; break;
  case kCelFn_GET_MINUTES: v = rem / 60 % 60; break;
  case kCelFn_GET_SECONDS: v = rem % 60; break;
  default: v = t->v.t.nanos / 1000000; break;
  }
  *out = cel_int(v);
  return kCel_Ok;
}

/* -- Arithmetic ------------------------------------------------------------------ */

static int arith(cel_E *e, const cel_Node *n, const pc_CelValue *a, const pc_CelValue *b,
                 pc_CelValue *out) {
  int fn = n->fn;
  if (a->kind == kPc_Cel_Int && b->kind == kPc_Cel_Int) {
    int64_t x = a->v.i, y = b->v.i, r;
    switch (fn) {
    case kCelFn_ADD:
      if (__builtin_add_overflow(x, y, &r)) return overflow(e, n);
      break;
    case kCelFn_SUB:
      if (__builtin_sub_overflow(x, y, &r)) return overflow(e, n);
      break;
    case kCelFn_MUL:
      if (__builtin_mul_overflow(x, y, &r)) return overflow(e, n);
      break;
    case kCelFn_DIV:
      if (y == 0) return cel_fail(e, n->pos, "division by zero");
      if (x == INT64_MIN && y == -1) return overflow(e, n);
      r = x / y;
      break;
    default:
      if (y == 0) return cel_fail(e, n->pos, "modulus by zero");
      if (x == INT64_MIN && y == -1) return overflow(e, n);
      r = x % y;
      break;
    }
    *out = cel_int(r);
    return kCel_Ok;
  }
  if (a->kind == kPc_Cel_Uint && b->kind == kPc_Cel_Uint) {
    uint64_t x = a->v.u, y = b->v.u, r;
    switch (fn) {
    case kCelFn_ADD:
      if (__builtin_add_overflow(x, y, &r)) return overflow(e, n);
      break;
    case kCelFn_SUB:
      if (__builtin_sub_overflow(x, y, &r)) return overflow(e, n);
      break;
    case kCelFn_MUL:
      if (__builtin_mul_overflow(x, y, &r)) return overflow(e, n);
      break;
    case kCelFn_DIV:
      if (y == 0) return cel_fail(e, n->pos, "division by zero");
      r = x / y;
      break;
    default:
      if (y == 0) return cel_fail(e, n->pos, "modulus by zero");
      r = x % y;
      break;
    }
    *out = cel_uint(r);
    return kCel_Ok;
  }
  if (a->kind == kPc_Cel_Double && b->kind == kPc_Cel_Double && fn != kCelFn_MOD) {
    double x = a->v.d, y = b->v.d;
    *out = cel_double(fn == kCelFn_ADD   ? x + y
                      : fn == kCelFn_SUB ? x - y
                      : fn == kCelFn_MUL ? x * y
                                         : x / y);
    return kCel_Ok;
  }
  if (fn == kCelFn_ADD && a->kind == b->kind &&
      (a->kind == kPc_Cel_String || a->kind == kPc_Cel_Bytes)) {
    size_t len = a->v.s.size + b->v.s.size;
    char *s = cel_new_string(e, len, n->pos);
    if (s == NULL) return kCel_Fatal;
    if (a->v.s.size) memcpy(s, a->v.s.data, a->v.s.size);
    if (b->v.s.size) memcpy(s + a->v.s.size, b->v.s.data, b->v.s.size);
    s[len] = '\0';
    *out = a->kind == kPc_Cel_String ? cel_string(s, len) : cel_bytes(s, len);
    return kCel_Ok;
  }
  if (fn == kCelFn_ADD && a->kind == kPc_Cel_List && b->kind == kPc_Cel_List) {
    const pc_CelList *x = a->v.list, *y = b->v.list;
    if (y->size == 0) {
      *out = *a;
      return kCel_Ok;
    }
    if (x->size == 0) {
      *out = *b;
      return kCel_Ok;
    }
    size_t len = x->size + y->size;
    if (cel_check_size(e, len, n->pos) != kCel_Ok || cel_steps(e, len, n->pos) != kCel_Ok)
      return kCel_Fatal;
    pc_CelValue *items = cel_alloc(e, len * sizeof *items, n->pos);
    if (items == NULL) return kCel_Fatal;
    int rc;
    for (size_t i = 0; i < x->size; i++)
      if ((rc = cel_list_get(e, x, i, n->pos, &items[i])) != kCel_Ok) return rc;
    for (size_t i = 0; i < y->size; i++)
      if ((rc = cel_list_get(e, y, i, n->pos, &items[x->size + i])) != kCel_Ok) return rc;
    return cel_new_list(e, items, len, n->pos, out);
  }
  int ta = a->kind == kPc_Cel_Timestamp, tb = b->kind == kPc_Cel_Timestamp;
  int da = a->kind == kPc_Cel_Duration, db = b->kind == kPc_Cel_Duration;
  if (fn == kCelFn_ADD && ((ta && db) || (da && tb) || (da && db)))
    return time_add(e, n, ta || da ? a : b, ta || da ? b : a, 0, out);
  if (fn == kCelFn_SUB && ((ta && (db || tb)) || (da && db))) return time_add(e, n, a, b, 1, out);
  pc_CelValue args[2] = {*a, *b};
  return cel_no_overload(e, n, args, 2);
}

/* -- Strings -------------------------------------------------------------------- */

static int string_test(cel_E *e, const cel_Node *n, pc_CelValue *a, pc_CelValue *out) {
  if (a[0].kind != a[1].kind || (a[0].kind != kPc_Cel_String && a[0].kind != kPc_Cel_Bytes))
    return cel_no_overload(e, n, a, 2);
  const pc_StringView *s = &a[0].v.s, *t = &a[1].v.s;
  int r;
  switch (n->fn) {
  case kCelFn_CONTAINS:
    /* a linear search: a step per 16 bytes of either */
    if (cel_steps(e, s->size / 16 + t->size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
    r = pc_Cel_Find(s->data, s->size, t->data, t->size) != SIZE_MAX;
    break;
  case kCelFn_STARTS_WITH: r = t->size <= s->size && memcmp(s->data, t->data, t->size) == 0; break;
  default:
    r = t->size <= s->size && memcmp(s->data + s->size - t->size, t->data, t->size) == 0;
    break;
  }
  *out = cel_bool(r);
  return kCel_Ok;
}

/* -- Conversions -------------------------------------------------------------------- */

/* Strict decimal integers as Go's strconv reads them: an optional sign
 * (none for unsigned), digits only. */
static int parse_int(const pc_StringView *s, int is_signed, int64_t *i, uint64_t *u) {
  size_t k = 0;
  int neg = 0;
  if (is_signed && k < s->size && (s->data[k] == '-' || s->data[k] == '+'))
    neg = s->data[k++] == '-';
  if (k == s->size) return 0;
  uint64_t v = 0;
  for (; k < s->size; k++) {
    char c = s->data[k];
    if (c < '0' || c > '9') return 0;
    if (v > (UINT64_MAX - (uint64_t)(c - '0')) / 10) return -1;
    v = v * 10 + (uint64_t)(c - '0');
  }
  if (!is_signed) {
    *u = v;
    return 1;
  }
  if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return -1;
  *i = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 1;
}

static int word_is(const char *s, size_t n, const char *w) {
  if (strlen(w) != n) return 0;
  for (size_t i = 0; i < n; i++)
    if ((s[i] | 0x20) != w[i]) return 0;
  return 1;
}

static size_t digits(const char *s, size_t n, size_t i, int hex) {
  size_t start = i;
  while (i < n &&
         ((s[i] >= '0' && s[i] <= '9') || (hex && ((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'f'))))
    i++;
  return i - start;
}

/* What Go's strconv.ParseFloat reads (cel-go's double()): a sign, then
 * decimal digits with a point and an exponent, a hexadecimal mantissa with
 * a 'p' exponent, "inf", "infinity" or "nan" in any case; nothing else. */
static int float_syntax(const char *s, size_t n) {
  size_t i = 0;
  if (i < n && (s[i] == '+' || s[i] == '-')) i++;
  if (word_is(s + i, n - i, "inf") || word_is(s + i, n - i, "infinity") ||
      word_is(s + i, n - i, "nan"))
    return 1;
  int hex = n - i > 2 && s[i] == '0' && (s[i + 1] | 0x20) == 'x';
  if (hex) i += 2;
  size_t m = digits(s, n, i, hex);
  i += m;
  if (i < n && s[i] == '.') {
    size_t f = digits(s, n, i + 1, hex);
    m += f;
    i += 1 + f;
  }
  if (m == 0) return 0;
  if (i < n && (s[i] | 0x20) == (hex ? 'p' : 'e')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t x = digits(s, n, i, 0);
    if (x == 0) return 0;
    i += x;
  } else if (hex) {
    return 0;
  }
  return i == n;
}

static int parse_double(const pc_StringView *s, double *d) {
  if (s->size == 0 || s->size > 512 || !float_syntax(s->data, s->size)) return 0;
  char buf[513];
  memcpy(buf, s->data, s->size);
  buf[s->size] = '\0';
  errno = 0;
  *d = strtod(buf, NULL);
  if (errno == ERANGE && isinf(*d)) return -1;
  return 1;
}

static int convert(cel_E *e, const cel_Node *n, pc_CelValue *a, pc_CelValue *out) {
  const pc_CelValue *x = &a[0];
  char tmp[64];
  int r;
  switch (n->fn) {
  case kCelFn_INT:
    switch (x->kind) {
    case kPc_Cel_Int: *out = *x; return kCel_Ok;
    case kPc_Cel_Uint:
      if (x->v.u > (uint64_t)INT64_MAX) return cel_fail(e, n->pos, "int() range error");
      *out = cel_int((int64_t)x->v.u);
      return kCel_Ok;
    case kPc_Cel_Double:
      if (!(x->v.d > -9223372036854775808.0 && x->v.d < 9223372036854775808.0))
        return cel_fail(e, n->pos, "int() range error");
      *out = cel_int((int64_t)x->v.d);
      return kCel_Ok;
    case kPc_Cel_String: {
      int64_t i;
      r = parse_int(&x->v.s, 1, &i, NULL);
      if (r <= 0)
        return cel_fail(e, n->pos,
                        r < 0 ? "int() range error" : "int() conversion error: not an integer");
      *out = cel_int(i);
      return kCel_Ok;
    }
    case kPc_Cel_Timestamp: *out = cel_int(x->v.t.seconds); return kCel_Ok;
    default: return cel_no_overload(e, n, a, 1);
    }
  case kCelFn_UINT:
    switch (x->kind) {
    case kPc_Cel_Uint: *out = *x; return kCel_Ok;
    case kPc_Cel_Int:
      if (x->v.i < 0) return cel_fail(e, n->pos, "uint() range error");
      *out = cel_uint((uint64_t)x->v.i);
      return kCel_Ok;
    case kPc_Cel_Double:
      if (!(x->v.d >= 0 && x->v.d < 18446744073709551616.0))
        return cel_fail(e, n->pos, "uint() range error");
      *out = cel_uint((uint64_t)x->v.d);
      return kCel_Ok;
    case kPc_Cel_String: {
      uint64_t u;
      r = parse_int(&x->v.s, 0, NULL, &u);
      if (r <= 0)
        return cel_fail(e, n->pos,
                        r < 0 ? "uint() range error"
                              : "uint() conversion error: not an unsigned integer");
      *out = cel_uint(u);
      return kCel_Ok;
    }
    default: return cel_no_overload(e, n, a, 1);
    }
  case kCelFn_DOUBLE:
    switch (x->kind) {
    case kPc_Cel_Double: *out = *x; return kCel_Ok;
    case kPc_Cel_Int: *out = cel_double((double)x->v.i); return kCel_Ok;
    case kPc_Cel_Uint: *out = cel_double((double)x->v.u); return kCel_Ok;
    case kPc_Cel_String: {
      double d;
      r = parse_double(&x->v.s, &d);
      if (r <= 0)
        return cel_fail(e, n->pos,
                        r < 0 ? "double() range error" : "double() conversion error: not a number");
      *out = cel_double(d);
      return kCel_Ok;
    }
    default: return cel_no_overload(e, n, a, 1);
    }
  case kCelFn_STRING: {
    size_t len;
    switch (x->kind) {
    case kPc_Cel_String: *out = *x; return kCel_Ok;
    case kPc_Cel_Bytes:
      if (cel_steps(e, x->v.s.size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
      if (!pc_Wire_ValidUtf8((const uint8_t *)x->v.s.data, x->v.s.size))
        return cel_fail(e, n->pos, "string() of bytes that are not UTF-8");
      *out = cel_string(x->v.s.data, x->v.s.size);
      return kCel_Ok;
    case kPc_Cel_Bool:
      *out = x->v.b ? cel_string("true", 4) : cel_string("false", 5);
      return kCel_Ok;
    case kPc_Cel_Int: len = (size_t)snprintf(tmp, sizeof tmp, "%" PRId64, x->v.i); break;
    case kPc_Cel_Uint: len = (size_t)snprintf(tmp, sizeof tmp, "%" PRIu64, x->v.u); break;
    case kPc_Cel_Double: len = (size_t)cel_double_text(x->v.d, tmp, sizeof tmp); break;
    case kPc_Cel_Timestamp: len = cel_format_timestamp(x->v.t.seconds, x->v.t.nanos, tmp); break;
    case kPc_Cel_Duration: len = cel_format_duration(x->v.t.seconds, x->v.t.nanos, tmp); break;
    default: return cel_no_overload(e, n, a, 1);
    }
    char *s = cel_new_string(e, len, n->pos);
    if (s == NULL) return kCel_Fatal;
    memcpy(s, tmp, len + 1);
    *out = cel_string(s, len);
    return kCel_Ok;
  }
  case kCelFn_BYTES:
    if (x->kind == kPc_Cel_Bytes)
      *out = *x;
    else if (x->kind == kPc_Cel_String)
      *out = cel_bytes(x->v.s.data, x->v.s.size);
    else
      return cel_no_overload(e, n, a, 1);
    return kCel_Ok;
  case kCelFn_BOOL:
    if (x->kind == kPc_Cel_Bool) {
      *out = *x;
      return kCel_Ok;
    }
    if (x->kind == kPc_Cel_String) {
      static const char *const kTrue[] = {"1", "t", "true", "TRUE", "True"};
      static const char *const kFalse[] = {"0", "f", "false", "FALSE", "False"};
      for (int i = 0; i < 5; i++) {
        if (x->v.s.size == strlen(kTrue[i]) && memcmp(x->v.s.data, kTrue[i], x->v.s.size) == 0) {
          *out = cel_bool(1);
          return kCel_Ok;
        }
        if (x->v.s.size == strlen(kFalse[i]) && memcmp(x->v.s.data, kFalse[i], x->v.s.size) == 0) {
          *out = cel_bool(0);
          return kCel_Ok;
        }
      }
      return cel_fail(e, n->pos, "bool() conversion error: '%.*s' is not a boolean",
                      (int)(x->v.s.size > 64 ? 64 : x->v.s.size), x->v.s.data);
    }
    return cel_no_overload(e, n, a, 1);
  case kCelFn_DURATION:
  case kCelFn_TIMESTAMP: {
    int ts = n->fn == kCelFn_TIMESTAMP;
    pc_CelKind kind = ts ? kPc_Cel_Timestamp : kPc_Cel_Duration;
    if (x->kind == kind) {
      *out = *x;
      return kCel_Ok;
    }
    if (ts && x->kind == kPc_Cel_Int) return make_time(e, n, kind, x->v.i, 0, out);
    if (x->kind != kPc_Cel_String) return cel_no_overload(e, n, a, 1);
    int64_t sec;
    int32_t nanos;
    r = ts ? cel_parse_timestamp(x->v.s.data, x->v.s.size, &sec, &nanos)
           : cel_parse_duration(x->v.s.data, x->v.s.size, &sec, &nanos);
    if (r < 0) return cel_fail(e, n->pos, "%s out of range", ts ? "timestamp" : "duration");
    if (r == 0)
      return cel_fail(e, n->pos, "%s() conversion error: '%.*s' is not %s",
                      ts ? "timestamp" : "duration", (int)(x->v.s.size > 64 ? 64 : x->v.s.size),
                      x->v.s.data, ts ? "an RFC 3339 time" : "a duration");
    return make_time(e, n, kind, sec, nanos, out);
  }
  case kCelFn_DYN: *out = *x; return kCel_Ok;
  default: /* kCelFn_TYPE */
    if (x->kind == kPc_Cel_Type)
      *out = cel_type("type");
    else
      *out = cel_type(cel_type_name(x));
    return kCel_Ok;
  }
}

/* -- Regular expressions ------------------------------------------------------ */

int cel_regex(cel_E *e, const cel_Node *n, const pc_StringView *p, const pc_CelRegex **out) {
  if (n->re != NULL) {
    *out = n->re;
    return kCel_Ok;
  }
  for (unsigned i = 0; i < CEL_REGEX_CACHE; i++) {
    if (e->cache[i].re != NULL && e->cache[i].len == p->size &&
        (p->size == 0 || memcmp(e->cache[i].pattern, p->data, p->size) == 0)) {
      *out = e->cache[i].re;
      return kCel_Ok;
    }
  }
  const cel_Node *pat = n->kids[1];
  /* compiling a pattern made while evaluating is charged: a base for
     RE2's fixed work, then in proportion to the pattern and the program
     it made, so no evaluation compiles patterns unbounded */
  if (cel_steps(e, CEL_REGEX_COMPILE_STEPS + 16 * (uint64_t)p->size, pat->pos) != kCel_Ok)
    return kCel_Fatal;
  char why[256];
  pc_CelRegex *re = pc_CelRegex_New(p->data, p->size, why, sizeof why);
  if (re == NULL) {
    if (why[0] == '\0') return cel_fatal(e, kPc_CelStatus_NoMemory, pat->pos, "memory");
    if (strstr(why, "too large") != NULL &&
        cel_steps(e, CEL_REGEX_TOO_LARGE_STEPS, pat->pos) != kCel_Ok)
      return kCel_Fatal;
    return cel_fail(e, pat->pos, "invalid regular expression: %s", why);
  }
  if (cel_steps(e, CEL_REGEX_PROGRAM_STEPS * (uint64_t)pc_CelRegex_ProgramSize(re), pat->pos) !=
      kCel_Ok) {
    pc_CelRegex_Free(re);
    return kCel_Fatal;
  }
  char *copy = e->alloc(e->ud, NULL, 0, p->size + 1);
  if (copy == NULL) {
    pc_CelRegex_Free(re);
    return cel_fatal(e, kPc_CelStatus_NoMemory, pat->pos, "memory");
  }
  if (p->size) memcpy(copy, p->data, p->size);
  unsigned k = e->cache_next++ % CEL_REGEX_CACHE;
  if (e->cache[k].re != NULL) {
    pc_CelRegex_Free(e->cache[k].re);
    e->alloc(e->ud, e->cache[k].pattern, e->cache[k].len + 1, 0);
  }
  e->cache[k].pattern = copy;
  e->cache[k].len = p->size;
  e->cache[k].re = re;
  *out = re;
  return kCel_Ok;
}

/* -- Dispatch ------------------------------------------------------------------------- */

int cel_call(cel_E *e, const cel_Node *n, pc_CelValue *a, size_t nargs, pc_CelValue *out) {
  int rc, cmp;
  switch (n->fn) {
  case kCelFn_NEG:
    if (a[0].kind == kPc_Cel_Int) {
      if (a[0].v.i == INT64_MIN) return overflow(e, n);
      *out = cel_int(-a[0].v.i);
      return kCel_Ok;
    }
    if (a[0].kind == kPc_Cel_Double) {
      *out = cel_double(-a[0].v.d);
      return kCel_Ok;
    }
    return cel_no_overload(e, n, a, 1);
  case kCelFn_NOT:
    if (a[0].kind != kPc_Cel_Bool) return cel_no_overload(e, n, a, 1);
    *out = cel_bool(!a[0].v.b);
    return kCel_Ok;
  case kCelFn_ADD:
  case kCelFn_SUB:
  case kCelFn_MUL:
  case kCelFn_DIV:
  case kCelFn_MOD: return arith(e, n, &a[0], &a[1], out);
  case kCelFn_EQ:
  case kCelFn_NE:
    if ((rc = cel_equal(e, &a[0], &a[1], n->pos, &cmp)) != kCel_Ok) return rc;
    *out = cel_bool(n->fn == kCelFn_EQ ? cmp : !cmp);
    return kCel_Ok;
  case kCelFn_LT:
  case kCelFn_LE:
  case kCelFn_GT:
  case kCelFn_GE: {
    if ((rc = cel_compare(e, &a[0], &a[1], n->pos, &cmp)) != kCel_Ok) return rc;
    int r;
    if (cmp == 2)
      r = 0; /* NaN */
    else if (n->fn == kCelFn_LT)
      r = cmp < 0;
    else if (n->fn == kCelFn_LE)
      r = cmp <= 0;
    else if (n->fn == kCelFn_GT)
      r = cmp > 0;
    else
      r = cmp >= 0;
    *out = cel_bool(r);
    return kCel_Ok;
  }
  case kCelFn_IN:
    if (a[1].kind == kPc_Cel_List) {
      const pc_CelList *l = a[1].v.list;
      for (size_t i = 0; i < l->size; i++) {
        pc_CelValue x;
        int eq;
        if ((rc = cel_steps(e, 1, n->pos)) != kCel_Ok ||
            (rc = cel_list_get(e, l, i, n->pos, &x)) != kCel_Ok ||
            (rc = cel_equal(e, &a[0], &x, n->pos, &eq)) != kCel_Ok)
          return rc;
        if (eq) {
          *out = cel_bool(1);
          return kCel_Ok;
        }
      }
      *out = cel_bool(0);
      return kCel_Ok;
    }
    if (a[1].kind == kPc_Cel_Map) {
      int found;
      if ((rc = cel_map_find(e, a[1].v.map, &a[0], n->pos, NULL, &found)) != kCel_Ok) return rc;
      *out = cel_bool(found);
      return kCel_Ok;
    }
    return cel_no_overload(e, n, a, 2);
  case kCelFn_SIZE:
    switch (a[0].kind) {
    case kPc_Cel_String:
      if (cel_steps(e, a[0].v.s.size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
      *out = cel_int((int64_t)cel_utf8_count(a[0].v.s.data, a[0].v.s.size));
      return kCel_Ok;
    case kPc_Cel_Bytes: *out = cel_int((int64_t)a[0].v.s.size); return kCel_Ok;
    case kPc_Cel_List: *out = cel_int((int64_t)a[0].v.list->size); return kCel_Ok;
    case kPc_Cel_Map: *out = cel_int((int64_t)a[0].v.map->size); return kCel_Ok;
    default: return cel_no_overload(e, n, a, 1);
    }
  case kCelFn_CONTAINS:
  case kCelFn_STARTS_WITH:
  case kCelFn_ENDS_WITH: return string_test(e, n, a, out);
  case kCelFn_MATCHES: {
    if (a[0].kind != kPc_Cel_String || a[1].kind != kPc_Cel_String)
      return cel_no_overload(e, n, a, 2);
    const pc_CelRegex *re;
    if ((rc = cel_regex(e, n, &a[1].v.s, &re)) != kCel_Ok) return rc;
    if (cel_steps(e, 1 + a[0].v.s.size / 16, n->pos) != kCel_Ok) return kCel_Fatal;
    int m = pc_CelRegex_Match(re, a[0].v.s.data, a[0].v.s.size);
    if (m < 0) return cel_fatal(e, kPc_CelStatus_NoMemory, n->pos, "memory");
    *out = cel_bool(m);
    return kCel_Ok;
  }
  case kCelFn_INT:
  case kCelFn_UINT:
  case kCelFn_DOUBLE:
  case kCelFn_STRING:
  case kCelFn_BYTES:
  case kCelFn_BOOL:
  case kCelFn_DURATION:
  case kCelFn_TIMESTAMP:
  case kCelFn_DYN:
  case kCelFn_TYPE: return convert(e, n, a, out);
  case kCelFn_GET_FULL_YEAR:
  case kCelFn_GET_MONTH:
  case kCelFn_GET_DAY_OF_YEAR:
  case kCelFn_GET_DAY_OF_MONTH:
  case kCelFn_GET_DATE:
  case kCelFn_GET_DAY_OF_WEEK:
  case kCelFn_GET_HOURS:
  case kCelFn_GET_MINUTES:
  case kCelFn_GET_SECONDS:
  case kCelFn_GET_MILLISECONDS: return time_part(e, n, a, nargs, out);
  default: return cel_ext_call(e, n, a, nargs, out);
  }
}
