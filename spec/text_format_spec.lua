-- Text format out, beyond spec/text_spec.lua's corpus comparison: extensions
-- as [pkg.ext], unknown fields as `protoc --decode_raw` prints them (random
-- payloads of every corpus type read as google.protobuf.Empty, so every
-- field is unknown, against Debian's protoc), and linear time on wide
-- messages.
local pc = require "protocall"
local corpus = require "corpus"

local R = require "runtime"

local function run(cmd)
  local out, ok = R.capture(cmd .. " 2>&1")
  return ok, out
end

describe("pc.to_text", function()
  local p = pc.pool()
  assert(p:load([[
    syntax = "proto2"; package tf;
    message E { optional int32 v = 1; extensions 10 to 20; }
    message R { repeated E e = 1; }
    extend E { optional string note = 10; repeated E kids = 11; optional group G = 12 { optional int32 a = 1; } }
  ]], { name = "tf.proto" }))
  local E, TfR = p:type("tf.E"), p:type("tf.R")

  it("prints extensions as [pkg.ext] among the fields, in number order", function()
    local m = E{ v = 1 }
    pc.set_extension(m, "tf.kids", { { v = 2 } })
    pc.set_extension(m, "tf.note", "n")
    assert.are.equal('v: 1\n[tf.note]: "n"\n[tf.kids] {\n  v: 2\n}\n', pc.to_text(m))
    local d = assert(pc.decode(E, "\99\8\5\100"))
    assert.are.equal("[tf.g] {\n  a: 5\n}\n", pc.to_text(d))
  end)

  it("prints unknown fields after the known ones, numbers only", function()
    local m = assert(pc.decode(E, "\8\1" .. "\168\6\150\1" .. "\177\6\1\0\0\0\0\0\0\0" .. "\181\6\255\255\255\255" ..
      "\178\6\3abc" .. "\178\6\2\8\7" .. "\178\6\0" .. "\179\6\8\1\180\6"))
    assert.are.equal(table.concat({ "v: 1", "101: 150", "102: 0x0000000000000001", "102: 0xffffffff",
      '102: "abc"', "102 {", "  1: 7", "}", '102: ""', "102 {", "  1: 1", "}", "" }, "\n"), pc.to_text(m))
  end)

  it("takes time linear in the number of sub-messages", function()
    local function time(n)
      local m = assert(pc.decode(TfR, string.rep("\10\0", n)))
      local t = os.clock()
      local s = pc.to_text(m)
      assert.are.equal(6 * n, #s)
      return os.clock() - t
    end
    time(1000)
    local small, big = time(30000), time(300000)
    -- 10x the messages: a linear printer takes about 10x the time; the
    -- quadratic one took 100x (20 s for 300,000).
    assert.is_true(big < 40 * small + 0.5, string.format("30,000: %.3f s, 300,000: %.3f s", small, big))
  end)

  it("prints nested unknown groups allocating a small multiple of the input", function()
    -- each field once became a table of its own (95 bytes of Lua heap per
    -- byte of input here; 2.4 GB for 5 MB a hundred groups deep)
    local block = ("\11"):rep(3) .. "\8\1" .. ("\12"):rep(3)
    local n = math.floor(1000000 / #block)
    local bytes = block:rep(n)
    local m = assert(pc.decode(pc.type("google.protobuf.Empty"), bytes))
    collectgarbage()
    collectgarbage("stop") -- every byte the printer allocates stays counted
    local before = collectgarbage("count")
    local text = pc.to_text(m)
    local allocated = (collectgarbage("count") - before) * 1024
    collectgarbage("restart")
    assert.are.equal(41 * n, #text) -- "1 {\n  1 {\n    1 {\n      1: 1\n    }\n  }\n}\n"
    -- the text is 5.9 times the input, made twice (in chunks, then whole)
    assert.is_true(allocated < 16 * #bytes, ("%.1f bytes per byte of input"):format(allocated / #bytes))
  end)

  it("raises on options that are not a table, and on an option it does not know", function()
    assert.has_error(function() pc.to_text(E{}, 5) end, "bad argument #2 to 'to_text' (table expected, got number)")
    assert.has_error(function() pc.to_text(E{}, { oneline = true }) end,
      "bad argument #2 to 'to_text' (unknown option 'oneline')")
    assert.has_error(function() pc.to_text(E{}, { indent = 2 }) end,
      "bad argument #2 to 'to_text' (unknown option 'indent')")
    assert.has_error(function() pc.to_text(E{}, { true }) end, "bad argument #2 to 'to_text' (unknown option '1')")
    assert.is_string(pc.to_text(E{}, { one_line = true, utf8 = false }))
  end)

  if not corpus.read("payloads/MANIFEST.tsv") then
    return it("needs the corpus", function() corpus.skip(pending, "unknown fields against protoc --decode_raw") end)
  end

  it("prints unknown fields as protoc --decode_raw does", function()
    local cases = os.tmpname()
    local ok, out = run(string.format("/usr/bin/python3 spec/tools/wire_diff.py gen %s/descriptors %s " ..
      "--seed 18 --count 150 --seconds 2", corpus.dir, cases))
    assert(ok, out)
    local Empty = pc.type("google.protobuf.Empty")
    local bin = os.tmpname()
    local n, bad = 0, {}
    for line in io.lines(cases) do
      local hex = line:match("\t([0-9a-f]*)$")
      local bytes = hex:gsub("..", function(x) return string.char(tonumber(x, 16)) end)
      local f = assert(io.open(bin, "wb"))
      f:write(bytes)
      f:close()
      local h = io.popen("protoc --decode_raw < " .. bin .. " 2>&1")
      local want = h:read("a")
      h:close()
      local got = pc.to_text(assert(pc.decode(Empty, bytes)))
      if got ~= want then bad[#bad + 1] = hex .. "\nprotoc:\n" .. want .. "\nprotocall:\n" .. got end
      n = n + 1
    end
    os.remove(cases)
    os.remove(bin)
    assert.is_true(n >= 100, n .. " cases")
    assert.are.same({}, bad)
  end)
end)

describe("pc.to_text one_line", function()
  it("prints the message on one line, as python's text_format as_one_line does", function()
    local p = pc.pool()
    assert(p:load('syntax = "proto3"; package ol; message P { int32 x = 1; string s = 2; }'
      .. ' message R { string name = 1; repeated P points = 2; }', { name = "ol.proto" }))
    local OlR = p:type("ol.R")
    local m = OlR{ name = "a\nb", points = { { x = 1, s = "q r" }, {} } }
    assert.are.equal('name: "a\\nb" points { x: 1 s: "q r" } points { }', pc.to_text(m, { one_line = true }))
    assert.are.equal("", pc.to_text(OlR{}, { one_line = true }))
    -- a deep message prints no indentation it would drop: the text grows linearly
    assert(p:load('syntax = "proto3"; package ol2; message N { N child = 1; int32 v = 2; }', { name = "ol2.proto" }))
    local N = p:type("ol2.N")
    local deep = N{ v = 1 }
    for _ = 2, 900 do deep = N{ child = deep, v = 1 } end
    local text = pc.to_text(deep, { one_line = true })
    assert.are.equal(899 * #"child { " + 900 * #"v: 1 " + 899 * #"} " - 1, #text)
    assert.is_nil(text:find("  ", 1, true))
  end)
end)
