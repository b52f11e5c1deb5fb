--- Spec helper for pages in a real browser: Debian's chromium, headless
-- (installed by .ci/install-deps), loads a page from a server on
-- 127.0.0.1, runs its scripts and gives back the DOM; a failed check leaves
-- a screenshot of the page in the test log folder. Pages and what they
-- load sit in spec/web/; M.serve serves a folder (spec/node/static_server.mjs).
--
--   local browser = require "browser"
--   local absent = browser.missing()          -- nil when chromium and node are there
--   local site = browser.serve("spec/web")    -- site.url
--   browser.check(site.url .. "/smoke.html", "smoke", function(dom) ... end)
--   browser.stop(site)
--
-- Chromium runs through node_peer.command: inside a task of pc.run the
-- other tasks (a pc.listen the page calls) go on meanwhile.
local peer = require "node_peer"

local M = {}

M.command = "chromium"

-- The flags of every run: headless, no sandbox (specs run as root), no GPU,
-- no QUIC, nothing fetched from outside this machine, a fresh profile
-- (added per run).
M.flags = {
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
}

local quote = peer.quote

local chromium_problem
--- reason = M.missing(): nil when chromium and node (for M.serve) are
-- there, else what is missing (for node_peer.skip).
function M.missing()
  if chromium_problem == nil then
    local f = io.popen("command -v " .. M.command .. " 2>/dev/null")
    local path = f:read("*l")
    f:close()
    chromium_problem = not path and (M.command .. " not found on PATH (Debian package chromium)") or false
  end
  return chromium_problem or peer.missing()
end

--- The folder where specs leave what explains a failure (screenshots):
-- env PROTOCALL_TEST_LOGS (.ci/busted sets BUILD_DIR/test-logs), else
-- build/test-logs. Made when missing.
function M.log_dir()
  local dir = os.getenv("PROTOCALL_TEST_LOGS") or "build/test-logs"
  os.execute("mkdir -p " .. quote(dir))
  return dir
end

-- Runs chromium with M.flags, a fresh profile folder, `extra` flags and
-- `url`; its standard output. opts.budget_ms (5000 by default): the
-- virtual time a page gets for its scripts and their fetches before the
-- dump (--virtual-time-budget; chromium pauses it while requests are
-- pending). opts.flags: more flags; opts.timeout: seconds of wall time.
local function run(url, extra, opts)
  opts = opts or {}
  local profile = os.tmpname()
  os.remove(profile)
  local words = { M.command }
  for _, f in ipairs(M.flags) do words[#words + 1] = f end
  words[#words + 1] = "--user-data-dir=" .. quote(profile)
  words[#words + 1] = "--virtual-time-budget=" .. (opts.budget_ms or 5000)
  for _, f in ipairs(opts.flags or {}) do words[#words + 1] = f end
  words[#words + 1] = extra
  words[#words + 1] = quote(url)
  local command = table.concat(words, " ")
  local ok, out, err, code = pcall(peer.command, command, { timeout = opts.timeout or 60 })
  os.execute("rm -rf " .. quote(profile))
  if not ok then error(out, 0) end
  if code ~= 0 then error(("%s: exit %d\n%s"):format(command, code, err), 0) end
  return out
end

--- dom = M.dump_dom(url, opts): the page's DOM as HTML once its scripts
-- ran (chromium --dump-dom); raises when chromium fails. opts as run's.
function M.dump_dom(url, opts)
  return run(url, "--dump-dom", opts)
end

--- M.screenshot(url, path, opts): a PNG of the page (800x600) at `path`.
function M.screenshot(url, path, opts)
  run(url, "--window-size=800,600 --screenshot=" .. quote(path), opts)
end

--- dom = M.check(url, name, fn, opts): fn(dom) with the page's DOM; when
-- fn raises, a screenshot of the page goes to M.log_dir()/NAME.png and the
-- error is raised again with its path.
function M.check(url, name, fn, opts)
  local dom = M.dump_dom(url, opts)
  local ok, err = pcall(fn, dom)
  if not ok then
    local path = M.log_dir() .. "/" .. name .. ".png"
    local shot, why = pcall(M.screenshot, url, path, opts)
    local note = shot and "\nscreenshot: " .. path or "\nno screenshot: " .. tostring(why)
    if type(err) == "table" and type(err.message) == "string" then -- luassert's failure: kept a failure
      err.message = err.message .. note
      error(err, 0)
    end
    error(tostring(err) .. note, 0)
  end
  return dom
end

--- site = M.serve(dir): a static server of folder `dir` on 127.0.0.1
-- (site.url, site.port); stop it with M.stop.
function M.serve(dir)
  return peer.serve("static_server.mjs", { dir })
end

M.stop = peer.stop

return M
