-- Text format out (pc.to_text) against the C++ library: every binary payload
-- of ../shared/corpus/payloads/MANIFEST.tsv, with its schema loaded from
-- .proto source by pc.load_file, decoded by pc.decode and printed, reads
-- exactly as `protoc --decode` prints it. This runs the parser, the loader,
-- the decoder and the printer against the reference in one go. Skips visibly
-- without the corpus; fails then when env CI is set (protoc is installed
-- by .ci/install-deps).
local pc = require "protocall"

local corpus = require "corpus"
local CORPUS = corpus.dir

local function read(path) return corpus.read(path:sub(#CORPUS + 2)) end

-- Payloads whose text protocall does not print like protoc, and why.
local EXPECTED_DIFFERENT = {
  -- core/wire keeps MessageSet items as unknown fields; protoc prints them as extensions
  ["protobuf/test_all_types_proto2_message_set.bin"] = "MessageSet extensions",
}

describe("pc.to_text", function()
  it("prints nested messages, repeated fields, maps and escapes", function()
    local p = pc.pool()
    assert(p:load([[
      syntax = "proto3"; package tt;
      enum Color { RED = 0; GREEN = 1; }
      message Leaf { int32 v = 1; }
      message Root {
        string s = 1; bytes b = 2; repeated int32 r = 3; map<string, Leaf> m = 4;
        Color c = 5; double d = 6; float f = 7; Leaf leaf = 8; uint64 u = 9; bool ok = 10;
      }]], { name = "tt.proto" }))
    local Root = p:type("tt.Root")
    local m = Root{ s = "é\"\n", b = "\0\255", r = { 1, -2 }, m = { z = { v = 1 }, a = {} }, c = 1,
      d = 0.1, f = 0.1, leaf = { v = 3 }, u = -1, ok = true }
    assert.are.equal(table.concat({
      's: "\\303\\251\\"\\n"', 'b: "\\000\\377"', "r: 1", "r: -2",
      'm {', '  key: "a"', '  value {', '  }', '}', 'm {', '  key: "z"', '  value {', '    v: 1', '  }', '}',
      "c: GREEN", "d: 0.1", "f: 0.1", "leaf {", "  v: 3", "}", "u: 18446744073709551615", "ok: true", "",
    }, "\n"), pc.to_text(m))
    assert.matches('^s: "é\\"\\n"', pc.to_text(m, { utf8 = true }))
    assert.has_error(function() pc.to_text({}) end, "bad argument #1 to 'to_text' (message expected, got table)")
  end)

  it("escapes a string or bytes of many kilobytes whole, a UTF-8 sequence across its 64 KiB slices kept", function()
    local p = pc.pool()
    assert(p:load('syntax = "proto3"; package tl; message M { string s = 1; bytes b = 2; }', { name = "tl.proto" }))
    -- "é" (C3 A9) and a quote straddle the slice boundary at 65536; every byte escaped as by one pass
    local s = ("a"):rep(65535) .. "é\"" .. ("\1"):rep(70000) .. "z"
    local b = ("\255"):rep(65536 * 2 + 3)
    local m = p:type("tl.M") { s = s, b = b }
    local function octal(x) return (x:gsub("[%c\"'\\\127-\255]", function(c)
      return ({ ["\n"] = "\\n", ['"'] = '\\"' })[c] or ("\\%03o"):format(c:byte()) end)) end
    assert.are.equal('s: "' .. octal(s) .. '"\nb: "' .. octal(b) .. '"\n', pc.to_text(m))
    assert.are.equal('s: "' .. ("a"):rep(65535) .. 'é\\"' .. ("\\001"):rep(70000) .. 'z"\nb: "' .. octal(b) .. '"\n',
      pc.to_text(m, { utf8 = true }))
  end)

  if not corpus.read("payloads/MANIFEST.tsv") then
    return it("needs the corpus", function() corpus.skip(pending, "text format differential") end)
  end
  local manifest = corpus.read("payloads/MANIFEST.tsv")

  local pools = {}
  for line in manifest:gmatch("[^\n]+") do
    local file, proto, mtype, _, _, format = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)")
    if format == "binary" then
      it("prints " .. file .. " as protoc --decode does", function()
        local project, name = proto:match("^protos/([^/]+)/(.*)$")
        local dirs = { CORPUS .. "/protos/" .. project, CORPUS .. "/protos/wkt" }
        local pool = pools[project]
        if not pool then
          pool = pc.pool()
          pools[project] = pool
        end
        assert(pool:load_file(dirs[1] .. "/" .. name, { import_paths = dirs }))
        local m = assert(pc.decode(assert(pool:type(mtype)), read(CORPUS .. "/payloads/" .. file)))
        local cmd = string.format("protoc -I %s -I %s --decode=%s %s < %s 2>/dev/null", dirs[1], dirs[2], mtype, name,
          CORPUS .. "/payloads/" .. file)
        local h = io.popen(cmd)
        local expected = h:read("a")
        h:close()
        local got = pc.to_text(m)
        if EXPECTED_DIFFERENT[file] then
          assert.are_not.equal(expected, got) -- the day they agree, drop the exception
        else
          assert.are.equal(expected, got)
        end
      end)
    end
  end
end)
