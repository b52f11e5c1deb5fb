-- protocall.resty.gateway inside nginx with the route's schema from the
-- upstream's reflection (`reflection = {refresh = ...}`): Debian's nginx
-- with libnginx-mod-http-lua (spec/nginx_helper.lua) in front of
-- spec/reflection_server.py (python3-grpcio serving faults.Faults and
-- grpc.reflection.v1), started only after nginx so the requests before
-- the first schema are seen answered 503; then replaced on the same port
-- by `protocall gateway` (which answers reflection from its own schema,
-- gateway/library.proto, in front of spec/gateway_upstream.py) so a
-- refresh picks up another schema. The REST rule is given apart
-- from the schema (faults.proto carries no google.api.http). This spec only
-- drives processes, so it runs the same under lua5.4 and luajit; without
-- nginx, the module, the LuaJIT build or curl it is a visible pending test
-- (a failure when env CI is set).
local helper = require "grpc_helper"
local N = require "nginx_helper"

local absent = N.missing { ["/usr/bin/curl"] = "curl" }
if absent then
  describe("protocall.resty.gateway with the upstream's reflection", function()
    it("runs", function()
      if os.getenv("CI") then error("missing (required when CI is set): " .. absent) end
      pending("nginx gateway reflection spec skipped, missing: " .. absent)
    end)
  end)
  return
end

local read, write, q = N.read, N.write, N.quote
local G = require "gateway_cases"
local request, eventually = G.request, G.eventually
local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"

-- Route "refl": every service the upstream lists, refreshed each second;
-- route "nope": a service the upstream does not have.
local CONF = N.lua_conf(2, [==[
    init_by_lua_block {
        gw = require "protocall.resty.gateway"
        local rules = { rules = {
            { selector = "faults.Faults.Echo", get = "/refl/echo/{text}",
              additional_bindings = { { post = "/refl/echo", body = "*" } } } } }
        assert(gw.configure("refl", { upstream = "@UPSTREAM@", reflection = { refresh = 1, timeout = 2 },
                                      http = rules, version_header = "X-Gateway-Version" }))
        assert(gw.configure("nope", { upstream = "@UPSTREAM@", reflection = { refresh = 1 },
                                      services = { "faults.Nope" } }))
        local function try(cfg)
            local n, err = gw.configure("probe", cfg)
            return tostring(n) .. " " .. tostring(err)
        end
        ConfigErrors = table.concat({
            try({ upstream = "@UPSTREAM@", reflection = "yes" }),
            try({ upstream = "@UPSTREAM@", reflection = { refresh = 0 } }),
            try({ upstream = "@UPSTREAM@", reflection = { every = 1 } }),
            try({ upstream = "@UPSTREAM@", reflection = true, protos = {} }),
            try({ reflection = true }),
            tostring(select(2, gw.publish("gateway", "probe", { upstream = "@UPSTREAM@", reflection = true }))),
        }, "\n")
    }
    lua_shared_dict gateway 1m;

    init_worker_by_lua_block {
        -- no rules: the schema's own annotations (none in faults.proto);
        -- configured in each worker, whose timer fetches at once
        assert(gw.configure("any", { upstream = "@UPSTREAM@", reflection = { refresh = 1 } }))
    }

    server {
        listen 127.0.0.1:@PORT@;

        location /refl/ {
            content_by_lua_block { gw.handle("refl") }
        }
        location /v1/ {
            content_by_lua_block { gw.handle("any") }
        }
        location /nope/ {
            content_by_lua_block { gw.handle("nope") }
        }
        location = /admin/errors {
            content_by_lua_block { ngx.print(ConfigErrors) }
        }
        location = /admin/version {
            content_by_lua_block {
                local n, info = gw.version(ngx.var.arg_route)
                ngx.print(tostring(n), " ", tostring(info and info.error))
            }
        }
    }
]==])


describe("protocall.resty.gateway with the upstream's reflection", function()
  local port, nginx, refl, dir, upstream, gateway
  local function start_upstream()
    refl = helper.spawn_command("/usr/bin/python3 spec/reflection_server.py " .. port .. " " .. dir .. " v1",
      "reflection_server.py")
  end
  setup(function()
    local pc = require "protocall"
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. q(dir .. "/grpc/reflection/v1")))
    write(dir .. "/grpc/reflection/v1/reflection.proto", pc.builtin_source("grpc/reflection/v1/reflection.proto"))
    port = N.free_port() -- nothing listens there until start_upstream
    nginx = N.start("gwrefl", (CONF:gsub("@UPSTREAM@", "127.0.0.1:" .. port)))
  end)
  teardown(function()
    N.stop(nginx)
    if refl then helper.stop(refl) end
    if gateway then helper.stop(gateway) end
    if upstream then helper.stop(upstream) end
    os.execute("rm -rf " .. q(dir))
  end)

  it("refuses bad reflection options at configure, and publish of a reflecting configuration", function()
    local code, body = request(nginx, "/admin/errors")
    assert.are.equal(200, code, body)
    assert.are.equal(table.concat({
      "nil probe: reflection: true or {refresh =, timeout =} expected",
      "nil probe: reflection.refresh: positive number of seconds expected, got 0",
      "nil probe: reflection: unknown option 'every'",
      "nil probe: reflection: not with 'protos' or 'descriptor_set'",
      "nil probe: 'upstream' (\"host:port\") or 'transport' expected",
      "probe: reflection: configure's option (each worker fetches its own schema), not publish's",
    }, "\n"), body)
  end)

  it("answers 503 with a google.rpc.Status naming why before the first schema", function()
    local code, body, h = request(nginx, "/refl/echo/hi")
    assert.are.equal(503, code, body)
    assert.are.equal("application/json", h["content-type"])
    assert.matches('^{"code":14,"message":"gateway route \'refl\': no schema yet from the upstream\'s reflection', body)
    -- once a fetch has failed, the answer says how: the failure's class, not the upstream's address,
    -- which the error log has
    local ok, last = eventually(5, function()
      local c, b = request(nginx, "/refl/echo/hi")
      return c == 503 and b:find("reflection: UNAVAILABLE", 1, true) ~= nil, b
    end)
    assert(ok, last)
    assert.matches("reflection: UNAVAILABLE: upstream connect error: connection refused", last, 1, true)
    assert.is_nil(last:find("127.0.0.1", 1, true), last)
    local log = read(nginx.prefix .. "/logs/error.log") or ""
    assert.matches("no version yet: reflection: UNAVAILABLE: connect to 127.0.0.1:", log, 1, true)
  end)

  it("transcodes a REST call by the reflected schema once the upstream answers, and refreshes it", function()
    start_upstream()
    local ok, last = eventually(10, function()
      local c, b = request(nginx, "/refl/echo/hi")
      return c == 200, c .. " " .. b
    end)
    assert(ok, last)
    -- (the other worker may not have its schema yet: its first fetch
    -- failed while the upstream was down and waits out its backoff)
    ok, last = eventually(10, function()
      local c, b = request(nginx, "/refl/echo", { body = '{"text":"posted","id":"x"}',
        headers = { "Content-Type: application/json" } })
      return c == 200, c == 200 and b or c .. " " .. b
    end)
    assert(ok, last)
    assert.are.equal('{"text":"posted","attempts":1}', last)
    -- both workers (configured in init_by_lua, a worker starts fetching at
    -- its first request of the route): six answers in a row
    ok, last = eventually(5, function()
      for _ = 1, 6 do
        local c, b = request(nginx, "/refl/echo/again")
        if c ~= 200 then return false, c .. " " .. b end
        assert.are.equal('{"text":"again","attempts":1}', b)
      end
      return true
    end)
    assert(ok, last)
    -- route "any" too, with no route for a path of gw.Library yet
    ok, last = eventually(5, function()
      local c, b = request(nginx, "/v1/shelves/1/books/2")
      return c == 404, c .. " " .. b
    end)
    assert(ok, last)
    -- refreshes (each second) answering the same schema keep version 1 in
    -- both workers; the six answers above may all have come from one
    -- worker, so a worker that has no version yet ("nil nil") is sent a
    -- request of the route and asked again later
    local seen = 0
    for _ = 1, 25 do
      local _, b = request(nginx, "/admin/version?route=refl")
      if b == "nil nil" then
        request(nginx, "/refl/echo/again")
      else
        assert.are.equal("1 nil", b)
        seen = seen + 1
      end
      os.execute("sleep 0.1")
    end
    assert.is_true(seen >= 10, seen .. " of 25 answers had a version")
  end)

  it("a service the upstream lacks: 503 naming it", function()
    local ok, last = eventually(5, function()
      local c, b = request(nginx, "/nope/x")
      return c == 503 and b:find("faults.Nope", 1, true) ~= nil, c .. " " .. b
    end)
    assert(ok, last)
    assert.matches("NOT_FOUND", last, 1, true)
  end)

  it("a refresh that fails keeps the version and says why", function()
    helper.stop(refl)
    refl = nil
    local ok, last = eventually(5, function()
      local _, b = request(nginx, "/admin/version?route=refl")
      return b:find("^%d+ reflection: UNAVAILABLE") ~= nil, b
    end)
    assert(ok, last)
    -- the schema stays: the call itself fails, mapped to 503 UNAVAILABLE
    local code, body = request(nginx, "/refl/echo/hi")
    assert.are.equal(503, code, body)
    assert.matches('"code":14', body, 1, true)
    assert.is_nil(body:find("no schema yet", 1, true))
  end)

  it("a refresh picks up the upstream's changed schema (a failing rule keeps the route's version)", function()
    upstream = helper.spawn_command("/usr/bin/python3 spec/gateway_upstream.py 0", "gateway_upstream.py")
    gateway = G.start_gateway(BIN, upstream.port, "-I spec/fixtures/protos -proto gateway/library.proto",
      "127.0.0.1:" .. port)
    local ok, last = eventually(10, function()
      local c, b = request(nginx, "/v1/shelves/1/books/2")
      return c == 200, c .. " " .. b
    end)
    assert(ok, last)
    assert.are.equal('200 {"name":"shelves/1/books/2","title":"title of shelves/1/books/2"}', last)
    -- the changed schema is version 2 of route "any" (in either worker):
    -- four answers in a row; the worker that did not answer the 200 may
    -- still hold version 1, with its failed refresh's error while it waits
    -- out that refresh's backoff (seen under the sanitizer build on a
    -- loaded machine), and nothing else
    ok, last = eventually(10, function()
      for _ = 1, 4 do
        local _, b = request(nginx, "/admin/version?route=any")
        if b ~= "2 nil" then
          assert.is_true(b == "1 nil" or b:find("^1 reflection: UNAVAILABLE: ") ~= nil, b)
          return false, b
        end
      end
      return true
    end)
    assert(ok, last)
    -- route "refl"'s rule names faults.Faults.Echo, gone from the new schema
    ok, last = eventually(5, function()
      local _, b = request(nginx, "/admin/version?route=refl")
      return b:find("^%d+ gw.Library") == nil and b:find("faults.Faults.Echo", 1, true) ~= nil, b
    end)
    assert(ok, last)
    local code, body = request(nginx, "/refl/echo/hi") -- the old version: the call reaches gw.Library's server
    assert.are.equal(501, code, body)
  end)
end)
