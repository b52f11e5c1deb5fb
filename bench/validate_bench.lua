-- Validation speed: pc.validate of a valid message with 20 standard rules
-- and 3 custom CEL rules (bench/validate/bench.proto) against
-- @bufbuild/protovalidate's validate of the same message in Node.js
-- (bench/validate/es_bench.mjs), per message, in one run; and the cost of
-- `validate = true` on a unary call with that message as the request:
-- served in process (pc.inproc, the client's stub call, against the same
-- server without the option), and served over loopback h2c by a protocall
-- server in its own process (this file with --serve [validate]), driven by
-- a pc.grpc client from this one: the server process's CPU per call
-- (utime + stime of /proc/PID/stat; the least of 5 alternating runs).
-- With --callgrind, also the server's instructions per call (steadier on a
-- loaded machine): the server under callgrind serves N calls of a client
-- it starts (--drive) and exits; runs of 1,000 and 4,000 calls subtracted.
--   build/release/protocall bench/validate_bench.lua [--quick] [--callgrind]
local H = require "bench.harness"
local pc = require "protocall"

local quick, callgrind = false, false
for _, a in ipairs(arg or {}) do
  if a == "--quick" then quick = true elseif a == "--callgrind" then callgrind = true end
end
local BIN = arg[-1] or "build/release/protocall"

local pool = pc.pool()
assert(pool:load_file("bench/validate/bench.proto", { name = "validate/bench.proto" }))
assert(pool:load([[syntax = "proto3"; package vbench; import "validate/bench.proto";
  service Users { rpc Put (User) returns (User); }]], { name = "validate/svc.proto" }))
local handlers = { ["vbench.Users"] = { Put = function(req) return req end } }

if arg[1] == "--serve" then -- the server of the loopback figure, with validate = true or not
  H.serve(pc.listen(pc.server(handlers, { pool = pool, validate = arg[2] == "validate" }), "127.0.0.1:0"))
  return
end

local User = pool:type("vbench.User")
local JSON = [[{"id": "3b241101-e2bb-4255-8caf-4136c566a962", "email": "ann@example.com", "name": "Ann",
  "age": 30, "website": "https://example.com/ann", "ip": "192.168.1.20", "host": "api.example.com",
  "tags": ["admin", "ops", "eu"], "labels": {"team": "core", "tier": "1"}, "balance": "120", "score": 0.7,
  "country": "FR", "address": {"street": "1 rue de la Paix", "city": "Paris", "zip": "75002"},
  "phone": "+33100000000", "nick": "ann"}]]
local msg = assert(pc.from_json(User, JSON))
assert(#pc.validate(msg) == 0, "the benchmark message must be valid")

if arg[1] == "--drive" then -- --drive PORT N: the client of a --serve-count server
  local stub = pc.client("vbench.Users", { transport = pc.grpc("http://127.0.0.1:" .. arg[2]), pool = pool })
  for _ = 1, tonumber(arg[3]) do stub:Put(msg) end
  return
end

if arg[1] == "--serve-count" then -- --serve-count plain|validate N: serves N calls of a --drive client, exits
  local n, count = 0, tonumber(arg[3])
  local counted = { ["vbench.Users"] = { Put = function(req)
    n = n + 1
    if n == count then pc.spawn(function() pc.sleep(0.05) os.exit(0) end) end -- the response goes first
    return req
  end } }
  local l = pc.listen(pc.server(counted, { pool = pool, validate = arg[2] == "validate" }), "127.0.0.1:0")
  local driver = io.popen(BIN .. " bench/validate_bench.lua --drive " .. l.port .. " " .. count)
  pc.spawn(function() pc.sleep(300) os.exit(1) end) -- a client that failed: give up
  pc.spawn(function() l:serve() end)
  pc.run()
  driver:close()
  return
end

local validate = pc.validate
local ours = H.measure(function(n) for _ = 1, n do validate(msg) end end, quick)

local theirs
local set = os.tmpname()
local ok = os.execute("protoc --include_imports -I core/schema/protos -I bench -o " .. set
  .. " validate/bench.proto 2>/dev/null")
if ok and io.open("node_modules/@bufbuild/protovalidate/package.json") then
  local p = io.popen("node bench/validate/es_bench.mjs " .. set .. " vbench.User '" .. JSON:gsub("\n", " ") .. "'")
  theirs = tonumber(p:read("*a"))
  p:close()
end
os.remove(set)

-- validate = true on a unary call: the same call with and without it.
local plain = pc.client("vbench.Users", { transport = pc.inproc(pc.server(handlers, { pool = pool })), pool = pool })
local checked = pc.client("vbench.Users",
  { transport = pc.inproc(pc.server(handlers, { pool = pool, validate = true })), pool = pool })
local a, b = H.measure_pair(function(n) for _ = 1, n do plain:Put(msg) end end,
  function(n) for _ = 1, n do checked:Put(msg) end end, quick)

-- Over loopback: server CPU per call, with and without validate = true.
local helper = require "spec.grpc_helper"
local servers, net = {}, { math.huge, math.huge }
local CALLS, RUNS = quick and 2000 or 20000, quick and 1 or 5
local nok, nerr = pcall(function()
  servers[1] = helper.spawn_command(BIN .. " bench/validate_bench.lua --serve", "plain server")
  servers[2] = helper.spawn_command(BIN .. " bench/validate_bench.lua --serve validate", "validating server")
  local stubs = {}
  for i, server in ipairs(servers) do
    stubs[i] = pc.client("vbench.Users", { transport = pc.grpc(server.url), pool = pool })
    for _ = 1, 200 do stubs[i]:Put(msg) end -- warm: connection, plans
  end
  for _ = 1, RUNS do
    for i, server in ipairs(servers) do
      local c0 = H.proc_cpu(server.pid)
      for _ = 1, CALLS do stubs[i]:Put(msg) end
      net[i] = math.min(net[i], (H.proc_cpu(server.pid) - c0) / CALLS * 1e9)
    end
  end
end)
for _, server in ipairs(servers) do helper.stop(server) end
if not nok then error(nerr, 0) end

-- Server instructions per call under callgrind (--callgrind).
local instr = {}
if callgrind then
  for i, mode in ipairs { "plain", "validate" } do
    local function total(n)
      return H.callgrind(BIN .. " bench/validate_bench.lua --serve-count " .. mode .. " " .. n)
    end
    local t1, t2 = total(1000), total(4000)
    instr[i] = t1 and t2 and (t2 - t1) / 3000
  end
end

local rows = {
  { name = "pc.validate", value = ours, unit = "ns/msg" },
  { name = "protovalidate-es validate (node)", value = theirs, unit = "ns/msg" },
  { name = "protovalidate-es / protocall", value = theirs and theirs / ours, unit = "x", goal = ">= 5x",
    ok = theirs and theirs / ours >= 5 },
  { name = "unary call in process", value = a, unit = "ns/call" },
  { name = "unary call in process, validate = true", value = b, unit = "ns/call" },
  { name = "validate = true, extra per call in process", value = (b - a) / a * 100, unit = "%" },
  { name = "server CPU per unary call over loopback h2c", value = net[1], unit = "ns/call" },
  { name = "the same, validate = true", value = net[2], unit = "ns/call" },
  { name = "validate = true, extra server CPU per call", value = (net[2] - net[1]) / net[1] * 100, unit = "%",
    goal = "<= 10 %", ok = (net[2] - net[1]) / net[1] <= 0.10 },
}
if instr[1] and instr[2] then
  rows[#rows + 1] = { name = "server instructions per unary call (callgrind)", value = instr[1], unit = "instr" }
  rows[#rows + 1] = { name = "the same, validate = true", value = instr[2], unit = "instr" }
  rows[#rows + 1] = { name = "validate = true, extra server instructions", unit = "%", goal = "<= 10 %",
    value = (instr[2] - instr[1]) / instr[1] * 100, ok = (instr[2] - instr[1]) / instr[1] <= 0.10 }
end
H.report("pc.validate against protovalidate-es (one valid message, 20 standard + 3 CEL rules)", rows)
