-- Validation at the edge against hostile requests (README "Validation";
-- core/validate/README.md): what a request may cost a server or the gateway
-- that validates it, and verdicts on odd values. The costs that depend on
-- the values an attacker picks (hash floods, long `in` lists, counted
-- repetitions) are timed by bench/validate_hostile_bench.lua; the cases here
-- pin verdicts and bounds.
local pc = require "protocall"

local p = pc.pool()
assert(p:load([[
  syntax = "proto3";
  package hostile;
  import "buf/validate/validate.proto";
  message Items { repeated int32 n = 1 [(buf.validate.field).repeated.items.int32.gt = 5]; }
  message Res { int32 n = 1; }
  service S { rpc Do (Items) returns (Res); }
]], { name = "hostile.proto" }))
local Items = p:type("hostile.Items")

local function many(n, v)
  local t = {}
  for i = 1, n do t[i] = v end
  return t
end

describe("validation of hostile requests", function()
  after_each(function() collectgarbage() end)

  it("a refusal keeps the first 100 violations and stops there", function()
    local m = Items { n = many(1000, 1) }
    assert.are.equal(1000, #pc.validate(m)) -- pc.validate keeps them all
    local err = require("protocall.validate").refusal(m)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.are.equal(100, #err.violations)
    assert.are.equal("n[99]", err.violations[100].field)
    assert.are.equal("validation failed: n[0]: must be greater than 5 [int32.gt], and at least 100 more violations",
      err.message)
    assert.are.equal(100, #err.details[1].field_violations)
    -- 100 exactly is not cut
    err = require("protocall.validate").refusal(Items { n = many(100, 1) })
    assert.are.equal(100, #err.violations)
    assert.are.equal("validation failed: n[0]: must be greater than 5 [int32.gt], and 99 more violations", err.message)
  end)

  it("a server answers a request breaking a rule on each of many items with 100 violations", function()
    local server = pc.server({ ["hostile.S"] = { Do = function() return { n = 1 } end } },
      { pool = p, validate = true })
    local client = pc.client("hostile.S", { transport = pc.inproc(server), pool = p })
    local ok, err = pcall(client.Do, client, Items { n = many(100000, 1) })
    assert.is_false(ok)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.are.equal(100, #err.details[1].field_violations)
    assert.truthy(err.message:find("and at least 100 more violations", 1, true), err.message)
  end)

  -- (that a long list costs no more than a short one, and a long string no
  -- more against a pattern of counted repetitions than against a plain one:
  -- bench/validate_hostile_bench.lua, which times them)
  it("checks values against a long `in` list of strings (a hash set) as against a scan", function()
    local q = pc.pool()
    local words = {}
    for i = 1, 10000 do words[i] = string.format('"w%05d"', i) end
    assert(q:load([[
      syntax = "proto3";
      package longin;
      import "buf/validate/validate.proto";
      message M { repeated string s = 1 [(buf.validate.field).repeated.items.string = {in: []] ..
        table.concat(words, ",") .. [[]}]; }
    ]], { name = "longin.proto" }))
    local M = q:type("longin.M")
    local m = M { s = many(2000, "w10000") } -- the last of the list
    assert.are.same({}, pc.validate(m))
    m.s[1] = "w10001"
    local v = pc.validate(m)
    assert.are.equal(1, #v)
    assert.are.equal("s[0]", v[1].field)
    assert.are.equal("string.in", v[1].rule)
  end)

  it("gives the same verdicts for long `in` and `not_in` lists of each integer kind", function()
    local q = pc.pool()
    local list = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, %s]"
    local kinds = { "int32", "sint32", "sfixed32", "int64", "sint64", "sfixed64", "uint32", "fixed32", "uint64",
      "fixed64" }
    -- the eleventh item: negative for the signed kinds, past 2^31 for the others
    local function extra(k) return (k:find("^s") or k:find("^int")) and -7 or 4000000000 end
    local fields = {}
    for i, k in ipairs(kinds) do
      fields[#fields + 1] = string.format("%s a%d = %d [(buf.validate.field).%s = {in: %s}];", k, i, 2 * i - 1, k,
        list:format(extra(k)))
      fields[#fields + 1] = string.format("%s b%d = %d [(buf.validate.field).%s = {not_in: %s}];", k, i, 2 * i, k,
        list:format(extra(k)))
    end
    assert(q:load([[
      syntax = "proto3";
      package intsets;
      import "buf/validate/validate.proto";
      message M { ]] .. table.concat(fields, "\n") .. [[ }
    ]], { name = "intsets.proto" }))
    local M = q:type("intsets.M")
    for i, k in ipairs(kinds) do
      local absent = extra(k) == -7 and -8 or 3000000000
      for _, case in ipairs { { extra(k), true }, { 10, true }, { 11, false }, { absent, false } } do
        local x, listed = case[1], case[2]
        local m = M {}
        for j = 1, #kinds do m["a" .. j], m["b" .. j] = extra(kinds[j]), 11 end -- only field i speaks
        m["a" .. i], m["b" .. i] = x, x
        local rules = {}
        for _, v in ipairs(pc.validate(m)) do rules[#rules + 1] = v.field .. " " .. v.rule end
        local want = listed and { "b" .. i .. " " .. k .. ".not_in" } or { "a" .. i .. " " .. k .. ".in" }
        assert.are.same(want, rules, k .. " " .. tostring(x))
      end
    end
  end)

  it("refuses a value too large for its rule's expression with a violation, not an evaluation error", function()
    local q = pc.pool()
    local needle = string.rep("a", 99) .. "b"
    assert(q:load([[
      syntax = "proto3";
      package big;
      import "buf/validate/validate.proto";
      message M {
        string s = 1 [(buf.validate.field).string.contains = "]] .. needle .. [["];
        string t = 2 [(buf.validate.field).string.not_contains = "]] .. needle .. [["];
        repeated int64 u = 3 [(buf.validate.field).repeated.unique = true];
      }
    ]], { name = "big.proto" }))
    local M = q:type("big.M")
    -- 4 MB searched for 100 bytes: a linear search within the expression's budget, so the
    -- message is validate.proto's own, the whole substring (a scan charged 4 MB x 100 bytes
    -- reached "evaluation limit reached: steps", the message worded in C cut it at 64 bytes)
    local v = pc.validate(M { s = string.rep("a", 4e6), t = string.rep("a", 4e6) .. needle })
    assert.are.equal(2, #v)
    assert.are.equal("s", v[1].field)
    assert.are.equal("string.contains", v[1].rule)
    assert.are.equal("does not contain substring `" .. needle .. "`", v[1].message)
    assert.are.equal("t", v[2].field)
    assert.are.equal("string.not_contains", v[2].rule)
    assert.are.equal("contains substring `" .. needle .. "`", v[2].message)
    -- a million items and one more, the last a duplicate: unique() runs a step an item
    local u = {}
    for i = 1, 1100000 do u[i] = i end
    u[#u + 1] = 7
    v = pc.validate(M { s = needle, u = u })
    assert.are.equal(1, #v)
    assert.are.same({ field = "u", rule = "repeated.unique", message = "repeated value must contain unique items" },
      v[1])
    assert.are.same({}, pc.validate(M { s = needle, u = { 1, 2, 3 } }))
  end)

  it("gives a verdict, not an evaluation error, for a CEL rule reading a value over 16 MB", function()
    local q = pc.pool()
    assert(q:load([[
      syntax = "proto3";
      package big16;
      import "buf/validate/validate.proto";
      message M {
        optional string s = 1 [(buf.validate.field).cel = {id: "short", expression: "size(this) < 5"}];
        optional bytes b = 2 [(buf.validate.field).bytes.pattern = "^a*$"];
        optional string t = 3 [(buf.validate.field).cel = {id: "has_b", expression: "this.contains('b')"}];
      }
    ]], { name = "big16.proto" }))
    local M = q:type("big16.M")
    local big = string.rep("a", 17e6)
    -- 17 MB read once is 1,062,500 steps, past the default budget of 1,000,000: "validate: s:
    -- short: 1:1: evaluation limit reached: steps" (a server's INVALID_ARGUMENT); protovalidate-es
    -- (no budget) says "size(this) < 5" returned false
    assert.are.same({ { field = "s", rule = "short", message = '"size(this) < 5" returned false' } },
      pc.validate(M { s = big }))
    assert.are.same({}, pc.validate(M { b = big }))
    assert.are.same({ { field = "b", rule = "bytes.pattern", message = "must match regex pattern `^a*$`" } },
      pc.validate(M { b = big .. "b" }))
    assert.are.same({ { field = "t", rule = "has_b", message = "\"this.contains('b')\" returned false" } },
      pc.validate(M { t = big }))
  end)

  it("fails on an Any of a type the schema lacks read by a CEL rule, as protovalidate's runtimes do", function()
    local q = pc.pool()
    assert(q:load([[
      syntax = "proto3";
      package anyu;
      import "buf/validate/validate.proto";
      import "google/protobuf/any.proto";
      message M {
        google.protobuf.Any a = 1 [(buf.validate.field).cel = {id: "set", expression: "this.type_url != ''"}];
        google.protobuf.Any b = 2 [(buf.validate.field).any = {in: ["type.googleapis.com/x.Y"]}];
        google.protobuf.Any c = 3;
      }
    ]], { name = "anyu.proto" }))
    local M = q:type("anyu.M")
    local Any = q:type("google.protobuf.Any")
    local any = Any { type_url = "type.googleapis.com/no.Such", value = "\8\1" }
    -- CEL reads an Any as the message it holds: protovalidate-es fails "invalid Any or
    -- type.googleapis.com/no.Such not found in registry", protovalidate-go (cel-go) fails to
    -- unpack it; a server refuses the request INVALID_ARGUMENT with this text
    assert.has_error(function() pc.validate(M { a = any }) end,
      "validate: a: google.protobuf.Any holds no.Such, a type the schema lacks")
    -- any.in and any.not_in read the type URL only, and a message without rules is not unpacked
    assert.are.same({ { field = "b", rule = "any.in", message = "type URL must be in the allow list" } },
      pc.validate(M { b = any }))
    assert.are.same({}, pc.validate(M { c = any }))
  end)

  it("counts the characters of a string that is not UTF-8 as replacements, never as nothing", function()
    local q = pc.pool()
    assert(q:load([[
      syntax = "proto2";
      package bad8;
      import "buf/validate/validate.proto";
      message M {
        optional string s = 1 [(buf.validate.field).string.max_len = 10];
        optional string t = 2 [(buf.validate.field).string.min_len = 2];
        optional string u = 3 [(buf.validate.field).cel = {id: "size", expression: "size(this) == 3"}];
      }
    ]], { name = "bad8.proto" }))
    local M = q:type("bad8.M")
    local function field(n, s) return string.char(n * 8 + 2, #s) .. s end
    -- proto2 strings are not checked for UTF-8 when read: 100 stray continuation bytes
    -- counted 0 characters and passed max_len 10
    local v = pc.validate(pc.decode(M, field(1, string.rep("\x80", 100))))
    assert.are.equal(1, #v)
    assert.are.same({ field = "s", rule = "string.max_len", message = "must be at most 10 characters" }, v[1])
    -- four of them are four characters (a check in C and size() agree)
    assert.are.same({}, pc.validate(pc.decode(M, field(2, string.rep("\x80", 4)))))
    assert.are.same({}, pc.validate(pc.decode(M, field(2, "a\x80"))))
    -- a truncated sequence is one replacement, as protovalidate-es decodes it
    assert.are.same({}, pc.validate(pc.decode(M, field(3, "a\xe2\x82\xff"))))
  end)

  it("indexes a string that is not UTF-8 by the characters size() counts", function()
    local q = pc.pool()
    assert(q:load([[
      syntax = "proto2";
      package bad8i;
      import "buf/validate/validate.proto";
      message M {
        optional string s = 1 [
          (buf.validate.field).cel = {id: "size", expression: "size(this) == 5"},
          (buf.validate.field).cel = {id: "indexOf", expression: "this.indexOf('a') == 3"},
          (buf.validate.field).cel = {id: "indexOf3", expression: "this.indexOf('a', 1) == 3"},
          (buf.validate.field).cel = {id: "lastIndexOf", expression: "this.lastIndexOf('a') == 3"},
          (buf.validate.field).cel = {id: "split", expression: "this.split('')[3] == 'a'"},
          (buf.validate.field).cel = {id: "splitSize", expression: "this.split('').size() == 5"},
          (buf.validate.field).cel = {id: "replace", expression: "size(this.replace('', '-')) == 11"},
          (buf.validate.field).cel = {id: "charAt", expression: "this.charAt(3) == 'a'"}];
        optional string t = 2 [(buf.validate.field).cel = {id: "trim", expression: "this.trim() == this"}];
      }
    ]], { name = "bad8i.proto" }))
    local M = q:type("bad8i.M")
    -- \xf0 then \x80 (no 4-byte sequence starts f0 80): three replacements, then "a", "b",
    -- as size() and protovalidate-es's decoder count them; indexOf, split and replace skipped
    -- the continuation bytes as part of the \xf0 (indexOf('a') was 1, split('') had 3 parts)
    local s = "\xf0\x80\x80ab"
    assert.are.same({}, pc.validate(pc.decode(M, string.char(10, #s) .. s)))
    -- a space then a stray continuation byte (a U+FFFD, not a space): trim() took them both
    local t = "a \x80"
    assert.are.same({}, pc.validate(pc.decode(M, string.char(18, #t) .. t)))
  end)

  it("survives a finalizer validating a message of the same pool while a list is being made", function()
    local q = pc.pool()
    assert(q:load([[
      syntax = "proto3";
      package fin;
      import "buf/validate/validate.proto";
      message M { repeated int32 n = 1 [(buf.validate.field).repeated.items.int32.gt = 5]; }
      message N { string s = 1 [(buf.validate.field).string.min_len = 3]; }
    ]], { name = "fin.proto" }))
    local m = q:type("fin.M") { n = many(2000, 1) }
    local small = q:type("fin.N") { s = "x" }
    local fired = 0
    -- the finalizers run inside the allocations of the list of 2,000: each
    -- validation reset the violations the list was read from (a crash)
    local function gc()
      fired = fired + 1
      assert(#pc.validate(small) == 1)
    end
    local mt = { __gc = gc }
    local function garbage() -- a table's __gc under Lua 5.4, a proxy's under LuaJIT
      if newproxy then
        getmetatable(newproxy(true)).__gc = gc
      else
        setmetatable({}, mt)
      end
    end
    for _ = 1, 20 do
      for _ = 1, 2000 do garbage() end
      local v = pc.validate(m)
      assert.are.equal(2000, #v)
      for i = 1, #v do
        if v[i].rule ~= "int32.gt" or v[i].field ~= "n[" .. (i - 1) .. "]" then
          error("violation " .. i .. ": " .. tostring(v[i].field) .. " " .. tostring(v[i].rule))
        end
      end
      assert.are.same({ { field = "s", rule = "string.min_len", message = "must be at least 3 characters" } },
        pc.validate(small))
    end
    collectgarbage()
    assert.is_true(fired > 0)
  end)

  it("matches a long string against a pattern of counted repetitions (RE2's DFA given 8 MiB)", function()
    local q = pc.pool()
    assert(q:load([[
      syntax = "proto3";
      package re;
      import "buf/validate/validate.proto";
      message M { string s = 1 [(buf.validate.field).string.pattern = "(?:a{1,50}b{1,50}c{1,50}){1,20}d"]; }
    ]], { name = "re.proto" }))
    local m = q:type("re.M") { s = string.rep("abc", 1333333) }
    local v = pc.validate(m)
    assert.are.equal(1, #v)
    assert.are.equal("string.pattern", v[1].rule)
    assert.are.same({}, pc.validate(q:type("re.M") { s = string.rep("abc", 1000) .. "d" }))
  end)
end)
