--- The wire format: pc.encode, pc.decode and pc.is_initialized. The work
-- is in C (bindings/lua/lpc_wire.c over core/wire/encode.c and
-- core/wire/decode.c; a plain table through bindings/lua/lpc_table.c).
-- Under LuaJIT the public pc.encode and pc.decode also take pc.ffi structs
-- (lua/protocall/ffi/struct.lua wraps these in lua/protocall/init.lua).
local core = require "protocall.core"

local M = {}

--- bytes = pc.encode(m [, {deterministic = true, partial = true}]): the
-- message's wire encoding, byte for byte what the C++ library writes
-- (field-number order, unknown fields last); `deterministic` sorts map
-- entries by key (otherwise they come in the map's own order, which
-- differs between runs and runtimes). Raises on a non-message, on nesting
-- deeper than 1000 levels, on a proto3 string that is not UTF-8 (stored
-- from C: Lua refuses one as it is stored), naming its place and first bad
-- byte, "demo.Route.tags[2]: invalid UTF-8 at byte 3", and, unless
-- `partial`, when a proto2 required field is unset anywhere in it:
-- "missing required fields: r.Req.inner.id, r.Req.name" (every missing
-- path; "[i]" in repeated fields, "[\"key\"]" in maps). An index in a
-- path counts from 0, as the C++ library's FindInitializationErrors
-- counts: "tags[2]" is the element Lua reads as m.tags[3].
-- bytes = pc.encode(T, table [, opts]): a plain table as a message of
-- type T, without making message objects (bindings/lua/lpc_table.c): the
-- bytes of pc.encode(T(table), opts), and T{...}'s error (naming
-- type.field, with an element's index or an entry's key: "demo.T.ids[2]:
-- integer expected, got string", "demo.T.labels[\"k\"]: ...",
-- "demo.T.labels[1]: key: string expected, got number"; below the table's
-- own fields the whole path, "demo.T.ins[1].v: ...", "demo.T.ins[1].name:
-- invalid UTF-8 at byte 3") for a table T{...} refuses. A table with no entries of its own but a metatable (a proxy) is
-- read through it, as T{...} reads it: a message's fields through
-- __index, a list through __len and __index, a map through __pairs. An
-- option other than these
-- raises: "bad argument #2 to 'encode' (unknown option 'determinstic')",
-- and so does one that is not a boolean (or nil): "bad argument #2 to
-- 'encode' (deterministic: boolean expected, got string)".
M.encode = core.encode

--- m | nil, err = pc.decode(T, bytes [, {max_depth = 100, partial = true,
-- table = true, extensions = false}]): a new message of type T from its
-- wire encoding; unknown fields are kept and encoded again. Malformed
-- input returns nil and "<subject>: <reason> at offset <n>" (the subject
-- names the field); nesting deeper than max_depth is malformed (the levels
-- below the top message: 1 allows its direct sub-messages; default 100, at
-- most 1000, what encode, merge, clone and assignment handle too). Unless
-- `partial`, input lacking a proto2 required field returns nil and
-- "missing required fields: r.Req.inner.id". With `table`, plain Lua
-- tables in pc.to_table's shape instead of a message, made in one pass in
-- C (the tables and errors of pc.to_table(pc.decode(T, bytes))); with
-- `extensions = false`, fields in extension ranges stay unknown fields (as
-- pc.file_descriptor reads custom options). An option other than these
-- four raises: "bad argument #3 to 'decode' (unknown option 'tabel')".
M.decode = core.decode

--- ok [, why] = pc.is_initialized(m): whether every proto2 required field
-- of m and of the messages it holds is set (what pc.encode checks); a type
-- without required fields is always initialized. When one is not, `why`
-- names them as pc.encode's error does ("missing required fields:
-- r.Req.inner.id, r.Req.name"). Raises on a non-message.
M.is_initialized = core.is_initialized

return M
