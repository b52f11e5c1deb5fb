-- pc.listen over HTTP/1.1 against a raw client (spec/http1_client.py,
-- Debian's /usr/bin/python3, plain sockets): Connect and gRPC-Web requests
-- whole, split byte by byte, pipelined, chunked, with Expect:
-- 100-continue, over HTTP/1.0; and hostile ones (request smuggling cases,
-- huge chunk sizes, too many fields, a head that never ends, a pipelining
-- flood), each answered with its status and the connection closed, never
-- a hang; the server keeps serving a protocall client over HTTP/2 after
-- each.
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
}
]], { name = "srv/calc.proto" }))

local server = pc.server({ ["srv.Calc"] = {
  Add = function(p) return { total = p.x + p.y } end,
  Count = function(p, ctx)
    for i = 1, p.x do ctx.send { x = i } end
  end,
  Echo = function(ctx)
    for p in ctx.recv do ctx.send(p) end
  end,
} }, { pool = pool })

-- What spec/http1_client.py MODE printed against a listener with `opts`
-- (the lines before "done", joined by "; "), then a protocall call over
-- HTTP/2 on a new connection.
local function run(mode, opts)
  opts = opts or {}
  opts.max_receive_size = opts.max_receive_size or 1024
  local l = pc.listen(server, "127.0.0.1:0", opts)
  local out = os.tmpname()
  local answer, sum
  pc.spawn(function() l:serve() end)
  pc.spawn(function()
    os.execute("/usr/bin/python3 spec/http1_client.py " .. mode .. " " .. l.port .. " > " .. out
      .. " 2>&1 &")
    for _ = 1, 3000 do
      local f = io.open(out)
      local text = f and f:read("a") or ""
      if f then f:close() end
      if text:find("done\n", 1, true) or text:find("Error") then
        answer = text:gsub("\ndone\n.*", ""):gsub("\n", "; ")
        break
      end
      pc.sleep(0.01)
    end
    local stub = pc.client("srv.Calc", { transport = pc.grpc("http://127.0.0.1:" .. l.port), pool = pool })
    sum = stub:Add({ x = 20, y = 22 }).total
    l:shutdown(1)
  end)
  pc.run()
  os.remove(out)
  assert.equals(42, sum) -- the server still serves
  return answer
end

describe("pc.listen over HTTP/1.1", function()
  it("answers Connect unary with Content-Length, then closes as asked", function()
    assert.equals([[status 200; body {"total":"42"}; closed]], run("unary"))
  end)

  it("answers pipelined requests in order, one at a time", function()
    assert.equals([[status 200 200 200; body {"total":"42"}; body {"total":"1"}; body {"total":"2"}; closed]],
      run("pipeline"))
  end)

  it("takes a request a byte at a time", function()
    assert.equals([[status 200; body {"total":"42"}; closed]], run("split"))
  end)

  it("takes a chunked request body", function()
    assert.equals([[status 200; body {"total":"42"}; closed]], run("chunked"))
  end)

  it("answers Expect: 100-continue with 100, then the response", function()
    assert.equals([[status 100 200; body ; body {"total":"42"}; closed]], run("expect"))
  end)

  it("sends a Connect server stream chunked", function()
    assert.equals([[status 200; body 1f\r\n\x00\x00\x00\x00\x07{"x":1}\x00\x00\x00\x00\x07{"x":2}]]
      .. [[\x02\x00\x00\x00\x02{}\r\n0\r\n\r\n; closed]], run("stream"))
  end)

  it("refuses a bidirectional stream UNIMPLEMENTED: it needs HTTP/2", function()
    assert.equals([[status 200; body 5e\r\n\x02\x00\x00\x00Y{"error":{"code":"unimplemented",]]
      .. [["message":"srv.Calc.Echo: bidi streams require HTTP/2"}}\r\n0\r\n\r\n; closed]], run("bidi"))
  end)

  it("answers a Connect GET of a bidirectional method, and its HEAD, 405 as over HTTP/2", function()
    -- (they were 501, the HTTP/1.1 refusal of a bidirectional stream)
    assert.equals("status 405 405; body ; body ; closed", run("bidiget"))
  end)

  it("sends a gRPC-Web stream to an HTTP/1.0 client until it closes", function()
    assert.equals([[status 200; body \x00\x00\x00\x00\x07{"x":1}\x00\x00\x00\x00\x07{"x":2}]]
      .. [[\x80\x00\x00\x00\x0fgrpc-status:0\r\n; closed]], run("http10"))
  end)

  it("sends a long stream whole before closing, to HTTP/1.0 and to Connection: close", function()
    for _, mode in ipairs { "http10big", "closebig" } do
      assert.equals([[status 200; messages 20000 last {"x":20000} trailers grpc-status:0; closed]],
        run(mode, { max_receive_size = 4 * 1024 * 1024 }), mode)
    end
  end)

  it("refuses plain gRPC (505: it needs HTTP/2) and closes", function()
    assert.equals("status 505; closed", run("grpc"))
  end)

  it("refuses Content-Length with Transfer-Encoding (400) and closes", function()
    assert.equals("status 400; closed", run("clte"))
  end)

  it("refuses Content-Lengths that differ (400) and closes", function()
    assert.equals("status 400; closed", run("dupcl"))
  end)

  it("refuses a chunk size past the limit (413) and closes", function()
    assert.equals("status 413; closed", run("hugechunk"))
  end)

  it("refuses more fields than it has slots (431) and closes", function()
    assert.equals("status 431; closed", run("manyfields"))
  end)

  it("answers a HEAD it refuses (431, 414) with the head alone, the GET's length (RFC 9110 9.3.2)", function()
    -- (the body went too: the bytes after the head were no response)
    local get = run("getmanyfields")
    local length, body = get:match("^status 431; length (%d+); body (.-); closed$")
    assert.equals(#body - 1, tonumber(length), get) -- (its \n printed as two characters)
    assert.equals("status 431; length " .. length .. "; body ; closed", run("headmanyfields"))
    assert.equals("status 414; length 53; body HTTP/1.1 request: start line too long at offset 8192\\n; closed",
      run("getlonguri"))
    assert.equals("status 414; length 53; body ; closed", run("headlonguri"))
  end)

  it("answers a message over max_receive_size RESOURCE_EXHAUSTED (429)", function()
    assert.equals("status 429; closed", run("bigbody"))
  end)

  it("answers a body not complete within stall_timeout of its head 408 and closes (a slow body)", function()
    assert.equals("status 408; closed", run("slowbody", { stall_timeout = 1 }))
  end)

  it("answers a body that stops within stall_timeout of its head 408 and closes, not RESOURCE_EXHAUSTED", function()
    assert.equals("status 408; closed", run("stallbody", { stall_timeout = 1 }))
  end)

  it("answers a head not complete within the handshake timeout 408 and closes (slowloris)", function()
    assert.equals("status 408; closed", run("slowloris", { handshake_timeout = 1 }))
  end)

  -- Served (the answers read by the kernel's buffers as they come) or,
  -- once unread input passes its bound, dropped with the connection.
  it("closes a connection answered early whose body goes on for ever (chunked), and serves on", function()
    -- (it read that body to its end: never, the connection held and a core busy; now at most
    -- 256 KiB or 2 s of it, Connection: close on the answer)
    assert.equals("status 415; connection close; closed", run("endless"))
  end)

  it("serves or closes a connection flooded with pipelined requests, without hanging", function()
    assert.matches("^status [2 0]*; closed$", run("flood"))
  end)
end)

describe("pc.listen over HTTP/1.1 with TLS", function()
  local dir
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    assert(os.execute("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
      .. " -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " .. dir .. "/key.pem -out "
      .. dir .. "/cert.pem 2>/dev/null"))
  end)
  teardown(function() os.execute("rm -rf " .. dir) end)

  -- curl's output for `args` against a TLS listener (ALPN as curl offers it).
  local function curl(args)
    local l = pc.listen(server, "127.0.0.1:0", { cert_file = dir .. "/cert.pem", key_file = dir .. "/key.pem" })
    local out = os.tmpname()
    local text
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      os.execute("curl -s -w ' %{http_version}' --cacert " .. dir .. "/cert.pem " .. args
        .. " -H 'content-type: application/json' -d '{\"x\": 2, \"y\": 3}' https://127.0.0.1:" .. l.port
        .. "/srv.Calc/Add > " .. out .. " 2>&1 &")
      for _ = 1, 1000 do
        local f = io.open(out)
        text = f and f:read("a") or ""
        if f then f:close() end
        if text:find(" %d$") or text:find(" %d%.%d$") then break end
        pc.sleep(0.01)
      end
      l:shutdown(1)
    end)
    pc.run()
    os.remove(out)
    return text
  end

  it("picks http/1.1 by ALPN when the client offers only it", function()
    assert.equals('{"total":"5"} 1.1', curl("--http1.1"))
  end)

  it("picks h2 by ALPN when the client offers both", function()
    assert.equals('{"total":"5"} 2', curl("--http2"))
  end)
end)
