-- gw.Library (spec/fixtures/protos/gateway/library.proto) in Lua, served by
-- pc.listen with `rest = true` on one port (REST/JSON, gRPC, gRPC-Web,
-- Connect): the REST placement of spec/rest_gateway_spec.lua, answering as
-- spec/gateway_upstream.py (python3-grpcio) does for the nginx and
-- standalone placements, so one case table checks all three.
--
--     PC_PID=$$ lua5.4 spec/gateway_library.lua [OPTIONS_LUA]
--
-- Prints "PORT PID" (PID from env PC_PID) and serves until killed, or
-- PC_SERVER_LIFETIME seconds (120 unless set). OPTIONS_LUA, a Lua table
-- constructor, is added to pc.listen's options ({max_receive_size = 1000}).
local pc = require "protocall"

local f = assert(io.open("spec/fixtures/protos/gateway/library.proto"))
local pool = pc.pool()
assert(pool:load(f:read("a"), { name = "gateway/library.proto" }))
f:close()
local Detail = pool:type("gw.Detail")

local calls = 0
local function counted(fn)
  return function(...)
    calls = calls + 1
    return fn(...)
  end
end

local library = {
  GetBook = counted(function(req)
    return { name = req.name, title = "title of " .. req.name .. (req.view ~= "" and " (" .. req.view .. ")" or ""),
      pages = req.pages, tags = req.tags, kind = req.kind }
  end),
  CreateBook = counted(function(req)
    local b = req.book or pool:type("gw.Book") {}
    b.name = req.parent .. "/books/" .. (req.request_id ~= "" and req.request_id or "new")
    return b
  end),
  UpdateBook = counted(function(req) return req end),
  ListBooks = counted(function(req, ctx)
    for i = 1, req.count do
      ctx.send { name = ("%s/books/%d"):format(req.parent, i), pages = i }
      ctx.sleep(0.01)
    end
    if req.fail ~= "" then
      error(pc.Error { code = req.fail, message = ("stream failed after %d"):format(req.count) })
    end
  end),
  CreateBooks = counted(function(ctx)
    local n = 0
    while ctx.recv() do n = n + 1 end
    return { calls = n }
  end),
  Fail = counted(function(req, ctx)
    local details
    if req.reason ~= "" then
      details = { Detail { reason = req.reason, domain = "gw.example" } }
      ctx:set_trailer("x-failed", req.code)
    end
    local message = req.message ~= "" and req.message or "failed with " .. req.code
    error(pc.Error { code = req.code, message = message, details = details })
  end),
  Headers = counted(function(_, ctx)
    local md = {}
    for _, kv in ipairs(ctx.metadata) do
      if kv[1]:sub(1, 2) == "x-" or kv[1] == "authorization" then md[kv[1]] = kv[2] end
    end
    ctx:set_header("x-answer", "yes")
    ctx:set_trailer("x-done", "1")
    return { metadata = md }
  end),
  Calls = function() return { calls = calls } end,
  Echo = counted(function(req) return { text = req.text, calls = calls } end),
}

local extra = arg[1] and assert(load("return " .. arg[1]))() or {}
local opts = { rest = true }
for k, v in pairs(extra) do opts[k] = v end
local server = pc.server({ ["gw.Library"] = library }, { pool = pool })
local listener = pc.listen(server, "127.0.0.1:0", opts)
require("serve_listener")(listener)
