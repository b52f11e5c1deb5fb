--- `protocall validate`: a message checked against its type's protovalidate
-- rules (pc.validate), one line per violation.
local common = require "protocall.cli.common"
local validate = require "protocall.validate"
local validate_core = require("protocall.core").validate

local pcall, error, getmetatable, ipairs = pcall, error, getmetatable, ipairs
local stdout = common.stdout
local usage_error, fail = common.usage_error, common.fail

local M = {}

M.validate = {
  summary = "checks a message against its protovalidate rules",
  flags = common.with_schema { format = "string" },
  usage = "protocall validate [schema flags] [-format binary|json|text] TYPE [FILE]",
  about = "Reads a message (FILE or standard input; binary unless -format says json or\n" ..
          "text) and checks it against the buf.validate rules of its type, as pc.validate\n" ..
          "does. Prints each violation on a line, `field: message [rule]`, and exits 1\n" ..
          "when there is one, 0 when the message is valid; 2 when it cannot tell (a usage\n" ..
          "error, a schema or rule that does not load, input that does not parse).",
  example = "echo '{\"lines\": [{\"sku\": \"ABC-1\", \"qty\": 0}]}' |\n" ..
            "    protocall validate -I examples -proto order.proto -format json shop.v1.Order"
}

local function check(flags, args)
  local fmt = common.check_format("validate", flags, { "binary", "json", "text" })
  if #args < 1 then usage_error("validate", "TYPE expected") end
  if #args > 2 then usage_error("validate", "too many arguments: TYPE [FILE]") end
  common.need_schema("validate", flags)
  local T = common.message_type(common.load_schemas(flags), args[1])
  local m = common.parse_message(T, fmt, common.read_input(args[2]), args[2] or "<stdin>", true)
  local list, why = validate_core(m, false) -- pc.validate's work, a broken rule as nil, why
  if not list then fail(why) end
  for _, v in ipairs(list) do stdout:write(validate.violation_text(v), "\n") end
  return #list == 0 and 0 or 1
end

-- Failures exit 2, not the other commands' 1: 1 says "invalid" (as grep's
-- statuses: 0 found, 1 not, 2 trouble).
function M.validate.run(flags, args)
  local ok, status = pcall(check, flags, args)
  if ok then return status end
  if getmetatable(status) == common.Failure then status.status = 2 end
  error(status, 0)
end

return M
