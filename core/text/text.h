/* Text format in: protobuf's "Text Format Language Specification", as
 * `protoc --encode` (the C++ library's TextFormat::Parser) accepts it. The
 * .proto compiler reads aggregate option values (`option (o) = { ... }`)
 * with it too, as protoc's option interpreter uses that parser.
 *
 * Fields by name (a group by its type's name), extensions as [pkg.ext], an
 * Any expanded as [type.googleapis.com/pkg.T] { ... } (the URL is kept as
 * type_url and the message encoded into value); message values in { } or
 * < >, the ':' before them optional; lists [a, b] for repeated fields
 * (scalars after ':', messages after ':' too); fields separated by
 * nothing, ',' or ';'. Integers decimal, hex (0x) or octal (leading 0),
 * with '-' for signed types, range checked; floats with an optional f
 * suffix, also from decimal integers, and inf / infinity / nan in any case
 * (an overflowing literal is an infinity); bools true / True / t, false /
 * False / f or an integer 0 or 1; enums by name or number (a closed enum
 * refuses numbers it lacks); strings in '...' or "...", adjacent ones
 * concatenated, with the escapes \a \b \f \n \r \t \v \\ \' \" \? \ooo \xHH
 * \uXXXX \UXXXXXXXX (not a UTF-16 surrogate, alone or paired: the
 * specification's rule, though protoc 3.21 joins a pair; proto3 string
 * fields must be valid UTF-8); # comments
 * to the end of the line. A non-repeated field set twice (as protoc's
 * HasField sees it: a proto3 field without presence once it is not zero),
 * or two members of one oneof, is refused, as protoc does. An extension of
 * a MessageSet (message_set_wire_format) is kept as the MessageSet item
 * protoc writes for it, among the unknown bytes, as core/wire decodes one.
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

/* Where '[name]' and an expanded Any's type URL lead (protoc's
 * TextFormat::Finder); each returns NULL for nothing. */
typedef struct {
  /* The extension of 'm' named 'name' as written inside [...]. */
  const pc_FieldDef *(*extension)(void *ud, const pc_MessageDef *m, const char *name);
  /* The message type of the URL 'url' ("type.googleapis.com/pkg.T"). */
  const pc_MessageDef *(*any_type)(void *ud, const char *url);
  void *ud;
} pc_TextFinder;

typedef struct {
  int max_depth;               /* 0: PC_TEXT_DEFAULT_DEPTH; at most PC_TEXT_MAX_DEPTH */
  const pc_Pool *pool;         /* extensions and expanded Any types; NULL: the pool
                                  of the message's type */
  const pc_TextFinder *finder; /* NULL: full names in 'pool' */
  /* Non-zero: as protoc's option interpreter runs TextFormat::Parser, for
   * the .proto compiler. Errors in protoc's words with no position ("Expected
   * integer, got: x"; the caller knows where the text came from); a lone
   * UTF-16 surrogate escape gives its three bytes, a pair its character,
   * and strings need not be UTF-8, as protoc takes them; proto2 required fields must be set
   * ("Message missing required fields: a, i.x"); an Any's message is
   * encoded with its maps in the order written. */
  int protoc;
} pc_TextParseOptions;

/* Parses the 'len' bytes of text at 'text' into 'msg' (of type 'm',
 * normally empty), allocating from 'a'. 'opts' may be NULL. On failure
 * 'msg' holds part of the input (valid, all in 'a') and 'err' (may be
 * NULL) says where and why. */
pc_TextStatus pc_Text_Parse(const char *text, size_t len, pc_Message *msg, const pc_MessageDef *m,
                            pc_Arena *a, const pc_TextParseOptions *opts, pc_Error *err);

#endif
