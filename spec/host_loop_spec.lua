-- A host's own loop driving pc.listen and calls (README "Serving"):
-- pc.step(seconds) runs the scheduler one step at a time and
-- pc.poll_fds() says what to wait for in between; here the spec is the
-- host, serving gRPC's interop cases to a python3-grpcio client
-- (spec/interop_client.py) from its loop. bindings/lua/loop_test.c does
-- the same from C on poll(2).
package.path = "spec/?.lua;" .. package.path
local pc = require "protocall"
local service = require "interop_service"

local function read(path)
  local f = io.open(path)
  if not f then return "" end
  local text = f:read("*a")
  f:close()
  return text
end

describe("pc.step", function()
  it("serves a python3-grpcio client from the host's own loop", function()
    local l = pc.listen(service.server(), "127.0.0.1:0")
    pc.spawn(function() l:serve() end)
    local out = os.tmpname()
    os.execute("/usr/bin/python3 spec/interop_client.py " .. l.port .. " > " .. out .. " 2>&1 &")
    local host_rounds, text = 0, ""
    local deadline = pc.now() + 60
    while pc.now() < deadline do
      assert.is_true(pc.step(0.01) >= 1) -- the serve task stays (and each call is a task)
      host_rounds = host_rounds + 1 -- the host's own work between steps
      text = read(out)
      if text:find("done\n", 1, true) or text:find("Traceback", 1, true) then break end
    end
    os.remove(out)
    pc.spawn(function() l:shutdown(1) end)
    local steps = 0
    while pc.step(0.01) > 0 do steps = steps + 1 end
    assert.is_true(host_rounds > 1)
    assert.is_true(steps < 200, steps .. " steps to shut down")
    assert.are.equal(0, l:connections())
    local failed = {}
    for line in text:gmatch("[^\n]+") do
      if line ~= "done" and not line:find(" ok$") then failed[#failed + 1] = line end
    end
    assert.are.same({}, failed)
    assert.is_truthy(text:find("server_compressed_streaming ok\ndone\n", 1, true), text)
  end)

  it("returns the tasks left at once with seconds 0, and 0 with none", function()
    assert.are.equal(0, pc.step())
    assert.are.equal(1, select("#", pc.step())) -- the count alone
    pc.spawn(function() pc.sleep(0.5) end)
    local t0 = pc.now()
    assert.are.equal(1, pc.step(0))
    assert.is_true(pc.now() - t0 < 0.4) -- not the task's 0.5 s (room for a loaded machine)
    while pc.step(1) > 0 do end
    assert.is_true(pc.now() - t0 >= 0.5)
  end)

  it("raises a task's error and drops the other tasks", function()
    pc.spawn(function() pc.sleep(10) end)
    pc.spawn(function() error("task failed") end)
    assert.has_error(function() pc.step(0) end, "task failed")
    assert.are.equal(0, pc.step(0))
  end)

  it("checks its argument and refuses to run inside pc.run", function()
    assert.has_error(function() pc.step(-1) end, "bad argument #1 to 'step' (seconds >= 0 expected, got -1)")
    assert.has_error(function() pc.step("1") end, "bad argument #1 to 'step' (seconds >= 0 expected, got string)")
    assert.has_error(function() pc.step(0 / 0) end, "bad argument #1 to 'step' (seconds >= 0 expected, got nan)")
    local inner
    pc.spawn(function() inner = select(2, pcall(pc.step, 0)) end)
    pc.run()
    assert.matches("pc.step: called inside pc.run or a task", inner, 1, true)
  end)
end)

describe("pc.poll_fds", function()
  it("gives a listener's socket, then its connections', and the timers' timeout", function()
    local l = pc.listen(service.server(), "127.0.0.1:0")
    pc.spawn(function() l:serve() end)
    assert.are.equal(1, pc.step(0))
    local fds, timeout = pc.poll_fds()
    assert.are.equal(1, #fds)
    assert.are.equal("r", fds[1][2])
    assert.is_true(type(fds[1][1]) == "number" and fds[1][1] >= 0)
    assert.is_nil(timeout) -- only a socket can wake the serve task
    pc.spawn(function() pc.sleep(0.5) end)
    fds, timeout = pc.poll_fds()
    assert.are.equal(1, #fds) -- the listener's socket still
    assert.are.equal(0, timeout) -- a task is ready
    assert.are.equal(2, pc.step(0))
    fds, timeout = pc.poll_fds()
    assert.are.equal(1, #fds)
    assert.is_true(timeout > 0.3 and timeout <= 0.5, tostring(timeout))
    local called
    pc.spawn(function()
      local stub = pc.client("grpc.testing.TestService",
        { transport = pc.grpc("http://127.0.0.1:" .. l.port), timeout = 5 })
      called = stub:UnaryCall({ response_size = 3 }).payload.body
      l:shutdown(1)
    end)
    local most = 0
    while true do
      fds = pc.poll_fds()
      if #fds > most then most = #fds end
      if pc.step(0.01) == 0 then break end
    end
    assert.are.equal("\0\0\0", called)
    assert.is_true(most >= 3, most .. " descriptors") -- listening socket, the server's and the client's ends
    assert.are.same({}, (pc.poll_fds()))
  end)

  it("lists every socket and the loop serves them all: 300 transports calling one listener", function()
    -- past the fixed tables the pump once had (64 channels, 512 or 1024
    -- descriptors): the calls beyond them were never read
    local pool = pc.pool()
    assert(pool:load('syntax = "proto3"; package hl; message M { int32 n = 1; } service S { rpc Hold(M) returns (M); }',
      { name = "hl.proto" }))
    local N, started, done, most = 300, 0, 0, 0
    local server = pc.server({ ["hl.S"] = { Hold = function(m, ctx)
      started = started + 1
      while started < N do ctx.sleep(0.01) end -- every call is in flight at once
      return m
    end } }, { pool = pool })
    local l = pc.listen(server, "127.0.0.1:0")
    pc.spawn(function() l:serve() end)
    local transports = {}
    for i = 1, N do
      transports[i] = pc.grpc("http://127.0.0.1:" .. l.port)
      pc.spawn(function()
        local stub = pc.client("hl.S", { pool = pool, transport = transports[i], timeout = 120 })
        assert(stub:Hold({ n = i }).n == i)
        done = done + 1
        if done == N then l:shutdown(1) end
      end)
    end
    while true do
      local fds = pc.poll_fds()
      if #fds > most then most = #fds end
      if pc.step(0.01) == 0 then break end
    end
    for i = 1, N do transports[i]:close() end
    assert.are.equal(N, done)
    assert.is_true(most > 2 * N, most .. " descriptors") -- both ends of each connection, the listener's
  end)

  it("with pc.step, moves a stream while its task only sleeps: the message reaches the handler", function()
    local l, got = require("grpc_helper").recording_router(pc)
    local seen
    pc.spawn(function()
      local c = pc.client("demo.Router", { transport = pc.grpc("http://127.0.0.1:" .. l.port) })
      local stream = c:Record()
      stream:send({ x = 5 })
      local by = pc.now() + 5
      repeat pc.sleep(0.02) until #got >= 2 or pc.now() > by
      seen = table.concat(got, " ")
      stream:close_and_recv()
      l:shutdown(1)
    end)
    local core = require "protocall.core"
    while true do -- the host's loop: waits as poll_fds says (a stand-in for its poll), then steps
      local _, timeout = pc.poll_fds()
      core.sleep(math.min(timeout or 0.01, 0.01))
      if pc.step(0) == 0 then break end
    end
    assert.are.equal("started 5", seen)
  end)

  it("with pc.step and a host driver, connects a stream while its task only sleeps", function()
    local l, got = require("grpc_helper").recording_router(pc)
    local D = require("socket_driver").new(pc)
    local seen
    pc.spawn(function()
      local c = pc.client("demo.Router", { transport = pc.grpc("http://127.0.0.1:" .. l.port, { driver = D }) })
      local stream = c:Record()
      stream:send({ x = 6 })
      local by = pc.now() + 5
      repeat pc.sleep(0.02) until #got >= 2 or pc.now() > by
      seen = table.concat(got, " ")
      stream:close_and_recv()
      l:shutdown(1)
    end)
    local core = require "protocall.core"
    while true do -- the host's loop, as above
      local _, timeout = pc.poll_fds()
      core.sleep(math.min(timeout or 0.01, 0.01))
      if pc.step(0) == 0 then break end
    end
    assert.are.equal("started 6", seen)
    assert.are.equal(1, D.counts.connect)
  end)

  it("gives no timeout when only a socket can wake the tasks, after pc.sleep(math.huge) too", function()
    pc.spawn(function() pc.sleep(math.huge) end)
    assert.are.equal(1, pc.step(0))
    local _, timeout = pc.poll_fds()
    assert.is_nil(timeout)
    -- drop the sleeping task
    pc.spawn(function() error("stop") end)
    assert.has_error(function() pc.step(0) end, "stop")
  end)

  it("refuses to run inside a task", function()
    local inner
    pc.spawn(function() inner = select(2, pcall(pc.poll_fds)) end)
    pc.run()
    assert.matches("pc.poll_fds: called inside pc.run or a task", inner, 1, true)
  end)
end)
