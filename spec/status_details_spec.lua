-- Rich error status (README "Calls"): the built-in google/rpc files,
-- pc.status_details_bin, and err.details as pc.inproc delivers it (the
-- network side is in spec/interop_spec.lua, against python3-grpcio).
local pc = require "protocall"
local corpus = require "spec.corpus"

describe("google/rpc built in", function()
  it("loads google.rpc types on first use, by name", function()
    assert.is_not_nil(pc.type("google.rpc.Status"))
    assert.is_not_nil(pc.type("google.rpc.BadRequest.FieldViolation"))
    assert.are.equal(16, pc.type("google.rpc.Code").UNAUTHENTICATED)
    assert.is_nil(pc.type("google.rpc.Nope"))
    local p = pc.pool()
    assert(p:load('syntax = "proto3"; import "google/rpc/status.proto"; message W { google.rpc.Status s = 1; }',
      { name = "w.proto" }))
    assert.is_not_nil(p:type("google.rpc.Status"))
  end)

  it("gives protoc's descriptors for google/rpc/{code,error_details,status}.proto", function()
    local set = corpus.read("descriptors/googleapis.pb")
    if not set then return corpus.skip(pending, "google/rpc descriptors against protoc's") end
    local fds = assert(pc.decode(pc.type("google.protobuf.FileDescriptorSet"), set))
    pc.type("google.rpc.Code"); pc.type("google.rpc.Status"); pc.type("google.rpc.RetryInfo")
    local seen = 0
    for _, f in pc.ipairs(fds.file) do
      if f.name:match("^google/rpc/") and f.name ~= "google/rpc/context/attribute_context.proto" then
        local mine = pc.file_descriptor(f.name)
        if mine then
          seen = seen + 1
          assert.are.equal(pc.encode(f, { deterministic = true }), pc.encode(mine, { deterministic = true }),
            f.name)
        end
      end
    end
    assert.are.equal(3, seen)
  end)
end)

describe("pc.status_details_bin", function()
  local Status, RetryInfo, ErrorInfo, Any
  setup(function()
    Status, RetryInfo = pc.type("google.rpc.Status"), pc.type("google.rpc.RetryInfo")
    ErrorInfo, Any = pc.type("google.rpc.ErrorInfo"), pc.type("google.protobuf.Any")
  end)

  it("encodes a google.rpc.Status with each detail packed in an Any", function()
    local raw = Any { type_url = "type.googleapis.com/x.Y", value = "\8\1" }
    local bin = pc.status_details_bin(pc.Error { code = "NOT_FOUND", message = "gone",
      details = { ErrorInfo { reason = "R", domain = "d" }, raw } })
    local st = assert(pc.decode(Status, bin))
    assert.are.equal(5, st.code)
    assert.are.equal("gone", st.message)
    assert.are.equal(2, #st.details)
    assert.are.equal("type.googleapis.com/google.rpc.ErrorInfo", st.details[1].type_url)
    assert.are.equal(ErrorInfo { reason = "R", domain = "d" }, pc.decode(ErrorInfo, st.details[1].value))
    assert.are.equal(raw, st.details[2])
  end)

  it("returns nil without details", function()
    assert.is_nil(pc.status_details_bin(pc.Error { code = "INTERNAL" }))
    assert.is_nil(pc.status_details_bin(pc.Error { code = "INTERNAL", details = {} }))
  end)

  it("refuses what is not a pc.Error or a list of messages", function()
    assert.has_error(function() pc.status_details_bin({ code = "INTERNAL" }) end,
      "bad argument #1 to 'status_details_bin' (pc.Error expected, got table)")
    assert.has_error(function()
      pc.status_details_bin(pc.Error { code = "INTERNAL", details = { RetryInfo {}, "x" } })
    end, "bad argument #1 to 'status_details_bin' (details[2]: message expected, got string)")
    assert.has_error(function()
      pc.status_details_bin(pc.Error { code = "INTERNAL", details = "x" })
    end, "bad argument #1 to 'status_details_bin' (details: list of messages expected, got string)")
    assert.has_error(function()
      pc.status_details_bin(pc.Error { code = "INTERNAL", details = { a = RetryInfo {} } })
    end, "bad argument #1 to 'status_details_bin' (details: list of messages expected (keys 1..n))")
  end)
end)

describe("err.details in process", function()
  local stub, RetryInfo, DebugInfo, Any
  setup(function()
    pc.load([[
      syntax = "proto3"; package rich;
      message Q { string s = 1; }
      service S { rpc Get(Q) returns (Q); rpc Watch(Q) returns (stream Q); }
    ]], { name = "rich.proto" })
    RetryInfo, DebugInfo = pc.type("google.rpc.RetryInfo"), pc.type("google.rpc.DebugInfo")
    Any = pc.type("google.protobuf.Any")
    local server = pc.server { ["rich.S"] = {
      Get = function(req)
        if req.s == "pushback" then
          error(pc.Error { code = "UNAVAILABLE", message = "busy", retry_delay = 0.25,
            details = { RetryInfo { retry_delay = { seconds = 3 } } } })
        elseif req.s == "bad" then
          error(pc.Error { code = "ABORTED", details = { 42 } })
        end
        error(pc.Error { code = "FAILED_PRECONDITION", message = "no", details = {
          RetryInfo { retry_delay = { seconds = 2, nanos = 500000000 } },
          pc.type("rich.Q") { s = "mine" },
          Any { type_url = "type.googleapis.com/elsewhere.T", value = "\8\1" },
          Any { type_url = "type.googleapis.com/google.rpc.DebugInfo", value = "\255" },
        } })
      end,
      Watch = function(_, ctx)
        ctx.send { s = "1" }
        error(pc.Error { code = "ABORTED", details = { DebugInfo { detail = "late" } } })
      end,
    } }
    stub = pc.client("rich.S", { transport = pc.inproc(server) })
  end)

  local function failure(fn, ...)
    local ok, err = pcall(fn, ...)
    assert.is_false(ok)
    return err
  end

  it("decodes known types and keeps the Any of unknown or undecodable ones", function()
    local err = failure(stub.Get, stub, { s = "x" })
    assert.are.equal("FAILED_PRECONDITION", err.code)
    assert.are.equal("no", err.message)
    assert.are.equal(4, #err.details)
    assert.are.equal(RetryInfo { retry_delay = { seconds = 2, nanos = 500000000 } }, err.details[1])
    assert.are.equal(pc.type("rich.Q") { s = "mine" }, err.details[2])
    assert.are.equal(Any, pc.type_of(err.details[3]))
    assert.are.equal("type.googleapis.com/elsewhere.T", err.details[3].type_url)
    assert.are.equal(Any, pc.type_of(err.details[4]))
    assert.are.equal("string", type(err.details_bin))
    -- RetryInfo gives retry_delay when the server sent no other pushback
    assert.are.equal(2.5, err.retry_delay)
  end)

  it("keeps the server's pushback over RetryInfo", function()
    local err = failure(stub.Get, stub, { s = "pushback" })
    assert.are.equal(0.25, err.retry_delay)
    assert.are.equal(RetryInfo { retry_delay = { seconds = 3 } }, err.details[1])
  end)

  it("fails INTERNAL for details that cannot be sent", function()
    local err = failure(stub.Get, stub, { s = "bad" })
    assert.are.equal("INTERNAL", err.code)
    assert.matches("details[1]: message expected, got number", err.message, 1, true)
  end)

  it("carries details of a stream's failure after responses", function()
    local got = {}
    local err = failure(function() for r in stub:Watch {} do got[#got + 1] = r.s end end)
    assert.are.same({ "1" }, got)
    assert.are.equal("ABORTED", err.code)
    assert.are.equal(DebugInfo { detail = "late" }, err.details[1])
  end)
end)
