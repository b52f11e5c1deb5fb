-- A connection attempt of pc.grpc lasts until the server's first HTTP/2
-- SETTINGS frame (RFC 9113 section 3.4), bounded as the TCP connect and
-- TLS are (connect_timeout, else max(min_connect_timeout, the backoff);
-- gRPC's connection-backoff document): a peer that takes the connection and
-- never speaks HTTP/2 (a wrong port, a TLS-terminating box forwarding to
-- nothing) fails its calls UNAVAILABLE, `lost` and not `unsent` (their
-- bytes went out), instead of holding them to their deadline or for ever.
-- With the built-in sockets and a host driver (spec/socket_driver.lua),
-- over h2c and TLS. The silent peers are spec/grpc_server.py's silent mode,
-- which counts the connections and bytes it took; `late` relays to a real
-- server after a delay. No elapsed-time asserts: each call has a 30 s
-- deadline, which the old hang ran into (DEADLINE_EXCEEDED).
package.path = "spec/?.lua;" .. package.path
local pc = require "protocall"
local helper = require "grpc_helper"
local sdriver = require "socket_driver"

local failure = helper.status_error

local OUTER = 30 -- seconds: each call's deadline, far past the bounds under test

-- A silent peer counting into a file of its own: the peer, and a function
-- returning the connections it took and the bytes it read so far.
local function silent(...)
  local file = os.tmpname()
  local peer = helper.spawn("silent", 0, file, ...)
  return peer, function()
    local f = io.open(file)
    local line = f and f:read("*l")
    if f then f:close() end
    local conns, bytes = (line or ""):match("^(%d+) (%d+)$")
    return tonumber(conns) or 0, tonumber(bytes) or 0
  end, function()
    helper.stop(peer)
    os.remove(file)
  end
end

local function no_settings(port, seconds)
  return ("connect to 127.0.0.1:%d: no HTTP/2 SETTINGS from the server within %s s"):format(port, seconds)
end

-- The error of a call that reached a silent peer and was given up at the bound.
local function assert_lost(err, port, seconds)
  assert.are.equal("UNAVAILABLE", err.code, tostring(err))
  assert.are.equal(no_settings(port, seconds), err.message)
  assert.is_true(err.lost)
  assert.is_not_true(err.unsent) -- written: a server may have run it
end

-- A python3-grpcio server for one test (started there: one of setup would
-- reach grpc_server.py's lifetime while the old hang ran each silent test
-- to its 30 s deadline).
local function with_server(fn)
  local server = helper.spawn("grpc")
  local ok, err = pcall(fn, server)
  helper.stop(server)
  if not ok then error(err, 0) end
end

describe("the server's first SETTINGS", function()

  it("bounds by connect_timeout a call without a short deadline to a peer that never speaks HTTP/2", function()
    local peer, seen, stop = silent()
    local t = pc.grpc("127.0.0.1:" .. peer.port, { connect_timeout = 0.5 })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER })
    t:close()
    local conns, bytes = seen()
    stop()
    assert_lost(err, peer.port, "0.5")
    assert.are.equal(1, conns)
    assert.is_true(bytes > 24, "the preface and the call were written: " .. bytes) -- the preface is 24 bytes
  end)

  it("bounds it by max(min_connect_timeout, the backoff) without connect_timeout", function()
    local peer, seen, stop = silent()
    local t = pc.grpc("127.0.0.1:" .. peer.port, { reconnect = { min_connect_timeout = 0.5, initial = 0.5 } })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER })
    t:close()
    local conns = seen()
    stop()
    assert_lost(err, peer.port, "0.5")
    assert.are.equal(1, conns)
  end)

  it("counts such a connection as a failed attempt: the backoff holds the next one back", function()
    local peer, seen, stop = silent()
    local t = pc.grpc("127.0.0.1:" .. peer.port, { connect_timeout = 0.5, reconnect = { initial = 10, jitter = 0 } })
    assert.is_nil(t:next_attempt())
    assert_lost(failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER }), peer.port, "0.5")
    assert.is_not_nil(t:next_attempt())
    -- gRPC's fail-fast: the next call fails at once with why, no new connection
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER })
    t:close()
    local conns = seen()
    stop()
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.equal(1, err.message:find(no_settings(peer.port, "0.5") .. " (reconnection backoff: ", 1, true),
      err.message)
    assert.is_true(err.unsent) -- this one never left the client
    assert.are.equal(1, conns)
  end)

  it("fails unsent a call held for the SETTINGS (headers past 8 KB): it never left", function()
    local peer, seen, stop = silent()
    local t = pc.grpc("127.0.0.1:" .. peer.port, { connect_timeout = 0.5 })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER,
      metadata = { { "x-big", ("a"):rep(10000) } } })
    t:close()
    local _, bytes = seen()
    stop()
    assert.are.equal("UNAVAILABLE", err.code, tostring(err))
    assert.are.equal(no_settings(peer.port, "0.5"), err.message)
    assert.is_true(err.unsent) -- a balancer may move it on
    assert.is_true(bytes < 10000, "its headers were not written: " .. bytes)
  end)

  it("does not send a wait_for_ready call again: it was written once, it fails lost", function()
    local peer, seen, stop = silent()
    local t = pc.grpc("127.0.0.1:" .. peer.port, { connect_timeout = 0.5, wait_for_ready = true,
      reconnect = { initial = 0.1, jitter = 0 } })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER })
    pc.sleep(0.5) -- past the backoff: a call sent again would have connected again
    t:close()
    local conns = seen()
    stop()
    assert_lost(err, peer.port, "0.5")
    assert.are.equal(1, conns)
  end)

  it("leaves a server that answers at once alone, past the bound too", function() with_server(function(server)
    local t = pc.grpc(server.url, { connect_timeout = 0.3, reconnect = { min_connect_timeout = 0.3, initial = 0.3 } })
    assert.are.equal("one", t:unary("/test.Test/Echo", "one", { timeout = OUTER }))
    pc.sleep(0.6)
    assert.are.equal("two", t:unary("/test.Test/Echo", "two", { timeout = OUTER }))
    assert.is_nil(t:next_attempt()) -- no attempt failed
    t:close()
  end) end)

  it("takes a server whose SETTINGS come late but within the bound", function() with_server(function(server)
    local late = helper.spawn("late", 0, "0.3", tostring(server.port))
    local t = pc.grpc("127.0.0.1:" .. late.port, { connect_timeout = 5 })
    local ok, got = pcall(t.unary, t, "/test.Test/Echo", "late", { timeout = OUTER })
    t:close()
    helper.stop(late)
    assert.is_true(ok, tostring(got))
    assert.are.equal("late", got)
  end) end)

  it("reads what came while the loop was busy before judging the SETTINGS missing", function()
    with_server(function(server)
      -- the SETTINGS and the answer come at 0.3 s, within the bound (2 s); a task then holds
      -- the loop until 3.5 s: they wait unread, and must be read before the call is judged lost
      local late = helper.spawn("late", 0, "0.3", tostring(server.port))
      local t = pc.grpc("127.0.0.1:" .. late.port, { connect_timeout = 2 })
      local got
      pc.spawn(function() got = { pcall(t.unary, t, "/test.Test/Echo", "busy", { timeout = OUTER }) } end)
      pc.spawn(function()
        pc.sleep(0.1) -- the call written
        local t0 = pc.now()
        while pc.now() - t0 < 3.4 do end -- busy, not yielding
      end)
      pc.run()
      local next_attempt = t:next_attempt()
      t:close()
      helper.stop(late)
      assert.is_true(got[1], tostring(got[2]))
      assert.are.equal("busy", got[2])
      assert.is_nil(next_attempt) -- no attempt failed
    end)
  end)

  it("bounds it over TLS: a handshake done, then silence", function()
    local certs = helper.make_certs()
    local peer, seen, stop = silent(certs .. "/server.pem", certs .. "/server.key")
    local t = pc.grpc("https://127.0.0.1:" .. peer.port, { connect_timeout = 0.5, ca_file = certs .. "/ca.pem",
      server_name = "localhost" })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER })
    t:close()
    local conns, bytes = seen()
    stop()
    os.execute("rm -rf " .. certs)
    assert_lost(err, peer.port, "0.5")
    assert.are.equal(1, conns)
    assert.is_true(bytes > 24, "the preface and the call went through TLS: " .. bytes)
  end)

  it("says what the connection had not done when a call's deadline comes first", function()
    local peer, _, stop = silent()
    -- connected, no SETTINGS yet: the call was written
    local t = pc.grpc("127.0.0.1:" .. peer.port, { connect_timeout = OUTER })
    local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 0.3 })
    t:close()
    assert.are.equal("DEADLINE_EXCEEDED", err.code, tostring(err))
    assert.are.equal(("deadline exceeded (connected to 127.0.0.1:%d, no HTTP/2 SETTINGS from the server yet)")
      :format(peer.port), err.message)
    -- a TLS handshake the peer never answers: not connected yet, wait_for_ready or not
    for _, wait in ipairs { false, true } do
      local tls = pc.grpc("https://127.0.0.1:" .. peer.port, { connect_timeout = OUTER, wait_for_ready = wait,
        insecure = true })
      err = failure(tls.unary, tls, "/test.Test/Echo", "x", { timeout = 0.3 })
      tls:close()
      assert.are.equal("DEADLINE_EXCEEDED", err.code, tostring(err))
      assert.are.equal(("deadline exceeded waiting for a connection (connecting to 127.0.0.1:%d)")
        :format(peer.port), err.message)
    end
    stop()
  end)

  it("marks a balancer's backend failed: the call is not moved on, the next call takes another backend", function()
    with_server(function(server)
      local peer, seen, stop = silent()
      local silent_at = "127.0.0.1:" .. peer.port
      local t = pc.grpc({ silent_at, "127.0.0.1:" .. server.port }, { connect_timeout = 0.5 }) -- pick_first
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER })
      local state = t:backends()
      local ok, got = pcall(t.unary, t, "/test.Test/Echo", "next", { timeout = OUTER })
      t:close()
      local conns = seen()
      stop()
      assert_lost(err, peer.port, "0.5")
      assert.are.equal(1, conns) -- sent once, to the silent backend alone
      assert.are.equal(silent_at, state[1].address)
      assert.is_true(state[1].failed)
      assert.is_true(ok, tostring(got))
      assert.are.equal("next", got)
    end)
  end)

  describe("with a host driver", function()
    it("bounds it the same: the driver's connection is closed, its call lost", function()
      local peer, seen, stop = silent()
      local D = sdriver.new(pc)
      local t = pc.grpc("127.0.0.1:" .. peer.port, { driver = D, connect_timeout = 0.5 })
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER })
      t:close()
      local conns = seen()
      stop()
      assert_lost(err, peer.port, "0.5")
      assert.are.equal(1, conns)
      assert.are.equal(1, D.counts.connect)
      assert.are.equal(1, D.counts.close)
    end)

    it("bounds it by min_connect_timeout over TLS, a wait_for_ready call sent once", function()
      local certs = helper.make_certs()
      local peer, seen, stop = silent(certs .. "/server.pem", certs .. "/server.key")
      local t = pc.grpc("https://127.0.0.1:" .. peer.port, { driver = sdriver.new(pc), ca_file = certs .. "/ca.pem",
        server_name = "localhost", wait_for_ready = true, reconnect = { min_connect_timeout = 0.5, initial = 0.5 } })
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = OUTER })
      t:close()
      local conns = seen()
      stop()
      os.execute("rm -rf " .. certs)
      assert_lost(err, peer.port, "0.5")
      assert.are.equal(1, conns)
    end)

    it("takes a server whose SETTINGS come late but within the bound", function() with_server(function(server)
      local late = helper.spawn("late", 0, "0.3", tostring(server.port))
      local t = pc.grpc("127.0.0.1:" .. late.port, { driver = sdriver.new(pc), connect_timeout = 5 })
      local ok, got = pcall(t.unary, t, "/test.Test/Echo", "late", { timeout = OUTER })
      t:close()
      helper.stop(late)
      assert.is_true(ok, tostring(got))
      assert.are.equal("late", got)
    end) end)
  end)
end)
