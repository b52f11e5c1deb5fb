--- protocall: protobuf messages and RPC call policies for Lua.
-- `require "protocall"` returns this table, assembled here from the
-- modules of lua/protocall (lua/README.md maps them); each function's
-- contract is the doc comment where it is defined (doc/reference.md
-- gathers them). The C part is `protocall.core`. Times are seconds (Lua
-- numbers, fractions allowed) and sizes bytes; loading and decoding return
-- nil, err on bad input (it is expected there), everything else raises on
-- misuse.
local core = require "protocall.core"
local compat = require "protocall.compat"
local internal = require "protocall.internal"
local errors = require "protocall.errors"
local schema = require "protocall.schema"
local message = require "protocall.message"
local wire = require "protocall.wire"
local json = require "protocall.json"
local text = require "protocall.text"
local status = require "protocall.status"
local validate = require "protocall.validate"
local struct = require "protocall.ffi.struct"
local policy = require "protocall.call.policy"
local callable = require "protocall.call.callable"
local sched = require "protocall.sched"
local grpc = require "protocall.transport.grpc"
require "protocall.transport.host" -- registers the host transports of protocall.h
local rpc_server = require "protocall.rpc.server"
local inproc = require "protocall.rpc.inproc"
local listen = require "protocall.rpc.listen"
local client = require "protocall.rpc.client"
local health = require "protocall.rpc.health"
local transcode = require "protocall.http.transcode"

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
M.to_json, M.from_json = json.to_json, json.from_json
M.to_text, M.from_text = text.to_text, text.from_text
-- Validation with protovalidate's rules (validate.lua)
M.validate, M.check = validate.validate, validate.check

-- FFI struct messages (ffi/struct.lua): under LuaJIT the functions that
-- take a message take a pc.ffi struct too.
M.ffi, M.to_message = struct.ffi, struct.to_message
if compat.luajit then
  for _, name in ipairs { "encode", "decode", "has", "which_oneof", "to_table", "to_json", "to_text",
                          "is_initialized", "clear", "merge", "from_json", "from_text", "pairs",
                          "type_of", "clone" } do
    M[name] = struct.wrap(name, M[name])
  end
end

-- Call policies (errors.lua, status.lua, call/)
M.Error, M.RetryError = errors.Error, errors.RetryError
M.status_details_bin = status.status_details_bin
M.Retry, M.ExponentialTimeout, M.Throttle, M.DEFAULT = policy.Retry, policy.ExponentialTimeout,
  policy.Throttle, policy.DEFAULT
M.if_transient_error, M.if_status = policy.if_transient_error, policy.if_status
M.wrap_method = callable.wrap_method

-- The scheduler (sched.lua)
M.spawn, M.run, M.step, M.poll_fds = sched.spawn, sched.run, sched.step, sched.poll_fds
M.sleep, M.now = sched.sleep, sched.now

-- Services (rpc/, transport/)
M.server, M.inproc, M.listen, M.health = rpc_server.server, inproc.inproc, listen.listen, health.health
M.client = client.client
M.grpc = grpc.grpc
-- HTTP/JSON transcoding by google.api.http rules (http/)
M.transcoder = transcode.transcoder

return M
