-- HTTP/JSON transcoding (pc.transcoder): the cost per byte of a request
-- body turned into the gRPC request message, for a message with a
-- 10,000-element repeated field (int32s, 16-byte strings, small messages),
-- as grpc-httpjson-transcoding (Envoy's transcoder) publishes its figure
-- (0.03 us/byte). Each case is tc:match + tc:request of
-- POST /v1/items with the body bound by "*", and by "items" (the body is
-- the array alone); the baseline is pc.from_json of the same document,
-- so the ratio is what the transcoder adds to the JSON reader. The case
-- names carry the kind: a --callgrind child runs the case of its name.
--   build/release/protocall bench/transcode_bench.lua [--quick] [--callgrind]
local H = require "bench.harness"
local pc = require "protocall"

local pool = pc.pool()
assert(pool:load([[
  syntax = "proto3";
  package bench;
  import "google/api/annotations.proto";
  message Item { string name = 1; int32 id = 2; }
  message Ints { repeated int32 items = 1; string shelf = 2; }
  message Strings { repeated string items = 1; string shelf = 2; }
  message Items { repeated Item items = 1; string shelf = 2; }
  message Get { string name = 1; int64 revision = 2; Item sub = 3; repeated string tags = 4; }
  service S {
    rpc GetOne(Get) returns (Item) { option (google.api.http) = { get: "/v1/{name=shelves/*/books/*}" }; }
    rpc PostInts(Ints) returns (Ints) {
      option (google.api.http) = { post: "/v1/{shelf}/ints" body: "*"
        additional_bindings { post: "/v2/{shelf}/ints" body: "items" } };
    }
    rpc PostStrings(Strings) returns (Strings) {
      option (google.api.http) = { post: "/v1/{shelf}/strings" body: "*"
        additional_bindings { post: "/v2/{shelf}/strings" body: "items" } };
    }
    rpc PostItems(Items) returns (Items) {
      option (google.api.http) = { post: "/v1/{shelf}/items" body: "*"
        additional_bindings { post: "/v2/{shelf}/items" body: "items" } };
    }
  }
]], { name = "bench/transcode.proto" }))
local tc = pc.transcoder(pool)

local N = 10000
local function array(f)
  local parts = {}
  for i = 1, N do parts[i] = f(i) end
  return "[" .. table.concat(parts, ",") .. "]"
end
local KINDS = {
  { "ints", "bench.Ints", array(function(i) return tostring(i * 7919 % 1000003) end) },
  { "strings", "bench.Strings", array(function(i) return string.format('"item-%010d"', i) end) },
  { "items", "bench.Items", array(function(i) return string.format('{"name":"item-%06d","id":%d}', i, i) end) },
}

local rows = {}
for _, k in ipairs(KINDS) do
  local kind, type_name, arr = k[1], k[2], k[3]
  local T = pool:type(type_name)
  local whole = '{"items":' .. arr .. "}"
  local r1, b1, q1 = tc:match("POST", "/v1/s1/" .. kind)
  local r2, b2, q2 = tc:match("POST", "/v2/s1/" .. kind)
  assert(#pc.from_json(T, whole).items == N)
  assert(#assert(tc:request(r1, b1, q1, whole)).items == N)
  assert(#assert(tc:request(r2, b2, q2, arr)).items == N)
  local res = H.run {
    title = string.format("JSON -> protobuf, %d-element repeated %s (%d bytes)", N, kind, #whole),
    baseline = { name = kind .. ": pc.from_json", callgrind_iters = 20,
      fn = function(n) for _ = 1, n do pc.from_json(T, whole) end end },
    cases = {
      { name = kind .. ': match + request, body "*"', goal = "<= 1.1x from_json",
        check = function(ns, base) return ns <= base * 1.1 end, callgrind_iters = 20,
        fn = function(n)
          for _ = 1, n do
            local r, b, q = tc:match("POST", "/v1/s1/" .. kind)
            tc:request(r, b, q, whole, "application/json")
          end
        end },
      { name = kind .. ': match + request, body "items"', goal = "<= 1.1x from_json",
        check = function(ns, base) return ns <= base * 1.1 end, callgrind_iters = 20,
        fn = function(n)
          for _ = 1, n do
            local r, b, q = tc:match("POST", "/v2/s1/" .. kind)
            tc:request(r, b, q, arr, "application/json")
          end
        end },
    },
  }
  local star = res[kind .. ': match + request, body "*"']
  if star and star.instructions then
    rows[#rows + 1] = { name = kind .. ': body "*", instructions per byte', value = star.instructions / #whole,
      unit = "instr/B" }
  end
  if star then
    rows[#rows + 1] = { name = kind .. ': body "*", us per byte', value = star.ns / 1000 / #whole, unit = "us/B",
      goal = "<= 0.01 (Envoy's 0.03)", ok = star.ns / 1000 / #whole <= 0.01, key = "transcode_us_per_byte" }
    local field = res[kind .. ': match + request, body "items"']
    rows[#rows + 1] = { name = kind .. ': body "items", us per byte', value = field.ns / 1000 / #arr, unit = "us/B",
      goal = "<= 0.01 (Envoy's 0.03)", ok = field.ns / 1000 / #arr <= 0.01, key = "transcode_us_per_byte" }
  end
end
-- A small request: the per-request cost of the mapping itself.
do
  local Get = pool:type("bench.Get")
  local target = "/v1/shelves/s1/books/b2?revision=2&sub.name=foo&tags=a&tags=b"
  local doc = '{"name":"shelves/s1/books/b2","revision":"2","sub":{"name":"foo"},"tags":["a","b"]}'
  local r, b, q = tc:match("GET", target)
  assert(pc.encode(assert(tc:request(r, b, q))) == pc.encode(pc.from_json(Get, doc)))
  H.run {
    title = "A GET with a path variable and four query parameters",
    baseline = { name = "small: pc.from_json of the same fields", fn = function(n)
      for _ = 1, n do pc.from_json(Get, doc) end
    end },
    cases = {
      { name = "small: match + request", goal = "(the mapping's cost)", fn = function(n)
        for _ = 1, n do
          local r1, b1, q1 = tc:match("GET", target)
          tc:request(r1, b1, q1)
        end
      end },
      { name = "small: match", goal = "(the router)", fn = function(n)
        for _ = 1, n do tc:match("GET", target) end
      end },
    },
  }
end

if #rows > 0 then H.report("Transcoding cost per byte (load " .. H.loadavg() .. ")", rows) end
