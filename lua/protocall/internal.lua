--- Helpers private to the modules of lua/protocall: the status code table,
-- argument errors in Lua's wording and a callable test. Not part of the
-- public table; nothing outside lua/protocall may rely on them.
local core = require "protocall.core"

local type, error, getmetatable, tostring, format = type, error, getmetatable, tostring, string.format

local M = {}

--- codes: the canonical gRPC status codes by name and by number
-- (grpc/grpc doc/statuscodes.md): codes.UNAVAILABLE == 14,
-- codes[14] == "UNAVAILABLE". The public `pc.codes` is this table.
local codes = {}
for n = 0, 16 do
  local name = core.code_name(n)
  codes[name] = n
  codes[n] = name
end
M.codes = codes

--- argerror(fname, msg, level [, arg]): raises "bad argument #arg to
-- 'fname' (msg)" (arg 1 by default) as luaL_argerror words it, at the
-- position `error(msg, level)` in the caller of argerror would give (2:
-- the caller's caller).
function M.argerror(fname, msg, level, arg)
  error(format("bad argument #%d to '%s' (%s)", arg or 1, fname, msg), level + 1)
end

--- show(v) -> tostring(v) for an error message, but "nan" for NaN (Lua
-- 5.4 prints 0/0 as the C library's "-nan").
function M.show(v)
  if v ~= v then return "nan" end
  return tostring(v)
end

--- problem | nil = compression_problem(c): what is wrong with `c` as a
-- call's compression, or nil: the transports know "gzip" and "identity"
-- (false and nil: none). The client's options and a transport's settings
-- share it.
function M.compression_problem(c)
  if c == nil or c == false or c == "gzip" or c == "identity" then return nil end
  return format("compression '%s': expected \"gzip\" or \"identity\"", tostring(c))
end

--- is_callable(v): whether v is a function or has a __call metamethod.
function M.is_callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

--- code_name(c) -> the status name of code `c` (a name or a number), or
-- nil when it is neither.
function M.code_name(c)
  local name = codes[c]
  if type(name) == "number" then return c end
  return name
end

return M
