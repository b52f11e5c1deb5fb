--- What the specs need to know of the runtime they run under: Lua 5.4 or
-- LuaJIT 2.1 (.ci/busted runs the suite under both; see the README's
-- "LuaJIT" section for what differs).
local R = {}

--- Whether the specs run under LuaJIT.
R.luajit = rawget(_G, "jit") ~= nil

--- it54 = R.only54(it, pending): it54(name, reason, fn) is it(name, fn)
-- under Lua 5.4; under LuaJIT a pending test named "name [Lua 5.4 only:
-- reason]", so the skip shows in the summary's count and list.
function R.only54(it, pending)
  return function(name, reason, fn)
    if R.luajit then
      pending(name .. " [Lua 5.4 only: " .. reason .. "]")
    else
      it(name, fn)
    end
  end
end

--- dir, sanitized = R.module_build(): the build folder whose protocall.so the
-- suite runs (the folder of $PROTOCALL_BIN, set by .ci/busted, else
-- build/release; under LuaJIT $PROTOCALL_LUAJIT_BUILD, else build/luajit),
-- and whether it is the sanitizer build (whose objects a stock interpreter
-- cannot load: they need the sanitizer runtime).
function R.module_build()
  local bin = os.getenv("PROTOCALL_BIN") or "build/release/protocall"
  local dir = bin:match("^(.*)/[^/]*$") or "."
  if R.luajit then dir = os.getenv("PROTOCALL_LUAJIT_BUILD") or "build/luajit" end
  local f = io.open(dir .. "/CMakeCache.txt", "r")
  local cache = f and f:read("*a") or ""
  if f then f:close() end
  return dir, cache:find("PROTOCALL_SANITIZE:BOOL=ON", 1, true) ~= nil
end

--- R.int(decimal): the 64-bit integer written in string 'decimal' as a
-- 64-bit field reads it back: a Lua integer (5.4), an int64_t cdata
-- (LuaJIT). R.uint(decimal): the same as a uint64 field reads it (LuaJIT:
-- uint64_t cdata; 5.4: the two's-complement integer).
function R.int(decimal)
  if R.luajit then return assert(load("return " .. decimal .. "LL"))() end
  return assert(math.tointeger(tonumber(decimal)))
end

function R.uint(decimal)
  if R.luajit then return assert(load("return " .. decimal .. "ULL"))() end
  local v = 0
  for d in decimal:gmatch("%d") do v = v * 10 + tonumber(d) end -- integer arithmetic wraps past 2^63
  return v
end

--- R.integer(v): whether v is an integer value of this runtime (5.4: of
-- the integer subtype; LuaJIT: an integral number or 64-bit cdata).
-- R.float(v): whether v is a float (LuaJIT: any number).
function R.integer(v)
  if R.luajit then
    return (type(v) == "number" and v == math.floor(v)) or type(v) == "cdata"
  end
  return math.type(v) == "integer"
end

function R.float(v)
  if R.luajit then return type(v) == "number" end
  return math.type(v) == "float"
end

--- R.execute(cmd): os.execute's Lua 5.4 results (true or nil, "exit",
-- code) on both (LuaJIT's returns the wait status alone).
function R.execute(cmd)
  if not R.luajit then return os.execute(cmd) end
  local status = os.execute(cmd)
  local code = math.floor(status / 256)
  return code == 0 or nil, "exit", code
end

--- R.insert(c, [pos,] v) and R.remove(c [, pos]): table.insert and
-- table.remove, which Lua 5.4 applies to repeated containers through
-- their metamethods; LuaJIT's take tables only, so there the same moves
-- are made with #, c[i] and c[i] = v (what a LuaJIT user writes).
function R.insert(c, ...)
  if type(c) == "table" then return table.insert(c, ...) end
  local n = #c
  if select("#", ...) == 1 then
    c[n + 1] = ...
    return
  end
  local pos, v = ...
  for i = n, pos, -1 do c[i + 1] = c[i] end
  c[pos] = v
end

function R.remove(c, pos)
  if type(c) == "table" then return table.remove(c, pos) end
  local n = #c
  pos = pos or n
  local v = c[pos]
  for i = pos, n - 1 do c[i] = c[i + 1] end
  c[n] = nil
  return v
end

if not R.luajit then R.insert, R.remove = table.insert, table.remove end

--- out, ok, code = R.capture(cmd): cmd's standard output, whether it
-- exited 0 (true or nil) and its exit code, as Lua 5.4's io.popen and
-- close give them (LuaJIT's close of a pipe gives true alone).
function R.capture(cmd)
  if not R.luajit then
    local h = io.popen(cmd)
    local out = h:read("a")
    local ok, _, code = h:close()
    return out, ok, code
  end
  local h = io.popen("(" .. cmd .. "); echo \"<exit $?>\"")
  local out = h:read("*a")
  h:close()
  local body, code = out:match("^(.*)<exit (%d+)>\n$")
  code = tonumber(code)
  return body, code == 0 or nil, code
end

--- The extremes of int64 (math.mininteger and math.maxinteger under 5.4).
R.min64 = R.int("-9223372036854775808")
R.max64 = R.int("9223372036854775807")

return R
