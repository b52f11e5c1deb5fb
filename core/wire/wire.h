/* Wire primitives: varints, ZigZag, fixed-width values, tags, skipping
 * unknown fields, UTF-8 validation, and a growable output buffer.
 *
 * Implements the protobuf encoding spec (protobuf.dev/programming-guides/
 * encoding) with the current spec's strictness where Debian's 3.21 C++
 * library is lenient: a tag is a varint of at most 5 bytes (as protoc and
 * python3-protobuf read it) whose value must fit 32 bits; field
 * number 0, numbers above 2^29-1 and wire types 6 and 7 are errors; a varint
 * longer than 10 bytes is an error (bits past 64 in the 10th byte are
 * dropped, as every implementation does). Readers take [p, end) and never
 * read at or past 'end'. The hot readers are inline here; the rest is in
 * wire.c. Nothing here allocates except the writer. */
#ifndef PC_WIRE_H
#define PC_WIRE_H

#include "base/arena.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum {
  kPc_Wire_Varint = 0,
  kPc_Wire_Fixed64 = 1,
  kPc_Wire_Len = 2,
  kPc_Wire_StartGroup = 3,
  kPc_Wire_EndGroup = 4,
  kPc_Wire_Fixed32 = 5
} pc_WireType;

#define PC_WIRE_MAX_FIELD       536870911 /* 2^29 - 1 */
#define PC_WIRE_MAX_VARINT      10
#define PC_WIRE_MAX_TAG         5 /* bytes of a tag varint */
/* Unknown groups nest at most this deep whatever the depth limit. */
#define PC_WIRE_SKIP_MAX_GROUPS 1000

/* Why a read failed. ORDER WIRESTATUS: pc_WireStatus_String follows it. */
typedef enum {
  kPc_WireStatus_Ok = 0,
  kPc_WireStatus_Truncated,         /* input ends inside a value */
  kPc_WireStatus_VarintTooLong,     /* more than 10 bytes */
  kPc_WireStatus_TagTooWide,        /* tag value above 2^32-1 */
  kPc_WireStatus_FieldZero,         /* field number 0 */
  kPc_WireStatus_FieldTooLarge,     /* field number above 2^29-1 (cannot happen
                                       after a 32-bit tag; kept for callers that
                                       check numbers) */
  kPc_WireStatus_BadWireType,       /* wire type 6 or 7 */
  kPc_WireStatus_LengthPastEnd,     /* a length prefix runs past the input */
  kPc_WireStatus_UnmatchedEndGroup, /* end-group without its start */
  kPc_WireStatus_GroupMismatch,     /* end-group with another field number */
  kPc_WireStatus_TooDeep,           /* nesting past the depth limit */
  kPc_WireStatus_BadUtf8,           /* a proto3 string that is not UTF-8 */
  kPc_WireStatus_TagTooLong         /* a tag varint of more than 5 bytes */
} pc_WireStatus;

/* "truncated input", "varint longer than 10 bytes", ... (static text). */
const char *pc_WireStatus_String(pc_WireStatus s);

/* -- Reading --------------------------------------------------------------- */

/* Out-of-line tail of pc_Wire_ReadVarint for values of 2+ bytes. */
const uint8_t *pc_Wire_ReadVarintSlow(const uint8_t *p, const uint8_t *end, uint64_t *v,
                                      pc_WireStatus *st);

/* Reads one varint at 'p' into '*v'; returns the position after it, or
 * NULL with '*st' set (Truncated, VarintTooLong). */
static inline const uint8_t *pc_Wire_ReadVarint(const uint8_t *p, const uint8_t *end, uint64_t *v,
                                                pc_WireStatus *st) {
  if (p < end && *p < 0x80) {
    *v = *p;
    return p + 1;
  }
  if (end - p >= 2 && p[1] < 0x80) {
    *v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
    return p + 2;
  }
  return pc_Wire_ReadVarintSlow(p, end, v, st);
}

/* Reads a tag: a varint of at most 5 bytes (TagTooLong) that must fit 32
 * bits (TagTooWide), with a field number in
 * 1..2^29-1 and a wire type in 0..5. '*field' and '*wt' receive the parts;
 * on error (NULL) '*field' still holds the number when it could be read. */
const uint8_t *pc_Wire_ReadTag(const uint8_t *p, const uint8_t *end, uint32_t *field,
                               pc_WireType *wt, pc_WireStatus *st);

static inline uint32_t pc_Wire_LoadFixed32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t pc_Wire_LoadFixed64(const uint8_t *p) {
  return (uint64_t)pc_Wire_LoadFixed32(p) | (uint64_t)pc_Wire_LoadFixed32(p + 4) << 32;
}

/* Reads a length prefix and checks it against what remains: on success
 * '*len' bytes start at the returned position and end at or before 'end'. */
static inline const uint8_t *pc_Wire_ReadLength(const uint8_t *p, const uint8_t *end, size_t *len,
                                                pc_WireStatus *st) {
  uint64_t v;
  p = pc_Wire_ReadVarint(p, end, &v, st);
  if (p == NULL) return NULL;
  if (v > (uint64_t)(end - p)) {
    *st = kPc_WireStatus_LengthPastEnd;
    return NULL;
  }
  *len = (size_t)v;
  return p;
}

/* Skips the value of a field whose tag was just read ('field', 'wt'), start
 * groups included: a group's contents are skipped up to the end-group with
 * the same number, each nested group counting one level against
 * 'depth_left' (the levels still allowed; 0 means no group may open).
 * An end-group ('wt' 4) is an error here: the caller matches its own.
 * On error returns NULL with '*st' set and '*at' at the start of the value
 * or tag that failed. */
const uint8_t *pc_Wire_SkipField(const uint8_t *p, const uint8_t *end, uint32_t field,
                                 pc_WireType wt, int depth_left, pc_WireStatus *st,
                                 const uint8_t **at);

/* ZigZag (sint32/sint64). */
static inline uint32_t pc_Wire_ZigZagEncode32(int32_t n) {
  return ((uint32_t)n << 1) ^ (uint32_t)(-(int32_t)((uint32_t)n >> 31));
}
static inline uint64_t pc_Wire_ZigZagEncode64(int64_t n) {
  return ((uint64_t)n << 1) ^ (uint64_t)(-(int64_t)((uint64_t)n >> 63));
}
static inline int32_t pc_Wire_ZigZagDecode32(uint32_t n) {
  return (int32_t)((n >> 1) ^ (uint32_t)(-(int32_t)(n & 1)));
}
static inline int64_t pc_Wire_ZigZagDecode64(uint64_t n) {
  return (int64_t)((n >> 1) ^ (uint64_t)(-(int64_t)(n & 1)));
}

/* Whether the 'len' bytes at 's' are well-formed UTF-8 (RFC 3629: no
 * overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF). */
int pc_Wire_ValidUtf8(const uint8_t *s, size_t len);
/* Where the 'len' bytes at 's' stop being UTF-8 as pc_Wire_ValidUtf8 reads
 * them: the offset of the first byte that begins no well-formed character
 * (a stray continuation byte, a sequence cut short or ill-formed), or
 * 'len' when they are UTF-8 (for errors that say where). */
size_t pc_Wire_InvalidUtf8At(const uint8_t *s, size_t len);

/* Bytes a varint of 'v' takes (1..10). */
static inline size_t pc_Wire_VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* -- Writing --------------------------------------------------------------- */

/* A growable byte buffer filled from the END towards the start (as upb's
 * encoder): a sub-message's length is known once its contents are written,
 * so nothing is measured twice. Write fields in reverse order. 'ptr' is the
 * first written byte; [ptr, buf + cap) holds the output. */
typedef struct {
  pc_Alloc *alloc;
  void *ud;
  uint8_t *buf;
  uint8_t *ptr;
  size_t cap;
} pc_WireWriter;

/* An empty writer ('alloc' NULL means pc_DefaultAlloc). Allocates nothing. */
void pc_WireWriter_Init(pc_WireWriter *w, pc_Alloc *alloc, void *ud);

/* Frees the buffer; the writer is empty and usable again. */
void pc_WireWriter_Free(pc_WireWriter *w);

/* Empties the writer, keeping its buffer for reuse. */
static inline void pc_WireWriter_Reset(pc_WireWriter *w) {
  if (w->buf != NULL) w->ptr = w->buf + w->cap;
}

/* Makes room for 'n' more bytes in front; 0 on allocation failure (the
 * contents are kept). */
int pc_WireWriter_GrowFor(pc_WireWriter *w, size_t n);

static inline int pc_WireWriter_Reserve(pc_WireWriter *w, size_t n) {
  return (size_t)(w->ptr - w->buf) >= n || pc_WireWriter_GrowFor(w, n);
}

/* Bytes written so far. */
static inline size_t pc_WireWriter_Size(const pc_WireWriter *w) {
  return w->cap - (size_t)(w->ptr - w->buf);
}

/* The written bytes (valid until the next write or free). */
static inline const uint8_t *pc_WireWriter_Data(const pc_WireWriter *w) {
  return w->ptr;
}

/* Each Put prepends its bytes; 1 on success, 0 on allocation failure. */
static inline int pc_WireWriter_PutVarint(pc_WireWriter *w, uint64_t v) {
  if (!pc_WireWriter_Reserve(w, PC_WIRE_MAX_VARINT)) return 0;
  if (v < 0x80) {
    *--w->ptr = (uint8_t)v;
    return 1;
  }
  size_t n = pc_Wire_VarintSize(v);
  uint8_t *q = w->ptr -= n;
  while (v >= 0x80) {
    *q++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *q = (uint8_t)v;
  return 1;
}

static inline int pc_WireWriter_PutTag(pc_WireWriter *w, uint32_t field, pc_WireType wt) {
  return pc_WireWriter_PutVarint(w, (uint64_t)field << 3 | (uint32_t)wt);
}

static inline int pc_WireWriter_PutFixed32(pc_WireWriter *w, uint32_t v) {
  if (!pc_WireWriter_Reserve(w, 4)) return 0;
  w->ptr -= 4;
  w->ptr[0] = (uint8_t)v;
  w->ptr[1] = (uint8_t)(v >> 8);
  w->ptr[2] = (uint8_t)(v >> 16);
  w->ptr[3] = (uint8_t)(v >> 24);
  return 1;
}

static inline int pc_WireWriter_PutFixed64(pc_WireWriter *w, uint64_t v) {
  return pc_WireWriter_PutFixed32(w, (uint32_t)(v >> 32)) &&
         pc_WireWriter_PutFixed32(w, (uint32_t)v);
}

static inline int pc_WireWriter_PutBytes(pc_WireWriter *w, const void *p, size_t n) {
  if (n == 0) return 1;
  if (!pc_WireWriter_Reserve(w, n)) return 0;
  w->ptr -= n;
  memcpy(w->ptr, p, n);
  return 1;
}

/* -- Appending ----------------------------------------------------------- */

/* A byte buffer appended to front to back and grown in a pc_Arena (old
 * storage stays in the arena until it is freed): for small encodings built
 * in order, such as the options messages the .proto compiler writes. 'p'
 * holds 'n' bytes, room for 'cap'. Zero-initialize. Each Put returns 1, or
 * 0 when the arena cannot grow (the contents are kept). */
typedef struct {
  uint8_t *p;
  size_t n, cap;
} pc_ByteBuf;

int pc_ByteBuf_Put(pc_ByteBuf *b, pc_Arena *a, const void *data, size_t len);
int pc_ByteBuf_PutVarint(pc_ByteBuf *b, pc_Arena *a, uint64_t v);
/* The low 'bytes' (4 or 8) bytes of 'v', little-endian. */
int pc_ByteBuf_PutFixed(pc_ByteBuf *b, pc_Arena *a, uint64_t v, int bytes);

static inline int pc_ByteBuf_PutTag(pc_ByteBuf *b, pc_Arena *a, uint32_t number, pc_WireType wt) {
  return pc_ByteBuf_PutVarint(b, a, (uint64_t)number << 3 | (uint32_t)wt);
}

#endif
