--- Schemas: pools of definitions and what fills them. The default pool
-- and pc.pool; `.proto` source (pc.load, pc.load_file: parsed and resolved
-- in C, core/compiler/load.h through bindings/lua/lpc_compiler.c),
-- descriptor sets (pc.load_descriptor_set: core/wire/descriptor_set.h),
-- the built-in files (pc.builtin_source), and a pool's files and services
-- read back (pool:file, pool:service, pool:file_descriptor). The Pool
-- methods written in Lua are added to the methods of core.Pool here.
local compat = require "protocall.compat"
if compat.luajit then require "protocall.ffi.accessors" end -- before any Type is made
local core = require "protocall.core"

local type, error, ipairs, setmetatable, tostring, assert =
  type, error, ipairs, setmetatable, tostring, assert
local format = string.format
local hash32 = compat.hash32
local Pool = core.Pool
local load_proto, file_info, service_info = core.load_proto, core.file_info, core.service_info

local M = {}

local default_pool = core.pool_new()
-- (the metatable itself: getmetatable reads its __metatable, false for a
-- Pool and for a message alike)
local dgetmetatable = debug.getmetatable
local Pool_mt = dgetmetatable(default_pool)

--- pool = default_pool(): the pool pc.* works on (pc.set_default_pool
-- changes it); functions taking `pool =` default to it at each call.
function M.default_pool() return default_pool end

--- ok = is_pool(v): whether v is a protocall.Pool.
local function is_pool(v)
  return type(v) == "userdata" and dgetmetatable(v) == Pool_mt
end
M.is_pool = is_pool

--- fns = set_default_pool(pool): makes `pool` the default (see
-- pc.set_default_pool in lua/protocall/init.lua, which binds the
-- functions) and returns its functions {message, enum, extend, type,
-- fields}; nil for a value that is not a Pool.
function M.set_default_pool(pool)
  if not is_pool(pool) then return nil end
  default_pool = pool
  return core.pool_functions(pool)
end

--- T = pc.message(full_name, fields [, {syntax = "proto2", extensions =
-- {{100, 199}, ...}}]): declares a message type (one synthetic file
-- "lua:<full_name>"). Each field is {name, type, number} plus options
-- `repeated = true`, `optional = true` (explicit presence), `oneof =
-- "name"`, `packed =`, `json_name =`, `default =` and `required = true`
-- (proto2); its type is a scalar keyword ("int32", "string", ...),
-- "map<K,V>" or a message or enum's full name: one declared before (or
-- the type itself), so types that refer to each other are loaded from
-- .proto text with pc.load instead. Raises on a bad declaration, an
-- unknown type ("T.f: unknown type 'pkg.B'") or an unknown option, naming
-- the type and field.
--- Enum = pc.enum(full_name, {NAME = number, ...} [, {syntax = "proto2"}]):
-- a table mapping names to numbers and numbers to names (tostring:
-- "protocall.Enum(full_name)"); proto2 enums are closed and need no 0 value.
--- pc.extend(extendee, {{"pkg.name", type, number [, repeated=, default=]}, ...}):
-- declares proto2 extensions (full names of one package) of a message
-- declared with {syntax = "proto2", extensions = {{from, to}, ...}};
-- reach them with pc.get_extension / pc.set_extension.
--- pc.type(full_name) -> Type, Enum or nil.
--- pc.fields(T) -> list of {name, number, type, type_name, label, oneof,
-- json_name, packed, has_presence, default} in declaration order.
--- pool = pc.pool(): a new independent Pool (methods: message, enum,
-- extend, type, fields, freeze, is_frozen, and those below);
-- pool:freeze() refuses further loads and declarations.
function M.pool() return core.pool_new() end

-- A name for source given without one: the same text gets the same name,
-- so loading it twice is harmless.
local function source_name(source)
  return format("source-%08x.proto", hash32(source))
end

local function check_opts(fname, opts, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(format("bad argument #2 to '%s' (table expected, got %s)", fname, type(opts)), level + 1)
  end
  if opts.name ~= nil and type(opts.name) ~= "string" then
    error(format("%s: option 'name' must be a string, got %s", fname, type(opts.name)), level + 1)
  end
  -- names and paths are C strings further on: a NUL would cut them short
  if opts.name ~= nil and opts.name:find("\0", 1, true) then
    error(format("%s: option 'name' holds a NUL byte", fname), level + 1)
  end
  local paths = opts.import_paths
  if paths ~= nil then
    if type(paths) ~= "table" then
      error(format("%s: option 'import_paths' must be a list of strings", fname), level + 1)
    end
    for i, p in ipairs(paths) do
      if type(p) ~= "string" then
        error(format("%s: import_paths[%d] must be a string, got %s", fname, i, type(p)), level + 1)
      elseif p:find("\0", 1, true) then
        error(format("%s: import_paths[%d] holds a NUL byte", fname, i), level + 1)
      end
    end
  end
  return opts
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

-- pool -> {file name -> source text} for files loaded from strings, so a
-- second load under the same name with other text is refused.
local sources = setmetatable({}, { __mode = "k" })

--- file | nil, err = pool:load(source, opts): adds the `.proto` text
-- `source` and what it imports to the pool. opts: `name` (the file's name
-- in the pool, in errors and for imports; default "source-<hash>.proto"),
-- `import_paths` (folders searched for imports; the well-known types
-- google/protobuf/*.proto are built in). Returns a file table {name,
-- package, syntax, messages, enums, services, dependencies} (full names);
-- nil and "file.proto:line:column: what is wrong" on an error, with the
-- pool unchanged. Loading the same text under the same name again returns
-- the loaded file; other text under a loaded name is an error.
function Pool.load(pool, source, opts)
  if type(source) ~= "string" then
    error("bad argument #1 to 'load' (string expected, got " .. type(source) .. ")", 2)
  end
  opts = check_opts("load", opts, 2)
  local name = opts.name or source_name(source)
  local known = sources[pool]
  if not known then
    known = {}
    sources[pool] = known
  end
  local loaded = file_info(pool, name)
  if loaded then -- an import or a descriptor set brought it: its text is not known
    if known[name] == nil or known[name] == source then return loaded end
    return nil, name .. ": a different file of this name is already loaded"
  end
  local ok, err = load_proto(pool, name, source, opts.import_paths or {})
  if not ok then return nil, err end
  known[name] = source
  return file_info(pool, name)
end

--- file | nil, err = pool:load_file(path, opts): as pool:load, reading
-- the file at `path`. Its name in the pool is `opts.name`, else `path`
-- relative to the first import path that holds it, else the import name
-- of a built-in file that `path` ends with
-- ("/usr/include/google/protobuf/type.proto" is "google/protobuf/type.proto",
-- as protoc names it through its own include folder, so an import of it
-- finds it loaded; the folder above is searched for imports), else `path`
-- with its folder searched for imports after `import_paths`. A `path` that
-- names no file on disk is, as for protoc, a name inside the import paths
-- ("google/api/http.proto" with import_paths {"third_party/googleapis"}),
-- read from the first that has it; one found in none of them that is the
-- import name of a built-in file (pc.builtin_source:
-- "google/protobuf/field_mask.proto") is that file, as protoc finds its
-- own include folder's.
function Pool.load_file(pool, path, opts)
  if type(path) ~= "string" then
    error("bad argument #1 to 'load_file' (string expected, got " .. type(path) .. ")", 2)
  end
  if path:find("\0", 1, true) then error("bad argument #1 to 'load_file' (a path holds no NUL byte)", 2) end
  opts = check_opts("load_file", opts, 2)
  local paths = {}
  for i, p in ipairs(opts.import_paths or {}) do paths[i] = p end
  local name = opts.name
  local on_disk = io.open(path, "rb")
  if on_disk then
    on_disk:close()
  else
    for _, p in ipairs(paths) do
      local inside = (p:sub(-1) == "/" and p or p .. "/") .. path
      local f = io.open(inside, "rb")
      if f then
        f:close()
        name = name or path
        path = inside
        break
      end
    end
  end
  if not name then
    for _, p in ipairs(paths) do
      local prefix = p:sub(-1) == "/" and p or p .. "/"
      if path:sub(1, #prefix) == prefix then
        name = path:sub(#prefix + 1)
        break
      end
    end
  end
  if not name then
    for at in path:gmatch("()/") do -- the longest tail first
      local tail = path:sub(at + 1)
      if core.builtin_source(tail) then
        name = tail
        paths[#paths + 1] = at > 1 and path:sub(1, at - 1) or "/"
        break
      end
    end
  end
  if not name then
    name = path
    paths[#paths + 1] = dirname(path)
  end
  local f = io.open(path, "rb")
  if not f then
    if opts.name == nil and core.builtin_source(path) then -- protoc finds it in its own include folder
      local ok, err = M.load_builtin(pool, path)
      if not ok then return nil, err end
      return file_info(pool, path)
    end
    return nil, path .. ": File not found."
  end
  local source, why = f:read("a")
  f:close()
  if not source then return nil, path .. ": " .. tostring(why) end -- a folder, say
  return Pool.load(pool, source, { name = name, import_paths = paths })
end

--- info | nil = pool:service(full_name): {name, full_name, methods} where
-- each method is {name, full_name, path = "/pkg.Service/Method", input =
-- Type, output = Type, client_streaming, server_streaming, file = its
-- file's name, line, column = where the file's .proto source declares it
-- (its name, from 1; nil for a file from a descriptor set, reflection or
-- Lua declarations), option_positions = {[field number] = {line =, column
-- =}, ...}: where that source sets each custom option of the method (by
-- the extension's number, at the option's name, `(google.api.http)`; nil
-- when none or unknown)}, listed in order and by name.
function Pool.service(pool, full_name)
  if type(full_name) ~= "string" then
    error("bad argument #1 to 'service' (string expected, got " .. type(full_name) .. ")", 2)
  end
  return service_info(pool, full_name)
end

--- info | nil = pool:file(name): the loaded file's table (see pool:load).
function Pool.file(pool, name)
  return file_info(pool, tostring(name))
end

--- names = pool:files(): the names of the loaded files, in the order
-- they were added (a file's imports before it).
function Pool.files(pool)
  return core.file_names(pool)
end

local file_descriptor_bytes = core.file_descriptor_bytes
local DESCRIPTOR_PROTO = "google/protobuf/descriptor.proto"
local FDP = "google.protobuf.FileDescriptorProto"
-- For frozen pools without descriptor.proto: one private pool per state.
local descriptor_pool

-- The FileDescriptorProto Type to decode into: the pool's own (loading
-- the built-in descriptor.proto into it when absent), or, for a frozen
-- pool that lacks it, the state's private pool's.
local function descriptor_type(pool)
  local T = Pool.type(pool, FDP)
  if T then return T end
  if Pool.is_frozen(pool) then
    if not descriptor_pool then
      descriptor_pool = core.pool_new()
      assert(load_proto(descriptor_pool, DESCRIPTOR_PROTO, nil, {}))
    end
    return Pool.type(descriptor_pool, FDP)
  end
  assert(load_proto(pool, DESCRIPTOR_PROTO, nil, {}))
  return Pool.type(pool, FDP)
end

--- m | nil, err = pool:file_descriptor(name): the loaded file `name` as
-- a `google.protobuf.FileDescriptorProto` message (what `protoc -o`
-- writes for it, without source info: `pc.encode(m)` gives protoc's
-- bytes; custom options are unknown fields of the *Options messages, as in
-- protoc's own descriptor.proto: `pc.decode(T, pc.encode(m.options))` with
-- the pool's option type reads them as extensions). Its type comes from the built-in `descriptor.proto`, loaded
-- into the pool on first use (a frozen pool without it uses a private
-- pool of the state instead). nil and "<name>: no such file in the pool"
-- when the file is not loaded.
function Pool.file_descriptor(pool, name)
  if type(name) ~= "string" then
    error("bad argument #1 to 'file_descriptor' (string expected, got " .. type(name) .. ")", 2)
  end
  local bytes = file_descriptor_bytes(pool, name)
  if not bytes then return nil, name .. ": no such file in the pool" end
  -- custom options stay unknown fields, as protoc keeps them: one record per
  -- assignment, in source order, so pc.encode(m) gives protoc's bytes
  return core.decode(descriptor_type(pool), bytes, { extensions = false })
end

--- files | nil, err = pool:load_descriptor_set(bytes): adds every file of
-- a serialized google.protobuf.FileDescriptorSet (`protoc -o
-- --include_imports`) to the pool, extensions included, read with the
-- project's own codec; files the pool already has by name are skipped. A
-- set made without --include_imports needs its imports in the pool first,
-- except the built-in files (the well-known types), which are added.
-- Returns the list of the added files as file tables (as pool:load
-- returns: {name, package, syntax, messages, enums, services,
-- dependencies}), or nil and "descriptor set: <subject>: <reason> at
-- offset <n>" / the pool's validation error / protoc's word on an import
-- cycle ("a.proto: File recursively imports itself: a.proto -> b.proto ->
-- a.proto", nothing added) or a package past its limits.
function core.Pool.load_descriptor_set(pool, bytes)
  if type(bytes) ~= "string" then
    error("bad argument #1 to 'load_descriptor_set' (string expected, got " .. type(bytes) .. ")", 2)
  end
  local names, err = core.load_descriptor_set(pool, bytes)
  if not names then return nil, err end
  local files = {}
  for i, name in ipairs(names) do files[i] = file_info(pool, name) end
  return files
end

--- true | nil, err = load_builtin(pool, name): adds the built-in file
-- `name` (core/schema/wkt.h) to `pool` unless it is there; nil and what
-- is wrong when the pool is frozen without it.
function M.load_builtin(pool, name)
  if Pool.file(pool, name) then return true end
  local ok, err = load_proto(pool, name, nil, {})
  if not ok then return nil, "cannot add the built-in " .. name .. " to the pool (" .. tostring(err) .. ")" end
  return true
end

-- The pool of `opts.pool`, or the default one; raises on a non-Pool.
local function on(opts)
  local pool = type(opts) == "table" and opts.pool or nil
  if pool == nil then return default_pool end
  if not is_pool(pool) then
    error("option 'pool': protocall.Pool expected, got " .. type(pool), 3)
  end
  return pool
end
--- pc.load(source, opts), pc.load_file(path, opts), pc.service(name),
-- pc.file(name), pc.file_descriptor(name): the pool methods on the
-- default pool (or `opts.pool`).
function M.load(source, opts) return Pool.load(on(opts), source, opts) end
function M.load_file(path, opts) return Pool.load_file(on(opts), path, opts) end
function M.service(full_name) return Pool.service(default_pool, full_name) end
function M.file(name) return Pool.file(default_pool, name) end
function M.file_descriptor(name) return Pool.file_descriptor(default_pool, name) end

--- files | nil, err = pc.load_descriptor_set(bytes [, {pool = p}]): the
-- same as pool:load_descriptor_set on the default pool (or opts.pool).
function M.load_descriptor_set(bytes, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #2 to 'load_descriptor_set' (table expected, got " .. type(opts) .. ")", 2)
  end
  local pool = opts ~= nil and opts.pool or default_pool
  return Pool.load_descriptor_set(pool, bytes)
end

--- text | nil = pc.builtin_source(name): the `.proto` text protocall has
-- built in under import name `name` (the well-known types
-- "google/protobuf/*.proto", "grpc/health/v1/health.proto",
-- "grpc/reflection/v1/reflection.proto",
-- "grpc/reflection/v1alpha/reflection.proto", google/rpc's status files,
-- protovalidate's "buf/validate/validate.proto" and the HTTP rules of
-- googleapis, "google/api/http.proto", "google/api/annotations.proto" and
-- "google/api/httpbody.proto"), for protoc or a reader; nil for any other
-- name.
function M.builtin_source(name)
  if type(name) ~= "string" then
    error("bad argument #1 to 'builtin_source' (string expected, got " .. type(name) .. ")", 2)
  end
  return core.builtin_source(name)
end

return M
