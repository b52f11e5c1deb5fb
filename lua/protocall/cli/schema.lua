--- `protocall describe` and `protocall list`: the services, methods and
-- types of the loaded files, or of a server by its reflection service, as
-- `.proto` source (lua/protocall/schema/print.lua).
local common = require "protocall.cli.common"
local proto_print = require "protocall.schema.print"

local ipairs, pcall, error, concat = ipairs, pcall, error, table.concat
local stdout = common.stdout
local usage_error, fail, need_schema, has_schema, load_schemas, connect, with_reflection =
  common.usage_error, common.fail, common.need_schema, common.has_schema, common.load_schemas,
  common.connect, common.with_reflection
local descriptors, symbols, services_of, describe_one = proto_print.descriptors, proto_print.symbols,
  proto_print.services_of, proto_print.describe

local M = {}

M.describe = {
  summary = "a service, method, message, enum, field or other symbol as .proto source",
  flags = common.with_schema(common.with_connect {}),
  usage = "protocall describe [schema flags] [TARGET] [SYMBOL]\n" ..
          "       protocall describe [-plaintext | TLS flags as call's] [-H 'key: value']... TARGET [SYMBOL]",
  about = "Prints the definition of a service, method, message, enum, field, extension,\n" ..
          "oneof or enum value (pkg.E.V or pkg.V) as .proto source; with no SYMBOL, every\n" ..
          "service of the loaded files. Without schema\n" ..
          "flags the definitions come from TARGET's server reflection service; with\n" ..
          "them a TARGET is not needed (given, it is not asked).",
  example = "protocall describe -I examples -proto route.proto demo.Router\n" ..
            "  protocall describe -plaintext 127.0.0.1:50051 demo.Route",
}

M.list = {
  summary = "the services of the loaded files or a server, or a service's methods",
  flags = common.with_schema(common.with_connect {}),
  usage = "protocall list [schema flags] [TARGET] [SERVICE]\n" ..
          "       protocall list [-plaintext | TLS flags as call's] [-H 'key: value']... TARGET [SERVICE]",
  about = "Lists the services of the loaded files, or the methods of SERVICE. Without\n" ..
          "schema flags it asks TARGET's server reflection service; with them a TARGET\n" ..
          "is not needed (given, it is not asked).",
  example = "protocall list -I examples -proto route.proto\n" ..
            "  protocall list -plaintext 127.0.0.1:50051 demo.Router",
}

-- list and describe by server reflection (below).
local list_by_reflection, describe_by_reflection

-- With schema flags a first argument that is a target (host:port, a URL:
-- what no symbol spells) is left out, as grpcurl users give it: the
-- loaded files answer.
local function without_target(args)
  if args[1] and args[1]:find("[:/]") then
    local rest = {}
    for i = 2, #args do rest[i - 1] = args[i] end
    return rest
  end
  return args
end

function M.describe.run(flags, args)
  if not has_schema(flags) and #args > 0 then return describe_by_reflection(flags, args) end
  args = without_target(args)
  if #args > 1 then usage_error("describe", "at most one SYMBOL") end
  need_schema("describe", flags)
  local syms = symbols(descriptors(load_schemas(flags)))
  if args[1] == nil then
    for _, name in ipairs(services_of(syms)) do stdout:write(describe_one(name, syms[name])) end
    return 0
  end
  local name = args[1]:gsub("^%.", "")
  local s = syms[name]
  if not s then fail("Symbol not found: " .. name) end
  stdout:write(describe_one(name, s))
  return 0
end

function M.list.run(flags, args)
  if not has_schema(flags) and #args > 0 then return list_by_reflection(flags, args) end
  args = without_target(args)
  if #args > 1 then usage_error("list", "at most one SERVICE") end
  need_schema("list", flags)
  local syms = symbols(descriptors(load_schemas(flags)))
  if args[1] == nil then
    for _, name in ipairs(services_of(syms)) do stdout:write(name, "\n") end
    return 0
  end
  local s = syms[args[1]]
  if not s or s.kind ~= "service" then fail("Service not found: " .. args[1]) end
  for _, m in ipairs(s.d.method) do stdout:write(args[1], ".", m.name, "\n") end
  return 0
end

function list_by_reflection(flags, args)
  if #args > 2 then usage_error("list", "TARGET [SERVICE] expected") end
  local transport = connect(flags, args[1], "list")
  local service = args[2]
  local lines, status = with_reflection(flags, transport, function(r)
    if service == nil then return r.services() end
    r.symbol(service)
    local info = r.pool:service(service)
    if not info then fail("Service not found: " .. service) end
    local out = {}
    for i, m in ipairs(info.methods) do out[i] = service .. "." .. m.name end
    return out
  end, service and "protocall list: Service not found: " .. service, "list")
  if not lines then return status end
  for _, l in ipairs(lines) do stdout:write(l, "\n") end
  return 0
end

function describe_by_reflection(flags, args)
  if #args > 2 then usage_error("describe", "TARGET [SYMBOL] expected") end
  local transport = connect(flags, args[1], "describe")
  local want = args[2] and args[2]:gsub("^%.", "")
  local text, status = with_reflection(flags, transport, function(r)
    local names = want and { want } or r.services()
    for _, n in ipairs(names) do
      local ok, err = pcall(r.symbol, n)
      -- a server may know an enum value (pkg.E.V) or a oneof by its parent
      -- only: the parent's file holds it too
      local parent = not ok and n:match("^(.+)%.[^.]+$")
      if not ok and not (parent and pcall(r.symbol, parent)) then error(err, 0) end
    end
    local syms = symbols(descriptors(r.pool, r.pool:files()))
    local out = {}
    for _, n in ipairs(names) do
      local s = syms[n]
      if not s then fail("Symbol not found: " .. n) end
      out[#out + 1] = describe_one(n, s)
    end
    return concat(out)
  end, want and "protocall describe: Symbol not found: " .. want, "describe")
  if not text then return status end
  stdout:write(text)
  return 0
end

return M
