--- Host transports (protocall.h, README "C hosts"): the Lua side of
-- protocall_pushtransport. A host's C function does one unary call
-- (core.host_unary runs it); this file gives it the transport shape of
-- service.lua (transport:unary / transport:server_stream) and turns a
-- status the host returns into a pc.Error.
local M = {}

local error, setmetatable = error, setmetatable

function M.install(pc, core)
  local Error, host_unary = pc.Error, core.host_unary

  local HostTransport = { __name = "protocall.HostTransport" }
  HostTransport.__index = HostTransport

  --- bytes = transport:unary(path, request_bytes, settings): one attempt
  -- through the host's function; raises pc.Error{code=, message=} with the
  -- status it returns, or what it raises.
  function HostTransport:unary(path, request, settings)
    local bytes, code, message = host_unary(self[1], path, request, settings)
    if bytes then return bytes end
    error(Error { code = code, message = message }, 0)
  end

  --- transport:server_stream(path): host transports are unary only; fails
  -- with UNIMPLEMENTED (local: retrying cannot help).
  function HostTransport:server_stream(path)
    error(Error { code = "UNIMPLEMENTED", message = path .. ": a host transport is unary only",
                  ["local"] = true }, 0)
  end

  -- protocall_pushtransport calls this with the C box.
  core.set_host_transport(function(box) return setmetatable({ box }, HostTransport) end)
end

return M
