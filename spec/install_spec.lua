-- Installing: `cmake --install` of the build under test into a temporary
-- prefix, then used from fresh processes as a user would: the Lua module by
-- a stock lua5.4, examples/host.c compiled with pkg-config and with a CMake
-- project's find_package(protocall), and the rock built by Debian's luarocks
-- from a copy of the source tree. Runs on the release build; the sanitizer
-- build's objects need the sanitizer runtime, which a stock lua5.4 lacks.
-- Under LuaJIT the build under test is the LuaJIT build
-- ($PROTOCALL_LUAJIT_BUILD, set by .ci/busted), whose install is the module
-- and the layer in LuaJIT's folders (lib/lua/5.1, share/lua/5.1).
local R = require "runtime"
local it54 = R.only54(it, pending)
local BUILD, SANITIZED = R.module_build()
local ABI = R.luajit and "5.1" or "5.4"

local function sh(cmd)
  local out, ok, code = R.capture("(" .. cmd .. ") 2>&1")
  return out, ok and 0 or code
end

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. d))
  return d
end

-- examples/host.c ran through (its exit status and output).
local function host_ran(out, code)
  assert.are.equal(0, code, out)
  assert.matches("host: the script got demo.Distance", out, 1, true)
end

local LUA_CHECK = (R.luajit and "luajit" or "lua5.4") .. [[ -e 'local pc = require "protocall"; ]]
  .. [[local P = pc.message("i.P", {{"a", "int32", 1}}); io.write(pc.VERSION, " ", #pc.encode(P{a = 150}))']]

-- The module under `tree` opens OpenSSL's and RE2's objects from its own
-- folder on first use (spec/module_load_spec.lua): OpenSSL's refusal of a
-- file that is no certificate, RE2's match.
local function objects_open(tree)
  local out, code = sh(string.format("LUA_CPATH='%s/lib/lua/%s/?.so' LUA_PATH='' ", tree, ABI)
    .. (R.luajit and "luajit" or "lua5.4") .. [[ -e 'local pc = require "protocall"; ]]
    .. [[local no = "/etc/hostname"; ]]
    .. [[print(select(2, pcall(pc.listen, pc.server({}), "127.0.0.1:0", {cert_file = no, key_file = no}))); ]]
    .. [[print(require("protocall.core").regex("a+"):find("baa"))']])
  assert.are.equal(0, code, out)
  assert.are.equal("pc.listen: cert_file '/etc/hostname': not a PEM certificate\ntrue\n", out)
end

describe("an install", function()
  if SANITIZED then
    return it("runs on the release build", function() pending("the sanitizer build is not installed") end)
  end
  local prefix
  setup(function()
    prefix = tmpdir()
    local out, code = sh("cmake --install " .. BUILD .. " --prefix " .. prefix)
    assert(code == 0, out)
  end)
  teardown(function() os.execute("rm -rf " .. prefix) end)

  it("puts every part in its standard place", function()
    local parts = { "lib/lua/5.4/protocall.so", "lib/lua/5.4/protocall_tls.so", "lib/lua/5.4/protocall_re2.so",
                    "share/lua/5.4/protocall/init.lua", "bin/protocall",
                    "include/protocall.h", "lib/libprotocall.a", "lib/libprotocall.so",
                    "lib/pkgconfig/protocall.pc", "lib/cmake/protocall/protocallConfig.cmake" }
    if R.luajit then
      parts = { "lib/lua/5.1/protocall.so", "lib/lua/5.1/protocall_tls.so", "lib/lua/5.1/protocall_re2.so",
                "share/lua/5.1/protocall/init.lua" }
    end
    for _, rel in ipairs(parts) do
      local f = io.open(prefix .. "/" .. rel, "rb")
      assert(f, rel .. " is not installed")
      f:close()
    end
  end)

  it("gives a stock " .. (R.luajit and "luajit" or "lua5.4") .. " the module, with and without the installed Lua layer",
     function()
    local env = string.format("LUA_CPATH='%s/lib/lua/%s/?.so' "
                              .. "LUA_PATH='%s/share/lua/%s/?.lua;%s/share/lua/%s/?/init.lua' ",
                              prefix, ABI, prefix, ABI, prefix, ABI)
    local out, code = sh(env .. LUA_CHECK)
    assert.are.equal(0, code, out)
    assert.are.equal("0.1.0 3", out)
    out, code = sh(string.format("LUA_CPATH='%s/lib/lua/%s/?.so' LUA_PATH='' ", prefix, ABI) .. LUA_CHECK)
    assert.are.equal(0, code, out)
    assert.are.equal("0.1.0 3", out)
  end)

  it("gives the installed module its TLS and RE2 objects", function()
    objects_open(prefix)
  end)

  it54("compiles and runs examples/host.c with pkg-config", "the host library is the Lua 5.4 build's", function()
    local exe = prefix .. "/host_pc"
    local out, code = sh(string.format(
      "cc -o %s examples/host.c $(PKG_CONFIG_PATH=%s/lib/pkgconfig pkg-config --cflags --libs protocall)", exe, prefix))
    assert.are.equal(0, code, out)
    host_ran(sh("LD_LIBRARY_PATH=" .. prefix .. "/lib " .. exe))
  end)

  it54("compiles examples/host.c in a CMake project with find_package(protocall), static and shared",
       "the host library is the Lua 5.4 build's", function()
    local proj = tmpdir()
    local f = assert(io.open(proj .. "/CMakeLists.txt", "wb"))
    f:write("cmake_minimum_required(VERSION 3.18)\nproject(uses_protocall C)\n",
            "find_package(protocall 0.1 REQUIRED)\n",
            "add_executable(host " .. os.getenv("PWD") .. "/examples/host.c)\n",
            "target_link_libraries(host PRIVATE protocall::protocall_static)\n",
            "add_executable(host_shared " .. os.getenv("PWD") .. "/examples/host.c)\n",
            "target_link_libraries(host_shared PRIVATE protocall::protocall_shared)\n")
    f:close()
    local out, code = sh(string.format("cmake -S %s -B %s/b -DCMAKE_PREFIX_PATH=%s >/dev/null && cmake --build %s/b",
                                       proj, proj, prefix, proj))
    assert.are.equal(0, code, out)
    local shared_out, shared_code = sh("LD_LIBRARY_PATH=" .. prefix .. "/lib " .. proj .. "/b/host_shared")
    out, code = sh(proj .. "/b/host")
    os.execute("rm -rf " .. proj)
    host_ran(out, code)
    host_ran(shared_out, shared_code)
  end)

  -- luarocks builds every rock in one folder, build.luarocks/: the LuaJIT
  -- rock built after the Lua 5.4 one must embed the layer as source, not
  -- the luac5.4 bytecode the first configure of that folder made.
  it54("embeds the Lua layer anew when its build folder is configured for the other runtime",
       "one check of the CMake build, from either runtime", function()
    local dir = tmpdir()
    local function embed(incdir)
      local out, code = sh(string.format("cmake -S . -B %s/b -DBUILD_TESTING=OFF -DPROTOCALL_LUA_INCDIR=%s >/dev/null"
        .. " && cmake --build %s/b --target embedded_lua.o", dir, incdir, dir)) -- that object alone
      assert.are.equal(0, code, out)
      local f = assert(io.open(dir .. "/b/embedded_lua.c", "rb"))
      local c = f:read("a")
      f:close()
      return c:match("lpc_embedded_binary = (%d)")
    end
    local first, luajit, again = embed("/usr/include/lua5.4"), embed("/usr/include/luajit-2.1"),
      embed("/usr/include/lua5.4")
    os.execute("rm -rf " .. dir)
    assert.are.same({ "1", "0", "1" }, { first, luajit, again })
  end)

  it("refuses Lua headers other than 5.4's and LuaJIT's when luarocks names them", function()
    local dir = tmpdir() -- a Lua 5.3's lua.h
    local f = assert(io.open(dir .. "/lua.h", "wb"))
    f:write("#define LUA_VERSION_NUM\t\t503\n")
    f:close()
    local out, code = sh(string.format("cmake -S . -B %s/b -DPROTOCALL_LUA_INCDIR=%s", dir, dir))
    os.execute("rm -rf " .. dir)
    assert.are_not.equal(0, code, out)
    assert.matches("protocall builds for Lua 5.4 and LuaJIT 2.1;", out, 1, true)
    assert.matches("lua.h is%s+neither", out)
  end)

  -- Under LuaJIT, luarocks for 5.1 is pointed at luajit and its headers by a
  -- configuration file named in LUAROCKS_CONFIG_5_1 (no root, no change to
  -- the user's configuration), as the README's "Install" says.
  it("builds and installs the rock with luarocks for " .. (R.luajit and "LuaJIT" or "Lua 5.4"), function()
    local src, tree = tmpdir(), tmpdir()
    local out, code = sh(string.format("cp -r CMakeLists.txt cmake core bindings lua %s/", src))
    assert.are.equal(0, code, out)
    local env = ""
    if R.luajit then
      local f = assert(io.open(src .. "/luarocks-luajit.lua", "wb"))
      f:write('lua_interpreter = "luajit"\n',
              'variables = { LUA = "/usr/bin/luajit", LUA_INCDIR = "/usr/include/luajit-2.1" }\n')
      f:close()
      env = "LUAROCKS_CONFIG_5_1=" .. src .. "/luarocks-luajit.lua "
    end
    out, code = sh(string.format("cd %s && %sluarocks --lua-version=%s make --tree %s "
                                 .. "bindings/lua/protocall-0.1.0-1.rockspec", src, env, ABI, tree))
    assert.are.equal(0, code, out)
    if R.luajit then assert.matches("Found luajit", out, 1, true) end -- CMake took the LuaJIT build
    out, code = sh(string.format("LUA_CPATH='%s/lib/lua/%s/?.so' "
                                 .. "LUA_PATH='%s/share/lua/%s/?.lua;%s/share/lua/%s/?/init.lua' ",
                                 tree, ABI, tree, ABI, tree, ABI) .. LUA_CHECK)
    local opened, why = pcall(objects_open, tree)
    os.execute("rm -rf " .. src .. " " .. tree)
    assert.are.equal(0, code, out)
    assert.are.equal("0.1.0 3", out)
    assert(opened, why)
  end)
end)

-- Installing for nginx (doc/openresty.md, "Installing for nginx"): the
-- LuaJIT build installed by `cmake --install --prefix DIR` into a scratch
-- nginx prefix, then Debian's nginx started there on the doc's nginx.conf
-- as written (the ```nginx file=nginx.conf block; only its two addresses
-- replaced by free ports), from the prefix, without LUA_PATH or LUA_CPATH:
-- the worker must map DIR/lib/lua/5.1/protocall.so and answer the doc's
-- call. Runs the same under lua5.4 and luajit (processes only).
describe("an install for nginx", function()
  local N = require "nginx_helper"
  local q = N.quote
  local LUAJIT_BUILD = os.getenv("PROTOCALL_LUAJIT_BUILD") or "build/luajit"
  local SERVE = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
  local absent = N.missing { ["/usr/bin/curl"] = "curl" }
  local prefix, nginx, server

  teardown(function()
    if nginx then nginx:close() end
    if server then server:close() end
    if prefix then os.execute("rm -rf " .. q(prefix)) end
  end)

  it("starts doc/openresty.md's nginx.conf as written, on the installed module only", function()
    if absent then
      if os.getenv("CI") then error("missing (required when CI is set): " .. absent) end
      return pending("nginx install spec skipped, missing: " .. absent)
    end
    local doc = N.read("doc/openresty.md")
    local conf = assert(doc:match("\n```nginx file=nginx%.conf\n(.-\n)```\n"), "no nginx.conf block in the doc")
    assert.is_nil(conf:find(N.ROOT, 1, true))
    prefix = tmpdir()
    local out, code = sh("chmod 755 " .. q(prefix) .. " && cmake --install " .. q(LUAJIT_BUILD) .. " --prefix "
      .. q(prefix) .. " && mkdir -p " .. q(prefix .. "/logs") .. " " .. q(prefix .. "/temp")
      .. " && ln -s /usr/lib/nginx/modules " .. q(prefix .. "/modules"))
    assert.are.equal(0, code, out)
    -- The doc's demo.Router server (examples/route_services.lua), on a free port.
    local err_file = prefix .. "/server.err"
    server = io.popen("exec sh -c " .. q("exec " .. q(SERVE) .. " serve -listen 127.0.0.1:0 "
      .. "examples/route_services.lua 2>" .. q(err_file) .. " & p=$!; cat >/dev/null; kill $p"), "w")
    local server_port
    for _ = 1, 200 do
      server_port = N.read(err_file):match("listening on 127%.0%.0%.1:(%d+)")
      if server_port then break end
      os.execute("sleep 0.05")
    end
    assert(server_port, "protocall serve did not start: " .. N.read(err_file))
    local port = N.free_port()
    conf = conf:gsub("127%.0%.0%.1:50051", "127.0.0.1:" .. server_port):gsub("127%.0%.0%.1:8080", "127.0.0.1:" .. port)
    N.write(prefix .. "/nginx.conf", conf)
    local g = "daemon off;" .. (R.capture("id -u"):match("^0") and " user root;" or "")
    nginx = io.popen("exec sh -c " .. q("cd " .. q(prefix) .. " && env -u LUA_PATH -u LUA_CPATH nginx -p "
      .. q(prefix .. "/") .. " -c nginx.conf -g " .. q(g) .. " >" .. q(prefix .. "/nginx.out")
      .. " 2>&1 & n=$!; cat >/dev/null; kill $n; wait $n"), "w")
    local body
    for _ = 1, 100 do
      body = R.capture("curl -s -m 10 'http://127.0.0.1:" .. port .. "/measure?name=install'")
      if body ~= "" then break end
      os.execute("sleep 0.1")
    end
    assert.are.equal("5 in 1 leg(s)\n", body, N.read(prefix .. "/nginx.out") .. N.read(prefix .. "/logs/error.log"))
    local master = N.read(prefix .. "/logs/nginx.pid"):match("%d+")
    local maps = R.capture("for w in $(pgrep -P " .. master .. "); do cat /proc/$w/maps; done")
    assert.matches(prefix .. "/lib/lua/5.1/protocall.so", maps, 1, true)
    assert.is_nil(maps:find(N.ROOT, 1, true))
  end)
end)
