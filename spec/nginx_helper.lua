--- Runs Debian's nginx (with libnginx-mod-http-lua) on a configuration
-- given as text, for spec/nginx_gateway_spec.lua and
-- spec/nginx_spec.lua (which starts examples/nginx/run.sh through M.launch) and
-- bench/gateway_nginx_bench.lua (from the repository root): a prefix of its
-- own under build/nginx/, nginx in the foreground under a shell that stops
-- it when its standard input, held here, closes (when the caller stops it
-- or ends, however it ends).
local R = require "runtime"
local socket = require "socket"

local M = {}

M.ROOT = R.capture("pwd"):gsub("\n$", "")

--- The files nginx and the LuaJIT build need: path -> what provides it.
M.NEEDED = {
  ["/usr/sbin/nginx"] = "nginx (Debian's nginx-light)",
  ["/usr/lib/nginx/modules/ngx_http_lua_module.so"] = "libnginx-mod-http-lua",
  ["/usr/share/lua/5.1/resty/core.lua"] = "lua-resty-core",
  [M.ROOT .. "/build/luajit/protocall.so"] = "the LuaJIT build (make build-luajit)",
}

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

function M.read(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("*a")
  f:close()
  return s
end

function M.write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

function M.quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local q = M.quote

--- What of M.NEEDED and `more` (path -> what) is missing, as one line, or nil.
function M.missing(more)
  local out = {}
  for _, t in ipairs { M.NEEDED, more or {} } do
    for path, what in pairs(t) do
      if not M.exists(path) then out[#out + 1] = what .. " (" .. path .. ")" end
    end
  end
  table.sort(out)
  return #out > 0 and table.concat(out, ", ") or nil
end

--- A free loopback port (bound and released; nginx binds it right after).
function M.free_port()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

--- n = launch(script, port, prefix, logs, seconds): runs the shell `script`
-- (which starts nginx on `port` and stops it when its standard input
-- closes) and waits until the port takes connections, at most `seconds`
-- (default 10). n.url is "http://127.0.0.1:PORT"; when nginx does not
-- start, the error carries the files `logs`.
function M.launch(script, port, prefix, logs, seconds)
  local pipe = io.popen("exec sh -c " .. q(script), "w")
  local n = { port = port, prefix = prefix, pipe = pipe, url = "http://127.0.0.1:" .. port }
  for _ = 1, (seconds or 10) * 20 do
    local c = socket.connect("127.0.0.1", port)
    if c then
      c:close()
      return n
    end
    os.execute("sleep 0.05")
  end
  local out = {}
  for i, path in ipairs(logs) do out[i] = M.read(path) end
  pipe:close()
  error("nginx did not start: " .. table.concat(out))
end

--- conf = lua_conf(workers, http): an nginx.conf for M.start running
-- `workers` worker processes with lua-nginx-module loaded, the Lua layer
-- of the repository and build/luajit's module on its paths, logs and temp
-- files in the prefix, no access log, and `http` (text) inside its http block.
function M.lua_conf(workers, http)
  return [[
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
daemon off;
master_process on;
worker_processes ]] .. workers .. [[;
pid logs/nginx.pid;
error_log logs/error.log warn;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path temp/body;
    proxy_temp_path temp/proxy;
    fastcgi_temp_path temp/fastcgi;
    uwsgi_temp_path temp/uwsgi;
    scgi_temp_path temp/scgi;
    lua_package_path "@ROOT@/lua/?.lua;/usr/share/lua/5.1/?.lua;;";
    lua_package_cpath "@ROOT@/build/luajit/?.so;;";
]] .. http .. "}\n"
end

--- n = start(name, conf, prepare, wrap): nginx on `conf` with "@ROOT@" (the
-- repository), "@PORT@" (a free port, n.port) and "@PREFIX@" (n.prefix)
-- filled in; `prepare(prefix)` (optional) runs first; `wrap` (optional) =
-- {command = a shell prefix nginx runs under (valgrind's), seconds = how
-- long it may take to start}. n.url is "http://127.0.0.1:PORT".
function M.start(name, conf, prepare, wrap)
  local port = M.free_port()
  local prefix = M.ROOT .. "/build/nginx/" .. name .. "-" .. port
  os.execute("rm -rf " .. q(prefix) .. "; mkdir -p " .. q(prefix .. "/conf") .. " " .. q(prefix .. "/logs") .. " "
    .. q(prefix .. "/temp"))
  if prepare then prepare(prefix) end
  conf = conf:gsub("@ROOT@", M.ROOT):gsub("@PORT@", tostring(port)):gsub("@PREFIX@", prefix)
  M.write(prefix .. "/conf/nginx.conf", conf)
  local user = R.capture("id -u"):match("^0") and " -g 'user root;'" or ""
  local script = (wrap and wrap.command .. " " or "") .. "nginx -p " .. q(prefix .. "/") .. " -c "
    .. q(prefix .. "/conf/nginx.conf") .. " -e " .. q(prefix .. "/logs/error.log") .. user
    .. " >" .. q(prefix .. ".out")
    .. " 2>&1 & n=$!; cat >/dev/null; kill -TERM $n 2>/dev/null; wait $n"
  return M.launch(script, port, prefix, { prefix .. ".out", prefix .. "/logs/error.log" },
    wrap and wrap.seconds)
end

--- Stops nginx (and waits for it) and removes its prefix.
function M.stop(n)
  if n and n.pipe then
    n.pipe:close()
    n.pipe = nil
    os.execute("rm -rf " .. q(n.prefix) .. " " .. q(n.prefix .. ".out"))
  end
end

return M
