/* What the files of core/cel share: the syntax tree, programs, the
 * evaluation context, lists and maps, and the helpers every part uses.
 * Private to core/cel. */
#ifndef PC_CEL_INTERNAL_H
#define PC_CEL_INTERNAL_H

#include "cel/cel.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* -- Functions and operators ------------------------------------------------
 * One table: the id, the name as written, how it may be called (global
 * `f(x, y)`, receiver `x.f(y)`) and its argument counts, the receiver
 * counted (`x.f(y)` has two, as `f(x, y)`). Operators are made by the
 * parser, never looked up by name. */
#define CEL_GLOBAL   1
#define CEL_RECEIVER 2
#define CEL_OPERATOR 4

#define CEL_FUNCTIONS(X)                                                                           \
  X(NEG, "-_", CEL_OPERATOR, 1, 1)                                                                 \
  X(NOT, "!_", CEL_OPERATOR, 1, 1)                                                                 \
  X(ADD, "_+_", CEL_OPERATOR, 2, 2)                                                                \
  X(SUB, "_-_", CEL_OPERATOR, 2, 2)                                                                \
  X(MUL, "_*_", CEL_OPERATOR, 2, 2)                                                                \
  X(DIV, "_/_", CEL_OPERATOR, 2, 2)                                                                \
  X(MOD, "_%_", CEL_OPERATOR, 2, 2)                                                                \
  X(EQ, "_==_", CEL_OPERATOR, 2, 2)                                                                \
  X(NE, "_!=_", CEL_OPERATOR, 2, 2)                                                                \
  X(LT, "_<_", CEL_OPERATOR, 2, 2)                                                                 \
  X(LE, "_<=_", CEL_OPERATOR, 2, 2)                                                                \
  X(GT, "_>_", CEL_OPERATOR, 2, 2)                                                                 \
  X(GE, "_>=_", CEL_OPERATOR, 2, 2)                                                                \
  X(IN, "@in", CEL_OPERATOR, 2, 2)                                                                 \
  X(SIZE, "size", CEL_GLOBAL | CEL_RECEIVER, 1, 1)                                                 \
  X(CONTAINS, "contains", CEL_RECEIVER, 2, 2)                                                      \
  X(STARTS_WITH, "startsWith", CEL_RECEIVER, 2, 2)                                                 \
  X(ENDS_WITH, "endsWith", CEL_RECEIVER, 2, 2)                                                     \
  X(MATCHES, "matches", CEL_GLOBAL | CEL_RECEIVER, 2, 2)                                           \
  X(INT, "int", CEL_GLOBAL, 1, 1)                                                                  \
  X(UINT, "uint", CEL_GLOBAL, 1, 1)                                                                \
  X(DOUBLE, "double", CEL_GLOBAL, 1, 1)                                                            \
  X(STRING, "string", CEL_GLOBAL, 1, 1)                                                            \
  X(BYTES, "bytes", CEL_GLOBAL, 1, 1)                                                              \
  X(BOOL, "bool", CEL_GLOBAL, 1, 1)                                                                \
  X(DURATION, "duration", CEL_GLOBAL, 1, 1)                                                        \
  X(TIMESTAMP, "timestamp", CEL_GLOBAL, 1, 1)                                                      \
  X(DYN, "dyn", CEL_GLOBAL, 1, 1)                                                                  \
  X(TYPE, "type", CEL_GLOBAL, 1, 1)                                                                \
  X(GET_FULL_YEAR, "getFullYear", CEL_RECEIVER, 1, 2)                                              \
  X(GET_MONTH, "getMonth", CEL_RECEIVER, 1, 2)                                                     \
  X(GET_DAY_OF_YEAR, "getDayOfYear", CEL_RECEIVER, 1, 2)                                           \
  X(GET_DAY_OF_MONTH, "getDayOfMonth", CEL_RECEIVER, 1, 2)                                         \
  X(GET_DATE, "getDate", CEL_RECEIVER, 1, 2)                                                       \
  X(GET_DAY_OF_WEEK, "getDayOfWeek", CEL_RECEIVER, 1, 2)                                           \
  X(GET_HOURS, "getHours", CEL_RECEIVER, 1, 2)                                                     \
  X(GET_MINUTES, "getMinutes", CEL_RECEIVER, 1, 2)                                                 \
  X(GET_SECONDS, "getSeconds", CEL_RECEIVER, 1, 2)                                                 \
  X(GET_MILLISECONDS, "getMilliseconds", CEL_RECEIVER, 1, 2)                                       \
  X(IS_NAN, "isNan", CEL_RECEIVER, 1, 1)                                                           \
  X(IS_INF, "isInf", CEL_RECEIVER, 1, 2)                                                           \
  X(IS_EMAIL, "isEmail", CEL_RECEIVER, 1, 1)                                                       \
  X(IS_HOSTNAME, "isHostname", CEL_RECEIVER, 1, 1)                                                 \
  X(IS_IP, "isIp", CEL_RECEIVER, 1, 2)                                                             \
  X(IS_IP_PREFIX, "isIpPrefix", CEL_RECEIVER, 1, 3)                                                \
  X(IS_URI, "isUri", CEL_RECEIVER, 1, 1)                                                           \
  X(IS_URI_REF, "isUriRef", CEL_RECEIVER, 1, 1)                                                    \
  X(IS_HOST_AND_PORT, "isHostAndPort", CEL_RECEIVER, 2, 2)                                         \
  X(UNIQUE, "unique", CEL_RECEIVER, 1, 1)                                                          \
  X(GET_FIELD, "getField", CEL_GLOBAL, 2, 2)                                                       \
  X(FORMAT, "format", CEL_RECEIVER, 2, 2)                                                          \
  X(CHAR_AT, "charAt", CEL_RECEIVER, 2, 2)                                                         \
  X(INDEX_OF, "indexOf", CEL_RECEIVER, 2, 3)                                                       \
  X(LAST_INDEX_OF, "lastIndexOf", CEL_RECEIVER, 2, 3)                                              \
  X(LOWER_ASCII, "lowerAscii", CEL_RECEIVER, 1, 1)                                                 \
  X(UPPER_ASCII, "upperAscii", CEL_RECEIVER, 1, 1)                                                 \
  X(REPLACE, "replace", CEL_RECEIVER, 3, 4)                                                        \
  X(SPLIT, "split", CEL_RECEIVER, 2, 3)                                                            \
  X(SUBSTRING, "substring", CEL_RECEIVER, 2, 3)                                                    \
  X(TRIM, "trim", CEL_RECEIVER, 1, 1)                                                              \
  X(JOIN, "join", CEL_RECEIVER, 1, 2)                                                              \
  X(QUOTE, "strings.quote", CEL_GLOBAL, 1, 1)

typedef enum {
#define CEL_FN_ENUM(id, name, how, min, max) kCelFn_##id,
  CEL_FUNCTIONS(CEL_FN_ENUM)
#undef CEL_FN_ENUM
      kCelFn_Count
} cel_Fn;

typedef struct {
  const char *name;
  uint8_t how, min, max;
} cel_FnInfo;

extern const cel_FnInfo cel_fn_info[kCelFn_Count];

/* -- The syntax tree ------------------------------------------------------ */

typedef enum {
  kCelNode_Const,  /* 'value' */
  kCelNode_Name,   /* an identifier before names are resolved ('name', 'absolute') */
  kCelNode_Ident,  /* a variable: 'slot' */
  kCelNode_Select, /* kids[0].name; 'field' when found while compiling */
  kCelNode_Has,    /* has(kids[0].name) */
  kCelNode_Index,  /* kids[0][kids[1]] */
  kCelNode_Call,   /* 'fn' (after compiling; 'name' before), receiver first when 'receiver' */
  kCelNode_List,   /* kids */
  kCelNode_Map,    /* kids: key, value, key, value... */
  kCelNode_Struct, /* 'name'{fields: kids}; refused when compiling */
  kCelNode_Cond,   /* kids[0] ? kids[1] : kids[2] */
  kCelNode_And,
  kCelNode_Or,
  kCelNode_Comp /* a macro over kids[0]: 'comp', variables 'slot' (and 'slot' + 1) */
} cel_NodeKind;

typedef enum {
  kCelComp_All,           /* r.all(x, p) */
  kCelComp_Exists,        /* r.exists(x, p) */
  kCelComp_ExistsOne,     /* r.exists_one(x, p) */
  kCelComp_Map,           /* r.map(x, t) */
  kCelComp_MapFilter,     /* r.map(x, p, t) */
  kCelComp_Filter,        /* r.filter(x, p) */
  kCelComp_All2,          /* r.all(i, v, p) */
  kCelComp_Exists2,       /* r.exists(i, v, p) */
  kCelComp_ExistsOne2,    /* r.existsOne(i, v, p) */
  kCelComp_TransformList, /* r.transformList(i, v, [p,] t) */
  kCelComp_TransformMap   /* r.transformMap(k, v, [p,] t) */
} cel_CompKind;

typedef struct cel_Node cel_Node;
struct cel_Node {
  uint8_t kind;     /* cel_NodeKind */
  uint8_t comp;     /* kCelNode_Comp: cel_CompKind */
  uint8_t receiver; /* kCelNode_Call: kids[0] is the receiver */
  uint8_t absolute; /* kCelNode_Name: written with a leading dot */
  uint16_t fn;      /* kCelNode_Call: cel_Fn */
  uint16_t depth;   /* 1 + the deepest kid's */
  uint32_t pos;     /* byte offset of what the node is named after */
  uint32_t n;       /* kids */
  int32_t slot;     /* Ident, Comp */
  cel_Node **kids;
  const char *name;  /* Name, Select, Has, Call (before compiling), Struct, Comp: the
                        first variable */
  const char *name2; /* Comp: the second variable, or NULL */
  uint32_t name_len, name2_len;
  const char **fields;        /* Struct: a field name per kid */
  const pc_FieldDef *field;   /* Select, Has: 'name' in 'mtype' */
  const pc_MessageDef *mtype; /* Select, Has: the operand's type when known */
  const pc_MessageDef *type;  /* the message type the node's value always has, or NULL
                                 (while compiling) */
  const pc_MessageDef *elem;  /* the message type of every element of the node's list */
  pc_CelValue value;          /* Const */
  pc_CelRegex *re;            /* Call matches with a constant pattern */
};

/* -- Lists and maps ------------------------------------------------------- */

typedef enum { kCelList_Values, kCelList_Field } cel_ListKind;

struct pc_CelList {
  uint8_t kind;
  size_t size;
  const pc_CelValue *items; /* Values */
  const pc_Array *arr;      /* Field: the elements, stored as message.h says */
  const pc_FieldDef *field; /* Field: the repeated field */
};

typedef enum { kCelMap_Values, kCelMap_Field } cel_MapKind;

struct pc_CelMap {
  uint8_t kind;
  size_t size;
  const pc_CelValue *keys, *values; /* Values: in insertion order */
  const uint32_t *index;            /* Values: open addressing, entry + 1, 0 free */
  size_t index_cap;                 /* a power of two, twice the size or more */
  const pc_Map *map;                /* Field: the entries (NULL: none) */
  const pc_FieldDef *field;         /* Field: the map field */
};

/* -- Programs ------------------------------------------------------------- */

struct pc_CelProgram {
  pc_Arena *arena;
  const char *text;
  size_t len;
  cel_Node *root;
  size_t var_count;  /* declared variables: slots 0.. */
  size_t slot_count; /* and the comprehension variables after them */
  const char **var_names;
  const pc_MessageDef **var_types;
  const pc_Pool *pool;
  pc_CelRegex **regexes; /* compiled patterns, freed with the program */
  size_t regex_count, regex_cap;
};

/* -- Evaluation ----------------------------------------------------------- */

#define CEL_REGEX_CACHE           16
/* What compiling a pattern made while evaluating costs in steps (a step is
 * some 10 ns): a base and 16 a pattern byte before compiling, then this
 * much an instruction of the program made (RE2 takes 0.1 to 0.3 us an
 * instruction), or, for a pattern RE2 gave up on as too large (it spent up
 * to its memory limit, some milliseconds, first), the large charge. */
#define CEL_REGEX_COMPILE_STEPS   200
#define CEL_REGEX_PROGRAM_STEPS   24
#define CEL_REGEX_TOO_LARGE_STEPS 500000

/* What a step of evaluation returns: Ok, a CEL error (absorbed by && || all
 * exists), or a fatal one (limit, memory: never absorbed). The message is
 * in the context. */
enum { kCel_Ok = 0, kCel_Error = 1, kCel_Fatal = 2 };

struct pc_CelEval {
  pc_Alloc *alloc;
  void *ud;
  pc_Arena *arena;
  pc_CelLimits limits, used;
  int running; /* inside pc_CelProgram_Eval: the budget applies */
  const pc_CelProgram *prog;
  pc_CelValue *slots;
  /* the first error of the evaluation */
  pc_CelStatus status; /* of a fatal error */
  int err_set;
  uint32_t err_pos;
  char err[PC_ERROR_MAX];
  /* patterns that were not constants, compiled on first use */
  struct {
    char *pattern;
    size_t len;
    pc_CelRegex *re;
  } cache[CEL_REGEX_CACHE];
  unsigned cache_next;
};

typedef struct pc_CelEval cel_E;

/* Errors: a CEL error at 'pos' (the first one is kept; returns kCel_Error),
 * a fatal one (limit, memory; returns kCel_Fatal). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int cel_fail(cel_E *e, uint32_t pos, const char *fmt, ...);
int cel_fatal(cel_E *e, pc_CelStatus status, uint32_t pos, const char *what);
void cel_clear_error(cel_E *e);

/* Budget: 'n' steps of work at 'pos' (kCel_Fatal when the budget is out). */
static inline int cel_steps(cel_E *e, uint64_t n, uint32_t pos) {
  e->used.steps += n;
  if (e->running && e->used.steps > e->limits.steps)
    return cel_fatal(e, kPc_CelStatus_Limit, pos, "steps");
  return kCel_Ok;
}

/* Scratch memory of the evaluation, counted against the budget; NULL with
 * the fatal error recorded. */
void *cel_alloc(cel_E *e, size_t n, uint32_t pos);
/* A value of 'n' bytes / elements may be made (max_size). */
int cel_check_size(cel_E *e, size_t n, uint32_t pos);

/* Past this many levels of nested lists and maps, comparing or printing
 * is refused (messages nest no deeper than PC_MESSAGE_MAX_DEPTH). */
#define CEL_VALUE_DEPTH (PC_MESSAGE_MAX_DEPTH + PC_CEL_MAX_DEPTH + 8)

/* Values */
pc_CelValue cel_bool(int b);
pc_CelValue cel_int(int64_t i);
pc_CelValue cel_uint(uint64_t u);
pc_CelValue cel_double(double d);
pc_CelValue cel_string(const char *s, size_t n);
pc_CelValue cel_bytes(const char *s, size_t n);
pc_CelValue cel_type(const char *name);
const char *cel_kind_name(pc_CelKind k);
const char *cel_type_name(const pc_CelValue *v);

/* Strings made in the context ('n' bytes, checked against max_size). */
char *cel_new_string(cel_E *e, size_t n, uint32_t pos);

/* Lists and maps made in the context; Values maps check key types and
 * duplicates. */
int cel_new_list(cel_E *e, pc_CelValue *items, size_t n, uint32_t pos, pc_CelValue *out);
int cel_new_map(cel_E *e, pc_CelValue *keys, pc_CelValue *values, size_t n, uint32_t pos,
                pc_CelValue *out);
int cel_list_get(cel_E *e, const pc_CelList *l, size_t i, uint32_t pos, pc_CelValue *out);
int cel_map_entry(cel_E *e, const pc_CelMap *m, size_t i, uint32_t pos, pc_CelValue *key,
                  pc_CelValue *value);
/* '*found' 0 when 'key' is not in the map (keys compare as == does). */
int cel_map_find(cel_E *e, const pc_CelMap *m, const pc_CelValue *key, uint32_t pos,
                 pc_CelValue *out, int *found);

/* == (heterogeneous: numbers by value, other kinds unequal) and ordering
 * (-1, 0, 1; 2 when unordered: NaN; kCel_Error when the kinds have no
 * ordering). */
int cel_equal(cel_E *e, const pc_CelValue *a, const pc_CelValue *b, uint32_t pos, int *eq);
int cel_compare(cel_E *e, const pc_CelValue *a, const pc_CelValue *b, uint32_t pos, int *cmp);

/* Messages (message.c) */
int cel_message_value(cel_E *e, const pc_Message *msg, const pc_MessageDef *m, uint32_t pos,
                      pc_CelValue *out);
int cel_field_value(cel_E *e, const pc_Message *msg, const pc_FieldDef *f, uint32_t pos,
                    pc_CelValue *out);
int cel_elem_value(cel_E *e, const pc_FieldDef *f, pc_Value v, uint32_t pos, pc_CelValue *out);
int cel_has_field(const pc_Message *msg, const pc_FieldDef *f);
/* Whether CEL converts messages of type 'm' (a well-known type). */
int cel_is_wkt(const pc_MessageDef *m);
/* protovalidate's getField(msg, name). */
int cel_get_field(cel_E *e, const pc_CelValue *msg, const pc_CelValue *name, uint32_t pos,
                  pc_CelValue *out);

/* Calls (func.c, ext.c) */
int cel_call(cel_E *e, const cel_Node *n, pc_CelValue *args, size_t nargs, pc_CelValue *out);
int cel_ext_call(cel_E *e, const cel_Node *n, pc_CelValue *args, size_t nargs, pc_CelValue *out);
int cel_no_overload(cel_E *e, const cel_Node *n, const pc_CelValue *args, size_t nargs);

/* Conversions to text shared by string() and format(). */
int cel_double_text(double d, char *buf, size_t room); /* as JavaScript prints numbers */
/* Appends the text of 'v' as string() / '%s' give it (lists and maps as
 * format() writes them) to the growing buffer. */
typedef struct {
  char *data;
  size_t size, cap;
} cel_Buf;
int cel_buf_add(cel_E *e, cel_Buf *b, const char *s, size_t n, uint32_t pos);
int cel_format_value(cel_E *e, cel_Buf *b, const pc_CelValue *v, uint32_t pos, int depth);

/* UTF-8 */
size_t cel_utf8_count(const char *s, size_t n); /* code points (pc_Cel_StringSize) */
/* The code point at s[*i] (advancing *i), U+FFFD for a byte that starts no
 * valid sequence. */
uint32_t cel_utf8_next(const char *s, size_t n, size_t *i);

/* Time (time.c) */
#define CEL_TS_MIN        (-62135596800LL) /* 0001-01-01T00:00:00Z */
#define CEL_TS_MAX        253402300799LL   /* 9999-12-31T23:59:59Z */
/* Durations fit int64 nanoseconds, as in cel-go and cel-es (about 292
 * years; a protobuf Duration may hold more, and reads as it is). */
#define CEL_DUR_MAX_SEC   9223372036LL
#define CEL_DUR_MAX_NANOS 854775807
int cel_duration_ok(int64_t sec, int64_t nanos);
int cel_parse_timestamp(const char *s, size_t n, int64_t *sec, int32_t *nanos);
int cel_parse_duration(const char *s, size_t n, int64_t *sec, int32_t *nanos);
size_t cel_format_timestamp(int64_t sec, int32_t nanos, char *buf); /* room: 40 */
size_t cel_format_duration(int64_t sec, int32_t nanos, char *buf);  /* room: 40 */
/* The fixed offset in seconds of a time zone ("UTC", "+05:30", "-02:00",
 * "02:00"); 0 when it is not one this library knows. */
int cel_time_zone(const char *s, size_t n, int32_t *offset);
void cel_civil(int64_t days, int64_t *year, int *month, int *day); /* days since the epoch */

/* The program's regular expression for pattern 'p' (constant or cached). */
int cel_regex(cel_E *e, const cel_Node *n, const pc_StringView *p, const pc_CelRegex **out);

/* Evaluation of one node (eval.c). */
int cel_eval(cel_E *e, const cel_Node *n, pc_CelValue *out);

/* Parsing (parse.c) and compiling (compile.c). */
typedef struct {
  pc_Arena *arena;
  const char *text;
  size_t len;
  int max_depth;
  pc_CelStatus status;
  pc_Error *err;
} cel_Parser;
cel_Node *cel_parse(cel_Parser *p);
/* "line:col: " of byte offset 'pos' in 'text', into 'buf' (room 32). */
void cel_position(const char *text, size_t len, uint32_t pos, char *buf, size_t room);

#endif
