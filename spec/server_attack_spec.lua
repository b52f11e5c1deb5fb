-- pc.listen against bad and hostile clients: a raw HTTP/2 client written
-- with python3-h2 (spec/h2_client.py, Debian's /usr/bin/python3) sends each
-- kind of bad input; each gets its answer, and the server keeps serving a
-- protocall client on another connection.
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
  rpc Echo(stream Point) returns (stream Point);
  rpc Fail(Point) returns (Sum);
}
]], { name = "srv/calc.proto" }))

local server = pc.server({ ["srv.Calc"] = {
  Add = function(p) return { total = p.x + p.y } end,
  Count = function(p, ctx)
    for i = 1, p.x do
      if ctx:cancelled() then return end
      ctx.send { x = i, note = string.rep("n", 1000) }
    end
  end,
  Echo = function(ctx)
    for p in ctx.recv do ctx.send(p) end
  end,
  -- copies request text into its error, as handlers do
  Fail = function(p) error(pc.Error { code = "INVALID_ARGUMENT", message = "bad note: " .. p.note }) end,
} }, { pool = pool })

-- Runs spec/h2_client.py MODE against a listener (as a task, so the
-- server goes on serving meanwhile), then a protocall call on a new
-- connection; returns what the client printed.
-- The first line the client writes to the file at `out`, waiting for it
-- (pc.sleep, so the server runs meanwhile) up to `tries` x 10 ms; or nil.
local function first_line(out, tries)
  for _ = 1, tries do
    local f = io.open(out)
    local line = f and f:read("*l")
    if f then f:close() end
    if line then return line end
    pc.sleep(0.01)
  end
end

local function attack(mode, opts)
  local l = pc.listen(server, "127.0.0.1:0", opts)
  local out = os.tmpname()
  local answer, sum
  pc.spawn(function() l:serve() end)
  pc.spawn(function()
    os.execute("/usr/bin/python3 spec/h2_client.py " .. mode .. " " .. l.port .. " > " .. out
      .. " 2>&1 &")
    answer = first_line(out, 3000)
    if opts and opts.max_connections == 1 then
      -- the attacker's first connection may outlive its answer line: the
      -- one connection allowed must be free before the check call
      for _ = 1, 500 do
        if l:connections() == 0 then break end
        pc.sleep(0.01)
      end
    end
    local stub = pc.client("srv.Calc", { transport = pc.grpc("http://127.0.0.1:" .. l.port), pool = pool })
    sum = stub:Add({ x = 20, y = 22 }).total
    if opts and opts.idle_timeout then
      for _ = 1, 500 do
        if l:connections() == 0 then break end
        pc.sleep(0.01)
      end
      answer = answer .. ", then " .. l:connections() .. " connections"
    end
    l:shutdown(1)
  end)
  pc.run()
  os.remove(out)
  assert.equals(42, sum) -- the server still serves
  return answer
end

describe("pc.listen under bad input", function()
  it("closes a connection that sends garbage", function()
    assert.equals("closed", attack("garbage"))
  end)

  it("answers a preface with its SETTINGS", function()
    assert.equals("settings", attack("preface"))
  end)

  it("resets a stream whose HEADERS have no :path (PROTOCOL_ERROR)", function()
    assert.equals("rst 1", attack("nopath"))
  end)

  it("answers an unknown method UNIMPLEMENTED", function()
    assert.equals("status 12", attack("unknown"))
  end)

  it("answers a content-type that is not gRPC with HTTP 415", function()
    assert.equals("http 415", attack("ctype"))
  end)

  it("answers a message over the limit RESOURCE_EXHAUSTED before its body", function()
    assert.equals("status 8", attack("big"))
  end)

  it("answers a truncated message INTERNAL", function()
    assert.equals("status 13", attack("truncated"))
  end)

  it("answers an unknown grpc-encoding UNIMPLEMENTED", function()
    assert.equals("status 12", attack("encoding"))
  end)

  it("refuses a malformed grpc-timeout INTERNAL instead of running without a deadline", function()
    local grammar = "' is malformed (1 to 8 digits, then H, M, S, m, u or n)"
    assert.equals("status 13 grpc-timeout '1x" .. grammar, attack("timeout:1x"))
    assert.equals("status 13 grpc-timeout '123456789S" .. grammar, attack("timeout:123456789S"))
    assert.equals("status 0 ", attack("timeout:99999999S"))
  end)

  -- gRPC's status code table (doc/statuscodes.md): a request cardinality
  -- violation is UNIMPLEMENTED.
  it("answers a unary call with two request messages UNIMPLEMENTED", function()
    assert.equals("status 12 srv.Calc.Add: a unary method takes exactly one request message, got more",
      attack("msgs:2:/srv.Calc/Add"))
    assert.equals("status 0 ", attack("msgs:1:/srv.Calc/Add"))
  end)

  it("answers a server-streaming call with two request messages UNIMPLEMENTED", function()
    assert.equals("status 12 srv.Calc.Count: a server-streaming method takes exactly one request message, "
      .. "got more", attack("msgs:2:/srv.Calc/Count"))
  end)

  it("answers a unary or server-streaming call with no request message UNIMPLEMENTED", function()
    assert.equals("status 12 srv.Calc.Add: a unary method takes exactly one request message, got none",
      attack("msgs:0:/srv.Calc/Add"))
    assert.equals("status 12 srv.Calc.Count: a server-streaming method takes exactly one request message, "
      .. "got none", attack("msgs:0:/srv.Calc/Count"))
  end)

  -- nghttp2 sends no header block over 64 KiB, a client may take less
  -- (SETTINGS_MAX_HEADER_LIST_SIZE): a status that does not fit becomes
  -- RESOURCE_EXHAUSTED with a short message (as grpc-core does), never a
  -- stream that does not end.
  it("answers an error too large for its trailers RESOURCE_EXHAUSTED", function()
    assert.equals("status 3 bad note: " .. ("n"):rep(100), attack("note:100:/srv.Calc/Fail"))
    assert.matches("^status 8 response trailers of %d+ bytes exceed the limit of 65536 bytes$",
      attack("note:70000:/srv.Calc/Fail"))
    local l = pc.listen(server, "127.0.0.1:0")
    local err
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      local stub = pc.client("srv.Calc", { pool = pool,
        transport = pc.grpc("http://127.0.0.1:" .. l.port, { max_header_list_size = 16384 }) })
      local ok
      ok, err = pcall(stub.Fail, stub, { note = ("n"):rep(20000) }, { timeout = 10 })
      assert.is_false(ok)
      l:shutdown(1)
    end)
    pc.run()
    assert.equals("RESOURCE_EXHAUSTED", err.code)
    assert.matches("^response trailers of %d+ bytes exceed the limit of 16384 bytes$", err.message)
  end)

  it("answers a request that does not decode INTERNAL", function()
    assert.equals("status 13", attack("undecodable"))
  end)

  -- A compressed message that fails to decompress ends its call with the
  -- status in trailers (the call's end came from the engine, not a reset).
  local exceeds = "decompressed request message exceeds the limit of "
  it("answers a gzip bomb over the limit RESOURCE_EXHAUSTED", function()
    assert.equals("status 8 " .. exceeds .. "4194304 bytes", attack("gzip:bomb"))
  end)

  it("answers a gzip bomb of 1 GiB RESOURCE_EXHAUSTED", function()
    assert.equals("status 8 " .. exceeds .. "4194304 bytes", attack("gzip:bigbomb"))
  end)

  it("answers a message inflating one byte past max_receive_size RESOURCE_EXHAUSTED", function()
    assert.equals("status 8 " .. exceeds .. "100 bytes",
      attack("gzip:fits101", { max_receive_size = 100 }))
  end)

  for _, kind in ipairs { "corrupt", "truncated", "trailing", "two", "crc", "zlib", "raw", "empty" } do
    it("answers a request message that is not valid gzip (" .. kind .. ") INTERNAL", function()
      assert.equals("status 13 request message is not valid gzip", attack("gzip:" .. kind))
    end)
  end

  it("answers a gzip bomb on a bidi stream after one reply RESOURCE_EXHAUSTED", function()
    assert.equals("reply then status 8 " .. exceeds .. "4194304 bytes", attack("gzbidi"))
  end)

  it("ends a flood of RST_STREAM after HEADERS with GOAWAY ENHANCE_YOUR_CALM", function()
    assert.equals("goaway 11", attack("rstflood"))
  end)

  it("ends a PING flood with GOAWAY ENHANCE_YOUR_CALM", function()
    assert.equals("goaway 11", attack("pingflood"))
  end)

  it("ends a SETTINGS flood with GOAWAY ENHANCE_YOUR_CALM", function()
    assert.equals("goaway 11", attack("settingsflood"))
  end)

  it("closes a connection that sends nothing within the handshake timeout", function()
    assert.equals("closed", attack("silent", { handshake_timeout = 0.3 }))
  end)

  it("closes a TLS connection that never starts its handshake within the handshake timeout", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    assert(os.execute("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
      .. " -keyout " .. dir .. "/key.pem -out " .. dir .. "/cert.pem 2>/dev/null"))
    local l = pc.listen(server, "127.0.0.1:0", { cert_file = dir .. "/cert.pem",
      key_file = dir .. "/key.pem", handshake_timeout = 0.3 })
    local out = os.tmpname()
    local answer
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      os.execute("/usr/bin/python3 spec/h2_client.py silent " .. l.port .. " > " .. out .. " 2>&1 &")
      answer = first_line(out, 1000)
      l:shutdown(1)
    end)
    pc.run()
    os.remove(out)
    os.execute("rm -rf " .. dir)
    assert.equals("closed", answer)
  end)

  it("closes connections past max_connections at once", function()
    assert.equals("second closed", attack("twoconns", { max_connections = 1 }))
  end)

  -- An ended connection lingers until its peer closes (at most 2 s), so
  -- the peer reads the GOAWAY; lingering sockets count against
  -- max_connections too, or a server at its limit would hold twice the
  -- sockets (past a ulimit -n of 1024 with the default 1000).
  it("holds at most max_connections sockets, lingering ones included", function()
    local l = pc.listen(server, "127.0.0.1:0", { max_connections = 4 })
    local f = assert(io.open("/proc/self/stat"))
    local pid = f:read("*l"):match("^(%d+)")
    f:close()
    local function sockets()
      local p = io.popen("ls -l /proc/" .. pid .. "/fd 2>/dev/null | grep -c socket:")
      local n = tonumber(p:read("*a"))
      p:close()
      return n
    end
    local out, fifo = os.tmpname(), os.tmpname()
    os.remove(fifo)
    assert(os.execute("mkfifo " .. fifo))
    local before, during, answer = sockets(), nil, nil
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      os.execute("/usr/bin/python3 spec/h2_client.py lingerfill:4 " .. l.port .. " < " .. fifo .. " > " .. out
        .. " 2>&1 &")
      local hold = io.open(fifo, "w") -- the client holds its sockets until this closes
      answer = first_line(out, 1000)
      during = sockets()
      hold:close()
      l:shutdown(1)
    end)
    pc.run()
    os.remove(out)
    os.remove(fifo)
    assert.are.equal("answered 4, ended 4", answer)
    assert.is_true(during <= before + 4, ("%d sockets before, %d with 4 allowed"):format(before, during))
  end)

  it("sends GOAWAY to a connection idle for idle_timeout and closes it", function()
    assert.equals("settings, then 0 connections", attack("preface", { idle_timeout = 0.3, max_connections = 5 }))
  end)

  -- Messages still arriving hold at most the connection's incomplete_budget
  -- (here the connection window: room for one) and a stream window each
  -- (the waiting ones stall on it), not every stream's message; each that
  -- then stalls for stall_timeout ends RESOURCE_EXHAUSTED and makes room
  -- for the next.
  it("bounds the bytes of requests still arriving and ends stalled ones RESOURCE_EXHAUSTED", function()
    local window, len = 6 * 65535, 200000
    local answer = attack("partial:6:" .. len .. ":20", { max_receive_size = len, stream_window = 65535,
      connection_window = window, stall_timeout = 0.3 })
    local peak, rest = answer:match("^peak (%d+), (.*)$")
    assert.is_true(tonumber(peak) <= window + 6 * 65535, answer)
    assert.equals("6 answered: " .. ("status 8, "):rep(5) .. "status 8", rest)
  end)

  -- A whole body (Connect unary) counts the bytes of the body that came,
  -- not the engine's placeholder prefix.
  it("ends a Connect unary body that stops RESOURCE_EXHAUSTED, counting its bytes", function()
    local answer = attack("stallbody:application/json", { stall_timeout = 0.3 })
    assert.equals('http 429 {"code":"resource_exhausted","message":"request message stalled: 1 byte of the body'
      .. ' arrived, then nothing for 0.3 s"}', answer)
  end)

  it("holds a client that never reads a server stream to its flow-control window", function()
    local held = tonumber(attack("noread", { stream_window = 65535 }):match("^held (%d+)$"))
    -- The client's windows are h2's defaults (65,535 bytes): the server sent
    -- no more than that, however long the stream.
    assert.is_true(held > 0 and held <= 65535 + 16384)
  end)
end)
