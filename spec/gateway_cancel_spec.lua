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

-- `protocall gateway -unbound -timeout` in front of wt.Waiter, its schema
-- without google.api.http options (waiter.proto less them): -unbound's
-- POST /wt.Waiter/Method is also Connect's path. A Connect unary call
-- there (application/json) stays Connect's for a unary method; a
-- streaming one, which Connect's unary protocol cannot call, goes to the
-- REST route. -timeout bounds every call forwarded that comes without a
-- deadline of its own, whatever its protocol (the upstream's handler sees
-- it cancelled); one with its own keeps it.
describe("protocall gateway -unbound -timeout", function()
  local upstream, gw, dir
  setup(function()
    upstream = start("upstream")
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir)))
    local text = assert(io.open("spec/fixtures/protos/gateway/waiter.proto")):read("a")
    write(dir .. "/waiter.proto", (text:gsub("\n[^\n]*google%.api[^\n]*", "")))
    gw = G.start_gateway(BIN, upstream.port, "-I " .. q(dir) .. " -proto waiter.proto -unbound -timeout 1"
      .. " -print-routes -cors https://app.example -cors-expose x-id -cors-expose Grpc-Metadata-X-Id", nil, true)
  end)
  teardown(function()
    helper.stop(gw)
    helper.stop(upstream)
    if gw then os.remove(gw.log) end
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  -- A Connect unary JSON POST of `body` to wt.Waiter/`method` with `headers`.
  local function connect(method, body, headers)
    local h = { "Content-Type: application/json" }
    for _, v in ipairs(headers or {}) do h[#h + 1] = v end
    return G.request(gw, "/wt.Waiter/" .. method, { body = body, headers = h })
  end

  -- The state job `id` ends in, polled through the gateway (up to 10 s).
  local function ended(id)
    local _, last = G.eventually(10, function()
      local code, body = connect("State", '{"id":"' .. id .. '"}')
      assert(code == 200, body)
      local s = body:match('"state":"(%a+)"')
      return s ~= "running", s
    end)
    return last
  end

  it("prints its -unbound routes, the gateway's reflection services left out", function()
    local log = assert(io.open(gw.log)):read("a")
    assert.truthy(log:find("protocall gateway: 5 REST routes:\n  POST /wt.Waiter/Hold -> wt.Waiter.Hold (-unbound)\n",
      1, true), log)
    assert.is_nil(log:find("reflection", log:find("REST routes", 1, true), true), log)
  end)

  it("serves a streaming method's Connect-looking JSON POST by its REST route", function()
    local code, body = connect("Watch", '{"id":"w1","ticks":3}')
    assert.are.equal(200, code, body)
    assert.are.equal(('{"result":{"id":"w1","state":"running"}}\n'):rep(3), body)
    code, body = connect("Gather", '{"id":"g1","ticks":1}\n{"id":"g2"}')
    assert.are.equal(200, code, body)
    assert.are.equal('{"id":"g1","state":"done"}', body)
    -- application/proto is no REST body: Connect's 501 stays
    code, body = G.request(gw, "/wt.Waiter/Watch", { body = "\10\2w2",
      headers = { "Content-Type: application/proto" } })
    assert.are.equal(501, code, body)
  end)

  it("bounds a call without a deadline of its own by -timeout, in every protocol", function()
    -- Connect unary (a unary method's stays Connect's: its error JSON)
    local code, body = connect("Hold", job("t1"))
    assert.are.equal(504, code, body)
    assert.are.equal('{"code":"deadline_exceeded","message":"deadline exceeded"}', body)
    assert.are.equal("cancelled", ended("t1"))
    -- REST (no content type)
    code, body = G.request(gw, "/wt.Waiter/Hold", { body = job("t2"), headers = { "Content-Type:" } })
    assert.are.equal(504, code, body)
    assert.are.equal('{"code":4,"message":"deadline exceeded","details":[]}', body)
    assert.are.equal("cancelled", ended("t2"))
    -- gRPC
    local out = R.capture(BIN .. " call -plaintext " .. SCHEMA .. " -d " .. q(job("t3")) .. " 127.0.0.1:" .. gw.port
      .. " wt.Waiter/Hold 2>&1")
    assert.matches("DEADLINE_EXCEEDED", out, 1, true)
    assert.are.equal("cancelled", ended("t3"))
    -- a deadline of its own, longer than -timeout, is kept
    code, body = connect("Hold", '{"id":"t4","ticks":15}', { "Connect-Timeout-Ms: 20000" })
    assert.are.equal(200, code, body)
    assert.are.equal('{"id":"t4","state":"done"}', body)
  end)

  it("exposes the -cors-expose headers to an allowed origin's scripts", function()
    local code, body, h = connect("State", '{"id":"t4"}', { "Origin: https://app.example" })
    assert.are.equal(200, code, body)
    -- x-id as each protocol carries it; Grpc-Metadata-X-Id, given with its
    -- prefix, is the expansion's name already (once, whatever its case)
    assert.matches(", x%-id, Trailer%-x%-id, Grpc%-Metadata%-x%-id, Grpc%-Trailer%-x%-id$",
      h["access-control-expose-headers"])
  end)

  it("prints 0 REST routes, no colon, for a schema without rules and without -unbound", function()
    local g = G.start_gateway(BIN, upstream.port, "-I " .. q(dir) .. " -proto waiter.proto -print-routes", nil, true)
    local log
    G.eventually(5, function()
      log = assert(io.open(g.log)):read("a")
      return log:find("REST routes", 1, true) ~= nil
    end)
    helper.stop(g)
    os.remove(g.log)
    assert.truthy(log:find("\nprotocall gateway: 0 REST routes\n", 1, true), log)
  end)

  it("refuses -cors-expose without -cors, and a bad name, as usage errors", function()
    local out = R.capture(BIN .. " gateway -listen 127.0.0.1:0 -cors-expose x-id 127.0.0.1:1 2>&1; echo rc=$?")
    assert.matches("protocall gateway: -cors-expose: with -cors\n", out, 1, true)
    assert.matches("rc=2", out, 1, true)
    out = R.capture(BIN .. " gateway -listen 127.0.0.1:0 -cors '*' -cors-expose 'a b' 127.0.0.1:1 2>&1; echo rc=$?")
    assert.matches("protocall gateway: -cors-expose 'a b': must be a header name\n", out, 1, true)
    assert.matches("rc=2", out, 1, true)
    -- a bad -H (the reflection calls' metadata) with -proto too, before it
    -- listens (the start's reflection check read it once serving, and ended
    -- the gateway)
    out = R.capture("timeout 10 " .. BIN .. " gateway -listen 127.0.0.1:0 -plaintext -H badheader -I " .. q(dir)
      .. " -proto waiter.proto 127.0.0.1:1 2>&1; echo rc=$?")
    assert.matches("protocall gateway: -H 'badheader': 'key: value' expected", out, 1, true)
    assert.matches("rc=2", out, 1, true)
    assert.is_nil(out:find("listening on", 1, true), out)
    -- (its control characters not echoed: a terminal's escapes)
    out = R.capture("timeout 10 " .. BIN .. " gateway -listen 127.0.0.1:0 -plaintext -H \"$(printf 'x-a\\033[31m')\""
      .. " -I " .. q(dir) .. " -proto waiter.proto 127.0.0.1:1 2>&1; echo rc=$?")
    assert.matches("protocall gateway: -H 'x-a?[31m': 'key: value' expected", out, 1, true)
  end)
end)
