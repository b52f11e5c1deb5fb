-- Requests an attacker picks against a server that decodes and validates
-- them, each against a request of the same size that nobody picked, in
-- one run (the ratio is the figure: near 1x when the cost does not depend
-- on the values chosen; each of these was quadratic or fell off a fast
-- path before, 100x-1000x):
--   * decoding a map<fixed64, int32> of 50,000 keys chosen to share one
--     slot of the map's index (core/message/message.c: the index hash is
--     seeded with where the map is) against keys 1..50,000;
--   * repeated.unique over 100,000 fixed64 chosen to share one slot of
--     the check's table (core/validate/validate.c, items_unique: seeded
--     per validation) against 1..100,000;
--   * string.in with a list of 10,000 items, 20,000 values (a hash set
--     built with the plan, not a scan per value) against a list of 4;
--   * a 1 MB string against a pattern of counted repetitions (RE2's DFA
--     given its default 8 MiB, not the 1 MiB a pattern is refused past,
--     which sent it to the NFA) against `^[abc]*d`.
--   * a 4 MB string of `a` searched for a 1,000-byte substring that nearly
--     matches everywhere (`aaa...ab`), by string.contains (checked in C)
--     and by a CEL rule's indexOf, against one of 100 bytes of the same
--     shape (memmem, a two-way search, so the needle's length does not
--     multiply the time; a scan was 10x, 0.1 s a check).
--   * a CEL rule's lastIndexOf of a needle that starts with a continuation
--     byte (a proto2 string need not be UTF-8) in 600 KB of `é`: each
--     match inside a code point is refused in constant time, so the search
--     is linear (a walk from the string's start for each took minutes),
--     against ten of the same request of 60 KB.
--
--   build/release/protocall bench/validate_hostile_bench.lua [--quick]
-- --callgrind (make bench's BENCH_ARGS) is taken and ignored: an operation
-- here is milliseconds, too long to run under valgrind.
local H = require "bench.harness"
local pc = require "protocall"

local quick = false
for _, a in ipairs(arg or {}) do
  if a == "--quick" then
    quick = true
  elseif a ~= "--callgrind" then
    io.stderr:write("validate_hostile_bench.lua: unknown flag '" .. a .. "' (flags: --quick, --callgrind)\n")
    os.exit(2)
  end
end

local NEEDLE, SHORT = string.rep("a", 999) .. "b", string.rep("a", 99) .. "b"
local words = {}
for i = 1, 10000 do words[i] = ('"w%05d"'):format(i) end
local pool = pc.pool()
assert(pool:load([[
  syntax = "proto3";
  package hostilebench;
  import "buf/validate/validate.proto";
  message Keys { map<fixed64, int32> m = 1; }
  message Unique { repeated fixed64 ints = 1 [(buf.validate.field).repeated.unique = true]; }
  message Few { repeated string s = 1
    [(buf.validate.field).repeated.items.string = {in: ["w00001", "w00002", "w00003", "w10000"]}]; }
  message Many { repeated string s = 1 [(buf.validate.field).repeated.items.string = {in: []] ..
  table.concat(words, ",") .. [[]}]; }
  message Plain { string s = 1 [(buf.validate.field).string.pattern = "^[abc]*d$"]; }
  message Counted { string s = 1 [(buf.validate.field).string.pattern = "(?:a{1,50}b{1,50}c{1,50}){1,20}d"]; }
  message LongNeedle { string s = 1 [(buf.validate.field).string.contains = "]] .. NEEDLE .. [["]; }
  message ShortNeedle { string s = 1 [(buf.validate.field).string.contains = "]] .. SHORT .. [["]; }
  message CelLongNeedle { string s = 1 [(buf.validate.field).cel = {id: "i",
    expression: "this.indexOf(']] .. NEEDLE .. [[') >= 0"}]; }
  message CelShortNeedle { string s = 1 [(buf.validate.field).cel = {id: "i",
    expression: "this.indexOf(']] .. SHORT .. [[') >= 0"}]; }
]], { name = "hostilebench.proto" }))

assert(pool:load([[
  syntax = "proto2";
  package hostilebench;
  import "buf/validate/validate.proto";
  message Inside { optional string s = 1 [(buf.validate.field).cel = {id: "i",
    expression: "this.lastIndexOf(this.charAt(0)) == 0"}]; }
]], { name = "hostilebench2.proto" }))

local function varint(n)
  local out = {}
  repeat
    local b = n & 0x7f
    n = n >> 7
    out[#out + 1] = string.char(n ~= 0 and b | 0x80 or b)
  until n == 0
  return table.concat(out)
end

-- The map's entries, field 1: key (fixed64, field 1) and value (int32, field 2).
local function keys_bytes(key_of, n)
  local out = {}
  for i = 1, n do
    local entry = "\9" .. string.pack("<i8", key_of(i)) .. "\16" .. varint(i & 0x7fffffff)
    out[i] = "\10" .. varint(#entry) .. entry
  end
  return table.concat(out)
end

-- The old index hash: k * 0x9E3779B97F4A7C15, its halves xored. Keys whose
-- products are (i << 32) | i all hashed to 0.
local GOLDEN = 0x9E3779B97F4A7C15
local inv = GOLDEN -- its inverse modulo 2^64, by Newton's iteration
for _ = 1, 6 do inv = inv * (2 - GOLDEN * inv) end
assert(inv * GOLDEN == 1)

-- x with murmur3's fmix64 undone (fmix64(unmix(y)) == y): the old unique
-- table's slot of unmix(i << 18) was 0 for every i (2^18 slots).
local function unmix(y)
  y = y ~ (y >> 33)
  y = y * 0x9cb4b2f8129337db
  y = y ~ (y >> 33)
  y = y * 0x4f74430c22a54005
  return y ~ (y >> 33)
end

local function packed_fixed64(value_of, n)
  local out = {}
  for i = 1, n do out[i] = string.pack("<i8", value_of(i)) end
  local body = table.concat(out)
  return "\10" .. varint(#body) .. body
end

local rows = {}
-- The pair's ratio (the picked request's time over the other's, their runs
-- interleaved: H.measure_pair), with its goal.
local function pair(name, goal, picked, plain)
  local a, b = H.measure_pair(picked, plain, quick)
  rows[#rows + 1] = { name = name .. ": the other request", value = b / 1e6, unit = "ms" }
  rows[#rows + 1] = { name = name .. ": picked / other", value = a / b, unit = "x",
                      goal = ("<= %gx"):format(goal), ok = a / b <= goal }
end

local function decodes(T, bytes)
  return function(n)
    for _ = 1, n do pc.decode(T, bytes) end
  end
end

local function validates(m)
  return function(n)
    for _ = 1, n do assert(#pc.validate(m) == 0) end
  end
end

local NKEYS, NUNIQUE = 50000, 100000
local Keys, Unique = pool:type("hostilebench.Keys"), pool:type("hostilebench.Unique")
pair(("decode, map<fixed64, int32> of %d keys sharing an index slot"):format(NKEYS), 3,
     decodes(Keys, keys_bytes(function(i) return ((i << 32) | i) * inv end, NKEYS)),
     decodes(Keys, keys_bytes(function(i) return i end, NKEYS)))
pair(("repeated.unique over %d fixed64 sharing a table slot"):format(NUNIQUE), 3,
     validates(pc.decode(Unique, packed_fixed64(function(i) return unmix(i << 18) end, NUNIQUE))),
     validates(pc.decode(Unique, packed_fixed64(function(i) return i end, NUNIQUE))))

local function list(n, v)
  local t = {}
  for i = 1, n do t[i] = v end
  return t
end
pair("string.in, 20,000 values, a list of 10,000 items (against 4)", 3,
     validates(pool:type("hostilebench.Many") { s = list(20000, "w10000") }),
     validates(pool:type("hostilebench.Few") { s = list(20000, "w10000") }))

local text = string.rep("abc", 349525) .. "d" -- 1 MB
pair("a 1 MB string, (?:a{1,50}b{1,50}c{1,50}){1,20}d (against ^[abc]*d$)", 5,
     validates(pool:type("hostilebench.Counted") { s = text }),
     validates(pool:type("hostilebench.Plain") { s = text }))
local hay = string.rep("a", 4e6) .. NEEDLE -- holds both
pair("string.contains, 4 MB of a, a 1,000-byte aaa...ab (against 100 bytes)", 3,
     validates(pool:type("hostilebench.LongNeedle") { s = hay }),
     validates(pool:type("hostilebench.ShortNeedle") { s = hay }))
pair("a CEL rule's indexOf, 4 MB of a, a 1,000-byte aaa...ab (against 100 bytes)", 3,
     validates(pool:type("hostilebench.CelLongNeedle") { s = hay }),
     validates(pool:type("hostilebench.CelShortNeedle") { s = hay }))
local Inside = pool:type("hostilebench.Inside")
local big, small = Inside { s = "\xa9" .. string.rep("\xc3\xa9", 300000) },
                   Inside { s = "\xa9" .. string.rep("\xc3\xa9", 30000) }
pair("CEL lastIndexOf, a needle inside each code point, 600 KB (against 10 x 60 KB)", 3,
     validates(big), function(n) for _ = 1, 10 * n do assert(#pc.validate(small) == 0) end end)
H.report("requests an attacker picks, against requests of the same size" .. (quick and " (--quick)" or ""), rows)
