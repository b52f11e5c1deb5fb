/* Text format in: protobuf's "Text Format Language Specification", as
 * `protoc --encode` (the C++ library's TextFormat::Parser) accepts it.
 *
 * Fields by name (a group by its type's name), extensions as [pkg.ext], an
 * Any expanded as [type.googleapis.com/pkg.T] { ... } (the URL is kept as
 * type_url and the message encoded into value); message values in { } or
 * < >, the ':' before them optional; lists [a, b] for repeated fields
 * (scalars after ':', messages after ':' too); fields separated by
 * nothing, ',' or ';'. Integers decimal, hex (0x) or octal (leading 0),
 * with '-' for signed types, range checked; floats with an optional f
 * suffix, also from integers, and inf / infinity / nan in any case (an
 * overflowing literal is an infinity); bools true / false / True / False /
 * t / f / 1 / 0; enums by name or number (a closed enum refuses numbers it
 * lacks); strings in '...' or "...", adjacent ones concatenated, with the
 * escapes \a \b \f \n \r \t \v \\ \' \" \? \ooo \xHH \uXXXX \UXXXXXXXX
 * (proto3 string fields must be valid UTF-8); # comments to the end of the
 * line. A non-repeated field set twice, or two members of one oneof, is
 * refused, as protoc does.
 *
 * Errors read "<line>:<column>: <what>", both counted from 1 (the column in
 * bytes), at the token that is wrong. */
#ifndef PC_TEXT_H
#define PC_TEXT_H

#include "base/arena.h"
#include "base/error.h"
#include "message/message.h"
#include "schema/def.h"

#include <stddef.h>

/* Message nesting below the root allowed by default, and at most. */
#define PC_TEXT_DEFAULT_DEPTH 100
#define PC_TEXT_MAX_DEPTH     1000

/* ORDER TEXTSTATUS: pc_TextStatus_String follows it. */
typedef enum {
  kPc_TextStatus_Ok = 0,
  kPc_TextStatus_Invalid,    /* bad input; 'err' says where and why */
  kPc_TextStatus_OutOfMemory /* an allocator failed */
} pc_TextStatus;

const char *pc_TextStatus_String(pc_TextStatus s);

typedef struct {
  int max_depth;       /* 0: PC_TEXT_DEFAULT_DEPTH; at most PC_TEXT_MAX_DEPTH */
  const pc_Pool *pool; /* extensions and expanded Any types; NULL: the pool
                          of the message's type */
} pc_TextParseOptions;

/* Parses the 'len' bytes of text at 'text' into 'msg' (of type 'm',
 * normally empty), allocating from 'a'. 'opts' may be NULL. On failure
 * 'msg' holds part of the input (valid, all in 'a') and 'err' (may be
 * NULL) says where and why. */
pc_TextStatus pc_Text_Parse(const char *text, size_t len, pc_Message *msg, const pc_MessageDef *m,
                            pc_Arena *a, const pc_TextParseOptions *opts, pc_Error *err);

#endif
