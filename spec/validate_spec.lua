-- Validation with protovalidate's rules (README "Validation"): the built-in
-- buf/validate/validate.proto, pc.validate and pc.check on message objects.
-- The differential test against @bufbuild/protovalidate is
-- spec/validate_diff_spec.lua.
local pc = require "protocall"

local protoc_set = require("protoc").set

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

describe("pc.validate and pc.check", function()
  local p = pc.pool()
  assert(p:load([[
    syntax = "proto3";
    package v;
    import "buf/validate/validate.proto";
    import "google/protobuf/duration.proto";
    message Item {
      string sku = 1 [(buf.validate.field).string.pattern = "^[A-Z]{3}-[0-9]+$"];
      uint32 qty = 2 [(buf.validate.field).uint32 = {gt: 0, lte: 100}];
    }
    message Order {
      string id = 1 [(buf.validate.field).string.uuid = true];
      string email = 2 [(buf.validate.field).string.email = true];
      repeated Item items = 3 [(buf.validate.field).repeated = {min_items: 1, max_items: 3}];
      map<string, string> labels = 4 [(buf.validate.field).map = {
        keys: {string: {min_len: 1, max_len: 4}}, values: {string: {max_len: 3}}}];
      Item gift = 5;
      google.protobuf.Duration ttl = 6 [(buf.validate.field).duration = {gte: {seconds: 1}}];
      optional string note = 7 [(buf.validate.field).string.max_len = 5];
      int32 priority = 8 [(buf.validate.field).int32 = {in: [1, 2, 3]},
                          (buf.validate.field).ignore = IGNORE_IF_ZERO_VALUE];
      oneof payment {
        option (buf.validate.oneof).required = true;
        string card = 9 [(buf.validate.field).string.min_len = 12];
        string iban = 10;
      }
      option (buf.validate.message).cel = {
        id: "order.gift_qty", message: "a gift comes alone",
        expression: "!has(this.gift) || this.gift.qty == 1u"
      };
    }
    message Bad { int64 x = 1 [(buf.validate.field).string.min_len = 1]; }
  ]], { name = "v.proto" }))
  local Order, Item, Bad = p:type("v.Order"), p:type("v.Item"), p:type("v.Bad")

  local function valid()
    return Order {
      id = "3b241101-e2bb-4255-8caf-4136c566a962", email = "a@example.com",
      items = { Item { sku = "ABC-1", qty = 2 } }, iban = "DE00",
    }
  end

  local function pairs_of(list)
    local out = {}
    for i, v in ipairs(list) do out[i] = v.field .. "|" .. v.rule end
    return out
  end

  it("gives an empty list for a valid message", function()
    assert.are.same({}, pc.validate(valid()))
    assert.are.equal("table", type(pc.validate(Item {})))
  end)

  it("reports each violation with its field path, rule id and message", function()
    local m = valid()
    m.email = "nope"
    m.items[1].qty = 0
    m.items[2] = Item { sku = "abc", qty = 1 }
    m.labels = { toolong = "x", ok = "long" }
    m.note = "123456"
    local list = pc.validate(m)
    local got = pairs_of(list)
    table.sort(got) -- a map's entries come in its own order
    assert.are.same({ "email|string.email", "items[0].qty|uint32.gt_lte", "items[1].sku|string.pattern",
      'labels["ok"]|string.max_len', 'labels["toolong"]|string.max_len', "note|string.max_len" }, got)
    for _, v in ipairs(list) do
      assert.are.equal(v.field == 'labels["toolong"]' or nil, v.for_key)
    end
    assert.are.equal("string", type(list[1].message))
    assert.truthy(#list[1].message > 0)
  end)

  it("applies required, ignore, oneof and message rules", function()
    local m = valid()
    m.iban = nil
    assert.are.same({ "payment|required" }, pairs_of(pc.validate(m)))
    m = valid()
    m.priority = 0 -- ignored when zero
    assert.are.same({}, pc.validate(m))
    m.priority = 7
    assert.are.same({ "priority|int32.in" }, pairs_of(pc.validate(m)))
    m = valid()
    m.gift = Item { sku = "ABC-2", qty = 2 }
    local list = pc.validate(m)
    assert.are.same({ "|order.gift_qty" }, pairs_of(list))
    assert.are.equal("a gift comes alone", list[1].message)
    m.gift.sku = "x"
    assert.are.same({ "gift.sku|string.pattern", "|order.gift_qty" }, pairs_of(pc.validate(m)))
    m = valid()
    m.items = {}
    m.ttl = { seconds = 0, nanos = 5 }
    assert.are.same({ "items|repeated.min_items", "ttl|duration.gte" }, pairs_of(pc.validate(m)))
  end)

  it("stops at the first violation with fail_fast", function()
    local m = valid()
    m.email, m.note = "x", "123456"
    assert.are.equal(2, #pc.validate(m))
    assert.are.equal(1, #pc.validate(m, { fail_fast = true }))
  end)

  it("keeps max_violations violations at most, saying when it stopped there", function()
    local q = pc.pool()
    assert(q:load([[syntax = "proto3"; package cap; import "buf/validate/validate.proto";
      message C { repeated int32 n = 1 [(buf.validate.field).repeated.items.int32.gt = 5]; }]],
      { name = "cap.proto" }))
    local n = {}
    for i = 1, 1000 do n[i] = 1 end
    local m = q:type("cap.C") { n = n }
    local list, truncated = pc.validate(m)
    assert.are.equal(1000, #list) -- all by default, as protovalidate's runtimes
    assert.is_false(truncated)
    list, truncated = pc.validate(m, { max_violations = 3 })
    assert.are.same({ "n[0]|int32.gt", "n[1]|int32.gt", "n[2]|int32.gt" }, pairs_of(list))
    assert.is_true(truncated)
    list, truncated = pc.validate(m, { max_violations = 1000 })
    assert.are.equal(1000, #list)
    assert.is_false(truncated) -- exactly the cap: nothing left out
    list, truncated = pc.validate(m, { max_violations = 2, fail_fast = true })
    assert.are.equal(1, #list)
    assert.is_false(truncated)
    local ok, err = pcall(pc.check, m, { max_violations = 2 })
    assert.is_false(ok)
    assert.are.equal("validation failed: n[0]: must be greater than 5 [int32.gt], and at least 2 more violations",
      err.message)
    assert.are.equal(2, #err.violations)
    for _, bad in ipairs({ 0, -1, 1.5, "3", true }) do
      local got = type(bad) == "number" and tostring(bad) or type(bad)
      assert.has_error(function() pc.validate(m, { max_violations = bad }) end,
        "bad argument #2 to 'validate' (max_violations: positive integer expected, got " .. got .. ")")
    end
  end)

  it("reports an unset proto2 required field with legacy_required", function()
    local q = pc.pool()
    assert(q:load([[syntax = "proto2"; package old; import "buf/validate/validate.proto";
      message Old { required string name = 1 [(buf.validate.field).string.min_len = 2]; optional int32 n = 2; }]],
      { name = "old.proto" }))
    local Old = q:type("old.Old")
    assert.are.same({}, pc.validate(Old { n = 1 })) -- off by default: rules apply when set
    local list = pc.validate(Old { n = 1 }, { legacy_required = true })
    assert.are.same({ "name|legacy_required" }, pairs_of(list))
    assert.are.equal("value is required", list[1].message)
    assert.are.same({ "name|string.min_len" }, pairs_of(pc.validate(Old { name = "x" }, { legacy_required = true })))
    assert.are.same({}, pc.validate(Old { name = "xy" }, { legacy_required = true }))
  end)

  it("runs the predefined rules a schema declares as extensions of the *Rules messages", function()
    -- the same violations as protovalidate-es on these messages
    local q = pc.pool()
    assert(q:load([[syntax = "proto2"; package pre; import "buf/validate/validate.proto";
      extend buf.validate.StringRules {
        optional bool no_space = 1161 [(buf.validate.predefined).cel = {
          id: "string.no_space", expression: "!rule || !this.contains(' ') ? '' : 'must not contain a space'"}];
        optional uint64 max_words = 1162 [(buf.validate.predefined).cel = {
          id: "string.max_words", expression: "size(this.split(' ')) <= rule"}];
      }
      message M {
        optional string a = 1 [(buf.validate.field).string.(no_space) = true, (buf.validate.field).string.min_len = 2];
        optional string b = 2 [(buf.validate.field).string.(max_words) = 2];
        repeated string c = 3 [(buf.validate.field).repeated.items.string.(no_space) = true];
      }]], { name = "pre.proto" }))
    local M = q:type("pre.M")
    assert.are.same({}, pc.validate(M { a = "ab", b = "x y", c = { "d" } }))
    local list = pc.validate(M { a = " ", b = "x y z", c = { "d", "e f" } })
    assert.are.same({ "a|string.min_len", "a|string.no_space", "b|string.max_words", "c[1]|string.no_space" },
      pairs_of(list))
    assert.are.equal("must not contain a space", list[2].message)
    assert.are.equal([["size(this.split(' ')) <= rule" returned false]], list[3].message)
  end)

  it("pc.check returns the message or raises INVALID_ARGUMENT with the violations", function()
    local m = valid()
    assert.are.equal(m, pc.check(m))
    m.email, m.note = "x", "123456"
    local ok, err = pcall(pc.check, m)
    assert.is_false(ok)
    assert.are.equal(pc.Error, getmetatable(err))
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.is_true(err["local"])
    assert.are.equal(2, #err.violations)
    assert.are.equal("validation failed: email: " .. err.violations[1].message
      .. " [string.email], and 1 more violation", err.message)
    -- the violations as google.rpc.BadRequest, as the servers' and the gateway's validate send them
    assert.are.equal(1, #err.details)
    assert.are.equal(pc.type("google.rpc.BadRequest"), pc.type_of(err.details[1]))
    local fv = err.details[1].field_violations
    assert.are.same({ "email", err.violations[1].message .. " [string.email]", "string.email" },
      { fv[1].field, fv[1].description, fv[1].reason })
    assert.are.equal(2, #fv)
  end)

  it("raises on a rule of the wrong type, on a non-message and on a bad option", function()
    assert.has_error(function() pc.validate(Bad {}) end,
      'validate: expected rule "int64", got "string" on v.Bad.x')
    assert.has_error(function() pc.validate({}) end)
    assert.has_error(function() pc.validate(valid(), { nope = true }) end)
  end)

  it("blames the caller's line for a non-message, naming validate or check", function()
    local line = debug.getinfo(1, "l").currentline
    local ok, err = pcall(function() pc.validate("nope") end)
    local at = "spec/validate_spec.lua:"
    assert.is_false(ok)
    assert.are.equal(at .. (line + 1) .. ": bad argument #1 to 'validate' (message expected, got string)", err)
    ok, err = pcall(function() pc.check(42) end)
    assert.is_false(ok)
    assert.are.equal(at .. (line + 5) .. ": bad argument #1 to 'check' (message expected, got number)", err)
    ok, err = pcall(function() pc.check(valid(), { nope = true }) end)
    assert.is_false(ok)
    assert.are.equal(at .. (line + 8) .. ": bad argument #2 to 'check' (unknown option 'nope')", err)
  end)

  it("is valid for every message of a schema without rules", function()
    local q = pc.pool()
    assert(q:load('syntax = "proto3"; message P { int32 x = 1; }', { name = "p.proto" }))
    assert.are.same({}, pc.validate(q:type("P") { x = 5 }))
  end)
end)

describe("validate = true at the edge", function()
  local p = pc.pool()
  assert(p:load([[
    syntax = "proto3";
    package edge;
    import "buf/validate/validate.proto";
    message Req { string name = 1 [(buf.validate.field).string.min_len = 2]; }
    message Res { string greeting = 1; }
    service Greeter {
      rpc Hello (Req) returns (Res);
      rpc Many (stream Req) returns (Res);
    }
  ]], { name = "edge.proto" }))
  local Req = p:type("edge.Req")
  local calls = 0
  local handlers = { ["edge.Greeter"] = {
    Hello = function(req) calls = calls + 1 return { greeting = "hi " .. req.name } end,
    Many = function(ctx)
      local n = 0
      while ctx:recv() do n = n + 1 end
      return { greeting = tostring(n) }
    end,
  } }

  it("refuses a validate option that is not a boolean", function()
    assert.has_error(function() pc.server(handlers, { pool = p, validate = "yes" }) end,
      "pc.server: validate: boolean expected, got string")
    local server = pc.server(handlers, { pool = p })
    local t = pc.inproc(server)
    assert.has_error(function() pc.client("edge.Greeter", { transport = t, pool = p, validate = 1 }) end,
      "pc.client: validate: boolean expected, got number")
    assert.has_error(function() pc.transcoder(p, { validate = "yes" }) end,
      "bad argument #2 to 'transcoder' (validate: boolean expected, got string)")
  end)

  it("a server refuses an invalid request with INVALID_ARGUMENT before the handler runs", function()
    local server = pc.server(handlers, { pool = p, validate = true })
    local client = pc.client("edge.Greeter", { transport = pc.inproc(server), pool = p })
    calls = 0
    assert.are.equal("hi ann", client:Hello(Req { name = "ann" }).greeting)
    local ok, err = pcall(client.Hello, client, Req { name = "a" })
    assert.is_false(ok)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.truthy(err.message:find("name: ", 1, true))
    assert.truthy(err.message:find("[string.min_len]", 1, true))
    assert.are.equal(1, calls)
    local br = err.details and err.details[1]
    assert.is_not_nil(br)
    assert.are.equal("name", br.field_violations[1].field)
  end)

  it("a server validates each request of a client stream", function()
    local server = pc.server(handlers, { pool = p, validate = true })
    local client = pc.client("edge.Greeter", { transport = pc.inproc(server), pool = p })
    local call = client:Many()
    call:send(Req { name = "ok" })
    call:send(Req { name = "x" })
    local ok, err = pcall(call.close_and_recv, call)
    assert.is_false(ok)
    assert.are.equal("INVALID_ARGUMENT", err.code)
  end)

  it("a server refuses a request whose rule fails to evaluate INVALID_ARGUMENT, as connect-go does", function()
    local q = pc.pool()
    assert(q:load([[
      syntax = "proto3";
      package div;
      import "buf/validate/validate.proto";
      message Req { int32 x = 1 [(buf.validate.field).cel = {id: "div", expression: "100 / this > 1"}]; }
      service S { rpc Do (Req) returns (Req); }
    ]], { name = "div.proto" }))
    local server = pc.server({ ["div.S"] = { Do = function(req) return req end } }, { pool = q, validate = true })
    local client = pc.client("div.S", { transport = pc.inproc(server), pool = q })
    assert.are.equal(5, client:Do({ x = 5 }).x)
    local ok, err = pcall(client.Do, client, { x = 0 })
    assert.is_false(ok)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.truthy(err.message:find("^validate: x: div: [^\n]*division by zero$"), err.message)
    assert.is_nil(err.details)
    -- pc.client's own `validate` refuses it so too, before sending
    local vclient = pc.client("div.S", { transport = pc.inproc(server), pool = q, validate = true })
    ok, err = pcall(vclient.Do, vclient, { x = 0 })
    assert.is_false(ok)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.is_true(err["local"])
    assert.truthy(err.message:find("^validate: x: div: "), err.message)
    -- a rule that does not compile is the server's fault: INTERNAL
    local b = pc.pool()
    assert(b:load([[
      syntax = "proto3";
      package badrule;
      import "buf/validate/validate.proto";
      message Req { int32 x = 1 [(buf.validate.field).cel = {id: "bad", expression: "this +"}]; }
      service S { rpc Do (Req) returns (Req); }
    ]], { name = "badrule.proto" }))
    local bserver = pc.server({ ["badrule.S"] = { Do = function(req) return req end } }, { pool = b, validate = true })
    local bclient = pc.client("badrule.S", { transport = pc.inproc(bserver), pool = b })
    ok, err = pcall(bclient.Do, bclient, { x = 1 })
    assert.is_false(ok)
    assert.are.equal("INTERNAL", err.code)
    assert.truthy(err.message:find("^validate: failed to compile bad: "), err.message)
  end)

  it("a client refuses to send an invalid request", function()
    local server = pc.server(handlers, { pool = p })
    local client = pc.client("edge.Greeter", { transport = pc.inproc(server), pool = p, validate = true })
    calls = 0
    local ok, err = pcall(client.Hello, client, { name = "a" })
    assert.is_false(ok)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.is_true(err["local"])
    assert.are.equal(0, calls)
    assert.are.equal("hi bob", client:Hello({ name = "bob" }).greeting)
    local call = client:Many()
    assert.has_error(function() call:send(Req { name = "" }) end)
  end)

  it("without the option, invalid requests reach the handler", function()
    local server = pc.server(handlers, { pool = p })
    local client = pc.client("edge.Greeter", { transport = pc.inproc(server), pool = p })
    assert.are.equal("hi a", client:Hello(Req { name = "a" }).greeting)
  end)
end)
