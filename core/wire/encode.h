/* Wire encoding: a slotted message (core/message/message.h) to bytes, byte for byte
 * what the C++ library writes for the same content.
 *
 * Fields go out in field-number order with extensions in their place;
 * proto3 implicit-presence fields are omitted at their default (zero, empty;
 * -0.0 is not the default and is written); explicit presence is honoured;
 * repeated scalars are packed when the definition says so (proto3 unless
 * [packed = false], proto2 only with [packed = true]); int32 and enum
 * values are sign-extended to 64 bits, so negatives take 10 bytes; maps go
 * out as entries (key 1, value 2, both always written); groups as
 * start/end-group pairs; unknown bytes verbatim after the known fields.
 * Map entries are written in the map's insertion order, or sorted by key
 * (numerically for integer keys, bytewise for strings, false before true)
 * in deterministic mode, which matches SerializeToString(deterministic).
 *
 * The encoder writes back to front into a pc_WireWriter (core/wire/wire.h), so
 * every length is known when it is written and nothing is measured twice. */
#ifndef PC_ENCODE_H
#define PC_ENCODE_H

#include "schema/def.h"
#include "base/error.h"
#include "message/message.h"
#include "wire/wire.h"

/* ORDER ENCODESTATUS: pc_EncodeStatus_String follows it. */
typedef enum {
  kPc_EncodeStatus_Ok = 0,
  kPc_EncodeStatus_OutOfMemory,
  kPc_EncodeStatus_TooDeep,        /* nesting past PC_ENCODE_MAX_DEPTH */
  kPc_EncodeStatus_BadUtf8,        /* a proto3 string field that is not UTF-8 (the
                                      decoder would refuse it; the spec forbids it) */
  kPc_EncodeStatus_MissingRequired /* a proto2 required field is unset
                                      (pc_Message_CheckRequired's list) */
} pc_EncodeStatus;

/* Sub-messages nest at most this many levels below the root when encoding:
 * PC_MESSAGE_MAX_DEPTH (core/message/message.h), the decoder's bound too. */
#define PC_ENCODE_MAX_DEPTH PC_MESSAGE_MAX_DEPTH

const char *pc_EncodeStatus_String(pc_EncodeStatus s);

typedef struct {
  int deterministic; /* sort map entries by key */
  int partial;       /* non-zero: do not check proto2 required fields */
} pc_EncodeOptions;

/* Prepends the encoding of 'msg' (of type 'm') to what 'w' holds; the
 * result is pc_WireWriter_Data(w) / pc_WireWriter_Size(w). 'opts' may be
 * NULL. Unless opts->partial, a message with a proto2 required field unset
 * anywhere in it fails with kPc_EncodeStatus_MissingRequired and 'err'
 * lists every missing field ("missing required fields: r.Req.inner.id,
 * r.Req.name", as pc_Message_CheckRequired); types without required fields
 * skip the check. On failure 'w' holds part of the encoding (free it) and
 * 'err' (may be NULL) says why and where, by the path from the root type as
 * pc_Message_CheckRequired names places (".name", "[\"key\"]" or "[n]",
 * ".(pkg.ext)"; an element's "[i]" counted from 0, as the missing
 * required fields' list and the C++ library's FindInitializationErrors
 * count); ": key" when a map key is what failed; "..."
 * for the outer steps of one too long for PC_ERROR_MAX; nesting too deep
 * names the root type alone). The place and the reason always show whole:
 * a root type name too long for them shows as "..." and its tail:
 * "r.Req.items[2].tags[3]: invalid UTF-8 at byte 5" (the string's first
 * bad byte, from 1), "r.Req.labels[\"\\255\"]: key: invalid UTF-8 at byte 1". */
pc_EncodeStatus pc_Encode(const pc_Message *msg, const pc_MessageDef *m,
                          const pc_EncodeOptions *opts, pc_WireWriter *w, pc_Error *err);

#endif
