-- Connections of pc.grpc (README "Services"): reconnection backoff (gRPC's
-- connection-backoff document) and keepalive PINGs. Times are small and the
-- bounds generous: lower bounds are exact (nothing may happen early), upper
-- ones leave slack for a loaded machine.
package.path = "spec/?.lua;" .. package.path
local pc = require "protocall"
local helper = require "grpc_helper"

local now = pc.now

local failure = helper.status_error

-- A loopback port nothing listens on.
local function refusing_port()
  local dead = helper.spawn("silent")
  local port = dead.port
  helper.stop(dead)
  return port
end

-- grpc_server.py on `port`, started `delay` s from now: its stand-in
-- shell prints the line helper.spawn_command waits for, sleeps, then
-- becomes the server (same pid, same standard input).
-- A loopback port pc.listen had and nothing listens on any more (a server
-- may come up on it later).
local function free_port()
  local l = pc.listen(pc.server {}, "127.0.0.1:0")
  local port = l.port
  l:shutdown()
  return port
end

local function server_later(port, delay)
  return helper.spawn_command(("sh -c 'echo %d $$; sleep %g; exec /usr/bin/python3 spec/grpc_server.py grpc %d'")
    :format(port, delay, port), "a delayed grpc_server.py")
end

describe("reconnection backoff", function()
  it("spaces connection attempts by the backoff, growing to its maximum", function()
    local port = refusing_port()
    local t = pc.grpc("127.0.0.1:" .. port, { reconnect = { initial = 0.1, multiplier = 2, jitter = 0,
      maximum = 0.4 } })
    -- calls in a loop: those during the backoff fail at once (no
    -- wait_for_ready) saying so; those that made an attempt fail with it
    local ends, fast = {}, 0
    while #ends < 6 do
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 10 })
      assert.are.equal("UNAVAILABLE", err.code)
      if err.message:find("(reconnection backoff: ", 1, true) then
        fast = fast + 1
        pc.sleep(0.005)
      else
        assert.are.equal("connect to 127.0.0.1:" .. port .. ": Connection refused", err.message)
        ends[#ends + 1] = now()
      end
    end
    assert.is_true(fast > 0, "no call came during a backoff")
    t:close()
    local want = { 0.1, 0.2, 0.4, 0.4, 0.4 }
    for i = 1, 5 do
      local gap = ends[i + 1] - ends[i]
      -- the backoff runs from the failed attempt, a little before the call
      -- returned: half of it is slack enough on a loaded machine, and far
      -- above the ~0 s gap without a backoff
      assert.is_true(gap >= want[i] / 2,
        ("attempt %d came %.3f s after the last, before its %.1f s"):format(i + 1, gap, want[i]))
      assert.is_true(gap < want[i] + 1, ("attempt %d came %.3f s after the last"):format(i + 1, gap))
    end
  end)

  it("fails a call at once during the backoff unless the transport has wait_for_ready", function()
    local port = refusing_port()
    local t = pc.grpc("127.0.0.1:" .. port, { reconnect = { initial = 5, jitter = 0 } })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 10 })
    assert.are.equal("connect to 127.0.0.1:" .. port .. ": Connection refused", err.message)
    -- gRPC's fail-fast: the next call fails without waiting the 5 s for the next attempt
    err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 10 })
    assert.are.equal("UNAVAILABLE", err.code)
    assert.matches("^connect to 127%.0%.0%.1:%d+: Connection refused %(reconnection backoff: "
      .. "the next attempt in [%d.]+ s; a transport with wait_for_ready waits for it%)$", err.message)
    -- so a retry policy's own backoff paces the attempts, each failing at once
    pc.load_file("spec/fixtures/protos/grpc/faults.proto", { import_paths = { "spec/fixtures/protos" } })
    local stub = pc.client("faults.Faults", { transport = t, timeout = 10,
      retry = pc.Retry { initial = 0.01, maximum = 0.02, max_attempts = 4 } })
    local ok, e = pcall(stub.Echo, stub, { text = "x" })
    assert.is_false(ok)
    assert.are.equal(4, e.attempts, tostring(e))
    assert.are.equal("UNAVAILABLE", e.cause.code)
    assert.matches("reconnection backoff: the next attempt in", e.cause.message, 1, true)
    t:close()
  end)

  it("uses gRPC's numbers by default: the first backoff is 1 s +-20%", function()
    local port = refusing_port()
    local t = pc.grpc("127.0.0.1:" .. port)
    failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 10 })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 0.7 })
    local wait = tonumber(err.message:match("in ([%d.]+) s"))
    assert.is_not_nil(wait, err.message)
    assert.is_true(wait > 0.7 and wait <= 1.2, "backoff " .. wait)
    t:close()
  end)

  it("lets a wait_for_ready call wait for the next attempt, and reach a server that came up meanwhile", function()
    local port = refusing_port()
    local t = pc.grpc("127.0.0.1:" .. port, { wait_for_ready = true, reconnect = { initial = 1.5, jitter = 0 } })
    local s = server_later(port, 0.2)
    local t0 = now()
    assert.are.equal("back", t:unary("/test.Test/Echo", "back", { timeout = 20 }))
    -- the first attempt was refused at once; the server up meanwhile, the
    -- next attempt still waited for the backoff
    assert.is_true(now() - t0 >= 1.5 - 0.005, "did not wait for the backoff: " .. (now() - t0) .. " s")
    helper.stop(s)
    t:close()
  end)

  it("fails an attempt not connected within min_connect_timeout", function()
    -- a 0.3 s window for the connection attempt: valgrind (make memcheck
    -- sets PC_MEMCHECK) slows the client past it before the call attaches
    if os.getenv("PC_MEMCHECK") then
      return pending("a 0.3 s connect window cannot be timed under valgrind (PC_MEMCHECK)")
    end
    local silent = helper.spawn("silent") -- accepts, never answers: the TLS handshake never ends
    local t = pc.grpc("https://127.0.0.1:" .. silent.port, { reconnect = { initial = 0.1,
      min_connect_timeout = 0.3 } })
    local t0 = now()
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 20 })
    local took = now() - t0
    helper.stop(silent)
    t:close()
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal("connect to 127.0.0.1:" .. silent.port .. ": not connected within 0.3 s", err.message)
    assert.is_true(took >= 0.3 and took < 10, "took " .. took .. " s")
  end)

  it("says when the next attempt is allowed: transport:next_attempt()", function()
    local port = refusing_port()
    local t = pc.grpc("127.0.0.1:" .. port, { reconnect = { initial = 5, jitter = 0 } })
    assert.is_nil(t:next_attempt()) -- nothing tried yet: a call may connect now
    failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 10 })
    local left = t:next_attempt()
    assert.are.equal("number", type(left))
    assert.is_true(left > 2.5 and left <= 5, "next attempt in " .. left .. " s")
    -- the figure of the hint a call failed meanwhile gives
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 10 })
    local hint = tonumber(err.message:match("%(reconnection backoff: the next attempt in ([%d.]+) s;"))
    assert.is_not_nil(hint, err.message)
    local again = t:next_attempt()
    assert.is_true(again <= left and math.abs(again - hint) < 0.5, again .. " s, the hint " .. hint .. " s")
    t:close()
    assert.has_error(function() t:next_attempt() end, "calling 'next_attempt' on bad self (transport is closed)")
  end)

  it("says nil once the backoff is over, and takes the soonest backend of several", function()
    local a, b = refusing_port(), refusing_port()
    local t = pc.grpc("127.0.0.1:" .. a, { reconnect = { initial = 0.1, jitter = 0 } })
    failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 10 })
    assert.is_true((t:next_attempt() or 0) > 0)
    pc.sleep(0.2)
    assert.is_nil(t:next_attempt())
    t:close()
    local list = pc.grpc({ "127.0.0.1:" .. a, "127.0.0.1:" .. b }, { load_balancing = "round_robin",
      reconnect = { initial = 5, jitter = 0 } })
    assert.is_nil(list:next_attempt())
    failure(list.unary, list, "/test.Test/Echo", "x", { timeout = 10 })
    failure(list.unary, list, "/test.Test/Echo", "x", { timeout = 10 })
    local left = list:next_attempt()
    assert.is_true(left ~= nil and left > 2.5 and left <= 5, "next attempt in " .. tostring(left) .. " s")
    list:close()
    assert.has_error(function() list:next_attempt() end,
      "calling 'next_attempt' on bad self (transport is closed)")
  end)

  it("raises a clear error for next_attempt called with a dot (no self)", function()
    local t = pc.grpc("127.0.0.1:" .. refusing_port())
    local list = pc.grpc({ "127.0.0.1:" .. refusing_port(), "127.0.0.1:" .. refusing_port() })
    assert.has_error(function() t.next_attempt() end,
      "calling 'next_attempt' on bad self (protocall.GrpcTransport expected, got nil)")
    assert.has_error(function() t.next_attempt({}) end,
      "calling 'next_attempt' on bad self (protocall.GrpcTransport expected, got table)")
    assert.has_error(function() list.next_attempt() end,
      "calling 'next_attempt' on bad self (protocall.BalancedTransport expected, got nil)")
    assert.is_nil(t:next_attempt())
    assert.is_nil(list:next_attempt())
    t:close()
    list:close()
  end)

  it("refuses bad reconnect options", function()
    local function bad(r, msg)
      local ok, err = pcall(pc.grpc, "127.0.0.1:1", { reconnect = r })
      assert.is_false(ok)
      assert.are.equal(msg, (tostring(err):gsub("^[^:]+:%d+: ", "")))
    end
    bad({ initial = -1 }, "pc.grpc: reconnect.initial: a number of seconds >= 0 expected, got -1")
    bad({ multiplier = 0.5 }, "pc.grpc: reconnect.multiplier: at least 1 expected, got 0.5")
    bad({ jitter = 2 }, "pc.grpc: reconnect.jitter: at most 1 expected, got 2")
    bad({ initial = 5, maximum = 2 }, "pc.grpc: reconnect.maximum: at least reconnect.initial (5) expected, got 2")
    bad({ inital = 1 }, "pc.grpc: reconnect: unknown field 'inital'")
  end)
end)

describe("wait_for_ready", function()
  it("waits through refused connection attempts for a server that comes up before its deadline", function()
    local port = refusing_port()
    local t = pc.grpc("127.0.0.1:" .. port, { wait_for_ready = true, reconnect = { initial = 0.2, jitter = 0 } })
    local s = server_later(port, 0.5)
    assert.are.equal("late", t:unary("/test.Test/Echo", "late", { timeout = 20 }))
    helper.stop(s)
    t:close()
  end)

  it("waits in a pc.spawn task while another task starts a pc.listen server on the port", function()
    pc.load_file("examples/route.proto")
    local l = pc.listen(pc.server { ["demo.Router"] = {
      Measure = function(route) return { legs = #route.name } end } }, "127.0.0.1:0")
    local port = l.port
    l:shutdown()
    local got, err, listener, done
    pc.spawn(function()
      local c = pc.client("demo.Router", { transport = pc.grpc("127.0.0.1:" .. port,
        { wait_for_ready = true, reconnect = { initial = 0.1, jitter = 0 } }) })
      local ok, r = pcall(c.Measure, c, { name = "abc" }, { timeout = 20 })
      if ok then got = r.legs else err = r end
      done = true
      if listener then listener:shutdown() end
    end)
    pc.spawn(function()
      pc.sleep(0.4)
      if done then return end -- the call did not wait
      listener = pc.listen(pc.server { ["demo.Router"] = {
        Measure = function(route) return { legs = #route.name } end } }, "127.0.0.1:" .. port)
      listener:serve()
    end)
    pc.run()
    assert.is_nil(err, tostring(err))
    assert.are.equal(3, got)
  end)

  it("fails DEADLINE_EXCEEDED at its deadline, naming the last attempt, when no server comes", function()
    local port = refusing_port()
    local t = pc.grpc("127.0.0.1:" .. port, { wait_for_ready = true, reconnect = { initial = 0.2, jitter = 0 } })
    local t0 = now()
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 1.5 })
    local took = now() - t0
    assert.are.equal("DEADLINE_EXCEEDED", err.code)
    assert.are.equal("deadline exceeded waiting for a connection (the last attempt: connect to 127.0.0.1:"
      .. port .. ": Connection refused)", err.message)
    assert.is_true(took >= 1.5 - 0.005 and took < 1.5 + 5, "took " .. took .. " s")
    t:close()
  end)

  it("waits out its deadline even when the next attempt comes after it", function()
    local port = refusing_port()
    local t = pc.grpc("127.0.0.1:" .. port, { wait_for_ready = true, reconnect = { initial = 30, jitter = 0 } })
    local t0 = now()
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 1 })
    local took = now() - t0
    assert.are.equal("DEADLINE_EXCEEDED", err.code)
    assert.are.equal("deadline exceeded waiting for a connection (the last attempt: connect to 127.0.0.1:"
      .. port .. ": Connection refused)", err.message)
    assert.is_true(took >= 1 - 0.005 and took < 1 + 5, "took " .. took .. " s")
    t:close()
  end)

  it("keeps a call cancelled while its connection attempt was under way cancelled (not sent again)", function()
    pc.load_file("examples/route.proto")
    local port = free_port()
    local got = {}
    local server = pc.server { ["demo.Router"] = { Record = function(ctx)
      got[#got + 1] = "started"
      while ctx:recv() do got[#got + 1] = "point" end
      return { legs = 0 }
    end } }
    local t = pc.grpc("127.0.0.1:" .. port, { wait_for_ready = true, reconnect = { initial = 0.1, jitter = 0 } })
    local err, listener
    pc.spawn(function()
      local call = t:stream("/demo.Router/Record", { timeout = 5 })
      call:send(pc.encode(pc.type("demo.Point") { x = 1 }))
      call:cancel() -- on the connection being made: the attempt fails after this
      pc.sleep(0.8) -- the attempts after the backoff, the server up meanwhile
      err = helper.status_error(call.recv, call)
      call:close()
      listener:shutdown()
    end)
    pc.spawn(function()
      pc.sleep(0.2)
      listener = pc.listen(server, "127.0.0.1:" .. port)
      listener:serve()
    end)
    pc.run()
    t:close()
    assert.are.equal("CANCELLED", err.code)
    assert.are.equal("cancelled", err.message)
    assert.are.same({}, got)
  end)

  it("ends a waiting call UNAVAILABLE when the transport is closed: no attempt is made for it after", function()
    local port = free_port()
    -- the first attempt refused at once, the call waits for the next, 1 s later
    local t = pc.grpc("127.0.0.1:" .. port, { wait_for_ready = true, reconnect = { initial = 1, jitter = 0 } })
    local err
    pc.spawn(function() err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 30 }) end)
    pc.spawn(function()
      pc.sleep(0.3)
      t:close()
    end)
    pc.run()
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal("connect to 127.0.0.1:" .. port .. ": the channel is closed", err.message)
  end)

  it("fails a waiting call whose request is over the 4 MiB it keeps UNAVAILABLE, saying so", function()
    local t = pc.grpc("127.0.0.1:" .. refusing_port(), { wait_for_ready = true,
      reconnect = { initial = 0.1, jitter = 0 } })
    local big = ("x"):rep(4 * 1024 * 1024 + 1)
    local want = "the request is over the 4 MiB a call waiting for a connection keeps (wait_for_ready)"
    local err = failure(t.unary, t, "/test.Test/Echo", big, { timeout = 30 })
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal(want, err.message)
    -- a stream waiting for the connection: its send of such a message
    local call = t:stream("/test.Test/Chat", { timeout = 30 })
    err = failure(function()
      call:send(big)
      call:recv()
    end)
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal(want, err.message)
    t:close()
  end)

  it("holds a client stream's sender while it waits, then delivers every message once, in order", function()
    assert(pc.load([[
      syntax = "proto3"; package wfr;
      message Chunk { int32 i = 1; bytes data = 2; }
      message Count { repeated int32 seen = 1; int64 bytes = 2; }
      service Up { rpc Put(stream Chunk) returns (Count); }]], { name = "spec/wfr_up.proto" }))
    local port = free_port()
    local server = pc.server { ["wfr.Up"] = { Put = function(ctx)
      local seen, bytes = {}, 0
      for c in ctx.recv, ctx do
        seen[#seen + 1] = c.i
        bytes = bytes + #c.data
      end
      return { seen = seen, bytes = bytes }
    end } }
    local c = pc.client("wfr.Up", { transport = pc.grpc("127.0.0.1:" .. port, { wait_for_ready = true,
      reconnect = { initial = 0.1, multiplier = 1, jitter = 0 } }) })
    -- 6 MiB in all, more than a waiting call keeps (4 MiB): the sender waits for the connection
    local n, size = 192, 32 * 1024
    local r, err, listener, done
    pc.spawn(function()
      local ok, e = pcall(function()
        local call = c:Put { timeout = 30 }
        for i = 1, n do call:send { i = i, data = ("x"):rep(size) } end
        r = call:close_and_recv()
      end)
      if not ok then err = e end
      done = true
      if listener then listener:shutdown() end
    end)
    pc.spawn(function()
      pc.sleep(0.5)
      if done then return end -- the call did not wait
      listener = pc.listen(server, "127.0.0.1:" .. port)
      listener:serve()
    end)
    pc.run()
    assert.is_nil(err, tostring(err))
    local want, seen = {}, {}
    for i = 1, n do want[i] = i end
    for i = 1, #r.seen do seen[i] = r.seen[i] end
    assert.are.same(want, seen)
    assert.are.equal(n * size, r.bytes)
  end)

  it("leaves a call without it failing UNAVAILABLE at once on a refused connection", function()
    local port = refusing_port()
    local t = pc.grpc("127.0.0.1:" .. port, { reconnect = { initial = 0.2, jitter = 0 } })
    local t0 = now()
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 10 })
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal("connect to 127.0.0.1:" .. port .. ": Connection refused", err.message)
    assert.is_true(now() - t0 < 5, "took " .. (now() - t0) .. " s")
    t:close()
  end)
end)

-- gRPC's wait-for-ready through a balancer (transport/balancer.lua): a
-- call whose every backend failed to connect waits for the next attempt
-- the backends' backoff allows, until a backend connects or its deadline.
describe("wait_for_ready through a balancer", function()
  pc.load_file("examples/route.proto")
  local ROUTER = { ["demo.Router"] = {
    Measure = function(route) return { legs = #route.name } end,
    Walk = function(route, ctx) for i = 1, #route.name do ctx.send { x = i } end end,
    Record = function(ctx)
      local n = 0
      while ctx:recv() do n = n + 1 end
      return { legs = n }
    end,
    Follow = function(ctx)
      for p in function() return ctx:recv() end do ctx.send { x = p.x * 10 } end
    end,
  } }

  -- Runs `call()` in a task while another starts a server of ROUTER on
  -- `port` `delay` s later (no server when `port` is nil), or closes
  -- transport `closing` then; the server stops when the call returned.
  -- Returns pcall's results of the call.
  local function late(port, delay, call, closing)
    local ok, res, listener, done
    pc.spawn(function()
      ok, res = pcall(call)
      done = true
      if listener then listener:shutdown() end
    end)
    pc.spawn(function()
      pc.sleep(delay)
      if done then return end -- the call did not wait
      if closing then return closing:close() end
      if port == nil then return end
      listener = pc.listen(pc.server(ROUTER), "127.0.0.1:" .. port)
      listener:serve()
    end)
    pc.run()
    return ok, res
  end

  local function pair(opts)
    local p1, p2 = free_port(), free_port()
    local t = pc.grpc({ "127.0.0.1:" .. p1, "127.0.0.1:" .. p2 }, opts)
    return t, pc.client("demo.Router", { transport = t }), p1, p2
  end

  local function refused(p1, p2, what)
    return { ["connect to 127.0.0.1:" .. p1 .. ": " .. what] = true, ["connect to 127.0.0.1:" .. p2 .. ": "
      .. what] = true }
  end

  it("waits while every backend refuses, for the one that comes up, with either policy", function()
    for _, policy in ipairs { "pick_first", "round_robin" } do
      local t, c, _, p2 = pair { wait_for_ready = true, load_balancing = policy, reconnect = { initial = 0.1,
        jitter = 0 } }
      local ok, r = late(p2, 0.5, function() return c:Measure({ name = "abc" }, { timeout = 20 }) end)
      t:close()
      assert.is_true(ok, policy .. ": " .. tostring(r))
      assert.are.equal(3, r.legs)
    end
  end)

  it("keeps a started call waiting while another call on the transport waits too", function()
    -- the other call's connection attempt on a backend must not make the
    -- started call's refused attempt look sent (it failed UNAVAILABLE)
    local t, _, _, p2 = pair { wait_for_ready = true, reconnect = { initial = 0.1 } }
    local request = pc.encode(pc.type("demo.Route") { name = "abcd" })
    local started
    local ok, r = late(p2, 0.5, function()
      pc.spawn(function()
        local h = t:start_unary("/demo.Router/Measure", request, { timeout = 20 })
        while h:result() == nil do t:wait({ h }, 1) end
        started = { h:result() }
      end)
      local res = t:unary("/demo.Router/Measure", request, { timeout = 20 })
      while started == nil do pc.sleep(0.01) end -- the server stays up for it
      return res
    end)
    t:close()
    assert.is_true(ok, tostring(r))
    assert.are.equal(4, pc.decode(pc.type("demo.Distance"), r).legs)
    assert.is_true(started[1], tostring(started[2]))
    assert.are.equal(4, pc.decode(pc.type("demo.Distance"), started[2]).legs)
  end)

  it("fails over concurrent calls to the backend that is up, without wait_for_ready", function()
    local p1 = free_port()
    local l = pc.listen(pc.server(ROUTER), "127.0.0.1:0")
    local t = pc.grpc({ "127.0.0.1:" .. p1, "127.0.0.1:" .. l.port }, { reconnect = { initial = 0.1 } })
    local c = pc.client("demo.Router", { transport = t })
    local results = {}
    for i = 1, 4 do
      pc.spawn(function() results[i] = { pcall(c.Measure, c, { name = ("x"):rep(i) }, { timeout = 10 }) } end)
    end
    pc.spawn(function()
      while #results < 4 or not (results[1] and results[2] and results[3] and results[4]) do pc.sleep(0.01) end
      l:shutdown()
    end)
    l:serve()
    pc.run()
    t:close()
    for i = 1, 4 do
      assert.is_true(results[i][1], tostring(results[i][2]))
      assert.are.equal(i, results[i][2].legs)
    end
  end)

  it("waits with the default reconnection backoff (1 s, growing) too", function()
    local t, c, p1 = pair { wait_for_ready = true }
    local ok, r = late(p1, 0.5, function() return c:Measure({ name = "ab" }, { timeout = 30 }) end)
    t:close()
    assert.is_true(ok, tostring(r))
    assert.are.equal(2, r.legs)
  end)

  it("fails DEADLINE_EXCEEDED naming the last attempt when its deadline comes first", function()
    local t, c, p1, p2 = pair { wait_for_ready = true, reconnect = { initial = 0.1, jitter = 0 } }
    local ok, err = late(p2, 1.5, function() return c:Measure({ name = "abc" }, { timeout = 0.5 }) end)
    t:close()
    assert.is_false(ok)
    assert.are.equal("DEADLINE_EXCEEDED", err.code, tostring(err))
    local want = {}
    for m in pairs(refused(p1, p2, "Connection refused")) do
      want["deadline exceeded waiting for a connection (the last attempt: " .. m .. ")"] = true
    end
    assert.is_true(want[err.message], err.message)
  end)

  it("without wait_for_ready still fails UNAVAILABLE once every backend refused", function()
    local t, c, _, p2 = pair { reconnect = { initial = 0.1, jitter = 0 } }
    local ok, err = late(p2, 0.5, function() return c:Measure({ name = "abc" }, { timeout = 20 }) end)
    t:close()
    assert.is_false(ok)
    assert.are.equal("UNAVAILABLE", err.code, tostring(err))
    assert.are.equal("connect to 127.0.0.1:" .. p2 .. ": Connection refused", err.message)
  end)

  it("ends a waiting call UNAVAILABLE when the transport is closed", function()
    local t, c, p1, p2 = pair { wait_for_ready = true, reconnect = { initial = 1, jitter = 0 } }
    local ok, err = late(nil, 0.3, function() return c:Measure({ name = "abc" }, { timeout = 30 }) end, t)
    assert.is_false(ok)
    assert.are.equal("UNAVAILABLE", err.code, tostring(err))
    assert.is_true(refused(p1, p2, "the channel is closed")[err.message], err.message)
  end)

  it("waits the same way for a server stream, a client stream and a bidirectional stream", function()
    local t, c, p1 = pair { wait_for_ready = true, reconnect = { initial = 0.1, jitter = 0 } }
    local ok, r = late(p1, 0.5, function()
      local xs = {}
      for p in c:Walk({ name = "abc" }, { timeout = 20 }) do xs[#xs + 1] = p.x end
      return xs
    end)
    t:close()
    assert.is_true(ok, tostring(r))
    assert.are.same({ 1, 2, 3 }, r)
    local t2, c2, _, p2 = pair { wait_for_ready = true, reconnect = { initial = 0.1, jitter = 0 } }
    ok, r = late(p2, 0.5, function()
      local call = c2:Record { timeout = 20 }
      for i = 1, 4 do call:send { x = i } end
      return call:close_and_recv()
    end)
    t2:close()
    assert.is_true(ok, tostring(r))
    assert.are.equal(4, r.legs)
    local t3, c3, p31 = pair { wait_for_ready = true, reconnect = { initial = 0.1, jitter = 0 } }
    ok, r = late(p31, 0.5, function()
      local call = c3:Follow { timeout = 20 }
      call:send { x = 1 }
      call:send { x = 2 }
      call:close_send()
      local xs = {}
      for p in function() return call:recv() end do xs[#xs + 1] = p.x end
      return xs
    end)
    t3:close()
    assert.is_true(ok, tostring(r))
    assert.are.same({ 10, 20 }, r)
  end)

  it("does not send again a call a server failed UNAVAILABLE \"connect to ...\" itself", function()
    -- a handler passing on its own upstream's failure: the call reached the
    -- server, over a connection that is up; once each, no loop to the deadline
    local handled = 0
    local relay = pc.Error { code = "UNAVAILABLE", message = "connect to 10.9.9.9:5432: Connection refused" }
    local svc = { ["demo.Router"] = {
      Measure = function() handled = handled + 1 error(relay) end,
      Record = function(ctx)
        handled = handled + 1
        while ctx:recv() do end
        error(relay)
      end,
    } }
    local l1, l2 = pc.listen(pc.server(svc), "127.0.0.1:0"), pc.listen(pc.server(svc), "127.0.0.1:0")
    local t = pc.grpc({ "127.0.0.1:" .. l1.port, "127.0.0.1:" .. l2.port }, { wait_for_ready = true })
    local c = pc.client("demo.Router", { transport = t })
    local errs, counts = {}, {}
    pc.spawn(function() l1:serve() end)
    pc.spawn(function() l2:serve() end)
    pc.spawn(function()
      errs[1] = select(2, pcall(c.Measure, c, { name = "abc" }, { timeout = 5 }))
      counts[1], handled = handled, 0
      errs[2] = select(2, pcall(function()
        local call = c:Record { timeout = 5 }
        call:send { x = 1 }
        return call:close_and_recv()
      end))
      counts[2] = handled
      l1:shutdown()
      l2:shutdown()
    end)
    pc.run()
    t:close()
    for i = 1, 2 do
      assert.are.equal("UNAVAILABLE", errs[i].code, tostring(errs[i]))
      assert.are.equal("connect to 10.9.9.9:5432: Connection refused", errs[i].message)
    end
    assert.are.same({ 1, 1 }, counts)
  end)

  it("keeps no request message of a stream once it went out on a connection", function()
    -- 4 client streams on a server that is up, 3.6 MB sent on each, none
    -- answered yet: what they sent is not held to be sent again
    local l = pc.listen(pc.server(ROUTER), "127.0.0.1:0")
    local t = pc.grpc({ "127.0.0.1:" .. l.port, "127.0.0.1:" .. free_port() }, { wait_for_ready = true,
      load_balancing = "pick_first" })
    local held
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local pad = "\122\224\212\3" .. ("x"):rep(60000) -- a demo.Point with an unknown field of 60000 bytes
      collectgarbage()
      local before = collectgarbage("count")
      local calls = {}
      for k = 1, 4 do
        calls[k] = t:stream("/demo.Router/Record", { timeout = 20 })
        for i = 1, 60 do calls[k]:send(pad .. "\8" .. string.char(i)) end -- each message its own string
      end
      collectgarbage()
      held = (collectgarbage("count") - before) * 1024
      for k = 1, 4 do assert.are.equal(60, pc.decode(pc.type("demo.Distance"), calls[k]:close_and_recv()).legs) end
      l:shutdown()
    end)
    pc.run()
    t:close()
    assert.is_true(held < 1e6, ("%.1f MB held"):format(held / 1e6))
  end)

  it("does not start a cancelled stream again on another backend", function()
    -- its first backend refused before the cancel; nothing of it may reach the second
    local p1 = free_port()
    local records = 0
    local l = pc.listen(pc.server { ["demo.Router"] = { Record = function(ctx)
      records = records + 1
      while ctx:recv() do end
      return { legs = 0 }
    end } }, "127.0.0.1:0")
    local t = pc.grpc({ "127.0.0.1:" .. p1, "127.0.0.1:" .. l.port }, { wait_for_ready = true,
      load_balancing = "pick_first", reconnect = { initial = 0.1, jitter = 0 } })
    local c = pc.client("demo.Router", { transport = t })
    local ok, err
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local call = c:Record { timeout = 5 }
      call:send { x = 1 }
      pc.sleep(0.3) -- its connection attempt fails meanwhile
      call:cancel()
      ok, err = pcall(call.close_and_recv, call)
      pc.sleep(0.3)
      l:shutdown()
    end)
    pc.run()
    t:close()
    assert.is_false(ok)
    assert.are.equal("CANCELLED", err.code, tostring(err))
    assert.are.equal(0, records)
  end)

  it("waits the same way for started calls (hedged unary and server-streaming calls)", function()
    local hedged = { methodConfig = { { name = { { service = "demo.Router" } },
      hedgingPolicy = { maxAttempts = 2, hedgingDelay = "30s", nonFatalStatusCodes = {} } } } }
    local t, _, p1 = pair { wait_for_ready = true, reconnect = { initial = 0.1, jitter = 0 } }
    local c = pc.client("demo.Router", { transport = t, service_config = hedged })
    local ok, r = late(p1, 0.5, function()
      local legs = c:Measure({ name = "abcd" }, { timeout = 20 }).legs
      local n = 0
      for _ in c:Walk({ name = "ab" }, { timeout = 20 }) do n = n + 1 end
      return { legs, n }
    end)
    t:close()
    assert.is_true(ok, tostring(r))
    assert.are.same({ 4, 2 }, r)
  end)
end)

describe("keepalive", function()
  it("closes a connection whose PING gets no ACK: its call fails UNAVAILABLE, long before the deadline", function()
    local silent = helper.spawn("silent") -- takes the connection, never answers anything
    local t = pc.grpc("127.0.0.1:" .. silent.port, { keepalive_time = 0.2, keepalive_timeout = 0.3 })
    local t0 = now()
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 20 })
    local took = now() - t0
    t:close()
    helper.stop(silent)
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal("keepalive: no PING ACK from 127.0.0.1:" .. silent.port .. " within 0.3 s", err.message)
    assert.is_true(took >= 0.5 and took < 10, "took " .. took .. " s")
  end)

  it("sends no PING without keepalive_time: the same call runs to its deadline", function()
    local silent = helper.spawn("silent")
    local t = pc.grpc("127.0.0.1:" .. silent.port)
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 1 })
    t:close()
    helper.stop(silent)
    assert.are.equal("DEADLINE_EXCEEDED", err.code)
  end)

  it("keeps a quiet call to a live server going: PINGs are answered", function()
    local s = helper.spawn_command("/usr/bin/python3 spec/interop_server.py 0", "interop_server.py")
    assert(pc.load_file("grpc/testing/test.proto", { import_paths = { "spec/fixtures/protos" } }))
    local t = pc.grpc("127.0.0.1:" .. s.port, { keepalive_time = 0.1, keepalive_timeout = 1 })
    local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20 })
    local sizes = {}
    -- 1.2 s of silence before each response: about a dozen PINGs
    for r in stub:StreamingOutputCall { response_parameters = {
      { size = 3, interval_us = 1200000 }, { size = 4, interval_us = 1200000 } } } do
      sizes[#sizes + 1] = #r.payload.body
    end
    assert.are.same({ 3, 4 }, sizes)
    t:close()
    helper.stop(s)
  end)

  it("refuses bad keepalive options", function()
    assert.has_error(function() pc.grpc("127.0.0.1:1", { keepalive_time = 0 }) end,
      "pc.grpc: option 'keepalive_time': positive number of seconds up to 1000000000 expected, got 0")
    assert.has_error(function() pc.grpc("127.0.0.1:1", { keepalive_timeout = -1 }) end,
      "pc.grpc: option 'keepalive_timeout': positive number of seconds up to 1000000000 expected, got -1")
  end)
end)
