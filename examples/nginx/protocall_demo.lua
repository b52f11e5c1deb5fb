--- The handlers of examples/nginx/nginx.conf: gRPC calls to the test
-- server (spec/grpc_server.py: faults.Faults and faults.Talk) through
-- protocall's nginx driver (lua/protocall/resty.lua). Each location
-- answers 200 with the replies, one per line, or the call's failure as
-- "CODE: message" with an HTTP status mapped from the gRPC code
-- (UNAVAILABLE 503, DEADLINE_EXCEEDED 504, the others 502).
local pc = require "protocall"
local resty = require "protocall.resty"

local M = {}

local faults, talk -- the clients, made in init_by_lua (before the fork)
local shared, target, echo_request -- /bench: the shared transport, its target, an encoded request
local ca -- the upstream's CA file (TLS), or nil

--- `demo.init(root, upstream, ca_file)` (init_by_lua): loads
-- spec/fixtures/protos/grpc/faults.proto under `root` (the repository),
-- declares faults.Talk and makes the clients for `upstream` ("host:port",
-- or "https://host:port" verified against `ca_file`, default the system
-- store) with a retry policy (UNAVAILABLE and RESOURCE_EXHAUSTED retried, 5
-- attempts, 0.05 to 0.5 s apart) and a 5 s deadline per call.
function M.init(root, upstream, ca_file)
  assert(upstream, "PROTOCALL_UPSTREAM (host:port of the gRPC server) is not set")
  local protos = root .. "/spec/fixtures/protos"
  assert(pc.load_file(protos .. "/grpc/faults.proto", { import_paths = { protos } }))
  assert(pc.load([[
syntax = "proto3";
package faults;
import "grpc/faults.proto";
service Talk { rpc Chat(stream Request) returns (stream Reply); }
]], { name = "grpc/nginx_talk.proto", import_paths = { protos } }))
  local transport = resty.grpc(pc, upstream, { reconnect = { initial = 0.1, maximum = 1 }, ca_file = ca_file })
  shared, target, ca = transport, upstream, ca_file
  echo_request = pc.encode(pc.type("faults.Request") { text = "bench" })
  local policy = { transport = transport, timeout = 5,
    retry = pc.Retry { initial = 0.05, maximum = 0.5, timeout = 5 } }
  faults = resty.client(pc, "faults.Faults", policy)
  talk = resty.client(pc, "faults.Talk", { transport = transport, timeout = 5 })
end

local HTTP_STATUS = { UNAVAILABLE = 503, DEADLINE_EXCEEDED = 504 }

-- Runs `fn(args)` (args: the query's arguments) and answers its lines, or
-- the failure it raised.
local function answer(fn)
  local ok, out = pcall(fn, ngx.req.get_uri_args())
  if ok then
    ngx.say(table.concat(out, "\n"))
    return ngx.exit(ngx.HTTP_OK)
  end
  local code = type(out) == "table" and (out.code or (out.cause and out.cause.code)) or "UNKNOWN"
  ngx.status = HTTP_STATUS[code] or 502
  local text = tostring(out) -- a pc.Error's already starts "CODE: "
  if text:sub(1, #code + 2) ~= code .. ": " then text = code .. ": " .. text end
  ngx.say(text)
  return ngx.exit(ngx.status)
end

--- GET /unary?text=T: Echo; answers "T attempts=N".
function M.unary()
  answer(function(a)
    local r = faults:Echo { text = a.text or "" }
    return { r.text .. " attempts=" .. r.attempts }
  end)
end

--- GET /stream?count=N[&size=B]: Stream, each reply with B payload bytes
-- (none unless given); answers "reply I" per reply, "reply I B" (B: the
-- payload's length) with `size`.
function M.stream()
  answer(function(a)
    local out, size = {}, tonumber(a.size)
    for r in faults:Stream { count = tonumber(a.count) or 3, size = size or 0 } do
      out[#out + 1] = "reply " .. r.index .. (size and " " .. #r.payload or "")
    end
    return out
  end)
end

--- GET /chat?words=a,b: Chat, sending every word and reading each answer
-- before the next; answers "WORD I" per reply.
function M.chat()
  answer(function(a)
    local call, out = talk:Chat(), {}
    for w in (a.words or ""):gmatch("[^,]+") do
      call:send { text = w }
      local r = call:recv()
      out[#out + 1] = r.text .. " " .. r.index
    end
    call:close_send()
    assert(call:recv() == nil, "Chat: a reply more than requests")
    return out
  end)
end

--- GET /call?text=T[&down=1]: Echo through resty.call (no client kept
-- here), to the upstream or with `down` to a port nothing listens on;
-- answers "T", or the failure's "CODE: message" with its status.
function M.call()
  local a = ngx.req.get_uri_args()
  local to = a.down and "127.0.0.1:1" or target
  local r, err = resty.call(pc, to, "/faults.Faults/Echo", { text = a.text or "" },
    { timeout = 5, transport = { ca_file = ca } })
  if not r then
    ngx.status = HTTP_STATUS[err.code] or 502
    ngx.say(tostring(err))
    return ngx.exit(ngx.status)
  end
  ngx.say(r.text)
  return ngx.exit(ngx.HTTP_OK)
end

--- GET /retry?id=X&failures=N: FailThenSucceed failing UNAVAILABLE N
-- times for id X; answers the reply text and the attempts counted.
function M.retry()
  answer(function(a)
    local r = faults:FailThenSucceed { id = a.id, failures = tonumber(a.failures) or 1, code = "UNAVAILABLE" }
    return { r.text .. " attempts=" .. r.attempts }
  end)
end

--- GET /sleep?seconds=S (access_by_lua): Sleep S seconds; answers "slept".
function M.sleep()
  answer(function(a)
    return { faults:Sleep { seconds = tonumber(a.seconds) or 0.5 }.text }
  end)
end

--- GET /timer?text=T: the Echo call made in an ngx.timer.at callback,
-- handed back through an ngx.semaphore; answers "timer: T".
function M.timer()
  answer(function(a)
    local done, result = require("ngx.semaphore").new(), nil
    assert(ngx.timer.at(0, function()
      local ok, r = pcall(faults.Echo, faults, { text = a.text or "" })
      result = ok and ("timer: " .. r.text) or r
      done:post(1)
    end))
    assert(done:wait(10), "the timer's call did not finish")
    if type(result) ~= "string" then error(result, 0) end
    return { result }
  end)
end

--- GET /bench?mode=shared|request: one Echo on raw bytes, through the
-- worker's shared connection (owned by an ngx.timer) or through a
-- connection of this request's own (opened, used once, closed): what
-- spec/nginx_spec.lua's figure compares. Answers "ok".
function M.bench()
  answer(function(a)
    local t = a.mode == "request" and resty.grpc(pc, target, { per_request = true }) or shared
    local ok, err = pcall(t.unary, t, "/faults.Faults/Echo", echo_request, { timeout = 5 })
    if t ~= shared then t:close() end
    if not ok then error(err, 0) end
    return { "ok" }
  end)
end

--- GET /dropped: one Echo through a resty.grpc transport made in this
-- request and dropped unclosed (transports are meant to be made once, in
-- init_by_lua*: each opens a connection owned by an ngx.timer, which a
-- transport collected as garbage closes). Answers "ok".
function M.dropped()
  answer(function()
    local t = resty.grpc(pc, target)
    t:unary("/faults.Faults/Echo", echo_request, { timeout = 5 })
    return { "ok" }
  end)
end

--- GET /timers: three full garbage collection cycles (a dropped
-- transport's sockets go in the third: its channel, a userdata with __gc,
-- is finalized in the first and leaves net.lua's weak-keyed table in the
-- second), then after 0.5 s the number of ngx.timers running (a
-- connection's owner timer among them): "running N".
function M.timers()
  answer(function()
    for _ = 1, 3 do collectgarbage() end
    ngx.sleep(0.5)
    return { "running " .. ngx.timer.running_count() }
  end)
end

--- log_by_lua of /log: a call there fails with resty.check_phase's error,
-- which goes to error.log ("protocall log phase: ...").
function M.log_phase()
  local ok, err = pcall(faults.Echo, faults, { text = "from the log phase" })
  ngx.log(ngx.ERR, "protocall log phase: ", ok and "the call ran" or tostring(err))
end

return M
