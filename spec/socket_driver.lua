--- A host I/O driver for pc.grpc's `driver` option, written in Lua on
-- Debian's lua-socket (LuaSocket): non-blocking sockets (settimeout(0))
-- that yield through pc.sleep between tries, so other pc.spawn tasks run
-- while one waits, as an OpenResty cosocket yields to nginx. Used by
-- spec/driver_spec.lua; `M.new(pc, hooks)` makes a driver whose sockets
-- call `hooks.METHOD(sock, ...)` first (when given): a hook returning
-- values answers instead of the socket (fault injection), and
-- `M.counts` counts the calls of each method.
local socket = require "socket"

local M = {}

local TRY = 0.001 -- seconds between tries

function M.new(pc, hooks)
  hooks = hooks or {}
  local counts = { connect = 0, send = 0, receiveany = 0, settimeouts = 0, close = 0, yields = 0 }
  local D = { counts = counts }

  local function pause()
    counts.yields = counts.yields + 1
    pc.sleep(TRY)
  end

  local function hooked(name, sock, ...)
    counts[name] = (counts[name] or 0) + 1
    local h = hooks[name]
    if h then return true, h(sock, ...) end
    return false
  end

  local Sock = {}
  Sock.__index = Sock

  function Sock:settimeouts(connect, send, read)
    local h, a, b = hooked("settimeouts", self, connect, send, read)
    if h then return a, b end
    self.send_timeout, self.read_timeout = send, read
    return true
  end

  function Sock:send(bytes)
    local h, a, b = hooked("send", self, bytes)
    if h and (a ~= nil or b ~= nil) then return a, b end
    local i, t0 = 1, socket.gettime()
    while i <= #bytes do
      local n, err, last = self.tcp:send(bytes, i)
      if n then
        i = n + 1
      elseif err == "timeout" then
        i = last + 1
        if socket.gettime() - t0 > self.send_timeout then return nil, "timeout" end
        pause()
      else
        return nil, err
      end
    end
    return #bytes
  end

  function Sock:receiveany(max)
    local h, a, b = hooked("receiveany", self, max)
    if h and (a ~= nil or b ~= nil) then return a, b end
    local t0 = socket.gettime()
    while true do
      local data, err, part = self.tcp:receive(max)
      if data then return data end
      if part and #part > 0 then return part end
      if err ~= "timeout" then return nil, err end
      if socket.gettime() - t0 >= self.read_timeout then return nil, "timeout" end
      pause()
    end
  end

  function Sock:close()
    local h = hooked("close", self)
    if h then return true end
    self.tcp:close()
    return true
  end

  --- `D.connect(host, port, opts)` -> socket, or nil and why. Waits at
  -- most `opts.timeout` seconds, yielding.
  function D.connect(host, port, opts)
    local h, a, b = hooked("connect", nil, host, port, opts)
    if h and (a ~= nil or b ~= nil) then return a, b end
    local tcp = socket.tcp()
    tcp:settimeout(0)
    local ok, err = tcp:connect(host, port)
    if not ok and err ~= "timeout" then
      tcp:close()
      return nil, err
    end
    local t0 = socket.gettime()
    while not ok do
      local _, writable = socket.select(nil, { tcp }, 0)
      if writable[1] then
        ok, err = tcp:connect(host, port) -- reports the outcome
        if err == "already connected" then ok = true end
        if not ok then
          tcp:close()
          return nil, err
        end
      elseif socket.gettime() - t0 >= opts.timeout then
        tcp:close()
        return nil, "timeout"
      else
        pause()
      end
    end
    tcp:setoption("tcp-nodelay", true) -- HTTP/2 frames go out at once (no Nagle delay)
    return setmetatable({ tcp = tcp, send_timeout = 60, read_timeout = 1 }, Sock)
  end

  return D
end

return M
