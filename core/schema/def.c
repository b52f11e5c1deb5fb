#include "schema/def.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { kKind_File = 1, kKind_Message, kKind_Enum, kKind_Service, kKind_Extension };

typedef struct {
  const char *name; /* NULL: free */
  int kind;
  const void *def;
} NameEntry;

typedef struct {
  const pc_MessageDef *extendee; /* NULL: free */
  int32_t number;
  const pc_FieldDef *ext;
} ExtEntry;

struct pc_Pool {
  pc_Alloc *alloc;
  void *ud;
  int frozen;
  pc_FileDef **files;
  pc_Arena **arenas; /* one per file, parallel to 'files' */
  size_t file_count, file_cap;
  NameEntry *names;
  size_t name_count, name_cap;
  ExtEntry *exts;
  size_t ext_count, ext_cap;
};

/* -- Hashing -------------------------------------------------------------- */

static uint32_t hash_name(int kind, const char *s) {
  uint32_t h = 2166136261u ^ (uint32_t)kind;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static uint32_t hash_ext(const pc_MessageDef *m, int32_t number) {
  uintptr_t p = (uintptr_t)m;
  uint64_t h = ((uint64_t)p * 0x9E3779B97F4A7C15ull) ^ (uint32_t)number;
  h ^= h >> 29;
  return (uint32_t)(h * 0xBF58476D1CE4E5B9ull >> 32);
}

static void names_put(NameEntry *t, size_t cap, NameEntry e) {
  size_t i = hash_name(e.kind, e.name) & (cap - 1);
  while (t[i].name != NULL) i = (i + 1) & (cap - 1);
  t[i] = e;
}

static void exts_put(ExtEntry *t, size_t cap, ExtEntry e) {
  size_t i = hash_ext(e.extendee, e.number) & (cap - 1);
  while (t[i].extendee != NULL) i = (i + 1) & (cap - 1);
  t[i] = e;
}

static const void *names_get(const pc_Pool *p, int kind, const char *name) {
  if (p->name_cap == 0) return NULL;
  size_t i = hash_name(kind, name) & (p->name_cap - 1);
  while (p->names[i].name != NULL) {
    if (p->names[i].kind == kind && strcmp(p->names[i].name, name) == 0) return p->names[i].def;
    i = (i + 1) & (p->name_cap - 1);
  }
  return NULL;
}

/* Grows the name table so 'more' entries fit under a 1/2 load; 0 on
 * failure (table unchanged). */
static int names_reserve(pc_Pool *p, size_t more) {
  size_t need = p->name_count + more;
  if (need * 2 <= p->name_cap) return 1;
  size_t cap = p->name_cap ? p->name_cap : 64;
  while (cap < need * 2) cap *= 2;
  NameEntry *t = p->alloc(p->ud, NULL, 0, cap * sizeof(NameEntry));
  if (t == NULL) return 0;
  memset(t, 0, cap * sizeof(NameEntry));
  for (size_t i = 0; i < p->name_cap; i++)
    if (p->names[i].name != NULL) names_put(t, cap, p->names[i]);
  if (p->names != NULL) p->alloc(p->ud, p->names, p->name_cap * sizeof(NameEntry), 0);
  p->names = t;
  p->name_cap = cap;
  return 1;
}

static int exts_reserve(pc_Pool *p, size_t more) {
  size_t need = p->ext_count + more;
  if (need * 2 <= p->ext_cap) return 1;
  size_t cap = p->ext_cap ? p->ext_cap : 16;
  while (cap < need * 2) cap *= 2;
  ExtEntry *t = p->alloc(p->ud, NULL, 0, cap * sizeof(ExtEntry));
  if (t == NULL) return 0;
  memset(t, 0, cap * sizeof(ExtEntry));
  for (size_t i = 0; i < p->ext_cap; i++)
    if (p->exts[i].extendee != NULL) exts_put(t, cap, p->exts[i]);
  if (p->exts != NULL) p->alloc(p->ud, p->exts, p->ext_cap * sizeof(ExtEntry), 0);
  p->exts = t;
  p->ext_cap = cap;
  return 1;
}

/* -- Pool ----------------------------------------------------------------- */

pc_Pool *pc_Pool_New(pc_Alloc *alloc, void *ud) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_Pool *p = alloc(ud, NULL, 0, sizeof(pc_Pool));
  if (p == NULL) return NULL;
  memset(p, 0, sizeof(*p));
  p->alloc = alloc;
  p->ud = ud;
  return p;
}

void pc_Pool_Free(pc_Pool *p) {
  if (p == NULL) return;
  for (size_t i = 0; i < p->file_count; i++) pc_Arena_Free(p->arenas[i]);
  if (p->files != NULL) p->alloc(p->ud, p->files, p->file_cap * sizeof(pc_FileDef *), 0);
  if (p->arenas != NULL) p->alloc(p->ud, p->arenas, p->file_cap * sizeof(pc_Arena *), 0);
  if (p->names != NULL) p->alloc(p->ud, p->names, p->name_cap * sizeof(NameEntry), 0);
  if (p->exts != NULL) p->alloc(p->ud, p->exts, p->ext_cap * sizeof(ExtEntry), 0);
  p->alloc(p->ud, p, sizeof(pc_Pool), 0);
}

void pc_Pool_Freeze(pc_Pool *p) {
  p->frozen = 1;
}

int pc_Pool_IsFrozen(const pc_Pool *p) {
  return p->frozen;
}

const pc_FileDef *pc_Pool_FindFile(const pc_Pool *p, const char *name) {
  return names_get(p, kKind_File, name);
}
const pc_MessageDef *pc_Pool_FindMessage(const pc_Pool *p, const char *name) {
  return names_get(p, kKind_Message, name);
}
const pc_EnumDef *pc_Pool_FindEnum(const pc_Pool *p, const char *name) {
  return names_get(p, kKind_Enum, name);
}
const pc_ServiceDef *pc_Pool_FindService(const pc_Pool *p, const char *name) {
  return names_get(p, kKind_Service, name);
}
const pc_FieldDef *pc_Pool_FindExtension(const pc_Pool *p, const char *name) {
  return names_get(p, kKind_Extension, name);
}

const pc_FieldDef *pc_Pool_FindExtensionByNumber(const pc_Pool *p, const pc_MessageDef *m,
                                                 int32_t number) {
  if (p->ext_cap == 0) return NULL;
  size_t i = hash_ext(m, number) & (p->ext_cap - 1);
  while (p->exts[i].extendee != NULL) {
    if (p->exts[i].extendee == m && p->exts[i].number == number) return p->exts[i].ext;
    i = (i + 1) & (p->ext_cap - 1);
  }
  return NULL;
}

const pc_FileDesc *pc_Pool_FileDesc(const pc_Pool *p, const char *name) {
  const pc_FileDef *f = pc_Pool_FindFile(p, name);
  return f ? f->desc : NULL;
}

size_t pc_Pool_FileCount(const pc_Pool *p) {
  return p->file_count;
}

const pc_FileDef *pc_Pool_File(const pc_Pool *p, size_t i) {
  return i < p->file_count ? p->files[i] : NULL;
}

/* -- Lookups in definitions ----------------------------------------------- */

const pc_FieldDef *pc_MessageDef_FindFieldByNumber(const pc_MessageDef *m, int32_t number) {
  size_t lo = 0, hi = m->field_count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int32_t n = m->fields_by_number[mid]->number;
    if (n == number) return m->fields_by_number[mid];
    if (n < number)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

static int name_is(const char *s, const char *name, size_t len) {
  return strlen(s) == len && memcmp(s, name, len) == 0;
}

const pc_FieldDef *pc_MessageDef_FindFieldByName(const pc_MessageDef *m, const char *name,
                                                 size_t len) {
  for (uint32_t i = 0; i < m->field_count; i++)
    if (name_is(m->fields[i].name, name, len)) return &m->fields[i];
  return NULL;
}

const pc_FieldDef *pc_MessageDef_FindFieldByJsonName(const pc_MessageDef *m, const char *name,
                                                     size_t len) {
  for (uint32_t i = 0; i < m->field_count; i++)
    if (name_is(m->fields[i].json_name, name, len)) return &m->fields[i];
  return NULL;
}

const pc_OneofDef *pc_MessageDef_FindOneof(const pc_MessageDef *m, const char *name, size_t len) {
  for (uint32_t i = 0; i < m->oneof_count; i++)
    if (name_is(m->oneofs[i].name, name, len)) return &m->oneofs[i];
  return NULL;
}

const pc_FieldDef *pc_FieldDef_MapKey(const pc_FieldDef *f) {
  return f->is_map ? pc_MessageDef_FindFieldByNumber(f->message, 1) : NULL;
}

const pc_FieldDef *pc_FieldDef_MapValue(const pc_FieldDef *f) {
  return f->is_map ? pc_MessageDef_FindFieldByNumber(f->message, 2) : NULL;
}

/* strcmp of a NUL-terminated 's' with the 'len' bytes at 'name'. */
static int name_cmp(const char *s, const char *name, size_t len) {
  size_t n = strlen(s);
  int r = memcmp(s, name, n < len ? n : len);
  return r != 0 ? r : (n > len) - (n < len);
}

const pc_EnumValueDef *pc_EnumDef_FindByName(const pc_EnumDef *e, const char *name, size_t len) {
  size_t lo = 0, hi = e->value_count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int r = name_cmp(e->values_by_name[mid]->name, name, len);
    if (r == 0) return e->values_by_name[mid];
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const pc_EnumValueDef *pc_EnumDef_FindByNumber(const pc_EnumDef *e, int32_t number) {
  size_t lo = 0, hi = e->value_count; /* the first entry not below 'number' */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (e->values_by_number[mid]->number < number)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < e->value_count && e->values_by_number[lo]->number == number ? e->values_by_number[lo]
                                                                          : NULL;
}

const pc_MethodDef *pc_ServiceDef_FindMethod(const pc_ServiceDef *s, const char *name, size_t len) {
  for (uint32_t i = 0; i < s->method_count; i++)
    if (name_is(s->methods[i].name, name, len)) return &s->methods[i];
  return NULL;
}

/* -- Deep copy of a description into the file's arena --------------------- */

typedef struct {
  pc_Arena *a;
  int failed;
} Copier;

static const char *cp_str(Copier *c, const char *s) {
  if (s == NULL) return NULL;
  char *r = pc_Arena_StrDup(c->a, s, strlen(s));
  if (r == NULL) c->failed = 1;
  return r;
}

static void *cp_mem(Copier *c, const void *src, size_t size) {
  if (src == NULL || size == 0) return NULL;
  void *r = pc_Arena_Malloc(c->a, size);
  if (r == NULL) {
    c->failed = 1;
    return NULL;
  }
  memcpy(r, src, size);
  return r;
}

static void cp_options(Copier *c, pc_OptionsDesc *o) {
  o->data = cp_mem(c, o->data, o->size);
}

static const char **cp_strs(Copier *c, const char **src, size_t n) {
  const char **r = cp_mem(c, src, n * sizeof(char *));
  if (r != NULL)
    for (size_t i = 0; i < n; i++) r[i] = cp_str(c, src[i]);
  return r;
}

static pc_FieldDesc *cp_fields(Copier *c, const pc_FieldDesc *src, size_t n) {
  pc_FieldDesc *r = cp_mem(c, src, n * sizeof(*src));
  if (r == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    r[i].name = cp_str(c, src[i].name);
    r[i].type_name = cp_str(c, src[i].type_name);
    r[i].extendee = cp_str(c, src[i].extendee);
    if (src[i].default_value_len != 0) /* a string default holding NUL bytes */
      r[i].default_value = cp_mem(c, src[i].default_value, src[i].default_value_len + 1);
    else
      r[i].default_value = cp_str(c, src[i].default_value);
    r[i].json_name = cp_str(c, src[i].json_name);
    cp_options(c, &r[i].options);
  }
  return r;
}

static pc_EnumDesc *cp_enums(Copier *c, const pc_EnumDesc *src, size_t n) {
  pc_EnumDesc *r = cp_mem(c, src, n * sizeof(*src));
  if (r == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    r[i].name = cp_str(c, src[i].name);
    r[i].values = cp_mem(c, src[i].values, src[i].value_count * sizeof(pc_EnumValueDesc));
    if (r[i].values != NULL)
      for (size_t j = 0; j < src[i].value_count; j++) {
        r[i].values[j].name = cp_str(c, src[i].values[j].name);
        cp_options(c, &r[i].values[j].options);
      }
    cp_options(c, &r[i].options);
    r[i].reserved_ranges =
        cp_mem(c, src[i].reserved_ranges, src[i].reserved_range_count * sizeof(pc_RangeDesc));
    r[i].reserved_names = cp_strs(c, src[i].reserved_names, src[i].reserved_name_count);
  }
  return r;
}

static pc_MessageDesc *cp_messages(Copier *c, const pc_MessageDesc *src, size_t n) {
  pc_MessageDesc *r = cp_mem(c, src, n * sizeof(*src));
  if (r == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    const pc_MessageDesc *s = &src[i];
    pc_MessageDesc *d = &r[i];
    d->name = cp_str(c, s->name);
    d->fields = cp_fields(c, s->fields, s->field_count);
    d->extensions = cp_fields(c, s->extensions, s->extension_count);
    d->nested = cp_messages(c, s->nested, s->nested_count);
    d->enums = cp_enums(c, s->enums, s->enum_count);
    d->extension_ranges =
        cp_mem(c, s->extension_ranges, s->extension_range_count * sizeof(pc_ExtensionRangeDesc));
    if (d->extension_ranges != NULL)
      for (size_t j = 0; j < s->extension_range_count; j++)
        cp_options(c, &d->extension_ranges[j].options);
    d->oneofs = cp_mem(c, s->oneofs, s->oneof_count * sizeof(pc_OneofDesc));
    if (d->oneofs != NULL)
      for (size_t j = 0; j < s->oneof_count; j++) {
        d->oneofs[j].name = cp_str(c, s->oneofs[j].name);
        cp_options(c, &d->oneofs[j].options);
      }
    cp_options(c, &d->options);
    d->reserved_ranges =
        cp_mem(c, s->reserved_ranges, s->reserved_range_count * sizeof(pc_RangeDesc));
    d->reserved_names = cp_strs(c, s->reserved_names, s->reserved_name_count);
  }
  return r;
}

static pc_FileDesc *cp_file(Copier *c, const pc_FileDesc *s) {
  pc_FileDesc *d = cp_mem(c, s, sizeof(*s));
  if (d == NULL) return NULL;
  d->name = cp_str(c, s->name);
  d->package = cp_str(c, s->package);
  d->dependencies = cp_strs(c, s->dependencies, s->dependency_count);
  d->public_dependencies =
      cp_mem(c, s->public_dependencies, s->public_dependency_count * sizeof(int32_t));
  d->weak_dependencies =
      cp_mem(c, s->weak_dependencies, s->weak_dependency_count * sizeof(int32_t));
  d->messages = cp_messages(c, s->messages, s->message_count);
  d->enums = cp_enums(c, s->enums, s->enum_count);
  d->services = cp_mem(c, s->services, s->service_count * sizeof(pc_ServiceDesc));
  if (d->services != NULL)
    for (size_t i = 0; i < s->service_count; i++) {
      pc_ServiceDesc *sv = &d->services[i];
      sv->name = cp_str(c, s->services[i].name);
      cp_options(c, &sv->options);
      sv->methods = cp_mem(c, s->services[i].methods, sv->method_count * sizeof(pc_MethodDesc));
      if (sv->methods != NULL)
        for (size_t j = 0; j < sv->method_count; j++) {
          sv->methods[j].name = cp_str(c, s->services[i].methods[j].name);
          sv->methods[j].input_type = cp_str(c, s->services[i].methods[j].input_type);
          sv->methods[j].output_type = cp_str(c, s->services[i].methods[j].output_type);
          cp_options(c, &sv->methods[j].options);
          sv->methods[j].option_positions =
              cp_mem(c, s->services[i].methods[j].option_positions,
                     sv->methods[j].option_position_count * sizeof(pc_OptionPos));
          if (sv->methods[j].option_positions == NULL) sv->methods[j].option_position_count = 0;
        }
    }
  d->extensions = cp_fields(c, s->extensions, s->extension_count);
  cp_options(c, &d->options);
  return d;
}

/* -- Building a file ------------------------------------------------------ */

typedef struct {
  const char *name;
  int kind;
  void *def;
} Local;

typedef struct {
  pc_Pool *pool;
  pc_Arena *a;
  pc_Error *err;
  pc_FileDef *file;
  pc_MessageDef *msgs;
  pc_EnumDef *enums;
  pc_FieldDef *exts;
  pc_ServiceDef *svcs;
  uint32_t nmsg, nenum, next, nsvc;
  Local *locals; /* the first 'ntypes' sorted by name, for find_type */
  size_t nlocal, ntypes;
  int oom;
} Builder;

static int fail(Builder *b, const char *fmt, const char *x, const char *y) {
  pc_Error_Set(b->err, fmt, x, y);
  return 0;
}

static int oom(Builder *b) {
  b->oom = 1;
  pc_Error_Set(b->err, "%s: out of memory", b->file->name);
  return 0;
}

static void count_msgs(Builder *b, const pc_MessageDesc *m, size_t n) {
  for (size_t i = 0; i < n; i++) {
    b->nmsg++;
    b->nenum += (uint32_t)m[i].enum_count;
    b->next += (uint32_t)m[i].extension_count;
    count_msgs(b, m[i].nested, m[i].nested_count);
  }
}

static const char *join(Builder *b, const char *scope, const char *name) {
  size_t ls = scope ? strlen(scope) : 0, ln = strlen(name);
  char *r = pc_Arena_Malloc(b->a, ls + ln + 2);
  if (r == NULL) return NULL;
  if (ls > 0) {
    memcpy(r, scope, ls);
    r[ls++] = '.';
  }
  memcpy(r + ls, name, ln);
  r[ls + ln] = '\0';
  return r;
}

/* A name for an error message: a missing one reads as empty. */
static const char *shown(const char *s) {
  return s != NULL ? s : "";
}

static int valid_ident(const char *s) {
  if (s == NULL || *s == '\0' || (*s >= '0' && *s <= '9')) return 0;
  for (; *s; s++) {
    char c = *s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return 0;
  }
  return 1;
}

/* The file that defines 'def', a definition of 'kind' in the pool. */
static const char *defined_in(int kind, const void *def) {
  const pc_FileDef *f = kind == kKind_Message     ? ((const pc_MessageDef *)def)->file
                        : kind == kKind_Enum      ? ((const pc_EnumDef *)def)->file
                        : kind == kKind_Service   ? ((const pc_ServiceDef *)def)->file
                        : kind == kKind_Extension ? ((const pc_FieldDef *)def)->file
                                                  : NULL;
  return f != NULL ? f->name : "?";
}

/* "b.proto: 'pkg.T' is already defined in the pool, by a.proto": the same
 * file loaded twice under two names (a path and an import name) reads so. */
static int already_defined(Builder *b, const char *name, int kind, const void *def) {
  pc_Error_Set(b->err, "%s: '%s' is already defined in the pool, by %s", b->file->name, name,
               defined_in(kind, def));
  return 0;
}

static int add_local(Builder *b, const char *name, int kind, void *def) {
  const void *other;
  if ((kind == kKind_Service || kind == kKind_Extension) &&
      (other = names_get(b->pool, kind, name)) != NULL)
    return already_defined(b, name, kind, other);
  b->locals[b->nlocal].name = name;
  b->locals[b->nlocal].kind = kind;
  b->locals[b->nlocal].def = def;
  b->nlocal++;
  return 1;
}

/* By name, then declaration order (the values are one array). */
static int cmp_value_name(const void *x, const void *y) {
  const pc_EnumValueDef *a = *(const pc_EnumValueDef *const *)x;
  const pc_EnumValueDef *c = *(const pc_EnumValueDef *const *)y;
  int r = strcmp(a->name, c->name);
  return r != 0 ? r : (a > c) - (a < c);
}

/* By number, then declaration order. */
static int cmp_value_number(const void *x, const void *y) {
  const pc_EnumValueDef *a = *(const pc_EnumValueDef *const *)x;
  const pc_EnumValueDef *c = *(const pc_EnumValueDef *const *)y;
  if (a->number != c->number) return (a->number > c->number) - (a->number < c->number);
  return (a > c) - (a < c);
}

static int build_enum(Builder *b, const pc_EnumDesc *d, const char *scope,
                      const pc_MessageDef *containing) {
  pc_EnumDef *e = &b->enums[b->nenum++];
  if (!valid_ident(d->name))
    return fail(b, "%s: invalid enum name '%s'", b->file->name, shown(d->name));
  e->name = d->name;
  e->full_name = join(b, scope, d->name);
  if (e->full_name == NULL) return oom(b);
  e->file = b->file;
  e->containing = containing;
  e->closed = b->file->syntax != kPc_Syntax_Proto3;
  if (d->value_count == 0) return fail(b, "%s: enum %s has no values", e->full_name, "");
  pc_EnumValueDef *v = pc_Arena_Calloc(b->a, d->value_count * sizeof(*v));
  if (v == NULL) return oom(b);
  for (size_t i = 0; i < d->value_count; i++) {
    if (!valid_ident(d->values[i].name))
      return fail(b, "%s: invalid enum value name '%s'", e->full_name, shown(d->values[i].name));
    v[i].name = d->values[i].name;
    v[i].number = d->values[i].number;
    v[i].full_name = join(b, scope, d->values[i].name);
    if (v[i].full_name == NULL) return oom(b);
  }
  /* Duplicates by sorting (an enum may have a hundred thousand values). */
  const pc_EnumValueDef **by_name =
      pc_Arena_Malloc(b->a, d->value_count * sizeof(const pc_EnumValueDef *));
  const pc_EnumValueDef **by_num =
      pc_Arena_Malloc(b->a, d->value_count * sizeof(const pc_EnumValueDef *));
  if (by_name == NULL || by_num == NULL) return oom(b);
  for (size_t i = 0; i < d->value_count; i++) by_name[i] = by_num[i] = &v[i];
  qsort(by_name, d->value_count, sizeof(const pc_EnumValueDef *), cmp_value_name);
  qsort(by_num, d->value_count, sizeof(const pc_EnumValueDef *), cmp_value_number);
  for (size_t i = 1; i < d->value_count; i++) {
    if (strcmp(by_name[i]->name, by_name[i - 1]->name) == 0)
      return fail(b, "%s: duplicate enum value '%s'", e->full_name, by_name[i]->name);
    if (by_num[i]->number == by_num[i - 1]->number && !d->allow_alias)
      return fail(b, "%s: value '%s' reuses a number (set allow_alias)", e->full_name,
                  by_num[i]->name);
  }
  e->values_by_name = by_name;
  e->values_by_number = by_num;
  if (b->file->syntax == kPc_Syntax_Proto3 && v[0].number != 0)
    return fail(b, "%s: the first value of a proto3 enum must be 0%s", e->full_name, "");
  e->values = v;
  e->value_count = (uint32_t)d->value_count;
  return add_local(b, e->full_name, kKind_Enum, e);
}

/* First pass: names of every message and enum in the file, depth-first. */
static int build_names(Builder *b, const pc_MessageDesc *d, size_t n, const char *scope,
                       const pc_MessageDef *containing) {
  for (size_t i = 0; i < n; i++) {
    pc_MessageDef *m = &b->msgs[b->nmsg];
    m->index = b->nmsg++;
    if (!valid_ident(d[i].name))
      return fail(b, "%s: invalid message name '%s'", b->file->name, shown(d[i].name));
    m->name = d[i].name;
    m->full_name = join(b, scope, d[i].name);
    if (m->full_name == NULL) return oom(b);
    m->file = b->file;
    m->containing = containing;
    m->syntax = b->file->syntax;
    m->map_entry = (uint8_t)(d[i].map_entry != 0);
    m->message_set = (uint8_t)(d[i].message_set_wire_format != 0);
    if (!add_local(b, m->full_name, kKind_Message, m)) return 0;
    for (size_t j = 0; j < d[i].enum_count; j++)
      if (!build_enum(b, &d[i].enums[j], m->full_name, m)) return 0;
    if (!build_names(b, d[i].nested, d[i].nested_count, m->full_name, m)) return 0;
  }
  return 1;
}

static int cmp_local(const void *x, const void *y) {
  return strcmp(((const Local *)x)->name, ((const Local *)y)->name);
}

/* A type by fully qualified name ('.pkg.Name'): this file first, then the
 * pool. Returns kind and def. */
static void *find_type(Builder *b, const char *name, int *kind) {
  if (name == NULL || name[0] != '.') return NULL;
  Local key = {name + 1, 0, NULL};
  Local *l = bsearch(&key, b->locals, b->ntypes, sizeof(Local), cmp_local);
  if (l != NULL) {
    *kind = l->kind;
    return l->def;
  }
  const void *d = names_get(b->pool, kKind_Message, name + 1);
  if (d != NULL) {
    *kind = kKind_Message;
    return (void *)d;
  }
  d = names_get(b->pool, kKind_Enum, name + 1);
  if (d != NULL) {
    *kind = kKind_Enum;
    return (void *)d;
  }
  return NULL;
}

/* A bytes default's C-escaped text (descriptor.proto's default_value) read
 * as protoc 3.21 reads it (UnescapeCEscapeSequences): octal of up to three
 * digits, hex of any number of digits (the low 8 bits kept); an escape it
 * does not know ("\\q", "\\x" without a hex digit, a '\\' at the end)
 * stands for nothing. */
static int unescape_bytes(Builder *b, const char *s, pc_DefaultValue *out) {
  size_t n = strlen(s);
  char *r = pc_Arena_Malloc(b->a, n + 1);
  if (r == NULL) return oom(b);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\') {
      r[k++] = s[i];
      continue;
    }
    if (i + 1 == n) break; /* a '\\' at the end stands for nothing */
    char c = s[++i];
    switch (c) {
    case 'n': r[k++] = '\n'; break;
    case 'r': r[k++] = '\r'; break;
    case 't': r[k++] = '\t'; break;
    case 'a': r[k++] = '\a'; break;
    case 'b': r[k++] = '\b'; break;
    case 'f': r[k++] = '\f'; break;
    case 'v': r[k++] = '\v'; break;
    case '\\':
    case '?':
    case '\'':
    case '"': r[k++] = c; break;
    case 'x':
    case 'X': {
      int v = 0, digits = 0;
      while (i + 1 < n &&
             ((s[i + 1] >= '0' && s[i + 1] <= '9') || (s[i + 1] >= 'a' && s[i + 1] <= 'f') ||
              (s[i + 1] >= 'A' && s[i + 1] <= 'F'))) {
        char h = s[++i];
        v = (v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10)) & 0xFF; /* the low 8 bits */
        digits++;
      }
      if (digits > 0) r[k++] = (char)v; /* "\\x" without a hex digit stands for nothing */
      break;
    }
    default:
      if (c >= '0' && c <= '7') {
        int v = c - '0', digits = 1;
        while (digits < 3 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7') {
          v = v * 8 + (s[++i] - '0');
          digits++;
        }
        r[k++] = (char)v;
      } /* an escape protoc does not know stands for nothing */
    }
  }
  r[k] = '\0';
  out->s.data = r;
  out->s.size = k;
  return 1;
}

/* A default's text quoted for an error message (a descriptor set's line
 * break or a terminal's control byte escaped, a long one cut), in 'buf'. */
#define DEFAULT_ROOM 80
static const char *quoted(char buf[DEFAULT_ROOM], const char *text) {
  buf[0] = '"';
  pc_Error_Quote(buf + 1, DEFAULT_ROOM - 2, text, strlen(text), kPc_Quote_Lua);
  size_t n = strlen(buf);
  buf[n] = '"';
  buf[n + 1] = '\0';
  return buf;
}

/* 'len': the bytes of a string default holding NUL bytes, else 0. */
static int parse_default(Builder *b, pc_FieldDef *f, const char *text, size_t len) {
  pc_DefaultValue *v = &f->default_value;
  char shown_default[DEFAULT_ROOM];
  if (len != 0 && f->type != kPc_Type_String) /* only a string's text may hold a NUL byte */
    return fail(b, "%s: default holds a NUL byte%s", f->full_name, "");
  char *end = NULL;
  errno = 0;
  switch (f->type) {
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32: {
    long long x = strtoll(text, &end, 0);
    if (*text == '\0' || *end != '\0' || errno != 0 || x < INT32_MIN || x > INT32_MAX) break;
    v->i32 = (int32_t)x;
    return 1;
  }
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: {
    unsigned long long x = strtoull(text, &end, 0);
    if (*text == '\0' || *text == '-' || *end != '\0' || errno != 0 || x > UINT32_MAX) break;
    v->u32 = (uint32_t)x;
    return 1;
  }
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: {
    long long x = strtoll(text, &end, 0);
    if (*text == '\0' || *end != '\0' || errno != 0) break;
    v->i64 = x;
    return 1;
  }
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: {
    unsigned long long x = strtoull(text, &end, 0);
    if (*text == '\0' || *text == '-' || *end != '\0' || errno != 0) break;
    v->u64 = x;
    return 1;
  }
  case kPc_Type_Float:
  case kPc_Type_Double: {
    double x;
    if (strcmp(text, "inf") == 0)
      x = HUGE_VAL;
    else if (strcmp(text, "-inf") == 0)
      x = -HUGE_VAL;
    else if (strcmp(text, "nan") == 0)
      x = NAN;
    else {
      x = strtod(text, &end);
      if (*text == '\0' || *end != '\0') break;
    }
    if (f->type == kPc_Type_Float)
      v->f = (float)x;
    else
      v->d = x;
    return 1;
  }
  case kPc_Type_Bool:
    if (strcmp(text, "true") == 0)
      v->b = 1;
    else if (strcmp(text, "false") == 0)
      v->b = 0;
    else
      break;
    return 1;
  case kPc_Type_String:
    v->s.data = text;
    v->s.size = len != 0 ? len : strlen(text);
    return 1;
  case kPc_Type_Bytes: return unescape_bytes(b, text, v);
  case kPc_Type_Enum: {
    const pc_EnumValueDef *ev = pc_EnumDef_FindByName(f->enumdef, text, strlen(text));
    if (ev == NULL)
      return fail(b, "%s: default %s is not a value of the enum", f->full_name,
                  quoted(shown_default, text));
    v->i32 = ev->number;
    return 1;
  }
  default:
    return fail(b, "%s: a %s field cannot have a default", f->full_name,
                pc_FieldType_Name(f->type));
  }
  return fail(b, "%s: bad default value %s", f->full_name, quoted(shown_default, text));
}

/* Fills one field (regular or extension) from its description. */
static int build_field(Builder *b, pc_FieldDef *f, const pc_FieldDesc *d, const char *scope,
                       uint32_t index) {
  if (!valid_ident(d->name)) return fail(b, "%s: invalid field name '%s'", scope, shown(d->name));
  f->name = d->name;
  f->full_name = join(b, scope, d->name);
  if (f->full_name == NULL) return oom(b);
  f->number = d->number;
  f->label = d->label;
  f->type = d->type;
  f->index = index;
  f->file = b->file;
  if (d->number < 1 || d->number > 536870911)
    return fail(b, "%s: field number out of range 1..536870911%s", f->full_name, "");
  if (d->number >= 19000 && d->number <= 19999)
    return fail(b, "%s: field numbers 19000..19999 are reserved for protobuf%s", f->full_name, "");
  if (d->label < kPc_Label_Optional || d->label > kPc_Label_Repeated)
    return fail(b, "%s: bad label%s", f->full_name, "");
  if (pc_FieldType_Name(d->type) == NULL)
    return fail(b, "%s: unresolved type '%s'", f->full_name, d->type_name ? d->type_name : "?");
  if (d->json_name != NULL) {
    f->json_name = d->json_name;
  } else {
    size_t n = pc_JsonName(d->name, NULL, 0);
    char *j = pc_Arena_Malloc(b->a, n + 1);
    if (j == NULL) return oom(b);
    pc_JsonName(d->name, j, n + 1);
    f->json_name = j;
  }
  if (d->type == kPc_Type_Message || d->type == kPc_Type_Group || d->type == kPc_Type_Enum) {
    int kind = 0;
    void *t = find_type(b, d->type_name, &kind);
    if (t == NULL)
      return fail(b, "%s: unknown type '%s'", f->full_name, d->type_name ? d->type_name : "?");
    if (kind == kKind_Enum && d->type == kPc_Type_Enum) {
      f->enumdef = t;
    } else if (kind == kKind_Message && d->type != kPc_Type_Enum) {
      f->message = t;
    } else {
      return fail(b, "%s: '%s' is not of the declared kind", f->full_name, d->type_name);
    }
  } else if (d->type_name != NULL) {
    return fail(b, "%s: scalar field with a type_name '%s'", f->full_name, d->type_name);
  }
  if (f->enumdef != NULL && f->enumdef->closed && b->file->syntax == kPc_Syntax_Proto3 &&
      d->extendee == NULL)
    return fail(b, "%s: enum %s is not a proto3 enum", f->full_name, f->enumdef->full_name);
  f->proto3_optional = (uint8_t)(d->proto3_optional != 0);
  int repeated = d->label == kPc_Label_Repeated;
  f->is_map = (uint8_t)(repeated && f->message != NULL && f->message->map_entry);
  f->slot = f->is_map ? kPc_Slot_Map : repeated ? kPc_Slot_Array : pc_FieldDef_ElemSlot(f);
  int scalar = d->type != kPc_Type_String && d->type != kPc_Type_Bytes && f->message == NULL;
  if (repeated && scalar)
    f->packed = (uint8_t)(d->packed >= 0 ? d->packed : b->file->syntax == kPc_Syntax_Proto3);
  if (d->packed == 1 && !(repeated && scalar))
    return fail(b, "%s: only repeated scalar fields can be packed%s", f->full_name, "");
  if (b->file->syntax == kPc_Syntax_Proto3 && d->label == kPc_Label_Required)
    return fail(b, "%s: required fields are not allowed in proto3%s", f->full_name, "");
  f->has_presence =
      (uint8_t)(!repeated && (b->file->syntax != kPc_Syntax_Proto3 || f->message != NULL ||
                              d->proto3_optional || d->oneof_index >= 0 || d->extendee != NULL));
  if (f->enumdef != NULL) f->default_value.i32 = f->enumdef->values[0].number;
  if (d->default_value != NULL) {
    if (repeated || b->file->syntax == kPc_Syntax_Proto3)
      return fail(b, "%s: default values are only allowed on proto2 singular fields%s",
                  f->full_name, "");
    f->has_default = 1;
    f->default_text = d->default_value;
    if (!parse_default(b, f, d->default_value, d->default_value_len)) return 0;
  }
  return 1;
}

static int cmp_field_number(const void *x, const void *y) {
  int32_t a = (*(const pc_FieldDef *const *)x)->number;
  int32_t c = (*(const pc_FieldDef *const *)y)->number;
  return (a > c) - (a < c);
}

/* By name, then declaration order (a field's index). */
static int cmp_field_name(const void *x, const void *y) {
  const pc_FieldDef *a = *(const pc_FieldDef *const *)x, *c = *(const pc_FieldDef *const *)y;
  int r = strcmp(a->name, c->name);
  return r != 0 ? r : (a->index > c->index) - (a->index < c->index);
}

/* Layout: type word, hasbits, oneof cases, then slots by size. */
static void layout(pc_MessageDef *m, pc_FieldDef *fields, pc_OneofDef *oneofs) {
  uint32_t hasbits = 0;
  m->required_count = 0;
  m->repeated_count = 0;
  for (uint32_t i = 0; i < m->field_count; i++) {
    pc_FieldDef *f = &fields[i];
    if (f->label == kPc_Label_Required) m->required_count++;
    if (f->label == kPc_Label_Repeated) m->repeated_count++;
    f->hasbit = -1;
    if (f->has_presence && f->oneof == NULL && f->message == NULL) f->hasbit = (int32_t)hasbits++;
  }
  m->hasbit_count = hasbits;
  uint32_t off = (uint32_t)sizeof(void *) + (hasbits + 7) / 8;
  off = (off + 3) & ~3u;
  for (uint32_t i = 0; i < m->oneof_count; i++) {
    if (oneofs[i].synthetic) continue;
    oneofs[i].case_offset = off;
    off += 4;
  }
  /* Place slots of size 16, 8, 4, 1 in turn; a oneof's members share the
   * slot of its largest member. */
  static const uint32_t sizes[4] = {16, 8, 4, 1};
  for (int s = 0; s < 4; s++) {
    uint32_t size = sizes[s], align = size > 8 ? 8 : size;
    for (uint32_t i = 0; i < m->field_count; i++) {
      pc_FieldDef *f = &fields[i];
      if (f->oneof != NULL || pc_Slot_Size(f->slot) != size) continue;
      off = (off + align - 1) & ~(align - 1);
      f->offset = off;
      off += size;
    }
    for (uint32_t i = 0; i < m->oneof_count; i++) {
      pc_OneofDef *o = &oneofs[i];
      if (o->synthetic) continue;
      uint32_t biggest = 0;
      for (uint32_t j = 0; j < o->field_count; j++)
        if (pc_Slot_Size(o->fields[j]->slot) > biggest) biggest = pc_Slot_Size(o->fields[j]->slot);
      if (biggest != size) continue;
      o->slot_size = size;
      off = (off + align - 1) & ~(align - 1);
      for (uint32_t j = 0; j < o->field_count; j++) {
        pc_FieldDef *f = (pc_FieldDef *)o->fields[j];
        f->offset = off;
        f->case_offset = o->case_offset;
      }
      off += size;
    }
  }
  m->size = (off + 7) & ~7u;
}

_Static_assert((int)kPc_Walk_Bool == (int)kPc_Slot_Bool &&
                   (int)kPc_Walk_String == (int)kPc_Slot_String &&
                   (int)kPc_Walk_Map == (int)kPc_Slot_Map,
               "pc_WalkKind follows pc_SlotKind");

/* The compact layouts of the fields by number (after layout()). */
static void fill_slots(pc_MessageDef *m, pc_FieldSlot *slots) {
  for (uint32_t i = 0; i < m->field_count; i++) {
    const pc_FieldDef *f = m->fields_by_number[i];
    pc_FieldSlot *s = &slots[i];
    s->offset = f->offset;
    s->hasbit = f->hasbit;
    s->number = f->number;
    s->case_offset = f->case_offset;
    s->type = (uint8_t)f->type;
    s->kind = (uint8_t)(f->oneof != NULL ? kPc_Walk_Oneof : (pc_WalkKind)f->slot);
    s->utf8 = (uint8_t)(f->type == kPc_Type_String && f->file != NULL &&
                        f->file->syntax == kPc_Syntax_Proto3);
    s->field = f;
  }
  m->slots_by_number = slots;
}

static int in_ext_range(const pc_MessageDef *m, int32_t n) {
  for (uint32_t i = 0; i < m->extension_range_count; i++)
    if (n >= m->extension_ranges[i].start && n < m->extension_ranges[i].end) return 1;
  return 0;
}

static int build_extension(Builder *b, const pc_FieldDesc *d, const char *scope,
                           const pc_MessageDef *ext_scope) {
  pc_FieldDef *f = &b->exts[b->next];
  if (!build_field(b, f, d, scope, b->next)) return 0;
  b->next++;
  f->is_extension = 1;
  f->extension_scope = ext_scope;
  f->has_presence = (uint8_t)(d->label != kPc_Label_Repeated);
  f->hasbit = -1;
  if (f->is_map) return fail(b, "%s: an extension cannot be a map%s", f->full_name, "");
  int kind = 0;
  const pc_MessageDef *m = find_type(b, d->extendee, &kind);
  if (m == NULL || kind != kKind_Message)
    return fail(b, "%s: unknown extendee '%s'", f->full_name, d->extendee ? d->extendee : "?");
  if (!in_ext_range(m, f->number))
    return fail(b, "%s: number is not in an extension range of %s", f->full_name, m->full_name);
  f->containing = m;
  const pc_FieldDef *other = pc_Pool_FindExtensionByNumber(b->pool, m, f->number);
  if (other != NULL)
    return fail(b, "%s: number already used by extension %s", f->full_name, other->full_name);
  return add_local(b, f->full_name, kKind_Extension, f);
}

/* Second pass: fields, oneofs, layouts, extensions, in the order of the
 * first pass. */
static int build_bodies(Builder *b, const pc_MessageDesc *d, size_t n, uint32_t *next_msg) {
  for (size_t i = 0; i < n; i++) {
    pc_MessageDef *m = &b->msgs[(*next_msg)++];
    const pc_MessageDesc *md = &d[i];
    pc_FieldDef *fields = pc_Arena_Calloc(b->a, md->field_count * sizeof(pc_FieldDef) + 1);
    const pc_FieldDef **by_num = pc_Arena_Calloc(b->a, md->field_count * sizeof(pc_FieldDef *) + 1);
    pc_OneofDef *oneofs = pc_Arena_Calloc(b->a, md->oneof_count * sizeof(pc_OneofDef) + 1);
    if (fields == NULL || by_num == NULL || oneofs == NULL) return oom(b);
    m->fields = fields;
    m->field_count = (uint32_t)md->field_count;
    m->fields_by_number = by_num;
    m->oneofs = oneofs;
    m->oneof_count = (uint32_t)md->oneof_count;
    m->extension_range_count = (uint32_t)md->extension_range_count;
    if (md->extension_range_count > 0) {
      pc_RangeDesc *r = pc_Arena_Malloc(b->a, md->extension_range_count * sizeof(pc_RangeDesc));
      if (r == NULL) return oom(b);
      for (size_t j = 0; j < md->extension_range_count; j++) r[j] = md->extension_ranges[j].range;
      m->extension_ranges = r;
    }
    /* Each oneof's member list holds exactly its members (one array for all
     * of them, so memory stays linear in fields plus oneofs). */
    for (size_t j = 0; j < md->field_count; j++) {
      int32_t o = md->fields[j].oneof_index;
      if (o >= 0 && (size_t)o < md->oneof_count) oneofs[o].field_count++;
    }
    const pc_FieldDef **members =
        pc_Arena_Calloc(b->a, md->field_count * sizeof(pc_FieldDef *) + 1);
    if (members == NULL) return oom(b);
    for (size_t j = 0; j < md->oneof_count; j++) {
      oneofs[j].name = md->oneofs[j].name;
      oneofs[j].full_name = join(b, m->full_name, md->oneofs[j].name);
      if (oneofs[j].full_name == NULL) return oom(b);
      oneofs[j].index = (uint32_t)j;
      oneofs[j].containing = m;
      oneofs[j].fields = members;
      members += oneofs[j].field_count;
      oneofs[j].field_count = 0;
    }
    for (size_t j = 0; j < md->field_count; j++) {
      const pc_FieldDesc *fd = &md->fields[j];
      pc_FieldDef *f = &fields[j];
      f->containing = m;
      if (fd->extendee != NULL)
        return fail(b, "%s.%s: an extension among the fields", m->full_name, fd->name);
      if (!build_field(b, f, fd, m->full_name, (uint32_t)j)) return 0;
      if (fd->oneof_index >= 0) {
        if ((size_t)fd->oneof_index >= md->oneof_count || fd->label == kPc_Label_Repeated)
          return fail(b, "%s: bad oneof index or repeated oneof member%s", f->full_name, "");
        pc_OneofDef *o = &oneofs[fd->oneof_index];
        o->fields[o->field_count++] = f;
        f->oneof = o;
      }
      by_num[j] = f;
    }
    for (size_t j = 0; j < md->oneof_count; j++) {
      pc_OneofDef *o = &oneofs[j];
      if (o->field_count == 0) return fail(b, "%s: empty oneof%s", o->full_name, "");
      o->synthetic = (uint8_t)(o->field_count == 1 && o->fields[0]->proto3_optional);
      if (o->synthetic) ((pc_FieldDef *)o->fields[0])->oneof = NULL;
    }
    /* Duplicate names, by sorting (messages may have many thousand fields). */
    qsort(by_num, md->field_count, sizeof(pc_FieldDef *), cmp_field_name);
    for (size_t j = 1; j < md->field_count; j++)
      if (strcmp(by_num[j]->name, by_num[j - 1]->name) == 0)
        return fail(b, "%s: duplicate field name%s", by_num[j]->full_name, "");
    qsort(by_num, md->field_count, sizeof(pc_FieldDef *), cmp_field_number);
    for (size_t j = 1; j < md->field_count; j++)
      if (by_num[j]->number == by_num[j - 1]->number)
        return fail(b, "%s: field number already used by %s", by_num[j]->full_name,
                    by_num[j - 1]->name);
    if (m->map_entry) {
      const pc_FieldDef *k = pc_MessageDef_FindFieldByNumber(m, 1);
      if (md->field_count != 2 || k == NULL || pc_MessageDef_FindFieldByNumber(m, 2) == NULL ||
          k->type == kPc_Type_Float || k->type == kPc_Type_Double || k->type == kPc_Type_Bytes ||
          k->message != NULL || k->enumdef != NULL)
        return fail(b, "%s: malformed map entry%s", m->full_name, "");
    }
    layout(m, fields, oneofs);
    pc_FieldSlot *slots = pc_Arena_Calloc(b->a, md->field_count * sizeof(pc_FieldSlot) + 1);
    if (slots == NULL) return oom(b);
    fill_slots(m, slots);
    if (!build_bodies(b, md->nested, md->nested_count, next_msg)) return 0;
  }
  return 1;
}

/* Third pass: the extensions declared inside messages, in the order of
 * the first pass, once every message of the file has its extension ranges
 * (an extendee may be declared after the extension). */
static int build_nested_extensions(Builder *b, const pc_MessageDesc *d, size_t n,
                                   uint32_t *next_msg) {
  for (size_t i = 0; i < n; i++) {
    const pc_MessageDef *m = &b->msgs[(*next_msg)++];
    const pc_MessageDesc *md = &d[i];
    if (!build_nested_extensions(b, md->nested, md->nested_count, next_msg)) return 0;
    for (size_t j = 0; j < md->extension_count; j++)
      if (!build_extension(b, &md->extensions[j], m->full_name, m)) return 0;
  }
  return 1;
}

static int build_services(Builder *b, const pc_FileDesc *d) {
  for (size_t i = 0; i < d->service_count; i++) {
    const pc_ServiceDesc *sd = &d->services[i];
    pc_ServiceDef *s = &b->svcs[i];
    if (!valid_ident(sd->name))
      return fail(b, "%s: invalid service name '%s'", d->name, shown(sd->name));
    s->name = sd->name;
    s->full_name = join(b, d->package, sd->name);
    s->file = b->file;
    pc_MethodDef *ms = pc_Arena_Calloc(b->a, sd->method_count * sizeof(pc_MethodDef) + 1);
    if (s->full_name == NULL || ms == NULL) return oom(b);
    for (size_t j = 0; j < sd->method_count; j++) {
      const pc_MethodDesc *md = &sd->methods[j];
      pc_MethodDef *m = &ms[j];
      m->name = md->name;
      m->full_name = join(b, s->full_name, md->name);
      if (m->full_name == NULL) return oom(b);
      m->service = s;
      int k1 = 0, k2 = 0;
      m->input = find_type(b, md->input_type, &k1);
      m->output = find_type(b, md->output_type, &k2);
      if (m->input == NULL || k1 != kKind_Message)
        return fail(b, "%s: unknown input type '%s'", m->full_name,
                    md->input_type ? md->input_type : "?");
      if (m->output == NULL || k2 != kKind_Message)
        return fail(b, "%s: unknown output type '%s'", m->full_name,
                    md->output_type ? md->output_type : "?");
      m->client_streaming = (uint8_t)(md->client_streaming != 0);
      m->server_streaming = (uint8_t)(md->server_streaming != 0);
    }
    s->methods = ms;
    s->method_count = (uint32_t)sd->method_count;
    if (!add_local(b, s->full_name, kKind_Service, s)) return 0;
  }
  return 1;
}

/* By kind, then name. */
static int cmp_local_kind(const void *x, const void *y) {
  const Local *a = x, *c = y;
  if (a->kind != c->kind) return (a->kind > c->kind) - (a->kind < c->kind);
  return strcmp(a->name, c->name);
}

/* By extendee, then number, then declaration order. */
static int cmp_ext(const void *x, const void *y) {
  const pc_FieldDef *a = *(const pc_FieldDef *const *)x, *c = *(const pc_FieldDef *const *)y;
  if (a->containing != c->containing)
    return (uintptr_t)a->containing > (uintptr_t)c->containing ? 1 : -1;
  if (a->number != c->number) return (a->number > c->number) - (a->number < c->number);
  return (a->index > c->index) - (a->index < c->index);
}

/* The services and extensions added after the types: no full name twice,
 * no extendee and number twice, both by sorting (a file may hold many
 * thousand extensions). */
static int check_unique_after_types(Builder *b) {
  Local *rest = b->locals + b->ntypes;
  size_t n = b->nlocal - b->ntypes;
  qsort(rest, n, sizeof(Local), cmp_local_kind);
  for (size_t i = 1; i < n; i++)
    if (rest[i].kind == rest[i - 1].kind && strcmp(rest[i].name, rest[i - 1].name) == 0)
      return fail(b, "%s: '%s' is defined twice", b->file->name, rest[i].name);
  if (b->next < 2) return 1;
  const pc_FieldDef **xs = pc_Arena_Malloc(b->a, b->next * sizeof(const pc_FieldDef *));
  if (xs == NULL) return oom(b);
  for (uint32_t i = 0; i < b->next; i++) xs[i] = &b->exts[i];
  qsort(xs, b->next, sizeof(const pc_FieldDef *), cmp_ext);
  for (uint32_t i = 1; i < b->next; i++)
    if (xs[i]->containing == xs[i - 1]->containing && xs[i]->number == xs[i - 1]->number)
      return fail(b, "%s: number already used by extension %s", xs[i]->full_name,
                  xs[i - 1]->full_name);
  return 1;
}

static int build_file(Builder *b, const pc_FileDesc *d) {
  pc_FileDef *file = b->file;
  count_msgs(b, d->messages, d->message_count);
  uint32_t nmsg = b->nmsg, nenum = b->nenum + (uint32_t)d->enum_count,
           next = b->next + (uint32_t)d->extension_count, nsvc = (uint32_t)d->service_count;
  b->msgs = pc_Arena_Calloc(b->a, nmsg * sizeof(pc_MessageDef) + 1);
  b->enums = pc_Arena_Calloc(b->a, nenum * sizeof(pc_EnumDef) + 1);
  b->exts = pc_Arena_Calloc(b->a, next * sizeof(pc_FieldDef) + 1);
  b->svcs = pc_Arena_Calloc(b->a, nsvc * sizeof(pc_ServiceDef) + 1);
  b->locals = pc_Arena_Calloc(b->a, (nmsg + nenum + next + nsvc) * sizeof(Local) + 1);
  if (b->msgs == NULL || b->enums == NULL || b->exts == NULL || b->svcs == NULL ||
      b->locals == NULL)
    return oom(b);
  b->nmsg = b->nenum = b->next = 0;
  const char *pkg = d->package && d->package[0] ? d->package : NULL;
  for (size_t i = 0; i < d->enum_count; i++)
    if (!build_enum(b, &d->enums[i], pkg, NULL)) return 0;
  if (!build_names(b, d->messages, d->message_count, pkg, NULL)) return 0;
  /* Services and extensions are not types; sort what we have for lookups. */
  qsort(b->locals, b->nlocal, sizeof(Local), cmp_local);
  b->ntypes = b->nlocal;
  for (size_t i = 1; i < b->nlocal; i++)
    if (strcmp(b->locals[i].name, b->locals[i - 1].name) == 0)
      return fail(b, "%s: '%s' is defined twice", d->name, b->locals[i].name);
  for (size_t i = 0; i < b->nlocal; i++) {
    const void *other = names_get(b->pool, kKind_Message, b->locals[i].name);
    if (other != NULL) return already_defined(b, b->locals[i].name, kKind_Message, other);
    if ((other = names_get(b->pool, kKind_Enum, b->locals[i].name)) != NULL)
      return already_defined(b, b->locals[i].name, kKind_Enum, other);
  }
  uint32_t next_msg = 0;
  if (!build_bodies(b, d->messages, d->message_count, &next_msg)) return 0;
  next_msg = 0;
  if (!build_nested_extensions(b, d->messages, d->message_count, &next_msg)) return 0;
  for (size_t i = 0; i < d->extension_count; i++)
    if (!build_extension(b, &d->extensions[i], pkg, NULL)) return 0;
  if (!build_services(b, d)) return 0;
  if (!check_unique_after_types(b)) return 0;
  file->messages = b->msgs;
  file->message_count = nmsg;
  file->enums = b->enums;
  file->enum_count = nenum;
  file->extensions = b->exts;
  file->extension_count = next;
  file->services = b->svcs;
  file->service_count = nsvc;
  return 1;
}

const pc_FileDef *pc_Pool_AddFile(pc_Pool *pool, const pc_FileDesc *desc, pc_Error *err) {
  if (pool->frozen) {
    pc_Error_Set(err, "%s: pool is frozen", desc->name ? desc->name : "?");
    return NULL;
  }
  if (desc->name == NULL || desc->name[0] == '\0') {
    pc_Error_Set(err, "file without a name");
    return NULL;
  }
  if (pc_Pool_FindFile(pool, desc->name) != NULL) {
    pc_Error_Set(err, "%s: a file with this name is already loaded", desc->name);
    return NULL;
  }
  pc_Arena *a = pc_Arena_New(pool->alloc, pool->ud);
  if (a == NULL) {
    pc_Error_Set(err, "%s: out of memory", desc->name);
    return NULL;
  }
  Copier c = {a, 0};
  pc_FileDesc *copy = cp_file(&c, desc);
  pc_FileDef *file = pc_Arena_Calloc(a, sizeof(pc_FileDef));
  if (c.failed || copy == NULL || file == NULL) {
    pc_Error_Set(err, "%s: out of memory", desc->name);
    pc_Arena_Free(a);
    return NULL;
  }
  if (copy->syntax != kPc_Syntax_Proto3) copy->syntax = kPc_Syntax_Proto2;
  file->name = copy->name;
  file->package = copy->package ? copy->package : "";
  file->syntax = copy->syntax;
  file->pool = pool;
  file->desc = copy;
  Builder b;
  memset(&b, 0, sizeof(b));
  b.pool = pool;
  b.a = a;
  b.err = err;
  b.file = file;
  if (!build_file(&b, copy)) {
    pc_Arena_Free(a);
    return NULL;
  }
  /* Everything is checked; reserve room, then insert (cannot fail). */
  if (pool->file_count == pool->file_cap) {
    size_t cap = pool->file_cap ? pool->file_cap * 2 : 8;
    pc_FileDef **files = pool->alloc(pool->ud, NULL, 0, cap * sizeof(pc_FileDef *));
    pc_Arena **arenas = pool->alloc(pool->ud, NULL, 0, cap * sizeof(pc_Arena *));
    if (files == NULL || arenas == NULL) {
      if (files) pool->alloc(pool->ud, files, cap * sizeof(pc_FileDef *), 0);
      if (arenas) pool->alloc(pool->ud, arenas, cap * sizeof(pc_Arena *), 0);
      pc_Error_Set(err, "%s: out of memory", desc->name);
      pc_Arena_Free(a);
      return NULL;
    }
    if (pool->file_count > 0) {
      memcpy(files, pool->files, pool->file_count * sizeof(pc_FileDef *));
      memcpy(arenas, pool->arenas, pool->file_count * sizeof(pc_Arena *));
      pool->alloc(pool->ud, pool->files, pool->file_cap * sizeof(pc_FileDef *), 0);
      pool->alloc(pool->ud, pool->arenas, pool->file_cap * sizeof(pc_Arena *), 0);
    }
    pool->files = files;
    pool->arenas = arenas;
    pool->file_cap = cap;
  }
  if (!names_reserve(pool, b.nlocal + 1) || !exts_reserve(pool, file->extension_count)) {
    pc_Error_Set(err, "%s: out of memory", desc->name);
    pc_Arena_Free(a);
    return NULL;
  }
  for (size_t i = 0; i < b.nlocal; i++) {
    NameEntry e = {b.locals[i].name, b.locals[i].kind, b.locals[i].def};
    names_put(pool->names, pool->name_cap, e);
  }
  NameEntry fe = {file->name, kKind_File, file};
  names_put(pool->names, pool->name_cap, fe);
  pool->name_count += b.nlocal + 1;
  for (uint32_t i = 0; i < file->extension_count; i++) {
    ExtEntry e = {file->extensions[i].containing, file->extensions[i].number, &file->extensions[i]};
    exts_put(pool->exts, pool->ext_cap, e);
  }
  pool->ext_count += file->extension_count;
  pool->files[pool->file_count] = file;
  pool->arenas[pool->file_count] = a;
  pool->file_count++;
  return file;
}
