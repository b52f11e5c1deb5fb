--- Hedging (gRFC A6 "Hedging Policy"): several attempts of one call in
-- flight at once, the first response winning. pc.client
-- (lua/protocall/rpc/client.lua) hedges the methods whose service config
-- entry has a hedgingPolicy.
--
-- The first attempt goes out at once, another every `delay` seconds while
-- none has answered, up to `max_attempts`. The first success commits: the
-- other attempts are cancelled and its result returned. A failure with a
-- non-fatal code lets the others go on and sends the next attempt at once
-- (shortcutting its delay; later ones resume `delay` apart); any other
-- failure cancels the others and is raised. Server pushback
-- (grpc-retry-pushback-ms, an error's `retry_delay`) moves the next attempt
-- to that many seconds from now, or (negative) stops new attempts. With a
-- retry token bucket, each non-fatal failure (and a fatal one carrying a
-- "do not retry" pushback) takes a token, the winner gives token_ratio
-- back, and no attempt after the first is sent while tokens are at or
-- below half. The deadline covers every attempt.
local errors = require "protocall.errors"
local compat = require "protocall.compat"

local error, pcall, select, setmetatable, tostring = error, pcall, select, setmetatable, tostring
local format, huge = string.format, math.huge
local pack, unpack, remove = compat.pack, compat.unpack, table.remove
local Error, RetryError, normalize = errors.Error, errors.RetryError, errors.normalize

local M = {}

local REASONS = {
  all_failed = "every hedged attempt failed",
  throttled = "hedges are throttled: the client's retry tokens are at or below half",
  pushback = "the server asked not to retry",
}

-- A handle for a start that raised: that attempt's failure.
local function failed(err)
  return { result = function() return false, err end, cancel = function() end, sync = true }
end

--- run = M.run(policy, ops): the hedged call as one
-- function run(request_bytes, timeout, metadata, compression) returning
-- the winner's results or raising. policy = {max_attempts = n >= 1,
-- delay = seconds >= 0, non_fatal = {CODE = true, ...}}; ops = {start =
-- fn(request_bytes, timeout, metadata, compression, previous_attempts,
-- tried) (tried: a table per call, for the transport to note the
-- backends its attempts went to) -> handle (handle:result() -> nil while running, else true and the
-- results or false and the error; handle:cancel(); handle.sync true
-- when the result is there already, ending at once), wait = fn(handles,
-- seconds) (until a handle may have moved on, at most `seconds`), sync =
-- true when start returns ended attempts only (never raising), clock =
-- fn() -> seconds, bucket = a C retry token bucket (call/policy.lua bucket_of)
-- or nil}. Gives up with pc.RetryError {cause = the last non-fatal
-- error, attempts = attempts sent} once no attempt is left to wait for;
-- past the deadline raises DEADLINE_EXCEEDED.
function M.run(policy, ops)
  local max, delay, non_fatal = policy.max_attempts, policy.delay, policy.non_fatal
  local start, wait, clock, bucket, sync = ops.start, ops.wait, ops.clock, ops.bucket, ops.sync

  local function cancel(live)
    for i = 1, #live do live[i]:cancel() end
  end

  return function(bytes, timeout, metadata, compression)
    local t0 = clock()
    local deadline = timeout and t0 + timeout
    local live, sent, next_at, stopped, last
    sent, next_at = 0, t0
    local tried -- for the transport: the backends this call's attempts used
    if sync then
      -- The first attempt has ended when start returns: a success needs no more.
      local h = start(bytes, timeout, metadata, compression, 0)
      local ok, v, extra = h:result()
      if ok then
        if bucket then bucket:success() end
        return v, extra
      end
      live, sent, next_at = { h }, 1, t0 + delay
    else
      live, tried = {}, {}
    end
    while true do
      local now = clock()
      if deadline and now >= deadline then
        cancel(live)
        error(Error { code = "DEADLINE_EXCEEDED", message = format(
          "deadline exceeded after %d hedged attempt%s", sent, sent == 1 and "" or "s") }, 0)
      end
      -- Results first: one that arrived by now decides before the next hedge.
      local i = 1
      while i <= #live do
        local r = pack(live[i]:result())
        if r[1] == nil then
          i = i + 1
        else
          remove(live, i)
          if r[1] then
            cancel(live)
            if bucket then bucket:success() end
            return unpack(r, 2, r.n)
          end
          local e = normalize(r[2])
          local pushback = e.retry_delay
          if not non_fatal[e.code] or e["local"] then
            if bucket and pushback and pushback < 0 then bucket:failure() end
            cancel(live)
            error(e, 0)
          end
          last = e
          if bucket and not bucket:failure() then stopped = stopped or "throttled" end
          if pushback and pushback < 0 then
            stopped = "pushback"
          elseif pushback then
            next_at = now + pushback
          else
            next_at = now
          end
        end
      end
      while not stopped and sent < max and now >= next_at do
        if sent > 0 and bucket and not select(4, bucket:info()) then
          stopped = "throttled"
          break
        end
        sent = sent + 1
        local ok, h = pcall(start, bytes, deadline and deadline - now, metadata, compression, sent - 1, tried)
        live[#live + 1] = ok and h or failed(h)
        next_at = now + delay
      end
      if #live == 0 and (stopped or sent >= max) then
        error(setmetatable({ cause = last, attempts = sent, message = format(
          "RetryError: gave up after %d hedged attempt%s (%s); last error: %s", sent,
          sent == 1 and "" or "s", REASONS[stopped or "all_failed"], tostring(last)) }, RetryError), 0)
      end
      local wake = (not stopped and sent < max) and next_at or huge
      if deadline and deadline < wake then wake = deadline end
      now = clock()
      -- A start that answered at once (or failed) needs no wait.
      local ready = false
      for j = 1, #live do
        if live[j].sync then ready = true end
      end
      if not ready and (#live > 0 or wake > now) then
        wait(live, wake == huge and 1 or wake - now)
      end
    end
  end
end

return M
