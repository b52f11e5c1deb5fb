-- pc.listen (doc/guide.md "Serving"): protocall's client against protocall's
-- server in one Lua state (the listener and the calls are tasks of one
-- pc.run), over h2c and TLS; all four call shapes, metadata, deadlines,
-- cancellation, errors, shutdown.
local pc = require "protocall"

local pool = pc.pool()
assert(pool:load([[
syntax = "proto3";
package srv;
message Point { int32 x = 1; int32 y = 2; string note = 3; }
message Sum { int64 total = 1; uint32 count = 2; }
service Calc {
  rpc Add(Point) returns (Sum);
  rpc Count(Point) returns (stream Point);
  rpc Total(stream Point) returns (Sum);
  rpc Double(stream Point) returns (stream Point);
}
]], { name = "srv/calc.proto" }))

local seen = {}

local handlers = {
  Add = function(p, ctx)
    seen.metadata = ctx.metadata
    seen.timeout = ctx.timeout
    if p.note == "fail" then error(pc.Error { code = "FAILED_PRECONDITION", message = "no: 100% ✓" }) end
    if p.note == "details" then
      error(pc.Error { code = "INVALID_ARGUMENT", message = "bad",
        details = { pc.type("google.rpc.ErrorInfo") { reason = "TOO_FAR", domain = "srv" } } })
    end
    if p.note == "raw details" then
      local st = pc.type("google.rpc.Status") { code = 3, message = "raw" }
      error(pc.Error { code = "INVALID_ARGUMENT", message = "bad", details = pc.encode(st) })
    end
    if p.note == "bad details" then
      error(pc.Error { code = "INVALID_ARGUMENT", message = "bad", details = { 42 } })
    end
    if p.note == "crash" then error("boom at /secret/path") end
    if p.note == "crash0" then error("localhost:50051: conn refused", 0) end -- no position of Lua's
    if p.note == "header5" then ctx:set_header("x-n", 5) end
    if p.note == "sleep" then
      while not ctx:cancelled() do pc.sleep(0.01) end
      seen.cancelled = true
      return { total = -1 }
    end
    if p.note == "nil" then return nil end
    if p.note == "string" then return "oops" end
    if p.note == "unknown field" then return { total = 1, nope = 2 } end
    if p.note == "yield" then coroutine.yield() end -- not a wait of protocall's
    if p.note == "spaces" then
      ctx:set_header("x-sp", " h ")
      ctx:set_trailer("x-sp", "t ")
    end
    if p.note == "spaces error" then
      error(pc.Error { code = "ABORTED", message = "m", metadata = { { "x-sp", " e" } } })
    end
    if p.note == "meta" then
      ctx:set_header("x-head", "h1")
      ctx:set_trailer("x-trail", "t1")
      ctx:set_trailer("x-bin", "\0\255")
    end
    return { total = p.x + p.y, count = 1 }
  end,
  Count = function(p, ctx)
    for i = 1, p.x do
      if ctx:cancelled() then seen.stream_cancelled = true; return end
      ctx.send { x = i }
      if p.note == "slow" then pc.sleep(0.01) end
    end
    if p.note == "fail" then error(pc.Error { code = "ABORTED", message = "after" }) end
    if p.note == "five" then return 5 end -- a bug: a server-streaming handler returns a list or nil
  end,
  Total = function(ctx)
    local total, count = 0, 0
    while true do
      local p = ctx:recv()
      if p == nil then break end
      total, count = total + p.x, count + 1
    end
    return { total = total, count = count }
  end,
  Double = function(ctx)
    while true do
      local p = ctx:recv()
      if p == nil then return end
      if p.x == 99 then return { x = 1 } end -- a bug: a bidirectional handler answers with ctx.send
      ctx.send { x = p.x * 2 }
    end
  end,
}

local server = pc.server({ ["srv.Calc"] = handlers }, { pool = pool })

-- Runs `fn(transport, listener)` as a task beside the serve task of a
-- listener of `srv` (listen options `opts`; a pc.grpc transport with
-- `target_opts` over `scheme`, default "http"), then shuts the listener
-- down; errors of `fn` are raised.
local function over_network(srv, fn, opts, target_opts, scheme)
  local l = pc.listen(srv, "127.0.0.1:0", opts)
  local err
  pc.spawn(function() l:serve() end)
  pc.spawn(function()
    local t = pc.grpc((scheme or "http") .. "://127.0.0.1:" .. l.port, target_opts)
    local ok, e = pcall(fn, t, l)
    if not ok then err = e end
    t:close()
    l:shutdown(1)
  end)
  pc.run()
  if err then error(err, 0) end
end

-- Runs `fn(stub, transport, listener)` over the network with `server`.
local function with_server(opts, fn, target_opts, scheme)
  over_network(server, function(t, l)
    return fn(pc.client("srv.Calc", { transport = t, pool = pool }), t, l)
  end, opts, target_opts, scheme)
end

local function raised(fn)
  local ok, e = pcall(fn)
  assert.is_false(ok)
  return e
end

-- " (handler defined at spec/server_spec.lua:24)": what the log adds to a
-- bad answer found after the handler `name` returned (no frame of it in
-- the traceback)
local function defined_at(name)
  return " (handler defined at spec/server_spec.lua:" .. debug.getinfo(handlers[name], "S").linedefined .. ")"
end

describe("pc.listen", function()
  it("sends GOAWAY to a connection past max_connection_age: the client moves to a new one, no call fails", function()
    with_server({ max_connection_age = 0.2 }, function(stub, t, l)
      local t0 = pc.now()
      while t.channel:goaways() < 2 do
        assert.are.equal(3, stub:Add({ x = 1, y = 2 }).total)
        assert(pc.now() - t0 < 10, "no GOAWAY came")
        pc.sleep(0.02)
      end
      assert.is_true(l:connections() <= 2)
    end)
  end)

  it("closes an aged connection after max_connection_age_grace, ending its calls", function()
    with_server({ max_connection_age = 0.1, max_connection_age_grace = 0.2 }, function(stub)
      local ok, err = pcall(stub.Add, stub, { note = "sleep" }, { timeout = 30 })
      assert.is_false(ok)
      assert.are.equal("UNAVAILABLE", err.code)
    end)
  end)

  it("serves a unary call", function()
    with_server(nil, function(stub)
      local s = stub:Add { x = 2, y = 40 }
      assert.equals(42, s.total)
      assert.equals(1, s.count)
    end)
  end)

  it("serves a server stream", function()
    with_server(nil, function(stub)
      local got = {}
      for p in stub:Count { x = 5 } do got[#got + 1] = p.x end
      assert.same({ 1, 2, 3, 4, 5 }, got)
    end)
  end)

  it("serves a client stream", function()
    with_server(nil, function(stub)
      local c = stub:Total()
      for i = 1, 10 do c:send { x = i } end
      local s = c:close_and_recv()
      assert.equals(55, s.total)
      assert.equals(10, s.count)
    end)
  end)

  it("serves a bidirectional stream, message by message", function()
    with_server(nil, function(stub)
      local c = stub:Double()
      for i = 1, 3 do
        c:send { x = i }
        assert.equals(i * 2, c:recv().x)
      end
      c:close_send()
      assert.is_nil(c:recv())
    end)
  end)

  it("passes request metadata and the timeout to the handler", function()
    with_server(nil, function(stub)
      stub:Add({ x = 1 }, { metadata = { { "x-user", "ann" }, { "x-raw-bin", "\0\1\2" } }, timeout = 30 })
      local got = {}
      for _, kv in ipairs(seen.metadata) do got[kv[1]] = kv[2] end
      assert.equals("ann", got["x-user"])
      assert.equals("\0\1\2", got["x-raw-bin"])
      assert.is_nil(got["grpc-timeout"])
      assert.is_true(seen.timeout > 29 and seen.timeout <= 30)
    end)
  end)

  it("sends response headers and trailers the handler set", function()
    with_server(nil, function(_, t)
      local req = pc.encode(pool:type("srv.Point") { note = "meta" })
      local _, md = t:unary("/srv.Calc/Add", req, { with_metadata = true })
      local h, tr = {}, {}
      for _, kv in ipairs(md.headers) do h[kv[1]] = kv[2] end
      for _, kv in ipairs(md.trailers) do tr[kv[1]] = kv[2] end
      assert.equals("h1", h["x-head"])
      assert.equals("t1", tr["x-trail"])
      assert.equals("\0\255", tr["x-bin"])
    end)
  end)

  it("carries metadata values with leading or trailing spaces both ways (gRPC allows them)", function()
    -- RFC 9113 refuses them in HTTP/2 fields; grpc-core and grpcio take them
    with_server(nil, function(_, t)
      local req = pc.encode(pool:type("srv.Point") { note = "spaces" })
      local _, md = t:unary("/srv.Calc/Add", req, { with_metadata = true, metadata = { { "x-c", " c " } } })
      local h, tr, got = {}, {}, {}
      for _, kv in ipairs(md.headers) do h[kv[1]] = kv[2] end
      for _, kv in ipairs(md.trailers) do tr[kv[1]] = kv[2] end
      for _, kv in ipairs(seen.metadata) do got[kv[1]] = kv[2] end
      assert.equals(" h ", h["x-sp"])
      assert.equals("t ", tr["x-sp"])
      assert.equals(" c ", got["x-c"])
      local ok, e = pcall(t.unary, t, "/srv.Calc/Add", pc.encode(pool:type("srv.Point") { note = "spaces error" }))
      assert.is_false(ok)
      assert.equals("ABORTED", e.code)
      assert.equals(" e", e.metadata[1] and e.metadata[1][2])
    end)
  end)

  it("sends a pc.Error's code and message (percent-encoded on the wire)", function()
    with_server(nil, function(stub)
      local e = raised(function() stub:Add { note = "fail" } end)
      assert.equals("FAILED_PRECONDITION", e.code)
      assert.equals("no: 100% ✓", e.message)
    end)
  end)

  it("sends a pc.Error's details as grpc-status-details-bin (a list of messages, or bytes)", function()
    with_server(nil, function(stub)
      local e = raised(function() stub:Add { note = "details" } end)
      assert.equals("INVALID_ARGUMENT", e.code)
      assert.equals("TOO_FAR", e.details[1].reason)
      assert.equals("srv", e.details[1].domain)
      e = raised(function() stub:Add { note = "raw details" } end)
      assert.equals("raw", pc.decode(pc.type("google.rpc.Status"), e.details_bin).message)
      e = raised(function() stub:Add { note = "bad details" } end)
      assert.equals("INTERNAL", e.code)
      assert.matches("details%[1%]: message expected", e.message)
    end)
  end)

  it("answers other errors UNKNOWN with a generic message, their text and traceback going to the log", function()
    local logged = {}
    with_server({ log = function(text) logged[#logged + 1] = text end }, function(stub)
      for _, note in ipairs { "crash", "crash0", "header5" } do
        local e = raised(function() stub:Add { note = note } end)
        assert.equals("UNKNOWN", e.code)
        assert.equals("srv.Calc.Add: unexpected error in the handler", e.message)
      end
    end)
    assert.equals(3, #logged)
    assert.matches("^srv%.Calc%.Add: spec/server_spec%.lua:39: boom at /secret/path\nstack traceback:\n", logged[1])
    assert.matches("spec/server_spec.lua:39: in ", logged[1], 1, true)
    assert.matches("^srv%.Calc%.Add: localhost:50051: conn refused\nstack traceback:\n", logged[2])
    assert.matches("^srv%.Calc%.Add: spec/server_spec%.lua:41: bad argument #2 to 'set_header' %(string expected, "
      .. "got number%)\nstack traceback:\n", logged[3])
    -- a deliberate status is the client's whole, and not logged
    local e
    with_server({ log = function(text) logged[#logged + 1] = text end }, function(stub)
      e = raised(function() stub:Add { note = "fail" } end)
    end)
    assert.equals("FAILED_PRECONDITION", e.code)
    assert.equals(3, #logged)
  end)

  it("answers a handler's response that is none of the method's INTERNAL, and logs it", function()
    -- (it was answered and not logged: the server's owner never heard of the bug)
    local logged = {}
    with_server({ log = function(text) logged[#logged + 1] = text end }, function(stub)
      local e = raised(function() stub:Add { note = "string" } end)
      assert.equals("INTERNAL", e.code)
      assert.equals("srv.Calc.Add response: srv.Sum or a table expected, got string", e.message)
      e = raised(function() stub:Add { note = "unknown field" } end)
      assert.equals("INTERNAL", e.code)
      assert.matches("^srv%.Calc%.Add response: .*nope", e.message)
    end)
    assert.equals(2, #logged)
    assert.equals("srv.Calc.Add response: srv.Sum or a table expected, got string" .. defined_at("Add")
      .. "\nstack traceback:", logged[1]:match("^[^\n]*\n[^\n]*"))
    assert.equals("srv.Calc.Add response: srv.Sum.nope: no such field" .. defined_at("Add")
      .. "\nstack traceback:", logged[2]:match("^[^\n]*\n[^\n]*"))
  end)

  it("fails a unary handler that returns nothing with INTERNAL, and logs it", function()
    -- (it was answered and not logged, unlike a response of the wrong kind)
    local logged = {}
    with_server({ log = function(text) logged[#logged + 1] = text end }, function(stub)
      local e = raised(function() stub:Add { note = "nil" } end)
      assert.equals("INTERNAL", e.code)
      assert.equals("srv.Calc.Add: handler returned no response", e.message)
    end)
    assert.equals(1, #logged)
    assert.equals("srv.Calc.Add: handler returned no response" .. defined_at("Add") .. "\nstack traceback:",
      logged[1]:match("^[^\n]*\n[^\n]*"))
  end)

  it("fails a bidirectional handler that returns a value with INTERNAL, and logs it", function()
    local logged = {}
    with_server({ log = function(text) logged[#logged + 1] = text end }, function(stub)
      local c = stub:Double()
      c:send { x = 99 }
      c:close_send()
      local e = raised(function() c:recv() end)
      assert.equals("INTERNAL", e.code)
      assert.equals("srv.Calc.Double: a bidirectional handler answers with ctx.send and returns nothing", e.message)
    end)
    assert.equals(1, #logged)
    assert.equals("srv.Calc.Double: a bidirectional handler answers with ctx.send and returns nothing"
      .. defined_at("Double") .. "\nstack traceback:", logged[1]:match("^[^\n]*\n[^\n]*"))
  end)

  it("fails a server-streaming handler that returns no list with INTERNAL, and logs where it is defined", function()
    local logged = {}
    with_server({ log = function(text) logged[#logged + 1] = text end }, function(stub)
      local e = raised(function() for _ in stub:Count { x = 1, note = "five" } do end end)
      assert.equals("INTERNAL", e.code)
      assert.equals("srv.Calc.Count: handler must return a list of responses or nil", e.message)
    end)
    assert.equals(1, #logged)
    assert.equals("srv.Calc.Count: handler must return a list of responses or nil" .. defined_at("Count")
      .. "\nstack traceback:", logged[1]:match("^[^\n]*\n[^\n]*"))
  end)

  it("answers an unknown method UNIMPLEMENTED", function()
    with_server(nil, function(_, t)
      local e = raised(function() t:unary("/srv.Calc/Nope", "") end)
      assert.equals("UNIMPLEMENTED", e.code)
      e = raised(function() t:unary("/other.Svc/Add", "") end)
      assert.equals("UNIMPLEMENTED", e.code)
    end)
  end)

  it("answers an undecodable request INTERNAL", function()
    with_server(nil, function(_, t)
      local e = raised(function() t:unary("/srv.Calc/Add", "\255\255\255") end)
      assert.equals("INTERNAL", e.code)
      assert.matches("decode", e.message)
    end)
  end)

  it("answers a request over max_receive_size RESOURCE_EXHAUSTED", function()
    with_server({ max_receive_size = 1000 }, function(stub)
      local e = raised(function() stub:Add { note = string.rep("n", 2000) } end)
      assert.equals("RESOURCE_EXHAUSTED", e.code)
      assert.equals(3, stub:Add({ x = 1, y = 2 }).total) -- the connection goes on
    end)
  end)

  it("takes gzip-compressed requests", function()
    with_server(nil, function(stub)
      assert.equals(7, stub:Add({ x = 3, y = 4, note = string.rep("z", 500) }, { compression = "gzip" }).total)
    end)
  end)

  it("ends a call whose deadline passes DEADLINE_EXCEEDED and the handler sees it", function()
    seen.cancelled = nil
    with_server(nil, function(stub)
      local e = raised(function() stub:Add({ note = "sleep" }, { timeout = 0.2 }) end)
      assert.equals("DEADLINE_EXCEEDED", e.code)
      for _ = 1, 200 do
        if seen.cancelled then break end
        pc.sleep(0.01)
      end
      assert.is_true(seen.cancelled)
    end)
  end)

  it("lets a handler see the client's cancellation", function()
    seen.stream_cancelled = nil
    with_server(nil, function(_, t)
      local n = 0
      local req = pc.encode(pool:type("srv.Point") { x = 100000, note = "slow" })
      local iter, st, ctl, call = t:server_stream("/srv.Calc/Count", req)
      for _ in iter, st, ctl do
        n = n + 1
        if n == 3 then break end
      end
      call:close() -- cancels the call (RST_STREAM CANCEL)
      for _ = 1, 300 do
        if seen.stream_cancelled then break end
        pc.sleep(0.01)
      end
      assert.is_true(seen.stream_cancelled)
    end)
  end)

  it("cancels a server stream from its call object: the server sees CANCELLED, the loop raises it", function()
    -- Waits (at most 3 s) for the handler to see its call cancelled.
    local function server_saw_cancel()
      for _ = 1, 300 do
        if seen.stream_cancelled then break end
        pc.sleep(0.01)
      end
      return seen.stream_cancelled
    end
    with_server(nil, function(stub, t)
      -- the stub's second value (also the generic for's closing value)
      seen.stream_cancelled = nil
      local it, call, _, closing = stub:Count { x = 100000, note = "slow" }
      assert.are.equal(call, closing)
      assert.equals(1, it().x)
      assert.equals(2, it().x)
      call:cancel()
      local e = raised(it)
      assert.equals("CANCELLED", e.code)
      assert.equals("srv.Calc.Count: cancelled by the client", e.message)
      assert.is_nil(it())
      assert.is_true(server_saw_cancel())
      call:cancel() -- nothing once ended
      -- the transport's call (its fourth value)
      seen.stream_cancelled = nil
      local req = pc.encode(pool:type("srv.Point") { x = 100000, note = "slow" })
      local iter, _, _, tcall = t:server_stream("/srv.Calc/Count", req)
      assert.is_string(iter())
      tcall:cancel()
      e = raised(iter)
      assert.equals("CANCELLED", e.code)
      assert.is_nil(iter())
      assert.is_true(server_saw_cancel())
      -- a stream that ended: cancel changes nothing
      local got = {}
      it, call = stub:Count { x = 2 }
      for p in it do got[#got + 1] = p.x end
      call:cancel()
      assert.is_nil(it())
      assert.same({ 1, 2 }, got)
    end)
  end)

  it("sends the list a server-streaming handler returns, and runs server interceptors", function()
    local log = {}
    local s2 = pc.server({ ["srv.Calc"] = {
      Count = function(p) return { { x = p.x }, { x = p.x + 1 } } end,
    } }, { pool = pool, interceptors = { function(call, next)
      local r = next(call)
      log[#log + 1] = call.method .. " " .. call.status
      return r
    end } })
    local l = pc.listen(s2, "127.0.0.1:0")
    local got = {}
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local stub = pc.client("srv.Calc", { transport = pc.grpc("http://127.0.0.1:" .. l.port), pool = pool })
      for p in stub:Count { x = 7 } do got[#got + 1] = p.x end
      l:shutdown(1)
    end)
    pc.run()
    assert.same({ 7, 8 }, got)
    assert.same({ "srv.Calc.Count OK" }, log)
  end)

  it("serves the built-in health and reflection services", function()
    local s2 = pc.server({ ["srv.Calc"] = handlers }, { pool = pool, health = true, reflection = true })
    local l = pc.listen(s2, "127.0.0.1:0")
    local status, names, watched
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local t = pc.grpc("http://127.0.0.1:" .. l.port)
      local health = pc.client("grpc.health.v1.Health", { transport = t, pool = pool })
      status = health:Check({ service = "" }).status
      local n = 0
      for r in health:Watch { service = "" } do
        watched = r.status
        n = n + 1
        if n == 1 then break end
      end
      local refl = pc.client("grpc.reflection.v1.ServerReflection", { transport = t, pool = pool })
      local call = refl:ServerReflectionInfo()
      call:send { list_services = "" }
      names = {}
      for _, svc in pc.ipairs(call:recv().list_services_response.service) do
        names[#names + 1] = svc.name
      end
      call:close_send()
      table.sort(names)
      l:shutdown(1)
    end)
    pc.run()
    assert.equals(1, status) -- SERVING
    assert.equals(1, watched)
    assert.is_truthy(table.concat(names, " "):find("srv.Calc", 1, true))
    assert.is_truthy(table.concat(names, " "):find("grpc.health.v1.Health", 1, true))
  end)

  it("sends the responses of a stream before its error", function()
    with_server(nil, function(stub)
      local got = {}
      local e = raised(function()
        for p in stub:Count { x = 2, note = "fail" } do got[#got + 1] = p.x end
      end)
      assert.same({ 1, 2 }, got)
      assert.equals("ABORTED", e.code)
    end)
  end)

  it("runs calls concurrently: a slow handler does not hold the others", function()
    with_server(nil, function(stub)
      local done = {}
      for i = 1, 5 do
        pc.spawn(function()
          local got = 0
          for _ in stub:Count { x = 20, note = "slow" } do got = got + 1 end
          done[i] = got
        end)
      end
      assert.equals(9, stub:Add({ x = 4, y = 5 }).total)
      assert.is_nil(done[1]) -- the fast call came back while the streams ran
      for _ = 1, 500 do
        if #done == 5 then break end
        pc.sleep(0.01)
      end
      assert.same({ 20, 20, 20, 20, 20 }, done)
    end)
  end)

  it("holds a server stream the client does not read by flow control", function()
    with_server({ stream_window = 65535 }, function(_, t)
      local req = pc.encode(pool:type("srv.Point") { x = 1000000 })
      local call = t:stream("/srv.Calc/Count", {})
      call:send(req)
      call:close_send()
      pc.sleep(0.3) -- the handler runs into the closed window and waits
      assert.equals(1, call:recv() and 1)
      call:cancel()
    end, { stream_window = 65535, connection_window = 65535 })
  end)

  it("listens on IPv6 and picks a port for port 0", function()
    local l = pc.listen(server, "[::1]:0")
    assert.is_true(l.port > 0)
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local stub = pc.client("srv.Calc", { transport = pc.grpc("http://[::1]:" .. l.port), pool = pool })
      assert.equals(3, stub:Add({ x = 1, y = 2 }).total)
      l:shutdown(1)
    end)
    pc.run()
  end)

  it("finishes calls in flight within the grace period on shutdown, then refuses", function()
    local l = pc.listen(server, "127.0.0.1:0")
    local result
    pc.spawn(function() l:serve() end)
    local t = pc.grpc("http://127.0.0.1:" .. l.port)
    local stub = pc.client("srv.Calc", { transport = t, pool = pool })
    pc.spawn(function()
      local got = 0
      for _ in stub:Count { x = 20, note = "slow" } do got = got + 1 end
      result = got
    end)
    pc.spawn(function()
      pc.sleep(0.05)
      l:shutdown(10)
      assert.equals(0, l:connections())
      local e = raised(function() stub:Add { x = 1 } end)
      assert.equals("UNAVAILABLE", e.code)
    end)
    pc.run()
    assert.equals(20, result)
  end)

  it("cancels the calls still running when the grace period ends", function()
    seen.cancelled = nil
    local l = pc.listen(server, "127.0.0.1:0")
    local code
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local stub = pc.client("srv.Calc", { transport = pc.grpc("http://127.0.0.1:" .. l.port), pool = pool })
      local ok, e = pcall(function() return stub:Add { note = "sleep" } end)
      code = ok and "OK" or e.code
    end)
    pc.spawn(function()
      pc.sleep(0.1)
      l:shutdown(0.1)
    end)
    pc.run()
    assert.is_true(seen.cancelled)
    assert.equals("UNAVAILABLE", code)
  end)

  it("ends a call whose handler yields outside protocall's waits, and shuts down", function()
    local l = pc.listen(server, "127.0.0.1:0")
    local e, shut
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local stub = pc.client("srv.Calc", { transport = pc.grpc("http://127.0.0.1:" .. l.port), pool = pool })
      e = raised(function() return stub:Add({ note = "yield" }, { timeout = 2 }) end)
      l:shutdown(0.1)
      shut = true
    end)
    pc.spawn(function() -- a hung shutdown fails the spec instead of hanging it
      for _ = 1, 300 do
        if shut then return end
        pc.sleep(0.01)
      end
      error("listener:shutdown() did not return")
    end)
    pc.run()
    assert.equals("INTERNAL", e.code)
    assert.equals("srv.Calc.Add: the handler yielded outside protocall's waits (a bare coroutine.yield:"
      .. " wait with pc.sleep or a call, or yield in a coroutine of your own)", e.message)
  end)

  describe("over TLS", function()
    local dir
    setup(function()
      dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir " .. dir))
      local function cert(name, extra)
        assert(os.execute("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
          .. " -addext subjectAltName=DNS:localhost,IP:127.0.0.1" .. (extra or "")
          .. " -keyout " .. dir .. "/" .. name .. "-key.pem -out " .. dir .. "/" .. name
          .. ".pem 2>/dev/null"))
      end
      cert("server")
      cert("client")
    end)
    teardown(function() os.execute("rm -rf " .. dir) end)

    it("serves all shapes over TLS with ALPN h2", function()
      with_server({ cert_file = dir .. "/server.pem", key_file = dir .. "/server-key.pem" },
        function(stub)
          assert.equals(5, stub:Add({ x = 2, y = 3 }).total)
          local n = 0
          for _ in stub:Count { x = 3 } do n = n + 1 end
          assert.equals(3, n)
          local c = stub:Double()
          c:send { x = 4 }
          assert.equals(8, c:recv().x)
          c:close_send()
        end, { ca_file = dir .. "/server.pem" }, "https")
    end)

    it("requires a client certificate with client_ca_file (mutual TLS)", function()
      with_server({ cert_file = dir .. "/server.pem", key_file = dir .. "/server-key.pem",
                    client_ca_file = dir .. "/client.pem" },
        function(stub, _, l)
          local e = raised(function() stub:Add { x = 1 } end)
          assert.equals("UNAVAILABLE", e.code)
          local good = pc.grpc("https://127.0.0.1:" .. l.port, {
            ca_file = dir .. "/server.pem", cert_file = dir .. "/client.pem",
            key_file = dir .. "/client-key.pem" })
          local s2 = pc.client("srv.Calc", { transport = good, pool = pool })
          assert.equals(2, s2:Add({ x = 1, y = 1 }).total)
          good:close()
        end, { ca_file = dir .. "/server.pem" }, "https")
    end)
  end)

  it("checks its arguments", function()
    assert.matches("protocall.Server expected", raised(function() pc.listen({}, "127.0.0.1:0") end))
    assert.matches("expected host:port", raised(function() pc.listen(server, "nope") end))
    assert.matches("pc.listen: address '127.0.0.1:99999': port 99999 out of range (0-65535)",
                   raised(function() pc.listen(server, "127.0.0.1:99999") end), 1, true)
    assert.matches("unknown option 'bogus'", raised(function() pc.listen(server, "127.0.0.1:0", { bogus = 1 }) end))
    assert.matches("cert_file and key_file go together",
      raised(function() pc.listen(server, "127.0.0.1:0", { cert_file = "x" }) end))
    assert.has_error(function() pc.listen(server, "127.0.0.1:0", { idle_timeout = 0 / 0 }) end,
      "pc.listen: option 'idle_timeout': positive number of seconds up to 1000000000 expected, got nan")
    assert.has_error(function() pc.listen(server, "127.0.0.1:0", { max_connection_age = 0 }) end,
      "pc.listen: option 'max_connection_age': positive number of seconds up to 1000000000 expected, got 0")
    assert.has_error(function() pc.listen(server, "127.0.0.1:0", { max_connection_age_grace = "1" }) end,
      "pc.listen: option 'max_connection_age_grace' must be a number, got string")
    assert.has_error(function() pc.listen(server, "127.0.0.1:0", { handshake_timeout = -1 }) end,
      "pc.listen: option 'handshake_timeout': positive number of seconds up to 1000000000 expected, got -1")
    assert.has_error(function() pc.listen(server, "127.0.0.1:0", { stall_timeout = math.huge }) end,
      "pc.listen: option 'stall_timeout': positive number of seconds up to 1000000000 expected, got inf"
      .. " (negative: never)")
    assert.has_error(function() pc.listen(server, "127.0.0.1:0", { stall_timeout = -math.huge }) end,
      "pc.listen: option 'stall_timeout': positive number of seconds up to 1000000000 expected, got -inf"
      .. " (negative: never)")
    assert.has_error(function() pc.listen(server, "127.0.0.1:0", { stall_timeout = 0 / 0 }) end,
      "pc.listen: option 'stall_timeout': positive number of seconds up to 1000000000 expected, got nan"
      .. " (negative: never)")
    pc.listen(server, "127.0.0.1:0", { stall_timeout = -1 }):shutdown() -- negative: never, as documented
    local shut = pc.listen(server, "127.0.0.1:0")
    assert.has_error(function() shut:shutdown(0 / 0) end,
      "bad argument #1 to 'shutdown' (seconds >= 0 expected, got nan)")
    shut:shutdown()
    assert.matches("pc.listen: cert_file '/nonexistent'",
      raised(function()
        pc.listen(server, "127.0.0.1:0", { cert_file = "/nonexistent", key_file = "/nonexistent" })
      end))
    local l = pc.listen(server, "127.0.0.1:0")
    assert.matches("Address already in use", raised(function() pc.listen(server, "127.0.0.1:" .. l.port) end))
    l:shutdown()
  end)
end)

describe("ctx.send in a unary or client-streaming handler", function()
  -- Handlers that call ctx.send first guarded (what it raised and the
  -- line of the call go to `caught`), then unguarded (the call fails).
  local caught = {}
  local here = debug.getinfo(1, "S").short_src
  local send_server = pc.server({ ["srv.Calc"] = {
    Add = function(_, ctx)
      local _, e = pcall(function() ctx.send { total = 1 } end); caught.Add = { e, debug.getinfo(1, "l").currentline }
      ctx.send { total = 2 }
    end,
    Total = function(ctx)
      while ctx:recv() do end
      local _, e = pcall(function() ctx.send { total = 1 } end); caught.Total = { e, debug.getinfo(1, "l").currentline }
      ctx.send { total = 2 }
    end,
  } }, { pool = pool })

  -- Calls Add and Total over `transport` and checks the one rule.
  local function check(transport)
    local stub = pc.client("srv.Calc", { transport = transport, pool = pool })
    caught = {}
    local e = raised(function() stub:Add { x = 1 } end)
    assert.equals("UNKNOWN", e.code)
    assert.equals("srv.Calc.Add: unexpected error in the handler", e.message)
    assert.equals(here .. ":" .. caught.Add[2] .. ": ctx.send: srv.Calc.Add is unary: return the response",
      caught.Add[1])
    local call = stub:Total()
    call:send { x = 1 }
    e = raised(function() call:close_and_recv() end)
    assert.equals("UNKNOWN", e.code)
    assert.equals("srv.Calc.Total: unexpected error in the handler", e.message)
    assert.equals(here .. ":" .. caught.Total[2]
      .. ": ctx.send: srv.Calc.Total is client-streaming: return the response", caught.Total[1])
  end

  it("raises at the handler's line in process", function()
    check(pc.inproc(send_server))
  end)

  it("raises at the handler's line over the network, sending nothing", function()
    over_network(send_server, check, { log = function() end })
  end)
end)

describe("one handler in process and over the network", function()
  -- The same pc.server run by pc.inproc and by pc.listen: each case runs
  -- in both placements (rpc/server.lua holds the rules both apply).
  local Status = pc.type("google.rpc.Status")
  local arrivals, caught, kept = {}, {}, nil
  local same = pc.server({ ["srv.Calc"] = {
    Add = function(p, ctx)
      local note = p.note
      arrivals[#arrivals + 1] = pc.now()
      if note == "keep" then
        kept = ctx
        caught.sleep = type(ctx.sleep)
        ctx.sleep(0)
        local _, e = pcall(function() ctx:recv() end)
        caught.recv = e
      elseif note == "many headers" or note == "many trailers" then
        local set = note == "many headers" and ctx.set_header or ctx.set_trailer
        for i = 1, p.x do set(ctx, "x-k" .. i, "v") end
      elseif note == "huge trailer" then
        ctx:set_trailer("x-big", string.rep("x", 70000))
      elseif note == "pushback" then
        error(pc.Error { code = "UNAVAILABLE", message = "busy", retry_delay = p.x / 1000,
          metadata = { { "x-why", "busy" }, { "x-why-bin", "\0\1" } } })
      elseif note == "details string" then
        error(pc.Error { code = "INVALID_ARGUMENT", message = "bad", details = "abc" })
      elseif note == "details list" then
        error(pc.Error { code = "INVALID_ARGUMENT", message = "bad", details = { "abc" } })
      elseif note == "details bytes" then
        error(pc.Error { code = "INVALID_ARGUMENT", message = "bad",
          details = pc.encode(Status { code = 3, message = "raw" }) })
      elseif note == "reserved metadata" then
        error(pc.Error { code = "ABORTED", message = "no", metadata = { { "grpc-status", "0" } } })
      elseif note == "meta" or note == "meta fail" then
        ctx:set_header("x-head", "h1")
        ctx:set_trailer("x-trail", "t1")
        ctx:set_trailer("x-bin", "\0\255")
        assert.is_true(ctx:set_compression("identity"))
        if note == "meta fail" then
          error(pc.Error { code = "ABORTED", message = "no", metadata = { { "x-err", "e1" } } })
        end
      elseif note == "misuse" then
        caught = {}
        for _, f in ipairs {
          function() ctx:set_header("x-n", 5) end,
          function() ctx:set_trailer(5, "v") end,
          function() ctx:set_header("X-Up", "v") end,
          function() ctx:set_trailer("grpc-status", "0") end,
          function() ctx:set_compression("br") end,
        } do
          local _, e = pcall(f)
          caught[#caught + 1] = e
        end
      end
      return { total = p.x + p.y }
    end,
    Count = function(p, ctx)
      if p.note == "five" then return 5 end
      if p.note == "map" then return { a = { x = 1 } } end
      if p.note == "holes" then return { [1] = { x = 1 }, [3] = { x = 3 } } end
      if p.note == "hole" then return { { x = 1 }, nil, { x = 3 } } end -- # may be 3: 2 is missing
      if p.note == "list" then return { { x = 1 }, { x = 2 } } end
      if p.note == "keep" then
        kept = ctx
        local _, e = pcall(function() ctx:recv() end)
        caught.recv = e
        return { { x = 1 } }
      end
      if p.note == "yield" then
        ctx.send { x = 1 }
        coroutine.yield() -- not a wait of protocall's: nothing would resume it
        ctx.send { x = 2 }
        return
      end
      ctx:set_header("x-head", "h1")
      ctx.send { x = 1 }
      local _, e = pcall(ctx.set_header, ctx, "x-late", "v")
      caught.late = e
      ctx:set_trailer("x-trail", "t1")
      if p.note == "fail" then
        error(pc.Error { code = "ABORTED", message = "after", metadata = { { "x-err", "e1" } } })
      end
    end,
  } }, { pool = pool })

  local function pairs_of(list)
    local t = {}
    for _, kv in ipairs(list) do t[#t + 1] = kv[1] .. "=" .. kv[2] end
    return table.concat(t, " ")
  end

  local function in_process(fn)
    local err
    pc.spawn(function()
      local ok, e = pcall(fn, pc.inproc(same))
      if not ok then err = e end
    end)
    pc.run()
    if err then error(err, 0) end
  end

  -- One `it` per placement for `fn(transport)`.
  local function both(name, fn)
    it(name .. " (in process)", function() in_process(fn) end)
    it(name .. " (over the network)", function() over_network(same, fn) end)
  end

  local function stub_of(t, opts)
    opts = opts or {}
    opts.transport, opts.pool = t, pool
    return pc.client("srv.Calc", opts)
  end

  both("fails a server-streaming handler that returns no list INTERNAL", function(t)
    local stub = stub_of(t)
    for _, note in ipairs { "five", "map", "holes", "hole" } do
      local e = raised(function() for _ in stub:Count { note = note } do end end)
      assert.equals("INTERNAL", e.code)
      assert.equals("srv.Calc.Count: handler must return a list of responses or nil", e.message)
    end
    local got = {}
    for q in stub:Count { note = "list" } do got[#got + 1] = q.x end
    assert.same({ 1, 2 }, got)
  end)

  both("gives a unary handler ctx.sleep and a ctx:recv that raises at its line", function(t)
    local here = debug.getinfo(1, "S").short_src
    local stub = stub_of(t)
    assert.equals(3, stub:Add { x = 1, y = 2, note = "keep" }.total)
    assert.equals("function", caught.sleep)
    assert.equals(here .. ":", caught.recv:sub(1, #here + 1))
    assert.equals("ctx:recv: srv.Calc.Add is unary: its request is the handler's first argument",
      (caught.recv:gsub("^[^:]*:%d+: ", "")))
    for _ in stub:Count { note = "keep" } do end
    assert.equals("ctx:recv: srv.Calc.Count is server-streaming: its request is the handler's first argument",
      (caught.recv:gsub("^[^:]*:%d+: ", "")))
  end)

  both("makes a ctx kept after its call ended say so: cancelled, send CANCELLED, set_* raise", function(t)
    local here = debug.getinfo(1, "S").short_src
    local stub = stub_of(t)
    for _, call in ipairs {
      function() return stub:Add { note = "keep" } end,
      function() for _ in stub:Count { note = "keep" } do end end,
    } do
      kept = nil
      call()
      assert.is_true(kept:cancelled())
      assert.is_false(kept:compressed())
      for _, f in ipairs {
        function() kept:set_trailer("x-late", "v") end,
        function() kept:set_header("x-late", "v") end,
        function() kept:set_compression("identity") end,
      } do
        local ok, e = pcall(f)
        assert.is_false(ok)
        assert.equals(here .. ":", e:sub(1, #here + 1))
        assert.matches("^set_%a+: the call is over$", (e:gsub("^[^:]*:%d+: ", "")))
      end
    end
    local e = raised(function() kept.send { x = 1 } end)
    assert.equals(pc.Error, getmetatable(e))
    assert.equals("CANCELLED", e.code)
    assert.equals("srv.Calc.Count: the call is over", e.message)
  end)

  both("fails a stream whose handler yields outside protocall's waits INTERNAL", function(t)
    local got = {}
    local e = raised(function() for q in stub_of(t):Count { note = "yield" } do got[#got + 1] = q.x end end)
    assert.same({ 1 }, got)
    assert.equals("INTERNAL", e.code)
    assert.equals("srv.Calc.Count: the handler yielded outside protocall's waits (a bare coroutine.yield:"
      .. " wait with pc.sleep or a call, or yield in a coroutine of your own)", e.message)
  end)

  both("bounds the response headers and trailers as call metadata: RESOURCE_EXHAUSTED past that", function(t)
    local stub = stub_of(t)
    local _, md = stub:Add({ note = "many trailers", x = 1000 }, { with_metadata = true })
    assert.equals(1000, #md.trailers)
    for _, case in ipairs {
      { "many headers", 1001, "srv.Calc.Add: set_header: metadata: 1001 pairs, at most 1000" },
      { "many trailers", 1500, "srv.Calc.Add: set_trailer: metadata: 1001 pairs, at most 1000" },
      { "huge trailer", 0, "srv.Calc.Add: set_trailer: metadata: more than 65536 bytes of keys and values" },
    } do
      local e = raised(function() stub:Add { note = case[1], x = case[2] } end)
      assert.equals("RESOURCE_EXHAUSTED", e.code)
      assert.equals(case[3], e.message)
    end
  end)

  both("sends a pc.Error's metadata as trailers and retry_delay as grpc-retry-pushback-ms", function(t)
    local stub = stub_of(t)
    local e = raised(function() stub:Add { note = "pushback", x = 1500 } end)
    assert.equals("UNAVAILABLE", e.code)
    assert.equals(1.5, e.retry_delay)
    assert.equals("x-why=busy x-why-bin=\0\1 grpc-retry-pushback-ms=1500", pairs_of(e.metadata))
    e = raised(function() stub:Add { note = "pushback", x = -1 } end)
    assert.equals(-1, e.retry_delay)
    assert.is_true(e.no_retry)
    assert.equals("x-why=busy x-why-bin=\0\1 grpc-retry-pushback-ms=-1", pairs_of(e.metadata))
  end)

  both("has the retry policy honour the handler's pushback", function(t)
    local stub = stub_of(t, { retry = pc.Retry { initial = 0.001, maximum = 0.001, min_pushback = 0,
      max_attempts = 3 } })
    arrivals = {}
    local e = raised(function() stub:Add { note = "pushback", x = 150 } end)
    assert.equals(pc.RetryError, getmetatable(e))
    assert.equals(3, #arrivals)
    assert.is_true(arrivals[2] - arrivals[1] >= 0.14)
    assert.is_true(arrivals[3] - arrivals[2] >= 0.14)
    arrivals = {}
    e = raised(function() stub:Add { note = "pushback", x = -1 } end)
    assert.equals(1, #arrivals) -- a negative pushback: no retry
    assert.equals(1, e.attempts)
  end)

  both("sends a pc.Error's details: a list of messages or the bytes of a google.rpc.Status", function(t)
    local stub = stub_of(t)
    local e = raised(function() stub:Add { note = "details string" } end)
    assert.equals("INTERNAL", e.code)
    assert.equals("srv.Calc.Add: details: a serialized google.rpc.Status expected "
      .. "(google.rpc.Status field 12: truncated input at offset 1)", e.message)
    e = raised(function() stub:Add { note = "details list" } end)
    assert.equals("INTERNAL", e.code)
    assert.equals("srv.Calc.Add: details[1]: message expected, got string", e.message)
    e = raised(function() stub:Add { note = "details bytes" } end)
    assert.equals("INVALID_ARGUMENT", e.code)
    assert.equals("raw", pc.decode(Status, e.details_bin).message)
    e = raised(function() stub:Add { note = "reserved metadata" } end)
    assert.equals("INTERNAL", e.code)
    assert.equals("srv.Calc.Add: pc.Error metadata key 'grpc-status' is reserved for the transport", e.message)
  end)

  both("gives ctx:set_header, set_trailer and set_compression, their metadata to the client", function(t)
    local stub = stub_of(t)
    local r, md = stub:Add({ x = 1, y = 2, note = "meta" }, { with_metadata = true })
    assert.equals(3, r.total)
    assert.equals("h1", pairs_of(md.headers):match("x%-head=(%w+)"))
    assert.equals("x-trail=t1 x-bin=\0\255", pairs_of(md.trailers))
    local e = raised(function() stub:Add { note = "meta fail" } end)
    assert.equals("ABORTED", e.code)
    -- nothing was sent: a Trailers-Only answer, the headers among the trailers
    assert.equals("", pairs_of(e.headers))
    assert.equals("x-head=h1 x-trail=t1 x-bin=\0\255 x-err=e1", pairs_of(e.metadata))
    local it, call = stub:Count({ note = "meta" }, { with_metadata = true })
    assert.equals(1, it().x)
    assert.same({}, call:trailers()) -- still running
    assert.is_nil(it())
    assert.equals("h1", pairs_of(call:headers()):match("x%-head=(%w+)"))
    assert.equals("x-trail=t1", pairs_of(call:trailers()))
    assert.equals("set_header: headers already sent", caught.late)
    it, call = stub:Count({ note = "fail" }, { with_metadata = true })
    assert.equals(1, it().x)
    e = raised(it)
    assert.equals("ABORTED", e.code)
    assert.equals("x-trail=t1 x-err=e1", pairs_of(call:trailers()))
  end)

  both("gives with_metadata = \"present\" the metadata only when the handler set some", function(t)
    local Point = pool:type("srv.Point")
    local bytes, md = t:unary("/srv.Calc/Add", pc.encode(Point { x = 1, y = 2, note = "meta" }),
      { with_metadata = "present" })
    assert.equals(3, pc.decode(pool:type("srv.Sum"), bytes).total)
    assert.equals("h1", pairs_of(md.headers):match("x%-head=(%w+)"))
    assert.equals("x-trail=t1 x-bin=\0\255", pairs_of(md.trailers))
    bytes, md = t:unary("/srv.Calc/Add", pc.encode(Point { x = 1, y = 2 }), { with_metadata = "present" })
    assert.equals(3, pc.decode(pool:type("srv.Sum"), bytes).total)
    assert.is_nil(md)
    assert.same({}, select(2, t:unary("/srv.Calc/Add", pc.encode(Point { x = 1, y = 2 }), { with_metadata = true }))
      .trailers)
  end)

  both("gives a stub's with_metadata = \"present\" the meaning the transports give it", function(t)
    local hedging = { methodConfig = { { name = { { service = "srv.Calc" } },
      hedgingPolicy = { maxAttempts = 2, hedgingDelay = "1s" } } } }
    local stubs = { stub_of(t), stub_of(t, { interceptors = { function(call, nxt) return nxt(call) end } }),
      stub_of(t, { service_config = hedging }) }
    for i, stub in ipairs(stubs) do
      local r, md = stub:Add({ x = 1, y = 2, note = "meta" }, { with_metadata = "present" })
      assert.equals(3, r.total)
      assert.equals("h1", pairs_of(md.headers):match("x%-head=(%w+)"), i)
      assert.equals("x-trail=t1 x-bin=\0\255", pairs_of(md.trailers), i)
      r, md = stub:Add({ x = 1, y = 2 }, { with_metadata = "present" })
      assert.equals(3, r.total)
      assert.is_nil(md, i) -- gRPC's own (content-type, grpc-status) only
      assert.equals(2, select("#", stub:Add({ x = 1, y = 2 }, { with_metadata = "present" })))
      md = select(2, stub:Add({ x = 1, y = 2 }, { with_metadata = true }))
      assert.same({}, md.trailers, i)
      -- a server stream's call holds the lists, as with true (hedged too:
      -- the winning attempt's)
      for _, want in ipairs { true, "present" } do
        local it, call = stub:Count({ note = "meta" }, { with_metadata = want })
        assert.equals(1, it().x)
        assert.is_nil(it())
        assert.equals("h1", pairs_of(call:headers()):match("x%-head=(%w+)"), i)
        assert.equals("x-trail=t1", pairs_of(call:trailers()), i)
        it, call = stub:Count({ note = "list" }, { with_metadata = want })
        assert.equals(1, it().x)
        assert.equals(2, it().x)
        assert.is_nil(it())
        assert.same({}, call:trailers(), i)
      end
    end
    for _, v in ipairs { "yes", 1 } do
      assert.has_error(function() stubs[1]:Add({}, { with_metadata = v }) end,
        [[bad argument #2 to 'Add' (with_metadata: true, false or "present" expected, got ]]
        .. (v == "yes" and [[string "yes")]] or "number)"))
      assert.has_error(function() stubs[2]:Count({}, { with_metadata = v }) end, -- interceptors: the same
        [[bad argument #2 to 'Count' (with_metadata: true, false or "present" expected, got ]]
        .. (v == "yes" and [[string "yes")]] or "number)"))
    end
  end)

  both("checks ctx:set_header, set_trailer and set_compression's arguments alike", function(t)
    stub_of(t):Add { note = "misuse" }
    local here = debug.getinfo(1, "S").short_src
    for i, want in ipairs {
      "bad argument #2 to 'set_header' (string expected, got number)",
      "bad argument #1 to 'set_trailer' (string expected, got number)",
      "set_header: metadata key 'X-Up': only lowercase letters, digits, '_', '-', '.'",
      "set_trailer: metadata key 'grpc-status' is reserved for the transport",
      "bad argument #1 to 'set_compression' (\"gzip\" or \"identity\" expected, got \"br\")",
    } do
      assert.equals(here .. ":", caught[i]:sub(1, #here + 1))
      assert.equals(want, (caught[i]:gsub("^[^:]*:%d+: ", "")))
    end
  end)
end)
