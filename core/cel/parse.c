/* The CEL lexer and parser: text to a syntax tree (cel_internal.h), macros
 * expanded on the way (has, all, exists, exists_one, map, filter and the
 * two-variable forms). Recursive descent along cel-spec's grammar; the
 * nesting of the text and the depth of the tree are bounded (pc_CelEnv
 * max_depth) so no input runs the stack out. Names are resolved later
 * (compile.c). */
#include "cel/cel_internal.h"
#include "base/utf8.h"
#include "wire/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- Tokens --------------------------------------------------------------- */

typedef enum {
  kTok_End,
  kTok_Ident,
  kTok_Int, /* 'u': magnitude */
  kTok_Uint,
  kTok_Double,
  kTok_String,
  kTok_Bytes,
  kTok_Quoted, /* `a-b.c`: a field name in backquotes ('s', 'n': the name) */
  kTok_Punct   /* 'op' */
} TokKind;

enum { kOp_LE = 256, kOp_GE, kOp_EQ, kOp_NE, kOp_And, kOp_Or };

typedef struct {
  TokKind kind;
  int op;
  uint32_t pos, len;
  uint64_t u;
  double d;
  const char *s; /* decoded string / bytes */
  size_t n;
} Tok;

typedef struct {
  cel_Parser *p;
  const char *src;
  size_t len, at;
  Tok tok;
  int level;         /* nesting of expressions being parsed */
  cel_Node *pending; /* an int literal 9223372036854775808 waiting for its '-' */
  cel_Node *literal; /* the last number literal read, while nothing follows it */
  int failed;
} P;

static int fail(P *s, pc_CelStatus status, uint32_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int fail(P *s, pc_CelStatus status, uint32_t pos, const char *fmt, ...) {
  if (s->failed) return 0;
  s->failed = 1;
  s->p->status = status;
  if (s->p->err != NULL && !s->p->err->set) {
    char where[32], msg[PC_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cel_position(s->src, s->len, pos, where, sizeof where);
    pc_Error_Set(s->p->err, "%s%s", where, msg);
  }
  return 0;
}

static int nomem(P *s) {
  return fail(s, kPc_CelStatus_NoMemory, (uint32_t)s->at, "out of memory");
}

static int is_ident_start(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_ident_char(int c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}
static int is_digit(int c) {
  return c >= '0' && c <= '9';
}
static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A string or bytes literal from s->at (at the opening quote). */
static int lex_string(P *s, Tok *t, int raw, int bytes) {
  const char *src = s->src;
  size_t n = s->len, i = s->at;
  char q = src[i];
  int triple = i + 2 < n && src[i + 1] == q && src[i + 2] == q;
  i += triple ? 3 : 1;
  /* the decoded text is never longer than the source */
  char *out = pc_Arena_Malloc(s->p->arena, n - i + 1);
  if (out == NULL) return nomem(s);
  size_t o = 0;
  for (;;) {
    if (i >= n) return fail(s, kPc_CelStatus_Syntax, t->pos, "unterminated string literal");
    char c = src[i];
    if (triple ? (c == q && i + 2 < n && src[i + 1] == q && src[i + 2] == q) : c == q) {
      i += triple ? 3 : 1;
      break;
    }
    if (!triple && (c == '\n' || c == '\r'))
      return fail(s, kPc_CelStatus_Syntax, (uint32_t)i, "newline in a string literal");
    if (c == '\0') return fail(s, kPc_CelStatus_Syntax, (uint32_t)i, "NUL byte in string literal");
    if (c != '\\' || raw) {
      out[o++] = c;
      i++;
      continue;
    }
    uint32_t epos = (uint32_t)i;
    if (++i >= n) return fail(s, kPc_CelStatus_Syntax, t->pos, "unterminated string literal");
    char e = src[i++];
    uint32_t cp;
    switch (e) {
    case '\\':
    case '?':
    case '"':
    case '\'':
    case '`': out[o++] = e; continue;
    case 'a': out[o++] = '\a'; continue;
    case 'b': out[o++] = '\b'; continue;
    case 'f': out[o++] = '\f'; continue;
    case 'n': out[o++] = '\n'; continue;
    case 'r': out[o++] = '\r'; continue;
    case 't': out[o++] = '\t'; continue;
    case 'v': out[o++] = '\v'; continue;
    case 'x':
    case 'X':
    case 'u':
    case 'U': {
      int digits = (e == 'x' || e == 'X') ? 2 : e == 'u' ? 4 : 8;
      if ((e == 'u' || e == 'U') && bytes)
        return fail(s, kPc_CelStatus_Syntax, epos, "\\%c escape in a bytes literal", e);
      cp = 0;
      for (int k = 0; k < digits; k++) {
        int h = i < n ? hexval((unsigned char)src[i]) : -1;
        if (h < 0) return fail(s, kPc_CelStatus_Syntax, epos, "invalid escape sequence");
        cp = cp * 16 + (uint32_t)h;
        i++;
      }
      break;
    }
    default:
      if (e >= '0' && e <= '3' && i + 1 < n && src[i] >= '0' && src[i] <= '7' &&
          src[i + 1] >= '0' && src[i + 1] <= '7') {
        cp = (uint32_t)((e - '0') * 64 + (src[i] - '0') * 8 + (src[i + 1] - '0'));
        i += 2;
        break;
      }
      return fail(s, kPc_CelStatus_Syntax, epos, "invalid escape sequence");
    }
    if (bytes && cp < 256) {
      out[o++] = (char)cp; /* \x and octal escapes are octets in bytes */
      continue;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return fail(s, kPc_CelStatus_Syntax, epos, "invalid code point in escape sequence");
    o += pc_Utf8_Put(cp, out + o);
  }
  out[o] = '\0';
  t->kind = bytes ? kTok_Bytes : kTok_String;
  t->s = out;
  t->n = o;
  s->at = i;
  return 1;
}

static int lex_number(P *s, Tok *t) {
  const char *src = s->src;
  size_t n = s->len, i = s->at;
  if (src[i] == '0' && i + 1 < n && (src[i + 1] == 'x' || src[i + 1] == 'X')) {
    i += 2;
    uint64_t v = 0;
    size_t start = i;
    int over = 0;
    while (i < n && hexval((unsigned char)src[i]) >= 0) {
      if (v >> 60) over = 1;
      v = v * 16 + (uint64_t)hexval((unsigned char)src[i]);
      i++;
    }
    if (i == start) return fail(s, kPc_CelStatus_Syntax, t->pos, "invalid hexadecimal literal");
    t->u = v;
    t->kind = kTok_Int;
    if (i < n && (src[i] == 'u' || src[i] == 'U')) {
      t->kind = kTok_Uint;
      i++;
    }
    if (over) return fail(s, kPc_CelStatus_Syntax, t->pos, "integer literal out of range");
    s->at = i;
    return 1;
  }
  size_t start = i;
  int is_double = 0;
  while (i < n && is_digit((unsigned char)src[i])) i++;
  if (i + 1 < n && src[i] == '.' && is_digit((unsigned char)src[i + 1])) {
    is_double = 1;
    i++;
    while (i < n && is_digit((unsigned char)src[i])) i++;
  }
  if (i < n && (src[i] == 'e' || src[i] == 'E')) {
    size_t j = i + 1;
    if (j < n && (src[j] == '+' || src[j] == '-')) j++;
    if (j < n && is_digit((unsigned char)src[j])) {
      is_double = 1;
      i = j;
      while (i < n && is_digit((unsigned char)src[i])) i++;
    }
  }
  if (is_double) {
    char buf[64];
    size_t len = i - start;
    if (len >= sizeof buf) {
      /* a long literal: strtod needs it NUL-terminated */
      char *copy = pc_Arena_StrDup(s->p->arena, src + start, len);
      if (copy == NULL) return nomem(s);
      t->d = strtod(copy, NULL);
    } else {
      memcpy(buf, src + start, len);
      buf[len] = '\0';
      t->d = strtod(buf, NULL);
    }
    t->kind = kTok_Double;
    s->at = i;
    return 1;
  }
  uint64_t v = 0;
  int over = 0;
  for (size_t k = start; k < i; k++) {
    unsigned d = (unsigned)(src[k] - '0');
    if (v > (UINT64_MAX - d) / 10) over = 1;
    v = v * 10 + d;
  }
  t->u = v;
  t->kind = kTok_Int;
  if (i < n && (src[i] == 'u' || src[i] == 'U')) {
    t->kind = kTok_Uint;
    i++;
  }
  if (over) return fail(s, kPc_CelStatus_Syntax, t->pos, "integer literal out of range");
  s->at = i;
  return 1;
}

/* The next token into s->tok. */
static int next(P *s) {
  const char *src = s->src;
  size_t n = s->len;
  Tok *t = &s->tok;
  for (;;) {
    while (s->at < n && (src[s->at] == ' ' || src[s->at] == '\t' || src[s->at] == '\n' ||
                         src[s->at] == '\r' || src[s->at] == '\f'))
      s->at++;
    if (s->at + 1 < n && src[s->at] == '/' && src[s->at + 1] == '/') {
      while (s->at < n && src[s->at] != '\n' && src[s->at] != '\r') s->at++;
      continue;
    }
    break;
  }
  memset(t, 0, sizeof *t);
  t->pos = (uint32_t)s->at;
  if (s->at >= n) {
    t->kind = kTok_End;
    return 1;
  }
  size_t i = s->at;
  unsigned char c = (unsigned char)src[i];
  if (is_ident_start(c)) {
    /* string prefixes: r, R, b, B, and b or B then r or R */
    int raw = 0, bytes = 0;
    size_t j = i;
    if (src[j] == 'b' || src[j] == 'B') {
      bytes = 1;
      j++;
    }
    if (j < n && (src[j] == 'r' || src[j] == 'R')) {
      raw = 1;
      j++;
    }
    if (j > i && j < n && (src[j] == '"' || src[j] == '\'')) {
      s->at = j;
      return lex_string(s, t, raw, bytes);
    }
    while (i < n && is_ident_char((unsigned char)src[i])) i++;
    t->kind = kTok_Ident;
    t->s = src + s->at;
    t->n = i - s->at;
    s->at = i;
    return 1;
  }
  if (is_digit(c) || (c == '.' && i + 1 < n && is_digit((unsigned char)src[i + 1])))
    return lex_number(s, t);
  if (c == '"' || c == '\'') return lex_string(s, t, 0, 0);
  if (c == '`') {
    /* cel-spec's quoted field names: letters, digits and _ . - / space */
    size_t j = i + 1;
    while (j < n && (is_ident_char((unsigned char)src[j]) || src[j] == '.' || src[j] == '-' ||
                     src[j] == '/' || src[j] == ' '))
      j++;
    if (j >= n || src[j] != '`' || j == i + 1)
      return fail(s, kPc_CelStatus_Syntax, t->pos, "invalid quoted field name");
    t->kind = kTok_Quoted;
    t->s = src + i + 1;
    t->n = j - i - 1;
    s->at = j + 1;
    return 1;
  }
  static const struct {
    const char *text;
    int op;
  } two[] = {{"<=", kOp_LE}, {">=", kOp_GE},  {"==", kOp_EQ},
             {"!=", kOp_NE}, {"&&", kOp_And}, {"||", kOp_Or}};
  for (size_t k = 0; k < sizeof two / sizeof two[0]; k++) {
    if (i + 1 < n && src[i] == two[k].text[0] && src[i + 1] == two[k].text[1]) {
      t->kind = kTok_Punct;
      t->op = two[k].op;
      s->at = i + 2;
      return 1;
    }
  }
  if (strchr("()[]{}.,:?!-+*/%<>", c) != NULL && c != '\0') {
    t->kind = kTok_Punct;
    t->op = c;
    s->at = i + 1;
    return 1;
  }
  if (c == '=' || c == '&' || c == '|')
    return fail(s, kPc_CelStatus_Syntax, t->pos, "unexpected '%c' (did you mean '%c%c'?)", c, c, c);
  if (c < 0x20 || c >= 0x7F) return fail(s, kPc_CelStatus_Syntax, t->pos, "unexpected character");
  return fail(s, kPc_CelStatus_Syntax, t->pos, "unexpected '%c'", c);
}

static int is_op(const P *s, int op) {
  return s->tok.kind == kTok_Punct && s->tok.op == op;
}

static int is_word(const P *s, const char *w) {
  size_t n = strlen(w);
  return s->tok.kind == kTok_Ident && s->tok.n == n && memcmp(s->tok.s, w, n) == 0;
}

static const char *describe(const Tok *t, char *buf, size_t room) {
  switch (t->kind) {
  case kTok_End: return "the end of the expression";
  case kTok_Ident: snprintf(buf, room, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
  case kTok_Int:
  case kTok_Uint:
  case kTok_Double: return "a number";
  case kTok_String: return "a string";
  case kTok_Bytes: return "a bytes literal";
  case kTok_Quoted: return "a quoted field name";
  default: break;
  }
  static const char *const ops[] = {"<=", ">=", "==", "!=", "&&", "||"};
  if (t->op >= kOp_LE)
    snprintf(buf, room, "'%s'", ops[t->op - kOp_LE]);
  else
    snprintf(buf, room, "'%c'", t->op);
  return buf;
}

static int expect(P *s, int op, const char *what) {
  if (is_op(s, op)) return next(s);
  char buf[64];
  return fail(s, kPc_CelStatus_Syntax, s->tok.pos, "expected %s, found %s", what,
              describe(&s->tok, buf, sizeof buf));
}

static const char *const kReserved[] = {"as",   "break",     "const", "continue", "else",   "false",
                                        "for",  "function",  "if",    "import",   "in",     "let",
                                        "loop", "namespace", "null",  "package",  "return", "true",
                                        "var",  "void",      "while"};

static int reserved(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof kReserved / sizeof kReserved[0]; i++)
    if (strlen(kReserved[i]) == n && memcmp(kReserved[i], s, n) == 0) return 1;
  return 0;
}

/* After a '.', only the words that are tokens of the grammar are refused
 * (cel-spec's conformance: `{'as': 1}.as` is 1, `a.while()` a call). */
static int keyword(const char *s, size_t n) {
  static const char *const kKeywords[] = {"false", "in", "null", "true"};
  for (size_t i = 0; i < sizeof kKeywords / sizeof kKeywords[0]; i++)
    if (strlen(kKeywords[i]) == n && memcmp(kKeywords[i], s, n) == 0) return 1;
  return 0;
}

/* -- Nodes ---------------------------------------------------------------- */

static cel_Node *node(P *s, cel_NodeKind kind, uint32_t pos, uint32_t nkids) {
  cel_Node *x = pc_Arena_Calloc(s->p->arena, sizeof *x);
  if (x == NULL) {
    nomem(s);
    return NULL;
  }
  x->kind = (uint8_t)kind;
  x->pos = pos;
  x->slot = -1;
  x->depth = 1;
  if (nkids > 0) {
    x->kids = pc_Arena_Calloc(s->p->arena, nkids * sizeof(cel_Node *));
    if (x->kids == NULL) {
      nomem(s);
      return NULL;
    }
  }
  x->n = nkids;
  return x;
}

/* Sets a node's depth from its kids; refuses a tree deeper than allowed. */
static cel_Node *done(P *s, cel_Node *x) {
  if (x == NULL) return NULL;
  unsigned d = 0;
  for (uint32_t i = 0; i < x->n; i++)
    if (x->kids[i]->depth > d) d = x->kids[i]->depth;
  if (d + 1 > (unsigned)s->p->max_depth) {
    fail(s, kPc_CelStatus_Limit, x->pos, "expression nested too deeply (more than %d levels)",
         s->p->max_depth);
    return NULL;
  }
  x->depth = (uint16_t)(d + 1);
  return x;
}

static cel_Node *call(P *s, int fn, uint32_t pos, cel_Node *a, cel_Node *b) {
  cel_Node *x = node(s, kCelNode_Call, pos, b != NULL ? 2 : 1);
  if (x == NULL) return NULL;
  x->fn = (uint16_t)fn;
  x->name = cel_fn_info[fn].name;
  x->name_len = (uint32_t)strlen(x->name);
  x->kids[0] = a;
  if (b != NULL) x->kids[1] = b;
  return done(s, x);
}

static cel_Node *binary(P *s, cel_NodeKind kind, uint32_t pos, cel_Node *a, cel_Node *b) {
  cel_Node *x = node(s, kind, pos, 2);
  if (x == NULL) return NULL;
  x->kids[0] = a;
  x->kids[1] = b;
  return done(s, x);
}

/* A growing list of nodes (arguments, elements). */
typedef struct {
  cel_Node **items;
  uint32_t n, cap;
} Nodes;

static int push(P *s, Nodes *v, cel_Node *x) {
  if (v->n == v->cap) {
    uint32_t cap = v->cap ? v->cap * 2 : 8;
    cel_Node **items = pc_Arena_Malloc(s->p->arena, cap * sizeof(cel_Node *));
    if (items == NULL) return nomem(s);
    if (v->n) memcpy(items, v->items, v->n * sizeof(cel_Node *));
    v->items = items;
    v->cap = cap;
  }
  v->items[v->n++] = x;
  return 1;
}

static cel_Node *expr(P *s);

/* -- Macros --------------------------------------------------------------- */

static int simple_name(const cel_Node *x) {
  return x->kind == kCelNode_Name && !x->absolute;
}

/* target.name(args) as a macro, or NULL with *is_macro 0 when it is a plain
 * call. */
static cel_Node *macro(P *s, cel_Node *target, const char *name, size_t len, uint32_t pos,
                       Nodes *args, int *is_macro) {
  *is_macro = 0;
#define IS(w) (len == sizeof(w) - 1 && memcmp(name, w, len) == 0)
  if (target == NULL) {
    if (!IS("has") || args->n != 1) return NULL;
    *is_macro = 1;
    cel_Node *sel = args->items[0];
    if (sel->kind != kCelNode_Select) {
      fail(s, kPc_CelStatus_Syntax, sel->pos, "invalid argument to has() macro");
      return NULL;
    }
    sel->kind = kCelNode_Has;
    sel->pos = pos;
    return sel;
  }
  int kind = -1, vars = 1;
  uint32_t n = args->n;
  if ((IS("all") || IS("exists") || IS("exists_one") || IS("existsOne")) && (n == 2 || n == 3)) {
    vars = (int)n - 1;
    if (IS("all"))
      kind = vars == 1 ? kCelComp_All : kCelComp_All2;
    else if (IS("exists"))
      kind = vars == 1 ? kCelComp_Exists : kCelComp_Exists2;
    else
      kind = vars == 1 ? kCelComp_ExistsOne : kCelComp_ExistsOne2;
  } else if (IS("map") && (n == 2 || n == 3)) {
    kind = n == 2 ? kCelComp_Map : kCelComp_MapFilter;
  } else if (IS("filter") && n == 2) {
    kind = kCelComp_Filter;
  } else if ((IS("transformList") || IS("transformMap")) && (n == 3 || n == 4)) {
    kind = IS("transformList") ? kCelComp_TransformList : kCelComp_TransformMap;
    vars = 2;
  }
#undef IS
  if (kind < 0) return NULL;
  *is_macro = 1;
  for (int v = 0; v < vars; v++) {
    if (!simple_name(args->items[v])) {
      fail(s, kPc_CelStatus_Syntax, args->items[v]->pos, "argument must be a simple name");
      return NULL;
    }
  }
  cel_Node *x = node(s, kCelNode_Comp, pos, 1 + n - (uint32_t)vars);
  if (x == NULL) return NULL;
  x->comp = (uint8_t)kind;
  x->kids[0] = target;
  for (uint32_t k = (uint32_t)vars; k < n; k++) x->kids[1 + k - vars] = args->items[k];
  x->name = args->items[0]->name;
  x->name_len = args->items[0]->name_len;
  if (vars == 2) {
    x->name2 = args->items[1]->name;
    x->name2_len = args->items[1]->name_len;
    if (x->name_len == x->name2_len && memcmp(x->name, x->name2, x->name_len) == 0) {
      fail(s, kPc_CelStatus_Syntax, args->items[1]->pos, "duplicate variable name '%.*s'",
           (int)x->name_len, x->name);
      return NULL;
    }
  }
  return done(s, x);
}

/* -- Grammar -------------------------------------------------------------- */

/* "(" [ExprList] ")" after a function name; the '(' is current. */
static int arguments(P *s, Nodes *args) {
  if (!next(s)) return 0;
  if (is_op(s, ')')) return next(s);
  for (;;) {
    cel_Node *a = expr(s);
    if (a == NULL || !push(s, args, a)) return 0;
    if (is_op(s, ',')) {
      if (!next(s)) return 0;
      continue;
    }
    return expect(s, ')', "',' or ')'");
  }
}

static cel_Node *make_call(P *s, cel_Node *target, const char *name, size_t len, int absolute,
                           uint32_t pos, Nodes *args) {
  int is_macro;
  if (!absolute) {
    cel_Node *m = macro(s, target, name, len, pos, args, &is_macro);
    if (is_macro || s->failed) return m;
  }
  cel_Node *x = node(s, kCelNode_Call, pos, args->n + (target != NULL));
  if (x == NULL) return NULL;
  x->name = name;
  x->name_len = (uint32_t)len;
  x->absolute = (uint8_t)absolute;
  x->receiver = target != NULL;
  uint32_t k = 0;
  if (target != NULL) x->kids[k++] = target;
  for (uint32_t i = 0; i < args->n; i++) x->kids[k++] = args->items[i];
  return done(s, x);
}

static cel_Node *constant(P *s, uint32_t pos, pc_CelValue v) {
  cel_Node *x = node(s, kCelNode_Const, pos, 0);
  if (x != NULL) x->value = v;
  return x;
}

/* '{' after a qualified name: a message literal Name{field: value, ...}. */
static cel_Node *message_literal(P *s, cel_Node *type_name) {
  uint32_t pos = s->tok.pos;
  /* the type's name from the chain of selections, written from its end */
  size_t len = 0;
  for (const cel_Node *x = type_name;; x = x->kids[0]) {
    len += x->name_len + 1;
    if (x->kind == kCelNode_Name) {
      len -= !x->absolute;
      break;
    }
  }
  char *name = pc_Arena_Malloc(s->p->arena, len + 1);
  if (name == NULL) {
    nomem(s);
    return NULL;
  }
  name[len] = '\0';
  size_t at = len;
  for (const cel_Node *x = type_name;; x = x->kids[0]) {
    at -= x->name_len;
    memcpy(name + at, x->name, x->name_len);
    if (x->kind == kCelNode_Name) {
      if (x->absolute) name[--at] = '.';
      break;
    }
    name[--at] = '.';
  }
  if (!next(s)) return NULL;
  Nodes vals = {0};
  const char **fields = NULL;
  size_t nf = 0, cap = 0;
  while (!is_op(s, '}')) {
    if (!(s->tok.kind == kTok_Quoted ||
          (s->tok.kind == kTok_Ident && !keyword(s->tok.s, s->tok.n)))) {
      char buf[64];
      fail(s, kPc_CelStatus_Syntax, s->tok.pos, "expected a field name, found %s",
           describe(&s->tok, buf, sizeof buf));
      return NULL;
    }
    if (nf == cap) {
      cap = cap ? cap * 2 : 8;
      const char **f = pc_Arena_Malloc(s->p->arena, cap * sizeof *f);
      if (f == NULL) {
        nomem(s);
        return NULL;
      }
      if (nf) memcpy(f, fields, nf * sizeof *f);
      fields = f;
    }
    fields[nf] = pc_Arena_StrDup(s->p->arena, s->tok.s, s->tok.n);
    if (fields[nf] == NULL) {
      nomem(s);
      return NULL;
    }
    nf++;
    if (!next(s) || !expect(s, ':', "':'")) return NULL;
    cel_Node *v = expr(s);
    if (v == NULL || !push(s, &vals, v)) return NULL;
    if (is_op(s, ',')) {
      if (!next(s)) return NULL;
      continue;
    }
    if (!is_op(s, '}')) {
      expect(s, '}', "',' or '}'");
      return NULL;
    }
  }
  if (!next(s)) return NULL;
  cel_Node *x = node(s, kCelNode_Struct, pos, vals.n);
  if (x == NULL) return NULL;
  x->name = name;
  x->name_len = (uint32_t)len;
  x->fields = fields;
  for (uint32_t i = 0; i < vals.n; i++) x->kids[i] = vals.items[i];
  return done(s, x);
}

static int qualified_name(const cel_Node *x) {
  while (x->kind == kCelNode_Select) x = x->kids[0];
  return x->kind == kCelNode_Name;
}

static cel_Node *primary(P *s) {
  Tok t = s->tok;
  char buf[64];
  switch (t.kind) {
  case kTok_Int:
    if (!next(s)) return NULL;
    if (t.u > (uint64_t)INT64_MAX) {
      if (t.u == (uint64_t)INT64_MAX + 1) {
        /* only as the operand of '-' */
        cel_Node *x = constant(s, t.pos, cel_int(INT64_MIN));
        s->pending = x;
        return x;
      }
      fail(s, kPc_CelStatus_Syntax, t.pos, "integer literal out of range");
      return NULL;
    }
    return s->literal = constant(s, t.pos, cel_int((int64_t)t.u));
  case kTok_Uint: return next(s) ? constant(s, t.pos, cel_uint(t.u)) : NULL;
  case kTok_Double: return next(s) ? (s->literal = constant(s, t.pos, cel_double(t.d))) : NULL;
  case kTok_String: return next(s) ? constant(s, t.pos, cel_string(t.s, t.n)) : NULL;
  case kTok_Bytes: return next(s) ? constant(s, t.pos, cel_bytes(t.s, t.n)) : NULL;
  case kTok_End:
    fail(s, kPc_CelStatus_Syntax, t.pos, "unexpected end of the expression");
    return NULL;
  case kTok_Ident:
    if (is_word(s, "true") || is_word(s, "false")) {
      int b = is_word(s, "true");
      return next(s) ? constant(s, t.pos, cel_bool(b)) : NULL;
    }
    if (is_word(s, "null")) {
      pc_CelValue v;
      memset(&v, 0, sizeof v);
      v.kind = kPc_Cel_Null;
      return next(s) ? constant(s, t.pos, v) : NULL;
    }
    break;
  default: break;
  }
  int absolute = 0;
  if (is_op(s, '.')) {
    absolute = 1;
    if (!next(s)) return NULL;
    t = s->tok;
  }
  if (t.kind == kTok_Ident) {
    if (reserved(t.s, t.n)) {
      fail(s, kPc_CelStatus_Syntax, t.pos, "reserved identifier '%.*s'", (int)t.n, t.s);
      return NULL;
    }
    if (!next(s)) return NULL;
    if (is_op(s, '(')) {
      Nodes args = {0};
      if (!arguments(s, &args)) return NULL;
      return make_call(s, NULL, t.s, t.n, absolute, t.pos, &args);
    }
    cel_Node *x = node(s, kCelNode_Name, t.pos, 0);
    if (x == NULL) return NULL;
    x->name = t.s;
    x->name_len = (uint32_t)t.n;
    x->absolute = (uint8_t)absolute;
    return x;
  }
  if (absolute) {
    fail(s, kPc_CelStatus_Syntax, t.pos, "expected an identifier after '.', found %s",
         describe(&t, buf, sizeof buf));
    return NULL;
  }
  if (is_op(s, '(')) {
    if (!next(s)) return NULL;
    cel_Node *x = expr(s);
    if (x == NULL || !expect(s, ')', "')'")) return NULL;
    s->literal = NULL; /* -(1) is not the literal -1 */
    return x;
  }
  if (is_op(s, '[') || is_op(s, '{')) {
    int map = is_op(s, '{');
    int close = map ? '}' : ']';
    Nodes items = {0};
    if (!next(s)) return NULL;
    while (!is_op(s, close)) {
      cel_Node *k = expr(s);
      if (k == NULL || !push(s, &items, k)) return NULL;
      if (map) {
        if (!expect(s, ':', "':'")) return NULL;
        cel_Node *v = expr(s);
        if (v == NULL || !push(s, &items, v)) return NULL;
      }
      if (is_op(s, ',')) {
        if (!next(s)) return NULL;
        continue;
      }
      if (!is_op(s, close)) {
        expect(s, close, map ? "',' or '}'" : "',' or ']'");
        return NULL;
      }
    }
    if (!next(s)) return NULL;
    cel_Node *x = node(s, map ? kCelNode_Map : kCelNode_List, t.pos, items.n);
    if (x == NULL) return NULL;
    for (uint32_t i = 0; i < items.n; i++) x->kids[i] = items.items[i];
    return done(s, x);
  }
  fail(s, kPc_CelStatus_Syntax, t.pos, "unexpected %s", describe(&t, buf, sizeof buf));
  return NULL;
}

static cel_Node *member(P *s) {
  cel_Node *x = primary(s);
  while (x != NULL) {
    if (is_op(s, '.')) {
      if (!next(s)) return NULL;
      Tok t = s->tok;
      if (t.kind != kTok_Ident && t.kind != kTok_Quoted) {
        char buf[64];
        fail(s, kPc_CelStatus_Syntax, t.pos, "expected a field or method name after '.', found %s",
             describe(&t, buf, sizeof buf));
        return NULL;
      }
      if (t.kind == kTok_Ident && keyword(t.s, t.n)) {
        fail(s, kPc_CelStatus_Syntax, t.pos, "reserved identifier '%.*s'", (int)t.n, t.s);
        return NULL;
      }
      if (!next(s)) return NULL;
      if (is_op(s, '(') && t.kind == kTok_Ident) {
        Nodes args = {0};
        if (!arguments(s, &args)) return NULL;
        x = make_call(s, x, t.s, t.n, 0, t.pos, &args);
        continue;
      }
      cel_Node *sel = node(s, kCelNode_Select, t.pos, 1);
      if (sel == NULL) return NULL;
      sel->kids[0] = x;
      sel->name = t.s;
      sel->name_len = (uint32_t)t.n;
      x = done(s, sel);
    } else if (is_op(s, '[')) {
      uint32_t pos = s->tok.pos;
      if (!next(s)) return NULL;
      cel_Node *i = expr(s);
      if (i == NULL || !expect(s, ']', "']'")) return NULL;
      x = binary(s, kCelNode_Index, pos, x, i);
    } else if (is_op(s, '{') && qualified_name(x)) {
      x = message_literal(s, x);
    } else {
      break;
    }
  }
  return x;
}

static cel_Node *unary(P *s) {
  int nots = 0, negs = 0;
  uint32_t pos = s->tok.pos;
  if (is_op(s, '!')) {
    while (is_op(s, '!')) {
      nots++;
      if (!next(s)) return NULL;
    }
  } else if (is_op(s, '-')) {
    while (is_op(s, '-')) {
      negs++;
      if (!next(s)) return NULL;
    }
  }
  cel_Node *x = member(s);
  if (x == NULL) return NULL;
  if (s->pending != NULL) {
    if (s->pending != x || negs == 0) {
      fail(s, kPc_CelStatus_Syntax, s->pending->pos, "integer literal out of range");
      return NULL;
    }
    s->pending = NULL;
    negs--; /* the literal is -9223372036854775808 */
  } else if (negs > 0 && x == s->literal) {
    /* fold the innermost '-' into the literal */
    if (x->value.kind == kPc_Cel_Int)
      x->value.v.i = -x->value.v.i;
    else
      x->value.v.d = -x->value.v.d;
    x->pos = pos + (uint32_t)(negs - 1);
    negs--;
  }
  while (nots-- > 0 && x != NULL) x = call(s, kCelFn_NOT, pos + (uint32_t)nots, x, NULL);
  while (negs-- > 0 && x != NULL) x = call(s, kCelFn_NEG, pos + (uint32_t)negs, x, NULL);
  return x;
}

static cel_Node *multiplication(P *s) {
  cel_Node *x = unary(s);
  while (x != NULL && (is_op(s, '*') || is_op(s, '/') || is_op(s, '%'))) {
    int op = s->tok.op;
    uint32_t pos = s->tok.pos;
    if (!next(s)) return NULL;
    cel_Node *y = unary(s);
    if (y == NULL) return NULL;
    x = call(s, op == '*' ? kCelFn_MUL : op == '/' ? kCelFn_DIV : kCelFn_MOD, pos, x, y);
  }
  return x;
}

static cel_Node *addition(P *s) {
  cel_Node *x = multiplication(s);
  while (x != NULL && (is_op(s, '+') || is_op(s, '-'))) {
    int op = s->tok.op;
    uint32_t pos = s->tok.pos;
    if (!next(s)) return NULL;
    cel_Node *y = multiplication(s);
    if (y == NULL) return NULL;
    x = call(s, op == '+' ? kCelFn_ADD : kCelFn_SUB, pos, x, y);
  }
  return x;
}

static int relop(const P *s) {
  if (s->tok.kind == kTok_Punct) {
    switch (s->tok.op) {
    case '<': return kCelFn_LT;
    case '>': return kCelFn_GT;
    case kOp_LE: return kCelFn_LE;
    case kOp_GE: return kCelFn_GE;
    case kOp_EQ: return kCelFn_EQ;
    case kOp_NE: return kCelFn_NE;
    default: return -1;
    }
  }
  return is_word(s, "in") ? kCelFn_IN : -1;
}

static cel_Node *relation(P *s) {
  cel_Node *x = addition(s);
  int fn;
  while (x != NULL && (fn = relop(s)) >= 0) {
    uint32_t pos = s->tok.pos;
    if (!next(s)) return NULL;
    cel_Node *y = addition(s);
    if (y == NULL) return NULL;
    x = call(s, fn, pos, x, y);
  }
  return x;
}

/* A left-associative chain of 'operand's joined by operator 'op' into
 * nodes of 'kind' (&& over relations, || over conjunctions). */
static cel_Node *chain(P *s, cel_Node *(*operand)(P *), int op, cel_NodeKind kind) {
  cel_Node *x = operand(s);
  while (x != NULL && is_op(s, op)) {
    uint32_t pos = s->tok.pos;
    if (!next(s)) return NULL;
    cel_Node *y = operand(s);
    if (y == NULL) return NULL;
    x = binary(s, kind, pos, x, y);
  }
  return x;
}

static cel_Node *conjunction(P *s) {
  return chain(s, relation, kOp_And, kCelNode_And);
}

static cel_Node *disjunction(P *s) {
  return chain(s, conjunction, kOp_Or, kCelNode_Or);
}

static cel_Node *expr(P *s) {
  if (++s->level > s->p->max_depth) {
    fail(s, kPc_CelStatus_Limit, s->tok.pos, "expression nested too deeply (more than %d levels)",
         s->p->max_depth);
    return NULL;
  }
  cel_Node *c = disjunction(s);
  if (c != NULL && is_op(s, '?')) {
    uint32_t pos = s->tok.pos;
    if (!next(s)) return NULL;
    cel_Node *a = disjunction(s);
    if (a == NULL || !expect(s, ':', "':'")) return NULL;
    cel_Node *b = expr(s);
    if (b == NULL) return NULL;
    cel_Node *x = node(s, kCelNode_Cond, pos, 3);
    if (x == NULL) return NULL;
    x->kids[0] = c;
    x->kids[1] = a;
    x->kids[2] = b;
    c = done(s, x);
  }
  s->level--;
  return c;
}

cel_Node *cel_parse(cel_Parser *p) {
  P s;
  memset(&s, 0, sizeof s);
  s.p = p;
  s.src = p->text;
  s.len = p->len;
  p->status = kPc_CelStatus_Ok;
  if (!pc_Wire_ValidUtf8((const uint8_t *)p->text, p->len)) {
    size_t i = 0;
    while (i < p->len) {
      size_t start = i;
      if (cel_utf8_next(p->text, p->len, &i) == 0xFFFD &&
          !pc_Wire_ValidUtf8((const uint8_t *)p->text + start, i - start)) {
        i = start;
        break;
      }
    }
    fail(&s, kPc_CelStatus_Syntax, (uint32_t)i, "invalid UTF-8");
    return NULL;
  }
  if (!next(&s)) return NULL;
  cel_Node *root = expr(&s);
  if (root != NULL && s.tok.kind != kTok_End) {
    char buf[64];
    fail(&s, kPc_CelStatus_Syntax, s.tok.pos, "unexpected %s", describe(&s.tok, buf, sizeof buf));
    return NULL;
  }
  return s.failed ? NULL : root;
}
