--- The wire format (doc/guide.md "Messages"): pc.encode, pc.decode and
-- pc.load_descriptor_set. The work is in C (bindings/lua/lpc_wire.c over
-- core/wire/encode.c, core/wire/decode.c, core/wire/descriptor_set.c).
local M = {}

local type, error, ipairs = type, error, ipairs

function M.install(pc, core)
  local encode, decode, load_set = core.encode, core.decode, core.load_descriptor_set
  local file_info = core.file_info

  --- bytes = pc.encode(m [, {deterministic = true, partial = true}]): the
  -- message's wire encoding, byte for byte what the C++ library writes
  -- (field-number order, unknown fields last); `deterministic` sorts map
  -- entries by key (otherwise they come in the map's own order, which
  -- differs between runs and runtimes). Raises on a non-message, on nesting
  -- deeper than 1000 levels, and, unless `partial`, when a proto2 required
  -- field is unset anywhere in it: "missing required fields: r.Req.inner.id,
  -- r.Req.name" (every missing path; "[i]" in repeated fields, "[\"key\"]"
  -- in maps).
  -- bytes = pc.encode(T, table [, opts]): a plain table as a message of
  -- type T, without making message objects (bindings/lua/lpc_table.c): the
  -- bytes of pc.encode(T(table), opts), and T{...}'s error (naming
  -- type.field) for a table T{...} refuses. An option other than these
  -- raises: "bad argument #2 to 'encode' (unknown option 'determinstic')".
  pc.encode = encode

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
  pc.decode = decode

  --- ok = pc.is_initialized(m): whether every proto2 required field of m
  -- and of the messages it holds is set (what pc.encode checks); a type
  -- without required fields is always initialized. Raises on a
  -- non-message.
  pc.is_initialized = core.is_initialized

  --- files | nil, err = pool:load_descriptor_set(bytes): adds every file of
  -- a serialized google.protobuf.FileDescriptorSet (`protoc -o
  -- --include_imports`) to the pool, extensions included, read with the
  -- project's own codec; files the pool already has by name are skipped. A
  -- set made without --include_imports needs its imports in the pool first,
  -- except the built-in files (the well-known types), which are added.
  -- Returns the list of the added files as file tables (as pool:load
  -- returns: {name, package, syntax, messages, enums, services,
  -- dependencies}), or nil and "descriptor set: <subject>: <reason> at
  -- offset <n>" / the pool's validation error.
  function core.Pool.load_descriptor_set(pool, bytes)
    if type(bytes) ~= "string" then
      error("bad argument #1 to 'load_descriptor_set' (string expected, got " .. type(bytes) .. ")", 2)
    end
    local names, err = load_set(pool, bytes)
    if not names then return nil, err end
    local files = {}
    for i, name in ipairs(names) do files[i] = file_info(pool, name) end
    return files
  end

  --- files | nil, err = pc.load_descriptor_set(bytes [, {pool = p}]): the
  -- same on the default pool (or opts.pool).
  function pc.load_descriptor_set(bytes, opts)
    if opts ~= nil and type(opts) ~= "table" then
      error("bad argument #2 to 'load_descriptor_set' (table expected, got " .. type(opts) .. ")", 2)
    end
    local pool = opts ~= nil and opts.pool or pc._default_pool
    return core.Pool.load_descriptor_set(pool, bytes)
  end
end

return M
