--- `protocall serve`: the services a Lua script returns, served over gRPC
-- with health and reflection on.
local pc = require "protocall"
local common = require "protocall.cli.common"

local type, pcall, getmetatable, loadfile, tostring = type, pcall, getmetatable, loadfile, tostring
local format = string.format
local stderr = common.stderr
local usage_error, fail = common.usage_error, common.fail

local M = {}

M.serve = {
  summary = "serves the services a Lua script returns, health and reflection on",
  flags = { listen = "string", cert = "string", key = "string", ["client-ca"] = "string" },
  usage = "protocall serve [-listen ADDR] [-cert FILE -key FILE [-client-ca FILE]] SCRIPT [-- args]",
  about = "Runs SCRIPT (`arg` holds the args after --) and serves what it returns over\n" ..
          "gRPC on ADDR (default 127.0.0.1:50051; port 0 picks a free one): a table of\n" ..
          "handler tables ({[\"pkg.Service\"] = {Method = function(request, ctx) ... end}})\n" ..
          "is served with grpc.health.v1.Health and server reflection (v1, v1alpha) on;\n" ..
          "a pc.server{...} the script built is served as it is. The script loads its\n" ..
          "services' schema itself (pc.load_file(\"its.proto\") before it returns them).\n" ..
          "h2c, or TLS with -cert and -key (mutual TLS with -client-ca). Prints\n" ..
          "`listening on HOST:PORT` to stderr and serves until the process is stopped.\n" ..
          "A handler's error other than a pc.Error is printed to stderr with its\n" ..
          "traceback (the caller gets UNKNOWN \"unexpected error in the handler\").",
  example = "protocall serve -listen 127.0.0.1:50051 examples/route_services.lua",
}

-- pc.listen's `log`: a handler's error other than a pc.Error (a bug: the
-- caller gets UNKNOWN without its text) is printed to stderr with its
-- traceback, as grpcio logs a handler's exception.
local function log_failure(text)
  stderr:write("protocall serve: ", text, "\n")
  stderr:flush()
end

--- protocall serve: the script's services on -listen, until the process
-- is stopped (a handler's failure is the caller's, the server goes on;
-- one that is not a pc.Error is printed to stderr too).
function M.serve.run(flags, args)
  if #args < 1 then usage_error("serve", "SCRIPT expected") end
  if (flags.cert == nil) ~= (flags.key == nil) then usage_error("serve", "-cert and -key go together") end
  if flags["client-ca"] and not flags.cert then usage_error("serve", "-client-ca needs -cert and -key") end
  common.no_fifo("-cert", flags.cert)
  common.no_fifo("-key", flags.key)
  common.no_fifo("-client-ca", flags["client-ca"])
  local chunk, err = loadfile(args[1])
  if not chunk then fail(err) end
  local script_arg = { [0] = args[1] }
  for i = 2, #args do script_arg[i - 1] = args[i] end
  _G.arg = script_arg
  local ran, got = pcall(chunk, table.unpack(script_arg))
  if not ran then fail(tostring(got)) end -- the script's error, not a traceback of protocall's
  local mt = getmetatable(got)
  local server
  if type(mt) == "table" and mt.__name == "protocall.Server" then
    server = got
  elseif type(got) == "table" then
    -- (in pcall: the script's mistake names no position of serve's)
    local ok, s = pcall(pc.server, got, { health = true, reflection = true })
    local unknown = not ok and tostring(s):match("^pc%.server: (unknown service '.*')$")
    if unknown then -- the services' schema is the script's to load, into the default pool
      fail(args[1] .. ": " .. unknown .. ": the script loads its services' schema before it returns them "
        .. "(pc.load_file(\"its.proto\"))")
    end
    if not ok then fail(tostring(s)) end
    server = s
  else
    fail(args[1] .. ": the script returned " .. type(got) .. ", not a table of services or a pc.server")
  end
  local ok, listener = pcall(pc.listen, server, flags.listen or "127.0.0.1:50051",
    { cert_file = flags.cert, key_file = flags.key, client_ca_file = flags["client-ca"], log = log_failure })
  if not ok then
    fail(common.listen_error(listener, { cert_file = "-cert", key_file = "-key", client_ca_file = "-client-ca" }))
  end
  local host = (flags.listen or "127.0.0.1:50051"):match("^(.*):%d+$") or "127.0.0.1"
  stderr:write(format("protocall serve: listening on %s:%d (%s)\n", host, listener.port,
    flags.cert and "TLS" or "h2c"))
  stderr:flush()
  pc.spawn(function() listener:serve() end)
  pc.run()
  return 0
end

return M
