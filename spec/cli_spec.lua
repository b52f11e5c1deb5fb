-- The `protocall` command's subcommands (lua/protocall/cli/), run as
-- processes through the command of the build under test ($PROTOCALL_BIN):
-- help and usage errors, decode against Debian's `protoc --decode` for every
-- binary corpus payload, descriptor sets, length-delimited streams, describe
-- and list, and scripts that keep running as before.
local R = require "runtime"
if R.luajit then
  pending("the protocall command [Lua 5.4 only: the command embeds Lua 5.4; the Lua 5.4 passes run these specs]")
  return
end
local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
require "protocall"
local core = require "protocall.core"
local helper = require "grpc_helper"
local corpus = require "corpus"
local CORPUS = corpus.dir

-- Runs a shell command line; returns stdout, stderr and the exit status.
local function run(cmd, stdin)
  local err = os.tmpname()
  local input = ""
  if stdin then
    local tmp = os.tmpname()
    local f = assert(io.open(tmp, "wb"))
    f:write(stdin)
    f:close()
    input = " < " .. tmp
    cmd = cmd .. input
  end
  local h = io.popen(cmd .. " 2>" .. err)
  local out = h:read("a")
  local ok, _, code = h:close()
  local f = io.open(err, "rb")
  local errout = f and f:read("a") or ""
  if f then f:close() end
  os.remove(err)
  if stdin then os.remove(input:sub(4)) end
  return out, errout, ok and 0 or code
end

local function write_tmp(bytes)
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "wb"))
  f:write(bytes)
  f:close()
  return tmp
end

local ROUTE = "-I examples -proto route.proto"

describe("protocall help", function()
  it("lists the commands, with --help and -h alike", function()
    for _, flag in ipairs { "help", "--help", "-h" } do
      local out, err, code = run(BIN .. " " .. flag)
      assert.are.equal(0, code, err)
      for _, name in ipairs { "call", "list", "describe", "decode", "encode", "validate" } do
        assert.matches("\n  " .. name .. " ", out, 1, true)
      end
      assert.matches("protocall run SCRIPT", out, 1, true)
    end
  end)

  for _, name in ipairs { "call", "list", "describe", "decode", "encode", "validate", "run", "help" } do
    it("shows the usage of " .. name .. " with an example", function()
      local out, err, code = run(BIN .. " help " .. name)
      assert.are.equal(0, code, err)
      assert.matches("^usage: protocall " .. name, out)
      assert.matches("\nexample:\n  %S*[^\n]*\n?%s*protocall " .. name, out)
    end)
  end

  it("shows a command's usage on stdout for -h, -help and --help after it (grpcurl's -help)", function()
    for _, flag in ipairs { "-h", "-help", "--help" } do
      for _, name in ipairs { "call", "gateway" } do
        local out, err, code = run(BIN .. " " .. name .. " " .. flag)
        assert.are.equal(0, code, err)
        assert.matches("^usage: protocall " .. name, out)
      end
    end
    local _, err, code = run(BIN .. " call -helpme")
    assert.are.equal(2, code)
    assert.matches("unknown flag %-helpme", err)
  end)

  it("shows validate's example runnable from the repository", function()
    local out = run(BIN .. " help validate")
    local example = assert(out:match("\nexample:\n(.-)\n$"))
    local res, err, code = run((example:gsub("protocall validate", BIN .. " validate")))
    assert.are.equal(1, code, err)
    assert.matches("^email: [^\n]*\nlines%[0%]%.qty: must be greater than 0", res)
  end)

  it("shows serve's example with the script that serves under serve", function()
    local out, err, code = run(BIN .. " help serve")
    assert.are.equal(0, code, err)
    local script = out:match("\nexample:\n  protocall serve .- (%S+)\n$")
    assert.are.equal("examples/route_services.lua", script)
    local f = assert(io.open(script)) -- a table of services, which serve listens with
    assert.matches("return services", f:read("a"), 1, true)
    f:close()
  end)

  it("refuses a number flag that is not finite, exit 2 with the usage", function()
    for _, v in ipairs { "1e400", "inf", "nan" } do
      local out, err, code = run(BIN .. " call -plaintext " .. ROUTE .. " -max-time " .. v
        .. " 127.0.0.1:1 demo.Router/Measure")
      assert.are.equal(2, code, err)
      assert.are.equal("", out)
      assert.matches("^protocall call: flag %-max%-time: a finite number >= 0 expected, got '" .. v .. "'\nusage:", err)
    end
  end)

  it("exits 2 with the usage on an unknown command, flag or missing argument", function()
    local out, err, code = run(BIN .. " help nosuch")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("protocall help: unknown command 'nosuch'", err, 1, true)
    assert.matches("\n`protocall help` lists the commands%.\n$", err)
    out, err, code = run(BIN .. " decode -bogus")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall decode: unknown flag %-bogus\nusage: protocall decode", err)
    -- the usage lines and where the rest is, not the whole help
    assert.matches("\n`protocall help decode` shows its flags and an example%.\n$", err)
    assert.is_nil(err:find("example:", 1, true))
    out, err, code = run(BIN .. " decode " .. ROUTE)
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("protocall decode: TYPE expected", err, 1, true)
    out, err, code = run(BIN .. " decode demo.Route")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("no schema: give -proto FILE or -protoset FILE", err, 1, true)
    out, err, code = run(BIN .. " decode -format yaml " .. ROUTE .. " demo.Route")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("-format must be text or json, got 'yaml'", err, 1, true)
    out, err, code = run(BIN .. " call " .. ROUTE .. " localhost:1")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("TARGET and pkg.Service/Method expected", err, 1, true)
    out, err, code = run(BIN .. " list -I")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("flag -I needs a value", err, 1, true)
    out, err, code = run(BIN .. " decode " .. ROUTE .. " demo.Route a b")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("too many arguments: TYPE [FILE]", err, 1, true)
    out, err, code = run(BIN .. " decode -raw " .. ROUTE .. " demo.Route")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("-raw takes no schema", err, 1, true)
    out, err, code = run(BIN .. " run")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("run: a script expected", err, 1, true)
    out, err, code = run(BIN .. " lst")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("cannot open lst: No such file or directory (and not a command: `protocall help` lists them)",
      err, 1, true)
  end)
end)

describe("protocall's words for a user's slips (a fresh user's review)", function()
  it("refuses a string flag whose value would be the next flag, naming both, exit 2", function()
    -- (`timeout`: a gateway that takes such a value serves on, a hang the spec fails)
    for _, case in ipairs {
      { "gateway -listen 127.0.0.1:0 -header -plaintext 127.0.0.1:1", "gateway", "header", "-plaintext" },
      { "call -d -plaintext 127.0.0.1:1 demo.Router/Measure", "call", "d", "-plaintext" },
      { "call -proto -plaintext 127.0.0.1:1 demo.Router/Measure", "call", "proto", "-plaintext" },
      { "call -cacert --insecure 127.0.0.1:1 demo.Router/Measure", "call", "cacert", "--insecure" },
      { "gateway -rules -proto=x.proto 127.0.0.1:1", "gateway", "rules", "-proto=x.proto" },
      { "gateway -listen -h 127.0.0.1:1", "gateway", "listen", "-h" },
      { "decode -I -Iexamples demo.Route", "decode", "I", "-Iexamples" },
      { "serve -cert -key k.pem s.lua", "serve", "cert", "-key" },
    } do
      local out, err, code = run("timeout 10 " .. BIN .. " " .. case[1])
      assert.are.equal(2, code, case[1] .. ": " .. err)
      assert.are.equal("", out)
      local want = "protocall " .. case[2] .. ": flag -" .. case[3] .. " needs a value (got the flag " .. case[4]
        .. ")\nusage: "
      assert.are.equal(want, err:sub(1, #want), case[1])
    end
    -- a value that is no flag of the command, or given with '=', is taken
    local _, err, code = run(BIN .. " decode -format -raw " .. ROUTE .. " demo.Route")
    assert.are.equal(2, code)
    assert.matches("needs a value (got the flag -raw)", err, 1, true)
    _, err, code = run(BIN .. " call -plaintext " .. ROUTE .. " -d=-v 127.0.0.1:1 demo.Router/Measure")
    assert.are.equal(1, code)
    assert.matches("^protocall call: request: ", err)
    -- a number flag's value: refused as no number
    _, err, code = run(BIN .. " call -max-time -plaintext 127.0.0.1:1 demo.Router/Measure")
    assert.are.equal(2, code)
    assert.matches("flag -max-time: a finite number >= 0 expected, got '-plaintext'", err, 1, true)
  end)

  it("refuses a -header that is no HTTP header name at start, naming the flag, exit 2", function()
    for _, h in ipairs { "x bad", "x:y", "" } do
      local out, err, code = run("timeout 10 " .. BIN .. " gateway -listen 127.0.0.1:0 -plaintext " .. ROUTE
        .. " -header '" .. h .. "' 127.0.0.1:1")
      assert.are.equal(2, code, err)
      assert.are.equal("", out)
      local want = "protocall gateway: -header '" .. h .. "': not a valid HTTP header name\nusage: "
      assert.are.equal(want, err:sub(1, #want))
    end
  end)

  it("names an argument past those a command takes", function()
    local out, err, code = run(BIN .. " call -plaintext " .. ROUTE .. " 127.0.0.1:1 demo.Router/Measure extra")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall call: unexpected argument 'extra' %(TARGET and pkg.Service/Method expected%)\n", err)
    out, err, code = run("timeout 10 " .. BIN .. " gateway -plaintext " .. ROUTE .. " 127.0.0.1:1 more")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall gateway: unexpected argument 'more' %(one UPSTREAM expected%)\n", err)
  end)

  it("names a TARGET or UPSTREAM without a port as typed", function()
    for _, case in ipairs {
      { "call -plaintext 127.0.0.1 demo.Router/Measure", "call", "TARGET '127.0.0.1'" },
      { "call -plaintext localhost demo.Router/Measure", "call", "TARGET 'localhost'" },
      { "call -plaintext [::1] demo.Router/Measure", "call", "TARGET '[::1]'" },
      { "gateway -plaintext 127.0.0.1", "gateway", "UPSTREAM '127.0.0.1'" },
    } do
      local out, err, code = run("timeout 10 " .. BIN .. " " .. case[2] .. " " .. ROUTE .. case[1]:sub(#case[2] + 1))
      assert.are.equal(1, code, err)
      assert.are.equal("", out)
      assert.are.equal("protocall " .. case[2] .. ": " .. case[3] .. ": a port is needed (host:port)\n", err)
    end
    -- a URL typed as such: pc.grpc's words, the URL as typed
    local _, err = run(BIN .. " call " .. ROUTE .. " http://127.0.0.1 demo.Router/Measure")
    assert.are.equal("protocall call: TARGET 'http://127.0.0.1': h2c needs a port (http://host:port)\n", err)
  end)

  it("names the -d @FILE a request failed in, and a file that cannot be read", function()
    local bad = write_tmp('{"name": "r", "points": [{"x": "y"}]}')
    local point = write_tmp('{"x": 1} {"x": "y"}')
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    for _, case in ipairs {
      { "Measure", bad, "-d @" .. bad .. ": request: $.points[0].x: " },
      { "Record", point, "-d @" .. point .. ": request 2: $.x: " },
      { "Measure", "/nonexistent/nope.json", "-d @/nonexistent/nope.json: cannot be read: No such file or "
        .. "directory\n" },
      { "Measure", dir, "-d @" .. dir .. ": cannot be read: Is a directory\n" },
    } do
      local out, err, code = run(BIN .. " call -plaintext " .. ROUTE .. " -d @" .. case[2]
        .. " 127.0.0.1:1 demo.Router/" .. case[1])
      assert.are.equal(1, code, err)
      assert.are.equal("", out)
      assert.are.equal("protocall call: " .. case[3], err:sub(1, 16 + #case[3]), case[1])
    end
    os.remove(bad)
    os.remove(point)
    os.remove(dir)
  end)

  it("calls bash's -d @<(cmd) a pipe when its writer is waited out", function()
    local line = BIN .. " call -plaintext " .. ROUTE .. " -max-time 0.5 -d @<(sleep 3) 127.0.0.1:1 demo.Router/Measure"
    local out, err, code = run("bash -c " .. ("%q"):format(line))
    assert.are.equal(64 + 4, code, err)
    assert.are.equal("", out)
    assert.matches("^ERROR: code = DEADLINE_EXCEEDED, message = deadline exceeded waiting for pipe '/dev/fd/%d+' "
      .. "%(%-max%-time 0%.5%)\n$", err)
  end)

  it("says in help what TARGET, -d @- and -listen's default are", function()
    local out = run(BIN .. " help call")
    assert.matches("@ or @- reads standard input", out, 1, true)
    assert.matches("[-d JSON|@|@-|@FILE]", out, 1, true)
    assert.matches("http://host:port h2c and https://host:port TLS whatever\n-plaintext says", out, 1, true)
    out = run(BIN .. " help gateway")
    assert.matches("^usage: protocall gateway %[%-listen ADDR%] ", out)
    assert.matches("services of the schema that\nUPSTREAM's reflection does not list", out, 1, true)
    out = run(BIN .. " help serve")
    assert.matches("The script loads its\nservices' schema itself", out, 1, true)
  end)
end)

describe("protocall decode", function()
  it("prints a message as text, and fails on bad input with one line", function()
    local bytes = "\10\3abc\18\4\8\1\16\2" -- name "abc", points { x 1 y 2 }
    local out, err, code = run(BIN .. " decode " .. ROUTE .. " demo.Route", bytes)
    assert.are.equal(0, code, err)
    assert.are.equal('name: "abc"\npoints {\n  x: 1\n  y: 2\n}\n', out)
    out, err, code = run(BIN .. " decode " .. ROUTE .. " demo.Route", "\10\5ab")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall decode: <stdin>: demo.Route.name: length runs past the end of the input"
      .. " at offset 1\n", err)
    out, err, code = run(BIN .. " decode " .. ROUTE .. " demo.Nope", "")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall decode: demo.Nope: no such message type in the loaded files\n", err)
    out, err, code = run(BIN .. " decode -I examples -proto nope.proto demo.Route", "")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall decode: nope.proto: File not found.\n", err)
    -- a built-in file found on no -I path: protocall's own, as protoc's include folder
    out, err, code = run(BIN .. " encode -format json -proto google/protobuf/field_mask.proto"
      .. " google.protobuf.FieldMask", '"fooBar,baz.qux"')
    assert.are.same({ 0, "" }, { code, err })
    assert.are.equal("\10\7foo_bar\10\7baz.qux", out)
    out, err, code = run(BIN .. " decode " .. ROUTE .. " demo.Route /nonexistent/x.bin")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("^protocall decode: /nonexistent/x.bin: No such file or directory\n$", err)
  end)

  it("reads a stream of varint-prefixed messages with -length-delimited", function()
    local a, b = "\10\1a", "\10\2bc"
    local out, err, code = run(BIN .. " decode -length-delimited " .. ROUTE .. " demo.Route",
                               "\3" .. a .. "\4" .. b)
    assert.are.equal(0, code, err)
    assert.are.equal('name: "a"\n\nname: "bc"\n', out)
    out, err, code = run(BIN .. " decode -length-delimited " .. ROUTE .. " demo.Route", "\3" .. a .. "\9xx")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall decode: message at offset 4 runs past the end of the input (9 bytes announced)\n", err)
  end)

  it("takes protoc's attached -Idir form", function()
    local out, err, code = run(BIN .. " decode -Iexamples -proto route.proto demo.Route", "\10\1q")
    assert.are.equal(0, code, err)
    assert.are.equal('name: "q"\n', out)
  end)

  it("takes its schemas from a descriptor set (-protoset)", function()
    local set = os.tmpname()
    assert.is_true(os.execute("protoc -I examples -o " .. set .. " route.proto"))
    local out, err, code = run(BIN .. " decode -protoset " .. set .. " demo.Route", "\10\1z")
    os.remove(set)
    assert.are.equal(0, code, err)
    assert.are.equal('name: "z"\n', out)
    -- .proto source given to -protoset, or other bytes: said so, without the
    -- codec's internal type name
    out, err, code = run(BIN .. " decode -protoset examples/route.proto demo.Route", "")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall decode: examples/route.proto: not a binary FileDescriptorSet (field 5: invalid wire "
      .. "type at offset 0); .proto source? give it with -proto\n", err)
    set = write_tmp("garbage\255\1")
    out, err, code = run(BIN .. " list -protoset " .. set)
    os.remove(set)
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall list: " .. set .. ": not a binary FileDescriptorSet (field 12: invalid wire type at "
      .. "offset 0)\n", err)
  end)

  if not corpus.read("payloads/MANIFEST.tsv") then
    return it("needs the corpus", function() corpus.skip(pending, "decode against protoc --decode") end)
  end
  -- As in spec/text_spec.lua: MessageSet items stay unknown fields here.
  local EXPECTED_DIFFERENT = { ["protobuf/test_all_types_proto2_message_set.bin"] = true }
  for line in corpus.read("payloads/MANIFEST.tsv"):gmatch("[^\n]+") do
    local file, proto, mtype, _, _, format = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)")
    if format == "binary" then
      it("decodes " .. file .. " as protoc --decode does", function()
        local project, name = proto:match("^protos/([^/]+)/(.*)$")
        local I = string.format("-I %s/protos/%s -I %s/protos/wkt", CORPUS, project, CORPUS)
        local payload = CORPUS .. "/payloads/" .. file
        local expected = run(string.format("protoc %s --decode=%s %s < %s", I, mtype, name, payload))
        local out, err, code = run(string.format("%s decode %s -proto %s %s %s", BIN, I, name, mtype, payload))
        assert.are.equal(0, code, err)
        if EXPECTED_DIFFERENT[file] then
          assert.are_not.equal(expected, out)
        else
          assert.are.equal(expected, out)
        end
      end)
    end
  end
end)

describe("protocall decode -format json and -raw", function()
  it("prints JSON as pc.to_json does, and without a schema as protoc --decode_raw does", function()
    local bytes = "\10\3abc\18\4\8\1\16\2"
    local out, err, code = run(BIN .. " decode -format json " .. ROUTE .. " demo.Route", bytes)
    assert.are.equal(0, code, err)
    assert.are.equal('{\n  "name": "abc",\n  "points": [\n    {\n      "x": 1,\n      "y": 2\n    }\n  ]\n}\n', out)
    out, err, code = run(BIN .. " decode -raw", bytes)
    assert.are.equal(0, code, err)
    local expected = run("protoc --decode_raw", bytes)
    assert.are.equal(expected, out)
    out, err, code = run(BIN .. " decode -raw -format json", bytes)
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("-raw prints text format only", err, 1, true)
    -- -emit-defaults is JSON's: text format prints set fields only
    out, err, code = run(BIN .. " decode -emit-defaults " .. ROUTE .. " demo.Route", bytes)
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("-emit-defaults is for JSON output (-format json): text format prints set fields only", err, 1, true)
    out, err, code = run(BIN .. " decode -emit-defaults -format json " .. ROUTE .. " demo.Route", "")
    assert.are.equal(0, code, err)
    assert.matches('"name": ""', out, 1, true)
    -- bad input: the error names the field and offset, no type (-raw was given none)
    out, err, code = run(BIN .. " decode -raw", "hi\n")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall decode: <stdin>: field 1: truncated input at offset 3\n", err)
    -- a tag cut short: an error of the whole input, which names no type either
    out, err, code = run(BIN .. " decode -raw", "\255\255")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall decode: <stdin>: truncated input at offset 0\n", err)
  end)
end)

describe("protocall encode, decode and call with a proto2 required field unset", function()
  local dir
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert.is_true(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/legacy.proto", "wb"))
    f:write('syntax = "proto2"; package legacy;\nmessage Old { optional int32 a = 1; required int32 must = 2; }\n'
      .. "service L { rpc Echo(Old) returns (Old); }\n")
    f:close()
  end)
  teardown(function() os.execute("rm -rf " .. dir) end)

  it("encode and decode warn and go on, as protoc does; call refuses the request as bad input", function()
    local schema = " -I " .. dir .. " -proto legacy.proto "
    local out, err, code = run(BIN .. " encode" .. schema .. "legacy.Old", "a: 1")
    assert.are.equal(0, code, err)
    assert.are.equal("\8\1", out)
    assert.are.equal("protocall encode: warning: missing required field: legacy.Old.must\n", err)
    out, err, code = run(BIN .. " decode" .. schema .. "legacy.Old", "\8\1")
    assert.are.equal(0, code, err)
    assert.are.equal("a: 1\n", out)
    assert.are.equal("protocall decode: warning: <stdin>: missing required field: legacy.Old.must\n", err)
    -- (refused before connecting: no server at the target)
    out, err, code = run(BIN .. " call -plaintext -d '{\"a\":1}'" .. schema .. "127.0.0.1:1 legacy.L/Echo")
    assert.are.equal(1, code, err)
    assert.are.equal("", out)
    assert.are.equal("protocall call: request: missing required field: legacy.Old.must\n", err)
  end)
end)

describe("protocall encode", function()
  it("writes text format and JSON as binary, the bytes protoc --encode writes", function()
    local text = 'name: "x" points { x: 5 } labels { key: "k" value: "v" }'
    local out, err, code = run(BIN .. " encode " .. ROUTE .. " demo.Route", text)
    assert.are.equal(0, code, err)
    assert.are.equal(run("protoc -I examples --encode=demo.Route route.proto", text), out)
    out, err, code = run(BIN .. " encode -format json " .. ROUTE .. " demo.Route",
                         '{"name": "x", "points": [{"x": 5}]}')
    assert.are.equal(0, code, err)
    assert.are.equal("\10\1x\18\2\8\5", out)
  end)

  it("writes one varint-prefixed message per JSON document with -length-delimited", function()
    local out, err, code = run(BIN .. " encode -format json -length-delimited " .. ROUTE .. " demo.Route",
                               '{"name": "j"}\n{"name": "k"} {}')
    assert.are.equal(0, code, err)
    assert.are.equal("\3\10\1j\3\10\1k\0", out)
  end)

  it("fails with one line naming the place", function()
    local out, err, code = run(BIN .. " encode " .. ROUTE .. " demo.Route", "nme: 1")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal('protocall encode: <stdin>: 1:1: message type "demo.Route" has no field named "nme"\n', err)
    out, err, code = run(BIN .. " encode -format json " .. ROUTE .. " demo.Route", '{"name": 5}')
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("^protocall encode: <stdin>: %$%.name: ", err)
    out, err, code = run(BIN .. " encode -format json -length-delimited " .. ROUTE .. " demo.Route", '{"name": "a"} x')
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall encode: JSON value expected at offset 14\n", err)
    out, err, code = run(BIN .. " encode -length-delimited " .. ROUTE .. " demo.Route", "")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("-length-delimited reads JSON documents (-format json)", err, 1, true)
  end)
end)

describe("protocall validate", function()
  local ORDER = BIN .. " validate -I examples -proto order.proto"
  local BAD_JSON = '{"email": "ann", "lines": [{"sku": "abc", "qty": 0}, {"sku": "ABC-2", "qty": 1}, ' ..
                   '{"sku": "ABC-3", "qty": 1}, {"sku": "ABC-4", "qty": 101}]}'
  local BAD_LINES = "email: must be a valid email address [string.email]\n" ..
    "lines[0].sku: does not match regex pattern `^[A-Z]{3}-[0-9]+$` [string.pattern]\n" ..
    "lines[0].qty: must be greater than 0 and less than or equal to 100 [uint32.gt_lte]\n" ..
    "lines[3].qty: must be greater than 0 and less than or equal to 100 [uint32.gt_lte]\n"

  it("prints nothing and exits 0 for a valid message, in each input format", function()
    local json = '{"email": "ann@example.com", "lines": [{"sku": "ABC-1", "qty": 2}]}'
    local out, err, code = run(ORDER .. " -format json shop.v1.Order", json)
    assert.are.equal(0, code, err)
    assert.are.equal("", out)
    assert.are.equal("", err)
    local text = 'email: "ann@example.com" lines { sku: "ABC-1" qty: 2 }'
    out, err, code = run(ORDER .. " -format text shop.v1.Order", text)
    assert.are.equal(0, code, err)
    assert.are.equal("", out)
    local bin = run(BIN .. " encode -I examples -proto order.proto shop.v1.Order", text)
    local file = write_tmp(bin)
    out, err, code = run(ORDER .. " shop.v1.Order " .. file) -- binary by default, from FILE
    os.remove(file)
    assert.are.equal(0, code, err)
    assert.are.equal("", out)
  end)

  it("prints one line per violation (field, message, rule) and exits 1 for an invalid message", function()
    local out, err, code = run(ORDER .. " -format json shop.v1.Order", BAD_JSON)
    assert.are.equal(1, code, err)
    assert.are.equal(BAD_LINES, out)
    assert.are.equal("", err)
    -- the same message as binary on standard input: the same lines
    local bin = run(BIN .. " encode -I examples -proto order.proto -format json shop.v1.Order", BAD_JSON)
    out, err, code = run(ORDER .. " -format binary shop.v1.Order", bin)
    assert.are.equal(1, code, err)
    assert.are.equal(BAD_LINES, out)
    -- a message's own CEL rule has no field
    out, err, code = run(ORDER .. " -format text shop.v1.Order",
      'lines { sku: "ABC-1" qty: 1 } lines { sku: "ABC-1" qty: 1 } lines { sku: "ABC-1" qty: 1 } ' ..
      'lines { sku: "ABC-1" qty: 1 } email: ""')
    assert.are.equal(1, code, err)
    assert.are.equal("email: value is empty, which is not a valid email address [string.email_empty]\n" ..
                     "more than 3 lines needs an email [order.bulk]\n", out)
  end)

  it("exits 2 when it cannot tell: usage errors, missing types, bad input, broken rules", function()
    local out, err, code = run(ORDER .. " -format yaml shop.v1.Order", "")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall validate: %-format must be binary or json or text, got .yaml.\nusage: protocall",
      err)
    out, err, code = run(BIN .. " validate shop.v1.Order", "")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("no schema: give -proto FILE or -protoset FILE", err, 1, true)
    out, err, code = run(ORDER, "")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("protocall validate: TYPE expected", err, 1, true)
    out, err, code = run(ORDER .. " shop.v1.Order a b", "")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("too many arguments: TYPE [FILE]", err, 1, true)
    out, err, code = run(ORDER .. " shop.v1.Nope", "")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.are.equal("protocall validate: shop.v1.Nope: no such message type in the loaded files\n", err)
    out, err, code = run(ORDER .. " -format json shop.v1.Order", '{"email": 5}')
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall validate: <stdin>: %$%.email: [^\n]*\n$", err)
    out, err, code = run(ORDER .. " shop.v1.Order", ' {"email": "ann"}') -- JSON read as binary
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall validate: <stdin>: [^\n]* %(JSON or text%? give %-format json or text%)\n$", err)
    out, err, code = run(ORDER .. " shop.v1.Order", "\255") -- truncated binary
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall validate: <stdin>: [^\n]*\n$", err)
    out, err, code = run(ORDER .. " shop.v1.Order /nonexistent/order.bin")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall validate: /nonexistent/order.bin: No such file or directory\n$", err)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    local f = assert(io.open(dir .. "/broken.proto", "wb"))
    f:write('syntax = "proto3"; package t; import "buf/validate/validate.proto";\n' ..
            'message M { string s = 1 [(buf.validate.field).int32.gt = 1]; }\n')
    f:close()
    out, err, code = run(BIN .. " validate -I " .. dir .. " -proto broken.proto -format text t.M", "")
    os.remove(dir .. "/broken.proto")
    os.remove(dir)
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches('^protocall validate: [^\n]*expected rule "string", got "int32" on t.M.s\n$', err)
  end)
end)

describe("protocall call", function()
  local FAULTS = "-I spec/fixtures/protos/grpc -proto faults.proto"
  local server
  setup(function() server = helper.spawn("grpc", 0) end)
  teardown(function() helper.stop(server) end)

  local function call(args, stdin)
    return run(BIN .. " call -plaintext " .. FAULTS .. " " .. args:gsub("TARGET", "127.0.0.1:" .. server.port), stdin)
  end

  it("makes a unary call with a JSON request and prints the JSON response", function()
    local out, err, code = call([[-d '{"text": "hi"}' TARGET faults.Faults/Echo]])
    assert.are.equal(0, code, err)
    assert.are.equal('{\n  "text": "hi",\n  "attempts": 1\n}\n', out)
    out, err, code = call("-d @ -format text TARGET faults.Faults/Echo", '{"text": "from stdin"}')
    assert.are.equal(0, code, err)
    assert.are.equal('text: "from stdin"\nattempts: 1\n', out)
  end)

  it("sends -H metadata and prints every response of a server stream as it arrives", function()
    local out, err, code = call([[-H 'x-trace: abc' -H 'X-Id: 7' TARGET faults.Faults/Metadata]])
    assert.are.equal(0, code, err)
    assert.matches('"key": "x%-trace",%s*"value": "abc"', out)
    assert.matches('"key": "x%-id",%s*"value": "7"', out)
    out, err, code = call([[-H 'x-data-bin: aGk' TARGET faults.Faults/Metadata]]) -- base64 of "hi"
    assert.are.equal(0, code, err)
    assert.matches('"key": "x%-data%-bin",%s*"value": "6869"', out) -- the server shows bytes as hex
    out, err, code = call([[-H 'x-data-bin: !!' TARGET faults.Faults/Metadata]])
    assert.are.equal(2, code) -- a usage error, as a bad key is
    assert.are.equal("", out)
    assert.matches("^protocall call: %-H 'x%-data%-bin: !!': the value of a %-bin key must be base64\nusage: ", err)
    out, err, code = call([[-d '{"count": 3}' -format text -v TARGET faults.Faults/Stream]])
    assert.are.equal(0, code, err)
    assert.are.equal("index: 1\nattempts: 1\n\nindex: 2\nattempts: 1\n\nindex: 3\nattempts: 1\n", out)
    assert.matches("^Response headers received:\n.*\n3 response messages in [%d.]+ s\n$", err)
  end)

  it("shows a stream's progress on stderr only when stderr is a terminal", function()
    -- script(1) gives the command a terminal; without one (above) stderr stays empty
    local cmd = BIN .. " call -plaintext " .. FAULTS .. [[ -d '{\"count\": 2}' 127.0.0.1:]] .. server.port
      .. " faults.Faults/Stream"
    local out, err, code = run("script -qec \"" .. cmd .. "\" /dev/null")
    assert.are.equal(0, code, err)
    assert.matches("\r2 received, [%d.]+ s ", out)
  end)

  it("exits 64 + the status code with the error on stderr", function()
    local out, err, code = call([[-d '{"failures": 1, "code": "NOT_FOUND"}' TARGET faults.Faults/FailThenSucceed]])
    assert.are.equal(64 + 5, code)
    assert.are.equal("", out)
    assert.matches("^ERROR: code = NOT_FOUND, message = ", err)
    out, err, code = call([[-d '{"seconds": 5}' -max-time 0.2 TARGET faults.Faults/Sleep]])
    assert.are.equal(64 + 4, code)
    assert.are.equal("", out)
    assert.matches("^ERROR: code = DEADLINE_EXCEEDED", err)
    out, err, code = call([[-retry-attempts 3 -d '{"id": "cli-r", "failures": 2, "code": "UNAVAILABLE"}']]
      .. " TARGET faults.Faults/FailThenSucceed")
    assert.are.equal(0, code, err)
    assert.matches('"attempts": 3', out, 1, true)
    out, err, code = run(BIN .. " call -plaintext " .. FAULTS .. " 127.0.0.1:1 faults.Faults/Echo")
    assert.are.equal(64 + 14, code)
    assert.are.equal("", out)
    assert.matches("^ERROR: code = UNAVAILABLE", err)
  end)

  it("hints at -plaintext when TLS meets a plaintext server, not when -plaintext was given", function()
    local out, err, code = run(BIN .. " call " .. FAULTS .. " 127.0.0.1:" .. server.port .. " faults.Faults/Echo")
    assert.are.equal(64 + 14, code)
    assert.are.equal("", out)
    assert.matches("wrong version number", err, 1, true)
    assert.matches("\n  hint: the server answered TLS with plaintext: if it serves h2c, add %-plaintext\n$", err)
    local _, err2 = run(BIN .. " call -plaintext " .. FAULTS .. " 127.0.0.1:1 faults.Faults/Echo")
    assert.is_nil(err2:find("hint:", 1, true))
  end)

  it("hints at -http1 when a Connect or gRPC-Web call's server closes after the HTTP/2 preface", function()
    local hangup = helper.spawn("hangup", 0)
    local function hcall(flags)
      return run(BIN .. " call -plaintext " .. flags .. " " .. FAULTS .. " 127.0.0.1:" .. hangup.port
        .. " faults.Faults/Echo")
    end
    for _, protocol in ipairs { "connect", "grpcweb" } do
      local out, err, code = hcall("-protocol " .. protocol)
      assert.are.equal(64 + 14, code)
      assert.are.equal("", out)
      assert.are.equal("ERROR: code = UNAVAILABLE, message = read from 127.0.0.1:" .. hangup.port
        .. ": connection closed by the peer before its HTTP/2 SETTINGS\n"
        .. "  hint: the server closed the connection after the HTTP/2 preface: if it serves HTTP/1.1 only, "
        .. "add -http1\n", err)
    end
    -- a server answering the preface with an HTTP/1.1 400 (nginx, python's http.server)
    local http1 = helper.spawn("http1", 0)
    for _, protocol in ipairs { "connect", "grpcweb" } do
      local _, err, code = run(BIN .. " call -plaintext -protocol " .. protocol .. " " .. FAULTS
        .. " 127.0.0.1:" .. http1.port .. " faults.Faults/Echo")
      assert.are.equal(64 + 14, code)
      -- (read with the close, the answer is refused unread: the closed connection's hint)
      assert.matches("\n  hint: the server [%w %-/]+ the HTTP/2 preface: if it serves HTTP/1.1 only, add %-http1\n$",
        err)
    end
    helper.stop(http1)
    -- gRPC has no HTTP/1.1 to fall back to; under -http1 the closed connection is just that
    local _, err, code = hcall("-protocol grpc")
    assert.are.equal(64 + 14, code)
    assert.matches("before its HTTP/2 SETTINGS\n$", err)
    _, err, code = hcall("-protocol connect -http1")
    helper.stop(hangup)
    assert.are.equal(64 + 14, code)
    assert.is_nil(err:find("hint:", 1, true), err)
    assert.is_nil(err:find("SETTINGS", 1, true), err)
    -- a server that speaks HTTP/2 (grpcio, which knows no Connect) gets no hint
    _, err = call("-protocol connect -max-time 0.2 TARGET faults.Faults/Echo")
    assert.is_nil(err:find("hint:", 1, true), err)
  end)

  it("refuses a bad target, bad metadata and bad retry counts with one line, never exit 0", function()
    local out, err, code = run(BIN .. " call -plaintext " .. FAULTS .. " localhost faults.Faults/Echo")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: TARGET 'localhost': a port is needed (host:port)\n", err)
    out, err, code = call("-H 'grpc-timeout: 1S' TARGET faults.Faults/Echo")
    assert.are.equal(2, code) -- a usage error
    assert.are.equal("", out)
    assert.matches("^protocall call: %-H 'grpc%-timeout: 1S': metadata key 'grpc%-timeout' is reserved for the "
      .. "transport\nusage: protocall call ", err)
    -- the value too, before anything connects (the reflection path of a call without -proto too)
    out, err, code = run(BIN .. " call -plaintext -H 'x-a: b\x01c' 127.0.0.1:" .. server.port .. " faults.Faults/Echo")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    -- (quoted without its control characters: a terminal's escapes)
    assert.matches("^protocall call: %-H 'x%-a: b%?c': metadata 'x%-a': value must be printable ASCII.*\nusage: "
      .. "protocall call ", err)
    out, err, code = call("-H 'Bad Key: v' TARGET faults.Faults/Echo")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall call: %-H 'Bad Key: v': metadata key 'bad key': only lowercase letters, digits, "
      .. "'_', '%-', '%.'\nusage: protocall call ", err)
    out, err, code = call("TARGET/faults.Faults/Echo faults.Faults/Echo")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("^protocall call: TARGET '127.0.0.1:%d+/faults.Faults/Echo': a path "
      .. "%('/faults.Faults/Echo'%) is not allowed: a target is host:port %(the method is the path%)\n$", err)
    out, err, code = call("-retry-attempts 1.5 TARGET faults.Faults/Echo")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("-retry-attempts: a whole number >= 1 expected, got 1.5", err, 1, true)
    out, err, code = call([[-max-time 0 -d '{"text": "no limit"}' TARGET faults.Faults/Echo]])
    assert.are.equal(0, code, err)
    assert.matches('"text": "no limit"', out, 1, true)
  end)

  it("refuses a bad request, an unknown method and a client stream with one line", function()
    local out, err, code = call([[-d '{"text": 1}' TARGET faults.Faults/Echo]])
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("^protocall call: request: %$%.text: ", err)
    out, err, code = call("TARGET faults.Faults/Nope")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: faults.Faults has no method 'Nope' (its methods: Echo, FailThenSucceed, Sleep,"
      .. " Big, Metadata, Compressed, Pushback, Undecodable, Attempts, Hedge, HedgeStream, Stream, StreamThenFail,"
      .. " Record)\n", err)
    out, err, code = call("TARGET nope.Svc/Echo")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: no service 'nope.Svc' in the schema (its services: faults.Faults)\n", err)
    -- what the symbol is when it is no service, and a name without '/' as either (was "Service not found: faults")
    for arg, why in pairs { ["faults.Request"] = "'faults.Request' is a message, not a method",
                            ["faults.Request/Echo"] = "'faults.Request' is a message, not a service",
                            ["faults.Request.text"] = "'faults.Request.text' is a field, not a method",
                            ["faults.Nope"] = "no service 'faults' or 'faults.Nope' in the schema (its services: "
                              .. "faults.Faults)" } do
      out, err, code = call("TARGET " .. arg)
      assert.are.equal(1, code, arg)
      assert.are.equal("", out)
      assert.are.equal("protocall call: " .. why .. (why:find("^no") and "" or ": pkg.Service/Method expected")
        .. "\n", err)
    end
    -- an empty descriptor set
    out, err, code = run(BIN .. " call -plaintext -protoset /dev/null 127.0.0.1:1 faults.Faults/Echo")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: no service 'faults.Faults' in the schema: it has no service (-protoset "
      .. "/dev/null holds no file: an empty descriptor set)\n", err)
    local empty = write_tmp("")
    out, err, code = run(BIN .. " call -plaintext -protoset /dev/null -protoset " .. empty .. " 127.0.0.1:1 t.S/M")
    os.remove(empty)
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: no service 't.S' in the schema: it has no service (-protoset /dev/null, "
      .. empty .. " hold no file: empty descriptor sets)\n", err)
  end)

  it("says a unary or server-streaming call's request document is empty, or several", function()
    for _, case in ipairs {
      { "-d @ TARGET faults.Faults/Echo", "", "the request document is empty (standard input): give a JSON "
        .. "object, {} for an empty message" },
      { "-d ' ' TARGET faults.Faults/Echo", nil, "the request document is empty (-d): give a JSON object, {} for "
        .. "an empty message" },
      { "-d @ TARGET faults.Faults/Echo", '{"text": "a"}\n{"text": "b"}', "faults.Faults.Echo takes one request "
        .. "document (a unary method), standard input holds 2" },
      { [[-d '{"text": "a"} {} {}' TARGET faults.Faults/Echo]], nil, "faults.Faults.Echo takes one request "
        .. "document (a unary method), -d holds 3" },
      { [[-d '{} {}' TARGET faults.Faults/Stream]], nil, "faults.Faults.Stream takes one request document (a "
        .. "server-streaming method), -d holds 2" },
    } do
      local out, err, code = call(case[1], case[2])
      assert.are.equal(1, code, case[1])
      assert.are.equal("", out)
      assert.are.equal("protocall call: request: " .. case[3] .. "\n", err)
    end
    local file = write_tmp("\n")
    local _, err = call("-d @" .. file .. " TARGET faults.Faults/Echo")
    os.remove(file)
    assert.are.equal("protocall call: -d @" .. file .. ": request: the request document is empty: give a JSON "
      .. "object, {} for an empty message\n", err)
  end)

  it("reads -d @FILE from a pipe, bash's -d @<(cmd), a late writer's too", function()
    local cmd = BIN .. " call -plaintext " .. FAULTS .. " -d @<(%s) 127.0.0.1:" .. server.port .. " faults.Faults/%s"
    for _, case in ipairs {
      { [[echo '{"text": "piped"}']], "Echo", '{\n  "text": "piped",\n  "attempts": 1\n}\n' },
      { [[sleep 0.3; echo '{"text": "late"}']], "Echo", '{\n  "text": "late",\n  "attempts": 1\n}\n' },
      { [[echo '{"text": "a"}'; sleep 0.3; echo '{"text": "b"}']], "Record",
        '{\n  "text": "a,b",\n  "attempts": 2\n}\n' },
    } do
      local line = cmd:format(case[1], case[2])
      local out, err, code = run("bash -c " .. ("%q"):format(line))
      assert.are.equal(0, code, line .. ": " .. err)
      assert.are.equal(case[3], out)
    end
  end)

  it("bounds the wait for a FIFO's writer by -max-time, and reads one that comes", function()
    local fifo = os.tmpname()
    os.remove(fifo)
    assert(os.execute("mkfifo " .. fifo))
    local out, err, code = call("-max-time 1 -d @" .. fifo .. " TARGET faults.Faults/Echo")
    assert.are.equal(64 + 4, code, err)
    assert.are.equal("", out)
    assert.are.equal("ERROR: code = DEADLINE_EXCEEDED, message = deadline exceeded waiting for FIFO '" .. fifo
      .. "' (-max-time 1)\n", err)
    out, err, code = call("-max-time 5 -d @" .. fifo .. [[ TARGET faults.Faults/Echo & sleep 0.3; ]]
      .. [[echo '{"text": "fifo"}' > ]] .. fifo .. "; wait $!")
    os.remove(fifo)
    assert.are.equal(0, code, err)
    assert.are.equal('{\n  "text": "fifo",\n  "attempts": 1\n}\n', out)
  end)

  it("streams every JSON document of -d to a client stream, and both ways on a bidirectional one", function()
    local out, err, code = call("-d @ TARGET faults.Faults/Record", '{"text": "a"}\n{"text": "b"} {"text": "c"}')
    assert.are.equal(0, code, err)
    assert.are.equal('{\n  "text": "a,b,c",\n  "attempts": 3\n}\n', out)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/talk.proto", "wb"))
    f:write('syntax = "proto3"; package faults; import "grpc/faults.proto";\n'
      .. "service Talk { rpc Chat(stream Request) returns (stream Reply); }\n")
    f:close()
    out, err, code = run(BIN .. " call -plaintext -format text -I spec/fixtures/protos -I " .. dir
      .. " -proto talk.proto -d @ 127.0.0.1:" .. server.port .. " faults.Talk/Chat", '{"text": "x"}{"text": "y"}')
    os.execute("rm -rf " .. dir)
    assert.are.equal(0, code, err)
    assert.are.equal('text: "x"\nindex: 1\n\ntext: "y"\nindex: 2\n', out)
    out, err, code = call("-d '{\"text\": 1}' TARGET faults.Faults/Record")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("^protocall call: request 1: %$%.text: ", err)
  end)

  it("sends each bare JSON value of -d as a message of a stream (the JSON of wrapper types)", function()
    -- faults.Talk/Chat answers each request's field 1 (a string) as field 1
    -- of its reply: google.protobuf.StringValue both ways
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/talk.proto", "wb"))
    f:write('syntax = "proto3"; package faults; import "google/protobuf/wrappers.proto";\n'
      .. "service Talk { rpc Chat(stream google.protobuf.StringValue)"
      .. " returns (stream google.protobuf.StringValue); }\n")
    f:close()
    local function chat(data)
      return run(BIN .. " call -plaintext -I " .. dir .. " -proto talk.proto -d @ 127.0.0.1:" .. server.port
        .. " faults.Talk/Chat", data)
    end
    local out, err, code = chat('"x" "y"\n"z""w"')
    assert.are.equal(0, code, err)
    assert.are.equal('"x"\n"y"\n"z"\n"w"\n', out)
    out, err, code = chat('"x" nope')
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: JSON value expected at offset 4\n", err)
    out, err, code = chat('"x" "y')
    os.execute("rm -rf " .. dir)
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: the string at offset 4 is not closed\n", err)
  end)
end)

describe("protocall call to dns:, ipv4: and ipv6: targets", function()
  local FAULTS = "-I spec/fixtures/protos/grpc -proto faults.proto"
  local server, dns, zone_file
  setup(function()
    server = helper.spawn("grpc", 0)
    zone_file = write_tmp('{"svc.test": {"ttl": 300, "A": ["127.0.0.1"]}, "_grpc._tcp.svc.test": '
      .. '{"ttl": 300, "SRV": [[0, 1, ' .. server.port .. ', "svc.test"]]}}')
    dns = helper.spawn_command("/usr/bin/python3 spec/dns_server.py " .. zone_file, "dns_server.py")
  end)
  teardown(function()
    helper.stop(dns)
    helper.stop(server)
    os.remove(zone_file)
  end)

  it("passes each target to pc.grpc as it is, with -plaintext, its scheme in any case", function()
    local ns = "dns://127.0.0.1:" .. dns.port .. "/"
    for _, target in ipairs { ns .. "svc.test:" .. server.port, ns .. "_grpc._tcp.svc.test",
                              "ipv4:127.0.0.1:" .. server.port, "dns:///127.0.0.1:" .. server.port,
                              "DNS:///127.0.0.1:" .. server.port, "IPv4:127.0.0.1:" .. server.port,
                              "HTTP://127.0.0.1:" .. server.port, "Http://127.0.0.1:" .. server.port } do
      local out, err, code = run(BIN .. " call -plaintext " .. FAULTS .. [[ -d '{"text": "hi"}' ]] .. target
        .. " faults.Faults/Echo")
      assert.are.equal(0, code, target .. ": " .. err)
      assert.matches('"text": "hi"', out, 1, true)
    end
  end)

  it("refuses them without -plaintext (pc.grpc has TLS for https:// only)", function()
    for _, target in ipairs { "dns:///svc.test:1", "ipv4:127.0.0.1:1", "ipv6:[::1]:1", "unix:/tmp/x", "Unix:/tmp/x",
                              "UNIX-ABSTRACT:x" } do
      local out, err, code = run(BIN .. " call " .. FAULTS .. " " .. target .. " faults.Faults/Echo")
      assert.are.equal(2, code, target)
      assert.are.equal("", out)
      assert.matches("^protocall call: a [%l%d-]+: TARGET is h2c: give %-plaintext %(for TLS, https://host:port%)\n",
        err)
    end
  end)

  it("passes an xds: target to pc.grpc as it is, in call, list, describe and gateway", function()
    local bootstrap = [['{"xds_servers": [{"server_uri": "127.0.0.1:1", "channel_creds": [{"type": "insecure"}]}]}']]
    local env = "env -u GRPC_XDS_BOOTSTRAP GRPC_XDS_BOOTSTRAP_CONFIG=" .. bootstrap .. " "
    for _, cmd in ipairs { "call -plaintext -max-time 1 " .. FAULTS .. [[ -d '{"text": "hi"}' xds:///x ]]
                           .. "faults.Faults/Echo", "list -plaintext -max-time 1 xds:///x",
                           "describe -plaintext -max-time 1 xds:///x faults.Faults",
                           "gateway -plaintext -max-time 1 -listen 127.0.0.1:0 xds:///x" } do
      local out, err, code = run(env .. BIN .. " " .. cmd)
      assert.are_not.equal(0, code, cmd)
      assert.are.equal("", out)
      assert.matches("xds:///x: deadline exceeded while waiting for listener x (LDS)", err, 1, true)
    end
    local _, err, code = run(env .. BIN .. " call -max-time 1 " .. FAULTS .. " xds:///x faults.Faults/Echo")
    assert.are.equal(2, code)
    assert.matches("^protocall call: a xds: TARGET is h2c: give %-plaintext", err)
  end)

  it("names an unknown scheme as TARGET gives it", function()
    for _, cmd in ipairs { "call -plaintext " .. FAULTS .. " foo:///bar faults.Faults/Echo", "call Foo://bar x.S/M",
                           "list -plaintext foo:///bar", "describe foo:///bar x.S",
                           "gateway -plaintext -listen 127.0.0.1:0 foo:///bar" } do
      local out, err, code = run(BIN .. " " .. cmd)
      assert.are.equal(1, code, cmd)
      assert.are.equal("", out)
      assert.matches("^protocall %a+: " .. (cmd:find("^gateway") and "UPSTREAM" or "TARGET")
        .. " '[fF]oo:/+bar': unknown scheme '[fF]oo:' %(host:port, http://, https://, "
        .. "dns:, ipv4:, ipv6:, unix:, unix%-abstract: or xds: expected%)\n$", err)
    end
  end)

  it("says a name before ':/' is neither host:port nor a scheme", function()
    for _, c in ipairs { { "call localhost:/x x.S/M", "call", "localhost", "/x" },
                         { "list -plaintext my.host:/a/b", "list", "my.host", "/a/b" },
                         { "describe foo:/bar x.S", "describe", "foo", "/bar" } } do
      local out, err, code = run(BIN .. " " .. c[1])
      assert.are.equal(1, code, c[1])
      assert.are.equal("", out)
      assert.are.equal("protocall " .. c[2] .. ": TARGET '" .. c[3] .. ":" .. c[4] .. "': '" .. c[4]
        .. "' is no port, and '" .. c[3] .. ":' no scheme (host:port, http://, https://, dns:, ipv4:, ipv6:, unix:, "
        .. "unix-abstract: or xds: expected)\n", err)
    end
    -- http:/ or https:/ lacks a slash; a huge TARGET is quoted cut at 80 bytes
    local out, err, code = run(BIN .. " call -plaintext http:/127.0.0.1:1 x.S/M")
    assert.are.same({ "", "protocall call: TARGET 'http:/127.0.0.1:1': 'http:' takes '//' (http://host:port)\n", 1 },
      { out, err, code })
    out, err, code = run(BIN .. " call localhost:/" .. ("x"):rep(5000) .. " x.S/M")
    assert.are.same({ "", "protocall call: TARGET 'localhost:/" .. ("x"):rep(69) .. "...': '/" .. ("x"):rep(79)
      .. "...' is no port, and 'localhost:' no scheme (host:port, http://, https://, dns:, ipv4:, ipv6:, unix:, "
      .. "unix-abstract: or xds: expected)\n", 1 }, { out, err, code })
  end)
end)

describe("protocall describe and list", function()
  it("prints services, methods and messages as .proto source", function()
    local out, err, code = run(BIN .. " describe " .. ROUTE .. " demo.Router")
    assert.are.equal(0, code, err)
    assert.are.equal(table.concat({
      "demo.Router is a service:",
      "service Router {",
      "  rpc Measure ( .demo.Route ) returns ( .demo.Distance );",
      "  rpc Walk ( .demo.Route ) returns ( stream .demo.Point );",
      "  rpc Record ( stream .demo.Point ) returns ( .demo.Distance );",
      "  rpc Follow ( stream .demo.Point ) returns ( stream .demo.Point );",
      "}", "" }, "\n"), out)
    out, err, code = run(BIN .. " describe " .. ROUTE .. " demo.Router.Walk")
    assert.are.equal(0, code, err)
    assert.are.equal("demo.Router.Walk is a method:\nrpc Walk ( .demo.Route ) returns ( stream .demo.Point );\n", out)
    out, err, code = run(BIN .. " describe " .. ROUTE .. " .demo.Route")
    assert.are.equal(0, code, err)
    assert.are.equal("demo.Route is a message:\nmessage Route {\n  string name = 1;\n"
      .. "  repeated .demo.Point points = 2;\n  map<string, string> labels = 3;\n}\n", out)
    out, err, code = run(BIN .. " describe " .. ROUTE .. " demo.Nothing")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall describe: Symbol not found: demo.Nothing\n", err)
  end)

  it("prints maps, oneofs, proto3 optional, nested types, enums and options", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert.is_true(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/k.proto", "wb"))
    f:write([[
syntax = "proto3";
package k;
message M {
  map<string, int64> counts = 1;
  oneof pick { string a = 2; M b = 3; }
  optional int32 c = 4;
  repeated int32 r = 5 [packed = false];
  enum E { E0 = 0; E1 = 1; }
  E e = 6;
  message N { bool on = 1; }
  N n = 7 [deprecated = true];
}
]])
    f:close()
    local out, err, code = run(BIN .. " describe -I " .. dir .. " -proto k.proto k.M")
    os.execute("rm -rf " .. dir)
    assert.are.equal(0, code, err)
    assert.are.equal(table.concat({
      "k.M is a message:",
      "message M {",
      "  map<string, int64> counts = 1;",
      "  oneof pick {",
      "    string a = 2;",
      "    .k.M b = 3;",
      "  }",
      "  optional int32 c = 4;",
      "  repeated int32 r = 5 [packed = false];",
      "  .k.M.E e = 6;",
      "  .k.M.N n = 7 [deprecated = true];",
      "  message N {",
      "    bool on = 1;",
      "  }",
      "  enum E {",
      "    E0 = 0;",
      "    E1 = 1;",
      "  }",
      "}", "" }, "\n"), out)
  end)

  it("prints a proto3 optional field's synthetic oneof as that field", function()
    -- (its oneof block was printed empty: `oneof _c { }`)
    local dir = os.tmpname()
    os.remove(dir)
    assert.is_true(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/o.proto", "wb"))
    f:write('syntax = "proto3"; package o; message N { optional int32 c = 1; oneof k { string s = 2; } }\n')
    f:close()
    local out, err, code = run(BIN .. " describe -I " .. dir .. " -proto o.proto o.N._c")
    local out2, err2, code2 = run(BIN .. " describe -I " .. dir .. " -proto o.proto o.N.k")
    os.execute("rm -rf " .. dir)
    assert.are.equal(0, code, err)
    assert.are.equal("o.N._c is a synthetic one-of, of proto3 optional field c:\noptional int32 c = 1;\n", out)
    assert.are.equal(0, code2, err2)
    assert.are.equal("o.N.k is a one-of:\noneof k {\n  string s = 2;\n}\n", out2)
  end)

  it("prints extensions, reserved numbers and names, groups, enum values and oneofs", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert.is_true(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/g.proto", "wb"))
    f:write([[
syntax = "proto2";
package g;
import "google/protobuf/descriptor.proto";
message M {
  optional group Item = 1 [deprecated = true] { required int32 id = 2; }
  oneof pick { string a = 6; group Alt = 7 { optional bool on = 8; } }
  map<string, int32> counts = 9;
  reserved 10, 12 to 14, 100 to max;
  reserved "old", "gone";
  extensions 50 to 60;
  extend M { optional int32 here = 50; }
  enum E { E0 = 0; E1 = 1 [deprecated = true]; reserved 5, 7 to 9, 20 to max; reserved "E2"; }
}
extend google.protobuf.FieldOptions {
  optional string tag = 50001;
  optional group Meta = 50002 { optional int32 v = 1; }
}
]])
    f:close()
    local got = {}
    for _, sym in ipairs { "g.M", "g.tag", "g.meta", "g.M.here", "g.M.E1", "g.M.E.E1", "g.M.pick", "g.M.item",
      "g.M.Item", "g.M.Alt", "g.M.CountsEntry", "g.Meta" } do
      got[sym] = { run(BIN .. " describe -I " .. dir .. " -proto g.proto " .. sym) }
    end
    local out, err, code = run(BIN .. " describe -proto google/api/annotations.proto google.api.http")
    os.execute("rm -rf " .. dir)
    for sym, r in pairs(got) do assert.are.equal(0, r[3], sym .. ": " .. r[2]) end
    assert.are.equal(table.concat({
      "g.M is a message:",
      "message M {",
      "  optional group Item = 1 [deprecated = true] {",
      "    required int32 id = 2;",
      "  }",
      "  oneof pick {",
      "    string a = 6;",
      "    group Alt = 7 {",
      "      optional bool on = 8;",
      "    }",
      "  }",
      "  map<string, int32> counts = 9;",
      "  enum E {",
      "    E0 = 0;",
      "    E1 = 1 [deprecated = true];",
      "    reserved 5, 7 to 9, 20 to max;",
      '    reserved "E2";',
      "  }",
      "  extensions 50 to 60;",
      "  reserved 10, 12 to 14, 100 to max;",
      '  reserved "old", "gone";',
      "  extend .g.M {",
      "    optional int32 here = 50;",
      "  }",
      "}", "" }, "\n"), got["g.M"][1])
    assert.are.equal(
      "g.tag is an extension:\nextend .google.protobuf.FieldOptions {\n  optional string tag = 50001;\n}\n",
      got["g.tag"][1])
    assert.are.equal("g.meta is a group field:\nextend .google.protobuf.FieldOptions {\n"
      .. "  optional group Meta = 50002 {\n    optional int32 v = 1;\n  }\n}\n", got["g.meta"][1])
    assert.are.equal("g.M.here is an extension:\nextend .g.M {\n  optional int32 here = 50;\n}\n", got["g.M.here"][1])
    assert.are.equal("g.M.E1 is an enum value:\nE1 = 1 [deprecated = true];\n", got["g.M.E1"][1])
    assert.are.equal("g.M.E.E1 is an enum value:\nE1 = 1 [deprecated = true];\n", got["g.M.E.E1"][1])
    assert.are.equal("g.M.pick is a one-of:\noneof pick {\n  string a = 6;\n  group Alt = 7 {\n"
      .. "    optional bool on = 8;\n  }\n}\n", got["g.M.pick"][1])
    assert.are.equal("g.M.item is a group field:\noptional group Item = 1 [deprecated = true] {\n"
      .. "  required int32 id = 2;\n}\n", got["g.M.item"][1])
    -- a group's type and a map's entry type are described as their field, in grpcurl's words
    -- (a group extension's type, g.Meta, stays a message there: its parent is the file)
    assert.are.equal("g.M.Item is the type of a group field:\noptional group Item = 1 [deprecated = true] {\n"
      .. "  required int32 id = 2;\n}\n", got["g.M.Item"][1])
    assert.are.equal("g.M.Alt is the type of a group field:\ngroup Alt = 7 {\n  optional bool on = 8;\n}\n",
      got["g.M.Alt"][1])
    assert.are.equal("g.M.CountsEntry is the entry type for a map field:\nmap<string, int32> counts = 9;\n",
      got["g.M.CountsEntry"][1])
    assert.are.equal("g.Meta is a message:\nmessage Meta {\n  optional int32 v = 1;\n}\n", got["g.Meta"][1])
    assert.are.equal(0, code, err)
    assert.are.equal("google.api.http is an extension:\nextend .google.protobuf.MethodOptions {\n"
      .. "  .google.api.HttpRule http = 72295728;\n}\n", out)
  end)

  -- A file that sets options of every kind, in a new folder: the folder.
  local OPTIONS_PROTO = [[
syntax = "proto3";
package d;
import "google/api/annotations.proto";
import "buf/validate/validate.proto";
message P {
  option deprecated = true;
  int32 x = 1 [deprecated = true, json_name = "xx"];
  repeated int32 r = 2 [packed = false];
  string email = 3 [(buf.validate.field).string.email = true, (buf.validate.field).string.min_len = 3];
  string snake_case = 4 [json_name = "snakeCase"];
  oneof o {
    option (buf.validate.oneof).required = true;
    int32 a = 5;
    string b = 6;
  }
}
enum E { option allow_alias = true; E0 = 0; E1 = 1 [deprecated = true]; E2 = 1; }
service S {
  option deprecated = true;
  rpc M(P) returns (P) {
    option (google.api.http) = { get: "/v1/p/{x}" additional_bindings { post: "/v1/p" body: "*" } };
    option deprecated = true;
  }
}
]]
  local function options_dir()
    local dir = os.tmpname()
    os.remove(dir)
    assert.is_true(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/d.proto", "wb"))
    f:write(OPTIONS_PROTO)
    f:close()
    return dir
  end
  local OPTIONS_DESCRIBED = {
    ["d.S"] = table.concat({
      "d.S is a service:",
      "service S {",
      "  option deprecated = true;",
      "  rpc M ( .d.P ) returns ( .d.P ) {",
      "    option deprecated = true;",
      '    option (.google.api.http) = { get: "/v1/p/{x}" additional_bindings { post: "/v1/p" body: "*" } };',
      "  }",
      "}", "" }, "\n"),
    ["d.P"] = table.concat({
      "d.P is a message:",
      "message P {",
      "  option deprecated = true;",
      '  int32 x = 1 [json_name = "xx", deprecated = true];',
      "  repeated int32 r = 2 [packed = false];",
      "  string email = 3 [(.buf.validate.field) = { string { min_len: 3 email: true } }];",
      "  string snake_case = 4;",
      "  oneof o {",
      "    option (.buf.validate.oneof) = { required: true };",
      "    int32 a = 5;",
      "    string b = 6;",
      "  }",
      "}", "" }, "\n"),
    ["d.E"] = table.concat({
      "d.E is an enum:",
      "enum E {",
      "  option allow_alias = true;",
      "  E0 = 0;",
      "  E1 = 1 [deprecated = true];",
      "  E2 = 1;",
      "}", "" }, "\n"),
  }

  it("prints the options of services, methods, messages, fields, oneofs, enums and enum values", function()
    local dir = options_dir()
    local got = {}
    for _, sym in ipairs { "d.S", "d.P", "d.E", "d.S.M", "d.P.x" } do
      got[sym] = { run(BIN .. " describe -I " .. dir .. " -proto d.proto " .. sym) }
    end
    os.execute("rm -rf " .. dir)
    for sym, want in pairs(OPTIONS_DESCRIBED) do
      assert.are.equal(0, got[sym][3], got[sym][2])
      assert.are.equal(want, got[sym][1])
    end
    assert.are.equal("d.S.M is a method:\nrpc M ( .d.P ) returns ( .d.P ) {\n  option deprecated = true;\n"
      .. '  option (.google.api.http) = { get: "/v1/p/{x}" additional_bindings { post: "/v1/p" body: "*" } };\n}\n',
      got["d.S.M"][1])
    assert.are.equal('d.P.x is a field:\nint32 x = 1 [json_name = "xx", deprecated = true];\n', got["d.P.x"][1])
  end)

  it("prints string and bytes defaults C-escaped, as protoc writes them", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert.is_true(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/df.proto", "wb"))
    f:write('syntax = "proto2"; package df;\nmessage M { optional string s = 1 [default = "a\\nb\\"c"]; '
      .. 'optional bytes b = 2 [default = "\\001x\\\\"]; }\n')
    f:close()
    local out, err, code = run(BIN .. " describe -I " .. dir .. " -proto df.proto df.M")
    os.execute("rm -rf " .. dir)
    assert.are.equal(0, code, err)
    assert.are.equal('df.M is a message:\nmessage M {\n  optional string s = 1 [default = "a\\nb\\"c"];\n'
      .. '  optional bytes b = 2 [default = "\\001x\\\\"];\n}\n', out)
  end)

  it("prints a descriptor set's defaults as one literal each, whatever bytes they hold", function()
    local pc = require "protocall"
    local pool = pc.pool()
    assert(pool:load('syntax = "proto2"; package hd; message M { optional bytes b = 1; optional string s = 2; }',
      { name = "hd.proto" }))
    local fd = pool:file_descriptor("hd.proto")
    -- not as protoc writes them: a raw quote and line break in the bytes
    -- default (protoc C-escapes it), bytes past ASCII in the string's;
    -- escapes read as protoc 3.21 reads them: `\x` without a hex digit and
    -- `\q` stand for nothing, `\x414` for its low 8 bits
    fd.message_type[1].field[1].default_value = 'a"]; x\nmessage Fake {\\0\\101\\x42\\x\\q\\x414\\'
    fd.message_type[1].field[2].default_value = "caf\195\169 \255"
    local set = write_tmp(pc.encode(pool:type("google.protobuf.FileDescriptorSet") { file = { fd } }))
    local out, err, code = run(BIN .. " describe -protoset " .. set .. " hd.M")
    os.remove(set)
    assert.are.equal(0, code, err)
    assert.are.equal('hd.M is a message:\nmessage M {\n'
      .. '  optional bytes b = 1 [default = "a\\"]; x\\nmessage Fake {\\000AB\\024"];\n'
      .. '  optional string s = 2 [default = "caf\\303\\251 \\377"];\n}\n', out)
  end)

  it("prints a group or map field as one only when its type is its own nested message by full name and, for a "
    .. "group, its name lower-cased (protoc's rule): a descriptor set's other group field is a plain field", function()
    local pc = require "protocall"
    local pool = pc.pool()
    assert(pool:load([[syntax = "proto2"; package x;
      message O { message G { optional int32 other_field = 1; } map<string, int32> labels = 1; }
      message D {
        optional group G = 1 { optional int32 inner = 2; }
        map<string, int32> labels = 4;
        repeated O.G many = 5;
        optional group Item = 6 { optional int32 v = 7; }
      }]], { name = "x.proto" }))
    local fd = pool:file_descriptor("x.proto")
    local d = fd.message_type[2]
    d.field[1].type_name = ".x.O.G" -- a group field whose type is another G
    d.field[3].type_name = ".x.O.LabelsEntry" -- another message's entry of the same name
    d.field[4].name, d.field[4].json_name = "thing", "thing" -- not Item's name lower-cased
    local set = write_tmp(pc.encode(pool:type("google.protobuf.FileDescriptorSet") { file = { fd } }))
    local out, err, code = run(BIN .. " describe -protoset " .. set .. " x.D")
    local out2, err2, code2 = run(BIN .. " describe -protoset " .. set .. " x.D.G")
    os.remove(set)
    assert.are.equal(0, code, err)
    assert.are.equal(table.concat({
      "x.D is a message:",
      "message D {",
      "  optional .x.O.G g = 1;",
      "  map<string, int32> labels = 4;",
      "  repeated .x.O.LabelsEntry many = 5;",
      "  optional .x.D.Item thing = 6;",
      "  message G {",
      "    optional int32 inner = 2;",
      "  }",
      "  message Item {",
      "    optional int32 v = 7;",
      "  }",
      "}", "" }, "\n"), out)
    assert.are.equal(0, code2, err2)
    assert.are.equal("x.D.G is a message:\nmessage G {\n  optional int32 inner = 2;\n}\n", out2)
  end)

  it("quotes a descriptor set's default that does not parse escaped, a line break and all", function()
    local pc = require "protocall"
    local pool = pc.pool()
    assert(pool:load('syntax = "proto2"; package bd; enum E { A = 0; } message M { optional int32 i = 1; '
      .. "optional E e = 2; }", { name = "bd.proto" }))
    local got = {}
    for i = 1, 2 do
      local fd = pool:file_descriptor("bd.proto")
      fd.message_type[1].field[i].default_value = "1x\nmessage Fake {\27[31m"
      local set = write_tmp(pc.encode(pool:type("google.protobuf.FileDescriptorSet") { file = { fd } }))
      got[i] = { run(BIN .. " describe -protoset " .. set .. " bd.M") }
      os.remove(set)
      got[i].set = set
    end
    assert.are.equal(1, got[1][3])
    assert.are.equal("protocall describe: " .. got[1].set .. ': bd.M.i: bad default value "1x\\10message Fake '
      .. '{\\27[31m"\n', got[1][2])
    assert.are.equal(1, got[2][3])
    assert.are.equal("protocall describe: " .. got[2].set .. ': bd.M.e: default "1x\\10message Fake {\\27[31m" '
      .. "is not a value of the enum\n", got[2][2])
  end)

  it("prints an option whose extension the schema lacks by its number", function()
    local pc = require "protocall"
    local pool = pc.pool()
    assert(pool:load([[
syntax = "proto3";
package u;
import "google/protobuf/descriptor.proto";
extend google.protobuf.MethodOptions { repeated int32 tags = 50002; }
message E {}
service S { rpc M(E) returns (E) { option (tags) = 1; option (tags) = 2; option deprecated = true; } }
]], { name = "u.proto" }))
    local fd = pool:file_descriptor("u.proto")
    fd.extension = {} -- a set whose file uses an extension it no longer declares
    local set = write_tmp(pc.encode(pool:type("google.protobuf.FileDescriptorSet") { file = { fd } }))
    local out, err, code = run(BIN .. " describe -protoset " .. set .. " u.S.M")
    os.remove(set)
    assert.are.equal(0, code, err)
    assert.are.equal("u.S.M is a method:\nrpc M ( .u.E ) returns ( .u.E ) {\n  option deprecated = true;\n"
      .. "  option (50002) = 1;\n  option (50002) = 2;\n}\n", out)
  end)

  it("takes a -proto file by its path within an -I path, as protoc does", function()
    local dir = options_dir()
    local base = dir:match("^(.*)/[^/]*$")
    local out, err, code = run(BIN .. " describe -I " .. dir .. " -proto " .. dir .. "/d.proto d.E")
    local out2, err2, code2 = run("cd " .. base .. " && " .. BIN .. " list -I ./" .. dir:match("[^/]*$")
      .. "/ -proto " .. dir:match("[^/]*$") .. "/d.proto")
    local out3, err3, code3 = run(BIN .. " list -I " .. base .. " -proto " .. dir .. "/d.proto")
    local out4, err4, code4 = run(BIN .. " list -I " .. dir .. "/sub -proto " .. dir .. "/d.proto")
    os.execute("rm -rf " .. dir)
    assert.are.equal(0, code, err)
    assert.are.equal(OPTIONS_DESCRIBED["d.E"], out)
    assert.are.equal(0, code2, err2)
    assert.are.equal("d.S\n", out2)
    assert.are.equal(0, code3, err3)
    assert.are.equal("d.S\n", out3)
    assert.are.equal(1, code4)
    assert.are.equal("", out4)
    assert.are.equal("protocall list: " .. dir .. "/d.proto: File does not reside within any path specified using "
      .. "-I (or -import-path); an -I must be an exact prefix of its path (both absolute or both relative).\n", err4)
  end)

  it("lists services and a service's methods", function()
    local out, err, code = run(BIN .. " list " .. ROUTE)
    assert.are.equal(0, code, err)
    assert.are.equal("demo.Router\n", out)
    -- a target (as grpcurl users give it) is not needed with -proto: not asked
    for _, target in ipairs { "127.0.0.1:1", "http://127.0.0.1:1", "dns:///localhost:1" } do
      out, err, code = run(BIN .. " list -plaintext " .. ROUTE .. " " .. target)
      assert.are.equal(0, code, err)
      assert.are.equal("demo.Router\n", out)
    end
    out, err, code = run(BIN .. " list -plaintext " .. ROUTE .. " 127.0.0.1:1 demo.Router")
    assert.are.equal(0, code, err)
    assert.are.equal("demo.Router.Measure\ndemo.Router.Walk\ndemo.Router.Record\ndemo.Router.Follow\n", out)
    out, err, code = run(BIN .. " describe -plaintext " .. ROUTE .. " 127.0.0.1:1 demo.Point")
    assert.are.equal(0, code, err)
    assert.matches("^demo.Point is a message:\n", out)
    out, err, code = run(BIN .. " list " .. ROUTE .. " demo.Router")
    assert.are.equal(0, code, err)
    assert.are.equal("demo.Router.Measure\ndemo.Router.Walk\ndemo.Router.Record\ndemo.Router.Follow\n", out)
    out, err, code = run(BIN .. " list " .. ROUTE .. " demo.Nope")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall list: Service not found: demo.Nope\n", err)
  end)
end)

describe("protocall scripts", function()
  it("runs a script named like a command when that file exists, and `run FILE` always", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert.is_true(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/decode", "wb"))
    f:write("print('script', ...)")
    f:close()
    local bin = BIN:sub(1, 1) == "/" and BIN or os.getenv("PWD") .. "/" .. BIN
    local out, err, code = run("cd " .. dir .. " && " .. bin .. " decode a b")
    assert.are.equal(0, code, err)
    assert.are.equal("script\ta\tb\n", out)
    -- a directory named like a command does not replace it
    assert.is_true(os.execute("mkdir " .. dir .. "/help " .. dir .. "/run"))
    out, err, code = run("cd " .. dir .. " && " .. bin .. " help")
    assert.are.equal(0, code, err)
    assert.matches("`protocall help COMMAND` shows", out, 1, true)
    out, err, code = run("cd " .. dir .. " && " .. bin .. " run")
    assert.are.equal("", out)
    assert.are.equal(2, code)
    assert.matches(" run: a script expected\n", err, 1, true) -- the usage, not the directory run as a script
    local script = write_tmp("print('ran', arg[0], ...)")
    out, err, code = run(BIN .. " run " .. script .. " x")
    os.remove(script)
    os.execute("rm -rf " .. dir)
    assert.are.equal(0, code, err)
    assert.are.equal("ran\t" .. script .. "\tx\n", out)
  end)

  it("prints a call's error details with every line of a multi-line one indented", function()
    local script = write_tmp([[
      local pc = require "protocall"
      local BadRequest = pc.type("google.rpc.BadRequest")
      local err = pc.Error { code = "INVALID_ARGUMENT", message = "no", details = {
        BadRequest { field_violations = { { field = "a", description = "x" } } } } }
      os.exit(require("protocall.cli.common").print_error(err))
    ]])
    local out, err, code = run(BIN .. " run " .. script)
    os.remove(script)
    assert.are.equal(64 + 3, code, err)
    assert.are.equal("", out)
    assert.are.equal('ERROR: code = INVALID_ARGUMENT, message = no\n  details:\n    field_violations {\n'
      .. '      field: "a"\n      description: "x"\n    }\n', err)
  end)

  it("serve prints a handler's failure with its position on stderr, the caller getting UNKNOWN without it", function()
    local script = write_tmp([[
      local pc = require "protocall"
      pc.load [=[syntax = "proto3"; package boom; message M { int32 x = 1; } service S { rpc Get(M) returns (M); }]=]
      return { ["boom.S"] = { Get = function(m) local t; return t.x + m.x end } }
    ]])
    os.rename(script, script .. ".lua") -- (a .lua file's position is what the caller is not told)
    script = script .. ".lua"
    local errf, pidf = os.tmpname(), os.tmpname()
    os.execute("sh -c 'echo $$ > " .. pidf .. "; exec " .. BIN .. " serve -listen 127.0.0.1:0 " .. script
      .. "' 2>" .. errf .. " >/dev/null &")
    local port, log
    for _ = 1, 200 do
      local f = io.open(errf)
      log = f and f:read("a") or ""
      if f then f:close() end
      port = log:match("listening on 127%.0%.0%.1:(%d+)")
      if port then break end
      os.execute("sleep 0.05")
    end
    local out, err, code = "", "", nil
    if port then out, err, code = run(BIN .. " call -plaintext -d '{\"x\": 1}' 127.0.0.1:" .. port .. " boom.S/Get") end
    os.execute("sleep 0.2; kill $(cat " .. pidf .. ") 2>/dev/null")
    local f = io.open(errf)
    log = f and f:read("a") or ""
    if f then f:close() end
    os.remove(errf); os.remove(pidf); os.remove(script)
    assert(port, "protocall serve did not start: " .. log)
    assert.are.equal(64 + 2, code, err)
    assert.are.equal("", out)
    assert.are.equal("ERROR: code = UNKNOWN, message = boom.S.Get: unexpected error in the handler\n", err)
    assert.matches("\nprotocall serve: boom.S.Get: " .. script .. ":3: attempt to index a nil value (local 't')\n"
      .. "stack traceback:\n", log, 1, true)
    assert.matches(script .. ":3: in ", log, 1, true)
  end)

  it("prints a reconnection backoff without the wait_for_ready option the commands do not have", function()
    local script = write_tmp([[
      local pc = require "protocall"
      os.exit(require("protocall.cli.common").print_error(pc.Error { code = "UNAVAILABLE", message =
        "connect to h:1: refused (reconnection backoff: the next attempt in 0.8 s; a transport with"
        .. " wait_for_ready waits for it)" }))
    ]])
    local out, err, code = run(BIN .. " run " .. script)
    os.remove(script)
    assert.are.equal(64 + 14, code, err)
    assert.are.equal("", out)
    assert.are.equal("ERROR: code = UNAVAILABLE, message = connect to h:1: refused (reconnection backoff: the next"
      .. " attempt in 0.8 s)\n", err)
  end)
end)

describe("protocall list, describe and call by server reflection", function()
  local server, dir
  local PYTHON = "/usr/bin/python3"

  -- spec/reflection_server.py (python3-grpcio) on a free port, serving the
  -- reflection `versions` ("v1,v1alpha", "v1alpha" or "none").
  local function start(versions)
    return helper.spawn_command(PYTHON .. " spec/reflection_server.py 0 " .. dir .. " " .. versions,
      "reflection_server.py " .. versions)
  end

  setup(function()
    local pc = require "protocall"
    dir = os.tmpname()
    os.remove(dir)
    for _, v in ipairs { "v1", "v1alpha" } do
      local name = "grpc/reflection/" .. v .. "/reflection.proto"
      assert(os.execute("mkdir -p " .. dir .. "/grpc/reflection/" .. v))
      local f = assert(io.open(dir .. "/" .. name, "wb"))
      f:write(pc.builtin_source(name))
      f:close()
    end
    server = start("v1,v1alpha")
  end)
  teardown(function()
    helper.stop(server)
    os.execute("rm -rf " .. dir)
  end)

  local function cli(args, stdin, port)
    return run(BIN .. " " .. args:gsub("TARGET", "127.0.0.1:" .. (port or server.port)), stdin)
  end

  it("lists the services and a service's methods", function()
    local out, err, code = cli("list -plaintext TARGET")
    assert.are.equal(0, code, err)
    assert.are.equal("faults.Faults\nfaults.Talk\ngrpc.reflection.v1.ServerReflection\n"
      .. "grpc.reflection.v1alpha.ServerReflection\n", out)
    out, err, code = cli("list -plaintext TARGET faults.Talk")
    assert.are.equal(0, code, err)
    assert.are.equal("faults.Talk.Chat\n", out)
    out, err, code = cli("list -plaintext TARGET faults.Nope")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall list: Service not found: faults.Nope\n", err)
  end)

  it("refuses a bad -H key as a usage error (exit 2), naming no internal position", function()
    for _, cmd in ipairs { "list", "describe" } do
      local out, err, code = cli(cmd .. " -plaintext -H 'Bad Key: v' TARGET")
      assert.are.equal(2, code, err)
      assert.are.equal("", out)
      assert.matches("^protocall " .. cmd .. ": %-H 'Bad Key: v': metadata key 'bad key': only lowercase "
        .. "letters, digits, '_', '%-', '%.'\nusage: protocall " .. cmd, err)
      assert.is_nil(err:find("%.lua:%d+:"))
    end
  end)

  it("describes services, methods and messages as the local files describe them", function()
    for _, sym in ipairs { "faults.Faults", "faults.Talk.Chat", "faults.Request", "faults.Reply" } do
      local out, err, code = cli("describe -plaintext TARGET " .. sym)
      assert.are.equal(0, code, sym .. ": " .. err)
      local want = run(BIN .. " describe -I spec/fixtures/protos -proto grpc/faults.proto " .. sym)
      if sym ~= "faults.Talk.Chat" then assert.are.equal(want, out) end
      assert.matches("^" .. sym:gsub("%.", "%%.") .. " is a", out)
    end
    local out, err, code = cli("describe -plaintext TARGET")
    assert.are.equal(0, code, err)
    assert.matches("faults.Talk is a service:\nservice Talk {\n"
      .. "  rpc Chat ( stream .faults.Request ) returns ( stream .faults.Reply );\n}\n", out, 1, true)
    out, err, code = cli("describe -plaintext TARGET faults.Nope")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall describe: Symbol not found: faults.Nope\n", err)
  end)

  it("calls every call shape with the schema from reflection", function()
    local out, err, code = cli([[call -plaintext -d '{"text": "hi"}' TARGET faults.Faults/Echo]])
    assert.are.equal(0, code, err)
    assert.are.equal('{\n  "text": "hi",\n  "attempts": 1\n}\n', out)
    out, err, code = cli([[call -plaintext -format text -d '{"count": 2}' TARGET faults.Faults/Stream]])
    assert.are.equal(0, code, err)
    assert.are.equal("index: 1\nattempts: 1\n\nindex: 2\nattempts: 1\n", out)
    out, err, code = cli("call -plaintext -d @ TARGET faults.Faults/Record", '{"text": "a"} {"text": "b"}')
    assert.are.equal(0, code, err)
    assert.are.equal('{\n  "text": "a,b",\n  "attempts": 2\n}\n', out)
    out, err, code = cli("call -plaintext -format text -d @ TARGET faults.Talk/Chat", '{"text": "x"}{"text": "y"}')
    assert.are.equal(0, code, err)
    assert.are.equal('text: "x"\nindex: 1\n\ntext: "y"\nindex: 2\n', out)
    out, err, code = cli("call -plaintext TARGET nope.Svc/Echo")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: no service 'nope.Svc' on the server (its services: faults.Faults, "
      .. "faults.Talk, grpc.reflection.v1.ServerReflection, grpc.reflection.v1alpha.ServerReflection)\n", err)
    out, err, code = cli("call -plaintext TARGET faults.Nope")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("^protocall call: no service 'faults' or 'faults.Nope' on the server %(its services: ", err)
    out, err, code = cli("call -plaintext TARGET faults.Faults/Nope")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: faults.Faults has no method 'Nope' (its methods: Echo, FailThenSucceed, Sleep,"
      .. " Big, Metadata, Compressed, Pushback, Undecodable, Attempts, Hedge, HedgeStream, Stream, StreamThenFail,"
      .. " Record)\n", err)
    out, err, code = cli("call -plaintext TARGET faults.Request/Echo") -- a message, not a service
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: 'faults.Request' is a message, not a service: pkg.Service/Method expected\n",
      err)
    out, err, code = cli("call -plaintext TARGET faults.Request")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: 'faults.Request' is a message, not a method: pkg.Service/Method expected\n",
      err)
    -- a service without a method: said so, with its methods (was "Service not found: faults")
    out, err, code = cli("call -plaintext TARGET faults.Talk")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall call: 'faults.Talk' is a service: pkg.Service/Method expected %(its methods: Chat%)\n",
      err)
  end)

  it("falls back to v1alpha, and says so when the server has no reflection", function()
    local old = start("v1alpha")
    local out, err, code = cli("list -plaintext TARGET", nil, old.port)
    assert.are.equal(0, code, err)
    assert.are.equal("faults.Faults\nfaults.Talk\ngrpc.reflection.v1alpha.ServerReflection\n", out)
    out, err, code = cli([[call -plaintext -d '{"text": "old"}' TARGET faults.Faults/Echo]], nil, old.port)
    helper.stop(old)
    assert.are.equal(0, code, err)
    assert.matches('"text": "old"', out, 1, true)
    local none = start("none")
    for _, args in ipairs { "list -plaintext TARGET", "describe -plaintext TARGET faults.Faults",
      "call -plaintext TARGET faults.Faults/Echo" } do
      out, err, code = cli(args, nil, none.port)
      assert.are.equal(64 + 12, code, args)
      assert.are.equal("", out)
      assert.matches("^ERROR: code = UNIMPLEMENTED, message = the server has no reflection service %(.*%): "
        .. "give %-proto FILE or %-protoset FILE\n$", err)
    end
    helper.stop(none)
  end)

  it("fails a server that is down with the call's status", function()
    local out, err, code = run(BIN .. " list -plaintext 127.0.0.1:1")
    assert.are.equal(64 + 14, code)
    assert.are.equal("", out)
    assert.matches("^ERROR: code = UNAVAILABLE", err)
    out, err, code = run(BIN .. " call -plaintext 127.0.0.1:1 faults.Faults/Echo")
    assert.are.equal(64 + 14, code)
    assert.matches("^ERROR: code = UNAVAILABLE", err)
    assert.are.equal("", out)
    out, err, code = run(BIN .. " describe -plaintext 127.0.0.1:1 faults.Faults")
    assert.are.equal(64 + 14, code)
    assert.matches("^ERROR: code = UNAVAILABLE", err)
    assert.are.equal("", out)
  end)
end)

describe("protocall call connection flags", function()
  local FAULTS = "-I spec/fixtures/protos/grpc -proto faults.proto"
  local server
  setup(function() server = helper.spawn("grpc", 0) end)
  teardown(function() helper.stop(server) end)

  local function call(args, stdin)
    return run(BIN .. " call -plaintext " .. FAULTS .. " " .. args:gsub("TARGET", "127.0.0.1:" .. server.port), stdin)
  end

  it("-v prints the response headers and trailers to stderr, as grpcurl does", function()
    local out, err, code = call([[-v -H 'x-trace: abc' -H 'x-data-bin: aGk' TARGET faults.Faults/Metadata]])
    assert.are.equal(0, code, err)
    assert.matches('"value": "abc"', out, 1, true)
    assert.matches("^Response headers received:\nh%-x%-trace: abc\nh%-x%-data%-bin: aGk=?\n", err)
    assert.matches("\n\nResponse trailers received:\nt%-x%-trace: abc\nt%-x%-data%-bin: aGk=?\n"
      .. "1 response message in [%d.]+ s\n$", err)
    out, err, code = call([[-v -d '{"count": 2}' TARGET faults.Faults/Stream]])
    assert.are.equal(0, code, err)
    assert.are.equal('{\n  "index": 1,\n  "attempts": 1\n}\n{\n  "index": 2,\n  "attempts": 1\n}\n', out)
    assert.matches("Response trailers received:\n(empty)\n2 response messages", err, 1, true)
    -- a failure: the error's metadata (a trailers-only response: one header block, the
    -- trailers, as grpcurl shows it)
    out, err, code = call([[-v -d '{"failures": 5, "pushback": "7"}' TARGET faults.Faults/Pushback]])
    assert.are.equal(64 + 14, code)
    assert.are.equal("", out)
    assert.matches("^Response headers received:\n%(empty%)\n\nResponse trailers received:\n"
      .. "grpc%-retry%-pushback%-ms: 7\n", err)
  end)

  it("-retry applies a service config retryPolicy to the call", function()
    local policy = [['{"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.05s",]]
      .. [[ "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}']]
    local out, err, code = call("-retry " .. policy
      .. [[ -d '{"id": "cli-retry", "failures": 2, "code": "UNAVAILABLE"}' TARGET faults.Faults/FailThenSucceed]])
    assert.are.equal(0, code, err)
    assert.matches('"attempts": 3', out, 1, true)
    -- without it the call fails at once
    out, err, code = call([[-d '{"id": "cli-noretry", "failures": 2, "code": "UNAVAILABLE"}']]
      .. " TARGET faults.Faults/FailThenSucceed")
    assert.are.equal(64 + 14, code)
    assert.are.equal("", out)
    assert.matches("^ERROR: code = UNAVAILABLE", err)
    out, err, code = call([[-retry '{"maxAttempts": 1}' TARGET faults.Faults/Echo]])
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.are.equal("protocall call: -retry: maxAttempts: at least 2 expected, got 1\n", err)
    out, err, code = call([[-retry '{"maxAttempts": ' TARGET faults.Faults/Echo]])
    assert.are.equal(1, code)
    assert.are.equal("", out)
    -- the offset is in the flag's own text (not in a service config made around it)
    assert.matches("^protocall call: %-retry: JSON: .* at offset 16\n$", err)
    out, err, code = call("TARGET faults.Faults")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("^protocall call: 'faults.Faults' is a service: pkg.Service/Method expected %(its methods: Echo, "
      .. "FailThenSucceed, .*, Record%)\n", err)
    out, err, code = call([[-retry '{' TARGET faults.Faults/Echo]])
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("^protocall call: %-retry: JSON: .* at offset 1\n$", err)
    out, err, code = call("-retry " .. policy .. " -retry-attempts 2 TARGET faults.Faults/Echo")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("-retry and -retry-attempts exclude each other", err, 1, true)
  end)

  it("-connect-timeout gives up a connection that does not connect in time", function()
    -- a peer that accepts and never answers: the TLS handshake never ends
    local silent = helper.spawn("silent", 0)
    local t0 = helper.now()
    local out, err, code = run(BIN .. " call -insecure -connect-timeout 0.3 -max-time 20 " .. FAULTS
      .. " 127.0.0.1:" .. silent.port .. " faults.Faults/Echo")
    local took = helper.now() - t0
    assert.are.equal(64 + 14, code)
    assert.are.equal("", out)
    assert.matches("^ERROR: code = UNAVAILABLE, message = connect to 127%.0%.0%.1:%d+: timed out after 0%.3 s\n", err)
    assert.is_true(took < 10, "took " .. took .. " s")
    -- without it the call's deadline is what ends the wait
    out, err, code = run(BIN .. " call -insecure -max-time 0.3 " .. FAULTS
      .. " 127.0.0.1:" .. silent.port .. " faults.Faults/Echo")
    helper.stop(silent)
    assert.are.equal(64 + 4, code)
    assert.are.equal("", out)
    assert.matches("^ERROR: code = DEADLINE_EXCEEDED", err)
    out, err, code = call("-connect-timeout 0 TARGET faults.Faults/Echo")
    assert.are.equal(2, code)
    assert.are.equal("", out)
    assert.matches("-connect-timeout: positive number of seconds expected, got 0", err, 1, true)
    out, err, code = call([[-connect-timeout 5 -d '{"text": "in time"}' TARGET faults.Faults/Echo]])
    assert.are.equal(0, code, err)
    assert.matches('"text": "in time"', out, 1, true)
  end)

  describe("over TLS", function()
    local dir, tls
    setup(function()
      dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir " .. dir))
      local function cert(name, cn)
        assert(os.execute("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=" .. cn
          .. " -addext subjectAltName=DNS:localhost,IP:127.0.0.1"
          .. " -keyout " .. dir .. "/" .. name .. "-key.pem -out " .. dir .. "/" .. name .. ".pem 2>/dev/null"))
      end
      cert("server", "localhost")
      cert("client", "client")
      tls = helper.spawn("tls", 0, dir .. "/server.pem", dir .. "/server-key.pem")
    end)
    teardown(function()
      helper.stop(tls)
      os.execute("rm -rf " .. dir)
    end)

    local function tcall(args)
      return run(BIN .. " call " .. FAULTS .. " " .. args:gsub("DIR", dir):gsub("TARGET", "127.0.0.1:" .. tls.port))
    end

    it("verifies with -cacert and -servername, or not at all with -insecure", function()
      local out, err, code = tcall([[-cacert DIR/server.pem -d '{"text": "tls"}' TARGET faults.Faults/Echo]])
      assert.are.equal(0, code, err)
      assert.matches('"text": "tls"', out, 1, true)
      out, err, code = tcall([[-cacert DIR/server.pem -servername localhost TARGET faults.Faults/Echo]])
      assert.are.equal(0, code, err)
      assert.are.equal('{\n  "attempts": 1\n}\n', out)
      out, err, code = tcall([[-cacert DIR/server.pem -servername other.example TARGET faults.Faults/Echo]])
      assert.are.equal(64 + 14, code)
      assert.are.equal("", out)
      assert.matches("certificate verify failed", err, 1, true)
      out, err, code = tcall([[TARGET faults.Faults/Echo]]) -- the system store does not know it
      assert.are.equal(64 + 14, code)
      assert.are.equal("", out)
      assert.matches("certificate verify failed", err, 1, true)
      out, err, code = tcall([[-insecure -d '{"text": "unverified"}' TARGET faults.Faults/Echo]])
      assert.are.equal(0, code, err)
      assert.matches('"text": "unverified"', out, 1, true)
      out, err, code = tcall([[-insecure -servername other.example TARGET faults.Faults/Echo]])
      assert.are.equal(0, code, err)
      assert.are.equal('{\n  "attempts": 1\n}\n', out)
    end)

    it("checks the TLS files before connecting, naming the flag", function()
      for _, cmd in ipairs { "call", "list", "gateway" } do
        local out, err, code = run(BIN .. " " .. cmd .. " -cacert " .. dir .. " 127.0.0.1:" .. tls.port
          .. (cmd == "call" and " faults.Faults/Echo" or ""))
        assert.are.equal(1, code, err)
        assert.are.equal("", out)
        assert.are.equal("protocall " .. cmd .. ": -cacert '" .. dir .. "': cannot be read: Is a directory\n", err)
      end
      local out, err, code = tcall([[-cacert DIR/none.pem TARGET faults.Faults/Echo]])
      assert.are.equal(1, code, err)
      assert.are.equal("", out)
      assert.are.equal("protocall call: -cacert '" .. dir .. "/none.pem': cannot be read: No such file or directory\n",
        err)
      for _, none in ipairs { "/dev/null", "/dev/zero" } do -- (the endless one is not read to its end)
        out, err, code = tcall("-cacert " .. none .. " TARGET faults.Faults/Echo")
        assert.are.equal(1, code, err)
        assert.are.equal("", out)
        assert.are.equal("protocall call: -cacert '" .. none .. "': not a PEM certificate bundle\n", err)
      end
      out, err, code = tcall([[-cacert DIR/server.pem -cert DIR -key DIR/client-key.pem TARGET faults.Faults/Echo]])
      assert.are.equal(1, code, err)
      assert.are.equal("", out)
      assert.are.equal("protocall call: -cert '" .. dir .. "': cannot be read: Is a directory\n", err)
      out, err, code = tcall([[-cacert DIR/server.pem -cert DIR/client.pem -key /dev/null TARGET faults.Faults/Echo]])
      assert.are.equal(1, code, err)
      assert.are.equal("", out)
      assert.are.equal("protocall call: -key '/dev/null': not a PEM key\n", err)
      -- a FIFO (named pipe) no one writes to: refused, not waited for (`timeout`: a hang fails the spec)
      local fifo = dir .. "/ca.fifo"
      assert.is_true(os.execute("rm -f " .. fifo .. " && mkfifo " .. fifo))
      for _, c in ipairs {
        { "call -cacert " .. fifo .. " 127.0.0.1:" .. tls.port .. " faults.Faults/Echo", "call: -cacert" },
        { "call -insecure -cert " .. fifo .. " -key " .. fifo .. " 127.0.0.1:1 faults.Faults/Echo", "call: -cert" },
        { "serve -cert " .. fifo .. " -key " .. fifo .. " examples/route_services.lua", "serve: -cert" },
        { "gateway -listen-cert " .. fifo .. " -listen-key " .. fifo .. " 127.0.0.1:1", "gateway: -listen-cert" },
      } do
        out, err, code = run("timeout 20 " .. BIN .. " " .. c[1])
        assert.are.equal(1, code, c[1] .. ": " .. err)
        assert.are.equal("", out)
        assert.are.equal("protocall " .. c[2] .. " '" .. fifo .. "': cannot be read: a FIFO (named pipe), not a "
          .. "regular file\n", err)
      end
      os.remove(fifo)
    end)

    it("sends a client certificate with -cert and -key", function()
      local out, err, code = tcall("-cacert DIR/server.pem -cert DIR/client.pem -key DIR/client-key.pem"
        .. " TARGET faults.Faults/Echo")
      assert.are.equal(0, code, err)
      assert.are.equal('{\n  "attempts": 1\n}\n', out)
      out, err, code = tcall("-cacert DIR/server.pem -cert DIR/client.pem -key DIR/server-key.pem"
        .. " TARGET faults.Faults/Echo")
      assert.are.equal(64 + 14, code)
      assert.are.equal("", out)
      assert.matches("-key '" .. dir .. "/server-key.pem': not the PEM key of -cert", err, 1, true)
      out, err, code = tcall([[-cert DIR/client.pem TARGET faults.Faults/Echo]])
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("-cert and -key go together", err, 1, true)
      out, err, code = tcall([[-plaintext -insecure TARGET faults.Faults/Echo]])
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("-plaintext takes no TLS flag", err, 1, true)
      out, err, code = tcall([[-insecure -cacert DIR/server.pem TARGET faults.Faults/Echo]])
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("-insecure and -cacert exclude each other", err, 1, true)
    end)
  end)
end)

describe("protocall serve", function()
  -- Starts `protocall serve ARGS` in the background; returns its port and
  -- pid once it says where it listens.
  local function serve(args)
    local log, pidfile = os.tmpname(), os.tmpname()
    assert(os.execute(("%s serve %s 2>%s >/dev/null & echo $! > %s"):format(BIN, args, log, pidfile)))
    local f = assert(io.open(pidfile))
    local pid = f:read("l")
    f:close()
    os.remove(pidfile)
    -- the server ends with the test whatever fails in it (a server left
    -- running keeps what the test's process handed it, a lock file's
    -- descriptor among them); a test's own kill before stays
    finally(function() os.execute("kill " .. pid .. " 2>/dev/null") end)
    for _ = 1, 200 do
      f = io.open(log)
      local text = f and f:read("a") or ""
      if f then f:close() end
      local port = text:match("listening on 127%.0%.0%.1:(%d+) %(h2c%)")
      if port then
        os.remove(log)
        return tonumber(port), pid
      end
      os.execute("sleep 0.05")
    end
    os.execute("kill " .. pid)
    error("protocall serve did not start")
  end

  it("describes by reflection the options a local file's describe prints", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert.is_true(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/d.proto", "wb"))
    f:write([[
syntax = "proto3";
package d;
import "google/api/annotations.proto";
message P { int32 x = 1 [deprecated = true, json_name = "xx"]; oneof o { int32 a = 2; } }
enum E { E0 = 0; E1 = 1 [deprecated = true]; }
service S { rpc M(P) returns (P) { option (google.api.http) = { get: "/v1/p/{x}" }; option deprecated = true; } }
]])
    f:close()
    f = assert(io.open(dir .. "/s.lua", "wb"))
    f:write(([[
local pc = require "protocall"
assert(pc.load_file(%q, { import_paths = { %q }, name = "d.proto" }))
return { ["d.S"] = { M = function(p) return p end } }
]]):format(dir .. "/d.proto", dir))
    f:close()
    local port, pid = serve("-listen 127.0.0.1:0 " .. dir .. "/s.lua")
    local got, want = {}, {}
    -- (the extension, enum values and oneof too, which the server may know
    -- by their parent only)
    local syms = { "d.S", "d.P", "d.E", "d.E.E1", "d.E1", "d.P.o", "google.api.http" }
    for _, sym in ipairs(syms) do
      got[sym] = { run(BIN .. " describe -plaintext 127.0.0.1:" .. port .. " " .. sym) }
      want[sym] = run(BIN .. " describe -I " .. dir .. " -proto d.proto " .. sym)
    end
    os.execute("kill " .. pid)
    os.execute("rm -rf " .. dir)
    for _, sym in ipairs(syms) do
      assert.are.equal(0, got[sym][3], got[sym][2])
      assert.are.equal(want[sym], got[sym][1])
    end
    assert.matches('    option (.google.api.http) = { get: "/v1/p/{x}" };\n', got["d.S"][1], 1, true)
    assert.matches('  int32 x = 1 [json_name = "xx", deprecated = true];\n', got["d.P"][1], 1, true)
    assert.matches("  E1 = 1 [deprecated = true];\n", got["d.E"][1], 1, true)
    assert.are.equal("d.E.E1 is an enum value:\nE1 = 1 [deprecated = true];\n", got["d.E.E1"][1])
    assert.are.equal("d.P.o is a one-of:\noneof o {\n  int32 a = 2;\n}\n", got["d.P.o"][1])
    assert.matches("^google.api.http is an extension:\n", got["google.api.http"][1])
  end)

  it("names the script and the fix when a service it returns has no schema loaded", function()
    local script = write_tmp('return { ["gw.Greeter"] = { SayHello = function() return {} end } }')
    local out, err, code = run("timeout 10 " .. BIN .. " serve -listen 127.0.0.1:0 " .. script)
    os.remove(script)
    assert.are.equal(1, code, err)
    assert.are.equal("", out)
    assert.are.equal("protocall serve: " .. script .. ": unknown service 'gw.Greeter': the script loads its services' "
      .. 'schema before it returns them (pc.load_file("its.proto"))\n', err)
  end)

  it("serves the services a script returns, with health and reflection on", function()
    local port, pid = serve("-listen 127.0.0.1:0 examples/route_services.lua")
    local ok, e = pcall(function()
      local target = "127.0.0.1:" .. port
      local out, err, code = run(BIN .. " list -plaintext " .. target)
      assert.are.equal(0, code, err)
      assert.are.equal("demo.Router\ngrpc.health.v1.Health\ngrpc.reflection.v1.ServerReflection\n"
        .. "grpc.reflection.v1alpha.ServerReflection\n", out)
      out, err, code = run(BIN .. " call -plaintext -retry-attempts 3 -d '{\"name\": \"s\", \"points\": "
        .. "[{}, {\"x\": 3, \"y\": 4}]}' " .. target .. " demo.Router/Measure")
      assert.are.equal(0, code, err)
      assert.are.equal('{\n  "length": 5,\n  "legs": 1\n}\n', out)
      out, err, code = run(BIN .. " call -plaintext " .. target .. " grpc.health.v1.Health/Check")
      assert.are.equal(0, code, err)
      assert.are.equal('{\n  "status": "SERVING"\n}\n', out)
      -- the other two call shapes of examples/route.proto
      out, err, code = run(BIN .. " call -plaintext -format text -d '{\"name\": \"w\", \"points\": "
        .. "[{\"x\": 1}, {\"y\": 2}]}' " .. target .. " demo.Router/Walk")
      assert.are.equal(0, code, err)
      assert.are.equal("x: 1\n\ny: 2\n", out)
      out, err, code = run(BIN .. " call -plaintext -d @ " .. target .. " demo.Router/Record",
        '{} {"x": 3, "y": 4} {"x": 3}')
      assert.are.equal(0, code, err)
      assert.are.equal('{\n  "length": 9,\n  "legs": 2\n}\n', out)
      out, err, code = run(BIN .. " call -plaintext -format text -d @ " .. target .. " demo.Router/Follow",
        '{} {"x": 3, "y": 4} {"x": 3}')
      assert.are.equal(0, code, err)
      assert.are.equal("x: 3\ny: 4\n\ny: -4\n", out)
    end)
    os.execute("kill " .. pid)
    assert(ok, e)
  end)

  it("is called with call -protocol grpcweb and connect: reflection and every call shape over them", function()
    local port, pid = serve("-listen 127.0.0.1:0 examples/route_services.lua")
    local ok, e = pcall(function()
      local target = "127.0.0.1:" .. port
      for _, protocol in ipairs { "grpcweb", "connect" } do
        local call = BIN .. " call -plaintext -protocol " .. protocol .. " "
        local out, err, code = run(call .. "-retry-attempts 3 -d '{\"name\": \"" .. protocol .. "\", \"points\": "
          .. "[{}, {\"x\": 3, \"y\": 4}]}' " .. target .. " demo.Router/Measure")
        assert.are.equal(0, code, err)
        assert.are.equal('{\n  "length": 5,\n  "legs": 1\n}\n', out)
        out, err, code = run(call .. "-d '{\"name\": \"" .. protocol .. "-once\"}' " .. target
          .. " demo.Router/Measure")
        assert.are.equal(64 + 14, code)
        assert.are.equal("", out)
        assert.are.equal("ERROR: code = UNAVAILABLE, message = flaky server\n", err)
        out, err, code = run(call .. "-format text -max-time 5 -d '{\"points\": [{\"x\": 1}, {\"y\": 2}]}' "
          .. target .. " demo.Router/Walk")
        assert.are.equal(0, code, err)
        assert.are.equal("x: 1\n\ny: 2\n", out)
        out, err, code = run(call .. "-format text -d @ " .. target .. " demo.Router/Follow",
          '{} {"x": 3, "y": 4} {"x": 3}')
        assert.are.equal(0, code, err)
        assert.are.equal("x: 3\ny: 4\n\ny: -4\n", out)
      end
      local out, err, code = run(BIN .. " call -plaintext -protocol http " .. target .. " demo.Router/Measure")
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("-protocol: grpc, grpcweb or connect expected, got http", err, 1, true)
    end)
    os.execute("kill " .. pid)
    assert(ok, e)
  end)

  it("is called with call -protocol grpcweb and connect -http1: unary, streams, errors over HTTP/1.1", function()
    local port, pid = serve("-listen 127.0.0.1:0 examples/route_services.lua")
    local ok, e = pcall(function()
      local target = "127.0.0.1:" .. port
      for _, protocol in ipairs { "grpcweb", "connect" } do
        local call = BIN .. " call -plaintext -I examples -proto route.proto -http1 -protocol " .. protocol .. " "
        local out, err, code = run(call .. "-retry-attempts 3 -d '{\"name\": \"h1" .. protocol .. "\", \"points\": "
          .. "[{}, {\"x\": 3, \"y\": 4}]}' " .. target .. " demo.Router/Measure")
        assert.are.equal(0, code, err)
        assert.are.equal('{\n  "length": 5,\n  "legs": 1\n}\n', out)
        out, err, code = run(call .. "-d '{\"name\": \"h1" .. protocol .. "-once\"}' " .. target
          .. " demo.Router/Measure")
        assert.are.equal(64 + 14, code)
        assert.are.equal("", out)
        assert.are.equal("ERROR: code = UNAVAILABLE, message = flaky server\n", err)
        out, err, code = run(call .. "-format text -max-time 5 -d '{\"points\": [{\"x\": 1}, {\"y\": 2}]}' "
          .. target .. " demo.Router/Walk")
        assert.are.equal(0, code, err)
        assert.are.equal("x: 1\n\ny: 2\n", out)
        out, err, code = run(call .. "-d @ " .. target .. " demo.Router/Record", '{} {"x": 3, "y": 4} {"x": 3}')
        assert.are.equal(0, code, err)
        assert.are.equal('{\n  "length": 9,\n  "legs": 2\n}\n', out)
      end
      local _, err, code = run(BIN .. " call -plaintext -http1 -protocol connect " .. target .. " demo.Router/Measure")
      assert.are.equal(2, code)
      assert.matches("-http1 needs -proto or -protoset: server reflection is a bidirectional stream", err, 1, true)
      _, err, code = run(BIN .. " call -plaintext -I examples -proto route.proto -http1 " .. target
        .. " demo.Router/Measure")
      assert.are.equal(2, code)
      assert.matches("-http1 needs -protocol grpcweb or connect (gRPC needs HTTP/2)", err, 1, true)
    end)
    os.execute("kill " .. pid)
    assert(ok, e)
  end)

  -- Runs `protocall ARGS` in the background with a shell feeding its
  -- standard input: chunks[1], then chunks[i] once the spec calls go(i),
  -- the end of the input once it calls eof() (each wait of the shell ends
  -- after 30 s at most). Its stdout and stderr go to files the spec reads
  -- as they grow (read, wait_for), its exit status to another (status).
  -- With `fifo`, the shell feeds a FIFO instead, which "FIFO" in ARGS
  -- names (h.fifo), as a writer does: its open waits for the command's
  -- (the command's standard input is /dev/null then).
  local function fed(args, chunks, fifo)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    if fifo then
      assert(os.execute("mkfifo " .. dir .. "/in.fifo"))
      args = args:gsub("FIFO", dir .. "/in.fifo")
    end
    local feed = {}
    for i, chunk in ipairs(chunks) do
      local f = assert(io.open(dir .. "/c" .. i, "wb"))
      f:write(chunk)
      f:close()
      local wait = i == 1 and "" or ("n=0; while [ ! -e %s/go%d ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; ")
        :format(dir, i)
      feed[#feed + 1] = wait .. "cat " .. dir .. "/c" .. i
    end
    feed[#feed + 1] = ("n=0; while [ ! -e %s/eof ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; : > %s/fed")
      :format(dir, dir)
    local command = ("%s %s > %s/out 2> %s/err"):format(BIN, args, dir, dir)
    local pipeline = fifo and ("(%s) > %s/in.fifo & (%s < /dev/null"):format(table.concat(feed, "; "), dir, command)
      or ("(%s) | (%s"):format(table.concat(feed, "; "), command)
    assert(os.execute(("(%s; echo $? > %s/rc.tmp; mv %s/rc.tmp %s/rc)) < /dev/null > /dev/null 2>&1 &")
      :format(pipeline, dir, dir, dir)))
    local h = { fifo = fifo and dir .. "/in.fifo" }
    function h.read(name)
      local f = io.open(dir .. "/" .. name, "rb")
      local text = f and f:read("a")
      if f then f:close() end
      return text
    end
    -- The text of file `name` once pred(text) holds, or nil after 15 s.
    function h.wait_for(name, pred)
      for _ = 1, 300 do
        local text = h.read(name)
        if text and pred(text) then return text end
        os.execute("sleep 0.05")
      end
    end
    function h.go(i) assert(io.open(dir .. "/go" .. i, "w")):close() end
    function h.eof() assert(io.open(dir .. "/eof", "w")):close() end
    -- The exit status, or nil when the command has not ended after 15 s.
    function h.status()
      local rc = h.wait_for("rc", function(text) return text:match("^%d+\n$") end)
      return rc and tonumber(rc)
    end
    function h.close()
      -- (a reader of the FIFO meanwhile, whether or not the command opened
      -- it or is still there: the shell's writes and its open go through)
      local reader = fifo and assert(core.open_fifo(h.fifo))
      h.eof()
      for i = 2, #chunks do h.go(i) end
      h.status()
      h.wait_for("fed", function() return true end) -- the shell has seen eof
      if reader then reader:close() end
      os.execute("rm -rf " .. dir)
    end
    return h
  end

  -- A bidi call's documents from `source` ("standard input" or "the
  -- FIFO": fed()'s `fifo`) sent as they come, its responses printed
  -- meanwhile, then a client stream's: errors of the two, to assert once
  -- the server is stopped.
  local function as_they_come(port, source)
    local fifo = source == "the FIFO"
    local call = "call -plaintext -format text -d @" .. (fifo and "FIFO" or "") .. " 127.0.0.1:" .. port
      .. " demo.Router/"
    local h = fed(call .. "Follow", { '{"x": 1}\n{"x": 2}\n', '{"x": 5}' }, fifo)
    local ok, e = pcall(function()
      -- the first response is out while the source is still open: only
      -- then does the feeding shell send the next document, then the end
      local first = h.wait_for("out", function(text) return text:find("x: 1\n", 1, true) end)
      assert.are.equal("x: 1\n", first, "no response before the end of " .. source)
      assert.is_nil(h.read("rc"))
      h.go(2)
      h.eof()
      assert.are.equal(0, h.status(), h.read("err"))
      assert.are.equal("x: 1\n\nx: 3\n", h.read("out"))
      assert.are.equal("", h.read("err"))
    end)
    h.close()
    -- a client stream sends as it reads too; its one response comes at the end
    local h2 = fed(call .. "Record", { '{"x": 3, "y": 4}', ' {}' }, fifo)
    local ok2, e2 = pcall(function()
      h2.go(2)
      h2.eof()
      assert.are.equal(0, h2.status(), h2.read("err"))
      assert.are.equal('length: 5\nlegs: 1\n', h2.read("out"))
    end)
    h2.close()
    return ok, e, ok2, e2
  end

  it("sends a stream's documents from standard input as they come, the responses printed meanwhile", function()
    local port, pid = serve("-listen 127.0.0.1:0 examples/route_services.lua")
    local ok, e, ok2, e2 = as_they_come(port, "standard input")
    os.execute("kill " .. pid)
    assert(ok, e)
    assert(ok2, e2)
  end)

  it("bounds the wait for a stream's standard input by -max-time", function()
    local port, pid = serve("-listen 127.0.0.1:0 examples/route_services.lua")
    -- standard input stays open, empty: the deadline ends the call
    local h = fed("call -plaintext -max-time 1 -d @ 127.0.0.1:" .. port .. " demo.Router/Follow", { "" })
    local h2 = fed("call -plaintext -max-time 1 -d @ 127.0.0.1:" .. port .. " demo.Router/Record", { "{}" })
    -- a unary or server-streaming call reads its one document first: by the deadline too
    local h3 = fed("call -plaintext -max-time 1 -d @ 127.0.0.1:" .. port .. " demo.Router/Measure", { "{" })
    local h4 = fed("call -plaintext -max-time 1 -d @ 127.0.0.1:" .. port .. " demo.Router/Walk", { "" })
    local ok, e = pcall(function()
      -- (the input still open at the deadline: said as the wait for one
      -- document says it)
      for _, fe in ipairs { h, h2 } do
        assert.are.equal(64 + 4, fe.status(), "the call did not end at its deadline")
        assert.are.equal("", fe.read("out"))
        assert.are.equal("ERROR: code = DEADLINE_EXCEEDED, message = deadline exceeded waiting for standard input "
          .. "(-max-time 1)\n", fe.read("err"))
      end
      for _, fe in ipairs { h3, h4 } do
        assert.are.equal(64 + 4, fe.status(), "the wait for standard input did not end at the deadline")
        assert.are.equal("", fe.read("out"))
        assert.are.equal("ERROR: code = DEADLINE_EXCEEDED, message = deadline exceeded waiting for standard input "
          .. "(-max-time 1)\n", fe.read("err"))
      end
    end)
    h.close()
    h2.close()
    h3.close()
    h4.close()
    os.execute("kill " .. pid)
    assert(ok, e)
  end)

  it("sends a stream's documents from a FIFO or pipe as they come, as from standard input", function()
    local port, pid = serve("-listen 127.0.0.1:0 examples/route_services.lua")
    local call = "call -plaintext -format text -d @FIFO 127.0.0.1:" .. port .. " demo.Router/"
    local ok, e, ok2, e2 = as_they_come(port, "the FIFO")
    -- a bad document ends the call there, naming the FIFO (bash's pipe as
    -- its /dev/fd name), after the ones before were answered
    local h3 = fed(call .. "Follow", { '{"x": 1}\n{"x": 2}\n', '{"x": "far"}\n' }, true)
    local ok3, e3 = pcall(function()
      assert.are.equal("x: 1\n", h3.wait_for("out", function(text) return text:find("x: 1\n", 1, true) end))
      h3.go(2)
      assert.are.equal(1, h3.status())
      assert.are.equal("x: 1\n", h3.read("out"))
      assert.are.equal("protocall call: -d @" .. h3.fifo .. ": request 3: $.x: invalid integer \"far\" at offset 6\n",
        h3.read("err"))
    end)
    h3.close()
    local want = " the request document is over 4194304 bytes (4 MiB, gRPC's default maximum message size)\n"
    for _, case in ipairs {
      { [[echo '{"x": 1}{"x": "far"}']], ": request 2: $.x: invalid integer \"far\" at offset 6\n" },
      -- (head's own "Broken pipe", where SIGPIPE is ignored, is not the call's)
      { [[printf '{"x": 1}'; head -c 100000000 /dev/zero 2>/dev/null]], " at offset 8:" .. want },
    } do
      local line = BIN .. " call -plaintext -d @<(" .. case[1] .. ") 127.0.0.1:" .. port .. " demo.Router/Record"
      local out, err, code = run("bash -c " .. ("%q"):format(line))
      assert.are.equal(1, code, err)
      assert.are.equal("", out)
      assert.matches("^protocall call: %-d @/dev/fd/%d+", err)
      assert.are.equal(case[2], err:gsub("^protocall call: %-d @/dev/fd/%d+", ""), line)
    end
    os.execute("kill " .. pid)
    assert(ok, e)
    assert(ok2, e2)
    assert(ok3, e3)
  end)

  it("bounds a stream's FIFO by -max-time: a writer that never comes, or an endless pipe", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir .. " && mkfifo " .. dir .. "/in.fifo"))
    -- the server records how many documents it got as they come
    local f = assert(io.open(dir .. "/count.lua", "w"))
    f:write(([[
local pc = require "protocall"
if not pc.type("demo.Distance") then
  assert(pc.load_file("examples/route.proto", { import_paths = { "examples" } }))
end
return { ["demo.Router"] = { Record = function(ctx)
  local n = 0
  for _ in function() return ctx:recv() end do
    n = n + 1
    local out = assert(io.open(%q, "w"))
    out:write(n)
    out:close()
  end
  return { legs = n }
end, Follow = function(ctx)
  for p in function() return ctx:recv() end do ctx.send(p) end
end } }
]]):format(dir .. "/count"))
    f:close()
    local port, pid = serve("-listen 127.0.0.1:0 " .. dir .. "/count.lua")
    local ok, e = pcall(function()
      local call = BIN .. " call -plaintext " .. ROUTE .. " %s 127.0.0.1:" .. port .. " demo.Router/Record"
      -- no writer: the deadline ends the call; a writer that closes at once: no request
      local out, err, code = run(call:format("-max-time 1 -d @" .. dir .. "/in.fifo"))
      assert.are.equal(64 + 4, code, err)
      assert.are.equal("", out)
      assert.are.equal("ERROR: code = DEADLINE_EXCEEDED, message = deadline exceeded waiting for FIFO '" .. dir
        .. "/in.fifo' (-max-time 1)\n", err)
      for _, limit in ipairs { "", "-max-time 20 " } do
        out, err, code = run(call:format(limit .. "-d @" .. dir .. "/in.fifo") .. " & timeout 20 sh -c ': > "
          .. dir .. "/in.fifo'; wait $!")
        assert.are.equal(0, code, err)
        assert.are.equal("{}\n", out)
      end
      -- a bidirectional stream's responses print while the pipe flows
      -- (before the Record below, which leaves its server busy a while)
      local line = call:gsub("Record$", "Follow"):format([[-max-time 1 -d @<(yes '{"x": 1}')]])
      out, err, code = run("bash -c " .. ("%q"):format(line))
      assert.are.equal(64 + 4, code, err)
      assert.matches("^{\n  \"x\": 1\n}\n{\n  \"x\": 1\n}\n", out)
      assert.matches("^ERROR: code = DEADLINE_EXCEEDED, message = ", err)
      -- an endless pipe: its documents reach the server while it runs
      -- (the call is not waiting for its end), until the deadline (its
      -- memory bounded: by the send window, not the pipe's length)
      line = call:format([[-max-time 1 -d @<(yes '{"x": 1}')]])
      out, err, code = run("bash -c " .. ("%q"):format(line))
      assert.are.equal(64 + 4, code, err)
      assert.are.equal("", out)
      assert.matches("^ERROR: code = DEADLINE_EXCEEDED, message = ", err)
      local got -- (the server may be rewriting it: read until it holds a count)
      for _ = 1, 100 do
        local c = io.open(dir .. "/count")
        got = c and tonumber(c:read("a"))
        if c then c:close() end
        if got then break end
        os.execute("sleep 0.05")
      end
      assert.is_truthy(got, "the server got no document before the deadline")
      assert.is_true(got > 0)
    end)
    os.execute("kill " .. pid)
    os.execute("rm -rf " .. dir)
    assert(ok, e)
  end)

  it("refuses a request document over 4 MiB from standard input or a file, -max-time or not (no endless "
    .. "buffering of endless input)", function()
    local big = write_tmp(('{"x": 1}' .. (" "):rep(4096)):rep(1025))
    local want = " the request document is over 4194304 bytes (4 MiB, gRPC's default maximum message size)\n"
    for _, case in ipairs {
      { "-max-time 30 -d @", "head -c 100000000 /dev/zero | ", "standard input:" },
      { "-d @", "head -c 100000000 /dev/zero | ", "standard input:" },
      { "-max-time 30 -d @", "cat " .. big .. " | ", "standard input:" },
      { "-d @" .. big, "", "-d @" .. big .. ":" },
    } do
      local out, err, code = run(case[2] .. BIN .. " call -plaintext " .. ROUTE .. " " .. case[1]
        .. " 127.0.0.1:1 demo.Router/Measure")
      assert.are.equal("protocall call: " .. case[3] .. want, err, case[1])
      assert.are.equal(1, code)
      assert.are.equal("", out)
    end
    os.remove(big)
  end)

  it("refuses a client stream's request document over 4 MiB, from a file or standard input, naming its offset",
    function()
    local long = write_tmp('{"x": 1} "' .. ("a"):rep(4 * 1024 * 1024) .. '"')
    local want = " the request document is over 4194304 bytes (4 MiB, gRPC's default maximum message size)\n"
    -- a file's documents are read before the call: none starts
    for _, case in ipairs { { long, "-d @" .. long .. " at offset 9:" },
                            { "/dev/zero", "-d @/dev/zero at offset 0:" } } do
      local out, err, code = run(BIN .. " call -plaintext " .. ROUTE .. " -d @" .. case[1]
        .. " 127.0.0.1:1 demo.Router/Record")
      assert.are.equal("protocall call: " .. case[2] .. want, err, case[1])
      assert.are.equal(1, code)
      assert.are.equal("", out)
    end
    os.remove(long)
    -- standard input's go as they come: the call is running when the endless one is refused
    local port, pid = serve("-listen 127.0.0.1:0 examples/route_services.lua")
    local out, err, code = run("(printf '{\"x\": 1}'; head -c 100000000 /dev/zero) | " .. BIN .. " call -plaintext "
      .. "-d @ 127.0.0.1:" .. port .. " demo.Router/Record")
    os.execute("kill " .. pid)
    assert.are.equal("protocall call: standard input at offset 8:" .. want, err)
    assert.are.equal(1, code)
    assert.are.equal("", out)
  end)

  it("says standard input is closed before connecting (a connection would take its descriptor)", function()
    local out, err, code = run(BIN .. " call -plaintext " .. ROUTE .. " -d @ 127.0.0.1:1 demo.Router/Follow <&-")
    assert.are.equal(1, code, err)
    assert.are.equal("", out)
    assert.are.equal("protocall call: standard input: closed (Bad file descriptor)\n", err)
  end)

  it("ends a stream at a bad document of standard input, naming it, after sending the ones before", function()
    local port, pid = serve("-listen 127.0.0.1:0 examples/route_services.lua")
    local call = "call -plaintext -format text -d @ 127.0.0.1:" .. port .. " demo.Router/Follow"
    local h = fed(call, { '{"x": 1}\n{"x": 2}\n', '{"x": "far"}\n' })
    local h2 = fed(call, { '{"x": 1}\n{"x": 2}\n', '}' })
    local ok, e = pcall(function()
      for _, fe in ipairs { h, h2 } do
        assert.are.equal("x: 1\n", fe.wait_for("out", function(text) return text:find("x: 1\n", 1, true) end),
          "no response before the end of standard input")
        fe.go(2) -- and no end of the input: the bad document ends the call
      end
      assert.are.equal(1, h.status())
      assert.are.equal("x: 1\n", h.read("out"))
      assert.are.equal("protocall call: request 3: $.x: invalid integer \"far\" at offset 6\n", h.read("err"))
      assert.are.equal(1, h2.status())
      assert.are.equal("x: 1\n", h2.read("out"))
      assert.are.equal("protocall call: unbalanced '}' at offset 18\n", h2.read("err"))
    end)
    h.close()
    h2.close()
    os.execute("kill " .. pid)
    assert(ok, e)
  end)

  it("refuses what it cannot serve, with the command's usage or one line", function()
    local _, err, code = run(BIN .. " serve")
    assert.are.equal(2, code)
    assert.matches("protocall serve: SCRIPT expected", err, 1, true)
    _, err, code = run(BIN .. " serve -cert x.pem examples/route_services.lua")
    assert.are.equal(2, code)
    assert.matches("-cert and -key go together", err, 1, true)
    _, err, code = run(BIN .. " serve -cert /nonexistent/x.pem -key /nonexistent/x.key examples/route_services.lua")
    assert.are.equal(1, code)
    assert.are.equal("protocall serve: -cert '/nonexistent/x.pem': cannot be read: No such file or directory\n", err)
    _, err, code = run(BIN .. " serve -cert README.md -key README.md examples/route_services.lua")
    assert.are.equal(1, code)
    assert.are.equal("protocall serve: -cert 'README.md': not a PEM certificate\n", err)
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write("return 42\n")
    f:close()
    _, err, code = run(BIN .. " serve " .. script)
    os.remove(script)
    assert.are.equal(1, code)
    assert.matches("the script returned number, not a table of services or a pc.server", err, 1, true)
    _, err, code = run(BIN .. " serve no/such/script.lua")
    assert.are.equal(1, code)
    assert.matches("no/such/script.lua", err, 1, true)
  end)

  it("prints a script's error alone, without a traceback, and exits 1", function()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write("local x = 1\nerror('no services today')\n")
    f:close()
    local _, err, code = run(BIN .. " serve " .. script)
    os.remove(script)
    assert.are.equal(1, code)
    assert.are.equal("protocall serve: " .. script .. ":2: no services today\n", err)
  end)
end)
