-- Host I/O drivers: pc.grpc(target, {driver = D}) with a driver written in
-- Lua on lua-socket (spec/socket_driver.lua), against the python3-grpcio
-- test server (spec/grpc_server.py grpc) and the scripted python3-h2 peer
-- (h2 mode): every call shape through pc.client, tasks interleaving on
-- one connection, GOAWAY through the channel's shared connection logic,
-- and drivers that fail, break mid-call, close or hang.
local pc = require "protocall"

local helper = require "grpc_helper"
local sdriver = require "socket_driver"
local now, spawn, stop = helper.now, helper.spawn, helper.stop

assert(pc.load_file("spec/fixtures/protos/grpc/faults.proto",
                    { import_paths = { "spec/fixtures/protos" } }))
assert(pc.load([[
syntax = "proto3";
package faults;
import "grpc/faults.proto";
service Talk { rpc Chat(stream Request) returns (stream Reply); }
]], { name = "grpc/driver_talk.proto", import_paths = { "spec/fixtures/protos" } }))

local failure = helper.failure

describe("pc.grpc with a host driver", function()
  local server, peer
  setup(function()
    server = spawn("grpc")
    peer = spawn("h2")
  end)
  teardown(function()
    stop(server)
    stop(peer)
  end)

  local function faults(driver, opts)
    opts = opts or {}
    opts.driver = driver
    return pc.client("faults.Faults", { transport = pc.grpc(server.url, opts) })
  end

  describe("every call shape", function()
    local D, c, t
    setup(function()
      D = sdriver.new(pc)
      t = pc.grpc(server.url, { driver = D })
      c = pc.client("faults.Faults", { transport = t })
    end)
    teardown(function() t:close() end)

    it("unary, with metadata and gzip", function()
      assert.are.equal("hi", c:Echo({ text = "hi" }, { timeout = 5 }).text)
      local r = c:Metadata({}, { metadata = { { "x-k", "v" } }, timeout = 5 })
      assert.are.equal("x-k", r.metadata[1].key)
      assert.are.equal(("z"):rep(100), c:Compressed({ text = "z" }, { timeout = 5, compression = "gzip" }).text)
      -- a large answer crosses many receiveany calls and window updates
      assert.are.equal(3 * 1024 * 1024, #c:Big({ size = 3 * 1024 * 1024 }, { timeout = 10 }).payload)
    end)

    it("server streaming", function()
      local seen = {}
      for r in c:Stream({ count = 50, size = 1000 }, { timeout = 5 }) do seen[#seen + 1] = r.index end
      assert.are.equal(50, #seen)
      assert.are.equal(50, seen[50])
    end)

    it("client streaming", function()
      local call = c:Record { timeout = 5 }
      for i = 1, 20 do call:send { text = tostring(i) } end
      local r = call:close_and_recv()
      assert.are.equal(20, r.attempts)
      assert.are.equal("1,2,3", r.text:sub(1, 5))
    end)

    it("bidirectional, one task sending while another reads", function()
      local talk = pc.client("faults.Talk", { transport = t })
      local call = talk:Chat { timeout = 5 }
      local got = {}
      local t0 = now()
      pc.spawn(function()
        for i = 1, 10 do
          call:send { text = "m" .. i }
          pc.sleep(0.005)
        end
        call:close_send()
      end)
      pc.spawn(function()
        for r in function() return call:recv() end do got[#got + 1] = r.text end
      end)
      pc.run()
      assert.are.same({ "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10" }, got)
      -- each message goes out when sent, not when the reader's wait ends
      -- (a wait's end would be a second's round: 0.9 leaves a loaded machine room)
      local elapsed = now() - t0
      assert.is_true(elapsed < 0.9, "took " .. elapsed .. " s")
    end)

    it("errors with status and trailers", function()
      local err = failure(c.FailThenSucceed, c, { failures = 1, code = "NOT_FOUND", id = "drv-fail" })
      assert.are.equal("NOT_FOUND", err.code)
      assert.are.equal("failure 1 of 1", err.message)
    end)

    it("one connection for every call", function()
      assert.are.equal(1, D.counts.connect)
    end)
  end)

  it("interleaves two tasks' calls on one connection through a yielding driver", function()
    local D = sdriver.new(pc)
    local c = faults(D)
    assert.are.equal("warm", c:Echo({ text = "warm" }, { timeout = 5 }).text)
    local yields = D.counts.yields
    local done = {}
    local t0 = now()
    for i = 1, 2 do
      pc.spawn(function() done[i] = c:Sleep({ seconds = 0.5 }, { timeout = 5 }).text end)
    end
    pc.run()
    local elapsed = now() - t0
    assert.are.same({ "slept", "slept" }, done)
    assert.is_true(elapsed < 0.95, "took " .. elapsed .. " s") -- one after the other: 1 s
    assert.are.equal(1, D.counts.connect)
    assert.is_true(D.counts.yields > yields, "the driver never yielded")
  end)

  it("runs 50 tasks' calls on one connection", function()
    local D = sdriver.new(pc)
    local c = faults(D)
    local got = {}
    for i = 1, 50 do
      pc.spawn(function() got[i] = c:Echo({ text = tostring(i) }, { timeout = 10 }).text end)
    end
    pc.run()
    for i = 1, 50 do assert.are.equal(tostring(i), got[i]) end
    assert.are.equal(1, D.counts.connect)
  end)

  describe("a call started without a wait", function()
    -- the request reaches the handler while the task only sleeps: no wait on
    -- the call drives the driver meanwhile (transport/driver.lua's kick)
    local function until_got(got, n)
      local by = pc.now() + 5
      repeat pc.sleep(0.02) until #got >= n or pc.now() > by
    end

    it("connects a stream and sends its message while its task does other work", function()
      local l, got = helper.recording_router(pc)
      local D = sdriver.new(pc)
      local seen, result
      pc.spawn(function()
        local c = pc.client("demo.Router", { transport = pc.grpc("http://127.0.0.1:" .. l.port, { driver = D }) })
        local stream = c:Record()
        stream:send({ x = 7 })
        until_got(got, 2)
        seen = table.concat(got, " ")
        result = stream:close_and_recv()
        l:shutdown(1)
      end)
      pc.run()
      assert.are.equal("started 7", seen)
      assert.are.equal(0, result.legs)
      assert.are.equal(1, D.counts.connect)
    end)

    it("connects and sends started unary calls before transport:wait", function()
      local l, got = helper.recording_router(pc)
      local D = sdriver.new(pc)
      local Point = pc.type("demo.Point")
      local seen, results = nil, {}
      pc.spawn(function()
        local t = pc.grpc("http://127.0.0.1:" .. l.port, { driver = D })
        local hs = {}
        for i = 1, 2 do hs[i] = t:start_unary("/demo.Router/Record", pc.encode(Point { x = i }), { timeout = 5 }) end
        until_got(got, 4)
        seen = {}
        for i, v in ipairs(got) do seen[i] = tostring(v) end
        table.sort(seen)
        for i = 1, 2 do
          local ok, r = hs[i]:result()
          while ok == nil do
            t:wait(hs, 1)
            ok, r = hs[i]:result()
          end
          results[i] = ok and #r or tostring(r)
        end
        t:close()
        l:shutdown(1)
      end)
      pc.run()
      assert.are.same({ "1", "2", "started", "started" }, seen)
      assert.are.same({ 0, 0 }, results) -- Distance{legs = 0}: no bytes
      assert.are.equal(1, D.counts.connect)
    end)

    it("sends a started call's request on a connected transport before any wait", function()
      local l, got = helper.recording_router(pc)
      local D = sdriver.new(pc)
      local Point = pc.type("demo.Point")
      local seen
      pc.spawn(function()
        local t = pc.grpc("http://127.0.0.1:" .. l.port, { driver = D })
        t:unary("/demo.Router/Record", pc.encode(Point { x = 1 }), { timeout = 5 }) -- connected
        local h = t:start_unary("/demo.Router/Record", pc.encode(Point { x = 2 }), { timeout = 5 })
        until_got(got, 4)
        seen = table.concat(got, " ")
        while h:result() == nil do t:wait({ h }, 1) end
        t:close()
        l:shutdown(1)
      end)
      pc.run()
      assert.are.equal("started 1 started 2", seen)
      assert.are.equal(1, D.counts.connect)
    end)
  end)

  it("passes host, port and options to connect, and settimeouts in seconds", function()
    local seen, timeouts
    local D
    D = sdriver.new(pc, {
      connect = function(_, host, port, opts) seen = { host = host, port = port, opts = opts } end,
      settimeouts = function(sock, c, s, r)
        timeouts = { c, s, r }
        sock.send_timeout, sock.read_timeout = s, r
        return true
      end,
    })
    local c = faults(D, { connect_timeout = 3 })
    assert.are.equal("x", c:Echo({ text = "x" }, { timeout = 5 }).text)
    assert.are.equal("127.0.0.1", seen.host)
    assert.are.equal(server.port, seen.port)
    assert.is_false(seen.opts.tls)
    assert.is_nil(seen.opts.alpn) -- a byte pipe: TLS and its ALPN are the channel's
    assert.is_true(seen.opts.timeout > 0 and seen.opts.timeout <= 3, tostring(seen.opts.timeout))
    assert.are.equal(3, timeouts[1])
    assert.is_true(timeouts[3] > 0 and timeouts[3] <= 1, tostring(timeouts[3]))
  end)

  describe("faults", function()
    it("a connect that fails is UNAVAILABLE with what the driver said", function()
      local D = sdriver.new(pc, { connect = function() return nil, "connection refused" end })
      local err = failure(faults(D).Echo, faults(D), { text = "x" }, { timeout = 2 })
      assert.are.equal("UNAVAILABLE", err.code)
      assert.are.equal("connect to 127.0.0.1:" .. server.port .. ": connection refused", err.message)
      -- the real refusal of a closed port, through lua-socket
      local t = pc.grpc("http://127.0.0.1:1", { driver = sdriver.new(pc) })
      err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 2 })
      assert.are.equal("UNAVAILABLE", err.code)
      assert.matches("connect to 127.0.0.1:1: .*refused", err.message)
    end)

    it("a connect that raises is UNAVAILABLE with the error", function()
      local D = { connect = function() error("driver bug", 0) end }
      local t = pc.grpc(server.url, { driver = D })
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 2 })
      assert.are.equal("UNAVAILABLE", err.code)
      assert.matches("driver bug", err.message, 1, true)
    end)

    it("a failed connect backs off, then reconnects", function()
      local fail = true
      local D = sdriver.new(pc, { connect = function() if fail then return nil, "refused" end end })
      local t = pc.grpc(server.url, { driver = D, reconnect = { initial = 0.1, jitter = 0 } })
      assert.are.equal("UNAVAILABLE", failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 2 }).code)
      fail = false
      pc.sleep(0.15) -- past the backoff: the next call connects
      assert.are.equal("again", t:unary("/test.Test/Echo", "again", { timeout = 2 }))
      assert.are.equal(2, D.counts.connect)
    end)

    it("a wait_for_ready call waits through failed connects, for the attempt after the backoff", function()
      local refused = 0
      local D = sdriver.new(pc, { connect = function()
        if refused < 2 then
          refused = refused + 1
          return nil, "refused"
        end
      end })
      local t = pc.grpc(server.url, { driver = D, wait_for_ready = true, reconnect = { initial = 0.1,
        multiplier = 2, jitter = 0 } })
      local t0 = now()
      assert.are.equal("late", t:unary("/test.Test/Echo", "late", { timeout = 5 }))
      -- two backoffs, 0.1 then 0.2 s, before the third attempt
      assert.is_true(now() - t0 >= 0.3 - 0.005, "no backoff: " .. (now() - t0) .. " s")
      assert.are.equal(3, D.counts.connect)
    end)

    it("a wait_for_ready call that never connects ends DEADLINE_EXCEEDED at its deadline", function()
      local D = sdriver.new(pc, { connect = function() return nil, "refused" end })
      local t = pc.grpc(server.url, { driver = D, wait_for_ready = true, reconnect = { initial = 0.2, jitter = 0 } })
      local t0 = now()
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 1 })
      local took = now() - t0
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.are.equal("deadline exceeded waiting for a connection (the last attempt: connect to 127.0.0.1:"
        .. server.port .. ": refused)", err.message)
      assert.is_true(took >= 1 - 0.005 and took < 1 + 5, "took " .. took .. " s")
      assert.is_true(D.counts.connect >= 2, D.counts.connect .. " connects")
    end)

    it("transport:close ends a wait_for_ready call whose connect is under way: no attempt after it", function()
      local D = sdriver.new(pc, { connect = function()
        pc.sleep(0.2) -- under way while the other task closes the transport
        return nil, "refused"
      end })
      local t = pc.grpc(server.url, { driver = D, wait_for_ready = true, reconnect = { initial = 0.05, jitter = 0 } })
      local err
      pc.spawn(function() err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 3 }) end)
      pc.spawn(function()
        pc.sleep(0.05)
        t:close()
      end)
      pc.run()
      assert.are.equal("UNAVAILABLE", err.code)
      assert.are.equal("connect to 127.0.0.1:" .. server.port .. ": refused", err.message)
      assert.are.equal(1, D.counts.connect)
    end)

    it("transport:close wakes a task waiting on a wait_for_ready call at once, which ends UNAVAILABLE", function()
      local D = sdriver.new(pc, { connect = function() return nil, "refused" end })
      local t = pc.grpc(server.url, { driver = D, wait_for_ready = true, reconnect = { initial = 30, jitter = 0 } })
      local err, seen
      pc.spawn(function() err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 60 }) end)
      pc.spawn(function()
        pc.sleep(0.1) -- the call waits for the attempt 30 s on, its task in a round of up to 1 s
        t:close()
        pc.sleep(0.001) -- a task the close woke runs before this one
        seen = err
      end)
      pc.run()
      assert.is_not_nil(seen, "the waiting task was not woken by the close")
      assert.are.equal("connect to 127.0.0.1:" .. server.port .. ": the channel is closed", seen.message)
    end)

    it("call:cancel from another task wakes the task waiting on a wait_for_ready call at once", function()
      local D = sdriver.new(pc, { connect = function() return nil, "refused" end })
      local t = pc.grpc(server.url, { driver = D, wait_for_ready = true, reconnect = { initial = 30, jitter = 0 } })
      local call = t:stream("/test.Test/Echo", { timeout = 60 })
      local err, seen
      pc.spawn(function() err = failure(call.recv, call) end)
      pc.spawn(function()
        pc.sleep(0.1) -- the call waits for the attempt 30 s on, its task in a round of up to 1 s
        call:cancel()
        pc.sleep(0.001) -- a task the cancel woke runs before this one
        seen = err
      end)
      pc.run()
      call:close()
      t:close()
      assert.is_not_nil(seen, "the waiting task was not woken by the cancel")
      assert.are.equal("CANCELLED", seen.code)
    end)

    it("a read error mid-call is UNAVAILABLE and the next call reconnects", function()
      local broken = false
      local D = sdriver.new(pc, {
        receiveany = function(sock)
          if broken then
            broken = false
            sock.tcp:close()
            return nil, "connection reset by peer"
          end
        end,
      })
      local c = faults(D)
      assert.are.equal("a", c:Echo({ text = "a" }, { timeout = 5 }).text)
      broken = true
      local err = failure(c.Sleep, c, { seconds = 0.2 }, { timeout = 5 })
      assert.are.equal("UNAVAILABLE", err.code)
      assert.are.equal("read from 127.0.0.1:" .. server.port .. ": connection reset by peer", err.message)
      assert.are.equal("b", c:Echo({ text = "b" }, { timeout = 5 }).text)
      assert.are.equal(2, D.counts.connect)
    end)

    it("a send error is UNAVAILABLE", function()
      local D = sdriver.new(pc, { send = function() return nil, "broken pipe" end })
      local t = pc.grpc(server.url, { driver = D })
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 2 })
      assert.are.equal("UNAVAILABLE", err.code)
      assert.are.equal("send to 127.0.0.1:" .. server.port .. ": broken pipe", err.message)
    end)

    it("a peer that closes is UNAVAILABLE", function()
      local D = sdriver.new(pc, { receiveany = function() return nil, "closed" end })
      local t = pc.grpc(server.url, { driver = D })
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 2 })
      assert.are.equal("UNAVAILABLE", err.code)
      -- (it closed before the server's SETTINGS could be read)
      assert.are.equal("read from 127.0.0.1:" .. server.port
        .. ": connection closed by the peer before its HTTP/2 SETTINGS", err.message)
    end)

    it("a driver that never answers ends at the deadline", function()
      local D = sdriver.new(pc, {
        receiveany = function(sock)
          pc.sleep(sock.read_timeout)
          return nil, "timeout"
        end,
      })
      local t = pc.grpc(server.url, { driver = D })
      local t0 = now()
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 0.3 })
      local elapsed = now() - t0
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.is_true(elapsed >= 0.29 and elapsed < 2, "took " .. elapsed .. " s")
    end)

    it("a connect that hangs ends at the deadline", function()
      local D = sdriver.new(pc, {
        connect = function(_, _, _, opts)
          pc.sleep(opts.timeout)
          return nil, "timeout"
        end,
      })
      local t = pc.grpc(server.url, { driver = D })
      local t0 = now()
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 0.3 })
      local elapsed = now() - t0
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.is_true(elapsed >= 0.29 and elapsed < 2, "took " .. elapsed .. " s")
    end)

    it("TLS runs in the channel over the driver's bytes: sslhandshake is never called", function()
      local called, first
      local D = sdriver.new(pc, {
        send = function(_, bytes) first = first or bytes:byte(1) end,
      })
      local inner = D.connect
      D.connect = function(host, port, o)
        assert.is_false(o.tls)
        local sock = inner(host, port, o)
        if sock then sock.sslhandshake = function() called = true end end
        return sock
      end
      -- an h2c server: the ClientHello goes out, the handshake fails
      local t = pc.grpc("https://127.0.0.1:" .. server.port, { driver = D, server_name = "example.test" })
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 2 })
      assert.are.equal("UNAVAILABLE", err.code)
      assert.matches("^TLS handshake with 127%.0%.0%.1:" .. server.port .. ": ", err.message)
      assert.are.equal(0x16, first) -- a TLS handshake record
      assert.is_nil(called)
    end)
  end)

  describe("the channel's connection logic", function()
    it("completes a call across a graceful GOAWAY, then moves to a new connection", function()
      local D = sdriver.new(pc)
      local t = pc.grpc(peer.url, { driver = D })
      assert.are.equal("finished", t:unary("/raw.Test/GoawayFirst", "", { timeout = 5 }))
      assert.are.equal("ok", t:unary("/raw.Test/Ok", "", { timeout = 5 }))
      assert.are.equal(2, D.counts.connect)
      t:close()
    end)

    it("maps GOAWAY before an answer to UNAVAILABLE", function()
      local t = pc.grpc(peer.url, { driver = sdriver.new(pc) })
      assert.are.equal("UNAVAILABLE", failure(t.unary, t, "/raw.Test/Goaway", "", { timeout = 5 }).code)
    end)

    it("hedges a call: the second attempt answers while the first still runs", function()
      local D = sdriver.new(pc)
      local c = pc.client("faults.Faults", { transport = pc.grpc(server.url, { driver = D }), service_config = {
        methodConfig = { { name = { { service = "faults.Faults" } }, hedgingPolicy = {
          maxAttempts = 3, hedgingDelay = "0.2s", nonFatalStatusCodes = { "UNAVAILABLE" } } } } } })
      local t0 = now()
      local r = c:Hedge({ id = "drv-hedge", failures = 1, seconds = 5 }, { timeout = 10 })
      local took = now() - t0
      assert.are.equal(2, r.attempts)
      assert.is_true(took >= 0.2 and took < 1.5, "took " .. took .. " s")
      assert.are.equal(1, D.counts.connect)
    end)

    it("closes the driver's sockets with the transport", function()
      local D = sdriver.new(pc)
      local t = pc.grpc(server.url, { driver = D })
      assert.are.equal("x", t:unary("/test.Test/Echo", "x", { timeout = 5 }))
      t:close()
      assert.are.equal(1, D.counts.close)
    end)

    it("lets a call in flight at transport:close() go on to its end on the driver's socket", function()
      local D = sdriver.new(pc)
      local t = pc.grpc(server.url, { driver = D })
      local call = t:stream("/test.Test/Chat", { timeout = 5 })
      call:send("a")
      assert.are.equal("re:a", call:recv())
      t:close()
      assert.are.equal(0, D.counts.close)
      call:send("b")
      call:close_send()
      assert.are.equal("re:b", call:recv())
      assert.is_nil(call:recv())
      call:close()
      collectgarbage()
      collectgarbage()
    end)
  end)

  it("lets a transport dropped unclosed be collected with its connection's sockets", function()
    -- LuaJIT's weak-keyed tables too, which never let go of a key its value refers to
    local socks = setmetatable({}, { __mode = "k" })
    local D = sdriver.new(pc, {
      settimeouts = function(sock, _, s, r)
        socks[sock] = true
        sock.send_timeout, sock.read_timeout = s, r
        return true
      end,
    })
    local function call_and_drop()
      local t = pc.grpc(server.url, { driver = D })
      assert.are.equal("x", t:unary("/test.Test/Echo", "x", { timeout = 5 }))
    end
    call_and_drop()
    assert.is_not_nil(next(socks))
    -- three cycles: the channel (a userdata with __gc) is finalized in the
    -- first, leaves the weak-keyed table in the second, and what that
    -- entry held (the connections' sockets) goes in the third
    for _ = 1, 3 do collectgarbage() end
    assert.is_nil(next(socks), "the dropped transport's socket is still referenced")
  end)

  it("lets a transport dropped unclosed after a started call be collected with its sockets", function()
    -- the call's connection made by the task its start spawned (transport/driver.lua's kick)
    local socks = setmetatable({}, { __mode = "k" })
    local D = sdriver.new(pc, {
      settimeouts = function(sock, _, s, r)
        socks[sock] = true
        sock.send_timeout, sock.read_timeout = s, r
        return true
      end,
    })
    local got
    pc.spawn(function()
      local t = pc.grpc(server.url, { driver = D })
      local h = t:start_unary("/test.Test/Echo", "x", { timeout = 5 })
      local ok, r = h:result()
      while ok == nil do
        t:wait({ h }, 1)
        ok, r = h:result()
      end
      got = r
    end)
    pc.run()
    assert.are.equal("x", got)
    assert.is_not_nil(next(socks))
    for _ = 1, 3 do collectgarbage() end
    assert.is_nil(next(socks), "the dropped transport's socket is still referenced")
  end)

  it("refuses a driver without connect", function()
    assert.has_error(function() pc.grpc(server.url, { driver = {} }) end,
      "pc.grpc: option 'driver': a table with a function 'connect' expected")
    assert.has_error(function() pc.grpc(server.url, { driver = 1 }) end,
      "pc.grpc: option 'driver' must be a table, got number")
  end)

  it("refuses a DNS server and SRV names, which need the built-in driver", function()
    local d = { connect = function() return nil, "no" end }
    assert.has_error(function() pc.grpc("dns:///localhost:1", { driver = d, dns_server = "127.0.0.1:53" }) end,
      "pc.grpc: target 'dns:///localhost:1': a DNS server (dns://IP:PORT/ or dns_server) needs the built-in "
      .. "driver (a host driver's names are resolved by getaddrinfo or by the host)")
    assert.has_error(function() pc.grpc("dns://127.0.0.1:53/localhost:1", { driver = d }) end)
    assert.has_error(function() pc.grpc("dns:///_grpc._tcp.x.test", { driver = d }) end,
      "pc.grpc: target 'dns:///_grpc._tcp.x.test': SRV needs the built-in driver")
  end)
end)

describe("pc.grpc with a host driver whose sockets move their own bytes (attach), waiting with wake", function()
  -- the OpenResty driver's shape (lua/protocall/resty.lua): a call waits in
  -- the driver's wait(seconds, token) until a wake or the round's end
  it("ends a call whose deadline came while its connection was made at once, without waiting a round", function()
    local socket = require "socket"
    local connected, waits = false, {}
    local Sock = {
      attach = function(self, hooks) self.hooks = hooks end, -- a silent peer: no byte ever comes
      kick = function() end,
      close = function() return true end,
    }
    Sock.__index = Sock
    local D = {
      connect = function()
        socket.sleep(0.05) -- the connect outlasts the call's deadline
        connected = true
        return setmetatable({}, Sock)
      end,
      -- no wake comes: what the waiter is asked to wait is recorded, not waited
      wait = function(seconds)
        if connected then waits[#waits + 1] = seconds end
        return false
      end,
      wake = function() end,
    }
    local t = pc.grpc("127.0.0.1:1", { driver = D })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 0.01 })
    assert.are.equal("DEADLINE_EXCEEDED", err.code, tostring(err))
    assert.is_true(connected)
    -- a round after the tick that ended the call waited READ_CAP (1 s) for a wake that never came
    for _, s in ipairs(waits) do
      assert.is_true(s < 0.5, "waited " .. s .. " s after the call ended: " .. table.concat(waits, ", "))
    end
    t:close()
  end)
end)
