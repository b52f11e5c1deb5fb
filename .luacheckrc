-- luacheck configuration (make lint runs `luacheck lua spec bench examples`).
-- The Lua layer and everything that runs beside it parses on Lua 5.4 and
-- LuaJIT 2.1, so the standard globals are the union of both ("max"); specs
-- add busted's. Lines up to 120 columns, as the C code.
std = "max"
max_line_length = 120
codes = true

files["spec"] = { std = "+busted" }
-- nginx's lua-nginx-module gives the global `ngx`.
files["lua/protocall/resty.lua"] = { read_globals = { "ngx" } }
files["examples/nginx"] = { read_globals = { "ngx" } }
-- The demo sets the response status, which lua-nginx-module lets a handler
-- write (ngx.status = 502).
files["examples/nginx/protocall_demo.lua"] = { globals = { "ngx.status" } }
