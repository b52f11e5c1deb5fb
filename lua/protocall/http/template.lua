--- Path templates of google/api/http.proto ("Path template syntax"):
-- parsing a template, a router that matches (HTTP method, path) against
-- many of them in one walk of a trie, percent-decoding and the query
-- string. No schema here: a template's variables are field paths as text,
-- which rules.lua checks against the request type.
--
--     Template = "/" Segments [ Verb ] ;
--     Segments = Segment { "/" Segment } ;
--     Segment  = "*" | "**" | LITERAL | Variable ;
--     Variable = "{" FieldPath [ "=" Segments ] "}" ;
--     FieldPath = IDENT { "." IDENT } ;
--     Verb     = ":" LITERAL ;
local type, tonumber, ipairs, setmetatable = type, tonumber, ipairs, setmetatable
local concat, char, format = table.concat, string.char, string.format

local M = {}

-- Characters a LITERAL may hold: RFC 3986's pchar without ':' (the verb's
-- mark), with percent-escapes.
local LITERAL = "^[%w%-%._~!%$&'%(%)%+,;@%%]+$"

-- true when every '%' of `s` begins a %XX escape.
local function escapes_ok(s)
  if not s:find("%", 1, true) then return true end
  return not (s:find("%%[^%x]") or s:find("%%%x[^%x]") or s:find("%%%x?$"))
end

local function hex_char(h) return char(tonumber(h, 16)) end
local function hex_char_but_slash(h)
  local c = char(tonumber(h, 16))
  if c == "/" then return "%" .. h end
  return c
end

--- s = decode(s, keep_slash): `s` with its %XX escapes decoded (escapes
-- checked by the caller); "%2F" and "%2f" stay as they are when
-- `keep_slash` (http.proto: multi-segment variables).
local function decode(s, keep_slash)
  if not s:find("%", 1, true) then return s end
  return (s:gsub("%%(%x%x)", keep_slash and hex_char_but_slash or hex_char))
end
M.decode = decode

--- s = shown(text): user text (a selector, a template's part) as an error
-- quotes it: its first 80 bytes (fewer when the 81st continues a UTF-8
-- sequence: the cut never splits a character), then "..." when there is
-- more, control characters as "?", so that a huge one makes a short line.
local function shown(text)
  if #text <= 80 then return (text:gsub("%c", "?")) end
  local n = 80
  while n > 77 and text:byte(n + 1) >= 0x80 and text:byte(n + 1) < 0xC0 do n = n - 1 end
  return (text:sub(1, n):gsub("%c", "?") .. "...")
end
M.shown = shown

--- Most segments a template may have: the router's walk goes one level
-- of recursion per segment, and paths of real APIs have far fewer.
M.MAX_SEGMENTS = 64

-- Why a literal segment (decoded) can never match, or nil: a request
-- path's "." and ".." segments are refused before matching.
local function dot_problem(text)
  if text == "." or text == ".." then
    return format("segment '%s' never matches (a path's '.' and '..' are refused)", text)
  end
  return nil
end

--- t | nil, err = parse(template): the template as {segments = {kind,
-- text}..., verb = string | nil, vars = {{field = "a.b", path = {"a",
-- "b"}, first = i, last = j | nil (a "**": to the end), single =
-- boolean}...}}; segment kinds are "lit" (text decoded), "*" and "**".
-- nil and what is wrong, with the offending part; a literal "." or ".."
-- ("%2e" decoded: one no path can match) and more than M.MAX_SEGMENTS
-- segments are refused.
function M.parse(template)
  if type(template) ~= "string" then return nil, "template: string expected, got " .. type(template) end
  if template:sub(1, 1) ~= "/" then return nil, "must begin with '/'" end
  local segs, vars, seen = {}, {}, {}
  local pos, n = 2, #template
  local verb
  local var -- the variable being read
  while true do
    -- one segment starts at pos
    local c = template:sub(pos, pos)
    if c == "{" then
      if var then return nil, "a variable's template must not contain other variables" end
      local close = template:find("}", pos, true)
      if not close then return nil, "unclosed '{'" end
      local inner = template:sub(pos + 1, close - 1)
      local field, rest = inner:match("^([^=]*)=?(.*)$")
      local path = {}
      for id in (field .. "."):gmatch("([^.]*)%.") do
        if not id:find("^[%a_][%w_]*$") then
          return nil, format("variable '{%s}': bad field path '%s'", shown(inner), shown(field))
        end
        path[#path + 1] = id
      end
      if seen[field] then return nil, format("field '%s' is bound twice", shown(field)) end
      seen[field] = true
      if inner:find("=", 1, true) and rest == "" then
        return nil, format("variable '{%s}': empty template", shown(inner))
      end
      if rest:find("[{}]") then return nil, "a variable's template must not contain other variables" end
      var = { field = field, path = path, first = #segs + 1 }
      vars[#vars + 1] = var
      local parts = rest == "" and { "*" } or {}
      if rest ~= "" then
        for part in (rest .. "/"):gmatch("([^/]*)/") do parts[#parts + 1] = part end
      end
      for _, part in ipairs(parts) do
        if part == "*" or part == "**" then
          segs[#segs + 1] = { kind = part }
        elseif part == "" then
          return nil, format("variable '{%s}': empty segment", shown(inner))
        elseif part:find(LITERAL) and escapes_ok(part) then
          local text = decode(part)
          local problem = dot_problem(text)
          if problem then return nil, format("variable '{%s}': %s", shown(inner), problem) end
          segs[#segs + 1] = { kind = "lit", text = text }
        else
          return nil, format("variable '{%s}': bad segment '%s'", shown(inner), shown(part))
        end
        if #segs > M.MAX_SEGMENTS then return nil, format("more than %d segments", M.MAX_SEGMENTS) end
      end
      var.last = #segs
      var.single = var.last == var.first and segs[var.last].kind ~= "**"
      var = nil
      pos = close + 1
    else
      local stop = template:find("[/:{}]", pos) or n + 1
      local part = template:sub(pos, stop - 1)
      if part == "*" or part == "**" then
        segs[#segs + 1] = { kind = part }
      elseif part == "" then
        return nil, pos > n and "empty last segment" or format("empty segment at offset %d", pos - 1)
      elseif part:find(LITERAL) and escapes_ok(part) then
        local text = decode(part)
        local problem = dot_problem(text)
        if problem then return nil, problem end
        segs[#segs + 1] = { kind = "lit", text = text }
      else
        return nil, format("bad segment '%s'", shown(part))
      end
      if #segs > M.MAX_SEGMENTS then return nil, format("more than %d segments", M.MAX_SEGMENTS) end
      pos = stop
    end
    c = template:sub(pos, pos)
    if c == "/" then
      pos = pos + 1
    elseif c == ":" then
      verb = template:sub(pos + 1)
      if not verb:find(LITERAL) or not escapes_ok(verb) then return nil, format("bad verb ':%s'", shown(verb)) end
      verb = decode(verb)
      break
    elseif c == "" then
      break
    else
      return nil, format("unexpected '%s' at offset %d", shown(c), pos - 1)
    end
  end
  for i, s in ipairs(segs) do
    if s.kind == "**" and i ~= #segs then return nil, "'**' must be the last segment" end
  end
  for _, v in ipairs(vars) do
    if segs[v.last].kind == "**" then v.last = nil end
  end
  return { segments = segs, verb = verb, vars = vars }
end

-- The router: a trie of segments. node = {lit = {text = node}, star =
-- node, dstar = node, ends = {[verb or ""] = {[http method] = route}}}.
-- A "**" node has only ends ('**' is last). Beside it, `exact` holds the
-- templates of literals alone, binding nothing, by their text
-- ("/v1/echo", "/v1/x:verb"):
-- {[text] = {[http method] = route}}, what a path without escapes that
-- equals one is matched by before (and instead of) the walk.
local Router = {}
Router.__index = Router

--- router = M.router(): an empty router.
function M.router() return setmetatable({ root = {}, exact = {} }, Router) end

-- The text a path equal to template `t` has when `t` is literals alone
-- and its path can only be matched whole by it, or nil: a literal or verb
-- that decoded holds '/', ':' or '%' (a "%2F" literal is one segment the
-- path's text would split; a "%3A" one reads as a verb) is left to the
-- walk, which alone reads such a path right.
local function exact_text(t)
  if t.vars[1] then return nil end -- "{name=shelves}" is literals that bind
  local parts = {}
  for i, s in ipairs(t.segments) do
    if s.kind ~= "lit" or s.text:find("[/:%%]") then return nil end
    parts[i] = s.text
  end
  local text = "/" .. concat(parts, "/")
  if t.verb then
    if t.verb:find("[/:%%]") then return nil end
    text = text .. ":" .. t.verb
  end
  return text
end

--- route | nil, other = router:add(t, http_method, route): adds the
-- parsed template `t` for `http_method`; nil and the route already there
-- when another has the same method and the same template shape (the same
-- literals, '*' and '**' and verb, whatever its variables).
function Router:add(t, http_method, route)
  local node = self.root
  for _, s in ipairs(t.segments) do
    local key, nxt
    if s.kind == "lit" then
      node.lit = node.lit or {}
      nxt = node.lit[s.text] or {}
      node.lit[s.text] = nxt
    else
      key = s.kind == "*" and "star" or "dstar"
      nxt = node[key] or {}
      node[key] = nxt
    end
    node = nxt
  end
  node.ends = node.ends or {}
  local byverb = node.ends[t.verb or ""] or {}
  node.ends[t.verb or ""] = byverb
  if byverb[http_method] then return nil, byverb[http_method] end
  byverb[http_method] = route
  local text = exact_text(t)
  if text then
    local e = self.exact[text] or {}
    self.exact[text] = e
    e[http_method] = route
  end
  return route
end

-- The route of `node` for `verb` and `method`, or nil (noting in
-- `found.path` the set of the other methods the node has routes for).
local function at_end(node, verb, method, found)
  local e = node and node.ends and node.ends[verb]
  if not e then return nil end
  local r = e[method]
  if not r then
    local allow = found.path or {}
    for m in pairs(e) do allow[m] = true end
    found.path = allow
  end
  return r
end

-- The route of the first node, by precedence (a literal over '*' over
-- '**', tried in that order, depth first), that `segs[i..n]` reaches and
-- that has a route for `verb` and `method`: a trie node has one depth, so
-- each is visited once at most and the cost is bounded by the trie nodes
-- along the path, not by the number of rules.
local function walk(node, segs, i, n, verb, method, found)
  found.visits = found.visits + 1
  if i > n then return at_end(node, verb, method, found) or at_end(node.dstar, verb, method, found) end
  local s = segs[i]
  local nxt = node.lit and node.lit[s]
  if nxt then
    local r = walk(nxt, segs, i + 1, n, verb, method, found)
    if r then return r end
  end
  if node.star and s ~= "" then
    local r = walk(node.star, segs, i + 1, n, verb, method, found)
    if r then return r end
  end
  return at_end(node.dstar, verb, method, found)
end

-- Why a decoded path segment could carry a traversal to an upstream that
-- joins it into a path, or nil: it is "." or "..", or holds one between
-- escaped slashes ("..%2Fetc", which a single-segment variable decodes to
-- "../etc"; a custom verb's segment, "..:verb", is checked without it).
local function traversal(part)
  if part == "." or part == ".." then return format("is '%s'", part) end
  if part:find("/", 1, true) then
    for c in (part .. "/"):gmatch("([^/]*)/") do
      if c == "." or c == ".." then return format("holds '%s' between escaped slashes (%%2F)", c) end
    end
  end
  return nil
end

-- The `visits` of a match by the `exact` table: no trie node walked.
local NO_VISITS = { visits = 0 }

--- route, raw, n | nil, why [, allow] = router:match(http_method, path): the route
-- of `path` (no query string), its raw (undecoded) segments and their
-- count (the verb cut off the last). A last segment with
-- ':' is tried first as segment ":" verb, then whole (a literal ':' in an
-- id). nil and "not found", "method not allowed" (the path matches for
-- other methods; `allow` lists them, sorted: "GET, POST", an Allow
-- header's value), or "bad path: ..." (no leading '/', a bad
-- percent-escape, a "." or ".." segment). A path with no '%' equal to a
-- template of literals alone with a route for `http_method` is matched by
-- one table look-up, with no loop (the route the walk finds first: a
-- literal comes before '*' and '**' at every segment, a verb before the
-- whole segment); raw and n are nil then (there is nothing to bind).
-- `router.visits.visits` counts the trie nodes the last match walked
-- (what a test of the cost reads; 0 for a look-up).
function Router:match(method, path)
  if path:sub(1, 1) ~= "/" then return nil, "bad path: no leading '/'" end
  local exact = self.exact[path] -- its texts have no '%': a path with escapes is walked
  if exact and exact[method] then
    self.visits = NO_VISITS
    return exact[method]
  end
  local raw, n, pos = {}, 0, 2
  while true do
    local slash = path:find("/", pos, true)
    n = n + 1
    if not slash then
      raw[n] = path:sub(pos)
      break
    end
    raw[n] = path:sub(pos, slash - 1)
    pos = slash + 1
  end
  local segs = {}
  for i = 1, n do
    local part = raw[i]
    if part:find("%", 1, true) then
      if not escapes_ok(part) then return nil, format("bad path: bad percent-escape in segment %d", i) end
      part = decode(part)
    end
    local bad = traversal(part)
    if bad then return nil, format("bad path: segment %d %s", i, bad) end
    segs[i] = part
  end
  local found = { visits = 0 }
  self.visits = found
  local last = raw[n]
  if last and last:find(":", 1, true) then
    local head, verb = last:match("^(.*):([^:]*)$")
    local saved = segs[n]
    segs[n] = decode(head)
    local r = walk(self.root, segs, 1, n, decode(verb), method, found)
    local bad = r and traversal(segs[n])
    segs[n] = saved
    if bad then return nil, format("bad path: segment %d %s before its verb", n, bad) end
    if r then
      raw[n] = head
      return r, raw, n
    end
  end
  local r = walk(self.root, segs, 1, n, "", method, found)
  if r then return r, raw, n end
  if not found.path then return nil, "not found" end
  local allow = {}
  for m in pairs(found.path) do allow[#allow + 1] = m end
  table.sort(allow)
  return nil, "method not allowed", concat(allow, ", ")
end

--- value = binding(t_var, raw, n, fully_decode): the text a variable
-- binds from the raw segments of a matched path (http.proto: a
-- single-segment variable decodes every escape, "%2F" included; a
-- multi-segment one leaves "%2F" and "%2f" as they are unless
-- `fully_decode` (Http.fully_decode_reserved_expansion)).
function M.binding(var, raw, n, fully_decode)
  local last = var.last or n
  if var.single then return decode(raw[var.first]) end
  local keep = not fully_decode
  if last == var.first then return decode(raw[last] or "", keep) end
  local parts = {}
  for i = var.first, last do parts[#parts + 1] = decode(raw[i], keep) end
  return concat(parts, "/")
end

local function form_decode(s)
  if s:find("+", 1, true) then s = s:gsub("%+", " ") end
  return decode(s)
end

--- params | nil, err = query(qs, max_bytes, max_params): the query string
-- as a list of {name, value} in order (application/x-www-form-urlencoded:
-- '+' is a space, %XX escapes; a part without '=' has the value "";
-- empty parts are skipped). nil and what is wrong for a bad escape or
-- more than the limits.
function M.query(qs, max_bytes, max_params)
  local params = {}
  if qs == nil or qs == "" then return params end
  if #qs > max_bytes then
    return nil, format("query string of %d bytes (at most %d)", #qs, max_bytes)
  end
  if not escapes_ok(qs) then return nil, "bad percent-escape in the query string" end
  local count = 0
  for part in qs:gmatch("[^&]+") do
    count = count + 1
    if count > max_params then return nil, format("more than %d query parameters", max_params) end
    local name, value = part, ""
    local eq = part:find("=", 1, true)
    if eq then name, value = part:sub(1, eq - 1), part:sub(eq + 1) end
    params[count] = { form_decode(name), form_decode(value) }
  end
  return params
end

return M
