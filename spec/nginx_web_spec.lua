-- nginx as the host of gRPC-Web and Connect calls: Debian's nginx with
-- libnginx-mod-http-lua (started as spec/nginx_helper.lua does, one
-- worker) runs the location below, which calls a pc.listen in a process of
-- its own (spec/web_upstream.lua) through protocall.resty (the cosocket
-- driver) over Connect, gRPC-Web and gRPC-Web-Text, on HTTP/2 and HTTP/1.1
-- (pc.grpc's http_version), plain and TLS: unary, server streaming,
-- errors with details, deadlines, and concurrent calls (over HTTP/1.1 one
-- connection each). This spec only drives processes over HTTP (curl), so
-- it runs the same under lua5.4 and luajit. Without nginx, the module, the
-- LuaJIT build or curl it is a visible pending test, a failure when env CI
-- is set.
local helper = require "grpc_helper"
local N = require "nginx_helper"
local R = require "runtime"

local absent = N.missing { ["/usr/bin/curl"] = "curl", [N.ROOT .. "/build/release/protocall.so"] = "make build" }
if absent then
  describe("gRPC-Web and Connect calls inside nginx", function()
    it("runs", function()
      if os.getenv("CI") then error("missing (required when CI is set): " .. absent) end
      pending("nginx web spec skipped, missing: " .. absent)
    end)
  end)
  return
end

-- GET /call?protocol=P&http=V&op=OP[&x=N]: srv.Calc through a transport
-- per protocol and HTTP version (made on first use in the worker); answers
-- the result (Add: the total; count: the x of each response, joined by
-- ","), or "CODE: message [reason of the first detail]".
local CONF = N.lua_conf(1, [==[

    init_by_lua_block {
        local pc = require "protocall"
        assert(pc.load([[
syntax = "proto3";
package srv;
message Point { int32 x = 1; int32 y = 2; string note = 3; }
message Sum { int64 total = 1; uint32 count = 2; }
service Calc {
  rpc Add(Point) returns (Sum);
  rpc Count(Point) returns (stream Point);
}
]], { name = "srv/calc.proto" }))
    }

    server {
        listen 127.0.0.1:@PORT@;
        location = /call {
            content_by_lua_block {
                local pc = require "protocall"
                local resty = require "protocall.resty"
                local a = ngx.req.get_uri_args()
                local key = a.protocol .. " " .. a.http
                STUBS = STUBS or {}
                if not STUBS[key] then
                    local t = resty.grpc(pc, "@UPSTREAM@", { protocol = a.protocol, http_version = a.http,
                        ca_file = "@CA@" ~= "" and "@CA@" or nil })
                    STUBS[key] = resty.client(pc, "srv.Calc", { transport = t, timeout = 5 })
                end
                local stub = STUBS[key]
                local ok, out = pcall(function()
                    if a.op == "count" then
                        local got = {}
                        for p in stub:Count { x = tonumber(a.x) } do got[#got + 1] = p.x end
                        return table.concat(got, ",")
                    elseif a.op == "details" then
                        stub:Add { note = "details" }
                    elseif a.op == "sleep" then
                        stub:Add({ note = "sleep" }, { timeout = 0.3 })
                    end
                    return tostring(tonumber(stub:Add({ x = tonumber(a.x), y = 1 }).total))
                end)
                if ok then
                    ngx.say(out)
                else
                    local d = out.details and out.details[1]
                    ngx.say(out.code, ": ", out.message, d and (" " .. d.reason) or "")
                end
            }
        }
    }
]==])

-- curl's bodies of the GETs of `paths`, all at once (each on a connection
-- of its own), in order.
local function get_all(n, paths)
  local cfg = os.tmpname()
  local outs = {}
  local f = assert(io.open(cfg, "w"))
  for i, path in ipairs(paths) do
    outs[i] = os.tmpname()
    f:write('url = "', n.url, path, '"\noutput = "', outs[i], '"\n')
  end
  f:close()
  R.capture("curl -s -Z --parallel-immediate --parallel-max 16 -m 30 -K " .. cfg .. " 2>/dev/null")
  os.remove(cfg)
  local bodies = {}
  for i, out in ipairs(outs) do
    bodies[i] = N.read(out):gsub("\n$", "")
    os.remove(out)
  end
  return bodies
end

local function get(n, path) return get_all(n, { path })[1] end

local function cases(title, tls)
  describe(title, function()
    local upstream, nginx, dir
    setup(function()
      local args = ""
      if tls then
        dir = helper.make_certs()
        args = " " .. dir .. "/server.pem " .. dir .. "/server.key"
      end
      upstream = helper.spawn_command("env LUA_PATH='" .. N.ROOT .. "/lua/?.lua;;' LUA_CPATH='" .. N.ROOT
        .. "/build/release/?.so;;' lua5.4 spec/web_upstream.lua" .. args, "web_upstream.lua")
      local url = (tls and "https" or "http") .. "://127.0.0.1:" .. upstream.port
      local conf = CONF:gsub("@UPSTREAM@", url):gsub("@CA@", tls and dir .. "/ca.pem" or "")
      nginx = N.start("web", conf)
    end)
    teardown(function()
      N.stop(nginx)
      helper.stop(upstream)
      if dir then os.execute("rm -rf " .. dir) end
    end)

    for _, protocol in ipairs { "connect", "grpc-web", "grpc-web-text" } do
      for _, http in ipairs { "1.1", "2" } do
        local q = "/call?protocol=" .. protocol .. "&http=" .. http
        it(protocol .. " over HTTP/" .. http .. ": unary, server streaming, details, deadline", function()
          assert.are.equal("42", get(nginx, q .. "&op=add&x=41"))
          assert.are.equal("1,2,3,4,5", get(nginx, q .. "&op=count&x=5"))
          assert.are.equal("INVALID_ARGUMENT: too far TOO_FAR", get(nginx, q .. "&op=details"))
          assert.matches("^DEADLINE_EXCEEDED: ", get(nginx, q .. "&op=sleep"))
          assert.are.equal("8", get(nginx, q .. "&op=add&x=7"))
        end)

        it(protocol .. " over HTTP/" .. http .. ": 12 concurrent calls", function()
          local paths, want = {}, {}
          for i = 1, 12 do
            paths[i] = q .. (i % 2 == 0 and "&op=count&x=" .. i or "&op=add&x=" .. i)
            local seq = {}
            for k = 1, i do seq[k] = k end
            want[i] = i % 2 == 0 and table.concat(seq, ",") or tostring(i + 1)
          end
          assert.are.same(want, get_all(nginx, paths))
        end)
      end
    end
  end)
end

cases("gRPC-Web and Connect calls inside nginx (protocall.resty) to pc.listen")
cases("gRPC-Web and Connect calls inside nginx (protocall.resty) to pc.listen over TLS", true)
