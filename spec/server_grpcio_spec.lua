-- pc.listen driven by a client written with Debian's python3-grpcio
-- (spec/grpcio_client.py), over h2c and TLS: the four call shapes,
-- metadata, status codes and deadlines.
local pc = require "protocall"

local pool = pc.pool()
assert(pool:load([[
syntax = "proto3";
package srv;
message Point { int32 x = 1; int32 y = 2; string note = 3; }
message Sum { int64 total = 1; uint32 count = 2; }
service Calc {
  rpc Add(Point) returns (Sum);
  rpc Count(Point) returns (stream Point);
  rpc Total(stream Point) returns (Sum);
  rpc Double(stream Point) returns (stream Point);
}
]], { name = "srv/calc.proto" }))

local stops = 0
local server = pc.server({ ["srv.Calc"] = {
  Add = function(p, ctx)
    if p.note == "pushback" then
      error(pc.Error { code = "UNAVAILABLE", message = "busy", retry_delay = p.x / 100,
        metadata = { { "x-why", "busy" } } })
    end
    if p.note == "stop" then
      stops = stops + 1
      error(pc.Error { code = "UNAVAILABLE", message = "stop", retry_delay = -1 })
    end
    if p.note == "stops" then
      local n = stops
      stops = 0
      return { total = n }
    end
    if p.note == "fail" then error(pc.Error { code = "FAILED_PRECONDITION", message = "not now" }) end
    if p.note == "crash" then error("boom") end
    if p.note == "sleep" then
      while not ctx:cancelled() do pc.sleep(0.01) end
      return { total = 0 }
    end
    if p.note == "meta" then
      local user
      local pad
      for _, kv in ipairs(ctx.metadata) do
        if kv[1] == "x-user" then user = kv[2] end
        if kv[1] == "x-pad" then pad = kv[2] end
      end
      ctx:set_header("x-sp", " h ")
      ctx:set_trailer("x-trail", "hi " .. tostring(user))
      ctx:set_trailer("x-pad", tostring(pad))
    end
    return { total = p.x + p.y, count = 1 }
  end,
  Count = function(p, ctx) for i = 1, p.x do ctx.send { x = i } end end,
  Total = function(ctx)
    local t, n = 0, 0
    for p in ctx.recv do t, n = t + p.x, n + 1 end
    return { total = t, count = n }
  end,
  Double = function(ctx) for p in ctx.recv do ctx.send { x = p.x * 2 } end end,
} }, { pool = pool })

local function drive(opts, ca)
  local l = pc.listen(server, "127.0.0.1:0", opts)
  local out = os.tmpname()
  local lines = {}
  pc.spawn(function() l:serve() end)
  pc.spawn(function()
    os.execute("/usr/bin/python3 spec/grpcio_client.py " .. l.port .. " " .. (ca or "") .. " > "
      .. out .. " 2>&1 &")
    for _ = 1, 3000 do
      local f = io.open(out)
      local text = f and f:read("a")
      if f then f:close() end
      if text and (text:find("done\n", 1, true) or text:find("Traceback", 1, true)) then
        for line in text:gmatch("[^\n]+") do lines[#lines + 1] = line end
        if text:find("Traceback", 1, true) then pc.sleep(0.5) end
        break
      end
      pc.sleep(0.01)
    end
    l:shutdown(1)
  end)
  pc.run()
  os.remove(out)
  return table.concat(lines, "\n")
end

local EXPECTED = table.concat({
  "unary 08051001",
  "trailer hi ann",
  "spaces ' h ' ' p '",
  "stream 0801,0802,0803",
  "client_stream 08061003",
  "bidi 0802,0804",
  "fail FAILED_PRECONDITION not now",
  "unknown UNIMPLEMENTED unknown method /srv.Calc/Nope",
  "crash UNKNOWN srv.Calc.Add: unexpected error in the handler",
  "deadline DEADLINE_EXCEEDED",
  "pushback UNAVAILABLE busy 300 waited",
  "stop UNAVAILABLE -1",
  "stops 0801",
  "done",
}, "\n")

-- The client's own deadline ("Deadline Exceeded") and the server's answer
-- once the deadline passed ("srv.Calc.Add: deadline exceeded") race: the
-- code is what both agree on.
local function drive_codes(...)
  return (drive(...):gsub("\ndeadline DEADLINE_EXCEEDED [^\n]*", "\ndeadline DEADLINE_EXCEEDED"))
end

describe("pc.listen with a python3-grpcio client", function()
  it("serves every shape, metadata and status over h2c", function()
    assert.equals(EXPECTED, drive_codes(nil))
  end)

  it("serves the same over TLS", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    assert(os.execute("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
      .. " -addext subjectAltName=DNS:localhost,IP:127.0.0.1"
      .. " -keyout " .. dir .. "/key.pem -out " .. dir .. "/cert.pem 2>/dev/null"))
    local got = drive_codes({ cert_file = dir .. "/cert.pem", key_file = dir .. "/key.pem" }, dir .. "/cert.pem")
    os.execute("rm -rf " .. dir)
    assert.equals(EXPECTED, got)
  end)
end)
