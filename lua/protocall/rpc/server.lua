--- pc.server: a set of handler tables, served in process by pc.inproc
-- (rpc/inproc.lua) and over the network by pc.listen (rpc/listen.lua);
-- and what both do alike with a handler's answer or failure.
local core = require "protocall.core"
local errors = require "protocall.errors"
local message = require "protocall.message"
local schema = require "protocall.schema"
local sched = require "protocall.sched"
local internal = require "protocall.internal"
local compat = require "protocall.compat"
local status_details = require "protocall.status"
local interceptors = require "protocall.rpc.interceptors"
local health = require "protocall.rpc.health"
local reflection = require "protocall.rpc.reflection"
local refusal = require("protocall.validate").refusal

local type, error, pairs, tostring, getmetatable, setmetatable =
  type, error, pairs, tostring, getmetatable, setmetatable
local format, floor, mtype = string.format, math.floor, compat.mtype
local xpcall, pcall, traceback, getinfo = xpcall, pcall, debug.traceback, debug.getinfo
local is_initialized = core.is_initialized
local Error, status = errors.Error, errors.status
local encode, decode, type_of, is_message, coerce, protect = core.encode, core.decode, core.type_of,
  core.is_message, message.coerce, core.protect
local metadata_problem, details_bin = core.metadata_problem, status_details.details_bin
local now = sched.now
local co_running = coroutine.running

local M = {}

local Server = { __name = "protocall.Server" }
Server.__index = Server

--- ok = is_server(v): whether v is a pc.server.
function M.is_server(v) return getmetatable(v) == Server end

local SERVER_OPTIONS = { pool = true, interceptors = true, health = true, reflection = true, validate = true }

-- The refusal of `req` (nil when it breaks no rule; a rule failing to
-- evaluate on it refuses it INVALID_ARGUMENT "validate: ..."); a rule that
-- does not compile fails the call INTERNAL "validate: ..." rather than
-- UNKNOWN.
local function refused(req)
  local ok, err = pcall(refusal, req)
  if not ok then return status("INTERNAL", tostring(err)) end
  return err
end

-- `handler` refusing a request that breaks its type's rules.
local function validated(handler, streaming)
  if streaming then
    return function(ctx)
      local recv = ctx.recv
      ctx.recv = function(...)
        local req = recv(...)
        local err = req ~= nil and refused(req)
        if err then error(err, 0) end
        return req
      end
      ctx.recv_bytes = nil -- its requests would pass unchecked
      return handler(ctx)
    end
  end
  return function(req, ctx)
    local err = refused(req)
    if err then error(err, 0) end
    return handler(req, ctx)
  end
end

--- server = pc.server{["pkg.Service"] = {Method = function(request, ctx) ... end}, ...}
-- Handlers get the decoded request and a context {method = full name,
-- metadata = {{key, value}, ...} (the call's, a copy; a retry or hedge
-- also has grpc-previous-rpc-attempts, as a gRPC server sees), timeout = seconds
-- or nil, deadline = monotonic seconds or nil, send = function(response)
-- (server streaming and bidirectional; a unary or client-streaming
-- handler's raises at its line: it returns its response)}. A unary handler returns the response (a message of
-- the output type or a table of it). A server-streaming handler calls
-- ctx.send for each response, or returns a list of them. Client-streaming
-- and bidirectional handlers are function(ctx): ctx:recv() returns the
-- next request (nil once the client closed its side); a client-streaming
-- handler returns its one response, a bidirectional one answers with
-- ctx.send. In process as over the network, ctx also has:
-- ctx:set_header(key, value) and ctx:set_trailer(key, value), response
-- metadata (strings; "-bin" keys carry bytes; headers until the first
-- response goes out; raises on a bad key or value; each block bounded as
-- call metadata is, 1000 pairs and 64 KiB, past that pc.Error
-- RESOURCE_EXHAUSTED); ctx.sleep(seconds) (pc.sleep: a task lets the
-- others run);
-- ctx:set_compression("gzip" | "identity"), the responses' compression
-- from now on, returning whether that is what happens (false for "gzip"
-- when the client does not accept it or the headers went out without it,
-- and in process, where nothing is compressed); ctx:cancelled(), whether
-- the client cancelled, the deadline passed or the server shut the call
-- down; ctx:compressed(), whether the last request message came gzipped.
-- A client stream read from a REST request (pc.listen's `rest`) also has
-- ctx.recv_bytes(), the next request's wire bytes undecoded (nil after
-- the last; it and ctx.recv take from one sequence), for a proxy to pass
-- on (call:send_bytes): absent under `validate = true` (unless the
-- listener's `rest` has `validate` too: its transcoder checked every
-- line, and the server's check is then skipped for REST requests) and
-- when an interceptor replaced ctx.recv, so no request skips them.
-- A ctx kept after its call ended: cancelled() is true, send and recv
-- raise pc.Error CANCELLED, set_header, set_trailer and set_compression
-- raise "...: the call is over" at the caller's line. A bare
-- coroutine.yield in a handler (not a wait of protocall's) fails the
-- call INTERNAL over the network, and in process for a streaming
-- handler called from a pc.run task or outside any coroutine.
-- Raising a pc.Error fails the call with that status: its `details` (a
-- list of messages, or the bytes of a google.rpc.Status) go as
-- grpc-status-details-bin, its `metadata` as trailers after those the
-- handler set, its `retry_delay` as grpc-retry-pushback-ms (gRFC A6:
-- rounded to milliseconds, at most 2^31-1; negative: -1, do not retry);
-- details or metadata that cannot be sent make it INTERNAL "<method>:
-- <what is wrong>". Raising anything else (a runtime error, a
-- string) fails it with UNKNOWN "<method>: unexpected error in the
-- handler" (the error's text, file and line are not the client's: over
-- the network pc.listen logs them with a traceback, its `log` option; in
-- process the error's `value` is what was raised). Raises on an unknown service or method, or a handler that is
-- not a function; a built-in service whose file the pool lacks names the
-- fix ("pc.server: grpc.health.v1.Health is not loaded: call pc.health()
-- (or load grpc/health/v1/health.proto) first"). An optional second table takes {pool = p (default: the
-- default pool), interceptors = {fn, ...}}: each fn(call, next) runs
-- around every handler call with call = {method = full name, request = the
-- decoded request, metadata = the call's list, ctx = the handler's
-- context}; next(call) runs the rest and the handler (a unary handler's
-- response, a streaming one's returned list or nil); returning without
-- next short-circuits with that response, raising fails the call; after
-- next, call.status ("OK" or the code), call.elapsed and on failure
-- call.error are set; a client-streaming or bidirectional call has no
-- `request`. `health = true | pc.health()` and `reflection = true` add
-- the built-in grpc.health.v1.Health and grpc.reflection.v1 / v1alpha
-- ServerReflection services (rpc/health.lua, rpc/reflection.lua).
-- `validate = true` checks each request against its type's protovalidate
-- rules (pc.validate) before the interceptors and the handler run (for
-- client-streaming and bidirectional calls, each request ctx:recv()
-- returns): a request that breaks one fails the call with
-- INVALID_ARGUMENT, "validation failed: <field>: <message> [<rule>]" and a
-- google.rpc.BadRequest detail listing the violations (pc.check's error,
-- but of the first 100 at most: past those the validation stops, "and at
-- least 100 more violations"); a rule that fails to evaluate on the request
-- (a division by zero, a bad pattern from the request, an evaluation limit)
-- fails it INVALID_ARGUMENT "validate: ..." with no details, as connect-go's
-- validate interceptor answers protovalidate's runtime error; a rule that
-- does not compile fails it INTERNAL "validate: ...".
function M.server(services, opts)
  if type(services) ~= "table" then
    error("bad argument #1 to 'server' (table expected, got " .. type(services) .. ")", 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #2 to 'server' (table expected, got " .. type(opts) .. ")", 2)
  end
  for k in pairs(opts or {}) do
    if not SERVER_OPTIONS[k] then error("pc.server: unknown option '" .. tostring(k) .. "'", 2) end
  end
  if opts and opts.validate ~= nil and type(opts.validate) ~= "boolean" then
    error("pc.server: validate: boolean expected, got " .. type(opts.validate), 2)
  end
  local chain, per_attempt = interceptors.split(opts and opts.interceptors, "pc.server")
  if per_attempt then
    error("pc.server: interceptors: {per_attempt = ...} is for clients (a server sees each attempt as a call)", 2)
  end
  local pool = opts and opts.pool or schema.default_pool()
  if opts and (opts.health or opts.reflection) then
    local all, problem = M.with_builtins(services, opts, pool)
    if not all then error("pc.server: " .. problem, 2) end
    services = all
  end
  local methods = {}
  for sname, handlers in pairs(services) do
    local info = type(sname) == "string" and pool:service(sname)
    if not info then error("pc.server: " .. internal.unknown_service(sname), 2) end
    if type(handlers) ~= "table" then
      error("pc.server: " .. sname .. ": table of handlers expected, got " .. type(handlers), 2)
    end
    for mname, fn in pairs(handlers) do
      local m = type(mname) == "string" and info.methods[mname]
      if not m then error(format("pc.server: %s has no method '%s'", sname, tostring(mname)), 2) end
      if type(fn) ~= "function" then
        error(format("pc.server: %s.%s: function expected, got %s", sname, mname, type(fn)), 2)
      end
      local handler = fn
      if chain and m.client_streaming then
        local full = m.full_name
        handler = function(ctx)
          local c, recv = { method = full, metadata = ctx.metadata, ctx = ctx }, ctx.recv
          return interceptors.run(chain, 1, c, function(cc)
            -- an interceptor that wraps ctx.recv sees every request: not past it
            -- (in the ctx it passes on, and in the original, which a ctx of
            -- its own may read through __index)
            if cc.ctx.recv ~= recv then
              ctx.recv_bytes = nil
              cc.ctx.recv_bytes = nil
            end
            return fn(cc.ctx)
          end, now(), now)
        end
      elseif chain then
        local full = m.full_name
        handler = function(req, ctx)
          local c = { method = full, request = req, metadata = ctx.metadata, ctx = ctx }
          return interceptors.run(chain, 1, c, function(cc) return fn(cc.request, cc.ctx) end, now(), now)
        end
      end
      -- (`unchecked`: the handler without the check, for a placement that
      -- checked the request itself, pc.listen's rest with its `validate`;
      -- `fn`: the user's function, whose definition a log names)
      local entry = { info = m, handler = handler, fn = fn }
      if opts and opts.validate then
        entry.handler, entry.unchecked = validated(handler, m.client_streaming), handler
      end
      methods[m.path] = entry
    end
  end
  return setmetatable({ methods = methods, pool = pool }, Server)
end

--- services | nil, problem = with_builtins(services, opts, pool):
-- `services` (pc.server's first argument) with the built-in services of
-- opts.health (true: a new pc.health() with each service of `services`
-- SERVING; or a pc.health() object, as its owner set it) and
-- opts.reflection (true: both reflection versions, listing every service
-- served), their files added to `pool`; nil and what is wrong on a bad
-- option or a frozen pool without the files.
function M.with_builtins(services, opts, pool)
  local all = {}
  for k, v in pairs(services) do all[k] = v end
  local h = opts.health
  if h then
    local ok, err = schema.load_builtin(pool, health.FILE)
    if not ok then return nil, err end
    if h == true then
      -- as gRPC's default health service: every service served is SERVING
      h = health.new()
      for name in pairs(services) do
        if type(name) == "string" then h:set(name, "SERVING") end
      end
    elseif not health.is_health(h) then
      return nil, "health: true or pc.health() expected, got " .. type(h)
    end
    all[health.SERVICE] = h
  end
  local r = opts.reflection
  if r then
    if r ~= true then return nil, "reflection: true expected, got " .. type(r) end
    local problem = reflection.serve(all, pool)
    if problem then return nil, problem end
  end
  return all
end

-- The INTERNAL pc.Errors that tell a handler's bug (a response it gave
-- of the wrong kind, or none), each with {trace = the traceback where it
-- was made, at = where the handler was defined or nil}: the client gets
-- the status, log_text logs it as a handler's other bugs.
local handler_bugs = setmetatable({}, { __mode = "k" })

-- "(handler defined at x.lua:12)": where the handler of `entry` (the
-- user's function, not the server's wrappers) was defined.
local function defined_at(entry)
  local fn = entry.fn or entry.handler
  if type(fn) ~= "function" then return nil end -- (a callable table: no line of its own)
  local d = getinfo(fn, "S")
  return format("(handler defined at %s:%d)", d.short_src, d.linedefined)
end

--- err = handler_bug(text): an INTERNAL pc.Error `text` for a handler's
-- bug (what it returned or sent is no response), which log_text logs,
-- with the traceback of handler_bug's caller's caller (raised inside
-- after_return, also with where the handler was defined).
function M.handler_bug(text)
  local err = status("INTERNAL", text)
  handler_bugs[err] = { trace = (traceback("", 3):gsub("^\n", "")) }
  return err
end

--- ok, err = after_return(entry, fn): pcall(fn), fn handling what the
-- handler of `entry` returned; a handler_bug it raises is logged with
-- where that handler was defined, its traceback having no frame of it
-- ("gw.Greeter.SayHello response: gw.HelloReply.mesage: no such field
-- (handler defined at greet.lua:12)"). The client's message is the same.
function M.after_return(entry, fn)
  local ok, err = pcall(fn)
  local bug = not ok and handler_bugs[err]
  if bug then bug.at = defined_at(entry) end
  return ok, err
end

--- no_response(info): raises the INTERNAL pc.Error (handler_bug, logged
-- as the others) of a handler of method `info`, unary or
-- client-streaming, that returned no response (nil), in every placement
-- that logs.
function M.no_response(info)
  error(M.handler_bug(info.full_name .. ": handler returned no response"), 0)
end

--- resp = response_of(info, value): a handler's response as a message of
-- the output type of method `info`, or raises an INTERNAL pc.Error
-- (handler_bug: "t.S.Get response: t.Resp or a table expected, got
-- string").
function M.response_of(info, value)
  if is_message(value) and type_of(value) == info.output then return value end
  local m, err = coerce(info.output, value, info.full_name .. " response")
  if not m then error(M.handler_bug(err), 0) end
  return m
end

--- bytes = response_bytes(info, m): a handler's response on the wire; one
-- that cannot be encoded (a proto3 string that is not UTF-8, nesting too
-- deep) raises an INTERNAL pc.Error, as a gRPC server's serialization
-- failure does.
function M.response_bytes(info, m)
  local ok, bytes = protect(encode, m)
  if ok then return bytes end
  error(status("INTERNAL", info.full_name .. ": response failed to encode: " .. tostring(bytes)), 0)
end

--- send = no_send(info): the ctx.send of a handler of method `info`,
-- unary or client-streaming, in every placement: it raises at the
-- handler's line, as such a method answers by returning its response.
function M.no_send(info)
  local msg = format("ctx.send: %s is %s: return the response", info.full_name,
    info.client_streaming and "client-streaming" or "unary")
  return function() error(msg, 2) end
end

--- recv = no_recv(info): the ctx:recv of a handler of method `info`,
-- unary or server-streaming, in every placement: it raises at the
-- handler's line, as such a handler gets its one request as its first
-- argument.
function M.no_recv(info)
  local msg = format("ctx:recv: %s is %s: its request is the handler's first argument", info.full_name,
    info.server_streaming and "server-streaming" or "unary")
  return function() error(msg, 2) end
end

--- OVER: why a handler's ctx refuses set_header, set_trailer and
-- set_compression once its call has ended (a ctx kept after the handler
-- returned).
M.OVER = "the call is over"

--- err = call_over(info): the pc.Error CANCELLED that ctx.send and
-- ctx:recv raise once the call of method `info` has ended, in every
-- placement.
function M.call_over(info)
  return status("CANCELLED", info.full_name .. ": " .. M.OVER)
end

--- server = forwarding(server): marks the pc.server `server` as one whose
-- handlers forward each call upstream over pc.grpc (internal: `protocall
-- gateway`'s), each of its method entries: invoke watches each of their
-- calls while the handler runs (watch_call), in every placement of
-- pc.listen, so that the call's early end (ctx:cancelled() turning true
-- while the handler runs: the client reset the stream or closed the
-- connection, the deadline passed, the listener shut the call down)
-- cancels what the handler waits on upstream, RST_STREAM CANCEL reaching
-- the upstream server at once. Only an event of the call wakes the watch
-- (no polling); a Lua-side REST deadline (pc.transcoder's `timeout`)
-- wakes nothing: a forwarder passes the time left on as the upstream's
-- deadline. Calls of other servers are not watched.
function M.forwarding(server)
  for _, entry in pairs(server.methods) do entry.forwards = true end
  return server
end

--- stop = watch_call(waitable, call, cancelled): a task waiting on the
-- events of server call `call` of listener core `waitable` (a forwarding
-- server's, in its handler's task) that aborts the task running now
-- (sched.abort: its waits on pc.grpc calls cancel them) once
-- `cancelled()` (ctx.cancelled) is true; stop() (the handler returned)
-- ends the watch. A call closed under it (a handler's task dropped) ends
-- it quietly.
function M.watch_call(waitable, call, cancelled)
  local victim, done = co_running(), false
  local task = sched.spawn(pcall, function()
    while not done do
      if cancelled() then return sched.abort(victim) end
      sched.wait_call(waitable, call)
    end
  end)
  return function()
    done = true
    sched.wake_task(task)
  end
end

--- err = stray_error(info): the call's INTERNAL pc.Error when its handler
-- of method `info` yielded outside protocall's waits (a bare
-- coroutine.yield that nothing would resume), in every placement.
function M.stray_error(info)
  return status("INTERNAL", info.full_name .. ": the handler " .. sched.STRAY)
end

--- text = missing_required(m): pc.encode's words for the proto2 required
-- fields request `m` lacks ("missing required field: p.R.name"), or nil:
-- a request read from JSON (pc.from_json, a transcoder's tc:request) is
-- not checked for them, where pc.decode refuses such bytes; every
-- placement answers it INVALID_ARGUMENT, as a request that does not fit.
function M.missing_required(m)
  local ok, why = is_initialized(m) -- (nothing to a type without required fields)
  if ok then return nil end
  return why
end

--- err = handler_error(info, raised): what a handler of method `info`
-- raised, as the call's pc.Error: a pc.Error as it is (a deliberate
-- status); anything else (a bug: a runtime error, a string error()) is
-- UNKNOWN "<method>: unexpected error in the handler" with `value` the
-- raised value: a client is not told the server's error text, its files
-- or lines (grpc C++ answers "Unexpected error in RPC handling"); the
-- server's log has them (log_text).
function M.handler_error(info, raised)
  if getmetatable(raised) == Error then return raised end
  return status("UNKNOWN", info.full_name .. ": unexpected error in the handler", { value = raised })
end

--- text = log_text(info, raised, trace): the line a server logs when a
-- handler of method `info` raised `raised`, or nil for a pc.Error (a
-- deliberate status, the client's whole) but handler_bug's (its message,
-- which names the method, and the traceback where it was made on the
-- lines after): "<method>: <the error's text>" and the traceback `trace`
-- (invoke's; nil: none) on the lines after. A value whose __tostring
-- raises is named by its type and that error.
function M.log_text(info, raised, trace)
  if getmetatable(raised) == Error then
    local bug = handler_bugs[raised]
    if not bug then return nil end
    return raised.message .. (bug.at and " " .. bug.at or "") .. (bug.trace ~= "" and "\n" .. bug.trace or "")
  end
  local text = raised
  if type(raised) ~= "string" then
    local ok, shown = pcall(tostring, raised)
    if not ok or type(shown) ~= "string" then
      ok, shown = pcall(tostring, shown)
      shown = "(its __tostring raised: " .. (ok and type(shown) == "string" and shown or "?") .. ")"
    end
    text = "handler raised a " .. type(raised) .. ": " .. shown
  end
  return info.full_name .. ": " .. text .. (trace and "\n" .. trace or "")
end

-- The traceback of the last error invoke's message handler saw that was
-- not a pc.Error; read (and cleared) by invoke as soon as xpcall returns,
-- nothing running in between (the handler's yields come before).
local last_trace

-- xpcall's message handler of invoke: the error itself, its traceback kept
-- in last_trace when it is not a pc.Error.
local function traced(e)
  -- (a message: LuaJIT's traceback of none is nil)
  if getmetatable(e) ~= Error then last_trace = traceback("", 2):gsub("^\n", "") end
  return e
end

--- ok, result, trace = invoke(entry, info, req, ctx, checked, waitable, call):
-- runs the handler of method `info` (`entry.handler`; with `checked`, true
-- when the placement refused requests breaking their rules itself, the
-- handler without the server's `validate` check when it has one) in xpcall,
-- with `ctx` alone for a client stream or bidirectional method, else with
-- the request `req` and `ctx`; an answer that comes after ctx.deadline is
-- false and DEADLINE_EXCEEDED (a late answer is no answer: the client's
-- deadline has passed, as gRPC servers do). `trace`: the traceback where
-- the handler raised something other than a pc.Error (for log_text). A
-- forwarding server's handler
-- (forwarding) runs under watch_call(waitable, call, ctx.cancelled):
-- `call` is the server call of listener core `waitable`. pc.listen's
-- placements (gRPC and the web's protocols, REST) run handlers through it.
function M.invoke(entry, info, req, ctx, checked, waitable, call)
  local ok, result
  local handler = checked and entry.unchecked or entry.handler
  -- a forwarding server's: the call's early end cancels the upstream's
  local stop = entry.forwards and M.watch_call(waitable, call, ctx.cancelled)
  if info.client_streaming then
    ok, result = xpcall(handler, traced, ctx)
  else
    ok, result = xpcall(handler, traced, req, ctx)
  end
  local trace = last_trace
  last_trace = nil
  if stop then stop() end
  if ok and ctx.deadline ~= nil and now() > ctx.deadline then
    ok, result = false, status("DEADLINE_EXCEEDED", info.full_name .. ": deadline exceeded")
  end
  return ok, result, not ok and trace or nil
end

--- list = returned_list(info, result): what a server-streaming handler of
-- method `info` returned, as the list of responses to send after those it
-- sent (nil: none); anything but nil or a list (keys 1..n, every one
-- present: a list with a hole such as {a, nil, b} would lose what follows
-- the hole) raises an INTERNAL pc.Error, in every placement.
function M.returned_list(info, result)
  if result == nil then return {} end
  local list = type(result) == "table" and not is_message(result)
  if list then
    local n, count = #result, 0
    for k in pairs(result) do
      if mtype(k) ~= "integer" or k < 1 or k > n then list = false; break end
      count = count + 1
    end
    if count ~= n then list = false end
  end
  if not list then
    error(M.handler_bug(info.full_name .. ": handler must return a list of responses or nil"), 0)
  end
  return result
end

local Status -- google.rpc.Status, once needed

-- Bytes of a serialized google.rpc.Status, or nil and why not.
local function status_bytes(d)
  Status = Status or schema.default_pool():type("google.rpc.Status")
  local ok, st, err = protect(decode, Status, d)
  if ok and st then return d end
  return nil, "details: a serialized google.rpc.Status expected (" .. tostring(ok and err or st) .. ")"
end

--- st = failure(info, raised): the status a call of method `info` ends
-- with when its handler raised `raised`, the same in every placement:
-- {code = name, message =, details = grpc-status-details-bin bytes or
-- nil, metadata = trailers to add or nil, pushback = milliseconds for
-- grpc-retry-pushback-ms or nil (-1: do not retry), value = a non-Error
-- raised}. A pc.Error's `details` go as pc.status_details_bin makes them
-- (a list of messages) or as given (a string: the bytes of a
-- google.rpc.Status); its `metadata` go as trailers (a list
-- core.metadata_problem accepts: no "grpc-" keys); its `retry_delay`
-- (seconds) as the pushback of gRFC A6, rounded to milliseconds (at most
-- 2^31-1), negative: -1. Details or metadata that cannot be sent make it
-- INTERNAL "<method>: <what is wrong>". Anything else raised is as
-- handler_error makes it.
function M.failure(info, raised)
  local err = M.handler_error(info, raised)
  local st = { code = err.code, message = err.message or "", value = err.value }
  if getmetatable(raised) ~= Error then return st end
  local d, problem = err.details, nil
  if type(d) == "string" then
    d, problem = status_bytes(d)
  elseif d ~= nil then
    d, problem = details_bin(err)
  end
  local md = err.metadata
  if not problem and md ~= nil then
    problem = metadata_problem(md)
    if problem then problem = "pc.Error " .. problem end
  end
  if problem then return { code = "INTERNAL", message = info.full_name .. ": " .. problem } end
  st.details, st.metadata = d, md
  local delay = err.retry_delay
  if type(delay) == "number" and delay == delay then
    st.pushback = delay < 0 and -1 or delay * 1000 >= 0x7fffffff and 0x7fffffff or floor(delay * 1000 + 0.5)
  end
  return st
end

-- A response metadata argument: a string (a number is refused).
local function check_string(name, i, v)
  if type(v) ~= "string" then
    error(format("bad argument #%d to '%s' (string expected, got %s)", i, name, type(v)), 3)
  end
end

--- add_response_metadata(ctx, add, compress): a handler's
-- ctx:set_header(key, value) and ctx:set_trailer(key, value) (response
-- metadata, "-bin" keys carry bytes; headers before the first response)
-- and ctx:set_compression(name) ("gzip" gzips the responses sent from now
-- on, the response headers declaring it when not yet sent; "identity"
-- sends them uncompressed; returns whether that is what happens: false
-- for "gzip" when the client's grpc-accept-encoding lacks it or the
-- headers already went out without it, and always in process), in every
-- placement. Strings only, each pair as core.metadata_problem checks
-- call metadata, raising at the handler's line; the headers and the
-- trailers are each bounded as a call's metadata is (1000 pairs, 64 KiB
-- of keys and values), and past that the pair raises a pc.Error
-- RESOURCE_EXHAUSTED "<method>: set_header: metadata: ..." (a gRPC
-- server's answer to metadata too large to send) rather than the call
-- failing later in one placement only. `add(trailers, key, value)` -> true
-- or nil and why (the block already sent, the call over: OVER) and
-- `compress(gzip)` -> boolean or nil and why do the placement's part.
function M.add_response_metadata(ctx, add, compress)
  local method = ctx.method
  local function setter(name, trailers)
    local pairs_n, bytes = 0, 0
    return function(_, k, v)
      check_string(name, 1, k)
      check_string(name, 2, v)
      local problem, over = metadata_problem({ { k, v } }, pairs_n, bytes)
      if over then error(status("RESOURCE_EXHAUSTED", method .. ": " .. name .. ": " .. problem), 2) end
      if problem then error(name .. ": " .. problem, 2) end
      local ok, why = add(trailers, k, v)
      if not ok then error(name .. ": " .. why, 2) end
      pairs_n, bytes = pairs_n + 1, bytes + #k + #v
    end
  end
  ctx.set_header, ctx.set_trailer = setter("set_header", false), setter("set_trailer", true)
  function ctx.set_compression(_, name)
    if name ~= "gzip" and name ~= "identity" then
      error("bad argument #1 to 'set_compression' (\"gzip\" or \"identity\" expected, got "
        .. (type(name) == "string" and ("\"" .. name:gsub("%c", "?") .. "\"") or type(name)) .. ")", 2)
    end
    local ok, why = compress(name == "gzip")
    if ok == nil then error("set_compression: " .. why, 2) end
    return ok
  end
end

return M
