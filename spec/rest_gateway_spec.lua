-- REST/JSON by google.api.http rules in two placements of one
-- implementation (pc.transcoder): pc.listen's `rest` option
-- (spec/gateway_library.lua serves gw.Library in Lua on one port) and
-- `protocall gateway` in front of spec/gateway_upstream.py
-- (python3-grpcio). The case table of spec/gateway_cases.lua runs through
-- both with curl (HTTP/1.1 and HTTP/2) and python's http.client as
-- clients; the gateway also proxies gRPC-Web and Connect (curl, and
-- connect-node's clients when node_modules has them) to the plain gRPC
-- upstream, trailers carried whole; hostile REST input is refused with a
-- google.rpc.Status body before anything reaches a handler. This spec
-- drives processes: without curl, protoc or python3-grpcio it is a
-- visible pending test (a failure when env CI is set).
local helper = require "grpc_helper"
local N = require "nginx_helper"
local R = require "runtime"
local G = require "gateway_cases"

local q, write = N.quote, N.write

local absent
local TOOLS = { ["/usr/bin/curl"] = "curl", ["/usr/bin/protoc"] = "protoc", ["/usr/bin/python3"] = "python3" }
for path, name in pairs(TOOLS) do
  if not N.exists(path) then absent = (absent and absent .. ", " or "") .. name end
end
if not absent and not os.execute("/usr/bin/python3 -c 'import grpc' 2>/dev/null") then
  absent = "python3-grpcio"
end
if absent then
  describe("REST gateways (pc.listen rest, protocall gateway)", function()
    it("run", function()
      if os.getenv("CI") then error("missing (required when CI is set): " .. absent) end
      pending("REST gateway spec skipped, missing: " .. absent)
    end)
  end)
  return
end

local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
-- the interpreter of the build under test (core_spec.lua's choice)
local LUA = R.luajit and "luajit" or os.getenv("PROTOCALL_BIN") or "lua5.4"

local function start_library(options)
  return helper.spawn_command("env LUA_PATH=" .. q(package.path) .. " LUA_CPATH=" .. q(package.cpath)
    .. " sh -c 'PC_PID=$$ exec " .. LUA .. " spec/gateway_library.lua \"$0\"' " .. q(options or "{}"),
    "gateway_library.lua")
end

local function start_gateway(upstream, flags)
  return G.start_gateway(BIN, upstream.port, flags or "-I spec/fixtures/protos -proto gateway/library.proto")
end

-- Runs the case table against `server` with curl over HTTP/1.1 and
-- HTTP/2 and with python's http.client; refused cases must not reach the
-- service.
local function run_cases(server)
  local before = G.calls(server)
  local refused, list = 0, {}
  for _, case in ipairs(G.CASES) do
    for _, h2 in ipairs { false, true } do
      local code, body, headers = G.request(server, case[2], { method = case.method, body = case.body,
        headers = case.headers, http2 = h2 })
      G.check(assert, case, code, body, headers, h2 and "curl, HTTP/2" or "curl, HTTP/1.1")
    end
    if case.refused then refused = refused + 1 end
    list[#list + 1] = { case[2], method = case.method, body = case.body, headers = case.headers }
  end
  for i, a in ipairs(G.pyrequests(server, list)) do
    G.check(assert, G.CASES[i], a[1], a[2], a[3], "http.client")
  end
  -- each accepted case reached the service 3 times, no refused one did
  assert.are.equal(3 * (#G.CASES - refused), G.calls(server) - before)
end

-- A Connect unary request (POST application/json|proto) for a streaming
-- method of `server` is refused UNIMPLEMENTED (HTTP 501) before the
-- method runs: its framing holds one message each way.
-- A POST to a method's own path whose content type is none of gRPC's,
-- gRPC-Web's or Connect's (none at all, text/plain) is 415 with Accept-Post
-- (connect-go's answer), not REST's 404; a path naming no method stays 404.
-- (The bodies are empty: the answer comes at once, and curl, still sending a
-- body over HTTP/2 when the stream's RST_STREAM NO_ERROR comes, fails 92.)
local function method_path_without_content_type(server)
  for _, h2 in ipairs { false, true } do
    for _, ct in ipairs { "Content-Type:", "Content-Type: text/plain" } do
      local code, body, h = G.request(server, "/gw.Library/Echo", { body = "", http2 = h2,
        headers = { ct } })
      assert.are.equal(415, code, ct .. (h2 and ", HTTP/2: " or ", HTTP/1.1: ") .. body)
      assert.are.equal("content-type must be gRPC's, gRPC-Web's or Connect's (see Accept-Post)\n", body)
      assert.matches("application/connect+json, application/proto, application/json", h["accept-post"], 1, true)
      assert.matches("^application/grpc, ", h["accept-post"])
      -- a streaming method takes no Connect unary type
      code, body, h = G.request(server, "/gw.Library/ListBooks", { body = "", http2 = h2, headers = { ct } })
      assert.are.equal(415, code, body)
      assert.matches("^application/grpc, .*, application/connect%+proto, application/connect%+json$",
        h["accept-post"])
    end
    local code = G.request(server, "/gw.Library/Nope", { body = "", http2 = h2, headers = { "Content-Type:" } })
    assert.are.equal(404, code)
    -- a Connect content type is not refused as missing (with a query the core
    -- does not route a Connect POST: REST answers it)
    code = G.request(server, "/gw.Library/Echo?x=1", { body = "", http2 = h2,
      headers = { "Content-Type: application/json" } })
    assert.are_not.equal(415, code)
  end
end

local function connect_unary_refused_for_streams(server)
  local before = G.calls(server)
  for _, c in ipairs {
    { "ListBooks", "json", '{"parent":"shelves/1","count":0}' },
    { "ListBooks", "json", '{"parent":"shelves/1","count":3}' },
    { "CreateBooks", "proto", "\10\1a" },
  } do
    local code, body, h = G.request(server, "/gw.Library/" .. c[1], { body = c[3],
      headers = { "Content-Type: application/" .. c[2], "Connect-Protocol-Version: 1" } })
    assert.are.equal(501, code, body)
    assert.are.equal("application/json", h["content-type"])
    assert.are.equal('{"code":"unimplemented","message":"gw.Library.' .. c[1] .. ' is a streaming method: '
      .. "Connect's streaming protocol (application/connect+" .. c[2] .. ') calls it"}', body)
  end
  assert.are.equal(before, G.calls(server))
end

describe("pc.listen's rest option", function()
  it("is checked at listen, naming the bad option or rule", function()
    local pc = require "protocall"
    local pool = pc.pool()
    local f = assert(io.open("spec/fixtures/protos/gateway/library.proto"))
    assert(pool:load(f:read("a"), { name = "gateway/library.proto" }))
    f:close()
    local server = pc.server({ ["gw.Library"] = { Echo = function(req) return { text = req.text } end } },
      { pool = pool })
    local function refused(rest)
      local ok, err = pcall(pc.listen, server, "127.0.0.1:0", { rest = rest })
      assert.is_false(ok)
      return (tostring(err):gsub("^[^:]*:%d+: ", ""))
    end
    assert.are.equal("pc.listen: rest: true or a table of pc.transcoder options expected, got number", refused(5))
    assert.are.equal("pc.listen: rest: unknown option 'services'", refused { services = { "gw.Library" } })
    assert.are.equal("pc.listen: rest: (timeout: positive number of seconds expected, got -1)",
      refused { timeout = -1 })
    assert.truthy(refused { http = { rules = { { selector = "gw.Library.Echo", get = "/echo/{nope}" } } } }
      :find("http rules: rule 1: gw.Library.Echo: GET /echo/{nope}: variable 'nope'", 1, true))
    -- a rule that does not fit: a pc.HttpRuleError, its fields what a caller needs to place it
    local ok, err = pcall(pc.listen, server, "127.0.0.1:0", { rest = { http = { rules = {
      { selector = "gw.Library.Echo", post = "/echo", body = "*" },
      { selector = "gw.Library.Echo", get = "/echo/{nope}" } } } } })
    assert.is_false(ok)
    assert.are.equal(pc.HttpRuleError, getmetatable(err))
    local problem = "variable 'nope': no field 'nope' in gw.EchoRequest"
    assert.are.same({ context = "pc.listen: rest", message = "http rules: rule 2: gw.Library.Echo: GET /echo/{nope}: "
      .. problem, problem = problem, method = "gw.Library.Echo", pattern = "GET /echo/{nope}", rule = 2,
      path = { "rules", 1, "get" } }, err)
    assert.are.equal("pc.listen: rest: " .. err.message, tostring(err))
    local l = pc.listen(server, "127.0.0.1:0", { rest = { timeout = 2 } })
    local route = l.rest:match("GET", "/v1/calls")
    assert.are.equal(2, l.rest:timeout(route))
    l:shutdown()
  end)

  it("serves another server after listener:set_server, its REST routes compiled with the same options", function()
    local pc = require "protocall"
    local text = assert(io.open("spec/fixtures/protos/gateway/library.proto")):read("a")
    local function server_of(proto, reply)
      local pool = pc.pool()
      assert(pool:load(proto, { name = "gateway/library.proto" }))
      return pc.server({ ["gw.Library"] = { Echo = function() return { text = reply } end } }, { pool = pool })
    end
    local rest = { http = { rules = { { selector = "gw.Library.Echo", get = "/echo/{text}" } } } }
    local l = pc.listen(server_of(text, "first"), "127.0.0.1:0", { rest = rest })
    -- a schema whose Echo has no field 'text': the rule does not compile, the first server stays
    local bad = server_of(text:gsub("message EchoRequest {%s*string text = 1;", "message EchoRequest {"), "bad")
    local ok, err = pcall(l.set_server, l, bad)
    assert.is_false(ok)
    assert.matches("pc.listen: rest: http rules: rule 1: gw.Library.Echo: GET /echo/{text}: ", tostring(err), 1, true)
    assert.has_error(function() l:set_server({}) end,
      "bad argument #1 to 'set_server' (protocall.Server expected, got table)")
    local got = {}
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local c = pc.client("gw.Library", { transport = pc.grpc("http://127.0.0.1:" .. l.port), pool = l.server.pool })
      got[1] = c:Echo({ text = "x" }).text
      l:set_server(server_of(text, "second"))
      got[2] = c:Echo({ text = "x" }).text
      got[3] = l.rest:match("GET", "/echo/y").input.full_name
      l:shutdown()
    end)
    pc.run()
    assert.are.same({ "first", "second", "gw.EchoRequest" }, got)
  end)

  it("refuses every call with listener:refuse's error until set_server, which may give new REST options", function()
    local pc = require "protocall"
    local text = assert(io.open("spec/fixtures/protos/gateway/library.proto")):read("a")
    local pool = pc.pool()
    assert(pool:load(text, { name = "gateway/library.proto" }))
    local server = pc.server({ ["gw.Library"] = { Echo = function(req) return { text = req.text } end } },
      { pool = pool })
    local l = pc.listen(pc.server({}), "127.0.0.1:0", { rest = {} })
    assert.has_error(function() l:refuse({ code = "OK" }) end,
      "bad argument #1 to 'refuse' (pc.Error with a canonical code other than OK expected)")
    l:refuse(pc.Error { code = "UNAVAILABLE", message = "not yet" })
    local plain = pc.listen(server, "127.0.0.1:0")
    assert.has_error(function() plain:set_server(server, {}) end,
      "bad argument #2 to 'set_server' (a REST option for a listener without pc.listen's rest)")
    plain:shutdown()
    local got = {}
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local c = pc.client("gw.Library", { transport = pc.grpc("http://127.0.0.1:" .. l.port), pool = pool })
      local ok, err = pcall(c.Echo, c, { text = "x" })
      got[1] = not ok and err.code .. " " .. err.message
      -- (REST's 503 answer: the gateway's spec below, over curl)
      l:set_server(server, { http = { rules = { { selector = "gw.Library.Echo", get = "/echo/{text}" } } } })
      got[2] = c:Echo({ text = "x" }).text
      got[3] = l.rest:match("GET", "/echo/y").input.full_name
      l:shutdown()
    end)
    pc.run()
    assert.are.same({ "UNAVAILABLE not yet", "x", "gw.EchoRequest" }, got)
  end)
end)

describe("pc.listen with rest = true", function()
  local server
  setup(function() server = start_library("{ max_receive_size = 65536 }") end)
  teardown(function() helper.stop(server) end)

  it("passes the case table (curl over HTTP/1.1 and HTTP/2, python's http.client)", function()
    run_cases(server)
  end)

  it("still serves Connect on the same port; a POST application/json to no method is REST", function()
    local code, body = G.request(server, "/gw.Library/Echo", { body = '{"text":"hi"}',
      headers = { "Content-Type: application/json" } })
    assert.are.equal(200, code, body)
    assert.truthy(body:find('^{"text":"hi","calls":"%d+"}$'), body)
    code, body = G.request(server, "/v1/shelves/7/books", { body = '{"title":"T"}',
      headers = { "Content-Type: application/json" } })
    assert.are.equal(200, code, body)
    assert.are.equal('{"name":"shelves/7/books/new","title":"T"}', body)
  end)

  it("answers a google.api.HttpBody with its content type; one the engine refuses is 500", function()
    local hb = helper.spawn_command("env LUA_PATH=" .. q(package.path) .. " LUA_CPATH=" .. q(package.cpath)
      .. " sh -c 'PC_PID=$$ exec " .. LUA .. " spec/httpbody_server.lua'", "httpbody_server.lua")
    local ok, err = pcall(function()
      for _, h2 in ipairs { false, true } do
        local code, body, h = G.request(hb, "/hb?ct=text/csv", { http2 = h2 })
        assert.are.same({ 200, "body", "text/csv" }, { code, body, h["content-type"] })
        -- a stream's content type is its first message's (grpc-gateway's)
        code, body, h = G.request(hb, "/hb:stream?n=2&ct=text/csv", { http2 = h2 })
        assert.are.same({ 200, "part 1\npart 2\n", "text/csv" }, { code, body, h["content-type"] })
        code, body, h = G.request(hb, "/hb:stream?n=0&ct=text/csv", { http2 = h2 })
        assert.are.same({ 200, "", "application/octet-stream" }, { code, body, h["content-type"] })
        -- a content type no header may carry: INTERNAL, not 200 with an OK status body
        for _, path in ipairs { "/hb?ct=text/html%0D%0ASet-Cookie:%20a=1", "/hb:stream?n=1&ct=a%0Ab" } do
          code, body, h = G.request(hb, path, { http2 = h2 })
          assert.are.equal(500, code, body)
          assert.is_nil(h["set-cookie"])
          assert.matches('^{"code":13,"message":"hb%.S%.%a+: [^"]*content%-type[^"]*","details":%[%]}$', body)
        end
        -- any control byte but HTAB (RFC 9110's field-value), named
        for _, c in ipairs { { "/hb?ct=a%01b", "0x01" }, { "/hb:stream?n=1&ct=a%7Fb", "0x7f" } } do
          code, body = G.request(hb, c[1], { http2 = h2 })
          assert.are.equal(500, code, body)
          assert.matches('^{"code":13,"message":"hb%.S%.%a+: [^"]*header \'content%-type\': value holds control byte '
            .. c[2] .. '","details":%[%]}$', body)
        end
        code, body, h = G.request(hb, "/hb?ct=text/plain;%09charset=utf-8", { http2 = h2 })
        assert.are.same({ 200, "body", "text/plain;\tcharset=utf-8" }, { code, body, h["content-type"] })
      end
    end)
    helper.stop(hb)
    assert(ok, err)
  end)

  it("answers a POST to a method's path without a Connect content type 415, not 404", function()
    method_path_without_content_type(server)
  end)

  it("refuses Connect unary requests for streaming methods, which never run", function()
    connect_unary_refused_for_streams(server)
  end)

  it("tells a Connect GET (its query has connect=v1) from a REST GET on the same port", function()
    local code, body = G.request(server, "/gw.Library/GetBook?connect=v1&encoding=json&message="
      .. "%7B%22name%22%3A%22shelves%2F1%2Fbooks%2F2%22%7D", { method = "GET" })
    assert.are.equal(200, code, body)
    assert.truthy(body:find('"name":"shelves/1/books/2"', 1, true), body)
    code, body = G.request(server, "/v1/shelves/1/books/2", { method = "GET" })
    assert.are.equal(200, code, body)
    assert.truthy(body:find('"title":"title of shelves/1/books/2"', 1, true), body)
    -- a GET naming a method without connect=v1 is REST's, which has no such route
    code = G.request(server, "/gw.Library/GetBook?encoding=json&message=%7B%7D", { method = "GET" })
    assert.are.equal(404, code)
  end)

  it("marks REST answers to an allowed origin with CORS headers (cors option)", function()
    local cors = start_library('{ cors = { origins = { "https://app.example" } } }')
    local ok, err = pcall(function()
      for _, h2 in ipairs { false, true } do
        local code, body, h = G.request(cors, "/v1/shelves/1/books/2",
          { http2 = h2, headers = { "Origin: https://app.example" } })
        assert.are.equal(200, code, body)
        assert.are.equal("https://app.example", h["access-control-allow-origin"])
        assert.truthy(h["access-control-expose-headers"])
      end
    end)
    helper.stop(cors)
    assert(ok, err)
  end)

  it("refuses hostile input with a google.rpc.Status body, nothing reaching the handler", function()
    local before = G.calls(server)
    -- a body past max_receive_size: 413
    local code, body = G.request(server, "/v1/shelves/7/books", { body = '{"title":"' .. ("x"):rep(200000) .. '"}' })
    assert.are.equal(413, code, body)
    assert.truthy(body:find('^{"code":8,"message":"request body of at least %d+ bytes exceeds the limit of 65536 '
      .. 'bytes","details":%[%]}$'), body)
    -- over HTTP/2 too
    code, body = G.request(server, "/v1/shelves/7/books", { body = ("["):rep(100000), http2 = true })
    assert.are.equal(413, code, body)
    -- JSON nested past the depth limit
    code, body = G.request(server, "/v1/shelves/7/books", { body = ("["):rep(5000) })
    assert.are.equal(400, code, body)
    assert.truthy(body:find('^{"code":3,'), body)
    -- more query parameters than max_query_params
    code, body = G.request(server, "/v1/shelves/1/books/2?" .. ("tags=a&"):rep(1100))
    assert.are.equal(400, code, body)
    assert.truthy(body:find('^{"code":3,"message":".*","details":%[%]}$'), body)
    -- a query larger than the request head may be: the HTTP layer's 431/414-style refusal
    code = G.request(server, "/v1/shelves/1/books/2?view=" .. ("v"):rep(100000))
    assert.is_true(code >= 400 and code < 500, tostring(code))
    -- NDJSON without newlines is one line, not a stream of many
    code, body = G.request(server, "/v1/books:batchCreate", { body = '{"name":"a"}{"name":"b"}' })
    assert.are.equal(400, code, body)
    assert.truthy(body:find('^{"code":3,"message":"line 1: body: .*","details":%[%]}$'), body)
    assert.are.equal(before, G.calls(server))
  end)
end)

describe("protocall gateway", function()
  local upstream, gateway
  setup(function()
    upstream = helper.spawn_command("/usr/bin/python3 spec/gateway_upstream.py 0", "gateway_upstream.py")
    gateway = start_gateway(upstream)
  end)
  teardown(function()
    helper.stop(gateway)
    helper.stop(upstream)
  end)

  it("passes the case table in front of python3-grpcio (curl over HTTP/1.1 and HTTP/2, http.client)", function()
    run_cases(gateway)
  end)

  it("proxies Connect unary and gRPC-Web to the plain gRPC upstream, trailers and details whole", function()
    local code, body = G.request(gateway, "/gw.Library/Echo", { body = '{"text":"hi"}',
      headers = { "Content-Type: application/json" } })
    assert.are.equal(200, code, body)
    assert.truthy(body:find('^{"text":"hi","calls":"%d+"}$'), body)
    local h
    code, body, h = G.request(gateway, "/gw.Library/Fail", { body = '{"code":"NOT_FOUND","reason":"r2"}',
      headers = { "Content-Type: application/json" } })
    assert.are.equal(404, code, body)
    assert.are.equal("NOT_FOUND", h["trailer-x-failed"])
    assert.truthy(body:find('"code":"not_found","message":"failed with NOT_FOUND","details":%[{"type":"gw.Detail"'),
      body)
    -- gRPC-Web (binary): the trailers frame carries grpc-status, the details and x-failed
    local FailRequest = "\10\9NOT_FOUND\18\2r3"
    local frame = "\0" .. string.char(0, 0, 0, #FailRequest) .. FailRequest
    code, body, h = G.request(gateway, "/gw.Library/Fail", { body = frame,
      headers = { "Content-Type: application/grpc-web+proto", "X-Grpc-Web: 1" } })
    assert.are.equal(200, code, body)
    local trailers = h["grpc-status"] and "" or body:sub(6)
    assert.truthy((h["grpc-status"] or trailers:match("grpc%-status:(%d+)")) == "5", body)
    assert.truthy(trailers:find("x-failed: ?NOT_FOUND") or h["x-failed"] == "NOT_FOUND", body)
    assert.truthy(trailers:find("grpc%-status%-details%-bin:") or h["grpc-status-details-bin"], body)
  end)

  it("answers a POST to a method's path without a Connect content type 415, not 404", function()
    method_path_without_content_type(gateway)
  end)

  it("passes the upstream's own UNAVAILABLE and DEADLINE_EXCEEDED on whole, whatever their text", function()
    -- (texts of the gateway's own channel failures: from the upstream they are its own)
    local gw = start_gateway(upstream)
    local logged = G.start_gateway(BIN, upstream.port, "-I spec/fixtures/protos -proto gateway/library.proto", nil,
      true)
    finally(function()
      helper.stop(gw)
      helper.stop(logged)
      os.remove(logged.log)
    end)
    local code, body = G.request(logged, "/v1/fail/UNAVAILABLE?message=resolve%20x%3A%20y")
    assert.are.equal(503, code, body)
    assert.are.equal('{"code":14,"message":"resolve x: y","details":[]}', body)
    code, body = G.request(logged, "/v1/fail/DEADLINE_EXCEEDED?message=deadline%20exceeded%20waiting%20for%20a"
      .. "%20connection%20(connecting%20to%2010.1.2.3%3A80)")
    assert.are.equal(504, code, body)
    assert.are.equal('{"code":4,"message":"deadline exceeded waiting for a connection (connecting to 10.1.2.3:80)",'
      .. '"details":[]}', body)
    code, body = G.request(gw, "/gw.Library/Fail", { body = '{"code":"UNAVAILABLE","message":"connect to 10.0.0.1:1: '
      .. 'refused"}', headers = { "Content-Type: application/json" } })
    assert.are.equal(503, code, body)
    assert.are.equal('{"code":"unavailable","message":"connect to 10.0.0.1:1: refused"}', body)
    local log = assert(io.open(logged.log)):read("a")
    assert.is_nil(log:find("upstream call", 1, true), log)
  end)

  it("refuses Connect unary requests for streaming methods, nothing reaching the upstream", function()
    connect_unary_refused_for_streams(gateway)
  end)

  it("takes rules given apart with -rules (a rule there replaces the annotation)", function()
    local rules = os.tmpname()
    write(rules, '{"rules": [{"selector": "gw.Library.Echo", "get": "/api/echo/{text}"},'
      .. ' {"selector": "gw.Library.Calls", "get": "/api/calls"}]}')
    local gw = start_gateway(upstream, "-I spec/fixtures/protos -proto gateway/library.proto -rules " .. q(rules))
    local ok, err = pcall(function()
      local code, body = G.request(gw, "/api/echo/hello%20there")
      assert.are.equal(200, code, body)
      assert.truthy(body:find('^{"text":"hello there","calls":"%d+"}$'), body)
      code = G.request(gw, "/v1/calls") -- replaced by /api/calls
      assert.are.equal(404, code)
      code, body = G.request(gw, "/api/calls")
      assert.are.equal(200, code, body)
    end)
    helper.stop(gw)
    os.remove(rules)
    assert(ok, err)
  end)

  it("prints the REST routes served with -print-routes; its reflection keeps the upstream's annotations", function()
    local rules = os.tmpname()
    write(rules, '{"rules": [{"selector": "gw.Library.Calls", "get": "/api/calls",'
      .. ' "additional_bindings": [{"post": "/api/calls", "body": "*"}]}]}')
    local gw = G.start_gateway(BIN, upstream.port, "-I spec/fixtures/protos -proto gateway/library.proto -unbound"
      .. " -print-routes -rules " .. q(rules), nil, true)
    local ok, err = pcall(function()
      local code, body = G.request(gw, "/api/calls")
      assert.are.equal(200, code, body)
      local log = assert(io.open(gw.log)):read("a")
      assert.matches("\nprotocall gateway: %d+ REST routes:\n", log)
      -- the gateway's own reflection services are not REST routes, -unbound's neither
      assert.is_nil(log:find("grpc.reflection", 1, true), log)
      for _, line in ipairs {
        "  GET /api/calls -> gw.Library.Calls (-rules rule 1)\n",
        "  POST /api/calls -> gw.Library.Calls (-rules rule 1, additional binding 1)\n",
        "  GET /v1/headers -> gw.Library.Headers (google.api.http of the schema)\n",
        "  POST /gw.Library/Echo -> gw.Library.Echo (-unbound)\n",
      } do
        assert.truthy(log:find(line, 1, true), line .. " not in:\n" .. log)
      end
      -- the replaced annotation is not served, nor printed
      assert.is_nil(log:find("/v1/calls", 1, true), log)
      -- describe through the gateway's reflection: the upstream's descriptors as they are (the
      -- annotation -rules replaced), not the rules in force
      local out = R.capture(BIN .. " describe -plaintext 127.0.0.1:" .. gw.port .. " gw.Library.Calls 2>&1")
      assert.truthy(out:find('"/v1/calls"', 1, true), out)
      assert.is_nil(out:find("/api/calls", 1, true), out)
    end)
    helper.stop(gw)
    os.remove(gw.log)
    os.remove(rules)
    assert(ok, err)
  end)

  it("lets browser pages of -cors ORIGIN call, and answers reflection from its schema", function()
    local gw = start_gateway(upstream, "-I spec/fixtures/protos -proto gateway/library.proto "
      .. "-cors https://app.example -header X-Req")
    local ok, err = pcall(function()
      local code, _, h = G.request(gw, "/gw.Library/Echo", { method = "OPTIONS",
        headers = { "Origin: https://app.example", "Access-Control-Request-Method: POST" } })
      assert.are.equal(204, code)
      assert.are.equal("https://app.example", h["access-control-allow-origin"])
      -- a REST route's PATCH, with the headers the gateway passes on as metadata (not x-nope)
      code, _, h = G.request(gw, "/v1/shelves/1/books/2", { method = "OPTIONS",
        headers = { "Origin: https://app.example", "Access-Control-Request-Method: PATCH",
          "Access-Control-Request-Headers: content-type,authorization,x-req,x-nope,grpc-metadata-tenant" } })
      assert.are.equal(204, code)
      assert.are.equal("GET, POST, PATCH", h["access-control-allow-methods"])
      assert.matches(", X%-User%-Agent, authorization, X%-Req, grpc%-metadata%-tenant$",
        h["access-control-allow-headers"])
      -- a plain OPTIONS (no Access-Control-Request-Method) of a REST route or a method's path: 204
      -- with the Allow its 405 would list (it was that 405, OPTIONS in its Allow: RFC 9110 9.3.7)
      for _, h2 in ipairs { false, true } do
        for path, allow in pairs { ["/v1/shelves/1/books/2"] = "GET, HEAD, OPTIONS, PATCH",
          ["/gw.Library/Echo"] = "OPTIONS, POST" } do
          code, _, h = G.request(gw, path, { method = "OPTIONS", http2 = h2 })
          assert.are.equal(204, code, path)
          assert.are.equal(allow, h["allow"], path)
        end
      end
      local body
      code, body, h = G.request(gw, "/v1/shelves/1/books/2", { headers = { "Origin: https://app.example" } })
      assert.are.equal(200, code, body)
      assert.are.equal("https://app.example", h["access-control-allow-origin"])
      code, _, h = G.request(gw, "/v1/shelves/1/books/2", { headers = { "Origin: https://evil.example" } })
      assert.are.equal(200, code)
      assert.is_nil(h["access-control-allow-origin"])
      -- a 415's Accept-Post is exposed to the page's script (over HTTP/1.1 and HTTP/2)
      for _, h2 in ipairs { false, true } do
        code, _, h = G.request(gw, "/gw.Library/Echo", { body = "", http2 = h2,
          headers = { "Origin: https://app.example", "Content-Type: text/plain" } })
        assert.are.equal(415, code)
        assert.matches(", Accept%-Post$", h["access-control-expose-headers"])
        -- and a 405's Allow: a REST path's (rest.lua), a Connect GET of a method with side effects (C)
        code, _, h = G.request(gw, "/v1/shelves/1/books/2", { method = "DELETE", http2 = h2,
          headers = { "Origin: https://app.example" } })
        assert.are.equal(405, code)
        assert.are.equal("GET, HEAD, OPTIONS, PATCH", h["allow"]) -- (-cors: its preflights answered)
        assert.matches(", Allow$", h["access-control-expose-headers"])
        code, _, h = G.request(gw, "/gw.Library/Echo?connect=v1&encoding=json&message=%7B%7D",
          { method = "GET", http2 = h2, headers = { "Origin: https://app.example" } })
        assert.are.equal(405, code)
        assert.are.equal("OPTIONS, POST", h["allow"]) -- (as the REST path's: its preflights answered too)
        assert.matches(", Allow$", h["access-control-expose-headers"])
      end
      -- a gRPC client finds the schema through the gateway's own reflection service
      local out = R.capture(BIN .. " call -plaintext -d '{\"text\":\"through\"}' 127.0.0.1:" .. gw.port
        .. " gw.Library/Echo 2>&1")
      assert.matches('"text": "through"', out, 1, true)
    end)
    helper.stop(gw)
    assert(ok, err)
  end)

  it("reads the schema from the upstream's reflection when given no -proto", function()
    local pc = require "protocall"
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/grpc/reflection/v1"))
    write(dir .. "/grpc/reflection/v1/reflection.proto", pc.builtin_source("grpc/reflection/v1/reflection.proto"))
    local refl = helper.spawn_command("/usr/bin/python3 spec/reflection_server.py 0 " .. dir .. " v1",
      "reflection_server.py")
    local gw = start_gateway(refl, "-unbound")
    local ok, err = pcall(function()
      -- Connect to a method of the reflected schema, and REST by -unbound's POST /pkg.Service/Method
      local code, body = G.request(gw, "/faults.Faults/Echo", { body = "{}",
        headers = { "Content-Type: application/json" } })
      assert.are.equal(200, code, body)
      code, body = G.request(gw, "/faults.Faults/Echo", { body = "{}", method = "POST" })
      assert.are.equal(200, code, body)
    end)
    helper.stop(gw)
    helper.stop(refl)
    os.execute("rm -rf " .. q(dir))
    assert(ok, err)
  end)

  it("warns at start of -proto services its upstream's reflection does not list, and serves on", function()
    local pc = require "protocall"
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/grpc/reflection/v1"))
    write(dir .. "/grpc/reflection/v1/reflection.proto", pc.builtin_source("grpc/reflection/v1/reflection.proto"))
    local refl = helper.spawn_command("/usr/bin/python3 spec/reflection_server.py 0 " .. dir .. " v1",
      "reflection_server.py")
    -- gw.Library is not the upstream's; faults.Faults is
    local extra = G.start_gateway(BIN, refl.port, "-I spec/fixtures/protos -proto grpc/faults.proto"
      .. " -proto gateway/library.proto", nil, true)
    local all = G.start_gateway(BIN, refl.port, "-I spec/fixtures/protos -proto grpc/faults.proto", nil, true)
    local function log_of(gw)
      local f = assert(io.open(gw.log))
      local text = f:read("a")
      f:close()
      return text
    end
    local ok, err = pcall(function()
      local line = "protocall gateway: warning: the upstream 127.0.0.1:" .. refl.port .. " does not serve gw.Library"
        .. " (its reflection lists: faults.Faults, faults.Talk, grpc.reflection.v1.ServerReflection)\n"
      local found, log = G.eventually(10, function()
        local text = log_of(extra)
        return text:find(line, 1, true) ~= nil, text
      end)
      assert(found, log)
      -- said once, after the listening line (the log's first line is the shell's pid); the gateway serves on
      assert.matches("^%d+\nprotocall gateway: listening on [^\n]*\n" .. line:gsub("%p", "%%%0") .. "$", log)
      for _, gw in ipairs { extra, all } do
        local code, body = G.request(gw, "/faults.Faults/Echo", { body = "{}",
          headers = { "Content-Type: application/json" } })
        assert.are.equal(200, code, body)
      end
      -- every service served: no warning, its check (bounded by 2 s) long over
      os.execute("sleep 2.5")
      assert.is_nil(log_of(all):find("warning", 1, true), log_of(all))
    end)
    helper.stop(extra)
    helper.stop(all)
    helper.stop(refl)
    os.remove(extra.log)
    os.remove(all.log)
    os.execute("rm -rf " .. q(dir))
    assert(ok, err)
  end)
end)

-- `protocall gateway -refresh`: the upstream on a port of its own is
-- first spec/reflection_server.py (faults.Faults), then, after a time
-- down, another `protocall gateway` serving gw.Library (it answers
-- reflection from its own schema) in front of spec/gateway_upstream.py.
describe("protocall gateway -refresh", function()
  local pc = require "protocall"
  local dir, port, refl, library, front, gw, ruled


  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/grpc/reflection/v1"))
    write(dir .. "/grpc/reflection/v1/reflection.proto", pc.builtin_source("grpc/reflection/v1/reflection.proto"))
    port = N.free_port()
    refl = helper.spawn_command("/usr/bin/python3 spec/reflection_server.py " .. port .. " " .. dir .. " v1",
      "reflection_server.py")
  end)
  teardown(function()
    for _, p in pairs { gw, ruled, refl, front, library } do helper.stop(p) end -- some may be nil
    os.execute("rm -rf " .. q(dir))
  end)

  it("is refused with -proto or -protoset, below 0, and between 0 and 1 second", function()
    local out = R.capture(BIN .. " gateway -refresh 1 -I spec/fixtures/protos -proto gateway/library.proto "
      .. "127.0.0.1:1 2>&1; echo status $?")
    assert.matches("^protocall gateway: %-refresh: for a schema from UPSTREAM's reflection, not with "
      .. "%-proto/%-protoset\n.*status 2\n$", out)
    out = R.capture(BIN .. " gateway -refresh -1 127.0.0.1:1 2>&1; echo status $?")
    assert.matches("^protocall gateway: flag %-refresh: a finite number >= 0 expected, got '%-1'\n.*status 2\n$", out)
    -- a period that would re-read the schema in a tight loop
    for _, v in ipairs { "1e-9", "0.5" } do
      out = R.capture(BIN .. " gateway -refresh " .. v .. " 127.0.0.1:1 2>&1; echo status $?")
      assert.matches("^protocall gateway: %-refresh: 0 %(not again once read%) or at least 1 second expected, got "
        .. tostring(tonumber(v)):gsub("%p", "%%%0") .. "\n.*status 2\n$", out)
    end
  end)

  it("serves the upstream's changed schema; a read that fails or rules that do not compile keep it", function()
    local rules = os.tmpname()
    write(rules, '{"rules": [{"selector": "faults.Faults.Echo", "get": "/refl/echo/{text}"}]}')
    gw = G.start_gateway(BIN, port, "-unbound -refresh 1", nil, true)
    ruled = G.start_gateway(BIN, port, "-refresh 1 -rules " .. q(rules), nil, true)
    os.remove(rules)
    local code, body = G.request(gw, "/faults.Faults/Echo", { body = "{}", method = "POST" })
    assert.are.equal(200, code, body)
    code, body = G.request(ruled, "/refl/echo/hi")
    assert.are.equal(200, code, body)
    -- the upstream down: reads fail, the schema stays (the call fails, not the route)
    helper.stop(refl)
    refl = nil
    os.execute("sleep 3.3")
    code, body = G.request(gw, "/faults.Faults/Echo", { body = "{}", method = "POST" })
    assert.are.equal(503, code, body)
    assert.matches('"code":14', body, 1, true)
    -- three reads failed, said once (their texts differ only in the reconnection backoff's figure)
    local f = assert(io.open(gw.log))
    local log = f:read("a")
    f:close()
    os.remove(gw.log)
    local _, said = log:gsub("reading the upstream's schema again failed", "")
    assert.are.equal(1, said, log)
    -- another schema on the same port
    library = helper.spawn_command("/usr/bin/python3 spec/gateway_upstream.py 0", "gateway_upstream.py")
    front = G.start_gateway(BIN, library.port, "-I spec/fixtures/protos -proto gateway/library.proto",
      "127.0.0.1:" .. port)
    local ok, last = G.eventually(10, function()
      local c, b = G.request(gw, "/v1/shelves/1/books/2")
      return c == 200, c .. " " .. b
    end)
    assert(ok, last)
    assert.are.equal('200 {"name":"shelves/1/books/2","title":"title of shelves/1/books/2"}', last)
    code, body = G.request(gw, "/faults.Faults/Echo", { body = "{}", method = "POST" })
    assert.are.equal(404, code, body)
    -- its gRPC side and its own reflection serve the new schema too
    local out = R.capture(BIN .. " call -plaintext -d '{\"text\":\"through\"}' 127.0.0.1:" .. gw.port
      .. " gw.Library/Echo 2>&1")
    assert.matches('"text": "through"', out, 1, true)
    -- the rule naming faults.Faults.Echo does not compile against it: the old schema stays,
    -- its call reaching gw.Library's server (UNIMPLEMENTED)
    -- (its connection may still wait out a reconnection backoff: 503 meanwhile)
    ok, last = G.eventually(10, function()
      local c, b = G.request(ruled, "/refl/echo/hi")
      return c ~= 503, c .. " " .. b
    end)
    assert(ok, last)
    assert.matches("^501 ", last)
    code = G.request(ruled, "/v1/shelves/1/books/2")
    assert.are.equal(404, code)
    -- stderr names the -rules file, and says once that it takes a restart to read it again (its next
    -- reads, a second apart, failing alike)
    local line = "protocall gateway: the upstream's changed schema is not served, the current one stays: -rules '"
      .. rules .. "':1:25: http rules: rule 1: selector 'faults.Faults.Echo' names no method of the services "
      .. "(-rules is read at start: restart the gateway to take a fixed file)\n"
    ok, log = G.eventually(10, function()
      local fl = assert(io.open(ruled.log))
      local text = fl:read("a")
      fl:close()
      return text:find(line, 1, true) ~= nil, text
    end)
    assert(ok, log)
    os.execute("sleep 2.2")
    helper.stop(ruled)
    f = assert(io.open(ruled.log))
    log = f:read("a")
    f:close()
    os.remove(ruled.log)
    ruled = nil
    _, said = log:gsub(line:gsub("%p", "%%%0"), "")
    assert.are.equal(1, said, log)
  end)
end)

-- `protocall gateway` whose upstream is down when it starts: it serves at
-- once; with -proto calls fail as the upstream's connection does, and with
-- reflection every call is refused UNAVAILABLE (503 with a google.rpc.Status
-- body) until a read, retried with backoff, answers.
describe("protocall gateway with the upstream down at start", function()
  local pc = require "protocall"
  local dir, gw, refl
  teardown(function()
    for _, p in pairs { gw, refl } do helper.stop(p) end -- some may be nil
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  it("serves a -proto schema, its calls failing UNAVAILABLE without the upstream's address", function()
    local down = G.start_gateway(BIN, N.free_port(), "-I spec/fixtures/protos -proto gateway/library.proto", nil, true)
    finally(function()
      helper.stop(down)
      os.remove(down.log)
    end)
    local code, body = G.request(down, "/v1/shelves/1/books/2")
    assert.are.equal(503, code, body)
    -- the failure's class, not the address (the log has it, below)
    assert.are.equal('{"code":14,"message":"upstream connect error: connection refused","details":[]}', body)
    -- a call within the reconnection backoff: its hint says what holds for the gateway
    -- (it sets no wait_for_ready), the first such answer of a few calls
    local hinted
    for _ = 1, 5 do
      code, body = G.request(down, "/v1/shelves/1/books/2")
      if code == 503 and body:find("reconnection backoff", 1, true) then
        hinted = body
        break
      end
    end
    assert.is_not_nil(hinted, body)
    assert.matches('^{"code":14,"message":"upstream connect error: connection refused %(reconnection backoff: '
      .. 'the next attempt in [%d.e-]+ s; calls fail at once until then%)","details":%[%]}$', hinted)
    -- gRPC, Connect and gRPC-Web clients are told the same
    local out = R.capture(BIN .. " call -plaintext -d '{}' 127.0.0.1:" .. down.port .. " gw.Library/Echo 2>&1")
    assert.matches("ERROR: code = UNAVAILABLE, message = upstream connect error: connection refused", out, 1, true)
    local connect = R.capture("curl -s -H 'Content-Type: application/json' --data-binary '{}' "
      .. down.url .. "/gw.Library/Echo")
    assert.matches('^{"code":"unavailable","message":"upstream connect error: connection refused', connect)
    local web = R.capture("printf '\\0\\0\\0\\0\\2{}' | curl -s -D - -o /dev/null "
      .. "-H 'Content-Type: application/grpc-web+json' --data-binary @- " .. down.url .. "/gw.Library/Echo")
    assert.matches("grpc%-message: upstream connect error: connection refused", web)
    for _, answer in ipairs { out, connect, web } do
      assert.is_nil(answer:find("127.0.0.1", 1, true), answer)
    end
    helper.stop(down)
    local f = assert(io.open(down.log))
    local log = f:read("a")
    f:close()
    -- the operator's log has the address, said once a method for its calls failing alike (within 10 s):
    -- each failing method named (GetBook by REST, Echo by gRPC, Connect and gRPC-Web)
    for _, method in ipairs { "GetBook", "Echo" } do
      local _, said = log:gsub("protocall gateway: upstream call gw%.Library%." .. method .. " failed: UNAVAILABLE: "
        .. "connect to 127%.0%.0%.1:%d+: Connection refused", "")
      assert.are.equal(1, said, method .. ": " .. log)
    end
  end)

  it("tells a client whose upstream connection was lost so, without the upstream's address", function()
    local hangup = helper.spawn("hangup", 0) -- reads what a connection sends first, then closes it
    local lost = G.start_gateway(BIN, hangup.port, "-I spec/fixtures/protos -proto gateway/library.proto", nil, true)
    finally(function()
      helper.stop(lost)
      helper.stop(hangup)
      os.remove(lost.log)
    end)
    local code, body = G.request(lost, "/v1/shelves/1/books/2")
    local out = R.capture(BIN .. " call -plaintext -d '{}' 127.0.0.1:" .. lost.port .. " gw.Library/Echo 2>&1")
    helper.stop(lost)
    local f = assert(io.open(lost.log))
    local log = f:read("a")
    f:close()
    assert.are.equal(503, code, body)
    assert.are.equal('{"code":14,"message":"upstream connection lost","details":[]}', body)
    assert.matches("ERROR: code = UNAVAILABLE, message = upstream connection lost\n", out, 1, true)
    -- (read from, or write to, the address: what the closing connection failed first)
    assert.matches("protocall gateway: upstream call gw%.Library%.GetBook failed: UNAVAILABLE: [^\n]*127%.0%.0%.1:"
      .. hangup.port .. ": ", log)
  end)

  it("refuses calls UNAVAILABLE until the upstream's reflection answers, then serves its schema", function()
    local port = N.free_port()
    gw = G.start_gateway(BIN, port, "-unbound", nil, true)
    local code, body = G.request(gw, "/faults.Faults/Echo", { body = "{}", method = "POST" })
    assert.are.equal(503, code, body)
    assert.matches('^{"code":14,"message":"the upstream\'s schema is not read yet: UNAVAILABLE: upstream connect '
      .. 'error: connection refused; the gateway reads it again [%d.]+ s after its last read","details":%[%]}$', body)
    -- gRPC clients too (the gateway's own reflection included)
    local out = R.capture(BIN .. " call -plaintext -d '{}' 127.0.0.1:" .. gw.port .. " faults.Faults/Echo 2>&1")
    assert.matches("code = UNAVAILABLE, message = the upstream's schema is not read yet: ", out, 1, true)
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/grpc/reflection/v1"))
    write(dir .. "/grpc/reflection/v1/reflection.proto", pc.builtin_source("grpc/reflection/v1/reflection.proto"))
    refl = helper.spawn_command("/usr/bin/python3 spec/reflection_server.py " .. port .. " " .. dir .. " v1",
      "reflection_server.py")
    local ok, last = G.eventually(15, function()
      local c, b = G.request(gw, "/faults.Faults/Echo", { body = "{}", method = "POST" })
      return c == 200, c .. " " .. b
    end)
    assert(ok, last)
    local f = assert(io.open(gw.log))
    local log = f:read("a")
    f:close()
    os.remove(gw.log)
    assert.matches("(the upstream's schema not read yet)\n", log, 1, true)
    assert.matches("reading the upstream's schema failed, trying again (calls fail UNAVAILABLE meanwhile): "
      .. "UNAVAILABLE: connect to", log, 1, true)
    -- counted and named as `protocall list` on the upstream names them, its reflection left out
    local listed = R.capture(BIN .. " list -plaintext 127.0.0.1:" .. port .. " 2>&1")
    local names = {}
    for name in listed:gmatch("[^\n]+") do
      if not name:find("^grpc%.reflection%.") then names[#names + 1] = name end
    end
    table.sort(names)
    assert.is_true(#names > 1, listed)
    assert.matches("the upstream's schema read: serving it (" .. #names .. " services: " .. table.concat(names, ", ")
      .. "; server reflection is the gateway's own)\n", log, 1, true)
  end)

  it("refuses calls INTERNAL, generic, when -rules do not fit the schema read later", function()
    local port = N.free_port()
    local rules = os.tmpname()
    write(rules, '{"rules": [{"selector": "faults.Faults.Nope", "get": "/nope"}]}')
    local bad = G.start_gateway(BIN, port, "-rules " .. q(rules), nil, true)
    local rdir = os.tmpname()
    os.remove(rdir)
    assert(os.execute("mkdir -p " .. rdir .. "/grpc/reflection/v1"))
    write(rdir .. "/grpc/reflection/v1/reflection.proto", pc.builtin_source("grpc/reflection/v1/reflection.proto"))
    local up = helper.spawn_command("/usr/bin/python3 spec/reflection_server.py " .. port .. " " .. rdir .. " v1",
      "reflection_server.py")
    finally(function()
      helper.stop(bad)
      helper.stop(up)
      os.remove(rules)
      os.remove(bad.log)
      os.execute("rm -rf " .. q(rdir))
    end)
    local ok, last = G.eventually(15, function()
      local c, b = G.request(bad, "/faults.Faults/Echo", { body = "{}", method = "POST",
        headers = { "Content-Type: application/json" } })
      return c == 500, c .. " " .. b
    end)
    assert(ok, last)
    -- not retryable, and not the rule: stderr has it
    assert.are.equal('500 {"code":"internal","message":"gateway misconfigured: http rules do not fit the schema"}',
      last)
    local code, body = G.request(bad, "/nope")
    assert.are.equal(500, code)
    assert.are.equal('{"code":13,"message":"gateway misconfigured: http rules do not fit the schema","details":[]}',
      body)
    helper.stop(bad)
    local f = assert(io.open(bad.log))
    local log = f:read("a")
    f:close()
    assert.matches("the upstream's schema is not served, calls fail INTERNAL meanwhile: -rules '"
      .. rules .. "':1:25: http rules: rule 1: selector 'faults.Faults.Nope' names no method", log, 1, true)
  end)
end)

-- `protocall gateway` waits out an upstream it cannot reach, nothing else: rules
-- that are no google.api.Http JSON and a TLS handshake that fails end it at start.
describe("protocall gateway refusing to start", function()
  local upstream
  teardown(function() helper.stop(upstream) end)

  it("exits with a -rules file that is not google.api.Http JSON, the upstream down", function()
    local rules = os.tmpname()
    -- the JSON's place as the file's line:col, from 1 (not a byte offset)
    for text, why in pairs { ["garbage\n"] = ":1:1: http rules: $: unexpected character 'g'",
      ['{"rules": 5}'] = ":1:11: http rules: $.rules: array expected, got a number",
      -- a rule named from 1, as a selector's error names it (below), its JSON path from 0
      ['{"rules": [{}, {"get": 5}]}'] = ":1:24: http rules: rule 2: $.rules[1].get: string expected",
      ['{\n  "rules": [\n    {"get": 5}]}'] = ":3:13: http rules: rule 1: $.rules[0].get: string expected",
      -- a UTF-8 byte order mark skipped (RFC 8259 section 8.1), columns counting bytes, its three
      -- too, as protoc counts them
      ['\239\187\191{"rules": 5}'] = ":1:14: http rules: $.rules: array expected, got a number",
      ['{"rules": [{"selector": "\195\169", "body": 5}]}'] =
        ":1:39: http rules: rule 1: $.rules[0].body: string expected",
      -- a google.api.Service with "http" misspelt: neither shape, its members named, at its "{"
      ['\n {"type": "google.api.Service", "config_version": 3, "name": "x", "htp": {"rules": []}}'] =
        ":2:2: http rules: neither google.api.Http (its \"rules\" at the top level) nor a google.api.Service"
        .. ' with an "http" member: the top-level members are "type", "config_version", "name", "htp"',
      -- google.api.Http with a member of neither beside its rules: google.api.Http's error
      ['{"rules": [], "htp": 1}'] = ':1:15: http rules: $.htp: no field named "htp" in google.api.Http',
    } do
      write(rules, text)
      local out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -rules " .. q(rules)
        .. " 127.0.0.1:1 2>&1; echo status $?")
      assert.matches("^protocall gateway: %-rules '" .. rules:gsub("%p", "%%%0") .. "'"
        .. why:gsub("%p", "%%%0") .. ".*\nstatus 1\n$", out)
      assert.not_matches("listening", out, 1, true)
    end
    os.remove(rules)
  end)

  it("exits on a pattern or template wrong whatever the schema, before any is read, at its line:col", function()
    local rules = os.tmpname()
    for text, why in pairs {
      ['{\n  "rules": [\n    {"selector": "gw.Library.Echo", "post": "/e", "body": "*"},\n'
        .. '    {"selector": "gw.Library.Echo",\n     "get": "/e/{text"}]}'] =
        ":5:13: http rules: rule 2: gw.Library.Echo: GET /e/{text: bad template: unclosed '{'",
      -- a google.api.Service's http member, a binding by its JSON name, a string's escapes before it
      ['{"name": "a\\"}", "http": {"rules": [{"selector": "s.S.M", "get": "/ok", "additionalBindings": '
        .. '[{"post": "/v1//x"}]}]}}'] =
        ":1:105: http rules: rule 1, additional binding 1: s.S.M: POST /v1//x: bad template: empty segment at offset"
          .. " 4",
      ['{"rules": [{"selector": "s.S.M", "custom": {"kind": "get", "path": "/x"}}]}'] =
        ":1:44: http rules: rule 1: s.S.M: get /x: custom kind 'get' never matches (methods are case-sensitive: GET)",
      ['{"rules": [{"selector": "s.S.M", "get": "/x"}, {"selector": "s.S.N"}]}'] =
        ":1:48: http rules: rule 2: s.S.N: ?: no pattern (get, put, post, delete, patch or custom)",
    } do
      write(rules, text)
      -- the upstream down, no schema flag: the gateway would serve, reading the schema again and again
      local out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -rules " .. q(rules)
        .. " 127.0.0.1:1 2>&1; echo status $?")
      assert.are.equal("protocall gateway: -rules '" .. rules .. "'" .. why .. "\nstatus 1\n", out)
    end
    os.remove(rules)
  end)

  it("exits on google.api.Http's members beside a google.api.Service's http, at the member's line:col", function()
    local rules = os.tmpname()
    -- a Service's other members are skipped: these would be, the rules of one shape lost
    for text, why in pairs {
      ['{"http": {"rules": [{"selector": "s.S.M", "get": "/a"}]},\n "rules": [{"selector": "s.S.N", "get": "/b"}]}'] =
        ":2:11: http rules: a top-level 'rules' beside 'http': google.api.Service's rules go under 'http',"
        .. " google.api.Http's at the top level; give one shape",
      ['{"rules": [{"selector": "s.S.N", "get": "/b"}], "name": "x", "http": {}}'] = ":1:11: http rules: a"
        .. " top-level 'rules' beside 'http': google.api.Service's rules go under 'http', google.api.Http's at the"
        .. " top level; give one shape",
      -- a name written with an escape is the same name, and found so
      ['{"http": {"rules": []}, "\\u0072ules": [{"selector": "s.S.N", "get": "/b"}]}'] = ":1:39: http rules: a"
        .. " top-level 'rules' beside 'http': google.api.Service's rules go under 'http', google.api.Http's at the"
        .. " top level; give one shape",
      ['{"http": {"rules": []}, "fullyDecodeReservedExpansion": true}'] =
        ":1:57: http rules: a top-level 'fully_decode_reserved_expansion' beside 'http': google.api.Service's"
        .. " rules go under 'http', google.api.Http's at the top level; give one shape",
    } do
      write(rules, text)
      local out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -rules " .. q(rules)
        .. " 127.0.0.1:1 2>&1; echo status $?")
      assert.are.equal("protocall gateway: -rules '" .. rules .. "'" .. why .. "\nstatus 1\n", out)
    end
    os.remove(rules)
  end)

  it("exits naming the rule (from 1) whose selector names no method of the schema, at its line:col", function()
    local rules = os.tmpname()
    write(rules, '{"rules": [{"selector": "gw.Library.Echo", "get": "/e"},\n  {"selector": "gw.Nope.M", "get": "/n"}]}')
    local out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -rules " .. q(rules)
      .. " -I spec/fixtures/protos -proto gateway/library.proto 127.0.0.1:1 2>&1; echo status $?")
    os.remove(rules)
    -- named by the -rules file, as its read errors are, at the selector's line:col
    assert.are.equal("protocall gateway: -rules '" .. rules .. "':2:16: http rules: rule 2: selector 'gw.Nope.M' names"
      .. " no method of the services\nstatus 1\n", out)
    -- a huge selector: its first 80 bytes said
    rules = os.tmpname()
    write(rules, '{"rules": [{"selector": "' .. ("gw."):rep(2000000) .. 'M", "get": "/n"}]}')
    out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -rules " .. q(rules)
      .. " -I spec/fixtures/protos -proto gateway/library.proto 127.0.0.1:1 2>&1; echo status $?")
    os.remove(rules)
    assert.are.equal("protocall gateway: -rules '" .. rules .. "':1:25: http rules: rule 1: selector '"
      .. ("gw."):rep(26) .. "gw...' names no method of the services\nstatus 1\n", out)
  end)

  it("exits naming a google.api.http option that does not fit the schema, at the line:col of its -proto method",
    function()
    local pc = require "protocall"
    local dir = R.capture("mktemp -d"):gsub("%s+$", "")
    local source = 'syntax = "proto3";\npackage inv.v1;\nimport "google/api/annotations.proto";\n'
      .. "message GetReq { string sku = 1; }\nmessage Item { string sku = 1; }\nservice Inventory {\n"
      .. '  rpc Get(GetReq) returns (Item) {\n    option (google.api.http) = { get: "/v1/items/{skew}" };\n  }\n}\n'
    write(dir .. "/badann.proto", source)
    local why = "GET /v1/items/{skew}: variable 'skew': no field 'skew' in inv.v1.GetReq"
    -- (at the option's name, line 8 column 12, not at the rpc's)
    local out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -I " .. q(dir)
      .. " -proto badann.proto 127.0.0.1:1 2>&1; echo status $?")
    assert.are.equal("protocall gateway: google.api.http of inv.v1.Inventory.Get (badann.proto:8:12): " .. why
      .. "\nstatus 1\n", out)
    -- a file name with parentheses (and a folder of the import path) is no different
    os.execute("mkdir " .. q(dir .. "/v(1)"))
    write(dir .. "/v(1)/bad(ann).proto", source)
    out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -I " .. q(dir)
      .. " -proto " .. q("v(1)/bad(ann).proto") .. " 127.0.0.1:1 2>&1; echo status $?")
    os.remove(dir .. "/v(1)/bad(ann).proto")
    os.remove(dir .. "/v(1)")
    assert.are.equal("protocall gateway: google.api.http of inv.v1.Inventory.Get (v(1)/bad(ann).proto:8:12): " .. why
      .. "\nstatus 1\n", out)
    -- pc.listen's rest option: its method and place too, as fields
    local pool = pc.pool()
    assert(pool:load(source, { name = "badann.proto" }))
    local server = pc.server({ ["inv.v1.Inventory"] = { Get = function() return {} end } }, { pool = pool })
    local ok, err = pcall(pc.listen, server, "127.0.0.1:0", { rest = true })
    assert.is_false(ok)
    assert.are.equal("pc.listen: rest: inv.v1.Inventory.Get (badann.proto:8:12): rule " .. why, tostring(err))
    -- an additional binding's: its number (from 1) after the place
    local extra = source:gsub('get: "/v1/items/{skew}"', 'get: "/v1/items/{sku}" additional_bindings { get: "/v1/x" }'
      .. ' additional_bindings { get: "/v2/{skew}" }')
    write(dir .. "/badann.proto", extra)
    out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -I " .. q(dir)
      .. " -proto badann.proto 127.0.0.1:1 2>&1; echo status $?")
    local why2 = "GET /v2/{skew}: variable 'skew': no field 'skew' in inv.v1.GetReq"
    assert.are.equal("protocall gateway: google.api.http of inv.v1.Inventory.Get (badann.proto:8:12), additional"
      .. " binding 2: " .. why2 .. "\nstatus 1\n", out)
    local pool2 = pc.pool()
    assert(pool2:load(extra, { name = "badann.proto" }))
    local server2 = pc.server({ ["inv.v1.Inventory"] = { Get = function() return {} end } }, { pool = pool2 })
    local ok2, err2 = pcall(pc.listen, server2, "127.0.0.1:0", { rest = true })
    assert.is_false(ok2)
    assert.are.equal("pc.listen: rest: inv.v1.Inventory.Get (badann.proto:8:12), additional binding 2: rule " .. why2,
      tostring(err2))
    assert.are.equal(2, err2.additional)
    assert.are.equal(pc.HttpRuleError, getmetatable(err))
    assert.are.same({ "inv.v1.Inventory.Get", "badann.proto", 8, 12, "GET /v1/items/{skew}" },
      { err.method, err.file, err.line, err.column, err.pattern })
    -- a descriptor set has no source positions: the method alone
    local fd = pool:file_descriptor("badann.proto")
    write(dir .. "/badann.pb", pc.encode(pool:type("google.protobuf.FileDescriptorSet") { file = { fd } }))
    out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -protoset "
      .. q(dir .. "/badann.pb") .. " 127.0.0.1:1 2>&1; echo status $?")
    os.remove(dir .. "/badann.proto")
    os.remove(dir .. "/badann.pb")
    assert.are.equal("protocall gateway: google.api.http of inv.v1.Inventory.Get: " .. why .. "\nstatus 1\n", out)
    -- a route -unbound makes is not an annotation: said so
    write(dir .. "/ub.proto", 'syntax = "proto3";\npackage ub;\nimport "google/api/annotations.proto";\n'
      .. "message M { string x = 1; }\nservice S {\n"
      .. '  rpc A(M) returns (M) { option (google.api.http) = { post: "/ub.S/B" body: "*" }; }\n'
      .. "  rpc B(M) returns (M);\n}\n")
    out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -unbound -listen 127.0.0.1:0 -I " .. q(dir)
      .. " -proto ub.proto 127.0.0.1:1 2>&1; echo status $?")
    os.remove(dir .. "/ub.proto")
    os.remove(dir)
    assert.are.equal("protocall gateway: -unbound route of ub.S.B: POST /ub.S/B: the same method and template as"
      .. " ub.S.A's rule POST /ub.S/B (ub.proto:6:33)\nstatus 1\n", out)
  end)

  it("exits naming the rule (from 1), its method and pattern, whose pattern does not fit the schema, at the"
    .. " line:col of the member at fault", function()
    local rules = os.tmpname()
    for text, why in pairs {
      -- an additional binding's body
      ['{"rules": [{"selector": "gw.Library.Echo", "get": "/e/{text}",\n "additional_bindings": [{"post": "/e",'
        .. ' "body": "nope"}]}]}'] =
        ":2:49: http rules: rule 1, additional binding 1: gw.Library.Echo: POST /e: body 'nope': no such top-level"
        .. " field in gw.EchoRequest",
      -- a pattern that does not parse, in an additional binding (checked before the schema is read)
      ['{"rules": [{"selector": "gw.Library.Echo", "get": "/e",\n "additional_bindings": [{"post": "/f"},'
        .. ' {"get": "/g/{x"}]}]}'] =
        ":2:50: http rules: rule 1, additional binding 2: gw.Library.Echo: GET /g/{x: bad template: unclosed '{'",
      -- a clash with another method's google.api.http annotation: where its .proto source sets it
      ['{"rules": [{"selector": "gw.Library.Echo", "get": "/v1/headers"}]}'] =
        ":1:51: http rules: rule 1: gw.Library.Echo: GET /v1/headers: the same method and template as"
        .. " gw.Library.Headers's rule GET /v1/headers (gateway/library.proto:110:12)",
      -- a template's variable: its pattern; a google.api.Service's http member
      ['{"http": {"rules": [{"selector": "gw.Library.Echo", "get": "/e"}, {"selector": "gw.Library.Echo",\n'
        .. ' "get": "/e/{nope}"}]}}'] =
        ":2:9: http rules: rule 2: gw.Library.Echo: GET /e/{nope}: variable 'nope': no field 'nope' in"
        .. " gw.EchoRequest",
      ['{"rules": [{"selector": "gw.Library.Echo",\n  "get": "/e", "body": "*"}]}'] =
        ":2:24: http rules: rule 1: gw.Library.Echo: GET /e: a GET rule may not have a body ('*')",
      -- by its JSON name
      ['{"rules": [{"selector": "gw.Library.Echo", "post": "/e", "body": "*", "responseBody": "zz"}]}'] =
        ":1:87: http rules: rule 1: gw.Library.Echo: POST /e: response_body 'zz': no such top-level field in"
        .. " gw.EchoReply",
      -- member names written with JSON escapes, read as the JSON reader reads them
      ['{"rules": [{"sel\\u0065ctor": "gw.Library.Echo", "post": "/e", "\\u0062ody": "nope"}]}'] =
        ":1:76: http rules: rule 1: gw.Library.Echo: POST /e: body 'nope': no such top-level field in gw.EchoRequest",
      -- a duplicate route: the pattern of the rule compiled second; a byte order mark's bytes counted
      ['\239\187\191{"rules": [{"selector": "gw.Library.Echo", "post": "/e", "body": "*"},\n'
        .. ' {"selector": "gw.Library.GetBook", "post": "/e", "body": "*"}]}'] =
        ":1:55: http rules: rule 1: gw.Library.Echo: POST /e: the same method and template as gw.Library.GetBook's"
        .. " rule POST /e",
    } do
      write(rules, text)
      local out = R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -rules " .. q(rules)
        .. " -I spec/fixtures/protos -proto gateway/library.proto 127.0.0.1:1 2>&1; echo status $?")
      assert.are.equal("protocall gateway: -rules '" .. rules .. "'" .. why .. "\nstatus 1\n", out)
    end
    os.remove(rules)
  end)

  it("exits naming the flag of a -rules file that cannot be read, and a bad -cors as a usage error", function()
    local function start(flags)
      return R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 " .. flags
        .. " -I spec/fixtures/protos -proto gateway/library.proto 127.0.0.1:1 2>&1; echo status $?")
    end
    assert.are.equal("protocall gateway: -rules '/nonexistent/r.json': cannot be read: No such file or directory\n"
      .. "status 1\n", start("-rules /nonexistent/r.json"))
    assert.are.equal("protocall gateway: -rules 'spec': cannot be read: Is a directory\nstatus 1\n",
      start("-rules spec"))
    local out = start("-cors https://ok.example -cors app.example")
    assert.matches("^protocall gateway: %-cors 'app%.example': must be an origin %(", out)
    assert.matches("\nstatus 2\n$", out)
  end)

  it("exits naming the flag of a -listen-cert or -listen-key that cannot be read", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    assert(os.execute("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout "
      .. dir .. "/key.pem -out " .. dir .. "/cert.pem 2>/dev/null"))
    local function start(cert, key)
      return R.capture("timeout 10 " .. BIN .. " gateway -plaintext -listen 127.0.0.1:0 -listen-cert " .. q(cert)
        .. " -listen-key " .. q(key) .. " -I spec/fixtures/protos -proto gateway/library.proto 127.0.0.1:1"
        .. " 2>&1; echo status $?")
    end
    local out = start(dir .. "/none.pem", dir .. "/key.pem")
    assert.are.equal("protocall gateway: -listen-cert '" .. dir .. "/none.pem': cannot be read: "
      .. "No such file or directory\nstatus 1\n", out)
    out = start(dir .. "/cert.pem", dir)
    assert.are.equal("protocall gateway: -listen-key '" .. dir .. "': cannot be read: Is a directory\nstatus 1\n", out)
    out = start(dir .. "/key.pem", dir .. "/key.pem")
    assert.are.equal("protocall gateway: -listen-cert '" .. dir .. "/key.pem': not a PEM certificate\nstatus 1\n", out)
    out = start(dir .. "/cert.pem", dir .. "/cert.pem")
    assert.are.equal("protocall gateway: -listen-key '" .. dir .. "/cert.pem': not the PEM key of -listen-cert"
      .. "\nstatus 1\n", out)
    os.execute("rm -rf " .. q(dir))
  end)

  it("exits when the TLS handshake with a plaintext upstream fails (no -plaintext)", function()
    upstream = helper.spawn_command("/usr/bin/python3 spec/gateway_upstream.py 0", "gateway_upstream.py")
    local out = R.capture("timeout 10 " .. BIN .. " gateway -listen 127.0.0.1:0 127.0.0.1:" .. upstream.port
      .. " 2>&1; echo status $?")
    -- as any failed read at start (64 + the code's number), never waited out
    assert.matches("^ERROR: code = UNAVAILABLE, message = TLS handshake with 127%.0%.0%.1:%d+: [^\n]+\n"
      .. "  hint: the server answered TLS with plaintext: if it serves h2c, add %-plaintext\nstatus 78\n$", out)
  end)

  it("serves a -proto schema against a plaintext upstream (no -plaintext), stderr hinting -plaintext", function()
    upstream = upstream or helper.spawn_command("/usr/bin/python3 spec/gateway_upstream.py 0", "gateway_upstream.py")
    local gw = G.start_gateway(BIN, upstream.port, "-I spec/fixtures/protos -proto gateway/library.proto", nil,
      true, true)
    finally(function()
      helper.stop(gw)
      os.remove(gw.log)
    end)
    for _ = 1, 2 do
      local code, body = G.request(gw, "/v1/shelves/1/books/2")
      assert.are.equal(503, code, body)
      assert.matches('^{"code":14,"message":"upstream connect error: TLS handshake failed', body)
    end
    helper.stop(gw)
    local f = assert(io.open(gw.log))
    local log = f:read("a")
    f:close()
    -- said at start by the check of the upstream's services (its own connection's handshake)
    assert.matches("protocall gateway: listening on [^\n]+\nprotocall gateway: warning: calls to the upstream"
      .. " 127%.0%.0%.1:%d+ will fail: TLS handshake with 127%.0%.0%.1:%d+: [^\n]*wrong version number\n"
      .. "  hint: the server answered TLS with plaintext: if it serves h2c, add %-plaintext\n", log)
    -- the hint with the line, said once for the calls failing alike
    local _, said = log:gsub("protocall gateway: upstream call gw%.Library%.GetBook failed: UNAVAILABLE: TLS "
      .. "handshake with 127%.0%.0%.1:%d+: [^\n]*wrong version number\n"
      .. "  hint: the server answered TLS with plaintext: if it serves h2c, add %-plaintext\n", "")
    assert.are.equal(1, said, log)
  end)
end)

-- connect-node's gRPC, Connect and gRPC-Web transports through `protocall gateway`
-- to the plain gRPC upstream (python3-grpcio): headers, trailers, details.
describe("protocall gateway with @connectrpc/connect-node", function()
  local peer = require "node_peer"
  local missing = peer.missing("@connectrpc/connect-node")
  local upstream, gateway, set
  setup(function()
    if missing then return end
    set = peer.descriptor_set({ "gateway/library.proto" }, { "spec/fixtures/protos", "core/schema/protos" })
    upstream = helper.spawn_command("/usr/bin/python3 spec/gateway_upstream.py 0", "gateway_upstream.py")
    gateway = start_gateway(upstream)
  end)
  teardown(function()
    if missing then return end
    helper.stop(gateway)
    helper.stop(upstream)
    os.remove(set)
  end)
  local EXPECTED = table.concat({
    "book shelves/1/books/2 title of shelves/1/books/2 (v) 7",
    "listed shelves/3/books/1", "listed shelves/3/books/2",
    "stream error ABORTED stream failed after 2",
    "error NOT_FOUND failed with NOT_FOUND r9 x-failed=NOT_FOUND",
    "headers ann header=yes trailer=1", "" }, "\n")
  for _, transport in ipairs { "grpc", "connect", "connect,json", "grpc-web", "grpc-web,json", "connect,h1",
    "grpc-web,h1" } do
    it(transport, function()
      if missing then return peer.skip(pending, "connect-node", missing) end
      assert.are.equal(EXPECTED, peer.run("gateway_client.mjs", { set, gateway.port, transport }))
    end)
  end
end)
