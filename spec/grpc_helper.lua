--- Test and benchmark helper: starts spec/grpc_server.py (run with Debian's
-- /usr/bin/python3) and stops it, and what the gRPC specs share (errors,
-- test certificates). Used by the gRPC specs and the gRPC benches, all run
-- from the repository root.
local M = {}

local PYTHON = "/usr/bin/python3"
local SERVER = "spec/grpc_server.py"

--- `l, got = helper.recording_router(pc)`: a demo.Router server
-- (examples/route.proto) listening on 127.0.0.1:0, served by a task of
-- `pc.spawn`, whose Record handler appends "started" to `got` and then the
-- x of each point it receives: for specs of what reaches a handler while
-- the client's task does something else.
function M.recording_router(pc)
  assert(pc.load_file("examples/route.proto"))
  local got = {}
  local server = pc.server { ["demo.Router"] = {
    Record = function(ctx)
      got[#got + 1] = "started"
      while true do
        local p = ctx:recv()
        if p == nil then break end
        got[#got + 1] = p.x
      end
      return { legs = 0 }
    end } }
  local l = pc.listen(server, "127.0.0.1:0")
  pc.spawn(function() l:serve() end)
  return l, got
end

--- Wall-clock seconds (Lua's os.clock is processor time).
function M.now()
  local f = io.popen("date +%s.%N")
  local t = tonumber(f:read("*l"))
  f:close()
  return t
end

--- Starts the server command `command` (a shell word list, run with
-- exec) that prints "PORT PID" as its first line and exits when its
-- standard input closes; returns {port=, pid=, url="http://127.0.0.1:PORT"}.
-- The pipe to its standard input is held here, so it cannot outlive a
-- failed spec. `label` names it in the error raised when it does not start.
-- `pattern` (optional) reads the first line instead: one capture, the port
-- (no pid then: M.stop closes the pipe, and the server stops at end of file).
-- The line counts once its newline is there: Python's print(port, pid)
-- writes its pieces one by one when unbuffered (PYTHONUNBUFFERED), so the
-- file can hold "PORT" alone for a moment.
function M.spawn_command(command, label, pattern)
  local out = os.tmpname()
  local pipe = io.popen("exec " .. command .. " > " .. out .. " 2>/dev/null", "w")
  for _ = 1, 200 do
    local f = io.open(out)
    local line = f and f:read("*a"):match("^([^\n]*)\n")
    if f then f:close() end
    if line then
      os.remove(out)
      local p, pid
      if pattern then p = line:match(pattern) else p, pid = line:match("^(%d+) (%d+)$") end
      if not p then
        pipe:close()
        error(label .. " printed '" .. line .. "'")
      end
      return { port = tonumber(p), pid = pid, pipe = pipe, url = "http://127.0.0.1:" .. p }
    end
    os.execute("sleep 0.05")
  end
  pipe:close()
  os.remove(out)
  error(label .. " did not start")
end

--- Starts `grpc_server.py MODE PORT ...` (PORT 0: a free one), as
-- M.spawn_command.
function M.spawn(mode, port, ...)
  local args = table.concat({ mode, tostring(port or 0), ... }, " ")
  return M.spawn_command(PYTHON .. " " .. SERVER .. " " .. args, "grpc_server.py " .. mode)
end

--- Kills a server from M.spawn or M.spawn_command (SIGKILL: no goodbye on its connections).
function M.stop(server)
  if server and server.pipe then
    if server.pid then os.execute("kill -9 " .. server.pid .. " 2>/dev/null") end
    server.pipe:close()
    server.pipe = nil
  end
end

--- `err = M.failure(fn, ...)`: the error `fn(...)` raised, asserting that it
-- raised a table (a pc.Error, a pc.RetryError). For specs (busted's
-- luassert, loaded here so the benches need no busted).
function M.failure(fn, ...)
  local luassert = require "luassert"
  local ok, err = pcall(fn, ...)
  luassert.is_false(ok, "the call succeeded")
  luassert.are.equal("table", type(err), tostring(err))
  return err
end

--- `err = M.status_error(fn, ...)`: as M.failure, asserting a pc.Error.
function M.status_error(fn, ...)
  local err = M.failure(fn, ...)
  require("luassert").are.equal(require("protocall").Error, getmetatable(err), tostring(err))
  return err
end

--- Test certificates made with openssl in a new temporary folder (its
-- path returned; the caller removes it): a CA (ca.pem, ca.key), a server
-- certificate for localhost / 127.0.0.1 (server.pem, server.key) and a
-- client certificate (client.pem, client.key), both signed by the CA.
function M.make_certs()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir " .. dir))
  local function run(cmd) assert(os.execute("cd " .. dir .. " && " .. cmd .. " 2>/dev/null"), cmd) end
  run("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=protocall-test-ca -keyout ca.key -out ca.pem")
  run("printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext")
  run("printf 'extendedKeyUsage=clientAuth\\n' > client.ext")
  for _, who in ipairs { "server", "client" } do
    run("openssl req -newkey rsa:2048 -nodes -subj /CN=" .. who .. " -keyout " .. who .. ".key -out "
      .. who .. ".csr")
    run("openssl x509 -req -in " .. who .. ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile "
      .. who .. ".ext -out " .. who .. ".pem")
  end
  return dir
end

return M
