--- Services (README "Services"): pc.server, pc.inproc and pc.client.
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
local format, mtype = string.format, math.type

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
  -- `what`). Raises at `level` (0: no position).
  local function as_message(T, value, what, level)
    local lv = level > 0 and level + 1 or 0
    if is_message(value) then
      if type_of(value) ~= T then
        error(format("%s: %s expected, got %s", what, T.full_name, type_of(value).full_name), lv)
      end
      return value
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

  ---------------------------------------------------------------------------
  -- In-process server and transport

  local Server = { __name = "protocall.Server" }
  Server.__index = Server

  --- server = pc.server{["pkg.Service"] = {Method = function(request, ctx) ... end}, ...}
  -- Handlers get the decoded request and a context {method = full name,
  -- metadata = {{key, value}, ...} (the call's, a copy), timeout = seconds
  -- or nil, deadline = monotonic seconds or nil, send = function(response)
  -- (server streaming)}. A unary handler returns the response (a message of
  -- the output type or a table of it). A server-streaming handler calls
  -- ctx.send for each response, or returns a list of them. Raising a
  -- pc.Error fails the call with that status; raising anything else fails it
  -- with UNKNOWN, the message kept. Raises on an unknown service or method,
  -- or a handler that is not a function. An optional second table takes
  -- {pool = p} (default: the default pool).
  function pc.server(services, opts)
    if type(services) ~= "table" then
      error("bad argument #1 to 'server' (table expected, got " .. type(services) .. ")", 2)
    end
    if opts ~= nil and type(opts) ~= "table" then
      error("bad argument #2 to 'server' (table expected, got " .. type(opts) .. ")", 2)
    end
    local pool = opts and opts.pool or pc._default_pool
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
        methods[m.path] = { info = m, handler = fn }
      end
    end
    return setmetatable({ methods = methods }, Server)
  end

  local Inproc = { __name = "protocall.Inproc" }
  Inproc.__index = Inproc

  -- The handler entry, method info, decoded request and context of a call
  -- of `path`; raises pc.Error. Only a streaming call's context gets `send`
  -- (set by the caller).
  local function prepare(server, path, request, settings)
    local entry = server.methods[path]
    if not entry then return error(status("UNIMPLEMENTED", "unknown method " .. tostring(path)), 0) end
    local info = entry.info
    if info.client_streaming then
      error(status("UNIMPLEMENTED", info.full_name .. ": client streaming is not supported yet"), 0)
    end
    local req, err = decode(info.input, request)
    if not req then error(status("INTERNAL", info.full_name .. ": request failed to decode: " .. err), 0) end
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
    end
    local ctx = {
      method = info.full_name, metadata = metadata, timeout = timeout,
      deadline = timeout and now() + timeout or nil,
    }
    return entry, info, req, ctx
  end

  -- What a handler raised, as the call's status: a pc.Error as is,
  -- anything else UNKNOWN with the message kept.
  local function handler_failure(info, result)
    if getmetatable(result) == Error then return result end
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
  local co_create, co_resume, co_yield, co_status, co_close =
    coroutine.create, coroutine.resume, coroutine.yield, coroutine.status, coroutine.close
  local pack, unpack = table.pack, table.unpack

  local Closer = { __name = "protocall.InprocStream" }
  Closer.__index = Closer
  Closer.__close = function(self) self.close() end

  --- for bytes in inproc:server_stream(path, request_bytes, settings) do ... end
  -- The handler runs in a coroutine: each ctx.send hands its response to
  -- the iterator as it is sent; other yields of the handler (a sleep
  -- yielding to an outer scheduler) pass through to the running coroutine
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
        -- a yield of the handler's own: pass it through, resume with the answer
        args = pack(co_yield(unpack(r, 2, r.n)))
      end
    end
    return iterate, nil, nil, setmetatable({ close = close }, Closer)
  end

  ---------------------------------------------------------------------------
  -- Clients

  local POLICY_KEYS = { retry = true, timeout = true, compression = true, metadata = true }
  local CLIENT_KEYS = { transport = true, pool = true, methods = true, cache_size = true,
                        clock = true, sleep = true, random = true }
  for k in pairs(POLICY_KEYS) do CLIENT_KEYS[k] = true end

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
    if t.compression ~= pc.DEFAULT then return compression_problem(t.compression) end
    return nil
  end

  local function defaults_for(opts, per)
    local d = {
      cache_size = opts.cache_size, clock = opts.clock, sleep = opts.sleep, random = opts.random,
    }
    for k in pairs(POLICY_KEYS) do
      local v = per and per[k]
      if v == nil then v = opts[k] end
      d[k] = v
    end
    return d
  end

  local function unary_target(transport, m)
    local path, output, full = m.path, m.output, m.full_name
    return function(request_bytes, timeout, metadata, compression)
      local bytes = transport:unary(path, request_bytes,
        { timeout = timeout, metadata = metadata, compression = compression })
      local resp, err = decode(output, bytes)
      if not resp then
        error(status("INTERNAL", full .. ": response failed to decode: " .. err, { ["local"] = true }), 0)
      end
      return resp
    end
  end

  -- A server-streaming attempt lasts until the first response (or the end
  -- of the stream): a failure before it is retried by the call's policy,
  -- as gRPC commits a call once a response arrives; later failures reach
  -- the caller's loop.
  local function stream_target(transport, m)
    local path, output, full = m.path, m.output, m.full_name
    local function decoded(bytes)
      if bytes == nil then return nil end
      local resp, err = decode(output, bytes)
      if not resp then
        error(status("INTERNAL", full .. ": response failed to decode: " .. err, { ["local"] = true }), 0)
      end
      return resp
    end
    return function(request_bytes, timeout, metadata, compression)
      local iter, state, ctl, call = transport:server_stream(path, request_bytes,
        { timeout = timeout, metadata = metadata, compression = compression })
      local first = decoded(iter(state, ctl))
      local done = first == nil
      return function()
        if first ~= nil then
          local r = first
          first = nil
          return r
        end
        if done then return nil end
        local r = decoded(iter(state, ctl))
        if r == nil then done = true end
        return r
      end, call
    end
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
  -- compression=}}, pool=, cache_size=, clock=, sleep=, random=})
  -- Each method is a cached callable (pc.wrap_method) over the transport,
  -- with the service's defaults overridden per method:
  --   response = stub:Method(request [, {retry=, timeout=, metadata=, compression=}])
  --   for response in stub:StreamMethod(request [, opts]) do ... end
  -- `request` is a message of the input type or a plain table of it.
  --   local call = stub:ClientStreamOrBidiMethod([opts]); call:send(request) ...
  -- Raises on a missing transport, an unknown service, method or option,
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
    local per_method = opts.methods or {}
    for name, per in pairs(per_method) do
      if not info.methods[name] then
        error(format("pc.client: %s has no method '%s'", service_name, tostring(name)), 2)
      end
      if type(per) ~= "table" then
        error(format("pc.client: methods.%s: table expected, got %s", name, type(per)), 2)
      end
      for k in pairs(per) do
        if not POLICY_KEYS[k] then
          error(format("pc.client: methods.%s: unknown option '%s'", name, tostring(k)), 2)
        end
      end
      problem = options_problem(per)
      if problem then error(format("pc.client: methods.%s: %s", name, problem), 2) end
    end
    local stub = {}
    for _, m in ipairs(info.methods) do
      local input, full = m.input, m.full_name
      if m.client_streaming then
        stub[m.name] = streaming_method(transport, m, defaults_for(opts, per_method[m.name]))
      else
        local target = m.server_streaming and stream_target(transport, m) or unary_target(transport, m)
        local okw, callable = pcall(pc.wrap_method, target, defaults_for(opts, per_method[m.name]))
        if not okw then
          local msg = tostring(callable):gsub("^[^:\n]*:%d+: ", "", 1)
          msg = msg:match("^bad argument #2 to 'wrap_method' %((.*)%)$") or msg
          error(format("pc.client: %s: %s", full, msg), 2)
        end
        local name = m.name
        stub[name] = function(_, request, call_opts)
          -- A plain table goes straight to bytes (pc.encode(T, table): T{...}'s
          -- checks and errors, no message objects); anything else is checked
          -- as a message of the input type first.
          local okE, bytes
          if type(request) == "table" then
            okE, bytes = pcall(encode, input, request)
          else
            okE, bytes = pcall(encode, as_message(input, request, full .. " request", 2))
          end
          if not okE then
            error(full .. " request: " .. tostring(bytes):gsub("^[^:\n]*:%d+: ", "", 1), 2)
          end
          if call_opts == nil then return callable(bytes) end
          if type(call_opts) == "table" then
            local bad = options_problem(call_opts)
            if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
          end
          local ok, res = pcall(callable, bytes, call_opts)
          if ok then return res end
          -- the callable's misuse errors, at this caller's line and name
          local inner = type(res) == "string"
            and res:gsub("^[^:\n]*:%d+: ", "", 1):match("^bad argument #2 to 'callable' %((.*)%)$")
          if inner then error(format("bad argument #2 to '%s' (%s)", name, inner), 2) end
          error(res, 0)
        end
      end
    end
    return setmetatable(stub, { __index = function(_, k)
      error(format("%s has no method '%s'", service_name, tostring(k)), 2)
    end })
  end
end

return M
