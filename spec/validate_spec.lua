-- Validation with protovalidate's rules (README "Validation"): the built-in
-- buf/validate/validate.proto, pc.validate and pc.check on message objects.
-- The differential test against @bufbuild/protovalidate is
-- spec/validate_diff_spec.lua.
local pc = require "protocall"

local function protoc_set(file)
  local out = os.tmpname()
  local ok = os.execute("protoc --include_imports -I core/schema/protos -o " .. out .. " " .. file
    .. " >/dev/null 2>&1")
  local f = io.open(out, "rb")
  local bytes = f and f:read("*a")
  if f then f:close() end
  os.remove(out)
  if ok and bytes and #bytes > 0 then return bytes end
end

describe("buf/validate/validate.proto built in", function()
  it("is imported with no file on disk, its header (licence) kept", function()
    local src = assert(pc.builtin_source("buf/validate/validate.proto"))
    assert.truthy(src:find("Licensed under the Apache License, Version 2.0", 1, true))
    local p = pc.pool()
    assert(p:load([[
      syntax = "proto3";
      import "buf/validate/validate.proto";
      message U { string id = 1 [(buf.validate.field).string.uuid = true]; }
    ]], { name = "u.proto" }))
    assert.is_not_nil(p:type("buf.validate.FieldRules"))
    assert.is_not_nil(p:type("buf.validate.StringRules"))
  end)

  it("keeps the options readable: (buf.validate.field) decodes from the field's options", function()
    local p = pc.pool()
    assert(p:load([[
      syntax = "proto3";
      import "buf/validate/validate.proto";
      message U {
        string name = 1 [(buf.validate.field).string = {min_len: 1, max_len: 64}];
        option (buf.validate.message).cel = {id: "u.x", expression: "this.name != 'bob'"};
      }
    ]], { name = "u.proto" }))
    local fd = p:file_descriptor("u.proto")
    local opts = pc.decode(p:type("google.protobuf.FieldOptions"), pc.encode(fd.message_type[1].field[1].options))
    local rules = pc.get_extension(opts, "buf.validate.field")
    assert.are.equal(1, rules.string.min_len)
    assert.are.equal(64, rules.string.max_len)
    local mopts = pc.decode(p:type("google.protobuf.MessageOptions"), pc.encode(fd.message_type[1].options))
    assert.are.equal("u.x", pc.get_extension(mopts, "buf.validate.message").cel[1].id)
  end)

  it("gives protoc's descriptor for validate.proto", function()
    local set = protoc_set("buf/validate/validate.proto")
    if not set then return pending("protoc is not installed") end
    local fds = assert(pc.decode(pc.type("google.protobuf.FileDescriptorSet"), set))
    local p = pc.pool()
    assert(p:load('syntax = "proto3"; import "buf/validate/validate.proto";', { name = "x.proto" }))
    local seen = 0
    for _, f in pc.ipairs(fds.file) do
      if f.name == "buf/validate/validate.proto" then
        seen = seen + 1
        assert.are.equal(pc.encode(f, { deterministic = true }),
          pc.encode(p:file_descriptor(f.name), { deterministic = true }))
      end
    end
    assert.are.equal(1, seen)
  end)
end)
