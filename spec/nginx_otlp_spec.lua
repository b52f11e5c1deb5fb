-- The OTLP/gRPC exporter inside nginx (protocall.resty.otlp): Debian's
-- nginx with libnginx-mod-http-lua runs doc/openresty.md's otlp.conf as
-- written (the ```nginx file=otlp.conf block; only its addresses, the
-- protos folder and, per case, the interval or worker count replaced), with
-- the LuaJIT build installed into its prefix by `cmake --install`, in front
-- of spec/otlp_collector.lua (a collector stand-in, `protocall serve` in a
-- process of its own) which writes down every span it receives. The OTLP
-- schemas are the corpus's opentelemetry-proto files. This spec drives
-- processes only (curl), so it runs the same under lua5.4 and luajit;
-- without nginx, the module, the LuaJIT build, curl or the corpus it is a
-- visible pending test (a failure when env CI is set).
local helper = require "grpc_helper"
local N = require "nginx_helper"
local R = require "runtime"
local corpus = require "corpus"

local q = N.quote
local ROOT = N.ROOT
local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
if not BIN:match("^/") then BIN = ROOT .. "/" .. BIN end
local LUAJIT_BUILD = os.getenv("PROTOCALL_LUAJIT_BUILD") or "build/luajit"
local PROTOS = ROOT .. "/" .. corpus.dir .. "/protos/opentelemetry"
local N_REQUESTS = 10000

local absent = N.missing { ["/usr/bin/curl"] = "curl" }

-- The doc's otlp.conf, as written.
local function doc_conf()
  local doc = N.read(ROOT .. "/doc/openresty.md")
  local conf = doc:match("\n```nginx file=otlp%.conf\n(.-\n)```\n")
  assert(conf, "doc/openresty.md has no ```nginx file=otlp.conf block")
  return conf
end

-- `conf` with `from` (plain text, present exactly once) replaced by `to`.
local function replace(conf, from, to)
  local i, j = conf:find(from, 1, true)
  assert(i and not conf:find(from, j + 1, true), "otlp.conf should hold '" .. from .. "' once")
  return conf:sub(1, i - 1) .. to .. conf:sub(j + 1)
end

-- The collector stand-in: {port =, out = its file, ...}; `plan` its failures.
local function start_collector(plan)
  local out = os.tmpname()
  local c = helper.spawn_command("sh -c " .. q(q(BIN) .. " serve -listen 127.0.0.1:0 spec/otlp_collector.lua -- "
    .. q(PROTOS) .. " " .. q(out) .. " " .. q(plan or "") .. " 2>&1 & p=$!; cat >/dev/null; kill $p"),
    "the collector stand-in", "listening on 127%.0%.0%.1:(%d+)")
  c.out = out
  return c
end

local function stop_collector(c)
  if c then
    helper.stop(c)
    os.remove(c.out)
  end
end

-- What the collector received: spans = {trace id hex -> times seen},
-- names = {trace id hex -> span name}, count, fails = {codes}.
local function received(c)
  local r = { spans = {}, names = {}, count = 0, fails = {} }
  for line in N.read(c.out):gmatch("[^\n]+") do
    local fail = line:match("^FAIL (%S+)$")
    if fail then
      r.fails[#r.fails + 1] = fail
    else
      local trace, name = line:match("^(%x+) %x+ (%x*)$")
      assert(trace, line)
      r.spans[trace] = (r.spans[trace] or 0) + 1
      r.names[trace] = name:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
      r.count = r.count + 1
    end
  end
  return r
end

-- Waits (at most `limit` s) until the collector holds `count` spans.
local function wait_for(c, count, limit)
  local r
  for _ = 1, limit * 10 do
    r = received(c)
    if r.count >= count then return r end
    os.execute("sleep 0.1")
  end
  return r
end

-- nginx on the doc's otlp.conf edited by `edit(conf)`, the module installed
-- into its prefix; stopped gracefully (SIGQUIT, waited for) by N.stop.
local function start_nginx(collector, edit)
  local port = N.free_port()
  local prefix = ROOT .. "/build/nginx/otlp-" .. port
  local conf = doc_conf()
  conf = replace(conf, "127.0.0.1:4317", "127.0.0.1:" .. collector.port)
  conf = replace(conf, "127.0.0.1:8080", "127.0.0.1:" .. port)
  conf = replace(conf, "/usr/local/share/opentelemetry-proto", PROTOS)
  if edit then conf = edit(conf) end
  assert(os.execute("rm -rf " .. q(prefix) .. " && mkdir -p " .. q(prefix .. "/logs") .. " " .. q(prefix .. "/temp")
    .. " && ln -s /usr/lib/nginx/modules " .. q(prefix .. "/modules")
    .. " && cmake --install " .. q(LUAJIT_BUILD) .. " --prefix " .. q(prefix) .. " >/dev/null"))
  N.write(prefix .. "/otlp.conf", conf)
  local g = "daemon off;" .. (R.capture("id -u"):match("^0") and " user root;" or "")
  local script = "cd " .. q(prefix) .. " && env -u LUA_PATH -u LUA_CPATH nginx -p " .. q(prefix .. "/")
    .. " -c otlp.conf -g " .. q(g) .. " >" .. q(prefix .. ".out") .. " 2>&1 & n=$!; cat >/dev/null; "
    .. "kill -QUIT $n 2>/dev/null; wait $n"
  return N.launch(script, port, prefix, { prefix .. ".out", prefix .. "/logs/error.log" })
end

-- Stops nginx gracefully; its error log (read before the prefix goes).
local function stop_nginx(n)
  if not n or not n.pipe then return "" end
  n.pipe:close()
  n.pipe = nil
  local log = N.read(n.prefix .. "/logs/error.log")
  os.execute("rm -rf " .. q(n.prefix) .. " " .. q(n.prefix .. ".out"))
  return log
end

-- The trace id the request numbered i sends in its traceparent.
local function trace_of(i) return string.format("%032x", i) end

-- Requests first..last of "/", `parallel` at once, request i with trace
-- id trace_of(i); the HTTP statuses counted.
local function requests(n, first, last, parallel)
  local cfg = os.tmpname()
  local f = assert(io.open(cfg, "w"))
  for i = first, last do
    f:write('url = "', n.url, '/item/', i, '"\noutput = "/dev/null"\nheader = "traceparent: 00-', trace_of(i),
            '-00f067aa0ba902b7-01"\nwrite-out = "%{http_code}\\n"\n', i < last and "next\n" or "")
  end
  f:close()
  local out = R.capture("curl -s -Z --parallel-max " .. parallel .. " -m 30 -K " .. cfg .. " 2>/dev/null")
  os.remove(cfg)
  local codes = {}
  for code in out:gmatch("(%d+)\n") do codes[code] = (codes[code] or 0) + 1 end
  return codes
end

local function stats(n)
  local out = R.capture("curl -s -m 5 " .. q(n.url .. "/otlp/stats"))
  local t = {}
  for k, v in out:gmatch('"(%w+)":(%d+)') do t[k] = tonumber(v) end
  return t
end

-- The spans of requests first..last, each exactly once, and nothing else.
local function assert_once(r, first, last)
  local missing, twice = {}, {}
  for i = first, last do
    local seen = r.spans[trace_of(i)]
    if not seen then missing[#missing + 1] = i elseif seen > 1 then twice[#twice + 1] = i end
  end
  assert.are.same({}, { missing = missing[1] and #missing, first_missing = missing[1], twice = twice[1] and #twice })
  assert.are.equal(last - first + 1, r.count)
end

describe("the OTLP exporter inside nginx", function()
  local collector, n
  after_each(function()
    stop_nginx(n)
    n = nil
    stop_collector(collector)
    collector = nil
  end)

  local function ready()
    if absent then
      if os.getenv("CI") then error("missing (required when CI is set): " .. absent) end
      pending("nginx OTLP spec skipped, missing: " .. absent)
      return false
    end
    if not N.exists(PROTOS .. "/opentelemetry/proto/collector/trace/v1/trace_service.proto") then
      corpus.skip(pending, "the OTLP exporter's schemas (opentelemetry-proto)")
      return false
    end
    return true
  end

  it("delivers the span of each of 10,000 requests exactly once, through retried failures", function()
    if not ready() then return end
    collector = start_collector("UNAVAILABLE,RESOURCE_EXHAUSTED")
    -- Room for every span in either worker: nginx does not share requests
    -- evenly, and while the collector fails the first Exports one worker
    -- may hold more than the doc's max_queue (8192) and drop (count) the
    -- rest, which is the bound working, not what this test is about.
    n = start_nginx(collector, function(conf) return replace(conf, "max_queue = 8192,", "max_queue = 20000,") end)
    local codes = requests(n, 1, N_REQUESTS, 16)
    assert.are.same({ ["200"] = N_REQUESTS }, codes)
    -- sent while nginx runs (by the timers), not only when it stops
    assert.is_true(wait_for(collector, N_REQUESTS, 30).count >= N_REQUESTS)
    local log = stop_nginx(n)
    local r = received(collector)
    assert_once(r, 1, N_REQUESTS)
    assert.are.same({ "UNAVAILABLE", "RESOURCE_EXHAUSTED" }, r.fails)
    assert.is_nil(log:match("%[error%][^\n]*"))
  end)

  it("sends what is queued when the worker exits (nginx -s quit)", function()
    if not ready() then return end
    collector = start_collector()
    -- The timer waits a minute: only the exit sends these 300 spans
    -- (fewer than a batch in each worker, so none goes at once).
    n = start_nginx(collector, function(conf) return replace(conf, "interval = 1,", "interval = 60,") end)
    assert.are.same({ ["200"] = 300 }, requests(n, 1, 300, 8))
    os.execute("sleep 0.5")
    assert.are.equal(0, received(collector).count)
    local log = stop_nginx(n)
    assert_once(received(collector), 1, 300)
    assert.is_nil(log:match("%[error%][^\n]*"))
  end)

  it("bounds each worker's queue: spans past max_queue are dropped and counted", function()
    if not ready() then return end
    collector = start_collector()
    n = start_nginx(collector, function(conf)
      conf = replace(conf, "worker_processes 2;", "worker_processes 1;")
      return replace(replace(conf, "interval = 1,", "interval = 60,"), "max_queue = 8192,", "max_queue = 4,")
    end)
    assert.are.same({ ["200"] = 10 }, requests(n, 1, 10, 1)) -- one at a time: the first 4 queue
    local s = stats(n)
    stop_nginx(n)
    assert.are.same({ queued = 4, exported = 0, dropped = 6, failed = 0, rejected = 0, retries = 0, waiting = 4 }, s)
    assert_once(received(collector), 1, 4) -- sent when the worker exits
  end)

  it("sends a batch holding a request for /%FF with a User-Agent that is not UTF-8, U+FFFD in its place", function()
    if not ready() then return end
    collector = start_collector()
    -- A full batch of 5 goes at once; the timer, a minute away, sends none.
    n = start_nginx(collector, function(conf)
      conf = replace(conf, "worker_processes 2;", "worker_processes 1;")
      return replace(replace(conf, "interval = 1,", "interval = 60,"), "batch_size = 512,", "batch_size = 5,")
    end)
    assert.are.same({ ["200"] = 4 }, requests(n, 1, 4, 1))
    -- $uri is decoded: the span's name and url.path hold the byte 0xFF
    local code = R.capture("curl -s -o /dev/null -w '%{http_code}' -m 5 --path-as-is "
      .. "-H \"$(printf 'User-Agent: \\377')\" -H " .. q("traceparent: 00-" .. trace_of(5) .. "-00f067aa0ba902b7-01")
      .. " " .. q(n.url .. "/%FF"))
    assert.are.equal("200", code)
    local r = wait_for(collector, 5, 10)
    local s = stats(n)
    local log = stop_nginx(n)
    assert_once(r, 1, 5)
    assert.are.equal("GET /item/1", r.names[trace_of(1)])
    assert.are.equal("GET /\239\191\189", r.names[trace_of(5)])
    assert.are.same({ queued = 5, exported = 5, dropped = 0, failed = 0, rejected = 0, retries = 0, waiting = 0 }, s)
    assert.is_nil(log:match("%[error%][^\n]*"))
  end)

  it("drops a batch on a status OTLP does not retry, and counts a partial success's rejected spans", function()
    if not ready() then return end
    collector = start_collector("INVALID_ARGUMENT,EXHAUSTED,REJECT")
    -- A full batch of 5 goes at once; the timer, a minute away, sends none.
    n = start_nginx(collector, function(conf)
      conf = replace(conf, "worker_processes 2;", "worker_processes 1;")
      return replace(replace(conf, "interval = 1,", "interval = 60,"), "batch_size = 512,", "batch_size = 5,")
    end)
    local want = 0
    for round = 1, 3 do -- one Export of 5 spans per round
      assert.are.same({ ["200"] = 5 }, requests(n, round * 10 + 1, round * 10 + 5, 5))
      want = want + 1
      for _ = 1, 50 do
        if #received(collector).fails + received(collector).count >= want then break end
        os.execute("sleep 0.1")
      end
      os.execute("sleep 0.3")
    end
    local s = stats(n)
    local log = stop_nginx(n)
    local r = received(collector)
    assert.are.same({ "INVALID_ARGUMENT", "EXHAUSTED" }, r.fails)
    assert.are.same({ queued = 15, exported = 4, dropped = 0, failed = 10, rejected = 1, retries = 0, waiting = 0 }, s)
    assert.are.equal(4, r.count)
    assert.matches("INVALID_ARGUMENT: collector stand-in: planned failure 1", log, 1, true)
  end)
end)
