/* Proto3 JSON into messages (json.h), in two passes: a strict RFC 8259
 * parser builds a tree of the document in a scratch arena (strings
 * unescaped and checked, numbers kept as their text), then the tree is
 * read into the message by its type. The tree lets an Any find "@type"
 * wherever it stands; every node keeps its byte offset for errors. */
#include "json/json_internal.h"
#include "base/utf8.h"
#include "wire/encode.h"
#include "wire/wire.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- The tree ------------------------------------------------------------- */

typedef enum { J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT } JType;

typedef struct JNode {
  JType type;
  size_t off;            /* where the value starts in the input */
  const char *s;         /* string (unescaped) or number text */
  size_t n;              /* its length */
  struct JNode *first;   /* array elements, object members */
  struct JNode *next;    /* the next element or member */
  size_t count;          /* elements or members */
  const char *key;       /* member name (unescaped), objects' children */
  size_t keylen, keyoff; /* its length and offset */
} JNode;

typedef struct {
  const char *p, *start, *end;
  pc_Arena *scratch;
  pc_Error *err;
  int max_nesting;
  pc_JsonStatus status;
} P;

#define PFAIL(ps, path, off, ...)                                                                  \
  do {                                                                                             \
    char what_[256];                                                                               \
    snprintf(what_, sizeof what_, __VA_ARGS__);                                                    \
    pc_Json_Fail((ps)->err, (path), "%s at offset %zu", what_, (size_t)(off));                     \
    (ps)->status = kPc_JsonStatus_Invalid;                                                         \
    return NULL;                                                                                   \
  } while (0)

static void *p_oom(P *ps) {
  ps->status = kPc_JsonStatus_OutOfMemory;
  pc_Error_Set(ps->err, "not enough memory");
  return NULL;
}

static void skip_ws(P *ps) {
  const char *p = ps->p;
  while (p < ps->end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  ps->p = p;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static long read_hex4(const char *p, const char *end) {
  if (end - p < 4) return -1;
  long v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(p[i]);
    if (h < 0) return -1;
    v = v << 4 | h;
  }
  return v;
}

/* Length of the UTF-8 sequence at 'p' (RFC 3629), 0 when malformed. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
  unsigned c = p[0];
  size_t n;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, min = 0x10000;
  else
    return 0;
  if ((size_t)(end - p) < n) return 0;
  unsigned cp = c & (0x3f >> (n - 1));
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

/* A string at ps->p (the opening quote): its unescaped bytes in '*s' /
 * '*n' (pointing into the input when it has no escapes). 0 on error. */
static int parse_string(P *ps, const pc_JsonPath *path, const char **s, size_t *n) {
  const char *start = ps->p + 1, *p = start, *end = ps->end;
  int escapes = 0;
  /* First pass: find the end, check UTF-8 and control characters. */
  while (p < end && *p != '"') {
    unsigned char c = (unsigned char)*p;
    if (c == '\\') {
      escapes = 1;
      p += 2;
      continue;
    }
    if (c < 0x20) {
      pc_Json_Fail(ps->err, path, "control character U+%04X in a string at offset %zu", c,
                   (size_t)(p - ps->start));
      ps->status = kPc_JsonStatus_Invalid;
      return 0;
    }
    if (c < 0x80) {
      p++;
      continue;
    }
    size_t l = utf8_len((const unsigned char *)p, (const unsigned char *)end);
    if (l == 0) {
      pc_Json_Fail(ps->err, path, "invalid UTF-8 at offset %zu", (size_t)(p - ps->start));
      ps->status = kPc_JsonStatus_Invalid;
      return 0;
    }
    p += l;
  }
  if (p >= end) {
    pc_Json_Fail(ps->err, path, "unterminated string at offset %zu", (size_t)(ps->p - ps->start));
    ps->status = kPc_JsonStatus_Invalid;
    return 0;
  }
  const char *close = p;
  ps->p = close + 1;
  if (!escapes) {
    *s = start;
    *n = (size_t)(close - start);
    return 1;
  }
  char *out = pc_Arena_Malloc(ps->scratch, (size_t)(close - start) + 1);
  if (out == NULL) {
    p_oom(ps);
    return 0;
  }
  size_t o = 0;
  for (p = start; p < close;) {
    if (*p != '\\') {
      out[o++] = *p++;
      continue;
    }
    size_t at = (size_t)(p - ps->start);
    char e = p[1];
    p += 2;
    switch (e) {
    case '"': out[o++] = '"'; break;
    case '\\': out[o++] = '\\'; break;
    case '/': out[o++] = '/'; break;
    case 'b': out[o++] = '\b'; break;
    case 'f': out[o++] = '\f'; break;
    case 'n': out[o++] = '\n'; break;
    case 'r': out[o++] = '\r'; break;
    case 't': out[o++] = '\t'; break;
    case 'u': {
      long cp = read_hex4(p, close);
      if (cp < 0) goto bad_escape;
      p += 4;
      if (cp >= 0xdc00 && cp <= 0xdfff) goto lone;
      if (cp >= 0xd800 && cp <= 0xdbff) {
        long lo = close - p >= 6 && p[0] == '\\' && p[1] == 'u' ? read_hex4(p + 2, close) : -1;
        if (lo < 0xdc00 || lo > 0xdfff) goto lone;
        p += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      }
      o += pc_Utf8_Put((uint32_t)cp, out + o);
      break;
    lone:
      pc_Json_Fail(ps->err, path, "lone surrogate in \\u escape at offset %zu", at);
      ps->status = kPc_JsonStatus_Invalid;
      return 0;
    }
    default:
    bad_escape:
      pc_Json_Fail(ps->err, path, "invalid escape at offset %zu", at);
      ps->status = kPc_JsonStatus_Invalid;
      return 0;
    }
  }
  *s = out;
  *n = o;
  return 1;
}

/* A number at ps->p: RFC 8259's grammar, kept as text. 0 on error. */
static int parse_number(P *ps, const pc_JsonPath *path, JNode *v) {
  const char *p = ps->p, *end = ps->end;
  if (p < end && *p == '-') p++;
  if (p < end && *p == '0') {
    p++;
  } else if (p < end && *p >= '1' && *p <= '9') {
    while (p < end && *p >= '0' && *p <= '9') p++;
  } else {
    goto bad;
  }
  if (p < end && *p == '.') {
    p++;
    if (p >= end || *p < '0' || *p > '9') goto bad;
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p >= end || *p < '0' || *p > '9') goto bad;
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  v->type = J_NUMBER;
  v->s = ps->p;
  v->n = (size_t)(p - ps->p);
  ps->p = p;
  return 1;
bad:
  pc_Json_Fail(ps->err, path, "invalid number at offset %zu", (size_t)(ps->p - ps->start));
  ps->status = kPc_JsonStatus_Invalid;
  return 0;
}

static int literal(P *ps, const char *word, size_t n) {
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return 0;
  ps->p += n;
  return 1;
}

static JNode *parse_value(P *ps, const pc_JsonPath *path, int nesting);

static JNode *parse_container(P *ps, JNode *v, const pc_JsonPath *path, int nesting) {
  int object = *ps->p == '{';
  char close = object ? '}' : ']';
  v->type = object ? J_OBJECT : J_ARRAY;
  if (nesting >= ps->max_nesting)
    PFAIL(ps, path, v->off, "JSON nested deeper than %d (2 * max_depth + 4)", ps->max_nesting);
  ps->p++;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == close) {
    ps->p++;
    return v;
  }
  JNode **tail = &v->first;
  for (;;) {
    pc_JsonPath step = {path, NULL, 0, v->count};
    const char *key = NULL;
    size_t keylen = 0, keyoff = 0;
    if (object) {
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != '"')
        PFAIL(ps, path, ps->p - ps->start, "expected a member name");
      keyoff = (size_t)(ps->p - ps->start);
      if (!parse_string(ps, path, &key, &keylen)) return NULL;
      step.key = key;
      step.keylen = keylen;
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != ':') PFAIL(ps, &step, ps->p - ps->start, "expected ':'");
      ps->p++;
    }
    JNode *e = parse_value(ps, &step, nesting + 1);
    if (e == NULL) return NULL;
    e->key = key;
    e->keylen = keylen;
    e->keyoff = keyoff;
    *tail = e;
    tail = &e->next;
    v->count++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == close) {
      ps->p++;
      return v;
    }
    if (ps->p >= ps->end) PFAIL(ps, path, ps->p - ps->start, "unexpected end of input");
    PFAIL(ps, path, ps->p - ps->start, "expected ',' or '%c'", close);
  }
}

static JNode *parse_value(P *ps, const pc_JsonPath *path, int nesting) {
  skip_ws(ps);
  if (ps->p >= ps->end) PFAIL(ps, path, ps->p - ps->start, "unexpected end of input");
  JNode *v = pc_Arena_Calloc(ps->scratch, sizeof *v);
  if (v == NULL) return p_oom(ps);
  v->off = (size_t)(ps->p - ps->start);
  switch (*ps->p) {
  case '{':
  case '[': return parse_container(ps, v, path, nesting);
  case '"': v->type = J_STRING; return parse_string(ps, path, &v->s, &v->n) ? v : NULL;
  case 't':
    if (!literal(ps, "true", 4)) break;
    v->type = J_TRUE;
    return v;
  case 'f':
    if (!literal(ps, "false", 5)) break;
    v->type = J_FALSE;
    return v;
  case 'n':
    if (!literal(ps, "null", 4)) break;
    v->type = J_NULL;
    return v;
  default:
    if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
      return parse_number(ps, path, v) ? v : NULL;
  }
  PFAIL(ps, path, v->off, "unexpected character '%s'",
        (unsigned char)*ps->p >= 0x20 && (unsigned char)*ps->p < 0x7f ? (char[2]){*ps->p, 0} : "?");
}

/* -- Into the message ----------------------------------------------------- */

typedef struct {
  pc_Arena *a;       /* the message's */
  pc_Arena *scratch; /* the tree's, temporary lookups */
  const pc_JsonReadOptions *o;
  const pc_Pool *pool;
  pc_Error *err;
  int max_depth;
  const JNode *skip; /* the "@type" member of the Any being read */
  pc_JsonStatus status;
} R;

#define RFAIL(r, path, off, ...)                                                                   \
  do {                                                                                             \
    char what_[PC_ERROR_MAX];                                                                      \
    snprintf(what_, sizeof what_, __VA_ARGS__);                                                    \
    pc_Json_Fail((r)->err, (path), "%s at offset %zu", what_, (size_t)(off));                      \
    (r)->status = kPc_JsonStatus_Invalid;                                                          \
    return 0;                                                                                      \
  } while (0)

static int r_oom(R *r) {
  r->status = kPc_JsonStatus_OutOfMemory;
  pc_Error_Set(r->err, "not enough memory");
  return 0;
}

static const char *kind_name(JType t) {
  static const char *const names[] = {"null",     "false",    "true",     "a number",
                                      "a string", "an array", "an object"};
  return names[t];
}

/* Text of the input in an error message: at most 100 bytes of it, escaped
 * as in a JSON string (pc_Error_Quote). */
enum { SHOW_ROOM = 104 };
#define SHOW(s, n) pc_Error_Quote((char[SHOW_ROOM]){0}, SHOW_ROOM, (s), (n), kPc_Quote_Json)

/* -- Numbers -------------------------------------------------------------- */

/* The number text of 'v' (a number, or a string holding one for integer
 * and float fields) in 's'/'n'; 0 when 'v' is neither. */
static int number_text(const JNode *v, const char **s, size_t *n) {
  if (v->type != J_NUMBER && v->type != J_STRING) return 0;
  *s = v->s;
  *n = v->n;
  return 1;
}

/* Whether 's' is a JSON number (the grammar of parse_number). */
static int is_json_number(const char *s, size_t n) {
  size_t i = 0;
  if (i < n && s[i] == '-') i++;
  if (i < n && s[i] == '0') {
    i++;
  } else if (i < n && s[i] >= '1' && s[i] <= '9') {
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  } else {
    return 0;
  }
  if (i < n && s[i] == '.') {
    i++;
    if (i >= n || s[i] < '0' || s[i] > '9') return 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= n || s[i] < '0' || s[i] > '9') return 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  }
  return i == n;
}

typedef enum { INT_OK, INT_SYNTAX, INT_FRACTION, INT_RANGE } IntResult;

/* A JSON number's exact integer value: magnitude in '*mag', sign in '*neg'.
 * Exponents and fractions are allowed when the value is integral. */
static IntResult exact_integer(const char *s, size_t n, uint64_t *mag, int *neg) {
  if (!is_json_number(s, n)) return INT_SYNTAX;
  size_t i = 0;
  *neg = s[0] == '-';
  if (*neg) i++;
  /* Digits (integer then fraction part), and the decimal exponent. */
  size_t ds = i, de;
  while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  de = i;
  size_t fs = 0, fe = 0;
  if (i < n && s[i] == '.') {
    fs = ++i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    fe = i;
  }
  long exp = 0;
  if (i < n) {
    i++;
    int eneg = 0;
    if (s[i] == '+' || s[i] == '-') eneg = s[i++] == '-';
    for (; i < n; i++)
      if (exp < 100000) exp = exp * 10 + (s[i] - '0');
    if (eneg) exp = -exp;
  }
  /* value = digits(int . frac) * 10^exp: walk the digits with their place. */
  uint64_t v = 0;
  long total = (long)(de - ds) + (long)(fe - fs); /* digits in all */
  long int_digits = (long)(de - ds) + exp;        /* digits left of the point */
  for (long k = 0; k < total; k++) {
    size_t at = k < (long)(de - ds) ? ds + (size_t)k : fs + (size_t)(k - (long)(de - ds));
    int d = s[at] - '0';
    if (k >= int_digits) {
      if (d != 0) return INT_FRACTION;
      continue;
    }
    if (v > (UINT64_MAX - (uint64_t)d) / 10) return INT_RANGE;
    v = v * 10 + (uint64_t)d;
  }
  /* Trailing zeros the exponent adds. */
  for (long k = total; k < int_digits; k++) {
    if (v == 0) break;
    if (v > UINT64_MAX / 10) return INT_RANGE;
    v *= 10;
  }
  *mag = v;
  return INT_OK;
}

/* Reads an integer of field type 't' from 'v' into 'out'. */
static int read_integer(R *r, const JNode *v, pc_FieldType t, pc_Value *out,
                        const pc_JsonPath *path) {
  const char *s;
  size_t n;
  if (!number_text(v, &s, &n))
    RFAIL(r, path, v->off, "integer expected, got %s", kind_name(v->type));
  uint64_t mag;
  int neg;
  IntResult res = exact_integer(s, n, &mag, &neg);
  if (res == INT_SYNTAX) RFAIL(r, path, v->off, "invalid integer \"%s\"", SHOW(s, n));
  if (res == INT_FRACTION) RFAIL(r, path, v->off, "integer expected, got %s", SHOW(s, n));
  int is_signed = t == kPc_Type_Int32 || t == kPc_Type_Sint32 || t == kPc_Type_Sfixed32 ||
                  t == kPc_Type_Int64 || t == kPc_Type_Sint64 || t == kPc_Type_Sfixed64 ||
                  t == kPc_Type_Enum;
  int is64 = t == kPc_Type_Int64 || t == kPc_Type_Sint64 || t == kPc_Type_Sfixed64 ||
             t == kPc_Type_Uint64 || t == kPc_Type_Fixed64;
  uint64_t pos_max = is_signed ? (is64 ? (uint64_t)INT64_MAX : (uint64_t)INT32_MAX)
                               : (is64 ? UINT64_MAX : (uint64_t)UINT32_MAX);
  uint64_t neg_max = is_signed ? pos_max + 1 : 0;
  if (res == INT_RANGE || (neg ? mag > neg_max : mag > pos_max))
    RFAIL(r, path, v->off, "%s out of range for %s", SHOW(s, n), pc_FieldType_Name(t));
  if (neg) {
    if (is64)
      out->i64 = mag == 0 ? 0 : (int64_t)(0 - mag);
    else
      out->i32 = mag == 0 ? 0 : (int32_t)(int64_t)(0 - (int64_t)mag);
  } else if (is64) {
    out->u64 = mag;
  } else {
    out->u32 = (uint32_t)mag;
  }
  return 1;
}

/* A float or double from a number or a string. */
static int read_floating(R *r, const JNode *v, int is_float, pc_Value *out,
                         const pc_JsonPath *path) {
  const char *s;
  size_t n;
  double d;
  if (!number_text(v, &s, &n))
    RFAIL(r, path, v->off, "number expected, got %s", kind_name(v->type));
  if (v->type == J_STRING && n == 3 && memcmp(s, "NaN", 3) == 0) {
    d = NAN;
  } else if (v->type == J_STRING && n == 8 && memcmp(s, "Infinity", 8) == 0) {
    d = INFINITY;
  } else if (v->type == J_STRING && n == 9 && memcmp(s, "-Infinity", 9) == 0) {
    d = -INFINITY;
  } else {
    if (!is_json_number(s, n)) RFAIL(r, path, v->off, "invalid number \"%s\"", SHOW(s, n));
    char buf[64];
    char *text = buf;
    if (n >= sizeof buf && (text = pc_Arena_Malloc(r->scratch, n + 1)) == NULL) return r_oom(r);
    memcpy(text, s, n);
    text[n] = '\0';
    d = strtod(text, NULL);
    if (isinf(d) || (is_float && isinf((float)d)))
      RFAIL(r, path, v->off, "%s out of range for %s", SHOW(s, n), is_float ? "float" : "double");
  }
  if (is_float)
    out->f = (float)d;
  else
    out->d = d;
  return 1;
}

/* -- Single values -------------------------------------------------------- */

static int read_message(R *r, const JNode *v, pc_Message *msg, const pc_MessageDef *m,
                        const pc_JsonPath *path, int depth);

/* Result of read_single besides 0 (error) and 1 (stored in '*out'):
 * the value is to be skipped (an unknown enum name under ignore_unknown). */
#define SKIP 2

static int read_enum(R *r, const JNode *v, const pc_FieldDef *f, pc_Value *out,
                     const pc_JsonPath *path) {
  const pc_EnumDef *e = f->enumdef;
  if (v->type == J_NULL && pc_Json_IsNullValue(e)) {
    out->i32 = 0;
    return 1;
  }
  if (v->type == J_STRING) {
    const pc_EnumValueDef *ev =
        memchr(v->s, 0, v->n) == NULL ? pc_EnumDef_FindByName(e, v->s, v->n) : NULL;
    if (ev != NULL) {
      out->i32 = ev->number;
      return 1;
    }
    /* A number in a string ("1") is accepted, as the C++ library does. */
    uint64_t mag;
    int neg;
    if (exact_integer(v->s, v->n, &mag, &neg) != INT_OK || !is_json_number(v->s, v->n)) {
      if (r->o->ignore_unknown) return SKIP;
      RFAIL(r, path, v->off, "unknown value \"%s\" of enum %s", SHOW(v->s, v->n), e->full_name);
    }
  } else if (v->type != J_NUMBER) {
    RFAIL(r, path, v->off, "enum name or number expected, got %s", kind_name(v->type));
  }
  if (!read_integer(r, v, kPc_Type_Enum, out, path)) return 0;
  if (e->closed && pc_EnumDef_FindByNumber(e, out->i32) == NULL) {
    if (r->o->ignore_unknown) return SKIP;
    RFAIL(r, path, v->off, "%" PRId32 " is not a value of closed enum %s", out->i32, e->full_name);
  }
  return 1;
}

static int read_bytes(R *r, const JNode *v, pc_Value *out, const pc_JsonPath *path) {
  if (v->type != J_STRING)
    RFAIL(r, path, v->off, "base64 string expected, got %s", kind_name(v->type));
  uint8_t *buf = pc_Arena_Malloc(r->a, v->n / 4 * 3 + 3);
  if (buf == NULL) return r_oom(r);
  size_t bad;
  size_t n = pc_Json_Base64Decode(v->s, v->n, buf, &bad);
  if (n == (size_t)-1) RFAIL(r, path, v->off + 1 + bad, "invalid base64");
  out->s.data = (const char *)buf;
  out->s.size = n;
  return 1;
}

/* One value of field 'f' (an element, for repeated fields) into '*out'.
 * Messages are made in r->a. Returns 1, SKIP or 0 (error). */
static int read_single(R *r, const JNode *v, const pc_FieldDef *f, pc_Value *out,
                       const pc_JsonPath *path, int depth) {
  switch (f->type) {
  case kPc_Type_Bool:
    if (v->type != J_TRUE && v->type != J_FALSE)
      RFAIL(r, path, v->off, "true or false expected, got %s", kind_name(v->type));
    out->b = v->type == J_TRUE;
    return 1;
  case kPc_Type_Float: return read_floating(r, v, 1, out, path);
  case kPc_Type_Double: return read_floating(r, v, 0, out, path);
  case kPc_Type_Enum: return read_enum(r, v, f, out, path);
  case kPc_Type_String:
    if (v->type != J_STRING) RFAIL(r, path, v->off, "string expected, got %s", kind_name(v->type));
    if (!pc_StringView_Copy(&out->s, v->s, v->n, r->a)) return r_oom(r);
    return 1;
  case kPc_Type_Bytes: return read_bytes(r, v, out, path);
  case kPc_Type_Message:
  case kPc_Type_Group: {
    pc_Message *sub = pc_Message_New(f->message, r->a);
    if (sub == NULL) return r_oom(r);
    if (!read_message(r, v, sub, f->message, path, depth + 1)) return 0;
    out->m = sub;
    return 1;
  }
  default: return read_integer(r, v, f->type, out, path);
  }
}

/* Whether null for field 'f' is a value (google.protobuf.Value, NullValue)
 * rather than "unset". */
static int null_is_value(const pc_FieldDef *f) {
  if (f->type == kPc_Type_Enum) return pc_Json_IsNullValue(f->enumdef);
  return f->message != NULL && !f->is_map && pc_Json_WktOf(f->message) == kWkt_Value;
}

/* A map key from its string form. */
static int read_key(R *r, const JNode *member, const pc_FieldDef *kf, pc_Value *out,
                    const pc_JsonPath *path) {
  JNode k;
  memset(&k, 0, sizeof k);
  k.type = J_STRING;
  k.s = member->key;
  k.n = member->keylen;
  k.off = member->keyoff;
  switch (kf->type) {
  case kPc_Type_Bool:
    if (k.n == 4 && memcmp(k.s, "true", 4) == 0)
      out->b = 1;
    else if (k.n == 5 && memcmp(k.s, "false", 5) == 0)
      out->b = 0;
    else
      RFAIL(r, path, k.off, "map key \"true\" or \"false\" expected");
    return 1;
  case kPc_Type_String:
    if (!pc_StringView_Copy(&out->s, k.s, k.n, r->a)) return r_oom(r);
    return 1;
  default: {
    /* Integer keys: plain decimal only. */
    size_t i = k.n > 0 && k.s[0] == '-' ? 1 : 0;
    int plain = i < k.n;
    for (; i < k.n; i++)
      if (k.s[i] < '0' || k.s[i] > '9') plain = 0;
    if (!plain) RFAIL(r, path, k.off, "map key \"%s\" is not an integer", SHOW(k.s, k.n));
    return read_integer(r, &k, kf->type, out, path);
  }
  }
}

static int read_map(R *r, const JNode *v, pc_Message *msg, const pc_FieldDef *f,
                    const pc_JsonPath *path, int depth) {
  if (v->type != J_OBJECT) RFAIL(r, path, v->off, "object expected, got %s", kind_name(v->type));
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  pc_SlotKind kslot = pc_FieldDef_ElemSlot(kf);
  pc_Map *map = pc_Message_MutableMap(msg, f, r->a);
  if (map == NULL) return r_oom(r);
  for (const JNode *e = v->first; e != NULL; e = e->next) {
    pc_JsonPath step = {path, e->key, e->keylen, 0};
    pc_Value key, val;
    memset(&key, 0, sizeof key);
    memset(&val, 0, sizeof val);
    if (!read_key(r, e, kf, &key, &step)) return 0;
    if (pc_Map_Find(map, kslot, key) != NULL) RFAIL(r, &step, e->keyoff, "duplicate map key");
    if (e->type == J_NULL && !null_is_value(vf)) RFAIL(r, &step, e->off, "null is not a map value");
    int st = read_single(r, e, vf, &val, &step, depth);
    if (st == 0) return 0;
    if (st == SKIP) continue;
    if (pc_Map_Set(map, kslot, key, val, r->a) == NULL) return r_oom(r);
  }
  return 1;
}

static int read_array(R *r, const JNode *v, pc_Message *msg, const pc_FieldDef *f,
                      const pc_JsonPath *path, int depth) {
  if (v->type != J_ARRAY) RFAIL(r, path, v->off, "array expected, got %s", kind_name(v->type));
  pc_Array *arr = pc_Message_MutableArray(msg, f, r->a);
  if (arr == NULL) return r_oom(r);
  size_t elem = pc_FieldDef_ElemSize(f);
  size_t i = 0;
  for (const JNode *e = v->first; e != NULL; e = e->next, i++) {
    pc_JsonPath step = {path, NULL, 0, i};
    if (e->type == J_NULL && !null_is_value(f))
      RFAIL(r, &step, e->off, "null is not an element of a repeated field");
    pc_Value val;
    memset(&val, 0, sizeof val);
    int st = read_single(r, e, f, &val, &step, depth);
    if (st == 0) return 0;
    if (st == SKIP) continue;
    if (!pc_Array_Append(arr, &val, elem, r->a)) return r_oom(r);
  }
  return 1;
}

/* Reads member 'v' into field 'f' of 'msg' (regular or extension). */
static int read_field(R *r, const JNode *v, pc_Message *msg, const pc_FieldDef *f,
                      const pc_JsonPath *path, int depth) {
  if (v->type == J_NULL && !null_is_value(f)) return 1; /* null: the default */
  if (f->is_map) return read_map(r, v, msg, f, path, depth);
  if (f->label == kPc_Label_Repeated) return read_array(r, v, msg, f, path, depth);
  pc_Value val;
  memset(&val, 0, sizeof val);
  int st = read_single(r, v, f, &val, path, depth);
  if (st != 1) return st != 0;
  if (f->is_extension) {
    pc_Value *cell = pc_Message_MutableExtension(msg, f, r->a);
    if (cell == NULL) return r_oom(r);
    *cell = val;
  } else {
    pc_Message_Set(msg, f, val);
  }
  return 1;
}

/* -- Well-known types ----------------------------------------------------- */

static const pc_FieldDef *field_n(const pc_MessageDef *m, int32_t n) {
  return pc_MessageDef_FindFieldByNumber(m, n);
}

/* Sets field 'n' of a well-known type (which has it by construction). */
static void set_n(pc_Message *msg, const pc_MessageDef *m, int32_t n, pc_Value v) {
  const pc_FieldDef *f = field_n(m, n);
  if (f != NULL) pc_Message_Set(msg, f, v);
}

/* 'n' decimal digits at 's' as a number, or -1. */
static long digits(const char *s, size_t n) {
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

/* Fractional seconds ".d{1,9}" at s[*i]: nanoseconds, or -1. */
static long read_fraction(const char *s, size_t n, size_t *i) {
  if (*i >= n || s[*i] != '.') return 0;
  size_t start = ++*i;
  while (*i < n && s[*i] >= '0' && s[*i] <= '9') ++*i;
  size_t len = *i - start;
  if (len == 0 || len > 9) return -1;
  long v = digits(s + start, len);
  for (size_t k = len; k < 9; k++) v *= 10;
  return v;
}

static int read_timestamp(R *r, const JNode *v, pc_Message *msg, const pc_MessageDef *m,
                          const pc_JsonPath *path) {
  if (v->type != J_STRING)
    RFAIL(r, path, v->off, "RFC 3339 timestamp string expected, got %s", kind_name(v->type));
  const char *s = v->s;
  size_t n = v->n, i = 19;
  if (n < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':')
    goto bad;
  long y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2);
  long hh = digits(s + 11, 2), mi = digits(s + 14, 2), ss = digits(s + 17, 2);
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || hh < 0 || hh > 23 || mi < 0 || mi > 59 || ss < 0 ||
      ss > 59)
    goto bad;
  static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > mdays[mo - 1] + (mo == 2 && leap)) goto bad;
  long nanos = read_fraction(s, n, &i);
  if (nanos < 0 || i >= n) goto bad;
  long offset = 0;
  if (s[i] == 'Z') {
    i++;
  } else if (s[i] == '+' || s[i] == '-') {
    if (n - i != 6 || s[i + 3] != ':') goto bad;
    long oh = digits(s + i + 1, 2), om = digits(s + i + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) goto bad;
    offset = (oh * 60 + om) * 60 * (s[i] == '+' ? 1 : -1);
    i += 6;
  } else {
    goto bad;
  }
  if (i != n) goto bad;
  int64_t secs = pc_Json_DaysFromCivil(y, (unsigned)mo, (unsigned)d) * 86400 + hh * 3600 + mi * 60 +
                 ss - offset;
  if (secs < PC_JSON_TIMESTAMP_MIN || secs > PC_JSON_TIMESTAMP_MAX)
    RFAIL(r, path, v->off, "timestamp \"%s\" out of range (years 1 to 9999)", SHOW(s, n));
  pc_Value val;
  val.i64 = secs;
  set_n(msg, m, 1, val);
  val.i64 = 0;
  val.i32 = (int32_t)nanos;
  set_n(msg, m, 2, val);
  return 1;
bad:
  RFAIL(r, path, v->off, "invalid RFC 3339 timestamp \"%s\"", SHOW(s, n));
}

static int read_duration(R *r, const JNode *v, pc_Message *msg, const pc_MessageDef *m,
                         const pc_JsonPath *path) {
  if (v->type != J_STRING)
    RFAIL(r, path, v->off, "duration string expected, got %s", kind_name(v->type));
  const char *s = v->s;
  size_t n = v->n, i = 0;
  int neg = n > 0 && s[0] == '-';
  if (neg) i++;
  size_t ds = i;
  while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  if (i == ds || i - ds > 12) goto bad;
  long long secs = 0;
  for (size_t k = ds; k < i; k++) secs = secs * 10 + (s[k] - '0');
  long nanos = read_fraction(s, n, &i);
  if (nanos < 0 || i + 1 != n || s[i] != 's') goto bad;
  if (secs > PC_JSON_DURATION_MAX)
    RFAIL(r, path, v->off, "duration \"%s\" out of range", SHOW(s, n));
  pc_Value val;
  val.i64 = neg ? -secs : secs;
  set_n(msg, m, 1, val);
  val.i64 = 0;
  val.i32 = (int32_t)(neg ? -nanos : nanos);
  set_n(msg, m, 2, val);
  return 1;
bad:
  RFAIL(r, path, v->off, "invalid duration \"%s\" (expected like \"1.5s\")", SHOW(s, n));
}

static int read_fieldmask(R *r, const JNode *v, pc_Message *msg, const pc_MessageDef *m,
                          const pc_JsonPath *path) {
  if (v->type != J_STRING)
    RFAIL(r, path, v->off, "FieldMask string expected, got %s", kind_name(v->type));
  const pc_FieldDef *f = field_n(m, 1);
  if (f == NULL || v->n == 0) return 1;
  pc_Array *arr = pc_Message_MutableArray(msg, f, r->a);
  if (arr == NULL) return r_oom(r);
  size_t start = 0;
  for (size_t i = 0; i <= v->n; i++) {
    if (i < v->n && v->s[i] != ',') continue;
    /* a path is dot-separated field names: none empty (protobuf-go
     * refuses such a path as not a valid name) */
    const char *p = v->s + start;
    size_t pn = i - start;
    if (pn == 0) RFAIL(r, path, v->off, "FieldMask \"%s\" has an empty path", SHOW(v->s, v->n));
    int empty_name = p[0] == '.' || p[pn - 1] == '.';
    for (size_t k = 1; k < pn && !empty_name; k++) empty_name = p[k] == '.' && p[k - 1] == '.';
    if (empty_name)
      RFAIL(r, path, v->off, "FieldMask path \"%s\" has an empty field name", SHOW(p, pn));
    /* each name is letters and digits, a letter first ('_' is refused
     * below: the JSON form is camelCase); protobuf-go refuses the rest
     * (whitespace included) as not a valid name */
    for (size_t k = 0; k < pn; k++) {
      unsigned char c = (unsigned char)p[k];
      int digit = c >= '0' && c <= '9';
      int letter = (unsigned)(c | 0x20) - 'a' < 26;
      if (c == '.' || c == '_' || digit || letter) {
        if (digit && (k == 0 || p[k - 1] == '.'))
          RFAIL(r, path, v->off, "FieldMask path \"%s\" has a field name starting with a digit",
                SHOW(p, pn));
        continue;
      }
      size_t cn = 1; /* the whole UTF-8 sequence of a non-ASCII character */
      while (c >= 0x80 && k + cn < pn && ((unsigned char)p[k + cn] & 0xc0) == 0x80) cn++;
      RFAIL(r, path, v->off, "FieldMask path \"%s\" has \"%s\", which no field name has",
            SHOW(p, pn), SHOW(p + k, cn));
    }
    char *out = pc_Arena_Malloc(r->a, 2 * (i - start) + 1);
    if (out == NULL) return r_oom(r);
    size_t len = pc_Json_CamelToSnake(v->s + start, i - start, out);
    if (len == (size_t)-1)
      RFAIL(r, path, v->off, "FieldMask path \"%s\" must be camelCase (no '_')",
            SHOW(v->s + start, i - start));
    pc_Value val;
    val.s.data = out;
    val.s.size = len;
    if (!pc_Array_Append(arr, &val, pc_FieldDef_ElemSize(f), r->a)) return r_oom(r);
    start = i + 1;
  }
  return 1;
}

static int read_value(R *r, const JNode *v, pc_Message *msg, const pc_MessageDef *m,
                      const pc_JsonPath *path, int depth) {
  pc_Value val;
  memset(&val, 0, sizeof val);
  const pc_FieldDef *f;
  switch (v->type) {
  case J_NULL: set_n(msg, m, 1, val); return 1;
  case J_NUMBER:
    if (!read_floating(r, v, 0, &val, path)) return 0;
    set_n(msg, m, 2, val);
    return 1;
  case J_STRING:
    if (!pc_StringView_Copy(&val.s, v->s, v->n, r->a)) return r_oom(r);
    set_n(msg, m, 3, val);
    return 1;
  case J_TRUE:
  case J_FALSE:
    val.b = v->type == J_TRUE;
    set_n(msg, m, 4, val);
    return 1;
  default:
    f = field_n(m, v->type == J_OBJECT ? 5 : 6);
    if (f == NULL || f->message == NULL) RFAIL(r, path, v->off, "malformed google.protobuf.Value");
    /* A Struct or list inside a Value is one level, not two. */
    if (!read_single(r, v, f, &val, path, depth - 1)) return 0;
    pc_Message_Set(msg, f, val);
    return 1;
  }
}

static int read_any(R *r, const JNode *v, pc_Message *msg, const pc_MessageDef *m,
                    const pc_JsonPath *path, int depth) {
  if (v->type != J_OBJECT) RFAIL(r, path, v->off, "object expected, got %s", kind_name(v->type));
  if (v->count == 0) return 1;
  const JNode *type = NULL;
  for (const JNode *e = v->first; e != NULL; e = e->next) {
    if (e->keylen != 5 || memcmp(e->key, "@type", 5) != 0) continue;
    pc_JsonPath step = {path, e->key, e->keylen, 0};
    if (type != NULL) RFAIL(r, &step, e->keyoff, "duplicate key");
    if (e->type != J_STRING) RFAIL(r, &step, e->off, "type URL string expected");
    type = e;
  }
  if (type == NULL) RFAIL(r, path, v->off, "Any without \"@type\"");
  pc_JsonPath tstep = {path, "@type", 5, 0};
  const char *name = type->s;
  size_t namelen = type->n;
  for (size_t i = type->n; i > 0; i--)
    if (type->s[i - 1] == '/') {
      name = type->s + i;
      namelen = type->n - i;
      break;
    }
  const pc_MessageDef *t = NULL;
  if (namelen > 0 && memchr(name, 0, namelen) == NULL) {
    char *z = pc_Arena_StrDup(r->scratch, name, namelen);
    if (z == NULL) return r_oom(r);
    t = r->o->find_type != NULL ? r->o->find_type(r->o->find_type_ud, r->pool, z)
                                : pc_Pool_FindMessage(r->pool, z);
  }
  if (t == NULL)
    RFAIL(r, &tstep, type->off, "type \"%s\" is not in the pool", SHOW(type->s, type->n));
  pc_Message *inner = pc_Message_New(t, r->a);
  if (inner == NULL) return r_oom(r);
  pc_JsonWkt inner_wkt = pc_Json_WktOf(t);
  if (inner_wkt != kWkt_None && inner_wkt != kWkt_Empty) {
    const JNode *value = NULL;
    for (const JNode *e = v->first; e != NULL; e = e->next) {
      if (e == type) continue;
      pc_JsonPath step = {path, e->key, e->keylen, 0};
      if (e->keylen != 5 || memcmp(e->key, "value", 5) != 0) {
        if (r->o->ignore_unknown) continue;
        RFAIL(r, &step, e->keyoff, "unknown member of an Any holding %s (only \"value\")",
              t->full_name);
      }
      if (value != NULL) RFAIL(r, &step, e->keyoff, "duplicate key");
      value = e;
    }
    if (value != NULL) {
      pc_JsonPath vstep = {path, "value", 5, 0};
      if (!read_message(r, value, inner, t, &vstep, depth + 1)) return 0;
    }
  } else {
    const JNode *outer = r->skip;
    r->skip = type;
    int ok = read_message(r, v, inner, t, path, depth + 1);
    r->skip = outer;
    if (!ok) return 0;
  }
  pc_WireWriter ww;
  pc_WireWriter_Init(&ww, NULL, NULL);
  pc_Error eerr;
  pc_Error_Init(&eerr);
  /* stable bytes: maps by key; required fields are not checked (partial) */
  static const pc_EncodeOptions kDeterministic = {1, 1};
  pc_EncodeStatus es = pc_Encode(inner, t, &kDeterministic, &ww, &eerr);
  pc_Value val;
  int ok =
      es == kPc_EncodeStatus_Ok && pc_StringView_Copy(&val.s, (const char *)pc_WireWriter_Data(&ww),
                                                      pc_WireWriter_Size(&ww), r->a);
  pc_WireWriter_Free(&ww);
  if (es == kPc_EncodeStatus_OutOfMemory || (es == kPc_EncodeStatus_Ok && !ok)) return r_oom(r);
  if (es != kPc_EncodeStatus_Ok)
    RFAIL(r, path, v->off, "Any value does not encode: %.200s", eerr.msg);
  set_n(msg, m, 2, val);
  if (!pc_StringView_Copy(&val.s, type->s, type->n, r->a)) return r_oom(r);
  set_n(msg, m, 1, val);
  return 1;
}

static int read_wkt(R *r, pc_JsonWkt wkt, const JNode *v, pc_Message *msg, const pc_MessageDef *m,
                    const pc_JsonPath *path, int depth) {
  switch (wkt) {
  case kWkt_Any: return read_any(r, v, msg, m, path, depth);
  case kWkt_Timestamp: return read_timestamp(r, v, msg, m, path);
  case kWkt_Duration: return read_duration(r, v, msg, m, path);
  case kWkt_FieldMask: return read_fieldmask(r, v, msg, m, path);
  case kWkt_Value: return read_value(r, v, msg, m, path, depth);
  case kWkt_Struct:
  case kWkt_ListValue: {
    const pc_FieldDef *f = field_n(m, 1);
    if (f == NULL) RFAIL(r, path, v->off, "malformed %s", m->full_name);
    if (v->type == J_NULL)
      RFAIL(r, path, v->off, "%s expected, got null", wkt == kWkt_Struct ? "object" : "array");
    return read_field(r, v, msg, f, path, depth);
  }
  case kWkt_Wrapper: {
    const pc_FieldDef *f = field_n(m, 1);
    if (f == NULL) RFAIL(r, path, v->off, "malformed %s", m->full_name);
    return read_field(r, v, msg, f, path, depth);
  }
  default: /* Empty: an object without members */
    if (v->type != J_OBJECT) RFAIL(r, path, v->off, "object expected, got %s", kind_name(v->type));
    for (const JNode *e = v->first; e != NULL && !r->o->ignore_unknown; e = e->next) {
      if (e == r->skip) continue; /* an Any's "@type" */
      pc_JsonPath step = {path, e->key, e->keylen, 0};
      RFAIL(r, &step, e->keyoff, "google.protobuf.Empty has no fields");
    }
    return 1;
  }
}

/* -- Messages ------------------------------------------------------------- */

/* The field member 'e' names: json_name or proto name ('*by_json' says
 * which), or an extension "[pkg.ext]" of 'm'. NULL when none (r->status
 * says whether memory ran out). */
static const pc_FieldDef *find_field(R *r, const pc_MessageDef *m, const JNode *e, uint32_t *hint) {
  const char *k = e->key;
  size_t n = e->keylen;
  if (memchr(k, 0, n) != NULL) return NULL;
  /* Members usually come in declaration order: try the one after the last. */
  if (*hint < m->field_count) {
    const pc_FieldDef *f = &m->fields[*hint];
    if (strncmp(f->json_name, k, n) == 0 && f->json_name[n] == '\0') {
      ++*hint;
      return f;
    }
  }
  const pc_FieldDef *f = pc_MessageDef_FindFieldByJsonName(m, k, n);
  if (f == NULL) f = pc_MessageDef_FindFieldByName(m, k, n);
  if (f != NULL) {
    *hint = f->index + 1;
    return f;
  }
  if (n > 2 && k[0] == '[' && k[n - 1] == ']') {
    char *z = pc_Arena_StrDup(r->scratch, k + 1, n - 2);
    if (z == NULL) {
      r_oom(r);
      return NULL;
    }
    const pc_FieldDef *x = pc_Pool_FindExtension(r->pool, z);
    if (x != NULL && x->containing == m) return x;
  }
  return NULL;
}

static int read_message(R *r, const JNode *v, pc_Message *msg, const pc_MessageDef *m,
                        const pc_JsonPath *path, int depth) {
  if (depth > r->max_depth)
    RFAIL(r, path, v->off, "messages nested deeper than %d (max_depth)", r->max_depth);
  pc_JsonWkt wkt = pc_Json_WktOf(m);
  if (wkt != kWkt_None) return read_wkt(r, wkt, v, msg, m, path, depth);
  if (v->type != J_OBJECT) RFAIL(r, path, v->off, "object expected, got %s", kind_name(v->type));
  /* The member that set each field (duplicates), and each oneof's. */
  const JNode *seen_small[32], *oneof_small[8];
  const JNode **seen = seen_small, **oneof_seen = oneof_small;
  if (m->field_count > 32 &&
      (seen = pc_Arena_Calloc(r->scratch, m->field_count * sizeof(const JNode *))) == NULL)
    return r_oom(r);
  if (m->oneof_count > 8 &&
      (oneof_seen = pc_Arena_Calloc(r->scratch, m->oneof_count * sizeof(const JNode *))) == NULL)
    return r_oom(r);
  if (m->field_count <= 32) memset(seen_small, 0, sizeof seen_small);
  if (m->oneof_count <= 8) memset(oneof_small, 0, sizeof oneof_small);
  uint32_t hint = 0;
  for (const JNode *e = v->first; e != NULL; e = e->next) {
    if (e == r->skip) continue;
    pc_JsonPath step = {path, e->key, e->keylen, 0};
    const pc_FieldDef *f = find_field(r, m, e, &hint);
    if (f == NULL) {
      if (r->status != kPc_JsonStatus_Ok) return 0;
      if (r->o->ignore_unknown) continue;
      RFAIL(r, &step, e->keyoff, "no field named \"%s\" in %s", SHOW(e->key, e->keylen),
            m->full_name);
    }
    if (!f->is_extension) {
      const JNode *prev = seen[f->index];
      if (prev != NULL) {
        if (prev->keylen == e->keylen && memcmp(prev->key, e->key, e->keylen) == 0)
          RFAIL(r, &step, e->keyoff, "duplicate key");
        RFAIL(r, &step, e->keyoff, "field %s set twice (as \"%s\" and \"%s\")", f->full_name,
              SHOW(prev->key, prev->keylen), SHOW(e->key, e->keylen));
      }
      seen[f->index] = e;
      if (f->oneof != NULL && !(e->type == J_NULL && !null_is_value(f))) {
        const JNode *other = oneof_seen[f->oneof->index];
        if (other != NULL)
          RFAIL(r, &step, e->keyoff, "oneof %s set twice (by \"%s\" and \"%s\")",
                f->oneof->full_name, SHOW(other->key, other->keylen), SHOW(e->key, e->keylen));
        oneof_seen[f->oneof->index] = e;
      }
    } else if (pc_Message_GetExtension(msg, f) != NULL) {
      RFAIL(r, &step, e->keyoff, "duplicate key");
    }
    if (!read_field(r, e, msg, f, &step, depth)) return 0;
  }
  return 1;
}

pc_JsonStatus pc_Json_Read(const char *json, size_t len, pc_Message *msg, const pc_MessageDef *m,
                           pc_Arena *a, const pc_JsonReadOptions *opts, pc_Error *err) {
  static const pc_JsonReadOptions kDefaults = {0, 0, NULL, NULL, NULL, NULL};
  const pc_JsonReadOptions *o = opts != NULL ? opts : &kDefaults;
  int max_depth = o->max_depth > 0 ? o->max_depth : PC_JSON_DEFAULT_DEPTH;
  if (max_depth > PC_JSON_MAX_DEPTH) max_depth = PC_JSON_MAX_DEPTH;
  pc_Arena *scratch = o->scratch != NULL ? o->scratch : pc_Arena_New(NULL, NULL);
  if (scratch == NULL) {
    pc_Error_Set(err, "not enough memory");
    return kPc_JsonStatus_OutOfMemory;
  }
  /* JSON nesting: a message level is at most two JSON levels (a repeated
   * field's array or a map's object, then the message), so this bound lets
   * the message depth check speak first. */
  P ps = {json, json, json + len, scratch, err, 2 * max_depth + 4, kPc_JsonStatus_Ok};
  JNode *root = parse_value(&ps, NULL, 0);
  if (root != NULL) {
    skip_ws(&ps);
    if (ps.p != ps.end) {
      pc_Json_Fail(err, NULL, "unexpected data after the value at offset %zu",
                   (size_t)(ps.p - ps.start));
      ps.status = kPc_JsonStatus_Invalid;
      root = NULL;
    }
  }
  pc_JsonStatus st = ps.status;
  if (root != NULL) {
    R r = {a,   scratch,   o,    o->pool != NULL ? o->pool : m->file->pool,
           err, max_depth, NULL, kPc_JsonStatus_Ok};
    if (!read_message(&r, root, msg, m, NULL, 0))
      st = r.status != kPc_JsonStatus_Ok ? r.status : kPc_JsonStatus_Invalid;
  } else if (st == kPc_JsonStatus_Ok) {
    st = kPc_JsonStatus_Invalid;
  }
  if (scratch != o->scratch) pc_Arena_Free(scratch);
  return st;
}
