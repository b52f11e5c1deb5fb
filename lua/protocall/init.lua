--- protocall: protobuf messages and RPC call policies for Lua.
-- `require "protocall"` returns this table. The C part is `protocall.core`;
-- each concern is a file under lua/protocall/ whose `install(M, core)` adds
-- its public names to this table (doc/reference.md gathers their doc
-- comments). Times are seconds (Lua numbers, fractions allowed) and sizes
-- bytes; loading and decoding return nil, err on bad input (it is expected
-- there), everything else raises on misuse.
local core = require "protocall.core"

local M = {}

--- pc.VERSION: the library's version string ("0.1.0").
M.VERSION = core.VERSION

--- pc.codes: canonical gRPC status codes by name and by number
-- (grpc/grpc doc/statuscodes.md): `pc.codes.UNAVAILABLE == 14`,
-- `pc.codes[14] == "UNAVAILABLE"`.
M.codes = {}
for n = 0, 16 do
  local name = core.code_name(n)
  M.codes[name] = n
  M.codes[n] = name
end

-- One line per concern, in dependency order.
for _, name in ipairs {
  "protocall.message",
  "protocall.call",
  "protocall.hedge",
  "protocall.wire",
  "protocall.text",
  "protocall.json",
  "protocall.status",
  "protocall.net",
  "protocall.balancer",
  "protocall.compiler",
  "protocall.service",
  "protocall.health",
  "protocall.reflection",
  "protocall.listen",
  "protocall.host",
  "protocall.ffi",
} do
  require(name).install(M, core)
end

return M
