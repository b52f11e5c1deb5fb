-- wt.Waiter (spec/fixtures/protos/gateway/waiter.proto) in Lua, or a
-- gateway in front of it in this process (the handlers of `protocall
-- gateway`, lua/protocall/cli/gateway.lua, under the runtime running this
-- script): the cancellation specs of spec/gateway_cancel_spec.lua.
--
--     PC_PID=$$ lua5.4 spec/cancel_gateway.lua upstream
--     PC_PID=$$ lua5.4 spec/cancel_gateway.lua gateway UPSTREAM_PORT
--
-- Prints "PORT PID" (PID from env PC_PID) and serves until killed, or
-- PC_SERVER_LIFETIME seconds (120 unless set).
local pc = require "protocall"

local f = assert(io.open("spec/fixtures/protos/gateway/waiter.proto"))
local pool = pc.pool()
assert(pool:load(f:read("a"), { name = "gateway/waiter.proto" }))
f:close()

local listener
if arg[1] == "upstream" then
  local state = {}
  -- Runs job `job` for its ticks (a tenth of a second each, `each(i)` then),
  -- noting its state; a cancelled call (ctx:cancelled(), or a send that
  -- failed) ends it "cancelled".
  local function run(job, ctx, each)
    local id = job.id
    state[id] = "running"
    for i = 1, job.ticks do
      if ctx:cancelled() or (each and not pcall(each, i)) then
        state[id] = "cancelled"
        error(pc.Error { code = "CANCELLED", message = "cancelled" })
      end
      ctx.sleep(0.1)
    end
    state[id] = ctx:cancelled() and "cancelled" or "done"
  end
  local server = pc.server({ ["wt.Waiter"] = {
    Hold = function(job, ctx)
      run(job, ctx)
      return { id = job.id, state = state[job.id] }
    end,
    Watch = function(job, ctx)
      run(job, ctx, function() ctx.send { id = job.id, state = "running" } end)
    end,
    Gather = function(ctx)
      local job = assert(ctx.recv())
      while ctx.recv() do end
      run(job, ctx)
      return { id = job.id, state = state[job.id] }
    end,
    Chat = function(ctx)
      local job = assert(ctx.recv())
      run(job, ctx, function() ctx.send { id = job.id, state = "running" } end)
    end,
    State = function(job) return { id = job.id, state = state[job.id] } end,
  } }, { pool = pool })
  listener = pc.listen(server, "127.0.0.1:0", { rest = true })
else
  local gateway = require "protocall.cli.gateway"
  local server = gateway.gateway_server(pool, pc.grpc("http://127.0.0.1:" .. assert(arg[2])), { "wt.Waiter" })
  listener = pc.listen(server, "127.0.0.1:0", { rest = true })
end
require("serve_listener")(listener)
