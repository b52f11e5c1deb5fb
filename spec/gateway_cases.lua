--- What the REST gateway specs share (spec/rest_gateway_spec.lua: pc.listen's
-- `rest` placement and `protocall gateway`; the nginx placement,
-- spec/nginx_gateway_spec.lua, takes `request`): a client through curl,
-- one through python's http.client (spec/rest_client.py), and the case
-- table of gw.Library's routes (spec/fixtures/protos/gateway/library.proto)
-- as spec/gateway_upstream.py and spec/gateway_library.lua answer them.
local N = require "nginx_helper"
local R = require "runtime"
local now = require("grpc_helper").now

local read, write, q = N.read, N.write, N.quote

local M = {}

--- done, what = M.eventually(seconds, fn): polls `fn` (true when done,
-- and what to say) every 0.1 s for up to `seconds`; its last results.
function M.eventually(seconds, fn)
  local deadline = now() + seconds
  repeat
    local done, what = fn()
    if done then return true, what end
    os.execute("sleep 0.1")
  until now() > deadline
  return fn()
end

--- code, body, headers = M.request(server, path, opts): one request through
-- curl to server.url .. path: the status, the body, the headers
-- (lowercased name -> value). opts: method, body, headers (list of
-- "Name: value"), http2 (true: HTTP/2 with prior knowledge).
function M.request(n, path, opts)
  opts = opts or {}
  local hfile, bfile = os.tmpname(), os.tmpname()
  local cmd = "curl -s --path-as-is -m 20 -D " .. q(hfile) .. " -o " .. q(bfile) .. " -w '%{http_code}'"
  -- (HEAD as -I: with -X HEAD curl would wait for the body a Content-Length announces;
  -- -I writes the head to -o too, so no body is read)
  if opts.method == "HEAD" then cmd = cmd .. " -I"
  elseif opts.method then cmd = cmd .. " -X " .. opts.method end
  if opts.http2 then cmd = cmd .. " --http2-prior-knowledge" end
  local dfile
  if opts.body then
    dfile = os.tmpname()
    write(dfile, opts.body)
    cmd = cmd .. " --data-binary @" .. q(dfile)
  end
  for _, h in ipairs(opts.headers or {}) do cmd = cmd .. " -H " .. q(h) end
  local code = R.capture(cmd .. " " .. q(n.url .. path))
  local headers = {}
  for line in read(hfile):gmatch("[^\r\n]+") do
    local k, v = line:match("^([^:]+):%s*(.*)$")
    if k then headers[k:lower()] = v end
  end
  local body = opts.method == "HEAD" and "" or read(bfile)
  os.remove(hfile)
  os.remove(bfile)
  if dfile then os.remove(dfile) end
  return tonumber(code), body, headers
end

local function json_string(s)
  return '"' .. s:gsub('[%c"\\\128-\255]', function(c) return ("\\u%04x"):format(c:byte()) end) .. '"'
end

--- answers = M.pyrequests(server, list): the requests of `list` (each
-- {path, method =, body =, headers = {"Name: value"...}}) sent in order
-- by python's http.client on one keep-alive connection; each answer
-- {code, body, headers (lowercased name -> value)}.
function M.pyrequests(n, list)
  local parts = {}
  for i, r in ipairs(list) do
    local hs = {}
    for _, h in ipairs(r.headers or {}) do
      local k, v = h:match("^([^:]+):%s*(.*)$")
      hs[#hs + 1] = json_string(k) .. ":" .. json_string(v)
    end
    parts[i] = "{" .. '"method":' .. json_string(r.method or (r.body and "POST" or "GET")) .. ',"path":'
      .. json_string(r[1]) .. ',"headers":{' .. table.concat(hs, ",") .. "}"
      .. (r.body and ',"body":' .. json_string(r.body) or "") .. "}"
  end
  local infile, outfile = os.tmpname(), os.tmpname()
  write(infile, "[" .. table.concat(parts, ",") .. "]")
  assert(os.execute("/usr/bin/python3 spec/rest_client.py " .. n.port .. " < " .. q(infile) .. " > " .. q(outfile)))
  local out = read(outfile)
  os.remove(infile)
  os.remove(outfile)
  local answers, pos = {}, 1
  while pos <= #out do
    local code, nh, len, after = out:match("^(%d+) (%d+) (%d+)\n()", pos)
    assert(code, "rest_client.py printed: " .. out:sub(pos, pos + 80))
    pos = after
    local headers = {}
    for _ = 1, tonumber(nh) do
      local k, v, nxt = out:match("^([^:]+): ([^\n]*)\n()", pos)
      headers[k], pos = v, nxt
    end
    answers[#answers + 1] = { tonumber(code), out:sub(pos, pos + tonumber(len) - 1), headers }
    pos = pos + tonumber(len)
  end
  assert(#answers == #list, "rest_client.py answered " .. #answers .. " of " .. #list)
  return answers
end

--- server = M.start_gateway(bin, port, flags [, listen [, keep_log [, tls]]]):
-- `bin gateway -listen 127.0.0.1:0 -plaintext FLAGS 127.0.0.1:PORT` on a
-- free port (or on `listen`, "127.0.0.1:PORT"): {port, pid, pipe, url} as
-- grpc_helper.spawn_command gives (grpc_helper.stop kills it); with
-- `keep_log`, `log` names the file its stdout and stderr go to (the caller
-- removes it); with `tls`, without -plaintext.
function M.start_gateway(bin, port, flags, listen, keep_log, tls)
  local out = os.tmpname()
  local pipe = io.popen("sh -c 'echo $$; exec " .. bin .. " gateway -listen " .. (listen or "127.0.0.1:0")
    .. (tls and " " or " -plaintext ") .. flags
    .. " 127.0.0.1:" .. port .. "' > " .. q(out) .. " 2>&1", "w")
  for _ = 1, 200 do
    local text = read(out)
    local pid, got = text:match("^(%d+)\n.*listening on 127%.0%.0%.1:(%d+)")
    if got then
      if not keep_log then os.remove(out) end
      return { port = tonumber(got), pid = pid, pipe = pipe, url = "http://127.0.0.1:" .. got,
        log = keep_log and out or nil }
    end
    if text:find("^%d+\n.*\n") and not text:find("listening") then
      os.execute("kill -9 " .. text:match("^(%d+)") .. " 2>/dev/null")
      pipe:close()
      os.remove(out)
      error("protocall gateway printed: " .. text)
    end
    os.execute("sleep 0.05")
  end
  pipe:close()
  os.remove(out)
  error("protocall gateway did not start")
end

--- The case table: each {name, path, method =, body =, headers =, code,
-- body expected exactly (or `match`, a Lua pattern), `response_headers` =
-- {name = value} expected among the answer's, `refused` = true when
-- nothing may reach the service}.
M.CASES = {
  { "GET with path variables and query parameters (repeated, enum by name, int64)",
    "/v1/shelves/1/books/2?view=full&tags=a&tags=b&kind=NOVEL&pages=12", code = 200,
    expect = '{"name":"shelves/1/books/2","title":"title of shelves/1/books/2 (full)","pages":"12",'
      .. '"tags":["a","b"],"kind":"NOVEL"}', response_headers = { ["content-type"] = "application/json" } },
  { "an additional binding with response_body answers that field alone", "/v1/shelves/1/books/2/title",
    code = 200, expect = '"title of shelves/1/books/2"' },
  { "POST with body \"field\" and a query parameter", "/v1/shelves/7/books?request_id=r1",
    body = '{"title":"T","pages":3,"kind":"ESSAY"}', headers = { "Content-Type: application/json" },
    code = 200, expect = '{"name":"shelves/7/books/r1","title":"T","pages":"3","kind":"ESSAY"}' },
  { "PATCH with body \"*\" and the path variable winning over the body", "/v1/shelves/1/books/9",
    method = "PATCH", body = '{"name":"elsewhere","title":"x","tags":["q"]}', code = 200,
    expect = '{"name":"shelves/1/books/9","title":"x","tags":["q"]}' },
  { "a server stream as newline-delimited JSON", "/v1/shelves/3/books:stream?count=3", code = 200,
    expect = '{"result":{"name":"shelves/3/books/1","pages":"1"}}\n'
      .. '{"result":{"name":"shelves/3/books/2","pages":"2"}}\n'
      .. '{"result":{"name":"shelves/3/books/3","pages":"3"}}\n' },
  { "a server stream's failure after its messages as an error line", "/v1/shelves/3/books:stream?count=1&fail=ABORTED",
    code = 200, expect = '{"result":{"name":"shelves/3/books/1","pages":"1"}}\n'
      .. '{"error":{"code":10,"message":"stream failed after 1","details":[]}}\n' },
  { "a server stream as text/event-stream when Accept asks for it", "/v1/shelves/3/books:stream?count=2",
    headers = { "Accept: text/event-stream" }, code = 200,
    response_headers = { ["content-type"] = "text/event-stream" },
    expect = 'data: {"name":"shelves/3/books/1","pages":"1"}\n\ndata: {"name":"shelves/3/books/2","pages":"2"}\n\n' },
  { "a server stream failing before its first message gets the mapped status",
    "/v1/shelves/3/books:stream?count=0&fail=UNAUTHENTICATED",
    code = 401, expect = '{"code":16,"message":"stream failed after 0","details":[]}' },
  { "a failure as google.rpc.Status with its details and trailers", "/v1/fail/NOT_FOUND?reason=r1", code = 404,
    expect = '{"code":5,"message":"failed with NOT_FOUND","details":[{"@type":"type.googleapis.com/gw.Detail",'
      .. '"reason":"r1","domain":"gw.example"}]}', response_headers = { ["grpc-trailer-x-failed"] = "NOT_FOUND" } },
  { "each code's HTTP status (grpc-gateway's mapping)", "/v1/fail/RESOURCE_EXHAUSTED", code = 429,
    expect = '{"code":8,"message":"failed with RESOURCE_EXHAUSTED","details":[]}' },
  { "Grpc-Metadata-* and Authorization go as metadata, other headers not; response metadata back as headers",
    "/v1/headers", headers = { "Grpc-Metadata-X-B: 2", "Authorization: Bearer t", "X-A: 1" }, code = 200,
    expect = '{"metadata":{"authorization":"Bearer t","x-b":"2"}}',
    response_headers = { ["grpc-metadata-x-answer"] = "yes", ["grpc-trailer-x-done"] = "1" } },
  { "a client stream from newline-delimited JSON", "/v1/books:batchCreate",
    body = '{"name":"a"}\n{"name":"b"}\n\n{"name":"c"}', code = 200, expect = '{"calls":"3"}' },
  { "no route is 404 NOT_FOUND", "/v2/nothing", code = 404, refused = true,
    expect = '{"code":5,"message":"no route for GET /v2/nothing","details":[]}' },
  { "a path served for other methods only is 405, Allow naming them (RFC 9110)", "/v1/shelves/1/books/2",
    method = "DELETE", code = 405, refused = true, response_headers = { allow = "GET, HEAD, PATCH" },
    match = '^{"code":12,"message":"method DELETE not allowed for /v1/shelves/1/books/2","details":%[%]}$' },
  -- RFC 9110 9.3.2 (each a stray body would break: curl over HTTP/2 resets the stream, and
  -- http.client's next answer on its keep-alive connection would not parse)
  { "HEAD is answered as GET, the head alone with the GET's content-length", "/v1/shelves/1/books/2/title",
    method = "HEAD", code = 200, expect = "",
    response_headers = { ["content-length"] = tostring(#'"title of shelves/1/books/2"') } },
  { "HEAD to no route is 404, the head alone", "/v2/nothing", method = "HEAD", code = 404, refused = true,
    expect = "" },
  -- (the stream would take 1,000 s: a HEAD ends it at its head, the first message's)
  { "HEAD on a server stream is its head alone, the stream ended there", "/v1/shelves/3/books:stream?count=100000",
    method = "HEAD", code = 200, expect = "" },
  { "a bad query parameter is 400 naming it", "/v1/shelves/1/books/2?pages=x", code = 400, refused = true,
    match = "^{\"code\":3,\"message\":\"query parameter 'pages': .*\",\"details\":%[%]}$" },
  { "path traversal in a variable is 400", "/v1/shelves/%2E%2E/books/2", code = 400, refused = true,
    match = '^{"code":3,"message":".*","details":%[%]}$' },
  { "invalid JSON is 400 naming the body", "/v1/shelves/7/books", body = '{"title":', code = 400, refused = true,
    match = '^{"code":3,"message":"body: .*","details":%[%]}$' },
  { "a JSON value of the wrong type is 400 naming the field", "/v1/shelves/7/books", body = '{"pages":"many"}',
    code = 400, refused = true, match = '^{"code":3,"message":"body: %$%.pages: .*","details":%[%]}$' },
  { "an unknown query parameter is 400", "/v1/shelves/1/books/2?colour=red", code = 400, refused = true,
    match = "^{\"code\":3,\"message\":\"query parameter 'colour': .*\",\"details\":%[%]}$" },
  { "a bad Grpc-Timeout is 400", "/v1/shelves/1/books/2", headers = { "Grpc-Timeout: soon" }, code = 400,
    refused = true, match = '^{"code":3,"message":".*[Tt]imeout.*","details":%[%]}$' },
}

--- calls = M.calls(server): the calls gw.Library served (its Calls method).
function M.calls(n)
  local code, body = M.request(n, "/v1/calls")
  assert(code == 200, body)
  return tonumber(body:match('"calls":"(%d+)"') or (body == "{}" and 0))
end

--- M.check(luassert, case, code, body, headers, how): asserts one answer
-- of `case` (`how` names the client in messages).
function M.check(assert, case, code, body, headers, how)
  local what = case[1] .. " (" .. how .. ")"
  assert.are.equal(case.code, code, what .. ": " .. tostring(body))
  if case.expect then assert.are.equal(case.expect, body, what) end
  if case.match then assert.truthy(body:find(case.match), what .. ": " .. body) end
  for k, v in pairs(case.response_headers or {}) do assert.are.equal(v, headers[k], what .. ": header " .. k) end
end

return M
