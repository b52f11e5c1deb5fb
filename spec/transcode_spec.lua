-- HTTP/JSON transcoding (lua/protocall/http/): the built-in google/api
-- files, google.api.http rules read and refused, path matching, and the
-- request / response / error / header mappings, as a table of cases from
-- google/api/http.proto's own examples and the documented behaviour of
-- grpc-gateway (runtime/, v2) and Envoy's grpc_json_transcoder. Each case
-- asserts the exact result.
local pc = require "protocall"

local protoc_set = require("protoc").set
local corpus = require "corpus"

describe("google/api/http.proto, annotations.proto and httpbody.proto built in", function()
  local FILES = { "google/api/http.proto", "google/api/annotations.proto", "google/api/httpbody.proto" }

  it("are imported with no file on disk, their licence headers kept", function()
    for _, name in ipairs(FILES) do
      local src = assert(pc.builtin_source(name))
      assert.truthy(src:find("Licensed under the Apache License, Version 2.0", 1, true), name)
    end
    local p = pc.pool()
    assert(p:load([[
      syntax = "proto3";
      import "google/api/annotations.proto";
      import "google/api/httpbody.proto";
      message M {}
      service S { rpc Get(M) returns (google.api.HttpBody) { option (google.api.http).get = "/m"; } }
    ]], { name = "s.proto" }))
    assert.is_not_nil(p:type("google.api.HttpRule"))
    assert.is_not_nil(p:type("google.api.HttpBody"))
  end)

  it("give protoc's descriptors", function()
    for _, name in ipairs(FILES) do
      local set = protoc_set(name)
      if not set then return pending("protoc is not installed") end
      local fds = assert(pc.decode(pc.type("google.protobuf.FileDescriptorSet"), set))
      local p = pc.pool()
      assert(p:load('syntax = "proto3"; import "' .. name .. '";', { name = "x.proto" }))
      local seen = 0
      for _, f in pc.ipairs(fds.file) do
        if f.name == name then
          seen = seen + 1
          assert.are.equal(pc.encode(f, { deterministic = true }),
            pc.encode(p:file_descriptor(f.name), { deterministic = true }), name)
        end
      end
      assert.are.equal(1, seen)
    end
  end)
end)

describe("google/api/http.proto and annotations.proto against googleapis' own", function()
  -- the built-in files are googleapis' without their documentation comments:
  -- protoc gives the corpus's originals the same descriptors
  it("give the same descriptors as the originals in the corpus", function()
    local dir = corpus.dir .. "/protos/googleapis"
    if not corpus.read("protos/googleapis/google/api/http.proto") then
      return corpus.skip(pending, "google/api against googleapis' files")
    end
    for _, name in ipairs { "google/api/http.proto", "google/api/annotations.proto" } do
      local set = protoc_set(name, dir)
      if not set then return pending("protoc is not installed") end
      local fds = assert(pc.decode(pc.type("google.protobuf.FileDescriptorSet"), set))
      local p = pc.pool()
      assert(p:load('syntax = "proto3"; import "' .. name .. '";', { name = "x.proto" }))
      local seen = 0
      for _, f in pc.ipairs(fds.file) do
        if f.name == name then
          seen = seen + 1
          assert.are.equal(pc.encode(f, { deterministic = true }),
            pc.encode(p:file_descriptor(f.name), { deterministic = true }), name)
        end
      end
      assert.are.equal(1, seen)
    end
  end)
end)

-- The messages of google/api/http.proto's examples, and a few more kinds.
local SCHEMA = [[
syntax = "proto3";
package example.v1;
import "google/api/annotations.proto";
import "google/api/httpbody.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/field_mask.proto";
import "google/protobuf/wrappers.proto";
import "google/rpc/error_details.proto";

message GetMessageRequest {
  message SubMessage { string subfield = 1; }
  string message_id = 1;
  int64 revision = 2;
  SubMessage sub = 3;
  string user_id = 4;
  string name = 5;
}
message Message { string text = 1; }
message UpdateMessageRequest { string message_id = 1; Message message = 2; }
message PatchMessageRequest { string message_id = 1; string text = 2; }

enum Kind { KIND_UNSPECIFIED = 0; BOOK = 1; MAGAZINE = 2; }
message Query {
  string name = 1;
  repeated string tags = 2;
  Kind kind = 3;
  repeated Kind kinds = 4;
  bool flag = 5;
  google.protobuf.Timestamp ts = 6;
  google.protobuf.Duration wait = 7;
  google.protobuf.FieldMask mask = 8;
  google.protobuf.Int32Value limit = 9;
  google.protobuf.BoolValue on = 10;
  map<string, string> labels = 11;
  repeated Message list = 12;
  bytes blob = 13;
  double ratio = 14;
  uint64 big = 15;
  oneof choice { string a = 16; string b = 17; }
  Message msg = 18;
}
message Reply { Message msg = 1; repeated string items = 2; int32 count = 3; google.api.HttpBody page = 4; }
message Upload { string name = 1; google.api.HttpBody file = 2; }

service Messaging {
  rpc GetMessage(GetMessageRequest) returns (Message) {
    option (google.api.http) = {
      get: "/v1/messages/{message_id}"
      additional_bindings { get: "/v1/users/{user_id}/messages/{message_id}" }
      additional_bindings { get: "/v1/{name=messages/*/names/*}" }
    };
  }
  rpc UpdateMessage(UpdateMessageRequest) returns (Message) {
    option (google.api.http) = { patch: "/v1/messages/{message_id}" body: "message" };
  }
  rpc PatchMessage(PatchMessageRequest) returns (Message) {
    option (google.api.http) = { patch: "/v2/messages/{message_id}" body: "*" };
  }
  rpc Search(Query) returns (Reply) {
    option (google.api.http) = {
      get: "/v1/search"
      additional_bindings { get: "/v1/search/{name}" }
      additional_bindings { get: "/v1/items" response_body: "items" }
      additional_bindings { get: "/v1/msg" response_body: "msg" }
      additional_bindings { get: "/v1/count" response_body: "count" }
      additional_bindings { post: "/v1/search:tags" body: "tags" }
      additional_bindings { post: "/v1/search:one" body: "msg" }
      additional_bindings { get: "/v1/page" response_body: "page" }
    };
  }
  rpc Shelf(Query) returns (Reply) {
    option (google.api.http) = {
      get: "/v1/shelves/special"
      additional_bindings { get: "/v1/shelves/{name}" }
      additional_bindings { get: "/v1/shelves/{name}/books/{a}" }
      additional_bindings { get: "/v1/any/{name=**}" }
      additional_bindings { get: "/v1/any/{name=*}/tail" }
      additional_bindings { get: "/v1/files/{name=**}:download" }
      additional_bindings { post: "/v1/{name=topics/*}:publish" body: "*" }
      additional_bindings { get: "/v1/{name=topics/*}" }
      additional_bindings { custom { kind: "HEAD" path: "/v1/head/{name}" } }
      additional_bindings { delete: "/v1/shelves/{name}" }
      additional_bindings { put: "/v1/shelves/{name}" body: "msg" }
    };
  }
  rpc Raw(google.api.HttpBody) returns (google.api.HttpBody) {
    option (google.api.http) = { post: "/v1/raw" body: "*" };
  }
  rpc Put(Upload) returns (Reply) {
    option (google.api.http) = { put: "/v1/uploads/{name}" body: "file" };
  }
  rpc Unbound(Message) returns (Message);
}
]]

local pool = pc.pool()
assert(pool:load(SCHEMA, { name = "example/v1/messaging.proto" }))
local tc = pc.transcoder(pool)

-- The request message of an HTTP request, as text format for exact
-- comparison, or nil and the error's text. tc:request_bytes must agree:
-- the same message's bytes, or the same failure.
local function call(t, method, target, body, ct)
  local route, bindings, query = t:match(method, target)
  if not route then return nil, tostring(bindings) end
  local m, err = t:request(route, bindings, query, body, ct)
  local bytes, berr = t:request_bytes(route, bindings, query, body, ct)
  if not m then
    assert.is_nil(bytes, "request_bytes took what request refused: " .. tostring(err))
    assert.are.same({ err.code, err.http_status, tostring(err) }, { berr.code, berr.http_status, tostring(berr) })
    return nil, tostring(err)
  end
  assert(bytes, tostring(berr))
  assert.are.equal(pc.to_text(m), pc.to_text(assert(pc.decode(route.input, bytes))))
  local text = pc.to_text(m):gsub("%s+", " "):gsub(" $", "")
  return text == "" and route.method or route.method .. " " .. text
end

describe("google/api/http.proto's examples", function()
  it("maps GET /v1/messages/123456 to message_id (a path variable)", function()
    assert.are.same({ 'example.v1.Messaging.GetMessage message_id: "123456"' },
      { call(tc, "GET", "/v1/messages/123456") })
  end)

  it("maps the fields not in the path to query parameters, nested with dots", function()
    assert.are.same({ 'example.v1.Messaging.GetMessage message_id: "123456" revision: 2 sub { subfield: "foo" }' },
      { call(tc, "GET", "/v1/messages/123456?revision=2&sub.subfield=foo") })
  end)

  it("binds a multi-segment variable with its literals: {name=messages/*/names/*}", function()
    assert.are.same({ 'example.v1.Messaging.GetMessage name: "messages/1/names/2"' },
      { call(tc, "GET", "/v1/messages/1/names/2") })
  end)

  it("maps body: \"message\" to that field", function()
    assert.are.same({ 'example.v1.Messaging.UpdateMessage message_id: "123456" message { text: "Hi!" }' },
      { call(tc, "PATCH", "/v1/messages/123456", '{ "text": "Hi!" }') })
  end)

  it("maps body: \"*\" to every field the path does not bind", function()
    assert.are.same({ 'example.v1.Messaging.PatchMessage message_id: "123456" text: "Hi!"' },
      { call(tc, "PATCH", "/v2/messages/123456", '{ "text": "Hi!" }') })
  end)

  it("serves additional_bindings", function()
    assert.are.same({ 'example.v1.Messaging.GetMessage message_id: "123456" user_id: "me"' },
      { call(tc, "GET", "/v1/users/me/messages/123456") })
  end)

  it("lets a service config rule replace the annotation (selector, sub.subfield in the path)", function()
    local t = pc.transcoder(pool, { http = { rules = {
      { selector = "example.v1.Messaging.GetMessage", get = "/v1/messages/{message_id}/{sub.subfield}" },
    } } })
    assert.are.same({ 'example.v1.Messaging.GetMessage message_id: "123456" sub { subfield: "foo" }' },
      { call(t, "GET", "/v1/messages/123456/foo") })
    assert.are.same({ nil, "NOT_FOUND: no route for GET /v1/users/me/messages/1" },
      { call(t, "GET", "/v1/users/me/messages/1") })
    -- the same as google.api.Service JSON
    local j = pc.transcoder(pool, { http = '{"name": "x.googleapis.com", "http": {"rules": [{"selector": '
      .. '"example.v1.Messaging.GetMessage", "get": "/v1/messages/{message_id}/{sub.subfield}"}]}}' })
    assert.are.same({ 'example.v1.Messaging.GetMessage message_id: "1" sub { subfield: "x" }' },
      { call(j, "GET", "/v1/messages/1/x") })
  end)
end)

describe("path matching", function()
  local cases = {
    -- a literal segment wins over a variable, whatever the order of the rules
    { "GET", "/v1/shelves/special", 'example.v1.Messaging.Shelf' },
    { "GET", "/v1/shelves/other", 'example.v1.Messaging.Shelf name: "other"' },
    { "GET", "/v1/shelves/s1/books/b1", 'example.v1.Messaging.Shelf name: "s1" a: "b1"' },
    -- '*' wins over '**'; '**' takes one or more segments, and none
    { "GET", "/v1/any/x/tail", 'example.v1.Messaging.Shelf name: "x"' },
    { "GET", "/v1/any/x/y/tail", 'example.v1.Messaging.Shelf name: "x/y/tail"' },
    { "GET", "/v1/any/x", 'example.v1.Messaging.Shelf name: "x"' },
    { "GET", "/v1/any", "example.v1.Messaging.Shelf" },
    -- custom verbs; a ':' that is no verb of a rule stays in the segment
    { "POST", "/v1/topics/t1:publish", 'example.v1.Messaging.Shelf name: "topics/t1"' },
    { "GET", "/v1/topics/t1:publish", 'example.v1.Messaging.Shelf name: "topics/t1:publish"' },
    { "GET", "/v1/files/a/b.txt:download", 'example.v1.Messaging.Shelf name: "a/b.txt"' },
    { "POST", "/v1/search:tags", "example.v1.Messaging.Search" },
    -- custom methods, DELETE, PUT
    { "HEAD", "/v1/head/h", 'example.v1.Messaging.Shelf name: "h"' },
    { "DELETE", "/v1/shelves/d", 'example.v1.Messaging.Shelf name: "d"' },
    -- single-segment variables decode every escape, %2F included: never a separator
    { "GET", "/v1/messages/a%2Fb", 'example.v1.Messaging.GetMessage message_id: "a/b"' },
    { "GET", "/v1/messages/a%20b+c", 'example.v1.Messaging.GetMessage message_id: "a b+c"' },
    { "GET", "/v1/messages/%E2%82%AC", 'example.v1.Messaging.GetMessage message_id: "\\342\\202\\254"' },
    -- multi-segment variables keep %2F and %2f
    { "GET", "/v1/messages/a%2Fb/names/c%2fd%3F",
      'example.v1.Messaging.GetMessage name: "messages/a%2Fb/names/c%2fd?"' },
    { "GET", "/v1/any/a%2Fb/c", 'example.v1.Messaging.Shelf name: "a%2Fb/c"' },
    -- literals compare decoded
    { "GET", "/v1/shelves/spec%69al", "example.v1.Messaging.Shelf" },
    -- the query string and a fragment are not the path
    { "GET", "/v1/messages/7?#x", 'example.v1.Messaging.GetMessage message_id: "7"' },
    -- not found, not allowed, bad paths
    { "GET", "/v1/messages", nil, "NOT_FOUND: no route for GET /v1/messages" },
    { "GET", "/v1/messages/", nil, "NOT_FOUND: no route for GET /v1/messages/" },
    { "GET", "/v1//messages/1", nil, "NOT_FOUND: no route for GET /v1//messages/1" },
    { "POST", "/v1/messages/1", nil, "UNIMPLEMENTED: method POST not allowed for /v1/messages/1" },
    { "GET", "/v1/messages/%zz", nil, "INVALID_ARGUMENT: bad path: bad percent-escape in segment 3" },
    { "GET", "/v1/messages/%4", nil, "INVALID_ARGUMENT: bad path: bad percent-escape in segment 3" },
    { "GET", "/v1/shelves/../x", nil, "INVALID_ARGUMENT: bad path: segment 3 is '..'" },
    { "GET", "/v1/shelves/%2E%2e", nil, "INVALID_ARGUMENT: bad path: segment 3 is '..'" },
    { "GET", "/v1/./shelves/x", nil, "INVALID_ARGUMENT: bad path: segment 2 is '.'" },
    -- nor a traversal a variable would carry: escaped slashes, a custom verb's segment
    { "GET", "/v1/messages/..%2Fetc", nil,
      "INVALID_ARGUMENT: bad path: segment 3 holds '..' between escaped slashes (%2F)" },
    { "GET", "/v1/messages/a%2f.%2Fb", nil,
      "INVALID_ARGUMENT: bad path: segment 3 holds '.' between escaped slashes (%2F)" },
    { "GET", "/v1/files/a/..:download", nil, "INVALID_ARGUMENT: bad path: segment 4 is '..' before its verb" },
    { "GET", "/v1/files/%2E:download", nil, "INVALID_ARGUMENT: bad path: segment 3 is '.' before its verb" },
    { "GET", "/v1/files/a..:download", 'example.v1.Messaging.Shelf name: "a.."' },
    { "GET", "/v1/messages/..:x", 'example.v1.Messaging.GetMessage message_id: "..:x"' },
    { "GET", "v1/shelves/x", nil, "INVALID_ARGUMENT: bad path: no leading '/'" },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " " .. c[2], function()
      assert.are.same({ c[3], c[4] }, { call(tc, c[1], c[2]) })
    end)
  end

  it("answers 404, 405 and 400 with a google.rpc.Status body", function()
    local _, e404 = tc:match("GET", "/nope")
    assert.are.same({ 404, '{"code":5,"message":"no route for GET /nope","details":[]}', "application/json" },
      { tc:error(e404) })
    local _, e405 = tc:match("PUT", "/v1/messages/1")
    assert.are.same({ 405, '{"code":12,"message":"method PUT not allowed for /v1/messages/1","details":[]}',
      "application/json", "GET, PATCH" }, { tc:error(e405) })
    local _, e400 = tc:match("GET", "/v1/%")
    assert.are.equal(400, (tc:error(e400)))
  end)

  it("decodes %2F in multi-segment variables with fully_decode_reserved_expansion", function()
    local t = pc.transcoder(pool, { http = { fully_decode_reserved_expansion = true, rules = {} } })
    assert.are.same({ 'example.v1.Messaging.Shelf name: "a/b/c"' }, { call(t, "GET", "/v1/any/a%2Fb/c") })
  end)

  it("matches a path equal to a template of literals alone by a look-up, as the walk would", function()
    local t = pc.transcoder(pool, { http = { rules = { { selector = "example.v1.Messaging.Unbound", get = "/z/a:b",
      additional_bindings = { { get = "/z/a%3Ab" }, { get = "/z/a%2Fb" }, { get = "/z/{text=lit}" },
        { get = "/z/{text}/c" }, { delete = "/z/*/c" } } } } } })
    local function match(method, path)
      local route, b = t:match(method, path)
      if not route then return tostring(b) end
      local out = { route.template, t.set.router.visits.visits }
      for _, x in ipairs(b) do out[#out + 1] = x.field .. "=" .. x.value end
      return out
    end
    assert.are.same({ "/z/a:b", 0 }, match("GET", "/z/a:b")) -- the verb before the whole segment
    assert.are.same({ "/z/a%3Ab", 3 }, match("GET", "/z/a%3Ab")) -- walked: the path has escapes
    assert.are.same({ "/z/a%2Fb", 3 }, match("GET", "/z/a%2Fb"))
    assert.are.same("NOT_FOUND: no route for GET /z/a/b", match("GET", "/z/a/b"))
    assert.are.same({ "/z/{text=lit}", 3, "text=lit" }, match("GET", "/z/lit")) -- literals that bind
    assert.are.same({ "/z/{text}/c", 4, "text=x" }, match("GET", "/z/x/c"))
    assert.are.same({ "/z/*/c", 4 }, match("DELETE", "/z/x/c"))
    assert.are.same({ "/v1/shelves/special", 0 }, { tc:match("GET", "/v1/shelves/special").template,
      tc.set.router.visits.visits })
    -- another method's rule of the same path is walked: a variable's, here
    assert.are.same({ 'example.v1.Messaging.Shelf name: "special"' }, { call(tc, "DELETE", "/v1/shelves/special") })
  end)

  it("walks as many trie nodes with 2000 rules as with one (a trie, not a list)", function()
    local rules = {}
    for i = 1, 2000 do
      rules[i] = { selector = "example.v1.Messaging.Unbound", get = "/r" .. i .. "/{text}/x" .. i }
    end
    rules[1].additional_bindings = {}
    for i = 2, 2000 do rules[1].additional_bindings[i - 1] = rules[i] end
    local many = pc.transcoder(pool, { http = { rules = { rules[1] } } })
    local route, b = many:match("GET", "/r1999/t/x1999")
    assert.are.same({ "example.v1.Messaging.Unbound", "t" }, { route.method, b[1].value })
    -- the root, then one node per segment: whatever the number of rules
    assert.are.equal(4, many.set.router.visits.visits)
    assert.are.same({ nil, "NOT_FOUND: no route for GET /r1999/t/x1" }, { call(many, "GET", "/r1999/t/x1") })
    assert.are.equal(3, many.set.router.visits.visits)
  end)
end)

describe("query parameters", function()
  local cases = {
    { "/v1/search?tags=a&tags=b", 'tags: "a" tags: "b"' },
    { "/v1/search?kind=BOOK&kinds=2&kinds=BOOK", "kind: BOOK kinds: MAGAZINE kinds: BOOK" },
    { "/v1/search?kind=1", "kind: BOOK" },
    { "/v1/search?flag=true", "flag: true" },
    { "/v1/search?flag=1", "flag: true" },
    { "/v1/search?flag=False", "" },
    { "/v1/search?ts=2017-01-15T01:30:15.01Z", "ts { seconds: 1484443815 nanos: 10000000 }" },
    { "/v1/search?wait=1.5s", "wait { seconds: 1 nanos: 500000000 }" },
    { "/v1/search?mask=a.b,c", 'mask { paths: "a.b" paths: "c" }' },
    { "/v1/search?limit=7&on=true", "limit { value: 7 } on { value: true }" },
    { "/v1/search?blob=AAFh", 'blob: "\\000\\001a"' },
    { "/v1/search?ratio=NaN&big=18446744073709551615", "ratio: nan big: 18446744073709551615" },
    { "/v1/search?msg.text=a+b%26c", 'msg { text: "a b&c" }' },
    -- a map entry as grpc-gateway reads it: field[key]=value
    { "/v1/search?labels[a]=1&labels[b%20c]=x", 'labels { key: "a" value: "1" } labels { key: "b c" value: "x" }' },
    -- the JSON name works too
    { "/v1/search?name=x&a=1", 'name: "x" a: "1"' },
    -- a parameter without '=' is an empty value; empty parts are skipped
    { "/v1/search?name&&", "" },
    -- a field bound by the path is skipped (grpc-gateway filters it)
    { "/v1/search/p?name=q", 'name: "p"' },
    -- body "*": no query parameters at all
    { "/v1/search?kind=9", "kind: 9" },
  }
  for _, c in ipairs(cases) do
    it("GET " .. c[1], function()
      local want = "example.v1.Messaging.Search" .. (c[2] ~= "" and " " .. c[2] or "")
      assert.are.same({ want }, { call(tc, "GET", c[1]) })
    end)
  end

  local bad = {
    { "/v1/search?nope=1", "INVALID_ARGUMENT: query parameter 'nope': no field 'nope' in example.v1.Query" },
    { "/v1/search?msg.nope=1",
      "INVALID_ARGUMENT: query parameter 'msg.nope': no field 'nope' in example.v1.Message" },
    { "/v1/search?name.x=1",
      "INVALID_ARGUMENT: query parameter 'name.x': example.v1.Query.name is not a singular message field" },
    { "/v1/search?big=-1", "INVALID_ARGUMENT: query parameter 'big': -1 out of range for uint64" },
    { "/v1/search?kind=NOVEL",
      "INVALID_ARGUMENT: query parameter 'kind': unknown value \"NOVEL\" of enum example.v1.Kind" },
    { "/v1/search?flag=yes", 'INVALID_ARGUMENT: query parameter \'flag\': invalid bool "yes"' },
    { "/v1/search?name=a&name=b", "INVALID_ARGUMENT: query parameter 'name' given 2 times for a singular field" },
    { "/v1/search?msg=x", "INVALID_ARGUMENT: query parameter 'msg': a message field (example.v1.Message)" },
    { "/v1/search?list.text=x", "INVALID_ARGUMENT: query parameter 'list.text': "
      .. "example.v1.Query.list is not a singular message field" },
    { "/v1/search?labels=x", "INVALID_ARGUMENT: query parameter 'labels': a map field" },
    { "/v1/search?labels[a]=1&labels[b]=%FF", "INVALID_ARGUMENT: query parameter 'labels[b]': invalid UTF-8" },
    { "/v1/search?name[a]=x", "INVALID_ARGUMENT: query parameter 'name[a]': not a map field" },
    { "/v1/search?labels[a]=1&labels[a]=2", "INVALID_ARGUMENT: query parameter 'labels[a]': key given twice" },
    { "/v1/search?mask=a..b",
      "INVALID_ARGUMENT: query parameter 'mask': FieldMask path \"a..b\" has an empty field name" },
    { "/v1/search?mask=a,,b", "INVALID_ARGUMENT: query parameter 'mask': FieldMask \"a,,b\" has an empty path" },
    { "/v1/search?mask=a,%20b",
      "INVALID_ARGUMENT: query parameter 'mask': FieldMask path \" b\" has \" \", which no field name has" },
    { "/v1/search?labels[a][b]=1",
      "INVALID_ARGUMENT: query parameter 'labels[a][b]': a map key takes one level of brackets (name[key])" },
    { "/v1/search?name=%zz", "INVALID_ARGUMENT: bad percent-escape in the query string" },
    { "/v1/search/%FF", "INVALID_ARGUMENT: path variable 'name': invalid UTF-8" },
    { "/v1/search?name=%FF", "INVALID_ARGUMENT: query parameter 'name': invalid UTF-8" },
    { "/v1/search?%0A" .. ("x"):rep(300) .. "=1", "INVALID_ARGUMENT: query parameter '?" .. ("x"):rep(99)
      .. "': no field '?" .. ("x"):rep(99) .. "' in example.v1.Query" },
    { "/v1/search?a=1&b=2", "INVALID_ARGUMENT: query parameter 'b': oneof example.v1.Query.choice set "
      .. "twice (by \"a\" and \"b\")" },
  }
  for _, c in ipairs(bad) do
    it("refuses GET " .. c[1], function()
      assert.are.same({ nil, c[2] }, { call(tc, "GET", c[1]) })
    end)
  end

  it("names the parameter of a map key out of range and of fields nested too deep, at once", function()
    local rpool = pc.pool()
    assert(rpool:load([[
      syntax = "proto3";
      package r;
      import "google/api/annotations.proto";
      enum Kind { KIND_UNSPECIFIED = 0; BOOK = 1; }
      message R { string name = 1; R child = 2; map<int32, Kind> mk = 3; map<uint64, string> mu = 4; }
      service S { rpc Get(R) returns (R) { option (google.api.http).get = "/r/{child.name}"; } }
    ]], { name = "r.proto" }))
    local t = pc.transcoder(rpool)
    local function get(target)
      local r, b, q = assert(t:match("GET", target))
      local m, err = t:request(r, b, q)
      return m and pc.to_json(m), err and tostring(err)
    end
    assert.are.same({ nil, "INVALID_ARGUMENT: query parameter 'mk[99999999999]': 99999999999 out of range for int32" },
      { get("/r/a?mk[99999999999]=BOOK") })
    assert.are.same({ nil, "INVALID_ARGUMENT: query parameter 'mk[2]': unknown value \"NOPE\" of enum r.Kind" },
      { get("/r/a?mk[1]=BOOK&mk[2]=NOPE") })
    assert.are.same({ nil, "INVALID_ARGUMENT: query parameter 'mu[-1]': -1 out of range for uint64" },
      { get("/r/a?mu[-1]=x") })
    local deep = ("child."):rep(10900) .. "name"
    assert.are.same({ nil, "INVALID_ARGUMENT: query parameter '" .. deep:sub(1, 100) .. "': fields nested deeper "
      .. "than 100" }, { get("/r/a?" .. deep .. "=x") })
    assert.truthy(get("/r/a?" .. ("child."):rep(99) .. "name=x"))
    -- the path binds child.name: the query's child.name is skipped, child.child.name is set
    assert.are.same({ '{"child":{"name":"a","child":{"name":"b"}}}' }, { get("/r/a?child.name=z&child.child.name=b") })
  end)

  it("skips unknown parameters with ignore_unknown_query", function()
    local t = pc.transcoder(pool, { ignore_unknown_query = true })
    assert.are.same({ 'example.v1.Messaging.Search name: "x"' }, { call(t, "GET", "/v1/search?nope=1&name=x") })
  end)

  it("refuses a query string past the limits", function()
    local t = pc.transcoder(pool, { max_query_bytes = 100, max_query_params = 3 })
    assert.are.same({ nil, "INVALID_ARGUMENT: query string of 101 bytes (at most 100)" },
      { call(t, "GET", "/v1/search?name=" .. ("x"):rep(96)) })
    assert.are.same({ nil, "INVALID_ARGUMENT: more than 3 query parameters" },
      { call(t, "GET", "/v1/search?tags=1&tags=2&tags=3&tags=4") })
    local huge = "/v1/search?" .. ("tags=x&"):rep(200000)
    assert.are.same({ nil, "INVALID_ARGUMENT: query string of 1400000 bytes (at most 65536)" },
      { call(tc, "GET", huge) })
  end)
end)

describe("request bodies", function()
  it("decodes body \"*\" and lets the path win over it", function()
    assert.are.same({ 'example.v1.Messaging.PatchMessage message_id: "p" text: "t"' },
      { call(tc, "PATCH", "/v2/messages/p", '{"messageId": "b", "text": "t"}') })
  end)

  it("ignores the query with body \"*\" and the body field's parameters with body \"field\"", function()
    assert.are.same({ 'example.v1.Messaging.PatchMessage message_id: "p"' },
      { call(tc, "PATCH", "/v2/messages/p?text=q", "") })
    assert.are.same({ 'example.v1.Messaging.Shelf name: "s" msg { text: "b" }' },
      { call(tc, "PUT", "/v1/shelves/s?msg.text=q", '{"text": "b"}') })
  end)

  it("takes a JSON array for a repeated body field", function()
    assert.are.same({ 'example.v1.Messaging.Search name: "q" tags: "a" tags: "b"' },
      { call(tc, "POST", "/v1/search:tags?name=q", '["a", "b"]') })
  end)

  it("treats an empty or blank body as no fields", function()
    assert.are.same({ 'example.v1.Messaging.PatchMessage message_id: "p"' },
      { call(tc, "PATCH", "/v2/messages/p", " \r\n") })
    assert.are.same({ 'example.v1.Messaging.UpdateMessage message_id: "p"' },
      { call(tc, "PATCH", "/v1/messages/p", "") })
  end)

  it("names the JSON path of bad input, relative to the body", function()
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $.text: string expected, got a number at offset 9" },
      { call(tc, "PATCH", "/v2/messages/p", '{"text": 1}') })
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $.text: string expected, got a number at offset 10" },
      { call(tc, "PATCH", "/v1/messages/p", ' {"text": 1}') })
    assert.are.same({ nil,
      'INVALID_ARGUMENT: body: $.nope: no field named "nope" in example.v1.PatchMessageRequest at offset 1' },
      { call(tc, "PATCH", "/v2/messages/p", '{"nope": 1}') })
    local _, err = call(tc, "PATCH", "/v2/messages/p", '{"text": ')
    assert.truthy(err:find("^INVALID_ARGUMENT: body: "), err)
    _, err = call(tc, "PATCH", "/v1/messages/p", '{"text": "x"} {')
    assert.truthy(err:find("^INVALID_ARGUMENT: body: "), err)
    _, err = call(tc, "PATCH", "/v1/messages/p", '"x"}, "message_id": "evil"')
    assert.truthy(err:find("^INVALID_ARGUMENT: body: "), err)
  end)

  it("keeps a body \"field\" body inside its field", function()
    -- read as {"message": BODY}: a BODY closing that object must not set the other fields
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $: unexpected data after the value at offset 13" },
      { call(tc, "PUT", "/v1/shelves/s", '{"text": "a"}, "kind": "BOOK", "a": "x"') })
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $: unexpected data after the value at offset 5" },
      { call(tc, "POST", "/v1/search:tags", '["a"], "labels": {"k": "v"}') })
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $: unexpected data after the value at offset 5" },
      { call(tc, "POST", "/v1/search:tags", '["a"], "labels": {"k": 1}') })
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $[1]: string expected, got a number at offset 6" },
      { call(tc, "POST", "/v1/search:tags", '["a", 2]') })
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $: unexpected data after the value at offset 5" },
      { call(tc, "POST", "/v1/search:tags", '["a"], "ratio": 2') })
  end)

  it("names a body \"field\" body's own syntax error, not the wrapper's", function()
    -- read as {"message": BODY}: a body cut short met the wrapper's closing brace
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $.text: unexpected end of input at offset 8" },
      { call(tc, "PUT", "/v1/shelves/s", '{"text":') })
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $: unexpected end of input at offset 12" },
      { call(tc, "PUT", "/v1/shelves/s", '{"text": "a"') })
    assert.are.same({ nil, "INVALID_ARGUMENT: body: $: unexpected end of input at offset 4" },
      { call(tc, "POST", "/v1/search:tags", '["a"') })
  end)

  it("refuses a body past max_body_bytes with 413", function()
    local t = pc.transcoder(pool, { max_body_bytes = 10 })
    local route, b, q = t:match("PATCH", "/v2/messages/p")
    local m, err = t:request(route, b, q, '{"text": "12345"}')
    assert.are.same({ nil, "RESOURCE_EXHAUSTED: body of 17 bytes (at most 10)" }, { m, tostring(err) })
    assert.are.same({ 413, '{"code":8,"message":"body of 17 bytes (at most 10)","details":[]}', "application/json" },
      { t:error(err) })
  end)

  it("skips unknown body members with ignore_unknown_fields", function()
    local t = pc.transcoder(pool, { ignore_unknown_fields = true })
    assert.are.same({ 'example.v1.Messaging.PatchMessage message_id: "p" text: "t"' },
      { call(t, "PATCH", "/v2/messages/p", '{"nope": 1, "text": "t"}') })
  end)

  it("takes a google.api.HttpBody request raw, with its content type", function()
    assert.are.same({ 'example.v1.Messaging.Raw content_type: "image/png" data: "\\211PNG"' },
      { call(tc, "POST", "/v1/raw", "\137PNG", "image/png") })
    assert.are.same({ 'example.v1.Messaging.Put name: "n" file { content_type: "text/csv" data: "a,b" }' },
      { call(tc, "PUT", "/v1/uploads/n", "a,b", "text/csv") })
  end)

  it("gives the bytes of a proto2 request whole, or 400 naming the required fields missing (tc:request_bytes)",
    function()
      local q = pc.pool()
      assert(q:load([[
        syntax = "proto2"; package p2;
        message R { required string name = 1; optional int32 n = 2; }
        service S { rpc Do(R) returns (R); rpc Put(R) returns (R); }
      ]], { name = "p2.proto" }))
      local t = pc.transcoder(q, { http = { rules = {
        { selector = "p2.S.Do", post = "/v1/do/{name}", body = "*",
          additional_bindings = { { post = "/v1/do", body = "*" } } },
        { selector = "p2.S.Put", put = "/v1/put", body = "n" } } } })
      -- the path's field completes the body's message before the check
      local r, b, query = t:match("POST", "/v1/do/x")
      local bytes = assert(t:request_bytes(r, b, query, '{"n":1}'))
      assert.are.same({ n = 1, name = "x" }, pc.to_table(assert(pc.decode(r.input, bytes))))
      for _, c in ipairs { { "POST", "/v1/do", '{"n":1}' }, { "PUT", "/v1/put", "1" } } do
        r, b, query = t:match(c[1], c[2])
        local got, err = t:request_bytes(r, b, query, c[3])
        assert.is_nil(got)
        assert.are.same({ "INVALID_ARGUMENT", 400, "request: missing required field: p2.R.name" },
          { err.code, err.http_status, err.message })
      end
    end)
end)

describe("responses", function()
  local Reply, Message = pool:type("example.v1.Reply"), pool:type("example.v1.Message")
  local HttpBody = pool:type("google.api.HttpBody")
  local function route(method, target) return (tc:match(method, target)) end
  -- tc:response, checked against tc:response_bytes of the message's bytes
  local function response(t, r, msg)
    local out = { t:response(r, msg) }
    assert.are.same(out, { t:response_bytes(r, pc.encode(msg)) })
    return (table.unpack or unpack)(out)
  end

  it("writes the whole message, or the response_body field alone", function()
    local r = Reply { msg = Message { text = "m" }, items = { "a", "b" }, count = 3 }
    assert.are.same({ '{"msg":{"text":"m"},"items":["a","b"],"count":3}', "application/json" },
      { response(tc, route("GET", "/v1/search"), r) })
    assert.are.same({ '["a","b"]', "application/json" }, { response(tc, route("GET", "/v1/items"), r) })
    assert.are.same({ '{"text":"m"}', "application/json" }, { response(tc, route("GET", "/v1/msg"), r) })
    assert.are.same({ "3", "application/json" }, { response(tc, route("GET", "/v1/count"), r) })
    -- fields at their defaults: the default's JSON, an unset message {}
    assert.are.same({ "[]", "application/json" }, { response(tc, route("GET", "/v1/items"), Reply {}) })
    assert.are.same({ "0", "application/json" }, { response(tc, route("GET", "/v1/count"), Reply {}) })
    assert.are.same({ "{}", "application/json" }, { response(tc, route("GET", "/v1/msg"), Reply {}) })
  end)

  it("writes with pc.to_json's options", function()
    local t = pc.transcoder(pool, { json = { proto_names = true, emit_defaults = true } })
    assert.are.same({ '{"message_id":"","revision":"0","user_id":"","name":""}', "application/json" },
      { response(t, { output = pool:type("example.v1.GetMessageRequest") },
        pool:type("example.v1.GetMessageRequest") {}) })
  end)

  it("gives a google.api.HttpBody raw, with its content type", function()
    assert.are.same({ "<p>", "text/html" },
      { response(tc, route("POST", "/v1/raw"), HttpBody { content_type = "text/html", data = "<p>" }) })
    assert.are.same({ "x", "application/octet-stream" },
      { response(tc, route("POST", "/v1/raw"), HttpBody { data = "x" }) })
    assert.are.same({ "%PDF", "application/pdf" },
      { response(tc, route("GET", "/v1/page"), Reply { page = HttpBody { content_type = "application/pdf",
        data = "%PDF" } }) })
  end)

  it("fails INTERNAL naming the method for bytes that do not decode (tc:response_bytes)", function()
    for _, target in ipairs { "/v1/search", "/v1/items" } do
      local body, err = tc:response_bytes(route("GET", target), "\10\99")
      assert.is_nil(body)
      assert.are.equal("INTERNAL", err.code)
      assert.truthy(tostring(err):find("response of example.v1.Messaging.Search: ", 1, true), tostring(err))
    end
  end)
end)

describe("errors", function()
  -- grpc-gateway's HTTPStatusFromCode, every code
  local STATUS = {
    CANCELLED = 499, UNKNOWN = 500, INVALID_ARGUMENT = 400, DEADLINE_EXCEEDED = 504, NOT_FOUND = 404,
    ALREADY_EXISTS = 409, PERMISSION_DENIED = 403, UNAUTHENTICATED = 401, RESOURCE_EXHAUSTED = 429,
    FAILED_PRECONDITION = 400, ABORTED = 409, OUT_OF_RANGE = 400, UNIMPLEMENTED = 501, INTERNAL = 500,
    UNAVAILABLE = 503, DATA_LOSS = 500,
  }
  for code, http in pairs(STATUS) do
    it(code .. " is HTTP " .. http, function()
      assert.are.same({ http, '{"code":' .. pc.codes[code] .. ',"message":"m","details":[]}', "application/json" },
        { tc:error(pc.Error { code = code, message = "m" }) })
    end)
  end

  it("writes the details as Any with their @type", function()
    local BadRequest = pool:type("google.rpc.BadRequest")
    local err = pc.Error { code = "INVALID_ARGUMENT", message = "bad", details = {
      BadRequest { field_violations = { { field = "name", description = "empty" } } } } }
    assert.are.same({ 400, '{"code":3,"message":"bad","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest",'
      .. '"fieldViolations":[{"field":"name","description":"empty","reason":""}]}]}',
      "application/json" }, { tc:error(err) })
  end)

  it("keeps the details a server sent (details_bin of a call's error)", function()
    local Status = pool:type("google.rpc.Status")
    local ErrorInfo = pool:type("google.rpc.ErrorInfo")
    local Any = pool:type("google.protobuf.Any")
    local bin = pc.encode(Status { code = 7, message = "m", details = { Any {
      type_url = "type.googleapis.com/google.rpc.ErrorInfo", value = pc.encode(ErrorInfo { reason = "R" }) } } })
    assert.are.same({ 403, '{"code":7,"message":"denied","details":[{"@type":'
      .. '"type.googleapis.com/google.rpc.ErrorInfo","reason":"R","domain":"","metadata":{}}]}', "application/json" },
      { tc:error { code = "PERMISSION_DENIED", message = "denied", details_bin = bin } })
  end)

  it("takes a plain table with a numeric code", function()
    assert.are.same({ 503, '{"code":14,"message":"","details":[]}', "application/json" }, { tc:error { code = 14 } })
  end)
end)

describe("validate = true", function()
  local vpool = pc.pool()
  assert(vpool:load([[
    syntax = "proto3";
    package v;
    import "google/api/annotations.proto";
    import "buf/validate/validate.proto";
    message Req { string name = 1 [(buf.validate.field).string.min_len = 3]; int32 n = 2; }
    service S {
      rpc Get(Req) returns (Req) { option (google.api.http).get = "/v1/{name}"; }
      rpc Up(stream Req) returns (Req) { option (google.api.http) = { post: "/v1/up" body: "*" }; }
    }
  ]], { name = "v.proto" }))

  it("refuses a request breaking its rules with INVALID_ARGUMENT, 400 and a BadRequest detail", function()
    local vtc = pc.transcoder(vpool, { validate = true })
    local r, b, q = assert(vtc:match("GET", "/v1/ab?n=2"))
    local msg, err = vtc:request(r, b, q)
    assert.is_nil(msg)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.are.equal(400, err.http_status)
    assert.are.same({ 400, '{"code":3,"message":"validation failed: name: must be at least 3 characters '
      .. '[string.min_len]","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest",'
      .. '"fieldViolations":[{"field":"name","description":"must be at least 3 characters [string.min_len]",'
      .. '"reason":"string.min_len"}]}]}', "application/json" }, { vtc:error(err) })
    r, b, q = assert(vtc:match("GET", "/v1/abc?n=2"))
    assert.are.equal("abc", assert(vtc:request(r, b, q)).name)
  end)

  it("checks each message of a client stream, naming the line", function()
    local vtc = pc.transcoder(vpool, { validate = true })
    local r, b, q = assert(vtc:match("POST", "/v1/up"))
    local msgs, err = vtc:requests(r, b, q, '{"name":"abcd"}\n{"name":"x"}\n')
    assert.is_nil(msgs)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.truthy(err.message:find("^line 2: validation failed: name: ", 1, false), err.message)
    assert.are.equal(400, err.http_status)
  end)

  it("makes the message of each line only for a type rules can reach (requests_reader)", function()
    assert(vpool:load([[
      syntax = "proto3";
      package w;
      import "google/api/annotations.proto";
      message Free { string name = 1; }
      service F { rpc Up(stream Free) returns (Free) { option (google.api.http) = { post: "/w/up" body: "*" }; } }
    ]], { name = "w.proto" }))
    local vtc = pc.transcoder(vpool, { validate = true })
    local made, request = 0, getmetatable(vtc).__index.request
    vtc.request = function(...)
      made = made + 1
      return request(...)
    end
    local r, b, q = assert(vtc:match("POST", "/v1/up"))
    local next_bytes, err = vtc:requests_reader(r, b, q, '{"name":"abcd"}\n{"name":"x"}\n')
    assert.is_nil(next_bytes)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.truthy(err.message:find("^line 2: validation failed: name: ", 1, false), err.message)
    assert.are.equal(2, made)
    r, b, q = assert(vtc:match("POST", "/w/up"))
    next_bytes = assert(vtc:requests_reader(r, b, q, '{"name":"x"}\n{"name":""}\n'))
    assert.are.same({ "\10\1x", "" }, { next_bytes(), next_bytes() })
    assert.is_nil(next_bytes())
    assert.are.equal(2, made) -- w.proto imports no rules: read straight to bytes
  end)

  it("fails INVALID_ARGUMENT, with a Status body, when a rule fails to evaluate", function()
    local dpool = pc.pool()
    assert(dpool:load([[
      syntax = "proto3";
      package d;
      import "google/api/annotations.proto";
      import "buf/validate/validate.proto";
      message Req { int32 x = 1 [(buf.validate.field).cel = {id: "div", expression: "100 / this > 1"}]; }
      service S {
        rpc Do(Req) returns (Req) { option (google.api.http) = { post: "/do" body: "*" }; }
        rpc Up(stream Req) returns (Req) { option (google.api.http) = { post: "/up" body: "*" }; }
      }
    ]], { name = "d.proto" }))
    local vtc = pc.transcoder(dpool, { validate = true })
    local r, b, q = assert(vtc:match("POST", "/do"))
    assert.are.equal(5, assert(vtc:request(r, b, q, '{"x":5}')).x)
    local msg, err = vtc:request(r, b, q, '{"x":0}')
    assert.is_nil(msg)
    assert.are.equal(pc.Error, getmetatable(err))
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.truthy(err.message:find("^validate: "), err.message)
    local code, json = vtc:error(err)
    assert.are.equal(400, code)
    assert.truthy(json:find('^{"code":3,"message":"validate: [^"]*division by zero","details":%[%]}$'), json)
    r, b, q = assert(vtc:match("POST", "/up"))
    local msgs
    msgs, err = vtc:requests(r, b, q, '{"x":1}\n{"x":0}\n')
    assert.is_nil(msgs)
    assert.are.equal("INVALID_ARGUMENT", err.code)
    assert.truthy(err.message:find("^line 2: validate: "), err.message)
  end)

  it("is off by default", function()
    local vtc = pc.transcoder(vpool)
    local r, b, q = assert(vtc:match("GET", "/v1/ab"))
    assert.are.equal("ab", assert(vtc:request(r, b, q)).name)
  end)
end)

describe("streams", function()
  local Reply, Message = pool:type("example.v1.Reply"), pool:type("example.v1.Message")
  local HttpBody = pool:type("google.api.HttpBody")

  it("writes server-stream messages as grpc-gateway's newline-delimited {\"result\": ...}, or SSE", function()
    local route = tc:match("GET", "/v1/msg")
    assert.are.same({ "ndjson", "application/json" }, { tc:stream_kind(route, "application/json") })
    assert.are.same({ "sse", "text/event-stream" }, { tc:stream_kind(route, "text/event-stream, */*") })
    assert.are.same({ "raw", "application/octet-stream" }, { tc:stream_kind(tc:match("POST", "/v1/raw"), nil) })
    local r = Reply { msg = Message { text = "a" } }
    assert.are.equal('{"result":{"text":"a"}}\n', tc:stream_message(route, r, "ndjson"))
    assert.are.equal('data: {"text":"a"}\n\n', tc:stream_message(route, r, "sse"))
    assert.are.equal("xy", tc:stream_message(tc:match("POST", "/v1/raw"), HttpBody { data = "xy" }, "raw"))
    local err = pc.Error { code = "ABORTED", message = "gone" }
    assert.are.equal('{"error":{"code":10,"message":"gone","details":[]}}\n', tc:stream_error(err, "ndjson"))
    assert.are.equal('event: error\ndata: {"code":10,"message":"gone","details":[]}\n\n', tc:stream_error(err, "sse"))
  end)

  it("reads a client stream from newline-delimited JSON, naming the line of bad input", function()
    local route, b, q = tc:match("PATCH", "/v2/messages/p")
    local msgs = assert(tc:requests(route, b, q, '{"text": "a"}\n\n{"text": "b"}\r\n{}'))
    local texts = {}
    for i, m in ipairs(msgs) do texts[i] = m.message_id .. ":" .. m.text end
    assert.are.same({ "p:a", "p:b", "p:" }, texts)
    local m, err = tc:requests(route, b, q, '{"text": "a"}\n{"text": 2}')
    assert.are.same({ nil, "INVALID_ARGUMENT: line 2: body: $.text: string expected, got a number at offset 9" },
      { m, tostring(err) })
    -- a body without newlines is one message, its size bounded by max_body_bytes
    local t = pc.transcoder(pool, { max_body_bytes = 64 })
    m, err = t:requests(route, b, q, ('{"text": "a"}'):rep(10))
    assert.are.same({ nil, "RESOURCE_EXHAUSTED: body of 130 bytes (at most 64)" }, { m, tostring(err) })
  end)

  it("reads a client stream's lines as wire bytes with requests_reader: the same messages and failures", function()
    local route, b, q = tc:match("PATCH", "/v2/messages/p")
    local T = route.input
    local function list_of(body) -- the reader drained, or nil and its failure
      local next_bytes, err = tc:requests_reader(route, b, q, body)
      if not next_bytes then return nil, err end
      local list = {}
      for bytes in next_bytes do list[#list + 1] = bytes end
      return list
    end
    local list = assert(list_of('{"text": "a"}\n\n{"text": "b"}\r\n{}'))
    local texts = {}
    for i, bytes in ipairs(list) do
      local m = assert(pc.decode(T, bytes))
      texts[i] = m.message_id .. ":" .. m.text
    end
    assert.are.same({ "p:a", "p:b", "p:" }, texts)
    assert.are.same({ nil, "INVALID_ARGUMENT: line 2: body: $.text: string expected, got a number at offset 9" },
      { (list_of('{"text": "a"}\n{"text": 2}')), tostring(select(2, list_of('{"text": "a"}\n{"text": 2}'))) })
    -- 100,000 lines held packed, not a message each (tc:requests: 34 MB under Lua 5.4)
    collectgarbage()
    local before = collectgarbage("count")
    local next_bytes = assert(tc:requests_reader(route, b, q, ('{}\n'):rep(100000)))
    collectgarbage() -- what the reader holds, not the garbage reading it made (the collector's pace differs by build)
    assert.is_true(collectgarbage("count") - before < 8 * 1024, collectgarbage("count") - before)
    local n = 0
    for _ in next_bytes do n = n + 1 end
    assert.are.equal(100000, n)
  end)

  it("reads a client stream's lines packed with requests_reader: each message's bytes, in order", function()
    local route, b, q = tc:match("PATCH", "/v2/messages/p")
    local T = route.input
    -- lengths of one, two and three varint bytes, packed strings of 64 KiB crossed
    local sizes, lines = { 0, 1, 126, 127, 128, 300, 16383, 16384, 70000, 5 }, {}
    for i, n in ipairs(sizes) do lines[i] = '{"text":"' .. ("x"):rep(n) .. '"}' end
    for i = 1, 3000 do lines[#lines + 1] = '{"text":"' .. i .. '"}' end
    local next_bytes = assert(tc:requests_reader(route, b, q, table.concat(lines, "\n\n")))
    local got, want = {}, {}
    for bytes in next_bytes do got[#got + 1] = bytes end
    for i, n in ipairs(sizes) do want[i] = pc.encode(T { message_id = "p", text = ("x"):rep(n) }) end
    for i = 1, 3000 do want[#want + 1] = pc.encode(T { message_id = "p", text = tostring(i) }) end
    assert.are.equal(#want, #got)
    for i = 1, #want do
      if got[i] ~= want[i] then error(("message %d: %d bytes, %d expected"):format(i, #got[i], #want[i])) end
    end
    assert.is_nil(next_bytes())
    assert.are.same({ nil, "INVALID_ARGUMENT: line 2: body: $.text: string expected, got a number at offset 9" },
      { (tc:requests_reader(route, b, q, '{"text": "a"}\n{"text": 2}')), tostring(select(2,
        tc:requests_reader(route, b, q, '{"text": "a"}\n{"text": 2}'))) })
  end)

  it("holds a body of 1.3 million lines in about the bytes of their messages (requests_reader)", function()
    local epool = pc.pool()
    assert(epool:load([[
      syntax = "proto3";
      package e;
      import "google/api/annotations.proto";
      message E { string s = 1; }
      service S { rpc Up(stream E) returns (E) { option (google.api.http) = { post: "/e" body: "*" }; } }
    ]], { name = "e.proto" }))
    local etc = pc.transcoder(epool)
    local route, b, q = etc:match("POST", "/e")
    local body = ("{}\n"):rep(1300000) -- 3.9 MB of empty messages
    collectgarbage()
    local before = collectgarbage("count")
    local next_bytes = assert(etc:requests_reader(route, b, q, body))
    collectgarbage() -- what the reader holds, not the garbage reading it made
    local held = (collectgarbage("count") - before) * 1024
    -- packed: a byte per message (as a list of strings: 16 to 32 bytes per message, ~40 MB)
    assert.is_true(held < 2 * 1300000, ("%d bytes held"):format(held))
    local n = 0
    for _ in next_bytes do n = n + 1 end
    assert.are.equal(1300000, n)
  end)
end)

describe("headers", function()
  it("passes Grpc-Metadata-* and the allow-list on as metadata, and reads Grpc-Timeout", function()
    assert.are.same({ { { "x-user", "u" }, { "authorization", "Bearer t" }, { "k-bin", "\0\1" } }, 1.5 },
      { tc:metadata { { "Grpc-Metadata-X-User", "u" }, { "Authorization", "Bearer t" }, { "Cookie", "c" },
        { "Grpc-Timeout", "1500m" }, { "Grpc-Metadata-Content-Type", "x" }, { "Grpc-Metadata-Grpc-Status", "0" },
        { "Grpc-Metadata-K-Bin", "AAE=" } } })
    local t = pc.transcoder(pool, { headers = { "X-Request-Id" } })
    assert.are.same({ { { "x-request-id", "r" } } }, { t:metadata { ["X-Request-Id"] = "r", Authorization = "a" } })
    -- names in any case, whatever the first letter's
    assert.are.same({ { { "x-request-id", "r" }, { "k", "v" } } },
      { t:metadata { { "x-REQUEST-id", "r" }, { "host", "h" }, { "gRPC-METADATA-k", "v" } } })
    local md, err = tc:metadata { { "Grpc-Timeout", "1x" } }
    assert.are.same({ nil, "INVALID_ARGUMENT: bad Grpc-Timeout '1x'", 400 }, { md, tostring(err), err.http_status })
    md, err = tc:metadata { { "Grpc-Metadata-K-Bin", "@@" } }
    assert.are.same({ nil, "INVALID_ARGUMENT: header 'Grpc-Metadata-K-Bin': bad base64" }, { md, tostring(err) })
  end)

  it("refuses, 400 naming the header, metadata a call could not carry; raises on headers not of strings", function()
    local t = pc.transcoder(pool, { headers = { "authorization", "x-user" } })
    local function refused(headers, why)
      local md, err = t:metadata(headers)
      assert.is_nil(md)
      assert.are.same({ "INVALID_ARGUMENT", why, 400 }, { err.code, err.message, err.http_status })
    end
    refused({ { "Grpc-Metadata-X-A", "\195\169" } }, "header 'Grpc-Metadata-X-A': value must be printable ASCII")
    refused({ { "Grpc-Metadata-X-A", "a\r\nb: c" } }, "header 'Grpc-Metadata-X-A': value must be printable ASCII")
    refused({ { "Grpc-Metadata-X-A", "a\127" } }, "header 'Grpc-Metadata-X-A': value must be printable ASCII")
    refused({ ["X-User"] = "\0" }, "header 'X-User': value must be printable ASCII")
    refused({ { "Grpc-Metadata-X-A", string.rep("a", 70000) } },
      "header 'Grpc-Metadata-X-A': metadata: more than 65536 bytes of keys and values")
    local many = {}
    for i = 1, 40 do many[i] = { "Grpc-Metadata-K" .. i, string.rep("a", 2000) } end
    refused(many, "header 'Grpc-Metadata-K33': metadata: more than 65536 bytes of keys and values")
    refused({ { "Grpc-Timeout", "1S" }, { "grpc-timeout", "2S" } }, "Grpc-Timeout given more than once")
    refused({ ["Grpc-Timeout"] = { "1S", "2S" } }, "Grpc-Timeout given more than once")
    refused({ { "Grpc-Metadata--bin", "AA" } }, "header 'Grpc-Metadata--bin': not a gRPC metadata key")
    refused({ { "Grpc-Metadata-", "x" } }, "header 'Grpc-Metadata-': not a gRPC metadata key")
    refused({ { "Grpc-Metadata-a b", "x" } }, "header 'Grpc-Metadata-a b': not a gRPC metadata key")
    assert.are.same({ { { "a", "b c~" } } }, { t:metadata { { "Grpc-Metadata-A", "b c~" } } })
    assert.has_error(function() t:metadata { ["Grpc-Metadata-N"] = 5 } end, "bad argument #1 to 'metadata' "
      .. "(header 'Grpc-Metadata-N': string name and value expected, got string and number)")
    assert.has_error(function() t:metadata { { "Grpc-Metadata-A" } } end, "bad argument #1 to 'metadata' "
      .. "(header 'Grpc-Metadata-A': string name and value expected, got string and nil)")
    assert.has_error(function() t:metadata { { nil, "x" } } end, "bad argument #1 to 'metadata' "
      .. "(header nil: string name and value expected, got nil and string)")
  end)

  it("puts the route's timeout (timeout, timeouts) together with Grpc-Timeout, the shorter winning", function()
    local t = pc.transcoder(pool, { timeout = 5, timeouts = { ["example.v1.Messaging.Search"] = 0.25 } })
    local get = t:match("GET", "/v1/messages/1")
    local search = t:match("GET", "/v1/search")
    assert.are.same({ 5, 0.25 }, { get.timeout, search.timeout })
    assert.are.same({ 5, 1.5, 0.25, 0.25 }, { t:timeout(get), t:timeout(get, 1.5), t:timeout(search),
      t:timeout(search, 3) })
    local _, timeout = t:metadata { { "Grpc-Timeout", "100m" } }
    assert.are.equal(0.1, t:timeout(search, timeout))
    local plain = tc:match("GET", "/v1/messages/1")
    assert.are.same({ nil, 2 }, { tc:timeout(plain), tc:timeout(plain, 2) })
    assert.has_error(function() pc.transcoder(pool, { timeout = 0 }) end,
      "bad argument #2 to 'transcoder' (timeout: positive number of seconds expected, got 0)")
    assert.has_error(function() pc.transcoder(pool, { timeouts = { ["example.v1.Messaging.Nope"] = 1 } }) end,
      "bad argument #2 to 'transcoder' (timeouts['example.v1.Messaging.Nope']: no route of that method)")
    assert.has_error(function() pc.transcoder(pool, { timeouts = { ["example.v1.Messaging.Search"] = -1 } }) end,
      "bad argument #2 to 'transcoder' (timeouts['example.v1.Messaging.Search']: positive number of seconds expected, "
      .. "got -1)")
  end)

  it("writes response metadata as Grpc-Metadata-* and trailers as Grpc-Trailer-*", function()
    assert.are.same({ { "Grpc-Metadata-x-a", "1" }, { "Grpc-Metadata-k-bin", "AAE=" }, { "Grpc-Trailer-x-t", "2" } },
      tc:response_headers({ { "x-a", "1" }, { "content-type", "application/grpc" }, { "k-bin", "\0\1" } },
        { { "grpc-status", "0" }, { "x-t", "2" } }))
  end)
end)

describe("rules refused at load", function()
  local function refused(proto_rule, extra_fields)
    local p = pc.pool()
    assert(p:load([[
      syntax = "proto3";
      package r;
      import "google/api/annotations.proto";
      message Sub { string id = 1; }
      message Req { string name = 1; Sub sub = 2; repeated string tags = 3; map<string, string> m = 4; ]]
      .. (extra_fields or "") .. [[ }
      service S { rpc M(Req) returns (Req) { option (google.api.http) = { ]] .. proto_rule .. [[ }; } }
    ]], { name = "r.proto" }))
    local ok, err = pcall(pc.transcoder, p)
    assert.is_false(ok)
    return (tostring(err):gsub("^[^:\n]*:%d+: ", ""))
  end

  local cases = {
    { 'get: "/v1/{nope}"', "r.S.M: rule GET /v1/{nope}: variable 'nope': no field 'nope' in r.Req" },
    { 'get: "/v1/{sub.nope}"', "r.S.M: rule GET /v1/{sub.nope}: variable 'sub.nope': no field 'nope' in r.Sub" },
    { 'get: "/v1/{name.x}"', "r.S.M: rule GET /v1/{name.x}: variable 'name.x': r.Req.name is not a singular "
      .. "message field" },
    { 'get: "/v1/{tags}"', "r.S.M: rule GET /v1/{tags}: variable 'tags': a repeated field" },
    { 'get: "/v1/{m}"', "r.S.M: rule GET /v1/{m}: variable 'm': a map field" },
    { 'get: "/v1/{sub}"', "r.S.M: rule GET /v1/{sub}: variable 'sub': a message field (r.Sub)" },
    { 'get: "/v1/**/x"', "r.S.M: rule GET /v1/**/x: bad template: '**' must be the last segment" },
    { 'get: "/v1/{name=**}/x"', "r.S.M: rule GET /v1/{name=**}/x: bad template: '**' must be the last segment" },
    { 'get: "v1/x"', "r.S.M: rule GET v1/x: bad template: must begin with '/'" },
    { 'get: "/v1//x"', "r.S.M: rule GET /v1//x: bad template: empty segment at offset 4" },
    { 'get: "/v1/x/"', "r.S.M: rule GET /v1/x/: bad template: empty last segment" },
    { 'get: "/v1/{name"', "r.S.M: rule GET /v1/{name: bad template: unclosed '{'" },
    { 'get: "/v1/{name={sub.id}}"',
      "r.S.M: rule GET /v1/{name={sub.id}}: bad template: a variable's template must not contain other variables" },
    { 'get: "/v1/{name}/{name}"', "r.S.M: rule GET /v1/{name}/{name}: bad template: field 'name' is bound twice" },
    { 'get: "/v1/{na-me}"', "r.S.M: rule GET /v1/{na-me}: bad template: variable '{na-me}': bad field path 'na-me'" },
    { 'get: "/v1/{name=}"', "r.S.M: rule GET /v1/{name=}: bad template: variable '{name=}': empty template" },
    { 'get: "/v1/x?y"', "r.S.M: rule GET /v1/x?y: bad template: bad segment 'x?y'" },
    { 'get: "/v1/x" body: "*"', "r.S.M: rule GET /v1/x: a GET rule may not have a body ('*')" },
    { 'post: "/v1/x" body: "nope"', "r.S.M: rule POST /v1/x: body 'nope': no such top-level field in r.Req" },
    { 'post: "/v1/x" body: "sub.id"', "r.S.M: rule POST /v1/x: body 'sub.id': no such top-level field in r.Req" },
    { 'post: "/v1/{name}" body: "name"', "r.S.M: rule POST /v1/{name}: body 'name': the field is bound by the "
      .. "path too" },
    { 'get: "/v1/x" response_body: "nope"',
      "r.S.M: rule GET /v1/x: response_body 'nope': no such top-level field in r.Req" },
    { 'body: "*"', "r.S.M: rule ?: no pattern (get, put, post, delete, patch or custom)" },
    { 'custom { kind: "" path: "/x" }', "r.S.M: rule custom /x: custom pattern without a kind" },
    { 'custom { kind: "get" path: "/x" }',
      "r.S.M: rule get /x: custom kind 'get' never matches (methods are case-sensitive: GET)" },
    { 'get: "/v1/./x"', "r.S.M: rule GET /v1/./x: bad template: segment '.' never matches (a path's '.' and "
      .. "'..' are refused)" },
    { 'get: "/v1/%2e%2E"', "r.S.M: rule GET /v1/%2e%2E: bad template: segment '..' never matches (a path's '.' "
      .. "and '..' are refused)" },
    { 'get: "/v1/{name=a/../*}"', "r.S.M: rule GET /v1/{name=a/../*}: bad template: variable '{name=a/../*}': "
      .. "segment '..' never matches (a path's '.' and '..' are refused)" },
    { 'get: "' .. ("/a"):rep(64) .. '/{name}"', "r.S.M: rule GET " .. ("/a"):rep(64) .. "/{name}: "
      .. "bad template: more than 64 segments" },
    { 'get: "/v1' .. ("/*"):rep(63) .. '/{name=**}"', "r.S.M: rule GET /v1" .. ("/*"):rep(63)
      .. "/{name=**}: bad template: more than 64 segments" },
    { 'get: "' .. ("/a"):rep(1000) .. '"', "r.S.M: rule GET " .. ("/a"):rep(100) .. "...: "
      .. "bad template: more than 64 segments" },
    { 'get: "/v1/x" additional_bindings { get: "/v1/y" additional_bindings { get: "/v1/z" } }',
      "r.S.M, additional binding 1: rule GET /v1/y: additional_bindings must not nest (one level only)" },
    { 'get: "/v1/{name}" additional_bindings { get: "/v1/x" } additional_bindings { get: "/v1/{sub.id}" }',
      "r.S.M, additional binding 2: rule GET /v1/{sub.id}: the same method and template as r.S.M's rule"
      .. " GET /v1/{name} (r.proto:6:53)" },
  }
  for _, c in ipairs(cases) do
    -- (led by where r.proto sets the option: its line 6, column 53, not the rpc's 23)
    it(c[1], function() assert.are.equal((c[2]:gsub("^r%.S%.M", "r.S.M (r.proto:6:53)")), refused(c[1])) end)
  end

  it("takes a template of 64 segments, and matches a path of any length without recursing deeper", function()
    local p = pc.pool()
    assert(p:load([[
      syntax = "proto3"; package r; import "google/api/annotations.proto";
      message Req { string name = 1; }
      service S { rpc A(Req) returns (Req) { option (google.api.http).get = "/v1/{name=**}"; } }
    ]], { name = "r.proto" }))
    local long = ("/a"):rep(63) .. "/{name}"
    local t = pc.transcoder(p, { http = { rules = { { selector = "r.S.A", get = long,
      additional_bindings = { { get = ("/a"):rep(62) .. "/*/{name=**}" } } } } } })
    local r, b = t:match("GET", ("/a"):rep(63) .. "/z")
    assert.are.equal(long, r.template)
    assert.are.equal("z", b[1].value)
    r = t:match("GET", ("/a"):rep(100000) .. "/z")
    assert.are.equal(("/a"):rep(62) .. "/*/{name=**}", r.template)
  end)

  it("refuses two methods with the same method and template, naming both", function()
    local p = pc.pool()
    assert(p:load([[
      syntax = "proto3"; package r; import "google/api/annotations.proto";
      message Req { string name = 1; string id = 2; }
      service S {
        rpc A(Req) returns (Req) { option (google.api.http).get = "/v1/{name=things/*}"; }
        rpc B(Req) returns (Req) { option (google.api.http).get = "/v1/things/{id}"; }
      }
    ]], { name = "r.proto" }))
    assert.has_error(function() pc.transcoder(p) end,
      "r.S.B (r.proto:5:43): rule GET /v1/things/{id}: the same method and template as r.S.A's rule"
      .. " GET /v1/{name=things/*} (r.proto:4:43)")
    -- a rule given apart that clashes with an annotation: where the annotation is; with one given apart: no place
    assert.has_error(function() pc.transcoder(p, { http = { rules = { { selector = "r.S.B", get = "/v1/things/x" },
      { selector = "r.S.A", get = "/v1/things/x" } } } }) end,
      "http rules: rule 1: r.S.B: GET /v1/things/x: the same method and template as r.S.A's rule GET /v1/things/x")
    assert.has_error(function() pc.transcoder(p, { http = { rules = { { selector = "r.S.B",
      get = "/v1/{name=things/*}" } } } }) end, "http rules: rule 1: r.S.B: GET /v1/{name=things/*}: the same"
      .. " method and template as r.S.A's rule GET /v1/{name=things/*} (r.proto:4:43)")
    -- other HTTP methods or verbs do not conflict
    assert(pc.transcoder(p, { http = { rules = { { selector = "r.S.B", post = "/v1/things/{id}:go", body = "*" } } } }))
  end)

  it("quotes a rule's text in its errors cut at 80 bytes, control characters as '?'", function()
    local long, cut = ("s."):rep(500000) .. "\1", ("s."):rep(40) .. "..."
    assert.has_error(function() pc.transcoder(pool, { http = { rules = { { selector = long, get = "/" } } } }) end,
      "http rules: rule 1: selector '" .. cut .. "' names no method of the services")
    local rules = require "protocall.http.rules"
    local http = assert(rules.http_config { rules = { { selector = long, get = "/a/{" } } })
    assert.are.equal("http rules: rule 1: " .. cut .. ": GET /a/{: bad template: unclosed '{'",
      rules.binding_problem(http))
    local field = ("f"):rep(100) .. "\1"
    for template, why in pairs {
      ["/a/" .. field] = "bad segment '" .. ("f"):rep(80) .. "...'",
      ["/a/{" .. field .. "}"] = "variable '{" .. ("f"):rep(80) .. "...}': bad field path '" .. ("f"):rep(80) .. "...'",
      ["/a/{x}:\1"] = "bad verb ':?'",
    } do
      local rule = { selector = "example.v1.Messaging.Unbound", get = template }
      assert.has_error(function() pc.transcoder(pool, { http = { rules = { rule } } }) end,
        "http rules: rule 1: example.v1.Messaging.Unbound: GET " .. template:gsub("%c", "?") .. ": bad template: "
          .. why)
    end
    -- (a cut never splits a UTF-8 character: 79 bytes and "..." before a 2-byte one at 80)
    local accented = ("s"):rep(79) .. ("\195\169"):rep(20)
    assert.has_error(function() pc.transcoder(pool, { http = { rules = { { selector = accented, get = "/" } } } }) end,
      "http rules: rule 1: selector '" .. ("s"):rep(79) .. "...' names no method of the services")
    local kind = ("K"):rep(100)
    local custom = { selector = "example.v1.Messaging.Unbound", custom = { kind = kind, path = "/a" }, body = long }
    assert.has_error(function() pc.transcoder(pool, { http = { rules = { custom } } }) end, "http rules: rule 1: "
      .. "example.v1.Messaging.Unbound: " .. ("K"):rep(80) .. "... /a: body '" .. cut .. "': no such top-level field "
      .. "in example.v1.Message")
  end)

  it("refuses config rules naming no method, or not of HttpRule's shape", function()
    -- every error of a rule names it "rule N", counted from 1; a path (counting from 0) follows
    assert.has_error(function() pc.transcoder(pool, { http = { rules = { { selector = "x.Y.Z", get = "/" } } } }) end,
      "http rules: rule 1: selector 'x.Y.Z' names no method of the services")
    assert.has_error(function() pc.transcoder(pool, { http = { rules = { { selector = "x", gett = "/" } } } }) end,
      "http rules: rule 1: google.api.Http.rules[0].gett: no such field")
    assert.has_error(function() pc.transcoder(pool, { http = '{"rules": [{"selector": 1}]}' }) end,
      "http rules: rule 1: $.rules[0].selector: string expected, got a number at offset 24")
    local two = '{"selector": "example.v1.Messaging.Unbound", "get": "/a"}, {"selector": "x.Y.Z", "get": "/b"}'
    assert.has_error(function() pc.transcoder(pool, { http = '{"rules": [' .. two .. "]}" }) end,
      "http rules: rule 2: selector 'x.Y.Z' names no method of the services")
    assert.has_error(function() pc.transcoder(pool, { http = '{"rules": [{}, {"get": 5}]}' }) end,
      "http rules: rule 2: $.rules[1].get: string expected, got a number at offset 23")
    -- a rule that does not fit its method's types: its number, then the method and pattern
    -- (the last rule of a method wins: its number)
    local unfit = '{"rules": [{"selector": "example.v1.Messaging.Unbound", "get": "/b"},'
      .. ' {"selector": "example.v1.Messaging.Unbound", "get": "/a/{nope}"}]}'
    assert.has_error(function() pc.transcoder(pool, { http = unfit }) end, "http rules: rule 2: "
      .. "example.v1.Messaging.Unbound: GET /a/{nope}: variable 'nope': no field 'nope' in example.v1.Message")
    -- a google.api.Service's http member: its own error, not that of reading the text as google.api.Http
    assert.has_error(function() pc.transcoder(pool, { http = '{"http": {"rules": [{}, {"get": 5}]}}' }) end,
      "http rules: rule 2: $.http.rules[1].get: string expected, got a number at offset 32")
    assert.has_error(function() pc.transcoder(pool, { http = '{"http": 5}' }) end,
      "http rules: $.http: object expected, got a number at offset 9")
    -- google.api.Http's members beside a Service's http member (which would skip them): refused,
    -- in JSON at the member's value, in a Lua table too
    local both = " beside 'http': google.api.Service's rules go under 'http', google.api.Http's at the top level;"
      .. " give one shape"
    assert.has_error(function() pc.transcoder(pool, { http = '{"http": {"rules": []}, "rules": [{"selector": '
      .. '"example.v1.Messaging.Unbound", "get": "/a"}]}' }) end,
      "http rules: a top-level 'rules'" .. both .. " at offset 33")
    assert.has_error(function() pc.transcoder(pool, { http = { http = { rules = {} },
      fully_decode_reserved_expansion = true } }) end,
      "http rules: a top-level 'fully_decode_reserved_expansion'" .. both)
    assert.has_error(function() pc.transcoder(pool, { nope = 1 }) end,
      "bad argument #2 to 'transcoder' (unknown option 'nope')")
    assert.has_error(function() pc.transcoder(pool, { services = { "x.Nope" } }) end, "no service 'x.Nope' in the pool")
    -- a service of the pool that is not served: said so, not as a typo
    local served = pc.pool()
    assert(served:load('syntax = "proto3"; package t; message M {}\n'
      .. "service S { rpc Get(M) returns (M); }\nservice Other { rpc Get(M) returns (M); }\n", { name = "t.proto" }))
    assert.has_error(function() pc.transcoder(served, { services = { "t.S" }, http = { rules = {
      { selector = "t.Other.Get", get = "/o" } } } }) end,
      "http rules: rule 1: selector 't.Other.Get': t.Other is not one of the services served")
    assert.has_error(function() pc.transcoder(served, { services = { "t.S" }, http = { rules = {
      { selector = "t.S.Nope", get = "/o" } } } }) end,
      "http rules: rule 1: selector 't.S.Nope' names no method of the services")
    assert(pc.transcoder(served, { http = { rules = { { selector = "t.Other.Get", get = "/o" } } } }))
    assert.has_error(function() pc.transcoder(42) end,
      "bad argument #1 to 'transcoder' (protocall.Pool expected, got number)")
  end)

  it("raises a pc.HttpRuleError: the method, the rule, its pattern, what is wrong and where, as fields", function()
    -- (as pc.listen's rest option raises it; pc.transcoder raises its text, a string, for nginx's
    -- init_by_lua* and C hosts, which print string errors alone)
    local transcoder_raising_object = require("protocall.http.transcode").transcoder_raising_object
    local function raised(p, opts)
      local ok, err = pcall(transcoder_raising_object, p, opts)
      assert.is_false(ok)
      assert.are.equal(pc.HttpRuleError, getmetatable(err))
      assert.are.equal(err.message, tostring(err))
      local ok2, text = pcall(pc.transcoder, p, opts)
      assert.is_false(ok2)
      assert.are.equal("string", type(text))
      assert.matches(err.message, text, 1, true)
      return err
    end
    -- a rule given apart: its number (from 1), an additional binding's, the JSON path (from 0) of the member at fault
    local err = raised(pool, { http = '{"rules": [{"selector": "example.v1.Messaging.Unbound", "get": "/a",'
      .. ' "additional_bindings": [{"post": "/b"}, {"post": "/c", "body": "nope"}]}]}' })
    local problem = "body 'nope': no such top-level field in example.v1.Message"
    assert.are.same({ message = "http rules: rule 1, additional binding 2: example.v1.Messaging.Unbound: POST /c: "
      .. problem,
      problem = problem, method = "example.v1.Messaging.Unbound", pattern = "POST /c", rule = 1, additional = 2,
      path = { "rules", 0, "additional_bindings", 1, "body" } }, err)
    err = raised(pool, { http = { rules = { { selector = "example.v1.Messaging.Unbound", get = "/a" },
      { selector = "x.Y.Z", get = "/b" } } } })
    assert.are.same({ message = "http rules: rule 2: selector 'x.Y.Z' names no method of the services",
      problem = "selector 'x.Y.Z' names no method of the services", selector = "x.Y.Z", rule = 2,
      path = { "rules", 1, "selector" } }, err)
    -- rules that do not read: the message alone
    err = raised(pool, { http = '{"http": 5}' })
    assert.are.same({ message = "http rules: $.http: object expected, got a number at offset 9" }, err)
    -- an annotation: its method, and where its .proto source sets the option (its name)
    local p = pc.pool()
    assert(p:load('syntax = "proto3"; package r; import "google/api/annotations.proto";\n'
      .. "message Req { string name = 1; }\nservice S {\n  rpc M(Req) returns (Req) {\n"
      .. '    option (google.api.http) = { get: "/v1/{nope}" };\n  }\n}\n', { name = "dir/r(1).proto" }))
    problem = "variable 'nope': no field 'nope' in r.Req"
    assert.are.same({ message = "r.S.M (dir/r(1).proto:5:12): rule GET /v1/{nope}: " .. problem, problem = problem,
      method = "r.S.M", pattern = "GET /v1/{nope}", file = "dir/r(1).proto", line = 5, column = 12 }, raised(p))
    -- the same rule given apart: no source position
    err = raised(p, { http = { rules = { { selector = "r.S.M", get = "/v2/{nope}" } } } })
    assert.is_nil(err.file or err.line or err.column)
    assert.are.equal(1, err.rule)
    -- made by hand: the message after its context
    assert.are.equal("pc.listen: rest: x", tostring(pc.HttpRuleError { message = "x", context = "pc.listen: rest" }))
    assert.are.equal("x", tostring(pc.HttpRuleError { message = "x", rule = 3 }))
    assert.are.equal(3, pc.HttpRuleError({ message = "x", rule = 3 }).rule)
    assert.has_error(function() pc.HttpRuleError { rule = 3 } end,
      "bad argument #1 to 'HttpRuleError' (message: string expected, got nil)")
  end)

  it("refuses options of the wrong type or out of range, naming the option", function()
    local function rejects(opts, why)
      assert.has_error(function() pc.transcoder(pool, opts) end, "bad argument #2 to 'transcoder' (" .. why .. ")")
    end
    rejects({ max_body_bytes = "10" }, "max_body_bytes: positive integer expected, got string")
    rejects({ max_body_bytes = 0 / 0 }, "max_body_bytes: positive integer expected, got nan")
    rejects({ max_body_bytes = -1 }, "max_body_bytes: positive integer expected, got -1")
    rejects({ max_body_bytes = math.huge }, "max_body_bytes: positive integer expected, got inf")
    rejects({ max_query_bytes = "x" }, "max_query_bytes: positive integer expected, got string")
    rejects({ max_query_params = -5 }, "max_query_params: positive integer expected, got -5")
    rejects({ max_query_params = 1.5 }, "max_query_params: positive integer expected, got 1.5")
    rejects({ max_depth = "deep" }, "max_depth: integer 1..1000 expected, got string")
    rejects({ max_depth = 1001 }, "max_depth: integer 1..1000 expected, got 1001")
    rejects({ json = "x" }, "json: table of pc.to_json options expected, got string")
    rejects({ json = { bogus = 1 } }, "json: unknown option 'bogus'")
    rejects({ json = { indent = 17 } }, "json.indent: integer 0..16 expected, got 17")
    rejects({ json = { emit_defaults = 1 } }, "json.emit_defaults: boolean expected, got number")
    rejects({ headers = "authorization" }, "headers: list of strings expected, got string")
    rejects({ headers = { "x-a", 5 } }, "headers[2]: string expected, got number")
    rejects({ headers = { "x a" } }, "headers[1]: bad header name 'x a'")
    rejects({ services = "example.v1.Messaging" }, "services: list of strings expected, got string")
    rejects({ validate = 1 }, "validate: boolean expected, got number")
    local ok = pc.transcoder(pool, { max_body_bytes = 10, max_depth = 1000, json = { indent = 2, proto_names = true },
      headers = { "x-user" }, validate = false })
    assert.are.equal(10, ok.max_body_bytes)
  end)

  it("reads the rules of a descriptor set made by protoc", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/d"))
    local f = assert(io.open(dir .. "/d/s.proto", "wb"))
    f:write([[
      syntax = "proto3"; package d; import "google/api/annotations.proto";
      message Req { string name = 1; int32 n = 2; }
      service S { rpc Get(Req) returns (Req) { option (google.api.http) = { get: "/d/{name=x/*}" }; } }
    ]])
    f:close()
    local out = dir .. "/set.pb"
    local ok = os.execute("protoc --include_imports -I core/schema/protos -I " .. dir .. " -o " .. out
      .. " d/s.proto >/dev/null 2>&1")
    local fh = io.open(out, "rb")
    local set = fh and fh:read("*a")
    if fh then fh:close() end
    os.execute("rm -rf " .. dir)
    if not ok or not set then return pending("protoc is not installed") end
    local p = pc.pool()
    assert(p:load_descriptor_set(set))
    local t = pc.transcoder(p)
    assert.are.same({ 'd.S.Get name: "x/1" n: 2' }, { call(t, "GET", "/d/x/1?n=2") })
  end)

  it("serves methods without a rule as POST /pkg.Service/Method with unbound", function()
    local t = pc.transcoder(pool, { unbound = true })
    assert.are.same({ 'example.v1.Messaging.Unbound text: "u"' },
      { call(t, "POST", "/example.v1.Messaging/Unbound", '{"text": "u"}') })
    assert.are.same({ nil, "NOT_FOUND: no route for POST /example.v1.Messaging/Unbound" },
      { call(tc, "POST", "/example.v1.Messaging/Unbound", "{}") })
  end)
end)
