-- What checking a call's settings costs a several-backend transport
-- (transport/balancer.lua): instructions per unary call of the client
-- process (callgrind, (I(400 calls) - I(200 calls)) / 200; two servers of
-- this script in their own processes) through a one-address pc.grpc and
-- through pc.grpc({addr1, addr2}), each with a plain settings table
-- ({timeout =, metadata =}: checked by the transport) and with one
-- protocall's attempts make (internal.CHECKED: taken as it is). The
-- difference plain - CHECKED is what the checks of a call cost.
--
-- Run: build/release/protocall bench/balancer_check_bench.lua
-- (`--quick`: 20 calls per mode without valgrind, a check that it works).
local pc = require "protocall"
local H = require "bench.harness"
local helper = require "spec.grpc_helper"
local internal = require "protocall.internal"

local SCRIPT = arg and arg[0] or "bench/balancer_check_bench.lua"
local PROTO = 'syntax = "proto3"; package e; message M { bytes b = 1; } service E { rpc Echo(M) returns (M); }'

if arg[1] == "--serve" then -- a server: prints "PORT PID", serves until killed
  pc.load(PROTO, { name = "e.proto" })
  local l = pc.listen(pc.server { ["e.E"] = { Echo = function(m) return m end } }, "127.0.0.1:0")
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("*l"):match("^(%d+)")
  f:close()
  io.write(l.port, " ", pid, "\n")
  io.stdout:flush()
  pc.spawn(function() l:serve() end)
  pc.run()
  return
end

-- The client: `--child MODE N PORT1 PORT2`, MODE single | bal, with
-- "_checked" for CHECKED settings.
local function client(mode, n, p1, p2)
  local checked = mode:find("_checked$")
  local function settings()
    local s = { timeout = 5, metadata = { { "x-k", "v" } } }
    if checked then setmetatable(s, internal.CHECKED) end
    return s
  end
  local t = mode:find("^single") and pc.grpc("127.0.0.1:" .. p1)
    or pc.grpc({ "127.0.0.1:" .. p1, "127.0.0.1:" .. p2 }, { load_balancing = "round_robin" })
  local req = "\10\5hello"
  for _ = 1, 20 + n do assert(t:unary("/e.E/Echo", req, settings()) == req) end
  t:close()
end

if arg[1] == "--child" then
  client(arg[2], tonumber(arg[3]), arg[4], arg[5])
  return
end

local quick = arg[1] == "--quick"
local cmd = (arg[-1] or "protocall") .. " " .. SCRIPT
local s1 = helper.spawn_command(cmd .. " --serve", "server 1")
local s2 = helper.spawn_command(cmd .. " --serve", "server 2")
local per = {}
local ok, err = pcall(function()
  for _, mode in ipairs { "single", "single_checked", "bal", "bal_checked" } do
    if quick then
      client(mode, 20, s1.port, s2.port)
    else
      local function total(n)
        return assert(H.callgrind(("%s --child %s %d %d %d"):format(cmd, mode, n, s1.port, s2.port)))
      end
      per[mode] = (total(400) - total(200)) / 200
      print(("%-16s %9.0f instructions per unary call"):format(mode, per[mode]))
    end
  end
end)
helper.stop(s1)
helper.stop(s2)
if not ok then error(err, 0) end
if not quick then
  print(("checks of a call: one address %.0f, two addresses %.0f instructions (%.1f%% of a balanced call)")
    :format(per.single - per.single_checked, per.bal - per.bal_checked,
      100 * (per.bal - per.bal_checked) / per.bal))
end
