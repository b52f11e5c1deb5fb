--- Services (API.md "Services"): pc.server, pc.inproc and pc.client.
--
-- A transport moves bytes, one operation per call shape:
--   transport:unary(path, request_bytes, settings) -> response_bytes
--   transport:server_stream(path, request_bytes, settings) -> iterator of bytes
-- with settings = {timeout = seconds | nil, metadata = {{key, value}, ...},
-- compression = "gzip" | nil}, failing by raising pc.Error. pc.grpc (grpc.lua)
-- is the network one; pc.inproc below runs a pc.server in the same Lua state,
-- through encode and decode as a network would. pc.client builds a stub whose
-- methods are cached callables (policy.lua) around a transport.
local M = {}

local type, error, pairs, ipairs, pcall, getmetatable, setmetatable, tostring =
  type, error, pairs, ipairs, pcall, getmetatable, setmetatable, tostring
local format = string.format

function M.install(pc, core)
  local Error, encode, decode, type_of, is_message = pc.Error, pc.encode, pc.decode, pc.type_of, core.is_message
  local now = core.monotonic

  local function status(code, message, extra)
    local t = extra or {}
    t.code, t.message = code, message
    return Error(t)
  end

  -- The request as a message of `T`: a message of that type as is, a plain
  -- table converted (raising the constructor's error on a bad field).
  local function as_message(T, value, what, level)
    if is_message(value) then
      if type_of(value) ~= T then
        error(format("%s: %s expected, got %s", what, T.full_name, type_of(value).full_name), level + 1)
      end
      return value
    end
    if type(value) ~= "table" then
      error(format("%s: %s or a table expected, got %s", what, T.full_name, type(value)), level + 1)
    end
    return T(value)
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

  -- Runs the handler of `path` on request bytes; returns the response
  -- message (unary) or the list of response messages (streaming), or
  -- raises pc.Error. Only a streaming call's context gets `send`.
  local function serve(server, path, request, settings, streaming)
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
    local sent
    if streaming then
      sent = {}
      function ctx.send(response)
        sent[#sent + 1] = as_message(info.output, response, info.full_name .. " response", 2)
      end
    end
    local ok, result = pcall(entry.handler, req, ctx)
    if not ok then
      if getmetatable(result) == Error then error(result, 0) end
      error(status("UNKNOWN", info.full_name .. ": " .. tostring(result), { value = result }), 0)
    end
    if ctx.deadline and now() > ctx.deadline then
      error(status("DEADLINE_EXCEEDED", info.full_name .. ": deadline exceeded"), 0)
    end
    if streaming then
      if result ~= nil then
        if type(result) ~= "table" or is_message(result) then
          error(status("INTERNAL", info.full_name .. ": handler must return a list of responses or nil"), 0)
        end
        for _, r in ipairs(result) do ctx.send(r) end
      end
      return sent
    end
    if result == nil then
      error(status("INTERNAL", info.full_name .. ": handler returned no response"), 0)
    end
    if is_message(result) and type_of(result) == info.output then return result end
    local okc, resp = pcall(as_message, info.output, result, info.full_name .. " response", 1)
    if not okc then error(status("INTERNAL", tostring(resp)), 0) end
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

  --- bytes = inproc:unary(path, request_bytes, settings)
  function Inproc:unary(path, request, settings)
    return encode(serve(self.server, path, request, settings, false))
  end

  --- for bytes in inproc:server_stream(path, request_bytes, settings) do ... end
  -- The handler runs to completion first; its responses then come one by one.
  function Inproc:server_stream(path, request, settings)
    local list = serve(self.server, path, request, settings, true)
    local i = 0
    return function()
      i = i + 1
      local r = list[i]
      return r and encode(r)
    end
  end

  ---------------------------------------------------------------------------
  -- Clients

  local POLICY_KEYS = { retry = true, timeout = true, compression = true, metadata = true }
  local CLIENT_KEYS = { transport = true, pool = true, methods = true, cache_size = true,
                        clock = true, sleep = true, random = true }
  for k in pairs(POLICY_KEYS) do CLIENT_KEYS[k] = true end

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

  --- stub = pc.client(service_full_name, {transport=, retry=, timeout=,
  -- metadata=, compression=, methods = {Name = {retry=, timeout=, metadata=,
  -- compression=}}, pool=, cache_size=, clock=, sleep=, random=})
  -- Each method is a cached callable (pc.wrap_method) over the transport,
  -- with the service's defaults overridden per method:
  --   response = stub:Method(request [, {retry=, timeout=, metadata=, compression=}])
  --   for response in stub:StreamMethod(request [, opts]) do ... end
  -- `request` is a message of the input type or a plain table of it.
  -- Client-streaming and bidirectional methods raise "not supported yet".
  -- Raises on a missing transport, an unknown service, method or option.
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
    local per_method = opts.methods or {}
    for name in pairs(per_method) do
      if not info.methods[name] then
        error(format("pc.client: %s has no method '%s'", service_name, tostring(name)), 2)
      end
    end
    local stub = {}
    for _, m in ipairs(info.methods) do
      local input, full = m.input, m.full_name
      if m.client_streaming then
        stub[m.name] = function()
          error(full .. ": client-streaming and bidirectional calls are not supported yet", 2)
        end
      else
        local target = m.server_streaming and stream_target(transport, m) or unary_target(transport, m)
        local callable = pc.wrap_method(target, defaults_for(opts, per_method[m.name]))
        stub[m.name] = function(_, request, call_opts)
          local bytes = encode(as_message(input, request, full .. " request", 2))
          if call_opts == nil then return callable(bytes) end
          return callable(bytes, call_opts)
        end
      end
    end
    return stub
  end
end

return M
