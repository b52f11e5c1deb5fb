-- The handlers of demo.Router (examples/route.proto: one method of each
-- call shape), as a table of
-- handler tables: what `protocall serve examples/route_services.lua` serves
-- (with health and reflection), and what examples/route_server.lua listens
-- with. Measure fails twice with UNAVAILABLE for each route name, then
-- answers, so a client's retry policy shows.
local pc = require "protocall"

local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
if not pc.type("demo.Distance") then
  assert(pc.load_file(here .. "/route.proto", { import_paths = { here } }))
end
local Distance = pc.type("demo.Distance")

local failures = {}
local services = {
  ["demo.Router"] = {
    Measure = function(route)
      local n = failures[route.name] or 0
      if n < 2 then
        failures[route.name] = n + 1
        error(pc.Error { code = "UNAVAILABLE", message = "flaky server" })
      end
      local len = 0
      for i = 2, #route.points do
        local a, b = route.points[i - 1], route.points[i]
        len = len + math.sqrt((a.x - b.x) ^ 2 + (a.y - b.y) ^ 2)
      end
      return Distance { length = len, legs = math.max(#route.points - 1, 0) }
    end,
    Walk = function(route, ctx)
      for _, p in pc.ipairs(route.points) do ctx.send(p) end
    end,
    Record = function(ctx)
      local len, legs, prev = 0, 0, nil
      for p in function() return ctx:recv() end do
        if prev then
          len = len + math.sqrt((p.x - prev.x) ^ 2 + (p.y - prev.y) ^ 2)
          legs = legs + 1
        end
        prev = p
      end
      return Distance { length = len, legs = legs }
    end,
    Follow = function(ctx)
      local prev
      for p in function() return ctx:recv() end do
        if prev then ctx.send { x = p.x - prev.x, y = p.y - prev.y } end
        prev = p
      end
    end,
  },
}

return services
