-- The benches' command lines: a flag a bench does not know is refused
-- (exit 2, naming it) before anything is measured, since a misspelt one
-- (`--quik`) would otherwise measure something else than was asked.
local R = require "runtime"

local BIN = os.getenv("PROTOCALL_BIN") or "build/release/protocall"

describe("bench/startup_bench.lua", function()
  local function run(flags)
    return R.capture(BIN .. " bench/startup_bench.lua " .. flags .. " 2>&1; echo status $?")
  end
  local FLAGS = " (flags: --quick, --callgrind, --runs N)\nstatus 2\n"

  it("refuses an unknown flag and a bad --runs", function()
    assert.are.equal("startup_bench: unknown flag '--quik'" .. FLAGS, run("--callgrind --quik"))
    assert.are.equal("startup_bench: --runs needs a whole number >= 1, got '0.5'" .. FLAGS, run("--runs 0.5"))
    assert.are.equal("startup_bench: --runs needs a whole number >= 1, got nothing" .. FLAGS, run("--runs"))
  end)
end)

describe("bench/codec_bench.lua", function()
  it("refuses a --rows it does not measure, before measuring anything", function()
    assert.are.equal('codec_bench: --rows takes decode, encode, decode+read, table->encode or decode->table,'
                     .. ' not "bogus"\nstatus 2\n',
                     R.capture(BIN .. " bench/codec_bench.lua --rows bogus 2>&1; echo status $?"))
  end)
end)
