--- gRPC server reflection, grpc.reflection.v1.ServerReflection and its
-- v1alpha twin (grpc/reflection/v1*/reflection.proto, built in:
-- core/schema/wkt.h): the service a server offers (pc.server's
-- `reflection` option, rpc/server.lua), answered from its pool, and a
-- client of another server's, which the `protocall` command uses for
-- `list`, `describe` and `call` without -proto.
local core = require "protocall.core"
local errors = require "protocall.errors"
local internal = require "protocall.internal"
local message = require "protocall.message"
local schema = require "protocall.schema"
local client = require "protocall.rpc.client"

local type, error, pairs, tostring, pcall, getmetatable, assert =
  type, error, pairs, tostring, pcall, getmetatable, assert
local sort, format = table.sort, string.format
local ipairs = message.ipairs -- repeated fields are containers (LuaJIT's ipairs takes tables only)
local which_oneof, decode = core.which_oneof, core.decode
local file_descriptor_bytes = core.file_descriptor_bytes
local Error = errors.Error

local M = {}

local FILES = {
  v1 = "grpc/reflection/v1/reflection.proto",
  v1alpha = "grpc/reflection/v1alpha/reflection.proto",
}
local V1, V1ALPHA = "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"
-- The full names of the server reflection services (v1 and v1alpha) ->
-- true (pc.listen's `rest` leaves them out: rpc/rest.lua).
M.SERVICES = { [V1] = true, [V1ALPHA] = true }
local NOT_FOUND, INVALID_ARGUMENT = 5, 3


-- Every symbol of the pool's files -> the file defining it; extensions by
-- extendee and number -> file. Rebuilt when the pool has gained files.
local function indexer(pool)
  local index, count = nil, -1
  return function()
    local names = pool:files()
    if #names == count then return index end
    local symbols, extensions = {}, {}
    local function extension(file, prefix, f)
      symbols[prefix .. f.name] = file
      local extendee = f.extendee:gsub("^%.", "")
      extensions[extendee] = extensions[extendee] or {}
      extensions[extendee][f.number] = file
    end
    local function enum(file, prefix, e)
      symbols[prefix .. e.name] = file
      -- enum values are siblings of their enum, as in C++ scoping
      for _, v in ipairs(e.value) do symbols[prefix .. v.name] = file end
    end
    local function message_type(file, prefix, d)
      local name = prefix .. d.name
      symbols[name] = file
      local inner = name .. "."
      for _, f in ipairs(d.field) do symbols[inner .. f.name] = file end
      for _, o in ipairs(d.oneof_decl) do symbols[inner .. o.name] = file end
      for _, n in ipairs(d.nested_type) do message_type(file, inner, n) end
      for _, e in ipairs(d.enum_type) do enum(file, inner, e) end
      for _, x in ipairs(d.extension) do extension(file, inner, x) end
    end
    for _, file in ipairs(names) do
      local fd = pool:file_descriptor(file)
      local prefix = fd.package ~= "" and fd.package .. "." or ""
      for _, d in ipairs(fd.message_type) do message_type(file, prefix, d) end
      for _, e in ipairs(fd.enum_type) do enum(file, prefix, e) end
      for _, x in ipairs(fd.extension) do extension(file, prefix, x) end
      for _, s in ipairs(fd.service) do
        symbols[prefix .. s.name] = file
        for _, m in ipairs(s.method) do symbols[prefix .. s.name .. "." .. m.name] = file end
      end
    end
    index, count = { symbols = symbols, extensions = extensions }, #names
    return index
  end
end

-- The serialized FileDescriptorProto of `name` and of every file it
-- imports, transitively: `name` first, then each import once, depth first.
local function with_dependencies(pool, name)
  local out, seen = {}, {}
  local function visit(n)
    if seen[n] then return end
    seen[n] = true
    out[#out + 1] = file_descriptor_bytes(pool, n)
    for _, dep in ipairs(pool:file(n).dependencies) do visit(dep) end
  end
  visit(name)
  return out
end

--- handler = reflection_handler(pool, services): ServerReflectionInfo
-- (bidirectional) answering each request from `pool`: list_services
-- (the full names in `services`, sorted), file_by_filename,
-- file_containing_symbol (a package-qualified message, enum, enum value,
-- field, oneof, service, method or extension), file_containing_extension,
-- all_extension_numbers_of_type (sorted); a file comes with its imports,
-- transitively, each as protoc serializes it. What the pool lacks is an
-- ErrorResponse NOT_FOUND, a request without a question INVALID_ARGUMENT;
-- the stream goes on after either.
local function reflection_handler(pool, services)
  local index = indexer(pool)
  local listed = {}
  for i, name in ipairs(services) do listed[i] = { name = name } end

  local function answer(req)
    local resp = { valid_host = req.host, original_request = req }
    local kind = which_oneof(req, "message_request")
    local function not_found(what)
      resp.error_response = { error_code = NOT_FOUND, error_message = what }
      return resp
    end
    local function files_of(name)
      resp.file_descriptor_response = { file_descriptor_proto = with_dependencies(pool, name) }
      return resp
    end
    if kind == "list_services" then
      resp.list_services_response = { service = listed }
    elseif kind == "file_by_filename" then
      local name = req.file_by_filename
      if not pool:file(name) then return not_found("file not found: " .. name) end
      return files_of(name)
    elseif kind == "file_containing_symbol" then
      local name = req.file_containing_symbol:gsub("^%.", "")
      local file = index().symbols[name]
      if not file then return not_found("symbol not found: " .. name) end
      return files_of(file)
    elseif kind == "file_containing_extension" then
      local x = req.file_containing_extension
      local extendee = x.containing_type:gsub("^%.", "")
      local by = index().extensions[extendee]
      local file = by and by[x.extension_number]
      if not file then
        return not_found("extension not found: " .. extendee .. " " .. tostring(x.extension_number))
      end
      return files_of(file)
    elseif kind == "all_extension_numbers_of_type" then
      local name = req.all_extension_numbers_of_type:gsub("^%.", "")
      local T = pool:type(name)
      if not T or not T.full_name then return not_found("message type not found: " .. name) end
      local numbers = {}
      for n in pairs(index().extensions[name] or {}) do numbers[#numbers + 1] = n end
      sort(numbers)
      resp.all_extension_numbers_response = { base_type_name = name, extension_number = numbers }
    else
      resp.error_response = { error_code = INVALID_ARGUMENT,
                              error_message = "the request asks nothing (message_request unset)" }
    end
    return resp
  end

  return function(ctx)
    while true do
      local req = ctx:recv()
      if req == nil then return nil end
      ctx.send(answer(req))
    end
  end
end

--- problem | nil = serve(services, pool): adds the reflection services
-- (grpc.reflection.v1 and v1alpha, one handler answering both) to the
-- handler tables `services`, listing every service in it, and their files
-- to `pool`; what is wrong when the pool is frozen without them.
function M.serve(services, pool)
  for _, file in ipairs { FILES.v1, FILES.v1alpha } do
    local ok, err = schema.load_builtin(pool, file)
    if not ok then return err end
  end
  local names = { V1, V1ALPHA }
  for name in pairs(services) do
    if type(name) == "string" then names[#names + 1] = name end
  end
  sort(names)
  local handler = reflection_handler(pool, names)
  services[V1] = { ServerReflectionInfo = handler }
  services[V1ALPHA] = { ServerReflectionInfo = handler }
  return nil
end

--- What a reflection client takes from a server at most: files received
-- (each answer's files counted, kept or not), bytes of them, and the depth
-- of an import chain. Past one the client fails RESOURCE_EXHAUSTED naming
-- the file and the limit, so a hostile server cannot make it fetch and
-- recurse without end.
M.MAX_FILES, M.MAX_BYTES, M.MAX_DEPTH = 2000, 64 * 1024 * 1024, 100

--- r = client(transport [, {metadata =, timeout =}]): a client of the
-- server reflection service behind `transport` (grpc.reflection.v1, or
-- v1alpha when the server answers v1 UNIMPLEMENTED), one stream for all
-- its questions, loading the files it answers into a fresh pool, r.pool:
-- r.services() -> the sorted service names; r.symbol(name) loads the file
-- defining `name` with its imports (asking for an import the server did
-- not send by its name; a well-known type the server lacks comes built
-- in); r.files() -> file name -> the serialized FileDescriptorProto the
-- server sent, for the files r.pool holds; r.close(). Failures raise pc.Error (an ErrorResponse as its code
-- and message, with `reflection = true`; past M.MAX_FILES, M.MAX_BYTES or
-- M.MAX_DEPTH RESOURCE_EXHAUSTED, local).
function M.client(transport, opts)
  local rpool = schema.pool()
  for _, file in ipairs { FILES.v1, FILES.v1alpha } do assert(schema.load_builtin(rpool, file)) end
  local FDP = rpool:type("google.protobuf.FileDescriptorProto")
  local r = { pool = schema.pool() }
  local files = {} -- name -> {bytes =, fd =} as received
  local received, received_bytes = 0, 0
  local function exhausted(msg)
    error(Error { code = "RESOURCE_EXHAUSTED", message = "reflection: " .. msg, ["local"] = true }, 0)
  end
  local version, call, answered = 1, nil, false
  local copts = { transport = transport, pool = rpool, metadata = opts and opts.metadata,
                  timeout = opts and opts.timeout }

  local function exchange(req)
    if not call then call = client.client(version == 1 and V1 or V1ALPHA, copts):ServerReflectionInfo() end
    call:send(req)
    local resp = call:recv()
    if resp == nil then
      error(Error { code = "INTERNAL", message = "the reflection stream ended without an answer" }, 0)
    end
    return resp
  end

  local function ask(req)
    local ok, resp = pcall(exchange, req)
    if not ok and not answered and version == 1 and getmetatable(resp) == Error
        and resp.code == "UNIMPLEMENTED" then
      call:close()
      version, call = 2, nil
      ok, resp = pcall(exchange, req)
      if not ok and getmetatable(resp) == Error and resp.code == "UNIMPLEMENTED" then
        resp.message = "the server has no reflection service (" .. tostring(resp.message)
          .. "): give -proto FILE or -protoset FILE"
      end
    end
    if not ok then error(resp, 0) end
    answered = true
    local kind = which_oneof(resp, "message_response")
    if kind == "error_response" then
      local e = resp.error_response
      error(Error { code = internal.codes[e.error_code] or "UNKNOWN", message = e.error_message,
                    reflection = true }, 0)
    end
    return resp, kind
  end

  -- The files of an answer, kept by name; the name of the first.
  local function keep(resp, kind, what)
    if kind ~= "file_descriptor_response" then
      error(Error { code = "INTERNAL", message = "reflection answered " .. tostring(kind) .. " for " .. what }, 0)
    end
    local first
    for _, bytes in ipairs(resp.file_descriptor_response.file_descriptor_proto) do
      received, received_bytes = received + 1, received_bytes + #bytes
      if received > M.MAX_FILES then
        exhausted(format("more than %d files received (the last asked for %s)", M.MAX_FILES, what))
      end
      if received_bytes > M.MAX_BYTES then
        exhausted(format("more than %d bytes of files received (the last asked for %s)", M.MAX_BYTES, what))
      end
      local fd, err = decode(FDP, bytes)
      if not fd then
        error(Error { code = "INTERNAL", message = "reflection: a file descriptor failed to decode: " .. err }, 0)
      end
      first = first or fd.name
      if not files[fd.name] then files[fd.name] = { bytes = bytes, fd = fd } end
    end
    if not first then error(Error { code = "INTERNAL", message = "reflection sent no file for " .. what }, 0) end
    return first
  end

  -- A FileDescriptorSet holding the one serialized file `bytes`.
  local function set_of(bytes)
    local n, len = #bytes, {}
    repeat
      local b = n % 128
      n = math.floor(n / 128)
      len[#len + 1] = string.char(n > 0 and b + 128 or b)
    until n == 0
    return "\x0a" .. table.concat(len) .. bytes
  end

  -- Adds file `name` to the pool after its imports; `chain` lists the
  -- files importing it (the first asked for, then each import).
  local adding = {}
  local function add(name, chain)
    if r.pool:file(name) or adding[name] then return end
    if #chain >= M.MAX_DEPTH then
      exhausted(format("the imports of %s are more than %d files deep (%s imports %s)",
        chain[1], M.MAX_DEPTH, chain[#chain], name))
    end
    adding[name] = true
    local f = files[name]
    if not f and core.builtin_source(name) then return end
    if not f then
      local resp, kind = ask { file_by_filename = name }
      keep(resp, kind, name)
      f = files[name]
      if not f then error(Error { code = "INTERNAL", message = "reflection sent another file for " .. name }, 0) end
    end
    chain[#chain + 1] = name
    for _, dep in ipairs(f.fd.dependency) do add(dep, chain) end
    chain[#chain] = nil
    local ok, err = r.pool:load_descriptor_set(set_of(f.bytes))
    if not ok then error(Error { code = "INTERNAL", message = "reflection: " .. name .. ": " .. tostring(err) }, 0) end
  end

  function r.services()
    local resp, kind = ask { list_services = "" }
    if kind ~= "list_services_response" then
      error(Error { code = "INTERNAL", message = "reflection answered " .. tostring(kind) .. " for list_services" }, 0)
    end
    local names = {}
    for i, s in ipairs(resp.list_services_response.service) do names[i] = s.name end
    sort(names)
    return names
  end

  function r.symbol(name)
    local resp, kind = ask { file_containing_symbol = name }
    add(keep(resp, kind, name), {})
  end

  function r.files()
    local out = {}
    for name, f in pairs(files) do
      if r.pool:file(name) then out[name] = f.bytes end
    end
    return out
  end

  function r.close()
    if call then call:close() end
  end
  return r
end

return M
