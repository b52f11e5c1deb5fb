/* The .proto parser. Statement by statement as protoc's compiler/parser.cc
 * (same grammar, same error texts); see compiler/parse_internal.h for what it keeps. */
#include "compiler/parse_internal.h"
#include "base/hash.h"
#include "wire/wire.h"

#include "compiler/lex_internal.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELD_NUMBER   536870911
#define RANGE_MAX_SENTINEL (-1)
#define MAX_DEPTH          64

typedef struct {
  pc_Arena *a;
  pc_Error *err;
  const char *name;
  pc_Lexer lx;
  pc_Token cur;
  int failed;
  int depth;
  pc_Syntax syntax;
  pc_LaterError *later; /* the first error protoc reports only after parsing */
} P;

/* ---- errors ------------------------------------------------------------ */

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int
error_at(P *p, int line, int col, const char *fmt, ...) {
  if (!p->failed) {
    va_list ap;
    va_start(ap, fmt);
    pc_Error_SetAtV(p->err, p->name, line, col, fmt, ap);
    va_end(ap);
  }
  p->failed = 1;
  p->cur.kind = kPc_Tok_End; /* stops every loop */
  p->cur.len = 0;
  return 0;
}

#define error(p, ...) error_at((p), (p)->cur.line, (p)->cur.column, __VA_ARGS__)

#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static void
set_at(pc_Error *e, const char *name, int line, int col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pc_Error_SetAtV(e, name, line, col, fmt, ap);
  va_end(ap);
}

/* An error protoc finds only when it builds the descriptor (a standard
 * option's name or value): kept in p->later, the first one only, while
 * parsing goes on, so that a syntax error further down is the one reported,
 * as in protoc. Returns 1 (the option is skipped). */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static int
later_at(P *p, int file_level, int line, int col, const char *fmt, ...) {
  if (!p->later->error.set) {
    va_list ap;
    va_start(ap, fmt);
    pc_Error_SetAtV(&p->later->error, p->name, line, col, fmt, ap);
    va_end(ap);
    p->later->line = line;
    p->later->column = col;
    p->later->file_level = file_level;
  }
  return 1;
}

static int oom(P *p) {
  if (!p->failed) pc_Error_Set(p->err, "out of memory");
  p->failed = 1;
  p->cur.kind = kPc_Tok_End;
  p->cur.len = 0;
  return 0;
}

/* ---- tokens ------------------------------------------------------------ */

static void advance(P *p) {
  if (p->failed) return;
  if (!pc_Lexer_Next(&p->lx, &p->cur))
    error_at(p, p->lx.error_line, p->lx.error_column, "%s", p->lx.error);
}

static int at(const P *p, const char *s) {
  size_t n = strlen(s);
  return (p->cur.kind == kPc_Tok_Ident || p->cur.kind == kPc_Tok_Symbol) && p->cur.len == n &&
         memcmp(p->cur.text, s, n) == 0;
}

static int try_consume(P *p, const char *s) {
  if (!at(p, s)) return 0;
  advance(p);
  return !p->failed;
}

static int expect_msg(P *p, const char *s, const char *msg) {
  if (try_consume(p, s)) return 1;
  if (p->failed) return 0;
  if (msg) return error(p, "%s", msg);
  return error(p, "Expected \"%s\".", s);
}

#define expect(p, s) expect_msg((p), (s), NULL)

static char *dup_tok(P *p, const pc_Token *t) {
  char *s = pc_Arena_StrDup(p->a, t->text, t->len);
  if (s == NULL) oom(p);
  return s;
}

static char *consume_ident(P *p, const char *msg, pc_Token *where) {
  if (p->cur.kind != kPc_Tok_Ident) {
    error(p, "%s", msg);
    return NULL;
  }
  if (where) *where = p->cur;
  char *s = dup_tok(p, &p->cur);
  advance(p);
  return p->failed ? NULL : s;
}

/* Adjacent string literals, decoded and concatenated ('*len' bytes, NUL
 * after them). */
static char *consume_string(P *p, const char *msg, size_t *len) {
  if (p->cur.kind != kPc_Tok_String) {
    error(p, "%s", msg);
    return NULL;
  }
  size_t raw = 0;
  pc_Lexer save = p->lx;
  pc_Token t = p->cur;
  while (t.kind == kPc_Tok_String) {
    raw += t.len;
    if (!pc_Lexer_Next(&p->lx, &t)) break;
  }
  p->lx = save;
  char *out = pc_Arena_Malloc(p->a, raw + 1);
  if (out == NULL) {
    oom(p);
    return NULL;
  }
  size_t n = 0;
  pc_Token first = p->cur;
  while (p->cur.kind == kPc_Tok_String) {
    n += pc_Token_Unescape(&p->cur, out + n);
    advance(p);
  }
  out[n] = '\0';
  if (len) {
    *len = n;
  } else if (strlen(out) != n && !p->failed) { /* a name or a file: read as a C string */
    error_at(p, first.line, first.column, "A name holds no NUL byte.");
  }
  return p->failed ? NULL : out;
}

/* An integer token up to 'max' ("Integer out of range." past it). */
static int consume_u64(P *p, uint64_t max, uint64_t *out, const char *msg) {
  if (p->cur.kind != kPc_Tok_Int) return error(p, "%s", msg);
  uint64_t v = 0;
  if (!pc_Token_Int(&p->cur, &v) || v > max) return error(p, "Integer out of range.");
  *out = v;
  advance(p);
  return !p->failed;
}

static int consume_int(P *p, int32_t *out, const char *msg) {
  uint64_t v = 0;
  if (!consume_u64(p, INT32_MAX, &v, msg)) return 0;
  *out = (int32_t)v;
  return 1;
}

static int consume_signed_int(P *p, int32_t *out, const char *msg) {
  int neg = try_consume(p, "-");
  uint64_t v = 0;
  if (!consume_u64(p, (uint64_t)INT32_MAX + (neg ? 1 : 0), &v, msg)) return 0;
  *out = neg ? (int32_t)(-(int64_t)v) : (int32_t)v;
  return 1;
}

/* ---- growable arrays in the arena ---------------------------------------- */

static void *push(P *p, void *arrp, size_t *count, size_t *cap, size_t size) {
  void **arr = (void **)arrp;
  if (*count == *cap) {
    size_t nc = *cap ? *cap * 2 : 4;
    void *n = pc_Arena_Malloc(p->a, nc * size);
    if (n == NULL) {
      oom(p);
      return NULL;
    }
    if (*count) memcpy(n, *arr, *count * size);
    *arr = n;
    *cap = nc;
  }
  void *slot = (char *)*arr + *count * size;
  memset(slot, 0, size);
  (*count)++;
  return slot;
}

/* Options are written front to back (core/wire/wire.h). */
typedef pc_ByteBuf Buf;

static int buf_put(P *p, Buf *b, const void *data, size_t len) {
  return pc_ByteBuf_Put(b, p->a, data, len) || oom(p);
}

static int buf_varint(P *p, Buf *b, uint64_t v) {
  return pc_ByteBuf_PutVarint(b, p->a, v) || oom(p);
}

static int buf_tag(P *p, Buf *b, uint32_t number, int wt) {
  return buf_varint(p, b, ((uint64_t)number << 3) | (uint64_t)wt);
}

static int buf_lenbytes(P *p, Buf *b, uint32_t number, const void *data, size_t len) {
  return buf_tag(p, b, number, 2) && buf_varint(p, b, len) && buf_put(p, b, data, len);
}

/* ---- options ------------------------------------------------------------- */

typedef enum {
  kFileOpts,
  kMessageOpts,
  kFieldOpts,
  kOneofOpts,
  kEnumOpts,
  kEnumValueOpts,
  kServiceOpts,
  kMethodOpts,
  kRangeOpts
} OptKind;

static const char *const kOptMessage[] = {
    "google.protobuf.FileOptions",          "google.protobuf.MessageOptions",
    "google.protobuf.FieldOptions",         "google.protobuf.OneofOptions",
    "google.protobuf.EnumOptions",          "google.protobuf.EnumValueOptions",
    "google.protobuf.ServiceOptions",       "google.protobuf.MethodOptions",
    "google.protobuf.ExtensionRangeOptions"};

static const char *const kOptimizeMode[] = {"SPEED", "CODE_SIZE", "LITE_RUNTIME", NULL}; /* 1.. */
static const char *const kCType[] = {"STRING", "CORD", "STRING_PIECE", NULL};            /* 0.. */
static const char *const kJSType[] = {"JS_NORMAL", "JS_STRING", "JS_NUMBER", NULL};
static const char *const kIdempotency[] = {"IDEMPOTENCY_UNKNOWN", "NO_SIDE_EFFECTS", "IDEMPOTENT",
                                           NULL};

typedef struct {
  const char *name;
  const char *const *values;
  const char *enum_type;
  OptKind kind;
  uint32_t number;
  int first_value;
  char type; /* 'b' bool, 's' string, 'e' enum */
} StdOpt;

/* descriptor.proto's standard options (protobuf 21). */
static const StdOpt kStdOpts[] = {
    {"java_package", NULL, NULL, kFileOpts, 1, 0, 's'},
    {"java_outer_classname", NULL, NULL, kFileOpts, 8, 0, 's'},
    {"java_multiple_files", NULL, NULL, kFileOpts, 10, 0, 'b'},
    {"java_generate_equals_and_hash", NULL, NULL, kFileOpts, 20, 0, 'b'},
    {"java_string_check_utf8", NULL, NULL, kFileOpts, 27, 0, 'b'},
    {"optimize_for", kOptimizeMode, "google.protobuf.FileOptions.OptimizeMode", kFileOpts, 9, 1,
     'e'},
    {"go_package", NULL, NULL, kFileOpts, 11, 0, 's'},
    {"cc_generic_services", NULL, NULL, kFileOpts, 16, 0, 'b'},
    {"java_generic_services", NULL, NULL, kFileOpts, 17, 0, 'b'},
    {"py_generic_services", NULL, NULL, kFileOpts, 18, 0, 'b'},
    {"php_generic_services", NULL, NULL, kFileOpts, 42, 0, 'b'},
    {"deprecated", NULL, NULL, kFileOpts, 23, 0, 'b'},
    {"cc_enable_arenas", NULL, NULL, kFileOpts, 31, 0, 'b'},
    {"objc_class_prefix", NULL, NULL, kFileOpts, 36, 0, 's'},
    {"csharp_namespace", NULL, NULL, kFileOpts, 37, 0, 's'},
    {"swift_prefix", NULL, NULL, kFileOpts, 39, 0, 's'},
    {"php_class_prefix", NULL, NULL, kFileOpts, 40, 0, 's'},
    {"php_namespace", NULL, NULL, kFileOpts, 41, 0, 's'},
    {"php_metadata_namespace", NULL, NULL, kFileOpts, 44, 0, 's'},
    {"ruby_package", NULL, NULL, kFileOpts, 45, 0, 's'},
    {"message_set_wire_format", NULL, NULL, kMessageOpts, 1, 0, 'b'},
    {"no_standard_descriptor_accessor", NULL, NULL, kMessageOpts, 2, 0, 'b'},
    {"deprecated", NULL, NULL, kMessageOpts, 3, 0, 'b'},
    {"map_entry", NULL, NULL, kMessageOpts, 7, 0, 'b'},
    {"ctype", kCType, "google.protobuf.FieldOptions.CType", kFieldOpts, 1, 0, 'e'},
    {"packed", NULL, NULL, kFieldOpts, 2, 0, 'b'},
    {"jstype", kJSType, "google.protobuf.FieldOptions.JSType", kFieldOpts, 6, 0, 'e'},
    {"lazy", NULL, NULL, kFieldOpts, 5, 0, 'b'},
    {"unverified_lazy", NULL, NULL, kFieldOpts, 15, 0, 'b'},
    {"deprecated", NULL, NULL, kFieldOpts, 3, 0, 'b'},
    {"weak", NULL, NULL, kFieldOpts, 10, 0, 'b'},
    {"allow_alias", NULL, NULL, kEnumOpts, 2, 0, 'b'},
    {"deprecated", NULL, NULL, kEnumOpts, 3, 0, 'b'},
    {"deprecated", NULL, NULL, kEnumValueOpts, 1, 0, 'b'},
    {"deprecated", NULL, NULL, kServiceOpts, 33, 0, 'b'},
    {"deprecated", NULL, NULL, kMethodOpts, 33, 0, 'b'},
    {"idempotency_level", kIdempotency, "google.protobuf.MethodOptions.IdempotencyLevel",
     kMethodOpts, 34, 0, 'e'},
};

typedef struct {
  uint32_t number;
  size_t off, len;
} OptEnt;

/* The options of one element while it is parsed. */
typedef struct {
  OptKind kind;
  Buf std; /* standard options, one entry each */
  OptEnt *ents;
  size_t n, cap;
  Buf unint; /* uninterpreted_option entries, in source order */
  int present;
  int bools[64]; /* decoded bool values by field number: -1 unset */
} Opts;

static void opts_init(Opts *o, OptKind kind) {
  memset(o, 0, sizeof *o);
  o->kind = kind;
  for (int i = 0; i < 64; i++) o->bools[i] = -1;
}

static int opts_finish(P *p, Opts *o, pc_OptionsDesc *out) {
  out->present = o->present;
  out->data = NULL;
  out->size = 0;
  if (!o->present) return 1;
  /* insertion sort by field number (each standard option is set once) */
  for (size_t i = 1; i < o->n; i++) {
    OptEnt e = o->ents[i];
    size_t j = i;
    while (j > 0 && o->ents[j - 1].number > e.number) {
      o->ents[j] = o->ents[j - 1];
      j--;
    }
    o->ents[j] = e;
  }
  size_t total = o->std.n + o->unint.n;
  uint8_t *d = pc_Arena_Malloc(p->a, total ? total : 1);
  if (d == NULL) return oom(p);
  size_t k = 0;
  for (size_t i = 0; i < o->n; i++) {
    memcpy(d + k, o->std.p + o->ents[i].off, o->ents[i].len);
    k += o->ents[i].len;
  }
  if (o->unint.n) memcpy(d + k, o->unint.p, o->unint.n);
  out->data = d;
  out->size = total;
  return 1;
}

typedef enum { kValIdent, kValPos, kValNeg, kValDouble, kValString, kValAggregate } ValKind;

typedef struct {
  ValKind kind;
  uint64_t u;
  int64_t i;
  double d;
  const char *s;
  size_t slen;
  int line, col;
} OptVal;

/* protoc's ParseUninterpretedBlock: the tokens between the braces joined
 * with single spaces. */
static int parse_aggregate(P *p, OptVal *v) {
  Buf b = {0};
  advance(p); /* '{' */
  int depth = 1;
  while (p->cur.kind != kPc_Tok_End) {
    if (at(p, "{")) {
      depth++;
    } else if (at(p, "}")) {
      if (--depth == 0) {
        advance(p);
        break;
      }
    }
    if (b.n && !buf_put(p, &b, " ", 1)) return 0;
    if (!buf_put(p, &b, p->cur.text, p->cur.len)) return 0;
    advance(p);
  }
  if (p->failed) return 0;
  if (depth > 0) return error(p, "Unexpected end of stream while parsing aggregate value.");
  if (!buf_put(p, &b, "", 1)) return 0;
  v->kind = kValAggregate;
  v->s = (const char *)b.p;
  v->slen = b.n - 1;
  return 1;
}

static int parse_opt_value(P *p, OptVal *v) {
  memset(v, 0, sizeof *v);
  v->line = p->cur.line;
  v->col = p->cur.column;
  int neg = try_consume(p, "-");
  if (p->failed) return 0;
  switch (p->cur.kind) {
  case kPc_Tok_End: return error(p, "Unexpected end of stream while parsing option value.");
  case kPc_Tok_Ident:
    if (neg) return error(p, "Invalid '-' symbol before identifier.");
    v->kind = kValIdent;
    v->s = dup_tok(p, &p->cur);
    v->slen = p->cur.len;
    advance(p);
    return !p->failed;
  case kPc_Tok_Int: {
    uint64_t u = 0;
    if (!consume_u64(p, neg ? (uint64_t)INT64_MAX + 1 : UINT64_MAX, &u, "Expected integer."))
      return 0;
    if (neg) {
      v->kind = kValNeg;
      v->i = (int64_t)(0 - u);
    } else {
      v->kind = kValPos;
      v->u = u;
    }
    return 1;
  }
  case kPc_Tok_Float:
    v->kind = kValDouble;
    v->d = pc_Token_Float(&p->cur);
    if (neg) v->d = -v->d;
    advance(p);
    return !p->failed;
  case kPc_Tok_String:
    if (neg) return error(p, "Invalid '-' symbol before string.");
    v->kind = kValString;
    v->s = consume_string(p, "Expected string.", &v->slen);
    return v->s != NULL;
  case kPc_Tok_Symbol:
    if (at(p, "{")) return parse_aggregate(p, v);
    return error(p, "Expected option value.");
  }
  return 0;
}

typedef struct {
  const char *name;
  size_t len;
  int is_ext;
} NamePart;

/* 'line', 'col': the option name's position (protoc's for "already set"). */
static int set_std_option(P *p, Opts *o, const StdOpt *so, const OptVal *v, int line, int col) {
  char full[160];
  snprintf(full, sizeof full, "%s.%s", kOptMessage[so->kind], so->name);
  for (size_t i = 0; i < o->n; i++)
    if (o->ents[i].number == so->number)
      return later_at(p, o->kind == kFileOpts, line, col, "Option \"%s\" was already set.",
                      so->name);
  uint64_t value = 0;
  Buf *b = &o->std;
  size_t start = b->n;
  if (so->type == 'b') {
    if (v->kind != kValIdent || v->s == NULL)
      return later_at(p, o->kind == kFileOpts, v->line, v->col,
                      "Value must be identifier for boolean option \"%s\".", full);
    if (strcmp(v->s, "true") == 0) {
      value = 1;
    } else if (strcmp(v->s, "false") != 0) {
      return later_at(p, o->kind == kFileOpts, v->line, v->col,
                      "Value must be \"true\" or \"false\" for boolean option \"%s\".", full);
    }
    if (so->number < 64) o->bools[so->number] = (int)value;
    if (!buf_tag(p, b, so->number, 0) || !buf_varint(p, b, value)) return 0;
  } else if (so->type == 'e') {
    if (v->kind != kValIdent)
      return later_at(p, o->kind == kFileOpts, v->line, v->col,
                      "Value must be identifier for enum-valued option \"%s\".", full);
    int found = -1;
    for (int i = 0; so->values[i]; i++)
      if (v->s != NULL && strcmp(so->values[i], v->s) == 0) found = i + so->first_value;
    if (found < 0)
      return later_at(p, o->kind == kFileOpts, v->line, v->col,
                      "Enum type \"%s\" has no value named \"%s\" for option \"%s\".",
                      so->enum_type, v->s, full);
    if (!buf_tag(p, b, so->number, 0) || !buf_varint(p, b, (uint64_t)found)) return 0;
  } else {
    if (v->kind != kValString)
      return later_at(p, o->kind == kFileOpts, v->line, v->col,
                      "Value must be quoted string for string option \"%s\".", full);
    if (!buf_lenbytes(p, b, so->number, v->s, v->slen)) return 0;
  }
  OptEnt *e = push(p, &o->ents, &o->n, &o->cap, sizeof *e);
  if (e == NULL) return 0;
  e->number = so->number;
  e->off = start;
  e->len = b->n - start;
  o->present = 1;
  return 1;
}

/* An option naming an extension: an uninterpreted_option (999) entry. */
static int add_uninterpreted(P *p, Opts *o, const NamePart *parts, size_t nparts, const OptVal *v,
                             int line, int col) {
  Buf u = {0};
  for (size_t i = 0; i < nparts; i++) {
    Buf np = {0};
    if (!buf_lenbytes(p, &np, 1, parts[i].name, parts[i].len) || !buf_tag(p, &np, 2, 0) ||
        !buf_varint(p, &np, (uint64_t)parts[i].is_ext) || !buf_lenbytes(p, &u, 2, np.p, np.n))
      return 0;
  }
  int ok = 1;
  switch (v->kind) {
  case kValIdent: ok = buf_lenbytes(p, &u, 3, v->s, v->slen); break;
  case kValPos: ok = buf_tag(p, &u, 4, 0) && buf_varint(p, &u, v->u); break;
  case kValNeg: ok = buf_tag(p, &u, 5, 0) && buf_varint(p, &u, (uint64_t)v->i); break;
  case kValDouble: {
    uint64_t bits;
    memcpy(&bits, &v->d, 8);
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(bits >> (8 * i));
    ok = buf_tag(p, &u, 6, 1) && buf_put(p, &u, le, 8);
    break;
  }
  case kValString: ok = buf_lenbytes(p, &u, 7, v->s, v->slen); break;
  case kValAggregate: ok = buf_lenbytes(p, &u, 8, v->s, v->slen); break;
  }
  if (!ok || !buf_tag(p, &u, 1000, 0) || !buf_varint(p, &u, (uint64_t)line) ||
      !buf_tag(p, &u, 1001, 0) || !buf_varint(p, &u, (uint64_t)col) || !buf_tag(p, &u, 1002, 0) ||
      !buf_varint(p, &u, (uint64_t)v->line) || !buf_tag(p, &u, 1003, 0) ||
      !buf_varint(p, &u, (uint64_t)v->col))
    return 0;
  o->present = 1;
  return buf_lenbytes(p, &o->unint, 999, u.p, u.n);
}

/* `name = value` after "option" or inside [...]. */
static int parse_option_body(P *p, Opts *o) {
  NamePart *parts = NULL; /* as many as written, as protoc takes them */
  size_t nparts = 0, cap = 0;
  int line = p->cur.line, col = p->cur.column;
  do {
    NamePart *np = push(p, &parts, &nparts, &cap, sizeof *np);
    if (np == NULL) return 0;
    if (try_consume(p, "(")) {
      Buf b = {0};
      if (p->cur.kind == kPc_Tok_Ident) {
        if (!buf_put(p, &b, p->cur.text, p->cur.len)) return 0;
        advance(p);
      }
      while (try_consume(p, ".")) {
        if (p->cur.kind != kPc_Tok_Ident) return error(p, "Expected identifier.");
        if (!buf_put(p, &b, ".", 1) || !buf_put(p, &b, p->cur.text, p->cur.len)) return 0;
        advance(p);
      }
      if (!expect(p, ")")) return 0;
      np->name = b.n ? (const char *)b.p : "";
      np->len = b.n;
      np->is_ext = 1;
    } else {
      if (p->failed) return 0;
      if (p->cur.kind != kPc_Tok_Ident) return error(p, "Expected identifier.");
      np->name = p->cur.text;
      np->len = p->cur.len;
      np->is_ext = 0;
      advance(p);
    }
  } while (try_consume(p, "."));
  if (!expect(p, "=")) return 0;
  OptVal v;
  if (!parse_opt_value(p, &v)) return 0;
  for (size_t i = 0; i < nparts; i++)
    if (parts[i].len == 0) { /* "()": protoc finds it building, before names resolve */
      if (!p->later->error.set) p->later->early = 1;
      return later_at(p, o->kind == kFileOpts, 0, 0,
                      "Uninterpreted option is missing name or value.");
    }
  if (!parts[0].is_ext) {
    for (size_t i = 0; i < sizeof kStdOpts / sizeof kStdOpts[0]; i++) {
      const StdOpt *so = &kStdOpts[i];
      if (so->kind == o->kind && strlen(so->name) == parts[0].len &&
          memcmp(so->name, parts[0].name, parts[0].len) == 0) {
        if (nparts > 1)
          return later_at(p, o->kind == kFileOpts, line, col,
                          "Option \"%s\" is an atomic type, not a message.", so->name);
        return set_std_option(p, o, so, &v, line, col);
      }
    }
    return later_at(p, o->kind == kFileOpts, line, col,
                    "Option \"%.*s\" unknown. Ensure that your proto definition file imports "
                    "the proto which defines the option.",
                    (int)parts[0].len, parts[0].name);
  }
  return add_uninterpreted(p, o, parts, nparts, &v, line, col);
}

static int parse_option_statement(P *p, Opts *o) {
  if (!expect(p, "option")) return 0;
  return parse_option_body(p, o) && expect(p, ";");
}

/* ---- fields -------------------------------------------------------------- */

/* Where nested types and fields of the enclosing scope go. */
typedef struct {
  pc_MessageDesc **arr;
  size_t *count, *cap;
} MsgSink;

typedef struct {
  pc_FieldDesc **arr;
  size_t *count, *cap;
} FieldSink;

static void format_g(double v, int digits, char out[32]) {
  snprintf(out, 32, "%.*g", digits, v);
}

void pc_FormatDouble(double v, char out[32]) {
  if (isnan(v)) {
    memcpy(out, "nan", 4);
  } else if (isinf(v)) {
    memcpy(out, v > 0 ? "inf" : "-inf", v > 0 ? 4 : 5);
  } else {
    format_g(v, DBL_DIG, out);
    if (strtod(out, NULL) != v) format_g(v, DBL_DIG + 2, out);
  }
}

void pc_FormatFloat(float v, char out[32]) {
  if (isnan(v)) {
    memcpy(out, "nan", 4);
  } else if (isinf(v)) {
    memcpy(out, v > 0 ? "inf" : "-inf", v > 0 ? 4 : 5);
  } else {
    format_g(v, FLT_DIG, out);
    if (strtof(out, NULL) != v) format_g(v, FLT_DIG + 3, out);
  }
}

/* protoc's CEscape: \n \r \t \" \' \\ and octal for the rest outside
 * printable ASCII. */
static char *c_escape(P *p, const char *s, size_t len) {
  char *out = pc_Arena_Malloc(p->a, len * 4 + 1);
  if (out == NULL) {
    oom(p);
    return NULL;
  }
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
    case '\n': memcpy(out + n, "\\n", 2), n += 2; break;
    case '\r': memcpy(out + n, "\\r", 2), n += 2; break;
    case '\t': memcpy(out + n, "\\t", 2), n += 2; break;
    case '"': memcpy(out + n, "\\\"", 2), n += 2; break;
    case '\'': memcpy(out + n, "\\'", 2), n += 2; break;
    case '\\': memcpy(out + n, "\\\\", 2), n += 2; break;
    default:
      if (c < 0x20 || c >= 0x7F) {
        snprintf(out + n, 5, "\\%03o", c);
        n += 4;
      } else {
        out[n++] = (char)c;
      }
    }
  }
  out[n] = '\0';
  return out;
}

static int parse_default(P *p, pc_FieldDesc *f) {
  if (f->default_value != NULL) return error(p, "Already set option \"default\".");
  advance(p); /* default */
  if (!expect(p, "=")) return 0;
  f->default_line = p->cur.line;
  f->default_column = p->cur.column;
  char buf[64];
  if (f->type == 0) {
    /* message or enum, not known yet: the token as written */
    if (p->cur.kind == kPc_Tok_End) return error(p, "Expected enum identifier for default value.");
    f->default_value = dup_tok(p, &p->cur);
    advance(p);
    return !p->failed;
  }
  switch (f->type) {
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: {
    uint64_t max =
        (f->type == kPc_Type_Int64 || f->type == kPc_Type_Sint64 || f->type == kPc_Type_Sfixed64)
            ? (uint64_t)INT64_MAX
            : (uint64_t)INT32_MAX;
    int neg = try_consume(p, "-");
    uint64_t v = 0;
    if (!consume_u64(p, max + (neg ? 1 : 0), &v, "Expected integer for field default value."))
      return 0;
    snprintf(buf, sizeof buf, "%s%llu", neg ? "-" : "", (unsigned long long)v);
    break;
  }
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: {
    uint64_t max =
        (f->type == kPc_Type_Uint32 || f->type == kPc_Type_Fixed32) ? UINT32_MAX : UINT64_MAX;
    uint64_t v = 0;
    if (try_consume(p, "-")) return error(p, "Unsigned field can't have negative default value.");
    if (!consume_u64(p, max, &v, "Expected integer for field default value.")) return 0;
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    break;
  }
  case kPc_Type_Float:
  case kPc_Type_Double: {
    int neg = try_consume(p, "-");
    if (!(p->cur.kind == kPc_Tok_Int || p->cur.kind == kPc_Tok_Float ||
          (p->cur.kind == kPc_Tok_Ident && (at(p, "inf") || at(p, "nan")))))
      return error(p, "Expected number.");
    double d = pc_Token_Float(&p->cur);
    advance(p);
    buf[0] = '-';
    pc_FormatDouble(d, buf + (neg ? 1 : 0));
    break;
  }
  case kPc_Type_Bool:
    if (try_consume(p, "true")) {
      memcpy(buf, "true", 5);
    } else if (try_consume(p, "false")) {
      memcpy(buf, "false", 6);
    } else {
      return error(p, "Expected \"true\" or \"false\".");
    }
    break;
  case kPc_Type_String: {
    size_t n;
    char *s = consume_string(p, "Expected string for field default value.", &n);
    if (s == NULL) return 0;
    f->default_value = s;
    if (strlen(s) != n) f->default_value_len = n;
    return 1;
  }
  case kPc_Type_Bytes: {
    size_t n;
    char *s = consume_string(p, "Expected string.", &n);
    if (s == NULL) return 0;
    f->default_value = c_escape(p, s, n);
    return f->default_value != NULL;
  }
  default: return error(p, "Messages can't have default values.");
  }
  if (p->failed) return 0;
  f->default_value = pc_Arena_StrDup(p->a, buf, strlen(buf));
  if (f->default_value == NULL) return oom(p);
  return 1;
}

static int parse_field_options(P *p, pc_FieldDesc *f, int *explicit_json) {
  if (!at(p, "[")) return 1;
  advance(p);
  Opts o;
  opts_init(&o, kFieldOpts);
  do {
    if (at(p, "default")) {
      if (!parse_default(p, f)) return 0;
    } else if (at(p, "json_name")) {
      if (*explicit_json) return error(p, "Already set option \"json_name\".");
      f->json_line = p->cur.line;
      f->json_column = p->cur.column;
      advance(p);
      if (!expect(p, "=")) return 0;
      f->json_name = consume_string(p, "Expected string for JSON name.", NULL);
      if (f->json_name == NULL) return 0;
      *explicit_json = 1;
    } else if (!parse_option_body(p, &o)) {
      return 0;
    }
  } while (try_consume(p, ","));
  if (!expect(p, "]")) return 0;
  f->packed = o.bools[2];
  f->deprecated = o.bools[3];
  return opts_finish(p, &o, &f->options);
}

/* A type after a label: a scalar keyword (type set) or a name (type_name). */
static int parse_type(P *p, pc_FieldType *type, const char **type_name) {
  *type = 0;
  *type_name = NULL;
  if (p->cur.kind == kPc_Tok_Ident) {
    pc_FieldType t = pc_FieldType_FromName(p->cur.text, p->cur.len);
    if (t == 0 && at(p, "group")) t = kPc_Type_Group;
    if (t != 0) {
      *type = t;
      advance(p);
      return !p->failed;
    }
  }
  Buf b = {0};
  if (try_consume(p, ".") && !buf_put(p, &b, ".", 1)) return 0;
  if (p->cur.kind != kPc_Tok_Ident) return error(p, "Expected type name.");
  do {
    if (b.n && b.p[b.n - 1] != '.' && !buf_put(p, &b, ".", 1)) return 0;
    if (p->cur.kind != kPc_Tok_Ident) return error(p, "Expected identifier.");
    if (!buf_put(p, &b, p->cur.text, p->cur.len)) return 0;
    advance(p);
  } while (try_consume(p, "."));
  if (!buf_put(p, &b, "", 1)) return 0;
  *type_name = (const char *)b.p;
  return !p->failed;
}

/* A message or service type (method input/output, extendee). */
static int parse_user_type(P *p, const char **type_name) {
  if (p->cur.kind == kPc_Tok_Ident &&
      (pc_FieldType_FromName(p->cur.text, p->cur.len) != 0 || at(p, "group")))
    return error(p, "Expected message type.");
  pc_FieldType t;
  return parse_type(p, &t, type_name);
}

static void fill_json_name(P *p, pc_FieldDesc *f) {
  size_t n = strlen(f->name);
  char *j = pc_Arena_Malloc(p->a, n + 1);
  if (j == NULL) {
    oom(p);
    return;
  }
  pc_JsonName(f->name, j, n + 1);
  f->json_name = j;
}

static int parse_message_block(P *p, pc_MessageDesc *m);

static char *map_entry_name(P *p, const char *field) {
  size_t n = strlen(field);
  char *out = pc_Arena_Malloc(p->a, n + 6);
  if (out == NULL) {
    oom(p);
    return NULL;
  }
  size_t k = 0;
  int cap = 1;
  for (size_t i = 0; i < n; i++) {
    char c = field[i];
    if (c == '_') {
      cap = 1;
    } else if (cap) {
      if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
      out[k++] = c;
      cap = 0;
    } else {
      out[k++] = c;
    }
  }
  memcpy(out + k, "Entry", 6);
  return out;
}

static pc_FieldDesc *new_field(P *p, FieldSink fs) {
  pc_FieldDesc *f = push(p, fs.arr, fs.count, fs.cap, sizeof *f);
  if (f == NULL) return NULL;
  f->oneof_index = -1;
  f->packed = -1;
  f->deprecated = -1;
  return f;
}

/* A field after its label (protoc's ParseMessageFieldNoLabel). 'f' is the
 * field's index in the sink (its address moves when the sink grows). */
static int parse_field_rest(P *p, FieldSink fs, size_t fi, MsgSink ms, int has_label) {
  pc_FieldDesc *f = &(*fs.arr)[fi];
  int is_map = 0, next_line = 0, next_col = 0;
  pc_FieldType key_type = 0, value_type = 0;
  const char *key_name = NULL, *value_name = NULL;
  if (at(p, "map")) {
    pc_Lexer save = p->lx;
    pc_Token next;
    if (pc_Lexer_Next(&save, &next) && next.kind == kPc_Tok_Symbol && next.len == 1 &&
        next.text[0] == '<') {
      is_map = 1;
      next_line = next.line;
      next_col = next.column;
    }
  }
  f->type_line = p->cur.line;
  f->type_column = p->cur.column;
  if (is_map) {
    if (f->oneof_index >= 0)
      return error_at(p, next_line, next_col, "Map fields are not allowed in oneofs.");
    if (has_label) /* protoc reports these at the '<' */
      return error_at(p, next_line, next_col,
                      "Field labels (required/optional/repeated) are not allowed on map fields.");
    if (f->extendee)
      return error_at(p, next_line, next_col, "Map fields are not allowed to be extensions.");
    f->label = kPc_Label_Repeated;
    advance(p);
    advance(p);
    if (!parse_type(p, &key_type, &key_name) || !expect(p, ",") ||
        !parse_type(p, &value_type, &value_name) || !expect(p, ">"))
      return 0;
  } else {
    if (!has_label) {
      if (p->syntax == kPc_Syntax_Proto3 || f->oneof_index >= 0) {
        f->label = kPc_Label_Optional;
      } else {
        if (at(p, "map")) advance(p); /* protoc reports it after a "map" not followed by '<' */
        if (p->failed) return 0;
        return error(p, "Expected \"required\", \"optional\", or \"repeated\".");
      }
    }
    if (!parse_type(p, &f->type, &f->type_name)) return 0;
  }
  pc_Token name_tok;
  char *name = consume_ident(p, "Expected field name.", &name_tok);
  if (name == NULL) return 0;
  f->name = name;
  f->line = name_tok.line;
  f->column = name_tok.column;
  if (!expect_msg(p, "=", "Missing field number.")) return 0;
  f->number_line = p->cur.line;
  f->number_column = p->cur.column;
  if (!consume_int(p, &f->number, "Expected field number.")) return 0;
  int explicit_json = 0;
  if (!parse_field_options(p, f, &explicit_json)) return 0;
  if (!explicit_json) fill_json_name(p, f);
  if (p->failed) return 0;

  if (f->type == kPc_Type_Group) {
    if (name[0] < 'A' || name[0] > 'Z')
      return error_at(p, name_tok.line, name_tok.column,
                      "Group names must start with a capital letter.");
    if (p->syntax == kPc_Syntax_Proto3) /* protoc finds it when validating */
      set_at(&p->later->validate, p->name, f->type_line, f->type_column,
             "Groups are not supported in proto3 syntax.");
    f->type_name = name;
    char *lower = pc_Arena_StrDup(p->a, name, strlen(name));
    if (lower == NULL) return oom(p);
    for (char *c = lower; *c; c++)
      if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    f->name = lower;
    if (!explicit_json) fill_json_name(p, f);
    if (!at(p, "{")) return error(p, "Missing group body.");
    pc_MessageDesc group;
    memset(&group, 0, sizeof group);
    group.name = name;
    group.line = name_tok.line;
    group.column = name_tok.column;
    if (!parse_message_block(p, &group)) return 0;
    pc_MessageDesc *slot = push(p, ms.arr, ms.count, ms.cap, sizeof *slot);
    if (slot == NULL) return 0;
    *slot = group;
    return 1;
  }
  if (!expect(p, ";")) return 0;
  if (is_map) {
    pc_MessageDesc *e = push(p, ms.arr, ms.count, ms.cap, sizeof *e);
    if (e == NULL) return 0;
    e->name = map_entry_name(p, name);
    e->line = name_tok.line;
    e->column = name_tok.column;
    e->map_entry = 1;
    e->message_set_wire_format = 0;
    static const uint8_t kMapEntryOpt[] = {0x38, 0x01};
    e->options.data = kMapEntryOpt;
    e->options.size = 2;
    e->options.present = 1;
    e->fields = pc_Arena_Calloc(p->a, 2 * sizeof *e->fields);
    if (e->fields == NULL || e->name == NULL) return oom(p);
    e->field_count = 2;
    static const char *const kNames[2] = {"key", "value"};
    for (int i = 0; i < 2; i++) {
      pc_FieldDesc *kv = &e->fields[i];
      kv->name = kNames[i];
      kv->json_name = kNames[i];
      kv->number = i + 1;
      kv->label = kPc_Label_Optional;
      kv->type = i == 0 ? key_type : value_type;
      kv->type_name = i == 0 ? key_name : value_name;
      kv->oneof_index = -1;
      kv->packed = -1;
      kv->deprecated = -1;
      kv->line = name_tok.line;
      kv->column = name_tok.column;
      kv->type_line = f->type_line;
      kv->type_column = f->type_column;
    }
    f = &(*fs.arr)[fi];
    f->type_name = e->name;
  }
  return 1;
}

static int parse_label(P *p, pc_FieldDesc *f) {
  if (try_consume(p, "optional")) {
    f->label = kPc_Label_Optional;
    if (p->syntax == kPc_Syntax_Proto3) f->proto3_optional = 1;
    return 1;
  }
  if (try_consume(p, "repeated")) {
    f->label = kPc_Label_Repeated;
    return 1;
  }
  if (try_consume(p, "required")) {
    f->label = kPc_Label_Required;
    return 1;
  }
  return 0;
}

/* 'at': where the extendee was written (line, column), for an extension. */
static int parse_field(P *p, FieldSink fs, MsgSink ms, const char *extendee, const int at[2]) {
  pc_FieldDesc *f = new_field(p, fs);
  if (f == NULL) return 0;
  f->extendee = extendee;
  if (at != NULL) {
    f->extendee_line = at[0];
    f->extendee_column = at[1];
  }
  size_t fi = *fs.count - 1;
  int has_label = parse_label(p, f);
  return parse_field_rest(p, fs, fi, ms, has_label);
}

static int parse_extend(P *p, FieldSink fs, MsgSink ms) {
  advance(p); /* extend */
  const char *extendee = NULL;
  int at[2] = {p->cur.line, p->cur.column};
  if (!parse_user_type(p, &extendee) || !expect(p, "{")) return 0;
  do {
    if (p->cur.kind == kPc_Tok_End)
      return p->failed ? 0 : error(p, "Reached end of input in extend definition (missing '}').");
    if (!parse_field(p, fs, ms, extendee, at)) return 0;
  } while (!try_consume(p, "}") && !p->failed);
  return !p->failed;
}

/* ---- enums --------------------------------------------------------------- */

static int parse_enum(P *p, pc_EnumDesc *e) {
  advance(p); /* enum */
  pc_Token tok;
  e->name = consume_ident(p, "Expected enum name.", &tok);
  if (e->name == NULL) return 0;
  e->line = tok.line;
  e->column = tok.column;
  if (!expect(p, "{")) return 0;
  size_t vcap = 0, rrcap = 0, rncap = 0;
  Opts o;
  opts_init(&o, kEnumOpts);
  while (!try_consume(p, "}")) {
    if (p->cur.kind == kPc_Tok_End)
      return p->failed ? 0 : error(p, "Reached end of input in enum definition (missing '}').");
    if (try_consume(p, ";")) continue;
    if (at(p, "option")) {
      if (!parse_option_statement(p, &o)) return 0;
    } else if (try_consume(p, "reserved")) {
      if (p->cur.kind == kPc_Tok_String) {
        do {
          const char **n = push(p, &e->reserved_names, &e->reserved_name_count, &rncap, sizeof *n);
          if (n == NULL) return 0;
          *n = consume_string(p, "Expected enum value.", NULL);
          if (*n == NULL) return 0;
        } while (try_consume(p, ","));
      } else {
        int first = 1;
        do {
          pc_RangeDesc *r =
              push(p, &e->reserved_ranges, &e->reserved_range_count, &rrcap, sizeof *r);
          if (r == NULL) return 0;
          if (!consume_signed_int(p, &r->start,
                                  first ? "Expected enum value or number range."
                                        : "Expected enum number range."))
            return 0;
          r->end = r->start;
          if (try_consume(p, "to")) {
            if (try_consume(p, "max")) {
              r->end = INT32_MAX;
            } else if (!consume_signed_int(p, &r->end, "Expected integer.")) {
              return 0;
            }
          }
          first = 0;
        } while (try_consume(p, ","));
      }
      if (!expect(p, ";")) return 0;
    } else {
      pc_EnumValueDesc *v = push(p, &e->values, &e->value_count, &vcap, sizeof *v);
      if (v == NULL) return 0;
      v->name = consume_ident(p, "Expected enum constant name.", &tok);
      if (v->name == NULL) return 0;
      v->line = tok.line;
      v->column = tok.column;
      if (!expect_msg(p, "=", "Missing numeric value for enum constant.")) return 0;
      v->number_line = p->cur.line;
      v->number_column = p->cur.column;
      if (!consume_signed_int(p, &v->number, "Expected integer.")) return 0;
      if (try_consume(p, "[")) {
        Opts vo;
        opts_init(&vo, kEnumValueOpts);
        do {
          if (!parse_option_body(p, &vo)) return 0;
        } while (try_consume(p, ","));
        if (!expect(p, "]") || !opts_finish(p, &vo, &v->options)) return 0;
      }
      if (!expect(p, ";")) return 0;
    }
  }
  if (p->failed) return 0;
  e->allow_alias = o.bools[2] == 1;
  if (o.bools[2] == 0)
    return error(p,
                 "\"%s\" declares 'option allow_alias = false;' which has no effect. Please remove "
                 "the declaration.",
                 e->name);
  if (o.bools[2] == 1) {
    int shared = 0;
    for (size_t i = 0; i < e->value_count && !shared; i++)
      for (size_t k = 0; k < i && !shared; k++) shared = e->values[i].number == e->values[k].number;
    if (!shared)
      return error(p,
                   "\"%s\" declares support for enum aliases but no enum values share field "
                   "numbers. Please remove the unnecessary 'option allow_alias = true;' "
                   "declaration.",
                   e->name);
  }
  return opts_finish(p, &o, &e->options);
}

/* ---- messages ------------------------------------------------------------ */

typedef struct {
  size_t fields, exts, nested, enums, ranges, oneofs, rr, rn;
} Caps;

static int parse_oneof(P *p, pc_MessageDesc *m, Caps *c) {
  advance(p); /* oneof */
  pc_OneofDesc *od = push(p, &m->oneofs, &m->oneof_count, &c->oneofs, sizeof *od);
  if (od == NULL) return 0;
  int index = (int)m->oneof_count - 1;
  const char *name = consume_ident(p, "Expected oneof name.", NULL);
  if (name == NULL || !expect(p, "{")) return 0;
  Opts o;
  opts_init(&o, kOneofOpts);
  FieldSink fs = {&m->fields, &m->field_count, &c->fields};
  MsgSink ms = {&m->nested, &m->nested_count, &c->nested};
  do {
    if (p->cur.kind == kPc_Tok_End)
      return p->failed ? 0 : error(p, "Reached end of input in oneof definition (missing '}').");
    if (at(p, "option")) {
      if (!parse_option_statement(p, &o)) return 0;
      continue;
    }
    if (at(p, "required") || at(p, "optional") || at(p, "repeated"))
      return error(p, "Fields in oneofs must not have labels (required / optional / repeated).");
    pc_FieldDesc *f = new_field(p, fs);
    if (f == NULL) return 0;
    f->label = kPc_Label_Optional;
    f->oneof_index = index;
    if (!parse_field_rest(p, fs, m->field_count - 1, ms, 0)) return 0;
  } while (!try_consume(p, "}") && !p->failed);
  if (p->failed) return 0;
  od = &m->oneofs[index];
  od->name = name;
  return opts_finish(p, &o, &od->options);
}

static int parse_ranges(P *p, pc_MessageDesc *m, Caps *c) {
  advance(p); /* extensions */
  size_t first = m->extension_range_count;
  do {
    pc_ExtensionRangeDesc *r =
        push(p, &m->extension_ranges, &m->extension_range_count, &c->ranges, sizeof *r);
    if (r == NULL) return 0;
    int32_t start, end;
    r->line = p->cur.line;
    r->column = p->cur.column;
    if (!consume_int(p, &start, "Expected field number range.")) return 0;
    end = start;
    if (try_consume(p, "to")) {
      if (try_consume(p, "max")) {
        end = RANGE_MAX_SENTINEL - 1;
      } else if (!consume_int(p, &end, "Expected integer.")) {
        return 0;
      }
    }
    r->range.start = start;
    r->range.end = end + 1;
  } while (try_consume(p, ","));
  if (try_consume(p, "[")) {
    Opts o;
    opts_init(&o, kRangeOpts);
    do {
      if (!parse_option_body(p, &o)) return 0;
    } while (try_consume(p, ","));
    if (!expect(p, "]")) return 0;
    pc_OptionsDesc od;
    if (!opts_finish(p, &o, &od)) return 0;
    for (size_t i = first; i < m->extension_range_count; i++) m->extension_ranges[i].options = od;
  }
  return expect(p, ";");
}

static int parse_message_reserved(P *p, pc_MessageDesc *m, Caps *c) {
  advance(p); /* reserved */
  if (p->cur.kind == kPc_Tok_String) {
    do {
      const char **n = push(p, &m->reserved_names, &m->reserved_name_count, &c->rn, sizeof *n);
      if (n == NULL) return 0;
      *n = consume_string(p, "Expected field name.", NULL);
      if (*n == NULL) return 0;
    } while (try_consume(p, ","));
  } else {
    int first = 1;
    do {
      pc_RangeDesc *r = push(p, &m->reserved_ranges, &m->reserved_range_count, &c->rr, sizeof *r);
      if (r == NULL) return 0;
      int32_t end;
      if (!consume_int(p, &r->start,
                       first ? "Expected field name or number range."
                             : "Expected field number range."))
        return 0;
      end = r->start;
      if (try_consume(p, "to")) {
        if (try_consume(p, "max")) {
          end = RANGE_MAX_SENTINEL - 1;
        } else if (!consume_int(p, &end, "Expected integer.")) {
          return 0;
        }
      }
      r->end = end + 1;
      first = 0;
    } while (try_consume(p, ","));
  }
  return expect(p, ";");
}

static int parse_message(P *p, pc_MessageDesc *m);

/* Parses a message (an enum) definition and appends it to a list of them:
 * the file's, or a message's nested ones. */
static int append_message(P *p, MsgSink to) {
  pc_MessageDesc m;
  memset(&m, 0, sizeof m);
  if (!parse_message(p, &m)) return 0;
  pc_MessageDesc *slot = push(p, to.arr, to.count, to.cap, sizeof *slot);
  if (slot == NULL) return 0;
  *slot = m;
  return 1;
}

static int append_enum(P *p, pc_EnumDesc **arr, size_t *count, size_t *cap) {
  pc_EnumDesc e;
  memset(&e, 0, sizeof e);
  if (!parse_enum(p, &e)) return 0;
  pc_EnumDesc *slot = push(p, arr, count, cap, sizeof *slot);
  if (slot == NULL) return 0;
  *slot = e;
  return 1;
}

static int parse_message_block(P *p, pc_MessageDesc *m) {
  if (++p->depth > MAX_DEPTH) return error(p, "Message nesting too deep.");
  if (!expect(p, "{")) return 0;
  Caps c;
  memset(&c, 0, sizeof c);
  Opts o;
  opts_init(&o, kMessageOpts);
  FieldSink fs = {&m->fields, &m->field_count, &c.fields};
  FieldSink xs = {&m->extensions, &m->extension_count, &c.exts};
  MsgSink ms = {&m->nested, &m->nested_count, &c.nested};
  while (!try_consume(p, "}")) {
    if (p->cur.kind == kPc_Tok_End)
      return p->failed ? 0 : error(p, "Reached end of input in message definition (missing '}').");
    if (try_consume(p, ";")) continue;
    int ok;
    if (at(p, "message")) {
      ok = append_message(p, ms);
    } else if (at(p, "enum")) {
      ok = append_enum(p, &m->enums, &m->enum_count, &c.enums);
    } else if (at(p, "extensions")) {
      ok = parse_ranges(p, m, &c);
    } else if (at(p, "reserved")) {
      ok = parse_message_reserved(p, m, &c);
    } else if (at(p, "extend")) {
      ok = parse_extend(p, xs, ms);
    } else if (at(p, "option")) {
      ok = parse_option_statement(p, &o);
    } else if (at(p, "oneof")) {
      ok = parse_oneof(p, m, &c);
    } else {
      ok = parse_field(p, fs, ms, NULL, NULL);
    }
    if (!ok) return 0;
  }
  if (p->failed) return 0;
  p->depth--;
  m->map_entry = o.bools[7] == 1;
  m->message_set_wire_format = o.bools[1] == 1;
  int32_t max_end = m->message_set_wire_format ? INT32_MAX : MAX_FIELD_NUMBER + 1;
  for (size_t i = 0; i < m->extension_range_count; i++)
    if (m->extension_ranges[i].range.end == RANGE_MAX_SENTINEL)
      m->extension_ranges[i].range.end = max_end;
  for (size_t i = 0; i < m->reserved_range_count; i++)
    if (m->reserved_ranges[i].end == RANGE_MAX_SENTINEL) m->reserved_ranges[i].end = max_end;
  return opts_finish(p, &o, &m->options);
}

/* A set of names (open addressing over arena memory), so each synthetic
 * oneof's clash check is O(1) instead of a scan of the message. */
typedef struct {
  const char **slots;
  size_t cap;
} NameSet;

/* 1 when 'name' is in the set; otherwise adds it when 'add' and returns 0. */
static int name_set_has(NameSet *set, const char *name, int add) {
  size_t i = (size_t)pc_Hash_String(name) & (set->cap - 1);
  for (; set->slots[i] != NULL; i = (i + 1) & (set->cap - 1))
    if (strcmp(set->slots[i], name) == 0) return 1;
  if (add) set->slots[i] = name;
  return 0;
}

/* protoc's GenerateSyntheticOneofs: "_name" (prefixed with X until unique)
 * for each proto3 optional field, after the real oneofs. */
static int synthetic_oneofs(P *p, pc_MessageDesc *m) {
  size_t cap = m->oneof_count, optional = 0;
  for (size_t i = 0; i < m->field_count; i++) optional += m->fields[i].proto3_optional != 0;
  if (optional == 0) return 1;
  NameSet set = {NULL, 16};
  while (set.cap < 2 * (m->field_count + m->oneof_count + optional)) set.cap *= 2;
  set.slots = pc_Arena_Calloc(p->a, set.cap * sizeof(const char *));
  if (set.slots == NULL) return oom(p);
  for (size_t k = 0; k < m->field_count; k++) name_set_has(&set, m->fields[k].name, 1);
  for (size_t k = 0; k < m->oneof_count; k++) name_set_has(&set, m->oneofs[k].name, 1);
  for (size_t i = 0; i < m->field_count; i++) {
    pc_FieldDesc *f = &m->fields[i];
    if (!f->proto3_optional) continue;
    size_t n = strlen(f->name);
    size_t extra = 1;
    char *name;
    for (;;) {
      name = pc_Arena_Malloc(p->a, n + extra + 1);
      if (name == NULL) return oom(p);
      memset(name, 'X', extra - 1);
      if (f->name[0] == '_') {
        memcpy(name + extra - 1, f->name, n + 1);
      } else {
        name[extra - 1] = '_';
        memcpy(name + extra, f->name, n + 1);
      }
      if (!name_set_has(&set, name, 1)) break;
      extra++;
    }
    pc_OneofDesc *od = push(p, &m->oneofs, &m->oneof_count, &cap, sizeof *od);
    if (od == NULL) return 0;
    od->name = name;
    m->fields[i].oneof_index = (int32_t)(m->oneof_count - 1);
  }
  return 1;
}

static int parse_message(P *p, pc_MessageDesc *m) {
  advance(p); /* message */
  pc_Token tok;
  m->name = consume_ident(p, "Expected message name.", &tok);
  if (m->name == NULL) return 0;
  m->line = tok.line;
  m->column = tok.column;
  if (!parse_message_block(p, m)) return 0;
  if (p->syntax == kPc_Syntax_Proto3) return synthetic_oneofs(p, m);
  return 1;
}

/* ---- services ------------------------------------------------------------ */

static int parse_service(P *p, pc_ServiceDesc *s) {
  advance(p); /* service */
  pc_Token tok;
  s->name = consume_ident(p, "Expected service name.", &tok);
  if (s->name == NULL) return 0;
  s->line = tok.line;
  s->column = tok.column;
  if (!expect(p, "{")) return 0;
  size_t cap = 0;
  Opts o;
  opts_init(&o, kServiceOpts);
  while (!try_consume(p, "}")) {
    if (p->cur.kind == kPc_Tok_End)
      return p->failed ? 0 : error(p, "Reached end of input in service definition (missing '}').");
    if (try_consume(p, ";")) continue;
    if (at(p, "option")) {
      if (!parse_option_statement(p, &o)) return 0;
      continue;
    }
    pc_MethodDesc *md = push(p, &s->methods, &s->method_count, &cap, sizeof *md);
    if (md == NULL || !expect(p, "rpc")) return 0;
    md->name = consume_ident(p, "Expected method name.", &tok);
    if (md->name == NULL) return 0;
    md->line = tok.line;
    md->column = tok.column;
    if (!expect(p, "(")) return 0;
    /* `stream` first is always the keyword, as in protoc: a type named
     * stream is written `(stream stream)` and means a stream of it */
    if (at(p, "stream")) {
      md->client_streaming = 1;
      advance(p);
    }
    md->type_line[0] = p->cur.line;
    md->type_column[0] = p->cur.column;
    if (!parse_user_type(p, &md->input_type) || !expect(p, ")") || !expect(p, "returns") ||
        !expect(p, "("))
      return 0;
    if (at(p, "stream")) {
      md->server_streaming = 1;
      advance(p);
    }
    md->type_line[1] = p->cur.line;
    md->type_column[1] = p->cur.column;
    if (!parse_user_type(p, &md->output_type) || !expect(p, ")")) return 0;
    Opts mo;
    opts_init(&mo, kMethodOpts);
    if (try_consume(p, "{")) {
      mo.present = 1; /* protoc creates the options for a braced body */
      while (!try_consume(p, "}")) {
        if (p->cur.kind == kPc_Tok_End)
          return p->failed ? 0 : error(p, "Reached end of input in method options (missing '}').");
        if (try_consume(p, ";")) continue;
        if (!parse_option_statement(p, &mo)) return 0;
      }
      try_consume(p, ";");
    } else if (!expect(p, ";")) {
      return 0;
    }
    if (p->failed) return 0;
    md = &s->methods[s->method_count - 1];
    if (!opts_finish(p, &mo, &md->options)) return 0;
  }
  if (p->failed) return 0;
  return opts_finish(p, &o, &s->options);
}

/* ---- files --------------------------------------------------------------- */

static int parse_file(P *p, pc_FileDesc *file) {
  size_t mcap = 0, ecap = 0, scap = 0, xcap = 0, dcap = 0, pcap = 0, wcap = 0;
  Opts o;
  opts_init(&o, kFileOpts);
  advance(p);
  p->syntax = kPc_Syntax_Proto2;
  if (at(p, "edition")) return error(p, "editions are not supported yet");
  if (at(p, "syntax")) {
    advance(p);
    if (!expect(p, "=")) return 0;
    pc_Token tok = p->cur;
    size_t n;
    char *s = consume_string(p, "Expected syntax identifier.", &n);
    if (s == NULL || !expect(p, ";")) return 0;
    if (strcmp(s, "proto3") == 0) {
      p->syntax = kPc_Syntax_Proto3;
    } else if (strcmp(s, "proto2") != 0) {
      return error_at(p, tok.line, tok.column,
                      "Unrecognized syntax identifier \"%s\".  This parser only recognizes "
                      "\"proto2\" and \"proto3\".",
                      s);
    }
  }
  file->syntax = p->syntax;
  FieldSink xs = {&file->extensions, &file->extension_count, &xcap};
  MsgSink ms = {&file->messages, &file->message_count, &mcap};
  while (p->cur.kind != kPc_Tok_End) {
    int ok = 1;
    if (try_consume(p, ";")) continue;
    if (at(p, "message")) {
      ok = append_message(p, ms);
    } else if (at(p, "enum")) {
      ok = append_enum(p, &file->enums, &file->enum_count, &ecap);
    } else if (at(p, "service")) {
      pc_ServiceDesc s;
      memset(&s, 0, sizeof s);
      ok = parse_service(p, &s);
      if (ok) {
        pc_ServiceDesc *slot = push(p, &file->services, &file->service_count, &scap, sizeof *slot);
        ok = slot != NULL;
        if (ok) *slot = s;
      }
    } else if (at(p, "extend")) {
      ok = parse_extend(p, xs, ms);
    } else if (at(p, "import")) {
      advance(p);
      int32_t index = (int32_t)file->dependency_count;
      if (at(p, "public") || at(p, "weak")) {
        int pub = at(p, "public");
        int32_t *slot = pub ? push(p, &file->public_dependencies, &file->public_dependency_count,
                                   &pcap, sizeof *slot)
                            : push(p, &file->weak_dependencies, &file->weak_dependency_count, &wcap,
                                   sizeof *slot);
        if (slot == NULL) return 0;
        *slot = index;
        advance(p);
      }
      const char **d = push(p, &file->dependencies, &file->dependency_count, &dcap, sizeof *d);
      if (d == NULL) return 0;
      *d = consume_string(p, "Expected a string naming the file to import.", NULL);
      ok = *d != NULL && expect(p, ";");
    } else if (at(p, "package")) {
      if (file->package != NULL) return error(p, "Multiple package definitions.");
      file->package_line = p->cur.line;
      file->package_column = p->cur.column;
      advance(p);
      Buf b = {0};
      for (;;) {
        if (p->cur.kind != kPc_Tok_Ident) return error(p, "Expected identifier.");
        if (!buf_put(p, &b, p->cur.text, p->cur.len)) return 0;
        advance(p);
        if (!try_consume(p, ".")) break;
        if (!buf_put(p, &b, ".", 1)) return 0;
      }
      if (!buf_put(p, &b, "", 1)) return 0;
      file->package = (const char *)b.p;
      ok = expect(p, ";");
    } else if (at(p, "option")) {
      ok = parse_option_statement(p, &o);
    } else if (at(p, "syntax") || at(p, "edition")) {
      return at(p, "edition") ? error(p, "editions are not supported yet")
                              : error(p, "Expected top-level statement (e.g. \"message\").");
    } else {
      return error(p, "Expected top-level statement (e.g. \"message\").");
    }
    if (!ok) return 0;
  }
  if (p->failed) return 0;
  return opts_finish(p, &o, &file->options);
}

pc_FileDesc *pc_ParseProto(pc_Arena *arena, const char *name, const char *src, size_t len,
                           pc_Error *err, pc_LaterError *later) {
  P p;
  memset(&p, 0, sizeof p);
  p.a = arena;
  p.err = err;
  p.later = later;
  p.name = name;
  pc_Lexer_Init(&p.lx, src, len);
  pc_Lexer_SkipBom(&p.lx);
  pc_FileDesc *file = pc_Arena_Calloc(arena, sizeof *file);
  if (file == NULL) {
    oom(&p);
    return NULL;
  }
  file->name = pc_Arena_StrDup(arena, name, strlen(name));
  if (file->name == NULL) {
    oom(&p);
    return NULL;
  }
  if (!parse_file(&p, file) || p.failed) return NULL;
  return file;
}
