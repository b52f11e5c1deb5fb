-- The examples run green (issue 7, "Done when"): examples/quickstart.lua in
-- process and against examples/route_server.py (python3-grpcio), and
-- examples/decode.lua printing a corpus payload as `protoc --decode` does.
-- Each runs in this Lua state (so the sanitizer build covers it) with its
-- output captured.
local helper = require "grpc_helper"

-- Runs examples/NAME.lua with `args`; returns what it printed.
local function run(name, args)
  local out = {}
  local io_proxy = setmetatable({
    write = function(...)
      for _, v in ipairs { ... } do out[#out + 1] = tostring(v) end
    end,
  }, { __index = io })
  local script_arg = { [0] = "examples/" .. name .. ".lua" }
  for i, a in ipairs(args or {}) do script_arg[i] = a end
  local env = setmetatable({
    arg = script_arg,
    io = io_proxy,
    print = function(...)
      local parts = {}
      for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
      out[#out + 1] = table.concat(parts, "\t") .. "\n"
    end,
  }, { __index = _G })
  local chunk = assert(loadfile("examples/" .. name .. ".lua", "t", env))
  chunk(table.unpack(script_arg))
  return table.concat(out)
end

local CORPUS = "../shared/corpus"

describe("examples", function()
  it("quickstart runs its service in process", function()
    local out = run("quickstart")
    assert.truthy(out:find("calling demo.Router in process\n", 1, true), out)
    assert.truthy(out:find("  server: attempt 3, deadline in ", 1, true), out)
    assert.truthy(out:find("\nMeasure -> demo.Distance{length=9.0, legs=2}\n", 1, true), out)
    assert.truthy(out:find("\nWalk -> (0,0) (3,4) (3,0)\n", 1, true), out)
  end)

  it("quickstart calls a real server with --target", function()
    local server = helper.spawn_command("/usr/bin/python3 examples/route_server.py 0",
                                        "examples/route_server.py",
                                        "^demo%.Router listening on http://127%.0%.0%.1:(%d+)$")
    local ok, out = pcall(run, "quickstart", { "--target", server.url })
    helper.stop(server)
    assert(ok, out)
    assert.truthy(out:find("calling demo.Router at " .. server.url .. "\n", 1, true), out)
    assert.truthy(out:find("  client: retrying after UNAVAILABLE: flaky server\n", 1, true), out)
    assert.truthy(out:find("\nMeasure -> demo.Distance{length=9.0, legs=2}\n", 1, true), out)
    assert.truthy(out:find("\nWalk -> (0,0) (3,4) (3,0)\n", 1, true), out)
  end)

  it("decode prints a corpus payload as protoc --decode does", function()
    local payload = CORPUS .. "/payloads/grpc/route_guide_feature.bin"
    local f = io.open(payload, "rb")
    if not f then
      if os.getenv("CI") then error("corpus missing: " .. payload) end
      pending("corpus absent: " .. payload)
      return
    end
    f:close()
    local protos = CORPUS .. "/protos/grpc/examples/protos"
    local out = run("decode", { "-I", protos, "route_guide.proto", "routeguide.Feature", payload })
    local p = io.popen("protoc -I " .. protos .. " --decode=routeguide.Feature route_guide.proto < "
                       .. payload)
    local want = p:read("a")
    p:close()
    assert.truthy(want:find("Patriots Path", 1, true), want)
    assert.are.equal(want, out)
  end)
end)
