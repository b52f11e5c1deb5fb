/* Private to core/json: what the writer (write.c) and the reader (read.c)
 * share: the well-known types, the JSON path of error messages, base64 and
 * the FieldMask name conversion (common.c). */
#ifndef PC_JSON_INTERNAL_H
#define PC_JSON_INTERNAL_H

#include "json/json.h"

#include <stddef.h>
#include <stdint.h>

/* The well-known types with a special JSON form. */
typedef enum {
  kWkt_None = 0,
  kWkt_Any,
  kWkt_Timestamp,
  kWkt_Duration,
  kWkt_FieldMask,
  kWkt_Struct,
  kWkt_Value,
  kWkt_ListValue,
  kWkt_Wrapper, /* DoubleValue ... BytesValue: field 1 "value" */
  kWkt_Empty
} pc_JsonWkt;

/* Which special form 'm' has (kWkt_None for ordinary messages). */
pc_JsonWkt pc_Json_WktOf(const pc_MessageDef *m);

/* Whether enum 'e' is google.protobuf.NullValue (printed and read as null). */
int pc_Json_IsNullValue(const pc_EnumDef *e);

/* One step of a JSON path, linked to the step above it (NULL at the root
 * "$"). A member: 'key' / 'keylen' (bytes as decoded); an array element:
 * 'key' NULL and 'index'. Steps live on the C stack of the recursion. */
typedef struct pc_JsonPath {
  const struct pc_JsonPath *up;
  const char *key;
  size_t keylen;
  size_t index;
} pc_JsonPath;

/* Writes "<path>: <what>" into 'err' (unless it is set): the path as
 * "$.a[2].b", keys that are not plain names as ["key"] (escaped and cut as
 * pc_Error_Quote does, in 68 bytes), at most 8 steps at each end of a deeper
 * path with "..." between; when path and what do not fit PC_ERROR_MAX, the
 * path gives up steps from its middle, so the message is whole. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void pc_Json_Fail(pc_Error *err, const pc_JsonPath *path, const char *fmt, ...);

/* Standard base64 with padding of 'n' bytes: 4 * ceil(n / 3) characters
 * written to 'out'. */
void pc_Json_Base64Encode(const uint8_t *in, size_t n, char *out);

/* Decodes standard or URL-safe base64, padded or not (the two alphabets may
 * not mix), into 'out' (room for 3 * n / 4 + 3 bytes). Returns the decoded
 * size, or (size_t)-1 when the text is not base64; '*bad' then holds the
 * offset of the first bad character within the text. */
size_t pc_Json_Base64Decode(const char *in, size_t n, uint8_t *out, size_t *bad);

/* FieldMask path "foo_bar.baz" as "fooBar.baz" into 'out' (room for 'n'
 * bytes); returns the length, or (size_t)-1 when the path has no camelCase
 * form that converts back (an uppercase letter, or '_' not followed by a
 * lowercase letter). */
size_t pc_Json_SnakeToCamel(const char *in, size_t n, char *out);

/* "fooBar.baz" as "foo_bar.baz" into 'out' (room for 2 * n bytes); returns
 * the length, or (size_t)-1 when the text holds '_'. */
size_t pc_Json_CamelToSnake(const char *in, size_t n, char *out);

/* Seconds and nanoseconds limits of Timestamp (0001-01-01T00:00:00Z to
 * 9999-12-31T23:59:59.999999999Z) and Duration (+-10000 years). */
#define PC_JSON_TIMESTAMP_MIN (-62135596800LL)
#define PC_JSON_TIMESTAMP_MAX 253402300799LL
#define PC_JSON_DURATION_MAX  315576000000LL

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t pc_Json_DaysFromCivil(int64_t y, unsigned m, unsigned d);
void pc_Json_CivilFromDays(int64_t z, int64_t *y, unsigned *m, unsigned *d);

#endif
