--- pc.inproc(server): the in-process transport, the embedded default. It
-- runs a pc.server (rpc/server.lua) in the same Lua state, through encode
-- and decode as a network would, with the transport shape of pc.grpc's
-- (transport:unary / server_stream / stream, a call object of the same
-- methods).
local core = require "protocall.core"
local compat = require "protocall.compat"
local errors = require "protocall.errors"
local internal = require "protocall.internal"
local sched = require "protocall.sched"
local status_details = require "protocall.status"
local rpc_server = require "protocall.rpc.server"
local health = require "protocall.rpc.health"

local type, error, pcall, getmetatable, setmetatable, tostring =
  type, error, pcall, getmetatable, setmetatable, tostring
local co_create, co_resume, co_yield, co_status, co_close =
  coroutine.create, coroutine.resume, coroutine.yield, coroutine.status, compat.co_close
local pack, unpack = compat.pack, compat.unpack
local format = string.format
local Error, status = errors.Error, errors.status
local decode = core.decode
local check_call, check_request = internal.check_call, internal.check_request
local is_server, response_of, response_bytes, no_send, no_recv, returned_list = rpc_server.is_server,
  rpc_server.response_of, rpc_server.response_bytes, rpc_server.no_send, rpc_server.no_recv,
  rpc_server.returned_list
local call_over, stray_error, OVER = rpc_server.call_over, rpc_server.stray_error, rpc_server.OVER
local co_running = coroutine.running
local now = sched.now

local M = {}

local function copy(list, into)
  into = into or {}
  for i = 1, #list do into[#into + 1] = list[i] end
  return into
end

-- The response headers and trailers a client receives, as pc.listen
-- sends them: the trailers are `first` (grpc-status-details-bin), those
-- the handler set, then `last`; a call that ends before any response
-- went out answers Trailers-Only, the headers the handler set first among
-- the trailers.
local function received(out, first, last)
  local headers, trailers = copy(out.headers), {}
  if not out.sent then headers, trailers = trailers, headers end
  copy(last, copy(out.trailers, copy(first, trailers)))
  return headers, trailers
end

-- The error `e` (a pc.Error the transport raised for the call) as the
-- client receives it: with the metadata the handler set, as over a
-- network.
local function with_metadata(e, out)
  if getmetatable(e) == Error and e.headers == nil then
    e.headers, e.metadata = received(out, {}, e.metadata or {})
  end
  return e
end

-- What a handler raised, as the client receives the call's status:
-- rpc/server.lua's failure, its details through grpc-status-details-bin
-- and decoded back, its pushback as pc.grpc reads grpc-retry-pushback-ms;
-- the error's metadata and the pushback after the trailers the handler
-- set.
local function handler_failure(info, raised, out)
  local st = rpc_server.failure(info, raised)
  local first, last = {}, copy(st.metadata or {})
  if st.details then first[1] = { "grpc-status-details-bin", st.details } end
  local e = { code = st.code, message = st.message, details = st.details, value = st.value }
  local ms = st.pushback
  if ms then
    last[#last + 1] = { "grpc-retry-pushback-ms", tostring(ms) }
    e.retry_delay = ms < 0 and -1 or ms / 1000
    if ms < 0 then e.no_retry = true end
  end
  e.headers, e.metadata = received(out, first, last)
  return status_details.error_of(e)
end

local Inproc = { __name = "protocall.Inproc" }
Inproc.__index = Inproc

-- ctx:set_header, set_trailer and set_compression in process
-- (rpc/server.lua add_response_metadata): the metadata is kept in `out`
-- for the client (headers until the first response goes out); nothing is
-- compressed in process. Once the call has ended (out.ended) they raise
-- OVER, as over the network.
local function add_metadata(out)
  return function(trailers, k, v)
    if out.ended then return nil, OVER end
    if not trailers and out.sent then return nil, "headers already sent" end
    local list = trailers and out.trailers or out.headers
    list[#list + 1] = { k, v }
    return true
  end
end
local function compress_of(out)
  return function(gzip)
    if out.ended then return nil, OVER end
    return not gzip
  end
end

-- A handler's context for a call of `info` with `settings`, and the
-- record of its response metadata {headers =, trailers =, sent =
-- whether a response went out, cancelled =, ended = whether the call is
-- over}.
local function context_of(info, settings)
  local timeout, metadata = nil, {}
  if settings then
    timeout = settings.timeout
    local md = settings.metadata
    if md then
      for i = 1, #md do
        local kv = md[i]
        metadata[i] = { kv[1], kv[2] }
      end
    end
    local previous = settings.previous_attempts
    if previous and previous > 0 then
      metadata[#metadata + 1] = { "grpc-previous-rpc-attempts", tostring(previous) }
    end
  end
  local ctx = {
    method = info.full_name, metadata = metadata, timeout = timeout,
    deadline = timeout and now() + timeout or nil,
  }
  local out = { headers = {}, trailers = {}, sent = false, cancelled = false, ended = false }
  rpc_server.add_response_metadata(ctx, add_metadata(out), compress_of(out))
  -- ctx:cancelled() and ctx:compressed() as over the network: whether
  -- the caller cancelled, the deadline passed or the call is over; false
  -- (nothing is compressed in process).
  function ctx.cancelled()
    return out.ended or out.cancelled or (ctx.deadline ~= nil and now() > ctx.deadline)
  end
  function ctx.compressed() return false end
  return ctx, out
end

-- The handler entry, method info, decoded request and context of a
-- unary or server-streaming call of `path`; raises pc.Error. Its
-- ctx:recv raises at the handler's line (rpc/server.lua no_recv), and so
-- does a unary call's ctx.send (a server stream's is set by the caller);
-- a unary handler's ctx.sleep is pc.sleep, as over the network (it runs
-- in the caller's coroutine).
local function prepare(server, path, request, settings)
  local entry = server.methods[path]
  if not entry then return error(status("UNIMPLEMENTED", "unknown method " .. tostring(path)), 0) end
  local info = entry.info
  if info.client_streaming then
    error(status("UNIMPLEMENTED", info.full_name .. ": a client-streaming method (transport:stream calls it)"), 0)
  end
  local req, err = decode(info.input, request)
  if not req then error(status("INTERNAL", info.full_name .. ": request failed to decode: " .. err), 0) end
  local ctx, out = context_of(info, settings)
  ctx.recv = no_recv(info)
  if not info.server_streaming then ctx.send, ctx.sleep = no_send(info), sched.sleep end
  return entry, info, req, ctx, out
end

local function check_deadline(info, ctx)
  if ctx.deadline and now() > ctx.deadline then
    error(status("DEADLINE_EXCEEDED", info.full_name .. ": deadline exceeded"), 0)
  end
end

--- transport = pc.inproc(server): the in-process transport, the embedded
-- default. Requests and responses go through pc.encode / pc.decode as on
-- a network; compression is accepted and has nothing to do in process.
-- The metadata a handler sets (ctx:set_header, ctx:set_trailer) and a
-- pc.Error's trailers reach the caller as pc.listen sends them:
-- `settings.with_metadata` makes `unary` return {headers =, trailers =}
-- after the bytes (with `with_metadata = "present"`, nil instead when the
-- handler set none), the calls of streams have headers() and trailers(),
-- and errors carry `headers` and `metadata`.
function M.inproc(server)
  if not is_server(server) then
    error("bad argument #1 to 'inproc' (protocall.Server expected, got " .. type(server) .. ")", 2)
  end
  return setmetatable({ server = server }, Inproc)
end

-- Raises "calling `name` on bad self" at the caller's caller's line for
-- a method called with a dot (transport.unary(path, ...)).
local function check_self(self, name)
  if getmetatable(self) ~= Inproc then
    error(format("calling '%s' on bad self (protocall.Inproc expected, got %s)", name, type(self)), 3)
  end
end

--- seconds = inproc:next_attempt(): always nil (there is no connection
-- to make, so no reconnection backoff), as pc.grpc's transport:next_attempt
-- answers when a call may connect now: code written against transports
-- takes either. Raises "calling 'next_attempt' on bad self" when called
-- with a dot.
function Inproc:next_attempt()
  check_self(self, "next_attempt")
  return nil
end

--- bytes = inproc:unary(path, request_bytes, settings)
-- The arguments are checked as pc.grpc's transport checks them (the
-- same code): misuse raises "bad argument #N to 'unary'" at the caller's
-- line.
function Inproc:unary(path, request, settings)
  check_self(self, "unary")
  check_call("unary", path, settings, 2, 3)
  check_request("unary", request, 2)
  local entry, info, req, ctx, out = prepare(self.server, path, request, settings)
  local ok, result = pcall(entry.handler, req, ctx)
  out.ended = true
  if not ok then error(handler_failure(info, result, out), 0) end
  local bytes
  ok, bytes = pcall(function()
    check_deadline(info, ctx)
    if result == nil then
      error(status("INTERNAL", info.full_name .. ": handler returned no response"), 0)
    end
    return response_bytes(info, response_of(info, result))
  end)
  if not ok then error(with_metadata(bytes, out), 0) end
  local want = settings and settings.with_metadata
  if want and (want ~= "present" or out.headers[1] ~= nil or out.trailers[1] ~= nil) then
    return bytes, { headers = out.headers, trailers = out.trailers }
  end
  return bytes
end

local SEND = setmetatable({}, { __name = "protocall.inproc.send" }) -- ctx.send's yield tag
local SLEEP = setmetatable({}, { __name = "protocall.inproc.sleep" }) -- ctx.sleep's yield tag
local WAIT = setmetatable({}, { __name = "protocall.inproc.wait" }) -- ctx[health.WAIT]'s yield tag

-- ctx.sleep(seconds) of a handler run in a coroutine: the caller's side
-- sleeps (pc.sleep: a task's sleep lets the other tasks run) and resumes it.
local function ctx_sleep(seconds) co_yield(SLEEP, seconds) end

-- ctx[health.WAIT](signal, seconds) of a handler run in a coroutine (a
-- health watcher): the caller's side waits for sched.fire(signal), at most
-- `seconds` (a task waits letting the others run; outside any task nothing
-- could fire it, so it sleeps), and resumes it.
local function ctx_wait(sig, seconds)
  co_yield(WAIT, sig, seconds)
  return true
end

-- The values the caller's coroutine is resumed with after passing on a
-- handler's own yield `r` (results of coroutine.resume): to a coroutine
-- of the caller's own; in a pc.run task or outside any coroutine nothing
-- would resume it, and the call fails as over the network
-- (rpc/server.lua stray_error).
local function pass_yield(info, r)
  local co, main = co_running()
  if co == nil or main or sched.in_task() then return nil, stray_error(info) end
  return pack(co_yield(unpack(r, 2, r.n)))
end

-- What the caller's side does for a handler's SLEEP or WAIT yield `r`.
local function wait_for(r)
  if r[2] == SLEEP then
    sched.sleep(r[3])
  elseif not sched.wait_signal(r[3], r[4]) then
    sched.sleep(r[4])
  end
end

local Closer = { __name = "protocall.InprocStream" }
Closer.__index = Closer
Closer.__close = function(self) self.close() end

--- for bytes in inproc:server_stream(path, request_bytes, settings) do ... end
-- The handler runs in a coroutine: each ctx.send hands its response to
-- the iterator as it is sent; ctx.sleep(seconds) sleeps in the iterator's
-- caller (pc.sleep, so a pc.spawn task lets the others run meanwhile);
-- other yields of the handler (a sleep yielding to an outer scheduler)
-- pass through to the running coroutine when it is one of the caller's
-- own and resume the handler with its results (in a pc.run task or
-- outside any coroutine the call fails INTERNAL, as over the network). A handler's error is raised
-- after the responses sent before it; DEADLINE_EXCEEDED is raised once
-- the deadline has passed (checked before each response and at the end).
-- A handler may also return a list of responses (rpc/server.lua
-- returned_list). The fourth value is the call: `call:close()` closes
-- the stream (stopping the handler; the iterator then returns nil), as a
-- generic `for` left early does; `call:cancel()` stops it too and the
-- iterator raises CANCELLED (nothing once the stream has ended); an
-- iterator dropped unfinished never resumes the handler; `call:headers()`
-- and `call:trailers()` give the metadata the handler set (trailers once
-- the stream has ended, {} before).
function Inproc:server_stream(path, request, settings)
  check_self(self, "server_stream")
  check_call("server_stream", path, settings, 2, 3)
  check_request("server_stream", request, 2)
  local entry, info, req, ctx, out = prepare(self.server, path, request, settings)
  function ctx.send(response)
    if out.ended then error(call_over(info), 2) end
    co_yield(SEND, response_of(info, response))
  end
  ctx.sleep, ctx[health.WAIT] = ctx_sleep, ctx_wait
  local co = co_create(entry.handler)
  local args = pack(req, ctx)
  local returned, i, finished, cancelled = nil, 0, false, false
  local function close()
    finished, out.ended = true, true
    if co_status(co) == "suspended" then co_close(co) end
  end
  local function cancel()
    if finished then return end
    cancelled, out.cancelled = true, true
    close()
  end
  local function step()
    if cancelled then
      cancelled = false
      error(status("CANCELLED", info.full_name .. ": cancelled by the client"), 0)
    end
    if finished then return nil end
    if ctx.deadline and now() > ctx.deadline then close(); check_deadline(info, ctx) end
    if returned then
      i = i + 1
      local r = returned[i]
      if r == nil then finished = true; return nil end
      out.sent = true
      return response_bytes(info, response_of(info, r))
    end
    while true do
      local r = pack(co_resume(co, unpack(args, 1, args.n)))
      if not r[1] then
        finished, out.ended = true, true
        error(handler_failure(info, r[2], out), 0)
      end
      if co_status(co) == "dead" then
        out.ended = true
        returned = returned_list(info, r[2])
        return step()
      end
      if r[2] == SEND then
        args = pack() -- ctx.send returns nothing
        if ctx.deadline and now() > ctx.deadline then close(); check_deadline(info, ctx) end
        out.sent = true
        return response_bytes(info, r[3])
      end
      if r[2] == SLEEP or r[2] == WAIT then
        wait_for(r)
        args = pack()
        if ctx.deadline and now() > ctx.deadline then close(); check_deadline(info, ctx) end
      else
        -- a yield of the handler's own: pass it through, resume with the answer
        local err
        args, err = pass_yield(info, r)
        if err then close(); error(err, 0) end
      end
    end
  end
  local function iterate()
    local ok, bytes = pcall(step)
    if not ok then
      finished, out.ended = true, true
      error(with_metadata(bytes, out), 0)
    end
    return bytes
  end
  local call = {
    close = close, cancel = cancel,
    headers = function() return out.headers end,
    trailers = function() return finished and out.trailers or {} end,
  }
  return iterate, nil, nil, setmetatable(call, Closer)
end

local RECV = setmetatable({}, { __name = "protocall.inproc.recv" }) -- ctx:recv's yield tag

local InprocCall = { __name = "protocall.InprocCall" }
InprocCall.__index = InprocCall

--- call = inproc:stream(path, settings): a client-streaming or
-- bidirectional call, with pc.grpc's call object (send, close_send, recv,
-- close_and_recv, headers, trailers, cancel, close; bytes in and out).
-- The handler function(ctx) runs in a coroutine resumed when the caller
-- waits for a response: ctx:recv() hands it the requests sent so far, in
-- order, then nil once the caller has closed its side. A caller waiting
-- for a response while the handler waits for a request that was not
-- sent: outside any coroutine nothing could send it, and the call fails
-- FAILED_PRECONDITION; inside one (a pc.spawn task) the caller sleeps a
-- millisecond at a time (pc.sleep) so that another task may send.
-- ctx.sleep and other yields of the handler work as in server_stream. Failures
-- (UNIMPLEMENTED for an unknown or non-client-streaming method, a request
-- that fails to decode, the handler's error, DEADLINE_EXCEEDED) are
-- raised by the next send or recv, as over a network.
function Inproc:stream(path, settings)
  check_self(self, "stream")
  check_call("stream", path, settings, 2, 2)
  local entry = self.server.methods[path]
  local c = setmetatable({ queue = {}, head = 1, tail = 0, out = {}, out_head = 1, out_tail = 0 }, InprocCall)
  if not entry then
    c.failure = status("UNIMPLEMENTED", "unknown method " .. tostring(path))
    return c
  end
  local info = entry.info
  c.info = info
  if not info.client_streaming then
    c.failure = status("UNIMPLEMENTED", info.full_name .. ": not a client-streaming or bidirectional method")
    return c
  end
  local ctx, md = context_of(info, settings)
  c.ctx, c.md = ctx, md
  function ctx.recv()
    if md.ended then error(call_over(info), 2) end
    while c.head > c.tail do
      if c.closed then return nil end
      co_yield(RECV)
    end
    local m = c.queue[c.head]
    c.queue[c.head] = nil
    c.head = c.head + 1
    return m
  end
  if info.server_streaming then
    function ctx.send(response)
      if md.ended then error(call_over(info), 2) end
      co_yield(SEND, response_of(info, response))
    end
  else
    ctx.send = no_send(info)
  end
  ctx.sleep, ctx[health.WAIT] = ctx_sleep, ctx_wait
  c.co = co_create(entry.handler)
  c.args = pack(ctx)
  return c
end

-- Ends the call with `err` (nil: OK), stopping the handler.
local function finish(c, err)
  c.done = true
  if c.md then c.md.ended = true end
  if err and not c.failure then c.failure = c.md and with_metadata(err, c.md) or err end
  if c.co and co_status(c.co) == "suspended" then co_close(c.co) end
end

local function raise_failure(c)
  if c.failure then error(c.failure, 0) end
end

local function push_out(c, bytes)
  c.md.sent = true
  c.out_tail = c.out_tail + 1
  c.out[c.out_tail] = bytes
end

-- Runs the handler until it answers, ends or waits for a request that
-- was not sent (returns false then).
local function step(c)
  local info, ctx = c.info, c.ctx
  while true do
    local r = pack(co_resume(c.co, unpack(c.args, 1, c.args.n)))
    c.args = pack()
    if not r[1] then return finish(c, handler_failure(info, r[2], c.md)) end
    if co_status(c.co) == "dead" then
      local result = r[2]
      if info.server_streaming then
        if result ~= nil then
          return finish(c, status("INTERNAL", info.full_name
            .. ": a bidirectional handler answers with ctx.send and returns nothing"))
        end
      elseif result == nil then
        return finish(c, status("INTERNAL", info.full_name .. ": handler returned no response"))
      else
        local ok, bytes = pcall(function() return response_bytes(info, response_of(info, result)) end)
        if not ok then return finish(c, bytes) end
        push_out(c, bytes)
      end
      return finish(c, nil)
    end
    if r[2] == SEND then
      local ok, bytes = pcall(response_bytes, info, r[3])
      if not ok then return finish(c, bytes) end
      push_out(c, bytes)
      return true
    end
    if r[2] == RECV then
      if c.head > c.tail and not c.closed then return false end -- none sent yet
    elseif r[2] == SLEEP or r[2] == WAIT then
      wait_for(r)
    else
      -- a yield of the handler's own: pass it through, resume with the answer
      local err
      c.args, err = pass_yield(info, r)
      if err then return finish(c, err) end
    end
    if ctx.deadline and now() > ctx.deadline then
      return finish(c, status("DEADLINE_EXCEEDED", info.full_name .. ": deadline exceeded"))
    end
  end
end

--- call:send(bytes): queues one request for the handler's ctx:recv().
function InprocCall:send(bytes)
  if type(bytes) ~= "string" then
    error("bad argument #1 to 'send' (string expected, got " .. type(bytes) .. ")", 2)
  end
  if self.send_closed then error("send: the sending side is closed (close_send)", 2) end
  raise_failure(self)
  if self.done then return end
  local req, err = decode(self.info.input, bytes)
  if not req then
    finish(self, status("INTERNAL", self.info.full_name .. ": request failed to decode: " .. err))
    raise_failure(self)
  end
  self.tail = self.tail + 1
  self.queue[self.tail] = req
end

--- call:close_send(): no more requests (the handler's ctx:recv() returns nil).
function InprocCall:close_send()
  self.send_closed = true
  self.closed = true
end

--- call:recv() -> the next response (bytes), nil after the last one;
-- raises the call's failure.
function InprocCall:recv()
  while true do
    local out = self.out[self.out_head]
    if out ~= nil then
      self.out[self.out_head] = nil
      self.out_head = self.out_head + 1
      return out
    end
    raise_failure(self)
    if self.done then return nil end
    local ctx = self.ctx
    if ctx.deadline and now() > ctx.deadline then
      finish(self, status("DEADLINE_EXCEEDED", self.info.full_name .. ": deadline exceeded"))
    elseif step(self) == false then
      if not sched.in_task() then
        finish(self, status("FAILED_PRECONDITION", self.info.full_name
          .. ": the handler waits for a request and the caller for a response (send, or close_send)"))
      else
        sched.sleep(0.001)
      end
    end
  end
end

--- call:close_and_recv() -> the one response of a client-streaming call.
function InprocCall:close_and_recv()
  self:close_send()
  local first = self:recv()
  if first == nil then
    error(status("INTERNAL", (self.info and self.info.full_name or "call") .. ": call received no response message"), 0)
  end
  return first
end

--- call:headers(), call:trailers(): the metadata the handler set
-- (ctx:set_header, ctx:set_trailer; trailers once the call has ended,
-- {} before).
function InprocCall:headers() return self.md and self.md.headers or {} end
function InprocCall:trailers() return self.done and self.md and self.md.trailers or {} end

--- call:cancel(): ends the call CANCELLED (later send and recv raise it).
function InprocCall:cancel()
  if self.md then self.md.cancelled = true end
  finish(self, status("CANCELLED", (self.info and self.info.full_name or "call") .. ": cancelled"))
end

--- call:close(): stops the handler if it is still running.
function InprocCall:close()
  if not self.done then finish(self, nil) end
end
InprocCall.__close = InprocCall.close

return M
