-- What browsers need from pc.listen, and Connect's GET both ways:
-- - CORS (pc.listen's `cors` option): preflights and actual responses as
--   curl sees them over HTTP/1.1 and HTTP/2;
-- - Connect GET served (curl's requests: JSON, base64 protobuf, gzip, a bad
--   query, a method with side effects) and sent (pc.grpc{get = true})
--   against pc.listen and against @connectrpc/connect-node's server;
-- - @connectrpc/connect-node's client with useHttpGet against pc.listen;
-- - a real browser: headless chromium runs spec/web/rpc.html, its script
--   bundled from @connectrpc/connect-web with npm's esbuild at test time,
--   calling pc.listen on another origin over Connect (GET and POST) and
--   gRPC-Web.
-- Parts that need curl, node packages or chromium skip with a message when
-- they are absent (and fail under CI).
local pc = require "protocall"
local peer = require "node_peer"
local browser = require "browser"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local SOURCE = read("spec/web/calc.proto")
local ErrorInfo = pc.type("google.rpc.ErrorInfo")

-- A pool with web.Calc; `strict`: Mul without its NO_SIDE_EFFECTS mark
-- (a server that refuses Mul's GET).
local function calc_pool(strict)
  local pool = pc.pool()
  local text = SOURCE
  if strict then text = text:gsub("option idempotency_level = NO_SIDE_EFFECTS;", "") end
  assert(pool:load(text, { name = "calc.proto" }))
  return pool
end
local POOL, STRICT = calc_pool(false), calc_pool(true)

local function calc_server(pool)
  return pc.server({ ["web.Calc"] = {
    Add = function(p) return { total = p.x + p.y } end,
    Mul = function(p)
      if p.x < 0 then
        error(pc.Error { code = "INVALID_ARGUMENT", message = "negative x",
          details = { ErrorInfo { reason = "NEGATIVE", domain = "web" } } })
      end
      return { total = p.x * p.y }
    end,
    Count = function(p, ctx)
      for i = 1, p.x do ctx.send { x = i, y = i * p.y } end
    end,
  } }, { pool = pool })
end

-- Runs fn(port, strict_port) in a task while pc.listen serves web.Calc
-- with `opts` on port (and the strict server on strict_port), then shuts
-- both down; fn's error is raised again.
local function serving(opts, fn)
  local l = pc.listen(calc_server(POOL), "127.0.0.1:0", opts)
  local s = pc.listen(calc_server(STRICT), "127.0.0.1:0", opts)
  local ok, err
  pc.spawn(function() l:serve() end)
  pc.spawn(function() s:serve() end)
  pc.spawn(function()
    ok, err = pcall(fn, l.port, s.port)
    l:shutdown(1)
    s:shutdown(1)
  end)
  pc.run()
  if not ok then error(err, 0) end
end

local curl_absent
do
  local f = io.popen("command -v curl 2>/dev/null")
  curl_absent = not f:read("*l") and "curl not found on PATH (Debian package curl)" or nil
  f:close()
end

-- curl's answer (-i: the head, lowercased names, then the body) to `args`;
-- CR removed.
local function curl(args)
  local out, err, code = peer.command("curl -s -i --max-time 10 " .. args)
  assert(code == 0, "curl " .. args .. ": exit " .. code .. " " .. err)
  return (out:gsub("\r", ""))
end

-- Whether `s` ends with `tail` (plain text).
local function ends(s, tail)
  return s ~= nil and s:sub(-#tail) == tail
end

local function header(answer, name)
  return answer:match("\n" .. name:gsub("%-", "%%-") .. ": ([^\n]*)")
end

describe("pc.listen's cors option", function()
  local server = calc_server(POOL)
  local function refused(cors, message)
    local ok, err = pcall(pc.listen, server, "127.0.0.1:0", { cors = cors })
    assert.is_false(ok)
    assert.matches(message, err, 1, true)
  end

  it("is checked with errors naming what is wrong", function()
    refused({ origin = { "*" } }, "pc.listen: unknown cors option 'origin'")
    refused({}, "pc.listen: cors.origins must list at least one origin")
    refused({ origins = "*" }, "pc.listen: cors option 'origins' must be a table, got string")
    refused({ origins = { "https://app.example/" } }, "pc.listen: cors.origins[1] must be an origin")
    refused({ origins = { "*", 3 } }, "cors.origins[2] must be an origin")
    refused({ origins = { "*" }, max_age = -1 }, "pc.listen: cors.max_age must be an integer number of seconds")
    refused({ origins = { "*" }, headers = { "x id" } }, "pc.listen: cors.headers[1] must be a header name")
    refused({ origins = { "*" }, credentials = 1 }, "cors option 'credentials' must be a boolean, got number")
  end)
end)

describe("CORS on pc.listen", function()
  if curl_absent then
    it("answers preflights", function() peer.skip(pending, "CORS with curl", curl_absent) end)
    return
  end
  local cors = { origins = { "http://app.example", "http://other.example" } }
  local PREFLIGHT = "-X OPTIONS -H 'Origin: http://app.example' -H 'Access-Control-Request-Method: POST' "
    .. "-H 'Access-Control-Request-Headers: content-type,connect-protocol-version' "

  for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
    it("answers a preflight of an allowed origin with what the protocols need (" .. version .. ")", function()
      serving({ cors = cors }, function(port)
        local a = curl(version .. " " .. PREFLIGHT .. "http://127.0.0.1:" .. port .. "/web.Calc/Add")
        assert.matches("^HTTP/[%d.]+ 204", a)
        assert.are.equal("http://app.example", header(a, "access-control-allow-origin"))
        assert.are.equal("GET, POST", header(a, "access-control-allow-methods"))
        assert.are.equal("Content-Type, Connect-Protocol-Version, Connect-Timeout-Ms, Connect-Accept-Encoding, "
          .. "Connect-Content-Encoding, Accept-Encoding, Content-Encoding, Grpc-Timeout, X-Grpc-Web, X-User-Agent",
          header(a, "access-control-allow-headers"))
        assert.are.equal("7200", header(a, "access-control-max-age"))
        assert.are.equal("Origin", header(a, "vary"))
        assert.is_nil(header(a, "access-control-allow-credentials"))
      end)
    end)
  end

  it("gives a disallowed origin no CORS header, over both HTTP versions", function()
    serving({ cors = cors }, function(port)
      for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
        local a = curl(version .. " " .. PREFLIGHT:gsub("app%.example", "evil.example")
          .. "http://127.0.0.1:" .. port .. "/web.Calc/Add")
        assert.matches("^HTTP/[%d.]+ 204", a)
        assert.is_nil(a:find("access-control", 1, true))
        local b = curl(version .. " -H 'Origin: http://evil.example' -H 'content-type: application/json' "
          .. "-d '{\"x\":1,\"y\":2}' http://127.0.0.1:" .. port .. "/web.Calc/Add")
        assert.matches('{"total":"3"}', b, 1, true)
        assert.is_nil(b:find("access-control", 1, true))
        -- the answer varies by Origin either way (a cache must keep the variants apart)
        assert.are.equal("Origin", header(b, "vary"))
        local c = curl(version .. " -H 'content-type: application/json' -d '{\"x\":1,\"y\":2}' "
          .. "http://127.0.0.1:" .. port .. "/web.Calc/Add")
        assert.are.equal("Origin", header(c, "vary"))
      end
    end)
  end)

  it("marks responses to an allowed origin, errors and gRPC-Web's trailers-only ones too", function()
    serving({ cors = cors }, function(port)
      local url = "http://127.0.0.1:" .. port
      local a = curl("--http1.1 -H 'Origin: http://other.example' -H 'content-type: application/json' "
        .. "-d '{\"x\":-1,\"y\":2}' " .. url .. "/web.Calc/Mul")
      assert.matches("^HTTP/1.1 400", a)
      assert.are.equal("http://other.example", header(a, "access-control-allow-origin"))
      assert.are.equal("Content-Encoding, Connect-Content-Encoding, Grpc-Status, Grpc-Message, "
        .. "Grpc-Status-Details-Bin", header(a, "access-control-expose-headers"))
      -- gRPC-Web whose status is in the headers (no message sent)
      local b = curl("--http2-prior-knowledge -H 'Origin: http://app.example' "
        .. "-H 'content-type: application/grpc-web+proto' --data-binary @/dev/null " .. url .. "/web.Nope/X")
      assert.are.equal("http://app.example", header(b, "access-control-allow-origin"))
      assert.are.equal("12", header(b, "grpc-status"))
    end)
  end)

  it("takes \"*\", more headers, credentials and max_age", function()
    serving({ cors = { origins = { "*" } } }, function(port)
      local a = curl("--http2-prior-knowledge " .. PREFLIGHT .. "http://127.0.0.1:" .. port .. "/web.Calc/Add")
      assert.are.equal("*", header(a, "access-control-allow-origin"))
    end)
    serving({ cors = { origins = { "*" }, credentials = true, max_age = 60, headers = { "X-Token" },
      expose = { "X-Id", "Trailer-X-Id" } } }, function(port)
      local url = "http://127.0.0.1:" .. port .. "/web.Calc/Add"
      local a = curl("--http1.1 " .. PREFLIGHT .. url)
      assert.are.equal("http://app.example", header(a, "access-control-allow-origin")) -- never * then
      assert.are.equal("true", header(a, "access-control-allow-credentials"))
      assert.are.equal("60", header(a, "access-control-max-age"))
      assert.is_true(ends(header(a, "access-control-allow-headers"), ", X-Grpc-Web, X-User-Agent, X-Token"))
      local b = curl("--http1.1 -H 'Origin: http://app.example' -H 'content-type: application/json' "
        .. "-d '{\"x\":1,\"y\":2}' " .. url)
      assert.is_true(ends(header(b, "access-control-expose-headers"), ", Grpc-Status-Details-Bin, X-Id, Trailer-X-Id"))
      assert.are.equal("true", header(b, "access-control-allow-credentials"))
    end)
  end)

  for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
    it("exposes a 415's Accept-Post to an allowed origin's script (" .. version .. ")", function()
      serving({ cors = cors }, function(port)
        -- (over HTTP/2 without a body: curl 7.88 loses a response that comes
        -- before the request's end, and the RST_STREAM NO_ERROR after it,
        -- as RFC 9113 8.1 has it, in some runs)
        local body = version == "--http1.1" and "-d 'x' " or "-X POST "
        local a = curl(version .. " -H 'Origin: http://app.example' -H 'content-type: text/plain' "
          .. body .. "http://127.0.0.1:" .. port .. "/web.Calc/Add")
        assert.matches("^HTTP/[%d.]+ 415", a)
        assert.truthy(header(a, "accept-post"))
        assert.is_true(ends(header(a, "access-control-expose-headers"), ", Grpc-Status-Details-Bin, Accept-Post"),
          header(a, "access-control-expose-headers"))
      end)
    end)
  end

  -- REST routes of web.Calc: PUT, DELETE, PATCH and a custom verb besides GET and POST
  local RULES = { rules = {
    { selector = "web.Calc.Add", put = "/v1/add/{x}", body = "*",
      additional_bindings = { { patch = "/v1/add/{x}", body = "*" }, { get = "/v1/add/{x}" } } },
    { selector = "web.Calc.Mul", delete = "/v1/mul/{x}",
      additional_bindings = { { custom = { kind = "SEARCH", path = "/v1/mul/{x}" } } } },
  } }
  local REST_PREFLIGHT = "-X OPTIONS -H 'Origin: http://app.example' -H 'Access-Control-Request-Method: PUT' "
    .. "-H 'Access-Control-Request-Headers: content-type,authorization,x-req,grpc-metadata-trace-id,"
    .. "Grpc-Metadata-Tenant, x-other,grpc-metadata-' "

  for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
    it("with rest, allows the routes' methods and the headers REST takes as metadata (" .. version .. ")", function()
      serving({ cors = cors, rest = { http = RULES } }, function(port)
        local a = curl(version .. " " .. REST_PREFLIGHT .. "http://127.0.0.1:" .. port .. "/v1/add/1")
        assert.matches("^HTTP/[%d.]+ 204", a)
        assert.are.equal("http://app.example", header(a, "access-control-allow-origin"))
        assert.are.equal("GET, POST, DELETE, PATCH, PUT, SEARCH", header(a, "access-control-allow-methods"))
        -- Authorization (the transcoder's headers by default), and the Grpc-Metadata-* asked for;
        -- x-req and x-other are no metadata of REST's: not allowed
        assert.is_true(ends(header(a, "access-control-allow-headers"),
          ", X-Grpc-Web, X-User-Agent, authorization, grpc-metadata-trace-id, Grpc-Metadata-Tenant"))
        -- the browser's PUT then gets the answer
        local b = curl(version .. " -X PUT -H 'Origin: http://app.example' -H 'content-type: application/json' "
          .. "-d '{\"y\":2}' http://127.0.0.1:" .. port .. "/v1/add/1")
        assert.matches('{"total":"3"}', b, 1, true)
        assert.are.equal("http://app.example", header(b, "access-control-allow-origin"))
      end)
    end)
  end

  it("with rest, allows the rest option's headers and the cors option's, each once", function()
    serving({ cors = { origins = { "*" }, headers = { "X-Token", "Authorization" } },
      rest = { http = RULES, headers = { "authorization", "X-Req", "x-token" } } }, function(port)
      local a = curl("--http2-prior-knowledge " .. REST_PREFLIGHT .. "http://127.0.0.1:" .. port .. "/v1/mul/1")
      assert.is_true(ends(header(a, "access-control-allow-headers"), ", X-User-Agent, X-Token, Authorization, "
        .. "X-Req, grpc-metadata-trace-id, Grpc-Metadata-Tenant"))
    end)
  end)

  it("with rest, lists OPTIONS in a REST path's Allow, its preflights answered", function()
    -- (a plain OPTIONS was 405 "Allow: GET, HEAD, PATCH, PUT", no OPTIONS; with cors then 405
    -- though its Allow listed OPTIONS: 204 now, RFC 9110 9.3.7, over HTTP/1.1 with no body)
    for _, on in ipairs { true, false } do
      serving({ cors = on and cors or nil, rest = { http = RULES } }, function(port)
        for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
          local a = curl(version .. " -X OPTIONS http://127.0.0.1:" .. port .. "/v1/add/1")
          assert.matches(on and "^HTTP/[%d.]+ 204" or "^HTTP/[%d.]+ 405", a)
          assert.are.equal(on and "GET, HEAD, OPTIONS, PATCH, PUT" or "GET, HEAD, PATCH, PUT", header(a, "allow"))
          -- a method's path: its 405's Allow ("OPTIONS, POST" with cors), 204 with cors
          a = curl(version .. " -X OPTIONS http://127.0.0.1:" .. port .. "/web.Calc/Add")
          assert.matches(on and "^HTTP/[%d.]+ 204" or "^HTTP/[%d.]+ 405", a)
          assert.are.equal(on and "OPTIONS, POST" or "POST", header(a, "allow"))
          if on then assert.is_true(ends(a, "\n\n"), a) end
          -- a path of neither: REST's 404
          a = curl(version .. " -X OPTIONS http://127.0.0.1:" .. port .. "/v1/nope")
          assert.matches("^HTTP/[%d.]+ 404", a)
        end
      end)
    end
  end)

  for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
    it("with rest, reads an Access-Control-Request-Headers sent twice as one list (" .. version .. ")", function()
      serving({ cors = cors, rest = { http = RULES } }, function(port)
        local a = curl(version .. " -X OPTIONS -H 'Origin: http://app.example' "
          .. "-H 'Access-Control-Request-Method: PUT' -H 'Access-Control-Request-Headers: grpc-metadata-first' "
          .. "-H 'Access-Control-Request-Headers: grpc-metadata-second' http://127.0.0.1:" .. port .. "/v1/add/1")
        assert.matches("^HTTP/[%d.]+ 204", a)
        assert.is_true(ends(header(a, "access-control-allow-headers"),
          ", X-User-Agent, authorization, grpc-metadata-first, grpc-metadata-second"),
          header(a, "access-control-allow-headers"))
      end)
    end)
  end

  it("with rest, echoes no name of an Access-Control-Request-Headers past 8 KiB (3,000 names)", function()
    -- the header list raised to 1 MiB so the preflight is read (16 KiB by default: refused
    -- before); 3,000 Grpc-Metadata-* names were all echoed, a 63 KB answer header
    local names = {}
    for i = 1, 3000 do names[i] = ("grpc-metadata-h%04d"):format(i) end
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("Access-Control-Request-Headers: ", table.concat(names, ","), "\n")
    f:close()
    local fixed = ", X-Grpc-Web, X-User-Agent, authorization"
    local ok, err = pcall(serving, { cors = cors, rest = { http = RULES }, max_header_list_size = 1048576 },
      function(port)
        local pre = "--http2-prior-knowledge -X OPTIONS -H 'Origin: http://app.example' "
          .. "-H 'Access-Control-Request-Method: PUT' "
        local a = curl(pre .. "-H @" .. path .. " http://127.0.0.1:" .. port .. "/v1/add/1")
        assert.matches("^HTTP/[%d.]+ 204", a)
        local allowed = header(a, "access-control-allow-headers")
        assert.is_true(ends(allowed, fixed), allowed)
        -- 400 names (7,999 bytes) are echoed whole
        a = curl(pre .. "-H 'Access-Control-Request-Headers: " .. table.concat(names, ",", 1, 400) .. "' "
          .. "http://127.0.0.1:" .. port .. "/v1/add/1")
        assert.is_true(ends(header(a, "access-control-allow-headers"), fixed .. ", "
          .. table.concat(names, ", ", 1, 400)))
      end)
    os.remove(path)
    if not ok then error(err, 0) end
  end)

  it("follows listener:set_server's routes and rest option", function()
    local l = pc.listen(calc_server(POOL), "127.0.0.1:0", { cors = cors, rest = { http = RULES } })
    local ok, err
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      ok, err = pcall(function()
        local url = "http://127.0.0.1:" .. l.port .. "/v1/add/1"
        assert.are.equal("GET, POST, DELETE, PATCH, PUT, SEARCH",
          header(curl("--http1.1 " .. REST_PREFLIGHT .. url), "access-control-allow-methods"))
        l:set_server(calc_server(POOL), { http = { rules = { { selector = "web.Calc.Add", put = "/v1/add/{x}",
          body = "*" } } }, headers = { "X-Req" } })
        local a = curl("--http1.1 " .. REST_PREFLIGHT .. url)
        assert.are.equal("GET, POST, PUT", header(a, "access-control-allow-methods"))
        assert.is_true(ends(header(a, "access-control-allow-headers"),
          ", X-User-Agent, X-Req, grpc-metadata-trace-id, Grpc-Metadata-Tenant"))
      end)
      l:shutdown(1)
    end)
    pc.run()
    if not ok then error(err, 0) end
  end)

  it("without rest, allows GET and POST and no Grpc-Metadata-* header", function()
    serving({ cors = cors }, function(port)
      local a = curl("--http1.1 " .. REST_PREFLIGHT .. "http://127.0.0.1:" .. port .. "/web.Calc/Add")
      assert.are.equal("GET, POST", header(a, "access-control-allow-methods"))
      assert.is_true(ends(header(a, "access-control-allow-headers"), ", X-Grpc-Web, X-User-Agent"))
    end)
  end)

  it("leaves CORS headers out of a native gRPC answer, a gRPC-Web one carrying them (an allowed Origin)", function()
    -- (vary: Origin and access-control-* reached gRPC clients as response
    -- metadata)
    local file = os.tmpname()
    local f = assert(io.open(file, "wb"))
    f:write("\0\0\0\0\0") -- web.Calc.Add's empty Point
    f:close()
    serving({ cors = { origins = { "http://app.example" } } }, function(port)
      local function ask(ct)
        return curl("--http2-prior-knowledge -H 'Origin: http://app.example' -H 'te: trailers' -H 'content-type: "
          .. ct .. "' --data-binary @" .. file .. " 'http://127.0.0.1:" .. port .. "/web.Calc/Add'")
      end
      local grpc, web = ask("application/grpc"), ask("application/grpc-web+proto")
      assert.matches("^HTTP/2 200", grpc)
      assert.matches("grpc%-status: 0\n", grpc) -- (a trailer, after the body)
      assert.is_nil(grpc:find("\nvary:"), grpc)
      assert.is_nil(grpc:find("access-control", 1, true), grpc)
      assert.are.equal("Origin", header(web, "vary"), web)
      assert.are.equal("http://app.example", header(web, "access-control-allow-origin"), web)
    end)
    os.remove(file)
  end)

  it("is off by default: OPTIONS is refused as any method but POST, 405 Allow: POST", function()
    -- (it was 415, as a request that is not the protocols'; connect-go refuses the method first)
    serving(nil, function(port)
      local a = curl("--http2-prior-knowledge " .. PREFLIGHT .. "http://127.0.0.1:" .. port .. "/web.Calc/Add")
      assert.matches("^HTTP/2 405", a)
      assert.are.equal("POST", header(a, "allow"))
      assert.is_nil(a:find("access-control", 1, true))
    end)
  end)
end)

describe("Connect GET served by pc.listen", function()
  if curl_absent then
    it("answers GET", function() peer.skip(pending, "Connect GET with curl", curl_absent) end)
    return
  end
  local JSON = "message=%7B%22x%22%3A6%2C%22y%22%3A7%7D" -- {"x":6,"y":7}

  for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
    it("answers a method with no side effects, JSON and base64 protobuf (" .. version .. ")", function()
      serving(nil, function(port)
        local url = "'http://127.0.0.1:" .. port .. "/web.Calc/Mul?connect=v1&"
        local a = curl(version .. " " .. url .. "encoding=json&" .. JSON .. "'")
        assert.matches("^HTTP/[%d.]+ 200", a)
        assert.are.equal("application/json", header(a, "content-type"))
        assert.matches('\n\n{"total":"42"}$', a)
        -- Point{x = 6, y = 7} is 08 06 10 07: base64url "CAYQBw", unpadded
        local b = curl(version .. " " .. url .. "encoding=proto&base64=1&message=CAYQBw'")
        assert.are.equal("application/proto", header(b, "content-type"))
        assert.is_true(ends(b, "\n\n\8\42")) -- Sum{total = 42}
      end)
    end)
  end

  it("takes a gzipped message and ignores other parameters (a cache-buster)", function()
    serving(nil, function(port)
      local a = curl("--http2-prior-knowledge \"http://127.0.0.1:" .. port .. "/web.Calc/Mul?connect=v1"
        .. "&encoding=proto&base64=1&compression=gzip&_=123&message=$(printf '\\010\\006\\020\\007' | gzip -c "
        .. "| base64 -w0 | tr '+/' '-_' | tr -d '=')\"")
      assert.matches("^HTTP/2 200", a)
      assert.is_true(ends(a, "\n\n\8\42"))
    end)
  end)

  it("answers a bad query with Connect's error JSON, over both HTTP versions", function()
    serving(nil, function(port)
      local url = "'http://127.0.0.1:" .. port .. "/web.Calc/Mul?"
      for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
        local cases = {
          { "connect=v1&" .. JSON, "400", "invalid_argument",
            "Connect GET: query parameter 'encoding' is missing (proto or json)" },
          { "encoding=xml&" .. JSON, "400", "invalid_argument",
            "Connect GET: query parameter 'encoding' must be proto or json, got 'xml'" },
          { "connect=v2&encoding=json&" .. JSON, "400", "invalid_argument",
            "Connect GET: query parameter 'connect' must be v1, got 'v2'" },
          { "encoding=json", "400", "invalid_argument", "Connect GET: query parameter 'message' is missing" },
          { "encoding=proto&base64=1&message=%%%", "400", "invalid_argument",
            "Connect GET: query parameter 'message' has a '%' not followed by two hex digits" },
          { "encoding=proto&base64=1&message=C*", "400", "invalid_argument",
            "Connect GET: query parameter 'message' is not base64url (base64=1)" },
          { "encoding=proto&base64=1&compression=br&message=CAYQBw", "400", "invalid_argument",
            "Connect GET: query parameter 'compression' must be gzip or identity, got 'br'" },
          { "encoding=json&message=%7B", "400", "invalid_argument", "request is not valid JSON for web.Point" },
          { "encoding=proto&base64=1&message=_w", "400", "invalid_argument", "request failed to decode" },
          { "encoding=proto&base64=1&compression=gzip&message=CAYQBw", "400", "invalid_argument",
            "request message is not valid gzip" },
          { "encoding=json&" .. JSON, "400", "invalid_argument", "Connect GET: a GET carries no request body",
            "-X GET --data-binary x " },
        }
        for _, c in ipairs(cases) do
          local a = curl(version .. " " .. (c[5] or "") .. url .. c[1] .. "'")
          assert.matches("^HTTP/[%d.]+ " .. c[2], a)
          assert.are.equal("application/json", header(a, "content-type"))
          local body = a:match("\n\n(.*)$")
          assert.matches('{"code":"' .. c[3] .. '","message":"', body, 1, true)
          assert.matches(c[4], body, 1, true)
        end
      end
    end)
  end)

  it("with rest, answers a Connect GET URL without connect=v1 404, saying it needs connect=v1", function()
    -- (with REST on, connect=v1 is what tells a Connect GET from a REST GET)
    serving({ rest = true }, function(port)
      for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
        local url = "'http://127.0.0.1:" .. port
        local a = curl(version .. " " .. url .. "/web.Calc/Mul?encoding=json&" .. JSON .. "'")
        assert.matches("^HTTP/[%d.]+ 404", a)
        assert.are.equal('{"code":5,"message":"no route for GET /web.Calc/Mul (a Connect GET needs connect=v1 in '
          .. 'its query)","details":[]}', a:match("\n\n(.*)$"))
        a = curl(version .. " -I " .. url .. "/web.Calc/Mul?" .. JSON .. "'")
        assert.matches("^HTTP/[%d.]+ 404", a)
        -- a path that names no method, a query of no Connect GET: REST's 404 alone
        a = curl(version .. " " .. url .. "/web.Calc/Nope?encoding=json&" .. JSON .. "'")
        assert.are.equal('{"code":5,"message":"no route for GET /web.Calc/Nope","details":[]}', a:match("\n\n(.*)$"))
        a = curl(version .. " " .. url .. "/web.Calc/Mul?x=1'")
        assert.are.equal('{"code":5,"message":"no route for GET /web.Calc/Mul","details":[]}', a:match("\n\n(.*)$"))
      end
    end)
    -- connect=v1 on a REST route's path: a Connect GET of no method, 404 (it was answered as the
    -- route with its query lost: {} for GET /v1/add/2?connect=v1&...&y=3)
    serving({ rest = { http = { rules = { { selector = "web.Calc.Add", get = "/v1/add/{x}" } } } } }, function(port)
      for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
        local a = curl(version .. " 'http://127.0.0.1:" .. port .. "/v1/add/2?connect=v1&encoding=json&" .. JSON
          .. "&y=3'")
        assert.matches("^HTTP/[%d.]+ 404", a)
        assert.matches("unknown method /v1/add/2 (a Connect GET, connect=v1 in its query, names /pkg.Service/Method)",
          a, 1, true)
        assert.matches('\n\n{"total":"5"}$', curl(version .. " 'http://127.0.0.1:" .. port .. "/v1/add/2?y=3'"))
      end
    end)
    -- without REST, that URL is a Connect GET (connect-go requires connect=v1 only when told to)
    serving(nil, function(port)
      local a = curl("'http://127.0.0.1:" .. port .. "/web.Calc/Mul?encoding=json&" .. JSON .. "'")
      assert.matches("^HTTP/[%d.]+ 200", a)
    end)
  end)

  it("checks a GET's path, then its method, then its query, as connect-go", function()
    -- (each was 400 "Connect GET: query parameter 'encoding' is missing": the query was read first)
    serving(nil, function(port)
      local url = "'http://127.0.0.1:" .. port
      for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
        -- a path that names no method: what its POST gets, 404 UNIMPLEMENTED (a HEAD its head)
        for _, path in ipairs { "/v1/books/1", "/nothing", "/web.Calc/Nope?connect=v1" } do
          local a = curl(version .. " " .. url .. path .. "'")
          assert.matches("^HTTP/[%d.]+ 404", a)
          assert.are.equal('{"code":"unimplemented","message":"unknown method ' .. path:match("^[^?]*") .. '"}',
            a:match("\n\n(.*)$"))
          a = curl(version .. " -I " .. url .. path .. "'")
          assert.matches("^HTTP/[%d.]+ 404", a)
          assert.is_true(ends(a, "\n\n"), a)
        end
        -- a method with side effects, a stream: 405 whatever the query
        for _, q in ipairs { "", "?connect=v1", "?connect=v1&encoding=xml" } do
          for _, method in ipairs { "Add", "Count" } do
            for _, head in ipairs { "", "-I " } do
              local a = curl(version .. " " .. head .. url .. "/web.Calc/" .. method .. q .. "'")
              assert.matches("^HTTP/[%d.]+ 405", a)
              assert.are.equal("POST", header(a, "allow"))
            end
          end
        end
        -- a method that takes GETs: then the query
        local a = curl(version .. " " .. url .. "/web.Calc/Mul?connect=v1'")
        assert.matches("^HTTP/[%d.]+ 400", a)
        assert.matches("query parameter 'encoding' is missing", a, 1, true)
      end
    end)
  end)

  it("refuses GET for a method with side effects or a stream: 405 Allow: POST, as connect-go", function()
    serving(nil, function(port)
      for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
        for _, method in ipairs { "Add", "Count" } do
          local a = curl(version .. " 'http://127.0.0.1:" .. port .. "/web.Calc/" .. method
            .. "?connect=v1&encoding=json&" .. JSON .. "'")
          assert.matches("^HTTP/[%d.]+ 405", a)
          assert.are.equal("POST", header(a, "allow"))
        end
      end
    end)
  end)

  for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
    it("answers HEAD as GET, with the head alone (" .. version .. ")", function()
      -- (it was 415 without REST and 404 with it; a body over HTTP/2 has
      -- curl reset the stream)
      for _, opts in ipairs { false, { rest = true } } do
        serving(opts or nil, function(port)
          local url = "'http://127.0.0.1:" .. port .. "/web.Calc/"
          local get = curl(version .. " " .. url .. "Mul?connect=v1&encoding=json&" .. JSON .. "'")
          local a = curl(version .. " -I " .. url .. "Mul?connect=v1&encoding=json&" .. JSON .. "'")
          assert.matches("^HTTP/[%d.]+ 200", a)
          assert.are.equal("application/json", header(a, "content-type"))
          assert.are.equal("14", header(get:lower(), "content-length"))
          assert.are.equal("14", header(a:lower(), "content-length"))
          assert.is_true(ends(a, "\n\n"), a)
          -- a bad query: the GET's 400 head
          a = curl(version .. " -I " .. url .. "Mul?connect=v1&encoding=xml&" .. JSON .. "'")
          assert.matches("^HTTP/[%d.]+ 400", a)
          assert.are.equal("application/json", header(a, "content-type"))
          assert.is_true(ends(a, "\n\n"), a)
          -- a method with side effects, a stream: the GET's 405
          for _, method in ipairs { "Add", "Count" } do
            a = curl(version .. " -I " .. url .. method .. "?connect=v1&encoding=json&" .. JSON .. "'")
            assert.matches("^HTTP/[%d.]+ 405", a)
            assert.are.equal("POST", header(a, "allow"))
            -- (the GET's length, 0: it was missing, over both HTTP versions)
            assert.are.equal("0", header(a:lower(), "content-length"))
          end
        end)
      end
    end)
  end

  it("refuses gRPC-Web, Connect streaming and gRPC by any method but POST: 405 Allow: POST", function()
    -- (HEAD and PUT ran the handler with no request, answered UNIMPLEMENTED
    -- in a 200; GET was a Connect GET without REST, a 400. Mul takes a
    -- Connect GET: its Allow lists GET, as connect-go's, whatever the protocol)
    for _, opts in ipairs { false, { rest = true } } do
      serving(opts or nil, function(port)
        for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
          -- (gRPC over HTTP/1.1 is 505, whatever its method)
          local types = { "application/grpc-web+proto", "application/grpc-web-text", "application/connect+json" }
          if version ~= "--http1.1" then types[#types + 1] = "application/grpc" end
          for _, ct in ipairs(types) do
            for _, method in ipairs { "-I", "-X GET", "-X PUT" } do
              local a = curl(version .. " " .. method .. " -H 'content-type: " .. ct .. "' 'http://127.0.0.1:"
                .. port .. "/web.Calc/Mul'")
              assert.matches("^HTTP/[%d.]+ 405", a)
              assert.are.equal("GET, POST", header(a, "allow"))
            end
          end
        end
      end)
    end
  end)

  it("refuses Connect unary by another method than POST or GET 405 without rest, whatever its type", function()
    -- (it was 415, its type read as none of the protocols'; connect-go answers 405 to a method its
    -- handler does not take before it reads the type, Allow "GET, POST" where a Connect GET calls it)
    local cors = { origins = { "http://app.example" } }
    for _, on in ipairs { false, true } do
      serving({ cors = on and cors or nil }, function(port)
        for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
          local url = "'http://127.0.0.1:" .. port .. "/web.Calc/"
          for _, ct in ipairs { "application/proto", "application/json", "text/plain" } do
            for method, allow in pairs { Add = "POST", Mul = "GET, POST" } do
              for _, verb in ipairs { "PUT", "DELETE" } do
                local what = version .. " " .. verb .. " " .. ct .. " " .. method
                local a = curl(version .. " -X " .. verb .. " -H 'Origin: http://app.example' -H 'content-type: "
                  .. ct .. "' " .. url .. method .. "'")
                assert.are.equal("405", a:match("^HTTP/[%d.]+ (%d+)"), what .. ": " .. a)
                assert.are.equal(on and (allow:gsub("POST", "OPTIONS, POST")) or allow, header(a, "allow"), what)
                assert.are.equal("0", header(a:lower(), "content-length"), what)
              end
            end
          end
          -- a plain OPTIONS (no preflight) too, 204 with that Allow where cors answers the path's
          -- preflights (it was 405 though its Allow listed OPTIONS); to a path that names no method,
          -- what its POST gets: 415
          for method, allow in pairs { Add = "POST", Mul = "GET, POST" } do
            local a = curl(version .. " -X OPTIONS " .. url .. method .. "'")
            assert.are.equal(on and "204" or "405", a:match("^HTTP/[%d.]+ (%d+)"), a)
            assert.are.equal(on and (allow:gsub("POST", "OPTIONS, POST")) or allow, header(a, "allow"))
            if on then assert.is_nil(header(a:lower(), "content-length"), a) end
          end
          local a = curl(version .. " -X OPTIONS " .. url .. "Nope'")
          assert.are.equal("415", a:match("^HTTP/[%d.]+ (%d+)"), a)
          a = curl(version .. " -X PUT -H 'content-type: application/proto' " .. url .. "Nope'")
          assert.are.equal("415", a:match("^HTTP/[%d.]+ (%d+)"), a)
        end
      end)
    end
  end)

  it("with rest, answers a method's path by another method than POST, no route on it, 405 Allow: POST", function()
    -- (it was REST's 404 "no route for PUT /web.Calc/Add"; connect-go answers 405. No bodies: the
    -- answer comes at once, and curl, still sending one over HTTP/2, fails 92)
    local cors = { origins = { "http://app.example" } }
    for _, on in ipairs { false, true } do
      serving({ rest = true, cors = on and cors or nil }, function(port)
        for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
          local url = "'http://127.0.0.1:" .. port
          for _, req in ipairs { "-X PUT -H 'content-type: application/json' " .. url .. "/web.Calc/Add'",
            "-X DELETE " .. url .. "/web.Calc/Count'", url .. "/web.Calc/Add?x=1'",
            "-I " .. url .. "/web.Calc/Count'" } do
            local a = curl(version .. " -H 'Origin: http://app.example' " .. req)
            assert.matches("^HTTP/[%d.]+ 405", a)
            assert.are.equal(on and "OPTIONS, POST" or "POST", header(a, "allow"))
          end
          local a = curl(version .. " -X PUT -H 'content-type: application/json' " .. url .. "/web.Calc/Add'")
          assert.are.equal('{"code":12,"message":"method PUT not allowed for /web.Calc/Add","details":[]}',
            a:match("\n\n(.*)$"))
          -- a path that names no method: REST's 404
          a = curl(version .. " -X PUT -H 'content-type: application/json' " .. url .. "/web.Calc/Nope'")
          assert.matches("^HTTP/[%d.]+ 404", a)
        end
      end)
    end
  end)

  it("serves a Connect GET (connect=v1 in its query) whatever its content-type says", function()
    -- (the engine takes it as a Connect GET; the listener must not read
    -- it as Connect streaming's by another method than POST, a 405)
    serving(nil, function(port)
      for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
        local a = curl(version .. " -H 'content-type: application/connect+json' 'http://127.0.0.1:" .. port
          .. "/web.Calc/Mul?connect=v1&encoding=json&" .. JSON .. "'")
        assert.matches("^HTTP/[%d.]+ 200", a)
      end
    end)
  end)

  it("answers those by another method than POST to an unknown path as their POST: 404, UNIMPLEMENTED", function()
    -- (they were 405 "Allow: POST", the engine answering before the path
    -- was known to name no method)
    for _, opts in ipairs { false, { rest = true } } do
      serving(opts or nil, function(port)
        for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
          local types = { "application/grpc-web+proto", "application/grpc-web-text", "application/connect+json" }
          if version ~= "--http1.1" then types[#types + 1] = "application/grpc" end
          for _, ct in ipairs(types) do
            local function ask(method)
              return curl(version .. " " .. method .. " -H 'content-type: " .. ct .. "' 'http://127.0.0.1:"
                .. port .. "/web.Calc/Nope'")
            end
            local post = ask("-d ''")
            local status = post:match("^HTTP/[%d.]+ (%d+)")
            assert.are.equal(ct == "application/grpc" and "200" or "404", status, post)
            for _, method in ipairs { "-I", "-X GET", "-X PUT" } do
              local a = ask(method)
              assert.are.equal(status, a:match("^HTTP/[%d.]+ (%d+)"), method .. " " .. ct .. ": " .. a)
              assert.is_nil(header(a, "allow"), a)
              if ct ~= "application/connect+json" then assert.are.equal("12", header(a, "grpc-status"), a) end
              if method == "-I" then
                assert.is_true(ends(a, "\n\n"), a) -- the head alone
              else
                assert.are.equal(post:match("\n\n(.*)$"), a:match("\n\n(.*)$"), a)
              end
            end
          end
        end
      end)
    end
  end)

  it("answers those by another method than POST 405 or 404 whatever their body and headers", function()
    -- (a body of bad framing, a malformed grpc-timeout, an unknown
    -- grpc-encoding: the engine refused them with their own error, 200
    -- and grpc-status 13 or 12, before the listener's 405)
    local file = os.tmpname()
    local f = assert(io.open(file, "wb"))
    f:write("xxxxxxxxxx") -- no envelope
    f:close()
    serving(nil, function(port)
      -- {status, allow} of a PUT over HTTP/1.1 (curl) or HTTP/2 (nghttp:
      -- curl 7.88 may lose an HTTP/2 answer sent before its body is up)
      local function put(h2, ct, extra, path)
        local url = "'http://127.0.0.1:" .. port .. "/web.Calc/" .. path .. "'"
        if not h2 then
          local a = curl("--http1.1 -X PUT -H 'content-type: " .. ct .. "' "
            .. (extra == "body" and "--data-binary @" .. file or "-H '" .. extra .. "' -d ''") .. " " .. url)
          return a:match("^HTTP/[%d.]+ (%d+)"), header(a, "allow")
        end
        local out = peer.command("nghttp -v -t 10 -H ':method: PUT' -H 'content-type: " .. ct .. "' "
          .. (extra == "body" and "-d " .. file or "-H '" .. extra .. "'") .. " " .. url)
        return out:match("recv %(stream_id=%d+%) :status: (%d+)"), out:match("recv %(stream_id=%d+%) allow: (%S+)")
      end
      -- nor do they turn a type of none of the protocols' 415 into another answer
      for _, extra in ipairs { "grpc-timeout: xx", "grpc-encoding: br" } do
        local a = curl("--http1.1 -H 'content-type: text/plain' -H '" .. extra .. "' -d x 'http://127.0.0.1:"
          .. port .. "/web.Calc/Add'")
        assert.are.equal("415", a:match("^HTTP/[%d.]+ (%d+)"), extra .. ": " .. a)
      end
      for _, h2 in ipairs { false, true } do
        local types = { "application/grpc-web+proto", "application/connect+json" }
        if h2 then types[#types + 1] = "application/grpc" end
        for _, ct in ipairs(types) do
          for _, extra in ipairs { "body", "grpc-timeout: xx", "grpc-encoding: br" } do
            for path, want in pairs { Add = "405", Nope = ct == "application/grpc" and "200" or "404" } do
              local status, allow = put(h2, ct, extra, path)
              local what = (h2 and "HTTP/2 " or "HTTP/1.1 ") .. ct .. " " .. extra .. " " .. path
              assert.are.equal(want, status, what)
              assert.are.equal(path == "Add" and "POST" or nil, allow, what)
            end
          end
        end
      end
    end)
    os.remove(file)
  end)

  for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
    it("lists in a 415's Accept-Post the content types the method takes, without REST (" .. version .. ")", function()
      -- (a streaming method's listed Connect unary's, which it refuses:
      -- the engine answered before the method was known)
      serving(nil, function(port)
        -- (over HTTP/2 without a body, as the CORS 415 above)
        local body = version == "--http1.1" and "-d 'x' " or "-X POST "
        local function ask(method)
          return curl(version .. " -H 'content-type: text/plain' " .. body .. "'http://127.0.0.1:" .. port
            .. "/web.Calc/" .. method .. "'")
        end
        local count, add, nope = ask("Count"), ask("Add"), ask("Nope")
        for _, a in ipairs { count, add, nope } do
          assert.matches("^HTTP/[%d.]+ 415", a)
          assert.matches("application/connect+json", header(a, "accept-post"), 1, true)
          assert.matches("application/grpc", header(a, "accept-post"), 1, true)
        end
        assert.is_nil(header(count, "accept-post"):find("application/json", 1, true), count)
        assert.is_nil(header(count, "accept-post"):find("application/proto", 1, true), count)
        assert.is_true(ends(header(add, "accept-post"), ", application/proto, application/json"), add)
        assert.are.equal(header(add, "accept-post"), header(nope, "accept-post"))
      end)
    end)
  end
end)

describe("gRPC-Web bodies that are no envelopes, served by pc.listen", function()
  if curl_absent then
    it("are INTERNAL", function() peer.skip(pending, "gRPC-Web bodies with curl", curl_absent) end)
    return
  end

  -- a body cut inside its 5-byte prefix or its message, a flags byte
  -- neither 0 nor 1: INTERNAL, as gRPC (grpc-go) answers them and as the
  -- nginx gateway does (spec/nginx_gateway_spec.lua, spec/gateway_web_spec.lua)
  it("are INTERNAL, with REST on or off, over HTTP/1.1 and HTTP/2", function()
    local cases = {
      { "\0\0\0", "request ended inside a message (3 bytes left over)" },
      { "\0\0\0\0\11x", "request ended inside a message (6 bytes left over)" },
      { "\2\0\0\0\1x", "request message has an invalid flags byte 0x02" },
    }
    local file = os.tmpname()
    for _, opts in ipairs { {}, { rest = true } } do
      serving(opts, function(port)
        for _, version in ipairs { "--http1.1", "--http2-prior-knowledge" } do
          for _, c in ipairs(cases) do
            local f = assert(io.open(file, "wb"))
            f:write(c[1])
            f:close()
            local a = curl(version .. " -H 'content-type: application/grpc-web+proto' --data-binary @" .. file
              .. " http://127.0.0.1:" .. port .. "/web.Calc/Add")
            assert.are.equal("13", header(a, "grpc-status"), a)
            assert.are.equal(c[2], header(a, "grpc-message"), a)
          end
        end
      end)
    end
    os.remove(file)
  end)
end)

describe("pc.grpc's Connect GET", function()
  it("needs protocol connect", function()
    local ok, err = pcall(pc.grpc, "http://127.0.0.1:1", { get = true })
    assert.is_false(ok)
    assert.matches("pc.grpc: option 'get' needs protocol \"connect\"", err, 1, true)
  end)

  it("sends methods with no side effects as GET to pc.listen, others as POST", function()
    serving(nil, function(port, strict)
      for _, codec in ipairs { "proto", "json" } do
        local function stub(p)
          return pc.client("web.Calc", { pool = POOL, transport = pc.grpc("http://127.0.0.1:" .. p,
            { protocol = "connect", get = true, codec = codec }) })
        end
        if codec == "proto" then
          local c = stub(port)
          assert.are.equal(42, c:Mul { x = 6, y = 7 }.total)
          assert.are.equal(13, c:Add { x = 6, y = 7 }.total)
          local ok, err = pcall(c.Mul, c, { x = -1, y = 7 })
          assert.is_false(ok)
          assert.are.equal("INVALID_ARGUMENT", err.code)
          assert.are.equal("negative x", err.message)
          assert.are.equal(ErrorInfo { reason = "NEGATIVE", domain = "web" }, err.details[1])
          -- the strict server refuses Mul's GET: it was one
          local s = stub(strict)
          local ok2, err2 = pcall(s.Mul, s, { x = 6, y = 7 })
          assert.is_false(ok2)
          assert.matches("HTTP status 405", err2.message, 1, true)
          assert.are.equal(13, s:Add { x = 6, y = 7 }.total)
          -- a request whose query would pass 6 KiB goes as POST (the strict
          -- server takes it): x = 6, y = 7 and an unknown field of 10,000 bytes
          local t = pc.grpc("http://127.0.0.1:" .. strict, { protocol = "connect", get = true })
          local big = "\8\6\16\7\122\144\78" .. ("z"):rep(10000)
          local out = t:unary("/web.Calc/Mul", big, { no_side_effects = true })
          assert.are.equal(42, pc.decode(POOL:type("web.Sum"), out).total)
          t:close()
        else
          local t = pc.grpc("http://127.0.0.1:" .. port, { protocol = "connect", get = true, codec = "json" })
          assert.are.equal('{"total":"42"}', t:unary("/web.Calc/Mul", '{"x":6,"y":7}', { no_side_effects = true }))
          t:close()
        end
      end
    end)
  end)

  it("is `protocall call -protocol connect -get`", function()
    local bin = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
    serving(nil, function(port, strict)
      local function call(p, extra)
        return peer.command(bin .. " call -plaintext -I spec/web -proto calc.proto -protocol connect " .. extra
          .. " -d '{\"x\": 6, \"y\": 7}' 127.0.0.1:" .. p .. " web.Calc/Mul")
      end
      local out, err, code = call(port, "-get")
      assert.are.equal(0, code, err)
      assert.matches('"total": "42"', out, 1, true)
      -- the strict server refuses Mul's GET: the command sent one
      local _, err2, code2 = call(strict, "-get")
      assert.are.equal(64 + 2, code2) -- UNKNOWN
      assert.matches("HTTP status 405", err2, 1, true)
      local _, _, code3 = call(strict, "")
      assert.are.equal(0, code3)
    end)
  end)

  local absent = peer.missing("@connectrpc/connect-node")
  it("sends GET to @connectrpc/connect-node's server (HTTP/2)", function()
    if absent then return peer.skip(pending, "Connect GET against connect-node", absent) end
    local set = peer.descriptor_set({ "calc.proto", "google/rpc/status.proto", "google/rpc/error_details.proto" },
      { "spec/web", "core/schema/protos" })
    local server = peer.serve("web_server.mjs", { set, "h2" })
    local ok, err = pcall(function()
      pc.spawn(function()
        for _, get in ipairs { true, false } do
          local c = pc.client("web.Calc", { pool = POOL, transport = pc.grpc(server.url,
            { protocol = "connect", get = get or nil }) })
          local r = c:Mul { x = 6, y = 7 }
          assert.are.equal(42, r.total)
          assert.are.equal(get and "GET" or "POST", r.note)
          local ok2, e = pcall(c.Mul, c, { x = -1, y = 7 })
          assert.is_false(ok2)
          assert.are.equal("INVALID_ARGUMENT", e.code)
          assert.are.equal(ErrorInfo { reason = "NEGATIVE", domain = "web" }, e.details[1])
        end
      end)
      pc.run()
    end)
    peer.stop(server)
    os.remove(set)
    if not ok then error(err, 0) end
  end)
end)

describe("@connectrpc/connect-node's client with useHttpGet against pc.listen", function()
  local absent = peer.missing("@connectrpc/connect-node")
  local set
  setup(function()
    if absent then return end
    set = peer.descriptor_set({ "calc.proto", "google/rpc/status.proto", "google/rpc/error_details.proto" },
      { "spec/web", "core/schema/protos" })
  end)
  teardown(function() if set then os.remove(set) end end)

  for _, version in ipairs { "h1", "h2" } do
    for _, codec in ipairs { "json", "proto" } do
      it(version .. " " .. codec, function()
        if absent then return peer.skip(pending, "connect-node's GET client", absent) end
        serving(nil, function(port, strict)
          assert.are.equal("mul 42\nadd 13\nerror INVALID_ARGUMENT negative x\ndetail ErrorInfo NEGATIVE\n",
            peer.run("web_client.mjs", { set, port, version, codec }))
          -- the strict server refuses Mul's GET: connect-node sent one
          local out = peer.run("web_client.mjs", { set, strict, version, codec })
          assert.matches("^error UNKNOWN HTTP 405", out)
        end)
      end)
    end
  end
end)

describe("a browser page calling pc.listen across origins", function()
  local absent = browser.missing() or peer.missing("@connectrpc/connect-web", "esbuild")
  if absent then
    it("runs", function() peer.skip(pending, "the browser page of connect-web", absent) end)
    return
  end

  -- browser.check of the page once its script wrote "done": chromium's
  -- virtual time budget does not always wait for the page's fetches (seen
  -- under the sanitizer build), so a page dumped before that is loaded
  -- again (at most 4 times); a failed check leaves a screenshot.
  local OPTS = { budget_ms = 60000 }
  local function check_page(url, name, fn)
    for _ = 1, 4 do
      local dom = browser.dump_dom(url, OPTS)
      if dom:find("\ndone</pre>", 1, true) then
        if pcall(fn, dom) then return end
        break
      end
    end
    browser.check(url, name, fn, OPTS)
  end

  local dir
  setup(function()
    -- the page, its bundle (built now, never committed) and the schema, in a
    -- fresh folder the static server serves
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "' && cp spec/web/rpc.html '" .. dir .. "/'"))
    local _, err, code = peer.command(peer.bin("esbuild") .. " spec/web/rpc.mjs --bundle --format=iife "
      .. "--target=es2020 --log-level=warning --outfile='" .. dir .. "/rpc.js'")
    assert(code == 0, "esbuild failed: " .. err)
    local set = peer.descriptor_set({ "calc.proto", "google/rpc/status.proto", "google/rpc/error_details.proto" },
      { "spec/web", "core/schema/protos" })
    assert(os.execute("mv '" .. set .. "' '" .. dir .. "/calc.pb'"))
  end)
  teardown(function() if dir then os.execute("rm -rf '" .. dir .. "'") end end)

  it("over Connect (GET and POST) and gRPC-Web: unary, server streams, errors with details", function()
    local site = browser.serve(dir)
    local ok, err = pcall(serving, { cors = { origins = { site.url } } }, function(port, strict)
      check_page(site.url .. "/rpc.html?port=" .. port .. "&strict=" .. strict, "web-rpc", function(dom)
        local text = assert(dom:match('<pre id="out">(.-)</pre>'), "no output in the page")
        assert.are.equal(table.concat({
          "connect-get-json mul 42",
          "connect-get-json add 13",
          "connect-get-json mul-negative error InvalidArgument negative x detail NEGATIVE",
          "connect-get-json count 1,2 2,4 3,6",
          "connect-post-proto mul 42",
          "connect-post-proto add 13",
          "connect-post-proto mul-negative error InvalidArgument negative x detail NEGATIVE",
          "connect-post-proto count 1,2 2,4 3,6",
          "grpc-web mul 42",
          "grpc-web add 13",
          "grpc-web mul-negative error InvalidArgument negative x detail NEGATIVE",
          "grpc-web count 1,2 2,4 3,6",
          "strict-get mul error Unknown HTTP 405",
          "done",
        }, "\n"), text)
      end)
    end)
    browser.stop(site)
    if not ok then error(err, 0) end
  end)

  it("is refused by the browser when the listener does not allow the page's origin", function()
    local site = browser.serve(dir)
    local ok, err = pcall(serving, { cors = { origins = { "http://elsewhere.example" } } }, function(port, strict)
      check_page(site.url .. "/rpc.html?port=" .. port .. "&strict=" .. strict, "web-rpc-refused", function(dom)
        local text = assert(dom:match('<pre id="out">(.-)</pre>'), "no output in the page")
        assert.matches("connect-get-json mul error Unknown", text, 1, true)
        assert.is_nil(text:find("mul 42", 1, true))
      end)
    end)
    browser.stop(site)
    if not ok then error(err, 0) end
  end)
end)
