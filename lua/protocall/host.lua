--- Host transports (protocall.h, doc/c-hosts.md): the Lua side of
-- protocall_pushtransport and protocall_pushhosttransport. The host's C
-- functions do the calls (core.host_unary, core.host_start / host_send /
-- host_close_send / host_recv / host_finish run them); this file gives them
-- the transport shape of service.lua (transport:unary / server_stream /
-- stream, the call object of pc.grpc's) and turns a status the host
-- returns into a pc.Error carrying its details, trailers and pushback.
local M = {}

local error, setmetatable, type = error, setmetatable, type

function M.install(pc, core)
  local Error = pc.Error
  local host_unary, host_start, host_send, host_close_send, host_recv, host_finish =
    core.host_unary, core.host_start, core.host_send, core.host_close_send, core.host_recv,
    core.host_finish

  -- The pc.Error of a failed status table (lpc_host.c push_status): code,
  -- message, details (bytes), metadata (the trailers), headers,
  -- retry_delay and no_retry (the pushback), method (the call's path).
  local function failure(st, path)
    return Error { code = st.code, message = st.message, details = st.details,
                   metadata = st.trailers, headers = st.headers, retry_delay = st.retry_delay,
                   no_retry = st.no_retry, method = path }
  end

  local function unimplemented(path)
    return Error { code = "UNIMPLEMENTED", ["local"] = true,
                   message = path .. ": this host transport is unary only (no 'start' function)" }
  end

  local HostCall = { __name = "protocall.HostCall" }
  HostCall.__index = HostCall

  -- Keeps the headers first reported and the latest trailers of `st`.
  local function note(self, st)
    if st.headers and not self.response_headers then self.response_headers = st.headers end
    if st.trailers then self.response_trailers = st.trailers end
  end

  -- Records the call's failure (the host finished with it) and raises it.
  local function fail(self, st)
    note(self, st)
    self.failed = failure(st, self.path)
    host_finish(self.box)
    error(self.failed, 0)
  end

  --- `call:send(bytes)`: one request message through the host's send.
  -- Raises the call's error once it has ended other than OK (CANCELLED after
  -- `cancel`), a string after `close_send` or the end of the call.
  function HostCall:send(bytes)
    if type(bytes) ~= "string" then
      error("bad argument #1 to 'send' (string expected, got " .. type(bytes) .. ")", 2)
    end
    if self.failed then error(self.failed, 0) end
    if self.send_closed then error("send: the sending side is closed (close_send)", 2) end
    if self.done then error("send: the call has ended", 2) end
    local ok, st = host_send(self.box, bytes)
    if not ok then fail(self, st) end
    note(self, st)
  end

  --- `call:close_send()`: no more request messages. Idempotent; a failure
  -- the host reports here is raised.
  function HostCall:close_send()
    if self.send_closed or self.failed or self.done then
      self.send_closed = true
      return
    end
    self.send_closed = true
    local ok, st = host_close_send(self.box)
    if not ok then fail(self, st) end
    note(self, st)
  end

  --- `call:recv()` -> the next response message (bytes), or nil after the
  -- last one once the call ended OK; raises the call's error otherwise.
  function HostCall:recv()
    if self.failed then error(self.failed, 0) end
    if self.done then return nil end
    local bytes, st = host_recv(self.box)
    if bytes == false then fail(self, st) end
    note(self, st)
    if bytes == nil then
      self.done = true
      host_finish(self.box)
    end
    return bytes
  end

  --- `call:close_and_recv()` -> the one response message of a
  -- client-streaming call; zero or two messages are INTERNAL.
  function HostCall:close_and_recv()
    self:close_send()
    local first = self:recv()
    local extra = 0
    if first ~= nil then
      while self:recv() ~= nil do extra = extra + 1 end
    end
    if first == nil or extra > 0 then
      error(Error { code = "INTERNAL", method = self.path,
                    message = first == nil and "call received no response message"
                      or ("call received " .. (extra + 1) .. " response messages") }, 0)
    end
    return first
  end

  --- `call:headers()` -> the response headers the host reported so far
  -- ({key, value} pairs; empty when none).
  function HostCall:headers() return self.response_headers or {} end

  --- `call:trailers()` -> the trailers ({key, value} pairs) the host
  -- reported, complete once the call has ended (read the responses first).
  function HostCall:trailers() return self.response_trailers or {} end

  --- `call:metadata()` -> {headers = pairs, trailers = pairs} (as pc.grpc's
  -- server-streaming call).
  function HostCall:metadata() return { headers = self:headers(), trailers = self:trailers() } end

  --- `call:cancel()`: ends the call CANCELLED: the host's finish is told to
  -- cancel it; later `recv` and `send` raise CANCELLED. Nothing once ended.
  function HostCall:cancel()
    if self.failed or self.done then return end
    self.failed = Error { code = "CANCELLED", message = self.path .. ": cancelled by the client",
                          ["local"] = true, method = self.path }
    host_finish(self.box)
  end

  --- `call:close()`: cancels the call if still running and releases it.
  function HostCall:close() host_finish(self.box) end
  HostCall.__close = HostCall.close

  local HostTransport = { __name = "protocall.HostTransport" }
  HostTransport.__index = HostTransport

  --- call = transport:stream(path, settings): a call of any shape through
  -- the host's start; raises the start's failure as a pc.Error, or
  -- UNIMPLEMENTED (local) when the host has no stream functions.
  function HostTransport:stream(path, settings)
    if not self.streams then error(unimplemented(path), 0) end
    local box, st = host_start(self.box, path, settings or {})
    if not box then error(failure(st, path), 0) end
    local call = setmetatable({ box = box, path = path }, HostCall)
    note(call, st)
    return call
  end

  --- bytes[, {headers=, trailers=}] = transport:unary(path, request_bytes,
  -- settings): one attempt through the host's unary function (or, without
  -- one, its stream functions); the metadata when `settings.with_metadata`.
  -- Raises pc.Error with the status the host returns, or what it raises.
  function HostTransport:unary(path, request, settings)
    settings = settings or {}
    local bytes, st
    if self.unary_fn then
      bytes, st = host_unary(self.box, path, request, settings)
      if not bytes then error(failure(st, path), 0) end
    else
      local call = self:stream(path, settings)
      local ok, got = pcall(function() -- the call is closed however this ends
        call:send(request)
        return call:close_and_recv()
      end)
      call:close()
      if not ok then error(got, 0) end
      bytes = got
      st = { headers = call.response_headers, trailers = call.response_trailers }
    end
    if settings.with_metadata then
      return bytes, { headers = st.headers or {}, trailers = st.trailers or {} }
    end
    return bytes
  end

  --- for bytes in transport:server_stream(path, request_bytes, settings) do
  -- ... end: each response through the host's recv, then nil at the end OK;
  -- a failure raises its pc.Error. The fourth value is the call (closing
  -- it, as a generic `for` left early does, cancels a running call).
  function HostTransport:server_stream(path, request, settings)
    local call = self:stream(path, settings)
    call:send(request)
    call:close_send()
    local function iterate() return call:recv() end
    return iterate, nil, nil, call
  end

  -- protocall_pushtransport / protocall_pushhosttransport call this with
  -- the C box and which functions the host gave.
  core.set_host_transport(function(box, has_unary, has_start)
    return setmetatable({ box = box, unary_fn = has_unary, streams = has_start }, HostTransport)
  end)
end

return M
