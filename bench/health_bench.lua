-- Idle health watchers (grpc.health.v1.Health/Watch) over pc.listen: the
-- server process's CPU over 5 s while N streams from a python3-grpcio
-- client (bench/grpc_py/health_watchers.py) on loopback wait for a change
-- that does not come (rpc/health.lua: a watcher waits for health:set, and
-- looks at its call once a second). The server is this file with --serve,
-- in its own process; CPU is utime + stime of /proc/PID/stat.
--
--   build/release/protocall bench/health_bench.lua [--quick]
--
-- --quick: 200 streams only (a check that everything works).
local pc = require "protocall"
local H = require "bench.harness"
local helper = require "spec.grpc_helper"

if arg[1] == "--serve" then
  local l = pc.listen(pc.server({}, { health = true }), "127.0.0.1:0", { max_concurrent_streams = 100000 })
  local f = io.open("/proc/self/stat")
  local pid, parent = f:read("a"):match("^(%d+) .*%) %S+ (%d+)")
  f:close()
  print(l.port .. " " .. pid)
  io.stdout:flush()
  -- The bench kills this server; should the bench itself die first, the
  -- server sees its parent change and exits (and after 600 s in any case).
  local started = pc.now()
  pc.spawn(function()
    while true do
      local g = io.open("/proc/self/stat")
      local now_parent = g:read("a"):match("^%d+ .*%) %S+ (%d+)")
      g:close()
      if now_parent ~= parent or pc.now() - started > 600 then os.exit(0) end
      pc.sleep(1)
    end
  end)
  pc.spawn(function() l:serve() end)
  pc.run()
  return
end

local quick = false
for _, a in ipairs(arg) do if a == "--quick" then quick = true end end
local COUNTS, SECONDS = { 2000, 10000 }, 5
if quick then COUNTS, SECONDS = { 200 }, 1 end
local BIN = arg[-1] or "build/release/protocall"

local rows = {}
for _, n in ipairs(COUNTS) do
  local server = helper.spawn_command(BIN .. " bench/health_bench.lua --serve", "protocall server")
  local out = os.tmpname()
  local client = io.popen("exec /usr/bin/python3 bench/grpc_py/health_watchers.py " .. server.port .. " " .. n
    .. " > " .. out .. " 2>&1", "w")
  local ok, err = pcall(function()
    local ready
    for _ = 1, 1200 do
      ready = H.read(out):match("^ready (%d+)")
      if ready then break end
      os.execute("sleep 0.1")
    end
    if not ready then error("health_watchers.py: " .. H.read(out), 0) end
    os.execute("sleep 1")
    local c0, t0 = H.proc_cpu(server.pid), helper.now()
    os.execute("sleep " .. SECONDS)
    local cpu, wall = H.proc_cpu(server.pid) - c0, helper.now() - t0
    rows[#rows + 1] = { name = n .. " idle Watch streams: server CPU", value = cpu / wall * 100, unit = "%" }
  end)
  client:close()
  os.remove(out)
  helper.stop(server)
  if not ok then error(err, 0) end
end
H.report(("idle health watchers over pc.listen, python3-grpcio client on loopback, server CPU over %d s; "
  .. "load average %s"):format(SECONDS, H.loadavg()), rows)
