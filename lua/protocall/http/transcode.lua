--- HTTP/JSON transcoding by google.api.http rules (google/api/http.proto),
-- as Envoy's grpc_json_transcoder and grpc-gateway do it: `pc.transcoder`
-- compiles a pool's rules once; its methods map an HTTP request to a gRPC
-- request message and the answer back, with no I/O: the nginx gateway
-- (protocall.resty.gateway, doc/gateway.md) does its I/O around them, and
-- any other server that reads the HTTP request can call the same
-- functions. Failures are returned as pc.Error values (nil, err) whose
-- `http_status` says what :error() answers with; misuse raises.
local internal = require "protocall.internal"
local errors = require "protocall.errors"
local schema = require "protocall.schema"
local message = require "protocall.message"
local json = require "protocall.json"
local wire = require "protocall.wire"
local status = require "protocall.status"
local validate = require "protocall.validate"
local metadata_problem = require("protocall.core").metadata_problem
local template = require "protocall.http.template"
local rules = require "protocall.http.rules"

local type, pairs, ipairs, next, tostring, tonumber, pcall, setmetatable, error, collectgarbage =
  type, pairs, ipairs, next, tostring, tonumber, pcall, setmetatable, error, collectgarbage
local format, concat, byte, char, sub, lower = string.format, table.concat, string.byte, string.char, string.sub,
  string.lower
local Error, codes, argerror = errors.Error, internal.codes, internal.argerror
local seconds_problem = internal.seconds_problem
local from_json, to_json, merge = json.from_json, json.to_json, message.merge
local json_to_wire, wire_to_json = json.json_to_wire, json.wire_to_json
local encode, decode = wire.encode, wire.decode
local mpairs, has = message.pairs, message.has

local M = {}

--- HTTP status of each gRPC code: grpc-gateway's HTTPStatusFromCode
-- (runtime/errors.go), which Envoy's transcoder and googleapis'
-- google/rpc/code.proto comments agree with.
local HTTP_STATUS = {
  OK = 200, CANCELLED = 499, UNKNOWN = 500, INVALID_ARGUMENT = 400, DEADLINE_EXCEEDED = 504,
  NOT_FOUND = 404, ALREADY_EXISTS = 409, PERMISSION_DENIED = 403, UNAUTHENTICATED = 401,
  RESOURCE_EXHAUSTED = 429, FAILED_PRECONDITION = 400, ABORTED = 409, OUT_OF_RANGE = 400,
  UNIMPLEMENTED = 501, INTERNAL = 500, UNAVAILABLE = 503, DATA_LOSS = 500,
}
M.HTTP_STATUS = HTTP_STATUS

local OPEN_BRACE = byte("{")

local function invalid(msg) return Error { code = "INVALID_ARGUMENT", message = msg, http_status = 400 } end

-- JSON string of `s` (escapes '"', '\' and control characters; UTF-8 is
-- checked by the JSON reader).
local function quote_char(c) return format("\\u%04x", byte(c)) end
local function quote(s)
  if s:find('[%c"\\]') then s = s:gsub('[%c"\\]', quote_char) end
  return '"' .. s .. '"'
end

-- strconv.ParseBool's words (grpc-gateway reads query booleans with it).
local BOOL = {
  ["1"] = "true", t = "true", T = "true", TRUE = "true", ["true"] = "true", True = "true",
  ["0"] = "false", f = "false", F = "false", FALSE = "false", ["false"] = "false", False = "false",
}

-- The JSON text of the string `v` for the leaf field `f`, or nil and why:
-- proto3 JSON takes every other scalar, enum name and well-known type's
-- string form as a JSON string.
local function leaf_json(f, v)
  local t = f.type
  if t == "message" then t = rules.WKT_LEAF[f.type_name] end
  if t == "bool" then
    local b = BOOL[v]
    if not b then return nil, format("invalid bool %s", quote(v)) end
    return b
  end
  if t == "enum" and v:find("^%-?%d+$") then return v end
  return quote(v)
end

-- A JSON document of the request's path and query fields: a tree of
-- {order = {name...}, [name] = node | leaf}, leaf = {f, values}.
local function tree_put(tree, fields, value, key)
  local node = tree
  for i = 1, #fields - 1 do
    local name = fields[i].name
    local nxt = node[name]
    if not nxt then
      nxt = { order = {} }
      node[name] = nxt
      node.order[#node.order + 1] = name
    end
    node = nxt
  end
  local f = fields[#fields]
  local leaf = node[f.name]
  if not leaf then
    leaf = { f = f, values = {} }
    node[f.name] = leaf
    node.order[#node.order + 1] = f.name
  end
  if key then
    leaf.keys = leaf.keys or {}
    if leaf.keys[key] then return nil end
    leaf.keys[key], leaf.map = true, true
    value = quote(key) .. ":" .. value
  end
  leaf.values[#leaf.values + 1] = value
  return #leaf.values
end

local function tree_json(node, out)
  out[#out + 1] = "{"
  for i, name in ipairs(node.order) do
    if i > 1 then out[#out + 1] = "," end
    out[#out + 1] = '"' .. name .. '":' -- a field's proto name: nothing to escape
    local child = node[name]
    if child.order then
      tree_json(child, out)
    elseif child.map then
      out[#out + 1] = "{" .. concat(child.values, ",") .. "}"
    elseif child.f.repeated then
      out[#out + 1] = "[" .. concat(child.values, ",") .. "]"
    else
      out[#out + 1] = child.values[1]
    end
  end
  out[#out + 1] = "}"
end

-- The syntax error of the JSON text `s` ("$: unexpected end of input at
-- offset 9", a path and offset of `s` itself), or nil when it is one JSON
-- value (read as a google.protobuf.Value, of a private pool made once).
local value_type
local function json_syntax_error(s)
  if value_type == nil then
    local p = schema.pool()
    assert(p:load('syntax = "proto3"; import "google/protobuf/struct.proto";', { name = "protocall/json_value.proto" }))
    value_type = assert(p:type("google.protobuf.Value"))
  end
  local ok, err = from_json(value_type, s, { max_depth = 1000 })
  if ok or err:find("nested deeper", 1, true) then return nil end
  return err
end

-- "$.a.b[2]: what at offset 17" -> "a.b", "what".
local function json_error_parts(err)
  local path, what = err:match("^%$%.?([^:]*): (.*)$")
  if not path then return nil, err end
  what = what:gsub(" at offset %d+$", "")
  return (path:gsub("%[%d+%]", ""):gsub('%["(.-)"%]', ".%1")), what
end

-- A query parameter's name as errors quote it: at most 100 bytes, no
-- control characters.
local function shown(name)
  return (name:sub(1, 100):gsub("%c", "?"))
end

local Transcoder = {}
Transcoder.__index = Transcoder

local OPTIONS = {
  http = true, services = true, unbound = true, headers = true, ignore_unknown_query = true,
  ignore_unknown_fields = true, max_query_bytes = true, max_query_params = true, json = true,
  max_depth = true, max_body_bytes = true, validate = true, timeout = true, timeouts = true,
}

-- Bounds of the count options.
local COUNTS = {
  max_query_bytes = { 1, 2 ^ 31 - 1 }, max_query_params = { 1, 2 ^ 31 - 1 },
  max_body_bytes = { 1, 2 ^ 53 }, max_depth = { 1, 1000 },
}
local FLAGS = { unbound = true, ignore_unknown_query = true, ignore_unknown_fields = true, validate = true }
local JSON_FLAGS = { emit_defaults = true, proto_names = true, enums_as_ints = true }

local function got(v)
  if type(v) == "number" then return internal.show(v) end
  return type(v)
end

-- A list of strings `v` (nil when it is), or what is wrong.
local function strings_problem(k, v)
  if type(v) ~= "table" then return k .. ": list of strings expected, got " .. type(v) end
  local n = #v
  for i, x in pairs(v) do
    if type(i) ~= "number" or i < 1 or i > n or i % 1 ~= 0 then
      return k .. ": list of strings expected, got key " .. tostring(i)
    end
    if type(x) ~= "string" then return format("%s[%d]: string expected, got %s", k, i, type(x)) end
  end
  return nil
end

-- What is wrong with pc.transcoder's options (their names are known), or nil.
local function options_problem(opts)
  for k, range in pairs(COUNTS) do
    local v = opts[k]
    if v ~= nil then
      local lo, hi = range[1], range[2]
      if type(v) ~= "number" or v ~= v or v % 1 ~= 0 or v < lo or v > hi then
        local want = k == "max_depth" and "integer 1..1000" or "positive integer"
        return format("%s: %s expected, got %s", k, want, got(v))
      end
    end
  end
  for k in pairs(FLAGS) do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
      return format("%s: boolean expected, got %s", k, type(opts[k]))
    end
  end
  for _, k in ipairs { "headers", "services" } do
    if opts[k] ~= nil then
      local problem = strings_problem(k, opts[k])
      if problem then return problem end
    end
  end
  if opts.headers then
    for i, h in ipairs(opts.headers) do
      if not h:find("^[%w!#$%%&'*+%-.^_`|~]+$") then return format("headers[%d]: bad header name '%s'", i, shown(h)) end
    end
  end
  if opts.timeout ~= nil then
    local problem = seconds_problem("timeout", opts.timeout)
    if problem then return problem end
  end
  if opts.timeouts ~= nil then
    if type(opts.timeouts) ~= "table" then
      return "timeouts: table of method name -> seconds expected, got " .. type(opts.timeouts)
    end
    for k, v in pairs(opts.timeouts) do
      if type(k) ~= "string" then return "timeouts: method name keys expected, got " .. type(k) end
      local problem = seconds_problem(format("timeouts['%s']", shown(k)), v)
      if problem then return problem end
    end
  end
  local j = opts.json
  if j ~= nil then
    if type(j) ~= "table" then return "json: table of pc.to_json options expected, got " .. type(j) end
    for k, v in pairs(j) do
      if JSON_FLAGS[k] then
        if type(v) ~= "boolean" then return format("json.%s: boolean expected, got %s", k, type(v)) end
      elseif k == "indent" then
        if type(v) ~= "number" or v ~= v or v % 1 ~= 0 or v < 0 or v > 16 then
          return "json.indent: integer 0..16 expected, got " .. got(v)
        end
      elseif k == "pool" then
        if not schema.is_pool(v) then return "json.pool: protocall.Pool expected, got " .. type(v) end
      else
        return "json: unknown option '" .. tostring(k) .. "'"
      end
    end
  end
  return nil
end

--- tc = pc.transcoder([pool,] opts): the HTTP/JSON routes of the services
-- of `pool` (default the default pool), compiled once (google/api/http.proto;
-- Envoy's grpc_json_transcoder and grpc-gateway read the same rules).
-- opts: `services` (list of full names; default every service of the
-- pool), `http` (rules given apart from the schema, in the shape of
-- google.api.Service's `http`: a Lua table or JSON text of
-- {rules = {{selector = "pkg.Service.Method", get = "/v1/{name=x/*}",
-- body = "*", response_body =, additional_bindings = {...}}, ...},
-- fully_decode_reserved_expansion = false}, or of a whole Service with
-- them under `http`; a method's rule there replaces its annotation, as
-- http.proto says), `unbound` (true: a method without a rule is served as
-- POST /pkg.Service/Method with body "*", grpc-gateway's
-- generate_unbound_methods), `headers` (request headers passed on as
-- metadata besides `Grpc-Metadata-*`; default {"authorization"}),
-- `ignore_unknown_query` (skip query parameters naming no field instead of
-- failing, Envoy's ignore_unknown_query_parameters), `ignore_unknown_fields`
-- (skip body members naming no field), `max_query_bytes` (default 65536),
-- `max_query_params` (default 1024), `max_body_bytes` (default 4 MiB,
-- gRPC's default message limit; a placement should stop reading there),
-- `max_depth` (of body JSON, default
-- 100), `json` (pc.to_json's options for response bodies: emit_defaults,
-- proto_names, enums_as_ints, indent), `validate` (true: tc:request and
-- tc:requests refuse a request message that breaks its type's
-- protovalidate rules, as pc.server's `validate = true` does: INVALID_ARGUMENT,
-- HTTP 400, the violations as a google.rpc.BadRequest detail, before
-- anything reaches the upstream), `timeout` (seconds > 0: the deadline
-- of every route's call, Envoy's route timeout) and `timeouts` (method
-- full name -> seconds, overriding `timeout` for that method's routes;
-- tc:timeout puts them together with the request's Grpc-Timeout). Raises on a bad option and on an
-- invalid or conflicting rule a string, the text of its pc.HttpRuleError
-- (a string: nginx's init_by_lua* and a C host's lua_tostring print
-- nothing else; pc.listen's rest option raises the object), which names
-- the method, the rule and what is wrong: "t.S.Get: rule GET /v1/{nope}: variable
-- 'nope': no field 'nope' in t.Req" (an annotation of .proto source with
-- where its file sets the option, "t.S.Get (t.proto:8:12): rule GET
-- ..."; a rule of `http` led by its number there, from 1: "http rules:
-- rule 2: t.S.Get: GET /v1/{nope}: ...", its `path` the JSON path of the
-- member at fault); two rules with the same HTTP method and template shape;
-- '**' not last; a body or response_body naming no top-level field; a
-- variable bound to a repeated, map or message field (well-known types
-- with a string form excepted); nested additional_bindings; a GET with a
-- body. An option of the wrong type or out of range raises "bad argument
-- #2 to 'transcoder' (max_body_bytes: positive integer expected, got
-- string)": counts are integers (max_depth 1..1000), flags booleans,
-- `services` and `headers` lists of strings (header names), `json` only
-- pc.to_json's options.
local transcoder
function M.transcoder(pool, opts) return transcoder(pool, opts, tostring) end

-- M.transcoder_raising_object(pool, opts): M.transcoder raising a bad
-- rule's pc.HttpRuleError itself (for pc.listen's rest option,
-- lua/protocall/rpc/rest.lua).
function M.transcoder_raising_object(pool, opts)
  return transcoder(pool, opts, function(err) return err end)
end

-- (a tail call of both: error levels count from their caller)
function transcoder(pool, opts, rule_error)
  if opts == nil and type(pool) == "table" then pool, opts = nil, pool end
  pool = pool or schema.default_pool()
  if not schema.is_pool(pool) then argerror("transcoder", "protocall.Pool expected, got " .. type(pool), 2) end
  opts = opts or {}
  if type(opts) ~= "table" then argerror("transcoder", "options table expected, got " .. type(opts), 2, 2) end
  for k in pairs(opts) do
    if not OPTIONS[k] then argerror("transcoder", "unknown option '" .. tostring(k) .. "'", 2, 2) end
  end
  local problem = options_problem(opts)
  if problem then argerror("transcoder", problem, 2, 2) end
  local set, err = rules.compile(pool, opts.services, opts)
  if not set then error(rule_error(err), 2) end
  -- the allow-list by lowercased name; `first`: the first bytes (either
  -- case) a header tc:metadata reads can begin with, "grpc-*" or allowed
  local allow, first = {}, { [byte("g")] = true, [byte("G")] = true }
  for _, h in ipairs(opts.headers or { "authorization" }) do
    allow[lower(h)] = true
    if h ~= "" then first[byte(lower(h))], first[byte(h:upper())] = true, true end
  end
  local timeouts = opts.timeouts or {}
  for name in pairs(timeouts) do
    local known = false
    for _, r in ipairs(set.routes) do known = known or r.method == name end
    if not known then argerror("transcoder", format("timeouts['%s']: no route of that method", shown(name)), 2, 2) end
  end
  for _, r in ipairs(set.routes) do r.timeout = timeouts[r.method] or opts.timeout end
  -- the JSON options as the C readers and writers take them: nil when
  -- there are none (an options table, even empty, is read key by key)
  local json_opts = {}
  for k, v in pairs(opts.json or {}) do json_opts[k] = v end
  local read_opts = nil
  if opts.ignore_unknown_fields ~= nil or opts.max_depth ~= nil then
    read_opts = { ignore_unknown = opts.ignore_unknown_fields, max_depth = opts.max_depth }
  end
  return setmetatable({
    set = set, pool = pool, allow = allow, first = first,
    ignore_unknown_query = opts.ignore_unknown_query, ignore_unknown_fields = opts.ignore_unknown_fields,
    max_query_bytes = opts.max_query_bytes or 65536, max_query_params = opts.max_query_params or 1024,
    max_depth = opts.max_depth, json = json_opts, max_body_bytes = opts.max_body_bytes or 4194304,
    validate = opts.validate and true or nil,
    -- pc.to_json's options, nil when none; pc.from_json's for bodies
    write_opts = next(json_opts) ~= nil and json_opts or nil, read_opts = read_opts,
  }, Transcoder)
end

--- routes = tc:routes(): the compiled routes, in the order of the
-- methods and their bindings: each {method = "pkg.Service.Method", path =
-- "/pkg.Service/Method", input = Type, output = Type, client_streaming,
-- server_streaming, http_method = "GET", template = "/v1/{name=x/*}",
-- body = "" | "*" | field, response_body = "" | field, timeout = seconds
-- or nil (the `timeout`/`timeouts` options), rule = the number (from 1) of
-- the rule of the `http` option it comes from, nil for an annotation's,
-- additional = the number (from 1) of the additional binding of its rule
-- (or annotation) it comes from, nil for the rule's own, unbound = true
-- for the `unbound` option's}.
function Transcoder:routes() return self.set.routes end

--- seconds | nil = tc:timeout(route, header_timeout): the timeout of a
-- matched request's call: the shorter of the route's (the `timeout` and
-- `timeouts` options) and `header_timeout` (seconds, the Grpc-Timeout
-- header as tc:metadata returns it; nil: none); nil when neither is set.
-- pc.listen's REST placement (and so `protocall gateway`) gives the
-- handler it as ctx.timeout; the nginx gateway's `timeout` option is the
-- same rule.
function Transcoder.timeout(_, route, header_timeout)
  if type(route) ~= "table" or not route.input then argerror("timeout", "route expected", 2) end
  if header_timeout ~= nil and type(header_timeout) ~= "number" then
    argerror("timeout", "seconds expected, got " .. type(header_timeout), 2, 2)
  end
  local t = route.timeout
  if header_timeout and (not t or header_timeout < t) then t = header_timeout end
  return t
end

--- route, bindings, query | nil, err = tc:match(http_method, target):
-- the route of the request target ("/v1/messages/123?revision=2"; the
-- query string after '?' is returned as it is), and its variable
-- bindings, {{field = "a.b", value = decoded text}...}. Precedence as
-- grpc-gateway's and Envoy's: a literal segment over '*' over '**', at
-- each segment from the left; a last segment with ':' is first tried as
-- a custom verb, then as a plain segment. Percent-decoding per
-- http.proto: a single-segment variable ({var}, {var=*}) decodes every
-- escape, "%2F" included, so it never spans segments; a multi-segment one
-- ({var=a/*}, {var=**}) keeps "%2F"/"%2f" unless the rules set
-- fully_decode_reserved_expansion; literals compare decoded. Fails (nil,
-- pc.Error) NOT_FOUND (404) when nothing matches, UNIMPLEMENTED with
-- http_status 405 when the path matches for other methods only (`allow`
-- the Allow header RFC 9110 wants with it: those methods, "GET, POST"), and
-- INVALID_ARGUMENT (400) for a bad percent-escape or a "." or ".."
-- segment (decoded or not).
function Transcoder:match(http_method, target)
  if type(http_method) ~= "string" then argerror("match", "string expected, got " .. type(http_method), 2) end
  if type(target) ~= "string" then argerror("match", "string expected, got " .. type(target), 2, 2) end
  local hash = target:find("#", 1, true)
  if hash then target = target:sub(1, hash - 1) end
  local path, query = target, nil
  local q = target:find("?", 1, true)
  if q then path, query = target:sub(1, q - 1), target:sub(q + 1) end
  local route, raw, n = self.set.router:match(http_method, path) -- (failing: nil, why, allow)
  if not route then
    if raw == "not found" then
      return nil, Error { code = "NOT_FOUND", message = "no route for " .. http_method .. " " .. path:sub(1, 200),
        http_status = 404 }
    elseif raw == "method not allowed" then
      return nil, Error { code = "UNIMPLEMENTED", message = "method " .. http_method .. " not allowed for "
        .. path:sub(1, 200), http_status = 405, allow = n }
    end
    return nil, invalid(raw)
  end
  local bindings, vars = {}, route.vars
  for i = 1, #vars do -- not ipairs: an empty loop would start a trace of its own under LuaJIT
    local v = vars[i]
    bindings[i] = { field = v.field, value = template.binding(v, raw, n, route.fully_decode) }
  end
  return route, bindings, query
end

-- The value field of a map field `f` (f.value: {type, type_name}), or why
-- a query parameter cannot set it (a map of messages).
local function map_value(self, f)
  if f.value then return nil end
  local v = f.type:match(",%s*(.-)>$")
  if not v:find(".", 1, true) then
    f.value = { type = v }
    return nil
  end
  local T = self.pool:type(v)
  if type(T) == "table" then
    f.value = { type = "enum", type_name = v }
  elseif rules.WKT_LEAF[v] then
    f.value = { type = "message", type_name = v }
  else
    return "a map of messages (" .. v .. ")"
  end
  return nil
end

-- Names a route remembers (a recursive message type has no end of them:
-- the cache starts over when full).
local QCACHE_MAX = 512

-- The message nesting the query's JSON is read with (pc.from_json's
-- default): a parameter naming deeper fields is refused by name.
local QUERY_DEPTH = 100

-- Whether `fields` (a query parameter's) are set by the path or the
-- body: a variable's fields are a prefix of them, or the body field is
-- their first.
local function bound(route, fields)
  if route.body_field and route.body_field.name == fields[1].name then return true end
  for _, v in ipairs(route.vars) do
    local vf = v.fields
    if #vf <= #fields then
      local k = 1
      while k <= #vf and vf[k].name == fields[k].name do k = k + 1 end
      if k > #vf then return true end
    end
  end
  return false
end

-- Resolves a query parameter's name on a route: the fields it walks, or
-- false (bound by the path or the body: skipped, as grpc-gateway does),
-- or nil and why.
local function query_fields(self, route, name, map)
  local cache = route.qcache
  if not cache or route.qcount >= QCACHE_MAX then
    cache = {}
    route.qcache, route.qcount = cache, 0
  end
  local ckey = map and name .. "[]" or name
  local hit = cache[ckey]
  if hit ~= nil then return hit end
  local path = {}
  for id in (name .. "."):gmatch("([^.]*)%.") do
    path[#path + 1] = id
    if #path > QUERY_DEPTH then return nil, format("fields nested deeper than %d", QUERY_DEPTH) end
  end
  local fields, err = rules.resolve(self.set.fields, self.pool, route.input, path)
  if not fields then return nil, err end
  if bound(route, fields) then
    cache[ckey] = false
    route.qcount = route.qcount + 1
    return false
  end
  local last = fields[#fields]
  if map then
    if not last.map then return nil, "not a map field" end
    local problem = map_value(self, last)
    if problem then return nil, problem end
  else
    local problem = rules.leaf_problem(last)
    if problem then return nil, problem end
  end
  cache[ckey] = fields
  route.qcount = route.qcount + 1
  return fields
end

-- Whether a field of `msg` other than `except` is set: the body of a
-- body "field" rule is read as {"field": BODY}, so a BODY of `1, "x": 2`
-- would reach beyond its field.
local ZERO_VALUES = { [""] = true, [0] = true, [false] = true }
local function others_set(self, T, msg, except)
  for _, f in ipairs(rules.field_index(self.set.fields, self.pool, T)[0]) do
    if f ~= except then
      local v = msg[f.name]
      if f.map then
        if mpairs(v)(v) ~= nil then return true end
      elseif f.repeated then
        if #v > 0 then return true end
      elseif f.presence then
        if has(msg, f.name) then return true end
      elseif not ZERO_VALUES[v] and v ~= 0 then
        return true
      end
    end
  end
  return false
end

-- The field paths of a request's path variables and query parameters
-- (sources: {fields, variable} or {fields, parameter name, map key or
-- false}), each with what an error quotes: {["a.b"] = "query parameter
-- 'a.b'"}.
local function source_labels(sources)
  local labels = {}
  for _, src in ipairs(sources) do
    local names = {}
    for k, f in ipairs(src[1]) do names[k] = f.name end
    local path, label = concat(names, "."), "path variable '" .. src[2] .. "'"
    if src[3] ~= nil then
      label = "query parameter '" .. shown(src[2]) .. "'"
      if src[3] then path = path .. "." .. src[3] end
    end
    labels[path] = label
  end
  return labels
end

local function http_body(T, content_type, body)
  return T { content_type = content_type or "", data = body }
end

-- The request's path variables and (unless the body is "*") query
-- parameters as one JSON document of the route's input type: its text and
-- the sources fields_error needs, false when there are none, or nil and
-- the pc.Error of a bad variable or parameter.
local function fields_json(self, route, bindings, query)
  if (not bindings or bindings[1] == nil) and (route.body == "*" or not query or query == "") then return false end
  local tree, sources, any = { order = {} }, {}, false
  if bindings then
    for i, b in ipairs(bindings) do
      local v = route.vars[i]
      local value, why = leaf_json(v.fields[#v.fields], b.value)
      if not value then return nil, invalid(format("path variable '%s': %s", v.field, why)) end
      tree_put(tree, v.fields, value)
      sources[#sources + 1] = { v.fields, v.field }
      any = true
    end
  end
  if route.body ~= "*" and query and query ~= "" then
    local params, err = template.query(query, self.max_query_bytes, self.max_query_params)
    if not params then return nil, invalid(err) end
    for _, p in ipairs(params) do
      local name, value = p[1], p[2]
      local base, key
      if name:find("[", 1, true) then base, key = name:match("^([^%[]+)%[(.*)%]$") end -- grpc-gateway's map[key]=value
      local fields, why = query_fields(self, route, base or name, base ~= nil)
      if fields and key and key:find("[", 1, true) then -- grpc-gateway reads one level, name[key]
        return nil, invalid(format("query parameter '%s': a map key takes one level of brackets (name[key])",
          shown(name)))
      elseif fields then
        local last = fields[#fields]
        local jv, bad = leaf_json(base and last.value or last, value)
        if not jv then return nil, invalid(format("query parameter '%s': %s", shown(name), bad)) end
        local count = tree_put(tree, fields, jv, key)
        if not count then return nil, invalid(format("query parameter '%s': key given twice", shown(name))) end
        if count > 1 and not last.repeated then
          return nil, invalid(format("query parameter '%s' given %d times for a singular field", shown(name), count))
        end
        sources[#sources + 1] = { fields, name, key or false }
        any = true
      elseif fields == nil and not self.ignore_unknown_query then
        return nil, invalid(format("query parameter '%s': %s", shown(name), why))
      end
    end
  end
  if not any then return false end
  local out = {}
  tree_json(tree, out)
  return concat(out), sources
end

-- The pc.Error of fields_json's document refused by the JSON reader
-- (`err`), naming the variable or parameter.
local function fields_error(sources, err)
  local p, what = json_error_parts(err)
  local labels = source_labels(sources)
  local label = p and labels[p]
  while p and not label do -- a parent's label (a message value's member)
    p = p:match("^(.*)%.[^.]*$")
    label = p and labels[p]
  end
  return invalid(format("%s: %s", label or "request", what))
end

-- The request message of tc:request, before validation.
local function build_request(self, route, bindings, query, body, content_type)
  local T = route.input
  local msg
  body = body or ""
  if #body > self.max_body_bytes then
    return nil, Error { code = "RESOURCE_EXHAUSTED", http_status = 413,
      message = format("body of %d bytes (at most %d)", #body, self.max_body_bytes) }
  end
  if route.body == "*" then
    if route.body_is_http_body then
      msg = http_body(T, content_type, body)
    elseif body:find("^%s*$") then
      msg = T {}
    else
      local err
      msg, err = from_json(T, body, self.read_opts)
      if not msg then return nil, invalid("body: " .. err) end
    end
  elseif route.body ~= "" then
    local f = route.body_field
    if route.body_is_http_body then
      msg = T { [f.name] = http_body(f.T, content_type, body) }
    elseif body:find("^%s*$") then
      msg = T {}
    else
      local prefix = '{"' .. f.name .. '":'
      local err
      msg, err = from_json(T, prefix .. body .. "}", self.read_opts)
      if msg and others_set(self, T, msg, f) then
        msg, err = nil, "$: more than one JSON value"
      end
      if not msg then
        -- the wrapper's own braces would make a body cut short read as another error
        local syntax = json_syntax_error(body)
        if syntax then return nil, invalid("body: " .. syntax) end
        local p, what = err:match("^%$%.?([^:]*): (.*)$")
        local at = tonumber(err:match(" at offset (%d+)$"))
        local n = #f.name
        local where
        if p and p:sub(1, n) == f.name and (#p == n or p:find("^[.[]", n + 1)) then
          where = "$" .. p:sub(n + 1)
          what = what:gsub(" at offset %d+$", "")
        else
          where, what, at = "$", "more than one JSON value", nil
        end
        return nil, invalid(format("body: %s: %s%s", where, what,
          at and format(" at offset %d", at - #prefix) or ""))
      end
    end
  end
  local text, sources = fields_json(self, route, bindings, query)
  if text == nil then return nil, sources end
  if text then
    local extra, err = from_json(T, text)
    if not extra then return nil, fields_error(sources, err) end
    if msg then
      merge(msg, extra)
    else
      msg = extra
    end
  end
  return msg or T {}
end

--- msg | nil, err = tc:request(route, bindings, query, body, content_type):
-- the gRPC request message of a matched request (google/api/http.proto
-- "Rules for HTTP mapping"): the body (body "*": the whole message;
-- body "field": that top-level field, a JSON value of its kind; none: no
-- body is read; an empty or blank body sets nothing; a google.api.HttpBody
-- there takes the bytes raw with `content_type`), then the path variables
-- (which win over the body), then, unless body is "*", the query
-- parameters: `a.b=v` sets the nested field a.b (proto or JSON names), a
-- repeated field takes the parameter repeated, a map field `m[key]=v` per
-- entry (grpc-gateway; a key given twice is refused), an enum its name or number,
-- a bool true/false/1/0/t/f, a well-known type its JSON string form
-- (Timestamp, Duration, FieldMask, the wrappers); '+' is a space; a
-- parameter naming a field the path or the body binds is skipped
-- (grpc-gateway). Fails (nil, pc.Error INVALID_ARGUMENT, http_status 400)
-- naming the JSON path or the parameter: "body: $.revision: invalid
-- integer \"x\"", "query parameter 'revision': invalid integer \"x\"",
-- "query parameter 'nope': no field 'nope' in t.Req" (unless
-- ignore_unknown_query), "query parameter 'name' given 2 times for a
-- singular field", a bad escape or a query string past the limits; a body
-- past `max_body_bytes` fails RESOURCE_EXHAUSTED with http_status 413; a
-- body "field" body that is not one JSON value fails with its own syntax
-- error ("body: $: unexpected data after the value at offset 13", offsets
-- of the body), as a body "*" one does; with `validate`, a message that
-- breaks its type's rules fails as pc.server's `validate = true` refuses it,
-- and one whose rules fail to evaluate (a division by zero, a bad pattern
-- from the message, a cost limit) fails INVALID_ARGUMENT "validate: ..."
-- (http_status 400, no details), as there; a rule that does not compile
-- fails INTERNAL "validate: ...".
function Transcoder:request(route, bindings, query, body, content_type)
  if type(route) ~= "table" or not route.input then argerror("request", "route expected", 2) end
  local msg, err = build_request(self, route, bindings, query, body, content_type)
  if msg and self.validate then
    local ok, refused = pcall(validate.refusal, msg)
    if not ok then return nil, Error { code = "INTERNAL", message = tostring(refused) } end
    if refused then
      refused.http_status = 400
      return nil, refused
    end
  end
  return msg, err
end

-- Whether tc:request_bytes must make route's message to check it: with
-- `validate`, unless no rule can reach its type (validate.ruleless_types
-- of the pool's files once, at the first request; a type of a file loaded
-- later is checked).
local function checked(self, route)
  if not self.validate then return false end
  local set = self.ruleless
  if not set then
    set = validate.ruleless_types(self.pool)
    self.ruleless = set
  end
  return not set[route.input.full_name]
end

--- bytes | nil, err = tc:request_bytes(route, bindings, query, body,
-- content_type): tc:request's message as wire bytes, what a placement
-- sends upstream: the same message (a decoder reads the same fields), the
-- same failures, and a proto2 request missing a required field fails
-- INVALID_ARGUMENT (400) "request: missing required field: p.R.name"
-- (pc.encode's words) instead of raising. For a route whose body is "*" (JSON) or none
-- the body, path variables and query parameters go from JSON to wire
-- bytes in C (pc.json_to_wire), with no message object; other routes
-- (body "field", google.api.HttpBody) make the message first, and so does
-- a transcoder with `validate` for a type protovalidate rules can reach
-- (one whose file imports buf/validate/validate.proto, itself or through
-- its imports).
function Transcoder:request_bytes(route, bindings, query, body, content_type)
  if type(route) ~= "table" or not route.input then argerror("request_bytes", "route expected", 2) end
  local rb = route.body
  if checked(self, route) or route.body_is_http_body or (rb ~= "*" and rb ~= "") then
    local msg, err = self:request(route, bindings, query, body, content_type)
    if not msg then return nil, err end
    local ok, bytes = pcall(encode, msg)
    if not ok then return nil, invalid("request: " .. tostring(bytes)) end
    return bytes
  end
  body = body or ""
  if #body > self.max_body_bytes then
    return nil, Error { code = "RESOURCE_EXHAUSTED", http_status = 413,
      message = format("body of %d bytes (at most %d)", #body, self.max_body_bytes) }
  end
  local T = route.input
  if rb == "" or (byte(body) ~= OPEN_BRACE and body:find("^%s*$")) then body = "{}" end -- a JSON object: not blank
  local text, sources = fields_json(self, route, bindings, query)
  if text == nil then -- a bad variable or parameter: a bad body is said first, as tc:request does
    local _, err = json_to_wire(T, body, self.read_opts)
    if err then return nil, invalid("body: " .. err) end
    return nil, sources
  end
  local bytes, err, part = json_to_wire(T, body, self.read_opts, text or nil)
  if bytes then return bytes end
  if part == 1 then return nil, invalid("body: " .. err) end
  if part == 2 then return nil, fields_error(sources, err) end
  return nil, invalid("request: " .. err)
end

-- The JSON of a field at its default (response_body of an unset field).
local ZERO = { bool = "false", string = '""', bytes = '""', int64 = '"0"', uint64 = '"0"', sint64 = '"0"',
  fixed64 = '"0"', sfixed64 = '"0"' }
local function default_json(self, f)
  if f.map then return "{}" end
  if f.repeated then return "[]" end
  if f.type == "message" then return "{}" end
  if f.type == "enum" then
    if self.json.enums_as_ints then return "0" end
    local E = self.pool:type(f.type_name)
    return E and E[0] and quote(E[0]) or "0"
  end
  return ZERO[f.type] or "0"
end

-- JSON text of field `f` of `msg` alone (response_body).
local function field_json(self, route, msg, f)
  local v = msg[f.name]
  if f.type == "message" and not f.repeated then
    if v == nil then return "{}" end
    return to_json(v, self.write_opts)
  end
  local s = to_json(route.output { [f.name] = v }, self.write_opts)
  return s:match('^{%s*"[^"]*":%s*(.-)%s*}$') or default_json(self, f)
end

--- body, content_type = tc:response(route, msg): the HTTP response body of
-- the gRPC response `msg`: its JSON (pc.to_json with the transcoder's
-- `json` options), or with response_body that field's JSON value alone
-- (an unset message field is {}); a google.api.HttpBody (the response, or
-- the response_body field) gives its `data` raw with its `content_type`
-- ("application/octet-stream" when empty). Raises when the message
-- cannot be written as JSON (pc.to_json's errors).
function Transcoder:response(route, msg)
  if type(route) ~= "table" or not route.output then argerror("response", "route expected", 2) end
  local f = route.response_field
  if route.response_is_http_body then
    local hb = f and msg[f.name] or msg
    if hb == nil then return "", "application/octet-stream" end
    local ct = hb.content_type
    return hb.data, ct ~= "" and ct or "application/octet-stream"
  end
  if f then return field_json(self, route, msg, f), "application/json" end
  return to_json(msg, self.write_opts), "application/json"
end

--- body, content_type | nil, err = tc:response_bytes(route, bytes):
-- tc:response of the response message encoded in `bytes` (a gRPC
-- answer): for a route without response_body whose output is not
-- google.api.HttpBody the JSON comes from the bytes in C
-- (pc.wire_to_json), with no message object. Bytes that do not decode
-- fail (nil, pc.Error INTERNAL "response of pkg.Service.Method: ...");
-- raises as tc:response does.
function Transcoder:response_bytes(route, bytes)
  if type(route) ~= "table" or not route.output then argerror("response_bytes", "route expected", 2) end
  if route.response_field or route.response_is_http_body then
    local msg, err = decode(route.output, bytes)
    if not msg then return nil, Error { code = "INTERNAL", message = "response of " .. route.method .. ": " .. err } end
    return self:response(route, msg)
  end
  local body, err = wire_to_json(route.output, bytes, self.write_opts)
  if not body then return nil, Error { code = "INTERNAL", message = "response of " .. route.method .. ": " .. err } end
  return body, "application/json"
end

local STATUS_OPTS = { emit_defaults = true }

-- The HTTP status and google.rpc.Status JSON of a failure (tc:error).
local function status_json(self, err)
  local code = err.code
  if type(code) == "number" then code = codes[code] end
  if codes[code] == nil then code = "UNKNOWN" end
  local http = err.http_status or HTTP_STATUS[code] or 500
  local Status = schema.default_pool():type("google.rpc.Status")
  local st
  local bin = err.details_bin -- as the server sent it (rpc status tables keep it)
  if type(bin) ~= "string" and err.details ~= nil then bin = status.details_bin(err) end
  if type(bin) == "string" then st = wire.decode(Status, bin) end
  if st then
    st.code, st.message = codes[code], tostring(err.message or "")
  else
    st = Status { code = codes[code], message = tostring(err.message or "") }
  end
  local ok, body = pcall(to_json, st, { emit_defaults = true, pool = self.pool })
  if not ok then
    st.details = {}
    body = to_json(st, STATUS_OPTS)
  end
  return http, body
end

--- http_status, body, content_type, allow = tc:error(err): the HTTP answer of a
-- failed call or of a request refused before it (tc:match and tc:request
-- failures): the status by grpc-gateway's HTTPStatusFromCode (INVALID_ARGUMENT
-- 400, NOT_FOUND 404, UNAUTHENTICATED 401, PERMISSION_DENIED 403,
-- ALREADY_EXISTS and ABORTED 409, RESOURCE_EXHAUSTED 429, CANCELLED 499,
-- UNIMPLEMENTED 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, ...; an
-- `http_status` field of `err` wins, as 405 for a method not allowed) and
-- a google.rpc.Status as JSON, every field written as grpc-gateway writes
-- it: {"code":5,"message":"...","details":[{"@type":"type.googleapis.com/...",...}]}.
-- `err` is a pc.Error or a table {code = name or number, message =,
-- details = {messages...}}; details the pool cannot print are left out.
-- `allow`: a 405's Allow header (tc:match's `allow`), else nil.
function Transcoder:error(err)
  if type(err) ~= "table" then argerror("error", "pc.Error expected, got " .. type(err), 2) end
  local http, body = status_json(self, err)
  return http, body, "application/json", http == 405 and type(err.allow) == "string" and err.allow or nil
end

--- kind, content_type = tc:stream_kind(route, accept): how a server
-- stream's messages are written for a request whose Accept header is
-- `accept` (nil: none): "sse" (text/event-stream) when it asks for
-- text/event-stream, "raw" (the HttpBody's content type, or
-- application/octet-stream) for a google.api.HttpBody response, else
-- "ndjson" (newline-delimited JSON, grpc-gateway's form, application/json).
function Transcoder.stream_kind(_, route, accept)
  if type(route) ~= "table" or not route.output then argerror("stream_kind", "route expected", 2) end
  if route.response_is_http_body then return "raw", "application/octet-stream" end
  if type(accept) == "string" and lower(accept):find("text/event-stream", 1, true) then
    return "sse", "text/event-stream"
  end
  return "ndjson", "application/json"
end

--- chunk = tc:stream_message(route, msg, kind): one message of a server
-- stream as `kind` (tc:stream_kind) writes it: "ndjson" {"result": JSON}
-- and a newline (grpc-gateway's ForwardResponseStream), "sse" "data: JSON"
-- and a blank line, "raw" the HttpBody's data.
function Transcoder:stream_message(route, msg, kind)
  if kind == "raw" then return (self:response(route, msg)) end
  local body = self:response(route, msg)
  if kind == "sse" then return "data: " .. body .. "\n\n" end
  return '{"result":' .. body .. "}\n"
end

--- chunk = tc:stream_error(err, kind): a server stream's failure after
-- its first message (the HTTP status is sent by then): "ndjson"
-- {"error": google.rpc.Status JSON} and a newline (grpc-gateway), "sse"
-- "event: error", "data: JSON" and a blank line; "raw" the same as ndjson.
function Transcoder:stream_error(err, kind)
  if type(err) ~= "table" then argerror("stream_error", "pc.Error expected, got " .. type(err), 2) end
  local _, body = status_json(self, err)
  if kind == "sse" then return "event: error\ndata: " .. body .. "\n\n" end
  return '{"error":' .. body .. "}\n"
end

-- A step of the collector (collectgarbage's "step" size, KiB) every
-- PACE_LINES lines of a client stream whose messages are made to be checked.
local PACE_LINES, PACE_STEP = 16, 64

-- The messages of a client stream's body, each made by `one` (tc:request
-- or tc:request_bytes) and handed to `add` in order: tc:requests'
-- reading, every line read before the caller sends any. true, or nil and
-- the failure.
local function stream_of(self, one, add, route, bindings, query, body, content_type)
  body = body or ""
  if route.body_is_http_body or route.body == "" or #body > self.max_body_bytes then
    local m, err = one(self, route, bindings, query, body, content_type)
    if not m then return nil, err end
    add(m)
    return true
  end
  -- a message made per line only to be checked and encoded leaves its
  -- arena (C memory the collector does not count) as garbage: a step of
  -- the collector every PACE_LINES such lines keeps it near the body's size
  local paced = one == Transcoder.request_bytes and checked(self, route)
  local line = 0
  for text in (body .. "\n"):gmatch("([^\n]*)\n") do
    line = line + 1
    if not text:find("^%s*$") then
      local m, err = one(self, route, bindings, query, text, content_type)
      if not m then
        err.message = format("line %d: %s", line, err.message)
        return nil, err
      end
      add(m)
      if paced and line % PACE_LINES == 0 then collectgarbage("step", PACE_STEP) end
    end
  end
  return true
end

-- add, list = collector(): `add` appends to `list`.
local function collector()
  local list = {}
  return function(m) list[#list + 1] = m end, list
end

--- msgs | nil, err = tc:requests(route, bindings, query, body, content_type):
-- the messages of a client stream whose body is newline-delimited JSON:
-- each non-blank line is one message, read as tc:request reads a body
-- (path variables and query parameters set on each); an error names the
-- line ("line 3: body: $.text: ..."). A google.api.HttpBody request takes
-- the whole body as one message.
function Transcoder:requests(route, bindings, query, body, content_type)
  if type(route) ~= "table" or not route.input then argerror("requests", "route expected", 2) end
  local add, list = collector()
  local ok, err = stream_of(self, self.request, add, route, bindings, query, body, content_type)
  if not ok then return nil, err end
  return list
end

-- Messages packed per chunk: about this many bytes of them (each after
-- its length as a base-128 varint) make one string.
local PACK_CHUNK = 65536

-- The varint of length n (base 128, low group first, as protobuf's).
local function varint(n)
  if n < 128 then return char(n) end
  local out = {}
  while n >= 128 do
    out[#out + 1] = char(n % 128 + 128)
    n = (n - n % 128) / 128
  end
  out[#out + 1] = char(n)
  return concat(out)
end

--- next_bytes | nil, err = tc:requests_reader(route, bindings,
-- query, body, content_type): tc:requests' messages as wire bytes
-- (tc:request_bytes for each line), every line read (and the same
-- failures) before it returns, held packed: strings of
-- about 64 KiB each holding the messages after their lengths, a byte or
-- two more per message than their wire bytes (a list of strings costs
-- 20 to 60 bytes more per message under Lua 5.4: 1.3 million "{}" lines,
-- a 3.9 MB body, hold 1.1 MB packed and 34 MB as a list; 80,000 lines of
-- 30 bytes 1.9 MB and 6.9 MB). `next_bytes()` returns
-- the next message's wire bytes, nil after the last; a chunk read through
-- is let go. With `validate`, a type rules can reach has each line's
-- message made to check it, the collector stepped every 16 lines (their
-- arenas are memory it does not count: unpaced, 1.3 million lines held
-- 107 MB at once).
function Transcoder:requests_reader(route, bindings, query, body, content_type)
  if type(route) ~= "table" or not route.input then argerror("requests_reader", "route expected", 2) end
  local chunks, parts, size = {}, {}, 0
  local function add(bytes)
    parts[#parts + 1] = varint(#bytes)
    parts[#parts + 1] = bytes
    size = size + #bytes + 1
    if size >= PACK_CHUNK then
      chunks[#chunks + 1] = concat(parts)
      parts, size = {}, 0
    end
  end
  local ok, err = stream_of(self, self.request_bytes, add, route, bindings, query, body, content_type)
  if not ok then return nil, err end
  if #parts > 0 then chunks[#chunks + 1] = concat(parts) end
  parts = nil
  local ci, chunk, pos = 1, chunks[1], 1
  return function()
    while chunk and pos > #chunk do
      chunks[ci] = false
      ci, pos = ci + 1, 1
      chunk = chunks[ci]
    end
    if not chunk then return nil end
    local n, scale, b = 0, 1
    repeat
      b = byte(chunk, pos)
      pos = pos + 1
      n = n + b % 128 * scale
      scale = scale * 128
    until b < 128
    local bytes = sub(chunk, pos, pos + n - 1)
    pos = pos + n
    return bytes
  end
end

-- Metadata keys a header may not become: HTTP/2's and gRPC's own.
local RESERVED = {
  ["content-type"] = true, te = true, host = true, connection = true, ["content-length"] = true,
  ["transfer-encoding"] = true, ["keep-alive"] = true, upgrade = true, ["user-agent"] = true,
  ["proxy-connection"] = true, trailer = true,
}
local function reserved(key)
  return RESERVED[key] or key:sub(1, 5) == "grpc-" or not key:find("^[%w%-_%.]+$")
end

local BytesValue
local function b64decode(s)
  BytesValue = BytesValue or schema.default_pool():type("google.protobuf.BytesValue")
  local m = from_json(BytesValue, quote(s))
  return m and m.value
end
local function b64encode(s)
  BytesValue = BytesValue or schema.default_pool():type("google.protobuf.BytesValue")
  return to_json(BytesValue { value = s }):sub(2, -2)
end

local TIMEOUT_UNIT = { H = 3600, M = 60, S = 1, m = 1e-3, u = 1e-6, n = 1e-9 }

local GRPC = byte("g")

-- One header of tc:metadata: appends its metadata pair to `md` (`bytes`
-- of keys and values so far); returns why it is refused (nil: taken or
-- skipped), the Grpc-Timeout so far and the bytes.
local function metadata_header(self, md, timeout, bytes, name, value)
  if type(name) ~= "string" or type(value) ~= "string" then
    argerror("metadata", format("header %s: string name and value expected, got %s and %s",
      type(name) == "string" and "'" .. shown(name) .. "'" or tostring(name), type(name), type(value)), 3)
  end
  if not self.first[byte(name)] then return nil, timeout, bytes end -- no lower(): most headers end here
  local lname = lower(name)
  local key
  if byte(lname) == GRPC and lname:sub(1, 14) == "grpc-metadata-" then
    key = lname:sub(15)
  elseif lname == "grpc-timeout" then
    if timeout then return "Grpc-Timeout given more than once", timeout, bytes end
    local n, unit = value:match("^(%d+)([HMSmun])$")
    if not n or #n > 8 then return format("bad Grpc-Timeout '%s'", shown(value:sub(1, 40))), timeout, bytes end
    return nil, tonumber(n) * TIMEOUT_UNIT[unit], bytes
  elseif self.allow[lname] then
    key = lname
  end
  if not key then return nil, timeout, bytes end
  if key == "" or key == "-bin" or not key:find("^[%w%-_%.]+$") then
    return format("header '%s': not a gRPC metadata key", shown(name)), timeout, bytes
  end
  if reserved(key) then return nil, timeout, bytes end
  if key:sub(-4) == "-bin" then
    local v = b64decode(value)
    if not v then return format("header '%s': bad base64", shown(name)), timeout, bytes end
    value = v
  elseif value:find("[^\32-\126]") then
    return format("header '%s': value must be printable ASCII", shown(name)), timeout, bytes
  end
  local problem = metadata_problem({ { key, value } }, #md, bytes)
  if problem then return format("header '%s': %s", shown(name), problem), timeout, bytes end
  md[#md + 1] = { key, value }
  return nil, timeout, bytes + #key + #value
end

--- metadata, timeout | nil, err = tc:metadata(headers): the gRPC
-- metadata of a request's headers (`headers`: a list of {name, value} or
-- a table name -> value or list of values, strings): `Grpc-Metadata-<key>`
-- as <key> (grpc-gateway), a header of the `headers` option by its
-- lowercased name; keys HTTP/2 or gRPC reserve (content-type, te, host,
-- connection, user-agent, grpc-*) are dropped, a "-bin" key's value is
-- base64 (standard or URL-safe) and is decoded. `timeout` is the
-- `Grpc-Timeout` header's ("1S", "500m", gRPC's form) in seconds, or nil.
-- Fails (nil, pc.Error INVALID_ARGUMENT, http_status 400, naming the
-- header) on a bad or repeated Grpc-Timeout, a key gRPC cannot carry
-- (empty, "-bin" alone, a character outside 0-9 a-z - _ .), a value that
-- is not printable ASCII (or not base64 for a "-bin" key), or metadata
-- past the bounds calls take (1000 pairs, 64 KiB of keys and values)
-- where a call would fail INTERNAL; grpc-gateway skips such a header
-- with a log line instead. Raises on a header that is not a string name
-- with a string value.
function Transcoder:metadata(headers)
  if type(headers) ~= "table" then argerror("metadata", "table expected, got " .. type(headers), 2) end
  local md, timeout, bytes = {}, nil, 0
  local why
  if headers[1] ~= nil then
    for i, h in ipairs(headers) do
      if type(h) ~= "table" then
        argerror("metadata", format("header %d: {name, value} expected, got %s", i, type(h)), 2)
      end
      why, timeout, bytes = metadata_header(self, md, timeout, bytes, h[1], h[2])
      if why then return nil, invalid(why) end
    end
  else
    for name, value in pairs(headers) do
      if type(value) == "table" then
        for _, v in ipairs(value) do
          why, timeout, bytes = metadata_header(self, md, timeout, bytes, name, v)
          if why then return nil, invalid(why) end
        end
      else
        why, timeout, bytes = metadata_header(self, md, timeout, bytes, name, value)
        if why then return nil, invalid(why) end
      end
    end
  end
  return md, timeout
end

--- list = tc:response_headers(headers, trailers): the HTTP headers of a
-- call's response metadata, as grpc-gateway writes them: each header
-- {key, value} as {"Grpc-Metadata-<key>", value} and each trailer as
-- {"Grpc-Trailer-<key>", value}; a "-bin" value base64-encoded; keys gRPC
-- or HTTP/2 reserve (grpc-*, content-type, ...) left out. Either list may
-- be nil.
function Transcoder.response_headers(_, headers, trailers)
  local out = {}
  for pass, list in ipairs { headers or {}, trailers or {} } do
    local prefix = pass == 1 and "Grpc-Metadata-" or "Grpc-Trailer-"
    for _, kv in ipairs(list) do
      local key, value = lower(kv[1]), kv[2]
      if not reserved(key) then
        if key:sub(-4) == "-bin" then value = b64encode(value) end
        out[#out + 1] = { prefix .. key, value }
      end
    end
  end
  return out
end

return M
