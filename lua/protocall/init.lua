--- protocall: protobuf messages and RPC call policies for Lua.
-- `require "protocall"` returns this table, assembled here from the
-- modules of lua/protocall (lua/README.md maps them); each function's
-- contract is the doc comment where it is defined (doc/reference.md
-- gathers them). The C part is `protocall.core`. Times are seconds (Lua
-- numbers, fractions allowed) and sizes bytes; loading and decoding return
-- nil, err on bad input (it is expected there), everything else raises on
-- misuse. The modules past schemas, messages and the binary codec load on
-- first use of one of their names: `pairs(pc)` lists every name under Lua
-- 5.4 (it loads them all), under LuaJIT only those used so far.
local core = require "protocall.core"
local compat = require "protocall.compat"
local internal = require "protocall.internal"
local errors = require "protocall.errors"
local schema = require "protocall.schema"
local message = require "protocall.message"
local wire = require "protocall.wire"

-- The other modules are loaded on first use, so `require "protocall"`
-- does not load the codecs, policies, scheduler and services a program
-- may never touch: pc.<name> is the module's field of that name, read
-- (and kept in pc) on first access. A module listed without names is
-- loaded at once.
local LATER = {
  { "protocall.json", "to_json", "from_json", "json_to_wire", "wire_to_json" },
  { "protocall.text", "to_text", "from_text" },
  -- Rich error status and validation with protovalidate's rules
  { "protocall.status", "status_details_bin" },
  { "protocall.validate", "validate", "check" },
  -- FFI struct messages
  { "protocall.ffi.struct", "ffi", "to_message" },
  -- Call policies and the scheduler
  { "protocall.call.policy", "Retry", "ExponentialTimeout", "Throttle", "DEFAULT", "if_transient_error",
    "if_status" },
  { "protocall.call.callable", "wrap_method" },
  { "protocall.sched", "spawn", "run", "step", "poll_fds", "sleep", "now" },
  -- Services
  { "protocall.transport.grpc", "grpc" },
  { "protocall.transport.host" }, -- registers the host transports of protocall.h
  { "protocall.rpc.server", "server" },
  { "protocall.rpc.inproc", "inproc" },
  { "protocall.rpc.listen", "listen" },
  { "protocall.rpc.client", "client" },
  { "protocall.rpc.health", "health" },
  -- HTTP/JSON transcoding by google.api.http rules (http/)
  { "protocall.http.transcode", "transcoder" },
}

local M = {}

--- The library's version string ("0.1.0").
M.VERSION = core.VERSION
--- pc.codes: the canonical gRPC status codes by name and by number
-- (grpc/grpc doc/statuscodes.md): `pc.codes.UNAVAILABLE == 14`,
-- `pc.codes[14] == "UNAVAILABLE"`.
M.codes = internal.codes

-- Schemas (lua/protocall/schema/init.lua)
M.pool, M.load, M.load_file, M.load_descriptor_set = schema.pool, schema.load, schema.load_file,
  schema.load_descriptor_set
M.service, M.file, M.file_descriptor, M.builtin_source = schema.service, schema.file,
  schema.file_descriptor, schema.builtin_source

-- pc.message, pc.enum, pc.extend, pc.type and pc.fields are the default
-- pool's: each is bound to the pool when it becomes the default.
local function bind_pool(fns)
  M.message, M.enum, M.extend, M.type, M.fields = fns.message, fns.enum, fns.extend, fns.type, fns.fields
end
bind_pool(core.pool_functions(schema.default_pool()))

--- pc.set_default_pool(pool): makes `pool` (a protocall.Pool: pc.pool(),
-- or a host's pool, protocall_setdefaultpool) the one pc.type,
-- pc.message, pc.enum, pc.extend, pc.fields and every function taking
-- `pool =` use by default in this state. Functions copied into locals
-- before the call keep the pool they had. Raises on a non-Pool.
function M.set_default_pool(pool)
  local fns = schema.set_default_pool(pool)
  if not fns then internal.argerror("set_default_pool", "protocall.Pool expected, got " .. type(pool), 2) end
  bind_pool(fns)
end

-- Messages (message.lua) and their codecs (wire.lua, json.lua, text.lua)
M.has, M.clear, M.which_oneof, M.type_of = message.has, message.clear, message.which_oneof, message.type_of
M.clone, M.merge, M.to_table = message.clone, message.merge, message.to_table
M.get_extension, M.set_extension = message.get_extension, message.set_extension
M.pairs, M.ipairs = message.pairs, message.ipairs
M.encode, M.decode, M.is_initialized = wire.encode, wire.decode, wire.is_initialized
M.Error, M.RetryError, M.HttpRuleError = errors.Error, errors.RetryError, errors.HttpRuleError

-- Under LuaJIT the functions that take a message take a pc.ffi struct too
-- (ffi/struct.lua): these are wrapped, now or when first read.
local WRAPPED = {}
for _, name in ipairs { "encode", "decode", "has", "which_oneof", "to_table", "to_json", "to_text",
                        "is_initialized", "clear", "merge", "from_json", "from_text", "pairs",
                        "type_of", "clone" } do
  WRAPPED[name] = true
end
local wrap = compat.luajit and require("protocall.ffi.struct").wrap
if wrap then
  for name in pairs(WRAPPED) do
    if M[name] then M[name] = wrap(name, M[name]) end
  end
end

local later = {} -- pc name -> its module
for _, names in ipairs(LATER) do
  if names[2] == nil then require(names[1]) end
  for i = 2, #names do later[names[i]] = names[1] end
end

-- require and the global table as they are now: a program that later
-- removes the global `require` (a sandbox) still gets the modules, whose
-- own chunks see `require` while they load.
local require, G, rawget, rawset, pcall, next, error = require, _G, rawget, rawset, pcall, next, error

local function load_module(module)
  if rawget(G, "require") ~= nil then return require(module) end
  G.require = require
  local ok, mod = pcall(require, module)
  G.require = nil
  if not ok then error(mod, 0) end
  return mod
end

local function index(t, name)
  local module = later[name]
  if module == nil then return nil end
  local v = load_module(module)[name]
  if wrap and WRAPPED[name] then v = wrap(name, v) end
  rawset(t, name, v)
  return v
end

setmetatable(M, {
  __index = index,
  -- pairs(pc) under Lua 5.4 loads the modules not loaded yet, so it lists
  -- every name (LuaJIT has no __pairs: there it lists the names loaded).
  __pairs = function(t)
    for name in next, later do
      if rawget(t, name) == nil then index(t, name) end
    end
    return next, t, nil
  end,
})

return M
