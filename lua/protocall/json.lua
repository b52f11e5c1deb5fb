--- Proto3 JSON both ways: pc.to_json and pc.from_json, the canonical
-- mapping of protobuf's "ProtoJSON format" (json_name out, json_name or the
-- proto name in, 64-bit integers as strings, bytes as base64, enums by
-- name, the well-known types in their special forms). The work is in C
-- (bindings/lua/lpc_json.c over core/json/, whose json.h states every rule).
local core = require "protocall.core"

local M = {}

--- s = pc.to_json(m [, opts]): the message as proto3 JSON text.
-- opts: `emit_defaults` (print fields without presence at their
-- defaults: 0, "", [], {}, the first enum value), `proto_names` (field names as in the .proto),
-- `enums_as_ints`, `indent` (spaces per level, 0..16; 0, the default,
-- prints one line without spaces), `pool` (where an Any's type is found;
-- default the message's pool). Raises on a non-message, an unknown
-- option, or a value JSON cannot express (a Timestamp or Duration out of
-- range, an Any whose type is unknown, a string that is not UTF-8), with
-- the JSON path: "$.ts: Timestamp seconds ... out of range ...".
M.to_json = core.to_json

--- m | nil, err = pc.from_json(T, s [, opts]): a new message of type T
-- from proto3 JSON text. opts: `ignore_unknown` (skip members naming no
-- field, and enum names the enum lacks), `max_depth` (message nesting,
-- default 100, at most 1000), `pool` (where Any's types and extensions
-- are found). Bad input returns nil and "<path>: <what> at offset <n>",
-- e.g. "$.resourceSpans[0].spans[2].traceId: invalid base64 at offset
-- 311" (offsets count bytes from 0); past `max_depth`, "$.kids[0].kids[0]:
-- messages nested deeper than 1 (max_depth) at offset 18", and arrays or
-- objects nested past any message "... JSON nested deeper than 204 (2 *
-- max_depth + 4) at offset 204". Raises on bad arguments.
M.from_json = core.from_json

--- bytes | nil, err, part = pc.json_to_wire(T, s [, opts [, more]]): the
-- wire encoding of the message of type T that the proto3 JSON text `s`
-- holds, as pc.encode(pc.from_json(T, s, opts)) gives it but with no
-- message object in between (the message lives in a scratch arena of the
-- C side for the call): what a JSON -> gRPC transcoder sends. opts:
-- pc.from_json's (`ignore_unknown`, `max_depth`, `pool`). `more`: a second
-- JSON text of T, read with pc.from_json's defaults and merged over the
-- first as pc.merge does (a transcoder's path variables and query
-- parameters over the body). Bad input returns nil, pc.from_json's error
-- ("$.data: invalid base64 at offset 9") and which text it is in (`part`:
-- 1 for `s`, 2 for `more`); a proto2 message missing a required field
-- returns nil and pc.encode's words ("missing required field: p.R.name"),
-- no part. Raises on bad arguments.
M.json_to_wire = core.json_to_wire

--- s | nil, err = pc.wire_to_json(T, bytes [, opts]): the proto3 JSON text
-- of the message of type T encoded in `bytes`, as pc.to_json(pc.decode(T,
-- bytes), opts) gives it with no message object in between: what a gRPC ->
-- JSON transcoder answers. opts: pc.to_json's (`emit_defaults`,
-- `proto_names`, `enums_as_ints`, `indent`, `pool`). Bytes that do not
-- decode return nil and pc.decode's error; a message JSON cannot express
-- raises as pc.to_json does ("$.ts: Timestamp seconds ... out of range
-- ..."), as do bad arguments.
M.wire_to_json = core.wire_to_json
return M
