-- Clients over gRPC (bad input and faults at the client level):
-- pc.client on pc.grpc with real messages against the python3-grpcio test
-- server's message service faults.Faults (spec/fixtures/protos/grpc/faults.proto,
-- served by spec/grpc_server.py), with retry policies, deadlines,
-- metadata, compression and server streaming.
local pc = require "protocall"

local helper = require "grpc_helper"
local now, spawn, stop = helper.now, helper.spawn, helper.stop

assert(pc.load_file("spec/fixtures/protos/grpc/faults.proto",
                    { import_paths = { "spec/fixtures/protos" } }))
local Reply = pc.type("faults.Reply")
-- A bidirectional service of the test server (spec/grpc_server.py).
assert(pc.load([[
syntax = "proto3";
package faults;
import "grpc/faults.proto";
service Talk { rpc Chat(stream Request) returns (stream Reply); }
]], { name = "grpc/talk.proto", import_paths = { "spec/fixtures/protos" } }))

-- Quick retries: a few milliseconds apart, 5 s of budget.
local RETRY = pc.Retry { initial = 0.01, maximum = 0.05, timeout = 5 }

-- A transport that counts attempts and records each attempt's settings,
-- then hands the call to the real one.
local function spy(transport)
  local s = { attempts = 0, settings = {} }
  function s.unary(_, path, request, settings)
    s.attempts = s.attempts + 1
    s.settings[#s.settings + 1] = settings
    return transport:unary(path, request, settings)
  end
  function s.server_stream(_, path, request, settings)
    s.attempts = s.attempts + 1
    s.settings[#s.settings + 1] = settings
    return transport:server_stream(path, request, settings)
  end
  return s
end

local function client(transport, opts)
  opts = opts or {}
  opts.transport = transport
  return pc.client("faults.Faults", opts)
end

-- The error a call raised (the call must fail).
local failure = helper.failure

-- A fresh attempt-counter key per test.
local serial = 0
local function id()
  serial = serial + 1
  return "client-" .. serial
end

describe("pc.client over pc.grpc", function()
  local server, t

  setup(function()
    server = spawn("grpc")
    t = pc.grpc(server.url)
  end)

  teardown(function()
    t:close()
    stop(server)
  end)

  after_each(function() collectgarbage() end)

  local function attempts_on_server(key)
    return client(t):Attempts { id = key }.attempts
  end

  it("calls with plain tables and messages, and returns messages", function()
    local c = client(t)
    local r = c:Echo { text = "hello" }
    assert.are.equal(Reply, pc.type_of(r))
    assert.are.equal("hello", r.text)
    assert.are.equal("again", c:Echo(pc.type("faults.Request") { text = "again" }).text)
  end)

  it("retries a failing server until it succeeds, counting attempts", function()
    local s = spy(t)
    local key = id()
    local r = client(s, { retry = RETRY }):FailThenSucceed { id = key, failures = 2, code = "UNAVAILABLE" }
    assert.are.equal("ok after 2", r.text)
    assert.are.equal(3, s.attempts)
    assert.are.equal(3, attempts_on_server(key))
  end)

  describe("faults", function()
    it("maps connection refused to UNAVAILABLE, retried under a pc.Retry", function()
      local dead = spawn("silent")
      local url = dead.url
      stop(dead)
      local tr = pc.grpc(url)
      local s = spy(tr)
      local err = failure(client(s).Echo, client(s), { text = "x" })
      assert.are.equal(pc.Error, getmetatable(err))
      assert.are.equal("UNAVAILABLE", err.code)
      assert.are.equal("connect to 127.0.0.1:" .. dead.port .. ": Connection refused", err.message)
      assert.are.equal(1, s.attempts)

      s = spy(tr)
      local c = client(s, { retry = pc.Retry { initial = 0.01, maximum = 0.02, max_attempts = 3 } })
      err = failure(c.Echo, c, { text = "x" })
      assert.are.equal(pc.RetryError, getmetatable(err))
      assert.are.equal(3, err.attempts)
      assert.are.equal("UNAVAILABLE", err.cause.code)
      assert.are.equal(3, s.attempts)
      tr:close()
    end)

    it("succeeds after retries when the server is killed between calls and restarted", function()
      local s1 = spawn("grpc")
      local port = s1.port
      -- no reconnection backoff: each attempt of the retry policy makes a
      -- connection attempt of its own, refused (UNAVAILABLE, retried) until
      -- the server is back. With the default backoff the attempts within
      -- it would fail at once without one; with wait_for_ready the first
      -- would wait for the server, which only the third attempt restarts.
      local tr = pc.grpc(s1.url, { reconnect = { initial = 0, maximum = 0 } })
      local s = spy(tr)
      local restarted
      local retry = RETRY:with_predicate(function(e)
        -- the second failure restarts the server on the same port
        if s.attempts == 3 and not restarted then restarted = spawn("grpc", port) end
        return pc.if_transient_error(e)
      end)
      local c = client(s, { retry = retry })
      local key = id()
      assert.are.equal(1, c:Echo({ text = "before", id = key }).attempts)
      stop(s1)
      local r = c:Echo { text = "after", id = key }
      assert.are.equal("after", r.text)
      assert.are.equal(1 + 3, s.attempts)
      assert.are.equal(1, r.attempts) -- counted by the new server
      tr:close()
      stop(restarted)
    end)

    it("fails a server slower than the deadline with DEADLINE_EXCEEDED, soon after it", function()
      local c = client(t, { retry = RETRY, methods = { Sleep = { timeout = 0.3 } } })
      local key = id()
      local t0 = now()
      local err = failure(c.Sleep, c, { seconds = 5, id = key })
      local elapsed = now() - t0
      assert.are.equal(pc.Error, getmetatable(err))
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.are.equal("/faults.Faults/Sleep", err.method)
      assert.is_true(elapsed >= 0.29 and elapsed < 1.3, "took " .. elapsed .. " s")
      -- per call: a longer timeout, and false for none
      assert.are.equal("slept", c:Sleep({ seconds = 0.01 }, { timeout = 5 }).text)
      assert.are.equal("slept", c:Sleep({ seconds = 0.4 }, { timeout = false }).text)
    end)

    it("bounds every attempt and the retries by the call's deadline", function()
      local q = spawn("silent")
      local c = client(pc.grpc(q.url), { retry = RETRY, timeout = 0.3 })
      local t0 = now()
      local err = failure(c.Echo, c, { text = "x" })
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.is_true(now() - t0 < 1.3, "took " .. (now() - t0) .. " s")
      stop(q)
    end)

    it("fails an oversized response with RESOURCE_EXHAUSTED, local, not retried", function()
      local tr = pc.grpc(server.url, { max_receive_size = 1000 })
      local s = spy(tr)
      local c = client(s, { retry = RETRY })
      assert.are.equal(900, #c:Big({ size = 900 }).payload)
      local err = failure(c.Big, c, { size = 5000 })
      assert.are.equal(pc.Error, getmetatable(err))
      assert.are.equal("RESOURCE_EXHAUSTED", err.code)
      assert.are.equal("response message of 5005 bytes exceeds the receive limit of 1000 bytes",
                       err.message)
      assert.is_true(err["local"])
      assert.are.equal(2, s.attempts)
      -- the default 4 MiB limit
      err = failure(client(t).Big, client(t), { size = 5 * 1024 * 1024 })
      assert.are.equal("RESOURCE_EXHAUSTED", err.code)
      tr:close()
    end)

    it("fails a peer answering garbage with UNAVAILABLE or INTERNAL, without hanging", function()
      local g = spawn("garbage")
      local s = spy(pc.grpc(g.url))
      local c = client(s, { retry = pc.Retry { initial = 0.01, maximum = 0.02, max_attempts = 2 },
                            timeout = 10 })
      local t0 = now()
      local err = failure(c.Echo, c, { text = "x" })
      assert.is_true(now() - t0 < 5, "took " .. (now() - t0) .. " s")
      if getmetatable(err) == pc.RetryError then err = err.cause end
      assert.truthy(err.code == "UNAVAILABLE" or err.code == "INTERNAL", err.code)
      assert.is_true(s.attempts >= 1 and s.attempts <= 2)
      stop(g)
    end)

    it("fails a response that does not decode with INTERNAL naming the method, not retried", function()
      local s = spy(t)
      local c = client(s, { retry = RETRY })
      local err = failure(c.Undecodable, c, { text = "x" })
      assert.are.equal(pc.Error, getmetatable(err))
      assert.are.equal("INTERNAL", err.code)
      assert.are.equal("faults.Faults.Undecodable: response failed to decode: "
                       .. "faults.Reply.payload: length runs past the end of the input at offset 1", err.message)
      assert.is_true(err["local"])
      assert.are.equal(1, s.attempts)
    end)

    it("does not retry metadata the server's header list limit refuses", function()
      -- local RESOURCE_EXHAUSTED before anything is sent (the test server
      -- advertises 8192 bytes; it used to close the connection: UNAVAILABLE)
      local s = spy(pc.grpc(server.url))
      local c = client(s, { retry = RETRY }) -- retries UNAVAILABLE and RESOURCE_EXHAUSTED unless local
      local err = failure(c.Echo, c, { text = "x" }, { metadata = { { "x-big", string.rep("v", 20000) } } })
      assert.are.equal("RESOURCE_EXHAUSTED", err.code)
      assert.is_true(err["local"])
      assert.are.equal(1, s.attempts)
    end)

    it("does not retry a status the predicate refuses", function()
      local s = spy(t)
      local c = client(s, { retry = RETRY })
      local err = failure(c.FailThenSucceed, c, { id = id(), failures = 1, code = "INVALID_ARGUMENT" })
      assert.are.equal("INVALID_ARGUMENT", err.code)
      assert.are.equal("failure 1 of 1", err.message)
      assert.are.equal(1, s.attempts)
    end)
  end)

  describe("server pushback", function()
    it("sleeps what grpc-retry-pushback-ms says between attempts (above min_pushback)", function()
      local slept = {}
      local c = client(t, { retry = pc.Retry { initial = 30, maximum = 60, timeout = 120, min_pushback = 0.01 },
                            sleep = function(s) slept[#slept + 1] = s; pc.sleep(s) end })
      local r = c:Pushback { id = id(), failures = 2, pushback = "20" }
      assert.are.equal("ok after 2", r.text)
      assert.are.same({ 0.02, 0.02 }, slept)
    end)

    it("does not retry when the pushback is negative", function()
      local s = spy(t)
      local key = id()
      local c = client(s, { retry = RETRY })
      local err = failure(c.Pushback, c, { id = key, failures = 1, pushback = "-1" })
      assert.are.equal(pc.RetryError, getmetatable(err))
      assert.are.equal("UNAVAILABLE", err.cause.code)
      assert.is_true(err.cause.no_retry)
      assert.are.equal(1, s.attempts)
      assert.are.equal(1, attempts_on_server(key))
    end)
  end)

  describe("metadata and compression", function()
    local function sent(reply)
      local got = {}
      for _, p in pc.ipairs(reply.metadata) do got[p.key] = p.value end
      return got
    end

    it("sends the transport's, the client's, the method's and the call's metadata", function()
      local tr = pc.grpc(server.url, { metadata = { { "x-transport", "t" } } })
      local c = client(tr, { metadata = { { "x-client", "c" } },
                             methods = { Metadata = { metadata = { { "x-method", "m" } } } } })
      local got = sent(c:Metadata({}, { metadata = { { "x-call", "k" }, { "x-data-bin", "\0\255" } } }))
      assert.are.same({ ["x-transport"] = "t", ["x-method"] = "m", ["x-call"] = "k",
                        ["x-data-bin"] = "00ff" }, got)
      -- a method's metadata replaces the client's; other methods get the client's
      local plain = client(tr, { metadata = { { "x-client", "c" } } })
      assert.are.same({ ["x-transport"] = "t", ["x-client"] = "c" }, sent(plain:Metadata({})))
      tr:close()
    end)

    it("compresses per client and per call, and reads compressed replies", function()
      local s = spy(t)
      local c = client(s, { compression = "gzip" })
      local text = string.rep("compress me ", 1000)
      assert.are.equal(text, c:Echo({ text = text }).text)
      assert.are.equal("x", c:Echo({ text = "x" }, { compression = false }).text)
      assert.are.equal("y", client(s):Echo({ text = "y" }, { compression = "gzip" }).text)
      assert.are.equal("gzip", s.settings[1].compression)
      assert.is_nil(s.settings[2].compression)
      assert.are.equal("gzip", s.settings[3].compression)
      assert.are.equal(string.rep("abc", 100), client(t):Compressed({ text = "abc" }).text)
    end)
  end)

  describe("server streaming", function()
    it("iterates Reply messages", function()
      local got = {}
      for r in client(t):Stream { count = 3 } do
        assert.are.equal(Reply, pc.type_of(r))
        got[#got + 1] = r.index
      end
      assert.are.same({ 1, 2, 3 }, got)
      for _ in client(t):Stream { count = 0 } do error("no message expected") end
    end)

    it("retries a stream that fails before its first response", function()
      local s = spy(t)
      local key = id()
      local got = {}
      for r in client(s, { retry = RETRY }):Stream { id = key, failures = 2, code = "UNAVAILABLE", count = 2 } do
        got[#got + 1] = r.index .. "@" .. r.attempts
      end
      assert.are.same({ "1@3", "2@3" }, got)
      assert.are.equal(3, s.attempts)
    end)

    it("does not retry once a response arrived: the loop gets the error", function()
      local s = spy(t)
      local key = id()
      local got = {}
      local err = failure(function()
        for r in client(s, { retry = RETRY }):StreamThenFail { id = key, count = 2, code = "UNAVAILABLE" } do
          got[#got + 1] = r.index
        end
      end)
      assert.are.same({ 1, 2 }, got)
      assert.are.equal(pc.Error, getmetatable(err))
      assert.are.equal("UNAVAILABLE", err.code)
      assert.are.equal("stream failed after 2", err.message)
      assert.are.equal(1, s.attempts)
      assert.are.equal(1, attempts_on_server(key))
    end)

    it("bounds a stream by the call's deadline", function()
      local h = spawn("silent")
      local c = client(pc.grpc(h.url), { timeout = 0.3 })
      local t0 = now()
      local err = failure(function() for _ in c:Stream { count = 1 } do end end)
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.is_true(now() - t0 < 1.3)
      stop(h)
    end)
  end)

  describe("client streaming and bidirectional calls", function()
    it("sends a stream of requests and receives the one Reply", function()
      local call = client(t):Record({ timeout = 5 })
      call:send { text = "a" }
      call:send(pc.type("faults.Request") { text = "b" })
      local r = call:close_and_recv()
      assert.are.equal(Reply, pc.type_of(r))
      assert.are.equal("a,b", r.text)
      assert.are.equal(2, r.attempts)
      call:close()
    end)

    it("talks both ways from two tasks, one sending and one reading", function()
      local call = pc.client("faults.Talk", { transport = t, metadata = { { "x-client", "c" } } }):Chat()
      local got = {}
      pc.spawn(function()
        for i = 1, 50 do call:send { text = "m" .. i } end
        call:close_send()
      end)
      pc.spawn(function()
        for r in function() return call:recv() end do got[#got + 1] = r.index .. r.text end
      end)
      pc.run()
      assert.are.equal(50, #got)
      assert.are.equal("1m1", got[1])
      assert.are.equal("50m50", got[50])
      assert.are.equal("table", type(call:headers()))
      assert.are.equal("table", type(call:trailers()))
      call:close()
    end)

    it("bounds the call by its deadline and cancels it", function()
      local c = client(t, { methods = { Record = { timeout = 0.3 } } })
      local call = c:Record()
      local t0 = now()
      local err = failure(function()
        while true do
          call:send { text = "x" }
          pc.sleep(0.05)
        end
      end)
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.is_true(now() - t0 < 1.3)
      call:close()
      call = pc.client("faults.Talk", { transport = t }):Chat({ timeout = 5 })
      call:send { text = "first" }
      assert.are.equal("first", call:recv().text)
      call:cancel()
      assert.are.equal("CANCELLED", failure(call.recv, call).code)
      call:close()
    end)

    it("refuses a bad request and bad options at the caller's line", function()
      local talk = pc.client("faults.Talk", { transport = t })
      local call = talk:Chat()
      assert.has_error(function() call:send { nope = 1 } end)
      call:close()
      assert.has_error(function() talk:Chat(5) end,
                       "bad argument #1 to 'Chat' (table expected, got number)")
      -- every option is checked, as a unary stub's are (a boolean timeout crashed inside)
      local function refused(opts, why)
        local ok, err = pcall(function() local c = talk:Chat(opts); return c end)
        assert.is_false(ok)
        assert.are.equal("bad argument #1 to 'Chat' (" .. why .. ")", (tostring(err):gsub("^[^:]*:%d+: ", "")))
        assert.matches("client_grpc_spec%.lua:%d+:", err)
      end
      refused({ timeout = true }, "timeout: number of seconds, pc.ExponentialTimeout or false expected, got boolean")
      refused({ timeout = "x" }, "timeout: number of seconds, pc.ExponentialTimeout or false expected, got string")
      refused({ foo = 1 }, "unknown option 'foo'")
      refused({ retry = pc.Retry() },
        "retry: client-streaming and bidirectional calls are not retried (the requests are the caller's to send)")
      refused({ resume = print }, "resume: only server-streaming methods resume")
      refused({ with_metadata = true }, "with_metadata: the call object has headers() and trailers()")
      assert.has_error(function() client({}):Record() end,
                       "faults.Faults.Record: client-streaming and bidirectional calls are not supported yet")
    end)
  end)
end)
