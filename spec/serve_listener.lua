-- The end of a spec's server script (spec/gateway_library.lua,
-- spec/httpbody_server.lua): prints "PORT PID" (PID from env PC_PID) for
-- grpc_helper.spawn_command, then serves `listener` until the process is
-- killed or PC_SERVER_LIFETIME seconds (120 unless set) have passed.
local pc = require "protocall"

return function(listener)
  io.stdout:write(listener.port, " ", os.getenv("PC_PID") or "", "\n")
  io.stdout:flush()
  pc.spawn(function()
    pc.sleep(tonumber(os.getenv("PC_SERVER_LIFETIME") or "120"))
    os.exit(0)
  end)
  pc.spawn(function() listener:serve() end)
  pc.run()
end
