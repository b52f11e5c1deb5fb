--- Failures as objects: pc.Error and pc.RetryError (a call's), the
-- conversion of whatever a target raised into one, and pc.HttpRuleError
-- (a google.api.http rule's).
local internal = require "protocall.internal"

local type, tostring, pcall, next, getmetatable, setmetatable =
  type, tostring, pcall, next, getmetatable, setmetatable
local argerror, code_name, show = internal.argerror, internal.code_name, internal.show

local M = {}

--- pc.Error{code=, message=, details=, metadata=, retry_delay=, ["local"]=, value=}:
-- a call's failure. `code` is a canonical gRPC name or number (stored as
-- the name, "UNAVAILABLE"); `message` a string; `details` anything (the
-- status details); `metadata` the trailers as {key, value} pairs;
-- `retry_delay` the server's pushback in seconds (replaces the next
-- backoff sleep; negative means "do not retry"); `local` true for
-- failures protocall raises itself that would recur (never retried by
-- pc.if_transient_error); `value` the original Lua value when a target
-- raised something that was not a pc.Error (code "UNKNOWN"). Other
-- fields are kept as given (a transport's own, such as `method`).
-- tostring(err) is "UNAVAILABLE: connection refused". Raises on a bad
-- field. `getmetatable(err) == pc.Error` tells an error apart.
local Error = { __name = "protocall.Error" }
Error.__index = Error
Error.__tostring = function(e)
  local m = e.message
  if m == nil or m == "" then return tostring(e.code) end
  return tostring(e.code) .. ": " .. tostring(m)
end
setmetatable(Error, {
  __call = function(_, t)
    if type(t) ~= "table" then argerror("Error", "table expected, got " .. type(t), 2) end
    local code = code_name(t.code)
    if code == "OK" then
      argerror("Error", "code: OK is not an error status (a failure needs another code)", 2)
    end
    if type(code) ~= "string" then
      argerror("Error", "code: gRPC status name or number expected, got " .. tostring(t.code), 2)
    end
    if t.message ~= nil and type(t.message) ~= "string" then
      argerror("Error", "message: string expected, got " .. type(t.message), 2)
    end
    local d = t.retry_delay
    if d ~= nil and (type(d) ~= "number" or d ~= d) then
      argerror("Error", "retry_delay: number of seconds expected, got " .. show(d), 2)
    end
    local md = t.metadata
    if md ~= nil then
      if type(md) ~= "table" then
        argerror("Error", "metadata: list of {key, value} pairs expected, got " .. type(md), 2)
      end
      for i = 1, #md do
        local p = md[i]
        if type(p) ~= "table" or type(p[1]) ~= "string" or type(p[2]) ~= "string" then
          argerror("Error", "metadata[" .. i .. "]: {key, value} pair of strings expected", 2)
        end
      end
    end
    if t["local"] ~= nil and type(t["local"]) ~= "boolean" then
      argerror("Error", "local: boolean expected, got " .. type(t["local"]), 2)
    end
    local e = {}
    for k, v in next, t do e[k] = v end -- other fields (a transport's own) are kept
    e.code = code
    return setmetatable(e, Error)
  end,
})
M.Error = Error

--- pc.RetryError{cause=, attempts=, message=}: a retried call gave up.
-- `cause` is the last attempt's error (a pc.Error), `attempts` how many
-- attempts were sent, `message` why it gave up; tostring(err) is the
-- message (in the RetryErrors protocall raises it ends with the cause;
-- one made with pc.RetryError{...} has the message given, nothing added).
-- `getmetatable(e) == pc.RetryError`.
local RetryError = { __name = "protocall.RetryError" }
RetryError.__index = RetryError
RetryError.__tostring = function(e) return tostring(e.message) end
setmetatable(RetryError, {
  __call = function(_, t)
    if type(t) ~= "table" then argerror("RetryError", "table expected, got " .. type(t), 2) end
    return setmetatable({ cause = t.cause, attempts = t.attempts, message = t.message }, RetryError)
  end,
})
M.RetryError = RetryError

--- pc.HttpRuleError{message=, context=, problem=, method=, pattern=, rule=,
-- additional=, selector=, path=, file=, line=, column=, unbound=}: a
-- google.api.http rule that cannot be read or does not fit the schema, as
-- pc.transcoder raises it, and pc.listen's `rest` option and
-- listener:set_server (`context` "pc.listen: rest" then). `message` is
-- the whole text ("http rules: rule 2: t.S.Get: GET /v1/{nope}: variable
-- 'nope': no field 'nope' in t.Req", "t.S.Get (t.proto:8:12): rule GET
-- /v1/{nope}: ..."; an additional binding's numbered, from 1, after the
-- rule or the place: "http rules: rule 2, additional binding 1: ...",
-- "t.S.Get (t.proto:8:12), additional binding 1: rule GET /v2/{x}: ...";
-- a route another method has, that method's rule and, for an annotation
-- from .proto source, where: "... the same method and template as
-- t.S.List's rule GET /v1/x (t.proto:5:12)"; a selector of a service of
-- the pool not served: "http rules: rule 1: selector 't.O.Get': t.O is
-- not one of the services served"); `problem` what is wrong with the binding ("variable
-- 'nope': no field 'nope' in t.Req"); `method` the method's full name
-- (nil for a selector naming no method: `selector` then); `pattern` the
-- binding's ("GET /v1/{nope}", "?" without one); `rule` its number among
-- the rules given apart (`http`), from 1, and `path` where in their JSON
-- the member at fault is ({"rules", 1, "additional_bindings", 0, "body"}:
-- the selector, body or response_body, else the pattern's; indices from
-- 0), `additional` an additional binding's number, from 1; for a
-- method's google.api.http option, `file` its file's name and `line`,
-- `column` (from 1) where the .proto source sets the option (its name,
-- `(google.api.http)`; nil for a schema from a descriptor set, reflection
-- or Lua declarations);
-- `unbound` true for the POST of pc.transcoder's `unbound`. A rule's
-- JSON that does not read has the message alone. tostring(err) is
-- "CONTEXT: MESSAGE", the message alone without a context (an object
-- raised, it has no "file.lua:12: " position before it).
-- `getmetatable(err) == pc.HttpRuleError` tells it apart.
local HttpRuleError = { __name = "protocall.HttpRuleError" }
HttpRuleError.__index = HttpRuleError
HttpRuleError.__tostring = function(e)
  if e.context == nil then return tostring(e.message) end
  return tostring(e.context) .. ": " .. tostring(e.message)
end
setmetatable(HttpRuleError, {
  __call = function(_, t)
    if type(t) ~= "table" then argerror("HttpRuleError", "table expected, got " .. type(t), 2) end
    if type(t.message) ~= "string" then
      argerror("HttpRuleError", "message: string expected, got " .. type(t.message), 2)
    end
    local e = {}
    for k, v in next, t do e[k] = v end
    return setmetatable(e, HttpRuleError)
  end,
})
M.HttpRuleError = HttpRuleError

--- status(code, message [, extra]) -> pc.Error: the error of a status the
-- library decides itself (`extra`: a table of further fields, reused).
function M.status(code, message, extra)
  local t = extra or {}
  t.code, t.message = code, message
  return Error(t)
end

--- message | nil = count_problem(n, kind): what is wrong with a call
-- (`kind`: "unary call" or "call") that received `n` response messages
-- where exactly one is due (gRPC: zero or two are INTERNAL), nil for one.
function M.count_problem(n, kind)
  if n == 1 then return nil end
  if n == 0 then return kind .. " received no response message" end
  return kind .. " received " .. n .. " response messages"
end

--- normalize(v) -> what a target raised, as an error object: pc.Error and
-- pc.RetryError as they are, anything else UNKNOWN carrying the value
-- (`value`) and its text as the message.
function M.normalize(v)
  local mt = getmetatable(v)
  if mt == Error or mt == RetryError then return v end
  local message = v
  if type(v) ~= "string" then
    local ok, s = pcall(tostring, v)
    message = ok and type(s) == "string" and s or type(v)
  end
  return setmetatable({ code = "UNKNOWN", message = message, value = v }, Error)
end

return M
