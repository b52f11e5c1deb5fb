-- Interceptors on clients and servers (README "Interceptors"): once per
-- call or once per attempt, changing the request, metadata and options,
-- short-circuiting, and seeing status, attempts and elapsed time, on a fake
-- clock; in process and over pc.grpc.
local pc = require "protocall"
local helper = require "grpc_helper"

local SCHEMA = [[
syntax = "proto3";
package ic;
message Q { string s = 1; }
message A { string s = 1; repeated string md = 2; double timeout = 3; }
service S { rpc Get(Q) returns (A); rpc List(Q) returns (stream A); }
]]
local pool = pc.pool()
assert(pool:load(SCHEMA, { name = "ic/s.proto" }))

local function world()
  local w = { t = 0, sleeps = {}, calls = 0 }
  function w.clock() return w.t end
  function w.sleep(s) w.sleeps[#w.sleeps + 1] = s; w.t = w.t + s end
  function w.random() return 1 end
  return w
end

-- A server answering with the request's text and the x- metadata it got;
-- `fails` attempts fail UNAVAILABLE first, each attempt takes 0.25 s.
local function backend(w, fails, server_opts)
  local function md_of(ctx)
    local out = {}
    for _, kv in ipairs(ctx.metadata) do
      if kv[1]:sub(1, 2) == "x-" then out[#out + 1] = kv[1] .. "=" .. kv[2] end
    end
    return out
  end
  local opts = { pool = pool }
  for k, v in pairs(server_opts or {}) do opts[k] = v end
  return pc.server({ ["ic.S"] = {
    Get = function(q, ctx)
      w.calls = w.calls + 1
      w.t = w.t + 0.25
      if w.calls <= (fails or 0) then error(pc.Error { code = "UNAVAILABLE", message = "busy" }, 0) end
      return { s = q.s, md = md_of(ctx), timeout = ctx.timeout or 0 }
    end,
    List = function(q, ctx)
      ctx.send { s = q.s .. "1", md = md_of(ctx) }
      ctx.send { s = q.s .. "2" }
    end,
  } }, opts)
end

local function client(w, transport, interceptors, extra)
  local opts = { pool = pool, transport = transport, interceptors = interceptors,
    retry = pc.Retry { initial = 0.5, max_attempts = 4 }, clock = w.clock, sleep = w.sleep, random = w.random }
  for k, v in pairs(extra or {}) do opts[k] = v end
  return pc.client("ic.S", opts)
end

describe("client interceptors", function()
  it("run once per call, in order, and see status, attempts and elapsed", function()
    local w = world()
    local log = {}
    local function named(name)
      return function(call, next)
        log[#log + 1] = name .. ">" .. call.method
        local a = next(call)
        log[#log + 1] = ("%s<%s %d %.2f"):format(name, call.status, call.attempts, call.elapsed)
        return a
      end
    end
    local stub = client(w, pc.inproc(backend(w, 2)), { named("outer"), named("inner") })
    assert.are.equal("hi", stub:Get({ s = "hi" }).s)
    -- 3 attempts of 0.25 s and sleeps of 0.5 and 1
    assert.are.same({ "outer>ic.S.Get", "inner>ic.S.Get", "inner<OK 3 2.25", "outer<OK 3 2.25" }, log)
    assert.are.same({ 0.5, 1 }, w.sleeps)
  end)

  it("see a failure's status, attempts and error", function()
    local w = world()
    local seen
    local stub = client(w, pc.inproc(backend(w, 10)), { function(call, next)
      local _, err = pcall(next, call)
      seen = call
      error(err, 0)
    end })
    local ok, err = pcall(stub.Get, stub, {})
    assert.is_false(ok)
    assert.are.equal(pc.RetryError, getmetatable(err))
    assert.are.equal("UNAVAILABLE", seen.status)
    assert.are.equal(4, seen.attempts)
    assert.are.equal(err, seen.error)
  end)

  it("may change the request, the metadata and the options", function()
    local w = world()
    local stub = client(w, pc.inproc(backend(w)), { function(call, next)
      call.request = { s = call.request.s .. "!" }
      call.metadata[#call.metadata + 1] = { "x-added", "1" }
      call.options.timeout = 7
      return next(call)
    end })
    local a = stub:Get({ s = "q" }, { metadata = { { "x-own", "2" } } })
    assert.are.equal("q!", a.s)
    assert.are.same({ "x-own=2", "x-added=1" }, { a.md[1], a.md[2] })
    assert.are.equal(7, a.timeout)
  end)

  it("may answer without calling the server, or fail the call", function()
    local w = world()
    local stub = client(w, pc.inproc(backend(w)), { function(call, next)
      if call.request.s == "cached" then return { s = "from cache" } end
      if call.request.s == "bad" then error(pc.Error { code = "PERMISSION_DENIED", message = "no" }, 0) end
      return next(call)
    end })
    assert.are.equal("from cache", stub:Get({ s = "cached" }).s)
    local ok, err = pcall(stub.Get, stub, { s = "bad" })
    assert.is_false(ok)
    assert.are.equal("PERMISSION_DENIED", err.code)
    assert.are.equal(0, w.calls)
    assert.are.equal("x", stub:Get({ s = "x" }).s)
    assert.are.equal(1, w.calls)
  end)

  it("run once per attempt with {per_attempt = fn}, seeing the attempt number and timeout", function()
    local w = world()
    local per_call, attempts = 0, {}
    local stub = client(w, pc.inproc(backend(w, 2)), {
      function(call, next) per_call = per_call + 1; return next(call) end,
      { per_attempt = function(call, next)
        call.metadata[#call.metadata + 1] = { "x-attempt", tostring(call.attempt) }
        local ok, res = pcall(next, call)
        attempts[#attempts + 1] = ("%d %s %.2f"):format(call.attempt, call.status, call.elapsed)
        if not ok then error(res, 0) end
        return res
      end },
    }, { timeout = 10 })
    local a = stub:Get({ s = "q" })
    assert.are.equal(1, per_call)
    assert.are.same({ "1 UNAVAILABLE 0.25", "2 UNAVAILABLE 0.25", "3 OK 0.25" }, attempts)
    assert.are.same({ "x-attempt=3" }, { a.md[1] })
  end)

  it("a per-attempt error is retried like the server's", function()
    local w = world()
    local n = 0
    local stub = client(w, pc.inproc(backend(w)), { { per_attempt = function(call, next)
      n = n + 1
      if n < 3 then error(pc.Error { code = "UNAVAILABLE", message = "not yet" }, 0) end
      return next(call)
    end } })
    assert.are.equal("q", stub:Get({ s = "q" }).s)
    assert.are.equal(3, n)
    assert.are.equal(1, w.calls)
  end)

  it("wrap server streams: next returns the stream", function()
    local w = world()
    local stub = client(w, pc.inproc(backend(w)), { function(call, next)
      call.metadata[#call.metadata + 1] = { "x-k", "v" }
      return next(call)
    end })
    local got = {}
    for a in stub:List({ s = "s" }) do got[#got + 1] = a.s .. (a.md[1] and ":" .. a.md[1] or "") end
    assert.are.same({ "s1:x-k=v", "s2" }, got)
  end)

  it("leave the caller's misuse raised as a stub without interceptors raises it, before any call", function()
    local w = world()
    local ran = 0
    local plain = client(w, pc.inproc(backend(w)))
    local stub = client(w, pc.inproc(backend(w)), { function(call, next) ran = ran + 1; return next(call) end })
    for _, case in ipairs {
      { "Get", { with_metadata = "yes" }, [[with_metadata: true, false or "present" expected, got string "yes"]] },
      { "List", { with_metadata = 1 }, [[with_metadata: true, false or "present" expected, got number]] },
      { "Get", { resume = print }, "resume: only server-streaming methods resume" },
      { "Get", { resume = true }, "resume: only server-streaming methods resume" },
      { "List", { resume = true }, "resume: function expected, got boolean" },
      { "Get", { timeout = "x" }, "timeout: number of seconds, pc.ExponentialTimeout or false expected, got string" },
    } do
      local method, opts, why = case[1], case[2], case[3]
      for _, s in ipairs { plain, stub } do
        local ok, err = pcall(s[method], s, { s = "x" }, opts)
        assert.is_false(ok)
        assert.are.equal("bad argument #2 to '" .. method .. "' (" .. why .. ")",
          (tostring(err):gsub("^[^:]*:%d+: ", "")))
      end
    end
    assert.are.equal(0, ran + w.calls)
  end)

  it("refuses what is not an interceptor", function()
    local w = world()
    for _, bad in ipairs { 1, { 1 }, { { per_attempt = 1 } }, { { per_attempt = print, x = 1 } } } do
      local ok, err = pcall(client, w, pc.inproc(backend(w)), bad)
      assert.is_false(ok)
      assert.matches("pc.client: interceptors", err, 1, true)
    end
  end)
end)

describe("server interceptors", function()
  it("see the method, request and metadata, may refuse, and see the outcome", function()
    local w = world()
    local seen = {}
    local srv = backend(w, 0, { interceptors = { function(call, next)
      local token
      for _, kv in ipairs(call.metadata) do if kv[1] == "x-token" then token = kv[2] end end
      if token ~= "ok" then error(pc.Error { code = "UNAUTHENTICATED", message = "token" }, 0) end
      local a = next(call)
      seen[#seen + 1] = call.method .. " " .. call.status .. " " .. call.request.s
      return a
    end } })
    local stub = client(w, pc.inproc(srv), nil)
    local ok, err = pcall(stub.Get, stub, { s = "a" })
    assert.is_false(ok)
    assert.are.equal("UNAUTHENTICATED", err.code)
    assert.are.equal("b", stub:Get({ s = "b" }, { metadata = { { "x-token", "ok" } } }).s)
    local got = {}
    for a in stub:List({ s = "l" }, { metadata = { { "x-token", "ok" } } }) do got[#got + 1] = a.s end
    assert.are.same({ "l1", "l2" }, got)
    assert.are.same({ "ic.S.Get OK b", "ic.S.List OK l" }, seen)
    assert.has_error(function() pc.server({}, { interceptors = { { per_attempt = print } } }) end)
    assert.has_error(function() pc.server({}, { interceptor = {} }) end, "pc.server: unknown option 'interceptor'")
  end)
end)

describe("client interceptors over pc.grpc", function()
  local server
  setup(function()
    server = helper.spawn("grpc")
    assert(pc.load_file("spec/fixtures/protos/grpc/faults.proto", { import_paths = { "spec/fixtures/protos" } }))
  end)
  teardown(function() helper.stop(server) end)

  it("add metadata per attempt and see the attempts of a retried call", function()
    local seen
    local c = pc.client("faults.Faults", { transport = pc.grpc(server.url),
      retry = pc.Retry { initial = 0.01, maximum = 0.05, timeout = 5 },
      interceptors = {
        function(call, next) local r = next(call); seen = call; return r end,
        { per_attempt = function(call, next)
          call.metadata[#call.metadata + 1] = { "x-attempt", tostring(call.attempt) }
          return next(call)
        end },
      } })
    local r = c:FailThenSucceed { id = "icpt-1", failures = 2, code = "UNAVAILABLE" }
    assert.are.equal(3, r.attempts)
    assert.are.equal(3, seen.attempts)
    assert.are.equal("OK", seen.status)
    local m = c:Metadata { id = "icpt-2" }
    assert.are.equal("x-attempt", m.metadata[1].key)
    assert.are.equal("1", m.metadata[1].value)
  end)

  -- pc.grpc takes an attempt's settings as the client checked them: what a
  -- per-attempt interceptor changed is checked again, not sent silently
  -- (metadata "x" as none, compression "br" as identity) or failed in C
  it("refuse a timeout, metadata or compression a per-attempt interceptor made wrong", function()
    local cases = {
      { function(call) call.timeout = "10" end, "timeout: number of seconds or nil expected, got string" },
      { function(call) call.timeout = {} end, "timeout: number of seconds or nil expected, got table" },
      { function(call) call.timeout = 0 / 0 end, "timeout: finite number of seconds expected, got nan" },
      { function(call) call.metadata = "x" end, "metadata: list of {key, value} pairs expected, got string" },
      { function(call) call.metadata = { { "k" } } end, "metadata: pair 1: {key, value} of strings expected" },
      { function(call) call.metadata[#call.metadata + 1] = { "te", "gzip" } end,
        "metadata key 'te' is reserved for the transport" },
      { function(call) call.compression = "br" end, "compression 'br': expected \"gzip\" or \"identity\"" },
    }
    for _, case in ipairs(cases) do
      local t = pc.grpc(server.url)
      local c = pc.client("faults.Faults", { transport = t, timeout = 5,
        interceptors = { { per_attempt = function(call, next) case[1](call); return next(call) end } } })
      local ok, err = pcall(c.Metadata, c, { id = "icpt-bad" })
      assert.is_false(ok, case[2])
      assert.are.equal("UNKNOWN", err.code)
      assert.are.equal("faults.Faults.Metadata: per_attempt interceptor: " .. case[2], err.message)
      t:close()
    end
    -- what it changed within the rules goes as it is
    local t = pc.grpc(server.url)
    local c = pc.client("faults.Faults", { transport = t, timeout = 5,
      interceptors = { { per_attempt = function(call, next)
        call.timeout, call.compression = 4, "gzip"
        call.metadata[#call.metadata + 1] = { "x-k", "v" }
        return next(call)
      end } } })
    local m = c:Metadata { id = "icpt-ok" }
    assert.are.equal("x-k=v", m.metadata[1].key .. "=" .. m.metadata[1].value)
    t:close()
  end)
end)
