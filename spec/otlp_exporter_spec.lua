-- protocall.resty.otlp without nginx: the exporter is loaded under a stub
-- of the few ngx fields protocall.resty reads, its spans are taken and sent
-- as the timer would (exporter:drain with a call that encodes the Export
-- request with the corpus's opentelemetry-proto schemas and decodes it
-- back). Hostile span values are refused by span() with a reason and
-- counted, strings that are not UTF-8 are repaired before encoding, and no
-- batch leaves the queue without being counted. Runs under Lua 5.4 and
-- LuaJIT; without the corpus it is a visible pending test (a failure when
-- env CI is set).
local pc = require "protocall"
local corpus = require "corpus"

local PROTOS = corpus.dir .. "/protos/opentelemetry"
local REQUEST = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
local FFFD = "\239\191\189"

local logs -- {level, text} of each ngx.log call

-- Loads protocall.resty.otlp under a stub ngx (spec/ngx_stub.lua) in a
-- timer's phase whose log goes to `logs`; `var` becomes ngx.var.
local function load_otlp(var)
  local ngx_stub = require "ngx_stub"
  local stub = ngx_stub.stub {
    now = function() return 1.7e9 + 0.25 end, get_phase = function() return "timer" end,
    log = function(level, ...) logs[#logs + 1] = { level, table.concat({ ... }) } end,
    var = var or {}, status = 200,
    req = { get_method = function() return "GET" end, start_time = function() return 1.7e9 end },
  }
  return ngx_stub.load("protocall.resty.otlp", stub), stub
end

-- A call as the timer's: encodes the request (as resty.call would), keeps
-- the decoded Export in `sent`, answers `response` ({} by default).
local function encoding_call(sent, response)
  local T = pc.type(REQUEST)
  return function(req)
    local bytes = pc.encode(T(req))
    sent[#sent + 1] = pc.decode(T, bytes)
    return response or {}
  end
end

-- The spans of the decoded Exports in `sent`.
local function spans_of(sent)
  local list = {}
  for _, req in ipairs(sent) do
    for _, rs in pc.ipairs(req.resource_spans) do
      for _, ss in pc.ipairs(rs.scope_spans) do
        for _, s in pc.ipairs(ss.spans) do list[#list + 1] = s end
      end
    end
  end
  return list
end

local function hex(s) return ("%02x"):rep(#s):format(s:byte(1, -1)) end

-- The string attribute `key` of a decoded span.
local function attribute(s, key)
  for _, kv in pc.ipairs(s.attributes) do
    if kv.key == key then return kv.value.string_value end
  end
  return nil
end

describe("the OTLP exporter (protocall.resty.otlp) without nginx", function()
  local otlp, stub, ex

  local function ready()
    local f = io.open(PROTOS .. "/opentelemetry/proto/collector/trace/v1/trace_service.proto")
    if not f then
      corpus.skip(pending, "the OTLP exporter's schemas (opentelemetry-proto)")
      return false
    end
    f:close()
    logs = {}
    otlp, stub = load_otlp()
    ex = otlp.new(pc, { target = "127.0.0.1:1", protos = PROTOS })
    return true
  end

  local GOOD = { name = "good", start = 1.7e9, finish = 1.7e9 + 1 }

  it("refuses spans whose times are not finite, negative, past 2^63 ns or ending before they start", function()
    if not ready() then return end
    for _, t in ipairs {
      { 0 / 0, 1, "^invalid span: start: " }, { 1, math.huge, "^invalid span: finish: " },
      { 1e300, 1e300, "^invalid span: start: " }, { -5, 1, "^invalid span: start: " },
      { 1, -math.huge, "^invalid span: finish: " }, { 2 ^ 63 / 1e9, 2 ^ 63 / 1e9, "^invalid span: start: " },
      { "1", 2, "^invalid span: start: " }, { 1.7e9 + 1, 1.7e9, "^invalid span: finish .* is before start " },
    } do
      local ok, err = ex:span { name = "bad", start = t[1], finish = t[2] }
      assert.is_nil(ok)
      assert.matches(t[3], err)
    end
    assert.is_true(ex:span(GOOD))
    -- the last second before 2^63 ns is a time still
    assert.is_true(ex:span { name = "late", start = 9.2e9, finish = 9.2e9 })
    local s = ex:stats()
    assert.are.same({ 8, 2, 2 }, { s.invalid, s.queued, s.waiting })
    assert.matches("is before start", s.invalid_reason, 1, true)
    local sent = {}
    ex:drain(encoding_call(sent), 1)
    local spans = spans_of(sent)
    assert.are.equal(2, #spans)
    -- (a uint64: an integer under Lua 5.4, a uint64_t cdata under LuaJIT)
    assert.are.equal("1700000000000000000", (tostring(spans[1].start_time_unix_nano):gsub("U?LL$", "")))
    assert.are.equal("9200000000000000000", (tostring(spans[2].end_time_unix_nano):gsub("U?LL$", "")))
    s = ex:stats()
    assert.are.same({ 2, 0, 0 }, { s.exported, s.failed, s.waiting })
    -- the timer's run logs the refused spans once, with the last reason
    assert.are.equal(1, #logs)
    assert.matches("8 invalid span%(s%) refused, the last: finish .* is before start", logs[1][2])
  end)

  it("refuses ids that are not 32 (trace) or 16 (span) hex digits, or all zeros", function()
    if not ready() then return end
    for _, t in ipairs {
      { trace_id = "zz" }, { trace_id = "abcd" }, { trace_id = ("0"):rep(32) }, { trace_id = ("a"):rep(33) },
      { trace_id = ("g"):rep(32) }, { trace_id = 12 }, { span_id = "zz" }, { span_id = ("0"):rep(16) },
      { span_id = ("a"):rep(32) }, { parent_span_id = "xyz" }, { parent_span_id = ("0"):rep(16) },
    } do
      local field = next(t)
      local s = { name = "bad", start = 1, finish = 2 }
      s[field] = t[field]
      local ok, err = ex:span(s)
      assert.is_nil(ok)
      assert.matches("^invalid span: " .. field .. ": ", err)
    end
    local trace, span = "0AF7651916CD43DD8448EB211C80319C", "b7ad6b7169203331"
    assert.is_true(ex:span { name = "ok", start = 1, finish = 2, trace_id = trace, span_id = span,
      parent_span_id = "" })
    assert.are.equal(11, ex:stats().invalid)
    local sent = {}
    ex:drain(encoding_call(sent), 1)
    local spans = spans_of(sent)
    assert.are.equal(1, #spans)
    assert.are.same({ trace:lower(), span }, { hex(spans[1].trace_id), hex(spans[1].span_id) })
  end)

  it("refuses attributes of unsupported types, kinds and statuses it does not know", function()
    if not ready() then return end
    for _, t in ipairs {
      { { attributes = { a = { 1, 2 } } }, "attribute 'a': table" },
      { { attributes = { f = print } }, "attribute 'f': function" },
      { { attributes = { [1] = "x" } }, "attributes: key 1 is not a string" },
      { { attributes = "a=b" }, "attributes: a table expected" },
      { { kind = "weird" }, "kind: unknown kind weird" }, { { status = "bad" }, "status: " },
      { { status = "error", status_message = 5 }, "status_message: " }, { { name = 5 }, "name: " },
    } do
      local s = { name = "bad", start = 1, finish = 2 }
      for k, v in pairs(t[1]) do s[k] = v end
      local ok, err = ex:span(s)
      assert.is_nil(ok)
      assert.matches("invalid span: " .. t[2], err, 1, true)
    end
    local ok, err = ex:span("not a span")
    assert.is_nil(ok)
    assert.are.equal("invalid span: a table expected, got string", err)
    assert.are.same({ 9, 0 }, { ex:stats().invalid, ex:stats().queued })
    -- the resource's attributes are checked when the exporter is made (init_by_lua*)
    local made, e = pcall(otlp.new, pc, { target = "127.0.0.1:1", resource = { a = {} } })
    assert.is_false(made)
    assert.matches("protocall.resty.otlp.new: option 'resource': attribute 'a': table", e, 1, true)
  end)

  it("sends names, attributes and messages that are not UTF-8 with U+FFFD, the batch intact", function()
    if not ready() then return end
    assert.is_true(ex:span(GOOD))
    assert.is_true(ex:span { name = "GET /\255", start = 1, finish = 2, status = "error", status_message = "\192\128",
      attributes = { ["url.path"] = "/\255\254", ["k\237\160\128"] = "v", ok = "caf\195\169 \240\159\152\128" } })
    local sent = {}
    ex:drain(encoding_call(sent), 1)
    local spans = spans_of(sent)
    assert.are.equal(2, #spans)
    local s = spans[2]
    assert.are.equal("GET /" .. FFFD, s.name)
    assert.are.equal("/" .. FFFD .. FFFD, attribute(s, "url.path"))
    assert.are.equal("v", attribute(s, "k" .. FFFD .. FFFD .. FFFD))
    assert.are.equal("caf\195\169 \240\159\152\128", attribute(s, "ok"))
    assert.are.equal(FFFD .. FFFD, s.status.message)
    assert.are.same({ 2, 0 }, { ex:stats().exported, ex:stats().failed })
  end)

  it("replaces each maximal ill-formed subpart by one U+FFFD, as Unicode recommends", function()
    if not ready() then return end
    local v = otlp.utf8_valid
    for _, t in ipairs {
      { "plain ascii", "plain ascii" },
      { "\195\169\226\130\172\240\159\152\128", "\195\169\226\130\172\240\159\152\128" },
      { "\128", FFFD }, { "\192\128", FFFD .. FFFD }, { "\193\191", FFFD .. FFFD },
      { "\224\128\128", FFFD .. FFFD .. FFFD }, { "\237\160\128", FFFD .. FFFD .. FFFD },
      { "\244\144\128\128", FFFD .. FFFD .. FFFD .. FFFD }, { "\248\136\128\128\128", FFFD:rep(5) },
      { "a\226\130", "a" .. FFFD }, { "\226\130a", FFFD .. "a" }, { "\240\159\152", FFFD },
      { "\240\159\152\240\159\152\128", FFFD .. "\240\159\152\128" }, { "\255\254", FFFD .. FFFD },
      { "\237\159\191", "\237\159\191" }, { "\244\143\191\191", "\244\143\191\191" },
    } do
      assert.are.equal(t[2], v(t[1]), ("%q"):format(t[1]))
    end
  end)

  it("request_span: a request for /%FF with a bad User-Agent and an all-zero parent id is sent, repaired", function()
    if not ready() then return end
    otlp, stub = load_otlp {
      uri = "/\255", scheme = "http", remote_addr = "127.0.0.1", host = "h", http_user_agent = "agent\254",
      request_id = "4bf92f3577b34da6a3ce929d0e0e4736",
      http_traceparent = "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
    }
    ex = otlp.new(pc, { target = "127.0.0.1:1" })
    assert.is_true(ex:request_span())
    local sent = {}
    ex:drain(encoding_call(sent), 1)
    local s = spans_of(sent)[1]
    assert.are.equal("GET /" .. FFFD, s.name)
    assert.are.equal("agent" .. FFFD, attribute(s, "user_agent.original"))
    -- the traceparent's parent id is not an id: the trace is nginx's $request_id
    assert.are.equal("4bf92f3577b34da6a3ce929d0e0e4736", hex(s.trace_id))
    assert.are.equal("", s.parent_span_id)
    assert.are.equal(1, ex:stats().exported)
  end)

  it("counts every span of a flush: one that changed since span() took it, a call that raises", function()
    if not ready() then return end
    local changed = { name = "changed", start = 1, finish = 2 }
    assert.is_true(ex:span(GOOD))
    assert.is_true(ex:span(changed))
    assert.is_true(ex:span(GOOD))
    changed.start = 0 / 0
    local sent = {}
    ex:drain(encoding_call(sent), 1)
    assert.are.equal(2, #spans_of(sent))
    local s = ex:stats()
    assert.are.same({ 3, 2, 1, 0 }, { s.queued, s.exported, s.failed, s.waiting })
    assert.are.equal(1, #logs)
    assert.matches("1 span%(s%) left out of the export: start: ", logs[1][2])
    -- a call that raises (an encoding error, a bug): the batch is failed, logged once
    for _ = 1, 3 do assert.is_true(ex:span(GOOD)) end
    ex:drain(function() error("boom") end, 1)
    s = ex:stats()
    assert.are.same({ 6, 2, 4, 0 }, { s.queued, s.exported, s.failed, s.waiting })
    assert.are.equal(2, #logs)
    assert.matches("export of 3 span%(s%) to 127.0.0.1:1 failed %(attempt 1%): .*boom", logs[2][2])
    -- a collector claiming more rejected spans than it got: at most the batch
    for _ = 1, 2 do assert.is_true(ex:span(GOOD)) end
    ex:drain(encoding_call({}, { partial_success = { rejected_spans = 99, error_message = "no" } }), 1)
    s = ex:stats()
    assert.are.same({ 8, 2, 4, 2 }, { s.queued, s.exported, s.failed, s.rejected })
    assert.are.equal(s.queued, s.exported + s.failed + s.rejected)
    assert.is_table(stub)
  end)
end)
