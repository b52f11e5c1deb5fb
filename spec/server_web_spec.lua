-- pc.listen's answers over the web's protocols where connect-go's are the
-- reference: an unknown method is HTTP 404 over Connect and gRPC-Web (its
-- handlers answer an unknown procedure with http.NotFound), over HTTP/2
-- and HTTP/1.1, UNIMPLEMENTED to the clients of each protocol; over gRPC
-- it is 200 with grpc-status 12. Raw requests with curl (Debian's, from
-- .ci/install-deps); protocall's own clients beside them.
local pc = require "protocall"
package.path = "spec/?.lua;" .. package.path
local peer = require "node_peer"

local pool = pc.pool()
assert(pool:load([[
syntax = "proto3";
package web;
message Point { int32 x = 1; int32 y = 2; }
service Calc { rpc Add(Point) returns (Point); }
]], { name = "web/calc.proto" }))
local server = pc.server({ ["web.Calc"] = { Add = function(p)
  if p.x == 13 then local t = ({})[p.x]; return t.x end -- a bug: a runtime error
  if p.x == 15 then return nil end -- a bug: no response
  if p.x == 14 then error(setmetatable({}, { __tostring = function() error("no words") end })) end
  return { x = p.x + p.y }
end } }, { pool = pool })

local CURL = "/usr/bin/curl"
local function have_curl()
  local f = io.open(CURL)
  if f then f:close() end
  return f ~= nil
end

-- fn(port) inside pc.run with a listener serving `server` (listen options `opts`).
local function serving(fn, opts)
  local l = pc.listen(server, "127.0.0.1:0", opts)
  local ok, err
  pc.spawn(function() l:serve() end)
  pc.spawn(function()
    ok, err = pcall(fn, l.port)
    l:shutdown(1)
  end)
  pc.run()
  assert(ok, err)
end

-- "STATUS content-type grpc-status" of curl's request (the response's
-- headers, lower-cased names).
local function curl(port, path, content_type, http, body)
  local out, err, code = peer.command(("%s -s -i %s -H %s --data-binary %s http://127.0.0.1:%d%s"):format(CURL,
    http == 1 and "--http1.1" or "--http2-prior-knowledge", peer.quote("content-type: " .. content_type),
    peer.quote(body or ""), port, path))
  local status = out:match("^HTTP/[%d.]+ (%d+)")
  assert(status, ("curl exit %s: %s"):format(code, err))
  local head = out:match("^(.-)\r\n\r\n") or out
  return status, head:lower(), out:match("\r\n\r\n(.*)$") or ""
end

describe("pc.listen, an unknown method", function()
  if not have_curl() then
    it("answers HTTP 404 over the web's protocols", function()
      peer.skip(pending, "curl requests", CURL .. " not installed (Debian curl: .ci/install-deps)")
    end)
    return
  end
  for _, http in ipairs { 2, 1 } do
    it("answers HTTP 404 with the error JSON over Connect unary, HTTP/" .. http, function()
      serving(function(port)
        -- no request body: a response before the body is all in ends the
        -- stream with RST_STREAM NO_ERROR, after which curl may fail its
        -- upload (exit 92)
        local status, head, body = curl(port, "/web.Calc/Nope", "application/json", http)
        assert.equals("404", status)
        assert.truthy(head:find("content-type: application/json", 1, true), head)
        assert.equals("unimplemented", body:match('"code":"([^"]*)"'), body)
        assert.equals("unknown method /web.Calc/Nope", body:match('"message":"([^"]*)"'), body)
        -- a known method of the same listener is not touched
        status = curl(port, "/web.Calc/Add", "application/json", http, '{"x":1,"y":2}')
        assert.equals("200", status)
      end)
    end)

    it("answers HTTP 404 over gRPC-Web, HTTP/" .. http, function()
      serving(function(port)
        local status, head = curl(port, "/web.Nope/Add", "application/grpc-web+proto", http)
        assert.equals("404", status)
        assert.truthy(head:find("grpc-status: 12", 1, true), head)
      end)
    end)
  end

  it("answers HTTP 404 over Connect streaming and 200 with grpc-status 12 over gRPC", function()
    serving(function(port)
      assert.equals("404", (curl(port, "/web.Calc/Nope", "application/connect+proto", 2)))
      local status, head = curl(port, "/web.Calc/Nope", "application/grpc", 2)
      assert.equals("200", status)
      assert.truthy(head:find("grpc-status: 12", 1, true), head)
    end)
  end)

  it("is UNIMPLEMENTED to protocall's Connect, gRPC-Web and gRPC clients", function()
    serving(function(port)
      for _, protocol in ipairs { "connect", "grpc-web", "grpc" } do
        local t = pc.grpc("http://127.0.0.1:" .. port, { protocol = protocol })
        local ok, err = pcall(t.unary, t, "/web.Calc/Nope", "")
        assert.is_false(ok)
        assert.equals("UNIMPLEMENTED", err.code, protocol)
        t:close()
      end
    end)
  end)
end)

describe("pc.listen, a handler's runtime error", function()
  local GENERIC = "web.Calc.Add: unexpected error in the handler"
  local function opts(logged)
    return { log = function(text) logged[#logged + 1] = text end,
      rest = { http = { rules = { { selector = "web.Calc.Add", post = "/v1/add", body = "*" } } } } }
  end

  it("is UNKNOWN with a generic message to Connect, gRPC-Web and gRPC clients, the text logged", function()
    local logged = {}
    serving(function(port)
      for _, protocol in ipairs { "connect", "grpc-web", "grpc" } do
        for _, codec in ipairs(protocol == "grpc" and { "proto" } or { "proto", "json" }) do
          local t = pc.grpc("http://127.0.0.1:" .. port, { protocol = protocol, codec = codec })
          local c = pc.client("web.Calc", { transport = t, pool = pool })
          local ok, err = pcall(c.Add, c, { x = 13 })
          assert.is_false(ok)
          assert.equals("UNKNOWN", err.code, protocol)
          assert.equals(GENERIC, err.message, protocol)
          t:close()
        end
      end
    end, opts(logged))
    assert.equals(5, #logged)
    for _, text in ipairs(logged) do
      -- (Lua 5.4: "a nil value (local 't')", LuaJIT: "local 't' (a nil value)")
      assert.matches("^web%.Calc%.Add: spec/server_web_spec%.lua:19: attempt to index [^\n]*local 't'[^\n]*\n"
        .. "stack traceback:\n", text)
    end
  end)

  it("is UNKNOWN when the raised value's __tostring raises, or the log option raises", function()
    local logged = {}
    serving(function(port)
      local t = pc.grpc("http://127.0.0.1:" .. port, { protocol = "grpc" })
      local c = pc.client("web.Calc", { transport = t, pool = pool })
      local ok, err = pcall(c.Add, c, { x = 14 })
      assert.is_false(ok)
      assert.equals("UNKNOWN", err.code)
      assert.equals(GENERIC, err.message)
      t:close()
    end, opts(logged))
    assert.equals(1, #logged)
    assert.matches("^web%.Calc%.Add: handler raised a table: %(its __tostring raised: [^\n]*no words%)\n", logged[1])
    serving(function(port)
      local t = pc.grpc("http://127.0.0.1:" .. port, { protocol = "connect" })
      local c = pc.client("web.Calc", { transport = t, pool = pool })
      local ok, err = pcall(c.Add, c, { x = 13 })
      assert.is_false(ok)
      assert.equals("UNKNOWN", err.code)
      assert.equals(GENERIC, err.message)
      t:close()
    end, { log = function() error("log down") end })
  end)

  if not have_curl() then return end
  it("is told without its text over raw Connect and REST", function()
    local logged = {}
    serving(function(port)
      local status, _, body = curl(port, "/web.Calc/Add", "application/json", 2, '{"x":13}')
      assert.equals("500", status)
      assert.equals('{"code":"unknown","message":"' .. GENERIC .. '"}', body)
      local head
      status, head, body = curl(port, "/v1/add", "application/json", 2, '{"x":13}')
      assert.equals("500", status, head)
      assert.equals('{"code":2,"message":"' .. GENERIC .. '","details":[]}', body)
      assert.falsy((head .. body):find("attempt to", 1, true))
    end, opts(logged))
    assert.equals(2, #logged)
    assert.matches("spec/server_web_spec.lua:19: attempt to index", logged[2], 1, true)
  end)

  it("is INTERNAL when it returned no response, over Connect and REST, each logged", function()
    local logged = {}
    serving(function(port)
      local status, _, body = curl(port, "/web.Calc/Add", "application/json", 2, '{"x":15}')
      assert.equals("500", status)
      assert.equals('{"code":"internal","message":"web.Calc.Add: handler returned no response"}', body)
      status, _, body = curl(port, "/v1/add", "application/json", 2, '{"x":15}')
      assert.equals("500", status)
      assert.equals('{"code":13,"message":"web.Calc.Add: handler returned no response","details":[]}', body)
    end, opts(logged))
    assert.equals(2, #logged)
    for _, text in ipairs(logged) do -- (the traceback has no frame of the handler, which returned)
      assert.equals("web.Calc.Add: handler returned no response (handler defined at spec/server_web_spec.lua:18)"
        .. "\nstack traceback:", text:match("^[^\n]*\n[^\n]*"))
    end
  end)
end)

describe("pc.listen, an empty Connect unary body", function()
  if not have_curl() then return end
  it("is the empty message in proto, and INVALID_ARGUMENT in JSON, as the nginx gateway answers it", function()
    serving(function(port)
      for _, http in ipairs { 2, 1 } do
        assert.equals("200", (curl(port, "/web.Calc/Add", "application/proto", http, "")))
        for _, body in ipairs { "", "\n" } do
          local status, _, answer = curl(port, "/web.Calc/Add", "application/json", http, body)
          assert.equals("400", status)
          assert.equals("invalid_argument", answer:match('"code":"([^"]*)"'), answer)
        end
      end
    end)
  end)
end)
