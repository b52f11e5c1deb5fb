-- Headless Debian chromium runs here (spec/browser.lua, which the specs of
-- pages calling protocall in a browser use): a page served from 127.0.0.1
-- runs its script and fetches from its server; a failed check leaves a
-- screenshot in the test log folder.
local browser = require "browser"
local peer = require "node_peer"

local absent = browser.missing()

describe("headless chromium", function()
  if absent then
    it("loads a page", function() peer.skip(pending, "browser specs", absent) end)
    return
  end

  local site
  setup(function() site = browser.serve("spec/web") end)
  teardown(function() browser.stop(site) end)

  it("runs a page's script and its fetch from the server of the page", function()
    browser.check(site.url .. "/smoke.html", "smoke", function(dom)
      assert.matches('<p id="script">script ran: 2,4,6</p>', dom, 1, true)
      assert.matches('<p id="fetch">fetched: served by 127.0.0.1</p>', dom, 1, true)
    end)
  end)

  it("leaves a screenshot when a check of the page fails", function()
    local path = browser.log_dir() .. "/smoke-failed.png"
    os.remove(path)
    local ok, err = pcall(browser.check, site.url .. "/smoke.html", "smoke-failed", function(dom)
      assert.matches("not in the page", dom, 1, true)
    end)
    assert.is_false(ok)
    assert.matches("\nscreenshot: " .. path, tostring(err.message or err), 1, true)
    local f = assert(io.open(path, "rb"))
    local head = f:read(8)
    f:close()
    assert.are.equal("\137PNG\r\n\26\n", head)
    os.remove(path)
  end)
end)
