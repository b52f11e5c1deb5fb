--- Serving gRPC, gRPC-Web and Connect over HTTP/2 (and the last two over
-- HTTP/1.1): `pc.listen(server, address, opts)`. The C side
-- (core/net/listener.h, server.h, http1_server.h, web.h) accepts
-- connections, runs HTTP/2 or HTTP/1.1, each call's protocol (framing, status,
-- gzip) and enforces the limits, and tells each call's codec (protobuf or
-- JSON, from its content-type), which this file uses to read the requests
-- and write the responses; it runs each call's
-- handler as a task of the scheduler (lua/protocall/sched.lua), with the
-- same `pc.server{...}` handler tables pc.inproc serves (rpc/server.lua).
local core = require "protocall.core"
local compat = require "protocall.compat"
local errors = require "protocall.errors"
local internal = require "protocall.internal"
local sched = require "protocall.sched"
local rpc_server = require "protocall.rpc.server"
local rest = require "protocall.rpc.rest"

local type, error, pairs, tostring, setmetatable, pcall, floor, huge =
  type, error, pairs, tostring, setmetatable, pcall, math.floor, math.huge
local status, codes, show = errors.status, internal.codes, internal.show
local seconds_problem = internal.seconds_problem
local decode, to_json, from_json = core.decode, core.to_json, core.from_json
local is_server, response_of, response_bytes, no_send, no_recv, returned_list = rpc_server.is_server,
  rpc_server.response_of, rpc_server.response_bytes, rpc_server.no_send, rpc_server.no_recv,
  rpc_server.returned_list
local call_over, OVER = rpc_server.call_over, rpc_server.OVER
local wait, wait_call, in_task, now = sched.wait, sched.wait_call, sched.in_task, sched.now
local lower = string.lower

local M = {}

-- The permission bits of pc.listen's `mode`: a string of octal digits
-- ("0660", as chmod takes it) or an integer 0..4095; nil when neither.
local function mode_bits(v)
  if type(v) == "string" then
    local n = v:find("^[0-7]+$") and #v <= 5 and tonumber(v, 8)
    return n and n <= 4095 and n or nil
  end
  if compat.mtype(v) == "integer" and v >= 0 and v <= 4095 then return v end
  return nil
end

-- Response bytes a handler may have queued beyond what HTTP/2 took: past
-- this, ctx.send waits for the client's window (a client that does not
-- read holds the handler, not memory).
local SEND_QUEUE = 64 * 1024

local LISTEN_OPTIONS = {
  cert_file = "string", key_file = "string", client_ca_file = "string",
  max_concurrent_streams = "number", max_receive_size = "number",
  max_header_list_size = "number", max_connections = "number", idle_timeout = "number",
  max_connection_age = "number", max_connection_age_grace = "number",
  handshake_timeout = "number", stream_window = "number", connection_window = "number",
  max_resets = "number", max_control_frames = "number", incomplete_budget = "number",
  stall_timeout = "number", mode = "mode", cors = "table", rest = "rest", log = "function",
}

local CORS_OPTIONS = { origins = "table", headers = "table", expose = "table", max_age = "number",
  credentials = "boolean" }

-- pc.listen's `cors` table as core.grpc_listen takes it (strings of
-- lines or lists), or raises naming the option at fault (level 3: the
-- caller of pc.listen).
local function cors_option(c)
  for k, v in pairs(c) do
    local want = CORS_OPTIONS[k]
    if want == nil then error("pc.listen: unknown cors option '" .. tostring(k) .. "'", 3) end
    if type(v) ~= want then
      error("pc.listen: cors option '" .. k .. "' must be a " .. want .. ", got " .. type(v), 3)
    end
  end
  local function list(key, ok, what, sep)
    local t = c[key]
    if t == nil then return nil end
    local out = {}
    for i = 1, #t do
      local v = t[i]
      if type(v) ~= "string" or not ok(v) then
        error("pc.listen: cors." .. key .. "[" .. i .. "] must be " .. what .. ", got " .. show(v), 4)
      end
      out[i] = v
    end
    if #out == 0 then return nil end
    return table.concat(out, sep) .. (sep == "\n" and "\n" or "")
  end
  -- an origin as browsers send it: scheme://host[:port], no path; or "*"
  local origins = list("origins", function(v)
    return v == "*" or v:find("^%a[%w+.-]*://[^/%s]+$") ~= nil
  end, "an origin (\"https://app.example\", \"http://localhost:8080\") or \"*\"", "\n")
  if not origins then
    error("pc.listen: cors.origins must list at least one origin (\"https://app.example\", or \"*\")", 3)
  end
  local max_age = c.max_age
  if max_age ~= nil and not (compat.mtype(max_age) == "integer" and max_age >= 0 and max_age <= 86400 * 365) then
    error("pc.listen: cors.max_age must be an integer number of seconds in 0..31536000, got " .. show(max_age), 3)
  end
  local function token(v) return v:find("^[!#$%%&'*+.^_`|~%w-]+$") ~= nil end -- a field name
  return {
    origins = origins,
    headers = list("headers", token, "a header name", ", "),
    expose = list("expose", token, "a header name", ", "),
    max_age = max_age, credentials = c.credentials or nil,
  }
end

-- The cors option `c` (cors_option's) of a listener serving REST with the
-- transcoder `tc` (pc.listen's `rest` option `rest_opt`): a preflight
-- also allows the methods of its routes and the request headers it takes
-- as metadata (the transcoder's `headers`, Authorization unless given,
-- and Grpc-Metadata-* as a preflight names them). `c` itself without `tc`.
local function rest_cors(c, tc, rest_opt)
  if not tc then return c end
  local out = {}
  for k, v in pairs(c) do out[k] = v end
  local methods, seen = {}, { GET = true, POST = true }
  for _, r in ipairs(tc:routes()) do
    local m = r.http_method
    if not seen[m] then
      seen[m] = true
      methods[#methods + 1] = m
    end
  end
  table.sort(methods)
  out.methods = #methods > 0 and table.concat(methods, ", ") or nil
  local headers, named = {}, {}
  for name in (c.headers or ""):gmatch("[^, ]+") do
    headers[#headers + 1], named[name:lower()] = name, true
  end
  for _, name in ipairs(type(rest_opt) == "table" and rest_opt.headers or { "authorization" }) do
    if not named[name:lower()] then
      headers[#headers + 1], named[name:lower()] = name, true
    end
  end
  out.headers = #headers > 0 and table.concat(headers, ", ") or nil
  out.header_prefix = "grpc-metadata-"
  return out
end

-- pc.listen's default `log`: the text on stderr.
local function log_stderr(text)
  io.stderr:write("pc.listen: ", text, "\n")
  io.stderr:flush()
end

local Listener = { __name = "protocall.Listener" }
Listener.__index = Listener

-- Logs with the listener's `log` what a handler of method `info` raised
-- when it is not a pc.Error (rpc/server.lua log_text; `trace`: invoke's
-- traceback); REST calls (rpc/rest.lua) too.
-- A `log` that raises does not change the call's answer: its error and
-- the text go to stderr.
function Listener:log_failure(info, raised, trace)
  local text = rpc_server.log_text(info, raised, trace)
  if not text then return end
  local ok, err = pcall(self.log, text)
  if not ok then
    local shown = type(err) == "string" and err or type(err)
    log_stderr("the log option raised (" .. shown .. ") logging: " .. text)
  end
end

-- Ends `call` with what its handler of method `info` raised, as
-- rpc/server.lua's failure makes it: the pc.Error's metadata and pushback
-- as trailers after those the handler set; anything else logged.
local function finish_failed(self, call, info, raised, trace)
  self:log_failure(info, raised, trace)
  local st = rpc_server.failure(info, raised)
  local md = st.metadata
  if md then
    for i = 1, #md do call:add_metadata(true, md[i][1], md[i][2]) end
  end
  if st.pushback then call:set_pushback(st.pushback) end
  call:finish(codes[st.code], st.message, st.details)
end

-- The request message `bytes` of method `info` in the call's codec: the
-- message, or nil, the status code and what went wrong (protobuf that does
-- not decode: INTERNAL, as gRPC servers answer, but INVALID_ARGUMENT for a
-- Connect call (`connect`), as connect-go; JSON: INVALID_ARGUMENT, as
-- connect-go does; a proto2 required field missing, in either codec:
-- INVALID_ARGUMENT, the request does not fit its type).
local function decode_request(info, bytes, json, connect)
  if json then
    local m, err = from_json(info.input, bytes)
    if m then
      local missing = rpc_server.missing_required(m)
      if not missing then return m end
      return nil, "INVALID_ARGUMENT", ": request: " .. missing
    end
    return nil, "INVALID_ARGUMENT", ": request is not valid JSON for " .. info.input.full_name
      .. ": " .. tostring(err)
  end
  local m, err = decode(info.input, bytes)
  if m then return m end
  if err:find("^missing required field") then return nil, "INVALID_ARGUMENT", ": request: " .. err end
  return nil, connect and "INVALID_ARGUMENT" or "INTERNAL", ": request failed to decode: " .. err
end

-- The response `m` of method `info` on the wire, in the call's codec; an
-- INTERNAL pc.Error when it cannot be written.
local function response_wire(info, m, json)
  if not json then return response_bytes(info, m) end
  local ok, text = pcall(to_json, m)
  if ok then return text end
  error(status("INTERNAL", info.full_name .. ": response failed to encode as JSON: "
    .. tostring(text)), 0)
end

local function over(call, ctx)
  return call:cancelled() or (ctx.deadline ~= nil and now() > ctx.deadline)
end

local function cancelled_error(info)
  return status("CANCELLED", info.full_name .. ": the call is over (cancelled by the client, "
    .. "its deadline passed or the server is shutting down)")
end

-- The next request message's bytes, waiting; nil at the end of the
-- client's stream or once the call is over.
local function next_bytes(self, call)
  while true do
    local m = call:next()
    if m ~= false then return m end
    wait_call(self.core, call)
  end
end

-- A handler's context for `call` of method `info`, and the function that
-- marks the call ended: a ctx kept after that answers as rpc/server.lua
-- has it (cancelled() true, send and recv raise CANCELLED, set_* raise
-- OVER) without touching the closed call.
local function make_ctx(self, call, info)
  local ended = false
  local json = call:codec() == "json"
  local timeout, deadline = call:timeout()
  local ctx = {
    method = info.full_name, metadata = call:metadata(), timeout = timeout, deadline = deadline,
  }
  --- ctx.send(response): sends one response (server streaming, bidi),
  -- waiting while the client's window is closed. Raises pc.Error
  -- CANCELLED once the call is over; in a unary or client-streaming
  -- handler, raises at its line (rpc/server.lua no_send).
  if info.server_streaming then
    function ctx.send(response)
      if ended then error(call_over(info), 2) end
      local bytes = response_wire(info, response_of(info, response), json)
      if over(call, ctx) or not call:send(bytes) then error(cancelled_error(info), 2) end
      while call:unsent() > SEND_QUEUE and not over(call, ctx) do wait_call(self.core, call) end
    end
  else
    ctx.send = no_send(info)
  end
  --- ctx:recv() -> the next request message (client streaming, bidi),
  -- nil at the end of the client's stream; raises pc.Error INTERNAL for
  -- a request that does not decode (INVALID_ARGUMENT for one in JSON, or
  -- lacking a proto2 required field), CANCELLED once the call is over; in
  -- a unary or server-streaming handler, raises at its line
  -- (rpc/server.lua no_recv).
  function ctx.recv()
    if ended then error(call_over(info), 2) end
    local bytes = next_bytes(self, call)
    if bytes == nil then
      if call:cancelled() then error(cancelled_error(info), 2) end
      return nil
    end
    local req, code, err = decode_request(info, bytes, json, call:protocol() == "connect")
    if not req then error(status(code, info.full_name .. err), 2) end
    return req
  end
  if not info.client_streaming then ctx.recv = no_recv(info) end
  ctx.sleep = sched.sleep -- as in process: lets the other tasks run
  --- ctx:cancelled() -> whether the client cancelled, the deadline
  -- passed or the server shut the call down.
  function ctx.cancelled() return ended or over(call, ctx) end
  rpc_server.add_response_metadata(ctx, function(trailers, k, v)
    if ended then return nil, OVER end
    return call:add_metadata(trailers, k, v)
  end, function(gzip)
    if ended then return nil, OVER end
    return call:set_compression(gzip)
  end)
  --- ctx:compressed() -> whether the last request message read (the
  -- unary request, or the last ctx:recv()) came gzipped (its
  -- compressed flag set).
  function ctx.compressed() return not ended and call:compressed() end
  return ctx, function() ended = true end
end

-- Whether the Connect POST `call` to the method of `entry` goes to the
-- REST route of the transcoder `tc` that POST and its path match:
-- a streaming method called in Connect's unary JSON (application/json,
-- as a REST client's POST looks), which Connect cannot serve (run_call's
-- 501, which application/proto still gets: no REST body); a unary
-- method's call stays Connect's, which connect-go serves.
local function rest_streaming(tc, entry, call)
  local info = entry.info
  if not (info.client_streaming or info.server_streaming) or call:codec() ~= "json"
      or lower(call:content_type() or ""):find("^%s*application/connect%+") then
    return false
  end
  return tc:match("POST", call:path()) ~= nil
end

-- One call, from its headers to its end; a task of the scheduler.
local function run_call(self, call)
  if not self.rest and call:protocol() == "http" then
    -- a content type of none of the protocols, or Connect unary's by
    -- another HTTP method than POST (a GET would be a Connect GET), which
    -- the engine queued for the driver (queue_unknown_types): to a
    -- method's path by another method than POST, 405 as connect-go
    -- answers any method its handler does not take, whatever the type
    -- (Allow lists GET where the method takes a Connect GET, OPTIONS with
    -- cors), a plain OPTIONS 204 with that Allow when cors answers the
    -- path's preflights (RFC 9110 9.3.7); else 415, whose Accept-Post
    -- lists what the method of the path takes
    local entry = self.server.methods[call:path():match("^[^?]*")]
    local method = call:http_method()
    if entry and method == "OPTIONS" and self.cors then
      call:answer_options(rest.takes_get(entry))
    elseif entry and method ~= "POST" then
      call:not_allowed(self.cors ~= nil, rest.takes_get(entry))
    else
      rest.refuse_type(call, entry)
    end
    return call:close()
  end
  local refusal = self.refusal -- listener:refuse's
  if refusal then
    if self.rest and call:protocol() == "http" then
      rest.refuse(self, call, refusal)
    else
      call:finish(codes[refusal.code], tostring(refusal.message or ""))
    end
    return call:close()
  end
  local server = self.server
  local entry = server.methods[call:path()]
  local proto = self.rest and call:protocol()
  -- (a Connect GET, connect=v1 in its query, is no REST request: the
  -- engine took its query, which REST would have read as fields)
  local post = call:http_method() == "POST"
  -- a GET (or its HEAD) of Connect unary is a Connect GET; gRPC, gRPC-Web
  -- and Connect streaming take POST alone
  local protocol, connect_stream = call:protocol()
  local connect_get = not post and protocol == "connect" and not connect_stream
  if proto == "http" or (proto == "connect" and post and (not entry or rest_streaming(self.rest, entry, call))
      and call:set_http()) then
    rest.serve(self, call)
  elseif not entry then
    -- (by any HTTP method: what a POST to that path gets)
    call:not_found("unknown method " .. call:path() .. (proto and connect_get
      and " (a Connect GET, connect=v1 in its query, names /pkg.Service/Method)" or "")) -- HTTP 404
  elseif not post and not (connect_get and rest.takes_get(entry)) then
    -- a Connect GET (or its HEAD) only for unary methods with no side
    -- effects, other protocols by POST alone; connect-go answers the
    -- others 405 "Allow: POST" ("GET, POST" for a method a Connect GET
    -- calls), over either HTTP version (OPTIONS too with cors, as REST's
    -- 405s; a plain OPTIONS then 204 with that Allow)
    if self.cors and call:http_method() == "OPTIONS" then
      call:answer_options(rest.takes_get(entry))
    else
      call:not_allowed(self.cors ~= nil, rest.takes_get(entry))
    end
  elseif connect_get and not call:read_query() then
    -- a Connect GET's query is read once its path names a method that
    -- takes it (connect-go's order: 404, 405, then the query): a bad one
    -- was answered invalid_argument by the engine
    return call:close()
  elseif entry.info.client_streaming and entry.info.server_streaming and call:http_version() == 1 then
    -- HTTP/1.1 is half-duplex: a client coded for a full-duplex stream
    -- would wait for answers that come only after its request ends.
    call:finish(codes.UNIMPLEMENTED, entry.info.full_name .. ": bidi streams require HTTP/2")
  elseif (entry.info.client_streaming or entry.info.server_streaming) and call:protocol() == "connect"
      and not lower(call:content_type() or ""):find("^%s*application/connect%+") then
    -- Connect unary framing holds one message each way: a stream's
    -- answers would be cut to one (or to none, read as an empty message)
    -- after the handler ran; connect-go refuses the content-type (415)
    call:finish(codes.UNIMPLEMENTED, entry.info.full_name .. " is a streaming method: Connect's streaming protocol "
      .. "(application/connect+" .. call:codec() .. ") calls it")
  else
    local info = entry.info
    local json = call:codec() == "json"
    local ctx, ended = make_ctx(self, call, info)
    local req, code, bad = nil, nil, nil
    if not info.client_streaming then
      -- Exactly one request message, then the end of the client's stream,
      -- before the handler runs (as grpc-go and grpc-java wait for the
      -- half-close); another count is a request cardinality violation,
      -- UNIMPLEMENTED in gRPC's status code table (doc/statuscodes.md).
      local one = ": a " .. (info.server_streaming and "server-streaming" or "unary")
        .. " method takes exactly one request message, got "
      local bytes = next_bytes(self, call)
      if bytes == nil then
        code, bad = codes.UNIMPLEMENTED, one .. "none"
      else
        local name, err
        req, name, err = decode_request(info, bytes, json, call:protocol() == "connect")
        if not req then
          code, bad = codes[name], err
        elseif next_bytes(self, call) ~= nil then
          code, bad = codes.UNIMPLEMENTED, one .. "more"
        end
      end
      if call:cancelled() then code, bad = codes.CANCELLED, "" end
    end
    if code == codes.CANCELLED then
      call:finish(codes.CANCELLED, "cancelled")
    elseif bad then
      call:finish(code, info.full_name .. bad)
    else
      local ok, result, trace = rpc_server.invoke(entry, info, req, ctx, false, self.core, call)
      if ok and info.client_streaming and info.server_streaming then
        ok, result = rpc_server.after_return(entry, function()
          if result ~= nil then
            error(rpc_server.handler_bug(info.full_name
              .. ": a bidirectional handler answers with ctx.send and returns nothing"), 0)
          end
        end)
      elseif ok and not info.server_streaming then
        ok, result = rpc_server.after_return(entry, function()
          if result == nil then rpc_server.no_response(info) end
          call:send(response_wire(info, response_of(info, result), json))
        end)
      elseif ok then
        ok, result = rpc_server.after_return(entry, function()
          local list = returned_list(info, result)
          for i = 1, #list do ctx.send(list[i]) end
        end)
      end
      if ok then
        call:finish(codes.OK, "")
      else
        finish_failed(self, call, info, result, trace)
      end
    end
    ended()
  end
  call:close() -- a finished call's response still going out is the engine's to send
end

local function task(self, call)
  self.active = self.active + 1
  local ok = pcall(run_call, self, call)
  if not ok then call:close() end
  self.active = self.active - 1
end

-- A handler's task that yielded outside the waits (sched.STRAY) was
-- dropped: its call ends INTERNAL.
local function stray(self, call)
  local entry = self.server.methods[call:path()]
  pcall(call.finish, call, codes.INTERNAL, entry and rpc_server.stray_error(entry.info).message
    or call:path() .. ": the handler " .. sched.STRAY)
  call:close()
  self.active = self.active - 1
end

--- `listener:serve()`: serves until `listener:shutdown()` has finished:
-- accepts calls and runs each handler as a task (a slow handler does not
-- stop the others). Inside a pc.run task it serves alongside the other
-- tasks (which may call this server); outside, it runs the scheduler
-- itself (pc.spawn + pc.run).
function Listener:serve()
  if not in_task() then
    sched.spawn(self.serve, self)
    return sched.run()
  end
  while true do
    while not self.closed do
      local call = self.core:accept()
      if not call then break end
      sched.spawn_guarded(stray, task, self, call)
    end
    if self.finished then break end
    wait(self.core)
  end
  self.core:close()
end

--- `listener:shutdown(grace)`: graceful shutdown: stops listening, sends
-- GOAWAY (with the last stream id) on every connection, lets calls in
-- flight run for `grace` seconds (default 5), then cancels the rest
-- (their handlers see ctx:cancelled(), their sends fail) and returns
-- once every call is done and the connections are closed. Inside a task
-- it waits without stopping the others; idempotent.
function Listener:shutdown(grace)
  if grace ~= nil and (type(grace) ~= "number" or grace < 0 or grace ~= grace) then
    error("bad argument #1 to 'shutdown' (seconds >= 0 expected, got " .. show(grace) .. ")", 2)
  end
  if self.closed then return end
  self.closed = true
  local c = self.core
  c:shutdown()
  if in_task() then
    local limit = now() + (grace or 5)
    -- Handlers end, then their responses go out and each connection ends.
    while (self.active > 0 or c:connections() > 0) and now() < limit do sched.sleep(0.01) end
    c:close_all()
    while self.active > 0 do sched.sleep(0.01) end
  else
    c:close_all()
  end
  self.finished = true
  c:close() -- a serve task waiting on it wakes at once
end

--- `listener:set_server(server)`: serves the pc.server `server` from now
-- on, in place of the one given to pc.listen (or to the last set_server):
-- a call takes the server (and with `rest`, the REST routes) current when
-- it starts and keeps them to its end, so calls in flight finish on the
-- old one; the address, its connections and the options stay. With the
-- `rest` option the routes are compiled first from `server`'s schema with
-- the same options, and when they do not compile this raises pc.listen's
-- pc.HttpRuleError ("pc.listen: rest: ..." naming the rule), the old
-- server staying. `rest_option`
-- (optional; only for a listener with `rest`) replaces pc.listen's `rest`
-- option from now on. It ends listener:refuse's answers. What `protocall
-- gateway -refresh` does with a schema its upstream's reflection changed.
function Listener:set_server(server, rest_option)
  if not is_server(server) then
    error("bad argument #1 to 'set_server' (protocall.Server expected, got " .. type(server) .. ")", 2)
  end
  if rest_option ~= nil and not self.rest then
    error("bad argument #2 to 'set_server' (a REST option for a listener without pc.listen's rest)", 2)
  end
  if rest_option == nil then rest_option = self.rest_option end
  local tc = self.rest and rest.transcoder(server, rest_option, self.max_receive)
  -- one step, no yield between: a call starting sees both or neither
  self.server, self.rest, self.rest_option, self.refusal = server, tc, rest_option, nil
  if tc and self.cors and not self.finished then self.core:set_cors(rest_cors(self.cors, tc, rest_option)) end
end

--- `listener:refuse(err)`: from now until the next listener:set_server,
-- answers every call that starts with the pc.Error `err` (a table with a
-- canonical `code` name and a `message`) instead of serving it: gRPC,
-- gRPC-Web and Connect calls get its status, REST requests (with `rest`)
-- its HTTP status and a google.rpc.Status JSON body, as a failed call's.
-- Calls in flight go on. What `protocall gateway` answers while its
-- upstream's schema is not read yet (UNAVAILABLE, HTTP 503).
function Listener:refuse(err)
  if type(err) ~= "table" or type(err.code) ~= "string" or codes[err.code] == nil or err.code == "OK" then
    error("bad argument #1 to 'refuse' (pc.Error with a canonical code other than OK expected)", 2)
  end
  self.refusal = err
end

--- `listener:connections()` -> connections open now (0 once shut down).
function Listener:connections()
  if self.finished then return 0 end
  return self.core:connections()
end

local function size_option(opts, key, low)
  local v = opts[key]
  if v ~= nil and (v ~= floor(v) or v < low or v > 2 ^ 31 - 1) then
    error("pc.listen: option '" .. key .. "' must be an integer in " .. low .. "..2^31-1", 3)
  end
  return v
end

--- `listener = pc.listen(server, address, opts)`: serves the pc.server
-- `server` over HTTP/2 on `address`, to gRPC, gRPC-Web and Connect
-- clients alike (each call's protocol from its content-type:
-- application/grpc[+json], application/grpc-web[-text][+proto|+json],
-- application/proto or application/json for Connect unary, and
-- application/connect+proto or +json for Connect streaming; other
-- content-types are HTTP 415, whose Accept-Post lists the types the
-- method of the path takes (a streaming method's without Connect
-- unary's); a method the server lacks is UNIMPLEMENTED,
-- HTTP 404 over gRPC-Web and Connect as connect-go answers), "host:port" ("127.0.0.1:50051",
-- "[::1]:0", ":8080" for every address; port 0 picks a free port,
-- `listener.port` tells which), or a Unix-domain socket as gRPC spells
-- it: "unix:/path/x.sock" (also "unix:relative" and "unix:///abs/path")
-- or "unix-abstract:name" (Linux's abstract namespace, no file;
-- `listener.port` is 0). The socket file gets `opts.mode` (a string of
-- octal digits, "0660", or an integer 0..4095; default what the umask
-- leaves) before it listens; a file already at the path is replaced
-- only when it is a socket nobody listens on (a stale one: connecting is
-- refused), anything else fails; the listener removes its file when
-- closed. A path longer than sun_path (107 bytes) is refused. gRPC-Web and
-- Connect also over HTTP/1.1 (and 1.0) on the same address, told apart by
-- the connection's first bytes: unary and server streams (chunked),
-- client streams (the request whole first); a bidirectional stream ends
-- UNIMPLEMENTED (it needs HTTP/2), plain gRPC is HTTP 505; keep-alive and
-- pipelining, one request at a time; a request head must be complete
-- within `handshake_timeout` (else 408); an answer that comes before its
-- request's body ended (a 4xx, a handler done early) says Connection:
-- close, and at most 256 KiB or 2 s more of that body is read and dropped
-- before the connection closes, then lingers at most 2 s more reading and
-- dropping what comes (an endless chunked body holds one some 4 s at most).
-- h2c unless `opts.cert_file` and `opts.key_file` (PEM) are given: TLS
-- with ALPN h2 or http/1.1; `client_ca_file` (PEM bundle) requires client
-- certificates signed by it (mutual TLS).
-- Limits (defaults): `max_concurrent_streams` per connection (100; more
-- are refused with RST_STREAM REFUSED_STREAM), `max_receive_size` (4
-- MiB; a larger request is RESOURCE_EXHAUSTED), `max_header_list_size`
-- (16 KiB), `max_connections` (1000), `handshake_timeout` (10 s),
-- `idle_timeout` (300 s without calls: GOAWAY), `max_connection_age`
-- (seconds, default none: each connection gets GOAWAY once this old,
-- +-10 % jitter, so clients open new connections and spread over backends
-- that joined since; gRFC A9) and `max_connection_age_grace` (seconds its
-- calls may then take before the connection closes; default no limit),
-- `max_resets` and
-- `max_control_frames` (streams reset by the client, SETTINGS and PING
-- frames: a burst of 200 and 500, then 20 a second; past that GOAWAY
-- ENHANCE_YOUR_CALM), `stream_window` / `connection_window` (receive
-- windows, 1 MiB / 16 MiB), `incomplete_budget` (bytes of request
-- messages larger than their stream window, and of Connect unary and
-- gRPC-Web-Text bodies, a connection takes while they arrive: the
-- connection window, at least max_receive_size; past it their clients
-- wait on the stream window) and `stall_timeout` (60 s: a
-- request message half-received with nothing more arriving although the
-- client may send ends RESOURCE_EXHAUSTED; over HTTP/1.x a request body
-- not complete within it of its head is answered 408 and the connection
-- closed, so a body trickled a byte at a time holds no connection for
-- ever; negative: never). Handlers are
-- called as by pc.inproc:
-- (request, ctx), client-streaming and bidirectional ones (ctx) reading
-- with ctx:recv(); a unary or server-streaming handler runs once the
-- client's stream ended with exactly one request (none or more:
-- UNIMPLEMENTED); `timeout` and `deadline` come from grpc-timeout (Connect: Connect-Timeout-Ms).
-- Calls in JSON (+json, application/json) read their requests with
-- pc.from_json (JSON that does not fit the request type is
-- INVALID_ARGUMENT) and write their responses with pc.to_json. A request
-- lacking a proto2 required field is INVALID_ARGUMENT "<method>: request:
-- missing required field: ..." in gRPC, gRPC-Web and Connect, any codec;
-- REST answers it HTTP 400 "request: missing required field: ...", without
-- the method as its other bad input (doc/gateway.md); the handler is not
-- called. A Connect
-- GET (`GET /pkg.Svc/Method?connect=v1&encoding=json|proto&message=...
-- [&base64=1][&compression=gzip]`) is served for unary methods marked
-- `option idempotency_level = NO_SIDE_EFFECTS` (any other: HTTP 405
-- "Allow: POST" with Content-Length 0, its HEAD too, as connect-go, over
-- both HTTP versions, a bidirectional method's included, whatever its
-- query; a path that names no method: what its POST gets, 404
-- UNIMPLEMENTED; then a bad
-- query: Connect's error JSON, invalid_argument; with `rest`, a GET
-- without connect=v1 is REST's, and one of a method's path with Connect
-- GET's `encoding` or `message` parameters is 404 "no route for GET
-- /pkg.Svc/Method (a Connect GET needs connect=v1 in its query)"), its
-- HEAD as the GET with the head alone; gRPC,
-- gRPC-Web and Connect requests by any HTTP method but POST and that GET
-- (without `rest`, whatever their content-type) are HTTP 405 "Allow:
-- POST" ("GET, POST" for a method a Connect GET calls, OPTIONS too with
-- `cors`, as connect-go) to a method's path, whatever their body and
-- headers (with `cors` a plain OPTIONS, no Access-Control-Request-Method,
-- 204 with that Allow, as a REST route's path), and to another get what
-- their POST gets (404, UNIMPLEMENTED, 415; a HEAD the head alone).
-- `opts.cors` (off by default) lets browser pages of other origins call:
-- {origins = {"https://app.example", ...} (exact scheme://host[:port]
-- strings, or "*" for any), headers = {names} (more
-- request headers allowed: your metadata), expose = {names} (more
-- response headers a script may read, each as given: metadata x-id is
-- also Trailer-x-id in a Connect unary answer and Grpc-Metadata-x-id,
-- Grpc-Trailer-x-id over REST, names to list too), max_age = seconds (0..31536000;
-- default 7200), credentials = boolean (Access-Control-Allow-Credentials;
-- the origin is then echoed, never "*")}: a preflight (OPTIONS with
-- Access-Control-Request-Method) is answered 204 with the methods (GET,
-- POST) and headers gRPC-Web and Connect need (connectrpc's cors-go
-- lists) and `headers`; with `rest` also the methods of its routes (PUT,
-- PATCH, DELETE, a custom verb), the request headers the REST side takes
-- as metadata (the `rest` option's `headers`, default Authorization) and
-- each Grpc-Metadata-* header the preflight's
-- Access-Control-Request-Headers names (none when that list is past 8 KiB:
-- the answer does not grow with it; listener:set_server's routes and
-- `rest` option replace them); every response to an allowed Origin carries
-- Access-Control-Allow-Origin and the exposed headers (grpc-status,
-- grpc-message, grpc-status-details-bin, ...; a 415's Accept-Post and a
-- 405's Allow too), and Vary: Origin whatever the Origin;
-- another origin gets no other CORS header; a native gRPC answer
-- (application/grpc, which no browser calls) gets none, its metadata
-- staying the handler's (as Envoy's CORS filter adds nothing where no
-- browser's Origin came).
-- `opts.rest` (off by default) serves REST/JSON on the same address
-- (doc/gateway.md): true for the google.api.http annotations of the
-- services served (the server reflection services left out: gRPC's
-- alone), or a table of pc.transcoder's options (`http` rules
-- given apart, `unbound`, `headers`, `timeout`, `timeouts`, `validate`,
-- `json`, `ignore_unknown_query`, ...; not `services` nor
-- `max_body_bytes`: max_receive_size bounds the body, 413 "request body
-- of at least N bytes exceeds the limit of M bytes" past it; with `cors`,
-- a 405's Allow lists OPTIONS, whose preflights are answered); a
-- request of no RPC protocol, a POST application/json to a path that
-- names no method or names a streaming method and matches a route
-- (Connect's unary protocol cannot call it; a unary method's stays a Connect
-- call), goes to the method its route names, whose handler is
-- called in process (one no route takes, to a method's path by another
-- HTTP method than POST, is 405 "Allow: POST" as connect-go answers, but
-- a GET or HEAD of a method a Connect GET calls, REST's 404); failures
-- are google.rpc.Status JSON with grpc-gateway's HTTP status; a bad
-- option raises "pc.listen: rest: ..." naming it, and a rule that does
-- not read or fit the schema pc.transcoder's pc.HttpRuleError with
-- `context` "pc.listen: rest" (its fields: `message`, `problem`, the
-- `method`'s full name, its `pattern`, a rule of `http`'s number `rule`
-- and `path`, the JSON path of its member at fault, an annotation's
-- `file`, `line` and `column`, where the .proto source sets the
-- option), whose text names it: "pc.listen: rest: http rules: rule 1:
-- pkg.S.Get: GET /v1/{nope}: ...", an annotation's led by its method
-- and, from .proto source, where the file sets the option: "pc.listen:
-- rest: pkg.S.Get (x.proto:8:12): rule GET /v1/{nope}: ..."; unlike a string
-- error it carries no "file.lua:12: " position. Raises on a bad argument or option (naming it), a
-- TLS file that cannot be read or is no PEM ("pc.listen: cert_file 'x.pem':
-- cannot be read: No such file or directory"), or an address that cannot
-- be bound. A handler's failure that is not a pc.Error (a runtime error, a
-- string: a bug) is answered UNKNOWN "<method>: unexpected error in the
-- handler" in every protocol, REST included, and `opts.log(text)` is
-- called with "<method>: <the error's text>" and the traceback where it
-- was raised on the lines after (default: "pc.listen: TEXT" on stderr; a
-- `log` that raises has its error and the text written there instead).
-- So is a response a handler returned or sent that is none of the
-- method's (INTERNAL "t.S.Get response: t.Resp or a table expected, got
-- string" to the client, that text and the traceback where it was checked
-- logged), and none at all (nil) from a handler whose method has a
-- response (INTERNAL "t.S.Get: handler returned no response", logged as
-- well); such a bug found after the handler returned (its return value, a
-- server stream's list of responses) is logged with where the handler was
-- defined after the text, "(handler defined at x.lua:12)", the traceback
-- having no frame of it (the client's message is the same).
-- Serve with `listener:serve()`.
function M.listen(server, address, opts)
  if not is_server(server) then
    error("bad argument #1 to 'listen' (protocall.Server expected, got " .. type(server) .. ")", 2)
  end
  if type(address) ~= "string" then
    error("bad argument #2 to 'listen' (string expected, got " .. type(address) .. ")", 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #3 to 'listen' (table expected, got " .. type(opts) .. ")", 2)
  end
  opts = opts or {}
  for k, v in pairs(opts) do
    local want = LISTEN_OPTIONS[k]
    if want == nil then error("pc.listen: unknown option '" .. tostring(k) .. "'", 2) end
    if want == "mode" then
      if not mode_bits(v) then
        error("pc.listen: option 'mode' must be a string of octal digits (\"0660\") or an integer"
          .. " 0..4095 (permission bits), got " .. show(v), 2)
      end
    elseif want ~= "rest" and type(v) ~= want then -- rest.transcoder checks `rest`
      error("pc.listen: option '" .. k .. "' must be a " .. want .. ", got " .. type(v), 2)
    end
  end
  if (opts.cert_file == nil) ~= (opts.key_file == nil) then
    error("pc.listen: cert_file and key_file go together", 2)
  end
  if opts.client_ca_file and not opts.cert_file then
    error("pc.listen: client_ca_file needs cert_file and key_file (TLS)", 2)
  end
  for _, key in pairs { "handshake_timeout", "idle_timeout", "stall_timeout", "max_connection_age",
    "max_connection_age_grace" } do
    local v = opts[key]
    -- stall_timeout: a finite negative is never (core/net/server.h: < 0, none)
    local never = key == "stall_timeout" and v ~= nil and v < 0 and v > -huge
    local bad = v ~= nil and not never and seconds_problem("option '" .. key .. "'", v, nil, false, 1e9)
    if bad then
      error("pc.listen: " .. bad .. (key == "stall_timeout" and " (negative: never)" or ""), 2)
    end
  end
  local host, port
  local unix, why = internal.unix_address(address)
  if unix == false then
    error("pc.listen: address '" .. address:gsub("%c", "?") .. "': " .. why, 2)
  elseif not unix then
    host, port = address:match("^%[([%x:.]+)%]:(%d+)$")
    if not host then host, port = address:match("^([^:%[%]]*):(%d+)$") end
    if port and tonumber(port) > 65535 and not address:find("[%c ]") then
      error("pc.listen: address '" .. address .. "': port " .. port .. " out of range (0-65535)", 2)
    elseif not port or address:find("[%c ]") then
      error("pc.listen: address '" .. address:gsub("%c", "?")
        .. "': expected host:port, [ipv6]:port, :port (port 0 picks one), unix:PATH or unix-abstract:NAME", 2)
    end
    if opts.mode ~= nil then error("pc.listen: option 'mode' is for a unix: address (the socket file)", 2) end
  end
  if unix and unix.abstract and opts.mode ~= nil then
    error("pc.listen: option 'mode' is for a unix: address (an abstract name has no file)", 2)
  end
  local mode = opts.mode ~= nil and mode_bits(opts.mode) or nil
  local tc = rest.transcoder(server, opts.rest, opts.max_receive_size) -- before binding: raises on bad rules
  local cors = opts.cors and cors_option(opts.cors)
  local ok, l = pcall(core.grpc_listen, { -- a C function in pcall: its error names no position
    host = host ~= "" and host or nil, port = port,
    unix_path = unix and unix.unix, unix_abstract = unix and unix.abstract, unix_mode = mode,
    cert_file = opts.cert_file, key_file = opts.key_file, client_ca_file = opts.client_ca_file,
    max_concurrent_streams = size_option(opts, "max_concurrent_streams", 1),
    max_receive = size_option(opts, "max_receive_size", 1),
    max_header_list = size_option(opts, "max_header_list_size", 1),
    max_connections = size_option(opts, "max_connections", 1),
    stream_window = size_option(opts, "stream_window", 65535),
    connection_window = size_option(opts, "connection_window", 65535),
    reset_burst = size_option(opts, "max_resets", 1),
    control_burst = size_option(opts, "max_control_frames", 1),
    incomplete_budget = size_option(opts, "incomplete_budget", 1),
    handshake_timeout = opts.handshake_timeout, idle_timeout = opts.idle_timeout,
    stall_timeout = opts.stall_timeout, max_connection_age = opts.max_connection_age,
    max_connection_age_grace = opts.max_connection_age_grace,
    cors = cors and rest_cors(cors, tc, opts.rest),
    plain_http = tc ~= nil, queue_unknown_types = true,
  })
  if not ok then error("pc.listen: " .. tostring(l), 2) end
  return setmetatable({ core = l, server = server, port = l:port(), active = 0, closed = false, rest = tc,
    rest_option = opts.rest, cors = cors or nil, max_receive = opts.max_receive_size,
    log = opts.log or log_stderr }, Listener)
end

return M
