-- A unary call's latency while half-open calls are held against the same
-- pc.listen server, and what a round of the server's scheduler costs
-- (lua/protocall/sched.lua resumes a task when its own call moves, so a
-- round follows the work that is ready, not the tasks that wait). Three
-- processes: the server (this file with --serve); a holder (--hold PORT
-- N) whose N client-streaming calls each send their headers and no
-- message, 100 per connection (the server's default
-- max_concurrent_streams), so N handler tasks wait in ctx:recv(); and
-- this one, which makes unary calls one at a time for a few seconds. For
-- each count held: the median and 90th percentile latency, the server
-- process's CPU (utime + stime of /proc/PID/stat) per call, and from the
-- server's sched.stats() its rounds per call, task resumptions per round
-- and CPU per round ("-" for a build without sched.stats).
--
--   build/release/protocall bench/sched_bench.lua [--quick] [--held 0,3000,30000]
--
-- --quick: one second of calls per count, 0, 300 and 3,000 held (a check
-- that everything works).
local pc = require "protocall"
local H = require "bench.harness"
local helper = require "spec.grpc_helper"

local pool = pc.pool()
assert(pool:load([[
syntax = "proto3";
package schedbench;
message Msg { bytes data = 1; }
message Tally { int64 held = 1; int64 rounds = 2; int64 resumes = 3; }
service S {
  rpc Echo(Msg) returns (Msg);
  rpc Hold(stream Msg) returns (Msg);
  rpc Counts(Msg) returns (Tally);
}
]], { name = "schedbench.proto" }))
local Msg, Tally = pool:type("schedbench.Msg"), pool:type("schedbench.Tally")

local ids = H.ids

-- A task that ends this process once its parent (the bench) is gone, or
-- after 900 s: the bench kills its children, but may die first.
local function watch_parent()
  local _, parent = ids()
  local started = pc.now()
  pc.spawn(function()
    while select(2, ids()) == parent and pc.now() - started < 900 do pc.sleep(0.5) end
    os.exit(0)
  end)
end

if arg[1] == "--serve" then
  local held = 0
  local stats = require("protocall.sched").stats -- nil on a build without it
  local l = pc.listen(pc.server({ ["schedbench.S"] = {
    Echo = function(m) return m end,
    Hold = function(ctx)
      held = held + 1
      pcall(function() while ctx:recv() do end end)
      held = held - 1
      return {}
    end,
    Counts = function()
      local s = stats and stats() or {}
      return { held = held, rounds = s.rounds or -1, resumes = s.resumes or -1 }
    end,
  } }, { pool = pool }), "127.0.0.1:0", { max_connections = 5000 })
  print(l.port .. " " .. select(1, ids()))
  io.stdout:flush()
  watch_parent()
  pc.spawn(function() l:serve() end)
  pc.run()
  return
end

if arg[1] == "--hold" then
  local port, n = arg[2], tonumber(arg[3])
  local transports, calls, firsts = {}, {}, {}
  for i = 1, n do
    local k = math.floor((i - 1) / 100) + 1
    if not transports[k] then
      transports[k] = pc.grpc("http://127.0.0.1:" .. port)
      firsts[k] = nil
    end
    calls[i] = transports[k]:stream("/schedbench.S/Hold")
    firsts[k] = firsts[k] or calls[i]
  end
  print(n .. " " .. select(1, ids()))
  io.stdout:flush()
  watch_parent()
  -- keeps every connection served (its SETTINGS, PING and WINDOW_UPDATE)
  pc.spawn(function() while true do transports[1]:wait(firsts, 1) end end)
  pc.run()
  return
end

local quick, held_counts = false, { 0, 3000, 30000 }
for i, a in ipairs(arg) do
  if a == "--quick" then
    quick = true
    held_counts = { 0, 300, 3000 }
  elseif a == "--held" then
    held_counts = {}
    for c in arg[i + 1]:gmatch("%d+") do held_counts[#held_counts + 1] = tonumber(c) end
  end
end
local SECONDS, MAX_CALLS = quick and 1 or 4, 20000

local BIN = arg[-1] or "build/release/protocall"
local server, holder
local ok, err = pcall(function()
  server = helper.spawn_command(BIN .. " bench/sched_bench.lua --serve", "protocall server")
  local t = pc.grpc(server.url)
  local echo = pc.encode(Msg { data = string.rep("x", 10) })
  local function counts() return pc.decode(Tally, t:unary("/schedbench.S/Counts", echo)) end
  local function wait_held(n, what)
    local limit = pc.now() + 600
    while counts().held ~= n do
      if pc.now() > limit then error("the server holds " .. counts().held .. " calls, not " .. n .. " " .. what) end
      pc.sleep(0.2)
    end
  end
  local columns, figures = {}, {}
  for c, n in ipairs(held_counts) do
    columns[c] = n .. " held"
    if n > 0 then
      holder = helper.spawn_command(BIN .. " bench/sched_bench.lua --hold " .. server.port .. " " .. n, "holder")
      wait_held(n, "after the holder started")
    end
    for _ = 1, 20 do t:unary("/schedbench.S/Echo", echo) end -- warm
    local cpu0, k0 = H.proc_cpu(server.pid), counts()
    local lat, start = {}, pc.now()
    while #lat < MAX_CALLS and (pc.now() - start < SECONDS or #lat < 20) do
      local t0 = pc.now()
      t:unary("/schedbench.S/Echo", echo)
      lat[#lat + 1] = pc.now() - t0
    end
    local cpu = H.proc_cpu(server.pid) - cpu0
    local k1 = counts()
    table.sort(lat)
    local calls = #lat
    local rounds, resumes = k1.rounds - k0.rounds, k1.resumes - k0.resumes
    local known = k0.rounds >= 0
    figures[c] = {
      median = lat[math.ceil(calls / 2)] * 1e3, p90 = lat[math.ceil(calls * 0.9)] * 1e3,
      cpu_call = cpu / calls * 1e3,
      rounds = known and rounds / calls or nil,
      per_round = known and resumes / rounds or nil,
      cpu_round = known and cpu / rounds * 1e6 or nil,
      calls = calls,
    }
    if holder then
      helper.stop(holder)
      holder = nil
      wait_held(0, "after the holder ended")
    end
  end
  local function row(name, key)
    local values = {}
    for c = 1, #held_counts do values[c] = figures[c][key] end
    return { name = name, values = values }
  end
  H.table(("unary calls one at a time for %g s against pc.listen while N half-open calls are held "
           .. "(100 per connection); load average %s"):format(SECONDS, H.loadavg()), columns, {
    row("latency median, ms", "median"), row("latency 90th percentile, ms", "p90"),
    row("server CPU per call, ms", "cpu_call"), row("server rounds per call", "rounds"),
    row("server task resumptions per round", "per_round"), row("server CPU per round, us", "cpu_round"),
    row("calls made", "calls"),
  })
end)
helper.stop(holder)
helper.stop(server)
if not ok then error(err, 0) end
