-- pc.listen's REST placement: a request of none of the RPC protocols
-- (or a Connect-looking POST application/json to a path that names no
-- method) is matched against the `google.api.http` routes of the services
-- served, transcoded by `pc.transcoder` (lua/protocall/http/transcode.lua)
-- and handed to the method's handler in process, no network hop; the
-- answer goes back as JSON (a server stream as newline-delimited JSON or
-- text/event-stream), a failure as a google.rpc.Status body with its
-- HTTP status. The C engine (core/net/server.h, plain_http) reads the
-- body whole and writes what is given here.
local core_module = require "protocall.core"
local errors = require "protocall.errors"
local internal = require "protocall.internal"
local sched = require "protocall.sched"
local reflection = require "protocall.rpc.reflection"
local rpc_server = require "protocall.rpc.server"
local wire = require "protocall.wire"

local type, pairs, ipairs, pcall, error, tostring, select = type, pairs, ipairs, pcall, error, tostring, select
local getmetatable = getmetatable
local status, codes, Error, HttpRuleError = errors.status, internal.codes, errors.Error, errors.HttpRuleError
local now, wait_call = sched.now, sched.wait_call
local response_of, returned_list = rpc_server.response_of, rpc_server.returned_list
local decode = wire.decode

local M = {}

local REST_KEYS = {
  http = true, unbound = true, headers = true, ignore_unknown_query = true, ignore_unknown_fields = true,
  max_query_bytes = true, max_query_params = true, json = true, max_depth = true, validate = true,
  timeout = true, timeouts = true,
}

--- services = rest.services(server): the services of the pc.server
-- `server` that pc.listen's `rest` option routes, sorted: all but the
-- server reflection ones (gRPC's: reflection clients speak it; no route,
-- -unbound's neither).
function M.services(server)
  local seen, services = setmetatable({}, { __index = reflection.SERVICES }), {}
  for _, entry in pairs(server.methods) do
    local name = entry.info.full_name:match("^(.*)%.[^.]+$")
    if not seen[name] then
      seen[name] = true
      services[#services + 1] = name
    end
  end
  table.sort(services)
  return services
end

-- tc = rest.transcoder(server, opt, max_receive): the transcoder of pc.listen's `rest`
-- option: true (the google.api.http annotations of the services served)
-- or a table of pc.transcoder's options (`http` rules given apart,
-- `unbound`, `headers`, `timeout`, `timeouts`, `validate`, ...; not
-- `services`: the services served but the server reflection ones; not
-- `max_body_bytes`: pc.listen's max_receive_size bounds the body). nil
-- when `opt` is nil or false.
-- Raises "pc.listen: rest: ..." naming the bad option; a rule that does
-- not read or fit the schema as pc.transcoder's pc.HttpRuleError, its
-- `context` "pc.listen: rest".
function M.transcoder(server, opt, max_receive)
  if opt == nil or opt == false then return nil end
  if opt ~= true and type(opt) ~= "table" then
    error("pc.listen: rest: true or a table of pc.transcoder options expected, got " .. type(opt), 3)
  end
  local opts = {}
  if type(opt) == "table" then
    for k, v in pairs(opt) do
      if not REST_KEYS[k] then error("pc.listen: rest: unknown option '" .. tostring(k) .. "'", 3) end
      opts[k] = v
    end
  end
  opts.services = M.services(server)
  opts.max_body_bytes = max_receive or 4194304
  local transcoder = require("protocall.http.transcode").transcoder_raising_object
  local ok, tc = pcall(transcoder, server.pool, opts)
  if not ok and getmetatable(tc) == HttpRuleError then
    tc.context = "pc.listen: rest"
    error(tc, 3)
  end
  if not ok then error("pc.listen: rest: " .. tostring(tc):gsub("^bad argument #2 to 'transcoder' ", ""), 3) end
  return tc
end

-- The request's headers for tc:metadata, the content-type and Accept.
local function headers_of(call)
  local list = call:metadata()
  local accept
  for _, kv in ipairs(list) do
    if kv[1] == "accept" then accept = kv[2] end
  end
  return list, call:content_type(), accept
end

-- tc:response_headers' list with lowercase names (HTTP/2's).
local function lowered(list)
  for _, kv in ipairs(list) do kv[1] = kv[1]:lower() end
  return list
end

-- Answers `call` with an error (a pc.Error or a failure table of
-- rpc/server.lua) as tc:error writes it (a HEAD request its head alone),
-- a 405's Allow with HEAD where GET is (served as GET here) and, with
-- `cors` (the listener's option), OPTIONS: a plain OPTIONS (no
-- Access-Control-Request-Method: the engine answers preflights) then gets
-- 204 with that Allow and no body (RFC 9110 9.3.7), not the 405.
local function answer_error(tc, call, err, extra, cors)
  local http, body, ct, allow = tc:error(err)
  local h = { { "content-type", ct }, { "content-length", tostring(#body) } }
  if allow then
    local list = {}
    for m in allow:gmatch("[^, ]+") do
      list[#list + 1] = m
      if m == "GET" and not allow:find("HEAD", 1, true) then list[#list + 1] = "HEAD" end
    end
    -- (with CORS the engine answers the path's preflights: OPTIONS too)
    if cors and not allow:find("OPTIONS", 1, true) then list[#list + 1] = "OPTIONS" end
    table.sort(list)
    if cors and call:http_method() == "OPTIONS" then
      call:respond(204, { { "allow", table.concat(list, ", ") } })
      return call:finish(codes.OK, "")
    end
    h[#h + 1] = { "allow", table.concat(list, ", ") }
  end
  for _, kv in ipairs(extra or {}) do h[#h + 1] = kv end
  if call:respond(http, h) and call:http_method() ~= "HEAD" then call:send(body) end
  call:finish(codes.OK, "")
end

-- The whole request body (the engine gives it as one message once it has
-- ended), or nil when the call is over.
local function body_of(core, call)
  while true do
    local m = call:next()
    if m ~= false then return m end
    wait_call(core, call)
  end
end

-- The response metadata a handler sets, as `out` collects it: headers
-- and trailers both become response headers (grpc-gateway's
-- Grpc-Metadata-* and Grpc-Trailer-*); a server stream's trailers come
-- after its head and are dropped.
local function make_ctx(call, info, md, timeout, rt)
  local ctx = { method = info.full_name, metadata = md, timeout = timeout,
    deadline = timeout and now() + timeout or nil }
  local ended = false
  function ctx.cancelled() return ended or call:cancelled() or (ctx.deadline ~= nil and now() > ctx.deadline) end
  ctx.sleep = sched.sleep
  rpc_server.add_response_metadata(ctx, function(trailers, k, v)
    if ended then return nil, rpc_server.OVER end
    if rt.head_sent and not trailers then return nil, "headers already sent" end
    local list = trailers and rt.trailers or rt.headers
    list[#list + 1] = { k, v }
    return true
  end, function() return false end)
  ctx.compressed = function() return false end
  ctx.send = rpc_server.no_send(info)
  ctx.recv = rpc_server.no_recv(info)
  return ctx, function() ended = true end
end

-- rest.refuse(listener, call, err): answers a REST request with `err`
-- (listener:refuse's), unserved.
function M.refuse(self, call, err)
  return answer_error(self.rest, call, err)
end

-- The content types of gRPC, gRPC-Web and Connect requests, as the core
-- classifies them and lists them in a 415's Accept-Post; a streaming
-- method's list leaves out Connect unary's (application/proto and
-- application/json, which only a unary method takes).
local web_classify, ACCEPT_POST = core_module.web_classify, core_module.web_accept_post
local ACCEPT_POST_STREAM = (ACCEPT_POST:gsub(", application/proto, application/json$", ""))

-- rest.refuse_type(call, entry): answers `call`, whose content type is
-- none of gRPC's, gRPC-Web's or Connect's (none, or text/plain), 415 as
-- connect-go does, Accept-Post listing the types the method of `entry`
-- takes (a streaming method's leaves Connect unary's out; every type
-- when `entry` is nil, a path that names no method).
function M.refuse_type(call, entry)
  local info = entry and entry.info
  local body = "content-type must be gRPC's, gRPC-Web's or Connect's (see Accept-Post)\n"
  if call:respond(415, { { "content-type", "text/plain" }, { "content-length", tostring(#body) },
    { "accept-post", info and (info.client_streaming or info.server_streaming) and ACCEPT_POST_STREAM
      or ACCEPT_POST } }) then
    call:send(body)
  end
  return call:finish(codes.OK, "")
end

-- rest.takes_get(entry): whether the method of `entry` (the server's)
-- takes a Connect GET: a unary one marked `option idempotency_level =
-- NO_SIDE_EFFECTS` (connect-go answers a GET of any other 405 "Allow: POST").
function M.takes_get(entry)
  local info = entry.info
  return info.idempotency_level == "NO_SIDE_EFFECTS" and not info.client_streaming and not info.server_streaming
end

-- rest.serve(listener, call): answers one REST request (a task of the
-- scheduler, as listen.lua's run_call). HEAD is answered as GET, its
-- response the head alone, content-length and all (RFC 9110 9.3.2): a
-- response body over HTTP/2 would have the client reset the stream; a
-- server stream ends at its head (its first message's), the handler's
-- ctx.send raising CANCELLED there.
function M.serve(self, call)
  local tc, core = self.rest, self.core
  local target = call:path()
  local head_only = call:http_method() == "HEAD"
  local route, bindings, query = tc:match(head_only and "GET" or call:http_method(), target)
  local server = self.server
  local named = server.methods[target:match("^[^?]*")]
  if not route and call:http_method() == "POST" and named and not web_classify("POST", call:content_type()) then
    -- a method's own path without a content type of gRPC, gRPC-Web or
    -- Connect (none, or text/plain): what connect-go answers, not 404
    return M.refuse_type(call, named)
  end
  if not route then
    local q, http_method = target:match("%?(.*)"), call:http_method()
    if named and bindings.code == "NOT_FOUND" and (head_only or http_method == "GET")
      and q and (("&" .. q):find("&encoding=", 1, true) or ("&" .. q):find("&message=", 1, true)) then
      -- a Connect GET URL without connect=v1: with REST on, that is what
      -- tells it from a REST GET (the engine's choice, core/net/server.c)
      bindings = Error { code = "NOT_FOUND", http_status = 404,
        message = bindings.message .. " (a Connect GET needs connect=v1 in its query)" }
    elseif named and bindings.code == "NOT_FOUND" and http_method ~= "POST"
      and not ((head_only or http_method == "GET") and M.takes_get(named)) then
      -- a method's own path by another HTTP method, no route on it: 405
      -- "Allow: POST" as connect-go answers (and listen.lua's run_call a
      -- gRPC or Connect stream's), worded as tc:match's 405; a GET of a
      -- method Connect GET calls stays REST's 404
      bindings = Error { code = "UNIMPLEMENTED", http_status = 405, allow = "POST",
        message = "method " .. http_method .. " not allowed for " .. target:match("^[^?]*"):sub(1, 200) }
    end
    return answer_error(tc, call, bindings, nil, self.cors)
  end
  local entry = server.methods[route.path]
  if not entry then
    return answer_error(tc, call, Error { code = "UNIMPLEMENTED", message = route.method .. " is not served" })
  end
  local info = entry.info
  local headers, content_type, accept = headers_of(call)
  local md, header_timeout = tc:metadata(headers)
  if not md then return answer_error(tc, call, header_timeout) end
  local t = call:timeout()
  if t and (not header_timeout or t < header_timeout) then header_timeout = t end
  local timeout = tc:timeout(route, header_timeout)
  local body = body_of(core, call)
  if body == nil then return call:finish(codes.CANCELLED, "cancelled") end
  local req, next_bytes, err
  if info.client_streaming then
    next_bytes, err = tc:requests_reader(route, bindings, query, body, content_type)
  else
    req, err = tc:request(route, bindings, query, body, content_type)
    local missing = req and rpc_server.missing_required(req)
    -- as tc:request_bytes (a client stream's lines) refuses it
    if missing then err = Error { code = "INVALID_ARGUMENT", http_status = 400, message = "request: " .. missing } end
  end
  if err then return answer_error(tc, call, err) end
  local rt = { headers = {}, trailers = {} }
  local ctx, ended = make_ctx(call, info, md, timeout, rt)
  if info.client_streaming then
    -- each line's bytes are read into its message as the handler asks
    -- (a message object per line held at once would cost ~200 times the
    -- body); ctx.recv_bytes hands them on as they are (a proxy's)
    local T = route.input
    function ctx.recv()
      local bytes = next_bytes()
      if bytes == nil then return nil end
      return (decode(T, bytes))
    end
    ctx.recv_bytes = next_bytes
  end
  local kind, stream_ct
  -- (head_sent once the head is out: a head the engine refused, a bad
  -- content type of the handler's HttpBody, leaves the call to be
  -- answered INTERNAL 500, not 200 with nothing)
  local function head(http)
    local h = { { "content-type", stream_ct } }
    for _, kv in ipairs(lowered(tc:response_headers(rt.headers, nil))) do h[#h + 1] = kv end
    local ok, why = call:respond(http, h)
    if not ok then error(status("INTERNAL", info.full_name .. ": " .. why), 0) end
    rt.head_sent = true
  end
  if info.server_streaming then
    kind, stream_ct = tc:stream_kind(route, accept)
    function ctx.send(response)
      if ctx.cancelled() then error(status("CANCELLED", info.full_name .. ": the call is over"), 2) end
      local m = response_of(info, response)
      if not rt.head_sent then
        -- a stream of HttpBody: the first message's content type (grpc-gateway's)
        if kind == "raw" then stream_ct = select(2, tc:response(route, m)) end
        head(200)
      end
      if head_only then -- (the head is the whole answer: the stream ends at it, as a watch must)
        error(status("CANCELLED", info.full_name .. ": the call is over (HEAD: its head alone)"), 2)
      end
      if not call:send(tc:stream_message(route, m, kind)) then
        error(status("CANCELLED", info.full_name .. ": the call is over"), 2)
      end
      while call:unsent() > 65536 and not ctx.cancelled() do wait_call(core, call) end
    end
  end
  -- (the transcoder's `validate` checked the requests: the server's would again)
  local ok, result, trace = rpc_server.invoke(entry, info, req, ctx, tc.validate, core, call)
  if ok and info.server_streaming then
    ok, result = rpc_server.after_return(entry, function()
      local list = returned_list(info, result)
      for i = 1, #list do ctx.send(list[i]) end
    end)
  elseif ok then
    ok, result = rpc_server.after_return(entry, function()
      if result == nil then rpc_server.no_response(info) end
      local m = response_of(info, result)
      local text, ct = tc:response(route, m)
      local h = { { "content-type", ct }, { "content-length", tostring(#text) } }
      for _, kv in ipairs(lowered(tc:response_headers(rt.headers, rt.trailers))) do h[#h + 1] = kv end
      local sent, why = call:respond(200, h)
      if not sent then error(status("INTERNAL", info.full_name .. ": " .. why), 0) end
      rt.head_sent = true
      if not head_only then call:send(text) end
    end)
  end
  ended()
  if ok then
    if info.server_streaming and not rt.head_sent then
      stream_ct = stream_ct or "application/json"
      pcall(head, 200)
    end
    return call:finish(codes.OK, "")
  end
  self:log_failure(info, result, trace)
  local st = rpc_server.failure(info, result)
  local failed = { code = st.code, message = st.message, details_bin = st.details }
  if rt.head_sent then
    if info.server_streaming and not head_only then call:send(tc:stream_error(failed, kind)) end
    return call:finish(codes.OK, "")
  end
  return answer_error(tc, call, failed, lowered(tc:response_headers(rt.headers, rt.trailers)))
end

return M
