-- HTTP/JSON transcoding inside nginx (protocall.resty.gateway): Debian's
-- nginx with libnginx-mod-http-lua, as spec/nginx_spec.lua starts it,
-- runs the configuration below (two workers, a prefix under build/nginx/)
-- in front of spec/gateway_upstream.py (python3-grpcio serving gw.Library,
-- spec/fixtures/protos/gateway/library.proto); curl and wrk are the
-- clients. The upstream counts the calls it serves, so a refused request
-- is seen not to reach it. This spec only drives processes, so it runs the
-- same under lua5.4 and luajit; without nginx, the module, the LuaJIT
-- build, curl or wrk it is a visible pending test (a failure when env CI
-- is set).
local helper = require "grpc_helper"
local N = require "nginx_helper"
local peer = require "node_peer"
local R = require "runtime"

local read, write, q = N.read, N.write, N.quote

local absent = N.missing {
  ["/usr/bin/curl"] = "curl", ["/usr/bin/wrk"] = "wrk", ["/usr/bin/protoc"] = "protoc",
}
if absent then
  describe("protocall.resty.gateway inside nginx", function()
    it("runs", function()
      if os.getenv("CI") then error("missing (required when CI is set): " .. absent) end
      pending("nginx gateway spec skipped, missing: " .. absent)
    end)
  end)
  return
end

-- The configuration: route "library" (the annotations of library.proto,
-- set in init_by_lua), route "echo" (gw.Library.Echo by rules given apart,
-- published in the shared dict: versions A and B take turns through
-- /admin/swap?v=A|B, "bad" and "badrule" fail to compile).
local CONF = N.lua_conf(2, [==[
    client_max_body_size 8m;
    client_body_buffer_size 64k;
    # room for a header past the gateway's 64 KiB metadata bound
    large_client_header_buffers 4 128k;
    # wrk's connections stay open for the whole swap test (nginx closes one
    # after 1000 requests by default, and wrk counts a failed reconnect as
    # an error of the run, which is not what the test is about)
    keepalive_requests 1000000;
    lua_shared_dict gateway 1m;

    init_by_lua_block {
        gw = require "protocall.resty.gateway"
        local f = assert(io.open("@ROOT@/spec/fixtures/protos/gateway/library.proto"))
        local lib = f:read("*a")
        f:close()
        assert(gw.configure("library", {
            protos = { ["gateway/library.proto"] = lib }, upstream = "@UPSTREAM@",
            headers = { "authorization", "x-user" }, max_body_bytes = 65536, max_query_bytes = 4096,
            version_header = "X-Gateway-Version", web = true }))
        local renamed = lib:gsub("message EchoReply {\n  string text = 1;", "message EchoReply {\n  string said = 1;")
        EchoConfigs = {
            A = { protos = { ["gateway/library.proto"] = lib }, upstream = "@UPSTREAM@",
                  http = { rules = { { selector = "gw.Library.Echo", get = "/api/echo/{text}" } } },
                  services = { "gw.Library" }, version_header = "X-Gateway-Version" },
            B = { protos = { ["gateway/library.proto"] = renamed }, upstream = "@UPSTREAM@",
                  http = [[{"rules": [{"selector": "gw.Library.Echo", "get": "/echo/{text}",
                                       "responseBody": "said"}]}]],
                  prefix = "/api", services = { "gw.Library" }, version_header = "X-Gateway-Version" },
            bad = { protos = { ["gateway/library.proto"] = lib .. "\nmessage Broken {" }, upstream = "@UPSTREAM@" },
            badrule = { protos = { ["gateway/library.proto"] = lib }, upstream = "@UPSTREAM@",
                        http = { rules = { { selector = "gw.Library.Echo", get = "/echo/{nope}" } } } },
        }
        assert(gw.publish("gateway", "echo", EchoConfigs.A))
        -- a descriptor set (protoc -o --include_imports), served under /set/
        f = assert(io.open("@PREFIX@/library.pb", "rb"))
        assert(gw.configure("set", { descriptor_set = f:read("*a"), upstream = "@UPSTREAM@", prefix = "/set" }))
        f:close()
        -- two files, one importing the other, from a name -> text table
        assert(gw.configure("split", { upstream = "@UPSTREAM@", protos = {
            ["gw/svc.proto"] = [[syntax = "proto3"; package gw;
                import "google/api/annotations.proto";
                import /* the table's */ "gw/types.proto";
                service Library { rpc Echo(EchoRequest) returns (EchoReply) {
                    option (google.api.http) = { get: "/split/echo/{text}" }; } }]],
            ["gw/types.proto"] = [[syntax = "proto3"; package gw;
                message EchoRequest { string text = 1; }
                message EchoReply { string text = 1; uint64 calls = 2; }]] } }))
        -- validate = true with a rule that fails to evaluate for x = 0
        assert(gw.configure("rulefail", { upstream = "@UPSTREAM@", validate = true, protos = {
            ["gwv/v.proto"] = [[syntax = "proto3"; package gwv;
                import "google/api/annotations.proto";
                import "buf/validate/validate.proto";
                message R { int32 x = 1 [(buf.validate.field).cel = {id: "div", expression: "100 / this > 1"}]; }
                service V { rpc Do(R) returns (R) {
                    option (google.api.http) = { post: "/rulefail/do" body: "*" }; } }]] } }))
        -- validate = true on the same schema with rules added (the upstream checks nothing)
        local strict = lib:gsub('import "google/protobuf/any.proto";', '%0\nimport "buf/validate/validate.proto";')
            :gsub("message EchoRequest {\n  string text = 1;",
                  "message EchoRequest {\n  string text = 1 [(buf.validate.field).string.min_len = 2];")
            :gsub("message Book {\n  string name = 1;\n  string title = 2;",
                  "message Book {\n  string name = 1;\n  string title = 2 [(buf.validate.field).string.max_len = 5];")
        assert(gw.configure("strict", { protos = { ["gateway/library.proto"] = strict }, upstream = "@UPSTREAM@",
                                        prefix = "/strict", validate = true, web = true }))
        -- validate = true on the file as it is, which imports no rules: no type a rule reaches
        assert(gw.configure("loose", { protos = { ["gateway/library.proto"] = lib }, upstream = "@UPSTREAM@",
                                       prefix = "/loose", validate = true, web = true }))
        -- an upstream where nothing listens
        assert(gw.configure("down", { protos = { ["gateway/library.proto"] = lib }, upstream = "127.0.0.1:1",
                                      prefix = "/down", web = true }))
        -- an upstream that reads what a connection sends first, then closes it
        assert(gw.configure("hangup", { protos = { ["gateway/library.proto"] = lib }, upstream = "@HANGUP@",
                                        prefix = "/hangup", web = true }))
        -- configurations refused: each "nil" and why
        local function try(cfg)
            local n, err = gw.configure("probe", cfg)
            return tostring(n) .. " " .. tostring(err)
        end
        local lib_only = { ["gateway/library.proto"] = lib }
        ConfigErrors = table.concat({
            try({ upstream = "127.0.0.1:1", protos = { ["a.proto"] = 'syntax = "proto3"; import "b.proto";',
                                                       ["b.proto"] = 'syntax = "proto3"; import "a.proto";' } }),
            try({ upstream = "127.0.0.1:1" }),
            try({ upstream = "127.0.0.1:1", protos = lib_only, colour = "red" }),
            try({ protos = lib_only }),
            try({ upstream = "127.0.0.1:1", protos = lib_only, timeout = -1 }),
            try({ upstream = "127.0.0.1:1", descriptor_set = "\255\255" }),
            try({ upstream = "127.0.0.1:1", protos = lib_only, max_body_bytes = "10" }),
            try({ upstream = "127.0.0.1:1", protos = lib_only, headers = "authorization" }),
            try({ upstream = "127.0.0.1:1", protos = lib_only, timeout = math.huge }),
            try({ upstream = "127.0.0.1:1", protos = lib_only, grpc = "x" }),
            (function()
                local cyclic = { upstream = "127.0.0.1:1", protos = lib_only, grpc = {} }
                cyclic.grpc.again = cyclic
                local n, err = gw.publish("gateway", "probe", cyclic)
                return tostring(n) .. " " .. tostring(err)
            end)(),
            tostring(select(2, gw.publish("gateway", "probe", { upstream = "127.0.0.1:1", protos = lib_only,
                                                                 grpc = { f = print } }))),
        }, "\n")
        -- resty.grpc's refusals, at the caller's line, and a list target's backends
        local pc, resty = require "protocall", require "protocall.resty"
        local function try_grpc(target, opts)
            local ok, err = pcall(function() local t = resty.grpc(pc, target, opts) return t end)
            return tostring(ok) .. " " .. tostring(err)
        end
        local two = resty.grpc(pc, { "127.0.0.1:1", "127.0.0.1:2" })
        GrpcProbe = table.concat({
            try_grpc("dns:///_grpc._tcp.x.test"),
            try_grpc("dns:///x.test:1", { dns_server = "127.0.0.1:53" }),
            try_grpc("dns://127.0.0.1:53/x.test:1"),
            #two:backends() .. " " .. two:backends()[2].address,
        }, "\n")
        two:set_ring_hash({ min_ring_size = 8 }) -- pc.client's ring_hash_experimental reaches it
        GrpcProbe = GrpcProbe .. "\n" .. two:backends()[1].ring_entries
    }

    init_worker_by_lua_block {
        assert(gw.watch("gateway", 0.05))
    }

    server {
        listen 127.0.0.1:@PORT@;

        location /v1/ {
            content_by_lua_block { gw.handle("library") }
        }
        # gRPC-Web and Connect clients of the same route (web = true)
        location /gw.Library/ {
            content_by_lua_block { gw.handle("library") }
        }
        location /gw.Nothing/ {
            content_by_lua_block { gw.handle("library") }
        }
        location /api/ {
            content_by_lua_block { gw.handle("echo", { shared = "gateway" }) }
        }
        location /set/ {
            content_by_lua_block { gw.handle("set") }
        }
        location /split/ {
            content_by_lua_block { gw.handle("split") }
        }
        location = /admin/errors {
            content_by_lua_block { ngx.print(ConfigErrors, "\n", tostring(gw.version("probe"))) }
        }
        location /strict/ {
            content_by_lua_block { gw.handle("strict") }
        }
        location /loose/ {
            content_by_lua_block { gw.handle("loose") }
        }
        location /rulefail/ {
            content_by_lua_block { gw.handle("rulefail") }
        }
        location = /admin/grpc {
            content_by_lua_block { ngx.print(GrpcProbe) }
        }
        location /down/ {
            content_by_lua_block { gw.handle("down") }
        }
        location /hangup/ {
            content_by_lua_block { gw.handle("hangup") }
        }
        location = /echo-local {
            content_by_lua_block { gw.handle("nothing") }
        }
        location = /admin/swap {
            content_by_lua_block {
                local n, err = gw.publish("gateway", "echo", EchoConfigs[ngx.var.arg_v])
                if not n then
                    ngx.status = 500
                    ngx.say(err)
                    return
                end
                ngx.say(n)
            }
        }
    }
]==])

local function start_nginx(upstream, hangup)
  return N.start("gateway", CONF:gsub("@UPSTREAM@", upstream):gsub("@HANGUP@", hangup), function(prefix)
    assert(os.execute("protoc -I spec/fixtures/protos -I core/schema/protos --include_imports -o "
      .. q(prefix .. "/library.pb") .. " gateway/library.proto"))
  end)
end

-- One request through curl: status, body, headers (lowercased name ->
-- value); spec/gateway_cases.lua's, shared with the other placements.
local request = require("gateway_cases").request

local function calls(n)
  local code, body = request(n, "/v1/calls")
  assert.are.equal(200, code, body)
  return tonumber(body:match('"calls":"(%d+)"') or (body == "{}" and 0))
end

describe("protocall.resty.gateway inside nginx", function()
  local upstream, hangup, nginx
  setup(function()
    upstream = helper.spawn_command("/usr/bin/python3 spec/gateway_upstream.py 0", "gateway_upstream.py")
    hangup = helper.spawn("hangup", 0)
    nginx = start_nginx("127.0.0.1:" .. upstream.port, "127.0.0.1:" .. hangup.port)
  end)
  teardown(function()
    N.stop(nginx)
    helper.stop(upstream)
    helper.stop(hangup)
  end)

  it("GET with path variables and query parameters (repeated, enum by name, int64)", function()
    local code, body, h = request(nginx, "/v1/shelves/1/books/2?view=full&tags=a&tags=b&kind=NOVEL&pages=12")
    assert.are.equal(200, code, body)
    assert.are.equal('{"name":"shelves/1/books/2","title":"title of shelves/1/books/2 (full)","pages":"12",'
      .. '"tags":["a","b"],"kind":"NOVEL"}', body)
    assert.are.equal("application/json", h["content-type"])
    assert.are.equal("1", h["x-gateway-version"])
  end)

  it("an additional binding with response_body answers that field alone", function()
    local code, body = request(nginx, "/v1/shelves/1/books/2/title")
    assert.are.equal(200, code, body)
    assert.are.equal('"title of shelves/1/books/2"', body)
  end)

  it("POST with body \"field\" and a query parameter", function()
    local code, body = request(nginx, "/v1/shelves/7/books?request_id=r1",
      { body = '{"title":"T","pages":3,"kind":"ESSAY"}', headers = { "Content-Type: application/json" } })
    assert.are.equal(200, code, body)
    assert.are.equal('{"name":"shelves/7/books/r1","title":"T","pages":"3","kind":"ESSAY"}', body)
  end)

  it("PATCH with body \"*\" and the path variable winning over the body", function()
    local code, body = request(nginx, "/v1/shelves/1/books/9",
      { method = "PATCH", body = '{"name":"elsewhere","title":"x","tags":["q"]}' })
    assert.are.equal(200, code, body)
    assert.are.equal('{"name":"shelves/1/books/9","title":"x","tags":["q"]}', body)
  end)

  it("a server stream as newline-delimited JSON, and its failure after the messages as an error line", function()
    local code, body = request(nginx, "/v1/shelves/3/books:stream?count=3")
    assert.are.equal(200, code, body)
    assert.are.equal('{"result":{"name":"shelves/3/books/1","pages":"1"}}\n'
      .. '{"result":{"name":"shelves/3/books/2","pages":"2"}}\n'
      .. '{"result":{"name":"shelves/3/books/3","pages":"3"}}\n', body)
    code, body = request(nginx, "/v1/shelves/3/books:stream?count=1&fail=ABORTED")
    assert.are.equal(200, code, body)
    assert.are.equal('{"result":{"name":"shelves/3/books/1","pages":"1"}}\n'
      .. '{"error":{"code":10,"message":"stream failed after 1","details":[]}}\n', body)
  end)

  it("a server stream as text/event-stream when Accept asks for it; one failing at once gets its status", function()
    local code, body, h = request(nginx, "/v1/shelves/3/books:stream?count=2",
      { headers = { "Accept: text/event-stream" } })
    assert.are.equal(200, code, body)
    assert.are.equal("text/event-stream", h["content-type"])
    assert.are.equal('data: {"name":"shelves/3/books/1","pages":"1"}\n\n'
      .. 'data: {"name":"shelves/3/books/2","pages":"2"}\n\n', body)
    code, body = request(nginx, "/v1/shelves/3/books:stream?count=0&fail=UNAUTHENTICATED")
    assert.are.equal(401, code, body)
    assert.are.equal('{"code":16,"message":"stream failed after 0","details":[]}', body)
  end)

  it("a server stream is flushed message by message", function()
    -- 40 messages 10 ms apart: the first line arrives well before the last
    local out = R.capture("curl -sN -m 20 " .. q(nginx.url .. "/v1/shelves/3/books:stream?count=40")
      .. " | while IFS= read -r line; do date +%s.%N; done")
    local times = {}
    for t in out:gmatch("[%d.]+") do times[#times + 1] = tonumber(t) end
    assert.are.equal(40, #times)
    assert.is_true(times[40] - times[1] > 0.2, ("first to last line: %.3f s"):format(times[40] - times[1]))
  end)

  it("Grpc-Timeout is the call's deadline: a stream outliving it ends with a DEADLINE_EXCEEDED line", function()
    local code, body = request(nginx, "/v1/shelves/3/books:stream?count=100", { headers = { "Grpc-Timeout: 300m" } })
    assert.are.equal(200, code, body)
    local lines = {}
    for line in body:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.is_true(#lines > 2 and #lines < 100, body)
    assert.are.equal('{"result":{"name":"shelves/3/books/1","pages":"1"}}', lines[1])
    assert.truthy(lines[#lines]:find('^{"error":{"code":4,"message":".*","details":%[%]}}$'), lines[#lines])
  end)

  it("a deadline of microseconds is answered 504 at once, not after the driver's one-second round", function()
    -- each deadline passing between the call's start and its first wait
    -- round (tens of microseconds), which waited a whole second for a
    -- wake that never came (transport/driver.lua's tick_news); one curl
    -- for all, so its start-up is paid once
    local urls = {}
    for _ = 1, 4 do
      for _, us in ipairs { 10, 15, 20, 25, 30, 40, 50, 70 } do
        urls[#urls + 1] = "-s -m 20 -o /dev/null -w '%{http_code} %{time_total}\\n' -H "
          .. q("Grpc-Timeout: " .. us .. "u") .. " " .. q(nginx.url .. "/v1/shelves/1/books/2")
      end
    end
    local out = R.capture("curl " .. table.concat(urls, " --next "))
    local n = 0
    for code, secs in out:gmatch("(%d+) ([%d.]+)") do
      n = n + 1
      -- a deadline this short may still see the answer first (200)
      assert.is_true(code == "504" or code == "200", out)
      -- the round is 1 s: well under it, with room for a loaded machine
      assert.is_true(tonumber(secs) < 0.9, "answered after " .. secs .. " s:\n" .. out)
    end
    assert.are.equal(#urls, n, out)
  end)

  it("an upstream that cannot be reached is 503 UNAVAILABLE as google.rpc.Status, its address in the log only",
    function()
    local code, body, h = request(nginx, "/down/v1/calls")
    assert.are.equal(503, code, body)
    assert.are.equal("application/json", h["content-type"])
    -- the failure's class (and the backoff's timing, a call within it), not the address
    assert.truthy(body:find('^{"code":14,"message":"upstream connect error: connection refused[^"]*",'
      .. '"details":%[%]}$'), body)
    local answers = { body }
    -- a server stream (REST), Connect unary, gRPC-Web unary and stream: the same
    code, body = request(nginx, "/down/v1/shelves/1/books:stream")
    assert.are.equal(503, code, body)
    answers[#answers + 1] = body
    code, body = request(nginx, "/down/gw.Library/Echo",
      { body = "{}", headers = { "Content-Type: application/json" } })
    assert.are.equal(503, code, body)
    assert.truthy(body:find('^{"code":"unavailable","message":"upstream connect error: connection refused'), body)
    answers[#answers + 1] = body
    local framed = "\0\0\0\0\2{}"
    for _, method in ipairs { "Echo", "ListBooks" } do
      local hs
      code, body, hs = request(nginx, "/down/gw.Library/" .. method,
        { body = framed, headers = { "Content-Type: application/grpc-web+json" } })
      assert.are.equal(200, code, body)
      local status = hs["grpc-message"] or body
      assert.truthy(status:find("upstream connect error: connection refused", 1, true), method .. ": " .. status)
      answers[#answers + 1] = status
    end
    for _, answer in ipairs(answers) do assert.is_nil(answer:find("127.0.0.1", 1, true), answer) end
    -- nginx's error log has the whole message, the address in it
    local log = read(nginx.prefix .. "/logs/error.log") or ""
    local said = "protocall.resty.gateway: down: upstream call failed: UNAVAILABLE: connect to 127.0.0.1:1: "
    assert.truthy(log:find(said, 1, true), log:sub(-4000))
    -- the calls after the first met the channel's reconnection backoff: its
    -- timing is logged, not its advice for pc.grpc's wait_for_ready, an
    -- option no route sets
    assert.truthy(log:find(said .. "[^\n]*%(reconnection backoff: the next attempt in [%d.]+ s; "
      .. "calls fail at once until then%)"), log:sub(-4000))
    assert.is_nil(log:find("wait_for_ready", 1, true), log:sub(-4000))
  end)

  it("an upstream connection lost under the call: 503 'upstream connection lost', its address in the log only",
    function()
    local code, body = request(nginx, "/hangup/v1/calls")
    assert.are.equal(503, code, body)
    assert.are.equal('{"code":14,"message":"upstream connection lost","details":[]}', body)
    local hs
    code, body, hs = request(nginx, "/hangup/gw.Library/ListBooks",
      { body = "\0\0\0\0\2{}", headers = { "Content-Type: application/grpc-web+json" } })
    assert.are.equal(200, code, body)
    local status = hs["grpc-message"] or body
    assert.truthy(status:find("upstream connection lost", 1, true), status)
    assert.is_nil(status:find("127.0.0.1", 1, true), status)
    local log = read(nginx.prefix .. "/logs/error.log") or ""
    assert.truthy(log:find("protocall%.resty%.gateway: hangup: upstream call failed: UNAVAILABLE: [^\n]*127%.0%.0%.1:"
      .. hangup.port), log:sub(-4000))
  end)

  it("a client stream from a newline-delimited JSON body", function()
    local code, body = request(nginx, "/v1/books:batchCreate",
      { body = '{"title":"a"}\n\n{"title":"b"}\n{"title":"c"}\n' })
    assert.are.equal(200, code, body)
    assert.are.equal('{"calls":"3"}', body)
  end)

  it("errors as google.rpc.Status JSON with the mapped status, details and trailers", function()
    local code, body, h = request(nginx, "/v1/fail/NOT_FOUND?reason=gone")
    assert.are.equal(404, code, body)
    assert.are.equal('{"code":5,"message":"failed with NOT_FOUND","details":[{"@type":"type.googleapis.com/gw.Detail",'
      .. '"reason":"gone","domain":"gw.example"}]}', body)
    assert.are.equal("application/json", h["content-type"])
    assert.are.equal("NOT_FOUND", h["grpc-trailer-x-failed"])
    for name, status in pairs { PERMISSION_DENIED = 403, RESOURCE_EXHAUSTED = 429, UNAVAILABLE = 503,
      DEADLINE_EXCEEDED = 504, ALREADY_EXISTS = 409, UNIMPLEMENTED = 501 } do
      code, body = request(nginx, "/v1/fail/" .. name)
      assert.are.equal(status, code, name .. ": " .. body)
      assert.truthy(body:find('"message":"failed with ' .. name .. '"', 1, true), body)
    end
  end)

  it("chosen headers and Grpc-Metadata-* become metadata; response metadata comes back as headers", function()
    local code, body, h = request(nginx, "/v1/headers", { headers = {
      "Authorization: Bearer t", "Grpc-Metadata-X-Trace: abc", "X-User: u", "X-Other: no" } })
    assert.are.equal(200, code, body)
    local md = {}
    for k, v in body:gmatch('"([%w-]+)":"([^"]*)"') do md[k] = v end
    assert.are.same({ authorization = "Bearer t", ["x-trace"] = "abc", ["x-user"] = "u" }, md)
    assert.are.equal("yes", h["grpc-metadata-x-answer"])
    assert.are.equal("1", h["grpc-trailer-x-done"])
  end)

  it("no route is 404 and a method not served is 405 with Allow (RFC 9110), as google.rpc.Status", function()
    local code, body = request(nginx, "/v1/nowhere")
    assert.are.equal(404, code, body)
    assert.are.equal('{"code":5,"message":"no route for GET /v1/nowhere","details":[]}', body)
    local headers
    code, body, headers = request(nginx, "/v1/calls", { method = "DELETE" })
    assert.are.equal(405, code, body)
    assert.are.equal("GET", headers.allow)
    assert.truthy(body:find('^{"code":12,"message":"method DELETE not allowed'), body)
    for _ = 1, 4 do
      code, body = request(nginx, "/echo-local")
      assert.are.equal(503, code, body)
      assert.are.equal('{"code":14,"message":"no configuration for gateway route \'nothing\'","details":[]}', body)
    end
    -- the error log says it once a worker, naming the worker's routes (a
    -- misspelled name is found there)
    local log, said = read(nginx.prefix .. "/logs/error.log") or "", 0
    for line in log:gmatch("[^\n]+") do
      if line:find("handle: no configuration for gateway route 'nothing'", 1, true) then
        said = said + 1
        assert.truthy(line:find("; this worker's routes: [^;]*'library'"), line)
      end
    end
    assert.is_true(said >= 1 and said <= 2, log:sub(-4000))
  end)

  it("hostile input gets a 4xx google.rpc.Status and never reaches the upstream", function()
    local before = calls(nginx)
    local cases = {
      { 400, "/v1/shelves/7/books", { body = '{"title": "T",' }, "body: " },
      { 400, "/v1/shelves/7/books", { body = '{"pages": "many"}' }, "body: $.pages" },
      { 400, "/v1/shelves/7/books", { body = '{"nope": 1}' }, "body: " },
      { 400, "/v1/shelves/%2e%2e/books/x", {}, "" },
      { 400, "/v1/shelves/1/books/..?view=x", {}, "" },
      { 400, "/v1/shelves/1/books/2?pages=ten", {}, "query parameter 'pages'" },
      { 400, "/v1/shelves/1/books/2?nope=1", {}, "query parameter 'nope'" },
      { 400, "/v1/shelves/1/books/2?view=" .. string.rep("a", 5000), {}, "" },
      { 400, "/v1/books:batchCreate", { body = '{"title":"a"}{"title":"b"}' }, "line 1: body: " },
      { 400, "/v1/headers", { headers = { "Grpc-Timeout: soon" } }, "bad Grpc-Timeout" },
      { 400, "/v1/headers", { headers = { "Grpc-Timeout: 1S", "Grpc-Timeout: 2S" } }, "Grpc-Timeout given more" },
      { 400, "/v1/headers", { headers = { "Grpc-Metadata-X-A: \195\169" } },
        "header 'Grpc-Metadata-X-A': value must be printable ASCII" },
      { 400, "/v1/headers", { headers = { "X-User: a\127" } }, "header 'X-User': value must be printable ASCII" },
      { 400, "/v1/headers", { headers = { "Grpc-Metadata-X-A: " .. string.rep("a", 70000) } },
        "header 'Grpc-Metadata-X-A': metadata: more than 65536 bytes" },
      { 400, "/v1/headers", { headers = { "Grpc-Metadata--bin: AA" } }, "header 'Grpc-Metadata--bin': not a gRPC" },
      { 413, "/v1/shelves/7/books", { body = string.rep("x", 70000) }, "body of 70000 bytes" },
      { 413, "/v1/shelves/7/books", { body = string.rep("x", 70000), headers = { "Transfer-Encoding: chunked" } },
        "body of more than 65536 bytes\"" },
    }
    for _, c in ipairs(cases) do
      local code, body, h = request(nginx, c[2], c[3])
      assert.are.equal(c[1], code, c[2] .. " " .. table.concat(c[3].headers or {}, ", "):sub(1, 80) .. ": " .. body)
      assert.are.equal("application/json", h["content-type"], c[2])
      assert.truthy(body:find('^{"code":%d+,"message":".*","details":%[%]}$'), body)
      assert.truthy(body:find(c[4], 1, true), c[2] .. ": " .. body)
    end
    assert.are.equal(before, calls(nginx))
  end)

  it("a validate rule failing to evaluate is 400 INVALID_ARGUMENT as google.rpc.Status, not nginx's page", function()
    local code, body, h = request(nginx, "/rulefail/do", { body = '{"x":0}' })
    assert.are.equal(400, code, body)
    assert.are.equal("application/json", h["content-type"])
    assert.truthy(body:find('^{"code":3,"message":"validate: x: div: [^"]*division by zero","details":%[%]}$'), body)
  end)

  it("a body announced over the limit is refused 413 before it is read", function()
    -- Content-Length says 5 MB (under the client_max_body_size of 8m, where
    -- nginx answers 413 itself); a few bytes are sent and the answer comes
    -- at once (reading 5 MB would wait for them until curl's timeout)
    local before = calls(nginx)
    local t0 = helper.now()
    local code, body = request(nginx, "/v1/shelves/7/books",
      { body = "{}", headers = { "Content-Length: 5000000", "Expect:" } })
    assert.is_true(helper.now() - t0 < 5, "took " .. (helper.now() - t0) .. " s")
    assert.are.equal(413, code, body)
    assert.are.equal('{"code":8,"message":"body of 5000000 bytes (at most 65536)","details":[]}', body)
    assert.are.equal(before, calls(nginx))
  end)

  it("schemas from a descriptor set, and from a table of .proto texts importing each other", function()
    local code, body = request(nginx, "/set/v1/shelves/1/books/2?kind=ESSAY")
    assert.are.equal(200, code, body)
    assert.are.equal('{"name":"shelves/1/books/2","title":"title of shelves/1/books/2","kind":"ESSAY"}', body)
    code, body = request(nginx, "/split/echo/yo")
    assert.are.equal(200, code, body)
    assert.truthy(body:find('^{"text":"yo","calls":"%d+"}$'), body)
  end)

  it("configurations that cannot compile are refused with the reason, and make no version", function()
    local code, body = request(nginx, "/admin/errors")
    assert.are.equal(200, code, body)
    local lines = {}
    for line in body:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.are.equal("nil probe: protos: import cycle: a.proto -> b.proto -> a.proto", lines[1])
    assert.are.equal("nil probe: 'protos', 'descriptor_set' or 'reflection' expected", lines[2])
    assert.are.equal("nil probe: unknown option 'colour'", lines[3])
    assert.are.equal("nil probe: 'upstream' (\"host:port\") or 'transport' expected", lines[4])
    assert.are.equal("nil probe: timeout: positive number of seconds expected, got -1", lines[5])
    assert.truthy(lines[6]:find("^nil probe: descriptor_set: "), lines[6])
    assert.are.equal("nil probe: max_body_bytes: positive integer expected, got string", lines[7])
    assert.are.equal("nil probe: headers: list of strings expected, got string", lines[8])
    assert.are.equal("nil probe: timeout: positive number of seconds expected, got inf", lines[9])
    assert.are.equal("nil probe: grpc: table of resty.grpc options expected, got string", lines[10])
    assert.are.equal("nil probe: grpc.again: a table holding itself cannot be put in a shared dict", lines[11])
    assert.are.equal("probe: grpc.f: a function cannot be put in a shared dict", lines[12])
    assert.are.equal("nil", lines[13])
  end)

  it("resty.grpc refuses SRV and a DNS server at its caller's line; a list target has backends()", function()
    local code, body = request(nginx, "/admin/grpc")
    assert.are.equal(200, code, body)
    local lines = {}
    for line in body:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.matches("^false init_by_lua[^ ]*:%d+: pc%.grpc: target 'dns:///_grpc%._tcp%.x%.test': SRV needs the "
      .. "built%-in driver$", lines[1])
    for i = 2, 3 do
      assert.matches("^false init_by_lua[^ ]*:%d+: pc%.grpc: target '[^']*': a DNS server %(dns://IP:PORT/ or "
        .. "dns_server%) needs the built%-in driver", lines[i])
    end
    assert.are.equal("2 127.0.0.1:2", lines[4])
    assert.are.equal("4", lines[5]) -- set_ring_hash: 8 entries, 4 each
  end)

  it("a version that fails to compile is refused, saying why, and the current one stays", function()
    local code, body, h = request(nginx, "/api/echo/hi")
    assert.are.equal(200, code, body)
    local version = h["x-gateway-version"]
    code, body = request(nginx, "/admin/swap?v=bad")
    assert.are.equal(500, code, body)
    assert.truthy(body:find("^echo: protos: gateway/library.proto:%d+:%d+: "), body)
    code, body = request(nginx, "/admin/swap?v=badrule")
    assert.are.equal(500, code, body)
    assert.truthy(body:find("http rules: rule 1: gw.Library.Echo: GET /echo/{nope}: variable 'nope': "
      .. "no field 'nope' in gw.EchoRequest", 1, true), body)
    for _ = 1, 4 do -- both workers, whichever answers
      code, body, h = request(nginx, "/api/echo/hi")
      assert.are.equal(200, code, body)
      assert.are.equal(version, h["x-gateway-version"])
    end
  end)

  it("every worker takes a published version within gateway.watch's period, before any request asks", function()
    local code, body = request(nginx, "/admin/swap?v=B")
    assert.are.equal(200, code, body)
    local n = body:match("^(%d+)")
    os.execute("sleep 0.3")
    for _ = 1, 8 do -- whichever worker answers
      local h
      code, body, h = request(nginx, "/api/echo/hi")
      assert.are.equal(200, code, body)
      assert.are.equal(n, h["x-gateway-version"])
      assert.are.equal('"hi"', body)
    end
    code, body = request(nginx, "/admin/swap?v=A")
    assert.are.equal(200, code, body)
  end)

  it("20 swaps between two versions under wrk: none fails, each answered by one whole version", function()
    local script = os.tmpname()
    -- one wrk thread (one Lua state): every answer must be 200 and either
    -- version A's ({"text":"hi","calls":"N"}, odd shared numbers) or B's
    -- ("hi", even), as its X-Gateway-Version header says
    write(script, [[
local threads = {}
function setup(thread) threads[#threads + 1] = thread end
bad, a, b, first = 0, 0, 0, nil
response = function(status, headers, body)
  local v = tonumber(headers["X-Gateway-Version"])
  if status ~= 200 or not v then
    bad = bad + 1
    first = first or (status .. " " .. body)
  elseif v % 2 == 1 and body:match('^{"text":"hi","calls":"%d+"}$') then
    a = a + 1
  elseif v % 2 == 0 and body == '"hi"' then
    b = b + 1
  else
    bad = bad + 1
    first = first or (status .. " v" .. v .. " " .. body)
  end
end
done = function(summary)
  local t = threads[1]
  io.write(string.format("RESULT bad=%d a=%d b=%d errors=%d first=%s\n", t:get("bad"), t:get("a"), t:get("b"),
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status
    + summary.errors.timeout, tostring(t:get("first"))))
end
]])
    local out = os.tmpname()
    -- wrk runs with only stdin, stdout and stderr: it inherits this
    -- process's descriptors otherwise, and its event loop (sized for its
    -- connections) refuses a socket whose number is past it, counted as a
    -- connect error; an answer slower than wrk's timeout (2 s by default)
    -- counts as an error too, so 30 s for a loaded machine
    local wrk = io.popen("/usr/bin/python3 -c 'import os, sys; os.closerange(3, 65536); os.execvp(sys.argv[1], "
      .. "sys.argv[1:])' wrk -t1 -c8 -d4s --timeout 30s -s " .. q(script) .. " " .. q(nginx.url .. "/api/echo/hi")
      .. " > " .. q(out) .. " 2>&1", "r")
    os.execute("sleep 0.5")
    local published = {}
    for i = 1, 20 do
      local code, body = request(nginx, "/admin/swap?v=" .. (i % 2 == 1 and "B" or "A"))
      assert.are.equal(200, code, body)
      published[#published + 1] = tonumber(body)
      os.execute("sleep 0.1")
    end
    wrk:close()
    local text = read(out)
    os.remove(out)
    os.remove(script)
    local bad, a, b, errors = text:match("RESULT bad=(%d+) a=(%d+) b=(%d+) errors=(%d+)")
    assert.truthy(bad, text)
    assert.are.equal("0", bad, text)
    local log = (read(nginx.prefix .. "/logs/error.log") or ""):gsub("[^\n]*%[info%][^\n]*\n", "")
    assert.are.equal("0", errors, text .. "\nerror.log (past [info]):\n" .. log:sub(-4000))
    assert.is_true(tonumber(a) > 0 and tonumber(b) > 0, text)
    for i = 2, 20 do assert.are.equal(published[i - 1] + 1, published[i]) end
    print(("# 20 swaps under wrk -c8 for 4 s: %d answers by version A, %d by B, none failed"):format(a, b))
  end)

  -- gRPC-Web and Connect clients (connect-node over HTTP/1.1) through the
  -- same route (web = true) to the plain gRPC upstream
  local WEB_CASES = { "unary", "server_stream", "stream_error", "details", "metadata", "deadline", "client_stream" }
  local WEB_WANT = {
    "book shelves/1/books/2 | title of shelves/1/books/2 (full) | 12 | a,b | 1",
    "book shelves/3/books/1 1", "book shelves/3/books/2 2", "book shelves/3/books/3 3", "end",
    "book shelves/3/books/1 1", "error ABORTED stream failed after 1",
    "error NOT_FOUND failed with NOT_FOUND", "detail gone gw.example", "error trailer x-failed NOT_FOUND",
    "header x-answer yes", "trailer x-done 1", "metadata authorization=Bearer t x-user=ann",
    "error DEADLINE_EXCEEDED after some",
    "calls 2",
  }
  for _, transport in ipairs { "grpc-web", "grpc-web,json", "connect", "connect,json" } do
    it("a " .. transport .. " client (connect-node, HTTP/1.1): unary, server stream, errors with details, "
      .. "headers and trailers, its deadline", function()
      local absent_node = peer.missing("@connectrpc/connect-node")
      if absent_node then return peer.skip(pending, "gRPC-Web and Connect through nginx", absent_node) end
      local set = peer.descriptor_set({ "gateway/library.proto" }, { "spec/fixtures/protos", "core/schema/protos" })
      local ok, out = pcall(peer.run, "gateway_web_client.mjs", { set, nginx.url, transport, table.unpack(WEB_CASES) })
      os.remove(set)
      assert(ok, out)
      local lines = {}
      for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
      assert.are.same(WEB_WANT, lines)
    end)
  end

  -- A gRPC-Web(-Text) request by hand: the body, the answer's bytes.
  local function web_call(path, ct, body)
    local code, out, h = request(nginx, path, { body = body, headers = { "Content-Type: " .. ct } })
    return code, out, h
  end
  local function frame(flags, s)
    local n = #s
    return string.char(flags, math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256,
      n % 256) .. s
  end
  local function b64(s)
    local f = os.tmpname()
    write(f, s)
    local out = R.capture("base64 -w0 " .. q(f))
    os.remove(f)
    return out
  end
  local function unb64(s)
    local f = os.tmpname()
    write(f, s)
    local out = R.capture("base64 -d " .. q(f))
    os.remove(f)
    return out
  end

  it("gRPC-Web-Text: a base64 body of padded chunks in, base64 frames and the trailers frame out", function()
    -- gw.EchoRequest{text = "hi"}, framed and base64-encoded in two padded chunks
    local req = frame(0, "\10\2hi")
    local code, body, h = web_call("/gw.Library/Echo", "application/grpc-web-text",
      b64(req:sub(1, 4)) .. b64(req:sub(5)))
    assert.are.equal(200, code, body)
    assert.are.equal("application/grpc-web-text+proto", h["content-type"])
    local raw = unb64(body)
    assert.are.equal(0, raw:byte(1))
    local n = raw:byte(4) * 256 + raw:byte(5)
    assert.are.equal("\10\2hi", raw:sub(6, 5 + n):sub(1, 4))
    local trailers = raw:sub(6 + n)
    assert.are.equal(0x80, trailers:byte(1))
    assert.truthy(trailers:find("grpc-status:0\r\n", 1, true), trailers)
  end)

  it("web requests that cannot be read are answered in the protocol's form and never reach the upstream", function()
    local before = calls(nginx)
    -- a message prefix announcing more than the body holds
    local code, body, h = web_call("/gw.Library/Echo", "application/grpc-web+proto", "\0\0\0\0\9\10")
    assert.are.equal(200, code, body)
    assert.are.equal("application/grpc-web+proto", h["content-type"])
    -- (INTERNAL, as gRPC and pc.listen answer it: spec/web_rpc_spec.lua)
    assert.truthy(body:find("^\128....grpc%-status:13\r\ngrpc%-message:body: a message of 9 bytes cut short"), body)
    -- not an envelope at all (3 bytes), a flags byte neither 0 nor 1: INTERNAL too
    for _, bad in ipairs { "\0\0\0", frame(2, "xx") } do
      code, body = web_call("/gw.Library/Echo", "application/grpc-web+proto", bad)
      assert.are.equal(200, code, body)
      assert.truthy(body:find("^\128....grpc%-status:13\r\n"), body)
    end
    -- a compressed message (no grpc-encoding the gateway takes)
    code, body = web_call("/gw.Library/Echo", "application/grpc-web+proto", frame(1, "xx"))
    assert.are.equal(200, code, body)
    assert.truthy(body:find("grpc-status:12\r\n", 1, true), body)
    -- Connect: JSON that is not the request type's, and a bad deadline
    code, body, h = request(nginx, "/gw.Library/Echo",
      { body = '{"text": 5}', headers = { "Content-Type: application/json" } })
    assert.are.equal(400, code, body)
    assert.are.equal("application/json", h["content-type"])
    assert.truthy(body:find('^{"code":"invalid_argument","message":"message 1: '), body)
    code, body = request(nginx, "/gw.Library/Echo",
      { body = "", headers = { "Content-Type: application/proto", "Connect-Timeout-Ms: soon" } })
    assert.are.equal(400, code, body)
    assert.are.equal('{"code":"invalid_argument","message":"bad Connect-Timeout-Ms"}', body)
    -- a method the route does not have, for each protocol
    code, body = web_call("/gw.Nothing/Echo", "application/grpc-web+proto", frame(0, ""))
    assert.are.equal(200, code, body)
    assert.truthy(body:find("grpc-status:12\r\ngrpc-message:no method /gw.Nothing/Echo\r\n", 1, true), body)
    code, body = request(nginx, "/gw.Nothing/Echo",
      { body = "", headers = { "Content-Type: application/connect+proto" } })
    assert.are.equal(200, code, body)
    assert.truthy(body:find('{"error":{"code":"unimplemented","message":"no method /gw.Nothing/Echo"}', 1, true), body)
    -- Connect's unary protocol on a streaming method
    code, body = request(nginx, "/gw.Library/ListBooks",
      { body = "{}", headers = { "Content-Type: application/json" } })
    assert.are.equal(501, code, body)
    assert.are.equal(before, calls(nginx))
    -- a POST of JSON to a path naming no method is still REST's
    code, body = request(nginx, "/v1/shelves/7/books?request_id=r2",
      { body = '{"title":"T"}', headers = { "Content-Type: application/json" } })
    assert.are.equal(200, code, body)
    assert.are.equal('{"name":"shelves/7/books/r2","title":"T"}', body)
  end)

  -- as `protocall gateway` answers it (spec/rest_gateway_spec.lua)
  it("a POST to a method's path with no content type of gRPC-Web or Connect is 415 with Accept-Post", function()
    local before = calls(nginx)
    for _, ct in ipairs { "Content-Type:", "Content-Type: text/plain" } do
      local code, body, h = request(nginx, "/gw.Library/Echo", { body = '{"text":"hi"}', headers = { ct } })
      assert.are.equal(415, code, ct .. ": " .. body)
      assert.are.equal("content-type must be gRPC's, gRPC-Web's or Connect's (see Accept-Post)\n", body)
      assert.are.equal("text/plain", h["content-type"])
      assert.matches("^application/grpc, .*, application/connect%+json, application/proto, application/json$",
        h["accept-post"])
      -- a streaming method takes no Connect unary type
      code, body, h = request(nginx, "/gw.Library/ListBooks", { body = "{}", headers = { ct } })
      assert.are.equal(415, code, body)
      assert.matches("^application/grpc, .*, application/connect%+proto, application/connect%+json$",
        h["accept-post"])
    end
    -- a path naming no method stays REST's 404
    local code = request(nginx, "/gw.Library/Nope", { body = "{}", headers = { "Content-Type:" } })
    assert.are.equal(404, code)
    assert.are.equal(before, calls(nginx))
  end)

  it("takes a Content-Type padded with spaces or in another case (RFC 9110: OWS, case-insensitive)", function()
    for _, ct in ipairs { "application/json ", "Application/JSON", "application/json ; charset=utf-8",
      "application/json\t;charset=utf-8" } do
      local code, body = request(nginx, "/gw.Library/Echo", { body = '{"text":"hi"}',
        headers = { "Content-Type: " .. ct, "Connect-Protocol-Version: 1" } })
      assert.are.equal(200, code, ct .. ": " .. body)
      assert.matches('^{"text":"hi"', body)
    end
  end)

  it("with validate, gRPC-Web and Connect requests breaking their rules are refused and never reach the upstream",
    function()
    local TEXT = "validation failed: text: must be at least 2 characters [string.min_len]"
    local TITLE = "validation failed: title: must be at most 5 characters [string.max_len]"
    -- Connect's error JSON, the detail's bytes left out
    local function connect_error(why)
      return '{"code":"invalid_argument","message":"' .. why .. '","details":[{"type":"google.rpc.BadRequest",'
        .. '"value":"@"}]}'
    end
    local function masked(body) return (body:gsub('"value":"[^"]+"', '"value":"@"')) end
    local before = calls(nginx)
    -- Connect unary, JSON and proto
    local code, body = request(nginx, "/strict/gw.Library/Echo",
      { body = '{"text":"x"}', headers = { "Content-Type: application/json" } })
    assert.are.same({ 400, connect_error(TEXT) }, { code, masked(body) })
    code, body = request(nginx, "/strict/gw.Library/Echo",
      { body = "\10\1x", headers = { "Content-Type: application/proto" } })
    assert.are.same({ 400, connect_error(TEXT) }, { code, masked(body) })
    -- gRPC-Web: a unary call, and a client stream whose second message breaks the rule
    code, body = web_call("/strict/gw.Library/Echo", "application/grpc-web+proto", frame(0, "\10\1x"))
    assert.are.equal(200, code, body)
    assert.truthy(body:find("^\128....grpc%-status:3\r\ngrpc%-message:" .. TEXT:gsub("%p", "%%%0") .. "\r\n"), body)
    assert.truthy(body:find("grpc-status-details-bin:", 1, true), body)
    code, body = web_call("/strict/gw.Library/CreateBooks", "application/grpc-web+json",
      frame(0, '{"title":"ok"}') .. frame(0, '{"title":"too long"}'))
    assert.are.equal(200, code, body)
    assert.truthy(body:find("grpc-status:3\r\ngrpc-message:" .. TITLE .. "\r\n", 1, true), body)
    -- Connect streaming: the end-of-stream message's error
    code, body = request(nginx, "/strict/gw.Library/CreateBooks", { body = frame(0, '{"title":"ok"}')
      .. frame(0, '{"title":"too long"}'), headers = { "Content-Type: application/connect+json" } })
    assert.are.equal(200, code, body)
    assert.are.equal("\2", body:sub(1, 1))
    assert.are.equal('{"error":' .. connect_error(TITLE) .. "}", masked(body:sub(6)))
    -- REST as before: 400 with the detail
    code, body = request(nginx, "/strict/v1/books:batchCreate", { body = '{"title":"ok"}\n{"title":"too long"}' })
    assert.are.equal(400, code, body)
    assert.are.equal(before, calls(nginx))
    -- valid requests of each protocol go through, their bytes as sent
    code, body = request(nginx, "/strict/gw.Library/Echo",
      { body = '{"text":"ok"}', headers = { "Content-Type: application/json" } })
    assert.are.equal(200, code, body)
    assert.truthy(body:find('^{"text":"ok"'), body)
    code, body = request(nginx, "/strict/gw.Library/Echo",
      { body = "\10\2ok", headers = { "Content-Type: application/proto" } })
    assert.are.equal(200, code, body)
    assert.are.equal("\10\2ok", body:sub(1, 4))
    code, body = web_call("/strict/gw.Library/CreateBooks", "application/grpc-web+proto",
      frame(0, "\18\2ok") .. frame(0, "\18\5fine."))
    assert.are.equal(200, code, body)
    assert.are.equal(frame(0, "\8\2"), body:sub(1, 7))
    assert.truthy(body:find("grpc-status:0\r\n", 1, true), body)
    assert.are.equal(before + 3, calls(nginx))
  end)

  it("with validate, gRPC-Web and Connect requests of a type no rule reaches are forwarded unread", function()
    -- gw.EchoRequest with text "\255", not UTF-8: read, it would be refused here INVALID_ARGUMENT
    -- ("message 1: gw.EchoRequest.text: invalid UTF-8 ..."); unread, its bytes reach the upstream,
    -- whose decoder refuses them (a unary call's before its handler runs: not counted)
    local bad = "\10\1\255"
    local before = calls(nginx)
    local proto = { "Content-Type: application/proto" }
    local code, body = request(nginx, "/loose/gw.Library/Echo", { body = bad, headers = proto })
    assert.are.same({ 500, '{"code":"internal","message":"Exception deserializing request!"}' }, { code, body })
    code, body = web_call("/loose/gw.Library/Echo", "application/grpc-web+proto", frame(0, bad))
    assert.are.equal(200, code, body)
    assert.truthy(body:find("^\128....grpc%-status:13\r\ngrpc%-message:Exception deserializing request!\r\n"), body)
    -- a client stream's messages too (its handler runs, counted, and reads the bad one), and valid
    -- requests go through as sent
    code, body = web_call("/loose/gw.Library/CreateBooks", "application/grpc-web+proto",
      frame(0, "\18\2ok") .. frame(0, "\18\1\255"))
    assert.are.equal(200, code, body)
    assert.truthy(body:find("grpc-status:13\r\ngrpc-message:Exception deserializing request!\r\n", 1, true), body)
    code, body = request(nginx, "/loose/gw.Library/Echo", { body = "\10\2ok", headers = proto })
    assert.are.equal(200, code, body)
    assert.are.equal("\10\2ok", body:sub(1, 4))
    assert.are.equal(before + 2, calls(nginx))
  end)
end)

-- A route whose methods answer google.api.HttpBody (spec/httpbody_server.lua
-- upstream, spec/fixtures/protos/gateway/httpbody.proto): the body raw, with
-- its content type; a server stream's, its first message's (grpc-gateway's).
describe("protocall.resty.gateway inside nginx, google.api.HttpBody answers", function()
  local LUA = R.luajit and "luajit" or os.getenv("PROTOCALL_BIN") or "lua5.4"
  local upstream, nginx
  setup(function()
    upstream = helper.spawn_command("env LUA_PATH=" .. q(package.path) .. " LUA_CPATH=" .. q(package.cpath)
      .. " sh -c 'PC_PID=$$ exec " .. LUA .. " spec/httpbody_server.lua'", "httpbody_server.lua")
    nginx = N.start("gateway-hb", (N.lua_conf(1, [==[
    init_by_lua_block {
        gw = require "protocall.resty.gateway"
        local f = assert(io.open("@ROOT@/spec/fixtures/protos/gateway/httpbody.proto"))
        assert(gw.configure("hb", { protos = { ["gateway/httpbody.proto"] = f:read("*a") },
            upstream = "127.0.0.1:@UPSTREAM@" }))
        f:close()
    }
    server {
        listen 127.0.0.1:@PORT@;
        location /hb {
            content_by_lua_block { gw.handle("hb") }
        }
    }
]==]):gsub("@UPSTREAM@", tostring(upstream.port))))
  end)
  teardown(function()
    N.stop(nginx)
    helper.stop(upstream)
  end)

  it("answers a unary HttpBody and a stream of them with their content type", function()
    local code, body, h = request(nginx, "/hb?ct=text/csv")
    assert.are.same({ 200, "body", "text/csv" }, { code, body, h["content-type"] })
    code, body, h = request(nginx, "/hb:stream?n=2&ct=text/csv")
    assert.are.same({ 200, "part 1\npart 2\n", "text/csv" }, { code, body, h["content-type"] })
    code, body, h = request(nginx, "/hb:stream?n=0&ct=text/csv")
    assert.are.same({ 200, "", "application/octet-stream" }, { code, body, h["content-type"] })
    -- a content type no header may carry: INTERNAL as pc.listen answers it, not 200 with it escaped
    -- (any control byte but HTAB: RFC 9110's field-value)
    local cases = { { "/hb?ct=text/html%0D%0ASet-Cookie:%20a=1", "Get", "0x0d" },
      { "/hb:stream?n=1&ct=a%0Ab", "Stream", "0x0a" }, { "/hb?ct=a%01b", "Get", "0x01" },
      { "/hb:stream?n=1&ct=a%7Fb", "Stream", "0x7f" } }
    for _, case in ipairs(cases) do
      code, body, h = request(nginx, case[1])
      assert.are.same({ 500, '{"code":13,"message":"hb.S.' .. case[2] .. ': header \'content-type\': value holds '
        .. 'control byte ' .. case[3] .. '","details":[]}', "application/json" }, { code, body, h["content-type"] })
      assert.is_nil(h["set-cookie"])
    end
  end)

  it("answers a stream whose first message is no HttpBody INTERNAL 500 as the gateway's error", function()
    local code, body, h = request(nginx, "/hb:broken")
    assert.are.same({ 500, '{"code":13,"message":"response of hb.S.Broken: google.api.HttpBody.content_type: '
      .. 'invalid UTF-8 in a string field at offset 1","details":[]}', "application/json" },
      { code, body, h["content-type"] })
  end)
end)
