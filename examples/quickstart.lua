-- protocall quickstart: run with `make run` (or build/release/protocall examples/quickstart.lua).
local pc = require "protocall"

print(("protocall %s"):format(pc.VERSION))
print(("status UNAVAILABLE is code %d"):format(pc.codes.UNAVAILABLE))

-- Messages: declare types in Lua (or load .proto files), then use them like tables.
local Point = pc.message("demo.Point", { { "x", "int32", 1 }, { "y", "int32", 2 } })
local Shape = pc.message("demo.Shape", {
  { "name", "string", 1 },
  { "corners", "demo.Point", 2, repeated = true },
  { "tags", "map<string,int64>", 3 },
})
local s = Shape { name = "triangle", corners = { { x = 0, y = 0 }, { x = 4, y = 0 } } }
table.insert(s.corners, Point { x = 0, y = 3 })
s.tags.sides = 3
print(s) --> demo.Shape{name="triangle", corners={demo.Point{}, demo.Point{x=4}, demo.Point{y=3}}, tags={["sides"]=3}}
print(("%d corners, the last at y=%d"):format(#s.corners, s.corners[3].y))
local ok, err = pcall(function() s.corners[1].x = "four" end)
print(ok, err) --> false  ...: demo.Point.x: integer expected, got string
