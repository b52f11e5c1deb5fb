-- nd.Collector (spec/fixtures/protos/gateway/ndjson.proto) in Lua, or a
-- gateway in front of it in this process (the handlers of `protocall
-- gateway`, lua/protocall/cli/gateway.lua, under the runtime running this
-- script): the NDJSON client-stream specs of spec/rest_gateway_spec.lua.
--
--     PC_PID=$$ lua5.4 spec/ndjson_gateway.lua upstream
--     PC_PID=$$ lua5.4 spec/ndjson_gateway.lua gateway UPSTREAM_PORT [validate]
--
-- Prints "PORT PID" (PID from env PC_PID) and serves until killed, or
-- PC_SERVER_LIFETIME seconds (120 unless set).
local pc = require "protocall"

local f = assert(io.open("spec/fixtures/protos/gateway/ndjson.proto"))
local pool = pc.pool()
assert(pool:load(f:read("a"), { name = "gateway/ndjson.proto" }))
f:close()

local listener
if arg[1] == "upstream" then
  local served = 0
  local function stream(fn)
    return function(ctx)
      served = served + 1
      return fn(ctx)
    end
  end
  local server = pc.server({ ["nd.Collector"] = {
    Gather = stream(function(ctx)
      local items = {}
      for item in ctx.recv do items[#items + 1] = item end
      return { items = items, count = #items }
    end),
    Count = stream(function(ctx)
      local n = 0
      while ctx.recv() do n = n + 1 end
      return { count = n }
    end),
    Echo = stream(function(ctx)
      for item in ctx.recv do ctx.send(item) end
    end),
    Served = function() return { count = served } end,
  } }, { pool = pool })
  listener = pc.listen(server, "127.0.0.1:0")
else
  local gateway = require "protocall.cli.gateway"
  local server = gateway.gateway_server(pool, pc.grpc("http://127.0.0.1:" .. assert(arg[2])), { "nd.Collector" })
  listener = pc.listen(server, "127.0.0.1:0", { rest = { validate = arg[3] == "validate" or nil } })
end
require("serve_listener")(listener)
