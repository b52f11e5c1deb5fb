-- Loading .proto source, services, the in-process server and transport, and
-- clients (README "Schemas" and "Services").
local pc = require "protocall"
local R = require "runtime"
local it54 = R.only54(it, pending)

local ROUTE = [[
syntax = "proto3";
package svc;
import "google/protobuf/timestamp.proto";
message Point { int32 x = 1; int32 y = 2; }
message Route { string name = 1; repeated Point points = 2; google.protobuf.Timestamp at = 3; }
message Distance { double length = 1; uint32 legs = 2; }
service Router {
  rpc Measure(Route) returns (Distance);
  rpc Walk(Route) returns (stream Point);
  rpc Record(stream Point) returns (Distance);
  rpc Chat(stream Point) returns (stream Point);
}
]]

local pool = pc.pool()
assert(pool:load(ROUTE, { name = "svc/route.proto" }))
local Point, Route, Distance = pool:type("svc.Point"), pool:type("svc.Route"), pool:type("svc.Distance")

local function raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok)
  return err
end

-- A fake clock and sleep for retries.
local function world()
  local w = { t = 0, sleeps = 0 }
  function w.clock() return w.t end
  function w.sleep(s) w.sleeps = w.sleeps + 1; w.t = w.t + s end
  function w.random() return 1 end
  return w
end

local function length(route)
  local len = 0
  for i = 2, #route.points do
    local a, b = route.points[i - 1], route.points[i]
    len = len + math.sqrt((a.x - b.x) ^ 2 + (a.y - b.y) ^ 2)
  end
  return len
end

describe("pc.load", function()
  it("returns the file with its types, services and imports", function()
    local f = pool:file("svc/route.proto")
    assert.are.equal("svc", f.package)
    assert.are.equal("proto3", f.syntax)
    assert.are.same({ "svc.Point", "svc.Route", "svc.Distance" }, f.messages)
    assert.are.same({ "svc.Router" }, f.services)
    assert.are.same({ "google/protobuf/timestamp.proto" }, f.dependencies)
    assert.is_not_nil(pool:type("google.protobuf.Timestamp"))
  end)

  it("names file:line:column and what was expected", function()
    local p = pc.pool()
    local ok, err = p:load('syntax = "proto3";\nmessage A {\n  int32 x = 1\n}\n', { name = "bad.proto" })
    assert.is_nil(ok)
    assert.matches("^bad%.proto:4:1: ", err)
    assert.is_nil(p:type("A"))
    ok, err = p:load('syntax = "proto3";\nmessage A { Missing m = 1; }\n', { name = "m.proto" })
    assert.is_nil(ok)
    assert.matches("^m%.proto:2:13: .*Missing", err)
  end)

  it("loads the same text twice harmlessly and refuses other text under a loaded name", function()
    local p = pc.pool()
    local src = 'syntax = "proto3"; package t; message A { int32 x = 1; }'
    local a = assert(p:load(src))
    local b = assert(p:load(src))
    assert.are.equal(a.name, b.name)
    assert.matches("^source%-%x+%.proto$", a.name)
    assert(p:load(src, { name = "a.proto" }) == nil or true)
    local ok, err = p:load('syntax = "proto3"; package t; message B { int32 x = 1; }', { name = a.name })
    assert.is_nil(ok)
    assert.are.equal(a.name .. ": a different file of this name is already loaded", err)
  end)

  it("resolves imports through import_paths and reports missing ones", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/lib"))
    local f = assert(io.open(dir .. "/lib/shared.proto", "w"))
    f:write('syntax = "proto3"; package lib; message Shared { string s = 1; }')
    f:close()
    f = assert(io.open(dir .. "/main.proto", "w"))
    f:write('syntax = "proto3"; package app; import "lib/shared.proto"; message M { lib.Shared s = 1; }')
    f:close()
    local p = pc.pool()
    local file = assert(p:load_file(dir .. "/main.proto", { import_paths = { dir } }))
    assert.are.equal("main.proto", file.name)
    assert.are.equal("lib.Shared", p:type("lib.Shared").full_name)
    local m = p:type("app.M"){ s = { s = "hi" } }
    assert.are.equal("hi", m.s.s)
    local ok, err = pc.pool():load('syntax = "proto3"; import "nowhere/x.proto";', { name = "n.proto" })
    assert.is_nil(ok)
    assert.matches("nowhere/x%.proto", err)
    os.execute("rm -rf " .. dir)
  end)

  it("refuses loads into a frozen pool", function()
    local p = pc.pool()
    p:freeze()
    local ok, err = p:load('syntax = "proto3"; message A {}', { name = "f.proto" })
    assert.is_nil(ok)
    assert.are.equal("f.proto: pool is frozen", err)
  end)

  it("reads a missing file as an error, not a raise", function()
    local ok, err = pc.pool():load_file("/nonexistent/x.proto")
    assert.is_nil(ok)
    assert.are.equal("/nonexistent/x.proto: File not found.", err)
  end)

  it("describes services and their methods", function()
    local s = pool:service("svc.Router")
    assert.are.equal("Router", s.name)
    assert.are.equal(4, #s.methods)
    local m = s.methods.Measure
    assert.are.equal("/svc.Router/Measure", m.path)
    assert.are.equal(Route, m.input)
    assert.are.equal(Distance, m.output)
    assert.is_false(m.server_streaming)
    assert.is_true(s.methods.Walk.server_streaming)
    assert.is_true(s.methods.Chat.client_streaming)
    assert.is_nil(pool:service("svc.Nope"))
  end)
end)

describe("pc.server and pc.inproc", function()
  it("round-trips a unary call through the wire format", function()
    local seen
    local server = pc.server({ ["svc.Router"] = {
      Measure = function(route, ctx)
        seen = { route = route, ctx = ctx }
        return { length = length(route), legs = #route.points - 1 }
      end,
    } }, { pool = pool })
    local t = pc.inproc(server)
    local bytes = t:unary("/svc.Router/Measure", pc.encode(Route{ points = { { x = 0, y = 0 }, { x = 3, y = 4 } } }),
      { timeout = 2, metadata = { { "k", "v" } } })
    local d = pc.decode(Distance, bytes)
    assert.are.equal(5, d.length)
    assert.are.equal(1, d.legs)
    assert.are.equal("svc.Router.Measure", seen.ctx.method)
    assert.are.same({ { "k", "v" } }, seen.ctx.metadata)
    assert.are.equal(2, seen.ctx.timeout)
    assert.is_number(seen.ctx.deadline)
  end)

  it("turns handler failures into statuses", function()
    local server = pc.server({ ["svc.Router"] = {
      Measure = function(route)
        if route.name == "denied" then error(pc.Error{ code = "PERMISSION_DENIED", message = "no" }) end
        if route.name == "bad" then return Point{} end
        if route.name == "nofield" then return { nope = 1 } end
        error("boom")
      end,
    } }, { pool = pool })
    local t = pc.inproc(server)
    local err = raised(t.unary, t, "/svc.Router/Measure", pc.encode(Route{ name = "denied" }))
    assert.are.equal("PERMISSION_DENIED", err.code)
    err = raised(t.unary, t, "/svc.Router/Measure", pc.encode(Route{ name = "x" }))
    assert.are.equal("UNKNOWN", err.code)
    assert.are.equal("svc.Router.Measure: unexpected error in the handler", err.message)
    assert.matches("boom$", err.value) -- in process, what the handler raised
    err = raised(t.unary, t, "/svc.Router/Measure", pc.encode(Route{ name = "bad" }))
    assert.are.equal("INTERNAL", err.code)
    assert.matches("svc.Distance expected, got svc.Point", err.message, 1, true)
    err = raised(t.unary, t, "/svc.Router/Measure", pc.encode(Route{ name = "nofield" }))
    assert.are.equal("INTERNAL", err.code)
    assert.are.equal("svc.Router.Measure response: svc.Distance.nope: no such field", err.message)
    err = raised(t.unary, t, "/svc.Router/Walk", pc.encode(Route{}))
    assert.are.equal("UNIMPLEMENTED", err.code)
    err = raised(t.unary, t, "/svc.Router/Measure", "\x0a\x05")
    assert.are.equal("INTERNAL", err.code)
    assert.matches("request failed to decode", err.message)
  end)

  it("checks a call's arguments as pc.grpc's transport does, at the caller's line", function()
    local called = false
    local t = pc.inproc(pc.server({ ["svc.Router"] = {
      Measure = function() called = true; return {} end,
      Chat = function() called = true end,
    } }, { pool = pool }))
    local here = debug.getinfo(1, "S").short_src
    local function check(want, fn)
      local line = debug.getinfo(fn, "S").linedefined -- each fn is one line
      local ok, e = pcall(fn)
      assert.is_false(ok)
      assert.are.equal(here .. ":" .. line .. ": " .. want, e)
    end
    local M = "/svc.Router/Measure"
    check("bad argument #2 to 'unary' (string expected, got nil)", function() t:unary(M, nil) end)
    check("bad argument #1 to 'unary' (string expected, got nil)", function() t:unary(nil, "") end)
    check("bad argument #1 to 'unary' (string expected, got number)", function() t:unary(5, "") end)
    check("bad argument #1 to 'server_stream' (method path 'svc.Router/Walk': expected /package.Service/Method)",
      function() t:server_stream("svc.Router/Walk", "") end)
    check("bad argument #3 to 'unary' (table expected, got string)", function() t:unary(M, "", "x") end)
    check("bad argument #3 to 'unary' (timeout: finite number of seconds expected, got nan)",
      function() t:unary(M, "", { timeout = 0 / 0 }) end)
    check("bad argument #3 to 'unary' (timeout: finite number of seconds expected, got inf)",
      function() t:unary(M, "", { timeout = math.huge }) end)
    check("bad argument #3 to 'unary' (unknown setting 'tiemout')", function() t:unary(M, "", { tiemout = 1 }) end)
    check("bad argument #3 to 'unary' (metadata: list of {key, value} pairs expected, got a table with key \"a\")",
      function() t:unary(M, "", { metadata = { a = "b" } }) end)
    check("bad argument #3 to 'unary' (metadata key 'grpc-status' is reserved for the transport)",
      function() t:unary(M, "", { metadata = { { "grpc-status", "5" } } }) end)
    check([[bad argument #2 to 'stream' (with_metadata: true, false or "present" expected, got string "yes")]],
      function() t:stream("/svc.Router/Chat", { with_metadata = "yes" }) end)
    check("calling 'unary' on bad self (protocall.Inproc expected, got string)", function() t.unary(M, "") end)
    assert.is_false(called)
  end)

  it("has next_attempt() as the network transports have it: always nil, no backoff to wait out", function()
    local t = pc.inproc(pc.server({}, { pool = pool }))
    assert.is_nil(t:next_attempt())
    local line = debug.getinfo(1, "l").currentline
    local ok, e = pcall(function() t.next_attempt() end)
    assert.is_false(ok)
    assert.are.equal(debug.getinfo(1, "S").short_src .. ":" .. (line + 1)
      .. ": calling 'next_attempt' on bad self (protocall.Inproc expected, got nil)", e)
  end)

  it("refuses unknown services, methods and non-function handlers", function()
    assert.has_error(function() pc.server({ ["svc.Nope"] = {} }, { pool = pool }) end,
      "pc.server: unknown service 'svc.Nope'")
    assert.has_error(function() pc.server({ ["svc.Router"] = { Nope = print } }, { pool = pool }) end,
      "pc.server: svc.Router has no method 'Nope'")
    assert.has_error(function() pc.server({ ["svc.Router"] = { Measure = 1 } }, { pool = pool }) end,
      "pc.server: svc.Router.Measure: function expected, got number")
  end)
end)

describe("pc.client", function()
  local function router(handlers) return pc.inproc(pc.server({ ["svc.Router"] = handlers }, { pool = pool })) end

  it("calls with a message or a plain table and returns a message", function()
    local stub = pc.client("svc.Router", { pool = pool, transport = router {
      Measure = function(route) return Distance{ length = length(route), legs = #route.points - 1 } end,
    } })
    local d = stub:Measure{ points = { { x = 0, y = 0 }, { x = 3, y = 4 }, { x = 3, y = 0 } } }
    assert.are.equal(Distance, pc.type_of(d))
    assert.are.equal(9, d.length)
    d = stub:Measure(Route{ points = { { x = 1, y = 1 } } })
    assert.are.equal(0, d.legs)
    local err = raised(stub.Measure, stub, Point{})
    assert.matches("svc.Router.Measure request: svc.Route expected, got svc.Point", err, 1, true)
    -- a message of another pool's svc.Route says so
    local other = pc.pool()
    assert(other:load(ROUTE, { name = "svc/route.proto" }))
    err = raised(stub.Measure, stub, other:type("svc.Route") {})
    assert.matches("svc.Router.Measure request: svc.Route expected, got svc.Route of another pool", err, 1, true)
    err = raised(stub.Measure, stub, { nope = 1 })
    assert.matches("svc.Route", err, 1, true)
  end)

  it("retries a flaky handler under the client's retry policy", function()
    local w, calls = world(), 0
    local stub = pc.client("svc.Router", {
      pool = pool, retry = pc.Retry{ initial = 1 }, timeout = 30,
      clock = w.clock, sleep = w.sleep, random = w.random,
      transport = router {
        Measure = function()
          calls = calls + 1
          if calls < 3 then error(pc.Error{ code = "UNAVAILABLE", message = "flaky" }) end
          return { legs = calls }
        end,
      },
    })
    assert.are.equal(3, stub:Measure{}.legs)
    assert.are.equal(3, calls)
    assert.are.equal(2, w.sleeps)
    calls = 0
    local err = raised(stub.Measure, stub, {}, { retry = false })
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal(1, calls)
  end)

  it("sends the attempt's timeout and the merged metadata to the handler", function()
    local seen
    local stub = pc.client("svc.Router", {
      pool = pool, timeout = 7, metadata = { { "x-default", "1" } },
      transport = router { Measure = function(_, ctx) seen = ctx; return {} end },
    })
    stub:Measure({}, { metadata = { { "x-call", "2" } } })
    assert.is_true(seen.timeout > 6 and seen.timeout <= 7)
    assert.are.same({ { "x-call", "2" }, { "x-default", "1" } }, seen.metadata)
  end)

  it("applies per-method defaults over the service's", function()
    local seen
    local stub = pc.client("svc.Router", {
      pool = pool, timeout = 7, methods = { Measure = { timeout = 3 } },
      transport = router { Measure = function(_, ctx) seen = ctx; return {} end },
    })
    stub:Measure{}
    assert.is_true(seen.timeout > 2 and seen.timeout <= 3)
    assert.has_error(function() pc.client("svc.Router", { pool = pool, transport = {}, methods = { Nope = {} } }) end,
      "pc.client: svc.Router has no method 'Nope'")
  end)

  it("streams server responses", function()
    local stub = pc.client("svc.Router", { pool = pool, transport = router {
      Walk = function(route, ctx) for _, p in pc.ipairs(route.points) do ctx.send(p) end end,
    } })
    local xs = {}
    for p in stub:Walk{ points = { { x = 1 }, { x = 2 }, { x = 3 } } } do xs[#xs + 1] = p.x end
    assert.are.same({ 1, 2, 3 }, xs)
    local n = 0
    for _ in stub:Walk{} do n = n + 1 end
    assert.are.equal(0, n)
  end)

  it("retries a stream only before its first response", function()
    local w = world()
    local attempts, script = 0, nil
    -- A transport whose stream fails per `script` before or after responses.
    local transport = {
      server_stream = function(_, _, _, _)
        attempts = attempts + 1
        local step = script[attempts]
        local i = 0
        return function()
          i = i + 1
          local item = step[i]
          if type(item) == "table" then error(item, 0) end
          return item and pc.encode(Point{ x = item })
        end
      end,
    }
    local stub = pc.client("svc.Router", { pool = pool, transport = transport, retry = pc.Retry{},
      clock = w.clock, sleep = w.sleep, random = w.random })
    local unavailable = pc.Error{ code = "UNAVAILABLE", message = "reset" }
    script = { { unavailable }, { 1, 2 } }
    local xs = {}
    for p in stub:Walk{} do xs[#xs + 1] = p.x end
    assert.are.same({ 1, 2 }, xs)
    assert.are.equal(2, attempts)
    attempts, script = 0, { { 1, unavailable }, { 5 } }
    local iter = stub:Walk{}
    assert.are.equal(1, iter().x)
    local err = raised(iter)
    assert.are.equal(unavailable, err)
    assert.are.equal(1, attempts)
  end)

  it("fails a response that does not decode with INTERNAL, local, not retried", function()
    local attempts = 0
    local stub = pc.client("svc.Router", { pool = pool, retry = pc.Retry{}, transport = {
      unary = function() attempts = attempts + 1; return "\x0a\xff" end,
    } })
    local err = raised(stub.Measure, stub, {})
    assert.are.equal("INTERNAL", err.code)
    assert.is_true(err["local"])
    assert.matches("^svc%.Router%.Measure: response failed to decode", err.message)
    assert.are.equal(1, attempts)
  end)

  it("refuses client-streaming methods, a missing transport and unknown services", function()
    local stub = pc.client("svc.Router", { pool = pool, transport = {} })
    assert.has_error(function() stub:Record{} end,
      "svc.Router.Record: client-streaming and bidirectional calls are not supported yet")
    assert.has_error(function() stub:Chat{} end,
      "svc.Router.Chat: client-streaming and bidirectional calls are not supported yet")
    assert.has_error(function() pc.client("svc.Router", { pool = pool }) end,
      "pc.client: option 'transport' is required (pc.inproc(server) or pc.grpc(target))")
    assert.has_error(function() pc.client("svc.Nope", { pool = pool, transport = {} }) end,
      "pc.client: unknown service 'svc.Nope'")
    assert.has_error(function() pc.client("svc.Router", { pool = pool, transport = {}, retires = 1 }) end,
      "pc.client: unknown option 'retires'")
  end)

  it("refuses bad metadata and compression at the caller's line, before any attempt", function()
    local attempts = 0
    local transport = router { Measure = function() attempts = attempts + 1; return {} end }
    local map_md = 'metadata: list of {key, value} pairs expected, got a table with key "x-a"'
    assert.has_error(function() pc.client("svc.Router", { pool = pool, transport = transport,
      metadata = { ["x-a"] = "1" } }) end, "pc.client: " .. map_md)
    assert.has_error(function() pc.client("svc.Router", { pool = pool, transport = transport,
      methods = { Measure = { metadata = { ["x-a"] = "1" } } } }) end, "pc.client: methods.Measure: " .. map_md)
    assert.has_error(function() pc.client("svc.Router", { pool = pool, transport = transport,
      compression = "brotli" }) end, [[pc.client: compression 'brotli': expected "gzip" or "identity"]])
    local stub = pc.client("svc.Router", { pool = pool, transport = transport })
    assert.has_error(function() stub:Measure({}, { metadata = { ["x-a"] = "1" } }) end,
      "bad argument #2 to 'Measure' (" .. map_md .. ")")
    assert.has_error(function() stub:Measure({}, { metadata = { { "X-Upper", "2" } } }) end,
      "bad argument #2 to 'Measure' (metadata key 'X-Upper': only lowercase letters, digits, '_', '-', '.')")
    assert.has_error(function() stub:Measure({}, { compression = "brotli" }) end,
      [[bad argument #2 to 'Measure' (compression 'brotli': expected "gzip" or "identity")]])
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() stub:Measure({}, { metadata = { ["x-a"] = "1" } }) end)
    assert.is_false(ok)
    assert.are.equal("spec/service_spec.lua:" .. line .. ":", err:match("^[^:]*:%d+:"))
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(function() stub:Measure({ nope = 1 }) end)
    assert.is_false(ok)
    assert.are.equal("spec/service_spec.lua:" .. line .. ": svc.Router.Measure request: svc.Route.nope: "
      .. "no such field", err)
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(function() stub:Measure({}, { timot = 1 }) end)
    assert.is_false(ok)
    assert.are.equal("spec/service_spec.lua:" .. line .. ": bad argument #2 to 'Measure' (unknown option "
      .. "'timot')", err)
    assert.has_error(function() stub:Measure({}, { timeout = -1 }) end,
      "bad argument #2 to 'Measure' (timeout: positive number of seconds expected, got -1)")
    assert.has_error(function() stub:Measure({}, "fast") end,
      "bad argument #2 to 'Measure' (table of options expected, got string)")
    assert.are.equal(0, attempts)
    assert.are.equal("DEFAULT ok", (function()
      stub:Measure({}, { metadata = pc.DEFAULT, compression = "gzip" })
      return "DEFAULT ok"
    end)())
    assert.are.equal(1, attempts)
  end)

  it("refuses unknown or bad per-method options where the client is made", function()
    local transport = router { Measure = function() return {} end }
    assert.has_error(function() pc.client("svc.Router", { pool = pool, transport = transport,
      methods = { Measure = { timout = 1 } } }) end, "pc.client: methods.Measure: unknown option 'timout'")
    assert.has_error(function() pc.client("svc.Router", { pool = pool, transport = transport,
      methods = { Measure = 5 } }) end, "pc.client: methods.Measure: table expected, got number")
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() pc.client("svc.Router", { pool = pool, transport = transport, timeout = -1 }) end)
    assert.is_false(ok)
    assert.are.equal("spec/service_spec.lua:" .. line .. ": pc.client: svc.Router.Measure: timeout: positive "
      .. "number of seconds expected, got -1", err)
  end)

  it("makes each method a callable whose cache_info() reports its plan cache", function()
    local stub = pc.client("svc.Router", { pool = pool, transport = router {
      Measure = function() return {} end,
    } })
    assert.are.equal("table", type(stub.Measure)) -- a callable, not a plain function
    assert.are.same({ hits = 0, misses = 0, size = 0, capacity = 4 }, stub.Measure:cache_info())
    stub:Measure({}, { timeout = 5 })
    stub:Measure({}, { timeout = 5 })
    assert.are.same({ hits = 1, misses = 1, size = 1, capacity = 4 }, stub.Measure:cache_info())
    assert.has_error(function() stub.Measure.x = 1 end, "protocall.Method is read-only")
    local _, err = pcall(function() stub:Measure({}, { timeout = "soon" }) end)
    assert.matches("^[^:]*service_spec.lua:%d+: bad argument #2 to 'Measure'", err)
  end)

  it("refuses a plain-table request nested past 1000 levels before recursing", function()
    -- 25,000 levels used to overflow the C stack in the constructor.
    local p2 = pc.pool()
    assert(p2:load([[syntax = "proto3"; package deep;
      message N { N child = 1; int32 v = 2; } service S { rpc Call(N) returns (N); }]],
      { name = "deep.proto" }))
    local stub = pc.client("deep.S", { pool = p2, transport = pc.inproc(pc.server({
      ["deep.S"] = { Call = function(r) return r end } }, { pool = p2 })) })
    local function deep(n)
      local t = { v = 1 }
      for _ = 1, n do t = { child = t } end
      return t
    end
    local _, err = pcall(function() stub:Call(deep(25000)) end)
    assert.matches("service_spec.lua:%d+: deep.S.Call request: deep.N.child: tables nested "
      .. "deeper than 1000 levels$", err)
    local r, n = stub:Call(deep(50)), 0
    while r.child do r, n = r.child, n + 1 end
    assert.are.equal(50, n)
    assert.are.equal(1, r.v)
  end)

  it("names the service and method when a stub has no such method", function()
    local stub = pc.client("svc.Router", { pool = pool, transport = {} })
    assert.has_error(function() stub:Nope({}) end, "svc.Router has no method 'Nope'")
    assert.has_error(function() return stub.measure end, "svc.Router has no method 'measure'")
  end)
end)

describe("in-process server streaming", function()
  local function walker(handler, opts)
    local o = { pool = pool,
                transport = pc.inproc(pc.server({ ["svc.Router"] = { Walk = handler } }, { pool = pool })) }
    for k, v in pairs(opts or {}) do o[k] = v end
    return pc.client("svc.Router", o)
  end

  it("hands each response to the caller as it is sent", function()
    local log = {}
    local stub = walker(function(_, ctx)
      for i = 1, 3 do log[#log + 1] = "send " .. i; ctx.send{ x = i } end
      log[#log + 1] = "end"
    end)
    for p in stub:Walk{} do log[#log + 1] = "got " .. p.x end
    assert.are.same({ "send 1", "got 1", "send 2", "got 2", "send 3", "got 3", "end" }, log)
  end)

  it("stops the handler when the caller leaves the loop early", function()
    local sent = 0
    local stub = walker(function(_, ctx) for i = 1, 100 do sent = i; ctx.send{ x = i } end end)
    for p in stub:Walk{} do if p.x == 2 then break end end
    assert.are.equal(2, sent)
  end)

  it54("closes the handler's to-be-closed variables when the caller's loop breaks",
       "to-be-closed variables and the generic for's closing value", function()
    local sent = 0
    -- through the transport, the closing value stops it at once (compiled
    -- here so the file parses under LuaJIT too)
    local walk = assert(load([[
      local done = ...
      return function(_, ctx)
        local guard <close> = setmetatable({}, { __close = done })
        for i = 1, 100 do ctx.send{ x = i } end
      end]]))(function() sent = "closed" end)
    local t = pc.inproc(pc.server({ ["svc.Router"] = { Walk = walk } }, { pool = pool }))
    for bytes in t:server_stream("/svc.Router/Walk", pc.encode(Route{}), {}) do -- luacheck: ignore 512 (breaks early)
      assert.are.equal(1, pc.decode(Point, bytes).x)
      break
    end
    assert.are.equal("closed", sent)
  end)

  it54("closes the stream when a loop over a stub's server-streaming method breaks",
       "to-be-closed variables and the generic for's closing value", function()
    local closed = 0
    local walk = assert(load([[
      local done = ...
      return function(_, ctx)
        local guard <close> = setmetatable({}, { __close = done })
        for i = 1, 100 do ctx.send{ x = i } end
      end]]))(function() closed = closed + 1 end)
    local stub = walker(walk)
    for p in stub:Walk{} do -- luacheck: ignore 512 (breaks early)
      assert.are.equal(1, p.x)
      break
    end
    assert.are.equal(1, closed)
    -- with resume, the attempt open when the loop breaks
    for p in stub:Walk({}, { resume = function(req) return req end }) do -- luacheck: ignore 512 (breaks early)
      assert.are.equal(1, p.x)
      break
    end
    assert.are.equal(2, closed)
    -- through an interceptor
    local t = pc.inproc(pc.server({ ["svc.Router"] = { Walk = walk } }, { pool = pool }))
    local seen = 0
    local intercepted = pc.client("svc.Router", { pool = pool, transport = t,
      interceptors = { function(call, nxt) seen = seen + 1 return nxt(call) end } })
    for p in intercepted:Walk{} do -- luacheck: ignore 512 (breaks early)
      assert.are.equal(1, p.x)
      break
    end
    assert.are.same({ 3, 1 }, { closed, seen })
  end)

  it("gives the generic for a closing value (4th) for a stub's server stream", function()
    local stub = walker(function(_, ctx) ctx.send{ x = 1 } ctx.send{ x = 2 } end)
    local it, _, _, closing = stub:Walk{}
    assert.is_function(it)
    assert.are.equal(1, it().x)
    closing:close() -- what LuaJIT's users call by hand (README)
    assert.is_nil(it())
  end)

  it("cancels a stream from its call object (the stub's second value, the transport's fourth)", function()
    local sent, stopped = 0, false
    local stub = walker(function(_, ctx)
      for i = 1, 100 do sent = i; ctx.send{ x = i } end
      stopped = "finished"
    end)
    local it, call = stub:Walk{}
    assert.are.equal(1, it().x)
    call:cancel()
    local e = raised(it)
    assert.are.equal("CANCELLED", e.code)
    assert.are.equal("svc.Router.Walk: cancelled by the client", e.message)
    assert.is_nil(it())
    assert.are.same({ 1, false }, { sent, stopped }) -- the handler stopped where it was
    local t = pc.inproc(pc.server({ ["svc.Router"] = { Walk = function(_, ctx)
      for i = 1, 100 do sent = i; ctx.send{ x = i } end
    end } }, { pool = pool }))
    local iter, _, _, tcall = t:server_stream("/svc.Router/Walk", pc.encode(Route{}), {})
    assert.are.equal(1, pc.decode(Point, iter()).x)
    tcall:cancel()
    e = raised(iter)
    assert.are.equal("CANCELLED", e.code)
    assert.is_nil(iter())
    assert.are.equal(1, sent)
  end)

  it("delivers the responses sent before a handler error, then raises it", function()
    local stub = walker(function(_, ctx)
      ctx.send{ x = 1 }
      ctx.send{ x = 2 }
      error(pc.Error{ code = "INTERNAL", message = "mid-stream" })
    end)
    local iter = stub:Walk{}
    assert.are.equal(1, iter().x)
    assert.are.equal(2, iter().x)
    local err = raised(iter)
    assert.are.equal("INTERNAL", err.code)
    assert.are.equal("mid-stream", err.message)
    assert.is_nil(iter())
    -- a bad response is an INTERNAL status naming no protocall file
    iter = walker(function(_, ctx) ctx.send{ x = 1 }; ctx.send{ nope = 1 } end):Walk{}
    assert.are.equal(1, iter().x)
    err = raised(iter)
    assert.are.equal("INTERNAL", err.code)
    assert.are.equal("svc.Router.Walk response: svc.Point.nope: no such field", err.message)
  end)

  it("takes a returned list of responses after the sent ones, and refuses anything else", function()
    local xs = {}
    for p in walker(function(_, ctx) ctx.send{ x = 1 }; return { { x = 2 }, Point{ x = 3 } } end):Walk{} do
      xs[#xs + 1] = p.x
    end
    assert.are.same({ 1, 2, 3 }, xs)
    for _, bad in ipairs { { x = 1 }, Point{ x = 1 }, "x" } do
      local err = raised(function() for _ in walker(function() return bad end):Walk{} do end end)
      assert.are.equal("INTERNAL", err.code)
      assert.are.equal("svc.Router.Walk: handler must return a list of responses or nil", err.message)
    end
  end)

  it("passes the handler's own yields through to the running coroutine", function()
    local stub = walker(function(_, ctx)
      for i = 1, 2 do
        local answer = coroutine.yield("sleep", i)
        ctx.send{ x = answer }
      end
    end)
    local got, yields = {}, {}
    local co = coroutine.wrap(function()
      for p in stub:Walk{} do got[#got + 1] = p.x end
      return "done"
    end)
    local a, b = co()
    while a ~= "done" do
      yields[#yields + 1] = a .. " " .. b
      a, b = co(b * 10)
    end
    assert.are.same({ "sleep 1", "sleep 2" }, yields)
    assert.are.same({ 10, 20 }, got)
  end)

  it("raises DEADLINE_EXCEEDED as soon as the deadline has passed, between messages", function()
    local sent = 0
    local stub = walker(function(_, ctx)
      ctx.send{ x = 1 }
      sent = 1
      while pc.now() <= ctx.deadline do end -- busy until the deadline
      ctx.send{ x = 2 }
      sent = 2
      for i = 3, 100 do ctx.send{ x = i }; sent = i end
    end, { timeout = 0.05 })
    local iter = stub:Walk{}
    assert.are.equal(1, iter().x)
    local err = raised(iter)
    assert.are.equal("DEADLINE_EXCEEDED", err.code)
    assert.are.equal("svc.Router.Walk: deadline exceeded", err.message)
    assert.are.equal(1, sent)
    assert.is_nil(iter())
  end)
end)

describe("messages that cannot be encoded", function()
  it("fail a handler's response with INTERNAL and a request at the caller", function()
    local p = pc.pool()
    assert(p:load('syntax = "proto3"; package u8; message R { string s = 1; } '
      .. 'service S { rpc Hello(R) returns (R); rpc W(R) returns (stream R); }', { name = "u8.proto" }))
    local c = pc.client("u8.S", { pool = p, transport = pc.inproc(pc.server({ ["u8.S"] = {
      Hello = function() return { s = "\255" } end,
      W = function(_, ctx) ctx.send({ s = "ok" }); ctx.send({ s = "\255" }) end,
    } }, { pool = p })) })
    local ok, err = pcall(c.Hello, c, {})
    assert.is_false(ok)
    assert.are.equal("INTERNAL", err.code)
    -- refused as the response's table becomes a message, as a value of the wrong type is
    assert.are.equal("u8.S.Hello response: u8.R.s: invalid UTF-8 at byte 1", err.message)
    ok, err = pcall(c.Hello, c, { s = "\255" })
    assert.is_false(ok)
    assert.are.equal("u8.S.Hello request: u8.R.s: invalid UTF-8 at byte 1", err)
    local it = c:W{}
    assert.are.equal("ok", it().s)
    ok, err = pcall(it)
    assert.is_false(ok)
    assert.are.equal("INTERNAL", err.code)
    assert.are.equal("u8.S.W response: u8.R.s: invalid UTF-8 at byte 1", err.message)
  end)
end)

describe("in-process client streaming and bidirectional calls", function()
  local function stub_of(handlers, opts)
    opts = opts or {}
    opts.pool = pool
    return pc.client("svc.Router",
      { pool = pool, transport = pc.inproc(pc.server({ ["svc.Router"] = handlers }, opts)) })
  end
  local function record(ctx)
    local sum = 0
    for p in ctx.recv, ctx do sum = sum + p.x end
    return { length = sum, legs = 1 }
  end
  local function chat(ctx)
    while true do
      local p = ctx:recv()
      if p == nil then return end
      ctx.send { x = p.x * 10, y = p.y }
    end
  end

  it("reads a client stream with ctx:recv (nil at its end) and returns the one response", function()
    local call = stub_of({ Record = record }):Record()
    for i = 1, 4 do call:send(Point{ x = i }) end
    local d = call:close_and_recv()
    assert.are.equal(10, d.length)
  end)

  it("answers a bidirectional stream with ctx.send, in order, as requests arrive", function()
    local call = stub_of({ Chat = chat }):Chat()
    call:send{ x = 1 }
    assert.are.equal(10, call:recv().x)
    call:send{ x = 2 }
    call:send{ x = 3 }
    assert.are.equal(20, call:recv().x)
    assert.are.equal(30, call:recv().x)
    call:close_send()
    assert.is_nil(call:recv())
    assert.is_nil(call:recv())
    assert.are.same({}, call:trailers())
  end)

  it("lets one task send while another receives", function()
    local call = stub_of({ Chat = chat }):Chat()
    local got = {}
    pc.spawn(function()
      for r in function() return call:recv() end do got[#got + 1] = r.x end
    end)
    pc.spawn(function()
      for i = 1, 3 do
        pc.sleep(0.01)
        call:send{ x = i }
      end
      call:close_send()
    end)
    pc.run()
    assert.are.same({ 10, 20, 30 }, got)
  end)

  it("fails a caller that waits for a response the handler cannot give yet, outside any task", function()
    local call = stub_of({ Chat = chat }):Chat()
    local err = raised(call.recv, call)
    assert.are.equal("FAILED_PRECONDITION", err.code)
    assert.matches("svc.Router.Chat: the handler waits for a request", err.message, 1, true)
  end)

  it("raises the handler's failures, unknown methods and undecodable requests at send or recv", function()
    local stub = stub_of({
      Record = function(ctx)
        ctx:recv()
        error(pc.Error{ code = "OUT_OF_RANGE", message = "too far" })
      end,
      Chat = function() return 5 end,
    })
    local call = stub:Record()
    call:send{ x = 1 }
    local err = raised(call.close_and_recv, call)
    assert.are.equal("OUT_OF_RANGE", err.code)
    err = raised(call.recv, call)
    assert.are.equal("OUT_OF_RANGE", err.code)
    call = stub:Chat()
    call:close_send()
    err = raised(call.recv, call)
    assert.are.equal("INTERNAL", err.code)
    assert.matches("answers with ctx.send and returns nothing", err.message, 1, true)
    local t = pc.inproc(pc.server({ ["svc.Router"] = { Record = record } }, { pool = pool }))
    local raw = t:stream("/svc.Router/Nope", {})
    err = raised(raw.recv, raw)
    assert.are.equal("UNIMPLEMENTED", err.code)
    raw = t:stream("/svc.Router/Record", {})
    err = raised(raw.send, raw, "\x0a\x05")
    assert.are.equal("INTERNAL", err.code)
    assert.matches("request failed to decode", err.message)
    raw = t:stream("/svc.Router/Record", {})
    raw:cancel()
    assert.are.equal("CANCELLED", raised(raw.recv, raw).code)
  end)

  it("runs server interceptors around stream handlers, with no request", function()
    local seen
    local call = stub_of({ Record = record }, { interceptors = { function(c, next)
      seen = { method = c.method, request = c.request }
      return next(c)
    end } }):Record()
    call:send{ x = 7 }
    assert.are.equal(7, call:close_and_recv().length)
    assert.are.same({ method = "svc.Router.Record" }, seen)
  end)
end)
