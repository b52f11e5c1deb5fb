-- What `protocall call -d @` reads a stream's standard input with, under
-- both runtimes (the command's own specs, spec/cli_spec.lua, are Lua 5.4
-- only): the JSON documents of a stream split as it arrives
-- (protocall.cli.common.json_splitter) and a descriptor read without
-- waiting (core.read_ready, bindings/lua/lpc_net.c).
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

  it("returns nil and why for a descriptor it cannot read; refuses a bad argument", function()
    assert.are.same({ nil, "read: Bad file descriptor" }, { core.read_ready(1000000) })
    assert.has_error(function() core.read_ready(-1) end,
      "bad argument #1 to 'read_ready' (a file descriptor (an integer >= 0) expected)")
    assert.has_error(function() core.read_ready("x") end,
      "bad argument #1 to 'read_ready' (a file descriptor (an integer >= 0) expected)")
    assert.has_error(function() core.read_ready(0, 0) end,
      "bad argument #2 to 'read_ready' (1 to 16777216 bytes expected)")
  end)
end)
