--- The HTTP rules of a pool's services: `google.api.http` method options
-- (google/api/annotations.proto) and rules given apart from the schema in
-- the shape of google.api.Service's `http` (google.api.Http: `rules`,
-- each with a `selector`, `fully_decode_reserved_expansion`), checked
-- against the request and response types and compiled into routes of
-- one router (template.lua). Errors (pc.HttpRuleError) name the method,
-- the rule's pattern and what is wrong.
local errors = require "protocall.errors"
local schema = require "protocall.schema"
local message = require "protocall.message"
local wire = require "protocall.wire"
local json = require "protocall.json"
local template = require "protocall.http.template"
local shown = template.shown

local type, ipairs, pcall, assert = type, ipairs, pcall, assert
local format, tostring, setmetatable, upper, concat = string.format, tostring, setmetatable, string.upper, table.concat
local which_oneof, get_extension, has = message.which_oneof, message.get_extension, message.has
local mipairs = message.ipairs
local HttpRuleError = errors.HttpRuleError

local M = {}

-- A private pool with google/api/http.proto and a wrapper of one field
-- in google.api.Service's place, for rules given apart from the schema.
local config_pool
local function config_types()
  if not config_pool then
    config_pool = schema.pool()
    assert(config_pool:load([[
      syntax = "proto3";
      package protocall.http;
      import "google/api/http.proto";
      message Service { google.api.Http http = 31; }
    ]], { name = "protocall/http/service.proto" }))
  end
  return config_pool:type("google.api.Http"), config_pool:type("protocall.http.Service"),
    config_pool:type("google.api.HttpRule")
end

-- The well-known types a path variable or query parameter may name: their
-- JSON form is a string (or a bool for BoolValue). The value is the
-- wrapped scalar type of a wrapper.
local WKT_LEAF = {
  ["google.protobuf.Timestamp"] = "string", ["google.protobuf.Duration"] = "string",
  ["google.protobuf.FieldMask"] = "string",
  ["google.protobuf.DoubleValue"] = "double", ["google.protobuf.FloatValue"] = "float",
  ["google.protobuf.Int64Value"] = "int64", ["google.protobuf.UInt64Value"] = "uint64",
  ["google.protobuf.Int32Value"] = "int32", ["google.protobuf.UInt32Value"] = "uint32",
  ["google.protobuf.BoolValue"] = "bool", ["google.protobuf.StringValue"] = "string",
  ["google.protobuf.BytesValue"] = "bytes",
}
M.WKT_LEAF = WKT_LEAF

local HTTP_BODY = "google.api.HttpBody"
M.HTTP_BODY = HTTP_BODY

-- The field number of the google.api.http extension of MethodOptions
-- (google/api/annotations.proto).
local HTTP_OPTION = 72295728

--- index = field_index(pool, T): T's fields by proto name and by JSON
-- name, each {name, json_name, type, type_name, repeated, map, T (the
-- message type of a message field)}; cached in `cache`.
local function field_index(cache, pool, T)
  local idx = cache[T]
  if idx then return idx end
  idx = { [0] = {} } -- [0]: the fields in order
  for i, f in ipairs(pool:fields(T)) do
    local info = {
      name = f.name, json_name = f.json_name, type = f.type, type_name = f.type_name,
      repeated = f.label == "repeated", map = f.type:sub(1, 4) == "map<", presence = f.has_presence,
    }
    if f.type == "message" then info.T = pool:type(f.type_name) end
    idx[f.name] = info
    idx[0][i] = info
  end
  -- a JSON name never hides another field's proto name
  for _, info in ipairs(idx[0]) do
    if info.json_name and idx[info.json_name] == nil then idx[info.json_name] = info end
  end
  cache[T] = idx
  return idx
end
M.field_index = field_index

--- fields | nil, err = resolve(cache, pool, T, path): the fields a field
-- path (a list of names) walks through from T: every one but the last a
-- singular message field. nil and what is wrong.
local function resolve(cache, pool, T, path)
  local out = {}
  for i, name in ipairs(path) do
    local f = field_index(cache, pool, T)[name]
    if not f then return nil, format("no field '%s' in %s", (name:sub(1, 100):gsub("%c", "?")), T.full_name) end
    out[i] = f
    if i < #path then
      if f.type ~= "message" or f.repeated then
        return nil, format("%s.%s is not a singular message field", T.full_name, f.name)
      end
      T = f.T
    end
  end
  return out
end
M.resolve = resolve

-- What a path variable or query parameter may name last: a scalar, an
-- enum or one of WKT_LEAF (nil), else why not.
local function leaf_problem(f)
  if f.map then return "a map field" end
  if f.type == "message" and not WKT_LEAF[f.type_name] then return "a message field (" .. f.type_name .. ")" end
  return nil
end
M.leaf_problem = leaf_problem

-- "GET /v1/x" for errors (a long template cut at 200 bytes, a custom
-- kind at 80; control characters as "?").
local function describe(pattern, path)
  if #path > 200 then path = path:sub(1, 200) .. "..." end
  return format("%s %s", shown(pattern), (path:gsub("%c", "?")))
end

-- The methods of RFC 9110 (and PATCH): a custom kind spelled as one in
-- another case is refused (a request's method never matches it).
local STANDARD = { GET = true, HEAD = true, POST = true, PUT = true, DELETE = true, CONNECT = true,
  OPTIONS = true, TRACE = true, PATCH = true }

-- The method and template of an HttpRule message, or nil and why.
local function pattern_of(rule)
  local which = which_oneof(rule, "pattern")
  if which == nil then return nil, "no pattern (get, put, post, delete, patch or custom)" end
  if which == "custom" then
    local kind, path = rule.custom.kind, rule.custom.path
    local label = describe("custom", path)
    if kind == "" then return nil, "custom pattern without a kind", label end
    if kind:find("[^%w%-!#%$%%&'%*%+%.%^_`|~]") then
      return nil, format("custom kind '%s' is no HTTP method", shown(kind)), label
    end
    local standard = kind:upper()
    if STANDARD[standard] and kind ~= standard then
      return nil, format("custom kind '%s' never matches (methods are case-sensitive: %s)", kind, standard),
        describe(kind, path)
    end
    return kind, path
  end
  return which:upper(), rule[which]
end

-- One binding (a rule or an additional binding; `nested`: one of
-- another's) as far as the schema does not decide it: {method = the HTTP
-- method, path = its template's text, t = template.parse's, pattern =
-- "GET /v1/x" for errors}; nil, what is wrong and that pattern ("?" when
-- there is none).
local function binding(rule, nested)
  local http_method, path, label = pattern_of(rule)
  local pattern = http_method and describe(http_method, path) or label or "?"
  if not http_method then return nil, path, pattern end
  if nested and #rule.additional_bindings > 0 then
    return nil, "additional_bindings must not nest (one level only)", pattern
  end
  local t, perr = template.parse(path)
  if not t then return nil, "bad template: " .. perr, pattern end
  return { method = http_method, path = path, t = t, pattern = pattern }
end

-- One route of one binding (rule or additional binding; `nested`: an
-- additional binding's number among its rule's, from 1) of method `m`;
-- `n`: the rule's number among those given apart (opts.http), from 1,
-- which its errors lead with as its reading's errors do (rules_error),
-- and which the route keeps as `rule` (and `nested` as `additional`);
-- else (an annotation, or with `unbound` opts.unbound's POST) nil. nil
-- and a pc.HttpRuleError saying what is wrong: a rule given apart's
-- "http rules: rule 2: pkg.S.M: GET /v1/x: ...", with where in its JSON
-- (`path`); an annotation's led by its method and where the .proto
-- source sets the option (else declares the method), "pkg.S.M
-- (x.proto:13:12): rule GET /v1/x: ...", when the pool knows (`file`,
-- `line`, `column`).
local function compile(self, m, rule, nested, n, unbound)
  local b, why, pattern = binding(rule, nested)
  pattern = b and b.pattern or pattern
  -- the error `problem` of the binding, its member `member` at fault (nil: its pattern's)
  local function at(problem, member)
    local e = { problem = problem, method = m.full_name, pattern = pattern, rule = n, additional = nested,
      unbound = unbound or nil }
    if n then
      local place = nested and { "rules", n - 1, "additional_bindings", nested - 1 } or { "rules", n - 1 }
      place[#place + 1] = member or which_oneof(rule, "pattern")
      e.path = place
      e.message = format("http rules: rule %d%s: %s: %s: %s", n, nested and format(", additional binding %d", nested)
        or "", m.full_name, pattern, problem)
    else
      if not unbound then
        -- where the source sets the option, else declares the method
        local set = m.option_positions and m.option_positions[HTTP_OPTION] or m
        e.file, e.line, e.column = m.file, set.line, set.column
      end
      e.message = format("%s%s%s: rule %s: %s", m.full_name, e.line and format(" (%s:%d:%d)", e.file, e.line,
        e.column) or "", nested and format(", additional binding %d", nested) or "", pattern, problem)
    end
    return nil, setmetatable(e, HttpRuleError)
  end
  if not b then return at(why) end
  local http_method, path, t = b.method, b.path, b.t
  local pool, cache = self.pool, self.fields
  local route = {
    method = m.full_name, path = m.path, input = m.input, output = m.output,
    client_streaming = m.client_streaming, server_streaming = m.server_streaming,
    http_method = http_method, template = path, verb = t.verb, vars = t.vars,
    body = rule.body, response_body = rule.response_body,
    fully_decode = self.fully_decode, bound = {}, rule = n, additional = nested, unbound = unbound,
  }
  -- (where an annotation's .proto source sets the option, for another rule's clash with it)
  local set = not n and not unbound and (m.option_positions and m.option_positions[HTTP_OPTION] or m)
  if set and set.line then route.where = format(" (%s:%d:%d)", m.file, set.line, set.column) end
  for _, v in ipairs(t.vars) do
    local fields, err = resolve(cache, pool, m.input, v.path)
    if not fields then return at(format("variable '%s': %s", shown(v.field), err)) end
    local last = fields[#fields]
    if last.repeated and not last.map then return at(format("variable '%s': a repeated field", shown(v.field))) end
    local p = leaf_problem(last)
    if p then return at(format("variable '%s': %s", shown(v.field), p)) end
    v.fields = fields
    route.bound[v.field] = true
  end
  local input_is_body = m.input.full_name == HTTP_BODY
  if route.body ~= "" and route.body ~= "*" then
    local f = field_index(cache, pool, m.input)[route.body]
    if not f or f.name ~= route.body then
      return at(format("body '%s': no such top-level field in %s", shown(route.body), m.input.full_name), "body")
    end
    if route.bound[route.body] then
      return at(format("body '%s': the field is bound by the path too", shown(route.body)), "body")
    end
    route.body_field = f
    route.body_is_http_body = f.type_name == HTTP_BODY and not f.repeated
  elseif input_is_body then
    if #t.vars > 0 then
      return at("google.api.HttpBody request: no field may be bound by the path")
    end
    route.body_is_http_body = route.body == "*"
  end
  if http_method == "GET" and route.body ~= "" then
    return at(format("a GET rule may not have a body ('%s')", shown(route.body)), "body")
  end
  if route.response_body ~= "" then
    local f = field_index(cache, pool, m.output)[route.response_body]
    if not f or f.name ~= route.response_body then
      return at(format("response_body '%s': no such top-level field in %s", shown(route.response_body),
        m.output.full_name), "response_body")
    end
    route.response_field = f
    route.response_is_http_body = f.type_name == HTTP_BODY and not f.repeated
  else
    route.response_is_http_body = m.output.full_name == HTTP_BODY
  end
  local ok, other = self.router:add(t, http_method, route)
  if not ok then
    return at(format("the same method and template as %s's rule %s%s", other.method,
      describe(other.http_method, other.template), other.where or ""))
  end
  self.routes[#self.routes + 1] = route
  return route
end

-- The annotated rule of each method of the pool's files: {[full name] =
-- HttpRule}.
local function annotations(pool, wanted)
  local rules = {}
  local MethodOptions = pool:type("google.protobuf.MethodOptions")
  if not pool:type("google.api.HttpRule") or not MethodOptions then return rules end
  for _, name in ipairs(pool:files()) do
    local file = pool:file(name)
    if #file.services > 0 then
      local fd = pool:file_descriptor(name)
      local prefix = fd.package ~= "" and fd.package .. "." or ""
      for _, s in mipairs(fd.service) do
        local sname = prefix .. s.name
        if wanted == nil or wanted[sname] then
          for _, md in mipairs(s.method) do
            if has(md, "options") then
              local opts = wire.decode(MethodOptions, wire.encode(md.options))
              local ok, rule = pcall(get_extension, opts, "google.api.http")
              if ok and rule then rules[sname .. "." .. md.name] = rule end
            end
          end
        end
      end
    end
  end
  return rules
end

-- The index in the JSON text `s` just past the value at index `i`
-- (a JSON text the reader took: nothing here is checked).
local function past_value(s, i)
  local depth = 0
  repeat
    local c = s:sub(i, i)
    if c == '"' then
      i = i + 1
      repeat
        local q = s:find('["\\]', i) or #s
        i = q + (s:sub(q, q) == "\\" and 2 or 1)
      until s:sub(q, q) ~= "\\"
    elseif c == "{" or c == "[" or c == "}" or c == "]" then
      depth = depth + ((c == "{" or c == "[") and 1 or -1)
      i = i + 1
    elseif depth > 0 then
      i = i + 1
    else
      i = s:find("[%s,%]}]", i) or #s + 1
    end
  until depth == 0 or i > #s
  return i
end

-- A member's name as the JSON reader reads it, its escapes decoded
-- ("sel\u0065ctor" is selector), from `raw`, the text between its quotes.
local function member_name(raw)
  if not raw:find("\\", 1, true) then return raw end
  local _, _, HttpRule = config_types()
  local r = json.from_json(HttpRule, '{"selector":"' .. raw .. '"}')
  return r and r.selector or raw
end

-- The byte offset (from 0) in the JSON text `s` of the value at `path`
-- ({"rules", 0, "get"}: members by proto or JSON name, the last of a
-- name; array elements from 0), from the value at index `i`; nil when
-- it is not there.
local function value_offset(s, path, i, k)
  i, k = s:find("%S", i or 1), k or 1
  if not i then return nil end
  local step = path[k]
  if step == nil then return i - 1 end
  local open, close = s:sub(i, i), type(step) == "number" and "]" or "}"
  if open ~= (close == "]" and "[" or "{") then return nil end
  local json_name = type(step) == "string" and step:gsub("_(%l)", upper)
  local n, found = 0, nil
  i = s:find("%S", i + 1)
  while i and s:sub(i, i) ~= close do
    local at = i
    if close == "}" then -- a member: its name, ':' and its value
      local name_end = past_value(s, i)
      local name = member_name(s:sub(i + 1, name_end - 2))
      at = s:find("%S", s:find(":", name_end, true) + 1)
      if name == step or name == json_name then found = at end
    elseif n == step then
      found = at
    end
    n = n + 1
    i = s:find("%S", past_value(s, at))
    if i and s:sub(i, i) == "," then i = s:find("%S", i + 1) end
  end
  return found and value_offset(s, path, found, k + 1)
end
-- (the gateway finds a -rules file's wrong binding with it)
M.value_offset = value_offset

-- The rules given apart from the schema as a google.api.Http message:
-- `http` is a Lua table of its shape or of google.api.Service's (the
-- rules under an `http` key), or JSON text of either (a Service's other
-- members are skipped, but for google.api.Http's own, `rules` or
-- `fully_decode_reserved_expansion`, beside `http`: refused, as neither
-- shape is then clear).
-- "http rules: " and the error `err` of reading them, a rule's error
-- led by "rule N: ", N counted from 1 as the selector's error counts
-- (M.compile), where a path counts from 0, the JSON reader's and a Lua
-- table's alike ("rule 2: $.rules[1].get: ...", "rule 2:
-- google.api.Http.rules[1].get: ...").
local function rules_error(err)
  local i = err:match("^%$%.rules%[(%d+)%]") or err:match("^%$%.http%.rules%[(%d+)%]")
    or err:match("^google%.api%.Http%.rules%[(%d+)%]")
  if i then return format("http rules: rule %d: %s", tonumber(i) + 1, err) end
  return "http rules: " .. err
end

-- The members of google.api.Http, by proto name, which beside a
-- google.api.Service's `http` would be skipped (as a Service's other
-- members are): refused instead when they hold something (an empty list,
-- a null or false loses nothing).
local HTTP_MEMBERS = { "rules", "fully_decode_reserved_expansion" }

-- What is wrong with the member `name` of google.api.Http given at the
-- top level beside `http`.
local function both_shapes(name)
  return format("http rules: a top-level '%s' beside 'http': google.api.Service's rules go under 'http',"
    .. " google.api.Http's at the top level; give one shape", name)
end

-- The members of the JSON object text `s` (a text the reader took), at
-- most `max` of them, quoted as they are written: '"type", "name"', then
-- ", ..." past `max`; and the offset of the object's "{" (from 0).
local function top_members(s, max)
  local open = s:find("%S")
  local names, i = {}, s:find("%S", open + 1)
  while i and s:sub(i, i) == '"' do
    if #names == max then
      names[#names + 1] = "..."
      break
    end
    local name_end = past_value(s, i)
    names[#names + 1] = s:sub(i, name_end - 1)
    i = s:find("%S", past_value(s, s:find("%S", s:find(":", name_end, true) + 1)))
    if i and s:sub(i, i) == "," then i = s:find("%S", i + 1) end
  end
  return concat(names, ", "), open - 1
end

local function http_config(http)
  local Http, Service = config_types()
  if type(http) == "string" then
    local svc, serr = json.from_json(Service, http, { ignore_unknown = true })
    if svc and has(svc, "http") then
      -- (read as the JSON reader reads names, escapes too; the text is
      -- searched for a place only then)
      local top = json.from_json(Http, http, { ignore_unknown = true })
      for _, name in ipairs(HTTP_MEMBERS) do
        if top and (name == "rules" and #top.rules > 0 or name ~= "rules" and top[name]) then
          local at = value_offset(http, { name })
          return nil, at and format("%s at offset %d", both_shapes(name), at) or both_shapes(name)
        end
      end
      return svc.http
    end
    -- (a google.api.Service whose http member does not read: its own error)
    if not svc and serr:find("^%$%.http[.:]") then return nil, rules_error(serr) end
    local m, err = json.from_json(Http, http)
    if m then return m end
    -- an object of neither shape (a google.api.Service with "http" misspelt,
    -- say): google.api.Http's first unknown member would be one of its
    -- other members; its members named instead, at its "{"
    if svc and err:find("^%$%.[^.[:]+: no field named ") and not value_offset(http, { "rules" }) then
      local names, at = top_members(http, 8)
      return nil, format("http rules: neither google.api.Http (its \"rules\" at the top level) nor a"
        .. " google.api.Service with an \"http\" member: the top-level members are %s at offset %d", names, at)
    end
    return nil, rules_error(err)
  end
  if type(http) ~= "table" then return nil, "http rules: table or JSON text expected, got " .. type(http) end
  if http.http ~= nil then
    for _, name in ipairs(HTTP_MEMBERS) do
      if http[name] ~= nil then return nil, both_shapes(name) end
    end
    http = http.http
  end
  local ok, m = pcall(Http, http)
  if not ok then return nil, rules_error((tostring(m):gsub("^[^:\n]*:%d+: ", ""))) end
  return m
end
-- (the gateway checks a -rules file with it before any schema is read)
M.http_config = http_config

--- err, path = M.binding_problem(http): what is wrong, whatever the
-- schema, with the first rule or additional binding of `http` (a
-- google.api.Http message, http_config's) that is wrong so (no pattern,
-- a custom kind that is no method, nested additional_bindings, a template
-- that does not parse), in M.compile's words ("http rules: rule 1:
-- pkg.S.M: GET /v1/{name: bad template: unclosed '{'"), and where in the
-- JSON of the rules: {"rules", i, "additional_bindings", j, "get"} (the
-- member holding the pattern, else the binding; indices from 0); nil
-- when none is. (The gateway checks a -rules file so before any schema
-- is read.)
function M.binding_problem(http)
  for i, rule in mipairs(http.rules) do
    local path, selector = { "rules", i - 1 }, rule.selector
    local b, why, pattern = binding(rule, false)
    local nested
    for j, extra in mipairs(rule.additional_bindings) do
      if not b then break end
      b, why, pattern = binding(extra, true)
      if not b then path, rule, nested = { "rules", i - 1, "additional_bindings", j - 1 }, extra, j end
    end
    if not b then
      path[#path + 1] = which_oneof(rule, "pattern")
      return format("http rules: rule %d%s: %s: %s: %s", i, nested and format(", additional binding %d", nested)
        or "", shown(selector), pattern, why), path
    end
  end
  return nil
end

--- set | nil, err = M.compile(pool, services, opts): the routes of the
-- methods of `services` (a list of full names; nil: every service of the
-- pool), from their annotations and from `opts.http` (rules given apart,
-- which replace a method's annotation, "last one wins" among them), plus
-- with `opts.unbound` a POST "/pkg.Service/Method" with body "*" for each
-- method left without a rule (grpc-gateway's generate_unbound_methods).
-- Returns {router, routes = {...}, by_method = {[full name] = {route...}},
-- fields = the field index cache, pool, fully_decode}; else nil and what
-- is wrong: a pc.HttpRuleError (errors.lua) for rules that do not read or
-- fit, which for a rule of `opts.http` says where in its JSON (`path`) as
-- M.binding_problem says it: {"rules", i, "selector"}, {"rules", i,
-- "additional_bindings", j, "body"}, ... (the member at fault: the
-- selector, body or response_body, else the pattern's; indices from 0);
-- a string for a service the pool does not have.
function M.compile(pool, services, opts)
  local self = {
    pool = pool, router = template.router(), routes = {}, fields = setmetatable({}, { __mode = "k" }),
    fully_decode = false,
  }
  local wanted, methods = nil, {}
  if services then
    wanted = {}
    for _, s in ipairs(services) do wanted[s] = true end
  end
  local list = services or {}
  if not services then
    for _, name in ipairs(pool:files()) do
      for _, s in ipairs(pool:file(name).services) do list[#list + 1] = s end
    end
  end
  for _, sname in ipairs(list) do
    local s = pool:service(sname)
    if not s then return nil, format("no service '%s' in the pool", sname) end
    for _, m in ipairs(s.methods) do methods[m.full_name] = m; methods[#methods + 1] = m end
  end
  local rules, numbers = annotations(pool, wanted), {}
  if opts.http ~= nil then
    local http, err = http_config(opts.http)
    if not http then return nil, HttpRuleError { message = err } end
    self.fully_decode = http.fully_decode_reserved_expansion
    for i, rule in mipairs(http.rules) do
      local sel = rule.selector
      if not methods[sel] then
        -- a service of the pool that is not served, else a typo
        local sname = sel:match("^(.+)%.[^.]+$")
        local problem = format("selector '%s' names no method of the services", shown(sel))
        if sname and wanted and not wanted[sname] and pool:service(sname) then
          problem = format("selector '%s': %s is not one of the services served", shown(sel), shown(sname))
        end
        return nil, HttpRuleError { message = format("http rules: rule %d: %s", i, problem), problem = problem,
          selector = sel, rule = i, path = { "rules", i - 1, "selector" } }
      end
      rules[sel], numbers[sel] = rule, i
    end
  end
  for _, m in ipairs(methods) do
    local rule, n = rules[m.full_name], numbers[m.full_name]
    if rule then
      local ok, err = compile(self, m, rule, nil, n)
      if not ok then return nil, err end
      for j, extra in mipairs(rule.additional_bindings) do
        ok, err = compile(self, m, extra, j, n)
        if not ok then return nil, err end
      end
    elseif opts.unbound then
      local _, _, Rule = config_types()
      local ok, err = compile(self, m, Rule { post = m.path, body = "*" }, nil, nil, true)
      if not ok then return nil, err end
    end
  end
  return self
end

return M
