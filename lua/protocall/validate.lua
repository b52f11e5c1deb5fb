--- Validation with protovalidate's rules: pc.validate and pc.check. The
-- rules are the `(buf.validate.field)`, `(buf.validate.message)` and
-- `(buf.validate.oneof)` options of the message's types
-- (buf/validate/validate.proto is built in: a schema imports it with no
-- file on disk); the work is in C (core/validate/, whose README says how
-- each rule runs, through bindings/lua/lpc_validate.c).
local core = require "protocall.core"
local errors = require "protocall.errors"
local schema = require "protocall.schema"
local internal = require "protocall.internal"
local compat = require "protocall.compat"

local error, type, tostring, pairs, pcall, ipairs = error, type, tostring, pairs, pcall, ipairs
local validate_core, is_message = core.validate, core.is_message

local M = {}

-- fail_fast, legacy_required, max_violations = options(opts, fname): the
-- options of pc.validate and pc.check, checked (errors blame the caller of
-- those: run is called from them, not as a tail call). max_violations: 0
-- for all.
local function options(opts, fname)
  if opts == nil then return false, false, 0 end
  if type(opts) ~= "table" then
    internal.argerror(fname, "table expected, got " .. type(opts), 4, 2)
  end
  for k in pairs(opts) do
    if k ~= "fail_fast" and k ~= "legacy_required" and k ~= "max_violations" then
      internal.argerror(fname, "unknown option '" .. tostring(k) .. "'", 4, 2)
    end
  end
  local max = opts.max_violations
  if max ~= nil then
    local n = type(max) == "number" and compat.tointeger(max)
    if not n or n < 1 then
      internal.argerror(fname, "max_violations: positive integer expected, got " ..
        (type(max) == "number" and internal.show(max) or type(max)), 4, 2)
    end
    max = n
  end
  return opts.fail_fast and true or false, opts.legacy_required and true or false, max or 0
end

local function run(m, opts, fname)
  if not is_message(m) then internal.argerror(fname, "message expected, got " .. type(m), 3) end
  local fail_fast, legacy_required, max = options(opts, fname)
  local list, more = validate_core(m, fail_fast, false, legacy_required, max)
  if not list then error(fname .. ": " .. more, 3) end
  return list, more
end

-- The violations a refusal keeps at most (pc_Validator_SetMaxViolations):
-- a request breaking a rule on each of its million items is answered with
-- these, its validation stopped at the next one, rather than with a million
-- (seconds of work and a google.rpc.BadRequest of tens of megabytes).
local REFUSAL_VIOLATIONS = 100
M.REFUSAL_VIOLATIONS = REFUSAL_VIOLATIONS

--- violations, truncated = pc.validate(m [, opts]): the rules message `m` breaks, as
-- protovalidate's runtimes report them: a list (empty when `m` is valid) of
-- {field = "items[2].name", rule = "string.min_len", message = "must be at
-- least 1 characters"} (`for_key = true` for a map key's rule;
-- `field` is "" for a message's own CEL rule; map keys read `labels["k"]`,
-- `ports[80]`). Nested messages are validated in turn. opts: `fail_fast`
-- (stop at the first violation), `legacy_required` (an unset proto2
-- `required` field is a violation, rule "legacy_required", as
-- protovalidate's runtimes report it with their option of that name),
-- `max_violations` (an integer >= 1: keep that many violations at most, the
-- validation stopped at the next one, `truncated` true then; by default all,
-- as protovalidate's runtimes report them: a message breaking a rule on each
-- of its million items makes a million, some 200 MB; servers' and the
-- gateway's refusals keep 100). The
-- rules are compiled on first use of each message type and kept with its
-- pool. Raises on a non-message, on a bad option ("bad argument #2 to
-- 'validate' (max_violations: positive integer expected, got 0)"), and
-- on a rule that does not compile or fails to evaluate ("validate: failed
-- to compile user.ok: 1:6: ...", rules of another type than the field's:
-- "validate: expected rule \"int32\", got \"string\" on demo.M.x").
function M.validate(m, opts)
  local list, truncated = run(m, opts, "validate")
  return list, truncated
end

--- s = M.violation_text(v): one violation as `field: message [rule]` (no
-- `field: ` for a message's own rule), as protovalidate's runtimes word it.
local function one(v)
  return (v.field ~= "" and v.field .. ": " or "") .. v.message .. " [" .. v.rule .. "]"
end
M.violation_text = one

--- The text protovalidate gives a list of violations: the first as
-- one() words it and ", and N more violations"; with `truncated` (the
-- list stopped at a cap, more were found) ", and at least N more
-- violations", N the list's length.
local function describe(list, truncated)
  local s = one(list[1])
  if truncated then
    s = s .. ", and at least " .. #list .. " more violation" .. (#list > 1 and "s" or "")
  elseif #list > 1 then
    s = s .. ", and " .. (#list - 1) .. " more violation" .. (#list > 2 and "s" or "")
  end
  return s
end
M.describe = describe

-- The google.rpc.BadRequest of a list of violations (its field_violations:
-- field, description, and reason the protovalidate rule id, "string.min_len":
-- FieldViolation's `reason` since googleapis 2024), or nil when the default
-- pool cannot have the type (a frozen pool without it).
local function bad_request(list)
  local ok, BadRequest = pcall(function() return schema.default_pool():type("google.rpc.BadRequest") end)
  if not ok or not BadRequest then return nil end
  local fv = {}
  for i, v in ipairs(list) do
    fv[i] = { field = v.field, description = v.message .. " [" .. v.rule .. "]", reason = v.rule }
  end
  return BadRequest { field_violations = fv }
end

--- err | nil = refusal(m): nil when `m` breaks no rule, else the pc.Error
-- pc.check raises, with `details` {google.rpc.BadRequest} (what the
-- `validate = true` option of pc.server and pc.client answer with), but
-- of the first REFUSAL_VIOLATIONS (100) violations at most: past those the
-- validation stops and the message says "and at least 100 more
-- violations". A rule that fails to evaluate on `m` (a division by zero, a
-- bad pattern from the message, an evaluation limit) refuses it too:
-- INVALID_ARGUMENT "validate: x: div: 1:5: division by zero", no details,
-- as connect-go's validate interceptor answers protovalidate's runtime
-- error. Raises "validate: ..." on a rule that does not compile.
function M.refusal(m)
  -- true when valid: no list made
  local list, more, kind = validate_core(m, false, true, false, REFUSAL_VIOLATIONS)
  if list == true then return nil end
  if not list then
    if kind == "runtime" then
      return errors.status("INVALID_ARGUMENT", "validate: " .. more, { ["local"] = true })
    end
    error("validate: " .. more, 2)
  end
  local br = bad_request(list)
  return errors.status("INVALID_ARGUMENT", "validation failed: " .. describe(list, more),
    { violations = list, ["local"] = true, details = br and { br } or nil })
end

-- The file that declares protovalidate's rules.
local VALIDATE_FILE = "buf/validate/validate.proto"

--- set = ruleless_types(pool): the full names (keys, value true) of the
-- message types of `pool` no protovalidate rule can reach: those of files
-- that import buf/validate/validate.proto neither themselves nor through
-- their imports (a type's fields have types of its file's imports, and a
-- rule is an option from that file). A placement that reads a request
-- only to check it skips the read for these (pc.transcoder's
-- request_bytes, the nginx gateway's gRPC-Web and Connect requests).
function M.ruleless_types(pool)
  local reaches, set = {}, {}
  local function uses(name)
    if reaches[name] ~= nil then return reaches[name] end
    reaches[name] = true -- (while visiting: a cycle counts as rules)
    local f = pool:file(name)
    local r = f == nil or name == VALIDATE_FILE
    for _, dep in ipairs(not r and f.dependencies or {}) do
      if uses(dep) then
        r = true
        break
      end
    end
    reaches[name] = r
    return r
  end
  for _, name in ipairs(pool:files()) do
    if not uses(name) then
      for _, m in ipairs(pool:file(name).messages or {}) do set[m] = true end
    end
  end
  return set
end

--- m = pc.check(m [, opts]): `m` when it breaks no rule; otherwise raises a
-- pc.Error with code INVALID_ARGUMENT (what a server answers a request
-- that fails validation), `message` "validation failed: name: must be at least 1
-- characters [string.min_len], and 2 more violations",
-- `violations` the list pc.validate gives, `details` {google.rpc.BadRequest
-- of them: field, description as above, reason the rule id} (a handler
-- raising it, or tc:error writing it, sends them as the gateway's
-- `validate` does) and `local = true`. opts as pc.validate's (with
-- `max_violations` and more found, the message ends "and at least N more
-- violations"). Raises as pc.validate does on a bad argument or rule.
function M.check(m, opts)
  local list, truncated = run(m, opts, "check")
  if #list == 0 then return m end
  local br = bad_request(list)
  error(errors.status("INVALID_ARGUMENT", "validation failed: " .. describe(list, truncated),
    { violations = list, ["local"] = true, details = br and { br } or nil }), 2)
end

return M
