-- The wiring: require "protocall" reaches its C core.
local pc = require "protocall"

describe("protocall", function()
  it("has a version string from the C core", function()
    assert.are.equal("0.1.0", pc.VERSION)
    assert.are.equal(pc.VERSION, require("protocall.core").VERSION)
  end)

  it("names every canonical gRPC status code both ways", function()
    assert.are.equal(14, pc.codes.UNAVAILABLE)
    assert.are.equal("UNAVAILABLE", pc.codes[14])
    assert.are.equal(0, pc.codes.OK)
    assert.are.equal("UNAUTHENTICATED", pc.codes[16])
    assert.is_nil(pc.codes[17])
    for n = 0, 16 do assert.are.equal(n, pc.codes[pc.codes[n]]) end
  end)

  it("maps HTTP statuses without grpc-status as the spec's table", function()
    local core = require "protocall.core"
    assert.are.equal("UNIMPLEMENTED", core.code_from_http(404))
    assert.are.equal("UNAVAILABLE", core.code_from_http(503))
    assert.are.equal("UNKNOWN", core.code_from_http(200))
  end)
end)
