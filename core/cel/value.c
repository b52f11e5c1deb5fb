/* Values: errors and the budget, scratch memory, constructors, the
 * growing text buffer. What every other file of core/cel uses. */
#include "cel/cel_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- Errors and the budget ------------------------------------------------ */

int cel_fail(cel_E *e, uint32_t pos, const char *fmt, ...) {
  if (!e->err_set) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    e->err_set = 1;
    e->err_pos = pos;
  }
  return kCel_Error;
}

int cel_fatal(cel_E *e, pc_CelStatus status, uint32_t pos, const char *what) {
  if (e->status == kPc_CelStatus_Ok) {
    e->status = status;
    e->err_set = 0; /* a limit outranks any error being carried */
    if (status == kPc_CelStatus_Limit)
      cel_fail(e, pos, "evaluation limit reached: %s", what);
    else
      cel_fail(e, pos, "out of memory");
  }
  return kCel_Fatal;
}

void cel_clear_error(cel_E *e) {
  e->err_set = 0;
  e->err[0] = '\0';
}

void *cel_alloc(cel_E *e, size_t n, uint32_t pos) {
  if (n == 0) n = 1;
  if (e->running && (n > e->limits.bytes || e->used.bytes > e->limits.bytes - n)) {
    cel_fatal(e, kPc_CelStatus_Limit, pos, "bytes");
    return NULL;
  }
  void *p = pc_Arena_Malloc(e->arena, n);
  if (p == NULL) {
    cel_fatal(e, kPc_CelStatus_NoMemory, pos, "memory");
    return NULL;
  }
  e->used.bytes += n;
  return p;
}

int cel_check_size(cel_E *e, size_t n, uint32_t pos) {
  if (!e->running) return kCel_Ok;
  if (n > e->limits.max_size) return cel_fatal(e, kPc_CelStatus_Limit, pos, "size");
  if (n > e->used.max_size) e->used.max_size = n;
  return kCel_Ok;
}

char *cel_new_string(cel_E *e, size_t n, uint32_t pos) {
  if (cel_check_size(e, n, pos) != kCel_Ok) return NULL;
  if (cel_steps(e, n / 16, pos) != kCel_Ok) return NULL;
  return cel_alloc(e, n + 1, pos);
}

/* -- Constructors ----------------------------------------------------------- */

pc_CelValue cel_bool(int b) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Bool;
  v.v.b = b != 0;
  return v;
}

pc_CelValue cel_int(int64_t i) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Int;
  v.v.i = i;
  return v;
}

pc_CelValue cel_uint(uint64_t u) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Uint;
  v.v.u = u;
  return v;
}

pc_CelValue cel_double(double d) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Double;
  v.v.d = d;
  return v;
}

pc_CelValue cel_string(const char *s, size_t n) {
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_String;
  v.v.s.data = s;
  v.v.s.size = n;
  return v;
}

pc_CelValue cel_bytes(const char *s, size_t n) {
  pc_CelValue v = cel_string(s, n);
  v.kind = kPc_Cel_Bytes;
  return v;
}

pc_CelValue cel_type(const char *name) {
  pc_CelValue v = cel_string(name, strlen(name));
  v.kind = kPc_Cel_Type;
  return v;
}

const char *cel_type_name(const pc_CelValue *v) {
  if (v->kind == kPc_Cel_Message) return v->v.m.def->full_name;
  return cel_kind_name(v->kind);
}

const char *pc_CelValue_TypeName(const pc_CelValue *v) {
  return cel_type_name(v);
}

/* -- Values as text --------------------------------------------------------- */

/* -- Text -------------------------------------------------------------------- */

int cel_buf_add(cel_E *e, cel_Buf *b, const char *s, size_t n, uint32_t pos) {
  if (cel_check_size(e, b->size + n, pos) != kCel_Ok) return kCel_Fatal;
  if (b->data == NULL || n > b->cap - b->size) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->size + n + 1) cap *= 2;
    char *data = cel_alloc(e, cap, pos);
    if (data == NULL) return kCel_Fatal;
    if (b->size && b->data != NULL) memcpy(data, b->data, b->size);
    b->data = data;
    b->cap = cap - 1; /* room for a NUL */
  }
  if (n) memcpy(b->data + b->size, s, n);
  b->size += n;
  b->data[b->size] = '\0';
  return cel_steps(e, n / 16, pos);
}

/* -- Failures of calls ----------------------------------------------------- */

int cel_no_overload(cel_E *e, const cel_Node *n, const pc_CelValue *args, size_t nargs) {
  char types[256];
  size_t o = 0;
  for (size_t i = 0; i < nargs && o < sizeof types - 64; i++)
    o += (size_t)snprintf(types + o, sizeof types - o, "%s%s", i ? ", " : "",
                          cel_type_name(&args[i]));
  types[o] = '\0';
  return cel_fail(e, n->pos, "no matching overload for '%s' applied to (%s)",
                  cel_fn_info[n->fn].name, types);
}
