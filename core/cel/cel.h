/* CEL, the Common Expression Language (cel-spec's langdef), in C: an
 * expression is compiled once against the variables it may read, then
 * evaluated any number of times on messages and values, each evaluation
 * within a budget.
 *
 *   pc_CelVar vars[] = {{"this", user_type}, {"now", NULL}};
 *   pc_CelEnv env = {pool, "demo", vars, 2};
 *   pc_CelProgram *p;
 *   if (pc_CelProgram_New(&env, "this.age >= 18 ? '' : 'too young'", len, NULL, NULL, &p, &err))
 *     ... err.msg is "1:10: ..." ...
 *   pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
 *   pc_CelValue args[2], out;
 *   pc_CelEval_MessageValue(ev, user, user_type, &args[0], &err);
 *   args[1].kind = kPc_Cel_Timestamp; ...
 *   if (pc_CelProgram_Eval(p, ev, args, &out, &err) == kPc_CelStatus_Ok) ... out.kind ...
 *   pc_CelEval_Reset(ev);   (the values made for this evaluation are gone)
 *
 * A program is immutable once made: one program may be evaluated by several
 * threads at once, each with its own pc_CelEval (the scratch memory, the
 * budget and a cache of the regular expressions a program builds from
 * values). Nothing here raises, prints or aborts; failures are a status and
 * a message in a pc_Error whose text starts with the place in the
 * expression ("1:15: division by zero": line and column, 1-based, columns
 * counted in code points).
 *
 * What is supported: the whole expression grammar but message literals
 * (`M{f: v}` parses, and is a compile error); int, uint, double, bool,
 * string, bytes, list, map, null, messages (read from pc_Message through
 * their pc_MessageDef), timestamp, duration and type values with CEL's
 * heterogeneous equality; the macros has, all, exists, exists_one, map
 * (2 and 3 arguments) and filter; the standard functions, the strings
 * extension (format, charAt, indexOf, lastIndexOf, lowerAscii, upperAscii,
 * replace, split, substring, trim, join, strings.quote) and protovalidate's
 * functions (isEmail, isHostname, isIp, isIpPrefix, isUri, isUriRef,
 * isHostAndPort, unique, isNan, isInf, getField). core/cel/README.md lists
 * what is left out. */
#ifndef PC_CEL_H
#define PC_CEL_H

#include "base/arena.h"
#include "base/error.h"
#include "cel/regex.h"
#include "message/message.h"
#include "schema/def.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
  kPc_CelStatus_Ok = 0,
  kPc_CelStatus_Syntax,  /* the text is not a CEL expression ("1:7: expected ')'") */
  kPc_CelStatus_Compile, /* CEL, but naming what the environment lacks: an undeclared
                            variable, an unknown function or wrong argument count, a field
                            a declared message type has not, a message literal */
  kPc_CelStatus_Error,   /* evaluation failed as CEL defines it: no matching overload,
                            overflow, division by zero, no such key or field, a failed
                            conversion, an index out of range, an unbound variable */
  kPc_CelStatus_Limit,   /* a limit was reached: the text's length or nesting (compile),
                            the budget of pc_CelLimits (evaluation) */
  kPc_CelStatus_NoMemory
} pc_CelStatus;

const char *pc_CelStatus_String(pc_CelStatus s);

/* -- Values ---------------------------------------------------------------- */

typedef enum {
  kPc_Cel_Unbound = 0, /* no value: a variable left unbound (reading it is an error) */
  kPc_Cel_Null,
  kPc_Cel_Bool,
  kPc_Cel_Int,
  kPc_Cel_Uint,
  kPc_Cel_Double,
  kPc_Cel_String, /* UTF-8 */
  kPc_Cel_Bytes,
  kPc_Cel_List,
  kPc_Cel_Map,
  kPc_Cel_Message,
  kPc_Cel_Timestamp,
  kPc_Cel_Duration,
  kPc_Cel_Type
} pc_CelKind;

typedef struct pc_CelList pc_CelList; /* opaque: pc_CelList_Size, pc_CelEval_ListGet */
typedef struct pc_CelMap pc_CelMap;   /* opaque: pc_CelMap_Size, pc_CelEval_MapEntry */

/* A CEL value. Strings, bytes, lists, maps and messages are referred to,
 * not owned: they live in the messages a binding came from, in a program
 * (literals) or in the pc_CelEval that made them (until pc_CelEval_Reset).
 * Enum fields read as int (protovalidate's choice, cel-spec's legacy
 * behaviour). A message of a well-known type CEL converts (Timestamp,
 * Duration, the wrappers, Any, Struct, Value, ListValue) is never a
 * kPc_Cel_Message value: pc_CelEval_MessageValue converts it. */
typedef struct {
  pc_CelKind kind;
  union {
    int b;                  /* Bool: 0 or 1 */
    int64_t i;              /* Int */
    uint64_t u;             /* Uint */
    double d;               /* Double */
    pc_StringView s;        /* String, Bytes; Type: the type's name ("int", "demo.User") */
    const pc_CelList *list; /* List */
    const pc_CelMap *map;   /* Map */
    struct {
      const pc_Message *msg; /* NULL: an empty message of type 'def' */
      const pc_MessageDef *def;
    } m; /* Message */
    struct {
      int64_t seconds; /* Timestamp: since 1970-01-01T00:00:00Z; Duration */
      int32_t nanos;   /* 0..999999999 for a timestamp; a duration's has the sign of
                          'seconds' */
    } t;
  } v;
} pc_CelValue;

/* -- Compiling ------------------------------------------------------------- */

/* A variable the expression may read. */
typedef struct {
  const char *name;
  /* The message type the variable always holds: its fields are then found
   * when compiling (a misspelt one is a compile error) and read without a
   * lookup. NULL: any value. */
  const pc_MessageDef *type;
} pc_CelVar;

/* What an expression is compiled against. */
typedef struct {
  /* Message and enum names the expression may use: type values
   * (`type(x) == demo.User`) and enum constants (`demo.Color.RED`, an int).
   * NULL: none. */
  const pc_Pool *pool;
  /* The protobuf package (or message) the names resolve in, as cel-spec's
   * name resolution says ("demo": `Color.RED` is tried as demo.Color.RED,
   * then Color.RED). NULL or "": the root. */
  const char *container;
  const pc_CelVar *vars; /* in the order pc_CelProgram_Eval's values come */
  size_t var_count;
  /* Bytes of text; longer is refused (kPc_CelStatus_Limit). 0: PC_CEL_MAX_LENGTH. */
  size_t max_length;
  /* Nesting of the syntax tree (every operator, call, index, selection
   * and literal element counts one level: `a + b + c` is 2 deep); deeper is
   * refused. 0: PC_CEL_MAX_DEPTH, which is also the most allowed. */
  int max_depth;
} pc_CelEnv;

#define PC_CEL_MAX_LENGTH 100000
#define PC_CEL_MAX_DEPTH  250

typedef struct pc_CelProgram pc_CelProgram;

/* Parses and compiles the 'len' bytes at 'expr' (UTF-8) against 'env':
 * names resolved, macros expanded, constant regular expressions compiled
 * (RE2 syntax; a pattern over PC_CEL_MAX_PATTERN bytes or that RE2 refuses
 * is a compile error). Memory comes from 'alloc' (NULL: pc_DefaultAlloc),
 * but for RE2's own (C++ new). On success '*out' is the program and the
 * status Ok; otherwise '*out' is NULL and 'err' says where and why
 * ("1:5: undeclared reference to 'x'"). 'env' and what it points to need
 * not outlive the call, but the pool and the message types must outlive
 * the program. */
pc_CelStatus pc_CelProgram_New(const pc_CelEnv *env, const char *expr, size_t len, pc_Alloc *alloc,
                               void *ud, pc_CelProgram **out, pc_Error *err);

/* Frees the program (NULL allowed). */
void pc_CelProgram_Free(pc_CelProgram *p);

/* The expression's text as compiled, and bytes the program holds. */
const char *pc_CelProgram_Text(const pc_CelProgram *p, size_t *len);
size_t pc_CelProgram_Size(const pc_CelProgram *p);

/* -- Evaluating ------------------------------------------------------------ */

/* The budget of one evaluation; reaching any part is kPc_CelStatus_Limit,
 * never a hang or an unbounded allocation. */
typedef struct {
  uint64_t steps;      /* nodes evaluated plus units of work: an element compared,
                          copied or visited, 16 bytes scanned, copied or matched */
  uint64_t iterations; /* comprehension iterations, all macros together */
  size_t bytes;        /* bytes allocated for values made during the evaluation */
  size_t max_size;     /* of one string or bytes value made (bytes), and of one
                          list or map made (elements) */
} pc_CelLimits;

/* 1,000,000 steps, 100,000 iterations, 16 MiB, 1 MiB. */
#define PC_CEL_DEFAULT_LIMITS                                                                      \
  { 1000000, 100000, (size_t)16 << 20, (size_t)1 << 20 }

typedef struct pc_CelEval pc_CelEval;

/* A new evaluation context with the default limits; NULL on allocation
 * failure. One per thread. */
pc_CelEval *pc_CelEval_New(pc_Alloc *alloc, void *ud);
void pc_CelEval_Free(pc_CelEval *ev);

/* Sets the budget of the evaluations that follow (NULL: the defaults). */
void pc_CelEval_SetLimits(pc_CelEval *ev, const pc_CelLimits *limits);

/* What the last pc_CelProgram_Eval used of each part of the budget. */
void pc_CelEval_Used(const pc_CelEval *ev, pc_CelLimits *used);

/* Forgets every value made with 'ev' (results, converted bindings, lists
 * and maps): their memory is reused by what follows. Compiled regular
 * expressions stay cached. */
void pc_CelEval_Reset(pc_CelEval *ev);

/* Evaluates 'p' with 'vars' (one value per declared variable, in the
 * order of pc_CelEnv.vars; kPc_Cel_Unbound for one left unbound; NULL when
 * none is declared). On Ok '*result' is the value, valid until
 * pc_CelEval_Reset; otherwise 'err' says where in the expression and why.
 * A variable declared with a message type must hold a message of that
 * type (or be unbound). Errors inside `&&`, `||`, `all` and `exists` are
 * absorbed as CEL says (`false && 1/0 == 1` is false); Limit and NoMemory
 * never are. */
pc_CelStatus pc_CelProgram_Eval(const pc_CelProgram *p, pc_CelEval *ev, const pc_CelValue *vars,
                                pc_CelValue *result, pc_Error *err);

/* -- Bindings and results -------------------------------------------------- */

/* The CEL value of message 'msg' of type 'm' (NULL 'msg': an empty one):
 * a message, or for the well-known types what CEL makes of them: Timestamp
 * and Duration as such, the wrappers as their value, Any as the message it
 * holds (its type found in m's pool, its bytes decoded into 'ev'), Struct
 * as a map, ListValue as a list, Value as what it holds. Error when an Any
 * cannot be unpacked. */
pc_CelStatus pc_CelEval_MessageValue(pc_CelEval *ev, const pc_Message *msg, const pc_MessageDef *m,
                                     pc_CelValue *out, pc_Error *err);

/* Field 'f' of 'msg' as CEL reads `msg.f`: a scalar (enums as int, floats
 * as double), a repeated field as a list and a map field as a map (views of
 * the message, not copies), a message field as pc_CelEval_MessageValue
 * gives it (unset: an empty message, null for a wrapper type). Extensions
 * too. This is protovalidate's `this` for a field's rules. */
pc_CelStatus pc_CelEval_FieldValue(pc_CelEval *ev, const pc_Message *msg, const pc_FieldDef *f,
                                   pc_CelValue *out, pc_Error *err);

/* One element of field 'f' (an item of a repeated field; for a map field's
 * key or value pass pc_FieldDef_MapKey / MapValue) held in 'v' as
 * message.h stores it: protovalidate's `this` for `repeated.items`,
 * `map.keys` and `map.values` rules. */
pc_CelStatus pc_CelEval_ElemValue(pc_CelEval *ev, const pc_FieldDef *f, pc_Value v,
                                  pc_CelValue *out, pc_Error *err);

/* A list of copies of 'n' values (which may be lists and maps made with
 * 'ev'); NULL when memory runs out. */
const pc_CelList *pc_CelEval_NewList(pc_CelEval *ev, const pc_CelValue *items, size_t n);

/* Lists and maps: their size, and element / entry 'i' (0-based, below the
 * size; a map's entries in the order it keeps: insertion order for
 * literals and map fields). Reading an element of a view may make a value
 * in 'ev' (a nested list, an unpacked Any), hence the status. */
size_t pc_CelList_Size(const pc_CelList *l);
pc_CelStatus pc_CelEval_ListGet(pc_CelEval *ev, const pc_CelList *l, size_t i, pc_CelValue *out,
                                pc_Error *err);
size_t pc_CelMap_Size(const pc_CelMap *m);
pc_CelStatus pc_CelEval_MapEntry(pc_CelEval *ev, const pc_CelMap *m, size_t i, pc_CelValue *key,
                                 pc_CelValue *value, pc_Error *err);

/* -- protovalidate's string formats ---------------------------------------- */

/* What isEmail, isHostname, isIp, isIpPrefix, isUri / isUriRef and
 * isHostAndPort answer for the 'n' bytes at 's' (1 or 0), for callers that
 * check a format without an expression (core/validate). 'version' 0 is
 * either IP version, 4 or 6 that one (another: 0); 'strict' refuses a
 * prefix with host bits set; 'ref' takes a relative reference too. */
int pc_Cel_IsEmail(const char *s, size_t n);
int pc_Cel_IsHostname(const char *s, size_t n);
int pc_Cel_IsIp(const char *s, size_t n, int64_t version);
int pc_Cel_IsIpPrefix(const char *s, size_t n, int64_t version, int strict);
int pc_Cel_IsUri(const char *s, size_t n, int ref);
int pc_Cel_IsHostAndPort(const char *s, size_t n, int port_required);

/* What size() answers for the 'n' bytes at 's' as a string: its code
 * points, a sequence that is not UTF-8 counted as U+FFFD replacements (one
 * for each maximal subpart, as WHATWG's decoder and protovalidate-es read
 * it), so at least n / 4 and at most n (the string rules' lengths). */
size_t pc_Cel_StringSize(const char *s, size_t n);

/* The offset of the first occurrence of the 'nn' bytes at 'needle' in the
 * 'hn' bytes at 'h' (0 for an empty needle), or SIZE_MAX: linear time
 * (glibc's memmem, a two-way search), so `contains` costs the haystack's
 * size and the needle's, not their product (a naive scan took 0.1 s for a
 * 4 MB string and a 1,000-byte needle). */
size_t pc_Cel_Find(const char *h, size_t hn, const char *needle, size_t nn);

/* The name of a value's CEL type, as type() gives it: "int", "list",
 * "google.protobuf.Timestamp", "demo.User", "null_type", "type". */
const char *pc_CelValue_TypeName(const pc_CelValue *v);

#endif
