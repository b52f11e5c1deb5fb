--- Services (doc/guide.md "Services"): pc.server, pc.inproc and pc.client.
--
-- A transport moves bytes, one operation per call shape:
--   transport:unary(path, request_bytes, settings) -> response_bytes
--   transport:server_stream(path, request_bytes, settings) -> iterator of bytes
--   transport:stream(path, settings) -> call object (client streaming and
--     bidirectional; pc.grpc's, see lua/protocall/net.lua)
-- with settings = {timeout = seconds | nil, metadata = {{key, value}, ...},
-- compression = "gzip" | nil}, failing by raising pc.Error. pc.grpc (net.lua)
-- is the network one; pc.inproc below runs a pc.server in the same Lua state,
-- through encode and decode as a network would. pc.client builds a stub whose
-- methods are cached callables (call.lua) around a transport.
local M = {}

local type, error, pairs, ipairs, pcall, getmetatable, setmetatable, tostring =
  type, error, pairs, ipairs, pcall, getmetatable, setmetatable, tostring
local compat = require "protocall.compat"
local format, mtype = string.format, compat.mtype

function M.install(pc, core)
  local Error, encode, decode, type_of, is_message = pc.Error, pc.encode, pc.decode, pc.type_of, core.is_message
  local now = core.monotonic

  local function status(code, message, extra)
    local t = extra or {}
    t.code, t.message = code, message
    return Error(t)
  end

  -- The request as a message of `T`: a message of that type as is, a plain
  -- table converted (raising the constructor's error on a bad field, after
  -- `what`), under LuaJIT a struct of pc.ffi(T) copied into one
  -- (pc.to_message). Raises at `level` (0: no position).
  local function as_message(T, value, what, level)
    local lv = level > 0 and level + 1 or 0
    if is_message(value) then
      if type_of(value) ~= T then
        error(format("%s: %s expected, got %s", what, T.full_name, type_of(value).full_name), lv)
      end
      return value
    end
    if type(value) == "cdata" and pc.to_message then
      local S = pc.type_of(value) -- a struct's type (lua/protocall/ffi.lua), or nil
      if S == T then return pc.to_message(value) end
      if S then error(format("%s: %s expected, got a struct of %s", what, T.full_name, S.full_name), lv) end
    end
    if type(value) ~= "table" then
      error(format("%s: %s or a table expected, got %s", what, T.full_name, type(value)), lv)
    end
    local ok, m = pcall(T, value)
    if not ok then
      if type(m) == "string" then m = m:gsub("^[^:\n]*:%d+: ", "", 1) end
      error(format("%s: %s", what, tostring(m)), lv)
    end
    return m
  end

  -- Interceptors: a function runs once per call, {per_attempt = function}
  -- once per attempt; both as fn(call, next) -> response.
  local function split_interceptors(list, where)
    if list == nil then return nil, nil end
    if type(list) ~= "table" then
      error(format("%s: interceptors: list of functions expected, got %s", where, type(list)), 3)
    end
    local per_call, per_attempt = {}, {}
    for i, v in ipairs(list) do
      if type(v) == "function" then
        per_call[#per_call + 1] = v
      elseif type(v) == "table" and type(v.per_attempt) == "function" and next(v, next(v)) == nil then
        per_attempt[#per_attempt + 1] = v.per_attempt
      else
        error(format("%s: interceptors[%d]: function or {per_attempt = function} expected, got %s",
          where, i, type(v)), 3)
      end
    end
    if #list ~= #per_call + #per_attempt then
      error(where .. ": interceptors: list expected (keys 1..n)", 3)
    end
    return #per_call > 0 and per_call or nil, #per_attempt > 0 and per_attempt or nil
  end

  -- Fills in the outcome fields of an interceptor's `call` table.
  local function outcome(call, ok, res, start, clock)
    call.elapsed = clock() - start
    if ok then
      call.status = "OK"
    else
      local mt = getmetatable(res)
      if mt == pc.RetryError then
        call.status, call.error = res.cause and res.cause.code or "UNKNOWN", res
        call.attempts = res.attempts
      elseif mt == Error then
        call.status, call.error = res.code, res
      else
        call.status, call.error = "UNKNOWN", res
      end
    end
  end

  ---------------------------------------------------------------------------
  -- In-process server and transport

  local Server = { __name = "protocall.Server" }
  Server.__index = Server

  -- Runs `chain[i..]` around `terminal(call)`: each interceptor's next(c)
  -- (c defaults to the same call) runs the rest, then sets c's outcome
  -- (status, elapsed since `t0` on `clock`, error) however the rest ended:
  -- an inner interceptor's answer or error included.
  local function run_chain(chain, i, call, terminal, t0, clock)
    local f = chain[i]
    if f == nil then return terminal(call) end
    return f(call, function(c)
      c = c or call
      local ok, res = pcall(run_chain, chain, i + 1, c, terminal, t0, clock)
      outcome(c, ok, res, t0, clock)
      if not ok then error(res, 0) end
      return res
    end)
  end

  --- server = pc.server{["pkg.Service"] = {Method = function(request, ctx) ... end}, ...}
  -- Handlers get the decoded request and a context {method = full name,
  -- metadata = {{key, value}, ...} (the call's, a copy; a retry or hedge
  -- also has grpc-previous-rpc-attempts, as a gRPC server sees), timeout = seconds
  -- or nil, deadline = monotonic seconds or nil, send = function(response)
  -- (server streaming)}. A unary handler returns the response (a message of
  -- the output type or a table of it). A server-streaming handler calls
  -- ctx.send for each response, or returns a list of them. Client-streaming
  -- and bidirectional handlers are function(ctx): ctx:recv() returns the
  -- next request (nil once the client closed its side); a client-streaming
  -- handler returns its one response, a bidirectional one answers with
  -- ctx.send. Raising a
  -- pc.Error fails the call with that status; raising anything else fails it
  -- with UNKNOWN, the message kept. Raises on an unknown service or method,
  -- or a handler that is not a function. An optional second table takes
  -- {pool = p (default: the default pool), interceptors = {fn, ...}}: each
  -- fn(call, next) runs around every handler call with call = {method =
  -- full name, request = the decoded request, metadata = the call's list,
  -- ctx = the handler's context}; next(call) runs the rest and the handler
  -- (a unary handler's response, a streaming one's returned list or nil);
  -- returning without next short-circuits with that response, raising fails
  -- the call; after next, call.status ("OK" or the code), call.elapsed and
  -- on failure call.error are set (doc/guide.md "Interceptors"); a client-streaming
  -- or bidirectional call has no `request`. `health = true | pc.health()`
  -- and `reflection = true` add the built-in grpc.health.v1.Health and
  -- grpc.reflection.v1 / v1alpha ServerReflection services (doc/guide.md
  -- "Health and reflection").
  function pc.server(services, opts)
    if type(services) ~= "table" then
      error("bad argument #1 to 'server' (table expected, got " .. type(services) .. ")", 2)
    end
    if opts ~= nil and type(opts) ~= "table" then
      error("bad argument #2 to 'server' (table expected, got " .. type(opts) .. ")", 2)
    end
    for k in pairs(opts or {}) do
      if k ~= "pool" and k ~= "interceptors" and k ~= "health" and k ~= "reflection" then error("pc.server: unknown option '" .. tostring(k) .. "'", 2) end
    end
    local chain, per_attempt = split_interceptors(opts and opts.interceptors, "pc.server")
    if per_attempt then
      error("pc.server: interceptors: {per_attempt = ...} is for clients (a server sees each attempt as a call)", 2)
    end
    local pool = opts and opts.pool or pc._default_pool
    if opts and (opts.health or opts.reflection) then services = pc._builtin_services(services, opts, pool) end
    local methods = {}
    for sname, handlers in pairs(services) do
      local info = type(sname) == "string" and pool:service(sname)
      if not info then error("pc.server: unknown service '" .. tostring(sname) .. "'", 2) end
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
            local c = { method = full, metadata = ctx.metadata, ctx = ctx }
            return run_chain(chain, 1, c, function(cc) return fn(cc.ctx) end, now(), now)
          end
        elseif chain then
          local full = m.full_name
          handler = function(req, ctx)
            local c = { method = full, request = req, metadata = ctx.metadata, ctx = ctx }
            return run_chain(chain, 1, c, function(cc) return fn(cc.request, cc.ctx) end, now(), now)
          end
        end
        methods[m.path] = { info = m, handler = handler }
      end
    end
    return setmetatable({ methods = methods }, Server)
  end

  local Inproc = { __name = "protocall.Inproc" }
  Inproc.__index = Inproc

  -- A handler's context for a call of `info` with `settings`.
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
    return {
      method = info.full_name, metadata = metadata, timeout = timeout,
      deadline = timeout and now() + timeout or nil,
    }
  end

  -- The handler entry, method info, decoded request and context of a
  -- unary or server-streaming call of `path`; raises pc.Error. Only a
  -- streaming call's context gets `send` (set by the caller).
  local function prepare(server, path, request, settings)
    local entry = server.methods[path]
    if not entry then return error(status("UNIMPLEMENTED", "unknown method " .. tostring(path)), 0) end
    local info = entry.info
    if info.client_streaming then
      error(status("UNIMPLEMENTED", info.full_name .. ": a client-streaming method (transport:stream calls it)"), 0)
    end
    local req, err = decode(info.input, request)
    if not req then error(status("INTERNAL", info.full_name .. ": request failed to decode: " .. err), 0) end
    return entry, info, req, context_of(info, settings)
  end

  -- What a handler raised, as the call's status: a pc.Error as the client
  -- would receive it (its `details` through grpc-status-details-bin,
  -- pc.status_details_bin, and decoded back), anything else UNKNOWN with
  -- the message kept.
  local function handler_failure(info, result)
    if getmetatable(result) == Error then return pc._status_roundtrip(result) end
    return status("UNKNOWN", info.full_name .. ": " .. tostring(result), { value = result })
  end

  local function check_deadline(info, ctx)
    if ctx.deadline and now() > ctx.deadline then
      error(status("DEADLINE_EXCEEDED", info.full_name .. ": deadline exceeded"), 0)
    end
  end

  -- A response as a message of the output type, or an INTERNAL status
  -- (whose message names no file of protocall).
  local function response_of(info, value)
    if is_message(value) and type_of(value) == info.output then return value end
    local ok, resp = pcall(as_message, info.output, value, info.full_name .. " response", 0)
    if not ok then error(status("INTERNAL", tostring(resp)), 0) end
    return resp
  end

  --- transport = pc.inproc(server): the in-process transport, the embedded
  -- default. Requests and responses go through pc.encode / pc.decode as on
  -- a network; compression is accepted and has nothing to do in process.
  function pc.inproc(server)
    if getmetatable(server) ~= Server then
      error("bad argument #1 to 'inproc' (protocall.Server expected, got " .. type(server) .. ")", 2)
    end
    return setmetatable({ server = server }, Inproc)
  end

  -- A handler's response on the wire; one that cannot be encoded (a proto3
  -- string that is not UTF-8, nesting too deep) fails the call with
  -- INTERNAL, as a gRPC server's serialization failure does.
  local function response_bytes(info, m)
    local ok, bytes = pcall(encode, m)
    if ok then return bytes end
    error(status("INTERNAL", info.full_name .. ": response failed to encode: "
      .. tostring(bytes):gsub("^[^:\n]*:%d+: ", "", 1)), 0)
  end

  --- bytes = inproc:unary(path, request_bytes, settings)
  function Inproc:unary(path, request, settings)
    local entry, info, req, ctx = prepare(self.server, path, request, settings)
    local ok, result = pcall(entry.handler, req, ctx)
    if not ok then error(handler_failure(info, result), 0) end
    check_deadline(info, ctx)
    if result == nil then
      error(status("INTERNAL", info.full_name .. ": handler returned no response"), 0)
    end
    return response_bytes(info, response_of(info, result))
  end

  local SEND = setmetatable({}, { __name = "protocall.inproc.send" }) -- ctx.send's yield tag
  local SLEEP = setmetatable({}, { __name = "protocall.inproc.sleep" }) -- ctx.sleep's yield tag
  local co_create, co_resume, co_yield, co_status, co_close =
    coroutine.create, coroutine.resume, coroutine.yield, coroutine.status, compat.co_close
  local pack, unpack = compat.pack, compat.unpack

  -- ctx.sleep(seconds) of a handler run in a coroutine: the caller's side
  -- sleeps (pc.sleep: a task's sleep lets the other tasks run) and resumes it.
  local function ctx_sleep(seconds) co_yield(SLEEP, seconds) end

  local Closer = { __name = "protocall.InprocStream" }
  Closer.__index = Closer
  Closer.__close = function(self) self.close() end

  --- for bytes in inproc:server_stream(path, request_bytes, settings) do ... end
  -- The handler runs in a coroutine: each ctx.send hands its response to
  -- the iterator as it is sent; ctx.sleep(seconds) sleeps in the iterator's
  -- caller (pc.sleep, so a pc.spawn task lets the others run meanwhile);
  -- other yields of the handler (a sleep yielding to an outer scheduler) pass through to the running coroutine
  -- and resume the handler with its results. A handler's error is raised
  -- after the responses sent before it; DEADLINE_EXCEEDED is raised once
  -- the deadline has passed (checked before each response and at the end).
  -- A handler may also return a list of responses. The fourth value closes
  -- the stream (stopping the handler); a generic `for` left early closes it,
  -- and an iterator dropped unfinished never resumes the handler.
  function Inproc:server_stream(path, request, settings)
    local entry, info, req, ctx = prepare(self.server, path, request, settings)
    function ctx.send(response)
      co_yield(SEND, response_of(info, response))
    end
    ctx.sleep = ctx_sleep
    local co = co_create(entry.handler)
    local args = pack(req, ctx)
    local returned, i, finished = nil, 0, false
    local function close()
      finished = true
      if co_status(co) == "suspended" then co_close(co) end
    end
    local function iterate()
      if finished then return nil end
      if ctx.deadline and now() > ctx.deadline then close(); check_deadline(info, ctx) end
      if returned then
        i = i + 1
        local r = returned[i]
        if r == nil then finished = true; return nil end
        return response_bytes(info, response_of(info, r))
      end
      while true do
        local r = pack(co_resume(co, unpack(args, 1, args.n)))
        if not r[1] then
          finished = true
          error(handler_failure(info, r[2]), 0)
        end
        if co_status(co) == "dead" then
          local result = r[2]
          local list = result == nil or (type(result) == "table" and not is_message(result))
          if list and result ~= nil then
            for k in pairs(result) do
              if mtype(k) ~= "integer" then list = false; break end
            end
          end
          if not list then
            finished = true
            error(status("INTERNAL", info.full_name .. ": handler must return a list of responses or nil"), 0)
          end
          returned = result or {}
          return iterate()
        end
        if r[2] == SEND then
          args = pack() -- ctx.send returns nothing
          if ctx.deadline and now() > ctx.deadline then close(); check_deadline(info, ctx) end
          return response_bytes(info, r[3])
        end
        if r[2] == SLEEP then
          pc.sleep(r[3])
          args = pack()
        else
          -- a yield of the handler's own: pass it through, resume with the answer
          args = pack(co_yield(unpack(r, 2, r.n)))
        end
      end
    end
    return iterate, nil, nil, setmetatable({ close = close }, Closer)
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
    local ctx = context_of(info, settings)
    c.ctx = ctx
    function ctx.recv()
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
        co_yield(SEND, response_of(info, response))
      end
    end
    ctx.sleep = ctx_sleep
    c.co = co_create(entry.handler)
    c.args = pack(ctx)
    return c
  end

  -- Ends the call with `err` (nil: OK), stopping the handler.
  local function finish(c, err)
    c.done = true
    if err and not c.failure then c.failure = err end
    if c.co and co_status(c.co) == "suspended" then co_close(c.co) end
  end

  local function raise_failure(c)
    if c.failure then error(c.failure, 0) end
  end

  local function push_out(c, bytes)
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
      if not r[1] then return finish(c, handler_failure(info, r[2])) end
      if co_status(c.co) == "dead" then
        local result = r[2]
        if info.server_streaming then
          if result ~= nil then
            return finish(c, status("INTERNAL", info.full_name .. ": a bidirectional handler answers with ctx.send and returns nothing"))
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
      elseif r[2] == SLEEP then
        pc.sleep(r[3])
      else
        -- a yield of the handler's own: pass it through, resume with the answer
        c.args = pack(co_yield(unpack(r, 2, r.n)))
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
        if not require("protocall.net").in_task() then
          finish(self, status("FAILED_PRECONDITION", self.info.full_name
            .. ": the handler waits for a request and the caller for a response (send, or close_send)"))
        else
          pc.sleep(0.001)
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

  --- call:headers(), call:trailers(): in process there are none ({}).
  function InprocCall:headers() return {} end
  function InprocCall:trailers() return {} end

  --- call:cancel(): ends the call CANCELLED (later send and recv raise it).
  function InprocCall:cancel()
    finish(self, status("CANCELLED", (self.info and self.info.full_name or "call") .. ": cancelled"))
  end

  --- call:close(): stops the handler if it is still running.
  function InprocCall:close()
    if not self.done then finish(self, nil) end
  end
  InprocCall.__close = InprocCall.close

  -- What pc.listen (lua/protocall/listen.lua) shares with pc.inproc.
  pc._serving = {
    Server = Server, status = status, response_of = response_of, response_bytes = response_bytes,
  }

  ---------------------------------------------------------------------------
  -- gRPC service config (the JSON document of grpc/service_config.proto, as
  -- a Lua table): validated as gRFC A6 says, each problem named with its
  -- JSON path, and turned into the options pc.client gives each method.

  -- Raises "service_config: <path>: <what>" at pc.client's caller.
  local function config_error(path, msg)
    error({ service_config = path .. ": " .. msg }, 0)
  end

  local function known_keys(t, path, known)
    for k in pairs(t) do
      if not known[k] then
        config_error(path == "" and tostring(k) or path .. "." .. tostring(k), "unknown field")
      end
    end
  end

  local function object_at(v, path)
    if type(v) ~= "table" then config_error(path, "object expected, got " .. type(v)) end
    return v
  end

  local function list_at(v, path)
    if type(v) ~= "table" then config_error(path, "list expected, got " .. type(v)) end
    local n = #v
    for k in pairs(v) do
      if mtype(k) ~= "integer" or k < 1 or k > n then config_error(path, "list expected, got an object") end
    end
    return v
  end

  -- A google.protobuf.Duration in its JSON form ("0.1s", "1s", "2.000000001s")
  -- as seconds; `positive` refuses 0.
  local function duration_at(v, path, positive)
    if type(v) ~= "string" then
      config_error(path, "duration string such as \"0.1s\" expected, got " .. type(v))
    end
    local int, frac = v:match("^(%d+)%.?(%d*)s$")
    if not int or #frac > 9 or #int > 12 or v:find("%.s$") then
      config_error(path, "duration string such as \"0.1s\" expected, got \"" .. v .. "\"")
    end
    local seconds = tonumber(int) + (frac ~= "" and tonumber(frac) / 10 ^ #frac or 0)
    if positive and seconds <= 0 then config_error(path, "positive duration expected, got \"" .. v .. "\"") end
    return seconds
  end

  local function number_at(v, path, what)
    if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
      config_error(path, what .. " expected, got " .. (type(v) == "number" and tostring(v) or type(v)))
    end
    return v
  end

  -- A list of status codes (names such as "UNAVAILABLE", or numbers) as names.
  local function codes_at(v, path, required)
    list_at(v, path)
    if required and #v == 0 then config_error(path, "at least one status code expected") end
    local names = {}
    for i, c in ipairs(v) do
      local name = pc.codes[c]
      if type(name) == "number" then name = c end
      if type(name) ~= "string" or name == "OK" then
        config_error(format("%s[%d]", path, i - 1), "status code name such as \"UNAVAILABLE\" expected, got "
          .. (type(c) == "string" and "\"" .. c .. "\"" or tostring(c)))
      end
      names[#names + 1] = name
    end
    return names
  end

  -- maxAttempts of a retry or hedging policy: an integer of at least 2;
  -- above 5 it is 5 (gRFC A6 "Maximum Number of Retries").
  local function attempts_at(v, path)
    if v == nil then config_error(path, "required") end
    if mtype(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
      config_error(path, "integer expected, got " .. tostring(v))
    end
    if v < 2 then config_error(path, "at least 2 expected, got " .. tostring(compat.tointeger(v) or v)) end
    return v > 5 and 5 or compat.tointeger(v)
  end

  local RETRY_POLICY_KEYS = { maxAttempts = true, initialBackoff = true, maxBackoff = true,
    backoffMultiplier = true, retryableStatusCodes = true, perAttemptRecvTimeout = true }

  local function retry_policy_at(v, path)
    object_at(v, path)
    known_keys(v, path, RETRY_POLICY_KEYS)
    local function required(k)
      if v[k] == nil then config_error(path .. "." .. k, "required") end
      return v[k]
    end
    local max_attempts = attempts_at(v.maxAttempts, path .. ".maxAttempts")
    local initial = duration_at(required("initialBackoff"), path .. ".initialBackoff", true)
    local maximum = duration_at(required("maxBackoff"), path .. ".maxBackoff", true)
    local multiplier = number_at(required("backoffMultiplier"), path .. ".backoffMultiplier", "number")
    if multiplier <= 0 then
      config_error(path .. ".backoffMultiplier", "positive number expected, got " .. tostring(multiplier))
    end
    if multiplier < 1 then
      config_error(path .. ".backoffMultiplier", "values below 1 (a shrinking backoff) are not supported, got "
        .. tostring(multiplier))
    end
    local codes = codes_at(required("retryableStatusCodes"), path .. ".retryableStatusCodes", true)
    local per_attempt
    if v.perAttemptRecvTimeout ~= nil then
      per_attempt = duration_at(v.perAttemptRecvTimeout, path .. ".perAttemptRecvTimeout", true)
    end
    local retry = pc.Retry { initial = initial, maximum = maximum, multiplier = multiplier,
      max_attempts = max_attempts, timeout = false, predicate = pc.if_status(compat.unpack(codes)) }
    return retry, per_attempt
  end

  local HEDGING_POLICY_KEYS = { maxAttempts = true, hedgingDelay = true, nonFatalStatusCodes = true }

  -- {max_attempts=, delay= seconds (0 when unset: every attempt at once),
  -- non_fatal = {CODE = true}} for pc._hedge (lua/protocall/hedge.lua).
  local function hedging_policy_at(v, path)
    object_at(v, path)
    known_keys(v, path, HEDGING_POLICY_KEYS)
    local policy = { max_attempts = attempts_at(v.maxAttempts, path .. ".maxAttempts"), delay = 0, non_fatal = {} }
    if v.hedgingDelay ~= nil then policy.delay = duration_at(v.hedgingDelay, path .. ".hedgingDelay", false) end
    if v.nonFatalStatusCodes ~= nil then
      for _, name in ipairs(codes_at(v.nonFatalStatusCodes, path .. ".nonFatalStatusCodes")) do
        policy.non_fatal[name] = true
      end
    end
    return policy
  end

  local function size_at(v, path)
    if mtype(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v) and v >= 0 and v < 2 ^ 53) then
      config_error(path, "non-negative integer expected, got " .. tostring(v))
    end
    if v < 0 then config_error(path, "non-negative integer expected, got " .. tostring(v)) end
    return compat.tointeger(v)
  end

  local METHOD_CONFIG_KEYS = { name = true, timeout = true, retryPolicy = true, hedgingPolicy = true,
    waitForReady = true, maxRequestMessageBytes = true, maxResponseMessageBytes = true }
  local NAME_KEYS = { service = true, method = true }
  local CONFIG_KEYS = { methodConfig = true, retryThrottling = true, loadBalancingConfig = true,
    loadBalancingPolicy = true }
  local LB_POLICIES = { pick_first = true, round_robin = true }

  --- config = parse_service_config(t): the methodConfig entries by name
  -- ("pkg.Service/Method", "pkg.Service/" for service-wide, "/" for the
  -- default), each {timeout=, retry=, hedging=, max_request=, max_response=,
  -- wait_for_ready=}, `throttling` {max_tokens=, token_ratio=} or nil, and
  -- `balancing` "pick_first" | "round_robin" | nil (the first policy of
  -- loadBalancingConfig protocall has, as gRPC picks).
  -- Raises {service_config = "path: what"} on the first problem.
  local function parse_service_config(t)
    object_at(t, "service_config")
    known_keys(t, "", CONFIG_KEYS)
    local balancing
    if t.loadBalancingConfig ~= nil then
      local list = list_at(t.loadBalancingConfig, "loadBalancingConfig")
      for i, entry in ipairs(list) do
        local path = format("loadBalancingConfig[%d]", i - 1)
        object_at(entry, path)
        local name, conf = next(entry)
        if name == nil or next(entry, name) ~= nil then config_error(path, "object with one policy name expected") end
        if type(conf) ~= "table" then
          config_error(path .. "." .. tostring(name), "object expected, got " .. type(conf))
        end
        if LB_POLICIES[name] and not balancing then
          known_keys(conf, path .. "." .. name, {})
          balancing = name
        end
      end
      if not balancing then
        config_error("loadBalancingConfig", "no supported policy (pick_first, round_robin)")
      end
    elseif t.loadBalancingPolicy ~= nil then
      local v = t.loadBalancingPolicy
      if type(v) ~= "string" or not LB_POLICIES[v:lower()] then
        config_error("loadBalancingPolicy", "\"pick_first\" or \"round_robin\" expected, got "
          .. (type(v) == "string" and "\"" .. v .. "\"" or type(v)))
      end
      balancing = v:lower()
    end
    local by_name = {}
    local mcs = t.methodConfig
    if mcs ~= nil then
      list_at(mcs, "methodConfig")
      for i, mc in ipairs(mcs) do
        local path = format("methodConfig[%d]", i - 1)
        object_at(mc, path)
        known_keys(mc, path, METHOD_CONFIG_KEYS)
        local entry = {}
        if mc.timeout ~= nil then entry.timeout = duration_at(mc.timeout, path .. ".timeout", true) end
        if mc.retryPolicy ~= nil and mc.hedgingPolicy ~= nil then
          config_error(path, "retryPolicy and hedgingPolicy are mutually exclusive")
        end
        if mc.retryPolicy ~= nil then
          entry.retry, entry.per_attempt = retry_policy_at(mc.retryPolicy, path .. ".retryPolicy")
        end
        if mc.hedgingPolicy ~= nil then
          entry.hedging = hedging_policy_at(mc.hedgingPolicy, path .. ".hedgingPolicy")
        end
        if mc.waitForReady ~= nil then
          if type(mc.waitForReady) ~= "boolean" then
            config_error(path .. ".waitForReady", "boolean expected, got " .. type(mc.waitForReady))
          end
          entry.wait_for_ready = mc.waitForReady
        end
        if mc.maxRequestMessageBytes ~= nil then
          entry.max_request = size_at(mc.maxRequestMessageBytes, path .. ".maxRequestMessageBytes")
        end
        if mc.maxResponseMessageBytes ~= nil then
          entry.max_response = size_at(mc.maxResponseMessageBytes, path .. ".maxResponseMessageBytes")
        end
        local names = mc.name
        if names == nil then config_error(path .. ".name", "required") end
        list_at(names, path .. ".name")
        if #names == 0 then config_error(path .. ".name", "at least one name expected") end
        for j, n in ipairs(names) do
          local npath = format("%s.name[%d]", path, j - 1)
          object_at(n, npath)
          known_keys(n, npath, NAME_KEYS)
          local service, method = n.service or "", n.method or ""
          if type(service) ~= "string" then config_error(npath .. ".service", "string expected, got " .. type(service)) end
          if type(method) ~= "string" then config_error(npath .. ".method", "string expected, got " .. type(method)) end
          if service == "" and method ~= "" then
            config_error(npath, "a method needs its service (only {} or {service=\"\"} names the default)")
          end
          local key = service .. "/" .. method
          if by_name[key] then
            config_error(npath, format("duplicate name %s (also in %s)", key == "/" and "(the default)" or key,
              by_name[key].path))
          end
          entry.path = entry.path or npath
          by_name[key] = entry
        end
      end
    end
    local throttling
    if t.retryThrottling ~= nil then
      local rt = object_at(t.retryThrottling, "retryThrottling")
      known_keys(rt, "retryThrottling", { maxTokens = true, tokenRatio = true })
      for _, k in ipairs { "maxTokens", "tokenRatio" } do
        if rt[k] == nil then config_error("retryThrottling." .. k, "required") end
        number_at(rt[k], "retryThrottling." .. k, "number")
      end
      local ok, err = pcall(pc.Throttle, { max_tokens = rt.maxTokens, token_ratio = rt.tokenRatio })
      if not ok then
        local what, msg = tostring(err):match("%((%a+_%a+): (.*)%)$")
        config_error("retryThrottling." .. (what == "max_tokens" and "maxTokens" or "tokenRatio"), msg or tostring(err))
      end
      throttling = { max_tokens = rt.maxTokens, token_ratio = rt.tokenRatio }
    end
    return { by_name = by_name, throttling = throttling, balancing = balancing }
  end

  -- A google.protobuf.Value as the Lua value JSON text means: objects and
  -- lists as tables, null as nil.
  local function plain_value(v)
    local kind = pc.which_oneof(v, "kind")
    if kind == "struct_value" then
      local t = {}
      for k, f in pc.pairs(v.struct_value.fields) do t[k] = plain_value(f) end
      return t
    elseif kind == "list_value" then
      local t = {}
      for i, f in pc.ipairs(v.list_value.values) do t[i] = plain_value(f) end
      return t
    elseif kind == "null_value" or kind == nil then
      return nil
    end
    return v[kind]
  end

  -- Service config JSON text as the Lua table it spells (read as a
  -- google.protobuf.Struct by pc.from_json); raises {service_config = err}
  -- with the JSON path and offset of a syntax error.
  local function config_from_json(text)
    local struct, err = pc.from_json(pc.type("google.protobuf.Struct"), text)
    if not struct then error({ service_config = "JSON: " .. err }, 0) end
    local t = {}
    for k, f in pc.pairs(struct.fields) do t[k] = plain_value(f) end
    return t
  end

  -- The methodConfig entry of `service`/`method`, as gRPC matches: the exact
  -- name, else the service-wide one, else the default; nil for none.
  local function config_for(config, service, method)
    local by = config.by_name
    return by[service .. "/" .. method] or by[service .. "/"] or by["/"]
  end

  -- One bucket per transport (the client's target) and retryThrottling
  -- numbers, shared by every client and method over it.
  local shared_buckets = setmetatable({}, { __mode = "k" })
  local function bucket_for(transport, throttling)
    local per = shared_buckets[transport]
    if not per then
      per = {}
      shared_buckets[transport] = per
    end
    local key = format("%.17g/%.17g", throttling.max_tokens, throttling.token_ratio)
    local b = per[key]
    if not b then
      b = pc.Throttle { max_tokens = throttling.max_tokens, token_ratio = throttling.token_ratio }
      per[key] = b
    end
    return b
  end

  ---------------------------------------------------------------------------
  -- Clients

  local POLICY_KEYS = { retry = true, timeout = true, compression = true, metadata = true }
  local CLIENT_KEYS = { transport = true, pool = true, methods = true, cache_size = true,
                        clock = true, sleep = true, random = true, service_config = true,
                        throttle = true, interceptors = true }
  for k in pairs(POLICY_KEYS) do CLIENT_KEYS[k] = true end
  local METHOD_KEYS = { resume = true }
  for k in pairs(POLICY_KEYS) do METHOD_KEYS[k] = true end

  local metadata_problem = pc._metadata_problem

  -- What is wrong with compression `c` as a call option, or nil: the
  -- transports know "gzip" and "identity" (false and nil: none).
  local function compression_problem(c)
    if c == nil or c == false or c == "gzip" or c == "identity" then return nil end
    return format("compression '%s': expected \"gzip\" or \"identity\"", tostring(c))
  end

  -- What is wrong with the policy options in `t` (client, method or call
  -- level), or nil. Retry and timeout are checked by pc.wrap_method.
  local function options_problem(t)
    if t.metadata ~= nil and t.metadata ~= pc.DEFAULT then
      local problem = metadata_problem(t.metadata)
      if problem then return problem end
    end
    if t.resume ~= nil and type(t.resume) ~= "function" then
      return "resume: function expected, got " .. type(t.resume)
    end
    if t.compression ~= pc.DEFAULT then return compression_problem(t.compression) end
    return nil
  end

  -- A method's callable defaults: its explicit `methods.Name` options, then
  -- the service config's entry for it (retry and timeout), then the
  -- client's options.
  local function defaults_for(opts, per, entry, throttle)
    local d = {
      cache_size = opts.cache_size, clock = opts.clock, sleep = opts.sleep, random = opts.random,
      throttle = throttle,
    }
    local from_config = {}
    if entry then
      from_config.retry = entry.retry
      if entry.hedging then from_config.retry = false end -- the hedges are the attempts
      if entry.per_attempt then
        from_config.timeout = pc.ExponentialTimeout { initial = entry.per_attempt,
          maximum = entry.per_attempt, multiplier = 1, deadline = entry.timeout or false }
      else
        from_config.timeout = entry.timeout
      end
    end
    for k in pairs(POLICY_KEYS) do
      local v = per and per[k]
      if v == nil then v = from_config[k] end
      if v == nil then v = opts[k] end
      d[k] = v
    end
    return d
  end

  local function too_large(full, what, n, max)
    return status("RESOURCE_EXHAUSTED", format("%s: %s of %d bytes is larger than the service config's %d",
      full, what, n, max), { ["local"] = true })
  end

  -- The decoded response of `bytes`, within the size limit `max` (nil: none).
  local function decoded(m, bytes, max)
    if max and #bytes > max then error(too_large(m.full_name, "response", #bytes, max), 0) end
    local resp, err = decode(m.output, bytes)
    if not resp then
      error(status("INTERNAL", m.full_name .. ": response failed to decode: " .. err, { ["local"] = true }), 0)
    end
    return resp
  end

  -- A unary attempt. The request is its bytes, or a record {bytes=} of a
  -- call made {with_metadata = true}: the attempt then asks the transport
  -- for the response's headers and trailers and sets record.metadata.
  -- `attempt` is nil for the first, then 2, 3, ... (pc.wrap_method); the
  -- transport sends previous_attempts as grpc-previous-rpc-attempts.
  local function unary_attempt(transport, m, max)
    local path = m.path
    return function(request, timeout, metadata, compression, attempt)
      local rec
      if type(request) == "table" then rec, request = request, request.bytes end
      local bytes, meta = transport:unary(path, request, { timeout = timeout, metadata = metadata,
        compression = compression, with_metadata = rec ~= nil, previous_attempts = attempt and attempt - 1 })
      if rec then rec.metadata = meta end
      return decoded(m, bytes, max)
    end
  end

  -- {headers=, trailers=} of a with_metadata record (empty lists from a
  -- transport that has none: pc.inproc, a host's).
  local function metadata_of(rec)
    local meta = rec.metadata
    if type(meta) ~= "table" then meta = {} end
    return { headers = meta.headers or {}, trailers = meta.trailers or {} }
  end

  -- Per-call options without `with_metadata`, and whether it asked.
  local function split_with_metadata(call_opts)
    if type(call_opts) ~= "table" or call_opts.with_metadata == nil then return call_opts, false end
    if type(call_opts.with_metadata) ~= "boolean" then
      return nil, nil, "with_metadata: boolean expected, got " .. type(call_opts.with_metadata)
    end
    local rest = {}
    for k, v in pairs(call_opts) do
      if k ~= "with_metadata" then rest[k] = v end
    end
    return next(rest) ~= nil and rest or nil, call_opts.with_metadata
  end

  -- {headers=, trailers=} a transport's stream call holds (pc.grpc's
  -- call:metadata()), nil when it has none or is closed.
  local function transport_metadata(call)
    local t = type(call)
    if t ~= "table" and t ~= "userdata" then return nil end
    local ok, m = pcall(function()
      if call.metadata then return call:metadata() end
      if call.headers and call.trailers then return { headers = call:headers(), trailers = call:trailers() } end
    end)
    return ok and type(m) == "table" and m or nil
  end

  --- iterator, call = stub:StreamMethod(request, {with_metadata = true}):
  -- a server-streaming stub call's second value. `call:headers()` -> the
  -- response headers
  -- ({key, value} pairs; those received so far while the stream runs),
  -- `call:trailers()` -> the trailers once the stream has ended ({} before).
  -- Both are the last attempt's (a retried or resumed stream's latest) and
  -- also set when it failed (as the error's `headers` and `metadata`); a
  -- transport without metadata (pc.inproc) gives empty lists.
  local StreamMetadata = { __name = "protocall.StreamMetadata" }
  StreamMetadata.__index = StreamMetadata

  function StreamMetadata:headers()
    local m = self.rec.metadata
    if m == nil and self.rec.live ~= nil and type(self.rec.live) == "userdata" then
      m = transport_metadata(self.rec.live)
    end
    return m and m.headers or {}
  end

  function StreamMetadata:trailers()
    local m = self.rec.metadata
    return m and m.trailers or {}
  end

  local function stream_metadata(rec)
    return setmetatable({ rec = rec }, StreamMetadata)
  end

  -- A server-streaming attempt lasts until the first response (or the end
  -- of the stream): a failure before it is retried by the call's policy,
  -- as gRPC commits a call once a response arrives; later failures reach
  -- the caller's loop (or, with `resume`, start the next attempt).
  -- The transport's call (its closing value) of each stream iterator a
  -- stub hands out, so the stub returns it as the generic for's fourth
  -- value: leaving the loop early closes the stream (RST_STREAM CANCEL over
  -- the network, the handler stopped in process).
  local stream_closers = setmetatable({}, { __mode = "k" })
  local Closing = { __name = "protocall.StreamClose" }
  Closing.__index = Closing
  function Closing.close(self)
    local c = self.current()
    if c ~= nil then c:close() end
  end
  Closing.__close = Closing.close

  local function stream_attempt(transport, m, max)
    local path = m.path
    local function next_of(bytes)
      if bytes == nil then return nil end
      return decoded(m, bytes, max)
    end
    return function(request_bytes, timeout, metadata, compression, attempt)
      local rec -- a with_metadata record (stream_metadata below)
      if type(request_bytes) == "table" then rec, request_bytes = request_bytes.sink or request_bytes, request_bytes.bytes end
      local iter, state, ctl, call = transport:server_stream(path, request_bytes, { timeout = timeout,
        metadata = metadata, compression = compression, previous_attempts = attempt and attempt - 1 })
      if rec then
        rec.metadata, rec.live = nil, call
        local raw = iter
        iter = function(st, c)
          local ok, bytes = pcall(raw, st, c)
          if not ok then
            if type(bytes) == "table" then rec.metadata = { headers = bytes.headers, trailers = bytes.metadata } end
            error(bytes, 0)
          end
          if bytes == nil then rec.metadata = transport_metadata(call) or {} end
          return bytes
        end
      end
      local first = next_of(iter(state, ctl))
      local done = first == nil
      local f = function()
        if first ~= nil then
          local r = first
          first = nil
          return r
        end
        if done then return nil end
        local r = next_of(iter(state, ctl))
        if r == nil then done = true end
        return r
      end
      stream_closers[f] = call
      return f, call
    end
  end

  -- The generic for's four values for a stream iterator of a stub (the
  -- closing value nil when the transport gave none).
  local function stream_values(it)
    local call = stream_closers[it]
    if call == nil then return it end
    return it, nil, nil, setmetatable({ current = function() return call end }, Closing)
  end

  -- A hedged call of unary or server-streaming method `m` as one attempt
  -- function (pc._hedge, lua/protocall/hedge.lua, runs the hedges). On a
  -- transport with start_unary / start_server_stream and wait (pc.grpc's)
  -- the hedges are in flight together on its connection, a stream committing
  -- at its first response; on any other (pc.inproc) each attempt runs to
  -- its end before the next may start, so only a failure with a non-fatal
  -- code (or pushback) leads to the next one. `bucket` is the client's C
  -- retry token bucket or nil; `clock` and `sleep` the client's.
  -- An attempt that ended when it started (a transport without start_*).
  local Ended = { __index = {
    result = function(h) return h.ok, h.v end,
    cancel = function() end,
  } }

  local function hedged_attempt(transport, m, max, policy, bucket, clock, sleep)
    local path, streaming = m.path, m.server_streaming
    local begin = transport[streaming and "start_server_stream" or "start_unary"]
    local start, wait, sync
    if type(begin) == "function" and type(transport.wait) == "function" then
      local function decode_stream(it)
        return function()
          local b = it()
          if b == nil then return nil end
          return decoded(m, b, max)
        end
      end
      -- `request` is the bytes, or a record {bytes=} of a call made with
      -- with_metadata (the winner sets record.metadata), as unary_attempt's.
      start = function(request, timeout, metadata, compression, previous, tried)
        local rec = type(request) == "table" and request or nil
        local h = begin(transport, path, rec and rec.bytes or request, { timeout = timeout, metadata = metadata,
          compression = compression, previous_attempts = previous > 0 and previous or nil, tried = tried,
          with_metadata = rec ~= nil or nil })
        return {
          raw = h,
          cancel = function() h:cancel() end,
          result = function()
            local ok, v, meta = h:result()
            if not ok then return ok, v end
            if streaming then return true, decode_stream(v) end
            if rec then rec.metadata = meta end
            return pcall(decoded, m, v, max)
          end,
        }
      end
      wait = function(list, seconds)
        local raw = {}
        for i = 1, #list do raw[i] = list[i].raw end
        transport:wait(raw, seconds)
      end
    else
      local run = (streaming and stream_attempt or unary_attempt)(transport, m, max)
      start = function(bytes, timeout, metadata, compression, previous)
        local ok, v = pcall(run, bytes, timeout, metadata, compression, previous + 1)
        return setmetatable({ ok = ok, v = v, sync = true }, Ended)
      end
      wait = function(_, seconds)
        if seconds > 0 then sleep(seconds) end
      end
      sync = true
    end
    return pc._hedge(policy, { start = start, wait = wait, clock = clock, bucket = bucket, sync = sync })
  end

  -- Client-streaming and bidirectional methods: `stub:Method([opts])`
  -- returns a call object over transport:stream (pc.grpc's) whose `send`
  -- takes messages of the input type (or plain tables of it) and whose
  -- `recv` / `close_and_recv` return messages of the output type; also
  -- `close_send`, `headers`, `trailers`, `cancel`, `close`. A transport
  -- without `stream` (pc.inproc) raises "pkg.Service.Method: client-streaming
  -- and bidirectional calls are not supported yet". Not retried
  -- (the requests are the caller's to send); the timeout (the call's, the
  -- method's or the client's; an ExponentialTimeout gives its `initial`)
  -- covers the whole call.
  local StubCall = { __name = "protocall.StubCall" }
  StubCall.__index = StubCall

  function StubCall:send(msg)
    local okE, bytes = pcall(encode, as_message(self.input, msg, self.full .. " request", 2))
    if not okE then
      error(self.full .. " request: " .. tostring(bytes):gsub("^[^:\n]*:%d+: ", "", 1), 2)
    end
    return self.call:send(bytes)
  end

  local function decoded_reply(self, bytes)
    if bytes == nil then return nil end
    local resp, err = decode(self.output, bytes)
    if not resp then
      error(status("INTERNAL", self.full .. ": response failed to decode: " .. err,
                   { ["local"] = true }), 0)
    end
    return resp
  end

  function StubCall:recv() return decoded_reply(self, self.call:recv()) end
  function StubCall:close_and_recv() return decoded_reply(self, self.call:close_and_recv()) end
  function StubCall:close_send() return self.call:close_send() end
  function StubCall:headers() return self.call:headers() end
  function StubCall:trailers() return self.call:trailers() end
  function StubCall:cancel() return self.call:cancel() end
  function StubCall:close() return self.call:close() end
  StubCall.__close = StubCall.close

  local function streaming_method(transport, m, d)
    local full, name = m.full_name, m.name
    return function(_, call_opts)
      if call_opts ~= nil and type(call_opts) ~= "table" then
        error(format("bad argument #1 to '%s' (table expected, got %s)", name, type(call_opts)), 2)
      end
      call_opts = call_opts or {}
      local bad = options_problem(call_opts)
      if bad then error(format("bad argument #1 to '%s' (%s)", name, bad), 2) end
      if type(transport.stream) ~= "function" then
        error(full .. ": client-streaming and bidirectional calls are not supported yet", 2)
      end
      local function pick(k)
        local v = call_opts[k]
        if v == nil or v == pc.DEFAULT then v = d[k] end
        if v == false then v = nil end
        return v
      end
      local timeout = pick("timeout")
      if type(timeout) ~= "number" and timeout ~= nil then timeout = timeout.initial end
      local md, own = d.metadata, call_opts.metadata
      if own ~= nil and own ~= pc.DEFAULT then
        local merged, seen = {}, {}
        for i = 1, #own do seen[own[i][1]] = true end
        for i = 1, md and #md or 0 do
          if not seen[md[i][1]] then merged[#merged + 1] = md[i] end
        end
        for i = 1, #own do merged[#merged + 1] = own[i] end
        md = merged
      end
      local call = transport:stream(m.path,
        { timeout = timeout, metadata = md, compression = pick("compression") })
      return setmetatable({ call = call, input = m.input, output = m.output, full = full }, StubCall)
    end
  end

  --- stub = pc.client(service_full_name, {transport=, retry=, timeout=,
  -- metadata=, compression=, methods = {Name = {retry=, timeout=, metadata=,
  -- compression=, resume=}}, service_config=, throttle=, interceptors=,
  -- pool=, cache_size=, clock=, sleep=, random=})
  -- Each method is a cached callable (pc.wrap_method) over the transport,
  -- with the service's defaults overridden per method:
  --   response = stub:Method(request [, {retry=, timeout=, metadata=, compression=}])
  --   for response in stub:StreamMethod(request [, {resume=, ...}]) do ... end
  --   stub.Method:cache_info() -> {hits=, misses=, size=, capacity=} of its plan cache
  --   stub:throttle_info() -> the retry bucket's {tokens=, ...} (pc.Throttle:info), or nil
  -- `request` is a message of the input type or a plain table of it. Per
  -- call, `with_metadata = true` makes a unary method return `response,
  -- {headers =, trailers =}` (the successful attempt's {key, value} lists,
  -- as python grpc's with_call; empty over pc.inproc) and a server-streaming
  -- one `iterator, call` (see stub:StreamMethod).
  -- `service_config` is gRPC's service config as a Lua table or JSON text
  -- (doc/guide.md "Service config"): each method takes its methodConfig entry's retry and
  -- timeout unless `methods.Name` sets them (the client's own retry and
  -- timeout apply to methods no entry names); `retryThrottling` makes one
  -- pc.Throttle per transport and numbers, shared by every client over that
  -- transport (`throttle` gives one explicitly). `resume(request,
  -- last_response) -> next_request` lets a server stream that failed after
  -- a response retry with the request it returns (nil ends the stream), the
  -- caller's loop seeing one stream. `interceptors` lists fn(call, next)
  -- run once per call, or {per_attempt = fn} once per attempt (doc/guide.md
  -- "Interceptors"). Client-streaming and bidirectional methods return a call
  -- object:
  --   local call = stub:ClientStreamOrBidiMethod([opts]); call:send(request) ...
  -- Raises on a missing transport, an unknown service,
  -- method or option, a bad service config ("pc.client: service_config:
  -- methodConfig[0].retryPolicy.maxAttempts: at least 2 expected, got 1"),
  -- metadata that is not a list of {key, value} pairs with lowercase gRPC
  -- header names, or a compression other than "gzip" / "identity"; a stub
  -- method raises such misuse of its per-call options at its caller's line
  -- (as "bad argument #2 to 'Method'") before any attempt, and indexing a
  -- method the service lacks raises "pkg.Service has no method 'Name'".
  function pc.client(service_name, opts)
    if type(service_name) ~= "string" then
      error("bad argument #1 to 'client' (string expected, got " .. type(service_name) .. ")", 2)
    end
    if type(opts) ~= "table" then
      error("bad argument #2 to 'client' (table expected, got " .. type(opts) .. ")", 2)
    end
    for k in pairs(opts) do
      if not CLIENT_KEYS[k] then error("pc.client: unknown option '" .. tostring(k) .. "'", 2) end
    end
    local transport = opts.transport
    if transport == nil then
      error("pc.client: option 'transport' is required (pc.inproc(server) or pc.grpc(target))", 2)
    end
    local pool = opts.pool or pc._default_pool
    local info = pool:service(service_name)
    if not info then error("pc.client: unknown service '" .. service_name .. "'", 2) end
    local problem = options_problem(opts)
    if problem then error("pc.client: " .. problem, 2) end
    local config
    if opts.service_config ~= nil then
      local sc = opts.service_config
      if type(sc) ~= "table" and type(sc) ~= "string" then
        error("pc.client: service_config: table or JSON text expected, got " .. type(sc), 2)
      end
      local okc, res = pcall(function()
        return parse_service_config(type(sc) == "string" and config_from_json(sc) or sc)
      end)
      if not okc then
        if type(res) == "table" and res.service_config then error("pc.client: service_config: " .. res.service_config, 2) end
        error(res, 0)
      end
      config = res
    end
    local throttle = opts.throttle
    if throttle ~= nil and getmetatable(throttle) ~= pc.Throttle then
      error("pc.client: throttle: pc.Throttle expected, got " .. type(throttle), 2)
    end
    if throttle == nil and config and config.throttling then throttle = bucket_for(transport, config.throttling) end
    if config and config.balancing and type(transport.set_load_balancing) == "function" then
      transport:set_load_balancing(config.balancing)
    end
    local per_call_chain, per_attempt_chain = split_interceptors(opts.interceptors, "pc.client")
    local intercepted = per_call_chain ~= nil or per_attempt_chain ~= nil
    local clock = opts.clock or now
    local per_method = opts.methods or {}
    for name, per in pairs(per_method) do
      if not info.methods[name] then
        error(format("pc.client: %s has no method '%s'", service_name, tostring(name)), 2)
      end
      if type(per) ~= "table" then
        error(format("pc.client: methods.%s: table expected, got %s", name, type(per)), 2)
      end
      for k in pairs(per) do
        if not METHOD_KEYS[k] then
          error(format("pc.client: methods.%s: unknown option '%s'", name, tostring(k)), 2)
        end
      end
      problem = options_problem(per)
      if problem then error(format("pc.client: methods.%s: %s", name, problem), 2) end
      if per.resume ~= nil and not info.methods[name].server_streaming then
        error(format("pc.client: methods.%s: resume: only server-streaming methods resume", name), 2)
      end
    end
    local stub = {}
    for _, m in ipairs(info.methods) do
      local input, full = m.input, m.full_name
      if m.client_streaming then
        stub[m.name] = streaming_method(transport, m, defaults_for(opts, per_method[m.name]))
      else
        local name = m.name
        local entry = config and config_for(config, service_name, name)
        local max_request = entry and entry.max_request
        local per = per_method[name]
        -- A hedgingPolicy applies unless methods.Name sets its own retry.
        local hedging = entry and entry.hedging and not (per and per.retry ~= nil) and entry.hedging
        local attempt
        if hedging then
          attempt = hedged_attempt(transport, m, entry.max_response, hedging,
            throttle and pc._throttle_bucket(throttle), clock, opts.sleep or pc.sleep)
        else
          attempt = (m.server_streaming and stream_attempt or unary_attempt)(transport, m,
            entry and entry.max_response)
        end
        -- The callable's request is the encoded bytes, or with interceptors
        -- a record {bytes=, call=, attempts=} of the call.
        local target = attempt
        if intercepted then
          -- With with_metadata, the attempt gets a record of its own
          -- whose metadata is copied to the call's record.
          local function attempt_of(rec, bytes, timeout, metadata, compression, n)
            if not rec.want_metadata then return attempt(bytes, timeout, metadata, compression, n) end
            local box = { bytes = bytes, sink = m.server_streaming and rec or nil }
            local res = attempt(box, timeout, metadata, compression, n)
            if not box.sink then rec.metadata = box.metadata end
            return res
          end
          target = function(rec, timeout, metadata, compression, n)
            rec.attempts = n or 1
            if not per_attempt_chain then return attempt_of(rec, rec.bytes, timeout, metadata, compression, n) end
            local md = {}
            for i = 1, #metadata do md[i] = { metadata[i][1], metadata[i][2] } end
            local a = { method = full, service = service_name, name = name, request = rec.call.request,
              metadata = md, timeout = timeout, compression = compression, attempt = n or 1 }
            return run_chain(per_attempt_chain, 1, a, function(c)
              local bytes = rec.bytes
              if c.request ~= rec.call.request then
                bytes = encode(as_message(input, c.request, full .. " request", 0))
              end
              return attempt_of(rec, bytes, c.timeout, c.metadata, c.compression, n)
            end, clock(), clock)
          end
        end
        local okw, callable = pcall(pc.wrap_method, target,
          defaults_for(opts, per, entry, not hedging and throttle or nil))
        if not okw then
          local msg = tostring(callable):gsub("^[^:\n]*:%d+: ", "", 1)
          msg = msg:match("^bad argument #2 to 'wrap_method' %((.*)%)$") or msg
          error(format("pc.client: %s: %s", full, msg), 2)
        end
        local method_resume = per and per.resume

        -- The request's bytes, within the service config's size limit.
        -- A plain table goes straight to bytes (pc.encode(T, table): T{...}'s
        -- checks and errors, no message objects); anything else is checked as
        -- a message of the input type first.
        local function encoded(request, level)
          local okE, bytes
          if type(request) == "table" then
            okE, bytes = pcall(encode, input, request)
          else
            okE, bytes = pcall(encode, as_message(input, request, full .. " request", level + 1))
          end
          if not okE then
            error(full .. " request: " .. tostring(bytes):gsub("^[^:\n]*:%d+: ", "", 1), level + 1)
          end
          if max_request and #bytes > max_request then
            error(too_large(full, "request", #bytes, max_request), 0)
          end
          return bytes
        end

        -- Per-call options without `resume`: a copy only when it is there.
        local function split_resume(call_opts)
          if type(call_opts) ~= "table" or call_opts.resume == nil then return call_opts, method_resume end
          local rest = {}
          for k, v in pairs(call_opts) do
            if k ~= "resume" then rest[k] = v end
          end
          return next(rest) ~= nil and rest or nil, call_opts.resume
        end

        -- A server stream retried after a failure mid-stream with the
        -- request resume(request, last_response) returns; every attempt is
        -- one of the call's policy (backoff, attempt cap, deadline, throttle).
        local function resumable(request, call_opts, resume, rec)
          local s = callable:_attempts(call_opts)
          local bytes = rec and rec.bytes or encoded(request, 3)
          local function arg() if rec then rec.bytes = bytes; return rec end return bytes end
          local timeout, iter, last = s.first, nil, nil
          local function open()
            while true do
              local ok, it = pcall(target, arg(), timeout, s:metadata(), s.compression,
                s.attempts > 1 and s.attempts or nil)
              if ok then
                s.succeeded()
                iter = it
                return
              end
              timeout = s:failed(it)
            end
          end
          open()
          local f = function()
            while true do
              local ok, r = pcall(iter)
              if ok then
                if r ~= nil then last = r end
                return r
              end
              timeout = s:failed(r)
              if last ~= nil then
                local nreq = resume(request, last)
                if nreq == nil then return nil end
                request = as_message(input, nreq, full .. " resume", 0)
                bytes = encoded(request, 1)
                if rec then rec.call.request = request end
                last = nil
              end
              open()
            end
          end
          local closing = setmetatable({ current = function() return stream_closers[iter] end }, Closing)
          stream_closers[f] = closing
          return f, closing
        end

        -- The call through the callable; misuse at the caller's `level`.
        local function call_with(request_arg, call_opts, level)
          if call_opts == nil then return callable(request_arg) end
          if type(call_opts) == "table" then
            local bad = options_problem(call_opts)
            if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), level + 1) end
          end
          local ok, res = pcall(callable, request_arg, call_opts)
          if ok then return res end
          -- the callable's misuse errors, at this caller's line and name
          local inner = type(res) == "string"
            and res:gsub("^[^:\n]*:%d+: ", "", 1):match("^bad argument #2 to 'callable' %((.*)%)$")
          if inner then error(format("bad argument #2 to '%s' (%s)", name, inner), level + 1) end
          error(res, 0)
        end

        local function plain(_, _, request, call_opts)
          if type(call_opts) == "table" and call_opts.resume ~= nil then
            error(format("bad argument #2 to '%s' (resume: only server-streaming methods resume)", name), 2)
          end
          local rest, want_md, bad = split_with_metadata(call_opts)
          if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
          if want_md then
            local rec = { bytes = encoded(request, 2) }
            local res = call_with(rec, rest, 2)
            return res, metadata_of(rec)
          end
          local res = call_with(encoded(request, 2), rest, 2)
          return res
        end

        local invoke = plain
        if m.server_streaming then
          invoke = function(_, _, request, call_opts)
            local rest, resume = split_resume(call_opts)
            if call_opts ~= nil and type(call_opts) == "table" then
              local bad = options_problem(call_opts)
              if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
            end
            local want_md, bad
            rest, want_md, bad = split_with_metadata(rest)
            if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
            local rec = want_md and { call = {} } or nil
            if not resume then
              if rec then rec.bytes = encoded(request, 2) end
              local it, _, _, closing = stream_values(call_with(rec or encoded(request, 2), rest, 2))
              return it, rec and stream_metadata(rec) or nil, nil, closing
            end
            if rec then rec.bytes = encoded(request, 2) end
            local ok, res, closing = pcall(resumable, as_message(input, request, full .. " request", 2), rest, resume, rec)
            if ok then return res, rec and stream_metadata(rec) or nil, nil, closing end
            local inner = type(res) == "string"
              and res:gsub("^[^:\n]*:%d+: ", "", 1):match("^bad argument #2 to 'callable' %((.*)%)$")
            if inner then error(format("bad argument #2 to '%s' (%s)", name, inner), 2) end
            error(res, 0)
          end
        end

        if intercepted then
          -- The call as interceptors see it: method, request (a message),
          -- metadata (a fresh list), options (a fresh table); after the call
          -- status, attempts, elapsed (and error on failure).
          invoke = function(_, _, request, call_opts)
            if call_opts ~= nil and type(call_opts) ~= "table" then
              error(format("bad argument #2 to '%s' (table of options expected, got %s)", name, type(call_opts)), 2)
            end
            local c = { method = full, service = service_name, name = name,
              request = as_message(input, request, full .. " request", 2), metadata = {}, options = {},
              attempts = 0 }
            for k, v in pairs(call_opts or {}) do
              if k == "metadata" then
                local bad = metadata_problem(v)
                if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
                for i, p in ipairs(v) do c.metadata[i] = { p[1], p[2] } end
              else
                c.options[k] = v
              end
            end
            local bad = options_problem(c.options)
            if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
            local t0 = clock()
            local function terminal(cc)
              local o = {}
              for k, v in pairs(cc.options) do o[k] = v end
              if #cc.metadata > 0 then o.metadata = cc.metadata end
              if o.resume ~= nil and not m.server_streaming then
                error(format("%s: resume: only server-streaming methods resume", full), 0)
              end
              local rest, resume = split_resume(o)
              local want_md, bad_md
              rest, want_md, bad_md = split_with_metadata(rest)
              if bad_md then error(format("%s: %s", full, bad_md), 0) end
              if rest ~= nil and next(rest) == nil then rest = nil end
              local rec = { call = cc, attempts = 0, want_metadata = want_md }
              cc.response_metadata = want_md and rec or nil
              local ok, res
              if resume then
                rec.bytes = encoded(cc.request, 1)
                ok, res = pcall(resumable, cc.request, rest, resume, rec)
              else
                rec.bytes = encoded(cc.request, 1)
                ok, res = pcall(call_with, rec, rest, 1)
              end
              cc.attempts = rec.attempts
              if not ok then error(res, 0) end
              return res
            end
            local res = run_chain(per_call_chain or {}, 1, c, terminal, t0, clock)
            if m.server_streaming then
              local it, _, _, closing = stream_values(res)
              return it, c.response_metadata and stream_metadata(c.response_metadata) or nil, nil, closing
            end
            if c.response_metadata then return res, metadata_of(c.response_metadata) end
            return res
          end
        end

        stub[name] = setmetatable({}, {
          __name = "protocall.Method", __call = invoke, __metatable = false,
          __index = { cache_info = function() return callable:cache_info() end },
          __newindex = function() error("protocall.Method is read-only", 2) end,
        })
      end
    end
    local function throttle_info() return throttle and throttle:info() or nil end
    return setmetatable(stub, { __index = function(_, k)
      if k == "throttle_info" then return throttle_info end
      error(format("%s has no method '%s'", service_name, tostring(k)), 2)
    end })
  end
end

return M
