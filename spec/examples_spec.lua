-- The examples run green: the quickstart in process and against a real gRPC
-- server (examples/route_server.py on Debian's python3-grpcio), the
-- interceptors, the fleet (health checks, outlier detection, xds:///). They run
-- through the `protocall`
-- command of the build under test ($PROTOCALL_BIN, set by .ci/busted).
local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"

local R = require "runtime"

local function run(cmd)
  local out, ok, code = R.capture(cmd .. " 2>&1")
  return out, ok and 0 or code
end

-- Starts server `command` as a shell's `&` does (standard input
-- /dev/null) and waits for its first line "demo.Router listening on URL";
-- returns URL (nil when it never came) and stop(), which sends SIGTERM and
-- returns whether the server has exited within 5 s.
local function background(command)
  local out_file, pid_file = os.tmpname(), os.tmpname()
  -- exec keeps the shell's pid, so the pid file names the server.
  assert(os.execute("sh -c 'echo $$ > " .. pid_file .. "; exec " .. command .. "' < /dev/null > "
    .. out_file .. " 2>&1 &"))
  local url
  for _ = 1, 200 do
    local f = io.open(out_file)
    local line = f and f:read("*l")
    if f then f:close() end
    url = line and line:match("^demo%.Router listening on (http://127%.0%.0%.1:%d+)$")
    if url then break end
    os.execute("sleep 0.05")
  end
  local f = io.open(pid_file)
  local pid = f and f:read("*l")
  if f then f:close() end
  os.remove(pid_file)
  local function alive() return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true end
  return url, function()
    os.remove(out_file)
    if not (pid and pid:match("^%d+$")) then return false end
    os.execute("kill " .. pid .. " 2>/dev/null")
    for _ = 1, 100 do
      if not alive() then return true end
      os.execute("sleep 0.05")
    end
    os.execute("kill -9 " .. pid .. " 2>/dev/null")
    return false
  end
end

describe("examples/interceptors.lua", function()
  it("runs auth, logging, metrics and a circuit breaker around calls", function()
    local out, code = run(BIN .. " examples/interceptors.lua")
    assert.are.equal(0, code, out)
    assert.are.equal(2, select(2, out:gsub("demo%.Router%.Measure %-> OK after 1 attempt%(s%)", "")), out)
    assert.are.equal(2, select(2, out:gsub("demo%.Router%.Measure %-> UNAVAILABLE after 3 attempt%(s%)", "")), out)
    assert.matches("demo.Router.Measure -> UNAVAILABLE after 0 attempt(s)\nMeasure: UNAVAILABLE: circuit open",
      out, 1, true)
    assert.matches("Measure after the cooldown: legs = 1", out, 1, true)
    assert.matches("count Measure OK = 2\ncount Measure UNAVAILABLE = 3", out, 1, true)
  end)
end)

describe("examples/fleet.lua", function()
  it("balances over health-checked backends with outlier detection, then over an xds:/// name", function()
    local out, code = run(BIN .. " examples/fleet.lua")
    assert.are.equal(0, code, out)
    local first = out:match("static list, first 8 calls: ([^\n]*)")
    assert.is_not_nil(first, out)
    assert.is_nil(first:find("draining"), out) -- NOT_SERVING: never picked
    assert.matches("after a sweep: next 6 calls: steady 6\n", out, 1, true)
    assert.matches("flaky health SERVING ejected true\n", out, 1, true)
    assert.matches("draining health NOT_SERVING ejected false\n", out, 1, true)
    assert.matches("flaky back after the ejection time: true\n", out, 1, true)
    local blue, green = out:match("xds:///fleet, 400 calls: blue (%d+), green (%d+) ")
    assert.is_not_nil(blue, out)
    -- 300 / 100 within 40 calls (4.6 standard deviations of a binomial draw; spec/xds_spec.lua
    -- checks the split to 5 % over 2,000 calls)
    assert.is_true(math.abs(tonumber(blue) - 300) <= 40 and tonumber(blue) + tonumber(green) == 400, out)
    assert.matches("after the EDS update: green's calls reach draining: true\n", out, 1, true)
    assert.matches("cluster green endpoint draining from EDS version 2\n", out, 1, true)
    assert.matches("versions: LDS 1, CDS 1, EDS 2\n", out, 1, true)
  end)
end)

describe("examples/quickstart.lua", function()
  it("runs in process: loads the schema, encodes, retries a flaky handler, streams", function()
    local out, code = run(BIN .. " examples/quickstart.lua")
    assert.are.equal(0, code, out)
    assert.matches("loaded route.proto", out, 1, true)
    assert.matches("demo.Point.x: integer expected, got string", out, 1, true)
    assert.matches("encoded: 36 bytes: 0a08747269616e676c65", out, 1, true)
    assert.matches("server: attempt 3", out, 1, true)
    assert.are.equal(2, select(2, out:gsub("client: retrying after UNAVAILABLE: flaky server", "")))
    assert.matches("Measure -> demo.Distance{length=9.0, legs=2}", out, 1, true)
    assert.matches("Walk -> (0,0) (3,4) (3,0)", out, 1, true)
  end)

  it("calls a real gRPC server with --target, started with & (it serves until a signal)", function()
    local url, stop = background("/usr/bin/python3 examples/route_server.py 0")
    local out, code = "", -1
    if url then
      os.execute("sleep 0.3") -- its standard input is at end of file already: it must not care
      out, code = run(BIN .. " examples/quickstart.lua --target " .. url)
    end
    local stopped = stop()
    assert.is_not_nil(url, "examples/route_server.py did not start")
    assert.are.equal(0, code, out)
    assert.matches("calling demo.Router at " .. url, out, 1, true)
    assert.matches("client: retrying after UNAVAILABLE: flaky server", out, 1, true)
    assert.matches("Measure -> demo.Distance{length=9.0, legs=2}", out, 1, true)
    assert.matches("Walk -> (0,0) (3,4) (3,0)", out, 1, true)
    assert.is_true(stopped, "SIGTERM did not stop examples/route_server.py")
  end)

  it("runs with --target against examples/route_server.lua (pc.listen) as against the Python one", function()
    local url, stop = background(BIN .. " examples/route_server.lua 0")
    local out, code = "", -1
    if url then out, code = run(BIN .. " examples/quickstart.lua --target " .. url) end
    stop()
    assert.is_not_nil(url, "examples/route_server.lua did not start")
    assert.are.equal(0, code, out)
    assert.matches("client: retrying after UNAVAILABLE: flaky server", out, 1, true)
    assert.matches("Measure -> demo.Distance{length=9.0, legs=2}", out, 1, true)
    assert.matches("Walk -> (0,0) (3,4) (3,0)", out, 1, true)
  end)
end)

describe("examples under LuaJIT", function()
  local title = "runs examples/quickstart.lua and examples/interceptors.lua in a stock luajit"
  if not R.luajit then
    return pending(title .. " [LuaJIT only: the LuaJIT pass of make test runs it]")
  end
  it(title, function()
    local env = "LUA_CPATH='" .. (os.getenv("PROTOCALL_LUAJIT_BUILD") or "build/luajit") .. "/?.so;;' "
    local out, code = run(env .. "luajit examples/quickstart.lua")
    assert.are.equal(0, code, out)
    assert.matches("encoded: 36 bytes: 0a08747269616e676c65", out, 1, true)
    assert.are.equal(2, select(2, out:gsub("client: retrying after UNAVAILABLE: flaky server", "")))
    assert.matches("Measure -> demo.Distance{length=9, legs=2}", out, 1, true) -- LuaJIT prints 9.0 as 9
    assert.matches("Walk -> (0,0) (3,4) (3,0)", out, 1, true)
    out, code = run(env .. "luajit examples/interceptors.lua")
    assert.are.equal(0, code, out)
    assert.matches("count Measure OK = 2\ncount Measure UNAVAILABLE = 3", out, 1, true)
  end)
end)
