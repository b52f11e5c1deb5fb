/* Validation with protovalidate's rules (validate.h). A plan per message
 * type says what to check of each field; the rules' CEL programs come from
 * validate.proto's own options and from the schema's, compiled once. */
#include "validate/validate.h"

#include "base/hash.h"

#include "cel/cel.h"
#include "wire/decode.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Kept out of the functions that recurse into nested messages, so their
 * frames stay small: a message PC_MESSAGE_MAX_DEPTH deep is validated on a
 * 1 MiB thread stack (validate_test.c), as it is decoded there. */
#if defined(__GNUC__)
#define PC_COLD __attribute__((noinline))
#else
#define PC_COLD
#endif

/* buf.validate's field numbers. */
enum {
  kExtRules = 1159,     /* (buf.validate.field / message / oneof) */
  kExtPredefined = 1160 /* (buf.validate.predefined), on FieldOptions */
};

/* buf.validate.Ignore */
enum { kIgnore_Unspecified = 0, kIgnore_IfZero = 1, kIgnore_Always = 3 };

/* When a field's rules run. */
enum { kCond_Always, kCond_IfSet, kCond_Never };

/* One CEL rule: a custom one or one of validate.proto's. */
typedef struct {
  pc_CelProgram *prog;
  const char *id, *message, *expr;
} CelRule;

/* validate.proto's rules of one field of a *Rules message
 * (StringRules.min_len: "string.min_len", ...). */
typedef struct {
  CelRule *rules;
  size_t n;
} Predef;

/* A standard rule checked in C first: only when the check fails are the
 * rule's CEL expressions run, for the violation's exact id and message (so
 * the check may fail where the expressions pass, never the reverse). */
enum {
  kN_Range = 1, /* gt / gte with lt / lte, of a number ('rf' lower, 'rf2' upper) */
  kN_Const,
  kN_In,
  kN_NotIn,
  kN_Len, /* code points for strings, bytes for bytes */
  kN_MinLen,
  kN_MaxLen,
  kN_LenBytes,
  kN_MinBytes,
  kN_MaxBytes,
  kN_Prefix,
  kN_Suffix,
  kN_Contains,
  kN_NotContains,
  kN_MinSize, /* repeated.min_items, map.min_pairs */
  kN_MaxSize,
  kN_Format,  /* a string format (bool rules: email, uri, uuid, ...: 'fmt') */
  kN_Pattern, /* string.pattern, compiled once ('re') */
  kN_Unique   /* repeated.unique */
};

/* The string formats checked in C (the predicates are core/cel's, the
 * functions the rules' expressions call; the regular expressions of uuid,
 * tuuid, ulid and the protobuf names are written out here). */
enum {
  kF_Email = 1,
  kF_Hostname,
  kF_Ip,
  kF_Ipv4,
  kF_Ipv6,
  kF_Uri,
  kF_UriRef, /* the one format an empty string may pass (isUriRef('')) */
  kF_Address,
  kF_Uuid,
  kF_Tuuid,
  kF_Ulid,
  kF_IpWithPrefixlen,
  kF_Ipv4WithPrefixlen,
  kF_Ipv6WithPrefixlen,
  kF_IpPrefix,
  kF_Ipv4Prefix,
  kF_Ipv6Prefix,
  kF_HostAndPort,
  kF_ProtobufFqn,
  kF_ProtobufDotFqn
};

/* The kinds of value a native check reads. */
enum { kFam_None, kFam_Signed, kFam_Unsigned, kFam_Double, kFam_String, kFam_Bytes, kFam_List };

typedef struct {
  int kind;                    /* kN_*, or 0: the rule has no native check (its CEL runs) */
  int fmt;                     /* kN_Format: kF_* */
  int strict_lo, strict_hi;    /* kN_Range: gt (not gte), lt (not lte) */
  pc_Value r, r2;              /* the values of 'rf' and 'rf2' in the rules message */
  const pc_CelRegex *re;       /* kN_Pattern: the pattern, the validator's */
  const pc_FieldDef *rf, *rf2; /* the rule's field(s) in the *Rules message */
  const Predef *p, *p2;        /* their CEL */
  int ext;                     /* 'rf' is an extension of the *Rules message: a predefined
                                  rule of the schema, with `rule` bound to its value */
  const uint32_t *set;         /* kN_In, kN_NotIn of a long list: the items' indexes + 1
                                  by hash (0: free), so a value costs a probe, not a scan */
  size_t set_cap;              /* a power of two, twice the items or more */
} Native;

/* What to check of one value (a field's, an item's, a map key's or value's). */
typedef struct {
  CelRule *custom; /* FieldRules.cel and cel_expression */
  size_t ncustom;
  const pc_Message *rules; /* the *Rules message (StringRules, ...), or NULL */
  const pc_MessageDef *rules_type;
  Native *native; /* the standard rules of its set fields, in their order: checked in C
                     first (kind != 0) or CEL only (kind 0) */
  size_t nnative;
  int family;                          /* kFam_*: how the native checks read the value */
  const pc_EnumDef *defined_only;      /* enum.defined_only */
  const pc_Array *any_in, *any_not_in; /* any.in / any.not_in (strings) */
  const pc_MessageDef *recurse;        /* a message: validated in turn */
  int ignore;                          /* items, keys, values: buf.validate.Ignore */
} ValuePlan;

typedef struct {
  const pc_FieldDef *f;
  size_t namelen; /* of f->name */
  int required, cond;
  ValuePlan self;  /* the field's value (a list or a map for those) */
  ValuePlan items; /* repeated: each item; map: each value */
  ValuePlan keys;  /* map: each key */
} FieldPlan;

typedef struct {
  const pc_FieldDef **fields;
  size_t n;
  int required;
} OneofRule;

typedef struct {
  FieldPlan *fields;
  size_t nfields;
  CelRule *cel; /* MessageRules.cel and cel_expression */
  size_t ncel;
  OneofRule *oneofs; /* MessageRules.oneof */
  size_t noneofs;
  const pc_OneofDef **required; /* oneofs with (buf.validate.oneof).required */
  size_t nrequired;
} Plan;

/* One step of the path to the value being checked: a field or oneof name,
 * a list index or a map key. The path is written out only when a violation
 * or an error needs it (most validations find none). */
typedef struct {
  const char *name; /* a name ('len' bytes), or NULL */
  size_t len;
  const pc_FieldDef *kf; /* with no name: a map key's field, or NULL for an index */
  pc_Value key;          /* the key, or the index in .u64 */
} PathSeg;

/* Pointer-keyed table (open addressing, grows at half full). */
typedef struct {
  const void **keys;
  void **vals;
  size_t n, cap;
} PtrMap;

struct pc_Validator {
  pc_Alloc *alloc;
  void *ud;
  pc_Arena *arena;   /* plans, programs' texts, rule messages: the validator's life */
  pc_Arena *scratch; /* the last validation's violations */
  pc_CelEval *ev;
  PtrMap plans;   /* pc_MessageDef * -> Plan * */
  PtrMap predefs; /* pc_FieldDef * of a *Rules message -> Predef * */
  pc_CelProgram **programs;
  size_t nprograms, capprograms;
  pc_CelRegex **regexes; /* string.pattern rules, compiled for kN_Pattern */
  size_t nregexes, capregexes;
  /* the validation under way */
  pc_Violation *vio;
  size_t nvio, capvio;
  PathSeg *segs; /* the path to the value being checked */
  size_t nsegs, capsegs;
  char *path; /* the path written out (path_text) */
  size_t plen, pcap;
  pc_CelValue now;
  size_t cel_runs; /* programs evaluated */
  int legacy_required;
  size_t max_vio; /* violations kept at most (0: all) */
  int truncated;  /* the last validation stopped at max_vio */
  int fail_fast;
  int depth;   /* messages entered: PC_MESSAGE_MAX_DEPTH at most */
  int limited; /* the last rule that failed to run reached the CEL budget */
  pc_ValidateStatus status;
  pc_Error *err;
};

/* -- Memory ---------------------------------------------------------------- */

static void *grow(pc_Validator *v, void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return p;
  size_t ncap = *cap ? *cap * 2 : 16;
  while (ncap < need) ncap *= 2;
  void *np = v->alloc(v->ud, p, *cap * elem, ncap * elem);
  if (np == NULL) return NULL;
  *cap = ncap;
  return np;
}

static size_t ptr_hash(const void *p, size_t cap) {
  return (size_t)pc_Hash_Mix64((uint64_t)(uintptr_t)p) & (cap - 1);
}

static void *map_get(const PtrMap *m, const void *key) {
  if (m->cap == 0) return NULL;
  for (size_t i = ptr_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key) return m->vals[i];
    if (m->keys[i] == NULL) return NULL;
  }
}

static int map_put(pc_Validator *v, PtrMap *m, const void *key, void *val) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    const void **keys = v->alloc(v->ud, NULL, 0, ncap * sizeof(*keys));
    void **vals = v->alloc(v->ud, NULL, 0, ncap * sizeof(*vals));
    if (keys == NULL || vals == NULL) {
      if (keys) v->alloc(v->ud, keys, ncap * sizeof(*keys), 0);
      if (vals) v->alloc(v->ud, vals, ncap * sizeof(*vals), 0);
      return 0;
    }
    memset(keys, 0, ncap * sizeof(*keys));
    for (size_t i = 0; i < m->cap; i++) {
      if (m->keys[i] == NULL) continue;
      size_t j = ptr_hash(m->keys[i], ncap);
      while (keys[j] != NULL) j = (j + 1) & (ncap - 1);
      keys[j] = m->keys[i];
      vals[j] = m->vals[i];
    }
    if (m->cap) {
      v->alloc(v->ud, m->keys, m->cap * sizeof(*m->keys), 0);
      v->alloc(v->ud, m->vals, m->cap * sizeof(*m->vals), 0);
    }
    m->keys = keys;
    m->vals = vals;
    m->cap = ncap;
  }
  size_t i = ptr_hash(key, m->cap);
  while (m->keys[i] != NULL && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
  if (m->keys[i] == NULL) m->n++;
  m->keys[i] = key;
  m->vals[i] = val;
  return 1;
}

static void map_free(pc_Validator *v, PtrMap *m) {
  if (m->cap == 0) return;
  v->alloc(v->ud, m->keys, m->cap * sizeof(*m->keys), 0);
  v->alloc(v->ud, m->vals, m->cap * sizeof(*m->vals), 0);
}

pc_Validator *pc_Validator_New(pc_Alloc *alloc, void *ud) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_Validator *v = alloc(ud, NULL, 0, sizeof(*v));
  if (v == NULL) return NULL;
  memset(v, 0, sizeof(*v));
  v->alloc = alloc;
  v->ud = ud;
  v->arena = pc_Arena_New(alloc, ud);
  v->scratch = pc_Arena_New(alloc, ud);
  v->ev = pc_CelEval_New(alloc, ud);
  if (v->arena == NULL || v->scratch == NULL || v->ev == NULL) {
    pc_Validator_Free(v);
    return NULL;
  }
  return v;
}

void pc_Validator_Free(pc_Validator *v) {
  if (v == NULL) return;
  for (size_t i = 0; i < v->nprograms; i++) pc_CelProgram_Free(v->programs[i]);
  if (v->capprograms) v->alloc(v->ud, v->programs, v->capprograms * sizeof(pc_CelProgram *), 0);
  for (size_t i = 0; i < v->nregexes; i++) pc_CelRegex_Free(v->regexes[i]);
  if (v->capregexes) v->alloc(v->ud, v->regexes, v->capregexes * sizeof(pc_CelRegex *), 0);
  if (v->capvio) v->alloc(v->ud, v->vio, v->capvio * sizeof(*v->vio), 0);
  if (v->pcap) v->alloc(v->ud, v->path, v->pcap, 0);
  if (v->capsegs) v->alloc(v->ud, v->segs, v->capsegs * sizeof(*v->segs), 0);
  map_free(v, &v->plans);
  map_free(v, &v->predefs);
  pc_CelEval_Free(v->ev);
  pc_Arena_Free(v->scratch);
  pc_Arena_Free(v->arena);
  v->alloc(v->ud, v, sizeof(*v), 0);
}

size_t pc_Validator_ViolationCount(const pc_Validator *v) {
  return v->nvio;
}

const pc_Violation *pc_Validator_Violation(const pc_Validator *v, size_t i) {
  return i < v->nvio ? &v->vio[i] : NULL;
}

size_t pc_Validator_PlanCount(const pc_Validator *v) {
  return v->plans.n;
}

void pc_Validator_SetLegacyRequired(pc_Validator *v, int on) {
  v->legacy_required = on != 0;
}

void pc_Validator_SetMaxViolations(pc_Validator *v, size_t max) {
  v->max_vio = max;
}

int pc_Validator_Truncated(const pc_Validator *v) {
  return v->truncated;
}

size_t pc_Validator_CelCount(const pc_Validator *v) {
  return v->cel_runs;
}

/* -- Reading the rules from options ----------------------------------------- */

static const uint8_t *read_varint(const uint8_t *p, const uint8_t *end, uint64_t *out) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t b = *p++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = x;
      return p;
    }
  }
  return NULL;
}

/* The message of extension 'number' (length-delimited, every occurrence
 * merged as protobuf merges them) in the serialized options 'o', decoded
 * as 'type' into the validator's arena; NULL when absent. Status in 'st'. */
static const pc_Message *option_message(pc_Validator *v, const pc_OptionsDesc *o, uint32_t number,
                                        const pc_MessageDef *type) {
  if (type == NULL || o->size == 0) return NULL;
  const uint8_t *p = o->data, *end = o->data + o->size;
  pc_Message *msg = NULL;
  while (p < end) {
    uint64_t tag, n;
    if ((p = read_varint(p, end, &tag)) == NULL) return msg;
    switch (tag & 7) {
    case 0:
      if ((p = read_varint(p, end, &n)) == NULL) return msg;
      break;
    case 1: p += 8; break;
    case 5: p += 4; break;
    case 2:
      if ((p = read_varint(p, end, &n)) == NULL || n > (uint64_t)(end - p)) return msg;
      if ((tag >> 3) == number) {
        if (msg == NULL && (msg = pc_Message_New(type, v->arena)) == NULL) {
          v->status = kPc_Validate_NoMemory;
          return NULL;
        }
        pc_DecodeOptions dopts = {0, 0, 1, 0};
        pc_Error e;
        pc_Error_Init(&e);
        if (pc_Decode((const char *)p, (size_t)n, msg, type, v->arena, &dopts, &e) !=
            kPc_DecodeStatus_Ok) {
          v->status = kPc_Validate_Compile;
          pc_Error_Set(v->err, "%s: %s", type->full_name, e.msg);
          return NULL;
        }
      }
      p += n;
      break;
    default: return msg; /* groups: no option of ours is one */
    }
  }
  return msg;
}

static const pc_MessageDesc *message_desc(const pc_MessageDef *m) {
  const pc_MessageDesc *list;
  size_t n;
  if (m->containing != NULL) {
    const pc_MessageDesc *parent = message_desc(m->containing);
    if (parent == NULL) return NULL;
    list = parent->nested;
    n = parent->nested_count;
  } else {
    list = m->file->desc->messages;
    n = m->file->desc->message_count;
  }
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i].name, m->name) == 0) return &list[i];
  return NULL;
}

/* The descriptor of field 'f', or of extension 'f' (declared at the top of
 * its file or inside a message), for its options. */
static const pc_FieldDesc *field_desc(const pc_FieldDef *f) {
  const pc_FieldDesc *list;
  size_t n;
  if (f->is_extension && f->extension_scope == NULL) {
    list = f->file->desc->extensions;
    n = f->file->desc->extension_count;
  } else {
    const pc_MessageDesc *d = message_desc(f->is_extension ? f->extension_scope : f->containing);
    if (d == NULL) return NULL;
    list = f->is_extension ? d->extensions : d->fields;
    n = f->is_extension ? d->extension_count : d->field_count;
  }
  for (size_t i = 0; i < n; i++)
    if (list[i].number == f->number && (!f->is_extension || strcmp(list[i].name, f->name) == 0))
      return &list[i];
  return NULL;
}

static const pc_FieldDef *field_named(const pc_MessageDef *m, const char *name) {
  return pc_MessageDef_FindFieldByName(m, name, strlen(name));
}

static const pc_Array *array_of(const pc_Message *msg, const pc_FieldDef *f) {
  const pc_Array *a = f ? pc_Message_Get(msg, f).a : NULL;
  return a && a->size ? a : NULL;
}

static char *dup_view(pc_Validator *v, pc_StringView s) {
  char *out = pc_Arena_StrDup(v->arena, s.data ? s.data : "", s.size);
  if (out == NULL) v->status = kPc_Validate_NoMemory;
  return out;
}

/* -- Compiling -------------------------------------------------------------- */

static const pc_CelVar kVars[] = {{"this", NULL}, {"rules", NULL}, {"rule", NULL}, {"now", NULL}};

/* Compiles one rule (id, message, expression) into 'out'; 0 on failure
 * (v->status and v->err set). */
static int compile_rule(pc_Validator *v, const pc_Pool *pool, const pc_MessageDef *this_type,
                        const pc_MessageDef *rules_type, const char *id, const char *message,
                        const char *expr, size_t elen, CelRule *out) {
  pc_CelVar vars[4];
  memcpy(vars, kVars, sizeof(vars));
  vars[0].type = this_type;
  vars[1].type = rules_type;
  pc_CelEnv env = {pool, NULL, vars, 4, 0, 0};
  pc_Error e;
  pc_Error_Init(&e);
  pc_CelProgram *prog = NULL;
  pc_CelStatus st = pc_CelProgram_New(&env, expr, elen, v->alloc, v->ud, &prog, &e);
  if (st != kPc_CelStatus_Ok) {
    v->status = st == kPc_CelStatus_NoMemory ? kPc_Validate_NoMemory : kPc_Validate_Compile;
    pc_Error_Set(v->err, "failed to compile %s: %s", id, e.msg);
    return 0;
  }
  v->programs = grow(v, v->programs, &v->capprograms, v->nprograms + 1, sizeof(pc_CelProgram *));
  if (v->programs == NULL) {
    v->capprograms = 0;
    v->nprograms = 0;
    pc_CelProgram_Free(prog);
    v->status = kPc_Validate_NoMemory;
    return 0;
  }
  v->programs[v->nprograms++] = prog;
  out->prog = prog;
  out->id = id;
  out->message = message;
  out->expr = expr;
  return 1;
}

/* The repeated buf.validate.Rule 'cel' and repeated string 'cel_expression'
 * of a FieldRules, MessageRules or PredefinedRules message, compiled. */
static int compile_rules(pc_Validator *v, const pc_Message *msg, const pc_MessageDef *type,
                         const pc_MessageDef *this_type, const pc_MessageDef *rules_type,
                         CelRule **out, size_t *n) {
  const pc_Pool *pool = type->file->pool;
  const pc_Array *cel = array_of(msg, field_named(type, "cel"));
  const pc_Array *exprs = array_of(msg, field_named(type, "cel_expression"));
  size_t total = (cel ? cel->size : 0) + (exprs ? exprs->size : 0);
  *out = NULL;
  *n = 0;
  if (total == 0) return 1;
  CelRule *rules = pc_Arena_Calloc(v->arena, total * sizeof(*rules));
  if (rules == NULL) {
    v->status = kPc_Validate_NoMemory;
    return 0;
  }
  size_t k = 0;
  if (exprs) { /* cel_expression first, as protovalidate-es (message rules) */
    for (size_t i = 0; i < exprs->size; i++) {
      pc_StringView ev = pc_Array_Get(exprs, i, kPc_Slot_String).s;
      char *e = dup_view(v, ev);
      if (e == NULL ||
          !compile_rule(v, pool, this_type, rules_type, e, "", e, ev.size, &rules[k++]))
        return 0;
    }
  }
  if (cel) {
    const pc_MessageDef *rt = field_named(type, "cel")->message;
    const pc_FieldDef *fid = field_named(rt, "id"), *fmsg = field_named(rt, "message"),
                      *fexpr = field_named(rt, "expression");
    for (size_t i = 0; i < cel->size; i++) {
      const pc_Message *r = pc_Array_Get(cel, i, kPc_Slot_Message).m;
      char *id = dup_view(v, pc_Message_Get(r, fid).s);
      char *m = dup_view(v, pc_Message_Get(r, fmsg).s);
      pc_StringView ev = pc_Message_Get(r, fexpr).s;
      char *e = dup_view(v, ev);
      if (id == NULL || m == NULL || e == NULL ||
          !compile_rule(v, pool, this_type, rules_type, id, m, e, ev.size, &rules[k++]))
        return 0;
    }
  }
  *out = rules;
  *n = total;
  return 1;
}

/* validate.proto's rules of field 'rf' of a *Rules message, compiled once. */
static const Predef *predef(pc_Validator *v, const pc_FieldDef *rf) {
  Predef *p = map_get(&v->predefs, rf);
  if (p != NULL) return p;
  if ((p = pc_Arena_Calloc(v->arena, sizeof(*p))) == NULL) {
    v->status = kPc_Validate_NoMemory;
    return NULL;
  }
  const pc_FieldDesc *d = field_desc(rf);
  const pc_MessageDef *pt = pc_Pool_FindMessage(rf->file->pool, "buf.validate.PredefinedRules");
  const pc_Message *pr = d ? option_message(v, &d->options, kExtPredefined, pt) : NULL;
  if (v->status != kPc_Validate_Valid) return NULL;
  if (pr != NULL && !compile_rules(v, pr, pt, NULL, rf->containing, &p->rules, &p->n)) return NULL;
  if (!map_put(v, &v->predefs, rf, p)) {
    v->status = kPc_Validate_NoMemory;
    return NULL;
  }
  return p;
}

/* FieldRules' case for a value of field 'f' (an element for repeated
 * fields), 0 when none fits (a message of no well-known type). */
static int rule_case(const pc_FieldDef *f) {
  static const int by_type[19] = {0, 2, 1, 4, 6, 3, 10, 9, 13, 14, 0, 0, 15, 5, 16, 11, 12, 7, 8};
  if (f->type != kPc_Type_Message && f->type != kPc_Type_Group) return by_type[f->type];
  static const struct {
    const char *name;
    int rcase;
  } wkt[] = {{"google.protobuf.Any", 20},        {"google.protobuf.Duration", 21},
             {"google.protobuf.Timestamp", 22},  {"google.protobuf.FieldMask", 28},
             {"google.protobuf.FloatValue", 1},  {"google.protobuf.DoubleValue", 2},
             {"google.protobuf.Int32Value", 3},  {"google.protobuf.Int64Value", 4},
             {"google.protobuf.UInt32Value", 5}, {"google.protobuf.UInt64Value", 6},
             {"google.protobuf.BoolValue", 13},  {"google.protobuf.StringValue", 14},
             {"google.protobuf.BytesValue", 15}};
  for (size_t i = 0; i < sizeof(wkt) / sizeof(wkt[0]); i++)
    if (strcmp(f->message->full_name, wkt[i].name) == 0) return wkt[i].rcase;
  return 0;
}

/* How native checks read values of field 'f' under rules of type 'rt'. */
static int family_of(const pc_MessageDef *rt, const pc_FieldDef *f) {
  const char *n = rt->full_name + strlen("buf.validate.");
  if (strcmp(n, "RepeatedRules") == 0 || strcmp(n, "MapRules") == 0) return kFam_List;
  switch (f->type) {
  case kPc_Type_Int32:
  case kPc_Type_Int64:
  case kPc_Type_Sint32:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed32:
  case kPc_Type_Sfixed64:
  case kPc_Type_Enum:
    return kFam_Signed; /* EnumRules: const, in, not_in (4M items of a
                           request through CEL took 1.2 s) */
  case kPc_Type_Uint32:
  case kPc_Type_Uint64:
  case kPc_Type_Fixed32:
  case kPc_Type_Fixed64: return kFam_Unsigned;
  case kPc_Type_Float:
  case kPc_Type_Double: return kFam_Double;
  case kPc_Type_String: return kFam_String;
  case kPc_Type_Bytes: return kFam_Bytes;
  default: return kFam_None; /* bools, messages (wrappers too): CEL only */
  }
}

/* The native check of rule field 'name' for values of 'family': a kN_*
 * (with '*fmt' for kN_Format), 0 for none (CEL only), -1 for a rule that
 * always passes (`example`). */
static int native_kind(int family, const char *name, int *fmt) {
  static const struct {
    const char *name;
    int kind;
    unsigned families; /* bit per kFam_* */
    int fmt;
  } table[] = {
      {"gt", kN_Range, 1u << kFam_Signed | 1u << kFam_Unsigned | 1u << kFam_Double, 0},
      {"gte", kN_Range, 1u << kFam_Signed | 1u << kFam_Unsigned | 1u << kFam_Double, 0},
      {"lt", kN_Range, 1u << kFam_Signed | 1u << kFam_Unsigned | 1u << kFam_Double, 0},
      {"lte", kN_Range, 1u << kFam_Signed | 1u << kFam_Unsigned | 1u << kFam_Double, 0},
      {"const", kN_Const,
       1u << kFam_Signed | 1u << kFam_Unsigned | 1u << kFam_String | 1u << kFam_Bytes, 0},
      {"in", kN_In, 1u << kFam_Signed | 1u << kFam_Unsigned | 1u << kFam_String, 0},
      {"not_in", kN_NotIn, 1u << kFam_Signed | 1u << kFam_Unsigned | 1u << kFam_String, 0},
      {"len", kN_Len, 1u << kFam_String | 1u << kFam_Bytes, 0},
      {"min_len", kN_MinLen, 1u << kFam_String | 1u << kFam_Bytes, 0},
      {"max_len", kN_MaxLen, 1u << kFam_String | 1u << kFam_Bytes, 0},
      {"len_bytes", kN_LenBytes, 1u << kFam_String, 0},
      {"min_bytes", kN_MinBytes, 1u << kFam_String, 0},
      {"max_bytes", kN_MaxBytes, 1u << kFam_String, 0},
      {"prefix", kN_Prefix, 1u << kFam_String | 1u << kFam_Bytes, 0},
      {"suffix", kN_Suffix, 1u << kFam_String | 1u << kFam_Bytes, 0},
      {"contains", kN_Contains, 1u << kFam_String | 1u << kFam_Bytes, 0},
      {"not_contains", kN_NotContains, 1u << kFam_String, 0},
      {"min_items", kN_MinSize, 1u << kFam_List, 0},
      {"max_items", kN_MaxSize, 1u << kFam_List, 0},
      {"min_pairs", kN_MinSize, 1u << kFam_List, 0},
      {"max_pairs", kN_MaxSize, 1u << kFam_List, 0},
      {"unique", kN_Unique, 1u << kFam_List, 0},
      {"pattern", kN_Pattern, 1u << kFam_String, 0},
      {"email", kN_Format, 1u << kFam_String, kF_Email},
      {"hostname", kN_Format, 1u << kFam_String, kF_Hostname},
      {"ip", kN_Format, 1u << kFam_String, kF_Ip},
      {"ipv4", kN_Format, 1u << kFam_String, kF_Ipv4},
      {"ipv6", kN_Format, 1u << kFam_String, kF_Ipv6},
      {"uri", kN_Format, 1u << kFam_String, kF_Uri},
      {"uri_ref", kN_Format, 1u << kFam_String, kF_UriRef},
      {"address", kN_Format, 1u << kFam_String, kF_Address},
      {"uuid", kN_Format, 1u << kFam_String, kF_Uuid},
      {"tuuid", kN_Format, 1u << kFam_String, kF_Tuuid},
      {"ulid", kN_Format, 1u << kFam_String, kF_Ulid},
      {"ip_with_prefixlen", kN_Format, 1u << kFam_String, kF_IpWithPrefixlen},
      {"ipv4_with_prefixlen", kN_Format, 1u << kFam_String, kF_Ipv4WithPrefixlen},
      {"ipv6_with_prefixlen", kN_Format, 1u << kFam_String, kF_Ipv6WithPrefixlen},
      {"ip_prefix", kN_Format, 1u << kFam_String, kF_IpPrefix},
      {"ipv4_prefix", kN_Format, 1u << kFam_String, kF_Ipv4Prefix},
      {"ipv6_prefix", kN_Format, 1u << kFam_String, kF_Ipv6Prefix},
      {"host_and_port", kN_Format, 1u << kFam_String, kF_HostAndPort},
      {"protobuf_fqn", kN_Format, 1u << kFam_String, kF_ProtobufFqn},
      {"protobuf_dot_fqn", kN_Format, 1u << kFam_String, kF_ProtobufDotFqn},
  };
  if (family == kFam_None) return 0;
  if (strcmp(name, "example") == 0) return -1;
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
    if (strcmp(table[i].name, name) != 0) continue;
    *fmt = table[i].fmt;
    return (table[i].families >> family) & 1u ? table[i].kind : 0;
  }
  return 0;
}

/* The pattern of a string.pattern rule compiled, kept by the validator;
 * NULL when RE2 refuses it or memory runs out (then the rule's CEL runs,
 * and reports it). */
/* The string.pattern 'p' of field 'f' compiled once, or NULL with
 * v->status and v->err set: a pattern RE2 refuses is a compile error
 * naming the field and the pattern, found when the plan is built. */
static const pc_CelRegex *compile_pattern(pc_Validator *v, pc_StringView p, const pc_FieldDef *f) {
  char why[256];
  pc_CelRegex **list = grow(v, v->regexes, &v->capregexes, v->nregexes + 1, sizeof(pc_CelRegex *));
  if (list == NULL) {
    v->status = kPc_Validate_NoMemory;
    return NULL;
  }
  v->regexes = list;
  pc_CelRegex *re = pc_CelRegex_New(p.data ? p.data : "", p.size, why, sizeof why);
  if (re != NULL) {
    list[v->nregexes++] = re;
  } else if (why[0] == '\0') {
    v->status = kPc_Validate_NoMemory;
  } else {
    v->status = kPc_Validate_Compile;
    pc_Error_Set(v->err, "invalid string.pattern \"%.*s\" on %s: %s",
                 (int)(p.size > 200 ? 200 : p.size), p.data ? p.data : "", f->full_name, why);
  }
  return re;
}

static int in_set(pc_Validator *v, Native *n, int fam);

/* Fills 'vp' from FieldRules 'fr' (may be NULL) for values of 'f' (its
 * elements when 'elem'), with 'want' the rule case that fits (-1: the
 * field's own, 18 repeated, 19 map). */
static int plan_value(pc_Validator *v, ValuePlan *vp, const pc_Message *fr,
                      const pc_MessageDef *frt, const pc_FieldDef *f, int want, int elem) {
  memset(vp, 0, sizeof(*vp));
  if (elem && (f->type == kPc_Type_Message || f->type == kPc_Type_Group)) vp->recurse = f->message;
  if (fr == NULL) return 1;
  if (!compile_rules(v, fr, frt, NULL, NULL, &vp->custom, &vp->ncustom)) return 0;
  vp->ignore = (int)pc_Message_Get(fr, field_named(frt, "ignore")).i32;
  const pc_FieldDef *set = pc_Message_WhichOneof(fr, pc_MessageDef_FindOneof(frt, "type", 4));
  if (set == NULL) return 1;
  if (set->number != want) {
    const char *wanted = NULL;
    for (uint32_t i = 0; i < frt->field_count; i++)
      if (frt->fields[i].number == want) wanted = frt->fields[i].name;
    v->status = kPc_Validate_Compile;
    if (wanted)
      pc_Error_Set(v->err, "expected rule \"%s\", got \"%s\" on %s", wanted, set->name,
                   f->full_name);
    else
      pc_Error_Set(v->err, "rule \"%s\" cannot be used on %s", set->name, f->full_name);
    return 0;
  }
  const pc_Message *rules = pc_Message_Get(fr, set).m;
  const pc_MessageDef *rt = set->message;
  vp->rules = rules;
  vp->rules_type = rt;
  vp->family = family_of(rt, f);
  size_t total = 0, nnative = 0, next = 0;
  for (uint32_t i = 0; i < rt->field_count; i++) {
    const pc_FieldDef *rf = &rt->fields[i];
    if (!pc_Message_Has(rules, rf)) continue;
    const Predef *p = predef(v, rf);
    if (p == NULL) return 0;
    total += p->n;
    nnative++;
  }
  /* the schema's predefined rules: extensions of the *Rules message */
  const pc_Extension *exts = pc_Message_Extensions(rules, &next);
  for (size_t i = 0; i < next; i++) {
    const Predef *p = predef(v, exts[i].field);
    if (p == NULL) return 0;
    total += p->n;
    nnative++;
  }
  if (total && (vp->native = pc_Arena_Calloc(v->arena, nnative * sizeof(Native))) == NULL) {
    v->status = kPc_Validate_NoMemory;
    return 0;
  }
  Native *range = NULL;
  for (uint32_t i = 0; total && i < rt->field_count; i++) {
    const pc_FieldDef *rf = &rt->fields[i];
    if (!pc_Message_Has(rules, rf)) continue;
    const Predef *p = map_get(&v->predefs, rf);
    int fmt = 0;
    int kind = native_kind(vp->family, rf->name, &fmt);
    if (kind < 0) continue; /* an example: always passes */
    const pc_CelRegex *re = NULL;
    if (kind == kN_Pattern && (re = compile_pattern(v, pc_Message_Get(rules, rf).s, f)) == NULL)
      return 0;
    if (kind == kN_Range) {
      int lower = rf->name[0] == 'g';
      if (range == NULL) {
        range = &vp->native[vp->nnative++];
        range->kind = kN_Range;
      }
      if (lower) {
        range->rf = rf;
        range->p = p;
        range->r = pc_Message_Get(rules, rf);
        range->strict_lo = strcmp(rf->name, "gt") == 0;
      } else {
        range->rf2 = rf;
        range->p2 = p;
        range->r2 = pc_Message_Get(rules, rf);
        range->strict_hi = strcmp(rf->name, "lt") == 0;
      }
    } else if (kind != 0) {
      Native *n = &vp->native[vp->nnative++];
      n->kind = kind;
      n->fmt = fmt;
      n->re = re;
      n->rf = rf;
      n->p = p;
      n->r = pc_Message_Get(rules, rf);
      if ((kind == kN_In || kind == kN_NotIn) && !in_set(v, n, vp->family)) return 0;
    } else if (p->n) { /* CEL only, in its place among the others */
      Native *n = &vp->native[vp->nnative++];
      n->rf = rf;
      n->p = p;
    }
  }
  for (size_t i = 0; i < next; i++) { /* after the standard rules, as protovalidate-es */
    const Predef *p = map_get(&v->predefs, exts[i].field);
    if (p->n == 0) continue;
    Native *n = &vp->native[vp->nnative++];
    n->rf = exts[i].field;
    n->p = p;
    n->ext = 1;
  }
  if (strcmp(rt->full_name, "buf.validate.EnumRules") == 0 &&
      pc_Message_Get(rules, field_named(rt, "defined_only")).b)
    vp->defined_only = f->enumdef;
  if (strcmp(rt->full_name, "buf.validate.AnyRules") == 0) {
    vp->any_in = array_of(rules, field_named(rt, "in"));
    vp->any_not_in = array_of(rules, field_named(rt, "not_in"));
  }
  return 1;
}

static const pc_Message *sub_rules(const pc_Message *rules, const pc_MessageDef *rt,
                                   const char *name, const pc_MessageDef **type) {
  const pc_FieldDef *f = rules ? field_named(rt, name) : NULL;
  *type = f ? f->message : NULL;
  return f && pc_Message_Has(rules, f) ? pc_Message_Get(rules, f).m : NULL;
}

static int in_oneof_rule(const Plan *p, const pc_FieldDef *f) {
  for (size_t i = 0; i < p->noneofs; i++)
    for (size_t k = 0; k < p->oneofs[i].n; k++)
      if (p->oneofs[i].fields[k] == f) return 1;
  return 0;
}

static int plan_field(pc_Validator *v, const Plan *p, FieldPlan *fp, const pc_FieldDef *f,
                      const pc_MessageDef *frt) {
  const pc_FieldDesc *d = field_desc(f);
  const pc_Message *fr = d ? option_message(v, &d->options, kExtRules, frt) : NULL;
  if (v->status != kPc_Validate_Valid) return 0;
  fp->f = f;
  fp->namelen = strlen(f->name);
  int ignore = fr ? (int)pc_Message_Get(fr, field_named(frt, "ignore")).i32 : 0;
  if ((fr == NULL || !pc_Message_Has(fr, field_named(frt, "ignore"))) && in_oneof_rule(p, f))
    ignore = kIgnore_IfZero;
  fp->required =
      fr && pc_Message_Get(fr, field_named(frt, "required")).b && ignore != kIgnore_Always;
  int message = f->type == kPc_Type_Message || f->type == kPc_Type_Group;
  if (ignore == kIgnore_Always)
    fp->cond = kCond_Never;
  else if (f->label != kPc_Label_Repeated && (message || f->has_presence))
    fp->cond = kCond_IfSet;
  else /* lists, maps, scalars without presence */
    fp->cond = ignore == kIgnore_IfZero ? kCond_IfSet : kCond_Always;
  if (f->is_map) {
    if (!plan_value(v, &fp->self, fr, frt, f, 19, 0)) return 0;
    const pc_MessageDef *t;
    const pc_Message *kr = sub_rules(fp->self.rules, fp->self.rules_type, "keys", &t);
    const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
    if (!plan_value(v, &fp->keys, kr, frt, kf, rule_case(kf), 1)) return 0;
    const pc_Message *vr = sub_rules(fp->self.rules, fp->self.rules_type, "values", &t);
    return plan_value(v, &fp->items, vr, frt, vf, rule_case(vf), 1);
  }
  if (f->label == kPc_Label_Repeated) {
    if (!plan_value(v, &fp->self, fr, frt, f, 18, 0)) return 0;
    const pc_MessageDef *t;
    const pc_Message *ir = sub_rules(fp->self.rules, fp->self.rules_type, "items", &t);
    return plan_value(v, &fp->items, ir, frt, f, rule_case(f), 1);
  }
  return plan_value(v, &fp->self, fr, frt, f, rule_case(f), 1);
}

static Plan *plan_of(pc_Validator *v, const pc_MessageDef *m) {
  Plan *p = map_get(&v->plans, m);
  if (p != NULL) return p;
  if ((p = pc_Arena_Calloc(v->arena, sizeof(*p))) == NULL) {
    v->status = kPc_Validate_NoMemory;
    return NULL;
  }
  const pc_Pool *pool = m->file->pool;
  const pc_MessageDef *frt = pc_Pool_FindMessage(pool, "buf.validate.FieldRules");
  const pc_MessageDef *mrt = pc_Pool_FindMessage(pool, "buf.validate.MessageRules");
  const pc_MessageDef *ort = pc_Pool_FindMessage(pool, "buf.validate.OneofRules");
  const pc_MessageDesc *md = message_desc(m);
  const pc_Message *mr = md ? option_message(v, &md->options, kExtRules, mrt) : NULL;
  if (v->status != kPc_Validate_Valid) return NULL;
  if (mr != NULL) {
    /* `this` is the message, its fields found while compiling (but for the
     * well-known types, which CEL sees as other values) */
    const pc_MessageDef *self = strncmp(m->full_name, "google.protobuf.", 16) == 0 ? NULL : m;
    if (!compile_rules(v, mr, mrt, self, NULL, &p->cel, &p->ncel)) return NULL;
    const pc_FieldDef *of = field_named(mrt, "oneof");
    const pc_Array *oneofs = array_of(mr, of);
    if (oneofs) {
      const pc_FieldDef *ffields = field_named(of->message, "fields");
      const pc_FieldDef *freq = field_named(of->message, "required");
      if ((p->oneofs = pc_Arena_Calloc(v->arena, oneofs->size * sizeof(*p->oneofs))) == NULL) {
        v->status = kPc_Validate_NoMemory;
        return NULL;
      }
      for (size_t i = 0; i < oneofs->size; i++) {
        const pc_Message *r = pc_Array_Get(oneofs, i, kPc_Slot_Message).m;
        const pc_Array *names = array_of(r, ffields);
        OneofRule *o = &p->oneofs[p->noneofs++];
        o->required = pc_Message_Get(r, freq).b;
        v->status = kPc_Validate_Compile;
        if (names == NULL) {
          pc_Error_Set(v->err,
                       "at least one field must be specified in oneof rule for the message %s",
                       m->full_name);
          return NULL;
        }
        if ((o->fields = pc_Arena_Calloc(v->arena, names->size * sizeof(const pc_FieldDef *))) ==
            NULL) {
          v->status = kPc_Validate_NoMemory;
          return NULL;
        }
        for (size_t k = 0; k < names->size; k++) {
          pc_StringView s = pc_Array_Get(names, k, kPc_Slot_String).s;
          const pc_FieldDef *f = pc_MessageDef_FindFieldByName(m, s.data ? s.data : "", s.size);
          if (f == NULL) {
            pc_Error_Set(v->err, "field \"%.*s\" not found in message %s", (int)s.size,
                         s.data ? s.data : "", m->full_name);
            return NULL;
          }
          for (size_t j = 0; j < o->n; j++) {
            if (o->fields[j] == f) {
              pc_Error_Set(v->err, "duplicate %s in oneof rule for the message %s", f->name,
                           m->full_name);
              return NULL;
            }
          }
          o->fields[o->n++] = f;
        }
        v->status = kPc_Validate_Valid;
      }
    }
  }
  if (m->field_count &&
      (p->fields = pc_Arena_Calloc(v->arena, m->field_count * sizeof(*p->fields))) == NULL) {
    v->status = kPc_Validate_NoMemory;
    return NULL;
  }
  for (uint32_t i = 0; i < m->field_count; i++)
    if (!plan_field(v, p, &p->fields[p->nfields++], &m->fields[i], frt)) return NULL;
  if (m->oneof_count && ort != NULL) {
    if ((p->required = pc_Arena_Calloc(v->arena, m->oneof_count * sizeof(const pc_OneofDef *))) ==
        NULL) {
      v->status = kPc_Validate_NoMemory;
      return NULL;
    }
    for (uint32_t i = 0; i < m->oneof_count; i++) {
      const pc_OneofDef *o = &m->oneofs[i];
      if (o->synthetic || md == NULL || o->index >= md->oneof_count) continue;
      const pc_Message *r = option_message(v, &md->oneofs[o->index].options, kExtRules, ort);
      if (v->status != kPc_Validate_Valid) return NULL;
      if (r && pc_Message_Get(r, field_named(ort, "required")).b) p->required[p->nrequired++] = o;
    }
  }
  if (!map_put(v, &v->plans, m, p)) {
    v->status = kPc_Validate_NoMemory;
    return NULL;
  }
  return p;
}

/* -- Evaluating ------------------------------------------------------------- */

static int path_add(pc_Validator *v, const char *s, size_t n) {
  char *p = v->path;
  if (v->plen + n + 1 > v->pcap && (p = grow(v, p, &v->pcap, v->plen + n + 1, 1)) == NULL) {
    v->status = kPc_Validate_NoMemory;
    return 0;
  }
  v->path = p;
  memcpy(p + v->plen, s, n);
  v->plen += n;
  p[v->plen] = '\0';
  return 1;
}

/* "[i]" (snprintf costs more than the rest of a path) */
static int text_index(pc_Validator *v, uint64_t i) {
  char buf[32];
  size_t k = sizeof buf;
  buf[--k] = ']';
  do {
    buf[--k] = (char)('0' + i % 10);
    i /= 10;
  } while (i);
  buf[--k] = '[';
  return path_add(v, buf + k, sizeof buf - k);
}

static int text_key(pc_Validator *v, const pc_FieldDef *kf, pc_Value k) {
  char buf[32];
  int n;
  switch (kf->type) {
  case kPc_Type_String: {
    if (!path_add(v, "[\"", 2)) return 0;
    for (size_t i = 0; i < k.s.size; i++) {
      char c = k.s.data[i];
      const char *esc = c == '\\'   ? "\\\\"
                        : c == '"'  ? "\\\""
                        : c == '\r' ? "\\r"
                        : c == '\n' ? "\\n"
                                    : NULL;
      if (!(esc ? path_add(v, esc, 2) : path_add(v, &c, 1))) return 0;
    }
    return path_add(v, "\"]", 2);
  }
  case kPc_Type_Bool: n = snprintf(buf, sizeof(buf), "[%s]", k.b ? "true" : "false"); break;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: n = snprintf(buf, sizeof(buf), "[%" PRIu32 "]", k.u32); break;
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: n = snprintf(buf, sizeof(buf), "[%" PRIu64 "]", k.u64); break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: n = snprintf(buf, sizeof(buf), "[%" PRId64 "]", k.i64); break;
  default: n = snprintf(buf, sizeof(buf), "[%" PRId32 "]", k.i32); break;
  }
  return path_add(v, buf, (size_t)n);
}

/* Writes the path out into v->path ("items[2].name", "" at the top); 0
 * when memory ran out. */
static int path_text(pc_Validator *v) {
  v->plen = 0;
  if (!path_add(v, "", 0)) return 0;
  for (size_t i = 0; i < v->nsegs; i++) {
    const PathSeg *g = &v->segs[i];
    int ok = g->name ? (v->plen == 0 || path_add(v, ".", 1)) && path_add(v, g->name, g->len)
             : g->kf ? text_key(v, g->kf, g->key)
                     : text_index(v, g->key.u64);
    if (!ok) return 0;
  }
  return 1;
}

static int path_push(pc_Validator *v, const char *name, size_t len, const pc_FieldDef *kf,
                     pc_Value key) {
  if (v->nsegs == v->capsegs) {
    PathSeg *segs = grow(v, v->segs, &v->capsegs, v->nsegs + 1, sizeof(*segs));
    if (segs == NULL) {
      v->status = kPc_Validate_NoMemory;
      return 0;
    }
    v->segs = segs;
  }
  PathSeg *g = &v->segs[v->nsegs++];
  g->name = name;
  g->len = len;
  g->kf = kf;
  g->key = key;
  return 1;
}

static int path_name(pc_Validator *v, const char *name, size_t len) {
  pc_Value none = {0};
  return path_push(v, name, len, NULL, none);
}

static int path_index(pc_Validator *v, size_t i) {
  pc_Value k = {0};
  k.u64 = i;
  return path_push(v, NULL, 0, NULL, k);
}

static int path_key(pc_Validator *v, const pc_FieldDef *kf, pc_Value k) {
  return path_push(v, NULL, 0, kf, k);
}

/* Records a violation at the current path; 0 to stop (fail fast, or out
 * of memory). */
static int violate(pc_Validator *v, const char *rule, const char *message, size_t mlen,
                   int for_key) {
  if (v->max_vio && v->nvio >= v->max_vio) { /* one past the cap: stop here */
    v->truncated = 1;
    return 0;
  }
  if (!path_text(v)) return 0;
  pc_Violation *vio = grow(v, v->vio, &v->capvio, v->nvio + 1, sizeof(*vio));
  char *field = pc_Arena_StrDup(v->scratch, v->path, v->plen);
  char *msg = pc_Arena_StrDup(v->scratch, message, mlen);
  if (vio == NULL || field == NULL || msg == NULL) {
    if (vio) v->vio = vio;
    v->status = kPc_Validate_NoMemory;
    return 0;
  }
  v->vio = vio;
  vio[v->nvio].field = field;
  vio[v->nvio].rule = rule;
  vio[v->nvio].message = msg;
  vio[v->nvio].for_key = for_key;
  v->nvio++;
  return !v->fail_fast;
}

/* The evaluation budget of a rule on 'self': the default, plus steps to
 * read a string or bytes value four times (a step reads 16 bytes), so a
 * rule scanning its value (size(), contains, matches, indexOf) has a
 * verdict whatever the value's size: the default's 1,000,000 steps alone
 * ran out on a value over 16 MB, failing the rule with "evaluation limit
 * reached" (a request refused INTERNAL) where protovalidate's runtimes,
 * with no budget, give a verdict. The budget still bounds what a rule makes
 * or repeats. */
static void rule_budget(pc_Validator *v, const pc_CelValue *self) {
  pc_CelLimits l = PC_CEL_DEFAULT_LIMITS;
  if (self->kind == kPc_Cel_String || self->kind == kPc_Cel_Bytes) l.steps += self->v.s.size / 4;
  pc_CelEval_SetLimits(v->ev, &l);
}

/* Evaluates one CEL rule with 'vars' bound; 0 to stop. */
static int run_rule(pc_Validator *v, const CelRule *r, const pc_CelValue *vars, int for_key) {
  pc_CelValue res;
  pc_Error e;
  pc_Error_Init(&e);
  v->cel_runs++;
  rule_budget(v, &vars[0]);
  pc_CelStatus st = pc_CelProgram_Eval(r->prog, v->ev, vars, &res, &e);
  if (st != kPc_CelStatus_Ok) {
    v->limited = st == kPc_CelStatus_Limit;
    if (!path_text(v)) return 0;
    v->status = st == kPc_CelStatus_NoMemory ? kPc_Validate_NoMemory : kPc_Validate_Runtime;
    pc_Error_Set(v->err, "%s%s%s: %s", v->path, v->plen ? ": " : "", r->id, e.msg);
    return 0;
  }
  if (res.kind == kPc_Cel_Bool) {
    if (res.v.b) return 1;
    if (r->message[0]) return violate(v, r->id, r->message, strlen(r->message), for_key);
    char buf[PC_ERROR_MAX];
    int n = snprintf(buf, sizeof(buf), "\"%s\" returned false", r->expr);
    return violate(v, r->id, buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf) - 1, for_key);
  }
  if (res.kind == kPc_Cel_String) {
    if (res.v.s.size == 0) return 1;
    if (r->message[0]) return violate(v, r->id, r->message, strlen(r->message), for_key);
    return violate(v, r->id, res.v.s.data, res.v.s.size, for_key);
  }
  v->status = kPc_Validate_Runtime;
  pc_Error_Set(v->err, "expression %s outputs %s, wanted either bool or string", r->id,
               pc_CelValue_TypeName(&res));
  return 0;
}

static int validate_message(pc_Validator *v, const pc_Message *msg, const pc_MessageDef *m);

/* Where a value comes from: field 'f' of 'msg', or an element 'elem' of
 * field 'f' (an item, a map key or value). */
typedef struct {
  const pc_Message *msg;
  const pc_FieldDef *f;
  pc_Value elem;
  int is_elem;
} Source;

/* An integer of field type 't' held in 'x', widened. */
static int64_t as_signed(pc_FieldType t, pc_Value x) {
  return t == kPc_Type_Int32 || t == kPc_Type_Sint32 || t == kPc_Type_Sfixed32 || t == kPc_Type_Enum
             ? x.i32
             : x.i64;
}

static uint64_t as_unsigned(pc_FieldType t, pc_Value x) {
  return t == kPc_Type_Uint32 || t == kPc_Type_Fixed32 ? x.u32 : x.u64;
}

static double as_double(pc_FieldType t, pc_Value x) {
  return t == kPc_Type_Float ? (double)x.f : x.d;
}

static int view_eq(pc_StringView a, pc_StringView b) {
  return a.size == b.size && (a.size == 0 || memcmp(a.data, b.data, a.size) == 0);
}

/* The hash of value 'x' of field type 't' in an `in` / `not_in` set:
 * integers widened as compared. */
static uint64_t in_hash(int fam, pc_FieldType t, pc_Value x) {
  if (fam == kFam_String) return pc_Hash_Mix64(pc_Hash_More(PC_HASH_START, x.s.data, x.s.size));
  return pc_Hash_Mix64(fam == kFam_Signed ? (uint64_t)as_signed(t, x) : as_unsigned(t, x));
}

static int in_same(int fam, pc_FieldType tx, pc_Value x, pc_FieldType ty, pc_Value y) {
  if (fam == kFam_String) return view_eq(x.s, y.s);
  if (fam == kFam_Signed) return as_signed(tx, x) == as_signed(ty, y);
  return as_unsigned(tx, x) == as_unsigned(ty, y);
}

/* Builds n->set for an `in` / `not_in` list of more than 8 items (shorter
 * ones are scanned); 0 when memory runs out. */
static int in_set(pc_Validator *v, Native *n, int fam) {
  const pc_Array *list = n->r.a;
  if (list == NULL || list->size <= 8 || list->size > UINT32_MAX / 2) return 1;
  size_t cap = 16;
  while (cap < 2 * list->size) cap *= 2;
  uint32_t *set = pc_Arena_Calloc(v->arena, cap * sizeof *set);
  if (set == NULL) {
    v->status = kPc_Validate_NoMemory;
    return 0;
  }
  pc_SlotKind slot = pc_FieldDef_ElemSlot(n->rf);
  for (size_t i = 0; i < list->size; i++) {
    pc_Value x = pc_Array_Get(list, i, slot);
    size_t at = (size_t)in_hash(fam, n->rf->type, x) & (cap - 1);
    while (set[at] != 0) at = (at + 1) & (cap - 1); /* duplicates kept: harmless */
    set[at] = (uint32_t)(i + 1);
  }
  n->set = set;
  n->set_cap = cap;
  return 1;
}

/* Whether value 'x' of field type 't' is in the set of 'n'. */
static int in_set_has(const Native *n, int fam, pc_FieldType t, pc_Value x) {
  pc_SlotKind slot = pc_FieldDef_ElemSlot(n->rf);
  for (size_t at = (size_t)in_hash(fam, t, x) & (n->set_cap - 1); n->set[at] != 0;
       at = (at + 1) & (n->set_cap - 1))
    if (in_same(fam, t, x, n->rf->type, pc_Array_Get(n->r.a, n->set[at] - 1, slot))) return 1;
  return 0;
}

static int view_find(pc_StringView hay, pc_StringView needle) {
  return pc_Cel_Find(hay.data, hay.size, needle.data, needle.size) != SIZE_MAX; /* linear */
}

/* ASCII classes (not <ctype.h>'s, which follow the locale). */
static int is_digit(int c) {
  return c >= '0' && c <= '9';
}

static int is_word_start(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int hex_run(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int c = s[i] | 0x20; /* lower case for letters */
    if (!is_digit(s[i]) && !(c >= 'a' && c <= 'f')) return 0;
  }
  return 1;
}

/* ^[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)*$ */
static int protobuf_name(const char *s, size_t n) {
  size_t i = 0;
  for (;;) {
    if (i == n || !is_word_start(s[i])) return 0;
    while (i < n && (is_word_start(s[i]) || is_digit(s[i]))) i++;
    if (i == n) return 1;
    if (s[i++] != '.') return 0;
  }
}

/* Whether the 'n' bytes at 's' are of format 'fmt' (a kF_*). */
static int format_ok(int fmt, const char *s, size_t n) {
  switch (fmt) {
  case kF_Email: return pc_Cel_IsEmail(s, n);
  case kF_Hostname: return pc_Cel_IsHostname(s, n);
  case kF_Ip: return pc_Cel_IsIp(s, n, 0);
  case kF_Ipv4: return pc_Cel_IsIp(s, n, 4);
  case kF_Ipv6: return pc_Cel_IsIp(s, n, 6);
  case kF_Uri: return pc_Cel_IsUri(s, n, 0);
  case kF_UriRef: return pc_Cel_IsUri(s, n, 1);
  case kF_Address: return pc_Cel_IsHostname(s, n) || pc_Cel_IsIp(s, n, 0);
  case kF_Uuid: /* ^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$ */
    return n == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' &&
           hex_run(s, 8) && hex_run(s + 9, 4) && hex_run(s + 14, 4) && hex_run(s + 19, 4) &&
           hex_run(s + 24, 12);
  case kF_Tuuid: return n == 32 && hex_run(s, 32); /* ^[0-9a-fA-F]{32}$ */
  case kF_Ulid: {                                  /* ^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$ */
    if (n != 26 || s[0] < '0' || s[0] > '7') return 0;
    for (size_t i = 1; i < n; i++) {
      int c = s[i] & ~0x20; /* upper case for letters */
      if (!is_digit(s[i]) &&
          !(c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U'))
        return 0;
    }
    return 1;
  }
  case kF_IpWithPrefixlen: return pc_Cel_IsIpPrefix(s, n, 0, 0);
  case kF_Ipv4WithPrefixlen: return pc_Cel_IsIpPrefix(s, n, 4, 0);
  case kF_Ipv6WithPrefixlen: return pc_Cel_IsIpPrefix(s, n, 6, 0);
  case kF_IpPrefix: return pc_Cel_IsIpPrefix(s, n, 0, 1);
  case kF_Ipv4Prefix: return pc_Cel_IsIpPrefix(s, n, 4, 1);
  case kF_Ipv6Prefix: return pc_Cel_IsIpPrefix(s, n, 6, 1);
  case kF_HostAndPort: return pc_Cel_IsHostAndPort(s, n, 1);
  case kF_ProtobufFqn: return protobuf_name(s, n);
  case kF_ProtobufDotFqn: return n > 0 && s[0] == '.' && protobuf_name(s + 1, n - 1);
  default: return 0;
  }
}

/* Whether items 'x' and 'y' of a list of field type 't' (slot 'slot') are
 * the same value as CEL's unique() sees them (NaN distinct, -0 == 0). */
static int same_item(pc_FieldType t, pc_SlotKind slot, pc_Value x, pc_Value y) {
  switch (t) {
  case kPc_Type_String:
  case kPc_Type_Bytes: return view_eq(x.s, y.s);
  case kPc_Type_Bool: return x.b == y.b;
  case kPc_Type_Float: return x.f == y.f;
  case kPc_Type_Double: return x.d == y.d;
  default: return pc_Slot_Size(slot) == 4 ? x.u32 == y.u32 : x.u64 == y.u64;
  }
}

/* A hash of item 'x' agreeing with same_item, from 'seed' (all 64 bits
 * mixed: the murmur3 fmix64 finalizer); 0 with '*skip' set for a NaN,
 * equal to none. The seed differs from one validation to the next: fmix64
 * is a bijection, so without one a request could pick 100,000 integers of
 * one slot and make the table's probes quadratic (24 s for 800 KB). */
static uint64_t item_hash(pc_FieldType t, pc_SlotKind slot, pc_Value x, uint64_t seed, int *skip) {
  uint64_t h = 0;
  *skip = 0;
  switch (t) {
  case kPc_Type_String:
  case kPc_Type_Bytes: return pc_Hash_Mix64(pc_Hash_More(seed, x.s.data, x.s.size));
  case kPc_Type_Bool: h = x.b; break;
  case kPc_Type_Float:
  case kPc_Type_Double: {
    double d = t == kPc_Type_Float ? (double)x.f : x.d;
    if (isnan(d)) {
      *skip = 1;
      return 0;
    }
    if (d == 0) d = 0; /* -0 */
    memcpy(&h, &d, sizeof h);
    break;
  }
  default: h = pc_Slot_Size(slot) == 4 ? x.u32 : x.u64; break;
  }
  return pc_Hash_Mix64(h ^ seed);
}

/* Whether the items of list 'a' of field 'f' are distinct as CEL's
 * unique() sees them: 0 also for lists it leaves to CEL (messages: an
 * error there; memory for the table running out). Short lists are
 * compared pairwise, longer ones through a hash table of any length. */
static int items_unique(pc_Validator *v, const pc_Array *a, const pc_FieldDef *f) {
  if (f->type == kPc_Type_Message || f->type == kPc_Type_Group) return 0;
  if (a == NULL || a->size < 2) return 1;
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  if (a->size <= 32) {
    for (size_t i = 1; i < a->size; i++) {
      pc_Value x = pc_Array_Get(a, i, slot);
      for (size_t k = 0; k < i; k++)
        if (same_item(f->type, slot, x, pc_Array_Get(a, k, slot))) return 0;
    }
    return 1;
  }
  size_t cap = 64;
  while (cap < 2 * a->size) cap *= 2;
  size_t *table = v->alloc(v->ud, NULL, 0, cap * sizeof *table); /* item index + 1; 0: free */
  if (table == NULL) return 0;
  memset(table, 0, cap * sizeof *table);
  /* the seed: where the table is and the clock's nanoseconds, which a
     sender cannot know */
  uint64_t seed = pc_Hash_Mix64((uint64_t)(uintptr_t)table ^ (uint64_t)v->now.v.t.nanos ^
                                (uint64_t)v->now.v.t.seconds << 30 ^ v->nvio);
  int unique = 1;
  for (size_t i = 0; i < a->size && unique; i++) {
    pc_Value x = pc_Array_Get(a, i, slot);
    int skip;
    size_t at = (size_t)item_hash(f->type, slot, x, seed, &skip) & (cap - 1);
    if (skip) continue;
    for (; table[at] != 0; at = (at + 1) & (cap - 1)) {
      if (same_item(f->type, slot, x, pc_Array_Get(a, table[at] - 1, slot))) {
        unique = 0;
        break;
      }
    }
    table[at] = i + 1;
  }
  v->alloc(v->ud, table, cap * sizeof *table, 0);
  return unique;
}

/* Whether value 'x' of field 'vf' (its family 'fam') passes native check
 * 'n' of the rules message 'rules'. */
static int native_passes(pc_Validator *v, const Native *n, int fam, const pc_FieldDef *vf,
                         pc_Value x) {
  const pc_FieldDef *rf = n->rf;
  if (n->kind == kN_Range) {
    const pc_FieldDef *lo = n->rf, *hi = n->rf2;
    int above = 0, below = 0, normal = 1;
    if (fam == kFam_Double) { /* a NaN anywhere: CEL decides */
      double t = vf->type == kPc_Type_Float ? (double)x.f : x.d;
      double l = lo ? as_double(lo->type, n->r) : 0;
      double h = hi ? as_double(hi->type, n->r2) : 0;
      if (isnan(t) || isnan(l) || isnan(h)) return 0;
      if (hi) above = n->strict_hi ? t >= h : t > h;
      if (lo) below = n->strict_lo ? t <= l : t < l;
      if (lo && hi) normal = h >= l;
    } else if (fam == kFam_Signed) {
      int64_t t = as_signed(vf->type, x);
      int64_t l = lo ? as_signed(lo->type, n->r) : 0;
      int64_t h = hi ? as_signed(hi->type, n->r2) : 0;
      if (hi) above = n->strict_hi ? t >= h : t > h;
      if (lo) below = n->strict_lo ? t <= l : t < l;
      if (lo && hi) normal = h >= l;
    } else {
      uint64_t t = as_unsigned(vf->type, x);
      uint64_t l = lo ? as_unsigned(lo->type, n->r) : 0;
      uint64_t h = hi ? as_unsigned(hi->type, n->r2) : 0;
      if (hi) above = n->strict_hi ? t >= h : t > h;
      if (lo) below = n->strict_lo ? t <= l : t < l;
      if (lo && hi) normal = h >= l;
    }
    return normal ? !(above || below) : !(above && below);
  }
  if (n->kind == kN_Unique) return !n->r.b || items_unique(v, x.a, vf);
  if (n->kind == kN_MinSize || n->kind == kN_MaxSize) {
    uint64_t size = vf->is_map ? (x.map ? x.map->size : 0) : (x.a ? x.a->size : 0);
    uint64_t r = n->r.u64;
    return n->kind == kN_MinSize ? size >= r : size <= r;
  }
  if (fam == kFam_Signed || fam == kFam_Unsigned) {
    if (n->kind == kN_Const) {
      pc_Value r = n->r;
      return fam == kFam_Signed ? as_signed(vf->type, x) == as_signed(rf->type, r)
                                : as_unsigned(vf->type, x) == as_unsigned(rf->type, r);
    }
    const pc_Array *list = n->r.a;
    int found = n->set != NULL && in_set_has(n, fam, vf->type, x);
    pc_SlotKind slot = pc_FieldDef_ElemSlot(rf);
    for (size_t i = 0; n->set == NULL && list && i < list->size && !found; i++) {
      pc_Value r = pc_Array_Get(list, i, slot);
      found = fam == kFam_Signed ? as_signed(vf->type, x) == as_signed(rf->type, r)
                                 : as_unsigned(vf->type, x) == as_unsigned(rf->type, r);
    }
    return n->kind == kN_In ? found : !found;
  }
  /* strings and bytes */
  pc_StringView t = x.s;
  pc_Value r = n->r;
  uint64_t len = t.size;
  if (fam == kFam_String && (n->kind == kN_Len || n->kind == kN_MinLen || n->kind == kN_MaxLen)) {
    /* code points: at most the bytes, at least a quarter of them; counted
     * only when those bounds do not decide */
    if (n->kind == kN_MaxLen && t.size <= r.u64) return 1;
    if (n->kind == kN_MinLen && (t.size + 3) / 4 >= r.u64) return 1;
    len = pc_Cel_StringSize(t.data, t.size); /* as size() counts them, UTF-8 or not */
  }
  switch (n->kind) {
  case kN_Len:
  case kN_LenBytes: return len == r.u64;
  case kN_MinLen:
  case kN_MinBytes: return len >= r.u64;
  case kN_MaxLen:
  case kN_MaxBytes: return len <= r.u64;
  case kN_Const: return view_eq(t, r.s);
  case kN_Format:
    return !r.b || ((t.size || n->fmt == kF_UriRef) && format_ok(n->fmt, t.data, t.size));
  case kN_Pattern: return pc_CelRegex_Match(n->re, t.data ? t.data : "", t.size) == 1;
  case kN_Prefix:
    return t.size >= r.s.size && (r.s.size == 0 || memcmp(t.data, r.s.data, r.s.size) == 0);
  case kN_Suffix:
    return t.size >= r.s.size &&
           (r.s.size == 0 || memcmp(t.data + t.size - r.s.size, r.s.data, r.s.size) == 0);
  case kN_Contains: return view_find(t, r.s);
  case kN_NotContains: return !view_find(t, r.s);
  case kN_In:
  case kN_NotIn: {
    int found = n->set != NULL && in_set_has(n, fam, vf->type, x);
    for (size_t i = 0; n->set == NULL && r.a && i < r.a->size && !found; i++)
      found = view_eq(t, pc_Array_Get(r.a, i, kPc_Slot_String).s);
    return n->kind == kN_In ? found : !found;
  }
  default: return 0;
  }
}

/* Binds `this` (and with 'with_rules' `rules`) for the CEL rules of a
 * value, once; 0 on failure. */
static int bind(pc_Validator *v, const ValuePlan *vp, const Source *src, pc_CelValue *vars,
                int *bound, int with_rules) {
  pc_Error e;
  pc_Error_Init(&e);
  if (!(*bound & 1)) {
    memset(vars, 0, 4 * sizeof(*vars));
    pc_CelStatus st = src->is_elem ? pc_CelEval_ElemValue(v->ev, src->f, src->elem, &vars[0], &e)
                                   : pc_CelEval_FieldValue(v->ev, src->msg, src->f, &vars[0], &e);
    if (st != kPc_CelStatus_Ok) {
      if (!path_text(v)) return 0;
      v->status = st == kPc_CelStatus_NoMemory ? kPc_Validate_NoMemory : kPc_Validate_Runtime;
      pc_Error_Set(v->err, "%s: %s", v->plen ? v->path : src->f->name, e.msg);
      return 0;
    }
    vars[3] = v->now;
    *bound |= 1;
  }
  if (with_rules && !(*bound & 2)) {
    if (pc_CelEval_MessageValue(v->ev, vp->rules, vp->rules_type, &vars[1], &e) !=
        kPc_CelStatus_Ok) {
      v->status = kPc_Validate_Runtime;
      pc_Error_Set(v->err, "%s", e.msg);
      return 0;
    }
    *bound |= 2;
  }
  return 1;
}

/* Binds `rule` to the value of extension 'rf' of the rules message. */
static int bind_rule(pc_Validator *v, const ValuePlan *vp, const pc_FieldDef *rf,
                     pc_CelValue *vars) {
  pc_Error e;
  pc_Error_Init(&e);
  if (pc_CelEval_FieldValue(v->ev, vp->rules, rf, &vars[2], &e) != kPc_CelStatus_Ok) {
    v->status = kPc_Validate_Runtime;
    pc_Error_Set(v->err, "%s", e.msg);
    return 0;
  }
  return 1;
}

static int run_predef(pc_Validator *v, const Predef *p, const pc_CelValue *vars, int for_key) {
  for (size_t i = 0; p && i < p->n; i++)
    if (!run_rule(v, &p->rules[i], vars, for_key)) return 0;
  return 1;
}

/* The violation of a check in C that failed where the rule's CEL, run to
 * word it, reached the evaluation budget (an `in` list of many thousand
 * items, a list of a million items for `unique`; a substring search is
 * linear, within rule_budget's): the error is dropped and the violation is worded
 * here, as validate.proto words it (a long substring cut at 64 bytes, an
 * `in` list named by its size)
 * (a request is refused INVALID_ARGUMENT, not failed INTERNAL). */
static int budget_violation(pc_Validator *v, const Native *n, pc_FieldType t, int for_key) {
  v->status = kPc_Validate_Valid;
  v->limited = 0;
  if (v->err != NULL) pc_Error_Init(v->err);
  const char *id = n->p->rules[0].id;
  char buf[256];
  int len;
  pc_StringView s = n->r.s;
  int shown = s.size > 64 ? 64 : (int)s.size; /* of a long substring, its start */
  const char *more = s.size > 64 ? "..." : "";
  if (n->p->rules[0].message[0]) /* the rule's own ("repeated value must contain unique items") */
    return violate(v, id, n->p->rules[0].message, strlen(n->p->rules[0].message), for_key);
  switch (n->kind) {
  case kN_In:
  case kN_NotIn:
    len = snprintf(buf, sizeof(buf), "value must %sbe in the list of %zu items",
                   n->kind == kN_In ? "" : "not ", n->r.a ? n->r.a->size : (size_t)0);
    break;
  case kN_Contains:
    if (t == kPc_Type_Bytes) {
      len = snprintf(buf, sizeof(buf), "does not contain ");
      for (int i = 0; i < shown && len < (int)sizeof(buf) - 8; i++)
        len += snprintf(buf + len, sizeof(buf) - (size_t)len, "%02x", (unsigned char)s.data[i]);
      len += snprintf(buf + len, sizeof(buf) - (size_t)len, "%s", more);
    } else {
      len = snprintf(buf, sizeof(buf), "does not contain substring `%.*s%s`", shown, s.data, more);
    }
    break;
  case kN_NotContains:
    len = snprintf(buf, sizeof(buf), "contains substring `%.*s%s`", shown, s.data, more);
    break;
  case kN_Unique:
    len = snprintf(buf, sizeof(buf), "repeated value must contain unique items");
    break;
  default: len = snprintf(buf, sizeof(buf), "value breaks %s", id); break;
  }
  if (len < 0) len = 0;
  if (len >= (int)sizeof(buf)) len = (int)sizeof(buf) - 1;
  return violate(v, id, buf, (size_t)len, for_key);
}

/* Whether a failed check in C of 'n' on values of field 'f' is the
 * verdict (the rule's CEL only words it): all but ranges (a NaN leaves the
 * decision to CEL) and `unique` of messages (CEL's error). */
static int native_decides(const Native *n, const pc_FieldDef *f) {
  if (n->kind == 0 || n->kind == kN_Range || n->p == NULL || n->p->n == 0) return 0;
  return n->kind != kN_Unique || (f->type != kPc_Type_Message && f->type != kPc_Type_Group);
}

/* The rules of a value but its message's own (validate_value). */
static PC_COLD int check_value(pc_Validator *v, const ValuePlan *vp, const Source *src,
                               int for_key) {
  pc_CelValue vars[4];
  int bound = 0;
  for (size_t i = 0; i < vp->ncustom; i++)
    if (!bind(v, vp, src, vars, &bound, 0) || !run_rule(v, &vp->custom[i], vars, for_key)) return 0;
  pc_Value val = src->is_elem ? src->elem : pc_Message_Get(src->msg, src->f);
  if (vp->nnative) {
    for (size_t i = 0; i < vp->nnative; i++) {
      const Native *n = &vp->native[i];
      if (n->kind != 0 && native_passes(v, n, vp->family, src->f, val)) continue;
      if (!bind(v, vp, src, vars, &bound, 1)) return 0;
      if (n->ext && !bind_rule(v, vp, n->rf, vars)) return 0;
      v->limited = 0;
      int ok = run_predef(v, n->p, vars, for_key) && run_predef(v, n->p2, vars, for_key);
      vars[2].kind = kPc_Cel_Unbound;
      if (!ok && v->limited && native_decides(n, src->f)) {
        /* the check failed in C; the rule's CEL only words the violation */
        if (!budget_violation(v, n, src->f->type, for_key)) return 0;
        ok = 1;
      }
      if (!ok) return 0;
    }
  }
  if (bound) pc_CelEval_Reset(v->ev);
  if (vp->defined_only && pc_EnumDef_FindByNumber(vp->defined_only, val.i32) == NULL) {
    const char *m = "value must be one of the defined enum values";
    if (!violate(v, "enum.defined_only", m, strlen(m), for_key)) return 0;
  }
  if ((vp->any_in || vp->any_not_in) && val.m != NULL) {
    const pc_FieldDef *tf = pc_MessageDef_FindFieldByNumber(src->f->message, 1);
    pc_StringView url = pc_Message_Get(val.m, tf).s;
    int found_in = 0, found_out = 0;
    for (size_t i = 0; vp->any_in && i < vp->any_in->size; i++) {
      pc_StringView s = pc_Array_Get(vp->any_in, i, kPc_Slot_String).s;
      if (s.size == url.size && (s.size == 0 || memcmp(s.data, url.data, s.size) == 0))
        found_in = 1;
    }
    for (size_t i = 0; vp->any_not_in && i < vp->any_not_in->size; i++) {
      pc_StringView s = pc_Array_Get(vp->any_not_in, i, kPc_Slot_String).s;
      if (s.size == url.size && (s.size == 0 || memcmp(s.data, url.data, s.size) == 0))
        found_out = 1;
    }
    const char *in = "type URL must be in the allow list",
               *out = "type URL must not be in the block list";
    if (vp->any_in && !found_in && !violate(v, "any.in", in, strlen(in), for_key)) return 0;
    if (vp->any_not_in && found_out && !violate(v, "any.not_in", out, strlen(out), for_key))
      return 0;
  }
  return 1;
}

static int validate_value(pc_Validator *v, const ValuePlan *vp, const Source *src, int for_key) {
  if (!check_value(v, vp, src, for_key)) return 0;
  if (vp->recurse == NULL) return 1;
  pc_Value val = src->is_elem ? src->elem : pc_Message_Get(src->msg, src->f);
  return val.m == NULL || validate_message(v, val.m, vp->recurse);
}

/* Items, keys and values: buf.validate.Ignore for one element. */
static int elem_applies(const ValuePlan *vp, const pc_FieldDef *f, pc_Value x) {
  if (vp->ignore == kIgnore_Always) return 0;
  if (vp->ignore != kIgnore_IfZero) return 1;
  switch (f->type) {
  case kPc_Type_Message:
  case kPc_Type_Group: return 1;
  case kPc_Type_Enum: return x.i32 != (f->enumdef->value_count ? f->enumdef->values[0].number : 0);
  case kPc_Type_String:
  case kPc_Type_Bytes: return x.s.size != 0;
  case kPc_Type_Bool: return x.b != 0;
  case kPc_Type_Float: return x.f != 0;
  case kPc_Type_Double: return x.d != 0;
  default: return pc_Slot_Size(pc_FieldDef_ElemSlot(f)) == 4 ? x.u32 != 0 : x.u64 != 0;
  }
}

static int has_rules(const ValuePlan *vp) {
  return vp->ncustom || vp->nnative || vp->defined_only || vp->any_in || vp->any_not_in ||
         vp->recurse;
}

static int validate_field(pc_Validator *v, const FieldPlan *fp, const pc_Message *msg) {
  const pc_FieldDef *f = fp->f;
  int legacy = v->legacy_required && f->label == kPc_Label_Required;
  if ((fp->required || legacy) && !pc_Message_Has(msg, f)) {
    const char *m = "value is required";
    return violate(v, fp->required ? "required" : "legacy_required", m, strlen(m), 0);
  }
  if (fp->cond == kCond_Never || (fp->cond == kCond_IfSet && !pc_Message_Has(msg, f))) return 1;
  Source src = {msg, f, {0}, 0};
  if (!validate_value(v, &fp->self, &src, 0)) return 0;
  size_t mark = v->nsegs;
  if (f->is_map) {
    const pc_Map *map = pc_Message_Get(msg, f).map;
    const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
    if (map == NULL || (!has_rules(&fp->keys) && !has_rules(&fp->items))) return 1;
    for (size_t i = 0; i < map->size; i++) {
      const pc_MapEntry *en = &map->entries[i];
      if (!path_key(v, kf, en->key)) return 0;
      Source ks = {msg, kf, en->key, 1}, vs = {msg, vf, en->value, 1};
      if (elem_applies(&fp->keys, kf, en->key) && !validate_value(v, &fp->keys, &ks, 1)) return 0;
      if (elem_applies(&fp->items, vf, en->value) && !validate_value(v, &fp->items, &vs, 0))
        return 0;
      v->nsegs = mark;
    }
  } else if (f->label == kPc_Label_Repeated) {
    const pc_Array *arr = pc_Message_Get(msg, f).a;
    if (arr == NULL || !has_rules(&fp->items)) return 1;
    pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
    for (size_t i = 0; i < arr->size; i++) {
      pc_Value x = pc_Array_Get(arr, i, slot);
      if (!path_index(v, i)) return 0;
      Source is = {msg, f, x, 1};
      if (elem_applies(&fp->items, f, x) && !validate_value(v, &fp->items, &is, 0)) return 0;
      v->nsegs = mark;
    }
  }
  return 1;
}

static int validate_message_body(pc_Validator *v, const pc_Message *msg, const pc_MessageDef *m);

/* Messages nest no deeper than the encoders allow: past that the
 * validation is refused (an error, not a violation) before the stack runs
 * out. */
static int validate_message(pc_Validator *v, const pc_Message *msg, const pc_MessageDef *m) {
  if (v->depth >= PC_MESSAGE_MAX_DEPTH) {
    v->status = kPc_Validate_Runtime;
    pc_Error_Set(v->err, "nesting too deep: more than %d messages", PC_MESSAGE_MAX_DEPTH);
    return 0;
  }
  v->depth++;
  int ok = validate_message_body(v, msg, m);
  v->depth--;
  return ok;
}

static int message_rules(pc_Validator *v, const Plan *p, const pc_Message *msg,
                         const pc_MessageDef *m);

static int validate_message_body(pc_Validator *v, const pc_Message *msg, const pc_MessageDef *m) {
  const Plan *p = plan_of(v, m);
  if (p == NULL) return 0;
  size_t mark = v->nsegs;
  for (size_t i = 0; i < p->nfields; i++) {
    if (!path_name(v, p->fields[i].f->name, p->fields[i].namelen)) return 0;
    if (!validate_field(v, &p->fields[i], msg)) return 0;
    v->nsegs = mark;
  }
  return p->ncel == 0 && p->noneofs == 0 && p->nrequired == 0 ? 1 : message_rules(v, p, msg, m);
}

/* The message's CEL rules, its oneof rules and its required oneofs
 * (validate_message_body). */
static PC_COLD int message_rules(pc_Validator *v, const Plan *p, const pc_Message *msg,
                                 const pc_MessageDef *m) {
  size_t mark = v->nsegs;
  if (p->ncel) {
    pc_CelValue vars[4];
    pc_Error e;
    pc_Error_Init(&e);
    memset(vars, 0, sizeof(vars));
    if (pc_CelEval_MessageValue(v->ev, msg, m, &vars[0], &e) != kPc_CelStatus_Ok) {
      v->status = kPc_Validate_Runtime;
      pc_Error_Set(v->err, "%s", e.msg);
      return 0;
    }
    vars[3] = v->now;
    for (size_t i = 0; i < p->ncel; i++)
      if (!run_rule(v, &p->cel[i], vars, 0)) return 0;
    pc_CelEval_Reset(v->ev);
  }
  for (size_t i = 0; i < p->noneofs; i++) {
    const OneofRule *o = &p->oneofs[i];
    size_t set = 0, len = 0;
    char names[PC_ERROR_MAX];
    names[0] = '\0';
    for (size_t k = 0; k < o->n; k++) {
      set += pc_Message_Has(msg, o->fields[k]) != 0;
      int n = snprintf(names + len, sizeof(names) - len, "%s%s", k ? ", " : "", o->fields[k]->name);
      if (n > 0) len = len + (size_t)n < sizeof(names) ? len + (size_t)n : sizeof(names) - 1;
    }
    char buf[PC_ERROR_MAX + 32];
    int n = 0;
    if (set > 1) n = snprintf(buf, sizeof(buf), "only one of %s can be set", names);
    if (set == 0 && o->required) n = snprintf(buf, sizeof(buf), "one of %s must be set", names);
    if (n > 0 && !violate(v, "message.oneof", buf, strlen(buf), 0)) return 0;
  }
  for (size_t i = 0; i < p->nrequired; i++) {
    const pc_OneofDef *o = p->required[i];
    if (pc_Message_WhichOneof(msg, o) != NULL) continue;
    const char *text = "exactly one field is required in oneof";
    if (!path_name(v, o->name, strlen(o->name)) || !violate(v, "required", text, strlen(text), 0))
      return 0;
    v->nsegs = mark;
  }
  return 1;
}

pc_ValidateStatus pc_Validator_Validate(pc_Validator *v, const pc_Message *msg,
                                        const pc_MessageDef *m, int fail_fast, const int64_t now[2],
                                        pc_Error *err) {
  pc_Arena_Reset(v->scratch);
  v->nvio = 0;
  v->truncated = 0;
  v->cel_runs = 0;
  v->nsegs = 0;
  v->depth = 0;
  v->fail_fast = fail_fast;
  v->status = kPc_Validate_Valid;
  v->err = err;
  v->now.kind = kPc_Cel_Timestamp;
  if (now != NULL) {
    v->now.v.t.seconds = now[0];
    v->now.v.t.nanos = (int32_t)now[1];
  } else {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    v->now.v.t.seconds = (int64_t)ts.tv_sec;
    v->now.v.t.nanos = (int32_t)ts.tv_nsec;
  }
  int ok = validate_message(v, msg, m);
  pc_CelEval_Reset(v->ev);
  v->err = NULL;
  if (!ok && v->status != kPc_Validate_Valid) {
    v->nvio = 0;
    v->truncated = 0;
    return v->status;
  }
  return v->nvio ? kPc_Validate_Invalid : kPc_Validate_Valid;
}
