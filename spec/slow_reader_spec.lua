-- A server stream of 100,000 small messages read slowly while other calls
-- keep the connection busy: HTTP/2 flow control bounds what the stream holds
-- (its window, not the stream), and every message arrives in order
-- (README "Services", pc.grpc's stream_window).
package.path = "spec/?.lua;" .. package.path
local pc = require "protocall"
local helper = require "grpc_helper"

describe("a slow reader of 100,000 small messages", function()
  local server, t
  local WINDOW = 65535
  local sanitized = io.open("/proc/self/maps"):read("a"):find("libasan", 1, true) ~= nil

  local function rss_kib()
    for l in io.lines("/proc/self/status") do
      local v = l:match("^VmRSS:%s+(%d+)")
      if v then return tonumber(v) end
    end
  end

  setup(function()
    server = helper.spawn("grpc")
    t = pc.grpc(server.url, { stream_window = WINDOW })
  end)

  teardown(function()
    if t then t:close() end
    helper.stop(server)
  end)

  it("holds at most about its window and loses nothing", function()
    local N, SIZE = 100000, 20
    local iter, _, _, call = t:server_stream("/test.Test/StreamSized", N .. " " .. SIZE, { timeout = 120 })
    local got, most, done, others = 0, 0, false, 0
    local r0, rss_most = rss_kib(), 0
    pc.spawn(function()
      for m in iter do
        got = got + 1
        local head = "message " .. got .. " "
        if m:sub(1, #head) ~= head or #m ~= SIZE then error("message " .. got .. " is " .. m) end
        if got % 5000 == 0 then
          most = math.max(most, call:buffered())
          rss_most = math.max(rss_most, rss_kib())
          pc.sleep(0.05) -- the reader pauses; the other task's calls pump the connection
          most = math.max(most, call:buffered())
        end
      end
      done = true
    end)
    pc.spawn(function()
      while not done do
        assert.are.equal("x", t:unary("/test.Test/Echo", "x", { timeout = 10 }))
        others = others + 1
      end
    end)
    pc.run()
    assert.are.equal(N, got)
    assert.is_true(others > 0, "no other call ran while the reader paused")
    assert.is_true(most > 0, "the stream never buffered while paused: the spec measured nothing")
    -- a window's worth of messages, each held with its 5-byte gRPC prefix
    assert.is_true(most <= 4 * WINDOW, "the unread buffer grew to " .. most .. " bytes")
    -- ASan keeps freed memory in quarantine, valgrind (PC_MEMCHECK) its own
    -- shadow memory: the buffered bytes above are the bound there
    if not sanitized and not os.getenv("PC_MEMCHECK") then
      assert.is_true(rss_most - r0 < 16 * 1024, "RSS grew by " .. (rss_most - r0) .. " KiB")
    end
  end)
end)
