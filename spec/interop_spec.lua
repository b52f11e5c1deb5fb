-- gRPC's interop test cases for a client (gRPC's doc/interop-test-descriptions.md)
-- through pc.client over pc.grpc, against grpc.testing.TestService on
-- python3-grpcio (spec/interop_server.py), over h2c, TLS and mutual TLS;
-- plus rich error details and with_metadata over the network.
package.path = "spec/?.lua;" .. package.path
local pc = require "protocall"
local helper = require "grpc_helper"

local PYTHON = "/usr/bin/python3"

local function spawn(...)
  return helper.spawn_command(table.concat({ PYTHON, "spec/interop_server.py", ... }, " "),
    "interop_server.py")
end

local function zeros(n) return string.rep("\0", n) end

local failure = helper.status_error

local function find(pairs_, key)
  for _, p in ipairs(pairs_) do
    if p[1] == key then return p[2] end
  end
end

assert(pc.load_file("grpc/testing/test.proto", { import_paths = { "spec/fixtures/protos" } }))

-- The interop cases against the server and transport `start()` returns.
local function interop_cases(name, start)
  describe("interop over " .. name, function()
    local server, transport, stub

    setup(function()
      server, transport = start()
      stub = pc.client("grpc.testing.TestService", { transport = transport, timeout = 20 })
    end)

    teardown(function()
      if transport then transport:close() end
      helper.stop(server)
    end)

    it("empty_unary", function()
      assert.are.equal(pc.type("grpc.testing.Empty") {}, stub:EmptyCall {})
    end)

    it("large_unary", function()
      local r = stub:UnaryCall { response_size = 314159, payload = { body = zeros(271828) } }
      assert.are.equal(zeros(314159), r.payload.body)
    end)

    it("client_streaming", function()
      local call = stub:StreamingInputCall()
      for _, n in ipairs { 27182, 8, 1828, 45904 } do call:send { payload = { body = zeros(n) } } end
      assert.are.equal(74922, call:close_and_recv().aggregated_payload_size)
    end)

    it("server_streaming", function()
      local sizes = {}
      for r in stub:StreamingOutputCall { response_parameters = {
        { size = 31415 }, { size = 9 }, { size = 2653 }, { size = 58979 } } } do
        sizes[#sizes + 1] = #r.payload.body
        assert.are.equal(zeros(#r.payload.body), r.payload.body)
      end
      assert.are.same({ 31415, 9, 2653, 58979 }, sizes)
    end)

    it("ping_pong", function()
      local call = stub:FullDuplexCall()
      local req = { 27182, 8, 1828, 45904 }
      local resp = { 31415, 9, 2653, 58979 }
      for i = 1, 4 do
        call:send { response_parameters = { { size = resp[i] } }, payload = { body = zeros(req[i]) } }
        assert.are.equal(zeros(resp[i]), call:recv().payload.body)
      end
      call:close_send()
      assert.is_nil(call:recv())
    end)

    it("empty_stream", function()
      local call = stub:FullDuplexCall()
      call:close_send()
      assert.is_nil(call:recv())
    end)

    it("timeout_on_sleeping_server", function()
      local call = stub:FullDuplexCall { timeout = 0.001 }
      local err = failure(function()
        call:send { payload = { body = zeros(27182) } }
        call:recv()
      end)
      assert.are.equal("DEADLINE_EXCEEDED", err.code)
      call:close()
    end)

    it("cancel_after_begin", function()
      local call = stub:StreamingInputCall()
      call:cancel()
      assert.are.equal("CANCELLED", failure(call.close_and_recv, call).code)
    end)

    it("cancel_after_first_response", function()
      local call = stub:FullDuplexCall()
      call:send { response_parameters = { { size = 31415 } }, payload = { body = zeros(27182) } }
      assert.are.equal(31415, #call:recv().payload.body)
      call:cancel()
      assert.are.equal("CANCELLED", failure(call.recv, call).code)
    end)

    local ECHO_MD = { { "x-grpc-test-echo-initial", "test_initial_metadata_value" },
                      { "x-grpc-test-echo-trailing-bin", "\xab\xab\xab" } }

    it("custom_metadata (unary, with_metadata)", function()
      local r, md = stub:UnaryCall({ response_size = 314159, payload = { body = zeros(271828) } },
        { metadata = ECHO_MD, with_metadata = true })
      assert.are.equal(314159, #r.payload.body)
      assert.are.equal("test_initial_metadata_value", find(md.headers, "x-grpc-test-echo-initial"))
      assert.are.equal("\xab\xab\xab", find(md.trailers, "x-grpc-test-echo-trailing-bin"))
    end)

    it("custom_metadata (full duplex)", function()
      local call = stub:FullDuplexCall { metadata = ECHO_MD }
      call:send { response_parameters = { { size = 314159 } }, payload = { body = zeros(271828) } }
      call:close_send()
      assert.are.equal(314159, #call:recv().payload.body)
      assert.is_nil(call:recv())
      assert.are.equal("test_initial_metadata_value", find(call:headers(), "x-grpc-test-echo-initial"))
      assert.are.equal("\xab\xab\xab", find(call:trailers(), "x-grpc-test-echo-trailing-bin"))
    end)

    it("status_code_and_message", function()
      local status = { code = 2, message = "test status message" }
      local err = failure(stub.UnaryCall, stub, { response_status = status })
      assert.are.equal("UNKNOWN", err.code)
      assert.are.equal("test status message", err.message)
      local call = stub:FullDuplexCall()
      call:send { response_status = status }
      call:close_send()
      err = failure(call.recv, call)
      assert.are.equal("UNKNOWN", err.code)
      assert.are.equal("test status message", err.message)
    end)

    it("special_status_message", function()
      local text = "\t\ntest with whitespace\r\nand Unicode BMP \u{263A} and non-BMP \u{1F608}\t\n"
      local err = failure(stub.UnaryCall, stub, { response_status = { code = 2, message = text } })
      assert.are.equal("UNKNOWN", err.code)
      assert.are.equal(text, err.message)
    end)

    it("unimplemented_method", function()
      assert.are.equal("UNIMPLEMENTED", failure(stub.UnimplementedCall, stub, {}).code)
    end)

    it("unimplemented_service", function()
      local other = pc.client("grpc.testing.UnimplementedService", { transport = transport, timeout = 20 })
      assert.are.equal("UNIMPLEMENTED", failure(other.UnimplementedCall, other, {}).code)
    end)

    it("client_compressed_unary", function()
      for _, c in ipairs { "gzip", "identity" } do
        local r = stub:UnaryCall({ response_size = 314159, payload = { body = zeros(271828) },
          expect_compressed = { value = c == "gzip" } }, { compression = c })
        assert.are.equal(314159, #r.payload.body)
      end
    end)

    it("client_compressed_streaming", function()
      local call = stub:StreamingInputCall { compression = "gzip" }
      call:send { payload = { body = zeros(27182) }, expect_compressed = { value = true } }
      call:send { payload = { body = zeros(45904) }, expect_compressed = { value = true } }
      assert.are.equal(73086, call:close_and_recv().aggregated_payload_size)
    end)

    it("server_compressed_unary", function()
      for _, on in ipairs { true, false } do
        local r = stub:UnaryCall { response_size = 314159, payload = { body = zeros(271828) },
          response_compressed = { value = on } }
        assert.are.equal(zeros(314159), r.payload.body)
      end
    end)

    it("server_compressed_streaming", function()
      local sizes = {}
      for r in stub:StreamingOutputCall { response_parameters = {
        { size = 31415, compressed = { value = true } }, { size = 92653, compressed = { value = false } } } } do
        sizes[#sizes + 1] = #r.payload.body
      end
      assert.are.same({ 31415, 92653 }, sizes)
    end)

    it("receives rich error details (grpc-status-details-bin)", function()
      local err = failure(stub.UnaryCall, stub, { response_status = { code = 5, message = "gone" } },
        { metadata = { { "x-rich-details", "1" } } })
      assert.are.equal("NOT_FOUND", err.code)
      assert.are.equal("gone", err.message)
      assert.are.equal(3, #err.details)
      assert.are.equal(pc.type("google.rpc.RetryInfo") { retry_delay = { seconds = 1, nanos = 500000000 } },
        err.details[1])
      assert.are.equal(pc.type("google.rpc.ErrorInfo") { reason = "R", domain = "example.com" }, err.details[2])
      assert.are.equal(pc.type("google.protobuf.Any"), pc.type_of(err.details[3]))
      assert.are.equal("type.googleapis.com/example.Unknown", err.details[3].type_url)
      assert.are.equal(1.5, err.retry_delay)
    end)
  end)
end

interop_cases("h2c", function()
  local s = spawn("0")
  return s, pc.grpc("127.0.0.1:" .. s.port)
end)

local certs
interop_cases("TLS", function()
  certs = certs or helper.make_certs()
  local s = spawn("0", certs .. "/server.pem", certs .. "/server.key")
  return s, pc.grpc("https://127.0.0.1:" .. s.port, { ca_file = certs .. "/ca.pem" })
end)

describe("interop extras", function()
  teardown(function()
    if certs then os.execute("rm -rf " .. certs) end
  end)

  it("sends compressed requests: a server refusing gzip refuses them, takes identity ones", function()
    local s = spawn("0", "--identity-only")
    local t = pc.grpc("127.0.0.1:" .. s.port)
    local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20 })
    local ok, r = pcall(stub.UnaryCall, stub, { response_size = 10, payload = { body = zeros(100) } })
    local err = failure(stub.UnaryCall, stub, { response_size = 10, payload = { body = zeros(100) } },
      { compression = "gzip" })
    local call = stub:StreamingInputCall { compression = "gzip" }
    local serr = failure(function()
      call:send { payload = { body = zeros(100) } }
      return call:close_and_recv()
    end)
    t:close()
    helper.stop(s)
    assert.is_true(ok, tostring(r))
    assert.are.equal(10, #r.payload.body)
    assert.are.equal("UNIMPLEMENTED", err.code)
    assert.matches("gzip", err.message, 1, true)
    assert.are.equal("UNIMPLEMENTED", serr.code)
  end)

  describe("mutual TLS", function()
    local s
    setup(function()
      certs = certs or helper.make_certs()
      s = spawn("0", certs .. "/server.pem", certs .. "/server.key", certs .. "/ca.pem")
    end)
    teardown(function() helper.stop(s) end)

    it("calls with a client certificate the server's CA signed", function()
      local t = pc.grpc("https://127.0.0.1:" .. s.port, { ca_file = certs .. "/ca.pem",
        cert_file = certs .. "/client.pem", key_file = certs .. "/client.key" })
      local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20 })
      assert.are.equal(pc.type("grpc.testing.Empty") {}, stub:EmptyCall {})
      local r = stub:UnaryCall { response_size = 1000, payload = { body = zeros(10) } }
      assert.are.equal(1000, #r.payload.body)
      t:close()
    end)

    it("fails UNAVAILABLE without a client certificate, well before the deadline", function()
      local t = pc.grpc("https://127.0.0.1:" .. s.port, { ca_file = certs .. "/ca.pem" })
      local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 60 })
      local t0 = helper.now()
      local err = failure(stub.EmptyCall, stub, {})
      assert.are.equal("UNAVAILABLE", err.code)
      assert.matches("require a client certificate", err.message, 1, true)
      assert.is_true(helper.now() - t0 < 30, "took " .. (helper.now() - t0) .. " s")
      t:close()
    end)

    it("refuses a client certificate the server's CA did not sign", function()
      local other = os.tmpname()
      assert(os.execute("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=stranger -keyout "
        .. other .. ".key -out " .. other .. ".pem 2>/dev/null"))
      local t = pc.grpc("https://127.0.0.1:" .. s.port, { ca_file = certs .. "/ca.pem",
        cert_file = other .. ".pem", key_file = other .. ".key" })
      local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 60 })
      local err = failure(stub.EmptyCall, stub, {})
      os.remove(other); os.remove(other .. ".key"); os.remove(other .. ".pem")
      assert.are.equal("UNAVAILABLE", err.code)
      t:close()
    end)
  end)
end)

describe("with_metadata", function()
  local s, t
  setup(function()
    s = spawn("0")
    t = pc.grpc("127.0.0.1:" .. s.port)
  end)
  teardown(function()
    t:close()
    helper.stop(s)
  end)

  local ECHO = { { "x-grpc-test-echo-initial", "v" }, { "x-grpc-test-echo-trailing-bin", "\1\2" } }

  it("returns the metadata through interceptors, per call and per attempt", function()
    local seen = {}
    local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20,
      interceptors = {
        function(call, next) seen[#seen + 1] = "call"; return next(call) end,
        { per_attempt = function(call, next) seen[#seen + 1] = "attempt"; return next(call) end },
      } })
    local r, md = stub:UnaryCall({ response_size = 3 }, { metadata = ECHO, with_metadata = true })
    assert.are.equal(3, #r.payload.body)
    assert.are.equal("v", find(md.headers, "x-grpc-test-echo-initial"))
    assert.are.equal("\1\2", find(md.trailers, "x-grpc-test-echo-trailing-bin"))
    assert.are.same({ "call", "attempt" }, seen)
    local r2, none = stub:UnaryCall({ response_size = 3 }, { metadata = ECHO })
    assert.are.equal(3, #r2.payload.body)
    assert.is_nil(none)
  end)

  it("returns only the response without it, or with false", function()
    local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20 })
    local r, md = stub:EmptyCall({}, { with_metadata = false })
    assert.are.equal(pc.type("grpc.testing.Empty") {}, r)
    assert.is_nil(md)
  end)

  it("gives empty lists in process", function()
    local server = pc.server { ["grpc.testing.TestService"] = { EmptyCall = function() return {} end } }
    local stub = pc.client("grpc.testing.TestService", { transport = pc.inproc(server) })
    local r, md = stub:EmptyCall({}, { with_metadata = true })
    assert.are.equal(pc.type("grpc.testing.Empty") {}, r)
    assert.are.same({ headers = {}, trailers = {} }, md)
  end)

  it("refuses a non-boolean", function()
    local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20 })
    assert.has_error(function() stub:EmptyCall({}, { with_metadata = 1 }) end,
      [[bad argument #2 to 'EmptyCall' (with_metadata: true, false or "present" expected, got number)]])
    assert.has_error(function() stub:StreamingOutputCall({}, { with_metadata = 1 }) end,
      [[bad argument #2 to 'StreamingOutputCall' (with_metadata: true, false or "present" expected, got number)]])
  end)

  describe("of server streams", function()
    local PARAMS = { response_parameters = { { size = 1 }, { size = 2 }, { size = 3 } } }

    it("gives headers and trailers once the stream ends", function()
      local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20 })
      local it, call = stub:StreamingOutputCall(PARAMS, { metadata = ECHO, with_metadata = true })
      assert.are.equal("protocall.StreamCall", getmetatable(call).__name)
      assert.are.same({}, call:trailers()) -- still running
      local sizes = {}
      for r in it do sizes[#sizes + 1] = #r.payload.body end
      assert.are.same({ 1, 2, 3 }, sizes)
      assert.are.equal("v", find(call:headers(), "x-grpc-test-echo-initial"))
      assert.are.equal("\1\2", find(call:trailers(), "x-grpc-test-echo-trailing-bin"))
      -- without it, the call (cancel, close) has no headers nor trailers
      local it2, plain = stub:StreamingOutputCall(PARAMS, { metadata = ECHO })
      assert.are.equal("protocall.StreamCall", getmetatable(plain).__name)
      assert.has_error(function() plain:headers() end,
        "headers: grpc.testing.TestService.StreamingOutputCall was called without {with_metadata = true}")
      assert.has_error(function() plain:trailers() end,
        "trailers: grpc.testing.TestService.StreamingOutputCall was called without {with_metadata = true}")
      for _ in it2 do end
    end)

    it("keeps them when the stream fails", function()
      local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20 })
      local req = { response_parameters = { { size = 1 } }, response_status = { code = 3, message = "no" } }
      local it, call = stub:StreamingOutputCall(req, { metadata = ECHO, with_metadata = true })
      assert.are.equal(1, #it().payload.body)
      local ok, err = pcall(it)
      assert.is_false(ok)
      assert.are.equal("INVALID_ARGUMENT", err.code)
      assert.are.equal("v", find(call:headers(), "x-grpc-test-echo-initial"))
      assert.are.equal("\1\2", find(call:trailers(), "x-grpc-test-echo-trailing-bin"))
    end)

    it("through interceptors, per call and per attempt", function()
      local seen = {}
      local stub = pc.client("grpc.testing.TestService", { transport = t, timeout = 20,
        interceptors = {
          function(c, next) seen[#seen + 1] = "call"; return next(c) end,
          { per_attempt = function(c, next) seen[#seen + 1] = "attempt"; return next(c) end },
        } })
      local it, call = stub:StreamingOutputCall(PARAMS, { metadata = ECHO, with_metadata = true })
      local n = 0
      for _ in it do n = n + 1 end
      assert.are.equal(3, n)
      assert.are.equal("v", find(call:headers(), "x-grpc-test-echo-initial"))
      assert.are.equal("\1\2", find(call:trailers(), "x-grpc-test-echo-trailing-bin"))
      assert.are.same({ "call", "attempt" }, seen)
    end)

    it("gives empty lists in process", function()
      local server = pc.server { ["grpc.testing.TestService"] = {
        StreamingOutputCall = function(_, ctx) ctx.send { payload = { body = "x" } } end } }
      local stub = pc.client("grpc.testing.TestService", { transport = pc.inproc(server) })
      local it, call = stub:StreamingOutputCall({}, { with_metadata = true })
      for _ in it do end
      assert.are.same({}, call:headers())
      assert.are.same({}, call:trailers())
    end)
  end)
end)
