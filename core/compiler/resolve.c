/* Name resolution, validation and custom option interpretation; see
 * compiler/resolve_internal.h. Follows protoc's descriptor.cc (DescriptorBuilder and
 * OptionInterpreter): same lookups, same error texts. */
#include "base/hash.h"
#include "compiler/resolve_internal.h"
#include "message/message.h"
#include "schema/def.h"
#include "text/text.h"
#include "wire/encode.h"
#include "wire/wire.h"

#include "compiler/parse_internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELD_NUMBER 536870911
#define MAX_DEPTH        64
/* Aggregate option values nest this deep at most (protoc sets no limit;
 * this one bounds core/text's recursion to a small stack). */
#define MAX_TEXT_DEPTH   300

typedef enum {
  kSymPackage = 1,
  kSymMessage,
  kSymEnum,
  kSymEnumValue,
  kSymField,
  kSymOneof,
  kSymService,
  kSymMethod
} SymKind;

typedef struct {
  const char *name; /* full name, no leading dot; a package's is a prefix of the
                       file's package, not NUL-terminated at 'len' */
  size_t len;
  uint64_t hash;
  SymKind kind;
  int file;          /* index into deps; dep_count means the file itself */
  const void *desc;  /* pc_MessageDesc, pc_EnumDesc, pc_FieldDesc, ... */
  const void *owner; /* enum of a value; message of a field */
} Sym;

/* An extension by (extendee, number), with its full name for errors. */
struct ExtEntry {
  const pc_FieldDesc *f; /* NULL: free */
  const char *name;
  size_t len;
};

typedef struct {
  pc_Arena *a;
  pc_Error *err;
  pc_FileDesc *file;
  const pc_FileDesc *const *deps;
  size_t ndeps;
  Sym *slots;
  size_t cap, count;
  unsigned char *visible; /* per file index */
  int failed;
  int fail_line, fail_col; /* where the error is, for ordering it against a parser's later one */
  int in_file_options;     /* interpreting the file's own options */
  /* details of the last failed lookup, for protoc's error texts */
  const char *undefined_resolved; /* the full name tried, or NULL */
  int undeclared_file;
  const char *undeclared_name; /* 'undeclared_len' bytes */
  size_t undeclared_len;
  /* scratch of lookup(): each enclosing scope's length and hash */
  struct Scope *scopes;
  size_t scope_cap;
  /* (extendee, number) of the dependencies' extensions and of the file's
   * extensions checked so far, hashed for extension_clash */
  struct ExtEntry *exts;
  size_t ext_cap, ext_count;
  pc_Pool *scratch; /* definitions for aggregate option values, made on first use */
} R;

/* ---- errors ---------------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int
fail_at(R *r, int line, int col, const char *fmt, ...) {
  if (!r->failed) {
    va_list ap;
    va_start(ap, fmt);
    pc_Error_SetAtV(r->err, r->file->name, line, col, fmt, ap);
    va_end(ap);
    r->fail_line = line;
    r->fail_col = col;
  }
  r->failed = 1;
  return 0;
}

static int oom(R *r) {
  if (!r->failed) pc_Error_Set(r->err, "out of memory");
  r->failed = 1;
  return 0;
}

/* ---- symbol table ---------------------------------------------------------- */

/* A dotted name's hash is its scope's continued (base/hash.h), so every
 * prefix of a name is hashed in one pass over it. */
static uint64_t hash(const char *s, size_t n) {
  return pc_Hash_More(PC_HASH_START, s, n);
}

/* The symbol named 'scope' "." 'name' ('name' alone when 'slen' is 0),
 * 'h' the hash of 'scope', without writing the name out. */
static Sym *find_in(const R *r, const char *scope, size_t slen, uint64_t h, const char *name,
                    size_t nlen) {
  if (r->cap == 0) return NULL;
  size_t len = nlen, at = 0;
  if (slen > 0) {
    h = pc_Hash_More(h, ".", 1);
    len += slen + 1;
    at = slen + 1;
  }
  h = pc_Hash_More(h, name, nlen);
  for (size_t i = (size_t)h & (r->cap - 1); r->slots[i].name != NULL; i = (i + 1) & (r->cap - 1)) {
    const Sym *s = &r->slots[i];
    if (s->hash == h && s->len == len && memcmp(s->name + at, name, nlen) == 0 &&
        (slen == 0 || (memcmp(s->name, scope, slen) == 0 && s->name[slen] == '.')))
      return &r->slots[i];
  }
  return NULL;
}

static Sym *find(const R *r, const char *name, size_t len) {
  return find_in(r, NULL, 0, PC_HASH_START, name, len);
}

static int grow_table(R *r) {
  size_t nc = r->cap ? r->cap * 2 : 256;
  Sym *ns = pc_Arena_Calloc(r->a, nc * sizeof *ns);
  if (ns == NULL) return oom(r);
  for (size_t k = 0; k < r->cap; k++) {
    if (r->slots[k].name == NULL) continue;
    size_t i = (size_t)r->slots[k].hash & (nc - 1);
    while (ns[i].name != NULL) i = (i + 1) & (nc - 1);
    ns[i] = r->slots[k];
  }
  r->slots = ns;
  r->cap = nc;
  return 1;
}

static int file_index_self(const R *r) {
  return (int)r->ndeps;
}

static const pc_FileDesc *file_of(const R *r, int index) {
  return index == file_index_self(r) ? r->file : r->deps[index];
}

/* Adds the 'len' bytes at 'name' (in the arena), of hash 'h'; for the
 * file itself, a clash is protoc's "already defined" error at 'line':'col'. */
static int add_sym_hashed(R *r, const char *name, size_t len, uint64_t h, SymKind kind, int file,
                          const void *desc, const void *owner, int line, int col) {
  if ((r->count + 1) * 2 > r->cap && !grow_table(r)) return 0;
  size_t i = (size_t)h & (r->cap - 1);
  Sym *s = NULL;
  for (; r->slots[i].name != NULL; i = (i + 1) & (r->cap - 1)) {
    if (r->slots[i].hash == h && r->slots[i].len == len &&
        memcmp(r->slots[i].name, name, len) == 0) {
      s = &r->slots[i];
      break;
    }
  }
  if (s != NULL) {
    if (file != file_index_self(r)) return 1; /* deps were validated; first wins */
    if (kind == kSymPackage) {
      if (s->kind == kSymPackage) return 1;
      return fail_at(r, line, col,
                     "\"%.*s\" is already defined (as something other than a package) in file "
                     "\"%s\".",
                     (int)len, name, file_of(r, s->file)->name);
    }
    if (s->file != file) {
      return fail_at(r, line, col, "\"%s\" is already defined in file \"%s\".", name,
                     file_of(r, s->file)->name);
    }
    const char *dot = strrchr(name, '.');
    if (dot == NULL) return fail_at(r, line, col, "\"%s\" is already defined.", name);
    return fail_at(r, line, col, "\"%s\" is already defined in \"%.*s\".", dot + 1,
                   (int)(dot - name), name);
  }
  r->slots[i].name = name;
  r->slots[i].len = len;
  r->slots[i].hash = h;
  r->slots[i].kind = kind;
  r->slots[i].file = file;
  r->slots[i].desc = desc;
  r->slots[i].owner = owner;
  r->count++;
  return 1;
}

/* Adds 'name', a NUL-terminated arena string (see add_sym_hashed). */
static int add_sym(R *r, const char *name, SymKind kind, int file, const void *desc,
                   const void *owner, int line, int col) {
  size_t len = strlen(name);
  return add_sym_hashed(r, name, len, hash(name, len), kind, file, desc, owner, line, col);
}

/* 'scope' "." 'name' (just 'name' when 'a' is 0), the first 'a' bytes
 * of 'scope'. */
static char *join_n(R *r, const char *scope, size_t a, const char *name) {
  size_t b = strlen(name);
  char *s = pc_Arena_Malloc(r->a, a + b + 2);
  if (s == NULL) {
    oom(r);
    return NULL;
  }
  if (a) {
    memcpy(s, scope, a);
    s[a++] = '.';
  }
  memcpy(s + a, name, b + 1);
  return s;
}

static char *join(R *r, const char *scope, const char *name) {
  return join_n(r, scope, scope ? strlen(scope) : 0, name);
}

static int add_enum_syms(R *r, const char *scope, const pc_EnumDesc *e, int file) {
  char *full = join(r, scope, e->name);
  if (full == NULL || !add_sym(r, full, kSymEnum, file, e, NULL, e->line, e->column)) return 0;
  for (size_t i = 0; i < e->value_count; i++) {
    /* C++ scoping: values are siblings of their enum */
    char *v = join(r, scope, e->values[i].name);
    if (v == NULL || !add_sym(r, v, kSymEnumValue, file, &e->values[i], e, e->values[i].line,
                              e->values[i].column))
      return 0;
  }
  return 1;
}

static int add_message_syms(R *r, const char *scope, const pc_MessageDesc *m, int file, int depth) {
  if (depth > MAX_DEPTH) return fail_at(r, m->line, m->column, "Message nesting too deep.");
  char *full = join(r, scope, m->name);
  if (full == NULL || !add_sym(r, full, kSymMessage, file, m, NULL, m->line, m->column)) return 0;
  /* a dependency's fields and oneofs are never looked up, and cannot clash
   * with this file's names without their message clashing first */
  int self = file == file_index_self(r);
  for (size_t i = 0; self && i < m->oneof_count; i++) {
    char *n = join(r, full, m->oneofs[i].name);
    /* a oneof can clash only with an earlier oneof: protoc gives no position */
    if (n == NULL || !add_sym(r, n, kSymOneof, file, &m->oneofs[i], m, 0, 0)) return 0;
  }
  for (size_t i = 0; self && i < m->field_count; i++) {
    char *n = join(r, full, m->fields[i].name);
    if (n == NULL ||
        !add_sym(r, n, kSymField, file, &m->fields[i], m, m->fields[i].line, m->fields[i].column))
      return 0;
  }
  for (size_t i = 0; i < m->nested_count; i++)
    if (!add_message_syms(r, full, &m->nested[i], file, depth + 1)) return 0;
  for (size_t i = 0; i < m->enum_count; i++)
    if (!add_enum_syms(r, full, &m->enums[i], file)) return 0;
  for (size_t i = 0; i < m->extension_count; i++) {
    char *n = join(r, full, m->extensions[i].name);
    if (n == NULL || !add_sym(r, n, kSymField, file, &m->extensions[i], NULL, m->extensions[i].line,
                              m->extensions[i].column))
      return 0;
  }
  return 1;
}

static size_t count_message_syms(const pc_MessageDesc *m, int depth) {
  size_t n = 1 + m->oneof_count + m->field_count + m->extension_count;
  if (depth > MAX_DEPTH) return n;
  for (size_t i = 0; i < m->nested_count; i++) n += count_message_syms(&m->nested[i], depth + 1);
  for (size_t i = 0; i < m->enum_count; i++) n += 1 + m->enums[i].value_count;
  return n;
}

/* About how many symbols 'f' adds (packages counted generously). */
static size_t count_file_syms(const pc_FileDesc *f) {
  size_t n = 8 + f->extension_count;
  for (size_t i = 0; i < f->message_count; i++) n += count_message_syms(&f->messages[i], 0);
  for (size_t i = 0; i < f->enum_count; i++) n += 1 + f->enums[i].value_count;
  for (size_t i = 0; i < f->service_count; i++) n += 1 + f->services[i].method_count;
  return n;
}

static int add_file_syms(R *r, const pc_FileDesc *f, int file) {
  const char *pkg = f->package;
  if (pkg != NULL && pkg[0]) {
    /* "a", "a.b", "a.b.c": prefixes of the package in place, each hash the
     * one before continued (a package thousands of parts long costs as
     * much as it is long) */
    uint64_t h = PC_HASH_START;
    for (const char *d = pkg, *from = pkg;; d++) {
      if (*d == '.' || *d == '\0') {
        h = pc_Hash_More(h, from, (size_t)(d - from));
        from = d;
        if (!add_sym_hashed(r, pkg, (size_t)(d - pkg), h, kSymPackage, file, f, NULL, 0, 0))
          return 0;
        if (*d == '\0') break;
      }
    }
  } else {
    pkg = NULL;
  }
  for (size_t i = 0; i < f->message_count; i++)
    if (!add_message_syms(r, pkg, &f->messages[i], file, 0)) return 0;
  for (size_t i = 0; i < f->enum_count; i++)
    if (!add_enum_syms(r, pkg, &f->enums[i], file)) return 0;
  for (size_t i = 0; i < f->service_count; i++) {
    const pc_ServiceDesc *s = &f->services[i];
    char *n = join(r, pkg, s->name);
    if (n == NULL || !add_sym(r, n, kSymService, file, s, NULL, s->line, s->column)) return 0;
    for (size_t k = 0; k < s->method_count; k++) {
      char *mn = join(r, n, s->methods[k].name);
      if (mn == NULL || !add_sym(r, mn, kSymMethod, file, &s->methods[k], s, s->methods[k].line,
                                 s->methods[k].column))
        return 0;
    }
  }
  for (size_t i = 0; i < f->extension_count; i++) {
    char *n = join(r, pkg, f->extensions[i].name);
    if (n == NULL || !add_sym(r, n, kSymField, file, &f->extensions[i], NULL, f->extensions[i].line,
                              f->extensions[i].column))
      return 0;
  }
  return 1;
}

/* ---- lookups ------------------------------------------------------------- */

static int dep_index(const R *r, const char *name) {
  for (size_t i = 0; i < r->ndeps; i++)
    if (strcmp(r->deps[i]->name, name) == 0) return (int)i;
  return -1;
}

/* Marks 'f' visible, then its public imports, recursively. */
static void mark_public(R *r, int index) {
  if (r->visible[index]) return;
  r->visible[index] = 1;
  const pc_FileDesc *f = r->deps[index];
  for (size_t i = 0; i < f->public_dependency_count; i++) {
    int32_t d = f->public_dependencies[i];
    if (d < 0 || (size_t)d >= f->dependency_count) continue;
    int k = dep_index(r, f->dependencies[d]);
    if (k >= 0) mark_public(r, k);
  }
}

static int in_package(const pc_FileDesc *f, const char *name, size_t len) {
  if (f->package == NULL) return 0;
  size_t n = strlen(f->package);
  return n >= len && memcmp(f->package, name, len) == 0 && (n == len || f->package[len] == '.');
}

/* protoc's FindSymbol: 's' when this file can see it, else NULL (noted
 * for the error). */
static const Sym *visible(R *r, const Sym *s) {
  if (s == NULL) return NULL;
  if (s->file == file_index_self(r) || r->visible[s->file]) return s;
  if (s->kind == kSymPackage) {
    if (in_package(r->file, s->name, s->len)) return s;
    for (size_t i = 0; i < r->ndeps; i++)
      if (r->visible[i] && in_package(r->deps[i], s->name, s->len)) return s;
  }
  r->undeclared_file = s->file;
  r->undeclared_name = s->name;
  r->undeclared_len = s->len;
  return NULL;
}

static int is_type(const Sym *s) {
  return s->kind == kSymMessage || s->kind == kSymEnum;
}

static int is_aggregate(const Sym *s) {
  return s->kind == kSymMessage || s->kind == kSymEnum || s->kind == kSymPackage ||
         s->kind == kSymService;
}

/* An enclosing scope of lookup(): the first 'len' bytes of the name. */
struct Scope {
  size_t len;
  uint64_t hash;
};

/* protoc's LookupSymbolNoPlaceholder: 'name' relative to the scope of the
 * element named 'relative_to' (innermost scope first; a leading dot makes
 * it absolute). 'types_only' skips non-type symbols of the same name. No
 * name is written out: the scopes' hashes come from one pass over
 * 'relative_to', and each try hashes only 'name'. */
static const Sym *lookup(R *r, const char *name, const char *relative_to, int types_only) {
  r->undefined_resolved = NULL;
  r->undeclared_file = -1;
  if (name[0] == '.') return visible(r, find(r, name + 1, strlen(name + 1)));
  size_t nlen = strlen(name);
  const char *dot = strchr(name, '.');
  size_t first = dot ? (size_t)(dot - name) : nlen;
  size_t n = 0;
  for (const char *q = relative_to; *q; q++) n += *q == '.';
  if (n > r->scope_cap) {
    struct Scope *grown = pc_Arena_Malloc(r->a, 2 * n * sizeof *grown);
    if (grown == NULL) {
      oom(r);
      return NULL;
    }
    r->scopes = grown;
    r->scope_cap = 2 * n;
  }
  uint64_t h = PC_HASH_START;
  n = 0;
  for (const char *q = relative_to, *from = relative_to; *q; q++)
    if (*q == '.') {
      h = pc_Hash_More(h, from, (size_t)(q - from));
      from = q;
      r->scopes[n++] = (struct Scope){(size_t)(q - relative_to), h};
    }
  while (n-- > 0) {
    struct Scope sc = r->scopes[n];
    const Sym *s = visible(r, find_in(r, relative_to, sc.len, sc.hash, name, first));
    if (s == NULL) continue;
    if (first < nlen) {
      if (!is_aggregate(s)) continue;
      s = visible(r, find_in(r, relative_to, sc.len, sc.hash, name, nlen));
      if (s == NULL) r->undefined_resolved = join_n(r, relative_to, sc.len, name);
      return s;
    }
    if (!types_only || is_type(s)) return s;
  }
  return visible(r, find(r, name, nlen));
}

static int not_defined(R *r, int line, int col, const char *name) {
  if (r->undeclared_file >= 0)
    return fail_at(r, line, col,
                   "\"%.*s\" seems to be defined in \"%s\", which is not imported by \"%s\".  To "
                   "use it here, please add the necessary import.",
                   (int)r->undeclared_len, r->undeclared_name, file_of(r, r->undeclared_file)->name,
                   r->file->name);
  if (r->undefined_resolved != NULL)
    return fail_at(r, line, col,
                   "\"%s\" is resolved to \"%s\", which is not defined. The innermost scope is "
                   "searched first in name resolution. Consider using a leading '.'(i.e., "
                   "\".%s\") to start from the outermost scope.",
                   name, r->undefined_resolved, name);
  return fail_at(r, line, col, "\"%s\" is not defined.", name);
}

static const char *dotted(R *r, const Sym *s) {
  char *out = pc_Arena_Malloc(r->a, s->len + 2);
  if (out == NULL) {
    oom(r);
    return NULL;
  }
  out[0] = '.';
  memcpy(out + 1, s->name, s->len);
  out[s->len + 1] = '\0';
  return out;
}

static const Sym *find_full(const R *r, const char *dotted_name) {
  if (dotted_name == NULL) return NULL;
  if (dotted_name[0] == '.') dotted_name++;
  return find(r, dotted_name, strlen(dotted_name));
}

/* ---- type resolution ------------------------------------------------------- */

/* The position of a field's type, number or default value, else of the
 * field. */
#define AT_TYPE(f)                                                                                 \
  (f)->type_line ? (f)->type_line : (f)->line, (f)->type_line ? (f)->type_column : (f)->column
#define AT_NUMBER(f)                                                                               \
  (f)->number_line ? (f)->number_line : (f)->line,                                                 \
      (f)->number_line ? (f)->number_column : (f)->column
#define AT_DEFAULT(f)                                                                              \
  (f)->default_line ? (f)->default_line : (f)->line,                                               \
      (f)->default_line ? (f)->default_column : (f)->column

#define AT_VALUE_NUMBER(v)                                                                         \
  (v)->number_line ? (v)->number_line : (v)->line,                                                 \
      (v)->number_line ? (v)->number_column : (v)->column
#define AT_EXTENDEE(f)                                                                             \
  (f)->extendee_line ? (f)->extendee_line : (f)->line,                                             \
      (f)->extendee_line ? (f)->extendee_column : (f)->column
#define AT_RANGE(x, m) (x)->line ? (x)->line : (m)->line, (x)->line ? (x)->column : (m)->column

static int resolve_field(R *r, pc_FieldDesc *f, const char *full) {
  if (f->default_value != NULL && f->label == kPc_Label_Repeated) /* before the type's checks */
    return fail_at(r, AT_DEFAULT(f), "Repeated fields can't have default values.");
  if (f->extendee != NULL) {
    const Sym *s = lookup(r, f->extendee, full, 0);
    if (s == NULL) return not_defined(r, AT_EXTENDEE(f), f->extendee);
    if (s->kind != kSymMessage)
      return fail_at(r, AT_EXTENDEE(f), "\"%s\" is not a message type.", f->extendee);
    if ((f->extendee = dotted(r, s)) == NULL) return 0;
  }
  if (f->type_name == NULL && (f->type == kPc_Type_Message || f->type == kPc_Type_Group ||
                               f->type == kPc_Type_Enum)) /* map<string, group>, say */
    return fail_at(r, 0, 0, "Field with message or enum type missing type_name.");
  if (f->type_name == NULL) return 1;
  const Sym *s = lookup(r, f->type_name, full, 1);
  if (s == NULL) return not_defined(r, AT_TYPE(f), f->type_name);
  if (!is_type(s)) return fail_at(r, AT_TYPE(f), "\"%s\" is not a type.", f->type_name);
  if (f->type == kPc_Type_Group) {
    if (s->kind != kSymMessage)
      return fail_at(r, AT_TYPE(f), "\"%s\" is not a message type.", f->type_name);
  } else if (f->type == 0) {
    f->type = s->kind == kSymMessage ? kPc_Type_Message : kPc_Type_Enum;
  }
  if ((f->type_name = dotted(r, s)) == NULL) return 0;
  if (f->default_value != NULL) {
    if (f->type != kPc_Type_Enum)
      return fail_at(r, AT_DEFAULT(f), "Messages can't have default values.");
    const char *d = f->default_value; /* the parser took any token: protoc checks it here */
    int ident = d[0] == '_' || ((d[0] | 0x20) >= 'a' && (d[0] | 0x20) <= 'z');
    for (const char *q = d; ident && *q; q++)
      ident = *q == '_' || ((*q | 0x20) >= 'a' && (*q | 0x20) <= 'z') || (*q >= '0' && *q <= '9');
    if (!ident)
      return fail_at(r, AT_DEFAULT(f), "Default value for an enum field must be an identifier.");
    const pc_EnumDesc *e = s->desc;
    int found = 0;
    for (size_t i = 0; i < e->value_count && !found; i++)
      found = strcmp(e->values[i].name, f->default_value) == 0;
    if (!found)
      return fail_at(r, AT_DEFAULT(f), "Enum type \"%.*s\" has no value named \"%s\".", (int)s->len,
                     s->name, f->default_value);
  }
  return 1;
}

static int resolve_message(R *r, const char *scope, pc_MessageDesc *m) {
  char *full = join(r, scope, m->name);
  if (full == NULL) return 0;
  for (size_t i = 0; i < m->field_count; i++) {
    char *n = join(r, full, m->fields[i].name);
    if (n == NULL || !resolve_field(r, &m->fields[i], n)) return 0;
  }
  for (size_t i = 0; i < m->extension_count; i++) {
    char *n = join(r, full, m->extensions[i].name);
    if (n == NULL || !resolve_field(r, &m->extensions[i], n)) return 0;
  }
  for (size_t i = 0; i < m->nested_count; i++)
    if (!resolve_message(r, full, &m->nested[i])) return 0;
  return 1;
}

/* ---- validation ------------------------------------------------------------ */

static int is_packable(pc_FieldType t) {
  return t != kPc_Type_String && t != kPc_Type_Bytes && t != kPc_Type_Message &&
         t != kPc_Type_Group && t != 0;
}

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out);
static int skip_value(const uint8_t **p, const uint8_t *end, int wt, uint32_t number, int depth);

/* The last varint of field 'number' in serialized options (a standard
 * option the parser wrote), or 0 when absent or malformed. */
static uint64_t opt_varint(const pc_OptionsDesc *o, uint32_t number) {
  if (o->data == NULL) return 0;
  const uint8_t *p = o->data, *end = o->data + o->size;
  uint64_t found = 0, tag, v;
  while (p < end && read_varint(&p, end, &tag)) {
    if ((uint32_t)(tag >> 3) == number && (tag & 7) == 0) {
      if (!read_varint(&p, end, &v)) return 0;
      found = v;
    } else if (!skip_value(&p, end, (int)(tag & 7), (uint32_t)(tag >> 3), 0)) {
      return 0;
    }
  }
  return found;
}

static int is_64bit_integer(pc_FieldType t) {
  return t == kPc_Type_Int64 || t == kPc_Type_Uint64 || t == kPc_Type_Sint64 ||
         t == kPc_Type_Fixed64 || t == kPc_Type_Sfixed64;
}

static int check_field(R *r, const pc_FieldDesc *f, int is_extension, const pc_MessageDesc *m) {
  (void)m;
  if (f->number <= 0) return fail_at(r, AT_NUMBER(f), "Field numbers must be positive integers.");
  if (!is_extension && f->number > MAX_FIELD_NUMBER)
    return fail_at(r, AT_NUMBER(f), "Field numbers cannot be greater than %d.", MAX_FIELD_NUMBER);
  if (f->number >= 19000 && f->number <= 19999)
    return fail_at(r, AT_NUMBER(f),
                   "Field numbers 19000 through 19999 are reserved for the protocol buffer "
                   "library implementation.");
  if (r->file->syntax == kPc_Syntax_Proto3) {
    if (f->label == kPc_Label_Required)
      return fail_at(r, AT_TYPE(f), "Required fields are not allowed in proto3.");
    if (f->default_value != NULL)
      return fail_at(r, AT_DEFAULT(f), "Explicit default values are not allowed in proto3.");
  }
  if (f->packed == 1 && (f->label != kPc_Label_Repeated || !is_packable(f->type)))
    return fail_at(r, AT_TYPE(f),
                   "[packed = true] can only be specified for repeated primitive fields.");
  /* FieldOptions lazy (5), unverified_lazy (15), jstype (6), as protoc's
   * ValidateFieldOptions */
  if ((opt_varint(&f->options, 5) || opt_varint(&f->options, 15)) && f->type != kPc_Type_Message)
    return fail_at(r, AT_TYPE(f), "[lazy = true] can only be specified for submessage fields.");
  uint64_t jstype = opt_varint(&f->options, 6);
  if (jstype != 0 && !is_64bit_integer(f->type))
    return fail_at(r, AT_TYPE(f),
                   "jstype is only allowed on int64, uint64, sint64, fixed64 or sfixed64 fields.");
  if (is_extension && f->json_name != NULL) {
    size_t cap = strlen(f->name) + 1; /* a default JSON name is never longer */
    char *buf = pc_Arena_Malloc(r->a, cap);
    if (buf == NULL) return oom(r);
    pc_JsonName(f->name, buf, cap);
    if (strcmp(buf, f->json_name) != 0)
      return fail_at(r, f->json_line ? f->json_line : f->line,
                     f->json_line ? f->json_column : f->column,
                     "option json_name is not allowed on extension fields.");
  }
  return 1;
}

static int check_map_entry(R *r, const pc_MessageDesc *entry, const pc_FieldDesc *f) {
  const pc_FieldDesc *key = &entry->fields[0];
  if (key->type == kPc_Type_Float || key->type == kPc_Type_Double || key->type == kPc_Type_Bytes ||
      key->type == kPc_Type_Message || key->type == kPc_Type_Enum || key->type == kPc_Type_Group)
    return fail_at(r, AT_TYPE(f),
                   "Key in map fields cannot be float/double, bytes or message types.");
  const pc_FieldDesc *value = &entry->fields[1];
  if (value->type == kPc_Type_Enum) {
    const Sym *s = find_full(r, value->type_name);
    const pc_EnumDesc *e = s ? s->desc : NULL;
    if (e != NULL && e->value_count > 0 && e->values[0].number != 0)
      return fail_at(r, AT_TYPE(f), "Enum value in map must define 0 as the first value.");
  }
  return 1;
}

/* Duplicates among a message's fields in O(n log n) (a message may have
 * many thousand fields): items sorted by key, then by declaration index. */
typedef struct {
  int32_t number;
  const char *key; /* NULL when comparing numbers */
  size_t index;
} DupItem;

static int dup_key_cmp(const DupItem *a, const DupItem *b) {
  if (a->key != NULL) return strcmp(a->key, b->key);
  return (a->number > b->number) - (a->number < b->number);
}

static int dup_cmp(const void *pa, const void *pb) {
  const DupItem *a = pa, *b = pb;
  int c = dup_key_cmp(a, b);
  if (c != 0) return c;
  return (a->index > b->index) - (a->index < b->index);
}

/* The smallest declaration index whose key an earlier item has, with that
 * earliest item's index in '*first'; SIZE_MAX when all keys differ. The
 * error the pairwise loop of protoc reports, found by sorting. */
static size_t first_duplicate(DupItem *items, size_t n, size_t *first) {
  qsort(items, n, sizeof *items, dup_cmp);
  size_t best = SIZE_MAX;
  for (size_t g = 0; g < n;) {
    size_t h = g + 1;
    while (h < n && dup_key_cmp(&items[g], &items[h]) == 0) h++;
    if (h - g > 1 && items[g + 1].index < best) {
      best = items[g + 1].index;
      *first = items[g].index;
    }
    g = h;
  }
  return best;
}

/* A reserved name listed twice: protoc's error at the message's or enum's
 * name. */
static int reserved_once(R *r, const char *const *names, size_t n, int line, int col, int in_enum) {
  if (n < 2) return 1;
  DupItem *items = pc_Arena_Malloc(r->a, n * sizeof *items);
  if (items == NULL) return oom(r);
  for (size_t i = 0; i < n; i++) items[i] = (DupItem){0, names[i], i};
  size_t first = 0, dup = first_duplicate(items, n, &first);
  if (dup == SIZE_MAX) return 1;
  if (in_enum)
    return fail_at(r, line, col, "Enum value \"%s\" is reserved multiple times.", names[dup]);
  return fail_at(r, line, col, "Field name \"%s\" is reserved multiple times.", names[dup]);
}

static char lower(char c) {
  if (c >= 'A' && c <= 'Z') return (char)(c - 'A' + 'a');
  return c;
}

/* Where 'value' goes on once the prefix is removed: past the enum's name
 * compared lower-cased with underscores skipped, and the underscores after
 * it; 0 when the name is not a prefix or nothing would remain. */
static size_t prefix_end(const char *enum_name, const char *value) {
  size_t i = 0, n = strlen(value);
  for (const char *p = enum_name; *p != '\0'; p++) {
    if (*p == '_') continue;
    while (i < n && value[i] == '_') i++;
    if (i == n || lower(value[i]) != lower(*p)) return 0;
    i++;
  }
  while (i < n && value[i] == '_') i++;
  return i < n ? i : 0;
}

static char *enum_value_key(R *r, const char *enum_name, const char *value) {
  size_t start = prefix_end(enum_name, value), n = strlen(value);
  char *k = pc_Arena_Malloc(r->a, n - start + 1);
  if (k == NULL) return NULL;
  size_t m = 0;
  int upper = 1;
  for (size_t j = start; j < n; j++) {
    if (value[j] == '_') {
      upper = 1;
      continue;
    }
    char c = lower(value[j]);
    if (upper && c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
    k[m++] = c;
    upper = 0;
  }
  k[m] = '\0';
  return k;
}

/* proto3: two values whose names agree once the enum's prefix is dropped
 * and case ignored, with different numbers (protoc's
 * CheckEnumValueUniqueness; proto2 only warns). By sorting: the first value
 * of each key stands, a later one with another number is the error. */
static int check_enum_prefixes(R *r, const pc_EnumDesc *e) {
  if (r->file->syntax != kPc_Syntax_Proto3 || e->value_count < 2) return 1;
  DupItem *items = pc_Arena_Malloc(r->a, e->value_count * sizeof *items);
  if (items == NULL) return oom(r);
  for (size_t i = 0; i < e->value_count; i++) {
    char *k = enum_value_key(r, e->name, e->values[i].name);
    if (k == NULL) return oom(r);
    items[i] = (DupItem){0, k, i};
  }
  qsort(items, e->value_count, sizeof *items, dup_cmp);
  size_t best = SIZE_MAX, first = 0;
  for (size_t g = 0; g < e->value_count;) {
    size_t h = g + 1;
    const pc_EnumValueDesc *head = &e->values[items[g].index];
    for (; h < e->value_count && dup_key_cmp(&items[g], &items[h]) == 0; h++) {
      const pc_EnumValueDesc *v = &e->values[items[h].index];
      if (items[h].index < best && v->number != head->number && strcmp(v->name, head->name) != 0) {
        best = items[h].index;
        first = items[g].index;
      }
    }
    g = h;
  }
  if (best == SIZE_MAX) return 1;
  const pc_EnumValueDesc *v = &e->values[best];
  return fail_at(r, v->line, v->column,
                 "Enum name %s has the same name as %s if you ignore case and strip out the enum "
                 "name prefix (if any). This is error-prone and can lead to undefined behavior. "
                 "Please avoid doing this. If you are using allow_alias, please assign the same "
                 "numeric value to both enums.",
                 v->name, e->values[first].name);
}

static int check_enum(R *r, const pc_EnumDesc *e) {
  if (e->value_count == 0)
    return fail_at(r, e->line, e->column, "Enums must contain at least one value.");
  for (size_t i = 0; i < e->reserved_range_count; i++) /* end inclusive here */
    if (e->reserved_ranges[i].end < e->reserved_ranges[i].start)
      return fail_at(r, 0, 0, "Reserved range end number must be greater than start number.");
  if (!reserved_once(r, e->reserved_names, e->reserved_name_count, e->line, e->column, 1)) return 0;
  if (r->file->syntax == kPc_Syntax_Proto3 && e->values[0].number != 0)
    return fail_at(r, AT_VALUE_NUMBER(&e->values[0]),
                   "The first enum value must be zero in proto3.");
  for (size_t i = 0; i < e->value_count; i++) {
    const pc_EnumValueDesc *v = &e->values[i];
    for (size_t k = 0; k < e->reserved_range_count; k++)
      if (e->reserved_ranges[k].start <= v->number && v->number <= e->reserved_ranges[k].end)
        return fail_at(r, 0, 0, "Enum value \"%s\" uses reserved number %d.", v->name, v->number);
    for (size_t k = 0; k < e->reserved_name_count; k++)
      if (strcmp(e->reserved_names[k], v->name) == 0)
        return fail_at(r, v->line, v->column, "Enum value \"%s\" is reserved.", v->name);
  }
  return 1;
}

/* What protoc checks of an enum after its options are interpreted: proto3
 * names equal but for case and prefix, then numbers used twice without
 * allow_alias. */
static int validate_enum(R *r, const char *scope, const pc_EnumDesc *e) {
  if (!check_enum_prefixes(r, e)) return 0;
  if (e->allow_alias) return 1;
  DupItem *items = pc_Arena_Malloc(r->a, (e->value_count + 1) * sizeof *items);
  if (items == NULL) return oom(r);
  for (size_t i = 0; i < e->value_count; i++) items[i] = (DupItem){e->values[i].number, NULL, i};
  size_t dup_first = 0, dup = first_duplicate(items, e->value_count, &dup_first);
  if (dup == SIZE_MAX) return 1;
  const pc_EnumValueDesc *v = &e->values[dup];
  return fail_at(r, AT_VALUE_NUMBER(v),
                 "\"%s%s%s\" uses the same enum value as \"%s%s%s\". If this is "
                 "intended, set 'option allow_alias = true;' to the enum definition.",
                 scope ? scope : "", scope ? "." : "", v->name, scope ? scope : "",
                 scope ? "." : "", e->values[dup_first].name);
}

static int validate_message_enums(R *r, const char *scope, const pc_MessageDesc *m) {
  char *full = join(r, scope, m->name);
  if (full == NULL) return 0;
  for (size_t i = 0; i < m->enum_count; i++)
    if (!validate_enum(r, full, &m->enums[i])) return 0;
  for (size_t i = 0; i < m->nested_count; i++)
    if (!validate_message_enums(r, full, &m->nested[i])) return 0;
  return 1;
}

static const pc_MessageDesc *nested_named(const pc_MessageDesc *m, const char *name) {
  for (size_t i = 0; i < m->nested_count; i++)
    if (strcmp(m->nested[i].name, name) == 0) return &m->nested[i];
  return NULL;
}

static int lower_no_underscore(const char **p) {
  while (**p == '_') (*p)++;
  int c = (unsigned char)**p;
  if (c) (*p)++;
  return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* protoc's JSON key of a field name: lower-cased, underscores dropped. */
static char *json_key(R *r, const char *name) {
  char *k = pc_Arena_Malloc(r->a, strlen(name) + 1);
  if (k == NULL) return NULL;
  size_t n = 0;
  for (int c; (c = lower_no_underscore(&name)) != 0;) k[n++] = (char)c;
  k[n] = '\0';
  return k;
}

static int check_message(R *r, const char *scope, const pc_MessageDesc *m) {
  char *full = join(r, scope, m->name);
  if (full == NULL) return 0;
  int proto3 = r->file->syntax == kPc_Syntax_Proto3;
  if (proto3 && m->extension_range_count > 0)
    return fail_at(r, m->line, m->column, "Extension ranges are not allowed in proto3.");
  if (proto3 && m->message_set_wire_format)
    return fail_at(r, m->line, m->column, "MessageSet is not supported in proto3.");
  if (!reserved_once(r, m->reserved_names, m->reserved_name_count, m->line, m->column, 0)) return 0;
  DupItem *items = pc_Arena_Malloc(r->a, (m->field_count + 1) * sizeof *items);
  if (items == NULL) return oom(r);
  for (size_t i = 0; i < m->field_count; i++) items[i] = (DupItem){m->fields[i].number, NULL, i};
  size_t dup_first = 0, dup = first_duplicate(items, m->field_count, &dup_first);
  for (size_t i = 0; i < m->field_count; i++) {
    const pc_FieldDesc *f = &m->fields[i];
    if (!check_field(r, f, 0, m)) return 0;
    if (m->message_set_wire_format)
      return fail_at(r, f->line, f->column, "MessageSets cannot have fields, only extensions.");
    if (i == dup)
      return fail_at(r, AT_NUMBER(f),
                     "Field number %d has already been used in \"%s\" by field \"%s\".", f->number,
                     full, m->fields[dup_first].name);
    for (size_t k = 0; k < m->extension_range_count; k++) {
      pc_RangeDesc x = m->extension_ranges[k].range;
      if (x.start <= f->number && f->number < x.end) /* protoc: at the range */
        return fail_at(r, m->extension_ranges[k].line, m->extension_ranges[k].column,
                       "Extension range %d to %d includes field \"%s\" (%d).", x.start, x.end - 1,
                       f->name, f->number);
    }
    for (size_t k = 0; k < m->reserved_range_count; k++) {
      pc_RangeDesc x = m->reserved_ranges[k];
      if (x.start <= f->number && f->number < x.end)
        return fail_at(r, 0, 0, "Field \"%s\" uses reserved number %d.", f->name,
                       f->number); /* protoc gives no position */
    }
    for (size_t k = 0; k < m->reserved_name_count; k++)
      if (strcmp(m->reserved_names[k], f->name) == 0)
        return fail_at(r, f->line, f->column, "Field name \"%s\" is reserved.", f->name);
    if (f->type == kPc_Type_Message && f->label == kPc_Label_Repeated && f->type_name) {
      const Sym *s = find_full(r, f->type_name);
      const pc_MessageDesc *entry = s && s->kind == kSymMessage ? s->desc : NULL;
      if (entry != NULL && entry->map_entry && entry == nested_named(m, entry->name) &&
          entry->field_count == 2 && !check_map_entry(r, entry, f))
        return 0;
    }
    if (proto3 && f->type == kPc_Type_Enum && f->type_name) {
      const Sym *s = find_full(r, f->type_name);
      if (s != NULL && file_of(r, s->file)->syntax != kPc_Syntax_Proto3)
        return fail_at(r, AT_TYPE(f),
                       "Enum type \"%.*s\" is not a proto3 enum, but is used in \"%s\" which is "
                       "a proto3 message type.",
                       (int)s->len, s->name, full);
    }
  }
  if (proto3) { /* protoc's rule: unique after lower-casing and dropping underscores */
    for (size_t i = 0; i < m->field_count; i++) {
      char *key = json_key(r, m->fields[i].name);
      if (key == NULL) return oom(r);
      items[i] = (DupItem){0, key, i};
    }
    size_t k = 0, i = first_duplicate(items, m->field_count, &k);
    if (i != SIZE_MAX)
      return fail_at(r, m->fields[i].line, m->fields[i].column,
                     "The JSON camel-case name of field \"%s\" conflicts with field \"%s\". This "
                     "is not allowed in proto3.",
                     m->fields[i].name, m->fields[k].name);
  }
  if (m->oneof_count > 0) {
    unsigned char *used = pc_Arena_Calloc(r->a, m->oneof_count);
    if (used == NULL) return oom(r);
    for (size_t k = 0; k < m->field_count; k++)
      if (m->fields[k].oneof_index >= 0 && (size_t)m->fields[k].oneof_index < m->oneof_count)
        used[m->fields[k].oneof_index] = 1;
    for (size_t i = 0; i < m->oneof_count; i++)
      if (!used[i]) return fail_at(r, m->line, m->column, "Oneof must have at least one field.");
  }
  for (size_t i = 0; i < m->extension_range_count; i++) {
    pc_RangeDesc a = m->extension_ranges[i].range;
    const pc_ExtensionRangeDesc *x = &m->extension_ranges[i];
    if (a.start <= 0)
      return fail_at(r, AT_RANGE(x, m), "Extension numbers must be positive integers.");
    if (a.end > MAX_FIELD_NUMBER + 1 && !m->message_set_wire_format)
      return fail_at(r, AT_RANGE(x, m), "Extension numbers cannot be greater than %d.",
                     MAX_FIELD_NUMBER);
    if (a.start >= a.end)
      return fail_at(r, AT_RANGE(x, m),
                     "Extension range end number must be greater than start number.");
    for (size_t k = 0; k < m->reserved_range_count; k++) {
      pc_RangeDesc b = m->reserved_ranges[k];
      if (a.end > b.start && b.end > a.start)
        return fail_at(r, AT_RANGE(x, m),
                       "Extension range %d to %d overlaps with reserved range %d to %d.", a.start,
                       a.end - 1, b.start, b.end - 1);
    }
    for (size_t k = 0; k < i; k++) {
      pc_RangeDesc b = m->extension_ranges[k].range;
      if (a.end > b.start && b.end > a.start) /* protoc: at the earlier range */
        return fail_at(r, AT_RANGE(&m->extension_ranges[k], m),
                       "Extension range %d to %d overlaps with already-defined range %d to %d.",
                       a.start, a.end - 1, b.start, b.end - 1);
    }
  }
  for (size_t i = 0; i < m->reserved_range_count; i++) {
    pc_RangeDesc a = m->reserved_ranges[i];
    if (a.start <= 0)
      return fail_at(r, m->line, m->column, "Reserved numbers must be positive integers.");
    /* a message's "reserved 5 to 1" passes, as in protoc 3.21 (an enum's
     * does not: check_enum) */
    for (size_t k = 0; k < i; k++) {
      pc_RangeDesc b = m->reserved_ranges[k];
      if (a.end > b.start && b.end > a.start)
        return fail_at(r, m->line, m->column,
                       "Reserved range %d to %d overlaps with already-defined range %d to %d.",
                       a.start, a.end - 1, b.start, b.end - 1);
    }
  }
  for (size_t i = 0; i < m->extension_count; i++)
    if (!check_field(r, &m->extensions[i], 1, NULL)) return 0;
  for (size_t i = 0; i < m->nested_count; i++)
    if (!check_message(r, full, &m->nested[i])) return 0;
  for (size_t i = 0; i < m->enum_count; i++)
    if (!check_enum(r, &m->enums[i])) return 0;
  return 1;
}

static int is_options_message(const char *dotted_name) {
  return strncmp(dotted_name, ".google.protobuf.", 17) == 0 && strlen(dotted_name) > 24 &&
         strcmp(dotted_name + strlen(dotted_name) - 7, "Options") == 0;
}

/* Extensions: inside a declared range of their extendee, number unused. */
static int check_extension(R *r, const pc_FieldDesc *x) {
  const Sym *s = find_full(r, x->extendee);
  if (s == NULL || s->kind != kSymMessage) return 1;
  const pc_MessageDesc *m = s->desc;
  int in_range = 0;
  for (size_t i = 0; i < m->extension_range_count && !in_range; i++)
    in_range = m->extension_ranges[i].range.start <= x->number &&
               x->number < m->extension_ranges[i].range.end;
  if (!in_range)
    return fail_at(r, AT_NUMBER(x), "\"%s\" does not declare %d as an extension number.",
                   x->extendee + 1, x->number);
  if (r->file->syntax == kPc_Syntax_Proto3 && !is_options_message(x->extendee))
    return fail_at(r, x->line, x->column,
                   "Extensions in proto3 are only allowed for defining options.");
  if (m->message_set_wire_format && (x->label != kPc_Label_Optional || x->type != kPc_Type_Message))
    return fail_at(r, AT_TYPE(x), "Extensions of MessageSets must be optional messages.");
  return 1;
}

static size_t ext_hash(const char *extendee, int32_t number) {
  return (size_t)(hash(extendee, strlen(extendee)) ^
                  ((uint64_t)(uint32_t)number * 0x9E3779B97F4A7C15ull));
}

/* Adds an extension to the (extendee, number) table; when one is already
 * there, points '*clash' at it instead (the table unchanged). */
static int ext_add(R *r, struct ExtEntry e, const struct ExtEntry **clash) {
  if ((r->ext_count + 1) * 2 > r->ext_cap) {
    size_t nc = r->ext_cap ? r->ext_cap * 2 : 64;
    struct ExtEntry *grown = pc_Arena_Calloc(r->a, nc * sizeof *grown);
    if (grown == NULL) return oom(r);
    for (size_t k = 0; k < r->ext_cap; k++) {
      const pc_FieldDesc *g = r->exts[k].f;
      if (g == NULL) continue;
      size_t i = ext_hash(g->extendee, g->number) & (nc - 1);
      while (grown[i].f != NULL) i = (i + 1) & (nc - 1);
      grown[i] = r->exts[k];
    }
    r->exts = grown;
    r->ext_cap = nc;
  }
  size_t i = ext_hash(e.f->extendee, e.f->number) & (r->ext_cap - 1);
  for (; r->exts[i].f != NULL; i = (i + 1) & (r->ext_cap - 1)) {
    const pc_FieldDesc *g = r->exts[i].f;
    if (g->number == e.f->number && strcmp(g->extendee, e.f->extendee) == 0) {
      *clash = &r->exts[i];
      return 1;
    }
  }
  r->exts[i] = e;
  r->ext_count++;
  return 1;
}

/* The table starts with every extension of the dependencies; the file's
 * own are added as they are checked, so a clash is reported only with one
 * checked before, as protoc does. */
static int ext_table_init(R *r) {
  if (r->exts != NULL) return 1;
  r->ext_cap = 64;
  r->exts = pc_Arena_Calloc(r->a, r->ext_cap * sizeof *r->exts);
  if (r->exts == NULL) return oom(r);
  for (size_t i = 0; i < r->cap; i++) {
    const Sym *s = &r->slots[i];
    if (s->name == NULL || s->kind != kSymField || s->owner != NULL) continue;
    const pc_FieldDesc *f = s->desc;
    if (s->file == file_index_self(r) || f->extendee == NULL) continue;
    const struct ExtEntry *clash = NULL; /* deps were validated; first wins */
    if (!ext_add(r, (struct ExtEntry){f, s->name, s->len}, &clash)) return 0;
  }
  return 1;
}

static int check_extensions(R *r, pc_FieldDesc *xs, size_t n, const char *scope) {
  if (n > 0 && !ext_table_init(r)) return 0;
  for (size_t i = 0; i < n; i++) {
    if (!check_field(r, &xs[i], 1, NULL) || !check_extension(r, &xs[i])) return 0;
    char *full = join(r, scope, xs[i].name);
    if (full == NULL) return 0;
    if (xs[i].label == kPc_Label_Required)
      return fail_at(r, AT_TYPE(&xs[i]), "The extension %s cannot be required.", full);
    if (xs[i].extendee == NULL) continue;
    const struct ExtEntry *other = NULL;
    if (!ext_add(r, (struct ExtEntry){&xs[i], full, strlen(full)}, &other)) return 0;
    if (other != NULL)
      return fail_at(r, AT_NUMBER(&xs[i]),
                     "Extension number %d has already been used in \"%s\" by extension \"%.*s\".",
                     xs[i].number, xs[i].extendee + 1, (int)other->len, other->name);
  }
  return 1;
}

static int check_message_extensions(R *r, const char *scope, pc_MessageDesc *m) {
  char *full = join(r, scope, m->name);
  if (full == NULL) return 0;
  if (!check_extensions(r, m->extensions, m->extension_count, full)) return 0;
  for (size_t i = 0; i < m->nested_count; i++)
    if (!check_message_extensions(r, full, &m->nested[i])) return 0;
  return 1;
}

/* ---- custom options -------------------------------------------------------- */

/* Option values are written front to back (core/wire/wire.h). */
typedef pc_ByteBuf Buf;

static int buf_put(R *r, Buf *b, const void *data, size_t len) {
  return pc_ByteBuf_Put(b, r->a, data, len) || oom(r);
}

static int buf_varint(R *r, Buf *b, uint64_t v) {
  return pc_ByteBuf_PutVarint(b, r->a, v) || oom(r);
}

static int buf_tag(R *r, Buf *b, uint32_t number, int wt) {
  return buf_varint(r, b, ((uint64_t)number << 3) | (uint64_t)wt);
}

static int buf_fixed(R *r, Buf *b, uint64_t v, int bytes) {
  return pc_ByteBuf_PutFixed(b, r->a, v, bytes) || oom(r);
}

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t c = *(*p)++;
    v |= (uint64_t)(c & 0x7F) << shift;
    if (!(c & 0x80)) {
      *out = v;
      return 1;
    }
  }
  return 0;
}

/* Skips one field's value of wire type 'wt'; 0 when malformed. */
static int skip_value(const uint8_t **p, const uint8_t *end, int wt, uint32_t number, int depth) {
  uint64_t v;
  switch (wt) {
  case 0: return read_varint(p, end, &v);
  case 1:
    if (end - *p < 8) return 0;
    *p += 8;
    return 1;
  case 5:
    if (end - *p < 4) return 0;
    *p += 4;
    return 1;
  case 2:
    if (!read_varint(p, end, &v) || v > (uint64_t)(end - *p)) return 0;
    *p += v;
    return 1;
  case 3:
    if (depth > MAX_DEPTH) return 0;
    for (;;) {
      uint64_t tag;
      if (!read_varint(p, end, &tag)) return 0;
      if ((tag & 7) == 4) return (tag >> 3) == number;
      if (!skip_value(p, end, (int)(tag & 7), (uint32_t)(tag >> 3), depth + 1)) return 0;
    }
  default: return 0;
  }
}

/* A value to store, from an option statement. */
typedef enum { kVIdent, kVPos, kVNeg, kVDouble, kVString, kVAggregate, kVNone } VKind;

typedef struct {
  VKind kind;
  uint64_t u;
  int64_t i;
  double d;
  const char *s;
  size_t slen;
} Val;

typedef struct {
  R *r;
  int line, col;
  const char *option_name; /* "(foo).bar" as written, for errors */
} Ctx;

/* The full name of field 'f', for an error (a field's symbol is a
 * NUL-terminated join()). */
static const char *field_full_name(const R *r, const pc_FieldDesc *f) {
  for (size_t i = 0; i < r->cap; i++)
    if (r->slots[i].name && r->slots[i].desc == f) return r->slots[i].name;
  return f->name;
}

#define FN() field_full_name(r, f)

static const char *kTypeWord[19] = {NULL,    "double",  "float",  "int64",   "uint64",
                                    "int32", "uint64",  "uint32", "boolean", "string",
                                    "group", "message", "string", "uint32",  "enum",
                                    "int32", "int64",   "int32",  "int64"};

/* Encodes 'v' for scalar or enum field 'f', tag included; the
 * option-statement checks and wording of protoc's
 * OptionInterpreter::SetOptionValue. */
static int encode_scalar(Ctx *c, Buf *b, const pc_FieldDesc *f, const Val *v) {
  R *r = c->r;
  const char *tw = kTypeWord[f->type];
  uint64_t bits = 0;
  int wt = 0;
  switch (f->type) {
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: {
    int is64 =
        f->type == kPc_Type_Int64 || f->type == kPc_Type_Sint64 || f->type == kPc_Type_Sfixed64;
    int64_t x;
    if (v->kind == kVPos) {
      if (v->u > (is64 ? (uint64_t)INT64_MAX : (uint64_t)INT32_MAX))
        return fail_at(r, c->line, c->col, "Value out of range for %s option \"%s\".", tw, FN());
      x = (int64_t)v->u;
    } else if (v->kind == kVNeg) {
      if (!is64 && v->i < INT32_MIN)
        return fail_at(r, c->line, c->col, "Value out of range for %s option \"%s\".", tw, FN());
      x = v->i;
    } else {
      return fail_at(r, c->line, c->col, "Value must be integer for %s option \"%s\".", tw, FN());
    }
    if (f->type == kPc_Type_Sint32) {
      bits = (uint32_t)(((uint32_t)x << 1) ^ (x < 0 ? UINT32_MAX : 0u));
    } else if (f->type == kPc_Type_Sint64) {
      bits = ((uint64_t)x << 1) ^ (x < 0 ? UINT64_MAX : 0u);
    } else if (f->type == kPc_Type_Sfixed32) {
      bits = (uint32_t)(int32_t)x;
      wt = 5;
    } else if (f->type == kPc_Type_Sfixed64) {
      bits = (uint64_t)x;
      wt = 1;
    } else {
      bits = (uint64_t)x;
    }
    break;
  }
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: {
    int is64 = f->type == kPc_Type_Uint64 || f->type == kPc_Type_Fixed64;
    if (v->kind != kVPos)
      return fail_at(r, c->line, c->col, "Value must be non-negative integer for %s option \"%s\".",
                     tw, FN());
    if (!is64 && v->u > UINT32_MAX)
      return fail_at(r, c->line, c->col, "Value out of range for %s option \"%s\".", tw, FN());
    bits = v->u;
    if (f->type == kPc_Type_Fixed32) wt = 5;
    if (f->type == kPc_Type_Fixed64) wt = 1;
    break;
  }
  case kPc_Type_Float:
  case kPc_Type_Double: {
    double d;
    if (v->kind == kVDouble) {
      d = v->d;
    } else if (v->kind == kVPos) {
      d = (double)v->u;
    } else if (v->kind == kVNeg) {
      d = (double)v->i;
    } else {
      return fail_at(r, c->line, c->col, "Value must be number for %s option \"%s\".", tw, FN());
    }
    if (f->type == kPc_Type_Float) {
      float fl = (float)d;
      uint32_t u32;
      memcpy(&u32, &fl, 4);
      bits = u32;
      wt = 5;
    } else {
      memcpy(&bits, &d, 8);
      wt = 1;
    }
    break;
  }
  case kPc_Type_Bool:
    if (v->kind != kVIdent)
      return fail_at(r, c->line, c->col, "Value must be identifier for boolean option \"%s\".",
                     FN());
    if (strcmp(v->s, "true") == 0) {
      bits = 1;
    } else if (strcmp(v->s, "false") != 0) {
      return fail_at(r, c->line, c->col,
                     "Value must be \"true\" or \"false\" for boolean option \"%s\".", FN());
    }
    break;
  case kPc_Type_Enum: {
    const Sym *es = find_full(r, f->type_name);
    const pc_EnumDesc *e = es ? es->desc : NULL;
    if (v->kind != kVIdent)
      return fail_at(r, c->line, c->col, "Value must be identifier for enum-valued option \"%s\".",
                     FN());
    int found = 0;
    for (size_t i = 0; e && i < e->value_count && !found; i++)
      if (strcmp(e->values[i].name, v->s) == 0) {
        found = 1;
        bits = (uint64_t)(int64_t)e->values[i].number;
      }
    if (!found)
      return fail_at(r, c->line, c->col,
                     "Enum type \"%s\" has no value named \"%s\" for option \"%s\".",
                     f->type_name + 1, v->s, FN());
    break;
  }
  case kPc_Type_String:
  case kPc_Type_Bytes:
    if (v->kind != kVString)
      return fail_at(r, c->line, c->col, "Value must be quoted string for string option \"%s\".",
                     FN());
    return buf_tag(r, b, (uint32_t)f->number, 2) && buf_varint(r, b, v->slen) &&
           buf_put(r, b, v->s, v->slen);
  default: return fail_at(r, c->line, c->col, "Option \"%s\" is not a scalar.", FN());
  }
  if (!buf_tag(r, b, (uint32_t)f->number, wt)) return 0;
  if (wt == 0) return buf_varint(r, b, bits);
  return buf_fixed(r, b, bits, wt == 5 ? 4 : 8);
}

#undef FN

/* A field of an option name part ("(opt).a.b"): by field name, as
 * protoc's OptionInterpreter looks it up (a group by its field's name, "g",
 * not its type's). */
static const pc_FieldDesc *find_field(const pc_MessageDesc *m, const char *name, size_t len) {
  for (size_t i = 0; i < m->field_count; i++)
    if (strlen(m->fields[i].name) == len && memcmp(m->fields[i].name, name, len) == 0)
      return &m->fields[i];
  return NULL;
}

/* ---- aggregate option values ---------------------------------------------- */

/* `option (o) = { a: 1 b { c: "x" } };` is text format, read by core/text as
 * protoc's option interpreter has TextFormat::Parser read it: into a message
 * of the option's type (a DynamicMessage in protoc) whose bytes become the
 * option's value. The message types come from a scratch pool built on first
 * use with the files the value needs (the types the resolver works on are
 * descriptions; a pool makes definitions of them), freed after the file. */

/* The scratch pool draws from the resolver's arena: every byte counted,
 * all of it freed with the arena. */
static void *arena_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  if (nsize == 0) return NULL;
  void *p = pc_Arena_Malloc(ud, nsize);
  if (p != NULL && ptr != NULL) memcpy(p, ptr, osize < nsize ? osize : nsize);
  return p;
}

/* Copies, in place of '*enums' and '*messages' (nested ones too), with every
 * enum's aliases allowed: protoc checks aliases after the options
 * (validate_enum), so the scratch pool must not refuse them first. 0 when
 * memory runs out. */
static int allow_aliases(R *r, pc_EnumDesc **enums, size_t ne, pc_MessageDesc **messages,
                         size_t nm) {
  pc_EnumDesc *e = ne ? pc_Arena_Malloc(r->a, ne * sizeof *e) : NULL;
  pc_MessageDesc *m = nm ? pc_Arena_Malloc(r->a, nm * sizeof *m) : NULL;
  if ((ne && e == NULL) || (nm && m == NULL)) return 0;
  if (ne) *enums = memcpy(e, *enums, ne * sizeof *e);
  if (nm) *messages = memcpy(m, *messages, nm * sizeof *m);
  for (size_t i = 0; i < ne; i++) e[i].allow_alias = 1;
  for (size_t i = 0; i < nm; i++)
    if (!allow_aliases(r, &m[i].enums, m[i].enum_count, &m[i].nested, m[i].nested_count)) return 0;
  return 1;
}

/* File 'index' in the scratch pool, what it imports first; NULL with the
 * error set when the pool refuses it. */
static const pc_FileDef *scratch_file(R *r, int index) {
  const pc_FileDesc *f = file_of(r, index);
  const pc_FileDef *def = pc_Pool_FindFile(r->scratch, f->name);
  if (def != NULL) return def;
  for (size_t i = 0; i < f->dependency_count; i++) {
    int d = dep_index(r, f->dependencies[i]);
    if (d >= 0 && scratch_file(r, d) == NULL) return NULL;
  }
  pc_FileDesc self;
  if (index == file_index_self(r)) {
    self = *f;
    if (!allow_aliases(r, &self.enums, self.enum_count, &self.messages, self.message_count)) {
      oom(r);
      return NULL;
    }
    f = &self;
  }
  pc_Error err;
  pc_Error_Init(&err);
  def = pc_Pool_AddFile(r->scratch, f, &err);
  if (def == NULL && strstr(err.msg, "out of memory") != NULL) oom(r);
  if (def == NULL) fail_at(r, 0, 0, "%s", err.msg);
  return def;
}

/* The scratch pool's definition of message 's'. */
static const pc_MessageDef *scratch_message(R *r, const Sym *s) {
  if (r->scratch == NULL && (r->scratch = pc_Pool_New(arena_alloc, r->a)) == NULL) {
    oom(r);
    return NULL;
  }
  return scratch_file(r, s->file) != NULL ? pc_Pool_FindMessage(r->scratch, s->name) : NULL;
}

/* protoc's AggregateOptionFinder::FindExtension: 'name' looked up from the
 * message's scope; a MessageSet also takes the name of a message type
 * declaring one extension of it. */
static const pc_FieldDef *find_extension(void *ud, const pc_MessageDef *m, const char *name) {
  R *r = ud;
  const Sym *ms = find(r, m->full_name, strlen(m->full_name));
  const Sym *s = lookup(r, name, m->full_name, 0);
  const char *full = s != NULL && s->kind == kSymField ? s->name : NULL;
  if (ms == NULL || s == NULL) return NULL;
  if (s->kind == kSymMessage && ((const pc_MessageDesc *)ms->desc)->message_set_wire_format) {
    const pc_MessageDesc *holder = s->desc;
    for (size_t i = 0; i < holder->extension_count && full == NULL; i++)
      if (find_full(r, holder->extensions[i].extendee) == ms)
        full = join(r, s->name, holder->extensions[i].name);
  }
  const Sym *fs = full != NULL ? find(r, full, strlen(full)) : NULL;
  if (fs == NULL || fs->kind != kSymField || scratch_file(r, fs->file) == NULL) return NULL;
  return pc_Pool_FindExtension(r->scratch, full);
}

/* protoc's AggregateOptionFinder::FindAnyType: the two type URL prefixes
 * it knows, then the type by its full name. */
static const pc_MessageDef *find_any_type(void *ud, const char *url) {
  R *r = ud;
  const char *type = strrchr(url, '/') + 1;
  if ((size_t)(type - url) != 20 || (memcmp(url, "type.googleapis.com/", 20) != 0 &&
                                     memcmp(url, "type.googleprod.com/", 20) != 0))
    return NULL;
  const Sym *s = find(r, type, strlen(type));
  return s != NULL && s->kind == kSymMessage ? scratch_message(r, s) : NULL;
}

/* The aggregate value 'text' of option 'name' (of message type 'type'),
 * encoded into 'out' (the message's bytes, as protoc serializes it); '*def'
 * the type's definition. */
static int aggregate(R *r, const Ctx *c, const Sym *type, const char *name, const char *text,
                     size_t len, Buf *out, const pc_MessageDef **def) {
  const pc_MessageDef *m = *def = scratch_message(r, type);
  if (m == NULL) return r->failed ? 0 : oom(r);
  pc_Message *msg = pc_Message_New(m, r->a);
  if (msg == NULL) return oom(r);
  pc_TextFinder finder = {find_extension, find_any_type, r};
  pc_TextParseOptions o;
  memset(&o, 0, sizeof o);
  o.max_depth = MAX_TEXT_DEPTH;
  o.finder = &finder;
  o.protoc = 1;
  pc_Error err;
  pc_Error_Init(&err);
  pc_TextStatus st = pc_Text_Parse(text, len, msg, m, r->a, &o, &err);
  if (r->failed) return 0; /* the scratch pool refused a file the finder needed */
  if (st == kPc_TextStatus_OutOfMemory) return oom(r);
  if (st != kPc_TextStatus_Ok)
    return fail_at(r, c->line, c->col, "Error while parsing option value for \"%s\": %s", name,
                   err.msg);
  pc_WireWriter w;
  pc_WireWriter_Init(&w, arena_alloc, r->a);
  static const pc_EncodeOptions kAsWritten = {0, 1}; /* maps in the order written */
  pc_EncodeStatus es = pc_Encode(msg, m, &kAsWritten, &w, &err);
  int ok =
      es == kPc_EncodeStatus_Ok && buf_put(r, out, pc_WireWriter_Data(&w), pc_WireWriter_Size(&w));
  pc_WireWriter_Free(&w);
  if (es == kPc_EncodeStatus_OutOfMemory) return oom(r);
  if (es != kPc_EncodeStatus_Ok) /* a proto3 string that is not UTF-8 */
    return fail_at(r, c->line, c->col, "Error while parsing option value for \"%s\": %s", name,
                   err.msg);
  return ok;
}

/* ---- options set so far ------------------------------------------------------ */

/* What a *Options message has had set so far, as protoc's
 * ExamineIfOptionIsSet reads it from the options interpreted before: a tree
 * of field numbers with a path for each option's name ("(o).n.a": o, n, a)
 * and, below an aggregate value, one for each field the value sets. A
 * non-repeated option whose path is in the tree was already set: "(o).a"
 * after "(o) = { a: 1 }", "(o)" after "(o).a". Node 0 is the message. */
typedef struct {
  struct OptEdge {
    size_t parent, child; /* child 0: a free slot */
    int32_t number;
  } * slots;
  size_t cap, count; /* edges; node ids 1..count */
} OptTree;

static size_t edge_hash(size_t parent, int32_t number) {
  return (size_t)(((uint64_t)parent * 0x9E3779B97F4A7C15ull) ^ (uint32_t)number) * 2654435761u;
}

/* The node below 'parent' for field 'number', added when 'add' (else 0
 * when there is none); 0 with 'r' failed when memory runs out. */
static size_t opt_child(R *r, OptTree *t, size_t parent, int32_t number, int add) {
  for (size_t i = t->cap ? edge_hash(parent, number) & (t->cap - 1) : 0;
       t->cap && t->slots[i].child != 0; i = (i + 1) & (t->cap - 1))
    if (t->slots[i].parent == parent && t->slots[i].number == number) return t->slots[i].child;
  if (!add) return 0;
  if ((t->count + 1) * 2 > t->cap) {
    size_t nc = t->cap ? 2 * t->cap : 16;
    struct OptEdge *grown = pc_Arena_Calloc(r->a, nc * sizeof *grown);
    if (grown == NULL) return (size_t)oom(r);
    for (size_t k = 0; k < t->cap; k++) {
      if (t->slots[k].child == 0) continue;
      size_t i = edge_hash(t->slots[k].parent, t->slots[k].number) & (nc - 1);
      while (grown[i].child != 0) i = (i + 1) & (nc - 1);
      grown[i] = t->slots[k];
    }
    t->slots = grown;
    t->cap = nc;
  }
  size_t i = edge_hash(parent, number) & (t->cap - 1);
  while (t->slots[i].child != 0) i = (i + 1) & (t->cap - 1);
  t->slots[i] = (struct OptEdge){parent, ++t->count, number};
  return t->count;
}

/* Adds below 'node' the fields the message bytes [p, end) of type 'm' set
 * (an aggregate option value), into their sub-messages and groups. */
static int opt_expand(R *r, OptTree *t, size_t node, const uint8_t *p, const uint8_t *end,
                      const pc_MessageDef *m, uint32_t group) {
  while (p < end) {
    uint64_t tag, len;
    if (!read_varint(&p, end, &tag)) return 0;
    uint32_t number = (uint32_t)(tag >> 3);
    int wt = (int)(tag & 7);
    if (wt == 4) return number == group;
    size_t child = opt_child(r, t, node, (int32_t)number, 1);
    if (child == 0) return 0;
    const pc_FieldDef *f = pc_MessageDef_FindFieldByNumber(m, (int32_t)number);
    if (f == NULL && r->scratch != NULL)
      f = pc_Pool_FindExtensionByNumber(r->scratch, m, (int32_t)number);
    const pc_MessageDef *sub = f != NULL ? f->message : NULL;
    if (wt == 2 && sub != NULL) {
      if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p) ||
          !opt_expand(r, t, child, p, p + len, sub, 0))
        return 0;
      p += len;
    } else if (wt == 3 && sub != NULL) {
      const uint8_t *q = p; /* the group's fields, up to its end tag */
      if (!skip_value(&p, end, 3, number, 0) || !opt_expand(r, t, child, q, p, sub, number))
        return 0;
    } else if (!skip_value(&p, end, wt, number, 0)) {
      return 0;
    }
  }
  return group == 0;
}

/* ---- interpreting uninterpreted_option entries ------------------------------ */

/* A part of an option's name: "(pkg.ext)" or "field". */
typedef struct {
  const char *name; /* 'len' bytes, in the options */
  size_t len;
  int is_ext;
  const pc_FieldDesc *field; /* what it names, found by interpret_one */
} UnintPart;

typedef struct {
  UnintPart *parts; /* as many as written */
  size_t nparts;
  Val v;
  int line, col;   /* of the name */
  int vline, vcol; /* of the value */
} Unint;

/* 0 when malformed or out of memory (then 'r' has failed). */
static int decode_unint(R *r, const uint8_t *p, const uint8_t *end, Unint *u) {
  memset(u, 0, sizeof *u);
  u->v.kind = kVNone;
  size_t n = 0;
  for (const uint8_t *q = p; q < end;) {
    uint64_t tag;
    if (!read_varint(&q, end, &tag) ||
        !skip_value(&q, end, (int)(tag & 7), (uint32_t)(tag >> 3), 0))
      return 0;
    n += (tag >> 3) == 2;
  }
  if (n > 0 && (u->parts = pc_Arena_Calloc(r->a, n * sizeof *u->parts)) == NULL) return oom(r);
  while (p < end) {
    uint64_t tag, x = 0;
    if (!read_varint(&p, end, &tag)) return 0;
    uint32_t num = (uint32_t)(tag >> 3);
    int wt = (int)(tag & 7);
    const uint8_t *start = p;
    if (!skip_value(&p, end, wt, num, 0)) return 0;
    const uint8_t *q = start;
    if (wt == 2) read_varint(&q, p, &x);
    switch (num) {
    case 2: {
      if (wt != 2 || u->nparts == n) return 0;
      UnintPart *part = &u->parts[u->nparts++];
      while (q < p) {
        uint64_t t2, y;
        if (!read_varint(&q, p, &t2)) return 0;
        if ((t2 >> 3) == 1 && (t2 & 7) == 2) {
          if (!read_varint(&q, p, &y) || y > (uint64_t)(p - q)) return 0;
          part->name = (const char *)q;
          part->len = (size_t)y;
          q += y;
        } else if ((t2 >> 3) == 2 && (t2 & 7) == 0) {
          if (!read_varint(&q, p, &y)) return 0;
          part->is_ext = (int)y;
        } else if (!skip_value(&q, p, (int)(t2 & 7), (uint32_t)(t2 >> 3), 0)) {
          return 0;
        }
      }
      break;
    }
    case 3:
    case 7:
    case 8:
      if (wt != 2) return 0;
      u->v.kind = num == 3 ? kVIdent : num == 7 ? kVString : kVAggregate;
      u->v.s = (const char *)q;
      u->v.slen = (size_t)(p - q);
      break;
    case 4:
      q = start;
      read_varint(&q, p, &x);
      u->v.kind = kVPos;
      u->v.u = x;
      break;
    case 5:
      q = start;
      read_varint(&q, p, &x);
      u->v.kind = kVNeg;
      u->v.i = (int64_t)x;
      break;
    case 6: {
      if (wt != 1) return 0;
      uint64_t bits = 0;
      for (int i = 0; i < 8; i++) bits |= (uint64_t)start[i] << (8 * i);
      memcpy(&u->v.d, &bits, 8);
      u->v.kind = kVDouble;
      break;
    }
    case 1000:
    case 1001:
    case 1002:
    case 1003:
      q = start;
      read_varint(&q, p, &x);
      if (num == 1000) u->line = (int)x;
      if (num == 1001) u->col = (int)x;
      if (num == 1002) u->vline = (int)x;
      if (num == 1003) u->vcol = (int)x;
      break;
    default: break;
    }
  }
  return 1;
}

/* Interprets one option into 'out' (one encoded record). 'scope' is the
 * full name of the element (protoc's name_scope); 'opts_type' the full name
 * of its *Options message. */
static int interpret_one(R *r, Unint *u, const char *scope, const char *opts_type, Buf *out,
                         OptTree *set) {
  const Sym *msym = find(r, opts_type, strlen(opts_type));
  if (msym == NULL)
    return fail_at(r, u->line, u->col,
                   "Option \"(%.*s)\" unknown. Ensure that your proto definition file imports "
                   "the proto which defines the option.",
                   (int)u->parts[0].len, u->parts[0].name);
  /* the name as far as it is read, "(a.b).c.(d)", for errors (protoc's
   * debug_msg_name) */
  Buf name = {0};
  const char *dbg = NULL;
  for (size_t i = 0; i < u->nparts; i++) {
    const pc_FieldDesc *f = NULL;
    const UnintPart *up = &u->parts[i];
    char *part = pc_Arena_StrDup(r->a, up->name, up->len);
    if (part == NULL) return oom(r);
    if (name.n > 0) name.n--; /* the NUL */
    if ((i > 0 && !buf_put(r, &name, ".", 1)) || (up->is_ext && !buf_put(r, &name, "(", 1)) ||
        !buf_put(r, &name, up->name, up->len) || (up->is_ext && !buf_put(r, &name, ")", 1)) ||
        !buf_put(r, &name, "", 1))
      return 0;
    dbg = (const char *)name.p;
    if (up->is_ext) {
      const Sym *s = lookup(r, part, scope, 0);
      if (s != NULL && s->kind == kSymField) f = s->desc;
      if (f == NULL) {
        if (r->undefined_resolved != NULL)
          return fail_at(r, u->line, u->col,
                         "Option \"%s\" is resolved to \"(%s)\", which is not defined. The "
                         "innermost scope is searched first in name resolution. Consider using a "
                         "leading '.'(i.e., \"(.%s\") to start from the outermost scope.",
                         dbg, r->undefined_resolved, dbg + 1);
        return fail_at(r, u->line, u->col,
                       "Option \"%s\" unknown. Ensure that your proto definition file imports "
                       "the proto which defines the option.",
                       dbg);
      }
      if (f->extendee == NULL || find_full(r, f->extendee) != msym) {
        const pc_MessageDesc *om = msym->desc;
        return fail_at(r, u->line, u->col,
                       "Option field \"%s\" is not a field or extension of message \"%s\".", dbg,
                       om->name);
      }
    } else {
      f = find_field(msym->desc, up->name, up->len);
      if (f == NULL)
        return fail_at(r, u->line, u->col,
                       "Option \"%s\" unknown. Ensure that your proto definition file imports "
                       "the proto which defines the option.",
                       dbg);
    }
    u->parts[i].field = f;
    if (i + 1 < u->nparts) {
      if (f->type != kPc_Type_Message && f->type != kPc_Type_Group)
        return fail_at(r, u->line, u->col, "Option \"%s\" is an atomic type, not a message.", dbg);
      if (f->label == kPc_Label_Repeated)
        return fail_at(r, u->line, u->col,
                       "Option field \"%s\" is a repeated message. Repeated message options "
                       "must be initialized using an aggregate value.",
                       dbg);
      msym = find_full(r, f->type_name);
      if (msym == NULL) return fail_at(r, u->line, u->col, "Option \"%s\" unknown.", dbg);
    }
  }
  const pc_FieldDesc *leaf = u->parts[u->nparts - 1].field;
  size_t node = 0; /* the option's path in the options set so far */
  for (size_t i = 0; i < u->nparts && (i == 0 || node != 0); i++)
    node = opt_child(r, set, node, u->parts[i].field->number, 0);
  if (r->failed) return 0;
  if (node != 0 && leaf->label != kPc_Label_Repeated)
    return fail_at(r, u->line, u->col, "Option \"%s\" was already set.", dbg);
  node = 0;
  for (size_t i = 0; i < u->nparts; i++)
    if ((node = opt_child(r, set, node, u->parts[i].field->number, 1)) == 0) return 0;
  Ctx c = {r, u->vline, u->vcol, dbg}; /* value errors point at the value */
  Buf val = {0};
  if (leaf->type == kPc_Type_Message || leaf->type == kPc_Type_Group) {
    if (u->v.kind != kVAggregate) {
      return fail_at(r, u->vline, u->vcol,
                     "Option \"%s\" is a message. To set the entire message, use syntax like "
                     "\"%s = { <proto text format> }\". To set fields within it, use syntax like "
                     "\"%s.foo = value\".",
                     field_full_name(r, leaf), leaf->name, leaf->name);
    }
    const Sym *ms = find_full(r, leaf->type_name);
    if (ms == NULL) return fail_at(r, u->line, u->col, "Option \"%s\" unknown.", dbg);
    Buf body = {0};
    const pc_MessageDef *def;
    if (!aggregate(r, &c, ms, leaf->name, u->v.s, u->v.slen, &body, &def) ||
        !opt_expand(r, set, node, body.p, body.p + body.n, def, 0))
      return r->failed ? 0 : fail_at(r, u->vline, u->vcol, "malformed option value");
    if (leaf->type == kPc_Type_Group) {
      if (!buf_tag(r, &val, (uint32_t)leaf->number, 3) || !buf_put(r, &val, body.p, body.n) ||
          !buf_tag(r, &val, (uint32_t)leaf->number, 4))
        return 0;
    } else if (!buf_tag(r, &val, (uint32_t)leaf->number, 2) || !buf_varint(r, &val, body.n) ||
               !buf_put(r, &val, body.p, body.n)) {
      return 0;
    }
  } else {
    if (u->v.kind == kVAggregate)
      return fail_at(r, u->line, u->col, "Option \"%s\" is an atomic type, not a message.", dbg);
    Val v = u->v;
    char *ident = NULL;
    if (v.kind == kVIdent) {
      ident = pc_Arena_StrDup(r->a, v.s, v.slen);
      if (ident == NULL) return oom(r);
      v.s = ident;
    }
    if (!encode_scalar(&c, &val, leaf, &v)) return 0;
  }
  /* wrapped in the intermediate messages: their sizes innermost first, then
   * the bytes front to back, so a long name costs as much as it is long */
  size_t n = u->nparts, *size = pc_Arena_Malloc(r->a, n * sizeof *size);
  if (size == NULL) return oom(r);
  size[n - 1] = val.n;
  for (size_t i = n - 1; i-- > 0;) {
    const pc_FieldDesc *f = u->parts[i].field;
    size_t tag = pc_Wire_VarintSize((uint64_t)(uint32_t)f->number << 3);
    size[i] = f->type == kPc_Type_Group ? 2 * tag + size[i + 1]
                                        : tag + pc_Wire_VarintSize(size[i + 1]) + size[i + 1];
  }
  for (size_t i = 0; i + 1 < n; i++) {
    const pc_FieldDesc *f = u->parts[i].field;
    if (f->type == kPc_Type_Group
            ? !buf_tag(r, out, (uint32_t)f->number, 3)
            : !buf_tag(r, out, (uint32_t)f->number, 2) || !buf_varint(r, out, size[i + 1]))
      return 0;
  }
  if (!buf_put(r, out, val.p, val.n)) return 0;
  for (size_t i = n - 1; i-- > 0;) {
    const pc_FieldDesc *f = u->parts[i].field;
    if (f->type == kPc_Type_Group && !buf_tag(r, out, (uint32_t)f->number, 4)) return 0;
  }
  return 1;
}

/* Interprets the uninterpreted_option entries of 'o'; with 'md' (a
 * method's options), keeps where each custom option was first set in
 * md->option_positions. */
static int interpret_options(R *r, pc_OptionsDesc *o, const char *scope, const char *opts_type,
                             pc_MethodDesc *md) {
  if (!o->present || o->size == 0) return 1;
  const uint8_t *p = o->data, *end = o->data + o->size;
  size_t any = 0;
  while (p < end) {
    uint64_t tag;
    if (!read_varint(&p, end, &tag)) break;
    if ((tag >> 3) == 999) any++;
    if (!skip_value(&p, end, (int)(tag & 7), (uint32_t)(tag >> 3), 0)) break;
  }
  if (!any) return 1;
  if (md != NULL) {
    md->option_positions = pc_Arena_Malloc(r->a, any * sizeof *md->option_positions);
    if (md->option_positions == NULL) return oom(r);
    md->option_position_count = 0;
  }
  Buf out = {0};
  OptTree set = {NULL, 0, 0};
  p = o->data;
  while (p < end) {
    const uint8_t *start = p;
    uint64_t tag, len;
    if (!read_varint(&p, end, &tag)) return fail_at(r, 0, 0, "malformed options");
    if ((tag >> 3) != 999) {
      if (!skip_value(&p, end, (int)(tag & 7), (uint32_t)(tag >> 3), 0))
        return fail_at(r, 0, 0, "malformed options");
      if (!buf_put(r, &out, start, (size_t)(p - start))) return 0;
      continue;
    }
    if ((tag & 7) != 2 || !read_varint(&p, end, &len) || len > (uint64_t)(end - p))
      return fail_at(r, 0, 0, "malformed options");
    Unint u;
    if (!decode_unint(r, p, p + len, &u) || u.nparts == 0)
      return fail_at(r, 0, 0, "malformed options");
    p += len;
    if (!interpret_one(r, &u, scope, opts_type, &out, &set)) return 0;
    if (md != NULL && u.parts[0].is_ext && u.line > 0) {
      int32_t number = u.parts[0].field->number;
      size_t k = 0;
      while (k < md->option_position_count && md->option_positions[k].number != number) k++;
      if (k == md->option_position_count) {
        pc_OptionPos *at = &md->option_positions[md->option_position_count++];
        at->number = number;
        at->line = u.line;
        at->column = u.col;
      }
    }
  }
  o->data = out.p;
  o->size = out.n;
  return 1;
}

static int interpret(R *r, pc_OptionsDesc *o, const char *scope, const char *opts_type) {
  return interpret_options(r, o, scope, opts_type, NULL);
}

static int interpret_field(R *r, pc_FieldDesc *f, const char *scope) {
  char *full = join(r, scope, f->name);
  return full != NULL && interpret(r, &f->options, full, "google.protobuf.FieldOptions");
}

static int interpret_enum(R *r, pc_EnumDesc *e, const char *scope) {
  char *full = join(r, scope, e->name);
  if (full == NULL || !interpret(r, &e->options, full, "google.protobuf.EnumOptions")) return 0;
  for (size_t i = 0; i < e->value_count; i++) {
    char *vn = join(r, full, e->values[i].name);
    if (vn == NULL || !interpret(r, &e->values[i].options, vn, "google.protobuf.EnumValueOptions"))
      return 0;
  }
  return 1;
}

static int interpret_message(R *r, pc_MessageDesc *m, const char *scope) {
  char *full = join(r, scope, m->name);
  if (full == NULL || !interpret(r, &m->options, full, "google.protobuf.MessageOptions")) return 0;
  for (size_t i = 0; i < m->field_count; i++)
    if (!interpret_field(r, &m->fields[i], full)) return 0;
  for (size_t i = 0; i < m->oneof_count; i++) {
    char *on = join(r, full, m->oneofs[i].name);
    if (on == NULL || !interpret(r, &m->oneofs[i].options, on, "google.protobuf.OneofOptions"))
      return 0;
  }
  for (size_t i = 0; i < m->nested_count; i++)
    if (!interpret_message(r, &m->nested[i], full)) return 0;
  for (size_t i = 0; i < m->enum_count; i++)
    if (!interpret_enum(r, &m->enums[i], full)) return 0;
  for (size_t i = 0; i < m->extension_range_count; i++)
    if (!interpret(r, &m->extension_ranges[i].options, full,
                   "google.protobuf.ExtensionRangeOptions"))
      return 0;
  for (size_t i = 0; i < m->extension_count; i++)
    if (!interpret_field(r, &m->extensions[i], full)) return 0;
  return 1;
}

/* ---- float defaults ----------------------------------------------------------- */

static int float_defaults(R *r, pc_FieldDesc *fs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    pc_FieldDesc *f = &fs[i];
    if (f->type != kPc_Type_Float || f->default_value == NULL) continue;
    char buf[32];
    pc_FormatFloat((float)strtod(f->default_value, NULL), buf);
    if (strcmp(f->default_value, "-nan") == 0) strcpy(buf, "nan");
    f->default_value = pc_Arena_StrDup(r->a, buf, strlen(buf));
    if (f->default_value == NULL) return oom(r);
  }
  return 1;
}

static int message_float_defaults(R *r, pc_MessageDesc *m) {
  if (!float_defaults(r, m->fields, m->field_count) ||
      !float_defaults(r, m->extensions, m->extension_count))
    return 0;
  for (size_t i = 0; i < m->nested_count; i++)
    if (!message_float_defaults(r, &m->nested[i])) return 0;
  return 1;
}

/* Custom options, once every type is known. */
static int interpret_file(R *r, pc_FileDesc *file, const char *pkg) {
  for (size_t i = 0; i < file->message_count; i++)
    if (!interpret_message(r, &file->messages[i], pkg)) return 0;
  for (size_t i = 0; i < file->enum_count; i++)
    if (!interpret_enum(r, &file->enums[i], pkg)) return 0;
  for (size_t i = 0; i < file->extension_count; i++)
    if (!interpret_field(r, &file->extensions[i], pkg)) return 0;
  for (size_t i = 0; i < file->service_count; i++) {
    pc_ServiceDesc *s = &file->services[i];
    char *sn = join(r, pkg, s->name);
    if (sn == NULL || !interpret(r, &s->options, sn, "google.protobuf.ServiceOptions")) return 0;
    for (size_t k = 0; k < s->method_count; k++) {
      char *mn = join(r, sn, s->methods[k].name);
      if (mn == NULL || !interpret_options(r, &s->methods[k].options, mn,
                                           "google.protobuf.MethodOptions", &s->methods[k]))
        return 0;
    }
  }
  r->in_file_options = 1; /* last, as protoc builds the file's own options after its contents */
  char *dummy = join(r, pkg, "dummy");
  return dummy != NULL && interpret(r, &file->options, dummy, "google.protobuf.FileOptions") &&
         !r->failed;
}

/* ---- entry point ---------------------------------------------------------- */

static int resolve(R *r, const pc_LaterError *later) {
  pc_FileDesc *file = r->file;
  size_t dots = 0;
  for (const char *q = file->package ? file->package : ""; *q; q++) dots += *q == '.';
  if (dots > PC_PACKAGE_MAX_DOTS) /* before anything else protoc checks (the length: load.c) */
    return fail_at(r, file->package_line, file->package_column, "Exceeds Maximum Package Depth");
  if (later != NULL && later->error.set && later->early) {
    pc_Error_Set(r->err, "%s", later->error.msg);
    return 0;
  }
  r->visible = pc_Arena_Calloc(r->a, r->ndeps + 1);
  if (r->visible == NULL) return oom(r);

  /* imports: each once, each present */
  for (size_t i = 0; i < file->dependency_count; i++) {
    for (size_t k = 0; k < i; k++)
      if (strcmp(file->dependencies[k], file->dependencies[i]) == 0)
        return fail_at(r, 0, 0, "Import \"%s\" was listed twice.", file->dependencies[i]);
    int d = dep_index(r, file->dependencies[i]);
    if (d < 0)
      return fail_at(r, 0, 0, "Import \"%s\" was not found or had errors.", file->dependencies[i]);
    mark_public(r, d);
    r->visible[d] = 1;
  }
  size_t estimate = count_file_syms(file);
  for (size_t i = 0; i < r->ndeps; i++) estimate += count_file_syms(r->deps[i]);
  r->cap = 64;
  while (r->cap < estimate * 2) r->cap *= 2;
  r->slots = pc_Arena_Calloc(r->a, r->cap * sizeof *r->slots);
  if (r->slots == NULL) return oom(r);
  for (size_t i = 0; i < r->ndeps; i++)
    if (!add_file_syms(r, r->deps[i], (int)i)) return 0;
  if (!add_file_syms(r, file, file_index_self(r))) return 0;

  const char *pkg = file->package && file->package[0] ? file->package : NULL;
  for (size_t i = 0; i < file->message_count; i++)
    if (!resolve_message(r, pkg, &file->messages[i])) return 0;
  for (size_t i = 0; i < file->extension_count; i++) {
    char *n = join(r, pkg, file->extensions[i].name);
    if (n == NULL || !resolve_field(r, &file->extensions[i], n)) return 0;
  }
  for (size_t i = 0; i < file->service_count; i++) {
    pc_ServiceDesc *s = &file->services[i];
    char *sn = join(r, pkg, s->name);
    if (sn == NULL) return 0;
    for (size_t k = 0; k < s->method_count; k++) {
      pc_MethodDesc *md = &s->methods[k];
      char *mn = join(r, sn, md->name);
      if (mn == NULL) return 0;
      const char **types[2] = {&md->input_type, &md->output_type};
      for (int j = 0; j < 2; j++) {
        const Sym *t = lookup(r, *types[j], mn, 0);
        int line = md->type_line[j] ? md->type_line[j] : md->line;
        int col = md->type_line[j] ? md->type_column[j] : md->column;
        if (t == NULL) return not_defined(r, line, col, *types[j]);
        if (t->kind != kSymMessage)
          return fail_at(r, line, col, "\"%s\" is not a message type.", *types[j]);
        if ((*types[j] = dotted(r, t)) == NULL) return 0;
      }
    }
  }

  for (size_t i = 0; i < file->message_count; i++)
    if (!check_message(r, pkg, &file->messages[i])) return 0;
  for (size_t i = 0; i < file->enum_count; i++)
    if (!check_enum(r, &file->enums[i])) return 0;
  if (!check_extensions(r, file->extensions, file->extension_count, pkg)) return 0;
  for (size_t i = 0; i < file->message_count; i++)
    if (!check_message_extensions(r, pkg, &file->messages[i])) return 0;

  for (size_t i = 0; i < file->message_count; i++)
    if (!message_float_defaults(r, &file->messages[i])) return 0;
  if (!float_defaults(r, file->extensions, file->extension_count)) return 0;

  /* custom options, now that every type is known; a standard option's error
   * from the parser comes first unless a custom one fails before it */
  if (later == NULL || !later->error.set) {
    if (!interpret_file(r, file, pkg)) return 0;
  } else {
    pc_Error inner;
    pc_Error_Init(&inner);
    pc_Error *err = r->err;
    r->err = &inner;
    int ok = interpret_file(r, file, pkg);
    int before =
        r->fail_line < later->line || (r->fail_line == later->line && r->fail_col < later->column);
    if (r->in_file_options != later->file_level) before = later->file_level; /* those go last */
    int custom_first = !ok && (r->fail_line <= 0 || before);
    r->err = err;
    pc_Error_Set(err, "%s", custom_first ? inner.msg : later->error.msg);
    return 0;
  }

  /* what protoc validates last: enum values, then the parser's own */
  for (size_t i = 0; i < file->enum_count; i++)
    if (!validate_enum(r, pkg, &file->enums[i])) return 0;
  for (size_t i = 0; i < file->message_count; i++)
    if (!validate_message_enums(r, pkg, &file->messages[i])) return 0;
  if (later != NULL && later->validate.set) {
    pc_Error_Set(r->err, "%s", later->validate.msg);
    return 0;
  }
  return !r->failed;
}

int pc_ResolveProto(pc_Arena *arena, pc_FileDesc *file, const pc_FileDesc *const *deps,
                    size_t dep_count, const pc_LaterError *later, pc_Error *err) {
  R r = {.a = arena,
         .err = err,
         .file = file,
         .deps = deps,
         .ndeps = dep_count,
         .undeclared_file = -1};
  int ok = resolve(&r, later);
  pc_Pool_Free(r.scratch); /* its memory is the arena's */
  return ok;
}
