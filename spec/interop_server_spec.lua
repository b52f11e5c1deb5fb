-- gRPC's interop test cases (gRPC's doc/interop-test-descriptions.md)
-- against protocall's server: pc.listen serving grpc.testing.TestService
-- in Lua (spec/interop_service.lua), driven by a client written with
-- Debian's python3-grpcio (spec/interop_client.py) over h2c and TLS; the
-- compressed flags of the responses read with a raw HTTP/2 client
-- (spec/h2_client.py, which python3-grpcio cannot show); and protocall's
-- own client against the same service, over gRPC, gRPC-Web and Connect
-- (h2c; the last two over TLS too). The four call shapes between
-- protocall's client and server over h2c and TLS are spec/server_spec.lua's.
package.path = "spec/?.lua;" .. package.path
local pc = require "protocall"
local service = require "interop_service"
local helper = require "grpc_helper"

local PYTHON = "/usr/bin/python3"

local CASES = {
  "empty_unary", "large_unary", "client_streaming", "server_streaming", "ping_pong", "empty_stream",
  "cancel_after_begin", "cancel_after_first_response", "timeout_on_sleeping_server",
  "custom_metadata", "status_code_and_message", "special_status_message", "unimplemented_method",
  "unimplemented_service", "client_compressed_unary", "server_compressed_unary",
  "client_compressed_streaming", "server_compressed_streaming",
}

-- Serves the TestService with `opts` while `command` (given the port) runs
-- in the background; returns its output once it printed "done" (or a
-- Python traceback, or 60 s passed).
local function serve_while(opts, command)
  local l = pc.listen(service.server(), "127.0.0.1:0", opts)
  local out = os.tmpname()
  local text = ""
  pc.spawn(function() l:serve() end)
  pc.spawn(function()
    os.execute("(" .. command(l.port) .. ") > " .. out .. " 2>&1 &")
    for _ = 1, 6000 do
      local f = io.open(out)
      text = f and f:read("*a") or ""
      if f then f:close() end
      if text:find("done\n", 1, true) or text:find("Traceback", 1, true) then break end
      pc.sleep(0.01)
    end
    l:shutdown(1)
  end)
  pc.run()
  os.remove(out)
  return text
end

-- The case -> "ok" / "FAIL ..." lines of spec/interop_client.py's output.
local function results_of(text)
  local r = {}
  for name, rest in text:gmatch("(%S+) ([^\n]*)") do r[name] = rest end
  return r
end

local function python_cases(name, start)
  describe("interop cases of a python3-grpcio client against pc.listen over " .. name, function()
    local results, output
    setup(function()
      output = start()
      results = results_of(output)
    end)

    it("runs every case", function()
      assert.is_truthy(output:find("\ndone\n", 1, true), output)
    end)

    for _, case in ipairs(CASES) do
      it(case, function()
        assert.are.equal("ok", results[case], output)
      end)
    end
  end)
end

python_cases("h2c", function()
  return serve_while(nil, function(port) return PYTHON .. " spec/interop_client.py " .. port end)
end)

python_cases("TLS", function()
  local dir = helper.make_certs()
  local out = serve_while({ cert_file = dir .. "/server.pem", key_file = dir .. "/server.key" },
    function(port) return PYTHON .. " spec/interop_client.py " .. port .. " " .. dir .. "/ca.pem" end)
  os.execute("rm -rf " .. dir)
  return out
end)

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- What spec/h2_client.py's "flags" mode sees of one call of `method`
-- with request `req` (and grpc-accept-encoding `accept`, none if nil).
local function flags(method, req, accept)
  local bytes = pc.encode(pc.type("grpc.testing." .. (method == "UnaryCall" and "SimpleRequest"
    or "StreamingOutputCallRequest"))(req))
  local out = serve_while(nil, function(port)
    return PYTHON .. " spec/h2_client.py flags " .. port .. " /grpc.testing.TestService/" .. method
      .. " " .. (bytes == "" and "''" or hex(bytes)) .. (accept and (" '" .. accept .. "'") or "")
      .. " && echo done"
  end)
  return (out:gsub("\ndone\n$", ""))
end

describe("response compression on the wire (CompressedResponse)", function()
  local T = { value = true }
  local F = { value = false }

  it("gzips a unary response asked for compressed, with grpc-encoding gzip", function()
    assert.are.equal("encoding gzip flags 1 status 0", flags("UnaryCall",
      { response_size = 314159, response_compressed = T }, "identity, deflate, gzip"))
  end)

  it("sends it uncompressed when not asked", function()
    assert.are.equal("encoding none flags 0 status 0", flags("UnaryCall",
      { response_size = 314159, response_compressed = F }, "identity, deflate, gzip"))
  end)

  it("sends it uncompressed to a client whose grpc-accept-encoding lacks gzip", function()
    assert.are.equal("encoding none flags 0 status 0", flags("UnaryCall",
      { response_size = 100, response_compressed = T }, "identity"))
    assert.are.equal("encoding none flags 0 status 0", flags("UnaryCall",
      { response_size = 100, response_compressed = T }))
  end)

  it("compresses each message of a stream or not (server_compressed_streaming)", function()
    assert.are.equal("encoding gzip flags 1,0 status 0", flags("StreamingOutputCall",
      { response_parameters = { { size = 31415, compressed = T }, { size = 92653, compressed = F } } },
      "gzip"))
  end)
end)

-- protocall's client over `protocol` (pc.grpc's option), h2c or with
-- `tls` (a certificate directory of helper.make_certs).
local function own_client(protocol, tls)
  local title = "interop cases of protocall's client against pc.listen over " .. protocol .. (tls and " (TLS)" or "")
  describe(title, function()
    local function zeros(n) return string.rep("\0", n) end

    -- Runs fn(stub) in a task beside the listener's serve task.
    local function with_server(fn)
      local dir = tls and helper.make_certs()
      local l = pc.listen(service.server(), "127.0.0.1:0",
        dir and { cert_file = dir .. "/server.pem", key_file = dir .. "/server.key" })
      local err
      pc.spawn(function() l:serve() end)
      pc.spawn(function()
        local t = pc.grpc((dir and "https" or "http") .. "://127.0.0.1:" .. l.port,
          { protocol = protocol, ca_file = dir and dir .. "/ca.pem" })
        local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20 })
        local ok, e = pcall(fn, stub, t)
        if not ok then err = e end
        t:close()
        l:shutdown(1)
      end)
      pc.run()
      if dir then os.execute("rm -rf " .. dir) end
      if err then error(err, 0) end
    end

    local failure = helper.status_error

    local function find(list, key)
      for _, kv in ipairs(list) do if kv[1] == key then return kv[2] end end
    end

    it("large_unary, client_streaming, server_streaming, ping_pong, empty_stream", function()
      with_server(function(stub)
        local r = stub:UnaryCall { response_size = 314159, payload = { body = zeros(271828) } }
        assert.are.equal(zeros(314159), r.payload.body)
        local c = stub:StreamingInputCall()
        for _, n in ipairs { 27182, 8, 1828, 45904 } do c:send { payload = { body = zeros(n) } } end
        assert.are.equal(74922, c:close_and_recv().aggregated_payload_size)
        local sizes = {}
        for m in stub:StreamingOutputCall { response_parameters = {
          { size = 31415 }, { size = 9 }, { size = 2653 }, { size = 58979 } } } do
          sizes[#sizes + 1] = #m.payload.body
        end
        assert.are.same({ 31415, 9, 2653, 58979 }, sizes)
        local d = stub:FullDuplexCall()
        local req, resp = { 27182, 8, 1828, 45904 }, { 31415, 9, 2653, 58979 }
        for i = 1, 4 do
          d:send { response_parameters = { { size = resp[i] } }, payload = { body = zeros(req[i]) } }
          assert.are.equal(zeros(resp[i]), d:recv().payload.body)
        end
        d:close_send()
        assert.is_nil(d:recv())
        local e = stub:FullDuplexCall()
        e:close_send()
        assert.is_nil(e:recv())
      end)
    end)

    it("custom_metadata, special_status_message, unimplemented_method", function()
      with_server(function(stub)
        local md = { { "x-grpc-test-echo-initial", "test_initial_metadata_value" },
                     { "x-grpc-test-echo-trailing-bin", "\xab\xab\xab" } }
        local r, got = stub:UnaryCall({ response_size = 314159, payload = { body = zeros(271828) } },
          { metadata = md, with_metadata = true })
        assert.are.equal(314159, #r.payload.body)
        assert.are.equal("test_initial_metadata_value", find(got.headers, "x-grpc-test-echo-initial"))
        assert.are.equal("\xab\xab\xab", find(got.trailers, "x-grpc-test-echo-trailing-bin"))
        local text = "\t\ntest with whitespace\r\nand Unicode BMP \226\152\186 and non-BMP \240\159\152\136\t\n"
        local err = failure(stub.UnaryCall, stub, { response_status = { code = 2, message = text } })
        assert.are.equal("UNKNOWN", err.code)
        assert.are.equal(text, err.message)
        assert.are.equal("UNIMPLEMENTED", failure(stub.UnimplementedCall, stub, {}).code)
      end)
    end)

    it("client_compressed_unary and client_compressed_streaming: the server sees the flag", function()
      with_server(function(stub)
        local function req(expect)
          return { response_size = 314159, payload = { body = zeros(271828) }, expect_compressed = { value = expect } }
        end
        assert.are.equal("INVALID_ARGUMENT", failure(stub.UnaryCall, stub, req(true)).code)
        assert.are.equal(314159, #stub:UnaryCall(req(true), { compression = "gzip" }).payload.body)
        assert.are.equal(314159, #stub:UnaryCall(req(false)).payload.body)
        assert.are.equal("INVALID_ARGUMENT", failure(stub.UnaryCall, stub, req(false), { compression = "gzip" }).code)
        local c = stub:StreamingInputCall { compression = "gzip" }
        c:send { payload = { body = zeros(27182) }, expect_compressed = { value = true } }
        c:send { payload = { body = zeros(45904) }, expect_compressed = { value = true } }
        assert.are.equal(73086, c:close_and_recv().aggregated_payload_size)
      end)
    end)

    it("server_compressed_unary and server_compressed_streaming: gzipped responses decode", function()
      with_server(function(stub)
        for _, on in ipairs { true, false } do
          local r = stub:UnaryCall { response_size = 314159, response_compressed = { value = on } }
          assert.are.equal(zeros(314159), r.payload.body)
        end
        local sizes = {}
        for m in stub:StreamingOutputCall { response_parameters = {
          { size = 31415, compressed = { value = true } }, { size = 92653, compressed = { value = false } } } } do
          assert.are.equal(zeros(#m.payload.body), m.payload.body)
          sizes[#sizes + 1] = #m.payload.body
        end
        assert.are.same({ 31415, 92653 }, sizes)
      end)
    end)
  end)
end

for _, protocol in ipairs { "grpc", "grpc-web", "connect" } do
  own_client(protocol)
end
for _, protocol in ipairs { "grpc-web", "connect" } do
  own_client(protocol, true)
end
