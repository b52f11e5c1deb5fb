--- Test and benchmark helper: starts spec/grpc_server.py (run with Debian's
-- /usr/bin/python3) and stops it. Used by spec/grpc_spec.lua and
-- bench/grpc_bench.lua, both run from the repository root.
local M = {}

local PYTHON = "/usr/bin/python3"
local SERVER = "spec/grpc_server.py"

--- Wall-clock seconds (Lua's os.clock is processor time).
function M.now()
  local f = io.popen("date +%s.%N")
  local t = tonumber(f:read("*l"))
  f:close()
  return t
end

--- Starts `grpc_server.py MODE PORT ...` (PORT 0: a free one) and returns
-- {port=, pid=, url="http://127.0.0.1:PORT"}. The server exits when the
-- pipe held here closes, so it cannot outlive a failed spec.
function M.spawn(mode, port, ...)
  local out = os.tmpname()
  local args = table.concat({ mode, tostring(port or 0), ... }, " ")
  local pipe = io.popen("exec " .. PYTHON .. " " .. SERVER .. " " .. args .. " > " .. out
                        .. " 2>/dev/null", "w")
  for _ = 1, 200 do
    local f = io.open(out)
    local line = f and f:read("*l")
    if f then f:close() end
    if line then
      os.remove(out)
      local p, pid = line:match("^(%d+) (%d+)$")
      return { port = tonumber(p), pid = pid, pipe = pipe, url = "http://127.0.0.1:" .. p }
    end
    os.execute("sleep 0.05")
  end
  pipe:close()
  os.remove(out)
  error("grpc_server.py " .. mode .. " did not start")
end

--- Kills a server from M.spawn (SIGKILL: no goodbye on its connections).
function M.stop(server)
  if server and server.pipe then
    os.execute("kill -9 " .. server.pid .. " 2>/dev/null")
    server.pipe:close()
    server.pipe = nil
  end
end

return M
