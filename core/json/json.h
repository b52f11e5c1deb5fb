/* Proto3 JSON: messages to and from the canonical JSON mapping (protobuf's
 * "ProtoJSON format": field names as json_name, 64-bit integers as
 * strings, bytes as base64, enums by name, the well-known types in their
 * special forms).
 *
 * Writing (pc_Json_Write): fields in field-number order, extensions as
 * "[pkg.ext]" members after them, unknown fields dropped; floats and
 * doubles as the shortest text that reads back to the same value ("NaN",
 * "Infinity" and "-Infinity" as strings); map entries in insertion order.
 *
 * Reading (pc_Json_Read): RFC 8259 JSON, strict: UTF-8 only (no lone
 * surrogates in \u escapes), no duplicate keys, no trailing garbage. Field
 * names by json_name or by proto name, never both for one field; at most
 * one member of a oneof; integers as numbers or strings, exact over the
 * whole int64 / uint64 range, integral (1.0 and 1e2 are integers, 1.5 is
 * not) and in range; floats as numbers or strings, "NaN", "Infinity",
 * "-Infinity"; bytes in standard or URL-safe base64, padded or not; enums
 * by name or number (numbers a closed enum lacks are refused); null leaves a
 * field unset (a google.protobuf.Value becomes null_value, a NullValue field
 * NULL_VALUE). Errors read "<path>: <what> at offset <n>" where the path is
 * JSONPath-like ("$.resourceSpans[0].spans[2].traceId", map keys as
 * ["key"]) and n is the 0-based byte offset in the input.
 *
 * Well-known types: Timestamp (RFC 3339, "Z" out with 0, 3, 6 or 9
 * fractional digits, any offset in, 0001-01-01 to 9999-12-31), Duration
 * ("-1.5s", within +-315576000000 s), FieldMask (camelCase paths joined by
 * commas), Struct / Value / ListValue (plain JSON), the wrappers (their
 * value), Empty ({}), Any ({"@type": url, fields...}, or "value" holding the
 * special form of a well-known type other than Empty; the type is looked
 * up in the options' pool, else the message's). */
#ifndef PC_JSON_H
#define PC_JSON_H

#include "base/arena.h"
#include "base/error.h"
#include "message/message.h"
#include "schema/def.h"

#include <stddef.h>

/* Nesting of messages below the root that reading allows by default, and
 * the most either direction allows at all (the C stack's bound): the
 * message layer's two limits (core/message/message.h), not limits of
 * their own. */
#define PC_JSON_DEFAULT_DEPTH PC_MESSAGE_DEFAULT_DEPTH
#define PC_JSON_MAX_DEPTH     PC_MESSAGE_MAX_DEPTH

/* ORDER JSONSTATUS: pc_JsonStatus_String follows it. */
typedef enum {
  kPc_JsonStatus_Ok = 0,
  kPc_JsonStatus_Invalid,    /* bad input (reading) or a value JSON cannot
                                express (writing); 'err' says where */
  kPc_JsonStatus_OutOfMemory /* an allocator failed */
} pc_JsonStatus;

const char *pc_JsonStatus_String(pc_JsonStatus s);

/* A growable output buffer ('data' is not NUL-terminated). */
typedef struct {
  pc_Alloc *alloc;
  void *ud;
  char *data;
  size_t size, cap;
} pc_JsonBuf;

/* An empty buffer ('alloc' NULL means pc_DefaultAlloc); allocates nothing. */
void pc_JsonBuf_Init(pc_JsonBuf *b, pc_Alloc *alloc, void *ud);

/* Frees the storage; the buffer is empty and usable again. */
void pc_JsonBuf_Free(pc_JsonBuf *b);

/* Finds the message type 'full_name' ("google.protobuf.Duration") for an
 * Any, or returns NULL; 'pool' is the one the options name. Must not
 * longjmp. */
typedef const pc_MessageDef *pc_JsonFindType(void *ud, const pc_Pool *pool, const char *full_name);

typedef struct {
  int emit_defaults;          /* print fields without presence at their defaults
                                 (0, "", [], {}, the first enum value) */
  int proto_names;            /* field names as in the .proto instead of json_name */
  int enums_as_ints;          /* enum values as numbers */
  int indent;                 /* spaces per level (0..16); 0 prints one line with no
                                 spaces */
  const pc_Pool *pool;        /* where Any's types are found; NULL: the pool of
                                 the message's type */
  pc_JsonFindType *find_type; /* when non-NULL, finds Any's types instead */
  void *find_type_ud;
} pc_JsonWriteOptions;

/* Appends the JSON of 'msg' (of type 'm') to 'out'. 'opts' may be NULL
 * (all zero). Fails (kPc_JsonStatus_Invalid, 'err' naming the path) on a
 * Timestamp or Duration out of range, an Any whose type is not in the pool
 * or whose value does not decode, a FieldMask path with no camelCase form,
 * a non-finite Value number, a string that is not UTF-8, and nesting past
 * PC_JSON_MAX_DEPTH. On failure 'out' holds part of the output. */
pc_JsonStatus pc_Json_Write(const pc_Message *msg, const pc_MessageDef *m,
                            const pc_JsonWriteOptions *opts, pc_JsonBuf *out, pc_Error *err);

typedef struct {
  int ignore_unknown;         /* skip members naming no field and enum names the
                                 enum lacks, instead of failing */
  int max_depth;              /* levels of message nesting below the root; 0 means
                                 PC_JSON_DEFAULT_DEPTH; at most PC_JSON_MAX_DEPTH */
  const pc_Pool *pool;        /* where Any's types and extensions are found; NULL:
                                 the pool of the message's type */
  pc_JsonFindType *find_type; /* when non-NULL, finds Any's types instead */
  void *find_type_ud;
  pc_Arena *scratch; /* when non-NULL, where the reader's tree of the text goes
                        (left there until the caller resets or frees it; may
                        be the message's arena); NULL: an arena of the
                        reader's own, made and freed in each call */
} pc_JsonReadOptions;

/* Reads the 'len' bytes of JSON at 'json' into 'msg' (of type 'm', empty
 * or not: members set fields as assignments do), allocating from 'a'.
 * 'opts' may be NULL (defaults). On failure 'msg' holds part of the input
 * (valid, all in 'a') and 'err' (may be NULL) says where and why. */
pc_JsonStatus pc_Json_Read(const char *json, size_t len, pc_Message *msg, const pc_MessageDef *m,
                           pc_Arena *a, const pc_JsonReadOptions *opts, pc_Error *err);

#endif
