-- A pc.listen with `rest = true` serving google.api.HttpBody answers
-- (spec/fixtures/protos/gateway/httpbody.proto; the REST placement of
-- spec/rest_gateway_spec.lua, the upstream of spec/nginx_gateway_spec.lua's
-- HttpBody route): hb.S.Get answers one
-- HttpBody and hb.S.Stream `n` of them, each of content type `ct` as the
-- query gives it (a bad one included: the engine must refuse it); hb.S.Broken
-- answers a stream whose first message no HttpBody decodes (its content type
-- not UTF-8: the upstream's pool declares it returning hb.Raw).
--
--     PC_PID=$$ lua5.4 spec/httpbody_server.lua
--
-- Prints "PORT PID" (PID from env PC_PID) and serves until killed, or
-- PC_SERVER_LIFETIME seconds (120 unless set).
local pc = require "protocall"

local pool = pc.pool()
local f = assert(io.open("spec/fixtures/protos/gateway/httpbody.proto"))
local text = f:read("*a"):gsub("Broken%(Req%) returns %(stream google%.api%.HttpBody%)",
  "Broken(Req) returns (stream Raw)")
assert(pool:load(text, { name = "gateway/httpbody.proto" }))
f:close()
local HttpBody = pool:type("google.api.HttpBody")

local server = pc.server({ ["hb.S"] = {
  Get = function(req) return HttpBody { content_type = req.ct, data = "body" } end,
  Stream = function(req, ctx)
    for i = 1, req.n do ctx.send(HttpBody { content_type = req.ct, data = "part " .. i .. "\n" }) end
  end,
  Broken = function(_, ctx) ctx.send(pool:type("hb.Raw") { content_type = "\255" }) end,
} }, { pool = pool })
local listener = pc.listen(server, "127.0.0.1:0", { rest = true })
require("serve_listener")(listener)
