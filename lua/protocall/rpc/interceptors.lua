--- Interceptors of clients and servers: functions fn(call, next) run
-- around each call (or, on a client, {per_attempt = fn} around each
-- attempt). next(call) runs the rest of the chain and the call itself;
-- returning without it short-circuits, raising fails the call; after next,
-- call.status ("OK" or the code), call.elapsed and on failure call.error
-- are set.
local errors = require "protocall.errors"

local type, error, ipairs, next, pcall, getmetatable, format =
  type, error, ipairs, next, pcall, getmetatable, string.format
local Error, RetryError = errors.Error, errors.RetryError

local M = {}

--- per_call, per_attempt = split(list, where): the `interceptors` option
-- of pc.client or pc.server (`where`) as two lists (nil when empty);
-- raises at the caller of pc.client / pc.server (level 3 from here's
-- caller) on a value that is not a list of functions and
-- {per_attempt = function}.
function M.split(list, where)
  if list == nil then return nil, nil end
  if type(list) ~= "table" then
    error(format("%s: interceptors: list of functions expected, got %s", where, type(list)), 3)
  end
  local per_call, per_attempt = {}, {}
  for i, v in ipairs(list) do
    if type(v) == "function" then
      per_call[#per_call + 1] = v
    elseif type(v) == "table" and type(v.per_attempt) == "function" and next(v, next(v)) == nil then
      per_attempt[#per_attempt + 1] = v.per_attempt
    else
      error(format("%s: interceptors[%d]: function or {per_attempt = function} expected, got %s",
        where, i, type(v)), 3)
    end
  end
  if #list ~= #per_call + #per_attempt then
    error(where .. ": interceptors: list expected (keys 1..n)", 3)
  end
  return #per_call > 0 and per_call or nil, #per_attempt > 0 and per_attempt or nil
end

-- Fills in the outcome fields of an interceptor's `call` table.
local function outcome(call, ok, res, start, clock)
  call.elapsed = clock() - start
  if ok then
    call.status = "OK"
  else
    local mt = getmetatable(res)
    if mt == RetryError then
      call.status, call.error = res.cause and res.cause.code or "UNKNOWN", res
      call.attempts = res.attempts
    elseif mt == Error then
      call.status, call.error = res.code, res
    else
      call.status, call.error = "UNKNOWN", res
    end
  end
end

--- result = run(chain, i, call, terminal, t0, clock): runs `chain[i..]`
-- around `terminal(call)`: each interceptor's next(c) (c defaults to the
-- same call) runs the rest, then sets c's outcome (status, elapsed since
-- `t0` on `clock`, error) however the rest ended: an inner interceptor's
-- answer or error included.
local function run(chain, i, call, terminal, t0, clock)
  local f = chain[i]
  if f == nil then return terminal(call) end
  return f(call, function(c)
    c = c or call
    local ok, res = pcall(run, chain, i + 1, c, terminal, t0, clock)
    outcome(c, ok, res, t0, clock)
    if not ok then error(res, 0) end
    return res
  end)
end
M.run = run

return M
