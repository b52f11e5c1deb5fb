/* Text format into messages (text.h): a tokenizer in the shape of the C++
 * library's io::Tokenizer and a recursive descent parser over the
 * message's type, one token of lookahead, step for step TextFormat::Parser's
 * (ConsumeField, ConsumeFieldValue, ...), so that it can speak protoc's words
 * where the .proto compiler needs them (pc_TextParseOptions.protoc). */
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
  const pc_TextFinder *finder; /* NULL: full names in 'pool' */
  pc_Error *err;
  int max_depth;
  int protoc; /* protoc's words and leniency (text.h) */
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
  if (tp->protoc) /* the caller says where, as protoc's option interpreter does */
    pc_Error_Set(tp->err, "%s", what);
  else
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

/* The token as text for messages: at most 60 bytes in our words, whole in
 * protoc's (TEXT), as protoc prints it. */
#define TOKTEXT(t)            (int)((t)->n > 60 ? 60 : (t)->n), (t)->s
#define TEXT(tp, t)           (int)((t)->n > 60 && !(tp)->protoc ? 60 : (t)->n), (t)->s
/* Our words or protoc's, for one list of arguments. */
#define SAY(tp, ours, theirs) ((tp)->protoc ? (theirs) : (ours))

static int describe_expected(TP *tp, const char *what) {
  if (tp->tok.type == T_EOF) return fail_at(tp, &tp->tok, "expected %s, got end of input", what);
  if (tp->tok.type == T_BAD && (tp->tok.s[0] == '"' || tp->tok.s[0] == '\''))
    return fail_at(tp, &tp->tok, "unterminated string");
  return fail_at(tp, &tp->tok, "expected %s, got \"%.*s\"", what, TOKTEXT(&tp->tok));
}

/* A token of a kind: 'ours' names it in our words, 'theirs' in protoc's
 * ("Expected identifier, got: 5"). */
static int expected(TP *tp, const char *ours, const char *theirs) {
  if (tp->protoc)
    return fail_at(tp, &tp->tok, "Expected %s, got: %.*s", theirs, TEXT(tp, &tp->tok));
  return describe_expected(tp, ours);
}

/* protoc's Consume(c). */
static int expect_sym(TP *tp, char c) {
  if (is_sym(tp, c)) {
    next(tp);
    return 1;
  }
  if (tp->protoc)
    return fail_at(tp, &tp->tok, "Expected \"%c\", found \"%.*s\".", c, TEXT(tp, &tp->tok));
  char what[4] = {'"', c, '"', 0};
  return describe_expected(tp, what);
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

/* An integer of type 't' into '*out', a '-' first for signed types
 * (protoc's ConsumeSignedInteger / ConsumeUnsignedInteger). */
static int read_integer(TP *tp, pc_FieldType t, pc_Value *out) {
  int is_signed = t == kPc_Type_Int32 || t == kPc_Type_Sint32 || t == kPc_Type_Sfixed32 ||
                  t == kPc_Type_Int64 || t == kPc_Type_Sint64 || t == kPc_Type_Sfixed64 ||
                  t == kPc_Type_Enum;
  int is64 = t == kPc_Type_Int64 || t == kPc_Type_Sint64 || t == kPc_Type_Sfixed64 ||
             t == kPc_Type_Uint64 || t == kPc_Type_Fixed64;
  Tok start = tp->tok;
  int neg = is_signed && is_sym(tp, '-');
  if (neg) next(tp);
  uint64_t mag;
  int read = tp->tok.type == T_INT ? int_value(&tp->tok, &mag) : -1;
  if (read < 0 && tp->protoc) return expected(tp, NULL, "integer");
  if (read < 0)
    return fail_at(tp, &start, "expected %s, got \"%.*s\"",
                   is_signed ? "integer" : "unsigned integer",
                   TOKTEXT(neg && tp->tok.type != T_INT ? &start : &tp->tok));
  uint64_t pos_max = is_signed ? (is64 ? (uint64_t)INT64_MAX : (uint64_t)INT32_MAX)
                               : (is64 ? UINT64_MAX : (uint64_t)UINT32_MAX);
  if (read == 0 || mag > pos_max + (uint64_t)neg)
    return fail_at(tp, &start,
                   SAY(tp, "integer out of range (%s%.*s)", "Integer out of range (%s%.*s)"),
                   neg && !tp->protoc ? "-" : "", TEXT(tp, &tp->tok));
  if (is64)
    out->u64 = neg ? (uint64_t)0 - mag : mag;
  else
    out->u32 = (uint32_t)(neg ? (uint64_t)0 - mag : mag);
  next(tp);
  return 1;
}

/* protoc's ConsumeDouble: a decimal integer or a float, inf / infinity / nan
 * in any case, a '-' before any of them. */
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
  } else if (t->type == T_INT && t->n > 1 && t->s[0] == '0') { /* hex, octal */
    if (tp->protoc) return fail_at(tp, t, "Expect a decimal number, got: %.*s", TEXT(tp, t));
    return fail_at(tp, &start, "expected a decimal number, got \"%.*s\"",
                   TOKTEXT(neg ? &start : t));
  } else if (t->type == T_FLOAT || t->type == T_INT) {
    char buf[128];
    size_t n = t->n;
    if (n > 0 && (t->s[n - 1] == 'f' || t->s[n - 1] == 'F')) n--;
    if (n >= sizeof buf) return fail_at(tp, &start, SAY(tp, "number too long", "Number too long."));
    memcpy(buf, t->s, n);
    buf[n] = '\0';
    d = strtod(buf, NULL); /* an overflow is an infinity, as protoc reads it */
  } else if (tp->protoc) { /* an identifier in lower case, as protoc shows it */
    char low[64];
    size_t n = t->type == T_IDENT && t->n < sizeof low ? t->n : 0;
    for (size_t i = 0; i < n; i++)
      low[i] = (char)(t->s[i] >= 'A' && t->s[i] <= 'Z' ? t->s[i] - 'A' + 'a' : t->s[i]);
    return fail_at(tp, t, "Expected double, got: %.*s", n ? (int)n : (int)t->n, n ? low : t->s);
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

/* Adjacent string tokens, unescaped, into '*out' (in tp->a); 'utf8': the
 * result must be UTF-8. A UTF-16 surrogate (\ud800, \ud83d\ude00) is an
 * error, or with 'protoc' its three bytes, a pair joined, as protoc 3.21
 * writes them. */
static int read_string(TP *tp, pc_Value *out, int utf8) {
  Tok start = tp->tok;
  if (tp->tok.type != T_STRING) return expected(tp, "string", "string");
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
        int pair = 0;
        if (k == want && c == 'u' && cp >= 0xd800 && cp <= 0xdbff && e - p >= 6 && p[0] == '\\' &&
            p[1] == 'u') { /* a UTF-16 surrogate pair, as protoc 3.21 joins it: \ud83d\ude00 */
          unsigned long lo = 0;
          unsigned j = 2;
          while (j < 6 && is_hex(p[j])) {
            lo = lo * 16 + (unsigned long)(is_digit(p[j]) ? p[j] - '0' : (p[j] | 0x20) - 'a' + 10);
            j++;
          }
          if (j == 6 && lo >= 0xdc00 && lo <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            p += 6;
            pair = 1;
          }
        }
        if (k != want || cp > 0x10ffff) goto bad;
        /* a surrogate is no character: the text format specification and
         * the conformance suite refuse one, paired or not (protoc 3.21 joins
         * a pair, writes a lone one's bytes: its voice does too) */
        if (!tp->protoc && (pair || (cp >= 0xd800 && cp <= 0xdfff))) {
          Tok at = tp->tok;
          at.col += (int)(esc - tp->tok.s);
          if (pair)
            return fail_at(tp, &at,
                           "%.12s: text format takes no UTF-16 surrogate pair; write U+%05lX as "
                           "\\U%08lX or as UTF-8",
                           esc, cp, cp);
          return fail_at(tp, &at, "%.*s: a UTF-16 surrogate is not a character", (int)(p - esc),
                         esc);
        }
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
        return fail_at(tp, &at,
                       SAY(tp, "invalid escape sequence in string",
                           "Invalid escape sequence in string literal."));
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
    if (ev == NULL && tp->protoc)
      return fail_at(tp, &start, "Unknown enumeration value of \"%.*s\" for field \"%s\".",
                     TEXT(tp, &start), f->name);
    if (ev == NULL)
      return fail_at(tp, &start, "unknown enumeration value \"%.*s\" of %s", TOKTEXT(&start),
                     e->full_name);
    out->i32 = ev->number;
    next(tp);
    return 1;
  }
  if (tp->protoc && tp->tok.type != T_INT && !is_sym(tp, '-'))
    return expected(tp, NULL, "integer or identifier");
  if (!read_integer(tp, kPc_Type_Enum, out)) return 0;
  if (e->closed && pc_EnumDef_FindByNumber(e, out->i32) == NULL && tp->protoc)
    return fail_at(tp, &start, "Unknown enumeration value of \"%" PRId32 "\" for field \"%s\".",
                   out->i32, f->name);
  if (e->closed && pc_EnumDef_FindByNumber(e, out->i32) == NULL)
    return fail_at(tp, &start, "unknown enumeration value %" PRId32 " of %s", out->i32,
                   e->full_name);
  return 1;
}

/* true / True / t, false / False / f, or an integer no more than 1. */
static int read_bool(TP *tp, const pc_FieldDef *f, pc_Value *out) {
  Tok *t = &tp->tok;
  uint64_t v = 2;
  int read = t->type == T_INT ? int_value(t, &v) : -1;
  if (read > 0 && v <= 1) {
    out->b = (uint8_t)v;
  } else if (t->type == T_IDENT && (tok_is(t, "true") || tok_is(t, "True") || tok_is(t, "t"))) {
    out->b = 1;
  } else if (t->type == T_IDENT && (tok_is(t, "false") || tok_is(t, "False") || tok_is(t, "f"))) {
    out->b = 0;
  } else if (!tp->protoc) {
    return fail_at(tp, t, "invalid value for boolean field: \"%.*s\"", TOKTEXT(t));
  } else if (t->type == T_INT) {
    return fail_at(tp, t, read < 0 ? "Expected integer, got: %.*s" : "Integer out of range (%.*s)",
                   TEXT(tp, t));
  } else if (t->type == T_IDENT) {
    return fail_at(tp, t, "Invalid value for boolean field \"%s\". Value: \"%.*s\".", f->name,
                   TEXT(tp, t));
  } else {
    return expected(tp, NULL, "identifier");
  }
  next(tp);
  return 1;
}

/* -- MessageSet items ----------------------------------------------------- */

/* A message extension of a MessageSet (message_set_wire_format) is kept as
 * the item protoc writes for it, group 1 { type_id 2, message 3 }, in the
 * unknown bytes, where core/wire's decoder keeps items too; items go in
 * type_id order, as the C++ library writes them. */
static int is_mset_item(const pc_FieldDef *f) {
  return f->is_extension && f->containing->message_set && f->type == kPc_Type_Message &&
         f->label != kPc_Label_Repeated;
}

/* Whether 'msg' holds the item of extension 'number'; '*at' (may be NULL):
 * where that item goes among the ones written here (0b 10 id 1a len ... 0c). */
static int mset_find(const pc_Message *msg, uint32_t number, size_t *at) {
  size_t size;
  const uint8_t *base = (const uint8_t *)pc_Message_GetUnknown(msg, &size);
  if (at != NULL) *at = size;
  if (size == 0) return 0;
  const uint8_t *p = base, *end = base + size;
  pc_WireStatus st;
  while (end - p > 2 && p[0] == 0x0b && p[1] == 0x10) {
    const uint8_t *item = p;
    uint64_t id;
    size_t len;
    p = pc_Wire_ReadVarint(p + 2, end, &id, &st);
    if (p == NULL || p == end || *p != 0x1a) break;
    p = pc_Wire_ReadLength(p + 1, end, &len, &st);
    if (p == NULL || (size_t)(end - p) <= len || p[len] != 0x0c) break;
    p += len + 1;
    if (id == number) return 1;
    if (id > number && at != NULL && *at == size) *at = (size_t)(item - base);
  }
  return 0;
}

static int mset_store(TP *tp, pc_Message *msg, const pc_FieldDef *f, const pc_Message *value) {
  size_t at, size;
  mset_find(msg, (uint32_t)f->number, &at);
  pc_WireWriter w; /* back to front */
  pc_WireWriter_Init(&w, NULL, NULL);
  static const pc_EncodeOptions kPartial = {0, 1};
  pc_EncodeStatus es = pc_WireWriter_PutTag(&w, 1, kPc_Wire_EndGroup)
                           ? pc_Encode(value, f->message, &kPartial, &w, NULL)
                           : kPc_EncodeStatus_OutOfMemory;
  size_t len = pc_WireWriter_Size(&w) - 1;
  int ok = es == kPc_EncodeStatus_Ok && pc_WireWriter_PutVarint(&w, len) &&
           pc_WireWriter_PutTag(&w, 3, kPc_Wire_Len) &&
           pc_WireWriter_PutVarint(&w, (uint64_t)(uint32_t)f->number) &&
           pc_WireWriter_PutTag(&w, 2, kPc_Wire_Varint) &&
           pc_WireWriter_PutTag(&w, 1, kPc_Wire_StartGroup);
  const char *old = pc_Message_GetUnknown(msg, &size);
  size_t n = pc_WireWriter_Size(&w);
  char *all = ok ? pc_Arena_Malloc(tp->a, size + n) : NULL;
  if (all != NULL) {
    if (at > 0) memcpy(all, old, at);
    memcpy(all + at, pc_WireWriter_Data(&w), n);
    if (size > at) memcpy(all + at + n, old + at, size - at);
    pc_Message_DiscardUnknown(msg);
  }
  pc_WireWriter_Free(&w);
  if (es != kPc_EncodeStatus_Ok && es != kPc_EncodeStatus_OutOfMemory)
    return fail_at(tp, &tp->tok,
                   SAY(tp, "the MessageSet item %s does not encode: %s",
                       "MessageSet item %s does not encode: %s."),
                   f->full_name, pc_EncodeStatus_String(es));
  if (all == NULL || !pc_Message_AddUnknown(msg, all, size + n, tp->a)) return oom(tp);
  return 1;
}

/* protoc's HasField. */
static int has_field(const pc_Message *msg, const pc_FieldDef *f) {
  return is_mset_item(f) ? mset_find(msg, (uint32_t)f->number, NULL) : pc_Message_Has(msg, f);
}

/* -- Messages ------------------------------------------------------------- */

static int parse_body(TP *tp, pc_Message *msg, const pc_MessageDef *m, char close, int depth);

/* A message value ({...} or <...>) of type 'm' into a new message. */
static int read_message_value(TP *tp, const pc_MessageDef *m, pc_Value *out, int depth) {
  char close;
  if (is_sym(tp, '{'))
    close = '}';
  else if (is_sym(tp, '<'))
    close = '>';
  else if (tp->protoc)
    return expect_sym(tp, '{');
  else
    return describe_expected(tp, "\"{\" or \"<\"");
  if (depth > tp->max_depth && tp->protoc) return fail_at(tp, &tp->tok, "Message is too deep");
  if (depth > tp->max_depth)
    return fail_at(tp, &tp->tok, "messages nested deeper than %d (max_depth)", tp->max_depth);
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
  case kPc_Type_Bool: return read_bool(tp, f, out);
  case kPc_Type_Float: return read_floating(tp, 1, out);
  case kPc_Type_Double: return read_floating(tp, 0, out);
  case kPc_Type_Enum: return read_enum(tp, f, out);
  case kPc_Type_String:
    return read_string(tp, out, f->file->syntax == kPc_Syntax_Proto3 && !tp->protoc);
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
  if (is_mset_item(f)) return mset_store(tp, msg, f, v.m);
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
 * (`f [{...}, {...}]`, as protoc takes it). A list for a field that is not
 * repeated is refused as such here, by the value's parser in protoc. */
static int read_field_value(TP *tp, pc_Message *msg, const pc_FieldDef *f, int depth) {
  int is_msg = f->type == kPc_Type_Message || f->type == kPc_Type_Group;
  int repeated = f->label == kPc_Label_Repeated;
  int colon = is_sym(tp, ':');
  if (colon)
    next(tp);
  else if (!is_msg)
    return expect_sym(tp, ':');
  pc_Value v;
  if (is_sym(tp, '[') && (repeated ? colon || is_msg : colon && !tp->protoc)) {
    if (!repeated)
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
  const pc_MessageDef *t = tp->finder != NULL
                               ? tp->finder->any_type(tp->finder->ud, url)
                               : pc_Pool_FindMessage(tp->pool, strrchr(url, '/') + 1);
  if (t == NULL)
    return fail_at(tp, at,
                   SAY(tp, "could not find type \"%s\" stored in google.protobuf.Any",
                       "Could not find type \"%s\" stored in google.protobuf.Any."),
                   url);
  if (is_sym(tp, ':')) next(tp);
  pc_Value inner;
  memset(&inner, 0, sizeof inner);
  if (!read_message_value(tp, t, &inner, depth + 1)) return 0;
  if (tp->protoc && pc_Message_CheckRequired(inner.m, t, NULL) != 0)
    return fail_at(tp, at,
                   "Value of type \"%s\" stored in google.protobuf.Any has missing required fields",
                   t->full_name);
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  /* stable bytes: maps by key (protoc's: in the order written); required
   * fields are not checked (partial) */
  pc_EncodeOptions eo = {!tp->protoc, 1};
  pc_EncodeStatus es = pc_Encode(inner.m, t, &eo, &w, NULL);
  pc_Value val;
  int ok =
      es == kPc_EncodeStatus_Ok && pc_StringView_Copy(&val.s, (const char *)pc_WireWriter_Data(&w),
                                                      pc_WireWriter_Size(&w), tp->a);
  pc_WireWriter_Free(&w);
  if (es == kPc_EncodeStatus_OutOfMemory || (es == kPc_EncodeStatus_Ok && !ok)) return oom(tp);
  if (es != kPc_EncodeStatus_Ok)
    return fail_at(
        tp, at,
        SAY(tp, "the Any's message does not encode: %s", "The Any's message does not encode: %s."),
        pc_EncodeStatus_String(es));
  const pc_FieldDef *fu = pc_MessageDef_FindFieldByNumber(m, 1);
  const pc_FieldDef *fv = pc_MessageDef_FindFieldByNumber(m, 2);
  if (fu == NULL || fv == NULL)
    return fail_at(tp, at,
                   SAY(tp, "malformed google.protobuf.Any", "Malformed google.protobuf.Any."));
  if (tp->protoc && pc_Message_Has(msg, fu))
    return fail_at(tp, at, "Non-repeated Any specified multiple times.");
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

/* The name in [...] (at the '['): identifiers joined by '.', and an Any's
 * type URL with one '/' ("type.googleapis.com/pkg.T"); '*slashes' says
 * which. As protoc reads it (ConsumeFullTypeName, ConsumeAnyTypeUrl), which
 * takes the '/' only in a google.protobuf.Any ('any') and wants it there.
 * NULL after an error. */
static char *read_bracketed(TP *tp, int any, int *slashes) {
  char *buf = NULL;
  size_t n = 0, cap = 0;
  int want_ident = 1;
  *slashes = 0;
  next(tp);
  for (;;) {
    const Tok *t = &tp->tok;
    if (want_ident) {
      if (t->type != T_IDENT) {
        expected(tp, "an identifier", "identifier");
        return NULL;
      }
    } else if (is_sym(tp, ']') && !(tp->protoc && any && *slashes == 0)) {
      break;
    } else if (is_sym(tp, '/') && *slashes == 0 && (any || !tp->protoc)) {
      (*slashes)++;
    } else if (!is_sym(tp, '.')) {
      if (tp->protoc) {
        expect_sym(tp, any && *slashes == 0 ? '/' : ']');
        return NULL;
      }
      if (is_sym(tp, '/')) {
        fail_at(tp, t, "a type URL holds one \"/\" (\"type.googleapis.com/pkg.T\")");
        return NULL;
      }
      describe_expected(tp, "\"]\"");
      return NULL;
    }
    if (n + t->n >= cap) { /* no limit but the input's: grown in the arena */
      size_t ncap = 2 * (n + t->n) + 16;
      char *nbuf = pc_Arena_Malloc(tp->a, ncap);
      if (nbuf == NULL) {
        oom(tp);
        return NULL;
      }
      if (n > 0) memcpy(nbuf, buf, n);
      buf = nbuf;
      cap = ncap;
    }
    memcpy(buf + n, t->s, t->n);
    n += t->n;
    want_ident = !want_ident;
    next(tp);
  }
  buf[n] = '\0';
  next(tp);
  return buf;
}

/* One field and its value(s) (protoc's ConsumeField). */
static int parse_field(TP *tp, pc_Message *msg, const pc_MessageDef *m, char close, int depth) {
  Tok name = tp->tok;
  const pc_FieldDef *f;
  const char *shown = NULL; /* the name for errors ('shown_n' bytes) */
  int shown_n = 0;
  if (is_sym(tp, '[')) {
    int any = strcmp(m->full_name, "google.protobuf.Any") == 0, slashes;
    char *buf = read_bracketed(tp, any, &slashes);
    if (buf == NULL) return 0;
    shown = buf;
    shown_n = (int)strlen(buf);
    if (slashes) {
      if (!any)
        return fail_at(tp, &name, "an expanded Any ([%s]) in %s, which is no google.protobuf.Any",
                       buf, m->full_name);
      if (!read_expanded_any(tp, msg, m, buf, &name, depth)) return 0;
      if (is_sym(tp, ';') || is_sym(tp, ',')) next(tp);
      return 1;
    }
    f = tp->finder != NULL ? tp->finder->extension(tp->finder->ud, m, buf)
                           : pc_Pool_FindExtension(tp->pool, buf);
    if (f == NULL || f->containing != m)
      return fail_at(tp, &name,
                     SAY(tp, "extension \"%s\" is not defined or is not an extension of \"%s\"",
                         "Extension \"%s\" is not defined or is not an extension of \"%s\"."),
                     buf, m->full_name);
  } else if (tp->tok.type == T_IDENT) {
    f = find_field(m, &tp->tok);
    if (f == NULL)
      return fail_at(tp, &name,
                     SAY(tp, "message type \"%s\" has no field named \"%.*s\"",
                         "Message type \"%s\" has no field named \"%.*s\"."),
                     m->full_name, TEXT(tp, &name));
    /* protoc names the field as written, a group by its type */
    shown = tp->protoc ? name.s : f->name;
    shown_n = tp->protoc ? (int)name.n : (int)strlen(f->name);
    next(tp);
  } else if (tp->protoc) {
    return expected(tp, NULL, "identifier");
  } else {
    return describe_expected(tp, close == '\0' ? "a field name" : "a field name or the end");
  }
  if (f->label != kPc_Label_Repeated) { /* protoc: a singular field once, one member per oneof */
    if (has_field(msg, f))
      return fail_at(tp, &name,
                     SAY(tp, "non-repeated field \"%.*s\" is specified multiple times",
                         "Non-repeated field \"%.*s\" is specified multiple times."),
                     shown_n, shown);
    const pc_FieldDef *other = f->oneof != NULL ? pc_Message_WhichOneof(msg, f->oneof) : NULL;
    if (other != NULL)
      return fail_at(tp, &name,
                     SAY(tp,
                         "field \"%.*s\" is specified along with field \"%s\", another member of "
                         "oneof \"%s\"",
                         "Field \"%.*s\" is specified along with field \"%s\", another member of "
                         "oneof \"%s\"."),
                     shown_n, shown, other->name, f->oneof->name);
  }
  if (!read_field_value(tp, msg, f, depth)) return 0;
  if (is_sym(tp, ';') || is_sym(tp, ',')) next(tp);
  return 1;
}

/* Fields up to 'close' ('\0': the end of input); as protoc, either closing
 * bracket ends the fields, then it must be the right one. */
static int parse_body(TP *tp, pc_Message *msg, const pc_MessageDef *m, char close, int depth) {
  while (close == '\0' ? tp->tok.type != T_EOF : !is_sym(tp, '}') && !is_sym(tp, '>'))
    if (!parse_field(tp, msg, m, close, depth)) return 0;
  if (close == '\0') return 1;
  if (!tp->protoc && !is_sym(tp, close)) return describe_expected(tp, "a field name or the end");
  return expect_sym(tp, close);
}

/* -- protoc's required-field check ---------------------------------------- */

typedef struct {
  char list[PC_ERROR_MAX];
  size_t n;
} Missing;

/* protoc's FindInitializationErrors: the paths of the unset required fields
 * of 'msg' under 'path' ("i.x", "r[1].x", "(p.e).x", "m[0].value.x"), this
 * message's first, then its sub-messages' in field-number order. */
static void find_missing(const pc_Message *msg, const pc_MessageDef *m, char *path, size_t plen,
                         Missing *out, int depth) {
  if (depth > PC_MESSAGE_MAX_DEPTH || plen >= 512) return;
  for (uint32_t i = 0; m->required_count > 0 && i < m->field_count; i++) {
    const pc_FieldDef *f = &m->fields[i];
    if (f->label == kPc_Label_Required && !pc_Message_Has(msg, f) && out->n < sizeof out->list)
      out->n += (size_t)snprintf(out->list + out->n, sizeof out->list - out->n, "%s%.*s%s",
                                 out->n ? ", " : "", (int)plen, path, f->name);
  }
  size_t nx, j = 0;
  const pc_Extension *xs = pc_Message_Extensions(msg, &nx);
  uint32_t i = 0;
  while (i < m->field_count || j < nx) {
    const pc_FieldDef *f;
    pc_Value v;
    if (j == nx || (i < m->field_count && m->fields_by_number[i]->number < xs[j].field->number)) {
      f = m->fields_by_number[i++];
      if (!pc_Message_Has(msg, f)) continue;
      v = pc_Message_Get(msg, f);
    } else {
      f = xs[j].field;
      v = xs[j++].value;
    }
    if (f->type != kPc_Type_Message && f->type != kPc_Type_Group) continue;
    char *p = path + plen;
    size_t room = 512 - plen;
    int k = f->is_extension ? snprintf(p, room, "(%s)", f->full_name)
                            : snprintf(p, room, "%s", f->name);
    if (k < 0 || (size_t)k >= room) continue;
    size_t len = plen + (size_t)k;
    if (f->is_map) {
      const pc_FieldDef *vf = pc_FieldDef_MapValue(f);
      for (size_t e = 0; vf->slot == kPc_Slot_Message && e < v.map->size; e++) {
        int w = snprintf(path + len, 512 - len, "[%zu].value.", e);
        if (w > 0 && (size_t)w < 512 - len && v.map->entries[e].value.m != NULL)
          find_missing(v.map->entries[e].value.m, vf->message, path, len + (size_t)w, out,
                       depth + 1);
      }
    } else if (f->label == kPc_Label_Repeated) {
      for (size_t e = 0; e < v.a->size; e++) {
        int w = snprintf(path + len, 512 - len, "[%zu].", e);
        if (w > 0 && (size_t)w < 512 - len)
          find_missing(pc_Array_Get(v.a, e, kPc_Slot_Message).m, f->message, path, len + (size_t)w,
                       out, depth + 1);
      }
    } else if (len + 1 < 512) {
      path[len] = '.';
      find_missing(v.m, f->message, path, len + 1, out, depth + 1);
    }
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
  tp.finder = opts != NULL ? opts->finder : NULL;
  tp.protoc = opts != NULL && opts->protoc;
  tp.max_depth = opts != NULL && opts->max_depth > 0 ? opts->max_depth : PC_TEXT_DEFAULT_DEPTH;
  if (tp.max_depth > PC_TEXT_MAX_DEPTH) tp.max_depth = PC_TEXT_MAX_DEPTH;
  tp.status = kPc_TextStatus_Ok;
  next(&tp);
  if (!parse_body(&tp, msg, m, '\0', 0))
    return tp.status != kPc_TextStatus_Ok ? tp.status : kPc_TextStatus_Invalid;
  if (tp.protoc && pc_Message_CheckRequired(msg, m, NULL) != 0) {
    char path[512];
    Missing missing;
    missing.n = 0;
    missing.list[0] = '\0';
    find_missing(msg, m, path, 0, &missing, 0);
    fail_at(&tp, &tp.tok, "Message missing required fields: %s", missing.list);
    return tp.status;
  }
  return kPc_TextStatus_Ok;
}
