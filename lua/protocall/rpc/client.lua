--- pc.client: a stub whose methods are cached callables
-- (call/callable.lua) around one attempt over a transport
-- (rpc/attempts.lua), with the service's defaults, a service config
-- (rpc/service_config.lua), interceptors (rpc/interceptors.lua) and, for
-- server streams, resumption. Client-streaming and bidirectional methods
-- return a call object over transport:stream.
--
-- A call's options take one path: the per-call options table is checked
-- once here (call/policy.lua option_problem, in the method's name), the
-- callable resolves it to a plan and calls the attempt with (request,
-- timeout, metadata, compression, attempt), and the attempt hands the
-- transport one settings table {timeout =, metadata =, compression =,
-- with_metadata =, previous_attempts =}, which reaches the C channel as it
-- is (transport/grpc.lua).
local core = require "protocall.core"
local errors = require "protocall.errors"
local internal = require "protocall.internal"
local message = require "protocall.message"
local schema = require "protocall.schema"
local sched = require "protocall.sched"
local policy = require "protocall.call.policy"
local callable = require "protocall.call.callable"
local attempts = require "protocall.rpc.attempts"
local interceptors = require "protocall.rpc.interceptors"
local service_config = require "protocall.rpc.service_config"
local refusal = require("protocall.validate").refusal

local type, error, pairs, ipairs, next, tostring, pcall, getmetatable, setmetatable, rawget =
  type, error, pairs, ipairs, next, tostring, pcall, getmetatable, setmetatable, rawget
local format = string.format
local status = errors.status
local encode, decode, protect = core.encode, core.decode, core.protect
local to_json, from_json = core.to_json, core.from_json
local JSON_IN = { ignore_unknown = true } -- as attempts.lua reads responses
local DEFAULT, option_problem, metadata_problem = policy.DEFAULT, policy.option_problem, core.metadata_problem
local compression_problem, attempt_problem = internal.compression_problem, internal.attempt_problem
local with_metadata_problem = internal.with_metadata_problem
local as_message = message.as_message

local M = {}

local POLICY_KEYS = { retry = true, timeout = true, compression = true, metadata = true }
local CLIENT_KEYS = { transport = true, pool = true, methods = true, cache_size = true,
                      clock = true, sleep = true, random = true, service_config = true,
                      throttle = true, interceptors = true, validate = true }
for k in pairs(POLICY_KEYS) do CLIENT_KEYS[k] = true end
local METHOD_KEYS = { resume = true }
for k in pairs(POLICY_KEYS) do METHOD_KEYS[k] = true end

-- What is wrong with the policy options in `t` (client, method or call
-- level) that a transport would refuse, or nil; the callable checks the
-- rest (option_problem).
local function options_problem(t)
  if t.metadata ~= nil and t.metadata ~= DEFAULT then
    local problem = metadata_problem(t.metadata)
    if problem then return problem end
  end
  if t.resume ~= nil and type(t.resume) ~= "function" then
    return "resume: function expected, got " .. type(t.resume)
  end
  if t.compression ~= DEFAULT then return compression_problem(t.compression) end
  return nil
end

-- Raises "bad argument #2 to 'name' (...)" at `level` (as error's; 0: no
-- position) for per-call options `opts` of a stub method that the
-- callable or the transport would refuse, so the call itself never raises
-- misuse.
local function check_call_options(name, opts, level)
  level = level > 0 and level + 1 or 0
  if type(opts) ~= "table" then
    error(format("bad argument #2 to '%s' (table of options expected, got %s)", name, type(opts)), level)
  end
  local problem = options_problem(opts)
  if not problem then
    for k, v in next, opts do
      problem = option_problem(k, v)
      if problem then break end
    end
  end
  if problem then error(format("bad argument #2 to '%s' (%s)", name, problem), level) end
end

-- A method's callable defaults: its explicit `methods.Name` options, then
-- the service config's entry for it (retry and timeout), then the
-- client's options.
local function defaults_for(opts, per, entry, throttle)
  local d = {
    cache_size = opts.cache_size, clock = opts.clock, sleep = opts.sleep, random = opts.random,
    throttle = throttle,
  }
  local from_config = {}
  if entry then
    from_config.retry = entry.retry
    if entry.hedging then from_config.retry = false end -- the hedges are the attempts
    if entry.per_attempt then
      from_config.timeout = policy.ExponentialTimeout { initial = entry.per_attempt,
        maximum = entry.per_attempt, multiplier = 1, deadline = entry.timeout or false }
    else
      from_config.timeout = entry.timeout
    end
  end
  for k in pairs(POLICY_KEYS) do
    local v = per and per[k]
    if v == nil then v = from_config[k] end
    if v == nil then v = opts[k] end
    d[k] = v
  end
  return d
end

-- Per-call options without the key `key`, and its value: the table itself
-- when it lacks the key, a copy without it otherwise (nil when nothing is
-- left).
local function without(call_opts, key)
  if type(call_opts) ~= "table" or call_opts[key] == nil then return call_opts, nil end
  local rest = {}
  for k, v in pairs(call_opts) do
    if k ~= key then rest[k] = v end
  end
  return next(rest) ~= nil and rest or nil, call_opts[key]
end

-- Per-call options without `with_metadata`, what it asked (true,
-- "present" or false), and what is wrong with its value (the transports'
-- words: internal.with_metadata_problem).
local function split_with_metadata(call_opts)
  local rest, want = without(call_opts, "with_metadata")
  local problem = with_metadata_problem(want)
  if problem then return nil, nil, problem end
  return rest, want or false
end

-------------------------------------------------------------------------------
-- Client-streaming and bidirectional methods

-- `stub:Method([opts])` returns a call object over transport:stream
-- (pc.grpc's) whose `send` takes messages of the input type (or plain
-- tables of it) and whose `recv` / `close_and_recv` return messages of the
-- output type; also `close_send`, `headers`, `trailers`, `cancel`,
-- `close`. A transport without `stream` raises "pkg.Service.Method:
-- client-streaming and bidirectional calls are not supported yet". Not
-- retried (the requests are the caller's to send); the timeout (the
-- call's, the method's or the client's; an ExponentialTimeout gives its
-- `initial`) covers the whole call.
local StubCall = { __name = "protocall.StubCall" }
StubCall.__index = StubCall

function StubCall:send(msg)
  msg = as_message(self.input, msg, self.full .. " request", 2)
  local refused = self.validate and refusal(msg)
  if refused then error(refused, 0) end
  local ok, bytes = protect(self.json and to_json or encode, msg)
  if not ok then error(self.full .. " request: " .. tostring(bytes), 2) end
  return self.call:send(bytes)
end

--- call:send_bytes(bytes): sends one request already encoded in the
-- transport's codec (protobuf wire bytes; pc.to_json's text over a
-- transport with codec "json"), as a proxy passes on what it read: no
-- message is made, so the client's `validate` does not see it (check it
-- before, as `protocall gateway` does with the transcoder's `validate`).
-- Waits and raises as call:send does; a non-string raises "bad argument
-- #1 to 'send_bytes' (string expected, got ...)".
function StubCall:send_bytes(bytes)
  if type(bytes) ~= "string" then
    error("bad argument #1 to 'send_bytes' (string expected, got " .. type(bytes) .. ")", 2)
  end
  return self.call:send(bytes)
end

local function decoded_reply(self, bytes)
  if bytes == nil then return nil end
  local resp, err
  if self.json then
    resp, err = from_json(self.output, bytes, JSON_IN)
  else
    resp, err = decode(self.output, bytes)
  end
  if not resp then
    error(status("INTERNAL", self.full .. ": response failed to decode: " .. err,
                 { ["local"] = true }), 0)
  end
  return resp
end

function StubCall:recv() return decoded_reply(self, self.call:recv()) end
function StubCall:close_and_recv() return decoded_reply(self, self.call:close_and_recv()) end
function StubCall:close_send() return self.call:close_send() end
function StubCall:headers() return self.call:headers() end
function StubCall:trailers() return self.call:trailers() end
function StubCall:cancel() return self.call:cancel() end
function StubCall:close() return self.call:close() end
StubCall.__close = StubCall.close

-- Raises "calling 'name' on bad self (transport is closed)" at `level`
-- when the stub's transport was closed (transport:close()), before any
-- attempt.
local function check_open(transport, name, level)
  if type(transport) == "table" and rawget(transport, "closed") == true then
    error(format("calling '%s' on bad self (transport is closed)", name), level + 1)
  end
end

-- Per-call options a client-streaming or bidirectional call refuses, and why.
local STREAM_REFUSED = {
  retry = "retry: client-streaming and bidirectional calls are not retried (the requests are the caller's to send)",
  resume = "resume: only server-streaming methods resume",
  with_metadata = "with_metadata: the call object has headers() and trailers()",
}

local function streaming_method(transport, m, d)
  local full, name = m.full_name, m.name
  return function(_, call_opts)
    if call_opts ~= nil and type(call_opts) ~= "table" then
      error(format("bad argument #1 to '%s' (table expected, got %s)", name, type(call_opts)), 2)
    end
    call_opts = call_opts or {}
    local bad = options_problem(call_opts)
    for k, v in next, call_opts do
      if bad then break end
      if k == "retry" or k == "resume" or k == "with_metadata" then
        bad = STREAM_REFUSED[k]
      else
        bad = option_problem(k, v)
      end
    end
    if bad then error(format("bad argument #1 to '%s' (%s)", name, bad), 2) end
    check_open(transport, name, 2)
    if type(transport.stream) ~= "function" then
      error(full .. ": client-streaming and bidirectional calls are not supported yet", 2)
    end
    local function pick(k)
      local v = call_opts[k]
      if v == nil or v == DEFAULT then v = d[k] end
      if v == false then v = nil end
      return v
    end
    local timeout = pick("timeout")
    if type(timeout) ~= "number" and timeout ~= nil then timeout = timeout.initial end
    local md, own = d.metadata, call_opts.metadata
    if own ~= nil and own ~= DEFAULT then
      local merged, seen = {}, {}
      for i = 1, #own do seen[own[i][1]] = true end
      for i = 1, md and #md or 0 do
        if not seen[md[i][1]] then merged[#merged + 1] = md[i] end
      end
      for i = 1, #own do merged[#merged + 1] = own[i] end
      md = merged
    end
    local call = transport:stream(m.path,
      { timeout = timeout, metadata = md, compression = pick("compression") })
    return setmetatable({ call = call, input = m.input, output = m.output, full = full, validate = d.validate,
      json = transport.json }, StubCall)
  end
end

-------------------------------------------------------------------------------
-- Unary and server-streaming methods

-- The stub method of unary or server-streaming method `m`: a callable
-- object whose call is invoke(stub, request, opts); `c` holds what the
-- client decided for every method (transport, opts, config, throttle,
-- clock, the interceptor chains). Returns nil and the problem when the
-- method's options are wrong.
local function unary_method(c, m)
  local opts, transport, service_name = c.opts, c.transport, c.service_name
  local input, full, name = m.input, m.full_name, m.name
  -- A transport with codec "json" (pc.grpc's over Connect or gRPC-Web)
  -- carries proto3 JSON: the requests go as pc.to_json's text.
  local json = transport.json
  local entry = c.config and service_config.entry_for(c.config, service_name, name)
  local max_request = entry and entry.max_request
  local per = c.per_method[name]
  -- A hedgingPolicy applies unless methods.Name sets its own retry.
  local hedging = entry and entry.hedging and not (per and per.retry ~= nil) and entry.hedging
  local attempt
  if hedging then
    attempt = attempts.hedged(transport, m, entry.max_response, hedging,
      c.throttle and policy.bucket_of(c.throttle), c.clock, opts.sleep or sched.sleep)
  else
    attempt = (m.server_streaming and attempts.server_stream or attempts.unary)(transport, m,
      entry and entry.max_response)
  end
  -- The callable's request is the encoded bytes, or with interceptors
  -- a record {bytes=, call=, attempts=} of the call.
  local target = attempt
  local per_attempt_chain, clock = c.per_attempt, c.clock
  if c.intercepted then
    -- With with_metadata, the attempt gets a record of its own
    -- whose metadata is copied to the call's record.
    local function attempt_of(rec, bytes, timeout, metadata, compression, n)
      if not rec.want_metadata then return attempt(bytes, timeout, metadata, compression, n) end
      local box = { bytes = bytes, sink = m.server_streaming and rec or nil, present = rec.present }
      local res = attempt(box, timeout, metadata, compression, n)
      if not box.sink then rec.metadata = box.metadata end
      return res
    end
    target = function(rec, timeout, metadata, compression, n)
      rec.attempts = n or 1
      if not per_attempt_chain then return attempt_of(rec, rec.bytes, timeout, metadata, compression, n) end
      local md = {}
      for i = 1, #metadata do md[i] = { metadata[i][1], metadata[i][2] } end
      local a = { method = full, service = service_name, name = name, request = rec.call.request,
        metadata = md, timeout = timeout, compression = compression, attempt = n or 1 }
      return interceptors.run(per_attempt_chain, 1, a, function(ac)
        -- what the interceptors hand on is checked again: the transport
        -- takes an attempt's settings as checked (internal.CHECKED)
        local bad = attempt_problem(ac.timeout, ac.metadata, ac.compression)
        if bad then error(format("%s: per_attempt interceptor: %s", full, bad), 0) end
        local bytes = rec.bytes
        if ac.request ~= rec.call.request then
          local msg = as_message(input, ac.request, full .. " request", 0)
          bytes = json and to_json(msg) or encode(msg)
        end
        return attempt_of(rec, bytes, ac.timeout, ac.metadata, ac.compression, n)
      end, clock(), clock)
    end
  end
  local call, problem = callable.new(target, defaults_for(opts, per, entry, not hedging and c.throttle or nil))
  if not call then return nil, format("%s: %s", full, problem) end
  local method_resume = per and per.resume

  -- The request's bytes, within the service config's size limit. A plain
  -- table goes straight to bytes (pc.encode(T, table): T{...}'s checks and
  -- errors, no message objects); anything else is checked as a message of
  -- the input type first. Misuse raises at `level` (as error's).
  local validate = opts.validate
  local function encoded(request, level)
    local ok, bytes
    if validate then
      request = as_message(input, request, full .. " request", level + 1)
      local refused = refusal(request)
      if refused then error(refused, 0) end
    end
    if json then
      ok, bytes = protect(to_json, as_message(input, request, full .. " request", level + 1))
    elseif type(request) == "table" then
      ok, bytes = protect(encode, input, request)
    else
      ok, bytes = protect(encode, as_message(input, request, full .. " request", level + 1))
    end
    if not ok then error(full .. " request: " .. tostring(bytes), level + 1) end
    if max_request and #bytes > max_request then
      error(attempts.too_large(full, "request", #bytes, max_request), 0)
    end
    return bytes
  end

  -- A server stream retried after a failure mid-stream with the
  -- request resume(request, last_response) returns; every attempt is
  -- one of the call's policy (backoff, attempt cap, deadline, throttle).
  local function resumable(request, call_opts, resume, rec)
    local s = callable.attempts(call, call_opts, 2)
    local bytes = rec and rec.bytes or encoded(request, 2)
    local function arg() if rec then rec.bytes = bytes; return rec end return bytes end
    local timeout, iter, last = s.first, nil, nil
    local function open()
      while true do
        local ok, it = pcall(target, arg(), timeout, s:metadata(), s.compression,
          s.attempts > 1 and s.attempts or nil)
        if ok then
          s.succeeded()
          iter = it
          return
        end
        timeout = s:failed(it)
      end
    end
    open()
    local f = function()
      while true do
        local ok, r = pcall(iter)
        if ok then
          if r ~= nil then last = r end
          return r
        end
        timeout = s:failed(r)
        if last ~= nil then
          local nreq = resume(request, last)
          if nreq == nil then return nil end
          request = as_message(input, nreq, full .. " resume", 0)
          bytes = encoded(request, 1)
          if rec then rec.call.request = request end
          last = nil
        end
        open()
      end
    end
    local closing = setmetatable({ current = function() return attempts.stream_closers[iter] end },
      attempts.Closing)
    attempts.stream_closers[f] = closing
    return f, closing
  end

  -- The call through the callable; misuse raises at the caller's `level`.
  local function call_with(request_arg, call_opts, level)
    if call_opts == nil then return call(request_arg) end
    check_call_options(name, call_opts, level + 1)
    return call(request_arg, call_opts)
  end

  local function plain(_, _, request, call_opts)
    local rest, resume = without(call_opts, "resume")
    if resume ~= nil then
      error(format("bad argument #2 to '%s' (resume: only server-streaming methods resume)", name), 2)
    end
    local want_md, bad
    rest, want_md, bad = split_with_metadata(rest)
    if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
    check_open(transport, name, 2)
    if want_md then
      local rec = { bytes = encoded(request, 2), present = want_md == "present" or nil }
      local res = call_with(rec, rest, 2)
      return res, attempts.metadata_result(rec)
    end
    local res = call_with(encoded(request, 2), rest, 2)
    return res
  end

  local invoke = plain
  if m.server_streaming then
    invoke = function(_, _, request, call_opts)
      if call_opts ~= nil and type(call_opts) == "table" then
        local bad = options_problem(call_opts)
        if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
      end
      local rest, resume = without(call_opts, "resume")
      resume = resume or method_resume
      local want_md, bad
      rest, want_md, bad = split_with_metadata(rest)
      if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
      check_open(transport, name, 2)
      local rec = want_md and { call = {} } or nil
      if rec then rec.bytes = encoded(request, 2) end
      if not resume then
        return attempts.stream_values(call_with(rec or encoded(request, 2), rest, 2), full, rec)
      end
      if rest ~= nil then check_call_options(name, rest, 2) end
      return attempts.stream_values(resumable(as_message(input, request, full .. " request", 2), rest, resume, rec),
        full, rec)
    end
  end

  if c.intercepted then
    local per_call_chain = c.per_call
    -- The call as interceptors see it: method, request (a message),
    -- metadata (a fresh list), options (a fresh table); after the call
    -- status, attempts, elapsed (and error on failure).
    invoke = function(_, _, request, call_opts)
      if call_opts ~= nil and type(call_opts) ~= "table" then
        error(format("bad argument #2 to '%s' (table of options expected, got %s)", name, type(call_opts)), 2)
      end
      local ic = { method = full, service = service_name, name = name,
        request = as_message(input, request, full .. " request", 2), metadata = {}, options = {},
        attempts = 0 }
      for k, v in pairs(call_opts or {}) do
        if k == "metadata" then
          local bad = metadata_problem(v)
          if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
          for i, p in ipairs(v) do ic.metadata[i] = { p[1], p[2] } end
        else
          ic.options[k] = v
        end
      end
      -- the caller's options are refused as without interceptors (what
      -- an interceptor hands on is checked in `terminal`)
      local given = ic.options
      local bad = given.resume ~= nil and not m.server_streaming and "resume: only server-streaming methods resume"
        or options_problem(given) or with_metadata_problem(given.with_metadata)
      for k, v in next, given do
        if bad then break end
        if k ~= "with_metadata" and k ~= "resume" then bad = option_problem(k, v) end
      end
      if bad then error(format("bad argument #2 to '%s' (%s)", name, bad), 2) end
      check_open(transport, name, 2)
      local t0 = clock()
      local function terminal(cc)
        local o = {}
        for k, v in pairs(cc.options) do o[k] = v end
        if #cc.metadata > 0 then o.metadata = cc.metadata end
        if o.resume ~= nil and not m.server_streaming then
          error(format("%s: resume: only server-streaming methods resume", full), 0)
        end
        local rest, resume = without(o, "resume")
        resume = resume or method_resume
        local want_md, bad_md
        rest, want_md, bad_md = split_with_metadata(rest)
        if bad_md then error(format("%s: %s", full, bad_md), 0) end
        if rest ~= nil and next(rest) == nil then rest = nil end
        local rec = { call = cc, attempts = 0, want_metadata = want_md, present = want_md == "present" or nil }
        cc.response_metadata = want_md and rec or nil
        rec.bytes = encoded(cc.request, 1)
        local ok, res
        if resume then
          if rest ~= nil then check_call_options(name, rest, 0) end
          ok, res = pcall(resumable, cc.request, rest, resume, rec)
        else
          ok, res = pcall(call_with, rec, rest, 1)
        end
        cc.attempts = rec.attempts
        if not ok then error(res, 0) end
        return res
      end
      local res = interceptors.run(per_call_chain or {}, 1, ic, terminal, t0, clock)
      if m.server_streaming then return attempts.stream_values(res, full, ic.response_metadata) end
      if ic.response_metadata then return res, attempts.metadata_result(ic.response_metadata) end
      return res
    end
  end

  return setmetatable({}, {
    __name = "protocall.Method", __call = invoke, __metatable = false,
    __index = { cache_info = function() return call:cache_info() end },
    __newindex = function() error("protocall.Method is read-only", 2) end,
  })
end

--- stub = pc.client(service_full_name, {transport=, retry=, timeout=,
-- metadata=, compression=, methods = {Name = {retry=, timeout=, metadata=,
-- compression=, resume=}}, service_config=, throttle=, interceptors=,
-- pool=, cache_size=, clock=, sleep=, random=, validate=})
-- Each method is a cached callable (pc.wrap_method) over the transport,
-- with the service's defaults overridden per method:
--   response = stub:Method(request [, {retry=, timeout=, metadata=, compression=}])
--   for response in stub:StreamMethod(request [, {resume=, ...}]) do ... end
--   local it, call = stub:StreamMethod(request): call:cancel() ends the stream
--     CANCELLED (the loop's next step raises it), call:close() quietly;
--     with {with_metadata = true} call:headers(), call:trailers()
--   stub.Method:cache_info() -> {hits=, misses=, size=, capacity=} of its plan cache
--   stub:throttle_info() -> the retry bucket's {tokens=, ...} (pc.Throttle:info), or nil
-- `request` is a message of the input type or a plain table of it. Per
-- call, `with_metadata = true` makes a unary method return `response,
-- {headers =, trailers =}` (the successful attempt's {key, value} lists,
-- as python grpc's with_call; over pc.inproc those the handler set) and a server-streaming
-- one `iterator, call` (see stub:StreamMethod); `with_metadata = "present"`, as
-- pc.grpc's transport calls take it, makes a unary method return nil instead
-- of that table when the answer carried no metadata but gRPC's own (over
-- pc.inproc: the handler set none), and is `true` to a server-streaming one
-- (its call's headers() and trailers() are lists).
-- `service_config` is gRPC's service config as a Lua table or JSON text:
-- each method takes its methodConfig entry's retry and timeout unless
-- `methods.Name` sets them (the client's own retry and timeout apply to
-- methods no entry names); `retryThrottling` makes one pc.Throttle per
-- server and numbers (the server: pc.grpc's target, pc.inproc's server
-- object, as gRPC shares one per server name), shared by every client and
-- transport of it (`throttle` gives one explicitly). `resume(request, last_response) ->
-- next_request` lets a server stream that failed after a response retry
-- with the request it returns (nil ends the stream), the caller's loop
-- seeing one stream. `interceptors` lists fn(call, next) run once per
-- call, or {per_attempt = fn} once per attempt. `validate = true` checks
-- each request against its type's protovalidate rules (pc.validate)
-- before anything is sent: one that breaks a rule raises pc.check's
-- INVALID_ARGUMENT pc.Error (`local = true`, `violations`, a
-- google.rpc.BadRequest in `details`) and no attempt is made.
-- Over a transport with codec "json" (pc.grpc's with gRPC-Web or
-- Connect) requests go as pc.to_json's text and responses are read with
-- pc.from_json, members naming no field skipped (as connect-go's JSON
-- codec reads); the stub's calls are the same.
-- Client-streaming and bidirectional methods return a call object:
--   local call = stub:ClientStreamOrBidiMethod([opts]); call:send(request) ...
-- Raises on a missing transport, an unknown service (a built-in one not
-- loaded names the fix, as pc.server's), method or option, a
-- bad service config ("pc.client: service_config:
-- methodConfig[0].retryPolicy.maxAttempts: at least 2 expected, got 1"),
-- metadata that is not a list of {key, value} pairs with lowercase gRPC
-- header names, or a compression other than "gzip" / "identity"; a stub
-- method raises such misuse of its per-call options at its caller's line
-- (as "bad argument #2 to 'Method'") before any attempt, and indexing a
-- method the service lacks raises "pkg.Service has no method 'Name'".
function M.client(service_name, opts)
  if type(service_name) ~= "string" then
    error("bad argument #1 to 'client' (string expected, got " .. type(service_name) .. ")", 2)
  end
  if type(opts) ~= "table" then
    error("bad argument #2 to 'client' (table expected, got " .. type(opts) .. ")", 2)
  end
  for k in pairs(opts) do
    if not CLIENT_KEYS[k] then error("pc.client: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local transport = opts.transport
  if transport == nil then
    error("pc.client: option 'transport' is required (pc.inproc(server) or pc.grpc(target))", 2)
  end
  local pool = opts.pool or schema.default_pool()
  local info = pool:service(service_name)
  if not info then error("pc.client: " .. internal.unknown_service(service_name), 2) end
  local problem = options_problem(opts)
  if problem then error("pc.client: " .. problem, 2) end
  local config
  if opts.service_config ~= nil then
    config, problem = service_config.load(opts.service_config)
    if not config then error("pc.client: service_config: " .. problem, 2) end
  end
  if opts.validate ~= nil and type(opts.validate) ~= "boolean" then
    error("pc.client: validate: boolean expected, got " .. type(opts.validate), 2)
  end
  local throttle = opts.throttle
  if throttle ~= nil and getmetatable(throttle) ~= policy.Throttle then
    error("pc.client: throttle: pc.Throttle expected, got " .. type(throttle), 2)
  end
  if throttle == nil and config and config.throttling then
    throttle = service_config.throttle_for(transport, config.throttling)
  end
  if config and config.ring_hash and type(transport.set_ring_hash) == "function" then
    transport:set_ring_hash(config.ring_hash)
  elseif config and config.balancing and config.balancing ~= "ring_hash"
    and type(transport.set_load_balancing) == "function" then
    transport:set_load_balancing(config.balancing, config.balancing_config)
  end
  if config and config.outlier and type(transport.set_outlier_detection) == "function" then
    transport:set_outlier_detection(config.outlier)
  end
  if config and config.health_check and type(transport.set_health_check) == "function" then
    transport:set_health_check(config.health_check)
  end
  local per_call, per_attempt = interceptors.split(opts.interceptors, "pc.client")
  local per_method = opts.methods or {}
  for name, per in pairs(per_method) do
    if not info.methods[name] then
      error(format("pc.client: %s has no method '%s'", service_name, tostring(name)), 2)
    end
    if type(per) ~= "table" then
      error(format("pc.client: methods.%s: table expected, got %s", name, type(per)), 2)
    end
    for k in pairs(per) do
      if not METHOD_KEYS[k] then
        error(format("pc.client: methods.%s: unknown option '%s'", name, tostring(k)), 2)
      end
    end
    problem = options_problem(per)
    if problem then error(format("pc.client: methods.%s: %s", name, problem), 2) end
    if per.resume ~= nil and not info.methods[name].server_streaming then
      error(format("pc.client: methods.%s: resume: only server-streaming methods resume", name), 2)
    end
  end
  local c = {
    opts = opts, transport = transport, service_name = service_name, config = config,
    throttle = throttle, clock = opts.clock or sched.now, per_method = per_method,
    per_call = per_call, per_attempt = per_attempt, intercepted = per_call ~= nil or per_attempt ~= nil,
  }
  local stub = {}
  for _, m in ipairs(info.methods) do
    if m.client_streaming then
      local d = defaults_for(opts, per_method[m.name])
      d.validate = opts.validate
      stub[m.name] = streaming_method(transport, m, d)
    else
      local method
      method, problem = unary_method(c, m)
      if not method then error("pc.client: " .. problem, 2) end
      stub[m.name] = method
    end
  end
  local function throttle_info() return throttle and throttle:info() or nil end
  return setmetatable(stub, { __index = function(_, k)
    if k == "throttle_info" then return throttle_info end
    error(format("%s has no method '%s'", service_name, tostring(k)), 2)
  end })
end

return M
