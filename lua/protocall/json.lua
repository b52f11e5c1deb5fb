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
-- 311" (offsets count bytes from 0). Raises on bad arguments.
M.from_json = core.from_json
return M
