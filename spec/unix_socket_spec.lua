-- Unix-domain sockets (gRPC's naming: unix:path, unix:///abs/path,
-- unix-abstract:name): pc.grpc and pc.listen to each other over a socket
-- file and an abstract name, the file's mode, a stale file replaced and
-- one in use refused, python3-grpcio as the server (spec/grpc_server.py
-- with PC_SERVER_ADDRESS) and as the client, the `protocall call`
-- command's TARGET, and the spellings refused.
local pc = require "protocall"
local helper = require "grpc_helper"
local R = require "runtime"

local pool = pc.pool()
assert(pool:load([[
syntax = "proto3";
package ux;
message Point { int32 x = 1; int32 y = 2; }
message Sum { int64 total = 1; }
service Calc { rpc Add(Point) returns (Sum); }
]], { name = "ux/calc.proto" }))

local server = pc.server({ ["ux.Calc"] = {
  Add = function(p) return { total = p.x + p.y } end,
} }, { pool = pool })

local dir
setup(function()
  dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir " .. dir))
end)
teardown(function() os.execute("rm -rf " .. dir) end)

local function exists(path)
  return os.execute("test -e " .. path) == true or os.execute("test -e " .. path) == 0
end

local function mode_of(path)
  local h = io.popen("stat -c %a " .. path)
  local m = h:read("l")
  h:close()
  return m
end

-- Serves `server` on `address` while fn(listener) runs in a task.
local function serving(address, opts, fn)
  local l = pc.listen(server, address, opts)
  local failed
  pc.spawn(function() l:serve() end)
  pc.spawn(function()
    local ok, err = pcall(fn, l)
    if not ok then failed = err end
    l:shutdown(1)
  end)
  pc.run()
  if failed then error(failed, 0) end
end

describe("unix: sockets", function()
  it("carries calls between pc.grpc and pc.listen on a file and an abstract name", function()
    local path = dir .. "/calc.sock"
    for _, spelled in ipairs { { "unix:" .. path, "unix:" .. path }, { "unix:" .. path, "unix://" .. path },
                               { "unix-abstract:pc-ux-" .. os.time(), nil } } do
      local address, target = spelled[1], spelled[2] or spelled[1]
      local file = address:find("^unix:")
      serving(address, file and { mode = "0660" } or nil, function(l)
        assert.are.equal(0, l.port)
        if file then assert.are.equal("660", mode_of(path)) end
        local c = pc.client("ux.Calc", { pool = pool, transport = pc.grpc(target) })
        assert.are.equal(5, c:Add({ x = 2, y = 3 }, { timeout = 5 }).total)
      end)
      if file then assert.is_false(exists(path), "the socket file is removed at shutdown") end
    end
  end)

  it("sets a numeric mode, replaces a stale socket file and refuses one in use", function()
    local path = dir .. "/stale.sock"
    -- a stale socket file: bound by a process that is gone
    assert(os.execute("/usr/bin/python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.bind('"
      .. path .. "')\""))
    assert.is_true(exists(path))
    serving("unix:" .. path, { mode = 384 }, function()
      assert.are.equal("600", mode_of(path))
      local ok, err = pcall(pc.listen, server, "unix:" .. path)
      assert.is_false(ok)
      assert.matches("pc.listen: listen on unix:" .. path:gsub("%p", "%%%0") .. ": in use %(a server listens there%)",
        tostring(err))
    end)
    local f = assert(io.open(path, "w"))
    f:close()
    local ok, err = pcall(pc.listen, server, "unix:" .. path)
    assert.is_false(ok)
    assert.matches("the file exists and is not a socket", tostring(err))
    assert.is_true(exists(path), "a file that is not a socket is left alone")
  end)

  it("refuses what is not a Unix-socket address, with the reason", function()
    local long = "/" .. ("a"):rep(107)
    local function refused(fn, ...)
      local ok, err = pcall(fn, ...)
      assert.is_false(ok)
      return tostring(err)
    end
    assert.matches("path longer than 107 bytes %(sun_path%)", refused(pc.grpc, "unix:" .. long))
    assert.matches("path longer than 107 bytes %(sun_path%)", refused(pc.listen, server, "unix:" .. long))
    assert.matches("name longer than 106 bytes", refused(pc.grpc, "unix-abstract:" .. ("n"):rep(107)))
    assert.matches("unix://ABSOLUTE_PATH expected", refused(pc.grpc, "unix://relative/x.sock"))
    assert.matches("an empty path", refused(pc.listen, server, "unix:"))
    assert.matches("option 'mode' is for a unix: address",
      refused(pc.listen, server, "127.0.0.1:0", { mode = "0600" }))
    local m = "unix:" .. dir .. "/m.sock"
    assert.matches("option 'mode' must be a string of octal digits", refused(pc.listen, server, m, { mode = "rw" }))
    assert.matches("option 'mode' must be a string of octal digits", refused(pc.listen, server, m, { mode = 5000 }))
    local t = pc.grpc("unix:" .. dir .. "/nobody.sock")
    local err = helper.failure(t.unary, t, "/ux.Calc/Add", "", { timeout = 2 })
    assert.are.equal("UNAVAILABLE", err.code)
    assert.matches("connect to unix:" .. dir:gsub("%p", "%%%0") .. "/nobody.sock: No such file or directory",
      err.message)
  end)

  it("calls a python3-grpcio server on unix: (and the protocall command does)", function()
    local path = dir .. "/grpcio.sock"
    local srv = helper.spawn_command("env PC_SERVER_ADDRESS=unix:" .. path
      .. " /usr/bin/python3 spec/grpc_server.py grpc 0", "grpc_server.py on unix:")
    local ok, err = pcall(function()
      local t = pc.grpc("unix:" .. path)
      assert.are.equal("hello", t:unary("/test.Test/Echo", "hello", { timeout = 5 }))
      local peer = t:unary("/test.Test/Peer", "", { timeout = 5 })
      assert.matches("^unix:", peer)
      t:close()
      if not R.luajit then
        local bin = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
        local schema = " -I spec/fixtures/protos -proto grpc/faults.proto "
        local h = io.popen(bin .. " call -plaintext" .. schema .. "-d '{\"text\":\"via cli\"}' unix:"
          .. path .. " faults.Faults/Echo 2>&1")
        local out = h:read("a")
        h:close()
        assert.matches("via cli", out)
        h = io.popen(bin .. " call" .. schema .. "unix:" .. path .. " faults.Faults/Echo 2>&1")
        out = h:read("a")
        h:close()
        assert.matches("a unix: TARGET is h2c: give %-plaintext", out)
      end
    end)
    helper.stop(srv)
    if not ok then error(err, 0) end
  end)

  it("serves a python3-grpcio client on unix:", function()
    local path = dir .. "/served.sock"
    local script = dir .. "/client.py"
    local f = assert(io.open(script, "w"))
    f:write([[
import sys, grpc
ch = grpc.insecure_channel(sys.argv[1])
add = ch.unary_unary("/ux.Calc/Add")
print("sum", add(b"\x08\x02\x10\x03", timeout=10).hex())
]])
    f:close()
    local out = dir .. "/client.out"
    serving("unix:" .. path, nil, function()
      os.execute("/usr/bin/python3 " .. script .. " unix:" .. path .. " > " .. out .. " 2>&1 &")
      for _ = 1, 1000 do
        local g = io.open(out)
        local text = g and g:read("a") or ""
        if g then g:close() end
        if text:find("\n") and (text:find("sum") or text:find("Error")) then break end
        pc.sleep(0.01)
      end
    end)
    local g = assert(io.open(out))
    local text = g:read("a")
    g:close()
    assert.are.equal("sum 0805\n", text)
  end)
end)
