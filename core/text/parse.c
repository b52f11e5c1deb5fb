/* Text format into messages (text.h): a tokenizer in the shape of the C++
 * library's io::Tokenizer and a recursive descent parser over the
 * message's type, one token of lookahead. */
#include "text/text.h"
#include "wire/encode.h"
#include "wire/wire.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pc_TextStatus_String(pc_TextStatus s) {
  switch (s) {
  case kPc_TextStatus_Ok: return "ok";
  case kPc_TextStatus_Invalid: return "invalid";
  case kPc_TextStatus_OutOfMemory: return "out of memory";
  }
  return "?";
}

/* -- Tokens --------------------------------------------------------------- */

typedef enum { T_EOF, T_IDENT, T_INT, T_FLOAT, T_STRING, T_SYMBOL, T_BAD } TokType;

typedef struct {
  TokType type;
  const char *s; /* the token's text in the input */
  size_t n;
  int line, col; /* from 1 */
} Tok;

typedef struct {
  const char *p, *end, *line_start;
  int line;
  Tok tok; /* the current token */
  pc_Arena *a;
  const pc_Pool *pool;
  pc_Error *err;
  int max_depth;
  pc_TextStatus status;
} TP;

static int is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(char c) {
  return c >= '0' && c <= '9';
}
static int is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
fail_at(TP *tp, const Tok *t, const char *fmt, ...) {
  if (tp->status == kPc_TextStatus_Ok) tp->status = kPc_TextStatus_Invalid;
  if (tp->err == NULL || tp->err->set) return 0;
  char what[PC_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  pc_Error_Set(tp->err, "%d:%d: %s", t->line, t->col, what);
  return 0;
}

static int oom(TP *tp) {
  tp->status = kPc_TextStatus_OutOfMemory;
  pc_Error_Set(tp->err, "not enough memory");
  return 0;
}

/* Reads the next token into tp->tok (T_BAD for a character that starts
 * none, or an unterminated string). */
static void next(TP *tp) {
  const char *p = tp->p, *end = tp->end;
  for (;;) {
    while (p < end &&
           (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == '\v' || *p == '\f')) {
      if (*p == '\n') {
        tp->line++;
        tp->line_start = p + 1;
      }
      p++;
    }
    if (p < end && *p == '#') {
      while (p < end && *p != '\n') p++;
      continue;
    }
    break;
  }
  Tok *t = &tp->tok;
  t->s = p;
  t->line = tp->line;
  t->col = (int)(p - tp->line_start) + 1;
  if (p >= end) {
    t->type = T_EOF;
    t->n = 0;
    tp->p = p;
    return;
  }
  char c = *p;
  if (is_letter(c)) {
    while (p < end && (is_letter(*p) || is_digit(*p))) p++;
    t->type = T_IDENT;
  } else if (is_digit(c) || (c == '.' && p + 1 < end && is_digit(p[1]))) {
    t->type = T_INT;
    if (c == '0' && p + 1 < end && (p[1] == 'x' || p[1] == 'X')) {
      p += 2;
      while (p < end && is_hex(*p)) p++;
    } else {
      while (p < end && is_digit(*p)) p++;
      if (p < end && *p == '.') {
        t->type = T_FLOAT;
        p++;
        while (p < end && is_digit(*p)) p++;
      }
      if (p < end && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        if (q < end && (*q == '+' || *q == '-')) q++;
        if (q < end && is_digit(*q)) {
          t->type = T_FLOAT;
          p = q;
          while (p < end && is_digit(*p)) p++;
        }
      }
      if (p < end && (*p == 'f' || *p == 'F')) {
        t->type = T_FLOAT;
        p++;
      }
    }
    /* A number runs into no letter ("1x" is no number). */
    if (p < end && (is_letter(*p) || is_digit(*p))) {
      while (p < end && (is_letter(*p) || is_digit(*p))) p++;
      t->type = T_BAD;
    }
  } else if (c == '"' || c == '\'') {
    p++;
    while (p < end && *p != c && *p != '\n') p += *p == '\\' && p + 1 < end ? 2 : 1;
    if (p < end && *p == c) {
      p++;
      t->type = T_STRING;
    } else {
      t->type = T_BAD;
    }
  } else {
    p++;
    t->type = T_SYMBOL;
  }
  t->n = (size_t)(p - t->s);
  tp->p = p;
}

static int is_sym(const TP *tp, char c) {
  return tp->tok.type == T_SYMBOL && tp->tok.s[0] == c;
}

static int tok_is(const Tok *t, const char *word) {
  size_t n = strlen(word);
  return t->n == n && memcmp(t->s, word, n) == 0;
}

static int tok_is_nocase(const Tok *t, const char *word) {
  size_t n = strlen(word);
  if (t->n != n) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = t->s[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != word[i]) return 0;
  }
  return 1;
}

/* The token as text for messages (at most 60 bytes). */
#define TOKTEXT(t) (int)((t)->n > 60 ? 60 : (t)->n), (t)->s

static int describe_expected(TP *tp, const char *what) {
  if (tp->tok.type == T_EOF) return fail_at(tp, &tp->tok, "expected %s, got end of input", what);
  if (tp->tok.type == T_BAD && (tp->tok.s[0] == '"' || tp->tok.s[0] == '\''))
    return fail_at(tp, &tp->tok, "unterminated string");
  return fail_at(tp, &tp->tok, "expected %s, got \"%.*s\"", what, TOKTEXT(&tp->tok));
}

static int expect_sym(TP *tp, char c) {
  if (!is_sym(tp, c)) {
    char what[4] = {'"', c, '"', 0};
    return describe_expected(tp, what);
  }
  next(tp);
  return 1;
}

/* -- Values --------------------------------------------------------------- */

/* An unsigned integer token (decimal, 0x hex, 0 octal) into '*v'; 1, 0
 * when it overflows 64 bits, -1 when it is no integer ("0x", "09"). */
static int int_value(const Tok *t, uint64_t *v) {
  const char *s = t->s, *e = t->s + t->n;
  unsigned base = 10;
  if (e - s > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
    if (s == e) return -1;
  } else if (e - s > 1 && s[0] == '0') {
    base = 8;
    s++;
  }
  uint64_t x = 0;
  for (; s < e; s++) {
    unsigned d = is_digit(*s) ? (unsigned)(*s - '0') : (unsigned)((*s | 0x20) - 'a' + 10);
    if (d >= base) return -1;
    if (x > (UINT64_MAX - d) / base) return 0;
    x = x * base + d;
  }
  *v = x;
  return 1;
}

/* An integer of type 't' (with an optional '-') into '*out'. */
static int read_integer(TP *tp, pc_FieldType t, pc_Value *out) {
  int neg = 0;
  Tok start = tp->tok;
  if (is_sym(tp, '-')) {
    neg = 1;
    next(tp);
  }
  int is_signed = t == kPc_Type_Int32 || t == kPc_Type_Sint32 || t == kPc_Type_Sfixed32 ||
                  t == kPc_Type_Int64 || t == kPc_Type_Sint64 || t == kPc_Type_Sfixed64 ||
                  t == kPc_Type_Enum;
  int is64 = t == kPc_Type_Int64 || t == kPc_Type_Sint64 || t == kPc_Type_Sfixed64 ||
             t == kPc_Type_Uint64 || t == kPc_Type_Fixed64;
  if (tp->tok.type != T_INT || (neg && !is_signed))
    return fail_at(tp, &start, "expected %s, got \"%.*s\"",
                   is_signed ? "integer" : "unsigned integer", TOKTEXT(neg ? &start : &tp->tok));
  uint64_t mag;
  uint64_t pos_max = is_signed ? (is64 ? (uint64_t)INT64_MAX : (uint64_t)INT32_MAX)
                               : (is64 ? UINT64_MAX : (uint64_t)UINT32_MAX);
  int read = int_value(&tp->tok, &mag);
  if (read < 0)
    return fail_at(tp, &start, "expected %s, got \"%.*s\"",
                   is_signed ? "integer" : "unsigned integer", TOKTEXT(&tp->tok));
  if (read == 0 || mag > pos_max + (uint64_t)(neg && is_signed))
    return fail_at(tp, &start, "integer out of range (%s%.*s)", neg ? "-" : "", TOKTEXT(&tp->tok));
  if (is64)
    out->u64 = neg ? (uint64_t)0 - mag : mag;
  else
    out->u32 = (uint32_t)(neg ? (uint64_t)0 - mag : mag);
  next(tp);
  return 1;
}

static int read_floating(TP *tp, int is_float, pc_Value *out) {
  int neg = 0;
  Tok start = tp->tok;
  if (is_sym(tp, '-')) {
    neg = 1;
    next(tp);
  }
  Tok *t = &tp->tok;
  double d;
  if (t->type == T_IDENT && (tok_is_nocase(t, "inf") || tok_is_nocase(t, "infinity"))) {
    d = INFINITY;
  } else if (t->type == T_IDENT && tok_is_nocase(t, "nan")) {
    d = NAN;
  } else if (t->type == T_FLOAT ||
             (t->type == T_INT && !(t->n > 1 && (t->s[1] == 'x' || t->s[1] == 'X')))) {
    char buf[128];
    size_t n = t->n;
    if (n > 0 && (t->s[n - 1] == 'f' || t->s[n - 1] == 'F')) n--;
    if (n >= sizeof buf) return fail_at(tp, &start, "number too long");
    memcpy(buf, t->s, n);
    buf[n] = '\0';
    d = strtod(buf, NULL); /* an overflow is an infinity, as protoc reads it */
  } else {
    return fail_at(tp, &start, "expected a decimal number, got \"%.*s\"",
                   TOKTEXT(neg ? &start : t));
  }
  if (neg) d = -d;
  if (is_float)
    out->f = (float)d;
  else
    out->d = d;
  next(tp);
  return 1;
}

/* Adjacent string tokens, unescaped, into '*out' (in tp->a). */
static int read_string(TP *tp, pc_Value *out, int utf8) {
  Tok start = tp->tok;
  if (tp->tok.type != T_STRING) return describe_expected(tp, "string");
  /* A token's unescaped bytes are no more than its text: room for the
   * first, grown when another follows. */
  size_t cap = tp->tok.n;
  char *buf = pc_Arena_Malloc(tp->a, cap);
  if (buf == NULL) return oom(tp);
  size_t o = 0;
  while (tp->tok.type == T_STRING) {
    if (cap - o < tp->tok.n) {
      size_t ncap = 2 * (o + tp->tok.n);
      char *nbuf = pc_Arena_Malloc(tp->a, ncap);
      if (nbuf == NULL) return oom(tp);
      memcpy(nbuf, buf, o);
      buf = nbuf;
      cap = ncap;
    }
    const char *p = tp->tok.s + 1, *e = tp->tok.s + tp->tok.n - 1;
    while (p < e) {
      if (*p != '\\') {
        buf[o++] = *p++;
        continue;
      }
      const char *esc = p;
      char c = p[1];
      p += 2;
      switch (c) {
      case 'a': buf[o++] = '\a'; break;
      case 'b': buf[o++] = '\b'; break;
      case 'f': buf[o++] = '\f'; break;
      case 'n': buf[o++] = '\n'; break;
      case 'r': buf[o++] = '\r'; break;
      case 't': buf[o++] = '\t'; break;
      case 'v': buf[o++] = '\v'; break;
      case '\\': buf[o++] = '\\'; break;
      case '\'': buf[o++] = '\''; break;
      case '"': buf[o++] = '"'; break;
      case '?': buf[o++] = '?'; break;
      case 'x':
      case 'X': {
        unsigned v = 0, k = 0;
        while (k < 2 && p < e && is_hex(*p)) {
          v = v * 16 + (unsigned)(is_digit(*p) ? *p - '0' : (*p | 0x20) - 'a' + 10);
          p++;
          k++;
        }
        if (k == 0) goto bad;
        buf[o++] = (char)v;
        break;
      }
      case 'u':
      case 'U': {
        unsigned want = c == 'u' ? 4 : 8, k = 0;
        unsigned long cp = 0;
        while (k < want && p < e && is_hex(*p)) {
          cp = cp * 16 + (unsigned long)(is_digit(*p) ? *p - '0' : (*p | 0x20) - 'a' + 10);
          p++;
          k++;
        }
        if (k == want && c == 'u' && cp >= 0xd800 && cp <= 0xdbff && e - p >= 6 && p[0] == '\\' &&
            p[1] == 'u') { /* a UTF-16 surrogate pair, as protoc joins it: \ud83d\ude00 */
          unsigned long lo = 0;
          unsigned j = 2;
          while (j < 6 && is_hex(p[j])) {
            lo = lo * 16 + (unsigned long)(is_digit(p[j]) ? p[j] - '0' : (p[j] | 0x20) - 'a' + 10);
            j++;
          }
          if (j == 6 && lo >= 0xdc00 && lo <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            p += 6;
          }
        }
        if (k != want || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) goto bad;
        if (cp < 0x80) {
          buf[o++] = (char)cp;
        } else if (cp < 0x800) {
          buf[o++] = (char)(0xc0 | cp >> 6);
          buf[o++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
          buf[o++] = (char)(0xe0 | cp >> 12);
          buf[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
          buf[o++] = (char)(0x80 | (cp & 0x3f));
        } else {
          buf[o++] = (char)(0xf0 | cp >> 18);
          buf[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
          buf[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
          buf[o++] = (char)(0x80 | (cp & 0x3f));
        }
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          unsigned v = (unsigned)(c - '0'), k = 1;
          while (k < 3 && p < e && *p >= '0' && *p <= '7') {
            v = v * 8 + (unsigned)(*p - '0');
            p++;
            k++;
          }
          buf[o++] = (char)v;
          break;
        }
      bad : {
        Tok at = tp->tok;
        at.col += (int)(esc - tp->tok.s);
        return fail_at(tp, &at, "invalid escape sequence in string");
      }
      }
    }
    next(tp);
  }
  if (utf8 && !pc_Wire_ValidUtf8((const uint8_t *)buf, o))
    return fail_at(tp, &start, "string is not valid UTF-8");
  out->s.data = buf;
  out->s.size = o;
  return 1;
}

static int read_enum(TP *tp, const pc_FieldDef *f, pc_Value *out) {
  const pc_EnumDef *e = f->enumdef;
  Tok start = tp->tok;
  if (tp->tok.type == T_IDENT) {
    const pc_EnumValueDef *ev = pc_EnumDef_FindByName(e, tp->tok.s, tp->tok.n);
    if (ev == NULL)
      return fail_at(tp, &start, "unknown enumeration value \"%.*s\" of %s", TOKTEXT(&start),
                     e->full_name);
    out->i32 = ev->number;
    next(tp);
    return 1;
  }
  if (!read_integer(tp, kPc_Type_Enum, out)) return 0;
  if (e->closed && pc_EnumDef_FindByNumber(e, out->i32) == NULL)
    return fail_at(tp, &start, "unknown enumeration value %" PRId32 " of %s", out->i32,
                   e->full_name);
  return 1;
}

static int read_bool(TP *tp, pc_Value *out) {
  Tok *t = &tp->tok;
  if (t->type == T_IDENT && (tok_is(t, "true") || tok_is(t, "True") || tok_is(t, "t"))) {
    out->b = 1;
  } else if (t->type == T_IDENT && (tok_is(t, "false") || tok_is(t, "False") || tok_is(t, "f"))) {
    out->b = 0;
  } else if (t->type == T_INT && (tok_is(t, "0") || tok_is(t, "1"))) {
    out->b = t->s[0] == '1';
  } else {
    return fail_at(tp, t, "invalid value for boolean field: \"%.*s\"", TOKTEXT(t));
  }
  next(tp);
  return 1;
}

static int parse_body(TP *tp, pc_Message *msg, const pc_MessageDef *m, char close, int depth);

/* A message value ({...} or <...>) of type 'm' into a new message. */
static int read_message_value(TP *tp, const pc_MessageDef *m, pc_Value *out, int depth) {
  char close;
  if (is_sym(tp, '{'))
    close = '}';
  else if (is_sym(tp, '<'))
    close = '>';
  else
    return describe_expected(tp, "\"{\" or \"<\"");
  if (depth > tp->max_depth)
    return fail_at(tp, &tp->tok, "messages nested deeper than %d", tp->max_depth);
  next(tp);
  pc_Message *sub = pc_Message_New(m, tp->a);
  if (sub == NULL) return oom(tp);
  if (!parse_body(tp, sub, m, close, depth)) return 0;
  out->m = sub;
  return 1;
}

static int read_single(TP *tp, const pc_FieldDef *f, pc_Value *out, int depth) {
  memset(out, 0, sizeof *out);
  switch (f->type) {
  case kPc_Type_Bool: return read_bool(tp, out);
  case kPc_Type_Float: return read_floating(tp, 1, out);
  case kPc_Type_Double: return read_floating(tp, 0, out);
  case kPc_Type_Enum: return read_enum(tp, f, out);
  case kPc_Type_String: return read_string(tp, out, f->file->syntax == kPc_Syntax_Proto3);
  case kPc_Type_Bytes: return read_string(tp, out, 0);
  case kPc_Type_Message:
  case kPc_Type_Group: return read_message_value(tp, f->message, out, depth + 1);
  default: return read_integer(tp, f->type, out);
  }
}

/* Stores one value of 'f' (appended for repeated fields, a map entry's key
 * and value for maps). */
static int store(TP *tp, pc_Message *msg, const pc_FieldDef *f, pc_Value v) {
  if (f->is_map) {
    const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
    pc_Map *map = pc_Message_MutableMap(msg, f, tp->a);
    if (map == NULL) return oom(tp);
    pc_Value key = pc_Message_Get(v.m, kf), val = pc_Message_Get(v.m, vf);
    if (vf->slot == kPc_Slot_Message && val.m == NULL &&
        (val.m = pc_Message_New(vf->message, tp->a)) == NULL)
      return oom(tp);
    if (pc_Map_Set(map, pc_FieldDef_ElemSlot(kf), key, val, tp->a) == NULL) return oom(tp);
    return 1;
  }
  if (f->label == kPc_Label_Repeated) {
    pc_Array *arr = pc_Message_MutableArray(msg, f, tp->a);
    if (arr == NULL || !pc_Array_Append(arr, &v, pc_FieldDef_ElemSize(f), tp->a)) return oom(tp);
    return 1;
  }
  if (f->is_extension) {
    pc_Value *cell = pc_Message_MutableExtension(msg, f, tp->a);
    if (cell == NULL) return oom(tp);
    *cell = v;
    return 1;
  }
  pc_Message_Set(msg, f, v);
  return 1;
}

/* The value(s) after a field name: ':' then a value or a list; for
 * messages the ':' is optional, also before a list of repeated messages
 * (`f [{...}, {...}]`, as protoc takes it). */
static int read_field_value(TP *tp, pc_Message *msg, const pc_FieldDef *f, int depth) {
  int is_msg = f->type == kPc_Type_Message || f->type == kPc_Type_Group;
  int colon = is_sym(tp, ':');
  if (colon)
    next(tp);
  else if (!is_msg)
    return describe_expected(tp, "\":\"");
  pc_Value v;
  if ((colon || (is_msg && f->label == kPc_Label_Repeated)) && is_sym(tp, '[')) {
    if (f->label != kPc_Label_Repeated)
      return fail_at(tp, &tp->tok, "list given for non-repeated field \"%s\"", f->name);
    next(tp);
    if (is_sym(tp, ']')) {
      next(tp);
      return 1;
    }
    for (;;) {
      if (!read_single(tp, f, &v, depth) || !store(tp, msg, f, v)) return 0;
      if (is_sym(tp, ']')) break;
      if (!expect_sym(tp, ',')) return 0;
    }
    next(tp);
    return 1;
  }
  return read_single(tp, f, &v, depth) && store(tp, msg, f, v);
}

/* [type.googleapis.com/pkg.T] { ... } inside an Any: the URL in 'url'. */
static int read_expanded_any(TP *tp, pc_Message *msg, const pc_MessageDef *m, const char *url,
                             const Tok *at, int depth) {
  const char *slash = strrchr(url, '/');
  const pc_MessageDef *t = pc_Pool_FindMessage(tp->pool, slash + 1);
  if (t == NULL)
    return fail_at(tp, at, "could not find type \"%s\" stored in google.protobuf.Any", url);
  if (is_sym(tp, ':')) next(tp);
  pc_Value inner;
  memset(&inner, 0, sizeof inner);
  if (!read_message_value(tp, t, &inner, depth + 1)) return 0;
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  /* stable bytes: maps by key; required fields are not checked (partial) */
  static const pc_EncodeOptions kDeterministic = {1, 1};
  pc_EncodeStatus es = pc_Encode(inner.m, t, &kDeterministic, &w, NULL);
  pc_Value val;
  int ok =
      es == kPc_EncodeStatus_Ok && pc_StringView_Copy(&val.s, (const char *)pc_WireWriter_Data(&w),
                                                      pc_WireWriter_Size(&w), tp->a);
  pc_WireWriter_Free(&w);
  if (es == kPc_EncodeStatus_OutOfMemory || (es == kPc_EncodeStatus_Ok && !ok)) return oom(tp);
  if (es != kPc_EncodeStatus_Ok) return fail_at(tp, at, "the Any's message does not encode");
  const pc_FieldDef *fu = pc_MessageDef_FindFieldByNumber(m, 1);
  const pc_FieldDef *fv = pc_MessageDef_FindFieldByNumber(m, 2);
  if (fu == NULL || fv == NULL) return fail_at(tp, at, "malformed google.protobuf.Any");
  if (pc_Message_Has(msg, fu) || pc_Message_Has(msg, fv))
    return fail_at(tp, at, "google.protobuf.Any set twice");
  pc_Message_Set(msg, fv, val);
  if (!pc_StringView_Copy(&val.s, url, strlen(url), tp->a)) return oom(tp);
  pc_Message_Set(msg, fu, val);
  return 1;
}

/* The field a name token names in 'm': by name, or a group by its type's
 * name. */
static const pc_FieldDef *find_field(const pc_MessageDef *m, const Tok *t) {
  const pc_FieldDef *f = pc_MessageDef_FindFieldByName(m, t->s, t->n);
  if (f != NULL && f->type == kPc_Type_Group) return NULL; /* groups go by type name */
  if (f != NULL) return f;
  for (uint32_t i = 0; i < m->field_count; i++) {
    const pc_FieldDef *g = &m->fields[i];
    if (g->type == kPc_Type_Group && strlen(g->message->name) == t->n &&
        memcmp(g->message->name, t->s, t->n) == 0)
      return g;
  }
  return NULL;
}

/* Fields up to 'close' ('\0': the end of input). */
static int parse_body(TP *tp, pc_Message *msg, const pc_MessageDef *m, char close, int depth) {
  uint8_t seen_small[64];
  uint8_t *seen = seen_small;
  if (m->field_count > sizeof seen_small && (seen = pc_Arena_Calloc(tp->a, m->field_count)) == NULL)
    return oom(tp);
  if (seen == seen_small) memset(seen_small, 0, sizeof seen_small);
  for (;;) {
    if (close == '\0' ? tp->tok.type == T_EOF : is_sym(tp, close)) {
      if (close != '\0') next(tp);
      return 1;
    }
    Tok name = tp->tok;
    const pc_FieldDef *f = NULL;
    if (is_sym(tp, '[')) {
      /* [pkg.ext] or [domain/pkg.T] */
      char buf[512];
      size_t n = 0;
      next(tp);
      /* As protoc reads it: ident ('.' ident)* and, for an Any, one '/' then
       * the type's full name: identifiers and separators alternate. */
      int want_ident = 1, slashes = 0;
      while (!is_sym(tp, ']') || want_ident) {
        int ident = tp->tok.type == T_IDENT;
        if (ident != want_ident || (!ident && !is_sym(tp, '.') && !is_sym(tp, '/')))
          return describe_expected(tp, want_ident ? "an identifier" : "\"]\"");
        if (is_sym(tp, '/') && ++slashes > 1)
          return fail_at(tp, &tp->tok,
                         "a type URL holds one \"/\" (\"type.googleapis.com/pkg.T\")");
        want_ident = !ident;
        if (n + tp->tok.n >= sizeof buf) return fail_at(tp, &name, "name too long");
        memcpy(buf + n, tp->tok.s, tp->tok.n);
        n += tp->tok.n;
        next(tp);
      }
      buf[n] = '\0';
      next(tp);
      if (strchr(buf, '/') != NULL) {
        if (strcmp(m->full_name, "google.protobuf.Any") != 0)
          return fail_at(tp, &name, "an expanded Any ([%s]) in %s, which is no google.protobuf.Any",
                         buf, m->full_name);
        if (!read_expanded_any(tp, msg, m, buf, &name, depth)) return 0;
        if (is_sym(tp, ';') || is_sym(tp, ',')) next(tp);
        continue;
      }
      f = pc_Pool_FindExtension(tp->pool, buf);
      if (f == NULL || f->containing != m)
        return fail_at(tp, &name,
                       "extension \"%s\" is not defined or is not an extension of \"%s\"", buf,
                       m->full_name);
      if (f->label != kPc_Label_Repeated && pc_Message_GetExtension(msg, f) != NULL)
        return fail_at(tp, &name, "non-repeated field \"%s\" is specified multiple times", buf);
    } else if (tp->tok.type == T_IDENT) {
      f = find_field(m, &tp->tok);
      if (f == NULL)
        return fail_at(tp, &name, "message type \"%s\" has no field named \"%.*s\"", m->full_name,
                       TOKTEXT(&name));
      next(tp);
      if (f->label != kPc_Label_Repeated) {
        if (seen[f->index])
          return fail_at(tp, &name, "non-repeated field \"%s\" is specified multiple times",
                         f->name);
        const pc_FieldDef *other = f->oneof != NULL ? pc_Message_WhichOneof(msg, f->oneof) : NULL;
        if (other != NULL && other != f)
          return fail_at(tp, &name,
                         "field \"%s\" is specified along with field \"%s\", another member of "
                         "oneof \"%s\"",
                         f->name, other->name, f->oneof->name);
        seen[f->index] = 1;
      }
    } else {
      return describe_expected(tp, close == '\0' ? "a field name" : "a field name or the end");
    }
    if (!read_field_value(tp, msg, f, depth)) return 0;
    if (is_sym(tp, ';') || is_sym(tp, ',')) next(tp);
  }
}

pc_TextStatus pc_Text_Parse(const char *text, size_t len, pc_Message *msg, const pc_MessageDef *m,
                            pc_Arena *a, const pc_TextParseOptions *opts, pc_Error *err) {
  TP tp;
  memset(&tp, 0, sizeof tp);
  tp.p = tp.line_start = text;
  tp.end = text + len;
  tp.line = 1;
  tp.a = a;
  tp.err = err;
  tp.pool = opts != NULL && opts->pool != NULL ? opts->pool : m->file->pool;
  tp.max_depth = opts != NULL && opts->max_depth > 0 ? opts->max_depth : PC_TEXT_DEFAULT_DEPTH;
  if (tp.max_depth > PC_TEXT_MAX_DEPTH) tp.max_depth = PC_TEXT_MAX_DEPTH;
  tp.status = kPc_TextStatus_Ok;
  next(&tp);
  if (!parse_body(&tp, msg, m, '\0', 0))
    return tp.status != kPc_TextStatus_Ok ? tp.status : kPc_TextStatus_Invalid;
  return kPc_TextStatus_Ok;
}
