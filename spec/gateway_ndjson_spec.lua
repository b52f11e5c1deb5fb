-- REST client streams whose body is newline-delimited JSON through
-- `protocall gateway` and through its handlers in a process of the runtime
-- under test (spec/ndjson_gateway.lua), in front of nd.Collector
-- (spec/fixtures/protos/gateway/ndjson.proto) in Lua: each line's wire
-- bytes go upstream as the transcoder wrote them (ctx.recv_bytes,
-- call:send_bytes), held packed (tc:requests_reader), so the gateway's
-- memory follows the body, not the count of messages; messages of every
-- kind of field arrive intact and in order, and a bad line is answered 400
-- naming it with nothing sent. Drives processes: without curl it is a
-- visible pending test (a failure when env CI is set).
local helper = require "grpc_helper"
local N = require "nginx_helper"
local R = require "runtime"
local _, SANITIZED = R.module_build() -- (ASan: resident memory is not the program's alone)
local G = require "gateway_cases"

local q, write = N.quote, N.write

if not N.exists("/usr/bin/curl") then
  describe("NDJSON client streams through the gateway", function()
    it("run", function()
      if os.getenv("CI") then error("missing (required when CI is set): curl") end
      pending("NDJSON gateway spec skipped, missing: curl")
    end)
  end)
  return
end

local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
-- the interpreter of the build under test (core_spec.lua's choice)
local LUA = R.luajit and "luajit" or os.getenv("PROTOCALL_BIN") or "lua5.4"

-- spec/ndjson_gateway.lua with `args` (as grpc_helper.spawn_command starts it).
local function start(args)
  return helper.spawn_command("env LUA_PATH=" .. q(package.path) .. " LUA_CPATH=" .. q(package.cpath)
    .. " sh -c 'PC_PID=$$ exec " .. LUA .. " spec/ndjson_gateway.lua " .. args .. "'", "ndjson_gateway.lua")
end

-- The resident memory of process `pid`, in KiB.
local function rss(pid)
  return assert(tonumber((R.capture("ps -o rss= -p " .. pid))), "no process " .. pid)
end

-- `G.request` of a body from a file (curl --data-binary @file).
local function post(server, path, body)
  return G.request(server, path, { body = body })
end

-- The stream calls the upstream served (asked through `gateway`).
local function served(gateway)
  local code, body = G.request(gateway, "/v1/served")
  assert(code == 200, body)
  return tonumber(body:match('"count":"(%d+)"') or (body == "{}" and 0))
end

-- messages with every kind of field, a blank line between two
local LINES = '{"name":"a","n":"12","tags":["x","y"],"colour":"RED","child":{"name":"c","x":1.5},'
  .. '"data":"AAEC","x":-2.25,"counts":{"k":3},"packed":[-1,2]}\n{}\n\n{"name":"b","n":-7,"colour":2}\n'
local ITEMS = { '{"name":"a","n":"12","tags":["x","y"],"colour":"RED","child":{"name":"c","x":1.5},'
  .. '"data":"AAEC","x":-2.25,"counts":{"k":3},"packed":[-1,2]}', "{}", '{"name":"b","n":"-7","colour":"BLUE"}' }

describe("NDJSON client streams through the gateway", function()
  local upstream, gateways
  setup(function()
    upstream = start("upstream")
    gateways = {
      { "protocall gateway", G.start_gateway(BIN, upstream.port,
        "-I spec/fixtures/protos -proto gateway/ndjson.proto") },
      { "protocall gateway -validate", G.start_gateway(BIN, upstream.port,
        "-validate -I spec/fixtures/protos -proto gateway/ndjson.proto") },
      { "the gateway's handlers under " .. (R.luajit and "LuaJIT" or "Lua 5.4"), start("gateway " .. upstream.port) },
      { "the gateway's handlers with validate", start("gateway " .. upstream.port .. " validate") },
    }
  end)
  teardown(function()
    for _, g in ipairs(gateways or {}) do helper.stop(g[2]) end
    helper.stop(upstream)
  end)

  it("passes each line's message upstream intact and in order (client stream and bidi)", function()
    for _, g in ipairs(gateways) do
      local code, body = post(g[2], "/v1/items:gather", LINES)
      assert.are.same({ g[1], 200, '{"items":[' .. table.concat(ITEMS, ",") .. '],"count":"3"}' },
        { g[1], code, body })
      code, body = post(g[2], "/v1/items:echo", LINES)
      assert.are.same({ g[1], 200, '{"result":' .. table.concat(ITEMS, "}\n{\"result\":") .. "}\n" },
        { g[1], code, body })
    end
  end)

  it("answers a bad line 400 naming it, nothing reaching the upstream; -validate checks each line's rules", function()
    for _, g in ipairs(gateways) do
      local before = served(gateways[1][2])
      local code, body = post(g[2], "/v1/items:gather", '{"name":"a"}\n\n{"n":"x"}\n')
      assert.are.same({ g[1], 400, '{"code":3,"message":"line 3: body: $.n: invalid integer \\"x\\" at offset 5",'
        .. '"details":[]}' }, { g[1], code, body })
      local long = '{"name":"a"}\n{"name":"' .. ("z"):rep(21) .. '"}'
      code, body = post(g[2], "/v1/items:count", long)
      if g[1]:find("validate") then
        assert.are.same({ g[1], 400, '{"code":3,"message":"line 2: validation failed: name: must be at most 20 '
          .. 'characters [string.max_len]","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest",'
          .. '"fieldViolations":[{"field":"name","description":"must be at most 20 characters [string.max_len]",'
          .. '"reason":"string.max_len"}]}]}' }, { g[1], code, body })
        assert.are.equal(before, served(gateways[1][2]))
      else
        assert.are.same({ g[1], 200, '{"count":"2"}' }, { g[1], code, body })
        assert.are.equal(before + 1, served(gateways[1][2]))
      end
    end
  end)

  it("-validate refuses gRPC, gRPC-Web and Connect requests breaking their rules, in each protocol's form", function()
    local long = ("z"):rep(21)
    local WHY = "validation failed: name: must be at most 20 characters [string.max_len]"
    -- protocall call's words for the refusal, its google.rpc.BadRequest detail included
    local REFUSED = "ERROR: code = INVALID_ARGUMENT, message = " .. WHY .. '\n  details:\n    field_violations {\n'
      .. '      field: "name"\n      description: "must be at most 20 characters [string.max_len]"\n'
      .. '      reason: "string.max_len"\n    }\n'
    -- protocall call over `protocol`: stdout, stderr, exit status
    local function call(g, protocol, method, data)
      local errfile = os.tmpname()
      local out, _, code = R.capture(BIN .. " call -plaintext -I spec/fixtures/protos -proto gateway/ndjson.proto"
        .. " -protocol " .. protocol .. " -d " .. q(data) .. " 127.0.0.1:" .. g[2].port .. " nd.Collector/" .. method
        .. " 2>" .. q(errfile))
      local err = N.read(errfile)
      os.remove(errfile)
      return out, err, code
    end
    for _, g in ipairs(gateways) do
      local checks = g[1]:find("validate") ~= nil
      for _, protocol in ipairs { "grpc", "grpcweb", "connect" } do
        local name = g[1] .. " " .. protocol
        -- unary: Served answers only when the call reaches it (the upstream checks nothing)
        local out, err, code = call(g, protocol, "Served", '{"name":"ok"}')
        assert.are.same({ name, 0 }, { name, code }, err)
        assert.truthy(out:find('"count"'), out)
        _, err, code = call(g, protocol, "Served", '{"name":"' .. long .. '"}')
        if checks then
          assert.are.same({ name, 64 + 3, REFUSED }, { name, code, err })
        else
          assert.are.same({ name, 0 }, { name, code }, err)
        end
        -- a client stream: each request checked as it is read (the second breaks the rule)
        local before = served(gateways[1][2])
        _, err, code = call(g, protocol, "Gather", '{"name":"a"} {"name":"' .. long .. '"}')
        if checks then
          assert.are.same({ name, 64 + 3, REFUSED }, { name, code, err })
        else
          assert.are.same({ name, 0 }, { name, code }, err)
          assert.are.equal(before + 1, served(gateways[1][2]))
        end
        -- bidirectional: the refusal, not the cancel of the upstream call it causes
        _, err, code = call(g, protocol, "Echo", '{"name":"a"} {"name":"' .. long .. '"}')
        if checks then
          assert.are.same({ name, 64 + 3, REFUSED }, { name, code, err })
        else
          assert.are.same({ name, 0 }, { name, code }, err)
        end
      end
      -- the refusal's google.rpc.BadRequest detail: Connect's error JSON (HTTP 400), gRPC-Web's trailers
      local code, body = G.request(g[2], "/nd.Collector/Served",
        { body = '{"name":"' .. long .. '"}', headers = { "Content-Type: application/json" } })
      local web_code, _, web_headers = G.request(g[2], "/nd.Collector/Served",
        { body = "\0\0\0\0\23\10\21" .. long, headers = { "Content-Type: application/grpc-web+proto" } })
      if checks then
        assert.are.same({ g[1], 400, '{"code":"invalid_argument","message":"' .. WHY .. '","details":[{"type":'
          .. '"google.rpc.BadRequest","value":"@"}]}' }, { g[1], code, (body:gsub('"value":"[^"]+"', '"value":"@"')) })
        -- (trailers-only: the status in the head)
        assert.are.same({ 200, "3", WHY }, { web_code, web_headers["grpc-status"], web_headers["grpc-message"] })
        assert.truthy(web_headers["grpc-status-details-bin"])
      else
        assert.are.same({ g[1], 200, 200 }, { g[1], code, web_code })
      end
    end
  end)

  it("holds a body of a million messages in a few times its size, not a message object per line", function()
    local file = os.tmpname()
    -- 3 MB (ASan: a tenth, which its slower checks of each line end in time; its memory not asserted)
    write(file, ("{}\n"):rep(SANITIZED and 100000 or 1000000))
    for _, g in ipairs(gateways) do
      local before = rss(g[2].pid)
      local code = (R.capture("curl -s -m 120 -o /dev/null -w '%{http_code}' --data-binary @" .. q(file) .. " "
        .. q(g[2].url .. "/v1/items:count")))
      local grown = rss(g[2].pid) - before
      assert.are.same({ g[1], "200" }, { g[1], code })
      -- a message decoded and encoded again per line grew it by 35 MB (LuaJIT) to 125 MB (the
      -- CLI), more with validate (a message made per line to check it, the collector unpaced);
      -- not under ASan, which keeps freed memory in quarantine (256 MB by default)
      if not SANITIZED then
        assert.is_true(grown < 8 * 3000, g[1] .. ": resident memory grew by " .. grown .. " KiB")
      end
    end
    os.remove(file)
  end)
end)

describe("ctx.recv_bytes of a REST client stream (pc.listen rest)", function()
  it("hands each line's bytes on, absent under validate = true (unless rest's transcoder validates: it checked"
    .. " the lines) or an interceptor that wraps ctx.recv", function()
    local cases = {
      { "", 200, '{"items":[{"name":"a"},{"name":"b","n":"2"}],"count":"1"}' },
      { "look", 200, '{"items":[{"name":"a"},{"name":"b","n":"2"}],"count":"1"}' },
      { "wrap", 200, '{"items":[{"name":"a!"},{"name":"b!","n":"2"}]}' },
      { "proxy", 200, '{"items":[{"name":"a!"},{"name":"b!","n":"2"}]}' },
      { "validate", 200, '{"items":[{"name":"a"},{"name":"b","n":"2"}]}' },
      { "checked", 200, '{"items":[{"name":"a"},{"name":"b","n":"2"}],"count":"1"}' },
    }
    for _, case in ipairs(cases) do
      local probe = start("probe " .. case[1])
      local ok, err = pcall(function()
        local code, body = post(probe, "/v1/items:gather", '{"name":"a"}\n{"name":"b","n":2}')
        assert.are.same({ case[1], case[2], case[3] }, { case[1], code, body })
        if case[1] == "validate" or case[1] == "checked" then
          code, body = post(probe, "/v1/items:gather", '{"name":"a"}\n{"name":"' .. ("z"):rep(21) .. '"}')
          -- (the transcoder's refusal names the line; the server's comes as the handler reads it)
          assert.are.same({ 400, '{"code":3,"message":"' .. (case[1] == "checked" and "line 2: " or "")
            .. 'validation failed: name: must be at most 20 characters '
            .. '[string.max_len]","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest",'
            .. '"fieldViolations":[{"field":"name","description":"must be at most 20 characters [string.max_len]",'
            .. '"reason":"string.max_len"}]}]}' }, { code, body })
        end
      end)
      helper.stop(probe)
      if not ok then error(err, 0) end
    end
  end)
end)
