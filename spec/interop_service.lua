--- grpc.testing.TestService in Lua: the interop test server's features
-- (gRPC's doc/interop-test-descriptions.md, "Server": EmptyCall,
-- UnaryCall, StreamingInputCall, StreamingOutputCall, FullDuplexCall,
-- CompressedRequest, CompressedResponse, Echo Status, Echo Metadata,
-- interval_us) for pc.server, so pc.listen can be driven by interop
-- clients (spec/interop_server_spec.lua). UnimplementedCall is left out
-- on purpose: the server answers it UNIMPLEMENTED.
--
--   local service = require "interop_service"   -- with spec/ on package.path
--   local server = service.server()              -- a pc.server of it
--
-- The messages come from spec/fixtures/protos/grpc/testing/test.proto,
-- loaded into the default pool when this file is required.
-- CompressedRequest: a request whose `expect_compressed` is set and does
-- not match how it came (ctx:compressed()) fails INVALID_ARGUMENT, as
-- gRPC's own test servers do. CompressedResponse: `response_compressed`
-- (unary) or a ResponseParameters' `compressed` (streams) gzips that
-- response (ctx:set_compression), anything else sends it uncompressed.
-- The compression methods exist on pc.listen's ctx only; in process the
-- requests are taken as they come and responses go as they are.
local pc = require "protocall"

local M = {}

assert(pc.load_file("grpc/testing/test.proto", { import_paths = { "spec/fixtures/protos" } }))

local ECHO_INITIAL, ECHO_TRAILING = "x-grpc-test-echo-initial", "x-grpc-test-echo-trailing-bin"

-- Echo Metadata: x-grpc-test-echo-initial back in the response headers,
-- x-grpc-test-echo-trailing-bin in the trailers (whatever the status).
local function echo_metadata(ctx)
  if not ctx.set_header then return end
  for _, kv in ipairs(ctx.metadata) do
    if kv[1] == ECHO_INITIAL then ctx:set_header(kv[1], kv[2]) end
    if kv[1] == ECHO_TRAILING then ctx:set_trailer(kv[1], kv[2]) end
  end
end

-- Echo Status: fails the call with the request's response_status.
local function echo_status(st)
  if st and st.code ~= 0 then
    local code = pc.codes[st.code]
    if not code then
      error(pc.Error { code = "INVALID_ARGUMENT",
        message = "response_status.code " .. st.code .. " is not a status code" }, 0)
    end
    error(pc.Error { code = code, message = st.message }, 0)
  end
end

-- CompressedRequest: the request came compressed as `expect` says.
local function check_compressed(ctx, expect)
  if expect == nil or not ctx.compressed then return end
  local got = ctx:compressed()
  if expect.value ~= got then
    error(pc.Error { code = "INVALID_ARGUMENT", message = expect.value
      and "expected a compressed request" or "expected an uncompressed request" }, 0)
  end
end

local function compress(ctx, want)
  if ctx.set_compression then ctx:set_compression(want and "gzip" or "identity") end
end

local function zeros(n)
  if n < 0 then error(pc.Error { code = "INVALID_ARGUMENT", message = "negative size " .. n }, 0) end
  return string.rep("\0", n)
end

-- The responses of one StreamingOutputCallRequest, interval_us slept
-- before each.
local function stream_out(ctx, req)
  for _, p in pc.ipairs(req.response_parameters) do
    if p.interval_us > 0 then ctx.sleep(p.interval_us / 1e6) end
    compress(ctx, p.compressed ~= nil and p.compressed.value)
    ctx.send { payload = { body = zeros(p.size) } }
  end
end

M.handlers = {
  EmptyCall = function(_, ctx)
    echo_metadata(ctx)
    return {}
  end,

  UnaryCall = function(req, ctx)
    echo_metadata(ctx)
    check_compressed(ctx, req.expect_compressed)
    echo_status(req.response_status)
    compress(ctx, req.response_compressed ~= nil and req.response_compressed.value)
    return { payload = { body = zeros(req.response_size) } }
  end,

  StreamingOutputCall = function(req, ctx)
    echo_metadata(ctx)
    stream_out(ctx, req)
    echo_status(req.response_status)
  end,

  StreamingInputCall = function(ctx)
    echo_metadata(ctx)
    local total = 0
    while true do
      local req = ctx:recv()
      if not req then break end
      check_compressed(ctx, req.expect_compressed)
      total = total + #(req.payload and req.payload.body or "")
    end
    return { aggregated_payload_size = total }
  end,

  FullDuplexCall = function(ctx)
    echo_metadata(ctx)
    while true do
      local req = ctx:recv()
      if not req then break end
      echo_status(req.response_status)
      stream_out(ctx, req)
    end
  end,
}

--- service.server(opts) -> a pc.server serving grpc.testing.TestService
-- with M.handlers; `opts` goes to pc.server as its second argument.
function M.server(opts)
  return pc.server({ ["grpc.testing.TestService"] = M.handlers }, opts)
end

return M
