--- An OTLP/gRPC trace exporter for OpenResty / nginx (doc/openresty.md,
-- "Exporting spans over OTLP/gRPC"): spans recorded in log_by_lua* (or any
-- phase) are queued per worker, bounded (spans past the bound are dropped
-- and counted), and a recurring ngx.timer sends them in batches to an
-- OpenTelemetry collector's
-- opentelemetry.proto.collector.trace.v1.TraceService/Export over gRPC,
-- through protocall.resty's call path (`resty.call`: the worker's shared
-- connection to the collector). The OTLP schemas are the user's
-- opentelemetry-proto files, loaded when the exporter is made.
--
-- Failures follow the OTLP specification's rules ("OTLP/gRPC Throttling"
-- and "Failures"): CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE,
-- UNAVAILABLE and DATA_LOSS are retried with exponential backoff and
-- jitter, RESOURCE_EXHAUSTED only when the server sent a
-- google.rpc.RetryInfo (or grpc-retry-pushback-ms), whose delay replaces
-- the backoff; any other status drops the batch. A partial success's
-- rejected spans are counted. When the worker exits (nginx -s quit,
-- reload), the timer runs once more and sends what is queued over a
-- connection of its own (the worker's shared one is closing then).
--
--   init_by_lua_block {
--     pc = require "protocall"
--     otlp = require("protocall.resty.otlp").new(pc, {
--       target = "127.0.0.1:4317", protos = "/usr/share/opentelemetry-proto",
--       service_name = "gateway" })
--   }
--   init_worker_by_lua_block { otlp:start() }
--   log_by_lua_block { otlp:request_span() }
local ngx = rawget(_G, "ngx")
local resty = require "protocall.resty"

local type, pairs, ipairs, tostring, error, pcall, setmetatable, tonumber, next =
  type, pairs, ipairs, tostring, error, pcall, setmetatable, tonumber, next
local floor, random, randomseed, min, max = math.floor, math.random, math.randomseed, math.min, math.max
local format, char, byte, find, sub, concat = string.format, string.char, string.byte, string.find, string.sub,
  table.concat

local M = {}

M.SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
M.PATH = "/" .. M.SERVICE .. "/Export"
M.PROTO = "opentelemetry/proto/collector/trace/v1/trace_service.proto"
local REQUEST = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"

--- The span kinds (opentelemetry.proto.trace.v1.Span.SpanKind) by the
-- names `span{kind = ...}` takes.
M.KIND = { internal = 1, server = 2, client = 3, producer = 4, consumer = 5 }

-- OTLP's retryable gRPC statuses (RESOURCE_EXHAUSTED only with RetryInfo).
local RETRYABLE = {
  CANCELLED = true, DEADLINE_EXCEEDED = true, ABORTED = true, OUT_OF_RANGE = true,
  UNAVAILABLE = true, DATA_LOSS = true,
}

local DEFAULTS = {
  interval = 1,          -- seconds between the timer's runs
  batch_size = 512,      -- spans per Export at most
  max_queue = 8192,      -- spans queued per worker at most
  timeout = 10,          -- seconds per Export attempt
  max_attempts = 5,      -- Export attempts per batch (1: no retry)
  initial_backoff = 1,   -- seconds before the first retry
  max_backoff = 30,      -- seconds between retries at most
  exit_timeout = 3,      -- seconds per Export attempt when the worker exits
}

local OPTIONS = {
  target = "string", protos = "table|string", service_name = "string", resource = "table",
  scope = "string", metadata = "table", transport = "table",
}
for k in pairs(DEFAULTS) do OPTIONS[k] = "number" end

local BYTE_OF = {} -- "0a" -> "\n"
for i = 0, 255 do BYTE_OF[format("%02x", i)] = char(i) end

local function hex_to_bin(h)
  return (h:lower():gsub("%x%x", BYTE_OF))
end

-- Times span() takes: seconds since the epoch, 0 <= t < MAX_SECONDS (2^63
-- nanoseconds, the year 2262: the fields are uint64 nanoseconds, and Lua
-- 5.4's integers are signed).
local MAX_SECONDS = 2 ^ 63 / 1e9

-- Nanoseconds since the epoch of `seconds` (a float), to microseconds:
-- under LuaJIT a decimal string (1.7e18 is past its exact numbers; 64-bit
-- fields take decimal strings there), under Lua 5.4 an integer. Raises
-- (naming the value) outside 0 .. MAX_SECONDS.
local tointeger = math.tointeger
local function nanos(seconds)
  if type(seconds) ~= "number" or not (seconds >= 0 and seconds < MAX_SECONDS) then
    error("time " .. tostring(seconds) .. " is not seconds since the epoch (0 to 2^63 ns)", 0)
  end
  local us = floor(seconds * 1e6 + 0.5)
  if tointeger then return tointeger(us) * 1000 end
  return format("%.0f000", us)
end

local REPLACEMENT = "\239\191\189" -- U+FFFD

-- `s` with each ill-formed UTF-8 sequence (its maximal subpart, as Unicode
-- recommends and OpenTelemetry SDKs do) replaced by U+FFFD: string fields
-- must be UTF-8, and one bad byte would fail the encoding of the batch.
local function utf8_valid(s)
  if not find(s, "[\128-\255]") then return s end
  local out, n, i, len, run = {}, 0, 1, #s, 1 -- run: first byte not copied yet
  while i <= len do
    local c = byte(s, i)
    if c < 0x80 then
      i = i + 1
    else
      local need, lo, hi = 0, 0x80, 0xBF -- continuation bytes; the second byte's range
      if c >= 0xC2 and c <= 0xDF then need = 1
      elseif c == 0xE0 then need, lo = 2, 0xA0 -- not overlong
      elseif c == 0xED then need, hi = 2, 0x9F -- not a surrogate
      elseif c >= 0xE1 and c <= 0xEF then need = 2
      elseif c == 0xF0 then need, lo = 3, 0x90
      elseif c >= 0xF1 and c <= 0xF3 then need = 3
      elseif c == 0xF4 then need, hi = 3, 0x8F -- not past U+10FFFF
      end
      local j, ok = i + 1, need > 0
      for _ = 1, need do
        local b = byte(s, j)
        if not b or b < lo or b > hi then ok = false break end
        lo, hi, j = 0x80, 0xBF, j + 1
      end
      if not ok then
        out[n + 1], out[n + 2], n = sub(s, run, i - 1), REPLACEMENT, n + 2
        run = j
      end
      i = j
    end
  end
  if n == 0 then return s end
  out[n + 1] = sub(s, run)
  return concat(out)
end

-- An OTLP AnyValue of a Lua value (a string, boolean or number).
local function any_value(v)
  local t = type(v)
  if t == "string" then return { string_value = utf8_valid(v) } end
  if t == "boolean" then return { bool_value = v } end
  if t == "number" then
    if v == floor(v) and v > -2 ^ 53 and v < 2 ^ 53 then return { int_value = v } end
    return { double_value = v }
  end
  error("attribute value of type " .. t .. " (string, number or boolean expected)", 0)
end

-- A list of OTLP KeyValue of a table {key = value}.
local function key_values(attrs)
  local list = {}
  if attrs == nil then return list end
  for k, v in pairs(attrs) do
    if type(k) == "string" then list[#list + 1] = { key = utf8_valid(k), value = any_value(v) } end
  end
  return list
end

local ATTRIBUTE_TYPES = { string = true, number = true, boolean = true }

-- Why `attrs` cannot be a span's attributes, or nil.
local function attributes_problem(attrs)
  if attrs == nil then return nil end
  if type(attrs) ~= "table" then return "attributes: a table expected, got " .. type(attrs) end
  for k, v in next, attrs do
    if type(k) ~= "string" then return "attributes: key " .. tostring(k) .. " is not a string" end
    if not ATTRIBUTE_TYPES[type(v)] then
      return "attribute '" .. utf8_valid(k) .. "': " .. type(v) .. " (string, number or boolean expected)"
    end
  end
  return nil
end

local function check_options(opts, level)
  if type(opts) ~= "table" then
    error("bad argument #2 to 'otlp.new' (table of options expected, got " .. type(opts) .. ")", level + 1)
  end
  for k, v in pairs(opts) do
    local want = OPTIONS[k]
    if not want then error("protocall.resty.otlp.new: unknown option '" .. tostring(k) .. "'", level + 1) end
    if not want:find(type(v), 1, true) then
      error("protocall.resty.otlp.new: option '" .. k .. "' must be a " .. want .. ", got " .. type(v), level + 1)
    end
  end
  if not opts.target then error("protocall.resty.otlp.new: option 'target' (the collector) is required", level + 1) end
  local problem = attributes_problem(opts.resource)
  if problem then error("protocall.resty.otlp.new: option 'resource': " .. problem, level + 1) end
  for k in pairs(DEFAULTS) do
    local v = opts[k]
    if v ~= nil and (v ~= v or v <= 0) then
      error("protocall.resty.otlp.new: option '" .. k .. "' must be positive, got " .. tostring(v), level + 1)
    end
  end
end

local Exporter = {}
Exporter.__index = Exporter

--- `otlp.new(pc, opts)` -> an exporter. Call it in init_by_lua* (the
-- master: every worker gets a copy with a queue of its own). `opts`:
-- `target` (required: the collector, as pc.grpc takes it, "127.0.0.1:4317",
-- "unix:/run/otel.sock", "https://otel.example:4317"); `protos`: the
-- folder (or list of folders) holding opentelemetry-proto's files
-- (opentelemetry/proto/collector/trace/v1/trace_service.proto and its
-- imports), loaded now into pc's default pool (not needed when the
-- schema is loaded already); `service_name` (default "nginx": the
-- resource's service.name), `resource` (more resource attributes
-- {key = value}), `scope` (the instrumentation scope's name, default
-- "protocall.resty.otlp"); `metadata` (sent with every Export, as a call's
-- `metadata` option takes it, e.g. an authorization header); `transport`
-- (pc.grpc options of the worker's connection: ca_file, cert_file, ...);
-- numbers: `interval` (seconds between the timer's runs, 1),
-- `batch_size` (spans per Export, 512), `max_queue` (spans queued per
-- worker, 8192: more are dropped and counted), `timeout` (seconds per
-- Export attempt, 10), `max_attempts` (5), `initial_backoff` (1 s),
-- `max_backoff` (30 s), `exit_timeout` (seconds per Export when the
-- worker exits, 3). Raises on a bad option or when the schema cannot be
-- loaded (the error of pc.load_file, naming the file).
function M.new(pc, opts)
  if type(pc) ~= "table" or type(pc.load_file) ~= "function" then
    error("bad argument #1 to 'otlp.new' (the protocall module expected)", 2)
  end
  check_options(opts, 2)
  if not pc.type(REQUEST) then
    local dirs = opts.protos
    if dirs == nil then
      error("protocall.resty.otlp.new: option 'protos' (the folder of opentelemetry-proto's files) is required: "
        .. REQUEST .. " is not loaded", 2)
    end
    if type(dirs) == "string" then dirs = { dirs } end
    local ok, err = pc.load_file(M.PROTO, { import_paths = dirs })
    if not ok then error("protocall.resty.otlp.new: cannot load " .. M.PROTO .. ": " .. tostring(err), 2) end
  end
  local self = setmetatable({ pc = pc, target = opts.target, metadata = opts.metadata,
                              transport = opts.transport }, Exporter)
  for k, v in pairs(DEFAULTS) do self[k] = opts[k] or v end
  local attrs = { ["service.name"] = opts.service_name or "nginx" }
  for k, v in pairs(opts.resource or {}) do attrs[k] = v end
  self.resource = { attributes = key_values(attrs) }
  self.scope = { name = opts.scope or "protocall.resty.otlp" }
  -- The queue: a ring of span tables, head (next out) to tail (last in).
  self.queue, self.head, self.tail = {}, 1, 0
  self.counts = { queued = 0, exported = 0, dropped = 0, invalid = 0, failed = 0, rejected = 0, batches = 0,
                  retries = 0 }
  self.invalid_logged = 0
  return self
end

--- `exporter:start()`: starts this worker's export timer (an ngx.timer.every
-- of `interval` seconds); call it in init_worker_by_lua*. Seeds the
-- worker's span ids. Returns true, or nil and nginx's error.
function Exporter:start()
  if not ngx then error("protocall.resty.otlp: start needs nginx (lua-nginx-module)", 2) end
  randomseed(ngx.worker.pid() * 1000003 + floor(ngx.now() * 1000))
  local me = self
  local ok, err = ngx.timer.every(self.interval, function(premature) me:run(premature) end)
  if not ok then return nil, "cannot start the OTLP export timer: " .. tostring(err) end
  return true
end

-- `n` (8 or 16) random bytes as hex digits.
local function random_hex(n)
  local h = format("%04x%04x%04x%04x", random(0, 65535), random(0, 65535), random(0, 65535), random(0, 65535))
  if n == 16 then return h .. random_hex(8) end
  return h
end

local STATUS = { ok = 1, error = 2 }

local ZEROS = { [16] = ("0"):rep(16), [32] = ("0"):rep(32) }

-- Why `id` (a trace id of 32 hex digits, a span id of 16) is not one, or false.
local function id_problem(what, id, digits)
  if type(id) ~= "string" or #id ~= digits or find(id, "%X") then
    return what .. ": " .. digits .. " hex digits expected, got " .. (type(id) == "string"
      and format("%q", #id > 40 and sub(id, 1, 40) .. "..." or id) or type(id))
  end
  if id == ZEROS[digits] then return what .. ": all zeros (an invalid id)" end
  return false
end

local function time_problem(what, v)
  return what .. ": seconds since the epoch expected (0 to 2^63 ns), got " .. tostring(v)
end

-- Why the span table `s` cannot be exported, or nil.
local function span_problem(s)
  if type(s) ~= "table" then return "a table expected, got " .. type(s) end
  if type(s.name) ~= "string" then return "name: a string expected, got " .. type(s.name) end
  local start, finish = s.start, s.finish
  if type(start) ~= "number" or not (start >= 0 and start < MAX_SECONDS) then return time_problem("start", start) end
  if type(finish) ~= "number" or not (finish >= 0 and finish < MAX_SECONDS) then
    return time_problem("finish", finish)
  end
  if finish < start then return "finish " .. tostring(finish) .. " is before start " .. tostring(start) end
  local p = s.trace_id ~= nil and id_problem("trace_id", s.trace_id, 32)
    or s.span_id ~= nil and id_problem("span_id", s.span_id, 16)
    or s.parent_span_id ~= nil and s.parent_span_id ~= "" and id_problem("parent_span_id", s.parent_span_id, 16)
  if p then return p end
  if s.kind ~= nil and not M.KIND[s.kind] then return "kind: unknown kind " .. tostring(s.kind) end
  if s.status ~= nil and not STATUS[s.status] then return "status: \"ok\" or \"error\" expected" end
  if s.status_message ~= nil and type(s.status_message) ~= "string" then
    return "status_message: a string expected, got " .. type(s.status_message)
  end
  return attributes_problem(s.attributes)
end

--- `ok, err = exporter:span(s)`: queues one span. `s`: `name` (string),
-- `start` and `finish` (seconds since the epoch, as ngx.now() and
-- ngx.req.start_time() give them; finite, finish >= start, before 2262),
-- `attributes` ({key = string, number, boolean}), `kind` ("server"
-- (default), "client", "internal", "producer", "consumer"), `trace_id` (32
-- hex digits, not all zeros; default random), `span_id` (16 hex digits;
-- default random), `parent_span_id` (16 hex digits), `status` ("error" or
-- "ok"; default unset) and `status_message`. Strings that are not UTF-8
-- are sent with U+FFFD for each bad sequence. Returns true; or nil and
-- "queue full" when `max_queue` spans wait already (the span is dropped
-- and counted: stats().dropped); or nil and "invalid span: " and why when
-- `s` is not such a span (refused and counted: stats().invalid; the
-- timer logs the count and the last reason). Never raises on bad data.
-- Cheap enough for log_by_lua*: the OTLP message is made by the timer.
function Exporter:span(s)
  local counts = self.counts
  local problem = span_problem(s)
  if problem then
    counts.invalid = counts.invalid + 1
    self.invalid_reason = problem
    return nil, "invalid span: " .. problem
  end
  if self.tail - self.head + 1 >= self.max_queue then
    counts.dropped = counts.dropped + 1
    return nil, "queue full"
  end
  local tail = self.tail + 1
  self.queue[tail], self.tail = s, tail
  counts.queued = counts.queued + 1
  -- A full batch is sent at once, not at the next run of the timer.
  if ngx and not self.busy and not self.kicked and tail - self.head + 1 >= self.batch_size then
    self.kicked = true
    local me = self
    if not ngx.timer.at(0, function(premature) me.kicked = false; me:run(premature) end) then self.kicked = false end
  end
  return true
end

-- traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>
local function traceparent(h)
  if type(h) ~= "string" then return nil end
  local trace, parent = h:match("^%x%x%-(%x+)%-(%x+)%-%x%x")
  if trace and #trace == 32 and #parent == 16 and find(trace, "[1-9a-fA-F]") and find(parent, "[1-9a-fA-F]") then
    return trace:lower(), parent:lower()
  end
  return nil
end

--- `ok, err = exporter:request_span(extra)`: queues the span of the
-- current request (call it in log_by_lua*): name "METHOD /path" (or
-- `extra.name`), start ngx.req.start_time(), finish now, kind server; its
-- trace id and parent from the request's W3C `traceparent` header, else
-- the trace id is nginx's $request_id; attributes http.request.method,
-- url.path, url.scheme, http.response.status_code, client.address,
-- server.address, user_agent.original and `extra.attributes`; status
-- error for a 5xx response. As exporter:span otherwise.
function Exporter:request_span(extra)
  local var = ngx.var
  local method, path = ngx.req.get_method(), var.uri
  local status = ngx.status
  local trace, parent = traceparent(var.http_traceparent)
  local attrs = {
    ["http.request.method"] = method, ["url.path"] = path, ["url.scheme"] = var.scheme,
    ["http.response.status_code"] = status, ["client.address"] = var.remote_addr,
    ["server.address"] = var.host, ["user_agent.original"] = var.http_user_agent,
  }
  if extra and extra.attributes then
    for k, v in pairs(extra.attributes) do attrs[k] = v end
  end
  return self:span {
    name = extra and extra.name or (method .. " " .. path),
    start = ngx.req.start_time(), finish = ngx.now(), attributes = attrs,
    trace_id = trace or var.request_id, parent_span_id = parent,
    status = status >= 500 and "error" or nil,
  }
end

-- The OTLP Span of a queued span table; raises (the reason) on one that is
-- not a span (changed since exporter:span took it).
local function otlp_span(s)
  local problem = span_problem(s)
  if problem then error(problem, 0) end
  local status
  if s.status then
    status = { code = STATUS[s.status], message = s.status_message and utf8_valid(s.status_message) }
  end
  return {
    trace_id = hex_to_bin(s.trace_id or random_hex(16)), span_id = hex_to_bin(s.span_id or random_hex(8)),
    parent_span_id = s.parent_span_id and hex_to_bin(s.parent_span_id) or nil,
    name = utf8_valid(s.name), kind = M.KIND[s.kind or "server"],
    start_time_unix_nano = nanos(s.start), end_time_unix_nano = nanos(s.finish),
    attributes = key_values(s.attributes), status = status,
  }
end

-- The next batch taken off the queue: a list of at most batch_size spans.
function Exporter:take()
  local q, head = self.queue, self.head
  local last = min(self.tail, head + self.batch_size - 1)
  local batch = {}
  for i = head, last do
    batch[#batch + 1] = q[i]
    q[i] = nil
  end
  self.head = last + 1
  if self.head > self.tail then self.head, self.tail = 1, 0 end
  return batch
end

-- The export request of a batch of queued spans; the number of spans left
-- out (those otlp_span refused) and the first one's reason.
function Exporter:request(batch)
  local spans, bad, reason = {}, 0, nil
  for _, s in ipairs(batch) do
    local ok, span = pcall(otlp_span, s)
    if ok then
      spans[#spans + 1] = span
    else
      bad, reason = bad + 1, reason or tostring(span)
    end
  end
  return { resource_spans = { { resource = self.resource, scope_spans = { { scope = self.scope, spans = spans } } } } },
    bad, reason
end

-- Seconds to wait before the next attempt after `err` (attempt `n` failed), or nil: not retryable.
function Exporter:backoff(err, n)
  if type(err) ~= "table" or err["local"] then return nil end
  local code, delay = err.code, err.retry_delay
  if delay ~= nil and delay < 0 then return nil end
  if not RETRYABLE[code] and not (code == "RESOURCE_EXHAUSTED" and delay ~= nil) then return nil end
  if delay then return delay end
  local cap = min(self.max_backoff, self.initial_backoff * 2 ^ (n - 1))
  return cap / 2 + random() * cap / 2
end

-- Logs at `level` ("ERR", "WARN") in nginx's error log (nothing outside nginx).
local function log(level, ...)
  if ngx then ngx.log(ngx[level], "protocall.resty.otlp: ", ...) end
end

-- Sends one batch: Export with retries by OTLP's rules; `call(request)`
-- returns the response, or nil and the error (or raises it). Counts every
-- span of the batch: exported, rejected or failed (each failure logged
-- once, with its reason).
function Exporter:send(batch, call, attempts)
  local counts = self.counts
  local request, bad, reason = self:request(batch)
  if bad > 0 then
    counts.failed = counts.failed + bad
    log("ERR", bad, " span(s) left out of the export: ", reason)
  end
  local size = #batch - bad
  if size == 0 then return false end
  for n = 1, attempts do
    local fine, response, err = pcall(call, request)
    if not fine then response, err = nil, response end
    if response then
      counts.batches = counts.batches + 1
      local partial = response.partial_success
      local rejected = min(max(partial and tonumber(partial.rejected_spans) or 0, 0), size)
      if rejected > 0 then
        counts.rejected = counts.rejected + rejected
        log("WARN", "the collector rejected ", rejected, " span(s): ", partial.error_message)
      end
      counts.exported = counts.exported + size - rejected
      return true
    end
    local delay = n < attempts and self:backoff(err, n)
    if not delay then
      counts.failed = counts.failed + size
      log("ERR", "export of ", size, " span(s) to ", self.target, " failed (attempt ", n, "): ", tostring(err))
      return false
    end
    counts.retries = counts.retries + 1
    ngx.sleep(delay)
  end
end

--- `exporter:flush()`: sends everything queued now, in batches (in a
-- phase with cosockets: a timer, content_by_lua*, ...); returns when it is
-- sent or given up. What the timer runs; does nothing while another flush
-- of this worker runs.
function Exporter:flush()
  if self.busy then return end
  self.busy = true
  local pc, target, path, settings = self.pc, self.target, M.PATH,
    { timeout = self.timeout, metadata = self.metadata, transport = self.transport }
  local function call(request) return resty.call(pc, target, path, request, settings) end
  self:drain(call, self.max_attempts)
  self.busy = false
end

-- Sends the queue in batches; a batch whose send raises (a bug) is counted
-- failed and logged, not lost silently.
function Exporter:drain(call, attempts)
  local counts = self.counts
  if counts.invalid > self.invalid_logged then
    log("WARN", counts.invalid - self.invalid_logged, " invalid span(s) refused, the last: ", self.invalid_reason)
    self.invalid_logged = counts.invalid
  end
  while self.tail >= self.head do
    local batch = self:take()
    local ok, err = pcall(self.send, self, batch, call, attempts)
    if not ok then
      counts.failed = counts.failed + #batch
      log("ERR", "export of ", #batch, " span(s) failed: ", tostring(err))
    end
  end
end

-- The worker exits: what is queued goes over a connection of this timer
-- (the shared connection's timer is ending), one attempt per batch.
function Exporter:flush_on_exit()
  if self.tail < self.head then return end
  local pc = self.pc
  local o = { per_request = true }
  for k, v in pairs(self.transport or {}) do o[k] = v end
  local ok, err = pcall(function()
    local t = resty.grpc(pc, self.target, o)
    local client = resty.client(pc, M.SERVICE, { transport = t })
    local settings = { timeout = self.exit_timeout, metadata = self.metadata }
    local function call(request)
      local fine, response = pcall(client.Export, client, request, settings)
      if fine then return response end
      return nil, response
    end
    self:drain(call, 1)
    t:close()
  end)
  if not ok then
    local left = self.tail - self.head + 1
    self.queue, self.head, self.tail = {}, 1, 0
    self.counts.failed = self.counts.failed + left
    log("ERR", "export of ", left, " span(s) at worker exit failed: ", tostring(err))
  end
end

-- The timer's run: a flush, or at worker exit the last one.
function Exporter:run(premature)
  if premature then return self:flush_on_exit() end
  self:flush()
end

--- `exporter:stats()` -> this worker's counts (spans unless said):
-- `queued` (accepted by span), `exported` (accepted by the collector),
-- `dropped` (queue full), `invalid` (refused by span: not a span),
-- `failed` (given up after the attempts or on a status not retried, or
-- not encodable), `rejected` (a partial success's rejected_spans),
-- `batches` (successful Exports), `retries` (Export attempts retried),
-- `waiting` (in the queue now); `invalid_reason` (a string: why the last
-- invalid span was refused; nil when none was).
function Exporter:stats()
  local t = {}
  for k, v in pairs(self.counts) do t[k] = v end
  t.waiting = self.tail - self.head + 1
  t.invalid_reason = self.invalid_reason
  return t
end

M.Exporter = Exporter
M.hex_to_bin, M.nanos, M.utf8_valid = hex_to_bin, nanos, utf8_valid
return M
