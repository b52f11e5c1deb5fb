/* Compiling: the parsed tree's names resolved against the environment
 * (variables, comprehension variables, functions, type names, enum
 * constants), fields of known message types found, constant regular
 * expressions compiled; the program that results is immutable. */
#include "cel/cel_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct Scope {
  const char *name;
  size_t len;
  int32_t slot;
  const pc_MessageDef *type;
  const struct Scope *up;
} Scope;

typedef struct {
  pc_CelProgram *prog;
  const pc_CelEnv *env;
  pc_Error *err;
  pc_CelStatus status;
  int32_t next_slot;
} C;

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int
fail(C *c, pc_CelStatus status, uint32_t pos, const char *fmt, ...) {
  if (c->status != kPc_CelStatus_Ok) return 0;
  c->status = status;
  if (c->err != NULL && !c->err->set) {
    char where[32], msg[PC_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cel_position(c->prog->text, c->prog->len, pos, where, sizeof where);
    pc_Error_Set(c->err, "%s%s", where, msg);
  }
  return 0;
}

static int nomem(C *c, uint32_t pos) {
  return fail(c, kPc_CelStatus_NoMemory, pos, "out of memory");
}

static int name_is(const char *a, size_t n, const char *b) {
  return strlen(b) == n && memcmp(a, b, n) == 0;
}

/* The message type a value of a field's message type has in CEL: none for
 * the well-known types CEL converts. */
static const pc_MessageDef *cel_message_type(const pc_MessageDef *m) {
  return m != NULL && !cel_is_wkt(m) ? m : NULL;
}

static const Scope *find_scope(const Scope *s, const char *name, size_t len) {
  for (; s != NULL; s = s->up)
    if (s->len == len && memcmp(s->name, name, len) == 0) return s;
  return NULL;
}

static int find_var(const C *c, const char *name, size_t len) {
  for (size_t i = 0; i < c->env->var_count; i++)
    if (name_is(name, len, c->env->vars[i].name)) return (int)i;
  return -1;
}

/* -- Qualified names ------------------------------------------------------ */

static const char *const kTypeNames[] = {"int",   "uint", "double", "bool",      "string",
                                         "bytes", "list", "map",    "null_type", "type"};

/* The value a fully qualified name denotes, or 0. */
static int lookup_name(C *c, const char *name, size_t len, pc_CelValue *out) {
  for (size_t i = 0; i < sizeof kTypeNames / sizeof kTypeNames[0]; i++) {
    if (name_is(name, len, kTypeNames[i])) {
      *out = cel_type(kTypeNames[i]);
      return 1;
    }
  }
  if (name_is(name, len, "google.protobuf.Timestamp")) {
    *out = cel_type("google.protobuf.Timestamp");
    return 1;
  }
  if (name_is(name, len, "google.protobuf.Duration")) {
    *out = cel_type("google.protobuf.Duration");
    return 1;
  }
  const pc_Pool *pool = c->env->pool;
  if (pool == NULL || len > 1024) return 0;
  char buf[1025];
  memcpy(buf, name, len);
  buf[len] = '\0';
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, buf);
  if (m != NULL) {
    *out = cel_type(m->full_name);
    return 1;
  }
  const pc_EnumDef *e = pc_Pool_FindEnum(pool, buf);
  if (e != NULL) {
    *out = cel_type(e->full_name);
    return 1;
  }
  char *dot = strrchr(buf, '.');
  if (dot != NULL) {
    *dot = '\0';
    e = pc_Pool_FindEnum(pool, buf);
    const pc_EnumValueDef *v =
        e != NULL ? pc_EnumDef_FindByName(e, dot + 1, strlen(dot + 1)) : NULL;
    if (v != NULL) {
      *out = cel_int(v->number);
      return 1;
    }
  }
  return 0;
}

/* The names a name written in the expression may stand for, most
 * qualified first: in container "a.b", NAME is tried as a.b.NAME, a.NAME,
 * then NAME (cel-spec's name resolution); a name with a leading dot only
 * as NAME. The k-th (from 0) into 'buf'; 0 when there is none. */
static size_t candidate(const C *c, const char *name, size_t len, int absolute, int k, char *buf,
                        size_t room) {
  const char *cont = absolute || c->env->container == NULL ? "" : c->env->container;
  size_t clen = strlen(cont);
  for (int i = 0; i < k; i++) {
    if (clen == 0) return 0;
    while (clen > 0 && cont[clen - 1] != '.') clen--;
    if (clen > 0) clen--;
  }
  size_t total = clen ? clen + 1 + len : len;
  if (total >= room) return 0;
  memcpy(buf, cont, clen);
  if (clen) buf[clen] = '.';
  memcpy(buf + (clen ? clen + 1 : 0), name, len);
  buf[total] = '\0';
  return total;
}

/* Whether 'x' is a chain of selections on a name that is no comprehension
 * variable (it may be a declared one: resolve_chain finds out). */
static const cel_Node *name_root(const cel_Node *x, const Scope *scope) {
  while (x->kind == kCelNode_Select) x = x->kids[0];
  if (x->kind != kCelNode_Name) return NULL;
  if (!x->absolute && find_scope(scope, x->name, x->name_len) != NULL) return NULL;
  return x;
}

/* The dotted name of a chain of selections (up to and including 'top'). */
static size_t chain_text(const cel_Node *top, char *buf, size_t room) {
  size_t len = 0;
  for (const cel_Node *x = top;; x = x->kids[0]) {
    len += x->name_len + 1;
    if (x->kind == kCelNode_Name) break;
  }
  len--;
  if (len >= room) return 0;
  size_t at = len;
  buf[len] = '\0';
  for (const cel_Node *x = top;; x = x->kids[0]) {
    at -= x->name_len;
    memcpy(buf + at, x->name, x->name_len);
    if (x->kind == kCelNode_Name) break;
    buf[--at] = '.';
  }
  return len;
}

static cel_Node *const_node(C *c, uint32_t pos, pc_CelValue v) {
  cel_Node *x = pc_Arena_Calloc(c->prog->arena, sizeof *x);
  if (x == NULL) {
    nomem(c, pos);
    return NULL;
  }
  x->kind = kCelNode_Const;
  x->pos = pos;
  x->depth = 1;
  x->slot = -1;
  x->value = v;
  return x;
}

static cel_Node *ident_node(C *c, uint32_t pos, int slot) {
  cel_Node *x = const_node(c, pos, cel_int(0));
  if (x == NULL) return NULL;
  x->kind = kCelNode_Ident;
  x->slot = slot;
  x->type = cel_message_type(c->env->vars[slot].type);
  return x;
}

static int resolve(C *c, cel_Node **np, const Scope *scope);

/* A chain of selections rooted in a name that is no comprehension
 * variable: the longest prefix that names a declared variable, a type or
 * an enum constant (tried in the container as cel-spec says) takes its
 * place, and the selections above it are resolved as selections. */
static int resolve_chain(C *c, cel_Node **np, const Scope *scope) {
  char text[1025], buf[1025];
  const cel_Node *root = name_root(*np, scope);
  for (cel_Node **at = np;;) {
    cel_Node *x = *at, *k = NULL;
    size_t len = chain_text(x, text, sizeof text);
    for (int i = 0; len > 0 && k == NULL; i++) {
      size_t n = candidate(c, text, len, root->absolute, i, buf, sizeof buf);
      if (n == 0) break;
      int v = find_var(c, buf, n);
      pc_CelValue value;
      if (v >= 0) {
        if ((k = ident_node(c, x->pos, v)) == NULL) return 0;
      } else if (lookup_name(c, buf, n, &value)) {
        if ((k = const_node(c, x->pos, value)) == NULL) return 0;
      }
    }
    if (k != NULL && k->kind == kCelNode_Const && at != np) {
      /* a type or an enum constant has no fields: the whole name is unknown */
      len = chain_text(*np, text, sizeof text);
      return fail(c, kPc_CelStatus_Compile, root->pos, "undeclared reference to '%.*s'", (int)len,
                  text);
    }
    if (k != NULL) {
      *at = k;
      break;
    }
    if (x->kind == kCelNode_Name)
      return fail(c, kPc_CelStatus_Compile, root->pos, "undeclared reference to '%.*s'",
                  (int)root->name_len, root->name);
    at = &x->kids[0];
  }
  return resolve(c, np, scope);
}

/* -- Fields --------------------------------------------------------------- */

static int select_field(C *c, cel_Node *x) {
  const pc_MessageDef *m = x->kids[0]->type;
  if (m == NULL) return 1;
  const pc_FieldDef *f = pc_MessageDef_FindFieldByName(m, x->name, x->name_len);
  if (f == NULL)
    return fail(c, kPc_CelStatus_Compile, x->pos, "no such field '%.*s' in %s", (int)x->name_len,
                x->name, m->full_name);
  x->field = f;
  x->mtype = m;
  if (x->kind == kCelNode_Select && f->message != NULL) {
    if (f->label == kPc_Label_Repeated) {
      if (!f->is_map) x->elem = cel_message_type(f->message);
    } else {
      x->type = cel_message_type(f->message);
    }
  }
  return 1;
}

/* -- Functions ------------------------------------------------------------ */

static int find_function(C *c, cel_Node *x) {
  int how = x->receiver ? CEL_RECEIVER : CEL_GLOBAL;
  int named = 0;
  for (int i = 0; i < kCelFn_Count; i++) {
    const cel_FnInfo *f = &cel_fn_info[i];
    if (!name_is(x->name, x->name_len, f->name)) continue;
    named = 1;
    if (!(f->how & how)) {
      if (how == CEL_GLOBAL)
        return fail(c, kPc_CelStatus_Compile, x->pos, "'%s' is a method: call it as value.%s(...)",
                    f->name, f->name);
      return fail(c, kPc_CelStatus_Compile, x->pos, "'%s' is a function: call it as %s(...)",
                  f->name, f->name);
    }
    if (x->n < f->min || x->n > f->max) continue;
    x->fn = (uint16_t)i;
    return 1;
  }
  if (named)
    return fail(c, kPc_CelStatus_Compile, x->pos, "wrong number of arguments to '%.*s'",
                (int)x->name_len, x->name);
  return fail(c, kPc_CelStatus_Compile, x->pos, "undeclared reference to '%.*s'", (int)x->name_len,
              x->name);
}

static int add_regex(C *c, cel_Node *x) {
  const cel_Node *pat = x->kids[1];
  if (pat->kind != kCelNode_Const || pat->value.kind != kPc_Cel_String) return 1;
  pc_CelProgram *p = c->prog;
  if (p->regex_count == p->regex_cap) {
    size_t cap = p->regex_cap ? p->regex_cap * 2 : 4;
    pc_CelRegex **r = pc_Arena_Malloc(p->arena, cap * sizeof(pc_CelRegex *));
    if (r == NULL) return nomem(c, x->pos);
    if (p->regex_count) memcpy(r, p->regexes, p->regex_count * sizeof(pc_CelRegex *));
    p->regexes = r;
    p->regex_cap = cap;
  }
  char why[256];
  pc_CelRegex *re = pc_CelRegex_New(pat->value.v.s.data, pat->value.v.s.size, why, sizeof why);
  if (re == NULL) {
    if (why[0] == '\0') return nomem(c, pat->pos);
    return fail(c, kPc_CelStatus_Compile, pat->pos, "invalid regular expression: %s", why);
  }
  p->regexes[p->regex_count++] = re;
  x->re = re;
  return 1;
}

static int resolve_call(C *c, cel_Node **np, const Scope *scope) {
  cel_Node *x = *np;
  if (x->name == cel_fn_info[x->fn].name && (cel_fn_info[x->fn].how & CEL_OPERATOR)) {
    /* an operator, made by the parser */
    for (uint32_t i = 0; i < x->n; i++)
      if (!resolve(c, &x->kids[i], scope)) return 0;
    return 1;
  }
  const cel_Node *root = x->receiver && x->name_len < 512 ? name_root(x->kids[0], scope) : NULL;
  if (root != NULL && find_var(c, root->name, root->name_len) < 0) {
    /* a.b.f(x): a function with a qualified name (strings.quote) */
    char buf[1025];
    size_t len = chain_text(x->kids[0], buf, sizeof buf - x->name_len - 1);
    if (len > 0) {
      buf[len] = '.';
      memcpy(buf + len + 1, x->name, x->name_len);
      len += 1 + x->name_len;
      for (int i = 0; i < kCelFn_Count; i++) {
        if ((cel_fn_info[i].how & CEL_GLOBAL) && name_is(buf, len, cel_fn_info[i].name)) {
          x->name = cel_fn_info[i].name;
          x->name_len = (uint32_t)len;
          x->receiver = 0;
          x->kids++;
          x->n--;
          break;
        }
      }
    }
  }
  for (uint32_t i = 0; i < x->n; i++)
    if (!resolve(c, &x->kids[i], scope)) return 0;
  if (!find_function(c, x)) return 0;
  if (x->fn == kCelFn_MATCHES && !add_regex(c, x)) return 0;
  return 1;
}

/* -- The walk ------------------------------------------------------------- */

static int resolve(C *c, cel_Node **np, const Scope *scope) {
  cel_Node *x = *np;
  switch ((cel_NodeKind)x->kind) {
  case kCelNode_Const:
  case kCelNode_Ident: return 1;
  case kCelNode_Name: {
    const Scope *s = x->absolute ? NULL : find_scope(scope, x->name, x->name_len);
    if (s != NULL) {
      x->kind = kCelNode_Ident;
      x->slot = s->slot;
      x->type = s->type; /* the range's element type */
      return 1;
    }
    return resolve_chain(c, np, scope);
  }
  case kCelNode_Select:
    if (name_root(x, scope) != NULL) return resolve_chain(c, np, scope);
    if (!resolve(c, &x->kids[0], scope)) return 0;
    return select_field(c, x);
  case kCelNode_Has:
    if (!resolve(c, &x->kids[0], scope)) return 0;
    return select_field(c, x);
  case kCelNode_Call: return resolve_call(c, np, scope);
  case kCelNode_Struct:
    return fail(c, kPc_CelStatus_Compile, x->pos, "message literals (%s{...}) are not supported",
                x->name);
  case kCelNode_Index:
  case kCelNode_List:
  case kCelNode_Map:
  case kCelNode_Cond:
  case kCelNode_And:
  case kCelNode_Or:
    for (uint32_t i = 0; i < x->n; i++)
      if (!resolve(c, &x->kids[i], scope)) return 0;
    return 1;
  case kCelNode_Comp: {
    if (!resolve(c, &x->kids[0], scope)) return 0;
    Scope first = {x->name, x->name_len, c->next_slot, NULL, scope};
    Scope second = {x->name2, x->name2_len, c->next_slot + 1, NULL, &first};
    x->slot = c->next_slot;
    if (x->name2 != NULL) {
      second.type = x->kids[0]->elem;
      c->next_slot += 2;
    } else {
      first.type = x->kids[0]->elem;
      c->next_slot += 1;
    }
    const Scope *inner = x->name2 != NULL ? &second : &first;
    for (uint32_t i = 1; i < x->n; i++)
      if (!resolve(c, &x->kids[i], inner)) return 0;
    return 1;
  }
  }
  return 1;
}

/* -- Programs ------------------------------------------------------------- */

void pc_CelProgram_Free(pc_CelProgram *p) {
  if (p == NULL) return;
  for (size_t i = 0; i < p->regex_count; i++) pc_CelRegex_Free(p->regexes[i]);
  pc_Arena_Free(p->arena);
}

pc_CelStatus pc_CelProgram_New(const pc_CelEnv *env, const char *expr, size_t len, pc_Alloc *alloc,
                               void *ud, pc_CelProgram **out, pc_Error *err) {
  *out = NULL;
  size_t max_length = env->max_length ? env->max_length : PC_CEL_MAX_LENGTH;
  int max_depth =
      env->max_depth > 0 && env->max_depth < PC_CEL_MAX_DEPTH ? env->max_depth : PC_CEL_MAX_DEPTH;
  if (len > max_length) {
    pc_Error_Set(err, "expression too long (%zu bytes, at most %zu)", len, max_length);
    return kPc_CelStatus_Limit;
  }
  if (len > UINT32_MAX / 2) {
    pc_Error_Set(err, "expression too long (%zu bytes)", len);
    return kPc_CelStatus_Limit;
  }
  pc_Arena *a = pc_Arena_New(alloc, ud);
  if (a == NULL) {
    pc_Error_Set(err, "out of memory");
    return kPc_CelStatus_NoMemory;
  }
  pc_CelProgram *p = pc_Arena_Calloc(a, sizeof *p);
  char *text = p != NULL ? pc_Arena_StrDup(a, expr != NULL ? expr : "", len) : NULL;
  if (text == NULL) {
    pc_Arena_Free(a);
    pc_Error_Set(err, "out of memory");
    return kPc_CelStatus_NoMemory;
  }
  p->arena = a;
  p->text = text;
  p->len = len;
  p->pool = env->pool;
  cel_Parser parser = {a, text, len, max_depth, kPc_CelStatus_Ok, err};
  p->root = cel_parse(&parser);
  if (p->root == NULL) {
    pc_CelProgram_Free(p);
    return parser.status;
  }
  C c = {p, env, err, kPc_CelStatus_Ok, (int32_t)env->var_count};
  p->var_count = env->var_count;
  if (env->var_count > 0) {
    p->var_names = pc_Arena_Malloc(a, env->var_count * sizeof(const char *));
    p->var_types = pc_Arena_Malloc(a, env->var_count * sizeof(const pc_MessageDef *));
    if (p->var_names == NULL || p->var_types == NULL) {
      nomem(&c, 0);
    } else {
      for (size_t i = 0; i < env->var_count && c.status == kPc_CelStatus_Ok; i++) {
        const char *name = env->vars[i].name != NULL ? env->vars[i].name : "";
        p->var_names[i] = pc_Arena_StrDup(a, name, strlen(name));
        p->var_types[i] = env->vars[i].type;
        if (p->var_names[i] == NULL) nomem(&c, 0);
      }
    }
  }
  if (c.status == kPc_CelStatus_Ok) resolve(&c, &p->root, NULL);
  if (c.status != kPc_CelStatus_Ok) {
    pc_CelProgram_Free(p);
    return c.status;
  }
  p->slot_count = (size_t)c.next_slot;
  *out = p;
  return kPc_CelStatus_Ok;
}

const char *pc_CelProgram_Text(const pc_CelProgram *p, size_t *len) {
  if (len != NULL) *len = p->len;
  return p->text;
}

size_t pc_CelProgram_Size(const pc_CelProgram *p) {
  return pc_Arena_SpaceAllocated(p->arena);
}
