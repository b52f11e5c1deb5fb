-- pc.grpc, the gRPC over HTTP/2 transport, against real servers
-- (bad input and faults): spec/grpc_server.py runs a
-- python3-grpcio server, a scripted HTTP/2 peer (python3-h2) for replies
-- grpcio will not make, and raw sockets that answer garbage or nothing.
local pc = require "protocall"
local core = require "protocall.core"

local helper = require "grpc_helper"
local now, spawn, stop = helper.now, helper.spawn, helper.stop

-- The error object a call raised (the call must fail).
local failure = helper.failure

-- Asserts that `fn()` raises the string `msg` at line `line` of this file
-- (luassert's has_error ignores the position).
local function raises_at(line, fn, msg)
  local ok, e = pcall(fn)
  assert.is_false(ok)
  assert.are.equal("spec/grpc_spec.lua:" .. line .. ": " .. msg, e)
end

local function find(pairs_list, key)
  for _, p in ipairs(pairs_list) do
    if p[1] == key then return p[2] end
  end
end

describe("pc.grpc", function()
  local server, peer, t, h

  setup(function()
    server = spawn("grpc")
    peer = spawn("h2")
    t = pc.grpc(server.url)
    h = pc.grpc(peer.url)
  end)

  teardown(function()
    stop(server)
    stop(peer)
  end)

  after_each(function() collectgarbage() end)

  describe("unary calls", function()
    it("echoes bytes, including NULs and an empty message", function()
      assert.are.equal("hello", t:unary("/test.Test/Echo", "hello"))
      assert.are.equal("\0\1\255", t:unary("/test.Test/Echo", "\0\1\255"))
      assert.are.equal("", t:unary("/test.Test/Echo", ""))
    end)

    it("moves a 3 MiB message both ways, plain and gzip", function()
      local big = string.rep("0123456789abcdef", 3 * 65536)
      assert.is_true(big == t:unary("/test.Test/Echo", big, { timeout = 20 }))
      assert.is_true(big == t:unary("/test.Test/Echo", big, { timeout = 20, compression = "gzip" }))
    end)

    it("reuses one connection across calls", function()
      local first = t:unary("/test.Test/Peer", "")
      assert.are.equal(first, t:unary("/test.Test/Peer", ""))
      assert.are.equal(first, t:unary("/test.Test/Peer", ""))
    end)

    it("reports a server's status with its code and message", function()
      local err = failure(t.unary, t, "/test.Test/FailWith", "NOT_FOUND no such row")
      assert.are.equal("NOT_FOUND", err.code)
      assert.are.equal("no such row", err.message)
      assert.are.equal("/test.Test/FailWith", err.method)
      assert.are.equal("NOT_FOUND: no such row", tostring(err))
      assert.are.equal(pc.Error, getmetatable(err))
      assert.is_nil(err["local"])
    end)

    it("percent-decodes grpc-message", function()
      local err = failure(t.unary, t, "/test.Test/FailWith", "ABORTED héllo 100%\n ok")
      assert.are.equal("ABORTED", err.code)
      assert.are.equal("héllo 100%\n ok", err.message)
      assert.are.equal("a b%ZZ%", core.grpc_percent_decode("a%20b%ZZ%"))
      assert.are.equal("%4", core.grpc_percent_decode("%4"))
    end)

    it("fails a given number of times, then succeeds", function()
      for i = 1, 2 do
        local err = failure(t.unary, t, "/test.Test/FailThenSucceed", "id-a 2 UNAVAILABLE")
        assert.are.equal("UNAVAILABLE", err.code)
        assert.are.equal("failure " .. i .. " of 2", err.message)
      end
      assert.are.equal("ok after 2", t:unary("/test.Test/FailThenSucceed", "id-a 2 UNAVAILABLE"))
    end)

    it("maps an unknown method to UNIMPLEMENTED", function()
      -- grpcio answers before reading the request: the answer is kept
      -- however early it comes (libcurl 7.88 lost it, hence a retry there).
      for _ = 1, 5 do
        assert.are.equal("UNIMPLEMENTED", failure(t.unary, t, "/test.Test/Nope", "").code)
      end
      assert.are.equal("UNIMPLEMENTED", failure(h.unary, h, "/raw.Test/Nope", "").code)
    end)

  end)

  describe("metadata", function()
    it("sends metadata and exposes response headers and trailers, -bin as bytes", function()
      local bytes = "\0\1\2\255 bin"
      local n, md = t:unary("/test.Test/Metadata", "", {
        metadata = { { "x-text", "plain value" }, { "x-data-bin", bytes } },
        with_metadata = true,
      })
      assert.are.equal("2", n)
      assert.are.equal("plain value", find(md.headers, "x-text"))
      assert.are.equal(bytes, find(md.headers, "x-data-bin"))
      assert.are.equal("plain value", find(md.trailers, "t-x-text"))
      assert.are.equal(bytes, find(md.trailers, "t-x-data-bin"))
      assert.is_nil(find(md.trailers, "grpc-status"))
    end)

    it("gives with_metadata = \"present\" the metadata only when the answer carries some", function()
      local n, md = t:unary("/test.Test/Metadata", "", { metadata = { { "x-text", "v" } }, with_metadata = "present" })
      assert.are.equal("1", n)
      assert.are.equal("v", find(md.headers, "x-text"))
      assert.are.equal("v", find(md.trailers, "t-x-text"))
      n, md = t:unary("/test.Test/Metadata", "", { with_metadata = "present" })
      assert.are.equal("0", n)
      assert.is_nil(md) -- content-type, grpc-status ...: gRPC's own
      n, md = t:unary("/test.Test/Metadata", "", { with_metadata = true })
      assert.are.equal("0", n)
      assert.are.same({ headers = {}, trailers = {} }, md)
    end)

    it("carries values with leading or trailing spaces to grpcio and takes them back", function()
      -- gRPC allows them (printable ASCII), RFC 9113 not: grpcio accepts them
      local n, md = t:unary("/test.Test/Metadata", "", {
        metadata = { { "x-lead", " v" }, { "x-trail", "v " } }, with_metadata = true })
      assert.are.equal("2", n)
      assert.are.equal(" v", find(md.headers, "x-lead"))
      assert.are.equal("v ", find(md.headers, "x-trail"))
      assert.are.equal(" v", find(md.trailers, "t-x-lead"))
      assert.are.equal("v ", find(md.trailers, "t-x-trail"))
    end)

    it("adds the transport's metadata to every call", function()
      local tm = pc.grpc(server.url, { metadata = { { "x-client", "c" } } })
      local _, md = tm:unary("/test.Test/Metadata", "",
                             { metadata = { { "x-call", "k" } }, with_metadata = true })
      assert.are.equal("c", find(md.headers, "x-client"))
      assert.are.equal("k", find(md.headers, "x-call"))
      tm:close()
    end)

    it("decodes padded and unpadded -bin values and grpc-status-details-bin", function()
      local err = failure(h.unary, h, "/raw.Test/BinMetadata", "")
      assert.are.equal("INVALID_ARGUMENT", err.code)
      assert.are.equal("bad arg%ZZ%", err.message)
      assert.are.equal("\0\1\254", find(err.headers, "x-pad-bin"))
      assert.are.equal("\255", find(err.headers, "x-pad2-bin"))
      assert.are.equal("\255", find(err.metadata, "x-unpad-bin"))
      assert.are.equal("\8\3\18\3bad", err.details_bin)
      assert.are.same({}, err.details) -- a google.rpc.Status without details
    end)

    -- A finalizer that an allocation of call:next(true) runs may close the
    -- call being read: the close waits for the read (it freed the call under
    -- it: a NULL pc_GrpcPair read in reserved_key under UBSan).
    it("reads a unary end and its metadata whole when a finalizer closes the call meanwhile", function()
      local core_ch = h.channel
      local inside, target, ran, hits, done = false, nil, 0, 0, false
      local function finalize()
        if done then return end
        ran = ran + 1
        if inside and target then
          target:close()
          target = nil
          hits = hits + 1
        end
      end
      local mt = { __gc = finalize }
      local function garbage() -- (LuaJIT finalizes userdata, not tables)
        if jit then
          getmetatable(newproxy(true)).__gc = finalize
        else
          setmetatable({}, mt)
        end
      end
      -- Many finalizable objects made garbage, then collector steps until
      -- the first of them has run: the rest wait in the list of objects to
      -- finalize. Lua 5.4 then calls ten of them a step, here a step per few
      -- bytes allocated (~2,000 a call, most outside call:next), so any
      -- allocation inside call:next runs one, whatever the state the suite's
      -- earlier files left the collector in. LuaJIT calls one a step and
      -- steps seldom inside the method: its hits are not asserted (the reads
      -- below still are).
      local mode_ok, mode = pcall(collectgarbage, "incremental")
      collectgarbage()
      for _ = 1, 60000 do garbage() end
      while ran == 0 do collectgarbage("step", 0) end
      if not jit then collectgarbage("incremental", 0, 0, 1) end -- steps of 2 bytes
      local tokens = {}
      for _ = 1, 200 do
        local call = core_ch:start("/raw.Test/Informational", 5, {}, false, 0, nil, false, false, "")
        while call:buffered() == 0 and not call:status() do core.grpc_pump({ core_ch }, 0.01, tokens) end
        for _ = 1, 10 do core.grpc_pump({ core_ch }, 0, tokens) end
        target, inside = call, true
        local m, last, md = call:next(true)
        inside, target = false, nil
        assert.are.equal("ok", m)
        assert.is_true(last)
        assert.are.same({ { "x-h", "1" } }, md.headers)
        assert.are.same({ { "x-t", "2" } }, md.trailers)
        call:close()
        if hits >= 10 then break end
      end
      done = true
      if not jit then collectgarbage("incremental", 0, 0, 13) end -- Lua 5.4's default: 8 KiB
      if mode_ok and mode ~= "incremental" then collectgarbage(mode) end
      collectgarbage()
      if not jit then assert.is_true(hits >= 10, "a close inside call:next in " .. hits .. " of 200 calls") end
    end)

    -- A list read through __len and __index (as metadata_problem allows)
    -- may hand out strings nothing else holds: the call keeps them until it
    -- has copied them (they were freed by a collection in a later __index).
    it("sends metadata read through __index whose strings only it holds", function()
      local entry_mt = {
        __len = function() return 2 end,
        __index = function(e, j)
          collectgarbage()
          return j == 1 and "x-k" .. e.i or e.i .. string.rep("v", 40)
        end,
      }
      local md = setmetatable({}, {
        __len = function() return 12 end,
        __index = function(_, i)
          collectgarbage()
          return setmetatable({ i = i }, entry_mt)
        end,
      })
      local got, meta = h:unary("/raw.Test/RefuseEcho", "proxy metadata", { metadata = md, with_metadata = true })
      assert.are.equal("proxy metadata", got)
      local echoed, want = {}, {}
      for _, p in ipairs(meta.trailers) do echoed[#echoed + 1] = p[1] .. "=" .. p[2] end
      for i = 1, 12 do want[i] = "x-echo-k" .. i .. "=" .. i .. string.rep("v", 40) end
      table.sort(echoed)
      table.sort(want)
      assert.are.same(want, echoed)
      -- gRPC-Web's trailers from such a list (core.web_trailers) as well
      local trailers = core.web_trailers({ code = 0, message = "" }, md)
      for i = 1, 12 do
        assert.is_truthy(trailers:find("\r\nx-k" .. i .. ":" .. i .. string.rep("v", 40) .. "\r\n", 1, true))
      end
    end)

    it("refuses invalid request metadata before sending, at the caller's line", function()
      local function refused(metadata, message)
        local ok, err = pcall(t.unary, t, "/test.Test/Echo", "", { metadata = metadata })
        assert.is_false(ok)
        assert.are.equal("bad argument #3 to 'unary' (" .. message .. ")", (err:gsub("^spec/grpc_spec%.lua:%d+: ", "")))
      end
      refused({ { "Bad-Key", "v" } }, "metadata key 'Bad-Key': only lowercase letters, digits, '_', '-', '.'")
      refused({ { "grpc-timeout", "1S" } }, "metadata key 'grpc-timeout' is reserved for the transport")
      refused({ { "x-a", "line\nbreak" } },
        "metadata 'x-a': value must be printable ASCII (use a '-bin' key for bytes)")
      refused({ ["x-a"] = "1" }, 'metadata: list of {key, value} pairs expected, got a table with key "x-a"')
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, err = pcall(function() t:unary("/test.Test/Echo", "", { metadata = { { "X", "1" } } }) end)
      assert.is_false(ok)
      assert.are.equal("spec/grpc_spec.lua:" .. line .. ":", err:match("^[^:]*:%d+:"))
    end)

    it("refuses bad metadata and an unreadable ca_file in pc.grpc itself", function()
      assert.has_error(function() pc.grpc(server.url, { metadata = { ["x-a"] = "1" } }) end,
        'pc.grpc: metadata: list of {key, value} pairs expected, got a table with key "x-a"')
      assert.has_error(function() pc.grpc(server.url, { metadata = { { "x-a", "1", "2" } } }) end,
        "pc.grpc: metadata: pair 1: {key, value} of strings expected")
      local ok, err = pcall(pc.grpc, "https://127.0.0.1:1", { ca_file = "/nonexistent/ca.pem" })
      assert.is_false(ok)
      assert.are.equal("pc.grpc: option 'ca_file': cannot read /nonexistent/ca.pem: "
        .. "No such file or directory", (err:gsub("^[^:]*:%d+: ", "")))
    end)


    it("survives a 40 KiB response header", function()
      assert.are.equal("ok", h:unary("/raw.Test/BigHeader", "", { timeout = 5 }))
    end)

    it("reads a Trailers-Only response, its metadata as the trailers (as grpcio)", function()
      local err = failure(h.unary, h, "/raw.Test/TrailersOnly", "")
      assert.are.equal("NOT_FOUND", err.code)
      assert.are.equal("no such thing", err.message)
      assert.are.equal("yes", find(err.metadata, "x-only"))
      assert.are.same({}, err.headers)
      err = failure(h.unary, h, "/raw.Test/TrailersOnly", "", { with_metadata = true })
      assert.are.equal("yes", find(err.metadata, "x-only"))
      assert.are.same({}, err.headers)
      -- a call object's headers() and trailers(); a server stream's error
      local call = h:stream("/raw.Test/TrailersOnly", { timeout = 5 })
      call:send("")
      assert.are.equal("NOT_FOUND", failure(call.close_and_recv, call).code)
      assert.are.same({}, call:headers())
      assert.are.equal("yes", find(call:trailers(), "x-only"))
      call:close()
      err = failure(h:server_stream("/raw.Test/TrailersOnly", "", { timeout = 5 }))
      assert.are.equal("yes", find(err.metadata, "x-only"))
      assert.are.same({}, err.headers)
    end)
  end)

  describe("compression", function()
    it("sends gzip requests the server decompresses", function()
      local big = string.rep("compress me ", 1000)
      assert.are.equal(big, t:unary("/test.Test/Echo", big, { compression = "gzip" }))
      local tz = pc.grpc(server.url, { compression = "gzip" })
      assert.are.equal(big, tz:unary("/test.Test/Echo", big))
      assert.are.equal("x", tz:unary("/test.Test/Echo", "x", { compression = "identity" }))
      tz:close()
    end)

    it("accepts gzip responses", function()
      assert.are.equal(string.rep("abc", 100), t:unary("/test.Test/Compressed", "abc"))
    end)

    it("refuses a compressed message without grpc-encoding, or with one not offered", function()
      local err = failure(h.unary, h, "/raw.Test/CompressedNoEncoding", "")
      assert.are.equal("INTERNAL", err.code)
      assert.are.equal("response message is compressed but no grpc-encoding was given", err.message)
      assert.is_true(err["local"])
      err = failure(h.unary, h, "/raw.Test/UnofferedEncoding", "")
      assert.are.equal("INTERNAL", err.code)
      assert.are.equal("response grpc-encoding 'br' was not offered (gzip only)", err.message)
    end)

    it("rejects an unknown compression name", function()
      assert.has_error(function() t:unary("/test.Test/Echo", "", { compression = "br" }) end)
    end)
  end)

  describe("size limit", function()
    it("fails an oversized response with RESOURCE_EXHAUSTED, local", function()
      local err = failure(t.unary, t, "/test.Test/Big", tostring(5 * 1024 * 1024))
      assert.are.equal("RESOURCE_EXHAUSTED", err.code)
      assert.are.equal("response message of 5242880 bytes exceeds the receive limit of 4194304 bytes",
                       err.message)
      assert.is_true(err["local"])
      -- the connection still works
      assert.are.equal("after", t:unary("/test.Test/Echo", "after"))
    end)

    it("takes the limit from max_receive_size, decompressed size included", function()
      local small = pc.grpc(server.url, { max_receive_size = 1000 })
      assert.are.equal(1000, #small:unary("/test.Test/Big", "1000"))
      assert.are.equal("RESOURCE_EXHAUSTED", failure(small.unary, small, "/test.Test/Big", "1001").code)
      local err = failure(small.unary, small, "/test.Test/Compressed", string.rep("z", 20))
      assert.are.equal("RESOURCE_EXHAUSTED", err.code)
      assert.are.equal("decompressed response message exceeds the receive limit of 1000 bytes",
                       err.message)
      assert.is_true(err["local"])
      small:close()
    end)
  end)

  describe("request header size", function()
    local peer_limit = "^request header list of %d+ bytes exceeds the server's limit of 8192 bytes "
      .. "%(SETTINGS_MAX_HEADER_LIST_SIZE: a field counts its name, its value and 32%)$"

    it("fails metadata over the server's SETTINGS_MAX_HEADER_LIST_SIZE at once, local", function()
      -- grpcio advertises 8192 bytes (and closes the connection past 16 KiB:
      -- UNAVAILABLE, retried, before this was checked); the first call on a
      -- connection waits for the server's SETTINGS to know it
      for _, n in ipairs { 9000, 20000 } do
        local fresh = pc.grpc(server.url)
        local t0 = now()
        local err = failure(fresh.unary, fresh, "/test.Test/Echo", "",
                            { timeout = 10, metadata = { { "x-big", string.rep("v", n) } } })
        assert.are.equal("RESOURCE_EXHAUSTED", err.code, err.message)
        assert.matches(peer_limit, err.message)
        assert.is_true(err["local"])
        assert.is_true(now() - t0 < 1, "took " .. now() - t0 .. " s")
        -- the connection still works, the limit now known before the call
        assert.are.equal("after", fresh:unary("/test.Test/Echo", "after"))
        err = failure(fresh.unary, fresh, "/test.Test/Echo", "", { metadata = { { "x-big", string.rep("v", n) } } })
        assert.matches(peer_limit, err.message)
        fresh:close()
      end
      -- 8 KiB in all goes out at once and the server takes it
      assert.are.equal("fits", t:unary("/test.Test/Echo", "fits", { metadata = { { "x-b", string.rep("v", 7000) } } }))
    end)

    it("fails a header block over what nghttp2 sends (64 KiB) at once, local", function()
      -- within the 64 KiB of keys and values metadata may hold, but the
      -- block is larger (the request's own fields; -bin values in base64)
      for _, md in ipairs { { { "x-big", string.rep("v", 65500) } },
                            { { "x-big-bin", string.rep("\0", 50000) } } } do
        local t0 = now()
        local err = failure(h.unary, h, "/raw.Test/Ok", "", { timeout = 10, metadata = md })
        assert.are.equal("RESOURCE_EXHAUSTED", err.code, err.message)
        assert.matches("^request header block of up to %d+ bytes exceeds the 65536 bytes nghttp2 sends as "
          .. "one header block$", err.message)
        assert.is_true(err["local"])
        assert.is_true(now() - t0 < 1, "took " .. now() - t0 .. " s")
      end
      assert.are.equal("ok", h:unary("/raw.Test/Ok", "", { metadata = { { "x-big", string.rep("v", 60000) } } }))
    end)
  end)

  describe("deadlines", function()
    it("fails a server slower than the deadline with DEADLINE_EXCEEDED, on time", function()
      local t0 = now()
      local err = failure(t.unary, t, "/test.Test/Sleep", "5", { timeout = 0.3 })
      local elapsed = now() - t0
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.is_true(elapsed >= 0.29 and elapsed < 1.3, "took " .. elapsed .. " s")
      assert.are.equal("slept", t:unary("/test.Test/Sleep", "0", { timeout = 5 }))
    end)

    it("cancels the stream of a missed deadline (RST_STREAM)", function()
      local function resets()
        local list = h:unary("/raw.Test/Resets", "")
        local n = 0
        for _ in list:gmatch("%d+") do n = n + 1 end
        return n
      end
      local before = resets()
      local err = failure(h.unary, h, "/raw.Test/Hang", "", { timeout = 0.2 })
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.are.equal("deadline exceeded", err.message)
      assert.are.equal(before + 1, resets())
    end)

    it("fails at once with no time left", function()
      local err = failure(t.unary, t, "/test.Test/Echo", "x", { timeout = 0 })
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.are.equal("deadline exceeded before the call started", err.message)
    end)

    it("formats grpc-timeout in at most 8 digits, never shorter than the time left", function()
      assert.are.equal("50000000n", core.grpc_timeout(0.05))
      assert.are.equal("1000000u", core.grpc_timeout(1))
      assert.are.equal("1500000u", core.grpc_timeout(1.5))
      assert.are.equal("200000m", core.grpc_timeout(200))
      assert.are.equal("1000000S", core.grpc_timeout(1e6))
      assert.are.equal("1666667M", core.grpc_timeout(1e8))
      assert.are.equal("1n", core.grpc_timeout(1e-12))
      assert.are.equal("99999999H", core.grpc_timeout(1e300))
    end)
  end)

  describe("faults", function()
    it("maps connection refused to UNAVAILABLE", function()
      local dead = spawn("silent")
      local url = dead.url
      stop(dead)
      local tr = pc.grpc(url)
      local err = failure(tr.unary, tr, "/test.Test/Echo", "x", { timeout = 5 })
      assert.are.equal("UNAVAILABLE", err.code)
      assert.are.equal("connect to 127.0.0.1:" .. dead.port .. ": Connection refused", err.message)
      tr:close()
    end)

    it("recovers on the same transport when the server is killed and restarted", function()
      local s = spawn("grpc")
      -- no reconnection backoff: the call after the refused one makes a
      -- connection attempt instead of failing at once during the backoff
      -- (and without wait_for_ready the refused one fails, UNAVAILABLE)
      local tr = pc.grpc(s.url, { reconnect = { initial = 0, maximum = 0 } })
      assert.are.equal("one", tr:unary("/test.Test/Echo", "one"))
      local port = s.port
      stop(s)
      assert.are.equal("UNAVAILABLE", failure(tr.unary, tr, "/test.Test/Echo", "x").code)
      s = spawn("grpc", port)
      assert.are.equal("two", tr:unary("/test.Test/Echo", "two"))
      -- killed and restarted between two calls, with no call in between
      stop(s)
      s = spawn("grpc", port)
      assert.are.equal("three", tr:unary("/test.Test/Echo", "three"))
      stop(s)
      tr:close()
    end)

    it("maps a connection lost in the middle of a call to UNAVAILABLE", function()
      local s = spawn("grpc")
      local tr = pc.grpc(s.url)
      assert.are.equal("up", tr:unary("/test.Test/Echo", "up"))
      os.execute("(sleep 0.3; kill -9 " .. s.pid .. ") >/dev/null 2>&1 &")
      local t0 = now()
      local err = failure(tr.unary, tr, "/test.Test/Sleep", "10", { timeout = 10 })
      assert.are.equal("UNAVAILABLE", err.code)
      assert.is_true(now() - t0 < 5)
      stop(s)
      tr:close()
    end)

    it("fails a peer answering garbage instead of HTTP/2, without hanging", function()
      local g = spawn("garbage")
      local tr = pc.grpc(g.url)
      local t0 = now()
      local err = failure(tr.unary, tr, "/test.Test/Echo", "x", { timeout = 10 })
      assert.is_true(now() - t0 < 5, "took " .. (now() - t0) .. " s")
      assert.truthy(err.code == "UNAVAILABLE" or err.code == "INTERNAL", err.code)
      tr:close()
      stop(g)
    end)

    it("bounds a peer that never answers by the deadline", function()
      local q = spawn("silent")
      local tr = pc.grpc(q.url)
      local t0 = now()
      assert.are.equal("DEADLINE_EXCEEDED",
                       failure(tr.unary, tr, "/test.Test/Echo", "x", { timeout = 0.3 }).code)
      assert.is_true(now() - t0 < 1.3)
      tr:close()
      stop(q)
    end)

    it("maps an HTTP status without grpc-status as the spec's table", function()
      local want = { Http400 = "INTERNAL", Http401 = "UNAUTHENTICATED", Http403 = "PERMISSION_DENIED",
                     Http404 = "UNIMPLEMENTED", Http429 = "UNAVAILABLE", Http502 = "UNAVAILABLE",
                     Http503 = "UNAVAILABLE", Http504 = "UNAVAILABLE", Http500 = "UNKNOWN",
                     Http431 = "INTERNAL" }
      for method, code in pairs(want) do
        local err = failure(h.unary, h, "/raw.Test/" .. method, "")
        assert.are.equal(code, err.code, method)
        assert.are.equal("no grpc-status in the response (HTTP status " .. method:sub(5) .. ")",
                         err.message)
      end
    end)

    it("never takes a response without grpc-status as OK", function()
      local err = failure(h.unary, h, "/raw.Test/NoStatus", "")
      assert.are.equal("UNKNOWN", err.code)
      assert.are.equal("no grpc-status in the response (HTTP status 200)", err.message)
      err = failure(h.unary, h, "/raw.Test/BadStatus", "")
      assert.are.equal("UNKNOWN", err.code)
      assert.are.equal("invalid grpc-status 'abc'", err.message)
    end)

    it("skips 1xx informational header blocks before the response", function()
      local r, md = h:unary("/raw.Test/Informational", "", { timeout = 5, with_metadata = true })
      assert.are.equal("ok", r)
      assert.are.same({ { "x-h", "1" } }, md.headers) -- no x-early of the 103 block
      assert.are.same({ { "x-t", "2" } }, md.trailers)
      local err = failure(h.unary, h, "/raw.Test/InformationalOnly", "", { timeout = 5 })
      assert.are.equal("NOT_FOUND", err.code)
      assert.are.equal("gone", err.message)
      assert.are.same({ { "x-only", "yes" } }, err.metadata)
    end)

    it("takes the status from the trailers, not a grpc-status in the headers (as C++)", function()
      -- the gRPC C++ client (1.51) reads the message after such headers and
      -- takes the status from the trailers; with none, the status is UNKNOWN
      local r, md = h:unary("/raw.Test/StatusInHeaders", "", { timeout = 5, with_metadata = true })
      assert.are.equal("ok", r)
      assert.are.same({ { "x-h", "1" } }, md.headers)
      assert.are.same({ { "x-t", "2" } }, md.trailers)
      for _, method in ipairs { "StatusInHeadersEnd", "StatusInHeaders0End" } do
        local got = {}
        local err = failure(function()
          for m in h:server_stream("/raw.Test/" .. method, "", { timeout = 5 }) do got[#got + 1] = m end
        end)
        assert.are.same({ "ok" }, got)
        assert.are.equal("UNKNOWN", err.code, method)
        assert.are.equal("no grpc-status in the response (HTTP status 200)", err.message)
      end
    end)

    it("fails a unary call with zero or two response messages", function()
      local err = failure(h.unary, h, "/raw.Test/Zero", "")
      assert.are.equal("INTERNAL", err.code)
      assert.are.equal("unary call received no response message", err.message)
      assert.is_nil(err.peer) -- this side's failure, though the server's grpc-status 0 was read
      err = failure(h.unary, h, "/raw.Test/Two", "")
      assert.are.equal("INTERNAL", err.code)
      assert.are.equal("unary call received 2 response messages", err.message)
      assert.is_nil(err.peer)
    end)

    it("fails a message cut short", function()
      local err = failure(h.unary, h, "/raw.Test/Truncated", "")
      assert.are.equal("INTERNAL", err.code)
      assert.are.equal("response ended inside a message (20 bytes left over)", err.message)
    end)

    it("maps RST_STREAM codes", function()
      -- 0: RST_STREAM(NO_ERROR) before the response is complete
      local want = { [7] = "UNAVAILABLE", [8] = "CANCELLED", [11] = "RESOURCE_EXHAUSTED",
                     [12] = "PERMISSION_DENIED", [2] = "INTERNAL", [0] = "INTERNAL" }
      for rst, code in pairs(want) do
        assert.are.equal(code, failure(h.unary, h, "/raw.Test/Rst", tostring(rst)).code, rst)
      end
    end)

    it("blames the server's invalid header field, not a reset of the server's, when this side resets", function()
      local err = failure(h.unary, h, "/raw.Test/BadField", "", { timeout = 5 })
      assert.are.equal("INTERNAL", err.code)
      assert.are.equal("invalid response from the server: Invalid HTTP header field was received "
        .. "(this client reset the stream: RST_STREAM PROTOCOL_ERROR (1))", err.message)
    end)

    it("moves to a new connection after a graceful GOAWAY on an idle one", function()
      local tr = pc.grpc(peer.url)
      assert.are.equal("ok", tr:unary("/raw.Test/GoawayLater", ""))
      os.execute("sleep 0.3")
      assert.are.equal("ok", tr:unary("/raw.Test/Ok", ""))
      assert.are.equal("ok", tr:unary("/raw.Test/Ok", ""))
      tr:close()
    end)

    it("keeps the answer that comes with a GOAWAY, then moves to a new connection", function()
      local tr = pc.grpc(peer.url)
      for _ = 1, 2 do
        assert.are.equal("last", tr:unary("/raw.Test/AnswerThenGoaway", ""))
      end
      tr:close()
    end)

    it("maps GOAWAY before an answer to UNAVAILABLE", function()
      assert.are.equal("UNAVAILABLE", failure(h.unary, h, "/raw.Test/Goaway", "").code)
      -- the next call opens a new connection
      assert.are.equal("unary call received no response message",
                       failure(h.unary, h, "/raw.Test/Zero", "").message)
    end)
  end)

  describe("pushback", function()
    it("turns grpc-retry-pushback-ms into retry_delay in seconds", function()
      local err = failure(h.unary, h, "/raw.Test/Pushback", "250")
      assert.are.equal("UNAVAILABLE", err.code)
      assert.are.equal(0.25, err.retry_delay)
      assert.is_nil(err.no_retry)
    end)

    it("says do not retry for a negative or malformed value", function()
      for _, v in ipairs { "-1", "abc", "" } do
        local err = failure(h.unary, h, "/raw.Test/Pushback", v)
        assert.is_true(err.no_retry, v)
        assert.are.equal(-1, err.retry_delay)
      end
    end)
  end)

  describe("under the call policies (pc.wrap_method)", function()
    local function wrapped(tr, path, counter)
      return pc.wrap_method(function(req, timeout, md, compression)
        counter.n = counter.n + 1
        return tr:unary(path, req, { timeout = timeout, metadata = md, compression = compression })
      end, { retry = pc.Retry { initial = 0.01, maximum = 0.05, timeout = 5 } })
    end

    it("retries UNAVAILABLE until the server succeeds", function()
      local c = { n = 0 }
      assert.are.equal("ok after 2", wrapped(t, "/test.Test/FailThenSucceed", c)("id-p 2 UNAVAILABLE"))
      assert.are.equal(3, c.n)
    end)

    it("does not retry when the server's pushback says so", function()
      local c = { n = 0 }
      local ok, err = pcall(wrapped(h, "/raw.Test/Pushback", c), "-1")
      assert.is_false(ok)
      assert.are.equal(pc.RetryError, getmetatable(err))
      assert.are.equal("UNAVAILABLE", err.cause.code)
      assert.are.equal(1, c.n)
    end)

    it("does not retry a local RESOURCE_EXHAUSTED", function()
      local c = { n = 0 }
      local ok, err = pcall(wrapped(t, "/test.Test/Big", c), "5000000")
      assert.is_false(ok)
      assert.are.equal(pc.Error, getmetatable(err))
      assert.are.equal("RESOURCE_EXHAUSTED", err.code)
      assert.are.equal(1, c.n)
    end)
  end)

  describe("server streaming", function()
    it("iterates the responses", function()
      local got = {}
      for m in t:server_stream("/test.Test/Stream", "3") do got[#got + 1] = m end
      assert.are.same({ "message 1", "message 2", "message 3" }, got)
      for _ in t:server_stream("/test.Test/Stream", "0") do error("no message expected") end
    end)

    it("raises the final status after the messages", function()
      local got = {}
      local err = failure(function()
        for m in t:server_stream("/test.Test/StreamThenFail", "2 ABORTED") do got[#got + 1] = m end
      end)
      assert.are.same({ "message 1", "message 2" }, got)
      assert.are.equal("ABORTED", err.code)
      assert.are.equal("stream failed after 2", err.message)
    end)

    it("bounds a whole stream by its deadline", function()
      local t0 = now()
      local err = failure(function()
        for _ in h:server_stream("/raw.Test/Hang", "", { timeout = 0.3 }) do end
      end)
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.is_true(now() - t0 < 1.3)
    end)

    it("exposes response metadata through the call object", function()
      local iter, _, _, call = t:server_stream("/test.Test/Metadata", "",
                                               { metadata = { { "x-s", "v" } } })
      assert.are.equal("1", iter())
      assert.is_nil(iter())
      assert.is_nil(iter())
      local md = call:metadata()
      assert.are.equal("v", find(md.headers, "x-s"))
      assert.are.equal("v", find(md.trailers, "t-x-s"))
      call:close()
    end)

    it("carries a unary call started before a new stream was read", function()
      local g = pc.grpc(server.url)
      local iter, _, _, call = g:server_stream("/test.Test/Stream", "2")
      assert.are.equal("first", g:unary("/test.Test/Echo", "first", { timeout = 5 }))
      assert.are.equal("message 1", iter())
      assert.are.equal("message 2", iter())
      assert.is_nil(iter())
      call:close()
      g:close()
    end)

    it("cancels a stream left early, and interleaves with unary calls", function()
      for m in t:server_stream("/test.Test/Stream", "1000") do -- luacheck: ignore 512 (breaks early)
        assert.are.equal("message 1", m)
        assert.are.equal("inside", t:unary("/test.Test/Echo", "inside"))
        break
      end
      assert.are.equal("after", t:unary("/test.Test/Echo", "after"))
    end)
  end)

  describe("started calls (start_unary, start_server_stream)", function()
    -- The handle's result once it is there.
    local function settled(handle)
      while handle:result() == nil do t:wait({ handle }, 0.05) end
      return handle:result()
    end

    it("gives the same result again on a later handle:result()", function()
      local u = t:start_unary("/test.Test/Echo", "x", { timeout = 5 })
      assert.are.same({ true, "x" }, { settled(u) })
      assert.are.same({ true, "x" }, { u:result() })
      u:cancel() -- after its end: nothing to cancel, the result stays
      assert.are.same({ true, "x" }, { u:result() })
      local f = t:start_unary("/test.Test/FailWith", "ABORTED no", { timeout = 5 })
      local ok, e = settled(f)
      assert.is_false(ok)
      assert.are.equal("ABORTED", e.code)
      local ok2, e2 = f:result()
      assert.is_false(ok2)
      assert.is_true(rawequal(e, e2))
      local s = t:start_server_stream("/test.Test/Stream", "3", { timeout = 5 })
      local sok, iter, call = settled(s)
      assert.is_true(sok)
      local again = { s:result() }
      assert.is_true(again[1] and rawequal(iter, again[2]) and rawequal(call, again[3]))
      local got = {}
      for m in iter do got[#got + 1] = m end
      assert.are.same({ "message 1", "message 2", "message 3" }, got)
      local c = t:start_unary("/test.Test/Sleep", "5", { timeout = 10 })
      c:cancel()
      local cok, ce = c:result()
      assert.is_false(cok)
      assert.are.equal("CANCELLED", ce.code)
      assert.is_true(rawequal(ce, select(2, c:result())))
    end)

    it("gives with_metadata = \"present\" the metadata only when the answer carries some", function()
      local m = t:start_unary("/test.Test/Metadata", "",
        { metadata = { { "x-text", "v" } }, with_metadata = "present" })
      local ok, n, md = settled(m)
      assert.are.same({ true, "1" }, { ok, n })
      assert.are.equal("v", find(md.headers, "x-text"))
      assert.are.equal("v", find(md.trailers, "t-x-text"))
      m = t:start_unary("/test.Test/Metadata", "", { with_metadata = "present" })
      ok, n, md = settled(m)
      assert.are.same({ true, "0" }, { ok, n })
      assert.is_nil(md) -- content-type, grpc-status ...: gRPC's own
      m = t:start_unary("/test.Test/Metadata", "", { with_metadata = true })
      assert.are.same({ true, "0", { headers = {}, trailers = {} } }, { settled(m) })
    end)
  end)

  describe("a server stream left unread while other calls run", function()
    -- HTTP/2 flow control: the stream holds at most its window, the server
    -- waits, the other calls go on, and every message arrives once the
    -- stream is read. (libcurl could not pause one stream without losing
    -- other streams' trailers, so the libcurl transport failed such a
    -- stream at a hard bound instead.)
    local WINDOW = 256 * 1024
    local sanitized = io.open("/proc/self/maps"):read("a"):find("libasan", 1, true) ~= nil
    local f

    local function rss_kib()
      for l in io.lines("/proc/self/status") do
        local v = l:match("^VmRSS:%s+(%d+)")
        if v then return tonumber(v) end
      end
    end

    -- n unary calls on f, each within its 5 s deadline; 'each' runs after each.
    local function unary_calls(n, each)
      for i = 1, n do
        assert.are.equal("u" .. i, f:unary("/test.Test/Echo", "u" .. i, { timeout = 5 }))
        if each then each() end
      end
    end

    -- Reads every message of 'iter' numbered from 'first' (default 1),
    -- checking order and size; 'each' runs after each. Returns the last number.
    local function read_all(iter, size, each, first)
      local n = (first or 1) - 1
      for m in iter do
        n = n + 1
        local head = "message " .. n .. " "
        assert.are.equal(head, m:sub(1, #head))
        assert.are.equal(size, #m)
        if each then each(n) end
      end
      return n
    end

    before_each(function()
      f = pc.grpc(server.url, { max_receive_size = 65536, stream_window = WINDOW })
    end)
    after_each(function() f:close() end)

    it("holds at most its window, and every message arrives when read", function()
      -- 3,000 x 10 kB = 30 MB.
      local iter, _, _, call = f:server_stream("/test.Test/StreamSized", "3000 10000",
                                               { timeout = 60 })
      assert.are.equal("message 1 ", iter():sub(1, 10))
      local r0, most, rss_most = rss_kib(), 0, 0
      unary_calls(500, function()
        most = math.max(most, call:buffered())
        rss_most = math.max(rss_most, rss_kib())
      end)
      assert.is_true(most > 0 and most <= 4 * WINDOW, "the unread buffer grew to " .. most)
      if not sanitized then -- ASan keeps freed memory in quarantine
        assert.is_true(rss_most - r0 < 32 * 1024, "RSS grew by " .. (rss_most - r0) .. " KiB")
      end
      assert.are.equal(3000, read_all(iter, 10000, nil, 2))
      unary_calls(50)
    end)

    it("never fails a consumer reading alone, however slow", function()
      -- 30 MB; the consumer stops now and then while the server goes on.
      local n = read_all(f:server_stream("/test.Test/StreamSized", "3000 10000"), 10000,
                         function(i) if i % 500 == 0 then os.execute("sleep 0.1") end end)
      assert.are.equal(3000, n)
    end)

    it("never fails a consumer that keeps up while other calls run", function()
      local n = read_all(f:server_stream("/test.Test/StreamSized", "200 10000 10"), 10000,
                         function(i) if i % 5 == 0 then unary_calls(1) end end)
      assert.are.equal(200, n)
    end)

    it("takes the window from stream_window", function()
      local g = pc.grpc(server.url, { max_receive_size = 65536, stream_window = 4 * WINDOW })
      -- Paced (1 ms apart): past the smaller window, never past twice this one.
      local iter, _, _, call = g:server_stream("/test.Test/StreamSized", "5000 10000 1")
      iter()
      local most = 0
      for _ = 1, 3000 do
        assert.are.equal("v", g:unary("/test.Test/Echo", "v", { timeout = 5 }))
        most = math.max(most, call:buffered())
        if most > 2 * WINDOW then break end
      end
      assert.is_true(most > 2 * WINDOW, "the stream was not read past its window: " .. most)
      assert.is_true(most <= 16 * WINDOW, "the unread buffer grew to " .. most)
      call:close()
      g:close()
      assert.has_error(function() pc.grpc(server.url, { stream_window = 0 }) end,
                       "pc.grpc: option 'stream_window' must be an integer in 65535..2^31-1")
    end)

    it("releases a stream closed mid-way, and the connection goes on", function()
      -- Paced (1 ms apart) so that it is still running when closed.
      local iter, _, _, call = f:server_stream("/test.Test/StreamSized", "10000 10000 1")
      iter()
      unary_calls(20)
      assert.is_true(call:buffered() > 0)
      call:close()
      unary_calls(200)
      local n = 0
      for _ in f:server_stream("/test.Test/StreamSized", "50 10000") do n = n + 1 end
      assert.are.equal(50, n)
    end)

    it("releases a stream whose iterator is dropped mid-way", function()
      local iter = f:server_stream("/test.Test/StreamSized", "10000 10000 1")
      iter()
      unary_calls(20)
      iter = nil -- luacheck: ignore
      collectgarbage()
      collectgarbage()
      unary_calls(200)
      assert.are.equal("end", f:unary("/test.Test/Echo", "end", { timeout = 5 }))
    end)
  end)

  describe("streaming calls (transport:stream)", function()
    it("sends a client stream and receives the one response", function()
      local call = t:stream("/test.Test/Collect", { timeout = 5 })
      for _, m in ipairs { "a", "", "c" } do call:send(m) end
      assert.are.equal("a,,c", call:close_and_recv())
      call:close()
    end)

    it("talks both ways, with headers and trailers", function()
      local call = t:stream("/test.Test/Chat", { timeout = 5 })
      call:send("x")
      assert.are.equal("1", find(call:headers(), "x-chat"))
      assert.are.equal("re:x", call:recv())
      call:send("y")
      assert.are.equal("re:y", call:recv())
      call:close_send()
      assert.is_nil(call:recv())
      assert.are.equal("table", type(call:trailers()))
      assert.has_error(function() call:send("z") end, "send: the sending side is closed (close_send)")
      call:close()
    end)

    it("sends from one task while another reads", function()
      local call = t:stream("/test.Test/Chat", { timeout = 10 })
      local got = {}
      pc.spawn(function()
        for i = 1, 200 do call:send(string.rep("m", 1000) .. i) end
        call:close_send()
      end)
      pc.spawn(function()
        for m in function() return call:recv() end do got[#got + 1] = m end
      end)
      pc.run()
      assert.are.equal(200, #got)
      assert.are.equal("re:" .. string.rep("m", 1000) .. "200", got[200])
      call:close()
    end)

    it("raises the server's status from recv", function()
      local call = t:stream("/test.Test/Chat", { timeout = 5 })
      call:send("fail")
      local err = failure(call.recv, call)
      assert.are.equal("ABORTED", err.code)
      assert.are.equal("asked to fail", err.message)
      assert.are.equal("/test.Test/Chat", err.method)
      call:close()
    end)

    it("cancels with RST_STREAM CANCEL", function()
      local function resets()
        local n = 0
        for _ in h:unary("/raw.Test/Resets", ""):gmatch("%d+") do n = n + 1 end
        return n
      end
      local before = resets()
      local call = h:stream("/raw.Test/Hang", { timeout = 5 })
      call:close_send()
      assert.are.same({}, call:headers())
      call:cancel()
      local err = failure(call.recv, call)
      assert.are.equal("CANCELLED", err.code)
      assert.are.equal(before + 1, resets())
      assert.matches(",8$", h:unary("/raw.Test/Resets", ""))
      call:close()
    end)

    it("holds a sender whose peer stops reading, until the deadline", function()
      -- t0 before the call starts: its deadline counts from there (a
      -- start slowed by a loaded machine is inside the 0.5 s)
      local t0 = now()
      local call = h:stream("/raw.Test/NoRead", { timeout = 0.5 })
      local chunk, sent = string.rep("s", 10000), 0
      local err = failure(function()
        for _ = 1, 1000 do
          call:send(chunk)
          sent = sent + 1
        end
      end)
      local elapsed = now() - t0
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      assert.is_true(elapsed >= 0.45 and elapsed < 0.5 + 1.5, "took " .. elapsed .. " s")
      -- the peer's window (64 KiB) and the send queue (64 KiB), not 10 MB
      assert.is_true(sent < 20, sent .. " messages sent")
      call:close()
    end)
  end)

  describe("HTTP/2 faults", function()
    -- A refused stream (RST_STREAM REFUSED_STREAM) and a GOAWAY that took
    -- no stream are retried transparently: the retry carries the request's
    -- exact bytes and metadata, whether the first message was kept in the
    -- call's arena (up to 1 KiB) or in a buffer of its own, and a call after
    -- it (a reused arena) sends nothing of a call before.
    it("retries a refused call with its exact request and metadata, small and large", function()
      local tr = pc.grpc(peer.url)
      for round = 1, 2 do
        for _, size in ipairs { 1, 1000, 1019, 1020, 1021, 1500, 9000 } do
          for _, method in ipairs { "RefuseEcho", "GoawayEcho" } do
            local head = method .. "-" .. round .. "-" .. size .. "-"
            local body = head .. string.rep(string.char(65 + (size + round) % 26), math.max(size - #head, 0))
            local n = size % 2 == 0 and 12 or 2 -- more pairs than the C stack's 8, and fewer
            local md = {}
            for i = 1, n do md[i] = { "x-k" .. i, round .. string.rep("v", i * 20) } end
            local got, meta = tr:unary("/raw.Test/" .. method, body,
              { metadata = md, with_metadata = true, timeout = 10 })
            assert.are.equal(body, got)
            local echoed = {}
            for _, p in ipairs(meta.trailers) do echoed[#echoed + 1] = p[1] .. "=" .. p[2] end
            local want = {}
            for i = 1, n do want[i] = "x-echo-k" .. i .. "=" .. md[i][2] end
            table.sort(echoed)
            table.sort(want)
            assert.are.same(want, echoed)
          end
        end
      end
      tr:close()
    end)

    it("completes a call in flight across a graceful GOAWAY", function()
      local tr = pc.grpc(peer.url)
      assert.are.equal("finished", tr:unary("/raw.Test/GoawayFirst", "", { timeout = 5 }))
      assert.are.equal("ok", tr:unary("/raw.Test/Ok", "", { timeout = 5 }))
      tr:close()
    end)

    it("fails a header list over the limit with RESOURCE_EXHAUSTED, the connection lives", function()
      local tr = pc.grpc(peer.url, { max_header_list_size = 16384 })
      local hang = tr:stream("/raw.Test/Hang", { timeout = 10 })
      hang:close_send()
      hang:headers()
      local err = failure(tr.unary, tr, "/raw.Test/BigHeader", "", { timeout = 5 })
      assert.are.equal("RESOURCE_EXHAUSTED", err.code)
      assert.are.equal("response header list of more than 16384 bytes exceeds the limit of "
                       .. "16384 bytes", err.message)
      assert.is_true(err["local"])
      assert.are.equal("ok", tr:unary("/raw.Test/Ok", "", { timeout = 5 }))
      assert.is_nil(hang.call:status()) -- still running on the same connection
      hang:close()
      tr:close()
    end)

    it("refuses an 8 MB response header at once, not at the deadline", function()
      local tr = pc.grpc(peer.url)
      local t0 = now()
      local err = failure(tr.unary, tr, "/raw.Test/HugeHeader", "", { timeout = 10 })
      assert.is_true(now() - t0 < 3, "took " .. (now() - t0) .. " s")
      assert.truthy(err.code == "RESOURCE_EXHAUSTED" or err.code == "UNAVAILABLE", err.code)
      assert.are.equal("ok", tr:unary("/raw.Test/Ok", "", { timeout = 5 }))
      tr:close()
    end)

    it("fails TLS to an h2c port and h2c to a TLS port clearly, in time", function()
      local tr = pc.grpc("https://127.0.0.1:" .. server.port)
      local t0 = now()
      -- a clear UNAVAILABLE well before the deadline, not DEADLINE_EXCEEDED (the
      -- slack is for valgrind, under which the handshake alone takes seconds)
      local err = failure(tr.unary, tr, "/test.Test/Echo", "x", { timeout = 30 })
      assert.is_true(now() - t0 < 20, "took " .. (now() - t0) .. " s")
      assert.are.equal("UNAVAILABLE", err.code)
      assert.matches("^TLS handshake with 127%.0%.0%.1:%d+: ", err.message)
      tr:close()
    end)
  end)

  describe("the scheduler (pc.spawn / pc.run)", function()
    it("interleaves two 0.5 s calls from two tasks on one connection", function()
      local g = pc.grpc(server.url)
      local peers, t0 = {}, now()
      for i = 1, 2 do
        pc.spawn(function()
          assert.are.equal("slept", g:unary("/test.Test/Sleep", "0.5", { timeout = 5 }))
          peers[i] = g:unary("/test.Test/Peer", "")
        end)
      end
      pc.run()
      -- about 0.5 s (one after the other would be 1 s); generous slack for
      -- a loaded machine
      local elapsed = now() - t0
      assert.is_true(elapsed < 0.95, "took " .. elapsed .. " s")
      assert.are.equal(peers[1], peers[2])
      g:close()
    end)

    it("runs a hundred concurrent calls on one connection", function()
      local g = pc.grpc(server.url)
      local first = g:unary("/test.Test/Peer", "")
      local same = 0
      for i = 1, 100 do
        pc.spawn(function(n)
          assert.are.equal("e" .. n, g:unary("/test.Test/Echo", "e" .. n, { timeout = 10 }))
          if g:unary("/test.Test/Peer", "") == first then same = same + 1 end
        end, i)
      end
      pc.run()
      assert.are.equal(100, same)
      g:close()
    end)

    it("reads 100 server streams of 100 tasks round-robin, each to its real status", function()
      -- (over libcurl, 0-43 of 100 such streams ended "no grpc-status")
      local g = pc.grpc(server.url, { stream_window = 65535 })
      local counts, ends = {}, 0
      for i = 1, 100 do
        pc.spawn(function()
          local n = 0
          for m in g:server_stream("/test.Test/StreamSized", "20 20000", { timeout = 60 }) do
            assert.are.equal(20000, #m)
            n = n + 1
          end
          counts[i] = n
          ends = ends + 1
        end)
      end
      pc.run()
      assert.are.equal(100, ends)
      for i = 1, 100 do assert.are.equal(20, counts[i]) end
      g:close()
    end)

    it("lets other tasks run while a task sleeps, a retry's backoff too", function()
      local attempts = 0
      local retried = pc.wrap_method(function()
        attempts = attempts + 1
        if attempts == 1 then error(pc.Error { code = "UNAVAILABLE", message = "once" }) end
        return "ok"
      end, { retry = pc.Retry { initial = 0.3, maximum = 0.3, timeout = 5 },
             random = function() return 1 end })
      local t0, done = now(), {}
      pc.spawn(function() done[1] = retried() end)
      pc.spawn(function() pc.sleep(0.3); done[2] = "slept" end)
      pc.spawn(function() done[3] = t:unary("/test.Test/Sleep", "0.3", { timeout = 5 }) end)
      pc.run()
      local elapsed = now() - t0
      assert.are.same({ "ok", "slept", "slept" }, done)
      assert.are.equal(2, attempts)
      -- together about 0.3 s, one after the other at least 0.9 s
      assert.is_true(elapsed < 0.85, "took " .. elapsed .. " s")
    end)

    it("raises a task's error from pc.run, and a call outside it still works", function()
      pc.spawn(function() error("task failed") end)
      assert.has_error(function() pc.run() end, "task failed")
      assert.are.equal("outside", t:unary("/test.Test/Echo", "outside"))
      assert.has_error(function() pc.spawn(5) end,
                       "bad argument #1 to 'spawn' (function expected, got number)")
    end)
  end)

  describe("options", function()
    it("refuses bad targets and options", function()
      assert.has_error(function() pc.grpc("ftp://x") end,
                       "pc.grpc: target 'ftp://x': expected http://host:port, https://host:port, "
                       .. "dns:///host:port or host:port")
      assert.has_error(function() pc.grpc("http://h:1", { bogus = 1 }) end,
                       "pc.grpc: unknown option 'bogus'")
      assert.has_error(function() pc.grpc("https://h:1", { cert_file = "spec/grpc_spec.lua" }) end, -- a readable file
                       "pc.grpc: cert_file and key_file go together")
      assert.has_error(function() pc.grpc("https://h:1", { key_file = "spec/grpc_spec.lua" }) end,
                       "pc.grpc: cert_file and key_file go together")
      -- TLS options with no TLS backend would be ignored: the calls would go in the clear
      for _, plain in ipairs { "h:1", "http://h:1", "dns:///h:1", "ipv4:127.0.0.1:1,127.0.0.2:1", "unix:/x.sock" } do
        for _, o in ipairs { { ca_file = "spec/grpc_spec.lua" }, { insecure = true },
                             { cert_file = "spec/grpc_spec.lua", key_file = "spec/grpc_spec.lua" } } do
          local key = next(o) == "key_file" and "cert_file" or next(o)
          assert.has_error(function() pc.grpc(plain, o) end, "pc.grpc: option '" .. key .. "' is for TLS, and target '"
            .. plain .. "' has no TLS backend (h2c): give https://host:port")
        end
      end
      assert.is_not_nil(pc.grpc("http://h:1", { server_name = "api.test" })) -- :authority, TLS or not
      assert.has_error(function() pc.grpc("http://h:1", { max_receive_size = -1 }) end,
                       "pc.grpc: option 'max_receive_size' must be an integer in 1..2^31-1")
      assert.has_error(function() pc.grpc("http://h:1", { max_receive_size = 2 ^ 63 }) end,
                       "pc.grpc: option 'max_receive_size' must be an integer in 1..2^31-1")
      -- C would cut the target at the NUL and connect to another host
      assert.has_error(function() pc.grpc("http://127.0.0.1\0.evil:47102") end,
                       "pc.grpc: target 'http://127.0.0.1?.evil:47102': control characters and spaces are not allowed")
      assert.has_error(function() pc.grpc("http://127.0.0.1:99999") end,
                       "pc.grpc: target 'http://127.0.0.1:99999': port must be in 1..65535")
      assert.has_error(function() pc.grpc("http://:1") end, "pc.grpc: target 'http://:1': no host")
      assert.has_error(function() pc.grpc("http://h:1/pkg.S/M") end, "pc.grpc: target 'http://h:1/pkg.S/M': "
        .. "a path ('/pkg.S/M') is not allowed: a target is host:port (the method is the path)")
      assert.has_error(function() pc.grpc("h:1/x") end,
        "pc.grpc: target 'h:1/x': a path ('/x') is not allowed: a target is host:port (the method is the path)")
      assert.has_error(function() pc.grpc("http://h") end,
                       "pc.grpc: target 'http://h': h2c needs a port (http://host:port)")
      assert.has_error(function() pc.grpc("http://h:1", 5) end,
                       "bad argument #2 to 'grpc' (table expected, got number)")
      assert.has_error(function() pc.grpc("http://h:1", { user_agent = "a\r\nx: y" }) end,
                       "pc.grpc: option 'user_agent' must not hold control characters")
      assert.has_error(function() pc.grpc("http://h:1", { connect_timeout = 0 }) end,
                       "pc.grpc: option 'connect_timeout': positive number of seconds expected, got 0")
      assert.has_error(function() pc.grpc("http://h:1", { insecure = "yes" }) end,
                       "pc.grpc: option 'insecure' must be a boolean, got string")
      local md = {}
      for i = 1, 1001 do md[i] = { "k" .. i, "v" } end
      assert.has_error(function() pc.grpc("http://h:1", { metadata = md }) end,
                       "pc.grpc: metadata: 1001 pairs, at most 1000")
      assert.has_error(function() t:unary("no-slash", "") end,
                       "bad argument #1 to 'unary' (method path 'no-slash': expected /package.Service/Method)")
      assert.has_error(function() t:unary("/a.B/C", {}) end,
                       "bad argument #2 to 'unary' (string expected, got table)")
      assert.has_error(function() t:server_stream("/a.B/C", "", 5) end,
                       "bad argument #3 to 'server_stream' (table expected, got number)")
    end)

    it("refuses calls on a closed transport at the caller's line, a stub's too", function()
      local tr = pc.grpc(server.url)
      tr:close()
      tr:close()
      local line = debug.getinfo(1, "l").currentline
      raises_at(line + 1, function() tr:unary("/test.Test/Echo", "") end,
        "calling 'unary' on bad self (transport is closed)")
      raises_at(line + 3, function() tr:start_unary("/test.Test/Echo", "") end,
        "calling 'start_unary' on bad self (transport is closed)")
      raises_at(line + 5, function() tr:stream("/test.Test/Echo") end,
        "calling 'stream' on bad self (transport is closed)")
      local pool = pc.pool()
      assert(pool:load('syntax = "proto3"; package test; message M { string text = 1; }'
        .. " service Test { rpc Echo(M) returns (M); rpc Chat(stream M) returns (stream M); }",
        { name = "closed.proto" }))
      local stub = pc.client("test.Test", { transport = tr, pool = pool })
      line = debug.getinfo(1, "l").currentline
      raises_at(line + 1, function() stub:Echo { text = "x" } end,
        "calling 'Echo' on bad self (transport is closed)")
      raises_at(line + 3, function() stub:Chat() end, "calling 'Chat' on bad self (transport is closed)")
    end)

    it("lets calls in flight at transport:close() go on to their end, or their deadline", function()
      -- pc.step rounds for at most 5 s: a call no longer driven fails the
      -- spec instead of hanging it
      local tr, raw = pc.grpc(server.url), pc.grpc(peer.url)
      local got, t0 = {}, now()
      local chat = tr:stream("/test.Test/Chat", { timeout = 5 })
      chat:send("a")
      local iter = tr:server_stream("/test.Test/Stream", "3", { timeout = 5 })
      got.first = iter()
      local slow = tr:start_unary("/test.Test/Sleep", "0.3", { timeout = 5 })
      local hang = raw:start_unary("/raw.Test/Hang", "", { timeout = 0.5 })
      local hung = raw:stream("/raw.Test/Hang", { timeout = 0.5 })
      tr:close()
      raw:close()
      chat:close_send()
      pc.spawn(function() got.chat = { chat:recv(), chat:recv() } end)
      pc.spawn(function()
        got.rest = {}
        for m in iter do got.rest[#got.rest + 1] = m end
      end)
      pc.spawn(function()
        while not (got.slow and got.hang) do
          tr:wait({ slow, hang }, 0.1)
          local r, q = not got.slow and { slow:result() }, not got.hang and { hang:result() }
          if r and r[1] ~= nil then got.slow = r end
          if q and q[1] ~= nil then got.hang = q end
        end
      end)
      pc.spawn(function() got.hung = { pcall(hung.recv, hung) } end)
      local left = 1
      while left > 0 and now() - t0 < 5 do left = pc.step(0.05) end
      assert.are.equal(0, left)
      assert.are.same({ "re:a" }, got.chat)
      assert.are.equal("message 1", got.first)
      assert.are.same({ "message 2", "message 3" }, got.rest)
      assert.are.same({ true, "slept" }, got.slow)
      assert.is_false(got.hang[1])
      assert.are.equal("DEADLINE_EXCEEDED", got.hang[2].code)
      assert.is_false(got.hung[1])
      assert.are.equal("DEADLINE_EXCEEDED", got.hung[2].code)
      assert.is_true(now() - t0 < 2)
      assert.has_error(function() tr:unary("/test.Test/Echo", "") end,
        "calling 'unary' on bad self (transport is closed)")
    end)

    it("raises a bad method path at the caller's line", function()
      local line = debug.getinfo(1, "l").currentline
      raises_at(line + 1, function() t:unary("nope", "") end,
        "bad argument #1 to 'unary' (method path 'nope': expected /package.Service/Method)")
      raises_at(line + 3, function() t:server_stream("/a.B/C D", "") end,
        "bad argument #1 to 'server_stream' (method path '/a.B/C D': unexpected character)")
    end)

    it("raises misuse of start_unary and start_server_stream at the caller's line", function()
      local line = debug.getinfo(1, "l").currentline
      raises_at(line + 1, function() t:start_unary("/a.B/C", 5) end,
        "bad argument #2 to 'start_unary' (string expected, got number)")
      raises_at(line + 3, function() t:start_server_stream("/a.B/C", "", 5) end,
        "bad argument #3 to 'start_server_stream' (table expected, got number)")
    end)

    it("names the settings of stream argument #2", function()
      local line = debug.getinfo(1, "l").currentline
      raises_at(line + 1, function() t:stream("/t.S/B", "x") end,
        "bad argument #2 to 'stream' (table expected, got string)")
    end)

    it("checks a call's settings as the client checks its options", function()
      local line = debug.getinfo(1, "l").currentline
      raises_at(line + 1, function() t:unary("/a.B/C", "", { timeout = 0 / 0 }) end,
        "bad argument #3 to 'unary' (timeout: finite number of seconds expected, got nan)")
      raises_at(line + 3, function() t:unary("/a.B/C", "", { timeout = math.huge }) end,
        "bad argument #3 to 'unary' (timeout: finite number of seconds expected, got inf)")
      raises_at(line + 5, function() t:unary("/a.B/C", "", { timeout = -math.huge }) end,
        "bad argument #3 to 'unary' (timeout: finite number of seconds expected, got -inf)")
      raises_at(line + 7, function() t:start_server_stream("/a.B/C", "", { timeout = "x" }) end,
        "bad argument #3 to 'start_server_stream' (timeout: number of seconds or nil expected, got string)")
      raises_at(line + 9, function() t:unary("/a.B/C", "", { with_metadata = "yes" }) end,
        [[bad argument #3 to 'unary' (with_metadata: true, false or "present" expected, got string "yes")]])
      raises_at(line + 11, function() t:stream("/a.B/C", { timout = 1 }) end,
        "bad argument #2 to 'stream' (unknown setting 'timout')")
      raises_at(line + 13, function() t:unary("/a.B/C", "", { compression = "br" }) end,
        [[bad argument #3 to 'unary' (compression 'br': expected "gzip" or "identity")]])
    end)

    it("raises misuse of transport:wait and pc.sleep at the caller's line", function()
      local line = debug.getinfo(1, "l").currentline
      raises_at(line + 1, function() t:wait("x", 1) end, "bad argument #1 to 'wait' (table expected, got string)")
      raises_at(line + 2, function() t:wait(nil, 1) end, "bad argument #1 to 'wait' (table expected, got nil)")
      raises_at(line + 3, function() t:wait({ 1 }, 0.1) end,
        "bad argument #1 to 'wait' (handles[1]: a started call expected, got number)")
      raises_at(line + 5, function() t:wait({}, "x") end, "bad argument #2 to 'wait' (number expected, got string)")
      raises_at(line + 6, function() t:wait({}, 0 / 0) end, "bad argument #2 to 'wait' (number expected, got nan)")
      raises_at(line + 7, function() pc.sleep("x") end, "bad argument #1 to 'sleep' (number expected, got string)")
    end)

    it("takes compression = false as none and a timeout <= 0 as one already passed", function()
      local gz = pc.grpc(server.url, { compression = "gzip" })
      assert.are.equal("plain", gz:unary("/test.Test/Echo", "plain", { compression = false }))
      local e = failure(function() gz:unary("/test.Test/Echo", "x", { timeout = 0 }) end)
      assert.are.equal("DEADLINE_EXCEEDED", e.code)
      gz:close()
    end)
  end)

  describe("TLS", function()
    local dir, tls

    setup(function()
      dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir " .. dir))
      assert(os.execute("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
                        .. " -addext subjectAltName=DNS:localhost,IP:127.0.0.1"
                        .. " -keyout " .. dir .. "/key.pem -out " .. dir .. "/cert.pem 2>/dev/null"))
      tls = spawn("tls", 0, dir .. "/cert.pem", dir .. "/key.pem")
    end)

    teardown(function()
      stop(tls)
      os.execute("rm -rf " .. dir)
    end)

    it("calls over TLS with a CA file", function()
      local tr = pc.grpc("https://127.0.0.1:" .. tls.port, { ca_file = dir .. "/cert.pem" })
      assert.are.equal("secure", tr:unary("/test.Test/Echo", "secure"))
      assert.are.equal("again", tr:unary("/test.Test/Echo", "again"))
      tr:close()
    end)

    it("fails h2c to a TLS port clearly, in time", function()
      local tr = pc.grpc("http://127.0.0.1:" .. tls.port)
      local t0 = now()
      local err = failure(tr.unary, tr, "/test.Test/Echo", "x", { timeout = 5 })
      assert.is_true(now() - t0 < 2, "took " .. (now() - t0) .. " s")
      assert.are.equal("UNAVAILABLE", err.code)
      tr:close()
    end)

    it("takes server_name as the name to verify", function()
      local tr = pc.grpc("https://127.0.0.1:" .. tls.port,
                         { ca_file = dir .. "/cert.pem", server_name = "localhost" })
      assert.are.equal("named", tr:unary("/test.Test/Echo", "named"))
      tr:close()
      tr = pc.grpc("https://127.0.0.1:" .. tls.port,
                   { ca_file = dir .. "/cert.pem", server_name = "other.example" })
      local err = failure(tr.unary, tr, "/test.Test/Echo", "x", { timeout = 5 })
      assert.are.equal("UNAVAILABLE", err.code)
      assert.matches("certificate verify failed", err.message, 1, true)
      tr:close()
    end)

    it("verifies the server: an unknown certificate is UNAVAILABLE", function()
      local tr = pc.grpc("https://127.0.0.1:" .. tls.port)
      -- The refusal comes with the handshake, at once; the deadline only
      -- bounds a hang. Under valgrind the handshake alone takes seconds.
      local err = failure(tr.unary, tr, "/test.Test/Echo", "x", { timeout = 60 })
      assert.are.equal("UNAVAILABLE", err.code)
      tr:close()
    end)
  end)
end)
