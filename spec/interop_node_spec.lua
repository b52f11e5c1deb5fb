-- protocall against implementations that are not its own, from npm
-- (package.json, spec/node_peer.lua): pc.listen serving demo.Router
-- (examples/route.proto, the handlers of examples/route_services.lua) to
-- @connectrpc/connect-node's gRPC, Connect and gRPC-Web transports over
-- HTTP/2 (binary and JSON, with and without gzip: every call shape, errors
-- with details, deadlines, headers and trailers), to @grpc/grpc-js and to
-- `buf curl` (with reflection; gRPC, Connect and gRPC-Web); and
-- protocall's client (pc.grpc) calling a @grpc/grpc-js server, a
-- connect-node server (connectNodeAdapter on node:http2, spec/node/
-- connect_server.mjs) over gRPC, gRPC-Web and Connect, and pc.listen over
-- gRPC-Web and Connect (every call shape, retry and hedging policies,
-- details, deadlines, metadata, gzip). The node scripts are in spec/node/;
-- peer.mjs there says what each case sends.
local pc = require "protocall"
local peer = require "node_peer"

local absent = peer.missing("@connectrpc/connect-node", "@connectrpc/connect", "@bufbuild/protobuf",
  "@grpc/grpc-js", "buf")
if absent then
  describe("protocall with node peers", function()
    it("runs against @connectrpc/connect-node, @grpc/grpc-js and buf", function()
      peer.skip(pending, "interop with node peers", absent)
    end)
  end)
  return
end

if not pc.type("demo.Route") then
  assert(pc.load_file("route.proto", { import_paths = { "examples" } }))
end
local ErrorInfo = pc.type("google.rpc.ErrorInfo")

-- The FileDescriptorSet the node scripts read: route.proto and the
-- google.rpc status and error details (protocall's built-in files).
local SET

local seen = {}

-- demo.Router: examples/route_services.lua's handlers (a fresh copy for
-- each server: its Measure fails twice per route name, then answers), and
-- three route names Measure answers its own way:
--   "details": INVALID_ARGUMENT with a google.rpc.ErrorInfo;
--   "sleep":   waits until the call is cancelled (its deadline passed);
--   "meta":    header x-head "hi <x-user>", trailers x-trail "t1" and
--              x-echo-bin (the request's x-raw-bin);
--   "gzip":    gzips its response (when the client accepts gzip) and
--              records whether the request came gzipped.
-- spec/node/grpcjs_server.mjs serves the same.
local function router()
  local route = dofile("examples/route_services.lua")["demo.Router"]
  local measure = route.Measure
  route.Measure = function(r, ctx)
    if r.name == "details" then
      error(pc.Error { code = "INVALID_ARGUMENT", message = "too far: 100% ✓",
        details = { ErrorInfo { reason = "TOO_FAR", domain = "demo", metadata = { limit = "10" } } } })
    elseif r.name == "sleep" then
      while not ctx:cancelled() do pc.sleep(0.01) end
      seen.cancelled = true
      return {}
    elseif r.name == "gzip" then
      seen.compressed = ctx:compressed()
      seen.gzip = ctx:set_compression("gzip")
      return measure(r, ctx)
    elseif r.name == "meta" then
      local md = {}
      for _, kv in ipairs(ctx.metadata) do md[kv[1]] = kv[2] end
      seen.metadata = md
      ctx:set_header("x-head", "hi " .. tostring(md["x-user"]))
      ctx:set_trailer("x-trail", "t1")
      ctx:set_trailer("x-echo-bin", md["x-raw-bin"] or "")
      return { length = 1 }
    end
    return measure(r, ctx)
  end
  return pc.server({ ["demo.Router"] = route }, { reflection = true })
end

-- Serves a fresh router() on pc.listen while fn(port) runs as a task
-- beside it (the peer runs through peer.run, which lets the listener
-- serve); errors of fn are raised.
local function serving(fn)
  local l = pc.listen(router(), "127.0.0.1:0")
  local err
  pc.spawn(function() l:serve() end)
  pc.spawn(function()
    local ok, e = pcall(fn, l.port)
    if not ok then err = e end
    l:shutdown(1)
  end)
  pc.run()
  if err then error(err, 0) end
end

local function lines(...) return table.concat({ ... }, "\n") .. "\n" end

-- What every client case prints (spec/node/peer.mjs sends the requests).
local EXPECTED = {
  unary = lines("error UNAVAILABLE flaky server", "error UNAVAILABLE flaky server", "measure 5 1"),
  server_stream = lines("point 1 2", "point 3 4", "point 5 6", "end"),
  client_stream = lines("record 10 2"),
  bidi = lines("leg 3 4", "leg 0 4", "end"),
  details = lines("error INVALID_ARGUMENT too far: 100% ✓", "detail ErrorInfo TOO_FAR demo limit=10"),
  deadline = lines("error DEADLINE_EXCEEDED"),
  metadata = lines("header x-head hi ann", "trailer x-trail t1", "trailer x-echo-bin 000102ff", "measure 1 0"),
  gzip = lines("error UNAVAILABLE flaky server", "error UNAVAILABLE flaky server", "measure 5 1"),
}
local CASES = { "unary", "server_stream", "client_stream", "bidi", "details", "deadline", "metadata" }

setup(function()
  SET = peer.descriptor_set({ "route.proto", "google/rpc/status.proto", "google/rpc/error_details.proto" },
    { "examples", "core/schema/protos" })
end)
teardown(function() os.remove(SET) end)

-- The cases of one client script against pc.listen, one test each
-- (`transport`: connect_client.mjs's TRANSPORT argument; "gzip" in it
-- adds the gzip case).
local function client_cases(script, transport, only)
  local cases = {}
  for i, case in ipairs(only or CASES) do cases[i] = case end
  if transport and transport:find("gzip") then cases[#cases + 1] = "gzip" end
  for _, case in ipairs(cases) do
    it(case:gsub("_", " "), function()
      seen.cancelled, seen.metadata, seen.compressed, seen.gzip = nil, nil, nil, nil
      serving(function(port)
        local args = transport and { SET, port, transport, case } or { SET, port, case }
        assert.are.equal(EXPECTED[case], peer.run(script, args))
        if case == "deadline" then
          for _ = 1, 200 do
            if seen.cancelled then break end
            pc.sleep(0.01)
          end
          assert.is_true(seen.cancelled, "the handler saw the cancellation")
        elseif case == "metadata" then
          assert.are.equal("ann", seen.metadata["x-user"])
          assert.are.equal("\0\1\2\255", seen.metadata["x-raw-bin"])
        elseif case == "gzip" then
          assert.is_true(seen.compressed, "the request came gzipped")
          assert.is_true(seen.gzip, "the response went gzipped")
        end
      end)
    end)
  end
end

describe("pc.listen with @connectrpc/connect-node's gRPC transport (HTTP/2)", function()
  client_cases("connect_client.mjs", "grpc")
end)

-- application/grpc+json (createGrpcTransport({useBinaryFormat: false})):
-- the same handlers with the JSON codec, as connect-go serves it.
describe("pc.listen with @connectrpc/connect-node's gRPC transport with JSON (HTTP/2)", function()
  client_cases("connect_client.mjs", "grpc,json")
end)

-- The same handlers on the same port over the web's protocols.
for _, transport in ipairs { "connect", "connect,json", "connect,gzip", "connect,json,gzip",
  "grpc-web", "grpc-web,json", "grpc-web,gzip" } do
  describe("pc.listen with @connectrpc/connect-node's " .. transport .. " transport (HTTP/2)", function()
    client_cases("connect_client.mjs", transport)
  end)
end

-- The same over HTTP/1.1 (connect-node's httpVersion "1.1"): unary and
-- server streaming, the shapes HTTP/1.1 carries (as connect-go); a client
-- stream goes too (the request whole, then the response).
local H1_CASES = { "unary", "server_stream", "client_stream", "details", "deadline", "metadata" }
for _, transport in ipairs { "connect,h1", "connect,json,h1", "connect,gzip,h1", "grpc-web,h1",
  "grpc-web,json,h1", "grpc-web,gzip,h1" } do
  describe("pc.listen with @connectrpc/connect-node's " .. transport .. " transport (HTTP/1.1)", function()
    client_cases("connect_client.mjs", transport, H1_CASES)
  end)
end

-- The npm grpc-web package's client (GrpcWebClientBase, what browsers
-- run) under Node.js, over HTTP/1.1 through the XMLHttpRequest the script
-- gives it (spec/node/grpcweb_client.mjs): text and binary formats.
local GRPCWEB_CASES = { "unary", "server_stream", "details", "deadline", "metadata" }
for _, format in ipairs { "text", "binary" } do
  describe("pc.listen with the grpc-web package's client, " .. format .. " format (HTTP/1.1)", function()
    local missing = peer.missing("grpc-web")
    if missing then
      it("runs", function() peer.skip(pending, "grpc-web's client", missing) end)
      return
    end
    client_cases("grpcweb_client.mjs", format, GRPCWEB_CASES)
  end)
end

describe("pc.listen with @grpc/grpc-js", function()
  client_cases("grpcjs_client.mjs")
end)

describe("pc.listen with buf curl (@bufbuild/buf), the schema from reflection", function()
  local BUF = peer.bin("buf") .. " curl --http2-prior-knowledge --protocol "

  -- buf curl's standard output and error and exit code (8 times the
  -- status code of a failed call) against the router at `port`, over
  -- `protocol` ("grpc", "grpcweb", "connect"; default gRPC).
  local function curl(port, args, protocol)
    return peer.command(BUF .. (protocol or "grpc") .. " " .. args:gsub("URL", "http://127.0.0.1:" .. port))
  end

  it("lists the services and the methods", function()
    serving(function(port)
      local out, err, code = curl(port, "--list-services URL")
      assert.are.equal(0, code, err)
      assert.are.equal(lines("demo.Router", "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection"), out)
      out, err, code = curl(port, "--list-methods URL")
      assert.are.equal(0, code, err)
      assert.are.equal(lines("demo.Router/Follow", "demo.Router/Measure", "demo.Router/Record", "demo.Router/Walk",
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"), out)
    end)
  end)

  for _, protocol in ipairs { "grpc", "connect", "grpcweb" } do
    it("calls each call shape over " .. protocol, function()
      serving(function(port)
        local route = [['{"name": "b", "points": [{}, {"x": 3, "y": 4}]}' URL/demo.Router/Measure]]
        for _ = 1, 2 do
          local out, err, code = curl(port, "-d " .. route, protocol)
          assert.are.equal("", out)
          assert.are.equal(14 * 8, code, err)
          assert.are.equal('{\n   "code": "unavailable",\n   "message": "flaky server"\n}\n', err)
        end
        local out, err, code = curl(port, "-d " .. route, protocol)
        assert.are.equal(0, code, err)
        assert.are.equal('{\n  "length": 5,\n  "legs": 1\n}\n', out)
        out, err, code = curl(port, [[-d '{"points": [{"x": 1}, {"y": 2}]}' URL/demo.Router/Walk]], protocol)
        assert.are.equal(0, code, err)
        assert.are.equal('{\n  "x": 1\n}\n{\n  "y": 2\n}\n', out)
        out, err, code = curl(port, [[-d '{"x": 0} {"x": 3, "y": 4} {"x": 6, "y": 8}' URL/demo.Router/Record]],
          protocol)
        assert.are.equal(0, code, err)
        assert.are.equal('{\n  "length": 10,\n  "legs": 2\n}\n', out)
        out, err, code = curl(port,
          [[-d '{"x": 1, "y": 1} {"x": 4, "y": 5} {"x": 4, "y": 9}' URL/demo.Router/Follow]], protocol)
        assert.are.equal(0, code, err)
        assert.are.equal('{\n  "x": 3,\n  "y": 4\n}\n{\n  "y": 4\n}\n', out)
      end)
    end)
  end

  for _, protocol in ipairs { "grpc", "connect", "grpcweb" } do
    it("shows an error's code, message and details over " .. protocol, function()
      serving(function(port)
        local out, err, code = curl(port, [[-d '{"name": "details"}' URL/demo.Router/Measure]], protocol)
        assert.are.equal("", out)
        assert.are.equal(3 * 8, code, err)
        -- value: ErrorInfo{reason: "TOO_FAR", domain: "demo", metadata: {limit: "10"}}, base64
        assert.are.equal('{\n   "code": "invalid_argument",\n   "message": "too far: 100% ✓",\n   "details": [\n'
          .. '      {\n         "type": "google.rpc.ErrorInfo",\n'
          .. '         "value": "CgdUT09fRkFSEgRkZW1vGgsKBWxpbWl0EgIxMA"\n      }\n   ]\n}\n', err)
      end)
    end)
  end

  it("sends request headers and shows the response's headers and trailers", function()
    serving(function(port)
      local out, err, code = curl(port, [[-v -H 'x-user: ann' -H 'x-raw-bin: AAEC/w==' -d '{"name": "meta"}' ]]
        .. "URL/demo.Router/Measure")
      assert.are.equal(0, code, err)
      assert.are.equal('{\n  "length": 1\n}\n', out)
      assert.matches("\nbuf: < %(#2%) X%-Head: hi ann\n", err)
      assert.matches("\nbuf: < %(#2%) X%-Echo%-Bin: AAEC/w\n", err)
      assert.matches("\nbuf: < %(#2%) X%-Trail: t1\n", err)
      assert.are.equal("\0\1\2\255", seen.metadata["x-raw-bin"])
    end)
  end)
end)

-- protocall's client (pc.grpc with `protocol`) against a server that is
-- not its own (`script`, spec/node/) or against pc.listen (`script` nil:
-- router() above): every call shape, a retry policy retrying UNAVAILABLE,
-- errors with details, deadlines, metadata both ways, gzip both ways.
-- `over` (optional): {codec = "json" (the transport's codec, the stubs'
-- messages as proto3 JSON), http_version = "1.1", args = the script's
-- arguments after SET, tls = {ca_file =}} (HTTP/1.1: a bidirectional
-- stream is a clear error instead).
local function client_against(title, script, protocol, over)
  over = over or {}
  local codec = over.codec
  describe(title, function()
    -- One server for these tests (each uses route names of its own), or a
    -- pc.listen for each.
    local server, t, stub
    local function options(extra)
      local o = { protocol = protocol, codec = codec, http_version = over.http_version,
        ca_file = over.tls and over.tls.ca_file, server_name = over.tls and "localhost" }
      for k, v in pairs(extra or {}) do o[k] = v end
      return o
    end
    local function connect(url)
      t = pc.grpc(url, options())
      stub = pc.client("demo.Router", { transport = t })
    end
    if script then
      setup(function()
        server = peer.serve(script, { SET, table.unpack(over.args or {}) })
        if over.tls then server.url = server.url:gsub("^http:", "https:") end
      end)
      teardown(function() peer.stop(server) end)
      before_each(function() connect(server.url) end)
      after_each(function() t:close() end)
    end

    -- Runs fn, as a task beside a fresh pc.listen when there is no script.
    local function run(fn)
      if script then return fn() end
      serving(function(port)
        connect("http://127.0.0.1:" .. port)
        local ok, e = pcall(fn)
        t:close()
        if not ok then error(e, 0) end
      end)
    end

    local failure = require("grpc_helper").status_error

    it("unary, with and without a retry policy", function()
      run(function()
        local e = failure(function() return stub:Measure { name = "r" } end)
        assert.are.equal("UNAVAILABLE", e.code)
        assert.are.equal("flaky server", e.message)
        local d = stub:Measure({ name = "q", points = { {}, { x = 3, y = 4 } } },
          { retry = pc.Retry { initial = 0.01 } })
        assert.are.equal(5, d.length)
        assert.are.equal(1, d.legs)
      end)
    end)

    it("unary under a hedging policy: three attempts at once, the flaky server answers one", function()
      run(function()
        local sc = { methodConfig = { { name = { { service = "demo.Router" } }, hedgingPolicy = {
          maxAttempts = 3, hedgingDelay = "0s", nonFatalStatusCodes = { "UNAVAILABLE" } } } } }
        local hedged = pc.client("demo.Router", { transport = t, service_config = sc })
        local d = hedged:Measure { name = "h", points = { {}, { x = 3, y = 4 } } }
        assert.are.equal(5, d.length)
      end)
    end)

    it("server streaming", function()
      run(function()
        local got = {}
        for p in stub:Walk { points = { { x = 1, y = 2 }, { x = 3 } } } do got[#got + 1] = p.x .. "," .. p.y end
        assert.are.same({ "1,2", "3,0" }, got)
      end)
    end)

    it("client streaming", function()
      run(function()
        local c = stub:Record()
        for _, p in ipairs { { x = 0 }, { x = 3, y = 4 }, { x = 6, y = 8 } } do c:send(p) end
        local d = c:close_and_recv()
        assert.are.equal(10, d.length)
        assert.are.equal(2, d.legs)
      end)
    end)

    if over.http_version == "1.1" then
      it("bidirectional: reading before close_send is a clear error over HTTP/1.1", function()
        run(function()
          local c = stub:Follow()
          c:send { x = 1, y = 1 }
          local e = failure(function() return c:recv() end)
          assert.are.equal("UNIMPLEMENTED", e.code)
          assert.matches("bidi streams require HTTP/2", e.message, 1, true)
          c:close()
        end)
      end)
    end

    local http2_it = over.http_version == "1.1" and function() end or it
    http2_it("bidirectional, message by message", function()
      run(function()
        local c = stub:Follow()
        c:send { x = 1, y = 1 }
        c:send { x = 4, y = 5 }
        local leg = c:recv()
        assert.are.equal(3, leg.x)
        assert.are.equal(4, leg.y)
        c:send { x = 4, y = 9 }
        leg = c:recv()
        assert.are.equal(0, leg.x)
        assert.are.equal(4, leg.y)
        c:close_send()
        assert.is_nil(c:recv())
      end)
    end)

    it("an error with details", function()
      run(function()
        local e = failure(function() return stub:Measure { name = "details" } end)
        assert.are.equal("INVALID_ARGUMENT", e.code)
        assert.are.equal("too far: 100% ✓", e.message)
        assert.are.equal("google.rpc.ErrorInfo", pc.type_of(e.details[1]).full_name)
        assert.are.equal("TOO_FAR", e.details[1].reason)
        assert.are.equal("demo", e.details[1].domain)
        assert.are.equal("10", e.details[1].metadata.limit)
      end)
    end)

    it("a deadline: the server sees its timeout and the cancellation", function()
      run(function()
        seen.cancelled = nil
        local e = failure(function() return stub:Measure({ name = "sleep" }, { timeout = 0.3 }) end)
        assert.are.equal("DEADLINE_EXCEEDED", e.code)
        if not script then
          for _ = 1, 200 do
            if seen.cancelled then break end
            pc.sleep(0.01)
          end
          assert.is_true(seen.cancelled, "the handler saw the cancellation")
          return
        end
        local d
        for _ = 1, 300 do
          d = stub:Measure { name = "slept" }
          if d.legs > 0 then break end
          pc.sleep(0.01)
        end
        assert.are.equal(1, d.legs)
        -- the seconds left when the handler ran (-1: no timeout came)
        assert.is_true(d.length > 0 and d.length <= 0.3, tostring(d.length))
      end)
    end)

    it("request metadata, response headers and trailers", function()
      run(function()
        local d, md = stub:Measure({ name = "meta" },
          { metadata = { { "x-user", "ann" }, { "x-raw-bin", "\0\1\2\255" } }, with_metadata = true })
        assert.are.equal(1, d.length)
        local h, tr = {}, {}
        for _, kv in ipairs(md.headers) do h[kv[1]] = kv[2] end
        for _, kv in ipairs(md.trailers) do tr[kv[1]] = kv[2] end
        assert.are.equal("hi ann", h["x-head"])
        assert.are.equal("t1", tr["x-trail"])
        assert.are.equal("\0\1\2\255", tr["x-echo-bin"])
      end)
    end)

    if protocol == "connect" or protocol == "grpc-web" then
      it("codec json: the raw transport's requests and responses as JSON text", function()
        run(function()
          local j = pc.grpc(server and server.url or t.target, options { codec = "json" })
          local out = j:unary("/demo.Router/Measure", '{"name": "meta"}', { metadata = { { "x-user", "j" } } })
          assert.are.equal(1, pc.from_json(pc.type("demo.Distance"), out).length)
          assert.matches('"length"%s*:%s*1', out)
          local ok, e = pcall(j.unary, j, "/demo.Router/Measure", '{"name": "details"}')
          assert.is_false(ok)
          assert.are.equal("INVALID_ARGUMENT", e.code)
          assert.are.equal("TOO_FAR", e.details[1].reason)
          j:close()
        end)
      end)
    end

    if script ~= "grpcjs_server.mjs" then
      it("gzip both ways", function()
        run(function()
          seen.compressed = nil
          -- (pc.listen's router() is flaky for "gzip" too: the retry policy)
          local d = stub:Measure({ name = "gzip" }, { compression = "gzip", retry = pc.Retry { initial = 0.01 } })
          if script then
            assert.are.equal(1, d.legs, "the request came gzipped")
          else
            assert.is_true(seen.compressed, "the request came gzipped")
            assert.is_true(seen.gzip, "the response went gzipped")
          end
          local sizes = {}
          for p in stub:Walk({ points = { { x = 1, y = 2 }, { x = 3 } } }, { compression = "gzip" }) do
            sizes[#sizes + 1] = p.x
          end
          assert.are.same({ 1, 3 }, sizes)
        end)
      end)
    end
  end)
end

client_against("pc.grpc calling a @grpc/grpc-js server", "grpcjs_server.mjs")
for _, protocol in ipairs { "grpc", "grpc-web", "connect" } do
  client_against("pc.grpc over " .. protocol .. " calling a connect-node server (connectNodeAdapter, HTTP/2)",
    "connect_server.mjs", protocol)
end
for _, protocol in ipairs { "grpc-web", "connect" } do
  client_against("pc.grpc over " .. protocol .. " calling pc.listen", nil, protocol)
end
-- pc.client's stubs over a transport with codec "json": requests sent as
-- pc.to_json's text, responses read with pc.from_json, every shape.
for _, protocol in ipairs { "grpc-web", "connect" } do
  client_against("pc.client stubs over " .. protocol .. ", codec json, calling a connect-node server",
    "connect_server.mjs", protocol, { codec = "json" })
  client_against("pc.client stubs over " .. protocol .. ", codec json, calling pc.listen", nil, protocol,
    { codec = "json" })
end

-- HTTP/1.1 (pc.grpc's http_version): the same cases but bidirectional
-- streams, against connectNodeAdapter on node:http and node:https (ALPN
-- http/1.1) and against pc.listen.
local tls_dir = os.tmpname()
os.remove(tls_dir)
local cert_ok = os.execute("mkdir " .. tls_dir .. " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 "
  .. "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " .. tls_dir
  .. "/key.pem -out " .. tls_dir .. "/cert.pem 2>/dev/null")
assert(cert_ok, "openssl could not make a test certificate")
teardown(function() os.execute("rm -rf " .. tls_dir) end)
-- (connect-node, as connect-go, has no gRPC-Web-Text: pc.listen has.)
for _, protocol in ipairs { "grpc-web", "grpc-web-text", "connect" } do
  if protocol ~= "grpc-web-text" then
    client_against("pc.grpc over " .. protocol .. " and HTTP/1.1 calling a connect-node server "
      .. "(connectNodeAdapter on node:http)", "connect_server.mjs", protocol,
      { http_version = "1.1", args = { "http1" } })
  end
  client_against("pc.grpc over " .. protocol .. " and HTTP/1.1 calling pc.listen", nil, protocol,
    { http_version = "1.1" })
end
for _, protocol in ipairs { "grpc-web", "connect" } do
  client_against("pc.grpc over " .. protocol .. " and HTTP/1.1 with TLS calling a connect-node server "
    .. "(connectNodeAdapter on node:https, ALPN http/1.1)", "connect_server.mjs", protocol,
    { http_version = "1.1", args = { "https1", tls_dir .. "/cert.pem", tls_dir .. "/key.pem" },
      tls = { ca_file = tls_dir .. "/cert.pem" } })
end
client_against("pc.grpc over grpc-web-text calling pc.listen", nil, "grpc-web-text")
