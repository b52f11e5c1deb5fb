-- nd.Collector (spec/fixtures/protos/gateway/ndjson.proto) in Lua, or a
-- gateway in front of it in this process (the handlers of `protocall
-- gateway`, lua/protocall/cli/gateway.lua, under the runtime running this
-- script): the NDJSON client-stream specs of spec/rest_gateway_spec.lua.
--
--     PC_PID=$$ lua5.4 spec/ndjson_gateway.lua upstream
--     PC_PID=$$ lua5.4 spec/ndjson_gateway.lua gateway UPSTREAM_PORT [validate]
--     PC_PID=$$ lua5.4 spec/ndjson_gateway.lua probe [validate | checked | wrap | proxy | look]
--
-- `probe`: nd.Collector's Gather served with pc.listen's `rest`, reading
-- ctx.recv_bytes when the ctx has it (Items.count 1, else 0), under the
-- server's `validate = true` (`checked`: `rest`'s `validate` too), an
-- interceptor that wraps ctx.recv (adding
-- "!" to each name), one that does so in a ctx of its own whose other
-- fields are the original's (__index), or one that only looks.
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
elseif arg[1] == "probe" then
  local Item = pool:type("nd.Item")
  local opts = { pool = pool, validate = (arg[2] == "validate" or arg[2] == "checked") or nil }
  if arg[2] == "wrap" or arg[2] == "look" or arg[2] == "proxy" then
    opts.interceptors = { function(call, nxt)
      local recv = call.ctx.recv
      local function marked()
        local m = recv()
        if m then m.name = m.name .. "!" end
        return m
      end
      if arg[2] == "wrap" then
        call.ctx.recv = marked
      elseif arg[2] == "proxy" then -- a ctx of its own, the rest read through the original
        call.ctx = setmetatable({ recv = marked }, { __index = call.ctx })
      end
      return nxt(call)
    end }
  end
  local server = pc.server({ ["nd.Collector"] = {
    Gather = function(ctx)
      local items, recv_bytes = {}, ctx.recv_bytes
      while true do
        local item
        if recv_bytes then
          local bytes = recv_bytes()
          item = bytes and assert(pc.decode(Item, bytes))
        else
          item = ctx.recv()
        end
        if not item then break end
        items[#items + 1] = item
      end
      return { items = items, count = recv_bytes and 1 or 0 }
    end,
  } }, opts)
  listener = pc.listen(server, "127.0.0.1:0", { rest = arg[2] ~= "checked" or { validate = true } })
else
  local gateway = require "protocall.cli.gateway"
  local validate = arg[3] == "validate" or nil
  local server = gateway.gateway_server(pool, pc.grpc("http://127.0.0.1:" .. assert(arg[2])), { "nd.Collector" },
    validate)
  listener = pc.listen(server, "127.0.0.1:0", { rest = { validate = validate } })
end
require("serve_listener")(listener)
