-- xDS targets (gRFCs A27, A28; lua/protocall/transport/xds*.lua): pc.grpc("xds:///svc")
-- against a management server that is not ours (spec/node/xds_server.mjs: @grpc/grpc-js
-- serving ADS, every resource encoded by protobufjs from the full Envoy protos of
-- @grpc/grpc-js-xds), with pc.listen backends in this process that answer with their
-- name. Also: the Envoy subset of transport/xds_protos.lua checked field by field
-- against the full protos (protoc), the bootstrap's errors, domain and route matching.
local pc = require "protocall"
local core = require "protocall.core"
local peer = require "node_peer"
local protos = require "protocall.transport.xds_protos"
local xds = require "protocall.transport.xds"
local xds_client = require "protocall.transport.xds_client"
local xds_route = require "protocall.transport.xds_route"
local helper = require "grpc_helper"

local DEPS = "node_modules/@grpc/grpc-js-xds/deps"

local pool = pc.pool()
assert(pool:load([[syntax = "proto3"; package xt; message Id { string name = 1; }
  service Named { rpc Who(Id) returns (Id); rpc Slow(Id) returns (Id);
    rpc Hold(Id) returns (Id); }]], { name = "xt.proto" }))

local json_encode = peer.json

local function read_lines(path)
  local f = io.open(path)
  if not f then return {} end
  local list = {}
  for line in f:lines() do list[#list + 1] = line end
  f:close()
  return list
end

describe("xDS", function()
  describe("the Envoy subset", function()
    it("has each field of the full Envoy protos, same number and type", function()
      local absent = peer.missing("@grpc/grpc-js-xds")
      if absent then return peer.skip(pending, "xDS subset check", absent) end
      local files, dirs = {}, {}
      for _, d in ipairs { "envoy-api", "googleapis", "xds", "protoc-gen-validate" } do
        dirs[#dirs + 1] = DEPS .. "/" .. d
      end
      local wanted = {
        "envoy/service/discovery/v3/ads.proto", "envoy/config/listener/v3/listener.proto",
        "envoy/config/route/v3/route.proto", "envoy/config/cluster/v3/cluster.proto",
        "envoy/config/endpoint/v3/endpoint.proto",
        "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
      }
      for i, f in ipairs(wanted) do files[i] = f end
      -- Loaded by protocall's own loader. The protoc-gen-validate that grpc-js-xds ships
      -- predates envoy-api's use of StringRules.ignore_empty (an option: protoc refuses the
      -- files too), so a copy of its validate.proto with that one field added comes first.
      local pgv = io.open(DEPS .. "/protoc-gen-validate/validate/validate.proto"):read("*a")
      local patched, n = pgv:gsub("message StringRules {",
        "message StringRules {\n  optional bool ignore_empty = 126;", 1)
      assert.are.equal(1, n)
      local tmp = os.tmpname()
      os.remove(tmp)
      assert(os.execute("mkdir -p " .. tmp .. "/validate"))
      local out = io.open(tmp .. "/validate/validate.proto", "w")
      out:write(patched)
      out:close()
      table.insert(dirs, 1, tmp)
      local full = pc.pool()
      for _, file in ipairs(files) do
        local ok, why = full:load_file(file, { import_paths = dirs })
        assert(ok, why)
      end
      os.execute("rm -r " .. tmp)
      local sub = protos.pool()
      local checked = 0
      for _, file in ipairs(protos.FILES) do
        if file[1]:find("^envoy/") then
          for _, m in ipairs(sub:file(file[1]).messages) do
            local name = type(m) == "table" and m.full_name or m
            local T = sub:type(name)
            local FT = full:type(name)
            assert.is_not_nil(FT, name .. " is not in the full protos")
            local by = {}
            for _, fd in ipairs(full:fields(FT)) do by[fd.name] = fd end
            for _, fd in ipairs(sub:fields(T)) do
              local want = by[fd.name]
              assert.is_not_nil(want, name .. "." .. fd.name .. " is not in the full protos")
              assert.are.same({ want.number, want.type, want.type_name, want.label },
                { fd.number, fd.type, fd.type_name, fd.label }, name .. "." .. fd.name)
              checked = checked + 1
            end
          end
        end
      end
      assert.is_true(checked > 50, "only " .. checked .. " fields checked")
    end)
  end)

  describe("bootstrap", function()
    it("reads the server and node, and names what is wrong", function()
      local b = assert(xds_client.bootstrap([[{"xds_servers": [{"server_uri": "127.0.0.1:9",
        "channel_creds": [{"type": "google_default"}, {"type": "insecure"}]}],
        "node": {"id": "n1", "cluster": "c", "metadata": {"k": "v"}}, "certificate_providers": {}}]]))
      assert.are.equal("127.0.0.1:9", b.server_uri)
      assert.are.equal("n1", b.node.id)
      local _, why = xds_client.bootstrap([[{"xds_servers": []}]])
      assert.matches("xds_bootstrap option%): %$%.xds_servers: at least one server", why)
      _, why = xds_client.bootstrap([[{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "tls"}]}]}]])
      assert.matches("%$%.xds_servers%[0%]%.channel_creds: .*insecure.*got tls", why)
      _, why = xds_client.bootstrap([[{"xds_servers": [{"channel_creds": [{"type": "insecure"}]}]}]])
      assert.matches("%$%.xds_servers%[0%]%.server_uri", why)
      _, why = xds_client.bootstrap([[{"node": {"id": 5}}]])
      assert.matches("%$%.node%.id", why)
      local ok, err = pcall(pc.grpc, "xds:///svc", { xds_bootstrap = "{" })
      assert.is_false(ok)
      assert.matches("pc.grpc: target 'xds:///svc': xds bootstrap", err)
      -- from the environment: the file GRPC_XDS_BOOTSTRAP names, else GRPC_XDS_BOOTSTRAP_CONFIG
      local file = os.tmpname()
      local f = io.open(file, "w")
      f:write([[{"xds_servers": [{"server_uri": "from-file:1", "channel_creds": [{"type": "insecure"}]}]}]])
      f:close()
      local lua = (jit and "luajit" or "lua5.4") .. " -e " .. peer.quote("package.path = 'lua/?.lua;lua/?/init.lua;'"
        .. " .. package.path; package.cpath = '" .. (jit and "build/luajit" or "build/release") .. "/?.so;'"
        .. " .. package.cpath; local b, why = require('protocall.transport.xds_client').bootstrap();"
        .. " io.write(b and b.server_uri or why)")
      local function run(env)
        local p = io.popen(env .. " " .. lua .. " 2>&1")
        local out = p:read("*a")
        p:close()
        return out
      end
      assert.are.equal("from-file:1", run("GRPC_XDS_BOOTSTRAP=" .. file .. " GRPC_XDS_BOOTSTRAP_CONFIG=x"))
      assert.are.equal("from-env:2", run("GRPC_XDS_BOOTSTRAP_CONFIG=" .. peer.quote([[{"xds_servers": [{"server_uri":
        "from-env:2", "channel_creds": [{"type": "insecure"}]}]}]])))
      assert.matches("GRPC_XDS_BOOTSTRAP_CONFIG%): %$%.xds_servers", run("GRPC_XDS_BOOTSTRAP_CONFIG='{}'"))
      assert.matches("cannot read", run("GRPC_XDS_BOOTSTRAP=/nonexistent/b.json"))
      -- a directory opens, then fails to read: named, not a Lua error of the reader
      assert.matches("^xds bootstrap: cannot read spec: Is a directory", run("GRPC_XDS_BOOTSTRAP=spec"))
      -- a management server that is itself an xds: target (recursed until the C stack overflowed)
      _, why = xds_client.bootstrap([[{"xds_servers": [{"server_uri": "xds:///loop",
        "channel_creds": [{"type": "insecure"}]}]}]])
      assert.are.equal("xds bootstrap (the xds_bootstrap option): $.xds_servers[0].server_uri: an xds: target"
        .. " cannot be the management server, got 'xds:///loop'", why)
      assert.matches("none given", run("env -u GRPC_XDS_BOOTSTRAP -u GRPC_XDS_BOOTSTRAP_CONFIG"))
      os.remove(file)
      ok, err = pcall(pc.grpc, "xds:///svc", { xds_bootstrap = [[{"xds_servers": [{"server_uri": "a b:1",
        "channel_creds": [{"type": "insecure"}]}]}]] })
      assert.is_false(ok)
      assert.matches("pc.grpc: target 'xds:///svc': xds bootstrap: %$%.xds_servers%[0%]%.server_uri: target 'a b:1': "
        .. "control characters", err)
      ok, err = pcall(pc.grpc, "xds://auth/svc", { xds_bootstrap = "{}" })
      assert.is_false(ok)
      assert.matches("xds:///name expected", err)
    end)
  end)

  describe("a call that cannot get its configuration", function()
    it("names the ADS stream's failure when it times out", function()
      pc.spawn(function()
        local t = pc.grpc("xds:///unreachable", { xds_bootstrap = [[{"xds_servers": [{"server_uri": "127.0.0.1:1",
          "channel_creds": [{"type": "insecure"}]}], "node": {"id": "n"}}]] })
        local ok, e = pcall(t.unary, t, "/x.Y/Z", "", { timeout = 0.5 })
        t:close()
        assert.is_false(ok)
        assert.are.equal("DEADLINE_EXCEEDED", e.code)
        assert.matches("while waiting for listener unreachable (LDS) (ADS stream to 127.0.0.1:1: UNAVAILABLE: "
          .. "connect to 127.0.0.1:1", e.message, 1, true)
      end)
      pc.run()
    end)
  end)

  describe("a call's misuse", function()
    it("raises at the caller's line as one backend's transport does, before waiting for a route", function()
      local t = pc.grpc("xds:///unreachable", { xds_bootstrap = [[{"xds_servers": [{"server_uri": "127.0.0.1:1",
        "channel_creds": [{"type": "insecure"}]}], "node": {"id": "n"}}]] })
      local function raises_at(line, fn, msg)
        local ok, e = pcall(fn)
        assert.is_false(ok)
        assert.are.equal("spec/xds_spec.lua:" .. line .. ": " .. msg, e)
      end
      local line = debug.getinfo(1, "l").currentline
      raises_at(line + 1, function() t:unary("/x.Y/Z", "", { timeout = "x" }) end,
        "bad argument #3 to 'unary' (timeout: number of seconds or nil expected, got string)")
      raises_at(line + 3, function() t:server_stream("/x.Y/Z", "", { metadata = { a = "b" } }) end,
        "bad argument #3 to 'server_stream' (metadata: list of {key, value} pairs expected, "
        .. [[got a table with key "a")]])
      raises_at(line + 6, function() t:start_unary("/x.Y/Z", "", { with_metadata = "yes" }) end,
        [[bad argument #3 to 'start_unary' (with_metadata: true, false or "present" expected, got string "yes")]])
      raises_at(line + 8, function() t:start_server_stream("/x.Y/Z", nil) end,
        "bad argument #2 to 'start_server_stream' (string expected, got nil)")
      raises_at(line + 10, function() t:stream("/x.Y/Z", { bogus = 1 }) end,
        "bad argument #2 to 'stream' (unknown setting 'bogus')")
      t:close()
    end)
  end)

  describe("matching", function()
    it("picks the virtual host as gRPC does", function()
      local vhs = { { name = "star", domains = { "*" } }, { name = "pre", domains = { "svc.*" } },
        { name = "suf", domains = { "*.example.com" } }, { name = "suf2", domains = { "*.com" } },
        { name = "exact", domains = { "svc.example.com" } } }
      assert.are.equal("exact", xds.virtual_host(vhs, "SVC.example.com").name)
      assert.are.equal("suf", xds.virtual_host(vhs, "a.example.com").name)
      assert.are.equal("pre", xds.virtual_host(vhs, "svc.local").name)
      assert.are.equal("star", xds.virtual_host(vhs, "other").name)
      assert.is_nil(xds.virtual_host({ { domains = { "a" } } }, "b"))
    end)

    it("matches paths and headers", function()
      local function r(match) return { match = match } end
      assert.is_true(xds.matches(r { prefix = "" }, "/a.B/C"))
      assert.is_true(xds.matches(r { prefix = "/a.B/" }, "/a.B/C"))
      assert.is_false(xds.matches(r { prefix = "/a.b/" }, "/a.B/C"))
      assert.is_true(xds.matches(r { prefix = "/a.b/", case_sensitive = { value = false } }, "/a.B/C"))
      assert.is_true(xds.matches(r { path = "/a.B/C" }, "/a.B/C"))
      assert.is_false(xds.matches(r { path = "/a.B/" }, "/a.B/C"))
      local md = { { "x-k", "v1" }, { "x-k", "v2" }, { "x-bin", "z" } }
      assert.is_true(xds.matches(r { prefix = "", headers = { { name = "x-k", exact_match = "v1,v2" } } }, "/p", md))
      assert.is_true(xds.matches(r { prefix = "", headers = { { name = "X-K", prefix_match = "v1" } } }, "/p", md))
      assert.is_false(xds.matches(r { prefix = "", headers = { { name = "x-k", exact_match = "v1" } } }, "/p", md))
      assert.is_true(xds.matches(r { prefix = "", headers = { { name = "x-k", exact_match = "v1",
        invert_match = true } } }, "/p", md))
      assert.is_true(xds.matches(r { prefix = "", headers = { { name = "x-no", present_match = false } } }, "/p", md))
      assert.is_false(xds.matches(r { prefix = "", headers = { { name = "x-bin", present_match = true } } }, "/p", md))
      assert.is_true(xds.matches(r { prefix = "", headers = { { name = "x-k", string_match = { suffix = "V2",
        ignore_case = true } } } }, "/p", md))
    end)

    it("route retries send grpc-previous-rpc-attempts within 0..100, as a transport's check takes it", function()
      -- the balancer takes xds_route's settings unchecked (internal.CHECKED): past 100 pc.grpc would send none
      local seen = {}
      local b = { unary = function(_, _, _, s)
        seen[#seen + 1] = s.previous_attempts
        error({ code = "UNAVAILABLE", message = "down" }, 0)
      end }
      local rp = { codes = { UNAVAILABLE = true }, max_attempts = 5, initial = 0.001, maximum = 0.001 }
      local ok, err = pcall(xds_route.unary, b, "/a.B/C", "", { previous_attempts = 98 }, rp)
      assert.is_false(ok)
      assert.are.equal("down", err.message)
      assert.are.same({ 98, 99, 100, 100, 100 }, seen)
    end)

    -- A route as xds_client's check leaves it (regexes compiled, the fraction read).
    local function checked(match)
      assert.is_nil(xds_route.check_match(match, "match"))
      return { match = match }
    end

    it("matches safe_regex paths in full, with RE2's syntax", function()
      local r = checked { safe_regex = { regex = "/xt\\.Named/(Who|Hold)" } }
      assert.is_true(xds.matches(r, "/xt.Named/Who"))
      assert.is_true(xds.matches(r, "/xt.Named/Hold"))
      assert.is_false(xds.matches(r, "/xt.Named/Whom")) -- a full match, not a search
      assert.is_false(xds.matches(r, "x/xt.Named/Who"))
      assert.is_false(xds.matches(r, "/xtxNamed/Who"))
      -- \d, (?i) and a non-greedy repeat, which POSIX regexes lack
      r = checked { safe_regex = { regex = "(?i)/a\\.b/m\\d+?" } }
      assert.is_true(xds.matches(r, "/A.B/M12"))
      assert.is_false(xds.matches(r, "/a.b/m"))
      -- case_sensitive applies to prefix and path only (Envoy: ignored for safe_regex)
      r = checked { safe_regex = { regex = "/a/B" }, case_sensitive = { value = false } }
      assert.is_false(xds.matches(r, "/a/b"))
    end)

    it("takes regexes up to RE2's 8,192 bytes as written, matching them whole", function()
      local function path_of(n) return "/" .. ("a"):rep(n - 1) end
      for n = 8187, 8192 do
        local r = checked { safe_regex = { regex = path_of(n) } }
        assert.is_true(xds.matches(r, path_of(n)), n)
        assert.is_false(xds.matches(r, path_of(n) .. "a"), n)
        assert.is_false(xds.matches(r, "/" .. path_of(n)), n)
        r = checked { prefix = "", headers = { { name = "x-k", safe_regex_match = { regex = path_of(n) } } } }
        assert.is_true(xds.matches(r, "/p", { { "x-k", path_of(n) } }), n)
        assert.is_false(xds.matches(r, "/p", { { "x-k", path_of(n + 1) } }), n)
      end
      local m = { safe_regex = { regex = path_of(8193) } }
      assert.are.equal(("match.safe_regex.regex: %q is not an RE2 pattern: pattern too long"):format(path_of(8193)),
        xds_route.check_match(m, "match"))
      -- core.regex's two matches: re:full the whole value, re:find a part of it
      local re = assert(core.regex("a|ab"))
      assert.are.same({ true, false, false, true }, { re:full("ab"), re:full("abc"), re:full("xab"), re:find("xab") })
      -- an alternation is matched whole on either side, as "^(?:a|b)$"
      local r = checked { safe_regex = { regex = "/x|/y" } }
      assert.is_true(xds.matches(r, "/x"))
      assert.is_true(xds.matches(r, "/y"))
      assert.is_false(xds.matches(r, "/xy"))
      assert.is_false(xds.matches(r, "/x/y"))
    end)

    it("matches header regexes in full, and inverts them", function()
      local function user(v) return v and { { "x-user", v } } or {} end
      local r = checked { prefix = "", headers = { { name = "x-user", safe_regex_match = { regex = "user-[0-9]+" } } } }
      assert.is_true(xds.matches(r, "/p", user "user-12"))
      assert.is_false(xds.matches(r, "/p", user "user-12x"))
      assert.is_false(xds.matches(r, "/p", user "xuser-12"))
      assert.is_false(xds.matches(r, "/p", user(nil)))
      r = checked { prefix = "", headers = { { name = "x-user", safe_regex_match = { regex = "user-[0-9]+" },
        invert_match = true } } }
      assert.is_false(xds.matches(r, "/p", user "user-12"))
      assert.is_true(xds.matches(r, "/p", user "admin"))
      assert.is_false(xds.matches(r, "/p", user(nil))) -- absent: no match, inverted or not
      r = checked { prefix = "", headers = { { name = "x-user", string_match = { safe_regex = { regex = "u.*" } } } } }
      assert.is_true(xds.matches(r, "/p", user "user-1"))
      assert.is_false(xds.matches(r, "/p", user "User-1"))
      -- range_match: a decimal integer in [start, end)
      r = checked { prefix = "", headers = { { name = "x-user", range_match = { start = -5, ["end"] = 10 } } } }
      for v, want in pairs { ["-5"] = true, ["9"] = true, ["+3"] = true, ["10"] = false, ["-6"] = false,
        ["3.0"] = false, ["0x3"] = false, [" 3"] = false, ["3,4"] = false } do
        assert.are.equal(want, xds.matches(r, "/p", user(v)), v)
      end
      assert.is_false(xds.matches(r, "/p", user(nil)))
    end)

    it("compares range_match values as 64-bit integers on both runtimes, up to 2^63 - 1", function()
      -- decoded as xds_client decodes them (int64 as LuaJIT's cdata), written in JSON (int64 as strings)
      local RM = protos.type("envoy.config.route.v3.RouteMatch")
      local function ranged(start, stop)
        local json = ('{"prefix":"","headers":[{"name":"x-n","rangeMatch":{"start":"%s","end":"%s"}}]}'):format(start,
          stop)
        return checked(core.decode(RM, assert(pc.json_to_wire(RM, json)), { table = true }))
      end
      local function check_range(r, cases)
        for v, want in pairs(cases) do assert.are.equal(want, xds.matches(r, "/p", { { "x-n", v } }), v) end
      end
      check_range(ranged("9223372036854775000", "9223372036854775807"), {
        ["9223372036854775000"] = true, ["9223372036854774999"] = false, ["9223372036854775806"] = true,
        ["+0009223372036854775001"] = true, ["9223372036854775807"] = false, ["9223372036854775808"] = false,
        ["99999999999999999999"] = false, ["0"] = false, ["-9223372036854775806"] = false })
      check_range(ranged("-9223372036854775808", "-9223372036854775000"), {
        ["-9223372036854775808"] = true, ["-9223372036854775809"] = false, ["-9223372036854775001"] = true,
        ["-9223372036854775000"] = false, ["-009223372036854775007"] = true, ["9223372036854775001"] = false,
        ["-0"] = false })
      -- next to 2^53, where doubles skip odd integers
      check_range(ranged("9007199254740993", "9007199254740994"), {
        ["9007199254740992"] = false, ["9007199254740993"] = true, ["9007199254740994"] = false })
      check_range(ranged("-1", "1"), { ["-0"] = true, ["+0"] = true, ["000"] = true, ["-1"] = true, ["1"] = false,
        ["-2"] = false })
    end)

    it("refuses a range_match bound that is no int64, naming the field", function()
      local function bounds(start, stop)
        local m = { prefix = "", headers = { { name = "x-n", range_match = { start = start, ["end"] = stop } } } }
        return xds_route.check_match(m, "match"), m
      end
      for _, case in ipairs {
        { "abc", 5, "match.headers[0].range_match.start: an int64 expected, got \"abc\"" },
        { 1.5, 5, "match.headers[0].range_match.start: an int64 expected, got 1.5" },
        { 0, 2.5, "match.headers[0].range_match.end: an int64 expected, got 2.5" },
        { 0 / 0, 5, "match.headers[0].range_match.start: an int64 expected, got nan" },
        { 0, 2 ^ 63, "match.headers[0].range_match.end: an int64 expected, got " .. tostring(2 ^ 63) },
        { "99999999999999999999", 5,
          "match.headers[0].range_match.start: an int64 expected, got \"99999999999999999999\"" },
        { true, 5, "match.headers[0].range_match.start: an int64 expected, got boolean" },
        { 0, {}, "match.headers[0].range_match.end: an int64 expected, got table" },
      } do
        assert.are.equal(case[3], (bounds(case[1], case[2])))
      end
      -- whole floats, decimal strings and an absent bound (0) are read
      local why, m = bounds(-5.0, "10")
      assert.is_nil(why)
      assert.is_true(xds.matches({ match = m }, "/p", { { "x-n", "-5" } }))
      assert.is_false(xds.matches({ match = m }, "/p", { { "x-n", "10" } }))
      why, m = bounds(nil, 3)
      assert.is_nil(why)
      assert.are.same({ "0", "3" }, m.headers[1].range_of)
    end)

    it("takes a runtime_fraction's default_value out of each denominator", function()
      for _, case in ipairs { { "HUNDRED", 100 }, { 1, 10000 }, { "MILLION", 1000000 } } do
        local r = checked { prefix = "", runtime_fraction = { runtime_key = "ignored",
          default_value = { numerator = 25, denominator = case[1] } } }
        local asked
        local function draw(v) return function(n) asked = n; return v end end
        assert.is_true(xds.matches(r, "/p", {}, draw(25)))
        assert.are.equal(case[2], asked)
        assert.is_false(xds.matches(r, "/p", {}, draw(26)))
      end
      -- a numerator above the denominator counts as the denominator; 0 never matches
      local r = checked { prefix = "", runtime_fraction = { default_value = { numerator = 500 } } }
      assert.is_true(xds.matches(r, "/p", {}, function(n) return n end))
      r = checked { prefix = "", runtime_fraction = { default_value = {} } }
      assert.is_false(xds.matches(r, "/p", {}, function() return 1 end))
      -- the path and headers first: a route they refuse draws nothing
      r = checked { prefix = "/q", runtime_fraction = { default_value = { numerator = 100 } } }
      assert.is_false(xds.matches(r, "/p", {}, function() error("drew") end))
    end)
  end)

  describe("endpoints", function()
    it("takes the lowest priority with a healthy endpoint, weighted, in weighted localities", function()
      local function ep(port, health, weight)
        return { endpoint = { address = { socket_address = { address = "10.0.0.1", port_value = port } } },
          health_status = health, load_balancing_weight = weight and { value = weight } }
      end
      local cla = { cluster_name = "c", endpoints = {
        { priority = 0, load_balancing_weight = { value = 2 }, lb_endpoints = { ep(1, 2), ep(2, 3) } }, -- unhealthy
        { priority = 1, load_balancing_weight = { value = 2 }, lb_endpoints = { ep(3, 1, 5), ep(4, 0), ep(5, 5) } },
        { priority = 1, lb_endpoints = { ep(6, 1) } }, -- no locality weight: left out, as gRPC does
        { priority = 2, load_balancing_weight = { value = 1 }, lb_endpoints = { ep(7, 1) } },
      } }
      local got = {}
      for i, p in ipairs(xds.places_of(cla)) do got[i] = p.port .. "*" .. p.weight end
      assert.are.same({ "3*10", "4*2" }, got) -- HEALTHY and UNKNOWN; DEGRADED (5) is not taken
      cla.endpoints[2].lb_endpoints = { ep(3, 2) }
      got = {}
      for i, p in ipairs(xds.places_of(cla)) do got[i] = p.port .. "*" .. p.weight end
      assert.are.same({ "7*1" }, got)
    end)
  end)

  describe("resource checks (the NACK's reason)", function()
    local U32 = 4294967295
    local check = xds_client.check
    local function ep(address, weight)
      return { endpoint = { address = { socket_address = { address = address, port_value = 80 } } },
        load_balancing_weight = weight and { value = weight } }
    end
    -- each locality named (a zone of its own) unless it says locality = false
    local function cla(locs)
      for i, loc in ipairs(locs) do
        if loc.locality == false then
          loc.locality = nil
        elseif loc.locality == nil then
          loc.locality = { zone = "z" .. i }
        end
      end
      return { cluster_name = "c", endpoints = locs }
    end

    it("refuses weight sums above uint32 max, as gRPC and Envoy do", function()
      assert.is_nil(check("EDS", cla { { load_balancing_weight = { value = U32 },
        lb_endpoints = { ep("10.0.0.1", U32 - 1), ep("10.0.0.2", 1) } } }))
      assert.are.equal("endpoints[0].lb_endpoints: the load_balancing_weights sum to 8589934590, more than 4294967295",
        check("EDS", cla { { load_balancing_weight = { value = 1 }, lb_endpoints = { ep("10.0.0.1", U32),
          ep("10.0.0.2", U32) } } }))
      assert.are.equal("endpoints[1].lb_endpoints: the load_balancing_weights sum to 4294967296, more than 4294967295",
        check("EDS", cla { { load_balancing_weight = { value = 1 }, lb_endpoints = { ep("10.0.0.1") } },
          { load_balancing_weight = { value = 1 }, lb_endpoints = { ep("10.0.0.3", U32), ep("10.0.0.2") } } }))
      assert.are.equal("endpoints: the load_balancing_weights of priority 0's localities sum to 8589934590, more than "
        .. "4294967295", check("EDS", cla { { load_balancing_weight = { value = U32 },
          lb_endpoints = { ep("10.0.0.1") } }, { load_balancing_weight = { value = U32 },
          lb_endpoints = { ep("10.0.0.2") } } }))
      -- per priority, as gRPC sums them
      assert.is_nil(check("EDS", cla { { load_balancing_weight = { value = U32 }, lb_endpoints = { ep("10.0.0.1") } },
        { priority = 1, load_balancing_weight = { value = U32 }, lb_endpoints = { ep("10.0.0.2") } } }))
      local function split(a, b)
        return { name = "rc", virtual_hosts = { { domains = { "*" }, routes = { { match = { prefix = "" },
          route = { weighted_clusters = { clusters = { { name = "A", weight = { value = a } },
            { name = "B", weight = { value = b } } } } } } } } } }
      end
      assert.is_nil(check("RDS", split(U32 - 1, 1)))
      assert.are.equal("virtual_hosts[0].routes[0].route.weighted_clusters: the weights sum to 8589934590, more than "
        .. "4294967295", check("RDS", split(U32, U32)))
    end)

    it("weighs endpoint x locality without wrapping", function()
      -- (2^32-1)^2 wraps to a negative Lua 5.4 integer, that the balancer took as 1
      local places = xds.places_of(cla {
        { load_balancing_weight = { value = U32 }, lb_endpoints = { ep("10.0.0.1", U32) } },
        { load_balancing_weight = { value = 1 }, lb_endpoints = { ep("10.0.0.2", 1) } },
        { load_balancing_weight = { value = 3 }, lb_endpoints = { ep("10.0.0.3", 5) } } })
      assert.are.equal(3, #places)
      assert.is_true(places[1].weight > 1.8e19, tostring(places[1].weight))
      assert.are.equal(1, places[2].weight)
      assert.are.equal(15, places[3].weight)
      assert.are.equal("15", tostring(places[3].weight)) -- an integer while it fits
    end)

    local function rc_with(match, action, vh_retry)
      return { name = "rc", virtual_hosts = { { domains = { "*" }, retry_policy = vh_retry,
        routes = { { match = match, route = action or { cluster = "A" } } } } } }
    end

    it("refuses what RE2 refuses, naming the field and RE2's reason", function()
      assert.are.equal([[virtual_hosts[0].routes[0].match.safe_regex.regex: "(a)\\1" is not an RE2 pattern: ]]
        .. [[invalid escape sequence: \1]], check("RDS", rc_with { safe_regex = { regex = "(a)\\1" } }))
      assert.are.equal([[virtual_hosts[0].routes[0].match.headers[1].safe_regex_match.regex: "(?=x)" is not an ]]
        .. [[RE2 pattern: invalid perl operator: (?=]], check("RDS", rc_with { prefix = "", headers = {
          { name = "a", present_match = true }, { name = "b", safe_regex_match = { regex = "(?=x)" } } } }))
      assert.are.equal("virtual_hosts[0].routes[0].match.headers[0].string_match.safe_regex.regex: empty",
        check("RDS", rc_with { prefix = "", headers = { { name = "b", string_match = { safe_regex = {} } } } }))
      assert.are.equal("virtual_hosts[0].routes[0].match: prefix, path or safe_regex expected (others are not "
        .. "supported)", check("RDS", rc_with {}))
      assert.are.equal([[virtual_hosts[0].routes[0].match.safe_regex.regex: "[" is not an RE2 pattern: missing ]: []],
        check("RDS", rc_with { safe_regex = { regex = "[" } }))
    end)

    it("maps retry_policy as gRFC A44 does, the route's over the virtual host's", function()
      local rc = rc_with({ prefix = "" }, { cluster = "A", retry_policy = { retry_on = "5xx, unavailable,cancelled,"
        .. "reset", num_retries = { value = 9 } } })
      assert.is_nil(check("RDS", rc))
      assert.are.same({ codes = { UNAVAILABLE = true, CANCELLED = true }, max_attempts = 5, initial = 0.025,
        maximum = 0.25 }, rc.virtual_hosts[1].routes[1].route.retry)
      -- the virtual host's, when the route has none; base and max intervals
      rc = rc_with({ prefix = "" }, nil, { retry_on = "internal,deadline-exceeded,resource-exhausted",
        retry_back_off = { base_interval = { nanos = 100000000 }, max_interval = { seconds = 2 } } })
      assert.is_nil(check("RDS", rc))
      assert.are.same({ codes = { INTERNAL = true, DEADLINE_EXCEEDED = true, RESOURCE_EXHAUSTED = true },
        max_attempts = 2, initial = 0.1, maximum = 2 }, rc.virtual_hosts[1].routes[1].route.retry)
      -- the route's replaces it whole: its conditions gRPC does not take leave no retry
      rc = rc_with({ prefix = "" }, { cluster = "A", retry_policy = { retry_on = "5xx" } },
        { retry_on = "unavailable" })
      assert.is_nil(check("RDS", rc))
      assert.is_false(rc.virtual_hosts[1].routes[1].route.retry)
      local function bad(rp, on_vh)
        return check("RDS", on_vh and rc_with({ prefix = "" }, nil, rp) or rc_with({ prefix = "" },
          { cluster = "A", retry_policy = rp }))
      end
      assert.are.equal("virtual_hosts[0].routes[0].route.retry_policy.num_retries: at least 1 expected, got 0",
        bad { retry_on = "unavailable", num_retries = { value = 0 } })
      assert.are.equal("virtual_hosts[0].retry_policy.retry_back_off.base_interval: above 0 expected, got 0 s",
        bad({ retry_on = "unavailable", retry_back_off = { base_interval = {} } }, true))
      assert.are.equal("virtual_hosts[0].routes[0].route.retry_policy.retry_back_off.base_interval: required",
        bad { retry_back_off = { max_interval = { seconds = 1 } } })
      assert.are.equal("virtual_hosts[0].routes[0].route.retry_policy.retry_back_off.max_interval: at least "
        .. "base_interval (1 s) expected, got 0.5 s", bad { retry_on = "unavailable", retry_back_off = {
          base_interval = { seconds = 1 }, max_interval = { nanos = 500000000 } } })
      assert.are.equal("virtual_hosts[0].routes[0].route.retry_policy.retry_back_off.base_interval.nanos: "
        .. "0..999999999 expected, got -1", bad { retry_back_off = { base_interval = { nanos = -1 } } })
    end)

    it("takes IP literals only as endpoint addresses", function()
      for _, a in ipairs { "127.0.0.1", "0.0.0.0", "255.255.255.255", "::1", "::", "fe80::1:2",
        "2001:db8::ffff:1.2.3.4",
        "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "1::" } do
        assert.is_nil(check("EDS", cla { { load_balancing_weight = { value = 1 }, lb_endpoints = { ep("10.0.0.1"),
          ep(a) } } }), a)
      end
      for _, a in ipairs { "a b", "unix:/tmp/x", "127.0.0.1:1", "[::1]", "localhost", "256.0.0.1", "1.2.3", "1.2.3.4.5",
        "1:2:3:4:5:6:7:8:9", ":1", "1:", "1::2::3", "12345::", ":::1", "1:2:3:4:5:6:7:1.2.3.4",
        " 10.0.0.1", "010.0.0.1", "::ffff:1.2.3.04" } do
        assert.are.equal(("endpoints[0].lb_endpoints[1].endpoint.address.socket_address.address: an IP address "
          .. "expected, got %q"):format(a), check("EDS", cla { { load_balancing_weight = { value = 1 },
            lb_endpoints = { ep("10.0.0.1"), ep(a) } } }), a)
      end
    end)

    -- grpc-core's xds_endpoint_parser.cc and grpc-js-xds's endpoint-resource-type.ts
    it("checks EDS as gRPC does: contiguous priorities, one copy of each address, localities of weight 0 left out",
      function()
        local function loc(p, w, ...)
          return { priority = p, load_balancing_weight = w and { value = w }, lb_endpoints = { ... } }
        end
        assert.is_nil(check("EDS", cla { loc(1, 1, ep("10.0.0.2")), loc(0, 1, ep("10.0.0.1")),
          loc(5, nil, ep("10.0.0.1")), loc(7, 0, ep("no address")) })) -- weight 0 or unset: left out unchecked
        assert.are.equal("endpoints: priority 1 has no locality of a load_balancing_weight above 0 (the priorities "
          .. "must run from 0 without a gap; the highest is 2)", check("EDS", cla { loc(0, 1, ep("10.0.0.1")),
            loc(1, 0, ep("10.0.0.2")), loc(2, 1, ep("10.0.0.3")) }))
        assert.are.equal("endpoints: priority 0 has no locality of a load_balancing_weight above 0 (the priorities "
          .. "must run from 0 without a gap; the highest is 4294967295)",
          check("EDS", cla { loc(4294967295, 1, ep("10.0.0.1")) }))
        assert.are.equal("endpoints[1].lb_endpoints[0].endpoint.address.socket_address: duplicate endpoint address "
          .. "10.0.0.1:80 (endpoints[0].lb_endpoints[1] has it)", check("EDS", cla { loc(0, 1, ep("10.0.0.2"),
            ep("10.0.0.1")), loc(1, 1, ep("10.0.0.1")) }))
        assert.are.equal("endpoints[0].lb_endpoints[1].endpoint.address.socket_address: duplicate endpoint address "
          .. "[::1]:80 (endpoints[0].lb_endpoints[0] has it)", check("EDS", cla { loc(0, 1, ep("::1"), ep("::1")) }))
        local other_port = ep("10.0.0.1")
        other_port.endpoint.address.socket_address.port_value = 81
        assert.is_nil(check("EDS", cla { loc(0, 1, ep("10.0.0.1"), other_port) }))
        assert.are.equal("endpoints[0].lb_endpoints[1].load_balancing_weight: above 0 expected, got 0",
          check("EDS", cla { loc(0, 1, ep("10.0.0.1"), ep("10.0.0.2", 0)) }))
      end)

    -- grpc-core's LocalityParse ("field not present") and EdsResourceParse ("duplicate locality")
    it("refuses a weighted locality without its locality field, and one locality twice in a priority", function()
      local function loc(p, w, name, ...)
        return { priority = p, load_balancing_weight = w and { value = w }, locality = name, lb_endpoints = { ... } }
      end
      assert.are.equal("endpoints[1].locality: missing", check("EDS", cla { loc(0, 1, nil, ep("10.0.0.1")),
        loc(0, 1, false, ep("10.0.0.2")) }))
      -- a locality of weight 0 or unset is left out before its field is read, as grpc-core leaves it
      assert.is_nil(check("EDS", cla { loc(0, 1, nil, ep("10.0.0.1")), loc(0, 0, false, ep("10.0.0.2")),
        loc(0, nil, false, ep("10.0.0.3")) }))
      -- an empty Locality is a locality (region, zone and sub_zone "")
      assert.is_nil(check("EDS", cla { loc(0, 1, {}, ep("10.0.0.1")) }))
      local a = { region = "r", zone = "z", sub_zone = "s" }
      assert.are.equal('endpoints[2].locality: duplicate locality {region="r", zone="z", sub_zone="s"} in priority 0 '
        .. "(endpoints[0] has it)", check("EDS", cla { loc(0, 1, a, ep("10.0.0.1")), loc(0, 1, nil, ep("10.0.0.2")),
          loc(0, 2, { region = "r", zone = "z", sub_zone = "s" }, ep("10.0.0.3")) }))
      assert.are.equal('endpoints[1].locality: duplicate locality {region="", zone="", sub_zone=""} in priority 1 '
        .. "(endpoints[0] has it)", check("EDS", cla { loc(1, 1, {}, ep("10.0.0.1")), loc(1, 1, {}, ep("10.0.0.2")),
          loc(0, 1, {}, ep("10.0.0.3")) }))
      -- the same locality in two priorities, and localities that differ in one field only, are taken
      assert.is_nil(check("EDS", cla { loc(0, 1, a, ep("10.0.0.1")), loc(1, 1, a, ep("10.0.0.2")),
        loc(0, 1, { region = "r", zone = "z" }, ep("10.0.0.3")), loc(0, 1, { region = "r", sub_zone = "zs" },
          ep("10.0.0.4")), loc(0, 1, { region = "rz", sub_zone = "s" }, ep("10.0.0.5")) }))
      -- a duplicate of weight 0 is left out unchecked
      assert.is_nil(check("EDS", cla { loc(0, 1, a, ep("10.0.0.1")), loc(0, 0, a, ep("10.0.0.2")) }))
    end)

    -- grpc-core's grpc_parse_ipv6_hostport: a zone is a number, else an interface of this host
    -- (if_nametoindex); its index is part of the sockaddr the addresses are compared by
    it("takes an IPv6 zone that is a number or names a network interface of this host", function()
      local function loc(...) return { load_balancing_weight = { value = 1 }, lb_endpoints = { ... } } end
      for _, a in ipairs { "fe80::1%1", "fe80::1%lo", "::1%0", "fe80::1%4294967295" } do
        assert.is_nil(check("EDS", cla { loc(ep(a)) }), a)
      end
      local at = "endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address: "
      assert.are.equal(at .. 'the zone of "fe80::1%no-such-if0" is no number and names no network interface of this '
        .. "host", check("EDS", cla { loc(ep("fe80::1%no-such-if0")) }))
      assert.are.equal(at .. 'the zone of "fe80::1%4294967296" is no number and names no network interface of this '
        .. "host", check("EDS", cla { loc(ep("fe80::1%4294967296")) }))
      assert.are.equal(at .. 'the zone of "fe80::1%" is no number and names no network interface of this host',
        check("EDS", cla { loc(ep("fe80::1%")) }))
      for _, a in ipairs { "1.2.3.4%1", "%1", "fe80::g%1" } do
        assert.are.equal(at .. ("an IP address expected, got %q"):format(a), check("EDS", cla { loc(ep(a)) }))
      end
      -- "lo" is interface 1 (Linux); zone 0 is none
      assert.are.equal("endpoints[1].lb_endpoints[0].endpoint.address.socket_address: duplicate endpoint address "
        .. "[fe80::1%1]:80 (endpoints[0].lb_endpoints[0] has it as [fe80::1%lo]:80)",
        check("EDS", cla { loc(ep("fe80::1%lo")), loc(ep("fe80::1%1")) }))
      assert.are.equal("endpoints[1].lb_endpoints[0].endpoint.address.socket_address: duplicate endpoint address "
        .. "[fe80::1%0]:80 (endpoints[0].lb_endpoints[0] has it as [fe80::1]:80)",
        check("EDS", cla { loc(ep("fe80::1")), loc(ep("fe80::1%0")) }))
      assert.is_nil(check("EDS", cla { loc(ep("fe80::1%1")), loc(ep("fe80::1%2")), loc(ep("fe80::1")) }))
      assert.are.equal("fe80::1%1", xds_client.endpoint_host("fe80::1%lo"))
      assert.are.equal("fe80::1", xds_client.endpoint_host("fe80::1"))
      -- an interface gone since the check: the address as written (its connection fails naming it)
      assert.are.equal("fe80::1%no-such-if0", xds_client.endpoint_host("fe80::1%no-such-if0"))
    end)

    -- grpc-core's ResolvedAddressSet compares the sockaddr: family, binary address, port
    it("compares endpoint addresses by their binary address and port, not as written", function()
      local function loc(...) return { load_balancing_weight = { value = 1 }, lb_endpoints = { ... } } end
      for _, pair in ipairs { { "::1", "0::1" }, { "::1", "0:0:0:0:0:0:0:1" }, { "::ffff:1.2.3.4", "::ffff:102:304" },
        { "::FFFF:1.2.3.4", "0:0::ffff:0102:0304" }, { "2001:db8::1", "2001:DB8:0:0:0:0:0:1" },
        { "1::", "1:0:0:0:0:0:0:0" }, { "::", "0:0:0:0:0:0:0.0.0.0" }, { "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:0.7.0.8" } } do
        assert.are.equal(("endpoints[1].lb_endpoints[0].endpoint.address.socket_address: duplicate endpoint address "
          .. "[%s]:80 (endpoints[0].lb_endpoints[0] has it as [%s]:80)"):format(pair[2], pair[1]),
          check("EDS", cla { loc(ep(pair[1])), loc(ep(pair[2])) }), pair[2])
      end
      -- distinct: an IPv4 address and its IPv4-mapped IPv6 one (two sockaddr families), neighbours
      for _, pair in ipairs { { "1.2.3.4", "::ffff:1.2.3.4" }, { "::1", "::2" }, { "1::", "::1" },
        { "::1:0", "::1" }, { "::ffff:1.2.3.4", "::ffff:1.2.3.5" }, { "1:2::", "1::2" } } do
        assert.is_nil(check("EDS", cla { loc(ep(pair[1])), loc(ep(pair[2])) }), pair[2])
      end
      for _, a in ipairs { "::1", "fe80::1:2", "2001:db8::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "::" } do
        assert.are.equal(16, #xds_client.address_key(a, true, 80) - 4, a)
      end
    end)

    it("takes LEAST_REQUEST's choice_count (default 2, at least 2, capped at 10), max_requests (A48, A32)", function()
      local function cl(t)
        local c = { name = "c", type = 3, eds_cluster_config = { eds_config = { ads = {} } } }
        for k, v in pairs(t) do c[k] = v end
        return c, check("CDS", c)
      end
      local c, why = cl { lb_policy = 1 }
      assert.is_nil(why)
      assert.are.same({ 2, 1024 }, { c.choice_count, c.max_requests })
      c = cl { lb_policy = 1, least_request_lb_config = { choice_count = { value = 25 } } }
      assert.are.equal(10, c.choice_count)
      c = cl { lb_policy = 1, least_request_lb_config = { choice_count = { value = 3 } } }
      assert.are.equal(3, c.choice_count)
      why = select(2, cl { lb_policy = 1, least_request_lb_config = { choice_count = { value = 1 } } })
      assert.are.equal("least_request_lb_config.choice_count: at least 2 expected, got 1", why)
      why = select(2, cl { lb_policy = 1, least_request_lb_config = { choice_count = {} } }) -- value 0, left out
      assert.are.equal("least_request_lb_config.choice_count: at least 2 expected, got 0", why)
      c = cl { least_request_lb_config = { choice_count = { value = 1 } } } -- ROUND_ROBIN: not read
      assert.is_nil(c.choice_count)
      -- the first DEFAULT-priority threshold's max_requests; HIGH ones are not gRPC's
      c = cl { circuit_breakers = { thresholds = { { priority = 1, max_requests = { value = 7 } },
        { max_requests = { value = 2 } }, { max_requests = { value = 9 } } } } }
      assert.are.equal(2, c.max_requests)
      c = cl { circuit_breakers = { thresholds = { { priority = 0 } } } }
      assert.are.equal(1024, c.max_requests)
      why = select(2, cl { lb_policy = 5 })
      assert.are.equal("lb_policy: ROUND_ROBIN, LEAST_REQUEST or RING_HASH expected, got MAGLEV", why)
      -- type's oneof: an aggregate cluster (gRFC A37) or another custom type; a type other than EDS
      why = check("CDS", { name = "c", cluster_type = { name = "envoy.clusters.aggregate" } })
      assert.are.equal("cluster_type: aggregate clusters (envoy.clusters.aggregate) are not supported", why)
      why = check("CDS", { name = "c", cluster_type = { name = "envoy.clusters.redis" } })
      assert.are.equal("cluster_type: EDS clusters expected (custom cluster types are not supported), got "
        .. "envoy.clusters.redis", why)
      why = check("CDS", { name = "c", type = 2 })
      assert.are.equal("type: EDS expected (only EDS clusters are supported), got LOGICAL_DNS", why)
    end)

    it("refuses outlier_detection durations out of range, nanos out of 0..999999999 and an interval of 0", function()
      local function od(t)
        return check("CDS", { name = "c", type = 3, eds_cluster_config = { eds_config = { ads = {} } },
          outlier_detection = t })
      end
      assert.is_nil(od { interval = { seconds = 1 }, base_ejection_time = { seconds = 0 } })
      assert.is_nil(od { interval = { seconds = 315576000000 }, max_ejection_time = { seconds = 315576000000 } })
      -- seconds and nanos together: the detector's limit (transport/outlier.lua), so
      -- what is ACKed the target can set
      assert.are.equal("outlier_detection.interval: at most 315576000000 s expected (Duration's range), got "
        .. "315576000000.999999999 s", od { interval = { seconds = 315576000000, nanos = 999999999 } })
      assert.are.equal("outlier_detection.base_ejection_time: at most 315576000000 s expected (Duration's range), "
        .. "got 315576000000.500000000 s", od { base_ejection_time = { seconds = 315576000000, nanos = 500000000 } })
      assert.are.equal("outlier_detection.interval: at most 315576000000 s expected (Duration's range), got "
        .. "315576000001 s", od { interval = { seconds = 315576000001 } })
      assert.are.equal("outlier_detection.interval: a duration above 0 expected (Envoy's rule), got 0",
        od { interval = { seconds = 0 } })
      assert.are.equal("outlier_detection.interval.nanos: 0..999999999 expected, got -5",
        od { interval = { seconds = 1, nanos = -5 } })
      assert.are.equal("outlier_detection.base_ejection_time.nanos: 0..999999999 expected, got 2000000000",
        od { base_ejection_time = { seconds = 1, nanos = 2000000000 } })
      assert.are.equal("outlier_detection.max_ejection_time: a duration of at least 0 expected, got -1 s",
        od { max_ejection_time = { seconds = -1 } })
    end)
  end)

  -- The ADS service as in_process serves it: a DiscoveryResponse whose resources,
  -- version_info, type_url and nonce are bytes, so that a spec can send what no
  -- encoder of the real message would (an Any that does not decode, a string that is
  -- no UTF-8); on the wire the same as Envoy's.
  local RAW_ADS = pc.pool()
  assert(RAW_ADS:load([[syntax = "proto3"; package envoy.service.discovery.v3;
    import "google/rpc/status.proto";
    message DiscoveryRequest { string version_info = 1; repeated string resource_names = 3; string type_url = 4;
      string response_nonce = 5; google.rpc.Status error_detail = 6; }
    message DiscoveryResponse { bytes version_info = 1; repeated bytes resources = 2; bytes type_url = 4;
      bytes nonce = 5; }
    service AggregatedDiscoveryService {
      rpc StreamAggregatedResources(stream DiscoveryRequest) returns (stream DiscoveryResponse); }]],
    { name = "raw_ads.proto" }))

  -- An ADS server in this process (pc.listen, no Node): `answer(kind, request)`
  -- returns the DiscoveryResponses (tables; each resource a google.protobuf.Any
  -- table, or its encoding as a string sent as it is) to send for the first
  -- request of each type; every request is logged (decoded). body(t, log, port,
  -- push) runs as a task with t an xds:///svc target (pc.grpc's options `opts`
  -- added); backend port `port` answers Who; push(response) sends one more
  -- DiscoveryResponse (a table, as answer's) on the stream.
  local function in_process(answer, body, opts)
    local U, enc = protos.TYPE_URL, function(name, t) return core.encode(protos.type(name), t) end
    local backend = pc.listen(pc.server({ ["xt.Named"] = { Who = function() return { name = "b" } end } },
      { pool = pool }), "127.0.0.1:0")
    pc.spawn(function() backend:serve() end)
    local log, err, stream = {}, nil, nil
    local function send(ctx, r)
      local list = {}
      for i, a in ipairs(r.resources or {}) do
        list[i] = type(a) == "table" and enc("google.protobuf.Any", a) or a
      end
      r.resources = list
      ctx.send(r)
    end
    local ms = pc.listen(pc.server({ ["envoy.service.discovery.v3.AggregatedDiscoveryService"] = {
      StreamAggregatedResources = function(ctx)
        stream = ctx
        while true do
          local req = ctx.recv()
          if not req then return end
          log[#log + 1] = req
          local kind
          for k, u in pairs(U) do if u == req.type_url then kind = k end end
          if kind and (req.response_nonce or "") == "" then
            for _, r in ipairs(answer(kind, req, enc, backend.port) or {}) do send(ctx, r) end
          end
        end
      end } }, { pool = RAW_ADS }), "127.0.0.1:0")
    pc.spawn(function() ms:serve() end)
    pc.spawn(function()
      local o = { xds_bootstrap = json_encode { xds_servers = { { server_uri = "127.0.0.1:"
        .. ms.port, channel_creds = { { type = "insecure" } } } }, node = { id = "n" } } }
      for k, v in pairs(opts or {}) do o[k] = v end
      local t = pc.grpc("xds:///svc", o)
      local ok, e = xpcall(body, debug.traceback, t, log, backend.port, function(r) send(stream, r) end)
      if not ok then err = e end
      t:close()
      ms:shutdown(0)
      backend:shutdown(0)
    end)
    pc.run()
    assert(err == nil, err)
  end

  -- Resources (google.protobuf.Any tables) for in_process's answers.
  local function any(enc, kind, name, t)
    return { type_url = protos.TYPE_URL[kind], value = enc(name, t) }
  end
  local LISTENER_T, RC_T = "envoy.config.listener.v3.Listener", "envoy.config.route.v3.RouteConfiguration"
  local CLUSTER_T, CLA_T = "envoy.config.cluster.v3.Cluster", "envoy.config.endpoint.v3.ClusterLoadAssignment"
  local HCM_T = protos.HCM:match("/(.*)$")
  local function routes(action)
    return { name = "rc", virtual_hosts = { { name = "vh", domains = { "*" }, routes = { { match = { prefix = "" },
      route = action or { cluster = "A" } } } } } }
  end
  local function listener(enc, hcm)
    return any(enc, "LDS", LISTENER_T, { name = "svc", api_listener = { api_listener = { type_url = protos.HCM,
      value = enc(HCM_T, hcm or { route_config = routes() }) } } })
  end
  local ZERO_SPLIT = { weighted_clusters = { clusters = { { name = "A", weight = { value = 0 } },
    { name = "B", weight = { value = 0 } } } } }
  -- answer() serving svc -> A -> the backend, with `over` replacing some kinds' resources.
  local function serving(over)
    return function(kind, req, enc, port)
      local resources
      if over[kind] then
        resources = over[kind](enc, port)
      elseif kind == "LDS" then
        resources = { listener(enc) }
      elseif kind == "RDS" then
        resources = { any(enc, "RDS", RC_T, routes()) }
      elseif kind == "CDS" then
        resources = { any(enc, "CDS", CLUSTER_T, { name = "A", type = 3,
          eds_cluster_config = { eds_config = { ads = {} } } }) }
      else
        resources = { any(enc, "EDS", CLA_T, { cluster_name = "A", endpoints = { { locality = { zone = "z1" },
          load_balancing_weight = { value = 1 }, lb_endpoints = { { endpoint = { address = { socket_address = {
            address = "127.0.0.1",
            port_value = port } } } } } } } }) }
      end
      return { { version_info = "1", type_url = req.type_url, nonce = kind .. "-1", resources = resources } }
    end
  end

  local function call(t, timeout)
    local c = pc.client("xt.Named", { pool = pool, transport = t })
    return pcall(c.Who, c, {}, { timeout = timeout or 0.5 })
  end

  describe("a call whose configuration was NACKed", function()
    local cases = {
      { "an LDS listener with a zero-weight split", { LDS = function(enc)
        return { listener(enc, { route_config = routes(ZERO_SPLIT) }) }
      end }, "listener svc: NACKed LDS with no good copy: envoy.config.listener.v3.Listener svc: "
        .. "api_listener.api_listener.route_config.virtual_hosts[0].routes[0].route.weighted_clusters: the weights sum "
        .. "to 0" },
      { "an RDS route configuration with a zero-weight split", { LDS = function(enc)
        return { listener(enc, { rds = { config_source = { ads = {} }, route_config_name = "rc" } }) }
      end, RDS = function(enc) return { any(enc, "RDS", RC_T, routes(ZERO_SPLIT)) } end },
        "route configuration rc: NACKed RDS with no good copy: envoy.config.route.v3.RouteConfiguration rc: "
        .. "virtual_hosts[0].routes[0].route.weighted_clusters: the weights sum to 0" },
      { "two listeners of one name", { LDS = function(enc) return { listener(enc), listener(enc) } end },
        "listener svc: NACKed LDS with no good copy: resources[1]: envoy.config.listener.v3.Listener svc named "
        .. "twice in one response" },
      { "two clusters of one name", { CDS = function(enc)
        local a = { name = "A", type = 3, eds_cluster_config = { eds_config = { ads = {} } } }
        return { any(enc, "CDS", CLUSTER_T, a), any(enc, "CDS", CLUSTER_T, a) }
      end }, "cluster A: NACKed CDS with no good copy: resources[1]: envoy.config.cluster.v3.Cluster A named "
        .. "twice in one response" },
      { "a cluster whose outlier_detection interval is too long", { CDS = function(enc)
        return { any(enc, "CDS", CLUSTER_T, { name = "A", type = 3, eds_cluster_config = { eds_config = { ads = {} } },
          outlier_detection = { interval = { seconds = 315576000001 } } }) }
      end }, "cluster A: NACKed CDS with no good copy: envoy.config.cluster.v3.Cluster A: "
        .. "outlier_detection.interval: at most 315576000000 s expected (Duration's range), got 315576000001 s" },
      { "a cluster whose outlier_detection interval is too long by its nanos", { CDS = function(enc)
        return { any(enc, "CDS", CLUSTER_T, { name = "A", type = 3, eds_cluster_config = { eds_config = { ads = {} } },
          outlier_detection = { interval = { seconds = 315576000000, nanos = 999999999 } } }) }
      end }, "cluster A: NACKed CDS with no good copy: envoy.config.cluster.v3.Cluster A: "
        .. "outlier_detection.interval: at most 315576000000 s expected (Duration's range), got "
        .. "315576000000.999999999 s" },
      { "endpoint weights summing past uint32 max", { EDS = function(enc, port)
        local function e(w, a) return { endpoint = { address = { socket_address = { address = a,
          port_value = port } } }, load_balancing_weight = { value = w } } end
        return { any(enc, "EDS", CLA_T, { cluster_name = "A", endpoints = { { locality = { zone = "z1" },
          load_balancing_weight = { value = 1 },
          lb_endpoints = { e(4294967295, "127.0.0.1"), e(1, "127.0.0.2") } } } }) }
      end }, "cluster A: NACKed EDS with no good copy: "
        .. "envoy.config.endpoint.v3.ClusterLoadAssignment A: endpoints[0].lb_endpoints: the load_balancing_weights "
        .. "sum to 4294967296, more than 4294967295" },
      { "an aggregate cluster", { CDS = function(enc)
        return { any(enc, "CDS", CLUSTER_T, { name = "A", cluster_type = { name = "envoy.clusters.aggregate" } }) }
      end }, "cluster A: NACKed CDS with no good copy: envoy.config.cluster.v3.Cluster A: cluster_type: "
        .. "aggregate clusters (envoy.clusters.aggregate) are not supported" },
      { "an endpoint address twice in one assignment", { EDS = function(enc, port)
        local e = { endpoint = { address = { socket_address = { address = "127.0.0.1", port_value = port } } } }
        return { any(enc, "EDS", CLA_T, { cluster_name = "A", endpoints = { { locality = { zone = "z1" },
          load_balancing_weight = { value = 1 }, lb_endpoints = { e } }, { priority = 1, locality = { zone = "z1" },
          load_balancing_weight = { value = 1 }, lb_endpoints = { e } } } }) }
      end }, "cluster A: NACKed EDS with no good copy: "
        .. "envoy.config.endpoint.v3.ClusterLoadAssignment A: endpoints[1].lb_endpoints[0].endpoint.address."
        .. "socket_address: duplicate endpoint address 127.0.0.1:PORT (endpoints[0].lb_endpoints[0] has it)" },
      { "an endpoint address that is a host name", { EDS = function(enc, port)
        return { any(enc, "EDS", CLA_T, { cluster_name = "A", endpoints = { { locality = { zone = "z1" },
          load_balancing_weight = { value = 1 }, lb_endpoints = { { endpoint = { address = { socket_address = {
            address = "a b", port_value = port } } } } } } } }) }
      end }, "cluster A: NACKed EDS with no good copy: "
        .. "envoy.config.endpoint.v3.ClusterLoadAssignment A: "
        .. "endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address: an IP address expected, "
        .. "got \"a b\"" },
    }
    -- refused with no good copy, a listener or route configuration fails calls UNAVAILABLE at once
    -- naming the NACK, as grpc-go's resolver does on a resource error with nothing cached; a cluster
    -- or its endpoints too, as grpc-core's cds policy fails them (it reports TRANSIENT_FAILURE with
    -- "CDS resource A: ..." / the EDS resolution note)
    for _, case in ipairs(cases) do
      it("fails UNAVAILABLE at once naming the NACK: " .. case[1], function()
        in_process(serving(case[2]), function(t, log, port)
          local ok, e = call(t, 5)
          assert.is_false(ok)
          assert.are.equal("UNAVAILABLE", e.code)
          assert.are.equal("xds:///svc: " .. case[3]:gsub("PORT", port), e.message)
          local nacked
          local t0 = pc.now()
          repeat -- a call failing at once may end before the NACK reached the server
            for _, r in ipairs(log) do if r.error_detail then nacked = r end end
            if not nacked then pc.sleep(0.01) end
          until nacked or pc.now() - t0 > 3
          assert.is_not_nil(nacked, "no NACK reached the server")
          assert.are.equal(3, nacked.error_detail.code)
        end)
      end)
    end

    it("lets a wait_for_ready call wait for a NACKed listener, naming the NACK", function()
      in_process(serving(cases[1][2]), function(t)
        local ok, e = call(t, 0.5)
        assert.is_false(ok)
        assert.are.equal("DEADLINE_EXCEEDED", e.code)
        assert.are.equal("xds:///svc: deadline exceeded while waiting for listener svc (LDS) (" .. cases[1][3] .. ")",
          e.message)
      end, { wait_for_ready = true })
    end)

    it("reaches an endpoint whose IPv6 address has a zone (an interface name: its index)", function()
      local v6 = pc.listen(pc.server({ ["xt.Named"] = { Who = function() return { name = "v6" } end } },
        { pool = pool }), "[::1]:0")
      pc.spawn(function() v6:serve() end)
      in_process(serving { EDS = function(enc)
        return { any(enc, "EDS", CLA_T, { cluster_name = "A", endpoints = { { locality = { zone = "z1" },
          load_balancing_weight = { value = 1 }, lb_endpoints = { { endpoint = { address = { socket_address = {
            address = "::1%lo", port_value = v6.port } } } } } } } }) }
      end }, function(t)
        local ok, r = call(t, 3)
        v6:shutdown(0)
        assert(ok, tostring(r))
        assert.are.equal("v6", r.name)
      end)
    end)

    it("works with the same server when nothing is refused", function()
      in_process(serving {}, function(t)
        local ok, r = call(t, 3)
        assert(ok, tostring(r))
        assert.are.equal("b", r.name)
      end)
    end)
  end)

  -- grpc-core: the XdsDependencyManager makes a cluster whose CDS resource is refused or does not
  -- exist "CDS resource A: ...", one whose EDS resource is refused, does not exist or has no
  -- endpoint an empty priority list with its resolution note; the cds policy then reports
  -- TRANSIENT_FAILURE, whose picker fails a call UNAVAILABLE unless it is wait_for_ready
  describe("a call to a cluster that never had a good resource", function()
    local EMPTY = { EDS = function(enc) return { any(enc, "EDS", CLA_T, { cluster_name = "A" }) } end }
    local NO_EDS = { EDS = function(enc) -- another assignment: A's never comes
      return { any(enc, "EDS", CLA_T, { cluster_name = "Z" }) }
    end }
    local BAD_CDS = { CDS = function(enc)
      return { any(enc, "CDS", CLUSTER_T, { name = "A", type = 3, lb_policy = 5,
        eds_cluster_config = { eds_config = { ads = {} } } }) }
    end }
    local NO_CDS = { CDS = function(enc)
      return { any(enc, "CDS", CLUSTER_T, { name = "Z", type = 3,
        eds_cluster_config = { eds_config = { ads = {} } } }) }
    end }
    local saved
    before_each(function()
      saved = xds_client.RESOURCE_TIMEOUT
      xds_client.RESOURCE_TIMEOUT = 0.3
    end)
    after_each(function() xds_client.RESOURCE_TIMEOUT = saved end)

    it("fails UNAVAILABLE once its endpoints are taken not to exist (the does-not-exist timer)", function()
      in_process(serving(NO_EDS), function(t)
        local ok, e = call(t, 5)
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", e.code)
        assert.are.equal("xds:///svc: cluster A: endpoints A do not exist (EDS)", e.message)
        assert.are.same({ nil, "absent" }, { t.client:get("EDS", "A") })
      end)
    end)

    it("never takes a resource not to exist while the management server cannot be reached (gRFC A57)", function()
      xds_client.RESOURCE_TIMEOUT = 0.05
      pc.spawn(function()
        local t = pc.grpc("xds:///unreachable", { xds_bootstrap = [[{"xds_servers": [{"server_uri": "127.0.0.1:1",
          "channel_creds": [{"type": "insecure"}]}], "node": {"id": "n"}}]] })
        local ok, e = pcall(t.unary, t, "/x.Y/Z", "", { timeout = 0.5 })
        local state = select(2, t.client:get("LDS", "unreachable"))
        t:close()
        assert.is_false(ok)
        assert.are.equal("DEADLINE_EXCEEDED", e.code)
        assert.are.equal("unknown", state)
      end)
      pc.run()
    end)

    it("never takes a resource not to exist while the management server takes the connection and never speaks "
      .. "HTTP/2 (gRFC A57: the channel is not READY before its SETTINGS)", function()
      xds_client.RESOURCE_TIMEOUT = 0.05
      local hole = helper.spawn("silent")
      pc.spawn(function()
        local t = pc.grpc("xds:///hole", { xds_bootstrap = ([[{"xds_servers": [{"server_uri": "127.0.0.1:%d",
          "channel_creds": [{"type": "insecure"}]}], "node": {"id": "n"}}]]):format(hole.port) })
        local ok, e = pcall(t.unary, t, "/x.Y/Z", "", { timeout = 0.5 })
        local state = select(2, t.client:get("LDS", "hole"))
        t:close()
        helper.stop(hole)
        assert.is_false(ok)
        assert.are.equal("DEADLINE_EXCEEDED", e.code, tostring(e.message))
        assert.are.equal("unknown", state)
      end)
      pc.run()
    end)

    it("takes a listener not to exist when the management server answers nothing at all (the timer starts once "
      .. "the request went out, gRFC A27, A57)", function()
      -- (a server owes no response while nothing asked for exists: the timer started at the
      -- stream's first response, so the calls waited to their deadline)
      in_process(function() return {} end, function(t, log)
        local ok, e = call(t, 3)
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", e.code) -- (not DEADLINE_EXCEEDED)
        assert.are.equal("xds:///svc: listener svc does not exist (LDS)", e.message)
        assert.are.equal(protos.TYPE_URL.LDS, log[1].type_url) -- asked, never answered
      end)
    end)

    it("takes a cluster deleted by the next CDS answer not to exist at once, one never received by its timer",
      function()
      xds_client.RESOURCE_TIMEOUT = 60
      in_process(serving {}, function(t, _, _, push)
        local ok, r = call(t, 5)
        assert(ok, tostring(r))
        push { version_info = "2", type_url = protos.TYPE_URL.CDS, nonce = "CDS-2", resources = {} }
        local t0 = pc.now()
        repeat
          pc.sleep(0.01)
          t.client:poll(0)
        until t.client.version.CDS == "2" or pc.now() - t0 > 3
        local e
        ok, e = call(t, 5)
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", e.code)
        assert.are.equal("xds:///svc: cluster A does not exist (CDS)", e.message)
      end)
      -- never received, the answer lacking it says nothing: the call waits out its deadline
      in_process(serving(NO_CDS), function(t)
        local ok, e = call(t, 0.5)
        assert.is_false(ok)
        assert.are.equal("DEADLINE_EXCEEDED", e.code)
        assert.are.equal("xds:///svc: deadline exceeded while waiting for cluster A (CDS)", e.message)
        assert.are.same({ nil, "unknown" }, { t.client:get("CDS", "A") })
      end)
    end)

    it("drops a deleted cluster's endpoints: back, it waits for new ones", function()
      xds_client.RESOURCE_TIMEOUT = 60
      in_process(serving {}, function(t, _, port, push)
        local function until_version(kind, v)
          local t0 = pc.now()
          repeat
            pc.sleep(0.01)
            t.client:poll(0)
          until t.client.version[kind] == v or pc.now() - t0 > 3
        end
        local function good(kind, version)
          local url = protos.TYPE_URL[kind]
          push { version_info = version, type_url = url, nonce = kind .. "-" .. version, resources = serving {}(kind,
            { type_url = url }, function(name, v) return core.encode(protos.type(name), v) end, port)[1].resources }
          until_version(kind, version)
        end
        local ok, r = call(t, 5)
        assert(ok, tostring(r))
        push { version_info = "2", type_url = protos.TYPE_URL.CDS, nonce = "CDS-2", resources = {} }
        until_version("CDS", "2")
        local e
        ok, e = call(t, 5)
        assert.is_false(ok)
        assert.are.equal("xds:///svc: cluster A does not exist (CDS)", e.message)
        -- back: its endpoints were dropped with it (A's EDS unsubscribed), the old ones are not used
        good("CDS", "3")
        ok, e = call(t, 0.5)
        assert.is_false(ok)
        assert.are.equal("DEADLINE_EXCEEDED", e.code)
        assert.are.equal("xds:///svc: deadline exceeded while waiting for cluster A endpoints (EDS A)", e.message)
        good("EDS", "3")
        ok, r = call(t, 5)
        assert(ok, tostring(r))
        assert.are.equal("b", r.name)
      end)
    end)

    it("follows a cluster that flaps: good, NACKed (the last good copy serves), deleted, good again", function()
      xds_client.RESOURCE_TIMEOUT = 60
      in_process(serving {}, function(t, _, port, push)
        local version = 1
        local function cds(resources)
          version = version + 1
          local v = tostring(version)
          push { version_info = v, type_url = protos.TYPE_URL.CDS, nonce = "CDS-" .. v, resources = resources }
          local t0 = pc.now()
          repeat -- taken (a version) or NACKed (a nonce)
            pc.sleep(0.01)
            t.client:poll(0)
            local _, nacks = t.client:versions()
          until t.client.version.CDS == v or (nacks.CDS and nacks.CDS.nonce == "CDS-" .. v) or pc.now() - t0 > 3
        end
        local enc = function(name, v) return core.encode(protos.type(name), v) end
        local ok, r = call(t, 5)
        assert(ok, tostring(r))
        cds { any(enc, "CDS", CLUSTER_T, { name = "A", type = 3, lb_policy = 5,
          eds_cluster_config = { eds_config = { ads = {} } } }) }
        ok, r = call(t, 5)
        assert(ok, tostring(r))
        assert.are.equal("b", r.name)
        cds {}
        local e
        ok, e = call(t, 5)
        assert.is_false(ok)
        assert.are.equal("xds:///svc: cluster A does not exist (CDS)", e.message)
        cds(serving {}("CDS", { type_url = protos.TYPE_URL.CDS }, enc, port)[1].resources)
        pc.spawn(function() -- once the call asked for A's endpoints again (dropped with A)
          pc.sleep(0.2)
          push { version_info = "9", type_url = protos.TYPE_URL.EDS, nonce = "EDS-9",
            resources = serving {}("EDS", { type_url = protos.TYPE_URL.EDS }, enc, port)[1].resources }
        end)
        ok, r = call(t, 5)
        assert(ok, tostring(r))
        assert.are.equal("b", r.name)
      end)
    end)

    it("names the cluster when it does not exist, is refused, or has no endpoint", function()
      for _, case in ipairs {
        { NO_CDS, "cluster A does not exist (CDS)" },
        { BAD_CDS, "cluster A: NACKed CDS with no good copy: envoy.config.cluster.v3.Cluster A: lb_policy: "
          .. "ROUND_ROBIN, LEAST_REQUEST or RING_HASH expected, got MAGLEV" },
        { EMPTY, "cluster A has no healthy endpoint" } } do
        in_process(serving(case[1]), function(t)
          local ok, e = call(t, 5)
          assert.is_false(ok)
          assert.are.equal("UNAVAILABLE", e.code)
          assert.are.equal("xds:///svc: " .. case[2], e.message)
        end)
      end
    end)

    it("names a refusal in at most 4096 bytes, however long the control plane's text", function()
      local long = ("é"):rep(3000) -- 6000 bytes
      in_process(serving { CDS = function(enc)
        return { any(enc, "CDS", CLUSTER_T, { name = "A", cluster_type = { name = long } }) }
      end }, function(t)
        local ok, e = call(t, 5)
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", e.code)
        local problem = "envoy.config.cluster.v3.Cluster A: cluster_type: EDS clusters expected (custom cluster "
          .. "types are not supported), got " .. long
        local cut = problem:sub(1, 4096) -- whole characters only
        if cut:byte(-1) == 0xc3 then cut = cut:sub(1, -2) end
        assert.are.equal("xds:///svc: cluster A: NACKed CDS with no good copy: " .. cut .. "...", e.message)
      end)
    end)

    it("lets wait_for_ready calls wait, naming why, and pass once a good resource comes", function()
      for _, case in ipairs {
        { NO_EDS, "(EDS A) (cluster A: endpoints A do not exist (EDS))" },
        { BAD_CDS, "(CDS) (cluster A: NACKed CDS with no good copy: envoy.config.cluster.v3.Cluster A: lb_policy: "
          .. "ROUND_ROBIN, LEAST_REQUEST or RING_HASH expected, got MAGLEV)" },
        { NO_CDS, "(CDS) (cluster A does not exist (CDS))" },
        { EMPTY, "(EDS A) (cluster A has no healthy endpoint)" } } do
        in_process(serving(case[1]), function(t, log, port, push)
          local ok, e = call(t, 1)
          assert.is_false(ok)
          assert.are.equal("DEADLINE_EXCEEDED", e.code)
          assert.are.equal("xds:///svc: deadline exceeded while waiting for cluster A" .. (case[2]:find("^%(EDS")
            and " endpoints " or " ") .. case[2], e.message)
          -- the good resources arrive while a call waits: CDS, then EDS once A's is asked for
          pc.spawn(function()
            pc.sleep(0.2)
            local function good(kind)
              local url = protos.TYPE_URL[kind]
              push { version_info = "2", type_url = url, nonce = kind .. "-2", resources = serving {}(kind,
                { type_url = url }, function(name, v) return core.encode(protos.type(name), v) end, port)[1].resources }
            end
            good("CDS")
            local t0 = pc.now()
            repeat
              pc.sleep(0.01)
              local asked
              for _, q in ipairs(log) do
                if q.type_url == protos.TYPE_URL.EDS and (q.resource_names or {})[1] == "A" then asked = true end
              end
            until asked or pc.now() - t0 > 3
            -- (NO_CDS: the server answers A's first EDS request itself; the call may be over)
            pcall(good, "EDS")
          end)
          local r
          ok, r = call(t, 5)
          assert(ok, tostring(r))
          assert.are.equal("b", r.name)
        end, { wait_for_ready = true })
      end
    end)
  end)

  -- grpc-core's xds resolver: a listener or route configuration that does not exist
  -- (OnResourceDoesNotExist) gives the channel no address, whose picker fails a call UNAVAILABLE
  -- unless it is wait_for_ready; a virtual host none matches is an error the same way
  describe("a call whose listener or route configuration does not exist", function()
    local RDS_RC = { LDS = function(enc)
      return { listener(enc, { rds = { config_source = { ads = {} }, route_config_name = "rc" } }) }
    end }
    local cases = {
      { "a listener never sent", { LDS = function(enc) -- another listener: svc's never comes
        return { any(enc, "LDS", LISTENER_T, { name = "other", api_listener = { api_listener = {
          type_url = protos.HCM, value = enc(HCM_T, { route_config = routes() }) } } }) }
      end }, "listener svc (LDS)", "listener svc does not exist (LDS)", function(enc) return "LDS", listener(enc) end },
      { "a route configuration never sent", { LDS = RDS_RC.LDS, RDS = function(enc)
        local rc = routes()
        rc.name = "other"
        return { any(enc, "RDS", RC_T, rc) }
      end }, "route configuration rc (RDS)", "route configuration rc does not exist (RDS)",
        function(enc) return "RDS", any(enc, "RDS", RC_T, routes()) end },
    }
    local saved
    before_each(function()
      saved = xds_client.RESOURCE_TIMEOUT
      xds_client.RESOURCE_TIMEOUT = 0.3
    end)
    after_each(function() xds_client.RESOURCE_TIMEOUT = saved end)

    for _, case in ipairs(cases) do
      it("fails UNAVAILABLE once it is taken not to exist: " .. case[1], function()
        in_process(serving(case[2]), function(t)
          local ok, e = call(t, 5)
          assert.is_false(ok)
          assert.are.equal("UNAVAILABLE", e.code)
          assert.are.equal("xds:///svc: " .. case[4], e.message)
        end)
      end)

      it("lets wait_for_ready calls wait, naming why, and pass once it comes: " .. case[1], function()
        in_process(serving(case[2]), function(t, _, _, push)
          local ok, e = call(t, 1)
          assert.is_false(ok)
          assert.are.equal("DEADLINE_EXCEEDED", e.code)
          assert.are.equal("xds:///svc: deadline exceeded while waiting for " .. case[3] .. " (" .. case[4] .. ")",
            e.message)
          pc.spawn(function()
            pc.sleep(0.2)
            local kind, res = case[5](function(name, v) return core.encode(protos.type(name), v) end)
            push { version_info = "2", type_url = protos.TYPE_URL[kind], nonce = kind .. "-2", resources = { res } }
          end)
          local r
          ok, r = call(t, 5)
          assert(ok, tostring(r))
          assert.are.equal("b", r.name)
        end, { wait_for_ready = true })
      end)
    end
  end)

  describe("ADS requests", function()
    it("ask for all the clusters a route configuration names at once, not once per cluster", function()
      local many = { weighted_clusters = { clusters = {} } }
      for i = 1, 100 do many.weighted_clusters.clusters[i] = { name = "C" .. i, weight = { value = 1 } } end
      in_process(serving { LDS = function(enc) return { listener(enc, { route_config = routes(many) }) } end },
        function(t, log)
        call(t, 0.3)
        local partial, whole = 0, 0
        for _, q in ipairs(log) do
          if q.type_url == protos.TYPE_URL.CDS then
            if #(q.resource_names or {}) == 100 then whole = whole + 1 else partial = partial + 1 end
          end
        end
        assert.are.equal(0, partial)
        assert.is_true(whole >= 1)
      end)
    end)

    it("of a new stream go without the last stream's nonces (each names a response of its stream), with its versions",
      function()
      local broke = false
      in_process(function(kind, req, enc, port)
        if kind == "CDS" and not broke then -- the first stream fails once LDS was answered
          broke = true
          error("the stream breaks")
        end
        return serving {}(kind, req, enc, port)
      end, function(t, log)
        local ok, r = call(t, 5)
        assert(ok, tostring(r))
        -- the first stream: LDS, its ACK, CDS (it breaks); the next one asks for LDS first
        local again
        for i, q in ipairs(log) do
          if q.type_url == protos.TYPE_URL.CDS then
            again = log[i + 1]
            break
          end
        end
        assert.are.equal(protos.TYPE_URL.LDS, again.type_url)
        assert.are.equal("1", again.version_info)
        assert.are.equal("", again.response_nonce or "")
      end)
    end)
  end)

  describe("a response with bad resources (gRFC A46)", function()
    -- svc's routes: Who to cluster A, every other method to B
    local TWO = { route_config = { name = "rc", virtual_hosts = { { name = "vh", domains = { "*" },
      routes = { { match = { path = "/xt.Named/Who" }, route = { cluster = "A" } },
        { match = { prefix = "" }, route = { cluster = "B" } } } } } } }
    local function two_clusters(enc) return { listener(enc, TWO) } end
    local function cluster(name, lb)
      return { name = name, type = 3, lb_policy = lb, eds_cluster_config = { eds_config = { ads = {} } } }
    end
    local function nacks(log)
      local list = {}
      for _, q in ipairs(log) do if q.error_detail then list[#list + 1] = q end end
      return list
    end

    it("takes its valid resources and NACKs it naming each bad one, by name or index", function()
      in_process(serving { LDS = two_clusters, CDS = function(enc)
        return { any(enc, "CDS", CLUSTER_T, cluster("B", 5)), any(enc, "CDS", CLUSTER_T, cluster("A")),
          "\x0a\x05ab", -- an Any whose type_url runs past its end
          any(enc, "EDS", CLA_T, { cluster_name = "A" }), any(enc, "CDS", CLUSTER_T, { type = 3 }) }
      end }, function(t, log)
        local ok, r = call(t, 3)
        assert(ok, tostring(r))
        assert.are.equal("b", r.name)
        local problem = "envoy.config.cluster.v3.Cluster B: lb_policy: ROUND_ROBIN, LEAST_REQUEST or RING_HASH "
          .. "expected, got MAGLEV; resources[2]: google.protobuf.Any does not decode: google.protobuf.Any.type_url: "
          .. "length runs past the end of the input at offset 1; resources[3]: type "
          .. "type.googleapis.com/envoy.config.cluster.v3.Cluster expected, got "
          .. "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment; resources[4]: no name"
        -- a call routed to B, refused with no good copy, fails UNAVAILABLE naming B's refusal
        local c = pc.client("xt.Named", { pool = pool, transport = t })
        local failed, e = pcall(c.Hold, c, {}, { timeout = 5 })
        assert.is_false(failed)
        assert.are.equal("UNAVAILABLE", e.code)
        assert.are.equal("xds:///svc: cluster B: NACKed CDS with no good copy: envoy.config.cluster.v3.Cluster B: "
          .. "lb_policy: ROUND_ROBIN, LEAST_REQUEST or RING_HASH expected, got MAGLEV", e.message)
        local nack = nacks(log)[1]
        assert.are.equal(problem, nack.error_detail.message)
        assert.are.equal(3, nack.error_detail.code)
        assert.are.equal("CDS-1", nack.response_nonce)
        assert.are.equal("1", nack.version_info) -- A was taken: the response's version (grpc-core's rule)
        assert.are.equal("1", t:backends().versions.CDS)
        assert.are.equal(problem, t:backends().nacked.CDS.problem)
      end)
    end)

    it("names at most 10 bad resources in a NACK, counting the others", function()
      -- 1000 empty resources (2 bytes each on the wire) would make a NACK of ~90 KB, ~45 times the
      -- response: a control plane's limit on what it receives (4 MB in grpc-go) is passed by a response
      -- of ~90 KB, and the stream fails, comes back, gets the same response and NACKs it again
      in_process(serving { LDS = two_clusters, CDS = function(enc)
        local list = { any(enc, "CDS", CLUSTER_T, cluster("A")) }
        for i = 2, 1001 do list[i] = "" end
        return list
      end }, function(t, log)
        local ok, r = call(t, 3)
        assert(ok, tostring(r))
        local named = {}
        for i = 1, 10 do
          named[i] = ("resources[%d]: type %s expected, got nil"):format(i, protos.TYPE_URL.CDS)
        end
        local problem = table.concat(named, "; ") .. "; and 990 more"
        assert.are.equal(problem, nacks(log)[1].error_detail.message)
        assert.are.equal(problem, t:backends().nacked.CDS.problem)
      end)
      -- a long text is cut at 4096 bytes, at a character's start (the NACK, a string, reached the server)
      local long = ("\xc3\xa9"):rep(3000)
      in_process(serving { LDS = two_clusters, CDS = function(enc)
        return { any(enc, "CDS", CLUSTER_T, cluster("A")), any(enc, "CDS", CLUSTER_T, cluster(long)),
          any(enc, "CDS", CLUSTER_T, cluster(long)) }
      end }, function(t, log)
        local ok, r = call(t, 3)
        assert(ok, tostring(r))
        local message = nacks(log)[1].error_detail.message
        local head = "resources[2]: envoy.config.cluster.v3.Cluster "
        assert.are.equal(head .. long:sub(1, 4096 - #head - #head % 2), message:sub(1, -4))
        assert.are.equal("...", message:sub(-3))
      end)
    end)

    it("keeps a refused resource's last good copy; ACKs and NACKs carry the version last taken", function()
      local function lds(enc, version, hcm)
        return { version_info = version, type_url = protos.TYPE_URL.LDS, nonce = "LDS-" .. version,
          resources = { listener(enc, hcm) } }
      end
      local function cds(version, list)
        return { version_info = version, type_url = protos.TYPE_URL.CDS, nonce = "CDS-" .. version, resources = list }
      end
      local answered = {}
      in_process(function(kind, req, enc, port)
        if answered[kind] then return {} end -- the first request only (CDS A and B, in one request)
        answered[kind] = true
        if kind == "LDS" then -- 1, then 2 refused (no resource taken), then 3
          return { lds(enc, "1", TWO), lds(enc, "2", { route_config = routes(ZERO_SPLIT) }), lds(enc, "3", TWO) }
        elseif kind == "CDS" then -- A's version 2 refused: its version 1 serves; B's version 2 taken
          return { cds("1", { any(enc, "CDS", CLUSTER_T, cluster("A")) }), cds("2", {
            any(enc, "CDS", CLUSTER_T, cluster("A", 5)), any(enc, "CDS", CLUSTER_T, cluster("B", 1)) }) }
        end
        return serving {}(kind, req, enc, port)
      end, function(t, log)
        local ok, r = call(t, 3)
        assert(ok, tostring(r))
        assert.are.equal("b", r.name)
        local seen = {}
        for _, q in ipairs(log) do
          if q.type_url == protos.TYPE_URL.LDS or q.type_url == protos.TYPE_URL.CDS then
            seen[#seen + 1] = q.type_url:match("%.(%w+)$") .. " " .. (q.version_info or "") .. " "
              .. (q.response_nonce or "") .. (q.error_detail and " NACK" or "")
          end
        end
        assert.are.same({ "Listener  ", "Listener 1 LDS-1", "Listener 1 LDS-2 NACK", "Listener 3 LDS-3",
          "Cluster  ", "Cluster 1 CDS-1", "Cluster 2 CDS-2 NACK" }, seen)
        local bk = t:backends()
        assert.are.same({ LDS = "3", CDS = "2", EDS = "1" }, bk.versions)
        assert.are.equal("2", bk.nacked.LDS.version)
        assert.are.equal(0, t.client.cache.CDS.A.lb_policy or 0)
        assert.are.equal(1, t.client.cache.CDS.B.lb_policy)
      end)
    end)

    it("NACKs a response that does not decode when its type and nonce can be read, else names it", function()
      local good = serving {}
      in_process(function(kind, req, enc, port)
        local list = good(kind, req, enc, port)
        if kind == "LDS" then -- first one whose version_info is no UTF-8
          table.insert(list, 1, { version_info = "\255", type_url = protos.TYPE_URL.LDS, nonce = "LDS-0",
            resources = list[1].resources })
        end
        return list
      end, function(t, log)
        local ok, r = call(t, 3)
        assert(ok, tostring(r))
        local nack = nacks(log)[1]
        assert.are.equal("DiscoveryResponse does not decode: envoy.service.discovery.v3.DiscoveryResponse."
          .. "version_info: invalid UTF-8 in a string field at offset 1", nack.error_detail.message)
        assert.are.equal("LDS-0", nack.response_nonce)
        assert.are.equal("\255", t:backends().nacked.LDS.version) -- as read
        assert.are.equal("1", t:backends().versions.LDS)
      end)
      -- alone, it says nothing of which listeners exist: the call waits, naming the NACK
      in_process(function(kind, req, enc, port)
        local r = good(kind, req, enc, port)[1]
        if kind == "LDS" then r.version_info = "\255" end
        return { r }
      end, function(t)
        local ok, e = call(t, 0.3)
        assert.is_false(ok)
        assert.are.equal("xds:///svc: deadline exceeded while waiting for listener svc (LDS) (NACKed LDS: "
          .. "DiscoveryResponse does not decode: envoy.service.discovery.v3.DiscoveryResponse.version_info: invalid "
          .. "UTF-8 in a string field at offset 1)", e.message)
        assert.are.same({ nil, "unknown" }, { t.client:get("LDS", "svc") })
      end)
      -- no type_url to NACK: ignored, and named while a call waits
      in_process(function()
        return { { version_info = "1", type_url = "\255", nonce = "n", resources = {} } }
      end, function(t, log)
        local ok, e = call(t, 0.3)
        assert.is_false(ok)
        assert.are.equal("xds:///svc: deadline exceeded while waiting for listener svc (LDS) (ignored a "
          .. "DiscoveryResponse that does not decode (envoy.service.discovery.v3.DiscoveryResponse.type_url: invalid "
          .. "UTF-8 in a string field at offset 4) of no type asked for)", e.message)
        assert.are.same({}, nacks(log))
      end)
      -- its type but no nonce: ignored too (a NACK without the nonce reads as a new request)
      in_process(function(kind, req, enc, port)
        local r = serving {}(kind, req, enc, port)[1]
        if kind == "LDS" then r.version_info, r.nonce = "\255", nil end
        return { r }
      end, function(t, log)
        local ok, e = call(t, 0.3)
        assert.is_false(ok)
        assert.are.equal("xds:///svc: deadline exceeded while waiting for listener svc (LDS) (ignored a "
          .. "DiscoveryResponse that does not decode (envoy.service.discovery.v3.DiscoveryResponse.version_info: "
          .. "invalid UTF-8 in a string field at offset 1) with no nonce to NACK)", e.message)
        assert.are.same({}, nacks(log))
      end)
    end)
  end)

  describe("a response of a type never asked for", function()
    it("is ignored (neither ACKed nor NACKed) and leaves the other types' nonces alone", function()
      local bogus = { version_info = "9", type_url = "type.googleapis.com/bogus.Type", nonce = "bogus-nonce",
        resources = { { type_url = "type.googleapis.com/bogus.Type", value = "\255\255" } } }
      -- first only the bogus one: the call names it when it times out
      in_process(function() return { bogus } end, function(t, log)
        local ok, e = call(t, 0.3)
        assert.is_false(ok)
        assert.are.equal("xds:///svc: deadline exceeded while waiting for listener svc (LDS) (ignored a response of "
          .. "type type.googleapis.com/bogus.Type, never asked for)", e.message)
        for _, r in ipairs(log) do
          assert.are_not.equal("type.googleapis.com/bogus.Type", r.type_url)
          assert.is_nil(r.error_detail)
        end
      end)
      -- then before each real answer: every ACK carries its own type's nonce
      local real = serving {}
      in_process(function(kind, req, enc, port)
        local list = { bogus }
        for _, r in ipairs(real(kind, req, enc, port)) do list[#list + 1] = r end
        return list
      end, function(t, log)
        local ok, r = call(t, 3)
        assert(ok, tostring(r))
        local acked = {}
        for _, q in ipairs(log) do
          assert.are_not.equal("type.googleapis.com/bogus.Type", q.type_url)
          assert.is_nil(q.error_detail)
          assert.are_not.equal("bogus-nonce", q.response_nonce)
          if (q.response_nonce or "") ~= "" then
            local kind = q.type_url:match("%.(%w+)$")
            acked[#acked + 1] = kind .. "=" .. q.response_nonce .. "@" .. q.version_info
          end
        end
        assert.are.same({ "Listener=LDS-1@1", "Cluster=CDS-1@1", "ClusterLoadAssignment=EDS-1@1" }, acked)
      end)
    end)
  end)

  local absent = peer.missing("@grpc/grpc-js", "@grpc/grpc-js-xds", "protobufjs")

  -- Backend `name`: a listener answering Who with its name (Slow after a second; an "s" backend's Who after
  -- 0.3 s). A
  -- name starting with "f" fails every Who; one starting with "u" fails Who UNAVAILABLE
  -- the first N times for each request named "key/N" (tries[key] counts them, previous[key]
  -- lists each attempt's grpc-previous-rpc-attempts).
  local function backend(name)
    local tries, previous = {}, {}
    local server = pc.server({ ["xt.Named"] = {
      Who = function(req, ctx)
        if name:find("^f") then error(pc.Error { code = "INTERNAL", message = name .. " fails" }) end
        if name:find("^s") then ctx.sleep(0.3) end
        local key, n = (req.name or ""):match("^(.-)/(%d+)$")
        if name:find("^u") and key then
          tries[key] = (tries[key] or 0) + 1
          local p = "-"
          for _, kv in ipairs(ctx.metadata) do
            if kv[1] == "grpc-previous-rpc-attempts" then p = kv[2] end
          end
          previous[key] = (previous[key] or "") .. p
          if tries[key] <= tonumber(n) then
            error(pc.Error { code = "UNAVAILABLE", message = name .. " try " .. tries[key] .. " of " .. key })
          end
        end
        return { name = name }
      end,
      Slow = function(_, ctx) ctx.sleep(1); return { name = name } end,
      Hold = function(_, ctx) ctx.sleep(0.5); return { name = name } end,
    } }, { pool = pool })
    local l = pc.listen(server, "127.0.0.1:0")
    pc.spawn(function() l:serve() end)
    return { listener = l, name = name, port = l.port, tries = tries, previous = previous }
  end

  -- The management server: started on `port` (nil: a free one), its requests logged.
  local function management(port, log)
    local s = peer.serve("xds_server.mjs", { log, port or 0 })
    function s.set(kind, version, resources)
      s.pipe:write(json_encode { set = kind, version = version, resources = resources } .. "\n")
      s.pipe:flush()
    end
    return s
  end

  local function endpoints(bs, weights)
    local list = {}
    for i, b in ipairs(bs) do
      list[i] = { endpoint = { address = { socket_address = { address = "127.0.0.1", port_value = b.port } } },
        load_balancing_weight = weights and { value = weights[i] } or nil }
    end
    return list
  end

  local function eds(name, bs, extra)
    local loc = { locality = { zone = "z1" }, lb_endpoints = endpoints(bs), load_balancing_weight = { value = 1 } }
    local list = { loc }
    for _, e in ipairs(extra or {}) do list[#list + 1] = e end
    return { cluster_name = name, endpoints = list }
  end

  local function cds(name, lb)
    return { name = name, type = "EDS", lb_policy = lb,
      eds_cluster_config = { eds_config = { ads = {} }, service_name = name .. "-eds" } }
  end

  local LISTENER = { name = "svc", api_listener = { api_listener = { ["@type"] = protos.HCM,
    rds = { config_source = { ads = {} }, route_config_name = "rc" },
    http_filters = { { name = "router", typed_config = {
      ["@type"] = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" } } } } } }

  local ROUTES = { name = "rc", virtual_hosts = {
    { name = "other", domains = { "other.example.com" }, routes = { { match = { prefix = "" },
      route = { cluster = "nowhere" } } } },
    { name = "vh", domains = { "svc" }, routes = {
      { match = { path = "/xt.Named/Slow" }, route = { cluster = "A", timeout = { seconds = 0, nanos = 200000000 } } },
      { match = { prefix = "/xt.Named/", headers = { { name = "x-split", exact_match = "yes" } } },
        route = { weighted_clusters = { clusters = { { name = "A", weight = { value = 80 } },
          { name = "B", weight = { value = 20 } } } } } },
      { match = { prefix = "/xt.Named/" }, route = { cluster = "A" } },
    } },
  } }

  -- Runs `body(ctx)` as a task with backends a1, a2, a3, b1 and a management
  -- server serving LDS svc -> RDS rc -> CDS A (a1, a2), B (b1).
  local function configure(ms, bs)
    ms.set("LDS", "1", { LISTENER })
    ms.set("RDS", "1", { ROUTES })
    ms.set("CDS", "1", { cds("A"), cds("B") })
    ms.set("EDS", "1", { eds("A-eds", { bs.a1, bs.a2 }), eds("B-eds", { bs.b1 }) })
  end

  -- `empty`: the management server starts with no resources (the body calls configure).
  local function scenario(body, empty)
    local log = os.tmpname()
    local bs = {}
    for _, n in ipairs { "a1", "a2", "a3", "b1", "f1", "s1", "u1" } do bs[n] = backend(n) end
    local ms = management(nil, log)
    if not empty then configure(ms, bs) end
    local bootstrap = json_encode { xds_servers = { { server_uri = "127.0.0.1:" .. ms.port,
      channel_creds = { { type = "insecure" } } } },
      node = { id = "protocall-spec", cluster = "spec", locality = { zone = "z1" } } } -- grpc-js-xds wants a locality
    local err
    pc.spawn(function()
      local t = pc.grpc("xds:///svc", { xds_bootstrap = bootstrap })
      local c = pc.client("xt.Named", { pool = pool, transport = t, timeout = 5 })
      local ctx = { t = t, c = c, bs = bs, ms = ms, log = log, bootstrap = bootstrap }
      local ok, e = xpcall(body, debug.traceback, ctx)
      if not ok then err = e end
      t:close()
      for _, b in pairs(bs) do b.listener:shutdown(0) end
    end)
    pc.run()
    peer.stop(ms)
    os.remove(log)
    assert(err == nil, err)
  end

  local function count(c, n, opts)
    local out = {}
    for _ = 1, n do
      local who = c:Who({}, opts).name
      out[who] = (out[who] or 0) + 1
    end
    return out
  end

  -- The requests the management server logged, decoded.
  local function requests(log)
    local list = {}
    for _, line in ipairs(read_lines(log)) do
      list[#list + 1] = pc.to_table(assert(core.from_json(protos.type("google.protobuf.Struct"), line))).fields
    end
    return list
  end

  -- The resource names of logged request `s`, joined by ",", and its type's short name.
  local function asked(s)
    local list = {}
    for i, v in ipairs(s.resource_names.list_value.values or {}) do list[i] = v.string_value end
    return table.concat(list, ","), s.type_url.string_value:match("[^.]+$")
  end

  -- Waits (making calls of x.c) until the server saw a request of `kind` for exactly
  -- `names`, after its first `since` requests (default 0); returns how many it saw then.
  local function until_asked(x, kind, names, since)
    local t0 = pc.now()
    while true do
      local list = requests(x.log)
      for i = (since or 0) + 1, #list do
        local n, k = asked(list[i])
        if k == kind and n == names then return #list end
      end
      assert(pc.now() - t0 < 3, "the server never saw " .. kind .. " " .. names)
      pcall(x.c.Who, x.c, {})
      pc.sleep(0.01)
    end
  end

  describe("against a management server of @grpc/grpc-js", function()
    if absent then
      it("runs", function() peer.skip(pending, "xDS scenarios", absent) end)
      return
    end

    it("resolves LDS -> RDS -> CDS -> EDS and calls reach the endpoints", function()
      scenario(function(x)
        assert.are.same({ a1 = 5, a2 = 5 }, count(x.c, 10))
        local bk = x.t:backends()
        local addrs = {}
        for _, b in ipairs(bk) do addrs[#addrs + 1] = b.cluster .. " " .. b.address .. " v" .. b.version end
        table.sort(addrs)
        local want = { "A 127.0.0.1:" .. x.bs.a1.port .. " v1", "A 127.0.0.1:" .. x.bs.a2.port .. " v1",
          "B 127.0.0.1:" .. x.bs.b1.port .. " v1" }
        table.sort(want)
        assert.are.same(want, addrs)
        assert.are.same({ LDS = "1", RDS = "1", CDS = "1", EDS = "1" }, bk.versions)
        -- the server saw ACKs naming each version (LDS, RDS, CDS, EDS), with the node
        local acked, nodes = {}, {}
        local t1 = pc.now()
        repeat -- the last ACK may still be on its way
          pc.sleep(0.02)
          for _, s in ipairs(requests(x.log)) do
            if s.version_info.string_value == "1" then acked[s.type_url.string_value:match("[^.]+$")] = true end
            nodes[s.node_id.string_value] = true
          end
        until acked.ClusterLoadAssignment or pc.now() - t1 > 2
        assert.is_true(nodes["protocall-spec"], "no request carried the node")
        assert.are.same({ Listener = true, RouteConfiguration = true, Cluster = true,
          ClusterLoadAssignment = true }, acked)
        -- no route: UNAVAILABLE naming the path
        local ok, e = pcall(x.t.unary, x.t, "/zz.None/X", "", { timeout = 2 })
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", e.code)
        assert.matches("no route matches /zz.None/X", e.message)
        -- the route's timeout caps the deadline: Slow takes 1 s, the route allows 0.2 s
        local t0 = pc.now()
        ok, e = pcall(x.c.Slow, x.c, {})
        assert.is_false(ok)
        assert.are.equal("DEADLINE_EXCEEDED", e.code)
        assert.is_true(pc.now() - t0 < 0.95, "took " .. (pc.now() - t0) .. " s")
        -- a second target shares the ADS stream; a listener the server lacks fails UNAVAILABLE once
        -- its does-not-exist timer ran out (it was never received: the server's answers lacking it
        -- say nothing, as grpc-core reads them)
        local t2 = pc.grpc("xds:///nope", { xds_bootstrap = x.bootstrap })
        assert.are.equal(x.t.client, t2.client)
        local saved = xds_client.RESOURCE_TIMEOUT
        xds_client.RESOURCE_TIMEOUT = 0.3
        ok, e = pcall(t2.unary, t2, "/xt.Named/Who", "", { timeout = 3 })
        xds_client.RESOURCE_TIMEOUT = saved
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", e.code)
        assert.matches("xds:///nope: listener nope does not exist", e.message)
        local seen = until_asked(x, "Listener", "nope,svc")
        t2:close() -- its listener is not asked for any more
        until_asked(x, "Listener", "svc", seen)
        assert.are.same({ a1 = 1, a2 = 1 }, count(x.c, 2))
      end)
    end)

    it("splits weighted clusters 80/20 within 5 % over 2,000 calls", function()
      scenario(function(x)
        local got = count(x.c, 2000, { metadata = { { "x-split", "yes" } } })
        local a = (got.a1 or 0) + (got.a2 or 0)
        local b = got.b1 or 0
        assert.are.equal(2000, a + b)
        assert.is_true(math.abs(a / 2000 - 0.8) <= 0.05, "A took " .. a .. " of 2000")
        assert.is_true(math.abs(b / 2000 - 0.2) <= 0.05, "B took " .. b .. " of 2000")
      end)
    end)

    it("sends each call where @grpc/grpc-js-xds's own client sends it", function()
      scenario(function(x)
        local function reference(method, n, header)
          local out, err, code = peer.command("GRPC_XDS_BOOTSTRAP_CONFIG=" .. peer.quote(x.bootstrap) .. " node "
            .. peer.scripts .. "/xds_client.mjs svc " .. method .. " " .. n .. (header and " " .. header or ""),
            { timeout = 60 })
          assert(code == 0, err)
          local counts = {}
          for k, v in out:gmatch('"([^"]+)":(%d+)') do counts[k] = tonumber(v) end
          return counts, out
        end
        -- no header: cluster A, round robin over a1 and a2 (grpc-js-xds's first calls go to
        -- whichever connected first, so its halves are near, not exact)
        local ref, text = reference("Who", 100)
        assert.is_true(ref.failed == 0 and ref.b1 == nil and ref.a3 == nil, text)
        assert.is_true(math.abs(ref.a1 - 50) <= 10 and ref.a1 + ref.a2 == 100, text)
        assert.are.same({ a1 = 50, a2 = 50 }, count(x.c, 100))
        -- x-split: yes: weighted clusters A 80 / B 20, both clients within 5 % of it
        ref, text = reference("Who", 1000, "x-split=yes")
        local ours = count(x.c, 1000, { metadata = { { "x-split", "yes" } } })
        assert.are.equal(0, ref.failed, text)
        local ref_b, our_b = (ref.b1 or 0) / 1000, (ours.b1 or 0) / 1000
        assert.is_true(math.abs(ref_b - 0.2) <= 0.05, "grpc-js-xds sent " .. ref_b .. " to B")
        assert.is_true(math.abs(our_b - 0.2) <= 0.05, "protocall sent " .. our_b .. " to B")
      end)
    end)

    it("makes the first calls wait, within their deadline, for the configuration", function()
      scenario(function(x)
        local t0 = pc.now()
        local ok, e = pcall(x.c.Who, x.c, {}, { timeout = 0.3 })
        assert.is_false(ok)
        assert.are.equal("DEADLINE_EXCEEDED", e.code)
        assert.matches("xds:///svc: deadline exceeded while waiting for listener svc %(LDS%)", e.message)
        assert.is_true(pc.now() - t0 >= 0.29 and pc.now() - t0 < 1, pc.now() - t0)
        local got
        pc.spawn(function() got = x.c:Who({}).name end) -- waits while the server has nothing
        pc.sleep(0.2)
        assert.is_nil(got)
        configure(x.ms, x.bs)
        t0 = pc.now()
        while got == nil and pc.now() - t0 < 3 do pc.sleep(0.01) end
        assert.are.equal("a1", got)
      end, true)
    end)

    it("ejects an endpoint by the cluster's outlier detection (gRFC A50), then returns it", function()
      scenario(function(x)
        local od = cds("A")
        od.outlier_detection = { interval = { nanos = 200000000 }, base_ejection_time = { seconds = 1 },
          max_ejection_percent = { value = 50 }, enforcing_success_rate = { value = 0 },
          enforcing_failure_percentage = { value = 100 }, failure_percentage_threshold = { value = 50 },
          failure_percentage_minimum_hosts = { value = 3 }, failure_percentage_request_volume = { value = 5 } }
        x.ms.set("CDS", "2", { od, cds("B") })
        x.ms.set("EDS", "2", { eds("A-eds", { x.bs.a1, x.bs.a2, x.bs.f1 }), eds("B-eds", { x.bs.b1 }) })
        local f1 = "127.0.0.1:" .. x.bs.f1.port
        local function state()
          for _, b in ipairs(x.t:backends()) do
            if b.address == f1 then return b.ejected end
          end
        end
        local t0, failed = pc.now(), 0
        while state() ~= true do
          if not pcall(x.c.Who, x.c, {}) then failed = failed + 1 end
          assert(pc.now() - t0 < 3, "f1 was never ejected (" .. failed .. " calls failed)")
        end
        assert.is_true(failed > 0)
        assert.are.same({ a1 = 15, a2 = 15 }, count(x.c, 30))
        t0 = pc.now()
        while state() ~= false do
          pcall(x.c.Who, x.c, {})
          pc.sleep(0.02)
          assert(pc.now() - t0 < 3, "f1 never came back")
        end
        assert.is_true(pc.now() - t0 > 0.5)
        -- a percentage above 100 is NACKed naming the field
        od.outlier_detection.max_ejection_percent = { value = 150 }
        x.ms.set("CDS", "3", { od, cds("B") })
        local nack
        t0 = pc.now()
        while nack == nil do
          pcall(x.c.Who, x.c, {})
          for _, s in ipairs(requests(x.log)) do
            if s.error_detail.struct_value then nack = s.error_detail.struct_value.fields.message.string_value end
          end
          assert(pc.now() - t0 < 3, "no NACK reached the server")
          pc.sleep(0.01)
        end
        assert.matches("Cluster A: outlier_detection.max_ejection_percent: at most 100 expected, got 150", nack)
        -- B, valid, was taken from version 3 (gRFC A46); A keeps version 2's config
        assert.are.equal("3", x.t:backends().versions.CDS)
        assert.are.equal(50, x.t.client.cache.CDS.A.outlier.max_ejection_percent)
      end)
    end)

    -- Waits (polling x.t) until the target took CDS version `cds` and EDS version `eds`.
    local function until_versions(x, cds_version, eds_version)
      local t0 = pc.now()
      while true do
        local v = x.t:backends().versions
        if v.CDS == cds_version and v.EDS == eds_version then return end
        assert(pc.now() - t0 < 3, "the target never took CDS " .. cds_version .. ", EDS " .. eds_version)
        pc.sleep(0.01)
      end
    end

    -- `n` Who calls, one started every `gap` seconds, each in its own task (an open
    -- loop: the calls in flight pile up where they are slow): the names that answered, counted.
    local function arrivals(x, n, gap)
      local got, done = { a1 = 0, a2 = 0, s1 = 0 }, 0
      for _ = 1, n do
        pc.spawn(function()
          local who = x.c:Who({}).name
          got[who] = (got[who] or 0) + 1
          done = done + 1
        end)
        pc.sleep(gap)
      end
      local t0 = pc.now()
      while done < n do
        assert(pc.now() - t0 < 10, "the calls did not end")
        pc.sleep(0.01)
      end
      return got
    end

    it("balances a LEAST_REQUEST cluster by calls in flight (gRFC A48): a slow endpoint gets fewer", function()
      scenario(function(x)
        local three = { eds("A-eds", { x.bs.a1, x.bs.a2, x.bs.s1 }), eds("B-eds", { x.bs.b1 }) }
        x.ms.set("EDS", "2", three)
        until_versions(x, "1", "2")
        local rr = arrivals(x, 100, 0.015)
        local lr_cluster = cds("A", "LEAST_REQUEST")
        lr_cluster.least_request_lb_config = { choice_count = { value = 2 } }
        x.ms.set("CDS", "2", { lr_cluster, cds("B") })
        until_versions(x, "2", "2")
        local lr = arrivals(x, 100, 0.015)
        print(string.format("\n# xDS cluster A (a1, a2 fast; s1 answers after 0.3 s), 100 calls, one every 15 ms: "
          .. "ROUND_ROBIN a1/a2/s1 %d/%d/%d, LEAST_REQUEST (choice_count 2) %d/%d/%d", rr.a1, rr.a2, rr.s1,
          lr.a1, lr.a2, lr.s1))
        assert.are.equal(100, rr.a1 + rr.a2 + rr.s1)
        assert.are.equal(100, lr.a1 + lr.a2 + lr.s1)
        assert.is_true(rr.s1 >= 33, "ROUND_ROBIN sent s1 " .. rr.s1)
        -- two draws with replacement among three: s1 still takes the 1/9 of picks that draw it twice
        assert.is_true(lr.s1 <= 22, "LEAST_REQUEST sent s1 " .. lr.s1)
        for _, b in ipairs(x.t:backends()) do assert.are.equal(0, b.outstanding, b.address) end
        -- a choice_count below 2 is NACKed naming the field; the last good config stays
        lr_cluster.least_request_lb_config.choice_count.value = 1
        x.ms.set("CDS", "3", { lr_cluster, cds("B") })
        local t0 = pc.now()
        while x.t:backends().nacked.CDS == nil do
          assert(pc.now() - t0 < 3, "no NACK")
          pc.sleep(0.01)
        end
        assert.matches("Cluster A: least_request_lb_config.choice_count: at least 2 expected, got 1",
          x.t:backends().nacked.CDS.problem, 1, true)
        -- B, valid, was taken from version 3 (gRFC A46); A keeps version 2's choice_count
        assert.are.equal("3", x.t:backends().versions.CDS)
        assert.are.equal(2, x.t.client.cache.CDS.A.choice_count)
      end)
    end)

    it("drops calls past a cluster's max_requests UNAVAILABLE at once (gRFC A32), then passes new ones", function()
      scenario(function(x)
        local a = cds("A")
        a.circuit_breakers = { thresholds = { { priority = "HIGH", max_requests = { value = 1 } },
          { priority = "DEFAULT", max_requests = { value = 2 } } } }
        x.ms.set("CDS", "2", { a, cds("B") })
        until_versions(x, "2", "1")
        assert.are.same({ outstanding = 0, max_requests = 2, dropped = 0 }, x.t:backends().calls.A)
        local results, n = {}, 0
        for i = 1, 5 do
          pc.spawn(function()
            local t0 = pc.now()
            local ok, r = pcall(x.c.Hold, x.c, {}) -- 0.5 s each
            results[i] = { ok and "OK " .. r.name or r.code .. " " .. r.message, pc.now() - t0 }
            n = n + 1
          end)
        end
        pc.sleep(0.1)
        local during = x.t:backends()
        local t0 = pc.now()
        while n < 5 do
          assert(pc.now() - t0 < 3, "the calls did not end")
          pc.sleep(0.01)
        end
        local texts, ok = {}, 0
        for i, r in ipairs(results) do
          texts[i] = r[1]
          if r[1]:find("^OK") then
            ok = ok + 1
            assert.is_true(r[2] >= 0.45, "an OK call took " .. r[2])
          else
            assert.are.equal("UNAVAILABLE xds:///svc: cluster A: circuit breaker drop: 2 calls in flight, "
              .. "max_requests 2", r[1])
            assert.is_true(r[2] < 0.4, "a drop took " .. r[2] .. " s") -- not an OK call's 0.45 s
          end
        end
        print("\n# max_requests 2, 5 concurrent Hold calls: " .. table.concat(texts, "; "))
        assert.are.equal(2, ok, table.concat(texts, "; "))
        -- @grpc/grpc-js-xds's own client, given the same configuration, lets two through too
        -- (its calls started 50 ms apart: it counts a call once its stream started, after
        -- the pick, so calls picked in one go all pass)
        local out, err, code = peer.command("XDS_PARALLEL=50 GRPC_XDS_BOOTSTRAP_CONFIG=" .. peer.quote(x.bootstrap)
          .. " node " .. peer.scripts .. "/xds_client.mjs svc Hold 5", { timeout = 60 })
        assert(code == 0, err)
        print("# grpc-js-xds, the same 5 calls: " .. out)
        assert.are.equal(3, tonumber(out:match('"failed":(%d+)')), out)
        assert.matches('"error":"14 Call dropped by load balancing policy.', out, 1, true)
        assert.are.same({ outstanding = 2, max_requests = 2, dropped = 3 }, during.calls.A)
        local flight = {}
        for _, b in ipairs(during) do if b.cluster == "A" then flight[#flight + 1] = b.outstanding end end
        assert.are.same({ 1, 1 }, flight)
        -- once they ended, new calls pass: two at a time again
        assert.are.same({ outstanding = 0, max_requests = 2, dropped = 3 }, x.t:backends().calls.A)
        assert.are.same({ a1 = 2, a2 = 2 }, count(x.c, 4))
        n = 0
        for _ = 1, 2 do pc.spawn(function() x.c:Hold({}); n = n + 1 end) end
        t0 = pc.now()
        while n < 2 do
          assert(pc.now() - t0 < 3, "the calls did not end")
          pc.sleep(0.01)
        end
        -- a higher limit from a CDS update takes effect at once
        a.circuit_breakers.thresholds[2].max_requests.value = 10
        x.ms.set("CDS", "3", { a, cds("B") })
        until_versions(x, "3", "1")
        assert.are.equal(10, x.t:backends().calls.A.max_requests)
      end)
    end)

    it("drops the clusters its routes no longer name", function()
      scenario(function(x)
        local seen = until_asked(x, "Cluster", "A,B")
        local vh = ROUTES.virtual_hosts[2]
        x.ms.set("RDS", "2", { { name = "rc", virtual_hosts = { { name = "vh", domains = vh.domains,
          routes = { vh.routes[3] } } } } })
        until_asked(x, "Cluster", "A", seen)
        until_asked(x, "ClusterLoadAssignment", "A-eds", seen)
        local clusters = {}
        for _, b in ipairs(x.t:backends()) do clusters[b.cluster] = true end
        assert.are.same({ A = true }, clusters)
        -- the header no longer routes anywhere else
        assert.are.same({ a1 = 2, a2 = 2 }, count(x.c, 4, { metadata = { { "x-split", "yes" } } }))
      end)
    end)

    it("moves traffic on an EDS update with no failed call", function()
      scenario(function(x)
        assert.are.same({ a1 = 2, a2 = 2 }, count(x.c, 4))
        -- a call in flight on a1 (Hold answers after 0.5 s) ends OK though a1 leaves
        local held
        pc.spawn(function() held = x.c:Hold({}).name end)
        pc.sleep(0.05)
        x.ms.set("EDS", "2", { eds("A-eds", { x.bs.a3 }), eds("B-eds", { x.bs.b1 }) })
        local t0, calls = pc.now(), 0
        while true do
          calls = calls + 1
          if x.c:Who({}).name == "a3" then break end -- a failed call raises: the test fails
          assert(pc.now() - t0 < 1, "traffic did not move within 1 s")
        end
        assert.are.same({ a3 = 20 }, count(x.c, 20))
        assert.are.equal("2", x.t:backends().versions.EDS)
        t0 = pc.now()
        while held == nil and pc.now() - t0 < 2 do pc.sleep(0.01) end
        assert.are.equal("a1", held)
      end)
    end)

    it("lets a wait_for_ready call wait while every endpoint of its cluster refuses, for one that comes up", function()
      scenario(function(x)
        -- cluster A's endpoints become two ports nothing listens on
        local down = {}
        for i = 1, 2 do
          local l = pc.listen(pc.server({}, { pool = pool }), "127.0.0.1:0")
          down[i] = { port = l.port }
          l:shutdown(0)
        end
        x.ms.set("EDS", "2", { eds("A-eds", down), eds("B-eds", { x.bs.b1 }) })
        local t0 = pc.now()
        while x.t:backends().versions.EDS ~= "2" do
          assert(pc.now() - t0 < 3, "EDS 2 did not arrive within 3 s")
          pc.sleep(0.02)
        end
        -- without wait_for_ready: UNAVAILABLE once both refused
        local ok, e = pcall(x.c.Who, x.c, {})
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", e.code, tostring(e))
        assert.matches("^connect to 127%.0%.0%.1:%d+: Connection refused$", e.message)
        local t = pc.grpc("xds:///svc", { xds_bootstrap = x.bootstrap, wait_for_ready = true,
          reconnect = { initial = 0.1, jitter = 0 } })
        local c = pc.client("xt.Named", { pool = pool, transport = t })
        local late, done
        pc.spawn(function()
          pc.sleep(0.5)
          if done then return end -- the call did not wait
          late = pc.listen(pc.server({ ["xt.Named"] = { Who = function() return { name = "late" } end } },
            { pool = pool }), "127.0.0.1:" .. down[2].port)
          late:serve()
        end)
        local r
        ok, r = pcall(c.Who, c, {}, { timeout = 20 })
        done = true
        if late then late:shutdown(0) end
        t:close()
        assert.is_true(ok, tostring(r))
        assert.are.equal("late", r.name)
      end)
    end)

    -- Waits (making calls) until the target took version `v` of `kind`.
    local function until_version(x, kind, v)
      local t0 = pc.now()
      while x.t:backends().versions[kind] ~= v do
        pcall(x.c.Who, x.c, {}, { timeout = 0.5 })
        pc.sleep(0.01)
        assert(pc.now() - t0 < 3, kind .. " version " .. v .. " never arrived")
      end
    end

    it("NACKs a bad resource naming the field, keeps its last good copy and takes the others (gRFC A46)", function()
      scenario(function(x)
        assert.are.same({ a1 = 1, a2 = 1 }, count(x.c, 2))
        local bad = cds("A", "RING_HASH")
        bad.ring_hash_lb_config = { hash_function = "MURMUR_HASH_2" } -- gRPC takes XX_HASH only (gRFC A42)
        x.ms.set("CDS", "2", { bad, cds("B", "LEAST_REQUEST") })
        local nack
        local t0 = pc.now()
        while nack == nil do
          x.c:Who({})
            for _, s in ipairs(requests(x.log)) do
            if s.error_detail.struct_value then nack = s end
          end
          assert(pc.now() - t0 < 3, "no NACK reached the server")
          pc.sleep(0.01)
        end
        local detail = nack.error_detail.struct_value.fields
        assert.are.equal("envoy.config.cluster.v3.Cluster A: ring_hash_lb_config.hash_function: XX_HASH expected, "
          .. "got MURMUR_HASH_2", detail.message.string_value)
        assert.are.equal(3, detail.code.number_value)
        -- the version last accepted: 2, as B of it was taken (grpc-core and grpc-js count it so)
        assert.are.equal("2", nack.version_info.string_value)
        assert.are.same({ a1 = 5, a2 = 5 }, count(x.c, 10)) -- A's version 1
        assert.are.equal(1, x.t.client.cache.CDS.B.lb_policy) -- B's version 2: LEAST_REQUEST
        assert.is_nil(x.t.client.cache.CDS.A.ring)
        local bk = x.t:backends()
        assert.are.equal("2", bk.versions.CDS)
        assert.are.equal("2", bk.nacked.CDS.version)
        -- the next response, all good: ACKed with its version and nonce, the NACK no longer standing
        x.ms.set("CDS", "3", { cds("A", "LEAST_REQUEST"), cds("B") })
        until_version(x, "CDS", "3")
        local last
        t0 = pc.now()
        repeat
          pc.sleep(0.01)
          for _, s in ipairs(requests(x.log)) do
            if s.type_url.string_value:find("Cluster$") then last = s end
          end
          assert(pc.now() - t0 < 3, "no ACK of version 3")
        until last.version_info.string_value == "3"
        assert.is_nil(last.error_detail.struct_value)
        assert.is_true(tonumber(last.response_nonce.string_value) > tonumber(nack.response_nonce.string_value))
        assert.is_nil(x.t.client:trouble())
        assert.are.equal(1, x.t.client.cache.CDS.A.lb_policy)
      end)
    end)

    it("keeps serving while the management server restarts, then takes its news", function()
      scenario(function(x)
        assert.are.same({ a1 = 2, a2 = 2 }, count(x.c, 4))
        -- a call in flight across the stop: Hold answers after 0.5 s
        local held
        pc.spawn(function() held = x.c:Hold({}).name end)
        pc.sleep(0.05)
        local port = x.ms.port
        peer.stop(x.ms)
        local t0 = pc.now()
        while pc.now() - t0 < 0.5 do assert.are.same({ a1 = 1, a2 = 1 }, count(x.c, 2)) end
        t0 = pc.now()
        while held == nil and pc.now() - t0 < 2 do pc.sleep(0.01) end
        assert.is_true(held == "a1" or held == "a2", "the call in flight across the stop: " .. tostring(held))
        -- calls without pause across the restart, until the restarted server's news arrived
        local during, failed, stop_calls = {}, {}, false
        pc.spawn(function()
          while not stop_calls do
            local ok, r = pcall(x.c.Who, x.c, {})
            if ok then
              during[r.name] = (during[r.name] or 0) + 1
            else
              failed[#failed + 1] = type(r) == "table" and r.message or tostring(r)
            end
          end
        end)
        pc.sleep(0.1)
        local ms = management(port, x.log)
        x.ms.pipe, x.ms.pid = ms.pipe, ms.pid
        ms.set("LDS", "1", { LISTENER })
        ms.set("RDS", "1", { ROUTES })
        ms.set("CDS", "1", { cds("A"), cds("B") })
        ms.set("EDS", "3", { eds("A-eds", { x.bs.a3 }), eds("B-eds", { x.bs.b1 }) })
        t0 = pc.now()
        while x.c:Who({}).name ~= "a3" do
          assert(pc.now() - t0 < 10, "the restarted server's EDS never arrived")
          pc.sleep(0.01)
        end
        assert.are.equal("3", x.t:backends().versions.EDS)
        stop_calls = true
        pc.sleep(0.05)
        assert.are.same({}, failed)
        -- both old backends took calls until a3 came; cluster B never (no route to it changed)
        assert.is_true((during.a1 or 0) >= 10 and (during.a2 or 0) >= 10, "calls across the restart: a1 "
          .. tostring(during.a1) .. ", a2 " .. tostring(during.a2))
        assert.is_nil(during.b1)
      end)
    end)

    -- RDS rc with the virtual host "svc" routing `first` (then everything else to A).
    local function route_config(first, vh_retry)
      local list = {}
      for i, r in ipairs(first) do list[i] = r end
      list[#list + 1] = { match = { prefix = "" }, route = { cluster = "A" } }
      return { name = "rc", virtual_hosts = { { name = "vh", domains = { "svc" }, routes = list,
        retry_policy = vh_retry } } }
    end

    it("routes by safe_regex paths, header regexes (RE2, full match) and ranges, and by runtime_fraction", function()
      scenario(function(x)
        x.ms.set("RDS", "2", { route_config {
          { match = { safe_regex = { regex = "/xt\\.Named/W" } }, route = { cluster = "nowhere" } }, -- no full match
          { match = { safe_regex = { regex = "/xt\\.Named/(Who|Slow)" }, headers = { { name = "x-path",
            present_match = true } } }, route = { cluster = "B" } },
          { match = { prefix = "/xt.Named/", headers = { { name = "x-user",
            safe_regex_match = { regex = "user-\\d+" } } } }, route = { cluster = "B" } },
          { match = { prefix = "/xt.Named/", headers = { { name = "x-n",
            range_match = { start = 10, ["end"] = 20 } } } }, route = { cluster = "B" } },
          { match = { prefix = "/xt.Named/", headers = { { name = "x-frac", present_match = true } },
            runtime_fraction = { runtime_key = "ignored", default_value = { numerator = 2500,
              denominator = "TEN_THOUSAND" } } }, route = { cluster = "B" } },
        } })
        until_version(x, "RDS", "2")
        local path = { metadata = { { "x-path", "1" } } }
        assert.are.same({ b1 = 4 }, count(x.c, 4, path))
        assert.matches("^a[12]$", x.c:Hold({}, path).name) -- /xt.Named/Hold: not the regex's
        assert.are.same({ b1 = 3 }, count(x.c, 3, { metadata = { { "x-user", "user-12" } } }))
        assert.are.same({ a1 = 2, a2 = 2 }, count(x.c, 4, { metadata = { { "x-user", "user-12x" } } }))
        assert.are.same({ a1 = 1, a2 = 1 }, count(x.c, 2, { metadata = { { "x-user", "admin" } } }))
        assert.are.same({ b1 = 2 }, count(x.c, 2, { metadata = { { "x-n", "19" } } }))
        assert.are.same({ a1 = 1, a2 = 1 }, count(x.c, 2, { metadata = { { "x-n", "20" } } }))
        local got = count(x.c, 2000, { metadata = { { "x-frac", "1" } } })
        local b = got.b1 or 0
        assert.are.equal(2000, b + (got.a1 or 0) + (got.a2 or 0))
        assert.is_true(math.abs(b / 2000 - 0.25) <= 0.05, "B took " .. b .. " of 2000")
        print(("\nruntime_fraction 2500/TEN_THOUSAND: B took %d of 2000 calls (%.1f %%)"):format(b, b / 20))
      end)
    end)

    it("retries per the route's retry_policy (gRFC A44), else the virtual host's", function()
      scenario(function(x)
        x.ms.set("CDS", "2", { cds("A"), cds("B"), cds("U") })
        x.ms.set("EDS", "2", { eds("A-eds", { x.bs.a1, x.bs.a2 }), eds("B-eds", { x.bs.b1 }),
          eds("U-eds", { x.bs.u1 }) })
        local function to_u(value, retry_policy)
          return { match = { prefix = "/xt.Named/", headers = { { name = "x-retry", exact_match = value } } },
            route = { cluster = "U", retry_policy = retry_policy } }
        end
        x.ms.set("RDS", "2", { route_config({
          to_u("2", { retry_on = "cancelled,unavailable", num_retries = { value = 2 },
            retry_back_off = { base_interval = { nanos = 1000000 }, max_interval = { nanos = 5000000 } } }),
          to_u("route-wins", { retry_on = "cancelled" }),
          to_u("vhost"),
        }, { retry_on = "unavailable", retry_back_off = { base_interval = { nanos = 1000000 } } }) })
        until_version(x, "RDS", "2")
        local tries = x.bs.u1.tries
        local function who(key, fails, how)
          return pcall(x.c.Who, x.c, { name = key .. "/" .. fails }, { metadata = { { "x-retry", how } } })
        end
        -- num_retries 2: three attempts, so two failures are retried away and three are not
        local ok, r = who("k1", 2, "2")
        assert(ok, tostring(r))
        assert.are.equal("u1", r.name)
        assert.are.equal(3, tries.k1)
        assert.are.equal("-12", x.bs.u1.previous.k1) -- grpc-previous-rpc-attempts on the retries
        ok, r = who("k2", 3, "2")
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", r.code)
        assert.are.equal(3, tries.k2)
        -- the route's policy retries CANCELLED only: its virtual host's is not taken
        ok, r = who("k3", 1, "route-wins")
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", r.code)
        assert.are.equal(1, tries.k3)
        -- no route policy: the virtual host's (num_retries default 1: two attempts)
        ok = who("k4", 1, "vhost")
        assert.is_true(ok)
        assert.are.equal(2, tries.k4)
        ok = who("k5", 2, "vhost")
        assert.is_false(ok)
        assert.are.equal(2, tries.k5)
        -- without any policy the first failure is the call's
        x.ms.set("RDS", "3", { route_config { to_u("2") } })
        until_version(x, "RDS", "3")
        ok, r = who("k6", 2, "2")
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", r.code)
        assert.are.equal(1, tries.k6)
        print(("\nretry attempts seen by the backend: %s"):format(json_encode(tries)))
      end)
    end)

    it("retries at a python3-grpcio backend failing UNAVAILABLE, per the route's policy, and not without", function()
      assert(pc.load_file("spec/fixtures/protos/grpc/faults.proto", { import_paths = { "spec/fixtures/protos" } }))
      local py = helper.spawn("grpc", 0)
      local ok_all, why = pcall(scenario, function(x)
        x.ms.set("CDS", "2", { cds("A"), cds("B"), cds("P") })
        x.ms.set("EDS", "2", { eds("A-eds", { x.bs.a1, x.bs.a2 }), eds("B-eds", { x.bs.b1 }), eds("P-eds", { py }) })
        local function to_p(retry_policy)
          return { match = { prefix = "/faults.Faults/" }, route = { cluster = "P", retry_policy = retry_policy } }
        end
        x.ms.set("RDS", "2", { route_config { to_p { retry_on = "unavailable", num_retries = { value = 2 } } } })
        until_version(x, "RDS", "2")
        local f = pc.client("faults.Faults", { transport = x.t, timeout = 5 })
        local function attempts(id) return f:Attempts({ id = id }).attempts end
        local function fail_then_succeed(id, failures)
          return pcall(f.FailThenSucceed, f, { id = id, failures = failures, code = "UNAVAILABLE" })
        end
        local ok, r = fail_then_succeed("x1", 2)
        assert(ok, tostring(r))
        assert.are.equal("ok after 2", r.text)
        assert.are.equal(3, attempts("x1"))
        ok, r = fail_then_succeed("x2", 3)
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", r.code)
        assert.are.equal(3, attempts("x2"))
        -- a server stream failing before its first message: the same, its replies from the third attempt
        local function stream(id, failures)
          return pcall(function()
            local got = {}
            for m in f:Stream { id = id, failures = failures, code = "UNAVAILABLE", count = 3 } do
              got[#got + 1] = m.index .. "@" .. m.attempts
            end
            return table.concat(got, " ")
          end)
        end
        ok, r = stream("s1", 2)
        assert(ok, tostring(r))
        assert.are.equal("1@3 2@3 3@3", r)
        ok, r = stream("s2", 3)
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", r.code)
        assert.are.equal(3, attempts("s2"))
        -- failing after its first message: not retried (the call is the caller's by then)
        ok, r = pcall(function()
          for _ in f:StreamThenFail { id = "s3", failures = 0, code = "UNAVAILABLE", count = 1 } do end
        end)
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", r.code)
        assert.are.equal(1, attempts("s3"))
        x.ms.set("RDS", "3", { route_config { to_p() } })
        until_version(x, "RDS", "3")
        ok, r = fail_then_succeed("x3", 2)
        assert.is_false(ok)
        assert.are.equal("UNAVAILABLE", r.code)
        assert.are.equal(1, attempts("x3"))
        ok = stream("s4", 1)
        assert.is_false(ok)
        assert.are.equal(1, attempts("s4"))
        print(("\npython3-grpcio backend attempts: with num_retries 2: %d (2 failures, OK), %d (3 failures, "
          .. "UNAVAILABLE); without a policy: %d"):format(attempts("x1"), attempts("x2"), attempts("x3")))
      end)
      helper.stop(py)
      assert(ok_all, why)
    end)

    it("NACKs a regex RE2 refuses, naming the field, and keeps routing by the last good config", function()
      scenario(function(x)
        until_version(x, "RDS", "1")
        x.ms.set("RDS", "2", { route_config { { match = { safe_regex = { regex = "/xt\\.Named/(Who)\\1" } },
          route = { cluster = "B" } } } })
        local nack
        local t0 = pc.now()
        while nack == nil do
          assert.are.same({ a1 = 1, a2 = 1 }, count(x.c, 2)) -- still version 1's routes
          for _, q in ipairs(requests(x.log)) do
            if q.error_detail.struct_value then nack = q end
          end
          assert(pc.now() - t0 < 3, "no NACK reached the server")
          pc.sleep(0.01)
        end
        local detail = nack.error_detail.struct_value.fields.message.string_value
        assert.matches([[RouteConfiguration rc: virtual_hosts[0].routes[0].match.safe_regex.regex: ]]
          .. [["/xt\\.Named/(Who)\\1" is not an RE2 pattern: invalid escape sequence: \1]], detail, 1, true)
        assert.are.equal("1", nack.version_info.string_value)
        assert.are.same({ a1 = 5, a2 = 5 }, count(x.c, 10))
        local bk = x.t:backends()
        assert.are.equal("1", bk.versions.RDS)
        assert.are.equal("2", bk.nacked.RDS.version)
      end)
    end)

    it("leaves out a route with query_parameters (gRFC A28: it never matches a gRPC call)", function()
      scenario(function(x)
        x.ms.set("RDS", "2", { route_config { { match = { prefix = "", query_parameters = { { name = "debug",
          present_match = true } } }, route = { cluster = "B" } } } })
        until_version(x, "RDS", "2")
        assert.are.same({ a1 = 2, a2 = 2 }, count(x.c, 4)) -- the next route's cluster, not B
      end)
    end)

    it("ignores resources it did not subscribe to: one it cannot use NACKs nothing, none is kept", function()
      scenario(function(x)
        until_version(x, "EDS", "1")
        local other = cds("other", "MAGLEV") -- another service's cluster, as a state-of-the-world server may send
        x.ms.set("CDS", "2", { cds("A"), cds("B"), other })
        until_version(x, "CDS", "2")
        assert.is_nil(x.t:backends().nacked.CDS)
        x.ms.set("EDS", "2", { eds("A-eds", { x.bs.a3 }), eds("B-eds", { x.bs.b1 }), eds("junk-eds", { x.bs.b1 }) })
        until_version(x, "EDS", "2")
        assert.are.same({ a3 = 2 }, count(x.c, 2))
        assert.is_nil(x.t.client.cache.EDS["junk-eds"])
        assert.is_nil(x.t.client.cache.CDS.other)
      end)
    end)
  end)
end)
