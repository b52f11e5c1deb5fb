-- Server-streaming retry with resumption (README "Resumable streams"): a
-- stream failing after responses is retried with the request resume()
-- returns and the caller's loop sees one stream; every attempt is one of
-- the call's retry policy. In process on a fake clock, and over pc.grpc
-- against spec/grpc_server.py.
local pc = require "protocall"
local helper = require "grpc_helper"

local SCHEMA = [[
syntax = "proto3";
package rs;
message From { int32 start = 1; int32 stop = 2; }
message Tick { int32 n = 1; }
service Ticker { rpc Ticks(From) returns (stream Tick); rpc Once(From) returns (Tick); }
]]
local pool = pc.pool()
assert(pool:load(SCHEMA, { name = "rs/ticker.proto" }))

local function world()
  local w = { t = 0, sleeps = {}, requests = {} }
  function w.clock() return w.t end
  function w.sleep(s) w.sleeps[#w.sleeps + 1] = s; w.t = w.t + s end
  function w.random() return 1 end
  return w
end

local RETRY = pc.Retry { initial = 0.5, maximum = 4, multiplier = 2, max_attempts = 4 }

local function unavailable(msg) error(pc.Error { code = "UNAVAILABLE", message = msg }, 0) end

-- A ticker that sends start..stop and fails after the responses listed in
-- `breaks` (one break per attempt, consumed in order; nil: no break).
local function ticker(w, breaks)
  local server = pc.server({ ["rs.Ticker"] = {
    Ticks = function(req, ctx)
      w.requests[#w.requests + 1] = req.start .. ".." .. req.stop
      local brk = table.remove(breaks, 1)
      for n = req.start, req.stop do
        if brk and n > brk then unavailable("broke after " .. brk) end
        ctx.send { n = n }
      end
    end,
    Once = function() return { n = 1 } end,
  } }, { pool = pool })
  return pc.client("rs.Ticker", { pool = pool, transport = pc.inproc(server), retry = RETRY,
    clock = w.clock, sleep = w.sleep, random = w.random })
end

local function from_last(request, last) return { start = last.n + 1, stop = request.stop } end

local function collect(iter)
  local got = {}
  for r in iter do got[#got + 1] = r.n end
  return got
end

describe("resumable server streams", function()
  it("resume after a failure mid-stream: one uninterrupted stream, backoff between attempts", function()
    local w = world()
    local stub = ticker(w, { 3, 6 })
    local seen = {}
    local got = collect(stub:Ticks({ start = 1, stop = 8 }, { resume = function(req, last)
      seen[#seen + 1] = req.start .. ":" .. last.n
      return from_last(req, last)
    end }))
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, got)
    assert.are.same({ "1..8", "4..8", "7..8" }, w.requests)
    assert.are.same({ "1:3", "4:6" }, seen) -- resume gets the latest request and response
    assert.are.same({ 0.5, 1 }, w.sleeps)
  end)

  it("retries a failure before any response of an attempt with that attempt's request", function()
    local w = world()
    local stub = ticker(w, { 2, 3 }) -- 1..5 breaks after 2, 3..5 after 3, 4..5 ends
    local got = collect(stub:Ticks({ start = 1, stop = 5 }, { resume = from_last }))
    assert.are.same({ 1, 2, 3, 4, 5 }, got)
    assert.are.same({ "1..5", "3..5", "4..5" }, w.requests)
    w = world()
    stub = ticker(w, { 2, 0 }) -- the second attempt fails before its first response
    got = collect(stub:Ticks({ start = 1, stop = 4 }, { resume = from_last }))
    assert.are.same({ 1, 2, 3, 4 }, got)
    assert.are.same({ "1..4", "3..4", "3..4" }, w.requests)
    assert.are.same({ 0.5, 1 }, w.sleeps)
  end)

  it("counts every attempt against max_attempts: the loop gets the RetryError", function()
    local w = world()
    local stub = ticker(w, { 1, 2, 3, 4, 5 })
    local got = {}
    local ok, err = pcall(function()
      for r in stub:Ticks({ start = 1, stop = 9 }, { resume = from_last }) do got[#got + 1] = r.n end
    end)
    assert.is_false(ok)
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.are.equal(4, err.attempts)
    assert.are.same({ 1, 2, 3, 4 }, got)
    assert.are.same({ 0.5, 1, 2 }, w.sleeps)
  end)

  it("does not retry errors the predicate refuses, and ends when resume returns nil", function()
    local w = world()
    local server = pc.server({ ["rs.Ticker"] = { Ticks = function(_, ctx)
      ctx.send { n = 1 }
      error(pc.Error { code = "INVALID_ARGUMENT", message = "no" }, 0)
    end } }, { pool = pool })
    local stub = pc.client("rs.Ticker", { pool = pool, transport = pc.inproc(server), retry = RETRY,
      clock = w.clock, sleep = w.sleep, random = w.random })
    local got = {}
    local ok, err = pcall(function()
      for r in stub:Ticks({}, { resume = from_last }) do got[#got + 1] = r.n end
    end)
    assert.is_false(ok)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.are.same({ 1 }, got)
    w = world()
    stub = ticker(w, { 2 })
    assert.are.same({ 1, 2 }, collect(stub:Ticks({ start = 1, stop = 5 }, { resume = function() return nil end })))
    assert.are.same({ "1..5" }, w.requests)
  end)

  it("keeps the old rule without resume, and takes resume from methods.Name too", function()
    local w = world()
    local stub = ticker(w, { 2 })
    local got = {}
    local ok, err = pcall(function()
      for r in stub:Ticks { start = 1, stop = 5 } do got[#got + 1] = r.n end
    end)
    assert.is_false(ok)
    assert.are.equal("UNAVAILABLE", err.code)
    assert.are.same({ 1, 2 }, got)
    assert.are.same({ "1..5" }, w.requests)
    local w2 = world()
    local server = pc.server({ ["rs.Ticker"] = { Ticks = function(req, ctx)
      w2.requests[#w2.requests + 1] = req.start
      if req.start == 1 then ctx.send { n = 1 }; unavailable("x") end
      for n = req.start, req.stop do ctx.send { n = n } end
    end } }, { pool = pool })
    local stub2 = pc.client("rs.Ticker", { pool = pool, transport = pc.inproc(server), retry = RETRY,
      clock = w2.clock, sleep = w2.sleep, random = w2.random, methods = { Ticks = { resume = from_last } } })
    assert.are.same({ 1, 2, 3 }, collect(stub2:Ticks { start = 1, stop = 3 }))
    assert.are.same({ 1, 2 }, w2.requests)
  end)

  it("refuses a resume that is not a function, and on a unary method", function()
    local w = world()
    local stub = ticker(w, {})
    assert.has_error(function() stub:Ticks({}, { resume = 1 }) end,
      "bad argument #2 to 'Ticks' (resume: function expected, got number)")
    assert.has_error(function() stub:Once({}, { resume = from_last }) end,
      "bad argument #2 to 'Once' (resume: only server-streaming methods resume)")
    local ok, err = pcall(pc.client, "rs.Ticker", { pool = pool, transport = pc.inproc(pc.server({}, { pool = pool })),
      methods = { Once = { resume = from_last } } })
    assert.is_false(ok)
    assert.matches("methods.Once: resume: only server%-streaming methods resume", err)
  end)
end)

describe("resumable server streams over pc.grpc", function()
  local server
  setup(function()
    server = helper.spawn("grpc")
    assert(pc.load_file("spec/fixtures/protos/grpc/faults.proto", { import_paths = { "spec/fixtures/protos" } }))
  end)
  teardown(function() helper.stop(server) end)

  it("resumes a stream the server fails after its responses", function()
    local c = pc.client("faults.Faults", { transport = pc.grpc(server.url),
      retry = pc.Retry { initial = 0.01, maximum = 0.05, timeout = 5 } })
    -- the first two attempts send `count` replies and fail; the third ends
    local requests = {}
    local got = {}
    for r in c:StreamThenFail({ id = "resume-1", count = 3, failures = 2, code = "UNAVAILABLE" }, {
      resume = function(req, last)
        requests[#requests + 1] = req.count .. "/" .. last.index
        return { id = req.id, count = req.count - 1, failures = req.failures, code = req.code }
      end }) do
      got[#got + 1] = r.index .. "@" .. r.attempts
    end
    assert.are.same({ "1@1", "2@1", "3@1", "1@2", "2@2", "1@3" }, got)
    assert.are.same({ "3/3", "2/2" }, requests)
  end)
end)
