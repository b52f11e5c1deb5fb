-- gRPC-Web and Connect in front of a gRPC upstream, the part without I/O
-- (lua/protocall/http/web.lua over core/net/web.c's framing): the
-- protocol of a request, its metadata and deadline, its messages, and the
-- bytes of each kind of answer. spec/nginx_gateway_spec.lua runs the same
-- through nginx against connect-node clients and a grpcio upstream.
local pc = require "protocall"
local web = require "protocall.http.web"

local function frame(flags, s)
  local n = #s
  return string.char(flags, math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256,
    n % 256) .. s
end

-- Padded standard base64 (the JSON form of bytes).
local function b64(s) return pc.to_json(pc.type("google.protobuf.BytesValue") { value = s }):sub(2, -2) end

describe("protocall.http.web", function()
  local pool, methods
  setup(function()
    pool = pc.pool()
    assert(pool:load([[
      syntax = "proto3"; package wt;
      message Req { string text = 1; int64 n = 2; }
      message Rep { string text = 1; }
      service S {
        rpc Unary(Req) returns (Rep);
        rpc Down(Req) returns (stream Rep);
        rpc Up(stream Req) returns (Rep);
      }
    ]], { name = "wt.proto" }))
    methods = web.methods(pool)
  end)

  it("finds the methods by path, and a request's protocol and codec by its content type", function()
    assert.are.equal("wt.S.Unary", methods["/wt.S/Unary"].full_name)
    assert.is_true(methods["/wt.S/Down"].server_streaming)
    assert.is_nil(methods["/wt.S/Nope"])
    assert.are.same({}, web.methods(pool, { "wt.Other" }))
    local cases = {
      { "application/grpc-web", "grpc-web", "proto" },
      { "application/grpc-web+json; charset=utf-8", "grpc-web", "json" },
      { "application/grpc-web-text+proto", "grpc-web-text", "proto" },
      { "application/proto", "connect", "proto" },
      { "application/json", "connect", "json" },
      { "application/connect+json", "connect-stream", "json" },
      { "application/grpc", nil, nil },
      { "text/plain", nil, nil },
    }
    for _, c in ipairs(cases) do
      local p, codec = web.classify("POST", c[1])
      assert.are.same({ c[2], c[3] }, { p, codec }, c[1])
    end
    assert.is_nil(web.classify("POST", nil))
  end)

  it("takes the request headers as metadata and the protocol's own timeout header", function()
    local md, t = web.metadata("grpc-web", {
      ["content-type"] = "application/grpc-web", ["x-user"] = "ann", ["grpc-timeout"] = "300m",
      ["x-raw-bin"] = "AAEC/w", host = "h", ["x-list"] = { "a", "b" }, ["x-bad"] = "\1",
      ["connect-timeout-ms"] = "5",
    })
    table.sort(md, function(a, b) return a[1] .. a[2] < b[1] .. b[2] end)
    assert.are.same({ { "x-list", "a" }, { "x-list", "b" }, { "x-raw-bin", "\0\1\2\255" }, { "x-user", "ann" } }, md)
    assert.are.equal(0.3, t)
    md, t = web.metadata("connect", { ["connect-timeout-ms"] = "1500", ["grpc-timeout"] = "1S" })
    assert.are.same({}, md)
    assert.are.equal(1.5, t)
    local _, err = web.metadata("connect", { ["connect-timeout-ms"] = "12345678901" })
    assert.are.equal("INVALID_ARGUMENT: bad Connect-Timeout-Ms", tostring(err))
    _, err = web.metadata("connect-stream", { ["connect-protocol-version"] = "2" })
    assert.are.equal('INVALID_ARGUMENT: connect-protocol-version must be "1": got "2"', tostring(err))
    assert.are.same({}, (web.metadata("connect", { ["connect-protocol-version"] = "1" })))
    _, err = web.metadata("grpc-web", { ["grpc-timeout"] = "1x" })
    assert.are.equal("INVALID_ARGUMENT: bad Grpc-Timeout", tostring(err))
    _, err = web.metadata("grpc-web", { ["x-a-bin"] = "!!" })
    assert.are.equal("INVALID_ARGUMENT: header 'x-a-bin': bad base64", tostring(err))
  end)

  it("reads the request messages of each protocol, as bytes or through the JSON mapping", function()
    local Req = pool:type("wt.Req")
    local bytes = pc.encode(Req { text = "hi", n = 5 })
    assert.are.same({ bytes }, web.requests("grpc-web", "proto", methods["/wt.S/Unary"], frame(0, bytes)))
    assert.are.same({ bytes }, web.requests("connect", "proto", methods["/wt.S/Unary"], bytes))
    assert.are.same({ bytes }, web.requests("connect", "json", methods["/wt.S/Unary"], '{"text":"hi","n":"5"}'))
    assert.are.same({ "" }, web.requests("connect", "proto", methods["/wt.S/Unary"], "")) -- the empty message
    assert.are.same({ bytes, bytes }, web.requests("connect-stream", "json", methods["/wt.S/Up"],
      frame(0, '{"text":"hi","n":5}') .. frame(0, '{"text":"hi","n":5}')))
    -- gRPC-Web-Text: padded base64 chunks one after the other
    local all = frame(0, bytes)
    local text = b64(all:sub(1, 4)) .. b64(all:sub(5))
    assert.are.same({ bytes }, web.requests("grpc-web-text", "proto", methods["/wt.S/Unary"], text))
    -- wrapped in lines (coreutils base64, MIME): CR and LF skipped, as pc.listen does
    local wrapped = text:sub(1, 4) .. "\r\n" .. text:sub(5, 6) .. "\n" .. text:sub(7) .. "\n"
    assert.are.same({ bytes }, web.requests("grpc-web-text", "proto", methods["/wt.S/Unary"], wrapped))
    local bad = {
      -- gRPC-Web cut inside a message, and a flags byte neither 0 nor 1: INTERNAL, as gRPC (grpc-go)
      -- and pc.listen answer them (spec/web_rpc_spec.lua)
      { "grpc-web", "proto", "/wt.S/Unary", "\0\0\0", "INTERNAL: body: a message prefix cut short" },
      { "grpc-web", "proto", "/wt.S/Unary", "\0\0\0\0\9x", "INTERNAL: body: a message of 9 bytes cut short" },
      -- Connect streaming: connect-go's words (its envelopeReader)
      { "connect-stream", "proto", "/wt.S/Up", frame(0, "a") .. "\0\0\0",
        "INVALID_ARGUMENT: body: protocol error: incomplete envelope: unexpected EOF" },
      { "connect-stream", "proto", "/wt.S/Up", frame(0, "a") .. "\0\0\0\0\9x",
        "INVALID_ARGUMENT: body: protocol error: promised 9 bytes in enveloped message, got 1 bytes" },
      { "grpc-web", "proto", "/wt.S/Unary", frame(1, "x"),
        "UNIMPLEMENTED: body: compressed request messages are not supported by this gateway" },
      { "grpc-web", "proto", "/wt.S/Unary", frame(2, "x"),
        "INTERNAL: body: a request message with flags 0x02" },
      { "connect-stream", "proto", "/wt.S/Up", frame(0x40, "x"), "INTERNAL: body: a request message with flags 0x40" },
      -- a unary method's body of no message or of two: UNIMPLEMENTED, as pc.listen answers
      -- (gRPC's request cardinality violation); a newline-only gRPC-Web-Text body holds none
      { "grpc-web", "proto", "/wt.S/Unary", frame(0, "") .. frame(0, ""),
        "UNIMPLEMENTED: wt.S.Unary: a unary method takes exactly one request message, got more" },
      { "grpc-web", "proto", "/wt.S/Unary", "",
        "UNIMPLEMENTED: wt.S.Unary: a unary method takes exactly one request message, got none" },
      { "grpc-web-text", "json", "/wt.S/Unary", "\r\n",
        "UNIMPLEMENTED: wt.S.Unary: a unary method takes exactly one request message, got none" },
      -- Connect unary: an empty JSON body is no JSON (connect-go: "zero-length payload is not a
      -- valid JSON object"), newlines neither; an empty proto body is the empty message
      { "connect", "json", "/wt.S/Unary", "", "INVALID_ARGUMENT: message 1: $: unexpected end of input" },
      { "connect", "json", "/wt.S/Unary", "\n", "INVALID_ARGUMENT: message 1: $: unexpected end of input" },
      -- gRPC-Web-Text that is not base64 (CR and LF are skipped, not a space): INTERNAL, as pc.listen
      -- answers it (core/net/server_test.c)
      { "grpc-web-text", "proto", "/wt.S/Unary", "AA*A", "INTERNAL: body: not base64: byte 0x2a at offset 2" },
      { "grpc-web-text", "proto", "/wt.S/Unary", "AA\nA A", "INTERNAL: body: not base64: byte 0x20 at offset 4" },
      { "grpc-web-text", "proto", "/wt.S/Unary", "AA\r\nA", "INTERNAL: body: ended inside a base64 group" },
      { "connect", "json", "/wt.S/Unary", '{"text":1}', "INVALID_ARGUMENT: message 1: " },
    }
    for _, c in ipairs(bad) do
      local list, err = web.requests(c[1], c[2], methods[c[3]], c[4])
      assert.is_nil(list)
      assert.are.equal(c[5], tostring(err):sub(1, #c[5]), c[5])
    end
    local _, err = web.requests("connect", "proto", methods["/wt.S/Unary"], "x", "gzip")
    assert.are.equal("UNIMPLEMENTED: Content-Encoding gzip is not supported by this gateway", tostring(err))
  end)

  it("writes gRPC-Web answers: frames, the 0x80 trailers frame with the status and details, -text in base64", function()
    local m = methods["/wt.S/Down"]
    local Rep = pool:type("wt.Rep")
    local a = web.answer("grpc-web", "proto", m)
    local status, headers = a:head({ { "x-head", "1" }, { "x-b-bin", "\0\1" }, { "grpc-encoding", "gzip" } })
    assert.are.equal(200, status)
    assert.are.same({ { "Content-Type", "application/grpc-web+proto" }, { "x-head", "1" }, { "x-b-bin", "AAE=" } },
      headers)
    local bytes = pc.encode(Rep { text = "yo" })
    assert.are.equal(frame(0, bytes), a:message(bytes))
    assert.are.equal(frame(128, "grpc-status:0\r\nx-t:v\r\n"), a:finish(nil, { { "x-t", "v" } }))
    local err = pc.Error { code = "NOT_FOUND", message = "gone away", details_bin = "\8\5",
      metadata = { { "grpc-status-details-bin", "\8\5" }, { "x-t", "v" } } }
    assert.are.equal(frame(128, "grpc-status:5\r\ngrpc-message:gone away\r\ngrpc-status-details-bin:CAU\r\nx-t:v\r\n"),
      a:finish(err))
    local j = web.answer("grpc-web", "json", m)
    assert.are.equal(frame(0, '{"text":"yo"}'), j:message(bytes))
    local t = web.answer("grpc-web-text", "proto", m)
    assert.are.equal(select(2, t:head())[1][2], "application/grpc-web-text+proto")
    local status2, h2, body = t:failure(pc.Error { code = "INTERNAL", message = "x" })
    assert.are.equal(200, status2)
    assert.are.same({ { "Content-Type", "application/grpc-web-text+proto" } }, h2)
    assert.are.equal(b64(frame(128, "grpc-status:13\r\ngrpc-message:x\r\n")), body)
    local _, _, raised = a:failure("boom")
    assert.are.equal(frame(128, "grpc-status:13\r\ngrpc-message:boom\r\n"), raised)
  end)

  it("writes Connect answers: unary with trailer- headers, its error JSON and status, the end-of-stream", function()
    local Rep = pool:type("wt.Rep")
    local bytes = pc.encode(Rep { text = "yo" })
    local a = web.answer("connect", "json", methods["/wt.S/Unary"])
    local status, headers, body = a:unary(bytes, { { "x-h", "1" } }, { { "x-t", "2" } })
    assert.are.equal(200, status)
    assert.are.same({ { "Content-Type", "application/json" }, { "x-h", "1" }, { "trailer-x-t", "2" } }, headers)
    assert.are.equal('{"text":"yo"}', body)
    status, headers, body = a:failure(pc.Error { code = "PERMISSION_DENIED", message = "no",
      metadata = { { "x-t", "2" } } })
    assert.are.equal(403, status)
    assert.are.same({ { "Content-Type", "application/json" }, { "trailer-x-t", "2" } }, headers)
    assert.are.equal('{"code":"permission_denied","message":"no"}', body)
    local s = web.answer("connect-stream", "proto", methods["/wt.S/Down"])
    assert.are.equal("application/connect+proto", select(2, s:head())[1][2])
    assert.are.equal(frame(0, bytes), s:message(bytes))
    assert.are.equal(frame(2, '{"metadata":{"x-t":["2"]}}'), s:finish(nil, { { "x-t", "2" } }))
    assert.are.equal(frame(2, '{"error":{"code":"unavailable","message":"down"}}'),
      s:finish(pc.Error { code = "UNAVAILABLE", message = "down" }))
    assert.are.equal(frame(0, bytes) .. frame(2, "{}"), s:body({ bytes }))
  end)

  it("upstream_failure: the gateway's own failure as its class, without the upstream's address", function()
    local f = web.upstream_failure
    local function E(t) return f(pc.Error(t)) end
    assert.are.equal("upstream connect error: connection refused",
      E { code = "UNAVAILABLE", unsent = true, message = "connect to 10.0.0.5:50051: Connection refused" })
    -- the backoff hint's timing kept, its advice as true for a gateway (which sets no wait_for_ready)
    assert.are.equal("upstream connect error: connection refused (reconnection backoff: the next attempt in 0.97 s; "
      .. "calls fail at once until then)", E { code = "UNAVAILABLE", unsent = true,
        message = "connect to 10.0.0.5:50051: Connection refused (reconnection backoff: the next attempt in 0.97 s; "
          .. "a transport with wait_for_ready waits for it)" })
    assert.are.equal("upstream connect error: name not resolved", E { code = "UNAVAILABLE", unsent = true,
      message = "resolve backend.internal: Name or service not known" })
    -- the whole message, as nginx's gateway logs it: the same advice replaced, nothing else
    assert.are.equal("connect to 10.0.0.5:50051: Connection refused (reconnection backoff: the next attempt in "
      .. "0.97 s; calls fail at once until then)", web.gateway_words("connect to 10.0.0.5:50051: Connection "
        .. "refused (reconnection backoff: the next attempt in 0.97 s; a transport with wait_for_ready waits for it)"))
    assert.are.equal("connect to 10.0.0.5:50051: Connection refused",
      web.gateway_words("connect to 10.0.0.5:50051: Connection refused"))
    -- nginx's cosocket without a `resolver`, or its resolver failing (a DNS server's refusal inside)
    assert.are.equal("upstream connect error: name not resolved", E { code = "UNAVAILABLE", unsent = true,
      message = 'connect to localhost:50071: no resolver defined to resolve "localhost"' })
    assert.are.equal("upstream connect error: name not resolved", E { code = "UNAVAILABLE", unsent = true,
      message = "connect to backend.internal:50051: backend.internal could not be resolved (111: Connection refused)" })
    -- a dns:/// name the balancer could not resolve (no `unsent`)
    assert.are.equal("upstream connect error: name not resolved", E { code = "UNAVAILABLE",
      message = "resolve backend.internal: Name or service not known" })
    assert.are.equal("upstream connect error: TLS handshake failed", E { code = "UNAVAILABLE", unsent = true,
      message = "TLS handshake with backend.internal:443: connection closed (is it a TLS port?)" })
    assert.are.equal("upstream connect error: connection timed out", E { code = "UNAVAILABLE", unsent = true,
      message = "connect to 10.0.0.5:50051: timed out after 20 s" })
    -- a unix: socket that is not there: named as the cause, as "connection refused" is
    assert.are.equal("upstream connect error: no such socket file", E { code = "UNAVAILABLE", unsent = true,
      message = "connect to unix:/run/missing.sock: No such file or directory" })
    assert.are.equal("upstream connect error: connection refused", E { code = "UNAVAILABLE", unsent = true,
      message = "connect to unix:/run/refused.sock: Connection refused" })
    -- written, then the connection failed: the attempt's own failure, or lost
    assert.are.equal("upstream connect error: no HTTP/2 from the upstream", E { code = "UNAVAILABLE", lost = true,
      message = "connect to 10.0.0.5:50051: no HTTP/2 SETTINGS from the server within 20 s" })
    assert.are.equal("upstream connection lost", E { code = "UNAVAILABLE", lost = true,
      message = "read from 10.0.0.5:50051: Connection reset by peer" })
    assert.are.equal("upstream timed out: no connection before the deadline", E { code = "DEADLINE_EXCEEDED",
      message = "deadline exceeded (connected to 10.0.0.5:50051, no HTTP/2 SETTINGS from the server yet)" })
    assert.are.equal("upstream timed out: no connection before the deadline", E { code = "DEADLINE_EXCEEDED",
      message = "deadline exceeded waiting for a connection (connecting to 10.0.0.5:50051)" })
    -- the balancer's own failure on a closing channel (no flag)
    assert.are.equal("upstream connect error: connection failure", E { code = "UNAVAILABLE",
      message = "connect to 10.0.0.5:50051: the channel is closed" })
    -- what the upstream sent (peer) passes unchanged (nil), whatever its text says
    assert.is_nil(E { code = "UNAVAILABLE", peer = true, message = "connect to 10.0.0.5:50051: Connection refused" })
    assert.is_nil(E { code = "UNAVAILABLE", peer = true, message = "resolve x: y" })
    assert.is_nil(E { code = "DEADLINE_EXCEEDED", peer = true,
      message = "deadline exceeded waiting for a connection (connecting to 10.1.2.3:80)" })
    assert.is_nil(E { code = "DEADLINE_EXCEEDED", message = "deadline exceeded" })
    assert.is_nil(E { code = "INTERNAL", lost = true, message = "connect to 10.0.0.5:1: x" })
    assert.is_nil(f("connect to 10.0.0.5:1: Connection refused"))
  end)
end)
