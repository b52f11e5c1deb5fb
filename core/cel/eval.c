/* Evaluation: a walk over the compiled tree within the budget, CEL's
 * error rules (errors are values until something needs them; `&&`, `||`,
 * `all` and `exists` absorb an error when another operand decides), the
 * macros as loops; and the context and binding API of cel.h. */
#include "cel/cel_internal.h"

#include <stdio.h>
#include <string.h>

/* -- Errors carried past an operand that may still decide ------------------- */

typedef struct {
  char *msg; /* a copy, in the context, of the first error */
  uint32_t pos;
} Pending;

/* Keeps the error just raised; kCel_Fatal when keeping it needs memory
 * that is not there. */
static int keep(cel_E *e, Pending *p) {
  if (p->msg != NULL) return kCel_Ok; /* the first one is kept */
  size_t n = strlen(e->err);
  p->msg = cel_alloc(e, n + 1, e->err_pos);
  if (p->msg == NULL) return kCel_Fatal;
  memcpy(p->msg, e->err, n + 1);
  p->pos = e->err_pos;
  return kCel_Ok;
}

static int restore(cel_E *e, const Pending *p) {
  cel_clear_error(e);
  return cel_fail(e, p->pos, "%s", p->msg);
}

/* -- Selection and indexing ------------------------------------------------- */

static const pc_FieldDef *find_field(cel_E *e, const cel_Node *n, const pc_CelValue *v) {
  const pc_MessageDef *m = v->v.m.def;
  const pc_FieldDef *f = n->field != NULL && m == n->mtype
                             ? n->field
                             : pc_MessageDef_FindFieldByName(m, n->name, n->name_len);
  if (f == NULL)
    cel_fail(e, n->pos, "no such field '%.*s' in %s", (int)n->name_len, n->name, m->full_name);
  return f;
}

static int select_value(cel_E *e, const cel_Node *n, const pc_CelValue *v, pc_CelValue *out) {
  if (v->kind == kPc_Cel_Message) {
    const pc_FieldDef *f = find_field(e, n, v);
    if (f == NULL) return kCel_Error;
    return cel_field_value(e, v->v.m.msg, f, n->pos, out);
  }
  if (v->kind == kPc_Cel_Map) {
    pc_CelValue key = cel_string(n->name, n->name_len);
    int found, rc = cel_map_find(e, v->v.map, &key, n->pos, out, &found);
    if (rc != kCel_Ok) return rc;
    if (!found) return cel_fail(e, n->pos, "no such key: '%.*s'", (int)n->name_len, n->name);
    return kCel_Ok;
  }
  return cel_fail(e, n->pos, "type '%s' does not support field selection ('.%.*s')",
                  cel_type_name(v), (int)n->name_len, n->name);
}

static int has_value(cel_E *e, const cel_Node *n, const pc_CelValue *v, pc_CelValue *out) {
  if (v->kind == kPc_Cel_Message) {
    const pc_FieldDef *f = find_field(e, n, v);
    if (f == NULL) return kCel_Error;
    *out = cel_bool(cel_has_field(v->v.m.msg, f));
    return kCel_Ok;
  }
  if (v->kind == kPc_Cel_Map) {
    pc_CelValue key = cel_string(n->name, n->name_len);
    int found, rc = cel_map_find(e, v->v.map, &key, n->pos, NULL, &found);
    if (rc != kCel_Ok) return rc;
    *out = cel_bool(found);
    return kCel_Ok;
  }
  return cel_fail(e, n->pos, "has() cannot test a field of a %s", cel_type_name(v));
}

static int index_value(cel_E *e, const cel_Node *n, const pc_CelValue *c, const pc_CelValue *k,
                       pc_CelValue *out) {
  if (c->kind == kPc_Cel_List) {
    int64_t i;
    if (k->kind == kPc_Cel_Int) {
      i = k->v.i;
    } else if (k->kind == kPc_Cel_Uint) {
      i = k->v.u > (uint64_t)INT64_MAX ? -1 : (int64_t)k->v.u;
    } else if (k->kind == kPc_Cel_Double) {
      double d = k->v.d;
      if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != (double)(int64_t)d)
        return cel_fail(e, n->pos, "invalid_argument: list index %g is not an integer", d);
      i = (int64_t)d;
    } else {
      return cel_fail(e, n->pos, "invalid_argument: no matching overload for list index of type %s",
                      cel_type_name(k));
    }
    if (i < 0 || (uint64_t)i >= c->v.list->size)
      return cel_fail(e, n->pos, "invalid_argument: index %lld out of range (list of %zu)",
                      (long long)i, c->v.list->size);
    return cel_list_get(e, c->v.list, (size_t)i, n->pos, out);
  }
  if (c->kind == kPc_Cel_Map) {
    int found, rc = cel_map_find(e, c->v.map, k, n->pos, out, &found);
    if (rc != kCel_Ok) return rc;
    if (!found) {
      if (k->kind == kPc_Cel_String)
        return cel_fail(e, n->pos, "no such key: '%.*s'",
                        (int)(k->v.s.size > 100 ? 100 : k->v.s.size), k->v.s.data);
      return cel_fail(e, n->pos, "no such key");
    }
    return kCel_Ok;
  }
  return cel_fail(e, n->pos, "no matching overload for index of %s with %s", cel_type_name(c),
                  cel_type_name(k));
}

/* -- Logic ------------------------------------------------------------------ */

/* a && b, a || b: the first operand that decides wins, errors or not. */
static int logic(cel_E *e, const cel_Node *n, pc_CelValue *out) {
  int decide = n->kind == kCelNode_Or; /* the value that decides */
  const char *op = decide ? "||" : "&&";
  Pending p = {NULL, 0};
  for (int k = 0; k < 2; k++) {
    pc_CelValue v;
    int rc = cel_eval(e, n->kids[k], &v);
    if (rc == kCel_Ok && v.kind != kPc_Cel_Bool) {
      cel_fail(e, n->kids[k]->pos, "no matching overload for '%s' applied to %s", op,
               cel_type_name(&v));
      rc = kCel_Error;
    }
    if (rc == kCel_Fatal) return rc;
    if (rc == kCel_Ok && v.v.b == decide) {
      cel_clear_error(e);
      *out = v;
      return kCel_Ok;
    }
    if (rc == kCel_Error) {
      if (keep(e, &p) != kCel_Ok) return kCel_Fatal;
      cel_clear_error(e);
    }
  }
  if (p.msg != NULL) return restore(e, &p);
  *out = cel_bool(!decide);
  return kCel_Ok;
}

/* -- Comprehensions --------------------------------------------------------- */

static int comprehension(cel_E *e, const cel_Node *n, pc_CelValue *out) {
  pc_CelValue range;
  int rc = cel_eval(e, n->kids[0], &range);
  if (rc != kCel_Ok) return rc;
  int is_map = range.kind == kPc_Cel_Map;
  if (!is_map && range.kind != kPc_Cel_List)
    return cel_fail(e, n->pos, "cannot range over a %s", cel_type_name(&range));
  size_t count = is_map ? range.v.map->size : range.v.list->size;
  cel_CompKind kind = (cel_CompKind)n->comp;
  int two = n->name2 != NULL;
  /* what the loop builds */
  pc_CelValue *items = NULL, *keys = NULL;
  size_t made = 0;
  int builds = kind == kCelComp_Map || kind == kCelComp_MapFilter || kind == kCelComp_Filter ||
               kind == kCelComp_TransformList || kind == kCelComp_TransformMap;
  if (builds) {
    if (cel_check_size(e, count, n->pos) != kCel_Ok) return kCel_Fatal;
    items = cel_alloc(e, (count ? count : 1) * sizeof *items, n->pos);
    if (items == NULL) return kCel_Fatal;
    if (kind == kCelComp_TransformMap) {
      keys = cel_alloc(e, (count ? count : 1) * sizeof *keys, n->pos);
      if (keys == NULL) return kCel_Fatal;
    }
  }
  int quantifier = kind == kCelComp_All || kind == kCelComp_All2 || kind == kCelComp_Exists ||
                   kind == kCelComp_Exists2;
  int decide = kind == kCelComp_Exists || kind == kCelComp_Exists2; /* for all/exists */
  Pending p = {NULL, 0};
  uint64_t trues = 0;
  pc_CelValue *first = &e->slots[n->slot], *second = two ? &e->slots[n->slot + 1] : NULL;
  for (size_t i = 0; i < count; i++) {
    if (++e->used.iterations > e->limits.iterations)
      return cel_fatal(e, kPc_CelStatus_Limit, n->pos, "iterations");
    pc_CelValue elem, value;
    if (is_map)
      rc = cel_map_entry(e, range.v.map, i, n->pos, &elem, two ? &value : NULL);
    else
      rc = cel_list_get(e, range.v.list, i, n->pos, &elem);
    if (rc != kCel_Ok) return rc;
    if (two) {
      if (!is_map) {
        value = elem;
        elem = cel_int((int64_t)i);
      }
      *first = elem;
      *second = value;
    } else {
      *first = elem;
    }
    /* the predicate (if any) */
    const cel_Node *pred = NULL, *transform = NULL;
    switch (kind) {
    case kCelComp_Map: transform = n->kids[1]; break;
    case kCelComp_MapFilter:
      pred = n->kids[1];
      transform = n->kids[2];
      break;
    case kCelComp_TransformList:
    case kCelComp_TransformMap:
      if (n->n == 3) {
        pred = n->kids[1];
        transform = n->kids[2];
      } else {
        transform = n->kids[1];
      }
      break;
    default: pred = n->kids[1]; break;
    }
    if (pred != NULL) {
      pc_CelValue v;
      rc = cel_eval(e, pred, &v);
      if (rc == kCel_Ok && v.kind != kPc_Cel_Bool) {
        cel_fail(e, pred->pos, "no matching overload: the predicate gave a %s", cel_type_name(&v));
        rc = kCel_Error;
      }
      if (rc == kCel_Fatal) return rc;
      if (quantifier) {
        if (rc == kCel_Ok && v.v.b == decide) {
          cel_clear_error(e);
          *out = cel_bool(decide);
          return kCel_Ok;
        }
        if (rc == kCel_Error) {
          if (keep(e, &p) != kCel_Ok) return kCel_Fatal;
          cel_clear_error(e);
        }
        continue;
      }
      if (rc != kCel_Ok) return rc;
      if (kind == kCelComp_ExistsOne || kind == kCelComp_ExistsOne2) {
        trues += v.v.b;
        continue;
      }
      if (!v.v.b) continue;
    }
    if (kind == kCelComp_Filter) {
      items[made++] = two ? value : elem;
      continue;
    }
    if (transform != NULL) {
      rc = cel_eval(e, transform, &items[made]);
      if (rc != kCel_Ok) return rc;
      if (keys != NULL) keys[made] = elem;
      made++;
    }
  }
  if (quantifier) {
    if (p.msg != NULL) return restore(e, &p);
    *out = cel_bool(!decide);
    return kCel_Ok;
  }
  if (kind == kCelComp_ExistsOne || kind == kCelComp_ExistsOne2) {
    *out = cel_bool(trues == 1);
    return kCel_Ok;
  }
  if (kind == kCelComp_TransformMap) return cel_new_map(e, keys, items, made, n->pos, out);
  return cel_new_list(e, items, made, n->pos, out);
}

/* -- Nodes ------------------------------------------------------------------ */

int cel_eval(cel_E *e, const cel_Node *n, pc_CelValue *out) {
  out->kind = kPc_Cel_Unbound;
  int rc = cel_steps(e, 1, n->pos);
  if (rc != kCel_Ok) return rc;
  switch ((cel_NodeKind)n->kind) {
  case kCelNode_Const: *out = n->value; return kCel_Ok;
  case kCelNode_Ident:
    *out = e->slots[n->slot];
    if (out->kind == kPc_Cel_Unbound)
      return cel_fail(e, n->pos, "no value bound to '%s'",
                      (size_t)n->slot < e->prog->var_count ? e->prog->var_names[n->slot] : "?");
    return kCel_Ok;
  case kCelNode_Select:
  case kCelNode_Has: {
    pc_CelValue v;
    if ((rc = cel_eval(e, n->kids[0], &v)) != kCel_Ok) return rc;
    return n->kind == kCelNode_Select ? select_value(e, n, &v, out) : has_value(e, n, &v, out);
  }
  case kCelNode_Index: {
    pc_CelValue c, k;
    if ((rc = cel_eval(e, n->kids[0], &c)) != kCel_Ok ||
        (rc = cel_eval(e, n->kids[1], &k)) != kCel_Ok)
      return rc;
    return index_value(e, n, &c, &k, out);
  }
  case kCelNode_Call: {
    pc_CelValue args[4];
    for (uint32_t i = 0; i < n->n; i++)
      if ((rc = cel_eval(e, n->kids[i], &args[i])) != kCel_Ok) return rc;
    return cel_call(e, n, args, n->n, out);
  }
  case kCelNode_List:
  case kCelNode_Map: {
    int map = n->kind == kCelNode_Map;
    size_t count = map ? n->n / 2 : n->n;
    if (cel_check_size(e, count, n->pos) != kCel_Ok) return kCel_Fatal;
    pc_CelValue *vals = cel_alloc(e, (n->n ? n->n : 1) * sizeof *vals, n->pos);
    if (vals == NULL) return kCel_Fatal;
    for (uint32_t i = 0; i < n->n; i++)
      if ((rc = cel_eval(e, n->kids[i], &vals[i])) != kCel_Ok) return rc;
    if (!map) return cel_new_list(e, vals, count, n->pos, out);
    /* keys first, then values: split the pairs */
    pc_CelValue *keys = cel_alloc(e, (count ? count : 1) * sizeof *keys, n->pos);
    pc_CelValue *values =
        keys != NULL ? cel_alloc(e, (count ? count : 1) * sizeof *values, n->pos) : NULL;
    if (values == NULL) return kCel_Fatal;
    for (size_t i = 0; i < count; i++) {
      keys[i] = vals[2 * i];
      values[i] = vals[2 * i + 1];
    }
    return cel_new_map(e, keys, values, count, n->pos, out);
  }
  case kCelNode_Cond: {
    pc_CelValue c;
    if ((rc = cel_eval(e, n->kids[0], &c)) != kCel_Ok) return rc;
    if (c.kind != kPc_Cel_Bool)
      return cel_fail(e, n->pos, "no matching overload for '_?_:_' applied to %s",
                      cel_type_name(&c));
    return cel_eval(e, n->kids[c.v.b ? 1 : 2], out);
  }
  case kCelNode_And:
  case kCelNode_Or: return logic(e, n, out);
  case kCelNode_Comp: return comprehension(e, n, out);
  case kCelNode_Name:
  case kCelNode_Struct: break;
  }
  return cel_fail(e, n->pos, "internal error: an unresolved node");
}

/* -- The context ------------------------------------------------------------ */

static const pc_CelLimits kDefaultLimits = PC_CEL_DEFAULT_LIMITS;

pc_CelEval *pc_CelEval_New(pc_Alloc *alloc, void *ud) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_CelEval *e = alloc(ud, NULL, 0, sizeof *e);
  if (e == NULL) return NULL;
  memset(e, 0, sizeof *e);
  e->alloc = alloc;
  e->ud = ud;
  e->limits = kDefaultLimits;
  e->arena = pc_Arena_New(alloc, ud);
  if (e->arena == NULL) {
    alloc(ud, e, sizeof *e, 0);
    return NULL;
  }
  return e;
}

void pc_CelEval_Free(pc_CelEval *e) {
  if (e == NULL) return;
  for (unsigned i = 0; i < CEL_REGEX_CACHE; i++) {
    if (e->cache[i].re != NULL) {
      pc_CelRegex_Free(e->cache[i].re);
      e->alloc(e->ud, e->cache[i].pattern, e->cache[i].len + 1, 0);
    }
  }
  pc_Arena_Free(e->arena);
  e->alloc(e->ud, e, sizeof *e, 0);
}

void pc_CelEval_SetLimits(pc_CelEval *e, const pc_CelLimits *limits) {
  e->limits = limits != NULL ? *limits : kDefaultLimits;
}

void pc_CelEval_Used(const pc_CelEval *e, pc_CelLimits *used) {
  *used = e->used;
}

void pc_CelEval_Reset(pc_CelEval *e) {
  pc_Arena_Reset(e->arena);
}

/* The status and message of a failure outside an evaluation. */
static pc_CelStatus finish(cel_E *e, int rc, pc_Error *err, int with_position) {
  if (rc == kCel_Ok) return kPc_CelStatus_Ok;
  pc_CelStatus st = rc == kCel_Fatal ? e->status : kPc_CelStatus_Error;
  if (err != NULL && !err->set) {
    if (with_position) {
      char where[32];
      cel_position(e->prog->text, e->prog->len, e->err_pos, where, sizeof where);
      pc_Error_Set(err, "%s%s", where, e->err);
    } else {
      pc_Error_Set(err, "%s", e->err);
    }
  }
  return st;
}

static void start(cel_E *e, int running) {
  e->running = running;
  e->status = kPc_CelStatus_Ok;
  cel_clear_error(e);
}

pc_CelStatus pc_CelProgram_Eval(const pc_CelProgram *p, pc_CelEval *e, const pc_CelValue *vars,
                                pc_CelValue *result, pc_Error *err) {
  memset(&e->used, 0, sizeof e->used);
  start(e, 1);
  e->prog = p;
  memset(result, 0, sizeof *result);
  int rc = kCel_Ok;
  e->slots = cel_alloc(e, (p->slot_count ? p->slot_count : 1) * sizeof *e->slots, 0);
  if (e->slots == NULL) {
    rc = kCel_Fatal;
  } else {
    memset(e->slots, 0, (p->slot_count ? p->slot_count : 1) * sizeof *e->slots);
    for (size_t i = 0; i < p->var_count && rc == kCel_Ok; i++) {
      pc_CelValue v = vars != NULL ? vars[i] : e->slots[i];
      /* a well-known type bound as a raw message reads as CEL reads it */
      if (v.kind == kPc_Cel_Message && cel_is_wkt(v.v.m.def))
        rc = cel_message_value(e, v.v.m.msg, v.v.m.def, 0, &v);
      e->slots[i] = v;
    }
  }
  if (rc == kCel_Ok) rc = cel_eval(e, p->root, result);
  pc_CelStatus st = finish(e, rc, err, 1);
  e->running = 0;
  return st;
}

/* -- Bindings and results ------------------------------------------------- */

pc_CelStatus pc_CelEval_MessageValue(pc_CelEval *e, const pc_Message *msg, const pc_MessageDef *m,
                                     pc_CelValue *out, pc_Error *err) {
  start(e, 0);
  return finish(e, cel_message_value(e, msg, m, 0, out), err, 0);
}

pc_CelStatus pc_CelEval_FieldValue(pc_CelEval *e, const pc_Message *msg, const pc_FieldDef *f,
                                   pc_CelValue *out, pc_Error *err) {
  start(e, 0);
  return finish(e, cel_field_value(e, msg, f, 0, out), err, 0);
}

pc_CelStatus pc_CelEval_ElemValue(pc_CelEval *e, const pc_FieldDef *f, pc_Value v, pc_CelValue *out,
                                  pc_Error *err) {
  start(e, 0);
  return finish(e, cel_elem_value(e, f, v, 0, out), err, 0);
}

const pc_CelList *pc_CelEval_NewList(pc_CelEval *e, const pc_CelValue *items, size_t n) {
  start(e, 0);
  pc_CelValue *copy = cel_alloc(e, (n ? n : 1) * sizeof *copy, 0);
  pc_CelValue out;
  if (copy == NULL) return NULL;
  if (n) memcpy(copy, items, n * sizeof *copy);
  if (cel_new_list(e, copy, n, 0, &out) != kCel_Ok) return NULL;
  return out.v.list;
}

pc_CelStatus pc_CelEval_ListGet(pc_CelEval *e, const pc_CelList *l, size_t i, pc_CelValue *out,
                                pc_Error *err) {
  start(e, 0);
  return finish(e, cel_list_get(e, l, i, 0, out), err, 0);
}

pc_CelStatus pc_CelEval_MapEntry(pc_CelEval *e, const pc_CelMap *m, size_t i, pc_CelValue *key,
                                 pc_CelValue *value, pc_Error *err) {
  start(e, 0);
  return finish(e, cel_map_entry(e, m, i, 0, key, value), err, 0);
}
