--- gRPC server reflection, grpc.reflection.v1.ServerReflection and its
-- v1alpha twin (grpc/reflection/v1*/reflection.proto, built in:
-- core/schema/wkt.c), answered from the server's pool, and the built-in
-- services pc.server adds for its `health` and `reflection` options
-- (doc/guide.md "Health and reflection").
local M = {}

local type, error, pairs, ipairs, tostring = type, error, pairs, ipairs, tostring
local sort = table.sort

local HEALTH = "grpc.health.v1.Health"
local FILES = {
  health = "grpc/health/v1/health.proto",
  v1 = "grpc/reflection/v1/reflection.proto",
  v1alpha = "grpc/reflection/v1alpha/reflection.proto",
}
local V1, V1ALPHA = "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"
local NOT_FOUND, INVALID_ARGUMENT = 5, 3

function M.install(pc, core)
  local ipairs = pc.ipairs -- repeated fields are containers (LuaJIT's ipairs takes tables only)
  local file_descriptor_bytes = core.file_descriptor_bytes

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
      local function message(file, prefix, d)
        local name = prefix .. d.name
        symbols[name] = file
        local inner = name .. "."
        for _, f in ipairs(d.field) do symbols[inner .. f.name] = file end
        for _, o in ipairs(d.oneof_decl) do symbols[inner .. o.name] = file end
        for _, n in ipairs(d.nested_type) do message(file, inner, n) end
        for _, e in ipairs(d.enum_type) do enum(file, inner, e) end
        for _, x in ipairs(d.extension) do extension(file, inner, x) end
      end
      for _, file in ipairs(names) do
        local fd = pool:file_descriptor(file)
        local prefix = fd.package ~= "" and fd.package .. "." or ""
        for _, d in ipairs(fd.message_type) do message(file, prefix, d) end
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
      local kind = pc.which_oneof(req, "message_request")
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
        resp.error_response = { error_code = INVALID_ARGUMENT, error_message = "the request asks nothing (message_request unset)" }
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

  --- services = pc._builtin_services(services, opts, pool): `services`
  -- (pc.server's first argument) with the built-in services of
  -- opts.health (true: a new pc.health() with each service of `services`
  -- SERVING; or a pc.health() object, as its owner set it) and
  -- opts.reflection (true: both reflection versions, listing every
  -- service served), their files added to `pool`. Raises at pc.server's
  -- caller on a bad option or a frozen pool without the files.
  function pc._builtin_services(services, opts, pool)
    local all = {}
    for k, v in pairs(services) do all[k] = v end
    local function need(file)
      local ok, err = pc._load_builtin(pool, file)
      if not ok then error("pc.server: " .. err, 3) end
    end
    local h = opts.health
    if h then
      need(FILES.health)
      if h == true then
        -- as gRPC's default health service: every service served is SERVING
        h = pc.health { pool = pool }
        for name in pairs(services) do
          if type(name) == "string" then h:set(name, "SERVING") end
        end
      elseif not pc._is_health(h) then
        error("pc.server: health: true or pc.health() expected, got " .. type(h), 3)
      end
      all[HEALTH] = h
    end
    local r = opts.reflection
    if r then
      if r ~= true then error("pc.server: reflection: true expected, got " .. type(r), 3) end
      need(FILES.v1)
      need(FILES.v1alpha)
      local names = { V1, V1ALPHA }
      for name in pairs(all) do
        if type(name) == "string" then names[#names + 1] = name end
      end
      sort(names)
      local handler = reflection_handler(pool, names)
      all[V1] = { ServerReflectionInfo = handler }
      all[V1ALPHA] = { ServerReflectionInfo = handler }
    end
    return all
  end
end

return M
