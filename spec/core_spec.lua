-- The wiring: require "protocall" reaches its C core.
local pc = require "protocall"
local R = require "runtime"

-- The output of `script` run by a fresh interpreter of this runtime with
-- the specs' module paths (a state where nothing of protocall is loaded).
local function fresh(script)
  local name = os.tmpname()
  local f = assert(io.open(name, "w"))
  f:write(script)
  f:close()
  local q = function(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
  -- under Lua 5.4 the command of the build under test runs it (the
  -- sanitizer build's cannot be loaded into a stock lua5.4)
  local lua = R.luajit and "luajit" or os.getenv("PROTOCALL_BIN") or "lua5.4"
  local out = R.capture("LUA_PATH=" .. q(package.path) .. " LUA_CPATH=" .. q(package.cpath) .. " "
    .. lua .. " " .. name .. " 2>&1")
  os.remove(name)
  return out
end

describe("protocall", function()
  it("has a version string from the C core", function()
    assert.are.equal("0.1.0", pc.VERSION)
    assert.are.equal(pc.VERSION, require("protocall.core").VERSION)
  end)

  it("names every canonical gRPC status code both ways", function()
    assert.are.equal(14, pc.codes.UNAVAILABLE)
    assert.are.equal("UNAVAILABLE", pc.codes[14])
    assert.are.equal(0, pc.codes.OK)
    assert.are.equal("UNAUTHENTICATED", pc.codes[16])
    assert.is_nil(pc.codes[17])
    for n = 0, 16 do assert.are.equal(n, pc.codes[pc.codes[n]]) end
  end)

  it("maps HTTP statuses without grpc-status as the spec's table", function()
    local core = require "protocall.core"
    assert.are.equal("UNIMPLEMENTED", core.code_from_http(404))
    assert.are.equal("UNAVAILABLE", core.code_from_http(503))
    assert.are.equal("UNKNOWN", core.code_from_http(200))
  end)

  it("loads a module on first use of its name even after the global require is gone", function()
    local out = fresh([[
      local pc = require "protocall"
      require = nil
      io.write(type(pc.client), " ", type(pc.health), " ", tostring(rawget(_G, "require")))
    ]])
    assert.are.equal("function function nil", out)
  end)

  it("lists every name in pairs(pc) under Lua 5.4, those loaded under LuaJIT", function()
    local out = fresh([[
      local pc = require "protocall"
      local seen = {}
      for k in pairs(pc) do seen[k] = true end
      io.write(tostring(seen.transcoder), " ", tostring(seen.encode))
    ]])
    assert.are.equal((R.luajit and "nil" or "true") .. " true", out)
  end)
end)
