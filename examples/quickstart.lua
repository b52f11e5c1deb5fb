-- protocall quickstart: run with `make run` (or build/release/protocall examples/quickstart.lua).
local pc = require "protocall"

print(("protocall %s"):format(pc.VERSION))
print(("status UNAVAILABLE is code %d"):format(pc.codes.UNAVAILABLE))
