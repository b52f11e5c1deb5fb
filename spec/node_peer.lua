--- Spec helper for the peers written in JavaScript: the npm packages of the
-- repository's package.json (other implementations of gRPC, Connect and
-- gRPC-Web, the `buf` command), installed into node_modules/ by
-- .ci/install-deps (`npm ci`), run by Node.js from PATH. The scripts sit in
-- spec/node/ and find the packages by Node's own resolution (node_modules/
-- of the repository root); schemas reach them as a FileDescriptorSet made
-- with protoc (M.descriptor_set), read at run time with @bufbuild/protobuf.
-- Specs run from the repository root.
--
--   local peer = require "node_peer"
--   local absent = peer.missing("@grpc/grpc-js")   -- nil when all is there
--   if absent then
--     describe("...", function()
--       it("runs", function() peer.skip(pending, "grpc-js interop", absent) end)
--     end)
--     return
--   end
--   local out = peer.run("grpcjs_client.mjs", { set, port, "unary" })
--   local server = peer.serve("grpcjs_server.mjs", { set })   -- .port
--   peer.stop(server)
--
-- M.run polls with pc.sleep, so inside a task of pc.run the other tasks
-- (a pc.listen the script calls) go on while the script runs.
local pc = require "protocall"
local helper = require "grpc_helper"

local M = {}

--- The folder of the scripts, and the one npm installs into.
M.scripts = "spec/node"
M.modules = "node_modules"

--- Node.js major version the packages need (package.json's engines).
M.node_major = 20

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.quote = quote

--- text = M.json(v): `v` (tables, strings, numbers, booleans) as JSON
-- text for the node scripts: a table with a first element (or the
-- metatable "array", for an empty one) an array, else an object with its
-- keys sorted.
function M.json(v)
  local t = type(v)
  if t == "table" then
    if #v > 0 or next(v) == nil and getmetatable(v) == "array" then
      local parts = {}
      for i, x in ipairs(v) do parts[i] = M.json(x) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local parts = {}
    for k, x in pairs(v) do parts[#parts + 1] = string.format("%q:%s", k, M.json(x)) end
    table.sort(parts)
    return "{" .. table.concat(parts, ",") .. "}"
  elseif t == "string" then
    return (string.format("%q", v):gsub("\\\n", "\\n"))
  end
  return tostring(v)
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local node_problem -- cached: false when node is there, else why not
local function check_node()
  if node_problem == nil then
    local f = io.popen("node --version 2>/dev/null")
    local v = f:read("*l")
    f:close()
    local major = v and tonumber(v:match("^v(%d+)%."))
    if not major then
      node_problem = "node not found on PATH (Node.js " .. M.node_major .. " or later)"
    elseif major < M.node_major then
      node_problem = "node " .. v .. " is older than " .. M.node_major
    else
      node_problem = false
    end
  end
  return node_problem or nil
end

--- reason = M.missing(package, ...): nil when node runs and every npm
-- package named ("@grpc/grpc-js", "buf" for the command of @bufbuild/buf)
-- is installed; else what is missing, for M.skip.
function M.missing(...)
  local problem = check_node()
  if problem then return problem end
  local absent = {}
  for _, name in ipairs { ... } do
    local path = name == "buf" and M.modules .. "/.bin/buf" or M.modules .. "/" .. name .. "/package.json"
    local f = io.open(path)
    if f then f:close() else absent[#absent + 1] = name end
  end
  if #absent == 0 then return nil end
  return "npm package(s) not installed: " .. table.concat(absent, ", ")
    .. " (.ci/install-deps runs npm ci from package-lock.json)"
end

--- Inside an `it`: marks it pending because `what` cannot run for
-- `reason` (M.missing's), a visible skip in the summary; raises instead when
-- env CI is set, where every peer must be installed. Pass busted's
-- `pending` as seen inside the `it` (busted keeps it in the spec file's
-- environment), as spec/corpus.lua's skip takes it.
function M.skip(pending, what, reason)
  if os.getenv("CI") then error(what .. ": " .. reason .. " (required when CI is set)", 2) end
  pending(what .. " skipped: " .. reason)
end

--- path = M.descriptor_set(files, import_paths): a FileDescriptorSet of
-- `files` (names inside `import_paths`) and everything they import, made
-- with `protoc --include_imports -o` into a new temporary file (the caller
-- removes it).
function M.descriptor_set(files, import_paths)
  local args = {}
  for _, dir in ipairs(import_paths) do args[#args + 1] = "-I " .. quote(dir) end
  for _, f in ipairs(files) do args[#args + 1] = quote(f) end
  local out = os.tmpname()
  local cmd = "protoc --include_imports -o " .. quote(out) .. " " .. table.concat(args, " ") .. " 2>&1"
  local f = io.popen(cmd)
  local msg = f:read("*a")
  f:close()
  local bytes = read(out)
  if not bytes or #bytes == 0 then
    os.remove(out)
    error("protoc failed: " .. cmd .. "\n" .. msg, 2)
  end
  return out
end

--- out, err, code = M.command(command, opts): runs the shell command
-- `command` in the background, polling for its end with pc.sleep (so a
-- server of the same pc.run serves meanwhile); its standard output, its
-- standard error and its exit code. opts.timeout (seconds, 60 by default):
-- then it is killed and this raises with what it printed.
function M.command(command, opts)
  local timeout = opts and opts.timeout or 60
  local base = os.tmpname()
  local out, err, rc, pidf = base .. ".out", base .. ".err", base .. ".rc", base .. ".pid"
  local script = command .. " >" .. quote(out) .. " 2>" .. quote(err) .. " </dev/null & pid=$!; echo $pid >"
    .. quote(pidf) .. "; wait $pid; echo $? >" .. quote(rc)
  os.execute("sh -c " .. quote(script) .. " >/dev/null 2>&1 &")
  local code
  local deadline = pc.now() + timeout
  repeat
    code = tonumber(read(rc) or "")
    if code then break end
    pc.sleep(0.01)
  until pc.now() > deadline
  local stdout, stderr = read(out) or "", read(err) or ""
  if not code then
    local pid = tonumber(read(pidf) or "")
    if pid then os.execute("kill -9 " .. pid .. " 2>/dev/null") end
  end
  for _, p in ipairs { base, out, err, rc, pidf } do os.remove(p) end
  if not code then
    error(("%s: still running after %g s (killed)\nstdout:\n%s\nstderr:\n%s"):format(command, timeout, stdout,
      stderr), 2)
  end
  return stdout, stderr, code
end

local function node_command(script, args)
  local words = { "node", quote(M.scripts .. "/" .. script) }
  for _, a in ipairs(args or {}) do words[#words + 1] = quote(a) end
  return table.concat(words, " ")
end

--- out = M.run(script, args, opts): runs `node spec/node/SCRIPT ARGS...`
-- as M.command does and returns its standard output; raises with its
-- standard error when it exits other than 0.
function M.run(script, args, opts)
  local command = node_command(script, args)
  local out, err, code = M.command(command, opts)
  if code ~= 0 then
    error(("%s: exit %d\nstdout:\n%s\nstderr:\n%s"):format(command, code, out, err), 2)
  end
  return out
end

--- The path of command `name` of the npm packages (node_modules/.bin).
function M.bin(name) return M.modules .. "/.bin/" .. name end

--- server = M.serve(script, args): starts `node spec/node/SCRIPT ARGS...`,
-- a server that prints "PORT PID" as its first line and exits when its
-- standard input closes (grpc_helper.spawn_command); server.port,
-- server.url. Stop it with M.stop.
function M.serve(script, args)
  return helper.spawn_command(node_command(script, args), script)
end

M.stop = helper.stop

return M
