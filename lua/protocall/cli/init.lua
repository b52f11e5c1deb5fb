--- The `protocall` command's subcommands: call, list, describe, decode,
-- encode, validate, serve, gateway, run and help (each in a file of lua/protocall/cli/).
-- bindings/cli/main.c runs `M.main(args)` when the first argument names
-- one (and no file of that name exists); its result is the exit status: 0
-- done, 1 a failure (one line on stderr), 2 a usage error (the usage on
-- stderr), 64 + the gRPC status code when a call fails; `validate` exits 1
-- for an invalid message and 2 for any failure. Flags are
-- grpcurl's and protoc's spellings: one dash, `-flag value` or
-- `-flag=value`; repeatable flags collect in order.
local common = require "protocall.cli.common"
local codec = require "protocall.cli.codec"
local schema = require "protocall.cli.schema"
local call = require "protocall.cli.call"
local serve = require "protocall.cli.serve"
local gateway = require "protocall.cli.gateway"
local validate = require "protocall.cli.validate"

local ipairs, tostring, pcall, getmetatable, error = ipairs, tostring, pcall, getmetatable, error
local concat, format = table.concat, string.format
local stdout, stderr, usage_error = common.stdout, common.stderr, common.usage_error

local M = {}

local COMMANDS = {
  call = call.call, list = schema.list, describe = schema.describe, decode = codec.decode,
  encode = codec.encode, validate = validate.validate, serve = serve.serve,
  gateway = gateway.gateway,
}

COMMANDS.run = {
  summary = "runs a Lua script with the module built in (always a script)",
  flags = {},
  usage = "protocall run SCRIPT [args]",
  about = "Runs SCRIPT with `arg` set as lua5.4 sets it, even when SCRIPT has the name of a\n" ..
          "command (a command name wins only when no file of that name exists).",
  example = "protocall run examples/quickstart.lua",
}

COMMANDS.help = {
  summary = "the commands, or one command's flags and an example",
  flags = {},
  usage = "protocall help [COMMAND]",
  about = "Prints the commands, or the usage of one.",
  example = "protocall help decode",
}

local ORDER = { "call", "list", "describe", "decode", "encode", "validate", "serve", "gateway", "run", "help" }

local SCHEMA_USAGE = "schema flags: -I DIR (repeatable; default .), -proto FILE (repeatable),\n" ..
                     "              -protoset FILE (a FileDescriptorSet, repeatable)"

local function command_help(name)
  local c = COMMANDS[name]
  local lines = { "usage: " .. c.usage, "", c.about }
  if c.flags.proto then lines[#lines + 1] = "\n" .. SCHEMA_USAGE end
  lines[#lines + 1] = "\nexample:\n  " .. c.example
  return concat(lines, "\n") .. "\n"
end

local function general_help()
  local lines = { "usage: protocall COMMAND [flags] [args]", "       protocall run SCRIPT [args]",
                  "       protocall [-e stat] [-l mod] [-v] [SCRIPT [args]]", "", "commands:" }
  for _, name in ipairs(ORDER) do
    lines[#lines + 1] = format("  %-9s %s", name, COMMANDS[name].summary)
  end
  lines[#lines + 1] = "\n`protocall help COMMAND` shows a command's flags and an example."
  return concat(lines, "\n") .. "\n"
end

function COMMANDS.help.run(_, args)
  if #args == 0 then
    stdout:write(general_help())
    return 0
  end
  if #args > 1 or not COMMANDS[args[1]] then usage_error("help", "unknown command '" .. tostring(args[1]) .. "'") end
  stdout:write(command_help(args[1]))
  return 0
end

--- status = M.main(args [, env]): runs the subcommand args[1] with
-- args[2..] and returns the exit status (see the top of this file). `env`
-- tells what the process sees: `stderr_is_terminal` (progress of streams on
-- stderr; nothing is shown when stderr is not a terminal).
function M.main(args, env)
  call.terminal = env ~= nil and env.stderr_is_terminal == true
  local cmd = args[1]
  if cmd == "--help" or cmd == "-h" then cmd = "help" end
  local c = COMMANDS[cmd]
  if not c then
    stderr:write("protocall: unknown command '", tostring(cmd), "'\n", general_help())
    return 2
  end
  local ok, status = pcall(function()
    local flags, rest = common.parse(cmd, c.flags, args, 2)
    return c.run(flags, rest)
  end)
  if ok then return status end
  local mt = getmetatable(status)
  if mt == common.Usage and status.help then
    stdout:write(command_help(status.cmd))
    return 0
  end
  if mt == common.Usage then
    -- the error, the usage lines, and where the rest is (not 40 lines of help)
    stderr:write("protocall ", status.cmd, ": ", status.msg, "\nusage: ", COMMANDS[status.cmd].usage, "\n",
                 status.cmd == "help" and "`protocall help` lists the commands.\n"
                   or "`protocall help " .. status.cmd .. "` shows its flags and an example.\n")
    return 2
  end
  if mt == common.Failure then
    stderr:write("protocall ", cmd, ": ", status.msg, "\n")
    return status.status
  end
  error(status, 0)
end

return M
