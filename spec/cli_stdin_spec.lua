-- What `protocall call -d @` reads a stream's standard input with, under
-- both runtimes (the command's own specs, spec/cli_spec.lua, are Lua 5.4
-- only): the JSON documents of a stream split as it arrives
-- (protocall.cli.common.json_splitter), and standard input or a FIFO read
-- without waiting (core.read_ready, core.open_fifo, bindings/lua/lpc_net.c).
local R = require "runtime"
require "protocall"
local core = require "protocall.core"
local common = require "protocall.cli.common"

-- The documents of `chunks` fed to a splitter one at a time, the end
-- too; or the failure's text.
local function split_all(chunks)
  local split, docs = common.json_splitter(), {}
  local ok, err = pcall(function()
    for i = 1, #chunks + 1 do
      for _, d in ipairs(split(chunks[i])) do docs[#docs + 1] = d end
    end
  end)
  if not ok then return getmetatable(err) == common.Failure and err.msg or tostring(err) end
  return docs
end

describe("protocall.cli.common.json_splitter", function()
  local STREAM = '{"a": "x}\\"{", "b": [1, {"c": 2}]}\n[3]"s\\\\" 12 -4.5e+3 true{}null "\\u00e9"'
  local WHOLE = { '{"a": "x}\\"{", "b": [1, {"c": 2}]}', "[3]", '"s\\\\"', "12", "-4.5e+3", "true", "{}",
    "null", '"\\u00e9"' }

  it("splits a stream cut anywhere, in one piece or a byte at a time, as json_documents does whole", function()
    assert.are.same(WHOLE, common.json_documents(STREAM))
    for cut = 0, #STREAM do
      assert.are.same(WHOLE, split_all { STREAM:sub(1, cut), STREAM:sub(cut + 1) }, "cut at " .. cut)
    end
    local bytes = {}
    for i = 1, #STREAM do bytes[i] = STREAM:sub(i, i) end
    assert.are.same(WHOLE, split_all(bytes))
  end)

  it("hands out each document as soon as its chunk completes it (a bare word at its end)", function()
    local split = common.json_splitter()
    assert.are.same({}, split('{"x": '))
    assert.are.same({ '{"x": 1}' }, split('1}\n{"y"'))
    assert.are.same({ '{"y": 2}' }, split(': 2} 12')) -- a number may go on
    assert.are.same({ "123" }, split("3 "))
    assert.are.same({}, split(nil))
  end)

  it("names the offset in the whole stream of what fails", function()
    assert.are.equal("unbalanced '}' at offset 9", split_all { '{"x": 1}\n', "}" })
    assert.are.equal("JSON value expected at offset 4", split_all { '"x" ', "nope" })
    assert.are.equal("JSON value expected at offset 4", split_all { '"x" no', "pe" })
    assert.are.equal("the string at offset 4 is not closed", split_all { '"x" "y', "z" })
    assert.are.equal("the last JSON document is not closed", split_all { '{"x": [1', "]" })
  end)
end)

describe("protocall.cli.common.json_splitter with a bound", function()
  -- The documents of `chunks` fed to a splitter bounded at 8 bytes, or
  -- the offset it called over() with.
  local function bounded(chunks)
    local split, docs = common.json_splitter(8, function(at) error({ at = at }) end), {}
    local ok, err = pcall(function()
      for i = 1, #chunks + 1 do
        for _, d in ipairs(split(chunks[i])) do docs[#docs + 1] = d end
      end
    end)
    if not ok then return type(err) == "table" and err.at or tostring(err) end
    return docs
  end

  it("takes documents of up to the bound, and names the offset of one past it, whole or still open", function()
    assert.are.same({ "[1]", '"123456"', "12345678" }, bounded { ' [1] "123', '456" 1234', "5678 " })
    assert.are.equal(5, bounded { ' [1] "1234', '5678"' }) -- whole at its end
    assert.are.equal(3, bounded { " {}" .. '{"a": "', ("x"):rep(10) }) -- open: not kept whole
    assert.are.equal(0, bounded { "123456789 " }) -- a bare word
    assert.are.equal(0, bounded { "12345", "6789" }) -- one open at the end
  end)
end)

describe("core.read_ready", function()
  local dir = R.module_build()
  -- the LuaJIT module in a stock luajit, else the protocall command of the
  -- build under test ($PROTOCALL_BIN: under ASan a stock lua5.4 cannot load
  -- the sanitizer build's module)
  local lua = R.luajit and "luajit" or (os.getenv("PROTOCALL_BIN") or "build/release/protocall")

  it("reads what a pipe holds without waiting: the bytes, \"\" while nothing is there, nil at its end", function()
    -- the writer sends "ab", then waits for a file the reader makes once it
    -- has read "" after "ab", then sends "cd" and ends
    local go = os.tmpname()
    os.remove(go)
    local script = ("package.cpath = %q; require 'protocall'; local core = require 'protocall.core'; "
      .. "local seen, got = {}, '' "
      .. "for _ = 1, 3000 do local c = core.read_ready(0) "
      .. "if c == nil then seen[#seen + 1] = 'nil' break end "
      .. "if c ~= '' then got = got .. c; seen[#seen + 1] = c "
      .. "elseif got == 'ab' and seen[#seen] ~= '' then seen[#seen + 1] = ''; io.open(%q, 'w'):close() end "
      .. "core.sleep(0.01) end io.write(table.concat(seen, '|'))"):format(dir .. "/?.so", go)
    local h = io.popen(("(printf ab; n=0; while [ ! -e %s ] && [ $n -lt 300 ]; do sleep 0.05; n=$((n+1)); done; "
      .. "printf cd) | %s -e %q"):format(go, lua, script))
    local out = h:read("a")
    h:close()
    os.remove(go)
    assert.are.equal("ab||cd|nil", out)
  end)

  it("returns nil and why for a source it cannot read; refuses any but standard input and a FIFO", function()
    local dir_handle = assert(core.open_fifo("/")) -- (a directory opens; its read fails)
    assert.are.same({ nil, "read: Is a directory" }, { core.read_ready(dir_handle) })
    dir_handle:close()
    for _, bad in ipairs { 1, 2, 1000000, -1, "x", "0", {}, io.stdin } do
      assert.has_error(function() core.read_ready(bad) end,
        "bad argument #1 to 'read_ready' (0 (standard input) or a FIFO of open_fifo expected)")
    end
    assert.has_error(function() core.read_ready(dir_handle) end, "bad argument #1 to 'read_ready' (the FIFO is closed)")
    assert.has_error(function() core.read_ready(0, 0) end,
      "bad argument #2 to 'read_ready' (1 to 16777216 bytes expected)")
  end)
end)

describe("core.open_fifo", function()
  -- The paths this process (`pid`: "$PPID" of a shell it starts, "self"
  -- of the command that shell runs) holds open.
  local function open_paths(pid)
    local h = io.popen("ls -l /proc/" .. pid .. "/fd")
    local out = h:read("a")
    h:close()
    return out
  end

  local fifo
  before_each(function()
    fifo = os.tmpname()
    os.remove(fifo)
    assert(os.execute("mkfifo " .. fifo))
  end)
  after_each(function() os.remove(fifo) end)

  it("gives a handle the binding owns: close-on-exec, closed by :close() (idempotent) and when collected", function()
    assert.is_nil(core.close_fd) -- (no closing of any descriptor a script names)
    local f = assert(core.open_fifo(fifo))
    assert.are.equal("", core.read_ready(f)) -- no writer yet: nothing, no end
    assert.truthy(open_paths("$PPID"):find(fifo, 1, true))
    assert.falsy(open_paths("self"):find(fifo, 1, true)) -- not inherited by a command run
    f:close()
    f:close()
    assert.falsy(open_paths("$PPID"):find(fifo, 1, true))
    assert.has_error(function() core.read_ready(f) end, "bad argument #1 to 'read_ready' (the FIFO is closed)")
    core.open_fifo(fifo) -- dropped
    collectgarbage()
    collectgarbage()
    assert.falsy(open_paths("$PPID"):find(fifo, 1, true))
    assert.are.same({ nil, "No such file or directory" }, { core.open_fifo(fifo .. ".none") })
  end)

  it("waits for a writer up to read_ready's `wait`: no end before its first writer, its end once it left", function()
    local f = assert(core.open_fifo(fifo))
    assert.are.equal("", core.read_ready(f, nil, 0.05)) -- no writer ever: no hangup, the wait ran out
    -- (`timeout`: a writer left waiting for a reader that failed ends)
    assert(os.execute("(sleep 0.2; timeout 10 sh -c 'printf hi > " .. fifo .. "') &"))
    assert.are.equal("hi", core.read_ready(f, nil, 30))
    assert.is_nil(core.read_ready(f, nil, 30))
    f:close()
    for _, bad in ipairs { -1, 0 / 0, {}, "x" } do
      assert.has_error(function() core.read_ready(0, nil, bad) end,
        "bad argument #3 to 'read_ready' (seconds >= 0 expected)")
    end
  end)

  it("is closed at the end of a <close> variable's scope (Lua 5.4)", function()
    if R.luajit then return end
    local closed = assert(load([[
      local core, path = ...
      local kept
      do
        local f <close> = core.open_fifo(path)
        kept = f
      end
      return kept
    ]]))(core, fifo)
    assert.has_error(function() core.read_ready(closed) end, "bad argument #1 to 'read_ready' (the FIFO is closed)")
  end)
end)
