-- proto2 `required` fields: pc.encode raises and pc.decode returns nil, err
-- naming every missing field by its path, as the C++ library refuses both
-- (SerializeToString / ParseFromString); {partial = true} skips the check;
-- pc.is_initialized answers without raising.
local pc = require "protocall"
package.path = "spec/?.lua;" .. package.path
local peer = require "node_peer" -- (a command run while pc.run serves)

local pool = pc.pool()
assert(pool:load([[
syntax = "proto2";
package r;
message Inner { required int32 id = 1; optional string note = 2; }
message Req {
  required string name = 1;
  optional Inner inner = 2;
  repeated Inner items = 3;
  map<string, Inner> by_key = 4;
  required Inner must = 5;
  map<int32, Inner> by_num = 6;
  extensions 100 to 199;
}
extend Req { optional Inner ext = 100; }
message Plain { optional int32 a = 1; optional Plain next = 2; }
]], { name = "r.proto" }))
local Req, Inner, Plain = pool:type("r.Req"), pool:type("r.Inner"), pool:type("r.Plain")

local function encode_error(m)
  local ok, err = pcall(pc.encode, m)
  assert.is_false(ok)
  return err
end

describe("proto2 required fields", function()
  it("make pc.encode raise naming every missing field of the root", function()
    assert.are.equal("missing required fields: r.Req.name, r.Req.must", encode_error(Req {}))
    assert.are.equal("missing required field: r.Req.must", encode_error(Req { name = "n" }))
    assert.is_string(pc.encode(Req { name = "n", must = { id = 1 } }))
  end)

  it("are checked at every depth, in repeated fields, maps and extensions", function()
    local m = Req { name = "n", must = {}, inner = { note = "x" },
      items = { { id = 1 }, {}, { id = 3 }, {} }, by_key = { k = {} }, by_num = { [7] = {} } }
    assert.are.equal("missing required fields: r.Req.inner.id, r.Req.items[1].id, "
      .. "r.Req.items[3].id, r.Req.by_key[\"k\"].id, r.Req.must.id, r.Req.by_num[7].id",
      encode_error(m))
    local x = Req { name = "n", must = { id = 1 } }
    pc.set_extension(x, "r.ext", Inner {})
    assert.are.equal("missing required field: r.Req.(r.ext).id", encode_error(x))
  end)

  it("make pc.decode return nil and the same list; partial = true skips the check", function()
    local m = Req { inner = {}, items = { {} } }
    local bytes = pc.encode(m, { partial = true })
    assert.are.equal("\18\0\26\0", bytes)
    local got, err = pc.decode(Req, bytes)
    assert.is_nil(got)
    assert.are.equal("missing required fields: r.Req.name, r.Req.inner.id, r.Req.items[0].id, "
      .. "r.Req.must", err)
    got = pc.decode(Req, bytes, { partial = true })
    assert.are.equal(m, got)
    -- an empty input lacks the root's required fields too
    got, err = pc.decode(Req, "")
    assert.is_nil(got)
    assert.are.equal("missing required fields: r.Req.name, r.Req.must", err)
    -- a required field split over two occurrences of a sub-message is set
    -- once the input has been read whole (the check runs after the merge)
    got, err = pc.decode(Req, "\10\1n\42\0\42\2\8\5")
    assert.is_nil(err)
    assert.are.equal(5, got.must.id)
    -- numbers-only types without extensions decode on a fast path: the same
    for _, b in ipairs { "", "\16\1" --[[ field 2 as a varint: kept as unknown ]] } do
      got, err = pc.decode(Inner, b)
      assert.is_nil(got)
      assert.are.equal("missing required field: r.Inner.id", err)
    end
    assert.are.equal(7, pc.decode(Inner, "\8\7").id)
  end)

  it("are missing from a map entry's message value the input leaves out, on every decode path", function()
    local q = pc.pool()
    assert(q:load([[syntax = "proto2"; package rm;
      message Req { required int32 id = 1; }
      message M { map<int32, Req> m = 1; }
      message N { required int32 x = 1; map<int32, Req> m = 2; }]], { name = "rm.proto" }))
    local M, N = q:type("rm.M"), q:type("rm.N")
    for _, c in ipairs {
      { M, "\10\2\8\7", "missing required field: rm.M.m[7].id" }, -- an entry with a key, no value
      { N, "\8\1\18\2\8\7", "missing required field: rm.N.m[7].id" },
      { M, "\10\4\8\7\18\0", "missing required field: rm.M.m[7].id" }, -- an empty value
    } do
      for _, opts in ipairs { {}, { table = true } } do
        local got, err = pc.decode(c[1], c[2], opts)
        assert.is_nil(got)
        assert.are.equal(c[3], err)
      end
      assert.is_truthy(pc.decode(c[1], c[2], { partial = true }))
      assert.is_truthy(pc.decode(c[1], c[2], { partial = true, table = true }))
    end
  end)

  it("show a string map key in their path as a Lua literal: NUL, quotes, backslashes escaped", function()
    local q = pc.pool()
    assert(q:load([[syntax = "proto2"; package rk;
      message Req { required int32 id = 1; }
      message S { map<string, Req> m = 1; }]], { name = "rk.proto" }))
    local S = q:type("rk.S")
    local key = 'a\0"b\\\n1' -- a NUL " b \ LF 1: "\10" before the digit 1 is "\0101"
    local entry = "\10" .. string.char(#key) .. key .. "\18\0"
    local want = [[missing required field: rk.S.m["a\0\"b\\\0101"].id]]
    for _, opts in ipairs { {}, { table = true } } do
      local got, err = pc.decode(S, "\10" .. string.char(#entry) .. entry, opts)
      assert.is_nil(got)
      assert.are.equal(want, err)
    end
    assert.are.equal(key, assert(load("return " .. want:match("%[(.-)%]%.id$")))())
    local long = string.rep("k", 70)
    local err = encode_error(S { m = { [long] = {} } })
    assert.are.equal('missing required field: rk.S.m["' .. string.rep("k", 64) .. '..."].id', err)
  end)

  it("name the first missing field however long its path, leaving out the path's middle", function()
    local q = pc.pool()
    assert(q:load([[syntax = "proto2"; package acme.inventory.v1;
      message Item { required int32 id = 1; }
      message Shelf { map<string, Item> items_by_label = 1; }
      message Warehouse { map<string, Shelf> shelves_by_label = 1; }
      message Chain { optional Chain next = 1; optional Item item = 2; }]], { name = "w.proto" }))
    local W, Chain = q:type("acme.inventory.v1.Warehouse"), q:type("acme.inventory.v1.Chain")
    local k = ("\r\n"):rep(32) -- 64 bytes, each shown as \13\10
    local m = W { shelves_by_label = { [k] = { items_by_label = { [k] = {} } } } }
    local bytes = pc.encode(m, { partial = true })
    local errs = { encode_error(m), select(2, pc.decode(W, bytes)), select(2, pc.decode(W, bytes, { table = true })) }
    for _, err in ipairs(errs) do
      assert.are.equal('missing required field: acme.inventory.v1.Warehouse.shelves_by_label["'
        .. ("\\13\\10"):rep(10) .. '\\13..."].items_by_label["' .. ("\\13\\10"):rep(10) .. '\\13..."].id', err)
    end
    -- 90 levels: the path outgrows the error; its middle is left out
    local t = { item = {} }
    for _ = 1, 90 do t = { next = t } end
    local err = select(2, pc.decode(Chain, pc.encode(Chain, t, { partial = true })))
    assert.matches("^missing required field: acme%.inventory%.v1%.Chain%.next%.next%.", err)
    assert.matches("%.next%.%.%.%.next%.", err) -- the middle left out at a segment's start
    assert.matches("%.next%.next%.item%.id$", err)
    assert.is_true(#err < 512)
    -- 40 levels of 64-byte keys outgrow the walk's path: the segments past it
    -- are left out whole and shown as "..." before the field
    local q2 = pc.pool()
    assert(q2:load([[syntax = "proto2"; package p;
      message V { required int32 x = 1; }
      message N { map<string, N> m = 1; optional V v = 2; }]], { name = "n.proto" }))
    local N = q2:type("p.N")
    local root = {}
    local cur = root
    for _ = 1, 40 do
      local n = {}
      cur.m = { ["a" .. ("é"):rep(40)] = n }
      cur = n
    end
    cur.v = {}
    err = select(2, pc.decode(N, pc.encode(N(root), { partial = true })))
    assert.matches('^missing required field: p%.N%.m%["a[^"]*%.%.%."%]%.m', err)
    assert.matches('%.%.%."%]%.m%.%.%.%.x$', err)
    assert.is_true(#err < 512)
    if utf8 then assert.is_truthy(utf8.len(err)) end
  end)

  it("answer pc.is_initialized without raising", function()
    assert.is_false(pc.is_initialized(Req {}))
    assert.is_false(pc.is_initialized(Req { name = "n", must = { id = 1 }, items = { {} } }))
    assert.is_true(pc.is_initialized(Req { name = "n", must = { id = 1 }, items = { { id = 2 } } }))
    assert.is_true(pc.is_initialized(Plain { next = { next = {} } }))
    assert.is_true(pc.is_initialized(Req { name = "n", must = { id = 1 } }.must))
    assert.is_false(pc.is_initialized(Req { inner = {} }.inner))
    -- the words of pc.encode's error when one is missing, nothing more when none is
    assert.are.equal(select(2, pcall(pc.encode, Req { must = {} })), select(2, pc.is_initialized(Req { must = {} })))
    assert.matches("^missing required fields: ", select(2, pc.is_initialized(Req { must = {} })))
    assert.are.equal(1, select("#", pc.is_initialized(Plain {})))
    assert.are.equal("bad argument #1 to 'is_initialized' (message expected, got number)",
      select(2, pcall(pc.is_initialized, 5)))
  end)

  it("list many missing fields within the error's size, then the count", function()
    local items = {}
    for i = 1, 200 do items[i] = {} end
    local err = encode_error(Req { name = "n", must = { id = 1 }, items = items })
    assert.matches("^missing required fields: r%.Req%.items%[0%]%.id, r%.Req%.items%[1%]%.id, ", err)
    assert.matches(", %.%.%. %(200 in all%)$", err)
    assert.is_true(#err < 512)
  end)

  it("cost types without required fields nothing and leave them as they were", function()
    local p = Plain { a = 1, next = { a = 2 } }
    assert.are.equal(p, pc.decode(Plain, pc.encode(p)))
  end)
end)

describe("a request lacking a proto2 required field", function()
  -- r.S.Get served by pc.listen with REST: every protocol refuses the
  -- request INVALID_ARGUMENT (HTTP 400) before the handler runs, as the
  -- gateways (protocall gateway is a pc.listen; nginx's web.requests) do
  local svc = pc.pool()
  assert(svc:load([[
syntax = "proto2";
package r;
message Req { required string name = 1; optional int32 n = 2; }
service S { rpc Get(Req) returns (Req); }
]], { name = "rs.proto" }))
  local called = 0
  local server = pc.server({ ["r.S"] = { Get = function(q) called = called + 1; return q end } }, { pool = svc })
  local partial = pc.encode(svc:type("r.Req") { n = 1 }, { partial = true })
  local WANT = "r.S.Get: request: missing required field: r.Req.name"

  it("is INVALID_ARGUMENT in every protocol of pc.listen, the handler not called", function()
    local l = pc.listen(server, "127.0.0.1:0",
      { rest = { http = { rules = { { selector = "r.S.Get", post = "/v1/get", body = "*" } } } } })
    local curl = {}
    pc.spawn(function() l:serve() end)
    pc.spawn(function()
      for _, protocol in ipairs { "grpc", "grpc-web", "connect" } do
        local t = pc.grpc("http://127.0.0.1:" .. l.port, { protocol = protocol })
        local ok, err = pcall(t.unary, t, "/r.S/Get", partial)
        assert.is_false(ok, protocol)
        assert.are.equal("INVALID_ARGUMENT", err.code, protocol)
        assert.are.equal(WANT, err.message, protocol)
        t:close()
      end
      local f = io.open("/usr/bin/curl")
      if f then
        f:close()
        for _, path in ipairs { "/r.S/Get", "/v1/get" } do
          curl[#curl + 1] = peer.command("/usr/bin/curl -s -w ' %{http_code}' --http2-prior-knowledge -H "
            .. "'content-type: application/json' -d '{\"n\":1}' http://127.0.0.1:" .. l.port .. path)
        end
      end
      l:shutdown(1)
    end)
    pc.run()
    assert.are.equal(0, called)
    if curl[1] then
      assert.are.equal('{"code":"invalid_argument","message":"' .. WANT .. '"} 400', curl[1])
      assert.are.equal('{"code":3,"message":"request: missing required field: r.Req.name","details":[]} 400',
        curl[2])
    end
  end)

  it("is INVALID_ARGUMENT from the web gateway's reader, JSON or proto with validate", function()
    local web = require "protocall.http.web"
    local method = web.methods(svc, { "r.S" })["/r.S/Get"]
    local list, err = web.requests("connect", "json", method, '{"n":1}')
    assert.is_nil(list)
    assert.are.equal("INVALID_ARGUMENT: message 1: missing required field: r.Req.name", tostring(err))
    list, err = web.requests("connect", "proto", method, partial, nil, true)
    assert.is_nil(list)
    assert.are.equal("INVALID_ARGUMENT", err.code)
  end)
end)
