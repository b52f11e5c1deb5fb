-- pc.to_json / pc.from_json against Debian's python3-protobuf json_format
-- (spec/tools/json_diff.py, run with /usr/bin/python3): seeded random
-- messages of every type of every corpus descriptor set (about three
-- seconds' worth) and every corpus binary payload are printed by both,
-- must be equal as JSON values and parse in the other to the same message; every corpus payload's .json
-- (python3-protobuf's) reads to the message its binary holds (that part is
-- core/json/json_test.c). Env JSON_DIFF_SEED picks another seed. Skips
-- visibly without the corpus; fails then when env CI is set.
local pc = require "protocall"
local corpus = require "corpus"

local TOOL = "spec/tools/json_diff.py"
local DESC = corpus.dir .. "/descriptors"

local function hex_to_bytes(h) return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end)) end
local function bytes_to_hex(b) return (b:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

local pools = {}
local function pool_of(set)
  local p = pools[set]
  if not p then
    p = pc.pool()
    assert(p:load_descriptor_set(assert(corpus.read("descriptors/" .. set .. ".pb"))))
    pools[set] = p
  end
  return p
end

local R = require "runtime"

local function run(cmd)
  local out, ok = R.capture(cmd .. " 2>&1")
  return ok, out
end

describe("proto3 JSON against python3-protobuf json_format", function()
  if not corpus.read("payloads/MANIFEST.tsv") then
    return it("needs the corpus", function() corpus.skip(pending, "JSON differential") end)
  end

  it("prints and parses random messages of every corpus type as the reference does", function()
    local cases, ours, refs = os.tmpname(), os.tmpname(), os.tmpname()
    local ok, out = run(string.format("/usr/bin/python3 %s gen %s %s --seed %s --count 1500 --seconds 3",
      TOOL, DESC, cases, os.getenv("JSON_DIFF_SEED") or "14"))
    assert(ok, out)
    -- The corpus's binary payloads join the random messages.
    local g = assert(io.open(cases, "a"))
    for line in corpus.read("payloads/MANIFEST.tsv"):gmatch("[^\n]+") do
      local file, _, mtype, _, _, format = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)")
      if format == "binary" then
        g:write(file:match("^[^/]+"), "\t", mtype, "\t", bytes_to_hex(assert(corpus.read("payloads/" .. file))), "\n")
      end
    end
    g:close()
    local f = assert(io.open(ours, "w"))
    local n = 0
    for line in io.lines(cases) do
      local set, tname, hex = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)$")
      local T = pool_of(set):type(tname)
      local m = assert(pc.decode(T, hex_to_bytes(hex), { partial = true })) -- random: required fields may lack
      local pok, json = pcall(pc.to_json, m)
      if not pok then json = "!" .. tostring(json):gsub("[\t\n]", " ") end
      f:write(set, "\t", tname, "\t", hex, "\t", json, "\n")
      n = n + 1
    end
    f:close()
    assert.is_true(n >= 500, "only " .. n .. " cases generated")
    ok, out = run(string.format("/usr/bin/python3 %s check %s %s %s", TOOL, DESC, ours, refs))
    assert(ok and out:match("\n?%d+ checked, 0 differ"), out)
    -- The way back: the reference's JSON through pc.from_json.
    local back, bad = 0, {}
    for line in io.lines(refs) do
      local set, tname, hex, json = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
      local T = pool_of(set):type(tname)
      local m, err = pc.from_json(T, json)
      if not m then
        bad[#bad + 1] = tname .. ": " .. err .. "\n  " .. json:sub(1, 500)
      elseif bytes_to_hex(pc.encode(m, { deterministic = true, partial = true })) ~= hex then
        bad[#bad + 1] = tname .. ": reads to another message\n  " .. json:sub(1, 500)
      end
      back = back + 1
    end
    os.remove(cases)
    os.remove(ours)
    os.remove(refs)
    assert.are.same({}, bad)
    assert.is_true(back >= 400, "only " .. back .. " documents read back")
  end)
end)
