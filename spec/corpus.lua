--- The shared corpus of real schemas and payloads (../shared/corpus beside
-- the clone) for specs: reading its files, and the one way to react when it
-- is absent: a visible pending spec, or a failure when env CI is set (where
-- the corpus must be there).
local M = {}

--- The corpus folder, relative to the repository root (specs run there).
M.dir = "../shared/corpus"

--- The bytes of corpus file `rel` ("payloads/MANIFEST.tsv"), or nil.
function M.read(rel)
  local f = io.open(M.dir .. "/" .. rel, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

--- Inside an `it`: marks it pending because `what` cannot run without the
-- corpus, or raises when env CI is set. Pass busted's `pending` as seen
-- inside the `it` (busted keeps it in the spec file's environment):
--   it("needs the corpus", function() corpus.skip(pending, "round trip") end)
function M.skip(pending, what)
  if os.getenv("CI") then error("corpus missing at " .. M.dir .. " (required when CI is set)", 2) end
  pending("corpus not found at " .. M.dir .. ": " .. what .. " skipped")
end

return M
