-- A client that goes away mid-call cancels the gateway's upstream call:
-- `protocall gateway` and its handlers in a process of the runtime under
-- test (spec/cancel_gateway.lua) in front of wt.Waiter
-- (spec/fixtures/protos/gateway/waiter.proto) in Lua, whose methods of the
-- four shapes run for a few seconds and note whether they saw their call
-- cancelled. Each client (curl for REST, Connect and gRPC-Web, `protocall
-- call` for gRPC) leaves after a second (killed, or its deadline); the
-- upstream's handler must see ctx:cancelled() (RST_STREAM CANCEL) rather
-- than run to its end. Drives processes: without curl it is a visible
-- pending test (a failure when env CI is set).
local helper = require "grpc_helper"
local N = require "nginx_helper"
local R = require "runtime"
local G = require "gateway_cases"

local q, write = N.quote, N.write

if not N.exists("/usr/bin/curl") then
  describe("the gateway cancels the upstream call of a client gone", function()
    it("run", function()
      if os.getenv("CI") then error("missing (required when CI is set): curl") end
      pending("gateway cancellation spec skipped, missing: curl")
    end)
  end)
  return
end

local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
-- the interpreter of the build under test (core_spec.lua's choice)
local LUA = R.luajit and "luajit" or os.getenv("PROTOCALL_BIN") or "lua5.4"
local SCHEMA = "-I spec/fixtures/protos -proto gateway/waiter.proto"
-- tenths of a second a call runs when nothing cancels it: well past the
-- client's second, and within the wait for its state below
local TICKS = 50

-- spec/cancel_gateway.lua with `args` (as grpc_helper.spawn_command starts it).
local function start(args)
  return helper.spawn_command("env LUA_PATH=" .. q(package.path) .. " LUA_CPATH=" .. q(package.cpath)
    .. " sh -c 'PC_PID=$$ exec " .. LUA .. " spec/cancel_gateway.lua " .. args .. "'", "cancel_gateway.lua")
end

-- The state the upstream noted for job `id` ("running", "done",
-- "cancelled", or nil: not seen), asked through `gateway` (on the
-- connection the job's call went up on, so a call sent before is seen).
local function state(gateway, id)
  local code, body = G.request(gateway, "/v1/state/" .. id)
  assert(code == 200, body)
  return body:match('"state":"(%a+)"')
end

-- The state job `id` ends in: polled while it runs (up to 10 s).
local function final_state(gateway, id)
  local _, last = G.eventually(10, function()
    local s = state(gateway, id)
    return s ~= "running", s
  end)
  return last
end

-- A job's JSON.
local function job(id) return '{"id":"' .. id .. '","ticks":' .. TICKS .. "}" end

-- `json` in an envelope of gRPC-Web and Connect streaming (flags 0, length).
local function enveloped(json)
  local n = #json
  return "\0" .. string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256) .. json
end

-- curl sending `body` (nil: none) to `gateway`'s `path`, leaving after a
-- second (-m 1: it closes the connection), with `args` (method, headers).
local function curl_leaving(gateway, path, body, args)
  local cmd = "curl -s -N -m 1 -o /dev/null " .. (args or "")
  local file
  if body then
    file = os.tmpname()
    write(file, body)
    cmd = cmd .. " --data-binary @" .. q(file)
  end
  R.capture(cmd .. " " .. q(gateway.url .. path))
  if file then os.remove(file) end
end

-- `protocall call` of `method` with `body` through `gateway`: killed after a
-- second, or with `deadline` its own -max-time of a second.
local function grpc_leaving(gateway, method, body, deadline)
  R.capture((deadline and "" or "timeout 1 ") .. BIN .. " call -plaintext " .. SCHEMA
    .. (deadline and " -max-time 1" or "") .. " -d " .. q(body) .. " 127.0.0.1:" .. gateway.port
    .. " wt.Waiter/" .. method .. " 2>&1")
end

-- Each way of leaving: a name and fn(gateway, id) that starts job `id`
-- and leaves it.
local LEAVING = {
  { "REST unary", function(g, id) curl_leaving(g, "/v1/hold/" .. id, job(id), "-X PUT") end },
  { "REST server stream", function(g, id) curl_leaving(g, "/v1/watch/" .. id .. "?ticks=" .. TICKS) end },
  { "REST client stream", function(g, id) curl_leaving(g, "/v1/gather", job(id)) end },
  { "REST bidi stream", function(g, id) curl_leaving(g, "/v1/chat", job(id)) end },
  { "Connect unary", function(g, id)
    curl_leaving(g, "/wt.Waiter/Hold", job(id), "-H 'content-type: application/json'")
  end },
  { "Connect server stream", function(g, id)
    curl_leaving(g, "/wt.Waiter/Watch", enveloped(job(id)), "-H 'content-type: application/connect+json'")
  end },
  { "gRPC-Web unary", function(g, id)
    curl_leaving(g, "/wt.Waiter/Hold", enveloped(job(id)), "-H 'content-type: application/grpc-web+json'")
  end },
  { "gRPC-Web server stream", function(g, id)
    curl_leaving(g, "/wt.Waiter/Watch", enveloped(job(id)), "-H 'content-type: application/grpc-web+json'")
  end },
  { "gRPC unary", function(g, id) grpc_leaving(g, "Hold", job(id)) end },
  { "gRPC server stream", function(g, id) grpc_leaving(g, "Watch", job(id)) end },
  { "gRPC client stream", function(g, id) grpc_leaving(g, "Gather", job(id)) end },
  { "gRPC bidi stream", function(g, id) grpc_leaving(g, "Chat", job(id)) end },
  { "gRPC unary, its deadline passed", function(g, id) grpc_leaving(g, "Hold", job(id), true) end },
  { "gRPC server stream, its deadline passed", function(g, id) grpc_leaving(g, "Watch", job(id), true) end },
}

describe("the gateway cancels the upstream call of a client gone", function()
  local upstream, gateways
  setup(function()
    upstream = start("upstream")
    gateways = {
      { "protocall gateway", G.start_gateway(BIN, upstream.port, SCHEMA) },
      { "the gateway's handlers under " .. (R.luajit and "LuaJIT" or "Lua 5.4"), start("gateway " .. upstream.port) },
    }
  end)
  teardown(function()
    for _, g in ipairs(gateways or {}) do helper.stop(g[2]) end
    helper.stop(upstream)
  end)

  it("cancels it for every method shape and protocol", function()
    for gi, g in ipairs(gateways) do
      for li, way in ipairs(LEAVING) do
        local id = ("j%d_%d"):format(gi, li)
        way[2](g[2], id)
        assert.are.same({ g[1], way[1], "cancelled" }, { g[1], way[1], final_state(g[2], id) })
      end
    end
  end)

  it("cancels a unary call the stalled upstream had not started: it never runs", function()
    for gi, g in ipairs(gateways) do
      local id = "stalled" .. gi
      os.execute("kill -STOP " .. upstream.pid)
      local ok, err = pcall(curl_leaving, g[2], "/v1/hold/" .. id, job(id), "-X PUT")
      os.execute("kill -CONT " .. upstream.pid)
      assert(ok, err)
      -- not seen (cancelled before its handler ran) or cancelled, never run to its end
      local s = final_state(g[2], id)
      assert.are.same({ g[1], true }, { g[1], s == nil or s == "cancelled" })
    end
  end)
end)
