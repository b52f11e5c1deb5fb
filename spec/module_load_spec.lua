-- protocall.so in a fresh stock interpreter: `require "protocall"` maps
-- neither OpenSSL nor RE2 and the C++ runtime (bench/startup_bench.lua
-- measures what that saves); the first TLS setup opens protocall_tls.so and
-- the first pattern protocall_re2.so, from the module's own folder; a module
-- without them says so through the error each already has. Runs on the
-- build under test (release, or the LuaJIT build under luajit); the
-- sanitizer build's module needs the sanitizer runtime, which a stock
-- interpreter lacks.
local R = require "runtime"

local BUILD, SANITIZED = R.module_build()
local LUA = R.luajit and "luajit" or "lua5.4"

-- Runs `code` in a fresh interpreter with the module of folder `dir`; the
-- code may call maps() for the libraries mapped so far (names, by a space).
local function run(dir, code)
  local prelude = ("package.cpath = %q; "):format(dir .. "/?.so")
    .. "local function maps() local f = io.open('/proc/self/maps') local t = f:read('*a') f:close() "
    .. "local seen, out = {}, {} for n in t:gmatch('/(lib[%w_+]+)%.so[^\\n]*') do "
    .. "if not seen[n] then seen[n] = true out[#out + 1] = n end end table.sort(out) "
    .. "return table.concat(out, ' ') end; "
  local out, ok, code_ = R.capture(("%s -e %q 2>&1"):format(LUA, prelude .. code))
  assert(ok, ("exit %s: %s"):format(tostring(code_), out))
  return out
end

-- A listen on a TLS certificate that is not one: OpenSSL's refusal shows
-- that tls.c ran.
local LISTEN = "local pc = require 'protocall'; "
  .. "print(select(2, pcall(pc.listen, pc.server({}), '127.0.0.1:0', "
  .. "{ cert_file = '/etc/hostname', key_file = '/etc/hostname' }))); "
-- A pattern RE2 refuses (its message), then one that matches.
local REGEX = "local core = require 'protocall.core'; print((select(2, core.regex('a+(')))); "
  .. "local re = core.regex('a+'); print(re and re:find('baa')); "

describe("protocall.so in a stock interpreter", function()
  if SANITIZED then
    return it("runs on the release build", function() pending("the sanitizer build's module needs its runtime") end)
  end

  it("maps neither OpenSSL nor RE2 and the C++ runtime at require", function()
    local out = run(BUILD, "require 'protocall'; print(maps())")
    assert.matches("libnghttp2", out, 1, true)
    for _, lib in ipairs { "libssl", "libcrypto", "libre2", "libstdc++" } do
      assert.is_nil(out:find(lib, 1, true), lib .. " is mapped: " .. out)
    end
  end)

  it("opens protocall_tls.so at the first TLS setup and protocall_re2.so at the first pattern", function()
    local out = run(BUILD, LISTEN .. "print(maps()); " .. REGEX .. "print(maps())")
    local listen_err, after_tls, refused, found, after_re2 =
      out:match("^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n$")
    assert.are.equal("pc.listen: cert_file '/etc/hostname': not a PEM certificate", listen_err, out)
    assert.matches("libssl", after_tls, 1, true)
    assert.is_nil(after_tls:find("libre2", 1, true))
    assert.are.equal("missing ): a+(", refused)
    assert.are.equal("true", found)
    assert.matches("libre2", after_re2, 1, true)
  end)

  -- A client's TLS needs protocall_tls.so too: without it the channel can
  -- never connect, so its calls fail INTERNAL at once, even waiting for
  -- ready (not UNAVAILABLE, which retries and reconnection take as passing).
  local CALL = "local pc = require 'protocall'; "
    .. "local t = pc.grpc('https://127.0.0.1:1', { wait_for_ready = true }); "
    .. "for _ = 1, 2 do local ok, e = pcall(t.unary, t, '/a.B/C', '', { timeout = 30 }); "
    .. "print(ok, e.code, e.message) end; "

  it("refuses a sibling of another build, naming both builds and the file", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(R.execute(("mkdir -p %s && cp %s/protocall.so %s/"):format(dir, BUILD, dir)))
    -- protocall_tls.so with another build's mark; protocall_re2.so with none
    -- (a build older than the mark: its symbol renamed away).
    local function copy(name, edit)
      local f = assert(io.open(BUILD .. "/" .. name, "rb"))
      local bytes = f:read("a")
      f:close()
      local abi = bytes:match("%z(%d+%.%d+%.%d+%+%x+)%z")
      local edited, n = edit(bytes, abi)
      assert(n == 1, name .. ": " .. n .. " places edited")
      f = assert(io.open(dir .. "/" .. name, "wb"))
      f:write(edited)
      f:close()
      return abi
    end
    local abi = copy("protocall_tls.so", function(bytes, mark)
      return bytes:gsub("%z" .. mark:gsub("%p", "%%%0") .. "%z", "\0" .. mark:gsub("%x", "0") .. "\0")
    end)
    copy("protocall_re2.so", function(bytes)
      return bytes:gsub("%zlpc_sibling_abi%z", "\0lpc_sibling_abX\0", 1)
    end)
    local ok, out = pcall(run, dir, LISTEN .. REGEX)
    os.execute("rm -rf " .. dir)
    assert(ok, out)
    local other = abi:gsub("%x", "0")
    local advice = "): install the module and its siblings from one build"
    assert.are.equal("pc.listen: TLS is not available: " .. dir .. "/protocall_tls.so is from another build "
                     .. "(its ABI is " .. other .. "; protocall.so's is " .. abi .. advice .. "\n"
                     .. "RE2 is not available: " .. dir .. "/protocall_re2.so is from another build "
                     .. "(it has no ABI mark; protocall.so's is " .. abi .. advice .. "\nnil\n", out)
  end)

  it("says which object is missing when the module is alone in its folder", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(R.execute(("mkdir -p %s && cp %s/protocall.so %s/"):format(dir, BUILD, dir)))
    local started = os.time()
    local ok, out = pcall(run, dir, LISTEN .. REGEX .. CALL)
    local took = os.time() - started
    os.execute("rm -rf " .. dir)
    assert(ok, out)
    local missing = "%s/protocall_%s.so: cannot open shared object file: No such file or directory"
    local call = "false\tINTERNAL\tTLS is not available: " .. missing:format(dir, "tls") .. "\n"
    assert.are.equal("pc.listen: TLS is not available: " .. missing:format(dir, "tls") .. "\n"
                     .. "RE2 is not available: " .. missing:format(dir, "re2") .. "\nnil\n"
                     .. call .. call, out)
    assert.is_true(took < 10, "the calls waited " .. took .. " s") -- the backoff is 1 s, then 1.6 s, ...
  end)
end)
