-- The manual (README.md and doc/*.md): every code block marked runnable
-- runs and prints what the block after it shows, every link leads to a file
-- (and heading) of the repository, and doc/reference.md is what
-- doc/gen_reference.lua writes from the doc comments of lua/protocall/.
-- The marks are doc/contributing.md's ("Runnable blocks"):
--   ```lua run           a Lua script, run by the `protocall` command
--   ```lua run=NAME      blocks of one NAME run as one script, in order
--   ```lua run luajit    run by `luajit` with the LuaJIT build's module
--   ```sh run            sh -e from the repository root, build/release on PATH
--   ```LANG file=NAME    written to NAME before each of the document's
--                        runnable blocks runs (after the substitutions below)
--   ```output            what the runnable block before it prints (stdout
--                        and stderr), compared exactly
-- Each document runs in a scratch folder that links every entry of the
-- repository (so blocks see it as the root and what they write stays
-- there). `127.0.0.1:50051` in a block is a server of
-- examples/route_services.lua (`protocall serve`) the spec starts for that
-- block on a free port, `127.0.0.1:8080` another free port; processes left
-- with a pid file (*.pid) in the scratch folder are stopped after the block.
local R = require "runtime"
local socket = require "socket"

local ROOT = R.capture("pwd"):gsub("\n$", "")
local BIN = os.getenv("PROTOCALL_BIN") or (ROOT .. "/build/release/protocall")
if not BIN:match("^/") then BIN = ROOT .. "/" .. BIN end
local BINDIR = BIN:match("^(.*)/[^/]*$")
local LUAJIT_BUILD = os.getenv("PROTOCALL_LUAJIT_BUILD") or (ROOT .. "/build/luajit")
if not LUAJIT_BUILD:match("^/") then LUAJIT_BUILD = ROOT .. "/" .. LUAJIT_BUILD end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- Runs a shell command; its standard output and error together, and the
-- exit status.
local function run(cmd)
  local out, ok, code = R.capture("(" .. cmd .. ") 2>&1")
  return out, ok and 0 or code
end

local function documents()
  local list = { "README.md" }
  local p = io.popen("ls doc/*.md")
  for f in p:lines() do list[#list + 1] = f end
  p:close()
  return list
end

-------------------------------------------------------------------------------
-- Reading a document

-- Fenced blocks in order: {lang =, words = {set}, attrs = {k = v}, text =,
-- line =}. Fences may be indented (inside a list item); the indentation is
-- taken off the block's lines.
local function blocks_of(md)
  local blocks, cur, n = {}, nil, 0
  for line in (md .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    if cur then
      local ticks = line:match("^%s*(```+)%s*$")
      if ticks and #ticks >= #cur.fence then
        cur.text = table.concat(cur.lines, "\n") .. (#cur.lines > 0 and "\n" or "")
        cur.lines = nil
        blocks[#blocks + 1] = cur
        cur = nil
      else
        cur.lines[#cur.lines + 1] = line:sub(1, #cur.indent) == cur.indent and line:sub(#cur.indent + 1) or line
      end
    else
      local ind, fence, info = line:match("^(%s*)(```+)%s*(.-)%s*$")
      if fence then
        local b = { indent = ind, fence = fence, lines = {}, line = n, words = {}, attrs = {} }
        local first = true
        for w in info:gmatch("%S+") do
          if first then
            b.lang = w
            first = false
          end
          local k, v = w:match("^([%w_]+)=(.*)$")
          if k then b.attrs[k] = v else b.words[w] = true end
        end
        b.lang = b.lang or ""
        cur = b
      end
    end
  end
  assert(cur == nil, "a fence opened at line " .. (cur and cur.line or 0) .. " never closes")
  return blocks
end

local function runnable(b) return b.words.run or b.attrs.run end

-- The units to run: {name, blocks = {...}, kind = "lua" | "luajit" | "sh",
-- expected = output or nil, line}; blocks of one run=NAME form one unit.
local function units_of(blocks)
  local units, by_name, files = {}, {}, {}
  for i, b in ipairs(blocks) do
    if b.attrs.file then files[#files + 1] = b end
    if runnable(b) then
      local kind = b.lang == "sh" and "sh" or (b.words.luajit and "luajit" or b.lang)
      assert(kind == "lua" or kind == "sh" or kind == "luajit",
             "line " .. b.line .. ": a runnable block is lua or sh, not " .. b.lang)
      local nxt = blocks[i + 1]
      local out = nxt and nxt.lang == "output" and nxt.text or nil
      local name = b.attrs.run
      local u = name and by_name[name]
      if not u then
        u = { name = name, blocks = {}, kind = kind, line = b.line, outputs = {}, has_output = false }
        units[#units + 1] = u
        if name then by_name[name] = u end
      end
      u.blocks[#u.blocks + 1] = b
      u.outputs[#u.outputs + 1] = out or ""
      u.has_output = u.has_output or out ~= nil
    end
  end
  return units, files
end

-------------------------------------------------------------------------------
-- Running

local function free_port()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

-- A scratch folder linking every entry of the repository.
local function scratch()
  local dir = R.capture("mktemp -d /tmp/protocall-doc.XXXXXX"):gsub("\n$", "")
  assert(os.execute("chmod 755 " .. q(dir) .. " && for f in $(ls -A " .. q(ROOT) .. "); do ln -s "
    .. q(ROOT) .. "/$f " .. q(dir) .. "/$f; done"))
  return dir
end

-- Starts `protocall serve` of examples/route_services.lua on a free port.
local function start_server(dir)
  local pidf, errf = dir .. "/.doc-server.pid", dir .. "/.doc-server.err"
  os.remove(errf)
  os.execute("cd " .. q(dir) .. " && sh -c 'echo $$ > " .. pidf .. "; exec " .. q(BIN)
    .. " serve -listen 127.0.0.1:0 examples/route_services.lua' 2>" .. q(errf) .. " >/dev/null &")
  for _ = 1, 200 do
    local port = (read(errf) or ""):match("listening on 127%.0%.0%.1:(%d+)")
    if port then return port end
    os.execute("sleep 0.05")
  end
  error("protocall serve did not start: " .. (read(errf) or ""))
end

-- Stops every process a pid file in `dir` names (the server, a daemon a
-- block started) and removes the files.
local function stop_all(dir)
  os.execute("for f in $(find " .. q(dir) .. " -maxdepth 4 -name '*.pid' -newer " .. q(dir .. "/.doc-start")
    .. " 2>/dev/null); do kill $(cat \"$f\") 2>/dev/null; rm -f \"$f\"; done")
  os.execute("sleep 0.1")
end

local function substitute(text, ports)
  return (text:gsub("127%.0%.0%.1:50051", "127.0.0.1:" .. (ports.server or 50051))
              :gsub("127%.0%.0%.1:8080", "127.0.0.1:" .. ports.free))
end

local function run_unit(dir, u, files)
  local text = {}
  for _, b in ipairs(u.blocks) do text[#text + 1] = b.text end
  text = table.concat(text, "\n")
  local ports = { free = free_port() }
  write(dir .. "/.doc-start", "")
  local uses = text
  for _, b in ipairs(files) do uses = uses .. b.text end
  if uses:find("127.0.0.1:50051", 1, true) then ports.server = start_server(dir) end
  local ok, out, code = pcall(function()
    for _, b in ipairs(files) do write(dir .. "/" .. b.attrs.file, substitute(b.text, ports)) end
    local body = substitute(text, ports)
    if u.kind == "sh" then
      write(dir .. "/.doc-block.sh", body)
      return run("cd " .. q(dir) .. " && PATH=" .. q(BINDIR) .. ":$PATH sh -e .doc-block.sh")
    elseif u.kind == "luajit" then
      write(dir .. "/.doc-block.lua", body)
      return run("cd " .. q(dir) .. " && LUA_CPATH=" .. q(LUAJIT_BUILD .. "/?.so;;") .. " luajit .doc-block.lua")
    else
      write(dir .. "/.doc-block.lua", body)
      return run("cd " .. q(dir) .. " && " .. q(BIN) .. " .doc-block.lua")
    end
  end)
  stop_all(dir)
  if not ok then error(out, 0) end
  return out, code
end

-------------------------------------------------------------------------------
-- Links

local function anchor_of(heading)
  local t = heading:gsub("`", ""):gsub("\\(.)", "%1"):gsub("%[([^%]]*)%]%([^%)]*%)", "%1")
  return (t:lower():gsub("[^%w%s%-_]", ""):gsub("%s", "-"))
end

-- The anchors of a markdown file's headings, as GitHub makes them.
local function anchors(md)
  local set, used = {}, {}
  local fenced = false
  for line in (md .. "\n"):gmatch("(.-)\n") do
    if line:match("^%s*```") then fenced = not fenced end
    local h = not fenced and line:match("^#+%s+(.-)%s*$")
    if h then
      local a = anchor_of(h)
      local n = used[a]
      used[a] = (n or 0) + 1
      set[n and (a .. "-" .. n) or a] = true
    end
  end
  return set
end

-- The links of a markdown file outside code: {target =, line =}.
local function links(md)
  local out, n, fenced = {}, 0, false
  for line in (md .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    if line:match("^%s*```") then
      fenced = not fenced
    elseif not fenced then
      local plain = line:gsub("``.-``", ""):gsub("`[^`]*`", "")
      for target in plain:gmatch("%]%(([^%)%s]+)%)") do out[#out + 1] = { target = target, line = n } end
    end
  end
  return out
end

-------------------------------------------------------------------------------

describe("the manual's links", function()
  for _, doc in ipairs(documents()) do
    it(doc .. ": every link leads to a file of the repository, and to a heading there", function()
      local md = assert(read(doc))
      local base = doc:match("^(.*)/[^/]*$") or "."
      local bad = {}
      for _, l in ipairs(links(md)) do
        local path, frag = l.target:match("^([^#]*)#?(.*)$")
        local problem
        if l.target:match("^%a[%w+.-]*:") then
          problem = "not a file of the repository"
        else
          local file = path == "" and doc or (base .. "/" .. path)
          if not exists(file) then
            problem = "no such file"
          elseif frag ~= "" then
            if not file:match("%.md$") then
              problem = "an anchor into a file that is not markdown"
            elseif not anchors(assert(read(file)))[frag] then
              problem = "no heading with that anchor"
            end
          end
        end
        if problem then bad[#bad + 1] = doc .. ":" .. l.line .. ": " .. l.target .. ": " .. problem end
      end
      assert.are.same({}, bad)
    end)
  end
end)

describe("doc/reference.md", function()
  it("is what doc/gen_reference.lua writes from the doc comments of lua/protocall/ (make doc)", function()
    local out, code = run("lua5.4 doc/gen_reference.lua --check doc/reference.md")
    assert.are.equal(0, code, out)
  end)
end)

for _, doc in ipairs(documents()) do
  local units, files = units_of(blocks_of(assert(read(doc))))
  if #units > 0 then
    describe(doc .. ", runnable blocks", function()
      local dir
      setup(function() dir = scratch() end)
      teardown(function()
        if dir then
          stop_all(dir)
          os.execute("rm -rf " .. q(dir))
        end
      end)
      local other = 0 -- blocks of the other runtime's pass: one pending line for them all
      for _, u in ipairs(units) do
        local title = (u.name and ("run=" .. u.name) or u.kind) .. " block at line " .. u.line
        if (u.kind == "luajit") ~= (R.luajit == true) then
          other = other + 1
        else
          it(title .. (u.has_output and ", printing what the document shows" or ""), function()
            local out, code = run_unit(dir, u, files)
            assert.are.equal(0, code, out)
            if u.has_output then assert.are.equal(table.concat(u.outputs), out) end
          end)
        end
      end
      if other > 0 then
        pending(("%d block(s) %s"):format(other, R.luajit and "[run by the Lua 5.4 passes of make test]"
          or "[LuaJIT only: the LuaJIT pass of make test runs them]"))
      end
    end)
  end
end
