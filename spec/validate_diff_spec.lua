-- Validation against what is not ours: @bufbuild/protovalidate
-- (protovalidate-es, npm) as the oracle. Messages of the schemas of
-- spec/fixtures/validate/diff.proto (every standard rule, custom CEL
-- rules, required, ignore, oneofs, repeated items, map keys and values,
-- nested and recursive messages, the well-known types) are generated from
-- a seed, validated by pc.validate and by protovalidate-es
-- (spec/node/validate_diff.mjs), and their violations compared exactly as
-- sets of (field path, rule id). A difference is either one listed below
-- with its reason, or a failure. VALIDATE_DIFF_SEED and
-- VALIDATE_DIFF_COUNT change the run.
local pc = require "protocall"
local peer = require "node_peer"

local SEED = tonumber(os.getenv("VALIDATE_DIFF_SEED") or "") or 20261204
local COUNT = tonumber(os.getenv("VALIDATE_DIFF_COUNT") or "") or 3000
local TYPES = { "Strings", "Bytes", "Numbers", "Enums", "Containers", "Wkt", "Presence", "MessageOneof",
  "Custom", "Tree", "Everything" }

-- Differences between protocall and protovalidate-es that are not
-- protocall's bugs, each {reason = "...", test = function(c, mine, theirs)}
-- telling a case of it (c.type, c.json; mine and theirs: sorted lists of
-- "field|rule"). None is known: on this corpus (and seeds 1 to 3 with
-- 10,000 cases each) the two agree on every case.
local DIFFERENCES = {}
local unjson

-- A seeded generator (Park-Miller), the same under Lua 5.4 and LuaJIT.
local state = SEED % 2147483646 + 1
local function rand(n)
  state = state * 16807 % 2147483647
  return state % n + 1
end
local function pick(list) return list[rand(#list)] end

local function jstr(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local named = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
    return named[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local d = {}
    for k = 1, 4 do
      d[k] = B64:sub(math.floor(n / 64 ^ (4 - k)) % 64 + 1, math.floor(n / 64 ^ (4 - k)) % 64 + 1)
    end
    if not b then d[3] = "=" end
    if not c then d[4] = "=" end
    out[#out + 1] = table.concat(d)
  end
  return table.concat(out)
end

local STRINGS = { "", "a", "ab", "abc", "abcdef", "ABC-123", "abc-1", "abmyz", "abyz", "ammyz", "bad", "not bad",
  "example.com", "foo.example.com", "-bad-.com", "a..b", "localhost", "xn--bcher-kva.example",
  "user@example.com", "user@-x.com", "not an email", "a@b", "<a@b.org>", "192.168.0.1", "256.1.1.1",
  "::1", "2001:db8::1", "fe80::1%eth0", "1.2.3.4/24", "10.0.0.0/8", "2001:db8::/32", "1.2.3.4/33",
  "http://example.com/a?b=c#d", "https://user@[::1]:8080/x", "/relative/path", "mailto:a@b.org", "http:// x",
  "8c4f5a52-0f6e-4b8e-9f36-6d2c4b1a2e10", "8C4F5A52-0F6E-4B8E-9F36-6D2C4B1A2E10",
  "8c4f5a520f6e4b8e9f366d2c4b1a2e10", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "01arz3ndektsv4rrffq69g5fav",
  "example.com:8080", "[::1]:80", "example.com:99999", "Content-Type", ":authority", "bad header",
  "value\twith tab", "bad\nvalue", "héllo", "日本語", "pkg.Message", ".pkg.Message", "pkg..M", "zz" }
local BYTES = { "", "\1\2", "abc", "ab", "\1\3\2", "\1\2\3", "\192\168\0\1", "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1",
  "abcdef", "ABC", "\255", "xyz" }
local I32 = { 0, 1, -1, 2, 3, 5, 6, 9, 10, 11, -3, -5, -100, -101, 100, 2147483647, -2147483648 }
local I64 = { 0, 1, -1, 2, 5, 6, -5, -6, 10, '"9223372036854775807"', '"-9223372036854775808"' }
local U32 = { 0, 1, 2, 3, 4, 9, 10, 19, 20, 99, 100, 101, 4294967295 }
local U64 = { 0, 1, 3, 9, 10, 19, 20, 100, 101, '"18446744073709551615"' }
local FLOATS = { 0, 0.5, 1, 1.5, 2.5, -1, -1.5, -2, 3, '"NaN"', '"Infinity"', '"-Infinity"', 10000000000 }
local DURATIONS = { '"1s"', '"0.500s"', '"5s"', '"61s"', '"-1s"', '"0s"', '"60s"', '"1.000000001s"' }
local TIMESTAMPS = { '"1970-01-01T00:00:00Z"', '"1970-01-01T00:16:40Z"', '"2001-01-01T00:00:00Z"',
  '"2200-01-01T00:00:00Z"', '"1969-12-31T23:59:59Z"', '"2100-01-01T00:00:00Z"' }
local ANYS = { '{"@type": "type.googleapis.com/vdiff.Item", "name": "x"}',
  '{"@type": "type.googleapis.com/google.protobuf.Duration", "value": "1s"}' }

local T = {} -- FieldDescriptorProto.Type
for k, v in pairs { double = 1, float = 2, int64 = 3, uint64 = 4, int32 = 5, fixed64 = 6, fixed32 = 7, bool = 8,
  string = 9, message = 11, bytes = 12, uint32 = 13, enum = 14, sfixed32 = 15, sfixed64 = 16, sint32 = 17,
  sint64 = 18 } do T[v] = k end

local messages = {} -- full name -> DescriptorProto

local function scalar(kind)
  if kind == "string" then return jstr(pick(STRINGS)) end
  if kind == "bytes" then return jstr(base64(pick(BYTES))) end
  if kind == "bool" then return pick { "true", "false" } end
  if kind == "enum" then return tostring(pick { 0, 1, 2, 3, 7 }) end
  if kind == "double" or kind == "float" then return tostring(pick(FLOATS)) end
  if kind == "int32" or kind == "sint32" or kind == "sfixed32" then return tostring(pick(I32)) end
  if kind == "uint32" or kind == "fixed32" then return tostring(pick(U32)) end
  if kind == "uint64" or kind == "fixed64" then return tostring(pick(U64)) end
  return tostring(pick(I64))
end

local WRAPPED = { DoubleValue = "double", FloatValue = "float", Int64Value = "int64", UInt64Value = "uint64",
  Int32Value = "int32", UInt32Value = "uint32", BoolValue = "bool", StringValue = "string", BytesValue = "bytes" }

local gen_message
local function value(f, depth)
  local kind = T[f.type]
  if kind ~= "message" then return scalar(kind) end
  local name = f.type_name:sub(2)
  if name == "google.protobuf.Duration" then return pick(DURATIONS) end
  if name == "google.protobuf.Timestamp" then return pick(TIMESTAMPS) end
  if name == "google.protobuf.Any" then return pick(ANYS) end
  local w = name:match("^google%.protobuf%.(%w+)$")
  if w and WRAPPED[w] then return scalar(WRAPPED[w]) end
  return gen_message(name, depth + 1)
end

local function map_key(f)
  local kind = T[f.type]
  local v = scalar(kind)
  if kind == "string" then return v end
  return '"' .. v:gsub('"', "") .. '"'
end

function gen_message(name, depth)
  local d = messages[name]
  local parts, oneof_used = {}, {}
  if depth > 3 then return "{}" end
  for _, f in pc.ipairs(d.field) do
    local set = rand(2) == 1
    local oi = (pc.has(f, "oneof_index") and not f.proto3_optional) and f.oneof_index or nil
    if set and oi then
      if oneof_used[oi] then set = false else oneof_used[oi] = true end
    end
    if set then
      local entry = f.type == 11 and messages[f.type_name:sub(2)]
      if entry and entry.options and entry.options.map_entry then
        local items, seen = {}, {}
        for _ = 1, rand(4) - 1 do
          local k = map_key(entry.field[1])
          if not seen[k] then
            seen[k] = true
            items[#items + 1] = k .. ": " .. value(entry.field[2], depth)
          end
        end
        parts[#parts + 1] = jstr(f.name) .. ": {" .. table.concat(items, ", ") .. "}"
      elseif f.label == 3 then
        local items = {}
        for _ = 1, rand(5) - 1 do items[#items + 1] = value(f, depth) end
        parts[#parts + 1] = jstr(f.name) .. ": [" .. table.concat(items, ", ") .. "]"
      else
        parts[#parts + 1] = jstr(f.name) .. ": " .. value(f, depth)
      end
    end
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function index_messages(prefix, list)
  for _, d in pc.ipairs(list) do
    messages[prefix .. d.name] = d
    index_messages(prefix .. d.name .. ".", d.nested_type)
  end
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- A JSON string's text (what is between its quotes) as the string it is.
unjson = function(s)
  local out, i = {}, 1
  while i <= #s do
    local c = s:sub(i, i)
    if c ~= "\\" then
      out[#out + 1] = c
      i = i + 1
    else
      local e = s:sub(i + 1, i + 1)
      if e == "u" then
        local cp = tonumber(s:sub(i + 2, i + 5), 16)
        if cp < 0x80 then
          out[#out + 1] = string.char(cp)
        elseif cp < 0x800 then
          out[#out + 1] = string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64)
        else
          out[#out + 1] = string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
        end
        i = i + 6
      else
        local named = { n = "\n", t = "\t", r = "\r", b = "\b", f = "\f" }
        out[#out + 1] = named[e] or e
        i = i + 2
      end
    end
  end
  return table.concat(out)
end

local function set_of(list)
  local out = {}
  for _, v in ipairs(list) do out[#out + 1] = v end
  table.sort(out)
  return out
end

describe("validation against @bufbuild/protovalidate", function()
  it("gives the same violations (field path, rule id) on generated messages", function()
    local absent = peer.missing("@bufbuild/protovalidate", "@bufbuild/protobuf")
    if absent then return peer.skip(pending, "validation differential", absent) end
    local p = pc.pool()
    assert(p:load_file("spec/fixtures/validate/diff.proto",
      { name = "validate/diff.proto", import_paths = { "spec/fixtures" } }))
    index_messages("vdiff.", p:file_descriptor("validate/diff.proto").message_type)
    local set = peer.descriptor_set({ "validate/diff.proto" }, { "core/schema/protos", "spec/fixtures" })
    local cases, lines = {}, {}
    for i = 1, COUNT do
      local name = "vdiff." .. TYPES[(i - 1) % #TYPES + 1]
      cases[i] = { type = name, json = gen_message(name, 0) }
      lines[i] = '{"type": ' .. jstr(name) .. ', "json": ' .. jstr(cases[i].json) .. "}"
    end
    local cases_path, out_path = os.tmpname(), os.tmpname()
    local f = assert(io.open(cases_path, "wb"))
    f:write(table.concat(lines, "\n"), "\n")
    f:close()
    local _, err, code = peer.command("node " .. peer.quote(peer.scripts .. "/validate_diff.mjs") .. " "
      .. peer.quote(set) .. " " .. peer.quote(cases_path) .. " " .. peer.quote(out_path), { timeout = 300 })
    os.remove(set)
    os.remove(cases_path)
    assert(code == 0, "validate_diff.mjs failed: " .. tostring(err))
    local theirs_lines = {}
    for line in read(out_path):gmatch("[^\n]+") do theirs_lines[#theirs_lines + 1] = line end
    os.remove(out_path)
    assert.are.equal(COUNT, #theirs_lines)

    local agree, listed, unexplained, violations = 0, {}, {}, 0
    for i, c in ipairs(cases) do
      local theirs = theirs_lines[i]
      local tresult = theirs:match('"result":"(%a+)"')
      local tset = {}
      for field, rule in theirs:gmatch('%["(.-)","([^"]*)",%a+%]') do
        tset[#tset + 1] = unjson(field) .. "|" .. rule
      end
      tset = set_of(tset)
      local m = assert(pc.from_json(p:type(c.type), c.json))
      local ok, list = pcall(pc.validate, m)
      local mine, mresult = {}, "error"
      if ok then
        for _, v in ipairs(list) do mine[#mine + 1] = v.field .. "|" .. v.rule end
        mine = set_of(mine)
        mresult = #mine > 0 and "invalid" or "valid"
        violations = violations + #mine
      end
      local same = mresult == tresult and table.concat(mine, "\n") == table.concat(tset, "\n")
      if same then
        agree = agree + 1
      else
        local why
        for _, d in ipairs(DIFFERENCES) do
          if d.test(c, mine, tset) then why = d.reason break end
        end
        local only_mine, only_theirs, in_theirs, in_mine = {}, {}, {}, {}
        for _, v in ipairs(tset) do in_theirs[v] = true end
        for _, v in ipairs(mine) do
          in_mine[v] = true
          if not in_theirs[v] then only_mine[#only_mine + 1] = v end
        end
        for _, v in ipairs(tset) do if not in_mine[v] then only_theirs[#only_theirs + 1] = v end end
        local text = c.type .. " " .. c.json:sub(1, 300) .. "\n    protocall " .. mresult
          .. (ok and "" or " " .. tostring(list)) .. ", only: " .. table.concat(only_mine, ", ")
          .. "\n    protovalidate-es " .. tostring(tresult)
          .. ", only: " .. table.concat(only_theirs, ", ") .. (tresult == "error" and " " .. theirs or "")
        if why then
          listed[why] = (listed[why] or 0) + 1
        else
          unexplained[#unexplained + 1] = text
        end
      end
    end
    local nlisted = 0
    for why, n in pairs(listed) do
      nlisted = nlisted + n
      print(("listed difference (%d): %s"):format(n, why))
    end
    print(("validate_diff: %d cases (seed %d), %d violations found by protocall: %d agree, %d listed differences, "
      .. "%d unexplained"):format(COUNT, SEED, violations, agree, nlisted, #unexplained))
    for k = 1, math.min(#unexplained, 20) do print(unexplained[k]) end
    assert.are.equal(0, #unexplained)
  end)
end)
